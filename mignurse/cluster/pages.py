"""A list page from the API server, decoded within bounds: its own metadata, then its items.

A page of ordinary size is parsed whole by orjson (the fast way). A larger one, from a
server that ignored `limit=`, is walked item by item: each item is cut out of the body and
parsed alone, so memory follows one item, not the page's whole tree. Whatever is wrong
with a page (not JSON, cut short, not UTF-8, nested too deep, an item that is not an
object, too many items) is a `PageError` whose text is one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import orjson

from mignurse.gcpause import paused_gc
from mignurse.untrusted import PAGE_ITEMS

WHOLE_PAGE_BYTES = 8 * 2**20  # a page of 500 nodes is about 2 MiB: parsed whole below this
# An object nested deeper is refused: what reads a raw object further (json.dumps into a
# bundle, orjson.dumps, a recursive walk) must not hit its own limit (orjson.dumps: 255).
MAX_DEPTH = 254

_META_KEY = b'"metadata":'
_decoder = json.JSONDecoder()
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Inside a container only strings and brackets matter: the brackets in strings are skipped.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_SCALAR = re.compile(rb"-?[0-9][0-9.eE+-]*|true|false|null")
_SPACE = re.compile(rb"[ \t\r\n]*")


# A node's status.images: up to 50 images (kubelet's --node-status-max-images), each its
# names and size, about half a GPU node's JSON, and nothing mignurse reads. The API server
# writes it after nodeInfo, as an array of objects of `names` and `sizeBytes` only
# (k8s.io/api v0.34.0 core/v1/types.go `NodeStatus`, `ContainerImage`).
_IMAGES = b',"images":[{'
_IMAGES_END = b"}]"


def without_images(body: bytes) -> bytes:
    """A list page of nodes with each `"images":[{…}]` member cut out (`body` itself when
    there is none): the page parses in about half the time. The first `}]` after a member's
    start ends it, as image names are references (no brace, bracket or quote: the
    distribution/reference grammar) and `sizeBytes` a number. Inside a JSON string every
    quote is escaped, so the member's start is never found in one. A page that breaks that
    shape comes out as something that is not JSON: the caller parses `body` as it came."""
    find = body.find
    start = find(_IMAGES)
    if start < 0:
        return body
    view = memoryview(body)
    parts = []
    at = 0
    while start >= 0:
        end = find(_IMAGES_END, start)
        if end < 0:
            return body
        parts.append(view[at:start])
        at = end + len(_IMAGES_END)
        start = find(_IMAGES, at)
    parts.append(view[at:])
    return b"".join(parts)


class PageError(ValueError):
    """A page that cannot be read; str() is one line (no part of the page in it)."""


def list_metadata(body: bytes) -> dict[str, Any]:
    """A list's own metadata (resourceVersion, continue) without parsing its items.

    The API server writes kind, apiVersion and metadata before items; anything else
    falls back to reading the page's top level."""
    head = body[:8192]
    at = head.find(_META_KEY)
    if at >= 0 and b'"items"' not in head[:at]:
        try:
            text = head[at + len(_META_KEY) :].decode("utf-8", "replace").lstrip()
            meta, _end = _decoder.raw_decode(text)
        except (ValueError, RecursionError):
            meta = None
        if isinstance(meta, dict):
            return meta
    if len(body) <= WHOLE_PAGE_BYTES:
        doc = _loads(body)
        if not isinstance(doc, dict):
            raise PageError(f"it is a JSON {_kind(doc)}, not a list object")
        found = doc.get("metadata")
        return found if isinstance(found, dict) else {}
    meta, _items = _top_level(body)
    return meta


def page_items(body: bytes) -> list[dict[str, Any]] | Iterator[dict[str, Any]]:
    """The items of a list page, each checked to be an object, at most PAGE_ITEMS of them:
    a list when the page was parsed whole, else an iterator that walks the page."""
    cap = PAGE_ITEMS.value()
    if len(body) > WHOLE_PAGE_BYTES:
        return _walked_items(body, cap)
    doc = _loads(body)
    if not isinstance(doc, dict):
        raise PageError(f"it is a JSON {_kind(doc)}, not a list object")
    items = doc.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise PageError(f"its items are a JSON {_kind(items)}, not an array")
    if len(items) > cap:
        raise _too_many(cap)
    if not set(map(type, items)) <= {dict}:  # one pass in C; the index only when one is not
        for index, item in enumerate(items):
            _checked(item, index)
    return items


def _walked_items(body: bytes, cap: int) -> Iterator[dict[str, Any]]:
    _meta, span = _top_level(body)
    if span is None:
        return
    for index, item in enumerate(_array_items(body, span)):
        if index >= cap:
            raise _too_many(cap)
        yield _checked(item, index)


def check_depth(items: list[dict[str, Any]]) -> None:
    """Refuse objects nested deeper than MAX_DEPTH (orjson.loads allows 1,024): orjson's
    serializer stops at 255 levels, in C, a page at a time."""
    try:
        orjson.dumps(items)
    except TypeError:
        raise PageError(f"an object in it is nested deeper than {MAX_DEPTH} levels") from None


