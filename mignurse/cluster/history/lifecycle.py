"""Lifecycles and condition flips as the rules read them, and the reducer that merges each
observation of a Node or NodeClaim into its lifecycle row."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mignurse.model import Condition, Event

if TYPE_CHECKING:
    import sqlite3  # the store's cursor, passed in: reading lifecycles needs no SQLite

PLURAL_KIND = {"nodes": "Node", "nodeclaims": "NodeClaim", "nodepools": "NodePool"}
CHANGES = frozenset({"LIST", "ADDED", "MODIFIED", "DELETED"})

# The Node conditions Karpenter repairs on (aws/karpenter-provider-aws v1.14.1
# pkg/cloudprovider/cloudprovider.go RepairPolicies): the only ones whose flips
# matter to the rules. MemoryPressure & co. flip with load and would only add noise.
# A row whose only news is "still here" is rewritten at most this often: heartbeat-only
# MODIFIED events (every node, every few minutes) must not turn into a write stream.
LAST_SEEN_STEP = 300.0

NODE_CONDITIONS = frozenset(
    {
        "Ready",
        "AcceleratedHardwareReady",
        "KernelReady",
        "StorageReady",
        "NetworkingReady",
        "ContainerRuntimeReady",
    }
)

# -- time -------------------------------------------------------------------------------


def epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:  # treat naive times as UTC rather than the local zone
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def from_epoch(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


# -- what the rules read -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """One Node, NodeClaim (or NodePool) as mignurse saw it, alive or long gone."""

    context: str
    kind: str
    name: str
    uid: str
    pool: str
    instance_type: str
    instance_id: str
    image_id: str  # NodeClaims: status.imageID (the AMI)
    node_name: str  # NodeClaim → the Node it became
    nodeclaim: str  # Node → its NodeClaim (by providerID when known)
    created: datetime | None
    first_seen: datetime
    first_ready: datetime | None
    last_seen: datetime  # accurate to LAST_SEEN_STEP while alive
    deleting_since: datetime | None  # metadata.deletionTimestamp
    termination_timestamp: datetime | None  # karpenter.sh/nodeclaim-termination-timestamp
    disruption_reason: str | None  # NodeClaim DisruptionReason (True): graceful disruption
    drifted: bool  # Drifted=True was seen at some point
    deleted_at: datetime | None
    deleted_seen: str | None  # "watch" (a DELETED event) | "relist" (missing from a LIST)
    last_unhealthy: tuple[str, str, str] | None  # (type, status, reason) before deletion
    provider_id: str = ""
    capacity_type: str = ""
    zone: str = ""

    @property
    def ended(self) -> datetime | None:
        """When its end began: deletion requested, else deletion seen."""
        return self.deleting_since or self.deleted_at

    @property
    def lifetime(self) -> timedelta | None:
        """Creation (else first sight) to the deletion request (else deletion); None if alive.

        The deletion request is the moment Karpenter decided the node's fate (repair,
        consolidation, expiry); draining afterwards is not part of the node's useful life."""
        end = self.ended
        if end is None:
            return None
        start = self.created or self.first_seen
        return max(end - start, timedelta(0))


@dataclass(frozen=True, slots=True)
class Transition:
    context: str
    kind: str
    name: str
    uid: str
    time: datetime  # the condition's lastTransitionTime, else observed_at
    observed_at: datetime
    condition: str
    status: str
    reason: str
    message: str


# -- merging one observation into a lifecycle row ----------------------------------------------


def _healthy(cond: Condition) -> bool:
    return cond.status == "True"


