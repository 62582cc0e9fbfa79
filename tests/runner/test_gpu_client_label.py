"""Third-party GPU clients through mig-manager's `nvidia.com/gpu.deploy.client` label: the
reapply runbook pauses and restores it with the other operand labels, only where the node
carries it set to `true`, and waits for the DaemonSet pods that select on it to go, as
mig-manager does (NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go:
gpuClientDeployLabel, shutdownKubernetesGPUClients, waitForPodsWithNodeSelector: the node's
pods controlled by a DaemonSet whose spec.nodeSelector has the key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner.step import StepPlan
from mignurse.runner.steps.mig.labels import PauseGpuOperands, pods_of
from mignurse.runner.steps.mig.resume import ResumeGpuOperands
from mignurse.sim import objects

from .enginehelpers import Cluster
from .test_mig_label_steps import DEPLOY, PAUSED, Steps, plan_of

Make = Callable[..., Cluster]
CLIENT = DEPLOY + "client"


@pytest.fixture
def steps(cluster_for: Make) -> Steps:
    return Steps(cluster_for("mig-hook-notready"))


def client_pod(steps: Steps, name: str, *, daemonset: bool = True) -> dict[str, Any]:
    """A third-party GPU client's pod on the node, selecting on the client deploy label."""
    owner = (
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-client", "uid": "u-ds",
         "controller": True}
        if daemonset
        else {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gpu-client-7d9",
              "uid": "u-rs", "controller": True}
    )  # fmt: skip
    pod = objects.build_pod(
        name=name, namespace="gpu-clients", uid=f"uid-{name}", created=steps.c.sim.store.clock(),
        node_name=steps.node, labels={"app.kubernetes.io/name": "gpu-client"}, owner=owner,
        containers=[objects.container("client", "example.com/gpu-client:1.0", {"cpu": "10m"})],
        tolerations=[], priority_class=None, host_ip=None, pod_ip=None, running_since=None,
        node_selector={CLIENT: "true"},
    )  # fmt: skip
    return steps.c.sim.store.put("pods", pod)


def test_a_true_client_label_is_paused_and_its_daemonset_pods_are_waited_for(
    steps: Steps,
) -> None:
    steps.label(**{CLIENT: "true"})
    client_pod(steps, "gpu-client-x1")
    client_pod(steps, "gpu-client-job", daemonset=False)  # not a DaemonSet's: not waited for
    pause = PauseGpuOperands()
    plan = plan_of(pause, steps.ctx())
    assert plan.data["set"][CLIENT] == PAUSED
    assert f"DaemonSet pods selecting on {CLIENT}" in plan.notes[-1]

    assert pods_of(steps.ctx(), (), (CLIENT,)) == ["gpu-clients/gpu-client-x1"]
    said = pause.verify(steps.ctx(), plan, {"set": {}})
    assert said is not None and "gpu-clients/gpu-client-x1" in said
    assert "gpu-client-job" not in said

    steps.c.sim.store.delete("pods", "gpu-clients", "gpu-client-x1")  # its DaemonSet let go
    applied = pause.apply(steps.ctx(), plan)

    assert applied["operandLabels"][CLIENT] == "true"
    assert steps.labels()[CLIENT] == PAUSED
    assert pause.verify(steps.ctx(), plan, applied) is None

    steps.outputs["pause-operands"] = applied
    wanted = ResumeGpuOperands().wanted(steps.ctx(), steps.labels())
    assert wanted[CLIENT] == "true" and wanted[LABEL_MIG_CONFIG_STATE] == "success"


@pytest.mark.parametrize("value", ["false", None])
def test_a_client_label_false_or_absent_is_left_as_it_is(steps: Steps, value: str | None) -> None:
    steps.label(**{CLIENT: value})
    pause = PauseGpuOperands()
    plan = plan_of(pause, steps.ctx())
    assert CLIENT not in plan.data["set"]

    applied = pause.apply(steps.ctx(), plan)

    assert steps.labels().get(CLIENT) == value
    assert applied["operandLabels"].get(CLIENT) == value
    steps.outputs["pause-operands"] = applied
    wanted = ResumeGpuOperands().wanted(steps.ctx(), steps.labels())
    assert wanted.get(CLIENT) == value
    assert PauseGpuOperands().verify(steps.ctx(), StepPlan(), {"set": {}}) is None
