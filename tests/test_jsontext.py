"""`-o json` text made by orjson is `json.dumps(document, indent=2)`'s text, byte for byte:
every character outside printable ASCII escaped (a bidi override, an escape sequence, an
emoji as its UTF-16 pair), the same layout, and what orjson refuses written by json."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.jsontext import dumps_indented

# floats under 1e-4 are written without an exponent by orjson (the same value): apart
_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: f == 0 or abs(f) >= 1e-4
)
_scalars = st.none() | st.booleans() | st.integers() | _floats | st.text()
_documents = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_documents)
def test_the_text_is_json_dumps_indent_2s(document: object) -> None:
    assert dumps_indented(document) == json.dumps(document, indent=2)


def test_what_a_cluster_may_send_is_escaped_as_json_escaped_it() -> None:
    hostile = {
        "name": "gpu-\u202eevil\u2066",  # bidi override and isolate
        "reason": "\x1b]8;;http://x\x07link\x1b[0m\x7f\x00",  # OSC 8, CSI, DEL, NUL
        "emoji": "\U0001f600",
        "surrogate": "\udc80",  # a byte that was not UTF-8, read with surrogateescape
        "big": 1 << 70,  # past 64 bits: orjson refuses it
    }
    text = dumps_indented(hostile)
    assert text == json.dumps(hostile, indent=2)
    assert text.isascii() and "\x7f" not in text
    assert "\\u202e" in text and "\\ud83d\\ude00" in text and "\\u001b" in text


def test_small_floats_keep_their_value_and_nan_is_null() -> None:
    assert json.loads(dumps_indented([1e-05, 2.5e-9])) == [1e-05, 2.5e-9]
    assert dumps_indented({"k": [math.nan]}) == '{\n  "k": [\n    null\n  ]\n}'


_items = st.lists(st.dictionaries(st.text(), _documents, max_size=4), max_size=4)


@pytest.mark.deep
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _documents, max_size=4), st.lists(_items, max_size=4))
def test_a_several_cluster_answer_joined_from_parts_is_the_whole_one_s_text(
    head: dict[str, object], parts: list[list[dict[str, object]]]
) -> None:
    """`nodes` across clusters: each cluster's items written where it was read, joined into
    the answer, are the text of the answer written whole."""
    from mignurse.cli.nodes import _items_text, _json_answer

    head.pop("nodes", None)
    whole = {**head, "nodes": [item for part in parts for item in part]}
    assert _json_answer(head, [_items_text(part) for part in parts]) == dumps_indented(whole)
