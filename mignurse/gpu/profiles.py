"""Which GPUs a node has, and the MIG layout a config name means on them: the GPU model table
(`mignurse.gpu.models`) and NVIDIA's default mig-parted configs (`mignurse.gpu.catalogue`)
applied to a node's labels, resources and MIG probe.

Pure data and functions over models: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mignurse.gpu.catalogue import ConfigItem, Configs, catalogue
from mignurse.gpu.models import (
    KARPENTER_GPU_NAMES,
    GpuModel,
    by_device_id,
    by_instance_type,
    by_karpenter_name,
    by_product_name,
    parse_device_id,
)
from mignurse.model import (
    LABEL_GPU_COUNT_HINT,
    LABEL_GPU_PRODUCT,
    LABEL_MIG_STRATEGY,
    RESOURCE_GPU,
    MigState,
    Node,
)

LABEL_GPU_COUNT = "nvidia.com/gpu.count"  # GFD
LABEL_GPU_NAME_HINT = "karpenter.k8s.aws/instance-gpu-name"
LABEL_GPU_MEMORY_HINT = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU
MIG_PRODUCT_MARK = "-MIG-"  # GFD single strategy: <model>-MIG-<profile>
MIG_INVALID = "INVALID"
SHARED_SUFFIX = "-SHARED"  # GFD, when the device plugin shares GPUs (time-slicing, MPS)
MODEL_UNKNOWN = "GPU model unknown"


def base_product(product: str) -> str:
    """GFD's product without the single-strategy "-MIG-<profile>" or sharing suffixes."""
    cut = product.find(MIG_PRODUCT_MARK)
    base = product[:cut] if cut >= 0 else product
    return base.removesuffix(SHARED_SUFFIX)


CONFIG_SUFFIXES = ((".me.all", "+me.all"), (".gfx", "+gfx"), (".me", "+me"))
# GFD's label drops the "+" (`sanitise` keeps A-Za-z0-9-_.): 1g.10gb+me → 1g.10gbme.
_LABEL_PROFILE = re.compile(r"^(\d+g\.\d+gb)(me\.all|gfx|me)$")


def profile_of_config(config: str) -> str:
    """`all-1g.10gb.me` → `1g.10gb+me` (default-file names write `+` as `.`)."""
    profile = config.removeprefix("all-")
    for written, meant in CONFIG_SUFFIXES:
        if profile.endswith(written):
            return profile[: -len(written)] + meant
    return profile


def profile_of_resource(name: str) -> str:
    """A profile as the device plugin spells it back in mig-parted's spelling: resource
    `nvidia.com/mig-1g.10gb.me` (`+` → `.`, k8s-device-plugin@v0.20.0
    internal/resource/nvml-mig-device.go) and label `...-MIG-1g.10gbme` → `1g.10gb+me`."""
    label = _LABEL_PROFILE.match(name)
    if label is not None:
        return f"{label.group(1)}+{label.group(2)}"
    return profile_of_config(name)


def single_strategy_profile(node: Node) -> str | None:
    """The profile in `nvidia.com/gpu.product` under the single strategy ("1g.10gb",
    "INVALID"); None when the product is not a MIG product."""
    product = node.labels.get(LABEL_GPU_PRODUCT, "")
    cut = product.find(MIG_PRODUCT_MARK)
    if cut < 0:
        return None
    written = product[cut + len(MIG_PRODUCT_MARK) :].removesuffix(SHARED_SUFFIX)
    return written if written == MIG_INVALID else profile_of_resource(written)


def _int_label(node: Node, key: str) -> int | None:
    value = node.labels.get(key, "")
    return int(value) if value.isdigit() else None


# -- identity ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuIdentity:
    model: GpuModel | None  # None: unknown, never a guess
    count: int | None
    model_from: str  # where the model was read, or why it is unknown
    count_from: str
    doubts: tuple[str, ...] = ()  # sources that disagree or name a GPU the table lacks


NOT_IN_TABLE = "not in mignurse's GPU table"


@dataclass(frozen=True)
class _Reading:
    """What one source says: a model, or (model None) why it names none."""

    source: str
    model: GpuModel | None
    why: str = NOT_IN_TABLE

    def __str__(self) -> str:
        return self.source if self.model is not None else f"{self.source}: {self.why}"


