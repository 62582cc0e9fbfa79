"""The objects mignurse reasons about, parsed once from raw Kubernetes API JSON.

Every `from_api` takes the plain dict the API server returned (a list item or a watch
object) and keeps only what the rules, tables and bundles need. Parsing is defensive:
real clusters carry missing fields, unknown condition types and odd values, and none of
that may crash a listing of 5,000 nodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

# Labels and annotations we read (docs/repair.md "Who repairs a node", docs/mig.md "Node labels").
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_NODEGROUP = "eks.amazonaws.com/nodegroup"
LABEL_MNG_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
LABEL_COMPUTE_TYPE = "eks.amazonaws.com/compute-type"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_GPU_COUNT_HINT = "karpenter.k8s.aws/instance-gpu-count"
LABEL_PCI_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_GPU_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
ANNOTATION_TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"

RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_MIG_PREFIX = "nvidia.com/mig-"

# NVIDIA EC2 instance families (g4ad is AMD, inf/trn are Neuron, so they are absent).
NVIDIA_INSTANCE_FAMILIES = frozenset(
    {
        "p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
        "p6e-gb200", "g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f",
        "g7e",
    }
)  # fmt: skip

_EMPTY: Mapping[str, str] = {}

# HOT_PATH_NOTE: Node, NodeClaim, Event, Condition and Taint are built by the hundred
# thousand on every list of a large cluster. A frozen dataclass's __init__ sets each field
# through object.__setattr__ and costs six times a plain one (0.31 s against 0.05 s for
# 100,000 events), so these are plain slotted dataclasses that no code ever mutates.


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 from the API ("2026-11-29T03:04:05Z", fractions allowed); None if absent or odd."""
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime | None) -> str | None:
    """The API's own form: second precision, UTC, trailing Z."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


def parse_count(value: Any) -> int:
    """An integer resource quantity ("8", "56"); 0 for anything that is not one."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return 0
    if value.isdigit():
        return int(value)
    match = _QUANTITY.match(value)
    if not match or match.group(2) not in _SUFFIX:
        return 0
    try:
        return int(float(match.group(1)) * _SUFFIX[match.group(2)])
    except ValueError:
        return 0


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0] if instance_type else ""


def instance_id_from_provider_id(provider_id: str) -> str:
    """aws:///us-west-2a/i-0abc… → i-0abc…; empty when it is not an EC2 provider id."""
    if not provider_id.startswith("aws://"):
        return ""
    last = provider_id.rsplit("/", 1)[-1]
    return last if last.startswith("i-") else ""


def _gpu_resources(resources: Any) -> dict[str, int]:
    if not isinstance(resources, dict):
        return {}
    return {
        name: parse_count(value)
        for name, value in resources.items()
        if name == RESOURCE_GPU or name.startswith(RESOURCE_MIG_PREFIX)
    }


def _str_map(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, dict) else _EMPTY


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    last_transition: datetime | None = None
    last_heartbeat: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(raw.get("type") or ""),
            status=str(raw.get("status") or "Unknown"),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            last_transition=parse_time(raw.get("lastTransitionTime")),
            last_heartbeat=parse_time(raw.get("lastHeartbeatTime")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": format_time(self.last_transition),
        }


