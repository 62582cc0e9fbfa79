"""HTTPS front of the simulator: kube-apiserver paths, verbs, Status errors, lists and watches.

What mignurse and kubectl use is served with the real server's shapes and rules (k8s.io/apiserver
v0.32 and kube-apiserver v1.32): discovery in both forms, server-side Tables, OpenAPI v3, list
items without kind/apiVersion and watch objects with them, `Status` errors, PUT with
resourceVersion preconditions, server-side apply with field managers, custom resources pruned,
defaulted and validated by their CRD schema, the watch cache's window and bookmarks, and
resourceVersion semantics of lists (exact, not-older-than, continue snapshots).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import random
import socket
import ssl
import sys
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from mignurse.sim import apply as ssa
from mignurse.sim import derived, discovery, openapi, protobuf, schema, tables
from mignurse.sim import store as st
from mignurse.sim.discovery import Served
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.store import RESOURCES, ResourceType, Selection

if TYPE_CHECKING:
    from mignurse.sim.simcluster import SimCluster

# kube-apiserver --min-request-timeout=1800: a watch without timeoutSeconds lasts a random
# 30 to 60 minutes (k8s.io/apiserver pkg/endpoints/handlers/get.go ListResource).
MIN_REQUEST_TIMEOUT = 1800.0
HANDSHAKE_TIMEOUT = 10.0
# k8s.io/apiserver pkg/storage/cacher/watch_cache.go blockTimeout: a read at a resourceVersion
# the cache has not reached waits this long, then fails "Too large resource version".
BLOCK_TIMEOUT = 3.0
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
# /version of the other control planes a scenario may name (`cluster.kubernetesVersion`):
# EKS's `<release>-eks-<build>` form; the patch releases are EKS's of early 2026, the build
# suffixes and dates ours.
SERVER_VERSIONS = {
    "1.32": SERVER_VERSION,
    "1.33": {
        **SERVER_VERSION,
        "minor": "33+",
        "gitVersion": "v1.33.10-eks-b7a4c5e",
        "gitCommit": "b7a4c5e9d1f2a3b4c5d6e7f8091a2b3c4d5e6f70",
        "buildDate": "2026-03-20T18:02:11Z",
        "goVersion": "go1.24.13",
    },
    "1.34": {
        **SERVER_VERSION,
        "minor": "34+",
        "gitVersion": "v1.34.6-eks-2c8e91a",
        "gitCommit": "2c8e91a4b6d3f5e7a9c1b3d5f7e9a1c3b5d7f9e1",
        "buildDate": "2026-03-24T17:41:09Z",
        "goVersion": "go1.24.13",
    },
}


def server_version(kubernetes_version: str) -> dict[str, str]:
    return SERVER_VERSIONS.get(kubernetes_version.strip().lstrip("v"), SERVER_VERSION)


PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply-cbor",
}
# k8s.io/apiserver v0.32 pkg/storage/etcd3/errors.go
LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)
NOT_FOUND = "the server could not find the requested resource"
# handlers/get.go ListResource: errors.NewInvalid of the ListOptions kind
LIST_OPTIONS_INVALID = 'ListOptions.meta.k8s.io "" is invalid: '
# Built-in kinds that keep a metadata.generation (their strategies bump it on spec changes).
GENERATION_KINDS = {"deployments", "poddisruptionbudgets", "replicasets", "daemonsets"}
CUSTOM = ("nodeclaims", "nodepools", "ec2nodeclasses")


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JsonDict | None = None,
        list_meta: JsonDict | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta


def status_body(
    code: int,
    reason: str,
    message: str,
    details: JsonDict | None = None,
    list_meta: JsonDict | None = None,
) -> JsonDict:
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": list_meta or {},
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


def too_large(wanted: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError."""
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {wanted}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def conflict(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        {"name": name, "kind": rtype.plural, **({"group": rtype.group} if rtype.group else {})},
    )


