"""What cloud-init said about its own run, from whichever of its answers a node gave.

Shapes (canonical/cloud-init cloudinit/cmd/status.py and cmd/main.py `status_wrapper`):

- `cloud-init status --long --format json` (22.4+): one JSON object; `extended_status`,
  `recoverable_errors` and the per-stage blocks since 23.4;
- `cloud-init status --long`: 22.2.2 (AL2023) prints `status:`, `time:` and `detail:` with the
  detail on the next lines; 23.1 adds `boot_status_code:` and `last_update:`; 23.4
  `extended_status:`, `errors:` and `recoverable_errors:` (`\t- ` items); 24.1 puts the
  detail on the `detail:` line;
- `/run/cloud-init/status.json`: `{"v1": {"datasource", "stage", "<stage>": {"errors",
  "start", "finished", "recoverable_errors" (23.4+)}}}`; `result.json`: `{"v1":
  {"datasource", "errors"}}`, written when modules-final ends.

cloud-init before 22.4 has no `--format`: `status --format json` is an argparse usage error
(exit 2). Since 23.4 the command exits 2 for "done with recoverable errors" (extended_status
"degraded done"): that is not a failure; only status "error" is. Since 24.2 the stage
`start`/`finished` are seconds since boot, so `last_update` reads "Thu, 01 Jan 1970 …".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from mignurse.evidence._common import ProblemLog, clip, split_lines

STATUS_DONE = "done"
STATUS_RUNNING = "running"
STATUS_ERROR = "error"
STATUS_DISABLED = "disabled"
STATUS_NOT_STARTED = "not started"
STATUS_NOT_RUN = "not run"  # what releases before 24.1 call "not started"
# extended_status adds "degraded done", "degraded running", "error - done", "error - running".
KNOWN_STATUSES = frozenset(
    {STATUS_DONE, STATUS_RUNNING, STATUS_ERROR, STATUS_DISABLED, STATUS_NOT_STARTED,
     STATUS_NOT_RUN, "degraded done", "degraded running", "error - done", "error - running"}
)  # fmt: skip
STAGES = ("init-local", "init", "modules-init", "modules-config", "modules-final")

FORM_JSON = "status-json"  # cloud-init status --format json
FORM_TEXT = "status-text"  # cloud-init status [--long]
FORM_FILES = "status-files"  # /run/cloud-init/status.json and result.json

_EMPTY_RECOVERABLE: Mapping[str, tuple[str, ...]] = MappingProxyType({})
# Stage times below this are seconds since boot (24.2+), not since the epoch.
_EPOCH_FLOOR = 10**9


def _no_levels() -> Mapping[str, tuple[str, ...]]:
    return _EMPTY_RECOVERABLE


# The plain `cloud-init status --long` form, one `key: value` per line at column 0.
_TEXT_KEYS = ("status", "extended_status", "boot_status_code", "last_update", "time", "detail",
              "errors", "recoverable_errors")  # fmt: skip
_TEXT_FIELD = re.compile(rf"({'|'.join(_TEXT_KEYS)}):(?: (.*))?")
_TEXT_ITEM = re.compile(r"\s*- (.*)")
_LEVEL = re.compile(r"([A-Z][A-Z_]*):")
_JSON_START = re.compile(r"^[ \t\ufeff]*\{", re.MULTILINE)
_USAGE_ERROR = "unrecognized arguments"


@dataclass(frozen=True, slots=True)
class CloudInitStatus:
    status: str = ""  # done | running | error | disabled | not started | not run | ""
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
    form: str = ""  # FORM_*: which answer this was read from

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


def _merge_levels(blocks: list[Mapping[str, tuple[str, ...]]]) -> Mapping[str, tuple[str, ...]]:
    merged: dict[str, tuple[str, ...]] = {}
    for block in blocks:
        for level, items in block.items():
            merged[level] = merged.get(level, ()) + items
    return MappingProxyType(merged) if merged else _EMPTY_RECOVERABLE


def _load_json(text: str, problems: ProblemLog) -> dict[str, Any] | None:
    """The JSON object starting at the first line that opens one, or None."""
    found = _JSON_START.search(text)
    if found is None:
        return None
    start = text.index("{", found.start())
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


def _datasource_name(description: str) -> str:
    """ "DataSourceEc2Local [seed=…]" → "ec2local", as cloud-init's get_datasource does."""
    first = description.partition(" ")[0]
    return first.lower().replace("datasource", "")


