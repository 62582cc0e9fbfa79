"""Text that came from outside (a cluster, a node, a bundle, a file) made inert for a terminal.

A terminal obeys what it is sent: ESC and C1 controls start sequences that set the clipboard
(OSC 52), the window title, hyperlinks (OSC 8) or clear the screen; bidi controls reorder what
is read; zero-width and other invisible format characters hide text. Every face shows such a
character visibly instead: C0 and C1 controls and DEL as `\\x1b`, `\\x9b`, `\\x7f` (tab, line
feed and carriage return as `\\t`, `\\n`, `\\r`: a tab breaks a table's columns), every other
format character (Unicode category Cf: bidi marks, overrides and isolates, zero-width
characters, the BOM, tags), line and paragraph separators, lone surrogates and the
variation/tag block U+E0000-U+E0FFF as `<U+202E>`. With `lines=True` (a journal in the pager)
real line feeds stay; nothing else does. Everything else (ASCII, accents, CJK, emoji, emoji
joined with U+200D, flag tag sequences) is left byte for byte. A backslash is left as it is,
so a name that holds the four characters `\\x1b` reads the same as an inert ESC: both are
harmless. JSON output never goes through here; it keeps the exact values.

The format characters are Unicode 14's category Cf (Python 3.11's `unicodedata`,
https://www.unicode.org/Public/14.0.0/ucd/extracted/DerivedGeneralCategory.txt); the
sequences are ECMA-48 (https://ecma-international.org/publications-and-standards/standards/ecma-48/)
and xterm's (https://invisible-island.net/xterm/ctlseqs/ctlseqs.html).
"""

from __future__ import annotations

import re

# Unicode 14 category Cf, as ranges (tests/hostile/test_escapes_inert.py checks the list
# against the running interpreter's unicodedata).
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
)
_UNSAFE = "\x7f-\x9f" + _FORMAT + "\u2028\u2029\ud800-\udfff\U000e0000-\U000e0fff"
# Pictographs that U+200D joins into one emoji (👩‍🔧, 🏳️‍🌈): Unicode's emoji blocks.
_PICTOGRAPH = "\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff"
_EMOJI_ZWJ = f"[{_PICTOGRAPH}]\ufe0f?(?:\u200d[{_PICTOGRAPH}]\ufe0f?)+"
# A subdivision flag: black flag, tag letters, cancel tag (Unicode TS #51, ED-14c).
_TAG_FLAG = "\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f"

# Compiled when first needed: most text is printable (or ASCII) and never reaches them, and
# compiling the Unicode classes costs every command a few milliseconds of start-up.
_PATTERNS = {
    "one_line": f"(?P<keep>{_EMOJI_ZWJ}|{_TAG_FLAG})|[\x00-\x1f{_UNSAFE}]",
    "lines": f"(?P<keep>{_EMOJI_ZWJ}|{_TAG_FLAG})|[\x00-\x09\x0b-\x1f{_UNSAFE}]",
    "lines_tabs": f"(?P<keep>{_EMOJI_ZWJ}|{_TAG_FLAG})|[\x00-\x08\x0b-\x1f{_UNSAFE}]",
    # The same characters alone, without the sequences kept: the quick look for any at all.
    "any_lines": f"[\x00-\x09\x0b-\x1f{_UNSAFE}]",
    "any_lines_tabs": f"[\x00-\x08\x0b-\x1f{_UNSAFE}]",
    # rich's markup escape (rich/markup.py `escape`, rich 13-15): a backslash before a tag.
    "markup_tag": r"(\\*)(\[[a-z#/@][^[]*?])",
}
_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(name: str) -> re.Pattern[str]:
    pattern = _compiled.get(name)
    if pattern is None:
        pattern = _compiled[name] = re.compile(_PATTERNS[name])
    return pattern


# The ASCII bytes a page may hold as they are (deleted from it, nothing must be left).
_ASCII_TEXT = bytes(range(0x20, 0x7F)) + b"\n"
_ASCII_TEXT_TABS = _ASCII_TEXT + b"\t"

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def _replace(match: re.Match[str]) -> str:
    kept = match.group("keep")
    return kept if kept is not None else _visible(match.group())


def inert(text: str, *, lines: bool = False, tabs: bool = False) -> str:
    """`text` safe to write to a terminal: every control, escape and invisible format
    character shown visibly. `lines`: real line feeds stay (a multi-line page); `tabs` (with
    `lines`): tabs stay too (a command's whole output, where a document may hold them)."""
    if text.isprintable():  # the common case, in C: nothing to do
        return text
    if lines:  # the line feeds (and tabs) that made it "unprintable" may be all there is
        if text.isascii():  # O(1) in CPython; then only C0 controls and DEL can be there
            if not text.encode().translate(None, _ASCII_TEXT_TABS if tabs else _ASCII_TEXT):
                return text
        elif _pattern("any_lines_tabs" if tabs else "any_lines").search(text) is None:
            return text
        return _pattern("lines_tabs" if tabs else "lines").sub(_replace, text)
    return _pattern("one_line").sub(_replace, text)


def inert_name(text: str, limit: int = 120) -> str:
    """A name from outside (a context, a user), quoted, cut at `limit` characters and made
    inert once: `'x\x1b]0;T'`. Not repr() of it, which writes some escapes its own way, nor
    repr() of the inert text, which doubles every backslash inert() has just written."""
    kept = inert(text if len(text) <= limit else text[: limit - 1] + "…")
    quote = '"' if "'" in kept and '"' not in kept else "'"
    return f"{quote}{kept}{quote}"


def inert_markup(text: str, *, lines: bool = False) -> str:
    """`inert(text)` that is also plain inside rich (or Textual) markup: `[link=…]`, `[/]`
    and every other tag in it are shown, not obeyed."""
    return _pattern("markup_tag").sub(r"\1\1\\\2", inert(text, lines=lines))
