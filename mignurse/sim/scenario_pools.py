"""Parsing a scenario's pools: Karpenter NodePools and EKS managed node groups.

A pool names its instance type, OS and image, its MIG layout and how GPUs are scheduled
(device plugin or DRA), its taints and labels, the lifecycles its nodes go through, the nodes
it already has, its disruption settings (consolidation, budgets, limits), its workload and,
for a managed node group, its `nodeRepairConfig`, release and AMI type. Every value is
checked against the instance type it runs on. See docs/scenarios.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from mignurse.sim import hardware, objects
from mignurse.sim.scenario_fields import DNS_1123_NAME, ParseContext, empty_mapping
from mignurse.sim.scenario_spec import (
    ExistingNodes,
    LifecycleScript,
    NodeRepairSpec,
    PoolSpec,
    RepairOverride,
    TaintSpec,
    WorkloadSpec,
    format_duration,
)
from mignurse.sim.scenario_steps import parse_steps, parse_taint
from mignurse.yamlfile import LDict

if TYPE_CHECKING:
    from mignurse.sim.operator_config import MigFiles

_POOL = {
    "name",
    "instanceType",
    "capacityType",
    "zones",
    "os",
    "image",
    "nodes",
    "nodeMonitoringAgent",
    "mig",
    "taints",
    "labels",
    "launchAfter",
    "registerAfter",
    "replacementDelay",
    "terminationGracePeriod",
    "expireAfter",
    "consolidation",
    "budgets",
    "limits",
    "nodeClass",
    "daemonSets",
    "existing",
    "lifecycle",
    "lifecycles",
    "workload",
    "nodeRepairConfig",
    "releaseVersion",
    "amiType",
    "gpuScheduling",
    "draDriver",
}
_NODEGROUP_ONLY = ("nodeRepairConfig", "releaseVersion", "amiType")
_REPAIR_CONFIG = {
    "enabled",
    "maxUnhealthyNodeThresholdCount",
    "maxUnhealthyNodeThresholdPercentage",
    "maxParallelNodesRepairedCount",
    "maxParallelNodesRepairedPercentage",
    "nodeRepairConfigOverrides",
}
_REPAIR_OVERRIDE = {
    "nodeMonitoringCondition",
    "nodeUnhealthyReason",
    "minRepairWaitTimeMins",
    "repairAction",
}
_REPAIR_ACTIONS = ("Replace", "Reboot", "NoAction")
_AMI_TYPES = (  # botocore data/eks/2017-11-01 AMITypes (Linux ones)
    "AL2_x86_64",
    "AL2_x86_64_GPU",
    "AL2_ARM_64",
    "CUSTOM",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64_FIPS",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NEURON",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
)


def _parse_node_repair(ctx: ParseContext, raw: Any, where: str, line: int) -> NodeRepairSpec:
    """`nodeRepairConfig` exactly as the EKS API shapes it (API_NodeRepairConfig)."""
    d = ctx.mapping(raw, where, line, _REPAIR_CONFIG)
    bounded: dict[str, int | None] = {}
    for key in sorted(_REPAIR_CONFIG - {"enabled", "nodeRepairConfigOverrides"}):
        value = d.get(key)
        if value is None:
            bounded[key] = None
            continue
        top = 100 if key.endswith("Percentage") else None
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < 1
            or (top is not None and value > top)
        ):
            span = "1 to 100" if top else ">= 1"
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key} must be an integer {span}")
        bounded[key] = value
    for stem in ("maxUnhealthyNodeThreshold", "maxParallelNodesRepaired"):
        if bounded[stem + "Count"] is not None and bounded[stem + "Percentage"] is not None:
            raise ctx.fail(
                ctx.line_of(d, stem + "Percentage"),
                f"{where}: set {stem}Count or {stem}Percentage, not both",
            )
    overrides = []
    seq = ctx.seq(
        d.get("nodeRepairConfigOverrides"),
        f"{where}.nodeRepairConfigOverrides",
        ctx.line_of(d, "nodeRepairConfigOverrides"),
    )
    for i, item in enumerate(seq):
        o_where = f"{where}.nodeRepairConfigOverrides[{i}]"
        o = ctx.mapping(item, o_where, seq.item_lines[i], _REPAIR_OVERRIDE)
        for key in sorted(_REPAIR_OVERRIDE):
            ctx.required(o, key, o_where)  # the API wants all four fields of an override
        action = ctx.string(o, "repairAction", o_where)
        if action not in _REPAIR_ACTIONS:
            raise ctx.fail(
                ctx.line_of(o, "repairAction"),
                f"{o_where}.repairAction must be one of {', '.join(_REPAIR_ACTIONS)}",
            )
        overrides.append(
            RepairOverride(
                node_monitoring_condition=ctx.string(o, "nodeMonitoringCondition", o_where),
                node_unhealthy_reason=ctx.string(o, "nodeUnhealthyReason", o_where),
                min_repair_wait_time_mins=ctx.integer(
                    o, "minRepairWaitTimeMins", o_where, 0, minimum=1
                ),
                repair_action=action,
            )
        )
    return NodeRepairSpec(
        enabled=ctx.boolean(d, "enabled", where, False),
        max_unhealthy_count=bounded["maxUnhealthyNodeThresholdCount"],
        max_unhealthy_percentage=bounded["maxUnhealthyNodeThresholdPercentage"],
        max_parallel_count=bounded["maxParallelNodesRepairedCount"],
        max_parallel_percentage=bounded["maxParallelNodesRepairedPercentage"],
        overrides=tuple(overrides),
    )


def parse_pool(
    ctx: ParseContext,
    raw: Any,
    where: str,
    line: int,
    kind: str,
    *,
    mig_files: MigFiles | None = None,
) -> PoolSpec:
    """One pool; its MIG config is checked against the layouts of `mig_files` (the file the
    cluster's ClusterPolicy names; None or no ClusterPolicy: NVIDIA's built-in file)."""
    d = ctx.mapping(raw, where, line, _POOL)
    name = ctx.string(d, "name", where)
    if not DNS_1123_NAME.match(name):
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name {name!r} is not a DNS-1123 name")
    where = f"{where} ({name})"
    if kind != "nodegroup":
        for key in _NODEGROUP_ONLY:
            if key in d:
                raise ctx.fail(ctx.line_of(d, key), f"{where}: {key} is for nodeGroups only")
    itype, it = _parse_instance_type(ctx, d, where)
    os_name, capacity_type, zones = _parse_placement(ctx, d, where)
    layouts = mig_files.layouts(it.gpu) if mig_files is not None else None
    if layouts is None:
        layouts = it.gpu.mig_layouts if it.gpu is not None else {}
    gpu = _parse_gpu(ctx, d, where, itype, it, layouts)
    taints = _parse_pool_taints(ctx, d, where, it)
    image = ctx.string(d, "image", where, _default_ami(name, os_name))
    lifecycles = _parse_lifecycles(ctx, d, where)
    existing = _parse_existing(ctx, d, where)
    nodes = ctx.integer(d, "nodes", where, sum(e.count for e in existing))
    if sum(e.count for e in existing) > nodes:
        raise ctx.fail(
            ctx.line_of(d, "existing"), f"{where}: more existing nodes than `nodes: {nodes}`"
        )
    consolidation, policy = _parse_consolidation(ctx, d, where)
    budgets = _parse_budgets(ctx, d, where)
    register_after = ctx.duration(d, "registerAfter", where, 45.0)
    _check_steps_after_registration(ctx, lifecycles, register_after, where)
    tgp = d.get("terminationGracePeriod")
    workload = _parse_workload(
        ctx,
        d.get("workload"),
        f"{where}.workload",
        ctx.line_of(d, "workload"),
        name,
        it,
        gpu.mig_config,
        gpu.mig_strategy,
        gpu.scheduling == "dra",
        layouts,
    )
    return PoolSpec(
        kind=kind,
        name=name,
        instance_type=itype,
        capacity_type=capacity_type,
        zones=zones,
        os=os_name,
        image=image,
        nodes=nodes,
        node_monitoring_agent=ctx.boolean(d, "nodeMonitoringAgent", where, True),
        mig_config=gpu.mig_config,
        mig_strategy=gpu.mig_strategy,
        taints=taints,
        labels=tuple(ctx.str_map(d, "labels", where).items()),
        launch_after=ctx.duration(d, "launchAfter", where, 5.0),
        register_after=register_after,
        replacement_delay=ctx.duration(d, "replacementDelay", where, 5.0),
        termination_grace_period=None
        if tgp is None
        else ctx.duration(d, "terminationGracePeriod", where, None),
        expire_after=ctx.string(d, "expireAfter", where, "720h"),
        consolidation_policy=policy,
        consolidate_after=ctx.string(consolidation, "after", f"{where}.consolidation", "1m"),
        budgets=budgets,
        nodeclass=ctx.string(d, "nodeClass", where, "default" if it.gpu is None else "gpu"),
        daemonsets=ctx.boolean(d, "daemonSets", where, True),
        existing=existing,
        lifecycles=lifecycles,
        workload=workload,
        line=line,
        **_parse_nodegroup_fields(ctx, d, where, kind),
        gpu_scheduling=gpu.scheduling,
        mig_applied_by=gpu.applied_by,
        **_parse_dra_driver(ctx, d, where, gpu.scheduling),
    )


def _parse_dra_driver(ctx: ParseContext, d: LDict, where: str, scheduling: str) -> dict[str, Any]:
    """`draDriver`: the DRA driver chart's `featureGates` (a `Name=bool,…` string) and
    `selectorLabelsOverride` (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1
    deployments/helm/dra-driver-nvidia-gpu/values.yaml)."""
    if d.get("draDriver") is None:
        return {}
    line = ctx.line_of(d, "draDriver")
    if scheduling != "dra":
        raise ctx.fail(line, f"{where}.draDriver needs gpuScheduling: dra")
    chart = ctx.mapping(
        d["draDriver"], f"{where}.draDriver", line, {"featureGates", "selectorLabelsOverride"}
    )
    override = ctx.str_map(chart, "selectorLabelsOverride", f"{where}.draDriver")
    return {
        "dra_feature_gates": ctx.string(chart, "featureGates", f"{where}.draDriver", ""),
        "dra_selector_labels": tuple(override.items()) if override else None,
    }


def _parse_instance_type(
    ctx: ParseContext, d: LDict, where: str
) -> tuple[str, hardware.InstanceType]:
    itype = ctx.string(d, "instanceType", where)
    try:
        return itype, hardware.instance_type(itype)
    except KeyError:
        known = ", ".join(sorted(hardware.INSTANCE_TYPES))
        raise ctx.fail(
            ctx.line_of(d, "instanceType"), f"unknown instanceType {itype!r}; known: {known}"
        ) from None


def _parse_placement(ctx: ParseContext, d: LDict, where: str) -> tuple[str, str, tuple[str, ...]]:
    """The pool's OS, capacity type and zones."""
    os_name = ctx.string(d, "os", where, "al2023")
    if os_name not in hardware.OS_IMAGES:
        raise ctx.fail(
            ctx.line_of(d, "os"), f"{where}.os must be one of {', '.join(hardware.OS_IMAGES)}"
        )
    capacity_type = ctx.string(d, "capacityType", where, "on-demand")
    if capacity_type not in ("on-demand", "spot", "reserved"):
        raise ctx.fail(
            ctx.line_of(d, "capacityType"),
            f"{where}.capacityType must be on-demand, spot or reserved",
        )
    zones = tuple(
        str(z) for z in ctx.seq(d.get("zones"), f"{where}.zones", ctx.line_of(d, "zones"))
    ) or ("us-west-2a", "us-west-2b", "us-west-2c")
    return os_name, capacity_type, zones


