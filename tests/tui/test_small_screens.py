"""The app on a small terminal (80x24) as on a large one (120x40): every runbook's params
dialog keeps its keys line (enter: plan) and its error line in view however many params
scroll above them, and the findings pager wraps long lines instead of cutting them."""

from __future__ import annotations

from rich.cells import cell_len
from textual.containers import VerticalScroll
from textual.widgets import Input, Label, OptionList, Static

from mignurse.sim import SimCluster
from mignurse.tui.app import MigNurseApp
from mignurse.tui.launcher import launcher_for
from mignurse.tui.screens.pager import LinesView, PagerScreen
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.picker import RunbookPicker

from .sizes import sizes
from .test_node_screen import static_text, until
from .test_runbook_screens import finding_node, highlight, params_ready


def on_screen(app: MigNurseApp, widget: Static) -> bool:
    region = widget.region
    return region.height > 0 and region.y >= 0 and region.bottom <= app.size.height - 1


@sizes
async def test_every_params_dialog_keeps_enter_plan_in_view(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=size) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        books = launcher_for(app.source).books()
        asking = [b for b in sorted(books) if any(p != "node" for p in books[b].params)]
        assert "pause-node-repair" in asking
        for runbook in asking:
            if app.selection().why_not(runbook):
                continue
            app.start_runbook(runbook)
            screen = await params_ready(app)
            await pilot.pause()
            keys = screen.query_one("#param-keys", Label)
            assert "enter: plan" in static_text(keys)
            assert on_screen(app, keys), (runbook, keys.region)
            # a refused value is said where it can be read, with the keys still in view
            first = screen.query(Input).first()
            first.value = "not a value for this" if first.id != "param-node" else "nope-nope"
            first.focus()
            await pilot.press("enter")
            error = screen.query_one("#param-error", Static)
            await until(lambda: bool(static_text(error).strip()))  # noqa: B023
            assert on_screen(app, error) and on_screen(app, keys), runbook
            fields = screen.query_one(VerticalScroll)
            assert fields.region.bottom <= error.region.y, runbook  # nothing hidden behind
            await pilot.press("escape")
            await until(lambda: not isinstance(app.screen, ParamsScreen))


@sizes
async def test_the_findings_pager_wraps_long_lines_and_keeps_its_marks(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=size) as pilot:
        await finding_node(app)
        await pilot.press("f")
        await until(lambda: isinstance(app.screen, PagerScreen))
        await pilot.pause()
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        view = pager.query_one(LinesView)
        rows = [row.plain for row in view.lines]
        assert max(cell_len(row) for row in rows) < view.size.width
        assert len(rows) > len(pager.page.lines)  # long lines became several rows
        text = " ".join(" ".join(rows).split())
        assert app.diagnosis is not None
        for finding in app.diagnosis.findings:
            assert " ".join(finding.summary.split()) in text, finding.id
        await pilot.press("n", "n")  # the second finding's first row
        assert view.current is not None
        line = view.line_at(view.current)
        assert line == pager.page.marks[1]
        assert view.lines[view.current].plain.split()[0] in ("CRITICAL", "WARNING", "INFO")

        await pilot.resize_terminal(size[0] + 30, size[1])  # the rows follow the width
        await pilot.pause()
        assert max(cell_len(row.plain) for row in view.lines) < view.size.width
        assert view.current == view.row_of(line)


@sizes
async def test_the_runbook_picker_keeps_its_keys_in_view(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=size) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        await pilot.press("R")
        await until(lambda: isinstance(app.screen, RunbookPicker) and not app.screen.checking)
        await pilot.pause()
        keys = app.screen.query_one("#picker-keys", Static)
        assert "enter: params and plan" in static_text(keys)
        assert on_screen(app, keys), keys.region
        await pilot.press("G")  # the last entry scrolls into view above the keys
        options = app.screen.query_one(OptionList)
        assert options.highlighted is not None
        assert options.region.bottom <= keys.region.y