def _from_json(doc: dict[str, Any], problems: ProblemLog) -> CloudInitStatus:
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
        form=FORM_JSON,
    )


def _from_text(text: str, problems: ProblemLog) -> CloudInitStatus:
    fields: dict[str, str] = {}
    detail: list[str] = []
    errors: list[str] = []
    recoverable: dict[str, list[str]] = {}
    section = ""  # the multi-line key the next lines belong to
    level = ""
    odd: list[tuple[int, str]] = []  # reported only when the rest reads as status output
    for number, line in enumerate(split_lines(text), start=1):
        m = _TEXT_FIELD.fullmatch(line.rstrip())
        if m is not None and m.group(1) not in fields:
            key, value = m.group(1), (m.group(2) or "").strip()
            fields[key] = value
            section, level = key, ""
            if key == "detail" and value:
                detail.append(value)
            continue
        if not line.strip() or (not section and set(line.strip()) == {"."}):
            continue  # `--wait` prints dots before the status
        item = _TEXT_ITEM.fullmatch(line)
        if section == "errors" and item is not None:
            errors.append(item.group(1))
        elif section == "recoverable_errors" and item is not None and level:
            recoverable[level].append(item.group(1))
        elif section == "recoverable_errors" and _LEVEL.fullmatch(line.strip()):
            level = line.strip()[:-1]
            recoverable.setdefault(level, [])
        elif section == "detail":
            detail.append(line.strip())
        else:
            odd.append((number, f"unrecognised: {clip(line)!r}"))
    status = fields.get("status", "")
    if status:
        for number, problem in odd:
            problems.line(number, problem)
    if not status:
        if _USAGE_ERROR in text:
            problems.add(
                "this cloud-init has no `status --format json` (before 22.4): "
                "`cloud-init status --long` answers"
            )
        else:
            problems.add(f"not cloud-init status output: {clip(text)!r}")
    elif status not in KNOWN_STATUSES:
        problems.add(f"unknown status {status!r}")
    detail_text = "\n".join(detail)
    if not errors and status == STATUS_ERROR and "errors" not in fields:
        # Before 23.4 the long form lists the errors as the detail, one per line.
        errors = list(detail)
    levels = {k: tuple(v) for k, v in recoverable.items()}
    return CloudInitStatus(
        status=status,
        extended_status=fields.get("extended_status") or status,
        boot_status_code=fields.get("boot_status_code", ""),
        errors=tuple(errors),
        recoverable_errors=MappingProxyType(levels) if levels else _EMPTY_RECOVERABLE,
        detail=detail_text,
        last_update=fields.get("last_update") or fields.get("time", ""),
        stage=detail_text.removeprefix("Running in stage: ")
        if detail_text.startswith("Running in stage: ")
        else "",
        datasource=_datasource_name(detail_text) if detail_text.startswith("DataSource") else "",
        problems=problems.result(),
        form=FORM_TEXT,
    )


def parse_cloud_init_status(text: str) -> CloudInitStatus:
    """`cloud-init status [--long] [--format json]` of any release, or a status.json or
    result.json on its own; problems say what could not be read."""
    problems = ProblemLog()
    if not text.strip():
        problems.add("empty cloud-init status output")
        return CloudInitStatus(problems=problems.result())
    first = next(line.strip() for line in split_lines(text) if line.strip())
    if _TEXT_FIELD.match(first) or first.startswith("usage:") or set(first) == {"."}:
        return _from_text(text, problems)
    doc = _load_json(text, problems)
    if doc is not None:
        if "status" not in doc and isinstance(doc.get("v1"), dict):
            # A bare status.json or result.json: read it the way `cloud-init status` would.
            is_result = "stage" not in doc["v1"] and "errors" in doc["v1"]
            if is_result:
                return _from_files(None, doc, problems)
            return _from_files(doc, None, problems, result_known=False)
        return _from_json(doc, problems)
    if problems:
        return CloudInitStatus(problems=problems.result())
    return _from_text(text, problems)


