"""Mask secrets (and optionally network identities) in files bound for a support bundle: the
walker that applies the rules, and the `Redactor` that keeps one bundle's counts and stand-ins.

A JSON document is first masked by its structure (`structured`: Kubernetes env, args, Secret
data, secret-named keys, last-applied annotations), then every file by the text rules of
`secretrules`. Every rule has literal trigger words; only where one occurs is the rule tried.
All the words are found in one pass by Hyperscan (`scanner`); without its wheel, by one
`str.find` per word, and by grep for large texts. Either way the same positions, so the same
masks.

Linear time, whatever the input: every quantifier in a rule is bounded, a rule is tried at a
trigger (or once per line holding one) and never again inside an edit it made, and PEM
blocks are paired in one pass over their BEGIN/END lines. A file still gets a time limit
(`MASK_SECONDS_PER_FILE`); past it `MaskTimeout` is raised and the caller leaves it out.

Decisions (the rules' own are in `secretrules`):
- NUL bytes (a log after an unclean shutdown) are text like any other; archives are opened by
  `archives`, never skipped.
- Network obfuscation maps hosts consistently per ``Redactor``; stand-ins it issued are
  recognised and left alone, so a real address equal to an issued stand-in reads as that
  stand-in (10.255.0.0/16 is rare in VPCs).
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import itertools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mignurse.collect import encodings, scanner, structured
from mignurse.collect.secretnames import MARKER
from mignurse.collect.secretrules import (
    FILE_FORMAT_RULES,
    LINE,
    TEXT,
    TEXT_RULES,
    URL_CREDENTIAL_SHAPES,
    Edit,
    Rule,
)

if TYPE_CHECKING:
    from mignurse.collect import archives

__all__ = ["MARKER", "RULES", "MaskTimeout", "Masked", "Redactor", "mask_secrets"]

MASK_SECONDS_PER_FILE = 60.0  # one file's masking; linear rules take ~1 s for the 64 MiB cap


class MaskTimeout(Exception):
    """Masking one file took longer than its limit: the file must not be shipped."""


@dataclass(frozen=True)
class Masked:
    """What masking made of one file: its bytes (None: left out of the bundle), the count per
    rule, and (path, why) of everything left out, the file itself or members of an archive."""

    data: bytes | None
    counts: dict[str, int] = field(default_factory=dict)
    left_out: tuple[tuple[str, str], ...] = ()


class _Clock:
    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise MaskTimeout(f"masking took over {MASK_SECONDS_PER_FILE:g} s")


# --- network obfuscation ---------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_NET = re.compile(
    r"(?<![\w.-])(?P<host>(?:ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}|i-[0-9a-f]{8,17}(?=\.))"
    r"(?P<domain>\.[a-z]{2}(?:-[a-z]+)+-\d\.compute\.internal|\.ec2\.internal)?)(?![\w-])"
    r"|(?<![\w:.-])(?P<mac>[0-9A-Fa-f]{2}(?P<ms>[:-])(?:[0-9A-Fa-f]{2}(?P=ms)){4}[0-9A-Fa-f]{2})"
    r"(?![\w:.-])"
    rf"|(?<![\w.])(?P<ip4>{_OCTET}(?:\.{_OCTET}){{3}})(?![\w]|\.\d)"
    r"|(?<![\w:.])(?P<ip6>(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4})(?![\w:]|\.\d)"
)
_KEEP_IP4 = frozenset({"0.0.0.0", "255.255.255.255", "169.254.169.254"})
_KEEP_MAC = frozenset({"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"})

RULES: tuple[str, ...] = tuple(rule.name for rule in TEXT_RULES) + structured.RULES
# the text rules, those for other file formats (XML, SQL, .pgpass) and those for shapes only
# encodings have (YAML blocks, key<TAB>value)
ALL_RULES: tuple[Rule, ...] = TEXT_RULES + FILE_FORMAT_RULES + encodings.RULES

TextMask = Callable[[str, bytes], tuple[bytes, dict[str, int]]]


class Redactor:
    """Redacts the files of one bundle and remembers what it masked, per file and rule, and
    what it left out and why."""

    RULES: tuple[str, ...] = RULES

    def __init__(self, *, enabled: bool = True, obfuscate_network: bool = False) -> None:
        self.enabled = enabled
        self.obfuscate_network = obfuscate_network
        self._report: dict[str, dict[str, int]] = {}
        self._left_out: dict[str, str] = {}
        self._map: dict[str, str] = {}
        self._issued: set[str] = set()
        self._hosts: dict[str, str] = {}  # host label (ip-10-0-1-2) → host-0001
        self._counters = {"ip4": 0, "ip6": 0, "mac": 0, "host": 0}

    def redact(self, name: str, data: bytes) -> bytes:
        """Return ``data`` with secrets masked: text and JSON, and a gzip'd file or an archive
        as `mask` does it (empty when it is left out: `left_out` says why)."""
        if not self.enabled:
            return data
        if _is_archive(data):
            masked = self.mask(name, data)
            unchanged = not masked.counts and not masked.left_out
            return data if unchanged else masked.data or b""
        clean, counts = self.mask_text(name, data)
        self.record(name, counts)
        return clean

    def mask_text(
        self, name: str, data: bytes, *, structured_done: bool = False
    ) -> tuple[bytes, dict[str, int]]:
        """`mask_secrets`, then network obfuscation when asked; counts are not recorded."""
        clean, counts = mask_secrets(name, data, structured_done=structured_done)
        if not self.obfuscate_network:
            return clean, counts
        text, net = self._obfuscate(clean.decode("utf-8", "surrogateescape"))
        return text.encode("utf-8", "surrogateescape"), {**counts, **net}

    def redact_document(self, name: str, document: Any) -> Any:
        """A JSON-shaped object with its secrets masked by structure (counted for `name`)."""
        if not self.enabled:
            return document
        masked, counts, _ = structured.mask_document(document)
        self.record(name, counts)
        return masked

    def mask(
        self,
        name: str,
        data: bytes,
        *,
        budget: archives.Budget | None = None,
        structured_done: bool = False,
    ) -> Masked:
        """Any file: archives opened and masked member by member within the node's `budget`
        (`archives.mask_file`); counts and what was left out are recorded."""
        if not self.enabled:
            return Masked(data)
        from mignurse.collect.archives import mask_file

        def text_mask(inner: str, inner_data: bytes) -> tuple[bytes, dict[str, int]]:
            done = structured_done and inner == name  # add_json walked the document already
            return self.mask_text(inner, inner_data, structured_done=done)

        masked = mask_file(name, data, budget, text_mask)
        self.record(name, masked.counts)
        self.record_left_out(masked.left_out)
        return masked

    @property
    def stateless(self) -> bool:
        """Whether `mask_secrets` is all `redact` does, so files may be masked elsewhere (in
        worker processes) and their counts `record`ed; network obfuscation keeps one map."""
        return self.enabled and not self.obfuscate_network

    def record(self, name: str, counts: dict[str, int]) -> None:
        """Count what `mask_secrets` did to `name`."""
        for rule, n in counts.items():
            self._count(name, rule, n)

    def record_left_out(self, left_out: Iterable[tuple[str, str]]) -> None:
        for path, why in left_out:
            self._left_out[path] = why

    def report(self) -> dict[str, dict[str, int]]:
        """File → rule → count, only non-zero counts (rules in RULES and the net-* rules)."""
        return {f: dict(rules) for f, rules in self._report.items() if rules}

    def left_out(self) -> dict[str, str]:
        """Path in the bundle (or inside an archive there) → why it is not in the bundle."""
        return dict(self._left_out)

    def mapping(self) -> dict[str, str]:
        """Original → stand-in for every obfuscated address/name (keep it out of the bundle)."""
        return dict(self._map)

    def _count(self, name: str, rule: str, n: int) -> None:
        if n:
            per_file = self._report.setdefault(name, {})
            per_file[rule] = per_file.get(rule, 0) + n

    def _obfuscate(self, text: str) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}

        def edits() -> Iterator[Edit]:
            for m in _NET.finditer(text):
                kind = next((k for k in ("host", "mac", "ip4", "ip6") if m[k] is not None), None)
                if kind is None:
                    continue
                value = m[kind]
                new = self._stand_in(kind, value, m)
                if new is None or new == value:
                    continue
                rule = {"host": "net-hostname", "mac": "net-mac", "ip4": "net-ipv4"}.get(
                    kind, "net-ipv6"
                )
                counts[rule] = counts.get(rule, 0) + 1
                yield m.start(kind), m.end(kind), new

        text, _ = _apply(text, edits())
        return text, counts

    def _stand_in(self, kind: str, value: str, m: re.Match[str]) -> str | None:
        if value in self._issued:
            return None
        if value in self._map:
            return self._map[value]
        if kind == "ip4":
            if value in _KEEP_IP4 or value.startswith("127.") or value.startswith("255."):
                return None
            new = self._next("ip4", lambda n: f"10.{255 - (n >> 16)}.{(n >> 8) & 255}.{n & 255}")
        elif kind == "ip6":
            try:
                addr = ipaddress.IPv6Address(value)
            except ValueError:
                return None
            if addr.is_loopback or addr.is_unspecified:
                return None
            new = self._next("ip6", lambda n: f"fd00::{n:x}")
        elif kind == "mac":
            if value.lower().replace("-", ":") in _KEEP_MAC:
                return None
            sep = m["ms"]
            new = self._next(
                "mac",
                lambda n: (
                    sep.join(["02", "00", "00", f"{n >> 16 & 255:02x}"])
                    + sep
                    + sep.join([f"{n >> 8 & 255:02x}", f"{n & 255:02x}"])
                ),
            )
        else:
            label = value.split(".", 1)[0]
            if label not in self._hosts:
                self._hosts[label] = self._next("host", lambda n: f"host-{n:04d}")
            new = self._hosts[label] + (".example.internal" if m["domain"] else "")
            self._issued.add(new)
        self._map[value] = new
        return new

    def _next(self, kind: str, fmt: Callable[[int], str]) -> str:
        while True:
            self._counters[kind] += 1
            candidate = fmt(self._counters[kind])
            if candidate not in self._map:  # never hand out an address seen as a real one
                self._issued.add(candidate)
                return candidate


def _is_archive(data: bytes) -> bool:
    from mignurse.collect.archives import is_tar, sniff

    return sniff(data[:8]) is not None or is_tar(data[:512])


def mask_secrets(
    name: str, data: bytes, *, structured_done: bool = False
) -> tuple[bytes, dict[str, int]]:
    """``data`` (text or JSON; NUL bytes and invalid UTF-8 kept as they are) with every secret
    rule applied, and the count per rule; a gzip'd file or an archive masked member by member
    and packed again. Pure, so a worker process can run it. Raises `MaskTimeout` past
    `MASK_SECONDS_PER_FILE`, or when an archive cannot be masked (the reason)."""
    if _is_archive(data):  # a gzip'd log or a tarball: its members, as `archives` masks them
        from mignurse.collect.archives import mask_file

        masked = mask_file(name, data, text_mask=mask_secrets)
        if masked.data is None:
            raise MaskTimeout("; ".join(why for _, why in masked.left_out))
        return masked.data, dict(masked.counts)
    try:
        return _mask_secrets(name, data, structured_done)
    finally:
        scanner.forget()  # the engine's answers for the last text hold that text
        encodings.forget()


def _mask_secrets(name: str, data: bytes, structured_done: bool) -> tuple[bytes, dict[str, int]]:
    clock = _Clock(MASK_SECONDS_PER_FILE)
    counts: dict[str, int] = {}
    if not structured_done and structured.looks_like_json(name, data):
        rewritten, found = structured.mask_json_bytes(data, clock.check)
        if rewritten is not None:
            data, counts = rewritten, dict(found)
    text = data.decode("utf-8", "surrogateescape")
    original = text
    scanner.decoded_from(text, data)
    # NUL bytes (a torn write, NUL-separated records) end a value as whitespace does: the
    # rules see them as the file separator \x1c, which is whitespace to `re`, put back after
    nul = "\x00" in text and "\x1c" not in text
    if nul:
        text = text.replace("\x00", "\x1c")
    # The text rules on the text itself, then on its views (decoded encodings: `encodings`);
    # a mask can make a boundary another rule needed (abcdef.<16>AKIA… once the bootstrap
    # token is masked): go round again until nothing changes, so masking twice changes
    # nothing.
    # the engine finds the words in this process, in one pass; without it grep names the lines
    lines = None if scanner.engine_name() == "Hyperscan" else trigger_lines(data)
    scan = None
    if lines != []:  # []: grep saw no trigger anywhere, so no text rule can match
        text, found, scan = _mask_text(text, lines, clock)
        _add(counts, found)
    else:  # and the views start from that answer rather than ask grep again
        scan = _Scan(text, lines)
    for _ in range(PASSES):
        text, found = _mask_views(text, clock, scan)
        _add(counts, found)
        if not found:
            break
        text, found, _ = _mask_text(text, _marked_lines(text), clock)
        _add(counts, found)
        scan = None
    if nul:
        text = text.replace("\x1c", "\x00")
    return (data if text == original else text.encode("utf-8", "surrogateescape")), counts


def _add(counts: dict[str, int], more: dict[str, int]) -> None:
    for rule, n in more.items():
        counts[rule] = counts.get(rule, 0) + n


def _mask_text(
    text: str, lines: list[tuple[int, int]] | None, clock: _Clock
) -> tuple[str, dict[str, int], _Scan | None]:
    """Every text rule applied to the text itself (`lines`: where grep saw triggers), and
    the scan of the text that came out when it found every trigger (for `_mask_views`)."""
    counts: dict[str, int] = {}
    scan = _Scan(text, lines)
    complete: _Scan | None = scan
    for again in range(PASSES):
        changed_now = False
        for rule in ALL_RULES:
            clock.check()
            text, applied = _apply_rule(scan, rule, clock)
            if applied:
                counts[rule.name] = counts.get(rule.name, 0) + len(applied)
                changed_now = True
                # an edit moves positions; after the first pass only masked lines can change
                if again:
                    scan, complete = _Scan(text, _marked_lines(text)), None
                else:  # every trigger still found: the views can start from it
                    scan = complete = scan.after(text, applied)
        if not changed_now:
            break
        scan = _Scan(text, _marked_lines(text))
    return text, counts, complete


def _mask_views(text: str, clock: _Clock, scan: _Scan | None = None) -> tuple[str, dict[str, int]]:
    """What the rules find in the views of `text` (`encodings`), masked where it came from;
    `scan`: one of `text` that found every trigger, if there is one already."""
    spans: list[tuple[int, int, str]] = []
    root = scan if scan is not None and scan.text is text else _Scan(text)
    scans = {id(text): root}  # one scan per text: triggers found once

    def scan_of(view_text: str) -> _Scan:
        scan = scans.get(id(view_text))
        if scan is None or scan.text is not view_text:
            scan = scans[id(view_text)] = _Scan(view_text)
        return scan

    def triggers(view_text: str) -> list[int]:
        scan = scan_of(view_text)
        return [at for trigger in TRIGGERS for at in scan.positions(trigger)]

    spans.extend(
        encodings.json_document_edits(text, encodings.lines_at(text, triggers(text)), clock.check)
    )
    for view in encodings.views(text, triggers):
        clock.check()
        found = list(_rule_spans(scan_of(view.text), clock))
        found += encodings.json_document_edits(
            view.text, encodings.lines_at(view.text, triggers(view.text)), clock.check
        )
        for start, end, rule in found:
            spans.extend((s, e, rule) for s, e in view.root_spans(start, end))
        del scans[id(view.text)]
    return _mask_spans(text, spans)


def _rule_spans(scan: _Scan, clock: _Clock) -> Iterator[tuple[int, int, str]]:
    """(start, end, rule) of what each rule would change in `text`, none applied. As when
    they are applied one after another, a rule is not tried where an earlier one changed
    the text (the bootstrap token's secret half, then not the whole `--token` value)."""
    text = scan.text
    taken: list[tuple[int, int]] = []
    for rule in ALL_RULES:
        if not any(scan.positions(t) for t, _ in rule.triggers):
            continue
        found: list[tuple[int, int]] = []
        for edit in _edits(scan, rule, clock):
            if _overlaps(taken, edit[0], edit[1]):
                continue
            for span in encodings.changed_spans(text, edit):
                found.append(span)
                yield span[0], span[1], rule.name
        if found:
            taken = sorted(taken + found)


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) overlaps one of the sorted, disjoint `spans`."""
    i = bisect.bisect_left(spans, (end, end))
    return i > 0 and spans[i - 1][1] > start


def _mask_spans(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, dict[str, int]]:
    """`text` with each span (merged where they touch) replaced by MARKER, and the count per
    rule; spans that hold only masks already are left alone."""
    counts: dict[str, int] = {}
    merged: list[tuple[int, int, str]] = []
    for start, end, rule in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), merged[-1][2])
        else:
            merged.append((start, end, rule))
    parts: list[str] = []
    pos = 0
    for start, end, rule in merged:
        # widen to whole masks: a span ending inside ***REDACTED*** would cut it
        start, end = _around_masks(text, start, end)
        if start < pos:
            start = pos
        if end <= start or not text[start:end].replace(MARKER, "").strip():
            continue
        parts.append(text[pos:start])
        parts.append(MARKER)
        pos = end
        counts[rule] = counts.get(rule, 0) + 1
    if not counts:
        return text, counts
    parts.append(text[pos:])
    return "".join(parts), counts


def _around_masks(text: str, start: int, end: int) -> tuple[int, int]:
    at = text.find(MARKER, max(0, start - len(MARKER) + 1), start + len(MARKER))
    if at != -1 and at < start < at + len(MARKER):
        start = at
    at = text.find(MARKER, max(0, end - len(MARKER) + 1), end + len(MARKER))
    if at != -1 and at < end < at + len(MARKER):
        end = at + len(MARKER)
    return start, end


def _marked_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line holding a mask, and of the line before it."""
    lines: list[tuple[int, int]] = []
    at = text.find(MARKER)
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        before = text.rfind("\n", 0, max(0, start - 1)) + 1 if start else start
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        if lines and before <= lines[-1][1]:
            lines[-1] = (lines[-1][0], end)  # overlaps the last span: one span
        else:
            lines.append((before, end))
        at = text.find(MARKER, end)
    return lines


