"""EKS managed node groups in the simulator: node auto repair decisions and the node
groups' `aws eks describe-nodegroup` documents.

Sources: EKS API reference API_NodeRepairConfig, API_NodeRepairConfigOverrides and the
Nodegroup shape (botocore data/eks/2017-11-01/service-2.json); EKS user guide
node-repair.adoc, node-health.adoc and node-health-nma.adoc (awsdocs/amazon-eks-user-guide
latest/ug/nodes/). Where the user guide is silent the choice is marked as an inference.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mignurse.sim import hardware, objects
from mignurse.sim.scenario_spec import NMA_CONDITIONS, NodeRepairSpec, PoolSpec, Scenario

REPLACE = "Replace"
REBOOT = "Reboot"
NO_ACTION = "NoAction"

# node-health-nma.adoc "NVIDIA XID error codes": the well-known XIDs and their default action.
XID_REBOOT = frozenset({13, 31, 48, 63, 64, 94, 95})
XID_REPLACE = frozenset({74, 79, 119, 120, 121, 140})
# node-repair.adoc "Repair after": AcceleratedHardwareReady 10m, the other conditions 30m.
WAIT_ACCELERATED = 600.0
WAIT_OTHER = 1800.0
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure")
_XID = re.compile(r"^NvidiaXID(\d+)Error$")


@dataclass(frozen=True)
class FailingCheck:
    """A node condition that MNG repair looks at, and what it would do about it."""

    condition: str
    status: str
    reason: str
    since: float  # the condition's lastTransitionTime
    action: str  # Replace | Reboot | NoAction
    wait: float  # seconds the condition must persist first

    @property
    def due(self) -> float:
        return self.since + self.wait


def failing(condition: str, status: str) -> bool:
    """A failed health check: Ready not True, or an NMA condition False; pressure never."""
    if condition in PRESSURE:
        return False
    if condition == "Ready":
        return status in ("False", "Unknown")
    return condition in NMA_CONDITIONS and status == "False"


def default_action(condition: str, reason: str) -> tuple[str, float]:
    """The documented default for a failed check (node-health.adoc, node-health-nma.adoc)."""
    if condition != "AcceleratedHardwareReady":
        return REPLACE, WAIT_OTHER  # Ready and the other NMA conditions: Replace after 30m
    if reason.startswith("DCGM"):
        return NO_ACTION, WAIT_ACCELERATED  # DCGM diagnostic and monitoring errors: None
    match = _XID.match(reason)
    if match and int(match[1]) in XID_REBOOT:
        return REBOOT, WAIT_ACCELERATED
    # XID replace list, NvidiaDoubleBitError, NvidiaNVLinkError, Neuron*: Replace; any other
    # AcceleratedHardwareReady reason is not listed, Replace is assumed (inference).
    return REPLACE, WAIT_ACCELERATED


def resolve(config: NodeRepairSpec, condition: str, reason: str) -> tuple[str, float]:
    """An override matching condition and reason wins; else the default."""
    for override in config.overrides:
        if (override.node_monitoring_condition, override.node_unhealthy_reason) == (
            condition,
            reason,
        ):
            return override.repair_action, override.min_repair_wait_time_mins * 60.0
    return default_action(condition, reason)


def checks(config: NodeRepairSpec, conditions: list[dict[str, Any]]) -> list[FailingCheck]:
    """Every failed check on a node, with the action configured for it."""
    out = []
    for c in conditions:
        if not failing(c["type"], c["status"]):
            continue
        action, wait = resolve(config, c["type"], c.get("reason", ""))
        since = datetime.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
        out.append(
            FailingCheck(
                c["type"],
                c["status"],
                c.get("reason", ""),
                since.replace(tzinfo=UTC).timestamp(),
                action,
                wait,
            )
        )
    return out


def next_repair(config: NodeRepairSpec, conditions: list[dict[str, Any]]) -> FailingCheck | None:
    """The failed check that acts first (Replace or Reboot), if any."""
    actionable = [c for c in checks(config, conditions) if c.action != NO_ACTION]
    return min(actionable, key=lambda c: c.due) if actionable else None


def halted(config: NodeRepairSpec, nodes: int, unhealthy: int) -> bool:
    """Repairs stop above the unhealthy threshold; without one, above 20% in a group of
    more than five nodes (node-health.adoc)."""
    if config.max_unhealthy_count is not None:
        return unhealthy > config.max_unhealthy_count
    if config.max_unhealthy_percentage is not None:
        return unhealthy * 100 > config.max_unhealthy_percentage * nodes
    return nodes > 5 and unhealthy * 100 > 20 * nodes


def parallel_limit(config: NodeRepairSpec, unhealthy: int) -> int | None:
    """How many repairs may run at once; None: no documented default (inference)."""
    if config.max_parallel_count is not None:
        return config.max_parallel_count
    if config.max_parallel_percentage is not None:
        return max(1, math.ceil(config.max_parallel_percentage * unhealthy / 100))
    return None


# --------------------------------------------------------------------------- describe-nodegroup


def account_id(scenario: Scenario) -> str:
    return str(int(objects.stable_hex("account", scenario.cluster_name, length=12), 16))[
        -12:
    ].zfill(12)


def ami_type(pool: PoolSpec) -> str:
    if pool.ami_type:
        return pool.ami_type
    it = hardware.instance_type(pool.instance_type)
    arch = "ARM_64" if it.arch == "arm64" else "x86_64"
    if hardware.os_image(pool.os).family == "bottlerocket":
        return f"BOTTLEROCKET_{arch}" + ("_NVIDIA" if it.gpu else "")
    return f"AL2023_{arch}_" + ("NVIDIA" if it.gpu else "STANDARD")


def release_version(scenario: Scenario, pool: PoolSpec) -> str:
    """`<kubernetes>.<patch>-<date>` as EKS optimized AMI releases are named (inference for
    the patch and date when the scenario does not give one)."""
    return pool.release_version or f"{scenario.kubernetes_version}.3-20250403"


def _api_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="microseconds")


_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
}


def _taint(key: str, value: str | None, effect: str) -> dict[str, str]:
    out = {"key": key}
    if value is not None:
        out["value"] = value
    out["effect"] = _EFFECTS[effect]
    return out


def describe_nodegroup(scenario: Scenario, pool: PoolSpec, created: float) -> dict[str, Any]:
    """`aws eks describe-nodegroup` output for one scenario node group: `{"nodegroup": {...}}`
    with the members of the EKS Nodegroup shape that a launch-template-less group has."""
    if pool.kind != "nodegroup":
        raise ValueError(f"{pool.name} is a Karpenter NodePool, not a managed node group")
    account = account_id(scenario)
    group_id = objects.stable_uuid("nodegroup", scenario.cluster_name, pool.name)
    it = hardware.instance_type(pool.instance_type)
    subnets = [
        "subnet-0" + objects.stable_hex("subnet", scenario.cluster_name, zone, length=16)
        for zone in pool.zones
    ]
    nodegroup: dict[str, Any] = {
        "nodegroupName": pool.name,
        "nodegroupArn": f"arn:aws:eks:{scenario.region}:{account}:nodegroup/"
        f"{scenario.cluster_name}/{pool.name}/{group_id}",
        "clusterName": scenario.cluster_name,
        "version": scenario.kubernetes_version,
        "releaseVersion": release_version(scenario, pool),
        "createdAt": _api_time(created),
        "modifiedAt": _api_time(created),
        "status": "ACTIVE",
        "capacityType": "SPOT" if pool.capacity_type == "spot" else "ON_DEMAND",
        "scalingConfig": {
            "minSize": 0,
            "maxSize": max(pool.nodes * 2, 1),
            "desiredSize": pool.nodes,
        },
        "instanceTypes": [it.name],
        "subnets": subnets,
        "amiType": ami_type(pool),
        "nodeRole": f"arn:aws:iam::{account}:role/{scenario.cluster_name}-node",
        "labels": dict(pool.labels),
        "taints": [_taint(t.key, t.value, t.effect) for t in pool.taints],
        "resources": {"autoScalingGroups": [{"name": f"eks-{pool.name}-{group_id}"}]},
        "diskSize": 20,
        "health": {"issues": []},
        "updateConfig": {"maxUnavailable": 1},
        "tags": {},
    }
    if pool.node_repair is not None:
        nodegroup["nodeRepairConfig"] = pool.node_repair.to_api()
    return {"nodegroup": nodegroup}


def describe_nodegroups(scenario: Scenario, created: float) -> list[dict[str, Any]]:
    """One describe-nodegroup document per node group of the scenario."""
    return [
        describe_nodegroup(scenario, p, created) for p in scenario.pools if p.kind == "nodegroup"
    ]
