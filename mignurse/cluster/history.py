"""mignurse's own memory of the cluster: node and NodeClaim lifecycles, condition flips, events.

Kubernetes forgets fast: events expire about an hour after their last occurrence, and a repaired
Node or NodeClaim vanishes as soon as its finalizers clear (docs/repair.md "How long the evidence
lives"). A Karpenter repair loop therefore outlives its own evidence. This module keeps a SQLite
history, fed by `ClusterState` change notifications through `HistoryRecorder`, that the diagnosis
rules read later: replacements per NodePool, node lifetimes, how each node ended
(repair fingerprint vs consolidation vs spot), and per-node condition flips.

Design points:

- **One writer.** A single process writes, from a single thread, through a bounded queue
  that never blocks the watch threads. Other processes (the app while `mignurse watch`
  runs) see the `<db>.lock` flock held and open the store read-only.
- **Crash safety.** WAL journal, `synchronous=NORMAL`, one transaction per batch: a
  process killed mid-write leaves the last committed batch intact.
- **Bounded.** `prune` drops what is older than `max_age`, then the oldest events and
  transitions until the file fits `max_bytes`, and returns the pages to the filesystem
  (`auto_vacuum=INCREMENTAL`).

Times are stored as epoch seconds (REAL, UTC) and always returned as tz-aware UTC datetimes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher, ResourceStatus
from mignurse.model import Condition, Event
from mignurse.paths import history_file, open_private, private_dir, state_home

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

DEFAULT_MAX_AGE = timedelta(days=14)
DEFAULT_MAX_BYTES = 256 * 2**20

PLURAL_KIND = {"nodes": "Node", "nodeclaims": "NodeClaim", "nodepools": "NodePool"}
CHANGES = frozenset({"LIST", "ADDED", "MODIFIED", "DELETED"})

# The Node conditions Karpenter repairs on (aws/karpenter-provider-aws v1.14.1
# pkg/cloudprovider/cloudprovider.go RepairPolicies): the only ones whose flips
# matter to the rules. MemoryPressure & co. flip with load and would only add noise.
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

# A row whose only news is "still here" is rewritten at most this often: heartbeat-only
# MODIFIED events (every node, every few minutes) must not turn into a write stream.
LAST_SEEN_STEP = 300.0

# SQLite's default limit on host parameters is 32766 since 3.32; stay far below it.
_IN_CHUNK = 500

# Above this the writer drops the oldest queued change: losing history beats stalling
# the watch threads that keep the live view current.
DEFAULT_MAX_QUEUE = 10_000
_BATCH_ITEMS = 256
_MAX_ERRORS = 100


class HistoryError(Exception):
    """A history store problem; str() is the one line to show the user."""

    exit_code = 2


class HistorySchemaError(HistoryError):
    """The file is not a mignurse history, or was written by a newer mignurse."""


class HistoryReadOnly(HistoryError):
    """A write was asked of a store opened read-only."""


class WriterBusy(HistoryError):
    """Another process holds the writer lock of this history."""


def default_state_dir() -> Path:
    return state_home()


def default_history_path(state_dir: Path | None = None) -> Path:
    return history_file(state_dir)


# -- time -------------------------------------------------------------------------------


def _ts(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:  # treat naive times as UTC rather than the local zone
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _req_dt(value: float) -> datetime:
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


# -- schema ------------------------------------------------------------------------------

_SCHEMA = """
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
    termination_ts REAL,
    disruption_reason TEXT,
    drifted INTEGER NOT NULL,
    deleted_at REAL,
    deleted_seen TEXT,
    lu_type TEXT,
    lu_status TEXT,
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
-- Linking a NodeClaim to a Node seen before it looks Nodes up by name (see _link_claims).
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

_LC_COLUMNS = (
    "context", "kind", "key", "name", "uid", "pool", "instance_type", "instance_id",
    "provider_id", "image_id", "node_name", "nodeclaim", "capacity_type", "zone", "created",
    "first_seen", "first_ready", "last_seen", "deleting_since", "termination_ts",
    "disruption_reason", "drifted", "deleted_at", "deleted_seen", "lu_type", "lu_status",
    "lu_reason", "conds", "rev",
)  # fmt: skip
_LC_SELECT = "SELECT id, " + ", ".join(_LC_COLUMNS) + " FROM lifecycles"
# In Lifecycle's field order, for the read path.
_LC_READ = (
    "SELECT context, kind, name, uid, pool, instance_type, instance_id, image_id, node_name, "
    "nodeclaim, created, first_seen, first_ready, last_seen, deleting_since, termination_ts, "
    "disruption_reason, drifted, deleted_at, deleted_seen, lu_type, lu_status, lu_reason, "
    "provider_id, capacity_type, zone, id, rev FROM lifecycles"
)
_LC_INSERT = (
    f"INSERT INTO lifecycles ({', '.join(_LC_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _LC_COLUMNS)})"
)
_LC_UPDATE = (
    "UPDATE lifecycles SET " + ", ".join(f"{c} = ?" for c in _LC_COLUMNS[3:]) + " WHERE id = ?"
)
# Compared to decide whether a row changed; last_seen alone is throttled separately.
_LC_COMPARED = tuple(c for c in _LC_COLUMNS[3:] if c not in ("last_seen", "rev"))

