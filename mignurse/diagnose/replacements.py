"""Every ended NodeClaim the input can still prove (`replacements`), with why it ended.

The Karpenter rules and the fleet table share it (docs/repair.md). The API server forgets
fast (events after ~1 h, NodeClaims as soon as their finalizer clears), so three sources are
merged, richest first: the local history's ended lifecycles, the snapshot's deleting
NodeClaims, and NodeClaims that only their events still remember (`_from_events`, which
pairs each with its gone Node and reads its end and cause from events alone).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from mignurse.cluster.history import Lifecycle
from mignurse.diagnose.automode import auto_mode_pool
from mignurse.diagnose.events import (
    EventIndex,
    Transition,
    cause_events,
    event_evidence,
    event_index,
    event_time,
    parse_transition,
)
from mignurse.diagnose.facts import (
    CONSOLIDATION_EVENTS,
    INSTANCE_GONE_EVENT,
    INTERRUPTION_EVENTS,
    REGISTRATION_EVENTS,
    REPAIR_TOLERATIONS,
    TERMINATING_ON_INTERRUPTION,
    TRANSITION_PREFIX,
    claim_cause,
    instance_gone_before,
    parse_go_duration,
    split_interruption_events,
)
from mignurse.diagnose.findings import Evidence
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.wording import condition_text, human_duration
from mignurse.model import Condition, Event, Node, NodeClaim, format_time, parse_time

# How far back replacements count: long enough for a slow loop, short enough to be "now".
WINDOW = timedelta(hours=6)
# NodeClaim conditions only a terminating claim gets: Drained and VolumesDetached (v1.6+) go
# Unknown → True while it drains, and Karpenter's status controller publishes that transition
# (kubernetes-sigs/karpenter pkg/controllers/node/termination/controller.go at v1.6.0;
# awslabs/operatorpkg status/controller.go). InstanceTerminating appears already True, so it
# gets no transition event from a real Karpenter; older snapshots of ours still carry one.
_TERMINATION_TRANSITIONS = ("Drained", "VolumesDetached", "InstanceTerminating")
# Events the Node termination flow publishes once the deletion happened (kubernetes-sigs/
# karpenter pkg/controllers/node/termination/terminator/events/events.go), and the disruption
# controller's note on a deleting node.
_NODE_TERMINATION_EVENTS = (
    "TerminationGracePeriodExpiring",
    "FailedDraining",
    "AwaitingVolumeDetachment",
)
# KC v1.2.0 on: the state node's error as the whole message (state/statenode.go); v1.0.0 and
# v1.1.0: "Cannot disrupt Node: " (or "NodeClaim: ") before v1.1.0's "state node is marked for
# deletion" (disruption/events/events.go `Blocked`)
_DELETING_NOTES = (
    "Node is deleting or marked for deletion",
    "Cannot disrupt Node: state node is marked for deletion",
    "Cannot disrupt NodeClaim: state node is marked for deletion",
)
# "All pods will be deleted by <the NodeClaim's termination-timestamp annotation>".
_TGP_EXPIRING = re.compile(r"All pods will be deleted by (\S+)")
# Published once a finalizer is gone (awslabs/operatorpkg status/controller.go).
_FINALIZED = "Finalized"
# Slack between a repair deadline and the first sign of the claim's termination.
_REPAIR_SLACK = timedelta(minutes=2)
# Karpenter tells a Node and its NodeClaim the same disruption within this.
_SAME_MOMENT = timedelta(seconds=10)
# A Node registers within seconds of its NodeClaim's Registered transition.
_REGISTRATION_PAIRING = timedelta(seconds=60)

# Event reasons that tell a cause, worth quoting (kubelet's boot warnings are not).
_TELLING = frozenset(
    (
        *INTERRUPTION_EVENTS,
        *REGISTRATION_EVENTS,
        *CONSOLIDATION_EVENTS,
        INSTANCE_GONE_EVENT,
        "NodeRepairBlocked",
    )
)
_NEVER_BEFORE = datetime.min.replace(tzinfo=UTC)

CAUSE_WORDS = {
    "repair": "Karpenter repair",
    "consolidation": "consolidation",
    "drift": "drift",
    "interruption": "EC2/spot interruption",
    "registration": "registration failure",
    "instance-gone": "instance gone outside Karpenter",
    "expiration": "expiration (expireAfter)",
    "manual": "manual deletion",
    "unknown": "unknown cause",
}


@dataclass(frozen=True, slots=True)
class Replacement:
    """One NodeClaim that ended, and why."""

    claim: str
    pool: str
    node: str
    cause: str  # claim_cause's words: repair, consolidation, drift, interruption, …
    created: datetime | None
    ended: datetime | None  # deletion requested (the moment Karpenter decided)
    image_id: str = ""
    unhealthy: tuple[str, str, str] | None = None  # (type, status, reason) before it ended
    unhealthy_message: str = ""
    unhealthy_since: datetime | None = None
    source: str = ""  # history | nodeclaim | event
    evidence: tuple[Evidence, ...] = field(default=())

    @property
    def lifetime(self) -> timedelta | None:
        if self.created is None or self.ended is None:
            return None
        return max(self.ended - self.created, timedelta(0))


def replacements(inp: DiagnosisInput, window: timedelta = WINDOW) -> list[Replacement]:
    """Every NodeClaim that ended within `window` of `now`, deduplicated by name, oldest
    first. History lifecycles are richest, then the snapshot, then events alone. Three
    rules ask for it: computed once per input and window."""
    return inp.memo(f"replacements.{window}", lambda: _replacements(inp, window))


def _replacements(inp: DiagnosisInput, window: timedelta) -> list[Replacement]:
    index = event_index(inp)
    about, node_transitions = index.by_object, index.node_transitions
    expire = {
        name: parse_go_duration(pool.expire_after) for name, pool in inp.snapshot.nodepools.items()
    }
    found: dict[str, Replacement] = {}

    for lc in inp.history.lifecycles:
        if lc.kind != "NodeClaim" or lc.ended is None:
            continue
        found[lc.name] = _from_lifecycle(lc, about, node_transitions, inp, expire.get(lc.pool))

    for claim in inp.snapshot.nodeclaims.values():
        if claim.deleting is None:
            continue
        fresh = _from_snapshot(claim, about, node_transitions, inp, expire.get(claim.pool))
        held = found.get(claim.name)
        found[claim.name] = fresh if held is None else _merge(held, fresh)

    known_nodes = set(inp.snapshot.nodes) | {
        lc.name for lc in inp.history.lifecycles if lc.kind == "Node" and lc.ended is None
    }
    for rebuilt in _from_events(index, set(found), inp, known_nodes, expire):
        found[rebuilt.claim] = rebuilt

    since = inp.now - window
    chosen = [r for r in found.values() if r.ended is None or r.ended >= since]
    chosen.sort(key=lambda r: (r.ended or inp.now, r.claim))
    return chosen


def _about(about: Mapping[str, list[Event]], *names: str) -> list[Event]:
    out: list[Event] = []
    for name in dict.fromkeys(n for n in names if n):
        out.extend(about.get(name, ()))
    return out


def _last_unhealthy(
    trs: Iterable[Transition], before: datetime | None, type_: str | None = None
) -> Transition | None:
    """The node's last move into a repair-matching status at or before `before`."""
    eligible = [
        tr
        for tr in trs
        if (tr.type, tr.new) in REPAIR_TOLERATIONS
        and (type_ is None or tr.type == type_)
        and (before is None or tr.time is None or tr.time <= before)
    ]
    return max(eligible, key=lambda tr: tr.time or _NEVER_BEFORE, default=None)


