"""The node monitoring agent's reasons as the agent defines them, the advice that follows the
cause, and EKS Auto Mode nodes, on Node and NodeClaim objects in the API's own shape.

Reasons and messages are the agent's own (aws/eks-node-monitoring-agent v1.7.0
pkg/reasons/reasons.yaml; the messages as the monitors build them: monitors/nvidia/dcgm/
dcgm_client.go and dcgm_reconcile.go (DCGMError), dcgm_healthcheck.go (DCGMHealthCode%d),
dcgm_activediagnostic.go (DCGMDiagnosticFailure), dcgm_watchfield.go (DCGMFieldError%d,
FabricManagerNotRunning, NvidiaFabricError), dcgm_devices.go (NvidiaDeviceCountMismatch),
dcgm_policies.go (NvidiaXID%dError, NvidiaNVLinkError, NvidiaDoubleBitError),
monitors/kernel/monitor.go (ClockUnsynchronized), monitors/storage/monitor.go
(BlockDeviceIOError), monitors/networking/npa/npa.go (NPANotRunning)). Auto Mode's labels and
NodeClass reference: EKS user guide create-node-pool.html and associate-workload.html.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.agent_reasons import (
    FATAL,
    GPU,
    NODE,
    PLUMBING,
    REASONS,
    SERVICE,
    WARNING,
    agent_reason,
    agent_release,
    unknown_reason_text,
)
from mignurse.diagnose.automode import AUTO_MODE_INSTEAD, auto_mode_nodes, auto_mode_pool
from mignurse.diagnose.daemonsets import Container, DaemonSetInfo
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.facts import classify_ahr_reason, xid_of
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    NODE_REPAIR_LOOP,
    REPAIR_BLOCKED,
    REPAIR_RISK,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    RUNBOOK_REPLACE,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings, NodeEvidence
from mignurse.diagnose.outlook import repair_outlook
from mignurse.evidence import parse_journal
from mignurse.model import Node, NodeClaim, NodePool, format_time
from mignurse.sim import SimCluster, load_scenario

SCENARIOS = Path(__file__).parents[2] / "mignurse" / "sim" / "scenarios"

NOW = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
AHR = "AcceleratedHardwareReady"
LIBDCGM = "failed to initialize DCGM: libdcgm.so not Found"


def node_json(
    name: str,
    pool: str,
    *,
    reason: str = "",
    message: str = "",
    since: timedelta = timedelta(minutes=4),
    auto_label: bool = False,
    nodegroup: str = "",
) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.present": "true",
    }
    if pool:
        labels["karpenter.sh/nodepool"] = pool
    if nodegroup:
        labels["eks.amazonaws.com/nodegroup"] = nodegroup
    if auto_label:
        labels["eks.amazonaws.com/compute-type"] = "auto"
    conditions = [
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "message": "kubelet is posting ready status",
         "lastTransitionTime": format_time(NOW - timedelta(hours=2))},
        {"type": AHR, "status": "False" if reason else "True",
         "reason": reason or "NvidiaGPUIsReady",
         "message": message or "Monitoring for the Nvidia system is active",
         "lastTransitionTime": format_time(NOW - since if reason else NOW - timedelta(hours=2))},
    ]  # fmt: skip
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


def claim_json(name: str, node: dict[str, Any], pool: str, group: str) -> dict[str, Any]:
    kind = "NodeClass" if group == "eks.amazonaws.com" else "EC2NodeClass"
    return {
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": pool},
            "creationTimestamp": format_time(NOW - timedelta(hours=2)),
        },
        "spec": {"nodeClassRef": {"group": group, "kind": kind, "name": "default"}},
        "status": {"nodeName": node["metadata"]["name"], "providerID": node["spec"]["providerID"]},
    }


def inp_of(
    nodes: list[dict[str, Any]],
    claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
    pools: list[dict[str, Any]] = (),  # type: ignore[assignment]
    evidence: dict[str, NodeEvidence] | None = None,
    repair: bool = True,
) -> DiagnosisInput:
    parsed = [Node.from_api(n) for n in nodes]
    parsed_claims = [NodeClaim.from_api(c) for c in claims]
    parsed_pools = [NodePool.from_api(p) for p in pools]
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in parsed},
            nodeclaims={c.name: c for c in parsed_claims},
            nodepools={p.name: p for p in parsed_pools},
            karpenter=True,
        ),
        now=NOW,
        node_evidence=evidence or {},
        karpenter=KarpenterSettings(node_repair=repair, feature_gates=f"NodeRepair={repair}"),
    )


def findings_of(inp: DiagnosisInput) -> list[Finding]:
    diagnosis = diagnose(inp)
    assert diagnosis.rule_errors == []  # no rule broke on the input
    return diagnosis.findings


def one(findings: list[Finding], finding_id: str) -> Finding:
    (found,) = [f for f in findings if f.id == finding_id]
    return found


def ahr_finding(reason: str, message: str, **node_args: Any) -> Finding:
    node = node_json("ip-10-0-12-7.us-west-2.compute.internal", "gpu", reason=reason,
                     message=message, **node_args)  # fmt: skip
    return one(findings_of(inp_of([node])), ACCELERATED_HARDWARE_NOT_READY)


# -- the table -----------------------------------------------------------------------------------


def test_only_dcgm_error_is_monitoring_plumbing() -> None:
    plumbing = sorted(r.template for r in REASONS if r.kind == PLUMBING)
    assert plumbing == ["DCGMError"]
    for gpu_failure in ("DCGMHealthCode95", "DCGMDiagnosticFailure", "DCGMFieldError112"):
        assert classify_ahr_reason(gpu_failure) == "hardware", gpu_failure
    assert classify_ahr_reason("DCGMError") == "monitoring"


def test_the_table_says_what_each_reason_class_is_and_when_the_agent_first_defined_it() -> None:
    fabric = agent_reason("NvidiaFabricError")
    assert fabric is not None and fabric.kind == GPU and fabric.severity == FATAL
    assert "requires instance replacement" in fabric.meaning and fabric.since == "v1.6.5"
    manager = agent_reason("FabricManagerNotRunning")
    assert manager is not None and manager.kind == SERVICE and manager.since == "v1.6.5"
    count = agent_reason("NvidiaDeviceCountMismatch")
    assert count is not None and "v1.6.2" in count.history and count.severity == FATAL
    assert count.first_defined == "v1.6.0 or earlier"
    clock = agent_reason("ClockUnsynchronized")
    assert clock is not None and (clock.condition, clock.severity, clock.kind) == (
        "KernelReady", WARNING, NODE,
    )  # fmt: skip
    assert clock.since == "v1.6.6"
    block = agent_reason("BlockDeviceIOError")
    assert block is not None and (block.condition, block.since) == ("StorageReady", "v1.7.0")
    npa = agent_reason("NPANotRunning")
    assert npa is not None and (npa.condition, npa.severity, npa.since) == (
        "NetworkingReady", FATAL, "v1.6.7",
    )  # fmt: skip
    health = agent_reason("DCGMHealthCode95")
    assert health is not None and health.name == "DCGMHealthCode"


@pytest.mark.parametrize(
    "reason",
    [
        "DCGMErrorX",  # not a template: exact names only
        "dcgmerror",
        " DCGMError",
        "DCGMHealthCode",  # a family without its number
        "DCGMHealthCode-1",
        "NvidiaXID²Error",  # a digit Python would read, Go never writes
        "NvidiaXID٧٩Error",
        "NvidiaXID" + "9" * 5000 + "Error",
        "NvidiaXID79ErrorX",
        "RepeatedRestart",
        "",
    ],
)
def test_a_reason_the_agent_does_not_write_is_unknown_and_never_crashes(reason: str) -> None:
    assert agent_reason(reason) is None
    assert classify_ahr_reason(reason) == "unknown"
    assert xid_of(reason) is None
    finding = ahr_finding(reason or "x", "what a hand-patched condition says")
    assert "an unrecognised reason" in finding.summary


def test_another_conditions_reason_under_accelerated_hardware_is_not_the_agents() -> None:
    finding = ahr_finding("IPAMDNotRunning", "The Amazon VPC CNI process was not found")
    assert ("IPAMDNotRunning is the node monitoring agent's NetworkingReady reason, never an "
            "AcceleratedHardwareReady one") in finding.summary  # fmt: skip


def test_templated_families_match_as_the_agent_builds_them() -> None:
    assert xid_of("NvidiaXID79Error") == 79 and xid_of("NvidiaXID154Warning") == 154
    restart = agent_reason("containerdRepeatedRestart")  # monitors/runtime: unitName + template
    assert restart is not None and restart.condition == "ContainerRuntimeReady"
    assert agent_release("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/"
                         "eks-node-monitoring-agent:v1.4.0-eksbuild.1") == (1, 4, 0)  # fmt: skip
    assert agent_release("registry.local:5000/eks-node-monitoring-agent") is None


def test_a_release_without_a_patch_number_is_its_dot_zero() -> None:
    assert agent_release("v1.7") == (1, 7, 0)
    assert agent_release("1.6.7-eksbuild.2") == (1, 6, 7)


def test_an_agent_version_is_shown_whole_up_to_120_characters_and_clipped_past_them() -> None:
    whole = "v1.8.0-" + "x" * 113
    assert len(whole) == 120
    assert f"the agent here is {whole}, newer" in unknown_reason_text("NvidiaNewThing", whole)
    longer = whole + "y"
    said = unknown_reason_text("NvidiaNewThing", longer)
    assert f"the agent here is {whole[:119]}…, newer" in said and longer not in said


# -- the accelerated hardware finding, per class -------------------------------------------------


def test_dcgm_error_is_plumbing_and_offers_a_pause_never_a_replacement() -> None:
    finding = ahr_finding("DCGMError", LIBDCGM)
    assert "GPU monitoring plumbing (DCGM), not the GPU" in finding.summary
    assert "replacing the node will not help" in finding.summary
    (agent,) = [e.text for e in finding.evidence if e.source == "agent"]
    assert "the agent cannot reach the DCGM host engine" in agent
    assert "a new node fails the same way" in agent
    assert finding.runbooks == (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)


@pytest.mark.parametrize(
    ("reason", "message", "said"),
    [
        ("DCGMHealthCode95", "DCGM detected issues in health check system with error code 95",
         "a DCGM health check failed on a GPU"),
        ("DCGMDiagnosticFailure",
         "DCGM Diagnostic failed for test memory with error: Memory test failed on GPU 3",
         "active diagnostics failed"),
        ("NvidiaFabricError", "GPU fabric health mask 0x1: degraded_bw=1",
         "requires instance replacement"),
        ("NvidiaDeviceCountMismatch",
         "expected 8 GPUs for this instance type but only 7 were detected — possible hardware "
         "failure", "fewer GPUs than the instance type has"),
        ("NvidiaNVLinkError", "detected 3 NVLink errors on fieldId 142", "NVLink errors"),
        ("NvidiaDoubleBitError", "detected 1 Nvidia Double Bit error(s) on location 0",
         "double-bit"),
    ],
)  # fmt: skip
def test_a_real_gpu_failure_is_hardware_to_replace(reason: str, message: str, said: str) -> None:
    finding = ahr_finding(reason, message)
    assert "a GPU hardware fault" in finding.summary and said in finding.summary
    assert "monitoring plumbing" not in finding.summary
    assert finding.runbooks[0] == RUNBOOK_REPLACE


def test_the_finding_says_since_which_agent_release_a_reason_exists() -> None:
    finding = ahr_finding("NvidiaDeviceCountMismatch", "DCGM detected 7 GPUs but 8 nvidia "
                          "device files were detected")  # fmt: skip
    (line,) = [e.text for e in finding.evidence if e.source == "agent"]
    assert line.startswith("NvidiaDeviceCountMismatch: the node monitoring agent's Fatal reason")
    assert "defined since v1.6.0 or earlier (a Warning (an event only) before v1.6.2)" in line
    fabric = ahr_finding("FabricManagerNotRunning", "Fabric Manager status: Failure")
    assert "defined since v1.6.5" in "\n".join(e.text for e in fabric.evidence)


def test_fabric_manager_not_running_is_a_service_fault_not_a_replacement() -> None:
    finding = ahr_finding("FabricManagerNotRunning", "Fabric Manager status: Failure")
    assert "a service fault on the node, not the GPUs" in finding.summary
    assert "Fabric Manager service is not running" in finding.summary
    assert RUNBOOK_REPLACE not in finding.runbooks and RUNBOOK_PAUSE_REPAIR not in finding.runbooks


def _nma_log(version: str) -> NodeEvidence:
    line = (
        '2026-12-05T21:30:02.004417289Z stderr F {"level":"info","ts":"2026-12-05T21:30:02Z",'
        '"msg":"starting eks-node-monitoring-agent","hostname":"ip-10-0-12-7.us-west-2.compute.'
        f'internal","version":"{version}"}}\n'
    )
    journal = parse_journal(line, "journal:nma")
    return NodeEvidence(node="ip-10-0-12-7.us-west-2.compute.internal", journals={"nma": journal})


def test_an_unknown_reason_names_the_agent_release_running_on_the_node() -> None:
    node = node_json(
        "ip-10-0-12-7.us-west-2.compute.internal",
        "gpu",
        reason="NvidiaGSPFirmwareError",
        message="GSP firmware stopped responding",
    )
    newer = {node["metadata"]["name"]: _nma_log("v1.8.1")}
    finding = one(findings_of(inp_of([node], evidence=newer)), ACCELERATED_HARDWARE_NOT_READY)
    assert ("NvidiaGSPFirmwareError is not in mignurse's table of the node monitoring agent's "
            "reasons (agent releases up to v1.7.0)") in finding.summary  # fmt: skip
    assert "the agent here is v1.8.1, newer: its pkg/reasons/reasons.yaml defines it" in (
        finding.summary
    )
    older = {node["metadata"]["name"]: _nma_log("v1.6.3")}
    finding = one(findings_of(inp_of([node], evidence=older)), ACCELERATED_HARDWARE_NOT_READY)
    assert "the agent here is v1.6.3, which does not define it either" in finding.summary
    unread = one(findings_of(inp_of([node])), ACCELERATED_HARDWARE_NOT_READY)
    assert "the agent's version could not be read here" in unread.summary
    assert finding.runbooks == (RUNBOOK_CORDON_AND_COLLECT,)


def _container(name: str, image: str) -> Container:
    return Container(name=name, image=image)


def _daemonset(namespace: str, name: str, containers: tuple[Container, ...]) -> DaemonSetInfo:
    """The input's DaemonSets are mignurse.diagnose.daemonsets.DaemonSetInfo, as read live."""
    return DaemonSetInfo(namespace=namespace, name=name, containers=containers)


