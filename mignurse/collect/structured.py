"""Secrets in JSON documents, found by their structure rather than their layout.

Text rules see `"name": "HF_TOKEN",` and `"value": …` as two lines once a document is indented;
a walk over the parsed document does not care. It masks:
- `k8s-env`: the `value` of a `{name, value}` entry whose name is secret (`secretnames`);
- `secret-arg`: in `args`/`command` lists, the item after a secret flag (`--hf-token X`), the
  part after `=` (`--token=X`), and `login … -p X`;
- `k8s-secret-data`: every value of a Secret's `data` and `stringData`;
- `secret-field`: any string under a secret-named key (ConfigMap data, IMDS and STS credential
  documents, `auths`) or in a list under one (`"apiKeys": [...]`), and the passwords of
  cloud-init's `chpasswd` list;
- JSON held in a string (annotations such as `kubectl.kubernetes.io/last-applied-configuration`)
  is parsed and walked the same way.
A file on disk keeps its layout: each masked string is replaced where it stands, and only when
that cannot be done exactly is the document written out again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from mignurse.collect.secretnames import MARKER, is_secret_name
from mignurse.untrusted import json_value

RULES = ("k8s-env", "secret-arg", "k8s-secret-data", "secret-field")
JSON_MAX_BYTES = 64 * 2**20  # larger files get the text rules only
MAX_DEPTH = 200  # deeper than any real document; beyond it the text rules still apply
MAX_IN_PLACE = 16  # more distinct secrets than this: write the document out again

_PATH = re.compile(r"/[\w.@+-]+(?:/[\w.@+-]*)*")
_REFERENCE = re.compile(r"\$\(\w+\)|\$\{?\w+\}?")  # $(HF_TOKEN): Kubernetes env expansion
_BORING = frozenset({"", "true", "false", "null", "none", "nil", "yes", "no"})
_ENV_KEYS = frozenset({"name", "value", "valueFrom"})
_CHPASSWD_ITEM = re.compile(r"(?m)^(?P<head>[ \t]*[A-Za-z_][A-Za-z0-9_.-]{0,31}:)(?P<pw>\S+)$")
_NOT_A_PASSWORD = frozenset({"R", "RANDOM"})


def _boring(value: str) -> bool:
    """Not a secret whatever its key: empty, a boolean, a path, a reference to a variable."""
    return (
        value.strip().lower() in _BORING
        or MARKER in value
        or _PATH.fullmatch(value) is not None
        or _REFERENCE.fullmatch(value) is not None
    )


class _Walk:
    def __init__(self, check: Callable[[], None]) -> None:
        self.check = check
        self.counts: dict[str, int] = {}
        self.replacements: dict[str, str] = {}  # old string value → new one
        self.steps = 0

    def mask(self, value: str, rule: str) -> str:
        self.counts[rule] = self.counts.get(rule, 0) + 1
        self.replacements[value] = MARKER
        return MARKER

    def walk(self, value: Any, depth: int = 0) -> Any:
        self.steps += 1
        if self.steps % 4096 == 0:
            self.check()
        if depth > MAX_DEPTH:
            return value
        if isinstance(value, dict):
            return self.mapping(value, depth)
        if isinstance(value, list):
            return [self.walk(item, depth + 1) for item in value]
        return value

    def mapping(self, obj: dict[str, Any], depth: int) -> dict[str, Any]:
        secret_kind = obj.get("kind") == "Secret"
        env_name = obj.get("name") if _ENV_KEYS.issuperset(obj) else None
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if isinstance(value, str):
                out[key] = self.string(str(key), value, env_name)
            elif secret_kind and key in ("data", "stringData") and isinstance(value, dict):
                out[key] = {k: self.secret_data(v) for k, v in value.items()}
            elif key in ("args", "command") and isinstance(value, list):
                out[key] = self.arguments(value, depth)
            elif key == "annotations" and isinstance(value, dict):
                out[key] = {
                    k: self.embedded(v, depth) if isinstance(v, str) else v
                    for k, v in value.items()
                }
            elif key == "chpasswd" and isinstance(value, dict):
                out[key] = self.chpasswd(value, depth)
            elif isinstance(value, list) and is_secret_name(str(key)):
                out[key] = [
                    self.string(str(key), item, None) if isinstance(item, str) else item
                    for item in self.walk(value, depth + 1)
                ]
            else:
                out[key] = self.walk(value, depth + 1)
        return out

    def secret_data(self, value: Any) -> Any:
        if isinstance(value, str) and value and MARKER not in value:
            return self.mask(value, "k8s-secret-data")
        return value

    def string(self, key: str, value: str, env_name: Any) -> str:
        if env_name is not None and key == "value":
            if isinstance(env_name, str) and is_secret_name(env_name) and not _boring(value):
                return self.mask(value, "k8s-env")
            return value
        # a key with spaces in it is prose ("Failed to get token"), not a name
        named = key != "name" and " " not in key.strip() and is_secret_name(key)
        if named and not _boring(value):
            return self.mask(value, "secret-field")
        return value

    def arguments(self, items: list[Any], depth: int) -> list[Any]:
        out = list(items)
        login = "login" in out
        i = 0
        while i < len(out):
            item = out[i]
            if isinstance(item, str) and item.startswith("-"):
                flag, eq, value = item.partition("=")
                if is_secret_name(flag) or (login and flag in ("-p", "--password")):
                    if eq and not _boring(value):
                        out[i] = f"{flag}={MARKER}"
                        self.replacements[item] = out[i]
                        self.counts["secret-arg"] = self.counts.get("secret-arg", 0) + 1
                    elif not eq and i + 1 < len(out):
                        after = out[i + 1]
                        flag_next = not isinstance(after, str) or after.startswith("-")
                        if not flag_next and not _boring(after) and not after.isdigit():
                            out[i + 1] = self.mask(after, "secret-arg")
                            i += 1
            elif not isinstance(item, str):
                out[i] = self.walk(item, depth + 1)
            i += 1
        return out

    def embedded(self, value: str, depth: int) -> str:
        """A string holding JSON (kubectl's last-applied-configuration): walked, written back."""
        if not value.lstrip().startswith(("{", "[")) or len(value) > JSON_MAX_BYTES:
            return value
        try:
            document = json_value(value)
        except ValueError:
            return value
        inner = _Walk(self.check)
        masked = inner.walk(document, depth + 1)
        if not inner.replacements:
            return value
        for rule, n in inner.counts.items():
            self.counts[rule] = self.counts.get(rule, 0) + n
        new = json.dumps(masked, separators=(",", ":")) + ("\n" if value.endswith("\n") else "")
        self.replacements[value] = new
        return new

    def chpasswd(self, value: dict[str, Any], depth: int) -> dict[str, Any]:
        """cloud-config chpasswd as JSON: `list` is "user:password" lines or items
        (canonical/cloud-init@24.4 cloudinit/config/schemas/schema-cloud-config-v1.json)."""
        out = dict(value)
        listed = value.get("list")
        if isinstance(listed, str):
            out["list"] = self.passwords(listed)
        elif isinstance(listed, list):
            out["list"] = [self.passwords(x) if isinstance(x, str) else x for x in listed]
        for key in value:
            if key != "list":
                out[key] = self.walk(value[key], depth + 1)
        return out

    def passwords(self, lines: str) -> str:
        def one(m: re.Match[str]) -> str:
            if m["pw"] in _NOT_A_PASSWORD or MARKER in m["pw"]:
                return m[0]
            self.counts["chpasswd-list"] = self.counts.get("chpasswd-list", 0) + 1
            return m["head"] + MARKER

        new = _CHPASSWD_ITEM.sub(one, lines)
        if new != lines:
            self.replacements[lines] = new
        return new


def mask_document(
    document: Any, check: Callable[[], None] = lambda: None
) -> tuple[Any, dict[str, int], dict[str, str]]:
    """The document with its secrets masked, the count per rule, and old → new for every
    string it changed."""
    walk = _Walk(check)
    try:
        masked = walk.walk(document)
    except RecursionError:
        return document, {}, {}
    return masked, walk.counts, walk.replacements


def looks_like_json(name: str, data: bytes) -> bool:
    """One JSON object or array (not JSON lines, not a log): worth parsing."""
    if len(data) > JSON_MAX_BYTES:
        return False
    head = data[:64].lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    tail = data[-64:].rstrip(b" \t\r\n")[-1:]
    return (head, tail) in ((b"{", b"}"), (b"[", b"]"))


def mask_json_bytes(
    data: bytes, check: Callable[[], None] = lambda: None
) -> tuple[bytes | None, dict[str, int]]:
    """A JSON file with its secrets masked in place (None: nothing to mask, or not JSON)."""
    document = _parse(data)
    if document is None:
        return None, {}
    masked, counts, replacements = mask_document(document, check)
    if not replacements:
        return None, {}
    text = data.decode("utf-8", "surrogateescape")
    if len(replacements) <= MAX_IN_PLACE:
        for old, new in replacements.items():
            for old_form, new_form in _encodings(old, new):
                text = text.replace(old_form, new_form)
        rewritten = text.encode("utf-8", "surrogateescape")
        again = _parse(rewritten)
        if again is not None and not mask_document(again, check)[2]:
            return rewritten, counts
    return _dump_like(masked, data), counts


def _parse(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:  # integers beyond 64 bits, which orjson refuses
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _encodings(old: str, new: str) -> list[tuple[str, str]]:
    """How a JSON writer may have spelled the two strings: ASCII escapes or not, Go's HTML
    escapes of < > & (encoding/json's default), an escaped slash."""
    forms = []
    for ascii_only in (True, False):
        a, b = json.dumps(old, ensure_ascii=ascii_only), json.dumps(new, ensure_ascii=ascii_only)
        forms.append((a, b))
        go = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
        forms.append((a.translate(go), b.translate(go)))
        forms.append((a.replace("/", "\\/"), b.replace("/", "\\/")))
    return list(dict.fromkeys(forms))


def _dump_like(document: Any, original: bytes) -> bytes:
    """The document written out again, indented as the original was (roughly)."""
    indent = None
    for line in original.split(b"\n", 8)[1:8]:
        stripped = line.lstrip(b" ")
        if stripped and len(stripped) < len(line):
            indent = len(line) - len(stripped)
            break
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    return (text + ("\n" if original.endswith(b"\n") else "")).encode("utf-8", "surrogateescape")
