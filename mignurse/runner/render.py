"""Terminal faces of the runbook engine: the plan, live progress, prompts, the run lists.

Decisions:
- On a terminal, rich styles the plan and the progress; piped, the same lines go out as
  plain text (no colour codes, no cursor tricks), one event a line, for logs and CI.
- Progress goes to stderr and the final report to stdout, so `mignurse run … > report`
  keeps the report alone.
- The prompt reads the answer from stdin (the command refuses to prompt when stdin is
  not a terminal): y/N for LOW harm, the node or cluster name typed for HIGH.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mignurse.runner.engine import Plan, RunEvent, RunResult
from mignurse.runner.schema import Runbook
from mignurse.runner.state import RunState
from mignurse.runner.step import Harm

_MARK = {
    "verified": "[green]✓[/]",
    "skipped": "[dim]–[/]",
    "failed": "[red]✗[/]",
    "undone": "[yellow]↶[/]",
    "undo-failed": "[red]✗[/]",
    "not-undoable": "[yellow]![/]",
    "interrupted": "[yellow]‖[/]",
}


# Runbooks whose effect one of the others reverses: the confirmation and the report say so.
OPPOSITES = {
    "cordon": "uncordon",
    "uncordon": "cordon",
    "pause-node-repair": "resume-node-repair",
    "resume-node-repair": "pause-node-repair",
}


def reversal_words(book: Runbook, *, undo: str = "undo (u)") -> str:
    """How the runbook's change is put back, for the confirmation ("" for no change)."""
    opposite = OPPOSITES.get(book.name)
    if opposite:
        return f"reversible: {opposite} puts it back"
    actions = [step.make() for step in book.steps]
    if all(a.can_undo for a in actions if a.mutates):
        return f"reversible: {undo} puts back what it changed"
    return "cannot be undone" if book.harm >= Harm.HIGH else ""


def _console(stream: IO[str]) -> Console:
    return Console(file=stream, highlight=False, soft_wrap=True)


def plan_markup(plan: Plan) -> str:
    lines = [f"[bold]{escape(plan.book.name)}[/] on [bold]{escape(plan.target)}[/]: "]
    lines[0] += escape(plan.book.title)
    for i, step in enumerate(plan.steps, 1):
        head = f"[bold]{i}. {escape(step.spec.id)}[/] {escape(step.action.title)}"
        if step.status in ("verified", "skipped"):
            lines.append(f"{head} [dim](already {step.status})[/]")
            continue
        if not step.action.mutates:
            head += " [dim](read-only)[/]"
        elif step.action.harm >= Harm.HIGH:
            head += " [red](high harm)[/]"
        lines.append(head)
        if step.blocked:
            lines.append(f"   [red]blocked:[/] {escape(step.blocked)}")
            continue
        if step.plan is None:
            continue
        if step.plan.nothing_to_do:
            lines.append("   [dim]nothing to do[/]")
        lines.extend(f"   change {escape(c.describe())}" for c in step.plan.changes)
        lines.extend(f"   run {escape(c.describe())}" for c in step.plan.commands)
        lines.extend(f"   [yellow]note:[/] {escape(n)}" for n in step.plan.notes)
    return "\n".join(lines)


