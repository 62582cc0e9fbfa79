"""Moving around the app: into a pool's nodes and back to the fleet, to a node, from pool
to pool, the cursor and pane keys, and `/`, each view's filter as you type.

`Navigation` changes what the views show (the pool, the filter) and lets the refresh loop
refill them; a filter still being typed that is not valid yet waits, said in the bar.
"""

from __future__ import annotations

import contextlib

from rich.text import Text
from textual import on
from textual.css.query import NoMatches
from textual.widgets import Input

from mignurse.fleetview import UNPOOLED
from mignurse.session import qualified, split_key
from mignurse.tui.appstate import FLEET, NODES
from mignurse.tui.filters import FilterError, RowFilter, parse
from mignurse.tui.refreshloop import RefreshLoop
from mignurse.tui.screens.vimkeys import move_focused
from mignurse.tui.shown import DataTable, Static

FILTER_DELAY = 0.15  # seconds of no typing before the filter applies


class Navigation(RefreshLoop):
    """Pools, nodes, cursors and filters."""

    @on(DataTable.RowSelected, f"#{FLEET}")
    def _pool_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_pool(str(event.row_key.value))

    def open_pool(self, pool: str | None) -> None:
        """The pool's nodes (None: every pool's)."""
        self._set_pool(None if pool == UNPOOLED else pool)
        if self.view != NODES:
            self._switch(NODES)

    def show_fleet(self) -> None:
        if self.view != FLEET:
            self._switch(FLEET)

    def jump_to_node(self, name: str) -> None:
        node = self.source.state.node(name)
        self.filters[NODES] = None
        context = split_key(name)[0]  # a key across clusters: the pool's is keyed alike
        self.open_pool(qualified(context, node.pool) if node is not None and node.pool else None)
        self._jump_target = name
        self._jump_tries = 0
        self.set_timer(0.1, self._jump_when_shown)

    def _jump_when_shown(self) -> None:
        try:
            table = self._node_table()
        except NoMatches:
            return  # the timer fired while the app closed
        name = self._jump_target
        if name in self._rows and not self._pending:
            table.move_cursor(row=table.get_row_index(name), animate=False)
            self._show_detail(name)
        elif self._jump_tries < 100:
            self._jump_tries += 1
            self.set_timer(0.1, self._jump_when_shown)

    def _set_pool(self, pool: str | None) -> None:
        self.pool_filter = pool
        self._reset_table()

    def action_next_pool(self) -> None:
        if not self._pools:
            return
        if self.pool_filter not in self._pools:
            self._set_pool(self._pools[0])
        else:
            index = self._pools.index(self.pool_filter)
            self._set_pool(self._pools[index + 1] if index + 1 < len(self._pools) else None)
        self._show_findings()

    def action_all_pools(self) -> None:
        if self.pool_filter is not None:
            self._set_pool(None)
            self._show_findings()

    def action_cursor(self, how: str) -> None:
        """j/k/g/G on whatever has the focus: a table's cursor, or a pane's scroll."""
        move_focused(self.focused, how)

    def action_pane(self, direction: int) -> None:
        """ctrl+d / ctrl+u: the pane below the table, half a page, the cursor left alone."""
        pane = self.own_widget("#detail-pane" if self.view == NODES else "#fleet-preview-pane")
        step = max(pane.scrollable_content_region.height // 2, 1)
        pane.scroll_to(y=pane.scroll_y + direction * step, animate=False)

    def action_filter(self) -> None:
        filter_input = self.own_widget("#filter", Input)
        current = self.row_filter
        filter_input.value = current.text if current else ""
        filter_input.display = True
        filter_input.focus()

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        """As you type: the rows follow after a short pause; a pattern still being typed
        that is not valid yet waits, said in the bar, not in a pop-up."""
        if not event.input.display:
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        view, text = self.view, event.value
        self._filter_timer = self.set_timer(FILTER_DELAY, lambda: self._live_filter(view, text))

    def _live_filter(self, view: str, text: str) -> None:
        try:
            row_filter = parse(text)
        except FilterError as exc:
            with contextlib.suppress(NoMatches):
                bar = self.own_widget("#nodes-bar" if view == NODES else "#fleet-bar", Static)
                bar.update(Text(f"filter /{text}: {exc}", style="yellow"))
            return
        current = self.filters[view]
        if (current.text if current else None) != (row_filter.text if row_filter else None):
            self._set_filter(view, row_filter)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        try:
            row_filter = parse(event.value)
        except FilterError as exc:
            self.notify(str(exc), severity="error", timeout=6)
            return
        event.input.display = False
        current = self.filters[self.view]
        if (current.text if current else None) != (row_filter.text if row_filter else None):
            self._set_filter(self.view, row_filter)
        self._focus_table()

    def _set_filter(self, view: str, row_filter: RowFilter | None) -> None:
        self.filters[view] = row_filter
        if view == NODES:
            self._reset_table()
        else:
            self.request_refresh(force=True)
        self._show_bars()
        self.refresh_bindings()
