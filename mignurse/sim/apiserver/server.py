"""The simulator's HTTPS API server: the listening server (TLS handshakes off the accept
loop) and the request handler's front, which answers what kube-apiserver answers before a
resource is touched: authentication, injected faults, the route from path to served
resource and verb, RBAC denials, and the access reviews (`SelfSubjectReview`,
`SelfSubjectAccessReview`). Reads and writes are `ReadHandler`'s and `WriteHandler`'s.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from mignurse.sim import discovery, operator_config, protobuf, tables
from mignurse.sim.apiserver.creates import CreateHandler
from mignurse.sim.apiserver.documents import document, server_version
from mignurse.sim.apiserver.errors import NOT_FOUND, ApiError, conflict, not_allowed
from mignurse.sim.apiserver.reads import ReadHandler
from mignurse.sim.objects import JsonDict
from mignurse.sim.resources import RESOURCES, ResourceType

if TYPE_CHECKING:
    from mignurse.sim.simcluster import SimCluster

HANDSHAKE_TIMEOUT = 10.0


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


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, sim: SimCluster, port: int, tls: ssl.SSLContext) -> None:
        self.sim = sim
        self.stopping = False
        self.tls = tls
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self.served = discovery.catalogue(
            sim.crds,
            sim.scenario.resource_api_versions,
            node_diagnostics=sim.node_diagnostics is not None,
            cluster_policies=bool(sim.scenario.cluster_policies),
        )
        self.by_path = {(s.group, s.rtype.version, s.plural): s for s in self.served.values()}
        self.version = server_version(sim.scenario.kubernetes_version)
        crd_set = sim.crds
        self.crd_columns = (
            {p: tables.crd_columns(crd_set.printer_columns(p)) for p in crd_set.documents}
            if crd_set is not None
            else {}
        )
        if sim.scenario.cluster_policies:
            self.crd_columns[operator_config.PLURAL] = tables.crd_columns(
                operator_config.PRINTER_COLUMNS
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
        with self._connections_lock:
            self._connections.add(conn)
        try:
            super().finish_request(conn, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def drop_connections(self) -> None:
        """Cut every open connection, as a restarting API server's do: a request in flight
        gets no answer and a watch ends without a closing frame."""
        with self._connections_lock:
            open_now = list(self._connections)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def injected(code: int, retry_after: int | None) -> ApiError:
    """The Status of an injected failure, worded as kube-apiserver words that code: 429 as API
    Priority and Fairness rejects a request (k8s.io/apiserver v0.32
    pkg/endpoints/handlers/responsewriters/errors.go and pkg/server/filters/priority-and-fairness.go
    tooManyRequests: Retry-After and details.retryAfterSeconds), 503 and 504 as the timeout
    and availability filters do, anything else as an internal error."""
    if code == 429:
        seconds = retry_after or 1
        return ApiError(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            {"retryAfterSeconds": seconds},
            retry_after=seconds,
        )
    if code == 503:
        return ApiError(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            {"retryAfterSeconds": retry_after} if retry_after else None,
            retry_after=retry_after,
        )
    if code == 504:
        return ApiError(504, "Timeout", "the server was unable to return a response in time")
    return ApiError(code, "InternalError", "Internal error occurred: injected fault")


class Handler(ReadHandler, CreateHandler):
    """One connection's requests: checks, then the route to a read, a write or a review."""

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self._path = split.path.rstrip("/") or "/"
        self._query = dict(parse_qsl(split.query, keep_blank_values=True))
        self._table_version, self._aggregated, _plain = _accept(self.headers.get("Accept") or "")
        self._convert = None  # the served version's converter, set by _route
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
                raise injected(fault.code, fault.retry_after)
            race = self.sim._race_for(self.command, self._path)
            if race is not None and race.conflict:
                raise self._conflict_after_race()
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
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) >= 5 and parts[4] == "proxy":
            self._node_proxy(parts[3], parts[5:])
            return
        if self.command == "GET":
            doc = document(self.server, parts, self._aggregated)
            if doc is not None:
                self._send_json(200, *doc)
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
                raise not_allowed(rtype)
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
            raise not_allowed(rtype)
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
        elif verb == "create" and name is None:
            self._create(served, namespace, body)
        else:
            raise not_allowed(rtype)

    def _node_proxy(self, node: str, rest: list[str]) -> None:
        """GET /api/v1/nodes/NODE/proxy/logs/...: kubelet's /logs/ handler (the node's
        /var/log) through the API server, the way the node monitoring agent's `node`
        destination is read. RBAC: get nodes/proxy."""
        rtype = RESOURCES["nodes"]
        if self.command != "GET":
            raise not_allowed(rtype)
        self._authorize("get", rtype, None, node, "proxy")
        if not self.sim.store.exists("nodes", "", node):
            raise ApiError(
                404, "NotFound", f'nodes "{node}" not found', {"name": node, "kind": "nodes"}
            )
        machine = self.sim.loops.machines.get(node)
        if machine is None or machine.removed or not machine.kubelet_posting:
            # kube-apiserver's proxy error when the kubelet does not answer
            raise ApiError(
                503,
                "ServiceUnavailable",
                f"error trying to reach service: dial tcp {node}:10250: connect: connection "
                "refused",
            )
        agent = self.sim.node_diagnostics
        data = None
        if agent is not None and rest[:1] == ["logs"]:
            data = agent.served_file(node, "/".join(rest[1:]))
        if data is None:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
            return
        self._send(200, data, "application/gzip")

    def _conflict_after_race(self) -> ApiError:
        """409 for the object on this request's path, after another client's write."""
        parts = [p for p in self._path.split("/") if p]
        group, version, rest = (
            ("", parts[1], parts[2:]) if parts[:1] == ["api"] else (parts[1], parts[2], parts[3:])
        )
        if len(rest) >= 3 and rest[0] == "namespaces":
            rest = rest[2:]
        served = self.server.by_path.get((group, version, rest[0] if rest else ""))
        if served is None or len(rest) < 2:
            return ApiError(409, "Conflict", "the object has been modified")
        return conflict(served.rtype, rest[1])

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
