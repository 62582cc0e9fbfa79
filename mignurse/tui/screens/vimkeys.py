"""j/k/g/G wherever the app shows something to move through, as on its tables: a table's or
a list's cursor, else a pane's scroll. The main screen has them as the app's keys; a modal
screen does not hand keys to the app's bindings, so each screen without a text field takes
`VIM_BINDINGS` and an `action_vim` that calls `move_focused`."""

from __future__ import annotations

from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.scroll_view import ScrollView
from textual.widget import Widget
from textual.widgets import OptionList

from mignurse.tui.shown import DataTable

VIM_BINDINGS: list[BindingType] = [
    Binding("j", "vim('down')", "Down", show=False),
    Binding("k", "vim('up')", "Up", show=False),
    Binding("g", "vim('top')", "Top", show=False),
    Binding("G", "vim('bottom')", "Bottom", show=False, key_display="G"),
]


def move_focused(focused: Widget | None, how: str) -> None:
    """Move `focused` one row down or up, or to the top or bottom (`how`)."""
    if isinstance(focused, DataTable):
        if how == "down":
            focused.action_cursor_down()
        elif how == "up":
            focused.action_cursor_up()
        elif focused.row_count:
            focused.move_cursor(row=0 if how == "top" else focused.row_count - 1)
    elif isinstance(focused, OptionList):
        {
            "down": focused.action_cursor_down,
            "up": focused.action_cursor_up,
            "top": focused.action_first,
            "bottom": focused.action_last,
        }[how]()
    elif isinstance(focused, (ScrollableContainer, ScrollView)):
        {
            "down": focused.scroll_down,
            "up": focused.scroll_up,
            "top": focused.scroll_home,
            "bottom": focused.scroll_end,
        }[how](animate=False)
