"""`drawn_key`: what a pane would show, compared with what it showed, so that a pane is drawn
again only when its words, styles or layout changed (`shown.Static.update`); a renderable it
cannot read is always drawn."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult

from mignurse.tui.shown import Static, drawn_key


def table(*rows: tuple[str, str], style: str = "") -> Table:
    made = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    made.add_column("CONDITION", overflow="fold")
    made.add_column("STATUS")
    for condition, status in rows:
        made.add_row(condition, Text(status, style=style))
    return made


def test_the_same_words_and_styles_are_the_same_key() -> None:
    one = Group(Text("Conditions", style="bold"), table(("Ready", "False"), style="red"))
    two = Group(Text("Conditions", style="bold"), table(("Ready", "False"), style="red"))
    assert drawn_key(one) is not None and drawn_key(one) == drawn_key(two)


def test_a_changed_word_style_or_layout_is_another_key() -> None:
    base = drawn_key(Group(Text("x"), table(("Ready", "False"), style="red")))
    assert base != drawn_key(Group(Text("x"), table(("Ready", "True"), style="red")))
    assert base != drawn_key(Group(Text("x"), table(("Ready", "False"), style="green")))
    assert base != drawn_key(Group(Text("x", style="dim"), table(("Ready", "False"), style="red")))
    assert base != drawn_key(Group(Text("x", no_wrap=True), table(("Ready", "False"), style="red")))
    assert drawn_key(Text("a b", style="bold")) != drawn_key(Text.assemble(("a", "bold"), " b"))


def test_what_it_cannot_read_is_always_drawn() -> None:
    assert drawn_key(Panel("x")) is None
    assert drawn_key(Group(Text("x"), Panel("y"))) is None


def test_a_pane_updated_with_what_it_shows_is_not_laid_out_or_drawn_again() -> None:
    class _Panes(App[None]):
        CSS = "#line { height: 1; }"

        def compose(self) -> ComposeResult:
            yield Static("", id="auto")
            yield Static("", id="line")

    async def run() -> dict[str, list[bool]]:
        app = _Panes()
        refreshed: dict[str, list[bool]] = {"auto": [], "line": []}
        async with app.run_test(size=(60, 10)):
            for name, laid_out in refreshed.items():
                pane = app.query_one(f"#{name}", Static)
                original = pane.refresh

                def refresh(
                    *args: Any, _to: Any = original, _into: Any = laid_out, **kw: Any
                ) -> Any:
                    _into.append(bool(kw.get("layout")))
                    return _to(*args, **kw)

                pane.refresh = refresh  # type: ignore[method-assign]
                for content in (
                    Text("3 findings", style="bold"),
                    Text("3 findings", style="bold"),  # the same: nothing to do
                    Text("3 findings", style="red"),  # another style: drawn
                    Text("4 findings", style="red"),  # other words: drawn
                    Panel("x"),  # no key: always drawn
                    Panel("x"),
                ):
                    pane.update(content)
        return refreshed

    refreshed = asyncio.run(run())
    # a pane as tall as what it shows is laid out again; one whose CSS sets its size is not
    assert refreshed == {"auto": [True] * 5, "line": [False] * 5}
