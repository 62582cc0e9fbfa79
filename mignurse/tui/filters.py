"""The `/` filter of the node and fleet tables, like k9s: a regex, `!` to invert, `-l` labels.

    gpu-inf            rows whose name (or pool, in the fleet view) matches the regex
    !ip-10-0-3         rows that do not match
    -l nvidia.com/mig.config=all-1g.10gb,karpenter.sh/capacity-type!=spot
    -l !karpenter.sh/nodepool       the label is absent
    -l topology.kubernetes.io/zone  the label is present

Pure and testable; `parse` raises FilterError with the one line to show.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


class FilterError(ValueError):
    """The filter text cannot be used; str() says why in one line."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "exists", "!exists"
    value: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "=":
            return labels.get(self.key) == self.value
        return labels.get(self.key) != self.value


@dataclass(frozen=True)
class RowFilter:
    text: str
    pattern: re.Pattern[str] | None = None
    invert: bool = False
    labels: tuple[Requirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str] | None = None) -> bool:
        if self.labels:
            held = labels or {}
            return all(r.matches(held) for r in self.labels)
        if self.pattern is None:
            return True
        found = self.pattern.search(name) is not None
        return found != self.invert

    @property
    def needs_labels(self) -> bool:
        return bool(self.labels)


_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?")


def parse(text: str) -> RowFilter | None:
    """None for an empty filter (show everything)."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("-l"):
        selector = text[2:].strip()
        if not selector:
            raise FilterError(
                "-l needs a label selector, e.g. -l nvidia.com/mig.config=all-1g.10gb"
            )
        return RowFilter(text=text, labels=tuple(_requirement(p) for p in selector.split(",")))
    invert = text.startswith("!")
    body = text[1:] if invert else text
    if not body:
        raise FilterError("! needs a pattern after it, e.g. !ip-10-0-3")
    try:
        pattern = re.compile(body, re.IGNORECASE)
    except re.error as exc:
        raise FilterError(f"not a regular expression: {exc}") from None
    return RowFilter(text=text, pattern=pattern, invert=invert)


def _requirement(part: str) -> Requirement:
    part = part.strip()
    for op in ("!=", "==", "="):
        if op in part:
            key, value = (s.strip() for s in part.split(op, 1))
            _check_key(key)
            return Requirement(key, "!=" if op == "!=" else "=", value)
    if part.startswith("!"):
        _check_key(part[1:].strip())
        return Requirement(part[1:].strip(), "!exists")
    _check_key(part)
    return Requirement(part, "exists")


def _check_key(key: str) -> None:
    if not _KEY.fullmatch(key):
        raise FilterError(f"{key!r} is not a label key")
