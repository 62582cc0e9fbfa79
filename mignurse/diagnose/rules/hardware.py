"""`accelerated-hardware-not-ready`: nodes with AcceleratedHardwareReady=False, told apart as
monitoring plumbing (DCGM: the GPU may be fine, a new node fails the same way) or the GPU
itself (XID, ECC: replace it), with when repair fires (domain.md §1.2-§1.4, §2.2)."""

from __future__ import annotations

from datetime import datetime, timedelta

from mignurse.diagnose.facts import (
    AHR,
    REPAIR_TOLERATIONS,
    XID_REBOOT,
    XID_REPLACE,
    classify_ahr_reason,
    xid_of,
)
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    RUNBOOK_REPLACE,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules.churn import condition_text, relative, short_time
from mignurse.model import Node, format_time

# A repair this close (or already due) leaves just enough time to collect evidence first.
URGENT = timedelta(minutes=10)
AHR_TOLERATION = REPAIR_TOLERATIONS[(AHR, "False")]
# MNG replaces on these without an XID (§1.3).
_MNG_REPLACE_REASONS = ("NvidiaDoubleBitError", "NvidiaNVLinkError")


def rule(inp: DiagnosisInput) -> list[Finding]:
    groups: dict[tuple[str, str, str], list[Node]] = {}
    for node in inp.snapshot.nodes.values():
        cond = node.condition(AHR)
        if cond is None or cond.status != "False":
            continue
        kind = classify_ahr_reason(cond.reason)
        groups.setdefault((node.pool, node.pool_kind, kind), []).append(node)
    return [
        _finding(inp, pool, pool_kind, kind, sorted(nodes, key=lambda n: n.name))
        for (pool, pool_kind, kind), nodes in sorted(groups.items())
    ]


def repair_deadline(inp: DiagnosisInput, node: Node) -> tuple[datetime | None, str]:
    """When repair replaces this node for AcceleratedHardwareReady=False, and who does it."""
    cond = node.condition(AHR)
    since = cond.last_transition if cond is not None else None
    if node.pool_kind == "auto":
        # Auto Mode: repair built in and always on, Karpenter's toleration (§2.2).
        return (since + AHR_TOLERATION if since else None), "EKS Auto Mode repair (always on)"
    if node.pool_kind == "nodegroup":
        return None, "managed node group"
    if node.pool_kind != "nodepool":
        return None, "no Karpenter NodePool or node group"
    if inp.karpenter is None or inp.karpenter.node_repair is None:
        return None, "Karpenter (NodeRepair gate unknown: the Deployment was not read)"
    if not inp.karpenter.node_repair:
        return None, "Karpenter with NodeRepair=false"
    return (since + AHR_TOLERATION if since else None), "Karpenter NodeRepair"


def _gate_unknown(inp: DiagnosisInput, node: Node) -> bool:
    return node.pool_kind == "nodepool" and (
        inp.karpenter is None or inp.karpenter.node_repair is None
    )


def _mng_action(reason: str) -> str:
    """What an EKS managed node group does by default (§1.3), when its repair is enabled."""
    if classify_ahr_reason(reason) == "monitoring":
        return "no action (MNG's default for DCGM* reasons), so MNG does not repair it"
    xid = xid_of(reason) if reason.startswith("NvidiaXID") else None
    if xid in XID_REPLACE or reason.startswith(_MNG_REPLACE_REASONS):
        return "Replace (MNG default, if node repair is enabled on the node group)"
    if xid in XID_REBOOT:
        return "Reboot (MNG default, if node repair is enabled on the node group)"
    return "no default action listed for this reason"


def _finding(
    inp: DiagnosisInput, pool: str, pool_kind: str, kind: str, nodes: list[Node]
) -> Finding:
    evidence: list[Evidence] = []
    deadlines: list[datetime] = []
    reasons: list[str] = []
    who = ""
    for node in nodes:
        cond = node.condition(AHR)
        if cond is None:
            continue
        reasons.append(cond.reason)
        deadline, who = repair_deadline(inp, node)
        if deadline is not None:
            deadlines.append(deadline)
        if node.deleting is not None:
            fate = f"being deleted since {format_time(node.deleting)}"
        elif deadline is not None:
            fate = f"{who} replaces it at {format_time(deadline)} ({relative(deadline, inp.now)})"
        elif pool_kind == "nodegroup":
            fate = f"managed node group: {_mng_action(cond.reason)}"
        elif cond.last_transition is not None and _gate_unknown(inp, node):
            would = cond.last_transition + AHR_TOLERATION
            fate = f"{who}; if it is on, repair fires at {format_time(would)}"
        else:
            fate = f"{who}: no automatic repair"
        xid = xid_of(cond.reason) if cond.reason.startswith("NvidiaXID") else None
        xid_note = f" (XID {xid})" if xid is not None else ""
        evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f"{xid_note} since {format_time(cond.last_transition)}; {fate}",
            )
        )

    reason_list = ", ".join(sorted(set(r for r in reasons if r))) or "no reason given"
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    where = _where(pool, pool_kind)
    deadline = min(deadlines) if deadlines else None
    if kind == "monitoring":
        what = "GPU monitoring plumbing (DCGM), not the GPU: replacing the node will not help"
    elif kind == "hardware":
        what = "a GPU hardware fault: replace the instance"
    else:
        what = "an unrecognised reason: check the message"
    summary = f"{where}: {count} AcceleratedHardwareReady=False ({reason_list}), {what}"
    if deadline is not None:
        summary += f"; repair fires {short_time(deadline)}"  # faces count down to `deadline`
        if kind == "monitoring" and pool_kind != "auto":
            summary += "; pause repair"
        elif kind == "monitoring":
            summary += "; Auto Mode repair cannot be paused: fix the image"
    elif pool_kind == "nodegroup" and kind == "monitoring":
        summary += "; MNG's default for DCGM* is no action, so MNG does not repair it"
    elif pool_kind == "nodegroup":
        summary += "; MNG default action: " + _mng_action(reasons[0] if reasons else "")

    if kind == "monitoring":
        runbooks: tuple[str, ...] = (
            (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)
            if deadline is not None and pool_kind == "nodepool"
            else (RUNBOOK_CORDON_AND_COLLECT,)
        )
    elif kind == "hardware":
        runbooks = (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)
    else:
        runbooks = (RUNBOOK_CORDON_AND_COLLECT,)
    urgent = deadline is not None and deadline - inp.now <= URGENT
    return Finding(
        id=ACCELERATED_HARDWARE_NOT_READY,
        severity=CRITICAL if urgent else WARNING,
        nodepool=pool,
        nodes=tuple(n.name for n in nodes),
        summary=summary,
        evidence=tuple(evidence),
        runbooks=runbooks,
        deadline=deadline,
    )


def _where(pool: str, pool_kind: str) -> str:
    if pool_kind == "nodegroup":
        return f"Node group {pool}"
    if pool_kind == "auto":
        return f"NodePool {pool} (Auto Mode)"
    return f"NodePool {pool}" if pool else "Nodes outside any pool"
