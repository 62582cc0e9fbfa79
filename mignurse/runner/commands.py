"""`mignurse runbooks`, `mignurse run`, `mignurse runs` and `mignurse unlock`: parsers and
command bodies.

Kept out of `mignurse/cli.py` (which only registers them) so the engine's command-line
face lives beside the engine. Decisions:
- `run` refuses to prompt when stdin is not a terminal: a confirmation the run needs is
  then one line saying to pass `--yes` (scripts must say so explicitly).
- `--read-only` allows only `--dry-run` of a runbook that changes the cluster.
- Ctrl-C, SIGTERM or SIGHUP (the terminal closed): the first asks the engine to stop
  (nothing new is applied, a wait stops at once, the run is recorded `interrupted`, nothing
  is undone), a second one stops at once. At a confirmation prompt the first one answers it
  (declined). While the run records its end and releases its lock, they wait for that.
- `unlock` removes a lock whose run is dead (SIGKILL, a lost laptop) after showing its
  holder's liveness; a holder still running here, or renewing recently elsewhere, needs
  `--force`. It asks for the node (or cluster) name typed, and is audited.
- Nodes are reached as `mignurse collect` reaches them (`collect.transports`): the
  simulator's sandboxes on a simulated cluster, SSM with --bucket, else SSH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from mignurse.runner.engine import (
    Followup,
    Runner,
    RunResult,
    node_shells,
    possible_followups,
)
from mignurse.runner.schema import (
    Runbook,
    RunbookError,
    load_runbooks,
    parse_assignments,
    resolve_params,
)
from mignurse.runner.step import Harm, StepFailed

if TYPE_CHECKING:  # paramiko and boto3 load only when a node or AWS is reached
    from mignurse.collect.access import Access

EXIT_USAGE = 2
RUNS_SHOWN = 30


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 (all) or more")
    return value


class RunCommandError(Exception):
    """A usage problem of `run`/`runs`; str() is the one line to show."""

    exit_code = EXIT_USAGE


def add_parsers(sub: Any, connection_options: Callable[..., None]) -> None:
    runbooks = sub.add_parser(
        "runbooks",
        help="the runbooks `mignurse run` can run",
        description="Exit code: 0 listed, 1 some runbook files are broken and left out (one "
        "line each on stderr), 2 the runbook folder is missing.",
    )
    runbooks.add_argument("-o", "--output", choices=("table", "json"), default="table")

    run = sub.add_parser(
        "run",
        help="run a runbook: plan, confirm, apply step by step, audit (see `mignurse runbooks`)",
        description="Exit code: 0 done (or --dry-run), 1 failed, declined or refused "
        "(the report says where the node stands), 2 usage, 130 interrupted.",
    )
    connection_options(run, top=False)
    run.add_argument("name", nargs="?", metavar="RUNBOOK", help="the runbook to run")
    run.add_argument("--node", help="the node to act on (domain optional)")
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a runbook param (repeatable)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="show the plan and stop; nothing changes"
    )
    run.add_argument("--yes", action="store_true", help="no confirmation prompt (for scripts)")
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted or failed run")
    run.add_argument("--undo", metavar="RUN_ID", help="undo the completed steps of a run")
    run.add_argument(
        "--transport",
        choices=("auto", "sim", "ssm", "ssh"),
        default="auto",
        help="how to reach the node (auto: the sandboxes on a simulated cluster, SSM with "
        "--bucket, else SSH)",
    )
    run.add_argument("--bucket", help="SSM: the S3 bucket for node output")
    run.add_argument("--profile", help="AWS profile, as the aws CLI")
    run.add_argument("--region", help="AWS region, as the aws CLI")
    run.add_argument(
        "--sandboxes",
        metavar="DIR",
        help="--transport sim: keep the simulated nodes' sandboxes here (default: a temp dir)",
    )
    run.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="SSH: trust and save unknown host keys",
    )
    run.add_argument("-o", "--output", choices=("text", "json"), default="text")

    runs = sub.add_parser(
        "runs",
        help="past runbook runs (the audit log), or one run's steps and what can follow it",
        description="With RUN_ID: the run's steps and audit events, then whether `--resume` "
        "and `--undo` can run now (read from the run's context; the cluster is not changed).",
    )
    connection_options(runs, top=False)
    runs.add_argument("run_id", nargs="?", metavar="RUN_ID")
    runs.add_argument("-o", "--output", choices=("table", "json"), default="table")
    runs.add_argument(
        "--limit",
        type=_count,
        default=RUNS_SHOWN,
        metavar="N",
        help=f"the last N runs (default {RUNS_SHOWN}; 0 shows all)",
    )

    unlock = sub.add_parser(
        "unlock",
        help="remove a runbook lock whose run is dead (shows who holds it first)",
        description="Exit code: 0 unlocked (or nothing to unlock), 1 declined or refused "
        "(its holder looks alive: --force), 2 usage.",
    )
    connection_options(unlock, top=False)
    unlock.add_argument("node", nargs="?", metavar="NODE", help="the locked node")
    unlock.add_argument(
        "--cluster",
        action="store_true",
        help="the cluster lock of pause/resume-node-repair (on the kube-system Namespace)",
    )
    unlock.add_argument("--yes", action="store_true", help="no confirmation prompt")
    unlock.add_argument("--force", action="store_true", help="even when its holder looks alive")


# -- runbooks / runs ---------------------------------------------------------------------


def _loaded_runbooks(wanted: str | None = None) -> tuple[dict[str, Runbook], dict[str, str]]:
    """The runbooks that load, and one line for each file that does not: said on stderr,
    except the `wanted` one's (the caller refuses with it)."""
    problems: dict[str, str] = {}
    books = load_runbooks(problems=problems)
    for stem, line in problems.items():
        if stem != wanted:
            print(f"mignurse: warning: runbook skipped: {line}", file=sys.stderr)
    return books, problems


