"""Scenario files: load, validate, and turn them into typed, immutable specs.

A scenario is data only (YAML). Every validation error names the file and line, in one
line, so a user editing a scenario sees exactly what to fix. See docs/scenarios.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mignurse.sim import objects, resourceapi
from mignurse.sim.karpenter_versions import chart_feature_gates, parse_version
from mignurse.yamlfile import LDict, LList, load_lined

SCENARIO_DIR = Path(__file__).parent / "scenarios"

NMA_CONDITIONS = (
    "AcceleratedHardwareReady",
    "KernelReady",
    "StorageReady",
    "NetworkingReady",
    "ContainerRuntimeReady",
)
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


class ScenarioError(Exception):
    """One line: `<file>:<line>: <what is wrong>`."""


class _Ctx:
    """Where we are in the file, to build `<file>:<line>: …` errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, line: int, message: str) -> ScenarioError:
        return ScenarioError(f"{self.path}:{line}: {message}")

    def line_of(self, obj: Any, key: str | None = None) -> int:
        if isinstance(obj, LDict):
            if key is not None and key in obj.key_lines:
                return obj.key_lines[key]
            return obj.line
        if isinstance(obj, LList):
            return obj.line
        return 0

    def mapping(self, obj: Any, where: str, line: int, allowed: set[str]) -> LDict:
        if not isinstance(obj, dict):
            raise self.fail(line, f"{where} must be a mapping, got {type(obj).__name__}")
        assert isinstance(obj, LDict)
        for key in obj:
            if key not in allowed:
                hint = _closest(key, allowed)
                raise self.fail(
                    self.line_of(obj, key),
                    f"unknown field {key!r} in {where}"
                    + (f" (did you mean {hint!r}?)" if hint else ""),
                )
        return obj

    def seq(self, obj: Any, where: str, line: int) -> LList:
        if obj is None:
            empty = LList()
            empty.line, empty.item_lines = line, []
            return empty
        if not isinstance(obj, list):
            raise self.fail(line, f"{where} must be a list, got {type(obj).__name__}")
        assert isinstance(obj, LList)
        return obj

    def required(self, d: LDict, key: str, where: str) -> Any:
        if key not in d or d[key] is None:
            raise self.fail(d.line, f"{where} needs {key!r}")
        return d[key]

    def string(self, d: LDict, key: str, where: str, default: str | None = None) -> str:
        value = d.get(key, default)
        if value is None:
            raise self.fail(d.line, f"{where} needs {key!r}")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be a string")
        return str(value)

    def integer(self, d: LDict, key: str, where: str, default: int, minimum: int = 0) -> int:
        value = d.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be an integer >= {minimum}")
        return value

    def boolean(self, d: LDict, key: str, where: str, default: bool) -> bool:
        value = d.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be true or false")
        return value

    def duration(
        self, d: LDict, key: str, where: str, default: float | None, signed: bool = False
    ) -> float:
        value = d.get(key)
        if value is None:
            if default is None:
                raise self.fail(d.line, f"{where} needs {key!r}")
            return default
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise self.fail(self.line_of(d, key), f"{where}.{key}: {exc}") from None
        if seconds < 0 and not signed:
            raise self.fail(self.line_of(d, key), f"{where}.{key} must not be negative")
        return seconds

    def str_map(self, d: LDict, key: str, where: str, nullable: bool = False) -> dict[str, Any]:
        value = d.get(key) or {}
        if not isinstance(value, dict):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be a mapping")
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None and nullable:
                out[k] = None
            elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
                out[k] = str(v)
            elif isinstance(v, bool):
                out[k] = "true" if v else "false"
            else:
                raise self.fail(
                    self.line_of(value, k),
                    f"{where}.{key}.{k} must be a string" + (" or null" if nullable else ""),
                )
        return out


