"""journalctl output in any of its text and JSON formats, syslog files and dmesg, as entries.

The format is detected per file from a sample of its lines, then every line is read with one
compiled regex and a C-coded time conversion, so 200,000 lines stay well under a second.
Shapes (systemd/systemd-stable@v219 and @v252 src/shared/logs-show.c, src/journal/journalctl.c;
util-linux/util-linux@v2.37.4 sys-utils/dmesg.c), by how a line starts:

- `short-iso`, `short-iso-precise`, rsyslog RFC 3339: `2026-11-29T03:01:02[.345678]+0000 host
  ident[pid]: `, the offset given (none: UTC);
- `short`, `short-precise`, rsyslog traditional (/var/log/messages): `Nov 29 03:01:02[.345678]
  host ident[pid]: `, no year (see `reference`);
- `short-full`: `Sun 2026-11-29 03:01:02 UTC host ident[pid]: `, UTC, GMT or a numeric zone;
- `short-unix`: `1795921262.345678 host …`; `short-monotonic`, `short-delta`: `[  123.456789]
  host …`, seconds since boot (short-delta adds ` <    0.000123 >`, or 16 blanks on a boot's
  first line: v255 `output_timestamp_monotonic`);
- each of them with `--no-hostname` (`OUTPUT_NO_HOSTNAME`): no host, the identifier straight
  after the time;
- `json`, `json-pretty`, `json-sse`, `json-seq`: `{"__REALTIME_TIMESTAMP": "…", …}`;
- `dmesg` (also `-x`, `-r`): `[  123.456789] NVRM: …`, seconds since boot; `dmesg -T`:
  `[Sun Nov 29 03:01:02 2026] NVRM: …`; `dmesg --time-format iso`: `2026-11-29T03:01:02,345678
  +00:00 NVRM: …`.

Times without a zone are read as UTC: EKS node images run on UTC. Times since boot have no
wall clock: they are counted from 1970-01-01 and the parse says so (`since_boot`).
Nothing here raises on garbled, truncated or empty input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, NamedTuple

from mignurse.evidence._common import ProblemLog, clip, split_lines

FORMAT_ISO = "short-iso"  # also short-iso-precise and rsyslog's RFC 3339 file format
FORMAT_SYSLOG = "short"  # also short-precise and rsyslog's traditional /var/log/messages
FORMAT_FULL = "short-full"
FORMAT_UNIX = "short-unix"
FORMAT_MONOTONIC = "short-monotonic"  # also short-delta
FORMAT_JSON = "json"  # also json-pretty, json-sse, json-seq
FORMAT_DMESG = "dmesg"
FORMAT_DMESG_CTIME = "dmesg-ctime"
FORMAT_DMESG_ISO = "dmesg-iso"
SINCE_BOOT_FORMATS = frozenset({FORMAT_MONOTONIC, FORMAT_DMESG})

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Detection reads this many candidate lines; a few odd ones among them do not decide.
_SAMPLE_LINES = 200
# (a host never ends in `:`: with --no-hostname, `kernel:` or `systemd[1]:` stands there)
_HOST_IDENT = r" (\S*[^\s:]) ([^\s\[:]*)(?:\[(\d{1,10})\])?:(?: |$)(.*)"
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_WEEKDAY = r"(?:Sun|Mon|Tue|Wed|Thu|Fri|Sat)"
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
        start=1,
    )
}
_ISO_STAMP = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?)(Z|[+-]\d\d:?\d\d)?"
_SYSLOG_STAMP = rf"({_MONTH} [ \d]\d \d\d:\d\d:\d\d)(?:\.(\d{{1,9}}))?"
_FULL_STAMP = (
    rf"{_WEEKDAY} (\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{{1,6}})?)"
    # (journalctl always writes the zone: one read is never given back to be a host)
    r"(?: (UTC|GMT|UCT|[A-Z]{2,5}|[+-]\d\d(?::?\d\d)?))?+"
)
_UNIX_STAMP = r"(\d{1,12})\.(\d{6})"
_MONO_STAMP = r"\[ *(\d{1,12})\.(\d{6})(?: <[^>]*>| {16})?\]"

# `2026-11-29T03:01:02.345678+0000 host ident[pid]: message`; offset may be +0000, +00:00 or Z.
_ENTRY = re.compile(_ISO_STAMP + _HOST_IDENT)
# A line whose timestamp reads but whose host/identifier part does not (kept, with a problem).
_STAMP_ONLY = re.compile(_ISO_STAMP + r" ?(.*)")
# `journalctl --no-hostname`: the identifier comes straight after the timestamp.
_NO_HOST = re.compile(r"([^\s\[:]+)(?:\[(\d{1,10})\])?: (.*)")
_MARKER = re.compile(r"-- (.*) --")
_BOOT_MARKER = re.compile(r"Boot ([0-9a-fA-F]+)")
_UTC_OFFSETS = frozenset({"Z", "+0000", "+00:00", "-0000", "-00:00"})
_UTC_ZONES = frozenset({"UTC", "GMT", "UCT", "Z"})
_NUMERIC_ZONE = re.compile(r"([+-])(\d\d):?(\d\d)?")


@dataclass(frozen=True, slots=True)
class JournalEntry:
    time: datetime  # tz-aware UTC (from 1970-01-01 when the source counts since boot)
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
    format: str = ""  # FORMAT_*: what the file was read as; "" when nothing was recognised
    since_boot: bool = False  # times are seconds since boot (dmesg, short-monotonic)


def _parse_time(stamp: str, offset: str | None) -> datetime:
    """Raises ValueError for impossible dates (month 13); the caller turns that into a problem."""
    if offset is None:
        # short-iso-precise always prints an offset; without one, --utc is what we asked for.
        return datetime.fromisoformat(stamp).replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(stamp + offset)
    if offset in _UTC_OFFSETS:
        return parsed
    return parsed.astimezone(UTC)


def _since_boot(seconds: str, fraction: str | None) -> datetime:
    return EPOCH + timedelta(seconds=int(seconds), microseconds=int(fraction or 0))


def _unix_time(seconds: str, fraction: str | None) -> datetime:
    return EPOCH + timedelta(seconds=int(seconds), microseconds=int(fraction or 0))


def _syslog_clock(reference: datetime) -> Callable[[str, str | None], datetime]:
    """`Nov 29 03:01:02` → the latest year that puts it at most a day after `reference`."""
    try:
        limit = reference.astimezone(UTC) + timedelta(days=1)
    except (OverflowError, ValueError):  # a reference at the edge of datetime's range
        limit = datetime.max.replace(tzinfo=UTC)
    years: dict[str, int] = {}  # "Nov 29" → year, for days other than the limit's own

    def to_time(stamp: str, fraction: str | None) -> datetime:
        month = _MONTHS[stamp[:3]]
        day = int(stamp[4:6])
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        clock = (int(stamp[7:9]), int(stamp[10:12]), int(stamp[13:15]), micro)
        year = years.get(stamp[:6])
        if year is not None:
            return datetime(year, month, day, *clock, tzinfo=UTC)
        datetime(2000, month, day)  # raises for a day no year has (Nov 31)
        year = limit.year
        for _ in range(9):  # Feb 29 may sit up to eight years back
            try:
                when = datetime(year, month, day, *clock, tzinfo=UTC)
            except ValueError:
                year -= 1
                continue
            if when <= limit:
                if (month, day) != (limit.month, limit.day):
                    years[stamp[:6]] = year
                return when
            year -= 1
        raise ValueError(f"no year fits {stamp}")

    return to_time


class _Zones:
    """short-full prints a zone name: UTC and numeric ones convert, others are noted once."""

    def __init__(self, problems: ProblemLog) -> None:
        self.problems = problems
        self.unknown: set[str] = set()

    def to_time(self, stamp: str, zone: str | None) -> datetime:
        parsed = datetime.fromisoformat(stamp)
        if zone is None or zone in _UTC_ZONES:
            return parsed.replace(tzinfo=UTC)
        numeric = _NUMERIC_ZONE.fullmatch(zone)
        if numeric is not None:
            sign, hours, minutes = numeric.groups()
            offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
            tz = timezone(-offset if sign == "-" else offset)
            return parsed.replace(tzinfo=tz).astimezone(UTC)
        if zone not in self.unknown:
            self.unknown.add(zone)
            self.problems.add(f"time zone {zone!r} has no known offset: its times are read as UTC")
        return parsed.replace(tzinfo=UTC)


def _dmesg_ctime(stamp: str, _unused: str | None) -> datetime:
    # "Sun Nov 29 03:01:02 2026": %a %b %e %H:%M:%S %Y, local time (UTC on EKS nodes).
    words = stamp.split()
    hour, minute, second = (int(part) for part in words[3].split(":"))
    return datetime(
        int(words[4]), _MONTHS[words[1]], int(words[2]), hour, minute, second, tzinfo=UTC
    )


class _TextFormat(NamedTuple):
    name: str
    entry: re.Pattern[str]  # groups: stamp, stamp extra, host, ident, pid, message
    stamp_only: re.Pattern[str] | None  # groups: stamp, stamp extra, rest
    kernel: bool  # lines carry no host or identifier: the kernel ring buffer


def _kernel_format(name: str, stamp: str) -> _TextFormat:
    # dmesg -x prefixes "kern  :warn  : "; dmesg -r prefixes "<4>".
    prefix = r"(?:<\d{1,3}>)?(?:[a-z]{2,8} *:[a-z]{3,6} *: )?"
    return _TextFormat(name, re.compile(prefix + stamp + r"()()()(?: (.*))?"), None, True)


def _host_format(name: str, stamp: str) -> _TextFormat:
    """A journalctl format whose stamp is followed by `host ident[pid]: message`."""
    return _TextFormat(name, re.compile(stamp + _HOST_IDENT), re.compile(stamp + r" ?(.*)"), False)


_TEXT_FORMATS = (
    _TextFormat(FORMAT_ISO, _ENTRY, _STAMP_ONLY, False),
    _host_format(FORMAT_SYSLOG, _SYSLOG_STAMP),
    _host_format(FORMAT_FULL, _FULL_STAMP),
    _host_format(FORMAT_UNIX, _UNIX_STAMP),
    _host_format(FORMAT_MONOTONIC, _MONO_STAMP),
    _kernel_format(FORMAT_DMESG, _MONO_STAMP),
    _kernel_format(
        FORMAT_DMESG_CTIME,
        rf"\[({_WEEKDAY} {_MONTH} [ \d]\d \d\d:\d\d:\d\d \d{{4}})()(?: <[^>]*>)?\]",
    ),
    _kernel_format(FORMAT_DMESG_ISO, r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{1,9})([+-]\d\d:\d\d)"),
)
_BY_NAME = {f.name: f for f in _TEXT_FORMATS}


def _is_json_start(line: str) -> bool:
    stripped = line.lstrip("\ufeff\x1e ")
    return stripped.startswith("{") or stripped.startswith("data: {")


def _detect(lines: list[str]) -> str:
    """The format most of the first lines are in; "" when none fits any line."""
    sample: list[str] = []
    for line in lines:
        if not line.strip() or line[0] in " \t" or _MARKER.fullmatch(line.strip()):
            continue
        if not sample and _is_json_start(line):
            return FORMAT_JSON
        sample.append(line)
        if len(sample) >= _SAMPLE_LINES:
            break
    best, best_score = "", 0
    scores: dict[str, int] = {}
    for fmt in _TEXT_FORMATS:
        hosts: dict[str, int] = {}
        score = 0
        for line in sample:
            m = fmt.entry.fullmatch(line)
            if m is not None:
                score += 2
                if not fmt.kernel:
                    hosts[m.group(3)] = hosts.get(m.group(3), 0) + 1
            elif fmt.stamp_only is not None and fmt.stamp_only.fullmatch(line):
                score += 1
        if fmt.name == FORMAT_MONOTONIC:
            # journalctl names one host on every line; kernel text after dmesg's "[ 1.2] "
            # only sometimes looks like "word ident:", with a different "host" each time.
            score = 2 * max(hosts.values(), default=0)
        scores[fmt.name] = score
        if score > best_score:
            best, best_score = fmt.name, score
    if best == FORMAT_DMESG and (
        2 * scores[FORMAT_MONOTONIC] >= best_score or 5 * _no_host_idents(sample) >= 4 * len(sample)
    ):
        return FORMAT_MONOTONIC
    return best


# `journalctl -o short-monotonic --no-hostname`: the identifier right after the stamp, the
# kernel's as `kernel:` (systemd-stable v255 src/shared/logs-show.c output_short, where
# OUTPUT_NO_HOSTNAME drops only the host), which dmesg never prints; dmesg shows an
# `ident[pid]:` only for the few programs that log to /dev/kmsg (systemd[1] at boot)
_MONO_NO_HOST = re.compile(r"\[ *\d+\.\d+\] (?:kernel|[^\s\[:]+\[\d{1,10}\]): ")


def _no_host_idents(sample: list[str]) -> int:
    """How many lines read as short-monotonic with no host name."""
    return sum(1 for line in sample if _MONO_NO_HOST.match(line))


def parse_journal(text: str, source: str, reference: datetime | None = None) -> JournalParse:
    """Every entry the file holds, with boot index and line number; never raises.

    `reference` places year-less times (`short`, `short-precise`, syslog files): each entry
    gets the latest year that puts it no more than a day after `reference`, which defaults
    to now. Times without a zone are read as UTC.
    """
    lines = split_lines(text)
    detected = _detect(lines)
    if detected == FORMAT_JSON:
        return _parse_json(text, source, len(lines))
    problems = ProblemLog()
    fmt = _BY_NAME.get(detected, _TEXT_FORMATS[0])
    to_time: Callable[[str, str | None], datetime]
    if fmt.name == FORMAT_SYSLOG:
        to_time = _syslog_clock(reference if reference is not None else datetime.now(UTC))
    elif fmt.name == FORMAT_FULL:
        to_time = _Zones(problems).to_time
    elif fmt.name == FORMAT_UNIX:
        to_time = _unix_time
    elif fmt.name in SINCE_BOOT_FORMATS:
        to_time = _since_boot
    elif fmt.name == FORMAT_DMESG_CTIME:
        to_time = _dmesg_ctime
    else:
        to_time = _parse_time
    parsed = _parse_text(lines, source, fmt, to_time, problems)
    if not text.strip():
        problems.add("empty journal output")
    elif not parsed.entries and not parsed.no_entries:
        problems.add("no journal entries could be read")
    if detected in SINCE_BOOT_FORMATS and parsed.entries:
        problems.add(f"{detected} times are seconds since boot: dated from 1970-01-01")
    return replace(
        parsed,
        problems=problems.result(),
        format=detected,
        since_boot=detected in SINCE_BOOT_FORMATS,
    )


class _Boots:
    """The boots a journal shows, in order, and the one its entries belong to now. A new boot
    begins (a marker line, a new `_BOOT_ID`) only once the current one has an entry; before
    that, the current one just learns its id."""

    def __init__(self) -> None:
        self.ids: list[str] = [""]
        self.index = 0
        self.seen = False  # the current boot has an entry

    def begin(self, boot_id: str) -> None:
        if self.seen:
            self.index += 1
            self.ids.append(boot_id)
            self.seen = False
        else:
            self.ids[self.index] = boot_id

    def result(self) -> tuple[str, ...]:
        return tuple(self.ids[: self.index + 1])


def _parse_text(
    lines: list[str],
    source: str,
    fmt: _TextFormat,
    to_time: Callable[[str, str | None], datetime],
    problems: ProblemLog,
) -> JournalParse:
    """Entries of a text format, one regex match per line: indented lines continue the entry
    before them, `-- … --` lines mark boots, and a line with a time but no `host ident:` is
    kept with what it has (`_stamp_only_entry`)."""
    entries: list[JournalEntry] = []
    append = entries.append
    continuations: dict[int, list[str]] = {}
    boots = _Boots()
    no_entries = False
    attach_to: int | None = None  # the entry a continuation line belongs to, if any
    match_entry = fmt.entry.fullmatch
    default_ident = "kernel" if fmt.kernel else ""
    # One shared string per host and identifier instead of one per line.
    names: dict[str, str] = {}
    intern = names.setdefault

    for number, line in enumerate(lines, start=1):
        m = match_entry(line)
        if m is not None:
            stamp, extra, host, ident, pid, message = m.groups()
            try:
                when = to_time(stamp, extra)
            except (ValueError, OverflowError):
                problems.line(number, f"bad timestamp {stamp!r}")
                attach_to = None
                continue
            attach_to = len(entries)
            append(
                JournalEntry(
                    when,
                    intern(host, host),
                    intern(ident, ident) or default_ident,
                    int(pid) if pid else None,
                    message or "",
                    boots.index,
                    number,
                    source,
                )
            )
            boots.seen = True
            continue
        if not line.strip():
            continue
        if line[0] in " \t":
            # journalctl and dmesg indent the later lines of a multi-line message.
            if attach_to is not None:
                continuations.setdefault(attach_to, []).append(line.strip())
            else:
                problems.line(number, f"continuation line without an entry: {clip(line)!r}")
            continue
        attach_to = None
        marker = _MARKER.fullmatch(line.strip())
        if marker is not None:
            no_entries = _marker(marker.group(1), boots) or no_entries
            continue
        entry = _stamp_only_entry(fmt, line, number, source, boots.index, to_time, problems)
        if entry is not None:
            attach_to = len(entries)
            append(entry)
            boots.seen = True

    _join_continuations(entries, continuations)
    return JournalParse(
        source=source,
        entries=tuple(entries),
        boots=boots.result(),
        no_entries=no_entries,
        lines=len(lines),
    )


def _marker(words: str, boots: _Boots) -> bool:
    """A `-- words --` line: a boot begins, or (True) journalctl says it has no entries."""
    boot_id = _BOOT_MARKER.fullmatch(words)
    if boot_id is not None or words == "Reboot":
        # systemd 219 prints "-- Reboot --"; systemd ≥ 247 "-- Boot <id> --".
        boots.begin(boot_id.group(1) if boot_id is not None else "")
        return False
    # Other markers ("-- Journal begins at … --") carry nothing a rule needs.
    return words == "No entries"


def _stamp_only_entry(
    fmt: _TextFormat,
    line: str,
    number: int,
    source: str,
    boot: int,
    to_time: Callable[[str, str | None], datetime],
    problems: ProblemLog,
) -> JournalEntry | None:
    """A line with the format's time but not its `host ident[pid]: ` (`ident: message`, or
    text alone), as an entry with what it has; None, with the problem noted, without a time."""
    partial = fmt.stamp_only.fullmatch(line) if fmt.stamp_only is not None else None
    if partial is None:
        problems.line(number, f"no timestamp: {clip(line)!r}")
        return None
    stamp, extra, rest = partial.groups()
    try:
        when = to_time(stamp, extra)
    except (ValueError, OverflowError):
        problems.line(number, f"bad timestamp {stamp!r}")
        return None
    bare = _NO_HOST.fullmatch(rest)
    if bare is None:
        problems.line(number, "no host and identifier after the timestamp")
        return JournalEntry(when, "", "", None, rest, boot, number, source)
    ident, pid, message = bare.groups()
    return JournalEntry(when, "", ident, int(pid) if pid else None, message, boot, number, source)


def _join_continuations(entries: list[JournalEntry], continuations: dict[int, list[str]]) -> None:
    """Append each entry's continuation lines to its message, one per line."""
    for index, extra_lines in continuations.items():
        entry = entries[index]
        entries[index] = replace(entry, message="\n".join([entry.message, *extra_lines]))


