"""The terminal app: the fleet view, each pool's GPU nodes, a node's detail, and the keys to act.

One factory, `make_app`, builds the app for the live cluster, the demo, an opened bundle and
the tests. It lands on the fleet view (one row per NodePool or node group, worst first);
enter drills into a pool's nodes, esc backs out, `/` filters, space marks, `:` opens the
command palette and `?` lists every key (k9s's grammar, see style.md).

The UI thread never talks to the cluster: watch threads fill a `ClusterState`, a worker
thread turns it into row changes (and, every few seconds, the diagnosis and the fleet
rows), and the UI thread only applies those changes. The next refresh is armed only after
the previous one has been applied, so refreshes never pile up on a slow machine or a
5,000-node cluster. While the fleet view shows, the node table is not touched at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import ContentSwitcher, DataTable, Footer, Header, Input, Static

from mignurse.cluster.client import ClusterError
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ResourceStatus
from mignurse.diagnose.engine import Diagnosis
from mignurse.diagnose.findings import CRITICAL, INFO, SEVERITY_ORDER, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, NodeEvidence
from mignurse.diagnose.timeline import node_timeline
from mignurse.fleetview import COLUMNS as FLEET_COLUMNS
from mignurse.fleetview import UNPOOLED, PoolRow
from mignurse.model import Pod, format_time
from mignurse.nodeview import COLUMNS, NodeRow, bundle_row, format_age, node_rows
from mignurse.render import SEVERITY_STYLE, countdown
from mignurse.tui.detail import evidence_detail, node_detail
from mignurse.tui.filters import FilterError, RowFilter, parse
from mignurse.tui.help import HelpScreen
from mignurse.tui.palette import MigNurseCommands
from mignurse.tui.sources import BundleSource, LiveSource
from mignurse.tui.table import BatchTable

__all__ = ["TABLE_COLUMNS", "BundleSource", "LiveSource", "MigNurseApp", "RowChanges", "make_app"]

REFRESH_SECONDS = 0.5
DIAGNOSE_SECONDS = 5.0  # rules run in the refresh worker this often
FINDINGS_SHOWN = 4
FULL_REFRESH_SECONDS = 5.0  # ages and "for how long" move even when nothing else does
PODS_MAX_AGE_SECONDS = 15.0  # the highlighted node's pods are fetched again after this
REBUILD_AFTER_REMOVALS = 1000  # past this, clearing and re-adding beats removing in a batch
STATUS_STYLE = {"Ready": "green", "NotReady": "bold red", "Unknown": "yellow", "Launching": "cyan"}
FLEET, NODES = "fleet", "nodes-view"


class Source(Protocol):
    """What the app reads: `LiveSource` (a cluster) or `BundleSource` (a bundle)."""

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
    def now(self) -> datetime: ...
    def start(self, on_status: Callable[[ResourceStatus], None]) -> None: ...
    def synced(self) -> bool: ...
    def assess(self) -> tuple[Diagnosis, list[PoolRow]]: ...
    def evidence(self, name: str) -> NodeEvidence | None: ...
    def evidence_only(self) -> list[NodeEvidence]: ...
    def pods(self, name: str) -> list[Pod]: ...
    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]: ...
    def auto_tick(self) -> None: ...
    def stop(self) -> None: ...


@dataclass
class RowChanges:
    """What the UI thread must do to the tables; computed off the UI thread."""

    added: list[NodeRow] = field(default_factory=list)
    changed: list[tuple[NodeRow, list[int]]] = field(default_factory=list)  # row, changed columns
    removed: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    fleet: list[PoolRow] | None = None  # the fleet view's rows, when they were recomputed
    summary: str = ""
    dirty: set[str] = field(default_factory=set)
    epoch: int = 0  # which table contents these changes were computed against
    diagnosis: Diagnosis | None = None  # set when the rules ran in this refresh
    diagnosis_error: str = ""


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
        Binding("A", "audit", "Audit", key_display="A"),
        Binding("p", "next_pool", "Next pool"),
        Binding("a", "all_pools", "All pools"),
        Binding("r", "refresh_now", "Refresh"),
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
        self.row_filter: RowFilter | None = None
        self.marks: frozenset[str] = frozenset()  # replaced, never mutated: the worker reads it
        self.refreshes = 0  # applied refreshes; tests wait on it
        self._reset_state()

    def _reset_state(self) -> None:
        self._rows: dict[str, NodeRow] = {}  # what the node table shows now, by node name
        self._pools: list[str] = []
        self._fleet: list[PoolRow] = []
        self._fleet_base: list[PoolRow] = []  # from the last diagnosis; counts come fresh
        self._last_full = 0.0
        self._force_full = True
        self._statuses: dict[str, ResourceStatus] = {}
        self._epoch = getattr(self, "_epoch", 0) + 1  # older computed changes are dropped
        self._pods: dict[str, tuple[float, list[Pod] | str]] = {}
        self._badges: dict[str, str] = {}  # node → worst finding severity (worker thread)
        self._last_diagnosis = 0.0
        self._diagnosis: Diagnosis | None = None
        self._diagnosis_error = ""

    @property
    def read_only(self) -> bool:
        return self.user_read_only or bool(self.source.read_only_reason)

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="status")
        yield Static("Diagnosing…", id="findings")
        with ContentSwitcher(initial=FLEET, id="views"):
            yield DataTable(id=FLEET, cursor_type="row", zebra_stripes=True)
            with Vertical(id=NODES):
                yield BatchTable(id="nodes", cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="detail-pane"):
                    yield Static("Highlight a node to see its conditions and events.", id="detail")
        yield Input(id="filter", placeholder="regex · !regex · -l key=value,key!=value,!key")
        yield Footer()

    def on_mount(self) -> None:
        self._titles()
        fleet = self.query_one(f"#{FLEET}", DataTable)
        for name in FLEET_COLUMNS:
            fleet.add_column(name, key=name)
        table = self.query_one("#nodes", DataTable)
        for name in TABLE_COLUMNS:
            table.add_column(name, key=name)
        self.query_one("#filter", Input).display = False
        self._update_status("connecting…")
        self.source.start(on_status=self._on_watch_status)
        fleet.focus()
        self._refresh_rows()

    def _titles(self) -> None:
        self.sub_title = f"{self.source.context} · {self.source.cluster}"
        if self.read_only:
            self.sub_title += f" · READ-ONLY ({self.source.read_only_reason or '--read-only'})"

    def on_unmount(self) -> None:
        self.source.stop()

    # -- watch status (from watch threads) ----------------------------------------------

    def _on_watch_status(self, status: ResourceStatus) -> None:
        with contextlib.suppress(RuntimeError):  # the app is shutting down
            self.call_from_thread(self._record_status, status)

    def _record_status(self, status: ResourceStatus) -> None:
        self._statuses[status.plural] = status

    # -- refresh loop ---------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def _refresh_rows(self) -> None:
        changes = self._compute_changes()
        try:
            self.call_from_thread(self._apply_changes, changes)
        except RuntimeError:
            return  # app closed while we computed

    def _compute_changes(self) -> RowChanges:
        """Runs in a worker thread: snapshot, rows, and the diff against what is shown."""
        source = self.source
        state = source.state
        dirty, other = state.take_changes()
        monotonic = time.monotonic()
        full = self._force_full or monotonic - self._last_full >= FULL_REFRESH_SECONDS
        changes = RowChanges(dirty=dirty, epoch=self._epoch)
        if not (dirty or other or full):
            return changes
        self._force_full = False
        self._last_full = monotonic
        now = source.now()
        synced = source.synced()
        # Judging a half-listed cluster would report "no findings" that are not true.
        if synced and monotonic - self._last_diagnosis >= DIAGNOSE_SECONDS:
            self._last_diagnosis = monotonic
            try:
                changes.diagnosis, self._fleet_base = source.assess()
            except Exception as exc:  # noqa: BLE001 - a diagnosis bug must not stop the refreshes
                changes.diagnosis_error = f"diagnosis failed: {type(exc).__name__}: {exc}"
            if changes.diagnosis is not None:
                self._badges = _badges(changes.diagnosis.findings)
        if synced:
            source.auto_tick()
        snapshot = state.snapshot(taken_at=now)
        marks = self.marks
        rows = [
            dataclasses.replace(r, badge=self._badges[r.name]) if r.name in self._badges else r
            for r in [
                *node_rows(snapshot, now),
                *(
                    bundle_row(e.node, layout=e.layout, instance_id=e.instance_id)
                    for e in source.evidence_only()
                ),
            ]
        ]
        changes.pools = sorted({r.pool for r in rows if r.pool})
        row_filter = self.row_filter
        changes.fleet = _fleet_now(self._fleet_base, rows, row_filter)
        changes.summary = _summary(rows, source, self._statuses, now, len(marks))
        if self.view != NODES:
            return changes  # nobody looks at the node table: leave it as it is
        shown = [r for r in rows if self.pool_filter is None or r.pool == self.pool_filter]
        if row_filter is not None:
            nodes = snapshot.nodes
            shown = [
                r
                for r in shown
                if row_filter.matches(r.name, nodes[r.name].labels if r.name in nodes else {})
            ]
        fresh = {r.name: r for r in shown}
        for name, row in fresh.items():
            old = self._rows.get(name)
            if old is None:
                changes.added.append(row)
            elif old != row:
                old_cells, new_cells = _display(old, marks), _display(row, marks)
                cols = [
                    i for i, (a, b) in enumerate(zip(old_cells, new_cells, strict=True)) if a != b
                ]
                changes.changed.append((row, cols))
        changes.removed = [name for name in self._rows if name not in fresh]
        return changes

    def _apply_changes(self, changes: RowChanges) -> None:
        try:
            self._apply(changes)
        except NoMatches:
            return  # a refresh that lands while the app closes: its widgets are gone

    def _apply(self, changes: RowChanges) -> None:
        if changes.epoch != self._epoch:
            self.set_timer(REFRESH_SECONDS, self._refresh_rows)
            return  # computed for a table that has since been cleared
        if self.view == NODES:
            self._apply_node_changes(changes)
        if changes.fleet is not None:
            self._show_fleet(changes.fleet)
        if changes.pools:
            self._pools = changes.pools
        while self.source.collect_reports:
            self.notify(self.source.collect_reports.pop(0), title="auto-collect", timeout=8)
        if changes.diagnosis is not None or changes.diagnosis_error:
            self._diagnosis = changes.diagnosis
            self._diagnosis_error = changes.diagnosis_error
        self._show_findings()
        if changes.summary:
            self._update_status(changes.summary)
        self.refreshes += 1
        self.set_timer(REFRESH_SECONDS, self._refresh_rows)

    def _apply_node_changes(self, changes: RowChanges) -> None:
        table = self.query_one("#nodes", BatchTable)
        highlighted = self._highlighted_name()
        if len(changes.removed) > REBUILD_AFTER_REMOVALS:
            self._rebuild(table, changes, highlighted)
        else:
            for name in changes.removed:
                self._rows.pop(name, None)
            table.remove_rows(changes.removed)
            for row, cols in changes.changed:
                self._rows[row.name] = row
                cells = self._styled(row)
                for index in cols:
                    table.update_cell(
                        row.name, TABLE_COLUMNS[index], cells[index], update_width=True
                    )
            for row in changes.added:
                self._rows[row.name] = row
                table.add_row(*self._styled(row), key=row.name)
            badge = TABLE_COLUMNS.index("!")
            if changes.added or any(badge in cols for _row, cols in changes.changed):
                table.sort("POOL", "!", "NAME", key=_sort_key)
                if highlighted in self._rows:  # the cursor stays on its node, not its index
                    table.move_cursor(row=table.get_row_index(highlighted))
        if highlighted and (
            highlighted in changes.dirty
            or any(row.name == highlighted for row, _ in changes.changed)
        ):
            self._show_detail(highlighted)

    def _rebuild(self, table: DataTable[Any], changes: RowChanges, highlighted: str | None) -> None:
        """Clear and refill: DataTable.remove_row costs a walk over every row."""
        for name in changes.removed:
            self._rows.pop(name, None)
        for row, _cols in changes.changed:
            self._rows[row.name] = row
        for row in changes.added:
            self._rows[row.name] = row
        table.clear()
        for row in sorted(
            self._rows.values(), key=lambda r: (r.pool, _BADGE_RANK.get(r.badge, 3), r.name)
        ):
            table.add_row(*self._styled(row), key=row.name)
        if highlighted in self._rows:
            table.move_cursor(row=table.get_row_index(highlighted))

    def _styled(self, row: NodeRow) -> list[Any]:
        # the detail pane has the full name
        cells: list[Any] = list(_display(row, self.marks, shorten=True))
        cells[1] = Text(cells[1], style=SEVERITY_STYLE.get(row.badge, ""))
        cells[5] = Text(row.status, style=STATUS_STYLE.get(row.status_word, ""))
        if row.ahr_ok is False:
            cells[9] = Text(row.ahr, style="bold red")
        return cells

    def _show_fleet(self, rows: list[PoolRow]) -> None:
        if rows == self._fleet:
            return
        table = self.query_one(f"#{FLEET}", DataTable)
        highlighted = self._highlighted_pool()
        self._fleet = rows
        table.clear()
        for row in rows:
            cells: list[Any] = list(row.cells())
            if row.worst is not None:
                cells[_WORST] = Text(
                    cells[_WORST], style=SEVERITY_STYLE.get(row.worst.severity, "")
                )
            if row.not_ready:
                cells[_NOTREADY] = Text(cells[_NOTREADY], style="bold red")
            if row.repair.startswith("PAUSED"):
                cells[_REPAIR] = Text(cells[_REPAIR], style="bold yellow")
            table.add_row(*cells, key=row.pool)
        # Rows shown before the first diagnosis are not ranked yet: following the pool the
        # cursor sat on then would land on whichever came first by name, not the worst.
        ranked = self._diagnosis is not None or bool(self._diagnosis_error)
        if ranked and highlighted is not None and any(r.pool == highlighted for r in rows):
            table.move_cursor(row=table.get_row_index(highlighted))

    def _show_findings(self) -> None:
        """The findings panel: worst first, with a live countdown to each deadline."""
        panel = self.query_one("#findings", Static)
        if self._diagnosis_error:
            panel.update(Text(self._diagnosis_error, style="yellow"))
            return
        if self._diagnosis is None:
            panel.update(Text("Diagnosing…", style="dim"))
            return
        findings = self._diagnosis.findings
        if self.view == NODES and self.pool_filter:
            findings = [
                f for f in findings if f.nodepool in ("", self.pool_filter) or not f.nodepool
            ]
        if not findings:
            panel.update(Text("No findings.", style="green"))
            return
        now = self.source.now()
        # One line per finding (the whole story is in `mignurse diagnose`): the countdown
        # goes first so no long summary can push it off the screen.
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
            lines.append(f"\n… {len(findings) - FINDINGS_SHOWN} more (mignurse diagnose)")
        panel.update(lines)

    def _update_status(self, text: str) -> None:
        filters = []
        if self.view == NODES:
            filters.append(f"pool {self.pool_filter}" if self.pool_filter else "all pools")
        if self.row_filter is not None:
            filters.append(f"filter /{self.row_filter.text}")
        prefix = f"[b]{' · '.join(filters)}[/] · " if filters else ""
        self.query_one("#status", Static).update(prefix + text)

    # -- which keys show ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that do nothing here are hidden from the footer (False hides; None would
        only dim them), and so is every key that changes something when read-only."""
        if action in ("mark", "next_pool", "all_pools", "collect") and self.view != NODES:
            return False
        if action == "collect" and self.source.read_only_reason:
            return False
        if action in ("runbooks", "cordon") and (self.read_only or self.view != NODES):
            return False
        return not (action == "leave" and self.view == FLEET and self.row_filter is None)

    def _switch(self, view: str) -> None:
        self.view = view
        self.query_one("#views", ContentSwitcher).current = view
        (self.query_one("#nodes", DataTable) if view == NODES else self._fleet_table()).focus()
        self._force_full = True
        self.refresh_bindings()
        self._show_findings()

    def _fleet_table(self) -> DataTable[Any]:
        return self.query_one(f"#{FLEET}", DataTable)

    # -- navigation -----------------------------------------------------------------------

    @on(DataTable.RowSelected, f"#{FLEET}")
    def _pool_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_pool(str(event.row_key.value))

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
        self.row_filter = None
        self.open_pool(node.pool if node is not None and node.pool else None)
        self._jump_target = name
        self._jump_tries = 0
        self.set_timer(0.1, self._jump_when_shown)

    def _jump_when_shown(self) -> None:
        try:
            table = self.query_one("#nodes", DataTable)
        except NoMatches:
            return  # the timer fired while the app closed
        name = self._jump_target
        if name in self._rows:
            table.move_cursor(row=table.get_row_index(name))
            self._show_detail(name)
        elif self._jump_tries < 50:
            self._jump_tries += 1
            self.set_timer(0.1, self._jump_when_shown)

    def action_leave(self) -> None:
        filter_input = self.query_one("#filter", Input)
        if filter_input.display:
            filter_input.display = False
            self._focus_table()
        elif self.row_filter is not None:
            self._set_filter(None)
        elif self.view == NODES:
            self.pool_filter = None
            self._switch(FLEET)
        self.refresh_bindings()

    def _focus_table(self) -> None:
        (self.query_one("#nodes", DataTable) if self.view == NODES else self._fleet_table()).focus()

    def action_filter(self) -> None:
        filter_input = self.query_one("#filter", Input)
        filter_input.value = self.row_filter.text if self.row_filter else ""
        filter_input.display = True
        filter_input.focus()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            row_filter = parse(event.value)
        except FilterError as exc:
            self.notify(str(exc), severity="error", timeout=6)
            return
        event.input.display = False
        self._set_filter(row_filter)
        self._focus_table()

    def _set_filter(self, row_filter: RowFilter | None) -> None:
        self.row_filter = row_filter
        self._reset_table()
        self.refresh_bindings()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(read_only=self.read_only))

    def pool_names(self) -> list[str]:
        return [r.pool for r in self._fleet] or list(self._pools)

    def node_names(self) -> list[str]:
        return self.source.state.node_names()

    def context_names(self) -> list[str]:
        if self._connect is None:
            return []
        return [c for c in self._contexts() if c != self.source.context]

    def runbook_names(self) -> list[str]:
        from mignurse.tui import runbooks

        return runbooks.runbook_names(self)

    def start_runbook(self, name: str) -> None:
        from mignurse.tui import runbooks

        runbooks.start_runbook(self, name)

    def action_runbooks(self) -> None:
        from mignurse.tui import runbooks

        runbooks.open_picker(self)

    def action_cordon(self) -> None:
        from mignurse.tui import runbooks

        runbooks.cordon_nodes(self)

    def action_audit(self) -> None:
        from mignurse.tui import runbooks

        runbooks.open_audit(self)

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
            with contextlib.suppress(RuntimeError):
                self.call_from_thread(
                    self.notify, f"{context}: {exc}", severity="error", timeout=10
                )
            return
        with contextlib.suppress(RuntimeError):
            self.call_from_thread(self._swap_source, source)

    def open_bundle(self, path: Path) -> None:
        try:
            source = BundleSource(path)
        except Exception as exc:  # noqa: BLE001 - one line in the app, the old view stays
            self.notify(f"{path}: {exc}", severity="error", timeout=10)
            return
        self._swap_source(source)

    def _swap_source(self, source: Source) -> None:
        """Show another cluster or a bundle in place of this one."""
        old = self.source
        self.source = source
        self.pool_filter = None
        self.row_filter = None
        self.marks = frozenset()
        self._reset_state()
        self.query_one("#nodes", DataTable).clear()
        self._fleet_table().clear()
        self.query_one("#detail", Static).update("Highlight a node to see its details.")
        self._titles()
        old.stop()
        source.start(on_status=self._on_watch_status)
        self._switch(FLEET)
        self.notify(f"Now showing {source.context}", timeout=4)

    # -- actions ----------------------------------------------------------------------

    def _reset_table(self) -> None:
        self._epoch += 1
        self.query_one("#nodes", DataTable).clear()
        self._rows = {}
        self._force_full = True
        self._refresh_rows()

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

    def action_all_pools(self) -> None:
        if self.pool_filter is not None:
            self._set_pool(None)

    def action_refresh_now(self) -> None:
        self._force_full = True
        self._last_diagnosis = 0.0

    def action_mark(self) -> None:
        name = self._highlighted_name()
        if not name or self.source.state.node(name) is None:
            return
        marked = name not in self.marks
        self.marks = self.marks | {name} if marked else self.marks - {name}
        table = self.query_one("#nodes", DataTable)
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
        self._collect_nodes(names)

    @work(thread=True, group="collect", exit_on_error=False)
    def _collect_nodes(self, names: list[str]) -> None:
        done: list[str] = []

        def progress(node: str, state: str) -> None:
            if state.startswith("collecting"):
                return
            done.append(node)
            with contextlib.suppress(RuntimeError):
                self.call_from_thread(
                    self.notify,
                    f"{len(done)}/{len(names)} {node.split('.', 1)[0]}: {state}",
                    title="collect",
                    timeout=4,
                )

        try:
            out, manifest = self.source.collect_nodes(names, progress)
        except Exception as exc:  # noqa: BLE001 - shown in the app, never a crash
            message, severity = f"Collecting failed: {exc}", "error"
        else:
            failed = {n: o for n, o in manifest["nodes"].items() if not o.get("ok")}
            if not failed:
                message, severity = f"Bundle written: {out}", "information"
            else:
                why = "; ".join(
                    f"{n.split('.', 1)[0]}: {o.get('error') or '; '.join(o.get('problems') or [])}"
                    for n, o in failed.items()
                )
                message, severity = f"Bundle {out} lacks {len(failed)} node(s): {why}", "warning"
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.call_from_thread(self.notify, message, severity=severity, timeout=12)

    # -- detail pane ------------------------------------------------------------------

    def _highlighted_name(self) -> str | None:
        return _highlighted_key(self.query_one("#nodes", DataTable))

    def _highlighted_pool(self) -> str | None:
        return _highlighted_key(self._fleet_table())

    @on(DataTable.RowHighlighted, "#nodes")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_detail(str(event.row_key.value))

    def _show_detail(self, name: str) -> None:
        state = self.source.state
        node = state.node(name)
        try:
            detail = self.query_one("#detail", Static)
        except NoMatches:
            return  # a highlight that arrives while the app closes: its widgets are gone

        evidence = self.source.evidence(name)
        if node is None and evidence is not None:
            now = self.source.now()
            alone = DiagnosisInput(
                snapshot=state.node_view(name, taken_at=now),
                now=now,
                node_evidence={name: evidence},
            )
            found = self._diagnosis.findings if self._diagnosis else []
            detail.update(
                evidence_detail(
                    evidence,
                    node_timeline(alone, name),
                    now,
                    findings=[f for f in found if name in f.nodes],
                )
            )
            return
        if node is None:
            claim = state.nodeclaim(name)
            if claim is not None:
                detail.update(
                    f"[b]{claim.name}[/b]  NodeClaim in pool {claim.pool}\n"
                    f"Launching since {format_time(claim.created)}; no Node has registered yet.\n"
                    f"instance {claim.instance_id or 'not yet known'} · {claim.instance_type}"
                )
            else:
                detail.update(f"{name} is gone.")
            return
        pods = self._pods.get(name)
        if pods is None or time.monotonic() - pods[0] > PODS_MAX_AGE_SECONDS:
            self._fetch_pods(name)
        now = self.source.now()
        view = DiagnosisInput(
            snapshot=state.node_view(name, taken_at=now), now=now, history=self.source.last_history
        )
        diagnosis = self._diagnosis
        findings = [f for f in diagnosis.findings if name in f.nodes] if diagnosis else []
        runbooks = list(dict.fromkeys(r for f in findings for r in f.runbooks))
        detail.update(
            node_detail(
                node,
                node_timeline(view, name),
                now,
                pods[1] if pods else None,
                findings=findings,
                evidence=self.source.evidence(name),
                runbooks=[] if self.read_only else runbooks,
            )
        )

    @work(thread=True, exclusive=True, group="pods", exit_on_error=False)
    def _fetch_pods(self, name: str) -> None:
        """The highlighted node's pods, off the UI thread; errors are shown, not raised."""
        result: list[Pod] | str
        try:
            result = self.source.pods(name)
        except ClusterError as exc:
            result = str(exc)
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.call_from_thread(self._pods_arrived, name, result)

    def _pods_arrived(self, name: str, result: list[Pod] | str) -> None:
        self._pods[name] = (time.monotonic(), result)
        if self._highlighted_name() == name:
            self._show_detail(name)