def test_an_unknown_reason_names_the_release_of_the_agent_daemonset() -> None:
    # The chart's two DaemonSets at v1.7.0 (charts/eks-node-monitoring-agent/templates/
    # daemonset.yaml, dcgm-daemonset.yaml; values.yaml nodeAgent.image.tag), as the EKS add-on
    # names them; the DCGM server runs the agent's image too and must not be mistaken for it.
    registry = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks"
    daemonsets = (
        _daemonset("kube-system", "eks-node-monitoring-agent", (
            _container("eks-node-monitoring-agent",
                       f"{registry}/eks-node-monitoring-agent:v1.8.0-eksbuild.1"),)),
        _daemonset("kube-system", "dcgm-server", (
            _container("eks-node-monitoring-agent-dcgm",
                       f"{registry}/eks-node-monitoring-agent:v1.7.0-eksbuild.1"),)),
    )  # fmt: skip
    node = node_json(
        "ip-10-0-12-7.us-west-2.compute.internal",
        "gpu",
        reason="NvidiaGSPFirmwareError",
        message="GSP firmware stopped responding",
    )
    inp = inp_of([node])
    object.__setattr__(inp, "daemonsets", daemonsets)  # the input's DaemonSets, read live
    finding = one(findings_of(inp), ACCELERATED_HARDWARE_NOT_READY)
    assert "the agent here is v1.8.0-eksbuild.1, newer" in finding.summary


