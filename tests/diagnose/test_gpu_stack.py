"""gpu-stack-down: a GPU node Ready with AcceleratedHardwareReady True whose device plugin or
DRA kubelet plugin crash-loops, with no GPU offered.

Shapes and their sources:
- Pod status: kubernetes v1.34 staging/src/k8s.io/api/core/v1/types.go ContainerStatus
  (state.waiting reason/message, lastState.terminated exitCode/reason/message/finishedAt,
  restartCount, ready) with kubelet's CrashLoopBackOff message (pkg/kubelet/kuberuntime/
  kuberuntime_manager.go doBackOff: "back-off 5m0s restarting failed container=<c>
  pod=<name>_<ns>(<uid>)").
- Node: a device plugin that stopped leaves its devices in capacity and 0 allocatable, and
  after the grace period "nvidia.com/gpu: 0" in capacity (pkg/kubelet/cm/devicemanager
  GetCapacity, pkg/kubelet/nodestatus/setters.go MachineInfo).
- Plugin pod labels: gpu-operator v26.7.0 assets/state-device-plugin/0500_daemonset.yaml and
  manifests/state-dra-driver/0500_daemonset.yaml; NVIDIA/k8s-device-plugin v0.20.0
  deployments/helm/nvidia-device-plugin/templates/_helpers.tpl and deployments/static/
  nvidia-device-plugin.yml; kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 and
  NVIDIA/k8s-dra-driver-gpu v25.8.0 templates/_helpers.tpl "selectorLabels".
- Error texts: the plugins' own chains when NVML cannot start (NVIDIA/k8s-device-plugin
  v0.20.0 cmd/nvidia-device-plugin/main.go, internal/rm/rm.go).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from drashapes import dra_node, resource_slice

from mignurse.cli import main
from mignurse.cluster.dra import gpu_plugin_pods, plugin_kind, plugin_nodes_of
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import PLUGIN_DEVICE, PLUGIN_DRA, GpuPluginPod, Node, Pod, ResourceSlice
from mignurse.sim import SimCluster, load_scenario

from .simdiag import app_diagnosis

NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
NODE = "ip-10-0-5-248.ec2.internal"
LIB_ERROR = (
    "error starting plugins: unable to add default resources to config: failed to initialize "
    "NVML: ERROR_LIBRARY_NOT_FOUND"
)
DP_LABELS = {"app": "nvidia-device-plugin-daemonset"}
DRA_LABELS = {"dra-driver-nvidia-gpu-component": "kubelet-plugin"}


def p5_node(
    *,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    ready: str = "True",
    ahr: str | None = "True",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Karpenter p5.48xlarge node as the API server returns it."""
    conditions = [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                   "message": "kubelet is posting ready status",
                   "lastTransitionTime": "2026-11-28T10:00:00Z",
                   "lastHeartbeatTime": "2026-11-29T03:59:40Z"}]  # fmt: skip
    if ahr is not None:
        conditions.append({"type": "AcceleratedHardwareReady", "status": ahr,
                           "reason": "NvidiaGPUIsReady",
                           "message": "Monitoring for the Nvidia system is active",
                           "lastTransitionTime": "2026-11-28T10:01:00Z"})  # fmt: skip
    cap = {"cpu": "192", "memory": "2097152000Ki", "pods": "100"}
    return {
        "metadata": {
            "name": NODE,
            "uid": "u-node",
            "creationTimestamp": "2026-11-28T09:59:00Z",
            "labels": {
                "karpenter.sh/nodepool": "gpu-train",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                **(labels or {}),
            },
        },
        "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
        "status": {
            "capacity": {**cap, **(capacity if capacity is not None else {"nvidia.com/gpu": "8"})},
            "allocatable": {**cap, **(allocatable or {"nvidia.com/gpu": "0"})},
            "conditions": conditions,
        },
    }