def _check_state_home() -> None:
    """Runs and the audit log live under $XDG_STATE_HOME: a wrong one is refused before a
    plan is shown or anything changes."""
    from mignurse.paths import state_home
    from mignurse.untrusted import folder_problem

    home = state_home()
    problem = folder_problem(home)
    if problem:
        source = "XDG_STATE_HOME" if os.environ.get("XDG_STATE_HOME") else "the state folder"
        raise RunCommandError(
            f"{source}: {problem}, so runs and the audit log cannot be kept in {home}"
        )


def cmd_runbooks(args: argparse.Namespace) -> int:
    from mignurse.runner.render import print_runbooks

    books, problems = _loaded_runbooks()
    if args.output == "json":
        print(json.dumps([b.to_json() for b in books.values()], indent=2))
    else:
        print_runbooks(books)
    return 1 if problems else 0


def _followups_now(
    args: argparse.Namespace,
    saved: Any,
    connect: Callable[[argparse.Namespace], Any],
    is_simulated: Callable[[str | None, str], bool],
    access: Access,
) -> dict[str, Followup] | str:
    """What can follow a saved run, read from its own context as `--resume`/`--undo` would
    read it; or one line saying why that cannot be told now."""
    from mignurse.cluster.client import ClusterError
    from mignurse.collect.transports import shell_factory

    if saved.status in ("succeeded", "undone"):
        return {}
    there = argparse.Namespace(**{**vars(args), "context": saved.context})
    try:
        client = connect(there)
    except ClusterError as exc:
        return f"cannot tell what can follow: context {saved.context!r}: {exc}"
    try:
        simulated = is_simulated(getattr(args, "kubeconfig", None), client.info.cluster)
        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            factory = shell_factory(client, access, sandboxes=Path(sandboxes), simulated=simulated)
            books, _problems = _loaded_runbooks()
            return possible_followups(
                saved.run_id,
                client=client,
                books=books,
                shell_for=node_shells(client, factory),
                aws=aws_for(access),
            )
    finally:
        client.close()


