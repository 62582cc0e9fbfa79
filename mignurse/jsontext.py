"""A document as the `-o json` of the read commands writes it: `json.dumps(document,
indent=2)`'s text, made by orjson's encoder (a C encoder; with `indent` the standard library
falls back to its pure-Python one, which took 1.6 s of a 4 s `nodes -o json` across ten
clusters of 530 nodes: benchmarks/bench_fleet.py).

The same text as `json.dumps(document, indent=2)`: the same layout (two spaces, `": "`, `[]`
and `{}` for empty containers) and every character outside printable ASCII escaped as
`\\uXXXX` (a UTF-16 pair above U+FFFF), as `ensure_ascii` does, so a bidi override or an
escape sequence from the cluster reaches a terminal as inert text. orjson writes those
characters raw, and a raw character other than the layout's line breaks can only be inside a
string there, so each is escaped afterwards. What differs: a float under 1e-4 is written
without an exponent (`0.00001`, not `1e-05`: the same value), and NaN or an infinity as `null`
(`json.dumps` wrote `NaN`, which JSON parsers refuse); none of the documents holds one. What
orjson cannot encode (an integer past 64 bits, a key that is not a string) goes to
`json.dumps`, which writes it as ever.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What ensure_ascii escapes (json.encoder ESCAPE_ASCII: `[\\"]|[^\ -~]`), less what orjson
# escaped already (quotes, backslashes, controls) and the layout's line breaks
_RAW = re.compile(r"[^\n -~]")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def dumps_indented(document: Any) -> str:
    """`json.dumps(document, indent=2)`, quickly (see the module's note)."""
    import orjson  # here, not above: `--help` and `--version` load no part of a read

    try:
        text = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(document, indent=2)
    if text.isascii() and "\x7f" not in text:
        return text
    return _RAW.sub(_escaped, text)
