"""`known-bad-combination`: per pool, a combination of node, OS and GPU software that upstream
sources show fails, found before it fails (docs/repair.md, docs/mig.md).

Read from the cluster only: node labels, architecture, OS image and taints; the DaemonSets of
the node monitoring agent, its DCGM server, mig-manager and the DRA driver (their selectors,
affinity, tolerations, images and settings); Karpenter's gates; the managed node groups'
repair settings; the ClusterPolicy when a bundle has it. One finding per pool and combination:

- the agent polls a DCGM server that cannot run on the node (amd64-only, a type missing from
  its instance-type list, a taint it does not tolerate) while repair acts on DCGMError: each
  new node goes AcceleratedHardwareReady=False DCGMError and is replaced, for ever;
- mig-manager must turn MIG mode on at every boot (Hopper, Blackwell) with the driver on the
  host: it stops kubelet during bootstrap;
- the DRA driver's DynamicMIG on a node that mig-manager (or a static layout) also partitions;
- a Bottlerocket release without MIG, or without the node's GPU among its MIG profiles;
- a DRA kubelet plugin whose pods none of mignurse's selectors finds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from mignurse.cluster.dra import DRA_PLUGIN_SELECTORS, DYNAMIC_MIG_GATE
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.facts import AHR
from mignurse.diagnose.findings import (
    INFO,
    KNOWN_BAD_COMBINATION,
    RUNBOOK_PAUSE_REPAIR,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, gate_setting
from mignurse.diagnose.mng import NO_ACTION
from mignurse.model import (
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_GPU_PRODUCT,
    LABEL_MIG_CONFIG,
    Node,
    instance_family,
)
from mignurse.model.fields import parse_version

LABEL_ARCH = "kubernetes.io/arch"
MIG_MANAGER_LABEL = LABEL_GPU_DEPLOY_PREFIX + "mig-manager"
DRIVER_LABEL = LABEL_GPU_DEPLOY_PREFIX + "driver"

# The node monitoring agent's chart (aws/eks-node-monitoring-agent v1.7.0
# charts/eks-node-monitoring-agent/templates/daemonset.yaml, dcgm-daemonset.yaml).
NMA_NAME = "eks-node-monitoring-agent"
DCGM_SERVER_NAME = "dcgm-server"
# From v1.6.0 (the first published source) the agent skips its NVIDIA monitor on arm64 outside
# Auto Mode: "NVIDIA-based monitoring is disabled for the arm64 architecture in this version
# of the agent" (monitors/nvidia/monitor.go Register, v1.6.0 to v1.7.0). Older add-on builds
# poll DCGM there and report DCGMError (the reported g5g loop: tech.inflab.com/
# 20250827-bottlerocket-ami-gpu-issue).
NMA_ARM64_SKIP = (1, 6, 0)
NMA_SOURCE = "aws/eks-node-monitoring-agent v1.7.0 monitors/nvidia/monitor.go, dcgm_reconcile.go"
DCGM_CHART_SOURCE = (
    "aws/eks-node-monitoring-agent v1.7.0 charts/eks-node-monitoring-agent/values.yaml "
    "dcgmAgent.affinity, tolerations"
)

# mig-manager stops kubelet.service when the MIG mode must change and the driver is on the host
# (NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go checkMigModeChangeRequired;
# NVIDIA/gpu-operator v26.7.0 assets/state-mig-manager/0420_configmap.yaml exports
# WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER, whatever migManager.env says); Hopper and
# Blackwell lose MIG mode at every reboot (NVIDIA MIG user guide, docs/mig.md).
MIG_MANAGER_SOURCE = (
    "NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go checkMigModeChangeRequired; "
    "NVIDIA/gpu-operator v26.7.0 assets/state-mig-manager/0420_configmap.yaml"
)

# The DRA driver's DynamicMIG gate (alpha, default false) and what it does to partitions it
# did not make (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 pkg/featuregates/featuregates.go;
# cmd/gpu-kubelet-plugin/driver.go NewDriver destroys every MIG device its checkpoint does not
# name); the kubelet plugin pods' labels are mignurse/cluster/dra.py's; the chart passes
# its `featureGates` as the FEATURE_GATES env (deployments/helm/dra-driver-nvidia-gpu/
# templates/kubeletplugin.yaml).
DYNAMIC_MIG = DYNAMIC_MIG_GATE
DRA_SOURCE = (
    "kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 pkg/featuregates/featuregates.go, "
    "cmd/gpu-kubelet-plugin/driver.go NewDriver (DestroyUnknownMIGDevices)"
)
DRA_SELECTOR_SOURCE = (
    "kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 deployments/helm/dra-driver-nvidia-gpu/"
    "templates/_helpers.tpl selectorLabels (nameOverride and selectorLabelsOverride change it)"
)

# Bottlerocket partitions MIG itself (settings.kubelet-device-plugins.nvidia.mig.profile):
# from 1.34.0 (bottlerocket-os/bottlerocket#4418 and bottlerocket-os/bottlerocket#4483) for
# A30, A100, H100 and H200 (nvidia-migmanager README); B200 profiles came with
# bottlerocket-os/bottlerocket-kernel-kit#136 (May 2025), RTX PRO 6000 with
# bottlerocket-os/bottlerocket-kernel-kit#300 (October 2025), in releases mignurse has no
# number for.
BOTTLEROCKET_MIG_FIRST = (1, 34, 0)
BOTTLEROCKET_SOURCE = (
    "bottlerocket-os/bottlerocket#4418 and bottlerocket-os/bottlerocket#4483 (MIG from 1.34.0); "
    "bottlerocket.dev/en/os/1.34.x/api/settings/kubelet-device-plugins"
)
BOTTLEROCKET_LATER_GPUS = {
    "B200": "bottlerocket-os/bottlerocket-kernel-kit#136 (merged May 2025)",
    "RTX PRO 6000": "bottlerocket-os/bottlerocket-kernel-kit#300 (merged October 2025)",
}
BOTTLEROCKET_FIRST_GPUS = frozenset({"A30", "A100", "H100", "H200"})

# GPU by a word of its GFD product (NVML's name, e.g. NVIDIA-H100-80GB-HBM3, NVIDIA-GH200-480GB,
# NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition), Karpenter's instance-gpu-name label
# (aws/karpenter-provider-aws v1.14.1: h100, rtx-pro-server-6000), or the EC2 family. Whole
# words: GH200 is not an H200, an RTX A3000 no A30.
_PRODUCT_WORDS = {
    "a30": "A30",
    "a100": "A100",
    "h100": "H100",
    "h200": "H200",
    "gh200": "GH200",
    "b200": "B200",
    "gb200": "GB200",
    "b300": "B300",
    "gb300": "GB300",
}
LABEL_KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
_FAMILIES = {
    "p4d": "A100",
    "p4de": "A100",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
    "p6-b200": "B200",
    "p6-b300": "B300",
    "p6e-gb200": "GB200",
    "g7e": "RTX PRO 6000",
}
_MODE_LOST_AT_BOOT = frozenset(
    {"H100", "H200", "GH200", "B200", "B300", "GB200", "GB300", "RTX PRO 6000"}
)


def rule(inp: DiagnosisInput) -> list[Finding]:
    return [
        *_dcgm_unreachable(inp),
        *_kubelet_stop_at_boot(inp),
        *_dynamic_mig_shared(inp),
        *_bottlerocket_mig(inp),
        *_dra_plugin_unseen(inp),
    ]


def _gpu_pools(inp: DiagnosisInput) -> dict[str, list[Node]]:
    pools: dict[str, list[Node]] = {}
    for node in inp.gpu_nodes:
        if node.deleting is None:
            pools.setdefault(node.pool, []).append(node)
    return pools


def _pool_name(pool: str) -> str:
    return f"pool {pool}" if pool else "nodes outside any pool"


def _combination(
    pool: str,
    severity: str,
    nodes: Iterable[str],
    summary: str,
    evidence: Iterable[Evidence],
    source: str,
    runbooks: tuple[str, ...] = (),
) -> Finding:
    """One known-bad-combination finding; its evidence ends with the upstream source."""
    return Finding(
        id=KNOWN_BAD_COMBINATION,
        severity=severity,
        nodepool=pool,
        nodes=tuple(nodes),
        summary=summary,
        evidence=(*evidence, Evidence(None, "source", source)),
        runbooks=runbooks,
    )


def _gpu(node: Node) -> str:
    for label in (LABEL_GPU_PRODUCT, LABEL_KARPENTER_GPU_NAME):
        words = re.split(r"[^a-z0-9]+", node.labels.get(label, "").lower())
        for word in words:
            if word in _PRODUCT_WORDS:
                return _PRODUCT_WORDS[word]
        if {"rtx", "pro", "6000"} <= set(words):
            return "RTX PRO 6000"
    return _FAMILIES.get(instance_family(node.instance_type), "")


def _arch(node: Node) -> str:
    return node.labels.get(LABEL_ARCH) or node.architecture


def _named(daemonsets: Iterable[DaemonSetInfo], name: str, label: str) -> list[DaemonSetInfo]:
    """DaemonSets by the chart's name or its selector label (a renamed release)."""
    return [
        d
        for d in daemonsets
        if d.name == name
        or d.pod_labels.get("k8s-app") == label
        or d.pod_labels.get("app.kubernetes.io/name") == label
    ]


