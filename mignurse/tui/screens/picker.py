"""`R`: every runbook, always in the same order (by name), each either possible on the
selection or shown as not possible with the reason; the ones its findings suggest are
labelled, and the cursor starts on the most urgent of them.

Whether a runbook is possible is said in two steps: at once what the app knows (an
uncordon of a node that is not cordoned, a resume where repair was not paused by mignurse),
then, read off the UI thread, what its own checks say (each runbook is planned read-only,
as `mignurse run --dry-run` plans it): one whose check refuses (reapply-mig-no-hooks on a
NotReady node) is not possible, with that refusal, and never suggested. Entries change in
place as the checks come back: nothing moves under the cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from mignurse.runner.schema import Runbook
from mignurse.tui.screens.fit import fit_to_screen
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import Label, Static, inert_text

SUMMARY_CHARS = 90  # the picker's one-line description

# What a runbook's check says: "" possible, a reason when it would be refused, None when it
# cannot be told before its params are asked.
Check = Callable[[str], "str | None"]


def first_sentence(description: str) -> str:
    """A runbook's description as one line: its first sentence, shortened."""
    text = " ".join(description.split())
    sentence = text.split(". ", 1)[0].rstrip(".")
    if len(sentence) > SUMMARY_CHARS:
        sentence = sentence[: SUMMARY_CHARS - 1].rstrip() + "…"
    return sentence


@dataclass
class Entry:
    """One runbook in the picker and what is known of it here."""

    book: Runbook
    why_not: str = ""  # "" while it may run; else why it cannot, here and now
    checking: bool = False  # its own checks are still being read

    @property
    def possible(self) -> bool:
        return not self.why_not


class RunbookList(OptionList):
    """The picker's list: it knows whether the operator moved its cursor (arrows, j/k, a
    click), so a check that comes back later never moves the cursor they chose."""

    moved = False

    def action_cursor_down(self) -> None:
        self.moved = True
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        self.moved = True
        super().action_cursor_up()

    def action_first(self) -> None:
        self.moved = True
        super().action_first()

    def action_last(self) -> None:
        self.moved = True
        super().action_last()

    def action_page_down(self) -> None:
        self.moved = True
        super().action_page_down()

    def action_page_up(self) -> None:
        self.moved = True
        super().action_page_up()

    async def _on_click(self, event: events.Click) -> None:
        self.moved = True
        await super()._on_click(event)


class Checked(Message):
    """One runbook's checks, read off the UI thread."""

    def __init__(self, name: str, why_not: str | None) -> None:
        super().__init__()
        self.name = name
        self.why_not = why_not


class RunbookPicker(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    RunbookPicker { align: center middle; }
    RunbookPicker > Vertical {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    RunbookPicker OptionList { height: auto; }
    #picker-repair { color: $text-muted; }
    #picker-keys { dock: bottom; height: 1; color: $text-muted; }
    """

    def __init__(
        self,
        books: Sequence[tuple[Runbook, str]],
        suggested: Sequence[str],
        where: str,
        *,
        cluster: str = "",
        repair: str = "",
        check: Check | None = None,
    ) -> None:
        """`books`: every runbook with why it cannot run here ("" when it may), in the
        order shown; `suggested`: the ones the findings name, most urgent first."""
        super().__init__()
        self.entries = {
            book.name: Entry(book, why, checking=check is not None and not why)
            for book, why in books
        }
        self.suggested = list(suggested)
        self.where = where
        self.cluster = cluster
        self.repair = repair  # the repair state as a clause ("node repair is on")
        self.check = check

    # -- what each entry says

    def prompt(self, entry: Entry) -> Text:
        book = entry.book
        prompt = Text()
        if not entry.possible:
            prompt.append("not possible ", style="bold red")
        elif entry.checking:
            prompt.append("checking… ", style="dim")
        elif book.name in self.suggested:
            prompt.append("suggested ", style="bold green")
        prompt.append(book.name, style="bold" if entry.possible else "dim bold")
        prompt.append(f"  {book.title}", style="" if entry.possible else "dim")
        on = self.where if book.target == "node" else f"cluster {self.cluster}".strip()
        prompt.append(f"\n  {book.harm.name.lower()} harm, on {on}", style="dim")
        if not entry.possible:
            prompt.append(f"\n  {entry.why_not}", style="dim")
        else:
            summary = first_sentence(book.description)
            if summary:
                prompt.append(f" · {summary}", style="dim")
        return prompt

    def _option(self, entry: Entry) -> Option:
        return Option(
            inert_text(self.prompt(entry)), id=entry.book.name, disabled=not entry.possible
        )

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"Runbooks for {self.where}", style="bold"))
            if self.repair:
                yield Static(Text(self.repair), id="picker-repair")
            yield RunbookList(*(self._option(e) for e in self.entries.values()), id="runbook-list")
            yield Static(
                Text("enter: params and plan · j/k: move · esc: back", style="dim"),
                id="picker-keys",
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.focus()
        self.call_after_refresh(self._fit)
        self._highlight_best()
        if self.check is not None and any(e.checking for e in self.entries.values()):
            self._check([n for n, e in self.entries.items() if e.checking])

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """The list scrolls; the title and the keys line stay on screen."""
        options = self.query_one(RunbookList)
        fit_to_screen(options, self.size.height)
        options.scroll_to_highlight()

    # -- the cursor

    def best(self) -> str | None:
        """The entry the cursor starts on: the most urgent suggestion that may run, else
        the first entry that may run."""
        possible = [n for n, e in self.entries.items() if e.possible]
        return next((n for n in self.suggested if n in possible), possible[0] if possible else None)

    def _highlight_best(self) -> None:
        best = self.best()
        if best is not None:
            options = self.query_one(OptionList)
            options.highlighted = options.get_option_index(best)

    def action_vim(self, how: str) -> None:
        """j/k/g/G, as on the app's tables."""
        move_focused(self.query_one(RunbookList), how)

    # -- the checks, off the UI thread

    @work(thread=True, exclusive=True, group="picker-checks", exit_on_error=False)
    def _check(self, names: list[str]) -> None:
        """One runbook after the other, the suggested ones first: each check may run read-only
        commands on the node, and a node is asked one thing at a time."""
        check = self.check
        assert check is not None
        for name in sorted(names, key=lambda n: n not in self.suggested):
            if not self.is_attached:
                return  # the picker was closed: nobody reads the rest
            try:
                why = check(name)
            except Exception as exc:  # noqa: BLE001 - said on the entry, never a crash
                why = f"could not be checked: {type(exc).__name__}: {exc}"
            self.post_message(Checked(name, why))

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        entry = self.entries.get(message.name)
        if entry is None:
            return
        entry.checking = False
        entry.why_not = message.why_not or ""
        options = self.query_one(RunbookList)
        options.replace_option_prompt(entry.book.name, self.prompt(entry))
        if not entry.possible:  # disabling the highlighted option moves the cursor on
            options.disable_option(entry.book.name)
            if not options.moved:
                self._highlight_best()

    @property
    def checking(self) -> bool:
        return any(e.checking for e in self.entries.values())

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
