"""Where the redaction rules' trigger words, and the few patterns the views start from, occur
in a text, found in one pass by Hyperscan (intel/hyperscan, `hyperscan` on PyPI; reference:
intel.github.io/hyperscan/dev-reference/): a multi-pattern engine that matches all ~230
words at once at ~1.7 GB/s on journal text, where `str.find` needs a pass per word.

The engine only says where a word or a pattern is; the rules themselves (Python `re`) then
run there, as they do without it, so what is masked is the same byte for byte. Where the
wheel is missing (an architecture PyPI has none for), one warning line is logged and every
question here is answered None: the caller then searches with `str.find` and `re`, as it
always could.

Word positions are those of `str.find` on the lower-cased text: Hyperscan matches ASCII
letters without case (HS_FLAG_CASELESS), and every trigger is ASCII. A text's characters are
what the positions count; for a text that is not ASCII, the byte offsets of the UTF-8 form are
turned into character offsets by decoding what lies between consecutive hits (each hit
starts an ASCII character, a boundary). The one character whose lower case is an ASCII
letter without changing the text's length, the Kelvin sign (U+212A, lowered to `k`), is
left to `str.find`: the caller's path is used for a text that holds one.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

_state = threading.local()  # engine_disabled() per thread (the benchmark's peer)
_warned: list[bool] = []


def _load() -> Any:
    try:
        import hyperscan
    except ImportError as error:  # no wheel for this platform: the words are found by find
        if not _warned:
            _warned.append(True)
            log.warning("redaction runs without Hyperscan (%s): slower, the same masks", error)
        return None
    return hyperscan


_hyperscan: Any = _load()


def engine_name() -> str:
    """What finds the trigger words now: "Hyperscan" or "Python str.find"."""
    return "Hyperscan" if _active() else "Python str.find"


def _active() -> bool:
    return _hyperscan is not None and not getattr(_state, "disabled", False)


@contextlib.contextmanager
def engine_disabled() -> Iterator[None]:
    """Find words without the engine in this thread (to compare the two paths)."""
    before = getattr(_state, "disabled", False)
    _state.disabled = True
    try:
        yield
    finally:
        _state.disabled = before


class Words:
    """A set of lower-case ASCII words, compiled once, found in a text in one pass."""

    def __init__(self, words: tuple[str, ...]) -> None:
        if not all(w.isascii() and w == w.lower() and w for w in words):
            raise ValueError("trigger words are lower-case ASCII")
        self.words = words
        self._database: Any = None
        self._lock = threading.Lock()
        _register(self)

    def positions(self, text: str) -> dict[str, list[int]] | None:
        """Each word → the sorted start of every occurrence in `text` (as `str.find` on the
        lower-cased text finds them, overlapping ones too); None where the engine is not
        used (not installed, disabled, or a text with a Kelvin sign)."""
        if not _active():
            return None
        if text.isascii():
            return _survey(text, self).words[id(self)]
        if "\u212a" in text:
            return None
        data = text.encode("utf-8", "surrogatepass")
        return self._scan(data, lambda starts: _char_offsets(data, starts))

    def _scan(
        self, data: bytes, to_chars: Callable[[list[int]], list[int]] | None
    ) -> dict[str, list[int]]:
        database = self._compiled()
        words = self.words
        lengths = [len(w) for w in words]
        hits: list[list[int]] = [[] for _ in words]

        def on_match(word: int, _from: int, to: int, _flags: int, _context: object) -> None:
            hits[word].append(to - lengths[word])

        if data:
            _scan(database, data, on_match)
        if to_chars is not None:
            starts = sorted({at for found in hits for at in found})
            chars = dict(zip(starts, to_chars(starts), strict=True))
            hits = [[chars[at] for at in found] for found in hits]
        return {word: found for word, found in zip(words, hits, strict=True)}

    def _compiled(self) -> Any:
        with self._lock:
            if self._database is None:
                database = _hyperscan.Database(mode=_hyperscan.HS_MODE_BLOCK)
                database.compile(
                    expressions=[_literal(w) for w in self.words],
                    ids=list(range(len(self.words))),
                    elements=len(self.words),
                    flags=[_hyperscan.HS_FLAG_CASELESS] * len(self.words),
                )
                self._database = database
            return self._database


def _scan(database: Any, data: bytes, on_match: Callable[..., None]) -> None:
    """Scan with this thread's scratch space for `database` (Hyperscan's scratch may serve
    one scan at a time: threads that mask at once each have their own)."""
    scratches: dict[int, tuple[Any, Any]] = _state.__dict__.setdefault("scratches", {})
    kept = scratches.get(id(database))
    if kept is None or kept[0] is not database:  # (the database is held: its id stays its own)
        kept = scratches[id(database)] = (database, _hyperscan.Scratch(database))
    database.scan(data, match_event_handler=on_match, scratch=kept[1])


def _literal(word: str) -> bytes:
    """The word as a Hyperscan pattern: every byte written as an escape, so none is syntax."""
    return "".join(f"\\x{byte:02x}" for byte in word.encode("ascii")).encode("ascii")


def _char_offsets(data: bytes, starts: list[int]) -> list[int]:
    """The character offset of each sorted byte offset (each at a character boundary) in the
    UTF-8 (surrogatepass) `data`."""
    out: list[int] = []
    chars = 0
    previous = 0
    for at in starts:
        chars += len(data[previous:at].decode("utf-8", "surrogatepass"))
        out.append(chars)
        previous = at
    return out


# Python's `\s` holds \x1c-\x1f (NUL bytes are read as \x1c before the rules run) and
# Hyperscan's does not: a text holding one is left to Python `re`.
_UNSAFE = rb"[\x1c-\x1f]"


class Finder:
    """Where regexes match in ASCII text, found together in one pass: the position of the last
    character of each match. Only for patterns Hyperscan reads as Python does in ASCII text
    (literals, classes of ASCII characters, bounded repeats), and never in text holding
    \\x1c-\\x1f (Python's `\\s` holds them, Hyperscan's does not): None there."""

    def __init__(self, *sources: str) -> None:
        self.sources = sources
        _register(self)

    def last_characters(self, text: str) -> list[int] | None:
        if not _active() or not text.isascii():
            return None
        found = _survey(text, self)
        return None if found.unsafe else found.ends[id(self)]


# --- one pass for everything ---------------------------------------------------------------
#
# Every `Words` and `Finder` made is compiled into a few databases, each scanned over an ASCII
# text in one pass when one of its patterns is first asked about there: the rules' triggers,
# the lines the views start from, the base64 runs. The answer for the last text scanned is
# kept (per thread) until `forget`, since a text's triggers and its views are asked for one
# after the other.
#
# Hyperscan reports each pattern's matches whatever else its database holds, so how they are
# shared out changes no answer, only the cost. The words, and the finders that are a literal
# or a class of a few characters, are one database: literals alone compile to the engine's
# literal matcher in a few ms, where one regex among them makes the whole set compile as an
# automaton, ten times slower (each process compiles once, on its first text). Every other
# finder is a database of its own, compiled and scanned only where it is asked about (a
# text without `+` never asks for form parameters), and so is the check for \x1c-\x1f that
# every finder's answer needs; together they cost less scanned one by one than as one
# automaton.


class _Found:
    def __init__(self) -> None:
        self.words: dict[int, dict[str, list[int]]] = {}
        self.ends: dict[int, list[int]] = {}
        self.unsafe = False
        self.scanned: set[int] = set()  # the databases (their index) this text was scanned by
        self.data: bytes | None = None  # the text as bytes, once one was scanned


_Entry = tuple[bytes, int, "Words | Finder | None", int]  # (pattern, flags, owner, index)


class _Part:
    """One database, compiled when first used, and what each of its patterns is: a Words and
    the word's index, a Finder and -1, or None and -1 for the check for \\x1c-\\x1f."""

    def __init__(self, entries: list[_Entry]) -> None:
        self.expressions = [expression for expression, _, _, _ in entries]
        self.flags = [flag for _, flag, _, _ in entries]
        self.owners = [(owner, index) for _, _, owner, index in entries]
        self.database: Any = None

    def compiled(self) -> Any:
        with _combined_lock:
            if self.database is None:
                database = _hyperscan.Database(mode=_hyperscan.HS_MODE_BLOCK)
                database.compile(
                    expressions=self.expressions,
                    ids=list(range(len(self.expressions))),
                    elements=len(self.expressions),
                    flags=self.flags,
                )
                self.database = database
            return self.database