def cmd_runs(
    args: argparse.Namespace,
    *,
    connect: Callable[[argparse.Namespace], Any],
    is_simulated: Callable[[str | None, str], bool],
    access: Access,
) -> int:
    from mignurse.runner import state as st
    from mignurse.runner.audit import read_audit
    from mignurse.runner.render import print_runs, runs_from_audit

    _check_state_home()
    events = read_audit()
    if args.run_id:
        mine = [e for e in events if e.get("run") == args.run_id]
        try:
            saved: st.RunState | None = st.RunState.load(args.run_id)
        except (FileNotFoundError, ValueError, TypeError):
            saved = None
        if not mine and saved is None:
            raise RunCommandError(f"no run {args.run_id!r}: `mignurse runs` lists them")
        follow: dict[str, Followup] | str = {}
        if saved is not None:
            follow = _followups_now(args, saved, connect, is_simulated, access)
        if args.output == "json":
            from dataclasses import asdict

            doc = {
                "state": {**asdict(saved), "shown": saved.shown_status()} if saved else None,
                "events": mine,
                "followups": follow if isinstance(follow, str) else _followups_json(follow),
            }
            print(json.dumps(doc, indent=2, default=str))
            return 0
        if saved is not None:
            print(
                f"run {saved.run_id}: {saved.runbook} on {saved.target} ({saved.context}) "
                f"by {saved.holder}: {saved.shown_status()}"
                + (f": {saved.error}" if saved.error else "")
            )
            for s in saved.steps:
                detail = f": {s.error}" if s.error else ""
                undo = f" ({s.undo})" if s.undo else ""
                print(f"  {s.id} ({s.action}): {s.status}{detail}{undo}")
        for event in mine:
            extra = (
                event.get("status")
                or event.get("outcome")
                or event.get("result")
                or event.get("change")
                or ""
            )
            step = f" {event['step']}" if event.get("step") else ""
            print(f"  {event.get('ts', '')[:19]} {event['event']}{step} {extra}".rstrip())
        if isinstance(follow, str):
            print(follow)
        else:
            for line in followup_lines(args.run_id, follow):
                print(line)
        return 0
    every = runs_from_audit(events, states={r.run_id: r for r in st.list_runs()})
    runs = every[-args.limit :] if args.limit else every
    if args.output == "json":
        print(json.dumps(runs, indent=2, default=str))
    else:
        print_runs(runs)
        if len(runs) < len(every):
            print(
                f"the last {len(runs)} of {len(every)} runs: --limit N shows more, --limit 0 all",
                file=sys.stderr,
            )
    return 0


# -- run -----------------------------------------------------------------------------------


def _find_node(client: Any) -> Callable[[str], str | None]:
    from mignurse.cluster.client import NODES, NotFound
    from mignurse.nodeview import resolve_node_name

    def find(name: str) -> str | None:
        try:
            client.get(NODES, name)
            return name
        except NotFound:
            pass
        names = (
            str((node.get("metadata") or {}).get("name") or "")
            for page, _version in client.list_pages(NODES)
            for node in page
        )
        return resolve_node_name(name, names)

    return find


def aws_for(access: Access) -> Callable[[str], Any]:
    """`ctx.aws(service)`: boto3 clients from the session `access` resolves to (the user's
    --profile and --region), made when a step first asks; a step fails in one line when
    AWS cannot be reached as asked."""
    clients: dict[str, Any] = {}

    def make(service: str) -> Any:
        from mignurse.collect.access import AccessError, aws_client

        if service not in clients:
            try:
                clients[service] = aws_client(access, service, need_credentials=True)
            except AccessError as exc:
                raise StepFailed(str(exc)) from None
        return clients[service]

    return make


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # a closed terminal (SIGHUP) says nothing
        print(text, file=sys.stderr, flush=True)


