"""Label and field selectors as kube-apiserver parses and matches them, and the selectable
fields of an object (`extract_fields`), which the store extracts once per write so that
lists and watches match without decoding the object again.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from mignurse.sim.resources import JsonDict, ResourceType


class SelectorError(ValueError):
    """A label or field selector the real API server would refuse with 400."""


_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present  # "!"


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _check_key(key: str, raw: str) -> str:
    if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f'unable to parse requirement: invalid label key "{key}" in "{raw}"')
    return key


def _check_value(value: str, raw: str) -> str:
    if not _LABEL_VALUE.match(value) or len(value) > 63:
        raise SelectorError(
            f'unable to parse requirement: invalid label value: "{value}" in "{raw}"'
        )
    return value


_SET_RE = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text:
        return []
    reqs = []
    for term in _split_top_level(text):
        m = _SET_RE.match(term)
        if m:
            values = tuple(
                _check_value(v.strip(), term) for v in m.group("values").split(",") if v.strip()
            )
            reqs.append(Requirement(_check_key(m.group("key"), term), m.group("op"), values))
            continue
        if term.startswith("!"):
            reqs.append(Requirement(_check_key(term[1:].strip(), term), "!"))
            continue
        for op, norm in (("==", "="), ("!=", "!="), ("=", "=")):
            if op in term:
                key, _, value = term.partition(op)
                reqs.append(
                    Requirement(
                        _check_key(key.strip(), term), norm, (_check_value(value.strip(), term),)
                    )
                )
                break
        else:
            reqs.append(Requirement(_check_key(term, term), "exists"))
    return reqs


Fields = tuple[str, ...]  # values in ResourceType.field_names order


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    index: int
    negate: bool
    value: str

    def matches(self, fields: Fields) -> bool:
        return (fields[self.index] == self.value) != self.negate


def parse_field_selector(text: str | None, rtype: ResourceType) -> list[FieldRequirement]:
    if not text:
        return []
    allowed = rtype.field_names
    reqs = []
    for term in _split_top_level(text):
        for op in ("==", "!=", "="):
            if op in term:
                name, _, value = term.partition(op)
                name = name.strip()
                if name not in allowed:
                    raise SelectorError(f"field label not supported: {name}")
                reqs.append(FieldRequirement(name, allowed.index(name), op == "!=", value.strip()))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
    return reqs


def _dig(obj: JsonDict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def extract_fields(rtype: ResourceType, obj: JsonDict) -> Fields:
    """Selectable field values; interned, since 100,000 events repeat the same few strings."""
    meta = obj.get("metadata", {})
    values = [meta.get("name", ""), meta.get("namespace", "")]
    for path in rtype.fields:
        value = _dig(obj, "source.component" if path == "source" else path)
        if path == "spec.unschedulable" and not value:
            value = "false"
        values.append(value)
    return tuple(sys.intern(v) for v in values)


@dataclass(frozen=True)
class Selection:
    """A parsed list/watch request: namespace, label and field requirements."""

    namespace: str | None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def filtered(self) -> bool:
        return bool(self.labels or self.fields)

    def matches(self, labels: dict[str, str], fields: Fields) -> bool:
        if self.namespace and fields[1] != self.namespace:
            return False
        return all(r.matches(labels) for r in self.labels) and all(
            f.matches(fields) for f in self.fields
        )