def _one_model(readings: list[_Reading]) -> _Reading | None:
    """Several GPUs' readings of one kind as one: the same model, else an unknown."""
    if not readings:
        return None
    unknown = [r for r in readings if r.model is None]
    if unknown:
        return unknown[0]
    models = sorted({r.model.name for r in readings if r.model is not None})
    if len(models) > 1:
        return _Reading(
            readings[0].source, None, f"GPUs of more than one model ({', '.join(models)})"
        )
    return readings[0]


def _readings(node: Node, mig: MigState | None) -> tuple[list[_Reading], list[str]]:
    """Every source that names a GPU, most trusted first; and those that cannot settle one."""
    found: list[_Reading] = []
    inconclusive: list[str] = []
    gpus = mig.gpus if mig is not None else ()
    source = mig.source if mig is not None else ""
    by_id: list[_Reading] = []
    for gpu in gpus:
        if not gpu.pci_device_id:
            continue
        number = parse_device_id(gpu.pci_device_id)
        model = by_device_id(number) if number is not None else None
        by_id.append(_Reading(f"{source} PCI device id {gpu.pci_device_id}", model))
    by_name = [
        _Reading(f"{source} GPU name {gpu.name!r}", by_product_name(gpu.name))
        for gpu in gpus
        if gpu.name.strip()
    ]
    for reading in (_one_model(by_id), _one_model(by_name)):
        if reading is not None:
            found.append(reading)
    product = node.labels.get(LABEL_GPU_PRODUCT, "")
    if product.strip():
        found.append(
            _Reading(f"{LABEL_GPU_PRODUCT}={product}", by_product_name(base_product(product)))
        )
    hint = node.labels.get(LABEL_GPU_NAME_HINT, "")
    if hint.strip():
        memory = _int_label(node, LABEL_GPU_MEMORY_HINT)
        words = f"{LABEL_GPU_NAME_HINT}={hint}" + (f" ({memory} MiB)" if memory else "")
        model = by_karpenter_name(hint, memory)
        if model is None and hint.strip() in KARPENTER_GPU_NAMES:
            inconclusive.append(f"{words}: names more than one GPU")  # a100 without memory
        else:
            found.append(_Reading(words, model))
    if node.instance_type:
        typed = by_instance_type(node.instance_type)
        found.append(_Reading(f"instance type {node.instance_type}", typed[0] if typed else None))
    return found, inconclusive


def identify_model(
    node: Node, mig: MigState | None = None
) -> tuple[GpuModel | None, str, tuple[str, ...]]:
    """(model, where it was read, doubts): the most trusted source's model, where every other
    source that names a model agrees; None, and why, when the best source names a GPU the
    table lacks or two sources disagree."""
    readings, inconclusive = _readings(node, mig)
    known = [r for r in readings if r.model is not None]
    if not readings:
        why = "no GPU device id, product name, Karpenter GPU name or instance type"
        return None, f"{MODEL_UNKNOWN}: {why}", tuple(inconclusive)
    best = readings[0]
    doubts = tuple(inconclusive + [str(r) for r in readings[1:] if r.model is None])
    if best.model is None:
        return None, f"{MODEL_UNKNOWN} ({best})", doubts
    others = sorted({r.model.name for r in known if r.model is not None} - {best.model.name})
    if others:
        disagree = "; ".join(f"{r.source} → {r.model.name}" for r in known if r.model is not None)
        return None, f"{MODEL_UNKNOWN}: sources disagree ({disagree})", doubts
    return best.model, best.source, doubts


def identify_gpus(node: Node, mig: MigState | None = None) -> GpuIdentity:
    """GPU model and count of a node from its NVML/nvidia-smi probe, labels or instance type."""
    model, model_from, doubts = identify_model(node, mig)
    typed = by_instance_type(node.instance_type) if node.instance_type else None

    count: int | None = None
    count_from = ""
    for key in (LABEL_GPU_COUNT, LABEL_GPU_COUNT_HINT):
        value = _int_label(node, key)
        if value:
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
    if count is None and typed is not None and typed[1]:
        count = typed[1]
        count_from = f"instance type {node.instance_type}"
    if count is None and mig is not None and mig.gpus:
        count = len(mig.gpus)
        count_from = "GPUs listed by the node's MIG probe"
    return GpuIdentity(model, count, model_from, count_from, doubts)