def crashing(
    labels: dict[str, str],
    *,
    node: str = NODE,
    waiting: str | None = "CrashLoopBackOff",
    exit_code: int | None = 1,
    ready: bool = False,
    restarts: int = 6,
    init: bool = False,
    owner: str = "nvidia-device-plugin-daemonset",
    message: str = LIB_ERROR,
) -> dict[str, Any]:
    """A plugin pod whose container crashed and is backing off, as kubelet reports it."""
    name = f"{owner}-g7slf"
    state: dict[str, Any] = {"running": {"startedAt": "2026-11-29T03:59:50Z"}}
    if waiting is not None:
        state = {"waiting": {"reason": waiting, "message": f"back-off 5m0s restarting failed "
                             f"container=plugin pod={name}_gpu-operator(u-pod)"}}  # fmt: skip
    last: dict[str, Any] = {}
    if exit_code is not None:
        last = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else
                               "Completed", "message": message,
                               "startedAt": "2026-11-29T03:55:01Z",
                               "finishedAt": "2026-11-29T03:55:02Z",
                               "containerID": "containerd://abc"}}  # fmt: skip
    status = {"name": "plugin", "ready": ready, "restartCount": restarts, "started": ready,
              "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", "state": state,
              "lastState": last}  # fmt: skip
    pod_status: dict[str, Any] = {"phase": "Running" if not init else "Pending"}
    if init:
        pod_status["initContainerStatuses"] = [status]
        main_wait = {"waiting": {"reason": "PodInitializing"}}
        pod_status["containerStatuses"] = [
            {"name": "main", "ready": False, "restartCount": 0, "state": main_wait}
        ]
    else:
        pod_status["containerStatuses"] = [status]
    return {
        "metadata": {
            "name": name,
            "namespace": "gpu-operator",
            "uid": "u-pod",
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "controller": True}
            ],
        },
        "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": "x"}]},
        "status": pod_status,
    }


def run(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    slices: tuple[dict[str, Any], ...] = (),
    *,
    plugin_nodes: bool = True,
) -> list[Finding]:
    running = plugin_nodes_of(Pod.from_api(p) for p in pods) if plugin_nodes else frozenset()
    snap = Snapshot(
        nodes={n.name: n for n in (Node.from_api(x) for x in nodes)},
        taken_at=NOW,
        resource_slices=tuple(ResourceSlice.from_api(s) for s in slices),
        dra_plugin_nodes=running,
    )
    inp = DiagnosisInput(snapshot=snap, now=NOW, gpu_plugin_pods=gpu_plugin_pods(pods))
    result = diagnose(inp)
    assert result.rule_errors == []
    return [f for f in result.findings if f.id == "gpu-stack-down"]


# -- which pods are the plugins -------------------------------------------------------------


NDP = "nvidia-device-plugin"
OP_DRA = "nvidia-dra-driver-kubelet-plugin"
NEW_DRA, OLD_DRA = "dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"


@pytest.mark.parametrize(
    ("labels", "owner", "kind"),
    [
        ({"app": f"{NDP}-daemonset"}, f"{NDP}-daemonset", PLUGIN_DEVICE),
        ({"app.kubernetes.io/name": NDP}, f"ndp-{NDP}", PLUGIN_DEVICE),
        ({"name": f"{NDP}-ds"}, f"{NDP}-daemonset", PLUGIN_DEVICE),
        # the chart's GFD DaemonSet carries the plugin's name label too
        ({"app.kubernetes.io/name": NDP}, f"ndp-{NDP}-gpu-feature-discovery", ""),
        ({f"{NEW_DRA}-component": "kubelet-plugin"}, f"{NEW_DRA}-kubelet-plugin", PLUGIN_DRA),
        ({"app": OP_DRA}, OP_DRA, PLUGIN_DRA),
        ({f"{OLD_DRA}-component": "kubelet-plugin"}, f"{OLD_DRA}-kubelet-plugin", PLUGIN_DRA),
        ({f"{NEW_DRA}-component": "controller"}, f"{NEW_DRA}-controller", ""),
        ({"app": "gpu-feature-discovery"}, "gpu-feature-discovery", ""),
    ],
)
def test_every_install_of_either_plugin_is_found_and_nothing_else(
    labels: dict[str, str], owner: str, kind: str
) -> None:
    pod = crashing(labels, owner=owner)
    assert plugin_kind(pod) == kind
    running = copy.deepcopy(pod)
    running["status"] = {"phase": "Running"}
    assert plugin_nodes_of([Pod.from_api(running)]) == ({NODE} if kind == PLUGIN_DRA else set())


# -- the device plugin --------------------------------------------------------------------------