def _too_many(cap: int) -> PageError:
    refusal = PAGE_ITEMS.refusal("it holds more objects than one page may")
    return PageError(f"{refusal}; the server ignored the page size mignurse asked for")


def _checked(item: Any, index: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise PageError(f"item {index + 1} is a JSON {_kind(item)}, not an object")
    return item


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number"
    )


def _loads(data: bytes) -> Any:
    try:
        with paused_gc():
            return orjson.loads(data)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        raise PageError(why_not_json(data, exc)) from None


def why_not_json(data: bytes, exc: ValueError | RecursionError) -> str:
    """Why orjson refused `data`, in words (never the data itself)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"it is not UTF-8 text (byte {bad.start:,})"
    said = str(exc).lower()
    if isinstance(exc, RecursionError) or "recursion" in said or "depth" in said:
        return "it is nested deeper than 1,024 levels"
    if not data.strip():
        return "it is empty"
    pos = getattr(exc, "pos", 0)
    if pos >= len(data.rstrip()):
        return f"it ends in the middle (after {len(data):,} bytes): the answer was cut short"
    if data.lstrip()[:1] == b"<":
        return "it is HTML or XML, not JSON"
    return f"it is not valid JSON at byte {pos:,}"


# -- walking a page too large to parse whole ----------------------------------------------


def _cut_short(body: bytes) -> PageError:
    return PageError(f"it ends in the middle (after {len(body):,} bytes): the answer was cut short")


def _skip_space(body: bytes, pos: int) -> int:
    found = _SPACE.match(body, pos)
    return found.end() if found else pos


def _value_end(body: bytes, pos: int) -> int:
    """Where the JSON value that starts at `pos` ends (one past it)."""
    if pos >= len(body):
        raise PageError(
            f"it ends in the middle (after {len(body):,} bytes): the answer was cut short"
        )
    first = body[pos : pos + 1]
    if first == b'"':
        found = _STRING.match(body, pos)
        if found is None:
            raise PageError(f"a string at byte {pos:,} never ends: the answer was cut short")
        return found.end()
    if first in (b"{", b"["):
        depth = 0
        for token in _TOKEN.finditer(body, pos):
            mark = token.group()
            if mark in (b"{", b"["):
                depth += 1
                if depth > MAX_DEPTH:
                    raise PageError(f"it is nested deeper than {MAX_DEPTH} levels")
            elif mark in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    return token.end()
        raise PageError(
            f"it ends in the middle (after {len(body):,} bytes): the answer was cut short"
        )
    found = _SCALAR.match(body, pos)
    if found is None:
        raise PageError(f"it is not valid JSON at byte {pos:,}")
    return found.end()


def _top_level(body: bytes) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """The page's metadata and where its items array lies, without parsing the items."""
    pos = _skip_space(body, 0)
    if body[pos : pos + 1] != b"{":
        try:
            body[:4096].decode("utf-8")
        except UnicodeDecodeError as bad:
            if bad.start < 4000:
                raise PageError(f"it is not UTF-8 text (byte {bad.start:,})") from None
        raise PageError("it is not a JSON object")
    pos = _skip_space(body, pos + 1)
    meta: dict[str, Any] = {}
    items: tuple[int, int] | None = None
    if body[pos : pos + 1] == b"}":
        return meta, items
    while True:
        key_end = _value_end(body, pos)
        if body[pos : pos + 1] != b'"':
            raise PageError(f"it is not valid JSON at byte {pos:,}")
        key = _loads(body[pos:key_end])
        pos = _skip_space(body, key_end)
        if body[pos : pos + 1] != b":":
            raise PageError(f"it is not valid JSON at byte {pos:,}")
        start = _skip_space(body, pos + 1)
        end = _value_end(body, start)
        if key == "metadata":
            found = _loads(body[start:end])
            meta = found if isinstance(found, dict) else {}
        elif key == "items":
            if body[start : start + 1] == b"[":
                items = (start, end)
            elif body[start:end] != b"null":
                raise PageError("its items are not a JSON array")
        pos = _skip_space(body, end)
        mark = body[pos : pos + 1]
        if mark == b"}":
            return meta, items
        if mark != b",":
            if pos >= len(body):
                raise _cut_short(body)
            raise PageError(f"it is not valid JSON at byte {pos:,}")
        pos = _skip_space(body, pos + 1)


def _array_items(body: bytes, span: tuple[int, int]) -> Iterator[Any]:
    start, end = span
    pos = _skip_space(body, start + 1)
    if body[pos : pos + 1] == b"]":
        return
    while pos < end:
        item_end = _value_end(body, pos)
        yield _loads(body[pos:item_end])
        pos = _skip_space(body, item_end)
        mark = body[pos : pos + 1]
        if mark == b"]":
            return
        if mark != b",":
            raise PageError(f"it is not valid JSON at byte {pos:,}")
        pos = _skip_space(body, pos + 1)
