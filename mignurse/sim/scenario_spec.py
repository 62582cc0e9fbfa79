"""The typed, immutable spec a scenario file becomes, and the units its fields are written in.

Every dataclass here is what `mignurse.sim.scenario.parse_scenario` returns and what the
controllers read: a pool (`PoolSpec`), its lifecycles and steps, its existing nodes and
workload, a managed node group's repair settings, the timeline and the Karpenter install.
Durations are parsed and printed here (`parse_duration`, `format_duration`). See
docs/scenarios.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NMA_CONDITIONS = (
    "AcceleratedHardwareReady",
    "KernelReady",
    "StorageReady",
    "NetworkingReady",
    "ContainerRuntimeReady",
)
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


_DURATION = re.compile(r"^(-)?((\d+(\.\d+)?)(ms|s|m|h|d))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """`90s`, `10m`, `1h30m`, `20d`, `-5m`, or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if not _DURATION.match(text):
        raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 10m, 1h30m, 20d)")
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """Go-style duration for API fields (`720h`, `10m`, `30s`)."""
    seconds = int(seconds)
    if seconds % 3600 == 0 and seconds:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0 and seconds:
        return f"{seconds // 60}m"
    return f"{seconds}s"


# --------------------------------------------------------------------------- the typed spec


@dataclass(frozen=True)
class ConditionSpec:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class EventSpec:
    reason: str
    message: str
    type: str = "Normal"
    source: str = "kubelet"