class _Gpu(NamedTuple):
    """How a pool's GPUs are partitioned (`mig`) and scheduled (`gpuScheduling`)."""

    mig_config: str | None
    mig_strategy: str
    applied_by: str
    scheduling: str


def _parse_gpu(
    ctx: ParseContext,
    d: LDict,
    where: str,
    itype: str,
    it: hardware.InstanceType,
    layouts: Mapping[str, dict[str, int]],
) -> _Gpu:
    mig = ctx.mapping(
        d.get("mig") or empty_mapping(ctx.line_of(d, "mig")),
        f"{where}.mig",
        ctx.line_of(d, "mig"),
        {"config", "strategy", "appliedBy"},
    )
    mig_config = None if mig.get("config") is None else str(mig["config"])
    applied_by = ctx.string(mig, "appliedBy", f"{where}.mig", "mig-manager")
    if applied_by not in ("mig-manager", "userdata"):
        raise ctx.fail(
            ctx.line_of(mig, "appliedBy"), f"{where}.mig.appliedBy must be mig-manager or userdata"
        )
    if applied_by == "userdata" and mig_config is None:
        raise ctx.fail(ctx.line_of(mig, "appliedBy"), f"{where}.mig.appliedBy needs a config")
    gpu_scheduling = ctx.string(d, "gpuScheduling", where, "device-plugin")
    if gpu_scheduling not in ("device-plugin", "dra"):
        raise ctx.fail(
            ctx.line_of(d, "gpuScheduling"), f"{where}.gpuScheduling must be device-plugin or dra"
        )
    if gpu_scheduling == "dra" and it.gpu is None:
        raise ctx.fail(ctx.line_of(d, "gpuScheduling"), f"{where}: {itype} has no GPU for DRA")
    mig_strategy = ctx.string(mig, "strategy", f"{where}.mig", "mixed")
    if mig_strategy not in ("mixed", "single", "none"):
        raise ctx.fail(
            ctx.line_of(mig, "strategy"), f"{where}.mig.strategy must be mixed, single or none"
        )
    if mig_config is not None:
        if it.gpu is None or not it.gpu.mig_capable:
            raise ctx.fail(ctx.line_of(d, "mig"), f"{where}: {itype} is not MIG-capable")
        if mig_config != "all-disabled" and mig_config not in layouts:
            known = ", ".join(["all-disabled", *layouts])
            raise ctx.fail(
                ctx.line_of(mig, "config"),
                f"{where}.mig.config {mig_config!r} is not valid for {it.gpu.product}; "
                f"known: {known}",
            )
    return _Gpu(mig_config, mig_strategy, applied_by, gpu_scheduling)


