"""Builders of raw Kubernetes API JSON shaped like what EKS with Karpenter really returns.

Everything here is a pure function of its arguments (no clock, no RNG): the controllers
pass in names, ids and times, so a seeded scenario always builds byte-identical objects.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mignurse.gpu.models import model_named
from mignurse.gpu.profiles import standard_layouts

JsonDict = dict[str, Any]

KARPENTER_API = "karpenter.sh/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
DEFAULT_KUBELET_VERSION = "v1.32.1-eks-5d632ec"
DEFAULT_CONTAINERD = "containerd://1.7.27"
DEFAULT_NVIDIA_DRIVER = "570.124.06"
ECR = "602401143452.dkr.ecr.{region}.amazonaws.com"
TERMINATION_FINALIZER = "karpenter.sh/termination"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"


def ts(epoch: float) -> str:
    """RFC 3339 with second precision, as the API server renders metav1.Time."""
    return datetime.fromtimestamp(int(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(epoch: float) -> str:
    """metav1.MicroTime rendering (used by Leases and new-style events)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stable_hex(*parts: object, length: int = 16) -> str:
    """Deterministic hex derived from the parts (digests, hashes, boot ids)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return digest[:length]


def stable_uuid(*parts: object) -> str:
    h = stable_hex(*parts, length=32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


# --------------------------------------------------------------------------- instance facts


@dataclass(frozen=True)
class GpuModel:
    """One GPU product as EC2, Karpenter and GPU feature discovery describe it."""

    karpenter_name: str  # karpenter.k8s.aws/instance-gpu-name
    product: str  # nvidia.com/gpu.product (GFD)
    ec2_memory_mib: int  # karpenter.k8s.aws/instance-gpu-memory (per GPU, from EC2)
    gfd_memory_mib: int  # nvidia.com/gpu.memory (what NVML reports)
    family: str  # nvidia.com/gpu.family
    compute_major: int
    compute_minor: int
    mig_layouts: dict[str, dict[str, int]] = field(default_factory=dict)  # per GPU

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_layouts)


# One source for MIG profiles: the same tables the diagnosis rules judge layouts by.
_H100_LAYOUTS = standard_layouts(model_named("H100-80GB"))
_H200_LAYOUTS = standard_layouts(model_named("H200-141GB"))
_A100_40_LAYOUTS = standard_layouts(model_named("A100-40GB"))
_RTX_PRO_6000_LAYOUTS = standard_layouts(model_named("RTX-PRO-6000-Server"))

GPU_MODELS: dict[str, GpuModel] = {
    "h100": GpuModel("h100", "NVIDIA-H100-80GB-HBM3", 81920, 81559, "hopper", 9, 0, _H100_LAYOUTS),
    "h200": GpuModel("h200", "NVIDIA-H200", 144384, 143771, "hopper", 9, 0, _H200_LAYOUTS),
    "a100": GpuModel(
        "a100", "NVIDIA-A100-SXM4-40GB", 40960, 40960, "ampere", 8, 0, _A100_40_LAYOUTS
    ),
    "l40s": GpuModel("l40s", "NVIDIA-L40S", 45776, 46068, "ada-lovelace", 8, 9),
    "l4": GpuModel("l4", "NVIDIA-L4", 22888, 23034, "ada-lovelace", 8, 9),
    "t4g": GpuModel("t4g", "NVIDIA-T4G", 16384, 15360, "turing", 7, 5),
    "a10g": GpuModel("a10g", "NVIDIA-A10G", 22888, 23028, "ampere", 8, 6),
    # EC2 G7e: RTX PRO 6000 Blackwell Server Edition, 96 GB (EC2: 98304 MiB; NVML total
    # 97887 MiB as nvidia-smi shows it), GFD product as below, compute capability 12.0,
    # PCI device 0x2BB5. Karpenter's GPU name as its v1.14.1 instance-type docs show it.
    "rtx-pro-6000": GpuModel(
        "rtx-pro-server-6000",
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        98304,
        97887,
        "blackwell",
        12,
        0,
        _RTX_PRO_6000_LAYOUTS,
    ),
}


@dataclass(frozen=True)
class InstanceType:
    name: str
    cpu: int
    memory_mib: int
    arch: str  # amd64 | arm64
    cpu_manufacturer: str
    network_bandwidth: int  # Mbps, karpenter.k8s.aws/instance-network-bandwidth
    ebs_bandwidth: int
    local_nvme_gb: int
    max_pods: int
    hourly_usd: float
    gpu: GpuModel | None = None
    gpu_count: int = 0
    efa: int = 0

    @property
    def family(self) -> str:
        return self.name.split(".")[0]

    @property
    def size(self) -> str:
        return self.name.split(".")[1]

    @property
    def category(self) -> str:
        return "".join(c for c in self.family if c.isalpha())[:1]

    @property
    def generation(self) -> str:
        return "".join(c for c in self.family if c.isdigit())


INSTANCE_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in (
        InstanceType(
            "p5.48xlarge",
            192,
            2097152,
            "amd64",
            "amd",
            3200000,
            80000,
            30400,
            100,
            98.32,
            GPU_MODELS["h100"],
            8,
            32,
        ),
        InstanceType(
            "p5e.48xlarge",
            192,
            2097152,
            "amd64",
            "amd",
            3200000,
            80000,
            30400,
            100,
            108.0,
            GPU_MODELS["h200"],
            8,
            32,
        ),
        InstanceType(
            "p4d.24xlarge",
            96,
            1179648,
            "amd64",
            "intel",
            400000,
            19000,
            8000,
            737,
            32.77,
            GPU_MODELS["a100"],
            8,
            4,
        ),
        InstanceType(
            "g6e.12xlarge",
            48,
            393216,
            "amd64",
            "amd",
            100000,
            20000,
            3800,
            234,
            10.49,
            GPU_MODELS["l40s"],
            4,
        ),
        InstanceType(
            "g6.xlarge", 4, 16384, "amd64", "amd", 10000, 5000, 250, 58, 0.805, GPU_MODELS["l4"], 1
        ),
        InstanceType(
            "g5.12xlarge",
            48,
            196608,
            "amd64",
            "amd",
            40000,
            16000,
            3800,
            234,
            5.672,
            GPU_MODELS["a10g"],
            4,
        ),
        InstanceType(
            "g5g.2xlarge", 8, 16384, "arm64", "aws", 10000, 4750, 0, 58, 0.556, GPU_MODELS["t4g"], 1
        ),
        # g7e.48xlarge: 192 vCPU, 2048 GiB, 8 × RTX PRO 6000, 1600 Gbps, 4 × 3.8 TB NVMe.
        # EBS bandwidth, max pods and the EFA count are not in our sources: illustrative
        # values (EBS as p5, max pods as p4d's ENI count); no EFA resource is advertised.
        InstanceType(
            "g7e.48xlarge",
            192,
            2097152,
            "amd64",
            "intel",
            1600000,
            80000,
            15200,
            737,
            33.14,  # on-demand, about 8 × $4.14 per GPU-hour (us-east-2, 2026)
            GPU_MODELS["rtx-pro-6000"],
            8,
        ),
        # g7e.4xlarge as aws/karpenter-provider-aws@v1.14.1 instance-types.md lists it: 16 vCPU,
        # 131072 MiB, 1 × RTX PRO 6000 (98304 MiB), 50 Gbps, EBS 8000 Mbps, 1900 GB NVMe, 506
        # pods. The hourly price is illustrative.
        InstanceType(
            "g7e.4xlarge",
            16,
            131072,
            "amd64",
            "intel",
            50000,
            8000,
            1900,
            506,
            4.14,
            GPU_MODELS["rtx-pro-6000"],
            1,
        ),
        InstanceType("m7i.2xlarge", 8, 32768, "amd64", "intel", 12500, 10000, 0, 58, 0.4032),
        InstanceType("m7i.4xlarge", 16, 65536, "amd64", "intel", 12500, 10000, 0, 234, 0.8064),
        InstanceType("c7i.4xlarge", 16, 32768, "amd64", "intel", 12500, 10000, 0, 234, 0.714),
    )
}


def instance_type(name: str) -> InstanceType:
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}") from None


def mig_resources(it: InstanceType, mig_config: str | None, strategy: str) -> dict[str, int]:
    """Extended resources the device plugin advertises for a MIG layout (NVIDIA/k8s-device-plugin
    internal/lm/mig-strategy.go)."""
    if it.gpu is None:
        return {}
    if not mig_config or mig_config == "all-disabled" or not it.gpu.mig_capable:
        return {"nvidia.com/gpu": it.gpu_count}
    layout = it.gpu.mig_layouts.get(mig_config)
    if layout is None:
        raise ValueError(f"MIG config {mig_config!r} is not valid for {it.gpu.product}")
    if strategy == "single":
        (_profile, per_gpu), *rest = layout.items()
        return {"nvidia.com/gpu": 0 if rest else per_gpu * it.gpu_count}
    # The device plugin writes a profile's "+" as "." in resource names.
    return {f"nvidia.com/mig-{p.replace('+', '.')}": n * it.gpu_count for p, n in layout.items()}


# --------------------------------------------------------------------------- OS images


@dataclass(frozen=True)
class OsImage:
    family: str  # al2023 | bottlerocket
    os_image: str
    kernel: str
    kubelet_version: str = DEFAULT_KUBELET_VERSION
    container_runtime: str = DEFAULT_CONTAINERD
    nvidia_driver: str | None = None  # the AMI's NVIDIA driver (None: the simulator's default)


OS_IMAGES: dict[str, OsImage] = {
    "al2023": OsImage("al2023", "Amazon Linux 2023.6.20250218", "6.1.128-136.201.amzn2023.x86_64"),
    "al2023-old": OsImage(
        "al2023", "Amazon Linux 2023.6.20241212", "6.1.119-129.201.amzn2023.x86_64"
    ),
    # al2023@v20260409 for Kubernetes 1.34 (AL2023_x86_64_NVIDIA): kubelet 1.34.6, containerd
    # 2.2.1, kernel 6.12.77-99.140.amzn2023, kmod-nvidia-latest-dkms 580.126.09, base
    # al2023-ami-minimal-2023.11.20260406.2 (awslabs/amazon-eks-ami@v20260423 CHANGELOG.md,
    # "AMI Release v20260409"). The kubelet's `-eks-<build>` suffix is ours.
    "al2023-v20260409": OsImage(
        "al2023",
        "Amazon Linux 2023.11.20260406",
        "6.12.77-99.140.amzn2023.x86_64",
        kubelet_version="v1.34.6-eks-2c8e91a",
        container_runtime="containerd://2.2.1",
        nvidia_driver="580.126.09",
    ),
    "bottlerocket": OsImage(
        "bottlerocket",
        "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)",
        "6.1.131",
        container_runtime="containerd://1.7.27+bottlerocket",
    ),
}


def os_image(name: str) -> OsImage:
    try:
        return OS_IMAGES[name]
    except KeyError:
        raise KeyError(f"unknown os {name!r}; known: {', '.join(sorted(OS_IMAGES))}") from None


def _kernel_for(osi: OsImage, arch: str) -> str:
    if osi.family == "al2023" and arch == "arm64":
        return osi.kernel.replace("x86_64", "aarch64")
    return osi.kernel


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
    taints: tuple[JsonDict, ...] = ()
    gpu_resources: bool = True
    driver_version: str = DEFAULT_NVIDIA_DRIVER
    nodepool_hash: str = ""
    dra: bool = False  # the NVIDIA DRA driver publishes the GPUs: no nvidia.com/* resources


def node_labels(n: NodeSpecInput) -> dict[str, str]:
    it = n.instance
    labels: dict[str, str] = {
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
    if n.nodepool is not None:
        labels.update(
            {
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
        )
        if it.local_nvme_gb:
            labels["karpenter.k8s.aws/instance-local-nvme"] = str(it.local_nvme_gb)
        if it.efa:
            labels["vpc.amazonaws.com/efa.present"] = "true"
    if n.nodegroup is not None:
        labels.update(
            {
                "eks.amazonaws.com/nodegroup": n.nodegroup,
                "eks.amazonaws.com/capacityType": "SPOT"
                if n.capacity_type == "spot"
                else "ON_DEMAND",
                "eks.amazonaws.com/nodegroup-image": n.image_id,
                "eks.amazonaws.com/sourceLaunchTemplateId": "lt-"
                + stable_hex("lt", n.nodegroup, length=17),
                "eks.amazonaws.com/sourceLaunchTemplateVersion": "3",
                "alpha.eksctl.io/cluster-name": n.cluster_name,
            }
        )
    gpu = it.gpu
    if gpu is not None:
        if n.nodepool is not None:
            labels.update(
                {
                    "karpenter.k8s.aws/instance-gpu-count": str(it.gpu_count),
                    "karpenter.k8s.aws/instance-gpu-name": gpu.karpenter_name,
                    "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                    "karpenter.k8s.aws/instance-gpu-memory": str(gpu.ec2_memory_mib),
                }
            )
        major, minor, rev = n.driver_version.split(".")
        labels.update(
            {
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
                "nvidia.com/cuda.driver-version.full": n.driver_version,
                "nvidia.com/cuda.runtime.major": "12",
                "nvidia.com/cuda.runtime.minor": "8",
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
        )
        if gpu.mig_capable:
            labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
            labels["nvidia.com/mig.strategy"] = n.mig_strategy
            if n.mig_config:
                labels["nvidia.com/mig.config"] = n.mig_config
                if n.gpu_resources and not n.dra and n.mig_config != "all-disabled":
                    for res, count in mig_resources(it, n.mig_config, n.mig_strategy).items():
                        if res.startswith("nvidia.com/mig-"):
                            labels[f"{res}.count"] = str(count)
    labels.update(n.extra_labels)
    return dict(sorted(labels.items()))


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
        "memory": f"{mem_ki}Ki",
        "pods": str(it.max_pods),
    }
    allocatable = {
        "cpu": f"{it.cpu * 1000 - reserved_cpu_m}m",
        "ephemeral-storage": str(int(eph_ki * 1024 * 0.9)),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki - reserved_mem_ki}Ki",
        "pods": str(it.max_pods),
    }
    if it.efa:
        capacity["vpc.amazonaws.com/efa"] = allocatable["vpc.amazonaws.com/efa"] = str(it.efa)
    if it.gpu is not None and n.gpu_resources and not n.dra:
        for res, count in mig_resources(it, n.mig_config, n.mig_strategy).items():
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
    kernel = _kernel_for(n.os, it.arch)
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


# --------------------------------------------------------------------------- Karpenter objects


def nodeclaim_condition(
    ctype: str, status: str, reason: str, message: str, now: float, generation: int = 1
) -> JsonDict:
    return {
        "type": ctype,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": ts(now),
        "reason": reason,
        "message": message,
    }


def build_nodeclaim(
    *,
    name: str,
    uid: str,
    created: float,
    nodepool: str,
    nodepool_uid: str,
    nodeclass: str,
    instance: InstanceType,
    zone: str,
    capacity_type: str,
    taints: list[JsonDict],
    expire_after: str,
    termination_grace_period: str | None,
    nodepool_hash: str,
    requests: dict[str, str],
) -> JsonDict:
    it = instance
    labels = {
        "karpenter.sh/nodepool": nodepool,
        "karpenter.sh/capacity-type": capacity_type,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "node.kubernetes.io/instance-type": it.name,
        "topology.kubernetes.io/zone": zone,
        "kubernetes.io/arch": it.arch,
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-category": it.category,
        "karpenter.k8s.aws/instance-family": it.family,
        "karpenter.k8s.aws/instance-generation": it.generation,
        "karpenter.k8s.aws/instance-size": it.size,
        "karpenter.k8s.aws/instance-cpu": str(it.cpu),
        "karpenter.k8s.aws/instance-memory": str(it.memory_mib),
    }
    if it.gpu is not None:
        labels.update(
            {
                "karpenter.k8s.aws/instance-gpu-count": str(it.gpu_count),
                "karpenter.k8s.aws/instance-gpu-name": it.gpu.karpenter_name,
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                "karpenter.k8s.aws/instance-gpu-memory": str(it.gpu.ec2_memory_mib),
            }
        )
    requirements: list[JsonDict] = [
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it.name]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": [it.arch]},
        {"key": "karpenter.k8s.aws/ec2nodeclass", "operator": "In", "values": [nodeclass]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
    ]
    spec: JsonDict = {
        "expireAfter": expire_after,
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": nodeclass},
        "requirements": requirements,
        "resources": {"requests": dict(sorted(requests.items()))},
    }
    if taints:
        spec["taints"] = taints
    if termination_grace_period:
        spec["terminationGracePeriod"] = termination_grace_period
    awaiting = ("Unknown", "AwaitingReconciliation", "object is awaiting reconciliation")
    conditions = [
        nodeclaim_condition(t, *awaiting, now=created)
        for t in ("Launched", "Registered", "Initialized")
    ]
    conditions.append(
        nodeclaim_condition(
            "Ready",
            "Unknown",
            "UnhealthyDependents",
            "Launched=Unknown, Registered=Unknown, Initialized=Unknown",
            now=created,
        )
    )
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": dict(sorted(labels.items())),
            "annotations": {
                "compatibility.karpenter.k8s.aws/cluster-name-tagged": "true",
                "karpenter.k8s.aws/ec2nodeclass-hash": stable_hex("nc", nodeclass, length=19),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.k8s.aws/tagged": "true",
                "karpenter.sh/nodepool-hash": nodepool_hash,
                "karpenter.sh/nodepool-hash-version": "v3",
            },
            "finalizers": [TERMINATION_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": KARPENTER_API,
                    "kind": "NodePool",
                    "name": nodepool,
                    "uid": nodepool_uid,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {"conditions": conditions},
    }


def build_nodepool(
    *,
    name: str,
    uid: str,
    created: float,
    nodeclass: str,
    labels: dict[str, str],
    requirements: list[JsonDict],
    taints: list[JsonDict],
    expire_after: str,
    termination_grace_period: str | None,
    consolidation_policy: str,
    consolidate_after: str,
    budgets: list[JsonDict],
    limits: dict[str, str] | None,
    weight: int | None,
) -> JsonDict:
    template_spec: JsonDict = {
        "expireAfter": expire_after,
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": nodeclass},
        "requirements": requirements,
    }
    if taints:
        template_spec["taints"] = taints
    if termination_grace_period:
        template_spec["terminationGracePeriod"] = termination_grace_period
    spec: JsonDict = {
        "disruption": {
            "budgets": budgets,
            "consolidateAfter": consolidate_after,
            "consolidationPolicy": consolidation_policy,
        },
        "template": {"metadata": {"labels": labels}, "spec": template_spec},
    }
    if limits:
        spec["limits"] = limits
    if weight is not None:
        spec["weight"] = weight
    ready_conditions = [
        ("NodeClassReady", "NodeClassReady", ""),
        ("ValidationSucceeded", "ValidationSucceeded", ""),
        ("NodeRegistrationHealthy", "NodeRegistrationHealthy", ""),
        ("Ready", "Ready", ""),
    ]
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "annotations": {
                "karpenter.sh/nodepool-hash": stable_hex("np", name),
                "karpenter.sh/nodepool-hash-version": "v3",
            },
        },
        "spec": spec,
        "status": {
            "conditions": [
                nodeclaim_condition(t, "True", r, m, now=created) for t, r, m in ready_conditions
            ],
            "resources": {"cpu": "0", "memory": "0", "nodes": "0", "pods": "0"},
        },
    }


# --------------------------------------------------------------------------- core objects


def build_event(
    *,
    name: str,
    namespace: str,
    uid: str,
    involved: JsonDict,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    host: str | None,
    first: float,
    last: float,
    count: int = 1,
) -> JsonDict:
    source: JsonDict = {"component": component}
    if host:
        source["host"] = host
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(first),
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": ts(first),
        "lastTimestamp": ts(last),
        "count": count,
        "type": event_type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }


# The built-in PriorityClasses (k8s pkg/apis/scheduling SystemPriorityClasses).
PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# DefaultTolerationSeconds admission: what every pod without its own gets (300 s each).
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def pod_unschedulable(pod: JsonDict, message: str, at: float) -> bool:
    """The scheduler's PodScheduled=False Unschedulable condition; False when unchanged."""
    conds = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
    current = next(
        (c for c in pod["status"].get("conditions", []) if c.get("type") == "PodScheduled"), None
    )
    if current is not None and current.get("message") == message:
        return False
    conds.append(
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": current["lastTransitionTime"] if current else ts(at),
            "reason": "Unschedulable",
            "message": message,
        }
    )
    pod["status"]["conditions"] = conds
    return True


