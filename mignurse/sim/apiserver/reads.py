"""How the API server reads: get, list and watch of stored resources, the derived DaemonSets,
and server-side Tables of each.

Lists follow the resourceVersion semantics of k8s.io/apiserver v0.32 (exact, not-older-than,
continue snapshots, rebuilding an old version as etcd reads it); watches follow the watch
cache's window, bookmarks and `sendInitialEvents`.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import random
import time
from typing import Any

from mignurse.sim import derived, tables
from mignurse.sim.apiserver.base import HandlerBase
from mignurse.sim.apiserver.errors import (
    CONTINUE_TOO_OLD,
    LIST_OPTIONS_INVALID,
    LIST_TOO_OLD,
    ApiError,
    not_allowed,
    not_found,
    status_body,
    too_large,
)
from mignurse.sim.discovery import Served
from mignurse.sim.resources import JsonDict, Key, ResourceType
from mignurse.sim.selectors import (
    Selection,
    SelectorError,
    extract_fields,
    parse_field_selector,
    parse_label_selector,
)
from mignurse.sim.store import Change, Expired, watch_line

# kube-apiserver --min-request-timeout=1800: a watch without timeoutSeconds lasts a random
# 30 to 60 minutes (k8s.io/apiserver pkg/endpoints/handlers/get.go ListResource).
MIN_REQUEST_TIMEOUT = 1800.0
# k8s.io/apiserver pkg/storage/cacher/watch_cache.go blockTimeout: a read at a resourceVersion
# the cache has not reached waits this long, then fails "Too large resource version".
BLOCK_TIMEOUT = 3.0


def _encode_continue(rv: int, last: Key) -> str:
    start = f"{last[0]}/{last[1]}" if last[0] else last[1]
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        rv = int(data["rv"])
        start = str(data["start"]).rstrip("\x00")
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ApiError(
            400,
            "BadRequest",
            "continue key is not valid: incorrect encoded start resourceVersion "
            "(version meta.k8s.io/v1)",
        ) from None
    ns, _, name = start.rpartition("/")
    return rv, (ns, name)


class ReadHandler(HandlerBase):
    _headers_sent: bool  # a Table watch sends its column definitions once

    # ------------------------------------------------------------------ tables

    def _printer(self, rtype: ResourceType) -> tuple[list[tables.Column], Any]:
        if rtype.plural in self.server.crd_columns:
            defs, paths = self.server.crd_columns[rtype.plural]
            return defs, lambda obj, now: tables.crd_row(defs, paths, obj, now)
        if rtype.plural in tables.BUILTIN:
            return tables.BUILTIN[rtype.plural]
        return [tables.NAME, tables.col("Created At", fmt="date", desc=tables.AGE_DESC)], (
            lambda obj, now: [
                obj["metadata"].get("name", ""),
                obj["metadata"].get("creationTimestamp"),
            ]
        )

    def _table(
        self, rtype: ResourceType, objs: list[JsonDict], list_meta: JsonDict, headers: bool = True
    ) -> JsonDict:
        columns, printer = self._printer(rtype)
        now = self.sim.loops.now
        include = self._query.get("includeObject", "Metadata") or "Metadata"
        if include not in ("Object", "Metadata", "None"):
            raise ApiError(400, "BadRequest", f'unrecognized includeObject value: "{include}"')
        doc = tables.table(
            columns if headers else None,
            [(printer(o, now), o) for o in objs],
            list_meta,
            include,
            lambda o: {"kind": rtype.kind, "apiVersion": rtype.api_version, **self._shown(o)},
        )
        if self._table_version == "v1beta1":
            doc["apiVersion"] = "meta.k8s.io/v1beta1"
            for row in doc["rows"]:
                if row.get("object", {}).get("kind") == "PartialObjectMetadata":
                    row["object"]["apiVersion"] = "meta.k8s.io/v1beta1"
        return doc

    # ------------------------------------------------------------------ reads

    def _raw(self, raw: bytes) -> bytes:
        """Stored bytes as the requested version shows them."""
        return raw if self._convert is None else bytes(self._convert(raw))

    def _shown(self, obj: JsonDict) -> JsonDict:
        if self._convert is None:
            return obj
        shown: JsonDict = json.loads(self._convert(json.dumps(obj).encode()))
        return shown

    def _selection(self, rtype: ResourceType, namespace: str | None) -> Selection:
        try:
            labels = parse_label_selector(self._query.get("labelSelector"))
            fields = parse_field_selector(self._query.get("fieldSelector"), rtype)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from None
        return Selection(namespace, tuple(labels), tuple(fields))

    def _wait_fresh(self, wanted: int) -> None:
        """A read at a resourceVersion not reached yet waits, then fails as the cache does."""
        store = self.sim.store
        deadline = time.monotonic() + BLOCK_TIMEOUT
        while store.rv < wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                raise too_large(wanted, store.rv)
            store.wait_for_change(store.rv, min(left, 0.25))

    def _list_or_watch(self, served: Served, namespace: str | None, watch: bool) -> None:
        rtype = served.rtype
        sel = self._selection(rtype, namespace)
        if watch:
            self._watch(rtype, sel)
        else:
            self._list(rtype, sel)

    def _list_options(self) -> tuple[int, str, str, str | None]:
        """(limit, resourceVersion, resourceVersionMatch, continue) of a list, refused as
        handlers/get.go ListResource refuses them."""
        limit_text = self._query.get("limit", "0") or "0"
        try:
            limit = max(0, int(limit_text))
        except ValueError:
            raise ApiError(400, "BadRequest", f'invalid value for limit: "{limit_text}"') from None
        rv_text = self._query.get("resourceVersion", "")
        match = self._query.get("resourceVersionMatch", "")
        token = self._query.get("continue")
        if match and not rv_text:
            raise ApiError(
                422,
                "Invalid",
                LIST_OPTIONS_INVALID
                + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                "unless resourceVersion is provided",
            )
        if match not in ("", "Exact", "NotOlderThan"):
            raise ApiError(
                422,
                "Invalid",
                LIST_OPTIONS_INVALID
                + f'resourceVersionMatch: Unsupported value: "{match}": supported '
                'values: "Exact", "NotOlderThan"',
            )
        if token and rv_text:
            raise ApiError(
                422,
                "Invalid",
                LIST_OPTIONS_INVALID
                + "resourceVersion: Forbidden: specifying resource version is not "
                "allowed when using continue",
            )
        if match == "Exact" and rv_text == "0":
            raise ApiError(
                422,
                "Invalid",
                LIST_OPTIONS_INVALID
                + 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is '
                'forbidden for resourceVersion "0"',
            )
        return limit, rv_text, match, token

    def _list(self, rtype: ResourceType, sel: Selection) -> None:
        limit, rv_text, match, token = self._list_options()
        wanted = 0
        if rv_text:
            try:
                wanted = int(rv_text)
            except ValueError:
                raise ApiError(400, "BadRequest", f'invalid resource version "{rv_text}"') from None
        # Served from etcd at one revision: an exact version, a limit with a version other than
        # 0 (the legacy exact match), and continue pages (apiserver cacher shouldDelegateList).
        exact = match == "Exact" or (limit > 0 and rv_text not in ("", "0") and not match)
        store = self.sim.store
        if wanted and not exact:
            self._wait_fresh(wanted)
        elif exact and wanted > store.rv:
            raise too_large(wanted, store.rv)
        start_after: Key | None = None
        list_rv: int | None = wanted if exact else None
        if token:
            list_rv, start_after = _decode_continue(token)
            if list_rv == -1:
                list_rv = None  # an inconsistent continuation goes on at the latest version
        with store.lock:
            if list_rv is not None and list_rv < store.oldest_rv_of(rtype.plural):
                if token:
                    assert start_after is not None
                    raise ApiError(
                        410,
                        "Expired",
                        CONTINUE_TOO_OLD,
                        list_meta={"continue": _encode_continue(-1, start_after)},
                    )
                raise ApiError(410, "Expired", LIST_TOO_OLD)
            rv, items, last, remaining = self._page(rtype.plural, sel, start_after, limit, list_rv)
        meta: dict[str, Any] = {"resourceVersion": str(list_rv or rv)}
        if last is not None:
            meta["continue"] = _encode_continue(list_rv or rv, last)
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        if self._table_version:
            objs = [json.loads(raw) for raw in items]
            self._send_json(200, self._table(rtype, objs, meta))
            return
        head = json.dumps(
            {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta},
            separators=(",", ":"),
        ).encode()
        items = [self._raw(raw) for raw in items]
        self._send(200, head[:-1] + b',"items":[' + b",".join(items) + b"]}")

    def _page(
        self,
        plural: str,
        sel: Selection,
        start_after: Key | None,
        limit: int,
        at: int | None,
    ) -> tuple[int, list[bytes], Key | None, int | None]:
        store = self.sim.store
        if at is None or not store.changes_after(at, plural):
            return store.list(plural, sel, start_after=start_after, limit=limit)
        # The resource changed since that version: rebuild it as it was, as etcd reads it.
        keys, entries = store.list_at(plural, at)
        items: list[bytes] = []
        last: Key | None = None
        remaining: int | None = None
        lo = 0 if start_after is None else bisect.bisect_right(keys, start_after)
        for idx in range(lo, len(keys)):
            entry = entries[idx]
            if not sel.matches(entry.labels, entry.fields):
                continue
            raw = entry.raw
            if limit and len(items) >= limit:
                last = keys[idx - 1]
                if not sel.filtered:
                    remaining = sum(
                        1 for k in keys[idx:] if not sel.namespace or k[0] == sel.namespace
                    )
                break
            items.append(raw)
        return at, items, last, remaining

    def _derived(
        self, served: Served, namespace: str | None, name: str | None, watch: bool
    ) -> None:
        rtype = served.rtype
        if watch:
            raise not_allowed(rtype)
        store = self.sim.store
        with store.lock:
            objs = derived.daemonsets(store, self.sim.scenario.daemonsets, self.sim.loops.begin)
            rv = store.rv
        if name is not None:
            found = [
                o
                for o in objs
                if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
            ]
            if not found:
                raise not_found(rtype, name)
            obj = found[0]
            if self._table_version:
                self._send_json(
                    200,
                    self._table(
                        rtype, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}
                    ),
                )
                return
            self._send_json(200, {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj})
            return
        sel = self._selection(rtype, namespace)
        objs = [
            o
            for o in objs
            if sel.matches(o["metadata"].get("labels") or {}, extract_fields(rtype, o))
        ]
        meta = {"resourceVersion": str(rv)}
        if self._table_version:
            self._send_json(200, self._table(rtype, objs, meta))
            return
        self._send_json(
            200,
            {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": meta,
                "items": objs,
            },
        )

    def _watch(self, rtype: ResourceType, sel: Selection) -> None:
        bookmarks = self._query.get("allowWatchBookmarks") in ("true", "1")
        initial_end = self._query.get("sendInitialEvents") in ("true", "1")
        timeout_text = self._query.get("timeoutSeconds")
        try:
            timeout = (
                float(timeout_text)
                if timeout_text
                else MIN_REQUEST_TIMEOUT * (1.0 + random.random())
            )
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds") from None
        last_rv, initial, error = self._watch_start(rtype, sel, initial_end)
        self._log(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._headers_sent = False
        try:
            if error is not None:
                self._chunk(error)
                return
            for i in range(0, len(initial), 500):
                self._chunk(
                    b"".join(self._event(rtype, "ADDED", raw) for raw in initial[i : i + 500])
                )
            if initial_end and bookmarks:
                self._chunk(self._bookmark(rtype, last_rv, {"k8s.io/initial-events-end": "true"}))
            self._stream_changes(rtype, sel, last_rv, timeout, bookmarks)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    def _watch_start(
        self, rtype: ResourceType, sel: Selection, initial_end: bool
    ) -> tuple[int, list[bytes], bytes | None]:
        """(the version the watch goes on from, the initial objects, an Expired frame when the
        requested version has left the watch cache's window)."""
        store = self.sim.store
        rv_text = self._query.get("resourceVersion", "")
        initial: list[bytes] = []
        error: bytes | None = None
        with store.lock:
            if rv_text in ("", "0") or initial_end:
                last_rv = store.rv
                for _, entry in store.entries(rtype.plural):
                    if sel.matches(entry.labels, entry.fields):
                        initial.append(entry.raw)
            else:
                try:
                    last_rv = int(rv_text)
                except ValueError:
                    raise ApiError(
                        400, "BadRequest", f'invalid resource version "{rv_text}"'
                    ) from None
                oldest = store.watch_oldest(rtype.plural)
                if last_rv < oldest - 1:
                    error = self._expired_frame(last_rv, oldest - 1)
        return last_rv, initial, error

    def _stream_changes(
        self, rtype: ResourceType, sel: Selection, last_rv: int, timeout: float, bookmarks: bool
    ) -> None:
        """Send the changes after `last_rv`, and bookmarks, until the watch's deadline."""
        store = self.sim.store
        started = time.monotonic()
        deadline = started + timeout
        last_bookmark = started
        while not self.server.stopping and not self.sim.unavailable:
            frames: list[bytes] = []
            with store.lock:
                try:
                    changes = store.changes_after(last_rv, rtype.plural)
                except Expired as exc:
                    self._chunk(self._expired_frame(exc.requested, exc.oldest - 1))
                    return
                for change in changes:
                    frame = self._frame(rtype, sel, change)
                    if frame is not None:
                        frames.append(frame)
                # Everything of this resource up to the store's version is seen: step past
                # other resources' writes too, or wait_for_change would never wait.
                last_rv = max(last_rv, store.rv)
            if frames:
                self._chunk(b"".join(frames))
            now = time.monotonic()
            if now >= deadline:
                return
            # cache_watcher.go nextBookmarkTime: every bookmark interval, and 2 s before
            # the watch's deadline
            due = min(last_bookmark + self.sim.bookmark_interval, deadline - 2.0)
            if bookmarks and now >= due and due > last_bookmark:
                self._chunk(self._bookmark(rtype, last_rv))
                last_bookmark = now
            store.wait_for_change(last_rv, min(0.25, max(0.01, deadline - now)))

    def _bookmark(
        self, rtype: ResourceType, rv: int, annotations: dict[str, str] | None = None
    ) -> bytes:
        meta: JsonDict = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = annotations
        bookmark = {
            "type": "BOOKMARK",
            "object": {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta},
        }
        return json.dumps(bookmark, separators=(",", ":")).encode() + b"\n"

    def _event(self, rtype: ResourceType, event_type: str, raw: bytes) -> bytes:
        if not self._table_version:
            return watch_line(rtype, event_type, self._raw(raw))
        obj = json.loads(raw)
        doc = self._table(
            rtype,
            [obj],
            {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
            headers=not self._headers_sent,
        )
        self._headers_sent = True
        return (
            json.dumps({"type": event_type, "object": doc}, separators=(",", ":")).encode() + b"\n"
        )

    @staticmethod
    def _expired_frame(requested: int, oldest: int) -> bytes:
        status = status_body(410, "Expired", f"too old resource version: {requested} ({oldest})")
        return (
            json.dumps({"type": "ERROR", "object": status}, separators=(",", ":")).encode() + b"\n"
        )

    def _frame(self, rtype: ResourceType, sel: Selection, change: Change) -> bytes | None:
        now_match = sel.matches(change.labels, change.fields)
        if change.type != "MODIFIED" or change.prev_labels is None or change.prev_fields is None:
            return self._event(rtype, change.type, change.raw) if now_match else None
        was_match = sel.matches(change.prev_labels, change.prev_fields)
        if now_match and was_match:
            return self._event(rtype, "MODIFIED", change.raw)
        if now_match:
            return self._event(rtype, "ADDED", change.raw)
        if was_match:
            # the object as it last matched, at the change's resourceVersion (k8s.io/apiserver
            # v0.34.0 pkg/storage/cacher/cache_watcher.go convertToWatchEvent)
            return self._event(
                rtype, "DELETED", _at_version(change.prev_raw, change.rv) or change.raw
            )
        return None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _get(self, served: Served, namespace: str, name: str) -> None:
        rtype = served.rtype
        if rtype.plural == "namespaces" or not rtype.namespaced:
            namespace = ""
        rv_text = self._query.get("resourceVersion", "")
        if rv_text not in ("", "0"):
            try:
                self._wait_fresh(int(rv_text))
            except ValueError:
                raise ApiError(400, "BadRequest", f'invalid resource version "{rv_text}"') from None
        raw = self.sim.store.get_raw(rtype.plural, namespace, name)
        if raw is None:
            raise not_found(rtype, name)
        if self._table_version:
            obj = json.loads(raw)
            self._send_json(
                200,
                self._table(
                    rtype, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                ),
            )
            return
        self._send(200, b"{" + rtype.kind_header() + self._raw(raw)[1:])


def _at_version(raw: bytes | None, rv: int) -> bytes | None:
    """A stored object's JSON with its metadata.resourceVersion replaced."""
    if raw is None:
        return None
    obj = json.loads(raw)
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    return json.dumps(obj, separators=(",", ":")).encode()
