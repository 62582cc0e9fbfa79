"""The node detail pane: conditions, the labels that matter, the timeline, MIG state and
collected evidence (from a bundle) with the journal lines the findings cite, the node's
pods, and the runbooks that fit it. `d` shows the same in full (every timeline entry,
every label) in a pager."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.text import Text

from mignurse.diagnose.findings import SEVERITY_ORDER, Finding
from mignurse.diagnose.inputs import NodeEvidence
from mignurse.diagnose.timeline import TimelineEntry
from mignurse.inert import inert
from mignurse.model import Node, Pod
from mignurse.nodeview import AHR, format_age
from mignurse.render import SEVERITY_STYLE

DETAIL_EVENTS = 15
CITED_LINES_SHOWN = 6  # per journal in the pane; `l` shows them all, in place
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


def node_detail(
    node: Node,
    timeline: list[TimelineEntry],
    now: datetime,
    pods: list[Pod] | str | None = None,
    *,
    findings: Sequence[Finding] = (),
    evidence: NodeEvidence | None = None,
    runbooks: Sequence[str] = (),
    full: bool = False,
) -> Group:
    """The detail pane: findings, conditions, labels, timeline, evidence, pods, runbooks.
    `full` (the `d` pager): every label and timeline entry."""
    age = format_age((now - node.created).total_seconds()) if node.created else "?"
    title = Text.assemble(
        (node.name, "bold"),
        f"  {node.pool or 'no pool'} ({node.pool_kind or 'unmanaged'}) · {node.instance_type}"
        f" · {node.instance_id or 'no instance id'} · age {age}",
    )
    condition_rows: list[list[Cell]] = []
    for cond in node.conditions:
        bad = (cond.type in ("Ready", AHR) and cond.status != "True") or (
            cond.type.endswith("Pressure") and cond.status == "True"
        )
        since = (
            format_age((now - cond.last_transition).total_seconds())
            if cond.last_transition
            else "?"
        )
        condition_rows.append(
            [
                cond.type,
                (cond.status, "bold red" if bad else ""),
                since,
                cond.reason,
                cond.message,
            ]
        )
    conditions = ColumnLines(("CONDITION", "STATUS", "FOR", "REASON", "MESSAGE"), condition_rows)
    label_rows: list[list[Cell]] = []
    for key in sorted(node.labels) if full else INTERESTING_LABELS:
        if key in node.labels:
            label_rows.append([(key, "dim"), node.labels[key]])
    if node.unschedulable:
        label_rows.append([("spec.unschedulable", "dim"), ("true (cordoned)", "yellow")])
    for taint in node.taints:
        label_rows.append([("taint", "dim"), str(taint)])
    labels = ColumnLines(None, label_rows)
    parts: list[Any] = [title, *_findings_part(findings)]
    if runbooks:
        parts.append(Text(f"Runbooks that fit (R): {', '.join(runbooks)}", style="cyan"))
    parts += [Text(""), Text("Conditions", style="bold underline"), conditions]
    heading = "Labels" if full else "Labels that matter"
    parts += [Text(""), Text(heading, style="bold underline"), labels]
    shown = len(timeline) if full else DETAIL_EVENTS
    parts += [Text(""), _timeline_heading(timeline, shown)]
    parts.append(
        _timeline_table(timeline, now, shown)
        if timeline
        else Text("nothing kept by the API server (events expire after ~1 h)", style="dim")
    )
    if evidence is not None:
        parts += [Text(""), *_evidence_part(evidence, findings)]
    parts += [Text(""), _pods_part(pods, now)]
    return Group(*parts)


def evidence_detail(
    evidence: NodeEvidence,
    timeline: list[TimelineEntry],
    now: datetime,
    *,
    findings: Sequence[Finding] = (),
    full: bool = False,
) -> Group:
    """A node known only from another tool's bundle: its findings, journal timeline and files."""
    title = Text.assemble(
        (evidence.node, "bold"),
        f"  {evidence.layout} bundle · {evidence.instance_id or 'no instance id'}"
        " · no Node object: conditions, labels and events unknown",
    )
    parts: list[Any] = [title, *_findings_part(findings), Text("")]
    shown = len(timeline) if full else DETAIL_EVENTS
    parts.append(_timeline_heading(timeline, shown))
    parts.append(
        _timeline_table(timeline, now, shown) if timeline else Text("no journal lines", style="dim")
    )
    parts += [Text(""), *_evidence_part(evidence, findings)]
    return Group(*parts)


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    """Worst first; within a severity, the nearest deadline first (one without a deadline
    after those with one), then as the rules ranked them."""
    far = datetime.max.replace(tzinfo=UTC)
    return [
        f
        for _i, f in sorted(
            enumerate(findings),
            key=lambda item: (
                SEVERITY_ORDER.get(item[1].severity, 9),
                item[1].deadline or far,
                item[0],
            ),
        )
    ]


