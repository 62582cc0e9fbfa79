"""`mignurse nodes`: the GPU node table, like kubectl get nodes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mignurse.cli.common import EXIT_OK, UserError, connect, connection_options


def add_parser(sub: Any) -> None:
    nodes = sub.add_parser("nodes", help="the GPU node table, like kubectl get nodes")
    connection_options(nodes, top=False)
    nodes.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "json"),
        default="table",
        help="table (default), wide (more columns, full names) or json (stable, for scripts)",
    )
    nodes.add_argument("--nodepool", help="only this NodePool or managed node group")
    nodes.add_argument(
        "-l",
        "--selector",
        help="label selector, as kubectl -l (e.g. karpenter.sh/capacity-type=spot)",
    )


def cmd_nodes(args: argparse.Namespace) -> int:
    from mignurse.cluster.load import load_snapshot
    from mignurse.nodeview import node_rows, nodes_document

    client = connect(args)
    try:
        loaded = load_snapshot(client, label_selector=args.selector)
    finally:
        client.close()
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    snapshot = loaded.snapshot
    now = snapshot.taken_at or client.server_now()
    pool = args.nodepool
    if (
        pool
        and not any(n.pool == pool for n in snapshot.nodes.values())
        and pool not in snapshot.nodepools
    ):
        known = sorted({n.pool for n in snapshot.gpu_nodes() if n.pool})
        raise UserError(
            f"no NodePool or node group named {pool!r} in context {client.info.context!r}"
            + (f": known GPU pools are {', '.join(known)}" if known else "")
        )
    if args.output == "json":
        document = nodes_document(snapshot, now, context=client.info.context, pool=pool)
        # One write: the inert stdout looks at it once (json.dumps escaped every control).
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return EXIT_OK
    rows = node_rows(snapshot, now, pool=pool)
    if not rows:
        scope = f" in pool {pool!r}" if pool else ""
        print(
            f"No GPU nodes{scope} in context {client.info.context!r} "
            f"({len(snapshot.nodes)} nodes in all).",
            file=sys.stderr,
        )
        return EXIT_OK
    from mignurse.render import print_node_table

    print_node_table(rows, wide=args.output == "wide")
    return EXIT_OK
