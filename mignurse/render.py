"""Drawing tables on a terminal (rich) or as plain text when piped, like kubectl; a runbook's
plan as rich markup, for the command line and the app.

Everything drawn here came from outside (names, labels, condition messages, evidence), so
every cell and line goes through `inert` before it is measured, and every rich console is an
`InertConsole` (`console_for`), which shows any control or escape a renderable still holds
and makes no hyperlink: see docs/architecture.md, "Text from outside"."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, TextIO

from mignurse.inert import inert, inert_markup

# rich, the node view, the diagnosis and the runner load where they are drawn: `mignurse nodes`
# piped is kubectl's plain table and needs no rich, `mignurse runs` no node model.
if TYPE_CHECKING:
    from rich.text import Text

    from mignurse.diagnose.findings import Finding
    from mignurse.diagnose.timeline import TimelineEntry
    from mignurse.inertconsole import InertConsole
    from mignurse.nodeview import NodeRow
    from mignurse.runner.plan import Plan


def __getattr__(name: str) -> Any:
    """`InertConsole`, where the faces have always found it, loaded with rich when asked."""
    if name == "InertConsole":
        from mignurse.inertconsole import InertConsole

        return InertConsole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


NO_WRAP = ("NAME", "POOL", "TYPE", "STATUS", "AGE", "GPU")

STATUS_STYLE = {
    "Ready": "green",
    "NotReady": "bold red",
    "Unknown": "yellow",
    "Launching": "cyan",
}


def console_for(out: IO[str], **options: Any) -> InertConsole:
    """The rich console every face draws through onto `out`. The command line's own stdout
    and stderr make what is printed on them inert; rich writes its styles past that, to
    `out.styled`, having made its text inert itself."""
    from mignurse.inertconsole import InertConsole

    return InertConsole(file=getattr(out, "styled", out), **options)


def cell_text(value: object, style: str = "") -> Text:
    """A table cell from outside: one line, inert, never read as markup."""
    from rich.text import Text

    return Text(inert(str(value)), style=style)


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """kubectl's plain format: left-aligned columns, three spaces apart, no colour; every
    cell on one line, inert (a tab or a line feed in a label would break the columns)."""
    header = [inert(h) for h in header]
    rows = [row if "".join(row).isprintable() else [inert(c) for c in row] for row in rows]
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [tuple(header), *rows]:
        line = "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")


# A cell the fast path below draws as rich would: printable ASCII words one space apart (rich
# measures, wraps or trims anything else in its own way, so that goes to rich).
_PLAIN_CELL = re.compile(r"(?:[!-~]+(?: [!-~]+)*)?")
_PLAIN_HEADER = re.compile(r"[A-Z][A-Z0-9_-]*")  # rich reads a header's `:x:` and `[x]`
PIPED_WIDTH = 200


def print_rows(header: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str]) -> None:
    """On a terminal a rich table (`print_listing`); piped, kubectl's plain columns, every
    row whole on one line (a command in a cell can be copied as it is)."""
    if out.isatty():
        print_listing(header, rows, out)
    else:
        plain_table(header, rows, out)  # type: ignore[arg-type]


def print_listing(columns: Sequence[str], rows: Sequence[Sequence[object]], out: IO[str]) -> None:
    """A list (runbooks, past runs) as a borderless rich table: on a terminal at its width,
    piped at `PIPED_WIDTH` columns, a long cell folded onto more lines.

    Piped, a table whose cells are all plain words is written here, byte for byte as rich
    writes it (rich 15 `Table(box=None, pad_edge=False, show_edge=False)`: two spaces between
    columns, each line padded to the table's width, the widest columns narrowed and their
    cells folded when the table is wider than the page), so a piped list loads no rich;
    anything else is drawn by rich itself."""
    cells = [[inert(str(cell)) for cell in row] for row in rows]
    if not out.isatty() and not _forced_terminal():
        plain = all(_PLAIN_HEADER.fullmatch(name) for name in columns) and all(
            _PLAIN_CELL.fullmatch(cell) for row in cells for cell in row
        )
        lines = _plain_listing(list(columns), cells, PIPED_WIDTH) if plain else None
        if lines is not None:
            target = getattr(out, "styled", out)
            target.write("".join(line + "\n" for line in lines))
            target.flush()
            return
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    console_for(out, highlight=False, width=PIPED_WIDTH if not out.isatty() else None).print(table)


def _plain_listing(columns: list[str], rows: list[list[str]], width: int) -> list[str] | None:
    """The lines of `print_listing`'s rich table, for cells of plain words, as rich 15 lays it
    out (rich/table.py `_calculate_column_widths`, `_collapse_widths`; rich/text.py `wrap`):
    each column as wide as its longest cell plus its padding (one space inside each gap);
    while too wide for the page, the widest columns shrink to the next widest, then all
    evenly; each cell folded at word breaks, a word longer than its column cut. None where a
    column is left no room (rich is left to draw that)."""
    count = len(columns)
    pads = [(i > 0) + (i < count - 1) for i in range(count)]
    table = [columns, *rows]
    widths = [min(max(len(row[i]) for row in table) + pads[i], width) or 1 for i in range(count)]
    if sum(widths) > width:
        widths = _collapsed(widths, width)
        if sum(widths) > width:
            widths = _ratio_reduce(sum(widths) - width, [1] * count, widths, widths)
    inner = [w - pad for w, pad in zip(widths, pads, strict=True)]
    if min(inner, default=0) < 1 or sum(widths) > width:
        return None
    lines: list[str] = []
    for index, row in enumerate(table):
        folded = [_fold(cell, w) for cell, w in zip(row, inner, strict=True)]
        height = max(len(cell_lines) for cell_lines in folded)
        # A folded row's shorter cells are blank below; the header's above (its names sit
        # on the line over the first row).
        folded = [
            [*[" " * w] * (height - len(cell_lines)), *cell_lines]
            if index == 0
            else [*cell_lines, *[" " * w] * (height - len(cell_lines))]
            for cell_lines, w in zip(folded, inner, strict=True)
        ]
        lines.extend("  ".join(parts) for parts in zip(*folded, strict=True))
    return lines


def _collapsed(widths: list[int], width: int) -> list[int]:
    """rich 15 `Table._collapse_widths`, every column wrapable: the widest columns narrowed
    to the next widest until the table fits or they are all as wide."""
    excess = sum(widths) - width
    while excess > 0:
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        if not widest - second:
            break
        ratios = [1 if w == widest else 0 for w in widths]
        widths = _ratio_reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        excess = sum(widths) - width
    return widths


def _ratio_reduce(
    total: int, ratios: list[int], maximums: list[int], values: list[int]
) -> list[int]:
    """rich 15 `rich._ratio.ratio_reduce`: `total` taken from `values` in proportion to
    `ratios`, no more than `maximums` from each."""
    ratios = [ratio if most else 0 for ratio, most in zip(ratios, maximums, strict=True)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    result: list[int] = []
    for ratio, most, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            taken = min(most, round(ratio * total / total_ratio))
            result.append(value - taken)
            total -= taken
            total_ratio -= ratio
        else:
            result.append(value)
    return result


_WORD = re.compile(r"\s*\S+\s*")


def _fold(text: str, width: int) -> list[str]:
    """A plain cell's lines at `width`, each padded to it: rich 15 `Text.wrap` with
    overflow "fold", justify "left" (rich/_wrap.py `divide_line`; a word with the spaces after
    it; one longer than the line cut into lines of `width`)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            chunks = [word[i : i + width] for i in range(0, len(word), width)]
            for n, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if n == len(chunks) - 1:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    lines = []
    for begin, end in zip([0, *breaks], [*breaks, len(text)], strict=True):
        line = text[begin:end]
        if len(line) > width:  # the spaces past the width go (`Text.rstrip_end`)
            line = line[: len(line) - min(len(line) - len(line.rstrip()), len(line) - width)]
        lines.append(line[:width].ljust(width))
    return lines