@dataclass(frozen=True)
class TaintSpec:
    key: str
    effect: str
    value: str | None = None

    def to_api(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class Step:
    """One change to a node: a lifecycle step (`after` launch) or a timeline action."""

    after: float = 0.0
    ready: bool | None = None
    reason: str | None = None
    message: str | None = None
    conditions: tuple[ConditionSpec, ...] = ()
    labels: tuple[tuple[str, str | None], ...] = ()
    taints: tuple[TaintSpec, ...] = ()
    remove_taints: tuple[str, ...] = ()
    allocatable: tuple[tuple[str, str | None], ...] = ()
    kubelet: str | None = None  # restart | stop | start
    nma_restart: bool = False
    events: tuple[EventSpec, ...] = ()
    line: int = 0
    plugin_crash: PluginCrashSpec | None = None  # the node's GPU plugin starts crash-looping


@dataclass(frozen=True)
class PluginCrashSpec:
    """The node's GPU plugin (device plugin, or the DRA driver's kubelet plugin on a DRA
    pool) crash-looping: how its last run ended, as its container status shows it."""

    message: str = ""  # lastState.terminated.message: the container's termination message
    exit_code: int = 1
    restarts: int = 5


@dataclass(frozen=True)
class LifecycleScript:
    """How a node booted from `image` comes up: its scripted steps (Ready or not after so
    long, conditions, labels, taints, a kubelet restart), as the scenario writes them."""

    image: str | None
    steps: tuple[Step, ...]
    gpu_resources: bool = True


@dataclass(frozen=True)
class ExistingNodes:
    count: int
    age: float
    image: str | None
    os: str | None
    labels: tuple[tuple[str, str], ...] = ()
    steps: tuple[Step, ...] | None = None  # None: the pool lifecycle for the image
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    namespace: str
    pods_per_node: int
    image: str
    # nvidia.com/gpu, nvidia.com/mig-1g.10gb, … (None: CPU only); on a DRA pool the
    # DeviceClass its ResourceClaim asks for: gpu.nvidia.com or mig.nvidia.com
    resource: str | None
    per_pod: int
    pdb_min_available: int | str | None = None
    pdb_max_unavailable: int | str | None = None
    replicas: int | None = None  # the Deployment's replicas (default: nodes × podsPerNode)
    profile: str | None = None  # DRA, mig.nvidia.com: the MIG profile its claim selects


@dataclass(frozen=True)
class RepairOverride:
    """One `nodeRepairConfigOverrides` item (EKS API NodeRepairConfigOverrides)."""

    node_monitoring_condition: str
    node_unhealthy_reason: str
    min_repair_wait_time_mins: int
    repair_action: str  # Replace | Reboot | NoAction

    def to_api(self) -> dict[str, Any]:
        return {
            "nodeMonitoringCondition": self.node_monitoring_condition,
            "nodeUnhealthyReason": self.node_unhealthy_reason,
            "minRepairWaitTimeMins": self.min_repair_wait_time_mins,
            "repairAction": self.repair_action,
        }


@dataclass(frozen=True)
class NodeRepairSpec:
    """A managed node group's `nodeRepairConfig` (EKS API NodeRepairConfig)."""

    enabled: bool
    max_unhealthy_count: int | None = None
    max_unhealthy_percentage: int | None = None
    max_parallel_count: int | None = None
    max_parallel_percentage: int | None = None
    overrides: tuple[RepairOverride, ...] = ()

    def to_api(self) -> dict[str, Any]:
        """The fields that were set, as DescribeNodegroup returns them."""
        out: dict[str, Any] = {"enabled": self.enabled}
        for key, value in (
            ("maxUnhealthyNodeThresholdCount", self.max_unhealthy_count),
            ("maxUnhealthyNodeThresholdPercentage", self.max_unhealthy_percentage),
            ("maxParallelNodesRepairedCount", self.max_parallel_count),
            ("maxParallelNodesRepairedPercentage", self.max_parallel_percentage),
        ):
            if value is not None:
                out[key] = value
        if self.overrides:
            out["nodeRepairConfigOverrides"] = [o.to_api() for o in self.overrides]
        return out


@dataclass(frozen=True)
class PoolSpec:
    kind: str  # "nodepool" (Karpenter) | "nodegroup" (EKS managed node group)
    name: str
    instance_type: str
    capacity_type: str
    zones: tuple[str, ...]
    os: str
    image: str
    nodes: int
    node_monitoring_agent: bool
    mig_config: str | None
    mig_strategy: str
    taints: tuple[TaintSpec, ...]
    labels: tuple[tuple[str, str], ...]
    launch_after: float
    register_after: float
    replacement_delay: float
    termination_grace_period: float | None
    expire_after: str
    consolidation_policy: str
    consolidate_after: str
    budgets: tuple[tuple[tuple[str, Any], ...], ...]
    nodeclass: str
    daemonsets: bool
    existing: tuple[ExistingNodes, ...]
    lifecycles: tuple[LifecycleScript, ...]
    workload: WorkloadSpec | None
    line: int = 0
    node_repair: NodeRepairSpec | None = None  # managed node groups only
    release_version: str | None = None  # managed node groups: the AMI release
    ami_type: str | None = None  # managed node groups: EKS amiType
    limits: tuple[tuple[str, str], ...] | None = None  # NodePool spec.limits (None: default)
    gpu_scheduling: str = "device-plugin"  # device-plugin | dra (the NVIDIA DRA driver)
    mig_applied_by: str = "mig-manager"  # mig-manager | userdata (before kubelet, every boot)
    # the DRA driver's chart values on a `dra` pool: `featureGates` (FEATURE_GATES env of the
    # plugin) and `selectorLabelsOverride` (replaces the component label of its pods)
    dra_feature_gates: str = ""
    dra_selector_labels: tuple[tuple[str, str], ...] | None = None

    @property
    def dra(self) -> bool:
        return self.gpu_scheduling == "dra"

    def lifecycle_for(self, image: str) -> LifecycleScript:
        for lc in self.lifecycles:
            if lc.image == image:
                return lc
        for lc in self.lifecycles:
            if lc.image is None:
                return lc
        return DEFAULT_LIFECYCLE


DEFAULT_LIFECYCLE = LifecycleScript(image=None, steps=(Step(after=50.0, ready=True),))


@dataclass(frozen=True)
class NodeRef:
    name: str | None = None
    newest: str | None = None  # pool name
    oldest: str | None = None  # pool name


@dataclass(frozen=True)
class TimelineItem:
    at: float
    node: NodeRef | None
    step: Step | None
    action: str | None  # deleteNodeClaim | spotInterrupt | consolidate | scale | cordon
    argument: str | None  # consolidate reason, scale pool
    nodes: int | None  # scale target
    line: int = 0


@dataclass(frozen=True)
class KarpenterSpec:
    version: str
    node_repair: bool
    feature_gates: str
    namespace: str = "kube-system"
    interruption_queue: bool = True  # Helm `settings.interruptionQueue` set (the usual set-up)


@dataclass(frozen=True)
class RbacDeny:
    verb: str
    resource: str
    namespace: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    cluster_name: str
    region: str
    kubernetes_version: str
    seed: int
    warmup: float
    event_ttl: float
    event_dedupe: float
    karpenter: KarpenterSpec | None
    rbac_user: str
    rbac_deny: tuple[RbacDeny, ...]
    pools: tuple[PoolSpec, ...]
    timeline: tuple[TimelineItem, ...]
    source: str
    generate: tuple[tuple[str, Any], ...] | None = None
    extras: dict[str, Any] = field(default_factory=dict, compare=False)
    resource_api_versions: tuple[str, ...] = ()  # resource.k8s.io versions served, preferred first
    # DaemonSets served as written beside the ones derived from pods (e.g. the node monitoring
    # agent's dcgm-server where its affinity lets it run nowhere)
    daemonsets: tuple[dict[str, Any], ...] = ()
    # v1 ConfigMaps and the GPU operator's nvidia.com/v1 ClusterPolicies, served as written
    # (read only); the first ClusterPolicy says which ConfigMap holds mig-manager's file
    # (mignurse.sim.operator_config)
    configmaps: tuple[dict[str, Any], ...] = ()
    cluster_policies: tuple[dict[str, Any], ...] = ()

    @property
    def context_name(self) -> str:
        return f"sim-{self.name}"

    def pool(self, name: str) -> PoolSpec:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)


def gate_value(feature_gates: str, gate: str, default: bool = False) -> bool:
    for part in feature_gates.split(","):
        name, _, value = part.strip().partition("=")
        if name == gate:
            return value.strip().lower() == "true"
    return default
