"""The confirmation a runbook's harm asks for: y/N for low harm, the node's or cluster's
name typed for high harm.

At 80x24 the prompt stays pinned at the bottom and the plan scrolls above it. The input
has no placeholder that looks like the answer; the short node name the table shows is
accepted where only one node has it; a wrong answer is said and can be typed again (esc
refuses). The harm line says how the change is reversed, if it can be.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Input

from mignurse.nodeview import short_name
from mignurse.runner.step import Harm
from mignurse.tui.shown import Label, Static

if TYPE_CHECKING:
    from textual.app import App


def harm_words(level: Harm, reversal: str) -> Text:
    """The harm in words, with what reverses it (never "hard to reverse" for a change one
    runbook puts back)."""
    if level >= Harm.HIGH:
        head = Text("HIGH HARM", style="bold red")
    elif level == Harm.LOW:
        head = Text("low harm", style="bold yellow")
    else:
        head = Text("no change", style="bold")
    if reversal:
        head.append(f" · {reversal}", style="")
    return head


class ConfirmScreen(ModalScreen[bool]):
    """y/N for low harm; the node or cluster name typed for high harm. Esc refuses; for
    low harm any key but y refuses (the default is no)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(False)", "Refuse"),
        Binding("pagedown", "scroll_plan(1)", "Plan down", show=False),
        Binding("pageup", "scroll_plan(-1)", "Plan up", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    #confirm-plan { height: 1fr; }
    #confirm-prompt { height: auto; border-top: solid $warning; dock: bottom; }
    #confirm-word, #confirm-word:focus { height: 1; border: none; padding: 0 1; }
    #confirm-word:focus { background: $boost; }
    #confirm-error { color: $error; height: auto; }
    #confirm-ask { height: auto; }
    """

    def __init__(
        self,
        level: Harm,
        plan_text: str,
        expected_word: str,
        *,
        reversal: str = "",
        accept: Callable[[str], bool] | None = None,
        shown_word: str = "",
    ) -> None:
        super().__init__()
        self.level = level
        self.plan_text = plan_text
        self.expected_word = expected_word
        self.shown_word = shown_word or expected_word  # the short node name, where unique
        self.reversal = reversal
        self._accept = accept or (lambda typed: typed == expected_word)
        self._answered = False

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="confirm-plan"):
                yield Static(Text(self.plan_text))
            with Vertical(id="confirm-prompt"):
                yield Label(harm_words(self.level, self.reversal), id="confirm-harm")
                if self.level >= Harm.HIGH:
                    yield Static(  # wraps: the whole line at 80 columns
                        Text.assemble(
                            "Type ", (self.shown_word, "bold"),
                            " and press enter to proceed; esc refuses; pgup/pgdn scroll the plan:",
                        ),
                        id="confirm-ask",
                    )  # fmt: skip
                    yield Input(id="confirm-word", placeholder="type the name here")
                    yield Static("", id="confirm-error")
                else:
                    yield Label(Text.assemble(("Proceed? ", "bold"), "[y/N] (any other key: no)"))

    def on_mount(self) -> None:
        if self.level >= Harm.HIGH:
            self.query_one("#confirm-word", Input).focus()

    def on_key(self, event: Key) -> None:
        if self.level >= Harm.HIGH or event.key in ("pageup", "pagedown"):
            return  # the word goes into the input; enter submits it; pgup/pgdn scroll
        # Low harm: y proceeds, any other key refuses (N is the default).
        event.stop()
        event.prevent_default()
        self.action_answer(event.key in ("y", "Y"))

    def accepts(self, typed: str) -> bool:
        return bool(typed.strip()) and self._accept(typed.strip())

    @on(Input.Submitted, "#confirm-word")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        typed = event.value.strip()
        if self.accepts(typed):
            self.action_answer(True)
            return
        # A typo must not send the operator back to the start: say so, let them retype.
        error = self.query_one("#confirm-error", Static)
        error.update(
            Text(
                f"{typed!r} is not {self.shown_word}: type it again, or esc refuses"
                if typed
                else f"type {self.shown_word}, or esc refuses"
            )
        )
        event.input.value = ""

    def action_scroll_plan(self, direction: int) -> None:
        plan = self.query_one("#confirm-plan", VerticalScroll)
        plan.scroll_to(y=plan.scroll_y + direction * max(plan.size.height - 1, 1), animate=False)

    def action_answer(self, ok: bool) -> None:
        if not self._answered:
            self._answered = True
            self.dismiss(ok)


class ModalConfirmer:
    """The engine's Confirmer, called from a run's worker thread: shows ConfirmScreen on the
    UI thread and waits for the answer (no when the app closes meanwhile)."""

    def __init__(
        self,
        app: App[Any],
        *,
        reversal: Callable[[], str] = lambda: "",
        accept_node: Callable[[str], str | None] = lambda typed: None,
    ) -> None:
        self.app = app
        self.reversal = reversal  # what reverses the run being confirmed, asked at confirm time
        self.accept_node = accept_node  # a typed node name → the full name, where unique

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        answered = threading.Event()
        answer = {"ok": False}

        def done(ok: bool | None) -> None:
            answer["ok"] = bool(ok)
            answered.set()

        # `CLUSTER/NODE` (`Plan.typed_word`): the node's short name is accepted after the
        # cluster's, where it names one node
        cluster, slash, node = expected_word.rpartition("/")
        prefix = cluster + slash

        def accept(typed: str) -> bool:
            return typed == expected_word or (
                typed.startswith(prefix) and self.accept_node(typed[len(prefix) :]) == node
            )

        short = prefix + short_name(node)
        screen = ConfirmScreen(
            level,
            plan_text,
            expected_word,
            reversal=self.reversal(),
            accept=accept,
            shown_word=short if accept(short) else expected_word,
        )
        try:
            self.app.call_from_thread(self.app.push_screen, screen, done)
        except RuntimeError:
            return False
        while not answered.wait(0.2):
            if not self.app.is_running:
                return False
        return answer["ok"]
