"""Replacing a node's instance: `delete-nodeclaim`, `terminate-asg-instance`, `wait-replacement`.

Decisions (docs/repair.md "NodeClaim lifecycle"; EC2 TerminateInstances and Auto Scaling
TerminateInstanceInAutoScalingGroup as boto3 documents them):
- The node's owner chooses the way: a Karpenter (or Auto Mode) node is replaced by
  deleting its NodeClaim, which makes Karpenter drain what is left, terminate the
  instance and launch a new NodeClaim for the NodePool; a managed node group or any Auto
  Scaling group member by `terminate_instance_in_auto_scaling_group` with
  `ShouldDecrementDesiredCapacity=False`, so the group launches a replacement; an
  instance in no group is terminated with `terminate_instances` only under `force`,
  because nothing brings it back. A runbook lists both steps; each plans "nothing to
  do" for a node that is not its kind, so the plan shows exactly one mutation.
- Neither deletion can be undone. A lost answer is settled by reading back: a NodeClaim
  that is deleting or gone, an instance shutting down or terminated, is done.
- `wait-replacement` remembers the pool's nodes when the run is confirmed (the plan kept in
  the run state, not a re-plan after the deletion, when the replacement may have joined) and
  waits for a node that was not among them to be Ready in the same NodePool or node group;
  it names it.
- A resumed run finds the old node gone: each step falls back on what it recorded before its
  deletion (`ctx.prior`) or on the plan kept in the run state, instead of refusing.
- Neither deletion can be undone, and once one has landed the steps before it must stay (a
  cordoned node on its way out is the safe state): `undo_barrier` says so.
"""

from __future__ import annotations

from typing import Any

from mignurse.cluster.client import NODECLAIMS, NODES, ClusterError, NotFound
from mignurse.model import LABEL_NODEGROUP, LABEL_NODEPOOL, Node
from mignurse.runner.step import (
    Action,
    Change,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
)
from mignurse.runner.steps.awserror import aws_step_failed
from mignurse.runner.steps.kube import get_node, node_check

POLL_SECONDS = 5.0
GONE_STATES = ("shutting-down", "terminated")


def _node(ctx: StepContext) -> Node:
    return Node.from_api(get_node(ctx))


def _node_or_gone(ctx: StepContext) -> Node | None:
    """The step's node, or None when it no longer exists (replaced: a resumed run)."""
    try:
        return Node.from_api(ctx.client.get(NODES, ctx.node))
    except NotFound:
        return None
    except ClusterError as exc:
        raise StepFailed(str(exc), retryable=transient(exc)) from None


def _karpenter_owned(node: Node) -> bool:
    return node.pool_kind in ("nodepool", "auto")


def find_nodeclaim(ctx: StepContext, node: Node) -> dict[str, Any] | None:
    """The NodeClaim behind a node: by status.nodeName, else by providerID."""
    try:
        if not ctx.client.api_group_available("karpenter.sh", "v1"):
            return None
        claims: list[dict[str, Any]] = []
        for items, _rv in ctx.client.list_pages(NODECLAIMS):
            claims.extend(items)
    except ClusterError as exc:
        raise StepFailed(f"cannot list NodeClaims: {exc}", retryable=transient(exc)) from None
    for claim in claims:
        if (claim.get("status") or {}).get("nodeName") == node.name:
            return claim
    for claim in claims:
        if node.provider_id and (claim.get("status") or {}).get("providerID") == node.provider_id:
            return claim
    return None


# --------------------------------------------------------------------------- NodeClaim


