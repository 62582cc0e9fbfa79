"""When automatic repair will replace a node for a failing condition, and who does it: one
answer for every rule (the NotReady, hardware and loop findings all print it).

- Karpenter (self-managed): the release's repair policies (type + status only), only with the
  NodeRepair feature gate on, held while the NodePool is over the 20% guard
  (kubernetes-sigs/karpenter pkg/controllers/node/health/controller.go). When the gate could
  not be read, repairs already seen in the pool prove it is on.
- EKS Auto Mode: the newest policies whatever a self-managed Karpenter runs, always on, held
  by the same 20% guard (EKS user guide node-repair.html); a node is Auto Mode's by its label
  or its NodeClaim's or NodePool's NodeClass (mignurse.diagnose.automode).
- Managed node groups: the group's `nodeRepairConfig` (overrides, thresholds) or, when it is
  not in the snapshot, the documented defaults, stated as conditional; repairs already seen
  in the group prove it is enabled (mignurse.diagnose.mng).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from mignurse.diagnose.automode import AUTO, repair_kind
from mignurse.diagnose.facts import REPAIR_TOLERATIONS, repair_allowance, unhealthy_for_repair
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.mng import DEFAULT_WAIT, NO_ACTION, default_action
from mignurse.diagnose.mng_repairs import mng_repairs
from mignurse.diagnose.replacements import replacements
from mignurse.diagnose.wording import human_duration
from mignurse.model import Node, format_time


@dataclass(frozen=True, slots=True)
class RepairOutlook:
    deadline: datetime | None  # when repair acts; None when it will not (or cannot be known)
    who: str  # who repairs, or why nothing will
    would_be: datetime | None = None  # the deadline if an unknown gate or setting is on
    action: str = ""  # Replace | Reboot | NoAction | "" (unknown)
    held_due: datetime | None = None  # the deadline a guard or threshold holds back for now

    def fate(self, now: datetime) -> str:
        """One phrase for an evidence line: "Karpenter repair replaces it at …"."""
        if self.deadline is not None:
            verb = "reboots" if self.action == "Reboot" else "replaces"
            return f"{self.who} {verb} it at {format_time(self.deadline)}"
        if self.would_be is not None:
            return f"{self.who}; if it is on, repair acts at {format_time(self.would_be)}"
        return self.who


def repair_outlook(inp: DiagnosisInput, node: Node, condition: str) -> RepairOutlook:
    cond = node.condition(condition)
    if cond is None:
        return RepairOutlook(None, f"no {condition} condition")
    if node.deleting is not None:
        return RepairOutlook(None, f"being deleted since {format_time(node.deleting)}")
    since = cond.last_transition
    kind = repair_kind(inp, node)
    if kind == "nodegroup":
        return _managed_node_group(inp, node, cond.type, cond.status, cond.reason, since)
    if kind == AUTO:
        return _auto_mode(inp, node, cond.type, cond.status, since)
    if kind != "nodepool":
        return RepairOutlook(None, "no Karpenter NodePool or node group: no automatic repair")
    toleration = inp.repair_tolerations.get((cond.type, cond.status))
    if toleration is None:
        release = f"Karpenter {inp.karpenter.version}" if inp.karpenter else "Karpenter"
        return RepairOutlook(None, f"{release} does not repair {cond.type}={cond.status}")
    if since is None:
        return RepairOutlook(None, f"{cond.type} has no transition time")
    due, toleration, first = earliest_repair(
        node, inp.repair_tolerations, since + toleration, toleration
    )
    gate = inp.karpenter.node_repair if inp.karpenter is not None else None
    if gate is False:
        return RepairOutlook(None, "Karpenter with NodeRepair=false: no automatic repair")
    if gate is None and not _repairs_seen(inp, node.pool):
        return RepairOutlook(
            None, "Karpenter (NodeRepair gate unknown: the Deployment was not read)", due
        )
    unhealthy, pool_size = pool_health(inp, node.pool, inp.repair_tolerations)
    allowance = repair_allowance(pool_size)
    if unhealthy > allowance:
        return RepairOutlook(
            None,
            f"Karpenter repair held by the 20% guard ({unhealthy} of {pool_size} nodes "
            f"unhealthy, {allowance} allowed); {_due_words(inp, due)}",
            held_due=due,
        )
    proof = "" if gate else " (NodeRepair evidently on: repairs seen in this pool)"
    return RepairOutlook(
        due,
        f"Karpenter repair ({human_duration(toleration)} toleration{first}){proof}",
        action="Replace",
    )


def earliest_repair(
    node: Node,
    tolerations: Mapping[tuple[str, str], timedelta],
    due: datetime,
    toleration: timedelta,
) -> tuple[datetime, timedelta, str]:
    """When repair acts on `node`, the condition a finding names being due at `due` after
    `toleration`: at the earliest deadline of all its conditions a repair policy matches, as
    Karpenter replaces it (findUnhealthyConditions, kubernetes-sigs/karpenter v1.8.3
    pkg/controllers/node/health/controller.go). With that deadline's toleration, and words
    naming its condition where it is not the finding's."""
    first = (due, toleration, "")
    for c in node.conditions:
        tolerated = tolerations.get((c.type, c.status))
        if tolerated is not None and c.last_transition is not None:
            at = c.last_transition + tolerated
            if at < first[0]:
                first = (at, tolerated, f" of {c.type}={c.status}")
    return first


