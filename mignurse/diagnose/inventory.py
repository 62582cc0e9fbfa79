"""The GPU stack inventory: what each pool and each cluster runs, and where clusters differ.

Per pool (a Karpenter NodePool or a managed node group, as the fleet view groups GPU nodes),
every field is a spread over the pool's nodes: each value with the number of nodes that show
it, so a pool in the middle of an AMI roll shows both releases, never one picked at random.
What could not be known is said in words (`NO_LABEL`, `NOT_READ`, `NONE`, …), never guessed.

Where each field comes from:

- OS image, kernel, kubelet, containerd: the node's `status.nodeInfo` (osImage,
  kernelVersion, kubeletVersion, containerRuntimeVersion), as kubelet reports them.
- AMI: a managed node group's `eks.amazonaws.com/nodegroup-image` label, else the Karpenter
  NodeClaim's `status.imageID` (kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/
  nodeclaim_status.go). AMI ids are regional, so a combination is compared by OS image.
- NVIDIA driver: GPU feature discovery's labels `nvidia.com/cuda.driver-version.full`, else
  the deprecated `nvidia.com/cuda.driver.major`/`.minor`/`.rev` (NVIDIA/k8s-device-plugin
  v0.17.0 internal/lm/nvml.go newVersionLabeler; the standalone NVIDIA/gpu-feature-discovery
  releases before it wrote only the deprecated three).
- mig-manager, the DRA driver's kubelet plugin, the node monitoring agent: the image tag of
  each DaemonSet that runs on the node, as the DaemonSet controller decides it
  (`daemonsets.DaemonSetInfo.runs_on`).
- gpu-operator: its ClusterPolicy's chart label `app.kubernetes.io/version`, else the tag of
  the `nvidia-operator-validator` DaemonSet's image, which the chart pins to its own version
  (NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/templates/clusterpolicy.yaml
  `validator.version | default .Chart.AppVersion`).
- Karpenter's version and feature gates: the controller Deployment (`KarpenterSettings`).
- AMI release and node repair: a node group's `releaseVersion`, `amiType` and
  `nodeRepairConfig` (EKS API), Karpenter's `NodeRepair` gate.

Pure: built from a `DiagnosisInput` (and, for the combinations, the findings of its
diagnosis); the faces render it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mignurse.cluster.dra import DRA_PLUGIN_SELECTORS
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.findings import CRITICAL, Finding
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.model import Node

# The honest words for what is not known.
NO_LABEL = "no label"  # the node does not carry the label
NOT_READ = "not read"  # the source was not read (RBAC, an older bundle, EKS not asked)
NOT_REPORTED = "not reported"  # kubelet left the nodeInfo field empty
NONE = "none"  # read, and nothing of the kind runs there
# Neither its objects nor its controller were seen: "not installed" live, or left out of a
# bundle: the words claim no more than that.
NONE_SEEN = "none seen"
NO_NODECLAIM = "no NodeClaim"
# What says nothing of the value: a broken combination is not compared on it; nor on what
# a cluster itself writes for a value it could not tell.
UNKNOWN_WORDS = frozenset({NO_LABEL, NOT_READ, NOT_REPORTED, NO_NODECLAIM, NONE_SEEN})
CLUSTER_UNKNOWNS = frozenset({"", "n/a", "na", "unknown", "<none>", "null"})


def is_unknown(value: str) -> bool:
    """Whether a value tells nothing: one of mignurse's words for it, or N/A, unknown, …
    as the cluster wrote it."""
    return value in UNKNOWN_WORDS or value.strip().lower() in CLUSTER_UNKNOWNS


UNPOOLED = "(no pool)"  # as the fleet view calls GPU nodes outside any pool
KIND_WORDS = {"nodepool": "NodePool", "nodegroup": "node group", "auto": "Auto Mode", "": "none"}

# (key, what the faces call it): the per-node fields, in the order they are shown.
POOL_FIELDS: tuple[tuple[str, str], ...] = (
    ("osImage", "OS image"),
    ("ami", "AMI"),
    ("amiRelease", "AMI release"),
    ("kernel", "kernel"),
    ("kubelet", "kubelet"),
    ("containerd", "containerd"),
    ("driver", "NVIDIA driver"),
    ("migManager", "mig-manager"),
    ("draDriver", "DRA driver"),
    ("nodeMonitoringAgent", "node monitoring agent"),
    ("nodeRepair", "node repair"),
)
CLUSTER_FIELDS: tuple[tuple[str, str], ...] = (
    ("gpuOperator", "gpu-operator"),
    ("karpenter", "Karpenter"),
    ("karpenterFeatureGates", "Karpenter feature gates"),
)
FIELD_TITLES = dict(POOL_FIELDS + CLUSTER_FIELDS)
# What a broken combination is compared by: AMI ids are regional, the OS image names the
# release (docs.aws.amazon.com/AWSEC2/latest/UserGuide/AMIs.html: an AMI belongs to a Region).
COMBINATION_FIELDS = ("driver", "migManager", "osImage", "karpenter")

LABEL_NODEGROUP_IMAGE = "eks.amazonaws.com/nodegroup-image"
# NVIDIA/k8s-device-plugin v0.17.0 internal/lm/nvml.go newVersionLabeler
LABEL_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
LABELS_DRIVER_PARTS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
# gpu-operator v26.7.0 deployments/gpu-operator/values.yaml: migManager.image
MIG_MANAGER_IMAGE = "k8s-mig-manager"
# gpu-operator v26.7.0 assets/state-operator-validation/0500_daemonset.yaml; its image is
# `gpu-operator` from v26.x, `gpu-operator-validator` before (values.yaml validator.image)
VALIDATOR_DAEMONSET = "nvidia-operator-validator"
VALIDATOR_IMAGES = ("gpu-operator", "gpu-operator-validator")
# aws/eks-node-monitoring-agent v1.7.0 charts/eks-node-monitoring-agent/templates/daemonset.yaml
# and _helpers.tpl selectorLabels (its dcgm-server DaemonSet, same image, is k8s-app=dcgm-server)
NMA_NAME = "eks-node-monitoring-agent"
# The DRA driver's image names: kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 and
# NVIDIA/k8s-dra-driver-gpu v25.8.0 deployments/helm/*/values.yaml image.repository
DRA_IMAGE_WORDS = ("dra-driver-nvidia-gpu", "k8s-dra-driver-gpu", "k8s-dra-driver")

Spread = tuple[tuple[str, int], ...]  # (value, nodes), most nodes first


@dataclass(frozen=True)
class PoolInventory:
    pool: str
    kind: str  # nodepool | nodegroup | auto | ""
    nodes: int
    fields: Mapping[str, Spread]  # POOL_FIELDS key → its values over the pool's nodes

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "kind": self.kind,
            "nodes": self.nodes,
            "fields": {
                key: [{"value": value, "nodes": count} for value, count in self.fields[key]]
                for key, _title in POOL_FIELDS
            },
        }


@dataclass(frozen=True)
class StackValue:
    """A cluster-wide field's value and where it was read."""

    value: str
    source: str = ""

    def to_json(self) -> dict[str, str]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True)