# -- advice follows the cause: DCGMError ---------------------------------------------------------


def test_repair_blocked_by_dcgm_error_offers_no_replacement() -> None:
    nodes = [
        node_json(f"ip-10-0-12-{i}.us-west-2.compute.internal", "gpu", reason="DCGMError",
                  message=LIBDCGM, since=timedelta(minutes=25))
        for i in (1, 2)
    ] + [node_json("ip-10-0-12-3.us-west-2.compute.internal", "gpu")]  # fmt: skip
    blocked = one(findings_of(inp_of(nodes)), REPAIR_BLOCKED)
    assert RUNBOOK_REPLACE not in blocked.runbooks
    assert "DCGMError, the agent's GPU monitoring, not the GPU: replacing will not help" in (
        blocked.summary
    )
    hardware = one(findings_of(inp_of(nodes)), ACCELERATED_HARDWARE_NOT_READY)
    assert RUNBOOK_REPLACE not in hardware.runbooks


def test_repair_blocked_by_a_gpu_failure_still_offers_a_replacement() -> None:
    nodes = [
        node_json(f"ip-10-0-12-{i}.us-west-2.compute.internal", "gpu", reason="NvidiaXID79Error",
                  message="detected XID-79 on the instance, review kernel logs for additional "
                  "information.", since=timedelta(minutes=25))
        for i in (1, 2)
    ] + [node_json("ip-10-0-12-3.us-west-2.compute.internal", "gpu")]  # fmt: skip
    blocked = one(findings_of(inp_of(nodes)), REPAIR_BLOCKED)
    assert RUNBOOK_REPLACE in blocked.runbooks


