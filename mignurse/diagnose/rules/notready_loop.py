"""notready-loop: a GPU node that went NotReady soon after its first Ready and stayed
there, or that flaps between Ready and NotReady (docs/commands.md's finding table; docs/repair.md).

Ready history comes from the local history's transitions when present, else from the
kubelet's NodeReady/NodeNotReady events and its "Starting kubelet." repeats, and always
from the Ready condition itself. Nodes that `mig_hook` explains with node evidence are
left to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mignurse.cluster.history import Transition
from mignurse.diagnose.findings import (
    CRITICAL,
    NOTREADY_LOOP,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_REPLACE,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.diagnose.rules.mig_hook import (
    MIG_STATES_IN_FLIGHT,
    condition_evidence,
    event_evidence,
    evidence_problems,
    human,
    label_evidence,
    mig_hook_holds,
    node_events,
    node_evidence_of,
    paused_evidence,
    paused_operands,
    ready_repair_deadline,
    transition_evidence,
    usable_journal,
)
from mignurse.model import LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE, Condition, Event, Node

# A node that fails this soon after its first Ready failed while bootstrapping, not from wear.
SOON_AFTER_READY = timedelta(minutes=10)
# Without a known first Ready: boot and join take a few minutes, so NotReady within this
# much of creation is still the bootstrap.
SOON_AFTER_CREATION = timedelta(minutes=15)
# NotReady this long has outlived any kubelet restart or brief runtime hiccup.
STUCK_AFTER = timedelta(minutes=5)
# The MIG incident: Ready for under a minute (NVIDIA/gpu-operator#2415); mig-manager's image pull on
# a new node can push its reconfigure a little later, so allow two.
MIG_SUSPECT_READY = timedelta(minutes=2)
# Flapping: at least this many NotReady episodes, or kubelet starts, within the window.
FLAP_WINDOW = timedelta(hours=1)
FLAP_MIN_DOWNS = 2
FLAP_MIN_KUBELET_STARTS = 3

READY_EVENTS = {"NodeReady": "True", "NodeNotReady": "False"}
KUBELET_START_MESSAGE = "Starting kubelet."


@dataclass
class ReadyHistory:
    changes: list[tuple[datetime, str]] = field(default_factory=list)  # (time, Ready status)
    first_ready: datetime | None = None
    kubelet_starts: list[datetime] = field(default_factory=list)
    # What the evidence quotes, in order: worded only for a node that gets a finding, since
    # most of 5,000 nodes get none.
    quoted: list[Transition | Event | Condition] = field(default_factory=list)

    def evidence(self) -> list[Evidence]:
        return [_quote(item) for item in self.quoted]


def _quote(item: Transition | Event | Condition) -> Evidence:
    if isinstance(item, Event):
        return event_evidence(item)
    if isinstance(item, Condition):
        return condition_evidence(item)
    return transition_evidence(item)


def _ready_history(inp: DiagnosisInput, node: Node) -> ReadyHistory:
    found = ReadyHistory()
    raw: list[tuple[datetime, str]] = []
    transitions = [
        t
        for t in inp.transitions_by_name.get(("Node", node.name), ())
        if t.condition == "Ready" and (not node.uid or not t.uid or t.uid == node.uid)
    ]
    if transitions:
        for t in transitions:
            raw.append((t.time, t.status))
            found.quoted.append(t)
    for event in node_events(inp, node):
        status = READY_EVENTS.get(event.reason)
        if event.reason == "Starting" and event.message.strip() == KUBELET_START_MESSAGE:
            # An aggregated event counts every start; spread them over its span.
            if event.first_seen is not None:
                found.kubelet_starts.append(event.first_seen)
                extra = max(event.count - 1, 0)
                found.kubelet_starts.extend([event.last_seen or event.first_seen] * extra)
            found.quoted.append(event)
            continue
        if status is None:
            continue
        found.quoted.append(event)
        if transitions:
            continue  # the recorded transitions are exact; events only add context
        if event.first_seen is not None:
            raw.append((event.first_seen, status))
        if event.count > 1 and event.last_seen is not None:
            raw.append((event.last_seen, status))
    ready = node.ready
    if ready is not None and ready.last_transition is not None:
        raw.append((ready.last_transition, ready.status))
        found.quoted.append(ready)
    raw.sort(key=lambda item: item[0])
    for when, status in raw:
        if not found.changes or found.changes[-1][1] != status:
            found.changes.append((when, status))
    lifecycle_ready = next(
        (
            lc.first_ready
            for lc in inp.lifecycles_by_name.get(("Node", node.name), ())
            if (not node.uid or not lc.uid or lc.uid == node.uid) and lc.first_ready is not None
        ),
        None,
    )
    first_true = next((when for when, status in found.changes if status == "True"), None)
    found.first_ready = lifecycle_ready or first_true
    return found


def _suspect_mig(node: Node, ready_for: timedelta | None) -> bool:
    """The control-plane face of the MIG incident: a mig.config node Ready only briefly,
    or with its MIG state stuck mid-reconfigure."""
    if not node.mig_config:
        return False
    if ready_for is not None and ready_for <= MIG_SUSPECT_READY:
        return True
    return node.mig_config_state in MIG_STATES_IN_FLIGHT or bool(paused_operands(node))


def node_finding(inp: DiagnosisInput, node: Node) -> Finding | None:
    """The node's notready-loop finding, or None (node-not-ready asks too: judged once)."""
    # By the node's id, the node kept beside its verdict so that the id is never reused.
    judged: dict[int, tuple[Node, Finding | None]] = inp.memo(f"{NOTREADY_LOOP}.by-node", dict)
    held = judged.get(id(node))
    if held is None:
        held = judged[id(node)] = (node, _node_finding(inp, node))
    return held[1]


