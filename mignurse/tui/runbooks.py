"""Runbooks in the app: pick one (suggested first), fill its params, read the plan, confirm
at the level of its harm, watch it run, read the report, and browse the audit log.

Decisions:
- The engine (`mignurse.runner`) does the work in a worker thread; these screens only show
  its events. Its `Confirmer` is a modal on the UI thread: the worker pushes the modal
  through `call_from_thread` and waits for the answer (giving up when the app closes).
- Every screen here is a ModalScreen, so the app's own keys (`c` collects, `q` quits) never
  fire underneath a plan or a run.
- A node runbook acts on the marked nodes, else the highlighted one: one run per node, one
  after the other. Several nodes are planned first and confirmed once (y/N, or `N nodes`
  typed for high harm); each run is still audited on its own.
- A cluster runbook gets the highlighted node as `node` (it tells which repairer to pause).
- Nodes are reached as `LiveSource` reaches them: the simulator's sandboxes in the demo,
  else SSH; the sandboxes live as long as the app, so a node keeps its state between runs.
- Ctrl-C (or `c`) cancels the run: the engine stops at the step's next wait, undoes nothing
  and records the run `interrupted`; the report then offers resume (`r`) and undo (`u`).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.markup import escape
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label, OptionList, RichLog, Static
from textual.widgets.option_list import Option

from mignurse.cluster.client import NODES, ClusterClient, ClusterError
from mignurse.model import Node
from mignurse.nodeview import resolve_node_name, short_name
from mignurse.runner import state as st
from mignurse.runner.audit import read_audit
from mignurse.runner.engine import Plan, RunError, RunEvent, Runner, RunResult, node_shells
from mignurse.runner.lock import LockError
from mignurse.runner.render import plan_markup, runs_from_audit
from mignurse.runner.schema import ParamSpec, Runbook, RunbookError, load_runbooks, resolve_params
from mignurse.runner.step import Harm, StepFailed

if TYPE_CHECKING:
    from mignurse.tui.app import MigNurseApp

CORDON = "cordon"  # the `x` key's runbook
AUDIT_RUNS_SHOWN = 200
SUMMARY_CHARS = 90  # the picker's one-line description
STATE_STYLE = {
    "running": "bold cyan",
    st.VERIFIED: "green",
    st.SKIPPED: "dim",
    st.FAILED: "bold red",
    st.UNDONE: "yellow",
    st.UNDO_FAILED: "bold red",
    st.NOT_UNDOABLE: "yellow",
    st.STOPPED: "bold yellow",
    "undoing": "yellow",
    "blocked": "bold red",
}
OUTCOME_STYLE = {
    st.SUCCEEDED: "green",
    "dry-run": "dim",
    "declined": "yellow",
    "blocked": "bold red",
    st.RUN_FAILED: "bold red",
    st.INTERRUPTED: "bold yellow",
    st.RUN_UNDONE: "yellow",
    "refused": "bold red",
    "running": "cyan",
}
_RUNNER_ERRORS = (RunError, LockError, RunbookError, StepFailed, ClusterError)


# -- what the screens need from the app --------------------------------------------------


class Desk:
    """Loads the runbooks and builds Runners wired to the app's cluster (one per app)."""

    def __init__(self, app: MigNurseApp) -> None:
        self.app = app
        self._books: dict[str, Runbook] | None = None
        self._sandboxes: tempfile.TemporaryDirectory[str] | None = None

    def books(self) -> dict[str, Runbook]:
        """RunbookError (one line, file and line) when a runbook file is broken."""
        if self._books is None:
            self._books = load_runbooks()
        return self._books

    def client(self) -> ClusterClient:
        client = getattr(self.app.source, "client", None)
        if client is None:
            raise RunError("runbooks need a live cluster: a bundle is read-only")
        return client

    def _common(self) -> dict[str, Any]:
        from mignurse.collect.transports import shell_factory
        from mignurse.runner.commands import _aws

        client = self.client()
        if self._sandboxes is None:
            self._sandboxes = tempfile.TemporaryDirectory(
                prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
            )
        factory = shell_factory(
            client,
            transport="sim" if self.app.source.simulated else "ssh",
            sandboxes=Path(self._sandboxes.name),
        )
        return {
            "client": client,
            "shell_for": node_shells(client, factory),
            "aws": _aws(argparse.Namespace(profile=None, region=None)),
        }

    def runner(self, job: Job) -> Runner:
        return Runner(job.book, dict(job.params), **self._common())

    def from_state(self, run_id: str) -> Runner:
        return Runner.from_state(run_id, books=self.books(), **self._common())

    def find_node(self, name: str) -> str | None:
        """A node's full name from the app's own copy of the cluster (no API call)."""
        return resolve_node_name(name, self.app.source.state.node_names())


