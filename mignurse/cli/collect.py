"""`mignurse collect`: a support bundle of the cluster's view and its nodes' files."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import (
    EXIT_INTERRUPTED,
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
    from mignurse.collect.events import CollectEvent
    from mignurse.collect.request import CollectRequest, CollectResult

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
        "--node",
        dest="named_nodes",
        action="append",
        default=[],
        metavar="NODE",
        help="a node, as other commands name one (may be given again; with NODE too)",
    )
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


def _collect_local(args: argparse.Namespace) -> int:
    """This machine's own files, for break-glass use on a node without the API."""
    import socket

    from mignurse.collect.events import STARTED
    from mignurse.collect.request import CollectRequest, run_collect
    from mignurse.model import Node
    from mignurse.nodeaccess.local import LocalShell

    if args.nodes or args.nodepool or args.unhealthy:
        raise UserError("--local collects this machine only: leave out node names and filters")
    host = socket.gethostname()

    def progress(event: CollectEvent) -> None:
        if event.kind == STARTED:
            print(
                f"collecting this machine ({host}) into {event.out} (journals since {event.text})",
                file=sys.stderr,
            )

    collected = run_collect(
        CollectRequest(
            None,
            out=_output(args),
            nodes=[Node(name=host)],
            shell_for=lambda node: LocalShell(node.name),
            since=args.since,
            node_timeout=args.timeout,
            redact=not args.no_redact,
            obfuscate_network=args.obfuscate_network,
            file_name=f"mignurse-bundle-local-{host}.tar.gz",
        ),
        progress,
    )
    out, manifest = collected.out, collected.manifest
    assert out is not None and manifest is not None  # this machine is always collected
    outcome = manifest["nodes"][host]
    print(f"bundle: {out} ({out.stat().st_size / 2**20:.1f} MiB) in {manifest['seconds']:.1f} s")
    if not outcome["ok"]:
        print(f"  incomplete: {outcome['error'] or '; '.join(outcome['problems'])}")
        return 1
    return EXIT_OK


class _CollectProgress:
    """What a collection says on stderr: its notes, the line it starts with, and per-node
    progress: a live rich bar and node list on a terminal, else one line a node."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.total = 0
        self.done = 0
        self.ok = 0
        self.out: Path | None = None  # the bundle's, once started
        self._live: Any = None

    def __call__(self, event: CollectEvent) -> None:
        from mignurse.collect.events import NODE_DONE, NODE_STEP, NOTICE, STARTED

        if event.kind == NOTICE:
            print(f"note: {event.text}", file=sys.stderr)
        elif event.kind == STARTED:
            self._start(event)
        elif event.kind == NODE_STEP:
            if self._live is not None:
                from mignurse.inert import inert_markup

                self._live.update(
                    self._task, description=inert_markup(f"{event.node}: {event.text}")
                )
            elif ": " in event.text:  # a step of a long capture (NodeDiagnostic): one line each
                print(f"  {event.node}: {event.text}", file=sys.stderr, flush=True)
        elif event.kind == NODE_DONE:
            self.done += 1
            self.ok += event.ok
            line = f"[{self.done}/{self.total}] {event.node}: {event.text}"
            if self._live is not None:
                from mignurse.render import cell_text

                self._live.console.print(cell_text(line))
                self._live.update(self._task, advance=1, description="")
            else:
                print(line, file=sys.stderr, flush=True)

    def _start(self, event: CollectEvent) -> None:
        self.total, self.out = event.nodes, event.out
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
            self._task = self._live.add_task("", total=self.total)
            self._live.start()
        print(
            f"collecting {self.total} node(s) over {event.transport} into {self.out} "
            f"(journals since {event.text}, {self.concurrency} at once)",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _output(args: argparse.Namespace) -> Path | None:
    """Where the bundle goes. `-o out/` names a folder (the trailing slash says so), which
    must exist: without this check it would be taken for the bundle's own file name."""
    if not args.output:
        return None
    if args.output.endswith(("/", os.sep)) and not Path(args.output).expanduser().is_dir():
        raise _no_folder(args.output, "")
    return Path(args.output)


def _no_folder(output: str, why: str) -> UserError:
    from shlex import quote

    return UserError(
        f"-o {output}: no such folder: create it first (mkdir -p {quote(output)}){why}"
    )


