"""Whether replacing a node brings a new one, forecast from the cluster before anything changes.

Decisions (kubernetes-sigs/karpenter v1.14.1):
- Karpenter launches capacity only for pods: `pkg/controllers/provisioning/provisioner.go`
  `Schedule` takes the pending pods (`GetPendingPods`: `pkg/utils/pod/scheduling.go`
  `IsProvisionable`, marked Unschedulable by kube-scheduler, not bound, no DaemonSet or mirror
  pod) and the reschedulable pods of nodes being deleted (`IsReschedulable`), and schedules
  them against the nodes that stay before it creates NodeClaims for what is left. Deleting a
  NodeClaim launches nothing by itself.
- replace-instance evicts the pods before it deletes the NodeClaim, so the pods that can need
  a new node are the ones their controllers recreate (a ReplicaSet, StatefulSet, Job, …): a
  DaemonSet or mirror pod is not evicted, a finished pod is not recreated, and a bare pod is
  evicted and gone. Each is placed on another node that stays (Ready, schedulable, not being
  deleted) when it fits there: node selector and required node affinity, untolerated
  NoSchedule/NoExecute taints, and resource requests against what the node's pods already
  request (the filters kube-scheduler applies first; pod affinity and topology spread are not
  judged, and the forecast says so).
- Pods already pending count when they would fit a node like this one: the replacement is
  launched for them as well.
- A managed node group or Auto Scaling group keeps its desired capacity: EC2 Auto Scaling
  launches an instance in place of the terminated one whatever runs on it.
- Whether the new node fails the same way is the diagnosis's to say: a finding on the node
  or its pool whose cause a new instance inherits (the MIG reconfiguration that stops kubelet
  during bootstrap, an image without working DCGM, a repair loop) is named in the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mignurse.cluster.client import NODEPOOLS, NODES, PODS, ClusterClient, ClusterError, NotFound
from mignurse.model import Node
from mignurse.model import scheduling as fit

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NOT_RECREATED = ("DaemonSet", "Node")
# A node Karpenter is taking away: no new pod lands there (pkg/apis/v1/taints.go).
DISRUPTED_TAINT = "karpenter.sh/disrupted"
SHOWN_PODS = 4


@dataclass(frozen=True)
class Forecast:
    """Whether a replacement node is expected, why (one line), and what else to know."""

    comes: bool
    why: str
    needing: tuple[str, ...] = ()  # namespace/name of the pods a new node is launched for
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"comes": self.comes, "why": self.why, "needing": list(self.needing)}


@dataclass
class _Host:
    """A node that stays, with what its pods request already."""

    name: str
    labels: Mapping[str, str]
    taints: list[dict[str, Any]]
    allocatable: fit.Resources
    used: fit.Resources = field(default_factory=dict)


def _owner_kind(pod: Mapping[str, Any]) -> str:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            return str(owner.get("kind") or "")
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return str(owners[0].get("kind") or "") if owners and isinstance(owners[0], dict) else ""


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _mirror(pod: Mapping[str, Any]) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def moving_pods(pods: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(the pods a drain evicts that their controllers recreate, {why others stay or go: n})."""
    moving: list[dict[str, Any]] = []
    others: dict[str, int] = {}
    for pod in pods:
        kind = _owner_kind(pod)
        if _mirror(pod) or kind == "Node":
            why = "mirror pod"
        elif kind == "DaemonSet":
            why = "DaemonSet pod"
        elif _finished(pod):
            why = "finished pod"
        elif not kind:
            why = "bare pod (evicted, not recreated)"
        else:
            moving.append(pod)
            continue
        others[why] = others.get(why, 0) + 1
    return moving, others


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def _admits(host: _Host, pod: Mapping[str, Any]) -> bool:
    spec = _spec(pod)
    if fit.untolerated(spec.get("tolerations") or [], host.taints):
        return False
    labels = host.labels
    return fit.selector_matches(spec.get("nodeSelector"), labels) and fit.node_affinity_matches(
        spec.get("affinity"), labels
    )


def _place(host: _Host, pod: Mapping[str, Any]) -> bool:
    """Put the pod on the host when it fits there (its requests then count as used)."""
    request = fit.pod_requests(pod)
    if not _admits(host, pod) or not fit.fits(request, host.allocatable, host.used):
        return False
    fit.add(host.used, request)
    return True


