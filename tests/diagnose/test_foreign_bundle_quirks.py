"""eks-log-collector and logdog bundles as they arrive off the happy path: archive times that
say nothing (zeroed or reproducible-build mtimes), a bug report that is not gzip or unpacks
too far, a collector cut to its first files, a logdog bundle without its journal, nodes named
only by their host names, an agent that restarted ten times. Each read through
`load_offline`, as `diagnose --from` and `open` read it; the bundles are built from
tests/corpus/bundles/ (awslabs/amazon-eks-ami log-collector-script/linux/eks-log-collector.sh,
bottlerocket-os/bottlerocket-core-kit sources/logdog)."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mignurse.diagnose.foreign_bundles import (
    LAYOUT_EKS_LOG_COLLECTOR,
    LAYOUT_LOGDOG,
    BundleReader,
    Layout,
    detect_layout,
    read_node_bundle,
)
from mignurse.diagnose.inputs import NodeEvidence
from mignurse.diagnose.sources import load_offline
from mignurse.diagnose.sources.gathered import Gathered

BUNDLES = Path(__file__).parent.parent / "corpus" / "bundles"
MIG = BUNDLES / "eks-log-collector" / "mig-manager-al2023"
AL2 = BUNDLES / "eks-log-collector" / "al2-v0.7.6"
LOGDOG = BUNDLES / "logdog" / "nvidia-dcgm"
MIG_NODE = "ip-10-0-41-87.us-west-2.compute.internal"
DCGM_NODE = "ip-10-0-77-150.us-west-2.compute.internal"
MIG_ARCHIVE = "eks_i-0c4f9e21b7a83d5e6_2026-11-29_0314-UTC_0.7.9.tar.gz"
PROVENANCE = shutil.ignore_patterns("SOURCE", "*.source")


def copy(folder: Path, to: Path) -> Path:
    return shutil.copytree(folder, to, ignore=PROVENANCE)


def pack(folder: Path, out: Path, *, mtime: int, top: str = ".") -> Path:
    """`tar --directory=<dir> .` as the collector runs it, every member stamped `mtime`."""
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                info = tarfile.TarInfo(f"{top}/{path.relative_to(folder).as_posix()}")
                info.size, info.mtime = len(data), mtime
                tar.addfile(info, io.BytesIO(data))
    return out


def evidence_of(source: Path, node: str = MIG_NODE) -> tuple[Gathered, NodeEvidence]:
    gathered = load_offline(source)
    assert list(gathered.node_evidence) == [node], gathered.notices
    return gathered, gathered.node_evidence[node]


# -- when the bundle was taken --------------------------------------------------------------------


@pytest.mark.parametrize("kubelet_log", [None, "-- No entries --\n"])
def test_a_reproducible_build_mtime_is_not_the_time_the_bundle_was_taken(
    tmp_path: Path, kubelet_log: str | None
) -> None:
    # Nix and SOURCE_DATE_EPOCH=1 tar writers stamp every member 1970-01-01T00:00:01: the
    # name's stamp (the collector's start) places the bundle, never before its newest line.
    folder = copy(MIG, tmp_path / "mig")
    if kubelet_log is not None:
        (folder / "kubelet" / "kubelet.log").write_text(kubelet_log)
    gathered, evidence = evidence_of(pack(folder, tmp_path / MIG_ARCHIVE, mtime=1))
    newest_line = datetime(2026, 11, 29, 3, 14, 5, tzinfo=UTC)  # containerd's goroutine dump
    assert gathered.collected_at == newest_line
    assert (
        "collected at 2026-11-29T03:14:05Z (the bundle's name says the collector started at "
        "2026-11-29T03:14:00Z)"
    ) in gathered.notices
    assert evidence.journals["containerd"].entries[-1].time == newest_line  # year from the name
    # a collector's own name is no AWSSupport-CollectEKSInstanceLogs upload
    assert not any("AWSSupport" in notice for notice in gathered.notices)


def test_the_archive_time_is_believed_from_the_year_2000_on(tmp_path: Path) -> None:
    floor = datetime(2000, 1, 1, tzinfo=UTC)
    archive = pack(MIG, tmp_path / "node.tar.gz", mtime=int(floor.timestamp()))
    gathered, _evidence = evidence_of(archive)
    assert gathered.collected_at == floor
    assert "collected at 2000-01-01T00:00:00Z (the newest file in the archive)" in gathered.notices


def test_a_node_collected_just_after_new_year_keeps_its_lines_in_the_new_year(
    tmp_path: Path,
) -> None:
    # An extracted folder, renamed: no archive time, no name stamp. dmesg --ctime's LAST line
    # dates the year-less journal; the line before it is two days older.
    folder = tmp_path / "gpu-node-bundle"
    (folder / "kernel").mkdir(parents=True)
    (folder / "kubelet").mkdir()
    (folder / "kernel" / "dmesg.human.current").write_text(
        "[Wed Dec 30 10:00:00 2026] Linux version 6.12.40-63.114.amzn2023.x86_64\n"
        "[Fri Jan  1 00:05:00 2027] NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.\n"
    )
    (folder / "kubelet" / "kubelet.log").write_text(
        f"Jan 01 00:04:10 {MIG_NODE} kubelet[4417]: I0101 00:04:10.117053    4417 "
        'kubelet_node_status.go:78] "Successfully registered node" '
        f'node="{MIG_NODE}"\n'
    )
    _gathered, evidence = evidence_of(folder)
    assert evidence.journals["kubelet"].entries[-1].time == datetime(
        2027, 1, 1, 0, 4, 10, tzinfo=UTC
    )


def test_a_bundle_that_says_nothing_of_its_time_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "partial"
    (folder / "system").mkdir(parents=True)
    (folder / "system" / "instance-id.txt").write_text("i-0c4f9e21b7a83d5e6\n")
    gathered, _evidence = evidence_of(folder, "i-0c4f9e21b7a83d5e6")
    assert gathered.collected_at is None
    assert (
        "the bundle says nothing of its own time: year-less journal times are placed within "
        "the year before now"
    ) in gathered.notices


def test_a_list_boots_table_with_a_numeric_zone_is_read_in_that_zone(tmp_path: Path) -> None:
    # journalctl prints "-1200" where the zone has no abbreviation (TZ=Etc/GMT+12): the
    # journal's end, 2026-12-31 00:00 there, is 12:00 UTC, so a line of Jan 01 06:00 is of 2027.
    folder = copy(LOGDOG, tmp_path / "logdog")
    logs = folder / "bottlerocket-logs"
    (logs / "journalctl-boots").write_text(
        "IDX BOOT ID                          FIRST ENTRY                   LAST ENTRY\n"
        "  0 4a1c9e7d2b3f40c8a6e51d0b9f2c7a83 Tue 2026-12-29 05:10:02 -1200 "
        "Thu 2026-12-31 00:00:00 -1200\n"
    )
    journal = logs / "journalctl.log"
    journal.write_text(
        journal.read_text()
        + f"Jan 01 06:00:00.000001 {DCGM_NODE} kubelet[1488]: E0101 06:00:00.000001    1488 "
        'kubelet.go:3002] "Container runtime not ready"\n'
    )
    gathered, evidence = evidence_of(folder, DCGM_NODE)
    assert (
        "year-less journal times placed by the last journal entry `journalctl --list-boots` names"
    ) in gathered.notices
    last = evidence.journals["kubelet"].entries[-1]
    assert last.time == datetime(2027, 1, 1, 6, 0, 0, 1, tzinfo=UTC)


# -- which kernel lines ---------------------------------------------------------------------------


def test_the_kernel_journal_is_dmesg_ctime_with_dates_not_seconds_since_boot() -> None:
    _gathered, evidence = evidence_of(MIG)
    kernel = evidence.journals["kernel"]
    assert not kernel.since_boot
    assert kernel.entries[-1].time == datetime(2026, 11, 29, 3, 1, 43, tzinfo=UTC)


def test_an_empty_dmesg_ctime_falls_back_to_plain_dmesg(tmp_path: Path) -> None:
    # kernel.dmesg_restrict, or a collector cut short while writing it: an empty file
    folder = copy(MIG, tmp_path / "mig")
    (folder / "kernel" / "dmesg.human.current").write_text("")
    _gathered, evidence = evidence_of(folder)
    kernel = evidence.journals["kernel"]
    assert kernel.since_boot
    assert kernel.entries[-1].message.startswith("nvidia-caps: Creating MIG device node")


def test_var_log_messages_kernel_lines_win_over_dmesg_they_span_boots(tmp_path: Path) -> None:
    folder = copy(AL2, tmp_path / "al2")
    (folder / "kernel" / "dmesg.human.current").write_text(
        "[Thu Dec 14 09:30:00 2023] nvidia-nvlink: Nvlink Core is being initialized\n"
    )
    _gathered, evidence = evidence_of(folder, "ip-192-168-44-12.us-east-2.compute.internal")
    kernel = evidence.journals["kernel"].entries
    assert kernel[0].message.startswith("Linux version 5.10")  # /var/log/messages
    assert all("Nvlink Core" not in entry.message for entry in kernel)


# -- detection ----------------------------------------------------------------------------------


def test_a_logdog_bundle_cut_before_its_journal_is_still_logdog(tmp_path: Path) -> None:
    folder = tmp_path / "cut"
    (folder / "bottlerocket-logs").mkdir(parents=True)
    for name in ("os-release", "proc-mounts"):
        shutil.copy(LOGDOG / "bottlerocket-logs" / name, folder / "bottlerocket-logs" / name)
    gathered = load_offline(folder)
    assert gathered.layout == LAYOUT_LOGDOG
    [evidence] = gathered.node_evidence.values()
    assert "no journalctl.log in the logdog bundle" in evidence.problems
    assert evidence.os_release is not None and evidence.os_release.is_bottlerocket


COLLECTOR_FILES = [
    "kubelet/kubelet.log",
    "containerd/containerd-log.txt",
    "kernel/dmesg.current",
    "system/instance-id.txt",
    "storage/mounts.txt",
]


@pytest.mark.parametrize(
    ("names", "chosen"),
    [
        (  # a support case folder: two cut downloads around the whole one
            [
                *(f"eks_i-0a_cut/{n}" for n in COLLECTOR_FILES[:1]),
                *(f"eks_i-0b_whole/{n}" for n in COLLECTOR_FILES),
                *(f"eks_i-0c_cut/{n}" for n in COLLECTOR_FILES[:2]),
            ],
            Layout(LAYOUT_EKS_LOG_COLLECTOR, "eks_i-0b_whole/"),
        ),
        (  # two whole bundles side by side: the first by name, every time
            [f"{b}/{n}" for b in ("eks_i-0a", "eks_i-0b") for n in COLLECTOR_FILES],
            Layout(LAYOUT_EKS_LOG_COLLECTOR, "eks_i-0a/"),
        ),
        # a logdog folder and a collector's side by side: the bottlerocket-logs folder counts
        # as one of logdog's files; even, the first found (logdog's folder sorts first) wins
        (
            ["bottlerocket-logs/journalctl.log", *(f"eks_i-0a/{n}" for n in COLLECTOR_FILES[:2])],
            Layout(LAYOUT_LOGDOG, "bottlerocket-logs/"),
        ),
        (
            ["bottlerocket-logs/journalctl.log", *(f"eks_i-0a/{n}" for n in COLLECTOR_FILES[:3])],
            Layout(LAYOUT_EKS_LOG_COLLECTOR, "eks_i-0a/"),
        ),
    ],
)
def test_a_folder_of_several_bundles_reads_the_most_complete(
    names: list[str], chosen: Layout
) -> None:
    assert detect_layout(names) == chosen


# -- files the collector may or may not hold ----------------------------------------------------


def test_the_agent_log_from_its_var_log_containers_copy_alone(tmp_path: Path) -> None:
    folder = copy(MIG, tmp_path / "mig")
    for pod in (folder / "var_log").glob("kube-system_eks-node-monitoring-agent-*"):
        shutil.rmtree(pod)
    _gathered, evidence = evidence_of(pack(folder, tmp_path / MIG_ARCHIVE, mtime=1764386047))
    assert "starting eks-node-monitoring-agent" in evidence.journals["nma"].entries[0].message


def test_the_agent_log_keeps_each_pods_restarts_in_order() -> None:
    pods = {
        "kube-system_eks-node-monitoring-agent-a1b2c_0b7c9f34-2e61-4a58-8d13-7f5e2c9a1b06": 12,
        "kube-system_eks-node-monitoring-agent-z9y8x_5e2c9a1b-2e61-4a58-8d13-0b7c9f347f5e": 2,
    }
    files = {
        f"var_log/{pod}/eks-node-monitoring-agent/{restart}.log": f"{pod} {restart}\n".encode()
        for pod, restarts in pods.items()
        for restart in range(restarts)
    }
    files["kubelet/kubelet.log"] = b""
    bundle = read_node_bundle(
        BundleReader(sorted(files), files.get),
        Layout(LAYOUT_EKS_LOG_COLLECTOR, ""),
        archive_names=["node"],
        archive_time=None,
    )
    order = [
        line for line in bundle.node_files["nma.log"].decode().splitlines() if "==>" not in line
    ]
    assert order == [f"{pod} {r}" for pod, restarts in pods.items() for r in range(restarts)]


def test_a_snapshot_carrying_an_extracted_collector_deep_inside_reads_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three folders down is no layout mignurse reads: its big kubelet.log is passed over,
    # not cut at the file cap, and the snapshot's nodes.json after it is read.
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "4K")
    archive = tmp_path / "case.tar.gz"
    members = {
        "case/attachments/eks_i-0c4f9e21b7a83d5e6/kubelet/kubelet.log": b"x" * 10_000,
        "case/cluster/nodes.json": json.dumps({"items": []}).encode(),
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1764386047
            tar.addfile(info, io.BytesIO(data))
    gathered = load_offline(archive)
    assert gathered.layout != LAYOUT_EKS_LOG_COLLECTOR
    assert not any("was cut at" in notice for notice in gathered.notices)


# -- nvidia-bug-report ---------------------------------------------------------------------------


def report_text() -> bytes:
    return gzip.decompress((MIG / "gpu" / "nvidia-bug-report.log.gz").read_bytes())


def test_a_bug_report_left_uncompressed_on_a_host_without_gzip(tmp_path: Path) -> None:
    folder = copy(MIG, tmp_path / "mig")
    (folder / "gpu" / "nvidia-bug-report.log.gz").unlink()
    (folder / "gpu" / "nvidia-bug-report.log").write_bytes(report_text())
    _gathered, evidence = evidence_of(folder)
    assert evidence.os_release is not None and evidence.os_release.is_al2023


@pytest.mark.parametrize(
    "packed",
    [b"\x1f\x8b\x08\x00" + b"\xff" * 64, zlib.compress(b"*** /etc/os-release\nID=amzn\n")],
    ids=["garbage", "zlib-not-gzip"],
)
def test_a_bug_report_that_is_not_gzip_is_named_unreadable(tmp_path: Path, packed: bytes) -> None:
    folder = copy(MIG, tmp_path / "mig")
    (folder / "gpu" / "nvidia-bug-report.log.gz").write_bytes(packed)
    _gathered, evidence = evidence_of(folder)
    assert any(
        p.startswith("gpu/nvidia-bug-report.log.gz: unreadable after 0 bytes")
        for p in evidence.problems
    )
    assert evidence.os_release is None


def test_a_bug_report_unpacking_past_the_file_cap_is_cut_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "64K")
    folder = copy(MIG, tmp_path / "mig")
    bomb = gzip.compress(report_text()) + gzip.compress(b"\0" * (8 * 2**20))
    (folder / "gpu" / "nvidia-bug-report.log.gz").write_bytes(bomb)
    gathered, evidence = evidence_of(folder)
    cut = [p for p in evidence.problems if "nvidia-bug-report.log.gz was cut at 64 KiB" in p]
    assert len(cut) == 1
    assert cut[0] in gathered.notices  # said even when no finding shows the node's problems
    assert not any("ends early" in p for p in [*evidence.problems, *gathered.notices])
    assert evidence.os_release is not None and evidence.os_release.is_al2023


def test_a_bug_report_of_exactly_the_file_cap_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = report_text()
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", str(len(report)))
    folder = copy(MIG, tmp_path / "mig")
    gathered, evidence = evidence_of(folder)
    assert not any(
        "bug-report.log.gz was cut" in p for p in [*evidence.problems, *gathered.notices]
    )
    assert evidence.os_release is not None and evidence.os_release.is_al2023


def test_a_bug_report_without_an_os_release_names_no_os(tmp_path: Path) -> None:
    # /etc/os-release missing: nvidia-bug-report.sh writes the heading and the `ls` line only
    folder = copy(MIG, tmp_path / "mig")
    report = report_text().decode()
    start = report.index("*** /etc/os-release")
    end = report.index("\n____", start)
    emptied = (
        report[:start]
        + "*** /etc/os-release\n*** ls: /etc/os-release: No such file or directory\n"
        + report[end + 1 :]
    )
    (folder / "gpu" / "nvidia-bug-report.log.gz").write_bytes(gzip.compress(emptied.encode()))
    _gathered, evidence = evidence_of(folder)
    assert evidence.os_release is None


# -- logdog's own words ----------------------------------------------------------------------------


def test_logdog_errors_and_unreadable_journal_lines_are_the_nodes_problems(
    tmp_path: Path,
) -> None:
    folder = copy(LOGDOG, tmp_path / "logdog")
    logs = folder / "bottlerocket-logs"
    (logs / "logdog.errors").write_text(
        "\nError running command 'iptables -nvL -t filter': No such file or directory\n"
    )
    journal = logs / "journalctl.log"
    journal.write_text(journal.read_text() + "\x00\x00 not a journal line\n")
    _gathered, evidence = evidence_of(folder, DCGM_NODE)
    assert (
        "logdog: Error running command 'iptables -nvL -t filter': No such file or directory"
        in evidence.problems
    )
    assert any(p.startswith("journalctl.log: ") for p in evidence.problems)


def test_systemd_lines_go_to_the_unit_they_are_about(tmp_path: Path) -> None:
    folder = copy(LOGDOG, tmp_path / "logdog")
    journal = folder / "bottlerocket-logs" / "journalctl.log"
    host = DCGM_NODE
    journal.write_text(
        journal.read_text()
        + f"Nov 29 05:31:40.000001 {host} systemd[1]: kubelet.service: Found ordering cycle on "
        "containerd.service/start\n"
        + f"Nov 29 05:31:41.000001 {host} thar-be-settings[2001]: Restarting kubelet.service\n"
    )
    _gathered, evidence = evidence_of(folder, DCGM_NODE)
    kubelet = [e.message for e in evidence.journals["kubelet"].entries]
    containerd = [e.message for e in evidence.journals["containerd"].entries]
    assert any("Found ordering cycle" in m for m in kubelet)
    assert not any("Found ordering cycle" in m for m in containerd)
    assert not any("Restarting kubelet.service" in m for m in kubelet)
    assert any(m.startswith("Starting containerd.service") for m in containerd)
    assert not any("containerd container runtime" in m for m in kubelet)


# -- the node's name -----------------------------------------------------------------------------


def test_the_older_printf_registration_line_names_the_node(tmp_path: Path) -> None:
    folder = tmp_path / "node"
    (folder / "kubelet").mkdir(parents=True)
    (folder / "kubelet" / "kubelet.log").write_text(
        "Nov 29 03:01:05 ip-10-0-41-87 kubelet[2291]: I1129 03:01:05.000000    2291 "
        f"kubelet_node_status.go:76] Successfully registered node {MIG_NODE}\n"
    )
    gathered, _evidence = evidence_of(folder)
    assert f'node name {MIG_NODE} from kubelet\'s "Successfully registered node" line' in (
        gathered.notices
    )


def test_without_a_registration_line_the_commonest_real_host_name_names_the_node(
    tmp_path: Path,
) -> None:
    # Before its host name is set a node logs as "localhost" (and a renamed one under its
    # old name): the name most of kubelet's lines carry wins over the instance id.
    folder = tmp_path / "node"
    (folder / "kubelet").mkdir(parents=True)
    (folder / "system").mkdir()
    (folder / "system" / "instance-id.txt").write_text("i-0c4f9e21b7a83d5e6\n")
    lines = [
        *(f"Nov 29 03:00:5{i} localhost kubelet[2291]: starting" for i in range(4)),
        "Nov 29 03:01:00 ip-10-0-41-1.us-west-2.compute.internal kubelet[2291]: renamed",
        *(
            f"Nov 29 03:01:0{i} {MIG_NODE} kubelet[2291]: Container runtime not ready"
            for i in range(3)
        ),
    ]
    (folder / "kubelet" / "kubelet.log").write_text("\n".join(lines) + "\n")
    gathered, evidence = evidence_of(folder)
    assert f"node name {MIG_NODE} from the host name on kubelet's journal lines" in (
        gathered.notices
    )
    assert evidence.instance_id == "i-0c4f9e21b7a83d5e6"
