"""`mignurse watch`: record lifecycles and events into the history until Ctrl-C.

What is recorded and auto-collected is the session's `Recording` (session.py), the same the
app runs in the background; this module is its terminal face: the flags, the timestamped
progress lines on stderr, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from mignurse.cli.common import (
    EXIT_OK,
    UserError,
    access_for,
    check_ssm_upload,
    check_state_folder,
    connect,
    connection_options,
    is_simulated,
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
    import threading
    from datetime import UTC, datetime

    from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available
    from mignurse.paths import history_file, legacy_history, state_home
    from mignurse.session import Recording

    seconds_option("--progress-every", args.progress_every)
    check_ssm_upload(args)
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else None
    check_state_folder(state_dir or state_home(), "--state-dir" if state_dir else "XDG_STATE_HOME")
    client = connect(args)
    path = history_file(client.info, state_dir)
    legacy = legacy_history(state_dir)
    if legacy is not None:
        print(f"note: {LEGACY_NOTE.format(legacy)}", file=sys.stderr)
    karpenter = karpenter_available(client)
    if not karpenter:
        print(f"note: {KARPENTER_ABSENT_NOTICE}", file=sys.stderr)
    recording = Recording(client, clock=client.server_now)
    try:
        recording.open_history(path)  # another recorder on the same file: WriterBusy, one line
        stop = threading.Event()

        def progress(line: str) -> None:
            print(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {line}", file=sys.stderr, flush=True)

        wake = SignalWake(stop.set, name="stop")  # stop.set takes a lock: not in the handler

        def request_stop(_signum: int, _frame: object) -> None:
            wake.poke()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        progress(f"recording context {client.info.context!r} into {path}; Ctrl-C to stop")
        auto_collect = getattr(args, "auto_collect", None)
        out_dir = Path(auto_collect).expanduser() if auto_collect else None
        if out_dir is not None and not out_dir.is_dir():
            raise UserError(f"--auto-collect {out_dir}: no such folder")
        if out_dir is not None:
            simulated = is_simulated(args.kubeconfig, client.info.cluster)
            recording.collect_into(
                out_dir, access=access_for(args), simulated=simulated, report=progress
            )
            progress(f"auto-collect on: nodes under a repair clock go to {out_dir}")
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
