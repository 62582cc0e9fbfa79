"""mig-layout-mismatch: the layout `nvidia.com/mig.config` asks for differs from (a) the MIG
state the GPUs report (node evidence: NVML or nvidia-smi), (b) the resources the device
plugin advertises, or (c) the MIG devices the NVIDIA DRA driver publishes in the node's
ResourceSlices (`gpu.nvidia.com`, one `type=mig` device per MIG device that exists:
NVIDIA/k8s-dra-driver-gpu@v25.8.0 cmd/gpu-kubelet-plugin/nvlib.go getMigDevices). A DRA node
advertises no `nvidia.com/*` resources, and that is normal there.

The expected layout is the one the node's mig-parted file gives that name on the node's GPU
model: the file the GPU operator's mig-manager reads for the node (`mignurse.gpu.clusterconfig`:
the ConfigMap its ClusterPolicy names, the one mig-manager publishes for the node, or the
operator's default), or NVIDIA's default file where no operator runs (`mignurse.gpu.catalogue`,
`mignurse.gpu.models`). When the operator's file cannot be read, the layout is unknown rather
than taken from another file. In NVIDIA's default file the same name means 7×
on an 80 GB GPU and 4× on an A100-40GB, or nothing at all on a GPU its device filters do
not name. The model comes from the GPU's PCI device id, its exact product name, Karpenter's
GPU name or the instance type; when it is unknown, or its sources disagree, the finding says
"GPU model unknown" and compares only what does not depend on the model.

Nodes whose `mig.config.state` is pending, rebooting or failed are mid-change or stuck:
`mig-config-failed` owns them, and a differing layout there is expected, not news.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from mignurse.diagnose.findings import (
    CRITICAL,
    MIG_LAYOUT_MISMATCH,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_REAPPLY_MIG,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules.gpu_stack import stack_down
from mignurse.diagnose.rules.mig_hook import (
    MIG_STATES_IN_FLIGHT,
    evidence_problems,
    label_evidence,
    node_evidence_of,
)
from mignurse.diagnose.supply import SOURCE_SLICES, Supply, supply_of
from mignurse.gpu.catalogue import Configs
from mignurse.gpu.clusterconfig import ConfigUnreadable, MigConfigs, for_node
from mignurse.gpu.profiles import (
    MIG_INVALID,
    MODEL_UNKNOWN,
    GpuIdentity,
    GpuModel,
    Layout,
    describe_counts,
    expected_layout,
    identify_gpus,
    mig_slices,
    profiles_of_config,
    single_strategy_profile,
    strategy,
)
from mignurse.model import (
    DRA_GPU_DRIVER,
    LABEL_GPU_PRODUCT,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    LABEL_MIG_STRATEGY,
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    MIG_UNKNOWN,
    PROBE_OK,
    RESOURCE_GPU,
    GpuMigState,
    MigState,
    Node,
)

# The device plugin re-registers its resources a little after a reconfigure or a join.
ADVERTISE_GRACE = timedelta(minutes=5)


def _gpu_problem(gpu: GpuMigState, layout: Layout | None, config: str) -> str | None:
    """What one GPU shows that the layout does not ask for, or None."""
    if gpu.mode_change_pending:
        return (
            f"MIG mode change pending (current {gpu.mig_current}, pending {gpu.mig_pending}): "
            f"needs a GPU reset or reboot"
        )
    if layout is None or layout.mig_enabled is None or gpu.mig_current == MIG_UNKNOWN:
        return None
    want = MIG_ENABLED if layout.mig_enabled else MIG_DISABLED
    if gpu.mig_current != want:
        return f"MIG mode {gpu.mig_current}, {config} asks {want}"
    if layout.devices is None:
        return None
    counts = gpu.profile_counts()
    if "unknown" in counts:
        # nvidia-smi -q -x alone names no profiles: compare how many devices there are.
        have, asked = sum(counts.values()), sum(layout.devices.values())
        if have != asked:
            return f"{have} MIG devices, {config} asks {asked} ({describe_counts(layout.devices)})"
        return None
    if counts != dict(layout.devices):
        return (
            f"MIG devices {describe_counts(counts)}, {config} asks "
            f"{describe_counts(layout.devices)}"
        )
    return None


def _gpu_ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5] → "GPUs 0-2, 5"."""
    parts: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ("GPU " if len(indices) == 1 else "GPUs ") + ", ".join(parts)


