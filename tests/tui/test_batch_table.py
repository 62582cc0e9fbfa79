"""The node table finds a line's row, a row's and a cell's region, its height and the lines
its fixed rows take without walking every row (`BatchTable`): each must be what Textual's own
walk over the same table gives, through adds, batch removals, a new order and a clear, with
and without the header and fixed rows; a row of another height hands every answer back to
Textual."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from textual import widgets as textual_widgets
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate

from mignurse.tui.table import BatchTable

TEXTUAL = textual_widgets.DataTable


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield BatchTable(id="t")


def _answers(table: BatchTable, textual: bool) -> list[Any]:
    """Every line's row, every row's and cell's region, and the height: ours or Textual's."""
    out: list[Any] = []
    height = TEXTUAL._total_row_height.fget(table) if textual else table._total_row_height
    out.append(height)
    fixed = TEXTUAL._get_fixed_offset if textual else BatchTable._get_fixed_offset
    out.append(fixed(table))
    header = table.header_height if table.show_header else 0
    for y in range(height + header + 2):
        try:
            found = (TEXTUAL._get_offsets if textual else BatchTable._get_offsets)(table, y)
        except LookupError:
            found = "none"
        out.append(found)
    for row in range(-1, table.row_count + 1):
        region = TEXTUAL._get_row_region if textual else BatchTable._get_row_region
        out.append(region(table, row))
        for column in range(-1, len(table.columns) + 1):
            cell = TEXTUAL._get_cell_region if textual else BatchTable._get_cell_region
            out.append(cell(table, Coordinate(row, column)))
    return out


def test_rows_and_regions_are_those_textual_walks_to() -> None:
    async def run() -> int:
        app = _Table()
        checked = 0
        async with app.run_test(size=(120, 30)):
            table = app.query_one("#t", BatchTable)
            for name in ("name", "status", "gpu"):
                table.add_column(name, key=name)
            rng = random.Random(11)
            names = [f"node-{n}" for n in range(120)]
            for name in names:
                table.add_row(name, rng.choice(("Ready", "NotReady")), "8/8", key=name)
            for show_header, fixed_rows in ((True, 0), (False, 0), (True, 3), (False, 200)):
                table.show_header, table.fixed_rows = show_header, fixed_rows
                assert _answers(table, False) == _answers(table, True)
                checked += 1
            table.fixed_rows = 0
            table.set_widths({"name": 30, "status": 9, "gpu": 4})
            gone = set(rng.sample(names, 40))
            table.remove_rows(gone)
            kept = [name for name in names if name not in gone]
            rng.shuffle(kept)
            table.order_by(kept)
            table.move_cursor(row=17, animate=False)
            await app.workers.wait_for_complete()
            assert _answers(table, False) == _answers(table, True)
            assert str(table.get_row_at(0)[0]) == kept[0]
            checked += 1
            table.add_row("tall", "Ready", "1/1", key="tall", height=2)
            assert table._tall_rows
            assert _answers(table, False) == _answers(table, True)
            checked += 1
            table.clear()
            assert not table._tall_rows
            table.add_row("again", "Ready", "1/1", key="again")
            assert _answers(table, False) == _answers(table, True)
            checked += 1
        return checked

    assert asyncio.run(run()) == 7


def test_a_line_past_the_last_row_is_no_row() -> None:
    async def run() -> list[Any]:
        app = _Table()
        async with app.run_test(size=(60, 12)):
            table = app.query_one("#t", BatchTable)
            table.add_column("name", key="name")
            table.add_row("a", key="a")
            out: list[Any] = []
            for y in (1, 2, 5):
                try:
                    out.append(table._get_offsets(y))
                except LookupError:
                    out.append(None)
            return out

    first, past, far = asyncio.run(run())
    assert first is not None and first[0].value == "a"
    assert past is None and far is None
