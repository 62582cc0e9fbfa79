"""A runbook's plan before anything changes: every step's changes (old → new), node
commands, notes and blocked checks, read from the cluster in a worker; enter goes on to
the confirmation and the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer

from mignurse.nodeview import short_name
from mignurse.render import plan_markup
from mignurse.runner.engine import Runner
from mignurse.runner.plan import Plan
from mignurse.runner.step import Harm
from mignurse.tui.launcher import RunbookLauncher, RunRequest
from mignurse.tui.screens.run import RUNNER_ERRORS
from mignurse.tui.screens.vimkeys import VIM_BINDINGS, move_focused
from mignurse.tui.shown import Static


def confirm_words(harm: Harm, targets: Sequence[str], cluster: str) -> str:
    if harm == Harm.NONE:
        return "no confirmation (it changes nothing)"
    if harm == Harm.LOW:
        return "confirm with y/N"
    if len(targets) > 1:
        return f"confirm by typing {len(targets)} nodes"
    word = targets[0] if targets and targets[0] != "cluster" else cluster
    return f"confirm by typing {short_name(word)}"


class Planned(Message):
    """The plan worker's result: the runners built, their plans, or why none."""

    def __init__(self, runners: list[Runner], plans: list[Plan], error: str) -> None:
        super().__init__()
        self.runners = runners
        self.plans = plans
        self.error = error


class PlanScreen(ModalScreen[list[Runner] | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        Binding("enter", "run", "Run…"),
        *VIM_BINDINGS,
    ]
    DEFAULT_CSS = """
    PlanScreen { background: $background; }
    #plan-title { padding: 0 1; background: $boost; }
    #plan-body { height: 1fr; padding: 0 1; }
    #plan-verdict { padding: 0 1; height: auto; }
    """

    def __init__(self, launcher: RunbookLauncher, requests: list[RunRequest]) -> None:
        super().__init__()
        self.launcher = launcher
        self.requests = requests
        self.runners: list[Runner] = []
        self.plans: list[Plan] = []
        self.error = ""
        self.ready = False

    def compose(self) -> ComposeResult:
        book = self.requests[0].book
        targets = [r.target for r in self.requests]
        on = ", ".join(short_name(t) for t in targets) if book.target == "node" else "the cluster"
        yield Static(
            Text.assemble(("Plan ", "bold"), (book.name, "bold"), f" on {on}: {book.title}"),
            id="plan-title",
        )
        with VerticalScroll(id="plan-body"):
            yield Static(Text("Reading the cluster to plan…", style="dim"), id="plan-text")
        yield Static("", id="plan-verdict")
        yield Footer()

    def on_mount(self) -> None:
        self._plan()

    @work(thread=True, exclusive=True, group="runbook-plan", exit_on_error=False)
    def _plan(self) -> None:
        runners: list[Runner] = []
        plans: list[Plan] = []
        error = ""
        try:
            for request in self.requests:
                runner = self.launcher.runner(request)
                runners.append(runner)
                plans.append(runner.plan())
        except RUNNER_ERRORS as exc:
            error = str(exc)
        self.post_message(Planned(runners, plans, error))

    @on(Planned)
    def _planned(self, message: Planned) -> None:
        runners, plans, error = message.runners, message.plans, message.error
        self.runners, self.plans, self.error = runners, plans, error
        self.ready = True
        text = "\n\n".join(plan_markup(p) for p in plans)
        self.query_one("#plan-text", Static).update(text or "")
        verdict = self.query_one("#plan-verdict", Static)
        blocked = [(p, p.blocked_line()) for p in plans if p.blocked_line()]
        if error:
            verdict.update(Text(f"Cannot plan: {error}", style="bold red"))
        elif blocked:
            plan, why = blocked[0]
            verdict.update(
                Text(
                    f"BLOCKED: {short_name(plan.target)}: {why}. "
                    "Nothing will change; esc goes back.",
                    style="bold red",
                )
            )
        else:
            harm = max((p.harm for p in plans), default=Harm.NONE)
            words = confirm_words(harm, [r.target for r in self.requests], self.launcher.cluster)
            verdict.update(
                Text.assemble(
                    ("enter", "bold"), f" runs it ({harm.name.lower()} harm: {words}) · ",
                    ("esc", "bold"), " goes back; nothing has changed yet",
                )
            )  # fmt: skip
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action != "run" or self.can_run  # hidden until there is a plan to run

    @property
    def can_run(self) -> bool:
        return self.ready and not self.error and not any(p.blocked_line() for p in self.plans)

    def action_run(self) -> None:
        if self.can_run:
            self.dismiss(self.runners)

    def action_vim(self, how: str) -> None:
        move_focused(self.focused, how)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
