"""Dynamic Resource Allocation as the NVIDIA DRA driver uses it: the GPUs and MIG devices each
node publishes as ResourceSlices (`dra_devices_by_node` keeps a node's newest complete
picture), the ResourceClaims that hold them, and which pods those claims belong to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from mignurse.model.core import Pod
from mignurse.model.fields import EMPTY, parse_count, parse_time

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
    return value if isinstance(value, dict) else EMPTY


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


# -- the GPU stack's plugin pods --------------------------------------------------------------

PLUGIN_DEVICE = "device-plugin"  # NVIDIA's device plugin: nvidia.com/* in allocatable
PLUGIN_DRA = "dra-kubelet-plugin"  # the NVIDIA DRA driver's kubelet plugin: ResourceSlices
# Waiting reasons of a container that keeps failing to run: kubelet's back-off after a crash
# and its start failures (kubernetes v1.34 pkg/kubelet/container/sync_result.go
# ErrCrashLoopBackOff, ErrRunContainer, ErrCreateContainer, ErrCreateContainerConfig).
FAILING_WAITS = frozenset(
    {"CrashLoopBackOff", "RunContainerError", "CreateContainerError", "CreateContainerConfigError"}
)


@dataclass(frozen=True, slots=True)
class ContainerTrouble:
    """One container of a pod that keeps failing, as its status shows it (kubernetes v1.34
    staging/src/k8s.io/api/core/v1/types.go ContainerStatus: state.waiting reason/message,
    lastState.terminated reason/message/exitCode/finishedAt, restartCount)."""

    container: str
    init: bool = False
    waiting_reason: str = ""
    waiting_message: str = ""
    last_reason: str = ""
    last_message: str = ""
    last_exit_code: int | None = None
    last_finished: datetime | None = None
    restarts: int = 0

    def words(self) -> str:
        """One line: the container, what it waits on, and how it last ended."""
        kind = "init container" if self.init else "container"
        parts = [f"{kind} {self.container}"]
        if self.waiting_reason:
            parts.append(f"waiting {self.waiting_reason}")
        if self.restarts:
            parts.append(f"{self.restarts} restarts")
        last = []
        if self.last_reason:
            last.append(self.last_reason)
        if self.last_exit_code is not None:
            last.append(f"exit code {self.last_exit_code}")
        if last:
            parts.append("last terminated " + ", ".join(last))
        message = (self.last_message or self.waiting_message).strip()
        if message:
            lines = [line for line in message.splitlines() if line.strip()]
            tail = lines[-1].strip() if lines else message
            parts.append(f"last error: {tail[:300]}")
        return "; ".join(parts)


def _trouble(status: Mapping[str, Any], init: bool) -> ContainerTrouble | None:
    """The container's trouble when it keeps failing: a failing wait, or a restarted container
    not ready whose last run ended in error."""
    state = status.get("state")
    waiting = state.get("waiting") if isinstance(state, dict) else None
    waiting = waiting if isinstance(waiting, dict) else {}
    last_state = status.get("lastState")
    last = last_state.get("terminated") if isinstance(last_state, dict) else None
    last = last if isinstance(last, dict) else {}
    reason = str(waiting.get("reason") or "")
    restarts = parse_count(status.get("restartCount"))
    raw_code = last.get("exitCode")
    code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else None
    failed_last = (code is not None and code != 0) or last.get("reason") in ("Error", "OOMKilled")
    ready = status.get("ready") is True
    if reason not in FAILING_WAITS and not (restarts and failed_last and not ready):
        return None
    return ContainerTrouble(
        container=str(status.get("name") or "?"),
        init=init,
        waiting_reason=reason,
        waiting_message=str(waiting.get("message") or ""),
        last_reason=str(last.get("reason") or ""),
        last_message=str(last.get("message") or ""),
        last_exit_code=code,
        last_finished=parse_time(last.get("finishedAt")),
        restarts=restarts,
    )


@dataclass(frozen=True, slots=True)
class GpuPluginPod:
    """A pod of the GPU stack's plugin on a node (which one in `kind`), and the containers
    of it that keep failing."""

    namespace: str
    name: str
    kind: str  # PLUGIN_DEVICE | PLUGIN_DRA
    node_name: str = ""
    phase: str = ""
    deleting: datetime | None = None
    troubles: tuple[ContainerTrouble, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], kind: str) -> GpuPluginPod:
        meta = _map(raw.get("metadata"))
        spec = _map(raw.get("spec"))
        status = _map(raw.get("status"))
        troubles: list[ContainerTrouble] = []
        for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
            items = status.get(key)
            for item in items if isinstance(items, list) else ():
                trouble = _trouble(item, init) if isinstance(item, dict) else None
                if trouble is not None:
                    troubles.append(trouble)
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            kind=kind,
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or ""),
            deleting=parse_time(meta.get("deletionTimestamp")),
            troubles=tuple(troubles),
        )

    @property
    def crash_looping(self) -> bool:
        return bool(self.troubles) and self.deleting is None
