"""Dynamic Resource Allocation on a live cluster: which `resource.k8s.io` version the server
offers, the ResourceSlices and ResourceClaims read in it, and the nodes where the NVIDIA DRA
driver's kubelet plugin runs.

A cluster that does not serve the group (EKS before 1.33 without the beta enabled) reads as
no DRA at all, and one whose RBAC refuses the reads gives one notice and otherwise the same:
everything then behaves as with the device plugin alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mignurse.cluster.client import (
    PODS,
    ApiError,
    ClusterClient,
    ClusterError,
    Forbidden,
    NotFound,
    Resource,
)
from mignurse.model import (
    DRA_GPU_DRIVER,
    NodeDevices,
    Pod,
    ResourceClaim,
    ResourceSlice,
    dra_devices_by_node,
)

DRA_GROUP = "resource.k8s.io"
# Newest first; v1 is GA in Kubernetes 1.34, v1beta2 came in 1.33, v1beta1 in 1.32
# (kubernetes v1.34 staging/src/k8s.io/api/resource/*/types.go).
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
# The kubelet plugin pods of the nvidia-dra-driver-gpu chart: its per-component selector label
# (NVIDIA/k8s-dra-driver-gpu@v25.8.0 deployments/helm/nvidia-dra-driver-gpu/templates/
# _helpers.tpl "selectorLabels", kubeletplugin.yaml componentName "kubelet-plugin").
DRA_PLUGIN_SELECTOR = "nvidia-dra-driver-gpu-component=kubelet-plugin"


def resource_slices(version: str) -> Resource:
    return Resource(DRA_GROUP, version, "resourceslices", "ResourceSlice")


def resource_claims(version: str) -> Resource:
    return Resource(DRA_GROUP, version, "resourceclaims", "ResourceClaim", namespaced=True)


def pick_version(group: Any) -> str:
    """From an APIGroup discovery document: the server's preferred version when mignurse reads
    it, else the newest version both know; "" when they share none."""
    if not isinstance(group, dict):
        return ""
    served = [
        str(v.get("version") or "")
        for v in group.get("versions") or ()
        if isinstance(v, dict) and v.get("version")
    ]
    preferred = str((group.get("preferredVersion") or {}).get("version") or "")
    if preferred in DRA_VERSIONS and preferred in served:
        return preferred
    return next((v for v in DRA_VERSIONS if v in served), "")


def dra_version(client: ClusterClient) -> str:
    """The `resource.k8s.io` version to read on this cluster, "" when none is served.
    ClusterError (a refusal other than 404) goes to the caller."""
    try:
        group = client.get_json(f"/apis/{DRA_GROUP}")
    except NotFound:
        return ""
    return pick_version(group)


@dataclass(frozen=True)
class DraState:
    """What the cluster says about DRA GPUs: empty when it serves no `resource.k8s.io`."""

    version: str = ""  # the resource.k8s.io version read; "" none
    slices: tuple[ResourceSlice, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    plugin_nodes: frozenset[str] = frozenset()  # nodes running the DRA driver's kubelet plugin
    notice: str = ""  # at most one line: what could not be read
    slices_read: bool = False  # RBAC let the ResourceSlices be listed (and so watched)

    def devices(self) -> dict[str, NodeDevices]:
        return dra_devices_by_node(self.slices)


def load_dra(client: ClusterClient, *, with_claims: bool = True) -> DraState:
    """ResourceSlices (every driver's; the NVIDIA driver's are picked later), ResourceClaims
    that hold devices, and the DRA kubelet plugin's nodes. Refusals become one notice."""
    try:
        version = dra_version(client)
    except ClusterError as exc:
        return DraState(notice=f"cannot discover {DRA_GROUP}: {exc}; DRA devices are left out")
    if not version:
        return DraState()
    refused: list[str] = []
    slices: tuple[ResourceSlice, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    plugin_nodes: frozenset[str] = frozenset()
    slices_read = False
    try:
        slices = tuple(client.list(resource_slices(version), ResourceSlice.from_api).items)
        slices_read = True
    except (Forbidden, NotFound) as exc:
        refused.append(f"{resource_slices(version).qualified} ({_why(exc)})")
    if with_claims:
        try:
            listed = client.list(resource_claims(version), ResourceClaim.from_api).items
            claims = tuple(c for c in listed if c.devices)
        except (Forbidden, NotFound) as exc:
            refused.append(f"{resource_claims(version).qualified} ({_why(exc)})")
    try:
        # without the slices a plugin's node cannot be told from one that lost its GPUs
        plugin_nodes = plugin_node_names(client) if slices_read else frozenset()
    except (Forbidden, NotFound) as exc:
        refused.append(f"pods of the DRA driver ({_why(exc)})")
    notice = ""
    if refused:
        notice = (
            f"{DRA_GROUP}/{version} is served but mignurse may not read "
            + ", ".join(refused)
            + f": {DRA_GPU_DRIVER} devices are judged without it"
        )
    return DraState(version, slices, claims, plugin_nodes, notice, slices_read)


def plugin_node_names(client: ClusterClient) -> frozenset[str]:
    """Nodes where a DRA kubelet plugin pod of the NVIDIA driver is running now."""
    return plugin_nodes_of(
        client.list(PODS, Pod.from_api, label_selector=DRA_PLUGIN_SELECTOR).items
    )


def plugin_nodes_of(pods: Iterable[Pod]) -> frozenset[str]:
    """The nodes of those pods that are the NVIDIA DRA driver's kubelet plugin and run."""
    key, _, value = DRA_PLUGIN_SELECTOR.partition("=")
    return frozenset(
        p.node_name
        for p in pods
        if p.labels.get(key) == value
        and p.phase == "Running"
        and p.deleting is None
        and p.node_name
    )


def node_claims(client: ClusterClient, node: str) -> list[ResourceClaim]:
    """The ResourceClaims holding NVIDIA DRA devices on one node: allocated from its pool
    (the driver names the pool after the node: k8s-dra-driver-gpu@v25.8.0
    cmd/gpu-kubelet-plugin/driver.go) or bound to it; [] on a cluster without DRA.
    ClusterError goes to the caller."""
    version = dra_version(client)
    if not version:
        return []
    listed = client.list(resource_claims(version), ResourceClaim.from_api).items
    return [
        c
        for c in listed
        if c.devices_of() and (c.node_name == node or any(d.pool == node for d in c.devices_of()))
    ]


def _why(exc: ClusterError) -> str:
    return "403 Forbidden" if isinstance(exc, Forbidden) else "404 Not Found"


@dataclass(frozen=True)
class NodeDra:
    """One node's NVIDIA DRA side, read now: its published devices and plugin pods."""

    version: str = ""  # "" : the cluster serves no resource.k8s.io
    devices: NodeDevices | None = None
    plugin_pods: tuple[Pod, ...] = ()  # the DRA kubelet plugin's pods on the node

    @property
    def on(self) -> bool:
        """Whether the node's GPUs reach pods through the NVIDIA DRA driver."""
        return self.devices is not None or bool(self.plugin_pods)


def node_dra(client: ClusterClient, node: str) -> NodeDra:
    """The node's gpu.nvidia.com devices and DRA plugin pods. ClusterError goes to the caller
    (a refusal to read slices of a cluster that serves them is not "no DRA")."""
    version = dra_version(client)
    if not version:
        return NodeDra()
    kind = resource_slices(version)
    try:
        slices = client.list(
            kind, ResourceSlice.from_api, field_selector=f"spec.nodeName={node}"
        ).items
    except ApiError:  # a server without that field selector: filter here
        slices = [s for s in client.list(kind, ResourceSlice.from_api).items if s.node_name == node]
    pods = client.list(
        PODS,
        Pod.from_api,
        label_selector=DRA_PLUGIN_SELECTOR,
        field_selector=f"spec.nodeName={node}",
    ).items
    return NodeDra(
        version,
        dra_devices_by_node(slices).get(node),
        tuple(p for p in pods if p.deleting is None),
    )
