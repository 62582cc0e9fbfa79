"""Which GPU a node has: one table of GPU models, and the exact keys that name each one.

A GPU is identified by, in order of trust: its PCI device id (NVML `pciDeviceId`, nvidia-smi
`-q -x` `<pci_device_id>`), its product name as NVML and nvidia-smi print it or as GPU
feature discovery writes it (`nvidia.com/gpu.product`), Karpenter's
`karpenter.k8s.aws/instance-gpu-name` (with `instance-gpu-memory` where one name covers two
GPUs), and last the EC2 instance type. Every key is matched whole: "GH200" never reads as
"H200", nor "GB200" or `p6e-gb200` as "B200". A key the table does not hold gives None.

Sources (each table below says which it uses):
- Device ids and product names: NVIDIA/open-gpu-kernel-modules@580.142 README.md
  "Compatible GPUs" (the names NVML prints, with their PCI ids), pciutils/pciids@c1c1254
  pci.ids, and the device filters of NVIDIA/mig-parted@v0.15.0
  deployments/systemd/config-default.yaml (which ids share a MIG layout).
- GFD's spelling: NVIDIA/k8s-device-plugin@v0.20.0 internal/lm/resource.go `sanitise`
  (drop all but `A-Za-z0-9-_. `, join words with `-`) and `getProductName`
  (`<model>-MIG-<profile>` under the single strategy, `-SHARED` when shared).
- Karpenter: aws/karpenter-provider-aws@v1.14.1 pkg/providers/instancetype/types.go (the
  label is `lowerKabobCase` of EC2's GPU name, written only when an instance type has one
  GPU kind; the same code at v1.4.0) and website/content/en/docs/reference/instance-types.md
  at v1.14.1 and v1.4.0 (the values it wrote per instance type).
- MIG profiles and their most instances per GPU: `nvidia-smi mig -lgip` as shown in
  NVIDIA/mig-parted pull requests 120 (H200), 139 (GH200 144G), 166 (B200) and 175
  (GB200), the `all-<profile>` counts of the default config above, and
  docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html.
- MIG-capable GPUs: docs.nvidia.com/datacenter/tesla/mig-user-guide/610/supported-gpus.html;
  minimum driver for MIG: .../mig-user-guide/620/deployment-considerations.html (None where
  that table has no row for the product).
- GPU instance profile ids (`nvidia-smi mig -lgip` ID, NVML `GpuInstanceProfileInfo.id`, the
  `<giProfileId>` of a DRA MIG device name): per product, where `-lgip` output was seen
  (`GpuModel.gi_profiles`; see `_RTX_PRO_6000_GI`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

NVIDIA_VENDOR = 0x10DE


@dataclass(frozen=True)
class GiProfile:
    """A GPU instance profile's geometry on one product: the id `nvidia-smi mig -lgip` and
    NVML report, and where `nvidia-smi mig -cgi` may place it on the GPU's slice grid."""

    profile_id: int
    size: int  # memory slices it takes (the Placement Size of `mig -lgi`)
    starts: tuple[int, ...]  # the slices it may start at (the Placement Start of `mig -lgi`)


@dataclass(frozen=True)
class GpuModel:
    name: str  # mignurse's name for it: "H100-80GB"
    device_ids: tuple[int, ...] = ()  # PCI device ids (vendor 0x10DE): 0x2330
    product_names: tuple[str, ...] = ()  # as NVML / nvidia-smi print them
    profiles: Mapping[str, int] = field(default_factory=dict)  # MIG profile → most per GPU
    mig_min_driver: str | None = None  # "R525 (>= 525.85.12)"; None: not in the guide's table
    mig_capable: bool = True
    gi_profiles: Mapping[str, GiProfile] = field(default_factory=dict)  # where -lgip was seen
    slices: int | None = None  # memory slices on the GPU (4 or 8); None: not recorded

    @property
    def filter_ids(self) -> tuple[str, ...]:
        """The ids as mig-parted's device-filter writes them: 0x233010DE."""
        return tuple(f"0x{d:04X}{NVIDIA_VENDOR:04X}" for d in self.device_ids)


# -- MIG profile tables (see the module docstring) ----------------------------------------
_A100_40GB = {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2,
              "4g.20gb": 1, "7g.40gb": 1}  # fmt: skip
