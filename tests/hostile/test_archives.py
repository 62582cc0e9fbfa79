"""A node's archive cannot exhaust the tool: what it unpacks to, its entries, its files and
the archives inside it are bounded, each refusal is said in the manifest, and the rest of the
bundle stays valid. Several gzip members in a row are one archive, as for gunzip."""

from __future__ import annotations

import gzip
import io
import json
import os
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
    gzip_of_zeros,
    many_members_bomb,
    split_members,
    tar_bytes,
    tar_gz,
    zip_file,
)
from .peak import mignurse_peak

GiB = 2**30

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


def test_links_and_devices_in_a_node_archive_are_left_out_and_named() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in CALM.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, kind, target in (
            ("node/shadow.log", tarfile.SYMTYPE, "/etc/shadow"),
            ("node/again.log", tarfile.LNKTYPE, "node/kubelet.log"),
            ("node/mem", tarfile.CHRTYPE, ""),
        ):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)

    packed = pack_node_archive("n1", raw.getvalue(), "b")

    assert packed.problems == [
        "'node/shadow.log' (a symlink to '/etc/shadow') left out: not a regular file",
        "'node/again.log' (a hard link to 'node/kubelet.log') left out: not a regular file",
        "'node/mem' (a character device) left out: not a regular file",
    ]
    assert sorted(_written(packed)) == sorted(f"nodes/n1/{n.split('/', 1)[1]}" for n in CALM)


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


def test_links_inside_an_archive_from_the_node_are_left_out_and_named() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        log = b"Nov 29 03:00:00 host kubelet[1]: started\n"
        info = tarfile.TarInfo("bottlerocket-logs/journalctl.log")
        info.size = len(log)
        tar.addfile(info, io.BytesIO(log))
        link = tarfile.TarInfo("bottlerocket-logs/shadow")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    packed = pack_node_archive("n1", tar_gz({"node/bottlerocket-logs.tar.gz": raw.getvalue()}), "b")
    assert packed.left_out == [
        (
            "nodes/n1/bottlerocket-logs.tar.gz/bottlerocket-logs/shadow",
            "a symlink to '/etc/shadow', not a regular file",
        )
    ]
    written = _written(packed)["nodes/n1/bottlerocket-logs.tar.gz"]
    with tarfile.open(fileobj=io.BytesIO(written)) as tar:
        assert tar.getnames() == ["bottlerocket-logs/journalctl.log"]


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


def _damaged(kind: str) -> bytes:
    """A gzip member of a tar, damaged as `kind` says (RFC 1952 §2.3: FLG's bits 5-7 are
    reserved and zero; FHCRC puts a CRC16 of the header after it; CRC32 and ISIZE end the
    member)."""
    member = bytearray(gzip.compress(tar_bytes(CALM)))
    if kind == "reserved header flags":
        member[3] |= 0x20
    elif kind == "checksum":
        member[-6] ^= 0xFF
    elif kind == "length":
        member[-2] ^= 0xFF
    elif kind == "compression method":
        member[2] = 7
    elif kind == "deflate block":
        member[10] = 0xFF  # the first block's header: BTYPE 11, reserved
    elif kind == "header checksum":  # FHCRC set, its CRC16 after the fixed header wrong
        member[3] |= 0x02
        member[10:10] = b"\x00\x00"
    return bytes(member)


@pytest.mark.parametrize(
    "kind",
    [
        "reserved header flags",
        "checksum",
        "length",
        "compression method",
        "deflate block",
        "header checksum",
    ],
)
def test_a_damaged_gzip_member_is_an_error_where_gunzip_sees_one(kind: str) -> None:
    archive = _damaged(kind)
    gunzip = subprocess.run(["gzip", "-dc"], input=archive, capture_output=True)
    assert gunzip.returncode == 1, gunzip.stderr  # gunzip refuses it too
    with pytest.raises(zlib.error):  # as zlib raises it, whatever inflates it
        Unpacked(archive, Budget()).read()
    packed = pack_node_archive("n1", archive, "b")
    assert any(p.startswith("the node's archive is damaged or cut short") for p in packed.problems)


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


# -- another tool's tarball read by `diagnose --from` -------------------------------------------

