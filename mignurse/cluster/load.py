"""One-shot reads of the cluster for the command-line faces (`nodes`, later `diagnose`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from mignurse.cluster.client import (
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    ClusterClient,
    Forbidden,
)
from mignurse.cluster.dra import load_dra, node_claims
from mignurse.cluster.snapshot import Snapshot
from mignurse.model import Event, Node, NodeClaim, NodePool, Pod, with_gpu_claims
from mignurse.untrusted import LIST_ITEMS

KARPENTER_GROUP = ("karpenter.sh", "v1")
KARPENTER_ABSENT_NOTICE = (
    "Karpenter CRDs (karpenter.sh/v1) not found on this cluster: NodeClaim and NodePool "
    "features are off"
)


@dataclass
class Loaded:
    snapshot: Snapshot
    notices: list[str] = field(default_factory=list)


def karpenter_available(client: ClusterClient) -> bool:
    return client.api_group_available(*KARPENTER_GROUP)


def load_snapshot(
    client: ClusterClient,
    *,
    label_selector: str | None = None,
    with_events: bool = False,
    event_kinds: tuple[str, ...] = (),
) -> Loaded:
    """Nodes (required), NodeClaims and NodePools (when Karpenter is there and RBAC allows),
    DRA ResourceSlices and ResourceClaims (when `resource.k8s.io` is served), events (when
    asked; with `event_kinds`, only the events about objects of those kinds, which a
    100,000-event cluster answers far faster). Optional parts that fail become notices, not
    errors."""
    notices: list[str] = []
    nodes = client.list(NODES, Node.from_api, label_selector=label_selector)
    karpenter = karpenter_available(client)
    claims: dict[str, NodeClaim] = {}
    pools: dict[str, NodePool] = {}
    if not karpenter:
        notices.append(KARPENTER_ABSENT_NOTICE)
    else:
        try:
            claims = {c.name: c for c in client.list(NODECLAIMS, NodeClaim.from_api).items}
            pools = {p.name: p for p in client.list(NODEPOOLS, NodePool.from_api).items}
        except Forbidden as exc:
            notices.append(f"{exc}; Karpenter details are left out")
    dra = load_dra(client)
    if dra.notice:
        notices.append(dra.notice)
    events: tuple[Event, ...] = ()
    if with_events:
        try:
            # Only about objects of these kinds (a field selector each), or all of them. A
            # list past LIST_ITEMS is cut there, not refused: some events beat none.
            listings = [
                client.list(EVENTS, Event.from_api, cut=True, **selector)
                for selector in (
                    [{"field_selector": f"involvedObject.kind={kind}"} for kind in event_kinds]
                    or [{}]
                )
            ]
            events = tuple(e for listing in listings for e in listing.items)
            if any(listing.cut for listing in listings):
                notices.append(
                    f"only the first {LIST_ITEMS.value():,} events of a list "
                    f"were read ({LIST_ITEMS.env} raises the limit): some findings may miss "
                    "their evidence"
                )
        except Forbidden as exc:
            notices.append(f"{exc}; events are left out")
    snapshot = Snapshot(
        nodes={n.name: n for n in nodes.items},
        nodeclaims=claims,
        nodepools=pools,
        events=events,
        karpenter=karpenter,
        taken_at=client.server_now(),
        resource_slices=dra.slices,
        resource_claims=dra.claims,
        dra_plugin_nodes=dra.plugin_nodes,
    )
    return Loaded(snapshot, notices)


def node_pods(client: ClusterClient, node_name: str) -> list[Pod]:
    """Every pod bound to one node, across namespaces, GPU users first: a pod using a
    ResourceClaim that holds NVIDIA DRA devices counts as one."""
    pods = client.list(PODS, Pod.from_api, field_selector=f"spec.nodeName={node_name}").items
    if any(p.claims for p in pods):
        # claims RBAC refuses stay unread: their pods show without GPU use, as before DRA
        with contextlib.suppress(Forbidden):
            pods = with_gpu_claims(pods, node_claims(client, node_name))
    pods.sort(key=lambda p: (not p.uses_gpu, p.namespace, p.name))
    return pods
