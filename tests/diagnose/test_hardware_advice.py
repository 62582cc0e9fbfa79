"""What the accelerated-hardware finding tells the on-call engineer to do, and how it words
the cause: pause or not, replace or not, how urgent, which agent release, which of the node's
own signs leads. Inputs are real-shaped: Nodes as the API server returns them, kernel lines in
krcReportXid's form (NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/
kernel_rc.c), the node monitoring agent's zap lines in the kubelet's CRI log format
(aws/eks-node-monitoring-agent v1.7.0 pkg/manager/manager.go SendCondition), nvidia-smi -q -x
from tests/corpus/gpu-health/. Every finding goes through the engine, which must raise no
rule error."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import Container, DaemonSetInfo
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    RUNBOOK_REPLACE,
    WARNING,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings, NodeEvidence
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.evidence import JournalParse, parse_gpu_health_xml, parse_journal
from mignurse.evidence.containerlog import parse_container_log
from mignurse.model import Node, format_time

CORPUS = Path(__file__).parents[1] / "corpus" / "gpu-health"
NOW = datetime(2026, 11, 29, 3, 10, tzinfo=UTC)
AHR = "AcceleratedHardwareReady"
NODE = "ip-10-0-91-23.us-west-2.compute.internal"
LIBDCGM = "failed to initialize DCGM: libdcgm.so not Found"
NO_CONDITION = "no AcceleratedHardwareReady condition (node monitoring agent not installed?)"
REGISTRY = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks"


def node_json(
    name: str = NODE,
    *,
    pool: str = "gpu-training",
    ahr: str = "",
    message: str = "",
    since: timedelta = timedelta(minutes=4),
    auto: bool = False,
    nodegroup: str = "",
) -> dict[str, Any]:
    """A p4d Node; `ahr` is the AcceleratedHardwareReady=False reason, "True" for a healthy
    condition, "" for none (no agent on the node)."""
    labels = {"node.kubernetes.io/instance-type": "p4d.24xlarge", "nvidia.com/gpu.present": "true"}
    if pool:
        labels["karpenter.sh/nodepool"] = pool
    if nodegroup:
        labels["eks.amazonaws.com/nodegroup"] = nodegroup
    if auto:
        labels["eks.amazonaws.com/compute-type"] = "auto"
    conditions = [
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "message": "kubelet is posting ready status",
         "lastTransitionTime": format_time(NOW - timedelta(hours=2))},
    ]  # fmt: skip
    if ahr == "True":
        conditions.append(
            {"type": AHR, "status": "True", "reason": "NvidiaGPUIsReady",
             "message": "Monitoring for the Nvidia GPU system is active",
             "lastTransitionTime": format_time(NOW - timedelta(hours=2))}
        )  # fmt: skip
    elif ahr:
        conditions.append(
            {"type": AHR, "status": "False", "reason": ahr, "message": message,
             "lastTransitionTime": format_time(NOW - since)}
        )  # fmt: skip
    return {
        "metadata": {
            "name": name,
            "labels": labels,
            "creationTimestamp": format_time(NOW - timedelta(hours=2)),
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-0{abs(hash(name)) % 10**16:016d}"},
        "status": {
            "conditions": conditions,
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
        },
    }


def findings(
    nodes: list[dict[str, Any]] = (),  # type: ignore[assignment]
    evidence: list[NodeEvidence] = (),  # type: ignore[assignment]
    *,
    nodegroups: dict[str, NodeGroupRepair] | None = None,
    daemonsets: tuple[DaemonSetInfo, ...] | None = None,
) -> list[Finding]:
    parsed = [Node.from_api(n) for n in nodes]
    inp = DiagnosisInput(
        snapshot=Snapshot(nodes={n.name: n for n in parsed}, karpenter=True),
        now=NOW,
        node_evidence={e.node: e for e in evidence},
        karpenter=KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true"),
        nodegroups=nodegroups or {},
        daemonsets=daemonsets,
    )
    diagnosis = diagnose(inp)
    assert diagnosis.rule_errors == []  # no rule broke on the input
    return [f for f in diagnosis.findings if f.id == ACCELERATED_HARDWARE_NOT_READY]


def kernel_line(at: datetime, pci: str, xid: int, text: str, host: str = NODE) -> str:
    """journalctl -k -o short-iso-precise --utc, as the collector runs it."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+0000"
    return f"{stamp} {host} kernel: NVRM: Xid (PCI:{pci}): {xid}, {text}\n"