@action("delete-nodeclaim")
class DeleteNodeClaim(Action):
    """Delete the node's NodeClaim: Karpenter terminates the instance and replaces it."""

    title = "Delete the node's NodeClaim (Karpenter replaces the instance)"
    harm = Harm.HIGH
    can_undo = False
    retries = 1
    timeout = 120.0

    def check(self, ctx: StepContext) -> str | None:
        if ctx.prior.get("nodeclaim"):
            return None  # deleted by this run before it stopped: its node may be gone
        return node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        node = _node_or_gone(ctx)
        if node is None and ctx.prior.get("nodeclaim"):
            name = ctx.prior["nodeclaim"]
            return StepPlan(
                notes=[f"node {ctx.node} is gone: nodeclaim/{name} was deleted by this run"],
                data={"nodeclaim": name, "uid": ctx.prior.get("uid", "")},
            )
        if node is None:
            raise StepFailed(f"node {ctx.node} does not exist (any more)")
        claim = find_nodeclaim(ctx, node)
        if claim is None:
            why = (
                "has no NodeClaim"
                if _karpenter_owned(node)
                else "is not a Karpenter node: terminate-asg-instance replaces it"
            )
            return StepPlan(notes=[f"node {node.name} {why}"], nothing_to_do=True)
        meta = claim["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            return StepPlan(
                notes=[f"nodeclaim/{name} is already deleting since {meta['deletionTimestamp']}"],
                nothing_to_do=True,
                data={"nodeclaim": name, "uid": meta.get("uid", "")},
            )
        pool = (meta.get("labels") or {}).get(LABEL_NODEPOOL, "?")
        return StepPlan(
            changes=[Change(f"nodeclaim/{name}", "metadata.deletionTimestamp", None, "now")],
            notes=[
                f"Karpenter drains what is left on {node.name}, terminates instance "
                f"{node.instance_id or '?'} and NodePool {pool} launches a replacement",
                "this cannot be undone: the instance and its local disks are gone",
            ],
            data={"nodeclaim": name, "uid": meta.get("uid", ""), "pool": pool},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        name, uid = plan.data["nodeclaim"], plan.data.get("uid", "")
        try:
            current = ctx.client.get(NODECLAIMS, name)
        except NotFound:
            return {"nodeclaim": name, "gone": True}
        except ClusterError as exc:
            raise StepFailed(f"cannot read nodeclaim/{name}: {exc}", retryable=True) from None
        if uid and current["metadata"].get("uid") != uid:
            raise StepFailed(f"nodeclaim/{name} was replaced by another object since the plan")
        if not current["metadata"].get("deletionTimestamp"):
            ctx.intend(f"delete nodeclaim/{name}", {"nodeclaim": name, "uid": uid})
            try:
                ctx.client.delete(NODECLAIMS, name)
            except NotFound:
                pass
            except ClusterError as exc:
                if self.verify(ctx, plan, {"nodeclaim": name}) is not None:
                    raise StepFailed(
                        f"delete of nodeclaim/{name} failed: {exc}", retryable=True
                    ) from None
                ctx.log(f"the delete's answer was lost ({exc}); read back: it is deleting")
        ctx.log(f"nodeclaim/{name} deleting: Karpenter terminates its instance")
        return {"nodeclaim": name, "gone": False}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        name = applied["nodeclaim"]
        try:
            claim = ctx.client.get(NODECLAIMS, name)
        except NotFound:
            return None
        except ClusterError as exc:
            return f"cannot read nodeclaim/{name}: {exc}"
        if claim["metadata"].get("deletionTimestamp"):
            return None
        return f"nodeclaim/{name} is not deleting"

    def undo_barrier(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        name = applied.get("nodeclaim")
        if not name:
            return None
        try:
            claim = ctx.client.get(NODECLAIMS, name)
        except NotFound:
            return f"nodeclaim/{name} is gone (its instance was terminated)"
        except ClusterError as exc:
            raise StepFailed(
                f"cannot read nodeclaim/{name}: {exc}", retryable=transient(exc)
            ) from None
        uid = applied.get("uid")
        if uid and claim["metadata"].get("uid") != uid:
            return f"nodeclaim/{name} was replaced (its instance was terminated)"
        if claim["metadata"].get("deletionTimestamp"):
            return f"nodeclaim/{name} is deleting (Karpenter is terminating its instance)"
        return None  # the delete never landed


# --------------------------------------------------------------------------- EC2 / ASG


def _aws(ctx: StepContext, service: str) -> Any:
    if ctx.aws is None:
        raise StepFailed(
            f"no AWS access configured: {ctx.node} is replaced through EC2 Auto Scaling "
            "(set AWS_PROFILE or credentials)"
        )
    return ctx.aws(service)


def _instance_state(ec2: Any, instance_id: str) -> str:
    try:
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
        raise aws_step_failed(f"cannot describe instance {instance_id}", exc) from None
    for reservation in reservations:
        for instance in reservation.get("Instances") or []:
            return str((instance.get("State") or {}).get("Name") or "")
    return ""


def _asg_of(autoscaling: Any, instance_id: str) -> dict[str, Any] | None:
    """The Auto Scaling group holding the instance, with its capacity; None when none does."""
    try:
        found = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(
            f"cannot look up the Auto Scaling group of {instance_id}", exc
        ) from None
    members = found.get("AutoScalingInstances") or []
    if not members:
        return None
    name = members[0]["AutoScalingGroupName"]
    try:
        groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(f"cannot describe Auto Scaling group {name}", exc) from None
    group = (groups.get("AutoScalingGroups") or [{}])[0]
    return {
        "name": name,
        "desired": int(group.get("DesiredCapacity", 0)),
        "min": int(group.get("MinSize", 0)),
        "max": int(group.get("MaxSize", 0)),
    }


@action("terminate-asg-instance")
class TerminateAsgInstance(Action):
    """Terminate the node's instance in its Auto Scaling group, keeping the capacity."""

    title = "Terminate the instance in its Auto Scaling group (capacity kept)"
    harm = Harm.HIGH
    can_undo = False
    retries = 1
    timeout = 120.0

    def check(self, ctx: StepContext) -> str | None:
        if ctx.prior.get("instance"):
            return None  # terminated by this run before it stopped: its node may be gone
        try:
            node = _node_or_gone(ctx)
        except StepFailed as exc:
            if exc.retryable:
                raise
            return str(exc)
        if node is None:
            saved = ctx.saved_plan
            if saved is not None and saved.nothing_to_do:
                return None  # a Karpenter node, replaced through its NodeClaim
            return f"node {ctx.node} does not exist (any more)"
        if _karpenter_owned(node):
            return None
        if not node.instance_id:
            return (
                f"node {node.name} has no EC2 instance id in its providerID ({node.provider_id!r})"
            )
        if ctx.aws is None:
            return f"node {node.name} is replaced through EC2: no AWS access configured"
        try:
            group = _asg_of(ctx.aws("autoscaling"), node.instance_id)
        except StepFailed as exc:
            return str(exc)
        if group is None and not ctx.param("force", False):
            return (
                f"instance {node.instance_id} of node {node.name} is in no Auto Scaling group: "
                "nothing would replace it; pass --param force=true to terminate it anyway"
            )
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        node = _node_or_gone(ctx)
        if node is None:
            saved = ctx.saved_plan
            if ctx.prior.get("instance"):
                return StepPlan(
                    notes=[f"node {ctx.node} is gone: its instance was terminated by this run"],
                    data={"instance": ctx.prior["instance"], "group": ctx.prior.get("group")},
                )
            if saved is not None and saved.nothing_to_do:
                return StepPlan(notes=list(saved.notes), nothing_to_do=True)
            raise StepFailed(f"node {ctx.node} does not exist (any more)")
        if _karpenter_owned(node):
            return StepPlan(
                notes=[f"node {node.name} is a Karpenter node: delete-nodeclaim replaces it"],
                nothing_to_do=True,
            )
        iid = node.instance_id
        group = _asg_of(_aws(ctx, "autoscaling"), iid)
        ref = f"instance/{iid}"
        if group is None:
            return StepPlan(
                changes=[Change(ref, "state", "running", "terminated")],
                notes=[
                    f"{iid} is in no Auto Scaling group: terminate_instances (force), and "
                    "nothing launches a replacement",
                ],
                data={"instance": iid, "group": None},
            )
        return StepPlan(
            changes=[Change(ref, "state", "running", "terminated")],
            notes=[
                f"{iid} is terminated in Auto Scaling group {group['name']} with "
                f"ShouldDecrementDesiredCapacity=False: desired capacity stays {group['desired']} "
                "and the group launches a replacement",
                "this cannot be undone: the instance and its local disks are gone",
            ],
            data={"instance": iid, "group": group},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        iid, group = plan.data["instance"], plan.data.get("group")
        ec2 = _aws(ctx, "ec2")
        if _instance_state(ec2, iid) in GONE_STATES:
            return {"instance": iid, "group": group, "activity": ""}
        activity = ""
        ctx.intend(f"terminate instance {iid}", {"instance": iid, "group": group})
        try:
            if group is None:
                ec2.terminate_instances(InstanceIds=[iid])
            else:
                answer = _aws(ctx, "autoscaling").terminate_instance_in_auto_scaling_group(
                    InstanceId=iid, ShouldDecrementDesiredCapacity=False
                )
                activity = str((answer.get("Activity") or {}).get("ActivityId") or "")
        except Exception as exc:  # noqa: BLE001 - settled by reading the instance back
            if _instance_state(ec2, iid) not in GONE_STATES:
                raise aws_step_failed(f"terminating {iid} failed", exc) from None
            ctx.log(f"the terminate's answer was lost ({exc}); read back: it is terminating")
        where = f" in {group['name']}" if group else ""
        ctx.log(f"instance {iid} terminating{where}")
        return {"instance": iid, "group": group, "activity": activity}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        iid, group = applied["instance"], applied.get("group")
        state = _instance_state(_aws(ctx, "ec2"), iid)
        if state not in GONE_STATES:
            return f"instance {iid} is {state or 'not found'}, not terminating"
        if group:
            try:
                now = _aws(ctx, "autoscaling").describe_auto_scaling_groups(
                    AutoScalingGroupNames=[group["name"]]
                )["AutoScalingGroups"][0]
            except Exception as exc:  # noqa: BLE001
                return f"cannot read Auto Scaling group {group['name']}: {exc}"
            if int(now.get("DesiredCapacity", 0)) < group["desired"]:
                return (
                    f"Auto Scaling group {group['name']} desired capacity fell from "
                    f"{group['desired']} to {now['DesiredCapacity']}: no replacement comes"
                )
        return None

    def undo_barrier(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        iid = applied.get("instance")
        if not iid:
            return None
        state = _instance_state(_aws(ctx, "ec2"), iid)
        if state in GONE_STATES or not state:
            return f"instance {iid} is {state or 'gone'}"
        return None  # the terminate never landed


# --------------------------------------------------------------------------- replacement


def _selector(node: Node) -> tuple[str, str]:
    """(label selector, words) of the node's pool; ("", "") when it has none."""
    if _karpenter_owned(node) and node.pool:
        return f"{LABEL_NODEPOOL}={node.pool}", f"NodePool {node.pool}"
    if node.pool_kind == "nodegroup":
        return f"{LABEL_NODEGROUP}={node.pool}", f"node group {node.pool}"
    return "", ""


_POOL_AT_RUN_START: dict[str, list[str]] = {}  # run id → the pool's nodes when it was planned


@action("wait-replacement")
class WaitReplacement(Action):
    """Wait until a new node is Ready in the replaced node's pool, and name it."""

    title = "Wait for a replacement node to be Ready in the same pool"
    mutates = False
    harm = Harm.NONE
    can_undo = False
    timeout = 900.0

    def check(self, ctx: StepContext) -> str | None:
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        saved = ctx.saved_plan
        if saved is not None and saved.data.get("selector"):
            # The pool as it was when the run was confirmed: a re-plan after the deletion
            # could count the replacement among the old nodes, or find the node gone.
            return StepPlan(notes=list(saved.notes), data=dict(saved.data))
        node = _node(ctx)
        selector, words = _selector(node)
        if not selector:
            return StepPlan(
                notes=[f"node {node.name} belongs to no NodePool or node group: no replacement"],
                nothing_to_do=True,
            )
        try:
            now = sorted(
                n.name for n in ctx.client.list(NODES, Node.from_api, label_selector=selector).items
            )
        except ClusterError as exc:
            raise StepFailed(
                f"cannot list the nodes of {words}: {exc}", retryable=transient(exc)
            ) from None
        # The pool as the run found it before its drain: Karpenter launches the node for the
        # evicted pods during the drain, and that node is the replacement.
        before = _POOL_AT_RUN_START.setdefault(ctx.run_id, now) if ctx.run_id else now
        return StepPlan(
            notes=[f"waits up to {ctx.timeout:.0f} s for a new Ready node in {words}"],
            data={"selector": selector, "pool": words, "before": before, "replaced": node.name},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        selector, words = plan.data["selector"], plan.data["pool"]
        before = set(plan.data["before"])
        seen = ""
        while True:
            ctx.check_cancel()
            try:
                nodes = ctx.client.list(NODES, Node.from_api, label_selector=selector).items
            except ClusterError as exc:
                if not transient(exc):
                    raise StepFailed(f"cannot list the nodes of {words}: {exc}") from None
                nodes = []
                seen = f"cannot list nodes: {exc}"
            new = [n for n in nodes if n.name not in before and n.deleting is None]
            ready = sorted((n for n in new if n.ready_status == "Ready"), key=lambda n: n.name)
            if ready:
                chosen = ready[0]
                ctx.log(f"replacement {chosen.name} is Ready in {words}")
                return {
                    "replacement": chosen.name,
                    "instance": chosen.instance_id,
                    "pool": words,
                    "selector": selector,
                }
            state = (", ".join(f"{n.name} {n.ready_status}" for n in new) or "no new node yet") + (
                f"; {seen}" if seen else ""
            )
            if ctx.time_left() <= 0:
                raise StepFailed(
                    f"no replacement node became Ready in {words} within "
                    f"{ctx.timeout:.0f} s ({state}); the old node "
                    f"{plan.data['replaced']} was already replaced or terminated"
                )
            ctx.log(f"waiting for a replacement in {words}: {state}")
            ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        name = applied["replacement"]
        try:
            node = Node.from_api(ctx.client.get(NODES, name))
        except ClusterError as exc:
            return f"replacement {name} cannot be read: {exc}"
        return (
            None if node.ready_status == "Ready" else f"replacement {name} is {node.ready_status}"
        )
