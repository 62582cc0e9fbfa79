"""GPU identity: every key names one model whole, and nothing is read by substring."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mignurse.gpu.models import (
    INSTANCE_TYPES,
    KARPENTER_GPU_NAMES,
    MODELS,
    by_device_id,
    by_instance_type,
    by_karpenter_name,
    by_product_name,
    gfd_name,
    model_named,
    parse_device_id,
    resolve_gpu,
)
from mignurse.gpu.profiles import (
    MODEL_UNKNOWN,
    identify_gpus,
    mig_slices,
    profile_of_resource,
    single_strategy_profile,
)
from mignurse.model import GpuMigState, MigState, Node
from mignurse.sim.hardware import INSTANCE_TYPES as SIM_INSTANCE_TYPES

PRODUCT_NAMES = [(name, m.name) for m in MODELS for name in m.product_names]
ALL_KEYS = [name for name, _ in PRODUCT_NAMES] + [gfd_name(name) for name, _ in PRODUCT_NAMES]
KEYS = {gfd_name(name).casefold() for name, _ in PRODUCT_NAMES}


def node(labels: dict[str, str], instance_type: str = "") -> Node:
    if instance_type:
        labels = {**labels, "node.kubernetes.io/instance-type": instance_type}
    return Node.from_api({"metadata": {"name": "n1", "labels": labels}, "status": {}})


def probe(*gpus: tuple[str, str]) -> MigState:
    return MigState(
        "nvml",
        gpus=tuple(
            GpuMigState(i, name, f"GPU-{i}", pci_device_id=device_id)
            for i, (name, device_id) in enumerate(gpus)
        ),
    )


# -- the table ---------------------------------------------------------------------------------


def test_each_key_names_one_model() -> None:
    products = [gfd_name(n).casefold() for n, _ in PRODUCT_NAMES]
    assert len(products) == len(set(products))
    device_ids = [d for m in MODELS for d in m.device_ids]
    assert len(device_ids) == len(set(device_ids))
    names = [m.name.casefold() for m in MODELS]
    assert len(names) == len(set(names))
    for rows in KARPENTER_GPU_NAMES.values():
        assert len({memory for memory, _ in rows}) == len(rows)
        for _memory, model in rows:
            model_named(model)  # KeyError for a name outside the table
    for family in INSTANCE_TYPES.values():
        model_named(family.model)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA-GH200-480GB", "GH200-96GB"),
        ("NVIDIA GH200 120GB", "GH200-96GB"),
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA GB300", "GB300"),
        ("NVIDIA H200", "H200-141GB"),
        ("NVIDIA H200 NVL", "H200-NVL"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA H100 PCIe", "H100-80GB"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA A30", "A30"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Server"),
        # Not names any GPU reports: a part of one never stands for it.
        ("GH200", None),
        ("NVIDIA GH200", None),
        ("NVIDIA H100", None),
        ("NVIDIA A100", None),
        ("A100-80GB", None),
        ("H200", None),
        ("B200", None),
        ("NVIDIA L40", None),
        ("NVIDIA T4", None),
        ("NVIDIA RTX PRO 6000 Blackwell", None),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", None),
        ("NVIDIA GH200 480GB NVL", None),
        ("", None),
    ],
)
def test_product_names_map_whole_or_not_at_all(name: str, model: str | None) -> None:
    found = by_product_name(name)
    assert (found.name if found else None) == model


@given(
    key=st.sampled_from(ALL_KEYS),
    before=st.text(alphabet="ABGHNVLX0123456789 -", max_size=6),
    after=st.text(alphabet="ABGHNVLX0123456789 -", max_size=6),
)
def test_a_key_inside_longer_text_is_not_that_key(key: str, before: str, after: str) -> None:
    text = before + key + after
    found = by_product_name(text)
    if found is not None:
        # only another whole key (spacing and case aside) may match, and it names its own model
        same = [m for n, m in PRODUCT_NAMES if gfd_name(n).casefold() == gfd_name(text).casefold()]
        assert same == [found.name]


@given(key=st.sampled_from(ALL_KEYS), cut=st.integers(min_value=1, max_value=8))
def test_a_key_cut_short_is_not_that_key(key: str, cut: int) -> None:
    shorter = key[:-cut]
    found = by_product_name(shorter)
    # only a shorter text that is itself a whole key matches ("… PCIe LC" cut to "… PCIe")
    assert found is None or gfd_name(shorter).casefold() in KEYS


@pytest.mark.parametrize(
    ("text", "device"),
    [
        ("234210DE", 0x2342),
        ("0x234210de", 0x2342),
        ("0X233010DE", 0x2330),
        ("0x2330", 0x2330),
        ("0x233010DE:0x16C110DE", 0x2330),
        (" 2901 ", 0x2901),
        ("0x74A11002", None),  # another vendor
        ("N/A", None),
        ("", None),
        ("0x2330 10DE", None),
    ],
)
def test_device_ids_are_read_in_every_spelling_nvidia_uses(text: str, device: int | None) -> None:
    assert parse_device_id(text) == device


@pytest.mark.parametrize(
    ("device", "model"),
    [(0x2342, "GH200-96GB"), (0x2348, "GH200-144GB"), (0x2335, "H200-141GB"),
     (0x233B, "H200-NVL"), (0x2941, "GB200"), (0x2901, "B200"), (0x3182, "B300"),
     (0x31C2, "GB300"), (0x2321, "H100-NVL"), (0x2330, "H100-80GB"), (0x20B0, "A100-40GB"),
     (0x20B2, "A100-80GB"), (0x20B7, "A30"), (0x2BB5, "RTX-PRO-6000-Server"),
     (0x2237, "A10G"), (0x27B8, "L4"), (0x26B9, "L40S"), (0x1EB8, "T4"), (0x2339, None)],
)  # fmt: skip
def test_device_ids_name_their_model(device: int, model: str | None) -> None:
    found = by_device_id(device)
    assert (found.name if found else None) == model


@pytest.mark.parametrize(
    ("name", "memory", "model"),
    [
        ("a100", 40960, "A100-40GB"),
        ("a100", 81920, "A100-80GB"),
        ("a100", None, None),  # p4d or p4de: the name alone does not say
        ("a100", 65536, None),
        ("h100", 81920, "H100-80GB"),
        ("h200", 144384, "H200-141GB"),
        ("b200", None, "B200"),
        ("b300", 275040, "B300"),
        ("rtx-pro-server-6000", 98304, "RTX-PRO-6000-Server"),
        ("rtx-pro-6000", 98304, None),
        ("gh200", None, None),
        ("gb200", None, None),
        ("H100", 81920, None),  # Karpenter writes lower case
    ],
)
def test_karpenter_gpu_names(name: str, memory: int | None, model: str | None) -> None:
    found = by_karpenter_name(name, memory)
    assert (found.name if found else None) == model


# -- instance types ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "model", "gpus", "mig"),
    [
        ("p4d.24xlarge", "A100-40GB", 8, True),
        ("p4de.24xlarge", "A100-80GB", 8, True),
        ("p5.4xlarge", "H100-80GB", 1, True),
        ("p5.48xlarge", "H100-80GB", 8, True),
        ("p5e.48xlarge", "H200-141GB", 8, True),
        ("p5en.48xlarge", "H200-141GB", 8, True),
        ("p6-b200.48xlarge", "B200", 8, True),
        ("p6-b300.48xlarge", "B300", 8, True),
        ("p6e-gb200.36xlarge", "GB200", 4, True),
        ("g7e.2xlarge", "RTX-PRO-6000-Server", 1, True),
        ("g7e.4xlarge", "RTX-PRO-6000-Server", 1, True),
        ("g7e.8xlarge", "RTX-PRO-6000-Server", 1, True),
        ("g7e.12xlarge", "RTX-PRO-6000-Server", 2, True),
        ("g7e.24xlarge", "RTX-PRO-6000-Server", 4, True),
        ("g7e.48xlarge", "RTX-PRO-6000-Server", 8, True),
        ("g6e.12xlarge", "L40S", 4, False),
        ("g6.48xlarge", "L4", 8, False),
        ("g5.xlarge", "A10G", 1, False),
        ("g4dn.metal", "T4", 8, False),
        ("g5g.16xlarge", "T4G", 2, False),
        ("p3.16xlarge", "V100", 8, False),
        ("p3dn.24xlarge", "V100", 8, False),
        ("p2.16xlarge", "K80", 16, False),
        ("g3.16xlarge", "M60", 4, False),
    ],
)
def test_every_gpu_instance_type_karpenter_offers(
    instance_type: str, model: str, gpus: int, mig: bool
) -> None:
    found = by_instance_type(instance_type)
    assert found is not None
    assert (found[0].name, found[1], found[0].mig_capable) == (model, gpus, mig)


def test_an_instance_type_is_read_by_its_family_never_a_part_of_it() -> None:
    found = by_instance_type("p6e-gb200.36xlarge")
    assert found is not None and found[0].name == "GB200"
    assert by_instance_type("p6e-gb300.36xlarge") is None
    assert by_instance_type("m7i.2xlarge") is None
    assert by_instance_type("p5.96xlarge") == (model_named("H100-80GB"), None)  # size unknown


@pytest.mark.parametrize(
    ("model", "driver"),
    [
        ("A100-40GB", "R450 (>= 450.80.02)"),
        ("A30", "R460 (>= 460.73.01)"),
        ("H100-80GB", "R525 (>= 525.85.12)"),
        ("H200-141GB", "R550 (>= 550.90.07)"),
        ("B200", "R570 (>= 570.133.20)"),
        ("GB200", "R570 (>= 570.133.20)"),
        ("B300", "R580 (>= 580.82.07)"),
        ("RTX-PRO-6000-Server", "R575 (>= 575.51.03)"),
        ("GH200-144GB", None),  # no row for it in the guide's table
    ],
)
def test_minimum_driver_for_mig_per_model(model: str, driver: str | None) -> None:
    assert model_named(model).mig_min_driver == driver


def test_the_simulators_gpu_tables_agree_with_the_catalogue() -> None:
    from mignurse.gpu.profiles import standard_layouts

    for name, it in SIM_INSTANCE_TYPES.items():
        if it.gpu is None:
            continue
        typed = by_instance_type(name)
        assert typed is not None, name
        model, gpus = typed
        assert gpus == it.gpu_count, name
        assert by_product_name(it.gpu.product) in (model, None), name
        assert by_karpenter_name(it.gpu.karpenter_name, it.gpu.ec2_memory_mib) == model, name
        if model.profiles:
            assert it.gpu.mig_layouts == standard_layouts(model), name


# -- a node's GPUs -----------------------------------------------------------------------------


def test_the_pci_device_id_outranks_a_product_name_it_contradicts() -> None:
    gh200 = probe(("NVIDIA GH200 480GB", "0x234210DE"))
    ident = identify_gpus(node({"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"}), gh200)
    assert ident.model is not None and ident.model.name == "GH200-96GB"
    assert ident.model_from == "nvml PCI device id 0x234210DE"
    # A label that says otherwise makes the identity uncertain, not the label's GPU.
    stale = identify_gpus(node({"nvidia.com/gpu.product": "NVIDIA-H200"}), gh200)
    assert stale.model is None
    assert stale.model_from.startswith(f"{MODEL_UNKNOWN}: sources disagree")
    assert "nvidia.com/gpu.product=NVIDIA-H200 → H200-141GB" in stale.model_from


def test_a_device_id_the_table_lacks_is_unknown_whatever_the_instance_type_says() -> None:
    ident = identify_gpus(node({}, "p5.48xlarge"), probe(("NVIDIA H100", "0x233910DE")))
    assert ident.model is None
    assert "PCI device id 0x233910DE: not in mignurse's GPU table" in ident.model_from
    assert ident.count == 8  # the count still comes from the instance type


def test_gpus_of_two_models_on_one_node_are_no_one_model() -> None:
    mixed = probe(("NVIDIA H100 80GB HBM3", "0x233010DE"), ("NVIDIA H100 NVL", "0x232110DE"))
    ident = identify_gpus(node({}), mixed)
    assert ident.model is None and "GPUs of more than one model" in ident.model_from


def test_an_unknown_name_from_a_less_trusted_source_is_a_doubt_only() -> None:
    ident = identify_gpus(
        node({"karpenter.k8s.aws/instance-gpu-name": "a100"}, "p4d.24xlarge"),
        probe(("NVIDIA A100-SXM4-40GB", "")),
    )
    assert ident.model is not None and ident.model.name == "A100-40GB"
    assert ident.doubts == ("karpenter.k8s.aws/instance-gpu-name=a100: names more than one GPU",)


@pytest.mark.parametrize(
    ("labels", "instance_type", "model"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-GB200"}, "p6e-gb200.36xlarge", "GB200"),
        ({"nvidia.com/gpu.product": "NVIDIA-GH200-480GB-MIG-1g.12gb"}, "", "GH200-96GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}, "", "H100-80GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-H200-NVL"}, "", "H200-NVL"),
        ({"nvidia.com/gpu.product": "NVIDIA-GB300"}, "", "GB300"),
        ({"karpenter.k8s.aws/instance-gpu-name": "rtx-pro-server-6000",
          "karpenter.k8s.aws/instance-gpu-memory": "98304"}, "g7e.4xlarge", "RTX-PRO-6000-Server"),
        ({}, "p6e-gb200.36xlarge", "GB200"),
        ({"nvidia.com/gpu.product": "NVIDIA-GH200"}, "", None),
        ({"nvidia.com/gpu.product": "NVIDIA-B200"}, "p6e-gb200.36xlarge", None),  # disagree
        ({}, "", None),
    ],
)  # fmt: skip
def test_node_labels_and_instance_type(
    labels: dict[str, str], instance_type: str, model: str | None
) -> None:
    ident = identify_gpus(node(labels, instance_type))
    assert (ident.model.name if ident.model else None) == model
    if model is None:
        assert ident.model_from.startswith(MODEL_UNKNOWN)


def test_resolve_gpu_takes_every_whole_spelling() -> None:
    for text in ("GB200", "gb200", "p6e-gb200.36xlarge", "0x294110DE", "2941", "NVIDIA GB200",
                 "NVIDIA-GB200"):  # fmt: skip
        found = resolve_gpu(text)
        assert found is not None and found.name == "GB200", text
    assert resolve_gpu("GB20") is None and resolve_gpu("B200 ") == model_named("B200")


# -- profile spellings the device plugin writes back -------------------------------------------


@pytest.mark.parametrize(
    ("written", "profile"),
    [
        ("1g.10gb", "1g.10gb"),
        ("1g.10gb.me", "1g.10gb+me"),  # resource nvidia.com/mig-1g.10gb.me
        ("1g.10gbme", "1g.10gb+me"),  # GFD label, "+" dropped
        ("1g.24gb.me.all", "1g.24gb+me.all"),
        ("1g.24gbme.all", "1g.24gb+me.all"),
        ("1g.24gb.gfx", "1g.24gb+gfx"),
        ("1g.24gbgfx", "1g.24gb+gfx"),
        ("1g.24gb-me", "1g.24gb-me"),
    ],
)
def test_profile_spellings_of_resources_and_labels(written: str, profile: str) -> None:
    assert profile_of_resource(written) == profile


def test_media_extension_slices_are_counted_under_their_profile() -> None:
    mixed = Node.from_api(
        {
            "metadata": {"name": "n1", "labels": {}},
            "status": {"allocatable": {"nvidia.com/mig-1g.10gb.me": "8"}},
        }
    )
    assert mig_slices(mixed) == {"1g.10gb+me": 8}
    single = replace(
        mixed, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gbme"}
    )
    assert single_strategy_profile(single) == "1g.10gb+me"
