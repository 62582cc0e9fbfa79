"""A full-screen pager (`less` in the app): `l` a node's journals, `d` a node described,
`f` every finding. Only the lines on screen are drawn, so a 200,000-line journal pages as
fast as a short one.

Keys: j/k, up/down, pgup/pgdn, space, g/G (top, bottom), `n`/`N` the next and previous
marked line (the lines a finding cites, or `/` search matches), `/` search, `[`/`]` the
previous and next page (another journal), esc or q back.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input

from mignurse.inert import inert
from mignurse.tui.shown import Static, inert_text

RENDERED_KEPT = 2000  # rendered lines kept; the rest are drawn again when scrolled back


@dataclass
class Page:
    """One document of the pager: a title, its lines, and the lines worth jumping to."""

    title: str
    lines: Sequence[Text]
    marks: Sequence[int] = field(default_factory=tuple)  # line indices, ascending
    note: str = ""  # what the marks are ("lines the findings cite")
    wrap: bool = False  # prose (the findings): lines wrap to the screen, the rest indented

    def __post_init__(self) -> None:
        # Journals and findings quote nodes: every line inert before it is measured.
        self.title = inert(self.title)
        self.note = inert(self.note)
        self.lines = [inert_text(_tabs_expanded(line), lines=False) for line in self.lines]


def _tabs_expanded(line: Text) -> Text:
    """A journal's tabs (Go stack traces indent with them) as spaces to the next 8-column
    stop, as `less` shows them, not as a visible `\\t`."""
    if "\t" not in line.plain:
        return line
    line = line.copy()
    line.expand_tabs(8)
    return line


def wrapped(line: Text, width: int) -> list[Text]:
    """`line` as screen rows of at most `width` cells, cut at spaces where it can be;
    the rows after the first are indented two cells past the line's own indent."""
    plain = line.plain
    if cell_len(plain) <= width or width < 8:
        return [line]
    indent = min(len(plain) - len(plain.lstrip(" ")) + 2, width // 2)
    cuts: list[int] = []
    start, room = 0, width
    while cell_len(plain[start:]) > room:
        cut = start + room
        space = plain.rfind(" ", start + 1, cut + 1)
        if space > start:
            cut = space + 1
        cuts.append(cut)
        start, room = cut, width - indent
    first, *rest = line.divide(cuts)
    first.rstrip()
    rows = [first]
    for part in rest:
        part.rstrip()
        rows.append(Text(" " * indent) + part)
    return rows


class LinesView(ScrollView, can_focus=True):
    """Lines drawn on demand (Textual's Line API), with one highlighted line."""

    DEFAULT_CSS = """
    LinesView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: Sequence[Text] = ()  # the rows on screen (a page's lines, wrapped or not)
        self.marked: set[int] = set()  # rows
        self.current: int | None = None  # the row n/N landed on
        self._strips: dict[int, Strip] = {}
        self._source: Sequence[Text] = ()  # the page's own lines
        self._wrap = False
        self._first_rows: list[int] = []  # each line's first row
        self._laid_for = 0  # the width the rows were wrapped for

    def show(
        self, lines: Sequence[Text], marked: Sequence[int] = (), *, wrap: bool = False
    ) -> None:
        """A page's lines (`marked`: line indices), wrapped to the view's width with `wrap`."""
        self._source = lines
        self._wrap = wrap
        self._layout()
        self.marked = {self.row_of(i) for i in marked}
        self.current = None
        self.scroll_to(0, 0, animate=False)
        self.refresh()

    def row_of(self, index: int) -> int:
        """The first row of the page's line `index`."""
        return self._first_rows[index] if index < len(self._first_rows) else index

    def line_at(self, row: int) -> int:
        """The page's line that `row` shows (part of)."""
        if not self._first_rows:
            return row
        return max(bisect.bisect_right(self._first_rows, row) - 1, 0)

    def _layout(self) -> None:
        width = self.scrollable_content_region.width or self.app.size.width
        if self._wrap:
            rows: list[Text] = []
            self._first_rows = []
            for line in self._source:
                self._first_rows.append(len(rows))
                rows.extend(wrapped(line, max(width - 1, 1)))
            self.lines = rows
        else:
            self.lines = self._source
            self._first_rows = []
        self._laid_for = width
        self._strips = {}
        widest = max((line.cell_len for line in self.lines[:RENDERED_KEPT]), default=0)
        self.virtual_size = Size(
            min(widest, width - 1) + 1 if self._wrap else widest + 1, len(self.lines)
        )

    def on_resize(self) -> None:
        """Wrapped rows follow the width; the line at the top and the marks stay."""
        width = self.scrollable_content_region.width
        if not self._wrap or width == self._laid_for:
            return
        top = self.line_at(int(self.scroll_offset.y))
        marked = {self.line_at(row) for row in self.marked}
        current = self.line_at(self.current) if self.current is not None else None
        self._layout()
        self.marked = {self.row_of(i) for i in marked}
        self.current = self.row_of(current) if current is not None else None
        self.scroll_to(0, self.row_of(top), animate=False)
        self.refresh()

    def goto(self, index: int) -> None:
        self.current = index
        self._strips.pop(index, None)
        top = max(index - self.scrollable_content_region.height // 3, 0)
        self.scroll_to(0, top, animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(index)
        if strip is None or index == self.current:
            text = self.lines[index]
            if index == self.current:
                text = text.copy()
                text.stylize("reverse")
            elif index in self.marked:
                text = text.copy()
                text.stylize("bold")
            segments = list(text.render(self.app.console))
            strip = Strip([s for s in segments if s.text != "\n"] or [Segment("")])
            if len(self._strips) > RENDERED_KEPT:
                self._strips.clear()
            self._strips[index] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, Style()).apply_offsets(scroll_x, index)


class PagerScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("j", "down", "Down", show=False),
        Binding("k", "up", "Up", show=False),
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "Bottom", show=False, key_display="G"),
        Binding("space", "page_down", "Page down", show=False),
        Binding("n", "next_mark", "Next"),
        Binding("N", "previous_mark", "Previous", key_display="N"),
        Binding("slash", "search", "Search", key_display="/"),
        Binding("left_square_bracket", "page(-1)", "Prev page", key_display="["),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]"),
    ]
    DEFAULT_CSS = """
    PagerScreen { background: $background; }
    #pager-title { padding: 0 1; background: $boost; height: auto; }
    #pager-search { dock: bottom; margin-bottom: 1; display: none; }
    """

    def __init__(self, pages: Sequence[Page], *, start: int = 0, at_mark: bool = False) -> None:
        super().__init__()
        self.pages = list(pages)
        self.index = min(max(start, 0), max(len(self.pages) - 1, 0))
        self.at_mark = at_mark  # open on the first marked line
        self.search: re.Pattern[str] | None = None
        self.found: list[int] = []

    def compose(self) -> ComposeResult:
        yield Static(id="pager-title")
        yield LinesView(id="pager-lines")
        yield Input(id="pager-search", placeholder="search (a regex): enter finds, esc closes")
        yield Footer()

    def on_mount(self) -> None:
        self._show()
        self.query_one(LinesView).focus()

    @property
    def page(self) -> Page:
        return self.pages[self.index]

    @property
    def view(self) -> LinesView:
        return self.query_one(LinesView)

    def _marks(self) -> list[int]:
        """The rows n/N jump between: the search's matches, else the page's marked lines."""
        lines = self.found if self.search is not None else list(self.page.marks)
        return [self.view.row_of(i) for i in lines]

    def _show(self) -> None:
        page = self.page
        self.search = None
        self.found = []
        self.view.show(page.lines, page.marks, wrap=page.wrap)
        self._title()
        if self.at_mark and page.marks:
            self.view.goto(self.view.row_of(page.marks[0]))
        self.refresh_bindings()

    def _title(self) -> None:
        page = self.page
        title = Text(page.title, style="bold")
        title.append(f"  {len(page.lines)} lines", style="dim")
        marks = self._marks()
        if self.search is not None:
            title.append(f" · /{self.search.pattern}: {len(marks)} found", style="bold yellow")
        elif marks:
            title.append(f" · {len(marks)} {page.note or 'marked'}", style="bold yellow")
        if len(self.pages) > 1:
            others = " ".join(
                f"[{p.title.split(' ', 1)[0]}]" if i == self.index else p.title.split(" ", 1)[0]
                for i, p in enumerate(self.pages)
            )
            title.append(f"\n[ ] pages: {others}", style="dim")
        self.query_one("#pager-title", Static).update(title)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_mark", "previous_mark"):
            return bool(self._marks())
        if action == "page":
            return len(self.pages) > 1
        return True

    def action_close(self) -> None:
        search = self.query_one("#pager-search", Input)
        if search.display:
            search.display = False
            self.view.focus()
            return
        self.dismiss(None)

    def action_down(self) -> None:
        self.view.scroll_down(animate=False)

    def action_up(self) -> None:
        self.view.scroll_up(animate=False)

    def action_top(self) -> None:
        self.view.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.view.scroll_end(animate=False)

    def action_page_down(self) -> None:
        self.view.scroll_page_down(animate=False)

    def action_next_mark(self) -> None:
        self._jump(forward=True)

    def action_previous_mark(self) -> None:
        self._jump(forward=False)

    def _jump(self, *, forward: bool) -> None:
        marks = self._marks()
        if not marks:
            return
        view = self.view
        here = view.current if view.current is not None else (-1 if forward else len(view.lines))
        if forward:
            after = [m for m in marks if m > here]
            view.goto(after[0] if after else marks[0])
        else:
            before = [m for m in marks if m < here]
            view.goto(before[-1] if before else marks[-1])

    def action_page(self, step: int) -> None:
        if len(self.pages) > 1:
            self.index = (self.index + step) % len(self.pages)
            self._show()

    def action_search(self) -> None:
        search = self.query_one("#pager-search", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#pager-search")
    def _searched(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        event.input.display = False
        self.view.focus()
        if not text:
            self.search, self.found = None, []
        else:
            try:
                pattern = re.compile(text, re.IGNORECASE)
            except re.error as exc:
                self.notify(f"not a regular expression: {exc}", severity="error", timeout=5)
                return
            self.search = pattern
            self.found = [i for i, line in enumerate(self.page.lines) if pattern.search(line.plain)]
            self.view.marked = set(self._marks())
            self.view._strips = {}
            self.view.refresh()
            if self.found:
                self.view.current = None
                self._jump(forward=True)
        self._title()
        self.refresh_bindings()

    def shown_text(self) -> str:
        """What the pager shows now, as plain text (the title and the visible lines)."""
        view = self.view
        top = int(view.scroll_offset.y)
        height = view.scrollable_content_region.height
        return "\n".join(line.plain for line in view.lines[top : top + height])