def _parse_pool_taints(
    ctx: ParseContext, d: LDict, where: str, it: hardware.InstanceType
) -> tuple[TaintSpec, ...]:
    """The pool's `taints`, or by default the GPU taint on a GPU instance type."""
    if "taints" in d:
        return tuple(
            parse_taint(ctx, t, f"{where}.taints[{i}]", ctx.line_of(d, "taints"))
            for i, t in enumerate(ctx.seq(d["taints"], f"{where}.taints", ctx.line_of(d, "taints")))
        )
    if it.gpu is not None:
        return (TaintSpec("nvidia.com/gpu", "NoSchedule", "true"),)
    return ()


def _parse_lifecycles(ctx: ParseContext, d: LDict, where: str) -> tuple[LifecycleScript, ...]:
    """`lifecycle` (every image) then `lifecycles` (one per image), in the file's order."""
    lifecycles: list[LifecycleScript] = []
    if "lifecycle" in d:
        lifecycles.append(
            LifecycleScript(
                None,
                parse_steps(ctx, d["lifecycle"], f"{where}.lifecycle", ctx.line_of(d, "lifecycle")),
            )
        )
    lcs = ctx.seq(d.get("lifecycles"), f"{where}.lifecycles", ctx.line_of(d, "lifecycles"))
    for i, lc_raw in enumerate(lcs):
        lc_where = f"{where}.lifecycles[{i}]"
        lc = ctx.mapping(lc_raw, lc_where, lcs.item_lines[i], {"image", "steps", "gpuResources"})
        lifecycles.append(
            LifecycleScript(
                None if lc.get("image") is None else str(lc["image"]),
                parse_steps(
                    ctx,
                    ctx.required(lc, "steps", lc_where),
                    f"{lc_where}.steps",
                    ctx.line_of(lc, "steps"),
                ),
                ctx.boolean(lc, "gpuResources", lc_where, True),
            )
        )
    return tuple(lifecycles)


