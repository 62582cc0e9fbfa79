"""The Kubernetes API, reached like kubectl reaches it, read as raw JSON.

`kubeconfig.py` reads the kubeconfig (contexts, exec credential plugins such as
`aws eks get-token`, tokens, client certificates); it loads the `kubernetes` package only for
an auth-provider user or in-cluster service accounts. `transport.py` sends the requests
through urllib3 (TLS, proxies), as the kubernetes client's ApiClient did. mignurse asks for
plain JSON and parses only what it needs, because the client's per-object model
deserialization is far too slow for 5,000 nodes and 100,000 events.

Every failure leaves this module as a `ClusterError` whose message is one line saying
what went wrong and what to do about it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any, Generic, TypeVar

import orjson
import urllib3

from mignurse.cluster import kubeconfig as k8s_config
from mignurse.cluster import kubeconfig as kubeconfig_files
from mignurse.cluster import transport as k8s_client
from mignurse.cluster.deadline import Deadline, DeadlinePassed, guard_pools
from mignurse.cluster.kubeconfig import ConfigException, one_line
from mignurse.cluster.pages import (
    PageError,
    check_depth,
    list_metadata,
    page_items,
    why_not_json,
    without_images,
)
from mignurse.cluster.transport import ApiException
from mignurse.gcpause import paused_gc
from mignurse.inert import inert
from mignurse.untrusted import (
    COMMAND_SECONDS,
    LIST_ITEMS,
    REQUEST_SECONDS,
    RESPONSE_BYTES,
    RESPONSE_RATIO,
    RETRY_AFTER_SECONDS,
    Limit,
    LimitError,
    human_bytes,
)

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 500
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
# client-go retries a 429 or 5xx that carries Retry-After up to 10 times (kubernetes/client-go
# v0.33.9, rest/request.go `maxRetries: 10`, rest/with_retry.go `checkWait`); so does mignurse,
# for reads only, each wait capped at RETRY_AFTER_SECONDS.
MAX_RETRIES = 10
ERROR_BODY_BYTES = 64 * 2**10  # of an error answer, read for its message
RATIO_FLOOR_BYTES = 2**20  # the compression ratio is judged once this much is decoded
CHUNK_BYTES = 64 * 2**10
# A Date header further than this from the local clock is not believed (a server in year
# 9999); within it, the server's clock is used, as a laptop days off must not shift ages.
PLAUSIBLE_CLOCK_OFFSET = timedelta(days=366)


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
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
# The GPU operator's one cluster-scoped custom resource (NVIDIA/gpu-operator v26.7.0
# api/nvidia/v1/clusterpolicy_types.go: group nvidia.com, version v1, scope Cluster).
CLUSTER_POLICIES = Resource("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy")


class ClusterError(Exception):
    """A failure talking to the cluster; str() is the one line to show the user."""

    exit_code = 2


class KubeconfigError(ClusterError):
    """No usable kubeconfig, or the context asked for is not in it."""


class CredentialsFailed(KubeconfigError):
    """The context's credential plugin failed: `kind` "expired" (an expired login),
    "timeout", or "error" (any other failure); `login` the command that renews the login."""

    def __init__(self, message: str, *, kind: str, login: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.login = login


class Unreachable(ClusterError):
    """The API server did not answer (connection refused, DNS, timeout, TLS)."""


class NoAnswer(Unreachable):
    """The connection was made, and then the API server gave no answer in time: the TLS
    handshake or the answer never came. Its status is `timed-out`, not `unreachable`: the
    endpoint is reachable, the server behind it is not answering. It stays an Unreachable
    so that whatever tries an unreachable server again tries this one again too."""


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


class BadAnswer(ApiError):
    """An answer mignurse refuses to read: not JSON, cut short, or over one of the caps."""


class TooSlow(ClusterError):
    """A request, or a command's reads, ran past its deadline."""


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
    cut: bool = False  # the list went past LIST_ITEMS and only that many were kept (`cut`)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata")
        return _text(meta.get("resourceVersion")) if isinstance(meta, dict) else ""


