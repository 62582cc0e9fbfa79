"""`node-repair-loop`: Karpenter replaces the nodes of one NodePool again and again for the
same unhealthy condition (design.md, the DCGM incident; domain.md §1.4, §1.9).

Each replacement is proved by its fingerprint (termination-timestamp ≈ deletionTimestamp, no
DisruptionReason) from the history, the snapshot's deleting NodeClaims, or, when both are
gone, from the NodeClaim's and Node's events alone (`churn.replacements`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import timedelta

from mignurse.diagnose.facts import REPAIR_TOLERATIONS, classify_ahr_reason
from mignurse.diagnose.findings import (
    CRITICAL,
    NODE_REPAIR_LOOP,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules.churn import (
    WINDOW,
    Replacement,
    condition_text,
    human_duration,
    replacements,
    short_time,
)
from mignurse.model import Node, format_time

# Two repairs of the same condition in one pool within WINDOW: the second node inherited
# the first one's fault, so the next will too.
LOOP_MIN_REPAIRS = 2

_UNRECORDED = ("", "")


def rule(inp: DiagnosisInput) -> list[Finding]:
    groups: dict[tuple[str, str, str], list[Replacement]] = {}
    for rep in replacements(inp, WINDOW):
        if rep.cause != "repair":
            continue
        kind = (rep.unhealthy[0], rep.unhealthy[1]) if rep.unhealthy else _UNRECORDED
        groups.setdefault((rep.pool, *kind), []).append(rep)
    findings = []
    for (pool, type_, status), reps in sorted(groups.items()):
        if len(reps) >= LOOP_MIN_REPAIRS:
            findings.append(_finding(inp, pool, type_, status, reps))
    return findings


def _finding(
    inp: DiagnosisInput, pool: str, type_: str, status: str, reps: list[Replacement]
) -> Finding:
    pool_nodes = [n for n in inp.snapshot.nodes.values() if n.pool == pool]
    auto_mode = any(n.pool_kind == "auto" for n in pool_nodes)
    # Auto Mode repairs always (§2.2); elsewhere the loop itself proves the gate was on,
    # so only an explicit NodeRepair=false says it stopped.
    repair_off = not auto_mode and inp.karpenter is not None and inp.karpenter.node_repair is False
    current = _current_nodes(pool_nodes, type_, status, reps)
    toleration = REPAIR_TOLERATIONS.get((type_, status))

    evidence: list[Evidence] = []
    for rep in reps:
        evidence.extend(rep.evidence)
    deadlines = []
    for node in current:
        cond = node.condition(type_)
        if cond is None:
            continue
        deadline = (
            cond.last_transition + toleration if cond.last_transition and toleration else None
        )
        if deadline is not None and not repair_off and node.deleting is None:
            deadlines.append((deadline, node.name))
        when = (
            "being replaced now (NodeClaim deleting)"
            if node.deleting
            else f"Karpenter repairs it at {format_time(deadline)} ({human_duration(toleration)}"
            " toleration)"
            if deadline and toleration and not repair_off
            else "repair is off (NodeRepair=false), so it stays"
        )
        evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f" since {format_time(cond.last_transition)}; {when}",
            )
        )

    reasons = Counter(r.unhealthy[2] for r in reps if r.unhealthy and r.unhealthy[2])
    for node in current:
        cond = node.condition(type_)
        if cond is not None and cond.reason:
            reasons[cond.reason] += 1
    reason = reasons.most_common(1)[0][0] if reasons else ""
    images = {r.image_id for r in reps if r.image_id}
    if len(images) == 1:
        evidence.append(
            Evidence(None, "nodeclaim", f"every repaired NodeClaim ran image {images.pop()}")
        )

    lifetimes = [lt.total_seconds() for r in reps if (lt := r.lifetime) is not None]
    median = timedelta(seconds=statistics.median(lifetimes)) if lifetimes else None
    first = min((r.ended for r in reps if r.ended), default=None)
    condition = f"{type_}={status}" if type_ else "an unrecorded condition"
    summary = (
        f"NodePool {pool or '(none)'}: {len(reps)} nodes replaced by Karpenter repair for "
        f"{condition}{f' ({reason})' if reason else ''}"
        + (f" since {short_time(first)}" if first else "")
        + (f", median lifetime {human_duration(median)}" if median is not None else "")
    )
    deadline = min(deadlines)[0] if deadlines else None
    if deadlines:
        next_at, next_node = min(deadlines)
        summary += f"; next repair: {next_node} at {short_time(next_at)}"  # faces count down to it
    elif repair_off:
        summary += "; NodeRepair is off now, so the loop has stopped"
    elif any(n.deleting for n in current):
        summary += "; a node is being replaced now"
    else:
        summary += "; no node is unhealthy right now"
    if type_ == "AcceleratedHardwareReady" and classify_ahr_reason(reason) == "monitoring":
        summary += "; monitoring plumbing, not the GPU: new nodes fail the same way"
    if auto_mode:
        summary += "; Auto Mode repair cannot be paused"

    runbooks = (
        (RUNBOOK_CORDON_AND_COLLECT,)
        if auto_mode
        else (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)
    )
    nodes = tuple(dict.fromkeys([n.name for n in current] + [r.node for r in reps if r.node]))
    return Finding(
        id=NODE_REPAIR_LOOP,
        severity=WARNING if repair_off else CRITICAL,
        nodepool=pool,
        nodes=nodes,
        summary=summary,
        evidence=tuple(dict.fromkeys(evidence)),
        runbooks=runbooks,
        deadline=deadline,
    )


def _current_nodes(
    pool_nodes: list[Node], type_: str, status: str, reps: list[Replacement]
) -> list[Node]:
    """The pool's nodes whose same condition is unhealthy now: the loop's next victims."""
    if not type_:
        repaired = {r.node for r in reps}
        return [n for n in pool_nodes if n.name in repaired and n.deleting]
    found = []
    for node in pool_nodes:
        cond = node.condition(type_)
        if cond is not None and cond.status == status:
            found.append(node)
    found.sort(key=lambda n: (n.deleting is not None, n.name))
    return found
