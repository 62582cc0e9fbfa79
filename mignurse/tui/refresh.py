"""The app's refresh, off the UI thread: what the tables, the status line and the findings
must show now, as a `RowChanges` for the UI thread to apply; and the diagnosis, in a worker
of its own, each rule's findings sent on as the rule finishes (`DiagnosisUpdate`).

The app takes a `RefreshRequest` (what it shows, which filters, which marks) on the UI
thread, a worker runs `Refresher.compute` on it, and the result comes back as a
`Refreshed` message. Only one refresh is in flight; the next is armed when the last has
been applied or has failed (dolphie's worker manager does the same: charles-001/dolphie
6.14.0, dolphie/Modules/WorkerManager.py, on_worker_state_changed), so refreshes never
pile up and one exception never stops them. Styled cells and the table's order are made
here too: the UI thread only places them.

The diagnosis runs beside the refreshes, never inside one (its rules take a second at
5,000 nodes): from the first page of nodes and the history on, and again at once each time
the input grows (every node listed, then every watch), then every DIAGNOSE_SECONDS. Until
the first diagnosis of a whole input, each rule's result is sent as it finishes, critical
rules first, with what the input still lacked; from then on only whole diagnoses are sent.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.message import Message

from mignurse.cluster.snapshot import Snapshot
from mignurse.cluster.watcher import ResourceStatus
from mignurse.diagnose.engine import Diagnosis, RuleResult, all_rules, combine, diagnose_stream
from mignurse.diagnose.findings import CRITICAL, INFO, SEVERITY_ORDER, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.radar import Blip, radar
from mignurse.fleetview import UNPOOLED, PoolRow, fleet_rows
from mignurse.gcpause import freeze_survivors
from mignurse.inert import inert_markup as escape
from mignurse.model import Node
from mignurse.nodeview import (
    COLUMNS,
    NARROW_DROPS,
    NodeRow,
    bundle_row,
    format_age,
    node_rows,
    short_name,
)
from mignurse.render import SEVERITY_STYLE
from mignurse.session import FleetSource, parts, qualified, split_key
from mignurse.tui.filters import RowFilter
from mignurse.turns import after_ui

DIAGNOSE_SECONDS = 5.0  # rules run in the refresh worker this often
# Across clusters, this many clusters' inputs are read side by side (each its own API server
# and history file) and at most this many are held at once, waiting for the rules
INPUT_READERS = 4
RADAR_HORIZON = timedelta(hours=24)  # the radar screen's widest horizon
# "never" on the monotonic clock: 0.0 is not long ago on a machine booted seconds before
LONG_AGO = float("-inf")
FULL_REFRESH_SECONDS = 5.0  # ages and "for how long" move even when nothing else does
NARROW_WIDTH = 100  # under this, the node table drops TYPE and AGE, as `mignurse nodes` does
STATUS_STYLE = {"Ready": "green", "NotReady": "bold red", "Unknown": "yellow", "Launching": "cyan"}
# "M" shows the marks; "!" carries the worst finding's severity, in words
TABLE_COLUMNS = ("M", "!", *COLUMNS)
NARROW_COLUMNS = tuple(c for c in TABLE_COLUMNS if c not in NARROW_DROPS)
CLUSTER = "CLUSTER"  # the node's cluster, a column only when the app shows several
CELLS = (*TABLE_COLUMNS, CLUSTER)  # what `display_cells` gives, in this order
BADGE_WORDS = {CRITICAL: "CRIT", WARNING: "WARN", INFO: "info"}
BADGE_RANK = {CRITICAL: 0, WARNING: 1, INFO: 2}


# Under LABEL_WIDTH the widest header gives way to its content (cordoned is a taint too).
NARROW_LABELS = {"CORDONED/TAINTS": "TAINTS"}
LABEL_WIDTH = 120
# When a row is wider than the screen, these columns are cut (with "…"), in this order and
# no narrower than this, so that AHR and CORDONED/TAINTS are never behind a side scroll.
SHRINK_ORDER = (
    ("TYPE", 10),
    ("MIG", 14),
    ("GPU", 7),
    ("POOL", 12),
    ("MIG", 11),
    ("AHR", 10),
    ("CORDONED/TAINTS", 10),
    ("TYPE", 6),
    ("POOL", 8),
    ("GPU", 5),
    ("MIG", 8),
    ("STATUS", 8),
    ("AHR", 6),
    ("CORDONED/TAINTS", 8),
    ("NAME", 12),
    (CLUSTER, 10),
)
CELL_PADDING = 2  # the table's padding: one cell each side of every column
SCROLLBAR = 2  # kept free for the table's vertical scrollbar


def column_label(column: str, width: int) -> str:
    """The header the node table shows for `column` on a `width`-cell screen."""
    return NARROW_LABELS.get(column, column) if width < LABEL_WIDTH else column


def fit_widths(content: Mapping[str, int], labels: Mapping[str, str], room: int) -> dict[str, int]:
    """Each column's width: its widest cell (or header), the columns of SHRINK_ORDER cut
    in turn until the row fits in `room` cells."""
    widths = {c: max(content.get(c, 0), cell_len(label)) for c, label in labels.items()}
    total = sum(widths.values()) + CELL_PADDING * len(widths)
    for column, narrowest in SHRINK_ORDER:
        if total <= room:
            break
        if column not in widths:
            continue
        cut = min(widths[column] - max(narrowest, cell_len(labels[column])), total - room)
        if cut > 0:
            widths[column] -= cut
            total -= cut
    return widths


def fit_cell(text: str, width: int, column: str) -> str:
    """`text` cut to `width` cells with "…"; a MIG cell keeps its state word
    ("all-1g.… failed"), a STATUS cell its word ("NotReady 18m" → "NotReady")."""
    if cell_len(text) <= width:
        return text
    if column == "STATUS" and cell_len(text.split(" ", 1)[0]) <= width:
        return text.split(" ", 1)[0]
    if column == "MIG" and " " in text:
        config, state = text.rsplit(" ", 1)
        keep = width - cell_len(state) - 2
        if keep >= 1:
            return f"{config[:keep]}… {state}"
        if cell_len(state) < width:
            return f"…{state}"
    return text[: max(width - 1, 0)] + "…"


def table_columns(width: int, *, one_pool: bool = False, clusters: bool = False) -> tuple[str, ...]:
    """The node table's columns: under 100 cells TYPE and AGE go, as in `mignurse nodes`,
    and POOL too when the table shows one pool (its bar names it), so AHR and
    CORDONED/TAINTS fit in 80. `clusters`: several are shown, CLUSTER comes after the
    badge."""
    chosen = (
        TABLE_COLUMNS
        if width >= NARROW_WIDTH
        else tuple(c for c in NARROW_COLUMNS if not (one_pool and c == "POOL"))
    )
    if clusters:
        return (*chosen[:2], CLUSTER, *chosen[2:])
    return chosen


@dataclass(frozen=True)
class StatusPart:
    """One piece of the status line; under a narrow terminal the highest `rank` goes first."""

    markup: str
    rank: int  # 0: never dropped (a stale view, a list still loading)


@dataclass(frozen=True)
class RefreshRequest:
    """What the UI shows when the refresh starts (taken on the UI thread)."""

    epoch: int
    view: str
    pool: str | None
    node_filter: RowFilter | None
    fleet_filter: RowFilter | None
    marks: frozenset[str]
    shown: Mapping[str, NodeRow]  # what the node table holds now, by node name
    order: tuple[str, ...]  # the node table's rows, top to bottom
    columns: tuple[str, ...]  # the node table's columns
    nodes_view: bool  # whether the node table is on screen (else it is left as it is)
    force: bool = False
    width: int = 200  # the screen's width in cells
    visible_rows: int = 0  # rows the node table shows without scrolling
    widths: Mapping[str, int] = field(default_factory=dict)  # the node table's column widths


@dataclass
class RowChanges:
    """What the UI thread must do to the tables; computed off the UI thread."""

    epoch: int = 0  # which table contents these changes were computed against
    added: list[tuple[NodeRow, tuple[Any, ...]]] = field(default_factory=list)  # row, cells
    changed: list[tuple[NodeRow, dict[str, Any]]] = field(default_factory=list)  # column → cell
    removed: list[str] = field(default_factory=list)
    order: tuple[str, ...] | None = None  # the node table's order, when it must change
    pools: list[str] = field(default_factory=list)
    fleet: list[PoolRow] | None = None  # the fleet view's rows, when they were recomputed
    pool_rows: dict[str, list[NodeRow]] | None = None  # each pool's rows, worst first
    gpu_names: list[str] | None = None  # every GPU node (the palette offers these)
    status: list[StatusPart] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    widths: dict[str, int] | None = None  # the node table's column widths (cells cut to fit)
    listed: bool = False  # every watch has listed once: counts and "all ready" are true
    # the latest whole diagnosis: these rows carry its badges and the fleet its ranks
    diagnosis: Diagnosis | None = None
    gone_marks: list[str] = field(default_factory=list)  # marked nodes the cluster no longer has


class Refreshed(Message):
    """A refresh worker's result."""

    def __init__(self, changes: RowChanges) -> None:
        super().__init__()
        self.changes = changes


