"""The app's DataTable draws a one-line cell itself (`shown.DataTable._one_line_cell`): the
segments must be those Textual's own `_render_cell` makes, for every kind of cell the
tables hold, under the cursor and hover styles too; other cells are left to Textual."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import widgets as textual_widgets
from textual.app import App, ComposeResult

from mignurse.tui.shown import DataTable

WORDS = (
    "ip-10-0-41-207.us-west-2.compute.internal",
    "Ready 7m",
    "CRIT",
    "",
    " ",
    "False DCGMError",
    "漢字のノード",  # wide characters: two cells each
    "gpu-😀-pool",
    "x" * 80,
    "café",
    "a\u0301",  # a combining accent: one cell
    "\x1b[31mred\x1b[0m",  # made inert by `cell`: shown, not obeyed
    "\u202eevil",
)


def _cells(rng: random.Random) -> list[Any]:
    out: list[Any] = []
    for _ in range(5):
        word = rng.choice(WORDS)
        kind = rng.randrange(4)
        if kind == 0:
            out.append(word)  # a string: `cell` makes it Text
        elif kind == 1:
            out.append(Text(word, style=rng.choice(("bold red", "dim", "", "yellow on blue"))))
        elif kind == 2:
            text = Text(word)
            if len(word) > 2:
                text.stylize("bold", 0, 2)
                text.stylize("italic cyan", 1, len(word) - 1)
            out.append(text)
        else:
            out.append(Text(word, overflow=rng.choice(("ellipsis", "crop", "fold"))))
    return out


class _Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable(id="t")


def test_one_line_cells_are_drawn_as_textual_draws_them() -> None:
    async def run() -> int:
        app = _Tables()
        compared = 0
        async with app.run_test(size=(160, 40)):
            table = app.query_one("#t", DataTable)
            for name in ("A", "B", "C", "D", "E"):
                table.add_column(name)
            rng = random.Random(7)
            for _ in range(40):
                table.add_row(*_cells(rng))
            for row in range(table.row_count):
                for column in range(5):
                    for width in (3, 8, 17, 44):
                        for style in (Style(), Style(color="white", bgcolor="black")):
                            for cursor, hover in ((False, False), (True, False), (False, True)):
                                table._cell_render_cache.clear()
                                theirs = textual_widgets.DataTable._render_cell(
                                    table, row, column, style, width, cursor, hover
                                )
                                table._cell_render_cache.clear()
                                ours = table._one_line_cell(
                                    row, column, style, width, cursor, hover
                                )
                                assert ours is not None, (row, column)
                                assert ours == theirs, (row, column, width, cursor, hover)
                                compared += 1
        return compared

    assert asyncio.run(run()) == 40 * 5 * 4 * 2 * 3


def test_other_cells_are_left_to_textual() -> None:
    async def run() -> list[Any]:
        app = _Tables()
        async with app.run_test(size=(80, 20)):
            table = app.query_one("#t", DataTable)
            table.add_column("A")
            table.add_row(Text("right", justify="right"))
            table.add_row(Text("two\nlines"), height=2)
            table.add_row(Text("tall"), height=None)
            table.add_row(Text("one line"))
            return [table._one_line_cell(row, 0, Style(), 12, False, False) for row in range(4)]

    drawn = asyncio.run(run())
    assert drawn[:3] == [None, None, None]
    assert drawn[3] is not None