def build_pod(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    node_name: str | None,
    labels: dict[str, str],
    owner: JsonDict,
    containers: list[JsonDict],
    tolerations: list[JsonDict],
    priority_class: str | None,
    host_ip: str | None,
    pod_ip: str | None,
    running_since: float | None,
    host_network: bool = False,
    node_selector: dict[str, str] | None = None,
    affinity: JsonDict | None = None,
) -> JsonDict:
    spec: JsonDict = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": PRIORITY_CLASSES.get(priority_class or "", 0),
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": labels.get("app.kubernetes.io/name", "default"),
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations,
    }
    if host_network:
        spec["hostNetwork"] = True
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    status: JsonDict
    if running_since is not None and node_name:
        status = {
            "phase": "Running",
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(running_since),
                }
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": ts(running_since),
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": c["image"].split(":")[0]
                    + "@sha256:"
                    + stable_hex("digest", c["image"], length=64),
                    "containerID": "containerd://" + stable_hex("ctr", uid, c["name"], length=64),
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": ts(running_since)}},
                    "lastState": {},
                }
                for c in containers
            ],
        }
    elif node_name:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(created),
                }
            ],
            "hostIP": host_ip,
            "startTime": ts(created),
            "qosClass": "Burstable",
        }
    else:
        # Not looked at by the scheduler yet: no conditions (see pod_unschedulable).
        status = {"phase": "Pending", "qosClass": "Burstable"}
    return {
        "metadata": {
            "name": name,
            "generateName": name[: name.rfind("-") + 1],
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": spec,
        "status": status,
    }


def container(
    name: str, image: str, requests: dict[str, str], limits: dict[str, str] | None = None
) -> JsonDict:
    resources: JsonDict = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def build_deployment(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    replicas: int,
    labels: dict[str, str],
    annotations: dict[str, str],
    selector: dict[str, str],
    template: JsonDict,
    max_unavailable: int | str = "25%",
) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1", **annotations},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": template,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {},
    }