# -- journalctl -o json / json-pretty / json-sse / json-seq -----------------------------------

# journalctl writes a field longer than this as null unless --all (logs-show.c JSON_THRESHOLD).
JSON_FIELD_LIMIT = 4096


def _json_text(value: Any) -> str | None:
    """A journal field's value: a string, a byte array (non-UTF-8 data), or null (too long).
    A field logged more than once is a list of such values: the last one counts, as in `short`."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if value and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256
                         for b in value):  # fmt: skip
            return bytes(value).decode("utf-8", "replace")
        for item in reversed(value):
            if not isinstance(item, list):
                return _json_text(item)
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def _json_time(doc: dict[str, Any]) -> datetime | None:
    # `short` shows the sender's own time when it has one; so do we.
    for key in ("_SOURCE_REALTIME_TIMESTAMP", "__REALTIME_TIMESTAMP"):
        raw = _json_text(doc.get(key))
        if raw is not None and raw.strip().isdigit() and len(raw.strip()) <= 18:
            try:
                return EPOCH + timedelta(microseconds=int(raw.strip()))
            except OverflowError:
                continue
    return None


def _json_pid(doc: dict[str, Any]) -> int | None:
    for key in ("_PID", "SYSLOG_PID"):
        raw = _json_text(doc.get(key))
        if raw is not None and raw.strip().isdigit() and len(raw.strip()) <= 10:
            return int(raw.strip())
    return None


class _JsonObjects:
    """The JSON values of journalctl's json formats (one per line, or pretty-printed over
    several, behind `data: ` or RS), each with the line it starts on. What is not one is noted
    in `problems`, and journalctl's "-- No entries --" in `no_entries`."""

    def __init__(self, text: str, problems: ProblemLog) -> None:
        self.text = text
        self.problems = problems
        self.no_entries = False

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        text, problems = self.text, self.problems
        decoder = json.JSONDecoder()
        pos, end_of_text, number = 0, len(text), 1
        while pos < end_of_text:
            char = text[pos]
            if char in " \t\r\x1e\ufeff":
                pos += 1
                continue
            if char == "\n":
                number += 1
                pos += 1
                continue
            if text.startswith("data: ", pos):  # json-sse
                pos += 6
                continue
            eol = text.find("\n", pos)
            eol = end_of_text if eol < 0 else eol
            if char != "{":
                line = text[pos:eol].strip()
                marker = _MARKER.fullmatch(line)
                if marker is not None and marker.group(1) == "No entries":
                    self.no_entries = True
                elif marker is None:
                    problems.line(number, f"not a JSON object: {clip(line)!r}")
                pos = eol
                continue
            try:
                doc, end = decoder.raw_decode(text, pos)
            except (ValueError, RecursionError) as exc:
                problems.line(number, f"invalid JSON: {clip(str(exc))}")
                pos = eol
                continue
            start_line = number
            number += text.count("\n", pos, end)
            pos = end
            yield start_line, doc


