"""gpu-stack-down: a GPU node that is Ready, with AcceleratedHardwareReady True (or no such
condition), whose GPU plugin keeps failing, so no pod can get a GPU there while every
condition says healthy.

- NVIDIA's device plugin crash-looping, with the node's GPU allocatable at 0 while the node
  has GPUs: capacity above 0, or the resource left in capacity at 0 (kubelet keeps a stopped
  plugin's devices in capacity, unhealthy, for 5 min, then sets its capacity to 0: kubernetes
  v1.34 pkg/kubelet/cm/devicemanager/manager.go GetCapacity, endpointStopGracePeriod;
  pkg/kubelet/nodestatus/setters.go MachineInfo "removedDevicePlugins"), or GFD's or
  Karpenter's GPU count label.
- The NVIDIA DRA driver's kubelet plugin crash-looping, with no device published for the node
  in its gpu.nvidia.com ResourceSlices (kubelet wipes a driver's slices 30 s after its plugin
  unregisters: pkg/kubelet/cm/dra/plugin defaultWipingDelay).

Crash-looping is kubelet's: a container (init containers too) waiting in CrashLoopBackOff or
another start failure, or restarted and not ready after a run that ended in error
(model/dra.py ContainerTrouble). The finding names the node, the pod and its last error.
"""

from __future__ import annotations

from collections.abc import Mapping

from mignurse.diagnose.facts import AHR
from mignurse.diagnose.findings import (
    GPU_STACK_DOWN,
    RUNBOOK_CORDON_AND_COLLECT,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules.mig_hook import condition_evidence
from mignurse.diagnose.supply import SOURCE_SLICES, describe_published
from mignurse.gpu.profiles import LABEL_GPU_COUNT
from mignurse.model import (
    DRA_GPU_DRIVER,
    LABEL_GPU_COUNT_HINT,
    PLUGIN_DEVICE,
    PLUGIN_DRA,
    GpuPluginPod,
    Node,
    parse_count,
)

SOURCE_POD = "pod"
PLUGIN_WORDS = {
    PLUGIN_DEVICE: "NVIDIA device plugin",
    PLUGIN_DRA: f"NVIDIA DRA driver's kubelet plugin ({DRA_GPU_DRIVER})",
}


def _device_plugin_lost(node: Node) -> str | None:
    """Why the node offers no GPU through the device plugin while it has GPUs, or None."""
    if sum(node.gpu_allocatable.values()) > 0:
        return None
    has = [f"capacity {name}={count}" for name, count in sorted(node.gpu_capacity.items())]
    for key in (LABEL_GPU_COUNT, LABEL_GPU_COUNT_HINT):
        if parse_count(node.labels.get(key)) > 0:
            has.append(f"label {key}={node.labels[key]}")
    if not has:
        return None  # nothing says the node has GPUs for the device plugin to offer
    return f"GPU allocatable 0 ({', '.join(has)})"


def _dra_lost(inp: DiagnosisInput, node: Node) -> str | None:
    devices = inp.snapshot.dra_devices.get(node.name)
    if devices is None:
        return f"no {DRA_GPU_DRIVER} ResourceSlice publishes a device for the node"
    if devices.gpus or devices.migs:
        return None
    return describe_published(devices, plugin_runs=False)


def _healthy_says(node: Node) -> bool:
    """Ready True, and AcceleratedHardwareReady True or absent."""
    if node.ready is None or node.ready.status != "True":
        return False
    ahr = node.condition(AHR)
    return ahr is None or ahr.status == "True"


def _pod_evidence(pod: GpuPluginPod) -> list[Evidence]:
    return [
        Evidence(t.last_finished, SOURCE_POD, f"{pod.namespace}/{pod.name}: {t.words()}")
        for t in pod.troubles
    ]


def _node_finding(inp: DiagnosisInput, node: Node, pods: list[GpuPluginPod]) -> Finding | None:
    lost: list[tuple[GpuPluginPod, str]] = []
    for pod in pods:
        why = _device_plugin_lost(node) if pod.kind == PLUGIN_DEVICE else _dra_lost(inp, node)
        if why is not None:
            lost.append((pod, why))
    if not lost:
        return None
    pod, why = lost[0]
    trouble = pod.troubles[0]
    ahr = node.condition(AHR)
    says = f"Ready and {AHR} True" if ahr is not None else f"Ready (no {AHR} condition)"
    container = f" -c {trouble.container}" if trouble.container != "?" else ""
    summary = (
        f"{node.name}: {says}, but its GPU stack is down: the {PLUGIN_WORDS[pod.kind]} pod "
        f"{pod.namespace}/{pod.name} keeps failing ({trouble.words()}) and {why}, so no pod "
        f"can get a GPU here; read `kubectl -n {pod.namespace} logs {pod.name}{container} "
        "--previous` (a driver or toolkit the plugin cannot load, or a bad plugin config, is "
        "fixed on the node or in the config, not by replacing it)"
    )
    evidence: list[Evidence] = []
    for cond in (node.ready, ahr):
        if cond is not None:
            evidence.append(condition_evidence(cond))
    for each, reason in lost:
        evidence.extend(_pod_evidence(each))
        source = "node" if each.kind == PLUGIN_DEVICE else SOURCE_SLICES
        evidence.append(Evidence(None, source, reason))
    return Finding(
        id=GPU_STACK_DOWN,
        severity=WARNING,
        nodepool=node.pool,
        nodes=(node.name,),
        summary=summary,
        evidence=tuple(dict.fromkeys(evidence)),
        runbooks=(RUNBOOK_CORDON_AND_COLLECT,),
    )


def rule(inp: DiagnosisInput) -> list[Finding]:
    return list(stack_down(inp).values())


def stack_down(inp: DiagnosisInput) -> Mapping[str, Finding]:
    """The gpu-stack-down findings by node, computed once per input: the layout rule leaves
    these nodes to it (no layout is served while the plugin is down)."""
    return inp.memo("gpu-stack-down", lambda: {f.nodes[0]: f for f in _findings(inp)})


def _findings(inp: DiagnosisInput) -> list[Finding]:
    failing: dict[str, list[GpuPluginPod]] = {}
    for pod in inp.gpu_plugin_pods:
        if pod.crash_looping and pod.node_name:
            failing.setdefault(pod.node_name, []).append(pod)
    findings: list[Finding] = []
    for node in inp.gpu_nodes:
        pods = failing.get(node.name)
        if not pods or node.deleting is not None or not _healthy_says(node):
            continue
        found = _node_finding(inp, node, sorted(pods, key=lambda p: (p.namespace, p.name)))
        if found is not None:
            findings.append(found)
    return findings
