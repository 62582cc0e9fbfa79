"""`mignurse runs`: past runbook runs from the audit log, or one run's steps and what can
follow it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import access_for, connect, connection_options, is_simulated
from mignurse.cli.runbooks import (
    RunCommandError,
    check_state_home,
    followup_lines,
    followups_json,
    loaded_runbooks,
)

if TYPE_CHECKING:  # paramiko and boto3 load only when a node or AWS is reached
    from mignurse.collect.access import Access
    from mignurse.runner.outcome import Followup

RUNS_SHOWN = 30


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 (all) or more")
    return value


def add_parser(sub: Any) -> None:
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


def _followups_now(
    args: argparse.Namespace,
    saved: Any,
    access: Access,
) -> dict[str, Followup] | str:
    """What can follow a saved run, read from its own context as `--resume`/`--undo` would
    read it; or one line saying why that cannot be told now."""
    from mignurse.cluster.client import ClusterError
    from mignurse.collect.transports import shell_factory
    from mignurse.runner.engine import possible_followups
    from mignurse.runner.wiring import aws_for, node_shells

    if saved.status in ("succeeded", "undone"):
        return {}
    there = argparse.Namespace(**{**vars(args), "context": saved.context})
    try:
        client = connect(there)
    except ClusterError as exc:
        return f"cannot tell what can follow: context {saved.context!r}: {exc}"
    try:
        simulated = is_simulated(getattr(args, "kubeconfig", None), client.info.cluster)
        import tempfile  # here: a command that needs no folder never loads it

        with tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        ) as sandboxes:
            factory = shell_factory(client, access, sandboxes=Path(sandboxes), simulated=simulated)
            books, _problems = loaded_runbooks()
            return possible_followups(
                saved.run_id,
                client=client,
                books=books,
                shell_for=node_shells(client, factory),
                aws=aws_for(access),
            )
    finally:
        client.close()


def _heading(run_id: str, run: dict[str, Any]) -> str:
    """A run's first line: what ran, on what, through which context and cluster, by whom,
    and how it ended ("?" for what an older log line did not say)."""

    def said(key: str) -> str:
        return str(run.get(key) or "?")

    return (
        f"run {run_id}: {said('runbook')} on {said('target')} (context {said('context')}, "
        f"cluster {said('cluster')}) by {said('who')}: {said('outcome')}"
    )


def cmd_runs(args: argparse.Namespace) -> int:
    from mignurse.cli.runview import print_runs
    from mignurse.runner import state as st
    from mignurse.runner.audit import read_audit, runs_from_audit

    check_state_home()
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
            # How nodes and AWS are reached: only a saved run's follow-ups reach them.
            follow = _followups_now(args, saved, access_for(args))
        if args.output == "json":
            from dataclasses import asdict

            doc = {
                "state": {**asdict(saved), "shown": saved.shown_status()} if saved else None,
                "events": mine,
                "followups": follow if isinstance(follow, str) else followups_json(follow),
            }
            print(json.dumps(doc, indent=2, default=str))
            return 0
        if saved is not None:
            print(
                _heading(
                    saved.run_id,
                    {
                        "runbook": saved.runbook,
                        "target": saved.target,
                        "context": saved.context,
                        "cluster": saved.cluster,
                        "who": saved.holder,
                        "outcome": saved.shown_status(),
                    },
                )
                + (f": {saved.error}" if saved.error else "")
            )
            for s in saved.steps:
                detail = f": {s.error}" if s.error else ""
                undo = f" ({s.undo})" if s.undo else ""
                print(f"  {s.id} ({s.action}): {s.status}{detail}{undo}")
        else:
            # A run that never started (declined, refused, a dry run) keeps no state: its
            # audit lines are all there is to say what it was and where.
            for summary in runs_from_audit(mine):  # none when only an unlock names it
                print(_heading(args.run_id, summary))
        for event in mine:
            extra = (
                event.get("status")
                or event.get("outcome")
                or event.get("result")
                or event.get("change")
                or ""
            )
            step = f" {event['step']}" if event.get("step") else ""
            when = str(event.get("ts") or "")[:19]  # a record read back may hold anything
            print(f"  {when} {event['event']}{step} {extra}".rstrip())
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
