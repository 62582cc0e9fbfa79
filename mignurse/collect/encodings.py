"""Secrets in the encodings a bundle holds them in, found by decoding: a *view* is text made
from part of a file (a log line without its journal, CRI or klog prefix; CRI partial lines
joined; the contents of a JSON string unescaped; %XX and HTML entities decoded; a base64 run
decoded), with a map from each of its characters back to the characters they came from.
The rules run on the view, and what they mask there is masked in the file at the characters
it came from, so a token split over two CRI partial lines is masked in both halves and a
percent-encoded password in its encoded form. Views are made again from views (JSON in a
JSON string in a CRI line), at most `MAX_DEPTH` deep.

Every view is built in one pass over its text, from the lines that can matter (those holding
a trigger word and the block they open, a CRI `P` tag, a `%XX`, an entity or a long base64
run), so a view costs at most its text's length again at each depth.

Also here: rules for YAML shapes the line rules cannot see (a block or folded scalar, a list
or flow sequence under a secret-named key), a `key<TAB>value` line, and JSON documents inside
log lines walked by `structured`. Base64 (a Secret's data, a ConfigMap's binaryData, a file
logged whole) is decoded and scanned where it is UTF-8 text; a match masks the whole run.

Formats: CRI log lines `<RFC 3339 time> <stream> <P|F> <message>` (kubernetes/kubernetes
v1.31.0 pkg/kubelet/kuberuntime/logs/logs.go, `parseCRILog`); klog's header
`Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg` (kubernetes/klog v2.130.1 klog.go,
`formatHeader`); journalctl's short, short-iso and short-precise prefixes and `-o export`
`FIELD=value` lines (www.freedesktop.org/software/systemd/man/latest/journalctl.html,
"Output Options"); YAML block scalars (yaml.org/spec/1.2.2/#81-block-scalar-headers);
ConfigMap binaryData (kubernetes.io/docs/concepts/configuration/configmap/).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import html
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mignurse.collect import scanner, structured
from mignurse.collect.secretnames import MARKER, is_secret_name
from mignurse.collect.secretrules import LINE, LOG_PREFIX, LOG_TIME, TEXT, Edit, Rule

MAX_DEPTH = 4  # a view of a view …: CRI line → JSON string → URL-encoded → base64 is deep
MIN_BASE64 = 24  # shorter runs decode to too little to hold a credential and its name
JSON_ATTEMPTS_PER_LINE = 4  # starts of a JSON document tried on one line


Span = tuple[int, int]


@dataclass
class View:
    """Text decoded from part of a parent text, and where each of its characters came from.

    `pieces` are (view start, view end, parent start, parent end), sorted: where the view and
    parent lengths agree the characters map one to one; otherwise (an escape such as %40 or
    \\u0041, a base64 run) the whole parent span stands behind every view character in it.
    Characters in no piece (separators the view added) come from nowhere."""

    text: str
    pieces: list[tuple[int, int, int, int]]
    parent: View | None = None

    def root_spans(self, start: int, end: int) -> list[Span]:
        """The spans of the original text that view characters [start, end) came from."""
        spans = self._parent_spans(start, end)
        if self.parent is None:
            return spans
        out: list[Span] = []
        for s, e in spans:
            out.extend(self.parent.root_spans(s, e))
        return _merged(out)

    def _parent_spans(self, start: int, end: int) -> list[Span]:
        out: list[Span] = []
        i = max(0, bisect.bisect_right(self._starts, start) - 1)
        while i < len(self.pieces):
            vs, ve, ps, pe = self.pieces[i]
            if vs >= end:
                break
            if ve > start:
                if ve - vs == pe - ps:
                    out.append((ps + max(start, vs) - vs, ps + min(end, ve) - vs))
                else:
                    out.append((ps, pe))
            i += 1
        return _merged(out)

    @property
    def _starts(self) -> list[int]:
        starts = self.__dict__.get("_starts_cache")
        if starts is None:
            starts = [piece[0] for piece in self.pieces]
            self.__dict__["_starts_cache"] = starts
        return starts


def _merged(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(e, out[-1][1]))
        elif e > s:
            out.append((s, e))
    return out


class _Builder:
    """Builds a view piece by piece; runs copied as they are merge into one piece."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pieces: list[tuple[int, int, int, int]] = []
        self.length = 0

    def copy(self, text: str, start: int, end: int) -> None:
        if end <= start:
            return
        self.parts.append(text[start:end])
        last = self.pieces[-1] if self.pieces else None
        if (
            last
            and last[1] == self.length
            and last[3] == start
            and last[1] - last[0] == last[3] - last[2]
        ):
            self.pieces[-1] = (last[0], self.length + end - start, last[2], end)
        else:
            self.pieces.append((self.length, self.length + end - start, start, end))
        self.length += end - start

    def decoded(self, value: str, start: int, end: int) -> None:
        """`value` stands for parent characters [start, end) (an escape, a base64 run)."""
        if not value:
            return
        self.parts.append(value)
        self.pieces.append((self.length, self.length + len(value), start, end))
        self.length += len(value)

    def separator(self) -> None:
        self.parts.append("\n")
        self.length += 1

    def view(self, parent: View | None) -> View | None:
        return View("".join(self.parts), self.pieces, parent) if self.pieces else None


# --- which lines matter ----------------------------------------------------------------------


def lines_at(text: str, positions: Iterator[int] | list[int]) -> list[Span]:
    """(start, end) of each line holding one of `positions`, in order, each once."""
    out: list[Span] = []
    for at in sorted(positions):
        if out and at <= out[-1][1]:
            continue
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        out.append((start, len(text) if end == -1 else end))
    return out


# --- log prefixes ----------------------------------------------------------------------------

CONTEXT_LINES = 256  # after a line with a trigger: a PEM block, a YAML Secret, a chpasswd list