_DESKS: weakref.WeakKeyDictionary[Any, Desk] = weakref.WeakKeyDictionary()


def desk_for(app: MigNurseApp) -> Desk:
    desk = _DESKS.get(app)
    if desk is None:
        desk = _DESKS[app] = Desk(app)
    return desk


@dataclass(frozen=True)
class Job:
    """One run to start: a runbook and its resolved params (node included)."""

    book: Runbook
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return str(self.params.get("node") or "") if self.book.target == "node" else "cluster"


# -- entry points (the app's keys and palette call these) --------------------------------


def runbook_names(app: MigNurseApp) -> list[str]:
    if app.read_only:
        return []
    try:
        return sorted(desk_for(app).books())
    except RunbookError:
        return []


def _chosen_nodes(app: MigNurseApp) -> list[str]:
    """The marked nodes, else the highlighted one (only nodes still in the cluster)."""
    state = app.source.state
    names = sorted(app.marks) if app.marks else [n for n in [_highlighted(app)] if n]
    return [n for n in names if state.node(n) is not None]


def _highlighted(app: MigNurseApp) -> str | None:
    from mignurse.tui.app import NODES as NODES_VIEW

    return app._highlighted_name() if app.view == NODES_VIEW else None


def suggested_runbooks(app: MigNurseApp, nodes: Sequence[str]) -> list[str]:
    """Runbooks named by the nodes' findings, in the findings' order (worst first)."""
    diagnosis = app._diagnosis
    if diagnosis is None:
        return []
    wanted = set(nodes)
    return list(
        dict.fromkeys(r for f in diagnosis.findings if wanted & set(f.nodes) for r in f.runbooks)
    )


def _books_or_say(app: MigNurseApp) -> dict[str, Runbook] | None:
    """The runbooks, or None after telling why there are none to run (read-only, or the
    runbook folder does not load)."""
    if app.read_only:
        why = app.source.read_only_reason or "--read-only"
        app.notify(f"Read-only ({why}): runbooks change the cluster.", severity="warning")
        return None
    try:
        return desk_for(app).books()
    except RunbookError as exc:
        app.notify(str(exc), severity="error", timeout=10)
        return None


def open_picker(app: MigNurseApp) -> None:
    """`R`: the runbooks for the marked or highlighted nodes, suggested ones first."""
    books = _books_or_say(app)
    if books is None:
        return
    nodes = _chosen_nodes(app)
    suggested = [n for n in suggested_runbooks(app, nodes) if n in books]
    if nodes:
        where = short_name(nodes[0]) if len(nodes) == 1 else f"{len(nodes)} marked nodes"
    else:
        where = "the cluster"
    ordered = [books[n] for n in suggested] + [b for n, b in books.items() if n not in suggested]
    if not nodes:
        ordered = [b for b in ordered if b.target == "cluster"]

    def chosen(name: str | None) -> None:
        if name:
            start_runbook(app, name, nodes=nodes)

    app.push_screen(
        RunbookPicker(ordered, set(suggested), where, cluster=app.source.cluster), chosen
    )


