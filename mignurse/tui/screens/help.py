"""`?`: every key of the app and of its screens, what it does and where it works (k9s's
help screen). tests/tui hold this list to the bindings themselves: a key added to a screen
and not listed here fails there."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import Static

CHANGES = "not read-only"  # keys that change the cluster: hidden when read-only

# (keys, what it does, where); " / " separates keys that do the same or opposite things.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("enter", "open the highlighted pool's nodes", "fleet"),
    (
        "esc",
        "close the filter, clear it, go back to the fleet, or back to the cluster a "
        "bundle was opened from",
        "everywhere",
    ),
    (
        "/",
        "filter the rows as you type: a regex, !regex to invert, -l key=value,key!=v,!key "
        "for labels; each view keeps its own",
        "fleet, nodes",
    ),
    (
        ":",
        "command palette: jump to a pool or GPU node, run a runbook, switch context, open "
        "a bundle (open PATH), back to the cluster, change the theme",
        "everywhere",
    ),
    ("j / k", "down / up (also the arrow keys)", "everywhere"),
    ("g / G", "first row / last row (also home / end)", "everywhere"),
    ("pgup / pgdn", "a page up / down", "everywhere"),
    (
        "ctrl+d / ctrl+u",
        "scroll the detail pane (the pool's nodes in the fleet) half a page "
        "down / up, the cursor staying in the table",
        "fleet, nodes",
    ),
    ("tab / shift+tab", "move between the table, the detail pane and the filter", "everywhere"),
    ("f", "every finding with all its evidence (the panel shows the first few)", "everywhere"),
    ("d", "describe the highlighted node: every condition, label and timeline entry", "nodes"),
    ("l", "the node's journals, opened at the lines the findings cite", "nodes"),
    ("space", "mark or unmark the node (collect, cordon and runbooks act on the marks)", "nodes"),
    ("c", "collect the marked nodes, else the highlighted one, into one bundle", "nodes"),
    (
        "R",
        "every runbook, always in one order: those the marked or highlighted nodes' findings "
        "suggest are labelled, those that cannot run there say why (j/k move)",
        f"nodes, {CHANGES}",
    ),
    ("x", "cordon the marked nodes, else the highlighted one (y/N)", f"nodes, {CHANGES}"),
    ("p / a", "next pool / all pools", "nodes"),
    ("A", "the audit log: past runbook runs; enter shows one", "everywhere"),
    (
        "D",
        "repair deadlines: GPU nodes whose automatic repair acts within the horizon, soonest "
        "first; enter takes the row's action (collect, pause repair, cordon), h the horizon",
        "everywhere",
    ),
    ("r", "refresh now", "everywhere"),
    ("?", "this help", "everywhere"),
    ("q", "quit (closes a pager or this help)", "everywhere"),
    ("n / N", "next / previous cited line, finding or search match", "pager (l, d, f)"),
    ("[ / ]", "previous / next journal", "pager (l)"),
    ("space", "a page down", "pager (l, d, f)"),
    ("/", "search (a regex); n / N go through the matches", "pager (l, d, f)"),
    ("enter", "the plan of the chosen runbook; on the plan, run it", f"runbooks, {CHANGES}"),
    ("y / N", "proceed / refuse a low-harm change (any other key refuses)", "confirmation"),
    (
        "NAME enter",
        "proceed with a high-harm change: type the node's short or full name, or "
        "the cluster's; a wrong name can be typed again",
        "confirmation",
    ),
    ("c / ctrl+c", "cancel the run at the step's next wait (nothing is undone)", "run"),
    ("r / u", "resume / undo a stopped run, offered only when it can run now", "run"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
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
            if self.read_only and CHANGES in where:
                continue
            table.add_row(key, what, where)
        title = "mignurse keys (j/k, g/G or pgdn scroll this)" + (
            "; read-only: keys that change the cluster are hidden" if self.read_only else ""
        )
        with VerticalScroll():
            yield Static(Text(title, style="bold"))
            yield Static(table)
            yield Static(Text("esc closes this", style="dim"))

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)
