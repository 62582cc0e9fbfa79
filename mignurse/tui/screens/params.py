"""A runbook's params: one input per param, defaults filled; enter checks them all through
the runbook's schema and goes on to the plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input

from mignurse.runner.schema import ParamSpec, Runbook, RunbookError
from mignurse.tui.screens.fit import fit_to_screen
from mignurse.tui.shown import Label, Static


def shown_default(param: ParamSpec, hint: Any) -> str:
    value = hint if hint is not None else param.default
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ParamsScreen(ModalScreen[dict[str, Any] | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]
    DEFAULT_CSS = """
    ParamsScreen { align: center middle; }
    ParamsScreen > Vertical {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    ParamsScreen VerticalScroll { height: auto; }
    ParamsScreen Input, ParamsScreen Input:focus {
        height: 1; border: none; padding: 0 1; margin-bottom: 1;
    }
    ParamsScreen Input:focus { background: $boost; }
    #param-error { color: $error; height: auto; dock: bottom; margin-bottom: 1; }
    #param-keys { dock: bottom; height: 1; }
    """

    def __init__(
        self,
        book: Runbook,
        params: Sequence[ParamSpec],
        hints: dict[str, Any],
        validate: Callable[[dict[str, str]], dict[str, Any]],
    ) -> None:
        super().__init__()
        self.book = book
        self.params = list(params)
        self.hints = hints
        self.validate = validate

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"{self.book.name}: {self.book.title}", style="bold"))
            yield from self._fields()
            # Docked: the keys and an error stay in view however many params scroll above.
            yield Static("", id="param-error")
            yield Label(
                Text("enter: plan · tab: next field · esc: back", style="dim"), id="param-keys"
            )

    def _fields(self) -> ComposeResult:
        with VerticalScroll():
            for param in self.params:
                kind = param.type
                if param.choices:
                    kind += f": {' | '.join(param.choices)}"
                label = Text(f"{param.name}", style="bold")
                label.append(f" ({kind}{', required' if param.required else ''})", style="dim")
                if param.help:
                    label.append(f"  {param.help}")
                yield Static(label)
                yield Input(
                    shown_default(param, self.hints.get(param.name)),
                    id=f"param-{param.name}",
                    placeholder="empty: not set" if not param.required else "required",
                )

    def on_mount(self) -> None:
        inputs = list(self.query(Input))
        if inputs:
            inputs[0].focus()
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """The params scroll; the title, the error and the keys line stay on screen."""
        fit_to_screen(self.query_one(VerticalScroll), self.size.height)

    def given(self) -> dict[str, str]:
        values = {}
        for param in self.params:
            text = self.query_one(f"#param-{param.name}", Input).value.strip()
            if text:
                values[param.name] = text
        return values

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            resolved = self.validate(self.given())
        except RunbookError as exc:
            self.query_one("#param-error", Static).update(Text(str(exc)))
            return
        self.dismiss(resolved)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
