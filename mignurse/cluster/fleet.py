"""Several kube contexts at once: each one connected and read side by side, within a bound
and each under its own deadline (which contexts a selection names: `contexts.py`).

A face builds one `FleetRequest` (the kubeconfig, the contexts, what to read through each
connection, the per-cluster deadline) and hands it to `run_fleet`, which answers one
`Cluster` per context, in the order they were selected. One context is the one-element case
of the same path. A cluster that fails, hangs or is refused ends in its own status
(connected, credentials expired, RBAC denied, unreachable, timed out, error) and never holds
the others past its deadline.

A one-shot read of several clusters (`FleetRequest(processes=True)`: `nodes`, `diagnose`)
is spread over worker processes by `start_fleet`: one interpreter parses and models every
cluster's answers under one lock (ten clusters' 100 MB of node JSON held it for about two
seconds), so each process reads its share and sends each cluster back, pickled, as it ends.
The app keeps its connections open and reads in one process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
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
    NoAnswer,
    TooSlow,
    Unauthorized,
    Unreachable,
)
from mignurse.cluster.kubeconfig import (
    EXPIRED_WORDS,
    KubeconfigProblem,
    config_paths,
    merge,
    shared_merges,
    shown_url,
    write_data_files_in,
)
from mignurse.inert import inert
from mignurse.untrusted import Limit

T = TypeVar("T")

PARALLEL = 8  # connections opened and read at once; the others wait their turn
# Processes that read clusters side by side (this one included), at most one per CPU.
PROCESSES = Limit(
    "MIGNURSE_FLEET_PROCESSES", 8, "processes reading several clusters at once", "processes"
)
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
    CREDENTIALS_EXPIRED: EXPIRED_WORDS.removesuffix(": "),
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
    that uses it (the app's per-cluster sources, which watch for as long as they live);
    `processes`: `start_fleet` may read the clusters in worker processes (a one-shot read,
    whose `read` gives a value that pickles)."""

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
        processes: bool = False,
    ) -> None:
        self.keep = keep
        self.processes = processes
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
    clusters: list[Cluster[T]] = [Cluster(context or "") for context in request.contexts]
    return _run(request, clusters, list(range(len(clusters))), [], progress)


def start_fleet(
    request: FleetRequest[T], progress: Callable[[Cluster[T]], None] | None = None
) -> Callable[[], list[Cluster[T]]]:
    """`run_fleet(request, progress)` begun on a thread of its own; what is returned waits
    for it and gives its clusters, or raises what it raised. With `request.processes`, the
    clusters are first shared out among worker processes forked here (round robin: this
    process reads the first, the first worker the second…), while this process has no
    other thread (a fork copies only the thread that forks; a lock another one held would
    stay held), on Linux (elsewhere a fork without exec is not safe with the system's
    libraries). Each worker sends each cluster back as it ends."""
    from mignurse.cluster.load import begun

    clusters: list[Cluster[T]] = [Cluster(context or "") for context in request.contexts]
    workers = _worker_count(request)
    children: list[_Child] = []
    if workers > 1:
        import tempfile

        sys.stdout.flush()  # what is buffered is written once, not once per process
        sys.stderr.flush()
        started = time.monotonic()
        folder = tempfile.mkdtemp(prefix="mignurse-workers-")  # private to the user: 0700
        for share in range(1, workers):
            indexes = list(range(share, len(clusters), workers))
            children.append(_Child.fork(request, indexes, folder))
            for index in indexes:
                clusters[index]._started = started
    local = list(range(0, len(clusters), workers)) if children else list(range(len(clusters)))
    return begun(lambda: _run(request, clusters, local, children, progress))


def _worker_count(request: FleetRequest[T]) -> int:
    """How many processes read `request`'s clusters: one per CPU, at most PROCESSES (as many
    as MIGNURSE_FLEET_PROCESSES says, when it is set) and one per cluster."""
    if not request.processes or sys.platform != "linux" or threading.active_count() > 1:
        return 1
    wanted = PROCESSES.value()
    if not os.environ.get(PROCESSES.env, "").strip():
        wanted = min(wanted, os.cpu_count() or 1)
    return max(1, min(wanted, len(request.contexts)))