_EV_COLUMNS = (
    "context", "key", "namespace", "name", "uid", "involved_kind", "involved_name",
    "involved_uid", "reason", "message", "type", "source", "host", "first_seen", "last_seen",
    "count", "rv", "t", "observed_at",
)  # fmt: skip
# Deduplicate by uid and keep the newest occurrence: a repeating event comes back with a
# higher count and a later lastTimestamp; an older copy (a relist racing a watch) loses.
_EV_UPSERT = (
    f"INSERT INTO events ({', '.join(_EV_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _EV_COLUMNS)}) "
    "ON CONFLICT (context, key) DO UPDATE SET "
    "message = excluded.message, reason = excluded.reason, type = excluded.type, "
    "first_seen = COALESCE(events.first_seen, excluded.first_seen), "
    "last_seen = excluded.last_seen, count = excluded.count, rv = excluded.rv, t = excluded.t "
    "WHERE excluded.t > events.t OR excluded.count > events.count "
    "OR (excluded.t = events.t AND excluded.count = events.count AND excluded.rv != events.rv)"
)

_TR_INSERT = (
    "INSERT INTO transitions (context, kind, name, uid, time, observed_at, condition, status, "
    "reason, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _chunks(items: Sequence[Any], size: int = _IN_CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _object_key(model: Any) -> str:
    return str(model.uid or f"name:{model.name}")


def _event_key(event: Event) -> str:
    return event.uid or f"{event.namespace}/{event.name}"


# -- the store -------------------------------------------------------------------------------


class HistoryStore:
    """The SQLite history. Writes only through the process holding `<db>.lock`.

    `HistoryStore(path)` opens the writer and raises `WriterBusy` if another process
    holds the lock; `HistoryStore.open_writer(path)` falls back to read-only instead and
    says why in `readonly_reason`. Reads work from any thread, in any process, any time.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_age: timedelta = DEFAULT_MAX_AGE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.max_age = max_age
        self.max_bytes = max_bytes
        self.readonly = readonly
        self.readonly_reason = "opened read-only" if readonly else ""
        self._lock_fd: int | None = None
        self._write: sqlite3.Connection | None = None
        self._read: sqlite3.Connection | None = None
        self._wlock = threading.Lock()
        self._rlock = threading.Lock()
        self._closed = False
        self._rev = 0  # the current write transaction's number (see _transaction)
        # Read cache: row id → (rev, Lifecycle). Building 20,000 frozen dataclasses costs
        # more than the query; unchanged rows are reused across reads.
        self._cache: dict[int, tuple[int, Lifecycle]] = {}
        if readonly:
            self._open_reader()  # may find no file yet: reads then return nothing
            return
        self._take_writer_lock()
        try:
            self._open_writer()
            self._open_reader()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open_writer(
        cls,
        path: Path,
        *,
        max_age: timedelta = DEFAULT_MAX_AGE,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> HistoryStore:
        """The writer if the lock is free, else a read-only store whose `readonly_reason`
        names the other writer: two processes never both write."""
        try:
            return cls(path, max_age=max_age, max_bytes=max_bytes)
        except WriterBusy as busy:
            store = cls(path, max_age=max_age, max_bytes=max_bytes, readonly=True)
            store.readonly_reason = str(busy)
            return store

    # -- opening ------------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _ensure_dir(self) -> None:
        # History reveals cluster topology: keep it private to the user (XDG wants 0700);
        # only mignurse's own state folder is tightened, never a --state-dir the user made.
        private_dir(self.path.parent, tighten=self.path.parent == state_home())

    def _take_writer_lock(self) -> None:
        self._ensure_dir()
        try:
            fd = open_private(self.lock_path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise HistoryError(f"cannot create {self.lock_path}: {exc.strerror}") from None
        try:
            # flock, not fcntl/lockf: it is tied to this open file, so a second store in
            # the same process is refused too, and a killed process releases it at once.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                holder = os.pread(fd, 64, 0).decode().strip()
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"process {holder}" if holder else "another process"
                raise WriterBusy(
                    f"{who} is already recording to {self.path} (lock {self.lock_path}); "
                    "this one reads the history without writing"
                ) from None
            raise HistoryError(f"cannot lock {self.lock_path}: {exc.strerror}") from None
        # Say who holds it, for the message the next would-be writer shows.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _connect(self, uri: str) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open history {self.path}: {exc}") from None
        return conn

    def _open_writer(self) -> None:
        # Create it 0600 ourselves (or narrow an older wider one); SQLite gives -wal/-shm
        # the same mode.
        try:
            os.close(open_private(self.path, os.O_RDWR | os.O_CREAT))
        except OSError as exc:
            raise HistoryError(f"cannot open history {self.path}: {exc.strerror}") from None
        conn = self._connect(self.path.resolve().as_uri())
        try:
            version = self._check_version(conn)
            if version == 0:
                # auto_vacuum must be chosen before the first table exists.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            else:
                conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL under WAL: a killed process loses nothing committed; only a power cut
            # can lose the last transactions, never the file's consistency.
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise HistoryError(f"{self.path} is not a usable history database: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._write = conn

    def _check_version(self, conn: sqlite3.Connection) -> int:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise HistorySchemaError(
                f"history {self.path} has schema version {version}, newer than this mignurse "
                f"understands ({SCHEMA_VERSION}): upgrade mignurse, or move the file aside"
            )
        if version == 0:
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            ).fetchone()[0]
            if tables:
                raise HistorySchemaError(
                    f"{self.path} is an SQLite file but not a mignurse history: "
                    "pass another --state-dir, or move the file aside"
                )
        return version

    def _open_reader(self) -> None:
        """Open the read connection once the file exists and has our schema."""
        if self._read is not None or not self.path.exists():
            return
        conn = self._connect(self.path.resolve().as_uri() + ("?mode=ro" if self.readonly else ""))
        try:
            conn.execute("PRAGMA query_only = ON")
            if self._check_version(conn) == 0:
                conn.close()  # the writer has not created the schema yet
                return
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise HistoryError(f"{self.path} is not a usable history database: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._read = conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._wlock:
            if self._write is not None:
                with contextlib.suppress(sqlite3.Error):
                    # Fold the WAL back in so the file alone is the whole history.
                    self._write.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._write.close()
                self._write = None
        with self._rlock:
            if self._read is not None:
                self._read.close()
                self._read = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        if self.readonly or self._write is None:
            raise HistoryReadOnly(
                f"history {self.path} is open read-only ({self.readonly_reason or 'closed'})"
            )
        with self._wlock:
            cur = self._write.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                # Every lifecycle row a transaction touches gets its number, so readers can
                # tell which cached rows are stale without rereading all of them.
                self._rev = cur.execute(
                    "SELECT COALESCE(MAX(rev), 0) + 1 FROM lifecycles"
                ).fetchone()[0]
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                # Also after a failed COMMIT (disk full): leave no transaction open, or
                # every later write would fail with "transaction within a transaction".
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
                raise

    def record(
        self, context: str, plural: str, change: str, models: list[Any], observed_at: datetime
    ) -> None:
        """Record one ClusterState change (a LIST or one watch event) in one transaction."""
        self.record_batch(context, [(plural, change, models, observed_at)])

    def record_batch(
        self, context: str, items: Iterable[tuple[str, str, list[Any], datetime]]
    ) -> None:
        """Record several changes, in order, in one transaction: all or none survive a crash."""
        checked = []
        for plural, change, models, observed_at in items:
            if plural != "events" and plural not in PLURAL_KIND:
                raise ValueError(f"unknown plural {plural!r}")
            if change not in CHANGES:
                raise ValueError(f"unknown change {change!r}")
            checked.append((plural, change, models, observed_at))
        with self._transaction() as cur:
            for plural, change, models, observed_at in checked:
                t = _ts(observed_at)
                assert t is not None
                if plural == "events":
                    self._record_events(cur, context, models, t)
                else:
                    self._record_objects(cur, context, PLURAL_KIND[plural], change, models, t)

    def _record_events(
        self, cur: sqlite3.Cursor, context: str, events: list[Event], t: float
    ) -> None:
        rows = []
        for e in events:
            first, last = _ts(e.first_seen), _ts(e.last_seen)
            sort_t = last if last is not None else first if first is not None else t
            rows.append(
                (
                    context, _event_key(e), e.namespace, e.name, e.uid, e.involved_kind,
                    e.involved_name, e.involved_uid, e.reason, e.message, e.type, e.source,
                    e.host, first, last, int(e.count), e.resource_version, sort_t, t,
                )
            )  # fmt: skip
        # A LIST of events deletes nothing: events missing from it expired in the API
        # server, and keeping them past that hour is the whole point of this store.
        cur.executemany(_EV_UPSERT, rows)

    def _existing(
        self, cur: sqlite3.Cursor, context: str, kind: str, change: str, keys: list[str]
    ) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        names = ("id", *_LC_COLUMNS)
        if change == "LIST":
            for row in cur.execute(
                _LC_SELECT + " WHERE context = ? AND kind = ? AND deleted_at IS NULL",
                (context, kind),
            ):
                found[row[3]] = dict(zip(names, row, strict=True))
        missing = [k for k in keys if k not in found]
        for chunk in _chunks(missing):
            marks = ", ".join("?" for _ in chunk)
            for row in cur.execute(
                _LC_SELECT + f" WHERE context = ? AND kind = ? AND key IN ({marks})",
                (context, kind, *chunk),
            ):
                found[row[3]] = dict(zip(names, row, strict=True))
        return found

    def _record_objects(
        self,
        cur: sqlite3.Cursor,
        context: str,
        kind: str,
        change: str,
        models: list[Any],
        t: float,
    ) -> None:
        latest: dict[str, Any] = {}
        for model in models:  # a batch may repeat an object; its last state wins
            latest[_object_key(model)] = model
        existing = self._existing(cur, context, kind, change, list(latest))
        inserts: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        transitions: list[tuple[Any, ...]] = []
        written: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
        for key, model in latest.items():
            old = existing.get(key)
            row = _merge(context, kind, key, model, old, change, t, transitions)
            row["rev"] = self._rev
            if old is None:
                inserts.append(tuple(row[c] for c in _LC_COLUMNS))
            elif (
                any(row[c] != old[c] for c in _LC_COMPARED) or row["last_seen"] != old["last_seen"]
            ):
                updates.append((*(row[c] for c in _LC_COLUMNS[3:]), old["id"]))
            else:
                continue
            written.append((old, row))
        if change == "LIST":
            gone = [
                (t, self._rev, old["id"])
                for key, old in existing.items()
                if key not in latest and old["deleted_at"] is None
            ]
            cur.executemany(
                "UPDATE lifecycles SET deleted_at = ?, deleted_seen = 'relist', rev = ? "
                "WHERE id = ?",
                gone,
            )
        cur.executemany(_LC_INSERT, inserts)
        cur.executemany(_LC_UPDATE, updates)
        cur.executemany(_TR_INSERT, transitions)
        if kind == "Node":
            _link_nodes(cur, context, written, self._rev)
        elif kind == "NodeClaim":
            _link_claims(cur, context, written, self._rev)

    # -- retention ---------------------------------------------------------------------

    def prune(self, now: datetime) -> int:
        """Drop what is older than max_age, then the oldest events and transitions until
        the file fits max_bytes; give the freed pages back. Returns the rows removed."""
        cutoff = _ts(now - self.max_age)
        removed = 0
        with self._transaction() as cur:
            removed += cur.execute(
                "DELETE FROM lifecycles WHERE deleted_at IS NOT NULL AND deleted_at < ?",
                (cutoff,),
            ).rowcount
            removed += cur.execute("DELETE FROM transitions WHERE time < ?", (cutoff,)).rowcount
            removed += cur.execute("DELETE FROM events WHERE t < ?", (cutoff,)).rowcount
            while (used := self._used_bytes(cur)) > self.max_bytes:
                # Drop about the share of rows by which the file is over, plus 2% so the
                # loop ends in a round or two rather than creeping down row by row.
                step = self._drop_oldest(cur, (used - self.max_bytes) / used + 0.02)
                if step == 0:
                    break  # nothing left that may go; the live objects stay
                removed += step
        assert self._write is not None
        with self._wlock:
            # Return freed pages to the filesystem, then fold the WAL back so the files
            # on disk really shrink (the WAL would otherwise keep the old pages' size).
            # executescript steps the pragma to completion; execute() would free one page.
            self._write.executescript("PRAGMA incremental_vacuum;")
            self._write.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return removed

    @staticmethod
    def _used_bytes(cur: sqlite3.Cursor) -> int:
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        free = cur.execute("PRAGMA freelist_count").fetchone()[0]
        size = cur.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    @staticmethod
    def _drop_oldest(cur: sqlite3.Cursor, share: float) -> int:
        """One chunk: the oldest `share` of events and of transitions, and only when both
        are empty the longest-ended lifecycles."""
        removed = 0
        for table, column in (("events", "t"), ("transitions", "time")):
            count = cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            if not count:
                continue
            chunk = max(1, math.ceil(count * min(share, 1.0)))
            removed += cur.execute(
                f"DELETE FROM {table} WHERE id IN "
                f"(SELECT id FROM {table} ORDER BY {column} LIMIT ?)",
                (chunk,),
            ).rowcount
        if removed:
            return removed
        count = cur.execute(
            "SELECT count(*) FROM lifecycles WHERE deleted_at IS NOT NULL"
        ).fetchone()[0]
        if not count:
            return 0
        return int(
            cur.execute(
                "DELETE FROM lifecycles WHERE id IN (SELECT id FROM lifecycles "
                "WHERE deleted_at IS NOT NULL ORDER BY deleted_at LIMIT ?)",
                (max(1, math.ceil(count * min(share, 1.0))),),
            ).rowcount
        )

    # -- reading --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection | None]:
        with self._rlock:
            if self._closed:
                raise HistoryError(f"history {self.path} is closed")
            if self._read is None:
                self._open_reader()  # a read-only store may predate the writer's file
            yield self._read

    def lifecycles(
        self,
        context: str,
        *,
        kind: str = "Node",
        pool: str | None = None,
        since: datetime | None = None,
    ) -> list[Lifecycle]:
        """Objects of `kind` in `context`, oldest first; with `since`, only those alive at
        some point at or after it (not deleted, or deleted since)."""
        where = " WHERE context = ? AND kind = ?"
        args: list[Any] = [context, kind]
        if since is not None:
            where += " AND (deleted_at IS NULL OR deleted_at >= ?)"
            args.append(_ts(since))
        if pool is not None:
            where += " AND pool = ?"
            args.append(pool)
        with self._reading() as conn:
            if conn is None:
                return []
            cache = self._cache
            # One snapshot for both queries, so a commit in between cannot split them.
            conn.execute("BEGIN")
            try:
                # The covering index answers this without reading the table.
                index = conn.execute(
                    "SELECT id, rev FROM lifecycles"
                    + where
                    + " ORDER BY COALESCE(created, first_seen), id",
                    args,
                ).fetchall()
                stale = [i for i, rev in index if (hit := cache.get(i)) is None or hit[0] != rev]
                if len(stale) > len(index) // 2:
                    rows = conn.execute(_LC_READ + where, args).fetchall()
                else:
                    rows = []
                    for chunk in _chunks(stale):
                        marks = ", ".join("?" for _ in chunk)
                        rows += conn.execute(_LC_READ + f" WHERE id IN ({marks})", chunk).fetchall()
            finally:
                conn.execute("COMMIT")
            for row, lifecycle in zip(rows, _lifecycles(rows), strict=True):
                cache[row[-2]] = (row[-1], lifecycle)
            result = [cache[i][1] for i, _ in index]
            if len(cache) > 2 * len(result) + 50_000:
                # Bound the cache by what is being read now; pruned rows leave with it.
                self._cache = {i: cache[i] for i, _ in index}
        return result

    def transitions(
        self,
        context: str,
        *,
        kind: str,
        name: str | None = None,
        since: datetime | None = None,
    ) -> list[Transition]:
        """Condition flips, oldest first."""
        sql = (
            "SELECT context, kind, name, uid, time, observed_at, condition, status, reason, "
            "message FROM transitions WHERE context = ? AND kind = ?"
        )
        args: list[Any] = [context, kind]
        if name is not None:
            sql += " AND name = ?"
            args.append(name)
        if since is not None:
            sql += " AND time >= ?"
            args.append(_ts(since))
        sql += " ORDER BY time, id"
        with self._reading() as conn:
            if conn is None:
                return []
            rows = conn.execute(sql, args).fetchall()
        return [
            Transition(r[0], r[1], r[2], r[3], _req_dt(r[4]), _req_dt(r[5]), *r[6:]) for r in rows
        ]

    def events(
        self,
        context: str,
        *,
        since: datetime | None = None,
        involved_kind: str | None = None,
        involved_name: str | None = None,
    ) -> list[Event]:
        """Events as last seen (one per uid, latest count), oldest first; `since` compares
        the last occurrence."""
        sql = (
            "SELECT namespace, name, uid, involved_kind, involved_name, involved_uid, reason, "
            "message, type, source, host, first_seen, last_seen, count, rv FROM events "
            "WHERE context = ?"
        )
        args: list[Any] = [context]
        if involved_kind is not None:
            sql += " AND involved_kind = ?"
            args.append(involved_kind)
        if involved_name is not None:
            sql += " AND involved_name = ?"
            args.append(involved_name)
        if since is not None:
            sql += " AND t >= ?"
            args.append(_ts(since))
        sql += " ORDER BY t, id"
        with self._reading() as conn:
            if conn is None:
                return []
            rows = conn.execute(sql, args).fetchall()
        return [_event(r) for r in rows]

    def contexts(self) -> list[str]:
        """The contexts this history holds anything about."""
        with self._reading() as conn:
            if conn is None:
                return []
            rows = conn.execute(
                "SELECT DISTINCT context FROM lifecycles UNION SELECT DISTINCT context FROM events"
            ).fetchall()
        return sorted(r[0] for r in rows)

    def stats(self) -> dict[str, int]:
        """Row counts and bytes on disk (database + WAL)."""
        result = {"lifecycles": 0, "alive": 0, "transitions": 0, "events": 0}
        with self._reading() as conn:
            if conn is not None:
                result["lifecycles"] = conn.execute("SELECT count(*) FROM lifecycles").fetchone()[0]
                result["alive"] = conn.execute(
                    "SELECT count(*) FROM lifecycles WHERE deleted_at IS NULL"
                ).fetchone()[0]
                result["transitions"] = conn.execute("SELECT count(*) FROM transitions").fetchone()[
                    0
                ]
                result["events"] = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        sizes = {}
        for suffix in ("", "-wal"):
            try:
                sizes[suffix] = os.path.getsize(str(self.path) + suffix)
            except OSError:
                sizes[suffix] = 0
        result["db_bytes"] = sizes[""]
        result["wal_bytes"] = sizes["-wal"]
        result["file_bytes"] = sizes[""] + sizes["-wal"]
        return result


# -- merging one observation into a lifecycle row ----------------------------------------------


def _healthy(cond: Condition) -> bool:
    return cond.status == "True"


def _merge(
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
    before: dict[str, list[str]] = json.loads(old["conds"]) if old else {}
    now_conds = {c.type: [c.status, c.reason] for c in conditions}
    for cond in conditions:
        if before.get(cond.type) != now_conds[cond.type]:
            when = _ts(cond.last_transition)
            transitions.append(
                (
                    context, kind, model.name, model.uid, t if when is None else when, t,
                    cond.type, cond.status, cond.reason, cond.message,
                )
            )  # fmt: skip

    def keep(column: str, value: Any) -> Any:
        """The new value when there is one, else what we had (fields never blank out)."""
        if value:
            return value
        return old[column] if old else value

    def first(column: str, value: Any) -> Any:
        """The first value ever seen (Karpenter, too, keeps an earlier termination time)."""
        if old and old[column] is not None:
            return old[column]
        return value

    first_ready = old["first_ready"] if old else None
    ready = next((c for c in conditions if c.type == "Ready"), None)
    if first_ready is None and ready is not None and _healthy(ready):
        first_ready = _ts(ready.last_transition) or t

    disruption = old["disruption_reason"] if old else None
    drifted = bool(old["drifted"]) if old else False
    termination = None
    if kind == "NodeClaim":
        termination = _ts(model.termination_timestamp)
        reason = next((c for c in conditions if c.type == "DisruptionReason"), None)
        if reason is not None and _healthy(reason):
            disruption = reason.reason or reason.message or "True"
        drift = next((c for c in conditions if c.type == "Drifted"), None)
        drifted = drifted or (drift is not None and _healthy(drift))

    lu = (old["lu_type"], old["lu_status"], old["lu_reason"]) if old else (None, None, None)
    # Only what happened before deletion explains it: once a node is being deleted its
    # kubelet goes away and Ready=Unknown would bury the condition that got it repaired.
    deleting = first("deleting_since", _ts(getattr(model, "deleting", None)))
    if kind == "Node" and not (old and old["deleted_at"] is not None):
        unhealthy = []
        for c in conditions:
            if _healthy(c):
                continue
            since = _ts(c.last_transition)
            if deleting is None or (since is not None and since <= deleting):
                unhealthy.append((since or t, c.type != "Ready", c))
        if unhealthy:
            # The most recent flip is the newest news; on a tie the specific NMA
            # condition says more than Ready.
            worst = max(unhealthy, key=lambda item: item[:2])[2]
            lu = (worst.type, worst.status, worst.reason)

    deleted_at = old["deleted_at"] if old else None
    deleted_seen = old["deleted_seen"] if old else None
    if change == "DELETED":
        if deleted_at is None:
            deleted_at, deleted_seen = t, "watch"
    elif deleted_at is not None:
        # Seen alive again (a relist raced the deletion): the store mirrors what is seen.
        deleted_at = deleted_seen = None

    row: dict[str, Any] = {
        "context": context,
        "kind": kind,
        "key": key,
        "name": model.name,
        "uid": model.uid,
        "pool": keep("pool", model.name if kind == "NodePool" else model.pool),
        "instance_type": keep("instance_type", getattr(model, "instance_type", "")),
        "instance_id": keep("instance_id", getattr(model, "instance_id", "")),
        "provider_id": keep("provider_id", getattr(model, "provider_id", "")),
        "image_id": keep("image_id", getattr(model, "image_id", "")),
        "node_name": keep("node_name", getattr(model, "node_name", "")),
        "nodeclaim": old["nodeclaim"] if old else "",
        "capacity_type": keep("capacity_type", getattr(model, "capacity_type", "")),
        "zone": keep("zone", getattr(model, "zone", "")),
        "created": keep("created", _ts(model.created)),
        "first_seen": old["first_seen"] if old else t,
        "first_ready": first_ready,
        "last_seen": t,
        "deleting_since": deleting,
        "termination_ts": first("termination_ts", termination),
        "disruption_reason": disruption,
        "drifted": int(drifted),
        "deleted_at": deleted_at,
        "deleted_seen": deleted_seen,
        "lu_type": lu[0],
        "lu_status": lu[1],
        "lu_reason": lu[2],
        "conds": json.dumps(now_conds, separators=(",", ":"), sort_keys=True),
    }
    if old is not None and change != "DELETED" and t - old["last_seen"] < LAST_SEEN_STEP:
        row["last_seen"] = old["last_seen"]  # throttled: see LAST_SEEN_STEP
    return row


def _link_nodes(
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
        lu = (row["lu_type"], row["lu_status"], row["lu_reason"])
        if lu[0] is not None and (
            old is None or lu != (old["lu_type"], old["lu_status"], old["lu_reason"])
        ):
            unhealthy.append((*lu, rev, context, provider, row["name"]))
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


def _link_claims(
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


def _event(r: Sequence[Any]) -> Event:
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


def _lifecycles(rows: list[Any]) -> list[Lifecycle]:
    """Rows of _LC_READ → Lifecycles. Written flat on purpose: rules read 20,000 of these
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


# -- the recorder ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Change:
    plural: str
    change: str
    models: list[Any]
    observed_at: datetime


class HistoryRecorder:
    """Feeds a HistoryStore from ClusterState notifications on one writer thread.

    `listener` runs on the watch threads: it only stamps the change and queues it. The
    queue is bounded; when full the oldest change is dropped and counted (`dropped`),
    because a stalled watch thread would freeze the live view, which matters more.
    On a read-only store (another process is the writer) the recorder does nothing.
    """

    def __init__(
        self,
        store: HistoryStore,
        context: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self.store = store
        self.context = context
        self.clock = clock
        self.max_queue = max_queue
        self.written = 0  # model objects committed
        self.dropped = 0  # changes lost to a full queue
        self.errors: list[str] = []  # the last write failures, newest last
        self._queue: deque[_Change] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # queued or being written
        self._stopping = False
        self._prune_requested = False
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return not self.store.readonly

    @property
    def queued(self) -> int:
        return len(self._queue)

    def listener(self, plural: str, change: str, models: list[Any]) -> None:
        """ClusterState listener: returns at once, whatever the writer is doing."""
        if self.store.readonly or (plural != "events" and plural not in PLURAL_KIND):
            return  # ResourceSlices and other views are not history
        item = _Change(plural, change, list(models), self.clock())
        with self._cond:
            if len(self._queue) >= self.max_queue:
                self._queue.popleft()
                self._pending -= 1
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning(
                        "history writer is behind: dropped %d change(s) so far", self.dropped
                    )
            self._queue.append(item)
            self._pending += 1
            self._cond.notify()

    def request_prune(self) -> None:
        """Ask the writer thread to prune between batches (the one writer does all writes)."""
        with self._cond:
            self._prune_requested = True
            self._cond.notify()

    def start(self) -> HistoryRecorder:
        if self._thread is not None or self.store.readonly:
            return self
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._thread.start()
        return self

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued so far is committed; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending <= 0, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (within `timeout`), then end the writer thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _note_error(self, message: str) -> None:
        log.warning("history: %s", message)
        self.errors.append(message)
        del self.errors[:-_MAX_ERRORS]

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._stopping or self._prune_requested)
                prune, self._prune_requested = self._prune_requested, False
                batch = [self._queue.popleft() for _ in range(min(_BATCH_ITEMS, len(self._queue)))]
                if not batch and not prune and self._stopping:
                    return
            if prune:
                try:
                    self.store.prune(self.clock())
                except Exception as exc:  # noqa: BLE001 - the writer must outlive a failure
                    self._note_error(f"prune failed: {exc}")
            if not batch:
                continue
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[_Change]) -> None:
        items = [(c.plural, c.change, c.models, c.observed_at) for c in batch]
        try:
            self.store.record_batch(self.context, items)
        except Exception as exc:  # noqa: BLE001 - one bad change must not lose the batch
            if len(batch) == 1:
                c = batch[0]
                self._note_error(f"could not record {c.change} {c.plural}: {exc}")
                return
            for one in batch:
                self._write([one])
            return
        self.written += sum(len(c.models) for c in batch)