def cmd_collect(args: argparse.Namespace) -> int:
    from mignurse.collect.request import CollectRequest

    args.nodes = [*args.nodes, *args.named_nodes]  # NODE … and --node NODE name the same

    access = access_for(args)
    journal_since(args.since)
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    seconds_option("--timeout", args.timeout)
    if args.local:
        return _collect_local(args)
    check_ssm_upload(args)
    if not (args.nodes or args.nodepool or args.unhealthy):
        raise UserError("name the nodes to collect, or use --nodepool POOL or --unhealthy")
    from mignurse.cluster.contexts import select_contexts, several

    all_contexts = bool(getattr(args, "all_contexts", False))
    if several(args.context, all_contexts):
        # What was selected decides, not how: a glob or list that selects one context is
        # the single-context collection, its bundle where one context's goes.
        contexts = select_contexts(args.kubeconfig, args.context, all_contexts)
        if len(contexts) > 1:
            return _collect_each_context(args, contexts)
        args = argparse.Namespace(**{**vars(args), "context": contexts[0], "all_contexts": False})
    client = connect(args)
    try:
        request = CollectRequest(
            client,
            out=_output(args),
            names=args.nodes,
            nodepool=args.nodepool,
            unhealthy=args.unhealthy,
            access=access,
            simulated=is_simulated(args.kubeconfig, client.info.cluster),
            nodegroups=nodegroup_reader(args, client.info.cluster),
            since=args.since,
            concurrency=args.concurrency,
            node_timeout=args.timeout,
            redact=not args.no_redact,
            obfuscate_network=args.obfuscate_network,
        )
        collected = _collect_with_progress(request)
    finally:
        client.close()
    if collected is None:
        return EXIT_INTERRUPTED
    if not collected.nodes:
        print("No node matches: nothing to collect.", file=sys.stderr)
        return EXIT_OK
    out, nodes, manifest = collected.out, collected.nodes, collected.manifest
    assert out is not None and manifest is not None  # nodes were collected
    failed = {name: n for name, n in manifest["nodes"].items() if not n["ok"]}
    counted = f"{len(nodes) - len(failed)}/{len(nodes)} nodes collected"
    took = f"{manifest['seconds']:.1f} s"
    from mignurse.collect.bundle import is_stream  # (loaded by the collection)

    if is_stream(out):  # a FIFO or a device: what read it has the bundle
        print(f"bundle: written to {out}, {counted} in {took}")
    else:
        print(
            f"bundle: {out} ({out.stat().st_size / 2**20:.1f} MiB), {counted} in {took}; read "
            f"it with: mignurse diagnose --from {out}"
        )
    for name, node in failed.items():
        print(f"  not collected: {name}: {node['error'] or '; '.join(node['problems'])}")
    return 1 if failed else EXIT_OK


def _collect_each_context(args: argparse.Namespace, contexts: list[str | None]) -> int:
    """`--unhealthy` or `--nodepool` across several contexts: one bundle per cluster, each
    cluster collected in turn as one context is (its nodes side by side), in kubeconfig
    order. A cluster that cannot be read or collected is one line, worded as `nodes` words
    a failed cluster, and the next one goes on; Ctrl-C stops them all. The exit code is the
    worst a cluster gave."""
    from mignurse.cli import user_errors
    from mignurse.cli.common import say_context_failed

    if args.nodes:
        raise UserError(
            "a node belongs to one cluster: give one --context with NODE names, or use "
            "--unhealthy or --nodepool POOL across contexts"
        )
    if args.output:
        _check_bundle_folder(args.output)
    worst = EXIT_OK
    for context in contexts:
        assert context is not None  # several contexts are always named
        print(f"context {context}:", file=sys.stderr, flush=True)
        one = argparse.Namespace(**{**vars(args), "context": context, "all_contexts": False})
        try:
            code = cmd_collect(one)
        except Exception as exc:
            if not isinstance(exc, user_errors(args.command)) or getattr(args, "debug", False):
                raise
            say_context_failed(context, exc, args.command)
            code = int(getattr(exc, "exit_code", EXIT_USAGE))
        if code == EXIT_INTERRUPTED:
            return code
        worst = max(worst, code)
    return worst


def _check_bundle_folder(output: str) -> None:
    """Several clusters' bundles go into the folder `-o` names, which must exist: one line
    when it is a file (or is named as a bundle is), and one saying to create it when it is
    missing."""
    folder = Path(output).expanduser()
    if folder.is_dir():
        return
    if folder.exists() or folder.name.endswith((".tar.gz", ".tgz")):
        raise UserError(
            f"-o {output}: with several contexts, -o names a folder (one bundle per cluster "
            "goes into it), not a file"
        )
    raise _no_folder(
        output, "; with several contexts, -o names a folder (one bundle per cluster goes into it)"
    )


def _collect_with_progress(request: CollectRequest) -> CollectResult | None:
    """The collection `request` asks for, with its progress on stderr; None when Ctrl-C
    stopped it (stderr then says whether the partial bundle is valid)."""
    from mignurse.collect.bundle import StoppedBeforeWriting
    from mignurse.collect.request import run_collect

    progress = _CollectProgress(request.concurrency)
    try:
        return run_collect(request, progress)
    except KeyboardInterrupt as exc:
        progress.close()
        out = progress.out
        if out is None:  # stopped before any node started: nothing was written
            raise
        if isinstance(exc, StoppedBeforeWriting):
            print(f"interrupted: nothing was written to {out}", file=sys.stderr)
            return None
        if not out.exists():  # stopped again while the bundle was being closed
            print(f"interrupted: no bundle was written to {out}", file=sys.stderr)
            return None
        print(
            f"interrupted: {out} is a valid partial bundle ({progress.ok}/{progress.total} "
            f"nodes collected); read it with: mignurse diagnose --from {out}",
            file=sys.stderr,
        )
        return None
    finally:
        progress.close()
