"""The terminal app: the GPU node table, kept current from watches, with a detail pane.

One factory, `make_app`, builds the app for the live cluster, the demo and the tests.
The UI thread never talks to the cluster: watch threads fill a `ClusterState`, a worker
thread turns it into row changes, and the UI thread only applies those changes. The
next refresh is armed only after the previous one has been applied, so refreshes can
never pile up on a slow machine or a 5,000-node cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from mignurse.cluster.client import NODES, ClusterClient, ClusterError
from mignurse.cluster.history import HistoryError, HistoryRecorder, HistoryStore
from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available, node_pods
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher, ResourceStatus
from mignurse.collect.auto import AutoCollector
from mignurse.collect.redact import Redactor
from mignurse.collect.run import DEFAULT_SINCE, collect, journal_since_words
from mignurse.collect.transports import shell_factory
from mignurse.diagnose.engine import Diagnosis, diagnose
from mignurse.diagnose.findings import CRITICAL, INFO, SEVERITY_ORDER, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.sources import karpenter_settings, read_history
from mignurse.diagnose.timeline import TimelineEntry, node_timeline
from mignurse.model import Node, Pod, format_time
from mignurse.nodeview import AHR, COLUMNS, NodeRow, format_age, node_rows
from mignurse.render import SEVERITY_STYLE, countdown

REFRESH_SECONDS = 0.5
DIAGNOSE_SECONDS = 5.0  # rules run in the refresh worker this often
FINDINGS_SHOWN = 4
FULL_REFRESH_SECONDS = 5.0  # ages and "for how long" move even when nothing else does
DETAIL_EVENTS = 15
PODS_MAX_AGE_SECONDS = 15.0  # the highlighted node's pods are fetched again after this
REBUILD_AFTER_REMOVALS = 5  # past this, clearing and re-adding beats remove_row one by one
STATUS_STYLE = {"Ready": "green", "NotReady": "bold red", "Unknown": "yellow", "Launching": "cyan"}
INTERESTING_LABELS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/capacity-type",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/mig.strategy",
    "nvidia.com/gpu.deploy.mig-manager",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
)


class LiveSource:
    """A cluster reached through the real client, kept current by watches."""

    def __init__(
        self,
        client: ClusterClient,
        *,
        simulated: str | None = None,
        clock: Callable[[], datetime] | None = None,
        history_path: Path | None = None,
        bundle_dir: Path | None = None,
        auto_collect: Path | None = None,
    ) -> None:
        self.client = client
        self.state = ClusterState()
        self.simulated = simulated
        self._clock = clock or client.server_now
        self.karpenter = False
        self.karpenter_settings: KarpenterSettings | None = None
        self.notices: list[str] = []
        self.watcher: ClusterWatcher | None = None
        self.history_path = history_path
        self.bundle_dir = bundle_dir or Path.cwd()
        self.auto_collect = auto_collect  # a folder: collect nodes as their repair clock starts
        self._collector: AutoCollector | None = None
        self._sandboxes: tempfile.TemporaryDirectory[str] | None = None
        self.collect_reports: list[str] = []  # the app shows and clears these
        self.history: HistoryStore | None = None
        self._recorder: HistoryRecorder | None = None
        self.last_history = History()
        self._checked = False

    @property
    def context(self) -> str:
        return self.client.info.context

    @property
    def cluster(self) -> str:
        return self.client.info.cluster

    def now(self) -> datetime:
        return self._clock()

    def check(self) -> None:
        """One small request, so a dead endpoint or an RBAC refusal fails before any screen."""
        next(self.client.list_pages(NODES, limit=1))
        self._checked = True
        self.karpenter = karpenter_available(self.client)
        self.state.karpenter = self.karpenter
        if not self.karpenter:
            self.notices.append(KARPENTER_ABSENT_NOTICE)
        else:
            self.karpenter_settings = karpenter_settings(self.client, self.notices)

    def start(self, on_status: Callable[[ResourceStatus], None]) -> None:
        if not self._checked:
            self.check()
        if self.history_path is not None:
            self._open_history(self.history_path)
        if self.auto_collect is not None:
            self._sandboxes = tempfile.TemporaryDirectory(prefix="mignurse-sandboxes-")
            self._collector = AutoCollector(
                self.client,
                out_dir=self.auto_collect,
                shell_for=shell_factory(
                    self.client,
                    transport="sim" if self.simulated else "ssh",
                    sandboxes=Path(self._sandboxes.name),
                ),
                clock=self.now,
                report=self.collect_reports.append,
            )
        self.watcher = ClusterWatcher(
            self.client, self.state, karpenter=self.karpenter, on_status=on_status
        ).start()

    def _open_history(self, path: Path) -> None:
        """Record what the app sees, unless `mignurse watch` already does (then only read)."""
        try:
            self.history = HistoryStore.open_writer(path)
        except HistoryError as exc:
            self.notices.append(f"history not used: {exc}")
            return
        if not self.history.readonly:
            self._recorder = HistoryRecorder(self.history, self.context, clock=self.now)
            self.state.subscribe(self._recorder.listener)
            self._recorder.start()

    def diagnose(self) -> Diagnosis:
        """Every rule over what the app holds now (called off the UI thread)."""
        now = self.now()
        history = History()
        if self.history is not None:
            history = read_history(self.history, self.context, now)
            self.last_history = history  # the detail pane's timeline reads it too
        inp = DiagnosisInput(
            snapshot=self.state.snapshot(taken_at=now),
            now=now,
            history=history,
            karpenter=self.karpenter_settings,
        )
        return diagnose(inp)

    def collect_node(self, name: str) -> tuple[Path, dict[str, Any]]:
        """One node's bundle into `bundle_dir`, over the simulator's sandboxes in the demo,
        else SSH (as `mignurse collect --transport ssh`). Runs off the UI thread."""
        node = self.state.node(name)
        if node is None:
            raise ValueError(f"{name} is gone")
        now = self.now()
        out = self.bundle_dir / (
            f"mignurse-bundle-{self.context}-{name.split('.', 1)[0]}-{now:%Y%m%dT%H%M%SZ}.tar.gz"
        )
        with tempfile.TemporaryDirectory(prefix="mignurse-sandboxes-") as sandboxes:
            shell_for = shell_factory(
                self.client,
                transport="sim" if self.simulated else "ssh",
                sandboxes=Path(sandboxes),
            )
            manifest = collect(
                self.client,
                self.state.snapshot(taken_at=now),
                [node],
                shell_for=shell_for,
                out=out,
                since=journal_since_words(DEFAULT_SINCE),
                redactor=Redactor(),
            )
        return out, manifest

    def auto_tick(self) -> None:
        """Called from the refresh worker once the state is listed."""
        if self._collector is not None:
            self._collector.tick(self.state)

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self._collector is not None:
            self._collector.close()
        if self._sandboxes is not None:
            self._sandboxes.cleanup()
        if self._recorder is not None:
            self._recorder.stop()
        if self.history is not None:
            self.history.close()
        self.client.close()


@dataclass
class RowChanges:
    """What the UI thread must do to the table; computed off the UI thread."""

    added: list[NodeRow] = field(default_factory=list)
    changed: list[tuple[NodeRow, list[int]]] = field(default_factory=list)  # row, changed columns
    removed: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    summary: str = ""
    dirty: set[str] = field(default_factory=set)
    epoch: int = 0  # which table contents these changes were computed against
    diagnosis: Diagnosis | None = None  # set when the rules ran in this refresh
    diagnosis_error: str = ""


class MigNurseApp(App[None]):
    CSS_PATH = "mignurse.tcss"
    TITLE = "mignurse"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "next_pool", "Next pool"),
        Binding("a", "all_pools", "All pools"),
        Binding("r", "refresh_now", "Refresh"),
        Binding("c", "collect", "Collect"),
    ]

    def __init__(self, source: LiveSource, *, read_only: bool = False) -> None:
        super().__init__()
        self.source = source
        self.read_only = read_only
        self.pool_filter: str | None = None
        self._rows: dict[str, NodeRow] = {}  # what the table shows now, by node name
        self._pools: list[str] = []
        self._last_full = 0.0
        self._force_full = True
        self._statuses: dict[str, ResourceStatus] = {}
        self._epoch = 0  # bumps when the table is cleared; older computed changes are dropped
        self._pods: dict[str, tuple[float, list[Pod] | str]] = {}  # by node: (fetched, pods)
        self.refreshes = 0  # applied refreshes; tests wait on it
        self._badges: dict[str, str] = {}  # node → worst finding severity (worker thread)
        self._last_diagnosis = 0.0
        self._diagnosis: Diagnosis | None = None
        self._diagnosis_error = ""

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="status")
        yield Static("Diagnosing…", id="findings")
        yield DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="detail-pane"):
            yield Static("Highlight a node to see its conditions and events.", id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{self.source.context} · {self.source.cluster}"
        table = self.query_one("#nodes", DataTable)
        for name in TABLE_COLUMNS:
            table.add_column(name, key=name)
        self._update_status("connecting…")
        self.source.start(on_status=self._on_watch_status)
        self._refresh_rows()

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
        state = self.source.state
        dirty, other = state.take_changes()
        monotonic = time.monotonic()
        full = self._force_full or monotonic - self._last_full >= FULL_REFRESH_SECONDS
        changes = RowChanges(dirty=dirty, epoch=self._epoch)
        if not (dirty or other or full):
            return changes
        self._force_full = False
        self._last_full = monotonic
        now = self.source.now()
        watcher = self.source.watcher
        synced = watcher is not None and watcher.synced()
        # Judging a half-listed cluster would report "no findings" that are not true.
        if synced and monotonic - self._last_diagnosis >= DIAGNOSE_SECONDS:
            self._last_diagnosis = monotonic
            try:
                changes.diagnosis = self.source.diagnose()
            except Exception as exc:  # noqa: BLE001 - a diagnosis bug must not stop the refreshes
                changes.diagnosis_error = f"diagnosis failed: {type(exc).__name__}: {exc}"
            if changes.diagnosis is not None:
                self._badges = _badges(changes.diagnosis.findings)
        if synced:
            self.source.auto_tick()
        snapshot = state.snapshot(taken_at=now)
        rows = [
            dataclasses.replace(r, badge=self._badges[r.name]) if r.name in self._badges else r
            for r in node_rows(snapshot, now)
        ]
        changes.pools = sorted({r.pool for r in rows if r.pool})
        shown = [r for r in rows if self.pool_filter is None or r.pool == self.pool_filter]
        fresh = {r.name: r for r in shown}
        for name, row in fresh.items():
            old = self._rows.get(name)
            if old is None:
                changes.added.append(row)
            elif old != row:
                old_cells, new_cells = _display(old), _display(row)
                cols = [
                    i for i, (a, b) in enumerate(zip(old_cells, new_cells, strict=True)) if a != b
                ]
                changes.changed.append((row, cols))
        changes.removed = [name for name in self._rows if name not in fresh]
        changes.summary = _summary(rows, self.source, self._statuses, now)
        return changes

    def _apply_changes(self, changes: RowChanges) -> None:
        if changes.epoch != self._epoch:
            return  # computed for a table that has since been cleared; its successor is running
        table = self.query_one("#nodes", DataTable)
        highlighted = self._highlighted_name()
        if len(changes.removed) > REBUILD_AFTER_REMOVALS:
            self._rebuild(table, changes, highlighted)
        else:
            for name in changes.removed:
                self._rows.pop(name, None)
                table.remove_row(name)
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
            if changes.added:
                table.sort("POOL", "NAME", key=_sort_key)
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
        if highlighted and (
            highlighted in changes.dirty
            or any(row.name == highlighted for row, _ in changes.changed)
        ):
            self._show_detail(highlighted)
        self.refreshes += 1
        self.set_timer(REFRESH_SECONDS, self._refresh_rows)

    def _rebuild(self, table: DataTable[Any], changes: RowChanges, highlighted: str | None) -> None:
        """Clear and refill: DataTable.remove_row costs a walk over every row."""
        for name in changes.removed:
            self._rows.pop(name, None)
        for row, _cols in changes.changed:
            self._rows[row.name] = row
        for row in changes.added:
            self._rows[row.name] = row
        table.clear()
        for row in sorted(self._rows.values(), key=lambda r: (r.pool, r.name)):
            table.add_row(*self._styled(row), key=row.name)
        if highlighted in self._rows:
            table.move_cursor(row=table.get_row_index(highlighted))

    def _styled(self, row: NodeRow) -> list[Any]:
        cells: list[Any] = list(_display(row, shorten=True))  # the detail pane has the full name
        cells[0] = Text(cells[0], style=SEVERITY_STYLE.get(row.badge, ""))
        cells[4] = Text(row.status, style=STATUS_STYLE.get(row.status_word, ""))
        if row.ahr_ok is False:
            cells[8] = Text(row.ahr, style="bold red")
        return cells

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
        self.query_one("#status", Static).update(text)

    # -- actions ----------------------------------------------------------------------

    def _set_pool(self, pool: str | None) -> None:
        self.pool_filter = pool
        self._epoch += 1
        self.query_one("#nodes", DataTable).clear()
        self._rows = {}
        self._force_full = True
        self.notify(f"Showing pool {pool}" if pool else "Showing all pools", timeout=2)
        self._refresh_rows()

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

    def action_collect(self) -> None:
        """Collect the highlighted node's evidence into a bundle, before repair deletes it."""
        name = self._highlighted_name()
        if not name or self.source.state.node(name) is None:
            self.notify("Highlight a node (not a launching NodeClaim) to collect it.", timeout=4)
            return
        self.notify(f"Collecting {name}…", timeout=4)
        self._collect_node(name)

    @work(thread=True, group="collect", exit_on_error=False)
    def _collect_node(self, name: str) -> None:
        try:
            out, manifest = self.source.collect_node(name)
        except Exception as exc:  # noqa: BLE001 - shown in the app, never a crash
            message, severity = f"Collecting {name} failed: {exc}", "error"
        else:
            outcome = manifest["nodes"].get(name, {})
            if outcome.get("ok"):
                message, severity = f"Bundle written: {out}", "information"
            else:
                why = outcome.get("error") or "; ".join(outcome.get("problems") or []) or "?"
                message, severity = f"Bundle {out} is missing {name}'s files: {why}", "warning"
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.call_from_thread(self.notify, message, severity=severity, timeout=10)

    # -- detail pane ------------------------------------------------------------------

    def _highlighted_name(self) -> str | None:
        table = self.query_one("#nodes", DataTable)
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - cursor outside the rows after a removal
            return None
        return str(key.value) if key.value is not None else None

    @on(DataTable.RowHighlighted, "#nodes")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_detail(str(event.row_key.value))

    def _show_detail(self, name: str) -> None:
        state = self.source.state
        node = state.node(name)
        detail = self.query_one("#detail", Static)
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
        detail.update(node_detail(node, node_timeline(view, name), now, pods[1] if pods else None))

    @work(thread=True, exclusive=True, group="pods", exit_on_error=False)
    def _fetch_pods(self, name: str) -> None:
        """The highlighted node's pods, off the UI thread; errors are shown, not raised."""
        result: list[Pod] | str
        try:
            result = node_pods(self.source.client, name)
        except ClusterError as exc:
            result = str(exc)
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.call_from_thread(self._pods_arrived, name, result)

    def _pods_arrived(self, name: str, result: list[Pod] | str) -> None:
        self._pods[name] = (time.monotonic(), result)
        if self._highlighted_name() == name:
            self._show_detail(name)