def _node_unhealthy_evidence(
    node: str, unhealthy: tuple[str, str, str] | None, trs: list[Transition], ended: datetime | None
) -> tuple[tuple[str, str, str] | None, str, datetime | None, list[Evidence]]:
    """Fill the condition, its message and start from the node's transition events."""
    tr = _last_unhealthy(trs, ended, unhealthy[0] if unhealthy else None)
    if tr is None:
        return unhealthy, "", None, []
    cond = unhealthy or (tr.type, tr.new, tr.reason)
    return cond, tr.message, tr.time, [event_evidence(tr.event)]


def _from_lifecycle(
    lc: Lifecycle,
    about: Mapping[str, list[Event]],
    node_transitions: Mapping[str, list[Transition]],
    inp: DiagnosisInput,
    expire_after: timedelta | None,
) -> Replacement:
    events = cause_events(_about(about, lc.name, lc.node_name))
    cause = claim_cause(lc, events, expire_after)
    echoes = split_interruption_events(events, lc.deleting_since)[1]
    unhealthy, message, since, evidence = _node_unhealthy_evidence(
        lc.node_name, lc.last_unhealthy, list(node_transitions.get(lc.node_name, ())), lc.ended
    )
    since = since or _history_since(inp, lc.node_name, unhealthy, lc.ended)
    annotation = (
        f"karpenter.sh/nodeclaim-termination-timestamp={format_time(lc.termination_timestamp)}"
        if lc.termination_timestamp
        else "no termination-timestamp annotation"
    )
    lifetime = lc.lifetime
    text = (
        f"NodeClaim {lc.name} (node {lc.node_name or 'never registered'}, image "
        f"{lc.image_id or '?'}) deletion requested {format_time(lc.deleting_since)}, "
        f"{'gone ' + (format_time(lc.deleted_at) or '') if lc.deleted_at else 'still terminating'}"
        f"; {annotation}; DisruptionReason "
        f"{lc.disruption_reason or 'none'}"
        + (f"; lived {human_duration(lifetime)}" if lifetime is not None else "")
        + (f"; last unhealthy {unhealthy[0]}={unhealthy[1]} {unhealthy[2]}" if unhealthy else "")
        + f" → {_cause_words(inp, cause, lc.pool)}"
    )
    evidence.insert(0, Evidence(lc.ended, "history", text))
    evidence += _gone_evidence(cause, events)
    if echoes:
        evidence.append(_echo_evidence(echoes, _cause_words(inp, cause, lc.pool)))
    return Replacement(
        claim=lc.name,
        pool=lc.pool,
        node=lc.node_name,
        cause=cause,
        created=lc.created or lc.first_seen,
        ended=lc.ended,
        image_id=lc.image_id,
        unhealthy=unhealthy,
        unhealthy_message=message,
        unhealthy_since=since,
        source="history",
        evidence=tuple(evidence),
    )


