"""The three patch formats of a PATCH request: JSON merge patch (RFC 7386), strategic merge
patch with the merge keys of the lists mignurse touches, and JSON patch (RFC 6902).
"""

from __future__ import annotations

import copy
from typing import Any

from mignurse.sim.resources import JsonDict


class PatchError(ValueError):
    """A patch body that cannot be applied (422 Invalid / 400 BadRequest)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "conditions": ("type",),
    "taints": ("key", "effect"),
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "ports": ("containerPort",),
    "addresses": ("type",),
    "ownerReferences": ("uid",),
    "imagePullSecrets": ("name",),
}
PRIMITIVE_MERGE_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _same_item(item: Any, patch_item: JsonDict, keys: tuple[str, ...]) -> bool:
    if not isinstance(item, dict):
        return False
    primary = keys[0]
    if item.get(primary) != patch_item.get(primary):
        return False
    return all(item.get(k) == patch_item[k] for k in keys[1:] if k in patch_item)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch with the merge keys of the lists mignurse touches."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$retainKeys", "$patch") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in PRIMITIVE_MERGE_LISTS:
            merged = list(result.get(key) or [])
            merged += [v for v in value if v not in merged]
            result[key] = merged
        elif isinstance(value, dict):
            merged_value = strategic_merge_patch(result.get(key), value)
            if merged_value is None:
                result.pop(key, None)
            else:
                result[key] = merged_value
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], keys: tuple[str, ...]) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    result = [copy.deepcopy(c) for c in current]
    for item in patch:
        if not isinstance(item, dict) or keys[0] not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {keys[0]}")
        matches = [i for i, c in enumerate(result) if _same_item(c, item, keys)]
        if item.get("$patch") == "delete":
            result = [c for i, c in enumerate(result) if i not in matches]
            continue
        if matches:
            result[matches[0]] = strategic_merge_patch(result[matches[0]], item)
        else:
            result.append(strategic_merge_patch({}, item))
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"doc is missing path: {path}: missing value")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"doc is missing path: {path}: missing value") from None
        else:
            raise PatchError(f"doc is missing path: {path}: missing value")
    return cur


def _json_add(doc: Any, parts: list[str], value: Any, path: str, replace: bool) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(copy.deepcopy(value))
        else:
            try:
                idx = int(last)
            except ValueError:
                raise PatchError(f"invalid array index in {path}") from None
            if replace:
                if not 0 <= idx < len(parent):
                    raise PatchError(f"replace operation does not apply: {path}")
                parent[idx] = copy.deepcopy(value)
            else:
                if not 0 <= idx <= len(parent):
                    raise PatchError(f"add operation does not apply: {path}")
                parent.insert(idx, copy.deepcopy(value))
    else:
        raise PatchError(f"doc is missing path: {path}: missing value")
    return doc


def _json_remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            pass
    raise PatchError(f'remove operation does not apply: doc is missing path: "{path}"')


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}", 400)
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind == "add":
            doc = _json_add(doc, parts, op.get("value"), path, replace=False)
        elif kind == "replace":
            doc = _json_add(doc, parts, op.get("value"), path, replace=True)
        elif kind == "remove":
            _json_remove(doc, parts, path)
        elif kind in ("move", "copy"):
            src = op.get("from", "")
            value = copy.deepcopy(_walk(doc, _pointer(src), src))
            if kind == "move":
                _json_remove(doc, _pointer(src), src)
            doc = _json_add(doc, parts, value, path, replace=False)
        elif kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", 400)
    return doc