@dataclass(frozen=True)
class DiagnosisUpdate:
    """The findings so far: whole once every rule has run over a whole input."""

    diagnosis: Diagnosis
    rules_done: int  # of this run's rules, finished
    rules: int
    lacks: str = ""  # what this run's input lacked ("" whole): the findings may change
    earlier: str = ""  # what the rules not run yet were last judged from (their findings)

    @property
    def whole(self) -> bool:
        return self.rules_done == self.rules and not self.lacks


class Diagnosed(Message):
    """A diagnosis worker's update (a rule finished, or the whole diagnosis)."""

    def __init__(self, update: DiagnosisUpdate, refresher: Refresher) -> None:
        super().__init__()
        self.update = update
        self.refresher = refresher  # whose source it judged: one switched away from is dropped


def styled_cells(
    row: NodeRow,
    marks: frozenset[str],
    columns: tuple[str, ...],
    widths: Mapping[str, int] | None = None,
) -> tuple[Any, ...]:
    """The row's cells for the node table's columns, coloured by meaning (and in words),
    cut to `widths`."""
    plain = fitted_cells(row, marks, widths)
    styled: dict[str, Any] = dict(plain)
    styled["!"] = Text(plain["!"], style=SEVERITY_STYLE.get(row.badge, ""))
    styled["STATUS"] = Text(plain["STATUS"], style=STATUS_STYLE.get(row.status_word, ""))
    if row.ahr_ok is False:
        styled["AHR"] = Text(plain["AHR"], style="bold red")
    return tuple(styled[c] for c in columns)


