"""The terminal app: the fleet view, each pool's GPU nodes, a node's detail, and the keys to act.

One factory, `make_app`, builds the app for the live cluster, the demo, an opened bundle and
the tests. It lands on the fleet view (one row per NodePool or node group, worst first,
with the highlighted pool's nodes below it); enter drills into a pool's nodes, esc backs
out, `/` filters as you type (each view its own filter), space marks, `:` opens the
command palette, `l` `d` `f` open the journals, a node's description and every finding in
a pager, and `?` lists every key (k9s's grammar).

The UI thread never talks to the cluster: watch threads fill a `ClusterState`, a worker
turns it into row changes (refresh.py) and posts them back as a message, and the UI thread
only places them (many new rows a chunk at a time, so a 5,000-row fill never freezes the
screen). One refresh is in flight at a time; the next is armed when the last has been
applied or has failed. Every other worker (pods, collection, context switch, the demo's
build) reports back as a message too.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rich.cells import cell_len
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Resize
from textual.message import Message
from textual.timer import Timer
from textual.widgets import ContentSwitcher, DataTable, Footer, Header, Input, Static
from textual.worker import Worker, WorkerState

from mignurse.cluster.client import ClusterError
from mignurse.cluster.snapshot import ClusterState, Snapshot
from mignurse.cluster.watcher import ResourceStatus
from mignurse.diagnose.engine import Diagnosis
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, NodeEvidence
from mignurse.diagnose.timeline import node_timeline
from mignurse.fleetview import COLUMNS as FLEET_COLUMNS
from mignurse.fleetview import UNPOOLED, PoolRow
from mignurse.model import Pod, format_time
from mignurse.nodeview import NodeRow, short_name
from mignurse.render import SEVERITY_STYLE, countdown
from mignurse.session import BuildingSource, BundleSource, LiveSource
from mignurse.tui.detail import clock_time, evidence_detail, node_detail, sorted_findings
from mignurse.tui.filters import FilterError, RowFilter, parse
from mignurse.tui.pages import describe_page, findings_page, journal_pages
from mignurse.tui.palette import MigNurseCommands
from mignurse.tui.refresh import (
    BADGE_WORDS,
    STATUS_STYLE,
    TABLE_COLUMNS,
    Refreshed,
    Refresher,
    RefreshRequest,
    RowChanges,
    StatusPart,
    column_label,
    fit_cell,
    fit_status,
    fit_widths,
    table_columns,
)
from mignurse.tui.screens.help import HelpScreen
from mignurse.tui.screens.pager import PagerScreen
from mignurse.tui.selection import Selection
from mignurse.tui.table import BatchTable

__all__ = [
    "TABLE_COLUMNS",
    "BuildingSource",
    "BundleSource",
    "LiveSource",
    "MigNurseApp",
    "RowChanges",
    "make_app",
]

REFRESH_SECONDS = 0.5
FINDINGS_SHOWN = 4
PODS_MAX_AGE_SECONDS = 15.0  # the highlighted node's pods are fetched again after this
ADD_CHUNK = 250  # new rows placed per frame: a 5,000-row fill paints as it goes
NODES_SHARE = 0.55  # the node table's max-height in mignurse.tcss
PREVIEW_ROWS = 40  # at most this many of the pool's nodes below the fleet
PREVIEW_COLUMNS = ("!", "NAME", "STATUS", "AHR", "MIG", "CORDONED/TAINTS")
PREVIEW_EVIDENCE = 8  # of the worst node's worst finding, below the fleet
PANE_CHROME = 4  # the pane's padding and its scrollbar
FILTER_DELAY = 0.15  # seconds of no typing before the filter applies
FLEET, NODES = "fleet", "nodes-view"
VIEW_IDS = {FLEET: "fleet-view", NODES: NODES}
_WORST, _NOTREADY, _REPAIR = (FLEET_COLUMNS.index(c) for c in ("WORST", "NOTREADY", "REPAIR"))
FLEET_DROPS = ("READY", "LIFETIME", "REPL 6H", "KIND")  # dropped first to last when too wide


class Source(Protocol):
    """What the app reads: `LiveSource` (a cluster), `BundleSource` (a bundle) or
    `BuildingSource` (the demo's cluster, still being built)."""

    state: ClusterState
    simulated: str | None
    karpenter: bool
    collect_reports: list[str]
    last_history: History
    read_only_reason: str
    bundle_dir: Path  # where `c` writes bundles

    @property
    def context(self) -> str: ...
    @property
    def cluster(self) -> str: ...
    def now(self) -> Any: ...
    def start(self, on_status: Callable[[ResourceStatus], None]) -> None: ...
    def synced(self) -> bool: ...
    def listed(self) -> bool: ...
    def early_snapshot(self) -> Snapshot | None: ...
    def assess(self) -> tuple[Diagnosis, list[PoolRow]]: ...
    def evidence(self, name: str) -> NodeEvidence | None: ...
    def evidence_only(self) -> list[NodeEvidence]: ...
    def pods(self, name: str) -> list[Pod]: ...
    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]: ...
    def auto_tick(self) -> None: ...
    def stop(self) -> None: ...


# -- what workers send back ----------------------------------------------------------------


class PodsFetched(Message):
    def __init__(self, node: str, pods: list[Pod] | str) -> None:
        super().__init__()
        self.node = node
        self.pods = pods  # or why they could not be read


class Notice(Message):
    """A line for the operator from a worker (collect progress, a failed connect)."""

    def __init__(self, text: str, *, severity: str = "information", title: str = "") -> None:
        super().__init__()
        self.text = text
        self.severity = severity
        self.title = title


class SourceReady(Message):
    """Another cluster connected, or the demo's cluster built: show it."""

    def __init__(self, source: Source, *, note: str = "") -> None:
        super().__init__()
        self.source = source
        self.note = note