def _run(
    request: FleetRequest[T],
    clusters: list[Cluster[T]],
    local: list[int],
    children: list[_Child],
    progress: Callable[[Cluster[T]], None] | None,
) -> list[Cluster[T]]:
    """The clusters at `local` read on this process's threads, the others received from
    `children`, all waited for under the same deadline."""
    from mignurse.untrusted import CREDENTIAL_PLUGIN_SECONDS

    budget = (
        None
        if request.seconds is None
        else request.seconds + CREDENTIAL_PLUGIN_SECONDS.value() + GRACE_SECONDS
    )
    queue = [(clusters[i], request.contexts[i]) for i in reversed(local)]  # popped from the end
    try:
        with shared_merges():  # the kubeconfig read once for all of them
            for child in children:
                threading.Thread(
                    target=child.receive, args=(clusters,), name="mignurse-worker", daemon=True
                ).start()
            for _ in range(min(PARALLEL, len(queue))):
                threading.Thread(
                    target=_work,
                    args=(queue, request),
                    name="mignurse-cluster",
                    daemon=True,  # one left behind past its deadline does not keep the process
                ).start()
            _wait(clusters, budget, progress)
    finally:
        for child in children:
            child.end()
        if children:  # their kubeconfig's data files, whatever became of them
            shutil.rmtree(children[0].folder, ignore_errors=True)
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

    # Named before connecting, so that a cluster whose connection fails (its credential
    # plugin, its kubeconfig entry, the server) or is given up on still says which cluster
    # entry and server it is, wherever the kubeconfig names them.
    cluster.cluster, cluster.server = _named_in_kubeconfig(request.kubeconfig, context)
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


def _named_in_kubeconfig(kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """The cluster entry that `context` (None: the current context) names in the kubeconfig,
    and that entry's server as it may be shown; each "" where the kubeconfig does not say.
    The files are the ones `ClusterClient.connect` reads, in the merge it then reuses
    (`shared_merges`): no other file is read and nothing is run for it, and nothing is
    checked here that connecting checks (a refused entry's names are said beside its
    refusal)."""
    try:
        merged = merge(*config_paths(kubeconfig))
    except KubeconfigProblem:  # connecting says why, in its own words
        return "", ""
    entry = merged.contexts.get(context or merged.current)
    name = entry.body.get("cluster") if entry is not None else None
    if not isinstance(name, str) or not name:
        return "", ""
    found = merged.clusters.get(name)
    server = found.body.get("server") if found is not None else None
    # as connecting shows it: without trailing slashes, user info and query values masked
    return name, shown_url(server.rstrip("/")) if isinstance(server, str) and server else ""


# -- worker processes -----------------------------------------------------------------------

# What a worker sends of each cluster (the rest of a Cluster is this process's own).
_SENT = ("context", "cluster", "server", "status", "message", "login", "version",
         "clock_skew", "now", "result", "error")  # fmt: skip
_HEADER = 8  # bytes of each message's length


class _Child:
    """A worker process reading some of the clusters, and the pipe its clusters come on."""

    def __init__(self, pid: int, pipe: int, indexes: list[int], folder: str) -> None:
        self.pid = pid
        self.pipe = pipe
        self.indexes = indexes  # the clusters it reads, by their place in the selection
        self.folder = folder  # the files of its kubeconfig's data (every worker's)
        self._reaped = False

    @classmethod
    def fork(cls, request: FleetRequest[T], indexes: list[int], folder: str) -> _Child:
        """The worker, forked; the files its kubeconfig's data is written to go in `folder`
        (a worker ends without exit functions, killed if given up on: this process removes
        the folder, `_run`)."""
        readable, writable = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: it never returns
            code = 1
            try:
                os.close(readable)
                _die_with(parent)
                write_data_files_in(folder)
                # Nothing of the command's output is a worker's: a `| jq` never waits on one.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                _serve(request, indexes, writable)
                code = 0
            except KeyboardInterrupt:
                code = 130
            except BaseException:  # noqa: BLE001 - said by the clusters it did not send
                pass
            finally:
                os._exit(code)
        os.close(writable)
        return cls(pid, readable, indexes, folder)

    def receive(self, clusters: list[Cluster[T]]) -> None:
        """Each cluster as it comes, until the worker ends; a cluster it never sent ends
        FAILED, saying how the worker ended."""
        import pickle

        with os.fdopen(self.pipe, "rb") as pipe:
            while True:
                head = pipe.read(_HEADER)
                if len(head) < _HEADER:
                    break
                body = pipe.read(int.from_bytes(head, "big"))
                try:
                    position, state = pickle.loads(body)
                    cluster = clusters[self.indexes[position]]
                except Exception:  # noqa: BLE001 - a message cut short: the worker died
                    break
                if not cluster._done.is_set():  # not given up on meanwhile
                    for name in _SENT:
                        setattr(cluster, name, state[name])
                    cluster._done.set()
        how = self._ended()
        for index in self.indexes:
            cluster = clusters[index]
            if not cluster._done.is_set():
                cluster.status = FAILED
                cluster.message = f"the process reading it ended ({how}) before it answered"
                cluster.error = ClusterError(cluster.message)  # the OOM killer's, say
                cluster._done.set()

    def _ended(self) -> str:
        try:
            _pid, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "exit status unknown"
        self._reaped = True
        if os.WIFSIGNALED(status):
            return f"signal {os.WTERMSIG(status)}"
        return f"exit status {os.waitstatus_to_exitcode(status)}"

    def end(self) -> None:
        """The worker stopped, if it still reads a cluster given up on, and gone once this
        returns (it writes nothing more)."""
        if not self._reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, 9)  # SIGKILL: its requests in flight end with it
            with contextlib.suppress(ChildProcessError):  # (reaped by its reader meanwhile)
                os.waitpid(self.pid, 0)


