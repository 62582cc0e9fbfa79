"""One past run: its steps from the saved run state, then its audit events."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer

from mignurse.paths import StateFileError
from mignurse.runner import state as st
from mignurse.runner.audit import read_audit
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import Static


def run_story(run_id: str) -> str:
    """One run's steps (from its saved state) and its audit events, as plain lines."""
    try:
        events = [e for e in read_audit() if e.get("run") == run_id]
    except StateFileError as exc:
        return str(exc)
    lines: list[str] = []
    try:
        saved: st.RunState | None = st.RunState.load(run_id)
    except StateFileError as exc:
        return str(exc)
    except (FileNotFoundError, ValueError, TypeError):
        saved = None
    if saved is not None:
        lines.append(
            f"run {saved.run_id}: {saved.runbook} on {saved.target} ({saved.context}) by "
            f"{saved.holder}: {saved.status}" + (f": {saved.error}" if saved.error else "")
        )
        for s in saved.steps:
            detail = f": {s.error}" if s.error else ""
            undo = f" ({s.undo})" if s.undo else ""
            lines.append(f"  {s.id} ({s.action}): {s.status}{detail}{undo}")
        if saved.status in (st.INTERRUPTED, st.RUN_FAILED):
            lines.append(f"  resume: mignurse run --resume {run_id}")
            lines.append(f"  undo:   mignurse run --undo {run_id}")
    elif events:
        first = events[0]
        lines.append(f"run {run_id}: {first.get('runbook', '')} on {first.get('target', '')}")
    lines.append("")
    lines.append("audit events:")
    for event in events:
        extra = event.get("status") or event.get("outcome") or event.get("result") or ""
        step = f" {event['step']}" if event.get("step") else ""
        reason = f": {event['reason']}" if event.get("reason") else ""
        lines.append(f"  {str(event.get('ts', ''))[:19]} {event['event']}{step} {extra}{reason}")
    return "\n".join(lines)


class RunStepsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    RunStepsScreen { background: $background; }
    RunStepsScreen > VerticalScroll { height: 1fr; padding: 0 1; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(run_story(self.run_id)), id="run-story")
        yield Footer()

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