def _repair_on_dcgm(inp: DiagnosisInput, node: Node) -> str:
    """What replaces (or reboots) this node when AcceleratedHardwareReady goes False
    DCGMError; "" when nothing does."""
    if node.pool_kind == "nodegroup":
        group = inp.nodegroups.get(node.pool)
        if group is None:
            return ""
        action = group.action(AHR, "False", "DCGMError")
        if action.action == NO_ACTION:
            return ""
        return f"node group {node.pool} repair: {action.action} ({action.source})"
    if (
        node.pool_kind == "nodepool"
        and inp.karpenter is not None
        and inp.karpenter.node_repair
        and (AHR, "False") in inp.repair_tolerations  # not before v1.2 (docs/repair.md)
    ):
        version = f" v{inp.karpenter.version}" if inp.karpenter.version else ""
        gates = inp.karpenter.feature_gates or "NodeRepair=true"
        return f"Karpenter{version} feature gates {gates}: AcceleratedHardwareReady=False 10m"
    return ""


# ------------------------------------------------------------------ DCGM server


def _dcgm_unreachable(inp: DiagnosisInput) -> list[Finding]:
    daemonsets = inp.daemonsets or ()
    agents = _named(daemonsets, NMA_NAME, NMA_NAME)
    servers = _named(daemonsets, DCGM_SERVER_NAME, DCGM_SERVER_NAME)
    if not agents or not servers:
        return []  # no agent, or DCGM comes from elsewhere (the host): nothing to judge
    findings = []
    for pool, nodes in sorted(_gpu_pools(inp).items()):
        looping: dict[str, str] = {}  # node → what repairs it
        blind: list[str] = []
        unmonitored: list[str] = []
        lines: list[str] = []
        agent_versions: set[str] = set()
        for node in nodes:
            if node.pool_kind == "auto":
                continue  # Auto Mode runs its own agent and DCGM, not these DaemonSets
            agent = next((a for a in agents if a.runs_on(node)), None)
            if agent is None or any(s.runs_on(node) for s in servers):
                continue
            why = "; ".join(f"{s.ref}: {s.refusal(node)}" for s in servers)
            tag = next((c.tag for c in agent.containers if NMA_NAME in c.image), "")
            agent_versions.add(tag or "unknown")
            version = parse_version(tag)
            arch = _arch(node)
            if arch == "arm64" and version is not None and version >= NMA_ARM64_SKIP:
                unmonitored.append(node.name)
                lines.append(
                    f"Node {node.name} ({node.instance_type}, arm64): {why}; agent {tag} skips "
                    "its NVIDIA monitor on arm64, so no GPU fault is reported"
                )
                continue
            repaired_by = _repair_on_dcgm(inp, node)
            if repaired_by:
                looping[node.name] = repaired_by
            else:
                blind.append(node.name)
            lines.append(
                f"Node {node.name} ({node.instance_type}, {arch or 'arch unknown'}): {why}; agent "
                f"{agent.ref} {tag or '(version unknown)'} runs there and polls DCGM on "
                "localhost:5555"
            )
        if not lines:
            continue
        evidence = [Evidence(None, "daemonset", line) for line in lines[:10]]
        source = f"{NMA_SOURCE}; {DCGM_CHART_SOURCE}"
        names = (*sorted(looping), *sorted(blind), *sorted(unmonitored))
        if looping:
            setting = sorted(set(looping.values()))[0]
            evidence.insert(0, Evidence(None, "settings", setting))
            karpenter = any(n.pool_kind == "nodepool" for n in nodes if n.name in looping)
            findings.append(
                _combination(
                    pool,
                    WARNING,
                    names,
                    (
                        f"{_pool_name(pool).capitalize()}: the node monitoring agent "
                        f"({', '.join(sorted(agent_versions))}) runs on {len(looping)} GPU "
                        "node(s) where its DCGM server cannot: each reports "
                        "AcceleratedHardwareReady=False DCGMError and repair replaces it, and "
                        "its replacement, for ever (a repair loop is certain). Let dcgm-server "
                        "run there (its affinity and tolerations, or an agent whose chart lists "
                        "the type), or turn repair off for DCGMError"
                    ),
                    evidence,
                    source,
                    runbooks=(RUNBOOK_PAUSE_REPAIR,) if karpenter else (),
                )
            )
            continue
        summary = (
            f"{_pool_name(pool).capitalize()}: the node monitoring agent's DCGM server cannot "
            f"run on {len(names)} GPU node(s)"
        )
        if blind:
            summary += (
                "; the agent reports AcceleratedHardwareReady=False DCGMError there (no repair "
                "that mignurse can read acts on it, so nothing loops, but GPU health is not "
                "watched)"
            )
        else:
            summary += (
                "; the agent skips GPU checks on arm64, so AcceleratedHardwareReady stays True "
                "whatever the GPUs do and repair never replaces a failed GPU"
            )
        findings.append(_combination(pool, INFO, names, summary, evidence, source))
    return findings