_registered: list[Words | Finder] = []
# [(the databases, owner's id → the index of its database)] once made for `_registered`; the
# check for \x1c-\x1f is the last database
_combined: list[tuple[list[_Part], dict[int, int]]] = []
_combined_lock = threading.RLock()


def _register(owner: Words | Finder) -> None:
    with _combined_lock:
        _registered.append(owner)
        _combined.clear()  # made again, with this one, when next needed


def _is_literal(source: str) -> bool:
    """Whether a finder's pattern is characters and classes of characters only (read as
    Python reads it, as a finder's pattern is), which Hyperscan's literal matcher takes."""
    c = re._constants  # type: ignore[attr-defined]
    try:
        parsed = re._parser.parse(source)  # type: ignore[attr-defined]
    except re.error:
        return False
    return all(
        op is c.LITERAL or (op is c.IN and all(o in (c.LITERAL, c.RANGE) for o, _ in av))
        for op, av in parsed
    )


def _parts() -> tuple[list[_Part], dict[int, int]]:
    with _combined_lock:
        if not _combined:
            literal: list[_Entry] = []
            alone: list[list[_Entry]] = []
            for owner in _registered:
                if isinstance(owner, Words):
                    literal.extend(
                        (_literal(word), _hyperscan.HS_FLAG_CASELESS, owner, index)
                        for index, word in enumerate(owner.words)
                    )
                    continue
                entries: list[_Entry] = [
                    (source.encode("ascii"), 0, owner, -1) for source in owner.sources
                ]
                if all(_is_literal(source) for source in owner.sources):
                    literal.extend(entries)
                else:
                    alone.append(entries)
            unsafe: list[_Entry] = [(_UNSAFE, _hyperscan.HS_FLAG_SINGLEMATCH, None, -1)]
            parts = [_Part(entries) for entries in (literal, *alone, unsafe) if entries]
            where = {id(o): i for i, part in enumerate(parts) for o, _ in part.owners if o}
            _combined.append((parts, where))
        return _combined[0]


