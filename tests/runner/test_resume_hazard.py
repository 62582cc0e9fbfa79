"""What resume-node-repair's plan warns about before the typed acknowledgement
(mignurse/runner/steps/repair/hazard.py): the nodes Karpenter replaces as soon as repair runs
again, per NodePool, and whether the 20% guard blocks them (docs/repair.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mignurse.model import Condition, Node
from mignurse.runner.steps.repair.hazard import PoolRisk, resume_risk

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
AHR = "AcceleratedHardwareReady"  # Karpenter tolerates AcceleratedHardwareReady=False 10 min


def node(
    name: str,
    pool: str | None,
    failing_for: timedelta | None = None,
    *,
    kind: str = "nodepool",
    deleting: datetime | None = None,
) -> Node:
    conditions: tuple[Condition, ...] = ()
    if failing_for is not None:
        conditions = (Condition(AHR, "False", "DCGMError", "", NOW - failing_for),)
    labels = {"karpenter.sh/nodepool": pool} if pool else {}
    return Node(name, labels=labels, pool=pool or "", pool_kind=kind, conditions=conditions,
                deleting=deleting)  # fmt: skip


def test_a_node_at_its_toleration_this_very_second_is_replaced_at_once() -> None:
    (risk,) = resume_risk([node("a1", "a", timedelta(minutes=10)), node("a2", "a")], NOW)
    assert risk.due == [("a1", "AcceleratedHardwareReady=False since 2026-11-20T11:50:00Z")]
    assert resume_risk([node("a1", "a", timedelta(minutes=10) - timedelta(seconds=1))], NOW) == []


def test_the_guard_blocks_only_when_more_are_unhealthy_than_it_allows() -> None:
    # 10 nodes: the guard allows ceil(20% x 10) = 2 unhealthy
    two = [node(f"a{i}", "a", timedelta(minutes=30)) for i in range(2)]
    healthy = [node(f"h{i}", "a") for i in range(8)]
    (risk,) = resume_risk(two + healthy, NOW)
    assert (risk.nodes, len(risk.unhealthy), risk.allowance, risk.blocked) == (10, 2, 2, False)
    assert risk.describe() == (
        "NodePool a: 2 node(s) replaced at once: a0 (AcceleratedHardwareReady=False since "
        "2026-11-20T11:30:00Z), a1 (AcceleratedHardwareReady=False since 2026-11-20T11:30:00Z) "
        "(2 unhealthy of 10, the 20% guard allows 2)"
    )

    three = [*two, node("a2", "a", timedelta(minutes=1)), *healthy[:7]]
    (risk,) = resume_risk(three, NOW)
    assert (len(risk.unhealthy), risk.allowance, risk.blocked) == (3, 2, True)
    assert risk.describe().endswith(
        "but 3 of 10 are unhealthy, more than the 20% guard's 2: repairs stay blocked "
        "(NodeRepairBlocked) until fewer are unhealthy"
    )


def test_nodes_being_deleted_and_node_group_nodes_are_not_karpenters_to_replace() -> None:
    nodes = [
        node("gone", "a", timedelta(hours=1), deleting=NOW - timedelta(minutes=1)),
        node("mng", None, timedelta(hours=1), kind="nodegroup"),
        node("a1", "a"),
    ]
    assert resume_risk(nodes, NOW) == []


def test_nodes_outside_any_nodepool_are_counted_together() -> None:
    (risk,) = resume_risk([node("x1", None, timedelta(hours=1)), node("x2", None)], NOW)
    assert risk.pool == ""
    assert risk.describe().startswith("nodes outside any NodePool: 1 node(s) replaced at once: x1")


def test_each_pool_is_judged_on_its_own_and_listed_in_order() -> None:
    nodes = [
        node("b1", "b", timedelta(hours=1)),
        node("a1", "a", timedelta(hours=1)),
        node("c1", "c"),
    ]
    risks = resume_risk(nodes, NOW)
    assert [(r.pool, r.nodes, r.allowance) for r in risks] == [("a", 1, 1), ("b", 1, 1)]


def test_a_risk_with_nothing_unhealthy_is_not_blocked() -> None:
    assert not PoolRisk("a", 5, [], [("a1", "x")], 1).blocked
    assert PoolRisk("a", 5, ["a1", "a2"], [("a1", "x")], 1).blocked
