"""reapply-mig-no-hooks on the reported DRA environment (mig-dra-hook-notready: EKS 1.34,
g7e.4xlarge, all-1g.24gb, the NVIDIA DRA driver): the real CLI in a subprocess against the
simulator. It ends verified only when the node's gpu.nvidia.com ResourceSlices publish the
layout, after the pods holding its MIG devices through ResourceClaims were drained; a DRA
kubelet plugin that still shows the old devices is restarted once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drashapes import resource_slice

from mignurse.gpu.models import by_instance_type
from mignurse.gpu.profiles import expected_layout
from mignurse.model import LABEL_MIG_CONFIG_STATE, Node, ResourceSlice, dra_devices_by_node
from mignurse.runner.steps.mig.resume import published_problem
from mignurse.runner.steps.mig.target import MigTarget

from .enginehelpers import Cluster
from .mighelpers import incident_node, ready_mig_node, stuck_mig_node
from .test_done_when import RESTART_OR_RELOAD, _calls, _mignurse

Make = Callable[..., Cluster]
SCENARIO = "mig-dra-hook-notready"


def published(c: Cluster, node: str) -> list[str]:
    return sorted(
        d["name"]
        for s in c.sim.objects("resourceslices")
        if s["spec"].get("nodeName") == node
        for d in s["spec"]["devices"]
    )


def reapply(c: Cluster, tmp_path: Path, node: str, config: str) -> Any:
    return _mignurse(
        c, tmp_path / "state", "run", "reapply-mig-no-hooks", "--node", node,
        "--param", f"config={config}", "--yes", "--sandboxes", str(tmp_path / "sandboxes"),
        timeout=400,
    )  # fmt: skip


def test_reapply_on_the_dra_incident_node_is_refused_before_anything_changes(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(SCENARIO)
    node = incident_node(c)

    refused = reapply(c, tmp_path, node, "all-1g.24gb")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"mignurse run replace-instance --node {node}" in refused.stdout


def test_reapply_on_a_stuck_dra_node_ends_verified_against_its_resourceslices(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(SCENARIO, speed=40)  # a running clock: pods go and the plugin publishes
    node = stuck_mig_node(c)
    holders = [p for p in c.sim.objects("pods") if (p.get("spec") or {}).get("nodeName") == node]
    claimed = [p for p in holders if (p.get("spec") or {}).get("resourceClaims")]
    assert claimed and not any(
        "nvidia.com/" in json.dumps(p["spec"].get("containers")) for p in claimed
    )  # they hold MIG devices through claims only

    done = reapply(c, tmp_path, node, "all-1g.24gb")

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert out[0].endswith(": succeeded")
    assert any(line.startswith("  resume-operands: verified: ") for line in out), out
    evicted = [line for line in done.stderr.splitlines() if "drain-gpu-pods: evicted" in line]
    assert len(evicted) == len(claimed)
    assert (
        f"{node} stayed Ready and publishes gpu.nvidia.com devices 4×1g.24gb per GPU" in done.stderr
    )
    after = c.node(node)
    assert after["metadata"]["labels"][LABEL_MIG_CONFIG_STATE] == "success"
    assert not after["spec"].get("unschedulable")
    assert published(c, node) == ["gpu-0", *(f"gpu-0-mig-14-{i}-1" for i in range(4))]
    assert not [line for line in _calls(tmp_path / "sandboxes") if RESTART_OR_RELOAD.search(line)]


def test_a_new_layout_is_verified_once_the_restarted_dra_plugin_publishes_it(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(SCENARIO, speed=40)
    node = ready_mig_node(c)
    assert len(published(c, node)) == 5  # gpu-0 and 4 × 1g.24gb

    done = reapply(c, tmp_path, node, "all-2g.48gb")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "the DRA driver publishes MIG devices only when it starts" in done.stderr
    assert (
        f"{node} stayed Ready and publishes gpu.nvidia.com devices 2×2g.48gb per GPU" in done.stderr
    )
    devices = published(c, node)
    assert len(devices) == 3 and devices[0] == "gpu-0"
    slices = [ResourceSlice.from_api(s) for s in c.sim.objects("resourceslices")]
    assert dra_devices_by_node(slices)[node].mig_counts() == {"2g.48gb": 2}


# -- what the verification refuses ----------------------------------------------------------


def _target(config: str = "all-1g.5gb") -> MigTarget:
    model, count = by_instance_type("p4d.24xlarge")  # type: ignore[misc]
    layout = expected_layout(config, model)
    assert layout is not None
    node = Node(name="n")
    return MigTarget(node, {}, config, model, count, layout, "mixed")


def _devices(per_gpu: list[dict[str, int]], **kwargs: Any) -> Any:
    piece = ResourceSlice.from_api(resource_slice("n", per_gpu, **kwargs))
    return dra_devices_by_node([piece]).get("n")


def test_published_problem_names_what_the_slices_lack() -> None:
    target = _target()
    assert published_problem(_devices([{"1g.5gb": 7}] * 8), target, 8) is None
    assert published_problem(None, target, 8) == (
        "no gpu.nvidia.com ResourceSlice published for the node"
    )
    partial = _devices([{"1g.5gb": 7}] * 8, slice_count=2)
    assert (
        published_problem(partial, target, 8)
    ) == "1 of 2 ResourceSlices of pool n generation 1 published"
    old = published_problem(_devices([{"3g.20gb": 2}] * 8), target, 8)
    assert old is not None and "GPU 0: 2×3g.20gb" in old and "expected 7×1g.5gb per GPU" in old
    fewer = published_problem(_devices([{"1g.5gb": 7}] * 7), target, 8)
    assert fewer is not None and "7 GPUs published, 8 expected" in fewer
    off = published_problem(_devices([{}] * 8), _target("all-disabled"), 8)
    assert off is None
