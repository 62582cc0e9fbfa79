"""The events the rules read: the snapshot's and the history's merged, Karpenter's
"Status condition transitioned" events parsed, and an event quoted as evidence.

The API server forgets events after about an hour; the local history keeps them longer, so
`all_events` merges both (one copy each, the newest occurrence wins), Pods' events left out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from mignurse.diagnose.facts import TRANSITION_PREFIX
from mignurse.diagnose.findings import Evidence
from mignurse.diagnose.inputs import NEVER_BEFORE, DiagnosisInput
from mignurse.model import Event, format_time

_TRANSITION = re.compile(
    r"Status condition transitioned, Type: (?P<type>[^,]+), Status: (?P<old>\w+) -> "
    r"(?P<new>\w+)(?:, Reason: (?P<reason>[^,]*))?(?:, Message: (?P<message>.*))?$",
    re.DOTALL,
)
_NEVER_BEFORE = NEVER_BEFORE


@dataclass(frozen=True, slots=True)
class Transition:
    """One Karpenter "Status condition transitioned" event, parsed (the object it is about:
    `event.involved_kind`, `event.involved_name`)."""

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
        type=match["type"].strip(),
        old=match["old"],
        new=match["new"],
        reason=(match["reason"] or "").strip(),
        message=(match["message"] or "").strip(),
        # The latest occurrence: the API server folds identical events into one (count,
        # lastTimestamp), and a repair clock restarts at every flip (docs/repair.md).
        time=event.last_seen or event.first_seen,
        event=event,
    )


def all_events(inp: DiagnosisInput) -> list[Event]:
    """The snapshot's events plus those only the history still holds, one copy each
    (the newest occurrence wins), oldest first, about anything but Pods (no rule judges a
    Pod). Computed once per input."""
    return event_index(inp).events


@dataclass(frozen=True, slots=True)
class EventIndex:
    """`all_events` read once for every rule, each list oldest first: a rule looks events up
    by the object they are about instead of scanning every event of the cluster."""

    events: list[Event]
    by_object: dict[str, list[Event]]  # by involved name, whatever its kind
    by_reason: dict[str, list[Event]]
    node_names: dict[str, None]  # every name a Node event is about, in order
    claim_names: dict[str, None]  # every name a NodeClaim event is about, in order
    node_transitions: dict[str, list[Transition]]  # Nodes' transitions, by Node name


def event_index(inp: DiagnosisInput) -> EventIndex:
    return inp.memo("events.index", lambda: _event_index(inp))


def _event_index(inp: DiagnosisInput) -> EventIndex:
    events = inp.merged_events.events
    by_object: defaultdict[str, list[Event]] = defaultdict(list)
    by_reason: defaultdict[str, list[Event]] = defaultdict(list)
    node_names: dict[str, None] = {}
    claim_names: dict[str, None] = {}
    node_transitions: dict[str, list[Transition]] = {}
    # One pass: 100,000 events scattered in memory cost more to reach than to file.
    for event in events:
        name, kind = event.involved_name, event.involved_kind
        by_object[name].append(event)
        by_reason[event.reason].append(event)
        if kind == "Node":
            node_names[name] = None
            if event.message.startswith(TRANSITION_PREFIX):
                transition = parse_transition(event)
                if transition is not None:
                    node_transitions.setdefault(name, []).append(transition)
        elif kind == "NodeClaim":
            claim_names[name] = None
    return EventIndex(
        events, dict(by_object), dict(by_reason), node_names, claim_names, node_transitions
    )


def event_time(event: Event) -> datetime:
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


def cause_events(events: Iterable[Event]) -> list[Event]:
    """Events that can tell a cause. Karpenter's transition echoes are left out: their
    reason is the condition type, and "InstanceTerminating" (a NodeClaim condition every
    terminating claim reaches) would read as an EC2 interruption."""
    return [e for e in events if not e.message.startswith(TRANSITION_PREFIX)]