def find_condition(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of one type (the API keeps at most one of each)."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def _conditions(raw: Any) -> tuple[Condition, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(Condition.from_api(c) for c in raw if isinstance(c, dict))


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(
            str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or "")
        )

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class Node:
    name: str
    uid: str = ""
    resource_version: str = ""
    created: datetime | None = None
    deleting: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    pool: str = ""  # NodePool or managed node group name
    pool_kind: str = ""  # "nodepool" | "nodegroup" | "auto" | ""
    instance_type: str = ""
    capacity_type: str = ""
    zone: str = ""
    provider_id: str = ""
    instance_id: str = ""
    os_image: str = ""
    kernel: str = ""
    container_runtime: str = ""
    kubelet_version: str = ""
    architecture: str = ""
    conditions: tuple[Condition, ...] = ()
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpu_capacity: Mapping[str, int] = field(default_factory=dict)
    gpu_allocatable: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Node:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        info = status.get("nodeInfo") or {}
        labels = _str_map(meta.get("labels"))
        pool, pool_kind = _pool_of(labels)
        provider_id = str(spec.get("providerID") or "")
        taints = spec.get("taints")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            deleting=parse_time(meta.get("deletionTimestamp")),
            labels=labels,
            pool=pool,
            pool_kind=pool_kind,
            instance_type=labels.get(LABEL_INSTANCE_TYPE)
            or labels.get(LABEL_INSTANCE_TYPE_BETA, ""),
            capacity_type=(
                labels.get(LABEL_CAPACITY_TYPE) or labels.get(LABEL_MNG_CAPACITY_TYPE, "")
            ).lower(),
            zone=labels.get(LABEL_ZONE, ""),
            provider_id=provider_id,
            instance_id=instance_id_from_provider_id(provider_id),
            os_image=str(info.get("osImage") or ""),
            kernel=str(info.get("kernelVersion") or ""),
            container_runtime=str(info.get("containerRuntimeVersion") or ""),
            kubelet_version=str(info.get("kubeletVersion") or ""),
            architecture=str(info.get("architecture") or labels.get(LABEL_ARCH, "")),
            conditions=_conditions(status.get("conditions")),
            taints=tuple(Taint.from_api(t) for t in taints if isinstance(t, dict))
            if isinstance(taints, list)
            else (),
            unschedulable=bool(spec.get("unschedulable")),
            gpu_capacity=_gpu_resources(status.get("capacity")),
            gpu_allocatable=_gpu_resources(status.get("allocatable")),
        )

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    @property
    def ready(self) -> Condition | None:
        return self.condition("Ready")

    @property
    def ready_status(self) -> str:
        """Ready / NotReady / Unknown, as kubectl words it."""
        cond = self.ready
        if cond is None or cond.status == "Unknown":
            return "Unknown"
        return "Ready" if cond.status == "True" else "NotReady"

    @property
    def mig_config(self) -> str:
        return self.labels.get(LABEL_MIG_CONFIG, "")

    @property
    def mig_config_state(self) -> str:
        return self.labels.get(LABEL_MIG_CONFIG_STATE, "")

    @property
    def gpu_product(self) -> str:
        return self.labels.get(LABEL_GPU_PRODUCT, "")

    @property
    def gpu_deploy(self) -> dict[str, str]:
        """The operator's `nvidia.com/gpu.deploy.<operand>` switches, by operand."""
        prefix = len(LABEL_GPU_DEPLOY_PREFIX)
        return {
            key[prefix:]: value
            for key, value in self.labels.items()
            if key.startswith(LABEL_GPU_DEPLOY_PREFIX)
        }

    @property
    def mig_resources(self) -> dict[str, int]:
        """Allocatable MIG slices by profile ("1g.10gb": 56)."""
        cut = len(RESOURCE_MIG_PREFIX)
        return {
            name[cut:]: count
            for name, count in self.gpu_allocatable.items()
            if name.startswith(RESOURCE_MIG_PREFIX)
        }

    @property
    def has_gpu_hint(self) -> bool:
        """GPU by its own evidence (a NodeClaim's request is judged by the caller)."""
        if self.gpu_capacity or self.gpu_allocatable:
            return True
        if (
            self.labels.get(LABEL_GPU_PRESENT) == "true"
            or self.labels.get(LABEL_PCI_NVIDIA) == "true"
        ):
            return True
        if self.labels.get(LABEL_GPU_MANUFACTURER, "").lower() == "nvidia":
            return True
        return instance_family(self.instance_type) in NVIDIA_INSTANCE_FAMILIES


