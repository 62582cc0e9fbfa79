"""`mignurse sim`: the simulated EKS cluster on its own, for kubectl-style clients."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mignurse.cli.common import EXIT_OK, EXIT_USAGE, UserError, positive_speed


def add_parser(sub: Any) -> None:
    sim = sub.add_parser(
        "sim", help="the simulated EKS cluster on its own, for kubectl-style clients"
    )
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    serve = sim_sub.add_parser("serve", help="serve a scenario on 127.0.0.1 until Ctrl-C")
    serve.add_argument(
        "--scenario", required=True, help="scenario name or YAML file (see `mignurse sim list`)"
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
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)"
    )
    sim_sub.add_parser("list", help="the shipped scenarios")


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def cmd_sim(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from mignurse.sim import SimCluster, list_scenarios, load_scenario
    from mignurse.sim.simcluster import KUBECTL_AGE_HOURS

    if args.sim_command == "list":
        for name, description in list_scenarios():
            print(f"{name:<22} {description}")
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
    scenario = load_scenario(args.scenario)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as cleanly as Ctrl-C
    started = time.monotonic()
    try:
        start = SimCluster.wall_anchored_start(speed)
        sim = SimCluster(scenario, speed=speed, port=args.port, start=start).start()
    except OSError as exc:
        raise UserError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    try:
        sim.write_kubeconfig(out)
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
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopped.", file=sys.stderr)
        return EXIT_OK
    finally:
        sim.stop()
