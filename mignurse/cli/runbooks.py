"""`mignurse runbooks`, and what the runbook commands (`run`, `runs`, `unlock`) share: their
usage error, the runbooks that load, the state folder check, node names, follow-ups."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import EXIT_USAGE

if TYPE_CHECKING:  # the runner loads when a runbook command runs, not for every command
    from mignurse.runner.outcome import Followup
    from mignurse.runner.schema import Runbook


class RunCommandError(Exception):
    """A usage problem of `run`/`runs`; str() is the one line to show."""

    exit_code = EXIT_USAGE


def add_parser(sub: Any) -> None:
    runbooks = sub.add_parser(
        "runbooks",
        help="the runbooks `mignurse run` can run",
        description="Exit code: 0 listed, 1 some runbook files are broken and left out (one "
        "line each on stderr), 2 the runbook folder is missing.",
    )
    runbooks.add_argument("-o", "--output", choices=("table", "json"), default="table")


def loaded_runbooks(wanted: str | None = None) -> tuple[dict[str, Runbook], dict[str, str]]:
    """The runbooks that load, and one line for each file that does not: said on stderr,
    except the `wanted` one's (the caller refuses with it)."""
    from mignurse.runner.schema import load_runbooks

    problems: dict[str, str] = {}
    books = load_runbooks(problems=problems)
    for stem, line in problems.items():
        if stem != wanted:
            print(f"mignurse: warning: runbook skipped: {line}", file=sys.stderr)
    return books, problems


def check_state_home() -> None:
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
    from mignurse.cli.runview import print_runbooks

    books, problems = loaded_runbooks()
    if args.output == "json":
        print(json.dumps([b.to_json() for b in books.values()], indent=2))
    elif sys.stdout.isatty():
        print_runbooks(books)
    else:
        # The listing pads each line to the table's width, which a file or a pipe keeps as
        # trailing spaces: written without them. Its cells were made inert as it drew them.
        drawn = io.StringIO()
        print_runbooks(books, drawn)
        lines = drawn.getvalue().splitlines()
        target = getattr(sys.stdout, "styled", sys.stdout)
        target.write("".join(line.rstrip() + "\n" for line in lines))
        target.flush()
    return 1 if problems else 0


def find_node(client: Any) -> Callable[[str], str | None]:
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
        found = resolve_node_name(name, names)
        if found is None:
            _replaced_by_a_run(client, name)
        return found

    return find


def _replaced_by_a_run(client: Any, name: str) -> None:
    """A node that is gone because an unfinished run of this context replaced it: say which,
    and the command that finishes that run (rather than "no such node")."""
    from mignurse.runner.leftovers import unfinished_runs

    runs = unfinished_runs(client.info.context, name)
    if runs:
        run = runs[-1]
        raise RunCommandError(
            f"node {name} no longer exists; run {run.run_id} ({run.runbook}, "
            f"{run.shown_status()}) acted on it and did not finish: `mignurse run --resume "
            f"{run.run_id}` continues it (`mignurse runs {run.run_id}` shows what it did)"
        )


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


def followups_json(followups: dict[str, Followup]) -> dict[str, Any]:
    return {k: {"possible": f.possible, "why": f.why} for k, f in followups.items()}
