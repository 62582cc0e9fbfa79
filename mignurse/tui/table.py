"""A DataTable that can drop many rows at once, and take a whole new order at once.

`DataTable.remove_row` rebuilds the table's row index on every call: 5 ms a row at 5,000
rows, so a minute of churn on a big cluster (a few nodes gone, a few replacements) froze
the UI for 400 ms or forced a full rebuild (benchmarks/bench_app.py). `remove_rows` does
the same bookkeeping once for the whole batch. It touches DataTable internals the way
`remove_row` itself does (Textual 8.2); tests/tui cover it, so an upgrade that changes
them fails there, not on a user's screen.

`order_by` sets the row order from a list of keys computed off the UI thread: `sort` would
call a key function on every row's cells, on the UI thread, at every change of a badge.

`set_widths` takes the column widths measured off the UI thread too (cells already cut to
them): a cell that got shorter made DataTable measure every cell of its column again, and
every new row was measured on idle, hundreds of milliseconds at 5,000 rows.

Every row the app places is one line high, so a line of the table is a row: line y is the
row at index y, the table is as tall as it has rows. DataTable finds both by walking every
row in order (`_y_offsets`, `ordered_rows`) each frame, again after each change, since every
change (a cell updated, the order set) bumps the count its caches are keyed by: at 5,000
rows about 10 ms of each frame of a refresh, and a walk per cursor move. Here they are
looked up directly while no row of another height was ever added; Textual's walks stay for
those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from textual._two_way_dict import TwoWayDict
from textual.coordinate import Coordinate
from textual.geometry import Region, Size, Spacing
from textual.widgets.data_table import CellKey, RowKey

from mignurse.tui.shown import DataTable


class BatchTable(DataTable[Any]):
    measured = False  # the column widths come from set_widths: no measuring here
    # Called as the cursor moves, before the next frame is drawn: RowHighlighted arrives a
    # message later, and a frame between them showed the new row beside the old row's detail.
    on_cursor_moved: Callable[[], None] | None = None

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        if old != new and self.on_cursor_moved is not None:
            self.on_cursor_moved()

    def set_widths(self, widths: Mapping[str, int]) -> None:
        """Each column as wide as `widths` says (by column key); unnamed columns keep theirs."""
        for key, column in self.columns.items():
            width = widths.get(str(key.value))
            if width is not None:
                column.content_width = width
        self.measured = True
        self._require_update_dimensions = True
        self._update_count += 1  # the rendered lines were cut to the old widths
        self.refresh()

    _tall_rows = False  # a row of another height than one line was added since the last clear

    def add_row(self, *cells: Any, **options: Any) -> Any:
        if options.get("height", 1) != 1:
            self._tall_rows = True
        return super().add_row(*cells, **options)

    def clear(self, columns: bool = False) -> BatchTable:
        self.measured = False
        super().clear(columns)
        self._tall_rows = False
        return self

    @property
    def _total_row_height(self) -> int:
        if self._tall_rows:
            return super()._total_row_height
        return self.row_count

    def _get_offsets(self, y: int) -> tuple[RowKey, int]:
        """The row at line `y` of the table (the header's first) and the line within it."""
        if self._tall_rows:
            return super()._get_offsets(y)
        if self.show_header:
            if y < self.header_height:
                return self._header_row_key, y
            y -= self.header_height
        key = self._row_locations.get_key(y) if y >= 0 else None
        if key is None:
            raise LookupError(f"Y coord {y!r} is greater than total height")
        return key, 0

    def _get_cell_region(self, coordinate: Coordinate) -> Region:
        if self._tall_rows:
            return super()._get_cell_region(coordinate)
        if not self.is_valid_coordinate(coordinate):
            return Region(0, 0, 0, 0)
        row_index, column_index = coordinate
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        x = self._row_label_column_width + sum(widths[:column_index])
        return Region(x, row_index + self._header_lines, widths[column_index], 1)

    def _get_row_region(self, row_index: int) -> Region:
        if self._tall_rows:
            return super()._get_row_region(row_index)
        if not self.is_valid_row_index(row_index):
            return Region(0, 0, 0, 0)
        width = self._row_label_column_width + sum(
            column.get_render_width(self) for column in self.columns.values()
        )
        return Region(0, row_index + self._header_lines, max(self.size.width, width), 1)

    def _get_fixed_offset(self) -> Spacing:
        if self._tall_rows:
            return super()._get_fixed_offset()
        left = self._row_label_column_width + sum(
            column.get_render_width(self) for column in self.ordered_columns[: self.fixed_columns]
        )
        return Spacing(self._header_lines + min(self.fixed_rows, self.row_count), 0, 0, left)

    @property
    def _header_lines(self) -> int:
        return self.header_height if self.show_header else 0

    def _update_dimensions(self, new_rows: Iterable[Any]) -> None:
        if not self.measured:
            super()._update_dimensions(new_rows)
            return
        # Row heights are all 1 and the widths are given: only the virtual size is left.
        width = sum(column.get_render_width(self) for column in self.columns.values())
        self.virtual_size = Size(
            width + self._row_label_column_width, self._total_row_height + self._header_lines
        )

    def remove_rows(self, keys: Iterable[str]) -> None:
        """Remove every row whose key is in `keys` (unknown keys are ignored)."""
        names = set(keys)
        locations = self._row_locations
        doomed = [key for key in locations if key.value in names]
        if not doomed:
            return
        if len(doomed) == 1:
            self.remove_row(doomed[0])
            return
        self._require_update_dimensions = True
        self.check_idle()
        gone = set(doomed)
        kept = sorted((locations.get(key), key) for key in locations if key not in gone)
        self._row_locations = TwoWayDict({key: index for index, (_, key) in enumerate(kept)})
        for key in doomed:
            for column_key in self._data.get(key, {}):
                self._updated_cells.discard(CellKey(key, column_key))
            del self.rows[key]
            del self._data[key]
        self.cursor_coordinate = self.cursor_coordinate
        self.hover_coordinate = self.hover_coordinate
        self._update_count += 1
        self.refresh(layout=True)

    def order_by(self, keys: Iterable[str]) -> None:
        """Rows in the order of `keys`; rows not named keep their order, after them."""
        by_value = {key.value: key for key in self._row_locations}
        ordered = [by_value[k] for k in keys if k in by_value]
        named = set(ordered)
        locations = self._row_locations
        ordered += sorted(
            (key for key in locations if key not in named), key=lambda key: locations.get(key) or 0
        )
        self._row_locations = TwoWayDict({key: index for index, key in enumerate(ordered)})
        self._update_count += 1
        self.refresh()
