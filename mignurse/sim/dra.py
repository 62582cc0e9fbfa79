"""The NVIDIA DRA driver for GPUs on the simulated nodes: its kubelet plugin publishes each
node's GPUs and MIG devices as a ResourceSlice, and the scheduler's allocations hold them.

What the driver does, from NVIDIA/k8s-dra-driver-gpu@v25.8.0:
- Driver name `gpu.nvidia.com`; one pool per node, named after the node, in one slice
  (cmd/gpu-kubelet-plugin/driver.go NewDriver: `Pools: {nodeName: {Slices: [one]}}`).
- The devices are enumerated once, when the plugin starts (nvlib.go
  enumerateAllPossibleDevices, called from device_state.go NewDeviceState): every GPU as
  `gpu-<minor>`, and, on a GPU with MIG on, every MIG device that exists then as
  `gpu-<minor>-mig-<giProfileId>-<placementStart>-<placementSize>` (deviceinfo.go
  CanonicalName). The full GPU is published beside its MIG devices. A MIG layout changed
  while the plugin runs is not seen until the plugin restarts (NVIDIA's advice in
  kubernetes-sigs/dra-driver-nvidia-gpu issue 473).
- Attributes and capacities are deviceinfo.go GetDevice's, with their names; versions go
  through Masterminds/semver (`580.126.09` → `580.126.9`, `12.0` → `12.0.0`), the CUDA driver
  version is `<major>.<minor>` of NVML's integer, the bus id is go-nvlib's GetPCIBusID
  (lower case, domain cut to 4 digits). `resource.kubernetes.io/pcieRoot` is left out: the
  driver skips it when sysfs cannot tell (nvlib.go getGpuInfo).
- The chart (deployments/helm/nvidia-dra-driver-gpu) runs the plugin as DaemonSet
  `nvidia-dra-driver-gpu-kubelet-plugin` and installs DeviceClasses `gpu.nvidia.com`
  (`type == 'gpu'`) and `mig.nvidia.com` (`type == 'mig'`).

What the rest of the cluster does with the slices (kubernetes v1.34):
- k8s.io/dynamic-resource-allocation resourceslice/resourceslicecontroller.go: a new slice
  is created with generateName `<node>-gpu.nvidia.com-`, the Node as controller owner, pool
  generation 1; a pool of one slice whose devices change is updated in place, keeping its
  name and its pool generation ("at most one update API call is necessary").
- The kubelet deletes all ResourceSlices of its node when it starts, and a driver's slices
  30 s after its plugin unregisters unless it registers again (pkg/kubelet/cm/dra/plugin,
  defaultWipingDelay); a plugin still running re-registers and publishes again.
- The garbage collector deletes a gone Node's slices (their owner reference).
- A pod's ResourceClaim is made from its template by the resourceclaim controller
  (`<pod>-<claim>-<random>`, annotation `resource.kubernetes.io/pod-claim-name`, the pod as
  owner) and allocated by the scheduler: `status.allocation.devices.results[]` {request,
  driver, pool, device}, a node selector on `metadata.name`, `reservedFor` the pod, and the
  `resource.kubernetes.io/delete-protection` finalizer. A pod no node can satisfy is
  "cannot allocate all claims" (pkg/scheduler/framework/plugins/dynamicresources).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mignurse.gpu.models import by_product_name
from mignurse.sim import hardware, nodemig
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.scenario_spec import PoolSpec

if TYPE_CHECKING:
    from mignurse.sim.controllers import ControlLoops, Machine
    from mignurse.sim.workloads import PodRecord

DRIVER = "gpu.nvidia.com"
CHART_VERSION = "25.8.0"
NAMESPACE = "nvidia-dra-driver-gpu"  # the namespace NVIDIA's install guide creates for it
DAEMONSET = "nvidia-dra-driver-gpu-kubelet-plugin"
IMAGE = f"nvcr.io/nvidia/k8s-dra-driver-gpu:v{CHART_VERSION}"
COMPONENT_LABEL = "nvidia-dra-driver-gpu-component"
POD_LABELS = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
    COMPONENT_LABEL: "kubelet-plugin",
}
DEVICE_CLASSES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}
POD_CLAIM = "gpu"  # the name a workload's pod gives its claim
CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
CANNOT_ALLOCATE = "cannot allocate all claims"
PLUGIN_STARTUP = 10.0  # plugin pod running → devices enumerated and published (inference)
REREGISTER = 1.0  # a running plugin back on a restarted kubelet's registration socket (inference)
WIPING_DELAY = 30.0  # kubelet pkg/kubelet/cm/dra/plugin defaultWipingDelay

# NVML's CUDA driver version by driver branch (`nvidia-smi` "CUDA Version").
_CUDA_BY_BRANCH = {"550": "12.4", "560": "12.6", "570": "12.8", "575": "12.9", "580": "13.0"}

# MIG profiles as `nvidia-smi mig -lgip` lists them: memory (MiB), SMs, copy engines,
# decoders, encoders, JPEG, OFA. RTX PRO 6000 Blackwell: R580
# (GoogleCloudPlatform/container-engine-accelerators#564). A100-SXM4-40GB: NVIDIA MIG user guide,
# "A100 MIG profiles". Other profiles publish memory and SMs from the node sandbox's figures.
_PROFILE_CAPACITY: dict[tuple[str, str], tuple[int, int, int, int, int, int, int]] = {
    ("RTX-PRO-6000-Server", "1g.24gb"): (24186, 46, 1, 1, 1, 1, 0),
    ("RTX-PRO-6000-Server", "1g.24gb+me"): (24186, 46, 1, 1, 1, 1, 1),
    ("RTX-PRO-6000-Server", "1g.24gb+gfx"): (24186, 46, 1, 1, 1, 1, 0),
    ("A100-40GB", "1g.5gb"): (4864, 14, 1, 0, 0, 0, 0),
    ("A100-40GB", "1g.5gb+me"): (4864, 14, 1, 1, 0, 1, 1),
    ("A100-40GB", "1g.10gb"): (9856, 14, 1, 1, 0, 0, 0),
    ("A100-40GB", "2g.10gb"): (9856, 28, 2, 1, 0, 0, 0),
    ("A100-40GB", "3g.20gb"): (19968, 42, 3, 2, 0, 0, 0),
    ("A100-40GB", "4g.20gb"): (19968, 56, 4, 2, 0, 0, 0),
    ("A100-40GB", "7g.40gb"): (40192, 98, 7, 5, 0, 1, 1),
}
_CAPACITY_NAMES = ("memory", "multiprocessors", "copyEngines", "decoders", "encoders",
                   "jpegEngines", "ofaEngines")  # fmt: skip
_ARCHITECTURES = {
    "ampere": "Ampere",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
    "ada-lovelace": "Ada Lovelace",
    "turing": "Turing",
}


def semver(text: str) -> str:
    """What Masterminds/semver's String() makes of a version: three parts, no leading zeros."""
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    parts += [0] * (3 - len(parts))
    return ".".join(str(p) for p in parts)