# ------------------------------------------------------------------ mig-manager at boot


def _static_mig(node: Node) -> bool:
    config = node.mig_config
    return bool(config) and config != "all-disabled"


def _kubelet_stop_at_boot(inp: DiagnosisInput) -> list[Finding]:
    daemonsets = inp.daemonsets or ()
    managers = [d for d in daemonsets if "mig-manager" in d.name]
    drivers = [
        d
        for d in daemonsets
        if d.name == "nvidia-driver-daemonset"
        or any("nvcr.io/nvidia/driver" in image for image in d.images())
    ]
    policy = _policy_spec(inp.cluster_policy)
    findings = []
    for pool, nodes in sorted(_gpu_pools(inp).items()):
        caught: list[tuple[Node, str]] = []
        for node in nodes:
            gpu = _gpu(node)
            if gpu not in _MODE_LOST_AT_BOOT or not _static_mig(node):
                continue
            if (
                not _mig_manager_runs(inp, managers, node)
                or _enabled(policy, "migManager") is False
            ):
                continue
            host = _host_driver(node, drivers, _enabled(policy, "driver"))
            if not host:
                continue
            if _al2023_finding_covers(inp, node):
                continue  # repair-risk's mig-manager finding names this node already
            caught.append(
                (
                    node,
                    f"{gpu}, {node.os_image or 'OS unknown'}, {host}"
                    + _manager_note(managers, node),
                )
            )
        if not caught:
            continue
        evidence = [
            Evidence(
                None,
                "label",
                f"Node {node.name}: {LABEL_MIG_CONFIG}={node.mig_config}, "
                f"{MIG_MANAGER_LABEL}={node.labels.get(MIG_MANAGER_LABEL, 'unset')}; {notes}",
            )
            for node, notes in caught[:10]
        ]
        findings.append(
            _combination(
                pool,
                WARNING,
                (n.name for n, _ in caught),
                (
                    f"{_pool_name(pool).capitalize()}: mig-manager must turn MIG mode on at every "
                    f"boot of {len(caught)} Hopper/Blackwell node(s) (they lose it on reboot) "
                    "with the driver on the host, so it stops kubelet during bootstrap of each "
                    "new or rebooted node. Apply the layout before kubelet (user data with "
                    "`hooks: {}`: `mignurse userdata`; on Bottlerocket its own "
                    "settings.kubelet-device-plugins.nvidia.mig) and set "
                    f"{MIG_MANAGER_LABEL}=false; WITH_SHUTDOWN_HOST_GPU_CLIENTS=false works only "
                    "from a gpu-operator release with NVIDIA/gpu-operator#2702 (none up to v26.7.0)"
                ),
                evidence,
                MIG_MANAGER_SOURCE,
            )
        )
    return findings