PASSES = 3


# --- finding triggers ------------------------------------------------------------------------
#
# Hyperscan (`scanner.Words`) finds every trigger in one pass in this process. Without it:
# Python's str.find runs at ~2 GB/s per trigger, and there are ~230 triggers: ~10 MB/s for a
# text. grep -F finds all of them in one pass (Aho-Corasick) at ~500 MB/s, so for large ASCII
# texts grep names the lines holding any trigger and the finds run on those lines only.
# Exactly the same positions: every trigger lies within one line (no trigger holds a
# newline), and for ASCII text `grep -i` under LC_ALL=C and str.lower() agree.
# A grep that fails its self-test on first use (an odd implementation) is never used again.

# The same words choose the lines whose views are read (`_mask_views`). A word whose every
# rule needs a shape around it (`TRIGGER_SHAPES`) counts only where that shape is: what the
# views of its line could add is covered without it. A view makes trigger words out of
# escapes (`\u0041KIA`, `http:\/\/` and `%40` have views of their own, wherever they are:
# `encodings.views`), so the shape lets through what a view decodes into one of its
# characters (a backslash). What such a line still gave up is what a view of it showed
# beside a word it did not hold (a JSON document with an escaped key, on a probe's line by
# chance): no rule was ever meant to find that there.
TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(t for r in ALL_RULES for t, _ in r.triggers))
# what grep looks for: a line holding "identitytoken" holds "token" too, so fewer patterns
_GREP_PATTERNS = tuple(t for t in TRIGGERS if not any(o != t and o in t for o in TRIGGERS))
# trigger → where, at an occurrence of it, a match of a rule it triggers can start: words
# that in most logs stand for nothing (a probe's URL) and for one rule each
TRIGGER_SHAPES: dict[str, re.Pattern[str]] = dict(URL_CREDENTIAL_SHAPES)
_WORDS = scanner.Words(TRIGGERS)
_LONGEST = max(len(trigger) for trigger in TRIGGERS)
GREP_MIN_BYTES = 1 << 20  # below this, starting grep costs more than the finds it saves
_grep: list[str | None] = []  # [path] once checked; [None] when unusable


