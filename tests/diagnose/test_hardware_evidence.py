"""A failing GPU with no AcceleratedHardwareReady condition to say so: the node's kernel log,
nvidia-smi's row remapper and the node monitoring agent's own log, read from real-shaped
files in tests/corpus/gpu-health/, and their look-alikes that must not raise an alarm."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    RUNBOOK_REPLACE,
    SEVERITY_ORDER,
    WARNING,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings, NodeEvidence
from mignurse.diagnose.rules import hardware
from mignurse.diagnose.sources import load_offline
from mignurse.evidence import (
    GpuHealthReport,
    JournalEntry,
    JournalParse,
    agent_conditions,
    parse_bug_report_gpu_health,
    parse_gpu_health_text,
    parse_gpu_health_xml,
    parse_journal,
)
from mignurse.evidence.containerlog import parse_container_log
from mignurse.model import Condition, Node

CORPUS = Path(__file__).parents[1] / "corpus" / "gpu-health"
NOW = datetime(2026, 11, 29, 3, 10, tzinfo=UTC)
NODE = "ip-10-0-91-23.us-west-2.compute.internal"
AHR = "AcceleratedHardwareReady"
NO_CONDITION = "no AcceleratedHardwareReady condition (node monitoring agent not installed?)"


def read(path: str) -> str:
    return (CORPUS / path).read_text()


def kernel(*paths: str, unit: str = "kernel") -> dict[str, JournalParse]:
    return {unit: parse_journal("".join(read(p) for p in paths), f"journal:{unit}")}


def evidence(
    *,
    journals: dict[str, JournalParse] | None = None,
    smi: GpuHealthReport | None = None,
    node: str = NODE,
) -> NodeEvidence:
    return NodeEvidence(node=node, journals=journals or {}, gpu_health=smi)


def gpu_node(*conditions: Condition, name: str = NODE, pool: str = "gpu-training") -> Node:
    return Node(
        name=name,
        pool=pool,
        pool_kind="nodepool",
        instance_type="p4d.24xlarge",
        labels={"karpenter.sh/nodepool": pool},
        conditions=(Condition("Ready", "True", "KubeletReady", "", NOW - timedelta(hours=2)),
                    *conditions),
    )  # fmt: skip


def run(
    *evidences: NodeEvidence, nodes: tuple[Node, ...] = (), repair: bool = True
) -> list[Finding]:
    inp = DiagnosisInput(
        snapshot=Snapshot(nodes={n.name: n for n in nodes}, karpenter=bool(nodes)),
        now=NOW,
        node_evidence={e.node: e for e in evidences},
        karpenter=KarpenterSettings(node_repair=repair, feature_gates=f"NodeRepair={repair}"),
    )
    found = hardware.rule(inp)
    assert all(f.id == ACCELERATED_HARDWARE_NOT_READY for f in found)
    return found


def texts(finding: Finding, source: str | None = None) -> str:
    return "\n".join(e.text for e in finding.evidence if source is None or e.source == source)


def worst(findings: list[Finding]) -> str | None:
    return min((f.severity for f in findings), key=SEVERITY_ORDER.__getitem__, default=None)


# -- nvidia-smi's memory-error state ------------------------------------------------------------


def test_xml_names_the_gpu_whose_row_remapping_failed() -> None:
    report = parse_gpu_health_xml(read("nvidia-smi/x-h100-remap-failure-r570.xml"))
    assert report.problems == () and report.driver == "570.172.08"
    healthy, failing = report.gpus
    assert (healthy.remap_failure, healthy.remap_pending, healthy.volatile_uncorrectable) == (
        False, False, 0,
    )  # fmt: skip
    assert failing.pci_bus_id == "00000000:64:00.0" and failing.remap_failure is True
    assert (failing.remapped_uncorrectable, failing.volatile_uncorrectable) == (8, 4)
    assert failing.sram_threshold_exceeded is False
    assert failing.retirement_pending is None  # H100 retires no pages: N/A, not "No"


def test_xml_of_a_375_driver_reads_page_retirement_and_leaves_the_remapper_unknown() -> None:
    (gpu,) = parse_gpu_health_xml(read("nvidia-smi/x-k80-retirement-pending-r375.xml")).gpus
    assert (gpu.remap_failure, gpu.remap_pending, gpu.remapped_uncorrectable) == (None, None, None)
    assert (gpu.retirement_pending, gpu.retired_double_bit, gpu.volatile_uncorrectable) == (
        True, 1, 1,
    )  # fmt: skip


def test_xml_remapped_rows_na_is_unknown_not_healthy() -> None:
    text = read("nvidia-smi/x-l4-healthy-r555.xml")
    start, end = text.index("<remapped_rows>"), text.index("</remapped_rows>") + 16
    (gpu,) = parse_gpu_health_xml(
        text[:start] + "<remapped_rows>N/A</remapped_rows>" + text[end:]
    ).gpus
    assert (gpu.remap_failure, gpu.remap_pending) == (None, None)
    (healthy,) = parse_gpu_health_xml(text).gpus
    assert (healthy.remap_failure, healthy.remap_pending) == (False, False)


def test_xml_cut_short_keeps_the_complete_gpus_and_says_so() -> None:
    text = read("nvidia-smi/x-h100-remap-failure-r570.xml")
    cut = text[: text.index("<remapped_row_failure>Yes")]
    report = parse_gpu_health_xml(cut)
    assert [g.index for g in report.gpus] == [0]
    assert any("truncated" in p for p in report.problems)
    assert any("attached_gpus is 2" in p for p in report.problems)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]><nvidia_smi_log/>',
        "<nvidia_smi_log><gpu id='0'><remapped_rows><remapped_row_failure>Yes\x00",
        "\x00\x01garbage<<<>>>",
    ],
)
def test_xml_garbage_is_a_problem_never_an_exception(text: str) -> None:
    report = parse_gpu_health_xml(text)
    assert report.gpus == () and report.problems


def test_text_of_r535_and_r570_reads_failure_pending_and_volatile_errors() -> None:
    report = parse_gpu_health_text(read("nvidia-smi/q-a100-remap-failure-r535.txt"))
    assert report.problems == () and report.driver == "535.261.03"
    healthy, failing = report.gpus
    assert healthy.remap_failure is False and healthy.volatile_uncorrectable == 0
    assert failing.pci_bus_id == "00000000:10:1D.0"
    assert (failing.remap_failure, failing.remapped_uncorrectable) == (True, 8)
    assert failing.volatile_uncorrectable == 2  # DRAM Uncorrectable; SRAM 0

    (h100,) = parse_gpu_health_text(read("nvidia-smi/q-h100-remap-pending-r570.txt")).gpus
    assert (h100.remap_pending, h100.remap_failure, h100.volatile_uncorrectable) == (True, False, 1)
    assert h100.sram_threshold_exceeded is False


def test_text_of_a_450_driver_reads_the_old_ecc_blocks_and_pending_retirement() -> None:
    (gpu,) = parse_gpu_health_text(read("nvidia-smi/q-v100-retirement-pending-r450.txt")).gpus
    assert gpu.name == "Tesla V100-SXM2-16GB"
    assert gpu.volatile_uncorrectable == 1  # the volatile "Double Bit" block's Total
    assert (gpu.retirement_pending, gpu.retired_double_bit) == (True, 1)
    assert gpu.remap_failure is None  # "Remapped Rows : N/A"


@pytest.mark.parametrize(
    "path", ["nvidia-smi/q-t4-remap-na-r535.txt", "nvidia-smi/q-a100-mig-remap-na-r535.txt"]
)
def test_text_remapped_rows_na_on_turing_and_under_mig_is_unknown(path: str) -> None:
    (gpu,) = parse_gpu_health_text(read(path)).gpus
    assert (gpu.remap_failure, gpu.remap_pending, gpu.remapped_uncorrectable) == (None, None, None)


def test_text_with_crlf_and_nul_bytes_reads_the_same() -> None:
    text = read("nvidia-smi/q-a100-remap-failure-r535.txt")
    mangled = text.replace("\n", "\r\n").replace("Remapping Failure", "Remapping\x00 Failure", 1)
    assert parse_gpu_health_text(mangled).gpus[1].remap_failure is True


@pytest.mark.parametrize("text", ["", "\n\n", "No devices were found\n", "GPU 00000000:10:1C.0\n"])
def test_text_without_gpu_sections_is_unknown(text: str) -> None:
    report = parse_gpu_health_text(text)
    assert all(g.remap_failure is None for g in report.gpus)
    assert report.problems or report.gpus


def test_bug_report_reads_its_nvidia_smi_query_section_only() -> None:
    report = parse_bug_report_gpu_health(read("bug-report/nvidia-bug-report-a100-r535.log"))
    assert report.source == "nvidia-bug-report" and report.problems == ()
    assert [g.remap_failure for g in report.gpus] == [False, True]  # not the --unit query


def test_bug_report_in_safe_mode_has_no_nvidia_smi_and_says_why() -> None:
    report = parse_bug_report_gpu_health(read("bug-report/nvidia-bug-report-safe-mode-r570.log"))
    assert report.gpus == ()
    assert report.problems == ("nvidia-bug-report ran with --safe-mode, which skips nvidia-smi",)


# -- the agent's own log ------------------------------------------------------------------------


def test_agent_log_yields_the_conditions_it_sent() -> None:
    log = parse_container_log(read("nma/dcgm-error-libdcgm-not-found.log"), "journal:nma")
    sent = agent_conditions(log.entries)
    assert [(c.condition_type, c.reason, c.severity) for c in sent] == [
        (AHR, "DCGMError", "Fatal")
    ] * 3
    assert sent[0].message == "failed to initialize DCGM: libdcgm.so not Found"
    assert sent[0].time == datetime(2026, 11, 29, 2, 48, 10, 402183, tzinfo=UTC)


def test_agent_line_cut_short_still_names_its_reason() -> None:
    line = next(
        ln for ln in read("nma/dcgm-error-libdcgm-not-found.log").splitlines() if "sending" in ln
    )
    whole = line.split(" F ", 1)[1]
    # A partial line the runtime split: not JSON any more, its fields still there to read.
    for cut, condition_type in ((whole[:-1], AHR), (whole[:-40], "")):
        entry = JournalEntry(NOW, "", "eks-node-monitoring-agent", None, cut, 0, 1, "journal:nma")
        (sent,) = agent_conditions([entry])
        assert (sent.reason, sent.severity) == ("DCGMError", "Fatal")
        assert sent.message == "failed to initialize DCGM: libdcgm.so not Found"
        assert sent.condition_type == condition_type


# -- findings without a condition ---------------------------------------------------------------


def test_xid79_in_a_bundle_without_a_node_object_is_a_replacement() -> None:
    (finding,) = run(evidence(journals=kernel("kernel/xid79-fallen-off-bus-r570.log")))
    assert finding.nodepool == "" and finding.nodes == (NODE,)
    assert finding.severity == CRITICAL and finding.deadline is None
    assert finding.runbooks == (RUNBOOK_REPLACE, "cordon-and-collect")
    assert NO_CONDITION in finding.summary
    assert "Xid 79 (GPU has fallen off the bus)" in finding.summary
    assert "no automatic repair acts without the condition" in finding.summary
    kernel_lines = texts(finding, "journal:kernel")
    assert "Xid 79 on 0000:10:1c" in kernel_lines and "RESTART_BM" in kernel_lines
    assert "Xid 45" in kernel_lines  # the application teardown it caused, shown, not counted
    assert "no Node object" in texts(finding, "condition")


def test_row_remapping_failure_in_nvidia_smi_xml_on_a_node_without_the_agent() -> None:
    smi = parse_gpu_health_xml(read("nvidia-smi/x-h100-remap-failure-r570.xml"))
    (finding,) = run(evidence(smi=smi), nodes=(gpu_node(),))
    assert finding.nodepool == "gpu-training" and finding.severity == CRITICAL
    assert NO_CONDITION in finding.summary and "row remapping failure on GPU 1" in finding.summary
    smi_lines = texts(finding, "nvidia-smi")
    assert "GPU 1 (00000000:64:00.0): Remapping Failure Occurred: Yes" in smi_lines
    assert "8 rows remapped" in smi_lines and "4 uncorrectable ECC errors" in smi_lines
    assert "GPU 0" not in smi_lines


def test_bug_report_of_a_foreign_bundle_is_read_through_the_bundle_loader(tmp_path: Path) -> None:
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": []}))
    node_dir = tmp_path / "nodes" / NODE
    node_dir.mkdir(parents=True)
    (node_dir / "nvidia-bug-report.log").write_text(
        read("bug-report/nvidia-bug-report-a100-r535.log")
    )
    gathered = load_offline(tmp_path)
    report = gathered.node_evidence[NODE].gpu_health
    assert report is not None and report.source == "nvidia-bug-report"
    (finding,) = hardware.rule(gathered.to_input(NOW))
    assert finding.severity == CRITICAL and "row remapping failure on GPU 1" in finding.summary


def test_dbe_then_failed_retirement_is_a_replacement_with_every_xid_as_evidence() -> None:
    (finding,) = run(evidence(journals=kernel("kernel/xid48-63-64-dbe-r535.log")))
    assert finding.severity == CRITICAL
    assert "Xid 64 (memory remapping or retirement failure)" in finding.summary
    lines = texts(finding, "journal:kernel")
    for code in (48, 63, 64, 94):
        assert f"Xid {code} on 0000:53:00" in lines


def test_gsp_timeouts_are_a_reset_not_a_replacement() -> None:
    (finding,) = run(evidence(journals=kernel("kernel/xid119-gsp-timeouts-r535.log")))
    assert finding.severity == WARNING and RUNBOOK_REPLACE not in finding.runbooks
    assert (
        "drain the node and reboot it" in finding.summary and "GSP RPC timeout" in finding.summary
    )
    assert "Xid 119 on 0000:61:00 ×4 until 2026-11-29T02:12:22" in texts(finding)


def test_xid_attributed_to_a_mig_instance_is_read_like_any_other() -> None:
    (finding,) = run(evidence(journals=kernel("kernel/xid94-mig-attributed.log")))
    assert finding.severity == WARNING
    assert "Xid 94 on 0000:ca:00" in texts(finding, "journal:kernel")


def test_pending_row_remap_in_nvidia_smi_text_is_a_reset() -> None:
    smi = parse_gpu_health_text(read("nvidia-smi/q-h100-remap-pending-r570.txt"))
    (finding,) = run(evidence(smi=smi))
    assert finding.severity == WARNING
    assert "row remapping pending on GPU 0" in finding.summary
    assert "applied at the next GPU reset" in texts(finding, "nvidia-smi")


def test_pending_page_retirement_of_an_old_driver_is_a_reset() -> None:
    smi = parse_gpu_health_text(read("nvidia-smi/q-v100-retirement-pending-r450.txt"))
    (finding,) = run(evidence(smi=smi))
    assert finding.severity == WARNING and "page retirement pending on GPU 0" in finding.summary
    assert "1 pages retired for double-bit errors" in texts(finding, "nvidia-smi")


def test_xid79_on_a_node_the_agent_still_calls_ready() -> None:
    ready = Condition(AHR, "True", "NvidiaGPUIsReady", "Monitoring for the Nvidia GPU system is "
                      "active", NOW - timedelta(hours=1))  # fmt: skip
    (finding,) = run(
        evidence(journals=kernel("kernel/xid79-fallen-off-bus-r570.log")), nodes=(gpu_node(ready),)
    )
    assert finding.severity == CRITICAL and finding.deadline is None
    assert "AcceleratedHardwareReady not False" in finding.summary
    assert NO_CONDITION not in finding.summary


def test_xid79_of_the_previous_boot_is_a_warning_not_a_replacement() -> None:
    journals = kernel("kernel/xid79-fallen-off-bus-r570.log", unit="kernel-previous-boot")
    (finding,) = run(evidence(journals=journals))
    assert finding.severity == WARNING and RUNBOOK_REPLACE not in finding.runbooks
    assert "(previous boot)" in texts(finding, "journal:kernel")


def test_the_same_xid_in_two_copies_of_the_kernel_log_counts_once() -> None:
    journals = {
        **kernel("kernel/xid119-gsp-timeouts-r535.log"),
        **kernel("kernel/xid119-gsp-timeouts-r535.log", unit="messages"),
    }
    (finding,) = run(evidence(journals=journals))
    assert "×4 until" in texts(finding) and "×8" not in texts(finding)


# -- the look-alikes ----------------------------------------------------------------------------


def test_cuda_application_xids_are_at_most_informational() -> None:
    found = run(evidence(journals=kernel("kernel/app-xids-lookalike-r595.log")))
    assert worst(found) in (None, INFO)
    for finding in found:
        assert RUNBOOK_REPLACE not in finding.runbooks and "replace" not in finding.summary
        assert "application's own fault" in finding.summary


@pytest.mark.parametrize(
    "smi",
    [
        "nvidia-smi/q-a10g-healthy-r550.txt",
        "nvidia-smi/q-t4-remap-na-r535.txt",
        "nvidia-smi/q-a100-mig-remap-na-r535.txt",
        "nvidia-smi/x-l4-healthy-r555.xml",
    ],
)
def test_healthy_and_unknown_nvidia_smi_raise_nothing(smi: str) -> None:
    parse = parse_gpu_health_xml if smi.endswith(".xml") else parse_gpu_health_text
    assert run(evidence(smi=parse(read(smi))), nodes=(gpu_node(),)) == []


def test_agent_warning_events_are_not_a_condition() -> None:
    log = parse_container_log(read("nma/warning-events-only.log"), "journal:nma")
    assert run(evidence(journals={"nma": log})) == []


# -- the agent's log when the Node is not there -------------------------------------------------


def test_dcgm_error_in_the_agent_log_of_a_lone_bundle() -> None:
    log = parse_container_log(read("nma/dcgm-error-libdcgm-not-found.log"), "journal:nma")
    (finding,) = run(evidence(journals={"nma": log}))
    assert finding.severity == WARNING and finding.deadline is None
    assert "node monitoring agent log reports AcceleratedHardwareReady=False (DCGMError)" in (
        finding.summary
    )
    assert "not the GPU: replacing the node will not help" in finding.summary
    assert "about 10 minutes after the condition" in finding.summary
    assert "2026-11-29T02:58:10Z" in finding.summary  # 02:48:10 + 10m
    assert "its replacement fails the same way" in finding.summary
    assert "×3" in texts(finding, "journal:nma")
    assert NO_CONDITION not in finding.summary


# -- with the condition: one finding, more evidence ---------------------------------------------


def test_condition_finding_carries_the_kernel_evidence_instead_of_a_second_finding() -> None:
    dcgm = Condition(AHR, "False", "DCGMError", "failed to initialize DCGM: libdcgm.so not Found",
                     NOW - timedelta(minutes=4))  # fmt: skip
    node = gpu_node(dcgm)
    (finding,) = run(
        evidence(journals=kernel("kernel/xid79-fallen-off-bus-r570.log")), nodes=(node,)
    )
    assert finding.deadline == NOW + timedelta(minutes=6)  # repair's clock is untouched
    assert "GPU monitoring plumbing" in finding.summary
    assert "the node's own files show a GPU hardware fault too: Xid 79" in finding.summary
    # DCGMError is the cause repair acts on, and a new node fails the same way: no
    # replacement is offered until the agent's DCGM works.
    assert RUNBOOK_REPLACE not in finding.runbooks
    assert "replace it once the agent's DCGM works" in finding.summary
    assert "Xid 79 on 0000:10:1c" in texts(finding, "journal:kernel")


def test_condition_for_xid13_is_the_applications_fault_not_a_replacement() -> None:
    xid13 = Condition(AHR, "False", "NvidiaXID13Error",
                      "detected XID-13 on the instance, review kernel logs for additional "
                      "information.", NOW - timedelta(minutes=3))  # fmt: skip
    (finding,) = run(nodes=(gpu_node(xid13),))
    assert "application's own fault" in finding.summary
    assert "v1.6.0-v1.6.3 make Xid 13 a condition" in finding.summary
    assert "replace the instance" not in finding.summary
    assert RUNBOOK_REPLACE not in finding.runbooks
    assert finding.runbooks == ("pause-node-repair", "cordon-and-collect")