def merge_row(
    context: str,
    kind: str,
    key: str,
    model: Any,
    old: dict[str, Any] | None,
    change: str,
    t: float,
    transitions: list[tuple[Any, ...]],
) -> dict[str, Any]:
    """The row after seeing `model` (the object's state at `t`), appending the condition
    transitions it reveals. Facts that explain how an object ended stick once seen."""
    conditions = model.conditions
    if kind == "Node":
        conditions = tuple(c for c in conditions if c.type in NODE_CONDITIONS)
    now_conds = _record_flips(context, kind, model, conditions, old, t, transitions)
    disruption, drifted, termination = _disruption(kind, model, conditions, old)
    deleting = _first(old, "deleting_since", epoch(getattr(model, "deleting", None)))
    last_unhealthy = _last_unhealthy(kind, conditions, old, deleting, t)
    deleted_at, deleted_seen = _deletion(change, old, t)
    row: dict[str, Any] = {
        "context": context,
        "kind": kind,
        "key": key,
        "name": model.name,
        "uid": model.uid,
        "pool": _keep(old, "pool", model.name if kind == "NodePool" else model.pool),
        "instance_type": _keep(old, "instance_type", getattr(model, "instance_type", "")),
        "instance_id": _keep(old, "instance_id", getattr(model, "instance_id", "")),
        "provider_id": _keep(old, "provider_id", getattr(model, "provider_id", "")),
        "image_id": _keep(old, "image_id", getattr(model, "image_id", "")),
        "node_name": _keep(old, "node_name", getattr(model, "node_name", "")),
        "nodeclaim": old["nodeclaim"] if old else "",
        "capacity_type": _keep(old, "capacity_type", getattr(model, "capacity_type", "")),
        "zone": _keep(old, "zone", getattr(model, "zone", "")),
        "created": _keep(old, "created", epoch(model.created)),
        "first_seen": old["first_seen"] if old else t,
        "first_ready": _first_ready(conditions, old, t),
        "last_seen": t,
        "deleting_since": deleting,
        "termination_ts": _first(old, "termination_ts", termination),
        "disruption_reason": disruption,
        "drifted": int(drifted),
        "deleted_at": deleted_at,
        "deleted_seen": deleted_seen,
        "lu_type": last_unhealthy[0],
        "lu_status": last_unhealthy[1],
        "lu_reason": last_unhealthy[2],
        "conds": json.dumps(now_conds, separators=(",", ":"), sort_keys=True),
    }
    if old is not None and change != "DELETED" and t - old["last_seen"] < LAST_SEEN_STEP:
        row["last_seen"] = old["last_seen"]  # throttled: see LAST_SEEN_STEP
    return row


def _keep(old: dict[str, Any] | None, column: str, value: Any) -> Any:
    """The new value when there is one, else what we had (fields never blank out)."""
    if value:
        return value
    return old[column] if old else value


def _first(old: dict[str, Any] | None, column: str, value: Any) -> Any:
    """The first value ever seen (Karpenter, too, keeps an earlier termination time)."""
    if old and old[column] is not None:
        return old[column]
    return value


def _record_flips(
    context: str,
    kind: str,
    model: Any,
    conditions: tuple[Condition, ...],
    old: dict[str, Any] | None,
    t: float,
    transitions: list[tuple[Any, ...]],
) -> dict[str, list[str]]:
    """Append a transition for each condition whose status or reason differs from the last
    state recorded; return the state now ({type: [status, reason]})."""
    before: dict[str, list[str]] = json.loads(old["conds"]) if old else {}
    now_conds = {c.type: [c.status, c.reason] for c in conditions}
    for cond in conditions:
        if before.get(cond.type) != now_conds[cond.type]:
            when = epoch(cond.last_transition)
            transitions.append(
                (
                    context, kind, model.name, model.uid, t if when is None else when, t,
                    cond.type, cond.status, cond.reason, cond.message,
                )
            )  # fmt: skip
    return now_conds


def _first_ready(
    conditions: tuple[Condition, ...], old: dict[str, Any] | None, t: float
) -> float | None:
    """When it first became Ready: kept once known."""
    first_ready: float | None = old["first_ready"] if old else None
    ready = next((c for c in conditions if c.type == "Ready"), None)
    if first_ready is None and ready is not None and _healthy(ready):
        first_ready = epoch(ready.last_transition) or t
    return first_ready


def _disruption(
    kind: str, model: Any, conditions: tuple[Condition, ...], old: dict[str, Any] | None
) -> tuple[str | None, bool, float | None]:
    """A NodeClaim's (disruption reason, drifted ever, termination timestamp); the reason and
    drift stick once seen. Other kinds keep what they had (nothing)."""
    disruption = old["disruption_reason"] if old else None
    drifted = bool(old["drifted"]) if old else False
    termination = None
    if kind == "NodeClaim":
        termination = epoch(model.termination_timestamp)
        reason = next((c for c in conditions if c.type == "DisruptionReason"), None)
        if reason is not None and _healthy(reason):
            disruption = reason.reason or reason.message or "True"
        drift = next((c for c in conditions if c.type == "Drifted"), None)
        drifted = drifted or (drift is not None and _healthy(drift))
    return disruption, drifted, termination


