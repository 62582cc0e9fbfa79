"""Reading the few protobuf request bodies kubectl sends to the simulator.

kubectl's typed clients POST `application/vnd.kubernetes.protobuf`: the `k8s\\x00` magic, a
runtime.Unknown envelope (typeMeta, raw) and the object in the field numbers of
k8s.io/api v0.32 `generated.proto`. Only the kinds kubectl creates are decoded:
SelfSubjectAccessReview (`auth can-i`), SelfSubjectReview (`auth whoami`), Eviction
(`drain`) and DeleteOptions; answers go back as JSON, which those clients also accept.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
JsonDict = dict[str, Any]


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint or bytes) in wire order."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


# field number → (JSON name, nested layout or "string" / "int" / "bool" / "strings")
Layout = dict[int, tuple[str, Any]]
OBJECT_META: Layout = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
}
RESOURCE_ATTRIBUTES: Layout = {
    1: ("namespace", "string"),
    2: ("verb", "string"),
    3: ("group", "string"),
    4: ("version", "string"),
    5: ("resource", "string"),
    6: ("subresource", "string"),
    7: ("name", "string"),
}
NON_RESOURCE_ATTRIBUTES: Layout = {1: ("path", "string"), 2: ("verb", "string")}
DELETE_OPTIONS: Layout = {
    1: ("gracePeriodSeconds", "int"),
    3: ("orphanDependents", "bool"),
    4: ("propagationPolicy", "string"),
    5: ("dryRun", "strings"),
}
LAYOUTS: dict[str, Layout] = {
    "SelfSubjectAccessReview": {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            {
                1: ("resourceAttributes", RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    "SelfSubjectReview": {1: ("metadata", OBJECT_META)},
    "Eviction": {1: ("metadata", OBJECT_META), 2: ("deleteOptions", DELETE_OPTIONS)},
    "DeleteOptions": DELETE_OPTIONS,
}


def _decode(data: bytes, layout: Layout) -> JsonDict:
    out: JsonDict = {}
    for number, value in fields(data):
        if number not in layout:
            continue
        name, kind = layout[number]
        if isinstance(kind, dict):
            if isinstance(value, bytes):
                out[name] = _decode(value, kind)
        elif kind == "string" and isinstance(value, bytes):
            out[name] = value.decode("utf-8", "replace")
        elif kind == "strings" and isinstance(value, bytes):
            out.setdefault(name, []).append(value.decode("utf-8", "replace"))
        elif kind == "int" and isinstance(value, int):
            out[name] = value - (1 << 64) if value >= 1 << 63 else value
        elif kind == "bool" and isinstance(value, int):
            out[name] = bool(value)
    return out


def decode(body: bytes) -> JsonDict:
    """A protobuf request body as the JSON object it stands for."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    api_version = kind = ""
    raw = b""
    for number, value in fields(body[len(MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            for n, v in fields(value):
                if n == 1 and isinstance(v, bytes):
                    api_version = v.decode()
                elif n == 2 and isinstance(v, bytes):
                    kind = v.decode()
        elif number == 2 and isinstance(value, bytes):
            raw = value
    layout = LAYOUTS.get(kind)
    if layout is None:
        raise ProtobufError(f"the simulator does not read {kind or 'unknown'} in protobuf")
    return {"kind": kind, "apiVersion": api_version, **_decode(raw, layout)}
