"""The history file's SQLite schema and the statements the store runs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mignurse.model import Event

SCHEMA_VERSION = 1

# SQLite's default limit on host parameters is 32766 since 3.32; stay far below it.
IN_CHUNK = 500

# -- schema ------------------------------------------------------------------------------

# The store runs it statement by statement, split on ";": no semicolon inside a comment.
SCHEMA = """
CREATE TABLE lifecycles (
    id INTEGER PRIMARY KEY,
    context TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,              -- uid, else name (hand-made objects without a uid)
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    pool TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    image_id TEXT NOT NULL,
    node_name TEXT NOT NULL,
    nodeclaim TEXT NOT NULL,
    capacity_type TEXT NOT NULL,
    zone TEXT NOT NULL,
    created REAL,
    first_seen REAL NOT NULL,
    first_ready REAL,
    last_seen REAL NOT NULL,
    deleting_since REAL,
    termination_ts REAL,            -- karpenter.sh/nodeclaim-termination-timestamp
    disruption_reason TEXT,
    drifted INTEGER NOT NULL,
    deleted_at REAL,
    deleted_seen TEXT,
    lu_type TEXT,                   -- lu_*: the last unhealthy condition before deletion
    lu_status TEXT,                 -- (Lifecycle.last_unhealthy), a NodeClaim's from its Node
    lu_reason TEXT,
    conds TEXT NOT NULL,           -- JSON {type: [status, reason]}: the last state recorded
    rev INTEGER NOT NULL           -- the write that last changed the row (readers' cache key)
);
CREATE UNIQUE INDEX lifecycles_key ON lifecycles (context, kind, key);
-- Covers the rules' read (context, kind, alive since, pool) without touching the table.
CREATE INDEX lifecycles_read
    ON lifecycles (context, kind, deleted_at, pool, rev, created, first_seen);
CREATE INDEX lifecycles_rev ON lifecycles (rev);
CREATE INDEX lifecycles_provider ON lifecycles (context, kind, provider_id);
CREATE INDEX lifecycles_node_name ON lifecycles (context, kind, node_name);
-- Linking a NodeClaim to a Node seen before it looks Nodes up by name (see link_claims).
CREATE INDEX lifecycles_name ON lifecycles (context, kind, name);

CREATE TABLE transitions (
    id INTEGER PRIMARY KEY,
    context TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    time REAL NOT NULL,
    observed_at REAL NOT NULL,
    condition TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX transitions_object ON transitions (context, kind, name, time);
CREATE INDEX transitions_kind_time ON transitions (context, kind, time);
CREATE INDEX transitions_time ON transitions (time);

CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    context TEXT NOT NULL,
    key TEXT NOT NULL,              -- uid, else namespace/name
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    involved_kind TEXT NOT NULL,
    involved_name TEXT NOT NULL,
    involved_uid TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    host TEXT NOT NULL,
    first_seen REAL,
    last_seen REAL,
    count INTEGER NOT NULL,
    rv TEXT NOT NULL,
    t REAL NOT NULL,                -- last_seen, else first_seen, else observed: sort and prune key
    observed_at REAL NOT NULL       -- when mignurse first saw it
);
CREATE UNIQUE INDEX events_key ON events (context, key);
CREATE INDEX events_time ON events (context, t);
CREATE INDEX events_involved ON events (context, involved_kind, involved_name, t);
CREATE INDEX events_prune ON events (t);
"""

LC_COLUMNS = (
    "context", "kind", "key", "name", "uid", "pool", "instance_type", "instance_id",
    "provider_id", "image_id", "node_name", "nodeclaim", "capacity_type", "zone", "created",
    "first_seen", "first_ready", "last_seen", "deleting_since", "termination_ts",
    "disruption_reason", "drifted", "deleted_at", "deleted_seen", "lu_type", "lu_status",
    "lu_reason", "conds", "rev",
)  # fmt: skip
LC_SELECT = "SELECT id, " + ", ".join(LC_COLUMNS) + " FROM lifecycles"
# In Lifecycle's field order, for the read path.
LC_READ = (
    "SELECT context, kind, name, uid, pool, instance_type, instance_id, image_id, node_name, "
    "nodeclaim, created, first_seen, first_ready, last_seen, deleting_since, termination_ts, "
    "disruption_reason, drifted, deleted_at, deleted_seen, lu_type, lu_status, lu_reason, "
    "provider_id, capacity_type, zone, id, rev FROM lifecycles"
)
LC_INSERT = (
    f"INSERT INTO lifecycles ({', '.join(LC_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in LC_COLUMNS)})"
)
LC_UPDATE = (
    "UPDATE lifecycles SET " + ", ".join(f"{c} = ?" for c in LC_COLUMNS[3:]) + " WHERE id = ?"
)
# Compared to decide whether a row changed; last_seen alone is throttled separately.
LC_COMPARED = tuple(c for c in LC_COLUMNS[3:] if c not in ("last_seen", "rev"))

EV_COLUMNS = (
    "context", "key", "namespace", "name", "uid", "involved_kind", "involved_name",
    "involved_uid", "reason", "message", "type", "source", "host", "first_seen", "last_seen",
    "count", "rv", "t", "observed_at",
)  # fmt: skip
# Deduplicate by uid and keep the newest occurrence: a repeating event comes back with a
# higher count and a later lastTimestamp; an older copy (a relist racing a watch) loses.
EV_UPSERT = (
    f"INSERT INTO events ({', '.join(EV_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EV_COLUMNS)}) "
    "ON CONFLICT (context, key) DO UPDATE SET "
    "message = excluded.message, reason = excluded.reason, type = excluded.type, "
    "first_seen = COALESCE(events.first_seen, excluded.first_seen), "
    "last_seen = excluded.last_seen, count = excluded.count, rv = excluded.rv, t = excluded.t "
    "WHERE excluded.t > events.t OR excluded.count > events.count "
    "OR (excluded.t = events.t AND excluded.count = events.count AND excluded.rv != events.rv)"
)

TR_INSERT = (
    "INSERT INTO transitions (context, kind, name, uid, time, observed_at, condition, status, "
    "reason, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def chunks(items: Sequence[Any], size: int = IN_CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def object_key(model: Any) -> str:
    return str(model.uid or f"name:{model.name}")


def event_key(event: Event) -> str:
    return event.uid or f"{event.namespace}/{event.name}"