def _closest(word: str, options: set[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return match[0] if match else None


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


@dataclass(frozen=True)
class Lifecycle:
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
    lifecycles: tuple[Lifecycle, ...]
    workload: WorkloadSpec | None
    line: int = 0
    node_repair: NodeRepairSpec | None = None  # managed node groups only
    release_version: str | None = None  # managed node groups: the AMI release
    ami_type: str | None = None  # managed node groups: EKS amiType
    limits: tuple[tuple[str, str], ...] | None = None  # NodePool spec.limits (None: default)
    gpu_scheduling: str = "device-plugin"  # device-plugin | dra (the NVIDIA DRA driver)
    mig_applied_by: str = "mig-manager"  # mig-manager | userdata (before kubelet, every boot)

    @property
    def dra(self) -> bool:
        return self.gpu_scheduling == "dra"

    def lifecycle_for(self, image: str) -> Lifecycle:
        for lc in self.lifecycles:
            if lc.image == image:
                return lc
        for lc in self.lifecycles:
            if lc.image is None:
                return lc
        return DEFAULT_LIFECYCLE


DEFAULT_LIFECYCLE = Lifecycle(image=None, steps=(Step(after=50.0, ready=True),))


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


# --------------------------------------------------------------------------- parsing

_TOP = {
    "name",
    "description",
    "cluster",
    "seed",
    "warmup",
    "eventTTL",
    "eventDedupe",
    "karpenter",
    "rbac",
    "nodePools",
    "nodeGroups",
    "timeline",
    "generate",
}
_POOL = {
    "name",
    "instanceType",
    "capacityType",
    "zones",
    "os",
    "image",
    "nodes",
    "nodeMonitoringAgent",
    "mig",
    "taints",
    "labels",
    "launchAfter",
    "registerAfter",
    "replacementDelay",
    "terminationGracePeriod",
    "expireAfter",
    "consolidation",
    "budgets",
    "limits",
    "nodeClass",
    "daemonSets",
    "existing",
    "lifecycle",
    "lifecycles",
    "workload",
    "nodeRepairConfig",
    "releaseVersion",
    "amiType",
    "gpuScheduling",
}
_NODEGROUP_ONLY = ("nodeRepairConfig", "releaseVersion", "amiType")
_REPAIR_CONFIG = {
    "enabled",
    "maxUnhealthyNodeThresholdCount",
    "maxUnhealthyNodeThresholdPercentage",
    "maxParallelNodesRepairedCount",
    "maxParallelNodesRepairedPercentage",
    "nodeRepairConfigOverrides",
}
_REPAIR_OVERRIDE = {
    "nodeMonitoringCondition",
    "nodeUnhealthyReason",
    "minRepairWaitTimeMins",
    "repairAction",
}
_REPAIR_ACTIONS = ("Replace", "Reboot", "NoAction")
_AMI_TYPES = (  # botocore data/eks/2017-11-01 AMITypes (Linux ones)
    "AL2_x86_64",
    "AL2_x86_64_GPU",
    "AL2_ARM_64",
    "CUSTOM",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64_FIPS",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NEURON",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
)
_STEP = {
    "after",
    "ready",
    "reason",
    "message",
    "condition",
    "conditions",
    "labels",
    "taints",
    "removeTaints",
    "allocatable",
    "kubelet",
    "nmaRestart",
    "event",
    "events",
}
_TIMELINE = (_STEP - {"after"}) | {
    "at",
    "node",
    "deleteNodeClaim",
    "spotInterrupt",
    "consolidate",
    "scale",
    "cordon",
}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _parse_condition(ctx: _Ctx, raw: Any, where: str, line: int) -> ConditionSpec:
    d = ctx.mapping(raw, where, line, {"type", "status", "reason", "message"})
    ctype = ctx.string(d, "type", where)
    status = d.get("status")
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ctx.fail(ctx.line_of(d, "status"), f"{where}.status must be True, False or Unknown")
    if ctype not in NMA_CONDITIONS + KUBELET_CONDITIONS:
        allowed = ", ".join(NMA_CONDITIONS + KUBELET_CONDITIONS)
        raise ctx.fail(ctx.line_of(d, "type"), f"{where}.type {ctype!r} is not one of {allowed}")
    return ConditionSpec(
        ctype, status, ctx.string(d, "reason", where, ""), ctx.string(d, "message", where, "")
    )


def _parse_event(ctx: _Ctx, raw: Any, where: str, line: int) -> EventSpec:
    d = ctx.mapping(raw, where, line, {"reason", "message", "type", "source"})
    etype = ctx.string(d, "type", where, "Normal")
    if etype not in ("Normal", "Warning"):
        raise ctx.fail(ctx.line_of(d, "type"), f"{where}.type must be Normal or Warning")
    source = ctx.string(d, "source", where, "kubelet")
    return EventSpec(
        ctx.string(d, "reason", where), ctx.string(d, "message", where, ""), etype, source
    )


def _parse_taint(ctx: _Ctx, raw: Any, where: str, line: int) -> TaintSpec:
    if isinstance(raw, str):
        # kubectl syntax: key[=value]:Effect
        m = re.match(r"^([^=:]+)(?:=([^:]*))?:(\w+)$", raw)
        if not m or m.group(3) not in _EFFECTS:
            raise ctx.fail(line, f"{where}: {raw!r} is not key[=value]:Effect")
        return TaintSpec(m.group(1), m.group(3), m.group(2))
    d = ctx.mapping(raw, where, line, {"key", "value", "effect"})
    effect = ctx.string(d, "effect", where)
    if effect not in _EFFECTS:
        raise ctx.fail(ctx.line_of(d, "effect"), f"{where}.effect must be one of {_EFFECTS}")
    value = d.get("value")
    return TaintSpec(ctx.string(d, "key", where), effect, None if value is None else str(value))


def _parse_step(ctx: _Ctx, raw: Any, where: str, line: int, allowed: set[str]) -> Step:
    d = ctx.mapping(raw, where, line, allowed)
    after = ctx.duration(d, "after", where, 0.0 if "after" not in allowed else None)
    ready = d.get("ready")
    if ready is not None and not isinstance(ready, bool):
        raise ctx.fail(ctx.line_of(d, "ready"), f"{where}.ready must be true or false")
    conds: list[ConditionSpec] = []
    if "condition" in d:
        conds.append(
            _parse_condition(ctx, d["condition"], f"{where}.condition", ctx.line_of(d, "condition"))
        )
    for i, c in enumerate(
        ctx.seq(d.get("conditions"), f"{where}.conditions", ctx.line_of(d, "conditions"))
    ):
        conds.append(
            _parse_condition(ctx, c, f"{where}.conditions[{i}]", ctx.line_of(d, "conditions"))
        )
    events: list[EventSpec] = []
    if "event" in d:
        events.append(_parse_event(ctx, d["event"], f"{where}.event", ctx.line_of(d, "event")))
    for i, e in enumerate(ctx.seq(d.get("events"), f"{where}.events", ctx.line_of(d, "events"))):
        events.append(_parse_event(ctx, e, f"{where}.events[{i}]", ctx.line_of(d, "events")))
    taints = tuple(
        _parse_taint(ctx, t, f"{where}.taints[{i}]", ctx.line_of(d, "taints"))
        for i, t in enumerate(ctx.seq(d.get("taints"), f"{where}.taints", ctx.line_of(d, "taints")))
    )
    remove = ctx.seq(d.get("removeTaints"), f"{where}.removeTaints", ctx.line_of(d, "removeTaints"))
    kubelet = d.get("kubelet")
    if kubelet is not None and kubelet not in ("restart", "stop", "start"):
        raise ctx.fail(ctx.line_of(d, "kubelet"), f"{where}.kubelet must be restart, stop or start")
    step = Step(
        after=after,
        ready=ready,
        reason=None if d.get("reason") is None else str(d["reason"]),
        message=None if d.get("message") is None else str(d["message"]),
        conditions=tuple(conds),
        labels=tuple(ctx.str_map(d, "labels", where, nullable=True).items()),
        taints=taints,
        remove_taints=tuple(str(k) for k in remove),
        allocatable=tuple(ctx.str_map(d, "allocatable", where, nullable=True).items()),
        kubelet=kubelet,
        nma_restart=ctx.boolean(d, "nmaRestart", where, False),
        events=tuple(events),
        line=line,
    )
    if (step.reason or step.message) and step.ready is not False:
        raise ctx.fail(line, f"{where}: reason/message go with `ready: false`")
    return step


def _has_action(step: Step) -> bool:
    return bool(
        step.ready is not None
        or step.conditions
        or step.labels
        or step.taints
        or step.remove_taints
        or step.allocatable
        or step.kubelet
        or step.nma_restart
        or step.events
    )


def _parse_steps(ctx: _Ctx, raw: Any, where: str, line: int) -> tuple[Step, ...]:
    steps = []
    seq = ctx.seq(raw, where, line)
    for i, item in enumerate(seq):
        step_line = seq.item_lines[i] if i < len(seq.item_lines) else line
        step = _parse_step(ctx, item, f"{where}[{i}]", step_line, _STEP)
        if not _has_action(step):
            raise ctx.fail(step_line, f"{where}[{i}] has `after` but nothing to do")
        steps.append(step)
    return tuple(sorted(steps, key=lambda s: s.after))


def _parse_node_repair(ctx: _Ctx, raw: Any, where: str, line: int) -> NodeRepairSpec:
    """`nodeRepairConfig` exactly as the EKS API shapes it (API_NodeRepairConfig)."""
    d = ctx.mapping(raw, where, line, _REPAIR_CONFIG)
    bounded: dict[str, int | None] = {}
    for key in sorted(_REPAIR_CONFIG - {"enabled", "nodeRepairConfigOverrides"}):
        value = d.get(key)
        if value is None:
            bounded[key] = None
            continue
        top = 100 if key.endswith("Percentage") else None
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < 1
            or (top is not None and value > top)
        ):
            span = "1 to 100" if top else ">= 1"
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key} must be an integer {span}")
        bounded[key] = value
    for stem in ("maxUnhealthyNodeThreshold", "maxParallelNodesRepaired"):
        if bounded[stem + "Count"] is not None and bounded[stem + "Percentage"] is not None:
            raise ctx.fail(
                ctx.line_of(d, stem + "Percentage"),
                f"{where}: set {stem}Count or {stem}Percentage, not both",
            )
    overrides = []
    seq = ctx.seq(
        d.get("nodeRepairConfigOverrides"),
        f"{where}.nodeRepairConfigOverrides",
        ctx.line_of(d, "nodeRepairConfigOverrides"),
    )
    for i, item in enumerate(seq):
        o_where = f"{where}.nodeRepairConfigOverrides[{i}]"
        o = ctx.mapping(item, o_where, seq.item_lines[i], _REPAIR_OVERRIDE)
        for key in sorted(_REPAIR_OVERRIDE):
            ctx.required(o, key, o_where)  # the API wants all four fields of an override
        action = ctx.string(o, "repairAction", o_where)
        if action not in _REPAIR_ACTIONS:
            raise ctx.fail(
                ctx.line_of(o, "repairAction"),
                f"{o_where}.repairAction must be one of {', '.join(_REPAIR_ACTIONS)}",
            )
        overrides.append(
            RepairOverride(
                node_monitoring_condition=ctx.string(o, "nodeMonitoringCondition", o_where),
                node_unhealthy_reason=ctx.string(o, "nodeUnhealthyReason", o_where),
                min_repair_wait_time_mins=ctx.integer(
                    o, "minRepairWaitTimeMins", o_where, 0, minimum=1
                ),
                repair_action=action,
            )
        )
    return NodeRepairSpec(
        enabled=ctx.boolean(d, "enabled", where, False),
        max_unhealthy_count=bounded["maxUnhealthyNodeThresholdCount"],
        max_unhealthy_percentage=bounded["maxUnhealthyNodeThresholdPercentage"],
        max_parallel_count=bounded["maxParallelNodesRepairedCount"],
        max_parallel_percentage=bounded["maxParallelNodesRepairedPercentage"],
        overrides=tuple(overrides),
    )


