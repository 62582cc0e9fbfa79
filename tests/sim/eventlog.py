"""Reading the simulator's Events the way an engineer reads `kubectl get events`."""

from __future__ import annotations

from typing import Any

from mignurse.sim import SimCluster

Event = dict[str, Any]


def order(event: Event) -> tuple[str, int]:
    """Creation order: first timestamp, then the nanosecond suffix of the Event's name."""
    return event["firstTimestamp"], int(event["metadata"]["name"].rsplit(".", 1)[1], 16)


def events(
    sim: SimCluster,
    *,
    reason: str | None = None,
    kind: str | None = None,
    name: str | None = None,
    component: str | None = None,
) -> list[Event]:
    """Events matching every given field, oldest first."""
    found = [
        e
        for e in sim.objects("events")
        if (reason is None or e["reason"] == reason)
        and (kind is None or e["involvedObject"]["kind"] == kind)
        and (name is None or e["involvedObject"]["name"] == name)
        and (component is None or e["source"].get("component") == component)
    ]
    return sorted(found, key=order)


def reasons(sim: SimCluster, *, kind: str, name: str) -> list[str]:
    """The reasons of one object's Events, oldest first."""
    return [e["reason"] for e in events(sim, kind=kind, name=name)]


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), None)


def find(sim: SimCluster, plural: str, name: str) -> dict[str, Any] | None:
    return next((o for o in sim.objects(plural) if o["metadata"]["name"] == name), None)
