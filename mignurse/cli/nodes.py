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
        args,
        lambda client: load_snapshot(client, label_selector=args.selector),
        several_read=lambda client: _part(
            args, client, load_snapshot(client, label_selector=args.selector)
        ),
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
        raise UserError(_unknown_pool(pool, f"in context {context!r}", [_gpu_pools(snapshot)]))
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


def _gpu_pools(snapshot: Any) -> list[str]:
    return sorted({n.pool for n in snapshot.gpu_nodes() if n.pool})


def _unknown_pool(pool: str, where: str, pools: list[list[str]]) -> str:
    """The line for a `--nodepool` no cluster has; `pools`: each cluster's GPU pools."""
    known = sorted({name for names in pools for name in names})
    return f"no NodePool or node group named {pool!r} {where}" + (
        f": known GPU pools are {', '.join(known)}" if known else ""
    )


# The order a node's state is listed in across clusters: the worst first.
_STATUS_RANK = {"NotReady": 0, "Unknown": 1, "Launching": 2, "Ready": 3}


class _Part:
    """What one of several clusters gives the answer, made where it was read (a worker
    process sends this, not the snapshot: a tenth of the bytes to pickle): its notices,
    its GPU pools, whether it has `--nodepool`'s pool, and its nodes and launching
    NodeClaims, as the JSON text of the answer's `nodes` and `launching` items or as table
    rows."""

    def __init__(
        self,
        notices: list[str],
        pools: list[str],
        has_pool: bool,
        json: str,
        rows: list[Any],
        launching: str = "",
    ) -> None:
        self.notices, self.pools, self.has_pool = notices, pools, has_pool
        self.json, self.rows, self.launching = json, rows, launching


def _part(args: argparse.Namespace, client: Any, loaded: Any) -> _Part:
    from mignurse.nodeview import launching_json, node_json, node_rows

    snapshot = loaded.snapshot
    pool = args.nodepool
    pools = _gpu_pools(snapshot)
    has_pool = pool is None or _has_pool(snapshot, pool)
    if args.output != "json":
        return _Part(
            loaded.notices, pools, has_pool, "", node_rows(snapshot, snapshot.taken_at, pool=pool)
        )
    claims = snapshot.claims_by_node()
    named = {"context": client.info.context, "cluster": client.info.cluster}
    nodes = [
        {
            **named,
            **node_json(
                node,
                claims.get(node.name) or claims.get(node.provider_id),
                snapshot.taken_at,
                dra=snapshot.dra_devices.get(node.name),
                source=snapshot.gpu_source(node),
            ),
        }
        for node in snapshot.gpu_nodes()
        if pool is None or node.pool == pool
    ]
    launching = [
        {**named, **launching_json(claim)}
        for claim in snapshot.launching_claims()
        if pool is None or claim.pool == pool
    ]
    return _Part(
        loaded.notices, pools, has_pool, _items_text(nodes), [], launching=_items_text(launching)
    )


def _items_text(items: list[Any]) -> str:
    """`items` as they are written in one of the answer's arrays (a member of the top-level
    object: each item indented by 4), joined by commas, without the brackets."""
    if not items:
        return ""
    text = dumps_indented(items)  # "[\n  {…},\n  {…}\n]": items indented by 2
    return "  " + text[2:-2].replace("\n", "\n  ")


def _json_answer(
    document: dict[str, Any], parts: list[str], launching: list[str] | None = None
) -> str:
    """`dumps_indented(document)` ending with its `nodes` array holding `parts` (each
    cluster's items already written, `_items_text`), then, when given, its `launching` array
    holding `launching` (the same): the text the whole document would be written as."""
    arrays = {"nodes": parts} if launching is None else {"nodes": parts, "launching": launching}
    head = {key: value for key, value in document.items() if key not in arrays}
    text = dumps_indented({**head, **{key: [] for key in arrays}})
    empty = ",\n".join(f"  {dumps_indented(key)}: []" for key in arrays) + "\n}"
    assert text.endswith(empty)  # the arrays come last, each empty
    filled = []
    for key, texts in arrays.items():
        items = [part for part in texts if part]
        opened = f"  {dumps_indented(key)}: ["
        filled.append(opened + "\n" + ",\n".join(items) + "\n  ]" if items else opened + "]")
    return text[: -len(empty)] + ",\n".join(filled) + "\n}"


def _several(args: argparse.Namespace, clusters: list[Any]) -> int:
    """Several clusters: each connected one's nodes under a CLUSTER column, worst first
    across them all; a failed one was one line on stderr and is a record in the JSON. The
    exit code is the worst of them. Each cluster's result is its `_Part`."""
    connected = [c for c in clusters if c.connected]
    code = max(
        [EXIT_OK, *(cluster_exit_code(c, args.command) for c in clusters if not c.connected)]
    )
    for cluster in connected:
        for notice in cluster.result.notices:
            print(f"note: {cluster.context}: {notice}", file=sys.stderr)
    pool = args.nodepool
    parts: list[_Part] = [c.result for c in connected]
    if pool and connected and not any(part.has_pool for part in parts):
        names = ", ".join(repr(c.context) for c in connected)
        raise UserError(_unknown_pool(pool, f"in contexts {names}", [p.pools for p in parts]))
    if args.output == "json":
        document = {
            "apiVersion": "mignurse/v1",
            "kind": "GPUNodeList",
            "contexts": [c.context for c in clusters],
            "clusters": [cluster_record(c) for c in clusters],
        }
        answer = _json_answer(
            document, [part.json for part in parts], [part.launching for part in parts]
        )
        sys.stdout.write(answer + "\n")
        return code
    rows = [(cluster.context, row) for cluster in connected for row in cluster.result.rows]
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