def deployment_status(
    *,
    generation: int,
    replicas: int,
    updated: int,
    ready: int,
    available: int,
    rs_name: str,
    progressing_since: float,
    available_since: float,
    now: float,
) -> JsonDict:
    complete = updated >= replicas and ready >= replicas
    progressing = (
        ("NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
        if complete
        else ("ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
    )
    avail_ok = available >= max(0, replicas - 1)
    status: JsonDict = {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": [
            {
                "type": "Available",
                "status": "True" if avail_ok else "False",
                "lastUpdateTime": ts(available_since),
                "lastTransitionTime": ts(available_since),
                "reason": "MinimumReplicasAvailable" if avail_ok else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if avail_ok
                else "Deployment does not have minimum availability.",
            },
            {
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": ts(now),
                "lastTransitionTime": ts(progressing_since),
                "reason": progressing[0],
                "message": progressing[1],
            },
        ],
    }
    if replicas - available > 0:
        status["unavailableReplicas"] = replicas - available
    return status


def build_replicaset(
    *,
    deployment: JsonDict,
    name: str,
    uid: str,
    created: float,
    pod_hash: str,
    template: JsonDict,
    revision: int,
    spec_replicas: int,
    replicas: int,
    ready: int,
    desired: int,
    max_surge: int,
) -> JsonDict:
    """A Deployment's ReplicaSet as the deployment controller writes it: the Deployment's
    annotations copied (bar its own revision bookkeeping), the revision, desired and max
    replicas (k8s pkg/controller/deployment/util deployment_util.go SetNewReplicaSetAnnotations)."""
    meta = deployment["metadata"]
    labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": pod_hash}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k
        not in (
            "deployment.kubernetes.io/revision",
            "deployment.kubernetes.io/revision-history",
            "kubectl.kubernetes.io/last-applied-configuration",
        )
    }
    annotations.update(
        {
            "deployment.kubernetes.io/desired-replicas": str(desired),
            "deployment.kubernetes.io/max-replicas": str(desired + max_surge),
            "deployment.kubernetes.io/revision": str(revision),
        }
    )
    pod_template = {
        "metadata": {**(template.get("metadata") or {}), "labels": labels},
        "spec": template.get("spec", {}),
    }
    selector = {**deployment["spec"]["selector"]["matchLabels"], "pod-template-hash": pod_hash}
    status: JsonDict = {"replicas": replicas, "observedGeneration": 1}
    if replicas:
        status.update(
            {"fullyLabeledReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready}
        )
    return {
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": labels,
            "annotations": dict(sorted(annotations.items())),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": spec_replicas,
            "selector": {"matchLabels": selector},
            "template": pod_template,
        },
        "status": status,
    }