def _gone_evidence(cause: str, events: list[Event]) -> list[Evidence]:
    """The cloud node lifecycle controller's word that the instance was gone, for that cause."""
    if cause != "instance-gone":
        return []
    return [event_evidence(e) for e in events if e.reason == INSTANCE_GONE_EVENT]


def _history_since(
    inp: DiagnosisInput, node: str, unhealthy: tuple[str, str, str] | None, ended: datetime | None
) -> datetime | None:
    """When the recorded condition flips say the node turned unhealthy."""
    if not node or unhealthy is None:
        return None
    best: datetime | None = None
    for tr in inp.transitions_by_name.get(("Node", node), ()):
        if tr.condition != unhealthy[0]:
            continue
        if tr.status != unhealthy[1] or (ended is not None and tr.time > ended):
            continue
        if best is None or tr.time > best:
            best = tr.time
    return best


def _from_snapshot(
    claim: NodeClaim,
    about: Mapping[str, list[Event]],
    node_transitions: Mapping[str, list[Transition]],
    inp: DiagnosisInput,
    expire_after: timedelta | None,
) -> Replacement:
    events = cause_events(_about(about, claim.name, claim.node_name))
    cause = claim_cause(claim, events, expire_after)
    echoes = split_interruption_events(events, claim.deleting)[1]
    node = inp.snapshot.nodes.get(claim.node_name) if claim.node_name else None
    unhealthy: tuple[str, str, str] | None = None
    message = ""
    since: datetime | None = None
    evidence: list[Evidence] = []
    if node is not None:
        cond = unhealthy_condition(node, inp.repair_tolerations)
        if cond is not None:
            unhealthy = (cond.type, cond.status, cond.reason)
            message, since = cond.message, cond.last_transition
            evidence.append(
                Evidence(
                    cond.last_transition,
                    "condition",
                    condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                    + f" since {format_time(cond.last_transition)}",
                )
            )
    if unhealthy is None:
        unhealthy, message, since, more = _node_unhealthy_evidence(
            claim.node_name, None, list(node_transitions.get(claim.node_name, ())), claim.deleting
        )
        evidence.extend(more)
    disruption = claim.condition("DisruptionReason")
    annotation = (
        f"karpenter.sh/nodeclaim-termination-timestamp={format_time(claim.termination_timestamp)}"
        if claim.termination_timestamp
        else "no termination-timestamp annotation"
    )
    lifetime = claim.deleting - claim.created if claim.deleting and claim.created else None
    text = (
        f"NodeClaim {claim.name} (node {claim.node_name or 'never registered'}, image "
        f"{claim.image_id or '?'}) deletionTimestamp={format_time(claim.deleting)}; "
        f"{annotation}; DisruptionReason "
        f"{(disruption.reason or disruption.status) if disruption else 'none'}"
        + (f"; lived {human_duration(lifetime)}" if lifetime is not None else "")
        + f" → {_cause_words(inp, cause, claim.pool)}"
    )
    evidence.insert(0, Evidence(claim.deleting, "nodeclaim", text))
    evidence += _gone_evidence(cause, events)
    if echoes:
        evidence.append(_echo_evidence(echoes, _cause_words(inp, cause, claim.pool)))
    return Replacement(
        claim=claim.name,
        pool=claim.pool,
        node=claim.node_name,
        cause=cause,
        created=claim.created,
        ended=claim.deleting,
        image_id=claim.image_id,
        unhealthy=unhealthy,
        unhealthy_message=message,
        unhealthy_since=since,
        source="nodeclaim",
        evidence=tuple(evidence),
    )