# a line after which the next ones belong to it: a PEM BEGIN, a YAML key with a block or a
# nested value, an INI section, cloud-init's heading over the passwords it made up
# (canonical/cloud-init@24.4 cloudinit/config/cc_set_passwords.py: the heading, then one
# `user:password` line each); and lines before a `kind: Secret` (kubectl sorts data first)
_OPENS_BLOCK = re.compile(
    r"-----BEGIN |:[ \t]{0,16}(?:[|>][-+0-9]{0,3}[ \t]{0,16})?$|^\[[^\]\n]{1,256}\]$"
    r"|Set the following 'random' passwords[ \t]{0,16}$"
)
_SECRET_KIND = re.compile(r"kind:[ \t]{0,16}[\"']?Secret")
# A log record written as one JSON object or logfmt line a line (journalctl -o json, the
# json-file driver, slog) holds its line of the block in its message string: the opener is
# looked for there, less the blanks and the line break (the json-file driver ends each `log`
# with one) after it. Its escapes stay as they are: no opener holds one. What an opener can
# end with, once those are taken off (a block indicator's chomping and indent, an INI
# section's bracket, the heading's last letter):
_OPENER_LAST = frozenset(":|>-+0123456789]s")
# Where any of them may match in a line of the whole text: the line `_with_context` looks at
# is the text's line less its trailing \r, which `\r*$` (MULTILINE) stands for; `^` dropped
# (what is left matches more); a record's message is a string after a message key that ends
# in an opener or is an INI section, then escaped line breaks or blanks, then its closing
# quote. A line with no end of a match of this pattern's superset (`scanner.Prefilter`)
# holds none, and its searches are skipped. The engine reads only the lines asked about,
# joined by line breaks: what a match within a line reads (its characters, and a line break
# or the text's end after it for `$`) is the same there, so every match the whole text holds
# within one of them ends within it there too (a match across the joins only adds lines).
_BLOCK_OR_KIND = scanner.Prefilter(
    re.compile(
        r"-----BEGIN |:[ \t]{0,16}(?:[|>][-+0-9]{0,3}[ \t]{0,16})?\r*$|\[[^\]\n]{1,256}\]\r*$"
        r"|kind:[ \t]{0,16}[\"']?Secret|Set the following 'random' passwords"
        r'|(?:"(?:MESSAGE|message|msg|log|Message)"[ \t]{0,16}:|msg=|message=)[ \t]{0,16}"'
        r'(?:(?:[^"\n]|\\")*:[ \t]{0,16}(?:[|>][-+0-9]{0,3}[ \t]{0,16})?|\[[^\]\n]{1,256}\])'
        r'(?:\\[rnt]|[ \t])*"',
        re.MULTILINE,
    )
)
_context = threading.local()  # the last text's answers (asked for again by the next view)


def forget() -> None:
    """Drop the answers kept for the last text (they hold the text)."""
    _context.last = None


def _block_or_kind_lines(text: str, lines: list[Span]) -> dict[int, bool] | None:
    """For each whole line of `lines`, by its start: whether a match of `_BLOCK_OR_KIND`'s
    superset ends within it (kept for the text: its views ask about its lines again); None
    where the engine does not answer."""
    last = getattr(_context, "last", None)
    if last is not None and last[0] is text:
        marks: dict[int, bool] = last[1]
    else:
        marks = {}
        _context.last = (text, marks)
    size = len(text)
    todo = [(s, e) for s, e in lines if s not in marks and (e == size or text[e] == "\n")]
    if todo:
        ends = _BLOCK_OR_KIND.ends("\n".join(text[s:e] for s, e in todo))
        if ends is None:
            return None
        # line i lies at [offsets[i], offsets[i + 1] - 1) of what was read, a line break after
        offsets = list(itertools.accumulate((e - s + 1 for s, e in todo), initial=0))
        within: set[int] = set()
        for end in ends:
            i = bisect.bisect_left(offsets, end) - 1
            if end < offsets[i + 1]:
                within.add(i)
        for i, (start, _) in enumerate(todo):
            marks[start] = i in within
    return marks


def _with_context(
    text: str, lines: list[Span], wanted: Callable[[int, int], bool] = lambda s, e: True
) -> list[Span]:
    """The `wanted` lines, each with the line before and after it; after a line that opens a
    block (itself, or the message of the log record it is), the `CONTEXT_LINES` after it;
    before a `kind: Secret`, those before it. In order, each line once."""
    out: list[Span] = []
    marks = _block_or_kind_lines(text, lines) if len(lines) > _FEW_LINES else None
    size = len(text)
    for start, end in lines:
        if not wanted(start, end):
            continue
        if (
            marks is not None
            and (end == size or text[end] == "\n")  # a whole line's end, where `$` is
            and not marks[start]
        ):
            before, after = 1, 2
        else:
            line = text[start:end].rstrip("\r")
            before = CONTEXT_LINES if _SECRET_KIND.search(line) else 1
            opens = _OPENS_BLOCK.search(line) or _message_opens_block(text, start, end)
            after = CONTEXT_LINES if opens else 2
        for _ in range(before):
            if start == 0 or (out and start <= out[-1][1] + 1):
                break
            start = text.rfind("\n", 0, start - 1) + 1
        for _ in range(after):
            if end >= len(text):
                break
            following = text.find("\n", end + 1)
            end = len(text) if following == -1 else following
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return _whole(text, [(s, e) for start, end in out for s, e in _split_lines(text, start, end)])


def _message_opens_block(text: str, start: int, end: int) -> bool:
    """Whether the line at [start, end) is a log record whose message opens a block (one
    JSON object or logfmt line per record: each line of the block is a record of its own,
    and the records after it are the block's lines as the message views show them)."""
    if text.find('"', start, end) == -1:
        return False
    key = _MESSAGE_KEY.search(text, start, end)
    if key is None:
        return False
    body = next(_quoted(text, key.end(), end), None)
    if body is None:
        return False
    start, end = body
    while end > start:  # less the blanks and escaped line breaks and tabs it ends with
        if text[end - 1] in " \t":
            end -= 1
        elif end - 2 >= start and text[end - 2] == "\\" and text[end - 1] in "rnt":
            end -= 2
        else:
            break
    if end == start or text[end - 1] not in _OPENER_LAST:
        return False
    return _OPENS_BLOCK.search(text[start:end]) is not None


# a line whose start matters: a key, a directive naming a secret (redis.conf `requirepass x`),
# a PEM line, or a heading over a list of passwords (cloud-init's "Set the following 'random'
# passwords", cc_set_passwords.py)
_KEY_FIRST = re.compile(
    r"[ \t]{0,64}(?:[<>][ \t]{1,4})?"
    r"(?:-[ \t]{1,16}|export[ \t]{1,16}|declare[ \t]{1,16}-[A-Za-z]{1,4}[ \t]{1,16})?"
    r"[\"']?[\w.-]{1,128}[\"']?[ \t]{0,16}[:=\t]|-----"
    r"|[ \t]{0,64}[\w.-]{0,64}(?i:pass|pwd|secret|token|key|cred|auth)[\w.-]{0,64}[ \t]"
    r"|[^\n]{0,256}(?i:passwords)[ \t]{0,16}\r?$"
)


def _prefix_end(text: str, start: int, end: int) -> int:
    """Where the message of the line at [start, end) starts, after up to three prefixes; an
    identifier that names a secret (`<time> <host> password: x`) is the message's key."""
    at = start
    for _ in range(3):
        m = LOG_PREFIX.match(text, at, end)
        if m is None or m.end() == at:
            break
        if text.endswith(": ", at, m.end()):
            ident = text.rfind(" ", at, m.end() - 2) + 1
            if ident > at and _names_secret(text[ident : m.end() - 2]):
                return ident
        at = m.end()
    return at