def parse_cloud_init_files(status_json: str | None, result_json: str | None) -> CloudInitStatus:
    """`/run/cloud-init/status.json` and `result.json` as `cloud-init status` reads them:
    running while status.json exists without result.json; error when any stage logged
    errors; degraded with recoverable errors. None = the file is not there."""
    problems = ProblemLog()
    status_doc = _file_doc(status_json, "status.json", problems)
    result_doc = _file_doc(result_json, "result.json", problems)
    if status_json is None and result_json is None:
        problems.add("neither status.json nor result.json")
    return _from_files(status_doc, result_doc, problems)


def _file_doc(text: str | None, name: str, problems: ProblemLog) -> dict[str, Any] | None:
    if text is None:
        return None
    if not text.strip():
        problems.add(f"{name} is empty")
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        problems.add(f"{name} is not JSON: {clip(str(exc))}")
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("v1"), dict):
        problems.add(f"{name} has no v1 object")
        return None
    return doc


def _stage_time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if value == value and 0 <= value < 1e12 else 0.0  # NaN, far future


def _from_files(
    status_doc: dict[str, Any] | None,
    result_doc: dict[str, Any] | None,
    problems: ProblemLog,
    *,
    result_known: bool = True,
) -> CloudInitStatus:
    v1: dict[str, Any] = status_doc["v1"] if status_doc is not None else {}
    result: dict[str, Any] = result_doc["v1"] if result_doc is not None else {}
    stage_errors: dict[str, tuple[str, ...]] = {}
    recoverable: list[Mapping[str, tuple[str, ...]]] = []
    errors: list[str] = []
    latest = 0.0
    unfinished = False
    for key, block in sorted(v1.items()):
        if not isinstance(block, dict):
            continue
        errs = _messages(block.get("errors"), f"{key}.errors", problems)
        if errs:
            stage_errors[key] = errs
            errors.extend(errs)
        recoverable.append(
            _levels(block.get("recoverable_errors"), f"{key}.recoverable_errors", problems)
        )
        start, finished = _stage_time(block.get("start")), _stage_time(block.get("finished"))
        unfinished = unfinished or bool(start and not finished)
        latest = max(latest, start, finished)
    if not v1:
        errors = list(_messages(result.get("errors"), "errors", problems))
    stage = _text(v1.get("stage"))
    description = _text(v1.get("datasource") or result.get("datasource"))
    if (status_doc is not None and result_known and result_doc is None) or stage or unfinished:
        running = STATUS_RUNNING
    elif latest or result_doc is not None:
        running = STATUS_DONE
    else:
        running = STATUS_NOT_STARTED if status_doc is not None or result_doc is not None else ""
    levels = _merge_levels(recoverable)
    if errors and running:
        status, extended = STATUS_ERROR, f"error - {running}"
    elif any(levels.values()) and running in (STATUS_DONE, STATUS_RUNNING):
        status, extended = running, f"degraded {running}"
    else:
        status, extended = running, running
    last_update = ""
    if latest >= _EPOCH_FLOOR:
        last_update = datetime.fromtimestamp(latest, UTC).strftime("%a, %d %b %Y %H:%M:%S %z")
    return CloudInitStatus(
        status=status,
        extended_status=extended,
        errors=tuple(errors),
        recoverable_errors=levels,
        detail=description or (f"Running in stage: {stage}" if stage else ""),
        last_update=last_update,
        stage=stage,
        datasource=_datasource_name(description),
        stage_errors=MappingProxyType(stage_errors) if stage_errors else _EMPTY_RECOVERABLE,
        problems=problems.result(),
        form=FORM_FILES,
    )