def unhealthy_condition(
    node: Node, tolerations: Mapping[tuple[str, str], timedelta] = REPAIR_TOLERATIONS
) -> Condition | None:
    """The node's condition that matches a repair policy, earliest deadline first;
    one without a transition time sorts last."""
    matching = [c for c in node.conditions if (c.type, c.status) in tolerations]
    if not matching:
        return None
    return min(
        matching,
        key=lambda c: (
            c.last_transition is None,
            (c.last_transition or _NEVER_BEFORE) + tolerations[(c.type, c.status)],
        ),
    )


def _merge(history: Replacement, snapshot: Replacement) -> Replacement:
    """History knows the lifetime; the live NodeClaim shows its annotation as it is now."""
    return replace(
        history,
        cause=history.cause if history.cause != "unknown" else snapshot.cause,
        unhealthy=history.unhealthy or snapshot.unhealthy,
        unhealthy_message=history.unhealthy_message or snapshot.unhealthy_message,
        unhealthy_since=history.unhealthy_since or snapshot.unhealthy_since,
        image_id=history.image_id or snapshot.image_id,
        evidence=_unique(history.evidence + snapshot.evidence),
    )


def _unique(evidence: Iterable[Evidence]) -> tuple[Evidence, ...]:
    return tuple(dict.fromkeys(evidence))


def _from_events(
    index: EventIndex,
    skip: set[str],
    inp: DiagnosisInput,
    known_nodes: set[str],
    expire: Mapping[str, timedelta | None],
) -> list[Replacement]:
    """NodeClaims gone from the API that only their events remember, each paired with the
    gone Node that was it (no Node twice)."""
    about, node_transitions = index.by_object, index.node_transitions
    claims = {
        name
        for name in index.claim_names
        if name not in skip and name not in inp.snapshot.nodeclaims
    }
    gone_nodes = {name for name in index.node_names if name and name not in known_nodes}
    gone = _GoneNodes.of(gone_nodes, about, node_transitions)
    out: list[Replacement] = []
    for name in sorted(claims):
        own = about.get(name, [])
        own_transitions = [t for e in own if (t := parse_transition(e)) is not None]
        node = _pair_node(
            cause_events(own)
            + [t.event for t in own_transitions if (t.type, t.new) in REPAIR_TOLERATIONS],
            _transition_time(own, "Registered"),
            _termination_start(own, []),
            gone,
            node_transitions,
            inp.repair_tolerations,
        )
        gone.unpaired.discard(node)
        rebuilt = _gone_claim(name, node, own_transitions, about, node_transitions, inp, expire)
        if rebuilt is not None:
            out.append(rebuilt)
    return out