_GPU_80GB = {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2,
             "4g.40gb": 1, "7g.80gb": 1}  # fmt: skip
_A30 = {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1}
_H100_94GB = {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2,
              "4g.47gb": 1, "7g.94gb": 1}  # fmt: skip
_H100_96GB = {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2,
              "4g.48gb": 1, "7g.96gb": 1}  # fmt: skip
_H200 = {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2,
         "4g.71gb": 1, "7g.141gb": 1}  # fmt: skip
_GH200_144GB = {"1g.18gb": 7, "1g.18gb+me": 1, "1g.36gb": 4, "2g.36gb": 3, "3g.72gb": 2,
                "4g.72gb": 1, "7g.144gb": 1}  # fmt: skip
_B200 = {"1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2,
         "4g.90gb": 1, "7g.180gb": 1}  # fmt: skip
# Current drivers name the 1-slice GB200 profiles 1g.23gb (NVIDIA/mig-parted issue 227);
# pre-release ones printed 1g.24gb (NVIDIA/gpu-operator pull request 1303).
_GB200 = {"1g.23gb": 7, "1g.23gb+me": 1, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2,
          "4g.93gb": 1, "7g.186gb": 1}  # fmt: skip
_B300 = {"1g.34gb": 7, "1g.34gb+me": 1, "1g.67gb": 4, "2g.67gb": 3, "3g.135gb": 2,
         "4g.135gb": 1, "7g.269gb": 1}  # fmt: skip
_GB300 = {"1g.35gb": 7, "1g.35gb+me": 1, "1g.70gb": 4, "2g.70gb": 3, "3g.139gb": 2,
          "4g.139gb": 1, "7g.278gb": 1}  # fmt: skip
# R580 `nvidia-smi mig -lgip` (GoogleCloudPlatform/container-engine-accelerators pull
# request 564; bigstack-oss/cubecos issue 312).
_RTX_PRO_6000 = {"1g.24gb": 4, "1g.24gb+me": 1, "1g.24gb+gfx": 4, "1g.24gb+me.all": 1,
                 "1g.24gb-me": 4, "2g.48gb": 2, "2g.48gb+gfx": 2, "2g.48gb+me.all": 1,
                 "2g.48gb-me": 2, "4g.96gb": 1, "4g.96gb+gfx": 1}  # fmt: skip
# GI profile ids: GoogleCloudPlatform/container-engine-accelerators@ccdd14a
# partition_gpu/partition_gpu.go (from `nvidia-smi mig -lgip` on the GPU,
# GoogleCloudPlatform/container-engine-accelerators#564); 14, 21, 47 and 65 also in the
# `-lgip` of bottlerocket-os/bottlerocket-kernel-kit#300. Placements:
# the 4-slice grid of the MIG user guide's RTX PRO 6000 and A30 diagrams, an Ng profile
# starting at a multiple of N (inference for the one-instance variants: no -lgipp seen).
_Q1, _Q2, _Q4 = (0, 1, 2, 3), (0, 2), (0,)
_RTX_PRO_6000_GI = {
    "1g.24gb": GiProfile(14, 1, _Q1), "1g.24gb+me": GiProfile(21, 1, _Q1),
    "1g.24gb+gfx": GiProfile(47, 1, _Q1), "1g.24gb+me.all": GiProfile(65, 1, _Q1),
    "1g.24gb-me": GiProfile(67, 1, _Q1), "2g.48gb": GiProfile(5, 2, _Q2),
    "2g.48gb+gfx": GiProfile(35, 2, _Q2), "2g.48gb+me.all": GiProfile(64, 2, _Q2),
    "2g.48gb-me": GiProfile(66, 2, _Q2), "4g.96gb": GiProfile(0, 4, _Q4),
    "4g.96gb+gfx": GiProfile(32, 4, _Q4),
}  # fmt: skip

_R450 = "R450 (>= 450.80.02)"
_R525 = "R525 (>= 525.85.12)"
_R550 = "R550 (>= 550.90.07)"
_R570 = "R570 (>= 570.133.20)"