def _staying(raw: Mapping[str, Any], leaving: str) -> _Host | None:
    node = Node.from_api(raw)
    if node.name == leaving or node.deleting is not None or node.unschedulable:
        return None
    if node.ready_status != "Ready":
        return None
    taints = [t for t in (raw.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
    if any(t.get("key") == DISRUPTED_TAINT for t in taints):
        return None
    return _Host(
        node.name,
        dict(node.labels),
        taints,
        fit.resources((raw.get("status") or {}).get("allocatable")),
    )


def shape_of(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a new node like this one offers: its labels, taints and allocatable (JSON-able,
    kept in the plan so a resumed run can still judge pending pods once the node is gone)."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    return {
        "labels": dict(meta.get("labels") or {}),
        "taints": [
            t
            for t in spec.get("taints") or []
            if isinstance(t, dict) and t.get("key") != DISRUPTED_TAINT
        ],
        "allocatable": dict(status.get("allocatable") or {}),
    }


def _like(shape: Mapping[str, Any], daemon: fit.Resources) -> _Host:
    """A fresh node shaped like the old one, its DaemonSet pods' requests already taken."""
    return _Host(
        "(new node)",
        dict(shape.get("labels") or {}),
        list(shape.get("taints") or []),
        fit.resources(shape.get("allocatable")),
        dict(daemon),
    )


def pending_for(
    pods: Iterable[dict[str, Any]],
    shape: Mapping[str, Any],
    daemon: fit.Resources | None = None,
) -> list[str]:
    """The pending pods (not bound, not terminating, no DaemonSet's) that a node shaped like
    `shape` could take beside its DaemonSet pods' requests (`daemon`)."""
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if _spec(pod).get("nodeName") or meta.get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") != "Pending":
            continue
        if _owner_kind(pod) in NOT_RECREATED or _mirror(pod):
            continue
        if _place(_like(shape, daemon or {}), pod):
            found.append(_key(pod))
    return sorted(found)


def _gpus_requested(pod: Mapping[str, Any]) -> float:
    return sum(v for k, v in fit.pod_requests(pod).items() if k.startswith("nvidia.com/"))


def _requests_words(pod: Mapping[str, Any]) -> str:
    request = fit.pod_requests(pod)
    gpu = {k: v for k, v in request.items() if k.startswith("nvidia.com/") and v > 0}
    shown = gpu or {k: v for k, v in request.items() if k in ("cpu", "memory") and v > 0}
    return ", ".join(f"{k}: {fit.format_quantity(k, v)}" for k, v in sorted(shown.items()))


def _listed(keys: list[str], words: Mapping[str, str] | None = None) -> str:
    shown = [k + (f" ({words[k]})" if words and words.get(k) else "") for k in keys[:SHOWN_PODS]]
    more = f" and {len(keys) - SHOWN_PODS} more" if len(keys) > SHOWN_PODS else ""
    return ", ".join(shown) + more


CANDIDATE_READS = 100  # nodes whose pods are read one node at a time; past it, all pods once


def _pods(client: ClusterClient, field_selector: str) -> list[dict[str, Any]]:
    return [p for page, _v in client.list_pages(PODS, field_selector=field_selector) for p in page]


def _hosts_for(
    client: ClusterClient, moving: list[dict[str, Any]], leaving: str
) -> dict[str, _Host]:
    """The nodes that stay and could take one of `moving` (selectors, taints, allocatable
    before what runs there), with what their pods request already. A GPU pod's candidates are
    the few nodes with that GPU resource, so their pods are read node by node; a cluster where
    more could take them has all its pods read once instead."""
    hosts: dict[str, _Host] = {}
    for page, _version in client.list_pages(NODES):
        for node in page:
            host = _staying(node, leaving)
            if host is not None and any(_could_take(host, pod) for pod in moving):
                hosts[host.name] = host
    if len(hosts) <= CANDIDATE_READS:
        for host in hosts.values():
            for pod in _pods(client, f"spec.nodeName={host.name}"):
                if not _finished(pod):
                    fit.add(host.used, fit.pod_requests(pod))
        return hosts
    for page, _version in client.list_pages(PODS):
        for pod in page:
            bound = str(_spec(pod).get("nodeName") or "")
            if bound in hosts and not _finished(pod):
                fit.add(hosts[bound].used, fit.pod_requests(pod))
    return hosts


def _could_take(host: _Host, pod: Mapping[str, Any]) -> bool:
    return _admits(host, pod) and fit.fits(fit.pod_requests(pod), host.allocatable, {})


def forecast_karpenter(client: ClusterClient, raw: dict[str, Any], pool: str) -> Forecast:
    """Whether deleting this Karpenter node's NodeClaim, after its pods were evicted, makes
    Karpenter launch a node. Reads the cluster; ClusterError goes to the caller."""
    name = str((raw.get("metadata") or {}).get("name") or "")
    on_node = _pods(client, f"spec.nodeName={name}")
    pending = _pods(client, "spec.nodeName=")  # not bound to any node
    moving, others = moving_pods(on_node)
    daemon: fit.Resources = {}
    for pod in on_node:
        if _owner_kind(pod) == "DaemonSet" and not _finished(pod):
            fit.add(daemon, fit.pod_requests(pod))
    hosts = _hosts_for(client, moving, name) if moving else {}
    # Largest GPU requests first, as a bin packer would: a fair chance for every pod to fit.
    order = sorted(moving, key=lambda p: -_gpus_requested(p))
    needing: list[dict[str, Any]] = []
    for pod in order:
        if not any(_place(host, pod) for host in hosts.values()):
            needing.append(pod)
    waiting = pending_for(pending, shape_of(raw), daemon)
    notes = list(_unjudged(moving)) + list(_limits(client, pool, raw))
    stay = ", ".join(f"{n} {why}" for why, n in sorted(others.items()))
    if needing or waiting:
        keys = [_key(p) for p in needing]
        words = {_key(p): _requests_words(p) for p in needing}
        parts = []
        if keys:
            parts.append(f"{len(keys)} evicted pod(s) fit on no other node: {_listed(keys, words)}")
        if waiting:
            parts.append(f"{len(waiting)} pending pod(s) would fit it: {_listed(waiting)}")
        return Forecast(
            True,
            f"expected: Karpenter launches a node in NodePool {pool} for pods that need one ("
            + "; ".join(parts)
            + ")",
            tuple(keys + waiting),
            tuple(notes),
        )
    if not moving:
        what = stay or "no pods"
        why = (
            f"none expected: no pod on {name} needs a new node ({what}); Karpenter launches "
            "nodes only for pods that cannot be scheduled"
        )
    else:
        why = (
            f"none expected: the {len(moving)} pod(s) its controllers recreate fit on other "
            f"nodes ({_listed([_key(p) for p in moving])}); Karpenter launches nodes only for "
            "pods that cannot be scheduled"
        )
    return Forecast(False, why, (), tuple(notes))


def forecast_group(group: str) -> Forecast:
    return Forecast(
        True,
        f"expected: node group {group}'s Auto Scaling group keeps its desired capacity and "
        "launches an instance in place of the terminated one",
    )


def _unjudged(pods: list[dict[str, Any]]) -> Iterable[str]:
    spread = [
        _key(p)
        for p in pods
        if (_spec(p).get("affinity") or {}).get("podAffinity")
        or (_spec(p).get("affinity") or {}).get("podAntiAffinity")
        or _spec(p).get("topologySpreadConstraints")
    ]
    if spread:
        yield (
            "pod affinity, anti-affinity and topology spread are not judged by the forecast "
            f"({_listed(spread)}): they may need a new node where it says none"
        )


def _limits(client: ClusterClient, pool: str, raw: Mapping[str, Any]) -> Iterable[str]:
    """A note when the NodePool's limits leave no room for another node like this one until
    this one is gone (Karpenter counts a deleting NodeClaim until it is)."""
    try:
        nodepool = client.get(NODEPOOLS, pool)
    except (NotFound, ClusterError):
        return
    limits = fit.resources((nodepool.get("spec") or {}).get("limits"))
    used = fit.resources((nodepool.get("status") or {}).get("resources"))
    capacity = fit.resources((raw.get("status") or {}).get("capacity"))
    full = [
        f"{k} {fit.format_quantity(k, used.get(k, 0.0))} of {fit.format_quantity(k, v)}"
        for k, v in sorted(limits.items())
        if used.get(k, 0.0) + capacity.get(k, 0.0) > v + 1e-9
    ]
    if full:
        yield (
            f"NodePool {pool} is at its limits ({', '.join(full)} in use): the new node "
            "launches only once this one's capacity is released"
        )


# The findings whose cause a new instance of the same pool inherits (its image, its user data,
# the operator's settings), and what that means for the replacement.
RECURRING = {
    "mig-hook-kubelet-restart": "the new node boots with the same MIG settings and mig-manager, "
    "which stop kubelet during its bootstrap the same way",
    "accelerated-hardware-not-ready": "the new node runs the same image and monitoring, so its "
    "AcceleratedHardwareReady goes False the same way",
    "node-repair-loop": "nodes of this pool are replaced again and again for the same condition",
    "notready-loop": "the node was Ready briefly, then NotReady for good: a cause in its image, "
    "user data or GPU operator settings strikes the new node too",
}
# Suspected, not shown: the plan says "may".
SUSPECTED = ("notready-loop",)


def recurring_causes(client: ClusterClient, node: str, pool: str) -> list[str]:
    """Findings of the live diagnosis, on this node or its pool, whose cause a replacement
    inherits; each as one line. A diagnosis that cannot be read is said as such."""
    from mignurse.diagnose.engine import all_rules, diagnose
    from mignurse.diagnose.sources.live import load_live
    from mignurse.paths import history_file

    rules = [(name, rule) for name, rule in all_rules() if name in RECURRING]
    try:
        # The findings that recur read the nodes' and NodeClaims' events only: the pods'
        # events, most of a busy cluster's, are left on the server.
        gathered = load_live(
            client,
            history_path=history_file(client.info, reading=True),
            event_kinds=("Node", "NodeClaim"),
        )
    except ClusterError as exc:
        return [f"whether the cause recurs on the new node is unknown: {exc}"]
    found = diagnose(gathered.to_input(client.server_now()), rules=rules).findings
    lines = []
    for finding in found:
        own = node in finding.nodes
        if not own and not (pool and finding.nodepool == pool):
            continue
        if finding.id == "accelerated-hardware-not-ready" and "replace-instance" in (
            finding.runbooks
        ):
            continue  # the GPU itself: a new instance is the cure
        will = "may" if finding.id in SUSPECTED else "will"
        how = "the same way" if own else f"as other nodes of {pool} did"
        lines.append(
            f"the replacement {will} fail {how}: {finding.id}: {RECURRING[finding.id]} "
            f"({finding.summary})"
        )
    return lines