def _pool_of(labels: Mapping[str, str]) -> tuple[str, str]:
    if pool := labels.get(LABEL_NODEPOOL):
        kind = "auto" if labels.get(LABEL_COMPUTE_TYPE) == "auto" else "nodepool"
        return pool, kind
    if group := labels.get(LABEL_NODEGROUP):
        return group, "nodegroup"
    return "", ""


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class Event:
    namespace: str
    name: str
    uid: str
    involved_kind: str
    involved_name: str
    involved_uid: str
    reason: str
    message: str
    type: str  # Normal | Warning
    source: str  # the reporting component: kubelet, karpenter, eks-node-monitoring-agent, …
    host: str
    first_seen: datetime | None
    last_seen: datetime | None
    count: int
    resource_version: str = ""

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Event:
        meta = raw.get("metadata") or {}
        involved = raw.get("involvedObject") or raw.get("regarding") or {}
        source = raw.get("source") or {}
        series = raw.get("series") or {}
        created = meta.get("creationTimestamp")
        # Events written through events.k8s.io/v1 leave the legacy timestamps empty.
        first = raw.get("firstTimestamp") or raw.get("eventTime") or created
        last = (
            series.get("lastObservedTime")
            or raw.get("lastTimestamp")
            or raw.get("eventTime")
            or created
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            involved_kind=str(involved.get("kind") or ""),
            involved_name=str(involved.get("name") or ""),
            involved_uid=str(involved.get("uid") or ""),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or raw.get("note") or ""),
            type=str(raw.get("type") or "Normal"),
            source=str(
                source.get("component")
                or raw.get("reportingComponent")
                or raw.get("reportingController")
                or ""
            ),
            host=str(source.get("host") or ""),
            first_seen=parse_time(first),
            last_seen=parse_time(last),
            count=int(series.get("count") or raw.get("count") or 1),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class NodeClaim:
    name: str
    uid: str = ""
    resource_version: str = ""
    pool: str = ""
    node_name: str = ""
    provider_id: str = ""
    instance_id: str = ""
    image_id: str = ""
    instance_type: str = ""
    capacity_type: str = ""
    zone: str = ""
    created: datetime | None = None
    deleting: datetime | None = None
    termination_timestamp: datetime | None = None
    conditions: tuple[Condition, ...] = ()
    requested_gpus: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeClaim:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        labels = _str_map(meta.get("labels"))
        annotations = _str_map(meta.get("annotations"))
        provider_id = str(status.get("providerID") or "")
        requests = (spec.get("resources") or {}).get("requests")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            pool=labels.get(LABEL_NODEPOOL, ""),
            node_name=str(status.get("nodeName") or ""),
            provider_id=provider_id,
            instance_id=instance_id_from_provider_id(provider_id),
            image_id=str(status.get("imageID") or ""),
            instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            zone=labels.get(LABEL_ZONE, ""),
            created=parse_time(meta.get("creationTimestamp")),
            deleting=parse_time(meta.get("deletionTimestamp")),
            termination_timestamp=parse_time(annotations.get(ANNOTATION_TERMINATION_TIMESTAMP)),
            conditions=_conditions(status.get("conditions")),
            requested_gpus=_gpu_resources(requests),
            labels=labels,
        )

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    @property
    def launching(self) -> bool:
        """Capacity still on its way: no Node has registered for it yet."""
        return not self.node_name and self.deleting is None

    @property
    def requests_gpu(self) -> bool:
        return any(count > 0 for count in self.requested_gpus.values())


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    uid: str = ""
    created: datetime | None = None
    node_class: str = ""
    taints: tuple[Taint, ...] = ()
    requirements: tuple[Mapping[str, Any], ...] = ()
    expire_after: str = ""
    termination_grace_period: str = ""
    consolidation_policy: str = ""
    consolidate_after: str = ""
    budgets: tuple[Mapping[str, Any], ...] = ()
    node_count: int = 0
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodePool:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        disruption = spec.get("disruption") or {}
        status = raw.get("status") or {}
        resources = status.get("resources") or {}
        taints = template_spec.get("taints")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            node_class=str((template_spec.get("nodeClassRef") or {}).get("name") or ""),
            taints=tuple(Taint.from_api(t) for t in taints if isinstance(t, dict))
            if isinstance(taints, list)
            else (),
            requirements=tuple(
                r for r in template_spec.get("requirements") or () if isinstance(r, dict)
            ),
            expire_after=str(template_spec.get("expireAfter") or ""),
            termination_grace_period=str(template_spec.get("terminationGracePeriod") or ""),
            consolidation_policy=str(disruption.get("consolidationPolicy") or ""),
            consolidate_after=str(disruption.get("consolidateAfter") or ""),
            budgets=tuple(b for b in disruption.get("budgets") or () if isinstance(b, dict)),
            node_count=parse_count(resources.get("nodes")),
            conditions=_conditions(status.get("conditions")),
        )

    @property
    def requests_gpu(self) -> bool:
        """Whether the pool's requirements or taints point at NVIDIA GPU capacity."""
        for req in self.requirements:
            key = str(req.get("key") or "")
            values = [str(v) for v in req.get("values") or ()]
            if key == "karpenter.k8s.aws/instance-gpu-manufacturer" and "nvidia" in values:
                return True
            if key == "karpenter.k8s.aws/instance-family" and any(
                v in NVIDIA_INSTANCE_FAMILIES for v in values
            ):
                return True
            if key == LABEL_INSTANCE_TYPE and any(
                instance_family(v) in NVIDIA_INSTANCE_FAMILIES for v in values
            ):
                return True
            if key == "karpenter.k8s.aws/instance-gpu-count" and req.get("operator") == "Gt":
                return True
        return any(t.key == RESOURCE_GPU for t in self.taints)