def kernel(*lines: str, unit: str = "kernel") -> dict[str, JournalParse]:
    return {unit: parse_journal("".join(lines), f"journal:{unit}")}


XID79 = kernel_line(NOW - timedelta(minutes=7), "0000:10:1c", 79,
                    "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")  # fmt: skip


def agent_line(at: datetime, reason: str, message: str, *, host: str = NODE) -> str:
    """One "sending condition to exporter" line of the agent's container log."""
    record = {
        "level": "info",
        "ts": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "msg": "sending condition to exporter",
        "hostname": host,
        "condition": {"Reason": reason, "Message": message, "Severity": "Fatal",
                      "MinOccurrences": 0},
        "conditionType": AHR,
    }  # fmt: skip
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return f"{stamp} stderr F {json.dumps(record, separators=(',', ':'))}\n"


def agent_start(at: datetime, version: str, *, host: str = NODE) -> str:
    record = {
        "level": "info",
        "ts": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "msg": "starting eks-node-monitoring-agent",
        "hostname": host,
        "version": version,
    }
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return f"{stamp} stderr F {json.dumps(record, separators=(',', ':'))}\n"


def agent_log(*lines: str) -> dict[str, JournalParse]:
    return {"nma": parse_container_log("".join(lines), "journal:nma")}


def files(
    journals: dict[str, JournalParse] | None = None, *, node: str = NODE, smi: str = ""
) -> NodeEvidence:
    return NodeEvidence(
        node=node, journals=journals or {}, gpu_health=parse_gpu_health_xml(smi) if smi else None
    )


def texts(finding: Finding, source: str | None = None) -> str:
    return "\n".join(e.text for e in finding.evidence if source is None or e.source == source)


# -- with the condition: pause, replace, urgency ------------------------------------------------


def test_a_dcgm_error_on_a_karpenter_pool_says_pause_repair_and_claims_no_hardware_fault() -> None:
    (finding,) = findings([node_json(ahr="DCGMError", message=LIBDCGM)])
    assert "; repair fires" in finding.summary and "; pause repair" in finding.summary
    assert "own files show" not in finding.summary  # nothing in its files says hardware
    assert finding.runbooks == (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)


def test_a_gpu_off_the_bus_is_offered_one_replacement_and_no_pause() -> None:
    node = node_json(ahr="NvidiaXID79Error",
                     message="detected XID-79 on the instance, review kernel logs for additional "
                     "information.")  # fmt: skip
    (finding,) = findings([node], [files(kernel(XID79))])
    assert "a GPU hardware fault" in finding.summary and "; repair fires" in finding.summary
    assert "pause repair" not in finding.summary
    # Its own kernel log agrees with the condition: nothing to add, the replacement once.
    assert "hardware fault too" not in finding.summary
    assert finding.runbooks == (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)
    assert "Xid 79 on 0000:10:1c" in texts(finding, "journal:kernel")


def test_a_dcgm_error_on_an_auto_mode_node_is_never_told_to_pause_repair() -> None:
    (finding,) = findings([node_json(ahr="DCGMError", message=LIBDCGM, auto=True)])
    assert finding.summary.startswith("NodePool gpu-training (Auto Mode): 1 node")
    assert "; repair fires" in finding.summary and "; pause repair" not in finding.summary
    assert RUNBOOK_PAUSE_REPAIR not in finding.runbooks
    assert (
        f"Node {NODE} is an EKS Auto Mode node: labelled eks.amazonaws.com/compute-type=auto"
        in texts(finding, "label")
    )


