"""The support bundle: one `.tar.gz` in the layout `diagnose --from` reads (design.md).

Written as a stream: each file goes into the archive as it is ready (a node's tar is
re-packed member by member, redacted on the way), so a 50-node bundle is never held in
memory. `close()` adds `manifest.json` and `SHA256SUMS`; an interrupted collection still
closes a valid archive whose manifest says it was interrupted.

Speed: masking secrets is pure-Python regex work (~80 MB/s on one core) and a node brings
~20 MB of journals, so large files are masked in worker processes (one per CPU, at most 8;
spawned, not forked, since the caller has threads) while this thread unpacks, compresses
and writes. Only a few files are in flight at once, which bounds memory. With network
obfuscation (one consistent map) or a pool that cannot start, masking stays in-process.
The archive is compressed at level 1: a tenth of tarfile's default level-9 CPU for a bundle
~20% larger, the right trade when the node may be gone in minutes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import io
import json
import multiprocessing
import os
import tarfile
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import IO, Any

from mignurse.collect.redact import Redactor, mask_secrets

MAX_NODE_MEMBER_BYTES = 256 * 2**20  # a node file bigger than this is left out, and said so
POOL_MIN_BYTES = 2 * 2**20  # smaller files are masked in-process: shipping them costs more
MAX_WORKERS = 8


class BundleWriter:
    def __init__(self, path: Path, *, top: str, redactor: Redactor) -> None:
        self.path = path
        self.top = top
        self.redactor = redactor
        self._tar = tarfile.open(path, "w:gz", compresslevel=1)  # noqa: SIM115 - closed by close()
        self._sums: list[tuple[str, str]] = []
        self._closed = False
        self._workers = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pool_failed = not redactor.stateless
        self._in_flight: collections.deque[tuple[str, bytes, concurrent.futures.Future[Any]]]
        self._in_flight = collections.deque()

    def add(self, name: str, data: bytes) -> int:
        """Add one file (redacted); returns the bytes written."""
        return self._write(name, self.redactor.redact(name, data))

    def _write(self, name: str, clean: bytes) -> int:
        info = tarfile.TarInfo(f"{self.top}/{name}")
        info.size = len(clean)
        info.mtime = int(time.time())
        info.mode = 0o644
        self._tar.addfile(info, io.BytesIO(clean))
        self._sums.append((hashlib.sha256(clean).hexdigest(), name))
        return len(clean)

    def add_json(self, name: str, document: Any) -> int:
        return self.add(name, json.dumps(document, indent=1).encode())

    def add_node_tar(self, node: str, stream: IO[bytes]) -> tuple[int, list[str]]:
        """Re-pack the collector's tar (a `node/` folder) under `nodes/<node>/`.

        Returns the files taken and problems (a damaged or cut-off tar keeps what it had).
        Large files may still be in a worker when this returns: the next node's files are
        unpacked meanwhile, and `close()` writes whatever is left before the manifest."""
        added = 0
        problems: list[str] = []
        try:
            with tarfile.open(fileobj=stream, mode="r|*") as node_tar:
                for member in node_tar:
                    if not member.isfile():
                        continue
                    name = member.name.split("/", 1)[1] if "/" in member.name else member.name
                    if not name or ".." in name.split("/"):
                        problems.append(f"unsafe name {member.name!r} left out")
                        continue
                    if member.size > MAX_NODE_MEMBER_BYTES:
                        problems.append(f"{name}: {member.size} bytes, over the limit, left out")
                        continue
                    handle = node_tar.extractfile(member)
                    if handle is None:
                        continue
                    path, data = f"nodes/{node}/{name}", handle.read()
                    added += 1
                    pool = self._pool_for(len(data))
                    if pool is None:
                        self.add(path, data)
                        continue
                    self._in_flight.append((path, data, pool.submit(mask_secrets, path, data)))
                    self._drain(keep=self._workers)
        except (tarfile.TarError, EOFError, OSError) as exc:
            problems.append(f"the node's archive is damaged or cut short: {exc}")
        return added, problems

    def _drain(self, keep: int = 0) -> None:
        """Write finished files, oldest first, until at most `keep` are in flight (bounded
        memory: each holds a node file twice, raw and masked)."""
        while len(self._in_flight) > keep or (self._in_flight and self._in_flight[0][2].done()):
            self._collect(self._in_flight.popleft())

    def _pool_for(self, size: int) -> concurrent.futures.ProcessPoolExecutor | None:
        if size < POOL_MIN_BYTES or self._pool_failed:
            return None
        if self._pool is None:
            try:
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self._workers, mp_context=multiprocessing.get_context("spawn")
                )
            except (OSError, ValueError):
                self._pool_failed = True
                return None
        return self._pool

    def _collect(self, entry: tuple[str, bytes, concurrent.futures.Future[Any]]) -> None:
        path, data, future = entry
        try:
            clean, counts = future.result()
        except (BrokenProcessPool, OSError):
            self._pool_failed = True  # a worker died (OOM killer?): finish in-process
            clean, counts = mask_secrets(path, data)
        self._write(path, self.redactor.finish(path, clean, counts))

    def close(self, manifest: dict[str, Any]) -> None:
        if self._closed:
            return
        self._drain()  # every file taken is written, also after Ctrl-C
        manifest = {**manifest, "redaction": self._redaction_section()}
        self.add_json("manifest.json", manifest)
        sums = "".join(f"{digest}  {name}\n" for digest, name in self._sums)
        info = tarfile.TarInfo(f"{self.top}/SHA256SUMS")
        data = sums.encode()
        info.size = len(data)
        info.mtime = int(time.time())
        info.mode = 0o644
        self._tar.addfile(info, io.BytesIO(data))
        self._tar.close()
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)  # idle by now: quick
            self._pool = None

    def _redaction_section(self) -> dict[str, Any]:
        return {
            "enabled": self.redactor.enabled,
            "obfuscateNetwork": self.redactor.obfuscate_network,
            "counts": self.redactor.report(),
        }