def _compare_gpus(
    mig: MigState, layout: Layout | None, ident: GpuIdentity, config: str
) -> tuple[list[str], list[Evidence]]:
    gpus = [g for g in mig.gpus if g.mig_current != MIG_NOT_SUPPORTED]
    by_problem: dict[str, list[int]] = {}
    for gpu in gpus:
        problem = _gpu_problem(gpu, layout, config)
        if problem is not None:
            by_problem.setdefault(problem, []).append(gpu.index)
    source = mig.source or "nvml"
    problems = [f"{_gpu_ranges(sorted(ix))}: {p}" for p, ix in by_problem.items()]
    if ident.count is not None and gpus and len(gpus) < ident.count:
        problems.append(f"{source} lists {len(gpus)} MIG-capable GPUs of {ident.count}")
    evidence = [Evidence(None, source, p) for p in problems]
    if not problems:
        counts: dict[str, int] = {}
        for gpu in gpus:
            for profile, n in gpu.profile_counts().items():
                counts[profile] = counts.get(profile, 0) + n
        modes = sorted({g.mig_current for g in gpus})
        evidence.append(
            Evidence(
                None,
                source,
                f"{len(gpus)} MIG-capable GPUs, mode {', '.join(modes) or 'n/a'}, "
                f"MIG devices {describe_counts(counts)}",
            )
        )
    return problems, evidence


def _compare_advertised(
    node: Node, layout: Layout | None, ident: GpuIdentity, config: str, configs: Configs
) -> tuple[list[str], bool]:
    """Mismatches between the layout and the device plugin's resources, and whether the
    node advertises nothing usable where a MIG layout is asked for."""
    slices = mig_slices(node)
    gpus = node.gpu_allocatable.get(RESOURCE_GPU, 0)
    strat = strategy(node)
    single = single_strategy_profile(node)
    if layout is None or layout.mig_enabled is None:
        # Layout unknown here: still nothing at all to schedule on is worth a page.
        if not slices and gpus == 0:
            return ["advertises no nvidia.com/gpu and no nvidia.com/mig-* resources"], True
        return [], False
    if not layout.mig_enabled:
        problems = []
        if slices:
            problems.append(f"advertises MIG slices {describe_counts(slices)} under {config}")
        if ident.count is not None and gpus != ident.count:
            problems.append(f"advertises {RESOURCE_GPU}={gpus} of {ident.count} GPUs")
        return problems, False
    if strat == "none":
        return [], False  # the device plugin was told not to expose MIG devices
    if single == MIG_INVALID:
        product = node.labels.get(LABEL_GPU_PRODUCT, "")
        return [
            f"device plugin rejected the layout: {LABEL_GPU_PRODUCT}={product} (single strategy "
            f"needs one profile on every GPU)"
        ], True
    if not slices:
        return [f"advertises no MIG resources although {config} asks for a MIG layout"], True
    if layout.devices is not None and ident.count is not None:
        want = {p: n * ident.count for p, n in layout.devices.items()}
        if slices != want:
            return [
                f"advertises {describe_counts(slices)}, {config} on {ident.count} GPUs means "
                f"{describe_counts(want)}"
            ], False
        return [], False
    # The model is unknown, but a config for any GPU names its profiles all the same.
    asked = profiles_of_config(config, configs)
    if asked and set(slices) - asked:
        only = ", ".join(sorted(asked))
        return [f"advertises {describe_counts(slices)}, {config} asks only {only}"], False
    return [], False