def fitted_cells(
    row: NodeRow, marks: frozenset[str], widths: Mapping[str, int] | None = None
) -> dict[str, str]:
    """The row's words by column, each cut to its column's width."""
    plain = dict(zip(CELLS, display_cells(row, marks), strict=True))
    if widths:
        for column, width in widths.items():
            plain[column] = fit_cell(plain[column], width, column)
    return plain


def display_cells(row: NodeRow, marks: frozenset[str]) -> tuple[str, ...]:
    """The row in CELLS order as words (the table shows the short node name; the
    detail pane has the full one). A row of a view across clusters (its keys
    "CONTEXT/NAME") shows its name and pool as the cluster has them, its context under
    CLUSTER."""
    cells = row.cells(shorten=True)
    context, name = split_key(row.name)
    if context:
        pool = split_key(row.pool)[1]
        cells = (short_name(name), "-" if pool == UNPOOLED else pool, *cells[2:])
    return ("*" if row.name in marks else "", BADGE_WORDS.get(row.badge, ""), *cells, context)


def qualified_row(prefix: str, row: NodeRow) -> NodeRow:
    """A cluster's row in a view across clusters: its name and pool keyed by its context."""
    return dataclasses.replace(
        row, name=qualified(prefix, row.name), pool=qualified(prefix, row.pool or UNPOOLED)
    )


def qualified_finding(prefix: str, finding: Finding, shift: timedelta) -> Finding:
    """A cluster's finding in a view across clusters: its nodes and pool keyed by the
    context, the summary naming it, the deadline moved onto the app's clock (`shift`: the
    app's now less the cluster's, so a countdown reads that cluster's own time)."""
    return dataclasses.replace(
        finding,
        nodes=tuple(qualified(prefix, n) for n in finding.nodes),
        nodepool=qualified(prefix, finding.nodepool) if finding.nodepool else "",
        summary=f"{prefix}: {finding.summary}",
        deadline=finding.deadline + shift if finding.deadline else None,
    )


def local_findings(prefix: str, findings: list[Finding]) -> list[Finding]:
    """The findings about one cluster of a view across clusters, as that cluster has them
    (what a runbook run there reads); a one-cluster view's as they are."""
    if not prefix:
        return findings
    mine = []
    for f in findings:
        nodes = [split_key(n) for n in f.nodes]
        if not any(c == prefix for c, _ in nodes) and split_key(f.nodepool)[0] != prefix:
            continue
        mine.append(
            dataclasses.replace(
                f,
                nodes=tuple(n for c, n in nodes if c == prefix),
                nodepool=split_key(f.nodepool)[1],
                summary=f.summary.removeprefix(f"{prefix}: "),
            )
        )
    return mine


def sort_key(row: NodeRow) -> tuple[str, int, str]:
    """Pool, then the worst finding first (CRIT, WARN, info, none), then name: the node to
    look at is at the top of its pool."""
    return (row.pool, BADGE_RANK.get(row.badge, 3), row.name)


def badges(findings: list[Finding]) -> dict[str, str]:
    """Node → the severity of the worst finding about it."""
    worst: dict[str, str] = {}
    for finding in findings:
        for node in finding.nodes:
            current = worst.get(node)
            if current is None or SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[current]:
                worst[node] = finding.severity
    return worst


