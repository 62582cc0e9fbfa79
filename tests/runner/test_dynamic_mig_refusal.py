"""reapply-mig-no-hooks on a node whose NVIDIA DRA driver runs DynamicMIG: refused before
anything changes, in the plan, the dry run and the run, with the reason. Such a kubelet plugin
creates MIG devices per claim and at every start destroys those its checkpoint does not name
(kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1 cmd/gpu-kubelet-plugin/driver.go NewDriver:
DestroyUnknownMIGDevices), so a layout applied beside it does not survive.

The gate reaches the plugin as the chart passes it: FEATURE_GATES="DynamicMIG=true," on the
kubelet plugin's containers (deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml
at v0.4.1), whose pods carry `dra-driver-nvidia-gpu-component=kubelet-plugin` (_helpers.tpl
"selectorLabels" at v0.4.1)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.dra import dynamic_mig_gate
from mignurse.runner.engine import Runner

from .enginehelpers import Cluster
from .interrupthelpers import book, shells, writes_to
from .mighelpers import stuck_mig_node
from .test_done_when import _mignurse

Make = Callable[..., Cluster]
SCENARIO = "mig-dra-hook-notready"
OLD_KEY = "nvidia-dra-driver-gpu-component"
NEW_KEY = "dra-driver-nvidia-gpu-component"


# gpu-operator v26.7's GPUCluster labels its DaemonSet's pods this way instead
# (NVIDIA/gpu-operator@v26.7.0 manifests/state-dra-driver/0500_daemonset.yaml)
OPERATOR_KEY, OPERATOR_VALUE = "app", "nvidia-dra-driver-kubelet-plugin"


def as_v04_plugin_with_dynamic_mig(
    c: Cluster, node: str, gates: str, key: str = NEW_KEY, value: str = "kubelet-plugin"
) -> str:
    """The node's plugin pod relabelled as a newer install's, with the chart's FEATURE_GATES."""
    pod = next(
        p
        for p in c.sim.objects("pods")
        if p["spec"].get("nodeName") == node
        and p["metadata"].get("ownerReferences")
        and p["metadata"]["ownerReferences"][0]["name"] == "nvidia-dra-driver-gpu-kubelet-plugin"
    )
    moved = copy.deepcopy(pod)
    labels = moved["metadata"]["labels"]
    for old in (OLD_KEY, NEW_KEY, OPERATOR_KEY):
        labels.pop(old, None)
    labels[key] = value
    for container in moved["spec"]["containers"]:
        env = [e for e in container.get("env") or () if e["name"] != "FEATURE_GATES"]
        container["env"] = [*env, {"name": "FEATURE_GATES", "value": gates}]
    c.sim.store.put("pods", moved)
    return str(moved["metadata"]["name"])


def test_a_dynamic_mig_node_is_refused_with_the_reason_before_anything_changes(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(SCENARIO)
    node = stuck_mig_node(c)
    as_v04_plugin_with_dynamic_mig(c, node, "DynamicMIG=true,")
    seen = len(c.sim.requests)
    runner = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node, "config": "all-1g.24gb"},
                    client=c.client, shell_for=shells(c, tmp_path / "nodes"), yes=True)  # fmt: skip

    result = runner.run()

    assert result.status == "blocked" and result.exit_code == 1
    assert "\n" not in result.error
    assert result.error.startswith(
        f"step preflight cannot run: node {node} gets its MIG devices from the NVIDIA DRA "
        "driver's DynamicMIG (its kubelet plugin runs with DynamicMIG=true)"
    )
    assert "destroys, at every start, those it did not create" in result.error
    assert not writes_to(c, "/", seen)


def test_the_dry_run_shows_the_refusal_and_a_gate_set_false_is_not_refused(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(SCENARIO)
    node = stuck_mig_node(c)
    as_v04_plugin_with_dynamic_mig(c, node, "DynamicMIG=true,DynamicMIG=false,")
    off = _mignurse(c, tmp_path / "off", "run", "reapply-mig-no-hooks", "--node", node,
                    "--param", "config=all-1g.24gb", "--dry-run")  # fmt: skip
    assert "DynamicMIG" not in off.stdout + off.stderr  # the last setting wins: off

    as_v04_plugin_with_dynamic_mig(c, node, "DynamicMIG=1", OPERATOR_KEY, OPERATOR_VALUE)
    dry = _mignurse(c, tmp_path / "on", "run", "reapply-mig-no-hooks", "--node", node,
                    "--param", "config=all-1g.24gb", "--dry-run")  # fmt: skip

    assert dry.returncode != 0 or "BLOCKED" in dry.stderr, dry.stdout + dry.stderr
    shown = dry.stdout + dry.stderr
    assert "NVIDIA DRA driver's DynamicMIG" in shown
    assert "a layout applied here would be destroyed" in shown


def plugin_spec(*containers: Any) -> dict[str, Any]:
    labels = {NEW_KEY: "kubelet-plugin"}
    return {"metadata": {"labels": labels}, "spec": {"containers": list(containers)}}


def gates(value: str, name: str = "gpus", **more: Any) -> dict[str, Any]:
    return {"name": name, "env": [{"name": "FEATURE_GATES", "value": value}], **more}


@pytest.mark.parametrize(
    ("containers", "on"),
    [
        ([gates("DynamicMIG=true,")], True),
        ([gates("DynamicMIG=false")], False),
        ([gates("DynamicMIG=t", args=["--feature-gates=DynamicMIG=false"])], False),  # flag wins
        ([{"name": "gpus", "args": ["--feature-gates", "MPSSupport=true,DynamicMIG=TRUE"]}], True),
        ([gates("DynamicMIG=yes")], False),  # not a ParseBool spelling
        ([gates("DynamicMIG=true"), gates("", "compute-domains")], True),
        ([{"name": "gpus"}], False),  # default false (pkg/featuregates/featuregates.go)
        (["garbage", {"env": "x", "args": 7}, {"env": [None], "args": [3, None]}], False),
    ],
)
def test_the_dynamic_mig_gate_is_read_as_the_plugin_reads_it(
    containers: list[Any], on: bool
) -> None:
    assert dynamic_mig_gate(plugin_spec(*containers)) is on
