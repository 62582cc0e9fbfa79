"""`node-repair-loop`: Karpenter replaces the nodes of one NodePool again and again for the
same unhealthy condition (the DCGM incident; docs/repair.md).

Each replacement is proved by its fingerprint (termination-timestamp ≈ deletionTimestamp, no
DisruptionReason) from the history, the snapshot's deleting NodeClaims, or, when both are
gone, from the NodeClaim's and Node's events alone (`mignurse.diagnose.replacements`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from mignurse.diagnose.agent_reasons import GPU, agent_reason
from mignurse.diagnose.automode import AUTO_MODE_INSTEAD, auto_mode_pool, is_auto_mode
from mignurse.diagnose.facts import classify_ahr_reason
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
from mignurse.diagnose.mng_repairs import (
    MngAction,
    MngRepair,
    group_action,
    mng_repairs,
    unhealthy_now,
)
from mignurse.diagnose.outlook import repair_outlook
from mignurse.diagnose.replacements import WINDOW, Replacement, replacements
from mignurse.diagnose.wording import condition_text, human_duration, short_time
from mignurse.model import Node, NodeClaim, format_time
from mignurse.model.fields import AUTO_MODE_NODECLASS_GROUP

# Two repairs of the same condition in one pool within WINDOW: the second node inherited
# the first one's fault, so the next will too.
LOOP_MIN_REPAIRS = 2
# One repair is enough when the node failed this young and an identical NodeClaim already
# replaces it: the evidence of the earlier rounds may simply be gone (events live an hour).
YOUNG_REPAIR = timedelta(minutes=30)
# The replacement is launched within moments of the repair (the provisioner batches pods
# for seconds); allow for clocks a little apart.
TWIN_LAUNCH = timedelta(minutes=5)

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
        elif (twin := _young_repair_twin(inp, reps[0])) is not None:
            findings.append(_finding(inp, pool, type_, status, reps, twin))
    findings.extend(_mng_findings(inp))
    return findings


def _claims_by_pool(inp: DiagnosisInput) -> dict[str, list[NodeClaim]]:
    """The snapshot's NodeClaims by pool, each pool's by name: sorted once, not once for
    every young repair."""

    def index() -> dict[str, list[NodeClaim]]:
        pools: dict[str, list[NodeClaim]] = {}
        for claim in sorted(inp.snapshot.nodeclaims.values(), key=lambda c: c.name):
            pools.setdefault(claim.pool, []).append(claim)
        return pools

    return inp.memo(f"{NODE_REPAIR_LOOP}.claims_by_pool", index)


def _young_repair_twin(inp: DiagnosisInput, rep: Replacement) -> NodeClaim | None:
    """The NodeClaim launched to replace a node repaired in its youth, built the same way
    (pool, instance type, image): it will fail the same way."""
    lifetime = rep.lifetime
    if lifetime is None or lifetime > YOUNG_REPAIR or rep.ended is None:
        return None
    repaired = inp.snapshot.nodeclaims.get(rep.claim)
    for claim in _claims_by_pool(inp).get(rep.pool, ()):
        if claim.name == rep.claim or claim.deleting is not None:
            continue
        if claim.created is None or not (
            rep.ended - TWIN_LAUNCH <= claim.created <= rep.ended + TWIN_LAUNCH
        ):
            continue
        shape = repaired.instance_type if repaired is not None else ""
        if shape and claim.instance_type and shape != claim.instance_type:
            continue
        if rep.image_id and claim.image_id and rep.image_id != claim.image_id:
            continue
        return claim
    return None


def _finding(
    inp: DiagnosisInput,
    pool: str,
    type_: str,
    status: str,
    reps: list[Replacement],
    twin: NodeClaim | None = None,
) -> Finding:
    pool_nodes = inp.nodes_by_pool.get(pool, ())
    auto_mode = (
        auto_mode_pool(inp, pool)
        or any(is_auto_mode(inp, n) for n in pool_nodes)
        or (twin is not None and twin.node_class_group == AUTO_MODE_NODECLASS_GROUP)
    )
    # Auto Mode repairs always (docs/repair.md); elsewhere the loop itself proves the gate was on,
    # so only an explicit NodeRepair=false says it stopped.
    repair_off = not auto_mode and inp.karpenter is not None and inp.karpenter.node_repair is False
    current = _current_nodes(pool_nodes, type_, status, reps)

    conditions, deadlines = _current_conditions(inp, current, type_, repair_off)
    evidence = _without_requotes([e for rep in reps for e in rep.evidence] + conditions)
    reason = _dominant_reason(reps, current, type_)
    images = {r.image_id for r in reps if r.image_id}
    if len(images) == 1:
        evidence.append(
            Evidence(None, "nodeclaim", f"every repaired NodeClaim ran image {images.pop()}")
        )
    condition = f"{type_}={status}" if type_ else "an unrecorded condition"
    if twin is not None:
        rep = reps[0]
        summary = (
            f"NodePool {pool or '(none)'}: {rep.node or rep.claim} was replaced by Karpenter "
            f"repair for {condition}{f' ({reason})' if reason else ''} "
            f"{human_duration(rep.lifetime or timedelta(0))} after launch, and NodeClaim "
            f"{twin.name}, built the same way, replaces it: a loop (earlier rounds may have "
            f"left no evidence)"
        )
        evidence.append(
            Evidence(
                twin.created,
                "nodeclaim",
                f"NodeClaim {twin.name} created {format_time(twin.created)} in {pool}, "
                f"{twin.instance_type or '?'}, image {twin.image_id or 'not yet launched'}: "
                "the replacement of the repaired node",
            )
        )
    else:
        summary = _loop_summary(pool, condition, reason, reps)
    if auto_mode:
        summary = summary.replace("by Karpenter repair", "by EKS Auto Mode repair", 1)
    summary += _whats_next(inp, current, deadlines, repair_off)
    if type_ == "AcceleratedHardwareReady" and classify_ahr_reason(reason) == "monitoring":
        summary += "; monitoring plumbing, not the GPU: new nodes fail the same way"
    elif (entry := agent_reason(reason)) is not None and entry.condition == type_:
        summary += f"; {reason}: {entry.meaning}"
        if entry.kind == GPU:
            # One bad GPU does not follow every new node: the image, driver or type does.
            summary += (
                "; a fault that follows every new node points at the image or the driver "
                "rather than one GPU"
            )
    if auto_mode:
        summary += f"; {AUTO_MODE_INSTEAD}"

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
        deadline=min(deadlines)[0] if deadlines else None,
    )


def _current_conditions(
    inp: DiagnosisInput, current: list[Node], type_: str, repair_off: bool
) -> tuple[list[Evidence], list[tuple[datetime, str]]]:
    """The looping condition on each node that has it now, with that node's fate, and the
    repair deadlines still ahead (deadline, node)."""
    evidence: list[Evidence] = []
    deadlines = []
    for node in current:
        cond = node.condition(type_)
        if cond is None:
            continue
        outlook = repair_outlook(inp, node, type_)
        if outlook.deadline is not None:
            deadlines.append((outlook.deadline, node.name))
        when = (
            "being replaced now (NodeClaim deleting)"
            if node.deleting
            else "repair is off (NodeRepair=false), so it stays"
            if repair_off
            else outlook.fate(inp.now)
        )
        evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f" since {format_time(cond.last_transition)}; {when}",
            )
        )
    return evidence, deadlines


def _without_requotes(evidence: list[Evidence]) -> list[Evidence]:
    """A repaired node's condition quoted again with its fate is one line, not two."""
    # Only evidence of the same moment and source can requote: compare within those.
    same_moment: dict[tuple[datetime | None, str], list[Evidence]] = {}
    for e in evidence:
        same_moment.setdefault((e.time, e.source), []).append(e)
    return [
        e
        for e in evidence
        if not any(
            o is not e and o.text.startswith(e.text) for o in same_moment[(e.time, e.source)]
        )
    ]