@dataclass
class _Judged:
    """One cluster's latest judgement, across clusters (its keys qualified by its context)."""

    stage: int  # the cluster's judge_stage() it was judged at
    at: float  # when (monotonic); LONG_AGO to judge it again at once
    results: list[RuleResult]
    rows: list[PoolRow]
    blips: list[Blip]
    lacks: str  # what its input lacked, named by its context ("" whole)


def _stepping_aside(results: Iterator[RuleResult]) -> Iterator[RuleResult]:
    """Each rule's result; before each rule runs (the first too: a diagnosis starts as a
    refresh ends, before the frame that shows it is drawn), the UI thread's turn (`turns`)."""
    while True:
        after_ui()
        result = next(results, None)
        if result is None:
            return
        yield result


class Refresher:
    """Runs on the refresh worker only (one at a time): the source's state → RowChanges.
    It remembers what the next refresh needs (the last diagnosis's badges and pool rows)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        # From the last whole diagnosis (written by the diagnosis worker, read by refreshes)
        self.badges: dict[str, str] = {}
        self.fleet_base: list[PoolRow] = []  # counts come fresh
        self.whole: Diagnosis | None = None  # the diagnosis they come from
        # every GPU node whose repair acts within a day, soonest first (the `D` screen)
        self.radar: list[Blip] = []
        self.last_full = LONG_AGO
        self.last_diagnosis = LONG_AGO
        self.judged_stage = -1  # the source's judge_stage() the last diagnosis ran at
        self.whole_sent = False  # a whole diagnosis has been sent: no more partial ones
        # (cluster prefix, rule) → its result, its input's lack
        self._results: dict[tuple[str, str], tuple[RuleResult, str]] = {}
        self.statuses: dict[str, ResourceStatus] = {}  # written by the UI thread
        # each cluster's rows as last made, by node name, with what they were made from
        self._rows: dict[str, dict[str, tuple[Any, ...]]] = {}
        # across clusters: each cluster's latest judgement (written by the diagnosis worker)
        self._clusters: dict[str, _Judged] = {}

    def diagnose_soon(self) -> None:
        self.last_diagnosis = LONG_AGO
        for judged in list(self._clusters.values()):
            judged.at = LONG_AGO

    def diagnosis_due(self) -> bool:
        """Whether to diagnose now: the input has grown since the last diagnosis, or
        DIAGNOSE_SECONDS have passed (never over a cluster with nothing listed yet); across
        clusters, whether that holds for one of them."""
        members = parts(self.source)
        if any(prefix for prefix, _ in members):
            return bool(self._due(members))
        stage = self.source.judge_stage()
        if stage <= 0:
            return False
        return (
            stage > self.judged_stage or time.monotonic() - self.last_diagnosis >= DIAGNOSE_SECONDS
        )

    def diagnose(self, send: Callable[[DiagnosisUpdate], None]) -> None:
        """One diagnosis (on the diagnosis worker only): each rule's update sent as it
        finishes until a whole diagnosis has been sent, then only the whole one. A whole
        diagnosis also gives the badges and the fleet's rows the next refresh shows. Across
        clusters (keys qualified by their context), `_diagnose_clusters`."""
        members = parts(self.source)  # one source: itself, its keys as they are
        if any(prefix for prefix, _ in members):
            self._diagnose_clusters(members, send)
            return
        self.judged_stage = self.source.judge_stage()
        self.last_diagnosis = time.monotonic()
        rules = all_rules()
        total = len(rules)
        after_ui()  # the input is built from the whole state: not while the UI thread draws
        inp, lacks = self.source.diagnosis_input()
        own: list[RuleResult] = []
        for result in _stepping_aside(diagnose_stream(inp, rules=rules)):
            own.append(result)
            self._results[("", result.rule)] = (result, lacks)
            if not self.whole_sent and len(own) < total:
                send(self._update(len(own), total, lacks))
        diagnosis = combine(own)
        update = DiagnosisUpdate(diagnosis, total, total, lacks)
        if update.whole:
            after_ui()
            self.fleet_base = fleet_rows(inp, diagnosis)
            self.badges = badges(diagnosis.findings)
            after_ui()
            self.radar = radar(inp, diagnosis.findings, RADAR_HORIZON)
            self.whole = diagnosis
            self.whole_sent = True
        del inp, own  # its indexes go before the freeze
        freeze_survivors()  # what the state gained since, out of the UI thread's collections
        send(update)

    def _due(self, members: list[tuple[str, Any]]) -> list[tuple[str, Any, int]]:
        """The clusters to judge now, with the stage each has reached: those that have
        listed more since they were last judged, or were judged DIAGNOSE_SECONDS ago; never
        judged first, each group in the source's order."""
        now = time.monotonic()
        fresh: list[tuple[str, Any, int]] = []
        again: list[tuple[str, Any, int]] = []
        for prefix, part in members:
            stage = part.judge_stage()
            if stage <= 0:
                continue
            judged = self._clusters.get(prefix)
            if judged is None:
                fresh.append((prefix, part, stage))
            elif stage > judged.stage or now - judged.at >= DIAGNOSE_SECONDS:
                again.append((prefix, part, stage))
        return fresh + again

    def _diagnose_clusters(
        self, members: list[tuple[str, Any]], send: Callable[[DiagnosisUpdate], None]
    ) -> None:
        """Across clusters: only the clusters that are due are judged, each over its own
        input by its own clock, and every cluster's latest judgement is merged and sent as
        each one ends. The inputs are read side by side (a cluster's API server answering
        slowly, or a large history, never holds the others back), and a cluster whose input
        cannot be read keeps its last judgement and is named in what the diagnosis lacks."""
        due = self._due(members)
        if not due:
            return
        rules = all_rules()
        app_now = self.source.now()
        failed: dict[str, str] = {}
        held = threading.Semaphore(INPUT_READERS)  # inputs read and not judged yet
        ended = threading.Event()  # the judging ended early: the readers waiting read nothing

        def read(part: Any) -> tuple[DiagnosisInput, str]:
            held.acquire()
            if ended.is_set():
                raise CancelledError
            try:
                inp: tuple[DiagnosisInput, str] = part.diagnosis_input()
                return inp
            except BaseException:
                held.release()
                raise

        with ThreadPoolExecutor(
            max_workers=min(INPUT_READERS, len(due)), thread_name_prefix="mignurse-input"
        ) as pool:
            futures: dict[Future[tuple[DiagnosisInput, str]], tuple[str, Any, int]] = {
                pool.submit(read, part): (prefix, part, stage) for prefix, part, stage in due
            }
            try:
                for future in as_completed(futures):
                    prefix, part, stage = futures[future]
                    try:
                        inp, lacks = future.result()
                    except Exception as exc:  # noqa: BLE001 - that cluster's, said in its lack
                        failed[prefix] = f"{prefix}: not judged: {type(exc).__name__}: {exc}"
                        self._publish(members, len(rules), failed, send)
                        continue
                    try:
                        self._clusters[prefix] = self._judge(
                            prefix, part, stage, inp, lacks, rules, app_now
                        )
                    finally:
                        held.release()
                    del inp
                    self._publish(members, len(rules), failed, send)
            finally:  # (a judging that raised: no reader is left waiting on `held`)
                ended.set()
                for _ in due:
                    held.release()

    def _judge(
        self,
        prefix: str,
        part: Any,
        stage: int,
        inp: DiagnosisInput,
        lacks: str,
        rules: list[tuple[str, Any]],
        app_now: datetime,
    ) -> _Judged:
        """One cluster's rules over its input: its findings, fleet rows and radar blips with
        keys qualified by its context; a live cluster's times moved onto the app's clock, so
        a countdown reads its own time (a bundle's deadlines are moments then: no shift)."""
        shift = timedelta(0) if part.read_only_reason else app_now - inp.now
        own = list(_stepping_aside(diagnose_stream(inp, rules=rules)))
        mine = combine(own)
        return _Judged(
            stage=stage,
            at=time.monotonic(),
            results=[_qualified_result(prefix, r, shift) for r in own],
            rows=[_qualified_pool(prefix, r, shift) for r in fleet_rows(inp, mine)],
            blips=[
                _qualified_blip(prefix, b, shift) for b in radar(inp, mine.findings, RADAR_HORIZON)
            ],
            lacks=f"{prefix}: {lacks}" if lacks else "",
        )

    def _publish(
        self,
        members: list[tuple[str, Any]],
        rules: int,
        failed: dict[str, str],
        send: Callable[[DiagnosisUpdate], None],
    ) -> None:
        """Every cluster's latest judgement merged, worst (soonest) first across them with
        each one's own order kept, made what the next refresh shows, and sent. It becomes the
        app's diagnosis (`whole`) only once no cluster is still to be judged for the first
        time: until then it is sent as a partial one, said as such, and the app does not
        show it as what every cluster holds. A cluster whose input failed is named in what
        it lacks and holds nothing back."""
        results: list[RuleResult] = []
        fleet: list[PoolRow] = []
        blips: list[Blip] = []
        lacking: list[str] = []
        judged = 0
        pending = False
        for prefix, part in members:
            mine = self._clusters.get(prefix)
            if prefix in failed:
                lacking.append(failed[prefix])
            elif mine is None:
                pending = True
                listing = not part.judge_stage()
                lacking.append(f"{prefix}: {'still listing' if listing else 'being judged'}")
            elif mine.lacks:
                lacking.append(mine.lacks)
            if mine is None:
                continue
            judged += 1
            results += mine.results
            fleet += mine.rows
            blips += mine.blips
        fleet.sort(key=lambda r: r.rank)
        blips.sort(key=lambda b: b.due)
        diagnosis = combine(results)
        self.fleet_base = fleet
        self.badges = badges(diagnosis.findings)
        self.radar = blips
        if not pending:
            self.whole = diagnosis
            self.whole_sent = True
        freeze_survivors()  # what the state gained since, out of the UI thread's collections
        send(DiagnosisUpdate(diagnosis, judged * rules, len(members) * rules, "; ".join(lacking)))

    def _update(self, rules_done: int, rules: int, lacks: str) -> DiagnosisUpdate:
        """The findings of every rule's latest result: this run's for those done, an
        earlier run's (over a smaller input) for the others."""
        earlier = next((lack for _, lack in self._results.values() if lack != lacks), "")
        diagnosis = combine(result for result, _ in self._results.values())
        return DiagnosisUpdate(diagnosis, rules_done, rules, lacks, earlier)

    def compute(self, request: RefreshRequest) -> RowChanges:
        """The changes to show, from every cluster the source holds (one: itself), each
        cluster's rows aged by its own clock."""
        source = self.source
        dirty, other = source.state.take_changes()
        monotonic = time.monotonic()
        full = request.force or monotonic - self.last_full >= FULL_REFRESH_SECONDS
        changes = RowChanges(epoch=request.epoch, dirty=dirty, diagnosis=self.whole)
        if not (dirty or other or full or api_busy(source)):  # a Retry-After counts down
            return changes
        if full:  # every row made again (`node_rows`): ages and "for how long" move
            self.last_full = monotonic
        now = source.now()
        progress = fleet_progress(source)
        listed = source.listed() if progress is None else progress.whole
        changes.listed = listed
        every: list[NodeRow] = []
        keyed: dict[str, Node] = {}  # across clusters, by key: the label filters, gone marks
        nodes: Mapping[str, Node] = keyed
        for prefix, part in parts(source):
            part_now = part.now() if prefix else now
            if part.synced():
                part.auto_tick()
            snapshot: Snapshot | None = None if part.listed() else part.early_snapshot()
            if snapshot is None:
                snapshot = part.state.snapshot(taken_at=part_now)
            kept = self._rows.setdefault(prefix, {})
            part_rows = [
                *node_rows(snapshot, part_now, kept=kept, fresh=full),
                *(
                    bundle_row(e.node, layout=e.layout, instance_id=e.instance_id)
                    for e in part.evidence_only()
                ),
            ]
            if prefix:
                every += [qualified_row(prefix, r) for r in part_rows]
                keyed.update((qualified(prefix, k), n) for k, n in snapshot.nodes.items())
            else:
                every += part_rows
                nodes = snapshot.nodes
            del snapshot, part_rows
        rows = [
            dataclasses.replace(r, badge=self.badges[r.name]) if r.name in self.badges else r
            for r in every
        ]
        del every
        changes.pools = sorted({r.pool for r in rows if r.pool})
        changes.gpu_names = sorted(r.name for r in rows if r.status_word != "Launching")
        changes.fleet = fleet_now(self.fleet_base, rows, _pool_filter(request.fleet_filter, nodes))
        by_pool: dict[str, list[NodeRow]] = {}
        for row in sorted(rows, key=sort_key):
            by_pool.setdefault(row.pool or UNPOOLED, []).append(row)
        changes.pool_rows = by_pool
        if listed:  # a partial list proves nothing gone
            changes.gone_marks = sorted(m for m in request.marks if m not in nodes)
        marked = len(request.marks) - len(changes.gone_marks)
        changes.status = status_parts(
            rows, source, self.statuses, now, marked, listed=listed, fleet=progress
        )
        if request.nodes_view:
            self._node_table(request, rows, nodes, changes)
        del rows, nodes, by_pool
        # This refresh's rows and what the watches and the last frames built, out of the
        # collector's walks: otherwise they pile up in its oldest generation, whose passes
        # over them stalled the event loop (benchmarks/bench_app.py)
        freeze_survivors()
        return changes

    def _node_table(
        self,
        request: RefreshRequest,
        rows: list[NodeRow],
        nodes: Mapping[str, Node],
        changes: RowChanges,
    ) -> None:
        shown = [r for r in rows if request.pool is None or r.pool == request.pool]
        node_filter = request.node_filter
        if node_filter is not None:
            shown = [
                r
                for r in shown
                if node_filter.matches(r.name, nodes[r.name].labels if r.name in nodes else {})
            ]
        marks, columns = request.marks, request.columns
        fresh = {r.name: r for r in shown}
        scrollbar = len(shown) > request.visible_rows
        widths = column_widths(shown, marks, columns, request.width, scrollbar=scrollbar)
        changes.widths = widths
        regrown = widths != request.widths  # a column got wider or narrower: cuts move
        for name, row in fresh.items():
            old = request.shown.get(name)
            if old is None:
                changes.added.append((row, styled_cells(row, marks, columns, widths)))
            elif old != row or regrown:
                before = fitted_cells(old, marks, request.widths)
                after = fitted_cells(row, marks, widths)
                moved_columns = [c for c in columns if before[c] != after[c]]
                if old == row and not moved_columns:
                    continue
                cells = dict(zip(columns, styled_cells(row, marks, columns, widths), strict=True))
                # the UI keeps the new row even when no cell it shows has changed
                changes.changed.append((row, {c: cells[c] for c in moved_columns}))
        changes.removed = [name for name in request.shown if name not in fresh]
        order = tuple(r.name for r in sorted(shown, key=sort_key))
        if order != request.order:
            changes.order = order


