"""`repair-blocked`: Karpenter's 20% guard is holding repairs in a NodePool (docs/repair.md).

Two proofs, merged per pool: `NodeRepairBlocked` Warning events (on the Node; the NodePool
and cluster scopes word it differently across versions), and the arithmetic now: more
nodes match a repair policy than `ceil(20% × pool size)` while repair is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mignurse.diagnose.agent_reasons import plumbing
from mignurse.diagnose.automode import AUTO_MODE_INSTEAD, any_auto_mode, auto_mode_pool
from mignurse.diagnose.events import event_evidence, event_index
from mignurse.diagnose.facts import (
    AHR,
    REPAIR_BLOCKED_EVENT,
    REPAIR_TOLERATIONS,
    repair_allowance,
    unhealthy_for_repair,
)
from mignurse.diagnose.findings import (
    REPAIR_BLOCKED,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_REPLACE,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.replacements import unhealthy_condition
from mignurse.diagnose.wording import condition_text, short_time
from mignurse.model import Event, Node, format_time

# Blocked repairs requeue every 5 min from Karpenter v1.7.0 (before it, with each change to the
# Node) and the event dedupes for 15 min (docs/repair.md): a guard still holding refreshes its
# event well within an hour, the default event TTL.
RECENT = timedelta(hours=1)
CLUSTER_SCOPE = "in the cluster"  # standalone NodeClaims: all Nodes count


@dataclass
class _Pool:
    events: list[Event] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    cluster_scope: bool = False


def rule(inp: DiagnosisInput) -> list[Finding]:
    pools: dict[str, _Pool] = {}
    node_pool = _node_pools(inp)
    since = inp.now - RECENT
    for event in event_index(inp).by_reason.get(REPAIR_BLOCKED_EVENT, ()):
        if (event.last_seen or event.first_seen or since) < since:
            continue
        scope_cluster = CLUSTER_SCOPE in event.message
        pool = "" if scope_cluster else node_pool.get(event.involved_name, "")
        entry = pools.setdefault(pool, _Pool())
        entry.events.append(event)
        entry.cluster_scope |= scope_cluster

    for pool, nodes in _karpenter_pools(inp).items():
        if pools.get(pool) is None and not _repair_on(inp, nodes):
            continue
        pools.setdefault(pool, _Pool()).nodes = nodes

    findings = []
    for pool, entry in sorted(pools.items()):
        finding = _finding(inp, pool, entry)
        if finding is not None:
            findings.append(finding)
    return findings


def _node_pools(inp: DiagnosisInput) -> dict[str, str]:
    """Node name → pool, from the snapshot and, for Nodes already gone, the history."""
    pools = {lc.name: lc.pool for lc in inp.history.lifecycles if lc.kind == "Node" and lc.pool}
    pools.update({name: node.pool for name, node in inp.snapshot.nodes.items()})
    return pools


def _karpenter_pools(inp: DiagnosisInput) -> dict[str, list[Node]]:
    """Nodes per Karpenter NodePool: the guard counts every Node with the pool label."""
    pools: dict[str, list[Node]] = {}
    for node in inp.snapshot.nodes.values():
        if node.pool and node.pool_kind in ("nodepool", "auto"):
            pools.setdefault(node.pool, []).append(node)
    gpu_pools = {n.pool for n in inp.gpu_nodes}
    return {pool: nodes for pool, nodes in pools.items() if pool in gpu_pools}


def _repair_on(inp: DiagnosisInput, nodes: list[Node]) -> bool:
    if any_auto_mode(inp, nodes):
        return True  # Auto Mode: always on (docs/repair.md)
    return inp.karpenter is not None and inp.karpenter.node_repair is True


def _finding(inp: DiagnosisInput, pool: str, entry: _Pool) -> Finding | None:
    auto_mode = bool(pool) and auto_mode_pool(inp, pool)
    # Auto Mode runs the newest policies whatever release a self-managed Karpenter runs.
    tolerations = REPAIR_TOLERATIONS if auto_mode else inp.repair_tolerations
    unhealthy = sorted(
        (n for n in entry.nodes if unhealthy_for_repair(n, tolerations)), key=lambda n: n.name
    )
    allowance = repair_allowance(len(entry.nodes))
    held_now = bool(entry.nodes) and len(unhealthy) > allowance
    if not entry.events and not held_now:
        return None

    conditions, overdue = _held_conditions(inp, unhealthy, tolerations)
    evidence = [event_evidence(e) for e in entry.events] + conditions
    if entry.nodes:
        evidence.append(
            Evidence(
                None,
                "condition",
                f"{len(unhealthy)} of {len(entry.nodes)} nodes in NodePool {pool} match a "
                f"repair policy now; the guard allows ceil(20% × {len(entry.nodes)}) = "
                f"{allowance}",
            )
        )
    version = inp.karpenter.version_tuple if inp.karpenter is not None else None
    summary = _summary(pool, entry, len(unhealthy), allowance, len(overdue), version)
    runbooks: tuple[str, ...] = (RUNBOOK_CORDON_AND_COLLECT, RUNBOOK_REPLACE)
    monitoring = _monitoring_broken(inp, unhealthy, entry.events)
    if monitoring:
        # A new node fails the same way: replacing by hand is what the guard holds back.
        runbooks = (RUNBOOK_CORDON_AND_COLLECT,)
        summary += (
            f"; {', '.join(monitoring[:3])}{'…' if len(monitoring) > 3 else ''}: "
            f"{AHR}=False DCGMError, the agent's GPU monitoring, not the GPU: replacing "
            "will not help, a new node fails the same way"
        )
    if auto_mode:
        summary += f"; {AUTO_MODE_INSTEAD}"
    # Through v1.5 the pool's health is checked before the node's own: every node of the
    # pool Karpenter reconciles gets the event, healthy ones too; from v1.6 only nodes past
    # their toleration (kubernetes-sigs/karpenter pkg/controllers/node/health/controller.go
    # at v1.5.0 and v1.6.0).
    every_node = version is None or version < (1, 6)
    healthy_named = sorted(
        {e.involved_name for e in entry.events if e.involved_name in inp.snapshot.nodes}
        - {n.name for n in unhealthy}
    )
    if every_node and healthy_named:
        evidence.append(
            Evidence(
                None,
                "settings",
                f"{REPAIR_BLOCKED_EVENT} also names {len(healthy_named)} healthy node(s) "
                f"({', '.join(healthy_named[:3])}{'…' if len(healthy_named) > 3 else ''}): "
                f"Karpenter {inp.karpenter.version if inp.karpenter else '(version unknown)'} "
                "checks the pool before the node, so every node it reconciles gets the event",
            )
        )
    named = [
        e.involved_name
        for e in entry.events
        if not (every_node and e.involved_name in healthy_named)
    ]
    nodes = tuple(dict.fromkeys([n.name for n in unhealthy] + named))
    return Finding(
        id=REPAIR_BLOCKED,
        severity=WARNING,
        nodepool=pool,
        nodes=nodes,
        summary=summary,
        evidence=tuple(evidence),
        runbooks=runbooks,
    )


def _monitoring_broken(
    inp: DiagnosisInput, unhealthy: list[Node], events: list[Event]
) -> list[str]:
    """The held nodes (unhealthy now, or named by the events) whose accelerated hardware
    condition is the agent's DCGMError."""
    names = {n.name for n in unhealthy} | {e.involved_name for e in events}
    found = []
    for name in sorted(names):
        node = inp.snapshot.nodes.get(name)
        cond = node.condition(AHR) if node is not None else None
        if cond is not None and cond.status == "False" and plumbing(cond.reason):
            found.append(name)
    return found


