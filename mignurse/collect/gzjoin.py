"""One gzip file written from deflate segments compressed in other processes (as pigz does).

A bundle is one `.tar.gz`. Compressing it in the writing process alone made that process the
bottleneck of a large collection (deflate runs at ~300 MB/s per core), so each node's tar
members are compressed where they are redacted, in a worker, as a raw deflate *segment*:
blocks ended with Z_SYNC_FLUSH (byte-aligned, none marked final, no back-reference into
another segment). Segments laid end to end are one valid deflate stream; `GzipJoiner` puts
the gzip header before them and, on close, an empty final block and the trailer: the CRC-32
of everything (combined from each segment's own CRC and length) and the length mod 2^32.
The result is a single ordinary gzip member, so `tar xzf`, `gunzip` and Python's `tarfile`
in both random-access and stream (`r|gz`) modes read it.

The segments are compressed, and their CRC-32 taken, by ISA-L (`isal` on PyPI, the bindings of
intel/isa-l's igzip: python-isal.readthedocs.io): on ~20 MB of node journals its level 1 takes
a fifth of zlib's level-1 time for output a little smaller, and its CRC-32 a tenth. Its output
is plain deflate, so every reader above reads it as before.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from isal import isal_zlib

LEVEL = 1  # see bundle.py: the node may be gone in minutes


@dataclass(frozen=True)
class Segment:
    """Raw deflate data ending on a byte boundary, with the CRC-32 and length of its input."""

    data: bytes
    crc: int
    length: int


class Deflater:
    """Compresses a sequence of writes into one `Segment`."""

    def __init__(self, level: int = LEVEL) -> None:
        self._z = isal_zlib.compressobj(level, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS)
        self._parts: list[bytes] = []
        self._crc = 0
        self._length = 0

    def write(self, data: bytes) -> None:
        if data:
            self._parts.append(self._z.compress(data))
            self._crc = isal_zlib.crc32(data, self._crc)
            self._length += len(data)

    @property
    def length(self) -> int:
        return self._length

    def segment(self) -> Segment:
        self._parts.append(self._z.flush(isal_zlib.Z_SYNC_FLUSH))
        return Segment(b"".join(self._parts), self._crc, self._length)


class GzipJoiner:
    """Writes a gzip member to `out` from segments, in the order they are appended."""

    def __init__(self, out: BinaryIO, *, mtime: int) -> None:
        self._out = out
        self._crc = 0
        self._length = 0
        # magic, deflate, no flags, mtime, fastest-compression hint (XFL 4), Unix
        out.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime & 0xFFFFFFFF) + b"\x04\x03")

    def append(self, segment: Segment) -> None:
        self._out.write(segment.data)
        self._crc = crc32_combine(self._crc, segment.crc, segment.length)
        self._length += segment.length

    @property
    def length(self) -> int:
        """Bytes of uncompressed input so far."""
        return self._length

    def close(self) -> None:
        # a fresh compressor finishing on no input emits exactly one empty final block
        self._out.write(zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS).flush())
        self._out.write(struct.pack("<II", self._crc, self._length & 0xFFFFFFFF))


# --- CRC-32 combination (zlib's crc32_combine, which Python's zlib does not expose) -----------
# Polynomials over GF(2) in reflected bit order, as in zlib's crc32.c: multiply modulo the
# CRC polynomial, and x^(2^k) tabulated so that x^(8·len2) costs log2(len2) multiplications.

_POLY = 0xEDB88320
_ONE = 1 << 31  # x^0 in reflected order


def _multmodp(a: int, b: int) -> int:
    m = _ONE
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                break
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


def _x2n_table() -> list[int]:
    table = [0] * 32
    p = _ONE >> 1  # x^1
    table[0] = p
    for n in range(1, 32):
        p = _multmodp(p, p)
        table[n] = p
    return table


_X2N = _x2n_table()


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc32(A), crc32(B) and len(B)."""
    p = _ONE
    n, k = len2, 3  # x^(8·len2) = x^(len2 · 2^3)
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc1) ^ crc2