def test_a_crash_looping_device_plugin_on_a_healthy_node_is_named_with_its_last_error() -> None:
    (found,) = run([p5_node()], [crashing(DP_LABELS)])

    assert found.severity == "warning" and found.nodes == (NODE,) and found.nodepool == "gpu-train"
    assert "Ready and AcceleratedHardwareReady True, but its GPU stack is down" in found.summary
    assert "NVIDIA device plugin pod gpu-operator/nvidia-device-plugin-daemonset-g7slf" in (
        found.summary
    )
    assert "waiting CrashLoopBackOff; 6 restarts; last terminated Error, exit code 1" in (
        found.summary
    )
    assert f"last error: {LIB_ERROR}" in found.summary
    assert "GPU allocatable 0 (capacity nvidia.com/gpu=8)" in found.summary
    assert (
        "kubectl -n gpu-operator logs nvidia-device-plugin-daemonset-g7slf -c plugin --previous"
        in (found.summary)
    )
    assert found.runbooks == ("cordon-and-collect",)
    pod_line = next(e for e in found.evidence if e.source == "pod")
    assert pod_line.time == datetime(2026, 11, 29, 3, 55, 2, tzinfo=UTC)


def test_after_the_grace_period_capacity_zero_still_shows_the_gpus_were_there() -> None:
    node = p5_node(capacity={"nvidia.com/gpu": "0"}, allocatable={"nvidia.com/gpu": "0"})
    (found,) = run([node], [crashing(DP_LABELS)])
    assert "GPU allocatable 0 (capacity nvidia.com/gpu=0)" in found.summary


def test_a_node_that_never_had_gpu_resources_needs_a_gpu_count_label_to_be_judged() -> None:
    bare = p5_node(capacity={}, allocatable={})
    for key in ("nvidia.com/gpu", "nvidia.com/gpu.present"):
        bare["status"]["capacity"].pop(key, None)
        bare["status"]["allocatable"].pop(key, None)
    assert run([bare], [crashing(DP_LABELS)]) == []
    counted = p5_node(capacity={}, allocatable={}, labels={"nvidia.com/gpu.count": "8"})
    (found,) = run([counted], [crashing(DP_LABELS)])
    assert "label nvidia.com/gpu.count=8" in found.summary
    one = p5_node(capacity={}, allocatable={}, labels={"nvidia.com/gpu.count": "1"})
    (found,) = run([one], [crashing(DP_LABELS)])  # a single-GPU node (g6.xlarge) counts too
    assert "label nvidia.com/gpu.count=1" in found.summary


def test_gpus_still_allocatable_are_not_a_stack_down() -> None:
    node = p5_node(allocatable={"nvidia.com/gpu": "1"})
    assert run([node], [crashing(DP_LABELS)]) == []


@pytest.mark.parametrize(
    ("ready", "ahr"), [("False", "True"), ("Unknown", "True"), ("True", "False")]
)
def test_a_node_whose_conditions_already_say_unhealthy_is_left_to_the_other_rules(
    ready: str, ahr: str
) -> None:
    assert run([p5_node(ready=ready, ahr=ahr)], [crashing(DP_LABELS)]) == []


def test_a_node_without_the_monitoring_agent_is_judged_on_ready_alone() -> None:
    (found,) = run([p5_node(ahr=None)], [crashing(DP_LABELS)])
    assert "Ready (no AcceleratedHardwareReady condition), but its GPU stack is down" in (
        found.summary
    )


@pytest.mark.parametrize(
    ("waiting", "exit_code", "ready", "restarts", "named"),
    [
        ("CrashLoopBackOff", 1, False, 6, True),
        ("RunContainerError", None, False, 0, True),  # cannot start: no device, bad mount
        (None, 1, False, 1, True),  # restarted, running, not ready after an error exit
        (None, 137, False, 3, True),  # OOMKilled or SIGKILL
        (None, 1, True, 4, False),  # restarted earlier, ready now: recovered
        (None, 0, False, 1, False),  # the last run ended cleanly
        ("ContainerCreating", None, False, 0, False),  # starting, not failing
        ("ImagePullBackOff", None, False, 0, False),  # not a crash
    ],
)
def test_what_counts_as_crash_looping(
    waiting: str | None, exit_code: int | None, ready: bool, restarts: int, named: bool
) -> None:
    pod = crashing(DP_LABELS, waiting=waiting, exit_code=exit_code, ready=ready, restarts=restarts)
    assert bool(run([p5_node()], [pod])) is named


