"""Everything a rule may look at, gathered before any rule runs (rules do no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from mignurse.cluster.history import Lifecycle, Transition
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.facts import repair_tolerations
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.model import Event, GpuPluginPod, MigState, Node, NodeClaim
from mignurse.model.fields import parse_version
from mignurse.untrusted import json_value

if TYPE_CHECKING:  # annotations only: each parser loads where its text is read
    from mignurse.evidence import (
        CgroupInfo,
        CloudInitStatus,
        GpuHealthReport,
        JournalParse,
        OsRelease,
    )

T = TypeVar("T")


# The pause-node-repair runbook's record on the Karpenter Deployment: who paused, when, and
# the exact prior feature-gate strings resume-node-repair restores.
REPAIR_PAUSED_ANNOTATION = "mignurse.io/node-repair-paused"


@dataclass(frozen=True)
class KarpenterSettings:
    """What the Karpenter controller Deployment says about repair (docs/repair.md)."""

    node_repair: bool | None  # None: the Deployment could not be read
    feature_gates: str = ""
    version: str = ""  # the controller image tag, else the chart's app version label
    interruption_queue: str = ""  # INTERRUPTION_QUEUE: every instance shutdown is echoed
    paused_by: str = ""  # from the pause-node-repair runbook's record, when repair is paused
    paused_at: str = ""
    paused_run: str = ""  # the run that paused it (`mignurse runs RUN_ID`)

    @classmethod
    def from_deployment(cls, raw: Mapping[str, Any]) -> KarpenterSettings:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        containers = ((raw.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "containers"
        ) or []
        index = controller_container_index(containers)
        controller = containers[index] if index is not None else {}
        gates = queue = ""
        for env in controller.get("env") or ():
            if isinstance(env, dict) and env.get("name") == "FEATURE_GATES":
                gates = str(env.get("value") or "")
            if isinstance(env, dict) and env.get("name") == "INTERRUPTION_QUEUE":
                queue = str(env.get("value") or "")
        for arg in controller.get("args") or ():
            if isinstance(arg, str) and arg.startswith("--feature-gates="):
                gates = arg.split("=", 1)[1]
            if isinstance(arg, str) and arg.startswith("--interruption-queue="):
                queue = arg.split("=", 1)[1]
        image = str(controller.get("image") or "").split("@", 1)[0]  # drop a digest
        name, _, tag = image.rpartition(":")
        version = tag if name and "/" not in tag else ""
        if parse_version(version) is None:
            # A digest-pinned or mirrored image: the chart still labels its app version.
            version = str(labels.get("app.kubernetes.io/version") or version)
        paused_by = paused_at = paused_run = ""
        try:
            record = json_value(str(annotations.get(REPAIR_PAUSED_ANNOTATION) or "null"))
        except ValueError:
            record = None
        if isinstance(record, dict):
            paused_by, paused_at = str(record.get("by") or "?"), str(record.get("at") or "")
            paused_run = str(record.get("run") or "")
        return cls(
            node_repair=gate_value(gates, "NodeRepair"),
            feature_gates=gates,
            version=version,
            interruption_queue=queue,
            paused_by=paused_by,
            paused_at=paused_at,
            paused_run=paused_run,
        )

    @property
    def version_tuple(self) -> tuple[int, ...] | None:
        return parse_version(self.version)


def controller_container_index(containers: list[Any]) -> int | None:
    """Which container of the Deployment is Karpenter's controller: the chart's `controller`
    (controller.containerName), else the one running a karpenter image; None if neither."""
    for i, ctr in enumerate(containers):
        if isinstance(ctr, dict) and ctr.get("name") == "controller":
            return i
    for i, ctr in enumerate(containers):
        if isinstance(ctr, dict) and "karpenter" in str(ctr.get("image", "")):
            return i
    return None


PARSEBOOL_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def gate_setting(feature_gates: str, gate: str = "NodeRepair") -> bool | None:
    """The value a `Name=bool,…` string gives one gate, the last token winning as in
    cliflag.MapStringBool; None when the gate is absent (kubernetes-sigs/karpenter
    v1.14.1 pkg/operator/options/options.go)."""
    value: bool | None = None
    for token in feature_gates.split(","):
        name, _, raw = token.partition("=")
        if name.strip() == gate:
            # strconv.ParseBool, as MapStringBool.Set parses each value (k8s.io/component-base
            # cli/flag/map_string_bool.go): "1", "t", "TRUE" are true too. Any other spelling
            # stops Karpenter at start, so nothing repairs.
            value = raw.strip() in PARSEBOOL_TRUE
    return value


def gate_value(feature_gates: str, gate: str) -> bool:
    """A gate's value; absent means its default, false for NodeRepair (docs/repair.md)."""
    return bool(gate_setting(feature_gates, gate))


