"""The refresh loop on the UI thread: ask for a refresh, place what comes back.

refresh.py computes a refresh off the UI thread; `RefreshLoop` starts it (one in flight;
the next armed when the last has been applied or has failed), then places its changes: the
panels, the fleet table, and the node table's new rows a chunk per frame (`ADD_CHUNK`, so a
5,000-row fill never freezes the screen) before the order and the detail pane. Clearing the
node table (another pool, another filter, a resize that changes the columns) and switching
between the fleet and node views are here too: both start the refresh that fills them.

The diagnosis has a worker of its own (one in flight), started when a refresh ends and the
`Refresher` says one is due; its updates (`Diagnosed`) fill the findings panel, and a whole
diagnosis starts a refresh that shows its badges and the fleet's ranks.
"""

from __future__ import annotations

import contextlib
import gc
from collections import deque

from textual import on, work
from textual.css.query import NoMatches
from textual.widgets import ContentSwitcher
from textual.worker import Worker, WorkerState

from mignurse.cluster.watcher import ResourceStatus
from mignurse.diagnose.engine import Diagnosis
from mignurse.gcpause import freeze_survivors
from mignurse.nodeview import short_name
from mignurse.tui.appstate import FLEET, NODES, VIEW_IDS
from mignurse.tui.detailpane import DetailPane
from mignurse.tui.panels import Panels
from mignurse.tui.refresh import (
    Diagnosed,
    DiagnosisUpdate,
    Refreshed,
    Refresher,
    RefreshRequest,
    RowChanges,
    column_label,
)
from mignurse.turns import ui_done, ui_working, working_as

REFRESH_SECONDS = 0.5
ADD_CHUNK = 250  # new rows placed per frame: a 5,000-row fill paints as it goes


class RefreshLoop(Panels, DetailPane):
    """Refreshes in turn, and what they change placed on screen."""

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

    # A description of its own: Textual's default is the repr of every argument, made on the
    # UI thread, and the request holds the node table's rows (5,000 at scale)
    @work(thread=True, group="refresh", exit_on_error=False, description="refresh")
    def _refresh_worker(self, refresher: Refresher, request: RefreshRequest) -> None:
        with working_as("refresh"):
            self.post_message(Refreshed(refresher.compute(request)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "refresh" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self._diagnosis_error = f"refresh failed: {type(error).__name__}: {error}"
            with contextlib.suppress(NoMatches):
                self._show_findings()
            self._refresh_ended()  # the next refresh is armed all the same
        if event.worker.group == "diagnose" and event.state in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            if event.state == WorkerState.ERROR:
                error = event.worker.error
                self._diagnosis_error = f"diagnosis failed: {type(error).__name__}: {error}"
                with contextlib.suppress(NoMatches):
                    self._show_findings()
            if event.worker is self._diagnosing:
                self._diagnosing = None

    # -- the diagnosis --------------------------------------------------------------------

    def _diagnose_if_due(self) -> None:
        """Start a diagnosis when none is running and the refresher says one is due."""
        if self._diagnosing is not None or not self._refresher.diagnosis_due():
            return
        self._diagnosing = self._diagnose_worker(self._refresher)

    @work(thread=True, group="diagnose", exit_on_error=False, description="diagnosis")
    def _diagnose_worker(self, refresher: Refresher) -> None:
        def send(update: DiagnosisUpdate) -> None:
            self.post_message(Diagnosed(update, refresher))

        with working_as("diagnosis"):
            refresher.diagnose(send)

    @on(Diagnosed)
    def _diagnosed(self, message: Diagnosed) -> None:
        if message.refresher is not self._refresher:
            return  # judged another source (the app has switched since)
        self._show_diagnosis(message.update)

    def _show_diagnosis(self, update: DiagnosisUpdate) -> None:
        self._diagnosis_error = ""
        if not update.whole:
            self._partial = update
            with contextlib.suppress(NoMatches):  # not composed yet: shown when it is
                self._show_findings()
            return
        # A whole diagnosis lands with the refresh that shows its badges and ranks (_apply)
        self.request_refresh(force=True)

    def _take_diagnosis(self, diagnosis: Diagnosis) -> None:
        first = self._diagnosis is None
        if first and len(self._gpu_names) > ADD_CHUNK:
            gc.freeze()  # a big cluster as first listed and judged: see _drain
        self._diagnosis = diagnosis
        self._partial = None
        if first:
            self.refresh_bindings()  # the footer offers `f` from the first diagnosis on

    def _refresh_ended(self) -> None:
        self._in_flight = False
        if not self.is_running:
            ui_done()
            return
        self.call_after_refresh(ui_done)  # once the frame that shows it is drawn
        self._diagnose_if_due()
        if self._again:
            self._again = False
            self.request_refresh()
        else:
            self._timer = self.set_timer(REFRESH_SECONDS, self.request_refresh)

    @on(Refreshed)
    def _refreshed(self, message: Refreshed) -> None:
        ui_working()  # the diagnosis worker waits meanwhile (`turns`)
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
        if changes.diagnosis is not None and changes.diagnosis is not self._diagnosis:
            self._diagnosis_error = ""
            self._take_diagnosis(changes.diagnosis)
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
        if changes.gone_marks:
            self._drop_marks(changes.gone_marks)
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

    def _drop_marks(self, gone: list[str]) -> None:
        """Marks of nodes the cluster no longer has (repair replaced them, or someone deleted
        them) go, said once each: a key acts only on nodes that exist."""
        dropped = sorted(self.marks & set(gone))
        if not dropped:
            return
        self.marks = self.marks - set(dropped)
        names = ", ".join(short_name(n) for n in dropped)
        self.notify(
            f"Mark dropped: {names} {'is' if len(dropped) == 1 else 'are'} gone from the "
            "cluster (replaced or deleted).",
            severity="warning",
            timeout=10,
        )
        self.refresh_bindings()

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
            if first_fill:
                # each chunk's rows out of the collector's walks as they are placed: the
                # oldest generation's passes over a filling 5,000-row table took 70 ms here
                freeze_survivors()
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

    # -- what starts a refresh that refills the tables ------------------------------------

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

    def _switch(self, view: str) -> None:
        self.view = view
        self.own_widget("#views", ContentSwitcher).current = VIEW_IDS[view]
        (self._node_table() if view == NODES else self._fleet_table()).focus()
        self.refresh_bindings()
        self._show_findings()
        self._show_bars()
        if view == FLEET:
            self._show_preview()
        else:
            self._sync_detail(set())  # the highlighted node's, or "loading …": never the last
        self.request_refresh(force=True)
