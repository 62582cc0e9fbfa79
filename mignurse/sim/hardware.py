"""The hardware a simulated node runs on: EC2 instance types, their GPUs, and OS images.

`INSTANCE_TYPES` holds what EC2, Karpenter and GPU feature discovery say of each instance type
the scenarios use (CPUs, memory, GPUs, EFA, local NVMe), `GPU_MODELS` each GPU product and
its MIG layouts (the same tables the diagnosis rules judge layouts by, from `mignurse.gpu`),
`OS_IMAGES` each AMI family and release (kernel, kubelet, containerd, NVIDIA driver).
`mig_resources` is what the device plugin advertises for a layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mignurse.gpu.models import model_named
from mignurse.gpu.profiles import standard_layouts

DEFAULT_KUBELET_VERSION = "v1.32.1-eks-5d632ec"
DEFAULT_CONTAINERD = "containerd://1.7.27"
DEFAULT_NVIDIA_DRIVER = "570.124.06"


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
    # mignurse.gpu's name for the model the layouts are read for: a cluster's own mig-parted
    # file (mignurse.sim.operator_config) is read for it too
    catalogue_model: str = ""

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_layouts)


# One source for MIG profiles: the same tables the diagnosis rules judge layouts by.
_H100_LAYOUTS = standard_layouts(model_named("H100-80GB"))
_H200_LAYOUTS = standard_layouts(model_named("H200-141GB"))
_A100_40_LAYOUTS = standard_layouts(model_named("A100-40GB"))
_RTX_PRO_6000_LAYOUTS = standard_layouts(model_named("RTX-PRO-6000-Server"))

GPU_MODELS: dict[str, GpuModel] = {
    "h100": GpuModel(
        "h100", "NVIDIA-H100-80GB-HBM3", 81920, 81559, "hopper", 9, 0, _H100_LAYOUTS, "H100-80GB"
    ),
    "h200": GpuModel(
        "h200", "NVIDIA-H200", 144384, 143771, "hopper", 9, 0, _H200_LAYOUTS, "H200-141GB"
    ),
    "a100": GpuModel(
        "a100",
        "NVIDIA-A100-SXM4-40GB",
        40960,
        40960,
        "ampere",
        8,
        0,
        _A100_40_LAYOUTS,
        "A100-40GB",
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
        "RTX-PRO-6000-Server",
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


def mig_resources(
    it: InstanceType,
    mig_config: str | None,
    strategy: str,
    layouts: Mapping[str, dict[str, int]] | None = None,
) -> dict[str, int]:
    """Extended resources the device plugin advertises for a MIG layout (NVIDIA/k8s-device-plugin
    internal/lm/mig-strategy.go), in `layouts` (the node's mig-parted file; None: NVIDIA's
    built-in file, `GpuModel.mig_layouts`)."""
    if it.gpu is None:
        return {}
    if not mig_config or mig_config == "all-disabled" or not it.gpu.mig_capable:
        return {"nvidia.com/gpu": it.gpu_count}
    layout = (it.gpu.mig_layouts if layouts is None else layouts).get(mig_config)
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
    # Bottlerocket 1.32.0, before MIG (its os-release as bottlerocket-os/bottlerocket PR #4418
    # shows it: "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"); kernel and containerd ours.
    "bottlerocket-1.32": OsImage(
        "bottlerocket",
        "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)",
        "6.1.119",
        container_runtime="containerd://1.7.24+bottlerocket",
    ),
}


def os_image(name: str) -> OsImage:
    try:
        return OS_IMAGES[name]
    except KeyError:
        raise KeyError(f"unknown os {name!r}; known: {', '.join(sorted(OS_IMAGES))}") from None


def kernel_for(osi: OsImage, arch: str) -> str:
    if osi.family == "al2023" and arch == "arm64":
        return osi.kernel.replace("x86_64", "aarch64")
    return osi.kernel