def quantity(value: int) -> str:
    """resource.NewQuantity(value, BinarySI).String(): the largest binary suffix that keeps it
    whole."""
    for suffix, size in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30),
                         ("Mi", 1 << 20), ("Ki", 1 << 10)):  # fmt: skip
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def pcie_bus_id(nvml_bus_id: str) -> str:
    """go-nvlib GetPCIBusID: `00000000:53:00.0` → `0000:53:00.0`."""
    lowered = nvml_bus_id.lower()
    return lowered if lowered == "0000" else lowered.removeprefix("0000")


@dataclass(frozen=True)
class GpuFacts:
    """What NVML tells the plugin about one kind of GPU."""

    model: str  # mignurse.gpu.models name
    product: str  # NVML's name
    brand: str
    architecture: str
    compute: str
    memory_mib: int
    driver: str

    @classmethod
    def of(cls, it: hardware.InstanceType, driver: str) -> GpuFacts:
        gpu = it.gpu
        assert gpu is not None
        model = by_product_name(gpu.product)
        product = model.product_names[0] if model and model.product_names else gpu.product
        # NVML_BRAND_NVIDIA_RTX for the RTX PRO line is our reading; data-centre parts
        # report NVML_BRAND_NVIDIA (go-nvlib GetBrandAsString: NvidiaRTX, Nvidia).
        brand = "NvidiaRTX" if "RTX" in product else "Nvidia"
        return cls(
            model=model.name if model else gpu.product,
            product=product,
            brand=brand,
            architecture=_ARCHITECTURES.get(gpu.family, gpu.family.title()),
            compute=f"{gpu.compute_major}.{gpu.compute_minor}",
            memory_mib=gpu.gfd_memory_mib,
            driver=driver,
        )

    @property
    def cuda_driver(self) -> str:
        return _CUDA_BY_BRANCH.get(self.driver.split(".")[0], "12.8")


