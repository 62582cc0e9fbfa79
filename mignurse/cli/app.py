"""The terminal app: on the current context (no command), on a bundle (`open`), on a
simulated cluster (`demo`)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    UserError,
    access_for,
    positive_speed,
    say_busy,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import datetime

DEMO_DEFAULT_SCENARIO = "dcgm-repair-loop"
DEMO_DEFAULT_SPEED = 10.0
DEMO_MAX_CLUSTERS = 8  # sim.fleet.DEMO_CLUSTERS, named here so that the help loads no simulator


def add_parsers(sub: Any) -> None:
    opened = sub.add_parser(
        "open",
        help="the app on support bundles, read-only, for post-mortems and vendor support",
        description="Shows a bundle written by `mignurse collect` (or a folder of `kubectl get "
        "-o json` dumps) in the terminal app, judged at the moment it was collected: the "
        "fleet view, each node with its timeline and the evidence collected on it. Several "
        "bundles open as one view across them, each under its recorded context (else its "
        "file name), each judged at its own moment. Nothing can be changed from it.",
    )
    opened.add_argument(
        "bundle",
        metavar="BUNDLE",
        nargs="+",
        help="a .tar.gz bundle or a folder; several: one view",
    )
    opened.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )
    # A bundle names its own cluster: no kubeconfig is read, no context selected.
    hidden_connection_flags(opened)

    demo = sub.add_parser(
        "demo", help="the app on a built-in simulated cluster (no cluster or AWS account needed)"
    )
    hidden_connection_flags(demo)
    demo.add_argument(
        "--scenario",
        default=None,
        help=f"scenario name or YAML file (default: {DEMO_DEFAULT_SCENARIO}; `mignurse sim list`)",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=DEMO_DEFAULT_SPEED,
        help=f"simulated seconds per real second (default: {DEMO_DEFAULT_SPEED:g})",
    )
    demo.add_argument(
        "--clusters",
        type=int,
        default=None,
        metavar="N",
        help="N simulated clusters in one view, each under its own context (2 to "
        f"{DEMO_MAX_CLUSTERS}; the first four: a Karpenter repair loop, the MIG hook, a calm "
        "cluster, one that cannot be reached); replaces --scenario",
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


def hidden_connection_flags(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig, --context and --all-contexts on a command that reads no kubeconfig of
    the user's (the demo, the simulator): still parsed, as every command parses the global
    flags, so that the command can refuse a selection in words; left out of its help."""
    for flag, action in (
        ("--kubeconfig", None),
        ("--context", None),
        ("--all-contexts", "store_true"),
    ):
        options: dict[str, Any] = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        if action:
            options["action"] = action
        parser.add_argument(flag, **options)


def refuse_selection(args: argparse.Namespace, command: str, why: str) -> None:
    """A context selection given to a command that serves its own simulated clusters."""
    given = [
        flag
        for flag, dest in (("--context", "context"), ("--all-contexts", "all_contexts"))
        if getattr(args, dest, None)
    ]
    if given:
        raise UserError(f"{command} {why}: leave out {' and '.join(given)}")


def _auto_collect_dir(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "auto_collect", None)
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(f"--auto-collect {folder}: no such folder")
    return folder


def cmd_app(args: argparse.Namespace) -> int:
    return _run_app(live_app(args))


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
    """The app on the current (or `--context`) cluster, or on every context a selection
    names (`--context a,b`, `'prod-*'`, `--all-contexts`), built as `mignurse` builds it."""
    from mignurse.cluster.contexts import select_contexts

    contexts = select_contexts(args.kubeconfig, args.context, bool(args.all_contexts))
    return fleet_app(args, contexts)


def history_path_for(info: Any) -> tuple[Path | None, str]:
    """The history file the app keeps for a cluster (`paths.history_file`: one file and one
    writer per cluster), and why none is kept ("" when one is): the one place the app picks
    it."""
    from mignurse.paths import history_file
    from mignurse.untrusted import folder_problem

    path = history_file(info)
    unusable = folder_problem(path.parent)
    return (None, unusable) if unusable else (path, "")