def _parse_existing(ctx: ParseContext, d: LDict, where: str) -> tuple[ExistingNodes, ...]:
    """The nodes a pool already has when the scenario starts, by age."""
    existing: list[ExistingNodes] = []
    ex_seq = ctx.seq(d.get("existing"), f"{where}.existing", ctx.line_of(d, "existing"))
    for i, ex_raw in enumerate(ex_seq):
        ex_where = f"{where}.existing[{i}]"
        ex = ctx.mapping(
            ex_raw,
            ex_where,
            ex_seq.item_lines[i],
            {"count", "age", "image", "os", "labels", "steps", "names"},
        )
        ex_os = None if ex.get("os") is None else str(ex["os"])
        if ex_os is not None and ex_os not in hardware.OS_IMAGES:
            raise ctx.fail(
                ctx.line_of(ex, "os"),
                f"{ex_where}.os must be one of {', '.join(hardware.OS_IMAGES)}",
            )
        names = tuple(
            str(n) for n in ctx.seq(ex.get("names"), f"{ex_where}.names", ctx.line_of(ex, "names"))
        )
        count = ctx.integer(ex, "count", ex_where, len(names) or 1, minimum=1)
        if names and len(names) != count:
            raise ctx.fail(
                ctx.line_of(ex, "names"), f"{ex_where}: {len(names)} names for count {count}"
            )
        existing.append(
            ExistingNodes(
                count=count,
                age=ctx.duration(ex, "age", ex_where, None),
                image=None if ex.get("image") is None else str(ex["image"]),
                os=ex_os,
                labels=tuple(ctx.str_map(ex, "labels", ex_where).items()),
                steps=parse_steps(ctx, ex["steps"], f"{ex_where}.steps", ctx.line_of(ex, "steps"))
                if "steps" in ex
                else None,
                names=names,
            )
        )
    return tuple(existing)