def _string(value: str) -> JsonDict:
    return {"string": value}


def _version(value: str) -> JsonDict:
    return {"version": semver(value)}


def gpu_device(facts: GpuFacts, minor: int, uuid: str, bus: str) -> JsonDict:
    """deviceinfo.go GpuInfo.GetDevice."""
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "architecture": _string(facts.architecture),
            "brand": _string(facts.brand),
            "cudaComputeCapability": _version(facts.compute),
            "cudaDriverVersion": _version(facts.cuda_driver),
            "driverVersion": _version(facts.driver),
            "pcieBusID": _string(pcie_bus_id(bus)),
            "productName": _string(facts.product),
            "type": _string("gpu"),
            "uuid": _string(uuid),
        },
        "capacity": {"memory": {"value": quantity(facts.memory_mib << 20)}},
    }


def mig_device(
    facts: GpuFacts, minor: int, parent_uuid: str, bus: str, instance: JsonDict
) -> JsonDict:
    """deviceinfo.go MigDeviceInfo.GetDevice for one GPU instance (one compute instance)."""
    profile = str(instance["profile"])
    start, size = int(instance["start"]), int(instance["size"])
    capacity: JsonDict = {}
    known = _PROFILE_CAPACITY.get((facts.model, profile))
    if known is not None:
        memory, *engines = known
        values = [memory << 20, *engines]
        for name, value in zip(_CAPACITY_NAMES, values, strict=True):
            capacity[name] = {"value": quantity(value) if name == "memory" else str(value)}
    else:
        memory = nodemig._memory_mib(profile, facts.product)
        capacity["memory"] = {"value": quantity(memory << 20)}
        capacity["multiprocessors"] = {"value": str(nodemig._sm_count(instance, facts.product))}
    for slot in range(start, start + size):
        capacity[f"memorySlice{slot}"] = {"value": "1"}
    return {
        "name": f"gpu-{minor}-mig-{instance['profileId']}-{start}-{size}",
        "attributes": {
            "architecture": _string(facts.architecture),
            "brand": _string(facts.brand),
            "cudaComputeCapability": _version(facts.compute),
            "cudaDriverVersion": _version(facts.cuda_driver),
            "driverVersion": _version(facts.driver),
            "parentUUID": _string(parent_uuid),
            "pcieBusID": _string(pcie_bus_id(bus)),
            "productName": _string(facts.product),
            "profile": _string(profile),
            "type": _string("mig"),
            "uuid": _string(str(instance["uuid"])),
        },
        "capacity": dict(sorted(capacity.items())),
    }


def enumerate_devices(
    node: str, it: hardware.InstanceType, driver: str, layout: dict[str, int] | None
) -> list[JsonDict]:
    """The devices the plugin finds on a node whose GPUs hold `layout` per GPU (None: MIG off
    or no MIG devices); the UUIDs and placements are the node sandbox's."""
    facts = GpuFacts.of(it, driver)
    devices: list[JsonDict] = []
    for minor in range(it.gpu_count):
        uuid = nodemig.gpu_uuid(minor, node)
        bus = nodemig.bus_id(minor)
        devices.append(gpu_device(facts, minor, uuid, bus))
        if layout:
            made = nodemig.plan_instances(facts.product, uuid, layout)
            for instance in made if isinstance(made, list) else []:
                devices.append(mig_device(facts, minor, uuid, bus, instance))
    return sorted(devices, key=lambda d: str(d["name"]))


def device_class(name: str, created: float, uid: str) -> JsonDict:
    kind = DEVICE_CLASSES[name]
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": "nvidia-dra-driver-gpu",
                "meta.helm.sh/release-namespace": NAMESPACE,
            },
        },
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == '{kind}'"
                    }
                }
            ]
        },
    }


