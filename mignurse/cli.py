"""The `mignurse` command: argument parsing and the command-line faces.

Every failure a user can cause or meet (bad flags, a wrong context, a dead API server,
RBAC) ends as one line on stderr and a non-zero exit code, never a traceback; `--debug`
shows the traceback for bug reports.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mignurse import __version__

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERNAL = 3
DEMO_DEFAULT_SCENARIO = "dcgm-repair-loop"
DEMO_DEFAULT_SPEED = 10.0


class UserError(Exception):
    """A problem the user can fix; str() is the one line to show."""

    exit_code = EXIT_USAGE


def _connection_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # Sub-commands accept the same flags; SUPPRESS keeps them from resetting the top level's.
    default = None if top else argparse.SUPPRESS
    group = parser.add_argument_group("cluster connection (as kubectl)")
    group.add_argument(
        "--kubeconfig",
        default=default,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument(
        "--context", default=default, help="kubeconfig context (default: the current one)"
    )
    if "--debug" not in parser._option_string_actions:
        parser.add_argument(
            "--debug",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="show tracebacks on errors",
        )


def _app_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The app's global flags; a sub-command accepts them too (ignored where they do not
    apply), and SUPPRESS keeps an absent one from resetting the top level's."""
    flags: list[tuple[str, dict[str, Any]]] = [
        ("--read-only", {"action": "store_true",
                         "help": "the app offers no action that changes the cluster"}),
        ("--auto-collect", {"metavar": "DIR", "help": "the app collects each node into DIR "
                            "as soon as its repair clock starts"}),
        ("--light", {"action": "store_true", "help": "the app in a light theme, for light "
                     "terminal backgrounds (`:` theme changes it)"}),
        ("--profile", {"help": "AWS profile for what the app does in AWS (runbooks' "
                       "steps), as the aws CLI"}),
        ("--region", {"help": "AWS region for what the app does in AWS, as the aws CLI"}),
    ]  # fmt: skip
    for flag, options in flags:
        if flag in parser._option_string_actions:
            continue  # the sub-command has its own (watch --auto-collect)
        if not top:
            options = {**options, "default": argparse.SUPPRESS}
        parser.add_argument(flag, **options)


def _global_options(parser: argparse.ArgumentParser) -> None:
    """Every global flag on a sub-command's parser that it does not define itself."""
    have = parser._option_string_actions
    if "--kubeconfig" not in have:
        _connection_options(parser, top=False)  # --kubeconfig, --context, --debug
    elif "--debug" not in have:
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                            help="show tracebacks on errors")  # fmt: skip
    _app_options(parser, top=False)


