"""What every command shares: the global flags, exit codes, the one-line `UserError`, and
how a command reaches the cluster, its nodes and AWS."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from mignurse.inert import inert

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


class UserError(Exception):
    """A problem the user can fix; str() is the one line to show."""

    exit_code = EXIT_USAGE


class Once(argparse.Action):
    """An option given at most once: a second value is refused, where argparse keeps the
    last one silently (`run cordon --node A --node B` acted on B, and A was never named)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        earlier = getattr(namespace, self.dest, None)
        if earlier is not None:
            self.refuse(parser, earlier, values)
        setattr(namespace, self.dest, values)

    def refuse(self, parser: argparse.ArgumentParser, earlier: Any, later: Any) -> NoReturn:
        from mignurse.inert import inert

        both = f"{inert(str(earlier))!r}, {inert(str(later))!r}"
        parser.error(f"{'/'.join(self.option_strings)} given twice ({both}): {self.help_once}")

    help_once = "give it once"


class _OnceContext(Once):
    help_once = "give one, or several joined by commas ('prod-*,staging')"


class _OnceKubeconfig(Once):
    help_once = "give one, or several files in KUBECONFIG (a:b), as kubectl reads them"


class SubCommands(argparse._SubParsersAction):
    """The command's own words, parsed as argparse does (into a namespace of their own, then
    copied over the top level's), with a `Once` option given on both sides of the command's
    name refused as one given twice on one side is: the copy would keep the second silently
    (`--context prod run cordon … --context staging` acted on staging)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        once = {
            a.dest: a
            for choice in self.choices.values()
            for a in choice._actions
            if isinstance(a, Once)
        }
        before = {dest: getattr(namespace, dest, None) for dest in once}
        super().__call__(parser, namespace, values, option_string)
        for dest, earlier in before.items():
            later = getattr(namespace, dest, None)
            if earlier is not None and later != earlier:
                once[dest].refuse(parser, earlier, later)


def connection_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # Sub-commands accept the same flags; SUPPRESS keeps them from resetting the top level's.
    default = None if top else argparse.SUPPRESS
    group = parser.add_argument_group("cluster connection (as kubectl)")
    group.add_argument(
        "--kubeconfig",
        action=_OnceKubeconfig,
        default=default,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument(
        "--context",
        action=_OnceContext,
        default=default,
        help="kubeconfig context (default: the current one); the app, nodes, diagnose, radar, "
        "inventory, collect and watch take several: "
        "names and globs joined by commas ('prod-*,staging')",
    )
    group.add_argument(
        "--all-contexts",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="the app, nodes, diagnose, radar, inventory, collect and watch: every context of "
        "the kubeconfig",
    )
    if "--debug" not in parser._option_string_actions:
        parser.add_argument(
            "--debug",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="show tracebacks on errors",
        )


# The app's global flags, in the app's words (the top level's help)
_APP_FLAG_OPTIONS: list[tuple[str, dict[str, Any]]] = [
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
_APP_FLAGS = tuple(flag for flag, _ in _APP_FLAG_OPTIONS)
_AWS_FLAGS = {
    "--profile": "AWS profile, as the aws CLI",
    "--region": "AWS region, as the aws CLI",
}
# The app's global flags each command uses, with its own words where the app's would mislead:
# its help lists those only. Every command still accepts all of them (a global flag may come
# anywhere), and ignores the others. "" keeps the app's words.
APP_FLAGS_USED: dict[str, dict[str, str]] = {
    "demo": dict.fromkeys(_APP_FLAGS, ""),
    "open": {"--light": ""},
    "run": {
        "--read-only": "refuse every runbook that changes the cluster: only --dry-run runs",
        **_AWS_FLAGS,
    },
    "runs": _AWS_FLAGS,
    "collect": _AWS_FLAGS,
    "diagnose": _AWS_FLAGS,
    "inventory": _AWS_FLAGS,
    "watch": _AWS_FLAGS,
}


def app_options(parser: argparse.ArgumentParser, *, command: str | None = None) -> None:
    """The app's global flags, on the top level, or on `command`'s parser: a command accepts
    them all (ignoring those it does not use, which its help leaves out), and SUPPRESS keeps
    an absent one from resetting the top level's."""
    used = None if command is None else APP_FLAGS_USED.get(command, {})
    for flag, options in _APP_FLAG_OPTIONS:
        if flag in parser._option_string_actions:
            continue  # the sub-command has its own (watch --auto-collect)
        if used is not None:
            words = used.get(flag, argparse.SUPPRESS)
            options = {**options, "default": argparse.SUPPRESS, "help": words or options["help"]}
        parser.add_argument(flag, **options)