def _manager_note(managers: list[DaemonSetInfo], node: Node) -> str:
    """The mig-manager image that runs on the node, and a WITH_SHUTDOWN_HOST_GPU_CLIENTS its
    DaemonSet sets (the entrypoint overwrites it up to gpu-operator v26.7.0)."""
    notes = []
    for manager in managers:
        if not manager.runs_on(node):
            continue
        notes.append(f"{manager.ref} {', '.join(manager.images()) or '(no image)'}")
        shutdown = manager.env("WITH_SHUTDOWN_HOST_GPU_CLIENTS")
        if shutdown is not None:
            notes.append(
                f"its WITH_SHUTDOWN_HOST_GPU_CLIENTS={shutdown} is overwritten by the "
                "entrypoint (=$IS_HOST_DRIVER) up to gpu-operator v26.7.0"
            )
    return "".join(f"; {n}" for n in notes)


def _mig_manager_runs(inp: DiagnosisInput, managers: list[DaemonSetInfo], node: Node) -> bool:
    """Whether mig-manager runs on the node: its DaemonSet schedules there, or, when the
    DaemonSets were not read, the operator's label selects the node for it. The operator
    labels every MIG-capable node; without its mig-manager DaemonSet the label does nothing."""
    if inp.daemonsets is not None:
        return any(m.runs_on(node) for m in managers)
    return node.labels.get(MIG_MANAGER_LABEL) == "true"


