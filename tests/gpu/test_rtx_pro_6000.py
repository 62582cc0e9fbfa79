"""The RTX PRO 6000 Blackwell Server Edition and every g7e size, as the catalogue holds them,
checked against real-shaped `nvidia-smi -L`, `mig -lgip` and `mig -lgi` (tests/corpus)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mignurse.evidence.nvsmi import parse_mig_lgi, parse_mig_lgip, parse_smi_list
from mignurse.gpu.catalogue import catalogue
from mignurse.gpu.models import (
    by_device_id,
    by_instance_type,
    by_karpenter_name,
    by_product_name,
    model_named,
)
from mignurse.gpu.profiles import config_names, expected_layout, identify_gpus, standard_layouts
from mignurse.model import Node
from mignurse.sim.nodes import NodeSandbox, SandboxShell

CORPUS = Path(__file__).parents[1] / "corpus" / "nvidia-smi"
RTX = model_named("RTX-PRO-6000-Server")


def corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


# Karpenter's generated instance-types.md at v1.14.1 (aws/karpenter-provider-aws): every g7e
# size with karpenter.k8s.aws/instance-gpu-count, and nvidia.com/gpu the same.
G7E = {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8}


@pytest.mark.parametrize(("size", "gpus"), G7E.items())
def test_every_g7e_size_has_its_gpus_and_their_layouts(size: str, gpus: int) -> None:
    instance_type = f"g7e.{size}"
    assert by_instance_type(instance_type) == (RTX, gpus)
    node = Node.from_api(
        {
            "metadata": {
                "name": "n1",
                "labels": {
                    "node.kubernetes.io/instance-type": instance_type,
                    "karpenter.k8s.aws/instance-gpu-name": "rtx-pro-server-6000",
                    "karpenter.k8s.aws/instance-gpu-memory": "98304",
                    "karpenter.k8s.aws/instance-gpu-count": str(gpus),
                },
            },
            "status": {},
        }
    )
    identity = identify_gpus(node)
    assert (identity.model, identity.count) == (RTX, gpus)
    layout = expected_layout("all-1g.24gb", identity.model)
    assert layout is not None and layout.devices == {"1g.24gb": 4}


def test_the_gpu_is_named_the_same_by_every_key() -> None:
    assert by_device_id(0x2BB5) is RTX
    assert by_product_name("NVIDIA RTX PRO 6000 Blackwell Server Edition") is RTX
    assert by_product_name("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition") is RTX  # GFD
    assert by_karpenter_name("rtx-pro-server-6000", 98304) is RTX
    assert RTX.filter_ids == ("0x2BB510DE",)
    # MIG user guide, supported GPUs: RTX PRO 6000 Blackwell needs R575 (575.51.03) or later
    assert RTX.mig_min_driver == "R575 (>= 575.51.03)"


# NVIDIA/gpu-operator@v25.10.0 assets/state-mig-manager/0400_configmap.yaml (the operator's
# default-mig-parted-config) and NVIDIA/mig-parted@v0.15.0 config-default.yaml list these.
RTX_CONFIGS = {
    "all-disabled": {}, "all-enabled": {},
    "all-1g.24gb": {"1g.24gb": 4}, "all-1g.24gb.me": {"1g.24gb+me": 1},
    "all-1g.24gb.gfx": {"1g.24gb+gfx": 4}, "all-1g.24gb.me.all": {"1g.24gb+me.all": 1},
    "all-1g.24gb-me": {"1g.24gb-me": 4}, "all-2g.48gb": {"2g.48gb": 2},
    "all-2g.48gb.gfx": {"2g.48gb+gfx": 2}, "all-2g.48gb.me.all": {"2g.48gb+me.all": 1},
    "all-2g.48gb-me": {"2g.48gb-me": 2}, "all-4g.96gb": {"4g.96gb": 1},
    "all-4g.96gb.gfx": {"4g.96gb+gfx": 1}, "all-balanced": {"1g.24gb": 2, "2g.48gb": 1},
}  # fmt: skip


def test_the_default_configs_on_this_gpu_are_the_operators() -> None:
    assert set(config_names(RTX)) == set(RTX_CONFIGS)
    for config, devices in RTX_CONFIGS.items():
        layout = expected_layout(config, RTX)
        assert layout is not None and dict(layout.devices or {}) == devices, config
    assert standard_layouts(RTX)["all-balanced"] == {"1g.24gb": 2, "2g.48gb": 1}
    balanced = {item.device_filter: dict(item.mig_devices) for item in catalogue().configs[
        "all-balanced"]}  # fmt: skip
    assert balanced[("0x2BB510DE",)] == {"1g.24gb": 2, "2g.48gb": 1}


def test_profiles_ids_and_counts_are_what_mig_lgip_prints() -> None:
    table = parse_mig_lgip(corpus("mig-lgip-r580-rtx-pro-6000.txt"))
    assert table.problems == () and table.error == ""
    seen = {row.profile: row for row in table.rows}
    assert set(seen) == set(RTX.profiles) == set(RTX.gi_profiles)
    for profile, row in seen.items():
        assert row.profile_id == RTX.gi_profiles[profile].profile_id, profile
        assert row.total == row.free == RTX.profiles[profile], profile
    assert seen["1g.24gb"].memory_gib == 23.62


def test_geometry_fills_the_four_slices_exactly() -> None:
    assert RTX.slices == 4
    for profile, geometry in RTX.gi_profiles.items():
        slices = int(profile.split("g.", 1)[0])
        assert geometry.size == slices, profile
        assert all(start % slices == 0 and start + slices <= 4 for start in geometry.starts)
        if RTX.profiles[profile] > 1:  # every instance of it needs a place of its own
            assert len(geometry.starts) == RTX.profiles[profile], profile


def test_all_1g_24gb_as_the_driver_lists_it() -> None:
    smi = parse_smi_list(corpus("L-r580-rtx-pro-6000-all-1g.24gb.txt"))
    assert smi.problems == ()
    (gpu,) = smi.gpus
    assert by_product_name(gpu.name) is RTX
    assert [d.profile for d in gpu.mig_devices] == ["1g.24gb"] * 4

    lgi = parse_mig_lgi(corpus("mig-lgi-r580-rtx-pro-6000-all-1g.24gb.txt"))
    assert lgi.problems == ()
    assert {(r.profile, r.profile_id) for r in lgi.rows} == {("1g.24gb", 14)}
    starts = sorted(r.placement_start for r in lgi.rows if r.placement_start is not None)
    assert starts == list(RTX.gi_profiles["1g.24gb"].starts)
    assert {r.placement_size for r in lgi.rows} == {RTX.gi_profiles["1g.24gb"].size}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No MIG-enabled devices found.",
        "Failed to display GPU instance profiles: Insufficient Permissions",
        "|   0  MIG 1g.24gb         14     4/",  # cut off
        "\x00\x01garbage\r\n|   0  MIG 1g.24gb  x  4/4  23.62  No  46  1  1  |",
    ],
)
def test_lgip_of_any_shape_is_read_without_raising(text: str) -> None:
    table = parse_mig_lgip(text)
    assert table.rows == ()
    assert table.problems or table.none_found or table.error


def test_lgip_with_crlf_and_a_na_memory_still_reads() -> None:
    text = corpus("mig-lgip-r580-rtx-pro-6000.txt").replace("23.62", "  N/A").replace("\n", "\r\n")
    rows = parse_mig_lgip(text).rows
    assert len(rows) == 11 and rows[0].memory_gib is None


@pytest.mark.parametrize("config", ["all-1g.24gb-me", "all-2g.48gb.gfx", "all-balanced"])
def test_the_simulator_makes_the_gpu_instances_with_the_real_ids(
    tmp_path: Path, config: str
) -> None:
    facts = {"story": "healthy", "gpus": 1, "mig_mode": "Enabled",
             "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}  # fmt: skip
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts=facts)
    layout = expected_layout(config, RTX)
    assert layout is not None and layout.devices
    devices = "".join(f'      "{p}": {n}\n' for p, n in layout.devices.items())
    spec = tmp_path / "config.yaml"
    spec.write_text(
        f"version: v1\nmig-configs:\n  {config}:\n  - devices: all\n    mig-enabled: true\n"
        f"    mig-devices:\n{devices}"
    )
    shell = SandboxShell(sandbox)
    applied = shell.run(
        f"env -u MIG_PARTED_HOOKS_FILE nvidia-mig-parted apply -f {spec} -c {config}\n",
        timeout=30,
        stdout=io.BytesIO(),
    )
    assert applied.rc == 0, applied.stderr_tail
    out = io.BytesIO()
    assert shell.run("nvidia-smi mig -lgi\n", timeout=30, stdout=out).rc == 0
    rows = parse_mig_lgi(out.getvalue().decode()).rows
    assert sorted(r.profile for r in rows) == sorted(
        p for p, n in layout.devices.items() for _ in range(n)
    )
    for row in rows:
        geometry = RTX.gi_profiles[row.profile]
        assert row.profile_id == geometry.profile_id
        assert row.placement_size == geometry.size and row.placement_start in geometry.starts
