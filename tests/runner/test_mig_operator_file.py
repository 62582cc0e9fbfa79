"""The layout a MIG run writes is the one the GPU operator's own mig-parted file gives the
config (mignurse/gpu/clusterconfig.py): the scenario `mig-custom-config` names a custom
ConfigMap in its ClusterPolicy whose `all-balanced` differs from NVIDIA's default file, and
which has no `all-1g.10gb` at all. When that file cannot be read, the run stops before any
change."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cliserver
import pytest

from mignurse.cluster.client import NODES, ApiError, ClusterError, Forbidden
from mignurse.gpu.models import model_named
from mignurse.gpu.profiles import expected_layout
from mignurse.runner.step import StepFailed
from mignurse.runner.steps.mig.preflight import MigPreflight
from mignurse.runner.steps.mig.target import PINNED, pinned_record, resolve_target

from .enginehelpers import Cluster

Make = Callable[..., Cluster]
SOURCE = "ConfigMap gpu-operator/custom-mig-config"


def pool_node(c: Cluster, pool: str) -> str:
    return sorted(
        n["metadata"]["name"]
        for n in c.client.list(NODES, dict).items
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
    )[0]


class Refusing:
    """The cluster client, with every ConfigMap read answered by `error`."""

    def __init__(self, client: Any, error: ClusterError) -> None:
        self._client, self._error = client, error

    def get(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
        if resource.plural == "configmaps":
            raise self._error
        return self._client.get(resource, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_the_layout_is_the_one_the_operator_s_file_gives(cluster_for: Make) -> None:
    c = cluster_for("mig-custom-config")
    mixed = resolve_target(c.ctx(pool_node(c, "gpu-infer-mixed")))
    assert mixed.configs.source == SOURCE and not mixed.configs.note
    assert mixed.per_gpu == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}
    assert mixed.expected_resources() == {
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-1g.10gb": 8,
    }
    node = pool_node(c, "gpu-balanced")
    balanced = resolve_target(c.ctx(node))
    default = expected_layout("all-balanced", model_named("H100-80GB"))
    assert default is not None and balanced.per_gpu == {"1g.10gb": 3, "2g.20gb": 2}
    assert balanced.per_gpu != default.devices
    notes = MigPreflight().plan(c.ctx(node)).notes
    assert notes[0] == (
        f"config all-balanced on 8 × H100-80GB: per GPU 3×1g.10gb + 2×2g.20gb (from {SOURCE})"
    )
    # a name only NVIDIA's default file has is no config of this cluster
    with pytest.raises(StepFailed) as refused:
        resolve_target(c.ctx(node, params={"config": "all-1g.10gb"}))
    assert str(refused.value) == (
        f"unknown MIG config 'all-1g.10gb' for H100-80GB in {SOURCE}: use one of "
        "all-disabled, inference-mixed, all-balanced"
    )


def test_an_operator_file_that_cannot_be_read_stops_the_run(cluster_for: Make) -> None:
    c = cluster_for("mig-custom-config")
    node = pool_node(c, "gpu-infer-mixed")
    ctx = c.ctx(node)
    ctx.client = Refusing(ctx.client, Forbidden("configmaps is forbidden", "get", "configmaps"))
    with pytest.raises(StepFailed) as refused:
        resolve_target(ctx)
    assert str(refused.value).startswith(
        "cannot read ConfigMap gpu-operator/custom-mig-config (configmaps is forbidden): the "
        "layout must be the one mig-manager would apply, so nothing is changed"
    )
    assert not refused.value.retryable
    assert MigPreflight().check(ctx) == str(refused.value)
    ctx.client = Refusing(ctx.client, ApiError("the API server answered 503"))
    with pytest.raises(StepFailed) as busy:
        resolve_target(ctx)
    assert busy.value.retryable  # a 5xx may pass: the engine tries the step again


def test_later_steps_take_the_layout_mig_preflight_recorded(cluster_for: Make) -> None:
    """mig-manager-off removes mig-manager's pod, and with it the ConfigMap it publishes for
    the node (owned by that pod): the steps after mig-preflight must not read the file again."""
    c = cluster_for("mig-custom-config")
    node = pool_node(c, "gpu-balanced")
    first = resolve_target(c.ctx(node))
    later = c.ctx(node)
    later.outputs["preflight"] = {"config": first.config, PINNED: pinned_record(first)}
    later.client = Refusing(later.client, Forbidden("configmaps is forbidden", "get", "configmaps"))
    again = resolve_target(later)
    assert (again.layout, again.configs.source) == (first.layout, SOURCE)
    # another config than the one recorded is resolved afresh, and here refused
    later.params["config"] = "inference-mixed"
    with pytest.raises(StepFailed, match=r"^cannot read ConfigMap gpu-operator/custom-mig-config"):
        resolve_target(later)


def test_a_whole_run_on_the_cluster_s_file_ends_verified(cluster_for: Make, tmp_path: Path) -> None:
    """The real CLI, the run reaching the node through its sandbox: all-balanced is reapplied
    as this cluster defines it, and the GPUs and the device plugin end holding that layout."""
    c = cluster_for("mig-custom-config", speed=40)  # a running clock: operands go and come back
    node = pool_node(c, "gpu-balanced")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path / "state"))
    env.pop("MIGNURSE_RUNBOOKS", None)
    argv = ["--kubeconfig", str(c.kubeconfig), "run", "reapply-mig-no-hooks", "--node", node]
    argv += ["--yes", "--sandboxes", str(tmp_path / "sandboxes")]
    done = cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].endswith(": succeeded")
    assert f"(from {SOURCE})" in done.stdout + done.stderr
    assert "  hold-disruption: verified" in done.stdout.splitlines()
    assert f"8 GPUs on {node} show 3×1g.10gb + 2×2g.20gb each" in done.stderr
    # CDI is on (the ClusterPolicy leaves cdi.enabled unset): the management spec made again
    box = tmp_path / "sandboxes" / node
    assert "nvidia-ctk 'cdi' 'generate' '--mode=management'" in (box / "calls.log").read_text()
    spec = (box / "fs/var/run/cdi/management.nvidia.com-gpu.yaml").read_text()
    caps = sorted(p.name for p in (box / "fs/dev/nvidia-caps").glob("nvidia-cap*"))
    assert len(caps) > 2 and all(f"path: /dev/nvidia-caps/{cap}\n" in spec for cap in caps)
    after = c.node(node)  # still there: emptied of its GPU pods, it was held off consolidation
    assert "karpenter.sh/do-not-disrupt" not in (after["metadata"].get("annotations") or {})
    allocatable = after["status"]["allocatable"]
    assert (allocatable["nvidia.com/mig-1g.10gb"], allocatable["nvidia.com/mig-2g.20gb"]) == (
        "24",
        "16",
    )
