"""The rich console every face draws through: what it prints is inert (see
docs/architecture.md, "Text from outside"). Its own module, so that rich loads only where
something is drawn with it (`render.console_for`, the app)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from mignurse.inert import inert


class InertConsole(Console):
    """A rich console whose output holds no control, escape or invisible character but the
    ones rich itself writes for styles and cursor moves, and no hyperlink: what a renderable's
    text still holds is shown by `inert`. Text should be made inert before it is laid out
    (`inert`, `cell_text`), so columns line up; this is the net under it."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text, style, control = segment
            if control:
                yield segment
                continue
            shown = inert(text, lines=True)
            if style is not None and style.link:
                style = style.update_link(None)
            elif shown is text:
                yield segment
                continue
            yield Segment(shown, style)

    def render_str(self, text: str, **options: Any) -> Text:
        """A string cell or line made inert before it is measured: columns line up."""
        return super().render_str(inert(text, lines=True), **options)
