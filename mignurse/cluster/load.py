"""One-shot reads of the cluster for the command-line faces (`nodes`, later `diagnose`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mignurse import joins
from mignurse.cluster.client import (
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    ClusterClient,
    Forbidden,
    Listing,
    NotFound,
)
from mignurse.cluster.dra import load_dra, node_claims
from mignurse.cluster.snapshot import Snapshot
from mignurse.model import Event, Node, NodeClaim, NodePool, Pod, with_gpu_claims
from mignurse.untrusted import LIST_ITEMS

T = TypeVar("T")

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


def begun(read: Callable[[], T]) -> Callable[[], T]:
    """`read` started on its own thread; the function returned waits for it and gives its
    value, or raises what it raised. The reads of one snapshot wait on the API server side
    by side: a round trip each, not one after another (five for `mignurse nodes`)."""
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, read()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="mignurse-read", daemon=True)
    thread.start()

    def result() -> T:
        joins.join(thread)
        done, value = outcome[0]
        if not done:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    return result


def _events(client: ClusterClient, selector: dict[str, str]) -> Callable[[], Listing[Event]]:
    return lambda: client.list(EVENTS, Event.from_api, cut=True, **selector)


def load_snapshot(
    client: ClusterClient,
    *,
    label_selector: str | None = None,
    with_events: bool = False,
    event_kinds: tuple[str, ...] = (),
    events_not_about: str = "",
) -> Loaded:
    """Nodes (required), NodeClaims and NodePools (when Karpenter is there and RBAC allows),
    DRA ResourceSlices and ResourceClaims (when `resource.k8s.io` is served), events (when
    asked; with `event_kinds`, only the events about objects of those kinds, which a
    100,000-event cluster answers far faster; else, with `events_not_about`, all but those
    about objects of that kind). Optional parts that fail become notices, not errors."""
    notices: list[str] = []
    # Side by side; read back, and refused, in the order they were read one by one.
    nodes_read = begun(lambda: client.list(NODES, Node.from_api, label_selector=label_selector))
    # NodeClaims and NodePools are asked for at once, not after the API group's discovery
    # says Karpenter is there: a round trip less. Where a list is refused or not found, the
    # discovery says which it was (`_karpenter_lists`).
    claims_read = begun(lambda: client.list(NODECLAIMS, NodeClaim.from_api).items)
    pools_read = begun(lambda: client.list(NODEPOOLS, NodePool.from_api).items)
    dra_read = begun(lambda: load_dra(client))
    # Only about objects of these kinds (a field selector each), or all of them but one kind
    # (`!=`, which the API server's field selectors take: k8s.io/apimachinery v0.34.0
    # pkg/fields/selector.go `parseSelector`; events select on involvedObject.kind,
    # kubernetes/kubernetes v1.34.0 pkg/registry/core/event/strategy.go `ToSelectableFields`).
    # A list past LIST_ITEMS is cut there, not refused: some events beat none.
    selectors = [{"field_selector": f"involvedObject.kind={kind}"} for kind in event_kinds]
    if not selectors:
        not_about = f"involvedObject.kind!={events_not_about}" if events_not_about else None
        selectors = [{"field_selector": not_about} if not_about else {}]
    event_reads = [begun(_events(client, s)) for s in selectors] if with_events else []
    nodes = nodes_read()
    karpenter, claims, pools = _karpenter_lists(client, claims_read, pools_read, notices)
    dra = dra_read()
    if dra.notice:
        notices.append(dra.notice)
    events: tuple[Event, ...] = ()
    if with_events:
        try:
            listings = [read() for read in event_reads]
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


def _karpenter_lists(
    client: ClusterClient,
    claims_read: Callable[[], list[NodeClaim]],
    pools_read: Callable[[], list[NodePool]],
    notices: list[str],
) -> tuple[bool, dict[str, NodeClaim], dict[str, NodePool]]:
    """Whether Karpenter is there, its NodeClaims and NodePools, from the two lists begun
    beside the nodes; as asking the discovery first said it. A refused list (403) or one
    not found (404) leaves the question to the discovery: the API server authorizes a
    request before it routes it, so a user RBAC refuses on karpenter.sh is refused the same
    on a cluster that serves no such group (kubernetes/kubernetes v1.34.0
    staging/src/k8s.io/apiserver/pkg/server/config.go `DefaultBuildHandlerChain`: the
    authorization filter wraps the handler that finds the resource). Where the group is
    not there: no Karpenter, as before; where it is, a refusal is one notice and a list not
    found is the error it always was."""
    try:
        claims = {c.name: c for c in claims_read()}
        pools = {p.name: p for p in pools_read()}
    except (Forbidden, NotFound) as exc:
        _waited_out(pools_read)
        if not karpenter_available(client):
            notices.append(KARPENTER_ABSENT_NOTICE)
            return False, {}, {}
        if isinstance(exc, NotFound):
            raise
        notices.append(f"{exc}; Karpenter details are left out")
        return True, {}, {}
    return True, claims, pools


def _waited_out(read: Callable[[], object]) -> None:
    """Waits for a read begun beside one that failed: its answer, or error, is not used."""
    with contextlib.suppress(Exception):
        read()


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
