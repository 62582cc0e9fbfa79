"""`drawn_key`: what a pane would show, compared with what it showed, so that a pane is drawn
again only when its words, styles or layout changed; a renderable it cannot read is always
drawn."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mignurse.tui.detail import drawn_key


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
