"""`mignurse radar`: every GPU node whose automatic repair acts within the horizon, in every
selected cluster, soonest first, with its worst finding and the one command to run first
(`mignurse.diagnose.radar`; the app's `D` shows the same)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import (
    EXIT_OK,
    UserError,
    cluster_exit_code,
    cluster_record,
    connection_options,
    read_clusters,
)
from mignurse.jsontext import dumps_indented

if TYPE_CHECKING:
    from mignurse.diagnose.radar import Blip

EXIT_DUE = 1  # a node is on the radar


def add_parser(sub: Any) -> None:
    radar = sub.add_parser(
        "radar",
        help="GPU nodes whose automatic repair acts within the horizon, soonest first, across "
        "every selected cluster",
        description="Exit code: 0 no GPU node due for repair within the horizon, 1 some are, "
        "2 a cluster could not be read (said on stderr).",
    )
    connection_options(radar, top=False)
    radar.add_argument(
        "--horizon",
        default="1h",
        metavar="DURATION",
        help="how far ahead to look, e.g. 15m, 1h, 6h, 1d (default: 1h)",
    )
    radar.add_argument("-o", "--output", choices=("table", "json"), default="table")
    radar.add_argument("--profile", help="AWS profile for managed node groups' repair settings")
    radar.add_argument("--region", help="AWS region, as the aws CLI")
    radar.add_argument("--state-dir", help="where `mignurse watch` keeps the history")


def cmd_radar(args: argparse.Namespace) -> int:
    from mignurse.cli.diagnose import judged_input, live_reader
    from mignurse.diagnose.engine import diagnose
    from mignurse.diagnose.radar import STATE_ORDER, radar
    from mignurse.runner.schema import duration_seconds

    try:
        horizon = timedelta(seconds=duration_seconds(args.horizon))
    except ValueError as exc:
        raise UserError(f"--horizon: {exc}") from None
    clusters = read_clusters(args, live_reader(args))
    failed = [cluster_exit_code(c, args.command) for c in clusters if not c.connected]
    code = max([EXIT_OK, *failed])
    found: list[tuple[Any, Blip, datetime]] = []  # (cluster, blip, that cluster's clock)
    records = []
    for cluster in clusters:
        records.append(cluster_record(cluster))
        if not cluster.connected:
            continue
        inp = judged_input(cluster)
        found += [(cluster, blip, inp.now) for blip in radar(inp, diagnose(inp).findings, horizon)]
    found.sort(
        key=lambda item: (STATE_ORDER[item[1].state], item[1].due, item[0].context, item[1].node)
    )
    if found:
        code = max(code, EXIT_DUE)
    several = len(clusters) > 1
    if args.output == "json":
        document = {
            "apiVersion": "mignurse/v1",
            "kind": "RepairRadar",
            "horizon": args.horizon,
            "clusters": records,
            "nodes": [
                {
                    "context": c.context,
                    "cluster": c.cluster,
                    **blip.to_json(),
                    "command": _command(c.context, blip, several),
                }
                for c, blip, _now in found
            ],
        }
        sys.stdout.write(dumps_indented(document) + "\n")
        return code
    _print(found, several, args.horizon)
    return code


def _command(context: str, blip: Blip, several: bool) -> str:
    """The one command to run first, pinned to the node's context when several are read."""
    from shlex import quote

    from mignurse.diagnose.radar import COLLECT, PAUSE
    from mignurse.diagnose.wording import with_context

    node = quote(blip.node)
    if blip.act == PAUSE:
        command = f"mignurse run pause-node-repair --node {node}"
    elif blip.act == COLLECT:
        command = f"mignurse collect {node}"
    else:
        command = f"mignurse run cordon --node {node}"
    return with_context(command, context) if several else command


def _print(found: list[tuple[Any, Blip, datetime]], several: bool, horizon: str) -> None:
    from mignurse.inert import inert
    from mignurse.nodeview import short_name
    from mignurse.render import print_rows, repair_when

    if not found:
        print(f"No GPU node is due for automatic repair within {horizon}.")
        return
    header: tuple[str, ...] = ("CLUSTER",) if several else ()
    header += ("REPAIR", "NODE", "POOL", "CONDITION", "FINDING", "FIRST")
    rows = []
    for cluster, blip, now in found:
        when = repair_when(blip.due, blip.state, now)
        row: tuple[str, ...] = (inert(cluster.context),) if several else ()
        row += (
            when,
            short_name(blip.node),
            inert(blip.pool),
            blip.condition,
            blip.finding.id if blip.finding else "-",
            inert(_command(cluster.context, blip, several)),
        )
        rows.append(row)
    print_rows(header, rows, sys.stdout)