def test_a_fabric_manager_down_with_a_gpu_off_the_bus_in_the_kernel_log_offers_a_replacement() -> (
    None
):
    node = node_json(ahr="FabricManagerNotRunning", message="Fabric Manager status: Failure")
    (finding,) = findings([node], [files(kernel(XID79))])
    assert "a service fault on the node, not the GPUs" in finding.summary
    assert (
        "the node's own files show a GPU hardware fault too: Xid 79 (GPU has fallen off the bus)"
        in finding.summary
    )
    assert finding.runbooks[0] == RUNBOOK_REPLACE
    assert finding.runbooks.count(RUNBOOK_REPLACE) == 1


@pytest.mark.parametrize(
    ("age", "severity"),
    [(timedelta(minutes=5), CRITICAL), (timedelta(minutes=4, seconds=30), WARNING)],
    ids=["ten-minutes-left", "ten-and-a-half-minutes-left"],
)
def test_a_node_group_repair_ten_minutes_away_is_critical(age: timedelta, severity: str) -> None:
    # A node group that waits 15 minutes before replacing on Xid 79 (nodeRepairConfigOverrides,
    # EKS API reference API_NodeRepairConfigOverrides): ten minutes left is the last chance to
    # collect evidence; ten and a half is not yet.
    group = NodeGroupRepair.from_describe({"nodegroup": {
        "nodegroupName": "gpu-ng",
        "nodeRepairConfig": {"enabled": True, "nodeRepairConfigOverrides": [{
            "nodeMonitoringCondition": AHR, "nodeUnhealthyReason": "NvidiaXID79Error",
            "minRepairWaitTimeMins": 15, "repairAction": "Replace"}]},
    }})  # fmt: skip
    node = node_json(pool="", nodegroup="gpu-ng", ahr="NvidiaXID79Error", since=age,
                     message="detected XID-79 on the instance, review kernel logs for additional "
                     "information.")  # fmt: skip
    (finding,) = findings([node], nodegroups={"gpu-ng": group})
    assert finding.summary.startswith("Node group gpu-ng: 1 node AcceleratedHardwareReady=False")
    assert finding.deadline == NOW - age + timedelta(minutes=15)
    assert finding.severity == severity


# -- with the condition: how the cause is worded ------------------------------------------------


def test_an_nccl_segfault_as_the_condition_is_the_workloads_fault() -> None:
    # The agent sends NvidiaNCCLError as a Warning, an event (pkg/reasons/reasons.yaml and
    # monitors/nvidia/nccl/nccl.go at v1.7.0); a condition that carries it was set by something
    # else, and a segfault in libnccl is still the workload's, not the GPU's.
    message = "NCCL communication error caused by segfault in libnccl.so"
    node = node_json(ahr="NvidiaNCCLError", message=message)
    (finding,) = findings([node])
    assert (
        "the application's own fault, not the GPU (NvidiaNCCLError: a segfault in NCCL (libnccl): "
        "the workload's communication, not the GPU): check the workload" in finding.summary
    )
    assert RUNBOOK_REPLACE not in finding.runbooks


def test_xid43_as_a_condition_is_not_blamed_on_the_agents_old_releases() -> None:
    # Xid 43 is in no release's list of condition Xids (aws/eks-node-monitoring-agent
    # monitors/nvidia/dcgm/dcgm_policies.go WellKnownXidCodes, v1.6.0 to v1.7.0): the finding
    # must not say that v1.6.0-v1.6.3 raise it, as they do 13 and 31.
    node = node_json(ahr="NvidiaXID43Error", message="detected XID-43 on the instance")
    (finding,) = findings([node])
    assert "node monitoring agent reported Xid 43 as a condition" in finding.summary
    assert "v1.6.0-v1.6.3" not in finding.summary


