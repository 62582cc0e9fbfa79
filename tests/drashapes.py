"""DRA objects in the shapes the API server returns them, for tests that need many nodes.

Devices as NVIDIA/k8s-dra-driver-gpu@v25.8.0 cmd/gpu-kubelet-plugin/deviceinfo.go publishes
them (gpu-N with type=gpu; gpu-N-mig-<giProfileId>-<start>-<size> with type=mig, profile,
uuid, parentUUID), one slice per node whose pool is named after the node (driver.go), in
resource.k8s.io/v1 (or v1beta1 with `basic`) as kubernetes v1.34 types.go writes them. The
corpus (tests/corpus/dra/) holds the hand-written examples; these build fleets of them.
"""

from __future__ import annotations

import hashlib
from typing import Any

# NVML GPU instance profile ids by slice count (nvml.h NVML_GPU_INSTANCE_PROFILE_*_SLICE)
GI_PROFILE_ID = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}
CREATED = "2026-11-29T02:00:00Z"


def _slices_of(profile: str) -> int:
    return int(profile.split("g.", 1)[0].split(".")[-1])


def _tag(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def gpu_uuid(node: str, minor: int) -> str:
    tag = _tag(node, minor)
    return f"GPU-{tag[:8]}-0000-4000-8000-{tag}"


def mig_uuid(node: str, minor: int, start: int) -> str:
    tag = _tag(node, minor, start)
    return f"MIG-{tag[:8]}-0000-5000-8000-{tag}"


def devices(
    node: str, per_gpu: list[dict[str, int]], product: str, *, basic: bool = False
) -> list[dict[str, Any]]:
    """gpu-N and its MIG devices, for each GPU's profile counts."""
    found = []
    for minor, layout in enumerate(per_gpu):
        parent = gpu_uuid(node, minor)
        common = {
            "productName": {"string": product},
            "architecture": {"string": "Ampere"},
            "driverVersion": {"version": "580.95.5"},
            "pcieBusID": {"string": f"0000:{16 + minor:02x}:00.0"},
        }
        gpu_attrs = {"type": {"string": "gpu"}, "uuid": {"string": parent}, **common}
        body: dict[str, Any] = {"attributes": gpu_attrs, "capacity": {"memory": {"value": "40Gi"}}}
        found.append({"name": f"gpu-{minor}", **({"basic": body} if basic else body)})
        start = 0
        for profile, count in sorted(layout.items()):
            size = _slices_of(profile)
            for _ in range(count):
                attrs = {
                    "type": {"string": "mig"},
                    "uuid": {"string": mig_uuid(node, minor, start)},
                    "parentUUID": {"string": parent},
                    "profile": {"string": profile},
                    **common,
                }
                capacity = {f"memorySlice{i}": {"value": "1"} for i in range(start, start + size)}
                body = {"attributes": attrs, "capacity": capacity}
                name = f"gpu-{minor}-mig-{GI_PROFILE_ID.get(size, 9)}-{start}-{size}"
                found.append({"name": name, **({"basic": body} if basic else body)})
                start += size
    return found


def resource_slice(
    node: str,
    per_gpu: list[dict[str, int]],
    *,
    product: str = "NVIDIA A100-SXM4-40GB",
    version: str = "v1",
    generation: int = 1,
    slice_count: int = 1,
    suffix: str = "x1",
    driver: str = "gpu.nvidia.com",
) -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{node}-{driver}-{suffix}",
            "uid": f"slice-{node}-{suffix}",
            "creationTimestamp": CREATED,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node}],
        },
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": slice_count},
            "devices": devices(node, per_gpu, product, basic=version == "v1beta1"),
        },
    }


def dra_node(
    name: str,
    *,
    config: str = "all-1g.5gb",
    state: str = "success",
    instance_type: str = "p4d.24xlarge",
    gpu_name: str = "a100",
    gpu_memory: str = "40960",
    gpu_count: str = "8",
    pool: str = "gpu-dra",
    created: str = CREATED,
    ready: bool = True,
) -> dict[str, Any]:
    """A Karpenter GPU node whose GPUs reach pods through DRA: no nvidia.com/* resources."""
    labels = {
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.k8s.aws/instance-gpu-name": gpu_name,
        "karpenter.k8s.aws/instance-gpu-memory": gpu_memory,
        "karpenter.k8s.aws/instance-gpu-count": gpu_count,
        "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/mig.config": config,
        "nvidia.com/mig.config.state": state,
    }
    status = "True" if ready else "False"
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": created,
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-0{_tag(name)}abcd"},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastTransitionTime": created,
                    "lastHeartbeatTime": created,
                }
            ],
            "capacity": {"cpu": "96", "pods": "110"},
            "allocatable": {"cpu": "95", "pods": "110"},
        },
    }


def plugin_pod(node: str, *, phase: str = "Running", created: str = CREATED) -> dict[str, Any]:
    """The NVIDIA DRA driver's kubelet plugin pod on a node (nvidia-dra-driver-gpu chart)."""
    short = node.split(".", 1)[0]
    return {
        "metadata": {
            "name": f"nvidia-dra-driver-gpu-kubelet-plugin-{short}",
            "namespace": "nvidia-dra-driver-gpu",
            "uid": f"plugin-{short}",
            "creationTimestamp": created,
            "labels": {
                "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
                "nvidia-dra-driver-gpu-component": "kubelet-plugin",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": "nvidia-dra-driver-gpu-kubelet-plugin",
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def kubectl_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
