"""Other tools' node bundles as `diagnose --from` / `open` input: eks-log-collector (and the
same archive under the name AWSSupport-CollectEKSInstanceLogs gives it), Bottlerocket logdog.
Each is built from tests/corpus/bundles/ the way its tool packs it, then read through the CLI
as a tarball, renamed, and as an extracted folder."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import shutil
import tarfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from mignurse.cli import main
from mignurse.diagnose.foreign_bundles import (
    LAYOUT_EKS_LOG_COLLECTOR,
    LAYOUT_LOGDOG,
    Layout,
    detect_layout,
)
from mignurse.diagnose.sources import load_offline
from mignurse.evidence.system import parse_cgroup_mounts
from mignurse.session import BundleSource
from mignurse.tui.app import make_app

BUNDLES = Path(__file__).parent.parent / "corpus" / "bundles"
MIG = BUNDLES / "eks-log-collector" / "mig-manager-al2023"
HEALTHY = BUNDLES / "eks-log-collector" / "healthy-al2023"
AL2 = BUNDLES / "eks-log-collector" / "al2-v0.7.6"
LOGDOG = BUNDLES / "logdog" / "nvidia-dcgm"
MIG_NODE = "ip-10-0-41-87.us-west-2.compute.internal"
DCGM_NODE = "ip-10-0-77-150.us-west-2.compute.internal"
MIG_PACKED_AT = datetime(2026, 11, 29, 3, 14, 7, tzinfo=UTC)


def _is_provenance(path: Path) -> bool:
    return path.name == "SOURCE" or path.name.endswith(".source")


def pack(folder: Path, out: Path, *, top: str = ".", packed_at: datetime = MIG_PACKED_AT) -> Path:
    """The bundle as its tool tars it: eks-log-collector `--directory=<dir> .` ("./kubelet/…"),
    logdog one top folder; every member stamped with the moment of packing."""
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or _is_provenance(path):
                continue
            data = path.read_bytes()
            info = tarfile.TarInfo(f"{top}/{path.relative_to(folder).as_posix()}")
            info.size = len(data)
            info.mtime = int(packed_at.timestamp())
            tar.addfile(info, io.BytesIO(data))
    return out


def diagnose(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code = main(["diagnose", "--from", *args, "-o", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def finding(document: dict, finding_id: str) -> dict:
    found = [f for f in document["findings"] if f["id"] == finding_id]
    assert len(found) == 1, document["findings"]
    return found[0]


# -- eks-log-collector: the mig-manager incident on AL2023 ----------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "eks_i-0c4f9e21b7a83d5e6_2026-11-29_0314-UTC_0.7.9.tar.gz",  # as the collector names it
        # the key AWSSupport-CollectEKSInstanceLogs uploads it under
        "eks_i-0c4f9e21b7a83d5e6_94dc3448-b94b-470b-8f2d-99b81aad4c53.tar.gz",
        "node-that-died.tgz",  # renamed by whoever passed it on
    ],
)
def test_the_mig_manager_incident_from_a_collector_archive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    archive = pack(MIG, tmp_path / name)
    code, document, err = diagnose(capsys, str(archive))
    assert code == 2
    assert document["layout"] == LAYOUT_EKS_LOG_COLLECTOR
    assert document["ruleErrors"] == []  # the rules that need a cluster view stay silent
    hook = finding(document, "mig-hook-kubelet-restart")
    assert hook["nodes"] == [MIG_NODE]
    assert hook["runbooks"] == ["replace-instance"]
    evidence = "\n".join(e["text"] for e in hook["evidence"])
    assert "/sys/fs/cgroup is cgroup2fs (cgroup v2)" in evidence  # from storage/mounts.txt
    assert "Amazon Linux 2023" in evidence  # os-release, from inside the nvidia bug report
    assert "Stopping kubelet.service - Kubernetes Kubelet..." in evidence
    assert "unable to apply cgroup configuration" in evidence
    # Judged when the archive was made, not when the test runs.
    assert document["now"] == "2026-11-29T03:14:07Z"
    assert "read an eks-log-collector bundle" in err
    assert 'from kubelet\'s "Successfully registered node" line' in err
    assert "Traceback" not in err
    if "94dc3448" in name:
        assert "AWSSupport-CollectEKSInstanceLogs" in err


def test_the_mig_manager_incident_from_the_extracted_folder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document, err = diagnose(capsys, str(MIG))
    assert code == 2
    assert finding(document, "mig-hook-kubelet-restart")["nodes"] == [MIG_NODE]
    # No archive time: the newest line stands in (containerd's goroutine dump at 03:14:05),
    # its year taken from dmesg --ctime.
    assert document["now"] == "2026-11-29T03:14:05Z"
    assert "year-less journal times placed by the last kernel line of dmesg --ctime" in err


def test_the_collectors_folder_inside_a_tarball_of_its_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Someone extracted the archive and tarred the folder again, name and all.
    archive = pack(
        MIG, tmp_path / "bundle.tar.gz", top="eks_i-0c4f9e21b7a83d5e6_2026-11-29_0314-UTC_0.7.9"
    )
    code, document, _err = diagnose(capsys, str(archive))
    assert code == 2
    assert finding(document, "mig-hook-kubelet-restart")["nodes"] == [MIG_NODE]


def test_the_node_evidence_a_collector_bundle_yields(tmp_path: Path) -> None:
    gathered = load_offline(pack(MIG, tmp_path / "x.tar.gz"))
    assert gathered.layout == LAYOUT_EKS_LOG_COLLECTOR
    assert gathered.snapshot.nodes == {}  # no cluster view at all
    assert gathered.collected_at == MIG_PACKED_AT
    evidence = gathered.node_evidence[MIG_NODE]
    assert evidence.layout == LAYOUT_EKS_LOG_COLLECTOR
    assert evidence.instance_id == "i-0c4f9e21b7a83d5e6"
    assert set(evidence.journals) == {"kubelet", "containerd", "nodeadm", "kernel", "nma"}
    nodeadm = evidence.journals["nodeadm"].entries
    assert [e.time for e in nodeadm] == sorted(e.time for e in nodeadm)  # three units, one story
    assert evidence.journals["kernel"].entries[0].message.startswith("Linux version 6.12")
    # The agent's pod log, read once though the collector copies it twice.
    nma = evidence.journals["nma"]
    assert len(nma.entries) == 6
    assert "starting eks-node-monitoring-agent" in nma.entries[0].message
    assert evidence.gpu_health is not None and evidence.gpu_health.gpus  # the bug report, unzipped
    assert evidence.os_release is not None and evidence.os_release.is_al2023


# -- eks-log-collector: a healthy node, and the 2023 layout ---------------------------------------


def test_a_healthy_node_is_a_clean_no_findings_with_the_layout_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    archive = pack(
        HEALTHY,
        tmp_path / "eks_i-03e7b1d95a2c4f680_2026-11-29_0420-UTC_0.7.9.tar.gz",
        packed_at=datetime(2026, 11, 29, 4, 20, 31, tzinfo=UTC),
    )
    assert main(["diagnose", "--from", str(archive)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == (
        f"No findings in {archive.name} (eks-log-collector bundle) as of 2026-11-29T04:20:31Z."
    )
    assert "read an eks-log-collector bundle: node ip-10-0-18-203" in captured.err


def test_the_2023_collector_layout_on_amazon_linux_2(tmp_path: Path) -> None:
    """v0.7.6: no nodeadm/, gpu/ or agent logs; kernel lines only in var_log/messages;
    journalctl's old header; cgroup v1."""
    archive = pack(
        AL2,
        tmp_path / "eks_i-0a9d3c7e1f5b24680_2023-12-14_0931-UTC_0.7.6.tar.gz",
        packed_at=datetime(2023, 12, 14, 9, 31, 40, tzinfo=UTC),
    )
    for source in (archive, AL2):
        gathered = load_offline(source)
        evidence = gathered.node_evidence["ip-192-168-44-12.us-east-2.compute.internal"]
        assert set(evidence.journals) == {"kubelet", "containerd", "kernel"}
        kubelet = evidence.journals["kubelet"].entries
        assert kubelet[0].time == datetime(2023, 12, 14, 9, 10, 41, tzinfo=UTC)
        kernel = evidence.journals["kernel"].entries
        assert kernel[0].message.startswith("Linux version 5.10")  # from /var/log/messages
        assert evidence.cgroup is not None and evidence.cgroup.version == 1
        assert evidence.os_release is None  # no bug report, nothing else says
    assert any("header" in n for n in load_offline(AL2).notices)


