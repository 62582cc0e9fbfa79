"""What the app shows from outside, made inert: the widgets every screen builds on.

Node names, labels, condition messages, events, journals, runbook titles and audit records
reach the screen through a handful of widgets. Those here make what they are given inert
(`mignurse.inert`) before Textual lays it out: `Static` and `Label` (strings, rich `Text`
and `Group`s of them), `DataTable` cells (a string cell is text, never markup), and the
app's console (`InertConsole`, installed by `install_console`), under every rich renderable
a widget draws: tables, logs. Screens import these widgets, never Textual's own
(tests/hostile/test_escapes_faces.py holds them to it and scans every screen for what a
hostile cluster planted). The app's `notify` and titles go through `inert` too (`app.py`,
`appstate.py`).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, TypeVar

from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Span, Text
from textual import constants
from textual import widgets as textual_widgets
from textual.app import App

from mignurse.inert import inert
from mignurse.render import InertConsole


def inert_text(text: Text, *, lines: bool = True) -> Text:
    """`text` with its characters made inert and its styles kept on the same words."""
    plain = text.plain
    if plain.isprintable() or (lines and plain.replace("\n", "").isprintable()):
        return text
    cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
    pieces = [inert(plain[a:b], lines=lines) for a, b in pairwise(cuts)]
    moved = {0: 0}
    offset = 0
    for cut, piece in zip(cuts[1:], pieces, strict=True):
        offset += len(piece)
        moved[cut] = offset
    spans = [Span(moved[s.start], moved[s.end], s.style) for s in text.spans]
    return Text(
        "".join(pieces),
        style=text.style,
        justify=text.justify,
        overflow=text.overflow,
        no_wrap=text.no_wrap,
        end=text.end,
        tab_size=text.tab_size,
        spans=spans,
    )


def shown(content: Any, *, lines: bool = True) -> Any:
    """What a widget is given, inert: a string (kept as the markup the code wrote, the text
    from outside in it escaped by `inert_markup`), a `Text`, a `Group` of them. Other
    renderables are drawn through the app's `InertConsole`."""
    if isinstance(content, str):
        return inert(content, lines=lines, tabs=False)
    if isinstance(content, Text):
        return inert_text(content, lines=lines)
    if isinstance(content, Group):
        return Group(*(shown(part) for part in content.renderables), fit=content.fit)
    return content


def cell(value: Any) -> Any:
    """A table cell: a string is one line of plain text, never markup."""
    if isinstance(value, str):
        return Text(inert(value), end="")
    return shown(value, lines=False)


def drawn_key(renderable: Any) -> object | None:
    """What a pane would show for `renderable`, as a value to compare with what it showed:
    its words, styles and layout, for the renderables the panes are made of (text, groups of
    them, borderless tables, and any with a `shown_key` of its own); None for anything else
    (then it is always drawn)."""
    if isinstance(renderable, str):
        return renderable
    if isinstance(renderable, Text):
        text = renderable
        return (
            text.plain,
            str(text.style),
            tuple(text.spans),
            (text.justify, text.overflow, text.no_wrap, text.end),
        )
    if isinstance(renderable, Group):
        keys = tuple(drawn_key(part) for part in renderable.renderables)
        return None if None in keys else keys
    own = getattr(renderable, "shown_key", None)
    if own is not None:
        return own
    if isinstance(renderable, Table):
        columns = []
        for column in renderable.columns:
            cells = tuple(drawn_key(cell) for cell in (column.header, *column.cells))
            if None in cells:
                return None
            columns.append(
                ((column.overflow, str(column.style), column.min_width, column.no_wrap), cells)
            )
        return ("table", renderable.show_header, str(renderable.header_style), tuple(columns))
    return None


