"""`mignurse sim`: the simulated EKS cluster on its own, for kubectl-style clients."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import EXIT_OK, EXIT_USAGE, UserError, positive_speed

if TYPE_CHECKING:
    from mignurse.sim.scenario_spec import Scenario


FAILING_FLAGS = ("unreachable", "expired", "forbidden", "hung")


def add_parser(sub: Any) -> None:
    from mignurse.cli.app import hidden_connection_flags

    sim = sub.add_parser(
        "sim", help="the simulated EKS cluster on its own, for kubectl-style clients"
    )
    # It reads no kubeconfig and selects no context: it writes its own (--kubeconfig-out).
    hidden_connection_flags(sim)
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    serve = sim_sub.add_parser(
        "serve",
        help="serve a scenario (or several, each on its own port) on 127.0.0.1 until Ctrl-C",
    )
    hidden_connection_flags(serve)
    serve.add_argument(
        "--scenario",
        required=True,
        action="append",
        help="scenario name or YAML file (see `mignurse sim list`); again for another cluster "
        "(context sim-<scenario> each, the first the current one)",
    )
    failing = serve.add_argument_group(
        "clusters that fail, beside the scenarios (each a context of its own, NAME)"
    )
    failing.add_argument(
        "--unreachable",
        action="append",
        default=[],
        metavar="NAME",
        help="a context whose API server refuses connections",
    )
    failing.add_argument(
        "--expired",
        action="append",
        default=[],
        metavar="NAME",
        help="a context whose `aws eks get-token` fails as after the AWS SSO session expired",
    )
    failing.add_argument(
        "--forbidden",
        action="append",
        default=[],
        metavar="NAME",
        help="a context on the healthy scenario whose user RBAC refuses to list nodes",
    )
    failing.add_argument(
        "--hung",
        action="append",
        default=[],
        metavar="NAME",
        help="a context whose API server accepts connections and never answers",
    )
    serve.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="where to write the kubeconfig for it (required)",
    )
    serve.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per real second (default: 1)"
    )
    serve.add_argument(
        "--port",
        type=int,
        default=0,
        help="port on 127.0.0.1 (default: any free one); with several scenarios, the first's",
    )
    hidden_connection_flags(sim_sub.add_parser("list", help="the shipped scenarios"))


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def scenario_named(name: str) -> Scenario:
    """A shipped scenario or a scenario file, as `load_scenario` reads it; a name that is
    neither is one line about the name (no `:0`, the line number of a file never read)."""
    from mignurse.sim import load_scenario
    from mignurse.sim.scenario_fields import ScenarioError

    try:
        return load_scenario(name)
    except ScenarioError as exc:
        where, sep, why = str(exc).partition(":0: ")
        if not sep:
            raise
        raise ScenarioError(f"{where}: {why}") from None


def cmd_sim(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from mignurse.cli.app import refuse_selection
    from mignurse.sim import SimCluster, list_scenarios
    from mignurse.sim.simcluster import KUBECTL_AGE_HOURS

    refuse_selection(args, "sim", "serves simulated clusters and reads none")
    if args.sim_command == "list":
        listed = list_scenarios()
        width = max((len(name) for name, _description in listed), default=0)
        for name, description in listed:
            print(f"{name:<{width}}  {description}".rstrip())
        return EXIT_OK
    if args.sim_command != "serve":
        parser.parse_args(["sim", "--help"])
        return EXIT_USAGE
    speed = positive_speed(args.speed)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port number (0 picks a free one)")
    if not args.kubeconfig_out:
        # --kubeconfig names a cluster to read; taken as the output, it could overwrite the
        # user's own ~/.kube/config.
        given = getattr(args, "kubeconfig", None)
        hint = f": --kubeconfig-out {given}" if given else ""
        raise UserError(
            "sim serve needs --kubeconfig-out PATH, where it writes the simulated cluster's "
            f"kubeconfig (--kubeconfig names a cluster to read){hint}"
        )
    out = Path(args.kubeconfig_out)
    if not out.parent.exists():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    _refuse_unless_file(out)
    for flag in FAILING_FLAGS:
        for name in getattr(args, flag):
            if not name.strip():
                raise UserError(f"--{flag} {name!r}: a context needs a name that is not blank")
    names = list(args.scenario)
    failing = [
        *(("unreachable", n) for n in args.unreachable),
        *(("expired", n) for n in args.expired),
        *(("forbidden", n) for n in args.forbidden),
        *(("hung", n) for n in args.hung),
    ]
    if len(names) > 1 or failing:
        return _serve_several(names, failing, out, speed, args.port)
    scenario = scenario_named(names[0])
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as cleanly as Ctrl-C
    started = time.monotonic()
    try:
        start = SimCluster.wall_anchored_start(speed)
        sim = SimCluster(scenario, speed=speed, port=args.port, start=start).start()
    except OSError as exc:
        raise UserError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    try:
        try:
            sim.write_kubeconfig(out)
        except OSError as exc:  # a link or FIFO put there since `_refuse_unless_file`
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
        context = scenario.context_name
        print(
            f"Serving scenario {scenario.name!r} at {sim.url} (speed ×{speed:g}, ready in "
            f"{time.monotonic() - started:.1f}s).\n"
            f"kubeconfig: {out} (context {context})\n"
            f"Try: mignurse --kubeconfig {out} nodes  (or kubectl --kubeconfig {out} get nodes)\n"
            + (
                f"The simulated clock starts {start:%Y-%m-%d %H:%M}Z, behind the wall clock, so "
                f"that at ×{speed:g} kubectl's ages stay valid for "
                f"{KUBECTL_AGE_HOURS:g} h of serving.\n"
                if speed > 1
                else ""
            )
            + "Ctrl-C to stop.",
            flush=True,
        )
        return _until_stopped()
    finally:
        sim.stop()


def _refuse_unless_file(out: Path) -> None:
    """--kubeconfig-out must be a regular file or nothing yet: a folder cannot be written, a
    FIFO would hang the write until something reads it, a device or a link would send the
    kubeconfig elsewhere. Said before anything is served."""
    import stat

    from mignurse.inert import inert
    from mignurse.paths import file_kind

    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"cannot write {inert(str(out))}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise UserError(
            f"cannot write {inert(str(out))}: it is {file_kind(mode)}; --kubeconfig-out takes a "
            "regular file (it is replaced, never through a link) or a path where nothing is yet"
        )


def _until_stopped() -> int:
    """Serve until Ctrl-C or SIGTERM (`_interrupt`), then say so."""
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopped.", file=sys.stderr)
        return EXIT_OK


def _serve_several(
    names: list[str], failing: list[tuple[str, str]], out: Path, speed: float, port: int
) -> int:
    """Each scenario on its own port in this one process, and the failing contexts beside
    them, in ONE kubeconfig: a context per scenario (`sim-<scenario>`, the first the current
    one) and one per failing NAME."""
    from mignurse.sim.fleet import serve_fleet

    scenarios = [scenario_named(name) for name in names]
    contexts = [s.context_name for s in scenarios] + [name for _kind, name in failing]
    repeated = sorted({c for c in contexts if contexts.count(c) > 1})
    if repeated:
        raise UserError(
            f"context {repeated[0]!r} would be served twice: give each scenario and NAME once"
        )
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        fleet = serve_fleet(out, scenarios, failing, speed=speed, port=port)
    except OSError as exc:
        if exc.filename is not None:  # the kubeconfig, not a port
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
        raise UserError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    try:
        width = max(len(c) for c in contexts)
        lines = [
            f"Serving {len(scenarios)} scenario{'s' if len(scenarios) > 1 else ''}"
            + (f" and {len(failing)} failing context{'s' if len(failing) > 1 else ''}"
               if failing else "")
            + f" (speed ×{speed:g}, ready in {time.monotonic() - started:.1f}s):",
            *(f"  {context:<{width}}  {what}" for context, what in fleet.described),
            f"kubeconfig: {out} (current context {contexts[0]})",
            f"Try: mignurse --kubeconfig {out} --all-contexts nodes",
            "Ctrl-C to stop.",
        ]  # fmt: skip
        print("\n".join(lines), flush=True)
        return _until_stopped()
    finally:
        fleet.stop()