def start_runbook(app: MigNurseApp, name: str, *, nodes: Sequence[str] | None = None) -> None:
    """Params (where the runbook needs more than the node), then the plan screen."""
    books = _books_or_say(app)
    if books is None:
        return
    book = books.get(name)
    if book is None:
        app.notify(f"no runbook {name!r}", severity="error")
        return
    targets = list(nodes) if nodes is not None else _chosen_nodes(app)
    if book.target == "node" and not targets:
        app.notify(f"{name}: highlight or mark (space) a node first.", timeout=5)
        return
    desk = desk_for(app)
    fixed = {"node": targets[0]} if book.target == "node" else {}
    hints = {"node": targets[0]} if book.target == "cluster" and targets else {}
    asked = [p for p in book.params.values() if p.name not in fixed]

    def with_params(resolved: dict[str, Any] | None) -> None:
        if resolved is None:
            return
        if book.target == "node":
            jobs = [Job(book, {**resolved, "node": n}) for n in targets]
        else:
            jobs = [Job(book, resolved)]
        app.push_screen(PlanScreen(desk, jobs), _then_run(app, desk))

    def validate(given: dict[str, str]) -> dict[str, Any]:
        return resolve_params(book, {**given, **fixed}, find_node=desk.find_node)

    if asked:
        app.push_screen(ParamsScreen(book, asked, hints, validate), with_params)
    else:
        try:
            with_params(validate({}))
        except RunbookError as exc:
            app.notify(str(exc), severity="error", timeout=8)


def _then_run(app: MigNurseApp, desk: Desk) -> Callable[[list[Runner] | None], None]:
    def run(runners: list[Runner] | None) -> None:
        if runners:
            app.push_screen(RunScreen(desk, runners))

    return run


def cordon_nodes(app: MigNurseApp) -> None:
    """`x`: cordon the marked nodes, else the highlighted one (plan in the y/N prompt)."""
    books = _books_or_say(app)
    if books is None:
        return
    book = books.get(CORDON)
    nodes = _chosen_nodes(app)
    if book is None:
        app.notify("no runbook 'cordon' (runbooks/cordon.yaml)", severity="error")
        return
    if not nodes:
        app.notify("Highlight or mark (space) a node to cordon it.", timeout=4)
        return
    desk = desk_for(app)
    try:
        runners = [desk.runner(Job(book, {"node": n})) for n in nodes]
    except _RUNNER_ERRORS as exc:
        app.notify(str(exc), severity="error", timeout=8)
        return
    app.push_screen(RunScreen(desk, runners))


def open_audit(app: MigNurseApp) -> None:
    """`A`: past runs, newest first; enter shows one run's steps."""
    app.push_screen(AuditScreen())