def _last_unhealthy(
    kind: str,
    conditions: tuple[Condition, ...],
    old: dict[str, Any] | None,
    deleting: float | None,
    t: float,
) -> tuple[str | None, str | None, str | None]:
    """A Node's last unhealthy condition (type, status, reason) before its deletion: the
    `lu_*` columns. What was recorded stays unless a newer one is seen."""
    last = (old["lu_type"], old["lu_status"], old["lu_reason"]) if old else (None, None, None)
    # Only what happened before deletion explains it: once a node is being deleted its
    # kubelet goes away and Ready=Unknown would bury the condition that got it repaired.
    if kind != "Node" or (old and old["deleted_at"] is not None):
        return last
    unhealthy = []
    for c in conditions:
        if _healthy(c):
            continue
        since = epoch(c.last_transition)
        if deleting is None or (since is not None and since <= deleting):
            unhealthy.append((since or t, c.type != "Ready", c))
    if unhealthy:
        # The most recent flip is the newest news; on a tie the specific NMA
        # condition says more than Ready.
        worst = max(unhealthy, key=lambda item: item[:2])[2]
        last = (worst.type, worst.status, worst.reason)
    return last


def _deletion(change: str, old: dict[str, Any] | None, t: float) -> tuple[float | None, str | None]:
    """(deleted_at, deleted_seen): set by the first DELETED event, cleared when it is seen
    alive again (a relist raced the deletion: the store mirrors what is seen)."""
    deleted_at = old["deleted_at"] if old else None
    deleted_seen = old["deleted_seen"] if old else None
    if change == "DELETED":
        if deleted_at is None:
            deleted_at, deleted_seen = t, "watch"
    elif deleted_at is not None:
        deleted_at = deleted_seen = None
    return deleted_at, deleted_seen


def link_nodes(
    cur: sqlite3.Cursor,
    context: str,
    written: list[tuple[dict[str, Any] | None, dict[str, Any]]],
    rev: int,
) -> None:
    """Tie Nodes to their NodeClaims, and hand a Node's last unhealthy condition to its
    NodeClaim: the claim is what outlives it in Karpenter's accounting."""
    find_claims = []
    fill_node_name = []
    unhealthy = []
    for old, row in written:
        provider = row["provider_id"]
        if provider and not row["nodeclaim"]:
            find_claims.append((context, provider, rev, context, row["key"]))
        if provider and (old is None or not old["provider_id"]):
            fill_node_name.append((row["name"], rev, context, provider))
        last_unhealthy = (row["lu_type"], row["lu_status"], row["lu_reason"])
        if last_unhealthy[0] is not None and (
            old is None or last_unhealthy != (old["lu_type"], old["lu_status"], old["lu_reason"])
        ):
            unhealthy.append((*last_unhealthy, rev, context, provider, row["name"]))
    cur.executemany(
        "UPDATE lifecycles SET nodeclaim = COALESCE((SELECT c.name FROM lifecycles c "
        "WHERE c.context = ? AND c.kind = 'NodeClaim' AND c.provider_id = ? "
        "ORDER BY c.first_seen DESC LIMIT 1), ''), rev = ? "
        "WHERE context = ? AND kind = 'Node' AND key = ?",
        find_claims,
    )
    cur.executemany(
        "UPDATE lifecycles SET node_name = ?, rev = ? WHERE context = ? AND kind = 'NodeClaim' "
        "AND provider_id = ? AND node_name = ''",
        fill_node_name,
    )
    cur.executemany(
        "UPDATE lifecycles SET lu_type = ?, lu_status = ?, lu_reason = ?, rev = ? "
        "WHERE context = ? AND kind = 'NodeClaim' AND deleting_since IS NULL "
        "AND deleted_at IS NULL "
        "AND ((provider_id != '' AND provider_id = ?) OR (node_name != '' AND node_name = ?))",
        unhealthy,
    )