def _gone_claim(
    name: str,
    node: str,
    own_transitions: list[Transition],
    about: Mapping[str, list[Event]],
    node_transitions: Mapping[str, list[Transition]],
    inp: DiagnosisInput,
    expire: Mapping[str, timedelta | None],
) -> Replacement | None:
    """One gone NodeClaim read from its own and its Node's events; None when nothing shows
    that it ended (its events may have expired before it did)."""
    own = about.get(name, [])
    causes = cause_events(own)
    node_events = about.get(node, []) if node else []
    told = causes + cause_events(node_events)
    ended, past_deadline = _claim_end(
        own, own_transitions, node_events, node_transitions.get(node, ()), inp
    )
    if ended is None and not {e.reason for e in causes} & set(REGISTRATION_EVENTS):
        return None
    pool = _pool_of_claim(name, inp)
    echoes = split_interruption_events(told, ended)[1]
    evidence = _told_evidence(told, echoes, own + node_events)
    unhealthy, message, since, more = _node_unhealthy_evidence(
        node, None, list(node_transitions.get(node, ())) or own_transitions, ended
    )
    evidence.extend(more)
    if past_deadline:
        evidence.append(
            Evidence(
                ended,
                "event",
                f"NodeClaim {name} is absent from the NodeClaim list; its repair deadline "
                f"passed at {format_time(ended)}",
            )
        )
    launched = _transition_time(own, "Launched")
    registered = _transition_time(own, "Registered")
    cause = _cause_from_events(
        {e.reason for e in told},
        told,
        launched,
        registered,
        ended,
        unhealthy,
        since,
        _repair_annotation(told),
        inp.repair_tolerations,
    )
    if echoes:
        evidence.append(_echo_evidence(echoes, _cause_words(inp, cause, pool)))
    created = launched or registered
    expire_after = expire.get(pool)
    if cause == "unknown" and expire_after and created and ended:
        cause = "expiration" if ended - created >= expire_after else cause
    summary = _gone_summary(name, node, launched, created, ended, _cause_words(inp, cause, pool))
    return Replacement(
        claim=name,
        pool=pool,
        node=node,
        cause=cause,
        created=created,
        ended=ended,
        unhealthy=unhealthy,
        unhealthy_message=message,
        unhealthy_since=since,
        source="event",
        evidence=_unique([summary, *evidence]),
    )


def _told_evidence(
    told: list[Event], echoes: list[Event], own_and_node: list[Event]
) -> list[Evidence]:
    """The events that tell a gone NodeClaim's cause (its EC2 echoes left out), then the
    first three its termination left."""
    evidence = [event_evidence(e) for e in told if e.reason in _TELLING and e not in echoes]
    evidence += [
        event_evidence(e)
        for e in own_and_node
        if e.reason in CONSOLIDATION_EVENTS + _NODE_TERMINATION_EVENTS
        or (e.reason in _TERMINATION_TRANSITIONS and e.message.startswith(TRANSITION_PREFIX))
    ][:3]
    return evidence


def _gone_summary(
    name: str,
    node: str,
    launched: datetime | None,
    created: datetime | None,
    ended: datetime | None,
    cause_words: str,
) -> Evidence:
    """The line that opens a gone NodeClaim's evidence: its life as its events tell it."""
    lifetime = ended - created if ended and created else None
    return Evidence(
        ended,
        "event",
        f"NodeClaim {name} (node {node or 'unknown'}) is gone; its events show it "
        + (f"launched {format_time(launched)}, " if launched else "")
        + (f"terminating from {format_time(ended)}" if ended else "no sign of when it ended")
        + (f" (lived about {human_duration(lifetime)})" if lifetime else "")
        + f" → {cause_words}",
    )


def _claim_end(
    own: list[Event],
    own_transitions: list[Transition],
    node_events: list[Event],
    node_transitions: Iterable[Transition],
    inp: DiagnosisInput,
) -> tuple[datetime | None, bool]:
    """When a gone NodeClaim began terminating, and whether that moment is only its repair
    deadline (absent from a NodeClaim list after the deadline passed: repair took it)."""
    ended = _termination_start(own, node_events)
    if ended is not None or not inp.snapshot.nodeclaims:
        return ended, False
    last = _last_unhealthy(own_transitions, inp.now) or _last_unhealthy(node_transitions, inp.now)
    toleration = inp.repair_tolerations.get((last.type, last.new)) if last is not None else None
    deadline = last.time + toleration if last and last.time and toleration else None
    if deadline is not None and deadline <= inp.now:
        return deadline, True
    return None, False


def _cause_words(inp: DiagnosisInput, cause: str, pool: str) -> str:
    """The cause in words; a repair in an Auto Mode pool is EKS Auto Mode's, not
    self-managed Karpenter's (diagnose/automode.py)."""
    if cause == "repair" and auto_mode_pool(inp, pool):
        return "EKS Auto Mode repair"
    return CAUSE_WORDS.get(cause, cause)


