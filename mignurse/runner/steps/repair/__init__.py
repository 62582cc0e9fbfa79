"""Pausing and resuming node auto-repair: `pause-node-repair`, `resume-node-repair`.

Facts in docs/repair.md; the decisions they led to:

- **Who repairs** is read from the node (`backend.detect_backend`): Auto Mode (label
  `eks.amazonaws.com/compute-type=auto`) has no pause at all, so check() refuses and names the
  stopgaps (docs/repair.md "Stopgaps that are not a pause"); a `karpenter.sh/nodepool` node is
  repaired by the karpenter controller (`karpenter.py`); an `eks.amazonaws.com/nodegroup` node
  by its managed node group (`nodegroup.py`). Both implement `backend.RepairBackend`; the
  actions here only choose one and hand each phase to it.
- **Karpenter**: only the `NodeRepair` token of the controller's feature gates changes
  (`gates.py`), and the change and the record of the prior strings go in ONE JSON patch whose
  `test` operations pin the exact old values (`deployment.py`): the Deployment is either
  paused and recorded, or untouched; a concurrent edit fails the patch instead of being
  overwritten. The pause is real only when the rollout has finished and every running
  controller pod carries the new value: verify() waits for both.
- **Managed node group**: the prior `nodeRepairConfig` is recorded as tags on the EKS
  cluster, then `update_nodegroup_config` turns repair off or adds a `NoAction` override for
  the condition and reason at hand.
- **Resume** restores exactly the recorded prior value and removes the record. Its plan
  first lists the nodes Karpenter would replace at once (`hazard.py`) and what the 20% guard
  does to that, so the typed acknowledgement covers it.
- Every write is announced first (`ctx.intend`) with what undo needs (the Deployment, the
  edits and the record; the node group and its prior config), so a run killed just after
  its patch is undone or resumed from the run state. A resumed run whose own patch landed
  before the stop (its record on the Deployment, or the record gone by its own resume)
  goes on to wait for the rollout instead of refusing or planning nothing.
- A wait gives up at once on an answer that will not change (401, 403): only blips are
  waited out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mignurse.cluster.client import NODEPOOLS, NODES, ClusterError, NotFound
from mignurse.model import LABEL_COMPUTE_TYPE, LABEL_NODEPOOL
from mignurse.runner.step import Action, Harm, StepContext, StepFailed, StepPlan, action
from mignurse.runner.steps.repair.backend import (
    Found,
    RepairBackend,
    cluster_failed,
    detect_backend,
)
from mignurse.runner.steps.repair.deployment import find_karpenter
from mignurse.runner.steps.repair.karpenter import KarpenterRepair
from mignurse.runner.steps.repair.nodegroup import NodegroupRepair

AUTO_MODE_STOPGAPS = (
    "stopgap: cordon the node so nothing new lands on it (runbook cordon-and-collect)",
    "stopgap: collect the node's evidence now, before it is replaced (mignurse collect)",
    "stopgap: fix the condition's cause (e.g. an image whose DCGM works); deleting the "
    "node monitoring agent pod only restarts the clock until the fault returns, and "
    "patching the condition True is undone at the agent's 5-minute heartbeat",
)

KARPENTER = KarpenterRepair()
NODEGROUP = NodegroupRepair()
BACKENDS: dict[str, RepairBackend] = {KARPENTER.kind: KARPENTER, NODEGROUP.kind: NODEGROUP}


def _recorded(data: Mapping[str, Any]) -> RepairBackend | None:
    """The backend a plan or an applied record names, or None."""
    return BACKENDS.get(str(data.get("backend") or ""))


def _get_node(ctx: StepContext) -> dict[str, Any] | None:
    if not ctx.node:
        return None
    try:
        return ctx.client.get(NODES, ctx.node)
    except NotFound:
        raise StepFailed(f"node {ctx.node} does not exist") from None
    except ClusterError as exc:
        raise cluster_failed(f"cannot read node {ctx.node}", exc) from None


def _found(ctx: StepContext) -> Found:
    """(backend, node, karpenter Deployment) for this run's node or cluster."""
    node = _get_node(ctx)
    labels = (node or {}).get("metadata", {}).get("labels") if node else None
    deploy = find_karpenter(ctx.client, str(ctx.param("namespace") or ""))
    backend = detect_backend(
        labels,
        karpenter_deployment=deploy is not None,
        nodegroup=str(ctx.param("nodegroup") or ""),
        node_class_group=_node_class_group(ctx, labels),
    )
    return Found(backend, node, deploy)


