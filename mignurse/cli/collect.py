"""`mignurse collect`: a support bundle of the cluster's view and its nodes' files."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    UserError,
    access_for,
    check_ssm_upload,
    connect,
    connection_options,
    is_simulated,
    nodegroup_reader,
    seconds_option,
    ssm_upload_option,
)

if TYPE_CHECKING:
    from mignurse.cluster.client import ClusterClient
    from mignurse.cluster.snapshot import Snapshot
    from mignurse.model import Node
    from mignurse.nodeaccess.base import NodeShell

_SINCE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE_DAYS = 365


def add_parser(sub: Any) -> None:
    collect = sub.add_parser(
        "collect",
        help="a support bundle: the cluster's view plus each node's journals, cloud-init and "
        "MIG state, before Karpenter deletes the evidence",
        description="Exit code: 0 every node collected, 1 some nodes could not be, 2 nothing "
        "was written (the reason on stderr).",
    )
    connection_options(collect, top=False)
    collect.add_argument("nodes", nargs="*", metavar="NODE", help="node names (domain optional)")
    collect.add_argument(
        "--local",
        action="store_true",
        help="collect this machine (run on the node itself, as root): no cluster needed",
    )
    collect.add_argument("--nodepool", help="every node of this NodePool or node group")
    collect.add_argument(
        "--unhealthy", action="store_true", help="every GPU node NotReady or under a repair clock"
    )
    collect.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="bundle path, or a folder for it (default: ./mignurse-bundle-CONTEXT-TIME.tar.gz)",
    )
    collect.add_argument(
        "--since", default="6h", help="journal window, e.g. 90m, 6h, 2d (default 6h)"
    )
    collect.add_argument(
        "--transport",
        choices=("auto", "ssm", "ssh", "nodediagnostic", "sim"),
        default="auto",
        help="how to reach the nodes (auto: the simulator's sandboxes on a simulated cluster, "
        "else SSM when --bucket is given, else SSH; a node these cannot reach is captured by "
        "the EKS node monitoring agent's NodeDiagnostic where the cluster serves it)",
    )
    collect.add_argument(
        "--bucket",
        help="SSM, NodeDiagnostic: an S3 bucket the node uploads its archive to (through a "
        "presigned URL: the node role needs no S3 permission); NodeDiagnostic without it "
        "fetches the archive through the API server's node proxy",
    )
    ssm_upload_option(collect)
    collect.add_argument("--profile", help="AWS profile, as the aws CLI")
    collect.add_argument("--region", help="AWS region, as the aws CLI")
    collect.add_argument("--concurrency", type=int, default=10, help="nodes at once (default 10)")
    collect.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per node (default 600)"
    )
    collect.add_argument("--no-redact", action="store_true", help="keep secrets (not for sharing)")
    collect.add_argument(
        "--obfuscate-network",
        action="store_true",
        help="replace IPs, MACs and host names consistently (the mapping stays on this machine)",
    )
    collect.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="SSH: trust and save unknown host keys (a changed key is still refused)",
    )


def journal_since(text: str) -> str:
    from mignurse.collect.run import journal_since_words

    try:
        words = journal_since_words(text)
    except ValueError as exc:
        raise UserError(f"--since {exc}") from None
    # journalctl takes any count; one past the journal's reach only hides a typo.
    if int(text[:-1]) * _SINCE_SECONDS[text[-1]] > MAX_SINCE_DAYS * 86400:
        raise UserError(f"--since {text} is over a year: give at most {MAX_SINCE_DAYS}d")
    return words


def _collect_local(args: argparse.Namespace, since: str) -> int:
    """This machine's own files, for break-glass use on a node without the API."""
    import socket

    from mignurse.cluster.snapshot import Snapshot
    from mignurse.collect.redact import Redactor
    from mignurse.collect.run import collect
    from mignurse.model import Node
    from mignurse.nodeaccess.local import LocalShell

    if args.nodes or args.nodepool or args.unhealthy:
        raise UserError("--local collects this machine only: leave out node names and filters")
    host = socket.gethostname()
    out = _bundle_path(args.output, f"mignurse-bundle-local-{host}.tar.gz")
    print(f"collecting this machine ({host}) into {out} (journals since {since})", file=sys.stderr)
    manifest = collect(
        None,
        Snapshot(nodes={}),
        [Node(name=host)],
        shell_for=lambda node: LocalShell(node.name),
        out=out,
        since=since,
        redactor=Redactor(enabled=not args.no_redact, obfuscate_network=args.obfuscate_network),
        node_timeout=args.timeout,
    )
    outcome = manifest["nodes"][host]
    print(f"bundle: {out} ({out.stat().st_size / 2**20:.1f} MiB) in {manifest['seconds']:.1f} s")
    if not outcome["ok"]:
        print(f"  incomplete: {outcome['error'] or '; '.join(outcome['problems'])}")
        return 1
    return EXIT_OK


