"""`mignurse run`: a runbook planned, confirmed, applied step by step and audited.

Decisions:
- `run` refuses to prompt when stdin is not a terminal: a confirmation the run needs is
  then one line saying to pass `--yes` (scripts must say so explicitly).
- `--read-only` allows only `--dry-run` of a runbook that changes the cluster.
- Ctrl-C, SIGTERM or SIGHUP (the terminal closed): the first asks the engine to stop
  (nothing new is applied, a wait stops at once, the run is recorded `interrupted`, nothing
  is undone), a second one stops at once. At a confirmation prompt the first one answers it
  (declined). While the run records its end and releases its lock, they wait for that.
- Nodes are reached as `mignurse collect` reaches them (`collect.transports`): the
  simulator's sandboxes on a simulated cluster, SSM with --bucket, else SSH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import Once, access_for, connect, connection_options, is_simulated
from mignurse.cli.runbooks import (
    RunCommandError,
    check_state_home,
    find_node,
    followup_lines,
    followups_json,
    loaded_runbooks,
)
from mignurse.cli.signalwake import SignalWake

if TYPE_CHECKING:  # the runner loads when `run` runs, not for every command
    from mignurse.runner.engine import Runner
    from mignurse.runner.outcome import Followup, RunResult
    from mignurse.runner.schema import Runbook


def add_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a runbook: plan, confirm, apply step by step, audit (see `mignurse runbooks`)",
        description="Exit code: 0 done (or --dry-run), 1 failed, declined or refused "
        "(the report says where the node stands), 2 usage, 130 interrupted.",
    )
    connection_options(run, top=False)
    run.add_argument("name", nargs="?", metavar="RUNBOOK", help="the runbook to run")
    run.add_argument("--node", action=Once, help="the node to act on (domain optional)")
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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _say(text: str) -> None:
    # A closed terminal (SIGHUP) says nothing; nor does a signal that landed while the main
    # thread was itself writing to stderr (the buffer refuses a reentrant write).
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        print(text, file=sys.stderr, flush=True)


class _Signals:
    """What the stop signals have asked so far, and whether the run is over and its report is
    being made (then only a second signal cuts the reading of what can follow short)."""

    def __init__(self) -> None:
        self.asked = 0
        self.reporting = 0  # signals since the report began; 0 while the run goes on
        self.in_report = False


@contextmanager
def _ctrl_c(runner: Runner) -> Iterator[_Signals]:
    """First Ctrl-C (SIGTERM, SIGHUP): nothing new is applied and the run stops; a second
    stops at once; at the confirmation prompt the first answers it. While the run records its
    end and releases its lock, and while its report is made, they wait for that (the report
    always says the run id and what can follow); a second one during the report skips reading
    what can follow."""
    signals = _Signals()
    wake = SignalWake(runner.cancel, name="ctrl-c")  # the run's cancel takes a lock

    def handler(_signum: int, _frame: FrameType | None) -> None:
        signals.asked += 1
        wake.poke()
        if runner.prompting:
            raise KeyboardInterrupt
        if signals.in_report:
            signals.reporting += 1
            if signals.reporting > 1:
                raise KeyboardInterrupt
            _say("\nfinishing the report (Ctrl-C again to skip what can follow)…")
            return
        if runner.finishing:
            _say("\nfinishing: recording the run and releasing its lock…")
            return
        if signals.asked > 1:
            raise KeyboardInterrupt
        _say(
            "\nstopping: nothing new is applied; the current step stops at its next check "
            "(Ctrl-C again to stop at once)…"
        )

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield signals
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        wake.close()


def cmd_run(args: argparse.Namespace) -> int:
    # Here, not at the top: the engine brings the kubernetes client, a third of a second of
    # start-up that `mignurse --help` and the commands that need no cluster never use.
    from mignurse.cli.runview import Progress, TerminalConfirmer, print_report
    from mignurse.collect.access import AccessError
    from mignurse.collect.transports import shell_factory
    from mignurse.runner.engine import Runner
    from mignurse.runner.schema import (
        RunbookError,
        parse_assignments,
        resolve_params,
        reversal_words,
    )
    from mignurse.runner.step import Harm
    from mignurse.runner.wiring import aws_for, node_shells

    access = access_for(args)
    if args.resume and args.undo:
        raise RunCommandError("--resume and --undo exclude each other")
    check_state_home()
    books, problems = loaded_runbooks(args.name)
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
        if args.node and given.setdefault("node", args.node) != args.node:
            raise RunCommandError(
                f"--node {args.node!r} and --param node={given['node']!r} name different nodes: "
                "give the node once"
            )
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
                params = resolve_params(book, given, find_node=find_node(client))
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
            with _ctrl_c(runner) as signals:
                result = runner.undo() if args.undo else runner.run(dry_run=args.dry_run)
                signals.in_report = True
                try:
                    followups = _followups_after(result, books, common)
                except KeyboardInterrupt:
                    followups = _unchecked(result.run_id)
                _print_result(args, result, print_report, followups)
    finally:
        client.close()
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
    import tempfile  # here: a command that needs no folder never loads it

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
    from mignurse.runner.engine import possible_followups

    try:
        saved = st.RunState.load(result.run_id)
    except (FileNotFoundError, ValueError, TypeError):
        return {}
    if saved.status in (st.SUCCEEDED, st.RUN_UNDONE):
        return {}
    wiring = {k: common[k] for k in ("client", "shell_for", "aws")}
    return possible_followups(result.run_id, books=books, **wiring)


def _unchecked(run_id: str) -> dict[str, Followup]:
    """What can follow, when reading it was cut short: both commands, said as unchecked."""
    from mignurse.runner.outcome import Followup

    why = "(not checked: the report was cut short; `mignurse runs` shows the run)"
    return {"resume": Followup(True, why), "undo": Followup(True, why)} if run_id else {}


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
            "followups": followups_json(followups),
            "plan": result.plan.to_json() if result.plan else None,
            "steps": [asdict(s) for s in result.steps],
        }
        print(json.dumps(doc, indent=2, default=str))
        return
    print_report(result)
    for line in followup_lines(result.run_id, followups, "\n".join(result.notices)):
        print(line)