COLLECTOR = Path(__file__).parent.parent / "corpus" / "bundles" / "eks-log-collector"
TOP = "eks_i-0c4f9e21b7a83d5e6_2026-11-29_0300-UTC_0.7.9"


def _collector_files(
    *, without: str = "", replace: dict[str, bytes] | None = None
) -> dict[str, bytes]:
    """The mig-manager incident's eks-log-collector files (its corpus folder) under the
    collector's top folder, one left out or replaced."""
    folder = COLLECTOR / "mig-manager-al2023"
    files = {
        f"{TOP}/{p.relative_to(folder).as_posix()}": p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".source")
    }
    files.pop(f"{TOP}/{without}", None)
    files.update({f"{TOP}/{name}": data for name, data in (replace or {}).items()})
    return files


def _diagnose_measured(bundle: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`mignurse diagnose --from BUNDLE` in a process of its own, and its peak RSS in bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MIGNURSE", "AWS_"))}
    return mignurse_peak("diagnose", "--from", str(bundle), env=env, timeout=300)


def _findings_said(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert words in done.stdout + done.stderr, (done.stdout[-2000:], done.stderr[-2000:])


def test_a_6_gib_journal_in_a_collector_tarball_is_cut_at_64_mib_in_little_memory(
    tmp_path: Path,
) -> None:
    before = _collector_files(without="kubelet/kubelet.log")
    bundle = tmp_path / f"{TOP}.tar.gz"
    bundle.write_bytes(gzip_bomb(6 * GiB, before=before, name=f"{TOP}/kubelet/kubelet.log"))
    assert bundle.stat().st_size < 16 * MiB  # a small tarball

    done, peak = _diagnose_measured(bundle)

    _findings_said(done, "kubelet/kubelet.log was cut at 64 MiB: it is 6 GiB")
    assert "MIGNURSE_MAX_FILE_BYTES=256M raises the limit" in done.stderr
    assert peak <= 300 * MiB, f"peak RSS {peak / MiB:.0f} MiB"


def test_a_bug_report_that_unpacks_to_6_gib_is_cut_at_64_mib_in_little_memory(
    tmp_path: Path,
) -> None:
    files = _collector_files(replace={"gpu/nvidia-bug-report.log.gz": gzip_of_zeros(6 * GiB)})
    bundle = tmp_path / f"{TOP}.tar.gz"
    bundle.write_bytes(tar_gz(files))

    done, peak = _diagnose_measured(bundle)

    _findings_said(done, "gpu/nvidia-bug-report.log.gz was cut at 64 MiB")
    assert "note: gpu/nvidia-bug-report.log.gz was cut at 64 MiB" in done.stderr  # with or
    assert (
        "could not read all of it: gpu/nvidia-bug-report.log.gz was cut" in done.stdout
    )  # a finding
    assert peak <= 300 * MiB, f"peak RSS {peak / MiB:.0f} MiB"


def test_links_devices_and_fifos_in_a_tarball_are_named_as_skipped(tmp_path: Path) -> None:
    files = _collector_files(without="kubelet/kubelet.log")
    bundle = tmp_path / f"{TOP}.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, kind, target in (
            ("kubelet/kubelet.log", tarfile.SYMTYPE, "/var/log/secure"),
            ("var_log/messages", tarfile.LNKTYPE, f"{TOP}/storage/mounts.txt"),
            ("containerd/nvidia0", tarfile.CHRTYPE, ""),
            ("var_log/fifo", tarfile.FIFOTYPE, ""),
        ):
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.type, info.linkname = kind, target
            tar.addfile(info)

    done, _peak = _diagnose_measured(bundle)

    _findings_said(done, f"{bundle.name}: skipped 4 entries that are not regular files")
    note = next(line for line in done.stderr.splitlines() if "skipped 4 entries" in line)
    assert f"{TOP}/kubelet/kubelet.log (a symlink to '/var/log/secure')" in note
    assert f"{TOP}/var_log/messages (a hard link to '{TOP}/storage/mounts.txt')" in note
    assert f"{TOP}/containerd/nvidia0 (a character device)" in note
    assert f"{TOP}/var_log/fifo (a FIFO)" in note
    assert "secure" not in done.stdout  # nothing was read through the link
