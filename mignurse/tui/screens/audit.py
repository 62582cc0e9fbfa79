"""`A`: past runbook runs from the audit log, newest first; enter shows one run's story."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer

from mignurse.nodeview import short_name
from mignurse.paths import StateFileError, in_demo
from mignurse.runner import state as st
from mignurse.runner.audit import read_audit, runs_from_audit
from mignurse.tui.screens.run import OUTCOME_STYLE
from mignurse.tui.screens.run_steps import RunStepsScreen
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import DataTable, Static

AUDIT_RUNS_SHOWN = 200
TITLE_AUDIT = Text.assemble(
    ("Audit log: past runbook runs, newest first", "bold"), ("  enter: the run's steps", "dim")
)


def past_runs() -> list[dict[str, Any]]:
    """Runs from the audit log, newest first."""
    runs = runs_from_audit(read_audit(), states={r.run_id: r for r in st.list_runs()})
    runs.sort(key=lambda r: str(r.get("started") or ""), reverse=True)
    return runs[:AUDIT_RUNS_SHOWN]


class AuditScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    AuditScreen { background: $background; }
    #audit-title { padding: 0 1; background: $boost; }
    #audit-runs { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(TITLE_AUDIT, id="audit-title")
        yield DataTable(id="audit-runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#audit-runs", DataTable)
        for column in ("WHEN (UTC)", "WHO", "RUNBOOK", "TARGET", "OUTCOME", "RUN", "CONTEXT"):
            table.add_column(column, key=column)
        try:
            self.runs = past_runs()
        except StateFileError as exc:  # a link or FIFO planted in the state folder
            self.runs = []
            self.query_one("#audit-title", Static).update(Text(str(exc), style="bold red"))
            return
        for run in self.runs:
            outcome = str(run.get("outcome") or "")
            table.add_row(
                str(run.get("started") or "")[:19].replace("T", " "),
                str(run.get("who") or ""),
                str(run.get("runbook") or ""),
                short_name(str(run.get("target") or "")),
                Text(outcome, style=OUTCOME_STYLE.get(outcome, "")),
                str(run.get("run") or ""),
                str(run.get("context") or ""),
                key=str(run.get("run")),
            )
        heading = TITLE_AUDIT
        if not self.runs:
            heading = Text("Audit log: no runbook has run yet (R starts one)", style="bold")
        if in_demo():
            heading = Text.assemble(
                heading, ("\nthe demo's own log, apart from yours: gone when the demo ends", "dim")
            )
        self.query_one("#audit-title", Static).update(heading)
        table.focus()

    def rows(self) -> list[tuple[str, ...]]:
        table = self.query_one("#audit-runs", DataTable)
        return [tuple(str(c) for c in table.get_row(key)) for key in table.rows]

    @on(DataTable.RowSelected, "#audit-runs")
    def _selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(RunStepsScreen(str(event.row_key.value)))

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