TABLE_COLUMNS = ("!", *COLUMNS)  # "!" carries the worst finding's severity, in words
BADGE_WORDS = {CRITICAL: "CRIT", WARNING: "WARN", INFO: "info"}


def _display(row: NodeRow, *, shorten: bool = False) -> tuple[str, ...]:
    return (BADGE_WORDS.get(row.badge, ""), *row.cells(shorten=shorten))


def _badges(findings: list[Finding]) -> dict[str, str]:
    worst: dict[str, str] = {}
    for finding in findings:
        for node in finding.nodes:
            current = worst.get(node)
            if current is None or SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[current]:
                worst[node] = finding.severity
    return worst


def _sort_key(values: tuple[Any, ...]) -> tuple[str, str]:
    return (str(values[0]), str(values[1]))


def _summary(
    rows: list[NodeRow], source: LiveSource, statuses: dict[str, ResourceStatus], now: datetime
) -> str:
    nodes = [r for r in rows if r.status_word != "Launching"]
    not_ready = sum(1 for r in nodes if r.status_word != "Ready")
    hardware = sum(1 for r in nodes if r.ahr_ok is False)
    launching = len(rows) - len(nodes)
    parts = []
    if source.simulated:
        parts.append(f"[b reverse] SIMULATED [/] {source.simulated}")
    parts.append(f"{len(nodes)} GPU nodes")
    parts.append(f"[b red]{not_ready} not ready[/]" if not_ready else "all ready")
    if hardware:
        parts.append(f"[b red]{hardware} AcceleratedHardwareReady=False[/]")
    if launching:
        parts.append(f"{launching} launching")
    parts.append("Karpenter: on" if source.karpenter else "Karpenter: not installed")
    broken = [s for s in statuses.values() if s.error]
    if broken:
        worst = broken[0]
        since = format_age((now - worst.stale_since).total_seconds()) if worst.stale_since else "?"
        parts.append(f"[b yellow]STALE {since}[/]: {worst.error}")
    parts.append(f"as of {now.astimezone(UTC):%H:%M:%S} UTC")
    return " · ".join(parts)


