"""The simulator's object store: resourceVersions, watch history, selectors and patches.

Objects are kept as their serialized JSON bytes (what the API server would send as a list
item), plus the labels and selectable fields extracted once per write. Reads decode a fresh
copy, so callers can never alias stored state, and a list of 5,000 nodes is a byte join.
"""

from __future__ import annotations

import bisect
import builtins
import collections
import copy
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()  # selectable fields beyond metadata.name / metadata.namespace
    subresources: tuple[str, ...] = ()
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How RBAC messages name it: `nodes`, `nodeclaims.karpenter.sh`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def field_names(self) -> tuple[str, ...]:
        return ("metadata.name", "metadata.namespace", *self.fields)

    def kind_header(self) -> bytes:
        return f'"kind":"{self.kind}","apiVersion":"{self.api_version}",'.encode()


_READ = ("get", "list", "watch")
_RW = ("delete", "get", "list", "patch", "update", "watch")

RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in (
        ResourceType(
            "nodes",
            "Node",
            "",
            "v1",
            False,
            _RW,
            ("no",),
            ("spec.unschedulable",),
            ("status",),
            "node",
        ),
        ResourceType(
            "pods",
            "Pod",
            "",
            "v1",
            True,
            ("create", *_RW),
            ("po",),
            (
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ),
            ("eviction", "status"),
            "pod",
        ),
        ResourceType(
            "events",
            "Event",
            "",
            "v1",
            True,
            ("create", *_RW),
            ("ev",),
            (
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ),
            (),
            "event",
        ),
        ResourceType(
            "namespaces",
            "Namespace",
            "",
            "v1",
            False,
            (*_READ, "patch"),  # patch: runbook locks of `target: cluster` live on kube-system
            ("ns",),
            ("status.phase",),
            (),
            "namespace",
        ),
        ResourceType(
            "deployments",
            "Deployment",
            "apps",
            "v1",
            True,
            _RW,
            ("deploy",),
            (),
            ("status", "scale"),
            "deployment",
        ),
        ResourceType(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            "policy",
            "v1",
            True,
            _READ,
            ("pdb",),
            (),
            ("status",),
            "poddisruptionbudget",
        ),
        ResourceType(
            "replicasets",
            "ReplicaSet",
            "apps",
            "v1",
            True,
            _READ,
            ("rs",),
            (),
            ("status", "scale"),
            "replicaset",
        ),
        ResourceType(
            "leases",
            "Lease",
            "coordination.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            (),
            "lease",
        ),
        ResourceType(
            "nodeclaims",
            "NodeClaim",
            "karpenter.sh",
            "v1",
            False,
            _RW,
            (),
            (),
            ("status",),
            "nodeclaim",
        ),
        ResourceType(
            "nodepools",
            "NodePool",
            "karpenter.sh",
            "v1",
            False,
            _RW,
            (),
            (),
            ("status",),
            "nodepool",
        ),
        ResourceType(
            "ec2nodeclasses",
            "EC2NodeClass",
            "karpenter.k8s.aws",
            "v1",
            False,
            ("get", "list", "patch", "update", "watch"),
            ("ec2nc", "ec2ncs"),
            (),
            ("status",),
            "ec2nodeclass",
        ),
        # resource.k8s.io, kept as v1 (the storage version from Kubernetes 1.34); other
        # versions are served converted (mignurse.sim.resourceapi).
        ResourceType(
            "resourceslices",
            "ResourceSlice",
            "resource.k8s.io",
            "v1",
            False,
            _READ,
            (),
            # kubernetes v1.34 pkg/registry/resource/resourceslice/strategy.go toSelectableFields
            ("spec.nodeName", "spec.driver"),
            (),
            "resourceslice",
        ),
        ResourceType(
            "resourceclaims",
            "ResourceClaim",
            "resource.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            ("status",),
            "resourceclaim",
        ),
        ResourceType(
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            "resource.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            (),
            "resourceclaimtemplate",
        ),
        ResourceType(
            "deviceclasses",
            "DeviceClass",
            "resource.k8s.io",
            "v1",
            False,
            _READ,
            (),
            (),
            (),
            "deviceclass",
        ),
        ResourceType(
            "customresourcedefinitions",
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            "v1",
            False,
            _READ,
            ("crd", "crds"),
            (),
            ("status",),
            "customresourcedefinition",
        ),
    )
}