def _echo_evidence(echoes: list[Event], cause_words: str) -> Evidence:
    """Say why an EC2 state-change event did not decide the cause."""
    first = min(echoes, key=event_time)
    return Evidence(
        first.first_seen or first.last_seen,
        "event",
        f"{first.type} {first.reason} on {first.involved_kind} {first.involved_name} "
        f'"{first.message}" came after the deletion: the interruption queue\'s echo of a '
        f"termination already under way ({cause_words}), not its cause "
        f"(no {TERMINATING_ON_INTERRUPTION})",
    )


def _termination_start(
    claim_events: Iterable[Event], node_events: Iterable[Event]
) -> datetime | None:
    """When the NodeClaim's deletion began, from the events its termination leaves: exact
    markers first (the interruption or disruption decision, the Node's drain, the repair
    annotation's own time); else the latest it can have been (an EC2 state-change echo, the
    finalizer's removal)."""
    exact: list[datetime] = []
    later: list[datetime] = []
    for event in (*claim_events, *node_events):
        seen = event.first_seen or event.last_seen
        if seen is None:
            continue
        if event.message.startswith(TRANSITION_PREFIX):
            if event.reason in _TERMINATION_TRANSITIONS and event.involved_kind == "NodeClaim":
                exact.append(seen)
            continue
        if event.reason in (TERMINATING_ON_INTERRUPTION, *CONSOLIDATION_EVENTS):
            exact.append(seen)
        elif event.reason in _NODE_TERMINATION_EVENTS or (
            event.reason == "DisruptionBlocked" and event.message in _DELETING_NOTES
        ):
            exact.append(seen)
            if (marked := _annotation_time(event)) is not None and marked <= seen:
                exact.append(marked)
        elif event.reason in INTERRUPTION_EVENTS or event.reason == _FINALIZED:
            later.append(seen)
    if exact:
        return min(exact)
    return min(later) if later else None


def _annotation_time(event: Event) -> datetime | None:
    """The termination-timestamp a TerminationGracePeriodExpiring event quotes."""
    if event.reason != "TerminationGracePeriodExpiring":
        return None
    match = _TGP_EXPIRING.search(event.message)
    return parse_time(match.group(1)) if match else None


def _repair_annotation(events: Iterable[Event]) -> datetime | None:
    """The repair fingerprint in events: TerminationGracePeriodExpiring quoting a time no
    later than its own. Repair writes the termination-timestamp as "now" (kubernetes-sigs/
    karpenter pkg/controllers/node/health/controller.go `annotateTerminationGracePeriod`); a
    terminationGracePeriod writes deletion + TGP, later than the event."""
    for event in events:
        marked = _annotation_time(event)
        seen = event.first_seen or event.last_seen
        if marked is not None and seen is not None and marked <= seen + _SAME_MOMENT:
            return marked
    return None


def _transition_time(events: Iterable[Event], type_: str) -> datetime | None:
    for event in events:
        tr = parse_transition(event)
        if tr is not None and tr.type == type_ and tr.new == "True":
            return tr.time
    return None


def _node_registered(events: Iterable[Event]) -> datetime | None:
    times = [
        e.first_seen
        for e in events
        if e.reason in ("RegisteredNode", "Starting", "NodeReady") and e.first_seen is not None
    ]
    return min(times) if times else None


def _pool_of_claim(name: str, inp: DiagnosisInput) -> str:
    """NodeClaims are named `<nodepool>-<random>`; prefer a NodePool we know."""
    known = [p for p in inp.snapshot.nodepools if name.startswith(p + "-")]
    if known:
        return max(known, key=len)
    return name.rsplit("-", 1)[0] if "-" in name else ""


def _node_words(message: str) -> str:
    """Karpenter words one disruption alike for a Node and its NodeClaim, naming each by its
    kind: the message as it reads about the Node."""
    return message.replace("NodeClaim", "Node")


@dataclass(slots=True)
class _GoneNodes:
    """The gone Nodes a gone NodeClaim may have been (no Node twice: `unpaired`), indexed so
    that pairing a claim looks at the few that fit, not at every gone Node."""

    unpaired: set[str]
    # (reason, message in the Node's words) → (first seen, Node) of each event about one
    told: dict[tuple[str, str], list[tuple[datetime, str]]]
    registered: list[tuple[datetime, str]]  # when each registered, oldest first
    unhealthy: list[tuple[datetime, str]]  # each move into a repair-matching status, oldest first

    @classmethod
    def of(
        cls,
        names: set[str],
        about: Mapping[str, list[Event]],
        node_transitions: Mapping[str, list[Transition]],
    ) -> _GoneNodes:
        told: dict[tuple[str, str], list[tuple[datetime, str]]] = {}
        registered: list[tuple[datetime, str]] = []
        unhealthy: list[tuple[datetime, str]] = []
        for node in names:
            events = about.get(node, ())
            for e in events:
                if e.first_seen is not None:
                    told.setdefault((e.reason, _node_words(e.message)), []).append(
                        (e.first_seen, node)
                    )
            if (joined := _node_registered(events)) is not None:
                registered.append((joined, node))
            unhealthy.extend(
                (tr.time, node)
                for tr in node_transitions.get(node, ())
                if tr.time is not None and (tr.type, tr.new) in REPAIR_TOLERATIONS
            )
        registered.sort()
        unhealthy.sort()
        return cls(set(names), told, registered, unhealthy)