def _parse_pool(ctx: _Ctx, raw: Any, where: str, line: int, kind: str, warmup: float) -> PoolSpec:
    d = ctx.mapping(raw, where, line, _POOL)
    name = ctx.string(d, "name", where)
    if not _NAME.match(name):
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name {name!r} is not a DNS-1123 name")
    where = f"{where} ({name})"
    if kind != "nodegroup":
        for key in _NODEGROUP_ONLY:
            if key in d:
                raise ctx.fail(ctx.line_of(d, key), f"{where}: {key} is for nodeGroups only")
    itype = ctx.string(d, "instanceType", where)
    try:
        it = objects.instance_type(itype)
    except KeyError:
        known = ", ".join(sorted(objects.INSTANCE_TYPES))
        raise ctx.fail(
            ctx.line_of(d, "instanceType"), f"unknown instanceType {itype!r}; known: {known}"
        ) from None
    os_name = ctx.string(d, "os", where, "al2023")
    if os_name not in objects.OS_IMAGES:
        raise ctx.fail(
            ctx.line_of(d, "os"), f"{where}.os must be one of {', '.join(objects.OS_IMAGES)}"
        )
    capacity_type = ctx.string(d, "capacityType", where, "on-demand")
    if capacity_type not in ("on-demand", "spot", "reserved"):
        raise ctx.fail(
            ctx.line_of(d, "capacityType"),
            f"{where}.capacityType must be on-demand, spot or reserved",
        )
    zones = tuple(
        str(z) for z in ctx.seq(d.get("zones"), f"{where}.zones", ctx.line_of(d, "zones"))
    ) or ("us-west-2a", "us-west-2b", "us-west-2c")
    mig = ctx.mapping(
        d.get("mig") or _empty(ctx.line_of(d, "mig")),
        f"{where}.mig",
        ctx.line_of(d, "mig"),
        {"config", "strategy", "appliedBy"},
    )
    mig_config = None if mig.get("config") is None else str(mig["config"])
    applied_by = ctx.string(mig, "appliedBy", f"{where}.mig", "mig-manager")
    if applied_by not in ("mig-manager", "userdata"):
        raise ctx.fail(
            ctx.line_of(mig, "appliedBy"), f"{where}.mig.appliedBy must be mig-manager or userdata"
        )
    if applied_by == "userdata" and mig_config is None:
        raise ctx.fail(ctx.line_of(mig, "appliedBy"), f"{where}.mig.appliedBy needs a config")
    gpu_scheduling = ctx.string(d, "gpuScheduling", where, "device-plugin")
    if gpu_scheduling not in ("device-plugin", "dra"):
        raise ctx.fail(
            ctx.line_of(d, "gpuScheduling"), f"{where}.gpuScheduling must be device-plugin or dra"
        )
    if gpu_scheduling == "dra" and it.gpu is None:
        raise ctx.fail(ctx.line_of(d, "gpuScheduling"), f"{where}: {itype} has no GPU for DRA")
    mig_strategy = ctx.string(mig, "strategy", f"{where}.mig", "mixed")
    if mig_strategy not in ("mixed", "single", "none"):
        raise ctx.fail(
            ctx.line_of(mig, "strategy"), f"{where}.mig.strategy must be mixed, single or none"
        )
    if mig_config is not None:
        if it.gpu is None or not it.gpu.mig_capable:
            raise ctx.fail(ctx.line_of(d, "mig"), f"{where}: {itype} is not MIG-capable")
        if mig_config != "all-disabled" and mig_config not in it.gpu.mig_layouts:
            known = ", ".join(["all-disabled", *it.gpu.mig_layouts])
            raise ctx.fail(
                ctx.line_of(mig, "config"),
                f"{where}.mig.config {mig_config!r} is not valid for {it.gpu.product}; "
                f"known: {known}",
            )
    if "taints" in d:
        taints = tuple(
            _parse_taint(ctx, t, f"{where}.taints[{i}]", ctx.line_of(d, "taints"))
            for i, t in enumerate(ctx.seq(d["taints"], f"{where}.taints", ctx.line_of(d, "taints")))
        )
    elif it.gpu is not None:
        taints = (TaintSpec("nvidia.com/gpu", "NoSchedule", "true"),)
    else:
        taints = ()
    image = ctx.string(d, "image", where, _default_ami(name, os_name))
    lifecycles: list[Lifecycle] = []
    if "lifecycle" in d:
        lifecycles.append(
            Lifecycle(
                None,
                _parse_steps(
                    ctx, d["lifecycle"], f"{where}.lifecycle", ctx.line_of(d, "lifecycle")
                ),
            )
        )
    lcs = ctx.seq(d.get("lifecycles"), f"{where}.lifecycles", ctx.line_of(d, "lifecycles"))
    for i, lc_raw in enumerate(lcs):
        lc_where = f"{where}.lifecycles[{i}]"
        lc = ctx.mapping(lc_raw, lc_where, lcs.item_lines[i], {"image", "steps", "gpuResources"})
        lifecycles.append(
            Lifecycle(
                None if lc.get("image") is None else str(lc["image"]),
                _parse_steps(
                    ctx,
                    ctx.required(lc, "steps", lc_where),
                    f"{lc_where}.steps",
                    ctx.line_of(lc, "steps"),
                ),
                ctx.boolean(lc, "gpuResources", lc_where, True),
            )
        )
    existing: list[ExistingNodes] = []
    ex_seq = ctx.seq(d.get("existing"), f"{where}.existing", ctx.line_of(d, "existing"))
    for i, ex_raw in enumerate(ex_seq):
        ex_where = f"{where}.existing[{i}]"
        ex = ctx.mapping(
            ex_raw,
            ex_where,
            ex_seq.item_lines[i],
            {"count", "age", "image", "os", "labels", "steps", "names"},
        )
        ex_os = None if ex.get("os") is None else str(ex["os"])
        if ex_os is not None and ex_os not in objects.OS_IMAGES:
            raise ctx.fail(
                ctx.line_of(ex, "os"),
                f"{ex_where}.os must be one of {', '.join(objects.OS_IMAGES)}",
            )
        names = tuple(
            str(n) for n in ctx.seq(ex.get("names"), f"{ex_where}.names", ctx.line_of(ex, "names"))
        )
        count = ctx.integer(ex, "count", ex_where, len(names) or 1, minimum=1)
        if names and len(names) != count:
            raise ctx.fail(
                ctx.line_of(ex, "names"), f"{ex_where}: {len(names)} names for count {count}"
            )
        existing.append(
            ExistingNodes(
                count=count,
                age=ctx.duration(ex, "age", ex_where, None),
                image=None if ex.get("image") is None else str(ex["image"]),
                os=ex_os,
                labels=tuple(ctx.str_map(ex, "labels", ex_where).items()),
                steps=_parse_steps(ctx, ex["steps"], f"{ex_where}.steps", ctx.line_of(ex, "steps"))
                if "steps" in ex
                else None,
                names=names,
            )
        )
    nodes = ctx.integer(d, "nodes", where, sum(e.count for e in existing))
    if sum(e.count for e in existing) > nodes:
        raise ctx.fail(
            ctx.line_of(d, "existing"), f"{where}: more existing nodes than `nodes: {nodes}`"
        )
    consolidation = ctx.mapping(
        d.get("consolidation") or _empty(ctx.line_of(d, "consolidation")),
        f"{where}.consolidation",
        ctx.line_of(d, "consolidation"),
        {"policy", "after"},
    )
    policy = ctx.string(
        consolidation, "policy", f"{where}.consolidation", "WhenEmptyOrUnderutilized"
    )
    if policy not in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"):
        raise ctx.fail(
            ctx.line_of(consolidation, "policy"),
            f"{where}.consolidation.policy must be WhenEmpty, WhenEmptyOrUnderutilized or Balanced",
        )
    budgets_raw = ctx.seq(d.get("budgets"), f"{where}.budgets", ctx.line_of(d, "budgets"))
    budgets = []
    for i, b in enumerate(budgets_raw):
        bd = ctx.mapping(
            b,
            f"{where}.budgets[{i}]",
            budgets_raw.item_lines[i],
            {"nodes", "reasons", "schedule", "duration"},
        )
        budgets.append(
            tuple((k, list(v) if isinstance(v, list) else str(v)) for k, v in bd.items())
        )
    if not budgets:
        budgets.append((("nodes", "10%"),))
    register_after = ctx.duration(d, "registerAfter", where, 45.0)
    for parsed in lifecycles:
        for step in parsed.steps:
            if step.after < register_after:
                raise ctx.fail(
                    step.line,
                    f"{where}: lifecycle step at {format_duration(step.after)} comes before "
                    f"the node registers ({format_duration(register_after)})",
                )
    tgp = d.get("terminationGracePeriod")
    workload = _parse_workload(
        ctx,
        d.get("workload"),
        f"{where}.workload",
        ctx.line_of(d, "workload"),
        name,
        it,
        mig_config,
        mig_strategy,
        gpu_scheduling == "dra",
    )
    return PoolSpec(
        kind=kind,
        name=name,
        instance_type=itype,
        capacity_type=capacity_type,
        zones=zones,
        os=os_name,
        image=image,
        nodes=nodes,
        node_monitoring_agent=ctx.boolean(d, "nodeMonitoringAgent", where, True),
        mig_config=mig_config,
        mig_strategy=mig_strategy,
        taints=taints,
        labels=tuple(ctx.str_map(d, "labels", where).items()),
        launch_after=ctx.duration(d, "launchAfter", where, 5.0),
        register_after=register_after,
        replacement_delay=ctx.duration(d, "replacementDelay", where, 5.0),
        termination_grace_period=None
        if tgp is None
        else ctx.duration(d, "terminationGracePeriod", where, None),
        expire_after=ctx.string(d, "expireAfter", where, "720h"),
        consolidation_policy=policy,
        consolidate_after=ctx.string(consolidation, "after", f"{where}.consolidation", "1m"),
        budgets=tuple(budgets),
        nodeclass=ctx.string(d, "nodeClass", where, "default" if it.gpu is None else "gpu"),
        daemonsets=ctx.boolean(d, "daemonSets", where, True),
        existing=tuple(existing),
        lifecycles=tuple(lifecycles),
        workload=workload,
        line=line,
        node_repair=None
        if d.get("nodeRepairConfig") is None
        else _parse_node_repair(
            ctx,
            d["nodeRepairConfig"],
            f"{where}.nodeRepairConfig",
            ctx.line_of(d, "nodeRepairConfig"),
        ),
        release_version=None
        if d.get("releaseVersion") is None
        else ctx.string(d, "releaseVersion", where),
        ami_type=_parse_ami_type(ctx, d, where),
        limits=None if d.get("limits") is None else _parse_limits(ctx, d, where, kind),
        gpu_scheduling=gpu_scheduling,
        mig_applied_by=applied_by,
    )