class Combination:
    """What a node runs that a breakage may depend on: driver, mig-manager, OS image and
    Karpenter's version (COMBINATION_FIELDS)."""

    driver: str
    mig_manager: str
    os_image: str
    karpenter: str

    def values(self) -> tuple[str, str, str, str]:
        return (self.driver, self.mig_manager, self.os_image, self.karpenter)

    def words(self) -> str:
        return ", ".join(
            f"{FIELD_TITLES[key]} {value}"
            for key, value in zip(COMBINATION_FIELDS, self.values(), strict=True)
        )

    def to_json(self) -> dict[str, str]:
        return dict(zip(COMBINATION_FIELDS, self.values(), strict=True))


@dataclass(frozen=True)
class ClusterInventory:
    pools: tuple[PoolInventory, ...]
    stack: Mapping[str, tuple[StackValue, ...]]  # CLUSTER_FIELDS key → its values
    # what each GPU node runs, by node name, and its pool: for the combinations
    node_combinations: Mapping[str, tuple[str, Combination]] = field(default_factory=dict)
    critical: tuple[Finding, ...] = ()  # the cluster's critical findings, when diagnosed

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": {
                key: [v.to_json() for v in self.stack[key]] for key, _title in CLUSTER_FIELDS
            },
            "pools": [p.to_json() for p in self.pools],
            "criticalFindings": [
                {"id": f.id, "pool": f.nodepool, "nodes": list(f.nodes), "summary": f.summary}
                for f in self.critical
            ],
        }


# ------------------------------------------------------------------ one cluster