def test_a_dcgm_health_code_is_not_read_as_an_image_without_dcgm() -> None:
    failing = node_json(
        "ip-10-0-12-1.us-west-2.compute.internal",
        "gpu",
        reason="DCGMHealthCode95",
        message="DCGM detected issues in health check system with error code 95",
    )
    healthy = node_json("ip-10-0-12-2.us-west-2.compute.internal", "gpu")
    claims = [
        {**claim_json(f"gpu-{i}", n, "gpu", "karpenter.k8s.aws")}
        for i, n in enumerate((failing, healthy))
    ]
    for claim in claims:
        claim["status"]["imageID"] = "ami-0f1e2d3c4b5a69788"
    risks = [f for f in findings_of(inp_of([failing, healthy], claims)) if f.id == REPAIR_RISK]
    assert not any("DCGMError" in f.summary for f in risks)


# -- EKS Auto Mode -------------------------------------------------------------------------------


def _auto_nodes(*, label: bool, claim_group: str) -> DiagnosisInput:
    node = node_json("i-0a1b2c3d4e5f60718", "gpu-auto", reason="DCGMError", message=LIBDCGM,
                     auto_label=label)  # fmt: skip
    claims = [claim_json("gpu-auto-x7k2p", node, "gpu-auto", claim_group)] if claim_group else []
    return inp_of([node], claims)