def _parse_limits(ctx: _Ctx, d: LDict, where: str, kind: str) -> tuple[tuple[str, str], ...]:
    """NodePool `spec.limits`: resource name → quantity (`nvidia.com/gpu: 16`, `cpu: 1000`)."""
    if kind != "nodepool":
        raise ctx.fail(ctx.line_of(d, "limits"), f"{where}: limits is for nodePools only")
    limits = ctx.str_map(d, "limits", where)
    for name, value in limits.items():
        if not re.match(r"^[0-9.]+(m|k|Ki|Mi|Gi|Ti|M|G|T)?$", value):
            raise ctx.fail(
                ctx.line_of(d, "limits"), f"{where}.limits.{name} {value!r} is not a quantity"
            )
    return tuple(sorted(limits.items()))


def _parse_ami_type(ctx: _Ctx, d: LDict, where: str) -> str | None:
    if d.get("amiType") is None:
        return None
    ami_type = ctx.string(d, "amiType", where)
    if ami_type not in _AMI_TYPES:
        raise ctx.fail(
            ctx.line_of(d, "amiType"), f"{where}.amiType must be one of {', '.join(_AMI_TYPES)}"
        )
    return ami_type


def _parse_workload(
    ctx: _Ctx,
    raw: Any,
    where: str,
    line: int,
    pool: str,
    it: objects.InstanceType,
    mig_config: str | None,
    mig_strategy: str,
    dra: bool = False,
) -> WorkloadSpec | None:
    if raw is None:
        return None
    allowed = {
        "name", "namespace", "podsPerNode", "image", "resource", "perPod", "pdb", "replicas",
        "profile",
    }  # fmt: skip
    d = ctx.mapping(raw, where, line, allowed)
    layout = (
        it.gpu.mig_layouts.get(mig_config or "", {}) if it.gpu is not None and mig_config else {}
    )
    default_profile: str | None = None
    if it.gpu is None:
        default_resource = None
    elif dra:
        # the DeviceClasses of the NVIDIA DRA driver's chart (k8s-dra-driver-gpu@v25.8.0
        # deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-{gpu,mig}.yaml)
        default_resource = "mig.nvidia.com" if layout else "gpu.nvidia.com"
        default_profile = sorted(layout)[0] if layout else None
    else:
        res = objects.mig_resources(it, mig_config, mig_strategy)
        default_resource = sorted(res)[0] if res else "nvidia.com/gpu"
    pdb = d.get("pdb")
    min_av: int | str | None = None
    max_un: int | str | None = None
    if pdb is not None:
        pd = ctx.mapping(
            pdb, f"{where}.pdb", ctx.line_of(d, "pdb"), {"minAvailable", "maxUnavailable"}
        )
        min_av, max_un = pd.get("minAvailable"), pd.get("maxUnavailable")
        if (min_av is None) == (max_un is None):
            raise ctx.fail(
                pd.line, f"{where}.pdb needs exactly one of minAvailable, maxUnavailable"
            )
    resource = d.get("resource", default_resource)
    profile = d.get("profile", default_profile if resource == "mig.nvidia.com" else None)
    if dra and resource not in ("gpu.nvidia.com", "mig.nvidia.com"):
        raise ctx.fail(
            ctx.line_of(d, "resource"),
            f"{where}.resource on a DRA pool is a DeviceClass: gpu.nvidia.com or mig.nvidia.com",
        )
    if profile is not None and (not dra or resource != "mig.nvidia.com"):
        raise ctx.fail(ctx.line_of(d, "profile"), f"{where}.profile goes with mig.nvidia.com")
    if dra and resource == "mig.nvidia.com" and (profile is None or str(profile) not in layout):
        known = ", ".join(sorted(layout)) or "none: the pool has no MIG layout"
        raise ctx.fail(
            ctx.line_of(d, "profile" if "profile" in d else "resource"),
            f"{where}.profile {profile!r} is not in the pool's MIG layout ({known})",
        )
    return WorkloadSpec(
        name=ctx.string(d, "name", where, pool),
        namespace=ctx.string(d, "namespace", where, "default"),
        pods_per_node=ctx.integer(d, "podsPerNode", where, 1),
        image=ctx.string(
            d,
            "image",
            where,
            "docker.io/vllm/vllm-openai:v0.8.4" if it.gpu else "docker.io/library/busybox:1.37.0",
        ),
        resource=None if resource is None else str(resource),
        per_pod=ctx.integer(d, "perPod", where, 1, minimum=1),
        pdb_min_available=min_av,
        pdb_max_unavailable=max_un,
        replicas=None if d.get("replicas") is None else ctx.integer(d, "replicas", where, 0),
        profile=None if profile is None else str(profile),
    )