def test_an_init_container_crash_loop_counts_and_is_named_as_such() -> None:
    (found,) = run([p5_node()], [crashing(DP_LABELS, init=True)])
    assert "keeps failing (init container plugin; waiting CrashLoopBackOff" in found.summary


def test_a_pod_being_deleted_or_on_another_node_is_not_this_nodes_stack() -> None:
    leaving = crashing(DP_LABELS)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-29T03:59:00Z"
    elsewhere = crashing(DP_LABELS, node="ip-10-0-9-9.ec2.internal")
    assert run([p5_node()], [leaving, elsewhere]) == []


def test_a_multi_line_termination_message_quotes_its_last_line() -> None:
    pod = crashing(DP_LABELS, message=f"I1129 starting\nE1129 03:55:02 main.go:297] {LIB_ERROR}\n")
    (found,) = run([p5_node()], [pod])
    assert f"last error: E1129 03:55:02 main.go:297] {LIB_ERROR})" in found.summary


@pytest.mark.parametrize(
    "status",
    [
        {"containerStatuses": "oops"},
        {"containerStatuses": [None, 3, {"state": [], "lastState": {"terminated": "x"}}]},
        {"containerStatuses": [{"restartCount": "many", "state": {"waiting": {"reason": 7}}}]},
        {"initContainerStatuses": [{"lastState": {"terminated": {"exitCode": True}}}]},
    ],
)
def test_garbled_pod_status_never_raises(status: dict[str, Any]) -> None:
    pod = crashing(DP_LABELS)
    pod["status"] = status
    assert isinstance(GpuPluginPod.from_api(pod, PLUGIN_DEVICE), GpuPluginPod)
    run([p5_node()], [pod], plugin_nodes=False)


# -- the DRA kubelet plugin -----------------------------------------------------------------------

G7E = "ip-10-0-31-7.us-west-2.compute.internal"


def test_a_crash_looping_dra_plugin_with_no_slice_is_named_and_no_layout_mismatch_raised() -> None:
    node = dra_node(G7E, config="all-1g.24gb", instance_type="g7e.4xlarge", gpu_count="1")
    pod = crashing(DRA_LABELS, node=G7E, owner="dra-driver-nvidia-gpu-kubelet-plugin")
    snap_findings = run([node], [pod])

    (found,) = snap_findings
    assert "NVIDIA DRA driver's kubelet plugin (gpu.nvidia.com) pod" in found.summary
    assert "no gpu.nvidia.com ResourceSlice publishes a device for the node" in found.summary
    snap = Snapshot(nodes={G7E: Node.from_api(node)}, taken_at=NOW,
                    dra_plugin_nodes=plugin_nodes_of([Pod.from_api(pod)]))  # fmt: skip
    inp = DiagnosisInput(snapshot=snap, now=NOW, gpu_plugin_pods=gpu_plugin_pods([pod]))
    every = diagnose(inp)
    assert [f.id for f in every.findings if f.severity != "info"] == ["gpu-stack-down"]


def test_a_dra_plugin_whose_slice_still_publishes_devices_is_not_down() -> None:
    node = dra_node(G7E, config="all-1g.24gb", instance_type="g7e.4xlarge", gpu_count="1")
    pod = crashing(DRA_LABELS, node=G7E, owner="dra-driver-nvidia-gpu-kubelet-plugin")
    published = resource_slice(G7E, [{"1g.24gb": 4}], product="NVIDIA RTX PRO 6000")
    assert run([node], [pod], (published,)) == []
    empty = copy.deepcopy(published)
    empty["spec"]["devices"] = []
    (found,) = run([node], [pod], (empty,))
    assert "0 GPU(s), MIG devices none" in found.summary


@pytest.mark.parametrize("keep", ["gpu", "mig"])
def test_a_slice_that_still_publishes_whole_gpus_or_only_mig_devices_is_not_down(
    keep: str,
) -> None:
    # gpu.nvidia.com publishes a node's GPUs as `type: gpu` devices and its MIG devices as
    # `type: mig` (k8s-dra-driver-gpu@v25.8.0 cmd/gpu-kubelet-plugin/deviceinfo.go): either
    # kind left in the slice means GPUs are still on offer.
    node = dra_node(G7E, config="all-1g.24gb", instance_type="g7e.4xlarge", gpu_count="1")
    pod = crashing(DRA_LABELS, node=G7E, owner="dra-driver-nvidia-gpu-kubelet-plugin")
    published = resource_slice(G7E, [{"1g.24gb": 4}], product="NVIDIA RTX PRO 6000")
    devices = published["spec"]["devices"]
    published["spec"]["devices"] = [d for d in devices if d["attributes"]["type"]["string"] == keep]
    assert published["spec"]["devices"]
    assert run([node], [pod], (published,)) == []