def node_detail(
    node: Node, timeline: list[TimelineEntry], now: datetime, pods: list[Pod] | str | None = None
) -> Group:
    """The detail pane: conditions, the labels that matter, its timeline, its pods."""
    title = Text.assemble(
        (node.name, "bold"),
        f"  {node.pool or 'no pool'} ({node.pool_kind or 'unmanaged'}) · {node.instance_type}"
        f" · {node.instance_id or 'no instance id'}",
    )
    conditions = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("CONDITION", "STATUS", "FOR", "REASON", "MESSAGE"):
        conditions.add_column(column, overflow="fold")
    for cond in node.conditions:
        bad = (cond.type in ("Ready", AHR) and cond.status != "True") or (
            cond.type.endswith("Pressure") and cond.status == "True"
        )
        since = (
            format_age((now - cond.last_transition).total_seconds())
            if cond.last_transition
            else "?"
        )
        conditions.add_row(
            cond.type,
            Text(cond.status, style="bold red" if bad else ""),
            since,
            cond.reason,
            cond.message,
        )
    labels = Table(box=None, padding=(0, 1), show_header=False)
    labels.add_column(style="dim")
    labels.add_column()
    for key in INTERESTING_LABELS:
        if key in node.labels:
            labels.add_row(key, node.labels[key])
    if node.unschedulable:
        labels.add_row("spec.unschedulable", Text("true (cordoned)", style="yellow"))
    for taint in node.taints:
        labels.add_row("taint", str(taint))
    recent = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("AGO", "SOURCE", "WHAT"):
        recent.add_column(column, overflow="fold")
    for entry in timeline[-DETAIL_EVENTS:]:
        warning = "Warning" in entry.text[:20] or entry.text.startswith(
            ("Ready=False", "Ready=Unknown")
        )
        recent.add_row(
            format_age((now - entry.time).total_seconds()),
            entry.source,
            Text(entry.text, style="yellow" if warning else ""),
        )
    parts: list[Any] = [title, Text(""), Text("Conditions", style="bold underline"), conditions]
    parts += [Text(""), Text("Labels that matter", style="bold underline"), labels]
    parts += [
        Text(""),
        Text(
            f"Timeline (last {min(len(timeline), DETAIL_EVENTS)} of {len(timeline)})",
            style="bold underline",
        ),
    ]
    parts.append(
        recent
        if timeline
        else Text("nothing kept by the API server (events expire after ~1 h)", style="dim")
    )
    parts += [Text(""), _pods_part(pods, now)]
    return Group(*parts)


