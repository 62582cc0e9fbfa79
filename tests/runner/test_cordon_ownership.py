"""Whose cordon is it: cordon and uncordon (mignurse/runner/steps/kube.py) on a node that
someone else cordoned, that another run cordoned since, or whose kubelet went NotReady.
A node cordoned before the run stays cordoned; undo never returns a broken node to service;
the annotation `mignurse.io/cordoned-by` says who did it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner.step import ACTIONS, LockLost, StepContext, StepPlan
from mignurse.runner.steps.kube import CORDONED_BY, cordon_run

from .enginehelpers import Cluster
from .mighelpers import set_not_ready

Make = Callable[..., Cluster]


def cordoned_by(c: Cluster, node: str) -> dict[str, Any] | None:
    raw = (c.node(node)["metadata"].get("annotations") or {}).get(CORDONED_BY)
    return json.loads(raw) if raw else None


def unschedulable(c: Cluster, node: str) -> bool:
    return bool(c.node(node)["spec"].get("unschedulable"))


def cordon(c: Cluster, ctx: StepContext) -> tuple[StepPlan, dict[str, Any]]:
    step = ACTIONS["cordon"]()
    plan = step.plan(ctx)
    return plan, step.apply(ctx, plan)


def test_the_cordon_names_its_holder_run_and_reason(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    plan, applied = cordon(c, c.ctx(node, with_args={"reason": "xid 79"}))

    assert applied == {"wasUnschedulable": False}
    assert cordoned_by(c, node) == {"holder": "tester@box", "run": "t1", "reason": "xid 79"}
    assert [(ch.field, ch.new) for ch in plan.changes][1] == (
        f"annotation {CORDONED_BY}",
        '{"holder":"tester@box","run":"t1","reason":"xid 79"}',
    )
    assert cordon_run(c.node(node)) == "t1"


def test_a_cordon_without_a_reason_says_none(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    assert cordoned_by(c, node) == {"holder": "tester@box", "run": "t1"}


def test_a_resumed_cordon_knows_the_cordon_is_its_own_and_undo_lifts_it(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    first = c.ctx(node)
    cordon(c, first)  # then the run was killed; --resume plans again
    resumed = c.ctx(node, prior=dict(first.prior))
    step = ACTIONS["cordon"]()

    plan = step.plan(resumed)
    assert not plan.nothing_to_do
    assert plan.notes == [f"node {node} was cordoned by this run before it stopped"]
    applied = step.apply(resumed, plan)
    assert applied == {"wasUnschedulable": False}

    step.undo(resumed, plan, applied)
    assert not unschedulable(c, node)


def test_undo_leaves_a_node_that_another_run_cordoned_since(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    plan, applied = cordon(c, ctx)
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(NODES, node, {"metadata": {"annotations": {CORDONED_BY: theirs}}})
    step = ACTIONS["cordon"]()

    step.undo(ctx, plan, applied)

    assert unschedulable(c, node)
    assert step.undone(ctx, plan, applied) == f"node {node} is still cordoned (by run b0b)"


def test_undo_never_uncordons_a_node_that_went_not_ready(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    logs: list[str] = []
    ctx = c.ctx(node, log=logs.append)
    plan, applied = cordon(c, ctx)
    set_not_ready(c, node)
    step = ACTIONS["cordon"]()

    step.undo(ctx, plan, applied)

    assert unschedulable(c, node)
    assert any("left cordoned, not returned to service" in line for line in logs)
    said = step.undone(ctx, plan, applied) or ""
    assert said.startswith(f"node {node} is NotReady")
    assert said.endswith(
        f"so it stays cordoned rather than get pods back; replace it: mignurse run "
        f"replace-instance --node {node}"
    )


def test_undo_of_a_cordon_that_someone_lifted_has_nothing_left_to_do(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    plan, applied = cordon(c, ctx)
    c.client.patch(NODES, node, {"spec": {"unschedulable": None}})
    step = ACTIONS["cordon"]()

    step.undo(ctx, plan, applied)

    assert not unschedulable(c, node)
    assert step.undone(ctx, plan, applied) is None
    assert cordoned_by(c, node) == {"holder": "tester@box", "run": "t1"}  # not touched


def test_a_cordon_that_stays_is_reported_by_undone(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    plan, applied = cordon(c, ctx)
    assert ACTIONS["cordon"]().undone(ctx, plan, applied) == f"node {node} is still cordoned"
    assert ACTIONS["cordon"]().undone(ctx, plan, {"wasUnschedulable": True}) is None


# -- uncordon --------------------------------------------------------------------------------


def test_uncordon_only_ours_keeps_a_node_cordoned_before_the_run(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )
    ctx = c.ctx(node, with_args={"only_ours": True})
    step = ACTIONS["uncordon"]()

    plan = step.plan(ctx)
    assert plan.nothing_to_do
    assert plan.notes == [
        f"node {node} was cordoned before this run (by run b0b): it stays cordoned"
    ]
    applied = step.apply(ctx, plan)  # a resume that applies anyway
    assert applied == {"wasUnschedulable": True, "kept": True}
    assert step.verify(ctx, plan, applied) is None
    assert unschedulable(c, node)
    step.undo(ctx, plan, applied)
    assert unschedulable(c, node) and cordoned_by(c, node) == {"holder": "bob@box", "run": "b0b"}


def test_uncordon_only_ours_says_someone_else_for_a_cordon_without_a_name(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})  # kubectl cordon
    plan = ACTIONS["uncordon"]().plan(c.ctx(node, with_args={"only_ours": True}))
    assert plan.notes == [
        f"node {node} was cordoned before this run (by someone else): it stays cordoned"
    ]


def test_uncordon_only_ours_lifts_this_runs_own_cordon(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    ctx = c.ctx(node, with_args={"only_ours": True})
    step = ACTIONS["uncordon"]()

    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)

    assert not unschedulable(c, node) and cordoned_by(c, node) is None
    assert applied["wasUnschedulable"] is True
    assert json.loads(applied["cordonedBy"]) == {"holder": "tester@box", "run": "t1"}


def test_undo_of_an_uncordon_puts_back_the_cordon_and_who_made_it(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    theirs = json.dumps({"holder": "bob@box", "run": "b0b", "reason": "bad gpu"})
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )
    ctx = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)
    assert not unschedulable(c, node)
    assert step.undone(ctx, plan, applied) == f"node {node} is schedulable, not cordoned as it was"

    step.undo(ctx, plan, applied)

    assert unschedulable(c, node)
    assert cordoned_by(c, node) == {"holder": "bob@box", "run": "b0b", "reason": "bad gpu"}
    assert step.undone(ctx, plan, applied) is None


def test_uncordon_with_require_ready_refuses_a_not_ready_node(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    set_not_ready(c, node)

    refused = ACTIONS["uncordon"]().check(c.ctx(node, with_args={"require_ready": True})) or ""

    assert refused.startswith(f"node {node} is NotReady")
    assert "container runtime is down" in refused
    assert refused.endswith(
        f"it stays cordoned rather than get pods back; replace it: mignurse run "
        f"replace-instance --node {node}"
    )
    assert ACTIONS["uncordon"]().check(c.ctx(node)) is None  # without require_ready: allowed


def test_uncordon_of_a_schedulable_node_changes_nothing_and_has_nothing_to_undo(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    assert plan.notes == [
        f"node {node} is schedulable now; if an earlier step cordons it, this step uncordons it "
        "and removes that step's mignurse.io/cordoned-by"
    ]
    # no marker yet: no change of it is shown ("(absent) → (absent)" said nothing)
    assert [(c.field, c.old, c.new) for c in plan.changes] == [("spec.unschedulable", True, False)]

    applied = step.apply(ctx, plan)

    assert applied == {"wasUnschedulable": False, "cordonedBy": None}
    step.undo(ctx, plan, applied)
    assert not unschedulable(c, node)
    assert step.undone(ctx, plan, applied) is None


def test_a_step_on_a_node_that_does_not_exist_is_refused_in_one_line(cluster_for: Make) -> None:
    c = cluster_for()
    gone = "ip-10-9-9-9.ec2.internal"
    for name in ("cordon", "uncordon"):
        assert ACTIONS[name]().check(c.ctx(gone)) == f"node {gone} does not exist (any more)"
    assert ACTIONS["cordon"]().check(c.ctx("")) == "no node given: pass --node NAME"


def test_a_drain_of_a_node_deleted_outside_the_run_has_nothing_to_evict(cluster_for: Make) -> None:
    c = cluster_for()
    gone = "ip-10-9-9-9.ec2.internal"
    drain = ACTIONS["drain"]()
    assert drain.check(c.ctx(gone)) is None
    plan = drain.plan(c.ctx(gone))
    assert plan.nothing_to_do
    assert plan.notes == [f"node {gone} is gone (deleted outside this run): its pods went with it"]


def test_a_node_cordoned_by_someone_else_between_plan_and_apply_stays_theirs(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    step = ACTIONS["cordon"]()
    plan = step.plan(ctx)  # schedulable when the plan was shown
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )

    applied = step.apply(ctx, plan)

    assert applied == {"wasUnschedulable": True}
    assert cordoned_by(c, node) == {"holder": "bob@box", "run": "b0b"}  # not claimed as ours
    step.undo(ctx, plan, applied)
    assert unschedulable(c, node)


def test_a_cordon_lifted_before_verify_fails_the_step(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node)
    step = ACTIONS["cordon"]()
    plan, applied = cordon(c, ctx)
    c.client.patch(NODES, node, {"spec": {"unschedulable": None}})
    assert step.verify(ctx, plan, applied) == f"node {node} is still schedulable"


def test_undo_of_an_uncordon_leaves_a_node_cordoned_again_since_as_it_is(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    ctx = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )

    step.undo(ctx, plan, applied)

    assert cordoned_by(c, node) == {"holder": "bob@box", "run": "b0b"}


def test_undo_of_a_kept_uncordon_never_cordons_a_node_someone_lifted_since(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})  # cordoned before the run
    ctx = c.ctx(node, with_args={"only_ours": True})
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)
    assert applied["kept"]
    c.client.patch(NODES, node, {"spec": {"unschedulable": None}})  # its owner lifted it

    step.undo(ctx, plan, applied)

    assert not unschedulable(c, node)


def test_undo_of_an_uncordon_after_the_lock_is_lost_changes_nothing(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    ctx = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)

    def lost() -> None:
        raise LockLost("lock lost: node is now locked by bob@box (run b0b, x)")

    with pytest.raises(LockLost):
        step.undo(c.ctx(node, guard=lost), plan, applied)
    assert not unschedulable(c, node)


def test_an_uncordon_undone_before_verify_fails_the_step(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    ctx = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    assert step.verify(ctx, plan, applied) == f"node {node} is still cordoned"
