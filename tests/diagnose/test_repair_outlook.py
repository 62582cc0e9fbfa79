"""Who repairs a NotReady GPU node and when, as the node-not-ready finding words it: a Karpenter
NodePool, an EKS Auto Mode NodePool (repair built in, always on: the EKS user guide,
node-repair.html), or nothing; and what Auto Mode does not repair. Auto Mode nodes carry the
label `eks.amazonaws.com/compute-type=auto` (EKS user guide, auto-labels.html)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from mignurse.diagnose.automode import AUTO_MODE_INSTEAD
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.outlook import repair_outlook
from mignurse.diagnose.rules import not_ready
from mignurse.diagnose.wording import short_time
from mignurse.model import Condition, Node

from .test_rule_boundaries import (
    NOW,
    POOL,
    REPAIR_ON,
    _ago,
    cluster,
    findings,
    gpu_node,
    repair_loops,
    young_repair,
)

AUTO = {"eks.amazonaws.com/compute-type": "auto"}
UNKNOWN = Condition(
    "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(5)
)


def _auto(node: Node) -> Node:
    return replace(node, labels={**node.labels, **AUTO})


def _not_ready(*, auto: bool = False) -> str:
    nodes = [
        gpu_node("ip-10-0-90-8.us-west-2.compute.internal", UNKNOWN),
        *(gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(4)),
    ]
    nodes = [_auto(n) for n in nodes] if auto else nodes
    inp = DiagnosisInput(snapshot=cluster(nodes, []).snapshot, now=NOW, karpenter=REPAIR_ON)
    (found,) = findings(inp, "not_ready", not_ready.rule)
    return found.summary


def test_a_notready_node_of_a_karpenter_pool_names_the_pool_and_nothing_of_auto_mode() -> None:
    summary = _not_ready()
    assert summary.startswith(f"NodePool {POOL}: 1 GPU node NotReady")
    assert "(Auto Mode)" not in summary
    assert AUTO_MODE_INSTEAD not in summary
    # Karpenter replaces it 30 minutes after the change.
    assert f"repair replaces the first at {short_time(_ago(5) + timedelta(minutes=30))}" in summary


def test_a_notready_node_of_an_auto_mode_pool_says_so_and_what_to_do_instead_of_a_pause() -> None:
    summary = _not_ready(auto=True)
    assert summary.startswith(f"NodePool {POOL} (Auto Mode): 1 GPU node NotReady")
    assert summary.endswith(AUTO_MODE_INSTEAD)


def test_auto_mode_repairs_only_what_karpenters_newest_policies_list() -> None:
    node = _auto(
        gpu_node(
            "ip-10-0-90-8.us-west-2.compute.internal",
            Condition("Ready", "True", "KubeletReady", "", _ago(60)),
            Condition("MemoryPressure", "True", "KubeletHasInsufficientMemory", "", _ago(5)),
            Condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", "", None),
        )
    )
    inp = DiagnosisInput(snapshot=cluster([node], []).snapshot, now=NOW)
    pressure = repair_outlook(inp, node, "MemoryPressure")
    assert (pressure.deadline, pressure.who) == (
        None,
        "EKS Auto Mode does not repair MemoryPressure=True",
    )
    gpu = repair_outlook(inp, node, "AcceleratedHardwareReady")
    assert (gpu.deadline, gpu.who) == (None, "AcceleratedHardwareReady has no transition time")
    healthy = repair_outlook(inp, node, "Ready")
    assert healthy.deadline is None
    assert healthy.who == "EKS Auto Mode does not repair Ready=True"
    gone = repair_outlook(inp, node, "StorageReady")
    assert (gone.deadline, gone.who) == (None, "no StorageReady condition")


def test_an_auto_mode_gpu_fault_is_replaced_ten_minutes_after_it_began() -> None:
    node = _auto(
        gpu_node(
            "ip-10-0-90-8.us-west-2.compute.internal",
            Condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", "", _ago(4)),
        )
    )
    outlook = repair_outlook(DiagnosisInput(snapshot=cluster([node], []).snapshot, now=NOW),
                             node, "AcceleratedHardwareReady")  # fmt: skip
    assert outlook.deadline == NOW + timedelta(minutes=6)


def test_a_node_with_two_failing_conditions_is_replaced_at_the_earlier_deadline() -> None:
    """Karpenter replaces a node at the earliest deadline of every condition a repair policy
    matches (findUnhealthyConditions, kubernetes-sigs/karpenter v1.8.3
    pkg/controllers/node/health/controller.go): NotReady for 3 minutes and a GPU fault as
    old is replaced 10 minutes after, not 30, and the NotReady finding says so."""
    node = gpu_node(
        "ip-10-0-90-8.us-west-2.compute.internal",
        Condition("Ready", "False", "KubeletNotReady", "", _ago(3)),
        Condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", "", _ago(3)),
    )
    others = [gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(9)]
    inp = DiagnosisInput(snapshot=cluster([node, *others], []).snapshot, now=NOW,
                         karpenter=REPAIR_ON)  # fmt: skip
    for condition in ("Ready", "AcceleratedHardwareReady"):
        assert repair_outlook(inp, node, condition).deadline == NOW + timedelta(minutes=7)
    assert (
        "10m toleration of AcceleratedHardwareReady=False" in repair_outlook(inp, node, "Ready").who
    )
    (found,) = findings(inp, "not_ready", not_ready.rule)
    assert f"repair replaces the first at {short_time(NOW + timedelta(minutes=7))}" in found.summary


def _poolless(node: Node) -> Node:
    labels = {k: v for k, v in node.labels.items() if k != "karpenter.sh/nodepool"}
    return replace(node, pool="", pool_kind="", labels=labels)


def test_notready_gpu_nodes_outside_any_pool_are_named_by_who_runs_them() -> None:
    down = _poolless(gpu_node("ip-10-0-90-8.us-west-2.compute.internal", UNKNOWN))
    for node, where in (
        (down, "GPU nodes outside any pool: 1 GPU node NotReady"),
        (_auto(down), "Auto Mode GPU nodes outside any NodePool: 1 GPU node NotReady"),
    ):
        inp = DiagnosisInput(snapshot=cluster([node], []).snapshot, now=NOW, karpenter=REPAIR_ON)
        (found,) = findings(inp, "not_ready", not_ready.rule)
        assert found.summary.startswith(where)


def test_a_loop_explains_a_reason_only_under_the_condition_the_agent_sends_it_with() -> None:
    # KernelBug is the agent's KernelReady reason (aws/eks-node-monitoring-agent v1.7.0
    # pkg/reasons/reasons.yaml); under StorageReady it is nothing the agent said.
    def looping(type_: str) -> str:
        inp = young_repair()
        (node,) = inp.snapshot.nodes.values()
        failed = Condition(
            type_, "False", "KernelBug", "BUG: unable to handle page fault", _ago(35)
        )
        node = replace(node, conditions=(*node.conditions[:1], failed))
        snapshot = replace(inp.snapshot, nodes={node.name: node})
        (loop,) = repair_loops(replace(inp, snapshot=snapshot))
        return loop.summary

    assert "; KernelBug: the kernel reported a bug" in looping("KernelReady")
    assert "the kernel reported a bug" not in looping("StorageReady")
