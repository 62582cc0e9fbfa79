"""`journalctl --no-pager -o short-iso-precise --utc` output, parsed into entries.

One compiled regex per line and `datetime.fromisoformat` (C code) keep 200,000 lines well
under a second; nothing here raises on garbled, truncated or empty input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

from mignurse.evidence._common import ProblemLog, clip, split_lines

# `2026-11-29T03:01:02.345678+0000 host ident[pid]: message`; offset may be +0000, +00:00 or Z.
_ENTRY = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?)(Z|[+-]\d\d:?\d\d)?"
    r" (\S+) ([^\s\[:]*)(?:\[(\d{1,10})\])?:(?: |$)(.*)"
)
# A line whose timestamp reads but whose host/identifier part does not (kept, with a problem).
_STAMP_ONLY = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?)(Z|[+-]\d\d:?\d\d)? ?(.*)")
_MARKER = re.compile(r"-- (.*) --")
_BOOT_MARKER = re.compile(r"Boot ([0-9a-fA-F]+)")
_UTC_OFFSETS = frozenset({"Z", "+0000", "+00:00", "-0000", "-00:00"})


@dataclass(frozen=True, slots=True)
class JournalEntry:
    time: datetime  # tz-aware UTC
    host: str
    ident: str  # syslog identifier: kubelet, systemd, containerd, kernel, …
    pid: int | None
    message: str  # continuation lines joined with "\n"
    boot: int  # 0 = the first boot block in the file
    line: int  # 1-based line number of the entry's first line
    source: str  # the file's logical name, e.g. "journal:kubelet"


@dataclass(frozen=True, slots=True)
class JournalParse:
    source: str
    entries: tuple[JournalEntry, ...] = ()
    problems: tuple[str, ...] = ()
    boots: tuple[str, ...] = ()  # boot id per boot index; "" where the file does not say
    no_entries: bool = False  # journalctl printed "-- No entries --"
    lines: int = 0


def _parse_time(stamp: str, offset: str | None) -> datetime:
    """Raises ValueError for impossible dates (month 13); the caller turns that into a problem."""
    if offset is None:
        # short-iso-precise always prints an offset; without one, --utc is what we asked for.
        return datetime.fromisoformat(stamp).replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(stamp + offset)
    if offset in _UTC_OFFSETS:
        return parsed
    return parsed.astimezone(UTC)


def parse_journal(text: str, source: str) -> JournalParse:
    """Every entry journalctl printed, with boot index and line number; never raises."""
    problems = ProblemLog()
    entries: list[JournalEntry] = []
    append = entries.append
    continuations: dict[int, list[str]] = {}
    boots: list[str] = [""]
    boot = 0
    seen_in_boot = False
    no_entries = False
    attach_to: int | None = None  # the entry a continuation line belongs to, if any
    lines = split_lines(text)
    match_entry = _ENTRY.fullmatch
    # One shared string per host and identifier instead of one per line.
    names: dict[str, str] = {}
    intern = names.setdefault

    for number, line in enumerate(lines, start=1):
        m = match_entry(line)
        if m is not None:
            stamp, offset, host, ident, pid, message = m.groups()
            try:
                when = _parse_time(stamp, offset)
            except ValueError:
                problems.line(number, f"bad timestamp {stamp!r}")
                attach_to = None
                continue
            attach_to = len(entries)
            append(
                JournalEntry(
                    when,
                    intern(host, host),
                    intern(ident, ident),
                    int(pid) if pid else None,
                    message,
                    boot,
                    number,
                    source,
                )
            )
            seen_in_boot = True
            continue
        if not line.strip():
            continue
        if line[0] in " \t":
            # journalctl indents the later lines of a multi-line message under the first.
            if attach_to is not None:
                continuations.setdefault(attach_to, []).append(line.strip())
            else:
                problems.line(number, f"continuation line without an entry: {clip(line)!r}")
            continue
        attach_to = None
        marker = _MARKER.fullmatch(line.strip())
        if marker is not None:
            words = marker.group(1)
            boot_id = _BOOT_MARKER.fullmatch(words)
            if boot_id is not None or words == "Reboot":
                new_id = boot_id.group(1) if boot_id is not None else ""
                if seen_in_boot:
                    boot += 1
                    boots.append(new_id)
                    seen_in_boot = False
                else:
                    boots[boot] = new_id
            elif words == "No entries":
                no_entries = True
            # Other markers ("-- Journal begins at … --") carry nothing a rule needs.
            continue
        partial = _STAMP_ONLY.fullmatch(line)
        if partial is not None:
            stamp, offset, rest = partial.groups()
            try:
                when = _parse_time(stamp, offset)
            except ValueError:
                problems.line(number, f"bad timestamp {stamp!r}")
                continue
            problems.line(number, "no host and identifier after the timestamp")
            attach_to = len(entries)
            append(JournalEntry(when, "", "", None, rest, boot, number, source))
            seen_in_boot = True
            continue
        problems.line(number, f"no timestamp: {clip(line)!r}")

    for index, extra in continuations.items():
        entry = entries[index]
        entries[index] = replace(entry, message="\n".join([entry.message, *extra]))
    if not text.strip():
        problems.add("empty journal output")
    elif not entries and not no_entries:
        problems.add("no journal entries could be read")
    return JournalParse(
        source=source,
        entries=tuple(entries),
        problems=problems.result(),
        boots=tuple(boots[: boot + 1]),
        no_entries=no_entries,
        lines=len(lines),
    )


# -- systemd unit lifecycle ------------------------------------------------------------------

UNIT_STOPPING = "stopping"
UNIT_STOPPED = "stopped"
UNIT_STARTING = "starting"
UNIT_STARTED = "started"
UNIT_FAILED = "failed"
UNIT_RESTART_SCHEDULED = "restart-scheduled"

# Unit descriptions, for systemd versions that log "Stopping Kubernetes Kubelet..." alone.
KNOWN_DESCRIPTIONS: dict[str, tuple[str, ...]] = {
    "kubelet.service": ("Kubernetes Kubelet",),
    "containerd.service": ("containerd container runtime",),
}


class UnitAction(NamedTuple):
    time: datetime
    action: str  # stopping | stopped | starting | started | failed | restart-scheduled


class _UnitPatterns(NamedTuple):
    lifecycle: re.Pattern[str]
    failed_start: re.Pattern[str]
    status: re.Pattern[str]


@lru_cache(maxsize=64)
def _unit_patterns(unit: str, descriptions: tuple[str, ...]) -> _UnitPatterns:
    # "kubelet.service - Kubernetes Kubelet" (systemd ≥ 253 style), "kubelet.service", or the
    # bare description older releases print.
    names = [rf"{re.escape(unit)}(?: - .*)?"] + [re.escape(d) for d in descriptions if d]
    name = "(?:" + "|".join(names) + ")"
    return _UnitPatterns(
        lifecycle=re.compile(rf"(Stopping|Starting) {name}\.\.\.|(Stopped|Started) {name}\.?"),
        failed_start=re.compile(rf"Failed to start {name}\.?"),
        status=re.compile(
            rf"{re.escape(unit)}: (?:Main process exited, code=\w+, status=(\S+?),?"
            rf"|(Failed) with result '[^']*'\.?"
            rf"|(Scheduled) restart job, restart counter is at \d+\.?)"
        ),
    )


def _normalise_unit(unit: str) -> str:
    return unit if "." in unit else unit + ".service"


def classify_unit_message(
    message: str, unit: str = "kubelet.service", descriptions: Iterable[str] | None = None
) -> str | None:
    """The lifecycle action one systemd message reports for `unit`, or None."""
    unit = _normalise_unit(unit)
    descs = tuple(descriptions) if descriptions is not None else KNOWN_DESCRIPTIONS.get(unit, ())
    patterns = _unit_patterns(unit, descs)
    m = patterns.lifecycle.fullmatch(message)
    if m is not None:
        verb = m.group(1) or m.group(2)
        return verb.lower()
    if patterns.failed_start.fullmatch(message):
        return UNIT_FAILED
    m = patterns.status.match(message)
    if m is None:
        return None
    exit_status, failed, scheduled = m.groups()
    if scheduled:
        return UNIT_RESTART_SCHEDULED
    if failed:
        return UNIT_FAILED
    # systemd logs a clean main-process exit at debug level only; be strict anyway.
    return None if exit_status in ("0/SUCCESS", "0") else UNIT_FAILED


def systemd_unit_actions(
    entries: Iterable[JournalEntry],
    unit: str = "kubelet.service",
    descriptions: Iterable[str] | None = None,
) -> list[UnitAction]:
    """Stops, starts, failures and scheduled restarts of `unit`, as systemd logged them."""
    descs = tuple(descriptions) if descriptions is not None else None
    actions: list[UnitAction] = []
    for entry in entries:
        if entry.ident != "systemd":
            continue
        action = classify_unit_message(entry.message, unit, descs)
        if action is None:
            continue
        # "Main process exited" then "Failed with result" is one failure, not two.
        if action == UNIT_FAILED and actions and actions[-1].action == UNIT_FAILED:
            continue
        actions.append(UnitAction(entry.time, action))
    return actions


# -- NVIDIA Xid errors ------------------------------------------------------------------------

# "NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus."; old drivers drop "PCI:".
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):"
    r" *(\d{1,6})\b"
)


class XidError(NamedTuple):
    time: datetime
    pci: str  # "0000:53:00" as the driver prints it
    xid: int
    text: str  # the whole kernel message


def xid_errors(entries: Iterable[JournalEntry]) -> list[XidError]:
    """Every NVIDIA Xid the kernel reported, in file order."""
    found: list[XidError] = []
    for entry in entries:
        if "Xid" not in entry.message:
            continue
        m = _XID.search(entry.message)
        if m is not None:
            found.append(XidError(entry.time, m.group(1), int(m.group(2)), entry.message))
    return found