def link_claims(
    cur: sqlite3.Cursor,
    context: str,
    written: list[tuple[dict[str, Any] | None, dict[str, Any]]],
    rev: int,
) -> None:
    """The other direction, for NodeClaims recorded after their Node."""
    tie_nodes = []
    from_node = []
    for old, row in written:
        provider = row["provider_id"]
        if provider and (old is None or not old["provider_id"]):
            tie_nodes.append((row["name"], rev, context, provider))
        if (old is None or not old["provider_id"] or not old["node_name"]) and (
            provider or row["node_name"]
        ):
            from_node.append(
                (rev, context, provider, context, row["node_name"], row["key"], context)
            )
    cur.executemany(
        "UPDATE lifecycles SET nodeclaim = ?, rev = ? WHERE context = ? AND kind = 'Node' "
        "AND nodeclaim = '' AND provider_id != '' AND provider_id = ?",
        tie_nodes,
    )
    # Fill the claim's node name and last unhealthy condition from a Node seen earlier.
    cur.executemany(
        "UPDATE lifecycles SET "
        "node_name = CASE WHEN lifecycles.node_name = '' THEN n.name "
        "ELSE lifecycles.node_name END, "
        "lu_type = COALESCE(lifecycles.lu_type, n.lu_type), "
        "lu_status = COALESCE(lifecycles.lu_status, n.lu_status), "
        "lu_reason = COALESCE(lifecycles.lu_reason, n.lu_reason), rev = ? "
        # Two indexed lookups: an OR across provider_id and name would scan every row.
        "FROM (SELECT name, lu_type, lu_status, lu_reason, first_seen FROM lifecycles "
        "WHERE context = ? AND kind = 'Node' AND provider_id != '' AND provider_id = ? "
        "UNION ALL SELECT name, lu_type, lu_status, lu_reason, first_seen FROM lifecycles "
        "WHERE context = ? AND kind = 'Node' AND name = ? AND provider_id = '' "
        "ORDER BY first_seen DESC LIMIT 1) AS n "
        "WHERE lifecycles.key = ? AND lifecycles.context = ? AND lifecycles.kind = 'NodeClaim'",
        from_node,
    )


def event_from_row(r: Sequence[Any]) -> Event:
    return Event(
        namespace=r[0],
        name=r[1],
        uid=r[2],
        involved_kind=r[3],
        involved_name=r[4],
        involved_uid=r[5],
        reason=r[6],
        message=r[7],
        type=r[8],
        source=r[9],
        host=r[10],
        first_seen=_dt(r[11]),
        last_seen=_dt(r[12]),
        count=r[13],
        resource_version=r[14],
    )


def lifecycles_from_rows(rows: list[Any]) -> list[Lifecycle]:
    """Rows of LC_READ → Lifecycles. Written flat on purpose: rules read 20,000 of these
    per evaluation, and per-row helper calls would double the time."""
    # fmt: off
    ft = datetime.fromtimestamp
    utc = UTC
    out: list[Lifecycle] = []
    append = out.append
    for (
        context, kind, name, uid, pool, instance_type, instance_id, image_id, node_name,
        nodeclaim, created, first_seen, first_ready, last_seen, deleting_since, termination,
        disruption, drifted, deleted_at, deleted_seen, lu_type, lu_status, lu_reason,
        provider_id, capacity_type, zone, _row_id, _rev,
    ) in rows:
        append(
            Lifecycle(
                context, kind, name, uid, pool, instance_type, instance_id, image_id, node_name,
                nodeclaim,
                None if created is None else ft(created, utc),
                ft(first_seen, utc),
                None if first_ready is None else ft(first_ready, utc),
                ft(last_seen, utc),
                None if deleting_since is None else ft(deleting_since, utc),
                None if termination is None else ft(termination, utc),
                disruption,
                bool(drifted),
                None if deleted_at is None else ft(deleted_at, utc),
                deleted_seen,
                None if lu_type is None else (lu_type, lu_status or "", lu_reason or ""),
                provider_id, capacity_type, zone,
            )
        )
    # fmt: on
    return out
