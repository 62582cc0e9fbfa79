"""Dynamic Resource Allocation on a live cluster: which `resource.k8s.io` version the server
offers, the ResourceSlices and ResourceClaims read in it, and the nodes where the NVIDIA DRA
driver's kubelet plugin runs.

A cluster that does not serve the group (EKS before 1.33 without the beta enabled) reads as
no DRA at all, and one whose RBAC refuses the reads gives one notice and otherwise the same:
everything then behaves as with the device plugin alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

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
    PLUGIN_DEVICE,
    PLUGIN_DRA,
    GpuPluginPod,
    NodeDevices,
    Pod,
    ResourceClaim,
    ResourceSlice,
    dra_devices_by_node,
)

T = TypeVar("T")

DRA_GROUP = "resource.k8s.io"
# Newest first; v1 is GA in Kubernetes 1.34, v1beta2 came in 1.33, v1beta1 in 1.32
# (kubernetes v1.34 staging/src/k8s.io/api/resource/*/types.go).
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
# The kubelet plugin pods of the NVIDIA DRA driver, by each way it is installed. A label
# selector cannot OR two keys, so each is listed on its own and the pods are merged.
DRA_PLUGIN_SELECTORS = (
    # the chart `dra-driver-nvidia-gpu` from v0.4.0: "<chart name>-component: kubelet-plugin"
    # (kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1 deployments/helm/dra-driver-nvidia-gpu/
    # templates/_helpers.tpl "selectorLabels", kubeletplugin.yaml componentName)
    "dra-driver-nvidia-gpu-component=kubelet-plugin",
    # gpu-operator's GPUCluster deploying the driver (NVIDIA/gpu-operator@v26.7.0
    # manifests/state-dra-driver/0500_daemonset.yaml)
    "app=nvidia-dra-driver-kubelet-plugin",
    # the chart `nvidia-dra-driver-gpu` before (NVIDIA/k8s-dra-driver-gpu@v25.8.0
    # deployments/helm/nvidia-dra-driver-gpu/templates/_helpers.tpl "selectorLabels")
    "nvidia-dra-driver-gpu-component=kubelet-plugin",
)
# The gate that lets the plugin create and destroy MIG devices itself (default false,
# kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1 pkg/featuregates/featuregates.go); at start it
# destroys every MIG device its checkpoint does not name (cmd/gpu-kubelet-plugin/driver.go
# NewDriver: state.DestroyUnknownMIGDevices). Both the chart (templates/kubeletplugin.yaml) and
# gpu-operator's GPUCluster (NVIDIA/gpu-operator@v26.7.0 manifests/state-dra-driver/
# 0500_daemonset.yaml) hand the gates over as FEATURE_GATES="Name=value,…"; the flag
# `--feature-gates` (pkg/flags/featuregates.go) takes the same string.
DYNAMIC_MIG_GATE = "DynamicMIG"


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


def is_dra_plugin(labels: Mapping[str, str]) -> bool:
    """Whether a pod's labels match any of DRA_PLUGIN_SELECTORS."""
    return any(
        labels.get(key) == value
        for key, _, value in (s.partition("=") for s in DRA_PLUGIN_SELECTORS)
    )


def list_plugin_pods(
    client: ClusterClient, parse: Callable[[dict[str, Any]], T], node: str = ""
) -> list[T]:
    """The DRA kubelet plugin's pods by every selector (on `node` when given), each once."""
    seen: set[tuple[str, str]] = set()
    found: list[T] = []
    for selector in DRA_PLUGIN_SELECTORS:
        query: dict[str, Any] = {"label_selector": selector}
        if node:
            query["field_selector"] = f"spec.nodeName={node}"
        for raw in client.list(PODS, lambda r: r, **query).items:
            meta = raw.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if key not in seen:
                seen.add(key)
                found.append(parse(raw))
    return found


# NVIDIA's device plugin pods, by each way it is installed: gpu-operator's operand
# (NVIDIA/gpu-operator@v26.7.0 assets/state-device-plugin/0500_daemonset.yaml), the chart
# `nvidia-device-plugin` (NVIDIA/k8s-device-plugin@v0.20.0 deployments/helm/
# nvidia-device-plugin/templates/_helpers.tpl "templateLabels"; its gpu-feature-discovery and
# mps-control-daemon DaemonSets carry the same label, told apart by their names) and the
# static manifest (deployments/static/nvidia-device-plugin.yml).
DEVICE_PLUGIN_SELECTORS = (
    "app=nvidia-device-plugin-daemonset",
    "app.kubernetes.io/name=nvidia-device-plugin",
    "name=nvidia-device-plugin-ds",
)
_CHART_SIBLINGS = ("-gpu-feature-discovery", "-mps-control-daemon")