def _host_driver(node: Node, drivers: list[DaemonSetInfo], driver_enabled: bool | None) -> str:
    """Why the driver is on the host (then mig-manager may stop kubelet), or ""."""
    if node.gpu_deploy.get("driver") == "pre-installed":
        return f"host driver ({DRIVER_LABEL}=pre-installed)"
    if driver_enabled is False:
        return "host driver (ClusterPolicy driver.enabled=false)"
    if any(d.runs_on(node) for d in drivers) or driver_enabled is True:
        return ""
    if node.os_image.startswith("Bottlerocket"):
        return "host driver (Bottlerocket ships it)"
    if "Amazon Linux" in node.os_image:
        return "host driver (no operator driver DaemonSet runs here; the EKS NVIDIA AMI has one)"
    return ""


def _al2023_finding_covers(inp: DiagnosisInput, node: Node) -> bool:
    """repair-risk already warns of mig-manager stopping kubelet on AL2023 unless cgroup v1."""
    collected = inp.node_evidence.get(node.name)
    os_release = collected.os_release if collected else None
    al2023 = (
        os_release.is_al2023 if os_release is not None else "Amazon Linux 2023" in node.os_image
    )
    cgroup = collected.cgroup if collected else None
    return al2023 and not (cgroup is not None and cgroup.version == 1)