def _parse_consolidation(ctx: ParseContext, d: LDict, where: str) -> tuple[LDict, str]:
    """The `consolidation` mapping (its `after` is read with the pool's other settings) and
    its checked policy."""
    consolidation = ctx.mapping(
        d.get("consolidation") or empty_mapping(ctx.line_of(d, "consolidation")),
        f"{where}.consolidation",
        ctx.line_of(d, "consolidation"),
        {"policy", "after"},
    )
    policy = ctx.string(
        consolidation, "policy", f"{where}.consolidation", "WhenEmptyOrUnderutilized"
    )
    if policy not in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"):
        raise ctx.fail(
            ctx.line_of(consolidation, "policy"),
            f"{where}.consolidation.policy must be WhenEmpty, WhenEmptyOrUnderutilized or Balanced",
        )
    return consolidation, policy


def _parse_budgets(
    ctx: ParseContext, d: LDict, where: str
) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """Disruption budgets as written, or Karpenter's default `nodes: 10%`."""
    budgets_raw = ctx.seq(d.get("budgets"), f"{where}.budgets", ctx.line_of(d, "budgets"))
    budgets = []
    for i, b in enumerate(budgets_raw):
        bd = ctx.mapping(
            b,
            f"{where}.budgets[{i}]",
            budgets_raw.item_lines[i],
            {"nodes", "reasons", "schedule", "duration"},
        )
        budgets.append(
            tuple((k, list(v) if isinstance(v, list) else str(v)) for k, v in bd.items())
        )
    if not budgets:
        budgets.append((("nodes", "10%"),))
    return tuple(budgets)


def _check_steps_after_registration(
    ctx: ParseContext, lifecycles: tuple[LifecycleScript, ...], register_after: float, where: str
) -> None:
    for parsed in lifecycles:
        for step in parsed.steps:
            if step.after < register_after:
                raise ctx.fail(
                    step.line,
                    f"{where}: lifecycle step at {format_duration(step.after)} comes before "
                    f"the node registers ({format_duration(register_after)})",
                )


def _parse_nodegroup_fields(ctx: ParseContext, d: LDict, where: str, kind: str) -> dict[str, Any]:
    """`nodeRepairConfig`, `releaseVersion` and `amiType` (managed node groups), and `limits`
    (NodePools), as `PoolSpec` keywords."""
    return {
        "node_repair": None
        if d.get("nodeRepairConfig") is None
        else _parse_node_repair(
            ctx,
            d["nodeRepairConfig"],
            f"{where}.nodeRepairConfig",
            ctx.line_of(d, "nodeRepairConfig"),
        ),
        "release_version": None
        if d.get("releaseVersion") is None
        else ctx.string(d, "releaseVersion", where),
        "ami_type": _parse_ami_type(ctx, d, where),
        "limits": None if d.get("limits") is None else _parse_limits(ctx, d, where, kind),
    }


def _parse_limits(
    ctx: ParseContext, d: LDict, where: str, kind: str
) -> tuple[tuple[str, str], ...]:
    """NodePool `spec.limits`: resource name → quantity (`nvidia.com/gpu: 16`, `cpu: 1000`)."""
    if kind != "nodepool":
        raise ctx.fail(ctx.line_of(d, "limits"), f"{where}: limits is for nodePools only")
    limits = ctx.str_map(d, "limits", where)
    for name, value in limits.items():
        if not re.match(r"^[0-9.]+(m|k|Ki|Mi|Gi|Ti|M|G|T)?$", value):
            raise ctx.fail(
                ctx.line_of(d, "limits"), f"{where}.limits.{name} {value!r} is not a quantity"
            )
    return tuple(sorted(limits.items()))


