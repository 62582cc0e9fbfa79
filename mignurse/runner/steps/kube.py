"""Kubernetes steps every runbook shares: `cordon`, `uncordon`, `drain`.

Decisions:
- cordon/uncordon use a merge patch of `spec.unschedulable` (what `kubectl cordon` sends)
  plus the annotation `mignurse.io/cordoned-by` (holder, run, reason), so whoever looks
  at a cordoned node can tell who did it; uncordon removes the annotation.
- cordon's undo uncordons only when apply found the node schedulable: a node that was
  cordoned before the run stays cordoned. It reconciles: it runs for a cordon interrupted
  mid-apply too, and leaves a node that another run has cordoned since (its annotation
  names that run).
- uncordon with `only_ours: true` (the last step of a runbook that cordoned first) lifts only
  a cordon whose annotation names this run: a node cordoned before the run stays cordoned.
  With `require_ready: true` it refuses a node that is not Ready.
- Undo never uncordons a node that is not Ready: pods would be scheduled onto a node whose
  kubelet or container runtime is broken. It stays cordoned, and the undo says so.
- drain evicts through the Eviction API (`policy/v1`, the pod's `eviction` subresource),
  never by deleting pods, so PodDisruptionBudgets are honoured. DaemonSet pods and
  mirror (static) pods are skipped, as `kubectl drain --ignore-daemonsets` does: evicting
  them is pointless (they come straight back) or impossible. A 429 is a PDB refusal: the
  pod is tried again on the next pass until the step's timeout, and the failure then
  names each blocking pod and the budget that refused it.
- drain refuses to start on a schedulable node: evicted pods would land on it again.
"""

from __future__ import annotations

import json
from typing import Any

from mignurse.cluster.client import (
    NODES,
    PDBS,
    PODS,
    ClusterClient,
    ClusterError,
    Forbidden,
    NotFound,
    TooManyRequests,
)
from mignurse.cluster.dra import node_claims
from mignurse.model import Node, Pod, pod_claim_names, with_gpu_claims
from mignurse.runner.step import (
    Action,
    Change,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
    write_failed,
)
from mignurse.untrusted import json_value

CORDONED_BY = "mignurse.io/cordoned-by"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DRAIN_POLL_SECONDS = 2.0


def get_node(ctx: StepContext) -> dict[str, Any]:
    """The step's node as raw JSON; StepFailed (one line) when it is gone or unreadable."""
    if not ctx.node:
        raise StepFailed("no node given: pass --node NAME")
    try:
        return ctx.client.get(NODES, ctx.node)
    except NotFound:
        raise StepFailed(f"node {ctx.node} does not exist (any more)") from None
    except ClusterError as exc:
        raise StepFailed(str(exc), retryable=transient(exc)) from None


