"""Drawing tables on a terminal (rich) or as plain text when piped, like kubectl."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mignurse.nodeview import COLUMNS, WIDE_COLUMNS, NodeRow

STATUS_STYLE = {
    "Ready": "green",
    "NotReady": "bold red",
    "Unknown": "yellow",
    "Launching": "cyan",
}


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """kubectl's plain format: left-aligned columns, three spaces apart, no colour."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [tuple(header), *rows]:
        line = "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")


def print_node_table(rows: Sequence[NodeRow], *, wide: bool, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    header = WIDE_COLUMNS if wide else COLUMNS
    if not out.isatty():
        plain_table(header, [r.cells(wide=wide) for r in rows], out)
        return
    width = shutil.get_terminal_size((100, 24)).columns
    # Full EC2 host names take half of an 80-column line; wide mode keeps them whole.
    shorten = not wide and width < 140
    console = Console(file=out, width=width, highlight=False)
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for name in header:
        table.add_column(name, no_wrap=name in ("NAME", "STATUS", "AGE"), overflow="fold")
    for row in rows:
        cells: list[Text | str] = list(row.cells(wide=wide, shorten=shorten))
        cells[3] = Text(row.status, style=STATUS_STYLE.get(row.status_word, ""))
        if row.ahr_ok is False:
            cells[7] = Text(row.ahr, style="bold red")
        table.add_row(*cells)
    console.print(table)
    if shorten:
        console.print(
            Text(
                "names without their .compute.internal domain; -o wide shows them whole",
                style="dim",
            )
        )
