"""`mignurse watch`: record lifecycles and events into the history until Ctrl-C.

What is recorded and auto-collected is the session's `Recording` (session.py), the same the
app runs in the background; this module is its terminal face: the flags, the timestamped
progress lines on stderr, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mignurse import joins
from mignurse.cli.common import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    UserError,
    access_for,
    check_ssm_upload,
    check_state_folder,
    connect,
    connection_options,
    is_simulated,
    say_busy,
    seconds_option,
    ssm_upload_option,
)
from mignurse.cli.signalwake import SignalWake

if TYPE_CHECKING:  # the kubernetes client loads when a watch connects, not for `watch --help`
    from mignurse.cluster.client import ClusterClient, Listing, Resource, WatchEvent

T = TypeVar("T")

# Said once as `watch` starts, while the single history of earlier versions is there.
LEGACY_NOTE = (
    "{} is the single history of earlier versions: nothing writes it any more, and a "
    "cluster without its own file under history/ yet still reads its part of it"
)


def add_parser(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="record node and NodeClaim lifecycles and events into the history, until Ctrl-C",
    )
    connection_options(watch, top=False)
    watch.add_argument(
        "--state-dir",
        help="where the history lives (default: $XDG_STATE_HOME/mignurse, ~/.local/state/mignurse)",
    )
    watch.add_argument(
        "--auto-collect",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="collect each node into DIR as soon as its repair clock starts (before Karpenter "
        "deletes it): over the simulator's sandboxes, SSM with --bucket, else SSH",
    )
    watch.add_argument("--bucket", help="with --auto-collect: SSM through this S3 bucket")
    ssm_upload_option(watch)
    watch.add_argument(
        "--progress-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a progress line this often (default: 60)",
    )


def cmd_watch(args: argparse.Namespace) -> int:
    from mignurse.cluster.contexts import select_contexts, several
    from mignurse.paths import state_home

    seconds_option("--progress-every", args.progress_every)
    check_ssm_upload(args)
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else None
    check_state_folder(state_dir or state_home(), "--state-dir" if state_dir else "XDG_STATE_HOME")
    auto_collect = getattr(args, "auto_collect", None)
    out_dir = Path(auto_collect).expanduser() if auto_collect else None
    if out_dir is not None and not out_dir.is_dir():
        raise UserError(f"--auto-collect {out_dir}: no such folder")
    all_contexts = bool(getattr(args, "all_contexts", False))
    if several(args.context, all_contexts):
        contexts = select_contexts(args.kubeconfig, args.context, all_contexts)
        if len(contexts) > 1:
            return _watch_several(args, contexts, state_dir, out_dir)
        args = argparse.Namespace(**{**vars(args), "context": contexts[0], "all_contexts": False})
    return _watch_one(args, state_dir, out_dir)


def _say_legacy(state_dir: Path | None) -> None:
    from mignurse.paths import legacy_history

    legacy = legacy_history(state_dir)
    if legacy is not None:
        print(f"note: {LEGACY_NOTE.format(legacy)}", file=sys.stderr)


def _progress_to_stderr(prefix: str = "") -> Callable[[str], None]:
    """Timestamped progress lines on stderr, each opening with `prefix` (the cluster's)."""
    from datetime import UTC, datetime

    def progress(line: str) -> None:
        # one write: several clusters' threads print side by side, a whole line each
        sys.stderr.write(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {prefix}{line}\n")
        sys.stderr.flush()

    return progress


STOP_NOW_WORDS = "Ctrl-C again"


def _stop_on_signals(stop: threading.Event, stop_now: threading.Event | None = None) -> None:
    """Ctrl-C and SIGTERM set `stop`; once it is set, they set `stop_now` (the collections
    still running end at once, their bundles marked interrupted), and say so. Event.set takes
    a lock, so not in the handler."""

    def act() -> None:
        if not stop.is_set() or stop_now is None:
            stop.set()
        elif not stop_now.is_set():
            _progress_to_stderr()(
                "stopping now: collections still running end with what they have, their "
                "bundles marked interrupted"
            )
            stop_now.set()

    wake = SignalWake(act, name="stop")

    def request_stop(_signum: int, _frame: object) -> None:
        wake.poke()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)


def _watch_one(args: argparse.Namespace, state_dir: Path | None, out_dir: Path | None) -> int:
    from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available
    from mignurse.paths import history_file
    from mignurse.session import Recording

    client = connect(args)
    _check_nodes(client)  # RBAC refusing the nodes: one line and exit 2, as for a dead server
    path = history_file(client.info, state_dir)
    _say_legacy(state_dir)
    karpenter = karpenter_available(client)
    if not karpenter:
        print(f"note: {KARPENTER_ABSENT_NOTICE}", file=sys.stderr)
    recording = Recording(client, clock=client.server_now)
    try:
        recording.open_history(path)  # another recorder on the same file: WriterBusy, one line
        stop, stop_now = threading.Event(), threading.Event()
        progress = _progress_to_stderr()
        _stop_on_signals(stop, stop_now if out_dir is not None else None)
        progress(f"recording context {client.info.context!r} into {path}; Ctrl-C to stop")
        if out_dir is not None:
            _collect_into(recording, args, out_dir, access_for(args), progress, stop_now)
        recording.run(
            karpenter=karpenter,
            stop=stop,
            on_progress=progress,
            progress_every=args.progress_every,
        )
    finally:
        recording.close()  # running collections finish their bundles first
        client.close()
    return EXIT_OK


def _collect_into(
    recording: Any,
    args: argparse.Namespace,
    out_dir: Path,
    access: Any,
    progress: Callable[[str], None],
    stop_now: threading.Event,
) -> None:
    """`--auto-collect DIR` for one cluster's recording, said on its progress lines."""
    simulated = is_simulated(args.kubeconfig, recording.client.info.cluster)
    recording.collect_into(
        out_dir,
        access=access,
        simulated=simulated,
        report=progress,
        stop_now=stop_now,
        stop_now_words=STOP_NOW_WORDS,
    )
    progress(f"auto-collect on: nodes under a repair clock go to {out_dir}")


def _check_nodes(client: ClusterClient) -> None:
    """One small list of the nodes, as the app checks a cluster before its first screen: a
    cluster whose nodes RBAC refuses fails here, before anything is recorded, as one that
    cannot be reached fails to connect. (Its watches would otherwise take the refusal for
    a watch that broke, and retry it for as long as the watch runs.)"""
    from mignurse.cluster.client import NODES

    next(client.list_pages(NODES, limit=1), None)


def _watch_several(
    args: argparse.Namespace,
    contexts: list[str | None],
    state_dir: Path | None,
    out_dir: Path | None,
) -> int:
    """Every selected cluster recorded by this process, each on its own thread, into its own
    history with its own writer (`session.RecordingLoop`): one that cannot be reached, whose
    nodes RBAC refuses, or whose recording fails, is one stderr line naming it and is tried
    again meanwhile; every progress line opens with its context. Ctrl-C or SIGTERM stops
    them all; the exit code is the worst a cluster was in when they stopped (0: every one
    recording, its lists and watches answered)."""
    from mignurse.paths import history_file
    from mignurse.session import Recording, RecordingLoop

    access = access_for(args) if out_dir is not None else None
    _say_legacy(state_dir)
    stop, stop_now = threading.Event(), threading.Event()
    _stop_on_signals(stop, stop_now if out_dir is not None else None)
    loops: list[RecordingLoop] = []
    lines: dict[str, _FailureLines] = {}
    reads: dict[str, _Reads] = {}  # each cluster's, of its latest connection
    for context in contexts:
        assert context is not None  # several contexts are always named
        progress = _progress_to_stderr(f"{context}: ")
        lines[context] = _FailureLines(context, args.command)

        def connect_to(name: str) -> ClusterClient:
            reads[name] = _Reads(stop, refused=lines[name].refused)
            client = _connect_recording(args.kubeconfig, name, reads[name])
            client.on_busy = say_busy
            return client

        def start(recording: Recording, progress: Callable[[str], None] = progress) -> None:
            client = recording.client
            _check_nodes(client)
            path = history_file(client.info, state_dir)
            recording.open_history(path)  # another recorder of this cluster: WriterBusy
            progress(f"recording context {client.info.context!r} into {path}")
            if out_dir is not None and access is not None:
                _collect_into(recording, args, out_dir, access, progress, stop_now)

        loops.append(
            RecordingLoop(
                context,
                connect=connect_to,
                start=start,
                stop=stop,
                on_progress=progress,
                on_failure=lines[context],
                progress_every=args.progress_every,
            )
        )
    _progress_to_stderr()(
        f"recording {len(loops)} contexts ({', '.join(repr(c) for c in contexts)}); Ctrl-C to stop"
    )
    threads = [
        threading.Thread(target=loop.run, name=f"watch-{loop.context}", daemon=True)
        for loop in loops
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        joins.join(thread)  # each ends once stopped, its bundles finished and its history closed
    worst = EXIT_OK
    for loop in loops:
        failure = loop.failure
        if failure is None and loop.context in reads:
            # Recording, but a list or watch it needs was still failing: the cluster was
            # not being recorded whole, and its line says so now if it has not already.
            failure = reads[loop.context].failure()
            if failure is not None:
                lines[loop.context].at_stop(failure)
        if failure is not None:
            worst = max(worst, _exit_code(failure, args.command))
    return worst


class _Reads:
    """What one connection of a recording could not read: for each resource it lists and
    watches whole, the failure that ended its latest list or watch, until one succeeds
    again. The recording retries its watches itself and goes on, so without this a cluster
    whose reads keep failing would count as recording for as long as the watch runs."""

    def __init__(self, stop: threading.Event, *, refused: Callable[[BaseException], None]) -> None:
        self._stop = stop
        self._refused = refused  # told at once of an RBAC refusal: it will not pass by itself
        self._lock = threading.Lock()  # each resource is read on a thread of its own
        self._failing: dict[str, BaseException] = {}

    def failed(self, plural: str, exc: BaseException) -> None:
        from mignurse.cluster.client import Forbidden

        if self._stop.is_set():
            return  # a watch cut off because the recording stops is no failure of the cluster
        with self._lock:
            self._failing[plural] = exc
        if isinstance(exc, Forbidden):
            self._refused(exc)

    def answered(self, plural: str) -> None:
        with self._lock:
            self._failing.pop(plural, None)

    def failure(self) -> BaseException | None:
        """One failure still standing (the first resource's to fail), or None."""
        with self._lock:
            return next(iter(self._failing.values()), None)


def _connect_recording(kubeconfig: str | None, context: str, reads: _Reads) -> ClusterClient:
    """A connection to `context` that tells `reads` how each list and watch of a whole
    resource the recording watches ended: its own reads. The other reads over the same
    connection (auto-collect's: a node's pods, the GPU operator's ClusterPolicy, which is a 404
    on a cluster without the operator) are the collection's to handle, not the recording's."""
    from mignurse.cluster.client import ClusterClient, ClusterError, Expired
    from mignurse.cluster.watcher import WATCHED_PLURALS

    def recorded(resource: Resource, selectors: dict[str, Any]) -> bool:
        return not selectors and resource.plural in WATCHED_PLURALS

    class RecordingClient(ClusterClient):
        def list(
            self,
            resource: Resource,
            parse: Callable[[dict[str, Any]], T],
            *,
            cut: bool = False,
            **selectors: Any,
        ) -> Listing[T]:
            try:
                listing = super().list(resource, parse, cut=cut, **selectors)
            except Expired:
                raise  # a list restarted at once, as a watch too old is
            except ClusterError as exc:
                if recorded(resource, selectors):
                    reads.failed(resource.plural, exc)
                raise
            if recorded(resource, selectors):
                reads.answered(resource.plural)
            return listing

        def watch(
            self,
            resource: Resource,
            resource_version: str,
            *,
            timeout_seconds: int = 300,
            on_open: Callable[[Any], None] | None = None,
            **selectors: Any,
        ) -> Iterator[WatchEvent]:
            def opened(stream: Any) -> None:
                if recorded(resource, selectors):
                    reads.answered(resource.plural)
                if on_open is not None:
                    on_open(stream)

            try:
                yield from super().watch(
                    resource,
                    resource_version,
                    timeout_seconds=timeout_seconds,
                    on_open=opened,
                    **selectors,
                )
            except Expired:
                raise  # listed again at once
            except ClusterError as exc:
                if recorded(resource, selectors):
                    reads.failed(resource.plural, exc)
                raise

    return RecordingClient.connect(kubeconfig=kubeconfig, context=context)


class _FailureLines:
    """The one stderr line of a cluster that failed, said again only when its reason
    changes (a cluster down for hours is one line, not one per retry). Called as the
    recording loop's `on_failure`."""

    def __init__(self, context: str, command: str | None) -> None:
        self.context = context
        self.command = command
        self._said = ""
        self._lock = threading.Lock()  # the loop's thread, the watches' and the main one say it

    def __call__(self, exc: BaseException, retry_in: float) -> None:
        self._say(exc, f"retried in the background, first in {retry_in:g} s")

    def refused(self, exc: BaseException) -> None:
        """RBAC refused a resource the recording watches: it goes on with the others and
        tries that one again at the watch's slowest pace."""
        from mignurse.cluster.watcher import MAX_BACKOFF_SECONDS

        self._say(exc, f"retried in the background, first in {MAX_BACKOFF_SECONDS:g} s")

    def at_stop(self, exc: BaseException) -> None:
        self._say(exc, "still failing when stopped")

    def _say(self, exc: BaseException, after: str) -> None:
        from mignurse.cluster.fleet import STATUS_WORDS, classify

        context = self.context
        status, message, _login = classify(exc, context)
        message = message.removeprefix(f"context {context!r}: ")
        if _exit_code(exc, self.command) == EXIT_INTERNAL:
            line = f"mignurse: internal error: context {context!r}: {type(exc).__name__}: {message}"
        else:
            line = f"mignurse: error: context {context!r}: {STATUS_WORDS.get(status, status)}: "
            line += message
        with self._lock:
            if line == self._said:
                return
            self._said = line
            sys.stderr.write(f"{line} ({after})\n")
            sys.stderr.flush()


def _exit_code(exc: BaseException, command: str | None) -> int:
    """The exit code `exc` gives alone: a user error's (2), else a bug's."""
    from mignurse.cli import user_errors

    if isinstance(exc, user_errors(command)):
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    return EXIT_INTERNAL