def _node_class_group(ctx: StepContext, labels: Mapping[str, Any] | None) -> str:
    """The API group of the node's NodePool's nodeClassRef; "" when there is no pool, the
    label already says Auto Mode, or the NodePool cannot be read (the labels decide then)."""
    if not labels or labels.get(LABEL_COMPUTE_TYPE) == "auto":
        return ""
    pool = labels.get(LABEL_NODEPOOL)
    if not isinstance(pool, str) or not pool:
        return ""
    try:
        raw = ctx.client.get(NODEPOOLS, pool)
    except ClusterError:
        return ""
    template = ((raw.get("spec") or {}).get("template") or {}).get("spec") or {}
    ref = template.get("nodeClassRef") if isinstance(template, dict) else None
    return str(ref.get("group") or "") if isinstance(ref, dict) else ""


@action("pause-node-repair")
class PauseNodeRepair(Action):
    """Stop the repair backend of the node (or cluster) from replacing unhealthy nodes."""

    title = "Pause node auto-repair"
    harm = Harm.HIGH
    can_undo = True
    retries = 1  # apply re-reads and settles a lost answer: safe to run again
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        found = _found(ctx)
        backend = found.backend
        if backend.kind == "auto":
            return (
                "EKS Auto Mode repairs its nodes itself: repair is built in, always on with "
                "Karpenter's defaults and cannot be configured or paused ("
                + backend.why
                + "); "
                + "; ".join(AUTO_MODE_STOPGAPS)
            )
        if backend.kind == "unknown":
            return (
                f"cannot tell who repairs nodes here: {backend.why}; "
                "pass --node or --param nodegroup=NAME"
            )
        return BACKENDS[backend.kind].pause_refusal(found)

    def plan(self, ctx: StepContext) -> StepPlan:
        found = _found(ctx)
        backend = BACKENDS.get(found.backend.kind)
        if backend is None:
            return StepPlan(notes=[found.backend.why], nothing_to_do=True)
        return backend.plan_pause(ctx, found)

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        backend = _recorded(plan.data)
        if backend is None:
            raise StepFailed("nothing to pause")
        return backend.apply_pause(ctx, plan)

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        backend = _recorded(applied)
        return backend.verify_pause(ctx, applied) if backend is not None else None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        backend = _recorded(applied)
        if backend is not None:
            backend.restore(ctx, applied)

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        backend = _recorded(applied)
        return backend.not_back(ctx, applied, paused=False) if backend is not None else None


@action("resume-node-repair")
class ResumeNodeRepair(Action):
    """Put back exactly the repair setting a pause recorded, after showing who is at risk.
    A plan or record that names no backend is Karpenter's."""

    title = "Resume node auto-repair"
    harm = Harm.HIGH
    can_undo = True
    retries = 1
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        found = _found(ctx)
        backend = found.backend
        if backend.kind == "auto":
            return "EKS Auto Mode repair cannot be paused, so there is nothing to resume"
        if backend.kind == "unknown":
            return f"cannot tell who repairs nodes here: {backend.why}"
        return BACKENDS[backend.kind].resume_refusal(ctx, found)

    def plan(self, ctx: StepContext) -> StepPlan:
        found = _found(ctx)
        backend = NODEGROUP if found.backend.kind == NODEGROUP.kind else KARPENTER
        return backend.plan_resume(ctx, found)

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        return (_recorded(plan.data) or KARPENTER).apply_resume(ctx, plan)

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        return (_recorded(applied) or KARPENTER).verify_resume(ctx, applied)

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        backend = _recorded(applied)
        return backend.not_back(ctx, applied, paused=True) if backend is not None else None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        """Pause again with the same record (so a later resume still knows the prior)."""
        (_recorded(applied) or KARPENTER).pause_again(ctx, applied)
