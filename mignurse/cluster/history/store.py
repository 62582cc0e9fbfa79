"""The history file: opening it (one writer, many readers), recording, pruning to its age
and size bounds, and reading it back."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mignurse.cluster.history.lifecycle import (
    CHANGES,
    PLURAL_KIND,
    Lifecycle,
    Transition,
    epoch,
    event_from_row,
    from_epoch,
    lifecycles_from_rows,
    link_claims,
    link_nodes,
    merge_row,
)
from mignurse.cluster.history.schema import (
    EV_UPSERT,
    LC_COLUMNS,
    LC_COMPARED,
    LC_INSERT,
    LC_READ,
    LC_SELECT,
    LC_UPDATE,
    SCHEMA,
    SCHEMA_VERSION,
    TR_INSERT,
    chunks,
    event_key,
    object_key,
)
from mignurse.model import Event
from mignurse.paths import (
    StateFileError,
    open_private,
    private_dir,
    state_home,
    state_path_problem,
)

DEFAULT_MAX_AGE = timedelta(days=14)
DEFAULT_MAX_BYTES = 256 * 2**20
_SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's own files beside the database


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
        try:
            private_dir(self.path.parent, tighten=self.path.parent == state_home())
        except StateFileError as exc:
            raise HistoryError(str(exc)) from None

    def _take_writer_lock(self) -> None:
        self._ensure_dir()
        try:
            fd = open_private(self.lock_path, os.O_RDWR | os.O_CREAT)  # never through a link
        except StateFileError as exc:
            raise HistoryError(str(exc)) from None
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

    def _refuse_planted(self) -> None:
        """SQLite opens the database and its -wal, -shm and -journal files by name, following
        links: each is checked first, so a planted link is refused, never written through."""
        for path in (self.path, *(self.path.with_name(self.path.name + s) for s in _SIDE_FILES)):
            problem = state_path_problem(path, "file")
            if problem:
                raise HistoryError(problem)

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
        self._refuse_planted()
        try:
            os.close(open_private(self.path, os.O_RDWR | os.O_CREAT))
        except StateFileError as exc:
            raise HistoryError(str(exc)) from None
        except OSError as exc:
            raise HistoryError(f"cannot open history {self.path}: {exc.strerror}") from None
        conn = self._connect(self.path.resolve().as_uri())
        with self._closed_if_unusable(conn):
            version = self._check_version(conn)
            if version == 0:
                # auto_vacuum must be chosen before the first table exists.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            else:
                conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL under WAL: a killed process loses nothing committed; only a power cut
            # can lose the last transactions, never the file's consistency.
            conn.execute("PRAGMA synchronous = NORMAL")
        self._write = conn

    @contextlib.contextmanager
    def _closed_if_unusable(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Set-up of a fresh connection: on any failure it is closed; a database error is
        one line about the file."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise HistoryError(f"{self.path} is not a usable history database: {exc}") from None
        except BaseException:
            conn.close()
            raise

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
        if self._read is not None or not os.path.lexists(self.path):
            return
        self._refuse_planted()
        conn = self._connect(self.path.resolve().as_uri() + ("?mode=ro" if self.readonly else ""))
        with self._closed_if_unusable(conn):
            conn.execute("PRAGMA query_only = ON")
            if self._check_version(conn) == 0:
                conn.close()  # the writer has not created the schema yet
                return
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
                t = epoch(observed_at)
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
            first, last = epoch(e.first_seen), epoch(e.last_seen)
            sort_t = last if last is not None else first if first is not None else t
            rows.append(
                (
                    context, event_key(e), e.namespace, e.name, e.uid, e.involved_kind,
                    e.involved_name, e.involved_uid, e.reason, e.message, e.type, e.source,
                    e.host, first, last, int(e.count), e.resource_version, sort_t, t,
                )
            )  # fmt: skip
        # A LIST of events deletes nothing: events missing from it expired in the API
        # server, and keeping them past that hour is the whole point of this store.
        cur.executemany(EV_UPSERT, rows)

    def _existing(
        self, cur: sqlite3.Cursor, context: str, kind: str, change: str, keys: list[str]
    ) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        names = ("id", *LC_COLUMNS)
        if change == "LIST":
            for row in cur.execute(
                LC_SELECT + " WHERE context = ? AND kind = ? AND deleted_at IS NULL",
                (context, kind),
            ):
                found[row[3]] = dict(zip(names, row, strict=True))
        missing = [k for k in keys if k not in found]
        for chunk in chunks(missing):
            marks = ", ".join("?" for _ in chunk)
            for row in cur.execute(
                LC_SELECT + f" WHERE context = ? AND kind = ? AND key IN ({marks})",
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
            latest[object_key(model)] = model
        existing = self._existing(cur, context, kind, change, list(latest))
        inserts: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        transitions: list[tuple[Any, ...]] = []
        written: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
        for key, model in latest.items():
            old = existing.get(key)
            row = merge_row(context, kind, key, model, old, change, t, transitions)
            row["rev"] = self._rev
            if old is None:
                inserts.append(tuple(row[c] for c in LC_COLUMNS))
            elif any(row[c] != old[c] for c in LC_COMPARED) or row["last_seen"] != old["last_seen"]:
                updates.append((*(row[c] for c in LC_COLUMNS[3:]), old["id"]))
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
        cur.executemany(LC_INSERT, inserts)
        cur.executemany(LC_UPDATE, updates)
        cur.executemany(TR_INSERT, transitions)
        if kind == "Node":
            link_nodes(cur, context, written, self._rev)
        elif kind == "NodeClaim":
            link_claims(cur, context, written, self._rev)

    # -- retention ---------------------------------------------------------------------

    def prune(self, now: datetime) -> int:
        """Drop what is older than max_age, then the oldest events and transitions until
        the file fits max_bytes; give the freed pages back. Returns the rows removed."""
        cutoff = epoch(now - self.max_age)
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
            args.append(epoch(since))
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
                    rows = conn.execute(LC_READ + where, args).fetchall()
                else:
                    rows = []
                    for chunk in chunks(stale):
                        marks = ", ".join("?" for _ in chunk)
                        rows += conn.execute(LC_READ + f" WHERE id IN ({marks})", chunk).fetchall()
            finally:
                conn.execute("COMMIT")
            for row, lifecycle in zip(rows, lifecycles_from_rows(rows), strict=True):
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
        filters = {"name = ?": name, "time >= ?": epoch(since) if since is not None else None}
        rows = self._select(sql, [context, kind], filters, order="time, id")
        return [
            Transition(r[0], r[1], r[2], r[3], from_epoch(r[4]), from_epoch(r[5]), *r[6:])
            for r in rows
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
        filters = {
            "involved_kind = ?": involved_kind,
            "involved_name = ?": involved_name,
            "t >= ?": epoch(since) if since is not None else None,
        }
        rows = self._select(sql, [context], filters, order="t, id")
        return [event_from_row(r) for r in rows]

    def _select(
        self, sql: str, args: list[Any], filters: dict[str, Any], *, order: str
    ) -> list[Any]:
        """`sql` narrowed by each filter whose value is not None, in `order`; [] with no file."""
        for clause, value in filters.items():
            if value is not None:
                sql += f" AND {clause}"
                args.append(value)
        with self._reading() as conn:
            if conn is None:
                return []
            return conn.execute(f"{sql} ORDER BY {order}", args).fetchall()

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
