"""BundleWriter: node archives are packed in worker processes with the same result."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mignurse.collect import bundle as bundle_module
from mignurse.collect.bundle import BundleWriter
from mignurse.collect.redact import MARKER, Redactor

SECRET_LINE = (
    "Nov 29 03:00:00 ip-10-0-1-2 kubelet[2345]: Authorization: Bearer "
    "abcdefghijklmnopqrstuvwxyz012345 "
    "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
)
PLAIN_LINE = 'Nov 29 03:00:00 ip-10-0-1-2 kubelet[2345]: I1129 "SyncLoop UPDATE" source="api"\n'


def _node_tar(files: dict[str, bytes]) -> io.BytesIO:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"node/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw.seek(0)
    return raw


def _big_journal() -> bytes:
    lines = [PLAIN_LINE] * (2 * 2**20 // len(PLAIN_LINE))
    lines[5] = SECRET_LINE
    lines[-3] = SECRET_LINE
    return "".join(lines).encode()


def _read(path: Path) -> tuple[dict[str, bytes], dict[str, Any]]:
    with tarfile.open(path) as tar:
        files = {}
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            files[member.name.split("/", 1)[1]] = handle.read()
    return files, json.loads(files["manifest.json"])


def _write(
    path: Path, redactor: Redactor, files: dict[str, bytes], *, pooled: bool | None = None
) -> tuple[int, list[str]]:
    writer = BundleWriter(path, top="b", redactor=redactor)
    done: list[tuple[int, list[str]]] = []
    writer.add_node_tar("n1", _node_tar(files), lambda *result: done.append(result))
    if pooled is not None:
        assert (writer._pool is not None) == pooled
    writer.close({"tool": "test"})
    assert len(done) == 1
    return done[0]


@pytest.fixture
def pool_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_module, "POOL_MIN_BYTES", 0)


@pytest.mark.usefixtures("pool_always")
def test_node_archives_packed_in_workers_match_in_process_masking(tmp_path: Path) -> None:
    big = _big_journal()
    files = {"kubelet.log": big, "small.txt": SECRET_LINE.encode(), "containerd.log": big}
    expected = Redactor().redact("nodes/n1/kubelet.log", big)
    assert MARKER.encode() in expected and expected != big

    added, problems = _write(tmp_path / "b.tar.gz", Redactor(), files, pooled=True)
    assert (added, problems) == (3, [])
    written, manifest = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/kubelet.log"] == expected
    assert written["nodes/n1/containerd.log"] == expected
    assert b"wJalrXUtnFEMI" not in written["nodes/n1/small.txt"]
    counts = manifest["redaction"]["counts"]
    assert counts["nodes/n1/kubelet.log"] == {"bearer-token": 2, "aws-secret-access-key": 2}
    sums = written["SHA256SUMS"].decode()
    assert "nodes/n1/kubelet.log" in sums and "nodes/n1/containerd.log" in sums


@pytest.mark.usefixtures("pool_always")
def test_without_a_forkserver_spawned_workers_mask_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Python has no forkserver (Windows), workers are spawned."""
    monkeypatch.setattr(bundle_module, "_start_method", lambda: "spawn")
    big = _big_journal()
    writer = BundleWriter(tmp_path / "b.tar.gz", top="b", redactor=Redactor())
    done: list[tuple[int, list[str]]] = []
    writer.add_node_tar("n1", _node_tar({"kubelet.log": big}), lambda *r: done.append(r))
    assert writer._pool is not None
    context = writer._pool._mp_context
    assert context is not None and context.get_start_method() == "spawn"
    writer.close({"tool": "test"})
    assert done == [(1, [])]
    written, _ = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/kubelet.log"] == Redactor().redact("x", big)


@pytest.mark.usefixtures("pool_always")
def test_a_broken_worker_pool_falls_back_to_masking_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no processes left")

    monkeypatch.setattr(bundle_module.concurrent.futures, "ProcessPoolExecutor", no_pool)
    big = _big_journal()
    added, problems = _write(tmp_path / "b.tar.gz", Redactor(), {"kubelet.log": big}, pooled=False)
    assert (added, problems) == (1, [])
    written, _ = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/kubelet.log"] == Redactor().redact("x", big)


