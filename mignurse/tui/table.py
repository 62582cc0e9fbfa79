"""A DataTable that can drop many rows at once, and take a whole new order at once.

`DataTable.remove_row` rebuilds the table's row index on every call: 5 ms a row at 5,000
rows, so a minute of churn on a big cluster (a few nodes gone, a few replacements) froze
the UI for 400 ms or forced a full rebuild (benchmarks/bench_app.py). `remove_rows` does
the same bookkeeping once for the whole batch. It touches DataTable internals the way
`remove_row` itself does (Textual 8.2); tests/tui cover it, so an upgrade that changes
them fails there, not on a user's screen.

`order_by` sets the row order from a list of keys computed off the UI thread: `sort` would
call a key function on every row's cells, on the UI thread, at every change of a badge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual._two_way_dict import TwoWayDict
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey


class BatchTable(DataTable[Any]):
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