def _die_with(parent: int) -> None:
    """A worker ends when the process that forked it does (Linux's PR_SET_PDEATHSIG, which
    follows the thread that forked: the only one, `_worker_count` makes sure)."""
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before that was asked
        os._exit(1)


def _serve(request: FleetRequest[T], indexes: list[int], pipe: int) -> None:
    """In a worker: the clusters at `indexes` read, each written to `pipe` as it ends."""
    mine = FleetRequest(
        request.kubeconfig,
        tuple(request.contexts[i] for i in indexes),
        request.read,
        seconds=request.seconds,
        on_busy=request.on_busy,
        versions=request.versions,
    )
    clusters: list[Cluster[T]] = [Cluster(context or "") for context in mine.contexts]
    positions = {id(cluster): position for position, cluster in enumerate(clusters)}

    def send(cluster: Cluster[T]) -> None:
        body = _pickled(positions[id(cluster)], cluster)
        message = memoryview(len(body).to_bytes(_HEADER, "big") + body)
        while message:
            message = message[os.write(pipe, message) :]

    _run(mine, clusters, list(range(len(clusters))), [], send)


def _pickled(position: int, cluster: Cluster[T]) -> bytes:
    import pickle

    state = {name: getattr(cluster, name) for name in _SENT}
    state["error"] = _portable(cluster.error)
    try:
        return pickle.dumps((position, state), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - a read whose value does not pickle is a bug
        state.update(result=None, status=FAILED)
        state["message"] = f"its answer could not be sent between processes: {exc!r}"
        state["error"] = RuntimeError(state["message"])
        return pickle.dumps((position, state), protocol=pickle.HIGHEST_PROTOCOL)


def _portable(error: BaseException | None) -> BaseException | None:
    """`error` as the other process can rebuild it: an exception whose `__init__` takes
    other arguments than its `args` (Forbidden's verb and resource) is rebuilt without
    calling it; one whose attributes do not pickle keeps its class and message."""
    import pickle

    if error is None:
        return None
    for state in (error.__dict__, {}):
        rebuilt = _Rebuilt(type(error), error.args, state)
        try:
            pickle.dumps(rebuilt, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - the next, plainer form is tried
            continue
        return rebuilt  # type: ignore[return-value]
    kind = ClusterError if isinstance(error, ClusterError) else RuntimeError
    return kind(f"{type(error).__name__}: {error}")


class _Rebuilt:
    """Pickles as the exception it names, made again without its `__init__`."""

    def __init__(
        self, kind: type[BaseException], args: tuple[object, ...], state: dict[str, object]
    ) -> None:
        self.kind, self.args, self.state = kind, args, state

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (self.kind, self.args, self.state)


def _rebuild(
    kind: type[BaseException], args: tuple[object, ...], state: dict[str, object]
) -> BaseException:
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


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
        # the context the loader names is said once, at the line's start
        said = message.removeprefix(f"context {context!r}: ") if context else message
        if exc.kind == "timeout":
            return TIMED_OUT, said, ""
        if exc.kind == "expired":  # the status is said apart: the line goes on from the hint
            return CREDENTIALS_EXPIRED, said.removeprefix(EXPIRED_WORDS), exc.login
        # Another failure (a missing profile, no such command): a login would not help, so
        # none is offered; the plugin's own words say what is wrong.
        return FAILED, said, ""
    if isinstance(exc, Unauthorized):
        return CREDENTIALS_EXPIRED, message, ""
    if isinstance(exc, Forbidden):  # the status says it: "RBAC denied: cannot list nodes …"
        return RBAC_DENIED, message.removeprefix("RBAC refused: "), ""
    if isinstance(exc, NoAnswer):  # connected, then nothing came: the server is not answering
        return TIMED_OUT, message, ""
    if isinstance(exc, Unreachable):
        return UNREACHABLE, message, ""
    if isinstance(exc, TooSlow):
        return TIMED_OUT, message, ""
    return FAILED, message, ""