@pytest.mark.parametrize("count", [3, 4])
def test_the_summary_spells_out_three_reasons_and_counts_the_rest(count: int) -> None:
    reasons = [
        ("NvidiaDoubleBitError", "detected 1 Nvidia Double Bit error(s) on location 0"),
        ("NvidiaNVLinkError", "detected 12 NVLink errors on fieldId 0"),
        ("DCGMDiagnosticFailure", "DCGM active diagnostic failed"),
        ("NvidiaDeviceCountMismatch", "expected 8 GPUs for this instance type but only 7"),
    ][:count]
    nodes = [
        node_json(f"ip-10-0-91-{20 + i}.us-west-2.compute.internal", ahr=r, message=m)
        for i, (r, m) in enumerate(reasons)
    ]
    (finding,) = findings(nodes)
    assert finding.summary.count("NvidiaDoubleBitError: the driver reported") == 1
    if count == 3:
        assert "more)" not in finding.summary
        assert "DCGMDiagnosticFailure: a test of DCGM's active diagnostics" in finding.summary
    else:
        assert "; 1 more): replace the instance" in finding.summary
        assert "NvidiaDeviceCountMismatch: fewer GPUs" not in finding.summary


def test_four_unrecognised_reasons_in_a_pool_name_the_first_three() -> None:
    reasons = ["NvidiaC2CLinkError", "NvidiaGSPFirmwareError", "NvidiaPowerBrakeError",
               "NvidiaRowRemapExhausted"]  # fmt: skip
    nodes = [
        node_json(f"ip-10-0-91-{20 + i}.us-west-2.compute.internal", ahr=r, message="GPU fault")
        for i, r in enumerate(reasons)
    ]
    (finding,) = findings(nodes)
    for said in reasons[:3]:
        assert f"{said} is not in mignurse's table" in finding.summary
    assert "NvidiaRowRemapExhausted is not in mignurse's table" not in finding.summary


def _unknown_reason_nodes(*versions: str) -> tuple[list[dict[str, Any]], list[NodeEvidence]]:
    nodes, evidence = [], []
    for i, version in enumerate(versions):
        name = f"ip-10-0-91-{20 + i}.us-west-2.compute.internal"
        nodes.append(node_json(name, ahr="NvidiaGSPFirmwareError", message="GSP stopped"))
        if version:
            log = agent_log(agent_start(NOW - timedelta(hours=1), version, host=name))
            evidence.append(files(log, node=name))
    return nodes, evidence


def test_nodes_on_two_agent_releases_name_both_and_one_release_is_named_once() -> None:
    (both,) = findings(*_unknown_reason_nodes("v1.6.3", "v1.8.1"))
    assert "(the nodes run agent releases v1.6.3, v1.8.1)" in both.summary
    (one,) = findings(*_unknown_reason_nodes("v1.8.1"))
    assert "the agent here is v1.8.1, newer" in one.summary
    assert "the nodes run agent releases" not in one.summary


def _agent_daemonset(name: str, *images: str) -> DaemonSetInfo:
    containers = tuple(Container(name=f"c{i}", image=image) for i, image in enumerate(images))
    return DaemonSetInfo(namespace="kube-system", name=name, containers=containers)


def test_an_agent_daemonset_pinned_by_digest_alone_names_no_release() -> None:
    # One node's bundle has the agent's log (v1.8.1), the other's none; the DaemonSet's image
    # is pinned by digest, which names no release: nothing may be made up from it.
    digest = "sha256:" + "0a1b2c3d" * 8
    daemonsets = (_agent_daemonset("eks-node-monitoring-agent",
                                   f"{REGISTRY}/eks-node-monitoring-agent@{digest}"),)  # fmt: skip
    (finding,) = findings(*_unknown_reason_nodes("v1.8.1", ""), daemonsets=daemonsets)
    assert "the agent here is v1.8.1, newer" in finding.summary
    assert "agent releases" not in finding.summary.replace("(agent releases up to", "")


