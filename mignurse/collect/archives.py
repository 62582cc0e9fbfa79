"""Archives from a node, opened within limits: the node's own archive as a stream, and the
archives inside its files (Bottlerocket's `bottlerocket-logs.tar.gz`, a gzip'd report), each
masked member by member and packed again in the same format, or left out and said so.

Compressed streams are read as gunzip, bunzip2 and unxz read them: one member after another
(a gzip file is "a series of members", RFC 1952 §2.2; bzip2 and xz concatenate streams the
same way), trailing zero padding ignored. Every byte unpacked is charged to one `Budget` per
node, so a small archive that unpacks to gigabytes is refused after the limit, not read to
its end; a member larger than `MAX_MEMBER_BYTES` is left out (the node's collector caps each
source at 50 MiB, mignurse/nodeaccess/script.py), archives nest at most `MAX_NESTING` deep,
and zip, zstd, 7z and rar archives, which the standard library cannot open, are left out.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zlib
from collections.abc import Callable
from typing import IO, Any, cast

from isal import isal_zlib

from mignurse.collect.redact import Masked, MaskTimeout, TextMask, mask_secrets

MAX_NODE_UNPACKED_BYTES = 2**30  # a node's archive and the archives in it, unpacked
MAX_MEMBER_BYTES = 64 * 2**20  # one file, held in memory while it is masked
MAX_MEMBERS = 2000  # tar entries in one archive (a node sends ~30, logdog ~100)
MAX_NESTING = 3  # node archive → bottlerocket-logs.tar.gz → a .gz inside it
_CHUNK = 256 * 1024

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "rar"),
)
UNREADABLE = frozenset({"zstd", "zip", "7z", "rar"})
ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError)
# gzip members are inflated by ISA-L (`isal`, already the bundle's deflater): on a node's
# 20 MB of journals in half zlib's time, with the same header, CRC-32 and length checks but
# the reserved header flags, checked here as zlib checks them (RFC 1952 §2.3.1); its errors
# are raised as zlib's, so every caller that reads zlib.error as a damaged archive reads them
_ZLIB = type(isal_zlib.decompressobj())
# (isal's stub declares `error` an instance; it is the exception class)
_ISAL_ERROR = cast(type[Exception], isal_zlib.error)
_GZIP_RESERVED_FLAGS = 0xE0


class LimitExceeded(Exception):
    """A node's archive unpacks to more than its budget; str() says so in one line."""