@pytest.mark.usefixtures("pool_always")
def test_network_obfuscation_stays_in_process_with_one_map(tmp_path: Path) -> None:
    big = _big_journal()
    redactor = Redactor(obfuscate_network=True)
    assert not redactor.stateless
    _write(tmp_path / "b.tar.gz", redactor, {"kubelet.log": big, "other.log": big}, pooled=False)
    written, _ = _read(tmp_path / "b.tar.gz")
    assert b"ip-10-0-1-2" not in written["nodes/n1/kubelet.log"]
    # one consistent stand-in for the same host in both files
    assert written["nodes/n1/kubelet.log"] == written["nodes/n1/other.log"]


def test_the_bundle_is_one_ordinary_gzip_member_every_reader_takes(tmp_path: Path) -> None:
    path = tmp_path / "b.tar.gz"
    writer = BundleWriter(path, top="b", redactor=Redactor())
    writer.add_json("cluster/nodes.json", {"items": []})
    for node in ("n1", "n2"):
        files = {"kubelet.log": SECRET_LINE.encode() * 3, "deep/x/y.txt": b"a" * 513}
        writer.add_node_tar(node, _node_tar(files), lambda *_: None)
    writer.close({"tool": "test"})

    assert subprocess.run(["gzip", "-t", str(path)], check=False).returncode == 0
    listed = subprocess.run(["tar", "-tzf", str(path)], capture_output=True, text=True, check=True)
    assert "b/nodes/n2/deep/x/y.txt" in listed.stdout.split()
    raw = gzip.decompress(path.read_bytes())
    assert len(raw) % tarfile.RECORDSIZE == 0 and raw.endswith(tarfile.NUL * 1024)
    with tarfile.open(fileobj=path.open("rb"), mode="r|gz") as stream:
        names = [member.name for member in stream]
    assert names == [
        "b/cluster/nodes.json",
        "b/nodes/n1/kubelet.log",
        "b/nodes/n1/deep/x/y.txt",
        "b/nodes/n2/kubelet.log",
        "b/nodes/n2/deep/x/y.txt",
        "b/manifest.json",
        "b/SHA256SUMS",
    ]
    written, manifest = _read(path)
    assert b"wJalrXUtnFEMI" not in written["nodes/n2/kubelet.log"]
    assert manifest["redaction"]["counts"]["nodes/n1/kubelet.log"]["bearer-token"] == 3
    sums = dict(line.split("  ")[::-1] for line in written["SHA256SUMS"].decode().splitlines())
    for name, data in written.items():
        if name != "SHA256SUMS":
            assert sums[name] == hashlib.sha256(data).hexdigest()


