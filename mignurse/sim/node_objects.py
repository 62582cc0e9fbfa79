"""Builders of Node objects as kubelet, the EKS AMI and GPU feature discovery write them.

A node's labels (Kubernetes, Karpenter or managed node group, GPU feature discovery and
MIG), its capacity and allocatable with the EKS reserved amounts, its kubelet and node
monitoring agent conditions, and the container images kubelet reports. Every builder is a
pure function of its `NodeSpecInput`, so a seeded scenario builds byte-identical nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mignurse.sim.dra import quantity
from mignurse.sim.hardware import (
    DEFAULT_NVIDIA_DRIVER,
    InstanceType,
    OsImage,
    kernel_for,
    mig_resources,
)
from mignurse.sim.karpenter_objects import TERMINATION_FINALIZER
from mignurse.sim.objects import JsonDict, stable_hex, stable_uuid, ts

ECR = "602401143452.dkr.ecr.{region}.amazonaws.com"


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class NodeSpecInput:
    """Everything the node builder needs; the controllers fill it from the scenario."""

    name: str
    uid: str
    created: float
    region: str
    zone: str
    zone_id: str
    instance: InstanceType
    instance_id: str
    private_ip: str
    capacity_type: str  # on-demand | spot | reserved
    os: OsImage
    image_id: str
    nodepool: str | None = None  # Karpenter NodePool
    nodegroup: str | None = None  # EKS managed node group
    nodeclass: str = "default"
    cluster_name: str = "sim"
    extra_labels: dict[str, str] = field(default_factory=dict)
    mig_config: str | None = None
    mig_strategy: str = "mixed"
    # config → MIG devices per GPU of the file the node's mig-manager reads (None: NVIDIA's
    # built-in file; mignurse.sim.operator_config)
    mig_layouts: Mapping[str, dict[str, int]] | None = None
    taints: tuple[JsonDict, ...] = ()
    gpu_resources: bool = True
    driver_version: str = DEFAULT_NVIDIA_DRIVER
    nodepool_hash: str = ""
    dra: bool = False  # the NVIDIA DRA driver publishes the GPUs: no nvidia.com/* resources


def node_labels(n: NodeSpecInput) -> dict[str, str]:
    """Every label the node carries, sorted: Kubernetes and node feature discovery's, then
    Karpenter's or the managed node group's, then GPU feature discovery's; the scenario's
    own labels last, over any of them."""
    labels = _kubernetes_labels(n)
    if n.nodepool is not None:
        labels.update(_karpenter_labels(n))
    if n.nodegroup is not None:
        labels.update(_nodegroup_labels(n))
    if n.instance.gpu is not None:
        labels.update(_gpu_labels(n))
    labels.update(n.extra_labels)
    return dict(sorted(labels.items()))


def _kubernetes_labels(n: NodeSpecInput) -> dict[str, str]:
    """Well-known labels (kubelet, the AWS cloud provider, the EBS CSI driver) and node
    feature discovery's CPU, kernel and OS labels."""
    it = n.instance
    return {
        "beta.kubernetes.io/arch": it.arch,
        "beta.kubernetes.io/instance-type": it.name,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": n.region,
        "failure-domain.beta.kubernetes.io/zone": n.zone,
        "k8s.io/cloud-provider-aws": stable_hex("cloud-provider", n.cluster_name, length=32),
        "kubernetes.io/arch": it.arch,
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": it.name,
        "topology.ebs.csi.aws.com/zone": n.zone,
        "topology.k8s.aws/zone-id": n.zone_id,
        "topology.kubernetes.io/region": n.region,
        "topology.kubernetes.io/zone": n.zone,
        "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD"
        if it.cpu_manufacturer == "amd"
        else ("ARM" if it.arch == "arm64" else "Intel"),
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "feature.node.kubernetes.io/kernel-version.minor": "1",
        "feature.node.kubernetes.io/system-os_release.ID": "amzn"
        if n.os.family == "al2023"
        else "bottlerocket",
    }