@pytest.mark.parametrize(
    ("label", "claim_group"),
    [(True, "eks.amazonaws.com"), (True, ""), (False, "eks.amazonaws.com")],
    ids=["label-and-nodeclass", "label-only", "nodeclass-only"],
)
def test_an_auto_mode_node_is_never_offered_a_pause(label: bool, claim_group: str) -> None:
    inp = _auto_nodes(label=label, claim_group=claim_group)
    assert list(auto_mode_nodes(inp)) == ["i-0a1b2c3d4e5f60718"]
    findings = findings_of(inp)
    assert findings and not any(RUNBOOK_PAUSE_REPAIR in f.runbooks for f in findings)
    hardware = one(findings, ACCELERATED_HARDWARE_NOT_READY)
    assert "NodePool gpu-auto (Auto Mode)" in hardware.summary
    assert AUTO_MODE_INSTEAD in hardware.summary
    assert "NodeDiagnostic" in hardware.summary
    node = inp.snapshot.nodes["i-0a1b2c3d4e5f60718"]
    assert repair_outlook(inp, node, AHR).who == "EKS Auto Mode repair (always on)"


def test_a_self_managed_karpenter_node_is_not_auto_mode() -> None:
    inp = _auto_nodes(label=False, claim_group="karpenter.k8s.aws")
    assert not auto_mode_nodes(inp)
    hardware = one(findings_of(inp), ACCELERATED_HARDWARE_NOT_READY)
    assert RUNBOOK_PAUSE_REPAIR in hardware.runbooks