def test_a_dcgm_server_named_after_the_agent_is_not_read_as_its_release() -> None:
    # A name prefix (kustomize namePrefix, a Helm fullnameOverride) can put the agent's name on
    # the DaemonSet that runs NVIDIA's DCGM image: only the agent's image names its release.
    daemonsets = (
        _agent_daemonset("eks-node-monitoring-agent",
                         f"{REGISTRY}/eks-node-monitoring-agent:v1.8.0-eksbuild.1"),
        _agent_daemonset("eks-node-monitoring-agent-dcgm",
                         "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"),
    )  # fmt: skip
    (finding,) = findings(*_unknown_reason_nodes(""), daemonsets=daemonsets)
    assert "the agent here is v1.8.0-eksbuild.1, newer" in finding.summary


# -- the kernel log without a condition ---------------------------------------------------------

# Xid 154 names the recovery action the driver now wants, old and new (NVIDIA Xid catalog,
# docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: "GPU recovery action changed").
XID154 = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"


def test_an_xid154_that_asks_for_a_reboot_is_a_reset() -> None:
    line = kernel_line(NOW - timedelta(minutes=3), "0000:10:1c", 154, XID154)
    (finding,) = findings(evidence=[files(kernel(line))])
    assert finding.severity == WARNING and RUNBOOK_REPLACE not in finding.runbooks
    assert "Xid 154 (GPU recovery action now Node Reboot Required)" in finding.summary


@pytest.mark.parametrize(
    "text",
    [
        "GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)",
        "GPU recovery action changed from 0x0 (None) to",  # the line cut short
    ],
    ids=["back-to-none", "cut-short"],
)
def test_an_xid154_that_names_no_action_raises_nothing(text: str) -> None:
    line = kernel_line(NOW - timedelta(minutes=3), "0000:10:1c", 154, text)
    assert findings(evidence=[files(kernel(line))]) == []


def test_an_xid_the_table_does_not_tell_apart_raises_nothing() -> None:
    # Xid 69, a graphics engine class error: not in the table, so no verdict on the GPU.
    text = "pid=4120, name=python3, Class Error: ChId 0010, Class 0000c7c0"
    line = kernel_line(NOW - timedelta(minutes=3), "0000:10:1c", 69, text)
    assert findings(evidence=[files(kernel(line))]) == []


XID13 = kernel_line(NOW - timedelta(minutes=30), "0000:00:1e", 13,
                    "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 3, "
                    "TPC 1, SM 0): Illegal Instruction Parameter")  # fmt: skip
XID94 = "pid=51320, name=python3, Contained: CE User Channel (0x9). RST: No, D-RST: No"


@pytest.mark.parametrize(
    ("journals", "severity", "runbooks", "said"),
    [
        (kernel(XID13, unit="kernel-previous-boot"), INFO, (),
         "usually the application's own fault"),
        (kernel(kernel_line(NOW - timedelta(minutes=9), "0000:ca:00", 94, XID94)), WARNING,
         (RUNBOOK_CORDON_AND_COLLECT,), "a GPU fault a GPU reset clears"),
    ],
    ids=["application-xid-of-the-previous-boot", "contained-memory-error"],
)  # fmt: skip
def test_the_kernels_verdict_sets_severity_and_runbooks(
    journals: dict[str, JournalParse], severity: str, runbooks: tuple[str, ...], said: str
) -> None:
    # A reboot since turns a replacement into a reset, never the application's fault into one.
    (finding,) = findings(evidence=[files(journals)])
    assert (finding.severity, finding.runbooks) == (severity, runbooks)
    assert said in finding.summary