def inventory(inp: DiagnosisInput, findings: Iterable[Finding] = ()) -> ClusterInventory:
    """The inventory of one cluster (or bundle); `findings` (its diagnosis) keeps the
    critical ones, whose combinations `shared_combinations` looks for elsewhere."""
    daemonsets = inp.daemonsets
    stacks = _NodeStacks(daemonsets)
    karpenter = _karpenter_words(inp)
    per_pool: dict[str, list[Node]] = {}
    kinds: dict[str, str] = {}
    for node in inp.gpu_nodes:
        pool = node.pool or UNPOOLED
        per_pool.setdefault(pool, []).append(node)
        kinds.setdefault(pool, node.pool_kind)
    for name, nodepool in inp.snapshot.nodepools.items():
        if nodepool.requests_gpu:  # an empty GPU pool still belongs, as in the fleet view
            per_pool.setdefault(name, [])
            kinds.setdefault(name, "nodepool")
    pools = []
    combinations: dict[str, tuple[str, Combination]] = {}
    for pool, nodes in per_pool.items():
        kind = kinds[pool]
        # what the pool's repairer and EKS say hold for each of its nodes
        per_pool_fields = {
            "amiRelease": _ami_release(inp, pool, kind),
            "nodeRepair": _repair_words(inp, pool, kind),
        }
        rows = [{**_node_fields(inp, node, stacks), **per_pool_fields} for node in nodes]
        fields = {key: _spread(row[key] for row in rows) for key, _title in POOL_FIELDS}
        pools.append(PoolInventory(pool=pool, kind=kind, nodes=len(nodes), fields=fields))
        node_karpenter = karpenter if kind == "nodepool" else f"none ({KIND_WORDS.get(kind, kind)})"
        for node, row in zip(nodes, rows, strict=True):
            combinations[node.name] = (
                pool,
                Combination(row["driver"], row["migManager"], row["osImage"], node_karpenter),
            )
    pools.sort(key=lambda p: (p.pool == UNPOOLED, p.pool))
    return ClusterInventory(
        pools=tuple(pools),
        stack={
            "gpuOperator": _gpu_operator(inp),
            "karpenter": (StackValue(karpenter, _karpenter_source(inp)),),
            "karpenterFeatureGates": (_karpenter_gates(inp),),
        },
        node_combinations=combinations,
        critical=tuple(f for f in findings if f.severity == CRITICAL),
    )


class _NodeStacks:
    """The GPU stack's DaemonSets, found once: which of them run on a node."""

    def __init__(self, daemonsets: tuple[DaemonSetInfo, ...] | None) -> None:
        self.read = daemonsets is not None
        every = daemonsets or ()
        self.mig_manager = [d for d in every if _runs_image(d, (MIG_MANAGER_IMAGE,))]
        self.dra = [
            d
            for d in every
            if any(d.selected_by(s) for s in DRA_PLUGIN_SELECTORS)
            or _runs_image(d, DRA_IMAGE_WORDS)
        ]
        self.nma = [
            d
            for d in every
            if (d.name == NMA_NAME or d.pod_labels.get("app.kubernetes.io/name") == NMA_NAME)
            and _runs_image(d, (NMA_NAME,))
        ]

    def version(self, found: list[DaemonSetInfo], node: Node, images: tuple[str, ...]) -> str:
        """The tags of the DaemonSets in `found` that run on `node`, "none" if none does."""
        if not self.read:
            return NOT_READ
        tags = sorted(
            {_tag_words(d, images) for d in found if d.runs_on(node)},
        )
        return ", ".join(tags) if tags else NONE


def _node_fields(inp: DiagnosisInput, node: Node, stacks: _NodeStacks) -> dict[str, str]:
    return {
        "osImage": node.os_image or NOT_REPORTED,
        "ami": _ami(inp, node),
        "kernel": node.kernel or NOT_REPORTED,
        "kubelet": node.kubelet_version or NOT_REPORTED,
        "containerd": node.container_runtime or NOT_REPORTED,
        "driver": driver_version(node.labels),
        "migManager": stacks.version(stacks.mig_manager, node, (MIG_MANAGER_IMAGE,)),
        "draDriver": stacks.version(stacks.dra, node, DRA_IMAGE_WORDS),
        "nodeMonitoringAgent": stacks.version(stacks.nma, node, (NMA_NAME,)),
    }