MODELS: tuple[GpuModel, ...] = (
    # MIG-capable; ids grouped as mig-parted's device filters group them.
    GpuModel("A100-40GB", (0x20B0, 0x20B1, 0x20F1),
             ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"), _A100_40GB, _R450),
    GpuModel("A800-40GB", (0x20F6,), ("NVIDIA A800 40GB Active",), _A100_40GB),
    GpuModel("A100-80GB", (0x20B2, 0x20B5),
             ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"), _GPU_80GB, _R450),
    GpuModel("A800-80GB", (0x20F3, 0x20F5),
             ("NVIDIA A800-SXM4-80GB", "NVIDIA A800 80GB PCIe", "NVIDIA A800 80GB PCIe LC"),
             _GPU_80GB),
    GpuModel("H100-80GB", (0x2330, 0x2331), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"),
             _GPU_80GB, _R525),
    GpuModel("H800-80GB", (0x2322, 0x2324), ("NVIDIA H800 PCIe", "NVIDIA H800"), _GPU_80GB),
    GpuModel("H100-NVL", (0x2321,), ("NVIDIA H100 NVL",), _H100_94GB, _R525),
    GpuModel("H800-NVL", (0x233A,), ("NVIDIA H800 NVL",), _H100_94GB),
    GpuModel("H100-96GB", (0x233D,), (), _H100_96GB, _R525),
    # GH200 with 96 GB HBM3; "120GB"/"480GB" is the Grace CPU's memory.
    GpuModel("GH200-96GB", (0x2342,), ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB"),
             _H100_96GB),
    GpuModel("H20", (0x2329,), ("NVIDIA H20",), _H100_96GB, "R535 (>= 535.161.07)"),
    GpuModel("PG506-96GB", (0x20B6,), ("NVIDIA PG506-232",), _H100_96GB),
    GpuModel("H200-141GB", (0x2335,), ("NVIDIA H200",), _H200, _R550),
    GpuModel("H200-NVL", (0x233B,), ("NVIDIA H200 NVL",), _H200, _R550),
    GpuModel("GH200-144GB", (0x2348,), ("NVIDIA GH200 144G HBM3e",), _GH200_144GB),
    GpuModel("A30", (0x20B7,), ("NVIDIA A30",), _A30, "R460 (>= 460.73.01)"),
    GpuModel("B200", (0x2901,), ("NVIDIA B200",), _B200, _R570),
    GpuModel("GB200", (0x2941,), ("NVIDIA GB200",), _GB200, _R570),
    GpuModel("B300", (0x3182,), ("NVIDIA B300 SXM6 AC",), _B300, "R580 (>= 580.82.07)"),
    GpuModel("GB300", (0x31C2,), ("NVIDIA GB300",), _GB300),
    GpuModel("RTX-PRO-6000-Server", (0x2BB5,),
             ("NVIDIA RTX PRO 6000 Blackwell Server Edition",), _RTX_PRO_6000,
             "R575 (>= 575.51.03)", gi_profiles=_RTX_PRO_6000_GI, slices=4),
    # MIG-capable (2 instances) per the guide, but NVIDIA's default config has no layout.
    GpuModel("RTX-PRO-4500-Server", (0x2C3A,),
             ("NVIDIA RTX PRO 4500 Blackwell Server Edition",), {}, "R575 (>= 575.64)"),
    # No MIG.
    GpuModel("A10G", (0x2237,), ("NVIDIA A10G",), mig_capable=False),
    GpuModel("L4", (0x27B8,), ("NVIDIA L4",), mig_capable=False),
    GpuModel("L40S", (0x26B9,), ("NVIDIA L40S",), mig_capable=False),
    GpuModel("T4", (0x1EB8,), ("Tesla T4",), mig_capable=False),
    GpuModel("T4G", mig_capable=False),
    GpuModel("V100", mig_capable=False),
    GpuModel("K80", mig_capable=False),
    GpuModel("M60", mig_capable=False),
    GpuModel("Radeon-Pro-V520", mig_capable=False),  # AMD (g4ad)
)  # fmt: skip

_BY_NAME: dict[str, GpuModel] = {m.name.casefold(): m for m in MODELS}


def model_named(name: str) -> GpuModel:
    """The model with this mignurse name (KeyError otherwise): for tables that cite one."""
    return _BY_NAME[name.casefold()]


# -- Karpenter's instance-gpu-name ------------------------------------------------------------
# value → ((instance-gpu-memory MiB, model), ...): what Karpenter wrote at v1.14.1 (and at
# v1.4.0 for p2/p3). `a100` covers both A100s: memory (per GPU) tells them apart.
KARPENTER_GPU_NAMES: dict[str, tuple[tuple[int, str], ...]] = {
    "a100": ((40960, "A100-40GB"), (81920, "A100-80GB")),
    "h100": ((81920, "H100-80GB"),),
    "h200": ((144384, "H200-141GB"),),
    "b200": ((183359, "B200"),),
    "b300": ((275040, "B300"),),
    "rtx-pro-server-6000": ((98304, "RTX-PRO-6000-Server"),),
    "a10g": ((22888, "A10G"), (24576, "A10G")),
    "l4": ((22888, "L4"),),
    "l40s": ((45776, "L40S"),),
    "t4": ((16384, "T4"),),
    "t4g": ((16384, "T4G"),),
    "v100": ((16384, "V100"), (32768, "V100")),
    "k80": ((12288, "K80"),),
    "radeon-pro-v520": ((8192, "Radeon-Pro-V520"),),
}


# -- EC2 instance types -----------------------------------------------------------------------
@dataclass(frozen=True)
class InstanceGpus:
    model: str  # a GpuModel name
    per_size: Mapping[str, int]  # size → GPUs; 0 = a fraction of one GPU (g6f, gr6f)
    source: str


_KA_DOCS = "aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/reference/instance-types.md"
_KA_DOCS_OLD = (
    "aws/karpenter-provider-aws@v1.4.0 website/content/en/docs/reference/instance-types.md"
)
_SIZES_G = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4,
            "16xlarge": 1, "24xlarge": 4, "48xlarge": 8}  # fmt: skip

INSTANCE_TYPES: dict[str, InstanceGpus] = {
    "p4d": InstanceGpus("A100-40GB", {"24xlarge": 8}, _KA_DOCS),
    "p4de": InstanceGpus("A100-80GB", {"24xlarge": 8}, _KA_DOCS),
    "p5": InstanceGpus("H100-80GB", {"4xlarge": 1, "48xlarge": 8}, _KA_DOCS),
    "p5e": InstanceGpus("H200-141GB", {"48xlarge": 8}, _KA_DOCS),
    "p5en": InstanceGpus("H200-141GB", {"48xlarge": 8}, _KA_DOCS),
    "p6-b200": InstanceGpus("B200", {"48xlarge": 8}, _KA_DOCS),
    "p6-b300": InstanceGpus("B300", {"48xlarge": 8}, _KA_DOCS),
    # Not in Karpenter's generated docs (UltraServer capacity only). The count is unverified:
    # two Grace Blackwell superchips (2 GPUs each) per instance, per the AWS post below.
    "p6e-gb200": InstanceGpus(
        "GB200", {"36xlarge": 4},
        "https://aws.amazon.com/blogs/containers/unlocking-next-generation-ai-performance-"
        "with-dynamic-resource-allocation-on-amazon-eks-and-amazon-ec2-p6e-gb200 (unverified)"),
    # The same counts on https://aws.amazon.com/ec2/instance-types/g7e/ (one RTX PRO 6000
    # Blackwell Server Edition, 96 GB, per GPU).
    "g7e": InstanceGpus("RTX-PRO-6000-Server", {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1,
                        "12xlarge": 2, "24xlarge": 4, "48xlarge": 8}, _KA_DOCS),
    "g7": InstanceGpus("RTX-PRO-4500-Server", {"2xlarge": 1, "4xlarge": 1, "8xlarge": 2,
                       "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
                       "https://github.com/kubernetes/autoscaler/issues/9854"),
    "g6e": InstanceGpus("L40S", _SIZES_G, _KA_DOCS),
    "g6": InstanceGpus("L4", _SIZES_G, _KA_DOCS),
    "gr6": InstanceGpus("L4", {"4xlarge": 1, "8xlarge": 1}, _KA_DOCS),
    "g6f": InstanceGpus("L4", {"large": 0, "xlarge": 0, "2xlarge": 0, "4xlarge": 0}, _KA_DOCS),
    "gr6f": InstanceGpus("L4", {"4xlarge": 0}, _KA_DOCS),
    "g5": InstanceGpus("A10G", _SIZES_G, _KA_DOCS),
    "g5g": InstanceGpus("T4G", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1,
                        "16xlarge": 2, "metal": 2}, _KA_DOCS),
    "g4dn": InstanceGpus("T4", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1,
                         "12xlarge": 4, "16xlarge": 1, "metal": 8}, _KA_DOCS),
    "g4ad": InstanceGpus("Radeon-Pro-V520", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1,
                         "8xlarge": 2, "16xlarge": 4}, _KA_DOCS),
    "p3": InstanceGpus("V100", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}, _KA_DOCS_OLD),
    "p3dn": InstanceGpus("V100", {"24xlarge": 8}, _KA_DOCS),
    "p2": InstanceGpus("K80", {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}, _KA_DOCS_OLD),
    "g3": InstanceGpus("M60", {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4},
                       "https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html"),
    "g3s": InstanceGpus("M60", {"xlarge": 1},
                        "https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html"),
}  # fmt: skip


