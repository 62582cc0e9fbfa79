"""`mignurse inventory`: the GPU stack each pool runs (OS and AMI, kubelet, containerd, NVIDIA
driver, mig-manager, DRA driver, node monitoring agent, repair), live or from bundles; with
several bundles, the fields that differ between them and which of them run the combination
that broke one of them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mignurse.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    UserError,
    cluster_exit_code,
    connection_options,
    is_simulated,
    nodegroup_reader,
    read_clusters,
)
from mignurse.jsontext import dumps_indented
from mignurse.render import print_rows

if TYPE_CHECKING:
    from mignurse.cluster.client import ClusterClient
    from mignurse.diagnose.inventory import ClusterInventory, Difference, SharedCombination
    from mignurse.diagnose.sources import Gathered

# (cluster name, its inventory or None, why it failed or ""): what `show` draws, one per
# cluster or bundle. The name is the context live, a bundle's recorded context (else its
# file name) offline.
Entry = tuple[str, "ClusterInventory | None", str]

# A field with more values than this shows the first ones and how many more (-o json has all).
SHOWN_VALUES = 12


def add_parser(sub: Any) -> None:
    inventory = sub.add_parser(
        "inventory",
        help="the GPU stack per pool (OS and AMI, driver, mig-manager, DRA, NMA, Karpenter, "
        "repair); with several bundles, where they differ",
        description="Exit code: 0, or 2 when a cluster or bundle could not be read (said on "
        "stderr).",
    )
    connection_options(inventory, top=False)
    inventory.add_argument(
        "--from",
        dest="sources",
        action="append",
        metavar="DIR|BUNDLE.tar.gz",
        help="read a bundle or a directory of kubectl dumps instead of the live cluster; give "
        "it more than once to see where they differ",
    )
    inventory.add_argument("-o", "--output", choices=("table", "json"), default="table")
    inventory.add_argument(
        "--profile", help="AWS profile for managed node groups' repair settings (live only)"
    )
    inventory.add_argument("--region", help="AWS region, as the aws CLI (live only)")


def cmd_inventory(args: argparse.Namespace) -> int:
    from mignurse.cluster.contexts import several

    if not args.sources:
        return _live(args)
    if several(args.context, bool(args.all_contexts)):
        raise UserError("--from reads bundles: leave out --context and --all-contexts")
    return show(_from_bundles(args.sources), output=args.output)


# ------------------------------------------------------------------ reading


def _from_bundles(paths: Sequence[str]) -> list[Entry]:
    """Each bundle's inventory; one that cannot be read is a failed entry, the rest go on."""
    from mignurse.diagnose.sources import SourceError, load_offline
    from mignurse.untrusted import LimitError

    read: list[tuple[str, Gathered | None, str]] = []
    for text in paths:
        path = Path(text).expanduser()
        try:
            gathered = load_offline(path)
        except (SourceError, LimitError) as exc:
            read.append((path.name or text, None, str(exc)))
            continue
        read.append((gathered.context or path.name or text, gathered, ""))
    names = [name for name, _g, _why in read]
    # two bundles of one context are told apart by their file, the same file by its place
    names = [
        f"{name} ({Path(text).name or text})" if names.count(name) > 1 else name
        for name, text in zip(names, paths, strict=True)
    ]
    names = [f"{name} #{i + 1}" if names.count(name) > 1 else name for i, name in enumerate(names)]
    entries: list[Entry] = []
    for (_context, held, why), name in zip(read, names, strict=True):
        if held is None:
            entries.append((name, None, why))
            continue
        now = held.judge_time()  # may add a note of its own
        held.notices.extend(_unread_in_bundle(held))
        for notice in held.notices:
            _say(sys.stderr, f"note: {name}: {notice}")
        entries.append((name, _inventory_of(held, now, name), ""))
    return entries


def _unread_in_bundle(gathered: Gathered) -> list[str]:
    """What a bundle (or a folder of dumps) left out that the inventory would show, each
    said once: the table says `not read` where it shows."""
    notes = []
    if gathered.daemonsets is None:
        notes.append(
            "no daemonsets.json: mig-manager, the DRA driver, the node monitoring agent and "
            "gpu-operator's validator are not read"
        )
    if gathered.snapshot.karpenter and gathered.karpenter is None:
        notes.append("no karpenter.json: Karpenter's version, gates and NodeRepair are not read")
    groups = sorted(
        {n.pool for n in gathered.snapshot.gpu_nodes() if n.pool_kind == "nodegroup"}
        - set(gathered.nodegroups)
    )
    if groups:
        notes.append(
            f"no repair settings for node group(s) {', '.join(groups)} (nodegroups.json): not read"
        )
    return notes


