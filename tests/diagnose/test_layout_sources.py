"""mig-layout-mismatch source by source: what the GPUs report (the NVML probe's nvml.json),
what the device plugin advertises, and what the NVIDIA DRA driver publishes, each held to the
layout NVIDIA's default mig-parted config gives `nvidia.com/mig.config` on the node's GPU
model (mignurse/gpu/catalogue.py). The node is a Karpenter p4d.24xlarge (8 × A100-SXM4-40GB,
PCI device id 0x20B010DE) unless a test says otherwise; the diagnosis runs through the engine
with every rule, as `mignurse diagnose` runs it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from drashapes import dra_node, plugin_pod, resource_slice

from mignurse.cluster.dra import plugin_nodes_of
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.evidence import parse_nvml_json
from mignurse.model import MigState, Node, Pod, ResourceSlice

NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)  # two hours after the node joined
SECOND = timedelta(seconds=1)
NODE = "ip-10-0-8-10.us-west-2.compute.internal"
A100 = ("NVIDIA A100-SXM4-40GB", "0x20B010DE")
SEVEN = {"1g.5gb": 7}  # all-1g.5gb on one A100-40GB
# Labels that would name the GPU: a test that wants it unknown removes them all.
GPU_NAMING = (
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-gpu-count",
)


def node(
    config: str = "all-1g.5gb",
    resources: dict[str, int] | None = None,
    *,
    drop: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
    ready: bool = True,
    **shape: str,
) -> dict[str, Any]:
    """The node as the API server returns it (`shape`: drashapes.dra_node's words);
    `resources` are the device plugin's."""
    found = dra_node(NODE, config=config, ready=ready, **shape)
    found["metadata"]["labels"].update(labels or {})
    for key in drop:
        found["metadata"]["labels"].pop(key)
    for key, count in (resources or {}).items():
        found["status"]["capacity"][key] = str(count)
        found["status"]["allocatable"][key] = str(count)
    return found


def mixed(per_profile: dict[str, int]) -> dict[str, int]:
    """The device plugin's resources under the mixed strategy."""
    return {f"nvidia.com/mig-{p}": n for p, n in per_profile.items()}


def gpu_doc(
    index: int, layout: dict[str, int] | str, gpu: tuple[str, str] = A100
) -> dict[str, Any]:
    """One GPU of nvml.json: MIG Enabled with these devices, or the mode named."""
    mode = "Enabled" if isinstance(layout, dict) else layout
    devices: list[dict[str, Any]] = []
    for profile, count in sorted(layout.items()) if isinstance(layout, dict) else ():
        for _ in range(count):
            devices.append({
                "uuid": f"MIG-{index:02d}{len(devices):02d}a1b2-3c4d-5e6f-8a7b-6c5d4e3f2a1b",
                "index": len(devices),
                "gpuInstanceId": 7 + len(devices),
                "computeInstanceId": 0,
                "profile": profile,
                "memoryMiB": 4864,
            })  # fmt: skip
    return {
        "index": index,
        "name": gpu[0],
        "uuid": f"GPU-5f1c2c6e-0c1d-4b1e-9f7a-1e2d3c4b5a{index:02d}",
        "pciBusId": f"00000000:{16 + index:02X}:00.0",
        "pciDeviceId": gpu[1],
        "migMode": {"current": mode, "pending": mode},
        "devices": devices,
    }


def nvml(*gpus: dict[str, int] | str, gpu: tuple[str, str] = A100) -> dict[str, Any]:
    """nvml.json as mignurse's probe writes it on the node (MigState.to_json)."""
    return {
        "source": "nvml",
        "status": "ok",
        "driverVersion": "580.95.05",
        "gpus": [gpu_doc(i, layout, gpu) for i, layout in enumerate(gpus)],
    }


def layout_findings(
    raw: dict[str, Any],
    probe: dict[str, Any] | None = None,
    *,
    slices: Sequence[dict[str, Any]] = (),
    dra: bool = False,
    operator: tuple[dict[str, Any], tuple[dict[str, Any], ...] | None] | None = None,
) -> list[Finding]:
    """The node's mig-layout-mismatch findings; `dra`: the DRA driver's kubelet plugin runs;
    `operator`: the GPU operator's ClusterPolicy and the ConfigMaps read beside it."""
    the_node = Node.from_api(raw)
    evidence = {}
    if probe is not None:
        mig: MigState = parse_nvml_json(json.dumps(probe))
        evidence[NODE] = NodeEvidence(node=NODE, mig=mig)
    snapshot = Snapshot(
        nodes={NODE: the_node},
        taken_at=NOW,
        resource_slices=tuple(ResourceSlice.from_api(s) for s in slices),
        dra_plugin_nodes=plugin_nodes_of([Pod.from_api(plugin_pod(NODE))] if dra else []),
    )
    policy, configmaps = operator if operator is not None else (None, ())
    inp = DiagnosisInput(
        snapshot=snapshot,
        now=NOW,
        node_evidence=evidence,
        cluster_policy=policy,
        mig_configmaps=configmaps,
    )
    result = diagnose(inp)
    assert result.rule_errors == []
    return [f for f in result.findings if f.id == "mig-layout-mismatch"]


def the_finding(*args: Any, **kwargs: Any) -> Finding:
    (found,) = layout_findings(*args, **kwargs)
    assert found.nodes == (NODE,)
    return found


def said(finding: Finding) -> set[tuple[str, str]]:
    return {(e.source, e.text) for e in finding.evidence}


# -- what the GPUs report ----------------------------------------------------------------------


def test_gpus_left_out_of_mig_mode_are_named_as_ranges_of_gpus() -> None:
    probe = nvml("Disabled", "Disabled", "Disabled", SEVEN, SEVEN, "Disabled", SEVEN, SEVEN)
    found = the_finding(node(resources=mixed({"1g.5gb": 28})), probe)

    assert found.summary == (
        f"{NODE}: nvidia.com/mig.config=all-1g.5gb (7×1g.5gb per GPU) but GPUs 0-2, 5: MIG mode "
        "Disabled, all-1g.5gb asks Enabled (+1 more)"
    )
    assert ("node", "advertises 28×1g.5gb, all-1g.5gb on 8 GPUs means 56×1g.5gb") in said(found)


def test_gpus_carved_into_another_profile_are_named_with_what_they_hold() -> None:
    other = {"1g.10gb": 4}
    probe = nvml(SEVEN, SEVEN, SEVEN, other, SEVEN, SEVEN, other, SEVEN)
    found = the_finding(node(resources=mixed({"1g.5gb": 42, "1g.10gb": 8})), probe)

    assert "but GPUs 3, 6: MIG devices 4×1g.10gb, all-1g.5gb asks 7×1g.5gb (+1 more)" in (
        found.summary
    )
    assert found.severity == "warning"


def test_a_probe_that_agrees_with_the_layout_is_shown_beside_the_plugins_mismatch() -> None:
    found = the_finding(node(resources=mixed({"1g.5gb": 49})), nvml(*[SEVEN] * 8))

    assert found.severity == "warning"
    assert found.summary.endswith("but advertises 49×1g.5gb, all-1g.5gb on 8 GPUs means 56×1g.5gb")
    assert ("nvml", "8 MIG-capable GPUs, mode Enabled, MIG devices 56×1g.5gb") in said(found)
    assert ("node", "allocatable nvidia.com/mig-1g.5gb=49") in said(found)
    assert found.runbooks == ("reapply-mig-no-hooks", "cordon-and-collect")


def test_the_mig_labels_the_node_carries_are_quoted() -> None:
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    }
    found = the_finding(node(resources=mixed({"1g.5gb": 49}), labels=labels))
    assert {
        ("label", "nvidia.com/mig.config=all-1g.5gb"),
        ("label", "nvidia.com/mig.strategy=mixed"),
        ("label", "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB"),
    } <= said(found)

    bare = the_finding(node(resources=mixed({"1g.5gb": 49})))
    assert not [t for s, t in said(bare) if t.startswith(("nvidia.com/mig.strategy", "nvidia"
                                                           ".com/gpu.product"))]  # fmt: skip


