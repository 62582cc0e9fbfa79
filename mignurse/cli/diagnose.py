"""`mignurse diagnose`: findings with evidence, live or from a snapshot or bundle."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import (
    UserError,
    cluster_exit_code,
    cluster_record,
    connection_options,
    nodegroup_reader,
    one_context,
    read_clusters_begun,
)
from mignurse.jsontext import dumps_indented

if TYPE_CHECKING:
    from mignurse.diagnose.engine import Diagnosis
    from mignurse.diagnose.inputs import DiagnosisInput
    from mignurse.diagnose.sources import Gathered


def add_parser(sub: Any) -> None:
    diagnose = sub.add_parser(
        "diagnose",
        help="findings with evidence: live, or offline from a snapshot directory or bundle",
        description="Exit code: 0 no findings, 1 warnings, 2 critical findings (or an error, "
        "said on stderr).",
    )
    connection_options(diagnose, top=False)
    diagnose.add_argument(
        "--from",
        dest="source",
        metavar="DIR|BUNDLE.tar.gz",
        help="diagnose a snapshot instead of the live cluster (a bundle from `collect`, or a "
        "directory of `kubectl get … -o json` dumps)",
    )
    diagnose.add_argument(
        "--now",
        help="the moment to judge at, RFC 3339 (offline default: the bundle's collected_at, "
        "else its newest timestamp)",
    )
    diagnose.add_argument("-o", "--output", choices=("table", "json"), default="table")
    diagnose.add_argument("--nodepool", help="only findings about this NodePool or node group")
    diagnose.add_argument("--node", help="only findings that name this node, then its timeline")
    diagnose.add_argument(
        "--profile", help="AWS profile for managed node groups' repair settings (live only)"
    )
    diagnose.add_argument("--region", help="AWS region, as the aws CLI (live only)")
    diagnose.add_argument(
        "--state-dir", help="where `mignurse watch` keeps the history (live mode)"
    )


def cmd_diagnose(args: argparse.Namespace) -> int:
    from mignurse.cluster.contexts import several

    given = _now_flag(args.now)
    if args.source and several(args.context, bool(args.all_contexts)):
        raise UserError("--from reads one snapshot or bundle: leave out --context and "
                        "--all-contexts")  # fmt: skip
    if args.node and not args.source:
        # A node belongs to one cluster: a glob or list that selects one context is it.
        context = one_context(
            args, "`mignurse diagnose --node`", several="diagnose without --node takes several"
        )
        args = argparse.Namespace(**{**vars(args), "context": context, "all_contexts": False})
    # A live read waits on the API server for as long as the rules take to load: it is begun
    # first, and the rules load while the cluster answers.
    reading = None
    if not args.source:
        reader = live_reader(args)
        reading = read_clusters_begun(
            args,
            reader,
            several_read=lambda client: _judged(reader(client), given, client.server_now()),
        )
    from mignurse.diagnose.engine import Diagnosis, diagnose
    from mignurse.model import format_time
    from mignurse.render import as_of_words, print_findings, print_timeline

    # How many contexts were selected decides the output, not how they were named: a glob
    # that selects one is the single-context diagnosis.
    clusters = reading() if reading is not None else None
    if clusters is not None and len(clusters) > 1:
        return _several(args, given, clusters)
    gathered, now, context = _gather(args, given, clusters)
    for notice in gathered.notices:
        print(f"note: {notice}", file=sys.stderr)
    inp = gathered.to_input(now)
    everything = diagnose(inp)
    node = _diagnosed_node(args.node, inp, context) if args.node else None
    if args.nodepool:
        _check_pool(args.nodepool, inp.snapshot, everything.findings, context)
    result = Diagnosis(
        [
            f
            for f in everything.findings
            if (args.nodepool is None or f.nodepool == args.nodepool)
            and (node is None or node in f.nodes)
        ],
        everything.rule_errors,
    )
    timeline = []
    if node:
        from mignurse.diagnose.timeline import node_timeline  # only a node's diagnosis shows one

        timeline = node_timeline(inp, node)
    for error in result.rule_errors:
        print(f"warning: a rule failed and was skipped: {error}", file=sys.stderr)
    if args.output == "json":
        document = _json_document(args, context, now, gathered, inp, result)
        if node:
            document["timeline"] = [entry.to_json() for entry in timeline]
        # One write: the inert stdout looks at it once (every control escaped in it).
        sys.stdout.write(dumps_indented(document) + "\n")
    else:
        # A bundle is judged at its collection time: its deadlines are moments then, not a
        # countdown from now, and the first line says so.
        as_of = "--now" if given else "collection" if args.source else ""
        if as_of and result.findings:
            print(as_of_words(now, _judged_at(args, given, gathered)))
        if result.findings:
            print_findings(result.findings, now, as_of=as_of)
        else:
            read = (
                f" ({gathered.layout} bundle)"
                if args.source and gathered.layout != "mignurse"
                else ""
            )
            print(f"No findings in {context}{read} as of {format_time(now)}.")
        if node:
            print_timeline(node, timeline)
    return result.exit_code


def _judged_at(args: argparse.Namespace, given: datetime | None, gathered: Gathered) -> str:
    """What the moment judged at is, for the "as of" line."""
    if given is not None:
        return "--now"
    name = Path(args.source).name
    return f"bundle {name}, when collected" if gathered.collected_at else f"{name}, newest time"


def _now_flag(text: str | None) -> datetime | None:
    """`--now`, checked: an RFC 3339 time the rules can judge at, or None when not given."""
    from mignurse.model import parse_time

    if not text:
        return None
    now = parse_time(text)
    if now is None:
        raise UserError(f"--now {text!r} is not an RFC 3339 time (2026-11-29T03:00:00Z)")
    if not _judgeable(now):
        raise UserError(f"--now {text} is out of range: give a time from 1970 to 8999")
    return now


def _gather(
    args: argparse.Namespace, now: datetime | None, clusters: list[Any] | None
) -> tuple[Gathered, datetime, str]:
    """What to diagnose (a bundle or dump folder with `--from`, else the one live cluster
    read, `clusters`), the moment to judge at (`now`, else the source's own), and the
    context's name."""
    if clusters is None:
        from mignurse.diagnose.sources import load_offline  # the offline readers, only here

        gathered = load_offline(Path(args.source).expanduser())
        now = now or gathered.judge_time()
        if now is None:
            raise UserError(f"{args.source} holds no timestamp to judge by: pass --now")
        if not _judgeable(now):
            raise UserError(
                f"{args.source}: its newest time ({now.isoformat()}) is out of range: pass --now"
            )
        return gathered, now, gathered.context or Path(args.source).name
    (cluster,) = clusters
    gathered = cluster.result
    return gathered, now or gathered.collected_at or cluster.now, cluster.context


def live_reader(args: argparse.Namespace) -> Callable[[Any], Gathered]:
    """What is read of each live cluster: its snapshot, the Karpenter settings, its managed
    node groups' repair settings (through EKS) and its part of the local history."""
    from mignurse.collect.access import simulated_scenario  # loaded before any read begins
    from mignurse.diagnose.sources import load_live
    from mignurse.paths import history_file  # the store (and SQLite) load only if it exists

    state_dir = Path(args.state_dir).expanduser() if args.state_dir else None

    def read(client: Any) -> Gathered:
        return load_live(
            client,
            history_path=history_file(client.info, state_dir, reading=True),
            nodegroups=None
            if simulated_scenario(args.kubeconfig, client.info.cluster) is not None
            else nodegroup_reader(args, client.info.cluster),
        )

    return read


def judged_input(cluster: Any, given: datetime | None = None) -> DiagnosisInput:
    """A connected cluster's read (`live_reader`) as a diagnosis input, judged at `given`
    or at that cluster's own clock; its notices said on stderr, named by its context."""
    gathered = cluster.result
    for notice in gathered.notices:
        print(f"note: {cluster.context}: {notice}", file=sys.stderr)
    return gathered.to_input(given or gathered.collected_at or cluster.now)


class _Judged:
    """One of several clusters diagnosed where it was read (a worker process sends this,
    not the read: a hundredth of the bytes to pickle, and the rules run beside the other
    clusters'): its notices, the clock it was judged at, every finding, the rules that
    failed, its pools, and how each node a finding names gets its GPUs."""

    def __init__(
        self,
        notices: list[str],
        now: datetime,
        diagnosis: Any,
        pools: set[str],
        gpu_sources: dict[str, str],
    ) -> None:
        self.notices, self.now, self.diagnosis = notices, now, diagnosis
        self.pools, self.gpu_sources = pools, gpu_sources


def _judged(gathered: Gathered, given: datetime | None, clock: datetime) -> _Judged:
    """A cluster's read (`live_reader`) diagnosed at `given`, else at its API server's
    `clock` (as `judged_input`)."""
    from mignurse.diagnose.engine import diagnose

    inp = gathered.to_input(given or gathered.collected_at or clock)
    result = diagnose(inp)
    snapshot = inp.snapshot
    pools = {n.pool for n in snapshot.nodes.values() if n.pool}
    pools |= set(snapshot.nodepools) | {f.nodepool for f in result.findings}
    sources = {
        name: snapshot.gpu_source(snapshot.nodes[name])
        for name in sorted({n for f in result.findings for n in f.nodes})
        if name in snapshot.nodes
    }
    return _Judged(list(gathered.notices), inp.now, result, pools, sources)


def _several(args: argparse.Namespace, given: datetime | None, clusters: list[Any]) -> int:
    """Several clusters diagnosed: their findings worst first across them all, each with
    its cluster; a failed cluster was one line on stderr and is a record in the JSON. The
    exit code is the worst of them (a failed cluster counts as the error it gives alone).
    Each cluster's result is its `_Judged`. A command a finding suggests names its
    cluster's context, so that run as printed it acts on that cluster."""
    from mignurse.diagnose.engine import Diagnosis
    from mignurse.diagnose.findings import SEVERITY_ORDER, sort_findings
    from mignurse.model import format_time
    from mignurse.render import as_of_words, print_findings

    code = max([0, *(cluster_exit_code(c, args.command) for c in clusters if not c.connected)])
    found: list[tuple[Any, Any, datetime]] = []  # (cluster, finding, its clock)
    records = []
    pools: set[str] = set()
    for cluster in clusters:
        record = cluster_record(cluster)
        records.append(record)
        if not cluster.connected:
            continue
        judged: _Judged = cluster.result
        for notice in judged.notices:
            print(f"note: {cluster.context}: {notice}", file=sys.stderr)
        now = judged.now
        result = judged.diagnosis
        pools |= judged.pools
        findings = [
            _with_context(f, cluster.context)
            for f in result.findings
            if args.nodepool is None or f.nodepool == args.nodepool
        ]
        for error in result.rule_errors:
            print(f"warning: {cluster.context}: a rule failed and was skipped: {error}",
                  file=sys.stderr)  # fmt: skip
        code = max(code, Diagnosis(findings, result.rule_errors).exit_code)
        found += [(cluster, f, now) for f in findings]
        record["now"] = format_time(now)
        named = {n for f in findings for n in f.nodes}
        record["gpuSources"] = {n: s for n, s in judged.gpu_sources.items() if n in named}
        record["ruleErrors"] = result.rule_errors
    connected = [c for c in clusters if c.connected]
    if args.nodepool and connected and args.nodepool not in pools:
        names = ", ".join(repr(c.context) for c in connected)
        raise UserError(f"no NodePool or node group named {args.nodepool!r} in {names}")
    # Worst first across the clusters: the engine's order, each cluster's findings kept in
    # kubeconfig order within the same rank.
    rank = {id(f): i for i, f in enumerate(sort_findings([f for _, f, _ in found]))}
    found.sort(key=lambda item: (SEVERITY_ORDER.get(item[1].severity, 9), rank[id(item[1])]))
    if args.output == "json":
        document = {
            "apiVersion": "mignurse/v1",
            "kind": "Diagnosis",
            "contexts": [c.context for c in clusters],
            "clusters": records,
            "findings": [
                {"context": c.context, "cluster": c.cluster, **f.to_json()} for c, f, _ in found
            ],
        }
        sys.stdout.write(dumps_indented(document) + "\n")
        return code
    if found:
        if given:
            print(as_of_words(given, "--now"))
        print_findings(
            [f for _, f, _ in found],
            given or found[0][2],
            as_of="--now" if given else "",
            clusters=[c.context for c, _, _ in found],
            nows=[now for _, _, now in found],
        )
    elif connected:
        names = ", ".join(c.context for c in connected)
        print(f"No findings in {names}.")
    return code


def _with_context(finding: Any, context: str) -> Any:
    """`finding` with the mignurse commands its summary suggests pinned to `context`
    (`wording.with_context`, as `radar` pins its commands across clusters)."""
    from dataclasses import replace

    from mignurse.diagnose.wording import with_context

    summary = with_context(finding.summary, context)
    return finding if summary == finding.summary else replace(finding, summary=summary)


def _json_document(
    args: argparse.Namespace,
    context: str,
    now: datetime,
    gathered: Gathered,
    inp: DiagnosisInput,
    result: Diagnosis,
) -> dict[str, Any]:
    """The findings as `-o json` writes them (the caller adds the node's timeline)."""
    from mignurse.model import format_time

    return {
        "apiVersion": "mignurse/v1",
        "kind": "Diagnosis",
        "context": context,
        "now": format_time(now),
        **({"layout": gathered.layout} if args.source else {}),
        "findings": [f.to_json() for f in result.findings],
        # how each named node's GPUs reach pods: device-plugin or dra
        "gpuSources": {
            name: inp.snapshot.gpu_source(inp.snapshot.nodes[name])
            for name in sorted({n for f in result.findings for n in f.nodes})
            if name in inp.snapshot.nodes
        },
        "ruleErrors": result.rule_errors,
    }


def _diagnosed_node(typed: str, inp: Any, context: str) -> str:
    """The node `--node` means, in full or as `nodes` prints it (without its domain)."""
    from mignurse.nodeview import resolve_node_name

    names = {*inp.snapshot.nodes, *inp.events_by_node, *inp.node_evidence}
    full = resolve_node_name(typed, names)
    if full is not None:
        return full
    several = sorted(n for n in names if n.split(".", 1)[0] == typed)
    if several:
        raise UserError(
            f"{typed!r} is the short name of {len(several)} nodes in {context} "
            f"({', '.join(several)}): give the full name"
        )
    raise UserError(f"no node {typed!r} in {context}: check the name (mignurse nodes)")


def _check_pool(pool: str, snapshot: Any, findings: list[Any], context: str) -> None:
    """Refuse a pool the cluster (or bundle) does not have, as `nodes` does."""
    pools = {n.pool for n in snapshot.nodes.values() if n.pool}
    pools |= set(snapshot.nodepools) | {f.nodepool for f in findings if f.nodepool}
    if pool in pools:
        return
    known = sorted(
        {n.pool for n in snapshot.gpu_nodes() if n.pool}
        | {f.nodepool for f in findings if f.nodepool}
    )
    raise UserError(
        f"no NodePool or node group named {pool!r} in {context!r}"
        + (f": known GPU pools are {', '.join(known)}" if known else "")
    )


def _judgeable(moment: Any) -> bool:
    """Rules add and subtract hours and days: a moment near datetime's ends overflows."""
    from datetime import UTC, datetime

    return bool(datetime(1970, 1, 1, tzinfo=UTC) <= moment < datetime(9000, 1, 1, tzinfo=UTC))
