"""A bundle or a snapshot folder is untrusted input: `diagnose --from` and `open` read it in
one pass within caps, and whatever is wrong with it ends in one line (exit 2), never a
traceback, a MemoryError or a wait of minutes."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from mignurse.diagnose.sources import files, is_read, load_offline

from .archives import gzip_bomb
from .inputs import (
    NODE,
    GiB,
    MiB,
    deep_json,
    gzip_of_header,
    kubectl_list,
    mignurse,
    node_object,
    one_line_error,
    snapshot_files,
    write_folder,
    write_tarball,
)

CORPUS = Path(__file__).parent.parent / "corpus"


def diagnose(source: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return mignurse("diagnose", "--from", str(source), *args, env=env)


# -- one pass --------------------------------------------------------------------------------


def test_a_tarball_is_decompressed_once_not_once_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = [f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal" for i in range(60)]
    members = [("cluster/nodes.json", kubectl_list(node_object(n) for n in nodes))]
    for n in nodes:
        members.append((f"nodes/{n}/cgroup-fs.txt", b"cgroup2fs\n"))
        members.append((f"nodes/{n}/os-release", b'ID="amzn"\nVERSION_ID="2023"\n'))
        members.append((f"nodes/{n}/ls-dev.txt", os.urandom(2048)))  # kept out of memory
    bundle = write_tarball(tmp_path / "b.tar.gz", members)
    read = {"bytes": 0}

    class Counting(io.BufferedReader):
        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            read["bytes"] += len(data)
            return data

    def counting_open(path: Path) -> BinaryIO:
        return Counting(io.FileIO(path, "rb"))

    monkeypatch.setattr(files, "_open_archive", counting_open)
    gathered = load_offline(bundle)
    assert len(gathered.node_evidence) == 60
    assert all(e.cgroup is not None for e in gathered.node_evidence.values())
    assert read["bytes"] <= bundle.stat().st_size + 64 * 1024


def test_what_the_single_pass_keeps_covers_every_file_a_reader_asks_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: set[str] = set()
    real = files.BundleFiles.data

    def recording(self: files.BundleFiles, name: str) -> bytes | None:
        if name not in self._extra:
            asked.add((self.top + name) if self.top else name)
        return real(self, name)

    monkeypatch.setattr(files.BundleFiles, "data", recording)
    folders = [
        *sorted(p.parent for p in (CORPUS / "incidents").rglob("nodes.json")),
        *sorted(p for p in (CORPUS / "bundles").glob("*/*") if p.is_dir()),
    ]
    for folder in folders:
        load_offline(folder)
    assert any("/" not in n.removeprefix("cluster/") for n in asked)
    assert any(n.startswith("nodes/") for n in asked) and any("kubelet/" in n for n in asked)
    missed = sorted(n for n in asked if not is_read(n) or not is_read(f"top/{n}"))
    assert not missed


# -- caps ------------------------------------------------------------------------------------


def test_a_ten_gigabyte_member_is_refused_at_its_header(tmp_path: Path) -> None:
    bundle = gzip_of_header(tmp_path / "b.tar.gz", "bundle/nodes/n/core.dump", 10 * GiB)
    err = one_line_error(diagnose(bundle))
    assert "4 GiB" in err and "MIGNURSE_MAX_BUNDLE_BYTES=" in err


def test_a_pax_header_of_gigabytes_is_refused_before_tarfile_reads_it(tmp_path: Path) -> None:
    bundle = gzip_of_header(tmp_path / "b.tar.gz", "PaxHeader/x", 3 * GiB, tarfile.XHDTYPE)
    err = one_line_error(diagnose(bundle))
    assert "refused: an extended tar header of 3221225472 bytes" in err


def test_a_file_the_reader_reads_past_the_file_cap_is_cut_there_and_said(tmp_path: Path) -> None:
    top = "mignurse-bundle-prod"
    before = {f"{top}/{name}": data for name, data in snapshot_files().items()}
    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(gzip_bomb(100 * MiB, before=before, name=f"{top}/nodes/{NODE}/kubelet.log"))
    result = diagnose(bundle)
    assert result.returncode in (0, 1), result.stderr
    assert (
        f"note: {top}/nodes/{NODE}/kubelet.log was cut at 64 MiB: it is 100 MiB, and only its "
        f"first 64 MiB were read (the rest of b.tar.gz was not read); "
        "MIGNURSE_MAX_FILE_BYTES=256M raises the limit"
    ) in result.stderr.splitlines()


def test_many_large_members_stop_at_the_total_cap(tmp_path: Path) -> None:
    members = [(f"var_log/pods/p{i}.log", bytes(200 * 1024)) for i in range(10)]
    bundle = write_tarball(tmp_path / "b.tar.gz", [*snapshot_files().items(), *members])
    err = one_line_error(diagnose(bundle, env={"MIGNURSE_MAX_BUNDLE_BYTES": "1M"}))
    assert "1 MiB" in err and "MIGNURSE_MAX_BUNDLE_BYTES=4M" in err
    assert diagnose(bundle).returncode in (0, 1)  # the default cap reads it


def test_too_many_members_stop_at_the_count_cap(tmp_path: Path) -> None:
    members = [(f"var_log/f{i}", b"x") for i in range(60)]
    bundle = write_tarball(tmp_path / "b.tar.gz", [*snapshot_files().items(), *members])
    err = one_line_error(diagnose(bundle, env={"MIGNURSE_MAX_BUNDLE_FILES": "50"}))
    assert "50 files" in err and "MIGNURSE_MAX_BUNDLE_FILES=200" in err


def test_a_cap_set_to_nonsense_is_one_line(tmp_path: Path) -> None:
    bundle = write_tarball(tmp_path / "b.tar.gz", snapshot_files().items())
    err = one_line_error(diagnose(bundle, env={"MIGNURSE_MAX_BUNDLE_BYTES": "lots"}))
    assert "MIGNURSE_MAX_BUNDLE_BYTES='lots'" in err


def test_a_folder_holding_a_3gb_file_reads_its_first_64_mib_and_says_so(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "snap", snapshot_files())
    with (folder / "nodes" / NODE / "kubelet.log").open("wb") as huge:
        huge.truncate(3 * GiB)  # sparse: nothing is written
    result = diagnose(folder)
    assert result.returncode in (0, 1), result.stderr
    assert (
        f"note: nodes/{NODE}/kubelet.log was cut at 64 MiB: it is 3 GiB, and only its first "
        "64 MiB were read; MIGNURSE_MAX_FILE_BYTES=256M raises the limit"
    ) in result.stderr.splitlines()


def test_a_gzip_bomb_inside_a_collector_bundle_is_cut_at_the_file_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = shutil.copytree(
        CORPUS / "bundles" / "eks-log-collector" / "mig-manager-al2023", tmp_path / "b"
    )
    packer = zlib.compressobj(wbits=31)
    bomb = packer.compress(bytes(8 * MiB)) + packer.flush()
    (folder / "gpu" / "nvidia-bug-report.log.gz").write_bytes(bomb)
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "1M")
    evidence = next(iter(load_offline(folder).node_evidence.values()))
    assert any("nvidia-bug-report.log.gz was cut at 1 MiB" in p for p in evidence.problems)


# -- what a bundle names ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../etc/cron.d/x", "/etc/passwd", "b/../../x"])
def test_a_member_outside_the_archive_is_refused_for_that_reason(tmp_path: Path, name: str) -> None:
    members = [*snapshot_files().items(), (name, b"* * * * * root true\n")]
    bundle = write_tarball(tmp_path / "evil.tar.gz", members, top="")
    err = one_line_error(diagnose(bundle))
    assert "outside the archive" in err and repr(name) in err


def test_links_out_of_a_folder_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = outside / "secret.log"
    secret.write_text("Nov 29 03:01:02 host kubelet[1]: SECRET-LINE\n")
    folder = write_folder(tmp_path / "snap", snapshot_files())
    (folder / "nodes" / NODE / "kubelet.log").symlink_to(secret)
    (folder / "nodes" / NODE / "os-release").symlink_to("cgroup-fs.txt")  # inside: read
    result = diagnose(folder, "--node", NODE, "-o", "json")
    assert result.returncode in (0, 1), result.stderr
    assert "SECRET-LINE" not in result.stdout
    assert f"nodes/{NODE}/kubelet.log links outside" in result.stderr
    gathered = load_offline(folder)
    assert "kubelet" not in gathered.node_evidence[NODE].journals
    assert gathered.node_evidence[NODE].os_release is not None


def test_links_in_a_folder_that_do_not_resolve_are_named_and_skipped(tmp_path: Path) -> None:
    """A loop of links (Path.resolve raises RuntimeError in 3.11) among a node's files, and
    links beside them: the diagnosis goes on without them, where it ended as an internal
    error."""
    folder = write_folder(tmp_path / "snap", snapshot_files())
    node = folder / "nodes" / NODE
    (node / "kubelet.log").symlink_to("containerd.log")
    (node / "containerd.log").symlink_to("kubelet.log")
    result = diagnose(folder, "--node", NODE, "-o", "json")
    assert result.returncode in (0, 1), result.stderr
    assert f"nodes/{NODE}/kubelet.log is a link that does not resolve (a loop)" in result.stderr
    assert "internal error" not in result.stderr
    assert "kubelet" not in load_offline(folder).node_evidence[NODE].journals


# -- documents of the wrong shape ------------------------------------------------------------


def test_a_200k_deep_nodes_json_is_one_line(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "snap", {**snapshot_files(), "cluster/nodes.json": b""})
    (folder / "cluster" / "nodes.json").write_bytes(deep_json(200_000))
    err = one_line_error(diagnose(folder))
    assert "nodes.json" in err and "nests too deeply" in err


def _wrong_items() -> Iterator[object]:
    yield "a string"
    yield 5
    yield {"metadata": "not a mapping", "status": []}
    yield {"metadata": {"name": ["a", "list"], "labels": "x"}, "status": {"conditions": 7}}
    yield {"metadata": {"name": "n2"}, "spec": {"taints": "none"}, "status": {"nodeInfo": 1}}


def test_nodes_and_events_of_the_wrong_types_are_left_out_with_a_note(tmp_path: Path) -> None:
    files = snapshot_files()
    files["cluster/nodes.json"] = kubectl_list([node_object(), *_wrong_items()])
    files["cluster/events.json"] = kubectl_list(
        [
            {"metadata": 1, "involvedObject": "x", "lastTimestamp": 5},
            {"metadata": {"name": "e"}, "involvedObject": {"name": 3}, "count": "many"},
            [],
        ]
    )
    files["cluster/nodeclaims.json"] = kubectl_list([{"metadata": [], "status": "x"}])
    files["cluster/karpenter.json"] = json.dumps({"metadata": {"name": "k"}, "spec": 5}).encode()
    folder = write_folder(tmp_path / "snap", files)
    result = diagnose(folder, "-o", "json")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "nodes.json:" in result.stderr and "left out" in result.stderr
    assert json.loads(result.stdout)["kind"] == "Diagnosis"


def test_a_time_out_of_range_is_one_line_not_rule_warnings(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "snap", snapshot_files())
    for moment in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"):
        err = one_line_error(diagnose(folder, "--now", moment))
        assert "--now" in err and "out of range" in err


def test_dra_slices_and_claims_of_the_wrong_shapes_read_as_no_devices(tmp_path: Path) -> None:
    """ResourceSlices and ResourceClaims hand-edited or damaged: read where they can be, no
    traceback, and one slice of 20,000 devices is no slower than its size."""
    files = snapshot_files()
    many = [{"name": f"gpu-0-mig-0-{i}-1", "attributes": {"type": {"string": "mig"}}}
            for i in range(20_000)]  # fmt: skip
    files["cluster/resourceslices.json"] = kubectl_list(
        [
            {"spec": "not a mapping"},
            {"spec": {"driver": "gpu.nvidia.com", "pool": [], "devices": {"a": 1}}},
            {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": NODE, "generation": "x"},
                      "nodeName": NODE, "devices": [1, None, {"basic": "x"}, {"name": 5}]}},
            {"spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
                      "pool": {"name": NODE, "generation": 2, "resourceSliceCount": 1},
                      "devices": many}},
        ]
    )  # fmt: skip
    odd_result = {"driver": "gpu.nvidia.com", "device": ["x"]}
    odd_selector = {"nodeSelectorTerms": [{"matchFields": 1}]}
    files["cluster/resourceclaims.json"] = kubectl_list(
        [
            {"status": {"allocation": {"devices": {"results": "all"}}, "reservedFor": 3}},
            {
                "metadata": {"name": "c", "namespace": "x"},
                "status": {
                    "allocation": {
                        "devices": {"results": [odd_result]},
                        "nodeSelector": odd_selector,
                    }
                },
            },
        ]
    )
    files["cluster/pods.json"] = kubectl_list(
        [{"metadata": {"name": "p"}, "spec": {"resourceClaims": "x"},
          "status": {"resourceClaimStatuses": [7, {"resourceClaimName": None}]}}]
    )  # fmt: skip
    folder = write_folder(tmp_path / "snap", files)
    result = diagnose(folder, "-o", "json")
    assert result.returncode in (0, 1, 2), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert json.loads(result.stdout)["kind"] == "Diagnosis"
    gathered = load_offline(folder)
    devices = gathered.snapshot.dra_devices[NODE]
    assert devices.generation == 2 and devices.mig_counts() == {"unknown": 20_000}


def test_a_fifo_in_a_folder_where_a_journal_belongs_is_named_and_never_opened(
    tmp_path: Path,
) -> None:
    folder = write_folder(tmp_path / "snap", snapshot_files())
    os.mkfifo(folder / "nodes" / NODE / "kubelet.log")  # opening it to read would wait
    result = diagnose(folder)
    assert result.returncode in (0, 1), result.stderr
    assert f"note: nodes/{NODE}/kubelet.log is not a regular file: not read" in result.stderr


def test_a_journal_cut_at_the_file_cap_is_among_the_nodes_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = b"Nov 29 03:01:02 ip-10-0-7-21 kubelet[1]: I1129 03:01:02 sync\n" * 40_000
    bundle = write_tarball(
        tmp_path / "b.tar.gz", [*snapshot_files().items(), (f"nodes/{NODE}/kubelet.log", journal)]
    )
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "1M")
    evidence = load_offline(bundle).node_evidence[NODE]
    assert any(
        f"nodes/{NODE}/kubelet.log was cut at 1 MiB: it is 2.3 MiB" in p for p in evidence.problems
    ), evidence.problems
    assert evidence.journals["kubelet"].lines < 40_000  # what was read is the file's head
