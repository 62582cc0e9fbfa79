"""The runbook picker (`R`) as an on-call engineer meets it: every runbook in one order that
never changes, j/k like the tables, the repair state worded so "paused by mignurse" and "off
by configuration" are never confused, and a runbook whose own check will refuse shown as
not possible, with the reason, never suggested."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import DataTable, OptionList, Static

from mignurse.cluster.client import ClusterClient
from mignurse.runner.audit import Audit
from mignurse.runner.schema import resolve_params
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.launcher import RunRequest, launcher_for
from mignurse.tui.screens.audit import AuditScreen
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.help import HelpScreen
from mignurse.tui.screens.picker import RunbookPicker

from .conftest import SIM_ACCESS
from .sizes import sizes
from .test_node_screen import static_text, until
from .test_runbook_screens import finding_node, highlight, run_done


@pytest.fixture
def mig_incident(tmp_path: Path, state_home: Path) -> Iterator[tuple[SimCluster, MigNurseApp]]:
    """mig-1g24gb: Karpenter's NodeRepair gate is off in its configuration (nobody paused
    it), and one node is NotReady after mig-manager restarted its kubelet."""
    sim = SimCluster(load_scenario("mig-1g24gb"), speed=0).start()
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated="mig-1g24gb ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    yield sim, make_app(source)
    sim.stop()


def not_ready_node(sim: SimCluster) -> str:
    (name,) = [
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    ]
    return str(name)


def picker(app: MigNurseApp) -> RunbookPicker:
    screen = app.screen
    assert isinstance(screen, RunbookPicker)
    return screen


def entries(app: MigNurseApp) -> list[tuple[str, str, bool]]:
    """(runbook, its prompt as text, disabled) top to bottom."""
    options = picker(app).query_one(OptionList)
    shown = [options.get_option_at_index(i) for i in range(options.option_count)]
    return [(str(o.id), str(o.prompt), o.disabled) for o in shown]


def highlighted(app: MigNurseApp) -> str:
    option = picker(app).query_one(OptionList).highlighted_option
    assert option is not None
    return str(option.id)


async def open_picker(app: MigNurseApp, pilot: object) -> None:
    await pilot.press("R")  # type: ignore[attr-defined]
    await until(lambda: isinstance(app.screen, RunbookPicker) and app.screen.is_mounted)
    await until(lambda: not picker(app).checking)


@sizes
async def test_the_picker_moves_with_j_and_k_and_keeps_its_order_between_openings(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=size) as pilot:
        name, _suggested = await finding_node(app)
        await highlight(app, name)
        await open_picker(app, pilot)
        first = [e[0] for e in entries(app)]
        assert first == sorted(first)  # every runbook, by name
        assert highlighted(app) == "pause-node-repair"  # the most urgent suggestion
        possible = [n for n, _text, disabled in entries(app) if not disabled]
        at = possible.index("pause-node-repair")
        await pilot.press("j")
        assert highlighted(app) == possible[at + 1]
        await pilot.press("k", "k")
        assert highlighted(app) == possible[at - 1]
        await pilot.press("G")
        assert highlighted(app) == possible[-1]
        await pilot.press("g")
        assert highlighted(app) == possible[0]
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])

        await pilot.press("x")  # cordon it: cordon has nothing left to do, uncordon has
        await until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        screen = await run_done(app)
        assert "succeeded" in screen.report, screen.report
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])
        await until(lambda: app.source.state.node(name).unschedulable)  # type: ignore[union-attr]

        await open_picker(app, pilot)
        again = entries(app)
        assert [e[0] for e in again] == first
        shown = {n: (text, disabled) for n, text, disabled in again}
        assert shown["cordon"][1] and "already cordoned" in shown["cordon"][0]
        assert not shown["uncordon"][1]


@sizes
async def test_repair_off_by_configuration_is_not_called_paused_anywhere(
    mig_incident: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    sim, app = mig_incident
    node = not_ready_node(sim)
    async with app.run_test(size=size) as pilot:
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        fleet = app.query_one("#fleet", DataTable)
        await until(lambda: fleet.row_count == 1)
        row = [str(c) for c in fleet.get_row_at(0)]
        assert "off (config)" in row, row
        assert "PAUSED" not in " ".join(row)
        preview = static_text(app.query_one("#fleet-preview", Static))
        if size[0] >= 120:
            assert "node repair is off by configuration, not paused by mignurse" in preview
        else:  # the words of the REPAIR column on the title's line
            assert "worst first: enter opens them · repair off (config)\n" in preview

        await highlight(app, node)
        await open_picker(app, pilot)
        shown = {n: (text, disabled) for n, text, disabled in entries(app)}
        pause, resume = shown["pause-node-repair"], shown["resume-node-repair"]
        assert pause[1] and resume[1]
        assert "nothing to pause: node repair is off by configuration" in pause[0]
        assert "not paused by mignurse: no pause of mignurse's to resume" in resume[0]
        for text, _disabled in shown.values():
            assert "already paused" not in text
        said = static_text(picker(app).query_one("#picker-repair", Static)).strip()
        assert said == "node repair is off by configuration, not paused by mignurse"


async def test_the_plans_word_off_by_configuration_and_paused_by_mignurse_apart(
    mig_incident: tuple[SimCluster, MigNurseApp],
) -> None:
    """The pause runbook's own plan, read as the app plans it: off by configuration is
    nothing to pause and never a pause of mignurse's; resume has no pause to put back."""
    sim, app = mig_incident
    launcher = launcher_for(app.source)
    books = launcher.books()
    node = not_ready_node(sim)
    notes = {}
    for name in ("pause-node-repair", "resume-node-repair"):
        book = books[name]
        plan = launcher.runner(RunRequest(book, resolve_params(book, {"node": node}))).plan()
        step = plan.steps[0]
        notes[name] = step.blocked or " ".join(step.plan.notes if step.plan else [])
    assert (
        "nothing to pause: node repair is off by configuration, not paused by mignurse"
        in (notes["pause-node-repair"])
    )
    assert notes["resume-node-repair"].startswith(
        "node repair is off by configuration, not paused by mignurse:"
    )
    assert "was not paused by mignurse" in notes["resume-node-repair"]


