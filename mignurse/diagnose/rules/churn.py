"""`replacement-churn`: nodes of a pool replaced again and again for reasons other than repair.

This module also holds what the Karpenter rules share: every ended NodeClaim the input can
still prove (`replacements`), with why it ended (domain.md §1.7, §1.9). The API server
forgets fast (events after ~1 h, NodeClaims as soon as their finalizer clears), so three
sources are merged, richest first: the local history's ended lifecycles, the snapshot's
deleting NodeClaims, and NodeClaims that only their events still remember.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from mignurse.cluster.history import Lifecycle
from mignurse.diagnose.facts import (
    CONSOLIDATION_EVENTS,
    INTERRUPTION_EVENTS,
    REGISTRATION_EVENTS,
    REPAIR_TOLERATIONS,
    TRANSITION_PREFIX,
    claim_cause,
    parse_go_duration,
)
from mignurse.diagnose.findings import INFO, REPLACEMENT_CHURN, WARNING, Evidence, Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import Condition, Event, Node, NodeClaim, format_time

# How far back replacements count: long enough for a slow loop, short enough to be "now".
WINDOW = timedelta(hours=6)
# Churn thresholds (design.md "severity by rate").
MIN_REPLACEMENTS = 2  # one replacement is ordinary life; two in the window is a pattern
SHORT_LIFETIME = timedelta(minutes=30)  # a GPU node that lives less than this wastes its boot
REPEATED_REGISTRATION_FAILURES = 2  # NodePool NodeRegistrationHealthy flips on repeats (§1.6)
REPEATED_INTERRUPTIONS = 3
HIGH_RATE_PER_HOUR = 4.0  # non-consolidation replacements per hour that deserve a look


_TRANSITION = re.compile(
    r"Status condition transitioned, Type: (?P<type>[^,]+), Status: (?P<old>\w+) -> "
    r"(?P<new>\w+)(?:, Reason: (?P<reason>[^,]*))?(?:, Message: (?P<message>.*))?$",
    re.DOTALL,
)
# NodeClaim condition transitions that only a terminating claim goes through (§1.6).
_TERMINATION_TRANSITIONS = ("Drained", "VolumesDetached", "InstanceTerminating")
# Slack between a repair deadline and the first sign of the claim's termination.
_REPAIR_SLACK = timedelta(minutes=2)
# Karpenter tells a Node and its NodeClaim the same disruption within this.
_SAME_MOMENT = timedelta(seconds=10)
# A Node registers within seconds of its NodeClaim's Registered transition.
_REGISTRATION_PAIRING = timedelta(seconds=60)

# Event reasons that tell a cause, worth quoting (kubelet's boot warnings are not).
_TELLING = frozenset(
    (*INTERRUPTION_EVENTS, *REGISTRATION_EVENTS, *CONSOLIDATION_EVENTS, "NodeRepairBlocked")
)
_NEVER_BEFORE = datetime.min.replace(tzinfo=UTC)
_NEVER_AFTER = datetime.max.replace(tzinfo=UTC)

CAUSE_WORDS = {
    "repair": "Karpenter repair",
    "consolidation": "consolidation",
    "drift": "drift",
    "interruption": "EC2/spot interruption",
    "registration": "registration failure",
    "expiration": "expiration (expireAfter)",
    "manual": "manual deletion",
    "unknown": "unknown cause",
}


# -- shared by the Karpenter rules ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """One Karpenter "Status condition transitioned" event, parsed."""

    object_kind: str
    object_name: str
    type: str
    old: str
    new: str
    reason: str
    message: str
    time: datetime | None
    event: Event


def parse_transition(event: Event) -> Transition | None:
    if not event.message.startswith(TRANSITION_PREFIX):
        return None
    match = _TRANSITION.match(event.message.strip())
    if match is None:
        return None
    return Transition(
        object_kind=event.involved_kind,
        object_name=event.involved_name,
        type=match["type"].strip(),
        old=match["old"],
        new=match["new"],
        reason=(match["reason"] or "").strip(),
        message=(match["message"] or "").strip(),
        time=event.first_seen or event.last_seen,
        event=event,
    )


def all_events(inp: DiagnosisInput) -> list[Event]:
    """The snapshot's events plus those only the history still holds, one copy each
    (the newest occurrence wins), oldest first. Computed once per input."""
    return inp.memo("churn.all_events", lambda: _all_events(inp))


def _all_events(inp: DiagnosisInput) -> list[Event]:
    merged: dict[str, Event] = {}
    for event in (*inp.history.events, *inp.snapshot.events):
        key = event.uid or f"{event.namespace}/{event.name}"
        held = merged.get(key)
        if held is None or _event_time(event) >= _event_time(held):
            merged[key] = event
    return sorted(merged.values(), key=_event_time)


def _event_time(event: Event) -> datetime:
    return event.last_seen or event.first_seen or _NEVER_BEFORE


def event_text(event: Event) -> str:
    """An event as an engineer finds it with `kubectl get events`."""
    count = f" (x{event.count} since {format_time(event.first_seen)})" if event.count > 1 else ""
    return (
        f"{event.type} {event.reason} on {event.involved_kind} {event.involved_name}"
        f" [{event.source or 'unknown source'}]: {event.message}{count}"
    )


def event_evidence(event: Event) -> Evidence:
    return Evidence(event.last_seen or event.first_seen, "event", event_text(event))


def condition_text(node: str, type_: str, status: str, reason: str, message: str) -> str:
    detail = f" {reason}" if reason else ""
    said = f' "{message}"' if message else ""
    return f"Node {node}: {type_}={status}{detail}{said}"


def human_duration(delta: timedelta) -> str:
    """12m 5s, 1h 3m, 2d 4h: what an engineer reads at a glance."""
    seconds = int(abs(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


def relative(when: datetime, now: datetime) -> str:
    """ "in 3m" / "4m ago" beside a time."""
    delta = when - now
    return (
        f"in {human_duration(delta)}"
        if delta.total_seconds() >= 0
        else (f"{human_duration(delta)} ago")
    )


def short_time(when: datetime | None) -> str:
    text = format_time(when)
    return text[11:] if text else "?"  # HH:MM:SSZ: the date is rarely in doubt on call


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
    return inp.memo(f"churn.replacements.{window}", lambda: _replacements(inp, window))


def _replacements(inp: DiagnosisInput, window: timedelta) -> list[Replacement]:
    events = all_events(inp)
    about = _events_by_object(events)
    transitions = [t for e in events if (t := parse_transition(e)) is not None]
    node_transitions: dict[str, list[Transition]] = {}
    for tr in transitions:
        if tr.object_kind == "Node":
            node_transitions.setdefault(tr.object_name, []).append(tr)
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
    for rebuilt in _from_events(
        events, about, node_transitions, set(found), inp, known_nodes, expire
    ):
        found[rebuilt.claim] = rebuilt

    since = inp.now - window
    chosen = [r for r in found.values() if r.ended is None or r.ended >= since]
    chosen.sort(key=lambda r: (r.ended or inp.now, r.claim))
    return chosen


def cause_events(events: Iterable[Event]) -> list[Event]:
    """Events that can tell a cause. Karpenter's transition echoes are left out: their
    reason is the condition type, and "InstanceTerminating" (a NodeClaim condition every
    terminating claim reaches) would read as an EC2 interruption (§1.7)."""
    return [e for e in events if not e.message.startswith(TRANSITION_PREFIX)]


def _events_by_object(events: Iterable[Event]) -> dict[str, list[Event]]:
    index: dict[str, list[Event]] = {}
    for event in events:
        index.setdefault(event.involved_name, []).append(event)
    return index


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
    events = _about(about, lc.name, lc.node_name)
    cause = claim_cause(lc, cause_events(events), expire_after)
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
        + f" → {CAUSE_WORDS.get(cause, cause)}"
    )
    evidence.insert(0, Evidence(lc.ended, "history", text))
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


def _history_since(
    inp: DiagnosisInput, node: str, unhealthy: tuple[str, str, str] | None, ended: datetime | None
) -> datetime | None:
    """When the recorded condition flips say the node turned unhealthy."""
    if not node or unhealthy is None:
        return None
    best: datetime | None = None
    for tr in inp.history.transitions:
        if tr.kind != "Node" or tr.name != node or tr.condition != unhealthy[0]:
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
    events = _about(about, claim.name, claim.node_name)
    cause = claim_cause(claim, cause_events(events), expire_after)
    node = inp.snapshot.nodes.get(claim.node_name) if claim.node_name else None
    unhealthy: tuple[str, str, str] | None = None
    message = ""
    since: datetime | None = None
    evidence: list[Evidence] = []
    if node is not None:
        cond = unhealthy_condition(node)
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
        + f" → {CAUSE_WORDS.get(cause, cause)}"
    )
    evidence.insert(0, Evidence(claim.deleting, "nodeclaim", text))
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


def unhealthy_condition(node: Node) -> Condition | None:
    """The node's condition that matches a repair policy, earliest deadline first (§1.4);
    one without a transition time sorts last."""
    matching = [c for c in node.conditions if (c.type, c.status) in REPAIR_TOLERATIONS]
    if not matching:
        return None
    return min(
        matching,
        key=lambda c: (
            c.last_transition is None,
            (c.last_transition or _NEVER_BEFORE) + REPAIR_TOLERATIONS[(c.type, c.status)],
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
    events: list[Event],
    about: Mapping[str, list[Event]],
    node_transitions: Mapping[str, list[Transition]],
    skip: set[str],
    inp: DiagnosisInput,
    known_nodes: set[str],
    expire: Mapping[str, timedelta | None],
) -> list[Replacement]:
    """NodeClaims gone from the API that only their events remember (§1.9)."""
    claims = {
        e.involved_name
        for e in events
        if e.involved_kind == "NodeClaim"
        and e.involved_name not in skip
        and e.involved_name not in inp.snapshot.nodeclaims
    }
    gone_nodes = {
        e.involved_name
        for e in events
        if e.involved_kind == "Node" and e.involved_name and e.involved_name not in known_nodes
    }
    node_registered = {n: _node_registered(about.get(n, ())) for n in gone_nodes}
    paired: set[str] = set()
    out: list[Replacement] = []
    for name in sorted(claims):
        own = about.get(name, [])
        ended = _termination_start(own)
        causes = cause_events(own)
        reasons = {e.reason for e in causes}
        own_transitions = [t for e in own if (t := parse_transition(e)) is not None]
        gone_after_deadline = False
        if ended is None and inp.snapshot.nodeclaims:
            # Absent from a NodeClaim list after its repair deadline: repair took it (§1.9).
            last = _last_unhealthy(own_transitions, inp.now)
            deadline = (
                last.time + REPAIR_TOLERATIONS[(last.type, last.new)]
                if last and last.time
                else None
            )
            if deadline is not None and deadline <= inp.now:
                ended, gone_after_deadline = deadline, True
        if ended is None and not reasons & set(REGISTRATION_EVENTS):
            continue  # no sign of its end: maybe its events expired before it did
        registered = _transition_time(own, "Registered")
        launched = _transition_time(own, "Launched")
        pool = _pool_of_claim(name, inp)
        node = _pair_node(
            causes + [t.event for t in own_transitions if (t.type, t.new) in REPAIR_TOLERATIONS],
            registered,
            ended,
            gone_nodes - paired,
            about,
            node_registered,
            node_transitions,
        )
        if node:
            paired.add(node)
        node_causes = cause_events(about.get(node, ())) if node else []
        all_reasons = reasons | {e.reason for e in node_causes}
        evidence = [event_evidence(e) for e in causes + node_causes if e.reason in _TELLING]
        evidence += [
            event_evidence(e)
            for e in own
            if e.reason in _TERMINATION_TRANSITIONS + CONSOLIDATION_EVENTS
        ][:2]
        unhealthy, message, since, more = _node_unhealthy_evidence(
            node, None, list(node_transitions.get(node, ())) or own_transitions, ended
        )
        evidence.extend(more)
        if gone_after_deadline:
            evidence.append(
                Evidence(
                    ended,
                    "event",
                    f"NodeClaim {name} is absent from the NodeClaim list; its repair deadline "
                    f"passed at {format_time(ended)}",
                )
            )
        cause = _cause_from_events(
            all_reasons, causes + node_causes, launched, registered, ended, unhealthy, since
        )
        created = launched or registered
        expire_after = expire.get(pool)
        if cause == "unknown" and expire_after and created and ended:
            cause = "expiration" if ended - created >= expire_after else cause
        lifetime = ended - created if ended and created else None
        evidence.insert(
            0,
            Evidence(
                ended,
                "event",
                f"NodeClaim {name} (node {node or 'unknown'}) is gone; its events show it "
                + (f"launched {format_time(launched)}, " if launched else "")
                + f"terminating from {format_time(ended)}"
                + (f" (lived about {human_duration(lifetime)})" if lifetime else "")
                + f" → {CAUSE_WORDS.get(cause, cause)}",
            ),
        )
        out.append(
            Replacement(
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
                evidence=_unique(evidence),
            )
        )
    return out


def _termination_start(events: Iterable[Event]) -> datetime | None:
    times = [
        e.first_seen or e.last_seen
        for e in events
        if (e.reason in _TERMINATION_TRANSITIONS and e.message.startswith(TRANSITION_PREFIX))
        or e.reason in CONSOLIDATION_EVENTS
        or e.reason in INTERRUPTION_EVENTS
    ]
    known = [t for t in times if t is not None]
    return min(known) if known else None


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


def _same_message(node_event: Event, claim_event: Event) -> bool:
    """Karpenter words one disruption alike for both objects, naming each by its kind."""
    return node_event.message.replace("NodeClaim", "Node") == claim_event.message.replace(
        "NodeClaim", "Node"
    )


def _pool_of_claim(name: str, inp: DiagnosisInput) -> str:
    """NodeClaims are named `<nodepool>-<random>` (§1.6); prefer a NodePool we know."""
    known = [p for p in inp.snapshot.nodepools if name.startswith(p + "-")]
    if known:
        return max(known, key=len)
    return name.rsplit("-", 1)[0] if "-" in name else ""


def _pair_node(
    claim_causes: list[Event],
    registered: datetime | None,
    ended: datetime | None,
    candidates: set[str],
    about: Mapping[str, list[Event]],
    node_registered: Mapping[str, datetime | None],
    node_transitions: Mapping[str, list[Transition]],
) -> str:
    """The gone Node that was this gone NodeClaim: told the same disruption at the same
    moment (Karpenter emits it on both), registered together, or unhealthy for exactly a
    repair toleration before the claim started terminating."""
    for event in claim_causes:
        telling = event.reason in _TELLING or event.message.startswith(TRANSITION_PREFIX)
        if not telling or event.first_seen is None:
            continue
        for node in sorted(candidates):
            if any(
                e.reason == event.reason
                and _same_message(e, event)
                and e.first_seen is not None
                and abs(e.first_seen - event.first_seen) <= _SAME_MOMENT
                for e in about.get(node, ())
            ):
                return node
    if registered is not None:
        best = min(
            (
                (abs(t - registered), n)
                for n in candidates
                if (t := node_registered.get(n)) is not None
            ),
            default=None,
        )
        if best is not None and best[0] <= _REGISTRATION_PAIRING:
            return best[1]
    if ended is not None:
        for node in sorted(candidates):
            tr = _last_unhealthy(node_transitions.get(node, ()), ended)
            if tr is None or tr.time is None:
                continue
            deadline = tr.time + REPAIR_TOLERATIONS[(tr.type, tr.new)]
            if deadline - _REPAIR_SLACK <= ended <= deadline + _REPAIR_SLACK:
                return node
    return ""


def _cause_from_events(
    reasons: set[str],
    events: list[Event],
    launched: datetime | None,
    registered: datetime | None,
    ended: datetime | None,
    unhealthy: tuple[str, str, str] | None,
    since: datetime | None,
) -> str:
    """claim_cause's order, read from events alone (§1.7, §1.9)."""
    if reasons & set(INTERRUPTION_EVENTS):
        return "interruption"
    disruption = [e for e in events if e.reason in CONSOLIDATION_EVENTS]
    if disruption:
        return "drift" if any("Drift" in e.message for e in disruption) else "consolidation"
    # Launched, never Registered: liveness deletes silently, no Warning needed (§1.6, §1.7).
    if registered is None and (reasons & set(REGISTRATION_EVENTS) or launched is not None):
        return "registration"
    if unhealthy is not None and since is not None and ended is not None:
        deadline = since + REPAIR_TOLERATIONS.get((unhealthy[0], unhealthy[1]), timedelta(0))
        if ended >= deadline - _REPAIR_SLACK:
            return "repair"
    return "unknown"