# -- MIG state read from the GPU (NVML, or nvidia-smi output) -------------------------------

MIG_ENABLED = "Enabled"
MIG_DISABLED = "Disabled"
MIG_NOT_SUPPORTED = "NotSupported"  # a GPU without MIG (NVMLError_NotSupported)
MIG_UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (a GPU instance + compute instance pair) as the driver reports it."""

    uuid: str
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str = ""  # "1g.10gb"; empty when the source cannot tell (nvidia-smi -q -x)
    memory_mib: int | None = None
    index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "index": self.index,
            "gpuInstanceId": self.gpu_instance_id,
            "computeInstanceId": self.compute_instance_id,
            "profile": self.profile or None,
            "memoryMiB": self.memory_mib,
        }


@dataclass(frozen=True, slots=True)
class GpuMigState:
    index: int
    name: str
    uuid: str
    pci_bus_id: str = ""
    mig_current: str = MIG_UNKNOWN  # Enabled | Disabled | NotSupported | Unknown
    mig_pending: str = MIG_UNKNOWN
    devices: tuple[MigDevice, ...] = ()
    pci_device_id: str = ""  # "0x233010DE" as NVML and nvidia-smi -q -x give it; "" unknown

    @property
    def mode_change_pending(self) -> bool:
        return self.mig_current in (MIG_ENABLED, MIG_DISABLED) and self.mig_pending not in (
            self.mig_current,
            MIG_UNKNOWN,
        )

    def profile_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for device in self.devices:
            key = device.profile or "unknown"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "pciBusId": self.pci_bus_id or None,
            "pciDeviceId": self.pci_device_id or None,
            "migMode": {"current": self.mig_current, "pending": self.mig_pending},
            "devices": [d.to_json() for d in self.devices],
            "profileCounts": self.profile_counts(),
        }


# MigState.status values: the states a probe can end in, none of them a crash.
PROBE_OK = "ok"
PROBE_LIBRARY_NOT_FOUND = "library-not-found"  # no libnvidia-ml.so: no driver installed here
PROBE_DRIVER_NOT_LOADED = "driver-not-loaded"
PROBE_NO_GPUS = "no-gpus"
PROBE_ERROR = "error"


@dataclass(frozen=True, slots=True)
class MigState:
    """The MIG picture of one node: every GPU with its mode and MIG devices."""

    source: str  # "nvml" | "nvidia-smi"
    status: str = PROBE_OK
    detail: str = ""  # why, when status is not ok
    driver_version: str = ""
    gpus: tuple[GpuMigState, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "detail": self.detail or None,
            "driverVersion": self.driver_version or None,
            "gpus": [g.to_json() for g in self.gpus],
        }


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE
class Pod:
    namespace: str
    name: str
    uid: str = ""
    node_name: str = ""
    phase: str = ""
    ready: bool = False
    owner_kind: str = ""  # ReplicaSet, DaemonSet, Job, StatefulSet, … ("" for a bare pod)
    created: datetime | None = None
    deleting: datetime | None = None
    restarts: int = 0
    gpu_requests: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    claims: tuple[str, ...] = ()  # the ResourceClaims it uses, by name (its namespace)
    # "claim: device, …" for each of its claims that holds gpu.nvidia.com devices (with_claims)
    gpu_claims: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Pod:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        owners = [o for o in meta.get("ownerReferences") or () if isinstance(o, dict)]
        owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
        gpus: dict[str, int] = {}
        for container in spec.get("containers") or ():
            if not isinstance(container, dict):
                continue
            requests = (container.get("resources") or {}).get("requests")
            for name, count in _gpu_resources(requests).items():
                gpus[name] = gpus.get(name, 0) + count
        statuses = [s for s in status.get("containerStatuses") or () if isinstance(s, dict)]
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            node_name=str(spec.get("nodeName") or ""),
            claims=pod_claim_names(raw),
            phase=str(status.get("phase") or ""),
            ready=ready,
            owner_kind=str(owner.get("kind") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            deleting=parse_time(meta.get("deletionTimestamp")),
            restarts=sum(int(s.get("restartCount") or 0) for s in statuses),
            gpu_requests=gpus,
            labels=_str_map(meta.get("labels")),
        )

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpu_claims) or any(count > 0 for count in self.gpu_requests.values())


def pod_claim_names(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaims a pod uses: those named in its spec and those generated from its
    templates (`status.resourceClaimStatuses`; kubernetes v1.34 staging/src/k8s.io/api/core/v1
    types.go PodResourceClaim, PodResourceClaimStatus)."""
    names: list[str] = []
    spec, status = raw.get("spec"), raw.get("status")
    for refs in (
        spec.get("resourceClaims") if isinstance(spec, dict) else None,
        status.get("resourceClaimStatuses") if isinstance(status, dict) else None,
    ):
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, dict) and ref.get("resourceClaimName"):
                names.append(str(ref["resourceClaimName"]))
    return tuple(dict.fromkeys(names))