def _pair_node(
    claim_causes: list[Event],
    registered: datetime | None,
    ended: datetime | None,
    gone: _GoneNodes,
    node_transitions: Mapping[str, list[Transition]],
    tolerations: Mapping[tuple[str, str], timedelta],
) -> str:
    """The gone Node that was this gone NodeClaim: told the same disruption at the same
    moment (Karpenter emits it on both), registered together, or unhealthy for exactly a
    repair toleration before the claim started terminating. Of several, the first by name
    (the nearest registration first)."""
    candidates = gone.unpaired
    for event in claim_causes:
        telling = event.reason in _TELLING or event.message.startswith(TRANSITION_PREFIX)
        if not telling or event.first_seen is None:
            continue
        same = [
            node
            for seen, node in gone.told.get((event.reason, _node_words(event.message)), ())
            if node in candidates and abs(seen - event.first_seen) <= _SAME_MOMENT
        ]
        if same:
            return min(same)
    if registered is not None:
        # Only a registration within the pairing window can pair: look at those alone.
        first = bisect_left(gone.registered, registered - _REGISTRATION_PAIRING, key=_moment)
        near = []
        for joined, node in gone.registered[first:]:
            if joined > registered + _REGISTRATION_PAIRING:
                break
            if node in candidates:
                near.append((abs(joined - registered), node))
        if near:
            return min(near)[1]
    if ended is not None:
        # A Node's last move before `ended` pairs only if its toleration (at most the
        # longest) brings its deadline within the slack of `ended`: it moved in this span.
        longest = max(tolerations.values(), default=timedelta(0))
        first = bisect_left(gone.unhealthy, ended - _REPAIR_SLACK - longest, key=_moment)
        last = bisect_right(gone.unhealthy, ended, key=_moment)
        for node in sorted({n for _, n in gone.unhealthy[first:last] if n in candidates}):
            tr = _last_unhealthy(node_transitions.get(node, ()), ended)
            toleration = tolerations.get((tr.type, tr.new)) if tr is not None else None
            if tr is None or tr.time is None or toleration is None:
                continue
            deadline = tr.time + toleration
            if deadline - _REPAIR_SLACK <= ended <= deadline + _REPAIR_SLACK:
                return node
    return ""


def _moment(entry: tuple[datetime, str]) -> datetime:
    return entry[0]


def _cause_from_events(
    reasons: set[str],
    events: list[Event],
    launched: datetime | None,
    registered: datetime | None,
    ended: datetime | None,
    unhealthy: tuple[str, str, str] | None,
    since: datetime | None,
    repair_mark: datetime | None,
    tolerations: Mapping[tuple[str, str], timedelta],
) -> str:
    """claim_cause's order, read from events alone: what came first wins."""
    if TERMINATING_ON_INTERRUPTION in reasons:
        return "interruption"
    disruption = [e for e in events if e.reason in CONSOLIDATION_EVENTS]
    if disruption:
        return "drift" if any("Drift" in e.message for e in disruption) else "consolidation"
    # Launched, never Registered: liveness deletes silently, no Warning needed (Karpenter liveness).
    if registered is None and (reasons & set(REGISTRATION_EVENTS) or launched is not None):
        return "registration"
    if repair_mark is not None:
        return "repair"
    if unhealthy is not None and since is not None and ended is not None:
        toleration = tolerations.get((unhealthy[0], unhealthy[1]))
        if toleration is not None and ended >= since + toleration - _REPAIR_SLACK:
            return "repair"
    if split_interruption_events(events, ended)[0]:
        return "interruption"
    if instance_gone_before(events, ended):
        return "instance-gone"
    return "unknown"