# -- the picker --------------------------------------------------------------------------


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
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    RunbookPicker OptionList { height: auto; max-height: 30; }
    """

    def __init__(
        self, books: Sequence[Runbook], suggested: set[str], where: str, *, cluster: str = ""
    ) -> None:
        super().__init__()
        self.books = list(books)
        self.suggested = suggested
        self.where = where
        self.cluster = cluster

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
            yield Label(Text("enter: params and plan · esc: back", style="dim"))

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


# -- params ------------------------------------------------------------------------------


def _shown_default(param: ParamSpec, hint: Any) -> str:
    value = hint if hint is not None else param.default
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ParamsScreen(ModalScreen[dict[str, Any] | None]):
    """One input per param, defaults filled; enter checks them all through the schema."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]
    DEFAULT_CSS = """
    ParamsScreen { align: center middle; }
    ParamsScreen > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    ParamsScreen VerticalScroll { height: auto; max-height: 1fr; }
    ParamsScreen Input, ParamsScreen Input:focus {
        height: 1; border: none; padding: 0 1; margin-bottom: 1;
    }
    ParamsScreen Input:focus { background: $boost; }
    #param-error { color: $error; height: auto; }
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
            yield Static("", id="param-error")
            yield Label(Text("enter: plan · tab: next field · esc: back", style="dim"))

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
                    _shown_default(param, self.hints.get(param.name)),
                    id=f"param-{param.name}",
                    placeholder="empty: not set" if not param.required else "required",
                )

    def on_mount(self) -> None:
        inputs = list(self.query(Input))
        if inputs:
            inputs[0].focus()

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


# -- the plan ----------------------------------------------------------------------------


def _confirm_words(harm: Harm, targets: Sequence[str], cluster: str) -> str:
    if harm == Harm.NONE:
        return "no confirmation (it changes nothing)"
    if harm == Harm.LOW:
        return "confirm with y/N"
    if len(targets) > 1:
        return f"confirm by typing {len(targets)} nodes"
    word = targets[0] if targets and targets[0] != "cluster" else cluster
    return f"confirm by typing {word}"


class PlanScreen(ModalScreen[list[Runner] | None]):
    """Every step's plan (changes old → new, node commands, notes, blocked checks), read
    from the cluster in a worker; enter goes on to the confirmation and the run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        Binding("enter", "run", "Run…"),
    ]
    DEFAULT_CSS = """
    PlanScreen { background: $background; }
    #plan-title { padding: 0 1; background: $boost; }
    #plan-body { height: 1fr; padding: 0 1; }
    #plan-verdict { padding: 0 1; height: auto; }
    """

    def __init__(self, desk: Desk, jobs: list[Job]) -> None:
        super().__init__()
        self.desk = desk
        self.jobs = jobs
        self.runners: list[Runner] = []
        self.plans: list[Plan] = []
        self.error = ""
        self.ready = False

    def compose(self) -> ComposeResult:
        book = self.jobs[0].book
        targets = [j.target for j in self.jobs]
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
            for job in self.jobs:
                runner = self.desk.runner(job)
                runners.append(runner)
                plans.append(runner.plan())
        except _RUNNER_ERRORS as exc:
            error = str(exc)
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(self._planned, runners, plans, error)

    def _planned(self, runners: list[Runner], plans: list[Plan], error: str) -> None:
        self.runners, self.plans, self.error = runners, plans, error
        self.ready = True
        text = "\n\n".join(plan_markup(p) for p in plans)
        self.query_one("#plan-text", Static).update(text or "")
        verdict = self.query_one("#plan-verdict", Static)
        blocked = [(p, s) for p in plans for s in p.blocked]
        if error:
            verdict.update(Text(f"Cannot plan: {error}", style="bold red"))
        elif blocked:
            plan, step = blocked[0]
            verdict.update(
                Text(
                    f"BLOCKED: {short_name(plan.target)} step {step.spec.id}: {step.blocked}. "
                    "Nothing will change; esc goes back.",
                    style="bold red",
                )
            )
        else:
            harm = max((p.harm for p in plans), default=Harm.NONE)
            cluster = self.desk.app.source.cluster
            words = _confirm_words(harm, [j.target for j in self.jobs], cluster)
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
        return self.ready and not self.error and not any(p.blocked for p in self.plans)

    def action_run(self) -> None:
        if self.can_run:
            self.dismiss(self.runners)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


# -- confirmation ------------------------------------------------------------------------


class ConfirmScreen(ModalScreen[bool]):
    """y/N for low harm; the node or cluster name typed for high harm. Anything else, esc
    included, refuses: the default is always no."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "answer(False)", "No")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    #confirm-plan { height: auto; max-height: 20; }
    """

    def __init__(self, level: Harm, plan_text: str, expected_word: str) -> None:
        super().__init__()
        self.level = level
        self.plan_text = plan_text
        self.expected_word = expected_word
        self._answered = False

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="confirm-plan"):
                yield Static(Text(self.plan_text))
            if self.level >= Harm.HIGH:
                yield Label(
                    Text.assemble(
                        ("HIGH HARM: hard to reverse. ", "bold red"),
                        "Type ", (self.expected_word, "bold"), " and press enter to proceed "
                        "(anything else refuses):",
                    )
                )  # fmt: skip
                yield Input(id="confirm-word", placeholder=self.expected_word)
            else:
                yield Label(Text.assemble(("Proceed? ", "bold"), "[y/N]"))

    def on_mount(self) -> None:
        if self.level >= Harm.HIGH:
            self.query_one("#confirm-word", Input).focus()

    def on_key(self, event: Any) -> None:
        if self.level >= Harm.HIGH:
            return  # the word goes into the input; enter submits it
        # Low harm: y proceeds, any other key refuses (N is the default).
        event.stop()
        event.prevent_default()
        self.action_answer(event.key in ("y", "Y"))

    @on(Input.Submitted, "#confirm-word")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_answer(event.value.strip() == self.expected_word)

    def action_answer(self, ok: bool) -> None:
        if not self._answered:
            self._answered = True
            self.dismiss(ok)


