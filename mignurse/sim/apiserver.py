"""HTTP front of the simulator: kube-apiserver paths, verbs, Status errors, lists and watches.

Only what mignurse and kubectl-style clients use is served, with the real server's shapes:
list items carry no kind/apiVersion, watch objects do, errors are `Status` objects, and a
watch from a compacted resourceVersion gets an ERROR frame with a 410 Status.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from mignurse.sim import store as st
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.store import RESOURCES, ResourceType, Selection

if TYPE_CHECKING:
    from mignurse.sim.simcluster import SimCluster

DEFAULT_WATCH_TIMEOUT = 300.0
MAX_BODY = 8 * 1024 * 1024
SERVER_VERSION = {
    "major": "1",
    "minor": "32+",
    "gitVersion": "v1.32.3-eks-4096722",
    "gitCommit": "4096722e4e3cbd8b9c1b4e3a2d9a4f6e7b0a5c3d",
    "gitTreeState": "clean",
    "buildDate": "2025-03-25T19:35:47Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}
CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: JsonDict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details


def status_body(code: int, reason: str, message: str, details: JsonDict | None = None) -> JsonDict:
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def not_found(rtype: ResourceType, name: str) -> ApiError:
    details: JsonDict = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(404, "NotFound", f'{rtype.qualified} "{name}" not found', details)


def _encode_continue(rv: int, last: st.Key) -> str:
    start = f"{last[0]}/{last[1]}" if last[0] else last[1]
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def _decode_continue(token: str) -> tuple[int, st.Key]:
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


def _discovery_resources(group: str) -> list[JsonDict]:
    out = []
    for r in RESOURCES.values():
        if r.group != group:
            continue
        out.append(
            {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(r.verbs),
                **({"shortNames": list(r.short_names)} if r.short_names else {}),
                **({"categories": ["karpenter"]} if r.group == "karpenter.sh" else {}),
            }
        )
        for sub in r.subresources:
            kind = {"eviction": "Eviction", "scale": "Scale"}.get(sub, r.kind)
            verbs = ["create"] if sub == "eviction" else ["get", "patch", "update"]
            out.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
    return out


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, sim: SimCluster, port: int) -> None:
        self.sim = sim
        self.stopping = False
        super().__init__(("127.0.0.1", port), Handler)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimServer

    # ------------------------------------------------------------------ plumbing

    def log_message(self, format: str, *args: Any) -> None:
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        return formatdate(self.server.sim.now().timestamp(), usegmt=True)

    @property
    def sim(self) -> SimCluster:
        return self.server.sim

    def _log(self, status: int) -> None:
        self.sim._log_request(self.command, self._path, self._query, status)

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.sim._audit_id())
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log(code)

    def _send_json(self, code: int, obj: Any) -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode())

    def _send_error(self, err: ApiError) -> None:
        self._send_json(err.code, status_body(err.code, err.reason, err.message, err.details))

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "request entity too large")
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self._path = split.path.rstrip("/") or "/"
        self._query = dict(parse_qsl(split.query, keep_blank_values=True))
        try:
            body = self._read_body() if self.command in ("POST", "PATCH", "PUT", "DELETE") else b""
            if self.sim.unavailable:
                raise ApiError(
                    503,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                )
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {self.sim.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            fault = self.sim._fault_for(self.command, self._path)
            if fault is not None:
                raise ApiError(
                    fault.code, "InternalError", "Internal error occurred: injected fault"
                )
            self._route(body)
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a sim bug must still answer like a server
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))

    def do_GET(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    # ------------------------------------------------------------------ routing

    def _route(self, body: bytes) -> None:
        parts = [p for p in self._path.split("/") if p]
        karpenter = self.sim.scenario.karpenter is not None
        if self.command == "GET":
            doc = self._discovery(parts, karpenter)
            if doc is not None:
                self._send_json(200, doc)
                return
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
            served = {"apps": "v1", "policy": "v1"}
            if karpenter:
                served["karpenter.sh"] = "v1"
            if served.get(group) != version:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace: str | None = None
        if (len(rest) >= 3 and rest[0] == "namespaces" and group == "") or (
            len(rest) >= 3 and rest[0] == "namespaces"
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rtype = RESOURCES.get(rest[0])
        if rtype is None or rtype.group != group:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3 or (sub is not None and sub not in rtype.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        verb = self._verb(name, sub)
        if verb not in rtype.verbs and not (sub == "eviction" and verb == "create"):
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                {"kind": rtype.plural},
            )
        self._authorize(verb, rtype, namespace, name, sub)
        if verb in ("list", "watch"):
            self._list_or_watch(rtype, namespace, verb == "watch")
        elif verb == "get":
            self._get(rtype, namespace or "", name or "")
        elif verb == "patch":
            self._patch(rtype, namespace or "", name or "", sub, body)
        elif verb == "delete":
            self._delete(rtype, namespace or "", name or "")
        elif verb == "create" and sub == "eviction":
            self._evict(namespace or "", name or "", body)
        else:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )

    def _verb(self, name: str | None, sub: str | None) -> str:
        method = self.command
        if method == "GET":
            if name is None:
                return "watch" if self._query.get("watch") in ("true", "1") else "list"
            return "get"
        return {"PATCH": "patch", "DELETE": "delete", "POST": "create", "PUT": "update"}.get(
            method, method.lower()
        )

    def _authorize(
        self,
        verb: str,
        rtype: ResourceType,
        namespace: str | None,
        name: str | None,
        sub: str | None,
    ) -> None:
        resource = f"{rtype.plural}/{sub}" if sub else rtype.plural
        for rule in self.sim.scenario.rbac_deny:
            if rule.verb not in (verb, "*") or rule.resource not in (resource, "*"):
                continue
            if rule.namespace is not None and rule.namespace != namespace:
                continue
            user = self.sim.scenario.rbac_user
            subject = f'{rtype.qualified} "{name}"' if name else rtype.qualified
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            message = (
                f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
                f'in API group "{rtype.group}" {scope}'
            )
            details: JsonDict = {"kind": rtype.plural}
            if name:
                details["name"] = name
            if rtype.group:
                details["group"] = rtype.group
            raise ApiError(403, "Forbidden", message, details)

    def _discovery(self, parts: list[str], karpenter: bool) -> JsonDict | None:
        if parts == ["version"]:
            return SERVER_VERSION
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443"}
                ],
            }
        if parts == ["api", "v1"]:
            return {
                "kind": "APIResourceList",
                "groupVersion": "v1",
                "resources": _discovery_resources(""),
            }
        groups = [("apps", "v1"), ("policy", "v1")] + (
            [("karpenter.sh", "v1")] if karpenter else []
        )
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                        "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                    }
                    for g, v in groups
                ],
            }
        if len(parts) == 2 and parts[0] == "apis":
            for g, v in groups:
                if parts[1] == g:
                    return {
                        "kind": "APIGroup",
                        "apiVersion": "v1",
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                        "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                    }
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if len(parts) == 3 and parts[0] == "apis":
            if (parts[1], parts[2]) in groups:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{parts[1]}/{parts[2]}",
                    "resources": _discovery_resources(parts[1]),
                }
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return None

    # ------------------------------------------------------------------ verbs

    def _selection(self, rtype: ResourceType, namespace: str | None) -> Selection:
        try:
            labels = st.parse_label_selector(self._query.get("labelSelector"))
            fields = st.parse_field_selector(self._query.get("fieldSelector"), rtype)
        except st.SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from None
        return Selection(namespace, tuple(labels), tuple(fields))

    def _list_or_watch(self, rtype: ResourceType, namespace: str | None, watch: bool) -> None:
        sel = self._selection(rtype, namespace)
        if watch:
            self._watch(rtype, sel)
            return
        limit_text = self._query.get("limit", "0") or "0"
        try:
            limit = max(0, int(limit_text))
        except ValueError:
            raise ApiError(400, "BadRequest", f'invalid value for limit: "{limit_text}"') from None
        start_after: st.Key | None = None
        token = self._query.get("continue")
        store = self.sim.store
        with store.lock:
            list_rv = None
            if token:
                list_rv, start_after = _decode_continue(token)
                if list_rv < store.oldest_rv:
                    raise ApiError(410, "Expired", CONTINUE_TOO_OLD)
            rv, items, last, remaining = store.list(
                rtype.plural, sel, start_after=start_after, limit=limit
            )
        meta: dict[str, Any] = {"resourceVersion": str(list_rv or rv)}
        if last is not None:
            meta["continue"] = _encode_continue(list_rv or rv, last)
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        head = json.dumps(
            {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta},
            separators=(",", ":"),
        ).encode()
        self._send(200, head[:-1] + b',"items":[' + b",".join(items) + b"]}")

    def _watch(self, rtype: ResourceType, sel: Selection) -> None:
        store = self.sim.store
        rv_text = self._query.get("resourceVersion", "")
        bookmarks = self._query.get("allowWatchBookmarks") in ("true", "1")
        try:
            timeout = float(self._query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds") from None
        initial: list[bytes] = []
        error: bytes | None = None
        with store.lock:
            if rv_text in ("", "0"):
                last_rv = store.rv
                for _, entry in store.entries(rtype.plural):
                    if sel.matches(entry.labels, entry.fields):
                        initial.append(st.watch_line(rtype, "ADDED", entry.raw))
            else:
                try:
                    last_rv = int(rv_text)
                except ValueError:
                    raise ApiError(
                        400, "BadRequest", f'invalid resource version "{rv_text}"'
                    ) from None
                try:
                    store.changes_after(last_rv)
                except st.Expired as exc:
                    error = self._expired_frame(exc)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._log(200)
        try:
            if error is not None:
                self._chunk(error)
                return
            for i in range(0, len(initial), 500):
                self._chunk(b"".join(initial[i : i + 500]))
            deadline = time.monotonic() + timeout
            last_frame = time.monotonic()
            while not self.server.stopping and not self.sim.unavailable:
                frames: list[bytes] = []
                with store.lock:
                    try:
                        changes = store.changes_after(last_rv)
                    except st.Expired as exc:
                        self._chunk(self._expired_frame(exc))
                        return
                    for change in changes:
                        if change.plural == rtype.plural:
                            frame = self._frame(rtype, sel, change)
                            if frame is not None:
                                frames.append(frame)
                    if changes:
                        last_rv = max(last_rv, changes[-1].rv)
                if frames:
                    self._chunk(b"".join(frames))
                    last_frame = time.monotonic()
                now = time.monotonic()
                if now >= deadline:
                    return
                if bookmarks and now - last_frame >= self.sim.bookmark_interval:
                    bookmark = {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": rtype.kind,
                            "apiVersion": rtype.api_version,
                            "metadata": {"resourceVersion": str(last_rv)},
                        },
                    }
                    self._chunk(json.dumps(bookmark, separators=(",", ":")).encode() + b"\n")
                    last_frame = now
                store.wait_for_change(last_rv, min(0.25, max(0.01, deadline - now)))
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    def _expired_frame(self, exc: st.Expired) -> bytes:
        status = status_body(410, "Expired", str(exc))
        return (
            json.dumps({"type": "ERROR", "object": status}, separators=(",", ":")).encode() + b"\n"
        )

    @staticmethod
    def _frame(rtype: ResourceType, sel: Selection, change: st.Change) -> bytes | None:
        now_match = sel.matches(change.labels, change.fields)
        if change.type != "MODIFIED" or change.prev_labels is None or change.prev_fields is None:
            return st.watch_line(rtype, change.type, change.raw) if now_match else None
        was_match = sel.matches(change.prev_labels, change.prev_fields)
        if now_match and was_match:
            return st.watch_line(rtype, "MODIFIED", change.raw)
        if now_match:
            return st.watch_line(rtype, "ADDED", change.raw)
        if was_match:
            return st.watch_line(rtype, "DELETED", change.raw)
        return None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _get(self, rtype: ResourceType, namespace: str, name: str) -> None:
        if rtype.plural == "namespaces" or not rtype.namespaced:
            namespace = ""
        raw = self.sim.store.get_raw(rtype.plural, namespace, name)
        if raw is None:
            raise not_found(rtype, name)
        self._send(200, b"{" + rtype.kind_header() + raw[1:])

    def _patch(
        self, rtype: ResourceType, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        kind = PATCH_TYPES.get(content_type)
        if kind is None or (kind == "strategic" and rtype.group == "karpenter.sh"):
            accepted = (
                "application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml"
            )
            if rtype.group != "karpenter.sh":
                accepted += ", application/strategic-merge-patch+json"
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - "
                f"accepted media types include: {accepted}",
            )
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding patch: {exc}") from None
        sim = self.sim
        key_ns = namespace if rtype.namespaced else ""
        with sim.world.api_txn() as tx:
            stored = tx.get(rtype.plural, key_ns, name)
            if stored is None:
                raise not_found(rtype, name)
            current: JsonDict = json.loads(json.dumps(stored))  # patches must not alias the store
            try:
                if kind == "merge":
                    patched = st.merge_patch(current, patch)
                elif kind == "strategic":
                    patched = st.strategic_merge_patch(current, patch)
                else:
                    patched = st.json_patch(current, patch)
            except st.PatchError as exc:
                reason = "Invalid" if exc.code == 422 else "BadRequest"
                raise ApiError(exc.code, reason, str(exc)) from None
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patch does not produce an object")
            want_rv = (patched.get("metadata") or {}).get("resourceVersion")
            current_rv = current["metadata"].get("resourceVersion")
            if want_rv and want_rv != current_rv:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rtype.qualified} "{name}": '
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again",
                    {
                        "name": name,
                        "kind": rtype.plural,
                        **({"group": rtype.group} if rtype.group else {}),
                    },
                )
            patched = self._apply_subresource_rules(rtype, current, patched, sub)
            if patched == current:
                self._send(200, self._with_kind(rtype, current))
                return
            before = current
            if rtype.plural == "deployments" and patched.get("spec") != before.get("spec"):
                patched["metadata"]["generation"] = int(before["metadata"].get("generation", 1)) + 1
                if patched["spec"].get("template") != before["spec"].get("template"):
                    ann = patched["metadata"].setdefault("annotations", {})
                    ann["deployment.kubernetes.io/revision"] = str(
                        int(ann.get("deployment.kubernetes.io/revision", "1")) + 1
                    )
            tx.put(rtype.plural, patched)
            if rtype.plural == "nodes":
                sim.world.node_changed(name)
            elif rtype.plural == "deployments":
                sim.world.deployment_patched(namespace, name, before, patched)
        result = sim.store.get_raw(rtype.plural, key_ns, name)
        assert result is not None
        self._send(200, b"{" + rtype.kind_header() + result[1:])

    @staticmethod
    def _apply_subresource_rules(
        rtype: ResourceType, current: JsonDict, patched: JsonDict, sub: str | None
    ) -> JsonDict:
        """Main resource ignores status; /status changes only status (real strategy rules)."""
        for immutable in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if immutable in current["metadata"]:
                patched.setdefault("metadata", {})[immutable] = current["metadata"][immutable]
        patched["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
        if "status" not in rtype.subresources:
            return patched
        if sub == "status":
            result = json.loads(json.dumps(current))
            result["status"] = patched.get("status", {})
            return result
        if "status" in current:
            patched["status"] = current["status"]
        return patched

    @staticmethod
    def _with_kind(rtype: ResourceType, obj: JsonDict) -> bytes:
        return json.dumps(
            {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj}, separators=(",", ":")
        ).encode()

    def _delete(self, rtype: ResourceType, namespace: str, name: str) -> None:
        sim = self.sim
        key_ns = namespace if rtype.namespaced else ""
        if rtype.plural not in ("nodes", "nodeclaims", "pods"):
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        with sim.world.api_txn() as tx:
            current = tx.get(rtype.plural, key_ns, name)
            if current is None:
                raise not_found(rtype, name)
            if rtype.plural == "nodeclaims":
                sim.world.nodeclaim_deleted(name)
                result = tx.get(rtype.plural, key_ns, name) or current
            elif rtype.plural == "nodes":
                stays = sim.world.node_deleted(name)
                result = (tx.get(rtype.plural, key_ns, name) if stays else None) or current
                if result.get("metadata", {}).get("deletionTimestamp") is None:
                    result["metadata"]["deletionTimestamp"] = ts(sim.world.now)
            else:
                tx.delete("pods", namespace, name)
                sim.world.pod_deleted(namespace, name)
                result = current
                result["metadata"]["deletionTimestamp"] = ts(sim.world.now)
                result["metadata"]["deletionGracePeriodSeconds"] = 0
        self._send(200, self._with_kind(rtype, result))

    def _evict(self, namespace: str, name: str, body: bytes) -> None:
        sim = self.sim
        rtype = RESOURCES["pods"]
        try:
            eviction = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding eviction: {exc}") from None
        if not isinstance(eviction, dict) or eviction.get("kind", "Eviction") != "Eviction":
            raise ApiError(400, "BadRequest", "the body must be a policy/v1 Eviction")
        body_name = (eviction.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        with sim.world.api_txn() as tx:
            pod = tx.get("pods", namespace, name)
            if pod is None:
                raise not_found(rtype, name)
            pdb = sim.world.pdb_blocking(pod)
            if pdb is not None:
                pdb_status = pdb.get("status", {})
                cause = (
                    f"The disruption budget {pdb['metadata']['name']} needs "
                    f"{pdb_status.get('desiredHealthy', 0)} healthy pods and has "
                    f"{pdb_status.get('currentHealthy', 0)} currently"
                )
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
                )
            tx.delete("pods", namespace, name)
            sim.world.pod_deleted(namespace, name)
        self._send_json(
            201,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
        )


def http_status_phrase(code: int) -> str:
    return HTTPStatus(code).phrase