def _karpenter_labels(n: NodeSpecInput) -> dict[str, str]:
    """What Karpenter puts on a node it launched: its NodePool, capacity type, node class and
    the instance type's well-known labels (GPUs included)."""
    it = n.instance
    assert n.nodepool is not None
    labels = {
        "karpenter.sh/nodepool": n.nodepool,
        "karpenter.sh/capacity-type": n.capacity_type,
        "karpenter.sh/registered": "true",
        "karpenter.k8s.aws/ec2nodeclass": n.nodeclass,
        "karpenter.k8s.aws/instance-category": it.category,
        "karpenter.k8s.aws/instance-family": it.family,
        "karpenter.k8s.aws/instance-generation": it.generation,
        "karpenter.k8s.aws/instance-size": it.size,
        "karpenter.k8s.aws/instance-cpu": str(it.cpu),
        "karpenter.k8s.aws/instance-cpu-manufacturer": it.cpu_manufacturer,
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3100",
        "karpenter.k8s.aws/instance-memory": str(it.memory_mib),
        "karpenter.k8s.aws/instance-network-bandwidth": str(it.network_bandwidth),
        "karpenter.k8s.aws/instance-ebs-bandwidth": str(it.ebs_bandwidth),
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
    }
    if it.local_nvme_gb:
        labels["karpenter.k8s.aws/instance-local-nvme"] = str(it.local_nvme_gb)
    if it.efa:
        labels["vpc.amazonaws.com/efa.present"] = "true"
    if it.gpu is not None:
        labels.update(
            {
                "karpenter.k8s.aws/instance-gpu-count": str(it.gpu_count),
                "karpenter.k8s.aws/instance-gpu-name": it.gpu.karpenter_name,
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                "karpenter.k8s.aws/instance-gpu-memory": str(it.gpu.ec2_memory_mib),
            }
        )
    return labels


def _nodegroup_labels(n: NodeSpecInput) -> dict[str, str]:
    """What an EKS managed node group's launch template puts on its nodes."""
    assert n.nodegroup is not None
    return {
        "eks.amazonaws.com/nodegroup": n.nodegroup,
        "eks.amazonaws.com/capacityType": "SPOT" if n.capacity_type == "spot" else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup-image": n.image_id,
        "eks.amazonaws.com/sourceLaunchTemplateId": "lt-"
        + stable_hex("lt", n.nodegroup, length=17),
        "eks.amazonaws.com/sourceLaunchTemplateVersion": "3",
        "alpha.eksctl.io/cluster-name": n.cluster_name,
    }


def _gpu_labels(n: NodeSpecInput) -> dict[str, str]:
    """GPU feature discovery's labels, the GPU Operator's deploy labels, and the MIG labels
    (strategy, config, and a count per MIG resource the device plugin advertises)."""
    it = n.instance
    gpu = it.gpu
    assert gpu is not None
    major, minor, rev = n.driver_version.split(".")
    labels = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gpu.product,
        "nvidia.com/gpu.count": str(it.gpu_count),
        "nvidia.com/gpu.memory": str(gpu.gfd_memory_mib),
        "nvidia.com/gpu.family": gpu.family,
        "nvidia.com/gpu.compute.major": str(gpu.compute_major),
        "nvidia.com/gpu.compute.minor": str(gpu.compute_minor),
        "nvidia.com/gpu.machine": it.name.replace(".", "-"),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "8",
        # and their successors (NVIDIA/k8s-device-plugin v0.17.0 internal/lm/nvml.go)
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver-version.full": n.driver_version,
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "8",
        "nvidia.com/cuda.runtime-version.full": "12.8",
        "nvidia.com/mig.capable": "true" if gpu.mig_capable else "false",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.driver": "pre-installed",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gfd.timestamp": str(int(n.created) + 90),
    }
    if gpu.mig_capable:
        labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
        labels["nvidia.com/mig.strategy"] = n.mig_strategy
        if n.mig_config:
            labels["nvidia.com/mig.config"] = n.mig_config
            if n.gpu_resources and not n.dra and n.mig_config != "all-disabled":
                resources = mig_resources(it, n.mig_config, n.mig_strategy, n.mig_layouts)
                for res, count in resources.items():
                    if res.startswith("nvidia.com/mig-"):
                        labels[f"{res}.count"] = str(count)
    return labels


