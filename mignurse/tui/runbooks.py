"""Runbooks in the app, as a flow over the screens in `tui/screens/`: pick one (every
runbook in a fixed order; those that cannot run here, by what the app knows or by their own
read-only checks, shown with the reason; the findings' suggestions labelled), fill its
params, read the plan, confirm at the level of its harm, watch it run, read the report.

Every entry point takes the `Selection` the app built when the key was pressed (the marked
nodes, else the highlighted one; the findings; the repairer's state), never the app's own
fields. A node runbook acts on each selected node, one run per node, one after the other:
several nodes are planned first and confirmed once (y/N, or `N nodes` typed for high
harm); each run is still audited on its own. A cluster runbook gets the first selected
node as `node` (it tells which repairer to pause).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App

from mignurse.nodeview import short_name
from mignurse.runner.engine import Runner
from mignurse.runner.schema import Runbook, RunbookError, resolve_params
from mignurse.tui.launcher import RunbookLauncher, RunRequest, launcher_for
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.picker import RunbookPicker
from mignurse.tui.screens.plan import PlanScreen
from mignurse.tui.screens.run import RUNNER_ERRORS, RunScreen
from mignurse.tui.selection import Selection

CORDON = "cordon"  # the `x` key's runbook


def _books_or_say(
    app: App[Any], selection: Selection, launcher: RunbookLauncher
) -> dict[str, Runbook] | None:
    """The runbooks, or None after telling why there are none to run (read-only, or the
    runbook folder does not load)."""
    if selection.read_only_reason:
        app.notify(
            f"Read-only ({selection.read_only_reason}): runbooks change the cluster.",
            severity="warning",
        )
        return None
    try:
        return launcher.books()
    except RunbookError as exc:
        app.notify(str(exc), severity="error", timeout=10)
        return None


def runbook_names(source: Any, selection: Selection) -> list[str]:
    """What the palette offers: the runbooks that can apply to the selection."""
    if selection.read_only_reason:
        return []
    try:
        books = launcher_for(source).books()
    except RunbookError:
        return []
    return [book.name for book, why in every_runbook(books, selection) if not why]


def every_runbook(books: dict[str, Runbook], selection: Selection) -> list[tuple[Runbook, str]]:
    """Every runbook, by name (the picker's order never changes), with why it has nothing
    to do on the selection ("" when it may apply): a node runbook with no node, an uncordon
    of a schedulable node, a resume where repair was not paused by mignurse, …"""
    entries = []
    for name in sorted(books):
        book = books[name]
        why = "no node selected" if book.target == "node" and not selection.nodes else ""
        entries.append((book, why or selection.why_not(name)))
    return entries


def _given(book: Runbook, selection: Selection) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fixed, hints): the params the selection sets (a node runbook's node) and the ones it
    only proposes (a cluster runbook's node, which tells which repairer)."""
    targets = list(selection.nodes)
    fixed = {"node": targets[0]} if book.target == "node" and targets else {}
    hints = {"node": targets[0]} if book.target == "cluster" and targets else {}
    return fixed, hints


def refusal(launcher: RunbookLauncher, selection: Selection, book: Runbook) -> str | None:
    """Why `book` would be refused on the selection as the cluster stands: why its read-only
    plan cannot start on a selected node, as the plan screen says it ("" when it can). None
    when that cannot be told before its params are asked. Reads the cluster and the nodes:
    call it off the UI thread."""
    fixed, hints = _given(book, selection)
    try:
        params = resolve_params(book, {**hints, **fixed}, find_node=selection.node_name)
    except RunbookError:
        return None
    if book.target == "node":
        requests = [RunRequest(book, {**params, "node": n}) for n in selection.nodes]
    else:
        requests = [RunRequest(book, params)]
    for request in requests:
        try:
            plan = launcher.runner(request).plan()
        except RUNNER_ERRORS as exc:
            return str(exc)
        why = plan.blocked_line()  # what the plan screen would refuse it for
        if why:
            return f"{short_name(request.target)}: {why}" if len(requests) > 1 else why
    return ""


def open_picker(app: App[Any], source: Any, selection: Selection) -> None:
    """`R`: every runbook, those that can apply to the marked or highlighted nodes first
    checked (off the UI thread) and the others said why not."""
    launcher = launcher_for(source)
    books = _books_or_say(app, selection, launcher)
    if books is None:
        return

    def chosen(name: str | None) -> None:
        if name:
            start_runbook(app, source, selection, name)

    def check(name: str) -> str | None:
        return refusal(launcher, selection, books[name])

    app.push_screen(
        RunbookPicker(
            every_runbook(books, selection),
            [n for n in selection.suggested_runbooks() if n in books],
            selection.where,
            cluster=launcher.cluster,
            repair=selection.repair.sentence() if selection.repair is not None else "",
            check=check,
        ),
        chosen,
    )


def start_runbook(app: App[Any], source: Any, selection: Selection, name: str) -> None:
    """Params (where the runbook needs more than the node), then the plan screen."""
    launcher = launcher_for(source)
    books = _books_or_say(app, selection, launcher)
    if books is None:
        return
    book = books.get(name)
    if book is None:
        app.notify(f"no runbook {name!r}", severity="error")
        return
    targets = list(selection.nodes)
    if book.target == "node" and not targets:
        app.notify(f"{name}: highlight or mark (space) a node first.", timeout=5)
        return
    why = selection.why_not(name)
    if why:
        app.notify(f"{name}: nothing to do on {selection.where}: {why}.", timeout=6)
        return
    fixed, hints = _given(book, selection)
    asked = [p for p in book.params.values() if p.name not in fixed]

    def with_params(resolved: dict[str, Any] | None) -> None:
        if resolved is None:
            return
        if book.target == "node":
            requests = [RunRequest(book, {**resolved, "node": n}) for n in targets]
        else:
            requests = [RunRequest(book, resolved)]
        app.push_screen(PlanScreen(launcher, requests), _then_run(app, launcher, selection))

    def validate(given: dict[str, str]) -> dict[str, Any]:
        return resolve_params(book, {**given, **fixed}, find_node=selection.node_name)

    if asked:
        app.push_screen(ParamsScreen(book, asked, hints, validate), with_params)
    else:
        try:
            with_params(validate({}))
        except RunbookError as exc:
            app.notify(str(exc), severity="error", timeout=8)


def _then_run(
    app: App[Any], launcher: RunbookLauncher, selection: Selection
) -> Callable[[list[Runner] | None], None]:
    def run(runners: list[Runner] | None) -> None:
        if runners:
            app.push_screen(RunScreen(launcher, runners, selection=selection))

    return run


def cordon_nodes(app: App[Any], source: Any, selection: Selection) -> None:
    """`x`: cordon the marked nodes, else the highlighted one (plan in the y/N prompt)."""
    launcher = launcher_for(source)
    books = _books_or_say(app, selection, launcher)
    if books is None:
        return
    book = books.get(CORDON)
    if book is None:
        app.notify("no runbook 'cordon' (runbooks/cordon.yaml)", severity="error")
        return
    if not selection.nodes:
        app.notify("Highlight or mark (space) a node to cordon it.", timeout=4)
        return
    why = selection.why_not(CORDON)
    if why:
        app.notify(f"{selection.where}: {why}.", timeout=4)
        return
    try:
        runners = [launcher.runner(RunRequest(book, {"node": n})) for n in selection.nodes]
    except RUNNER_ERRORS as exc:
        app.notify(str(exc), severity="error", timeout=8)
        return
    app.push_screen(RunScreen(launcher, runners, selection=selection))