def _compare_published(
    supply: Supply, layout: Layout | None, ident: GpuIdentity, config: str, configs: Configs
) -> tuple[list[str], bool]:
    """Mismatches between the layout and the MIG devices the NVIDIA DRA driver publishes for
    the node, and whether it publishes nothing usable where a layout is asked for."""
    devices = supply.devices
    if devices is None:
        return [
            f"publishes no {DRA_GPU_DRIVER} ResourceSlice although the DRA driver's kubelet "
            "plugin runs there"
        ], True
    if not devices.complete or devices.dynamic:
        return [], False  # a pool mid-update, or placements offered: no layout to compare
    per_gpu = devices.per_gpu()
    migs = devices.mig_counts()
    if layout is None or layout.mig_enabled is None:
        if not per_gpu:
            return ["publishes no GPU and no MIG device"], True
        return [], False
    problems: list[str] = []
    if ident.count is not None and len(per_gpu) != ident.count:
        problems.append(f"publishes {len(per_gpu)} GPUs of {ident.count}")
    if not layout.mig_enabled:
        if migs:
            problems.append(f"publishes MIG devices {describe_counts(migs)} under {config}")
        return problems, False
    if not migs:
        return [
            f"publishes no MIG devices although {config} asks for a MIG layout",
            *problems,
        ], True
    if layout.devices is not None:
        # A GPU's minor from its own device name, else from its MIG devices' names.
        named = (d for d in (*devices.migs, *devices.gpus) if d.gpu_minor is not None)
        minors = {d.gpu_key: d.gpu_minor for d in named}
        by_counts: dict[str, list[int]] = {}
        for key, counts in per_gpu.items():
            if counts != dict(layout.devices):
                minor = minors.get(key)
                by_counts.setdefault(describe_counts(counts), []).append(
                    minor if minor is not None else -1
                )
        for seen, indices in by_counts.items():
            problems.append(
                f"{_gpu_ranges(sorted(indices))}: publishes MIG devices {seen}, {config} asks "
                f"{describe_counts(layout.devices)}"
            )
        return problems, False
    asked = profiles_of_config(config, configs)
    if asked and set(migs) - asked:
        only = ", ".join(sorted(asked))
        problems.append(f"publishes MIG devices {describe_counts(migs)}, {config} asks only {only}")
    return problems, False


def _node_finding(inp: DiagnosisInput, node: Node) -> Finding | None:
    config = node.mig_config
    evidence = node_evidence_of(inp, node.name)
    mig = evidence.mig if evidence is not None else None
    ok_mig = mig if mig is not None and mig.status == PROBE_OK else None
    ident = identify_gpus(node, ok_mig)
    configs = node_configs(inp, node.name)
    layout = _expected_layout(inp, config, ident.model, configs)
    known = configs.configs if isinstance(configs, MigConfigs) else {}

    problems: list[str] = []
    found: list[Evidence] = []
    critical = False
    if ok_mig is not None:
        gpu_problems, gpu_evidence = _compare_gpus(ok_mig, layout, ident, config)
        problems.extend(gpu_problems)
        found.extend(gpu_evidence)
    young = node.created is not None and inp.now - node.created < ADVERTISE_GRACE
    supply = supply_of(inp.snapshot, node)
    # A NotReady node's device plugin cannot register: its resources say nothing of MIG.
    if node.ready_status == "Ready" and not young:
        if supply.dra:
            published, critical = _compare_published(supply, layout, ident, config, known)
            problems.extend(published)
            found.extend(Evidence(None, SOURCE_SLICES, p) for p in published)
        if not supply.dra or node.gpu_allocatable:
            # the device plugin's resources, also where it runs beside the DRA driver
            advertised, zero = _compare_advertised(node, layout, ident, config, known)
            problems.extend(advertised)
            critical = critical or zero
            found.extend(Evidence(None, "node", p) for p in advertised)
    if not problems:
        return None

    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    summary = f"{node.name}: {LABEL_MIG_CONFIG}={_asks(config, layout)} but {problems[0]}{more}"
    found.extend(_node_gpus(node, ident, supply))
    if isinstance(configs, MigConfigs):
        found.append(Evidence(None, "cluster", f"{config} as {configs.source} defines it"))
        if configs.note:
            found.append(Evidence(None, "cluster", configs.note))
    if evidence is not None:
        found.extend(evidence_problems(evidence))
    return Finding(
        id=MIG_LAYOUT_MISMATCH,
        severity=CRITICAL if critical else WARNING,
        nodepool=node.pool,
        nodes=(node.name,),
        summary=summary,
        evidence=tuple(found),
        # Reapplying needs the layout; without it, collect the evidence first.
        runbooks=(
            (RUNBOOK_REAPPLY_MIG, RUNBOOK_CORDON_AND_COLLECT)
            if layout is not None and layout.devices is not None
            else (RUNBOOK_CORDON_AND_COLLECT,)
        ),
    )