def test_kubelet_lines_fall_back_to_var_log_messages(tmp_path: Path) -> None:
    folder = shutil.copytree(AL2, tmp_path / "al2", ignore=shutil.ignore_patterns("SOURCE"))
    (folder / "kubelet" / "kubelet.log").write_text("-- No entries --\n")
    gathered = load_offline(folder)
    # rsyslog writes the short host name; kubelet's registration line still names the node.
    evidence = gathered.node_evidence["ip-192-168-44-12.us-east-2.compute.internal"]
    kubelet = evidence.journals["kubelet"]
    assert {e.ident for e in kubelet.entries} == {"kubelet", "systemd"}
    assert "kubelet lines taken from var_log/messages" in gathered.notices


# -- logdog: a Bottlerocket node whose agent cannot load DCGM ---------------------------------


@pytest.mark.parametrize("name", ["bottlerocket-logs.tar.gz", "from-the-support-case.tar.gz"])
def test_a_logdog_tarball_of_the_dcgm_loop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    archive = pack(
        LOGDOG / "bottlerocket-logs",
        tmp_path / name,
        top="bottlerocket-logs",
        packed_at=datetime(2026, 11, 29, 5, 31, 52, tzinfo=UTC),
    )
    code, document, err = diagnose(capsys, str(archive))
    assert code == 1
    assert document["layout"] == LAYOUT_LOGDOG
    assert document["ruleErrors"] == []
    assert document["now"] == "2026-11-29T05:31:52Z"
    ahr = finding(document, "accelerated-hardware-not-ready")
    assert ahr["nodes"] == [DCGM_NODE]
    assert "libdcgm.so not Found" in json.dumps(ahr["evidence"])
    assert "read a logdog bundle" in err