def _survey(text: str, owner: Words | Finder | None = None) -> _Found:
    """What `owner` (None: everything registered) finds in ASCII `text`, each database
    scanned over the text in one pass when first needed (kept for the next ask)."""
    last = getattr(_state, "last", None)
    if last is not None and last[0] is text:
        found: _Found = last[1]
    else:
        found = _Found()
        known = getattr(_state, "known", None)
        if known is not None and known[0] is text:
            found.data = known[1]
        _state.last = (text, found)
    parts, where = _parts()
    if owner is None:
        needed = range(len(parts))
    elif isinstance(owner, Words):
        needed = range(where[id(owner)], where[id(owner)] + 1)
    else:  # a finder's answer needs the check for \x1c-\x1f too
        needed = range(where[id(owner)], where[id(owner)] + 1)
        if len(parts) - 1 not in found.scanned:
            _scan_part(parts, len(parts) - 1, text, found)
    for index in needed:
        if index not in found.scanned:
            _scan_part(parts, index, text, found)
    return found


def _scan_part(parts: list[_Part], index: int, text: str, found: _Found) -> None:
    part = parts[index]
    lengths = [len(o.words[i]) if isinstance(o, Words) else 0 for o, i in part.owners]
    lists: list[list[int] | None] = []
    for owner, i in part.owners:
        if isinstance(owner, Words):
            words = found.words.setdefault(id(owner), {})
            lists.append(words.setdefault(owner.words[i], []))
        elif owner is not None:
            lists.append(found.ends.setdefault(id(owner), []))
        else:
            lists.append(None)

    def on_match(index: int, _from: int, to: int, _flags: int, _context: object) -> None:
        hits = lists[index]
        if hits is None:
            found.unsafe = True
        else:
            hits.append(to - (lengths[index] or 1))

    if text:
        if found.data is None:
            found.data = text.encode("ascii")
        _scan(part.compiled(), found.data, on_match)
    found.scanned.add(index)