_PID = re.compile(r"\[\d{1,10}\]$")


@functools.lru_cache(maxsize=4096)
def _names_secret(ident: str) -> bool:
    """Whether a journal identifier (`kubelet[2391]`, less its pid) names a secret: asked for
    on every line, where a log has a few identifiers."""
    return is_secret_name(_PID.sub("", ident))


def _split_lines(text: str, start: int, end: int) -> Iterator[Span]:
    while start <= end:
        newline = text.find("\n", start, end)
        if newline == -1:
            yield start, end
            return
        yield start, newline
        start = newline + 1


def _prefixed(text: str, lines: list[Span], parent: View | None) -> View | None:
    """The given lines (and those after them) with their log prefixes stripped, where they had
    one (journal then klog, CRI then klog: up to three)."""
    build = _Builder()
    stripped = False
    prefix_ends: dict[tuple[int, int], int] = {}  # a line's `_prefix_end`, found once

    def keyed(start: int, end: int) -> bool:
        """Whether a line after its prefix starts with a key (`password: …`) or a PEM line:
        where a line start is what the rules need."""
        at = prefix_ends[start, end] = _prefix_end(text, start, end)
        return at > start and (
            _KEY_FIRST.match(text, at, end) is not None
            or _OPENS_BLOCK.search(text, at, end) is not None
        )

    for start, end in _with_context(text, lines, keyed):
        at = prefix_ends.get((start, end))
        if at is None:
            at = _prefix_end(text, start, end)
        stripped = stripped or at > start
        build.copy(text, at, end)  # a line without a prefix too: a block's lines stay together
        build.separator()
    return build.view(parent) if stripped else None


# --- NUL bytes and invalid UTF-8 ------------------------------------------------------------

# NUL (or \x1c, which `redact` reads NUL as), and the bytes that are not UTF-8 (decoded as
# lone surrogates by surrogateescape)
_NOT_TEXT = re.compile(r"[\x00\x1c\udc80-\udcff]+")


def _holds_not_text(text: str) -> bool:
    """Whether `_NOT_TEXT` may match in `text` (a surrogate is never ASCII)."""
    return not text.isascii() or "\x00" in text or "\x1c" in text


def _separated(text: str, lines: list[Span], parent: View | None) -> View | None:
    """The given lines with NUL bytes and invalid UTF-8 read as line breaks (a torn write,
    /proc/<pid>/environ), so a `key: value` after them starts a line."""
    build = _Builder()
    for start, end in lines:
        at = start
        found = False
        for m in _NOT_TEXT.finditer(text, start, end):
            found = True
            build.copy(text, at, m.start())
            build.decoded("\n", m.start(), m.end())
            at = m.end()
        if found:
            build.copy(text, at, end)
            build.separator()
    return build.view(parent)


# --- CRI partial lines -----------------------------------------------------------------------

_CRI = re.compile(rf"(?m)^{LOG_TIME} (?P<stream>stdout|stderr) (?P<tag>[FP]) ?")


def _cri_joined(text: str, parent: View | None) -> View | None:
    """The messages of a CRI log as the kubelet reads them back: each one the runtime split
    into `P` lines and a final `F` line joined, the others as they are (a YAML document or a
    PEM block logged line by line keeps its lines together)."""
    build = _Builder()
    pending: dict[str, list[Span]] = {}
    split = False
    for m in _CRI.finditer(text):
        end = text.find("\n", m.end())
        end = len(text) if end == -1 else end
        parts = pending.setdefault(m["stream"], [])
        parts.append((m.end(), end))
        if m["tag"] == "F":
            split = split or len(parts) > 1
            for s, e in parts:
                build.copy(text, s, e)
            build.separator()
            parts.clear()
    return build.view(parent) if split else None


# --- JSON strings ----------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


# the field that holds the message in a log record: journalctl -o json, the json-file
# driver, Go's slog and zap, logrus, Python's json loggers, and logfmt's msg="…"
# (the look-behind comes after the `m`, so that the pattern starts with `"` or `m` and `re`
# skips to those characters instead of trying the pattern at every position of a line)
_MESSAGE_KEY = re.compile(
    r'(?:"(?:MESSAGE|message|msg|log|Message)"[ \t]{0,16}:|m(?<![\w.-]m)(?:sg|essage)=)'
    r'[ \t]{0,16}(?=")'
)


def _json_strings(text: str, lines: list[Span], parent: View | None) -> View | None:
    """The contents of the JSON (or Go-quoted) strings on the given lines (and those after
    them) unescaped: a log message, a JSON document held in a string. Where a line is a log
    record, only its message, so that messages on consecutive lines stay consecutive (a PEM
    block or a YAML document logged line by line)."""
    # the view's pieces made here rather than through `_Builder` (a call per escape): a piece
    # copied is never next to another one (an escape or a separator lies between), so none
    # is merged, as `_Builder.copy` would not merge them either
    parts: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    length = 0
    find = text.find
    for start, end in _with_context(text, lines):
        if find('"', start, end) == -1:
            continue  # no string; a message key holds a quote or ends before one (`(?=")`)
        message = _MESSAGE_KEY.search(text, start, end)
        for body_start, body_end in _quoted(text, message.end() if message else start, end):
            if message is None and body_end - body_start < 6:
                continue
            # (found in the line rather than in a copy of the string: most strings are short
            # and left out, and one with no backslash is copied as it is)
            slash = find("\\", body_start, body_end)
            if message is not None and slash != -1:
                body_end = _without_line_break(text, body_start, body_end)
            if (
                message is None
                and slash == -1
                and find(":", body_start, body_end) == -1
                and find("=", body_start, body_end) == -1
                and find("%", body_start, body_end) == -1
            ):
                continue
            at = body_start
            # each escape as `_ESCAPE` matches it, left to right: a backslash and any one
            # character but a line break, or `u` and four hex digits (a backslash that starts
            # none is passed over); found with `str.find`, a match object only for a `\u`
            while slash != -1:
                code = slash + 1
                if code >= body_end or text[code] == "\n":
                    slash = find("\\", code, body_end)
                    continue
                if slash > at:
                    parts.append(text[at:slash])
                    pieces.append((length, length + slash - at, at, slash))
                    length += slash - at
                char = text[code]
                at = code + 1
                value = _SIMPLE_ESCAPES.get(char, char)
                if char == "u":
                    escape = _ESCAPE.match(text, slash, body_end)
                    if escape is not None and escape.end() == slash + 6:
                        at = escape.end()
                        value = chr(int(text[code + 1 : at], 16))
                parts.append(value)  # (one character, for an escape of two or six)
                pieces.append((length, length + 1, slash, at))
                length += 1
                slash = find("\\", at, body_end)
            if body_end > at:
                parts.append(text[at:body_end])
                pieces.append((length, length + body_end - at, at, body_end))
                length += body_end - at
            parts.append("\n")
            length += 1
            if message is not None:
                break
    return View("".join(parts), pieces, parent) if pieces else None


