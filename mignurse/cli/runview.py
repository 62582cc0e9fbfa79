"""Terminal faces of the runbook engine: live progress, prompts, the report, the run lists.

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
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from mignurse.inert import inert
from mignurse.inert import inert_markup as escape
from mignurse.render import console_for, plan_markup, print_listing

# The runner's types name what is drawn; a list of runbooks or of past runs loads no step, plan
# or outcome of the runner for them, and rich only where it draws (`print_listing`).
if TYPE_CHECKING:
    from mignurse.inertconsole import InertConsole
    from mignurse.runner.outcome import RunEvent, RunResult
    from mignurse.runner.schema import Runbook
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


def _console(stream: IO[str]) -> InertConsole:
    return console_for(stream, highlight=False, soft_wrap=True)


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
        from mignurse.runner.step import Harm

        try:
            if level >= Harm.HIGH:
                how = f" ({self.reversal})" if self.reversal else ": hard to reverse"
                shown = inert(expected_word)  # a kubeconfig's names are outside input
                answer = self.ask(f"HIGH HARM{how}. Type {shown} to proceed: ")
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
    rows = []
    for book in books.values():
        params = " ".join(
            f"{p.name}{'*' if p.required else ''}:{p.type}" + (f"={p.default}" if p.default else "")
            for p in book.params.values()
        )
        rows.append((book.name, book.target, book.harm.name.lower(), book.title, params))
    print_listing(("NAME", "TARGET", "HARM", "TITLE", "PARAMS"), rows, stream or sys.stdout)


def print_runs(runs: list[dict[str, Any]], stream: IO[str] | None = None) -> None:
    rows = [
        (
            str(run.get("started", ""))[:19].replace("T", " "),
            str(run.get("run", "")),
            str(run.get("runbook", "")),
            str(run.get("context", "")),  # the kube context it ran against
            str(run.get("target", "")),
            str(run.get("who", "")),
            str(run.get("outcome", "")) + (f" (then {run['last']})" if run.get("last") else ""),
        )
        for run in runs
    ]
    columns = ("STARTED", "RUN", "RUNBOOK", "CONTEXT", "TARGET", "WHO", "OUTCOME")
    print_listing(columns, rows, stream or sys.stdout)
