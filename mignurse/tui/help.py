"""`?`: every key of the app, what it does, and where it works (k9s's help screen)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# (key, what it does, where); the footer shows the ones allowed here and now.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("enter", "open the highlighted pool's nodes", "fleet"),
    ("esc", "close the filter, clear it, or go back to the fleet", "everywhere"),
    ("/", "filter rows: a regex, !regex to invert, -l key=value,key!=v,!key for labels", "all"),
    (
        ":",
        "command palette: jump to a pool or node, run a runbook, switch context, open a "
        "bundle (open PATH), change the theme",
        "everywhere",
    ),
    ("space", "mark or unmark the node (collect, cordon and runbooks act on the marks)", "nodes"),
    ("c", "collect the marked nodes, else the highlighted one, into one bundle", "nodes"),
    ("R", "runbooks for the highlighted node (suggested ones first)", "nodes, not read-only"),
    ("x", "cordon the marked nodes, else the highlighted one (y/N)", "nodes, not read-only"),
    ("A", "the audit log: past runbook runs", "everywhere"),
    ("p / a", "next pool / all pools", "nodes"),
    ("r", "refresh now", "everywhere"),
    ("?", "this help", "everywhere"),
    ("q", "quit", "everywhere"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, *, read_only: bool) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
        table.add_column("KEY", style="bold cyan", no_wrap=True)
        table.add_column("WHAT")
        table.add_column("WHERE", style="dim")
        for key, what, where in KEYS:
            if self.read_only and "not read-only" in where:
                continue
            table.add_row(key, what, where)
        title = "mignurse keys" + (
            " (read-only: keys that change the cluster are hidden)" if self.read_only else ""
        )
        with VerticalScroll():
            yield Static(Text(title, style="bold"))
            yield Static(table)
            yield Static(Text("esc closes this", style="dim"))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