def _empty(line: int) -> LDict:
    d = LDict()
    d.line, d.key_lines = line, {}
    return d


def _default_ami(pool: str, os_name: str) -> str:
    return "ami-0" + objects.stable_hex("ami", pool, os_name, length=16)


def _parse_node_ref(ctx: _Ctx, raw: Any, where: str, line: int, pools: set[str]) -> NodeRef:
    if isinstance(raw, str):
        return NodeRef(name=raw)
    d = ctx.mapping(raw, where, line, {"newest", "oldest", "name"})
    if len(d) != 1:
        raise ctx.fail(line, f"{where} needs exactly one of name, newest, oldest")
    ref = NodeRef(**{k: str(v) for k, v in d.items()})
    pool = ref.newest or ref.oldest
    if pool is not None and pool not in pools:
        raise ctx.fail(line, f"{where}: no pool named {pool!r}")
    return ref


def _parse_timeline(ctx: _Ctx, raw: Any, line: int, pools: set[str]) -> tuple[TimelineItem, ...]:
    items = []
    seq = ctx.seq(raw, "timeline", line)
    for i, item_raw in enumerate(seq):
        where = f"timeline[{i}]"
        item_line = seq.item_lines[i]
        d = ctx.mapping(item_raw, where, item_line, _TIMELINE)
        at = ctx.duration(d, "at", where, None, signed=True)
        step_keys = {k for k in d if k in _STEP}
        step = None
        if step_keys:
            sub = LDict({k: d[k] for k in step_keys})
            sub.line, sub.key_lines = item_line, {k: d.key_lines[k] for k in step_keys}
            step = _parse_step(ctx, sub, where, item_line, _STEP - {"after"})
        actions = [
            k
            for k in ("deleteNodeClaim", "spotInterrupt", "consolidate", "scale", "cordon")
            if k in d
        ]
        if len(actions) > 1 or (actions and step is not None):
            raise ctx.fail(
                item_line,
                f"{where} has more than one action: {', '.join(sorted(step_keys | set(actions)))}",
            )
        if not actions and step is None:
            raise ctx.fail(item_line, f"{where} has nothing to do")
        action = actions[0] if actions else None
        argument: str | None = None
        nodes: int | None = None
        node_ref: NodeRef | None = None
        if action == "scale":
            sc = ctx.mapping(
                d["scale"], f"{where}.scale", ctx.line_of(d, "scale"), {"pool", "nodes"}
            )
            argument = ctx.string(sc, "pool", f"{where}.scale")
            if argument not in pools:
                raise ctx.fail(
                    ctx.line_of(sc, "pool"), f"{where}.scale: no pool named {argument!r}"
                )
            nodes = ctx.integer(sc, "nodes", f"{where}.scale", 0)
        else:
            node_ref = _parse_node_ref(
                ctx, ctx.required(d, "node", where), f"{where}.node", ctx.line_of(d, "node"), pools
            )
            if action == "consolidate":
                argument = str(d["consolidate"])
                if argument not in ("Underutilized", "Empty"):
                    raise ctx.fail(
                        ctx.line_of(d, "consolidate"),
                        f"{where}.consolidate must be Underutilized or Empty",
                    )
            elif action is not None and d[action] is not True:
                raise ctx.fail(ctx.line_of(d, action), f"{where}.{action} must be true")
        items.append(TimelineItem(at, node_ref, step, action, argument, nodes, item_line))
    return tuple(sorted(items, key=lambda t: t.at))