class _CollectProgress:
    """Per-node progress: a live rich bar and node list on a terminal, else one line a node."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.ok = 0
        self._live = None
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            from mignurse.render import console_for

            self._live = Progress(
                TextColumn("collecting"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=console_for(sys.stderr),
                transient=False,
            )
            self._task = self._live.add_task("", total=total)
            self._live.start()

    def __call__(self, node: str, state: str) -> None:
        if state.startswith("collecting"):
            if self._live is not None:
                from mignurse.inert import inert_markup

                self._live.update(self._task, description=inert_markup(f"{node}: {state}"))
            elif ": " in state:  # a step of a long capture (NodeDiagnostic): one line each
                print(f"  {node}: {state}", file=sys.stderr, flush=True)
            return
        self.done += 1
        self.ok += state == "ok"
        line = f"[{self.done}/{self.total}] {node}: {state}"
        if self._live is not None:
            from mignurse.render import cell_text

            self._live.console.print(cell_text(line))
            self._live.update(self._task, advance=1, description="")
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _bundle_path(output: str | None, name: str) -> Path:
    """`-o FILE`, or `name` in the current folder, or in `-o DIR` when that is a folder."""
    out = Path(output or name)
    if out.is_dir():
        out = out / name
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    return out


def cmd_collect(args: argparse.Namespace) -> int:
    from mignurse.cluster.load import load_snapshot
    from mignurse.collect.run import select_nodes
    from mignurse.collect.transports import shell_factory

    access = access_for(args)
    since = journal_since(args.since)
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    seconds_option("--timeout", args.timeout)
    if args.local:
        return _collect_local(args, since)
    check_ssm_upload(args)
    if not (args.nodes or args.nodepool or args.unhealthy):
        raise UserError("name the nodes to collect, or use --nodepool POOL or --unhealthy")
    from mignurse.cluster.contexts import several

    if several(args.context, bool(getattr(args, "all_contexts", False))):
        return _collect_each_context(args)
    client = connect(args)
    try:
        loaded = load_snapshot(client)
        for notice in loaded.notices:
            print(f"note: {notice}", file=sys.stderr)
        nodes = select_nodes(
            loaded.snapshot, names=args.nodes, nodepool=args.nodepool, unhealthy=args.unhealthy
        )
        if not nodes:
            print("No node matches: nothing to collect.", file=sys.stderr)
            return EXIT_OK
        simulated = is_simulated(args.kubeconfig, client.info.cluster)
        transport = access.resolve(simulated=simulated)
        now = client.server_now()
        out = _bundle_path(
            args.output, f"mignurse-bundle-{client.info.context}-{now:%Y%m%dT%H%M%SZ}.tar.gz"
        )
        import tempfile  # here: a command that needs no folder never loads it

        # ignore_cleanup_errors: a sandbox killed at Ctrl-C may still be writing for a moment
        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            shell_for = shell_factory(
                client, access, sandboxes=Path(sandboxes), simulated=simulated, collecting=True
            )
            manifest = _collect_with_progress(
                args, client, loaded.snapshot, nodes, shell_for, out, since, transport, now
            )
    finally:
        client.close()
    if manifest is None:
        return 130
    failed = {name: n for name, n in manifest["nodes"].items() if not n["ok"]}
    size = out.stat().st_size / 2**20
    print(
        f"bundle: {out} ({size:.1f} MiB), {len(nodes) - len(failed)}/{len(nodes)} nodes collected"
        f" in {manifest['seconds']:.1f} s; read it with: mignurse diagnose --from {out}"
    )
    for name, node in failed.items():
        print(f"  not collected: {name}: {node['error'] or '; '.join(node['problems'])}")
    return 1 if failed else EXIT_OK


def _collect_each_context(args: argparse.Namespace) -> int:
    """`--unhealthy` or `--nodepool` across several contexts: one bundle per cluster, each
    cluster collected in turn as one context is (its nodes side by side), in kubeconfig
    order. A cluster that cannot be read or collected is one line, and the next one goes
    on; Ctrl-C stops them all. The exit code is the worst a cluster gave."""
    from mignurse.cli import user_errors
    from mignurse.cluster.contexts import select_contexts
    from mignurse.inert import inert

    if args.nodes:
        raise UserError(
            "a node belongs to one cluster: give one --context with NODE names, or use "
            "--unhealthy or --nodepool POOL across contexts"
        )
    if args.output and not Path(args.output).expanduser().is_dir():
        raise UserError(
            f"-o {args.output}: with several contexts, -o names a folder (one bundle per "
            "cluster goes into it)"
        )
    contexts = select_contexts(args.kubeconfig, args.context, bool(args.all_contexts))
    worst = EXIT_OK
    for context in contexts:
        print(f"context {context}:", file=sys.stderr, flush=True)
        one = argparse.Namespace(**{**vars(args), "context": context, "all_contexts": False})
        try:
            code = cmd_collect(one)
        except Exception as exc:
            if not isinstance(exc, user_errors(args.command)) or getattr(args, "debug", False):
                raise
            print(f"mignurse: error: context {context!r}: {inert(str(exc))}", file=sys.stderr)
            code = int(getattr(exc, "exit_code", EXIT_USAGE))
        if code == 130:
            return code
        worst = max(worst, code)
    return worst


def _collect_with_progress(
    args: argparse.Namespace,
    client: ClusterClient,
    snapshot: Snapshot,
    nodes: list[Node],
    shell_for: Callable[[Node], NodeShell],
    out: Path,
    since: str,
    transport: str,
    collected_at: datetime,
) -> dict[str, Any] | None:
    """The bundle's manifest, collected with per-node progress on stderr; None when Ctrl-C
    stopped it (stderr then says the partial bundle is valid)."""
    from mignurse.collect.redact import Redactor
    from mignurse.collect.run import collect

    progress = _CollectProgress(len(nodes))
    print(
        f"collecting {len(nodes)} node(s) over {transport} into {out} "
        f"(journals since {since}, {args.concurrency} at once)",
        file=sys.stderr,
        flush=True,
    )
    try:
        return collect(
            client,
            snapshot,
            nodes,
            shell_for=shell_for,
            out=out,
            since=since,
            redactor=Redactor(enabled=not args.no_redact, obfuscate_network=args.obfuscate_network),
            concurrency=args.concurrency,
            node_timeout=args.timeout,
            progress=progress,
            nodegroups=None if transport == "sim" else nodegroup_reader(args, client.info.cluster),
            collected_at=collected_at,  # the moment in the bundle's name
        )
    except KeyboardInterrupt:
        progress.close()
        if not out.exists():  # stopped again while the bundle was being closed
            print(f"interrupted: no bundle was written to {out}", file=sys.stderr)
            return None
        print(
            f"interrupted: {out} is a valid partial bundle ({progress.ok}/{len(nodes)} "
            f"nodes collected); read it with: mignurse diagnose --from {out}",
            file=sys.stderr,
        )
        return None
    finally:
        progress.close()
