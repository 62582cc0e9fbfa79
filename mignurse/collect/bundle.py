"""The support bundle: one `.tar.gz` in the layout `diagnose --from` reads (design.md).

Written as a stream: each file goes into the archive as it is ready (a node's tar is
re-packed member by member, redacted on the way), so a 50-node bundle is never held in
memory. `close()` adds `manifest.json` and `SHA256SUMS`; an interrupted collection still
closes a valid archive whose manifest says it was interrupted.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from pathlib import Path
from typing import IO, Any

from mignurse.collect.redact import Redactor

MAX_NODE_MEMBER_BYTES = 256 * 2**20  # a node file bigger than this is left out, and said so


class BundleWriter:
    def __init__(self, path: Path, *, top: str, redactor: Redactor) -> None:
        self.path = path
        self.top = top
        self.redactor = redactor
        self._tar = tarfile.open(path, "w:gz")  # noqa: SIM115 - closed by close()
        self._sums: list[tuple[str, str]] = []
        self._closed = False

    def add(self, name: str, data: bytes) -> int:
        """Add one file (redacted); returns the bytes written."""
        clean = self.redactor.redact(name, data)
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

        Returns the files added and problems (a damaged or cut-off tar keeps what it had)."""
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
                    self.add(f"nodes/{node}/{name}", handle.read())
                    added += 1
        except (tarfile.TarError, EOFError, OSError) as exc:
            problems.append(f"the node's archive is damaged or cut short: {exc}")
        return added, problems

    def close(self, manifest: dict[str, Any]) -> None:
        if self._closed:
            return
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

    def _redaction_section(self) -> dict[str, Any]:
        return {
            "enabled": self.redactor.enabled,
            "obfuscateNetwork": self.redactor.obfuscate_network,
            "counts": self.redactor.report(),
        }