def _live(args: argparse.Namespace) -> int:
    """The selected contexts' inventories side by side (`read_clusters`: each under the
    one-shot deadline; a failing one is a line on stderr as it ends), and where they differ.
    The exit code is the worst a cluster gave."""
    clusters = read_clusters(args, lambda client: live_entry(client, args))
    entries: list[Entry] = [
        cluster.result
        if cluster.connected
        else (
            cluster.context,
            None,
            f"{cluster.status_words}: "
            + cluster.message.removeprefix(f"context {cluster.context!r}: "),
        )
        for cluster in clusters
    ]
    # the kubeconfig cluster entry of each context, as `nodes` and `diagnose` name it
    on = {cluster.context: cluster.cluster or None for cluster in clusters}
    code = show(entries, output=args.output, said=True, clusters=on)
    failed = [cluster_exit_code(c, args.command) for c in clusters if not c.connected]
    return max([code, *failed])


def live_entry(client: ClusterClient, args: argparse.Namespace) -> Entry:
    """One connected cluster's inventory, named by its context: what `diagnose` reads (the
    snapshot, DaemonSets, the Karpenter Deployment, the ClusterPolicy, node groups through
    EKS, the local history); its notes on stderr."""
    from mignurse.diagnose.sources import load_live
    from mignurse.paths import history_file

    name = client.info.context
    simulated = is_simulated(args.kubeconfig, client.info.cluster)
    gathered = load_live(
        client,
        history_path=history_file(client.info, reading=True),
        nodegroups=None if simulated else nodegroup_reader(args, client.info.cluster),
    )
    if simulated and any(n.pool_kind == "nodegroup" for n in gathered.snapshot.gpu_nodes()):
        gathered.notices.append(
            "the managed node groups' repair settings are not read: a simulated cluster has "
            "no EKS API to describe them"
        )
    now = gathered.collected_at or client.server_now()
    for notice in gathered.notices:
        _say(sys.stderr, f"note: {name}: {notice}")
    return name, _inventory_of(gathered, now, name), ""


def _inventory_of(gathered: Gathered, now: datetime | None, name: str) -> ClusterInventory:
    """The inventory, with the critical findings of a diagnosis at `now` (none without a
    moment to judge at)."""
    from mignurse.diagnose.engine import diagnose
    from mignurse.diagnose.inventory import inventory

    if now is None or not _judgeable(now):
        _say(sys.stderr, f"note: {name}: no time to judge by, so its findings were not looked for")
        return inventory(gathered.to_input(datetime.now(UTC)))
    inp = gathered.to_input(now)
    return inventory(inp, diagnose(inp).findings)