@dataclass(frozen=True)
class DeviceRequest:
    """What a workload's claim asks for: `count` devices of a class, of one MIG profile."""

    device_class: str  # gpu.nvidia.com | mig.nvidia.com
    count: int
    profile: str | None = None

    def matches(self, device: JsonDict) -> bool:
        attrs = device.get("attributes") or {}
        if (attrs.get("type") or {}).get("string") != DEVICE_CLASSES[self.device_class]:
            return False
        return self.profile is None or (attrs.get("profile") or {}).get("string") == self.profile

    def claim_spec(self) -> JsonDict:
        exactly: JsonDict = {
            "deviceClassName": self.device_class,
            "allocationMode": "ExactCount",
            "count": self.count,
        }
        if self.profile is not None:
            exactly["selectors"] = [
                {
                    "cel": {
                        "expression": f"device.attributes['{DRIVER}'].profile == '{self.profile}'"
                    }
                }
            ]
        return {"devices": {"requests": [{"name": POD_CLAIM, "exactly": exactly}]}}


def request_for(pool: PoolSpec | None) -> DeviceRequest | None:
    """The devices each pod of a DRA pool's workload claims."""
    w = pool.workload if pool is not None else None
    if pool is None or not pool.dra or w is None or w.resource not in DEVICE_CLASSES:
        return None
    return DeviceRequest(w.resource, w.per_pod, w.profile)


def template_name(pool: PoolSpec) -> str:
    assert pool.workload is not None
    return f"{pool.workload.name}-{POD_CLAIM}"


def claim_template(
    name: str, namespace: str, uid: str, created: float, request: DeviceRequest
) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
        },
        "spec": {"spec": request.claim_spec()},
    }


@dataclass(eq=False)
class NodeDra:
    """One node's GPUs as the driver sees them, and its plugin."""

    gpu_layout: str | None = None  # the MIG config the GPUs hold now (None: no MIG devices)
    running: bool = False  # the kubelet plugin runs and is registered
    devices: list[JsonDict] = field(default_factory=list)  # enumerated when it started
    slice_name: str | None = None  # its published slice (the controller's own cache)
    token: int = 0  # bumped to cancel a start or a wipe already queued
    held: dict[str, tuple[str, str]] = field(default_factory=dict)  # device → (ns, claim)
    crashed: bool = False  # the plugin crash-loops: it never registers again