def _without_line_break(text: str, start: int, end: int) -> int:
    """Where a record's message string [start, end) ends less the escaped line break that
    ends it (the json-file driver keeps each line's break in its `log`, moby/moby v27.3.1
    daemon/logger/jsonfilelog/jsonfilelog.go): the view's own line break stands for it, so
    the lines of a block logged a record each stay consecutive there, as journal messages
    are."""
    if not text.endswith("\\n", start, end):
        return end
    slash = end - 2
    while slash > start and text[slash - 1] == "\\":
        slash -= 1
    return end - 2 if (end - 1 - slash) % 2 else end


def _quoted(text: str, start: int, end: int) -> Iterator[Span]:
    """(start, end) of the contents of each double-quoted string in [start, end), in one
    pass: a quote opens a string, and inside one a backslash escapes the next character."""
    at = text.find('"', start, end)
    while at != -1:
        body = at = at + 1
        quote = text.find('"', at, end)
        while quote != -1:
            slash = text.find("\\", at, quote)
            if slash == -1:
                break
            at = slash + 2
            if at > quote:  # that quote was escaped: the string goes on
                quote = text.find('"', at, end)
        if quote == -1:
            return  # unterminated: no more strings on the line
        yield body, quote
        at = text.find('"', quote + 1, end)


# --- percent-encoding ------------------------------------------------------------------------

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+|\+")
# a query parameter or a form field: after `?` or `&`, at a line's start, or after a space
# where the word goes on to an `&` or a %XX (a form body logged in a line); its value is where
# the application/x-www-form-urlencoded serializer writes a space as `+`
# (url.spec.whatwg.org/#urlencoded-serializing); a `+` it meant as itself it writes %2B
_FORM_START = r"(?m)(?:^|(?<=[?&])|(?<=\s)(?=\S{0,65536}?[&%]))[^=&\s#?\"'<>]{1,256}="
# a value ends where the next parameter could start (`?` too: an encoder writes it %3F), so
# each character is read once however many parameters a line holds
_FORM_VALUE = re.compile(_FORM_START + r"(?P<val>[^&\s#?\"'<>]{0,65536})")
# a line that may hold one: a parameter after `?` or `&` (a charset `re` skips to fast),
# then a `+` on its line; the view decodes a `+` only inside a `_FORM_VALUE`
_FORM_PARAMETER = re.compile(r"[?&][^=&\s#?\"'<>]{1,256}=")


def _url_decoded(text: str, lines: list[Span], parent: View | None) -> View | None:
    """The given lines with %XX escapes decoded (RFC 3986 §2.1); runs of escapes decoded as
    UTF-8 together. A `+` is a space inside a query parameter's or a form field's value (as a
    form is encoded) and left as it is elsewhere (a secret may hold one)."""
    build = _Builder()
    for start, end in lines:
        at = start
        found = False
        spaces = (
            [m.span("val") for m in _FORM_VALUE.finditer(text, start, end) if "+" in m["val"]]
            if text.find("+", start, end) != -1
            else []
        )
        value = 0  # the first form value that does not end before this run
        for run in _PERCENT_RUN.finditer(text, start, end):
            if run[0] == "+":
                while value < len(spaces) and spaces[value][1] <= run.start():
                    value += 1
                if value == len(spaces) or spaces[value][0] > run.start():
                    continue  # a + outside a form value is itself
                found = True
                build.copy(text, at, run.start())
                build.decoded(" ", run.start(), run.end())
                at = run.end()
                continue
            found = True
            build.copy(text, at, run.start())
            raw = bytes(int(run[0][i + 1 : i + 3], 16) for i in range(0, len(run[0]), 3))
            decoded = raw.decode("utf-8", "surrogateescape")
            if len(decoded) == len(raw):  # one character per escape: map each to its own
                for i, char in enumerate(decoded):
                    build.decoded(char, run.start() + 3 * i, run.start() + 3 * i + 3)
            else:
                build.decoded(decoded, run.start(), run.end())
            at = run.end()
        if found:
            build.copy(text, at, end)
            build.separator()
    return build.view(parent)


# --- HTML entities ---------------------------------------------------------------------------

_ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});")


def _html_decoded(text: str, lines: list[Span], parent: View | None) -> View | None:
    """The given lines with HTML character references decoded (a JSON document or a log
    shown in an HTML page or an XML field: &quot;password&quot;)."""
    build = _Builder()
    for start, end in lines:
        at = start
        for m in _ENTITY.finditer(text, start, end):
            build.copy(text, at, m.start())
            build.decoded(html.unescape(m[0]), m.start(), m.end())
            at = m.end()
        build.copy(text, at, end)
        build.separator()
    return build.view(parent)


# --- base64 ----------------------------------------------------------------------------------

