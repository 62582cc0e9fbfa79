"""A point-in-time view of the cluster's GPU capacity, and the live state that feeds it.

`Snapshot` is what rules, tables and bundles read: parsed models plus the time they were
taken. `ClusterState` is the thread-safe, watch-fed store behind the app's live view; it
hands out snapshots and the names of nodes that changed since the last look.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from mignurse.model import (
    NVIDIA_INSTANCE_FAMILIES,
    Event,
    Node,
    NodeClaim,
    NodeDevices,
    NodePool,
    ResourceClaim,
    ResourceSlice,
    dra_devices_by_node,
    instance_family,
)

GPU_SOURCE_DEVICE_PLUGIN = "device-plugin"
GPU_SOURCE_DRA = "dra"


@dataclass(frozen=True)
class Snapshot:
    nodes: Mapping[str, Node]
    nodeclaims: Mapping[str, NodeClaim] = field(default_factory=dict)
    nodepools: Mapping[str, NodePool] = field(default_factory=dict)
    events: tuple[Event, ...] = ()
    karpenter: bool = False
    taken_at: datetime | None = None
    # Dynamic Resource Allocation (resource.k8s.io): every driver's slices, the claims that
    # hold devices, and the nodes where the NVIDIA DRA driver's kubelet plugin runs.
    resource_slices: tuple[ResourceSlice, ...] = ()
    resource_claims: tuple[ResourceClaim, ...] = ()
    dra_plugin_nodes: frozenset[str] = frozenset()

    @cached_property
    def dra_devices(self) -> Mapping[str, NodeDevices]:
        """The NVIDIA DRA driver's GPUs and MIG devices, by node name."""
        return dra_devices_by_node(self.resource_slices)

    def gpu_source(self, node: Node) -> str:
        """How the node's GPUs reach pods: `dra` when the NVIDIA DRA driver publishes them or
        runs there, else `device-plugin` (extended resources in allocatable, or nothing)."""
        if node.name in self.dra_devices or node.name in self.dra_plugin_nodes:
            return GPU_SOURCE_DRA
        return GPU_SOURCE_DEVICE_PLUGIN

    def claims_by_node(self) -> dict[str, NodeClaim]:
        """NodeClaims keyed by the name of the Node they became, and by provider id."""
        index: dict[str, NodeClaim] = {}
        for claim in self.nodeclaims.values():
            if claim.node_name:
                index[claim.node_name] = claim
            if claim.provider_id:
                index[claim.provider_id] = claim
        return index

    def gpu_nodes(self) -> list[Node]:
        """GPU nodes, sorted by pool then name.

        A node counts when it carries GPU resources or labels, is an NVIDIA instance type,
        publishes NVIDIA DRA devices or runs the DRA driver, or its NodeClaim (or NodePool)
        asked for GPUs: a node that lost its GPU resources is exactly the one to show."""
        claims = self.claims_by_node()
        gpu_pools = {name for name, pool in self.nodepools.items() if pool.requests_gpu}
        dra = set(self.dra_devices) | self.dra_plugin_nodes
        chosen = [
            node
            for node in self.nodes.values()
            if node.name in dra
            or is_gpu_node(node, claims.get(node.name) or claims.get(node.provider_id), gpu_pools)
        ]
        chosen.sort(key=lambda n: (n.pool, n.name))
        return chosen

    def launching_claims(self) -> list[NodeClaim]:
        """GPU NodeClaims with no Node yet: capacity still on its way."""
        gpu_pools = {name for name, pool in self.nodepools.items() if pool.requests_gpu}
        return sorted(
            (
                c
                for c in self.nodeclaims.values()
                if c.launching and (c.requests_gpu or c.pool in gpu_pools or _gpu_type(c))
            ),
            key=lambda c: (c.pool, c.name),
        )


def _gpu_type(claim: NodeClaim) -> bool:
    return instance_family(claim.instance_type) in NVIDIA_INSTANCE_FAMILIES


def is_gpu_node(node: Node, claim: NodeClaim | None, gpu_pools: Iterable[str] = ()) -> bool:
    if node.has_gpu_hint:
        return True
    if claim is not None and claim.requests_gpu:
        return True
    return bool(node.pool) and node.pool in set(gpu_pools)


_EPOCH = datetime.fromtimestamp(0).astimezone()


Listener = Callable[[str, str, list[Any]], None]

