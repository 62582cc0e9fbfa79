"""The simulator's object store: objects and their resourceVersions, and the per-resource
watch history that lists at an old version and watches are served from.

Objects are kept as their serialized JSON bytes (what the API server would send as a list
item), plus the labels and selectable fields extracted once per write. Reads decode a fresh
copy, so callers can never alias stored state, and a list of 5,000 nodes is a byte join.
"""

from __future__ import annotations

import bisect
import builtins
import collections
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mignurse.sim.resources import RESOURCES, JsonDict, Key, ResourceType
from mignurse.sim.selectors import Fields, Selection, extract_fields

_NO_LABELS: dict[str, str] = {}


class Conflict(Exception):
    pass


class AlreadyExists(Exception):
    pass


class Expired(Exception):
    """The requested resourceVersion is older than the retained history."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class Entry:
    __slots__ = ("decoded", "fields", "labels", "raw", "rv")

    def __init__(self, raw: bytes, labels: dict[str, str], fields: Fields, rv: int):
        self.raw = raw
        self.labels = labels
        self.fields = fields
        self.rv = rv
        self.decoded: JsonDict | None = None  # `Store.peek`'s shared copy of this version


@dataclass(frozen=True)
class Change:
    rv: int
    plural: str
    type: str  # ADDED | MODIFIED | DELETED
    raw: bytes
    labels: dict[str, str]
    fields: Fields
    prev_labels: dict[str, str] | None
    prev_fields: Fields | None
    prev_raw: bytes | None = None  # the object before the change: lists at an exact old version


# k8s.io/apiserver v0.32 pkg/storage/cacher/watch_cache.go: each resource's watch cache holds
# 100 to 100*1024 events, doubling while all of them are younger than 75 s and halving when
# its newest quarter is older; a watch from before its oldest event is 410 Gone.
EVENT_FRESH_SECONDS = 75.0
CACHE_LOWER_BOUND = 100
CACHE_UPPER_BOUND = 100 * 1024


class WatchWindow:
    """The event window of one resource's watch cache: (resourceVersion, time) pairs."""

    __slots__ = ("capacity", "events", "list_rv", "removed")

    def __init__(self, list_rv: int) -> None:
        self.capacity = CACHE_LOWER_BOUND
        self.events: collections.deque[tuple[int, float]] = collections.deque()
        self.list_rv = list_rv
        self.removed = False

    def add(self, rv: int, at: float) -> None:
        full = len(self.events) >= self.capacity
        if full and at - self.events[0][1] < EVENT_FRESH_SECONDS:
            self.capacity = min(self.capacity * 2, CACHE_UPPER_BOUND)
        elif (
            full
            and at - self.events[len(self.events) - self.capacity // 4][1] > EVENT_FRESH_SECONDS
        ):
            self.capacity = max(self.capacity // 2, CACHE_LOWER_BOUND)
            while len(self.events) > self.capacity:
                self.events.popleft()
                self.removed = True
        if len(self.events) >= self.capacity:
            self.events.popleft()
            self.removed = True
        self.events.append((rv, at))

    def oldest(self) -> int:
        """The oldest resourceVersion a watch can start after, plus one (watch_cache.go)."""
        if not self.removed or not self.events:
            return self.list_rv + 1
        return self.events[0][0]


def _dumps(obj: JsonDict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


_VERSIONS_KEPT = 4  # exact lists remembered per resource: a few paged lists at once


def watch_line(rtype: ResourceType, event_type: str, raw: bytes) -> bytes:
    """One watch frame; splices kind/apiVersion into the cached item bytes."""
    return b'{"type":"%s","object":{%s%s}}\n' % (
        event_type.encode(),
        rtype.kind_header(),
        raw[1:-1],
    )


class Store:
    """Thread-safe store; `lock` is shared with the controllers and the HTTP handlers."""

    def __init__(self, max_history: int = 20000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._data: dict[str, dict[Key, Entry]] = {p: {} for p in RESOURCES}
        self._sorted: dict[str, list[Key] | None] = {p: None for p in RESOURCES}
        self.rv = 1
        # One watch history per resource, as kube-apiserver keeps a watch cache per resource:
        # a flood of Lease renewals never pushes a Node watcher out of its window.
        self._history: dict[str, list[Change]] = {p: [] for p in RESOURCES}
        self._history_rvs: dict[str, list[int]] = {p: [] for p in RESOURCES}
        self._floors: dict[str, int] = dict.fromkeys(RESOURCES, 1)  # changes after it are kept
        # The resourceVersion of each resource's last write: what is derived from a resource
        # (the DaemonSets from their pods) is made again only when it moved.
        self.written_at: dict[str, int] = dict.fromkeys(RESOURCES, 0)
        # `list_at`'s last few states, by resource and version (oldest first)
        self._at: dict[str, dict[int, tuple[builtins.list[Key], builtins.list[Entry]]]] = {
            p: {} for p in RESOURCES
        }
        self.max_history = max_history
        self.recording = True
        self.clock: Callable[[], float] = lambda: 0.0  # the sim clock, set by SimCluster
        self._windows: dict[str, WatchWindow] = {p: WatchWindow(self.rv) for p in RESOURCES}

    # ------------------------------------------------------------------ reads

    def get(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        with self.lock:
            entry = self._data[plural].get((namespace, name))
            return json.loads(entry.raw) if entry else None

    def peek(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        """The object as `get` returns it, but decoded once per version and shared: the caller
        must not change it. For the controllers' hot reads (a Node's Ready condition, a Pod's
        phase, a PDB's budget), which `get` would decode again on every pass."""
        with self.lock:
            entry = self._data[plural].get((namespace, name))
            if entry is None:
                return None
            if entry.decoded is None:
                entry.decoded = json.loads(entry.raw)
            return entry.decoded

    def get_raw(self, plural: str, namespace: str, name: str) -> bytes | None:
        with self.lock:
            entry = self._data[plural].get((namespace, name))
            return entry.raw if entry else None

    def exists(self, plural: str, namespace: str, name: str) -> bool:
        return (namespace, name) in self._data[plural]

    def count(self, plural: str) -> int:
        return len(self._data[plural])

    def keys(self, plural: str) -> list[Key]:
        with self.lock:
            cached = self._sorted[plural]
            if cached is None:
                cached = sorted(self._data[plural])
                self._sorted[plural] = cached
            return cached

    def entries(self, plural: str) -> Iterator[tuple[Key, Entry]]:
        data = self._data[plural]
        for key in self.keys(plural):
            yield key, data[key]

    def all(self, plural: str) -> list[JsonDict]:
        with self.lock:
            return [json.loads(e.raw) for _, e in self.entries(plural)]

    def select(self, plural: str, labels: dict[str, str]) -> list[JsonDict]:
        """Objects whose labels contain all of `labels` (equality selector)."""
        with self.lock:
            out = []
            for _, e in self.entries(plural):
                if all(e.labels.get(k) == v for k, v in labels.items()):
                    out.append(json.loads(e.raw))
            return out

    def list(
        self, plural: str, sel: Selection, *, start_after: Key | None = None, limit: int = 0
    ) -> tuple[int, list[bytes], Key | None, int | None]:
        """(resourceVersion, item bytes, last key if more remain, remaining count)."""
        with self.lock:
            keys = self.keys(plural)
            data = self._data[plural]
            lo = 0
            if start_after is not None:
                lo = bisect.bisect_right(keys, start_after)
            items: list[bytes] = []
            last: Key | None = None
            idx = lo
            for idx in range(lo, len(keys)):
                key = keys[idx]
                entry = data[key]
                if sel.matches(entry.labels, entry.fields):
                    if limit and len(items) >= limit:
                        last = keys[idx - 1]
                        break
                    items.append(entry.raw)
            else:
                idx = len(keys)
            remaining: int | None = None
            if last is not None and not sel.filtered:
                # The real server only counts what is left when no selector filters the list.
                remaining = (
                    len(keys) - idx
                    if not sel.namespace
                    else sum(1 for k in keys[idx:] if k[0] == sel.namespace)
                )
            return self.rv, items, last, remaining

    # ------------------------------------------------------------------ writes

    def _record(self, change: Change) -> None:
        if not self.recording:
            # Bulk builds keep no history: watches start from the state after the build.
            for plural in self._history:
                self._history[plural].clear()
                self._history_rvs[plural].clear()
                self._floors[plural] = change.rv
            self._windows[change.plural] = WatchWindow(change.rv)
            return
        self._windows[change.plural].add(change.rv, self.clock())
        history, rvs = self._history[change.plural], self._history_rvs[change.plural]
        history.append(change)
        rvs.append(change.rv)
        overflow = len(history) - self.max_history
        if overflow > self.max_history // 10:
            self._floors[change.plural] = rvs[overflow - 1]
            del history[:overflow]
            del rvs[:overflow]
        self.changed.notify_all()

    def _write(self, plural: str, obj: JsonDict, event_type: str) -> JsonDict:
        rtype = RESOURCES[plural]
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
        self.rv += 1
        self.written_at[plural] = self.rv
        meta["resourceVersion"] = str(self.rv)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        raw = _dumps(obj)
        labels = dict(meta["labels"]) if meta.get("labels") else _NO_LABELS
        fields = extract_fields(rtype, obj)
        prev = self._data[plural].get(key)
        if prev is None:
            self._sorted[plural] = None
        self._data[plural][key] = Entry(raw, labels, fields, self.rv)
        self._record(
            Change(
                self.rv,
                plural,
                event_type,
                raw,
                labels,
                fields,
                prev.labels if prev else None,
                prev.fields if prev else None,
                prev.raw if prev else None,
            )
        )
        return obj

    def create(self, plural: str, obj: JsonDict) -> JsonDict:
        with self.lock:
            rtype = RESOURCES[plural]
            meta = obj["metadata"]
            key = (meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
            if key in self._data[plural]:
                raise AlreadyExists(f'{rtype.qualified} "{meta["name"]}" already exists')
            return self._write(plural, obj, "ADDED")

    def update(self, plural: str, obj: JsonDict, *, expect_rv: str | None = None) -> JsonDict:
        with self.lock:
            rtype = RESOURCES[plural]
            meta = obj["metadata"]
            key = (meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
            current = self._data[plural].get(key)
            if current is None:
                raise KeyError(key)
            if expect_rv is not None and expect_rv != str(current.rv):
                raise Conflict()
            return self._write(plural, obj, "MODIFIED")

    def put(self, plural: str, obj: JsonDict) -> JsonDict:
        """Create or replace (controllers use it when they own the object)."""
        with self.lock:
            rtype = RESOURCES[plural]
            meta = obj["metadata"]
            key = (meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
            kind = "MODIFIED" if key in self._data[plural] else "ADDED"
            return self._write(plural, obj, kind)

    def delete(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        with self.lock:
            entry = self._data[plural].pop((namespace, name), None)
            if entry is None:
                return None
            self._sorted[plural] = None
            obj: JsonDict = json.loads(entry.raw)
            self.rv += 1
            self.written_at[plural] = self.rv
            obj["metadata"]["resourceVersion"] = str(self.rv)
            raw = _dumps(obj)
            self._record(
                Change(
                    self.rv,
                    plural,
                    "DELETED",
                    raw,
                    entry.labels,
                    entry.fields,
                    None,
                    None,
                    entry.raw,
                )
            )
            return obj

    # ------------------------------------------------------------------ history

    def oldest_rv_of(self, plural: str) -> int:
        return self._floors[plural]

    def compact(self) -> None:
        with self.lock:
            for plural in self._history:
                self._history[plural].clear()
                self._history_rvs[plural].clear()
                self._floors[plural] = self.rv
            self._windows = {p: WatchWindow(self.rv) for p in RESOURCES}
            self.changed.notify_all()

    def watch_oldest(self, plural: str) -> int:
        """watch_cache.go's `oldest` for one resource: a watch from rv < oldest - 1 is 410."""
        with self.lock:
            return max(self._windows[plural].oldest(), self._floors[plural] + 1)

    def list_at(self, plural: str, rv: int) -> tuple[builtins.list[Key], builtins.list[Entry]]:
        """The keys and objects of one resource as they were at resourceVersion `rv` (an
        exact list), in key order; Expired when that version was compacted. The state at a
        version never changes once later versions exist, so the last few asked for are
        kept: a paged list asks for the same version once per page."""
        with self.lock:
            floor = self._floors[plural]
            if rv < floor:
                raise Expired(rv, floor + 1)
            kept = self._at[plural]
            for gone in [version for version in kept if version < floor]:
                del kept[gone]  # compacted since: no list is served at it again
            found = kept.get(rv)
            if found is not None:
                return found
            state = dict(self._data[plural])
            namespaced = RESOURCES[plural].namespaced
            history = self._history[plural]
            start = bisect.bisect_right(self._history_rvs[plural], rv)
            for change in reversed(history[start:]):
                key = (change.fields[1] if namespaced else "", change.fields[0])
                if change.type == "ADDED":
                    state.pop(key, None)
                elif change.prev_raw is not None:
                    # a deletion keeps the object's own labels and fields, not "prev" ones
                    state[key] = Entry(
                        change.prev_raw,
                        change.labels if change.prev_labels is None else change.prev_labels,
                        change.fields if change.prev_fields is None else change.prev_fields,
                        change.rv,
                    )
            keys = sorted(state)
            found = (keys, [state[key] for key in keys])
            if len(kept) >= _VERSIONS_KEPT:
                del kept[next(iter(kept))]
            kept[rv] = found
            return found

    def changes_after(self, rv: int, plural: str | None = None) -> builtins.list[Change]:
        """Changes (of one resource, or of all) with resourceVersion > rv; raises Expired
        when they were compacted."""
        with self.lock:
            plurals = [plural] if plural is not None else list(self._history)
            floor = max(self._floors[p] for p in plurals)
            if rv < floor:
                raise Expired(rv, floor + 1)
            found: builtins.list[Change] = []
            for p in plurals:
                found.extend(self._history[p][bisect.bisect_right(self._history_rvs[p], rv) :])
            if plural is None:
                found.sort(key=lambda c: c.rv)
            return found

    def wait_for_change(self, rv: int, timeout: float) -> None:
        with self.changed:
            if self.rv <= rv:
                self.changed.wait(timeout)

    def wake_watchers(self) -> None:
        with self.changed:
            self.changed.notify_all()
