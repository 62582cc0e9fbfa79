"""Deflate segments made apart, joined into one gzip member."""

from __future__ import annotations

import gzip
import io
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.collect.gzjoin import Deflater, GzipJoiner, crc32_combine


@settings(max_examples=200, deadline=None)
@given(a=st.binary(max_size=5000), b=st.binary(max_size=5000))
def test_crc32_combine_equals_the_crc_of_the_concatenation(a: bytes, b: bytes) -> None:
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@settings(max_examples=50, deadline=None)
@given(parts=st.lists(st.lists(st.binary(max_size=3000), max_size=4), max_size=6))
def test_joined_segments_are_one_gzip_member_of_everything(parts: list[list[bytes]]) -> None:
    out = io.BytesIO()
    joiner = GzipJoiner(out, mtime=1_700_000_000)
    for writes in parts:
        segment = Deflater()
        for data in writes:
            segment.write(data)
        joiner.append(segment.segment())
    joiner.close()
    expected = b"".join(b"".join(writes) for writes in parts)
    assert gzip.decompress(out.getvalue()) == expected
    assert joiner.length == len(expected)
    # one member: a plain zlib gzip decoder stops at its end with nothing left over
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert decoder.decompress(out.getvalue()) == expected and decoder.eof
    assert decoder.unused_data == b""
