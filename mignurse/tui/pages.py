"""What the pager shows: a node's journals (`l`), a node described (`d`), every finding
(`f`). Pure: models in, `Page`s of rich Text out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.text import Text

from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import NodeEvidence
from mignurse.evidence.journal import JournalParse
from mignurse.nodeview import short_name
from mignurse.render import SEVERITY_STYLE, InertConsole, deadline_words
from mignurse.tui.detail import cited_lines, sorted_findings
from mignurse.tui.screens.pager import Page


def journal_pages(evidence: NodeEvidence, findings: Sequence[Finding]) -> list[Page]:
    """One page per journal: every entry with its line number, the lines the findings
    cite marked (n jumps to them)."""
    return [
        _journal_page(evidence.node, name, journal, findings)
        for name, journal in sorted(evidence.journals.items())
    ]


def _journal_page(node: str, name: str, journal: JournalParse, findings: Sequence[Finding]) -> Page:
    cited = {number for number, _text in cited_lines(findings, journal.source)}
    lines: list[Text] = []
    marks: list[int] = []
    for problem in journal.problems:
        lines.append(Text(f"problem: {problem}", style="yellow"))
    if journal.no_entries:
        lines.append(Text("-- No entries -- (journalctl found nothing in the window)", style="dim"))
    for entry in journal.entries:
        if entry.line in cited:
            marks.append(len(lines))
        pid = f"[{entry.pid}]" if entry.pid is not None else ""
        first, *rest = entry.message.split("\n")
        stamp = (
            f"+{(entry.time - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds():.6f}"
            if journal.since_boot
            else f"{entry.time.astimezone(UTC):%m-%d %H:%M:%S.%f}"
        )
        text = Text(f"{entry.line:>6} ", style="dim")
        text.append(f"{stamp} ", style="cyan")
        text.append(f"{entry.ident}{pid}: ", style="bold")
        text.append(first, style="yellow" if entry.line in cited else "")
        lines.append(text)
        lines.extend(Text(f"{'':>6} {continuation}") for continuation in rest)
    if not lines:
        lines.append(Text("nothing was read from this journal", style="dim"))
    return Page(
        title=f"{name} journal of {short_name(node)} ({journal.lines} lines, UTC)",
        lines=lines,
        marks=marks,
        note="lines cited by the findings (n/N)",
    )


def renderable_lines(renderable: Any, width: int) -> list[Text]:
    """A rich renderable laid out at `width`, one Text per screen line."""
    console = InertConsole(
        width=max(width, 40), color_system="truecolor", record=False, markup=False
    )
    rendered = console.render_lines(renderable, console.options, pad=False)
    lines = []
    for line in rendered:
        text = Text()
        for segment in line:
            if not segment.control:
                text.append(segment.text, segment.style)
        lines.append(text)
    return lines


def describe_page(name: str, renderable: Any, width: int) -> Page:
    return Page(title=f"Node {name}", lines=renderable_lines(renderable, width))


def findings_page(
    findings: Sequence[Finding],
    now_of: Callable[[Finding], datetime],
    *,
    title: str,
    as_of: str = "",
) -> Page:
    """Every finding as `mignurse diagnose` prints it, with all of its evidence; n jumps
    from one finding to the next. `now_of(finding)`: the moment it is judged at (its own
    cluster's or bundle's); `as_of`: what that is when not the present (a bundle's
    "collection"), so deadlines read as moments then."""
    lines: list[Text] = []
    marks: list[int] = []
    for finding in sorted_findings(findings):
        now = now_of(finding)
        marks.append(len(lines))
        head = Text()
        head.append(finding.severity.upper(), style=SEVERITY_STYLE.get(finding.severity, ""))
        head.append(f"  {finding.id}  ", style="bold")
        head.append(finding.nodepool or "(no pool)")
        if finding.nodes:
            head.append(f"  {len(finding.nodes)} node{'s' if len(finding.nodes) != 1 else ''}")
        if finding.deadline:
            head.append(f"  {deadline_words(finding.deadline, now, as_of=as_of)}", style="bold")
        lines.append(head)
        lines.append(Text(f"  {finding.summary}"))
        if finding.nodes:
            lines.append(Text("  nodes: " + ", ".join(short_name(n) for n in finding.nodes)))
        timeless = [e for e in finding.evidence if e.time is None]
        timed = sorted((e for e in finding.evidence if e.time), key=lambda e: e.time or now)
        for item in [*timeless, *timed]:
            when = item.time.astimezone(UTC).strftime("%m-%d %H:%M:%S") if item.time else "-"
            lines.append(Text(f"    {when}  {item.source:<18} {item.text}", style="dim"))
        if finding.runbooks:
            lines.append(Text("  runbooks: " + ", ".join(finding.runbooks), style="cyan"))
        lines.append(Text(""))
    if not lines:
        lines.append(Text("No findings.", style="green"))
    return Page(title=title, lines=lines, marks=marks, note="findings (n/N)", wrap=True)
