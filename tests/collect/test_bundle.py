"""BundleWriter: large node files are masked in worker processes with the same result."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mignurse.collect import bundle as bundle_module
from mignurse.collect.bundle import POOL_MIN_BYTES, BundleWriter
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
    lines = [PLAIN_LINE] * (POOL_MIN_BYTES // len(PLAIN_LINE) + 10)
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


def _write(path: Path, redactor: Redactor, files: dict[str, bytes]) -> tuple[int, list[str]]:
    writer = BundleWriter(path, top="b", redactor=redactor)
    added = writer.add_node_tar("n1", _node_tar(files))
    writer.close({"tool": "test"})
    return added


def test_large_files_masked_in_workers_match_in_process_masking(tmp_path: Path) -> None:
    big = _big_journal()
    files = {"kubelet.log": big, "small.txt": SECRET_LINE.encode(), "containerd.log": big}
    expected = Redactor().redact("nodes/n1/kubelet.log", big)
    assert MARKER.encode() in expected and expected != big

    added, problems = _write(tmp_path / "b.tar.gz", Redactor(), files)
    assert (added, problems) == (3, [])
    written, manifest = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/kubelet.log"] == expected
    assert written["nodes/n1/containerd.log"] == expected
    assert b"wJalrXUtnFEMI" not in written["nodes/n1/small.txt"]
    counts = manifest["redaction"]["counts"]
    assert counts["nodes/n1/kubelet.log"] == {"bearer-token": 2, "aws-secret-access-key": 2}
    sums = written["SHA256SUMS"].decode()
    assert "nodes/n1/kubelet.log" in sums and "nodes/n1/containerd.log" in sums


def test_a_broken_worker_pool_falls_back_to_masking_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no processes left")

    monkeypatch.setattr(bundle_module.concurrent.futures, "ProcessPoolExecutor", no_pool)
    big = _big_journal()
    added, problems = _write(tmp_path / "b.tar.gz", Redactor(), {"kubelet.log": big})
    assert (added, problems) == (1, [])
    written, _ = _read(tmp_path / "b.tar.gz")
    assert written["nodes/n1/kubelet.log"] == Redactor().redact("x", big)


def test_network_obfuscation_stays_in_process_with_one_map(tmp_path: Path) -> None:
    big = _big_journal()
    redactor = Redactor(obfuscate_network=True)
    assert not redactor.stateless
    _write(tmp_path / "b.tar.gz", redactor, {"kubelet.log": big, "other.log": big})
    written, _ = _read(tmp_path / "b.tar.gz")
    assert b"ip-10-0-1-2" not in written["nodes/n1/kubelet.log"]
    # one consistent stand-in for the same host in both files
    assert written["nodes/n1/kubelet.log"] == written["nodes/n1/other.log"]