def decoded_from(text: str, data: bytes) -> None:
    """Say that `text` is `data` decoded, so that the scans of an ASCII `text` read `data`
    rather than an encoded copy (a 20 MB journal's copy cost a tenth of its scans); kept
    until `forget`."""
    _state.known = (text, data)


def forget() -> None:
    """Drop the answer kept for the last text, and `decoded_from`'s (they hold the text)."""
    _state.last = None
    _state.known = None


# A text edited in a few places (the rules' masks) is asked about again: its answer is the
# last one's, moved by the edits, and scanned again only on the lines an edit touched. Every
# match lies within one line and the line breaks around it (no word holds a line break, no
# finder's pattern matches one but as the character before or after a run), so a match on
# a line no edit touched, nor the line breaks around it, is the same match in both texts.


_CARRY_WHATEVER = 1 << 20  # below this, carried however much the edits touched


def carry(old: str, new: str, edits: list[tuple[int, int, str]]) -> bool:
    """Keep, for `new`, the answer for `old` (the last text asked about) moved by `edits`
    ((start, end, replacement) in `old`, in order, disjoint; `new` is `old` with them made),
    scanning again only the lines they touched. False (nothing kept) where the answer for
    `old` is not the one kept, the texts are not ASCII, `old` holds \x1c-\x1f, or the edits
    touched most of a large text."""
    last = getattr(_state, "last", None)
    if last is None or last[0] is not old or not new.isascii() or not edits:
        return False
    found: _Found = last[1]
    if found.unsafe:
        return False
    # the lines the edits touched, in `old` and in `new`: [start, end) from the line break
    # before them (or the text's start) to the line break after them (or the text's end),
    # both breaks included
    dirty_old: list[tuple[int, int]] = []
    dirty_new: list[tuple[int, int]] = []
    shift = 0
    for start, end, replacement in edits:
        placed, placed_end = start + shift, start + shift + len(replacement)
        shift += len(replacement) - (end - start)
        # an edit after a line break that ended `old` makes it no longer the last character,
        # where a `$` matched before it: the line before it is touched too
        back = 1 if start == len(old) and old.endswith("\n") else 0
        a_old = max(0, old.rfind("\n", 0, start - back))
        b_old = old.find("\n", end)
        b_old = len(old) if b_old == -1 else b_old + 1
        a_new = max(0, new.rfind("\n", 0, placed - back))
        b_new = new.find("\n", placed_end)
        b_new = len(new) if b_new == -1 else b_new + 1
        if dirty_old and a_old <= dirty_old[-1][1]:  # touching: one stretch
            dirty_old[-1] = (dirty_old[-1][0], b_old)
            dirty_new[-1] = (dirty_new[-1][0], b_new)
        else:
            dirty_old.append((a_old, b_old))
            dirty_new.append((a_new, b_new))
    if len(new) > _CARRY_WHATEVER and 2 * sum(b - a for a, b in dirty_new) > len(new):
        return False  # most of a large text touched (a log on one line): scanned again whole
    olds = [a for a, _ in dirty_old]
    ends = [b for _, b in dirty_old]
    shifts = [b_new - b_old for (_, b_old), (_, b_new) in zip(dirty_old, dirty_new, strict=True)]

    def moved(at: int, width: int) -> int | None:
        """Where a word of `width` at `at` in `old` (a finder's last character: width 0)
        lies in `new`; None when it is in a stretch scanned again (a finder's match that
        ends on a clean line starts at most at the line break before it, which no edit
        changed)."""
        i = bisect.bisect_right(ends, at)  # the stretches before it end at or before `at`
        if i < len(olds) and olds[i] < at + width:
            return None
        return at + (shifts[i - 1] if i else 0)

    parts, _ = _parts()
    carried = _Found()
    carried.scanned = set(found.scanned)  # the others are scanned over `new` when asked
    for owner_id, words in found.words.items():
        carried.words[owner_id] = {
            word: [p for at in hits if (p := moved(at, len(word))) is not None]
            for word, hits in words.items()
        }
    for owner_id, hits in found.ends.items():
        carried.ends[owner_id] = [p for at in hits if (p := moved(at, 0)) is not None]
    # the stretches scanned again in one pass, one after the other, and the character after
    # the last (a `$` matches before a newline that ends the text scanned): each starts with
    # a line break or the text's start and all but the last end with one, as in `new`, so
    # what is found in each is what is found there in `new`
    offsets: list[int] = []  # where each stretch starts in what is scanned
    size = 0
    for a, b in dirty_new:
        offsets.append(size)
        size += b - a
    last = dirty_new[-1][1]
    data = "".join([*(new[a:b] for a, b in dirty_new), new[last : last + 1]]).encode("ascii")
    for scanned in sorted(carried.scanned):
        part = parts[scanned]
        lengths = [len(o.words[i]) if isinstance(o, Words) else 0 for o, i in part.owners]
        lists = [
            carried.words[id(o)][o.words[i]]
            if isinstance(o, Words)
            else carried.ends[id(o)]
            if o
            else None
            for o, i in part.owners
        ]

        def on_match(
            index: int,
            _from: int,
            to: int,
            _flags: int,
            _context: object,
            lengths: list[int] = lengths,
            lists: list[list[int] | None] = lists,
        ) -> None:
            hits = lists[index]
            if hits is None:
                carried.unsafe = True
                return
            at = to - (lengths[index] or 1)
            i = bisect.bisect_right(offsets, at) - 1
            a, b = dirty_new[i]
            at += a - offsets[i]
            if at < b:
                hits.append(at)

        _scan(part.compiled(), data, on_match)
    for words in carried.words.values():
        for hits in words.values():
            if len(hits) > 1:
                hits.sort()
    for hits in carried.ends.values():
        if len(hits) > 1:
            hits.sort()
    _state.last = (new, carried)
    return True


