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
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _stop_on_signals(stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM set `stop`; stop.set takes a lock, so not in the handler."""
    wake = SignalWake(stop.set, name="stop")

    def request_stop(_signum: int, _frame: object) -> None:
        wake.poke()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)


def _watch_one(args: argparse.Namespace, state_dir: Path | None, out_dir: Path | None) -> int:
    from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available
    from mignurse.paths import history_file
    from mignurse.session import Recording

    client = connect(args)
    path = history_file(client.info, state_dir)
    _say_legacy(state_dir)
    karpenter = karpenter_available(client)
    if not karpenter:
        print(f"note: {KARPENTER_ABSENT_NOTICE}", file=sys.stderr)
    recording = Recording(client, clock=client.server_now)
    try:
        recording.open_history(path)  # another recorder on the same file: WriterBusy, one line
        stop = threading.Event()
        progress = _progress_to_stderr()
        _stop_on_signals(stop)
        progress(f"recording context {client.info.context!r} into {path}; Ctrl-C to stop")
        if out_dir is not None:
            _collect_into(recording, args, out_dir, access_for(args), progress)
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
) -> None:
    """`--auto-collect DIR` for one cluster's recording, said on its progress lines."""
    simulated = is_simulated(args.kubeconfig, recording.client.info.cluster)
    recording.collect_into(out_dir, access=access, simulated=simulated, report=progress)
    progress(f"auto-collect on: nodes under a repair clock go to {out_dir}")


def _watch_several(
    args: argparse.Namespace,
    contexts: list[str | None],
    state_dir: Path | None,
    out_dir: Path | None,
) -> int:
    """Every selected cluster recorded by this process, each on its own thread, into its own
    history with its own writer (`session.RecordingLoop`): one that cannot be reached, or
    whose recording fails, is one stderr line naming it and is tried again meanwhile;
    every progress line opens with its context. Ctrl-C or SIGTERM stops them all; the exit
    code is the worst a cluster was in when they stopped (0: every one recording)."""
    from mignurse.cluster.client import ClusterClient
    from mignurse.paths import history_file
    from mignurse.session import Recording, RecordingLoop

    access = access_for(args) if out_dir is not None else None
    _say_legacy(state_dir)
    stop = threading.Event()
    _stop_on_signals(stop)
    loops: list[RecordingLoop] = []
    for context in contexts:
        assert context is not None  # several contexts are always named
        progress = _progress_to_stderr(f"{context}: ")

        def connect_to(name: str) -> ClusterClient:
            client = ClusterClient.connect(kubeconfig=args.kubeconfig, context=name)
            client.on_busy = say_busy
            return client

        def start(recording: Recording, progress: Callable[[str], None] = progress) -> None:
            client = recording.client
            path = history_file(client.info, state_dir)
            recording.open_history(path)  # another recorder of this cluster: WriterBusy
            progress(f"recording context {client.info.context!r} into {path}")
            if out_dir is not None and access is not None:
                _collect_into(recording, args, out_dir, access, progress)

        loops.append(
            RecordingLoop(
                context,
                connect=connect_to,
                start=start,
                stop=stop,
                on_progress=progress,
                on_failure=_failure_reporter(context, args.command),
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
        thread.join()  # each ends once stopped, its bundles finished and its history closed
    return max(
        (_exit_code(loop.failure, args.command) for loop in loops if loop.failure is not None),
        default=EXIT_OK,
    )


def _failure_reporter(context: str, command: str | None) -> Callable[[BaseException, float], None]:
    """The one stderr line of a cluster that failed, said again only when its reason
    changes (a cluster down for hours is one line, not one per retry)."""
    from mignurse.cluster.fleet import STATUS_WORDS, classify

    said = [""]

    def report(exc: BaseException, retry_in: float) -> None:
        status, message, _login = classify(exc, context)
        message = message.removeprefix(f"context {context!r}: ")
        if _exit_code(exc, command) == EXIT_INTERNAL:
            line = f"mignurse: internal error: context {context!r}: {type(exc).__name__}: {message}"
        else:
            line = f"mignurse: error: context {context!r}: {STATUS_WORDS.get(status, status)}: "
            line += message
        if line != said[0]:
            said[0] = line
            sys.stderr.write(f"{line} (retried in the background, first in {retry_in:g} s)\n")
            sys.stderr.flush()

    return report


def _exit_code(exc: BaseException, command: str | None) -> int:
    """The exit code `exc` gives alone: a user error's (2), else a bug's."""
    from mignurse.cli import user_errors

    if isinstance(exc, user_errors(command)):
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    return EXIT_INTERNAL
