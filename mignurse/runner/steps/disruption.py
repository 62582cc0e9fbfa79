"""`hold-disruption` and `release-disruption`: keep Karpenter's voluntary disruption off a node
while a runbook empties it and works on it, and lift that hold at the end.

Why: a cordon does not stop Karpenter. A Node is a disruption candidate whatever its
`spec.unschedulable`; only the annotation `karpenter.sh/do-not-disrupt: "true"` on the Node takes
it out (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/state/statenode.go
`ValidateNodeDisruptable`, the same check from v1.0). A node a runbook has drained of its GPU
pods is empty to Karpenter, and emptiness consolidation deletes it with the work half done;
the pods' replacements, pending meanwhile, are what a new node is launched for. The hold stops
consolidation and drift, which go through that check; it does not stop expiry
(`expireAfter`, forceful from v1) or node repair, which do not.

Decisions:
- A node that no NodePool owns (no `karpenter.sh/nodepool` label: a managed node group's) has
  nothing to hold off: the step plans nothing.
- The annotation's value before the run is recorded (`ctx.intend`) before it is written, once,
  so a resumed run tells its own hold from one that was there already. Undo and
  `release-disruption` put back exactly that value, and only where this run set it: a hold
  someone else placed stays.
"""

from __future__ import annotations

from typing import Any

from mignurse.model import LABEL_NODEPOOL
from mignurse.runner.step import Action, Change, Harm, StepContext, StepPlan, action
from mignurse.runner.steps.kube import get_node, node_check, patch_node

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
HELD = "true"
PRIOR = "doNotDisruptBefore"  # the annotation's value before this run, in ctx.prior
MARKER = "heldByRun"  # in hold-disruption's output: whether this run set the hold


def _value(node: dict[str, Any]) -> str | None:
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT)
    return None if value is None else str(value)


def _karpenter_node(node: dict[str, Any]) -> bool:
    return LABEL_NODEPOOL in ((node.get("metadata") or {}).get("labels") or {})


def _shown(value: str | None) -> str:
    return "absent" if value is None else repr(value)


def _annotate(ctx: StepContext, value: str | None) -> None:
    """Set the annotation (None removes it), recorded as intended first."""
    shown = f"={HELD}" if value == HELD else f" back to {_shown(value)}"
    ctx.intend(f"set node {ctx.node} {DO_NOT_DISRUPT}{shown}")
    patch_node(ctx, {"metadata": {"annotations": {DO_NOT_DISRUPT: value}}})
    ctx.log(f"{ctx.node}: {DO_NOT_DISRUPT}{shown}")


class _NodeAnnotation(Action):
    """What both steps share: one annotation of the step's node, undone."""

    harm = Harm.LOW
    can_undo = True
    retries = 2
    timeout = 60.0

    def check(self, ctx: StepContext) -> str | None:
        return node_check(ctx)


@action("hold-disruption")
class HoldDisruption(_NodeAnnotation):
    title = "Keep Karpenter's consolidation and drift off the node"

    def plan(self, ctx: StepContext) -> StepPlan:
        node = get_node(ctx)
        if not _karpenter_node(node):
            return StepPlan(
                notes=[f"node {ctx.node} has no NodePool: Karpenter does not disrupt it"],
                nothing_to_do=True,
            )
        if _value(node) == HELD:
            return StepPlan(
                notes=[f"node {ctx.node} already has {DO_NOT_DISRUPT}={HELD}: left as it is"],
                nothing_to_do=True,
            )
        return StepPlan(
            changes=[
                Change(f"node/{ctx.node}", f"annotation {DO_NOT_DISRUPT}", _value(node), HELD)
            ],
            notes=[
                "a cordon does not stop Karpenter: without this, the node emptied of its GPU "
                "pods may be consolidated away mid-run; the last step lifts it"
            ],
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        node = get_node(ctx)
        if not _karpenter_node(node):
            return {MARKER: False}
        current = _value(node)
        if current == HELD:
            ours = PRIOR in ctx.prior  # set by this run before it stopped
            ctx.log(f"node {ctx.node} {'is held by this run' if ours else 'is already held'}")
            return {MARKER: ours, "before": ctx.prior.get(PRIOR)}
        noted = ctx.intend(f"annotate node {ctx.node} {DO_NOT_DISRUPT}={HELD}", {PRIOR: current})
        patch_node(ctx, {"metadata": {"annotations": {DO_NOT_DISRUPT: HELD}}})
        ctx.log(f"{ctx.node}: {DO_NOT_DISRUPT}={HELD} (Karpenter leaves it be)")
        return {MARKER: True, "before": noted.get(PRIOR)}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get(MARKER) and _value(get_node(ctx)) != HELD:
            return f"node {ctx.node} does not carry {DO_NOT_DISRUPT}={HELD}"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        if not applied.get(MARKER) or _value(get_node(ctx)) != HELD:
            return  # not this run's hold, or lifted already
        _annotate(ctx, applied.get("before"))

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        now = _value(get_node(ctx))
        if applied.get(MARKER) and now == HELD != applied.get("before"):
            return f"node {ctx.node} still carries {DO_NOT_DISRUPT}={HELD}"
        return None


@action("release-disruption")
class ReleaseDisruption(_NodeAnnotation):
    title = "Let Karpenter disrupt the node again"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(
            notes=[
                f"{DO_NOT_DISRUPT} goes back to what it was before the run, where this run "
                "set it; a hold that was there before stays"
            ]
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        held = next(
            (o for o in ctx.outputs.values() if isinstance(o, dict) and o.get(MARKER)), None
        )
        if held is None:
            ctx.log(f"{ctx.node}: no hold of this run to lift")
            return {"released": False}
        before = held.get("before")
        if _value(get_node(ctx)) != HELD:
            ctx.log(f"{ctx.node}: the hold is lifted already")
            return {"released": True, "before": before}
        _annotate(ctx, before)
        return {"released": True, "before": before}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("released") and _value(get_node(ctx)) == HELD != applied.get("before"):
            return f"node {ctx.node} still carries {DO_NOT_DISRUPT}={HELD}"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        if not applied.get("released") or _value(get_node(ctx)) == HELD:
            return
        _annotate(ctx, HELD)

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("released") and _value(get_node(ctx)) != HELD:
            return f"node {ctx.node} lacks {DO_NOT_DISRUPT}={HELD}, as this run had it"
        return None
