"""What a MIG run is about, and when it refuses to start (mignurse/runner/steps/mig/target.py):
a node without a config, an unknown config for its GPU, a mixed config under the single
strategy; what the device plugin should advertise for the layout under each strategy; and
the mig-parted file holding only the chosen layout (NVIDIA/mig-parted v0.15.0 api/spec/v1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.gpu.profiles import Layout
from mignurse.model import LABEL_MIG_CONFIG, Node
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.mig.preflight import MigPreflight
from mignurse.runner.steps.mig.target import (
    MigTarget,
    bottlerocket_refusal,
    migparted_config,
    resolve_target,
)

from .enginehelpers import Cluster
from .mighelpers import ready_mig_node

Make = Callable[..., Cluster]
STRATEGY = "nvidia.com/mig.strategy"


def target(layout: Layout, strategy: str, gpus: int | None = 8) -> MigTarget:
    return MigTarget(
        node=None,  # type: ignore[arg-type]
        raw={},
        config="x",
        family=None,  # type: ignore[arg-type]
        gpus=gpus,
        layout=layout,
        strategy=strategy,
    )


@pytest.mark.parametrize(
    ("layout", "strategy", "gpus", "resources"),
    [
        (Layout(True, {"1g.10gb": 7}), "single", 8, {"nvidia.com/gpu": 56}),
        (Layout(True, {"3g.40gb": 1, "1g.10gb": 4}), "mixed", 8,
         {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-1g.10gb": 32}),
        (Layout(True, {"1g.10gb": 7}), "none", 8, {"nvidia.com/gpu": 8}),
        (Layout(False, {}), "mixed", 4, {"nvidia.com/gpu": 4}),
        (Layout(True, {"7g.80gb": 1}), "mixed", None, {"nvidia.com/mig-7g.80gb": 0}),
    ],
)  # fmt: skip
def test_the_device_plugin_should_advertise_the_layout_per_strategy(
    layout: Layout, strategy: str, gpus: int | None, resources: dict[str, int]
) -> None:
    assert target(layout, strategy, gpus).expected_resources() == resources


def test_the_resources_expected_of_fewer_gpus_than_the_node_has() -> None:
    mixed = target(Layout(True, {"1g.10gb": 7}), "mixed", 8)
    assert mixed.expected_resources(gpus=2) == {"nvidia.com/mig-1g.10gb": 14}
    assert mixed.expected_resources(gpus=0) == {"nvidia.com/mig-1g.10gb": 0}


def test_the_mig_parted_file_holds_only_the_chosen_layout() -> None:
    assert migparted_config("all-balanced", Layout(True, {"3g.40gb": 1, "1g.10gb": 2})) == (
        "version: v1\n"
        "mig-configs:\n"
        "  all-balanced:\n"
        "  - devices: all\n"
        "    mig-enabled: true\n"
        "    mig-devices:\n"
        '      "3g.40gb": 1\n'
        '      "1g.10gb": 2\n'
    )
    assert migparted_config("all-disabled", Layout(False, {})) == (
        "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"
    )
    assert migparted_config("all-enabled", Layout(True, {})).endswith(
        "    mig-enabled: true\n    mig-devices: {}\n"
    )


def labelled(c: Cluster, labels: dict[str, Any]) -> str:
    node = ready_mig_node(c)
    c.client.patch(NODES, node, {"metadata": {"labels": labels}})
    return node


def test_a_node_without_a_mig_config_is_asked_for_one(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = labelled(c, {LABEL_MIG_CONFIG: None})
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node))
    assert str(refused.value) == (
        f"node {node} has no {LABEL_MIG_CONFIG} label: pass --param config=NAME"
    )


def test_an_unknown_config_names_the_ones_that_fit_the_gpu(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node, params={"config": "all-1g.5gb-typo"}))
    said = str(refused.value)
    assert said.startswith("unknown MIG config 'all-1g.5gb-typo' for ")
    assert ": use one of all-disabled, all-enabled, " in said


def test_the_param_wins_over_the_nodes_label(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = labelled(c, {LABEL_MIG_CONFIG: "all-enabled"})
    assert resolve_target(c.ctx(node, params={"config": "all-disabled"})).config == "all-disabled"
    assert resolve_target(c.ctx(node)).config == "all-enabled"


def test_a_mixed_config_is_refused_under_the_single_strategy(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = labelled(c, {STRATEGY: "single"})
    mixed = next(name for name in ("all-balanced",) if name)
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node, params={"config": mixed}))
    said = str(refused.value)
    assert said.startswith(f"{mixed} mixes profiles (")
    assert said.endswith(
        f"but node {node} uses the single MIG strategy: the device plugin would advertise it "
        "as INVALID; choose an all-<profile> config"
    )
    single = resolve_target(c.ctx(node, params={"config": "all-disabled"}))
    assert single.strategy == "single"


# -- a Bottlerocket node, refused in one line naming Bottlerocket's own way ---------------------


def on_bottlerocket(c: Cluster, os_image: str, **labels: str | None) -> str:
    """The mig-1g24gb node made a Bottlerocket one, as kubelet shows it (osImage)."""
    node = labelled(c, dict(labels))
    info = dict(c.node(node)["status"].get("nodeInfo") or {})
    info["osImage"] = os_image
    c.client.patch(NODES, node, {"status": {"nodeInfo": info}}, subresource="status")
    return node


@pytest.mark.parametrize(
    ("version", "too_old"),
    [("1.51.0", ""), ("1.50.9", " (this node's 1.50.9 is older than 1.51.0: replace it)")],
)
def test_a_bottlerocket_node_is_refused_by_preflight_check_and_apply(
    cluster_for: Make, version: str, too_old: str
) -> None:
    c = cluster_for("mig-1g24gb")
    node = on_bottlerocket(c, f"Bottlerocket OS {version} (aws-k8s-1.34-nvidia)")
    ctx = c.ctx(node, shell_for=lambda name: pytest.fail("nothing may run on the node"))
    said = MigPreflight().check(ctx)
    assert said is not None and said.startswith(
        f"node {node} runs Bottlerocket OS {version} (aws-k8s-1.34-nvidia): Bottlerocket makes "
    )
    assert "--config all-1g.24gb` in the EC2NodeClass" in said
    assert said.endswith("then reboot it" + too_old)
    with pytest.raises(StepFailed) as refused:
        MigPreflight().apply(ctx, StepPlan())
    assert str(refused.value) == said


def test_the_config_asked_for_wins_over_the_label_in_the_bottlerocket_refusal(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-1g24gb")
    node = on_bottlerocket(c, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)")
    said = MigPreflight().check(c.ctx(node, params={"config": "all-balanced"}))
    assert said is not None and "Bottlerocket makes one profile per GPU" in said


def test_a_bottlerocket_node_without_a_config_is_told_to_set_it_in_user_data(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-1g24gb")
    node = on_bottlerocket(c, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)",
                           **{LABEL_MIG_CONFIG: None})  # fmt: skip
    said = bottlerocket_refusal(Node.from_api(c.node(node)), "")
    assert said is not None
    assert said.endswith(
        "not nvidia-mig-parted, so this runbook leaves it alone; set those settings in the "
        "node's user data and replace it"
    )
    assert bottlerocket_refusal(Node.from_api(c.node(ready_mig_node(c))), "all-1g.24gb") is None


def test_a_gpu_the_tables_do_not_know_is_refused(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = labelled(c, {"nvidia.com/gpu.product": "NVIDIA-X900-PROTO"})
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node))
    said = str(refused.value)
    assert said.startswith(f"cannot tell which GPU node {node} has (")
    assert said.endswith("): MIG layouts are per GPU model")


def test_a_mig_config_on_a_gpu_without_mig_says_why_it_cannot_be_built(cluster_for: Make) -> None:
    c = cluster_for("healthy")
    node = next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "g6.xlarge"
    )
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node, params={"config": "all-enabled"}))
    assert str(refused.value) == "cannot build MIG config 'all-enabled' for L4: L4 has no MIG"


def test_a_one_profile_config_resolves_under_the_single_strategy(cluster_for: Make) -> None:
    c = cluster_for("mig-hook-notready")
    node = labelled(c, {STRATEGY: "single"})
    single = resolve_target(c.ctx(node, params={"config": "all-1g.10gb"}))
    assert (single.strategy, single.per_gpu) == ("single", {"1g.10gb": 7})
    assert single.expected_resources() == {"nvidia.com/gpu": 56}


def test_a_bottlerocket_node_known_by_its_label_only_is_refused_without_a_version(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-1g24gb")
    node = labelled(c, {"bottlerocket.aws/updater-interface-version": "2.0.0"})
    said = bottlerocket_refusal(Node.from_api(c.node(node)), "all-1g.24gb")
    assert said is not None and said.startswith(
        f"node {node} runs Bottlerocket (label bottlerocket.aws/updater-interface-version): "
    )
    assert said.endswith("from its admin container, then reboot it")


def test_a_bottlerocket_node_whose_gpu_is_unknown_is_told_to_set_it_in_user_data(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-1g24gb")
    node = on_bottlerocket(c, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)",
                           **{"nvidia.com/gpu.product": "NVIDIA-X900-PROTO"})  # fmt: skip
    said = bottlerocket_refusal(Node.from_api(c.node(node)), "all-1g.24gb")
    assert said is not None
    assert said.endswith("set those settings in the node's user data and replace it")