def column_widths(
    rows: list[NodeRow],
    marks: frozenset[str],
    columns: tuple[str, ...],
    width: int,
    *,
    scrollbar: bool = True,
) -> dict[str, int]:
    """The node table's column widths for these rows on a `width`-cell screen (measured
    here, off the UI thread; cells wider than their column are cut)."""
    content = dict.fromkeys(columns, 0)
    for row in rows:
        cells = dict(zip(CELLS, display_cells(row, marks), strict=True))
        for column in columns:
            content[column] = max(content[column], cell_len(cells[column]))
    labels = {c: column_label(c, width) for c in columns}
    return fit_widths(content, labels, width - (SCROLLBAR if scrollbar else 0))


def _pool_filter(
    row_filter: RowFilter | None, nodes: Mapping[str, Node]
) -> Callable[[str], bool] | None:
    """The fleet's filter: a regex on the pool's name (its key: across clusters the
    context's name too); a label selector keeps the pools with a node that matches it."""
    if row_filter is None:
        return None
    if not row_filter.needs_labels:
        return row_filter.matches
    pools = {
        qualified(split_key(key)[0], node.pool or UNPOOLED)
        for key, node in nodes.items()
        if row_filter.matches(node.name, node.labels)
    }
    return pools.__contains__


def _qualified_result(prefix: str, result: RuleResult, shift: timedelta) -> RuleResult:
    return dataclasses.replace(
        result,
        findings=[qualified_finding(prefix, f, shift) for f in result.findings],
        error=f"{prefix}: {result.error}" if result.error else "",
    )