def test_kernel_evidence_counts_repeats_and_says_what_the_agent_makes_of_each_xid() -> None:
    lines = (
        XID79,
        kernel_line(NOW - timedelta(minutes=9), "0000:ca:00", 94, XID94),
        kernel_line(NOW - timedelta(minutes=8), "0000:ca:00", 94, XID94),
    )
    (finding,) = findings(evidence=[files(kernel(*lines))])
    by_xid = {e.text.split(": Xid ")[1].split(" ")[0]: e.text for e in finding.evidence
              if e.source == "journal:kernel"}  # fmt: skip
    assert by_xid["79"].startswith(
        f"{NODE}: Xid 79 on 0000:10:1c: GPU has fallen off the bus (NVIDIA: RESTART_BM: power "
        "cycle; a condition under the node monitoring agent): NVRM"
    )
    assert by_xid["94"].startswith(
        f"{NODE}: Xid 94 on 0000:ca:00 ×2 until {format_time(NOW - timedelta(minutes=8))}: "
        "contained memory error (NVIDIA: restart the app, reset soon; only an event under the "
        "node monitoring agent)"
    )


def test_one_node_and_two_nodes_are_worded_as_such() -> None:
    (one,) = findings(evidence=[files(kernel(XID79))])
    assert f"1 node, {NO_CONDITION}; the node's own files show Xid 79" in one.summary
    assert "the agent also reports" not in one.summary
    other = "ip-10-0-91-24.us-west-2.compute.internal"
    (two,) = findings(
        evidence=[files(kernel(XID79)), files(kernel(XID79.replace(NODE, other)), node=other)]
    )
    assert f"2 nodes, {NO_CONDITION}; the nodes' own files show Xid 79" in two.summary


# -- nvidia-smi ---------------------------------------------------------------------------------


def _smi(failing: int = 1, *, sram_gpu0: bool = False, attached: int | None = None) -> str:
    """x-h100-remap-failure-r570.xml with `failing` GPUs whose row remapping failed."""
    text = (CORPUS / "nvidia-smi" / "x-h100-remap-failure-r570.xml").read_text()
    head, rest = text.split('    <gpu id="00000000:53:00.0">', 1)
    healthy, rest = rest.split('    <gpu id="00000000:64:00.0">', 1)
    failing_gpu, tail = rest.rsplit("</nvidia_smi_log>", 1)
    healthy = '    <gpu id="00000000:53:00.0">' + healthy
    if sram_gpu0:
        healthy = healthy.replace(
            "<sram_threshold_exceeded>No<", "<sram_threshold_exceeded>Yes<", 1
        )
    gpus = [healthy] + [
        f'    <gpu id="00000000:{0x64 + i:02x}:00.0">' + failing_gpu for i in range(failing)
    ]
    total = attached if attached is not None else len(gpus)
    head = head.replace("<attached_gpus>2<", f"<attached_gpus>{total}<")
    return head + "".join(gpus) + "</nvidia_smi_log>" + tail


def test_an_sram_threshold_over_its_limit_is_a_replacement() -> None:
    (finding,) = findings([node_json()], [files(smi=_smi(sram_gpu0=True))])
    assert finding.severity == CRITICAL
    assert "SRAM error threshold exceeded on GPU 0, row remapping failure on GPU 1" in (
        finding.summary
    )
    assert "SRAM Threshold Exceeded: Yes: NVIDIA's RMA flow" in texts(finding, "nvidia-smi")


def test_what_nvidia_smi_could_not_read_is_shown_beside_its_signs() -> None:
    (finding,) = findings([node_json()], [files(smi=_smi(attached=3))])
    assert "attached_gpus is 3 but 2 complete <gpu> read" in texts(finding, "nvidia-smi")


@pytest.mark.parametrize("failing", [3, 4])
def test_the_summary_names_three_signs_and_counts_the_rest(failing: int) -> None:
    (finding,) = findings([node_json()], [files(smi=_smi(failing))])
    named = ", ".join(f"row remapping failure on GPU {i}" for i in (1, 2, 3))
    assert named in finding.summary
    if failing == 3:
        assert "more" not in finding.summary
    else:
        assert f"{named} and 1 more" in finding.summary
        assert "GPU 4" not in finding.summary