def parse_scenario(text: str, source: str) -> Scenario:
    ctx = _Ctx(source)
    try:
        raw = load_lined(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise ctx.fail(line, f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ctx.fail(0, f"invalid YAML: {exc}") from None
    d = ctx.mapping(raw, "the scenario", 1, _TOP)
    name = ctx.string(d, "name", "the scenario")
    if not _NAME.match(name):
        raise ctx.fail(ctx.line_of(d, "name"), f"name {name!r} is not a DNS-1123 name")
    cluster = ctx.mapping(
        d.get("cluster") or _empty(ctx.line_of(d, "cluster")),
        "cluster",
        ctx.line_of(d, "cluster"),
        {"name", "region", "kubernetesVersion", "resourceApiVersions"},
    )
    kubernetes_version = ctx.string(cluster, "kubernetesVersion", "cluster", "1.32")
    if not re.match(r"^1\.\d+$", kubernetes_version):
        raise ctx.fail(
            ctx.line_of(cluster, "kubernetesVersion"),
            f'cluster.kubernetesVersion {kubernetes_version!r} is not a release like "1.34"',
        )
    if "resourceApiVersions" in cluster:
        wanted = ctx.seq(
            cluster["resourceApiVersions"],
            "cluster.resourceApiVersions",
            ctx.line_of(cluster, "resourceApiVersions"),
        )
        unknown = [str(v) for v in wanted if str(v) not in resourceapi.PRIORITY]
        if unknown:
            raise ctx.fail(
                ctx.line_of(cluster, "resourceApiVersions"),
                f"cluster.resourceApiVersions: {unknown[0]!r} is not one of "
                f"{', '.join(resourceapi.PRIORITY)}",
            )
        resource_versions = resourceapi.ordered([str(v) for v in wanted])
    else:
        resource_versions = resourceapi.default_versions(kubernetes_version)
    region = ctx.string(cluster, "region", "cluster", "us-west-2")
    warmup = ctx.duration(d, "warmup", "the scenario", 0.0)
    karpenter: KarpenterSpec | None = None
    if d.get("karpenter") is not None:
        k = ctx.mapping(
            d["karpenter"],
            "karpenter",
            ctx.line_of(d, "karpenter"),
            {"version", "nodeRepair", "featureGates", "namespace", "interruptionQueue"},
        )
        version = ctx.string(k, "version", "karpenter", "1.4.0")
        try:
            parsed_version = parse_version(version)
        except ValueError as exc:
            raise ctx.fail(ctx.line_of(k, "version"), str(exc)) from None
        repair = ctx.boolean(k, "nodeRepair", "karpenter", False)
        gates = ctx.string(
            k, "featureGates", "karpenter", chart_feature_gates(parsed_version, repair)
        )
        if "featureGates" in k and "nodeRepair" in k and gate_value(gates, "NodeRepair") != repair:
            raise ctx.fail(
                ctx.line_of(k, "featureGates"),
                "karpenter.featureGates disagrees with karpenter.nodeRepair",
            )
        karpenter = KarpenterSpec(
            version=version,
            node_repair=gate_value(gates, "NodeRepair"),
            feature_gates=gates,
            namespace=ctx.string(k, "namespace", "karpenter", "kube-system"),
            interruption_queue=ctx.boolean(k, "interruptionQueue", "karpenter", True),
        )
    rbac = ctx.mapping(
        d.get("rbac") or _empty(ctx.line_of(d, "rbac")),
        "rbac",
        ctx.line_of(d, "rbac"),
        {"user", "deny"},
    )
    deny = []
    deny_seq = ctx.seq(rbac.get("deny"), "rbac.deny", ctx.line_of(rbac, "deny"))
    from mignurse.sim.resources import RESOURCES

    for i, rule_raw in enumerate(deny_seq):
        rule = ctx.mapping(
            rule_raw, f"rbac.deny[{i}]", deny_seq.item_lines[i], {"verb", "resource", "namespace"}
        )
        verb = ctx.string(rule, "verb", f"rbac.deny[{i}]")
        resource = ctx.string(rule, "resource", f"rbac.deny[{i}]")
        if verb not in ("get", "list", "watch", "patch", "update", "delete", "create", "*"):
            raise ctx.fail(
                ctx.line_of(rule, "verb"), f"rbac.deny[{i}].verb {verb!r} is not a Kubernetes verb"
            )
        if resource.split("/")[0] not in RESOURCES and resource != "*":
            raise ctx.fail(
                ctx.line_of(rule, "resource"),
                f"rbac.deny[{i}].resource {resource!r} is not served by the simulator; "
                f"known: {', '.join(RESOURCES)}",
            )
        deny.append(
            RbacDeny(
                verb, resource, None if rule.get("namespace") is None else str(rule["namespace"])
            )
        )
    pools: list[PoolSpec] = []
    for key, kind in (("nodePools", "nodepool"), ("nodeGroups", "nodegroup")):
        seq = ctx.seq(d.get(key), key, ctx.line_of(d, key))
        for i, p in enumerate(seq):
            pools.append(_parse_pool(ctx, p, f"{key}[{i}]", seq.item_lines[i], kind, warmup))
    names = [p.name for p in pools]
    for p in pools:
        if p.dra and not resource_versions:
            raise ctx.fail(
                p.line,
                f"pool {p.name!r}: gpuScheduling dra needs resource.k8s.io, which EKS serves "
                f"from Kubernetes 1.33 (cluster.kubernetesVersion is {kubernetes_version})",
            )
        if names.count(p.name) > 1:
            raise ctx.fail(p.line, f"pool name {p.name!r} is used twice")
        if p.kind == "nodepool" and karpenter is None:
            raise ctx.fail(
                p.line,
                f"nodePools need `karpenter:`; use nodeGroups for {p.name!r} without Karpenter",
            )
    generate = d.get("generate")
    if generate is not None and not isinstance(generate, (str, dict)):
        raise ctx.fail(ctx.line_of(d, "generate"), "generate must be a generator name or mapping")
    gen_items: tuple[tuple[str, Any], ...] | None = None
    if isinstance(generate, str):
        gen_items = (("kind", generate),)
    elif isinstance(generate, dict):
        gen_items = tuple(sorted(generate.items()))
    return Scenario(
        name=name,
        description=ctx.string(d, "description", "the scenario", ""),
        cluster_name=ctx.string(cluster, "name", "cluster", name),
        region=region,
        kubernetes_version=kubernetes_version,
        seed=ctx.integer(d, "seed", "the scenario", 1),
        warmup=warmup,
        event_ttl=ctx.duration(d, "eventTTL", "the scenario", 3600.0),
        event_dedupe=ctx.duration(d, "eventDedupe", "the scenario", 3600.0),
        karpenter=karpenter,
        rbac_user=ctx.string(rbac, "user", "rbac", "sim:oncall"),
        rbac_deny=tuple(deny),
        pools=tuple(pools),
        timeline=_parse_timeline(ctx, d.get("timeline"), ctx.line_of(d, "timeline"), set(names)),
        source=source,
        generate=gen_items,
        resource_api_versions=resource_versions,
    )


def _shipped() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}


def scenario_path(name: str) -> Path:
    """The YAML file of a shipped scenario (to copy and edit, or to vary in tests)."""
    shipped = _shipped()
    if name not in shipped:
        raise ScenarioError(
            f"{name}:0: no shipped scenario of that name (known: {', '.join(shipped)})"
        )
    return shipped[name]


def list_scenarios() -> list[tuple[str, str]]:
    """(name, one-line description) of every shipped scenario."""
    out = []
    for name, path in _shipped().items():
        try:
            raw = yaml.safe_load(path.read_text())
            desc = str(raw.get("description", "")).strip().splitlines()[0] if raw else ""
        except (yaml.YAMLError, IndexError, AttributeError):
            desc = ""
        out.append((name, desc))
    return out


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name, or a YAML file by path."""
    text_name = str(name_or_path)
    shipped = _shipped()
    if text_name in shipped:
        path = shipped[text_name]
    else:
        path = Path(text_name).expanduser()
        if not path.is_file():
            known = ", ".join(shipped)
            raise ScenarioError(
                f"{text_name}:0: no such scenario file or shipped scenario (known: {known})"
            )
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}:0: cannot read: {exc.strerror}") from None
    scenario = parse_scenario(text, str(path))
    if scenario.generate is not None:
        from mignurse.sim import generate

        scenario = generate.expand(scenario)
    return scenario