def node_configs(inp: DiagnosisInput, node: str) -> MigConfigs | str:
    """The mig-parted file mig-manager reads for the node, or why it is not known."""
    if inp.cluster_policy is not None and inp.mig_configmaps is None:
        return "the GPU operator's mig-parted ConfigMaps were not read"
    maps: dict[tuple[str, str], Mapping[str, Any]] = inp.memo(
        f"{MIG_LAYOUT_MISMATCH}.configmaps", lambda: _by_key(inp.mig_configmaps or ())
    )
    parsed: dict[tuple[str, str], MigConfigs | ConfigUnreadable] = inp.memo(
        f"{MIG_LAYOUT_MISMATCH}.files", dict
    )
    try:
        return for_node(inp.cluster_policy, node, lambda ns, name: maps.get((ns, name)), parsed)
    except ConfigUnreadable as exc:
        return str(exc)


def _by_key(configmaps: tuple[Mapping[str, Any], ...]) -> dict[tuple[str, str], Mapping[str, Any]]:
    out = {}
    for configmap in configmaps:
        meta = configmap.get("metadata")
        if isinstance(meta, Mapping):
            out[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = configmap
    return out


def _expected_layout(
    inp: DiagnosisInput, config: str, model: GpuModel | None, configs: MigConfigs | str
) -> Layout | None:
    """`expected_layout`, worked out once per config, GPU model and file: a fleet has
    thousands of nodes but a handful of each."""
    if isinstance(configs, str):
        return Layout(None, None, configs)
    # By the model's and file's ids, both kept beside the layout so that no id is reused.
    known: dict[tuple[str, int, int], tuple[Any, Layout | None]] = inp.memo(
        f"{MIG_LAYOUT_MISMATCH}.layouts", dict
    )
    key = (config, id(model), id(configs.configs))
    held = known.get(key)
    if held is None:
        layout = expected_layout(config, model, configs.configs)
        held = known[key] = ((model, configs), layout)
    return held[1]


def _asks(config: str, layout: Layout | None) -> str:
    """The config label as the summary quotes it, with the layout it means when known."""
    if layout is None:
        return f"{config} (expected layout unknown: not a standard config name)"
    if layout.devices is None:
        return f"{config} (expected layout unknown: {layout.note})"
    per_gpu = describe_counts(layout.devices) if layout.mig_enabled else "MIG disabled"
    return f"{config} ({per_gpu} per GPU)"


def _node_gpus(node: Node, ident: GpuIdentity, supply: Supply) -> list[Evidence]:
    """The node's MIG and GPU labels, its GPUs as identified, what it can allocate, and
    what its DRA driver publishes."""
    found = [
        label_evidence(node, LABEL_MIG_CONFIG),
        label_evidence(node, LABEL_MIG_CONFIG_STATE),
    ]
    for key in (LABEL_MIG_STRATEGY, LABEL_GPU_PRODUCT):
        if key in node.labels:
            found.append(label_evidence(node, key))
    model = ident.model.name if ident.model is not None else MODEL_UNKNOWN
    found.append(
        Evidence(
            None,
            "node",
            f"{ident.count if ident.count is not None else '?'} GPUs "
            f"({ident.count_from or 'count unknown'}), {model} ({ident.model_from})",
        )
    )
    found.extend(Evidence(None, "node", f"GPU identity doubt: {d}") for d in ident.doubts)
    allocatable = ", ".join(f"{k}={v}" for k, v in sorted(node.gpu_allocatable.items()))
    found.append(Evidence(None, "node", f"allocatable {allocatable or 'no GPU resources'}"))
    if supply.dra:
        found.append(supply.evidence(node))
    return found


def rule(inp: DiagnosisInput) -> list[Finding]:
    findings: list[Finding] = []
    for node in inp.gpu_nodes:
        if not node.mig_config or node.deleting is not None:
            continue
        if node.mig_config_state in MIG_STATES_IN_FLIGHT:
            continue  # mig-config-failed's (see the module docstring)
        if node.name in stack_down(inp):
            continue  # its plugin is down: gpu-stack-down's, the layout is not the cause
        finding = _node_finding(inp, node)
        if finding is not None:
            findings.append(finding)
    return findings