# -- the headless recorder behind `mignurse watch` ----------------------------------------------

PRUNE_EVERY_SECONDS = 3600.0


def run_recorder(
    client: ClusterClient,
    store: HistoryStore,
    *,
    context: str,
    karpenter: bool,
    stop: threading.Event,
    on_progress: Callable[[str], None],
    progress_every: float = 60.0,
    prune_every: float = PRUNE_EVERY_SECONDS,
    on_tick: Callable[[ClusterState], None] | None = None,
) -> None:
    """List and watch the cluster and record it until `stop` is set. `on_tick` sees the
    live state about once a second, once everything is listed (e.g. auto-collect).

    `on_progress` is called from this thread only: a line when everything is listed,
    one every `progress_every` seconds, one per watch failure, and one at the end."""
    if store.readonly:
        raise HistoryReadOnly(
            f"cannot record to {store.path}: {store.readonly_reason or 'opened read-only'}"
        )
    state = ClusterState()
    state.karpenter = karpenter
    # The cluster's clock, not this machine's: rules compare recorded times with the
    # API server's own timestamps (deletionTimestamp, lastTransitionTime).
    recorder = HistoryRecorder(store, context, clock=client.server_now)
    state.subscribe(recorder.listener)
    reports: deque[ResourceStatus] = deque(maxlen=100)
    watcher = ClusterWatcher(client, state, karpenter=karpenter, on_status=reports.append)
    recorder.start()
    recorder.request_prune()  # a recorder restarted after days starts within bounds
    watcher.start()
    started = time.monotonic()
    next_progress = started + progress_every
    next_prune = started + prune_every
    listed = False
    errors_seen = 0
    try:
        while not stop.wait(min(1.0, progress_every)):
            if on_tick is not None and watcher.synced():
                on_tick(state)
            while reports:
                status = reports.popleft()
                if status.error:
                    on_progress(f"{status.plural}: {status.error} (retrying)")
            if not listed and all(s.synced for s in watcher.status.values()):
                listed = True
                counts = state.counts()
                on_progress(
                    "listed "
                    + ", ".join(f"{n:,} {plural}" for plural, n in counts.items())
                    + f"; recording to {store.path}"
                )
            now = time.monotonic()
            if now >= next_prune:
                recorder.request_prune()
                next_prune = now + prune_every
            if len(recorder.errors) != errors_seen:
                errors_seen = len(recorder.errors)
                on_progress(f"history write failed: {recorder.errors[-1]}")
            if now >= next_progress:
                next_progress = now + progress_every
                on_progress(_progress_line(store, recorder))
    finally:
        watcher.stop()
        recorder.stop()
        on_progress("stopped; " + _progress_line(store, recorder))


def _progress_line(store: HistoryStore, recorder: HistoryRecorder) -> str:
    stats = store.stats()
    line = (
        f"recorded {recorder.written:,} objects; history holds {stats['alive']:,} live and "
        f"{stats['lifecycles'] - stats['alive']:,} ended objects, "
        f"{stats['transitions']:,} transitions, {stats['events']:,} events "
        f"({stats['file_bytes'] / 2**20:.1f} MiB)"
    )
    if recorder.queued:
        line += f"; {recorder.queued:,} queued"
    if recorder.dropped:
        line += f"; {recorder.dropped:,} changes dropped (writer too slow)"
    return line