def trigger_lines(data: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each line of ``data`` holding a trigger, found by grep; None when grep
    is not worth it or not usable (the caller then searches the whole text)."""
    if len(data) < GREP_MIN_BYTES or not data.isascii():
        return None
    grep = _usable_grep()
    return None if grep is None else _grep_lines(grep, data)


def _grep_lines(grep: str, data: bytes) -> list[tuple[int, int]] | None:
    argv = [grep, "-a", "-b", "-F", "-i"]
    for trigger in _GREP_PATTERNS:
        argv += ["-e", trigger]
    try:
        done = subprocess.run(
            argv,
            input=data,
            capture_output=True,
            env={"LC_ALL": "C", "PATH": os.environ.get("PATH", "")},
            check=False,
        )
    except OSError:
        return None
    if done.returncode == 1:
        return []
    if done.returncode != 0:
        return None
    lines: list[tuple[int, int]] = []
    for row in done.stdout.split(b"\n"):
        colon = row.find(b":")
        if colon > 0:
            start = int(row[:colon])
            lines.append((start, start + len(row) - colon - 1))
    return lines


def _usable_grep() -> str | None:
    if not _grep:
        found = shutil.which("grep")
        ok = found is not None and _grep_lines(found, _GREP_PROBE) == _GREP_PROBE_LINES
        _grep.append(found if ok else None)
    return _grep[0]


_GREP_PROBE = b"no trigger here\nx-AMZ-Security-TOKEN: 1\n\n--USER a:b -----BEGIN CERT\nplain\n"
_GREP_PROBE_LINES = [(16, 39), (41, 67)]


class _Scan:
    """One text version, lower-cased once, with each trigger's positions found once; with
    `lines` (from grep), only those lines are lower-cased, joined and searched."""

    def __init__(self, text: str, lines: list[tuple[int, int]] | None = None) -> None:
        self.text = text
        self._found: dict[str, list[int]] = {}
        self._shaped: dict[str, list[int]] = {}  # positions() of a word in TRIGGER_SHAPES
        found = _WORDS.positions(text) if lines is None else None
        # every trigger's positions in the whole text, found by the engine (see `after`)
        self._whole = found is not None
        if found is not None:  # every trigger's positions, found by the engine in one pass
            self._found = found
            self._joined, self._starts, self._offsets = "", [0], [0]
            return
        if lines is None and text.isascii():
            lines = trigger_lines(text.encode("ascii"))
        if lines is None:
            lowered = text.lower()
            if len(lowered) != len(text):  # some characters change length when lowered
                lowered = text.translate(_ASCII_LOWER)
            self._joined, self._starts, self._offsets = lowered, [0], [0]
        else:
            # one string to search (no trigger holds a newline), and where each line began
            self._joined = "\n".join(text[start:end].lower() for start, end in lines)
            self._starts = [start for start, _ in lines]
            self._offsets = list(
                itertools.accumulate((end - start + 1 for start, end in lines), initial=0)
            )

    @classmethod
    def _of(cls, text: str, found: dict[str, list[int]]) -> _Scan:
        scan = cls.__new__(cls)
        scan.text, scan._found, scan._whole, scan._shaped = text, found, True, {}
        scan._joined, scan._starts, scan._offsets = "", [0], [0]
        return scan

    def after(self, text: str, applied: list[Edit]) -> _Scan:
        """The scan of `text`, which is this scan's text with the `applied` edits made (in
        order, disjoint, as `_apply` made them), without scanning the whole text again.

        Exact, so the same positions as a scan of `text`: an occurrence of a trigger in
        `text` either lies within a stretch no edit touched, where it was an occurrence in
        the old text too (moved by the edits before it), or overlaps a replacement (or
        straddles the point where text was deleted), and then lies within `_LONGEST` - 1
        characters of it on either side, where the engine looks again. Where the engine
        was not what found the old positions, or will not read a stretch (a Kelvin sign),
        the whole text is scanned as before."""
        if not self._whole:
            return _Scan(text)
        if scanner.carry(self.text, text, applied):  # the engine's answer moved, lines rescanned
            carried = _WORDS.positions(text)
            if carried is not None:
                return _Scan._of(text, carried)
        ends = [end for _, end, _ in applied]
        starts = [start for start, _, _ in applied]
        shifts = list(
            itertools.accumulate(
                (len(new) - (end - start) for start, end, new in applied), initial=0
            )
        )
        found: dict[str, list[int]] = {}
        for word, old in self._found.items():
            n = len(word)
            kept: list[int] = []
            for at in old:
                i = bisect.bisect_right(ends, at)  # the edits before `at` end at or before it
                if i < len(starts) and starts[i] < at + n:
                    continue  # the next edit overlaps this occurrence (or cuts into it)
                kept.append(at + shifts[i])
            found[word] = kept
        added: dict[str, set[int]] = {}
        for (start, _, new), shift in zip(applied, shifts, strict=False):
            placed = start + shift  # where the replacement lies in `text`
            placed_end = placed + len(new)
            window = max(0, placed - _LONGEST + 1)
            near = _WORDS.positions(text[window : placed_end + _LONGEST - 1])
            if near is None:
                return _Scan(text)
            for word, hits in near.items():
                n = len(word)
                for at in hits:
                    at += window
                    if at < placed_end and at + n > placed:
                        added.setdefault(word, set()).add(at)
        for word, more in added.items():
            found[word] = sorted(found[word] + list(more))
        return _Scan._of(text, found)

    def positions(self, trigger: str) -> list[int]:
        """Where `trigger` occurs in the text and, for a word of `TRIGGER_SHAPES`, has the
        shape its rule needs there."""
        shape = TRIGGER_SHAPES.get(trigger)
        if shape is None:
            return self._occurrences(trigger)
        found = self._shaped.get(trigger)
        if found is None:
            text = self.text
            found = [at for at in self._occurrences(trigger) if shape.match(text, at)]
            self._shaped[trigger] = found
        return found

    def _occurrences(self, trigger: str) -> list[int]:
        found = self._found.get(trigger)
        if found is None:
            found = []
            joined, starts, offsets = self._joined, self._starts, self._offsets
            at = joined.find(trigger)
            while at != -1:
                line = bisect.bisect_right(offsets, at) - 1
                found.append(starts[line] + at - offsets[line])
                at = joined.find(trigger, at + 1)
            self._found[trigger] = found
        return found


def _apply_rule(scan: _Scan, rule: Rule, clock: _Clock) -> tuple[str, list[Edit]]:
    """Try one rule only where its triggers occur, so unrelated text costs one find per trigger;
    the new text and the edits made, in order."""
    if not any(scan.positions(t) for t, _ in rule.triggers):
        return scan.text, []
    return _apply(scan.text, _edits(scan, rule, clock))


def _edits(scan: _Scan, rule: Rule, clock: _Clock) -> Iterator[Edit]:
    """The rule's edits in order, none overlapping, less those `encodings.vetted` refuses (a
    log line's own prefix, a piece of a message split over CRI partial lines)."""
    text = scan.text
    for edit in _rule_edits(scan, rule, clock):
        kept = encodings.vetted(text, edit)
        if kept is not None:
            yield kept


