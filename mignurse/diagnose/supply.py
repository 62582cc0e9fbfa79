"""What a GPU node offers pods: the device plugin's extended resources in its allocatable, or
the devices the NVIDIA DRA driver publishes for it in ResourceSlices.

On a DRA node an allocatable without `nvidia.com/*` is normal; its GPUs are lost only when
the driver's kubelet plugin runs there and its pool is gone (or holds nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from mignurse.cluster.snapshot import GPU_SOURCE_DRA, Snapshot
from mignurse.diagnose.findings import Evidence
from mignurse.gpu.profiles import describe_counts, mig_slices
from mignurse.model import DRA_GPU_DRIVER, RESOURCE_GPU, Node, NodeDevices

SOURCE_SLICES = "resourceslice"  # evidence source of what ResourceSlices say


@dataclass(frozen=True)
class Supply:
    node: str
    source: str  # dra | device-plugin
    devices: NodeDevices | None = None  # the published DRA devices, when any
    plugin_runs: bool = False  # the DRA driver's kubelet plugin runs on the node

    @property
    def dra(self) -> bool:
        return self.source == GPU_SOURCE_DRA

    def mig(self, node: Node) -> dict[str, int]:
        """MIG devices (DRA) or advertised MIG slices (device plugin), by profile."""
        if self.dra:
            return self.devices.mig_counts() if self.devices is not None else {}
        return mig_slices(node)

    def gpus(self, node: Node) -> int:
        """Whole GPUs offered: published `type=gpu` devices, or allocatable nvidia.com/gpu."""
        if self.dra:
            return len(self.devices.gpus) if self.devices is not None else 0
        return node.gpu_allocatable.get(RESOURCE_GPU, 0)

    def unusable(self, node: Node) -> bool:
        """No GPU capacity for pods: no MIG devices where a MIG layout is asked for, no whole
        GPU under all-disabled."""
        if node.mig_config == "all-disabled":
            return self.gpus(node) == 0
        return not self.mig(node)

    def evidence(self, node: Node) -> Evidence:
        """One line on what the node offers, from where."""
        if not self.dra:
            return Evidence(
                None,
                "node",
                f"allocatable MIG slices {describe_counts(self.mig(node))}, "
                f"{RESOURCE_GPU} {self.gpus(node)}",
            )
        return Evidence(None, SOURCE_SLICES, describe_published(self.devices, self.plugin_runs))


def describe_published(devices: NodeDevices | None, plugin_runs: bool) -> str:
    """What a node's gpu.nvidia.com ResourceSlices hold, in one line."""
    if devices is None:
        runs = "its kubelet plugin runs on the node" if plugin_runs else "no slice"
        return f"no {DRA_GPU_DRIVER} ResourceSlice for the node ({runs})"
    words = (
        f"{DRA_GPU_DRIVER} pool {devices.pool} generation {devices.generation}: "
        f"{len(devices.gpus)} GPU(s), MIG devices {describe_counts(devices.mig_counts())}"
    )
    if not devices.complete:
        words += f" ({devices.slices} of {devices.slices_expected} slices published so far)"
    if devices.dynamic:
        words += " (DynamicMIG: MIG devices offered as placements, made on allocation)"
    return words


def supply_of(snapshot: Snapshot, node: Node) -> Supply:
    return Supply(
        node=node.name,
        source=snapshot.gpu_source(node),
        devices=snapshot.dra_devices.get(node.name),
        plugin_runs=node.name in snapshot.dra_plugin_nodes,
    )