class SelectorError(ValueError):
    """A label or field selector the real API server would refuse with 400."""


class PatchError(ValueError):
    """A patch body that cannot be applied (422 Invalid / 400 BadRequest)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


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


# --------------------------------------------------------------------------- selectors

_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present  # "!"


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _check_key(key: str, raw: str) -> str:
    if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f'unable to parse requirement: invalid label key "{key}" in "{raw}"')
    return key


def _check_value(value: str, raw: str) -> str:
    if not _LABEL_VALUE.match(value) or len(value) > 63:
        raise SelectorError(
            f'unable to parse requirement: invalid label value: "{value}" in "{raw}"'
        )
    return value


_SET_RE = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text:
        return []
    reqs = []
    for term in _split_top_level(text):
        m = _SET_RE.match(term)
        if m:
            values = tuple(
                _check_value(v.strip(), term) for v in m.group("values").split(",") if v.strip()
            )
            reqs.append(Requirement(_check_key(m.group("key"), term), m.group("op"), values))
            continue
        if term.startswith("!"):
            reqs.append(Requirement(_check_key(term[1:].strip(), term), "!"))
            continue
        for op, norm in (("==", "="), ("!=", "!="), ("=", "=")):
            if op in term:
                key, _, value = term.partition(op)
                reqs.append(
                    Requirement(
                        _check_key(key.strip(), term), norm, (_check_value(value.strip(), term),)
                    )
                )
                break
        else:
            reqs.append(Requirement(_check_key(term, term), "exists"))
    return reqs


Fields = tuple[str, ...]  # values in ResourceType.field_names order
_NO_LABELS: dict[str, str] = {}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    index: int
    negate: bool
    value: str

    def matches(self, fields: Fields) -> bool:
        return (fields[self.index] == self.value) != self.negate


def parse_field_selector(text: str | None, rtype: ResourceType) -> list[FieldRequirement]:
    if not text:
        return []
    allowed = rtype.field_names
    reqs = []
    for term in _split_top_level(text):
        for op in ("==", "!=", "="):
            if op in term:
                name, _, value = term.partition(op)
                name = name.strip()
                if name not in allowed:
                    raise SelectorError(f"field label not supported: {name}")
                reqs.append(FieldRequirement(name, allowed.index(name), op == "!=", value.strip()))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
    return reqs


def _dig(obj: JsonDict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def extract_fields(rtype: ResourceType, obj: JsonDict) -> Fields:
    """Selectable field values; interned, since 100,000 events repeat the same few strings."""
    meta = obj.get("metadata", {})
    values = [meta.get("name", ""), meta.get("namespace", "")]
    for path in rtype.fields:
        value = _dig(obj, "source.component" if path == "source" else path)
        if path == "spec.unschedulable" and not value:
            value = "false"
        values.append(value)
    return tuple(sys.intern(v) for v in values)


@dataclass(frozen=True)
class Selection:
    """A parsed list/watch request: namespace, label and field requirements."""

    namespace: str | None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def filtered(self) -> bool:
        return bool(self.labels or self.fields)

    def matches(self, labels: dict[str, str], fields: Fields) -> bool:
        if self.namespace and fields[1] != self.namespace:
            return False
        return all(r.matches(labels) for r in self.labels) and all(
            f.matches(fields) for f in self.fields
        )


# --------------------------------------------------------------------------- storage


class Entry:
    __slots__ = ("fields", "labels", "raw", "rv")

    def __init__(self, raw: bytes, labels: dict[str, str], fields: Fields, rv: int):
        self.raw = raw
        self.labels = labels
        self.fields = fields
        self.rv = rv


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
        self.max_history = max_history
        self.recording = True
        self.clock: Callable[[], float] = lambda: 0.0  # the sim clock, set by SimCluster
        self._windows: dict[str, WatchWindow] = {p: WatchWindow(self.rv) for p in RESOURCES}

    # ------------------------------------------------------------------ reads

    def get(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        with self.lock:
            entry = self._data[plural].get((namespace, name))
            return json.loads(entry.raw) if entry else None

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

    def list_at(self, plural: str, rv: int) -> builtins.list[tuple[Key, bytes]]:
        """The objects of one resource as they were at resourceVersion `rv` (an exact list);
        Expired when that version was compacted."""
        with self.lock:
            floor = self._floors[plural]
            if rv < floor:
                raise Expired(rv, floor + 1)
            state = {key: entry.raw for key, entry in self._data[plural].items()}
            namespaced = RESOURCES[plural].namespaced
            history = self._history[plural]
            start = bisect.bisect_right(self._history_rvs[plural], rv)
            for change in reversed(history[start:]):
                key = (change.fields[1] if namespaced else "", change.fields[0])
                if change.type == "ADDED":
                    state.pop(key, None)
                elif change.prev_raw is not None:
                    state[key] = change.prev_raw
            return sorted(state.items())

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


# --------------------------------------------------------------------------- patches

MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "conditions": ("type",),
    "taints": ("key", "effect"),
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "ports": ("containerPort",),
    "addresses": ("type",),
    "ownerReferences": ("uid",),
    "imagePullSecrets": ("name",),
}
PRIMITIVE_MERGE_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _same_item(item: Any, patch_item: JsonDict, keys: tuple[str, ...]) -> bool:
    if not isinstance(item, dict):
        return False
    primary = keys[0]
    if item.get(primary) != patch_item.get(primary):
        return False
    return all(item.get(k) == patch_item[k] for k in keys[1:] if k in patch_item)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch with the merge keys of the lists mignurse touches."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$retainKeys", "$patch") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in PRIMITIVE_MERGE_LISTS:
            merged = list(result.get(key) or [])
            merged += [v for v in value if v not in merged]
            result[key] = merged
        elif isinstance(value, dict):
            merged_value = strategic_merge_patch(result.get(key), value)
            if merged_value is None:
                result.pop(key, None)
            else:
                result[key] = merged_value
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], keys: tuple[str, ...]) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    result = [copy.deepcopy(c) for c in current]
    for item in patch:
        if not isinstance(item, dict) or keys[0] not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {keys[0]}")
        matches = [i for i, c in enumerate(result) if _same_item(c, item, keys)]
        if item.get("$patch") == "delete":
            result = [c for i, c in enumerate(result) if i not in matches]
            continue
        if matches:
            result[matches[0]] = strategic_merge_patch(result[matches[0]], item)
        else:
            result.append(strategic_merge_patch({}, item))
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"doc is missing path: {path}: missing value")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"doc is missing path: {path}: missing value") from None
        else:
            raise PatchError(f"doc is missing path: {path}: missing value")
    return cur


def _json_add(doc: Any, parts: list[str], value: Any, path: str, replace: bool) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(copy.deepcopy(value))
        else:
            try:
                idx = int(last)
            except ValueError:
                raise PatchError(f"invalid array index in {path}") from None
            if replace:
                if not 0 <= idx < len(parent):
                    raise PatchError(f"replace operation does not apply: {path}")
                parent[idx] = copy.deepcopy(value)
            else:
                if not 0 <= idx <= len(parent):
                    raise PatchError(f"add operation does not apply: {path}")
                parent.insert(idx, copy.deepcopy(value))
    else:
        raise PatchError(f"doc is missing path: {path}: missing value")
    return doc


def _json_remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            pass
    raise PatchError(f'remove operation does not apply: doc is missing path: "{path}"')


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}", 400)
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind == "add":
            doc = _json_add(doc, parts, op.get("value"), path, replace=False)
        elif kind == "replace":
            doc = _json_add(doc, parts, op.get("value"), path, replace=True)
        elif kind == "remove":
            _json_remove(doc, parts, path)
        elif kind in ("move", "copy"):
            src = op.get("from", "")
            value = copy.deepcopy(_walk(doc, _pointer(src), src))
            if kind == "move":
                _json_remove(doc, _pointer(src), src)
            doc = _json_add(doc, parts, value, path, replace=False)
        elif kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", 400)
    return doc
