"""A run: live per-step progress and the node's streamed output, then the report.

The engine runs in a worker; its events, the confirmation it asks for, the report and
whether a stopped run can be resumed or undone all come back to this screen as messages.
Ctrl-C (or `c`) cancels: the engine stops at the step's next wait, undoes nothing and
records the run `interrupted`. `r` (resume) and `u` (undo) are offered only when the
engine says they can run now; otherwise the report says why not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, RichLog

from mignurse.cluster.client import NODES, ClusterError
from mignurse.inert import inert_markup as escape
from mignurse.model import Node
from mignurse.nodeview import short_name
from mignurse.render import plan_markup
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.lock import LockError
from mignurse.runner.outcome import Followup, RunError, RunEvent, RunResult
from mignurse.runner.plan import Plan, batch_word
from mignurse.runner.schema import OPPOSITES, RunbookError, reversal_words
from mignurse.runner.step import Harm, StepFailed
from mignurse.tui.launcher import RunbookLauncher
from mignurse.tui.screens.confirm import ModalConfirmer
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.selection import Selection
from mignurse.tui.shown import DataTable, Static

RUNNER_ERRORS = (RunError, LockError, RunbookError, StepFailed, ClusterError)
STATE_STYLE = {
    "running": "bold cyan",
    st.VERIFIED: "green",
    st.SKIPPED: "dim",
    st.FAILED: "bold red",
    st.UNDONE: "yellow",
    st.UNDO_FAILED: "bold red",
    st.NOT_UNDOABLE: "yellow",
    st.STOPPED: "bold yellow",
    "undoing": "yellow",
    "blocked": "bold red",
}
OUTCOME_STYLE = {
    st.SUCCEEDED: "green",
    "dry-run": "dim",
    "declined": "yellow",
    "blocked": "bold red",
    st.RUN_FAILED: "bold red",
    st.INTERRUPTED: "bold yellow",
    st.RUN_UNDONE: "yellow",
    "refused": "bold red",
    "running": "cyan",
}


class EngineEvent(Message):
    def __init__(self, runner: Runner, event: RunEvent) -> None:
        super().__init__()
        self.runner = runner
        self.event = event


class RunFinished(Message):
    def __init__(self, lines: list[str], stopped: RunResult | None) -> None:
        super().__init__()
        self.lines = lines
        self.stopped = stopped  # the last interrupted or failed run: resume or undo may follow


class FollowupsChecked(Message):
    def __init__(self, run_id: str, followups: dict[str, Followup]) -> None:
        super().__init__()
        self.run_id = run_id
        self.followups = followups


@dataclass
class _Row:
    target: str
    step: str
    state: str = st.PENDING
    detail: str = ""


class RunLog(RichLog):
    """The run's output. Each line written scrolls it to its end; so does a change of its
    size (the step table above it grows as rows fill in), which would otherwise leave the
    newest lines below the bottom edge until the next line came."""

    def on_resize(self, _event: Resize) -> None:  # RichLog's own handler runs after this one
        self.scroll_end(animate=False, immediate=False, x_axis=False)


class RunScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "cancel_run", "Cancel", priority=True),
        Binding("c", "cancel_run", "Cancel"),
        Binding("r", "resume", "Resume"),
        Binding("u", "undo", "Undo"),
        Binding("escape", "close", "Close"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    RunScreen { background: $background; }
    #run-title { padding: 0 1; background: $boost; }
    #run-steps { height: auto; max-height: 40%; }
    #run-output { height: 1fr; min-height: 4; border-top: solid $primary; }
    #run-report { height: auto; max-height: 40%; padding: 0 1; border-top: solid $primary; }
    """

    def __init__(
        self,
        launcher: RunbookLauncher,
        runners: list[Runner],
        *,
        undo: bool = False,
        selection: Selection | None = None,
    ) -> None:
        super().__init__()
        self.launcher = launcher
        self.runners = runners
        self.undoing = undo
        self.selection = selection or Selection(cluster=launcher.cluster)
        self.results: list[RunResult] = []
        self.errors: list[str] = []
        self.running = True
        self.cancelled = False
        self.report = ""
        self.followups: dict[str, Followup] = {}  # for the stopped run, once checked
        self._stopped: RunResult | None = None
        self._report_lines_base: list[str] = []
        self._rows: dict[str, _Row] = {}
        self._current: Runner | None = None

    # layout

    def compose(self) -> ComposeResult:
        book = self.runners[0].book
        on = ", ".join(short_name(r.target) for r in self.runners)
        verb = "Undo of" if self.undoing else "Run of"
        title = Text.assemble((f"{verb} {book.name}", "bold"), f" on {on}: {book.title}")
        if len(self.runners) == 1:
            title.append(f" · run {self.runners[0].run_id}", style="dim")
        yield Static(title, id="run-title")
        yield DataTable(id="run-steps", cursor_type="none", zebra_stripes=True)
        yield RunLog(id="run-output", wrap=True, markup=True, highlight=False, auto_scroll=True)
        yield Static(Text("running… (ctrl+c or c cancels)", style="dim"), id="run-report")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#run-steps", DataTable)
        for column in ("TARGET", "STEP", "STATE", "DETAIL"):
            table.add_column(column, key=column)
        for runner in self.runners:
            for step in runner.state.steps:
                self._add_row(runner, step.id, step.status)
        self._run()

    def _key(self, runner: Runner, step: str) -> str:
        return f"{runner.run_id}/{step}"

    def _add_row(self, runner: Runner, step: str, state: str) -> None:
        key = self._key(runner, step)
        row = _Row(short_name(runner.target), step, state)
        self._rows[key] = row
        self.query_one("#run-steps", DataTable).add_row(*self._cells(row), key=key)

    def _cells(self, row: _Row) -> list[Any]:
        return [row.target, row.step, Text(row.state, style=STATE_STYLE.get(row.state, "")),
                row.detail]  # fmt: skip

    def _set_row(self, runner: Runner, step: str, state: str, detail: str | None = None) -> None:
        key = self._key(runner, step)
        row = self._rows.get(key)
        if row is None:
            return
        row.state = state
        if detail is not None:
            row.detail = " ".join(detail.split())
        table = self.query_one("#run-steps", DataTable)
        for column, value in zip(("STATE", "DETAIL"), self._cells(row)[2:], strict=True):
            table.update_cell(key, column, value, update_width=True)

    def step_states(self) -> dict[str, str]:
        """Each step row's state as shown, by "run/step"."""
        return {key: row.state for key, row in self._rows.items()}

    # the engine's events

    def _write(self, markup: str) -> None:
        out = self.query_one("#run-output", RichLog)
        out.write(markup, scroll_end=True)  # the newest line stays in view

    @on(EngineEvent)
    def _event(self, message: EngineEvent) -> None:
        runner, event = message.runner, message.event
        who = escape(short_name(runner.target))
        if event.kind == "plan":
            plan: Plan = event.data["plan"]
            self._write(f"[bold]plan for {who}[/]")
            self._write(plan_markup(plan))
            for item in plan.steps:
                if item.blocked:
                    self._set_row(runner, item.spec.id, "blocked", item.blocked)
        elif event.kind == "notice":
            self._write(f"[yellow]{who}: {escape(event.message)}[/]")
        elif event.kind == "step-started":
            self._set_row(runner, event.step, "running", event.message)
            self._write(f"[bold]▶ {who} {escape(event.step)}[/]: {escape(event.message)}")
        elif event.kind == "output":
            self._write(f"  [dim]{who} {escape(event.step)}[/] {escape(event.message)}")
        elif event.kind in ("step-finished", "undo-finished"):
            status = str(event.data.get("status") or "")
            self._set_row(runner, event.step, status or "done", event.message)
            prefix = "undo " if event.kind == "undo-finished" else ""
            self._write(f"{prefix}{who} {escape(event.step)}: {escape(event.message)}")
        elif event.kind == "undo-started":
            self._set_row(runner, event.step, "undoing", event.message)
            self._write(f"[yellow]↶ {who} {escape(event.step)}[/]: {escape(event.message)}")

    def _listener(self, runner: Runner) -> Any:
        def listen(event: RunEvent) -> None:
            if event.kind != "finished":  # the worker reports the result itself
                self.post_message(EngineEvent(runner, event))

        return listen

    # the worker

    def _reversal(self) -> str:
        return reversal_words((self._current or self.runners[0]).book)

    @work(thread=True, exclusive=True, group="runbook-run", exit_on_error=False)
    def _run(self) -> None:
        confirmer = ModalConfirmer(
            self.app, reversal=self._reversal, accept_node=self.selection.node_name
        )
        for runner in self.runners:
            runner.listener = self._listener(runner)
            runner.confirmer = confirmer
        if len(self.runners) > 1 and not self.undoing and not self._confirm_batch(confirmer):
            self._finish(declined=True)
            return
        for runner in self.runners:
            if self.cancelled:
                break
            self._current = runner
            try:
                result = runner.undo() if self.undoing else runner.run()
            except RUNNER_ERRORS as exc:
                self.errors.append(f"{short_name(runner.target)}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a bug shows as a line, not a dead app
                self.errors.append(f"{short_name(runner.target)}: {type(exc).__name__}: {exc}")
                continue
            self.results.append(result)
            if result.status in ("declined", st.INTERRUPTED):
                break
        self._current = None
        self._finish()

    def _confirm_batch(self, confirmer: ModalConfirmer) -> bool:
        """Several nodes: plan them all, then one confirmation covers every run."""
        plans: list[Plan] = []
        for runner in self.runners:
            try:
                plans.append(runner.plan())
            except RUNNER_ERRORS as exc:
                self.errors.append(f"{short_name(runner.target)}: {exc}")
                return False
        blocked = [(p, p.blocked_line()) for p in plans if p.blocked_line()]
        if blocked:
            plan, why = blocked[0]
            self.errors.append(f"{short_name(plan.target)}: {why}")
            return False
        harm = max((p.harm for p in plans), default=Harm.NONE)
        how = "not needed (no change)"
        if harm > Harm.NONE:
            text = "\n\n".join(p.text() for p in plans)
            word = batch_word(plans) if harm >= Harm.HIGH else "y"
            if not confirmer.confirm(harm, text, word):
                return False
            how = f"{'typed' if harm >= Harm.HIGH else 'answered'} {word} for the batch"
        for runner in self.runners:
            runner.yes = True
            runner.confirmation = how
        return True

    def _finish(self, *, declined: bool = False) -> None:
        lines = self._report_lines(declined)
        stopped = self._last(st.INTERRUPTED, st.RUN_FAILED)
        self.post_message(RunFinished(lines, stopped))
        if stopped is not None:
            self.post_message(
                FollowupsChecked(stopped.run_id, self.launcher.followups(stopped.run_id))
            )

    def _report_lines(self, declined: bool) -> list[str]:
        """The report (built in the worker: the node's state is read from the cluster)."""
        lines: list[str] = []
        if declined:
            lines.append("declined: nothing changed")
        for result in self.results:
            runner = next(r for r in self.runners if r.run_id == result.run_id)
            head = f"run {result.run_id} ({short_name(runner.target)}): {result.status}"
            lines.append(head + (f": {result.error}" if result.error else ""))
            if result.status not in ("dry-run", "declined", "blocked"):
                lines.extend(f"  {line}" for line in result.report_lines())
            node = str(runner.params.get("node") or "")
            if node:
                lines.append(f"  {self._node_state(runner, node)}")
            lines.extend(f"  {n}" for n in result.notices if "mignurse run --" not in n)
            lines.extend(f"  next: {n}" for n in next_steps(runner, result))
        lines.extend(f"error: {e}" for e in self.errors)
        return lines or ["nothing ran"]

    @staticmethod
    def _node_state(runner: Runner, node: str) -> str:
        try:
            raw = runner.client.get(NODES, node)
        except ClusterError as exc:
            return f"node {short_name(node)}: cannot read it now: {exc}"
        now = Node.from_api(raw)
        words = [now.ready_status, "cordoned" if now.unschedulable else "schedulable"]
        if now.deleting is not None:
            words.append("being deleted")
        return f"node {short_name(node)}: {', '.join(words)}"

    @on(RunFinished)
    def _finished(self, message: RunFinished) -> None:
        self.running = False
        self._stopped = message.stopped
        self._report_lines_base = message.lines
        self._reconcile_rows()
        self._show_report()
        self.refresh_bindings()
        # The cluster changed: the app judges it again now, not at its next 5 s diagnosis,
        # and holds what it read before as stale until then.
        changed = getattr(self.app, "cluster_changed", None)
        if callable(changed):
            changed()

    def _reconcile_rows(self) -> None:
        """Every step row as the run state has it: a step cut short never stays "running"."""
        for runner in self.runners:
            for step in runner.state.steps:
                row = self._rows.get(self._key(runner, step.id))
                if row is not None and row.state in ("running", "undoing"):
                    self._set_row(runner, step.id, step.status, step.error or None)

    @on(FollowupsChecked)
    def _followups_checked(self, message: FollowupsChecked) -> None:
        if self._stopped is None or message.run_id != self._stopped.run_id:
            return
        self.followups = message.followups
        self._show_report()
        self.refresh_bindings()

    def _followup_lines(self) -> list[str]:
        """What may follow a stopped run, as the engine judged it: the key, or why not."""
        if self._stopped is None:
            return []
        if not self.followups:
            return ["  checking whether resume or undo can run now…"]
        lines = []
        for key, offer in (("resume", "r resumes"), ("undo", "u undoes")):
            followup = self.followups.get(key)
            if followup is None or (key == "resume" and self.undoing):
                continue
            possible, why = followup
            lines.append(f"  {offer}: {why}" if possible else f"  cannot {key}: {why}")
        return lines

    def _show_report(self) -> None:
        lines = [*self._report_lines_base, *self._followup_lines()]
        self.report = "\n".join(lines)
        report = Text()
        for i, line in enumerate(lines):
            if i:
                report.append("\n")
            style = ""
            for word, word_style in OUTCOME_STYLE.items():
                if line.startswith("run ") and f": {word}" in line:
                    style = word_style
                    break
            if line.startswith("error"):
                style = "bold red"
            elif line.startswith("  cannot "):
                style = "yellow"
            report.append(line, style=style)
        self.query_one("#run-report", Static).update(report)

    # keys

    def _last(self, *statuses: str) -> RunResult | None:
        for result in reversed(self.results):
            if result.status in statuses:
                return result
        return None

    def can(self, key: str) -> bool:
        """Whether resume or undo of the stopped run can run now, as the engine judged it."""
        followup = self.followups.get(key)
        return not self.running and self._stopped is not None and bool(followup and followup[0])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that do nothing now are hidden (False), not dimmed.
        if action == "cancel_run":
            return self.running
        if action == "close":
            return not self.running
        if action == "resume":
            return not self.undoing and self.can("resume")
        if action == "undo":
            return self.can("undo")
        return True

    def action_cancel_run(self) -> None:
        if not self.running:
            return
        self.cancelled = True
        runner = self._current
        if runner is not None:
            runner.cancel()
        self.query_one("#run-report", Static).update(
            Text("cancelling: the step stops at its next wait; nothing is undone…", style="yellow")
        )

    def on_unmount(self) -> None:
        # The app quits mid-run: stop at the step's next wait (recorded as interrupted)
        # rather than keep the process alive until the step ends.
        if self.running:
            self.cancelled = True
            if self._current is not None:
                self._current.cancel()

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)

    def action_close(self) -> None:
        if self.running:
            self.notify("Still running: ctrl+c or c cancels it.", timeout=4)
            return
        self.dismiss(None)

    def _again(self, undo: bool) -> None:
        result = self._stopped
        if result is None or self.running or not self.can("undo" if undo else "resume"):
            return
        try:
            runner = self.launcher.from_state(result.run_id)
        except RUNNER_ERRORS as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        app = self.app
        self.dismiss(None)
        app.push_screen(RunScreen(self.launcher, [runner], undo=undo, selection=self.selection))

    def action_resume(self) -> None:
        self._again(undo=False)

    def action_undo(self) -> None:
        self._again(undo=True)


def next_steps(runner: Runner, result: RunResult) -> list[str]:
    if result.status == st.SUCCEEDED:
        opposite = OPPOSITES.get(runner.book.name)
        if opposite:
            return [f"to reverse it, run {opposite} (R); the audit log (A) has this run"]
        return ["the audit log (A) has this run"]
    if result.status == st.RUN_UNDONE:
        return ["the completed steps were undone; fix the cause and run it again"]
    return []