def _findings_part(findings: Sequence[Finding]) -> list[Text]:
    return [
        Text.assemble(
            (f"{finding.severity.upper()} ", SEVERITY_STYLE.get(finding.severity, "")),
            (finding.id, "bold"),
            f" {finding.summary}",
        )
        for finding in sorted_findings(findings)
    ]


def since_words(moment: datetime, now: datetime) -> str:
    """How long ago, to the second under an hour (rows minutes apart must read apart)."""
    seconds = max(int((now - moment).total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return format_age(seconds)


def clock_time(moment: datetime, now: datetime) -> str:
    """The time of day in UTC; the date too when it is not today's."""
    utc = moment.astimezone(UTC)
    if utc.date() == now.astimezone(UTC).date():
        return f"{utc:%H:%M:%S}"
    return f"{utc:%m-%d %H:%M:%S}"


def _timeline_heading(timeline: Sequence[TimelineEntry], shown: int) -> Text:
    if len(timeline) <= shown:
        return Text(f"Timeline ({len(timeline)}, UTC)", style="bold underline")
    return Text(
        f"Timeline (last {shown} of {len(timeline)}, UTC; d shows all)", style="bold underline"
    )


def _timeline_table(timeline: Sequence[TimelineEntry], now: datetime, shown: int) -> ColumnLines:
    rows: list[list[Cell]] = []
    for entry in timeline[-shown:] if shown else ():
        warning = "Warning" in entry.text[:20] or entry.text.startswith(
            ("Ready=False", "Ready=Unknown")
        )
        rows.append(
            [
                clock_time(entry.time, now),
                since_words(entry.time, now),
                entry.source,
                (entry.text, "yellow" if warning else ""),
            ]
        )
    return ColumnLines(("TIME", "AGO", "SOURCE", "WHAT"), rows, right=(1,))


_CITED_LINE = re.compile(r"^line (\d+):")


def cited_lines(findings: Sequence[Finding], source: str) -> list[tuple[int, str]]:
    """The journal lines the findings cite from one journal ("journal:kubelet"), in line
    order: (line number, the evidence text as `diagnose` prints it)."""
    cited: dict[int, str] = {}
    for finding in findings:
        for item in finding.evidence:
            match = _CITED_LINE.match(item.text)
            if item.source == source and match:
                cited.setdefault(int(match.group(1)), item.text)
    return sorted(cited.items())


def _evidence_part(evidence: NodeEvidence, findings: Sequence[Finding] = ()) -> list[Any]:
    """What the bundle collected on the node itself: MIG state, journals (with the lines
    the findings cite), cloud-init."""
    parts: list[Any] = [Text("Collected on the node", style="bold underline")]
    mig = evidence.mig
    if mig is None:
        parts.append(Text("MIG state: not collected", style="dim"))
    elif mig.status != "ok":
        parts.append(Text(f"MIG state ({mig.source}): {mig.status} {mig.detail}", style="yellow"))
    else:
        gpu_rows: list[list[Cell]] = []
        for gpu in mig.gpus:
            profiles: dict[str, int] = {}
            for device in gpu.devices:
                profiles[device.profile or "?"] = profiles.get(device.profile or "?", 0) + 1
            gpu_rows.append(
                [
                    str(gpu.index),
                    gpu.name,
                    gpu.mig_current,
                    (gpu.mig_pending, "bold yellow" if gpu.mode_change_pending else ""),
                    " ".join(f"{n}×{p}" for p, n in sorted(profiles.items())) or "-",
                ]
            )
        table = ColumnLines(("GPU", "NAME", "MIG", "PENDING", "DEVICES"), gpu_rows)
        parts += [Text(f"MIG state ({mig.source}, driver {mig.driver_version or '?'})"), table]
    if evidence.journals:
        parts.append(Text("Journals (l opens them; n jumps to the lines below)", style="bold"))
    for name, journal in sorted(evidence.journals.items()):
        problems = f", {len(journal.problems)} problems" if journal.problems else ""
        cited = cited_lines(findings, journal.source)
        line = Text(f"journal {name}: {journal.lines} lines{problems}")
        if cited:
            line.append(f", {len(cited)} cited by the findings:", style="bold")
        parts.append(line)
        for _number, text in cited[:CITED_LINES_SHOWN]:
            parts.append(Text(f"  {text}", style="yellow", overflow="fold"))
        if len(cited) > CITED_LINES_SHOWN:
            parts.append(Text(f"  … {len(cited) - CITED_LINES_SHOWN} more (l)", style="dim"))
    if evidence.cloud_init is not None:
        parts.append(Text(f"cloud-init: {evidence.cloud_init.status}"))
    for problem in evidence.problems[:5]:
        parts.append(Text(f"collector: {problem}", style="yellow"))
    return parts


def _pods_part(pods: list[Pod] | str | None, now: datetime) -> Any:
    if pods is None:
        return Text("Pods: loading…", style="dim")
    if isinstance(pods, str):
        return Text(f"Pods: {pods}", style="yellow")
    rows: list[list[Cell]] = []
    for pod in pods:
        gpu = " ".join(
            [
                *(f"{n.removeprefix('nvidia.com/')}:{c}" for n, c in pod.gpu_requests.items()),
                *(f"claim {held}" for held in pod.gpu_claims),  # DRA: "claim c1: gpu-0-mig-…"
            ]
        )
        rows.append(
            [
                pod.namespace,
                pod.name,
                (pod.phase, "" if pod.phase in ("Running", "Succeeded") else "yellow"),
                "yes" if pod.ready else ("no", "yellow"),
                gpu or "-",
                pod.owner_kind or "-",
                format_age((now - pod.created).total_seconds()) if pod.created else "?",
            ]
        )
    table = ColumnLines(("NAMESPACE", "POD", "PHASE", "READY", "GPU", "OWNER", "AGE"), rows)
    gpu_users = sum(1 for p in pods if p.uses_gpu)
    title = Text(f"Pods ({len(pods)}, {gpu_users} using GPUs)", style="bold underline")
    return Group(title, table) if pods else Group(title, Text("none", style="dim"))


Cell = str | tuple[str, str]  # text from outside, or (text, style)


class ColumnLines:
    """Rows laid out as a borderless table with a bold header and a space either side of
    each cell (what `rich.table.Table(box=None, padding=(0, 1))` draws, a cell too wide for
    its column folded onto more lines in it), drawn as lines of text. A rich Table measures
    and wraps every cell again at each drawing, and a pane is drawn twice (its height, then
    its lines) each time its words change: about 50 ms of the UI thread for a node's detail.
    Here the cells are made inert and measured once; a drawing only divides the width among
    the columns and folds the few cells that do not fit. The last column's cells (the long
    messages) wrap at words, under it, not under the row."""

    def __init__(
        self,
        header: Sequence[str] | None,
        rows: Sequence[Sequence[Cell]],
        *,
        right: Sequence[int] = (),
    ) -> None:
        # Inert with their line feeds, as the console shows a string cell: a line feed
        # starts another line in the cell, every other control is shown, not obeyed.
        self._header = None if header is None else [[h] for h in header]
        self._rows: list[list[tuple[list[str], str]]] = []
        for row in rows:
            cells = []
            for cell in row:
                text, style = (cell, "") if isinstance(cell, str) else cell
                cells.append((inert(text, lines=True).split("\n"), style))
            self._rows.append(cells)
        self._right = frozenset(right)
        count = len(header) if header is not None else len(rows[0]) if rows else 0
        self._natural = [0] * count
        for pieces_row in ([] if self._header is None else [self._header]) + [
            [pieces for pieces, _style in cells] for cells in self._rows
        ]:
            for i, pieces in enumerate(pieces_row):
                self._natural[i] = max(self._natural[i], *(cell_len(p) for p in pieces))
        self._least = [
            min(natural, max(4, len(self._header[i][0]) if self._header else 4))
            for i, natural in enumerate(self._natural)
        ]
        self._drawn: tuple[int, Text] | None = None
        # what `shown.drawn_key` compares: the same header, rows and alignment draw the same
        self.shown_key = ("lines", (header, tuple(tuple(row) for row in rows), tuple(right)))

    def _widths(self, room: int) -> list[int]:
        """The columns' widths in `room` cells: each its widest cell if they fit; else the
        widest columns narrow first, to one width (as a rich Table collapses its columns),
        none below what its header needs, and the cells left over go to the columns that
        were narrowed, the last (the long messages) first."""
        widths = list(self._natural)
        room -= 2 * len(widths)  # a space either side of each cell
        if not widths or sum(widths) <= room:
            return widths
        pairs = list(zip(self._natural, self._least, strict=True))

        def capped(cap: int) -> list[int]:
            return [max(least, min(natural, cap)) for natural, least in pairs]

        low, high = 1, max(widths)  # the widest cap whose columns fit
        while low < high:
            middle = (low + high + 1) // 2
            if sum(capped(middle)) <= room:
                low = middle
            else:
                high = middle - 1
        widths = capped(low)
        spare = room - sum(widths)
        for i in reversed(range(len(widths))):
            if spare <= 0:
                break
            if widths[i] < self._natural[i]:
                widths[i] += 1
                spare -= 1
        return widths

    def lines(self, console: Console, width: int) -> Text:
        """Every row laid out in `width` cells, as one text of lines."""
        if self._drawn is not None and self._drawn[0] == width:
            return self._drawn[1]
        widths = self._widths(width)
        out = Text(no_wrap=True, overflow="crop")
        rows = [] if self._header is None else [[(p, "bold") for p in self._header]]
        rows += self._rows
        for number, cells in enumerate(rows):
            columns: list[list[str]] = []
            for i, (pieces, _style) in enumerate(cells):
                folded: list[str] = []
                for piece in pieces:
                    if cell_len(piece) <= widths[i]:
                        folded.append(piece)
                    elif i == len(cells) - 1:  # the long one: at words where it can
                        folded += [line.plain for line in Text(piece).wrap(console, widths[i])]
                    else:
                        folded += chop_cells(piece, widths[i])
                columns.append(folded or [""])
            # the header's spaces are bold too, as a Table's header row is
            spaces = "bold" if number == 0 and self._header is not None else None
            for line in range(max(len(c) for c in columns)):
                if number or line:
                    out.append("\n")
                for i, (column, (_pieces, style)) in enumerate(zip(columns, cells, strict=True)):
                    text = column[line] if line < len(column) else ""
                    pad = " " * max(0, widths[i] - cell_len(text))
                    out.append(" ", style=spaces)
                    if i in self._right:
                        out.append(pad, style=spaces)
                    out.append(text, style=style or None)
                    if i not in self._right:
                        out.append(pad, style=spaces)
                    out.append(" ", style=spaces)
        self._drawn = (width, out)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.lines(console, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = sum(self._natural) + 2 * len(self._natural)
        least = sum(self._least) + 2 * len(self._least)
        return Measurement(min(least, options.max_width), min(widest, options.max_width))
