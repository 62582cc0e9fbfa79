"""`D`: the repair-deadline radar. Every GPU node whose automatic repair acts within the
horizon, soonest first (`mignurse.diagnose.radar`), with its worst finding and the one action
to take before repair replaces the instance: enter takes it (collect, pause repair, cordon),
`h` widens the horizon. Read from the latest whole diagnosis; the countdowns run from now."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer

from mignurse.diagnose.radar import HELD, PAUSE, Blip
from mignurse.inert import inert
from mignurse.nodeview import short_name
from mignurse.render import SEVERITY_STYLE, repair_when
from mignurse.tui.refresh import RADAR_HORIZON
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import DataTable, Static

HORIZONS = {
    timedelta(minutes=15): "15 minutes",
    timedelta(hours=1): "an hour",
    timedelta(hours=6): "6 hours",
    RADAR_HORIZON: "a day",  # the widest: what the diagnosis worker computes
}
DEFAULT_HORIZON = timedelta(hours=1)
# what enter does on a row, as the footer and the ACT column say it
ACT_WORDS = {"collect": "c collect", PAUSE: "pause repair", "cordon": "x cordon"}


class RadarScreen(ModalScreen[tuple[str, str] | None]):
    """Dismissed with (node, act) when enter takes a row's action; None on esc."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        Binding("h", "horizon", "Horizon"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    RadarScreen { background: $background; }
    #radar-title { padding: 0 1; background: $boost; }
    #radar-nodes { height: 1fr; }
    """

    def __init__(
        self,
        blips: Sequence[Blip],
        now: datetime,
        *,
        judged: bool,
        as_of: str = "",
        cannot: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.blips = list(blips)
        self.now = now
        self.judged = judged  # a whole diagnosis has run: an empty radar means none due
        self.as_of = as_of  # a bundle's moment: deadlines read as moments, not countdowns
        self.cannot = cannot or {}  # act → why it cannot be taken here (read-only, a bundle)
        self.horizon = DEFAULT_HORIZON

    def compose(self) -> ComposeResult:
        yield Static(id="radar-title")
        yield DataTable(id="radar-nodes", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#radar-nodes", DataTable)
        for column in ("REPAIR", "NODE", "POOL", "CONDITION", "FINDING", "ENTER", "WHO"):
            table.add_column(column, key=column)
        self._fill()
        table.focus()

    def shown(self) -> list[Blip]:
        until = self.now + self.horizon
        return [b for b in self.blips if b.due <= until]

    def _fill(self) -> None:
        table = self.query_one("#radar-nodes", DataTable)
        table.clear()
        shown = self.shown()
        for blip in shown:
            finding = Text()
            if blip.finding is not None:
                style = SEVERITY_STYLE.get(blip.finding.severity, "")
                finding.append(blip.finding.id, style=style)
            act = ACT_WORDS.get(blip.act, blip.act)
            table.add_row(
                Text(
                    repair_when(blip.due, blip.state, self.now, as_of="then" if self.as_of else ""),
                    style="dim" if blip.state == HELD else "bold",
                ),
                short_name(blip.node),
                inert(blip.pool),
                blip.condition,
                finding,
                Text(act, style="dim") if blip.act in self.cannot else act,
                inert(blip.who),
                key=blip.node,
            )
        within = HORIZONS[self.horizon]
        if shown:
            nodes = "1 GPU node" if len(shown) == 1 else f"{len(shown)} GPU nodes"
            head = Text.assemble(
                (f"Repair deadlines: {nodes} repaired within {within}, soonest first", "bold"),
                ("  enter: the row's action · h: horizon", "dim"),
            )  # fmt: skip
        elif self.judged:
            head = Text(
                f"Repair deadlines: no GPU node is due for repair within {within} "
                "(h widens the horizon)",
                style="bold",
            )
        else:
            head = Text("Repair deadlines: the first diagnosis is still running", style="bold")
        if self.as_of:
            head.append(f"\n{self.as_of}: times are moments then, not countdowns", style="dim")
        self.query_one("#radar-title", Static).update(head)

    def rows(self) -> list[tuple[str, ...]]:
        table = self.query_one("#radar-nodes", DataTable)
        return [tuple(str(c) for c in table.get_row(key)) for key in table.rows]

    def action_horizon(self) -> None:
        horizons = list(HORIZONS)
        self.horizon = horizons[(horizons.index(self.horizon) + 1) % len(horizons)]
        self._fill()

    @on(DataTable.RowSelected, "#radar-nodes")
    def _selected(self, event: DataTable.RowSelected) -> None:
        node = event.row_key.value
        blip = next((b for b in self.blips if b.node == node), None)
        if blip is None:
            return
        why = self.cannot.get(blip.act)
        if why:
            self.notify(f"{ACT_WORDS.get(blip.act, blip.act)}: {why}.", timeout=6)
            return
        self.dismiss((blip.node, blip.act))

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