@sizes
async def test_a_runbook_whose_check_refuses_is_not_possible_and_never_suggested(
    mig_incident: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    """reapply-mig-no-hooks is what the finding names for a failed MIG config, but its
    preflight refuses a NotReady node (nothing it does restarts kubelet): the picker says
    so before anyone reaches the plan."""
    sim, app = mig_incident
    node = not_ready_node(sim)
    async with app.run_test(size=size) as pilot:
        await until(lambda: app.diagnosis is not None)
        await highlight(app, node)
        assert "reapply-mig-no-hooks" in app.selection().suggested_runbooks()
        await open_picker(app, pilot)
        shown = {n: (text, disabled) for n, text, disabled in entries(app)}
        text, disabled = shown["reapply-mig-no-hooks"]
        assert disabled
        assert text.startswith("not possible reapply-mig-no-hooks"), text
        assert "step preflight cannot run: node " in text and "is NotReady" in text
        assert "replace-instance" in text  # the way out it names
        assert "suggested" not in text
        assert highlighted(app) != "reapply-mig-no-hooks"
        suggested = [n for n, (t, _d) in shown.items() if t.startswith("suggested")]
        assert "cordon-and-collect" in suggested
        await pilot.press("enter")
        await until(lambda: not isinstance(app.screen, RunbookPicker))
        assert "reapply-mig-no-hooks" not in type(app.screen).__name__


@sizes
async def test_j_and_k_move_in_the_audit_log_and_the_help_as_in_the_tables(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    audit = Audit()
    for run in ("aaaa0001", "aaaa0002", "aaaa0003"):
        audit.write("started", run, runbook="cordon", target="ip-10-0-1-1", context="sim")
    async with app.run_test(size=size) as pilot:
        await pilot.press("A")
        await until(lambda: isinstance(app.screen, AuditScreen))
        table = app.screen.query_one(DataTable)
        assert table.row_count == 3 and table.cursor_row == 0
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("G")
        assert table.cursor_row == 2
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])

        await pilot.press("question_mark")
        await until(lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        pane = app.screen.query_one(VerticalScroll)
        assert pane.max_scroll_y > 0  # more keys than lines on this screen
        await pilot.press("j", "j")
        assert pane.scroll_y == 2
        await pilot.press("G")
        assert pane.scroll_y == pane.max_scroll_y