@contextmanager
def _ctrl_c(runner: Runner) -> Iterator[None]:
    """First Ctrl-C (SIGTERM, SIGHUP): nothing new is applied and the run stops; a second
    stops at once; at the confirmation prompt the first answers it."""
    asked = {"n": 0}

    def handler(_signum: int, _frame: FrameType | None) -> None:
        asked["n"] += 1
        runner.cancel()
        if runner.prompting:
            raise KeyboardInterrupt
        if runner.finishing:
            _say("\nfinishing: recording the run and releasing its lock…")
            return
        if asked["n"] > 1:
            raise KeyboardInterrupt
        _say(
            "\nstopping: nothing new is applied; the current step stops at its next check "
            "(Ctrl-C again to stop at once)…"
        )

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def cmd_run(
    args: argparse.Namespace,
    *,
    connect: Callable[[argparse.Namespace], Any],
    is_simulated: Callable[[str | None, str], bool],
    access: Access,
) -> int:
    from mignurse.collect.access import AccessError
    from mignurse.collect.transports import shell_factory
    from mignurse.runner.render import Progress, TerminalConfirmer, print_report, reversal_words

    if args.resume and args.undo:
        raise RunCommandError("--resume and --undo exclude each other")
    _check_state_home()
    books, problems = _loaded_runbooks(args.name)
    book: Runbook | None = None
    if not (args.resume or args.undo):
        if not args.name:
            raise RunCommandError("name the runbook to run (`mignurse runbooks` lists them)")
        book = books.get(args.name)
        if book is None and args.name in problems:
            raise RunbookError(problems[args.name])
        if book is None:
            raise RunCommandError(f"no runbook {args.name!r} (known: {', '.join(books) or 'none'})")
        given = parse_assignments(args.param)
        if args.node:
            given["node"] = args.node
    read_only = bool(getattr(args, "read_only", False))
    client = connect(args)
    try:
        simulated = is_simulated(getattr(args, "kubeconfig", None), client.info.cluster)
        with _sandboxes(args) as sandboxes:
            try:
                factory = shell_factory(client, access, sandboxes=sandboxes, simulated=simulated)
            except AccessError as exc:
                raise RunCommandError(str(exc)) from None
            common: dict[str, Any] = {
                "client": client,
                "shell_for": node_shells(client, factory),
                "aws": aws_for(access),
                "listener": Progress() if args.output == "text" else (lambda event: None),
                "confirmer": TerminalConfirmer(),
                "yes": args.yes,
            }
            if book is None:
                runner = Runner.from_state(args.resume or args.undo, books=books, **common)
            else:
                params = resolve_params(book, given, find_node=_find_node(client))
                runner = Runner(book, params, **common)
            runner.confirmer = TerminalConfirmer(
                reversal=reversal_words(runner.book, undo="mignurse run --undo RUN")
            )
            mutating = runner.book.mutates and not args.dry_run
            if read_only and (mutating or args.undo):
                raise RunCommandError(
                    f"--read-only: {runner.book.name} changes the cluster; only --dry-run "
                    "is allowed"
                )
            needs_prompt = mutating and runner.book.harm > Harm.NONE
            if (needs_prompt or args.undo) and not args.yes and not sys.stdin.isatty():
                raise RunCommandError(
                    "stdin is not a terminal, so nobody can confirm: pass --yes to run "
                    f"{runner.book.name} without a prompt"
                )
            with _ctrl_c(runner):
                result = runner.undo() if args.undo else runner.run(dry_run=args.dry_run)
            followups = _followups_after(result, books, common)
    finally:
        client.close()
    _print_result(args, result, print_report, followups)
    if args.undo and result.status == "undone":
        return 0  # the undo asked for is done
    return result.exit_code


@contextmanager
def _sandboxes(args: argparse.Namespace) -> Iterator[Path]:
    if args.sandboxes:
        folder = Path(args.sandboxes)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(
        prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
    ) as tmp:
        yield Path(tmp)


def _followups_after(
    result: RunResult, books: dict[str, Runbook], common: dict[str, Any]
) -> dict[str, Followup]:
    """What can follow a run that stopped short (its state kept), as `--resume`/`--undo`
    would judge it now; {} when nothing can (succeeded, undone, never started)."""
    from mignurse.runner import state as st

    try:
        saved = st.RunState.load(result.run_id)
    except (FileNotFoundError, ValueError, TypeError):
        return {}
    if saved.status in (st.SUCCEEDED, st.RUN_UNDONE):
        return {}
    wiring = {k: common[k] for k in ("client", "shell_for", "aws")}
    return possible_followups(result.run_id, books=books, **wiring)


def followup_lines(run_id: str, followups: dict[str, Followup], said: str = "") -> list[str]:
    """One line for each follow-up: its command and what it does, or why it is not offered.
    A command already in `said` (a notice) is not repeated."""
    lines = []
    for kind, (possible, why) in followups.items():
        command = f"mignurse run --{kind} {run_id}"
        if possible and command not in said:
            lines.append(f"next: `{command}` {why}")
        elif not possible:
            lines.append(f"{kind} is not offered: {why}")
    return lines


def _followups_json(followups: dict[str, Followup]) -> dict[str, Any]:
    return {k: {"possible": f.possible, "why": f.why} for k, f in followups.items()}


def _print_result(
    args: argparse.Namespace,
    result: RunResult,
    print_report: Callable[[RunResult], None],
    followups: dict[str, Followup],
) -> None:
    if args.output == "json":
        from dataclasses import asdict

        doc = {
            "run": result.run_id,
            "status": result.status,
            "error": result.error or None,
            "notices": result.notices,
            "followups": _followups_json(followups),
            "plan": result.plan.to_json() if result.plan else None,
            "steps": [asdict(s) for s in result.steps],
        }
        print(json.dumps(doc, indent=2, default=str))
        return
    print_report(result)
    for line in followup_lines(result.run_id, followups, "\n".join(result.notices)):
        print(line)