def test_an_auto_mode_nodepool_is_known_by_its_nodeclass_when_its_nodes_lack_the_label() -> None:
    node = node_json("i-0a1b2c3d4e5f60719", "gpu-auto", reason="DCGMError", message=LIBDCGM)
    pool = {
        "metadata": {"name": "gpu-auto"},
        "spec": {"template": {"spec": {"nodeClassRef": {
            "group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}}}},
    }  # fmt: skip
    findings = findings_of(inp_of([node], pools=[pool]))
    assert not any(RUNBOOK_PAUSE_REPAIR in f.runbooks for f in findings)


def test_an_auto_mode_pool_is_known_from_a_nodeclaim_whose_node_is_gone() -> None:
    gone = claim_json("gpu-auto-x1", node_json("i-0dead9", "gpu-auto"), "gpu-auto",
                      "eks.amazonaws.com")  # fmt: skip
    inp = inp_of([], [gone])
    assert auto_mode_pool(inp, "gpu-auto")
    assert not auto_mode_pool(inp, "gpu-other") and not auto_mode_pool(inp, "")


def test_a_node_labelled_for_auto_mode_is_said_to_be_so_by_its_own_label() -> None:
    node = node_json("i-0a1b2c3d4e5f60721", "gpu-auto", auto_label=True)
    sibling = claim_json("gpu-auto-x2", node_json("i-0dead8", "gpu-auto"), "gpu-auto",
                         "eks.amazonaws.com")  # fmt: skip
    why = auto_mode_nodes(inp_of([node], [sibling]))["i-0a1b2c3d4e5f60721"]
    assert "eks.amazonaws.com/compute-type=auto" in why and "NodeClaim" not in why


def test_an_auto_mode_repair_loop_says_what_to_do_instead_of_a_pause() -> None:
    # Two Auto Mode nodes repaired for DCGMError, seen only through their events and NodeClaims.
    node = node_json("i-0a1b2c3d4e5f60720", "gpu-auto", reason="DCGMError", message=LIBDCGM)
    claims = []
    for i in range(2):
        gone = claim_json(f"gpu-auto-r{i}", node_json(f"i-0dead{i}", "gpu-auto"), "gpu-auto",
                          "eks.amazonaws.com")  # fmt: skip
        deleted = format_time(NOW - timedelta(minutes=30 - 12 * i))
        gone["metadata"]["deletionTimestamp"] = deleted
        gone["metadata"]["annotations"] = {"karpenter.sh/nodeclaim-termination-timestamp": deleted}
        gone["metadata"]["creationTimestamp"] = format_time(NOW - timedelta(minutes=45 - 12 * i))
        gone["status"]["conditions"] = [
            {"type": "Registered", "status": "True", "reason": "Registered",
             "lastTransitionTime": format_time(NOW - timedelta(minutes=44 - 12 * i))},
        ]  # fmt: skip
        claims.append(gone)
    findings = findings_of(inp_of([node], claims))
    assert not any(RUNBOOK_PAUSE_REPAIR in f.runbooks for f in findings)
    loop = one(findings, NODE_REPAIR_LOOP)
    assert "2 nodes replaced by EKS Auto Mode repair" in loop.summary
    assert AUTO_MODE_INSTEAD in loop.summary
    assert loop.runbooks == (RUNBOOK_CORDON_AND_COLLECT,)
    lines = [e.text for e in loop.evidence if "→" in e.text]
    assert lines and all(
        "→ EKS Auto Mode repair" in t and "Karpenter repair" not in t for t in lines
    )
    # The node still there carries neither the label nor a NodeClaim of its own: its pool's
    # NodeClaims say it is Auto Mode's.
    hardware = one(findings, ACCELERATED_HARDWARE_NOT_READY)
    assert "NodePool gpu-auto (Auto Mode)" in hardware.summary


# -- as an on-call engineer runs it -----------------------------------------------------------


def test_mignurse_diagnose_on_a_simulated_auto_mode_pool_offers_no_pause_and_no_replacement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped DCGM loop with its GPU NodePool made Auto Mode's (the nodes' label), read
    live through the real client by `mignurse diagnose -o json`."""
    shipped = (SCENARIOS / "dcgm-repair-loop.yaml").read_text()
    pool = "  - name: gpu-inference\n"
    assert shipped.count(pool) == 1
    scenario = tmp_path / "automode-dcgm-repair-loop.yaml"
    scenario.write_text(
        shipped.replace(pool, pool + "    labels: {eks.amazonaws.com/compute-type: auto}\n")
    )
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        code = main(["diagnose", "--kubeconfig", str(kubeconfig),
                     "--state-dir", str(tmp_path / "state"), "-o", "json"])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert code == 2
    auto = [f for f in document["findings"] if f["nodepool"] == "gpu-inference"]
    assert {f["id"] for f in auto} >= {"node-repair-loop", "accelerated-hardware-not-ready"}
    for finding in auto:
        assert "pause-node-repair" not in finding["runbooks"], finding
        assert "replace-instance" not in finding["runbooks"], finding
    loop = next(f for f in auto if f["id"] == "node-repair-loop")
    assert "by EKS Auto Mode repair" in loop["summary"]
    assert AUTO_MODE_INSTEAD in loop["summary"]
    assert not [e for e in loop["evidence"] if "→ Karpenter repair" in e["text"]]
    hardware = next(f for f in auto if f["id"] == "accelerated-hardware-not-ready")
    assert "NodePool gpu-inference (Auto Mode)" in hardware["summary"]


def test_mignurse_diagnose_on_a_simulated_loop_of_a_dcgm_health_failure_calls_it_the_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped loop with the agent's DCGMHealthCode95 (monitors/nvidia/dcgm/
    dcgm_healthcheck.go message) in place of DCGMError: a GPU failure, not plumbing."""
    shipped = (SCENARIOS / "dcgm-repair-loop.yaml").read_text()
    scenario = tmp_path / "health-code-loop.yaml"
    scenario.write_text(
        shipped.replace("reason: DCGMError", "reason: DCGMHealthCode95").replace(
            'message: "failed to initialize DCGM: libdcgm.so not Found"',
            'message: "DCGM detected issues in health check system with error code 95"',
        )
    )
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        main(["diagnose", "--kubeconfig", str(kubeconfig),
              "--state-dir", str(tmp_path / "state"), "-o", "json"])  # fmt: skip
    findings = json.loads(capsys.readouterr().out)["findings"]
    loop = next(f for f in findings if f["id"] == "node-repair-loop")
    assert "(DCGMHealthCode95)" in loop["summary"]
    assert "DCGMHealthCode95: a DCGM health check failed on a GPU" in loop["summary"]
    assert "monitoring plumbing" not in loop["summary"]
    assert "points at the image or the driver rather than one GPU" in loop["summary"]
    hardware = next(f for f in findings if f["id"] == "accelerated-hardware-not-ready")
    assert "a GPU hardware fault" in hardware["summary"]
    assert hardware["runbooks"][0] == "replace-instance"


def test_a_node_labelled_for_auto_mode_and_a_node_group_is_offered_no_pause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hostile labels: the node group's DCGM loop with `eks.amazonaws.com/compute-type=auto`
    on its nodes too. Auto Mode's label wins, as the pause runbook's own check reads it."""
    shipped = (SCENARIOS / "mng-dcgm-repair-loop.yaml").read_text()
    group = "  - name: ng-gpu-inference\n"
    assert shipped.count(group) == 1
    scenario = tmp_path / "mng-and-auto.yaml"
    scenario.write_text(
        shipped.replace(group, group + "    labels: {eks.amazonaws.com/compute-type: auto}\n")
    )
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        main(["diagnose", "--kubeconfig", str(kubeconfig),
              "--state-dir", str(tmp_path / "state"), "-o", "json"])  # fmt: skip
    findings = json.loads(capsys.readouterr().out)["findings"]
    loop = next(f for f in findings if f["id"] == "node-repair-loop")
    assert AUTO_MODE_INSTEAD in loop["summary"]
    assert not any("pause-node-repair" in f["runbooks"] for f in findings)


def test_a_network_policy_agent_down_on_auto_mode_gpu_nodes_is_worded_as_the_agent_means() -> None:
    """NetworkingReady=False NPANotRunning (monitors/networking/npa/npa.go message) on two of
    three Auto Mode GPU nodes: the guard holds their repair, and the held conditions say what
    the agent means, under Auto Mode's advice."""
    message = 'NPA is not running on this Auto Mode node (SubState="dead", Result="exit-code")'
    nodes = []
    for i in (1, 2, 3):
        node = node_json(f"i-0c{i}", "gpu-auto", auto_label=True)
        if i < 3:
            node["status"]["conditions"].append(
                {"type": "NetworkingReady", "status": "False", "reason": "NPANotRunning",
                 "message": message,
                 "lastTransitionTime": format_time(NOW - timedelta(minutes=40))}
            )  # fmt: skip
        nodes.append(node)
    findings = findings_of(inp_of(nodes))
    blocked = one(findings, REPAIR_BLOCKED)
    held = "\n".join(e.text for e in blocked.evidence if e.source == "condition")
    assert "NetworkingReady=False NPANotRunning" in held
    assert "(the node monitoring agent: Auto Mode's Network Policy Agent has not run" in held
    assert AUTO_MODE_INSTEAD in blocked.summary
    assert not any(RUNBOOK_PAUSE_REPAIR in f.runbooks for f in findings)


# -- boundaries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("running", "said"),
    [
        ("v1.7.0", "the agent here is v1.7.0, which does not define it either"),
        ("v1.7.0-eksbuild.1", "the agent here is v1.7.0-eksbuild.1, which does not define it"),
        ("v1.7.1", "the agent here is v1.7.1, newer"),
        ("v1.10.0", "the agent here is v1.10.0, newer"),
        ("latest", "the agent's version could not be read here"),
    ],
)
def test_the_unknown_reason_compares_the_running_release_with_the_table(
    running: str, said: str
) -> None:
    assert said in unknown_reason_text("NvidiaGSPFirmwareError", running)


def test_a_reason_a_page_long_is_shown_clipped() -> None:
    shown = unknown_reason_text("X" * 120, "")
    assert shown.startswith("X" * 120 + " is not")
    clipped = unknown_reason_text("Y" * 121, "")
    assert clipped.startswith("Y" * 119 + "… is not")


def test_agent_daemonsets_that_disagree_name_no_release() -> None:
    registry = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/eks-node-monitoring-agent"
    daemonsets = tuple(
        _daemonset("kube-system", f"eks-node-monitoring-agent{suffix}",
                   (_container("eks-node-monitoring-agent", f"{registry}:{tag}"),))
        for suffix, tag in (("", "v1.8.0-eksbuild.1"), ("-arm", "v1.6.2-eksbuild.1"))
    )  # fmt: skip
    node = node_json(
        "ip-10-0-12-7.us-west-2.compute.internal",
        "gpu",
        reason="NvidiaGSPFirmwareError",
        message="GSP firmware stopped responding",
    )
    inp = inp_of([node])
    object.__setattr__(inp, "daemonsets", daemonsets)
    finding = one(findings_of(inp), ACCELERATED_HARDWARE_NOT_READY)
    assert "the agent's version could not be read here" in finding.summary


def test_a_nodeclaim_found_by_provider_id_makes_its_node_auto_mode() -> None:
    node = node_json("i-0a1b2c3d4e5f60721", "gpu-auto", reason="DCGMError", message=LIBDCGM)
    claim = claim_json("gpu-auto-p9q8r", node, "gpu-auto", "eks.amazonaws.com")
    del claim["status"]["nodeName"]
    claim["metadata"]["labels"] = {}  # a NodeClaim whose pool label is gone too
    inp = inp_of([node], [claim])
    assert auto_mode_nodes(inp) == {
        "i-0a1b2c3d4e5f60721": "NodeClaim gpu-auto-p9q8r refers to an eks.amazonaws.com NodeClass"
    }


def test_auto_mode_repair_is_held_by_the_guard_and_ignores_the_self_managed_release() -> None:
    # Karpenter v1.1 beside Auto Mode repairs only Ready=False; Auto Mode repairs AHR at 10 min.
    nodes = [node_json(f"i-0d{i}", "gpu-auto", reason="DCGMError", message=LIBDCGM,
                       auto_label=True) for i in (1, 2)]  # fmt: skip
    nodes.append(node_json("i-0d3", "gpu-auto", auto_label=True))
    inp = inp_of(nodes)
    old = DiagnosisInput(
        snapshot=inp.snapshot,
        now=NOW,
        karpenter=KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true",
                                    version="1.1.0"),
    )  # fmt: skip
    held = repair_outlook(old, old.snapshot.nodes["i-0d1"], AHR)
    assert held.deadline is None
    assert held.who.startswith("EKS Auto Mode repair held by the 20% guard (2 of 3 nodes")
    alone = inp_of(nodes[1:])
    fate = repair_outlook(alone, alone.snapshot.nodes["i-0d2"], AHR)
    assert fate.deadline == NOW + timedelta(minutes=6)  # 4 min ago + 10 min


def test_an_agent_log_with_an_unknown_reason_names_the_release_that_logged_it() -> None:
    """A node bundle read without the cluster: the agent's own log (pkg/manager/manager.go
    "sending condition to exporter", cmd/eks-node-monitoring-agent/main.go start line)."""
    host = "ip-10-0-12-7.us-west-2.compute.internal"
    log = (
        '2026-12-05T21:30:02.004417289Z stderr F {"level":"info","ts":"2026-12-05T21:30:02Z",'
        f'"msg":"starting eks-node-monitoring-agent","hostname":"{host}","version":"v1.8.2"}}\n'
        '2026-12-05T21:40:10.402183611Z stderr F {"level":"info","ts":"2026-12-05T21:40:10Z",'
        f'"msg":"sending condition to exporter","hostname":"{host}","condition":{{"Reason":'
        '"NvidiaGSPFirmwareError","Message":"GSP firmware stopped responding","Severity":'
        '"Fatal","MinOccurrences":0},"conditionType":"AcceleratedHardwareReady"}\n'
    )
    evidence = NodeEvidence(node=host, journals={"nma": parse_journal(log, "journal:nma")})
    finding = one(
        findings_of(inp_of([], evidence={host: evidence})), ACCELERATED_HARDWARE_NOT_READY
    )
    assert "whose node monitoring agent log reports" in finding.summary
    assert "NvidiaGSPFirmwareError is not in mignurse's table" in finding.summary
    assert "the agent here is v1.8.2, newer" in finding.summary


def test_a_code_as_long_as_a_go_uint_prints_is_the_agents_and_one_digit_more_is_not() -> None:
    assert agent_reason("DCGMHealthCode" + "1" * 20) is not None  # %d of a 64-bit uint
    assert agent_reason("DCGMHealthCode" + "1" * 21) is None
    assert xid_of("NvidiaXID" + "1" * 20 + "Error") == int("1" * 20)
    assert xid_of("NvidiaXID" + "1" * 21 + "Error") is None