def _qualified_pool(prefix: str, row: PoolRow, shift: timedelta) -> PoolRow:
    worst = row.worst
    return dataclasses.replace(
        row,
        pool=qualified(prefix, row.pool),
        worst=qualified_finding(prefix, worst, shift) if worst is not None else None,
    )


def _qualified_blip(prefix: str, blip: Blip, shift: timedelta) -> Blip:
    finding = blip.finding
    return dataclasses.replace(
        blip,
        node=qualified(prefix, blip.node),
        pool=qualified(prefix, blip.pool) if blip.pool else "",
        due=blip.due + shift,
        since=blip.since + shift if blip.since else None,
        finding=qualified_finding(prefix, finding, shift) if finding is not None else None,
    )


def fleet_now(
    base: list[PoolRow], rows: list[NodeRow], keep: Callable[[str], bool] | None = None
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
    if keep is not None:
        out = [r for r in out if keep(r.pool)]
    order = {r.pool: i for i, r in enumerate(base)}
    out.sort(key=lambda r: (r.rank, order.get(r.pool, len(order)), -r.not_ready, r.pool))
    return out


@dataclass(frozen=True)
class FleetProgress:
    """How far the clusters of a several-cluster view have come: the status line claims
    nothing ("all ready", "no Karpenter") of a cluster whose nodes are not listed yet."""

    clusters: int
    connecting: int  # their start has not ended yet
    listing: int  # connected, their nodes not listed in full yet
    listed: int  # connected, every node listed
    # the rest failed to start: their own status lines say why, and they are retried

    @property
    def pending(self) -> int:
        return self.connecting + self.listing

    @property
    def whole(self) -> bool:
        """Whether every cluster that can be read has listed its nodes (and one has)."""
        return self.listed > 0 and not self.pending


def fleet_progress(source: Any) -> FleetProgress | None:
    """For several clusters, how many are connecting, listing and listed; None for one
    cluster or one bundle (its own `listed` says it)."""
    if not isinstance(source, FleetSource):
        return None
    connecting = listing = listed = 0
    for member in list(source.members):
        part = member.source
        if part is None:
            connecting += not member.cluster.status  # else it failed, and says so
        elif part.listed():
            listed += 1
        else:
            listing += 1
    return FleetProgress(len(source.members), connecting, listing, listed)


def _clusters(count: int) -> str:
    return f"{count} cluster{'' if count == 1 else 's'}"


def status_parts(
    rows: list[NodeRow],
    source: Any,
    statuses: Mapping[str, ResourceStatus],
    now: datetime,
    marked: int,
    *,
    listed: bool,
    fleet: FleetProgress | None = None,
) -> list[StatusPart]:
    """The status line, most urgent first: a stale view or a list still loading, then the
    counts; where the data comes from after. Across clusters (`fleet`), the counts come
    once one cluster has listed its nodes, and say how many clusters are still to come."""
    nodes = [r for r in rows if r.status_word != "Launching"]
    not_ready = sum(1 for r in nodes if r.status_word != "Ready")
    hardware = sum(1 for r in nodes if r.ahr_ok is False)
    launching = len(rows) - len(nodes)
    parts: list[StatusPart] = []
    busy = api_busy(source)
    if busy:
        parts.append(StatusPart(f"[b yellow]{escape(busy)}[/]", 0))
    broken = [s for s in statuses.values() if s.error]
    if broken:
        worst = broken[0]
        since = format_age((now - worst.stale_since).total_seconds()) if worst.stale_since else "?"
        parts.append(StatusPart(f"[b yellow]STALE {since}[/]: {worst.error}", 0))
    waiting = getattr(source, "waiting", "")  # a simulated cluster still being built
    so_far = f"{len(nodes)} GPU nodes so far" if nodes else "no node yet"
    if waiting:
        parts.append(StatusPart(f"[b yellow]{escape(waiting)}[/]", 0))
    elif fleet is not None and not fleet.whole:
        # Counts over the clusters listed so far are not the fleet's: never "all ready".
        if fleet.listed:
            waited = f"{fleet.pending} of {_clusters(fleet.clusters)} still loading…"
        elif fleet.listing:
            waited = f"listing {_clusters(fleet.listing)}…"
        elif fleet.connecting:
            waited = f"connecting to {_clusters(fleet.connecting)}…"
        else:
            waited = "no cluster connected yet"
        shown = f"[b yellow]{waited}[/]"
        read = fleet.listed or fleet.listing  # a cluster is connected: its nodes are coming
        parts.append(StatusPart(f"{shown} {so_far}" if read else shown, 0))
        if not_ready:
            parts.append(StatusPart(f"[b red]{not_ready} not ready[/]", 1))
    elif not listed:
        # A partial list proves nothing is fine: say what is known, never "all ready".
        parts.append(StatusPart(f"[b yellow]listing the cluster…[/] {so_far}", 0))
        if not_ready:
            parts.append(StatusPart(f"[b red]{not_ready} not ready[/]", 1))
    else:
        parts.append(StatusPart(f"{len(nodes)} GPU nodes", 1))
        parts.append(
            StatusPart(f"[b red]{not_ready} not ready[/]" if not_ready else "all ready", 0)
        )
    if hardware:
        parts.append(StatusPart(f"[b red]{hardware} AHR=False[/]", 0))
    if launching:
        parts.append(StatusPart(f"{launching} launching", 2))
    if marked:
        parts.append(StatusPart(f"[b]{marked} marked[/]", 0))
    if source.simulated:
        parts.append(StatusPart(f"[b reverse] SIMULATED [/] {source.simulated}", 3))
    if source.read_only_reason:
        # Never dropped: every time on screen (ages, deadlines) reads as of this moment.
        parts.append(
            StatusPart(f"[b reverse] BUNDLE [/] as of {now.astimezone(UTC):%Y-%m-%d %H:%MZ}", 0)
        )
    if source.karpenter:
        parts.append(StatusPart("Karpenter on", 2))
    elif fleet is None or fleet.whole:  # a cluster still to come may run it
        parts.append(StatusPart("no Karpenter", 2))
    if not source.read_only_reason:
        parts.append(StatusPart(f"as of {now.astimezone(UTC):%H:%M:%S} UTC", 2))
    return parts


def api_busy(source: Any) -> str:
    """While a request waits out a Retry-After: "API server busy (429 …): retrying in 3 s"."""
    client = getattr(source, "client", None)
    busy = getattr(client, "busy", None)
    return str(busy()) if callable(busy) else ""


def fit_status(parts: list[StatusPart], width: int) -> Text:
    """The parts that fit in `width` cells, the least urgent dropped first, in their order."""
    kept = list(parts)
    sep = " · "

    def text(chosen: list[StatusPart]) -> Text:
        line = Text()
        for i, part in enumerate(chosen):
            if i:
                line.append(sep)
            line.append_text(Text.from_markup(part.markup))
        return line

    line = text(kept)
    while line.cell_len > width and any(p.rank for p in kept):
        drop = max(range(len(kept)), key=lambda i: (kept[i].rank, i))
        kept.pop(drop)
        line = text(kept)
    line.truncate(width, overflow="ellipsis")
    return line