# -- Dynamic Resource Allocation: GPUs and MIG devices published as ResourceSlices ----------
# Shapes: kubernetes v1.34 staging/src/k8s.io/api/resource/{v1,v1beta2,v1beta1}/types.go
# (v1beta1 and v1alpha3 wrap a device's attributes and capacity in `basic`); the NVIDIA DRA
# driver's devices: NVIDIA/k8s-dra-driver-gpu@v25.8.0 cmd/gpu-kubelet-plugin/deviceinfo.go.

DRA_GPU_DRIVER = "gpu.nvidia.com"  # k8s-dra-driver-gpu@v25.8.0 cmd/gpu-kubelet-plugin/main.go
DRA_TYPE_GPU = "gpu"  # the `type` attribute (cmd/gpu-kubelet-plugin/types.go)
DRA_TYPE_MIG = "mig"
# CanonicalName: gpu-<minor>; MIG devices gpu-<minor>-mig-<giProfileId>-<start>-<size> (v25.8.0
# deviceinfo.go) or gpu-<minor>-mig-<profile without dots>-<giProfileId>-<start> (v25.12.0 mig.go)
_DRA_GPU_NAME = re.compile(r"^gpu-(\d+)$")
_DRA_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-[0-9a-z-]+$")


def _map(value: Any) -> Mapping[str, Any]:
    """A JSON object, or an empty one in place of anything else (a hand-edited dump)."""
    return value if isinstance(value, dict) else _EMPTY