def test_a_mode_change_pending_beside_the_right_slices_is_a_warning() -> None:
    probe = nvml(*[SEVEN] * 8)
    probe["gpus"][7]["migMode"]["pending"] = "Disabled"  # someone ran nvidia-smi -mig 0
    found = the_finding(node(resources=mixed({"1g.5gb": 56})), probe)

    assert found.severity == "warning"
    assert found.summary.endswith(
        "but GPU 7: MIG mode change pending (current Enabled, pending Disabled): needs a GPU "
        "reset or reboot"
    )


def test_a_probe_that_lists_fewer_gpus_than_the_node_has_says_so() -> None:
    # Karpenter's GPU name without its memory label names two A100s: a doubt, not a model.
    raw = node(resources=mixed({"1g.5gb": 49}), drop=("karpenter.k8s.aws/instance-gpu-memory",))
    found = the_finding(raw, nvml(*[SEVEN] * 7))

    assert ("nvml", "nvml lists 7 MIG-capable GPUs of 8") in said(found)
    assert found.summary.endswith("(+1 more)")
    assert (
        "node",
        "GPU identity doubt: karpenter.k8s.aws/instance-gpu-name=a100: names more than one GPU",
    ) in said(found)


def test_a_gpu_whose_mig_mode_the_probe_could_not_read_is_no_mismatch() -> None:
    probe = nvml(*[SEVEN] * 8)
    for gpu in probe["gpus"][5:]:
        gpu["migMode"] = {"current": None, "pending": None}  # NVML answered neither
        gpu["devices"] = []
    assert layout_findings(node(resources=mixed({"1g.5gb": 56})), probe) == []


