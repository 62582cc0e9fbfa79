"""`node-not-ready`: GPU nodes whose Ready condition is False or Unknown now, whatever their
age: since when, what the condition says, and when automatic repair will replace them.

The first question on call. `notready-loop` and `mig-hook-kubelet-restart` explain some of
these nodes better (a node that failed while bootstrapping, or flaps); those nodes are left
to them. Who repairs, and when:
- Karpenter (self-managed): Ready False or Unknown for 30 min, only with the NodeRepair
  feature gate on; v1.1 repairs Ready=False only (aws/karpenter-provider-aws
  pkg/cloudprovider/cloudprovider.go `RepairPolicies` at v1.1.0 and v1.2.0), and the 20%
  guard holds repairs while more of the NodePool is unhealthy (kubernetes-sigs/karpenter
  pkg/controllers/node/health/controller.go).
- EKS Auto Mode: the same policies, always on (EKS user guide node-repair.html).
- Managed node groups: Replace after 30 min when `nodeRepairConfig` is enabled, unless an
  override says otherwise (mignurse.diagnose.mng).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mignurse.diagnose.automode import AUTO, AUTO_MODE_INSTEAD, repair_kind
from mignurse.diagnose.events import event_evidence
from mignurse.diagnose.findings import (
    CRITICAL,
    NODE_NOT_READY,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_REPLACE,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.outlook import repair_outlook
from mignurse.diagnose.rules import notready_loop
from mignurse.diagnose.rules.mig_hook import mig_hook_holds, node_events
from mignurse.diagnose.wording import condition_text, human_duration, short_time
from mignurse.model import Node, format_time

# Shorter than this is a kubelet restart or a network blip the node recovers from.
SETTLE = timedelta(minutes=2)
# A node this young that was never Ready is still joining: notready-loop's business.
JOINING = timedelta(minutes=10)
# A repair this close leaves just enough time to collect the node's evidence first.
URGENT = timedelta(minutes=10)
# What the kubelet and the node lifecycle controller say, in an engineer's words.
HINTS = {
    "NodeStatusUnknown": "the kubelet stopped posting status: the instance is down or "
    "unreachable, or kubelet is dead",
    "container runtime is down": "containerd is down",
    "PLEG is not healthy": "the container runtime stopped answering (PLEG)",
    "container runtime network not ready": "the CNI is not ready",
}
_NODE_EVENTS = frozenset(
    {"NodeNotReady", "NodeNotSchedulable", "Rebooted", "Starting", "NodeReady"}
)


def rule(inp: DiagnosisInput) -> list[Finding]:
    by_pool: dict[tuple[str, str], list[tuple[Node, datetime | None, str]]] = {}
    for node in inp.gpu_nodes:
        ready = node.ready
        if ready is None or ready.status == "True" or node.deleting is not None:
            continue
        since = ready.last_transition
        if since is not None and inp.now - since < SETTLE:
            continue
        if (
            node.created is not None
            and inp.now - node.created < JOINING
            and not _was_ready(inp, node)
            and not _kubelet_went_silent(ready.reason)
        ):
            continue
        if mig_hook_holds(inp, node.name) or notready_loop.node_finding(inp, node) is not None:
            continue
        outlook = repair_outlook(inp, node, "Ready")
        deadline, who = outlook.deadline, outlook.fate(inp.now)
        by_pool.setdefault((node.pool, repair_kind(inp, node)), []).append((node, deadline, who))
    return [
        _finding(inp, pool, kind, sorted(found, key=lambda f: f[0].name))
        for (pool, kind), found in sorted(by_pool.items())
    ]


def _was_ready(inp: DiagnosisInput, node: Node) -> bool:
    return any(
        e.reason == "NodeReady" or (e.reason == "Ready" and "-> True" in e.message)
        for e in node_events(inp, node)
    )


def _kubelet_went_silent(reason: str) -> bool:
    """The node lifecycle controller's word for a kubelet that posted its status and then
    stopped: a node past joining, whatever its events say (they may be gone, or never sent,
    as for a kwok node). A kubelet that never posted is `NodeStatusNeverUpdated` instead
    (kubernetes v1.34.4 pkg/controller/nodelifecycle/node_lifecycle_controller.go
    `tryUpdateNodeHealth`)."""
    return reason == "NodeStatusUnknown"


def _hint(reason: str, message: str) -> str:
    for key, hint in HINTS.items():
        if key == reason or key in message:
            return hint
    return ""


def _finding(
    inp: DiagnosisInput,
    pool: str,
    kind: str,
    found: list[tuple[Node, datetime | None, str]],
) -> Finding:
    evidence: list[Evidence] = []
    parts: list[str] = []
    deadlines = [d for _, d, _ in found if d is not None]
    for node, _deadline, who in found:
        ready = node.ready
        assert ready is not None  # chosen for it
        since = ready.last_transition
        down_for = human_duration(inp.now - since) if since else "an unknown time"
        age = f", {human_duration(inp.now - node.created)} old" if node.created else ""
        hint = _hint(ready.reason, ready.message)
        fate = who  # RepairOutlook.fate already says when repair replaces (or reboots) it
        parts.append(
            f"{node.name} Ready={ready.status} for {down_for}{age}" + (f" ({hint})" if hint else "")
        )
        evidence.append(
            Evidence(
                since,
                "condition",
                condition_text(node.name, "Ready", ready.status, ready.reason, ready.message)
                + f" since {format_time(since)}; {fate}",
            )
        )
        if node.unschedulable:
            evidence.append(Evidence(None, "node", f"Node {node.name} is cordoned"))
        recent = [
            e
            for e in node_events(inp, node)
            if e.reason in _NODE_EVENTS
            and (e.last_seen or e.first_seen or inp.now) >= (since or inp.now) - timedelta(hours=1)
        ]
        evidence.extend(event_evidence(e) for e in recent[-4:])
    where = (
        f"Node group {pool}"
        if kind == "nodegroup"
        else f"NodePool {pool}{' (Auto Mode)' if kind == AUTO else ''}"
        if pool
        else "Auto Mode GPU nodes outside any NodePool"
        if kind == AUTO
        else "GPU nodes outside any pool"
    )
    count = f"{len(found)} GPU node{'s' if len(found) != 1 else ''} NotReady"
    shown = "; ".join(parts[:3]) + (f"; {len(parts) - 3} more" if len(parts) > 3 else "")
    deadline = min(deadlines) if deadlines else None
    summary = f"{where}: {count}: {shown}"
    if deadline is not None:
        summary += f"; repair replaces the first at {short_time(deadline)}"
        summary += ": collect its evidence first"
    else:
        summary += f"; {found[0][2]}"
    if kind == AUTO:
        summary += f"; {AUTO_MODE_INSTEAD}"
    urgent = deadline is not None and deadline - inp.now <= URGENT
    return Finding(
        id=NODE_NOT_READY,
        severity=CRITICAL if urgent else WARNING,
        nodepool=pool,
        nodes=tuple(n.name for n, _, _ in found),
        summary=summary,
        evidence=tuple(dict.fromkeys(evidence)),
        runbooks=(RUNBOOK_CORDON_AND_COLLECT, RUNBOOK_REPLACE),
        deadline=deadline,
    )
