"""`mignurse nodes`: the GPU node table, like kubectl get nodes."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from mignurse.cli.common import (
    EXIT_OK,
    UserError,
    cluster_exit_code,
    cluster_record,
    connection_options,
    read_clusters_begun,
)
from mignurse.jsontext import dumps_indented


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

    reading = read_clusters_begun(
        args, lambda client: load_snapshot(client, label_selector=args.selector)
    )
    # What draws the answer loads while the cluster answers (rich stays unloaded: render
    # loads it only where it draws).
    drawing = ("mignurse.nodeview",) + (() if args.output == "json" else ("mignurse.render",))
    for module in drawing:
        importlib.import_module(module)
    clusters = reading()
    if len(clusters) > 1:
        return _several(args, clusters)
    (cluster,) = clusters
    return _one(args, cluster.context, cluster.result, cluster.now)


def _one(args: argparse.Namespace, context: str, loaded: Any, server_now: Any) -> int:
    from mignurse.nodeview import node_rows, nodes_document

    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    snapshot = loaded.snapshot
    now = snapshot.taken_at or server_now
    pool = args.nodepool
    if pool and not _has_pool(snapshot, pool):
        raise UserError(_unknown_pool(pool, f"in context {context!r}", [snapshot]))
    if args.output == "json":
        document = nodes_document(snapshot, now, context=context, pool=pool)
        # One write: the inert stdout looks at it once (every control escaped in it).
        sys.stdout.write(dumps_indented(document) + "\n")
        return EXIT_OK
    rows = node_rows(snapshot, now, pool=pool)
    if not rows:
        scope = f" in pool {pool!r}" if pool else ""
        print(
            f"No GPU nodes{scope} in context {context!r} ({len(snapshot.nodes)} nodes in all).",
            file=sys.stderr,
        )
        return EXIT_OK
    from mignurse.render import print_node_table

    print_node_table(rows, wide=args.output == "wide")
    return EXIT_OK


def _has_pool(snapshot: Any, pool: str) -> bool:
    return any(n.pool == pool for n in snapshot.nodes.values()) or pool in snapshot.nodepools


def _unknown_pool(pool: str, where: str, snapshots: list[Any]) -> str:
    known = sorted({n.pool for s in snapshots for n in s.gpu_nodes() if n.pool})
    return f"no NodePool or node group named {pool!r} {where}" + (
        f": known GPU pools are {', '.join(known)}" if known else ""
    )


# The order a node's state is listed in across clusters: the worst first.
_STATUS_RANK = {"NotReady": 0, "Unknown": 1, "Launching": 2, "Ready": 3}


def _several(args: argparse.Namespace, clusters: list[Any]) -> int:
    """Several clusters: each connected one's nodes under a CLUSTER column, worst first
    across them all; a failed one was one line on stderr and is a record in the JSON. The
    exit code is the worst of them."""
    from mignurse.nodeview import node_json, node_rows

    connected = [c for c in clusters if c.connected]
    code = max(
        [EXIT_OK, *(cluster_exit_code(c, args.command) for c in clusters if not c.connected)]
    )
    for cluster in connected:
        for notice in cluster.result.notices:
            print(f"note: {cluster.context}: {notice}", file=sys.stderr)
    pool = args.nodepool
    snapshots = [c.result.snapshot for c in connected]
    if pool and connected and not any(_has_pool(s, pool) for s in snapshots):
        names = ", ".join(repr(c.context) for c in connected)
        raise UserError(_unknown_pool(pool, f"in contexts {names}", snapshots))
    if args.output == "json":
        nodes = []
        for cluster in connected:
            snapshot = cluster.result.snapshot
            claims = snapshot.claims_by_node()
            for node in snapshot.gpu_nodes():
                if pool is None or node.pool == pool:
                    document = node_json(
                        node,
                        claims.get(node.name) or claims.get(node.provider_id),
                        snapshot.taken_at,
                        dra=snapshot.dra_devices.get(node.name),
                        source=snapshot.gpu_source(node),
                    )
                    nodes.append(
                        {"context": cluster.context, "cluster": cluster.cluster, **document}
                    )
        document = {
            "apiVersion": "mignurse/v1",
            "kind": "GPUNodeList",
            "contexts": [c.context for c in clusters],
            "clusters": [cluster_record(c) for c in clusters],
            "nodes": nodes,
        }
        sys.stdout.write(dumps_indented(document) + "\n")
        return code
    rows = [
        (cluster.context, row)
        for cluster in connected
        for row in node_rows(cluster.result.snapshot, cluster.result.snapshot.taken_at, pool=pool)
    ]
    # Worst first across the clusters; within a state, each cluster's own order.
    rows.sort(
        key=lambda pair: (_STATUS_RANK.get(pair[1].status_word, 1), pair[1].ahr_ok is not False)
    )
    if not rows:
        if connected:
            scope = f" in pool {pool!r}" if pool else ""
            names = ", ".join(repr(c.context) for c in connected)
            print(f"No GPU nodes{scope} in contexts {names}.", file=sys.stderr)
        return code
    from mignurse.render import print_node_table

    print_node_table(
        [row for _, row in rows],
        wide=args.output == "wide",
        clusters=[context for context, _ in rows],
    )
    return code