def _rule_edits(scan: _Scan, rule: Rule, clock: _Clock) -> Iterator[Edit]:
    """The rule's edits in order, none overlapping; never tried again inside an edit it made."""
    text = scan.text
    if rule.paired is not None:
        yield from rule.paired(text, clock.check)
        return
    pos = 0
    if rule.scope == TEXT:
        for n, m in enumerate(rule.regex.finditer(text)):
            if n % 1024 == 0:
                clock.check()
            change = rule.edit(m)
            if change is not None and change[0] >= pos:
                yield change
                pos = change[1]
        return
    if rule.scope == LINE:
        line_end = -1
        positions = sorted({at for trigger, _ in rule.triggers for at in scan.positions(trigger)})
        anchored = _at_line_start(rule.regex)
        for n, at in enumerate(positions):
            if n % 1024 == 0:
                clock.check()
            if at < line_end:
                continue  # that line is done
            line_start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            line_end = len(text) if line_end == -1 else line_end
            if anchored:
                # `^` holds in the line only at its start (no character of the line is a
                # line break): finditer finds one match there, or none when `pos` is past it
                found = rule.regex.match(text, line_start, line_end) if pos <= line_start else None
                matches: Iterable[re.Match[str]] = () if found is None else (found,)
            else:
                matches = rule.regex.finditer(text, max(line_start, pos), line_end)
            for m in matches:
                change = rule.edit(m)
                if change is not None and change[0] >= pos:
                    yield change
                    pos = change[1]
        return
    starts: set[int] = set()
    for trigger, back in rule.triggers:
        for at in scan.positions(trigger):
            starts.update(range(max(0, at - back), at + 1))
    for n, start in enumerate(sorted(starts)):
        if n % 1024 == 0:
            clock.check()
        if start < pos:
            continue
        found = rule.regex.match(text, start)
        if found is None:
            continue
        change = rule.edit(found)
        if change is not None and change[0] >= pos:
            yield change
            pos = change[1]


@functools.cache
def _at_line_start(regex: re.Pattern[str]) -> bool:
    """Whether every match of `regex` starts at a line's start: MULTILINE, and `^` first at
    its top level (not in one alternative of several)."""
    if not regex.flags & re.MULTILINE:
        return False
    parsed = re._parser.parse(regex.pattern, regex.flags)  # type: ignore[attr-defined]
    c = re._constants  # type: ignore[attr-defined]
    return len(parsed.data) > 0 and parsed.data[0] == (c.AT, c.AT_BEGINNING)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _apply(text: str, edits: Iterable[Edit]) -> tuple[str, list[Edit]]:
    """Apply each edit in order, skipping any that overlaps the one before; return the new
    text and the edits made (in order, disjoint)."""
    parts: list[str] = []
    pos = 0
    applied: list[Edit] = []
    for edit in edits:
        start, end, new = edit
        if start < pos:
            continue
        parts.append(text[pos:start])
        parts.append(new)
        pos = end
        applied.append(edit)
    if not applied:
        return text, applied
    parts.append(text[pos:])
    return "".join(parts), applied
