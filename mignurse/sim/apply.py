"""Server-side apply and field ownership (`metadata.managedFields`), simply but correctly.

Follows sigs.k8s.io/structured-merge-diff v4 as k8s.io/apiserver v0.32 uses it: an apply
owns the fields of its configuration; a field another manager owns with a different value is
a conflict (409) unless `force=true`, which takes it over; fields the same manager applied
before and no longer applies are removed when nobody else owns them. The first apply to an
object without managedFields gives its existing fields to `before-first-apply`. Lists merge
by their keys (`x-kubernetes-list-type: map` in CRD schemas, the strategic-merge keys for
built-in kinds), sets by value; other lists are atomic.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]
Step = tuple[str, str]  # ("f", field) | ("k", '{"key":"v"}') | ("v", '"value"') | (".", "")
Path = tuple[Step, ...]

# metadata the server owns; never part of a field set (structured-merge-diff's ignored fields)
SERVER_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
}
BEFORE_FIRST_APPLY = "before-first-apply"


@dataclass(frozen=True)
class ListShape:
    kind: str  # "map" | "set" | "atomic"
    keys: tuple[str, ...] = ()


class Shapes:
    """How lists merge: from a CRD schema, or from the built-in merge keys."""

    def __init__(
        self,
        schema: JsonDict | None,
        merge_keys: dict[str, tuple[str, ...]],
        sets: Iterable[str],
    ) -> None:
        self.schema = schema
        self.merge_keys = merge_keys
        self.sets = set(sets)

    def list_shape(self, path: Path, field: str) -> ListShape:
        if self.schema is not None:
            node = _schema_at(self.schema, path)
            kind = str((node or {}).get("x-kubernetes-list-type") or "atomic")
            if kind == "map":
                return ListShape("map", tuple(node.get("x-kubernetes-list-map-keys") or ()))  # type: ignore[union-attr]
            return ListShape(kind)
        if field in self.merge_keys:
            return ListShape("map", self.merge_keys[field])
        if field in self.sets:
            return ListShape("set")
        return ListShape("atomic")


def _schema_at(schema: JsonDict, path: Path) -> JsonDict | None:
    node: Any = schema
    for kind, value in path:
        if not isinstance(node, dict):
            return None
        if kind == "f":
            props = node.get("properties") or {}
            extra = node.get("additionalProperties")
            node = (
                props.get(value) if value in props else extra if isinstance(extra, dict) else None
            )
        elif kind in ("k", "v"):
            node = node.get("items")
    return node if isinstance(node, dict) else None


def _item_key(item: Any, keys: tuple[str, ...]) -> str:
    if not isinstance(item, dict):
        return json.dumps(item, sort_keys=True)
    return json.dumps(
        {k: item.get(k) for k in keys if k in item}, separators=(",", ":"), sort_keys=True
    )


def field_set(obj: Any, shapes: Shapes, path: Path = ()) -> set[Path]:
    """The leaf paths of a configuration or object."""
    out: set[Path] = set()
    if isinstance(obj, dict):
        if not obj and path:
            out.add(path)
        for key, value in obj.items():
            if not path and key in ("apiVersion", "kind", "status"):
                continue
            if path == (("f", "metadata"),) and key in SERVER_METADATA:
                continue
            out |= field_set(value, shapes, (*path, ("f", key)))
        return out
    if isinstance(obj, list):
        field = path[-1][1] if path and path[-1][0] == "f" else ""
        shape = shapes.list_shape(path, field)
        if shape.kind == "map" and shape.keys:
            for item in obj:
                item_path = (*path, ("k", _item_key(item, shape.keys)))
                out.add((*item_path, (".", "")))
                out |= field_set(item, shapes, item_path)
            return out
        if shape.kind == "set":
            for item in obj:
                out.add((*path, ("v", json.dumps(item, sort_keys=True))))
            return out
    out.add(path)
    return out


def value_at(obj: Any, path: Path, shapes: Shapes) -> tuple[bool, Any]:
    cur = obj
    walked: Path = ()
    for kind, value in path:
        if kind == ".":
            return True, cur
        if kind == "f":
            if not isinstance(cur, dict) or value not in cur:
                return False, None
            cur = cur[value]
        elif kind == "k":
            if not isinstance(cur, list):
                return False, None
            field = walked[-1][1] if walked else ""
            keys = shapes.list_shape(walked, field).keys
            match = [i for i in cur if _item_key(i, keys) == value]
            if not match:
                return False, None
            cur = match[0]
        else:
            if not isinstance(cur, list):
                return False, None
            item = json.loads(value)
            if item not in cur:
                return False, None
            cur = item
        walked = (*walked, (kind, value))
    return True, cur


def remove_path(obj: Any, path: Path, shapes: Shapes) -> None:
    if not path:
        return
    parent_path = path[:-1]
    last = path[-1]
    if last[0] == ".":
        # the list item itself: drop it from its list
        remove_path(obj, parent_path, shapes)
        return
    found, parent = value_at(obj, parent_path, shapes) if parent_path else (True, obj)
    if not found:
        return
    if last[0] == "f" and isinstance(parent, dict):
        parent.pop(last[1], None)
    elif last[0] == "k" and isinstance(parent, list):
        field = parent_path[-1][1] if parent_path else ""
        keys = shapes.list_shape(parent_path, field).keys
        parent[:] = [i for i in parent if _item_key(i, keys) != last[1]]
    elif last[0] == "v" and isinstance(parent, list):
        item = json.loads(last[1])
        parent[:] = [i for i in parent if i != item]


def merge_config(live: Any, config: Any, shapes: Shapes, path: Path = ()) -> Any:
    """The applied configuration laid over the live object."""
    if isinstance(config, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge_config(live.get(key), value, shapes, (*path, ("f", key)))
        return out
    if isinstance(config, list) and isinstance(live, list):
        field = path[-1][1] if path and path[-1][0] == "f" else ""
        shape = shapes.list_shape(path, field)
        if shape.kind == "map" and shape.keys:
            result = [copy.deepcopy(i) for i in live]
            for item in config:
                key = _item_key(item, shape.keys)
                idx = next(
                    (n for n, i in enumerate(result) if _item_key(i, shape.keys) == key), None
                )
                item_path = (*path, ("k", key))
                if idx is None:
                    result.append(copy.deepcopy(item))
                else:
                    result[idx] = merge_config(result[idx], item, shapes, item_path)
            return result
        if shape.kind == "set":
            return list(live) + [copy.deepcopy(i) for i in config if i not in live]
    return copy.deepcopy(config)


# --------------------------------------------------------------------------- managedFields


def encode(paths: Iterable[Path]) -> JsonDict:
    """FieldsV1: {"f:spec": {"f:weight": {}}}."""
    root: JsonDict = {}
    for path in sorted(paths):
        node = root
        for kind, value in path:
            key = "." if kind == "." else f"{kind}:{value}"
            node = node.setdefault(key, {})
    return root


def decode(fields: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    if not fields and prefix:
        out.add(prefix)
    for key, value in fields.items():
        if key == ".":
            out.add((*prefix, (".", "")))
            continue
        kind, _, name = key.partition(":")
        out |= decode(value, (*prefix, (kind, name)))
    return out


@dataclass
class Manager:
    manager: str
    operation: str
    api_version: str
    time: str
    fields: set[Path]
    subresource: str = ""

    def entry(self) -> JsonDict:
        out: JsonDict = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def describe(self) -> str:
        """How a conflict names the manager (apimachinery managedfields printManager)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            return f"{text} using {self.api_version} at {self.time}"
        return text