def _auto_mode(
    inp: DiagnosisInput, node: Node, type_: str, status: str, since: datetime | None
) -> RepairOutlook:
    """Auto Mode: Karpenter's newest policies, always on, held by the 20% guard of the NodePool
    (of the cluster for a node outside any)."""
    toleration = REPAIR_TOLERATIONS.get((type_, status))
    if toleration is None:
        return RepairOutlook(None, f"EKS Auto Mode does not repair {type_}={status}")
    if since is None:
        return RepairOutlook(None, f"{type_} has no transition time")
    due, _, _ = earliest_repair(node, REPAIR_TOLERATIONS, since + toleration, toleration)
    unhealthy, pool_size = pool_health(inp, node.pool, REPAIR_TOLERATIONS)
    allowance = repair_allowance(pool_size)
    if unhealthy > allowance:
        return RepairOutlook(
            None,
            f"EKS Auto Mode repair held by the 20% guard ({unhealthy} of {pool_size} nodes "
            f"unhealthy, {allowance} allowed); {_due_words(inp, due)}",
            held_due=due,
        )
    return RepairOutlook(due, "EKS Auto Mode repair (always on)", action="Replace")


def pool_health(
    inp: DiagnosisInput, pool: str, tolerations: Mapping[tuple[str, str], timedelta]
) -> tuple[int, int]:
    """(nodes matching a repair policy now, nodes) of a pool, as a repair guard counts them:
    counted once per pool and set of policies, not once for each of its nodes."""
    # By the policies' id, the policies kept beside the count so that the id is never reused.
    counted: dict[tuple[str, int], tuple[Mapping[tuple[str, str], timedelta], int, int]] = inp.memo(
        "outlook.pool_health", dict
    )
    held = counted.get((pool, id(tolerations)))
    if held is None:
        members = inp.nodes_by_pool.get(pool, ())
        unhealthy = sum(1 for n in members if unhealthy_for_repair(n, tolerations))
        held = counted[(pool, id(tolerations))] = (tolerations, unhealthy, len(members))
    return held[1], held[2]


def _repairs_seen(inp: DiagnosisInput, pool: str) -> bool:
    repaired = inp.memo(
        "outlook.repaired_pools", lambda: {r.pool for r in replacements(inp) if r.cause == "repair"}
    )
    return pool in repaired


def _managed_node_group(
    inp: DiagnosisInput,
    node: Node,
    type_: str,
    status: str,
    reason: str,
    since: datetime | None,
) -> RepairOutlook:
    group = node.pool
    settings = inp.nodegroups.get(group)
    if settings is None:
        action = default_action(type_, status, reason)
        seen = (group, type_, status) in inp.memo(
            "outlook.mng_repaired_for",
            lambda: {
                (r.group, *r.unhealthy[:2]) for r in mng_repairs(inp) if r.unhealthy is not None
            },
        )
        if seen:
            # It has been replacing nodes for exactly this: enabled, and (for a reason the
            # defaults ignore) an override says Replace; the documented wait is the best guess.
            wait = action.wait or DEFAULT_WAIT.get(type_)
            return RepairOutlook(
                since + wait if since and wait else None,
                f"managed node group {group} repair (evidently on: nodes replaced for "
                f"{type_}={status}; nodeRepairConfig not in this snapshot)",
                action="Replace",
            )
        if action.action == NO_ACTION or action.wait is None or since is None:
            return RepairOutlook(
                None, f"managed node group {group} does not repair it: {action.source}"
            )
        return RepairOutlook(
            None,
            f"managed node group {group}: {action.action} after "
            f"{human_duration(action.wait)} if its node repair is enabled (nodeRepairConfig "
            "not in this snapshot)",
            since + action.wait,
            action.action,
        )
    action = settings.action(type_, status, reason)
    if action.action == NO_ACTION or action.wait is None or since is None:
        return RepairOutlook(
            None,
            f"managed node group {group} does not repair it: {action.source}",
            action=NO_ACTION,
        )
    unhealthy, group_size = pool_health(inp, group, REPAIR_TOLERATIONS)
    if not settings.threshold_allows(unhealthy, group_size):
        return RepairOutlook(
            None,
            f"managed node group {group}: repair held, {unhealthy} of {group_size} nodes "
            "unhealthy is over its threshold",
            held_due=since + action.wait,
        )
    return RepairOutlook(
        since + action.wait,
        f"managed node group {group} repair ({action.source})",
        action=action.action,
    )


def _due_words(inp: DiagnosisInput, due: datetime) -> str:
    return f"due {'since' if due <= inp.now else 'at'} {format_time(due)}"
