"""`D`, the repair-deadline radar in the app, through Textual's Pilot against the simulator
(dcgm-repair-loop: a node whose AcceleratedHardwareReady went False under Karpenter's 10-minute
repair policy, in a pool that has been repairing in a loop). The radar lists it with its
countdown and finding, and enter takes the row's action: here, pause repair."""

from __future__ import annotations

from datetime import timedelta

from mignurse.sim import SimCluster
from mignurse.tui.app import MigNurseApp
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.plan import PlanScreen
from mignurse.tui.screens.radar import RadarScreen

from .test_node_screen import until
from .test_runbook_screens import gate_string, screen_text


async def radar_open(app: MigNurseApp) -> RadarScreen:
    await until(lambda: app.diagnosis is not None)
    app.action_radar()
    await until(lambda: isinstance(app.screen, RadarScreen) and app.screen.is_mounted)
    screen = app.screen
    assert isinstance(screen, RadarScreen)
    return screen


async def test_the_node_under_the_repair_clock_is_listed_with_its_countdown_and_finding(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await radar_open(app)
        rows = screen.rows()
        assert rows, screen_text(app)
        when, node, pool, condition, finding, act, who = rows[0]
        assert when.startswith("in ") and condition == "AcceleratedHardwareReady=False"
        failing = [
            n["metadata"]["name"].split(".")[0]
            for n in sim.objects("nodes")
            if "deletionTimestamp" not in n["metadata"]
            and any(
                c["type"] == "AcceleratedHardwareReady" and c["status"] == "False"
                for c in n["status"]["conditions"]
            )
        ]
        assert [r[1] for r in rows] == failing == [node]
        assert finding == "node-repair-loop" and act == "pause repair"
        assert "Karpenter repair" in who and pool == "gpu-inference"
        assert "soonest first" in screen_text(app, "#radar-title")
        # the horizon narrows to 15 minutes and widens again; the 10-minute repair stays
        await pilot.press("h", "h", "h")
        assert screen.horizon == timedelta(minutes=15) and screen.rows() == rows
        await pilot.press("enter")  # pause repair: its params or plan come up for the cluster
        await until(lambda: isinstance(app.screen, (ParamsScreen, PlanScreen)))
        asked = app.screen
        book = asked.book if isinstance(asked, ParamsScreen) else asked.requests[0].book
        assert book.name == "pause-node-repair"
    assert "NodeRepair=true" in gate_string(sim)  # nothing changed before the plan


async def test_read_only_shows_the_radar_but_takes_no_action_that_changes_the_cluster(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    app.user_read_only = True
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await radar_open(app)
        assert screen.rows()
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen is screen  # refused with a notice, the radar stays
        assert any("--read-only" in str(n.message) for n in app._notifications)


async def test_before_the_first_diagnosis_the_radar_says_so_rather_than_none_due(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 45)):
        app.push_screen(RadarScreen([], app.source.now(), judged=False))
        await until(lambda: isinstance(app.screen, RadarScreen) and app.screen.is_mounted)
        assert "still running" in screen_text(app, "#radar-title")
        assert "no GPU node is due" not in screen_text(app, "#radar-title")


async def test_what_arrives_while_a_screen_is_open_lands_on_the_app_underneath(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    """A diagnosis, partial or whole, and the status line arrive on the app's own screen
    while the radar (or help, or a plan) is on top: Textual's `query_one` searches the top
    screen, and a NoMatches raised in a message handler would end the app."""
    from textual.widgets import Static

    from .test_node_screen import static_text

    _sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        app.push_screen(RadarScreen([], app.source.now(), judged=False))
        await until(lambda: isinstance(app.screen, RadarScreen) and app.screen.is_mounted)
        app._diagnosis_error = "diagnosis failed: a test's own words"
        app._show_findings()  # on the app's own screen, not the radar's
        app._show_status()
        app._show_bars()
        panel = app.screen_stack[0].query_one("#findings", Static)
        assert "a test's own words" in static_text(panel)
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, RadarScreen))