# -- the agent's own log without a condition ----------------------------------------------------

T0 = NOW - timedelta(minutes=25)


@pytest.mark.parametrize(
    ("reason", "message", "severity", "said", "runbooks"),
    [
        ("NvidiaXID79Error", "detected XID-79 on the instance, review kernel logs for "
         "additional information.", CRITICAL, "a GPU hardware fault: replace the instance",
         (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)),
        ("NvidiaFabricError", "GPU 3 fabric training failed", CRITICAL,
         "a GPU hardware fault: replace the instance",
         (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)),
        ("NvidiaDoubleBitError", "detected 1 Nvidia Double Bit error(s) on location 0", WARNING,
         "a GPU fault a GPU reset clears", (RUNBOOK_CORDON_AND_COLLECT,)),
        ("FabricManagerNotRunning", "Fabric Manager status: Failure", WARNING,
         "a service the GPUs need is down, not the GPU", (RUNBOOK_CORDON_AND_COLLECT,)),
    ],
    ids=["xid79", "fabric-error", "double-bit-error", "fabric-manager-down"],
)  # fmt: skip
def test_what_the_agent_sent_is_weighed_like_the_nodes_own_files(
    reason: str, message: str, severity: str, said: str, runbooks: tuple[str, ...]
) -> None:
    (finding,) = findings(evidence=[files(agent_log(agent_line(T0, reason, message)))])
    assert finding.severity == severity and finding.runbooks == runbooks
    assert f"AcceleratedHardwareReady=False ({reason}): {said}" in finding.summary


def test_a_lone_dcgm_error_is_said_once_and_counted() -> None:
    once = findings(evidence=[files(agent_log(agent_line(T0, "DCGMError", LIBDCGM)))])
    twice = findings(evidence=[files(agent_log(
        agent_line(T0, "DCGMError", LIBDCGM),
        agent_line(T0 + timedelta(seconds=30), "DCGMError", LIBDCGM),
    ))])  # fmt: skip
    for (finding,) in (once, twice):
        assert finding.summary.startswith(
            "Nodes outside any pool: 1 node whose node monitoring agent log reports "
            "AcceleratedHardwareReady=False (DCGMError): GPU monitoring plumbing (DCGM), not the "
            "GPU: replacing the node will not help; under Karpenter NodeRepair"
        )
        assert "own files show" not in finding.summary and "also reports" not in finding.summary
    assert "×" not in texts(once[0], "journal:nma")
    until = format_time(T0 + timedelta(seconds=30))
    assert f"DCGMError ×2 until {until}: {LIBDCGM}" in texts(twice[0], "journal:nma")


def test_a_dcgm_error_line_cut_before_its_condition_type_still_counts() -> None:
    line = agent_line(T0, "DCGMError", LIBDCGM)
    cut = line[: line.index(',"conditionType"')] + "\n"
    (finding,) = findings(evidence=[files(agent_log(cut))])
    assert "agent log reports AcceleratedHardwareReady=False (DCGMError)" in finding.summary


def test_dcgm_error_beside_a_gpu_off_the_bus_offers_no_replacement_until_dcgm_works() -> None:
    log = agent_log(agent_line(T0, "DCGMError", LIBDCGM))
    (finding,) = findings(evidence=[files({**log, **kernel(XID79)})])
    assert finding.severity == CRITICAL
    assert (
        "(DCGMError); the node's own files show Xid 79 (GPU has fallen off the bus): a GPU "
        "hardware fault: replace the instance" in finding.summary
    )
    assert "the agent also reports DCGMError: its GPU monitoring is broken" in finding.summary
    assert finding.runbooks == (RUNBOOK_CORDON_AND_COLLECT,)