class _DrawnOnce(textual_widgets.Static):
    """A pane's `update` with what it shows already is no update, and one that cannot change
    the pane's size (a height and a width its CSS sets) lays nothing out: a refresh every half
    second mostly brings the same words, and each update that lays the screen out draws every
    pane on it again (tens of milliseconds of the UI thread beside a 5,000-row table,
    benchmarks/bench_app.py)."""

    _drawn_key: object | None = None

    def __init__(self, content: Any = "", **options: Any) -> None:
        super().__init__(shown(content), **options)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        key = drawn_key(content)
        if key is not None and key == self._drawn_key:
            return
        self._drawn_key = key
        height, width = self.styles.height, self.styles.width
        sized = height is not None and not height.is_auto and not (width and width.is_auto)
        super().update(shown(content), layout=layout and not sized)


class Static(_DrawnOnce):
    """Textual's Static, showing what it is given inert."""


class Label(_DrawnOnce, textual_widgets.Label):
    """Textual's Label, showing what it is given inert."""


CellT = TypeVar("CellT")


class DataTable(textual_widgets.DataTable[CellT]):
    def add_row(self, *cells: Any, **options: Any) -> Any:
        return super().add_row(*(cell(value) for value in cells), **options)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **options: Any) -> None:
        super().update_cell(row_key, column_key, cell(value), **options)

    def update_cell_at(self, coordinate: Any, value: Any, **options: Any) -> None:
        super().update_cell_at(coordinate, cell(value), **options)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """A cell's line, as Textual draws it (textual/widgets/_data_table.py
        `DataTable._render_cell`, Textual 8.2), made without rich's layout where the cell is
        one line of `Text` in a row one line high: every cell the app's tables hold. Textual
        renders each cell through `console.render_lines` of the cell padded and styled (about
        250 µs a cell, 3 ms a line of the node table); the same segments are made here
        directly (about 25 µs). Any other cell is Textual's to draw."""
        drawn = self._one_line_cell(row_index, column_index, base_style, width, cursor, hover)
        if drawn is not None:
            return drawn
        return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)

    def _one_line_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> list[list[Segment]] | None:
        if row_index < 0 or column_index < 0:
            return None  # the header and the row labels: drawn once, Textual's way
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return None
        row = self.rows.get(row_key)
        inner = width - 2 * self.cell_padding
        if row is None or row.height != 1 or row.auto_height or inner < 1:
            return None
        key = (  # Textual's own cache and key: a cell made either way is kept the same way
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        kept = self._cell_render_cache.get(key)
        if kept is not None:
            return kept
        cells = self._get_row_renderables(row_index).cells
        value = cells[column_index] if column_index < len(cells) else None
        if (
            type(value) is not Text
            or value.justify not in (None, "default", "left")
            or "\n" in value.plain
            or "\t" in value.plain
        ):
            return None
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            fixed,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        console = self.app.console
        text = value
        if text.cell_len > inner:  # cut, as a line that may not wrap is (`Text.truncate`)
            text = value.copy()
            text.truncate(inner, overflow=value.overflow or "fold")
        # (joined, as `Text.__rich_console__` joins its lines: the text's own style becomes a
        # span, which `Text.render` alone would leave out)
        joined = _JOIN.join((text,))
        padding = [Segment(" " * self.cell_padding)] if self.cell_padding else []
        line = [
            *padding,
            *Segment.adjust_line_length(list(joined.render(console, end="")), inner),
            *padding,
        ]
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index})
        drawn = [list(Segment.apply_style(line, pre_style + component_style, post_style))]
        self._cell_render_cache[key] = drawn
        return drawn


_JOIN = Text("\n")


def install_console(app: App[Any]) -> None:
    """The app's console as an `InertConsole`, as Textual builds its own (textual/app.py,
    `App.__init__`, Textual 8.2), with markup off: a string cell of a rich table is text."""
    app.console = InertConsole(
        color_system=constants.COLOR_SYSTEM,  # type: ignore[arg-type]
        file=app.console.file,
        markup=False,
        highlight=False,
        emoji=False,
        legacy_windows=False,
        _environ=app.console._environ,
        force_terminal=True,
        safe_box=False,
        soft_wrap=False,
    )
    # A crash's traceback quotes values too (a message, a label).
    app.error_console = InertConsole(markup=False, highlight=False, stderr=True)