# -- exact keys --------------------------------------------------------------------------------

_NOT_LABEL_CHARS = re.compile(r"[^A-Za-z0-9\-_. ]")


def gfd_name(product: str) -> str:
    """A product name as GFD writes it in `nvidia.com/gpu.product`: NVIDIA H100 80GB HBM3 →
    NVIDIA-H100-80GB-HBM3 (k8s-device-plugin `sanitise`)."""
    return "-".join(_NOT_LABEL_CHARS.sub("", product).split())


def _product_key(text: str) -> str:
    # NVML's and GFD's spellings of one name meet here; case is not part of a name.
    return gfd_name(text).casefold()


_BY_PRODUCT: dict[str, GpuModel] = {
    _product_key(name): m for m in MODELS for name in m.product_names
}
_BY_DEVICE: dict[int, GpuModel] = {d: m for m in MODELS for d in m.device_ids}
_HEX = re.compile(r"^(?:0x)?([0-9a-f]{4})([0-9a-f]{4})?$", re.IGNORECASE)


def parse_device_id(text: str) -> int | None:
    """The PCI device id in "0x233010DE", "233010DE" (nvidia-smi -q -x), "0x2330" or
    "0x233010DE:0x16C010DE" (with a subsystem); None when it is not one, or not NVIDIA's."""
    match = _HEX.match(text.strip().split(":", 1)[0])
    if match is None:
        return None
    vendor = match.group(2)
    if vendor is not None and int(vendor, 16) != NVIDIA_VENDOR:
        return None
    return int(match.group(1), 16)


