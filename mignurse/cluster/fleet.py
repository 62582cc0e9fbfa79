"""Several kube contexts at once: each one connected and read side by side, within a bound
and each under its own deadline (which contexts a selection names: `contexts.py`).

A face builds one `FleetRequest` (the kubeconfig, the contexts, what to read through each
connection, the per-cluster deadline) and hands it to `run_fleet`, which answers one
`Cluster` per context, in the order they were selected. One context is the one-element case
of the same path. A cluster that fails, hangs or is refused ends in its own status
(connected, credentials expired, RBAC denied, unreachable, timed out, error) and never holds
the others past its deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Generic, TypeVar

from mignurse.cluster.client import (
    ClusterClient,
    ClusterError,
    CredentialsFailed,
    Forbidden,
    TooSlow,
    Unauthorized,
    Unreachable,
)
from mignurse.cluster.kubeconfig import shared_merges
from mignurse.inert import inert

T = TypeVar("T")

PARALLEL = 8  # connections opened and read at once; the others wait their turn
# Past its own deadline (and the credential plugin's), a cluster's outcome is not waited for.
GRACE_SECONDS = 5.0

CONNECTED = "connected"
CREDENTIALS_EXPIRED = "credentials-expired"
RBAC_DENIED = "rbac-denied"
UNREACHABLE = "unreachable"
TIMED_OUT = "timed-out"
FAILED = "error"  # any other problem: a kubeconfig entry, an answer refused, a bug
STATUS_WORDS = {
    CONNECTED: "connected",
    CREDENTIALS_EXPIRED: "credentials expired",
    RBAC_DENIED: "RBAC denied",
    UNREACHABLE: "unreachable",
    TIMED_OUT: "timed out",
    FAILED: "failed",
}


# -- connecting and reading -----------------------------------------------------------------


class Cluster(Generic[T]):
    """One selected context: how its connection ended and what was read through it. The
    faces hold a list of these; `result` is the request's read, set when `status` is
    CONNECTED; `error` is what ended it otherwise. (A plain class: a dataclass's generated
    methods are compiled as the module loads, a cost on every `nodes` and `diagnose`.)"""

    def __init__(self, context: str) -> None:
        self.context = context  # as selected ("" for the current context, until connected)
        self.cluster = ""  # the kubeconfig's cluster entry
        self.server = ""  # its API server, as it may be shown
        self.status = ""
        self.message = ""  # one line: why it is not connected
        self.login = ""  # for expired credentials: the command that renews them
        self.version = ""  # the API server's gitVersion ("" when it did not say)
        self.clock_skew: float | None = None  # seconds its clock is ahead of this machine's
        self.now: datetime | None = None  # the API server's clock when the read ended
        self.result: T | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._started: float | None = None
        self._client: ClusterClient | None = None

    def __repr__(self) -> str:
        return f"Cluster({self.context!r}, {self.status or 'pending'})"

    @property
    def connected(self) -> bool:
        return self.status == CONNECTED

    @property
    def status_words(self) -> str:
        return STATUS_WORDS.get(self.status, self.status)


class FleetRequest(Generic[T]):
    """What a face asks of every selected cluster: `read` runs on each connection (on a
    thread of its own) and its value becomes that Cluster's `result`; `seconds` is each
    cluster's deadline for its reads (None: none); `on_busy` is told of a Retry-After
    wait, one line; `versions`: read each API server's `/version` beside (a request, and
    a TLS handshake, that a face which shows no version is spared); `keep`: a connection
    whose read succeeded stays open, without a deadline from then on, for the `result`
    that uses it (the app's per-cluster sources, which watch for as long as they live)."""

    def __init__(
        self,
        kubeconfig: str | None,
        contexts: tuple[str | None, ...],
        read: Callable[[ClusterClient], T],
        *,
        seconds: int | None = None,
        on_busy: Callable[[str], None] | None = None,
        versions: bool = True,
        keep: bool = False,
    ) -> None:
        self.keep = keep
        self.kubeconfig = kubeconfig
        self.contexts = contexts
        self.read = read
        self.seconds = seconds
        self.on_busy = on_busy
        self.versions = versions


def run_fleet(
    request: FleetRequest[T], progress: Callable[[Cluster[T]], None] | None = None
) -> list[Cluster[T]]:
    """Every cluster of `request` connected and read, at most PARALLEL at once (by as many
    worker threads, however many clusters there are), each under
    its own deadline; `progress` is told of each cluster as it ends (on the caller's
    thread). A cluster still unanswered past its deadline, its credential plugin's and
    GRACE_SECONDS ends TIMED_OUT and is left behind."""
    from mignurse.untrusted import CREDENTIAL_PLUGIN_SECONDS

    clusters: list[Cluster[T]] = [Cluster(context or "") for context in request.contexts]
    budget = (
        None
        if request.seconds is None
        else request.seconds + CREDENTIAL_PLUGIN_SECONDS.value() + GRACE_SECONDS
    )
    queue = list(zip(clusters, request.contexts, strict=True))
    queue.reverse()  # popped from the end: in the order selected
    with shared_merges():  # the kubeconfig read once for all of them
        for _ in range(min(PARALLEL, len(queue))):
            threading.Thread(
                target=_work,
                args=(queue, request),
                name="mignurse-cluster",
                daemon=True,  # one left behind past its deadline does not keep the process
            ).start()
        _wait(clusters, budget, progress)
    return clusters


def _wait(
    clusters: list[Cluster[T]],
    budget: float | None,
    progress: Callable[[Cluster[T]], None] | None,
) -> None:
    waiting = list(clusters)
    while waiting:
        for cluster in list(waiting):
            if cluster._done.is_set():
                waiting.remove(cluster)
                if progress is not None:
                    progress(cluster)
            elif budget is not None and _overdue(cluster, budget):
                _give_up(cluster, budget)
                waiting.remove(cluster)
                if progress is not None:
                    progress(cluster)
        if waiting:
            waiting[0]._done.wait(0.05)


def _overdue(cluster: Cluster[T], budget: float) -> bool:
    started = cluster._started
    return started is not None and time.monotonic() - started > budget


def _give_up(cluster: Cluster[T], budget: float) -> None:
    client = cluster._client
    if client is not None:
        client.close()  # ends its requests in flight
    cluster._done.set()  # what its thread still finds is not kept
    cluster.status = TIMED_OUT
    name = cluster.context or "(current)"
    cluster.message = f"context {name!r} gave no answer within {budget:g} s"
    cluster.error = TooSlow(cluster.message)


def _work(queue: list[tuple[Cluster[T], str | None]], request: FleetRequest[T]) -> None:
    """One of at most PARALLEL workers: the next cluster of `queue` until none is left."""
    while True:
        try:
            cluster, context = queue.pop()  # atomic: each cluster to one worker
        except IndexError:
            return
        cluster._started = time.monotonic()
        try:
            _read_one(cluster, context, request)
        except BaseException as exc:  # noqa: BLE001 - becomes the cluster's status
            if not cluster._done.is_set():
                cluster.error = exc
                cluster.status, cluster.message, cluster.login = classify(exc, cluster.context)
        finally:
            cluster._done.set()


def _read_one(cluster: Cluster[T], context: str | None, request: FleetRequest[T]) -> None:
    from mignurse.cluster.load import begun

    client = ClusterClient.connect(kubeconfig=request.kubeconfig, context=context)
    cluster._client = client
    kept = False
    cluster.context = client.info.context
    cluster.cluster = client.info.cluster
    cluster.server = client.info.server
    try:
        busy = request.on_busy
        if busy is not None and len(request.contexts) > 1:  # whose server is busy
            client.on_busy = lambda line: busy(f"{cluster.context}: {line}")
        else:
            client.on_busy = busy
        if request.seconds is not None:
            client.limit_command(request.seconds)
        version_read = begun(lambda: _version(client)) if request.versions else (lambda: "")
        result = request.read(client)
        cluster.version = version_read()
        cluster.now = client.server_now()
        cluster.clock_skew = round((cluster.now - datetime.now(UTC)).total_seconds(), 1) + 0.0
        kept = request.keep
    finally:
        if not kept:
            client.close()
    if not cluster._done.is_set():  # not given up on meanwhile
        if kept:
            client.unlimit_command()
        cluster.result = result
        cluster.status = CONNECTED
    elif kept:
        client.close()


def _version(client: ClusterClient) -> str:
    """The API server's `/version` gitVersion; "" when it does not answer it."""
    try:
        document = client.get_json("/version")
    except ClusterError:
        return ""
    version = document.get("gitVersion") if isinstance(document, dict) else None
    return inert(version[:80]) if isinstance(version, str) else ""


def classify(exc: BaseException, context: str = "") -> tuple[str, str, str]:
    """A cluster's status, its one line, and the command that renews its login, from what
    ended it (reading `context`)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, CredentialsFailed):
        if exc.kind == "timeout":
            return TIMED_OUT, message, ""
        if exc.kind == "failed":
            # the hint first; the context the loader names is said once, at the line's start
            said = message.removeprefix(f"context {context!r}: ") if context else message
            run = f"run `{exc.login}`: " if exc.login else ""
            return CREDENTIALS_EXPIRED, f"{run}{said}", exc.login
        return FAILED, message, ""
    if isinstance(exc, Unauthorized):
        return CREDENTIALS_EXPIRED, message, ""
    if isinstance(exc, Forbidden):
        return RBAC_DENIED, message, ""
    if isinstance(exc, Unreachable):
        return UNREACHABLE, message, ""
    if isinstance(exc, TooSlow):
        return TIMED_OUT, message, ""
    return FAILED, message, ""
