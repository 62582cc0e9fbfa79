"""EKS managed node group auto repair: what a node group's `nodeRepairConfig` does with a
node whose condition failed.

Unlike Karpenter, managed node groups read the condition's reason: the defaults take no
action for DCGM reasons, reboot or replace for the well-known XIDs, and replace for a
failed Ready or node monitoring agent condition after 30 minutes; `nodeRepairConfigOverrides`
change the action and the wait per (condition, reason). Repair is off unless `enabled` is
true, and pauses while more nodes are unhealthy than the threshold allows.

Sources: EKS API reference `API_NodeRepairConfig`, `API_NodeRepairConfigOverrides`
(docs.aws.amazon.com/eks/latest/APIReference/); EKS user guide "Automatically repair nodes
in EKS clusters" (docs.aws.amazon.com/eks/latest/userguide/node-repair.html) for the
default actions and waits; "Detect node health issues with the EKS node monitoring agent"
(docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html) for the per-reason actions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from mignurse.diagnose.facts import AHR, NMA_CONDITIONS, XID_REBOOT, XID_REPLACE, xid_of

REPLACE = "Replace"
REBOOT = "Reboot"
NO_ACTION = "NoAction"

# Default waits before acting, per condition (user guide node-repair, "Repair after").
DEFAULT_WAIT: dict[str, timedelta] = {
    "Ready": timedelta(minutes=30),
    AHR: timedelta(minutes=10),
    **{c: timedelta(minutes=30) for c in NMA_CONDITIONS},
}
# Without an explicit threshold, repair stops when the group has more than five nodes and
# more than 20% of them are unhealthy (user guide node-repair).
DEFAULT_THRESHOLD_NODES = 5
DEFAULT_THRESHOLD_FRACTION = 0.2
# The longest override wait read as such (about 190 years): any clock time plus it stays
# within datetime's calendar; no repair wait comes near it.
MAX_WAIT_MINUTES = 10**8
# AcceleratedHardwareReady reasons the defaults replace without an XID.
_REPLACE_REASONS = ("NvidiaDoubleBitError", "NvidiaNVLinkError", "Neuron")


@dataclass(frozen=True, slots=True)
class RepairOverride:
    condition: str
    reason: str
    wait: timedelta
    action: str


@dataclass(frozen=True, slots=True)
class MngAction:
    """What the node group does for one failing condition: the action, after how long, and
    where that came from (an override, or the documented default)."""

    action: str  # Replace | Reboot | NoAction
    wait: timedelta | None
    source: str


@dataclass(frozen=True)
class NodeGroupRepair:
    """One node group's repair settings, as `aws eks describe-nodegroup` returns them."""

    name: str
    cluster: str = ""
    enabled: bool = False
    overrides: tuple[RepairOverride, ...] = ()
    max_unhealthy_count: int | None = None
    max_unhealthy_percentage: int | None = None
    problems: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_describe(cls, raw: Mapping[str, Any]) -> NodeGroupRepair:
        """From `describe-nodegroup`'s document, or its `.nodegroup` member."""
        inner = raw.get("nodegroup")
        group: Mapping[str, Any] = inner if isinstance(inner, Mapping) else raw
        config = group.get("nodeRepairConfig")
        problems: list[str] = []
        overrides: list[RepairOverride] = []
        if not isinstance(config, Mapping):
            config = {}
        items = config.get("nodeRepairConfigOverrides") or []
        if not isinstance(items, list):
            problems.append(f"nodeRepairConfigOverrides {str(items)[:60]!r} is not a list")
            items = []
        for item in items:
            if not isinstance(item, Mapping):
                problems.append(f"override {str(item)[:60]!r} is not an object")
                continue
            condition = str(item.get("nodeMonitoringCondition") or "")
            reason = str(item.get("nodeUnhealthyReason") or "")
            wait = item.get("minRepairWaitTimeMins")
            minutes = _minutes(wait)
            if minutes is None:
                problems.append(
                    f"override {condition}/{reason}: minRepairWaitTimeMins "
                    f"{str(wait)[:30]!r} is no number of minutes (read as 0)"
                )
            overrides.append(
                RepairOverride(
                    condition=condition,
                    reason=reason,
                    wait=timedelta(minutes=minutes) if minutes is not None else timedelta(0),
                    action=str(item.get("repairAction") or ""),
                )
            )
        return cls(
            name=str(group.get("nodegroupName") or ""),
            cluster=str(group.get("clusterName") or ""),
            enabled=config.get("enabled") is True,
            overrides=tuple(overrides),
            max_unhealthy_count=_int_or_none(config.get("maxUnhealthyNodeThresholdCount")),
            max_unhealthy_percentage=_int_or_none(
                config.get("maxUnhealthyNodeThresholdPercentage")
            ),
            problems=tuple(problems),
            raw=dict(group),
        )

    def action(self, condition: str, status: str, reason: str) -> MngAction:
        """What repair does for `condition`=`status` with `reason` (it never acts when off)."""
        if not self.enabled:
            return MngAction(NO_ACTION, None, "its nodeRepairConfig is not enabled")
        for override in self.overrides:
            if override.condition == condition and override.reason == reason:
                return MngAction(
                    override.action,
                    override.wait,
                    f"override {condition}/{reason} → {override.action} after "
                    f"{int(override.wait.total_seconds() // 60)}m",
                )
        return default_action(condition, status, reason)

    def threshold_allows(self, unhealthy: int, nodes: int) -> bool:
        """Repair still acts with this many unhealthy nodes out of `nodes` (the thresholds
        are those "above which node auto repair actions will stop": API_NodeRepairConfig)."""
        if self.max_unhealthy_count is not None:
            return unhealthy <= self.max_unhealthy_count
        if self.max_unhealthy_percentage is not None:
            return unhealthy * 100 <= nodes * self.max_unhealthy_percentage
        return nodes <= DEFAULT_THRESHOLD_NODES or unhealthy <= math.floor(
            nodes * DEFAULT_THRESHOLD_FRACTION
        )