def by_device_id(device_id: int) -> GpuModel | None:
    return _BY_DEVICE.get(device_id)


def by_product_name(name: str) -> GpuModel | None:
    """The model an exact product name (NVML's or GFD's spelling) names, else None."""
    return _BY_PRODUCT.get(_product_key(name)) if name.strip() else None


def by_karpenter_name(name: str, memory_mib: int | None = None) -> GpuModel | None:
    """Karpenter's instance-gpu-name; a name two GPUs share needs their memory to tell."""
    candidates = KARPENTER_GPU_NAMES.get(name.strip())
    if not candidates:
        return None
    models = {model for _memory, model in candidates}
    if len(models) == 1:
        return model_named(next(iter(models)))
    matched = {model for memory, model in candidates if memory == memory_mib}
    return model_named(matched.pop()) if len(matched) == 1 else None


def by_instance_type(instance_type: str) -> tuple[GpuModel, int | None] | None:
    """(model, GPUs) of an EC2 instance type; the count is None for a size we do not list."""
    family, _, size = instance_type.strip().lower().partition(".")
    entry = INSTANCE_TYPES.get(family)
    if entry is None:
        return None
    return model_named(entry.model), entry.per_size.get(size)


def resolve_gpu(text: str) -> GpuModel | None:
    """A model from whatever names one whole: mignurse's name (H100-80GB), an EC2 instance
    type (p5.48xlarge), a PCI device id (0x233010DE), a product name (NVIDIA H100 80GB HBM3,
    NVIDIA-H100-80GB-HBM3) or a Karpenter GPU name (h100); None when none does."""
    wanted = text.strip()
    if not wanted:
        return None
    if (named := _BY_NAME.get(wanted.casefold())) is not None:
        return named
    if "." in wanted and (typed := by_instance_type(wanted)) is not None:
        return typed[0]
    number = parse_device_id(wanted)
    if number is not None and (by_id := by_device_id(number)) is not None:
        return by_id
    return by_product_name(wanted) or by_karpenter_name(wanted.lower())
