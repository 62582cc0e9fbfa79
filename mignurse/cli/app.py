"""The terminal app: on the current context (no command), on a bundle (`open`), on a
simulated cluster (`demo`)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mignurse.cli.common import EXIT_OK, UserError, access_for, connect, positive_speed

DEMO_DEFAULT_SCENARIO = "dcgm-repair-loop"
DEMO_DEFAULT_SPEED = 10.0


def add_parsers(sub: Any) -> None:
    opened = sub.add_parser(
        "open",
        help="the app on a support bundle, read-only, for post-mortems and vendor support",
        description="Shows a bundle written by `mignurse collect` (or a folder of `kubectl get "
        "-o json` dumps) in the terminal app, judged at the moment it was collected: the "
        "fleet view, each node with its timeline and the evidence collected on it. Nothing "
        "can be changed from it.",
    )
    opened.add_argument("bundle", metavar="BUNDLE", help="a .tar.gz bundle or a folder")
    opened.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )

    demo = sub.add_parser(
        "demo", help="the app on a built-in simulated cluster (no cluster or AWS account needed)"
    )
    demo.add_argument(
        "--scenario",
        default=DEMO_DEFAULT_SCENARIO,
        help=f"scenario name or YAML file (default: {DEMO_DEFAULT_SCENARIO}; `mignurse sim list`)",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=DEMO_DEFAULT_SPEED,
        help=f"simulated seconds per real second (default: {DEMO_DEFAULT_SPEED:g})",
    )
    demo.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )
    demo.add_argument(
        "--auto-collect",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="collect each simulated node into DIR as soon as its repair clock starts",
    )


def _auto_collect_dir(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "auto_collect", None)
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(f"--auto-collect {folder}: no such folder")
    return folder


def cmd_app(args: argparse.Namespace) -> int:
    _run_app(live_app(args))
    return EXIT_OK


def simulated_label(kubeconfig: str | None, cluster: str) -> str | None:
    """What the status line calls a cluster `mignurse sim serve` serves (None: a real one).
    The command line asks the same question of the same kubeconfig (`is_simulated`), so
    the app reaches its nodes through the simulator's sandboxes as `mignurse collect` does."""
    from mignurse.collect.access import simulated_scenario

    scenario = simulated_scenario(kubeconfig, cluster)
    if scenario is None:
        return None
    return f"{scenario} (sim serve)" if scenario else "sim serve"


def live_app(args: argparse.Namespace) -> Any:
    """The app on the current (or `--context`) cluster, built as `mignurse` builds it."""
    from mignurse.cluster.client import ClusterClient
    from mignurse.cluster.kubeconfig import list_contexts
    from mignurse.paths import history_file
    from mignurse.session import LiveSource
    from mignurse.tui.app import make_app
    from mignurse.untrusted import folder_problem

    client = connect(args)
    history_path = history_file(client.info)
    unusable = folder_problem(history_path.parent)
    access = access_for(args)
    source = LiveSource(
        client,
        simulated=simulated_label(args.kubeconfig, client.info.cluster),
        history_path=None if unusable else history_path,
        auto_collect=_auto_collect_dir(args),
        access=access,
    )
    if unusable:  # the app works without its history; it says why there is none
        source.notices.append(f"history not kept: XDG_STATE_HOME: {unusable}")
    source.check()  # a dead endpoint or RBAC refusal is one line here, not a broken screen

    def connect_to(context: str) -> LiveSource:
        """Another context of the same kubeconfig, from the palette (off the UI thread)."""
        other_client = ClusterClient.connect(kubeconfig=args.kubeconfig, context=context)
        other = LiveSource(
            other_client,
            simulated=simulated_label(args.kubeconfig, other_client.info.cluster),
            history_path=history_file(other_client.info),
            access=access,
        )
        other.check()
        return other

    def contexts() -> list[str]:
        return list_contexts(args.kubeconfig)  # read within the kubeconfig's bounds

    return make_app(
        source,
        read_only=args.read_only,
        connect=connect_to,
        contexts=contexts,
        light=args.light,
    )


def _run_app(app: Any) -> None:
    """The app until it quits, or until SIGHUP (its terminal closed) or SIGTERM asks it to:
    then it quits as from its own key, so that what it and its callers hold is cleaned up."""
    import asyncio

    loop = asyncio.new_event_loop()
    signals = (signal.SIGHUP, signal.SIGTERM)

    def ask_to_quit(signum: int) -> None:
        app.exit()
        # A second signal, or a quit that does not finish, ends the run here all the same.
        for sig in signals:
            loop.add_signal_handler(sig, _raise_exit, sig)
        loop.call_later(10, _raise_exit, signum)

    for sig in signals:
        loop.add_signal_handler(sig, ask_to_quit, sig)
    try:
        app.run(loop=loop)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        loop.close()


def _raise_exit(signum: int) -> None:
    raise SystemExit(128 + signum)


def cmd_open(args: argparse.Namespace) -> int:
    _run_app(bundle_app(args))
    return EXIT_OK


def bundle_app(args: argparse.Namespace) -> Any:
    """The app on a bundle (or a folder of dumps), read-only, as `mignurse open` builds it."""
    from mignurse.diagnose.sources import SourceError
    from mignurse.session import BundleSource
    from mignurse.tui.app import make_app

    path = Path(args.bundle)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    try:
        source = BundleSource(path)
    except (SourceError, ValueError) as exc:
        raise UserError(str(exc)) from None
    return make_app(source, light=args.light)


def cmd_demo(args: argparse.Namespace) -> int:
    with demo_session(args) as app:
        _run_app(app)
    return EXIT_OK


@contextlib.contextmanager
def demo_session(args: argparse.Namespace) -> Iterator[Any]:
    """The demo's app, for as long as the block runs: a simulated cluster built in the app's
    build thread, and a temporary folder that holds its kubeconfig and all of its state (the
    history, and the audit log and run state of the runbooks run from it: `paths.demo_state`),
    removed at the end with the cluster stopped."""
    from mignurse.cluster.client import ClusterClient
    from mignurse.demo_folder import demo_folder
    from mignurse.paths import demo_state, history_file
    from mignurse.session import BuildingSource, LiveSource
    from mignurse.sim import SimCluster, load_scenario
    from mignurse.tui.app import make_app

    speed = positive_speed(args.speed)
    scenario = load_scenario(args.scenario)
    simulated = f"{scenario.name} ×{speed:g}"
    with demo_folder() as tmp, demo_state(Path(tmp)):
        started: list[SimCluster] = []
        closed = threading.Event()
        guard = threading.Lock()

        def build() -> LiveSource:
            """In the app's build thread: scale-5000 takes seconds, shown as progress."""
            sim = SimCluster(scenario, speed=speed).start()
            with guard:
                kept = not closed.is_set()
                if kept:
                    started.append(sim)
            if not kept:  # the app quit while the cluster was built
                sim.stop()
                raise RuntimeError("the demo was closed")
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig")
            client = ClusterClient.connect(kubeconfig=str(kubeconfig))
            source = LiveSource(
                client,
                simulated=simulated,
                clock=sim.now,
                history_path=history_file(client.info),  # the demo's own, never the user's
                auto_collect=_auto_collect_dir(args),
                access=access_for(args),  # the simulator's sandboxes: `c` and runbooks use them
            )
            source.check()
            return source

        building = BuildingSource(
            build, what=f"simulated cluster {scenario.name}", simulated=simulated
        )
        app = make_app(building, read_only=getattr(args, "read_only", False), light=args.light)
        try:
            yield app
        finally:
            with guard:
                closed.set()
            for sim in started:
                sim.stop()
