"""The support bundle: one `.tar.gz` in the layout `diagnose --from` reads (docs/commands.md,
`mignurse collect`).

Written as a stream: each file goes into the archive as it is ready, so a 50-node bundle is
never held in memory. `close()` adds `manifest.json` and `SHA256SUMS`; an interrupted
collection still closes a valid archive whose manifest says it was interrupted.

Speed: a node brings ~20 MB of journals, and turning that into bundle bytes means gunzip,
untar, mask secrets, tar and gzip again: ~0.1 CPU-s per node. All of it for one node happens
in one worker process (one per CPU, at most 8), which sends back only the node's compressed
tar members (a `gzjoin.Segment`), its file names, digests and redaction counts. This process
downloads, hands out archives and writes segments in the order nodes finish, so it never
becomes the bottleneck, and at most two archives per worker are in flight, which bounds
memory. With network obfuscation (one consistent map), an archive too small to be worth
shipping, or a pool that cannot start or dies, the same packing runs here.

Workers are not forked from this process, which has threads, but from Python's forkserver
(Unix; elsewhere they are spawned): a single-threaded process, started with the first pool,
that imports this module once, so each worker is forked ready instead of starting Python and
importing the masking code itself (~0.15 CPU-s each, before any node). A collection whose
archives are all small (packed here) starts neither.

The archive is compressed at level 1, by ISA-L (`gzjoin`): a thirtieth of the CPU of zlib at
tarfile's default level 9 for a bundle ~15% larger, the right trade when the node may be
gone in minutes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import hashlib
import json
import multiprocessing
import os
import secrets
import signal
import stat
import tarfile
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mignurse import joins
from mignurse.collect import archives
from mignurse.collect.archives import Budget, LimitExceeded, Mask, Unpacked, mask_file
from mignurse.collect.gzjoin import Deflater, GzipJoiner, Segment
from mignurse.collect.redact import Masked, Redactor
from mignurse.paths import FILE_MODE

POOL_MIN_BYTES = 256 * 2**10  # smaller node archives are packed here: shipping costs more
POOL_MAX_BYTES = 64 * 2**20  # larger ones are packed here, streaming, not copied to a worker
FIFO_READER_SECONDS = 30.0  # how long a FIFO named by -o may go without a reader
MAX_WORKERS = 8

NodeDone = Callable[[int, list[str]], None]  # files taken, problems


@dataclass
class PackedNode:
    """One node's files as compressed tar members, ready to append to the bundle."""

    segment: Segment
    files: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)  # name, sha, counts
    problems: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # by masking: path, why