def plugin_kind(raw: Mapping[str, Any]) -> str:
    """PLUGIN_DRA, PLUGIN_DEVICE, or "" for a pod that is neither plugin."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    if is_dra_plugin(labels):
        return PLUGIN_DRA
    if not any(
        labels.get(key) == value
        for key, _, value in (s.partition("=") for s in DEVICE_PLUGIN_SELECTORS)
    ):
        return ""
    owners = meta.get("ownerReferences")
    names = [str(o.get("name") or "") for o in owners or () if isinstance(o, dict)]
    if any(n.endswith(_CHART_SIBLINGS) for n in names):
        return ""
    return PLUGIN_DEVICE


def gpu_plugin_pods(raws: Iterable[Mapping[str, Any]]) -> tuple[GpuPluginPod, ...]:
    """The device plugin's and the DRA kubelet plugin's pods among raw pods."""
    found = []
    for raw in raws:
        kind = plugin_kind(raw)
        if kind:
            found.append(GpuPluginPod.from_api(raw, kind))
    return tuple(found)


def load_gpu_plugin_pods(client: ClusterClient) -> tuple[GpuPluginPod, ...]:
    """Every GPU plugin pod in the cluster, by each selector, each once. ClusterError (a
    refusal to list pods) goes to the caller."""
    return gpu_plugin_pods(raw_gpu_plugin_pods(client))


def raw_gpu_plugin_pods(client: ClusterClient) -> list[dict[str, Any]]:
    """The GPU plugin pods as the API server sent them, by each selector, each once (a bundle
    keeps them cluster-wide: which nodes run the DRA driver decides how every node's GPUs are
    read). ClusterError goes to the caller."""
    seen: set[tuple[str, str]] = set()
    raws: list[dict[str, Any]] = []
    for selector in (*DRA_PLUGIN_SELECTORS, *DEVICE_PLUGIN_SELECTORS):
        for raw in client.list(PODS, lambda r: r, label_selector=selector).items:
            meta = raw.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if key not in seen:
                seen.add(key)
                raws.append(raw)
    return raws


def plugin_node_names(client: ClusterClient) -> frozenset[str]:
    """Nodes where a DRA kubelet plugin pod of the NVIDIA driver is running now."""
    return plugin_nodes_of(list_plugin_pods(client, Pod.from_api))


def plugin_nodes_of(pods: Iterable[Pod]) -> frozenset[str]:
    """The nodes of those pods that are the NVIDIA DRA driver's kubelet plugin and run."""
    return frozenset(
        p.node_name
        for p in pods
        if is_dra_plugin(p.labels) and p.phase == "Running" and p.deleting is None and p.node_name
    )


def dynamic_mig_gate(raw_pod: Mapping[str, Any]) -> bool:
    """Whether a plugin pod's feature gates turn DynamicMIG on: FEATURE_GATES, then a
    `--feature-gates` argument (a flag wins over its variable); within one string the last
    setting wins, values as strconv.ParseBool reads them; on in any container is on."""
    spec = raw_pod.get("spec") if isinstance(raw_pod, Mapping) else None
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    on = False
    for container in containers if isinstance(containers, list) else ():
        if not isinstance(container, dict):
            continue
        value = False
        gates: list[str] = []
        envs, raw_args = container.get("env"), container.get("args")
        for env in envs if isinstance(envs, list) else ():
            if isinstance(env, dict) and env.get("name") == "FEATURE_GATES":
                gates.append(str(env.get("value") or ""))
        args = [a for a in raw_args if isinstance(a, str)] if isinstance(raw_args, list) else []
        for i, arg in enumerate(args):
            if arg.startswith("--feature-gates="):
                gates.append(arg.split("=", 1)[1])
            elif arg == "--feature-gates" and i + 1 < len(args):
                gates.append(args[i + 1])
        for text in gates:
            for token in text.split(","):
                name, _, setting = token.partition("=")
                if name.strip() == DYNAMIC_MIG_GATE:
                    value = setting.strip() in ("1", "t", "T", "TRUE", "true", "True")
        on = on or value  # any of the pod's plugin containers running with it
    return on


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
    dynamic_gate: bool = False  # a plugin pod there runs with DynamicMIG=true

    @property
    def dynamic_mig(self) -> bool:
        """Whether the plugin makes and destroys MIG devices itself on this node: its gate, or
        slices publishing partitionable devices (model/dra.py NodeDevices.dynamic)."""
        return self.dynamic_gate or (self.devices is not None and self.devices.dynamic)

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
    raw_pods = [
        r
        for r in list_plugin_pods(client, dict, node)
        if not (r.get("metadata") or {}).get("deletionTimestamp")
    ]
    return NodeDra(
        version,
        dra_devices_by_node(slices).get(node),
        tuple(Pod.from_api(r) for r in raw_pods),
        any(dynamic_mig_gate(r) for r in raw_pods),
    )
