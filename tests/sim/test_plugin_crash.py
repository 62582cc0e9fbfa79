"""The simulator's `gpuPluginCrash` step: a GPU plugin pod crash-looping as kubelet reports it
(kubernetes v1.34 core/v1 ContainerStatus; pkg/kubelet/kuberuntime/kuberuntime_manager.go
doBackOff's message), the device plugin's GPUs 0 allocatable with capacity kept
(pkg/kubelet/cm/devicemanager: a stopped endpoint's devices are unhealthy), and the DRA
kubelet plugin's slice wiped 30 s after it stops (pkg/kubelet/cm/dra/plugin
defaultWipingDelay) and never published again."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mignurse.sim import ScenarioError, SimCluster, load_scenario

BASE = """name: crash
cluster: {name: c, region: us-east-1, kubernetesVersion: "1.34"}
seed: 7
warmup: 1m
karpenter: {version: 1.8.1, nodeRepair: true}
nodePools:
  - name: gpu
    instanceType: ITYPE
    zones: [us-east-1a]
    os: al2023-v20260409
    EXTRA
    nodes: 1
    existing:
      - {count: 1, age: 2d}
timeline:
  - at: 30s
    node: {newest: gpu}
    gpuPluginCrash: CRASH
"""


def scenario(tmp_path: Path, *, dra: bool, crash: str) -> Path:
    extra = (
        "gpuScheduling: dra\n    mig: {config: all-1g.24gb, strategy: mixed, appliedBy: userdata}"
        "\n    workload: {name: w, namespace: w, podsPerNode: 1, resource: mig.nvidia.com, "
        "profile: 1g.24gb, perPod: 1}"
        if dra
        else "workload: {name: w, namespace: w, podsPerNode: 1, perPod: 1}"
    )
    itype = "g7e.4xlarge" if dra else "p5.48xlarge"
    path = tmp_path / "crash.yaml"
    path.write_text(BASE.replace("ITYPE", itype).replace("EXTRA", extra).replace("CRASH", crash))
    return path


def plugin_pod(sim: SimCluster, owner: str) -> dict[str, Any]:
    return next(
        p
        for p in sim.objects("pods")
        if (p["metadata"].get("ownerReferences") or [{}])[0].get("name") == owner
    )


def test_a_crashed_device_plugin_backs_off_and_its_gpus_are_not_allocatable(
    tmp_path: Path,
) -> None:
    path = scenario(tmp_path, dra=False, crash='{message: "nvml failed", exitCode: 2, restarts: 5}')
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        (node,) = [n for n in sim.objects("nodes") if "p5" in str(n["metadata"]["labels"])]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        sim.advance(40)
        node = sim.store.get("nodes", "", node["metadata"]["name"])
        pod = plugin_pod(sim, "nvidia-device-plugin-daemonset")

    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] is False and status["restartCount"] == 5
    waiting = status["state"]["waiting"]
    assert waiting["reason"] == "CrashLoopBackOff"
    meta = pod["metadata"]
    assert waiting["message"] == (
        f"back-off 2m40s restarting failed container={status['name']} "
        f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
    )
    last = status["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"], last["message"]) == (2, "Error", "nvml failed")
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "False" and ready["ContainersReady"] == "False"


def test_a_crashed_dra_plugin_has_its_slice_wiped_after_30_s_and_never_republished(
    tmp_path: Path,
) -> None:
    path = scenario(tmp_path, dra=True, crash="{exitCode: 1}")
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        assert sim.objects("resourceslices")
        sim.advance(30 + 29)  # the crash at 30 s, the wiping delay not over
        kept = sim.objects("resourceslices")
        sim.advance(2)
        wiped = sim.objects("resourceslices")
        sim.advance(600)
        later = sim.objects("resourceslices")
        pod = plugin_pod(sim, "nvidia-dra-driver-gpu-kubelet-plugin")

    assert kept and not wiped and not later
    (status,) = pod["status"]["containerStatuses"]
    assert status["restartCount"] == 5 and "message" not in status["lastState"]["terminated"]


@pytest.mark.parametrize(
    ("crash", "fragment"),
    [
        ("{exitCode: 0}", "exitCode must be 1 to 255 (a crash)"),
        ("{exitCode: 300}", "exitCode must be 1 to 255 (a crash)"),
        ("{restarts: 0}", "restarts must be a whole number, at least 1"),
        ("{signal: 9}", "signal"),
        ("{message: [a]}", "message must be text"),
    ],
)
def test_a_bad_plugin_crash_is_one_line_naming_its_line(
    tmp_path: Path, crash: str, fragment: str
) -> None:
    path = scenario(tmp_path, dra=False, crash=crash)
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    message = str(err.value)
    assert re.match(rf"{re.escape(str(path))}:\d+: ", message), message
    assert fragment in message and "\n" not in message