def test_the_logdog_folder_extracted(capsys: pytest.CaptureFixture[str]) -> None:
    code, document, err = diagnose(capsys, str(LOGDOG))
    assert code == 1
    assert finding(document, "accelerated-hardware-not-ready")["nodes"] == [DCGM_NODE]
    assert "`journalctl --list-boots`" in err  # where the year came from


def test_the_whole_bottlerocket_journal_is_cut_by_syslog_identifier() -> None:
    gathered = load_offline(LOGDOG)
    evidence = gathered.node_evidence[DCGM_NODE]
    assert evidence.layout == LAYOUT_LOGDOG
    assert set(evidence.journals) == {"kubelet", "containerd", "kernel", "nma"}
    kubelet = evidence.journals["kubelet"]
    assert {e.ident for e in kubelet.entries} == {"kubelet", "systemd"}
    assert all(e.source == "journal:kubelet" for e in kubelet.entries)
    containerd = evidence.journals["containerd"]
    # host-containerd runs the host containers: not the runtime kubelet uses.
    assert "host-containerd" not in {e.ident for e in containerd.entries}
    assert evidence.cgroup is not None and evidence.cgroup.version == 2  # proc-mounts
    assert evidence.os_release is not None and evidence.os_release.is_bottlerocket
    assert kubelet.entries[0].time.year == 2026


# -- what goes wrong ----------------------------------------------------------------------------