def node_resources(n: NodeSpecInput) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as kubelet reports them, with the EKS reserved amounts."""
    it = n.instance
    mem_ki = it.memory_mib * 1024
    # EKS AMI kube-reserved: 255Mi + 11Mi per pod, plus 100Mi eviction threshold.
    reserved_mem_ki = (255 + 11 * it.max_pods + 100) * 1024
    reserved_cpu_m = 60 + 10 * max(0, it.cpu - 1) // 2 if it.cpu > 1 else 60
    eph_ki = 104845292
    capacity = {
        "cpu": str(it.cpu),
        "ephemeral-storage": f"{eph_ki}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": quantity(mem_ki * 1024),
        "pods": str(it.max_pods),
    }
    allocatable = {
        "cpu": f"{it.cpu * 1000 - reserved_cpu_m}m",
        "ephemeral-storage": str(int(eph_ki * 1024 * 0.9)),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": quantity((mem_ki - reserved_mem_ki) * 1024),
        "pods": str(it.max_pods),
    }
    if it.efa:
        capacity["vpc.amazonaws.com/efa"] = allocatable["vpc.amazonaws.com/efa"] = str(it.efa)
    if it.gpu is not None and n.gpu_resources and not n.dra:
        for res, count in mig_resources(it, n.mig_config, n.mig_strategy, n.mig_layouts).items():
            capacity[res] = allocatable[res] = str(count)
    return dict(sorted(capacity.items())), dict(sorted(allocatable.items()))


def kubelet_condition(
    ctype: str, status: str, reason: str, message: str, now: float, since: float
) -> JsonDict:
    return {
        "type": ctype,
        "status": status,
        "lastHeartbeatTime": ts(now),
        "lastTransitionTime": ts(since),
        "reason": reason,
        "message": message,
    }


KUBELET_HEALTHY = {
    "MemoryPressure": (
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
READY_TRUE = ("True", "KubeletReady", "kubelet is posting ready status")
READY_NOT_YET = (
    "False",
    "KubeletNotReady",
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized",
)

NMA_HEALTHY: dict[str, tuple[str, str]] = {
    "KernelReady": ("KernelIsReady", "Monitoring for the Kernel system is active"),
    "NetworkingReady": ("NetworkingIsReady", "Monitoring for the Networking system is active"),
    "StorageReady": ("DiskIsReady", "Monitoring for the Disk system is active"),
    "ContainerRuntimeReady": (
        "ContainerRuntimeIsReady",
        "Monitoring for the ContainerRuntime system is active",
    ),
    "AcceleratedHardwareReady": ("NvidiaGPUIsReady", "Monitoring for the Nvidia system is active"),
}


def build_node(n: NodeSpecInput, *, ready: bool, ready_since: float | None = None) -> JsonDict:
    it = n.instance
    capacity, allocatable = node_resources(n)
    since = ready_since if ready_since is not None else n.created
    ready_cond = READY_TRUE if ready else READY_NOT_YET
    conditions = [
        kubelet_condition(t, *KUBELET_HEALTHY[t], now=since, since=n.created)
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    conditions.append(kubelet_condition("Ready", *ready_cond, now=since, since=since))
    taints = list(n.taints)
    if not ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    annotations = {
        "alpha.kubernetes.io/provided-node-ip": n.private_ip,
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"{n.instance_id}"}}',
    }
    if n.nodepool is not None:
        annotations.update(
            {
                "karpenter.k8s.aws/ec2nodeclass-hash": stable_hex("nc", n.nodeclass, length=19),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.sh/nodepool-hash": n.nodepool_hash or stable_hex("np", n.nodepool),
                "karpenter.sh/nodepool-hash-version": "v3",
            }
        )
    if it.gpu is not None:
        annotations["nfd.node.kubernetes.io/feature-labels"] = (
            "cpu-model.vendor_id,kernel-version.major,kernel-version.minor,pci-10de.present,"
            "system-os_release.ID"
        )
    kernel = kernel_for(n.os, it.arch)
    metadata: JsonDict = {
        "name": n.name,
        "uid": n.uid,
        "resourceVersion": "0",
        "creationTimestamp": ts(n.created),
        "labels": node_labels(n),
        "annotations": dict(sorted(annotations.items())),
    }
    if n.nodepool is not None:
        metadata["finalizers"] = [TERMINATION_FINALIZER]
    spec: JsonDict = {"providerID": f"aws:///{n.zone}/{n.instance_id}"}
    if taints:
        spec["taints"] = taints
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": n.private_ip},
                {"type": "InternalDNS", "address": n.name},
                {"type": "Hostname", "address": n.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": stable_hex("machine", n.instance_id, length=32),
                "systemUUID": "ec2" + stable_uuid("sys", n.instance_id)[3:],
                "bootID": stable_uuid("boot", n.instance_id, n.created),
                "kernelVersion": kernel,
                "osImage": n.os.os_image,
                "containerRuntimeVersion": n.os.container_runtime,
                "kubeletVersion": n.os.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": it.arch,
            },
            "images": node_images(n.region, it.gpu is not None, variant=len(n.name)),
        },
    }


def node_name_for_ip(ip: str, region: str) -> str:
    suffix = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    return f"ip-{ip.replace('.', '-')}.{suffix}"


# --------------------------------------------------------------------------- container images

_BASE_IMAGES: tuple[tuple[str, str, int], ...] = (
    ("{ecr}/amazon-k8s-cni", "v1.19.2-eksbuild.1", 47912346),
    ("{ecr}/amazon-k8s-cni-init", "v1.19.2-eksbuild.1", 63508421),
    ("{ecr}/amazon/aws-network-policy-agent", "v1.1.6-eksbuild.1", 34117654),
    ("{ecr}/eks/kube-proxy", "v1.32.0-minimal-eksbuild.2", 35283011),
    ("{ecr}/eks/pause", "3.10", 299024),
    ("{ecr}/eks/aws-ebs-csi-driver", "v1.40.0", 34412113),
    ("{ecr}/eks/csi-node-driver-registrar", "v2.13.0-eks-1-32-5", 11251720),
    ("{ecr}/eks/livenessprobe", "v2.15.0-eks-1-32-5", 10318711),
    ("{ecr}/eks/eks-pod-identity-agent", "0.1.17", 22144361),
    ("{ecr}/eks/eks-node-monitoring-agent", "v1.2.0-eksbuild.1", 96511522),
    ("{ecr}/eks/coredns", "v1.11.4-eksbuild.2", 16542208),
    ("{ecr}/eks/aws-efs-csi-driver", "v2.1.4", 39874520),
    ("public.ecr.aws/aws-observability/aws-for-fluent-bit", "2.32.5", 58201113),
    ("public.ecr.aws/cloudwatch-agent/cloudwatch-agent", "1.300051.0b992", 71238841),
    ("quay.io/prometheus/node-exporter", "v1.8.2", 12048114),
    ("registry.k8s.io/nfd/node-feature-discovery", "v0.16.6", 68011247),
    ("public.ecr.aws/datadog/agent", "7.61.0", 412557213),
    (
        "public.ecr.aws/aws-secrets-manager/secrets-store-csi-driver-provider-aws",
        "1.0.r2-80",
        20011567,
    ),
    ("registry.k8s.io/csi-secrets-store/driver", "v1.4.7", 36201143),
    ("public.ecr.aws/karpenter/controller", "1.4.0", 58836521),
    ("docker.io/istio/proxyv2", "1.24.2", 96310412),
    ("docker.io/library/busybox", "1.37.0", 2166802),
)

_GPU_IMAGES: tuple[tuple[str, str, int], ...] = (
    ("nvcr.io/nvidia/k8s-device-plugin", "v0.17.0", 133501742),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.9-3.6.1-ubuntu22.04", 343618201),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", "v24.9.2", 132204557),
    ("nvcr.io/nvidia/k8s/container-toolkit", "v1.17.4-ubuntu20.04", 156120391),
    ("nvcr.io/nvidia/cloud-native/k8s-mig-manager", "v0.10.0-ubuntu20.04", 221339054),
    ("nvcr.io/nvidia/cloud-native/dcgm", "3.3.9-1-ubuntu22.04", 1411553222),
    ("nvcr.io/nvidia/gpu-operator", "v24.9.2", 91882210),
    ("nvcr.io/nvidia/cuda", "12.6.3-base-ubuntu22.04", 98771322),
    ("nvcr.io/nvidia/tritonserver", "25.01-py3", 16432110912),
    ("nvcr.io/nvidia/pytorch", "25.01-py3", 11982114533),
    ("docker.io/vllm/vllm-openai", "v0.8.4", 9122557810),
    ("nvcr.io/nvidia/nemo", "24.12", 21338110043),
    (
        "public.ecr.aws/neuron/pytorch-inference-neuronx",
        "2.1.2-neuronx-py310-sdk2.20.2",
        6122003410,
    ),
    ("nvcr.io/nvidia/k8s/cuda-sample", "vectoradd-cuda12.5.0", 91331102),
    ("nvcr.io/nvidia/cloud-native/nvidia-fs", "2.20.5", 44120334),
    ("nvcr.io/nvidia/mellanox/doca-driver", "25.01-0.6.0.0-0", 512330112),
    ("ghcr.io/huggingface/text-generation-inference", "3.0.2", 5011882041),
    ("nvcr.io/nvidia/k8s/kube-rbac-proxy", "v0.18.1", 22771043),
    ("nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin", "v0.0.1", 55112089),
    ("nvcr.io/nvidia/gds", "2.20.5", 81449022),
    ("nvcr.io/nvidia/dcgm", "4.1.1-1-ubuntu22.04", 1531224118),
)


def node_images(region: str, gpu: bool, variant: int = 0) -> list[JsonDict]:
    """`status.images` as kubelet reports it: digest name first, then the tag, largest first."""
    ecr = ECR.format(region=region)
    chosen = list(_BASE_IMAGES)
    if gpu:
        chosen += list(_GPU_IMAGES)
    else:
        chosen = chosen[: 18 + variant % 4]
    images: list[JsonDict] = []
    for repo, tag, size in chosen:
        repo = repo.format(ecr=ecr)
        digest = stable_hex("digest", repo, tag, length=64)
        images.append({"names": [f"{repo}@sha256:{digest}", f"{repo}:{tag}"], "sizeBytes": size})
    images.sort(key=lambda i: -int(str(i["sizeBytes"])))
    return images