def _attribute(attributes: Mapping[str, Any], name: str, driver: str) -> str:
    """A device attribute's value as text; its name may be written with the driver's domain
    (`gpu.nvidia.com/type`) or without it (`type`), the value as string, version, int or bool."""
    for key in (name, f"{driver}/{name}"):
        value = attributes.get(key)
        if isinstance(value, dict):
            for kind in ("string", "version", "int", "bool"):
                if kind in value and value[kind] is not None:
                    return str(value[kind])
    return ""


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device of a ResourceSlice as the NVIDIA DRA driver names and describes it."""

    name: str  # gpu-0, gpu-0-mig-14-0-1
    type: str = ""  # gpu | mig | "" (another driver's, or an attribute missing)
    uuid: str = ""
    parent_uuid: str = ""  # MIG devices: the GPU they are carved from
    profile: str = ""  # MIG devices: 1g.24gb
    product: str = ""
    partitionable: bool = False  # consumes shared counters: a possible placement, not a device

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], driver: str) -> DraDevice:
        basic = raw.get("basic")  # v1beta1 (and v1alpha3)
        body = basic if isinstance(basic, dict) else raw
        attrs = _map(body.get("attributes"))
        name = str(raw.get("name") or "")
        kind = _attribute(attrs, "type", driver)
        if not kind:  # an attribute-less device still says what it is by its name
            kind = DRA_TYPE_MIG if _DRA_MIG_NAME.match(name) else ""
            kind = kind or (DRA_TYPE_GPU if _DRA_GPU_NAME.match(name) else "")
        return cls(
            name=name,
            type=kind,
            uuid=_attribute(attrs, "uuid", driver),
            parent_uuid=_attribute(attrs, "parentUUID", driver),
            profile=_attribute(attrs, "profile", driver),
            product=_attribute(attrs, "productName", driver),
            partitionable=bool(body.get("consumesCounters")),
        )

    @property
    def gpu_minor(self) -> int | None:
        """The minor number of the GPU the device name says it is, or is on."""
        match = _DRA_MIG_NAME.match(self.name) or _DRA_GPU_NAME.match(self.name)
        return int(match.group(1)) if match else None

    @property
    def gpu_key(self) -> str:
        """Which physical GPU this is, or is on: the (parent) UUID, else gpu-<minor>."""
        if self.type == DRA_TYPE_MIG and self.parent_uuid:
            return self.parent_uuid
        if self.type == DRA_TYPE_GPU and self.uuid:
            return self.uuid
        minor = self.gpu_minor
        return f"gpu-{minor}" if minor is not None else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type or None,
            "uuid": self.uuid or None,
            "parentUUID": self.parent_uuid or None,
            "profile": self.profile or None,
            "productName": self.product or None,
        }


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """One `resource.k8s.io` ResourceSlice: part (or all) of a driver's pool of devices."""

    name: str
    uid: str = ""
    resource_version: str = ""
    driver: str = ""
    pool: str = ""
    generation: int = 0
    slice_count: int = 1  # how many slices make the pool at this generation
    node_name: str = ""
    devices: tuple[DraDevice, ...] = ()
    shared_counters: bool = False  # partitionable devices (DynamicMIG) publish counter sets
    created: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> ResourceSlice:
        meta = _map(raw.get("metadata"))
        spec = _map(raw.get("spec"))
        pool = _map(spec.get("pool"))
        driver = str(spec.get("driver") or "")
        devices = spec.get("devices")
        node_name = str(spec.get("nodeName") or "")
        parsed = (
            tuple(DraDevice.from_api(d, driver) for d in devices if isinstance(d, dict))
            if isinstance(devices, list)
            else ()
        )
        if not node_name and spec.get("perDeviceNodeSelection") and isinstance(devices, list):
            # every device names its node: a node-local pool still has one
            names = {str(d.get("nodeName") or "") for d in devices if isinstance(d, dict)}
            node_name = names.pop() if len(names) == 1 else ""
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            driver=driver,
            pool=str(pool.get("name") or ""),
            generation=parse_count(pool.get("generation")),
            slice_count=max(parse_count(pool.get("resourceSliceCount")), 1),
            node_name=node_name,
            devices=parsed,
            shared_counters=bool(spec.get("sharedCounters")),
            created=parse_time(meta.get("creationTimestamp")),
        )