def default_action(condition: str, status: str, reason: str) -> MngAction:
    """The documented default for a node group with repair enabled and no override."""
    wait = DEFAULT_WAIT.get(condition)
    source = "the default"
    if condition == "Ready" and status in ("False", "Unknown"):
        return MngAction(REPLACE, wait, source)
    if condition in NMA_CONDITIONS and status == "False":
        return MngAction(REPLACE, wait, source)
    if condition != AHR or status != "False":
        return MngAction(NO_ACTION, None, f"the default does not repair {condition}={status}")
    if reason.startswith("DCGM"):
        return MngAction(NO_ACTION, None, "the default takes no action for DCGM reasons")
    xid = xid_of(reason) if reason.startswith("NvidiaXID") else None
    if xid in XID_REPLACE or reason.startswith(_REPLACE_REASONS):
        return MngAction(REPLACE, wait, source)
    if xid in XID_REBOOT:
        return MngAction(REBOOT, wait, source)
    return MngAction(
        NO_ACTION, None, f"the default lists no action for {reason or 'an empty reason'}"
    )


def _minutes(value: Any) -> float | None:
    """An override's minRepairWaitTimeMins (an integer of at least 1 from the EKS API), or
    None for what no wait can be: not a number, negative, NaN, or so long that a deadline
    after it leaves the calendar."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if 0 <= value <= MAX_WAIT_MINUTES else None


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def parse_nodegroups(document: Any) -> tuple[dict[str, NodeGroupRepair], list[str]]:
    """`cluster/nodegroups.json`: {"nodegroups": [describe-nodegroup .nodegroup, …]}, or a
    list of such documents, or one `describe-nodegroup` answer. Returns the groups by name
    and one line per entry that could not be read."""
    problems: list[str] = []
    if isinstance(document, Mapping) and isinstance(document.get("nodegroups"), list):
        items: list[Any] = list(document["nodegroups"])
    elif isinstance(document, Mapping) and isinstance(document.get("nodegroup"), Mapping):
        items = [document]
    elif isinstance(document, list):
        items = list(document)
    else:
        return {}, ['nodegroups.json holds no node groups ({"nodegroups": [...]})']
    groups: dict[str, NodeGroupRepair] = {}
    for item in items:
        if not isinstance(item, Mapping):
            problems.append(f"nodegroups.json: {str(item)[:60]!r} is not a node group")
            continue
        group = NodeGroupRepair.from_describe(item)
        if not group.name:
            problems.append("nodegroups.json: a node group without nodegroupName")
            continue
        groups[group.name] = group
        problems.extend(f"node group {group.name}: {p}" for p in group.problems)
    return groups, problems
