"""`R`: the runbooks that can apply to the selection, the ones its findings suggest first;
those with nothing to do here are named below the list with the reason, not offered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from mignurse.runner.schema import Runbook

SUMMARY_CHARS = 90  # the picker's one-line description


def first_sentence(description: str) -> str:
    """A runbook's description as one line: its first sentence, shortened."""
    text = " ".join(description.split())
    sentence = text.split(". ", 1)[0].rstrip(".")
    if len(sentence) > SUMMARY_CHARS:
        sentence = sentence[: SUMMARY_CHARS - 1].rstrip() + "…"
    return sentence


class RunbookPicker(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]
    DEFAULT_CSS = """
    RunbookPicker { align: center middle; }
    RunbookPicker > Vertical {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    RunbookPicker OptionList { height: auto; max-height: 1fr; }
    #picker-hidden { color: $text-muted; }
    """

    def __init__(
        self,
        books: Sequence[Runbook],
        suggested: set[str],
        where: str,
        *,
        cluster: str = "",
        hidden: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__()
        self.books = list(books)
        self.suggested = suggested
        self.where = where
        self.cluster = cluster
        self.hidden = list(hidden)  # (runbook, why it has nothing to do here)

    def compose(self) -> ComposeResult:
        options = []
        for book in self.books:
            prompt = Text()
            if book.name in self.suggested:
                prompt.append("suggested ", style="bold green")
            prompt.append(book.name, style="bold")
            prompt.append(f"  {book.title}")
            on = self.where if book.target == "node" else f"cluster {self.cluster}".strip()
            prompt.append(f"\n  {book.harm.name.lower()} harm, on {on}", style="dim")
            summary = first_sentence(book.description)
            if summary:
                prompt.append(f" · {summary}", style="dim")
            options.append(Option(prompt, id=book.name))
        with Vertical():
            yield Label(Text(f"Runbooks for {self.where}", style="bold"))
            yield OptionList(*options, id="runbook-list")
            if self.hidden:
                why = "; ".join(f"{name} ({reason})" for name, reason in self.hidden)
                yield Label(Text(f"not offered here: {why}"), id="picker-hidden")
            yield Label(Text("enter: params and plan · esc: back", style="dim"))

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