def _ssm_upload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ssm-upload",
        choices=("presigned", "output-bucket"),
        default="presigned",
        help="how SSM output reaches --bucket: presigned (default; the node POSTs it with curl, "
        "its role needs no S3 permission) or output-bucket (the SSM agent uploads it; the node "
        "role needs s3:PutObject on the bucket, the node needs no curl)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mignurse",
        description="On-call companion for GPU nodes on Amazon EKS that will not stay up. "
        "Without a command: the terminal app on the current kube context.",
    )
    parser.add_argument("--version", action="version", version=f"mignurse {__version__}")
    _app_options(parser, top=True)
    _connection_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    nodes = sub.add_parser("nodes", help="the GPU node table, like kubectl get nodes")
    _connection_options(nodes, top=False)
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

    diagnose = sub.add_parser(
        "diagnose",
        help="findings with evidence: live, or offline from a snapshot directory or bundle",
        description="Exit code: 0 no findings, 1 warnings, 2 critical findings (or an error, "
        "said on stderr).",
    )
    _connection_options(diagnose, top=False)
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

    watch = sub.add_parser(
        "watch",
        help="record node and NodeClaim lifecycles and events into the history, until Ctrl-C",
    )
    _connection_options(watch, top=False)
    watch.add_argument(
        "--state-dir",
        help="where the history lives (default: $XDG_STATE_HOME/mignurse, ~/.local/state/mignurse)",
    )
    watch.add_argument(
        "--auto-collect",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="collect each node into DIR as soon as its repair clock starts (before Karpenter "
        "deletes it): over the simulator's sandboxes, SSM with --bucket, else SSH",
    )
    watch.add_argument("--bucket", help="with --auto-collect: SSM through this S3 bucket")
    _ssm_upload_option(watch)
    watch.add_argument(
        "--progress-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a progress line this often (default: 60)",
    )

    collect = sub.add_parser(
        "collect",
        help="a support bundle: the cluster's view plus each node's journals, cloud-init and "
        "MIG state, before Karpenter deletes the evidence",
        description="Exit code: 0 every node collected, 1 some nodes could not be, 2 nothing "
        "was written (the reason on stderr).",
    )
    _connection_options(collect, top=False)
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
        choices=("auto", "ssm", "ssh", "sim"),
        default="auto",
        help="how to reach the nodes (auto: the simulator's sandboxes on a simulated cluster, "
        "else SSM when --bucket is given, else SSH)",
    )
    collect.add_argument(
        "--bucket",
        help="SSM: an S3 bucket the node uploads its archive to (through a presigned URL: "
        "the node role needs no S3 permission)",
    )
    _ssm_upload_option(collect)
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

    probe = sub.add_parser(
        "probe",
        help="the MIG state of this machine's GPUs, read through NVML (read-only)",
        description="Exit code: 0 read, 1 no GPUs or no MIG support, 2 NVML unusable "
        "(no driver, driver not loaded, error).",
    )
    probe.add_argument("-o", "--output", choices=("table", "json"), default="table")

    userdata = sub.add_parser(
        "userdata",
        help="user data that applies a MIG layout before kubelet starts (AL2023, Bottlerocket)",
        description="AL2023 (the default): prints MIME multi-part user data (for a Karpenter "
        "EC2NodeClass or a launch template) that waits for the NVIDIA driver, finds "
        "nvidia-mig-parted (on PATH, else --mig-parted-package, else --mig-parted-url), writes "
        "its config and an empty hooks file, applies and asserts the layout with "
        "MIG_PARTED_HOOKS_FILE unset, verifies it with `nvidia-smi mig -lgi`, and logs each "
        "step to the console. --os bottlerocket: prints the Bottlerocket settings TOML that "
        "makes the layout with Bottlerocket's own MIG manager. Exit code: 0 printed, 2 an "
        "unknown or ambiguous config name (the valid ones on stderr).",
    )
    userdata.add_argument(
        "--os",
        choices=("al2023", "bottlerocket"),
        default="al2023",
        help="the node OS: al2023 (a shell script run by cloud-init) or bottlerocket (settings)",
    )
    userdata.add_argument(
        "--config", required=True, metavar="NAME", help="MIG config name, e.g. all-1g.10gb"
    )
    userdata.add_argument(
        "--gpu-product",
        metavar="P",
        help="the GPU whose layout NAME means, named whole: a product name "
        "(NVIDIA-H100-80GB-HBM3), a Karpenter GPU name (h200), a PCI device id (0x233010DE), "
        "a model name (A100-40GB) or an instance type (g7e.4xlarge)",
    )
    userdata.add_argument(
        "--driver-wait",
        type=int,
        metavar="SECONDS",
        help="how long the node waits for the NVIDIA driver before giving up (default 300)",
    )
    userdata.add_argument(
        "--mig-parted-package",
        metavar="RPM",
        help="AL2023: the nvidia-mig-manager RPM (absolute path on the node or http(s) URL) to "
        "install, without its scriptlets, when nvidia-mig-parted is not on the node",
    )
    userdata.add_argument(
        "--mig-parted-url",
        metavar="URL",
        help="AL2023: an http(s) URL of the nvidia-mig-parted binary, fetched when neither the "
        "node nor the package has one",
    )
    userdata.add_argument(
        "--mig-parted-sha256",
        metavar="HEX",
        help="with --mig-parted-url: the binary's sha256, checked before it is used",
    )
    userdata.add_argument(
        "--ec2nodeclass",
        action="store_true",
        help="print it inside a Karpenter EC2NodeClass (karpenter.k8s.aws/v1) instead",
    )
    userdata.add_argument(
        "--name", help="with --ec2nodeclass: its metadata.name (default: mig-NAME)"
    )
    userdata.add_argument(
        "--cluster", help="with --ec2nodeclass: the cluster name for its role and discovery tags"
    )

    opened = sub.add_parser(
        "open",
        help="the app on a support bundle, read-only, for post-mortems and vendor support",
        description="Shows a bundle written by `mignurse collect` (or a folder of `kubectl get "
        "-o json` dumps) in the terminal app, judged at the moment it was collected: the "
        "fleet view, each node with its timeline and the evidence collected on it. Nothing "
        "can be changed from it.",
    )
    opened.add_argument("bundle", metavar="BUNDLE", help="a .tar.gz bundle or a folder")
    opened.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )

    demo = sub.add_parser(
        "demo", help="the app on a built-in simulated cluster (no cluster or AWS account needed)"
    )
    demo.add_argument(
        "--scenario",
        default=DEMO_DEFAULT_SCENARIO,
        help=f"scenario name or YAML file (default: {DEMO_DEFAULT_SCENARIO}; `mignurse sim list`)",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=DEMO_DEFAULT_SPEED,
        help=f"simulated seconds per real second (default: {DEMO_DEFAULT_SPEED:g})",
    )
    demo.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )
    demo.add_argument(
        "--auto-collect",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="collect each simulated node into DIR as soon as its repair clock starts",
    )

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
        required=True,
        metavar="PATH",
        help="where to write the kubeconfig for it",
    )
    serve.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per real second (default: 1)"
    )
    serve.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)"
    )
    sim_sub.add_parser("list", help="the shipped scenarios")

    from mignurse.runner.commands import add_parsers as add_runbook_parsers

    add_runbook_parsers(sub, _connection_options)
    for name, command in sub.choices.items():
        _global_options(command)
        if name == "sim":
            for leaf in sim_sub.choices.values():
                _global_options(leaf)
    return parser


