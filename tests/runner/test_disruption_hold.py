"""hold-disruption and release-disruption (mignurse/runner/steps/disruption.py) against the
simulator: the Node annotation `karpenter.sh/do-not-disrupt` set for a run and put back as it
was, a hold that was there before left alone, a resumed run telling its own hold from another,
and a node no NodePool owns left untouched. Karpenter skips a held Node when it looks for
disruption candidates (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/state/statenode.go
ValidateNodeDisruptable), and the simulator's Karpenter with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mignurse.cluster.client import NODES
from mignurse.runner.steps.disruption import (
    DO_NOT_DISRUPT,
    PRIOR,
    HoldDisruption,
    ReleaseDisruption,
)

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


def held(c: Cluster, node: str) -> str | None:
    return (c.node(node)["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT)


def annotate(c: Cluster, node: str, value: str | None) -> None:
    c.client.patch(NODES, node, {"metadata": {"annotations": {DO_NOT_DISRUPT: value}}})


def hold_then_release(c: Cluster, node: str) -> tuple[dict[str, Any], dict[str, Any]]:
    hold, release = HoldDisruption(), ReleaseDisruption()
    ctx = c.ctx(node)
    applied = hold.apply(ctx, hold.plan(ctx))
    assert hold.verify(ctx, hold.plan(ctx), applied) is None
    later = c.ctx(node, outputs={"hold-disruption": applied})
    released = release.apply(later, release.plan(later))
    assert release.verify(later, release.plan(later), released) is None
    return applied, released


def test_a_run_s_hold_is_set_then_put_back_as_it_was(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    plan = HoldDisruption().plan(c.ctx(node))
    assert [(ch.field, ch.old, ch.new) for ch in plan.changes] == [
        (f"annotation {DO_NOT_DISRUPT}", None, "true")
    ]
    applied, released = hold_then_release(c, node)
    assert applied == {"heldByRun": True, "before": None} and released["released"]
    assert held(c, node) is None
    annotate(c, node, "false")  # someone's own value: it comes back, not "absent"
    hold_then_release(c, node)
    assert held(c, node) == "false"


def test_a_hold_that_was_there_before_stays(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    annotate(c, node, "true")
    assert HoldDisruption().plan(c.ctx(node)).nothing_to_do
    applied, released = hold_then_release(c, node)
    assert applied["heldByRun"] is False and released == {"released": False}
    assert held(c, node) == "true"
    HoldDisruption().undo(c.ctx(node), HoldDisruption().plan(c.ctx(node)), applied)
    assert held(c, node) == "true"


def test_a_resumed_run_knows_its_own_hold_and_undo_lifts_only_that(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    hold = HoldDisruption()
    first = c.ctx(node)
    hold.apply(first, hold.plan(first))
    # the run stopped after its write; the resumed step finds the record made before it
    resumed = c.ctx(node, prior={PRIOR: None})
    applied = hold.apply(resumed, hold.plan(resumed))
    assert applied == {"heldByRun": True, "before": None}
    hold.undo(resumed, hold.plan(resumed), applied)
    assert held(c, node) is None
    assert hold.undone(resumed, hold.plan(resumed), applied) is None


def test_a_node_no_nodepool_owns_is_left_untouched(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("ng-gpu-l4")[0]
    plan = HoldDisruption().plan(c.ctx(node))
    assert plan.nothing_to_do and not plan.changes
    applied, released = hold_then_release(c, node)
    assert applied == {"heldByRun": False} and released == {"released": False}
    assert held(c, node) is None
