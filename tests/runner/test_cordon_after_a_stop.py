"""cordon and uncordon (mignurse/runner/steps/kube.py) after a stop and at the edges: a
resumed run whose change was announced but never sent, an undo with no record, a cordon whose
`mignurse.io/cordoned-by` annotation someone stripped (no longer this run's), a lock lost
before the undo's patch, an uncordon planned before the runbook's own cordon, one the API
server keeps refusing, and how a node that is not Ready is worded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunEvent
from mignurse.runner.schema import load_runbook
from mignurse.runner.state import RunState
from mignurse.runner.step import ACTIONS, LockLost, StepContext, StepPlan
from mignurse.runner.steps.kube import CORDONED_BY, not_ready

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


def unschedulable(c: Cluster, node: str) -> bool:
    return bool(c.node(node)["spec"].get("unschedulable"))


def cordon(c: Cluster, ctx: StepContext) -> tuple[StepPlan, dict[str, Any]]:
    step = ACTIONS["cordon"]()
    plan = step.plan(ctx)
    return plan, step.apply(ctx, plan)


def lost() -> None:
    raise LockLost("lock lost: node is now locked by bob@box (run b0b, x)")


# -- cordon -----------------------------------------------------------------------------------


def test_a_resumed_cordon_whose_patch_was_never_sent_plans_and_sends_it(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    resumed = c.ctx(node, prior={"wasUnschedulable": False})  # announced, then killed
    step = ACTIONS["cordon"]()

    plan = step.plan(resumed)

    assert [ch.field for ch in plan.changes] == ["spec.unschedulable", f"annotation {CORDONED_BY}"]
    assert plan.notes == []
    assert step.apply(resumed, plan) == {"wasUnschedulable": False}
    assert unschedulable(c, node)


def test_a_resumed_cordon_of_a_node_uncordoned_by_hand_plans_the_cordon_again(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    first = c.ctx(node)
    cordon(c, first)
    c.client.patch(NODES, node, {"spec": {"unschedulable": None}})  # kubectl uncordon
    resumed = c.ctx(node, prior=dict(first.prior))

    plan = ACTIONS["cordon"]().plan(resumed)

    assert [ch.field for ch in plan.changes] == ["spec.unschedulable", f"annotation {CORDONED_BY}"]
    assert plan.notes == []


def test_a_cordon_whose_lock_is_lost_before_its_patch_leaves_the_node_schedulable(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node, guard=lost)
    step = ACTIONS["cordon"]()
    plan = step.plan(ctx)

    with pytest.raises(LockLost):
        step.apply(ctx, plan)

    assert not unschedulable(c, node)


def test_an_undo_with_no_record_of_the_cordon_leaves_the_node_as_it_is(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})  # kubectl cordon
    ctx = c.ctx(node)
    step = ACTIONS["cordon"]()
    plan = StepPlan()

    step.undo(ctx, plan, {})

    assert unschedulable(c, node)
    assert step.undone(ctx, plan, {}) is None


def test_an_undo_with_no_record_of_the_cordon_does_not_count_another_runs_cordon_as_left(
    cluster_for: Make,
) -> None:
    # No record of the step's change: nothing this run did is left, whoever cordoned the node.
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    theirs = json.dumps({"holder": "bob@box", "run": "b0b0b0b0"}, separators=(",", ":"))
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )
    ctx = c.ctx(node)
    step = ACTIONS["cordon"]()

    step.undo(ctx, StepPlan(), {})

    assert unschedulable(c, node)
    assert step.undone(ctx, StepPlan(), {}) is None


def test_a_cordon_whose_annotation_was_stripped_is_not_this_runs_to_lift(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    logs: list[str] = []
    ctx = c.ctx(node, log=logs.append)
    plan, applied = cordon(c, ctx)
    c.client.patch(NODES, node, {"metadata": {"annotations": {CORDONED_BY: None}}})
    step = ACTIONS["cordon"]()

    step.undo(ctx, plan, applied)

    assert unschedulable(c, node)  # nothing on the node says this run made the cordon
    assert f"node {node} is cordoned by someone else (no run named on it) now: left cordoned" in (
        logs
    )
    assert step.undone(ctx, plan, applied) is None


def test_a_cordon_undo_whose_lock_is_lost_leaves_the_node_cordoned(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    plan, applied = cordon(c, c.ctx(node))

    with pytest.raises(LockLost):
        ACTIONS["cordon"]().undo(c.ctx(node, guard=lost), plan, applied)

    assert unschedulable(c, node)


# -- uncordon ---------------------------------------------------------------------------------


def test_uncordon_with_require_ready_of_a_node_that_is_gone_is_refused_in_one_line(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    gone = "ip-10-9-9-9.ec2.internal"
    refused = ACTIONS["uncordon"]().check(c.ctx(gone, with_args={"require_ready": True}))
    assert refused == f"node {gone} does not exist (any more)"


def test_uncordon_only_ours_planned_before_the_runbooks_own_cordon_plans_the_uncordon(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]

    plan = ACTIONS["uncordon"]().plan(c.ctx(node, with_args={"only_ours": True}))

    assert not plan.nothing_to_do
    assert plan.notes == [
        f"node {node} is schedulable now; if an earlier step cordons it, this step uncordons it "
        "and removes that step's mignurse.io/cordoned-by"
    ]
    # no marker yet: no change of it is shown ("(absent) → (absent)" said nothing)
    assert [(c.field, c.old, c.new) for c in plan.changes] == [("spec.unschedulable", True, False)]


def test_the_uncordon_plan_lifts_the_cordon_and_drops_who_made_it(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    marker = c.node(node)["metadata"]["annotations"][CORDONED_BY]

    plan = ACTIONS["uncordon"]().plan(c.ctx(node))

    assert [(ch.field, ch.old, ch.new) for ch in plan.changes] == [
        ("spec.unschedulable", True, False),
        (f"annotation {CORDONED_BY}", marker, None),
    ]


def test_a_resumed_uncordon_whose_patch_landed_still_knows_the_cordon_it_lifted(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(
        NODES,
        node,
        {"metadata": {"annotations": {CORDONED_BY: theirs}}, "spec": {"unschedulable": True}},
    )
    first = c.ctx(node)
    step = ACTIONS["uncordon"]()
    plan = StepPlan.from_json(step.plan(first).to_json())
    step.apply(first, plan)  # then killed before verify
    resumed = c.ctx(node, prior=dict(first.prior))

    applied = step.apply(resumed, plan)

    assert applied == {"wasUnschedulable": True, "cordonedBy": theirs}
    step.undo(resumed, plan, applied)
    assert unschedulable(c, node)
    assert c.node(node)["metadata"]["annotations"][CORDONED_BY] == theirs


# -- how a node that is not Ready is worded ------------------------------------------------------


def node_with(ready: dict[str, str] | None) -> dict[str, Any]:
    """A node whose only condition is `ready` (with type Ready), or with none."""
    conditions = [{"type": "Ready", **ready}] if ready is not None else []
    return {"metadata": {"name": "n"}, "status": {"conditions": conditions}}


PLEG = {"status": "False", "reason": "KubeletNotReady", "message": "PLEG is\n not healthy"}
LOST = {"status": "Unknown", "reason": "NodeStatusUnknown", "message": "",
        "lastTransitionTime": "2026-11-20T07:40:00Z"}  # fmt: skip


@pytest.mark.parametrize(
    ("node", "said"),
    [
        (node_with(None), "Unknown (no Ready condition)"),
        (node_with(PLEG), "NotReady (KubeletNotReady: PLEG is not healthy)"),
        (node_with(LOST), "Unknown since 07:40Z (NodeStatusUnknown)"),
        (node_with({"status": "False"}), "NotReady (no reason given)"),
        (node_with({"status": "True"}), None),
    ],
)
def test_a_node_that_is_not_ready_is_named_with_its_reason_and_since_when(
    node: dict[str, Any], said: str | None
) -> None:
    assert not_ready(node) == said


def test_an_uncordon_the_api_server_keeps_refusing_is_tried_three_times(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon(c, c.ctx(node))
    path = tmp_path / "just-uncordon.yaml"
    path.write_text(
        "name: just-uncordon\ntitle: just-uncordon\ntarget: node\nundo: never\n"
        "params:\n  node: {type: node, required: true}\n"
        "steps:\n  - id: uncordon\n    action: uncordon\n"
    )

    def refuse_patches(event: RunEvent) -> None:
        if event.kind == "step-started":
            c.sim.fail("PATCH", f"/nodes/{node}$", code=503, times=None)
        elif event.kind == "step-finished":
            c.sim.clear_faults()  # the lock's release goes through

    result = Runner(
        load_runbook(path), {"node": node}, client=c.client, yes=True, listener=refuse_patches
    ).run()

    assert result.status == "failed" and "answered 503" in result.error
    assert RunState.load(result.run_id).step("uncordon").attempts == 3
    assert unschedulable(c, node)
