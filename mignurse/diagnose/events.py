"""The events the rules read: the snapshot's and the history's merged, Karpenter's
"Status condition transitioned" events parsed, and an event quoted as evidence.

The API server forgets events after about an hour; the local history keeps them longer, so
`all_events` merges both (one copy each, the newest occurrence wins).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from mignurse.diagnose.facts import TRANSITION_PREFIX
from mignurse.diagnose.findings import Evidence
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import Event, format_time

_TRANSITION = re.compile(
    r"Status condition transitioned, Type: (?P<type>[^,]+), Status: (?P<old>\w+) -> "
    r"(?P<new>\w+)(?:, Reason: (?P<reason>[^,]*))?(?:, Message: (?P<message>.*))?$",
    re.DOTALL,
)
_NEVER_BEFORE = datetime.min.replace(tzinfo=UTC)


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
        # The latest occurrence: the API server folds identical events into one (count,
        # lastTimestamp), and a repair clock restarts at every flip (docs/repair.md).
        time=event.last_seen or event.first_seen,
        event=event,
    )


def all_events(inp: DiagnosisInput) -> list[Event]:
    """The snapshot's events plus those only the history still holds, one copy each
    (the newest occurrence wins), oldest first. Computed once per input."""
    return inp.memo("events.all_events", lambda: _all_events(inp))


def _all_events(inp: DiagnosisInput) -> list[Event]:
    merged: dict[str, Event] = {}
    for event in (*inp.history.events, *inp.snapshot.events):
        key = event.uid or f"{event.namespace}/{event.name}"
        held = merged.get(key)
        if held is None or event_time(event) >= event_time(held):
            merged[key] = event
    return sorted(merged.values(), key=event_time)


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