@dataclass(frozen=True, slots=True)
class ContextInfo:
    context: str
    cluster: str
    server: str
    user: str

    @property
    def name(self) -> str:
        """The cluster's name as its operators say it: the last part of an EKS ARN
        (`aws eks update-kubeconfig` names the kubeconfig's cluster entry
        `arn:aws:eks:REGION:ACCOUNT:cluster/NAME`), else the cluster entry, else the context."""
        entry = self.cluster or self.context
        if entry.startswith("arn:") and ":cluster/" in entry:
            return entry.rsplit(":cluster/", 1)[1]
        return entry


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
        parsed = orjson.loads(body or b"")
    except (orjson.JSONDecodeError, RecursionError):
        return []
    details = parsed.get("details") if isinstance(parsed, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return [
        _inert(" ".join(str(c.get("message") or c.get("reason") or "").split()), 300)
        for c in (causes if isinstance(causes, list) else ())[:20]
        if isinstance(c, dict)
    ]


# A proxy's error page only: compiled on first use (through `re`'s own cache).
_TITLE = r"(?is)<title[^>]*>(.*?)</title"
_TAG = r"<[^>]*>"


def _status_message(body: bytes | str | None) -> str:
    """The `message` of a Kubernetes Status body on one line; for anything else (a proxy's
    HTML error page) its <title>, or the start of its text, short and made inert."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed = orjson.loads(text)
    except (orjson.JSONDecodeError, RecursionError):
        title = re.search(_TITLE, text[:65536])
        if title:
            words = " ".join(re.sub(_TAG, " ", title.group(1)).split())
            return f"an HTML page titled {_inert(words, 120)!r}" if words else "an HTML page"
        if "<html" in text[:2048].lower() or "<!doctype" in text[:2048].lower():
            return "an HTML page"
        return f"a body that is not JSON, starting {_inert(' '.join(text.split()), 120)!r}"
    if isinstance(parsed, dict):
        return _inert(" ".join(str(parsed.get("message") or "").split()), 300)
    return ""


def on_this_machine(server: str) -> bool:
    """Whether an API server's URL names this machine (a loopback address or `localhost`:
    the simulator, kind, a port-forward). Elsewhere answers are asked for gzip, as kubectl
    asks (Go's transport does): the API server compresses those over 128 KiB, a page of 500
    GPU nodes from 8 MB to about 1 MB on the wire. Here that would only spend CPU on
    both ends of one machine."""
    try:
        host = (urllib3.util.parse_url(server).host or "").strip("[]").lower()
    except ValueError:  # LocationParseError: the connection says what is wrong with it
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    import ipaddress  # only here: 2 ms of every command's start

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ClusterClient:
    """One connection to one cluster context. Thread-safe for concurrent requests."""

    def __init__(self, api_client: k8s_client.ApiClient, info: ContextInfo) -> None:
        self.api = api_client
        self.info = info
        self._clock_offset = timedelta(0)
        self._clock: Callable[[], datetime] | None = None  # see use_clock
        self._offset_lock = threading.Lock()
        self._command_deadline: float | None = None  # monotonic; see limit_command
        self._command_seconds = 0
        self._closing = threading.Event()
        self._in_flight: set[Deadline] = set()
        self._in_flight_lock = threading.Lock()
        self._busy: tuple[float, str] | None = None  # (monotonic end, why) of a Retry-After wait
        self.on_busy: Callable[[str], None] | None = None  # told each Retry-After wait, one line
        self._headers = {"Accept": "application/json"}
        if not on_this_machine(info.server):
            self._headers["Accept-Encoding"] = "gzip"
        _own_retries(api_client)

    # -- connecting -----------------------------------------------------------------

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> ClusterClient:
        """Connect as kubectl would: --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
        else the in-cluster service account."""
        configuration = k8s_client.Configuration()
        configuration.retries = _connection_retries()
        config_file, paths = kubeconfig_files.config_paths(kubeconfig)
        if not kubeconfig and not any(os.path.exists(p) for p in paths):
            if os.environ.get("KUBERNETES_SERVICE_HOST"):
                try:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                except ConfigException as exc:
                    raise KubeconfigError(f"in-cluster config unusable: {exc}") from None
                server = kubeconfig_files.shown_url(configuration.host)
                info = ContextInfo("in-cluster", "in-cluster", server, "serviceaccount")
                api_client = k8s_client.ApiClient(configuration)
                problem = api_client.rest_client.tls_problem
                if problem is not None:
                    raise KubeconfigError(
                        f"in-cluster config unusable: its {problem.part} is not PEM: "
                        f"{one_line(problem)}"
                    )
                return cls(api_client, info)
            raise KubeconfigError(
                f"no kubeconfig found at {config_file}: run `aws eks update-kubeconfig "
                "--name CLUSTER` or pass --kubeconfig PATH"
            )
        if kubeconfig and not os.path.exists(os.path.expanduser(kubeconfig)):
            raise KubeconfigError(f"kubeconfig {kubeconfig} does not exist: check --kubeconfig")
        try:
            loaded = kubeconfig_files.load(config_file, paths, context, configuration)
        except kubeconfig_files.PluginProblem as exc:
            raise CredentialsFailed(str(exc), kind=exc.kind, login=exc.login) from None
        except kubeconfig_files.KubeconfigProblem as exc:
            raise KubeconfigError(str(exc)) from None
        info = ContextInfo(
            context=loaded.context,
            cluster=loaded.cluster,
            server=kubeconfig_files.shown_url(configuration.host),
            user=loaded.user,
        )
        api_client = k8s_client.ApiClient(configuration)
        problem = api_client.rest_client.tls_problem
        if problem is not None:  # a certificate or key of the kubeconfig
            refusal = kubeconfig_files.tls_refusal(loaded, problem.part, problem.mismatched)
            raise KubeconfigError(inert(refusal))
        return cls(api_client, info)

    def close(self) -> None:
        """Ends every request in flight and every Retry-After wait, then the connections."""
        self._closing.set()
        with self._in_flight_lock:
            in_flight = list(self._in_flight)
        for deadline in in_flight:
            deadline.abort()
        self.api.close()

    def limit_command(self, seconds: int) -> None:
        """Every request from now on ends within `seconds` of now, retries and waits included
        (a one-shot command's reads: `nodes`, `diagnose`)."""
        self._command_seconds = seconds
        self._command_deadline = time.monotonic() + seconds

    def unlimit_command(self) -> None:
        """No deadline from here on: a connection kept for watches after its first, bounded
        reads (the app's clusters, `fleet.FleetRequest(keep=True)`)."""
        self._command_deadline = None

    def busy(self) -> str:
        """While a request waits out a Retry-After: the line that says so, with the seconds
        left; else ""."""
        busy = self._busy
        if busy is None:
            return ""
        left = busy[0] - time.monotonic()
        return f"API server busy ({busy[1]}): retrying in {max(left, 0):.0f} s" if left > 0 else ""

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
        if not value or not isinstance(value, str):
            return
        try:
            server = parsedate_to_datetime(value)
            if server.tzinfo is None:  # "-0000": UTC, origin unknown (RFC 5322 3.3)
                server = server.replace(tzinfo=UTC)
            offset = server - datetime.now(UTC)
        except (TypeError, ValueError, OverflowError, IndexError):
            return
        if abs(offset) > PLAUSIBLE_CLOCK_OFFSET:
            return  # not a clock a cluster runs on: the local one is kept
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
        resource: Resource | None = None,
    ) -> bytes:
        """The decoded body of a 2xx answer, read within RESPONSE_BYTES, RESPONSE_RATIO and
        the request's deadline; any other answer raised as the ClusterError it means."""
        what = _what(method, path, query or {}, resource)
        raw, deadline = self._open(method, path, query, body, content_type, resource, what)
        try:
            return self._read_body(raw, deadline, what, _limit(RESPONSE_BYTES), whole=True)
        finally:
            self._finish(deadline)

    def _open(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None,
        body: Any,
        content_type: str | None,
        resource: Resource | None,
        what: str,
        *,
        seconds: float | None = None,
    ) -> tuple[Any, Deadline]:
        """A 2xx answer whose body is still to be read, and the deadline that guards it
        (the caller finishes it). Reads that the server asks to retry later (429 or 5xx
        with Retry-After) are retried as client-go retries them."""
        query = query or {}
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        for attempt in range(MAX_RETRIES + 1):
            deadline = self._arm(what, seconds)
            try:
                raw = self._send(method, path, query, headers, body, deadline, seconds)
                self._note_date(raw.headers)
                if 200 <= raw.status < 300:
                    return raw, deadline
                data = self._read_body(raw, deadline, what, ERROR_BODY_BYTES, whole=False)
            except BaseException:
                self._finish(deadline)
                raise
            self._finish(deadline)
            wait = self._retry_wait(raw, method, what, attempt)
            if wait is None:
                named = resource is not None and not path.rstrip("/").endswith(
                    "/" + resource.plural
                )
                raise self._error(raw.status, data, method, query, resource, named)
            self._pause(wait, _status_words(raw.status))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _arm(self, what: str, seconds: float | None) -> Deadline:
        if self._closing.is_set():
            raise ClusterError("mignurse is closing its connection to the API server")
        if seconds is None:
            seconds = float(_limit(REQUEST_SECONDS))
            why = str(REQUEST_SECONDS.refusal(f"the API server's answer to {what} took too long"))
        else:
            why = f"the API server's answer to {what} took longer than {seconds:g} s"
        if self._command_deadline is not None:
            left = self._command_deadline - time.monotonic()
            if left <= 0:
                raise TooSlow(self._command_refusal(what))
            if left < seconds:
                seconds, why = left, self._command_refusal(what)
        deadline = Deadline(seconds, why)
        with self._in_flight_lock:
            self._in_flight.add(deadline)
        return deadline

    def _command_refusal(self, what: str) -> str:
        more = COMMAND_SECONDS.more_than(int(self._command_seconds))
        return f"reading the cluster took longer than {self._command_seconds} s (at {what})" + (
            f": {more} allows more" if more else ""
        )

    def _finish(self, deadline: Deadline) -> None:
        deadline.done()
        with self._in_flight_lock:
            self._in_flight.discard(deadline)

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: Any,
        deadline: Deadline,
        watch_seconds: float | None,
    ) -> Any:
        # A watch may be silent for minutes; any other answer starts within READ_TIMEOUT.
        read_timeout = READ_TIMEOUT if watch_seconds is None else watch_seconds
        try:
            with deadline:
                request = self.api.param_serialize(
                    method,
                    path,
                    query_params=list(query.items()),
                    header_params=dict(headers),
                    body=body,
                    auth_settings=["BearerToken"],
                )
                response = self.api.call_api(
                    *request, _request_timeout=(CONNECT_TIMEOUT, read_timeout)
                )
        except DeadlinePassed:
            raise self._ended(deadline) from None
        except ApiException as exc:  # TLS failures arrive as status 0
            if deadline.passed or deadline.closed:
                raise self._ended(deadline) from None
            raise Unreachable(self._unreachable(one_line(exc.reason or exc))) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.passed or deadline.closed:
                raise self._ended(deadline) from None
            waited = _waited_for(exc)
            if waited:
                seconds = CONNECT_TIMEOUT if waited == "the TLS handshake" else read_timeout
                raise NoAnswer(self._no_answer(waited, seconds)) from None
            raise Unreachable(self._unreachable(_reason_of(exc))) from None
        return response.response

    def _ended(self, deadline: Deadline) -> ClusterError:
        if deadline.closed:
            return ClusterError("mignurse closed its connection to the API server")
        return TooSlow(deadline.why)

    def _read_body(
        self, raw: Any, deadline: Deadline, what: str, cap: int, *, whole: bool
    ) -> bytes:
        """The body, decoded (gzip or deflate), at most `cap` bytes: past it, an error when
        `whole`, else the first `cap` bytes (an error answer, read for its message)."""
        decoded = bytearray()
        complete = False
        try:
            for piece in _Inflater(raw, what):
                decoded += piece
                if len(decoded) > cap:
                    if not whole:
                        del decoded[cap:]
                        break
                    raise BadAnswer(
                        str(RESPONSE_BYTES.refusal(f"the API server's answer to {what}"))
                    )
            else:
                complete = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.passed or deadline.closed:
                raise self._ended(deadline) from None
            why = kubeconfig_files.scrub(_reason_of(exc), self.api.configuration)
            raise BadAnswer(
                f"the API server's answer to {what} broke off after "
                f"{human_bytes(len(decoded))}: {inert(why)}"
            ) from None
        finally:
            if not complete:
                raw.close()  # a connection with unread bytes on it is not reused
            raw.release_conn()
        return bytes(decoded)

    def _retry_wait(self, raw: Any, method: str, what: str, attempt: int) -> float | None:
        """Seconds to wait before asking again, or None to fail now. A wait longer than
        RETRY_AFTER_SECONDS fails at once, in one line that says what the server asked."""
        status = raw.status
        if status != 429 and status < 500:
            return None
        seconds = _retry_after_seconds(raw.headers.get("Retry-After"))
        if seconds is None or method != "GET" or attempt >= MAX_RETRIES:
            return None
        cap = _limit(RETRY_AFTER_SECONDS)
        if seconds > cap:
            asked = f"{seconds:,} s" if seconds < 10**9 else "an absurd time"
            refusal = RETRY_AFTER_SECONDS.refusal(
                f"the API server asked to retry after {asked} ({_status_words(status)}) to {what}"
            )
            error = TooManyRequests if status == 429 else ApiError
            raise error(f"{refusal}; try again later")
        if self._command_deadline is not None and (
            time.monotonic() + seconds >= self._command_deadline
        ):
            raise TooSlow(self._command_refusal(what))
        return float(seconds)

    def _pause(self, seconds: float, why: str) -> None:
        """Wait out a Retry-After where it can be seen (`busy`, `on_busy`) and cut short
        (`close`)."""
        self._busy = (time.monotonic() + seconds, why)
        try:
            if self.on_busy is not None:
                self.on_busy(f"API server busy ({why}): retrying in {seconds:.0f} s")
            if self._closing.wait(seconds):
                raise ClusterError("mignurse closed its connection to the API server")
        finally:
            self._busy = None

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

    def _no_answer(self, waited: str, seconds: float) -> str:
        configuration = self.api.configuration
        proxy = getattr(configuration, "proxy", None)
        through = f" through proxy {kubeconfig_files.shown_url(proxy)}" if proxy else ""
        return kubeconfig_files.inert(
            f"the Kubernetes API at {self.info.server}{through} (context "
            f"{self.info.context!r}) accepted the connection but gave no answer to {waited} "
            f"within {seconds:g} s; check that the API server is up and what stands in front "
            "of it"
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
        return _json(self._request("GET", path, query), f"get {path}")

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
        """Yield each page's items and the list's resourceVersion, one page in memory at a time.
        A list the server says is longer than LIST_ITEMS is refused at its first page."""
        cap = _limit(LIST_ITEMS)
        total = 0
        for body, version, remaining in self._page_bodies(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
        ):
            with paused_gc():
                items = _page_list(body, resource)
                if items is None:  # a page too large to parse whole: walked
                    items = list(_page_items(body, resource))
                else:  # handed on raw: what reads them must not meet a nesting bomb
                    try:
                        check_depth(items)
                    except PageError as exc:
                        raise BadAnswer(_page_refusal(resource, exc)) from None
                del body
            total += len(items)
            if total + remaining > cap:
                raise BadAnswer(_too_many(resource))
            yield items, version
            del items

    def _page_bodies(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> Iterator[tuple[bytes, str, int]]:
        """Raw page bodies, the list's resourceVersion and how many objects the server says
        remain after the page (its `remainingItemCount`, 0 when it does not say); only each
        page's small list metadata is parsed here."""
        query: dict[str, str] = {"limit": str(limit)}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        path = resource.path(namespace)
        seen: set[str] = set()
        while True:
            body = self._request("GET", path, query, resource=resource)
            try:
                meta = list_metadata(body)
            except PageError as exc:
                raise BadAnswer(_page_refusal(resource, exc)) from None
            token = meta.get("continue")
            yield body, _text(meta.get("resourceVersion")), _remaining(meta) if token else 0
            del body  # not kept while the next page is fetched
            if not token:
                return
            token = _text(token)
            if token in seen:  # a server that hands back the same token would loop forever
                raise BadAnswer(
                    f"the API server's answer to list {resource.qualified} repeats a continue "
                    "token: it would never end"
                )
            seen.add(token)
            query["continue"] = token

    def list(
        self,
        resource: Resource,
        parse: Callable[[dict[str, Any]], T],
        *,
        cut: bool = False,
        **selectors: Any,
    ) -> Listing[T]:
        """List every object of a resource (paged), parsed at the edge. Nodes are parsed
        without their `status.images`, which no model reads, here and in `watch`
        (`list_pages` and `get` keep them).

        The next page is fetched while this one is parsed, so the API server's time and
        ours overlap; at most three pages are in memory, and each is let go once its
        objects are built. A continue token that expires mid-way (410) restarts the
        listing, as client-go does. At most LIST_ITEMS objects: past them the list is
        refused (BadAnswer), or with `cut` (events, where some are worth more than none)
        the first LIST_ITEMS are kept and the listing says so. The cap is judged before a
        page's objects are built, on the page's count and the count the server says
        remains (`remainingItemCount`), so a refused list is refused at its first page
        when the server says how long it is, and never holds more than the cap."""
        cap = _limit(LIST_ITEMS)
        for _attempt in range(3):
            items: list[T] = []
            resource_version = ""
            try:
                pages = _prefetched(self._page_bodies(resource, **selectors))
                try:
                    for body, page_version, remaining in pages:
                        with paused_gc():
                            whole = _page_list(body, resource)
                            over = False
                            if whole is None:  # a page too large to parse whole: walked
                                if len(items) + remaining > cap and not cut:
                                    raise BadAnswer(_too_many(resource))
                                for raw in _page_items(body, resource):
                                    if len(items) >= cap:
                                        if not cut:
                                            raise BadAnswer(_too_many(resource))
                                        over = True
                                        break
                                    items.append(_parsed(parse, raw, resource, len(items)))
                            else:
                                del body
                                room = cap - len(items)
                                over = len(whole) > room or (len(whole) == room and remaining > 0)
                                if len(whole) + remaining > room and not cut:
                                    raise BadAnswer(_too_many(resource))
                                _parse_into(items, whole[:room], parse, resource)
                            # The page's JSON freed while the collector is still paused: alive
                            # past it, the collector's next pass would walk all of it.
                            del whole
                        resource_version = page_version
                        if over:
                            return Listing(items, resource_version, cut=True)
                finally:  # a refusal or a cut: the thread fetching ahead stops
                    pages.close()
            except Expired:
                continue
            return Listing(items, resource_version)
        raise ApiError(f"listing {resource.qualified} kept expiring mid-way; try again")

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        data = self._request("GET", resource.path(namespace, name), resource=resource)
        return _object(data, f"get {resource.qualified} {name}")

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
        return _object(data, f"patch {resource.qualified} {name}")

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
        return _object(data, f"create {resource.qualified}") if data else {}

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
        return _object(data, f"delete {resource.qualified} {name}") if data else {}

    def download(
        self,
        path: str,
        sink: Any,
        *,
        limit: int,
        seconds: float,
        cancel: threading.Event | None = None,
    ) -> int:
        """A raw GET whose body is a file, not JSON (a node's file behind the API server's
        node proxy, `/api/v1/nodes/NODE/proxy/logs/...`), streamed into `sink` as it comes:
        at most `limit` bytes, within `seconds`, stopped when `cancel` is set. Returns the
        bytes written; a refusal is the ClusterError it means (Forbidden, NotFound, ...)."""
        what = f"get {path}"
        raw, deadline = self._open("GET", path, None, None, None, None, what, seconds=seconds)
        written = 0
        complete = False
        try:
            for piece in _Inflater(raw, what):
                if cancel is not None and cancel.is_set():
                    raise ClusterError(f"{what}: cancelled before it finished")
                written += len(piece)
                if written > limit:
                    raise BadAnswer(
                        f"the answer to {what} is larger than {human_bytes(limit)}: refused"
                    )
                sink.write(piece)
            complete = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.passed or deadline.closed:
                raise self._ended(deadline) from None
            why = kubeconfig_files.scrub(_reason_of(exc), self.api.configuration)
            raise BadAnswer(
                f"the answer to {what} broke off after {human_bytes(written)}: {inert(why)}"
            ) from None
        finally:
            if not complete:
                raw.close()
            raw.release_conn()
            self._finish(deadline)
        return written

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
        what = f"watch {resource.qualified}"
        response, deadline = self._open(
            "GET",
            resource.path(selectors.get("namespace")),
            query,
            None,
            None,
            resource,
            what,
            seconds=timeout_seconds + 30,  # the server ends the watch at timeout_seconds
        )
        try:
            if on_open is not None:
                on_open(response)
            lean = resource is NODES  # a node's status.images, cut as from a list's pages
            for line in _lines(_Inflater(response, what)):
                event = _lean_json(line, what) if lean else _json(line, what)
                obj = event.get("object") if isinstance(event, dict) else None
                if not isinstance(obj, dict):
                    raise BadAnswer(
                        f"the API server's {what} sent an event that is not an object with an "
                        "object in it"
                    )
                kind = event.get("type")
                if kind == "ERROR":
                    code = obj.get("code")
                    message = _inert(" ".join(str(obj.get("message") or "").split()), 300)
                    if code == 410:
                        raise Expired(message or "watch resource version too old")
                    raise ApiError(f"watch of {resource.qualified} failed: {message or code}")
                yield WatchEvent(_inert(str(kind), 20), obj)
        except (urllib3.exceptions.HTTPError, OSError):
            return  # the stream ended or was closed under us; the caller re-watches
        finally:
            self._finish(deadline)
            response.close()
            response.release_conn()


_DONE = object()


def _prefetched(pages: Iterator[T]) -> Generator[T, None, None]:
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
            got = [handoff.get()]
            if got[0] is _DONE:
                return
            if isinstance(got[0], BaseException):
                raise got[0]
            yield got.pop()  # held by the consumer alone, which lets it go once parsed
    finally:
        stop.set()


def _connection_retries() -> urllib3.Retry:
    """Fail fast on a dead endpoint (kubectl gives up on connect errors quickly too), but try
    a GET once more when the connection broke before its answer came: a server or load
    balancer may close a kept-alive connection between two requests without saying so.
    client-go does the same for GETs only (kubernetes/client-go v0.33.9 rest/request.go,
    `isErrRetryableFunc`: connection reset or EOF); a write is never sent twice."""
    return urllib3.Retry(
        total=2, connect=2, read=1, allowed_methods=frozenset({"GET"}), backoff_factor=0.2
    )


def _own_retries(api_client: k8s_client.ApiClient) -> None:
    """urllib3 keeps its retries for connection failures only. Left to itself it would honour
    any Retry-After on a 429 or 503 by sleeping (an hour for `Retry-After: 3600`, silently);
    mignurse waits itself, capped and said (`ClusterClient._open`). Its connections are
    also made ones a `Deadline` can end."""
    pool_manager = api_client.rest_client.pool_manager
    retries = pool_manager.connection_pool_kw.get("retries")
    if isinstance(retries, urllib3.Retry):
        pool_manager.connection_pool_kw["retries"] = retries.new(
            status=0, status_forcelist=(), respect_retry_after_header=False
        )
    elif retries is None:
        pool_manager.connection_pool_kw["retries"] = _connection_retries().new(
            status=0, status_forcelist=(), respect_retry_after_header=False
        )
    guard_pools(pool_manager)


def _lines(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The stream's lines (watch events are one JSON object a line), each at most
    RESPONSE_BYTES."""
    cap = _limit(RESPONSE_BYTES)
    buffer = bytearray()
    for chunk in pieces:
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if line.strip():
                yield line
        if len(buffer) > cap:
            raise BadAnswer(str(RESPONSE_BYTES.refusal("one event of a watch")))
    if buffer.strip():
        yield bytes(buffer)


class _Inflater:
    """A response body as it comes, decoded from gzip or deflate in bounded pieces
    (CHUNK_BYTES each, however much one compressed piece expands); `wire` counts the
    bytes that came over the connection."""

    def __init__(self, raw: Any, what: str) -> None:
        self.raw = raw
        self.what = what
        self.wire = 0
        encoding = str(raw.headers.get("Content-Encoding") or "").strip().lower()
        if encoding in ("", "identity"):
            self._wbits: int | None = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._wbits = zlib.MAX_WBITS | 32  # a gzip or zlib header, told apart by zlib
        else:
            raise BadAnswer(
                f"the API server's answer to {what} is encoded as {_inert(encoding, 40)!r}, "
                "which mignurse does not read (it asks for plain JSON)"
            )

    def __iter__(self) -> Iterator[bytes]:
        wbits = self._wbits
        if wbits is None:
            for data in self.raw.stream(CHUNK_BYTES, decode_content=False):
                self.wire += len(data)
                yield data
            return
        decoder = zlib.decompressobj(wbits)
        ratio = _limit(RESPONSE_RATIO)
        decoded = 0
        for data in self.raw.stream(CHUNK_BYTES, decode_content=False):
            self.wire += len(data)
            try:
                while data:
                    piece = decoder.decompress(data, CHUNK_BYTES)
                    data = decoder.unconsumed_tail
                    if decoder.eof and decoder.unused_data:  # the next gzip member
                        data = decoder.unused_data
                        decoder = zlib.decompressobj(wbits)
                    decoded += len(piece)
                    if decoded > RATIO_FLOOR_BYTES and decoded > ratio * self.wire:
                        raise BadAnswer(self._inflates_too_much(decoded))
                    if piece:
                        yield piece
            except zlib.error as exc:
                raise BadAnswer(
                    f"the API server's answer to {self.what} is not valid gzip: {exc}"
                ) from None

    def _inflates_too_much(self, decoded: int) -> str:
        subject = (
            f"the API server's answer to {self.what} inflates {human_bytes(self.wire)} into "
            f"more than {human_bytes(decoded)}"
        )
        return str(RESPONSE_RATIO.refusal(subject))


def _what(method: str, path: str, query: dict[str, str], resource: Resource | None) -> str:
    """A request as a person names it: `list nodes`, `get /apis/karpenter.sh/v1`."""
    if resource is None:
        return f"{_verb_for(method, query, named=True)} {path}"
    named = not path.rstrip("/").endswith("/" + resource.plural)
    return f"{_verb_for(method, query, named)} {resource.qualified}"


def _limit(limit: Limit) -> int:
    """A cap's value; one set wrong in the environment is a ClusterError too, so a watch
    thread reports it rather than dying of it."""
    try:
        return limit.value()
    except LimitError as exc:
        raise ClusterError(str(exc)) from None


def _status_words(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _retry_after_seconds(value: object) -> int | None:
    """Retry-After as whole seconds (RFC 9110 10.2.3: seconds or an HTTP date); None when
    absent or unreadable. client-go reads only the seconds form (rest/request.go
    `retryAfterSeconds`); the date form is read too, as the RFC allows it."""
    text = str(value or "").strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return int(text[:30])
    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0, int((when - datetime.now(UTC)).total_seconds()))
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


def _page_items(body: bytes, resource: Resource) -> Iterator[dict[str, Any]]:
    try:
        yield from page_items(body)
    except PageError as exc:
        raise BadAnswer(_page_refusal(resource, exc)) from None


def _page_list(body: bytes, resource: Resource) -> list[dict[str, Any]] | None:
    """The page's items when it was parsed whole (None: walk it with _page_items). A page of
    nodes is parsed without their images (`pages.without_images`) where it can be."""
    if resource is NODES:
        lean = without_images(body)
        if lean is not body:
            with contextlib.suppress(PageError):
                items = page_items(lean)
                if isinstance(items, list):
                    return items
            # not the shape it was cut for: the page as it came, refused on its own terms
    try:
        items = page_items(body)
    except PageError as exc:
        raise BadAnswer(_page_refusal(resource, exc)) from None
    return items if isinstance(items, list) else None


def _remaining(meta: dict[str, Any]) -> int:
    """The objects the server says are left after a page (ListMeta.remainingItemCount,
    kubernetes v1.34 staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go): 0 when it
    does not say, or says something that is not a count."""
    count = meta.get("remainingItemCount")
    return count if type(count) is int and count > 0 else 0


def _page_refusal(resource: Resource, exc: PageError) -> str:
    return f"the API server's answer to list {resource.qualified} cannot be read: {exc}"


def _too_many(resource: Resource) -> str:
    return str(LIST_ITEMS.refusal(f"the API server lists more {resource.qualified} than that"))


_MODEL_ERRORS = (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError)


def _parse_into(
    items: list[T],
    page: list[dict[str, Any]],
    parse: Callable[[dict[str, Any]], T],
    resource: Resource,
) -> None:
    """A whole page parsed at the speed of `map`; an object the model cannot read is looked
    for, and named, only when one failed."""
    before = len(items)
    try:
        items.extend(map(parse, page))
    except _MODEL_ERRORS:
        del items[before:]
        for index, raw in enumerate(page):
            _parsed(parse, raw, resource, before + index)
        raise


def _parsed(
    parse: Callable[[dict[str, Any]], T], raw: dict[str, Any], resource: Resource, index: int
) -> T:
    """One object parsed into the model; one the model cannot read is the server's fault,
    said in one line with its name."""
    try:
        return parse(raw)
    except _MODEL_ERRORS as exc:
        meta = raw.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        which = f"{_inert(str(name), 80)!r}" if isinstance(name, str) else f"number {index + 1}"
        raise BadAnswer(
            f"the API server's answer to list {resource.qualified} has an object mignurse "
            f"cannot read ({which}: {type(exc).__name__}: {_inert(one_line(exc), 120)})"
        ) from None


def _text(value: object) -> str:
    """A resourceVersion or continue token as text; anything but a string or a number is ""."""
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""


def _json(data: bytes, what: str) -> Any:
    """A JSON answer parsed, or one line saying why it cannot be."""
    try:
        return orjson.loads(data)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        reason = why_not_json(data, exc)
    raise BadAnswer(f"the API server's answer to {what} cannot be read: {reason}")


def _lean_json(data: bytes, what: str) -> Any:
    """`_json(data)` of a node (or a watch event of one) without its `status.images`
    (`pages.without_images`); as it came where the cut does not give JSON."""
    lean = without_images(data)
    if lean is not data:
        with contextlib.suppress(orjson.JSONDecodeError, RecursionError):
            return orjson.loads(lean)
    return _json(data, what)


def _object(data: bytes, what: str) -> dict[str, Any]:
    found = _json(data, what)
    if not isinstance(found, dict):
        raise BadAnswer(f"the API server's answer to {what} is not a JSON object")
    return found


def _inert(text: str, limit: int) -> str:
    """Text from the server, at most `limit` characters of it, made inert (mignurse.inert):
    an error line can never drive the terminal it is printed on."""
    return inert(text[:limit]) + ("…" if len(text) > limit else "")


def _waited_for(exc: BaseException) -> str:
    """What a connection that was made waited for in vain ("the TLS handshake", "the
    request"), or "" when the failure is another one. urllib3 raises ReadTimeoutError only
    once its connection is up: the TCP connection was accepted and then no byte of the
    handshake or of the answer came within the timeout. A connection that could not be
    made at all (a ConnectTimeoutError: a dropped SYN, a host that is down) is no such
    wait, and stays unreachable."""
    reason = _innermost(exc)
    if not isinstance(reason, urllib3.exceptions.ReadTimeoutError):
        return ""
    cause = reason.__cause__ or reason.__context__
    return "the TLS handshake" if "handshake" in str(cause) else "the request"


def _innermost(exc: BaseException) -> BaseException:
    """The innermost of urllib3's wrapped failures (each holds the next as its `reason`)."""
    reason = exc
    while True:
        inner = getattr(reason, "reason", None)
        if not isinstance(inner, BaseException) or inner is reason:
            return reason
        reason = inner


def _reason_of(exc: BaseException) -> str:
    """The innermost cause of a urllib3 failure, in words a person can act on."""
    reason = _innermost(exc)
    text = one_line(reason)
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