def fleet_app(
    args: argparse.Namespace,
    contexts: list[str | None],
    *,
    clocks: Mapping[str, Callable[[], datetime]] | None = None,
) -> Any:
    """The app on these contexts of `args.kubeconfig` (None: the current one), each
    connected and started side by side through `cluster.fleet.run_fleet` (at most
    `PARALLEL` at once, each under its own deadline), each a `LiveSource` of its own. One
    context is the one-element list: its source is the app's, and a failure to connect is
    one line, as ever. With several, the app holds them all (`session.FleetSource`) and
    opens at once: each cluster joins as its start ends, and one that failed shows its
    status line and is tried again in the background. `clocks`: a context's own clock (the
    demo's simulators'), in place of its API server's Date headers."""
    from mignurse.cluster.fleet import Cluster, FleetRequest, run_fleet
    from mignurse.cluster.kubeconfig import list_contexts
    from mignurse.session import FleetSource, LiveSource, Member
    from mignurse.tui.app import make_app
    from mignurse.untrusted import COMMAND_SECONDS

    access = access_for(args)
    auto_collect = _auto_collect_dir(args)
    several = len(contexts) > 1

    def started(client: Any) -> LiveSource:
        """A cluster's source, checked (one small request: a dead endpoint or an RBAC
        refusal ends here, not in a broken screen); on run_fleet's thread."""
        history_path, unusable = history_path_for(client.info)
        source = LiveSource(
            client,
            simulated=simulated_label(args.kubeconfig, client.info.cluster),
            clock=(clocks or {}).get(client.info.context),
            history_path=history_path,
            auto_collect=auto_collect,
            access=access,
        )
        if unusable:  # the app works without its history; it says why there is none
            source.notices.append(f"history not kept: XDG_STATE_HOME: {unusable}")
        source.check()
        return source

    def request(selected: tuple[str | None, ...]) -> FleetRequest[LiveSource]:
        return FleetRequest(
            args.kubeconfig,
            selected,
            started,
            # one cluster waits as long as it must, as the app always has; several: each
            # start under its own deadline, so that a hung one never holds the others
            seconds=COMMAND_SECONDS.value() if several else None,
            on_busy=None if several else say_busy,  # several: each status line says it
            versions=several,
            keep=True,
        )

    def on_own_clock(cluster: Any) -> Any:
        """A cluster that runs on a clock of its own (the demo's simulators, each on its
        scenario's moment) is far from this machine's clock on purpose: its status line
        shows no skew to warn of. A real cluster keeps its skew."""
        if clocks and cluster.context in clocks:
            cluster.clock_skew = None
        return cluster

    def connect_to(context: str) -> Any:
        """Another context of the same kubeconfig, from the palette (off the UI thread)."""
        (other,) = run_fleet(request((context,)))
        if other.error is not None:
            raise other.error
        return other.result

    def contexts_of() -> list[str]:
        return list_contexts(args.kubeconfig)  # read within the kubeconfig's bounds

    if not several:
        (cluster,) = run_fleet(request(tuple(contexts)))
        if cluster.error is not None:
            raise cluster.error
        source: Any = cluster.result
    else:
        source = FleetSource(
            [Member(Cluster(context or "")) for context in contexts],
            connect=lambda arrived: run_fleet(
                request(tuple(contexts)), progress=lambda c: arrived(on_own_clock(c))
            ),
            retry=lambda context: on_own_clock(run_fleet(request((context,)))[0]),
        )
    return make_app(
        source,
        read_only=args.read_only,
        connect=connect_to,
        contexts=contexts_of,
        light=args.light,
    )


def _run_app(app: Any) -> int:
    """The app until it quits, or until SIGHUP (its terminal closed), SIGTERM or SIGINT asks
    it to: then it quits as from its own key, so that what it and its callers hold is cleaned
    up. The exit code: EXIT_INTERRUPTED after SIGINT (the app reads Ctrl-C as a key, so that
    one comes from outside: `kill -INT`, a wrapper's timeout), else EXIT_OK."""
    import asyncio

    loop = asyncio.new_event_loop()
    signals = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
    asked: list[int] = []

    def ask_to_quit(signum: int) -> None:
        asked.append(signum)
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
    return EXIT_INTERRUPTED if asked == [signal.SIGINT] else EXIT_OK


def _raise_exit(signum: int) -> None:
    raise SystemExit(128 + signum)


def cmd_open(args: argparse.Namespace) -> int:
    refuse_selection(args, "open", "shows the clusters its bundles recorded")
    # A bundle is read-only and its nodes are gone: nothing to collect. Taken (as every
    # command takes the app's flags) only to be refused in words, and left out of the help.
    if getattr(args, "auto_collect", None):
        raise UserError(
            "open shows bundles, read-only: there is no node to collect from "
            "(--auto-collect is for the app on a cluster)"
        )
    return _run_app(bundle_app(args))