_BASE64 = re.compile(
    rf"(?<![A-Za-z0-9+/_-])(?:[A-Za-z0-9+/]{{{MIN_BASE64},}}={{0,2}}|[A-Za-z0-9_-]{{{MIN_BASE64},}}={{0,2}})"
    r"(?![A-Za-z0-9+/=_-])"
)
_PRINTABLE = re.compile(r"[\t\n\r\x20-\x7e\u00a0-\uffff]*")
# The same runs found fast in ASCII text (nearly every log): Python's regex engine tries a
# character-class pattern at every position, about 18 ms a MiB, but finds a literal prefix
# with a string search. So the text's bytes are mapped (base64 characters to "A", the rest to
# a space), the runs of MIN_BASE64 "A"s found literally, and each run checked as _BASE64 does:
# one alphabet, at most two "=" of padding, nothing base64-like after them.
_RUN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_RUN_MAP = bytes(0x41 if byte in _RUN_CHARS else 0x20 for byte in range(256))
_RUN = re.compile(b"A" * MIN_BASE64 + b"+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_ONE_ALPHABET = re.compile(r"[A-Za-z0-9+/]+|[A-Za-z0-9_-]+")
_AFTER_RUN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")


def base64_runs(text: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[int, int]]:
    """(start, end) of every match of _BASE64 in `text`, in order; in ASCII text, less the
    runs with a character of `skip` at the start of a group of four (see _UNPRINTABLE_LEADS)."""
    if not text.isascii():
        for found in _BASE64.finditer(text):
            yield found.span()
        return
    for run in _RUN.finditer(text.encode("ascii").translate(_RUN_MAP)):
        start, end = run.span()
        stop = _run_stop(text, start, end, skip)
        if stop is not None:
            yield start, stop


def _run_stop(text: str, start: int, end: int, skip: frozenset[str]) -> int | None:
    """Where the base64 run of ASCII `text` at [start, end) (a maximal run of base64
    characters of either alphabet) ends with its padding, or None: not one alphabet, base64
    characters after its padding, or a character of `skip` at the start of a group."""
    if not skip.isdisjoint(text[start:end:4]):
        return None
    if not _ONE_ALPHABET.fullmatch(text, start, end):
        return None
    size = len(text)
    stop = end
    while stop < size and stop - end < 2 and text[stop] == "=":
        stop += 1
    if stop < size and text[stop] in _AFTER_RUN:
        return None
    return stop


# The runs worth decoding found by the multi-pattern engine in one pass, a superset of those
# `_base64_decoded` decodes: a maximal run of one alphabet, at least 24 characters, no
# character of _UNPRINTABLE_LEADS at the start of a group of four (C, D, I-Z, a-z, 0-9 there),
# and not all lower-case hex (a character outside 0-9a-f somewhere). Each run it names is then
# checked as `base64_runs` checks it; a digest, a UUID, a pod name never reaches Python.
def _base64_candidates() -> str:
    run = r"A-Za-z0-9+/_\-"
    lead, lead_not_hex = "[CDI-Za-z0-9]", "[CDI-Zg-z]"

    def body(char: str, not_hex: str) -> str:
        group = f"{lead}{char}{{3}}"
        marked = (
            f"(?:{lead_not_hex}{char}{{3}}|{lead}{not_hex}{char}{{2}}"
            f"|{lead}{char}{not_hex}{char}|{lead}{char}{{2}}{not_hex})"
        )
        tail = f"(?:{lead}{char}{{0,2}})?"
        marked_tail = (
            f"(?:{lead_not_hex}{char}{{0,2}}|{lead}{not_hex}{char}?|{lead}{char}{not_hex})"
        )
        # six groups or more, one of them marked: k plain groups before it, at least 5 - k after
        spread = [f"{marked}(?:{group}){{5,}}"]
        spread += [f"(?:{group}){{{k}}}{marked}(?:{group}){{{5 - k},}}" for k in range(1, 6)]
        spread.append(f"(?:{group}){{6,}}{marked}(?:{group})*")
        return f"(?:(?:{'|'.join(spread)}){tail}|(?:{group}){{6,}}{marked_tail})"

    standard = body("[A-Za-z0-9+/]", "[A-Zg-z+/]")
    url_safe = body(r"[A-Za-z0-9_\-]", r"[A-Zg-z_\-]")
    return f"(?:^|[^{run}])(?:{standard}|{url_safe})={{0,2}}(?:[^{run}=]|$)"


_BASE64_FINDER = scanner.Finder(_base64_candidates())


def _engine_runs(text: str) -> list[tuple[int, int]] | None:
    """(start, stop) of the base64 runs `base64_runs(text, _UNPRINTABLE_LEADS)` yields that
    can decode to text (see above), found by the engine; None where it is not used."""
    found = _BASE64_FINDER.last_characters(text)
    if found is None:
        return None
    runs: dict[int, int] = {}
    for last in found:
        end = last + 1
        if text[last] not in _AFTER_RUN:  # the character after the run, matched
            end = last
        while end > 0 and text[end - 1] == "=":
            end -= 1
        start = _run_start(text, end)
        stop = _run_stop(text, start, end, _UNPRINTABLE_LEADS)
        if stop is not None and end - start >= MIN_BASE64:
            runs[start] = stop
    return sorted(runs.items())


def _run_start(text: str, end: int) -> int:
    """The start of the run of base64 characters that ends at `end` in ASCII `text`."""
    low, step = end, 64
    while low > 0:
        start = max(0, low - step)
        mapped = text[start:low].encode("ascii").translate(_RUN_MAP)
        space = mapped.rfind(b" ")
        if space != -1:
            return start + space + 1
        low, step = start, step * 2
    return 0


# The first character of each group of four makes the top six bits of a decoded byte: A, B
# and E to H make 0x00-0x07 and 0x10-0x1f (control bytes other than tab, LF and CR), and +, /
# and -, _ make 0xf8-0xff (never in UTF-8). A run with one of them at the start of a group
# decodes to no printable UTF-8 text, whatever its other characters: it is passed over before
# any other work, as the decoding would reject it (most logged names and ids are such runs).
_UNPRINTABLE_LEADS = frozenset("ABEFGH+/-_")


def _base64_decoded(text: str, parent: View | None) -> View | None:
    """Each long base64 run whose bytes are UTF-8 text (a docker `auth`, a credentials file
    held whole in a log line or an object), decoded; a match anywhere in it masks the run."""
    build = _Builder()
    runs = _engine_runs(text)
    for start, end in base64_runs(text, _UNPRINTABLE_LEADS) if runs is None else runs:
        if not _UNPRINTABLE_LEADS.isdisjoint(text[start:end:4]):
            continue  # some decoded byte is a control byte or never UTF-8: see below
        run = text[start:end]
        if len(run) % 4 == 1 or run.startswith("LS0tLS1CRUdJTi"):
            continue  # not base64, or a PEM block: the pem-base64 rule decides on it
        if _HEX.fullmatch(run):
            # an image digest, a UID: base64 of text is never all hex (each 4th character of
            # base64 of ASCII lies in I-Z or a-f, the others spread over the whole alphabet)
            continue
        if parent is None and _partial(text, text.rfind("\n", 0, start) + 1):
            continue  # a piece of a longer run: the joined view decodes it whole
        padded = run + "=" * (-len(run) % 4)
        try:
            raw = (
                base64.urlsafe_b64decode(padded)
                if "-" in run or "_" in run
                else base64.b64decode(padded, validate=True)
            )
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if not _PRINTABLE.fullmatch(decoded):
            continue
        build.decoded(decoded, start, end)
        build.separator()
    return build.view(parent)


# The same matches found by the multi-pattern engine in one pass (the last character of each,
# on the same line as its first: none of these patterns matches a line break)
_PERCENT_FINDER = scanner.Finder(_PERCENT.pattern)
_URL_FINDER = scanner.Finder(_PERCENT.pattern, _FORM_PARAMETER.pattern)
_ENTITY_FINDER = scanner.Finder(_ENTITY.pattern)


# --- all views -------------------------------------------------------------------------------


# the views worth making of each kind of view: what a prefixed line holds was already seen
# in the line itself (its JSON strings, its %XX), so a prefix view has none of its own
_CHILDREN = {
    "file": ("separated", "prefixed", "json", "url", "html", "cri", "base64"),
    "separated": ("prefixed", "json"),
    "prefixed": (),
    "json": ("separated", "prefixed", "json", "url", "html", "base64"),
    "url": ("prefixed", "json", "url", "base64"),
    "html": ("prefixed", "json", "url"),
    "cri": ("prefixed", "json", "url", "html", "base64"),
    "base64": ("separated", "prefixed", "json", "url"),
}


def views(
    text: str, trigger_positions: Callable[[str], list[int]], parent: View | None = None
) -> Iterator[View]:
    """Every view of `text` (itself a view of `parent`, or the file), and the views of those,
    to `MAX_DEPTH`. `trigger_positions(text)` gives where rule triggers occur in a text."""
    yield from _views(text, trigger_positions, parent, "file", 1)


# Why every line holding a trigger word still has its views made (the slow path: on journal
# text nearly all of the time), even where a rule's prefilter (`scanner.Prefilter`) sees no
# match on the line itself. A view of a line can match where the raw line cannot:
# - decoding makes characters the line does not hold (\u0040, %40, &#64;, base64, `\k` read
#   as `k`), so a regex, its triggers and its superset all see other text;
# - a view line starts where a string, a message or a record starts: `^`, `\b`, a
#   lookbehind and `_KEY_FIRST` hold there and not in the raw line (`password: x` in a
#   `msg="…"`), and a view line ends where the string does (`$`, a lookahead);
# - separators join what the line kept apart: the strings of one line, and the lines of a
#   CRI message or of a block, are consecutive view lines, and the rules that may cross a
#   line break (url-credentials, chpasswd-list, secret-env, cli-password, k8s-secret-json,
#   the paired PEM, YAML and Secret rules, a JSON document parsed on from its line) read
#   them together;
# - a view is made of the trigger lines and the lines around them (`_with_context`): 1
#   before, 2 after, 256 after a block opener and before a kind: Secret, counted in lines,
#   and the views of a view count again in its lines. Leaving one trigger line out of a
#   view changes which other lines the counts reach, in that view and in every view made
#   from it, and what the paired rules see beside each other there; so a line can be left
#   out only where everything around it, at every depth, is shown to be unchanged.
# A line without any decoding mark is still not free of the last three, and the journal's
# trigger lines (`\"key\"` in containerd's) hold escapes. What the engine may skip without
# changing any view: a rule's work where its prefilter saw nothing in the whole text
# (`_at_line_starts`), and the per-line searches for block openers (`_with_context`). What
# is not a trigger line at all: a word outside the shape its one rule needs
# (`redact.TRIGGER_SHAPES`: a probe's `Get \"http://…\"` holds `://` with no user info).
def _views(
    text: str,
    trigger_positions: Callable[[str], list[int]],
    parent: View | None,
    kind: str,
    depth: int,
) -> Iterator[View]:
    if depth > MAX_DEPTH:
        return
    wanted = _CHILDREN[kind]
    # pieces of a message split over CRI partial lines are seen joined, never alone
    triggered = _whole(text, lines_at(text, trigger_positions(text)))
    # a JSON escape can spell a trigger word (`\u0041KIA`, `http:\/\/`): such lines are
    # unescaped too, and the rules see the word in the view
    spelled = (
        _whole(text, lines_at(text, _word_escapes(text)))
        if "json" in wanted and '"' in text
        else []
    )
    made: list[tuple[str, View | None]] = []
    if triggered or spelled:
        # (a text with nothing `_NOT_TEXT` matches has no separated view: not looked for
        # line by line; str.isascii and `in` are single C passes)
        if triggered and "separated" in wanted and _holds_not_text(text):
            made.append(("separated", _separated(text, triggered, parent)))
        if triggered and "prefixed" in wanted:
            made.append(("prefixed", _prefixed(text, triggered, parent)))
        if "json" in wanted and '"' in text:
            json_lines = sorted(set(triggered) | set(spelled)) if spelled else triggered
            made.append(("json", _json_strings(text, json_lines, parent)))
    if "url" in wanted and ("%" in text or "+" in text):
        form = "+" in text and "=" in text
        encoded = (_URL_FINDER if form else _PERCENT_FINDER).last_characters(text)
        if encoded is None:  # no engine, or text it cannot read as `re` does
            encoded = [m.start() for m in _PERCENT.finditer(text)]
            if form:
                encoded += [m.start() for m in _FORM_PARAMETER.finditer(text)]
        escaped = [
            (start, end)
            for start, end in _whole(text, lines_at(text, encoded))
            if text.find("%", start, end) != -1 or text.find("+", start, end) != -1
        ]
        if escaped:
            made.append(("url", _url_decoded(text, escaped, parent)))
    if "html" in wanted and "&" in text:
        found = _ENTITY_FINDER.last_characters(text)
        if found is None:
            found = [m.start() for m in _ENTITY.finditer(text)]
        entities = _whole(text, lines_at(text, found))
        if entities:
            made.append(("html", _html_decoded(text, _with_context(text, entities), parent)))
    if "cri" in wanted and _holds_partial_tag(text):
        made.append(("cri", _cri_joined(text, parent)))
    if "base64" in wanted:
        made.append(("base64", _base64_decoded(text, parent)))
    for child_kind, view in made:
        if view is not None and view.text.strip():
            yield view
            yield from _views(view.text, trigger_positions, view, child_kind, depth + 1)


# --- JSON documents inside lines -------------------------------------------------------------

_DOCUMENT_START = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()


def json_document_edits(
    text: str, lines: list[Span], check: Callable[[], None]
) -> Iterator[tuple[int, int, str]]:
    """(start, end, rule) for each string `structured` masks in a JSON document that starts
    on one of `lines` (a klog, CRI or journal message that is a JSON object, a JSON lines
    file): the characters of the string's value as the line spells it."""
    for start, end in lines:
        check()
        at, tries = start, 0
        while tries < JSON_ATTEMPTS_PER_LINE:
            m = _DOCUMENT_START.search(text, at, end)
            if m is None:
                break
            tries += 1
            try:
                document, doc_end = _decode_at(text, m.start(), end)
            except (ValueError, RecursionError):
                at = m.start() + 1
                continue
            if not isinstance(document, (dict, list)):
                at = m.start() + 1
                continue
            if isinstance(document, list) and not any(
                isinstance(item, (dict, list)) for item in document
            ):
                at = doc_end  # (a journal's `[1930]`): `structured` masks only in a mapping
                continue
            _, counts, replacements = structured.mask_document(document, check)
            if replacements:
                rule = max(counts, key=lambda r: counts[r]) if counts else "secret-field"
                yield from _string_edits(text, m.start(), doc_end, replacements, rule)
            at = doc_end


# how close to its end a parse of a line's slice may fail for lack of what follows (a number,
# `-Infinity`, a \\uXXXX escape cut off): the whole text is parsed there instead
_CUT_MARGIN = 16


def _decode_at(text: str, start: int, line_end: int) -> tuple[object, int]:
    """`_DECODER.raw_decode(text, start)`, parsing the line's slice first. A failed parse builds
    a `JSONDecodeError`, which counts the newlines before the failure (json/decoder.py): on the
    whole text that is linear in the position, and a large log with a `{` on every line took
    quadratic time. A document that ends on its line parses the same from the slice (its
    closing bracket needs nothing after it), and a failure well inside the slice fails the
    same way in the whole text; a failure near the slice's end, or an unterminated string,
    may only be the line ending, so the whole text decides."""
    if line_end >= len(text):
        return _DECODER.raw_decode(text, start)
    line = text[start:line_end]
    try:
        document, end = _DECODER.raw_decode(line)
    except json.JSONDecodeError as error:
        if error.pos >= len(line) - _CUT_MARGIN or error.msg.startswith("Unterminated"):
            return _DECODER.raw_decode(text, start)
        raise
    return document, start + end


def _string_edits(
    text: str, start: int, end: int, replacements: dict[str, str], rule: str
) -> Iterator[tuple[int, int, str]]:
    for old, new in replacements.items():
        for old_form, new_form in structured._encodings(old, new):
            p = len(_common_prefix(old_form, new_form))
            s = len(_common_prefix(old_form[::-1], new_form[::-1]))
            s = min(s, len(old_form) - p)
            at = text.find(old_form, start, end)
            while at != -1:
                if at + p < at + len(old_form) - s:
                    yield at + p, at + len(old_form) - s, rule
                at = text.find(old_form, at + len(old_form), end)


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


def changed_spans(text: str, edit: Edit) -> list[Span]:
    """The parts of `text` an edit masks: where its replacement is the old text with masks
    put in (a cookie header's values, a chpasswd list's passwords), each masked stretch on
    its own, so what lies between them (`Path=/`, user names) is not masked with them."""
    start, end, new = edit
    old = text[start:end]
    parts = new.split(MARKER)
    if len(parts) > 2 and old.startswith(parts[0]) and old.endswith(parts[-1]):
        spans: list[Span] = []
        pos, limit = len(parts[0]), len(old) - len(parts[-1])
        for literal in parts[1:-1]:
            at = old.find(literal, pos + 1, limit) if literal else -1
            if at == -1:
                break
            spans.append((start + pos, start + at))
            pos = at + len(literal)
        else:
            if limit > pos:
                spans.append((start + pos, start + limit))
            return spans
    span = changed_span(text, edit)
    return [] if span is None else [span]


def changed_span(text: str, edit: Edit) -> Span | None:
    """The part of `text` an edit really changes (a PEM block keeps its BEGIN and END
    lines): the edit's span less what its replacement keeps at either end."""
    start, end, new = edit
    old = text[start:end]
    p = len(_common_prefix(old, new))
    s = min(len(_common_prefix(old[::-1], new[::-1])), len(old) - p, len(new) - p)
    return (start + p, end - s) if start + p < end - s else None


# --- edits the rules must not make -----------------------------------------------------------


def vetted(text: str, edit: Edit) -> Edit | None:
    """`edit` as it may be made, or None: never inside the prefix of a log line (a klog
    `server.go:123]` is no `user:password`), never on part of a message the runtime split
    over CRI partial lines (the joined view masks it whole), and a masked value ends at a
    NUL byte (what follows is another record)."""
    start, end, new = edit
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    if end <= _prefix_end(text, line_start, len(text) if line_end == -1 else line_end):
        return None
    if _partial(text, line_start):
        return None
    if new != MARKER and _crosses_records(text, start, end):
        return None  # a block paired over log records: the views mask it record by record
    if new == MARKER:
        # a value in text escaped twice ends at its escaped line break or tab (\\n, \\r, \\t)
        cut = _ESCAPED_TWICE.search(text, start, end)
        end = end if cut is None else cut.start()
        # a value whose name was percent-encoded ends at an encoded separator
        if text[max(0, start - 3) : start].upper() in ("%3D", "%20", "%3A"):
            separator = _ENCODED_SEPARATOR.search(text, start, end)
            end = end if separator is None else separator.start()
        while end > start and text[end - 1] == "\\":  # never end inside an escape (\" \n)
            end -= 1
        if not _NOT_TEXT.sub("", text[start:end]).strip():
            return None
    return start, end, new


_ESCAPED_TWICE = re.compile(r"\\\\[nrt]")
_ENCODED_SEPARATOR = re.compile(r"%(?:20|26|3[Bb]|2[Cc])")


def _crosses_records(text: str, start: int, end: int) -> bool:
    """Whether a line after the first in [start, end) starts a log record of its own (a log
    prefix, a JSON object)."""
    at = text.find("\n", start, end)
    while at != -1:
        if text.startswith("{", at + 1) or LOG_PREFIX.match(text, at + 1, end) is not None:
            return True
        at = text.find("\n", at + 1, end)
    return False


_FEW_LINES = 256
_PARTIAL_TAG = scanner.Finder(" P ")


def _holds_partial_tag(text: str) -> bool:
    """Whether `text` holds " P " (a CRI partial line's tag), from the engine's one pass where
    it ran (a search for a word with spaces around it is slow for `str.find` in a log)."""
    found = _PARTIAL_TAG.last_characters(text)
    return " P " in text if found is None else bool(found)


def _word_escapes(text: str) -> list[int]:
    """Where a JSON escape that can stand for a letter, digit or `/` begins (`\\u`, `\\/`):
    the other escapes (RFC 8259 section 7) stand for quotes, backslashes and control
    characters, which no trigger word holds but `"kind":"secret"`, a trigger in its escaped
    spelling too."""
    engine = _WORD_ESCAPE_FINDER.last_characters(text)
    if engine is not None:  # (str.find stops at every backslash of a log's \" quotes)
        return [at - 1 for at in engine]
    found: list[int] = []
    for escape in ("\\u", "\\/"):
        at = text.find(escape)
        while at != -1:
            found.append(at)
            at = text.find(escape, at + 2)
    return found


_WORD_ESCAPE_FINDER = scanner.Finder(r"\\[u/]")


def _whole(text: str, lines: list[Span]) -> list[Span]:
    """The lines that are not part of a message split over CRI partial lines."""
    # a partial line holds " P ": a few lines are looked at, many only where the text has one
    if not lines or (len(lines) > _FEW_LINES and not _holds_partial_tag(text)):
        return lines
    return [(start, end) for start, end in lines if not _partial(text, start)]


def _partial(text: str, line_start: int) -> bool:
    """Whether the line at `line_start`, or the one before it, is a CRI partial (P) line."""
    m = _CRI.match(text, line_start)
    if m is None:
        return False
    if m["tag"] == "P":
        return True
    if line_start == 0:
        return False
    before = _CRI.match(text, text.rfind("\n", 0, line_start - 1) + 1)
    return before is not None and before["tag"] == "P"


# --- YAML shapes and key<TAB>value -----------------------------------------------------------

_YAML_KEY = re.compile(
    r"(?m)^(?P<indent>[ \t]*(?:-[ \t]+)?)"
    r"(?P<key>[A-Za-z_][\w.-]{0,127}|\"[^\"\n]{1,128}\"|'[^'\n]{1,128}')"
    r":[ \t]*(?:(?P<block>[|>][-+0-9]{0,3})|(?P<flow>\[[^\n]{0,65536}\])|)"
    r"[ \t]*(?:#[^\n]{0,1024})?\r?$"
)
_FLOW_ITEM = re.compile(r"[^,\[\]\s'\"][^,\[\]]*|\"[^\"]*\"|'[^']*'")
_NOT_SECRET = frozenset({"", "true", "false", "null", "none", "nil", "yes", "no", "~"})


def _yaml_edits(text: str, check: Callable[[], None]) -> Iterator[Edit]:
    """Values YAML holds under a secret-named key beyond its own line: a block or folded
    scalar (`password: |`), list items (`passwords:` then `- …`), a flow sequence."""
    edits: list[Edit] = []
    block_until = 0
    for n, m in enumerate(_at_line_starts(_YAML_KEY, text)):
        if n % 256 == 0:
            check()
        if m.start() < block_until:
            continue  # a line of a block scalar already masked
        if not is_secret_name(m["key"].strip("\"'")):
            continue
        if m["flow"] is not None:
            if "{" not in m["flow"]:  # [{name: …}]: the mappings' keys decide
                edits.extend(_flow_items(text, m.start("flow") + 1, m.end("flow") - 1))
            continue
        block = m["block"] is not None
        same_column_items = not block and not m["indent"].rstrip().endswith("-")
        end = m.end()
        item_column = -1  # a list under the key: the column of its dashes
        for start, line_end, depth in _children(text, m.end(), len(m["indent"]), same_column_items):
            end = line_end
            content_start = start + depth
            if block:
                edits.append((content_start, line_end, MARKER))
                continue
            line = text[content_start:line_end]
            if item_column == -1:
                if not line.startswith("- "):
                    break  # a nested mapping: its own keys say what is secret
                item_column = depth
            if depth != item_column or not line.startswith("- "):
                continue  # inside an item
            item = line[2:].lstrip()
            head, colon, rest = item.partition(":")
            if colon and _MAP_KEY.fullmatch(head) and rest[:1] in ("", " ", "\t"):
                continue  # a list of mappings: their keys say what is secret
            if item.strip("\"'").lower() not in _NOT_SECRET:
                edits.append(_unquoted(text, line_end - len(item), line_end))
        if block:
            block_until = end
    pos = 0
    for edit in sorted(edits):
        if edit[0] >= pos and edit[1] > edit[0] and MARKER not in text[edit[0] : edit[1]]:
            yield edit
            pos = edit[1]


def _at_line_starts(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """`pattern.finditer(text)` for a pattern that matches only at the start of a line and
    within it (`(?m)^…` with no line break in it): tried once per line rather than at every
    character (`re` has no fast skip to a `^`), and with the engine only on the lines where
    it reported a match of the pattern's superset (`scanner.Prefilter`): a match of the
    pattern at a line's start ends in that line, where the superset's match ends too."""
    ends = _prefilter(pattern).ends(text)
    if ends is not None:
        last = -1
        for end in ends:  # (never empty matches: the line holding end - 1)
            at = text.rfind("\n", 0, end - 1) + 1
            if at > last:
                last = at
                m = pattern.match(text, at)
                if m is not None:
                    yield m
        return
    at = 0
    while True:
        m = pattern.match(text, at)
        if m is not None:
            yield m
        newline = text.find("\n", at)
        if newline == -1:
            return
        at = newline + 1


_PREFILTERS: dict[re.Pattern[str], scanner.Prefilter] = {}


def _prefilter(pattern: re.Pattern[str]) -> scanner.Prefilter:
    found = _PREFILTERS.get(pattern)
    if found is None:
        found = _PREFILTERS.setdefault(pattern, scanner.Prefilter(pattern))
    return found


_MAP_KEY = re.compile(r"[A-Za-z_][\w.-]{0,127}|\"[^\"\n]{1,128}\"|'[^'\n]{1,128}'")


def _children(
    text: str, at: int, column: int, same_column_items: bool
) -> Iterator[tuple[int, int, int]]:
    """(start, end without trailing space, indentation) of each non-blank line below a key
    that belongs to it: indented deeper, or `- ` items at its own column."""
    at += 1
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        line = text[at:end]
        content = line.strip()
        if content:
            depth = len(line) - len(line.lstrip(" \t"))
            if depth < column or (
                depth == column and not (same_column_items and content.startswith("- "))
            ):
                return
            yield at, at + len(line.rstrip()), depth
        at = end + 1


def _unquoted(text: str, start: int, end: int) -> Edit:
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "\"'":
        return start + 1, end - 1, MARKER
    return start, end, MARKER


def _flow_items(text: str, start: int, end: int) -> Iterator[Edit]:
    for item in _FLOW_ITEM.finditer(text, start, end):
        value = item[0].strip()
        if value.strip("\"'").lower() not in _NOT_SECRET:
            s = item.start() + item[0].index(value)
            yield _unquoted(text, s, s + len(value))


_TAB_VALUE = re.compile(
    r"(?m)^[ \t]{0,64}(?:export[ \t]{1,16})?(?P<name>[A-Za-z_-][\w.-]{0,127})[ ]{0,16}\t"
    r"[ \t]{0,16}"
    r"(?P<val>[^\t\n]{1,4096})"
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PATH = re.compile(r"/[\w.@+-]+(?:/[\w.@+-]*)*")


def _tab_value(m: re.Match[str]) -> Edit | None:
    """`password<TAB>value` (env dumps, `kubectl describe` rows, tab-separated log fields)."""
    value = m["val"].rstrip(" \r")
    if not is_secret_name(m["name"]) or not value or MARKER in value:
        return None
    if value.lower() in _NOT_SECRET or _NUMBER.fullmatch(value) or _PATH.fullmatch(value):
        return None
    if value[0] in "{[|>":  # a nested object or a block follows: its own keys decide
        return None
    return m.start("val"), m.start("val") + len(value), MARKER


_KEYWORDS = ("pass", "pwd", "secret", "token", "key", "cred", "auth")

RULES: tuple[Rule, ...] = (
    # the rules' regexes only name where a match may be; _yaml_edits pairs keys with lines
    Rule(
        "secret-field",
        _YAML_KEY,
        lambda m: None,
        tuple((k, 0) for k in _KEYWORDS),
        TEXT,
        _yaml_edits,
    ),
    Rule("secret-env", _TAB_VALUE, _tab_value, tuple((k, 0) for k in _KEYWORDS), LINE),
)
