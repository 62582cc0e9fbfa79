"""A node's archive cannot exhaust the tool: what it unpacks to, its entries, its files and
the archives inside it are bounded, each refusal is said in the manifest, and the rest of the
bundle stays valid. Several gzip members in a row are one archive, as for gunzip."""

from __future__ import annotations

import gzip
import io
import json
import stat
import subprocess
import tarfile
import threading
import tracemalloc
import zlib
from pathlib import Path
from typing import BinaryIO

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.collect import archives
from mignurse.collect.archives import Budget, Unpacked
from mignurse.collect.bundle import PackedNode, pack_node_archive
from mignurse.collect.redact import MARKER, Redactor
from mignurse.collect.run import collect
from mignurse.model import Node
from mignurse.nodeaccess.base import CommandResult

from .archives import (
    MiB,
    gzip_bomb,
    many_members_bomb,
    split_members,
    tar_bytes,
    tar_gz,
    zip_file,
)

CALM = {
    "node/manifest.json": b'{"format": 1, "collector": "mignurse"}\n',
    "node/kubelet.log": b"I1129 03:00:00 kubelet.go:2468] SyncLoop\nDB_PASSWORD=hunter2\n" * 50,
    "node/os-release": b'ID="amzn"\nVERSION_ID="2023"\n',
}


def _written(packed: PackedNode) -> dict[str, bytes]:
    raw = zlib.decompressobj(-zlib.MAX_WBITS).decompress(packed.segment.data)
    with tarfile.open(fileobj=io.BytesIO(raw + bytes(1024)), mode="r:") as tar:
        return {
            m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


def test_gzip_members_one_after_another_are_one_archive_as_for_gunzip() -> None:
    archive = split_members(tar_bytes(CALM), 3)
    gunzip = subprocess.run(["gzip", "-dc"], input=archive, capture_output=True, check=True)
    assert gunzip.stdout == tar_bytes(CALM)  # the format allows it: gunzip reads all three
    packed = pack_node_archive("n1", archive, "b")
    assert packed.problems == []
    assert sorted(_written(packed)) == ["nodes/n1/kubelet.log", "nodes/n1/manifest.json",
                                        "nodes/n1/os-release"]  # fmt: skip
    assert b"hunter2" not in _written(packed)["nodes/n1/kubelet.log"]


def test_zero_padding_after_the_last_member_is_ignored_as_gunzip_does() -> None:
    packed = pack_node_archive("n1", tar_gz(CALM) + bytes(4096), "b")
    assert packed.problems == [] and len(packed.files) == 3


def test_a_bomb_of_2_5_gb_is_refused_at_the_node_limit_with_little_memory() -> None:
    bomb = gzip_bomb(2500 * MiB, before={"node/os-release": b'ID="amzn"\n'})
    assert len(bomb) < 3 * MiB
    tracemalloc.start()
    try:
        packed = pack_node_archive("n1", bomb, "b")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert packed.problems == [
        "kubelet.log: 2621440000 bytes, over the 64 MiB limit per file, left out",
        "the node's archive unpacks to more than 1024 MiB (the limit per node): "
        "what followed was left out",
    ]
    assert [name for name, _, _ in packed.files] == ["nodes/n1/os-release"]
    assert peak < 64 * MiB  # streamed: never held whole


def test_a_bomb_of_many_small_gzip_members_stops_at_the_node_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(archives, "MAX_NODE_UNPACKED_BYTES", 32 * MiB)
    packed = pack_node_archive("n1", many_members_bomb(100, MiB), "b")
    assert packed.problems[-1].startswith("the node's archive unpacks to more than 32 MiB")
    assert 20 <= len(packed.files) < 32


def test_too_many_entries_are_refused_after_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archives, "MAX_MEMBERS", 40)
    files = {f"node/f{i:04d}.txt": b"x\n" for i in range(100)}
    packed = pack_node_archive("n1", tar_gz(files), "b")
    assert len(packed.files) == 40
    assert packed.problems == [
        "the node's archive holds more than 40 entries (the limit per node): the rest were left out"
    ]


def test_a_file_over_the_size_limit_is_left_out_and_the_next_is_kept() -> None:
    big = archives.MAX_MEMBER_BYTES + 1
    files = {"node/big.log": bytes(big), "node/os-release": b'ID="amzn"\n'}
    packed = pack_node_archive("n1", tar_gz(files), "b")
    assert packed.problems == [f"big.log: {big} bytes, over the 64 MiB limit per file, left out"]
    assert [name for name, _, _ in packed.files] == ["nodes/n1/os-release"]


