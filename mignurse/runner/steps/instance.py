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

from collections.abc import Callable
from typing import Any

from mignurse.cluster.client import NODECLAIMS, NODES, PODS, ClusterError, Conflict, NotFound
from mignurse.cluster.dra import node_dra
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
from mignurse.runner.steps.forecast import (
    forecast_group,
    forecast_karpenter,
    pending_for,
    recurring_causes,
    shape_of,
)
from mignurse.runner.steps.kube import get_node, node_check, node_gone
from mignurse.runner.steps.settle import (
    READS_PER_WINDOW,
    Settle,
    gpus_advertised,
    serving_problem,
    settle_seconds,
)

POLL_SECONDS = 5.0
SHOWN_NODES = 2  # new nodes whose story a failed wait tells
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


def _cluster_now(ctx: StepContext) -> str:
    return f"{ctx.client.server_now():%Y-%m-%dT%H:%M:%SZ}"


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
        saved = ctx.saved_plan
        if saved is not None and saved.data.get("nodeclaim") and node_gone(ctx):
            return None  # deleted by someone else since the plan: the plan says so
        return node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        node = _node_or_gone(ctx)
        if node is None and ctx.prior.get("nodeclaim"):
            name = ctx.prior["nodeclaim"]
            return StepPlan(
                notes=[f"node {ctx.node} is gone: nodeclaim/{name} was deleted by this run"],
                data={"nodeclaim": name, "uid": ctx.prior.get("uid", "")},
            )
        saved = ctx.saved_plan
        if node is None and saved is not None and saved.data.get("nodeclaim"):
            return self._gone_before(ctx, saved.data)
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
                f"Karpenter drains what is left on {node.name} and terminates "
                f"{_instance_words(node)}; NodePool {pool} launches a new node only for pods "
                "that need one (wait-replacement says whether any will)",
                "this cannot be undone: the instance and its local disks are gone",
            ],
            data={"nodeclaim": name, "uid": meta.get("uid", ""), "pool": pool},
        )

    @staticmethod
    def _gone_before(ctx: StepContext, planned: dict[str, Any]) -> StepPlan:
        """The node went before this step deleted its NodeClaim (Karpenter's repair or
        consolidation, or another operator): what is left of the claim decides."""
        name, uid = str(planned["nodeclaim"]), str(planned.get("uid") or "")
        try:
            claim = ctx.client.get(NODECLAIMS, name)
        except NotFound:
            claim = None
        except ClusterError as exc:
            raise StepFailed(
                f"cannot read nodeclaim/{name}: {exc}", retryable=transient(exc)
            ) from None
        meta = (claim or {}).get("metadata") or {}
        if claim is None or (uid and meta.get("uid") != uid):
            words = "is gone" if claim is None else "was replaced by another object"
            said = (
                f"node {ctx.node} was deleted outside this run and nodeclaim/{name} {words}: "
                "its instance was terminated without this step"
            )
            return StepPlan(
                notes=[said],
                nothing_to_do=True,
                data={"nodeclaim": name, "uid": uid, "goneBefore": True, "summary": said},
            )
        if meta.get("deletionTimestamp"):
            said = (
                f"node {ctx.node} was deleted outside this run; nodeclaim/{name} is deleting "
                f"since {meta['deletionTimestamp']}"
            )
            return StepPlan(
                notes=[said],
                nothing_to_do=True,
                data={"nodeclaim": name, "uid": uid, "goneBefore": True, "summary": said},
            )
        return StepPlan(
            changes=[Change(f"nodeclaim/{name}", "metadata.deletionTimestamp", None, "now")],
            notes=[f"node {ctx.node} is gone but nodeclaim/{name} is not: deleting it as planned"],
            data={"nodeclaim": name, "uid": uid},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        name, uid = plan.data["nodeclaim"], plan.data.get("uid", "")
        try:
            current = ctx.client.get(NODECLAIMS, name)
        except NotFound:
            return {"nodeclaim": name, "uid": uid, "node": ctx.node, "gone": True}
        except ClusterError as exc:
            raise StepFailed(f"cannot read nodeclaim/{name}: {exc}", retryable=True) from None
        if uid and current["metadata"].get("uid") != uid:
            raise StepFailed(f"nodeclaim/{name} was replaced by another object since the plan")
        if not current["metadata"].get("deletionTimestamp"):
            ctx.intend(f"delete nodeclaim/{name}", {"nodeclaim": name, "uid": uid})
            try:
                # The UID as a precondition: a claim recreated under this name between the read
                # above and this delete is refused by the API server (409), not deleted.
                ctx.client.delete(NODECLAIMS, name, uid=uid or None)
            except NotFound:
                pass
            except Conflict:
                raise StepFailed(
                    f"nodeclaim/{name} was replaced by another object since the plan"
                ) from None
            except ClusterError as exc:
                if self.verify(ctx, plan, {"nodeclaim": name}) is not None:
                    raise StepFailed(
                        f"delete of nodeclaim/{name} failed: {exc}", retryable=True
                    ) from None
                ctx.log(f"the delete's answer was lost ({exc}); read back: it is deleting")
        ctx.log(f"nodeclaim/{name} deleting: Karpenter terminates its instance")
        return {"nodeclaim": name, "uid": uid, "node": ctx.node, "at": _cluster_now(ctx)}

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


def _instance_words(node: Node) -> str:
    """The machine behind a node as its providerID names it: an EC2 instance id, else the
    providerID itself (another cloud provider's, or kwok's), else that none is set."""
    if node.instance_id:
        return f"instance {node.instance_id}"
    if node.provider_id:
        return f"its machine ({node.provider_id})"
    return "its machine (the Node names no providerID)"


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


def _pool_claims(ctx: StepContext, pool: str) -> dict[str, str]:
    """{NodeClaim name: its node name ("" while launching)} of a NodePool."""
    found: dict[str, str] = {}
    for page, _version in ctx.client.list_pages(
        NODECLAIMS, label_selector=f"{LABEL_NODEPOOL}={pool}"
    ):
        for claim in page:
            name = str((claim.get("metadata") or {}).get("name") or "")
            found[name] = str((claim.get("status") or {}).get("nodeName") or "")
    return found


def _gpu_check(expects: str, ctx: StepContext) -> Callable[[Node], str | None] | None:
    """How a new node shows its GPUs, judged like the node it replaces: advertised in
    allocatable (device plugin), or published in ResourceSlices (DRA driver)."""
    if expects == "allocatable":
        return gpus_advertised
    if expects == "dra":

        def published(node: Node) -> str | None:
            try:
                devices = node_dra(ctx.client, node.name).devices
            except ClusterError as exc:
                return f"its DRA devices cannot be read ({exc})"
            return None if devices is not None else "no GPUs published in ResourceSlices yet"

        return published
    return None


def _expects(ctx: StepContext, node: Node, pool: list[Node]) -> str:
    """How the pool's nodes show their GPUs: "allocatable" (a device plugin), "dra" (the
    DRA driver's ResourceSlices) or "" (no GPUs to expect). Judged on the replaced node and
    its Ready neighbours, since a broken node may show none."""
    # the pool's listing holds the node itself: judged once, first
    judged = [node, *(n for n in pool if n.ready_status == "Ready" and n.name != node.name)]
    for each in judged:
        if any(
            count > 0 for count in (*each.gpu_capacity.values(), *each.gpu_allocatable.values())
        ):
            return "allocatable"
    for each in judged[:3]:
        try:
            if node_dra(ctx.client, each.name).devices is not None:
                return "dra"
        except ClusterError:
            continue
    return ""


@action("wait-replacement")
class WaitReplacement(Action):
    """Wait until a new node in the replaced node's pool has stayed serving for the settle
    window, and name it; or say that no replacement is expected, and why."""

    title = "Wait for a replacement node that stays Ready in the same pool"
    mutates = False
    harm = Harm.NONE
    can_undo = False
    timeout = 900.0

    def check(self, ctx: StepContext) -> str | None:
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        saved = ctx.saved_plan
        if saved is not None and (saved.data.get("selector") or saved.nothing_to_do):
            # The pool as it was when the run was confirmed, before its drain: a re-plan after
            # the deletion would count the replacement among the old nodes, or find the node
            # gone. A resumed run keeps it too (the run state holds it).
            return StepPlan(
                notes=list(saved.notes), data=dict(saved.data), nothing_to_do=saved.nothing_to_do
            )
        raw = get_node(ctx)
        node = Node.from_api(raw)
        selector, words = _selector(node)
        if not selector:
            return StepPlan(
                notes=[f"node {node.name} belongs to no NodePool or node group: no replacement"],
                nothing_to_do=True,
            )
        try:
            pool = ctx.client.list(NODES, Node.from_api, label_selector=selector).items
            before = sorted(n.name for n in pool)
            claims = _pool_claims(ctx, node.pool) if _karpenter_owned(node) else {}
            forecast = (
                forecast_karpenter(ctx.client, raw, node.pool)
                if _karpenter_owned(node)
                else forecast_group(node.pool)
            )
        except ClusterError as exc:
            raise StepFailed(
                f"cannot read the nodes of {words}: {exc}", retryable=transient(exc)
            ) from None
        recurs = recurring_causes(ctx.client, node.name, node.pool)
        settle = settle_seconds(ctx)
        expects = _expects(ctx, node, pool)
        shown = {"allocatable": " with its GPUs advertised", "dra": " with its GPUs published"}
        return StepPlan(
            notes=[
                forecast.why,
                *forecast.notes,
                *recurs,
                f"a new node in {words} counts once it has stayed Ready{shown.get(expects, '')} "
                f"for {_span(settle)} of cluster time; the wait gives up after "
                f"{_span(ctx.timeout)}",
            ],
            data={
                "selector": selector,
                "pool": words,
                "karpenter": _karpenter_owned(node),
                "before": before,
                "claimsBefore": sorted(claims),
                "replaced": node.name,
                "shape": shape_of(raw),
                "forecast": forecast.to_json(),
                "recurs": recurs,
                "settle": settle,
                "expects": expects,
            },
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        data = plan.data
        selector, words = data["selector"], data["pool"]
        before, claims_before = set(data["before"]), set(data.get("claimsBefore") or ())
        window = float(data.get("settle", settle_seconds(ctx)))
        gpus = _gpu_check(str(data.get("expects") or ""), ctx)
        seen: dict[str, Settle] = {}
        quiet = 0  # reads in a row that found nothing coming
        while True:
            ctx.check_cancel()
            try:
                nodes = [raw for page, _v in ctx.client.list_pages(NODES, label_selector=selector)
                         for raw in page]  # fmt: skip
                claims = _pool_claims(ctx, _pool_name(selector)) if data.get("karpenter") else {}
            except ClusterError as exc:
                if not transient(exc) or ctx.time_left() <= 0:
                    raise StepFailed(f"cannot list the nodes of {words}: {exc}") from None
                ctx.log(f"waiting for a replacement in {words}: cannot list nodes: {exc}")
                ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))
                continue
            now = ctx.client.server_now()
            ours = {name for name, node in claims.items() if name in claims_before and node}
            present = set()
            for raw in nodes:
                name = str((raw.get("metadata") or {}).get("name") or "")
                if name in before or name in {claims[c] for c in ours}:
                    continue
                present.add(name)
                seen.setdefault(name, Settle(window)).observe(now, serving_problem(raw, gpus))
            for name, settle in seen.items():
                if name not in present:
                    settle.observe(now, "gone")
            done = sorted(name for name, settle in seen.items() if settle.settled)
            if done:
                return self._found(ctx, data, done[0], seen[done[0]], nodes)
            launching = sorted(
                c for c, node in claims.items() if c not in claims_before and not node
            )
            if data.get("karpenter") and not seen and not launching:
                waiting = self._pending(ctx, data)
                quiet = 0 if waiting else quiet + 1
                if quiet >= 2:
                    why = _none_expected(data)
                    ctx.log(why)
                    return {"replacement": None, "pool": words, "summary": why}
            if ctx.time_left() <= 0:
                raise StepFailed(self._gave_up(ctx, data, seen, launching))
            ctx.log(f"waiting for a replacement in {words}: {_progress(seen, launching, window)}")
            ctx.sleep_cluster(window / READS_PER_WINDOW, POLL_SECONDS)

    @staticmethod
    def _pending(ctx: StepContext, data: dict[str, Any]) -> list[str]:
        """Pending pods a node like the replaced one would take (Karpenter launches for them)."""
        try:
            pods = [p for page, _v in ctx.client.list_pages(PODS, field_selector="spec.nodeName=")
                    for p in page]  # fmt: skip
        except ClusterError as exc:
            if not transient(exc):
                raise StepFailed(f"cannot list pending pods: {exc}") from None
            return [f"(unknown: {exc})"]
        return pending_for(pods, data.get("shape") or {})

    @staticmethod
    def _found(
        ctx: StepContext,
        data: dict[str, Any],
        name: str,
        settle: Settle,
        nodes: list[dict[str, Any]],
    ) -> dict[str, Any]:
        raw = next(n for n in nodes if (n.get("metadata") or {}).get("name") == name)
        node = Node.from_api(raw)
        what = {"allocatable": "Ready with its GPUs advertised", "dra": "Ready with its GPUs "
                "published"}.get(str(data.get("expects") or ""), "Ready")  # fmt: skip
        summary = f"replacement {name} stayed {what}: {settle.served_for()}"
        ctx.log(summary)
        return {
            "replacement": name,
            "instance": node.instance_id,
            "pool": data["pool"],
            "selector": data["selector"],
            "summary": summary,
        }

    @staticmethod
    def _gave_up(
        ctx: StepContext, data: dict[str, Any], seen: dict[str, Settle], launching: list[str]
    ) -> str:
        if seen:
            # The newest first: the one that came for this run's pods, then any relaunched.
            order = sorted(seen.items(), key=lambda kv: kv[1].episodes[0].first, reverse=True)
            stories = "; ".join(f"{name}: {s.story()}" for name, s in order[:SHOWN_NODES])
            if len(order) > SHOWN_NODES:
                stories += f"; and {len(order) - SHOWN_NODES} more new node(s)"
            window = _span(float(data.get("settle", 0)))
            what = f"no replacement stayed serving for {window}: {stories}"
        elif launching:
            what = f"NodeClaim(s) {', '.join(launching)} launched but no node joined"
        else:
            what = "no new node joined"
        recurs = [str(r) for r in data.get("recurs") or []]
        said = ""
        if recurs:  # "the replacement may fail …: notready-loop: why (summary)"
            fate, finding = recurs[0].split(": ", 2)[:2]
            said = f"; as the plan said, {fate} ({finding})"
        return (
            f"{what} in {data['pool']} within {_span(ctx.timeout)}; the old node "
            f"{data['replaced']} was already replaced or terminated{said}"
        )

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        name = applied.get("replacement")
        if not name:
            return None  # none was expected, and none was needed
        try:
            raw: dict[str, Any] | None = ctx.client.get(NODES, name)
        except NotFound:
            raw = None
        except ClusterError as exc:
            return f"replacement {name} cannot be read: {exc}"
        problem = serving_problem(raw, _gpu_check(str(plan.data.get("expects") or ""), ctx))
        return None if problem is None else f"replacement {name} is {problem}"


def _pool_name(selector: str) -> str:
    return selector.split("=", 1)[1]


def _none_expected(data: dict[str, Any]) -> str:
    said = str((data.get("forecast") or {}).get("why") or "")
    if said.startswith("none expected"):
        return said
    return (
        f"none needed any more: no new node, no NodeClaim launching and no pending pod for "
        f"{data['pool']} (the evicted pods were scheduled elsewhere)"
    )


def _progress(seen: dict[str, Settle], launching: list[str], window: float) -> str:
    parts = []
    for name, settle in sorted(seen.items()):
        last = settle.episodes[-1]
        if last.problem is None:
            held = (last.last - last.first).total_seconds()
            parts.append(f"{name} serving for {held:.0f} of {window:.0f} s")
        else:
            parts.append(f"{name} {last.problem}")
    if launching:
        parts.append(f"launching: {', '.join(launching)}")
    return "; ".join(parts) or "no new node yet"


def _span(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest:02d}s"