def test_a_probe_that_did_not_read_cleanly_is_not_taken_as_the_gpus_word() -> None:
    probe = nvml(*["Disabled"] * 8)
    probe["gpus"][0]["migMode"]["pending"] = "Enabld"  # a torn or hand-edited file
    found = the_finding(node(resources=mixed({"1g.5gb": 49})), probe)

    assert "MIG mode Disabled" not in found.summary
    assert not [t for s, t in said(found) if s == "nvml" and "MIG-capable" in t]
    (probe_line,) = [t for s, t in said(found) if s == "nvml"]
    assert probe_line.startswith("MIG probe error: malformed nvml.json: gpus[0].migMode.pending")


def test_l40s_gpus_without_mig_under_all_disabled_raise_nothing() -> None:
    # The GPU operator labels every GPU node all-disabled by default; an L40S has no MIG.
    raw = node(
        "all-disabled",
        {"nvidia.com/gpu": 4},
        instance_type="g6e.12xlarge",
        gpu_name="l40s",
        gpu_memory="46068",
        gpu_count="4",
    )
    probe = nvml(*["NotSupported"] * 4, gpu=("NVIDIA L40S", "0x26B910DE"))
    assert layout_findings(raw, probe) == []


# -- what the device plugin advertises --------------------------------------------------------


def test_an_all_disabled_node_still_advertising_slices_is_a_warning() -> None:
    raw = node("all-disabled", {"nvidia.com/gpu": 6, **mixed({"1g.5gb": 14})})
    found = the_finding(raw)

    assert found.severity == "warning"
    assert found.summary == (
        f"{NODE}: nvidia.com/mig.config=all-disabled (MIG disabled per GPU) but advertises MIG "
        "slices 14×1g.5gb under all-disabled (+1 more)"
    )
    assert ("node", "advertises nvidia.com/gpu=6 of 8 GPUs") in said(found)


def test_an_all_disabled_node_advertising_each_gpu_raises_nothing() -> None:
    assert layout_findings(node("all-disabled", {"nvidia.com/gpu": 8})) == []


def test_an_all_disabled_node_whose_gpu_count_nothing_tells_is_not_held_to_a_count() -> None:
    # An instance type mignurse's table does not list, before GFD labels the node.
    raw = node("all-disabled", drop=GPU_NAMING, instance_type="p9.48xlarge")
    assert layout_findings(raw) == []


def test_a_custom_config_on_a_node_that_advertises_nothing_is_critical() -> None:
    found = the_finding(node("team-a-custom"))

    assert found.severity == "critical"
    assert found.summary == (
        f"{NODE}: nvidia.com/mig.config=team-a-custom (expected layout unknown: not a standard "
        "config name) but advertises no nvidia.com/gpu and no nvidia.com/mig-* resources"
    )
    assert found.runbooks == ("cordon-and-collect",)


def test_a_custom_config_on_a_node_that_advertises_whole_gpus_raises_nothing() -> None:
    raw = node("team-a-custom", {"nvidia.com/gpu": 8})
    assert layout_findings(raw, nvml(*["Disabled"] * 8)) == []