class ModalConfirmer:
    """The engine's Confirmer, called from the run's worker thread: shows ConfirmScreen on
    the UI thread and waits for the answer."""

    def __init__(self, screen: RunScreen) -> None:
        self.screen = screen

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        app = self.screen.app
        answered = threading.Event()
        answer = {"ok": False}

        def done(ok: bool | None) -> None:
            answer["ok"] = bool(ok)
            answered.set()

        def show() -> None:
            app.push_screen(ConfirmScreen(level, plan_text, expected_word), done)

        try:
            app.call_from_thread(show)
        except RuntimeError:
            return False
        while not answered.wait(0.2):
            if not app.is_running:
                return False
        return answer["ok"]


# -- the run -----------------------------------------------------------------------------


@dataclass
class _Row:
    target: str
    step: str
    state: str = st.PENDING
    detail: str = ""


class RunScreen(ModalScreen[None]):
    """Live per-step progress and the node's streamed output; the report at the end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "cancel_run", "Cancel", priority=True),
        Binding("c", "cancel_run", "Cancel"),
        Binding("r", "resume", "Resume"),
        Binding("u", "undo", "Undo"),
        Binding("escape", "close", "Close"),
    ]
    DEFAULT_CSS = """
    RunScreen { background: $background; }
    #run-title { padding: 0 1; background: $boost; }
    #run-steps { height: auto; max-height: 50%; }
    #run-output { height: 1fr; border-top: solid $primary; }
    #run-report { height: auto; max-height: 40%; padding: 0 1; border-top: solid $primary; }
    """

    def __init__(self, desk: Desk, runners: list[Runner], *, undo: bool = False) -> None:
        super().__init__()
        self.desk = desk
        self.runners = runners
        self.undoing = undo
        self.results: list[RunResult] = []
        self.errors: list[str] = []
        self.running = True
        self.cancelled = False
        self.report = ""
        self._rows: dict[str, _Row] = {}
        self._current: Runner | None = None

    # layout

    def compose(self) -> ComposeResult:
        book = self.runners[0].book
        targets = [r.target for r in self.runners]
        on = ", ".join(short_name(t) for t in targets)
        verb = "Undo of" if self.undoing else "Run of"
        title = Text.assemble((f"{verb} {book.name}", "bold"), f" on {on}: {book.title}")
        if len(self.runners) == 1:
            title.append(f" · run {self.runners[0].run_id}", style="dim")
        yield Static(title, id="run-title")
        table: DataTable[Any] = DataTable(id="run-steps", cursor_type="none", zebra_stripes=True)
        yield table
        yield RichLog(id="run-output", wrap=True, markup=True, highlight=False)
        yield Static(Text("running… (ctrl+c or c cancels)", style="dim"), id="run-report")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#run-steps", DataTable)
        for column in ("TARGET", "STEP", "STATE", "DETAIL"):
            table.add_column(column, key=column)
        for runner in self.runners:
            for step in runner.state.steps:
                self._add_row(runner, step.id, step.status)
        self._run()

    def _key(self, runner: Runner, step: str) -> str:
        return f"{runner.run_id}/{step}"

    def _add_row(self, runner: Runner, step: str, state: str) -> None:
        key = self._key(runner, step)
        row = _Row(short_name(runner.target), step, state)
        self._rows[key] = row
        table = self.query_one("#run-steps", DataTable)
        table.add_row(*self._cells(row), key=key)

    def _cells(self, row: _Row) -> list[Any]:
        return [row.target, row.step, Text(row.state, style=STATE_STYLE.get(row.state, "")),
                row.detail]  # fmt: skip

    def _set_row(self, runner: Runner, step: str, state: str, detail: str | None = None) -> None:
        key = self._key(runner, step)
        row = self._rows.get(key)
        if row is None:
            return
        row.state = state
        if detail is not None:
            row.detail = " ".join(detail.split())
        table = self.query_one("#run-steps", DataTable)
        for column, value in zip(("STATE", "DETAIL"), self._cells(row)[2:], strict=True):
            table.update_cell(key, column, value, update_width=True)

    # the engine's events (called on the UI thread)

    def _event(self, runner: Runner, event: RunEvent) -> None:
        out = self.query_one("#run-output", RichLog)
        who = short_name(runner.target)
        if event.kind == "plan":
            plan: Plan = event.data["plan"]
            out.write(f"[bold]plan for {escape(who)}[/]")
            out.write(plan_markup(plan))
            for item in plan.steps:
                if item.blocked:
                    self._set_row(runner, item.spec.id, "blocked", item.blocked)
        elif event.kind == "notice":
            out.write(f"[yellow]{escape(who)}: {escape(event.message)}[/]")
        elif event.kind == "step-started":
            self._set_row(runner, event.step, "running", event.message)
            out.write(f"[bold]▶ {escape(who)} {escape(event.step)}[/]: {escape(event.message)}")
        elif event.kind == "output":
            out.write(f"  [dim]{escape(who)} {escape(event.step)}[/] {escape(event.message)}")
        elif event.kind in ("step-finished", "undo-finished"):
            status = str(event.data.get("status") or "")
            self._set_row(runner, event.step, status or "done", event.message)
            prefix = "undo " if event.kind == "undo-finished" else ""
            out.write(f"{prefix}{escape(who)} {escape(event.step)}: {escape(event.message)}")
        elif event.kind == "undo-started":
            self._set_row(runner, event.step, "undoing", event.message)
            out.write(f"[yellow]↶ {escape(who)} {escape(event.step)}[/]: {escape(event.message)}")

    def _listener(self, runner: Runner) -> Callable[[RunEvent], None]:
        def listen(event: RunEvent) -> None:
            if event.kind == "finished":
                return  # the worker reports the result itself
            with contextlib.suppress(RuntimeError):  # the app is closing
                self.app.call_from_thread(self._event, runner, event)

        return listen

    # the worker

    @work(thread=True, exclusive=True, group="runbook-run", exit_on_error=False)
    def _run(self) -> None:
        confirmer = ModalConfirmer(self)
        for runner in self.runners:
            runner.listener = self._listener(runner)
            runner.confirmer = confirmer
        if len(self.runners) > 1 and not self.undoing and not self._confirm_batch(confirmer):
            self._finish(declined=True)
            return
        for runner in self.runners:
            if self.cancelled:
                break
            self._current = runner
            try:
                result = runner.undo() if self.undoing else runner.run()
            except _RUNNER_ERRORS as exc:
                self.errors.append(f"{short_name(runner.target)}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a bug shows as a line, not a dead app
                self.errors.append(f"{short_name(runner.target)}: {type(exc).__name__}: {exc}")
                continue
            self.results.append(result)
            if result.status in ("declined", st.INTERRUPTED):
                break
        self._current = None
        self._finish()

    def _confirm_batch(self, confirmer: ModalConfirmer) -> bool:
        """Several nodes: plan them all, then one confirmation covers every run."""
        plans: list[Plan] = []
        for runner in self.runners:
            try:
                plans.append(runner.plan())
            except _RUNNER_ERRORS as exc:
                self.errors.append(f"{short_name(runner.target)}: {exc}")
                return False
        blocked = [(p, s) for p in plans for s in p.blocked]
        if blocked:
            plan, step = blocked[0]
            self.errors.append(f"{short_name(plan.target)}: step {step.spec.id}: {step.blocked}")
            return False
        harm = max((p.harm for p in plans), default=Harm.NONE)
        how = "not needed (no change)"
        if harm > Harm.NONE:
            text = "\n\n".join(p.text() for p in plans)
            word = f"{len(plans)} nodes" if harm >= Harm.HIGH else "y"
            if not confirmer.confirm(harm, text, word):
                return False
            how = f"{'typed' if harm >= Harm.HIGH else 'answered'} {word} for the batch"
        for runner in self.runners:
            runner.yes = True
            runner.confirmation = how
        return True

    def _finish(self, *, declined: bool = False) -> None:
        lines = self._report_lines(declined)
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(self._finished, lines)

    def _report_lines(self, declined: bool) -> list[str]:
        """The report (built in the worker: the node's state is read from the cluster)."""
        lines: list[str] = []
        if declined:
            lines.append("declined: nothing changed")
        for result in self.results:
            runner = next(r for r in self.runners if r.run_id == result.run_id)
            head = f"run {result.run_id} ({short_name(runner.target)}): {result.status}"
            lines.append(head + (f": {result.error}" if result.error else ""))
            if result.status not in ("dry-run", "declined", "blocked"):
                lines.extend(f"  {line}" for line in result.report_lines())
            node = str(runner.params.get("node") or "")
            if node:
                lines.append(f"  {self._node_state(runner, node)}")
            lines.extend(f"  {n}" for n in result.notices if "mignurse run --" not in n)
            lines.extend(f"  next: {n}" for n in _next_steps(runner, result))
        lines.extend(f"error: {e}" for e in self.errors)
        return lines or ["nothing ran"]

    @staticmethod
    def _node_state(runner: Runner, node: str) -> str:
        try:
            raw = runner.client.get(NODES, node)
        except ClusterError as exc:
            return f"node {short_name(node)}: cannot read it now: {exc}"
        now = Node.from_api(raw)
        words = [now.ready_status, "cordoned" if now.unschedulable else "schedulable"]
        if now.deleting is not None:
            words.append("being deleted")
        return f"node {short_name(node)}: {', '.join(words)}"

    def _finished(self, lines: list[str]) -> None:
        self.running = False
        self.report = "\n".join(lines)
        report = Text()
        for i, line in enumerate(lines):
            if i:
                report.append("\n")
            style = ""
            for word, word_style in OUTCOME_STYLE.items():
                if line.startswith("run ") and f": {word}" in line:
                    style = word_style
                    break
            if line.startswith("error"):
                style = "bold red"
            report.append(line, style=style)
        self.query_one("#run-report", Static).update(report)
        self.refresh_bindings()

    # keys

    def _last(self, *statuses: str) -> RunResult | None:
        for result in reversed(self.results):
            if result.status in statuses:
                return result
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that do nothing now are hidden (False), not dimmed.
        if action == "cancel_run":
            return self.running
        if action == "close":
            return not self.running
        stopped = self._last(st.INTERRUPTED, st.RUN_FAILED) is not None
        if action == "resume":
            return not self.running and stopped and not self.undoing
        if action == "undo":
            return not self.running and stopped
        return True

    def action_cancel_run(self) -> None:
        if not self.running:
            return
        self.cancelled = True
        runner = self._current
        if runner is not None:
            runner.cancel()
        self.query_one("#run-report", Static).update(
            Text("cancelling: the step stops at its next wait; nothing is undone…", style="yellow")
        )

    def on_unmount(self) -> None:
        # The app quits mid-run: stop at the step's next wait (recorded as interrupted)
        # rather than keep the process alive until the step ends.
        if self.running:
            self.cancelled = True
            if self._current is not None:
                self._current.cancel()

    def action_close(self) -> None:
        if self.running:
            self.notify("Still running: ctrl+c or c cancels it.", timeout=4)
            return
        self.dismiss(None)

    def _again(self, undo: bool) -> None:
        result = self._last(st.INTERRUPTED, st.RUN_FAILED)
        if result is None or self.running:
            return
        try:
            runner = self.desk.from_state(result.run_id)
        except _RUNNER_ERRORS as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        app = self.app
        self.dismiss(None)
        app.push_screen(RunScreen(self.desk, [runner], undo=undo))

    def action_resume(self) -> None:
        self._again(undo=False)

    def action_undo(self) -> None:
        self._again(undo=True)


def _next_steps(runner: Runner, result: RunResult) -> list[str]:
    run_id = result.run_id
    if result.status in (st.INTERRUPTED, st.RUN_FAILED):
        return [
            f"r resumes from the first unfinished step (mignurse run --resume {run_id})",
            f"u undoes the completed steps (mignurse run --undo {run_id})",
        ]
    if result.status == st.SUCCEEDED:
        opposite = {
            "cordon": "uncordon",
            "uncordon": "cordon",
            "pause-node-repair": "resume-node-repair",
            "resume-node-repair": "pause-node-repair",
        }.get(runner.book.name)
        if opposite:
            return [f"to reverse it, run {opposite} (R); the audit log (A) has this run"]
        return ["the audit log (A) has this run"]
    if result.status == st.RUN_UNDONE:
        return ["the completed steps were undone; fix the cause and run it again"]
    return []


# -- the audit log -----------------------------------------------------------------------


def past_runs() -> list[dict[str, Any]]:
    """Runs from the audit log, newest first."""
    runs = runs_from_audit(read_audit(), states={r.run_id: r for r in st.list_runs()})
    runs.sort(key=lambda r: str(r.get("started") or ""), reverse=True)
    return runs[:AUDIT_RUNS_SHOWN]


TITLE_AUDIT = Text.assemble(
    ("Audit log: past runbook runs, newest first", "bold"), ("  enter: the run's steps", "dim")
)


class AuditScreen(ModalScreen[None]):
    """Past runbook runs, newest first: when, who, runbook, target, outcome."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]
    DEFAULT_CSS = """
    AuditScreen { background: $background; }
    #audit-title { padding: 0 1; background: $boost; }
    #audit-runs { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(TITLE_AUDIT, id="audit-title")
        yield DataTable(id="audit-runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#audit-runs", DataTable)
        for column in ("WHEN (UTC)", "WHO", "RUNBOOK", "TARGET", "OUTCOME", "RUN"):
            table.add_column(column, key=column)
        self.runs = past_runs()
        for run in self.runs:
            outcome = str(run.get("outcome") or "")
            table.add_row(
                str(run.get("started") or "")[:19].replace("T", " "),
                str(run.get("who") or ""),
                str(run.get("runbook") or ""),
                short_name(str(run.get("target") or "")),
                Text(outcome, style=OUTCOME_STYLE.get(outcome, "")),
                str(run.get("run") or ""),
                key=str(run.get("run")),
            )
        if not self.runs:
            self.query_one("#audit-title", Static).update(
                Text("Audit log: no runbook has run yet (R starts one)", style="bold")
            )
        table.focus()

    def rows(self) -> list[tuple[str, ...]]:
        table = self.query_one("#audit-runs", DataTable)
        return [tuple(str(c) for c in table.get_row(key)) for key in table.rows]

    @on(DataTable.RowSelected, "#audit-runs")
    def _selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(RunStepsScreen(str(event.row_key.value)))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


def run_story(run_id: str) -> str:
    """One run's steps (from its saved state) and its audit events, as plain lines."""
    events = [e for e in read_audit() if e.get("run") == run_id]
    lines: list[str] = []
    try:
        saved: st.RunState | None = st.RunState.load(run_id)
    except (FileNotFoundError, ValueError, TypeError):
        saved = None
    if saved is not None:
        lines.append(
            f"run {saved.run_id}: {saved.runbook} on {saved.target} ({saved.context}) by "
            f"{saved.holder}: {saved.status}" + (f": {saved.error}" if saved.error else "")
        )
        for s in saved.steps:
            detail = f": {s.error}" if s.error else ""
            undo = f" ({s.undo})" if s.undo else ""
            lines.append(f"  {s.id} ({s.action}): {s.status}{detail}{undo}")
        if saved.status in (st.INTERRUPTED, st.RUN_FAILED):
            lines.append(f"  resume: mignurse run --resume {run_id}")
            lines.append(f"  undo:   mignurse run --undo {run_id}")
    elif events:
        first = events[0]
        lines.append(f"run {run_id}: {first.get('runbook', '')} on {first.get('target', '')}")
    lines.append("")
    lines.append("audit events:")
    for event in events:
        extra = event.get("status") or event.get("outcome") or event.get("result") or ""
        step = f" {event['step']}" if event.get("step") else ""
        reason = f": {event['reason']}" if event.get("reason") else ""
        lines.append(f"  {str(event.get('ts', ''))[:19]} {event['event']}{step} {extra}{reason}")
    return "\n".join(lines)


class RunStepsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]
    DEFAULT_CSS = """
    RunStepsScreen { background: $background; }
    RunStepsScreen > VerticalScroll { height: 1fr; padding: 0 1; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(run_story(self.run_id)), id="run-story")
        yield Footer()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
