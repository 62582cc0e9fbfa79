"""`cloud-init status --long --format json`, read defensively.

Since cloud-init 23.4 the command exits 2 for "done with recoverable errors" (extended_status
"degraded done"): that is not a failure; only status "error" is (domain.md §4.5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mignurse.evidence._common import ProblemLog, clip, split_lines

STATUS_DONE = "done"
STATUS_RUNNING = "running"
STATUS_ERROR = "error"
STATUS_DISABLED = "disabled"
STATUS_NOT_STARTED = "not started"
# extended_status adds "degraded done", "degraded running", "error - done", "error - running".
KNOWN_STATUSES = frozenset(
    {STATUS_DONE, STATUS_RUNNING, STATUS_ERROR, STATUS_DISABLED, STATUS_NOT_STARTED,
     "degraded done", "degraded running", "error - done", "error - running"}
)  # fmt: skip
STAGES = ("init-local", "init", "modules-config", "modules-final")

_EMPTY_RECOVERABLE: Mapping[str, tuple[str, ...]] = MappingProxyType({})


def _no_levels() -> Mapping[str, tuple[str, ...]]:
    return _EMPTY_RECOVERABLE


# The plain `cloud-init status --long` form: "status: done", "extended_status: degraded done".
_TEXT_FIELD = re.compile(
    r"(status|extended_status|boot_status_code|last_update|detail|datasource|stage): ?(.*)"
)


@dataclass(frozen=True, slots=True)
class CloudInitStatus:
    status: str = ""  # done | running | error | disabled | not started | "" (unreadable)
    extended_status: str = ""  # "degraded done", "error - done", … (23.4+); else = status
    boot_status_code: str = ""
    errors: tuple[str, ...] = ()
    recoverable_errors: Mapping[str, tuple[str, ...]] = field(default_factory=_no_levels)
    detail: str = ""
    last_update: str = ""  # as cloud-init prints it: "Thu, 28 Nov 2026 03:00:40 +0000"
    stage: str = ""  # the stage running now; "" when none
    datasource: str = ""
    stage_errors: Mapping[str, tuple[str, ...]] = field(default_factory=_no_levels)
    problems: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """cloud-init itself failed; "done" with recoverable errors (exit 2) is not a failure."""
        return self.status.startswith(STATUS_ERROR)

    @property
    def done(self) -> bool:
        """Finished without a critical error (recoverable errors allowed)."""
        return self.status in (STATUS_DONE, "degraded done")

    @property
    def degraded(self) -> bool:
        """Finished or running with recoverable errors (warnings, deprecations)."""
        return self.extended_status.startswith("degraded") or any(self.recoverable_errors.values())

    @property
    def readable(self) -> bool:
        return bool(self.status)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _messages(value: Any, where: str, problems: ProblemLog) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(_text(item) for item in value)
    problems.add(f"{where}: expected a list, got {type(value).__name__}")
    return ()


def _levels(value: Any, where: str, problems: ProblemLog) -> Mapping[str, tuple[str, ...]]:
    if value is None:
        return _EMPTY_RECOVERABLE
    if not isinstance(value, dict):
        problems.add(f"{where}: expected an object of level → messages")
        return _EMPTY_RECOVERABLE
    return MappingProxyType(
        {
            str(level): _messages(items, f"{where}.{level}", problems)
            for level, items in value.items()
        }
    )


def _load_json(text: str, problems: ProblemLog) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        problems.add(f"invalid JSON: {clip(str(exc))}")
        return None
    if not isinstance(doc, dict):
        problems.add("JSON is not an object")
        return None
    if text[:start].strip():
        problems.add(f"text before the JSON: {clip(text[:start])!r}")
    if text[end:].strip():
        problems.add(f"text after the JSON: {clip(text[end:])!r}")
    return doc


def _from_json(doc: dict[str, Any], problems: ProblemLog) -> CloudInitStatus:
    # status.json on disk nests everything under "v1"; accept it too.
    if "status" not in doc and isinstance(doc.get("v1"), dict):
        problems.add("this is /var/lib/cloud/data/status.json, not `cloud-init status` output")
        doc = doc["v1"]
    status = _text(doc.get("status")).strip()
    if not status:
        problems.add("no status field")
    elif status not in KNOWN_STATUSES:
        problems.add(f"unknown status {status!r}")
    stage_errors: dict[str, tuple[str, ...]] = {}
    for stage in STAGES:
        block = doc.get(stage)
        if isinstance(block, dict):
            errs = _messages(block.get("errors"), f"{stage}.errors", problems)
            if errs:
                stage_errors[stage] = errs
    errors = _messages(doc.get("errors"), "errors", problems)
    if not errors and stage_errors:
        errors = tuple(e for errs in stage_errors.values() for e in errs)
    return CloudInitStatus(
        status=status,
        extended_status=_text(doc.get("extended_status")).strip() or status,
        boot_status_code=_text(doc.get("boot_status_code")),
        errors=errors,
        recoverable_errors=_levels(doc.get("recoverable_errors"), "recoverable_errors", problems),
        detail=_text(doc.get("detail")),
        last_update=_text(doc.get("last_update")),
        stage=_text(doc.get("stage")),
        datasource=_text(doc.get("datasource")),
        stage_errors=MappingProxyType(stage_errors) if stage_errors else _EMPTY_RECOVERABLE,
        problems=problems.result(),
    )


def _from_text(text: str, problems: ProblemLog) -> CloudInitStatus:
    fields: dict[str, str] = {}
    for line in split_lines(text):
        m = _TEXT_FIELD.fullmatch(line.strip())
        if m is not None and m.group(1) not in fields:
            fields[m.group(1)] = m.group(2).strip()
    status = fields.get("status", "")
    if status:
        problems.add("not JSON; read the plain `cloud-init status` form")
    else:
        problems.add(f"not cloud-init status output: {clip(text)!r}")
    return CloudInitStatus(
        status=status,
        extended_status=fields.get("extended_status") or status,
        boot_status_code=fields.get("boot_status_code", ""),
        detail=fields.get("detail", ""),
        last_update=fields.get("last_update", ""),
        stage=fields.get("stage", ""),
        datasource=fields.get("datasource", ""),
        problems=problems.result(),
    )


def parse_cloud_init_status(text: str) -> CloudInitStatus:
    """What cloud-init said about its own run; problems say what could not be read."""
    problems = ProblemLog()
    if not text.strip():
        problems.add("empty cloud-init status output")
        return CloudInitStatus(problems=problems.result())
    doc = _load_json(text, problems)
    if doc is not None:
        return _from_json(doc, problems)
    return _from_text(text, problems)