@dataclass(frozen=True)
class NodeDevices:
    """The GPUs and MIG devices the NVIDIA DRA driver publishes for one node: the slices of
    its pool at the newest generation (the only ones a consumer may use, ResourcePool in
    resource/v1 types.go), whether all of them are there yet, and what they hold."""

    node: str
    pool: str
    generation: int
    gpus: tuple[DraDevice, ...] = ()
    migs: tuple[DraDevice, ...] = ()
    slices: int = 0  # slices of that generation seen
    slices_expected: int = 1
    dynamic: bool = False  # DynamicMIG: MIG devices are placements offered, not a layout
    published: datetime | None = None  # the newest slice's creation

    @property
    def complete(self) -> bool:
        return self.slices >= self.slices_expected

    def mig_counts(self) -> dict[str, int]:
        """MIG devices by profile over all GPUs ({"1g.24gb": 4})."""
        counts: dict[str, int] = {}
        for device in self.migs:
            key = device.profile or "unknown"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def per_gpu(self) -> dict[str, dict[str, int]]:
        """Each physical GPU (by UUID, else gpu-<minor>) with its MIG devices by profile; a GPU
        without MIG devices maps to {}. Ordered by GPU minor."""
        minors = {g.gpu_key: g.gpu_minor for g in self.gpus}
        for device in self.migs:
            minors.setdefault(device.gpu_key, device.gpu_minor)
        layout: dict[str, dict[str, int]] = {
            key: {} for key in sorted(minors, key=lambda k: (minors[k] is None, minors[k] or 0, k))
        }
        for device in self.migs:
            counts = layout[device.gpu_key]
            profile = device.profile or "unknown"
            counts[profile] = counts.get(profile, 0) + 1
        return layout

    def to_json(self) -> dict[str, Any]:
        return {
            "driver": DRA_GPU_DRIVER,
            "pool": self.pool,
            "generation": self.generation,
            "complete": self.complete,
            "dynamicMig": self.dynamic,
            "gpus": [d.to_json() for d in self.gpus],
            "migDevices": [d.to_json() for d in self.migs],
        }