def managers_of(obj: JsonDict) -> list[Manager]:
    out = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict):
            continue
        out.append(
            Manager(
                str(entry.get("manager", "")),
                str(entry.get("operation", "Update")),
                str(entry.get("apiVersion", "")),
                str(entry.get("time", "")),
                decode(entry.get("fieldsV1") or {}),
                str(entry.get("subresource", "")),
            )
        )
    return out


def path_text(path: Path) -> str:
    """fieldpath.Path.String(): `.spec.weight`, `.spec.taints[key="a",effect="b"]`."""
    out = ""
    for kind, value in path:
        if kind == "f":
            out += "." + value
        elif kind == "k":
            pairs = json.loads(value)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in pairs.items()) + "]"
        elif kind == "v":
            out += f"[={value}]"
    return out


@dataclass
class Conflict:
    manager: Manager
    path: Path


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if len(self.conflicts) == 1:
            c = self.conflicts[0]
            who = c.manager.describe()
            return f"Apply failed with 1 conflict: conflict with {who}: {path_text(c.path)}"
        by_manager: dict[str, list[str]] = {}
        for c in self.conflicts:
            by_manager.setdefault(c.manager.describe(), []).append(path_text(c.path))
        lines = []
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines += [f"- {p}" for p in by_manager[name]]
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[JsonDict]:
        return [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {c.manager.describe()}",
                "field": path_text(c.path),
            }
            for c in self.conflicts
        ]


