"""The repair-deadline radar: which GPU nodes automatic repair replaces within the horizon,
soonest first, and the one thing to do before it does.

The conditions and tolerations are Karpenter's AWS provider's repair policies
(aws/karpenter-provider-aws v1.6.3 pkg/cloudprovider/cloudprovider.go RepairPolicies:
AcceleratedHardwareReady=False 10 min, Ready=False/Unknown 30 min), held back while more than
20% of the NodePool is unhealthy (kubernetes-sigs/karpenter v1.6.0
pkg/controllers/node/health/controller.go).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from mignurse.diagnose.findings import (
    NODE_REPAIR_LOOP,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    WARNING,
    Finding,
)
from mignurse.diagnose.inputs import KarpenterSettings, NodeEvidence
from mignurse.diagnose.radar import CONDITIONAL, FIRES, HELD, radar
from mignurse.model import Condition

from .test_rule_boundaries import AHR, NOW, REPAIR_ON, cluster, gpu_node

MIN = timedelta(minutes=1)
READY = Condition("Ready", "True", "KubeletReady", "", NOW - timedelta(days=3))


def host(i: int) -> str:
    return f"ip-10-0-9{i}-7.us-west-2.compute.internal"


def xid79(minutes_ago: float) -> Condition:
    return Condition(
        AHR, "False", "NvidiaXID79Error", "GPU fell off the bus", NOW - minutes_ago * MIN
    )


def not_ready(minutes_ago: float) -> Condition:
    return Condition("Ready", "Unknown", "NodeStatusUnknown", "", NOW - minutes_ago * MIN)


def fleet(*sick: tuple[Condition, ...], size: int = 10, gate: KarpenterSettings | None = REPAIR_ON):
    nodes = [gpu_node(host(i), *(sick[i] if i < len(sick) else (READY,))) for i in range(size)]
    return replace(cluster(nodes, []), karpenter=gate)


def test_nodes_are_listed_soonest_repair_first_with_the_condition_that_fires() -> None:
    inp = fleet((READY, xid79(4)), (not_ready(26),))

    blips = radar(inp, [])

    assert [(b.node, b.condition, b.due, b.state) for b in blips] == [
        (host(1), "Ready=Unknown", NOW + 4 * MIN, FIRES),  # 30 min toleration, 26 gone
        (host(0), f"{AHR}=False", NOW + 6 * MIN, FIRES),  # 10 min toleration, 4 gone
    ]
    assert "Karpenter repair" in blips[0].who and blips[0].action == "Replace"


def test_the_horizon_leaves_out_later_repairs_but_keeps_overdue_ones() -> None:
    inp = fleet((READY, xid79(45)), (not_ready(1),))

    assert [b.node for b in radar(inp, [], horizon=5 * MIN)] == [host(0)]  # due 35 min ago
    assert [b.node for b in radar(inp, [], horizon=30 * MIN)] == [host(0), host(1)]


def test_a_node_held_by_the_20_percent_guard_is_shown_held_after_those_that_fire() -> None:
    # 5 nodes: one repair at a time; two unhealthy, so both are held
    inp = fleet((READY, xid79(20)), (READY, xid79(15)), size=5)

    blips = radar(inp, [])

    assert [(b.node, b.state, b.due) for b in blips] == [
        (host(0), HELD, NOW - 10 * MIN),
        (host(1), HELD, NOW - 5 * MIN),
    ]
    assert "20% guard" in blips[0].who


def test_repair_switched_off_puts_nothing_on_the_radar_and_an_unread_gate_is_conditional() -> None:
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")

    assert radar(fleet((READY, xid79(5)), gate=off), []) == []
    unknown = radar(fleet((READY, xid79(5)), gate=None), [])
    assert [(b.node, b.state, b.due) for b in unknown] == [(host(0), CONDITIONAL, NOW + 5 * MIN)]


def test_a_node_already_being_deleted_is_not_on_the_radar() -> None:
    inp = fleet((READY, xid79(5)))
    going = replace(inp.snapshot.nodes[host(0)], deleting=NOW - MIN)
    inp = replace(inp, snapshot=replace(inp.snapshot, nodes={**inp.snapshot.nodes, host(0): going}))

    assert radar(inp, []) == []


def test_the_one_action_pause_before_a_loop_collect_before_evidence_dies_then_cordon() -> None:
    inp = fleet((READY, xid79(5)), (READY, xid79(6)), (READY, xid79(7)))
    loop = Finding(
        NODE_REPAIR_LOOP, "critical", "gpu-inference", (host(0),), "repair loop",
        runbooks=(RUNBOOK_PAUSE_REPAIR,),
    )  # fmt: skip
    hardware = Finding(
        "accelerated-hardware-not-ready", WARNING, "gpu-inference", (host(0), host(1), host(2)),
        "XID 79", runbooks=(RUNBOOK_CORDON_AND_COLLECT,),
    )  # fmt: skip
    inp = replace(inp, node_evidence={host(2): NodeEvidence(host(2))})

    acts = {
        b.node: (b.act, b.finding.id if b.finding else None) for b in radar(inp, [hardware, loop])
    }

    assert acts == {
        host(0): ("pause", NODE_REPAIR_LOOP),  # the worst finding naming it
        host(1): ("collect", "accelerated-hardware-not-ready"),
        host(2): ("cordon", "accelerated-hardware-not-ready"),  # evidence already collected
    }


def test_the_json_record_says_when_who_and_what_to_do() -> None:
    (blip,) = radar(fleet((READY, xid79(4))), [])

    assert blip.to_json() == {
        "node": host(0),
        "nodepool": "gpu-inference",
        "condition": f"{AHR}=False",
        "since": "2026-12-04T09:26:00Z",
        "due": "2026-12-04T09:36:00Z",
        "state": "fires",
        "who": blip.who,
        "action": "Replace",
        "act": "collect",
        "finding": None,
        "severity": None,
        "summary": None,
    }


def test_a_held_repair_not_yet_due_says_when_it_falls_due_not_since() -> None:
    inp = fleet((READY, xid79(2)), (READY, xid79(20)), size=5)

    later, earlier = sorted(radar(inp, []), key=lambda b: b.node)  # host 0, then host 1

    assert later.who.endswith(f"due at {(NOW + 8 * MIN):%Y-%m-%dT%H:%M:%SZ}"), later.who
    assert earlier.who.endswith(f"due since {(NOW - 10 * MIN):%Y-%m-%dT%H:%M:%SZ}"), earlier.who
