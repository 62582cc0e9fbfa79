"""The Karpenter rules against the incidents they were written for, and their false alarms."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    NODE_REPAIR_LOOP,
    REPAIR_BLOCKED,
    REPAIR_RISK,
    REPLACEMENT_CHURN,
    WARNING,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings, NodeEvidence
from mignurse.diagnose.rules import (
    churn,
    hardware,
    repair_blocked,
    repair_loop,
    repair_risk,
)
from mignurse.evidence.system import CgroupInfo
from mignurse.model import Condition, Event, Node, NodeClaim, NodePool
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario import scenario_path

from .simdiag import input_of

OURS = [
    ("repair_loop", repair_loop.rule),
    ("churn", churn.rule),
    ("repair_blocked", repair_blocked.rule),
    ("hardware", hardware.rule),
    ("repair_risk", repair_risk.rule),
]
AHR = "AcceleratedHardwareReady"
DCGM = {
    "type": AHR,
    "status": "False",
    "reason": "DCGMError",
    "message": "failed to initialize DCGM: libdcgm.so not Found",
}
XID79 = {"type": AHR, "status": "False", "reason": "NvidiaXID79Error", "message": "GPU off bus"}


def findings_of(inp: DiagnosisInput) -> list[Finding]:
    result = diagnose(inp, rules=OURS)
    assert result.rule_errors == []
    return result.findings


def only(findings: list[Finding], finding_id: str, pool: str | None = None) -> list[Finding]:
    return [f for f in findings if f.id == finding_id and (pool is None or f.nodepool == pool)]


def evidence_text(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


def variant(tmp_path: Path, base: str, name: str, edit: Callable[[dict[str, Any]], None]) -> Any:
    raw = yaml.safe_load(scenario_path(base).read_text())
    raw["name"] = name
    edit(raw)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_scenario(path)


def _ahr_deadline(inp: DiagnosisInput, pool: str) -> tuple[str, datetime]:
    for node in inp.snapshot.nodes.values():
        cond = node.condition(AHR)
        if node.pool == pool and cond and cond.status == "False" and cond.last_transition:
            return node.name, cond.last_transition + timedelta(minutes=10)
    raise AssertionError(f"no AcceleratedHardwareReady=False node in {pool}")


# -- the DCGM repair loop -----------------------------------------------------------------


def test_dcgm_loop_is_reported_per_nodepool_from_events_alone() -> None:
    inp = input_of(SimCluster(load_scenario("dcgm-repair-loop"), speed=0))
    assert inp.history.lifecycles == ()
    assert not any(c.deleting for c in inp.snapshot.nodeclaims.values())
    findings = findings_of(inp)

    loops = only(findings, NODE_REPAIR_LOOP)
    assert [f.nodepool for f in loops] == ["gpu-inference"]
    loop = loops[0]
    current, deadline = _ahr_deadline(inp, "gpu-inference")
    assert loop.severity == CRITICAL
    assert loop.deadline == deadline
    assert loop.runbooks[0] == "pause-node-repair" and "cordon-and-collect" in loop.runbooks
    assert loop.nodes[0] == current
    for words in ("gpu-inference", "AcceleratedHardwareReady=False", "DCGMError", "3 nodes"):
        assert words in loop.summary
    assert "median lifetime 11m" in loop.summary and current in loop.summary
    text = evidence_text(loop)
    assert "Status: True -> False, Reason: DCGMError" in text
    assert "libdcgm.so not Found" in text
    assert text.count("→ Karpenter repair") == 3

    # The repairs are the loop's, not churn; nothing is blocked; calm pools stay quiet.
    assert only(findings, REPLACEMENT_CHURN) == []
    assert only(findings, REPAIR_BLOCKED) == []
    assert {f.nodepool for f in findings if f.severity == CRITICAL} == {"gpu-inference"}


def test_dcgm_loop_with_history_counts_every_cycle(tmp_path: Path) -> None:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0)
    inp = input_of(
        sim, history_dir=tmp_path, record_minutes=36
    )  # three cycles: the next victim is DCGMError again
    assert any(lc.kind == "NodeClaim" and lc.ended for lc in inp.history.lifecycles)
    loop = only(findings_of(inp), NODE_REPAIR_LOOP, "gpu-inference")[0]

    _, deadline = _ahr_deadline(inp, "gpu-inference")
    assert loop.deadline == deadline
    assert inp.now < deadline <= inp.now + timedelta(minutes=10)
    repaired = evidence_text(loop).count("→ Karpenter repair")
    assert repaired >= 6  # 3 cycles from events, 3 more recorded while watching
    assert f"{repaired} nodes replaced" in loop.summary
    assert any(e.source == "history" for e in loop.evidence)
    assert "last unhealthy AcceleratedHardwareReady=False DCGMError" in evidence_text(loop)
    assert "every repaired NodeClaim ran image ami-0c2d1a7f6e5b4a391" in evidence_text(loop)


def test_dcgm_loop_seen_while_a_nodeclaim_is_terminating() -> None:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0)
    victim, deadline = _ahr_deadline(input_of(sim), "gpu-inference")
    sim.advance((deadline - sim.now()).total_seconds() + 20)
    inp = input_of(sim)
    deleting = [c for c in inp.snapshot.nodeclaims.values() if c.deleting]
    assert [c.node_name for c in deleting] == [victim]

    loop = only(findings_of(inp), NODE_REPAIR_LOOP, "gpu-inference")[0]
    assert "4 nodes replaced" in loop.summary
    assert "karpenter.sh/nodeclaim-termination-timestamp=" in evidence_text(loop)
    assert any(e.source == "nodeclaim" for e in loop.evidence)
    assert victim in loop.nodes


def test_dcgm_node_is_monitoring_plumbing_with_its_repair_deadline() -> None:
    inp = input_of(SimCluster(load_scenario("dcgm-repair-loop"), speed=0))
    found = only(findings_of(inp), ACCELERATED_HARDWARE_NOT_READY)
    assert len(found) == 1
    finding = found[0]
    current, deadline = _ahr_deadline(inp, "gpu-inference")
    assert finding.nodes == (current,)
    assert finding.deadline == deadline and finding.severity == CRITICAL
    assert "replacing the node will not help" in finding.summary
    assert finding.runbooks == ("pause-node-repair", "cordon-and-collect")


# -- a healthy fleet and benign churn --------------------------------------------------------


def test_healthy_fleet_raises_no_alarm() -> None:
    inp = input_of(SimCluster(load_scenario("healthy"), speed=0))
    findings = findings_of(inp)
    assert [f for f in findings if f.severity != INFO] == []
    # Only the latent small-pool / mig-manager notes, as info.
    assert {f.id for f in findings} <= {REPAIR_RISK}
    assert diagnose(inp, rules=OURS).exit_code == 0


def _with_pool(pool: dict[str, Any], timeline: list[dict[str, Any]]) -> Callable[[dict], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["warmup"] = "1h"
        raw["nodePools"].append(pool)
        raw["timeline"] = timeline

    return edit


def test_consolidation_churn_is_benign_and_not_a_repair_loop(tmp_path: Path) -> None:
    pool = {
        "name": "gpu-elastic",
        "instanceType": "g6e.12xlarge",
        "zones": ["us-west-2b"],
        "nodes": 6,
        "existing": [{"count": 6, "age": "3d"}],
        "consolidation": {"after": "Never"},  # only the timeline's three consolidations
    }
    timeline = [
        {"at": f"-{m}m", "node": {"newest": "gpu-elastic"}, "consolidate": "Underutilized"}
        for m in (50, 30, 10)
    ]
    scenario = variant(tmp_path, "healthy", "consolidation", _with_pool(pool, timeline))
    findings = findings_of(input_of(SimCluster(scenario, speed=0)))

    churned = only(findings, REPLACEMENT_CHURN)
    assert [f.nodepool for f in churned] == ["gpu-elastic"]
    assert churned[0].severity in (INFO, WARNING)
    assert "mostly consolidation (3 consolidation)" in churned[0].summary
    assert "Disrupting NodeClaim: Underutilized" in evidence_text(churned[0])
    assert only(findings, NODE_REPAIR_LOOP) == []
    assert not any(f.severity == CRITICAL for f in findings)


SPOT_POOL = {
    "name": "gpu-spot",
    "instanceType": "g5.12xlarge",
    "capacityType": "spot",
    "zones": ["us-west-2b"],
    "nodes": 3,
    "existing": [{"count": 3, "age": "3d"}],
    # Pods to move: Karpenter launches a node for them after each interruption.
    "workload": {"name": "batch", "namespace": "batch", "podsPerNode": 1, "perPod": 4},
}


def test_spot_interruptions_are_churn_by_interruption(tmp_path: Path) -> None:
    timeline = [
        {"at": f"-{m}m", "node": {"oldest": "gpu-spot"}, "spotInterrupt": True}
        for m in (50, 30, 10)
    ]
    scenario = variant(tmp_path, "healthy", "spot-churn", _with_pool(SPOT_POOL, timeline))
    findings = findings_of(input_of(SimCluster(scenario, speed=0)))

    churned = only(findings, REPLACEMENT_CHURN, "gpu-spot")
    assert len(churned) == 1
    assert "mostly EC2/spot interruption" in churned[0].summary
    assert "SpotInterrupted" in evidence_text(churned[0])
    assert len(churned[0].nodes) == 3  # each gone NodeClaim paired with its gone Node
    assert churned[0].severity == WARNING  # three interruptions in an hour
    assert only(findings, NODE_REPAIR_LOOP) == []


def test_instances_gone_without_an_interruption_queue_are_not_called_manual(
    tmp_path: Path,
) -> None:
    """Without Karpenter's interruption queue nothing tells Karpenter a spot instance went: its
    kubelet stops, the cloud node lifecycle controller finds no instance, says `DeletingNode`
    and deletes the Node, and Karpenter deletes the NodeClaim of a deleting Node at once
    (kubernetes-sigs/karpenter v1.9.0 pkg/controllers/node/termination/controller.go
    `finalize`). Nobody deleted anything by hand."""
    # while `mignurse watch` records: a NodeClaim 3 days old has no events left to tell it
    timeline = [
        {"at": f"{m}m", "node": {"oldest": "gpu-spot"}, "spotInterrupt": True} for m in (1, 6)
    ]

    def edit(raw: dict[str, Any]) -> None:
        _with_pool(SPOT_POOL, timeline)(raw)
        raw["karpenter"]["interruptionQueue"] = False

    scenario = variant(tmp_path, "healthy", "spot-no-queue", edit)
    inp = input_of(SimCluster(scenario, speed=0), history_dir=tmp_path, record_minutes=12)

    (churned,) = only(findings_of(inp), REPLACEMENT_CHURN, "gpu-spot")
    assert "manual" not in churned.summary
    assert "mostly instance gone outside Karpenter (2 instance gone outside Karpenter)" in (
        churned.summary
    )
    assert "2 instances gone outside Karpenter (spot reclaims no interruption queue" in (
        churned.summary
    )
    assert churned.severity == WARNING
    assert "DeletingNode" in evidence_text(churned)


# -- repair blocked, hardware, managed node groups -------------------------------------------


def _small_pool(timeline: list[dict[str, Any]]) -> Callable[[dict], None]:
    pool = {
        "name": "gpu-small",
        "instanceType": "g6e.12xlarge",
        "zones": ["us-west-2b"],
        "nodes": 5,
        "existing": [{"count": 5, "age": "3d", "names": [f"gpu-small-{i}" for i in range(5)]}],
        "consolidation": {"after": "Never"},  # no pods: Karpenter would empty the pool
    }
    return _with_pool(pool, timeline)


def test_repair_blocked_in_a_small_pool_with_two_unhealthy_of_five(tmp_path: Path) -> None:
    timeline = [
        {"at": "-15m", "node": "gpu-small-1", "condition": XID79},
        {"at": "-14m", "node": "gpu-small-3", "condition": XID79},
    ]
    scenario = variant(tmp_path, "healthy", "blocked", _small_pool(timeline))
    findings = findings_of(input_of(SimCluster(scenario, speed=0)))

    blocked = only(findings, REPAIR_BLOCKED)
    assert [f.nodepool for f in blocked] == ["gpu-small"]
    finding = blocked[0]
    assert finding.severity == WARNING
    assert set(finding.nodes) == {"gpu-small-1", "gpu-small-3"}
    assert "2 of 5 nodes unhealthy, at most 1 may be repaired" in finding.summary
    text = evidence_text(finding)
    assert "NodeRepairBlocked on Node" in text
    assert "more than 20% nodes are unhealthy in the nodepool" in text
    assert "NvidiaXID79Error" in text and "held by the guard" in text
    assert only(findings, NODE_REPAIR_LOOP) == []


def test_xid79_node_is_hardware_to_replace(tmp_path: Path) -> None:
    timeline = [{"at": "-2m", "node": "gpu-small-2", "condition": XID79}]
    scenario = variant(tmp_path, "healthy", "xid79", _small_pool(timeline))
    inp = input_of(SimCluster(scenario, speed=0))
    findings = findings_of(inp)

    hw = only(findings, ACCELERATED_HARDWARE_NOT_READY)
    assert [f.nodes for f in hw] == [("gpu-small-2",)]
    finding = hw[0]
    assert finding.runbooks == ("replace-instance", "cordon-and-collect")
    assert "GPU hardware fault" in finding.summary and "NvidiaXID79Error" in finding.summary
    assert "(XID 79)" in evidence_text(finding)
    assert finding.deadline == _ahr_deadline(inp, "gpu-small")[1]
    assert finding.severity == CRITICAL  # repair fires within 10 minutes
    assert only(findings, REPAIR_BLOCKED) == []  # one of five is within the allowance


def test_dcgm_error_on_a_managed_node_group_has_no_repair_deadline(tmp_path: Path) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["timeline"] = [{"at": "-5m", "node": {"oldest": "ng-gpu-l4"}, "condition": DCGM}]

    findings = findings_of(input_of(SimCluster(variant(tmp_path, "healthy", "mng", edit), speed=0)))
    hw = only(findings, ACCELERATED_HARDWARE_NOT_READY)
    assert [f.nodepool for f in hw] == ["ng-gpu-l4"]
    finding = hw[0]
    assert finding.deadline is None and finding.severity == WARNING
    assert "does not repair it" in finding.summary
    assert "pause-node-repair" not in finding.runbooks
    assert only(findings, NODE_REPAIR_LOOP) == [] and only(findings, REPAIR_BLOCKED) == []


# -- repair risk --------------------------------------------------------------------------------


def test_repair_risk_for_a_three_node_gpu_pool_with_repair_on() -> None:
    inp = input_of(SimCluster(load_scenario("dcgm-repair-loop"), speed=0))
    risks = only(findings_of(inp), REPAIR_RISK, "gpu-inference")
    assert len(risks) == 1
    risk = risks[0]
    assert risk.severity == WARNING  # a node of the pool is already unhealthy
    assert "node repair on for 3 GPU node(s)" in risk.summary
    assert "20% guard never holds a single unhealthy node" in risk.summary
    assert "NodeRepair=true" in evidence_text(risk)

    # The same pool with repair off carries no such risk.
    off = DiagnosisInput(
        snapshot=inp.snapshot, now=inp.now, karpenter=KarpenterSettings(node_repair=False)
    )
    assert only(repair_risk.rule(off), REPAIR_RISK) == []


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _node(name: str, pool: str, *conditions: Condition, **labels: str) -> Node:
    return Node(
        name=name,
        pool=pool,
        pool_kind="nodepool",
        instance_type="g6e.12xlarge",
        provider_id=f"aws:///us-west-2a/i-{name}",
        os_image="Amazon Linux 2023.6.20250218",
        labels={"karpenter.sh/nodepool": pool, **labels},
        conditions=(
            Condition("Ready", "True", "KubeletReady", "", NOW - timedelta(days=1)),
            *conditions,
        ),
    )


def _claim(name: str, node: str, pool: str, image: str) -> NodeClaim:
    return NodeClaim(
        name=name,
        pool=pool,
        node_name=node,
        provider_id=f"aws:///us-west-2a/i-{node}",
        image_id=image,
        created=NOW - timedelta(hours=2),
    )


def test_repair_risk_names_healthy_nodes_on_an_image_that_hit_dcgm_error() -> None:
    failing = _node(
        "gpu-a-1", "gpu-a", Condition(AHR, "False", "DCGMError", "libdcgm.so not Found", NOW)
    )
    healthy = _node("gpu-a-2", "gpu-a", Condition(AHR, "True", "NvidiaGPUIsReady", "", NOW))
    other = _node("gpu-a-3", "gpu-a", Condition(AHR, "True", "NvidiaGPUIsReady", "", NOW))
    claims = [
        _claim("gpu-a-x1", "gpu-a-1", "gpu-a", "ami-new"),
        _claim("gpu-a-x2", "gpu-a-2", "gpu-a", "ami-new"),
        _claim("gpu-a-x3", "gpu-a-3", "gpu-a", "ami-old"),
    ]
    inp = DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in (failing, healthy, other)},
            nodeclaims={c.name: c for c in claims},
            karpenter=True,
        ),
        now=NOW,
        karpenter=KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true"),
    )
    image_risks = [f for f in repair_risk.rule(inp) if "ami-new" in f.summary]
    assert [f.nodes for f in image_risks] == [("gpu-a-2",)]
    assert image_risks[0].severity == WARNING
    assert "DCGMError" in evidence_text(image_risks[0])

    # One failure among many healthy nodes on the same image is that node's problem.
    more = {f"gpu-a-{i}": _node(f"gpu-a-{i}", "gpu-a", healthy.conditions[-1]) for i in (4, 5)}
    crowded = DiagnosisInput(
        snapshot=Snapshot(
            nodes={**inp.snapshot.nodes, **more},
            nodeclaims={
                **inp.snapshot.nodeclaims,
                **{f"c{n}": _claim(f"c{n}", n, "gpu-a", "ami-new") for n in more},
            },
            karpenter=True,
        ),
        now=NOW,
        karpenter=inp.karpenter,
    )
    assert [f for f in repair_risk.rule(crowded) if "ami-new" in f.summary] == []


def test_repair_risk_mig_manager_on_cgroup_v2_and_not_on_v1() -> None:
    labels = {"nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-1g.10gb"}
    node = _node("gpu-mig-1", "gpu-mig", **labels)
    snapshot = Snapshot(nodes={node.name: node}, karpenter=True)

    def risks(cgroup: CgroupInfo | None) -> list[Finding]:
        evidence = {node.name: NodeEvidence(node.name, cgroup=cgroup)} if cgroup else {}
        inp = DiagnosisInput(snapshot=snapshot, now=NOW, node_evidence=evidence)
        return [f for f in repair_risk.rule(inp) if "mig-manager" in f.summary]

    v2 = risks(CgroupInfo(2, "cgroup2fs"))
    assert len(v2) == 1 and v2[0].severity == WARNING and "cgroup v2" in v2[0].summary
    unknown = risks(None)
    assert len(unknown) == 1 and "cgroup version unknown" in unknown[0].summary
    assert risks(CgroupInfo(1, "tmpfs")) == []


# -- odd input ----------------------------------------------------------------------------------


def test_old_cluster_scope_repair_blocked_message_is_understood() -> None:
    event = Event(
        namespace="default",
        name="ip-1.17f",
        uid="u1",
        involved_kind="Node",
        involved_name="ip-1",
        involved_uid="",
        reason="NodeRepairBlocked",
        message="more then 20% nodes are unhealthy in the cluster",
        type="Warning",
        source="karpenter",
        host="",
        first_seen=NOW - timedelta(minutes=20),
        last_seen=NOW - timedelta(minutes=5),
        count=4,
    )
    inp = DiagnosisInput(snapshot=Snapshot(nodes={}, events=(event,), karpenter=True), now=NOW)
    blocked = repair_blocked.rule(inp)
    assert len(blocked) == 1
    assert "cluster-wide" in blocked[0].summary and "x4" in blocked[0].summary


def test_rules_survive_missing_times_and_no_karpenter() -> None:
    bare = _node("n1", "pool-a", Condition(AHR, "False", "", "", None))
    claim = NodeClaim(name="pool-a-zz", pool="pool-a", deleting=NOW)
    odd_event = Event(
        "default", "e", "", "NodeClaim", "pool-a-gone", "", "Drained",
        "Status condition transitioned, Type: Drained", "Normal", "karpenter", "", None, None, 1,
    )  # fmt: skip
    inputs = [
        DiagnosisInput(snapshot=Snapshot(nodes={}), now=NOW),
        DiagnosisInput(
            snapshot=Snapshot(
                nodes={"n1": bare},
                nodeclaims={claim.name: claim},
                nodepools={"pool-a": NodePool(name="pool-a", expire_after="Never")},
                events=(odd_event,),
            ),
            now=NOW,
        ),
    ]
    for inp in inputs:
        assert diagnose(inp, rules=OURS).rule_errors == []
    assert repair_loop.rule(inputs[0]) == [] and churn.rule(inputs[0]) == []
    hw = hardware.rule(inputs[1])
    assert len(hw) == 1 and hw[0].deadline is None  # NodeRepair gate unknown: no deadline