def print_node_table(
    rows: Sequence[NodeRow],
    *,
    wide: bool,
    out: TextIO | None = None,
    clusters: Sequence[str] | None = None,
) -> None:
    """The node table; with `clusters` (each row's context, rows from several clusters), a
    CLUSTER column first."""
    from mignurse.nodeview import COLUMNS, NARROW_DROPS, WIDE_COLUMNS

    out = out or sys.stdout
    header: tuple[str, ...] = WIDE_COLUMNS if wide else COLUMNS
    lead: tuple[str, ...] = ("CLUSTER",) if clusters is not None else ()
    if not out.isatty():
        plain_table(
            (*lead, *header),
            [
                (*([clusters[i]] if clusters is not None else []), *r.cells(wide=wide))
                for i, r in enumerate(rows)
            ],
            out,
        )
        return
    import shutil

    from rich.table import Table
    from rich.text import Text

    width = shutil.get_terminal_size((100, 24)).columns
    # Full EC2 host names take half of an 80-column line; wide mode keeps them whole.
    shorten = not wide and width < 140
    # the CLUSTER column takes its width from the others: TYPE and AGE step aside sooner
    extra = max((len(c) for c in clusters), default=0) + 1 if clusters is not None else 0
    keep = [
        index
        for index, name in enumerate(header)
        if wide or width >= 100 + extra or name not in NARROW_DROPS
    ]
    console = console_for(out, width=width, highlight=False)
    table = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold")
    for name in lead:
        table.add_column(name, no_wrap=True, overflow="fold")
    for index in keep:
        name = header[index]
        table.add_column(name, no_wrap=name in NO_WRAP, overflow="fold")
    for position, row in enumerate(rows):
        cells = [cell_text(cell) for cell in row.cells(wide=wide, shorten=shorten)]
        cells[3] = cell_text(row.status, STATUS_STYLE.get(row.status_word, ""))
        if row.ahr_ok is False:
            cells[7] = cell_text(row.ahr, "bold red")
        first = [cell_text(clusters[position])] if clusters is not None else []
        table.add_row(*first, *(cells[index] for index in keep))
    console.print(table)
    notes = []
    if shorten:
        notes.append("names without their .compute.internal domain")
    if len(keep) < len(header):
        notes.append(f"{' and '.join(NARROW_DROPS)} need a wider terminal")
    if notes:
        console.print(Text("; ".join(notes) + "; -o wide shows everything", style="dim"))


SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def countdown(deadline: datetime | None, now: datetime) -> str:
    """ "in 3m12s" / "passed 2m ago": the words of a repair deadline."""
    if deadline is None:
        return ""
    seconds = int((deadline - now).total_seconds())
    if seconds >= 0:
        return f"in {_clock(seconds)}"
    return f"passed {_clock(-seconds)} ago"


def repair_when(due: datetime, state: str, now: datetime, *, as_of: str = "") -> str:
    """When a radar node's repair acts (`diagnose.radar`): a countdown, or with `as_of` a
    moment then; "held" behind a guard, "if on" where a gate could not be read."""
    words = deadline_words(due, now, as_of=as_of, short=True) if as_of else countdown(due, now)
    if state == "held":
        return f"held by a guard; due {words}"
    if state == "conditional":
        return f"{words} if repair is on"
    return words


def deadline_words(
    deadline: datetime, now: datetime, *, as_of: str = "", short: bool = False
) -> str:
    """A finding's repair deadline in words. Live: a countdown from `now` ("deadline in
    3m12s"). With `as_of` (what `now` is: "collection" for a bundle, "--now"), `now` is the
    moment the evidence was judged at, not the present: a moment, never a countdown that
    looks live ("repair would have fired at 13:27:34Z, 3m15s after collection", "repair was
    due at 13:10:00Z, 14m09s before collection"); `short`: the moment alone, for one line."""
    if not as_of:
        return f"deadline {countdown(deadline, now)}"
    utc = deadline.astimezone(UTC)
    same_day = utc.date() == now.astimezone(UTC).date()
    at = f"{utc:%H:%M:%S}Z" if same_day else f"{utc:%Y-%m-%d %H:%M:%S}Z"
    seconds = int((deadline - now).total_seconds())
    if seconds >= 0:
        words = f"repair would have fired at {at}"
        return words if short else f"{words}, {_clock(seconds)} after {as_of}"
    words = f"repair was due at {at}"
    return words if short else f"{words}, {_clock(-seconds)} before {as_of}"


def as_of_words(now: datetime, what: str) -> str:
    """When a bundle's (or `--now`'s) times are read: "as of 2026-12-05 13:20:05Z (bundle)"."""
    return f"as of {now.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z ({what})"