def _judgeable(moment: datetime) -> bool:
    """Rules add and subtract hours and days: a moment near datetime's ends overflows."""
    return datetime(1970, 1, 1, tzinfo=UTC) <= moment < datetime(9000, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------ showing


def show(
    entries: Sequence[Entry],
    *,
    output: str,
    out: IO[str] | None = None,
    said: bool = False,
    clusters: Mapping[str, str | None] | None = None,
) -> int:
    """Draw one or more clusters' inventories (a failed one as its reason, on stderr unless
    `said` already) as a table, or the JSON document; with more than one, the fields that
    differ between them. `clusters`: each name's kubeconfig cluster entry, for the JSON
    (a bundle's is not known: null). Returns the exit code: 2 when any cluster failed."""
    from mignurse.diagnose.inventory import differences, shared_combinations

    out = out or sys.stdout
    good = [(name, inv) for name, inv, _why in entries if inv is not None]
    failed = [(name, why) for name, inv, why in entries if inv is None]
    for name, why in [] if said else failed:
        _say(sys.stderr, f"mignurse: {name}: {why}")
    diffs = differences(good)
    shared = shared_combinations(good)
    if output == "json":
        document = {
            "apiVersion": "mignurse/v1",
            "kind": "Inventory",
            "clusters": [
                {"context": name, "cluster": (clusters or {}).get(name)}
                | (inv.to_json() if inv is not None else {"error": why})
                for name, inv, why in entries
            ],
            "differences": [d.to_json(clusters) for d in diffs],
            "sharedCombinations": [s.to_json(clusters) for s in shared],
        }
        out.write(dumps_indented(document) + "\n")  # one write: every control escaped
        return EXIT_USAGE if failed else EXIT_OK
    if len(good) == 1:
        _print_one(*good[0], out)
    elif good:
        _print_differences(good, diffs, out)
    _print_shared(shared, several=len(good) > 1, out=out)
    return EXIT_USAGE if failed else EXIT_OK


def _counted(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


def _print_one(name: str, inv: ClusterInventory, out: IO[str]) -> None:
    from mignurse.diagnose.inventory import CLUSTER_FIELDS, KIND_WORDS, POOL_FIELDS

    _say(out, f"Cluster {name}")
    stack_rows = [
        [title, value.value, value.source]
        for key, title in CLUSTER_FIELDS
        for value in inv.stack[key]
    ]
    print_rows(("FIELD", "VALUE", "READ FROM"), stack_rows, out)
    if not inv.pools:
        _say(out, "")
        _say(out, "No GPU pools.")
        return
    _say(out, "")
    rows: list[list[str]] = []
    for pool in inv.pools:
        kind = KIND_WORDS.get(pool.kind, pool.kind)
        rows.append([pool.pool, "kind", str(pool.nodes), kind])
        if not pool.nodes:
            rows.append([pool.pool, "nodes", "0", "none yet: nothing to read"])
        for key, title in POOL_FIELDS:
            values = pool.fields[key]
            for value, count in values[:SHOWN_VALUES]:
                rows.append([pool.pool, title, str(count), value])
            if len(values) > SHOWN_VALUES:
                rest = values[SHOWN_VALUES:]
                rows.append(
                    [
                        pool.pool,
                        title,
                        str(sum(c for _v, c in rest)),
                        f"… {len(rest)} more values (-o json lists them)",
                    ]
                )
    print_rows(("POOL", "FIELD", "NODES", "VALUE"), rows, out)


def _print_differences(
    clusters: Sequence[tuple[str, ClusterInventory]],
    diffs: Sequence[Difference],
    out: IO[str],
) -> None:
    from mignurse.diagnose.inventory import CLUSTER_FIELDS, POOL_FIELDS

    names = ", ".join(name for name, _inv in clusters)
    differing = {d.field for d in diffs}
    between = [d for d in diffs if d.between_clusters]
    within = [d for d in diffs if not d.between_clusters]
    if between:
        _say(out, f"Where {names} differ:")
        _difference_table(between, out)
    else:
        _say(out, f"No field differs between {names}.")
    if within:
        _say(out, "")
        _say(out, "Where pools, or the nodes of a pool, differ within a cluster:")
        _difference_table(within, out)
    same: list[str] = []
    first = clusters[0][1]
    for key, title in CLUSTER_FIELDS:
        if key not in differing and first.stack.get(key):
            same.append(f"{title} {first.stack[key][0].value}")
    for key, title in POOL_FIELDS:
        if key in differing:
            continue
        held = [v for _n, inv in clusters for p in inv.pools for v, _c in p.fields.get(key, ())]
        if held:
            same.append(f"{title} {held[0]}")
    if same:
        _say(out, "")
        _say(out, f"The same everywhere: {'; '.join(same)}.")


def _difference_table(diffs: Sequence[Difference], out: IO[str]) -> None:
    """FIELD, VALUE, CLUSTER, POOLS (NODES): a row per value and cluster that runs it."""
    rows: list[list[str]] = []
    for diff in diffs:
        for value, holders in diff.values[:SHOWN_VALUES]:
            by_cluster: dict[str, list[str]] = {}
            for holder in holders:
                pools = by_cluster.setdefault(holder.cluster, [])
                if holder.pool:
                    pools.append(f"{holder.pool} ({holder.nodes})")
            for cluster, pools in by_cluster.items():
                rows.append([diff.title, value, cluster, ", ".join(pools) or "(cluster-wide)"])
        if len(diff.values) > SHOWN_VALUES:
            more = len(diff.values) - SHOWN_VALUES
            rows.append([diff.title, f"… {more} more values (-o json lists them)", "-", "-"])
    print_rows(("FIELD", "VALUE", "CLUSTER", "POOLS (NODES)"), rows, out)


def _print_shared(shared: Sequence[SharedCombination], *, several: bool, out: IO[str]) -> None:
    from mignurse.diagnose.inventory import COMBINATION_FIELDS, FIELD_TITLES

    for item in shared:
        where = f"{item.cluster} pool {item.pool}" if several else f"Pool {item.pool}"
        _say(out, "")
        _say(
            out,
            f"{where}: {', '.join(item.findings)} (critical) on {_counted(item.nodes)} "
            f"running {item.combination.words()}.",
        )
        if item.unknown:
            unknown = ", ".join(FIELD_TITLES[f] for f in item.unknown)
            _say(out, f"  Not compared (not known there): {unknown}.")
        if len(item.unknown) == len(COMBINATION_FIELDS):
            continue  # nothing of it known: nothing compared
        if not item.elsewhere:
            _say(out, "  No other pool runs this combination.")
            continue
        _say(out, "  The same combination runs in:")
        for holder in item.elsewhere:
            cluster = f"{holder.cluster} " if several else ""
            _say(out, f"    {cluster}pool {holder.pool} ({_counted(holder.nodes)})")


def _say(out: IO[str], line: str) -> None:
    """One line of ours that quotes cluster strings: inert whatever stream it goes to (a
    line feed in a name shows as `\\n`, it starts no line of its own)."""
    from mignurse.inert import inert

    out.write(inert(line) + "\n")