def _unschedulable(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def patch_node(ctx: StepContext, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return ctx.client.patch(NODES, ctx.node, body)
    except NotFound:
        raise StepFailed(f"node {ctx.node} does not exist (any more)") from None
    except ClusterError as exc:
        raise write_failed(f"cannot patch node {ctx.node}", exc) from None


def node_gone(ctx: StepContext) -> bool:
    """Whether the step's node no longer exists (Karpenter, repair or someone else deleted it).
    A failure to read is raised, as get_node raises it."""
    try:
        ctx.client.get(NODES, ctx.node)
    except NotFound:
        return True
    except ClusterError as exc:
        raise StepFailed(str(exc), retryable=transient(exc)) from None
    return False


def _gone_words(ctx: StepContext) -> str:
    return f"node {ctx.node} is gone (deleted outside this run): its pods went with it"


def node_check(ctx: StepContext) -> str | None:
    """A check() for steps that need the node to exist: None, or why not. A failure that
    may pass on its own is raised, for the engine to read again."""
    try:
        get_node(ctx)
    except StepFailed as exc:
        if exc.retryable:
            raise
        return str(exc)
    return None


def not_ready(node: dict[str, Any]) -> str | None:
    """None when the node is Ready, else how it is not, in one phrase: "NotReady since
    07:40Z (KubeletNotReady: container runtime is down)"."""
    parsed = Node.from_api(node)
    if parsed.ready_status == "Ready":
        return None
    cond = parsed.ready
    detail = "no Ready condition"
    if cond is not None:
        detail = ": ".join(x for x in (cond.reason, " ".join(cond.message.split())) if x)
    since = f" since {cond.last_transition:%H:%MZ}" if cond and cond.last_transition else ""
    return f"{parsed.ready_status}{since} ({detail or 'no reason given'})"


def replace_hint(node: str) -> str:
    """The next step for a node whose kubelet or container runtime is broken."""
    return f"replace it: mignurse run replace-instance --node {node}"


def _annotation(node: dict[str, Any]) -> str | None:
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(CORDONED_BY)
    return None if value is None else str(value)


def _cordoned_by_words(node: dict[str, Any]) -> str:
    """ " (by run 1a2b of alice@laptop: mignurse reapply-mig-no-hooks)", or " (not by mignurse)"."""
    try:
        marker = json_value(_annotation(node) or "")
    except ValueError:
        marker = None
    if not isinstance(marker, dict):
        return " (not by mignurse)"
    why = f": {marker['reason']}" if marker.get("reason") else ""
    return f" (by run {marker.get('run') or '?'} of {marker.get('holder') or '?'}{why})"


def cordon_run(node: dict[str, Any]) -> str:
    """The run named by the node's cordoned-by annotation ("" when none or unreadable)."""
    try:
        marker = json_value(_annotation(node) or "")
    except ValueError:
        return ""
    return str(marker.get("run") or "") if isinstance(marker, dict) else ""


@action("cordon")
class Cordon(Action):
    title = "Cordon the node"
    harm = Harm.LOW
    can_undo = True
    retries = 2
    timeout = 60.0

    def check(self, ctx: StepContext) -> str | None:
        return node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        node = get_node(ctx)
        reason = str(ctx.param("reason", "") or "")
        # This run's cordon only where the node says so: a cordon someone else made between
        # this run's record and its patch (the patch then answered 409) is theirs to lift.
        if _unschedulable(node) and cordon_run(node) == ctx.run_id:
            return StepPlan(
                notes=[f"node {ctx.node} was cordoned by this run before it stopped"],
                data={"wasUnschedulable": False, "reason": reason},
            )
        if _unschedulable(node):
            return StepPlan(
                notes=[
                    f"node {ctx.node} is already cordoned{_cordoned_by_words(node)}: left as it "
                    "is, and undo keeps it"
                ],
                nothing_to_do=True,
                data={"wasUnschedulable": True},
            )
        return StepPlan(
            changes=[
                Change(f"node/{ctx.node}", "spec.unschedulable", False, True),
                Change(
                    f"node/{ctx.node}",
                    f"annotation {CORDONED_BY}",
                    None,
                    _cordoned_by(ctx, reason),
                ),
            ],
            data={"wasUnschedulable": False, "reason": reason},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        node = get_node(ctx)  # the node's state now, not at plan time
        if _unschedulable(node):
            was = cordon_run(node) != ctx.run_id  # this run's own cordon, or not
            ctx.log(
                f"node {ctx.node} is {'cordoned by this run' if not was else 'already cordoned'}"
            )
            return {"wasUnschedulable": was}
        ctx.intend(f"cordon node {ctx.node}", {"wasUnschedulable": False})
        marker = _cordoned_by(ctx, str(plan.data.get("reason") or ""))
        patch_node(
            ctx,
            {"metadata": {"annotations": {CORDONED_BY: marker}}, "spec": {"unschedulable": True}},
        )
        ctx.log(f"cordoned {ctx.node}")
        return {"wasUnschedulable": False}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if not _unschedulable(get_node(ctx)):
            return f"node {ctx.node} is still schedulable"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        if applied.get("wasUnschedulable", True):
            ctx.log(f"node {ctx.node} was cordoned before this run: left cordoned")
            return
        node = get_node(ctx)
        if not _unschedulable(node):
            return  # the cordon never landed, or is already lifted
        owner = cordon_run(node)
        if owner != ctx.run_id:  # this run's cordon names it: another's, or one made by hand
            who = f"by run {owner}" if owner else "by someone else (no run named on it)"
            ctx.log(f"node {ctx.node} is cordoned {who} now: left cordoned")
            return
        down = not_ready(node)
        if down:
            ctx.log(f"node {ctx.node} is {down}: left cordoned, not returned to service")
            return
        ctx.intend(f"uncordon node {ctx.node}")
        patch_node(
            ctx, {"metadata": {"annotations": {CORDONED_BY: None}}, "spec": {"unschedulable": None}}
        )
        ctx.log(f"uncordoned {ctx.node}")

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("wasUnschedulable", True):
            return None
        node = get_node(ctx)
        if _unschedulable(node):
            owner = cordon_run(node)
            if not owner:
                return None  # a cordon this run did not make: it stays, and is not this run's
            if owner != ctx.run_id:
                return f"node {ctx.node} is still cordoned (by run {owner})"
            down = not_ready(node)
            if down:
                return (
                    f"node {ctx.node} is {down}, so it stays cordoned rather than get pods "
                    f"back; {replace_hint(ctx.node)}"
                )
            return f"node {ctx.node} is still cordoned"
        return None


def _cordoned_by(ctx: StepContext, reason: str) -> str:
    marker = {"holder": ctx.holder or "mignurse", "run": ctx.run_id}
    if reason:
        marker["reason"] = reason
    return json.dumps(marker, separators=(",", ":"))


@action("uncordon")
class Uncordon(Action):
    title = "Uncordon the node"
    harm = Harm.LOW
    can_undo = True
    retries = 2
    timeout = 60.0

    def check(self, ctx: StepContext) -> str | None:
        missing = node_check(ctx)
        if missing or not ctx.param("require_ready", False):
            return missing
        down = not_ready(get_node(ctx))
        if down:
            return (
                f"node {ctx.node} is {down}: it stays cordoned rather than get pods back; "
                f"{replace_hint(ctx.node)}"
            )
        return None

    def _not_ours(self, ctx: StepContext, node: dict[str, Any]) -> str | None:
        """With `only_ours`: why a cordoned node stays cordoned (not this run's cordon)."""
        if not ctx.param("only_ours", False) or not _unschedulable(node):
            return None
        owner = cordon_run(node)
        if owner == ctx.run_id or ctx.prior.get("wasUnschedulable"):
            return None
        who = f"by run {owner}" if owner else "by someone else"
        return f"node {ctx.node} was cordoned before this run ({who}): it stays cordoned"

    def plan(self, ctx: StepContext) -> StepPlan:
        node = get_node(ctx)
        kept = self._not_ours(ctx, node)
        if kept:
            return StepPlan(notes=[kept], nothing_to_do=True, data={"wasUnschedulable": True})
        # Usually cordoned by an earlier step of the same runbook: say so rather than
        # planning nothing.
        notes = []
        if not _unschedulable(node):
            notes.append(
                f"node {ctx.node} is schedulable now; if an earlier step cordons it, "
                f"this step uncordons it and removes that step's {CORDONED_BY}"
            )
        changes = [Change(f"node/{ctx.node}", "spec.unschedulable", True, False)]
        marker = _annotation(node)
        if marker is not None:  # (none yet: the cordon step's plan shows the one it sets)
            changes.append(Change(f"node/{ctx.node}", f"annotation {CORDONED_BY}", marker, None))
        return StepPlan(changes=changes, notes=notes)

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        node = get_node(ctx)
        if not _unschedulable(node):
            was = bool(ctx.prior.get("wasUnschedulable"))  # lifted by this run before a stop
            ctx.log(f"node {ctx.node} is {'uncordoned' if was else 'already schedulable'}")
            return {"wasUnschedulable": was, "cordonedBy": ctx.prior.get("cordonedBy")}
        kept = self._not_ours(ctx, node)
        if kept:
            ctx.log(kept)
            return {"wasUnschedulable": True, "kept": True}
        prior = ctx.intend(
            f"uncordon node {ctx.node}",
            {"wasUnschedulable": True, "cordonedBy": _annotation(node)},
        )
        patch_node(
            ctx, {"metadata": {"annotations": {CORDONED_BY: None}}, "spec": {"unschedulable": None}}
        )
        ctx.log(f"uncordoned {ctx.node}")
        return {"wasUnschedulable": True, "cordonedBy": prior.get("cordonedBy")}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("kept"):
            return None
        if _unschedulable(get_node(ctx)):
            return f"node {ctx.node} is still cordoned"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        if not applied.get("wasUnschedulable") or applied.get("kept"):
            return
        if _unschedulable(get_node(ctx)):
            return  # never lifted, or cordoned again since
        body: dict[str, Any] = {"spec": {"unschedulable": True}}
        if applied.get("cordonedBy"):
            body["metadata"] = {"annotations": {CORDONED_BY: applied["cordonedBy"]}}
        ctx.intend(f"cordon node {ctx.node} again")
        patch_node(ctx, body)
        ctx.log(f"cordoned {ctx.node} again")

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("wasUnschedulable") and not _unschedulable(get_node(ctx)):
            return f"node {ctx.node} is schedulable, not cordoned as it was"
        return None


# -- drain ---------------------------------------------------------------------------


def _pods_on(client: ClusterClient, node: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    for page, _version in client.list_pages(PODS, field_selector=f"spec.nodeName={node}"):
        pods.extend(page)
    return pods


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _skip_reason(
    pod: dict[str, Any], gpu_only: bool, dra_users: frozenset[str] | None = frozenset()
) -> str | None:
    """Why drain leaves this pod alone, or None when it is to be evicted. `dra_users`: keys of
    the pods whose ResourceClaims hold NVIDIA DRA devices of the node (None: the claims could
    not be read, so every pod that uses a claim counts as a GPU pod)."""
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "mirror pod"
    owners = meta.get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" for o in owners if isinstance(o, dict)):
        return "DaemonSet pod"
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return "finished"
    if gpu_only and not gpu_resources(pod) and not _dra_gpu_user(pod, dra_users):
        return "no GPU request"
    return None


def _dra_gpu_user(pod: dict[str, Any], dra_users: frozenset[str] | None) -> bool:
    if dra_users is None:
        return bool(pod_claim_names(pod))
    return _pod_key(pod) in dra_users


def dra_gpu_users(client: ClusterClient, node: str, pods: list[dict[str, Any]]) -> frozenset[str]:
    """Keys of the pods holding NVIDIA DRA devices of the node through ResourceClaims (they
    request no nvidia.com/* resource, yet use its GPUs). ClusterError goes to the caller."""
    if not any(pod_claim_names(p) for p in pods):
        return frozenset()
    users = with_gpu_claims((Pod.from_api(p) for p in pods), node_claims(client, node))
    return frozenset(f"{p.namespace}/{p.name}" for p in users if p.gpu_claims)


def gpu_resources(pod: dict[str, Any]) -> dict[str, str]:
    """The `nvidia.com/*` resources a pod's containers request or limit."""
    found: dict[str, str] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = (container or {}).get("resources") or {}
        for kind in ("requests", "limits"):
            for name, value in (resources.get(kind) or {}).items():
                if name.startswith("nvidia.com/") and str(value) not in ("0", ""):
                    found[name] = str(value)
    return found


def evictable_pods(
    client: ClusterClient, node: str, gpu_only: bool
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(pods to evict, {pod key: why skipped}) on one node, right now."""
    evict: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    pods = _pods_on(client, node)
    dra_users: frozenset[str] | None = frozenset()
    if gpu_only:
        try:
            dra_users = dra_gpu_users(client, node, pods)
        except Forbidden:
            dra_users = None  # claims unreadable: a pod with any claim may hold a GPU
    for pod in pods:
        why = _skip_reason(pod, gpu_only, dra_users)
        if why is None:
            evict.append(pod)
        else:
            skipped[_pod_key(pod)] = why
    return evict, skipped


def _budgets(client: ClusterClient, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The PDBs whose selector matches any of `pods`, by pod key (best effort)."""
    matched: dict[str, dict[str, Any]] = {}
    namespaces = sorted({(p.get("metadata") or {}).get("namespace", "") for p in pods})
    for namespace in namespaces:
        try:
            budgets = [
                pdb for page, _v in client.list_pages(PDBS, namespace=namespace) for pdb in page
            ]
        except ClusterError:
            continue  # RBAC may refuse PDBs: the eviction answers still name them
        for pod in pods:
            meta = pod.get("metadata") or {}
            if meta.get("namespace") != namespace:
                continue
            labels = meta.get("labels") or {}
            for pdb in budgets:
                selector = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels")
                if selector and all(labels.get(k) == v for k, v in selector.items()):
                    matched[_pod_key(pod)] = pdb
    return matched


def _pdb_words(pdb: dict[str, Any]) -> str:
    meta = pdb.get("metadata") or {}
    allowed = (pdb.get("status") or {}).get("disruptionsAllowed", "?")
    return f"PDB {meta.get('namespace')}/{meta.get('name')} (allows {allowed} disruption(s) now)"


@action("drain")
class Drain(Action):
    title = "Evict the node's pods (Eviction API, PDBs respected)"
    harm = Harm.HIGH
    can_undo = False  # evicted pods reschedule on their own; nothing to put back
    retries = 1
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        return None if node_gone(ctx) else node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        if node_gone(ctx):
            said = _gone_words(ctx)
            return StepPlan(notes=[said], nothing_to_do=True, data={"gone": True, "summary": said})
        gpu_only = bool(ctx.param("gpu_only", False))
        try:
            pods, skipped = evictable_pods(ctx.client, ctx.node, gpu_only)
            budgets = _budgets(ctx.client, pods)
        except ClusterError as exc:
            raise StepFailed(f"cannot list the pods of {ctx.node}: {exc}") from None
        which = "GPU pods" if gpu_only else "pods"
        changes = [
            Change(f"pod/{_pod_key(p)}", "evicted (policy/v1 Eviction)", ctx.node, None)
            for p in pods
        ]
        notes = [f"{len(pods)} {which} to evict from {ctx.node} within {ctx.timeout:.0f} s"]
        kinds: dict[str, int] = {}
        for why in skipped.values():
            kinds[why] = kinds.get(why, 0) + 1
        if kinds:
            notes.append(
                "left alone: " + ", ".join(f"{n} {why}" for why, n in sorted(kinds.items()))
            )
        for key, pdb in sorted(budgets.items()):
            if int((pdb.get("status") or {}).get("disruptionsAllowed", 1) or 0) <= 0:
                notes.append(f"{key} is guarded by {_pdb_words(pdb)}: its eviction will wait")
        notes.append("the pods are listed again when the step runs (earlier steps may move them)")
        return StepPlan(
            changes=changes,
            notes=notes,
            nothing_to_do=False,
            data={"gpuOnly": gpu_only, "pods": [_pod_key(p) for p in pods]},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        gpu_only = bool(plan.data.get("gpuOnly", ctx.param("gpu_only", False)))
        if node_gone(ctx):
            said = _gone_words(ctx)
            ctx.log(said)
            return {"evicted": [], "gone": True, "summary": said}
        if not _unschedulable(get_node(ctx)):
            raise StepFailed(
                f"node {ctx.node} is schedulable: cordon it first (evicted pods would come back)"
            )
        evicted: list[str] = []
        blocked: dict[str, str] = {}
        while True:
            ctx.check_cancel()
            try:
                pods, _skipped = evictable_pods(ctx.client, ctx.node, gpu_only)
            except ClusterError as exc:
                raise StepFailed(
                    f"cannot list the pods of {ctx.node}: {exc}", retryable=transient(exc)
                ) from None
            waiting = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
            if not pods:
                break
            blocked = {}
            for pod in waiting:
                key = _pod_key(pod)
                ctx.intend(f"evict pod {key}")
                refusal = self._evict(ctx, pod)
                if refusal is None:
                    evicted.append(key)
                    ctx.record("evicted", pod=key)
                    ctx.log(f"evicted {key}")
                else:
                    blocked[key] = refusal
            if ctx.time_left() <= 0:
                raise StepFailed(self._timed_out(ctx, pods, blocked))
            if blocked:
                ctx.log(f"{len(blocked)} pod(s) refused by their disruption budget; trying again")
            ctx.sleep(min(DRAIN_POLL_SECONDS, max(0.05, ctx.time_left())))
        return {"evicted": evicted}

    @staticmethod
    def _evict(ctx: StepContext, pod: dict[str, Any]) -> str | None:
        """Post one Eviction; None when accepted (or the pod is gone), else why refused."""
        meta = pod.get("metadata") or {}
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        }
        try:
            ctx.client.create(PODS, body, namespace=meta.get("namespace"), subresource="eviction")
        except NotFound:
            return None
        except TooManyRequests as exc:
            return "; ".join(exc.causes) or str(exc)
        except ClusterError as exc:
            raise StepFailed(
                f"eviction of {_pod_key(pod)} failed: {exc}", retryable=transient(exc)
            ) from None
        return None

    def _timed_out(
        self, ctx: StepContext, pods: list[dict[str, Any]], blocked: dict[str, str]
    ) -> str:
        try:
            budgets = _budgets(ctx.client, pods)
        except ClusterError:
            budgets = {}
        parts = []
        for pod in pods:
            key = _pod_key(pod)
            if key in budgets:
                parts.append(f"{key} ({_pdb_words(budgets[key])})")
            elif key in blocked:
                parts.append(f"{key} ({blocked[key]})")
            else:
                parts.append(f"{key} (still terminating)")
        return (
            f"drain of {ctx.node} timed out after {ctx.timeout:.0f} s: {len(pods)} pod(s) "
            f"left: {', '.join(parts)}"
        )

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        gpu_only = bool(plan.data.get("gpuOnly", False))
        if node_gone(ctx):
            return None  # the node and its pods are gone: nothing is left to evict
        try:
            pods, _skipped = evictable_pods(ctx.client, ctx.node, gpu_only)
        except ClusterError as exc:
            return f"cannot list the pods of {ctx.node}: {exc}"
        if pods:
            return f"{len(pods)} evictable pod(s) still on {ctx.node}: " + ", ".join(
                _pod_key(p) for p in pods[:5]
            )
        return None


@action("report-node")
class ReportNode(Action):
    """Where the node stands at the end: schedulable or not, its conditions, what earlier
    steps produced (a bundle path). Read-only; its output is the run report's last line."""

    title = "Report the node's state"
    mutates = False
    harm = Harm.NONE
    timeout = 30.0

    def check(self, ctx: StepContext) -> str | None:
        return node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(notes=["reads the node and summarises the run's outputs"])

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        node = get_node(ctx)
        conditions = {
            str(c.get("type")): str(c.get("status"))
            for c in (node.get("status") or {}).get("conditions") or ()
            if isinstance(c, dict)
        }
        bundles = [str(o["bundle"]) for o in ctx.outputs.values() if o.get("bundle")]
        unhealthy = sorted(kind for kind, status in conditions.items() if _bad(kind, status))
        summary = (
            f"{ctx.node}: {'cordoned' if _unschedulable(node) else 'schedulable'}, "
            f"Ready={conditions.get('Ready', '?')}"
            + (f", not ok: {', '.join(unhealthy)}" if unhealthy else "")
            + (f"; bundle {bundles[-1]}" if bundles else "")
        )
        ctx.log(summary)
        return {
            "summary": summary,
            "unschedulable": _unschedulable(node),
            "conditions": conditions,
            "bundle": bundles[-1] if bundles else None,
        }


def _bad(kind: str, status: str) -> bool:
    """Pressure-style conditions are bad when True; the *Ready ones when not True."""
    if kind.endswith("Pressure") or kind == "NetworkUnavailable":
        return status == "True"
    return kind.endswith("Ready") and status != "True"