def test_a_custom_config_with_a_mode_change_pending_is_a_warning() -> None:
    probe = nvml(*[SEVEN] * 8)
    probe["gpus"][2]["migMode"]["pending"] = "Disabled"
    found = the_finding(node("team-a-custom", mixed({"1g.5gb": 56})), probe)

    assert found.severity == "warning"
    assert "but GPU 2: MIG mode change pending (current Enabled, pending Disabled)" in found.summary


def test_under_the_none_strategy_only_the_gpus_are_compared() -> None:
    # mig.strategy=none: the device plugin exposes whole GPUs, never MIG devices.
    raw = node(resources={"nvidia.com/gpu": 8}, labels={"nvidia.com/mig.strategy": "none"})
    probe = nvml(*[SEVEN] * 4, {"1g.5gb": 3}, *[SEVEN] * 3)
    found = the_finding(raw, probe)

    assert found.severity == "warning"
    assert found.summary.endswith("but GPU 4: MIG devices 3×1g.5gb, all-1g.5gb asks 7×1g.5gb")


def test_a_layout_the_single_strategy_cannot_serve_is_critical() -> None:
    # all-balanced mixes profiles on one GPU: GFD labels the product ...-MIG-INVALID.
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
    }
    found = the_finding(node("all-balanced", {"nvidia.com/gpu": 0}, labels=labels))

    assert found.severity == "critical"
    assert (
        "but device plugin rejected the layout: nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-"
        "INVALID (single strategy needs one profile on every GPU)"
    ) in found.summary


def test_a_node_whose_gpu_count_nothing_tells_is_compared_by_profile_only() -> None:
    # The model from a launch template's product label; no count label, a type not in the table.
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    balanced = mixed({"1g.5gb": 16, "2g.10gb": 8, "3g.20gb": 8})
    raw = node(
        "all-balanced", balanced, drop=GPU_NAMING, instance_type="p9.48xlarge", labels=labels
    )
    assert layout_findings(raw) == []


def test_a_gpu_nothing_identifies_is_held_to_what_its_config_names_on_any_gpu() -> None:
    unknown = ("NVIDIA RTX PRO 9000 Blackwell Server Edition", "0x2BB910DE")
    raw = node("all-1g.24gb", mixed({"1g.24gb": 4}), drop=GPU_NAMING, instance_type="g9e.8xlarge")
    found = the_finding(raw, nvml({"1g.24gb": 4}, "Disabled", gpu=unknown))

    assert found.severity == "warning"
    assert found.summary == (
        f"{NODE}: nvidia.com/mig.config=all-1g.24gb (expected layout unknown: GPU model "
        "unknown) but GPU 1: MIG mode Disabled, all-1g.24gb asks Enabled"
    )
    assert found.runbooks == ("cordon-and-collect",)

    odd = node(
        "all-1g.24gb",
        mixed({"1g.24gb": 2, "2g.48gb": 1}),
        drop=GPU_NAMING,
        instance_type="g9e.8xlarge",
    )
    found = the_finding(odd)
    assert found.severity == "warning"
    assert found.summary.endswith(
        "but advertises 2×1g.24gb + 1×2g.48gb, all-1g.24gb asks only 1g.24gb"
    )


@pytest.mark.parametrize(("age", "judged"), [(timedelta(minutes=5) - SECOND, False),
                                             (timedelta(minutes=5), True)])  # fmt: skip
def test_a_node_is_given_five_minutes_for_its_device_plugin_to_advertise(
    age: timedelta, judged: bool
) -> None:
    raw = node(created=(NOW - age).isoformat())  # nothing advertised yet
    assert bool(layout_findings(raw)) is judged


def test_a_notready_node_is_not_judged_by_resources_it_cannot_register() -> None:
    assert layout_findings(node(ready=False)) == []


@pytest.mark.parametrize(
    ("why", "change"),
    [
        ("no mig.config label", lambda raw: raw["metadata"]["labels"].pop("nvidia.com/mig.config")),
        ("being deleted", lambda raw: raw["metadata"].update(deletionTimestamp=NOW.isoformat())),
        (
            "mig-config-failed's",
            lambda raw: raw["metadata"]["labels"].update({"nvidia.com/mig.config.state": "failed"}),
        ),
    ],
)
def test_a_node_the_rule_leaves_alone_raises_no_mismatch(why: str, change: Any) -> None:
    raw = node()  # nothing advertised: a node the rule judges would be critical
    assert layout_findings(raw)
    change(raw)
    assert layout_findings(raw) == [], why