def _dominant_reason(reps: list[Replacement], current: list[Node], type_: str) -> str:
    """The condition reason most often seen, on the repaired nodes and the current ones."""
    reasons = Counter(r.unhealthy[2] for r in reps if r.unhealthy and r.unhealthy[2])
    for node in current:
        cond = node.condition(type_)
        if cond is not None and cond.reason:
            reasons[cond.reason] += 1
    return reasons.most_common(1)[0][0] if reasons else ""


def _median(seconds: list[float]) -> timedelta:
    import statistics  # only a loop's summary loads it: most diagnoses find none

    return timedelta(seconds=statistics.median(seconds))


def _loop_summary(pool: str, condition: str, reason: str, reps: list[Replacement]) -> str:
    lifetimes = [lt.total_seconds() for r in reps if (lt := r.lifetime) is not None]
    median = _median(lifetimes) if lifetimes else None
    first = min((r.ended for r in reps if r.ended), default=None)
    return (
        f"NodePool {pool or '(none)'}: {len(reps)} nodes replaced by Karpenter repair for "
        f"{condition}{f' ({reason})' if reason else ''}"
        + (f" since {short_time(first)}" if first else "")
        + (f", median lifetime {human_duration(median)}" if median is not None else "")
    )


def _whats_next(
    inp: DiagnosisInput,
    current: list[Node],
    deadlines: list[tuple[datetime, str]],
    repair_off: bool,
) -> str:
    """The summary's tail: the next repair, or why none is coming."""
    if deadlines:
        next_at, next_node = min(deadlines)
        return f"; next repair: {next_node} at {short_time(next_at)}"  # faces count down to it
    if repair_off:
        return "; NodeRepair is off now, so the loop has stopped"
    if any(n.deleting for n in current):
        return "; a node is being replaced now"
    if not inp.snapshot.nodes:
        return "; the nodes' conditions are not in this snapshot"
    return "; no node is unhealthy right now"