_WORST, _NOTREADY, _REPAIR = (FLEET_COLUMNS.index(c) for c in ("WORST", "NOTREADY", "REPAIR"))
# "M" shows the marks; "!" carries the worst finding's severity, in words
TABLE_COLUMNS = ("M", "!", *COLUMNS)
BADGE_WORDS = {CRITICAL: "CRIT", WARNING: "WARN", INFO: "info"}
_BADGE_RANK = {CRITICAL: 0, WARNING: 1, INFO: 2}
_WORD_RANK = {BADGE_WORDS[severity]: rank for severity, rank in _BADGE_RANK.items()}


def _highlighted_key(table: DataTable[Any]) -> str | None:
    if table.row_count == 0:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
    except Exception:  # noqa: BLE001 - cursor outside the rows after a removal
        return None
    return str(key.value) if key.value is not None else None


def _display(row: NodeRow, marks: frozenset[str], *, shorten: bool = False) -> tuple[str, ...]:
    return (
        "*" if row.name in marks else "",
        BADGE_WORDS.get(row.badge, ""),
        *row.cells(shorten=shorten),
    )


def _badges(findings: list[Finding]) -> dict[str, str]:
    worst: dict[str, str] = {}
    for finding in findings:
        for node in finding.nodes:
            current = worst.get(node)
            if current is None or SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[current]:
                worst[node] = finding.severity
    return worst