@dataclass(frozen=True)
class NodeEvidence:
    """The node-side files of a bundle for one node, parsed. Missing files are None."""

    node: str
    journals: Mapping[str, JournalParse] = field(default_factory=dict)  # kubelet, containerd…
    cloud_init: CloudInitStatus | None = None
    cgroup: CgroupInfo | None = None
    os_release: OsRelease | None = None
    mig: MigState | None = None
    gpu_health: GpuHealthReport | None = None  # nvidia-smi's remapped rows, retired pages, ECC
    problems: tuple[str, ...] = ()  # per-source failures from the node manifest / errors.txt
    layout: str = "mignurse"  # or the other tool's bundle: eks-log-collector, logdog
    instance_id: str = ""  # EC2 instance id, when the bundle names it


@dataclass(frozen=True)
class History:
    """What the local history remembers beyond the API server (already read, in memory)."""

    lifecycles: tuple[Lifecycle, ...] = ()
    transitions: tuple[Transition, ...] = ()
    events: tuple[Event, ...] = ()

    def of_node(self, node: str, claims: Iterable[str] = ()) -> History:
        """What this history holds about one Node (what its timeline reads): its events,
        transitions and lifecycle, the lifecycles of the NodeClaims it saw become it, and
        the events about those and about `claims` (the Node's NodeClaims now). Found through
        an index built once per history (`indexed`), not a pass over every recorded object
        for each node shown: at 5,000 nodes that pass took the app's UI thread 50 ms or more
        for each node the cursor reached (benchmarks/bench_app.py)."""
        index = self._index
        became = index.lifecycles.get(("NodeClaim→", node), [])
        names = dict.fromkeys([*claims, *(lifecycle.name for lifecycle in became)])
        events = index.events.get(("Node", node), [])
        for name in names:
            events = events + index.events.get(("NodeClaim", name), [])
        return History(
            lifecycles=(*index.lifecycles.get(("Node", node), ()), *became),
            transitions=tuple(index.transitions.get(("Node", node), ())),
            events=tuple(sorted(events, key=lambda event: index.order[id(event)])),
        )

    def indexed(self) -> History:
        """This history with the index `of_node` reads built now (on the caller's thread)."""
        _ = self._index
        return self

    @cached_property
    def _index(self) -> _HistoryIndex:
        index = _HistoryIndex()
        for lifecycle in self.lifecycles:
            index.lifecycles.setdefault((lifecycle.kind, lifecycle.name), []).append(lifecycle)
            if lifecycle.kind == "NodeClaim" and lifecycle.node_name:
                index.lifecycles.setdefault(("NodeClaim→", lifecycle.node_name), []).append(
                    lifecycle
                )
        for transition in self.transitions:
            index.transitions.setdefault((transition.kind, transition.name), []).append(transition)
        for n, event in enumerate(self.events):
            if event.involved_kind in ("Node", "NodeClaim"):
                index.events.setdefault((event.involved_kind, event.involved_name), []).append(
                    event
                )
                index.order[id(event)] = n
        return index


@dataclass
class _HistoryIndex:
    """A history's objects by (kind, name); a NodeClaim's lifecycle also under
    ("NodeClaim→", the Node it became); each event's place in the history (by id)."""

    lifecycles: dict[tuple[str, str], list[Lifecycle]] = field(default_factory=dict)
    transitions: dict[tuple[str, str], list[Transition]] = field(default_factory=dict)
    events: dict[tuple[str, str], list[Event]] = field(default_factory=dict)
    order: dict[int, int] = field(default_factory=dict)


NEVER_BEFORE = datetime.min.replace(tzinfo=UTC)


# Events about Pods (a pod's Scheduled, Pulled, Created, Started, …) are two thirds of a
# cluster's events, and no rule reads them: every rule judges Nodes, NodeClaims and their pools.
UNJUDGED_KIND = "Pod"


@dataclass(frozen=True)
class MergedEvents:
    # The snapshot's events plus those only the history still holds, one copy each (the
    # newest occurrence wins), oldest first, about anything but Pods: `events.all_events`.
    events: list[Event]
    # Events about each Node, one copy each (the API server's first), oldest first.
    by_node: Mapping[str, tuple[Event, ...]]