def _pods_part(pods: list[Pod] | str | None, now: datetime) -> Any:
    if pods is None:
        return Text("Pods: loading…", style="dim")
    if isinstance(pods, str):
        return Text(f"Pods: {pods}", style="yellow")
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("NAMESPACE", "POD", "PHASE", "READY", "GPU", "OWNER", "AGE"):
        table.add_column(column, overflow="fold")
    for pod in pods:
        gpu = " ".join(f"{n.removeprefix('nvidia.com/')}:{c}" for n, c in pod.gpu_requests.items())
        table.add_row(
            pod.namespace,
            pod.name,
            Text(pod.phase, style="" if pod.phase in ("Running", "Succeeded") else "yellow"),
            "yes" if pod.ready else Text("no", style="yellow"),
            gpu or "-",
            pod.owner_kind or "-",
            format_age((now - pod.created).total_seconds()) if pod.created else "?",
        )
    gpu_users = sum(1 for p in pods if p.uses_gpu)
    title = Text(f"Pods ({len(pods)}, {gpu_users} using GPUs)", style="bold underline")
    return Group(title, table) if pods else Group(title, Text("none", style="dim"))


def make_app(source: LiveSource, *, read_only: bool = False) -> MigNurseApp:
    """The one way to build the app: the CLI, the demo and the tests all come through here."""
    return MigNurseApp(source, read_only=read_only)