class Progress:
    """A listener for `Runner`: prints the plan and each step's progress as it happens."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.rich = self.stream.isatty()
        self.console = _console(self.stream)

    def _line(self, markup: str, plain: str) -> None:
        if self.rich:
            self.console.print(markup)
        else:
            print(plain, file=self.stream, flush=True)

    def __call__(self, event: RunEvent) -> None:
        kind, step, message = event.kind, event.step, event.message
        if kind == "plan":
            plan = event.data["plan"]
            self._line(plan_markup(plan), plan.text())
        elif kind == "notice":
            self._line(f"[yellow]{escape(message)}[/]", f"note: {message}")
        elif kind == "step-started":
            self._line(f"[bold]▶ {escape(step)}[/]: {escape(message)}", f"> {step}: {message}")
        elif kind == "output":
            self._line(f"  [dim]{escape(step)}[/] {escape(message)}", f"  {step}: {message}")
        elif kind in ("step-finished", "undo-finished"):
            status = str(event.data.get("status", ""))
            mark = _MARK.get(status, "·")
            self._line(
                f"{mark} {escape(step)}: {escape(message)}",
                f"{'undo ' if kind == 'undo-finished' else ''}{step}: {status or message}"
                + (f": {message}" if status and message not in (status, "verified") else ""),
            )
        elif kind == "undo-started":
            self._line(f"[yellow]↶ {escape(step)}[/]: {escape(message)}", f"< {step}: {message}")


class TerminalConfirmer:
    """Asks on the terminal: y/N, or the node/cluster name typed back for HIGH harm, saying
    how the change is reversed (`reversal`, from `reversal_words`)."""

    def __init__(
        self,
        ask: Callable[[str], str] | None = None,
        stream: IO[str] | None = None,
        *,
        reversal: str = "",
    ) -> None:
        self.stream = stream or sys.stderr
        self.ask = ask or self._input
        self.reversal = reversal

    def _input(self, prompt: str) -> str:
        print(prompt, end="", file=self.stream, flush=True)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.strip()

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        try:
            if level >= Harm.HIGH:
                how = f" ({self.reversal})" if self.reversal else ": hard to reverse"
                answer = self.ask(f"HIGH HARM{how}. Type {expected_word} to proceed: ")
                return answer == expected_word
            return self.ask("Proceed? [y/N] ").lower() in ("y", "yes")
        except (EOFError, KeyboardInterrupt):
            print("", file=self.stream)
            return False


def print_report(result: RunResult, stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    head = f"run {result.run_id}: {result.status}" + (f": {result.error}" if result.error else "")
    print(head, file=out)
    if result.status not in ("dry-run", "declined", "blocked"):
        for line in result.report_lines():
            print(f"  {line}", file=out)
    for notice in result.notices:
        print(notice, file=out)
    out.flush()


def print_runbooks(books: dict[str, Runbook], stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("NAME", "TARGET", "HARM", "TITLE", "PARAMS"):
        table.add_column(column, overflow="fold")
    for book in books.values():
        params = " ".join(
            f"{p.name}{'*' if p.required else ''}:{p.type}" + (f"={p.default}" if p.default else "")
            for p in book.params.values()
        )
        table.add_row(book.name, book.target, book.harm.name.lower(), book.title, params)
    Console(file=out, highlight=False, width=200 if not out.isatty() else None).print(table)


def runs_from_audit(
    events: list[dict[str, Any]], states: Mapping[str, RunState] | None = None
) -> list[dict[str, Any]]:
    """One summary a run, newest last: when, run, runbook, target, who, outcome.

    A run's outcome is what its last `finished` said; a refusal or a declined prompt counts
    only for a run that never started (a refused `--resume` leaves the outcome as it was,
    noted apart). A run still `running` in the log is checked against its run state: a dead
    process shows as `killed`."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["event"] in ("unlock", "unlock-declined"):
            continue  # about a lock, not a run of its own
        run = runs.setdefault(
            str(event.get("run")),
            {"run": event.get("run"), "started": event.get("ts"), "outcome": "running"},
        )
        for key in ("runbook", "target", "context"):
            if event.get(key) and not run.get(key):
                run[key] = event[key]
        who = event.get("who")
        if isinstance(who, dict) and who.get("local"):
            run["who"] = who["local"]
        kind = event["event"]
        if kind in ("started", "resumed", "undo-started"):
            run["began"] = True
        if kind in ("finished", "dry-run") or (
            kind in ("declined", "refused") and not run.get("began")
        ):
            run["outcome"] = event.get("outcome") or kind
        elif kind in ("declined", "refused"):
            run["last"] = f"{kind} {'undo' if event.get('undo') else 'resume'}"
        run["updated"] = event.get("ts")
    for run in runs.values():
        run.pop("began", None)
        state = (states or {}).get(str(run["run"]))
        if run["outcome"] == "running" and state is not None:
            run["outcome"] = state.shown_status()
    return list(runs.values())


def print_runs(runs: list[dict[str, Any]], stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("STARTED", "RUN", "RUNBOOK", "TARGET", "WHO", "OUTCOME"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            str(run.get("started", ""))[:19].replace("T", " "),
            str(run.get("run", "")),
            str(run.get("runbook", "")),
            str(run.get("target", "")),
            str(run.get("who", "")),
            str(run.get("outcome", "")) + (f" (then {run['last']})" if run.get("last") else ""),
        )
    Console(file=out, highlight=False, width=200 if not out.isatty() else None).print(table)