def _strip(obj: JsonDict, status_separate: bool) -> JsonDict:
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if status_separate:
        out.pop("status", None)
    return out


def server_side_apply(
    live: JsonDict | None,
    config: JsonDict,
    *,
    manager: str,
    force: bool,
    api_version: str,
    now: str,
    shapes: Shapes,
    status_separate: bool,
) -> JsonDict:
    """The object after applying `config` as `manager` (raises ApplyConflict)."""
    applied = field_set(_strip(config, status_separate), shapes)
    if live is None:
        result = copy.deepcopy(_strip(config, False))
        result.setdefault("metadata", {})["managedFields"] = [
            Manager(manager, "Apply", api_version, now, applied).entry()
        ]
        return result
    managers = managers_of(live)
    if not managers:
        existing = field_set(_strip(live, status_separate), shapes)
        if existing:
            managers = [Manager(BEFORE_FIRST_APPLY, "Update", api_version, now, existing)]
    mine = next((m for m in managers if m.manager == manager and m.operation == "Apply"), None)
    others = [m for m in managers if m is not mine]
    conflicts = []
    for other in others:
        for path in sorted(applied & other.fields):
            if path[-1][0] == ".":
                continue
            _, current = value_at(live, path, shapes)
            _, wanted = value_at(config, path, shapes)
            if current != wanted:
                conflicts.append(Conflict(other, path))
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for c in conflicts:
        c.manager.fields.discard(c.path)
    result = merge_config(_strip(live, False), _strip(config, status_separate), shapes)
    owned_by_others: set[Path] = set().union(*(m.fields for m in others)) if others else set()
    for path in sorted((mine.fields if mine else set()) - applied, key=len, reverse=True):
        if path not in owned_by_others:
            remove_path(result, path, shapes)
    entry = Manager(manager, "Apply", api_version, now, applied)
    kept = [m for m in others if m.fields]
    result.setdefault("metadata", {})["managedFields"] = [m.entry() for m in [*kept, entry]]
    return result


def record_update(
    before: JsonDict,
    after: JsonDict,
    *,
    manager: str,
    api_version: str,
    now: str,
    shapes: Shapes,
    status_separate: bool,
    subresource: str = "",
) -> None:
    """A non-apply write takes the fields it changed (only on objects already tracked)."""
    managers = managers_of(before)
    if not managers:
        return
    old = field_set(_strip(before, status_separate and not subresource), shapes)
    new = field_set(_strip(after, status_separate and not subresource), shapes)
    changed = {p for p in new if value_at(before, p, shapes) != value_at(after, p, shapes)}
    removed = old - new
    for m in managers:
        m.fields -= changed | removed
    entry = next(
        (
            m
            for m in managers
            if m.manager == manager and m.operation == "Update" and m.subresource == subresource
        ),
        None,
    )
    if entry is None and changed:
        entry = Manager(manager, "Update", api_version, now, set(), subresource)
        managers.append(entry)
    if entry is not None:
        entry.fields |= changed
        entry.time = now
    after.setdefault("metadata", {})["managedFields"] = [m.entry() for m in managers if m.fields]