def tar_member(out: Deflater, name: str, data: bytes, mtime: int) -> None:
    """Write one regular file as tar header, data and padding (what tarfile.addfile writes)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    info.mode = 0o644
    out.write(info.tobuf(tarfile.DEFAULT_FORMAT, "utf-8", "surrogateescape"))
    out.write(data)
    remainder = len(data) % tarfile.BLOCKSIZE
    if remainder:
        out.write(tarfile.NUL * (tarfile.BLOCKSIZE - remainder))


def pack_node_archive(
    node: str, archive: IO[bytes] | bytes, top: str, mask: Mask = mask_file
) -> PackedNode:
    """Re-pack the collector's tar (a `node/` folder) under `<top>/nodes/<node>/`, masked.

    Runs in a worker process or in the writer's. Within the node's limits (`archives`): what
    it unpacks to, each file's size, the number of entries; past one, the files so far are
    kept and the node's problems say what was refused. A damaged or cut-off tar keeps what it
    had and says so; several gzip members in a row are one stream, as for gunzip."""
    out = Deflater()
    files: list[tuple[str, str, dict[str, int]]] = []
    problems: list[str] = []
    left_out: list[tuple[str, str]] = []
    mtime = int(time.time())
    budget = Budget()
    try:
        stream = Unpacked(archive, budget)
        with tarfile.open(fileobj=stream, mode="r|", bufsize=256 * 1024) as node_tar:
            for count, member in enumerate(node_tar, 1):
                if count > archives.MAX_MEMBERS:
                    problems.append(
                        f"the node's archive holds more than {archives.MAX_MEMBERS} entries "
                        "(the limit per node): the rest were left out"
                    )
                    break
                if not member.isfile():
                    if not member.isdir():  # the collector writes files only: say what came
                        problems.append(
                            f"{member.name!r} ({archives.entry_kind(member)}) left out: not a "
                            "regular file"
                        )
                    continue
                name = member.name.split("/", 1)[1] if "/" in member.name else member.name
                if not name or ".." in name.split("/"):
                    problems.append(f"unsafe name {member.name!r} left out")
                    continue
                if member.size > archives.MAX_MEMBER_BYTES:
                    problems.append(
                        f"{name}: {member.size} bytes, over the "
                        f"{archives.MAX_MEMBER_BYTES // 2**20} MiB limit per file, left out"
                    )
                    continue
                handle = node_tar.extractfile(member)
                if handle is None:
                    continue
                path = f"nodes/{node}/{name}"
                masked = mask(path, handle.read(), budget)
                left_out.extend(masked.left_out)
                if masked.data is None:
                    continue
                tar_member(out, f"{top}/{path}", masked.data, mtime)
                files.append((path, hashlib.sha256(masked.data).hexdigest(), masked.counts))
    except LimitExceeded as exc:
        problems.append(str(exc))
    except archives.ERRORS as exc:
        problems.append(f"the node's archive is damaged or cut short: {exc}")
    return PackedNode(out.segment(), files, problems, left_out)


def as_is(name: str, data: bytes, budget: Budget) -> Masked:
    """The mask of `--no-redact`."""
    return Masked(data)


def _start_worker() -> None:
    """Workers finish the node in hand on Ctrl-C (a fraction of a second); the writer decides
    what to keep, so an interrupt never loses a node that was already downloaded. And they
    keep their large blocks (`keep_large_blocks`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_large_blocks()


# glibc's mallopt(3) parameters (<malloc.h>)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Each file of a node is held whole several times over as it is unpacked, decoded, masked and
# packed: blocks of up to a journal's size (20 MB a node brings; a file is cut at 64 MiB).
# glibc maps each block over its dynamic threshold (32 MiB at most) afresh and unmaps it when
# freed, so the kernel zero-fills its pages again for the next file: a sixth of a worker's
# CPU on one node's journals. Below these, blocks come from the heap and freed ones are used
# again; what lies free at the heap's top past the trim threshold is still given back.
_KEPT_BLOCK_BYTES = archives.MAX_MEMBER_BYTES + 2**20
_TRIM_BYTES = 2 * _KEPT_BLOCK_BYTES


def keep_large_blocks() -> bool:
    """Serve blocks up to a file's size from the heap and reuse them (glibc's mallopt); False
    where the C library has no mallopt (musl answers 0, macOS has none): nothing changes."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, _KEPT_BLOCK_BYTES) and mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES)
    )


def _start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _worker_context() -> multiprocessing.context.BaseContext:
    """Where pack workers come from: the forkserver, which imports the program's main module
    (as every worker would, multiprocessing's rule) and this one before it forks any, or
    spawn where there is no forkserver."""
    method = _start_method()
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["__main__", __name__])
    return context


class BundleWriteError(Exception):
    """The bundle could not be written (a full disk, a file system's size limit, an I/O
    error); nothing of it is left behind. str() is the one line to show."""


class StoppedBeforeWriting(KeyboardInterrupt):
    """Ctrl-C while the bundle was being opened (a FIFO waiting for its reader): an interrupt
    like any other, but no bundle was begun."""


def _write_error(exc: OSError, path: Path) -> BundleWriteError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        why = " (file too large for it)" if exc.errno == errno.EFBIG else ""
        return BundleWriteError(
            f"no space left on {os.path.abspath(path.parent)}{why} for {path.name}: free space "
            "or pass -o elsewhere; no partial bundle was left"
        )
    return BundleWriteError(f"cannot write {path}: {exc.strerror or exc}")


class _BundleFile:
    """Where the bundle's bytes go: a temporary file beside `path`, renamed to it once the
    archive is whole (a reader never meets half a bundle under its name), or removed. A FIFO
    or a device the user named (`-o /dev/stdout`) is written as it is."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary: Path | None = None
        if is_stream(path):
            self._fd = _open_stream(path)
            return
        self.temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(self.temporary, flags, FILE_MODE)
        os.fchmod(self._fd, FILE_MODE)  # 0600 whatever the umask: a bundle is for its owner

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            raise _write_error(exc, self.path) from None
        return len(data)

    def finish(self) -> None:
        """The whole archive is written: on disk, under its name."""
        try:
            if self.temporary is not None:
                os.fsync(self._fd)
                os.replace(self.temporary, self.path)
                self.temporary = None
        except OSError as exc:
            raise _write_error(exc, self.path) from None
        finally:
            self.discard()

    def discard(self) -> None:
        """Close, and remove what was written unless it was renamed into place."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.temporary is not None:
            with contextlib.suppress(OSError):
                self.temporary.unlink()
            self.temporary = None


def _open_stream(path: Path) -> int:
    """The FIFO or device at `path`, open for writing. Opening a FIFO no process reads blocks
    until one opens it (fifo(7)), past every signal: the open is retried after each handler
    (PEP 475), so a Ctrl-C, a SIGTERM or a runbook's stop never ended it. It is opened without
    blocking instead, tried again until a reader comes, for at most FIFO_READER_SECONDS."""
    deadline = time.monotonic() + FIFO_READER_SECONDS
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a FIFO with no reader (open(2))
                raise
            if time.monotonic() >= deadline:
                raise BundleWriteError(
                    f"no process reads the FIFO {path} (waited {FIFO_READER_SECONDS:g} s): "
                    f"start its reader first (e.g. cat {path} > bundle.tar.gz), or pass -o a file"
                ) from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)  # the writes wait for the reader, as a pipe's do
        return fd


def is_stream(path: Path) -> bool:
    """A FIFO or a character device (the terminal, /dev/stdout, /dev/null) at `path`."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


class BundleWriter:
    def __init__(self, path: Path, *, top: str, redactor: Redactor) -> None:
        self.path = path
        self.top = top
        self.redactor = redactor
        self._file = _BundleFile(path)  # (a Ctrl-C here: `run._open_bundle`)
        try:
            self._gz = GzipJoiner(self._file, mtime=int(time.time()))  # type: ignore[arg-type]
        except (BundleWriteError, KeyboardInterrupt) as exc:
            self._file.discard()
            if isinstance(exc, KeyboardInterrupt):
                raise StoppedBeforeWriting from None
            raise
        self._sums: list[tuple[str, str]] = []
        self._closed = False
        self._workers = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        # workers mask with the pure function, or not at all; a network map must stay here
        self._pool_failed = redactor.enabled and not redactor.stateless
        self._worker_mask: Mask = mask_file if redactor.enabled else as_is
        # future → (node, archive, what to call when its files are in the bundle)
        self._in_flight: dict[concurrent.futures.Future[PackedNode], tuple[str, bytes, NodeDone]]
        self._in_flight = {}

    def add(self, name: str, data: bytes, *, structured_done: bool = False) -> int:
        """Add one file (redacted); returns the bytes written (0: left out, and said so in
        the manifest's redaction section)."""
        if self.redactor.enabled:
            masked = self.redactor.mask(name, data, structured_done=structured_done)
            if masked.data is None:
                return 0
            data = masked.data
        out = Deflater()
        tar_member(out, f"{self.top}/{name}", data, int(time.time()))
        self._gz.append(out.segment())
        self._sums.append((hashlib.sha256(data).hexdigest(), name))
        return len(data)

    def add_json(self, name: str, document: Any) -> int:
        """Add a JSON document, masked by its structure first (env, args, Secret data…)."""
        document = self.redactor.redact_document(name, document)
        return self.add(name, json.dumps(document, indent=1).encode(), structured_done=True)

    def add_node_tar(self, node: str, stream: IO[bytes], on_done: NodeDone) -> None:
        """Re-pack the collector's tar (a `node/` folder) under `nodes/<node>/`.

        `on_done(files, problems)` is called, from this thread, once the node's files are in
        the bundle: at once when packed here, else from a later call or `drain()`, while
        the next nodes are downloaded and unpacked meanwhile."""
        stream.seek(0, os.SEEK_END)
        size = stream.tell()
        stream.seek(0)
        pool = self._pool_for(size)
        if pool is None:
            self._write_node(pack_node_archive(node, stream, self.top, self._mask_here), on_done)
        else:
            archive = stream.read()
            future = pool.submit(pack_node_archive, node, archive, self.top, self._worker_mask)
            self._in_flight[future] = (node, archive, on_done)
        self._reap(keep=2 * self._workers)

    def drain(self) -> None:
        """Write every node still being packed (their `on_done` runs). Interrupted (a second
        Ctrl-C), the nodes not written yet are reported as such, and the interrupt goes on."""
        try:
            self._reap(keep=0)
        except KeyboardInterrupt:
            left, self._in_flight = self._in_flight, {}
            for _, _, on_done in left.values():
                on_done(0, ["interrupted before its files were written to the bundle"])
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            self._pool_failed = True
            raise

    def _mask_here(self, name: str, data: bytes, budget: Budget) -> Masked:
        masked = self.redactor.mask(name, data, budget=budget)
        return Masked(masked.data)  # the redactor counted and noted already

    def _reap(self, keep: int) -> None:
        """Write finished nodes; block until at most `keep` are in flight (bounded memory)."""
        while self._in_flight:
            done = [f for f in self._in_flight if f.done()]
            if not done:
                if len(self._in_flight) <= keep:
                    return
                finished, _ = concurrent.futures.wait(
                    self._in_flight, return_when=concurrent.futures.FIRST_COMPLETED
                )
                done = list(finished)
            for future in done:
                node, archive, on_done = self._in_flight.pop(future)
                try:
                    packed = future.result()
                except (BrokenProcessPool, OSError):
                    self._pool_failed = True  # a worker died (OOM killer?): finish here
                    packed = pack_node_archive(node, archive, self.top, self._mask_here)
                else:
                    for name, _, counts in packed.files:
                        self.redactor.record(name, counts)
                    self.redactor.record_left_out(packed.left_out)
                self._write_node(packed, on_done)

    def _write_node(self, packed: PackedNode, on_done: NodeDone) -> None:
        self._gz.append(packed.segment)
        self._sums.extend((digest, name) for name, digest, _ in packed.files)
        on_done(len(packed.files), packed.problems)

    def _pool_for(self, size: int) -> concurrent.futures.ProcessPoolExecutor | None:
        if not POOL_MIN_BYTES <= size <= POOL_MAX_BYTES or self._pool_failed:
            return None
        if self._pool is None:
            try:
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self._workers, mp_context=_worker_context(), initializer=_start_worker
                )
            except (OSError, ValueError):
                self._pool_failed = True
                return None
        return self._pool

    def close(self, manifest: dict[str, Any]) -> None:
        """Write the manifest and sums, end the archive and put it in place under its name.
        Interrupted or failed on the way, nothing is left: BundleWriteError says why."""
        if self._closed:
            return
        self._closed = True
        try:
            self.drain()  # every node taken is written, also after Ctrl-C
            manifest = {**manifest, "redaction": self._redaction_section()}
            self.add_json("manifest.json", manifest)
            sums = "".join(f"{digest}  {name}\n" for digest, name in self._sums)
            out = Deflater()
            tar_member(out, f"{self.top}/SHA256SUMS", sums.encode(), int(time.time()))
            # end of archive: two zero blocks, padded to a whole record, as tarfile does
            end = 2 * tarfile.BLOCKSIZE
            written = self._gz.length + out.length + end
            out.write(tarfile.NUL * (end + (-written) % tarfile.RECORDSIZE))
            self._gz.append(out.segment())
            self._gz.close()
            self._file.finish()
        finally:
            self._file.discard()
            self._stop_pool()

    def abort(self) -> None:
        """Stop without a bundle: the workers end and the temporary file is removed."""
        self._closed = True
        self._file.discard()
        self._stop_pool(wait=False)

    def _stop_pool(self, *, wait: bool = True) -> None:
        if self._pool is not None:
            with joins.ctrl_c_kept():
                self._pool.shutdown(wait=wait, cancel_futures=True)  # idle by now: quick
            self._pool = None

    def _redaction_section(self) -> dict[str, Any]:
        return {
            "enabled": self.redactor.enabled,
            "obfuscateNetwork": self.redactor.obfuscate_network,
            "counts": self.redactor.report(),
            "leftOut": self.redactor.left_out(),
        }
