"""Node archives a broken or hostile node might send, generated in milliseconds: gzip bombs
(a few MB that unpack to gigabytes), archives split into several gzip members, archives with
too many entries or nested archives mignurse cannot open."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib

from mignurse.collect.gzjoin import crc32_combine

MiB = 2**20
ZERO_MiB = bytes(MiB)


def tar_bytes(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def tar_gz(files: dict[str, bytes]) -> bytes:
    return gzip.compress(tar_bytes(files), compresslevel=1)


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(tarfile.GNU_FORMAT)


def gzip_bomb(
    unpacked: int, *, before: dict[str, bytes] | None = None, name: str = "node/kubelet.log"
) -> bytes:
    """One gzip member holding a tar whose member `name` is `unpacked` bytes of zeros, after
    the files in `before`. Deflate restarts at a full flush, so every further
    MiB of zeros compresses to the same bytes: the bomb is one compressed MiB repeated, and
    its CRC is combined rather than computed over gigabytes."""
    head = b"".join(
        _header(name, len(data)) + data + bytes(-len(data) % tarfile.BLOCKSIZE)
        for name, data in (before or {}).items()
    )
    head += _header(name, unpacked)
    chunks = unpacked // MiB
    rest = unpacked - chunks * MiB
    tail = bytes(rest + (-unpacked) % tarfile.BLOCKSIZE + 2 * tarfile.BLOCKSIZE)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(ZERO_MiB) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(ZERO_MiB) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert block == again, "deflate did not restart at the full flush"
    last = deflate.compress(tail) + deflate.flush()
    crc = zlib.crc32(head)
    zero_crc = zlib.crc32(ZERO_MiB)
    for _ in range(chunks):
        crc = crc32_combine(crc, zero_crc, MiB)
    crc = crc32_combine(crc, zlib.crc32(tail), len(tail))
    size = len(head) + chunks * MiB + len(tail)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
    trailer = crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
    return b"".join([header, first, block * chunks, last, trailer])


def gzip_of_zeros(unpacked: int) -> bytes:
    """A gzip file of `unpacked` zero bytes (a whole number of MiB), made in milliseconds as
    `gzip_bomb` makes its member: one compressed MiB repeated."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = deflate.compress(ZERO_MiB) + deflate.flush(zlib.Z_FULL_FLUSH)
    last = deflate.flush()
    crc, zero_crc = 0, zlib.crc32(ZERO_MiB)
    for _ in range(unpacked // MiB):
        crc = crc32_combine(crc, zero_crc, MiB)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
    trailer = crc.to_bytes(4, "little") + (unpacked & 0xFFFFFFFF).to_bytes(4, "little")
    return header + block * (unpacked // MiB) + last + trailer


def split_members(data: bytes, parts: int) -> bytes:
    """`data` gzip'd as `parts` members one after another, as `cat a.gz b.gz` makes."""
    step = -(-len(data) // parts)
    return b"".join(gzip.compress(data[i : i + step]) for i in range(0, len(data), step))


def many_members_bomb(files: int, file_size: int) -> bytes:
    """A tar of `files` files of `file_size` zeros, each in its own gzip member (each member
    compressed once and repeated)."""
    one = gzip.compress(
        _header("node/x.log", file_size) + bytes(file_size + (-file_size) % tarfile.BLOCKSIZE)
    )
    return one * files + gzip.compress(bytes(2 * tarfile.BLOCKSIZE))


def zip_file(name: str, data: bytes) -> bytes:
    import zipfile

    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as archive:
        archive.writestr(name, data)
    return raw.getvalue()