def driver_version(labels: Mapping[str, str]) -> str:
    """The NVIDIA driver GPU feature discovery labelled the node with; `NO_LABEL` without."""
    full = labels.get(LABEL_DRIVER_FULL)
    if full:
        return full
    major, minor, rev = (labels.get(key) for key in LABELS_DRIVER_PARTS)
    if major is None or minor is None:
        return NO_LABEL
    return ".".join(part for part in (major, minor, rev) if part)  # rev is "" on X.Y drivers


def _ami(inp: DiagnosisInput, node: Node) -> str:
    image = node.labels.get(LABEL_NODEGROUP_IMAGE)
    if image:
        return image
    if node.pool_kind == "nodegroup":
        return NO_LABEL
    claim = inp.claims_by_node.get(node.name) or inp.claims_by_node.get(node.provider_id)
    if claim is None:
        return NO_NODECLAIM if node.pool_kind in ("nodepool", "auto") else NO_LABEL
    return claim.image_id or NOT_REPORTED


def _image_name(image: str) -> str:
    """`k8s-mig-manager` of `nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0@sha256:…`."""
    return image.split("@", 1)[0].rpartition("/")[2].partition(":")[0]


def _runs_image(daemonset: DaemonSetInfo, names: tuple[str, ...]) -> bool:
    return any(_image_name(c.image) in names for c in daemonset.containers)


def _tag_words(daemonset: DaemonSetInfo, names: tuple[str, ...]) -> str:
    """The tag of the DaemonSet's image of that name (the first such container's); a
    digest-pinned image without a tag says so."""
    for container in daemonset.containers:
        if _image_name(container.image) in names:
            if container.tag:
                return container.tag
            digest = container.image.partition("@")[2]
            return f"untagged ({digest[:19]}…)" if digest else "untagged"
    # a DRA plugin found by its pods' labels, whatever its image is called
    first = daemonset.containers[0] if daemonset.containers else None
    if first is None:
        return "no container"
    return first.tag or _image_name(first.image) or "untagged"


def _spread(values: Iterable[str]) -> Spread:
    counts = Counter(values)
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _karpenter_words(inp: DiagnosisInput) -> str:
    if not inp.snapshot.karpenter:
        return NONE_SEEN
    if inp.karpenter is None:
        return NOT_READ
    return inp.karpenter.version or "version unknown (no image tag, no chart label)"


def _karpenter_source(inp: DiagnosisInput) -> str:
    if inp.karpenter is None:
        return ""
    return "controller Deployment"


def _karpenter_gates(inp: DiagnosisInput) -> StackValue:
    settings: KarpenterSettings | None = inp.karpenter
    if not inp.snapshot.karpenter:
        return StackValue(NONE_SEEN)
    if settings is None:
        return StackValue(NOT_READ)
    return StackValue(
        settings.feature_gates or "none set (defaults)",
        "controller Deployment",
    )


def _ami_release(inp: DiagnosisInput, pool: str, kind: str) -> str:
    """The EKS optimized AMI release a managed node group runs and its AMI type, as EKS
    describes the group (`releaseVersion`, `amiType`: EKS API reference, Nodegroup). A
    NodePool's AMI is chosen by its EC2NodeClass, which mignurse does not read."""
    if kind == "auto":
        return "chosen by EKS Auto Mode"
    if kind != "nodegroup":
        return f"{NOT_READ} (EC2NodeClass)" if kind == "nodepool" else NO_LABEL
    group = inp.nodegroups.get(pool)
    if group is None:
        return NOT_READ
    release = str(group.raw.get("releaseVersion") or "")
    ami_type = str(group.raw.get("amiType") or "")
    if ami_type == "CUSTOM" and not release:
        return "none (custom AMI)"
    if not release:
        return NOT_REPORTED
    return f"{release} ({ami_type})" if ami_type else release


def _repair_words(inp: DiagnosisInput, pool: str, kind: str) -> str:
    if kind == "nodegroup":
        group = inp.nodegroups.get(pool)
        return nodegroup_repair_words(group) if group is not None else NOT_READ
    if kind == "nodepool":
        on = inp.karpenter.node_repair if inp.karpenter is not None else None
        if on is None:
            return NOT_READ
        return f"Karpenter NodeRepair {'on' if on else 'off'}"
    if kind == "auto":
        return "always on (Auto Mode)"
    return NONE