# --- where a rule may match ------------------------------------------------------------------
#
# A regex rewritten into a pattern whose matches in an ASCII text are a superset of the
# regex's, compiled in Hyperscan's prefiltering mode (HS_FLAG_PREFILTER: the database matches
# a superset of what the pattern matches, never fewer; intel.github.io/hyperscan/
# dev-reference/compilation.html, "Prefiltering Mode"). Every match `re` can find ends where
# the engine reported one, so the places it reported are the only ones worth trying. The
# rewriting (`_superset`), node by node of the regex as Python parses it (`re._parser`,
# CPython v3.11.7 Lib/re/_parser.py):
# - every character class, `\d \w \s` and a literal under IGNORECASE are written out as the
#   ASCII characters Python's `re` matches with them in a str (`\s` is `str.isspace`, so it
#   holds \x1c-\x1f as Python's does); only ASCII texts are asked about, where a non-ASCII
#   character of the regex matches nothing;
# - lookahead and lookbehind are dropped (what is left matches more);
# - a regex runs in a whole text (`match` at a position, `finditer` through it) or in one
#   line (`finditer(text, start, line_end)`: the string ends at `line_end`, a newline or the
#   text's end): `^`, `\A`, `\b`, `\B` and a MULTILINE `$` mean the same there as in the
#   whole text Hyperscan reads; a `$` or `\Z` that is not MULTILINE would match at
#   `line_end` only in the cut string, so it is dropped;
# - a back-reference is its group's pattern again, a conditional group either branch, an
#   atomic group or possessive repeat a plain one, a lazy repeat a greedy one;
# - a repeat bounded above 64 is unbounded (large bounds make the compile slow, or refused).
# A pattern that may match the empty string, or that Hyperscan will not compile even so, is
# answered None: the caller tries every place, as it does without the engine.


