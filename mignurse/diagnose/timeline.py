"""One node's story in time order: its events, condition transitions, NodeClaim lifecycle,
what the history remembers, and journal lines from collected evidence, each with its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mignurse.diagnose.events import parse_transition
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.evidence import xid_errors
from mignurse.model import Event, NodeClaim, format_time

# Journal lines worth a place in the timeline: trouble, and systemd starting and stopping.
_JOURNAL_WORTH = re.compile(
    r"error|fail|fatal|panic|timeout|timed out|not ready|oom|cgroup|Xid|NVRM|"
    r"Started |Stopped |Stopping |Starting ",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    time: datetime
    source: str  # event | condition | transition | nodeclaim | history | journal:<unit> | node
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"time": format_time(self.time), "source": self.source, "text": self.text}


def node_timeline(
    inp: DiagnosisInput, node_name: str, *, journal_lines: int = 300
) -> list[TimelineEntry]:
    """Everything known about one node, oldest first; at most `journal_lines` journal lines
    (the most telling: unit starts and stops, Xid, errors)."""
    entries: list[TimelineEntry] = []
    node = inp.snapshot.nodes.get(node_name)
    if node is not None:
        if node.created:
            entries.append(
                TimelineEntry(
                    node.created,
                    "node",
                    f"Node created in {node.pool or 'no pool'} ({node.instance_type}, "
                    f"{node.instance_id or 'no instance id'})",
                )
            )
        for cond in node.conditions:
            if cond.last_transition:
                text = f"{cond.type}={cond.status}"
                if cond.reason:
                    text += f" {cond.reason}"
                if cond.message:
                    text += f": {cond.message}"
                entries.append(TimelineEntry(cond.last_transition, "condition", text + " (still)"))
        if node.deleting:
            entries.append(TimelineEntry(node.deleting, "node", "Node deletion requested"))
    for event in inp.events_by_node.get(node_name, ()):
        if (when := _time(event)) is not None:
            entries.append(_event_entry(event, when))
    for transition in inp.transitions_by_name.get(("Node", node_name), ()):
        entries.append(
            TimelineEntry(
                transition.time,
                "history",
                f"{transition.condition} became {transition.status}"
                + (f" ({transition.reason})" if transition.reason else ""),
            )
        )
    for lifecycle in inp.lifecycles_by_name.get(("Node", node_name), ()):
        if lifecycle.first_ready:
            entries.append(TimelineEntry(lifecycle.first_ready, "history", "first Ready"))
        if lifecycle.deleted_at:
            entries.append(TimelineEntry(lifecycle.deleted_at, "history", "Node gone"))
    entries += _nodeclaim_entries(inp, node_name)
    entries += _journal_entries(inp, node_name, journal_lines)
    unique = {(e.time, e.source, e.text): e for e in entries}
    return sorted(unique.values(), key=lambda e: e.time)


def _time(event: Event) -> datetime | None:
    return event.first_seen or event.last_seen


def _event_entry(event: Event, when: datetime, about: str = "") -> TimelineEntry:
    count = f" (x{event.count}, last {format_time(event.last_seen)})" if event.count > 1 else ""
    where = f"{about} " if about else ""
    transition = parse_transition(event)
    if transition is not None:
        # Karpenter's echo of a condition change: one short line, not its 200-character
        # message (the condition's own entry carries the message)
        reason = f" ({transition.reason})" if transition.reason else ""
        return TimelineEntry(
            when,
            "event",
            f"{where}{transition.type} {transition.old} → {transition.new}{reason} "
            f"[{event.source or '?'}]{count}",
        )
    return TimelineEntry(
        when,
        "event",
        f"{where}{event.type} {event.reason} [{event.source or '?'}]: {event.message}{count}",
    )


def _nodeclaim_entries(inp: DiagnosisInput, node_name: str) -> list[TimelineEntry]:
    """The node's NodeClaim: launch, registration, deletion, the repair annotation, and the
    events about it (Karpenter reports much of a repair there, not on the Node)."""
    node = inp.snapshot.nodes.get(node_name)
    claims: list[NodeClaim] = [
        c
        for c in inp.snapshot.nodeclaims.values()
        if c.node_name == node_name
        or (node and node.provider_id and c.provider_id == node.provider_id)
    ]
    entries: list[TimelineEntry] = []
    names = {c.name for c in claims}
    for claim in claims:
        if claim.created:
            entries.append(
                TimelineEntry(claim.created, "nodeclaim", f"NodeClaim {claim.name} created")
            )
        for cond in claim.conditions:
            if cond.last_transition and cond.status == "True":
                entries.append(
                    TimelineEntry(
                        cond.last_transition, "nodeclaim", f"NodeClaim {claim.name} {cond.type}"
                    )
                )
        if claim.deleting:
            annotation = (
                f"; termination-timestamp {format_time(claim.termination_timestamp)}"
                if claim.termination_timestamp
                else ""
            )
            entries.append(
                TimelineEntry(
                    claim.deleting,
                    "nodeclaim",
                    f"NodeClaim {claim.name} deletion requested{annotation}",
                )
            )
    for lifecycle in inp.history.lifecycles:
        if lifecycle.kind == "NodeClaim" and lifecycle.node_name == node_name:
            names.add(lifecycle.name)
            if lifecycle.deleted_at:
                entries.append(
                    TimelineEntry(
                        lifecycle.deleted_at, "history", f"NodeClaim {lifecycle.name} gone"
                    )
                )
    for event in (*inp.snapshot.events, *inp.history.events):
        if event.involved_kind != "NodeClaim" or event.involved_name not in names:
            continue
        if (when := _time(event)) is not None:
            entries.append(_event_entry(event, when, f"NodeClaim {event.involved_name}:"))
    return entries


def _journal_entries(inp: DiagnosisInput, node_name: str, limit: int) -> list[TimelineEntry]:
    evidence = inp.node_evidence.get(node_name)
    if evidence is None:
        return []
    entries: list[TimelineEntry] = []
    for unit, journal in evidence.journals.items():
        source = f"journal:{unit}"
        for entry in journal.entries:
            if _JOURNAL_WORTH.search(entry.message):
                entries.append(TimelineEntry(entry.time, source, f"{entry.ident}: {entry.message}"))
        for xid in xid_errors(journal.entries):
            entries.append(TimelineEntry(xid.time, source, f"Xid {xid.xid} on {xid.pci}"))
    entries.sort(key=lambda e: e.time)
    return entries[-limit:] if len(entries) > limit else entries
