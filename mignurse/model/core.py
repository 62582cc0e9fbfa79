"""Kubernetes core/v1 objects as mignurse keeps them: Node (with the pool it belongs to and its
GPU resources), Event (both the core/v1 and the events.k8s.io/v1 shapes) and Pod (its GPU
requests and the ResourceClaims it uses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mignurse.model.fields import (
    EMPTY_COUNTS,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_COMPUTE_TYPE,
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_GPU_MANUFACTURER,
    LABEL_GPU_PRESENT,
    LABEL_GPU_PRODUCT,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_BETA,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    LABEL_MNG_CAPACITY_TYPE,
    LABEL_NODEGROUP,
    LABEL_NODEPOOL,
    LABEL_PCI_NVIDIA,
    LABEL_ZONE,
    NVIDIA_INSTANCE_FAMILIES,
    RESOURCE_MIG_PREFIX,
    Condition,
    Taint,
    find_condition,
    gpu_resources,
    instance_family,
    instance_id_from_provider_id,
    parse_conditions,
    parse_count,
    parse_time,
    shared,
    shared_nearby,
    shared_texts,
    str_map,
)


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
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
        labels = str_map(meta.get("labels"))
        pool, pool_kind = _pool_of(labels)
        provider_id = str(spec.get("providerID") or "")
        taints = spec.get("taints")
        os_image, kernel, runtime, kubelet, architecture = shared_texts(
            info.get("osImage") or "",
            info.get("kernelVersion") or "",
            info.get("containerRuntimeVersion") or "",
            info.get("kubeletVersion") or "",
            info.get("architecture") or labels.get(LABEL_ARCH) or "",
        )
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
            capacity_type=shared(
                (labels.get(LABEL_CAPACITY_TYPE) or labels.get(LABEL_MNG_CAPACITY_TYPE, "")).lower()
            ),
            zone=labels.get(LABEL_ZONE, ""),
            provider_id=provider_id,
            instance_id=instance_id_from_provider_id(provider_id),
            os_image=os_image,
            kernel=kernel,
            container_runtime=runtime,
            kubelet_version=kubelet,
            architecture=architecture,
            conditions=parse_conditions(status.get("conditions")),
            taints=tuple(Taint.from_api(t) for t in taints if isinstance(t, dict))
            if isinstance(taints, list)
            else (),
            unschedulable=bool(spec.get("unschedulable")),
            gpu_capacity=gpu_resources(status.get("capacity")) or EMPTY_COUNTS,
            gpu_allocatable=gpu_resources(status.get("allocatable")) or EMPTY_COUNTS,
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


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
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
        # What many events repeat is kept once (model/fields.py): the namespace, kind,
        # reason, reporting component and host always; the object's name and uid (one
        # pod's Scheduled, Pulled, Started, … are listed side by side) and the wording
        # among the strings seen lately.
        namespace, kind, reason, type_, component, host = shared_texts(
            meta.get("namespace") or "",
            involved.get("kind") or "",
            raw.get("reason") or "",
            raw.get("type") or "Normal",
            source.get("component")
            or raw.get("reportingComponent")
            or raw.get("reportingController")
            or "",
            source.get("host") or "",
        )
        return cls(
            namespace=namespace,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            involved_kind=kind,
            involved_name=shared_nearby(involved.get("name")),
            involved_uid=shared_nearby(involved.get("uid")),
            reason=reason,
            message=shared_nearby(raw.get("message") or raw.get("note")),
            type=type_,
            source=component,
            host=host,
            first_seen=parse_time(first),
            last_seen=parse_time(last),
            count=int(series.get("count") or raw.get("count") or 1),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
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
            for name, count in gpu_resources(requests).items():
                gpus[name] = gpus.get(name, 0) + count
        statuses = [s for s in status.get("containerStatuses") or () if isinstance(s, dict)]
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        )
        namespace, node_name, phase, owner_kind = shared_texts(
            meta.get("namespace") or "",
            spec.get("nodeName") or "",
            status.get("phase") or "",
            owner.get("kind") or "",
        )
        return cls(
            namespace=namespace,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            node_name=node_name,
            claims=pod_claim_names(raw),
            phase=phase,
            ready=ready,
            owner_kind=owner_kind,
            created=parse_time(meta.get("creationTimestamp")),
            deleting=parse_time(meta.get("deletionTimestamp")),
            restarts=sum(max(0, parse_count(s.get("restartCount"))) for s in statuses),
            gpu_requests=gpus or EMPTY_COUNTS,
            labels=str_map(meta.get("labels")),
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