def invalid(rtype: ResourceType, name: str, errors: list[schema.FieldError]) -> ApiError:
    """errors.NewInvalid: `Kind.group "name" is invalid: <error>` or `[<e1>, <e2>]`."""
    qualified = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    text = (
        errors[0].message if len(errors) == 1 else "[" + ", ".join(e.message for e in errors) + "]"
    )
    details: JsonDict = {"name": name, "kind": rtype.kind, "causes": [e.cause() for e in errors]}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


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


def _accept(header: str) -> tuple[str | None, str | None, bool]:
    """(Table version, aggregated discovery version, plain JSON accepted) from Accept."""
    table = aggregated = None
    plain = not header.strip()
    for clause in header.split(","):
        parts = [p.strip() for p in clause.split(";")]
        media = parts[0].lower()
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if media not in ("application/json", "*/*", "application/*"):
            continue
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and table is None:
            table = params.get("v")
        elif params.get("as") == "APIGroupDiscoveryList" and aggregated is None:
            aggregated = params.get("v")
        elif "as" not in params:
            plain = True
    return table, aggregated, plain


def _manager_from(user_agent: str) -> str:
    """The default field manager: the User-Agent up to its first '/' (apiserver handlers)."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, sim: SimCluster, port: int, tls: ssl.SSLContext) -> None:
        self.sim = sim
        self.stopping = False
        self.tls = tls
        self.served = discovery.catalogue(sim.crds, sim.scenario.resource_api_versions)
        self.by_path = {(s.group, s.rtype.version, s.plural): s for s in self.served.values()}
        self.version = server_version(sim.scenario.kubernetes_version)
        crd_set = sim.crds
        self.crd_columns = (
            {p: tables.crd_columns(crd_set.printer_columns(p)) for p in crd_set.documents}
            if crd_set is not None
            else {}
        )
        super().__init__(("127.0.0.1", port), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-request (a reset, a TLS alert) is routine, not a server bug.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The handshake runs in the connection's own thread, never in the accept loop.
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        conn.settimeout(None)
        try:
            super().finish_request(conn, client_address)
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


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

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "application/json",
        warnings: list[str] | None = None,
    ) -> None:
        self._log(code)  # before answering: a client holding its answer finds it in the log
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.sim._audit_id())
        for warning in warnings or ():
            self.send_header("Warning", f"299 - {json.dumps(warning)}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, code: int, obj: Any, content_type: str = "application/json") -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode(), content_type)

    def _send_error(self, err: ApiError) -> None:
        self._send_json(
            err.code, status_body(err.code, err.reason, err.message, err.details, err.list_meta)
        )

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "request entity too large")
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self._path = split.path.rstrip("/") or "/"
        self._query = dict(parse_qsl(split.query, keep_blank_values=True))
        self._table_version, self._aggregated, _plain = _accept(self.headers.get("Accept") or "")
        self._convert: Any = None  # the served version's converter, set by _route
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
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if body and content_type == protobuf.MEDIA_TYPE:
                try:
                    body = json.dumps(protobuf.decode(body)).encode()
                except protobuf.ProtobufError as exc:
                    raise ApiError(415, "UnsupportedMediaType", str(exc)) from None
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
        if self.command == "GET" and self._documents(parts):
            return
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", NOT_FOUND)
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", NOT_FOUND)
        served = self.server.by_path.get((group, version, rest[0]))
        if served is None:
            raise ApiError(404, "NotFound", NOT_FOUND)
        rtype = served.rtype
        self._convert = served.convert
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "NotFound", NOT_FOUND)
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        subs = {s.name for s in served.subresources}
        if len(rest) > 3 or (sub is not None and sub not in subs):
            raise ApiError(404, "NotFound", NOT_FOUND)
        verb = self._verb(name, sub)
        if served.source == "review":
            if verb != "create" or name is not None:
                raise self._not_allowed(rtype)
            self._review(rtype, body)
            return
        allowed = (
            ("create",)
            if sub == "eviction"
            else next(s.verbs for s in served.subresources if s.name == sub)
            if sub
            else served.verbs
        )
        if verb not in allowed:
            raise self._not_allowed(rtype)
        self._authorize(verb, rtype, namespace, name, sub)
        if served.source == "derived":
            self._derived(served, namespace, name, verb == "watch")
        elif verb in ("list", "watch"):
            self._list_or_watch(served, namespace, verb == "watch")
        elif verb == "get":
            self._get(served, namespace or "", name or "")
        elif verb == "patch":
            self._patch(served, namespace or "", name or "", sub, body)
        elif verb == "update":
            self._update(served, namespace or "", name or "", sub, body)
        elif verb == "delete":
            self._delete(rtype, namespace or "", name or "", body)
        elif verb == "create" and sub == "eviction":
            self._evict(namespace or "", name or "", body)
        else:
            raise self._not_allowed(rtype)

    @staticmethod
    def _not_allowed(rtype: ResourceType) -> ApiError:
        return ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            {"kind": rtype.plural},
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

    def _denied_by(self, verb: str, resource: str, namespace: str | None) -> bool:
        for rule in self.sim.scenario.rbac_deny:
            if rule.verb not in (verb, "*") or rule.resource not in (resource, "*"):
                continue
            if rule.namespace is not None and rule.namespace != namespace:
                continue
            return True
        return False

    def _authorize(
        self,
        verb: str,
        rtype: ResourceType,
        namespace: str | None,
        name: str | None,
        sub: str | None,
    ) -> None:
        resource = f"{rtype.plural}/{sub}" if sub else rtype.plural
        if not self._denied_by(verb, resource, namespace):
            return
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

    def _documents(self, parts: list[str]) -> bool:
        """Version, discovery and OpenAPI documents; False when the path is not one."""
        served = self.server.served
        if parts == ["version"]:
            self._send_json(200, self.server.version)
            return True
        if parts in (["api"], ["apis"]) and self._aggregated in ("v2", "v2beta1"):
            doc = discovery.aggregated(served, parts == ["api"], self._aggregated)
            media = (
                discovery.AGGREGATED_V2
                if self._aggregated == "v2"
                else discovery.AGGREGATED_V2BETA1
            )
            self._send_json(200, doc, media)
            return True
        if parts == ["api"]:
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443"}
                    ],
                },
            )
            return True
        if parts == ["api", "v1"]:
            self._send_json(200, discovery.resource_list(served, "", "v1"))
            return True
        pairs = discovery.group_versions(served)
        if parts == ["apis"]:
            self._send_json(200, discovery.api_group_list(served))
            return True
        if len(parts) == 2 and parts[0] == "apis":
            versions = discovery.versions_of(served, parts[1])
            if versions:
                self._send_json(200, discovery.api_group(parts[1], versions))
                return True
            raise ApiError(404, "NotFound", NOT_FOUND)
        if len(parts) == 3 and parts[0] == "apis":
            if (parts[1], parts[2]) in pairs:
                self._send_json(200, discovery.resource_list(served, parts[1], parts[2]))
                return True
            raise ApiError(404, "NotFound", NOT_FOUND)
        if parts[:2] == ["openapi", "v3"]:
            if len(parts) == 2:
                self._send_json(200, openapi.index(served, pairs))
                return True
            rest = parts[2:]
            if rest[:1] == ["api"] and len(rest) == 2:
                group, version = "", rest[1]
            elif rest[:1] == ["apis"] and len(rest) == 3:
                group, version = rest[1], rest[2]
            else:
                raise ApiError(404, "NotFound", NOT_FOUND)
            if (group, version) != ("", "v1") and (group, version) not in pairs:
                raise ApiError(404, "NotFound", NOT_FOUND)
            self._send_json(200, openapi.group_document(served, self.sim.crds, group, version))
            return True
        return False

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
        now = self.sim.world.now
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
            labels = st.parse_label_selector(self._query.get("labelSelector"))
            fields = st.parse_field_selector(self._query.get("fieldSelector"), rtype)
        except st.SelectorError as exc:
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
            return
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
        start_after: st.Key | None = None
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
        start_after: st.Key | None,
        limit: int,
        at: int | None,
    ) -> tuple[int, list[bytes], st.Key | None, int | None]:
        store = self.sim.store
        if at is None or not store.changes_after(at, plural):
            return store.list(plural, sel, start_after=start_after, limit=limit)
        # The resource changed since that version: rebuild it as it was, as etcd reads it.
        state = store.list_at(plural, at)
        rtype = RESOURCES[plural]
        items: list[bytes] = []
        last: st.Key | None = None
        remaining: int | None = None
        keys = [k for k, _ in state]
        lo = (
            0
            if start_after is None
            else next((i for i, k in enumerate(keys) if k > start_after), len(keys))
        )
        for idx in range(lo, len(state)):
            raw = state[idx][1]
            obj = json.loads(raw)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if not sel.matches(labels, st.extract_fields(rtype, obj)):
                continue
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
            raise self._not_allowed(rtype)
        store = self.sim.store
        with store.lock:
            objs = derived.daemonsets(store)
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
            if sel.matches(o["metadata"].get("labels") or {}, st.extract_fields(rtype, o))
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
        store = self.sim.store
        rv_text = self._query.get("resourceVersion", "")
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
            started = time.monotonic()
            deadline = started + timeout
            last_bookmark = started
            while not self.server.stopping and not self.sim.unavailable:
                frames: list[bytes] = []
                with store.lock:
                    try:
                        changes = store.changes_after(last_rv, rtype.plural)
                    except st.Expired as exc:
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
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

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
            return st.watch_line(rtype, event_type, self._raw(raw))
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

    def _frame(self, rtype: ResourceType, sel: Selection, change: st.Change) -> bytes | None:
        now_match = sel.matches(change.labels, change.fields)
        if change.type != "MODIFIED" or change.prev_labels is None or change.prev_fields is None:
            return self._event(rtype, change.type, change.raw) if now_match else None
        was_match = sel.matches(change.prev_labels, change.prev_fields)
        if now_match and was_match:
            return self._event(rtype, "MODIFIED", change.raw)
        if now_match:
            return self._event(rtype, "ADDED", change.raw)
        if was_match:
            return self._event(rtype, "DELETED", change.raw)
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

    # ------------------------------------------------------------------ writes

    def _shapes(self, rtype: ResourceType) -> ssa.Shapes:
        custom = (
            self.sim.crds.schema(rtype.plural) if self.sim.crds and rtype.plural in CUSTOM else None
        )
        return ssa.Shapes(custom, st.MERGE_KEYS, st.PRIMITIVE_MERGE_LISTS)

    def _manager(self) -> str:
        return self._query.get("fieldManager") or _manager_from(
            self.headers.get("User-Agent") or ""
        )

    def _decode_body(self, rtype: ResourceType, body: bytes, yaml_ok: bool) -> Any:
        try:
            return yaml.safe_load(body) if yaml_ok else json.loads(body or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
                f"{rtype.kind}: {exc}",
            ) from None

    def _patch(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        kind = PATCH_TYPES.get(content_type)
        custom = rtype.plural in CUSTOM
        if kind is None or kind == "apply-cbor" or (kind == "strategic" and custom):
            accepted = (
                "application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml"
            )
            if not custom:
                accepted += ", application/strategic-merge-patch+json"
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - "
                f"accepted media types include: {accepted}",
            )
        if kind == "apply":
            self._apply(served, namespace, name, sub, body)
            return
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding patch: {exc}") from None

        def compute(current: JsonDict) -> JsonDict:
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
            return patched

        self._modify(served, namespace, name, sub, compute)

    def _update(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        new = self._decode_body(rtype, body, yaml_ok=False)
        if not isinstance(new, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        if new.get("kind") not in (None, rtype.kind):
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f'the kind "{new.get("kind")}" does not match "{rtype.kind}"',
            )
        meta: JsonDict = new["metadata"] if isinstance(new.get("metadata"), dict) else {}
        if meta.get("name") != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})",
            )
        if rtype.plural in CUSTOM and not meta.get("resourceVersion"):
            # customresource strategy: AllowUnconditionalUpdate is false
            raise invalid(
                rtype,
                name,
                [schema.invalid("metadata.resourceVersion", 0, "must be specified for an update")],
            )
        self._modify(served, namespace, name, sub, lambda current: new, operation="Update")

    def _apply(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        config = self._decode_body(rtype, body, yaml_ok=True)
        if not isinstance(config, dict):
            raise ApiError(
                400, "BadRequest", "error decoding YAML: the apply configuration is not an object"
            )
        manager = self._query.get("fieldManager")
        if not manager:
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        if config.get("kind") != rtype.kind or config.get("apiVersion") != rtype.api_version:
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({config.get('apiVersion')}) does not match the "
                f"expected API version ({rtype.api_version})",
            )
        cmeta: JsonDict = config["metadata"] if isinstance(config.get("metadata"), dict) else {}
        if cmeta.get("name") != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({cmeta.get('name')}) does not match the name on the "
                f"URL ({name})",
            )
        force = self._query.get("force") in ("true", "1")
        shapes = self._shapes(rtype)
        status_separate = "status" in rtype.subresources

        def compute(current: JsonDict) -> JsonDict:
            try:
                return ssa.server_side_apply(
                    current,
                    config,
                    manager=manager,
                    force=force,
                    api_version=rtype.api_version,
                    now=ts(self.sim.world.now),
                    shapes=shapes,
                    status_separate=status_separate,
                )
            except ssa.ApplyConflict as exc:
                raise ApiError(409, "Conflict", exc.message, {"causes": exc.causes()}) from None

        self._modify(served, namespace, name, sub, compute, operation="Apply")

    def _custom_checks(
        self, rtype: ResourceType, name: str, current: JsonDict, new: JsonDict
    ) -> list[str]:
        """Prune, default and validate a custom resource; returns unknown-field warnings."""
        crds = self.sim.crds
        if crds is None or rtype.plural not in CUSTOM:
            return []
        structural = crds.schema(rtype.plural)
        unknown: list[str] = []
        pruned = schema.prune(new, structural, "", unknown)
        mode = self._query.get("fieldValidation", "Warn") or "Warn"
        if unknown and mode == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f"strict decoding error: {listed}",
            )
        new.clear()
        new.update(pruned)
        schema.apply_defaults(new, structural)
        errors = schema.validate(
            {k: v for k, v in new.items() if k != "metadata"},
            {
                **structural,
                "properties": {
                    k: v for k, v in (structural.get("properties") or {}).items() if k != "metadata"
                },
            },
            {k: v for k, v in current.items() if k != "metadata"},
            has_old=True,
        )
        if errors:
            raise invalid(rtype, name, errors)
        return [] if mode == "Ignore" else [f'unknown field "{u}"' for u in unknown]

    def _modify(
        self,
        served: Served,
        namespace: str,
        name: str,
        sub: str | None,
        compute: Any,
        operation: str = "Patch",
    ) -> None:
        rtype = served.rtype
        sim = self.sim
        key_ns = namespace if rtype.namespaced else ""
        warnings: list[str] = []
        with sim.world.api_txn() as tx:
            stored = tx.get(rtype.plural, key_ns, name)
            if stored is None:
                raise not_found(rtype, name)
            current: JsonDict = json.loads(json.dumps(stored))  # writes must not alias the store
            patched = compute(json.loads(json.dumps(current)))
            patched.pop("kind", None)
            patched.pop("apiVersion", None)
            patched.setdefault("metadata", {})
            if not isinstance(patched["metadata"], dict):
                raise ApiError(422, "Invalid", "metadata must be an object")
            want_rv = patched["metadata"].get("resourceVersion")
            if want_rv and want_rv != current["metadata"].get("resourceVersion"):
                raise conflict(rtype, name)
            patched = self._apply_subresource_rules(rtype, current, patched, sub)
            warnings = self._custom_checks(rtype, name, current, patched)
            if operation != "Apply":
                ssa.record_update(
                    current,
                    patched,
                    manager=self._manager(),
                    api_version=rtype.api_version,
                    now=ts(sim.world.now),
                    shapes=self._shapes(rtype),
                    status_separate="status" in rtype.subresources,
                    subresource=sub or "",
                )
            if patched == current:
                self._send(200, self._with_kind(rtype, current), warnings=warnings)
                return
            before = current
            spec_changed = {
                k: v for k, v in patched.items() if k not in ("metadata", "status")
            } != {k: v for k, v in before.items() if k not in ("metadata", "status")}
            if spec_changed and (rtype.plural in CUSTOM or rtype.plural in GENERATION_KINDS):
                patched["metadata"]["generation"] = int(before["metadata"].get("generation", 1)) + 1
            template_changed = (patched.get("spec") or {}).get("template") != (
                before.get("spec") or {}
            ).get("template")
            if rtype.plural == "deployments" and template_changed:
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
        self._send(200, b"{" + rtype.kind_header() + result[1:], warnings=warnings)

    @staticmethod
    def _apply_subresource_rules(
        rtype: ResourceType, current: JsonDict, patched: JsonDict, sub: str | None
    ) -> JsonDict:
        """Main resource ignores status; /status changes only status (real strategy rules)."""
        for immutable in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if immutable in current["metadata"]:
                patched.setdefault("metadata", {})[immutable] = current["metadata"][immutable]
        for server_owned in ("generation",):
            if server_owned in current["metadata"]:
                patched["metadata"][server_owned] = current["metadata"][server_owned]
        patched["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
        if "status" not in rtype.subresources:
            return patched
        if sub == "status":
            result = json.loads(json.dumps(current))
            result["status"] = patched.get("status", {})
            return result
        if "status" in current:
            patched["status"] = current["status"]
        else:
            patched.pop("status", None)
        return patched

    @staticmethod
    def _with_kind(rtype: ResourceType, obj: JsonDict) -> bytes:
        return json.dumps(
            {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj}, separators=(",", ":")
        ).encode()

    def _review(self, rtype: ResourceType, body: bytes) -> None:
        try:
            review = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding {rtype.kind}: {exc}") from None
        if not isinstance(review, dict):
            raise ApiError(400, "BadRequest", f"the body must be a {rtype.kind}")
        user = self.sim.scenario.rbac_user
        out: JsonDict = {
            "kind": rtype.kind,
            "apiVersion": rtype.api_version,
            "metadata": {"creationTimestamp": None},
        }
        if rtype.plural == "selfsubjectreviews":
            out["status"] = {"userInfo": {"username": user, "groups": ["system:authenticated"]}}
            self._send_json(201, out)
            return
        spec: JsonDict = review["spec"] if isinstance(review.get("spec"), dict) else {}
        attrs = spec.get("resourceAttributes")
        out["spec"] = spec
        if isinstance(attrs, dict):
            verb = str(attrs.get("verb", ""))
            resource = str(attrs.get("resource", ""))
            if attrs.get("subresource"):
                resource += "/" + str(attrs["subresource"])
            denied = self._denied_by(verb, resource, attrs.get("namespace") or None)
        else:
            denied = False  # non-resource URLs: the sim's user may read them all
        out["status"] = (
            {"allowed": False}
            if denied
            else {
                "allowed": True,
                "reason": f'RBAC: allowed by ClusterRoleBinding "mignurse-sim-oncall" of '
                f'ClusterRole "cluster-admin" to User "{user}"',
            }
        )
        self._send_json(201, out)

    def _delete(self, rtype: ResourceType, namespace: str, name: str, body: bytes = b"") -> None:
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
                deleted = sim.world.delete_pod(namespace, name, self._grace_period(body))
                if deleted is None:
                    raise not_found(rtype, name)
                result = deleted
        self._send(200, self._with_kind(rtype, result))

    def _grace_period(self, body: bytes) -> int | None:
        """DeleteOptions.gracePeriodSeconds from the query or the body (None: the pod's own)."""
        text = self._query.get("gracePeriodSeconds")
        if text is None and body:
            try:
                options = json.loads(body)
            except ValueError:
                raise ApiError(400, "BadRequest", "error decoding DeleteOptions") from None
            value = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
            text = None if value is None else str(value)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise ApiError(400, "BadRequest", f'invalid gracePeriodSeconds "{text}"') from None

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
            options = eviction.get("deleteOptions") or {}
            grace = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
            pdb = sim.world.evict_pod(namespace, name, None if grace is None else int(grace))
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