def global_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Every global flag on `command`'s parser (or one of its own sub-commands') that it does
    not define itself."""
    have = parser._option_string_actions
    if "--kubeconfig" not in have:
        connection_options(parser, top=False)  # --kubeconfig, --context, --debug
    elif "--debug" not in have:
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                            help="show tracebacks on errors")  # fmt: skip
    app_options(parser, command=command)


def ssm_upload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ssm-upload",
        choices=("presigned", "output-bucket"),
        default="presigned",
        help="how SSM output reaches --bucket: presigned (default; the node POSTs it with curl, "
        "its role needs no S3 permission) or output-bucket (the SSM agent uploads it; the node "
        "role needs s3:PutObject on the bucket, the node needs no curl)",
    )


def positive_speed(speed: float) -> float:
    if not speed > 0 or speed > 1000:
        raise UserError(
            f"--speed {speed:g} is out of range: give a number above 0 and at most 1000"
        )
    return speed


# One-shot reads: all their requests end within MIGNURSE_COMMAND_TIMEOUT (the app, `watch`,
# `collect` and the runbooks run as long as they must, each request within its own deadline).
BOUNDED_COMMANDS = ("nodes", "diagnose", "inventory", "radar")


def one_context(
    args: argparse.Namespace,
    what: str,
    *,
    several: str = "the app, nodes, diagnose, radar, inventory, collect and watch take several",
) -> str | None:
    """The one context `what` works on: `--context` resolved (a glob or list that selects
    one context is that context; None is the current one). Refused in one line, naming
    what it selected and what takes `several`, when the selection names more than one."""
    from mignurse.cluster.contexts import listed, select_contexts

    selection = getattr(args, "context", None)
    all_contexts = bool(getattr(args, "all_contexts", False))
    contexts = select_contexts(getattr(args, "kubeconfig", None), selection, all_contexts)
    if len(contexts) > 1:
        flag = "--all-contexts" if all_contexts else f"--context {inert(selection or '')!r}"
        names = listed([name for name in contexts if name is not None])
        raise UserError(
            f"{what} works on one context at a time: give one --context NAME ({flag} selects "
            f"{len(contexts)}: {names}; {several})"
        )
    return contexts[0]


def named_context_error(
    kubeconfig: str | None, context: str | None, error: BaseException
) -> BaseException:
    """What connecting to one `context` failed with, or, where the kubeconfig does not
    define that name, the line a selection gives a name that matches no context (one
    wording for an unknown context, however it was named)."""
    from mignurse.cluster.client import KubeconfigError
    from mignurse.cluster.contexts import unknown_context

    if isinstance(error, KubeconfigError):
        return unknown_context(kubeconfig, context) or error
    return error


def read_clusters(args: argparse.Namespace, read: Callable[[Any], Any]) -> list[Any]:
    """The selected contexts (`--context a,b`, `'prod-*'`, `--all-contexts`; else the
    current one), each connected and `read`, side by side, each under the command's
    deadline: one `fleet.Cluster` each, in kubeconfig order. A failing cluster's one line
    goes to stderr as it ends, when several are selected; with one, its error is raised as
    it always was."""
    return read_clusters_begun(args, read)()


def read_clusters_begun(
    args: argparse.Namespace,
    read: Callable[[Any], Any],
    *,
    several_read: Callable[[Any], Any] | None = None,
) -> Callable[[], list[Any]]:
    """`read_clusters(args, read)` begun: what is returned waits for it and gives its
    clusters, or raises what it raised. The caller loads what judges the answers meanwhile
    (a live `diagnose` loads its rules while the API server answers). The modules the read
    needs are loaded here first, so that the two threads never import one module at once
    (Python's per-module import locks can deadlock on a cycle). A one-shot command's read
    of several clusters is shared among worker processes (`fleet.start_fleet`); its `read`
    gives a value that pickles. `several_read`, when given, is what is read of each cluster
    when several are selected (the part of the answer a cluster makes where it is read)."""
    import importlib

    for module in ("mignurse.cluster.contexts", "mignurse.cluster.fleet"):
        importlib.import_module(module)  # what the read imports, on this thread
    from mignurse.cluster.contexts import select_contexts
    from mignurse.cluster.fleet import FleetRequest, start_fleet
    from mignurse.untrusted import COMMAND_SECONDS

    contexts = select_contexts(args.kubeconfig, args.context, bool(args.all_contexts))
    command = getattr(args, "command", None)
    bounded = command in BOUNDED_COMMANDS
    several = len(contexts) > 1
    request = FleetRequest(
        args.kubeconfig,
        tuple(contexts),
        several_read if several and several_read is not None else read,
        seconds=COMMAND_SECONDS.value() if bounded else None,
        on_busy=say_busy,
        versions=several,  # one context's output shows no version
        processes=bounded and several,
    )
    progress = (lambda cluster: _say_failed(cluster, command)) if several else None
    reading = start_fleet(request, progress)

    def clusters() -> list[Any]:
        found = reading()
        if not several:
            (cluster,) = found
            if cluster.error is not None:
                raise named_context_error(args.kubeconfig, contexts[0], cluster.error)
            return found
        debug = bool(getattr(args, "debug", False))
        for cluster in found:  # --debug: a bug's traceback, as for one context
            error = cluster.error
            if debug and error is not None and cluster_exit_code(cluster, command) == EXIT_INTERNAL:
                raise error
        return found

    return clusters


def _say_failed(cluster: Any, command: str | None) -> None:
    if cluster.connected:
        return
    # the message may open with the context's name too (a kubeconfig problem's does)
    said = cluster.message.removeprefix(f"context {cluster.context!r}: ")
    if cluster_exit_code(cluster, command) == EXIT_INTERNAL:  # a bug, as `_main` says one
        line = (
            f"mignurse: internal error: context {cluster.context!r}: "
            f"{type(cluster.error).__name__}: {said} (run again with --debug for the "
            "traceback, and report it)"
        )
    else:
        line = f"mignurse: error: context {cluster.context!r}: {cluster.status_words}: {said}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def say_context_failed(context: str, error: BaseException, command: str | None) -> None:
    """A context that failed outside a fleet read (one of several collected in turn), said
    as `_say_failed` says a fleet's cluster: its status, its context once, and the login
    hint where one is known."""
    from mignurse.cluster.fleet import Cluster, classify

    cluster: Any = Cluster(context)
    cluster.error = error
    cluster.status, cluster.message, cluster.login = classify(error, context)
    _say_failed(cluster, command)


def cluster_exit_code(cluster: Any, command: str | None) -> int:
    """The exit code a failed cluster would give alone: a user error's (2), else a bug's."""
    from mignurse.cli import user_errors

    error = cluster.error
    if isinstance(error, user_errors(command)):
        return int(getattr(error, "exit_code", EXIT_USAGE))
    return EXIT_INTERNAL


def cluster_record(cluster: Any) -> dict[str, Any]:
    """A cluster's record in a several-context JSON document: its context and cluster, its
    status (`connected`, `credentials-expired`, `rbac-denied`, `unreachable`, `timed-out`,
    `error`) and, when not connected, the one line that says why."""
    from mignurse.model import format_time

    record: dict[str, Any] = {
        "context": cluster.context,
        "cluster": cluster.cluster,
        "status": cluster.status,
        "message": cluster.message or None,
    }
    if cluster.login:
        record["login"] = cluster.login
    verb, resource = getattr(cluster.error, "verb", None), getattr(cluster.error, "resource", None)
    if verb and resource:  # what RBAC refused (a 403's)
        record.update(verb=verb, resource=resource)
    if cluster.server and not cluster.connected:
        record["server"] = cluster.server
    if cluster.connected:
        record.update(
            server=cluster.server,
            version=cluster.version or None,
            clockSkewSeconds=cluster.clock_skew,
            now=format_time(cluster.now),
        )
    return record


def connect(args: argparse.Namespace) -> Any:
    """A connection to the one context `args` selects (`one_context`), under the command's
    deadline where it is a one-shot read."""
    from mignurse.cluster.client import ClusterClient, KubeconfigError
    from mignurse.untrusted import COMMAND_SECONDS

    command = getattr(args, "command", None)
    context = one_context(args, f"`mignurse {command}`")
    try:
        client = ClusterClient.connect(kubeconfig=args.kubeconfig, context=context)
    except KubeconfigError as exc:
        raise named_context_error(args.kubeconfig, context, exc) from None
    client.on_busy = say_busy  # the app's own status line shows it too, once it runs
    if getattr(args, "command", None) in BOUNDED_COMMANDS:
        client.limit_command(COMMAND_SECONDS.value())
    return client


def say_busy(line: str) -> None:
    # one write: reads waiting side by side may each say so, a line each
    sys.stderr.write(f"mignurse: {line}\n")
    sys.stderr.flush()


def check_state_folder(folder: Path, source: str) -> None:
    from mignurse.untrusted import folder_problem

    problem = folder_problem(folder)
    if problem:
        raise UserError(f"{source}: {problem}, so the history cannot be kept in {folder}")


def seconds_option(flag: str, value: float) -> float:
    """A positive, finite number of seconds (`nan` and `inf` parse as floats too)."""
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag} {value:g} is not a positive number of seconds")
    return value


def is_simulated(kubeconfig: str | None, cluster: str) -> bool:
    """Whether `cluster` is the simulator's: the app asks the same (`simulated_scenario`)."""
    from mignurse.collect.access import simulated_scenario

    return simulated_scenario(kubeconfig, cluster) is not None


def check_ssm_upload(args: argparse.Namespace) -> None:
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


def access_for(args: argparse.Namespace) -> Any:
    """How this command reaches nodes and AWS: its flags, and the simulator's sandboxes
    for a simulated cluster (the faces inject them; the core never imports the simulator)."""
    from mignurse.collect.access import Access

    return Access.from_args(args, sandbox_shells=_sim_sandbox_shells)


def nodegroup_reader(
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
