"""A mark left on a node that repair then replaced: the mark goes, said once, the status line
stops counting it, and the highlighted row is what `c`, `x` and `R` act on."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from mignurse.sim import SimCluster
from mignurse.tui.app import MigNurseApp
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.picker import RunbookPicker

from .sizes import sizes
from .test_node_screen import static_text, table_rows, until
from .test_runbook_screens import finding_node, highlight


@sizes
async def test_a_mark_on_a_node_repair_replaced_is_dropped_and_the_highlighted_row_acts(
    repair_loop: tuple[SimCluster, MigNurseApp],
    size: tuple[int, int],
    tmp_path: Path,
) -> None:
    sim, app = repair_loop
    app.source.bundle_dir = tmp_path  # where `c` writes its bundle
    async with app.run_test(size=size) as pilot:
        doomed, _ = await finding_node(app)
        await highlight(app, doomed)
        await pilot.press("space")
        await until(lambda: app.marks == {doomed})
        await until(lambda: "1 marked" in static_text(app.query_one("#status", Static)))

        sim.advance(15 * 60)  # past the 10-minute toleration: Karpenter replaces it
        await until(lambda: doomed not in {n["metadata"]["name"] for n in sim.objects("nodes")})
        await until(lambda: doomed not in table_rows(app) and not app.marks)
        said = [str(n.message) for n in app._notifications]
        assert any("Mark dropped: " + doomed.split(".")[0] in m for m in said), said
        await until(lambda: "marked" not in static_text(app.query_one("#status", Static)))

        table = app.query_one("#nodes", DataTable)
        table.focus()
        await until(lambda: app.highlighted_node() is not None)
        here = app.highlighted_node()
        assert here is not None and here != doomed
        assert app.targets() == [here]

        await pilot.press("x")
        await until(lambda: isinstance(app.screen, ConfirmScreen))
        assert here in app.screen.plan_text
        await pilot.press("n")
        await until(lambda: "declined" in str(getattr(app.screen, "report", "")))
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])

        await pilot.press("R")
        await until(lambda: isinstance(app.screen, RunbookPicker))
        assert app.screen.where == here.split(".")[0]
        await pilot.press("escape")

        await pilot.press("c")
        await until(lambda: any("Collecting 1 node" in str(n.message) for n in app._notifications))
    assert not any("Highlight or mark" in str(n.message) for n in app._notifications)