def _node_finding(inp: DiagnosisInput, node: Node) -> Finding | None:
    ready = node.ready
    if ready is None or node.deleting is not None:
        return None  # no kubelet report yet, or Karpenter is already taking it away
    history = _ready_history(inp, node)
    now = inp.now
    not_ready_now = ready.status != "True"
    down_since = ready.last_transition if not_ready_now else None
    down_for = now - down_since if down_since is not None else None

    early, ready_for = _early_failure(history, node, down_since, down_for)
    downs, starts = _flaps(history, now)
    flapping = downs >= FLAP_MIN_DOWNS or starts >= FLAP_MIN_KUBELET_STARTS
    if not early and not flapping:
        return None
    if mig_hook_holds(inp, node.name):
        return None  # mig-hook-kubelet-restart explains it, with the node's own logs

    stuck = not_ready_now and down_for is not None and down_for > STUCK_AFTER
    severity = CRITICAL if stuck else WARNING
    evidence = node_evidence_of(inp, node.name)
    has_logs = usable_journal(evidence, "kubelet") is not None
    name = node.name

    if early and _suspect_mig(node, ready_for) and not has_logs:
        ready_part = f"Ready for {human(ready_for)}, then " if ready_for is not None else ""
        unreadable = " (its bundle has no readable kubelet journal)" if evidence else ""
        summary = (
            f"{name} was {ready_part}NotReady for {human(down_for or timedelta())} and never "
            f"recovered; suspect MIG reconfiguration ({LABEL_MIG_CONFIG}={node.mig_config}) "
            f"restarting kubelet during bootstrap: run `mignurse collect {name}`{unreadable} "
            f"before the instance is replaced"
        )
    elif early:
        if ready_for is not None:
            lead = f"{name} went NotReady {human(ready_for)} after its first Ready"
        else:
            lead = f"{name} went NotReady within minutes of joining"
        tail = "" if has_logs else f"; run `mignurse collect {name}` for its journals"
        summary = f"{lead} and has not recovered for {human(down_for or timedelta())}{tail}"
    else:
        now_part = f"NotReady now for {human(down_for)}" if down_for is not None else "Ready now"
        summary = (
            f"{name} flaps: {downs} NotReady episodes and {starts} kubelet starts in the "
            f"last {human(FLAP_WINDOW)}; {now_part}"
        )

    found = _finding_evidence(history, node, evidence, has_logs)
    return Finding(
        id=NOTREADY_LOOP,
        severity=severity,
        nodepool=node.pool,
        nodes=(name,),
        summary=summary,
        evidence=tuple(found),
        runbooks=(RUNBOOK_CORDON_AND_COLLECT, RUNBOOK_REPLACE),
        deadline=ready_repair_deadline(inp, node) if not_ready_now else None,
    )


def _early_failure(
    history: ReadyHistory,
    node: Node,
    down_since: datetime | None,
    down_for: timedelta | None,
) -> tuple[bool, timedelta | None]:
    """Early failure: NotReady soon after first Ready (or joining) and not recovered since;
    and how long the node was Ready first, when known."""
    if down_since is None or down_for is None:
        return False, None
    if history.first_ready is not None and history.first_ready <= down_since:
        ready_for = down_since - history.first_ready
        return ready_for <= SOON_AFTER_READY, ready_for
    if history.first_ready is None and node.created is not None:
        # Never seen Ready: only once it has been down long enough not to be booting.
        return down_since - node.created <= SOON_AFTER_CREATION and down_for > STUCK_AFTER, None
    return False, None


def _flaps(history: ReadyHistory, now: datetime) -> tuple[int, int]:
    """NotReady episodes and kubelet starts within FLAP_WINDOW."""
    window_start = now - FLAP_WINDOW
    downs = sum(
        1
        for (_, before), (when, after) in zip(history.changes, history.changes[1:], strict=False)
        if before == "True" and after != "True" and when >= window_start
    )
    starts = sum(1 for when in history.kubelet_starts if when >= window_start)
    return downs, starts


def _finding_evidence(
    history: ReadyHistory, node: Node, evidence: NodeEvidence | None, has_logs: bool
) -> list[Evidence]:
    found = history.evidence()
    if node.mig_config:
        found.append(label_evidence(node, LABEL_MIG_CONFIG))
        if node.mig_config_state:
            found.append(label_evidence(node, LABEL_MIG_CONFIG_STATE))
        found.extend(paused_evidence(node))
    if node.created is not None:
        found.append(Evidence(node.created, "node", f"Node {node.name} created"))
    if evidence is not None:
        found.extend(evidence_problems(evidence))
        if not has_logs:
            found.append(Evidence(None, "journal:kubelet", "no readable kubelet journal"))
    return found


def rule(inp: DiagnosisInput) -> list[Finding]:
    findings: list[Finding] = []
    for node in inp.gpu_nodes:
        finding = node_finding(inp, node)
        if finding is not None:
            findings.append(finding)
    return findings