# -- layouts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """What one GPU should look like under a config. `mig_enabled` None: the config does not
    say for this GPU; `devices` None: the MIG devices are not known (`note` says why)."""

    mig_enabled: bool | None
    devices: Mapping[str, int] | None = field(default=None)
    note: str = ""


def _item_for(items: tuple[ConfigItem, ...], model: GpuModel) -> ConfigItem | None:
    # A filter that names the GPU wins over an item for any GPU, as the file is written.
    for item in items:
        if item.device_filter and item.covers(model.filter_ids):
            return item
    return next((item for item in items if not item.device_filter), None)


def _by_index(items: tuple[ConfigItem, ...], model: GpuModel | None) -> str:
    """The GPU indices an item for this model names, as words; "" when every item that
    applies is for all GPUs. mig-parted walks the items in order and applies each to the
    GPUs it selects by filter and index (NVIDIA/mig-parted v0.15.0
    cmd/nvidia-mig-parted/assert/assert.go WalkSelectedMigConfigForEachGPU), so such a
    config is a layout per GPU, not one per model."""
    for item in items:
        if item.devices == "all":
            continue
        if model is None or not item.device_filter or item.covers(model.filter_ids):
            return ", ".join(str(index) for index in item.devices)
    return ""


def _configs(configs: Configs | None) -> Configs:
    return catalogue().configs if configs is None else configs


def expected_layout(
    config: str, model: GpuModel | None, configs: Configs | None = None
) -> Layout | None:
    """The per-GPU layout a config means on this GPU model, in `configs` (a mig-parted file's,
    `gpu.clusterconfig`; NVIDIA's default file when None); None for a name not in the file."""
    items = _configs(configs).get(config)
    if items is None:
        return None
    indices = _by_index(items, model)
    if indices:
        return Layout(None, None, f"{config} sets GPUs {indices} by index: a layout per GPU")
    if model is None:
        if len(items) == 1 and not items[0].device_filter:
            only = items[0]
            if not only.mig_enabled or not only.mig_devices:
                return Layout(only.mig_enabled, {})
            return Layout(True, None, MODEL_UNKNOWN)
        return Layout(None, None, f"{MODEL_UNKNOWN}, and {config} differs by GPU")
    item = _item_for(items, model)
    if item is None:
        return Layout(
            None, None, f"{config} has no entry for {model.name}: mig-parted leaves it as it is"
        )
    if not item.mig_enabled:
        return Layout(False, {})
    if not model.mig_capable:
        return Layout(None, None, f"{model.name} has no MIG")
    for profile, count in item.mig_devices.items():
        most = model.profiles.get(profile)
        if most is None:
            return Layout(None, None, f"{model.name} has no {profile} profile")
        if count > most:
            return Layout(None, None, f"{model.name} holds at most {most}×{profile}")
    return Layout(True, dict(item.mig_devices))


def profiles_of_config(config: str, configs: Configs | None = None) -> frozenset[str]:
    """The profiles a config makes on whatever GPU it applies to; empty when that depends on
    the GPU (device filters, indices) or the name is not in the file."""
    items = _configs(configs).get(config, ())
    if len(items) != 1 or items[0].device_filter or items[0].devices != "all":
        return frozenset()
    return frozenset(items[0].mig_devices)


def config_names(model: GpuModel, configs: Configs | None = None) -> list[str]:
    """Every config of the file whose layout on this model is known."""
    names = []
    for config in _configs(configs):
        layout = expected_layout(config, model, configs)
        if layout is not None and layout.devices is not None and layout.mig_enabled is not None:
            names.append(config)
    return names


def standard_layouts(model: GpuModel, configs: Configs | None = None) -> dict[str, dict[str, int]]:
    """config → per-GPU MIG devices, for every config of the file (NVIDIA's default when None)
    that makes MIG devices on this model."""
    layouts = {}
    for config in config_names(model, configs):
        layout = expected_layout(config, model, configs)
        if layout is not None and layout.mig_enabled and layout.devices:
            layouts[config] = dict(layout.devices)
    return layouts


def mig_slices(node: Node) -> dict[str, int]:
    """Advertised MIG slices by profile: mixed-strategy resources, or under the single
    strategy `nvidia.com/gpu` with the product's profile."""
    slices: dict[str, int] = {}
    for written, count in node.mig_resources.items():
        if count > 0:
            profile = profile_of_resource(written)
            slices[profile] = slices.get(profile, 0) + count
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