# -- what the DRA driver publishes -------------------------------------------------------------


def test_a_dra_node_names_its_wrong_gpu_in_the_slices_evidence() -> None:
    wrong = [*[SEVEN] * 3, {"1g.10gb": 4}, *[SEVEN] * 4]
    found = the_finding(node(), slices=[resource_slice(NODE, wrong)], dra=True)

    problem = "GPU 3: publishes MIG devices 4×1g.10gb, all-1g.5gb asks 7×1g.5gb"
    assert ("resourceslice", problem) in said(found)
    assert found.summary.endswith(f"but {problem}")
    assert found.severity == "warning"  # the other seven GPUs serve pods
    assert (
        "resourceslice",
        f"gpu.nvidia.com pool {NODE} generation 1: 8 GPU(s), MIG devices 4×1g.10gb + 49×1g.5gb",
    ) in said(found)


@pytest.mark.parametrize("unnamed", ["gpu", "mig"])
def test_a_dra_gpu_is_named_by_its_minor_where_only_some_of_its_devices_carry_it(
    unnamed: str,
) -> None:
    # Devices named other than gpu-<minor>[-mig-…] (here by UUID): the type and the parent
    # UUID still place each device on its GPU, whose minor the other devices' names give.
    wrong = [*[SEVEN] * 3, {"1g.10gb": 4}, *[SEVEN] * 4]
    pool = resource_slice(NODE, wrong)
    for device in pool["spec"]["devices"]:
        attributes = device["attributes"]
        if device["name"].startswith("gpu-3") and attributes["type"]["string"] == unnamed:
            device["name"] = attributes["uuid"]["string"].lower()
    found = the_finding(node(), slices=[pool], dra=True)
    assert found.summary.endswith(
        "but GPU 3: publishes MIG devices 4×1g.10gb, all-1g.5gb asks 7×1g.5gb"
    )


def test_a_dra_node_where_the_device_plugin_runs_too_is_held_to_both() -> None:
    raw = node(resources=mixed({"1g.5gb": 49}))
    found = the_finding(raw, slices=[resource_slice(NODE, [SEVEN] * 8)], dra=True)
    assert found.summary.endswith("but advertises 49×1g.5gb, all-1g.5gb on 8 GPUs means 56×1g.5gb")


def test_a_dra_node_mid_update_is_judged_by_its_gpus_alone() -> None:
    pool = resource_slice(NODE, [SEVEN] * 8, slice_count=2)  # one of two slices so far
    probe = nvml(*[SEVEN] * 2, "Disabled", *[SEVEN] * 5)
    found = the_finding(node(), probe, slices=[pool], dra=True)

    assert found.severity == "warning"
    assert found.summary.endswith("but GPU 2: MIG mode Disabled, all-1g.5gb asks Enabled")


def test_a_dra_node_under_a_custom_config_publishing_mig_devices_raises_nothing() -> None:
    assert layout_findings(node("team-a-custom"), slices=[resource_slice(NODE, [SEVEN] * 8)],
                           dra=True) == []  # fmt: skip


def test_a_dra_node_under_a_custom_config_publishing_nothing_is_critical() -> None:
    found = the_finding(node("team-a-custom"), slices=[resource_slice(NODE, [])], dra=True)
    assert found.severity == "critical"
    assert found.summary.endswith("but publishes no GPU and no MIG device")


def test_a_dra_node_under_a_custom_config_with_a_mode_change_pending_is_a_warning() -> None:
    probe = nvml(*[SEVEN] * 8)
    probe["gpus"][0]["migMode"]["pending"] = "Disabled"
    found = the_finding(
        node("team-a-custom"), probe, slices=[resource_slice(NODE, [SEVEN] * 8)], dra=True
    )
    assert found.severity == "warning"
    assert "but GPU 0: MIG mode change pending" in found.summary


def test_a_dra_node_of_unknown_model_under_a_per_gpu_config_raises_nothing() -> None:
    # all-balanced differs by GPU model: on a GPU nothing identifies there is no layout to hold.
    raw = node("all-balanced", drop=GPU_NAMING, instance_type="p9.48xlarge")
    balanced = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert layout_findings(raw, slices=[resource_slice(NODE, [balanced] * 8)], dra=True) == []