def test_archives_inside_the_node_archive_are_masked_or_left_out_and_said_so() -> None:
    secret_log = b"DB_PASSWORD=hunter2\n"
    deep = gzip.compress(gzip.compress(gzip.compress(tar_gz({"x.log": secret_log}))))
    files = {
        "node/bottlerocket-logs.tar.gz": tar_gz({"bottlerocket-logs/journalctl.log": secret_log}),
        "node/report.zip": zip_file("report.txt", secret_log),
        "node/trace.zst": b"\x28\xb5\x2f\xfd" + bytes(64),
        "node/deep.gz": deep,
    }
    packed = pack_node_archive("n1", tar_gz(files), "b")
    assert packed.problems == []
    assert sorted(packed.left_out) == [
        ("nodes/n1/deep", "an archive nested more than 3 deep"),
        ("nodes/n1/report.zip", "a zip archive, which mignurse cannot open to mask secrets"),
        ("nodes/n1/trace.zst", "a zstd archive, which mignurse cannot open to mask secrets"),
    ]
    written = _written(packed)
    assert sorted(written) == ["nodes/n1/bottlerocket-logs.tar.gz"]
    with tarfile.open(fileobj=io.BytesIO(written["nodes/n1/bottlerocket-logs.tar.gz"])) as tar:
        inner = tar.extractfile("bottlerocket-logs/journalctl.log").read()  # type: ignore[union-attr]
    assert inner == f"DB_PASSWORD={MARKER}\n".encode()


def test_a_cut_off_archive_inside_keeps_what_came_before_the_cut() -> None:
    inner = tar_gz({"logs/a.log": b"first\n" * 1000, "logs/b.log": bytes(range(256)) * 4000})
    packed = pack_node_archive("n1", tar_gz({"node/logs.tar.gz": inner[: len(inner) // 2]}), "b")
    [(path, why)] = packed.left_out
    assert path == "nodes/n1/logs.tar.gz" and why.startswith("damaged or cut short")
    with tarfile.open(fileobj=io.BytesIO(_written(packed)["nodes/n1/logs.tar.gz"])) as tar:
        assert tar.extractfile("logs/a.log").read() == b"first\n" * 1000  # type: ignore[union-attr]


def test_unpacked_charges_every_byte_and_reads_bzip2_and_xz_streams() -> None:
    import bz2
    import lzma

    data = b"line\n" * 20000
    for packed in (bz2.compress(data) * 2, lzma.compress(data) * 2, gzip.compress(data) * 2):
        budget = Budget(limit=10 * MiB)
        assert Unpacked(packed, budget).read() == data * 2
        assert budget.used == 2 * len(data)
    with pytest.raises(archives.LimitExceeded):
        Unpacked(gzip.compress(data), Budget(limit=1000)).read()
    with pytest.raises(EOFError):
        Unpacked(gzip.compress(data)[:-20], Budget()).read()


class _Sends:
    """A node that answers with `archive` on stdout."""

    transport = "local"

    def __init__(self, node: str, archive: bytes) -> None:
        self.node = node
        self.archive = archive

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        stdout.write(self.archive)
        return CommandResult(self.node, "local", 0, 0.1, bytes_out=len(self.archive))


def test_a_bomb_from_one_node_leaves_a_valid_private_bundle_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_NODE_UNPACKED_BYTES", 64 * MiB)  # a quicker refusal
    archives_by_node = {
        "bomb": gzip_bomb(200 * MiB),  # small enough to be packed in this process
        "calm": split_members(tar_bytes(CALM), 2),
    }
    out = tmp_path / "bundle.tar.gz"
    manifest = collect(
        None,
        Snapshot(nodes={}),
        [Node(name=name) for name in archives_by_node],
        shell_for=lambda node: _Sends(node.name, archives_by_node[node.name]),
        out=out,
        since="6 hours ago",
        redactor=Redactor(),
    )
    assert manifest["nodes"]["calm"]["ok"] is True and manifest["nodes"]["calm"]["files"] == 3
    bomb = manifest["nodes"]["bomb"]
    assert bomb["ok"] is False
    assert bomb["problems"][-1].startswith("the node's archive unpacks to more than 64 MiB")
    assert (
        subprocess.run(["tar", "-tzf", str(out)], capture_output=True, check=False).returncode == 0
    )
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with tarfile.open(out) as tar:
        written = json.loads(tar.extractfile(tar.getnames()[-2]).read())  # type: ignore[union-attr]
    assert written["nodes"]["bomb"]["problems"] == bomb["problems"]