def _current_nodes(
    pool_nodes: Sequence[Node], type_: str, status: str, reps: list[Replacement]
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


# -- managed node groups ------------------------------------------------------------------


def _mng_findings(inp: DiagnosisInput) -> list[Finding]:
    groups: dict[tuple[str, str, str, str], list[MngRepair]] = {}
    for repair in mng_repairs(inp):
        if repair.unhealthy is None:
            continue
        groups.setdefault((repair.group, *repair.unhealthy), []).append(repair)
    findings = []
    for (group, type_, status, reason), repairs in sorted(groups.items()):
        current = [
            n
            for n in (inp.nodes_by_pool.get(group, ()) if group else inp.snapshot.nodes.values())
            if n.pool_kind == "nodegroup"
            and (failing := unhealthy_now(n)) is not None
            and failing[:2] == (type_, status)
        ]
        if len(repairs) >= LOOP_MIN_REPAIRS or (repairs and any(n.unschedulable for n in current)):
            findings.append(_mng_finding(inp, group, type_, status, reason, repairs, current))
    return findings


def _mng_finding(
    inp: DiagnosisInput,
    group: str,
    type_: str,
    status: str,
    reason: str,
    repairs: list[MngRepair],
    current: list[Node],
) -> Finding:
    action, settings = group_action(inp, group, type_, status, reason)
    repair_off = settings is not None and not settings.enabled
    evidence: list[Evidence] = []
    for repair in repairs:
        evidence.extend(repair.evidence)
    if settings is not None:
        config = settings.raw.get("nodeRepairConfig")
        evidence.append(
            Evidence(
                None,
                "nodegroup",
                f"node group {group} nodeRepairConfig {json.dumps(config, sort_keys=True)}"
                if config is not None
                else f"node group {group} has no nodeRepairConfig (repair off)",
            )
        )
    conditions, deadlines = _mng_conditions(inp, current, type_)
    evidence.extend(conditions)
    lifetimes = [lt.total_seconds() for r in repairs if (lt := r.lifetime) is not None]
    median = _median(lifetimes) if lifetimes else None
    where = f"Node group {group}" if group else "A managed node group"
    condition = f"{type_}={status}{f' ({reason})' if reason else ''}"
    summary = (
        f"{where}: {len(repairs)} node{'s' if len(repairs) != 1 else ''} replaced by EKS "
        f"managed node group auto repair for {condition} since "
        f"{short_time(min(r.ended for r in repairs))}"
        + (f", median lifetime {human_duration(median)}" if median is not None else "")
    )
    summary += _mng_action_words(action, reason)
    if deadlines:
        next_at, next_node = min(deadlines)
        summary += f"; next repair: {next_node} at {short_time(next_at)}"
    elif repair_off:
        summary += "; repair is off on the node group now, so the loop has stopped"
    if type_ == "AcceleratedHardwareReady" and classify_ahr_reason(reason) == "monitoring":
        summary += (
            "; monitoring plumbing, not the GPU: new nodes fail the same way. Pause repair on "
            "the node group (enabled=false, or an override "
            f"{type_}/{reason or '<reason>'} → NoAction); replacing instances will not help"
        )
    else:
        summary += "; pause repair on the node group while you find the cause"
    runbooks: tuple[str, ...] = (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)
    if any(is_auto_mode(inp, n) for n in current):
        # Labelled for a node group and for Auto Mode: Auto Mode's repair acts, unpausable.
        runbooks = (RUNBOOK_CORDON_AND_COLLECT,)
        summary += f"; {AUTO_MODE_INSTEAD}"
    nodes = tuple(dict.fromkeys([n.name for n in current] + [r.node for r in repairs]))
    return Finding(
        id=NODE_REPAIR_LOOP,
        severity=WARNING if repair_off else CRITICAL,
        nodepool=group,
        nodes=nodes,
        summary=summary,
        evidence=tuple(dict.fromkeys(evidence)),
        runbooks=runbooks,
        deadline=min(deadlines)[0] if deadlines else None,
    )


def _mng_conditions(
    inp: DiagnosisInput, current: list[Node], type_: str
) -> tuple[list[Evidence], list[tuple[datetime, str]]]:
    """The condition on each node that has it now, cordoned or not, with its fate; and the
    repair deadlines still ahead (deadline, node)."""
    evidence: list[Evidence] = []
    deadlines: list[tuple[datetime, str]] = []
    for node in sorted(current, key=lambda n: n.name):
        cond = node.condition(type_)
        if cond is None:
            continue
        outlook = repair_outlook(inp, node, type_)
        if outlook.deadline is not None:
            deadlines.append((outlook.deadline, node.name))
        cordon = "cordoned" if node.unschedulable else "not cordoned"
        fate = outlook.fate(inp.now)
        evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f" since {format_time(cond.last_transition)}; {cordon}; {fate}",
            )
        )
    return evidence, deadlines


def _mng_action_words(action: MngAction | None, reason: str) -> str:
    """What the node group's repair config does for this condition, as the summary says it."""
    if action is not None:
        return f"; {action.source}"
    if classify_ahr_reason(reason) == "monitoring":
        return (
            "; the default for DCGM reasons is no action, so the node group must carry an "
            "override to Replace (nodeRepairConfig not in this snapshot)"
        )
    return "; nodeRepairConfig not in this snapshot"