class Prefilter:
    """Where a regex may match in an ASCII text, found by Hyperscan in one pass: the end of
    every match of its superset pattern (see above), so every match of the regex ends at one
    of them."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self._database: Any = None  # False once found not compilable: answered None
        self._lock = threading.Lock()

    def ends(self, text: str) -> list[int] | None:
        """The sorted end offsets of the matches of the superset pattern in `text`; None
        where the engine is not used (not installed, disabled, a text that is not ASCII, a
        pattern it cannot read)."""
        if not _active() or not text.isascii():
            return None
        database = self._compiled()
        if database is False:
            return None
        ends: list[int] = []

        def on_match(_id: int, _from: int, to: int, _flags: int, _context: object) -> None:
            ends.append(to)

        if text:
            _scan(database, text.encode("ascii"), on_match)
        return ends

    def _compiled(self) -> Any:
        with self._lock:
            if self._database is None:
                source = _superset(self.pattern)
                self._database = False
                if source is not None:
                    database = _hyperscan.Database(mode=_hyperscan.HS_MODE_BLOCK)
                    try:
                        database.compile(
                            expressions=[source],
                            ids=[0],
                            elements=1,
                            flags=[_hyperscan.HS_FLAG_PREFILTER],
                        )
                    except _hyperscan.error:
                        pass  # answered None: the caller tries every place, as without it
                    else:
                        self._database = database
            return self._database


_REPEAT_LIMIT = 64


def _superset(pattern: re.Pattern[str]) -> bytes | None:
    """`pattern` as a Hyperscan pattern that matches wherever it may (see above); None when
    it may match the empty string or holds something not handled here."""
    try:
        parsed = re._parser.parse(pattern.pattern, pattern.flags)  # type: ignore[attr-defined]
        groups: dict[int, Any] = {}
        _collect_groups(parsed, groups)
        source = _emit(parsed, pattern.flags, groups, 0)
    except (_Unhandled, RecursionError):
        return None
    if re.fullmatch(source, ""):  # (the output is Python syntax too)
        return None
    return source.encode("ascii")


class _Unhandled(Exception):
    pass


def _collect_groups(items: Any, groups: dict[int, Any]) -> None:
    c = re._constants  # type: ignore[attr-defined]
    for op, av in items:
        if op is c.SUBPATTERN:
            if av[0] is not None:
                groups[av[0]] = (av[3], av[1])
            _collect_groups(av[3], groups)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            _collect_groups(av[2], groups)
        elif op is c.BRANCH:
            for branch in av[1]:
                _collect_groups(branch, groups)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            _collect_groups(av[1], groups)
        elif op is c.ATOMIC_GROUP:
            _collect_groups(av, groups)
        elif op is c.GROUPREF_EXISTS:
            _collect_groups(av[1], groups)
            if av[2] is not None:
                _collect_groups(av[2], groups)


def _emit(items: Any, flags: int, groups: dict[int, Any], depth: int) -> str:
    c = re._constants  # type: ignore[attr-defined]
    if depth > 32:
        raise _Unhandled
    out: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            out.append(_class({av}, flags))
        elif op is c.NOT_LITERAL:
            out.append(_class(set(range(128)) - _cased({av}, flags), 0))
        elif op is c.ANY:
            out.append(_class(set(range(128)) - ({10} if not flags & re.S else set()), 0))
        elif op is c.IN:
            out.append(_class(_members(av, flags), 0))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, high, body = av
            inner = _emit(body, flags, groups, depth + 1)
            if high is c.MAXREPEAT or high > _REPEAT_LIMIT:
                out.append(f"(?:{inner}){{{low},}}")
            else:
                out.append(f"(?:{inner}){{{low},{high}}}")
        elif op is c.SUBPATTERN:
            _, add, remove, body = av
            out.append(f"(?:{_emit(body, (flags | add) & ~remove, groups, depth + 1)})")
        elif op is c.ATOMIC_GROUP:
            out.append(f"(?:{_emit(av, flags, groups, depth + 1)})")
        elif op is c.BRANCH:
            out.append("(?:" + "|".join(_emit(b, flags, groups, depth + 1) for b in av[1]) + ")")
        elif op is c.GROUPREF:
            body, group_flags = groups[av]
            out.append(f"(?:{_emit(body, flags | group_flags, groups, depth + 1)})")
        elif op is c.GROUPREF_EXISTS:
            yes = _emit(av[1], flags, groups, depth + 1)
            no = _emit(av[2], flags, groups, depth + 1) if av[2] is not None else ""
            out.append(f"(?:{yes}|{no})")
        elif op in (c.ASSERT, c.ASSERT_NOT):
            continue  # lookaround: dropped
        elif op is c.AT:
            if av in (c.AT_BEGINNING, c.AT_BEGINNING_LINE):
                out.append("(?m:^)" if flags & re.M else "(?:\\A)")
            elif av is c.AT_BEGINNING_STRING:
                out.append("(?:\\A)")
            elif av in (c.AT_END, c.AT_END_LINE) and flags & re.M:
                out.append("(?m:$)")
            elif av is c.AT_BOUNDARY:
                out.append("(?:\\b)")
            elif av is c.AT_NON_BOUNDARY:
                out.append("(?:\\B)")
            # a `$` or `\Z` that is not MULTILINE: dropped
        else:
            raise _Unhandled(op)
    return "".join(out)


def _cased(chars: set[int], flags: int) -> set[int]:
    if not flags & re.I:
        return {ch for ch in chars if ch < 128}
    out: set[int] = set()
    for ch in chars:
        for variant in {ch, ord(chr(ch).lower()), ord(chr(ch).upper())}:
            if variant < 128:
                out.add(variant)
    return out


_CATEGORIES: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": lambda ch: ch.isdigit(),
    "CATEGORY_NOT_DIGIT": lambda ch: not ch.isdigit(),
    "CATEGORY_SPACE": lambda ch: ch.isspace(),
    "CATEGORY_NOT_SPACE": lambda ch: not ch.isspace(),
    "CATEGORY_WORD": lambda ch: ch.isalnum() or ch == "_",
    "CATEGORY_NOT_WORD": lambda ch: not (ch.isalnum() or ch == "_"),
}


def _members(items: Any, flags: int) -> set[int]:
    """The ASCII characters a character class matches, as Python's `re` matches them in a
    str (`\\s` is `str.isspace`, `\\w` alphanumerics and `_`)."""
    c = re._constants  # type: ignore[attr-defined]
    negate = False
    chars: set[int] = set()
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            chars.add(av)
        elif op is c.RANGE:
            chars.update(range(av[0], min(av[1], 127) + 1))
            if flags & re.I:  # a range folds per character (A-Z also matches a-z)
                chars.update(ch for ch in range(128) if av[0] <= ord(chr(ch).swapcase()) <= av[1])
        elif op is c.CATEGORY:
            test = _CATEGORIES.get(str(av))
            if test is None:
                raise _Unhandled(av)
            chars.update(ch for ch in range(128) if test(chr(ch)))
        else:
            raise _Unhandled(op)
    chars = _cased(chars, flags)
    return set(range(128)) - chars if negate else chars


def _class(chars: set[int], flags: int) -> str:
    chars = _cased(chars, flags)
    if not chars:
        return "\\xff"  # nothing in ASCII: a byte no ASCII text holds
    ranges: list[list[int]] = []
    for ch in sorted(chars):
        if ranges and ranges[-1][1] == ch - 1:
            ranges[-1][1] = ch
        else:
            ranges.append([ch, ch])
    body = "".join(
        f"\\x{low:02x}" if low == high else f"\\x{low:02x}-\\x{high:02x}" for low, high in ranges
    )
    return f"[{body}]"
