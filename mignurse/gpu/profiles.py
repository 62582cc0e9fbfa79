"""MIG profiles per GPU family and the standard mig-parted layouts, for comparing the
layout a node asks for with what its GPUs and device plugin report.

Pure data and functions over models: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mignurse.model import (
    LABEL_GPU_COUNT_HINT,
    LABEL_GPU_PRODUCT,
    LABEL_MIG_STRATEGY,
    RESOURCE_GPU,
    MigState,
    Node,
    instance_family,
)

LABEL_GPU_COUNT = "nvidia.com/gpu.count"  # GFD (domain.md §1.1)
LABEL_GPU_NAME_HINT = "karpenter.k8s.aws/instance-gpu-name"
LABEL_GPU_MEMORY_HINT = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU
MIG_PRODUCT_MARK = "-MIG-"  # GFD single strategy: <model>-MIG-<profile> (domain.md §3.10)
MIG_INVALID = "INVALID"


@dataclass(frozen=True)
class GpuFamily:
    name: str
    profiles: Mapping[str, int]  # profile → the most instances of it one GPU holds
    balanced: Mapping[str, int] | None  # `all-balanced` per GPU; None where not known


# domain.md §3.9 (MP deployments/systemd/config-default.yaml, MIGUG supported-mig-profiles).
A100_40GB = GpuFamily(
    "A100-40GB",
    {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1,
     "7g.40gb": 1},
    # A100-40GB all-balanced, per its device-filter entry in the default file.
    {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
)  # fmt: skip
H100_80GB = GpuFamily(
    "A100-80GB/H100-80GB",
    {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1,
     "7g.80gb": 1},
    {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
)  # fmt: skip
H200 = GpuFamily(
    "H200-141GB",
    {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
     "7g.141gb": 1},
    {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
)  # fmt: skip
B200 = GpuFamily(
    "B200",
    {"1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1,
     "7g.180gb": 1},
    {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
)  # fmt: skip
# §3.9 names only the ends of the H100 NVL range and no all-balanced for it or the A30.
H100_NVL = GpuFamily(
    "H100-NVL",
    {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1,
     "7g.94gb": 1},
    None,
)  # fmt: skip
A30 = GpuFamily("A30", {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}, None)
RTX_PRO_6000 = GpuFamily(
    "RTX-PRO-6000-96GB",
    {"1g.24gb": 4, "1g.24gb+gfx": 4, "1g.24gb-me": 4, "1g.24gb+me.all": 1, "2g.48gb": 2,
     "2g.48gb+gfx": 2, "2g.48gb-me": 2, "2g.48gb+me.all": 1, "4g.96gb": 1, "4g.96gb+gfx": 1},
    {"1g.24gb": 2, "2g.48gb": 1},
)  # fmt: skip

# EC2 MIG-capable families → (GPU family, GPUs per size); sizes from the EC2 instance pages.
INSTANCE_GPUS: dict[str, tuple[GpuFamily, dict[str, int]]] = {
    "p4d": (A100_40GB, {"24xlarge": 8}),
    "p4de": (H100_80GB, {"24xlarge": 8}),  # A100-80GB shares the H100-80GB profile table
    "p5": (H100_80GB, {"48xlarge": 8, "4xlarge": 1}),
    "p5e": (H200, {"48xlarge": 8}),
    "p5en": (H200, {"48xlarge": 8}),
    "p6-b200": (B200, {"48xlarge": 8}),
}


def family_of_name(name: str, memory_mib: int | None = None) -> GpuFamily | None:
    """The family a GPU name points at ("NVIDIA-H100-80GB-HBM3", "NVIDIA A100-SXM4-40GB",
    Karpenter's "h100"); `memory_mib` settles A100 40 vs 80 GB when the name does not."""
    text = name.upper().replace(" ", "-").replace("_", "-")
    if "H200" in text:
        return H200
    if "H100" in text and "NVL" in text:
        return H100_NVL
    if "H100" in text or "H800" in text:
        return H100_80GB
    if "A100" in text or "A800" in text:
        if "80GB" in text or "80G-" in text:
            return H100_80GB
        if "40GB" in text:
            return A100_40GB
        if memory_mib is not None:
            return H100_80GB if memory_mib >= 60_000 else A100_40GB
        return None
    if "A30" in text:
        return A30
    if "B200" in text:
        return B200
    if "RTX-PRO-6000" in text:
        return RTX_PRO_6000
    return None


def base_product(product: str) -> str:
    """GFD's product without the single-strategy "-MIG-<profile>" or sharing suffixes."""
    cut = product.find(MIG_PRODUCT_MARK)
    base = product[:cut] if cut >= 0 else product
    return base.removesuffix("-SHARED")


def single_strategy_profile(node: Node) -> str | None:
    """The profile in `nvidia.com/gpu.product` under the single strategy ("1g.10gb",
    "INVALID"); None when the product is not a MIG product."""
    product = node.labels.get(LABEL_GPU_PRODUCT, "")
    cut = product.find(MIG_PRODUCT_MARK)
    if cut < 0:
        return None
    return product[cut + len(MIG_PRODUCT_MARK) :].removesuffix("-SHARED")


def _int_label(node: Node, key: str) -> int | None:
    value = node.labels.get(key, "")
    return int(value) if value.isdigit() else None


@dataclass(frozen=True)
class GpuIdentity:
    family: GpuFamily | None
    count: int | None
    family_from: str  # where the family was read, for the evidence text
    count_from: str


def identify_gpus(node: Node, mig: MigState | None = None) -> GpuIdentity:
    """GPU family and count of a node from its labels, NVML names, or instance type."""
    family: GpuFamily | None = None
    family_from = ""
    memory = _int_label(node, LABEL_GPU_MEMORY_HINT)
    product = node.labels.get(LABEL_GPU_PRODUCT, "")
    if product:
        family = family_of_name(base_product(product), memory)
        family_from = f"{LABEL_GPU_PRODUCT}={product}"
    if family is None and mig is not None:
        for gpu in mig.gpus:
            if gpu.name and (family := family_of_name(gpu.name, memory)) is not None:
                family_from = f"nvml GPU name {gpu.name!r}"
                break
    size = node.instance_type.partition(".")[2]
    by_type = INSTANCE_GPUS.get(instance_family(node.instance_type))
    if family is None and (hint := node.labels.get(LABEL_GPU_NAME_HINT)):
        family = family_of_name(hint, memory)
        family_from = f"{LABEL_GPU_NAME_HINT}={hint}"
    if family is None and by_type is not None:
        family = by_type[0]
        family_from = f"instance type {node.instance_type}"

    count: int | None = None
    count_from = ""
    for key in (LABEL_GPU_COUNT, LABEL_GPU_COUNT_HINT):
        if (value := _int_label(node, key)) is not None:
            count, count_from = value, f"{key}={value}"
            break
    if (
        count is None
        and node.gpu_capacity.get(RESOURCE_GPU)
        and single_strategy_profile(node) is None
        and not mig_slices(node)
    ):
        count = node.gpu_capacity[RESOURCE_GPU]
        count_from = f"capacity {RESOURCE_GPU}={count}"
    if count is None and by_type is not None and size in by_type[1]:
        count = by_type[1][size]
        count_from = f"instance type {node.instance_type}"
    if count is None and mig is not None and mig.gpus:
        count = len(mig.gpus)
        count_from = "GPUs listed by the node's MIG probe"
    return GpuIdentity(family, count, family_from, count_from)


@dataclass(frozen=True)
class Layout:
    """What one GPU should look like under a config; `devices` None = not known."""

    mig_enabled: bool
    devices: Mapping[str, int] | None = field(default=None)
    note: str = ""  # why the devices are not known, when they are not


CONFIG_SUFFIXES = ((".me.all", "+me.all"), (".gfx", "+gfx"), (".me", "+me"))


def profile_of_config(config: str) -> str:
    """`all-1g.10gb.me` → `1g.10gb+me` (default-file names write `+` as `.`, §3.5)."""
    profile = config.removeprefix("all-")
    for written, meant in CONFIG_SUFFIXES:
        if profile.endswith(written):
            return profile[: -len(written)] + meant
    return profile


def standard_layouts(family: GpuFamily) -> dict[str, dict[str, int]]:
    """The `all-<profile>` configs of the default mig-parted file for a family (one
    profile filling each GPU), plus `all-balanced` where it is tabulated (§3.9)."""
    layouts = {
        f"all-{profile}": {profile: count}
        for profile, count in family.profiles.items()
        if "+" not in profile and "-" not in profile  # media-extension variants are named apart
    }
    if family.balanced is not None:
        layouts["all-balanced"] = dict(family.balanced)
    return layouts


def expected_layout(config: str, family: GpuFamily | None) -> Layout | None:
    """The per-GPU layout of a standard config name; None for a name we do not know."""
    if config == "all-disabled":
        return Layout(False, {})
    if config == "all-enabled":
        return Layout(True, {})
    if config == "all-balanced":
        if family is None:
            return Layout(True, None, "GPU model unknown")
        if family.balanced is None:
            return Layout(True, None, f"all-balanced is not tabulated for {family.name}")
        return Layout(True, family.balanced)
    if not config.startswith("all-"):
        return None
    profile = profile_of_config(config)
    if not profile[:1].isdigit() or "g." not in profile:
        return None
    if family is None:
        return Layout(True, None, "GPU model unknown")
    if profile not in family.profiles:
        return Layout(True, None, f"{family.name} has no {profile} profile")
    return Layout(True, {profile: family.profiles[profile]})


def mig_slices(node: Node) -> dict[str, int]:
    """Advertised MIG slices by profile: mixed-strategy resources, or under the single
    strategy `nvidia.com/gpu` with the product's profile (§3.10)."""
    slices = {p: n for p, n in node.mig_resources.items() if n > 0}
    single = single_strategy_profile(node)
    if single and single != MIG_INVALID and node.gpu_allocatable.get(RESOURCE_GPU, 0) > 0:
        slices[single] = slices.get(single, 0) + node.gpu_allocatable[RESOURCE_GPU]
    return slices


def strategy(node: Node) -> str:
    """The MIG strategy the node's labels or resources show: single, mixed, none or ""."""
    label = node.labels.get(LABEL_MIG_STRATEGY, "")
    if label:
        return label
    if single_strategy_profile(node) is not None:
        return "single"
    return "mixed" if node.mig_resources else ""


def describe_counts(counts: Mapping[str, int]) -> str:
    """{"1g.10gb": 2, "2g.20gb": 1} → "2×1g.10gb + 1×2g.20gb"; "none" when empty."""
    if not counts:
        return "none"
    return " + ".join(f"{n}×{p}" for p, n in sorted(counts.items()))
