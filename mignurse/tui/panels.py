"""What the app's panels say: the status line, the findings panel, the bar above each
table, the fleet table and, below it, the highlighted pool's nodes.

`Panels` draws them from what the app holds (`AppState`): the refresh loop calls it after
each refresh, and again when the view, a filter or the screen's width changes. The node
table and the detail pane beside it are placed by refreshloop.py and detailpane.py.
"""

from __future__ import annotations

import contextlib
from typing import Any

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text
from textual import on
from textual.css.query import NoMatches

from mignurse.diagnose.findings import Finding
from mignurse.fleetview import COLUMNS as FLEET_COLUMNS
from mignurse.fleetview import PoolRow
from mignurse.inert import inert_markup as escape
from mignurse.nodeview import short_name
from mignurse.render import SEVERITY_STYLE, deadline_words
from mignurse.session import BuildingSource, FleetSource, finding_now, split_key
from mignurse.tui.appstate import FLEET, NODES, AppState
from mignurse.tui.detail import clock_time, sorted_findings
from mignurse.tui.refresh import (
    BADGE_WORDS,
    NARROW_WIDTH,
    STATUS_STYLE,
    DiagnosisUpdate,
    StatusPart,
    column_label,
    fit_cell,
    fit_status,
    fit_widths,
)
from mignurse.tui.shown import DataTable, Static

FINDINGS_SHOWN = 4
PREVIEW_ROWS = 40  # at most this many of the pool's nodes below the fleet
PREVIEW_COLUMNS = ("!", "NAME", "STATUS", "AHR", "MIG", "CORDONED/TAINTS")
PREVIEW_EVIDENCE = 8  # of the worst node's worst finding, below the fleet
PANE_CHROME = 4  # the pane's padding and its scrollbar
_WORST, _NOTREADY, _REPAIR = (FLEET_COLUMNS.index(c) for c in ("WORST", "NOTREADY", "REPAIR"))
FLEET_DROPS = ("READY", "LIFETIME", "REPL 6H", "KIND")  # dropped first to last when too wide
CLUSTER_STYLE = {  # a cluster's state on its status line
    "connected": "green",
    "opened": "green",
    "credentials expired": "bold red",
    "RBAC denied": "bold red",
    "unreachable": "bold red",
    "timed out": "bold yellow",
    "failed": "bold red",
}


def cluster_lines(source: FleetSource, width: int) -> Text:
    """Each cluster's status line: its context, its state (connected with version and
    clock skew, credentials expired with the login command, RBAC denied, unreachable,
    timed out, stale since T), why."""
    lines = Text()
    for context, state, rest in source.status_lines():
        line = Text()
        line.append(context, style="bold")
        word = state.removesuffix(" (retrying)")
        style = CLUSTER_STYLE.get(word, "bold yellow" if word.startswith("stale") else "")
        line.append(f"  {state}", style=style)
        if rest:  # a cluster that is fine is followed by what it is; one that is not, by why
            line.append(f"  {rest}" if state in ("connected", "opened") else f": {rest}")
        line.truncate(width, overflow="ellipsis")
        if lines:
            lines.append("\n")
        lines.append_text(line)
    return lines


def partial_line(update: DiagnosisUpdate) -> Text:
    """What a partial diagnosis is: "diagnosis partial: 4 of 12 rules over the first 500
    nodes; the other nodes, events still listing: findings may change"."""
    line = Text("diagnosis partial", style="bold yellow")
    line.append(f": {update.rules_done} of {update.rules} rules")
    if update.lacks:
        line.append(f" over {update.lacks}")
    if update.earlier:
        line.append(f"; the others' findings from {update.earlier}")
    line.append(": findings may change", style="yellow")
    return line