class DraDriver:
    """The NVIDIA DRA driver, the kubelet's slice wiping and claim allocation."""

    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self.nodes: dict[Machine, NodeDra] = {}
        self._claims: dict[tuple[str, str], Machine] = {}  # allocated claim → its node

    def enabled(self) -> bool:
        return any(p.dra for p in self.loops.scenario.pools)

    def state(self, machine: Machine) -> NodeDra:
        found = self.nodes.get(machine)
        if found is None:
            found = self.nodes[machine] = NodeDra()
        return found

    # ------------------------------------------------------------------ cluster objects

    def bootstrap(self) -> None:
        """The chart's DeviceClasses, installed with the driver before any node."""
        created = self.loops.begin - 86400 * 30
        for name in DEVICE_CLASSES:
            self.loops.tx.put("deviceclasses", device_class(name, created, self.loops.uid()))

    # ------------------------------------------------------------------ node lifecycle

    def registered(self, machine: Machine, labels: dict[str, str]) -> None:
        """A node boots: user data applies MIG before kubelet starts; a node whose labels say
        mig-manager applied its layout long ago holds it."""
        st = self.state(machine)
        config = labels.get("nvidia.com/mig.config") or machine.pool.mig_config
        if machine.pool.mig_applied_by == "userdata" or (
            labels.get("nvidia.com/mig.config.state") == "success"
        ):
            st.gpu_layout = config if self._layout(machine, config) else None
        else:
            st.gpu_layout = None

    def rebooted(self, machine: Machine) -> None:
        """MIG devices do not survive a reboot (Ampere keeps the mode, not the instances;
        Hopper and Blackwell lose both: NVIDIA MIG user guide); user data applies again."""
        st = self.state(machine)
        self._plugin_stops(machine, wipe=False)
        applied = machine.pool.mig_config if machine.pool.mig_applied_by == "userdata" else None
        st.gpu_layout = applied if self._layout(machine, applied) else None

    def labels_changed(self, machine: Machine, labels: dict[str, str]) -> None:
        """`mig.config.state=success` is written once the GPUs hold `mig.config`'s layout
        (mig-manager, or a reapply that finished)."""
        if labels.get("nvidia.com/mig.config.state") != "success":
            return
        config = labels.get("nvidia.com/mig.config")
        if self._layout(machine, config):
            self.state(machine).gpu_layout = config

    def _layout(self, machine: Machine, config: str | None) -> dict[str, int] | None:
        it = hardware.instance_type(machine.pool.instance_type)
        if it.gpu is None or not config or config == "all-disabled":
            return None
        layouts = self.loops.mig_files.layouts(it.gpu, machine.node, config)
        return (it.gpu.mig_layouts if layouts is None else layouts).get(config)

    def plugin_pod_running(self, machine: Machine) -> None:
        """The plugin's pod starts on a node whose pod network is up (a Ready node)."""
        st = self.state(machine)
        if st.running or not machine.ready:
            return
        st.token += 1
        self._at(self.loops.t + PLUGIN_STARTUP, self._start, machine, st.token)

    def node_ready(self, machine: Machine) -> None:
        if any(ds == DAEMONSET for ds in self._daemon_sets(machine)):
            self.plugin_pod_running(machine)

    def plugin_crashed(self, machine: Machine) -> None:
        """The plugin exits and keeps exiting before it registers: kubelet wipes its slices
        after the wiping delay, and nothing publishes them again."""
        self.state(machine).crashed = True
        self._plugin_stops(machine, wipe=True)

    def plugin_pod_gone(self, machine: Machine) -> None:
        self._plugin_stops(machine, wipe=True)

    def kubelet_started(self, machine: Machine) -> None:
        """kubelet startup wipes the node's slices; a plugin still running registers again and
        its controller publishes what it enumerated when it started."""
        self._delete_slices(machine)
        st = self.state(machine)
        if st.running:
            st.token += 1
            self._at(self.loops.t + REREGISTER, self._republish, machine, st.token)

    def node_removed(self, machine: Machine) -> None:
        self._delete_slices(machine)
        self.nodes.pop(machine, None)

    def _daemon_sets(self, machine: Machine) -> list[str]:
        return [name.rsplit("-", 1)[0] for _, name in machine.daemon_pods]

    def _plugin_stops(self, machine: Machine, *, wipe: bool) -> None:
        st = self.state(machine)
        was_running = st.running
        st.running = False
        st.token += 1
        if wipe and was_running and machine.kubelet_posting and not machine.removed:
            self.loops.schedule(self.loops.t + WIPING_DELAY, self._wipe, machine, st.token)

    def _wipe(self, machine: Machine, token: int) -> None:
        st = self.nodes.get(machine)
        if st is None or st.token != token or st.running or not machine.kubelet_posting:
            return
        self._delete_slices(machine)

    def _start(self, machine: Machine, token: int) -> None:
        st = self.nodes.get(machine)
        if (
            st is None
            or st.token != token
            or st.crashed
            or machine.removed
            or not machine.registered
        ):
            return
        it = hardware.instance_type(machine.pool.instance_type)
        st.devices = enumerate_devices(
            machine.node, it, self._driver_version(machine), self._layout(machine, st.gpu_layout)
        )
        st.running = True
        self._publish(machine)

    def _republish(self, machine: Machine, token: int) -> None:
        st = self.nodes.get(machine)
        if st is None or st.token != token or not st.running or machine.removed:
            return
        self._publish(machine)

    def _driver_version(self, machine: Machine) -> str:
        return hardware.os_image(machine.os_name).nvidia_driver or hardware.DEFAULT_NVIDIA_DRIVER

    def _at(self, when: float, fn: Any, *args: Any) -> None:
        """Run now when `when` is already past (a backdated node), else at `when`."""
        if when <= self.loops.now:
            saved, self.loops.t = self.loops.t, when
            fn(*args)
            self.loops.t = saved
        else:
            self.loops.schedule(when, fn, *args)

    # ------------------------------------------------------------------ slices

    def _current(self, machine: Machine) -> JsonDict | None:
        st = self.nodes.get(machine)
        if st is None or st.slice_name is None:
            return None
        return self.loops.tx.get("resourceslices", "", st.slice_name)

    def _publish(self, machine: Machine) -> None:
        st = self.state(machine)
        current = self._current(machine)
        if current is not None:
            if current["spec"].get("devices") == st.devices:
                return
            current["spec"]["devices"] = [dict(d) for d in st.devices]
            current["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
            self.loops.tx.put("resourceslices", current)
            return
        prefix = f"{machine.node}-{DRIVER}-"
        obj: JsonDict = {
            "metadata": {
                "name": prefix + self.loops.suffix(),
                "generateName": prefix,
                "uid": self.loops.uid(),
                "resourceVersion": "0",
                "generation": 1,
                "creationTimestamp": ts(self.loops.t),
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": machine.node,
                        "uid": machine.node_uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "driver": DRIVER,
                "nodeName": machine.node,
                "pool": {"name": machine.node, "generation": 1, "resourceSliceCount": 1},
                "devices": [dict(d) for d in st.devices],
            },
        }
        self.loops.tx.put("resourceslices", obj)
        st.slice_name = obj["metadata"]["name"]

    def _delete_slices(self, machine: Machine) -> None:
        st = self.nodes.get(machine)
        if st is not None and st.slice_name is not None:
            if self._current(machine) is not None:
                self.loops.tx.delete("resourceslices", "", st.slice_name)
            st.slice_name = None

    def published(self, machine: Machine) -> list[JsonDict]:
        """The devices the node's slice offers now (what the scheduler sees)."""
        current = self._current(machine)
        devices = (current or {}).get("spec", {}).get("devices") if current else None
        return list(devices or [])

    # ------------------------------------------------------------------ claims

    def free(self, machine: Machine, request: DeviceRequest) -> list[str]:
        held = self.state(machine).held
        return [
            str(d["name"])
            for d in self.published(machine)
            if request.matches(d) and str(d["name"]) not in held
        ]

    def room(self, machine: Machine, request: DeviceRequest) -> int:
        return len(self.free(machine, request)) // max(1, request.count)

    def create_claim(self, pod: PodRecord, request: DeviceRequest) -> str:
        """The resourceclaim controller's claim for a new pod (pending until allocated)."""
        base = f"{pod.name}-{POD_CLAIM}"[:57]  # resourceclaim controller maxBaseLen
        name = f"{base}-{self.loops.suffix()}"
        obj: JsonDict = {
            "metadata": {
                "name": name,
                "generateName": f"{base}-",
                "namespace": pod.namespace,
                "uid": self.loops.uid(),
                "resourceVersion": "0",
                "creationTimestamp": ts(pod.created),
                "annotations": {CLAIM_NAME_ANNOTATION: POD_CLAIM},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.name,
                        "uid": pod.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": request.claim_spec(),
            "status": {},
        }
        self.loops.tx.put("resourceclaims", obj)
        return name

    def allocate(self, pod: PodRecord, machine: Machine, request: DeviceRequest) -> None:
        """The scheduler's allocation at binding: the first free matching devices."""
        claim_name = pod.claim
        if claim_name is None:
            return
        chosen = self.free(machine, request)[: request.count]
        obj = self.loops.tx.get("resourceclaims", pod.namespace, claim_name)
        if obj is None or len(chosen) < request.count:
            return
        st = self.state(machine)
        for device in chosen:
            st.held[device] = (pod.namespace, claim_name)
        self._claims[(pod.namespace, claim_name)] = machine
        obj["metadata"]["finalizers"] = [DELETE_PROTECTION]
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": POD_CLAIM, "driver": DRIVER, "pool": machine.node, "device": d}
                        for d in chosen
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [machine.node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod.name, "uid": pod.uid}],
        }
        self.loops.tx.put("resourceclaims", obj)

    def pod_gone(self, pod: PodRecord) -> None:
        """The pod left the API: its claim is released and deleted (resourceclaim controller)."""
        if pod.claim is None:
            return
        key = (pod.namespace, pod.claim)
        machine = self._claims.pop(key, None)
        if machine is not None and machine in self.nodes:
            held = self.nodes[machine].held
            for device in [d for d, owner in held.items() if owner == key]:
                del held[device]
        self.loops.tx.delete("resourceclaims", pod.namespace, pod.claim)
