"""The repair-deadline radar: every GPU node whose automatic repair acts within a horizon,
soonest first, with what the diagnosis says of it and the one thing to do before repair
replaces the instance and its evidence with it.

When repair acts, and who acts, is `outlook.repair_outlook`'s answer for each of the node's
conditions that a repair policy matches (Karpenter's policies at the release the controller
runs, EKS Auto Mode's, a managed node group's `nodeRepairConfig`); the earliest one counts.
A node is on the radar when that deadline falls within the horizon (or has passed: repair is
due at the controller's next pass), when it would fall there if a setting that could not be
read is on (`conditional`), or when a guard holds it back (the 20% guard, a node group's
threshold: `held`), since it fires the moment the guard lets go.

The one action (`act`), in the order an on-call engineer needs it:
- `pause` when the node's finding says repair itself is what goes wrong (a repair loop, a
  replacement that inherits the fault): pause-node-repair, before it replaces another;
- `collect` when nothing was collected from the node yet: the instance, its journals and its
  GPU state go with the repair;
- `cordon` otherwise: keep new work off it until repair replaces it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mignurse.diagnose.facts import REPAIR_TOLERATIONS
from mignurse.diagnose.findings import ID_ORDER, RUNBOOK_PAUSE_REPAIR, SEVERITY_ORDER, Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.outlook import RepairOutlook, repair_outlook
from mignurse.model import Node, format_time

DEFAULT_HORIZON = timedelta(hours=1)

FIRES, CONDITIONAL, HELD = "fires", "conditional", "held"
STATE_ORDER = {FIRES: 0, CONDITIONAL: 1, HELD: 2}  # how sure: those that fire first
PAUSE, COLLECT, CORDON = "pause", "collect", "cordon"


@dataclass(frozen=True, slots=True)
class Blip:
    """One node on the radar."""

    node: str
    pool: str
    condition: str  # the condition whose repair comes first: "AcceleratedHardwareReady=False"
    since: datetime | None  # when that condition took its status
    due: datetime  # when repair acts (or would, or will once the guard lets go)
    state: str  # FIRES | CONDITIONAL | HELD
    who: str  # who repairs, and what holds it
    action: str  # Replace | Reboot | "" (unknown)
    act: str  # PAUSE | COLLECT | CORDON
    finding: Finding | None  # the most severe finding that names the node

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "nodepool": self.pool,
            "condition": self.condition,
            "since": format_time(self.since),
            "due": format_time(self.due),
            "state": self.state,
            "who": self.who,
            "action": self.action or None,
            "act": self.act,
            "finding": self.finding.id if self.finding else None,
            "severity": self.finding.severity if self.finding else None,
            "summary": self.finding.summary if self.finding else None,
        }


def radar(
    inp: DiagnosisInput, findings: Iterable[Finding], horizon: timedelta = DEFAULT_HORIZON
) -> list[Blip]:
    """The GPU nodes whose repair acts before `inp.now + horizon`, soonest first (held ones
    after those that fire, then by name)."""
    worst = _worst_finding_per_node(findings)
    policies = {**REPAIR_TOLERATIONS, **inp.repair_tolerations}
    until = inp.now + horizon
    blips: list[Blip] = []
    for node in inp.gpu_nodes:
        if node.deleting is not None:
            continue
        first = _first_repair(inp, node, policies)
        if first is None:
            continue
        condition, outlook, due, state = first
        if due > until:
            continue
        finding = worst.get(node.name)
        blips.append(
            Blip(
                node=node.name,
                pool=node.pool,
                condition=f"{condition.type}={condition.status}",
                since=condition.last_transition,
                due=due,
                state=state,
                who=outlook.who,
                action=outlook.action,
                act=_act(inp, node, finding),
                finding=finding,
            )
        )
    return sorted(blips, key=lambda b: (STATE_ORDER[b.state], b.due, b.node))


def _first_repair(
    inp: DiagnosisInput, node: Node, policies: dict[tuple[str, str], timedelta]
) -> tuple[Any, RepairOutlook, datetime, str] | None:
    """The node's condition whose repair comes first, its outlook, when, and how sure."""
    best: tuple[Any, RepairOutlook, datetime, str] | None = None
    for condition in node.conditions:
        if (condition.type, condition.status) not in policies:
            continue
        outlook = repair_outlook(inp, node, condition.type)
        if outlook.deadline is not None:
            due, state = outlook.deadline, FIRES
        elif outlook.would_be is not None:
            due, state = outlook.would_be, CONDITIONAL
        elif outlook.held_due is not None:
            due, state = outlook.held_due, HELD
        else:
            continue
        rank = (state != FIRES, due)
        if best is None or rank < (best[3] != FIRES, best[2]):
            best = (condition, outlook, due, state)
    return best


def _worst_finding_per_node(findings: Iterable[Finding]) -> dict[str, Finding]:
    worst: dict[str, Finding] = {}

    def rank(f: Finding) -> tuple[int, int]:
        return (SEVERITY_ORDER.get(f.severity, 99), ID_ORDER.get(f.id, 99))

    for finding in findings:
        for name in finding.nodes:
            held = worst.get(name)
            if held is None or rank(finding) < rank(held):
                worst[name] = finding
    return worst


def _act(inp: DiagnosisInput, node: Node, finding: Finding | None) -> str:
    if finding is not None and RUNBOOK_PAUSE_REPAIR in finding.runbooks:
        return PAUSE
    if node.name not in inp.node_evidence:
        return COLLECT
    return CORDON