PARSERS: dict[str, Any] = {
    "nodes": Node.from_api,
    "nodeclaims": NodeClaim.from_api,
    "nodepools": NodePool.from_api,
    "events": Event.from_api,
    "resourceslices": ResourceSlice.from_api,
}


EventKeys = tuple[str, str] | set[tuple[str, str]]  # one event's key, or several


class ClusterState:
    """Live objects kept current by watches, safe to read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, Node] = {}
        self._nodeclaims: dict[str, NodeClaim] = {}
        self._nodepools: dict[str, NodePool] = {}
        self._events: dict[tuple[str, str], Event] = {}
        # (involved kind, involved name) → event keys: a node's detail without a full scan.
        # An object with one event holds that event's key alone, the very tuple `_events`
        # is keyed by (a set costs 216 bytes, and a list of a million events is mostly
        # objects with one: a pod's Scheduled, a node's one warning).
        self._events_by_object: dict[tuple[str, str], EventKeys] = {}
        self._slices: dict[str, ResourceSlice] = {}
        self._claims: tuple[ResourceClaim, ...] = ()  # re-read with each assessment
        self._plugin_nodes: frozenset[str] = frozenset()
        self._dirty_nodes: set[str] = set()
        self._dirty_other = False
        self.karpenter = False
        self.generation = 0  # bumps on every change; cheap "anything new?" check
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(plural, change, models)` after every change, outside the lock.

        `change` is "LIST" (a full re-list: `models` is everything there is now) or the
        watch event type ADDED / MODIFIED / DELETED with the one changed model. Listeners
        run on the watch threads and must be quick (queue the work, e.g. history)."""
        self._listeners.append(listener)

    def _notify(self, plural: str, change: str, models: list[Any]) -> None:
        for listener in self._listeners:
            listener(plural, change, models)

    # -- writes (watch threads) -------------------------------------------------------

    def replace(self, plural: str, models: list[Any]) -> None:
        """Install the parsed result of a (re-)list: everything not in it is gone."""
        with self._lock:
            if plural == "nodes":
                fresh_nodes = {n.name: n for n in models}
                changed = set(self._nodes) ^ set(fresh_nodes)
                changed |= {
                    name
                    for name, node in fresh_nodes.items()
                    if name in self._nodes
                    and self._nodes[name].resource_version != node.resource_version
                }
                self._nodes = fresh_nodes
                self._dirty_nodes |= changed
            elif plural == "nodeclaims":
                self._nodeclaims = {c.name: c for c in models}
                self._dirty_other = True
            elif plural == "nodepools":
                self._nodepools = {p.name: p for p in models}
                self._dirty_other = True
            elif plural == "resourceslices":
                fresh_slices = {p.name: p for p in models}
                for piece in (*self._slices.values(), *models):
                    if piece.node_name:
                        self._dirty_nodes.add(piece.node_name)
                self._slices = fresh_slices
            elif plural == "events":
                self._events = {}
                self._events_by_object = {}
                for event in models:
                    key = (event.namespace, event.name)
                    self._events[key] = event
                    self._index_event((event.involved_kind, event.involved_name), key)
                self._dirty_other = True
            self.generation += 1
        self._notify(plural, "LIST", models)

    def apply(self, plural: str, change_type: str, raw: dict[str, Any]) -> None:
        """Apply one watch event (ADDED / MODIFIED / DELETED)."""
        if change_type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        deleted = change_type == "DELETED"
        model: Any
        with self._lock:
            if plural == "nodes":
                node = model = Node.from_api(raw)
                if deleted:
                    self._nodes.pop(node.name, None)
                else:
                    self._nodes[node.name] = node
                self._dirty_nodes.add(node.name)
            elif plural == "nodeclaims":
                claim = model = NodeClaim.from_api(raw)
                if deleted:
                    self._nodeclaims.pop(claim.name, None)
                else:
                    self._nodeclaims[claim.name] = claim
                if claim.node_name:
                    self._dirty_nodes.add(claim.node_name)
                self._dirty_other = True
            elif plural == "nodepools":
                pool = model = NodePool.from_api(raw)
                if deleted:
                    self._nodepools.pop(pool.name, None)
                else:
                    self._nodepools[pool.name] = pool
                self._dirty_other = True
            elif plural == "resourceslices":
                piece = model = ResourceSlice.from_api(raw)
                if deleted:
                    self._slices.pop(piece.name, None)
                else:
                    self._slices[piece.name] = piece
                if piece.node_name:
                    self._dirty_nodes.add(piece.node_name)
            elif plural == "events":
                event = model = Event.from_api(raw)
                about, key = (event.involved_kind, event.involved_name), event.key
                if deleted:
                    self._events.pop(key, None)
                    held = self._events_by_object.get(about)
                    if isinstance(held, set):
                        held.discard(key)
                    elif held == key:
                        del self._events_by_object[about]
                else:
                    self._events[key] = event
                    self._index_event(about, key)
                if event.involved_kind == "Node":
                    self._dirty_nodes.add(event.involved_name)
                self._dirty_other = True
            else:
                return
            self.generation += 1
        self._notify(plural, change_type, [model])

    def _index_event(self, about: tuple[str, str], key: tuple[str, str]) -> None:
        held = self._events_by_object.get(about)
        if held is None:
            self._events_by_object[about] = key
        elif isinstance(held, set):
            held.add(key)
        elif held != key:
            self._events_by_object[about] = {held, key}

    def set_dra_usage(self, claims: Iterable[ResourceClaim], plugin_nodes: Iterable[str]) -> None:
        """What is read again with each assessment rather than watched: the ResourceClaims
        that hold devices and the nodes running the DRA driver's kubelet plugin."""
        with self._lock:
            changed = set(self._plugin_nodes) ^ set(plugin_nodes)
            self._claims = tuple(claims)
            self._plugin_nodes = frozenset(plugin_nodes)
            self._dirty_nodes |= changed

    # -- reads (UI thread, CLI) -------------------------------------------------------

    def snapshot(self, taken_at: datetime | None = None) -> Snapshot:
        with self._lock:
            return Snapshot(
                nodes=dict(self._nodes),
                nodeclaims=dict(self._nodeclaims),
                nodepools=dict(self._nodepools),
                events=tuple(self._events.values()),
                karpenter=self.karpenter,
                taken_at=taken_at,
                resource_slices=tuple(self._slices.values()),
                resource_claims=self._claims,
                dra_plugin_nodes=self._plugin_nodes,
            )

    def node(self, name: str) -> Node | None:
        with self._lock:
            return self._nodes.get(name)

    def node_names(self) -> list[str]:
        """Every Node's name, sorted, without copying the rest (events are 100,000 at scale)."""
        with self._lock:
            names = list(self._nodes)
        return sorted(names)

    def nodeclaim(self, name: str) -> NodeClaim | None:
        with self._lock:
            return self._nodeclaims.get(name)

    def node_events(self, name: str) -> list[Event]:
        """Events about one Node, oldest first, without scanning every event."""
        return self.events_about("Node", name)

    def events_about(self, kind: str, name: str) -> list[Event]:
        """Events about one object, oldest first, without scanning every event."""
        with self._lock:
            held = self._events_by_object.get((kind, name))
            keys = held if isinstance(held, set) else () if held is None else (held,)
            found = [self._events[k] for k in keys if k in self._events]
        # a set's order changes per process: same-second ties go by name (it carries the time)
        found.sort(key=lambda e: (e.last_seen or e.first_seen or _EPOCH, e.key))
        return found

    def node_view(self, name: str, taken_at: datetime | None = None) -> Snapshot:
        """A snapshot of one node, its NodeClaims and the events about them: enough for
        its timeline, at the cost of one node rather than the cluster."""
        with self._lock:
            node = self._nodes.get(name)
            claims = {
                c.name: c
                for c in self._nodeclaims.values()
                if c.node_name == name
                or (node and node.provider_id and c.provider_id == node.provider_id)
            }
            slices = tuple(p for p in self._slices.values() if p.node_name == name)
            plugin_nodes = self._plugin_nodes & {name}
        events = self.node_events(name)
        for claim in claims:
            events += self.events_about("NodeClaim", claim)
        return Snapshot(
            nodes={name: node} if node else {},
            nodeclaims=claims,
            events=tuple(events),
            karpenter=self.karpenter,
            taken_at=taken_at,
            resource_slices=slices,
            dra_plugin_nodes=plugin_nodes,
        )

    def take_changes(self) -> tuple[set[str], bool]:
        """Names of nodes changed since the last call, and whether anything else changed."""
        with self._lock:
            nodes, self._dirty_nodes = self._dirty_nodes, set()
            other, self._dirty_other = self._dirty_other, False
        return nodes, other

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {
                "nodes": len(self._nodes),
                "nodeclaims": len(self._nodeclaims),
                "nodepools": len(self._nodepools),
                "events": len(self._events),
            } | ({"resourceslices": len(self._slices)} if self._slices else {})