def _policy_spec(policy: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = policy.get("spec") if isinstance(policy, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _enabled(spec: Mapping[str, Any], component: str) -> bool | None:
    section = spec.get(component)
    value = section.get("enabled") if isinstance(section, Mapping) else None
    return value if isinstance(value, bool) else None


# ------------------------------------------------------------------ DRA driver


def _dra_plugins(daemonsets: Iterable[DaemonSetInfo]) -> list[DaemonSetInfo]:
    """The NVIDIA DRA driver's kubelet plugin DaemonSets: found by a selector, or by image."""
    return [
        d
        for d in daemonsets
        if any(d.selected_by(s) for s in DRA_PLUGIN_SELECTORS)
        or (
            any("dra-driver" in image and "gpu" in image for image in d.images())
            and "kubelet-plugin" in (d.name + " " + " ".join(d.pod_labels.values()))
        )
    ]


def _gates(plugin: DaemonSetInfo) -> str:
    return plugin.flag("feature-gates") or plugin.env("FEATURE_GATES") or ""


def _dynamic_mig_shared(inp: DiagnosisInput) -> list[Finding]:
    daemonsets = inp.daemonsets or ()
    plugins = [p for p in _dra_plugins(daemonsets) if gate_setting(_gates(p), DYNAMIC_MIG)]
    if not plugins:
        return []
    managers = [d for d in daemonsets if "mig-manager" in d.name]
    findings = []
    for pool, nodes in sorted(_gpu_pools(inp).items()):
        caught: list[str] = []
        lines: list[str] = []
        for node in nodes:
            plugin = next((p for p in plugins if p.runs_on(node)), None)
            if plugin is None:
                continue
            others = [f"{m.ref} runs here" for m in managers if m.runs_on(node)]
            if _static_mig(node):
                others.append(f"{LABEL_MIG_CONFIG}={node.mig_config} asks for a static layout")
            if not others:
                continue
            caught.append(node.name)
            lines.append(
                f"Node {node.name}: {plugin.ref} with {DYNAMIC_MIG} on "
                f'("{_gates(plugin)}"); {", ".join(others)}'
            )
        if not caught:
            continue
        findings.append(
            _combination(
                pool,
                WARNING,
                caught,
                (
                    f"{_pool_name(pool).capitalize()}: the DRA driver runs {DYNAMIC_MIG} on "
                    f"{len(caught)} node(s) that mig-manager or a static MIG layout also "
                    "partitions; the plugin destroys MIG devices it did not create and "
                    "mig-manager re-creates its layout under running claims. Let one side "
                    f"own MIG: {MIG_MANAGER_LABEL}=false and no {LABEL_MIG_CONFIG}, or "
                    f"{DYNAMIC_MIG}=false"
                ),
                (Evidence(None, "daemonset", line) for line in lines[:10]),
                DRA_SOURCE,
            )
        )
    return findings


def _dra_plugin_unseen(inp: DiagnosisInput) -> list[Finding]:
    daemonsets = inp.daemonsets or ()
    unseen = [
        p
        for p in _dra_plugins(daemonsets)
        if not any(p.selected_by(s) for s in DRA_PLUGIN_SELECTORS)
    ]
    findings = []
    pools = _gpu_pools(inp)
    for plugin in unseen:
        by_pool: dict[str, list[str]] = {}
        for pool, nodes in pools.items():
            for node in nodes:
                if plugin.runs_on(node):
                    by_pool.setdefault(pool, []).append(node.name)
        labels = ", ".join(f"{k}={v}" for k, v in sorted(plugin.pod_labels.items())) or "none"
        for pool, names in sorted(by_pool.items()) or [("", [])]:
            findings.append(
                _combination(
                    pool,
                    WARNING,
                    names,
                    (
                        f"{plugin.ref} is the NVIDIA DRA driver's kubelet plugin, but its pods "
                        "carry none of the labels mignurse finds the plugin by: on "
                        + (
                            f"{_pool_name(pool)}'s {len(names)} node(s)"
                            if names
                            else "the GPU nodes it comes to run on"
                        )
                        + " a plugin that is down goes unseen and a MIG reapply does not pause "
                        "it. Let its pods carry "
                        f"{DRA_PLUGIN_SELECTORS[0]} (drop the chart's nameOverride or "
                        "selectorLabelsOverride)"
                    ),
                    (
                        Evidence(
                            None,
                            "daemonset",
                            f"{plugin.ref}: images {', '.join(plugin.images()) or 'none'}; "
                            f"pod labels {labels}",
                        ),
                        Evidence(
                            None,
                            "settings",
                            "selectors tried: " + ", ".join(DRA_PLUGIN_SELECTORS),
                        ),
                    ),
                    DRA_SELECTOR_SOURCE,
                )
            )
    return findings


# ------------------------------------------------------------------ Bottlerocket MIG


def _bottlerocket_version(node: Node) -> tuple[int, ...] | None:
    """1.32.0 from "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"; None if not Bottlerocket."""
    if not node.os_image.startswith("Bottlerocket OS "):
        return None
    word = node.os_image.removeprefix("Bottlerocket OS ").split(" ", 1)[0]
    return parse_version(word)


def _mig_wanted(node: Node) -> str:
    """A MIG layout asked of the node. Not `nvidia.com/mig.strategy`: GPU feature discovery
    sets it on every GPU node from the device plugin's config, MIG or not."""
    return f"{LABEL_MIG_CONFIG}={node.mig_config}" if _static_mig(node) else ""


def _bottlerocket_mig(inp: DiagnosisInput) -> list[Finding]:
    findings = []
    for pool, nodes in sorted(_gpu_pools(inp).items()):
        caught: list[str] = []
        lines: list[str] = []
        severity = INFO
        for node in nodes:
            version = _bottlerocket_version(node)
            wanted = _mig_wanted(node)
            if version is None or not wanted or node.mig_resources:
                continue  # not Bottlerocket, no MIG asked, or its MIG devices are there
            gpu = _gpu(node) or "GPU unknown"
            if version < BOTTLEROCKET_MIG_FIRST:
                why = (
                    f"Bottlerocket {'.'.join(map(str, version))} predates MIG support "
                    f"({'.'.join(map(str, BOTTLEROCKET_MIG_FIRST))})"
                )
                severity = WARNING
            elif gpu in BOTTLEROCKET_FIRST_GPUS:
                continue
            elif gpu in BOTTLEROCKET_LATER_GPUS:
                why = (
                    f"{gpu} profiles came later, with {BOTTLEROCKET_LATER_GPUS[gpu]}: check "
                    "that this release carries them"
                )
            else:
                why = f"Bottlerocket's MIG manager has no profile for {gpu} in any source read"
                severity = WARNING
            caught.append(node.name)
            lines.append(
                f"Node {node.name}: {node.os_image}, {node.instance_type}; {wanted}; {why}"
            )
        if not caught:
            continue
        findings.append(
            _combination(
                pool,
                severity,
                caught,
                (
                    f"{_pool_name(pool).capitalize()}: {len(caught)} Bottlerocket node(s) are "
                    "asked for MIG that their release cannot apply to their GPU: they serve "
                    "whole GPUs (or none) and MIG pods stay Pending. Move the NodeClass to a "
                    "Bottlerocket release that carries the GPU's MIG profiles"
                ),
                (Evidence(None, "label", line) for line in lines[:10]),
                BOTTLEROCKET_SOURCE,
            )
        )
    return findings
