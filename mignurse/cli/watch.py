"""`mignurse watch`: record lifecycles and events into the history until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
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


def _shells_for(args: argparse.Namespace, client: Any, sandboxes: Path) -> Any:
    from mignurse.collect.transports import shell_factory

    simulated = is_simulated(args.kubeconfig, client.info.cluster)
    return shell_factory(client, access_for(args), sandboxes=sandboxes, simulated=simulated)


def cmd_watch(args: argparse.Namespace) -> int:
    import threading
    from datetime import UTC, datetime

    from mignurse.cluster.history import HistoryStore, default_history_path, run_recorder
    from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available

    seconds_option("--progress-every", args.progress_every)
    check_ssm_upload(args)
    path = default_history_path(Path(args.state_dir).expanduser() if args.state_dir else None)
    check_state_folder(path.parent, "--state-dir" if args.state_dir else "XDG_STATE_HOME")
    client = connect(args)
    karpenter = karpenter_available(client)
    if not karpenter:
        print(f"note: {KARPENTER_ABSENT_NOTICE}", file=sys.stderr)
    store = HistoryStore(path)  # another recorder on the same file: WriterBusy, one line
    stop = threading.Event()

    def progress(line: str) -> None:
        print(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {line}", file=sys.stderr, flush=True)

    def request_stop(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    progress(f"recording context {client.info.context!r} into {path}; Ctrl-C to stop")
    auto_collect = getattr(args, "auto_collect", None)
    out_dir = Path(auto_collect).expanduser() if auto_collect else None
    if out_dir is not None and not out_dir.is_dir():
        raise UserError(f"--auto-collect {out_dir}: no such folder")
    try:
        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            collector = None
            if out_dir is not None:
                from mignurse.collect.auto import AutoCollector

                collector = AutoCollector(
                    client,
                    out_dir=out_dir,
                    shell_for=_shells_for(args, client, Path(sandboxes)),
                    clock=client.server_now,
                    report=progress,
                )
                progress(f"auto-collect on: nodes under a repair clock go to {out_dir}")
            run_recorder(
                client,
                store,
                context=client.info.context,
                karpenter=karpenter,
                stop=stop,
                on_progress=progress,
                progress_every=args.progress_every,
                on_tick=collector.tick if collector is not None else None,
            )
            if collector is not None:
                collector.close()  # let running collections finish their bundles
    finally:
        store.close()
        client.close()
    return EXIT_OK