def test_garbage_named_like_a_bundle_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    junk = tmp_path / "eks_i-0c4f9e21b7a83d5e6_2026-11-29_0314-UTC_0.7.9.tar.gz"
    junk.write_bytes(b"\x1f\x8b\x08\x00garbage" * 40)
    assert main(["diagnose", "--from", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mignurse: error: ")
    assert "Traceback" not in err


def test_a_folder_of_something_else_says_what_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("kubelet restarted at 03:01\n")
    assert main(["diagnose", "--from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "eks-log-collector" in err and "logdog" in err and "nodes.json" in err


def test_a_truncated_download_reads_what_arrived(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    whole = pack(MIG, tmp_path / "whole.tar.gz").read_bytes()
    cut = tmp_path / "eks_i-0c4f9e21b7a83d5e6_2026-11-29_0314-UTC_0.7.9.tar.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    code, document, err = diagnose(capsys, str(cut))
    assert code in (0, 1, 2)
    assert document["layout"] == LAYOUT_EKS_LOG_COLLECTOR
    assert "ends early" in err
    assert "Traceback" not in err


def test_a_cut_bug_report_keeps_its_first_sections(tmp_path: Path) -> None:
    folder = shutil.copytree(MIG, tmp_path / "mig")
    report = folder / "gpu" / "nvidia-bug-report.log.gz"
    report.write_bytes(report.read_bytes()[:-40])  # the collector's `timeout 75` struck
    evidence = load_offline(folder).node_evidence[MIG_NODE]
    assert any("nvidia-bug-report.log.gz ends early" in p for p in evidence.problems)
    assert evidence.os_release is not None and evidence.os_release.is_al2023


def test_crlf_and_nul_bytes_do_not_hide_the_node(tmp_path: Path) -> None:
    folder = shutil.copytree(MIG, tmp_path / "mig")
    kubelet = folder / "kubelet" / "kubelet.log"
    text = (
        kubelet.read_text()
        .replace("\n", "\r\n")
        .replace('Started kubelet"', 'Started\x00 kubelet"')
    )
    kubelet.write_bytes(text.encode())
    evidence = load_offline(folder).node_evidence[MIG_NODE]
    assert evidence.journals["kubelet"].entries[0].message.startswith("Starting kubelet.service")


def test_a_bundle_cut_to_its_first_files_is_named_by_its_instance(tmp_path: Path) -> None:
    folder = tmp_path / "partial"
    (folder / "system").mkdir(parents=True)
    (folder / "system" / "script-params.txt").write_text("ignore_introspection: false\n")
    (folder / "system" / "instance-id.txt").write_text("i-0c4f9e21b7a83d5e6\n")
    gathered = load_offline(folder)
    assert list(gathered.node_evidence) == ["i-0c4f9e21b7a83d5e6"]
    assert any("the instance id" in n for n in gathered.notices)
    (folder / "system" / "instance-id.txt").unlink()
    gathered = load_offline(folder)
    assert list(gathered.node_evidence) == ["partial"]  # nothing else names it
    assert "no node name in the bundle: calling it partial" in gathered.notices


def test_the_node_flag_reads_an_evidence_only_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--from", str(MIG), "--node", MIG_NODE, "-o", "json"]) == 2
    document = json.loads(capsys.readouterr().out)
    texts = [entry["text"] for entry in document["timeline"]]
    assert any("Stopped kubelet.service" in t for t in texts)


# -- detection and the mount table ---------------------------------------------------------------


def test_layouts_are_told_by_their_files_not_their_names() -> None:
    # `tar --directory=<dir> .` puts every member under "./"
    assert detect_layout(["./kubelet/kubelet.log"]) == Layout(LAYOUT_EKS_LOG_COLLECTOR, "./")
    assert detect_layout(["kubelet/kubelet.log", "system/instance-id.txt"]) == Layout(
        LAYOUT_EKS_LOG_COLLECTOR, ""
    )
    assert detect_layout(["bottlerocket-logs/journalctl.log", "bottlerocket-logs/os-release"]) == (
        Layout(LAYOUT_LOGDOG, "bottlerocket-logs/")
    )
    assert detect_layout(["cluster/nodes.json", "nodes/n1/kubelet.log"]) is None
    assert detect_layout(["eks_i-0abc.tar.gz"]) is None


@pytest.mark.parametrize(
    ("table", "version", "fs_type"),
    [
        (
            "cgroup2 on /sys/fs/cgroup type cgroup2 (rw,nosuid,nodev,noexec,relatime)\n",
            2,
            "cgroup2fs",
        ),
        ("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n", 2, "cgroup2fs"),
        (  # hybrid: kubelet and runc see v1
            "tmpfs on /sys/fs/cgroup type tmpfs (ro,nosuid,nodev,noexec,mode=755)\n"
            "cgroup2 on /sys/fs/cgroup/unified type cgroup2 (rw,nosuid,nodev,noexec,relatime)\n",
            1,
            "tmpfs",
        ),
        ("Filesystem Size Used Avail Use% Mounted on\n/dev/nvme0n1p1 80G 6G 74G 8% /\n", None, ""),
    ],
)
def test_the_cgroup_version_from_a_mount_table(
    table: str, version: int | None, fs_type: str
) -> None:
    info = parse_cgroup_mounts(table)
    assert (info.version, info.fs_type) == (version, fs_type)
    assert bool(info.problems) == (version is None)


def test_a_gzip_bug_report_is_stored_as_gzip_members() -> None:
    # The corpus file is what nvidia-bug-report.sh leaves: several gzip members, one per section.
    data = (MIG / "gpu" / "nvidia-bug-report.log.gz").read_bytes()
    assert data.count(b"\x1f\x8b\x08") > 1
    assert gzip.decompress(data).startswith(b"____")


# -- `mignurse open` on such a bundle -----------------------------------------------------------


async def until(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    """Wait for the app's workers; the margin holds with both cores busy."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the screen never showed it")
        await asyncio.sleep(0.1)


def shown(widget: Static) -> str:
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


async def test_open_shows_the_bundle_node_with_its_evidence(tmp_path: Path) -> None:
    def table_rows() -> dict[str, tuple[str, ...]]:
        table = app.query_one("#nodes", DataTable)
        return {str(k.value): tuple(str(c) for c in table.get_row(k)) for k in table.rows}

    source = BundleSource(pack(MIG, tmp_path / "eks_i-0c4f9e21b7a83d5e6.tar.gz"))
    assert source.now() == MIG_PACKED_AT  # judged when the archive was made
    app = make_app(source)
    async with app.run_test(size=(160, 50)):
        app.open_pool(None)
        # The row comes first, its badge once the diagnosis worker is done: wait for both.
        await until(lambda: "CRIT" in table_rows().get(MIG_NODE, ()))
        row = table_rows()[MIG_NODE]
        assert "eks-log-collector bundle" in row
        app.jump_to_node(MIG_NODE)
        detail = app.query_one("#detail", Static)
        await until(lambda: "Collected on the node" in shown(detail))
        text = shown(detail)
        assert "i-0c4f9e21b7a83d5e6" in text and "mig-hook-kubelet-restart" in text
        assert "journal:kubelet" in text  # the journal timeline
        assert "journal nma" in text