def build_lease(*, node: str, node_uid: str, uid: str, created: float, renewed: float) -> JsonDict:
    """A kubelet's node Lease in kube-node-lease (k8s.io/component-helpers apimachinery/lease
    controller.go newLease; the kubelet sets the Node as owner)."""
    return {
        "metadata": {
            "name": node,
            "namespace": "kube-node-lease",
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": NODE_LEASE_DURATION,
            "renewTime": micro_ts(renewed),
        },
    }


NODE_LEASE_DURATION = 40  # kubelet nodeLeaseDurationSeconds default


def build_pdb(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    selector: dict[str, str],
    min_available: int | str | None,
    max_unavailable: int | str | None,
) -> JsonDict:
    spec: JsonDict = {"selector": {"matchLabels": selector}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
        },
        "spec": spec,
        "status": {},
    }


def build_namespace(name: str, uid: str, created: float) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def pod_template_hash(template: JsonDict) -> str:
    """A pod-template-hash-looking string (k8s encodes an FNV hash with SafeEncodeString)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    value = int(stable_hex("template", repr(sorted(_flatten(template))), length=15), 16)
    out = []
    for _ in range(10):
        value, rem = divmod(value, len(alphabet))
        out.append(alphabet[rem])
    return "".join(out)


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(obj, dict):
        return [kv for k, v in obj.items() for kv in _flatten(v, f"{prefix}.{k}")]
    if isinstance(obj, list):
        return [kv for i, v in enumerate(obj) for kv in _flatten(v, f"{prefix}[{i}]")]
    return [(prefix, repr(obj))]