# -- the rule ---------------------------------------------------------------------------------


def rule(inp: DiagnosisInput) -> list[Finding]:
    by_pool: dict[str, list[Replacement]] = {}
    for rep in replacements(inp):
        if rep.cause == "repair":
            continue  # node-repair-loop's business
        by_pool.setdefault(rep.pool, []).append(rep)
    findings = []
    for pool, reps in sorted(by_pool.items()):
        finding = _pool_finding(inp, pool, reps)
        if finding is not None:
            findings.append(finding)
    return findings


def _pool_finding(inp: DiagnosisInput, pool: str, reps: list[Replacement]) -> Finding | None:
    causes = Counter(r.cause for r in reps)
    registration = causes.get("registration", 0)
    if len(reps) < MIN_REPLACEMENTS and registration < REPEATED_REGISTRATION_FAILURES:
        return None
    earliest = min((r.ended for r in reps if r.ended is not None), default=inp.now)
    span = max(inp.now - earliest, timedelta(hours=1))
    rate = len(reps) / (span.total_seconds() / 3600)
    lifetimes = [lt for r in reps if (lt := r.lifetime) is not None]
    median = (
        timedelta(seconds=statistics.median(lt.total_seconds() for lt in lifetimes))
        if lifetimes
        else None
    )
    benign = causes.get("consolidation", 0) + causes.get("drift", 0)
    non_benign_rate = (len(reps) - benign) / (span.total_seconds() / 3600)
    reasons: list[str] = []
    if median is not None and len(lifetimes) >= MIN_REPLACEMENTS and median < SHORT_LIFETIME:
        reasons.append(f"median node lifetime {human_duration(median)} (< 30m)")
    if registration >= REPEATED_REGISTRATION_FAILURES:
        reasons.append(f"{registration} registration failures")
    if causes.get("interruption", 0) >= REPEATED_INTERRUPTIONS:
        reasons.append(f"{causes['interruption']} interruptions")
    if non_benign_rate >= HIGH_RATE_PER_HOUR:
        reasons.append(f"{non_benign_rate:.1f} non-consolidation replacements/h")
    severity = WARNING if reasons else INFO
    dominant = causes.most_common(1)[0][0]
    mix = ", ".join(f"{n} {CAUSE_WORDS.get(c, c)}" for c, n in causes.most_common())
    summary = (
        f"NodePool {pool or '(none)'}: {len(reps)} nodes replaced in the last "
        f"{human_duration(span)} ({rate:.1f}/h), mostly {CAUSE_WORDS.get(dominant, dominant)} "
        f"({mix})"
        + (f"; median lifetime {human_duration(median)}" if median is not None else "")
        + (f"; {'; '.join(reasons)}" if reasons else "")
    )
    evidence = [e for r in reps for e in r.evidence]
    nodes = tuple(dict.fromkeys(r.node for r in reps if r.node))
    return Finding(
        id=REPLACEMENT_CHURN,
        severity=severity,
        nodepool=pool,
        nodes=nodes,
        summary=summary,
        evidence=_unique(evidence),
        runbooks=(),
    )
