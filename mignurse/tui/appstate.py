"""What the app holds, and where its widgets are: the base every part of the app builds on.

`AppState` is the state of `MigNurseApp` for the source it shows (a cluster, a bundle or
the demo's cluster while it is built): which view is on screen, each view's filter, the
marks, what the node table holds, the latest diagnosis. `_reset_state` builds it again when
another source is shown. It also finds the tables and the detail pane, says which node and
pool the cursors are on, and shows the lines workers send the operator (`Notice`). The
parts that draw and act on this state are panels.py, detailpane.py, refreshloop.py,
navigation.py and switching.py; app.py joins them into the app.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, overload

from textual import on
from textual.app import App
from textual.css.query import NoMatches
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker

from mignurse.diagnose.engine import Diagnosis
from mignurse.diagnose.findings import Finding
from mignurse.fleetview import PoolRow
from mignurse.inert import inert, inert_markup
from mignurse.model import Pod
from mignurse.nodeview import NodeRow
from mignurse.session import FleetSource, Source
from mignurse.tui.detail import sorted_findings
from mignurse.tui.filters import RowFilter
from mignurse.tui.refresh import (
    TABLE_COLUMNS,
    DiagnosisUpdate,
    Refresher,
    StatusPart,
    table_columns,
)
from mignurse.tui.shown import DataTable, Static, install_console
from mignurse.tui.table import BatchTable

NODES_SHARE = 0.55  # the node table's max-height in mignurse.tcss
FLEET, NODES = "fleet", "nodes-view"
VIEW_IDS = {FLEET: "fleet-view", NODES: NODES}


W = TypeVar("W", bound=Widget)


class Notice(Message):
    """A line for the operator from a worker (collect progress, a failed connect)."""

    def __init__(self, text: str, *, severity: str = "information", title: str = "") -> None:
        super().__init__()
        self.text = text
        self.severity = severity
        self.title = title


class AppState(App[None]):
    """The app's state for the source it shows, and the widgets its parts reach."""

    def __init__(
        self,
        source: Source,
        *,
        read_only: bool = False,
        connect: Callable[[str], Source] | None = None,
        contexts: Callable[[], list[str]] | None = None,
        light: bool = False,
    ) -> None:
        super().__init__()
        install_console(self)
        self.source = source
        self.user_read_only = read_only
        self._connect = connect  # context name → a checked source (switching context)
        self._contexts = contexts or (lambda: [])
        if light:
            self.theme = "textual-light"
        self.view = FLEET
        self.pool_filter: str | None = None
        self.filters: dict[str, RowFilter | None] = {FLEET: None, NODES: None}
        self.marks: frozenset[str] = frozenset()
        self.refreshes = 0  # applied refreshes; tests wait on it
        self._previous: Source | None = None  # the cluster a bundle was opened from
        self._epoch = 0
        self._changed_at = 0.0  # monotonic: when a runbook run here last finished
        self._columns: tuple[str, ...] = TABLE_COLUMNS
        self._widths: dict[str, int] = {}  # the node table's column widths, from the refresh
        # the refresh loop: one in flight; the next armed when it ends (applied or failed)
        self._in_flight = False
        self._again = False
        self._force = True
        self._timer: Timer | None = None
        self._filter_timer: Timer | None = None
        self._build_ticker: Timer | None = None
        self._pending: deque[tuple[NodeRow, tuple[Any, ...]]] = deque()
        self._reset_state()

    def _reset_state(self) -> None:
        self._refresher = Refresher(self.source)
        self._rows: dict[str, NodeRow] = {}  # what the node table shows now, by node name
        self._order: tuple[str, ...] = ()
        self._pools: list[str] = []
        self._fleet: list[PoolRow] = []
        self._fleet_ranked = False  # the fleet rows on screen came after a diagnosis
        self._pool_rows: dict[str, list[NodeRow]] = {}
        self._gpu_names: list[str] = []
        self._status: list[StatusPart] = []
        self._listed = False
        self._pods: dict[str, tuple[float, list[Pod] | str]] = {}
        self._diagnosis: Diagnosis | None = None  # the latest whole diagnosis
        self._partial: DiagnosisUpdate | None = None  # findings so far, until the first whole
        self._diagnosing: Worker[None] | None = None  # the diagnosis worker in flight
        self._diagnosis_error = ""
        self._detail_for: str | None = None
        self._placeholder = ""  # what the pane says while no node is highlighted
        self._filled = False  # the node table holds the rows of its first refresh
        self._epoch += 1  # older computed changes are dropped
        self._force = True

    @property
    def read_only(self) -> bool:
        return self.user_read_only or bool(self.source.read_only_reason)

    @property
    def row_filter(self) -> RowFilter | None:
        """The filter of the view on screen."""
        return self.filters[self.view]

    @property
    def diagnosis(self) -> Diagnosis | None:
        """The latest diagnosis on screen (None until the cluster is listed and judged)."""
        return self._diagnosis

    def validate_title(self, title: str) -> str:
        return inert(title)

    def validate_sub_title(self, sub_title: str) -> str:
        return inert(sub_title)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast, from any screen (a widget's `notify` is the app's): the message and
        title quote the cluster and files, so they are shown inert and never read as markup."""
        shown = inert_markup(message) if markup else inert(message)
        super().notify(shown, title=inert(title), severity=severity, timeout=timeout, markup=markup)

    def _titles(self) -> None:
        self.sub_title = f"{self.source.context} · {self.source.cluster}"
        if self.read_only:
            self.sub_title += f" · READ-ONLY ({self.source.read_only_reason or '--read-only'})"
        if self._previous is not None:
            self.sub_title += f" · esc: back to {self._previous.context}"

    # -- widgets and cursors -------------------------------------------------------------

    @overload
    def own_widget(self, selector: str) -> Widget: ...
    @overload
    def own_widget(self, selector: str, expect_type: type[W]) -> W: ...
    def own_widget(self, selector: str, expect_type: type[W] | None = None) -> W | Widget:
        """One of the app's own widgets, on its first screen. `App.query_one` searches the
        screen on top, so while help, the radar or a plan is open a diagnosis or refresh
        arriving would find nothing (NoMatches, raised in a message handler, ends the app);
        the widgets below are kept current instead, and show it when the screen closes."""
        stack = self.screen_stack
        # before the first screen is up, or once the app has closed it: as Textual finds it
        base: Any = stack[0] if stack else self
        return base.query_one(selector, expect_type) if expect_type else base.query_one(selector)

    def _fleet_table(self) -> DataTable[Any]:
        return self.own_widget(f"#{FLEET}", DataTable)

    def _node_table(self) -> BatchTable:
        return self.own_widget("#nodes", BatchTable)

    def _detail(self) -> Static:
        return self.own_widget("#detail", Static)

    def _focus_table(self) -> None:
        (self._node_table() if self.view == NODES else self._fleet_table()).focus()

    def _highlighted_name(self) -> str | None:
        try:
            table = self._node_table()
        except NoMatches:  # a worker's answer that lands while the app is closing
            return None
        return _highlighted_key(table)

    def highlighted_node(self) -> str | None:
        """The node under the cursor of the node view (None in the fleet view)."""
        return self._highlighted_name() if self.view == NODES else None

    def detail_node(self) -> str | None:
        """The node the detail pane shows now (None: a placeholder)."""
        return self._detail_for

    def _highlighted_pool(self) -> str | None:
        return _highlighted_key(self._fleet_table())

    def _findings_about(self, name: str) -> list[Finding]:
        found = self._diagnosis.findings if self._diagnosis else []
        return sorted_findings([f for f in found if name in f.nodes])

    def _visible_rows(self) -> int:
        """How many rows the node table shows before it scrolls (its share of the view,
        less the header)."""
        try:
            view = self.own_widget("#views").size.height  # laid out whichever view shows
        except NoMatches:
            return 0
        return int(view * NODES_SHARE) - 1

    def _wanted_columns(self) -> tuple[str, ...]:
        return table_columns(
            self.size.width,
            one_pool=self.pool_filter is not None,
            clusters=isinstance(self.source, FleetSource),
        )

    # -- what workers tell the operator ---------------------------------------------------

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, title=message.title, timeout=12)  # type: ignore[arg-type]


def _highlighted_key(table: DataTable[Any]) -> str | None:
    if table.row_count == 0:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
    except Exception:  # noqa: BLE001 - cursor outside the rows after a removal
        return None
    return str(key.value) if key.value is not None else None