def _positive_speed(speed: float) -> float:
    if not speed > 0 or speed > 1000:
        raise UserError(
            f"--speed {speed:g} is out of range: give a number above 0 and at most 1000"
        )
    return speed


# -- nodes --------------------------------------------------------------------------


def _connect(args: argparse.Namespace) -> Any:
    from mignurse.cluster.client import ClusterClient

    return ClusterClient.connect(kubeconfig=args.kubeconfig, context=args.context)


def cmd_nodes(args: argparse.Namespace) -> int:
    from mignurse.cluster.load import load_snapshot
    from mignurse.nodeview import node_rows, nodes_document

    client = _connect(args)
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
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
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


# -- diagnose -------------------------------------------------------------------------


def cmd_diagnose(args: argparse.Namespace) -> int:
    from mignurse.cluster.history import default_history_path
    from mignurse.diagnose.engine import Diagnosis, diagnose
    from mignurse.diagnose.sources import load_live, load_offline
    from mignurse.diagnose.timeline import node_timeline
    from mignurse.model import format_time, parse_time
    from mignurse.render import print_findings, print_timeline

    now = None
    if args.now:
        now = parse_time(args.now)
        if now is None:
            raise UserError(f"--now {args.now!r} is not an RFC 3339 time (2026-11-29T03:00:00Z)")
        if not _judgeable(now):
            raise UserError(f"--now {args.now} is out of range: give a time from 1970 to 8999")
    if args.source:
        gathered = load_offline(Path(args.source).expanduser())
        now = now or gathered.judge_time()
        if now is None:
            raise UserError(f"{args.source} holds no timestamp to judge by: pass --now")
        if not _judgeable(now):
            raise UserError(
                f"{args.source}: its newest time ({now.isoformat()}) is out of range: pass --now"
            )
        context = gathered.context or Path(args.source).name
    else:
        client = _connect(args)
        try:
            state_dir = Path(args.state_dir).expanduser() if args.state_dir else None
            gathered = load_live(
                client,
                history_path=default_history_path(state_dir),
                nodegroups=None
                if _is_simulated(args.kubeconfig, client.info.cluster)
                else _nodegroup_reader(args, client.info.cluster),
            )
        finally:
            client.close()
        now = now or gathered.collected_at or client.server_now()
        context = client.info.context
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
    timeline = node_timeline(inp, node) if node else []
    for error in result.rule_errors:
        print(f"warning: a rule failed and was skipped: {error}", file=sys.stderr)
    if args.output == "json":
        document = {
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
        if node:
            document["timeline"] = [entry.to_json() for entry in timeline]
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if result.findings:
            print_findings(result.findings, now)
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


def _check_state_folder(folder: Path, source: str) -> None:
    from mignurse.untrusted import folder_problem

    problem = folder_problem(folder)
    if problem:
        raise UserError(f"{source}: {problem}, so the history cannot be kept in {folder}")


# -- collect ------------------------------------------------------------------------------


_SINCE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE_DAYS = 365


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


def _seconds_option(flag: str, value: float) -> float:
    """A positive, finite number of seconds (`nan` and `inf` parse as floats too)."""
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag} {value:g} is not a positive number of seconds")
    return value