def test_a_cut_off_node_archive_keeps_the_files_before_the_cut(tmp_path: Path) -> None:
    whole = _node_tar({"a.log": b"first\n" * 1000, "b.log": bytes(range(256)) * 4000}).getvalue()
    path = tmp_path / "cut.tar.gz"
    writer = BundleWriter(path, top="b", redactor=Redactor())
    done: list[tuple[int, list[str]]] = []
    writer.add_node_tar("n1", io.BytesIO(whole[: len(whole) // 2]), lambda *r: done.append(r))
    writer.close({"tool": "test"})
    [(files, problems)] = done
    assert files == 1 and "damaged or cut short" in problems[0]
    written, _ = _read(path)
    assert written["nodes/n1/a.log"] == b"first\n" * 1000


def test_a_node_archive_too_large_to_ship_is_packed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle_module, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(bundle_module, "POOL_MAX_BYTES", 1000)
    big = _big_journal()
    assert _write(tmp_path / "b.tar.gz", Redactor(), {"k.log": big}, pooled=False) == (1, [])
    written, _ = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/k.log"] == Redactor().redact("x", big)


@pytest.mark.usefixtures("pool_always")
def test_a_second_ctrl_c_while_workers_pack_still_closes_a_valid_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "b.tar.gz"
    writer = BundleWriter(path, top="b", redactor=Redactor())
    done: dict[str, tuple[int, list[str]]] = {}
    for node in ("n1", "n2"):
        files = {"kubelet.log": _big_journal()}
        writer.add_node_tar(node, _node_tar(files), lambda *r, n=node: done.setdefault(n, r))

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle_module.concurrent.futures, "wait", interrupted)
    monkeypatch.setattr(bundle_module.concurrent.futures.Future, "done", lambda self: False)
    with pytest.raises(KeyboardInterrupt):
        writer.drain()
    writer.close({"tool": "test", "interrupted": True})

    assert done == {
        node: (0, ["interrupted before its files were written to the bundle"])
        for node in ("n1", "n2")
    }
    written, manifest = _read(path)
    assert manifest["interrupted"] is True and "nodes/n1/kubelet.log" not in written


@pytest.mark.usefixtures("pool_always")
def test_no_redact_still_packs_in_workers_and_keeps_every_byte(tmp_path: Path) -> None:
    big = _big_journal()
    added = _write(tmp_path / "b.tar.gz", Redactor(enabled=False), {"k.log": big}, pooled=True)
    assert added == (1, [])
    written, manifest = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/k.log"] == big and manifest["redaction"]["counts"] == {}


@pytest.mark.parametrize("redact", [True, False])
def test_a_bundle_is_readable_by_its_owner_only(tmp_path: Path, redact: bool) -> None:
    """Under the usual 022 umask, and over an old loops-readable file of the same name."""
    path = tmp_path / "b.tar.gz"
    path.write_bytes(b"old")
    path.chmod(0o644)
    old_umask = os.umask(0o022)
    try:
        _write(path, Redactor(enabled=redact), {"kubelet.log": SECRET_LINE.encode()})
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _read(path)[1]["redaction"]["enabled"] is redact


@pytest.mark.parametrize("pooled", [True, False])
def test_files_masking_cannot_open_are_left_out_and_listed_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    if pooled:
        monkeypatch.setattr(bundle_module, "POOL_MIN_BYTES", 0)
    zstd = b"\x28\xb5\x2f\xfd" + bytes(64)  # zstd's magic: no reader in the standard library
    files = {"kubelet.log": SECRET_LINE.encode(), "journal.zst": zstd}
    assert _write(tmp_path / "b.tar.gz", Redactor(), files, pooled=pooled) == (1, [])
    written, manifest = _read(tmp_path / "b.tar.gz")
    assert "nodes/n1/journal.zst" not in written
    assert manifest["redaction"]["leftOut"] == {
        "nodes/n1/journal.zst": "a zstd archive, which mignurse cannot open to mask secrets"
    }


# In a process started as a pack worker is, or not: a block a journal's size written and
# freed, then another of the same size written, and how many pages that one faulted in (each
# page newly mapped is one minor fault).
_FAULTS_OF_A_SECOND_BLOCK = """
import ctypes, resource, sys
from mignurse.collect import bundle
if sys.argv[1] == "kept":
    if not hasattr(ctypes.CDLL(None), "mallopt"):
        print("no mallopt"); raise SystemExit
    bundle._start_worker()  # as each pack worker starts
size = 40 * 2**20
block = b"y" * size
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = b"x" * size
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt, on Linux")
def test_pack_workers_reuse_a_freed_journal_sized_block_instead_of_mapping_a_new_one() -> None:
    def faults(mode: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", _FAULTS_OF_A_SECOND_BLOCK, mode],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return run.stdout.strip()

    kept = faults("kept")
    if kept == "no mallopt":
        pytest.skip("this C library has no mallopt: blocks are as it serves them")
    pages = 40 * 2**20 // 4096
    assert int(faults("default")) > pages // 2  # mapped afresh, every page faulted in again
    assert int(kept) < pages // 20  # the freed block's pages, used again