# -- unlock --------------------------------------------------------------------------------


def cmd_unlock(
    args: argparse.Namespace,
    *,
    connect: Callable[[argparse.Namespace], Any],
) -> int:
    from mignurse.cluster.client import ClusterError, Conflict
    from mignurse.runner.audit import Audit, local_holder
    from mignurse.runner.lock import (
        LOCK_ANNOTATION,
        holder_alive,
        liveness,
        lock_resource,
        read_lock,
    )
    from mignurse.runner.render import TerminalConfirmer

    if bool(args.node) == bool(args.cluster):
        raise RunCommandError("name the locked node, or pass --cluster for the cluster lock")
    if getattr(args, "read_only", False):
        raise RunCommandError("--read-only: unlock changes the cluster")
    client = connect(args)
    try:
        if args.node:
            name = _find_node(client)(args.node)
            if name is None:
                raise RunCommandError(f"no node {args.node!r} in context {client.info.context}")
            target = "node"
        else:
            name = client.info.cluster or client.info.context
            target = "cluster"
        resource, obj_name, what = lock_resource(target, name)
        current, version = read_lock(client, resource, obj_name)
        if current is None:
            print(f"{what} holds no mignurse lock")
            return 0
        now = client.server_now()
        shown = (
            f"{what} is locked by {current.get('holder', '?')} (run {current.get('run', '?')}, "
            f"{current.get('runbook', '?')}; {liveness(current, now)}) until "
            f"{str(current.get('expires') or '?')[11:16]}Z"
        )
        print(shown, file=sys.stderr)
        alive = holder_alive(current, now)
        if alive and not args.force:
            print(
                f"mignurse: error: its run looks alive ({liveness(current, now)}): stop it "
                "first, or pass --force if you are sure it is not",
                file=sys.stderr,
            )
            return 1
        audit = Audit()
        who = {"local": local_holder(), "kube": client.info.user}
        if not args.yes:
            if not sys.stdin.isatty():
                raise RunCommandError(
                    "stdin is not a terminal, so nobody can confirm: pass --yes to unlock"
                )
            if not TerminalConfirmer().confirm(Harm.HIGH, shown, name):
                audit.write("unlock-declined", str(current.get("run") or ""), target=name, who=who)
                print(f"{what}: declined, still locked")
                return 1
        try:
            client.patch(
                resource,
                obj_name,
                {"metadata": {"resourceVersion": version, "annotations": {LOCK_ANNOTATION: None}}},
            )
        except Conflict:
            raise RunCommandError(
                f"{what} changed while you were deciding: run `mignurse unlock` again"
            ) from None
        except ClusterError as exc:
            raise RunCommandError(f"cannot unlock {what}: {exc}") from None
        audit.write(
            "unlock",
            str(current.get("run") or ""),
            target=name,
            lock=current,
            liveness=liveness(current, now),
            forced=bool(args.force and alive),
            confirmed="--yes" if args.yes else f"typed {name}",
            who=who,
        )
        print(f"{what}: unlocked (the lock of run {current.get('run', '?')} is removed)")
        return 0
    finally:
        client.close()


ERRORS: tuple[type[Exception], ...] = (RunbookError, RunCommandError)


def _runner_errors() -> tuple[type[Exception], ...]:
    from mignurse.runner.engine import RunError
    from mignurse.runner.lock import LockError

    return (*ERRORS, RunError, LockError, StepFailed)


def dispatch(
    args: argparse.Namespace,
    connect: Callable[[argparse.Namespace], Any],
    is_simulated: Callable[[str | None, str], bool],
    access_for: Callable[[argparse.Namespace], Access],
) -> int:
    """Run `runbooks`, `run`, `runs` or `unlock`; their user errors become one line and exit
    2."""
    try:
        if args.command == "runbooks":
            return cmd_runbooks(args)
        if args.command == "runs":
            return cmd_runs(
                args, connect=connect, is_simulated=is_simulated, access=access_for(args)
            )
        if args.command == "unlock":
            return cmd_unlock(args, connect=connect)
        return cmd_run(args, connect=connect, is_simulated=is_simulated, access=access_for(args))
    except _runner_errors() as exc:
        if os.environ.get("MIGNURSE_DEBUG") == "1" or getattr(args, "debug", False):
            raise
        print(f"mignurse: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_USAGE))