class Budget:
    """Bytes a node's archives may unpack to, all of them together."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_NODE_UNPACKED_BYTES if limit is None else limit
        self.used = 0

    def take(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise LimitExceeded(
                f"the node's archive unpacks to more than {self.limit // 2**20} MiB "
                "(the limit per node): what followed was left out"
            )


def sniff(head: bytes) -> str | None:
    """The compression or archive format that `head` (the first bytes) starts, if any."""
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def is_tar(block: bytes) -> bool:
    """Whether `block` (the first 512 bytes) is a tar header: ustar magic or a valid
    checksum (old v7 tars have no magic)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    if block[257:262] == b"ustar":
        return True
    try:
        tarfile.TarInfo.frombuf(block[: tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


class Unpacked(io.RawIOBase):
    """The bytes of a gzip, bzip2 or xz stream (several members in a row included) or of a
    plain one, as its tool would write them, each charged to `budget`."""

    def __init__(self, source: IO[bytes] | bytes, budget: Budget) -> None:
        super().__init__()
        self._source: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
        self._budget = budget
        self._input = self._source.read(8)
        self.kind = sniff(self._input)
        self._header_error = False
        # unpacked and not read yet: pieces joined once when read, not a buffer grown and
        # shifted (growing it copied a file read whole several times over)
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._decoder: Any = self._new_decoder()
        self._in_member = self._decoder is not None
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        want = -1 if size is None else size  # below 0: to the end
        while (want < 0 or self._buffered < want) and self._fill():
            pass
        pieces, self._pieces = self._pieces, []
        if 0 <= want < self._buffered:  # the last piece split, the others joined as they are
            over = self._buffered - want
            last = pieces[-1]
            pieces[-1] = last[: len(last) - over]
            self._pieces = [last[len(last) - over :]]
        data = b"".join(pieces)
        self._buffered = len(self._pieces[0]) if self._pieces else 0
        return data

    def peek(self, size: int) -> bytes:
        while self._buffered < size and self._fill():
            pass
        if len(self._pieces) > 1:
            self._pieces = [b"".join(self._pieces)]
        return self._pieces[0][:size] if self._pieces else b""

    def _new_decoder(self) -> Any:
        if self.kind == "gzip":
            # (an error at the member's first read, where zlib raises it)
            self._header_error = len(self._input) > 3 and bool(
                self._input[3] & _GZIP_RESERVED_FLAGS
            )
            return isal_zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.kind == "bzip2":
            return bz2.BZ2Decompressor()
        if self.kind == "xz":
            return lzma.LZMADecompressor()
        return None

    def _fill(self) -> bool:
        """Unpack one more piece into the buffer; False at the end."""
        if self._done:
            return False
        if self._decoder is not None and not self._in_member:
            return self._next_member()
        fed = self._input
        if not fed and not (self._decoder is not None and self._wants_flush()):
            fed = self._source.read(_CHUNK)
            if not fed:
                self._done = True
                if self._in_member:
                    raise EOFError("compressed data ended before the end-of-stream marker")
                return False
        self._input = b""
        if self._decoder is None:
            out = fed
        elif isinstance(self._decoder, _ZLIB):
            if self._header_error:
                raise zlib.error("Error -3 while decompressing data: unknown header flags set")
            try:
                out = self._decoder.decompress(fed, _CHUNK)
            except _ISAL_ERROR as error:
                raise zlib.error(str(error)) from None
            self._input = self._decoder.unconsumed_tail
            if self._decoder.eof:  # what follows the member is in both: take it once
                self._input = self._decoder.unused_data
                self._in_member = False
        else:
            out = self._decoder.decompress(fed, _CHUNK)
            if self._decoder.eof:
                self._input = self._decoder.unused_data
                self._in_member = False
        self._budget.take(len(out))
        if out:
            self._pieces.append(out)
            self._buffered += len(out)
        return True

    def _wants_flush(self) -> bool:
        """A bzip2/xz decoder holding output it could not give within the size asked."""
        return not isinstance(self._decoder, _ZLIB) and not (
            self._decoder.needs_input or self._decoder.eof
        )

    def _next_member(self) -> bool:
        """After one member: another follows (its magic), or zero padding or nothing ends it."""
        while len(self._input) < 8:
            more = self._source.read(_CHUNK)
            if not more:
                break
            self._input += more
        if self.kind is not None and sniff(self._input) == self.kind:
            self._decoder = self._new_decoder()
            self._in_member = True
            return True
        self._done = True  # gunzip too ignores what is not another member
        return False


Mask = Callable[[str, bytes, Budget], Masked]


def mask_file(
    name: str,
    data: bytes,
    budget: Budget | None = None,
    text_mask: TextMask = mask_secrets,
    *,
    depth: int = 0,
) -> Masked:
    """One file for the bundle: text and JSON masked by `text_mask`; an archive opened and
    its members masked (within `budget`), or left out with the reason."""
    budget = budget or Budget()
    kind = sniff(data[:8])
    if kind in UNREADABLE:
        return _left_out(name, f"a {kind} archive, which mignurse cannot open to mask secrets")
    if kind is not None or is_tar(data[: tarfile.BLOCKSIZE]):
        if depth >= MAX_NESTING:
            return _left_out(name, f"an archive nested more than {MAX_NESTING} deep")
        try:
            masked = _mask_archive(name, data, text_mask, budget, depth)
        except LimitExceeded as exc:
            return _left_out(name, str(exc))
        # packed again, the bytes differ (gzip's header time, tar's padding) even when
        # nothing inside changed: then the archive goes as it came
        if masked.data is not None and not masked.counts and not masked.left_out:
            return Masked(data)
        return masked
    try:
        clean, counts = text_mask(name, data)
    except MaskTimeout as exc:
        return _left_out(name, f"{exc}: left out rather than shipped unmasked")
    return Masked(clean, counts)


def _left_out(name: str, why: str) -> Masked:
    return Masked(None, {}, ((name, why),))


def _mask_archive(
    name: str, data: bytes, text_mask: TextMask, budget: Budget, depth: int
) -> Masked:
    source = Unpacked(data, budget)
    try:
        head = source.peek(tarfile.BLOCKSIZE)
    except ERRORS as exc:
        return _left_out(name, f"a damaged {source.kind or 'tar'} archive ({exc})")
    if not is_tar(head):  # one compressed file, such as nvidia-bug-report.log.gz
        inner_name = name.rsplit(".", 1)[0] if "." in name.rsplit("/", 1)[-1] else name
        try:
            inner = source.read(MAX_MEMBER_BYTES + 1)
        except ERRORS as exc:
            return _left_out(name, f"a damaged {source.kind} file ({exc})")
        if len(inner) > MAX_MEMBER_BYTES:
            return _left_out(name, f"unpacks to more than {MAX_MEMBER_BYTES // 2**20} MiB")
        leaf = mask_file(inner_name, inner, budget, text_mask, depth=depth + 1)
        if leaf.data is None:
            return Masked(None, leaf.counts, leaf.left_out)
        return Masked(_compress(leaf.data, source.kind), leaf.counts, leaf.left_out)
    out = io.BytesIO()
    counts: dict[str, int] = {}
    left_out: list[tuple[str, str]] = []
    with (
        _compressor(out, source.kind) as packed,
        tarfile.open(fileobj=packed, mode="w|", format=tarfile.PAX_FORMAT) as repacked,
    ):
        try:
            with tarfile.open(fileobj=source, mode="r|", bufsize=_CHUNK) as archive:
                for count, member in enumerate(archive, 1):
                    path = f"{name}/{member.name}"
                    if count > MAX_MEMBERS:
                        left_out.append((path, f"more than {MAX_MEMBERS} entries: the rest"))
                        break
                    if member.name.startswith("/") or ".." in member.name.split("/"):
                        # whoever unpacks the bundle's copy would write outside the folder
                        left_out.append((path, "an unsafe name, outside the archive"))
                        continue
                    if member.isdir():
                        repacked.addfile(member)  # the header is all
                        continue
                    if not member.isfile():  # a link, a device, a FIFO: named, not kept
                        left_out.append((path, f"{entry_kind(member)}, not a regular file"))
                        continue
                    if member.size > MAX_MEMBER_BYTES:
                        left_out.append((path, f"{member.size} bytes, over the limit"))
                        continue
                    handle = archive.extractfile(member)
                    if handle is None:
                        continue
                    leaf = mask_file(path, handle.read(), budget, text_mask, depth=depth + 1)
                    for rule, n in leaf.counts.items():
                        counts[rule] = counts.get(rule, 0) + n
                    left_out.extend(leaf.left_out)
                    if leaf.data is not None:
                        member.size = len(leaf.data)
                        # a pax size would override the new one
                        member.pax_headers = {
                            k: v for k, v in member.pax_headers.items() if k != "size"
                        }
                        repacked.addfile(member, io.BytesIO(leaf.data))
        except LimitExceeded:
            raise
        except ERRORS as exc:
            left_out.append((name, f"damaged or cut short ({exc}): what followed is not in it"))
    return Masked(out.getvalue(), counts, tuple(left_out))


_KINDS = {
    tarfile.SYMTYPE: "a symlink",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


def entry_kind(member: tarfile.TarInfo) -> str:
    """What a tar entry that is not a regular file is: "a symlink to '/etc/shadow'"."""
    kind = _KINDS.get(member.type, f"an entry of type {member.type!r}")
    return f"{kind} to {member.linkname!r}" if member.issym() or member.islnk() else kind


def _compressor(out: IO[bytes], kind: str | None) -> Any:
    """A writable file that compresses into `out` as `kind` did (level 1: speed)."""
    if kind == "gzip":
        return gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0)
    if kind == "bzip2":
        return bz2.BZ2File(out, "wb", compresslevel=1)
    if kind == "xz":
        return lzma.LZMAFile(out, "wb", preset=1)
    return _Uncompressed(out)


class _Uncompressed(io.RawIOBase):
    def __init__(self, out: IO[bytes]) -> None:
        super().__init__()
        self._out = out

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._out.write(data)


def _compress(data: bytes, kind: str | None) -> bytes:
    out = io.BytesIO()
    with _compressor(out, kind) as packed:
        packed.write(data)
    return out.getvalue()