def _is_simulated(kubeconfig: str | None, cluster: str) -> bool:
    """The simulator marks its kubeconfig's cluster with an extension (see mignurse.sim)."""
    import yaml

    from mignurse.cluster.client import KubeconfigError, check_kubeconfig
    from mignurse.sim.simcluster import SIM_EXTENSION

    paths = (kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    for path in paths:
        expanded = Path(path).expanduser()
        try:
            check_kubeconfig(str(expanded))  # bounded: no alias bomb, no /dev/zero
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            config = yaml.load(expanded.read_text(), Loader=loader) or {}
        except (OSError, yaml.YAMLError, KubeconfigError):
            continue
        for entry in config.get("clusters") or ():
            if isinstance(entry, dict) and entry.get("name") == cluster:
                extensions = (entry.get("cluster") or {}).get("extensions") or ()
                return any(
                    isinstance(e, dict) and e.get("name") == SIM_EXTENSION for e in extensions
                )
    return False


def _check_ssm_upload(args: argparse.Namespace) -> None:
    if getattr(args, "ssm_upload", "presigned") != "presigned" and not getattr(
        args, "bucket", None
    ):
        raise UserError(
            f"--ssm-upload {args.ssm_upload} needs --bucket BUCKET (SSM's output bucket)"
        )


def _sim_sandbox_shells(client: Any, sandboxes: Path) -> Any:
    """The simulator's transport, loaded only when a command reaches simulated nodes."""
    from mignurse.sim.nodes import sandbox_shells

    return sandbox_shells(client, sandboxes)


def _access(args: argparse.Namespace) -> Any:
    """How this command reaches nodes and AWS: its flags, and the simulator's sandboxes
    for a simulated cluster (the faces inject them; the core never imports the simulator)."""
    from mignurse.collect.access import Access

    return Access.from_args(args, sandbox_shells=_sim_sandbox_shells)


def _nodegroup_reader(
    args: argparse.Namespace, cluster_entry: str
) -> Callable[[list[str]], tuple[list[dict[str, Any]], list[str]]]:
    """Describes managed node groups through EKS (their repair settings) with the aws CLI's
    profile and region, the region defaulting to the one in an EKS context's ARN."""
    from mignurse.aws.eks import cluster_from_context, describe_nodegroups, eks_client

    name, arn_region = cluster_from_context(cluster_entry)

    def read(groups: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        eks, why = eks_client(
            getattr(args, "profile", None), getattr(args, "region", None) or arn_region or None
        )
        if eks is None:
            return [], [f"node groups {', '.join(groups)} not described: {why}"]
        return describe_nodegroups(eks, name, groups)

    return read


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
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._live = Progress(
                TextColumn("collecting"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._live.add_task("", total=total)
            self._live.start()

    def __call__(self, node: str, state: str) -> None:
        if state.startswith("collecting"):
            if self._live is not None:
                self._live.update(self._task, description=f"{node}: {state}")
            return
        self.done += 1
        self.ok += state == "ok"
        line = f"[{self.done}/{self.total}] {node}: {state}"
        if self._live is not None:
            self._live.console.print(line)
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
    from mignurse.collect.redact import Redactor
    from mignurse.collect.run import collect, select_nodes
    from mignurse.collect.transports import shell_factory

    access = _access(args)
    since = journal_since(args.since)
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    _seconds_option("--timeout", args.timeout)
    if args.local:
        return _collect_local(args, since)
    _check_ssm_upload(args)
    if not (args.nodes or args.nodepool or args.unhealthy):
        raise UserError("name the nodes to collect, or use --nodepool POOL or --unhealthy")
    client = _connect(args)
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
        simulated = _is_simulated(args.kubeconfig, client.info.cluster)
        transport = access.resolve(simulated=simulated)
        now = client.server_now()
        out = _bundle_path(
            args.output, f"mignurse-bundle-{client.info.context}-{now:%Y%m%dT%H%M%SZ}.tar.gz"
        )
        # ignore_cleanup_errors: a sandbox killed at Ctrl-C may still be writing for a moment
        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            shell_for = shell_factory(
                client, access, sandboxes=Path(sandboxes), simulated=simulated
            )
            progress = _CollectProgress(len(nodes))
            print(
                f"collecting {len(nodes)} node(s) over {transport} into {out} "
                f"(journals since {since}, {args.concurrency} at once)",
                file=sys.stderr,
                flush=True,
            )
            try:
                manifest = collect(
                    client,
                    loaded.snapshot,
                    nodes,
                    shell_for=shell_for,
                    out=out,
                    since=since,
                    redactor=Redactor(
                        enabled=not args.no_redact, obfuscate_network=args.obfuscate_network
                    ),
                    concurrency=args.concurrency,
                    node_timeout=args.timeout,
                    progress=progress,
                    nodegroups=None
                    if transport == "sim"
                    else _nodegroup_reader(args, client.info.cluster),
                    collected_at=now,  # the moment in the bundle's name
                )
            except KeyboardInterrupt:
                progress.close()
                print(
                    f"interrupted: {out} is a valid partial bundle ({progress.ok}/{len(nodes)} "
                    f"nodes collected); read it with: mignurse diagnose --from {out}",
                    file=sys.stderr,
                )
                return 130
            finally:
                progress.close()
    finally:
        client.close()
    failed = {name: n for name, n in manifest["nodes"].items() if not n["ok"]}
    size = out.stat().st_size / 2**20
    print(
        f"bundle: {out} ({size:.1f} MiB), {len(nodes) - len(failed)}/{len(nodes)} nodes collected"
        f" in {manifest['seconds']:.1f} s; read it with: mignurse diagnose --from {out}"
    )
    for name, node in failed.items():
        print(f"  not collected: {name}: {node['error'] or '; '.join(node['problems'])}")
    return 1 if failed else EXIT_OK


# -- userdata -------------------------------------------------------------------------


def cmd_userdata(args: argparse.Namespace) -> int:
    from mignurse.gpu.userdata import (
        DEFAULT_DRIVER_WAIT_S,
        MigPartedSource,
        UserDataError,
        bottlerocket_ec2nodeclass_yaml,
        build,
        build_bottlerocket,
        default_nodeclass_name,
        ec2nodeclass_yaml,
    )

    if (args.name is not None or args.cluster is not None) and not args.ec2nodeclass:
        raise UserError("--name and --cluster go with --ec2nodeclass")
    source = MigPartedSource(
        args.mig_parted_package or "", args.mig_parted_url or "", args.mig_parted_sha256 or ""
    )
    name = args.name or default_nodeclass_name(args.config)
    try:
        if args.os == "bottlerocket":
            al2023_only = [
                flag
                for flag, given in (
                    ("--mig-parted-package", source.package),
                    ("--mig-parted-url", source.url),
                    ("--mig-parted-sha256", source.sha256),
                    ("--driver-wait", args.driver_wait is not None),
                )
                if given
            ]
            if al2023_only:
                raise UserError(
                    f"{', '.join(al2023_only)}: AL2023 only; Bottlerocket makes MIG from its "
                    "settings, with no script and no nvidia-mig-parted"
                )
            settings = build_bottlerocket(args.config, gpu_product=args.gpu_product)
            if args.ec2nodeclass:
                sys.stdout.write(
                    bottlerocket_ec2nodeclass_yaml(
                        settings.mig, settings.toml, name=name, cluster=args.cluster
                    )
                )
            else:
                sys.stdout.write(settings.toml)
            return EXIT_OK
        user_data = build(
            args.config,
            gpu_product=args.gpu_product,
            source=source,
            driver_wait_s=DEFAULT_DRIVER_WAIT_S if args.driver_wait is None else args.driver_wait,
        )
        if args.ec2nodeclass:
            sys.stdout.write(ec2nodeclass_yaml(user_data, name=name, cluster=args.cluster))
        else:
            sys.stdout.write(user_data.mime)
    except UserDataError as exc:
        raise UserError(str(exc)) from None
    return EXIT_OK


# -- watch ----------------------------------------------------------------------------


def _shells_for(args: argparse.Namespace, client: Any, sandboxes: Path) -> Any:
    from mignurse.collect.transports import shell_factory

    simulated = _is_simulated(args.kubeconfig, client.info.cluster)
    return shell_factory(client, _access(args), sandboxes=sandboxes, simulated=simulated)


def cmd_watch(args: argparse.Namespace) -> int:
    import threading
    from datetime import UTC, datetime

    from mignurse.cluster.history import HistoryStore, default_history_path, run_recorder
    from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available

    _seconds_option("--progress-every", args.progress_every)
    _check_ssm_upload(args)
    path = default_history_path(Path(args.state_dir).expanduser() if args.state_dir else None)
    _check_state_folder(path.parent, "--state-dir" if args.state_dir else "XDG_STATE_HOME")
    client = _connect(args)
    karpenter = karpenter_available(client)
    if not karpenter:
        print(f"note: {KARPENTER_ABSENT_NOTICE}", file=sys.stderr)
    store = HistoryStore(path)  # another recorder on the same file: WriterBusy, one line
    stop = threading.Event()

    def progress(line: str) -> None:
        print(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {line}", file=sys.stderr, flush=True)

    def request_stop(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    progress(f"recording context {client.info.context!r} into {path}; Ctrl-C to stop")
    auto_collect = getattr(args, "auto_collect", None)
    out_dir = Path(auto_collect).expanduser() if auto_collect else None
    if out_dir is not None and not out_dir.is_dir():
        raise UserError(f"--auto-collect {out_dir}: no such folder")
    try:
        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            collector = None
            if out_dir is not None:
                from mignurse.collect.auto import AutoCollector

                collector = AutoCollector(
                    client,
                    out_dir=out_dir,
                    shell_for=_shells_for(args, client, Path(sandboxes)),
                    clock=client.server_now,
                    report=progress,
                )
                progress(f"auto-collect on: nodes under a repair clock go to {out_dir}")
            run_recorder(
                client,
                store,
                context=client.info.context,
                karpenter=karpenter,
                stop=stop,
                on_progress=progress,
                progress_every=args.progress_every,
                on_tick=collector.tick if collector is not None else None,
            )
            if collector is not None:
                collector.close()  # let running collections finish their bundles
    finally:
        store.close()
        client.close()
    return EXIT_OK


# -- the app --------------------------------------------------------------------------


def _auto_collect_dir(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "auto_collect", None)
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(f"--auto-collect {folder}: no such folder")
    return folder


def cmd_app(args: argparse.Namespace) -> int:
    from kubernetes import config as k8s_config

    from mignurse.cluster.client import ClusterClient
    from mignurse.cluster.history import default_history_path
    from mignurse.tui.app import LiveSource, make_app
    from mignurse.untrusted import folder_problem

    history_path = default_history_path()
    unusable = folder_problem(history_path.parent)
    client = _connect(args)
    access = _access(args)
    source = LiveSource(
        client,
        history_path=None if unusable else history_path,
        auto_collect=_auto_collect_dir(args),
        access=access,
    )
    if unusable:  # the app works without its history; it says why there is none
        source.notices.append(f"history not kept: XDG_STATE_HOME: {unusable}")
    source.check()  # a dead endpoint or RBAC refusal is one line here, not a broken screen

    def connect(context: str) -> LiveSource:
        """Another context of the same kubeconfig, from the palette (off the UI thread)."""
        other = LiveSource(
            ClusterClient.connect(kubeconfig=args.kubeconfig, context=context),
            history_path=default_history_path(),
            access=access,
        )
        other.check()
        return other

    def contexts() -> list[str]:
        try:
            found, _active = k8s_config.list_kube_config_contexts(config_file=args.kubeconfig)
        except (k8s_config.ConfigException, OSError):
            return []
        return sorted(str(c.get("name")) for c in found or [] if c.get("name"))

    app = make_app(
        source,
        read_only=args.read_only,
        connect=connect,
        contexts=contexts,
        light=args.light,
    )
    _run_app(app)
    return EXIT_OK


def _run_app(app: Any) -> None:
    """The app until it quits, or until SIGHUP (its terminal closed) or SIGTERM asks it to:
    then it quits as from its own key, so that what it and its callers hold is cleaned up."""
    import asyncio

    loop = asyncio.new_event_loop()
    signals = (signal.SIGHUP, signal.SIGTERM)

    def ask_to_quit(signum: int) -> None:
        app.exit()
        # A second signal, or a quit that does not finish, ends the run here all the same.
        for sig in signals:
            loop.add_signal_handler(sig, _raise_exit, sig)
        loop.call_later(10, _raise_exit, signum)

    for sig in signals:
        loop.add_signal_handler(sig, ask_to_quit, sig)
    try:
        app.run(loop=loop)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        loop.close()


def _raise_exit(signum: int) -> None:
    raise SystemExit(128 + signum)


def cmd_open(args: argparse.Namespace) -> int:
    from mignurse.diagnose.sources import SourceError
    from mignurse.tui.app import BundleSource, make_app

    path = Path(args.bundle)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    try:
        source = BundleSource(path)
    except (SourceError, ValueError) as exc:
        raise UserError(str(exc)) from None
    _run_app(make_app(source, light=args.light))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from mignurse.cluster.client import ClusterClient
    from mignurse.demo_folder import demo_folder
    from mignurse.sim import SimCluster, load_scenario
    from mignurse.tui.app import BuildingSource, LiveSource, make_app

    speed = _positive_speed(args.speed)
    scenario = load_scenario(args.scenario)
    simulated = f"{scenario.name} ×{speed:g}"
    with demo_folder() as tmp:
        started: list[SimCluster] = []
        closed = threading.Event()
        guard = threading.Lock()

        def build() -> LiveSource:
            """In the app's build thread: scale-5000 takes seconds, shown as progress."""
            sim = SimCluster(scenario, speed=speed).start()
            with guard:
                kept = not closed.is_set()
                if kept:
                    started.append(sim)
            if not kept:  # the app quit while the cluster was built
                sim.stop()
                raise RuntimeError("the demo was closed")
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig")
            client = ClusterClient.connect(kubeconfig=str(kubeconfig))
            # The demo keeps its history beside its kubeconfig, never in the user's own.
            source = LiveSource(
                client,
                simulated=simulated,
                clock=sim.now,
                history_path=Path(tmp) / "history.sqlite3",
                auto_collect=_auto_collect_dir(args),
                access=_access(args),  # the simulator's sandboxes: `c` and runbooks use them
            )
            source.check()
            return source

        building = BuildingSource(
            build, what=f"simulated cluster {scenario.name}", simulated=simulated
        )
        app = make_app(building, read_only=getattr(args, "read_only", False), light=args.light)
        try:
            _run_app(app)
        finally:
            with guard:
                closed.set()
            for sim in started:
                sim.stop()
    return EXIT_OK


# -- sim ------------------------------------------------------------------------------


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
    speed = _positive_speed(args.speed)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port number (0 picks a free one)")
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


# -- entry point ------------------------------------------------------------------------


class _QuietPipe:
    """stdout or stderr that a closed pipe (`| head`) silences instead of failing: the rest
    of the output goes nowhere and the command ends with its own exit code, as kubectl's
    does. The descriptor is pointed at /dev/null so the interpreter's last flush passes."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return int(self._stream.write(text))
            except BrokenPipeError:
                self._silence()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._silence()

    def _silence(self) -> None:
        self._closed = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # not a real descriptor (a test's capture): nothing is flushed at exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


APP_COMMANDS = (None, "open", "demo")  # the terminal app owns the terminal: left as it is


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in APP_COMMANDS:
        return _main(args, parser)
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _QuietPipe(sys.stdout), _QuietPipe(sys.stderr)
    try:
        return _main(args, parser)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = real


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    debug = bool(getattr(args, "debug", False)) or os.environ.get("MIGNURSE_DEBUG") == "1"
    try:  # Ctrl-C while these load (a second or so on a cold disk) is a plain exit
        from mignurse.cluster.client import ClusterError
        from mignurse.cluster.history import HistoryError
        from mignurse.collect.access import AccessError
        from mignurse.collect.run import CollectError
        from mignurse.diagnose.sources import SourceError
        from mignurse.sim import ScenarioError
        from mignurse.untrusted import LimitError
    except KeyboardInterrupt:
        return 130

    try:
        if args.command == "nodes":
            return cmd_nodes(args)
        if args.command == "diagnose":
            return cmd_diagnose(args)
        if args.command == "collect":
            return cmd_collect(args)
        if args.command == "probe":
            from mignurse.gpu.probe_cli import run as run_probe

            return run_probe(args.output)
        if args.command == "watch":
            return cmd_watch(args)
        if args.command == "userdata":
            return cmd_userdata(args)
        if args.command == "open":
            return cmd_open(args)
        if args.command == "demo":
            return cmd_demo(args)
        if args.command == "sim":
            return cmd_sim(args, parser)
        if args.command in ("runbooks", "run", "runs", "unlock"):
            from mignurse.runner.commands import dispatch

            return dispatch(args, _connect, _is_simulated, _access)
        return cmd_app(args)
    except (
        ClusterError,
        UserError,
        ScenarioError,
        HistoryError,
        SourceError,
        CollectError,
        LimitError,
        AccessError,
    ) as exc:
        if debug:
            raise
        print(f"mignurse: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            raise
        print(
            f"mignurse: internal error: {type(exc).__name__}: {exc} (run again with --debug "
            "for the traceback, and report it)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