class Panels(AppState):
    """The status line, the findings panel, the bars, the fleet table and its preview."""

    def _show_status(self) -> None:
        status = self.own_widget("#status", Static)
        parts = self._status or [StatusPart("connecting…", 0)]
        if isinstance(self.source, BuildingSource):
            parts = [StatusPart(f"[b yellow]{escape(self.source.waiting)}[/]", 0)]
        status.update(fit_status(parts, max(self.size.width - 2, 20)))
        with contextlib.suppress(NoMatches):
            panel = self.own_widget("#clusters", Static)
            if isinstance(self.source, FleetSource):
                panel.update(cluster_lines(self.source, max(self.size.width - 2, 20)))
            panel.display = isinstance(self.source, FleetSource)  # the CSS hides it

    def _show_findings(self) -> None:
        """The findings panel: worst first, the nearest deadline first within a severity,
        a live countdown to each (in a bundle, the moment repair would have fired). Before
        the first whole diagnosis, the findings so far under a line that says how partial
        they are and what they were judged from."""
        panel = self.own_widget("#findings", Static)
        if self._diagnosis_error:
            panel.update(Text(self._diagnosis_error, style="yellow"))
            return
        partial = self._partial if self._diagnosis is None else None
        if self._diagnosis is None and partial is None:
            waiting = "Diagnosing…" if self._listed else "Listing the cluster: findings follow."
            panel.update(Text(waiting, style="dim"))
            return
        findings = self.shown_findings()
        width = max(self.size.width - 2, 40)
        lines = Text()
        shown = FINDINGS_SHOWN
        if partial is not None:
            lines = partial_line(partial)
            lines.truncate(width, overflow="ellipsis")
            shown -= 1  # the panel's height stays
        if not findings:
            none = "No findings so far." if partial is not None else "No findings."
            if lines:
                lines.append("\n")
            lines.append(none, style="dim" if partial is not None else "green")
            panel.update(lines)
            return
        # One line per finding: the countdown goes first so no long summary can push it off.
        for finding in findings[:shown]:
            line = Text()
            line.append(
                f"{finding.severity.upper():<8}", style=SEVERITY_STYLE.get(finding.severity, "")
            )
            if finding.deadline:
                now = finding_now(self.source, finding)  # its own cluster's, or bundle's
                words = deadline_words(finding.deadline, now, as_of=self.judged_at, short=True)
                line.append(f" {words}", style="bold")
            line.append(f" {finding.id}", style="bold")
            line.append(f" {finding.summary}")  # summaries name their pool
            line.truncate(width, overflow="ellipsis")
            if lines:
                lines.append("\n")
            lines.append_text(line)
        if len(findings) > shown:
            more = "f shows every finding" if partial is None else "f, once it is whole"
            lines.append(f"\n… {len(findings) - shown} more: {more}", style="dim")
        # every line is cut to the width, so the panel is as tall as its lines: a countdown
        # that moved leaves the screen's layout as it was
        panel.update(lines, layout=lines.plain.count("\n") + 1 != panel.content_size.height)

    @property
    def judged_at(self) -> str:
        """What the source's now is when it is not the present ("collection": a bundle is
        judged at its collection time, so a deadline is a moment, not a live countdown)."""
        return "collection" if self.source.read_only_reason else ""

    def shown_findings(self) -> list[Finding]:
        """The findings the panel lists, in its order (the pool's own in a pool's view):
        the whole diagnosis's, else those found so far."""
        judged = self._diagnosis or (self._partial.diagnosis if self._partial else None)
        if judged is None:
            return []
        findings = judged.findings
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
        if "TYPE" not in self._columns:
            nodes.append(" · TYPE, AGE in d", style="dim")
        with contextlib.suppress(NoMatches):
            self.own_widget("#fleet-bar", Static).update(fleet)
            self.own_widget("#nodes-bar", Static).update(nodes)

    def _show_preview(self) -> None:
        """Below the fleet: the highlighted pool's nodes, worst first, and what is wrong
        with the worst of them (a small fleet leaves room for it)."""
        pool = self._highlighted_pool() or (self._fleet[0].pool if self._fleet else None)
        preview = self.own_widget("#fleet-preview", Static)
        if pool is None:
            preview.update(Text("No pool with GPU nodes yet.", style="dim"))
            return
        rows = self._pool_rows.get(pool, [])
        nodes = [r for r in rows if r.status_word != "Launching"]
        title = Text.assemble(
            ("Nodes of ", "bold"), (pool, "bold"), f" ({len(nodes)}), worst first: enter opens them"
        )
        held = next((r for r in self._fleet if r.pool == pool), None)
        repair: Text | None = None
        if held is not None and held.repair_words:
            style = "bold yellow" if held.repair.startswith("PAUSED") else ""
            if self.size.width >= NARROW_WIDTH:  # in words: "off by configuration, not …"
                repair = Text(held.repair_words, style=style or "dim")
            else:  # the REPAIR column's words ("repair off (config)") on the title's line
                title.append(f" · repair {held.repair}", style=style)
        words = [
            {
                "!": BADGE_WORDS.get(row.badge, ""),
                "NAME": short_name(split_key(row.name)[1]),
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
        styled = []
        for row, cells in zip(rows, words, strict=False):
            cut = {c: fit_cell(text, widths[c], c) for c, text in cells.items()}
            styled.append(
                {
                    "!": (cut["!"], SEVERITY_STYLE.get(row.badge, "")),
                    "NAME": (cut["NAME"], ""),
                    "STATUS": (cut["STATUS"], STATUS_STYLE.get(row.status_word, "")),
                    "AHR": (cut["AHR"], "bold red" if row.ahr_ok is False else ""),
                    "MIG": (cut["MIG"], ""),
                    "CORDONED/TAINTS": (cut["CORDONED/TAINTS"], ""),
                }
            )
        table = _columns(labels, widths, styled)
        parts: list[Text] = [title, *([repair] if repair is not None else []), table]
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

    @on(DataTable.RowHighlighted, f"#{FLEET}")
    def _pool_highlighted(self, event: DataTable.RowHighlighted) -> None:
        with contextlib.suppress(NoMatches):  # a highlight that lands while the app closes
            self._show_preview()

    # -- the fleet table ---------------------------------------------------------------

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
        keep = [(("CLUSTER", *FLEET_COLUMNS)).index(name) for name in shown]
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
        """CLUSTER's cell first (shown only across clusters: "" in one), then COLUMNS'."""
        cells: list[Any] = list(row.cells())
        context, cells[0] = split_key(row.pool)
        if row.worst is not None:
            cells[_WORST] = Text(cells[_WORST], style=SEVERITY_STYLE.get(row.worst.severity, ""))
        if row.not_ready:
            cells[_NOTREADY] = Text(cells[_NOTREADY], style="bold red")
        if row.repair.startswith("PAUSED"):
            cells[_REPAIR] = Text(_short_repair(row.repair), style="bold yellow")
        return [context, *cells]

    def _fleet_columns(self, cells_by_row: list[list[Any]]) -> tuple[str, ...]:
        """Columns by content: the least needed go when the fleet is wider than the screen
        (READY is NODES less NOTREADY), so REPAIR and KIND stay in view."""
        everything = ("CLUSTER", *FLEET_COLUMNS)
        widths = {
            name: max([len(name), *(Text(str(c[i])).cell_len for c in cells_by_row)]) + 2
            for i, name in enumerate(everything)
        }
        room = self.size.width - 2
        several = isinstance(self.source, FleetSource)
        shown = list(everything if several else FLEET_COLUMNS)
        for name in FLEET_DROPS:
            if sum(widths[c] for c in shown) <= room:
                break
            shown.remove(name)
        return tuple(shown)


def _short_repair(repair: str) -> str:
    """ "PAUSED by alice since 03:02Z" → "PAUSED since 03:02Z" (who is in the preview)."""
    if " since " in repair:
        return "PAUSED since " + repair.split(" since ", 1)[1]
    return repair


def _columns(
    labels: dict[str, str], widths: dict[str, int], rows: list[dict[str, tuple[str, str]]]
) -> Text:
    """Rows of cells already cut to their columns' widths, laid out as a borderless table
    with a bold header and a space either side of each cell (what `rich.table.Table(box=None,
    padding=(0, 1))` draws), as lines of text: a table measures and wraps every cell again at
    each drawing, 40 ms of the UI thread for the preview's 40 rows."""
    out = Text(no_wrap=True, overflow="crop")
    widths = {c: max(widths[c], cell_len(label)) for c, label in labels.items()}  # as a Table
    header = "".join(f" {_padded(label, widths[c])} " for c, label in labels.items())
    out.append(header, style="bold")
    for cells in rows:
        out.append("\n")
        for column in labels:
            text, style = cells[column]
            out.append(" ")
            out.append(_padded(text, widths[column]), style=style or None)
            out.append(" ")
    return out


def _padded(text: str, width: int) -> str:
    return text + " " * max(0, width - cell_len(text))
