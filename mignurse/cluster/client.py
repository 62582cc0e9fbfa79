"""The Kubernetes API, reached like kubectl reaches it, read as raw JSON.

The `kubernetes` client does the connecting (kubeconfig, contexts, exec credential
plugins such as `aws eks get-token`, in-cluster service accounts, TLS); mignurse then
asks for plain JSON and parses only what it needs, because the client's per-object model
deserialization is far too slow for 5,000 nodes and 100,000 events.

Every failure leaves this module as a `ClusterError` whose message is one line saying
what went wrong and what to do about it.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from mignurse.cluster import kubeconfig as kubeconfig_files
from mignurse.gcpause import paused_gc

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 500
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = False

    @property
    def qualified(self) -> str:
        """`nodes`, `nodeclaims.karpenter.sh`: how kubectl and RBAC name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


NODES = Resource("", "v1", "nodes", "Node")
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODECLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim")
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)


class ClusterError(Exception):
    """A failure talking to the cluster; str() is the one line to show the user."""

    exit_code = 2


class KubeconfigError(ClusterError):
    """No usable kubeconfig, or the context asked for is not in it."""


class Unreachable(ClusterError):
    """The API server did not answer (connection refused, DNS, timeout, TLS)."""


class Unauthorized(ClusterError):
    """401: the credentials of the context were refused."""


class Forbidden(ClusterError):
    """403: RBAC refused one verb on one resource."""

    def __init__(self, message: str, verb: str, resource: str) -> None:
        super().__init__(message)
        self.verb = verb
        self.resource = resource


class NotFound(ClusterError):
    """404: the object, or the whole API group (no CRD), does not exist."""


class Expired(ClusterError):
    """410 Gone: a resourceVersion or continue token is too old; list again."""


class Conflict(ClusterError):
    """409: the object changed since it was read."""


class ApiError(ClusterError):
    """Any other refusal from the API server."""


class TooManyRequests(ApiError):
    """429: throttled, or an eviction refused because it would break a PodDisruptionBudget.

    `causes` are the Status body's `details.causes` messages (the PDB that refused)."""

    def __init__(self, message: str, causes: list[str] | None = None) -> None:
        super().__init__(message)
        self.causes = causes or []


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    items: list[T]
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class ContextInfo:
    context: str
    cluster: str
    server: str
    user: str


def _verb_for(method: str, query: dict[str, str], named: bool = False) -> str:
    """The RBAC verb of a request: a GET of one object is `get`, of a collection `list`."""
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if named else "list"
    return {"PATCH": "patch", "DELETE": "delete", "POST": "create", "PUT": "update"}.get(
        method, method.lower()
    )