@dataclass(frozen=True)
class DiagnosisInput:
    snapshot: Snapshot
    now: datetime
    history: History = field(default_factory=History)
    node_evidence: Mapping[str, NodeEvidence] = field(default_factory=dict)
    karpenter: KarpenterSettings | None = None
    cluster_policy: Mapping[str, Any] | None = None  # NVIDIA ClusterPolicy, raw
    # The ConfigMaps mig-manager may read its mig-parted file from (`gpu.clusterconfig`), raw;
    # None: not read (refused, or a bundle from before they were collected).
    mig_configmaps: tuple[Mapping[str, Any], ...] | None = ()
    nodegroups: Mapping[str, NodeGroupRepair] = field(default_factory=dict)  # by name
    # Every DaemonSet of the cluster (the node monitoring agent and its DCGM server,
    # mig-manager, the DRA kubelet plugin): what the pre-flight findings read. None: not read.
    daemonsets: tuple[DaemonSetInfo, ...] | None = None
    # The GPU stack's plugin pods: NVIDIA's device plugin and the DRA driver's kubelet
    # plugin, every one the cluster (or bundle) shows, with the containers that keep failing.
    gpu_plugin_pods: tuple[GpuPluginPod, ...] = ()

    # Indexes built once per input: rules look things up per node, and a scan of 100,000
    # events for each of 5,000 nodes would take minutes (benchmarks/bench_diagnose.py).

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """A derived view several rules share (e.g. the replacements), computed once."""
        cache: dict[str, Any] = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        result: T = cache[key]
        return result

    @cached_property
    def repair_tolerations(self) -> Mapping[tuple[str, str], timedelta]:
        """Karpenter's repair policies at the version the controller runs (newest if unknown)."""
        version = self.karpenter.version_tuple if self.karpenter is not None else None
        return repair_tolerations(version)

    @cached_property
    def gpu_nodes(self) -> tuple[Node, ...]:
        """The snapshot's GPU nodes, sorted by pool then name (`Snapshot.gpu_nodes`), chosen
        once for every rule."""
        return tuple(self.snapshot.gpu_nodes())

    @cached_property
    def claims_by_node(self) -> Mapping[str, NodeClaim]:
        """NodeClaims by the Node they became and by provider id (`Snapshot.claims_by_node`)."""
        return self.snapshot.claims_by_node()

    @cached_property
    def nodes_by_pool(self) -> Mapping[str, tuple[Node, ...]]:
        """The snapshot's nodes by pool (NodePool or node group; "" for none), in snapshot
        order: the 20% guard and the loop rules count a pool's nodes for every node of it."""
        index: dict[str, list[Node]] = {}
        for node in self.snapshot.nodes.values():
            index.setdefault(node.pool, []).append(node)
        return {pool: tuple(nodes) for pool, nodes in index.items()}

    @cached_property
    def merged_events(self) -> MergedEvents:
        """The snapshot's and the history's events in one pass: at 5,000 nodes there are
        200,000 of them, and those about Pods are passed over before anything is filed
        (benchmarks/bench_diagnose.py)."""
        merged: dict[str, tuple[datetime, Event]] = {}
        held_by_key = merged.get
        # (namespace, name, uid) → the first copy of each event about a Node, per source
        from_history: dict[tuple[str, str, str], Event] = {}
        from_snapshot: dict[tuple[str, str, str], Event] = {}
        for events, about_nodes in (
            (self.history.events, from_history),
            (self.snapshot.events, from_snapshot),
        ):
            keep_first = about_nodes.setdefault
            for event in events:
                kind = event.involved_kind
                if kind == UNJUDGED_KIND:
                    continue
                key = event.uid or f"{event.namespace}/{event.name}"
                when = event.last_seen or event.first_seen or NEVER_BEFORE
                held = held_by_key(key)
                if held is None or when >= held[0]:
                    merged[key] = (when, event)
                if kind == "Node":
                    keep_first((event.namespace, event.name, event.uid), event)
        by_node: dict[str, list[Event]] = {}
        for event in from_snapshot.values():
            by_node.setdefault(event.involved_name, []).append(event)
        for node_key, event in from_history.items():
            if node_key not in from_snapshot:
                by_node.setdefault(event.involved_name, []).append(event)
        return MergedEvents(
            # Stable: equal times keep the order they were first seen in, history first.
            events=[event for _, event in sorted(merged.values(), key=itemgetter(0))],
            by_node={
                name: tuple(
                    sorted(found, key=lambda e: (e.first_seen or e.last_seen or self.now, e.reason))
                )
                for name, found in by_node.items()
            },
        )

    @property
    def events_by_node(self) -> Mapping[str, tuple[Event, ...]]:
        """Events about each Node, from the API server and the history, deduplicated (the API
        server's copy first), oldest first."""
        return self.merged_events.by_node

    @cached_property
    def transitions_by_name(self) -> Mapping[tuple[str, str], tuple[Transition, ...]]:
        """History transitions by (kind, object name), in recorded order."""
        index: dict[tuple[str, str], list[Transition]] = {}
        for transition in self.history.transitions:
            index.setdefault((transition.kind, transition.name), []).append(transition)
        return {key: tuple(found) for key, found in index.items()}

    @cached_property
    def lifecycles_by_name(self) -> Mapping[tuple[str, str], tuple[Lifecycle, ...]]:
        """History lifecycles by (kind, object name): names are reused, uids tell them apart."""
        index: dict[tuple[str, str], list[Lifecycle]] = {}
        for lifecycle in self.history.lifecycles:
            index.setdefault((lifecycle.kind, lifecycle.name), []).append(lifecycle)
        return {key: tuple(found) for key, found in index.items()}
