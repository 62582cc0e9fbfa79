"""Dialogs that fit the terminal: a dialog's one scrolling part (the runbook list, the params)
is capped so that the rest of the dialog, its title and its keys line, stays on screen at
80x24 as at 120x40. CSS cannot say "the screen less the other rows" of a box whose height
follows its content, so the cap is set from the laid-out sizes, again on every resize."""

from __future__ import annotations

from textual.widget import Widget

MIN_ROWS = 3


def fit_to_screen(flexible: Widget, screen_rows: int) -> None:
    """Cap `flexible`'s height so its parent box, with every other child, fits in
    `screen_rows`."""
    box = flexible.parent
    if not isinstance(box, Widget):
        return
    others = sum(
        child.outer_size.height + child.styles.margin.top + child.styles.margin.bottom
        for child in box.children
        if child is not flexible and child.display
    )
    chrome = box.styles.gutter.top + box.styles.gutter.bottom  # border and padding
    cap = max(screen_rows - chrome - others, MIN_ROWS)
    if flexible.styles.max_height is None or flexible.styles.max_height.value != cap:
        flexible.styles.max_height = cap