def _status_causes(body: bytes | str | None) -> list[str]:
    """The `details.causes[].message` lines of a Kubernetes Status body."""
    try:
        parsed = json.loads(body or b"")
    except ValueError:
        return []
    details = parsed.get("details") if isinstance(parsed, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return [
        " ".join(str(c.get("message") or c.get("reason") or "").split())
        for c in causes or ()
        if isinstance(c, dict)
    ]


def _status_message(body: bytes | str | None) -> str:
    """The `message` of a Kubernetes Status body, or the body itself, on one line."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    if isinstance(parsed, dict):
        return " ".join(str(parsed.get("message") or "").split())
    return ""


class ClusterClient:
    """One connection to one cluster context. Thread-safe for concurrent requests."""

    def __init__(self, api_client: k8s_client.ApiClient, info: ContextInfo) -> None:
        self.api = api_client
        self.info = info
        self._clock_offset = timedelta(0)
        self._clock: Callable[[], datetime] | None = None  # see use_clock
        self._offset_lock = threading.Lock()

    # -- connecting -----------------------------------------------------------------

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> ClusterClient:
        """Connect as kubectl would: --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
        else the in-cluster service account."""
        configuration = k8s_client.Configuration()
        # Fail fast on a dead endpoint: kubectl gives up on connect errors quickly too.
        configuration.retries = urllib3.Retry(total=2, connect=2, read=0, backoff_factor=0.2)
        config_file, paths = kubeconfig_files.config_paths(kubeconfig)
        if not kubeconfig and not any(os.path.exists(p) for p in paths):
            if os.environ.get("KUBERNETES_SERVICE_HOST"):
                try:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                except ConfigException as exc:
                    raise KubeconfigError(f"in-cluster config unusable: {exc}") from None
                server = kubeconfig_files.shown_url(configuration.host)
                info = ContextInfo("in-cluster", "in-cluster", server, "serviceaccount")
                return cls(k8s_client.ApiClient(configuration), info)
            raise KubeconfigError(
                f"no kubeconfig found at {config_file}: run `aws eks update-kubeconfig "
                "--name CLUSTER` or pass --kubeconfig PATH"
            )
        if kubeconfig and not os.path.exists(os.path.expanduser(kubeconfig)):
            raise KubeconfigError(f"kubeconfig {kubeconfig} does not exist: check --kubeconfig")
        try:
            loaded = kubeconfig_files.load(config_file, paths, context, configuration)
        except kubeconfig_files.KubeconfigProblem as exc:
            raise KubeconfigError(str(exc)) from None
        info = ContextInfo(
            context=loaded.context,
            cluster=loaded.cluster,
            server=kubeconfig_files.shown_url(configuration.host),
            user=loaded.user,
        )
        return cls(k8s_client.ApiClient(configuration), info)

    def close(self) -> None:
        self.api.close()

    # -- the clock --------------------------------------------------------------------

    def server_now(self) -> datetime:
        """The API server's idea of now, from the Date headers it sends.

        Ages and repair deadlines are measured against the cluster's clock, not a laptop's
        that may be minutes off (or a simulator running at ten times real speed)."""
        if self._clock is not None:
            return self._clock()
        with self._offset_lock:
            offset = self._clock_offset
        return datetime.now(UTC) + offset

    def use_clock(self, clock: Callable[[], datetime]) -> None:
        """Take the time from `clock` (the simulator's own), not from Date headers that lag
        a fast simulated clock by the time since the last response."""
        self._clock = clock

    def _note_date(self, headers: Any) -> None:
        value = headers.get("Date") if headers is not None else None
        if not value:
            return
        try:
            server = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return
        offset = server - datetime.now(UTC)
        # Date has one-second resolution: smaller differences are noise.
        if abs(offset) < timedelta(seconds=2):
            offset = timedelta(0)
        with self._offset_lock:
            self._clock_offset = offset

    # -- requests ---------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        *,
        body: Any = None,
        content_type: str | None = None,
        stream: bool = False,
        read_timeout: float = READ_TIMEOUT,
        resource: Resource | None = None,
    ) -> Any:
        query = query or {}
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            request = self.api.param_serialize(
                method,
                path,
                query_params=list(query.items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*request, _request_timeout=(CONNECT_TIMEOUT, read_timeout))
        except ApiException as exc:  # TLS failures arrive as status 0
            raise Unreachable(self._unreachable(_one_line(exc.reason or exc))) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(self._unreachable(_reason_of(exc))) from None
        raw = response.response
        self._note_date(raw.headers)
        if 200 <= raw.status < 300:
            if stream:
                return raw
            return raw.data
        data = raw.data
        named = resource is not None and not path.rstrip("/").endswith("/" + resource.plural)
        raise self._error(raw.status, data, method, query, resource, named)

    def _unreachable(self, why: str) -> str:
        # `why` comes from urllib3 and the proxy: it may hold the proxy's or server's URL.
        configuration = self.api.configuration
        why = kubeconfig_files.scrub(why, configuration)
        proxy = getattr(configuration, "proxy", None)
        through = f" through proxy {kubeconfig_files.shown_url(proxy)}" if proxy else ""
        return kubeconfig_files.inert(
            f"cannot reach the Kubernetes API at {self.info.server}{through} (context "
            f"{self.info.context!r}): {why}; check the context and the endpoint's network path"
        )

    def _error(
        self,
        status: int,
        body: bytes,
        method: str,
        query: dict[str, str],
        resource: Resource | None,
        named: bool = False,
    ) -> ClusterError:
        message = _status_message(body)
        what = resource.qualified if resource else "that resource"
        verb = _verb_for(method, query, named)
        if status == 401:
            return Unauthorized(
                f"the API server refused the credentials of context {self.info.context!r} "
                "(401 Unauthorized): refresh them (aws sso login, aws eks update-kubeconfig)"
            )
        if status == 403:
            return Forbidden(
                f"RBAC refused: cannot {verb} {what} as user {self.info.user or '?'!r} in "
                f"context {self.info.context!r} ({message or '403 Forbidden'})",
                verb,
                what,
            )
        if status == 404:
            return NotFound(message or f"{what} not found")
        if status == 409:
            return Conflict(message or f"{what} changed since it was read")
        if status == 410:
            return Expired(message or "resource version too old")
        if status == 429:
            return TooManyRequests(
                f"the API server answered 429 to {verb} {what}: {message or 'too many requests'}",
                _status_causes(body),
            )
        return ApiError(
            f"the API server answered {status} to {verb} {what}: {message or 'no detail'}"
        )

    def get_json(self, path: str, query: dict[str, str] | None = None) -> Any:
        """A raw GET of an API path (discovery documents), parsed."""
        return json.loads(self._request("GET", path, query))

    # -- reading ----------------------------------------------------------------------

    def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """Yield each page's items and the list's resourceVersion, one page in memory at a time."""
        for body, version in self._page_bodies(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
        ):
            with paused_gc():
                items = orjson.loads(body).get("items") or []
            yield items, version

    def _page_bodies(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> Iterator[tuple[bytes, str]]:
        """Raw page bodies; only each page's small list metadata is parsed here."""
        query: dict[str, str] = {"limit": str(limit)}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        path = resource.path(namespace)
        while True:
            body = self._request("GET", path, query, resource=resource)
            meta = _list_metadata(body)
            yield body, str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if not token:
                return
            query["continue"] = token

    def list(
        self,
        resource: Resource,
        parse: Callable[[dict[str, Any]], T],
        **selectors: Any,
    ) -> Listing[T]:
        """List every object of a resource (paged), parsed at the edge.

        The next page is fetched while this one is parsed, so the API server's time and
        ours overlap; at most three pages are in memory. A continue token that expires
        mid-way (410) restarts the listing, as client-go does."""
        for _attempt in range(3):
            items: list[T] = []
            resource_version = ""
            try:
                for body, page_version in _prefetched(self._page_bodies(resource, **selectors)):
                    with paused_gc():
                        items.extend(parse(obj) for obj in orjson.loads(body).get("items") or ())
                    resource_version = page_version
            except Expired:
                continue
            return Listing(items, resource_version)
        raise ApiError(f"listing {resource.qualified} kept expiring mid-way; try again")

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        data = self._request("GET", resource.path(namespace, name), resource=resource)
        result: dict[str, Any] = json.loads(data)
        return result

    def patch(
        self,
        resource: Resource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH one object; `patch_type` is merge, strategic or json. Returns the new object.

        Put `metadata.resourceVersion` in a merge patch to make it conditional (409 if stale)."""
        content_type = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
        }[patch_type]
        path = resource.path(namespace, name) + (f"/{subresource}" if subresource else "")
        data = self._request("PATCH", path, body=body, content_type=content_type, resource=resource)
        result: dict[str, Any] = json.loads(data)
        return result

    def create(
        self,
        resource: Resource,
        body: dict[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """POST an object, or a subresource of one (`subresource="eviction"` posts a policy/v1
        Eviction to the pod named in `body.metadata.name`). Returns the server's answer."""
        name = (body.get("metadata") or {}).get("name") if subresource else None
        path = resource.path(namespace, name) + (f"/{subresource}" if subresource else "")
        data = self._request(
            "POST", path, body=body, content_type="application/json", resource=resource
        )
        result: dict[str, Any] = json.loads(data) if data else {}
        return result

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """DELETE one object; returns what the server sent (the object or a Status). With
        `uid`, the server deletes only the object of that UID (DeleteOptions.preconditions):
        one recreated under the same name since it was read is a Conflict, left alone."""
        body = (
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
            if uid
            else None
        )
        data = self._request(
            "DELETE",
            resource.path(namespace, name),
            resource=resource,
            body=body,
            content_type="application/json" if body else None,
        )
        result: dict[str, Any] = json.loads(data) if data else {}
        return result

    def api_group_available(self, group: str, version: str) -> bool:
        """Whether an API group (a set of CRDs, e.g. karpenter.sh/v1) is served."""
        try:
            self._request("GET", f"/apis/{group}/{version}")
        except NotFound:
            return False
        return True

    def watch(
        self,
        resource: Resource,
        resource_version: str,
        *,
        timeout_seconds: int = 300,
        on_open: Callable[[Any], None] | None = None,
        **selectors: Any,
    ) -> Iterator[WatchEvent]:
        """Stream changes after `resource_version` until the server ends the watch.

        Raises `Expired` when the version is too old (the caller lists again)."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        if selectors.get("label_selector"):
            query["labelSelector"] = selectors["label_selector"]
        if selectors.get("field_selector"):
            query["fieldSelector"] = selectors["field_selector"]
        response = self._request(
            "GET",
            resource.path(selectors.get("namespace")),
            query,
            stream=True,
            read_timeout=timeout_seconds + 30,
            resource=resource,
        )
        if on_open is not None:
            on_open(response)
        try:
            for line in _lines(response):
                event = json.loads(line)
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code")
                    message = " ".join(str(obj.get("message") or "").split())
                    if code == 410:
                        raise Expired(message or "watch resource version too old")
                    raise ApiError(f"watch of {resource.qualified} failed: {message or code}")
                yield WatchEvent(str(kind), obj)
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            return  # the stream ended or was closed under us; the caller re-watches
        finally:
            response.release_conn()


_META_KEY = b'"metadata":'
_decoder = json.JSONDecoder()


def _list_metadata(body: bytes) -> dict[str, Any]:
    """A list's own metadata (resourceVersion, continue) without parsing its items.

    The API server writes kind, apiVersion and metadata before items; anything else
    falls back to parsing the whole body."""
    head = body[:8192]
    at = head.find(_META_KEY)
    if at >= 0 and b'"items"' not in head[:at]:
        text = head[at + len(_META_KEY) :].decode("utf-8", "replace").lstrip()
        try:
            meta, _end = _decoder.raw_decode(text)
        except ValueError:
            meta = None
        if isinstance(meta, dict):
            return meta
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ApiError(f"the API server sent a list that is not JSON: {exc}") from None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return meta if isinstance(meta, dict) else {}


_DONE = object()


def _prefetched(pages: Iterator[tuple[bytes, str]]) -> Iterator[tuple[bytes, str]]:
    """Run `pages` one step ahead in a thread: its network waits overlap our parsing."""
    handoff: queue.Queue[Any] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def produce() -> None:
        try:
            for page in pages:
                while not stop.is_set():
                    try:
                        handoff.put(page, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            handoff.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer to raise
            handoff.put(exc)

    thread = threading.Thread(target=produce, name="list-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _lines(response: Any) -> Iterator[bytes]:
    buffer = b""
    chunks = response.read_chunked() if response.chunked else response.stream(65536)
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:300]


def _reason_of(exc: BaseException) -> str:
    """The innermost cause of a urllib3 failure, in words a person can act on."""
    reason: BaseException = exc
    while True:
        inner = getattr(reason, "reason", None)
        if not isinstance(inner, BaseException) or inner is reason:
            break
        reason = inner
    text = _one_line(reason)
    if isinstance(reason, ConnectionRefusedError) or "Connection refused" in text:
        return "connection refused"
    if isinstance(reason, urllib3.exceptions.NameResolutionError) or "resolve" in text:
        return "the host name does not resolve"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        # A subclass of ConnectTimeoutError in urllib3 2 that is no timeout: a proxy's
        # refusal (`SOCKS5 authentication failed`), an unreachable network.
        return text.rpartition("Failed to establish a new connection: ")[2] or text
    if isinstance(reason, TimeoutError | urllib3.exceptions.TimeoutError) or "timed out" in text:
        return "timed out"
    return text