# -- the boundaries of the device plugin's judgement -------------------------------------------


def test_one_gpu_still_allocatable_of_eight_is_not_a_stack_down() -> None:
    node = p5_node(allocatable={"nvidia.com/gpu": "1"})
    assert run([node], [crashing(DP_LABELS)], plugin_nodes=False) == []


def test_a_node_being_deleted_or_without_a_ready_condition_is_not_judged() -> None:
    deleting = p5_node()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-29T03:58:00Z"
    assert run([deleting], [crashing(DP_LABELS)], plugin_nodes=False) == []
    no_ready = p5_node(ahr=None)
    no_ready["status"]["conditions"] = []
    assert run([no_ready], [crashing(DP_LABELS)], plugin_nodes=False) == []


def test_the_evidence_holds_both_conditions_the_crash_and_what_the_node_offers() -> None:
    (found,) = run([p5_node()], [crashing(DP_LABELS)], plugin_nodes=False)
    by_source: dict[str, list[str]] = {}
    for line in found.evidence:
        by_source.setdefault(line.source, []).append(line.text)
    conditions = by_source["condition"]
    assert len(conditions) == 2
    assert any("Ready=True" in t for t in conditions)
    assert any("AcceleratedHardwareReady=True" in t for t in conditions)
    assert by_source["node"] == ["GPU allocatable 0 (capacity nvidia.com/gpu=8)"]
    assert any("ERROR_LIBRARY_NOT_FOUND" in t for t in by_source["pod"])


# -- as a user: the shipped scenario, live, in the app and from a bundle ---------------------------


def test_the_crashloop_scenario_live_and_from_its_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimCluster(load_scenario("gpu-plugin-crashloop"), speed=0) as sim:
        # the crashes came 5 min before start, the DRA slice wiped 30 s after
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        code = main(["--kubeconfig", kubeconfig, "diagnose", "-o", "json"])
        live = json.loads(capsys.readouterr().out)
        bundle = tmp_path / "b.tar.gz"
        collected = main(["--kubeconfig", kubeconfig, "collect", "--nodepool", "gpu-train",
                          "--transport", "sim", "-o", str(bundle)])  # fmt: skip
        capsys.readouterr()
    assert collected == 0
    down = {f["nodepool"]: f for f in live["findings"] if f["id"] == "gpu-stack-down"}
    assert set(down) == {"gpu-train", "gpu-mig-dra"}
    assert code == 1
    assert "ERROR_LIBRARY_NOT_FOUND" in down["gpu-train"]["summary"]
    assert "ERROR_DRIVER_NOT_LOADED" in down["gpu-mig-dra"]["summary"]
    assert not [f for f in live["findings"] if f["id"] == "mig-layout-mismatch"]

    main(["diagnose", "--from", str(bundle), "-o", "json"])
    offline = json.loads(capsys.readouterr().out)
    again = {f["nodepool"]: f for f in offline["findings"] if f["id"] == "gpu-stack-down"}
    assert set(again) == set(down)  # the bundle's cluster view holds every node's plugin pod
    for pool, finding in down.items():
        assert (again[pool]["nodes"], again[pool]["summary"]) == (
            finding["nodes"],
            finding["summary"],
        )
    # the bundle keeps the plugin pods of every node, so a DRA node of another pool is still
    # read as DRA and not as a device-plugin node advertising no MIG resources
    assert not [f for f in offline["findings"] if f["id"] == "mig-layout-mismatch"]


def test_the_app_names_the_stack_down_nodes_from_its_live_session(tmp_path: Path) -> None:
    diagnosis = app_diagnosis("gpu-plugin-crashloop", tmp_path)

    down = sorted(f.nodepool for f in diagnosis.findings if f.id == "gpu-stack-down")
    assert down == ["gpu-mig-dra", "gpu-train"]