def _parse_json(text: str, source: str, line_count: int) -> JournalParse:
    """Entries of journalctl's JSON formats: one per object with a time; `_BOOT_ID` marks
    the boots."""
    problems = ProblemLog()
    entries: list[JournalEntry] = []
    boots = _Boots()
    names: dict[str, str] = {}
    intern = names.setdefault
    objects = _JsonObjects(text, problems)
    for start_line, doc in objects:
        if not isinstance(doc, dict):
            problems.line(start_line, "JSON value is not an object")
            continue
        when = _json_time(doc)
        if when is None:
            problems.line(start_line, "no __REALTIME_TIMESTAMP")
            continue
        boot_id = _json_text(doc.get("_BOOT_ID")) or ""
        if boot_id and boot_id != boots.ids[boots.index]:
            boots.begin(boot_id)
        host = _json_text(doc.get("_HOSTNAME")) or ""
        ident = (
            _json_text(doc.get("SYSLOG_IDENTIFIER")) or _json_text(doc.get("_COMM")) or "unknown"
        )
        message = _json_text(doc.get("MESSAGE"))
        if message is None:
            if "MESSAGE" in doc:
                problems.line(
                    start_line,
                    f"MESSAGE left out (over {JSON_FIELD_LIMIT} bytes: journalctl -o json "
                    "needs --all)",
                )
            message = ""
        entries.append(
            JournalEntry(
                when,
                intern(host, host),
                intern(ident, ident),
                _json_pid(doc),
                message,
                boots.index,
                start_line,
                source,
            )
        )
        boots.seen = True
    if not text.strip():
        problems.add("empty journal output")
    elif not entries and not objects.no_entries:
        problems.add("no journal entries could be read")
    return JournalParse(
        source=source,
        entries=tuple(entries),
        problems=problems.result(),
        boots=boots.result(),
        no_entries=objects.no_entries,
        lines=line_count,
        format=FORMAT_JSON,
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
    lifecycle: re.Pattern[str]  # whole message: job start/finish lines naming the unit
    about: re.Pattern[str]  # message start: what systemd says about the unit by its id


@lru_cache(maxsize=64)
def _unit_patterns(unit: str, descriptions: tuple[str, ...]) -> _UnitPatterns:
    # The unit as job messages name it: its description (the upstream default, and systemd 219),
    # "kubelet.service - Kubernetes Kubelet" (StatusUnitFormat=combined, systemd ≥ 249, as
    # AL2023 builds it), or the bare id (StatusUnitFormat=name, or no description).
    names = [rf"{re.escape(unit)}(?: - .*)?"] + [re.escape(d) for d in descriptions if d]
    name = "(?:" + "|".join(names) + ")"
    uid = re.escape(unit)
    return _UnitPatterns(
        lifecycle=re.compile(
            # src/core/job.c: "Starting %s...", "Stopped %s.", "Stopped (with error) %s." (219),
            # "Stopped %s with error." (252), "Failed to start %s.", "Timed out starting %s.",
            # "Dependency failed for %s.".
            rf"(?P<starting>Starting) {name}\.\.\.|(?P<stopping>Stopping) {name}\.\.\."
            rf"|(?P<started>Started) {name}\.?"
            rf"|(?P<stopped>Stopped)(?: \(with error\))? {name}\.?"
            rf"|(?P<failed>Failed to start|Timed out starting|Dependency failed for) {name}\.?"
        ),
        about=re.compile(
            # systemd ≥ 232 prefixes "<unit>: " (src/core/unit.c, service.c at v252).
            rf"{uid}: (?:"
            rf"[Mm]ain process exited, code=\w+, status=(?P<status>\S+?)(?: \(success\))?,?(?: |$)"
            rf"|(?P<failed>Failed) with result '[^']*'"
            rf"|(?P<restart>Scheduled) restart job, restart counter is at \d+"
            rf"|Service (?:RestartSec=\S+ expired|has no hold-off time[^,]*),"
            rf" (?P<restartsec>scheduling) restart"
            rf"|(?P<repeated>Start request repeated) too quickly"
            rf"|Unit entered (?P<unitfailed>failed) state"
            rf"|(?P<deactivated>Deactivated) successfully)"
            # systemd 219 (src/core/service.c, unit.c at v219) names the unit without a prefix.
            rf"|Unit {uid} entered (?P<failed219>failed) state"
            rf"|{uid} (?P<failed219b>failed)\."
            rf"|{uid} (?:holdoff time over|has no holdoff time), (?P<restart219>scheduling) restart"
            rf"|start request (?P<repeated219>repeated) too quickly for {uid}"
        ),
    )


_LIFECYCLE_ACTIONS = {
    "starting": UNIT_STARTING,
    "stopping": UNIT_STOPPING,
    "started": UNIT_STARTED,
    "stopped": UNIT_STOPPED,
    "failed": UNIT_FAILED,
}


def _normalise_unit(unit: str) -> str:
    return unit if "." in unit else unit + ".service"


def classify_unit_message(
    message: str, unit: str = "kubelet.service", descriptions: Iterable[str] | None = None
) -> str | None:
    """The lifecycle action one systemd message reports for `unit`, or None.

    Wording of systemd 219 (AL2) through 256: "Stopping Kubernetes Kubelet...",
    "kubelet.service: main process exited, code=exited, status=255/n/a", "Unit kubelet.service
    entered failed state.", "kubelet.service holdoff time over, scheduling restart.",
    "kubelet.service: Failed with result 'exit-code'.", "kubelet.service: Scheduled restart job,
    restart counter is at 3.", "Stopped kubelet.service - Kubernetes Kubelet.",
    "kubelet.service: Deactivated successfully." (stopped: the unit went inactive cleanly).
    """
    unit = _normalise_unit(unit)
    descs = tuple(descriptions) if descriptions is not None else KNOWN_DESCRIPTIONS.get(unit, ())
    patterns = _unit_patterns(unit, descs)
    m = patterns.lifecycle.fullmatch(message)
    if m is not None:
        return _LIFECYCLE_ACTIONS[m.lastgroup or "failed"]
    m = patterns.about.match(message)
    if m is None:
        return None
    found = {key for key, value in m.groupdict().items() if value is not None}
    if found & {"restart", "restartsec", "restart219"}:
        return UNIT_RESTART_SCHEDULED
    if "deactivated" in found:
        return UNIT_STOPPED
    if "status" in found:
        # systemd logs a clean main-process exit at debug level only; be strict anyway.
        return None if m.group("status") in ("0/SUCCESS", "0") else UNIT_FAILED
    return UNIT_FAILED


# Several messages report one event: "Main process exited" + "Failed with result" (+ "entered
# failed state" + "<unit> failed." on 219); "RestartSec expired" + "Scheduled restart job";
# "Deactivated successfully" + "Stopped".
_COLLAPSED = frozenset({UNIT_FAILED, UNIT_RESTART_SCHEDULED, UNIT_STOPPED})


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
        if action in _COLLAPSED and actions and actions[-1].action == action:
            continue
        actions.append(UnitAction(entry.time, action))
    return actions


# -- NVIDIA Xid errors ------------------------------------------------------------------------

# "NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus."; old drivers drop "PCI:";
# on a MIG GPU the driver adds " GPU-I:05" and " GPU-CI:00" (open-gpu-kernel-modules
# src/nvidia/src/kernel/gpu/rc/kernel_rc.c krcReportXid).
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
    r"(?: GPU-I:\d{1,3})?(?: GPU-CI:\d{1,3})?\): *(\d{1,6})\b"
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
