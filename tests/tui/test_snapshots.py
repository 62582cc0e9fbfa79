"""Snapshots of the main screens on the dcgm-repair-loop scenario (pytest-textual-snapshot).

The simulator runs at speed 0 from a fixed start, so every age, countdown and "as of" is
the same on each run; each snapshot waits until the app has settled (a refresh applied
after the first diagnosis). A change to a screen shows up as a failed test with an HTML
diff; accept it with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

START = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)  # a fixed sim start: ages and clocks never move
WIDE, SMALL = (120, 36), (80, 24)
SnapCompare = Callable[..., bool]


@pytest.fixture
def app(tmp_path: Path, state_home: Path) -> Iterator[MigNurseApp]:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0, start=START).start()
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated="dcgm-repair-loop ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    yield make_app(source)
    sim.stop()


async def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the screen never settled"
        await asyncio.sleep(0.05)


async def settled(pilot: Pilot[Any]) -> None:
    """The fleet after a refresh that followed the first diagnosis (the cursor on the worst
    pool, where the app lands: no key pressed)."""
    app = pilot.app
    assert isinstance(app, MigNurseApp)
    await until(lambda: app.diagnosis is not None)
    seen = app.refreshes
    await until(lambda: app.refreshes > seen)
    await still(pilot)


async def still(pilot: Pilot[Any], timeout: float = 60.0) -> None:
    """Until the screen is the same twice in a row: the footer's keys and the tables' column
    widths follow a refresh on later idle passes, which come late when the cores are busy."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        tables = list(pilot.app.query(DataTable))
        for table in tables:
            # Textual 8.2 can keep a header line rendered before its columns grew: repaint
            table._clear_caches()
            table.refresh()
        await pilot.pause(0.3)
        # DataTable measures new rows' columns on its next idle (Textual 8.2 internals)
        pending = any(t._require_update_dimensions for t in tables)
        shown = pilot.app.export_screenshot()
        if shown == last and not pending:
            return
        assert time.monotonic() < deadline, "the screen never stopped changing"
        last = shown


async def broken_node(pilot: Pilot[Any]) -> None:
    """Enter on the looping pool, then down to its AcceleratedHardwareReady=False node."""
    await settled(pilot)
    app = pilot.app
    assert isinstance(app, MigNurseApp)
    await pilot.press("enter")
    table = app.query_one("#nodes", DataTable)
    await until(lambda: table.row_count > 0)
    keys = [row.key for row in table.ordered_rows]  # display order (sorted)
    ahr = [str(c.value) for c in table.columns].index("AHR")  # 80 columns show fewer
    broken = next(i for i, k in enumerate(keys) if str(table.get_row(k)[ahr]).startswith("False"))
    # a highlight event on the row, even when it is already the first (sorted: CRIT first)
    await pilot.press(*(["down"] * broken if broken else ["down", "up"]))
    # the detail with its pods
    await until(lambda: app.pods_of(str(keys[broken].value)) is not None)
    await still(pilot)


async def high_harm_prompt(pilot: Pilot[Any]) -> None:
    """`R` on the broken node, the first suggestion (pause-node-repair), its params and
    plan as given, then enter: the typed confirmation, nothing changed yet."""
    from textual.widgets import Input

    from mignurse.tui.screens.confirm import ConfirmScreen
    from mignurse.tui.screens.params import ParamsScreen
    from mignurse.tui.screens.picker import RunbookPicker
    from mignurse.tui.screens.plan import PlanScreen

    await broken_node(pilot)
    app = pilot.app
    await pilot.press("R")
    await until(lambda: isinstance(app.screen, RunbookPicker))
    await pilot.press("enter")
    await until(lambda: isinstance(app.screen, ParamsScreen) and app.screen.is_mounted)
    await pilot.press("enter")
    await until(lambda: isinstance(app.screen, PlanScreen) and app.screen.ready)
    await pilot.press("enter")
    await until(lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
    # the typed confirmation's cursor shown, not blinking: a blink caught mid-way is no change
    app.screen.query_one("#confirm-word", Input).cursor_blink = False
    await pilot.pause(0.2)


def test_fleet_view_puts_the_looping_pool_first(
    app: MigNurseApp, snap_compare: SnapCompare
) -> None:
    assert snap_compare(app, terminal_size=WIDE, run_before=settled)


def test_fleet_view_fits_80x24(app: MigNurseApp, snap_compare: SnapCompare) -> None:
    assert snap_compare(app, terminal_size=SMALL, run_before=settled)


def test_pool_nodes_with_the_broken_nodes_detail(
    app: MigNurseApp, snap_compare: SnapCompare
) -> None:
    assert snap_compare(app, terminal_size=WIDE, run_before=broken_node)


def test_help_lists_every_key(app: MigNurseApp, snap_compare: SnapCompare) -> None:
    assert snap_compare(app, terminal_size=WIDE, run_before=settled, press=["question_mark"])


def test_pool_nodes_fit_80x24_with_ahr_and_taints(
    app: MigNurseApp, snap_compare: SnapCompare
) -> None:
    assert snap_compare(app, terminal_size=SMALL, run_before=broken_node)


def test_high_harm_prompt_in_view_at_80x24(app: MigNurseApp, snap_compare: SnapCompare) -> None:
    assert snap_compare(app, terminal_size=SMALL, run_before=high_harm_prompt)