def _clock(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def print_findings(
    findings: Sequence[Finding],
    now: datetime,
    *,
    out: TextIO | None = None,
    evidence: int = 8,
    as_of: str = "",
    clusters: Sequence[str] | None = None,
    nows: Sequence[datetime] | None = None,
) -> None:
    """Findings as blocks: severity, id, pool, nodes, deadline; the summary; the newest
    evidence lines; the runbooks that fit. Plain text when piped. `as_of`: what `now` is
    when it is not the present ("collection": a bundle's), so deadlines are moments.
    `clusters`: each finding's context (findings from several clusters), first on its line;
    `nows`: each one's cluster clock, for its deadline."""
    out = out or sys.stdout
    tty = out.isatty()
    lines = [
        line
        for i, f in enumerate(findings)
        for line in _finding_lines(
            f,
            nows[i] if nows is not None else now,
            evidence,
            as_of,
            clusters[i] if clusters is not None else None,
        )
    ]
    if not tty and not _forced_terminal():
        # What rich writes where it draws no style: each line's text, made inert (rich is
        # not loaded for it: a tenth of a piped diagnosis's start-up).
        out.write(
            "".join(inert("".join(t for t, _ in pieces), lines=True) + "\n" for pieces, _ in lines)
        )
        return
    import shutil

    from rich.text import Text

    console = console_for(
        out,
        width=shutil.get_terminal_size((120, 24)).columns if tty else 10_000,
        highlight=False,
        no_color=not tty,
        soft_wrap=not tty,  # piped: one line per line, for grep
    )
    for pieces, style in lines:
        if not pieces:
            console.print()
            continue
        line = Text(style=style)
        for text, piece_style in pieces:
            line.append(text, style=piece_style or None)
        console.print(line)


# A line of a finding's block: its pieces (text, style) and the style of the whole line.
_Line = tuple[list[tuple[str, str]], str]


def _finding_lines(
    finding: Finding, now: datetime, evidence: int, as_of: str, cluster: str | None = None
) -> list[_Line]:
    head = [] if cluster is None else [(inert(cluster) + "  ", "bold")]
    head += [
        (finding.severity.upper(), SEVERITY_STYLE.get(finding.severity, "")),
        (f"  {finding.id}  ", "bold"),
        (inert(finding.nodepool or "(no pool)"), ""),
    ]
    if finding.nodes:  # a pool-level finding (a setting at risk) names no node
        head.append((f"  {len(finding.nodes)} node{'s' if len(finding.nodes) != 1 else ''}", ""))
    if finding.deadline:
        head.append((f"  {deadline_words(finding.deadline, now, as_of=as_of)}", "bold"))
    lines: list[_Line] = [(head, ""), ([("  " + inert(finding.summary), "")], "")]
    # Timeless evidence (settings, labels) first, then the newest timed lines.
    timeless = [e for e in finding.evidence if e.time is None]
    timed = sorted((e for e in finding.evidence if e.time), key=lambda e: e.time or now)
    shown = timeless[:2] + timed[-max(evidence - len(timeless[:2]), 1) :]
    for item in shown:
        when = item.time.astimezone(UTC).strftime("%m-%d %H:%M:%S") if item.time else "-"
        lines.append(([(f"    {when}  {inert(item.source):<18} {inert(item.text)}", "")], "dim"))
    if len(finding.evidence) > len(shown):
        more = f"    … {len(finding.evidence) - len(shown)} more (-o json)"
        lines.append(([(more, "")], "dim"))
    if finding.runbooks:
        lines.append(([("  runbooks: " + inert(", ".join(finding.runbooks)), "")], ""))
    lines.append(([], ""))
    return lines


def _forced_terminal() -> bool:
    """Whether rich would draw styles on a pipe: TTY_COMPATIBLE=1, or FORCE_COLOR set to
    anything but "" (rich 15 `Console.is_terminal`, https://force-color.org/)."""
    import os

    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    return os.environ.get("FORCE_COLOR") not in (None, "")


def print_timeline(
    node: str, entries: Sequence[TimelineEntry], *, out: TextIO | None = None
) -> None:
    """A node's timeline, oldest first: time, source, what happened."""
    out = out or sys.stdout
    out.write(f"\nTimeline of {inert(node)} ({len(entries)} entries, UTC):\n")
    for entry in entries:
        when = entry.time.astimezone(UTC)
        out.write(f"  {when:%m-%d %H:%M:%S}  {inert(entry.source):<18} {inert(entry.text)}\n")
    if not entries:
        out.write("  nothing recorded about it\n")


def plan_markup(plan: Plan) -> str:
    from mignurse.runner.step import Harm

    lines = [f"[bold]{inert_markup(plan.book.name)}[/] on [bold]{inert_markup(plan.where())}[/]: "]
    lines[0] += inert_markup(plan.book.title)
    for i, step in enumerate(plan.steps, 1):
        head = f"[bold]{i}. {inert_markup(step.spec.id)}[/] {inert_markup(step.action.title)}"
        if step.status in ("verified", "skipped"):
            lines.append(f"{head} [dim](already {step.status})[/]")
            continue
        if not step.action.mutates:
            head += " [dim](read-only)[/]"
        elif step.action.harm >= Harm.HIGH:
            head += " [red](high harm)[/]"
        lines.append(head)
        if step.blocked:
            lines.append(f"   [red]blocked:[/] {inert_markup(step.blocked)}")
            continue
        if step.plan is None:
            continue
        if step.plan.nothing_to_do:
            lines.append("   [dim]nothing to do[/]")
        lines.extend(f"   change {inert_markup(c.describe())}" for c in step.plan.changes)
        lines.extend(f"   run {inert_markup(c.describe())}" for c in step.plan.commands)
        lines.extend(f"   [yellow]note:[/] {inert_markup(n)}" for n in step.plan.notes)
    return "\n".join(lines)