def _parse_ami_type(ctx: ParseContext, d: LDict, where: str) -> str | None:
    if d.get("amiType") is None:
        return None
    ami_type = ctx.string(d, "amiType", where)
    if ami_type not in _AMI_TYPES:
        raise ctx.fail(
            ctx.line_of(d, "amiType"), f"{where}.amiType must be one of {', '.join(_AMI_TYPES)}"
        )
    return ami_type


def _parse_workload(
    ctx: ParseContext,
    raw: Any,
    where: str,
    line: int,
    pool: str,
    it: hardware.InstanceType,
    mig_config: str | None,
    mig_strategy: str,
    dra: bool = False,
    layouts: Mapping[str, dict[str, int]] | None = None,
) -> WorkloadSpec | None:
    if raw is None:
        return None
    allowed = {
        "name", "namespace", "podsPerNode", "image", "resource", "perPod", "pdb", "replicas",
        "profile",
    }  # fmt: skip
    d = ctx.mapping(raw, where, line, allowed)
    if layouts is None and it.gpu is not None:
        layouts = it.gpu.mig_layouts
    layout = layouts.get(mig_config or "", {}) if layouts is not None and mig_config else {}
    default_profile: str | None = None
    if it.gpu is None:
        default_resource = None
    elif dra:
        # the DeviceClasses of the NVIDIA DRA driver's chart (k8s-dra-driver-gpu@v25.8.0
        # deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-{gpu,mig}.yaml)
        default_resource = "mig.nvidia.com" if layout else "gpu.nvidia.com"
        default_profile = sorted(layout)[0] if layout else None
    else:
        res = hardware.mig_resources(it, mig_config, mig_strategy, layouts)
        default_resource = sorted(res)[0] if res else "nvidia.com/gpu"
    pdb = d.get("pdb")
    min_av: int | str | None = None
    max_un: int | str | None = None
    if pdb is not None:
        pd = ctx.mapping(
            pdb, f"{where}.pdb", ctx.line_of(d, "pdb"), {"minAvailable", "maxUnavailable"}
        )
        min_av, max_un = pd.get("minAvailable"), pd.get("maxUnavailable")
        if (min_av is None) == (max_un is None):
            raise ctx.fail(
                pd.line, f"{where}.pdb needs exactly one of minAvailable, maxUnavailable"
            )
    resource = d.get("resource", default_resource)
    profile = d.get("profile", default_profile if resource == "mig.nvidia.com" else None)
    if dra and resource not in ("gpu.nvidia.com", "mig.nvidia.com"):
        raise ctx.fail(
            ctx.line_of(d, "resource"),
            f"{where}.resource on a DRA pool is a DeviceClass: gpu.nvidia.com or mig.nvidia.com",
        )
    if profile is not None and (not dra or resource != "mig.nvidia.com"):
        raise ctx.fail(ctx.line_of(d, "profile"), f"{where}.profile goes with mig.nvidia.com")
    if dra and resource == "mig.nvidia.com" and (profile is None or str(profile) not in layout):
        known = ", ".join(sorted(layout)) or "none: the pool has no MIG layout"
        raise ctx.fail(
            ctx.line_of(d, "profile" if "profile" in d else "resource"),
            f"{where}.profile {profile!r} is not in the pool's MIG layout ({known})",
        )
    return WorkloadSpec(
        name=ctx.string(d, "name", where, pool),
        namespace=ctx.string(d, "namespace", where, "default"),
        pods_per_node=ctx.integer(d, "podsPerNode", where, 1),
        image=ctx.string(
            d,
            "image",
            where,
            "docker.io/vllm/vllm-openai:v0.8.4" if it.gpu else "docker.io/library/busybox:1.37.0",
        ),
        resource=None if resource is None else str(resource),
        per_pod=ctx.integer(d, "perPod", where, 1, minimum=1),
        pdb_min_available=min_av,
        pdb_max_unavailable=max_un,
        replicas=None if d.get("replicas") is None else ctx.integer(d, "replicas", where, 0),
        profile=None if profile is None else str(profile),
    )


def _default_ami(pool: str, os_name: str) -> str:
    return "ami-0" + objects.stable_hex("ami", pool, os_name, length=16)