def nodegroup_repair_words(group: NodeGroupRepair) -> str:
    """A managed node group's `nodeRepairConfig` in a few words."""
    if not group.enabled:
        return "node group auto repair off"
    parts = ["node group auto repair on"]
    if group.overrides:
        parts.append(
            f"{len(group.overrides)} override(s): "
            + "; ".join(
                f"{o.condition}/{o.reason} {o.action} after {int(o.wait.total_seconds() // 60)}m"
                for o in group.overrides
            )
        )
    if group.max_unhealthy_count is not None:
        parts.append(f"stops above {group.max_unhealthy_count} unhealthy node(s)")
    if group.max_unhealthy_percentage is not None:
        parts.append(f"stops above {group.max_unhealthy_percentage}% unhealthy")
    return ", ".join(parts)


def _gpu_operator(inp: DiagnosisInput) -> tuple[StackValue, ...]:
    policy = inp.cluster_policy
    if isinstance(policy, Mapping):
        meta = policy.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        version = labels.get("app.kubernetes.io/version") if isinstance(labels, Mapping) else None
        if isinstance(version, str) and version:
            return (StackValue(version, "ClusterPolicy label app.kubernetes.io/version"),)
    if inp.daemonsets is None:
        return (StackValue(NOT_READ),)
    found = sorted(
        {
            (_tag_words(d, VALIDATOR_IMAGES), f"DaemonSet {d.namespace}/{d.name} image")
            for d in inp.daemonsets
            if d.name == VALIDATOR_DAEMONSET and _runs_image(d, VALIDATOR_IMAGES)
        }
    )
    if found:
        return tuple(StackValue(tag, source) for tag, source in found)
    if isinstance(policy, Mapping):
        return (StackValue("installed, no version", "ClusterPolicy without a version label"),)
    return (StackValue(NONE_SEEN, "no ClusterPolicy, no nvidia-operator-validator"),)


# ------------------------------------------------------------------ several clusters


# What the JSON calls each cluster: its name (the context, or the bundle's) → the
# kubeconfig cluster entry it is on (None where that is not known: a bundle), so that its
# records read as those of `nodes` and `diagnose`: `context` and `cluster`.
ClusterEntries = Mapping[str, "str | None"]


def _named(name: str, entries: ClusterEntries | None) -> dict[str, Any]:
    return {"context": name, "cluster": (entries or {}).get(name)}


@dataclass(frozen=True)
class Holder:
    """Where a value runs: a cluster (by its name: its context, or its bundle's), and for
    a pool's field the pool and its nodes."""

    cluster: str
    pool: str = ""  # "" for a cluster-wide field
    nodes: int = 0

    def to_json(self, entries: ClusterEntries | None = None) -> dict[str, Any]:
        if not self.pool:
            return _named(self.cluster, entries)
        return {**_named(self.cluster, entries), "pool": self.pool, "nodes": self.nodes}


@dataclass(frozen=True)
class Difference:
    """A field that does not read the same everywhere: each value and where it runs."""

    field: str  # a POOL_FIELDS or CLUSTER_FIELDS key
    values: tuple[tuple[str, tuple[Holder, ...]], ...]

    @property
    def title(self) -> str:
        return FIELD_TITLES[self.field]

    @property
    def between_clusters(self) -> bool:
        """Whether some cluster runs a value another does not run at all."""
        seen: dict[str, set[str]] = {}
        for value, holders in self.values:
            for holder in holders:
                seen.setdefault(holder.cluster, set()).add(value)
        return len({frozenset(v) for v in seen.values()}) > 1

    def to_json(self, entries: ClusterEntries | None = None) -> dict[str, Any]:
        return {
            "field": self.field,
            "betweenClusters": self.between_clusters,
            "values": [
                {"value": value, "where": [h.to_json(entries) for h in holders]}
                for value, holders in self.values
            ],
        }


def differences(clusters: Sequence[tuple[str, ClusterInventory]]) -> list[Difference]:
    """The fields whose values differ between clusters, between the pools of a cluster, or
    within a pool (a rolling update), each value with the clusters and pools that run it;
    the fields in the order they are shown, cluster-wide ones first."""
    found: list[Difference] = []
    for key, _title in CLUSTER_FIELDS:
        by_value: dict[str, list[Holder]] = {}
        for name, inv in clusters:
            for stack_value in inv.stack.get(key, ()):
                by_value.setdefault(stack_value.value, []).append(Holder(name))
        if len(by_value) > 1:
            found.append(_difference(key, by_value))
    for key, _title in POOL_FIELDS:
        pool_values: dict[str, list[Holder]] = {}
        for name, inv in clusters:
            for pool in inv.pools:
                for value, count in pool.fields.get(key, ()):
                    pool_values.setdefault(value, []).append(Holder(name, pool.pool, count))
        if len(pool_values) > 1:
            found.append(_difference(key, pool_values))
    return found