class MigNurseApp(App[None]):
    CSS_PATH = "mignurse.tcss"
    TITLE = "mignurse"
    COMMANDS = App.COMMANDS | {MigNurseCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("escape", "leave", "Back"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("colon", "command_palette", "Palette", key_display=":"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("space", "mark", "Mark"),
        Binding("c", "collect", "Collect"),
        Binding("R", "runbooks", "Runbooks", key_display="R"),
        Binding("x", "cordon", "Cordon"),
        Binding("l", "logs", "Logs"),
        Binding("d", "describe", "Describe"),
        Binding("f", "findings", "Findings"),
        # `?` lists these too: out of the footer, the others fit in 120 columns
        Binding("A", "audit", "Audit", key_display="A", show=False),
        Binding("p", "next_pool", "Next pool", show=False),
        Binding("a", "all_pools", "All pools", show=False),
        Binding("r", "refresh_now", "Refresh", show=False),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        Binding("g", "cursor('top')", "Top", show=False),
        Binding("G", "cursor('bottom')", "Bottom", show=False, key_display="G"),
        Binding("ctrl+d", "pane(1)", "Detail down", show=False),
        Binding("ctrl+u", "pane(-1)", "Detail up", show=False),
    ]

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
        self._diagnosis: Diagnosis | None = None
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

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="status")
        yield Static("Diagnosing…", id="findings")
        with ContentSwitcher(initial=VIEW_IDS[FLEET], id="views"):
            with Vertical(id=VIEW_IDS[FLEET]):
                yield Static(id="fleet-bar", classes="bar")
                yield DataTable(id=FLEET, cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="fleet-preview-pane"):
                    yield Static(id="fleet-preview")
            with Vertical(id=NODES):
                yield Static(id="nodes-bar", classes="bar")
                yield BatchTable(id="nodes", cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="detail-pane"):
                    yield Static("Highlight a node to see its conditions and events.", id="detail")
        yield Input(id="filter", placeholder="regex · !regex · -l key=value,key!=value,!key")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._titles()
        fleet = self._fleet_table()
        self._show_fleet([], force=True)  # the columns
        self._columns = self._wanted_columns()
        table = self._node_table()
        table.on_cursor_moved = self._cursor_moved
        if not table.columns:  # a resize before the mount may have added them
            for name in self._columns:
                table.add_column(column_label(name, self.size.width), key=name)
        self.query_one("#filter", Input).display = False
        self._show_status()
        self._show_bars()
        fleet.focus()
        if isinstance(self.source, BuildingSource):
            self._build(self.source)
        else:
            self.source.start(on_status=self._on_watch_status)
        self.request_refresh(force=True)

    def _titles(self) -> None:
        self.sub_title = f"{self.source.context} · {self.source.cluster}"
        if self.read_only:
            self.sub_title += f" · READ-ONLY ({self.source.read_only_reason or '--read-only'})"
        if self._previous is not None:
            self.sub_title += f" · esc: back to {self._previous.context}"

    def on_unmount(self) -> None:
        self.source.stop()
        if self._previous is not None:
            self._previous.stop()

    def on_resize(self, event: Resize) -> None:
        if not self.is_running:
            return
        if self._wanted_columns() != self._columns:
            self._reset_table()
        elif self.view == NODES:
            self.request_refresh(force=True)  # the columns' widths follow the screen's
        self._show_status()
        self._show_fleet(self._fleet, force=True)

    def _build(self, building: BuildingSource) -> None:
        """The demo's cluster in a thread of its own (a daemon: quitting never waits for
        a 5,000-node build)."""

        def build() -> None:
            try:
                source = building.build()
            except Exception as exc:  # noqa: BLE001 - one line in the app, not a traceback
                building.failed = str(exc) or type(exc).__name__
                self.post_message(Notice(f"the demo could not start: {exc}", severity="error"))
                return
            self.post_message(SourceReady(source))

        threading.Thread(target=build, name="demo-build", daemon=True).start()
        # the seconds spent building count up on the status line until the cluster is shown
        self._build_ticker = self.set_interval(1.0, self._show_status)

    # -- watch status (from watch threads) ----------------------------------------------

    def _on_watch_status(self, status: ResourceStatus) -> None:
        self._refresher.statuses[status.plural] = status  # a dict write: safe from a thread

    # -- the refresh loop ---------------------------------------------------------------

    def request_refresh(self, *, force: bool = False) -> None:
        """Refresh now, or right after the refresh in flight."""
        self._force = self._force or force
        if self._in_flight:
            self._again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._in_flight = True
        request = RefreshRequest(
            epoch=self._epoch,
            view=self.view,
            pool=self.pool_filter,
            node_filter=self.filters[NODES],
            fleet_filter=self.filters[FLEET],
            marks=self.marks,
            shown=dict(self._rows),
            order=self._order,
            columns=self._columns,
            nodes_view=self.view == NODES,
            force=self._force,
            width=self.size.width,
            visible_rows=self._visible_rows(),
            widths=dict(self._widths),
        )
        self._force = False
        self._refresh_worker(self._refresher, request)

    @work(thread=True, group="refresh", exit_on_error=False)
    def _refresh_worker(self, refresher: Refresher, request: RefreshRequest) -> None:
        self.post_message(Refreshed(refresher.compute(request)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "refresh" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self._diagnosis_error = f"refresh failed: {type(error).__name__}: {error}"
            with contextlib.suppress(NoMatches):
                self._show_findings()
            self._refresh_ended()  # the next refresh is armed all the same

    def _refresh_ended(self) -> None:
        self._in_flight = False
        if not self.is_running:
            return
        if self._again:
            self._again = False
            self.request_refresh()
        else:
            self._timer = self.set_timer(REFRESH_SECONDS, self.request_refresh)

    @on(Refreshed)
    def _refreshed(self, message: Refreshed) -> None:
        try:
            self._apply(message.changes)
        except NoMatches:
            self._refresh_ended()  # a refresh that lands while the app closes
        except Exception as exc:  # noqa: BLE001 - shown, and the refreshes go on
            self._diagnosis_error = f"display failed: {type(exc).__name__}: {exc}"
            self._refresh_ended()

    def _apply(self, changes: RowChanges) -> None:
        if changes.epoch != self._epoch:
            self._refresh_ended()  # computed for a table that has since been cleared
            return
        if changes.diagnosis is not None or changes.diagnosis_error:
            first = self._diagnosis is None and changes.diagnosis is not None
            if first and len(changes.gpu_names or ()) > ADD_CHUNK:
                gc.freeze()  # a big cluster as first listed and judged: see _drain
            self._diagnosis = changes.diagnosis or self._diagnosis
            self._diagnosis_error = changes.diagnosis_error
            if first and self._diagnosis is not None:
                self.refresh_bindings()  # the footer offers `f` from the first diagnosis on
        if changes.status:
            self._listed = changes.listed
            self._status = changes.status
            self._show_status()
        if changes.gpu_names is not None:
            self._gpu_names = changes.gpu_names
        if changes.pools:
            self._pools = changes.pools
        if changes.pool_rows is not None:
            self._pool_rows = changes.pool_rows
        if changes.fleet is not None:
            self._show_fleet(changes.fleet)
        while self.source.collect_reports:
            self.notify(self.source.collect_reports.pop(0), title="auto-collect", timeout=8)
        self._show_findings()
        if self.view == FLEET:
            self._show_preview()
        self._show_bars()
        if self.view == NODES:
            self._apply_node_changes(changes)
        else:
            self._applied()

    def _applied(self, dirty: set[str] | None = None) -> None:
        self.refreshes += 1
        self._sync_detail(dirty or set())
        self._show_bars()
        self._refresh_ended()

    def _apply_node_changes(self, changes: RowChanges) -> None:
        table = self._node_table()
        if changes.widths is not None and changes.widths != self._widths:
            self._widths = changes.widths  # measured over every row, new ones too
            table.set_widths(changes.widths)
        for name in changes.removed:
            self._rows.pop(name, None)
        table.remove_rows(changes.removed)
        if changes.removed:
            self._sync_detail(set())  # another row may sit under the cursor now
        columns = set(self._columns)
        changed = set(changes.dirty)
        for row, cells in changes.changed:
            self._rows[row.name] = row
            changed.add(row.name)
            for column, cell in cells.items():
                if column in columns:  # widths come measured from the refresh
                    table.update_cell(row.name, column, cell)
        self._pending = deque(changes.added)
        self._drain(changes, changed, first_fill=not self._rows)

    def _drain(self, changes: RowChanges, changed: set[str], *, first_fill: bool = False) -> None:
        """Place the new rows a chunk per frame, then the order; then the refresh ends."""
        if changes.epoch != self._epoch:
            self._pending.clear()
            self._refresh_ended()  # the table was reset meanwhile: its refresh comes next
            return
        table = self._node_table()
        for _ in range(min(ADD_CHUNK, len(self._pending))):
            row, cells = self._pending.popleft()
            self._rows[row.name] = row
            table.add_row(*cells, key=row.name)
        if self._pending:
            self.call_after_refresh(self._drain, changes, changed, first_fill=first_fill)
            return
        self._filled = True
        if first_fill and len(self._rows) > ADD_CHUNK:
            # What a big fill placed lives as long as the view: out of the cyclic collector's
            # walk (a full pass over scale-5000's listed state took 0.3 s of CPU on whichever
            # thread, this one included; 0 once frozen); garbage without cycles is freed as before.
            gc.freeze()
        if changes.order is not None:
            highlighted = self._highlighted_name()
            table.order_by(changes.order)
            self._order = changes.order
            if first_fill:
                table.move_cursor(row=0, animate=False)  # a table just filled: the worst first
            elif highlighted in self._rows:  # the cursor stays on its node, not its index
                table.move_cursor(row=table.get_row_index(str(highlighted)), animate=False)
        self._applied(changed)

    def _show_fleet(self, rows: list[PoolRow], *, force: bool = False) -> None:
        if rows == self._fleet and not force:
            return
        table = self._fleet_table()
        highlighted = self._highlighted_pool()
        self._fleet = rows
        cells_by_row = [self._fleet_cells(row) for row in rows]
        shown = self._fleet_columns(cells_by_row)
        if tuple(key.value for key in table.columns) != shown:
            table.clear(columns=True)
            for name in shown:
                table.add_column(name, key=name)
        else:
            table.clear()
        keep = [FLEET_COLUMNS.index(name) for name in shown]
        for row, cells in zip(rows, cells_by_row, strict=True):
            table.add_row(*(cells[i] for i in keep), key=row.pool)
        # Rows shown before the first diagnosis are not ranked yet: following the pool the
        # cursor sat on then would land on whichever came first by name, not the worst.
        ranked = self._diagnosis is not None or bool(self._diagnosis_error)
        follow = self._fleet_ranked and highlighted is not None
        if follow and any(r.pool == highlighted for r in rows):
            table.move_cursor(row=table.get_row_index(str(highlighted)), animate=False)
        self._fleet_ranked = ranked

    @staticmethod
    def _fleet_cells(row: PoolRow) -> list[Any]:
        cells: list[Any] = list(row.cells())
        if row.worst is not None:
            cells[_WORST] = Text(cells[_WORST], style=SEVERITY_STYLE.get(row.worst.severity, ""))
        if row.not_ready:
            cells[_NOTREADY] = Text(cells[_NOTREADY], style="bold red")
        if row.repair.startswith("PAUSED"):
            cells[_REPAIR] = Text(_short_repair(row.repair), style="bold yellow")
        return cells

    def _fleet_columns(self, cells_by_row: list[list[Any]]) -> tuple[str, ...]:
        """Columns by content: the least needed go when the fleet is wider than the screen
        (READY is NODES less NOTREADY), so REPAIR and KIND stay in view."""
        widths = {
            name: max([len(name), *(Text(str(c[i])).cell_len for c in cells_by_row)]) + 2
            for i, name in enumerate(FLEET_COLUMNS)
        }
        room = self.size.width - 2
        shown = list(FLEET_COLUMNS)
        for name in FLEET_DROPS:
            if sum(widths[c] for c in shown) <= room:
                break
            shown.remove(name)
        return tuple(shown)

    # -- panels ------------------------------------------------------------------------

    def _show_status(self) -> None:
        status = self.query_one("#status", Static)
        parts = self._status or [StatusPart("connecting…", 0)]
        if isinstance(self.source, BuildingSource):
            parts = [StatusPart(f"[b yellow]{escape(self.source.waiting)}[/]", 0)]
        status.update(fit_status(parts, max(self.size.width - 2, 20)))

    def _show_findings(self) -> None:
        """The findings panel: worst first, the nearest deadline first within a severity,
        a live countdown to each."""
        panel = self.query_one("#findings", Static)
        if self._diagnosis_error:
            panel.update(Text(self._diagnosis_error, style="yellow"))
            return
        if self._diagnosis is None:
            waiting = "Diagnosing…" if self._listed else "Listing the cluster: findings follow."
            panel.update(Text(waiting, style="dim"))
            return
        findings = self.shown_findings()
        if not findings:
            panel.update(Text("No findings.", style="green"))
            return
        now = self.source.now()
        # One line per finding: the countdown goes first so no long summary can push it off.
        width = max(self.size.width - 2, 40)
        lines = Text()
        for finding in findings[:FINDINGS_SHOWN]:
            line = Text()
            line.append(
                f"{finding.severity.upper():<8}", style=SEVERITY_STYLE.get(finding.severity, "")
            )
            if finding.deadline:
                line.append(f" deadline {countdown(finding.deadline, now)}", style="bold")
            line.append(f" {finding.id}", style="bold")
            line.append(f" {finding.summary}")  # summaries name their pool
            line.truncate(width, overflow="ellipsis")
            if lines:
                lines.append("\n")
            lines.append_text(line)
        if len(findings) > FINDINGS_SHOWN:
            lines.append(
                f"\n… {len(findings) - FINDINGS_SHOWN} more: f shows every finding", style="dim"
            )
        panel.update(lines)

    def shown_findings(self) -> list[Finding]:
        """The findings the panel lists, in its order (the pool's own in a pool's view)."""
        if self._diagnosis is None:
            return []
        findings = self._diagnosis.findings
        if self.view == NODES and self.pool_filter:
            findings = [f for f in findings if f.nodepool in ("", self.pool_filter)]
        return sorted_findings(findings)

    def _show_bars(self) -> None:
        """The line above each table: what it shows and its own filter."""
        fleet_filter, node_filter = self.filters[FLEET], self.filters[NODES]
        pools = len(self._fleet)
        fleet = Text.assemble(
            ("Fleet", "bold"), f": {pools} pool{'' if pools == 1 else 's'} with GPU nodes"
        )
        if not self._fleet and not self._listed:
            fleet = Text.assemble(("Fleet", "bold"), ": waiting for the first list of nodes")
        if fleet_filter is not None:
            fleet.append(f" · filter /{fleet_filter.text} (esc clears)", style="bold yellow")
        pool = self.pool_filter
        nodes = Text.assemble(
            ("Pool " if pool else "", "bold"),
            (pool or "All pools", "bold"),
            f": {len(self._rows) + len(self._pending)} nodes",
        )
        if node_filter is not None:
            nodes.append(f" · filter /{node_filter.text} (esc clears)", style="bold yellow")
        if self._columns != TABLE_COLUMNS:
            nodes.append(" · TYPE, AGE in d", style="dim")
        with contextlib.suppress(NoMatches):
            self.query_one("#fleet-bar", Static).update(fleet)
            self.query_one("#nodes-bar", Static).update(nodes)

    def _show_preview(self) -> None:
        """Below the fleet: the highlighted pool's nodes, worst first, and what is wrong
        with the worst of them (a small fleet leaves room for it)."""
        pool = self._highlighted_pool() or (self._fleet[0].pool if self._fleet else None)
        preview = self.query_one("#fleet-preview", Static)
        if pool is None:
            preview.update(Text("No pool with GPU nodes yet.", style="dim"))
            return
        rows = self._pool_rows.get(pool, [])
        nodes = [r for r in rows if r.status_word != "Launching"]
        title = Text.assemble(
            ("Nodes of ", "bold"), (pool, "bold"), f" ({len(nodes)}), worst first: enter opens them"
        )
        held = next((r for r in self._fleet if r.pool == pool), None)
        if held is not None and held.repair not in ("", "…"):
            title.append(
                f" · repair {held.repair}",
                style="bold yellow" if held.repair.startswith("PAUSED") else "",
            )
        table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
        words = [
            {
                "!": BADGE_WORDS.get(row.badge, ""),
                "NAME": short_name(row.name),
                "STATUS": row.status,
                "AHR": row.ahr,
                "MIG": row.mig,
                "CORDONED/TAINTS": row.taints,
            }
            for row in rows[:PREVIEW_ROWS]
        ]
        # as the node table: columns cut to fit, so AHR and the taints stay in view
        labels = {c: column_label(c, self.size.width) for c in PREVIEW_COLUMNS}
        content = {c: max((cell_len(w[c]) for w in words), default=0) for c in labels}
        widths = fit_widths(content, labels, self.size.width - PANE_CHROME)
        for column, label in labels.items():
            table.add_column(label, no_wrap=True, min_width=widths[column])
        for row, cells in zip(rows, words, strict=False):
            cut = {c: fit_cell(text, widths[c], c) for c, text in cells.items()}
            table.add_row(
                Text(cut["!"], style=SEVERITY_STYLE.get(row.badge, "")),
                cut["NAME"],
                Text(cut["STATUS"], style=STATUS_STYLE.get(row.status_word, "")),
                Text(cut["AHR"], style="bold red" if row.ahr_ok is False else ""),
                cut["MIG"],
                cut["CORDONED/TAINTS"],
            )
        parts: list[Any] = [title, table]
        if len(rows) > PREVIEW_ROWS:
            parts.append(Text(f"… {len(rows) - PREVIEW_ROWS} more (enter)", style="dim"))
        worst = rows[0] if rows and rows[0].badge else None
        if worst is not None and self._diagnosis is not None:
            about = sorted_findings([f for f in self._diagnosis.findings if worst.name in f.nodes])
            parts.append(Text.assemble("\n", ("Worst node ", "bold"), (worst.name, "bold")))
            for finding in about:
                parts.append(
                    Text.assemble(
                        (finding.severity.upper(), SEVERITY_STYLE.get(finding.severity, "")),
                        (f" {finding.id}", "bold"),
                        f" {finding.summary}",
                    )
                )
            if about:  # what the worst finding rests on, newest last (f shows it all)
                now = self.source.now()
                timed = sorted((e.time, e.source, e.text) for e in about[0].evidence if e.time)
                if timed:
                    parts.append(Text(f"\nEvidence of {about[0].id}, newest last", style="bold"))
                for when, where, what in timed[-PREVIEW_EVIDENCE:]:
                    parts.append(Text(f"{clock_time(when, now)}  {where:<10} {what}", style="dim"))
        preview.update(Group(*parts))

    # -- which keys show ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that do nothing here are hidden from the footer (False hides; None would
        only dim them), and so is every key that changes something when read-only."""
        node_keys = ("mark", "next_pool", "all_pools", "collect", "logs", "describe")
        if action in node_keys and self.view != NODES:
            return False
        if action == "collect" and self.source.read_only_reason:
            return False
        if action in ("runbooks", "cordon") and (self.read_only or self.view != NODES):
            return False
        if action == "findings":
            return self._diagnosis is not None
        if action == "leave":
            return self.view == NODES or self.row_filter is not None or self._previous is not None
        return True

    def _switch(self, view: str) -> None:
        self.view = view
        self.query_one("#views", ContentSwitcher).current = VIEW_IDS[view]
        (self._node_table() if view == NODES else self._fleet_table()).focus()
        self.refresh_bindings()
        self._show_findings()
        self._show_bars()
        if view == FLEET:
            self._show_preview()
        else:
            self._sync_detail(set())  # the highlighted node's, or "loading …": never the last
        self.request_refresh(force=True)

    def _fleet_table(self) -> DataTable[Any]:
        return self.query_one(f"#{FLEET}", DataTable)

    def _node_table(self) -> BatchTable:
        return self.query_one("#nodes", BatchTable)

    # -- navigation -----------------------------------------------------------------------

    @on(DataTable.RowSelected, f"#{FLEET}")
    def _pool_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_pool(str(event.row_key.value))

    @on(DataTable.RowHighlighted, f"#{FLEET}")
    def _pool_highlighted(self, event: DataTable.RowHighlighted) -> None:
        with contextlib.suppress(NoMatches):  # a highlight that lands while the app closes
            self._show_preview()

    def open_pool(self, pool: str | None) -> None:
        """The pool's nodes (None: every pool's)."""
        self._set_pool(None if pool == UNPOOLED else pool)
        if self.view != NODES:
            self._switch(NODES)

    def show_fleet(self) -> None:
        if self.view != FLEET:
            self._switch(FLEET)

    def jump_to_node(self, name: str) -> None:
        node = self.source.state.node(name)
        self.filters[NODES] = None
        self.open_pool(node.pool if node is not None and node.pool else None)
        self._jump_target = name
        self._jump_tries = 0
        self.set_timer(0.1, self._jump_when_shown)

    def _jump_when_shown(self) -> None:
        try:
            table = self._node_table()
        except NoMatches:
            return  # the timer fired while the app closed
        name = self._jump_target
        if name in self._rows and not self._pending:
            table.move_cursor(row=table.get_row_index(name), animate=False)
            self._show_detail(name)
        elif self._jump_tries < 100:
            self._jump_tries += 1
            self.set_timer(0.1, self._jump_when_shown)

    def action_leave(self) -> None:
        filter_input = self.query_one("#filter", Input)
        if filter_input.display:
            filter_input.display = False  # the filter typed so far stays applied
            self._focus_table()
        elif self.row_filter is not None:
            self._set_filter(self.view, None)
        elif self.view == NODES:
            self.pool_filter = None
            self._switch(FLEET)
        elif self._previous is not None:
            self.go_back()
        self.refresh_bindings()

    def _focus_table(self) -> None:
        (self._node_table() if self.view == NODES else self._fleet_table()).focus()

    def action_cursor(self, how: str) -> None:
        """j/k/g/G on whatever has the focus: a table's cursor, or a pane's scroll."""
        focused = self.focused
        if isinstance(focused, DataTable):
            if how == "down":
                focused.action_cursor_down()
            elif how == "up":
                focused.action_cursor_up()
            elif focused.row_count:
                focused.move_cursor(row=0 if how == "top" else focused.row_count - 1)
        elif isinstance(focused, ScrollableContainer):
            {
                "down": focused.scroll_down,
                "up": focused.scroll_up,
                "top": focused.scroll_home,
                "bottom": focused.scroll_end,
            }[how](animate=False)

    def action_pane(self, direction: int) -> None:
        """ctrl+d / ctrl+u: the pane below the table, half a page, the cursor left alone."""
        pane = self.query_one("#detail-pane" if self.view == NODES else "#fleet-preview-pane")
        step = max(pane.scrollable_content_region.height // 2, 1)
        pane.scroll_to(y=pane.scroll_y + direction * step, animate=False)

    def action_filter(self) -> None:
        filter_input = self.query_one("#filter", Input)
        current = self.row_filter
        filter_input.value = current.text if current else ""
        filter_input.display = True
        filter_input.focus()

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        """As you type: the rows follow after a short pause; a pattern still being typed
        that is not valid yet waits, said in the bar, not in a pop-up."""
        if not event.input.display:
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        view, text = self.view, event.value
        self._filter_timer = self.set_timer(FILTER_DELAY, lambda: self._live_filter(view, text))

    def _live_filter(self, view: str, text: str) -> None:
        try:
            row_filter = parse(text)
        except FilterError as exc:
            with contextlib.suppress(NoMatches):
                bar = self.query_one("#nodes-bar" if view == NODES else "#fleet-bar", Static)
                bar.update(Text(f"filter /{text}: {exc}", style="yellow"))
            return
        current = self.filters[view]
        if (current.text if current else None) != (row_filter.text if row_filter else None):
            self._set_filter(view, row_filter)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        try:
            row_filter = parse(event.value)
        except FilterError as exc:
            self.notify(str(exc), severity="error", timeout=6)
            return
        event.input.display = False
        current = self.filters[self.view]
        if (current.text if current else None) != (row_filter.text if row_filter else None):
            self._set_filter(self.view, row_filter)
        self._focus_table()

    def _set_filter(self, view: str, row_filter: RowFilter | None) -> None:
        self.filters[view] = row_filter
        if view == NODES:
            self._reset_table()
        else:
            self.request_refresh(force=True)
        self._show_bars()
        self.refresh_bindings()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(read_only=self.read_only))

    # -- what the palette offers -------------------------------------------------------------

    def pool_names(self) -> list[str]:
        """Pools with GPU nodes (a pool of CPU nodes is never offered)."""
        return [r.pool for r in self._fleet] or list(self._pools)

    def node_names(self) -> list[str]:
        """GPU nodes only, as the tables show them."""
        return list(self._gpu_names)

    def context_names(self) -> list[str]:
        if self._connect is None:
            return []
        return [c for c in self._contexts() if c != self.source.context]

    def back_context(self) -> str | None:
        """The cluster a bundle was opened from, to go back to (esc or the palette)."""
        return self._previous.context if self._previous is not None else None

    def runbook_names(self) -> list[str]:
        from mignurse.tui import runbooks

        return runbooks.runbook_names(self.source, self.selection())

    def selection(self) -> Selection:
        """The marked nodes, else the highlighted one, with what the app knows about them:
        what the runbook screens read."""
        state = self.source.state
        names = sorted(self.marks) if self.marks else [n for n in [self.highlighted_node()] if n]
        objects = {n: node for n in names if (node := state.node(n)) is not None}
        findings = self._diagnosis.findings if self._diagnosis else []
        return Selection(
            nodes=tuple(n for n in names if n in objects),
            cluster=self.source.cluster,
            read_only_reason=self.source.read_only_reason
            or ("--read-only" if self.user_read_only else ""),
            findings=tuple(sorted_findings(findings)),
            node_objects=objects,
            repair_paused=self._repair_paused(list(objects.values())),
            gpu_nodes=tuple(self._gpu_names or state.node_names()),
        )

    def _repair_paused(self, nodes: list[Any]) -> bool | None:
        """Whether Karpenter's node repair is off (None: unknown, or not Karpenter's pool).
        Settings asked for before the last run finished are unknown: that run may have
        paused or resumed repair, and the runbook's own plan reads the gate live."""
        settings = getattr(self.source, "karpenter_settings", None)
        if not self.source.karpenter or settings is None or settings.node_repair is None:
            return None
        if getattr(self.source, "karpenter_read_at", float("inf")) < self._changed_at:
            return None
        if any(node.pool_kind != "nodepool" for node in nodes):
            return None  # a node group's or Auto Mode's repair is not Karpenter's gate
        return not settings.node_repair

    def start_runbook(self, name: str) -> None:
        from mignurse.tui import runbooks

        runbooks.start_runbook(self, self.source, self.selection(), name)

    def action_runbooks(self) -> None:
        from mignurse.tui import runbooks

        runbooks.open_picker(self, self.source, self.selection())

    def action_cordon(self) -> None:
        from mignurse.tui import runbooks

        runbooks.cordon_nodes(self, self.source, self.selection())

    def action_audit(self) -> None:
        from mignurse.tui.screens.audit import AuditScreen

        self.push_screen(AuditScreen())

    # -- pagers ----------------------------------------------------------------------------

    def action_findings(self) -> None:
        if self._diagnosis is None:
            return
        title = f"Every finding in {self.source.context}, worst first"
        self.push_screen(
            PagerScreen([findings_page(self._diagnosis.findings, self.source.now(), title=title)])
        )

    def action_describe(self) -> None:
        name = self.highlighted_node()
        if name is None:
            self.notify("Highlight a node to describe it.", timeout=4)
            return
        renderable = self._detail_renderable(name, full=True)
        self.push_screen(PagerScreen([describe_page(name, renderable, self.size.width - 2)]))

    def action_logs(self) -> None:
        name = self.highlighted_node()
        if name is None:
            self.notify("Highlight a node to read its journals.", timeout=4)
            return
        evidence = self.source.evidence(name)
        if evidence is None or not evidence.journals:
            how = (
                "the bundle has none for it"
                if self.source.read_only_reason
                else "c collects them, then l shows them"
            )
            self.notify(f"No journals of {short_name(name)} yet: {how}.", timeout=6)
            return
        pages = journal_pages(evidence, self._findings_about(name))
        first = next((i for i, page in enumerate(pages) if page.marks), 0)
        self.push_screen(PagerScreen(pages, start=first, at_mark=True))

    def _findings_about(self, name: str) -> list[Finding]:
        found = self._diagnosis.findings if self._diagnosis else []
        return sorted_findings([f for f in found if name in f.nodes])

    # -- other clusters and bundles --------------------------------------------------------------

    def switch_context(self, context: str) -> None:
        if self._connect is None:
            return
        self.notify(f"Connecting to {context}…", timeout=3)
        self._connect_worker(context)

    @work(thread=True, exclusive=True, group="connect", exit_on_error=False)
    def _connect_worker(self, context: str) -> None:
        assert self._connect is not None
        try:
            source = self._connect(context)
        except Exception as exc:  # noqa: BLE001 - one line in the app, the old view stays
            self.post_message(Notice(f"{context}: {exc}", severity="error"))
            return
        self.post_message(SourceReady(source, note=f"Now showing {source.context}"))

    @on(SourceReady)
    def _source_ready(self, message: SourceReady) -> None:
        if self._build_ticker is not None:
            self._build_ticker.stop()
            self._build_ticker = None
        if self._previous is not None:
            self._previous.stop()
            self._previous = None
        self._swap_source(message.source)
        if message.note:
            self.notify(message.note, timeout=4)

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, title=message.title, timeout=12)  # type: ignore[arg-type]

    def open_bundle(self, path: Path) -> None:
        """A bundle in place of the cluster; esc (or the palette) goes back to it."""
        try:
            source = BundleSource(path)
        except Exception as exc:  # noqa: BLE001 - one line in the app, the old view stays
            self.notify(f"{path}: {exc}", severity="error", timeout=10)
            return
        if self.source.read_only_reason:
            self._swap_source(source)  # a bundle in place of a bundle: nothing to go back to
        else:
            if self._previous is not None:
                self._previous.stop()
            self._previous = self.source  # its watches keep it current meanwhile
            self._swap_source(source, stop_old=False)
        self.notify(f"Now showing {path.name} (esc goes back)", timeout=4)

    def go_back(self) -> None:
        """From an opened bundle back to the cluster it was opened from."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        self._swap_source(previous, start=False)
        self.notify(f"Back to {previous.context}", timeout=4)

    def _swap_source(self, source: Source, *, stop_old: bool = True, start: bool = True) -> None:
        """Show another cluster or a bundle in place of this one."""
        old = self.source
        self.source = source
        self.pool_filter = None
        self.filters = {FLEET: None, NODES: None}
        self.marks = frozenset()
        self._reset_state()
        self._pending.clear()
        self._node_table().clear()
        self._fleet_table().clear()
        self._detail().update("Highlight a node to see its details.")
        self._titles()
        if stop_old:
            old.stop()
        if start:
            source.start(on_status=self._on_watch_status)
        self._show_status()
        self._switch(FLEET)

    # -- actions ----------------------------------------------------------------------

    def _visible_rows(self) -> int:
        """How many rows the node table shows before it scrolls (its share of the view,
        less the header)."""
        try:
            view = self.query_one("#views").size.height  # laid out whichever view shows
        except NoMatches:
            return 0
        return int(view * NODES_SHARE) - 1

    def _wanted_columns(self) -> tuple[str, ...]:
        return table_columns(self.size.width, one_pool=self.pool_filter is not None)

    def _reset_table(self) -> None:
        self._epoch += 1
        self._pending.clear()
        table = self._node_table()
        columns = self._wanted_columns()
        table.clear(columns=columns != self._columns)
        if columns != self._columns:
            self._columns = columns
            for name in columns:
                table.add_column(column_label(name, self.size.width), key=name)
        self._widths = {}
        self._rows = {}
        self._order = ()
        self._filled = False
        self._detail_for = None
        self._sync_detail(set())  # "loading …" until the rows come
        self._show_bars()
        self.request_refresh(force=True)

    def _set_pool(self, pool: str | None) -> None:
        self.pool_filter = pool
        self._reset_table()

    def action_next_pool(self) -> None:
        if not self._pools:
            return
        if self.pool_filter not in self._pools:
            self._set_pool(self._pools[0])
        else:
            index = self._pools.index(self.pool_filter)
            self._set_pool(self._pools[index + 1] if index + 1 < len(self._pools) else None)
        self._show_findings()

    def action_all_pools(self) -> None:
        if self.pool_filter is not None:
            self._set_pool(None)
            self._show_findings()

    def cluster_changed(self) -> None:
        """A runbook changed the cluster: judge it again now, and hold what was read before
        as stale until then."""
        self._changed_at = time.monotonic()
        self.action_refresh_now()

    def action_refresh_now(self) -> None:
        self._refresher.diagnose_soon()
        self.request_refresh(force=True)

    def action_mark(self) -> None:
        name = self._highlighted_name()
        if not name or self.source.state.node(name) is None:
            return
        marked = name not in self.marks
        self.marks = self.marks | {name} if marked else self.marks - {name}
        table = self._node_table()
        table.update_cell(name, "M", "*" if marked else "")
        table.action_cursor_down()

    def action_collect(self) -> None:
        """Collect the marked nodes (else the highlighted one) into one bundle, now."""
        names = sorted(self.marks) or [n for n in [self._highlighted_name()] if n]
        names = [n for n in names if self.source.state.node(n) is not None]
        if not names:
            self.notify("Highlight or mark (space) a node to collect it.", timeout=4)
            return
        self.notify(f"Collecting {len(names)} node(s)…", timeout=4)
        self._collect_nodes(self.source, names)

    @work(thread=True, group="collect", exit_on_error=False)
    def _collect_nodes(self, source: Source, names: list[str]) -> None:
        done: list[str] = []

        def progress(node: str, state: str) -> None:
            if not state.startswith("collecting"):
                done.append(node)
                text = f"{len(done)}/{len(names)} {short_name(node)}: {state}"
                self.post_message(Notice(text, title="collect"))

        try:
            out, manifest = source.collect_nodes(names, progress)
        except Exception as exc:  # noqa: BLE001 - shown in the app, never a crash
            self.post_message(Notice(f"Collecting failed: {exc}", severity="error"))
            return
        failed = {n: o for n, o in manifest["nodes"].items() if not o.get("ok")}
        if not failed:
            message, severity = f"Bundle written: {out} (l shows its journals)", "information"
        else:
            why = "; ".join(
                f"{short_name(n)}: {o.get('error') or '; '.join(o.get('problems') or [])}"
                for n, o in failed.items()
            )
            message, severity = f"Bundle {out} lacks {len(failed)} node(s): {why}", "warning"
        self.post_message(Notice(message, severity=severity))

    # -- detail pane ------------------------------------------------------------------

    def _highlighted_name(self) -> str | None:
        return _highlighted_key(self._node_table())

    def highlighted_node(self) -> str | None:
        """The node under the cursor of the node view (None in the fleet view)."""
        return self._highlighted_name() if self.view == NODES else None

    def detail_node(self) -> str | None:
        """The node the detail pane shows now (None: a placeholder)."""
        return self._detail_for

    def _highlighted_pool(self) -> str | None:
        return _highlighted_key(self._fleet_table())

    def _detail(self) -> Static:
        return self.query_one("#detail", Static)

    def _cursor_moved(self) -> None:
        """The node table's cursor moved: the pane follows in the same frame."""
        if self.view == NODES:
            self._sync_detail(set())

    @on(DataTable.RowHighlighted, "#nodes")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The event's row may have moved since it was sent (a sort): follow the cursor. One
        # that lands while the app closes finds no table: nothing to show then.
        try:
            name = self._highlighted_name()
        except NoMatches:
            return
        if name is not None and name != self._detail_for:
            self._show_detail(name)

    def _sync_detail(self, changed: set[str]) -> None:
        """The pane always shows the highlighted node: after a sort, a removal or a change."""
        if self.view != NODES:
            return
        name = self._highlighted_name()
        if name is None:
            self._detail_for = None
            if not self._filled:
                words = f"loading {self.pool_filter or 'every pool'}'s nodes…"
            elif self.filters[NODES] is not None:
                words = "No node matches the filter."
            else:
                words = "No GPU node here."
            if words != self._placeholder:
                self._placeholder = words
                with contextlib.suppress(NoMatches):  # the app may be closing
                    self._detail().update(Text(words, style="dim"))
            return
        if name != self._detail_for or name in changed:
            self._show_detail(name)

    def _show_detail(self, name: str) -> None:
        try:
            detail = self._detail()
        except NoMatches:
            return  # a highlight that arrives while the app closes: its widgets are gone
        self._detail_for = name
        self._placeholder = ""
        node = self.source.state.node(name)
        if node is not None:
            pods = self._pods.get(name)
            if pods is None or time.monotonic() - pods[0] > PODS_MAX_AGE_SECONDS:
                self._fetch_pods(name)
        detail.update(self._detail_renderable(name))

    def _detail_renderable(self, name: str, *, full: bool = False) -> Any:
        state = self.source.state
        node = state.node(name)
        evidence = self.source.evidence(name)
        now = self.source.now()
        findings = self._findings_about(name)
        if node is None and evidence is not None:
            alone = DiagnosisInput(
                snapshot=state.node_view(name, taken_at=now),
                now=now,
                node_evidence={name: evidence},
            )
            return evidence_detail(
                evidence, node_timeline(alone, name), now, findings=findings, full=full
            )
        if node is None:
            claim = state.nodeclaim(name)
            if claim is not None:
                return (
                    f"[b]{claim.name}[/b]  NodeClaim in pool {claim.pool}\n"
                    f"Launching since {format_time(claim.created)}; no Node has registered yet.\n"
                    f"instance {claim.instance_id or 'not yet known'} · {claim.instance_type}"
                )
            if not self._listed:
                return Text(f"loading {name}…", style="dim")
            return Text(f"{name} is gone.")
        pods = self._pods.get(name)
        view = DiagnosisInput(
            snapshot=state.node_view(name, taken_at=now), now=now, history=self.source.last_history
        )
        runbooks = list(dict.fromkeys(r for f in findings for r in f.runbooks))
        return node_detail(
            node,
            node_timeline(view, name),
            now,
            pods[1] if pods else None,
            findings=findings,
            evidence=evidence,
            runbooks=[] if self.read_only else runbooks,
            full=full,
        )

    def pods_of(self, name: str) -> list[Pod] | str | None:
        """The node's pods as last fetched (a string: why they could not be read)."""
        held = self._pods.get(name)
        return held[1] if held else None

    @work(thread=True, exclusive=True, group="pods", exit_on_error=False)
    def _fetch_pods(self, name: str) -> None:
        """The highlighted node's pods, off the UI thread; errors are shown, not raised."""
        result: list[Pod] | str
        try:
            result = self.source.pods(name)
        except ClusterError as exc:
            result = str(exc)
        self.post_message(PodsFetched(name, result))

    @on(PodsFetched)
    def _pods_arrived(self, message: PodsFetched) -> None:
        self._pods[message.node] = (time.monotonic(), message.pods)
        if self._highlighted_name() == message.node:
            self._show_detail(message.node)


def _short_repair(repair: str) -> str:
    """ "PAUSED by alice since 03:02Z" → "PAUSED since 03:02Z" (who is in the preview)."""
    if " since " in repair:
        return "PAUSED since " + repair.split(" since ", 1)[1]
    return repair


def _highlighted_key(table: DataTable[Any]) -> str | None:
    if table.row_count == 0:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
    except Exception:  # noqa: BLE001 - cursor outside the rows after a removal
        return None
    return str(key.value) if key.value is not None else None


def make_app(
    source: Source,
    *,
    read_only: bool = False,
    connect: Callable[[str], Source] | None = None,
    contexts: Callable[[], list[str]] | None = None,
    light: bool = False,
) -> MigNurseApp:
    """The one way to build the app: the CLI, the demo and the tests all come through here."""
    return MigNurseApp(source, read_only=read_only, connect=connect, contexts=contexts, light=light)