def dra_devices_by_node(
    slices: Iterable[ResourceSlice], driver: str = DRA_GPU_DRIVER
) -> dict[str, NodeDevices]:
    """The driver's devices per node, from the newest generation of each node-local pool."""
    pools: dict[str, list[ResourceSlice]] = {}
    for piece in slices:
        if piece.driver == driver and piece.pool:
            pools.setdefault(piece.pool, []).append(piece)
    found: dict[str, NodeDevices] = {}
    for pool, pieces in sorted(pools.items()):
        newest = max(p.generation for p in pieces)
        current = [p for p in pieces if p.generation == newest]
        nodes = {p.node_name for p in current if p.node_name}
        if len(nodes) != 1:
            continue  # a pool of several nodes (or none) is no node's own GPUs
        node = nodes.pop()
        devices = [d for p in current for d in p.devices]
        known = found.get(node)
        if known is not None and known.generation > newest:
            continue
        found[node] = NodeDevices(
            node=node,
            pool=pool,
            generation=newest,
            gpus=tuple(d for d in devices if d.type == DRA_TYPE_GPU),
            migs=tuple(d for d in devices if d.type == DRA_TYPE_MIG),
            slices=len({p.name for p in current}),
            slices_expected=max(p.slice_count for p in current),
            dynamic=any(p.shared_counters for p in current)
            or any(d.partitionable for d in devices),
            published=max((p.created for p in current if p.created), default=None),
        )
    return found


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One device a ResourceClaim's allocation holds (DeviceRequestAllocationResult)."""

    driver: str
    pool: str
    device: str
    request: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A `resource.k8s.io` ResourceClaim, kept for what it holds and who uses it."""

    namespace: str
    name: str
    uid: str = ""
    devices: tuple[AllocatedDevice, ...] = ()
    node_name: str = ""  # the node the allocation is bound to (its nodeSelector), when it says
    reserved_for: tuple[str, ...] = ()  # names of the pods (same namespace) allowed to use it
    deleting: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> ResourceClaim:
        meta = _map(raw.get("metadata"))
        status = _map(raw.get("status"))
        allocation = _map(status.get("allocation"))
        results = _map(allocation.get("devices")).get("results")
        devices = tuple(
            AllocatedDevice(
                driver=str(r.get("driver") or ""),
                pool=str(r.get("pool") or ""),
                device=str(r.get("device") or ""),
                request=str(r.get("request") or ""),
            )
            for r in (results if isinstance(results, list) else ())
            if isinstance(r, dict)
        )
        reserved_for = status.get("reservedFor")
        reserved = tuple(
            str(r.get("name") or "")
            for r in (reserved_for if isinstance(reserved_for, list) else ())
            if isinstance(r, dict) and r.get("resource") in ("pods", None) and r.get("name")
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            devices=devices,
            node_name=_selected_node(allocation.get("nodeSelector")),
            reserved_for=reserved,
            deleting=parse_time(meta.get("deletionTimestamp")),
        )

    def devices_of(self, driver: str = DRA_GPU_DRIVER) -> tuple[AllocatedDevice, ...]:
        return tuple(d for d in self.devices if d.driver == driver)


def _selected_node(selector: Any) -> str:
    """The one node an allocation's NodeSelector names (`metadata.name In [node]`, as the
    scheduler writes it for node-local devices), or ""."""
    if not isinstance(selector, dict):
        return ""
    names: set[str] = set()
    terms = selector.get("nodeSelectorTerms")
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, dict):
            continue
        fields = term.get("matchFields")
        for field_ in fields if isinstance(fields, list) else ():
            if (
                isinstance(field_, dict)
                and field_.get("key") == "metadata.name"
                and field_.get("operator") == "In"
            ):
                values = field_.get("values")
                names.update(str(v) for v in (values if isinstance(values, list) else ()))
    return names.pop() if len(names) == 1 else ""


def with_gpu_claims(pods: Iterable[Pod], claims: Iterable[ResourceClaim]) -> list[Pod]:
    """The pods with `gpu_claims` filled: each claim holding gpu.nvidia.com devices that a pod
    names or that is reserved for it counts as that pod's GPU use."""
    held: dict[tuple[str, str], str] = {}  # (namespace, claim) → "claim: devices"
    users: dict[tuple[str, str], set[str]] = {}  # (namespace, pod) → claim names
    for claim in claims:
        devices = claim.devices_of()
        if not devices:
            continue
        held[(claim.namespace, claim.name)] = (
            f"{claim.name}: {', '.join(d.device for d in devices)}"
        )
        for pod_name in claim.reserved_for:
            users.setdefault((claim.namespace, pod_name), set()).add(claim.name)
    marked: list[Pod] = []
    for pod in pods:
        names = {*pod.claims, *users.get((pod.namespace, pod.name), ())}
        words = sorted(held[(pod.namespace, n)] for n in names if (pod.namespace, n) in held)
        marked.append(replace(pod, gpu_claims=tuple(words)) if words else pod)
    return marked