def _held_conditions(
    inp: DiagnosisInput, unhealthy: list[Node], tolerations: Mapping[tuple[str, str], timedelta]
) -> tuple[list[Evidence], list[datetime]]:
    """Each unhealthy node's repair-matching condition with when its repair is due, and the
    deadlines already past (repairs the guard holds back)."""
    evidence: list[Evidence] = []
    overdue: list[datetime] = []
    for node in unhealthy:
        cond = unhealthy_condition(node, tolerations)
        if cond is None:
            continue
        deadline = (
            cond.last_transition + tolerations[(cond.type, cond.status)]
            if cond.last_transition
            else None
        )
        if deadline is not None and deadline <= inp.now:
            overdue.append(deadline)
        state = (
            f"repair due since {format_time(deadline)}, held by the guard"
            if deadline is not None and deadline <= inp.now
            else f"repair due {format_time(deadline)}"
            if deadline is not None
            else "no transition time"
        )
        evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f" since {format_time(cond.last_transition)}; {state}",
            )
        )
    return evidence, overdue


def _summary(
    pool: str,
    entry: _Pool,
    unhealthy: int,
    allowance: int,
    overdue: int,
    version: tuple[int, ...] | None,
) -> str:
    where = "cluster-wide (standalone NodeClaims)" if entry.cluster_scope else f"NodePool {pool}"
    if not pool and not entry.cluster_scope:
        where = "a NodePool no longer visible"
    summary = f"{where}: Karpenter repair held by the 20% guard"
    if entry.nodes:
        summary += (
            f", {unhealthy} of {len(entry.nodes)} nodes unhealthy, at most {allowance} "
            "may be repaired"
        )
    if entry.events:
        count = sum(e.count for e in entry.events)
        first = min((e.first_seen for e in entry.events if e.first_seen), default=None)
        last = max((e.last_seen for e in entry.events if e.last_seen), default=None)
        summary += f"; {REPAIR_BLOCKED_EVENT} x{count}" + (
            f" {short_time(first)}–{short_time(last)}" if first and last else ""
        )
    if overdue:
        summary += f"; {overdue} past their repair deadline: {_when_replaced(version)}"
    return summary


def _when_replaced(version: tuple[int, ...] | None) -> str:
    """When a node the guard holds past its deadline goes once the count drops. From v1.7.0
    a held repair is looked at again every 5 minutes (pkg/controllers/node/health/
    controller.go `RequeueAfter: 5 * time.Minute`); through v1.6 nothing requeues it (an
    empty Result): only a change to its Node brings it back, and a Node whose kubelet is
    down may not change for hours."""
    if version is not None and version < (1, 7):
        return (
            "when the count drops, each is replaced the next time its Node changes (this "
            "Karpenter does not look at a held repair again before; v1.7.0 does every 5 min)"
        )
    return "when the count drops, they are replaced within 5 min" + (
        "" if version is not None else " (Karpenter v1.7.0 on; before it, when the Node changes)"
    )