def test_an_all_disabled_dra_node_publishing_whole_gpus_raises_nothing() -> None:
    raw = node("all-disabled", drop=GPU_NAMING, instance_type="p9.48xlarge")
    assert layout_findings(raw, slices=[resource_slice(NODE, [{}] * 2)], dra=True) == []


def test_an_all_disabled_dra_node_publishing_mig_devices_is_a_warning() -> None:
    found = the_finding(node("all-disabled"), slices=[resource_slice(NODE, [SEVEN] * 8)], dra=True)
    assert found.severity == "warning"
    assert found.summary.endswith("but publishes MIG devices 56×1g.5gb under all-disabled")


def test_a_dra_node_of_unknown_model_is_held_to_the_profiles_its_config_names() -> None:
    raw = node("all-1g.24gb", drop=GPU_NAMING[:2], instance_type="g9e.8xlarge", gpu_count="1")
    product = "NVIDIA RTX PRO 9000 Blackwell Server Edition"

    right = resource_slice(NODE, [{"1g.24gb": 4}], product=product)
    assert layout_findings(raw, slices=[right], dra=True) == []

    odd = resource_slice(NODE, [{"1g.24gb": 2, "2g.48gb": 1}], product=product)
    found = the_finding(raw, slices=[odd], dra=True)
    assert found.severity == "warning"
    assert found.summary.endswith(
        "but publishes MIG devices 2×1g.24gb + 1×2g.48gb, all-1g.24gb asks only 1g.24gb"
    )


# -- the cluster's own mig-parted file -----------------------------------------------------------

# A ClusterPolicy naming a custom file, and that file's ConfigMap (NVIDIA/gpu-operator v26.7.0
# api/nvidia/v1/clusterpolicy_types.go spec.migManager.config.name, status.namespace;
# assets/state-mig-manager/0400_configmap.yaml for the ConfigMap's shape)
POLICY = {
    "metadata": {"name": "cluster-policy"},
    "spec": {"migManager": {"enabled": True, "config": {"name": "custom-mig-config"}}},
    "status": {"state": "ready", "namespace": "gpu-operator"},
}
THREE = {"2g.10gb": 3}


def custom_file(per_gpu: dict[str, int]) -> dict[str, Any]:
    devices = "".join(f'        "{p}": {n}\n' for p, n in per_gpu.items())
    text = (
        "version: v1\nmig-configs:\n  all-1g.5gb:\n    - devices: all\n"
        f"      mig-enabled: true\n      mig-devices:\n{devices}"
    )
    return {
        "metadata": {"name": "custom-mig-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": text},
    }


def test_a_name_the_cluster_s_file_defines_otherwise_is_judged_by_that_file() -> None:
    """`all-1g.5gb` means 3×2g.10gb in this cluster: a node serving that is right, and one
    serving NVIDIA's 7×1g.5gb is the mismatch."""
    operator = (POLICY, (custom_file(THREE),))
    assert layout_findings(node(resources=mixed({"2g.10gb": 24})), operator=operator) == []
    found = the_finding(node(resources=mixed({"1g.5gb": 56})), operator=operator)
    assert found.summary.startswith(
        f"{NODE}: nvidia.com/mig.config=all-1g.5gb (3×2g.10gb per GPU) but advertises "
    )
    assert ("cluster", "all-1g.5gb as ConfigMap gpu-operator/custom-mig-config defines it") in (
        said(found)
    )
    # without the operator's file, NVIDIA's default meaning holds
    assert layout_findings(node(resources=mixed({"1g.5gb": 56}))) == []


def test_an_operator_file_not_read_or_missing_leaves_the_layout_unknown() -> None:
    wrong = node(resources=mixed({"1g.5gb": 56}))
    assert layout_findings(wrong, operator=(POLICY, None)) == []  # refused: nothing judged
    assert layout_findings(wrong, operator=(POLICY, ())) == []  # named, not there
    # what does not depend on the layout is still judged, and says why the layout is unknown
    found = the_finding(node(), operator=(POLICY, ()))
    assert found.summary == (
        f"{NODE}: nvidia.com/mig.config=all-1g.5gb (expected layout unknown: no ConfigMap "
        "gpu-operator/custom-mig-config: mig-manager's file is not in the cluster) but "
        "advertises no nvidia.com/gpu and no nvidia.com/mig-* resources"
    )