def _difference(key: str, by_value: Mapping[str, list[Holder]]) -> Difference:
    """Values held by most nodes (or clusters) first."""
    ranked = sorted(
        by_value.items(),
        key=lambda item: (-sum(h.nodes or 1 for h in item[1]), item[0]),
    )
    return Difference(key, tuple((value, tuple(holders)) for value, holders in ranked))


@dataclass(frozen=True)
class SharedCombination:
    """A combination that a critical finding's nodes run, and where else it runs."""

    cluster: str  # its name: the context, or the bundle's
    findings: tuple[str, ...]  # ids of the critical findings about these nodes
    pool: str
    combination: Combination
    nodes: int  # of the broken pool's nodes the findings name, that run it
    unknown: tuple[str, ...]  # COMBINATION_FIELDS not known on the broken side: not compared
    elsewhere: tuple[Holder, ...]  # other pools (any cluster) running the same combination

    def to_json(self, entries: ClusterEntries | None = None) -> dict[str, Any]:
        return {
            **_named(self.cluster, entries),
            "findings": list(self.findings),
            "pool": self.pool,
            "nodes": self.nodes,
            "combination": self.combination.to_json(),
            "notCompared": list(self.unknown),
            "alsoRunningIn": [h.to_json(entries) for h in self.elsewhere],
        }


def shared_combinations(
    clusters: Sequence[tuple[str, ClusterInventory]],
) -> list[SharedCombination]:
    """For each cluster's critical findings, the combination (driver, mig-manager, OS image,
    Karpenter) their nodes run, and the other pools of every cluster that run the same one:
    "which clusters run the combination that just broke one of them". A part not known on
    the broken side (not read, no label) is left out of the comparison and named."""
    # every cluster's pools by what their nodes run: combination → (cluster, pool) → nodes
    running: dict[tuple[str, ...], dict[tuple[str, str], int]] = {}
    for name, inv in clusters:
        for pool, combination in inv.node_combinations.values():
            held = running.setdefault(combination.values(), {})
            held[(name, pool)] = held.get((name, pool), 0) + 1
    shared: list[SharedCombination] = []
    for name, inv in clusters:
        broken: dict[tuple[str, Combination], tuple[list[str], set[str]]] = {}
        for finding in inv.critical:
            named = [n for n in finding.nodes if n in inv.node_combinations]
            if not named and finding.nodepool:
                named = [
                    n for n, (pool, _c) in inv.node_combinations.items() if pool == finding.nodepool
                ]
            for node in named:
                ids, on_nodes = broken.setdefault(inv.node_combinations[node], ([], set()))
                if finding.id not in ids:
                    ids.append(finding.id)
                on_nodes.add(node)
        for (pool, combination), (ids, broken_nodes) in broken.items():
            wanted = combination.values()
            unknown = tuple(
                f for f, v in zip(COMBINATION_FIELDS, wanted, strict=True) if is_unknown(v)
            )
            elsewhere: list[Holder] = []
            # a combination of which nothing is known matches everything: it is not compared
            for values, held in running.items() if len(unknown) < len(wanted) else ():
                if not all(
                    (want == have and not is_unknown(have)) or is_unknown(want)
                    for want, have in zip(wanted, values, strict=True)
                ):
                    continue
                for (cluster, other_pool), nodes in held.items():
                    if (cluster, other_pool) != (name, pool):
                        elsewhere.append(Holder(cluster, other_pool, nodes))
            shared.append(
                SharedCombination(
                    cluster=name,
                    findings=tuple(ids),
                    pool=pool,
                    combination=combination,
                    nodes=len(broken_nodes),
                    unknown=unknown,
                    elsewhere=tuple(_merged(elsewhere)),
                )
            )
    return shared


def _merged(holders: list[Holder]) -> list[Holder]:
    """One holder per (cluster, pool), nodes summed; by cluster then pool."""
    total: dict[tuple[str, str], int] = {}
    for holder in holders:
        key = (holder.cluster, holder.pool)
        total[key] = total.get(key, 0) + holder.nodes
    return [Holder(c, p, n) for (c, p), n in sorted(total.items())]