def bundle_app(args: argparse.Namespace) -> Any:
    """The app on a bundle (or a folder of dumps), read-only, as `mignurse open` builds it;
    on several, one view across them (`session.FleetSource`), each bundle a cluster named
    by the context it recorded, else by its file name."""
    from mignurse.cluster.fleet import CONNECTED, Cluster
    from mignurse.diagnose.sources import SourceError
    from mignurse.session import BundleSource, FleetSource, Member
    from mignurse.tui.app import make_app

    given = [Path(p) for p in ([args.bundle] if isinstance(args.bundle, str) else args.bundle)]
    for path in given:
        if not path.exists():
            raise UserError(f"{path}: no such file or folder")
    # A bundle named twice (or by two spellings of one path) is one cluster, shown once, as
    # a context named twice is read once: its nodes are never counted twice.
    first: dict[Path, Path] = {}
    for path in given:
        first.setdefault(path.resolve(), path)
    paths = list(first.values())
    sources = []
    for path in paths:
        try:
            sources.append(BundleSource(path))
        except (SourceError, ValueError) as exc:
            raise UserError(str(exc)) from None
    if len(sources) == 1:
        return make_app(sources[0], light=args.light)
    members = []
    named: set[str] = set()
    for source in sources:
        name = source.context if source.context not in named else source.path.name
        number = 2
        while name in named:  # two bundles of one name
            name, number = f"{source.path.name}#{number}", number + 1
        named.add(name)
        cluster: Cluster[BundleSource] = Cluster(name)
        cluster.cluster, cluster.status, cluster.result = source.cluster, CONNECTED, source
        members.append(Member(cluster, source))
    fleet: Any = FleetSource(members, read_only_reason="bundles are read-only")
    return make_app(fleet, light=args.light)


def cmd_demo(args: argparse.Namespace) -> int:
    refuse_selection(args, "demo", "runs its own simulated clusters (--clusters N for several)")
    session = demo_session if getattr(args, "clusters", None) is None else demo_fleet_session
    with session(args) as app:
        return _run_app(app)


@contextlib.contextmanager
def demo_fleet_session(args: argparse.Namespace) -> Iterator[Any]:
    """`mignurse demo --clusters N`: the first N of the demo's clusters (sim.fleet
    DEMO_CLUSTERS) served in this process on one clock, with one kubeconfig of a context
    each, opened as `mignurse --all-contexts` opens them; their kubeconfig and every file of
    state live in the demo's temporary folder, removed at the end with the clusters stopped."""
    import sys

    from mignurse.demo_folder import demo_folder
    from mignurse.paths import demo_state
    from mignurse.sim.fleet import serve_demo

    clusters = int(args.clusters)
    if not 2 <= clusters <= DEMO_MAX_CLUSTERS:
        raise UserError(
            f"--clusters {clusters} is out of range: give 2 to {DEMO_MAX_CLUSTERS} "
            "(or leave it out for one cluster)"
        )
    if args.scenario is not None:
        raise UserError("--clusters picks the demo's clusters itself: leave out --scenario")
    speed = positive_speed(args.speed)
    with demo_folder() as tmp, demo_state(Path(tmp)):
        print(f"Starting {clusters} simulated clusters…", file=sys.stderr, flush=True)
        fleet = serve_demo(Path(tmp) / "kubeconfig", clusters, speed=speed)
        try:
            contexts: list[str | None] = [context for context, _what in fleet.described]
            opened = argparse.Namespace(**vars(args))
            opened.kubeconfig = str(fleet.kubeconfig)
            opened.read_only = getattr(args, "read_only", False)
            clocks = {sim.scenario.context_name: sim.now for sim in fleet.sims}
            yield fleet_app(opened, contexts, clocks=clocks)
        finally:
            fleet.stop()


@contextlib.contextmanager
def demo_session(args: argparse.Namespace) -> Iterator[Any]:
    """The demo's app, for as long as the block runs: a simulated cluster built in the app's
    build thread, and a temporary folder that holds its kubeconfig and all of its state (the
    history, and the audit log and run state of the runbooks run from it: `paths.demo_state`),
    removed at the end with the cluster stopped."""
    from mignurse.cli.sim import scenario_named
    from mignurse.cluster.client import ClusterClient
    from mignurse.demo_folder import demo_folder
    from mignurse.paths import demo_state, history_file
    from mignurse.session import BuildingSource, LiveSource
    from mignurse.sim import SimCluster
    from mignurse.tui.app import make_app

    speed = positive_speed(args.speed)
    scenario = scenario_named(args.scenario or DEMO_DEFAULT_SCENARIO)
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