def _sort_key(values: tuple[Any, ...]) -> tuple[str, int, str]:
    """Pool, then the worst finding first (CRIT, WARN, info, none), then name: the node to
    look at is at the top of its pool."""
    return (str(values[0]), _WORD_RANK.get(str(values[1]), 3), str(values[2]))


def _fleet_now(
    base: list[PoolRow], rows: list[NodeRow], row_filter: RowFilter | None
) -> list[PoolRow]:
    """The last diagnosis's pool rows with node counts from this refresh (so a node that
    turns NotReady shows at once, not at the next diagnosis)."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        if row.status_word == "Launching":
            continue
        tally = counts.setdefault(row.pool or UNPOOLED, [0, 0])
        tally[0] += 1
        if row.status_word != "Ready":
            tally[1] += 1
    by_pool = {r.pool: r for r in base}
    out: list[PoolRow] = []
    for pool in dict.fromkeys([*by_pool, *counts]):
        nodes, not_ready = counts.get(pool, [0, 0])
        held = by_pool.get(pool)
        if held is None:
            held = PoolRow(pool, "", 0, 0, 0, 0, 0, None, "…", None)
        out.append(
            dataclasses.replace(held, nodes=nodes, ready=nodes - not_ready, not_ready=not_ready)
        )
    if row_filter is not None and not row_filter.needs_labels:
        out = [r for r in out if row_filter.matches(r.pool)]
    order = {r.pool: i for i, r in enumerate(base)}
    out.sort(key=lambda r: (r.rank, order.get(r.pool, len(order)), -r.not_ready, r.pool))
    return out


def _summary(
    rows: list[NodeRow],
    source: Any,
    statuses: dict[str, ResourceStatus],
    now: datetime,
    marked: int,
) -> str:
    nodes = [r for r in rows if r.status_word != "Launching"]
    not_ready = sum(1 for r in nodes if r.status_word != "Ready")
    hardware = sum(1 for r in nodes if r.ahr_ok is False)
    launching = len(rows) - len(nodes)
    # What needs the on-call engineer's eyes first, so 80 columns still show it: a stale
    # view, then the counts; where the data comes from after.
    parts = []
    broken = [s for s in statuses.values() if s.error]
    if broken:
        worst = broken[0]
        since = format_age((now - worst.stale_since).total_seconds()) if worst.stale_since else "?"
        parts.append(f"[b yellow]STALE {since}[/]: {worst.error}")
    parts.append(f"{len(nodes)} GPU nodes")
    parts.append(f"[b red]{not_ready} not ready[/]" if not_ready else "all ready")
    if hardware:
        parts.append(f"[b red]{hardware} AcceleratedHardwareReady=False[/]")
    if launching:
        parts.append(f"{launching} launching")
    if marked:
        parts.append(f"[b]{marked} marked[/]")
    if source.simulated:
        parts.append(f"[b reverse] SIMULATED [/] {source.simulated}")
    if source.read_only_reason:
        parts.append(f"[b reverse] BUNDLE [/] collected {now.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    parts.append("Karpenter: on" if source.karpenter else "Karpenter: not installed")
    if not source.read_only_reason:
        parts.append(f"as of {now.astimezone(UTC):%H:%M:%S} UTC")
    return " · ".join(parts)


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