def test_the_repair_time_counts_from_the_earliest_agent_report_of_the_pool() -> None:
    sent = {21: T0 + timedelta(minutes=2), 22: T0, 23: T0 + timedelta(minutes=4)}
    evidence = []
    for i, at in sent.items():
        name = f"ip-10-0-91-{i}.us-west-2.compute.internal"
        evidence.append(files(agent_log(agent_line(at, "DCGMError", LIBDCGM, host=name)),
                              node=name))  # fmt: skip
    (finding,) = findings(evidence=evidence)
    assert "3 nodes whose node monitoring agent log reports" in finding.summary
    assert (
        f"(reported {format_time(T0)}: about {format_time(T0 + timedelta(minutes=10))})"
        in finding.summary
    )


def test_nodes_the_agent_calls_ready_again_are_not_promised_a_repair_from_an_old_log() -> None:
    # The agent restarted after the bundles were read (it sets its conditions True only at
    # start: pkg/manager/node_exporter.go): one node's old log still shows the DCGMError it
    # sent; both kernel logs show Xid 79.
    other = "ip-10-0-91-24.us-west-2.compute.internal"
    old_log = agent_log(agent_line(T0, "DCGMError", LIBDCGM))
    (finding,) = findings(
        [node_json(ahr="True"), node_json(other, ahr="True")],
        [files({**old_log, **kernel(XID79)}),
         files(kernel(XID79.replace(NODE, other)), node=other)],
    )  # fmt: skip
    assert finding.nodes == (NODE, other)
    assert "2 nodes, AcceleratedHardwareReady not False" in finding.summary
    assert "no automatic repair acts without the condition" in finding.summary
    assert "repair replaces the node" not in finding.summary


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        (("FabricManagerNotRunning", "Fabric Manager status: Failure"),
         ("NvidiaDoubleBitError", "detected 1 Nvidia Double Bit error(s) on location 0"),
         "a GPU fault a GPU reset clears"),
        (("NvidiaGSPFirmwareError", "GSP firmware stopped responding"),
         ("FabricManagerNotRunning", "Fabric Manager status: Failure"),
         "a service the GPUs need is down"),
        (("DCGMError", LIBDCGM), ("NvidiaGSPFirmwareError", "GSP firmware stopped responding"),
         "NvidiaGSPFirmwareError is not in mignurse's table"),
    ],
    ids=["gpu-reset-over-service", "service-over-unknown", "unknown-over-monitoring"],
)  # fmt: skip
def test_the_stronger_sign_leads_whichever_the_agent_sent_first(
    first: tuple[str, str], then: tuple[str, str], said: str
) -> None:
    log = agent_log(agent_line(T0, *first), agent_line(T0 + timedelta(minutes=1), *then))
    (finding,) = findings(evidence=[files(log)])
    assert f"AcceleratedHardwareReady=False ({first[0]}, {then[0]})" in finding.summary
    assert f"own files show {then[0]}: {said}" in finding.summary


def test_broken_monitoring_leads_over_the_workloads_own_xid() -> None:
    log = agent_log(agent_line(T0, "DCGMError", LIBDCGM))
    (finding,) = findings(evidence=[files({**kernel(XID13), **log})])
    assert finding.severity == WARNING
    assert "(DCGMError); the node's own files show DCGMError" not in finding.summary
    assert "GPU monitoring plumbing (DCGM), not the GPU" in finding.summary


def test_four_unrecognised_reasons_in_the_agents_log_name_the_first_three() -> None:
    reasons = ["NvidiaC2CLinkError", "NvidiaGSPFirmwareError", "NvidiaPowerBrakeError",
               "NvidiaRowRemapExhausted"]  # fmt: skip
    log = agent_log(*(agent_line(T0 + timedelta(minutes=i), r, "GPU fault")
                      for i, r in enumerate(reasons)))  # fmt: skip
    (finding,) = findings(evidence=[files(log)])
    what = finding.summary.split(" and 1 more: ", 1)[1]  # after the three signs named
    for said in reasons[:3]:
        assert f"{said} is not in mignurse's table" in what
    assert "NvidiaRowRemapExhausted is not in" not in what
