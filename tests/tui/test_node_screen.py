"""The node table and its detail pane, driven with Textual's Pilot against the simulator.

The app lands on the fleet view; these tests open every pool's nodes first (as `a` would)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Static

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.refresh import TABLE_COLUMNS

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

POOL = TABLE_COLUMNS.index("POOL")
AHR = TABLE_COLUMNS.index("AHR")


async def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the screen never showed it")


def static_text(widget: Static) -> str:
    """What a Static shows, as plain text (markup strings and rich renderables alike)."""
    console = Console(width=200, file=io.StringIO(), record=True)
    content = widget.content
    console.print(Text.from_markup(content) if isinstance(content, str) else content)
    return console.export_text()


def table_rows(app: MigNurseApp) -> dict[str, tuple[str, ...]]:
    table = app.query_one("#nodes", DataTable)
    return {str(key.value): tuple(str(c) for c in table.get_row(key)) for key in table.rows}


async def test_shows_the_loop_and_a_replacement_arriving(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(180, 40)):
        app.open_pool(None)
        await until(lambda: app.refreshes > 0 and len(table_rows(app)) > 0)
        rows = table_rows(app)
        looping = {name for name, cells in rows.items() if cells[POOL] == "gpu-inference"}
        assert looping, "no gpu-inference nodes on screen"
        assert any("DCGMError" in cells[AHR] for cells in rows.values())
        status = static_text(app.query_one("#status", Static))
        assert "SIMULATED" in status and "GPU nodes" in status

        sim.advance(15 * 60)  # the repair fires and Karpenter's replacement joins

        def replaced() -> bool:
            now = {n for n, c in table_rows(app).items() if c[POOL] == "gpu-inference"}
            return bool(now - looping) and bool(looping - now)

        await until(replaced)


async def test_pool_key_filters_and_detail_pane_shows_conditions(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(180, 40)) as pilot:
        app.open_pool(None)
        await until(lambda: len(table_rows(app)) > 0)
        pools = {cells[POOL] for cells in table_rows(app).values()}
        assert len(pools) > 1
        await pilot.press("p")
        await until(lambda: len({c[POOL] for c in table_rows(app).values()}) == 1)
        await pilot.press("a")
        await until(lambda: {c[POOL] for c in table_rows(app).values()} == pools)
        table = app.query_one("#nodes", DataTable)
        table.focus()
        await pilot.press("down")
        await pilot.pause()
        detail = app.query_one("#detail", Static)
        await until(lambda: "AcceleratedHardwareReady" in static_text(detail))
        await until(lambda: "using GPUs" in static_text(detail))  # pods, fetched off the UI thread


async def test_c_collects_the_highlighted_node_into_a_bundle(
    repair_loop: tuple[SimCluster, MigNurseApp], tmp_path: Path
) -> None:
    _sim, app = repair_loop
    app.source.bundle_dir = tmp_path
    async with app.run_test(size=(180, 40)) as pilot:
        app.open_pool(None)
        await until(lambda: len(table_rows(app)) > 0)
        table = app.query_one("#nodes", DataTable)
        table.focus()
        await pilot.press("c")
        await until(lambda: any(tmp_path.glob("mignurse-bundle-*.tar.gz")), timeout=30)
        await until(lambda: any("Bundle written" in str(n.message) for n in app._notifications))
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    from mignurse.diagnose.sources import load_offline

    gathered = load_offline(bundle)
    assert len(gathered.node_evidence) == 1


async def test_auto_collect_bundles_the_node_under_a_repair_clock(tmp_path: Path) -> None:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        bundles = tmp_path / "bundles"
        bundles.mkdir()
        source = LiveSource(
            client,
            simulated="dcgm-repair-loop ×0",
            clock=sim.now,
            auto_collect=bundles,
            access=SIM_ACCESS,
        )
        source.check()
        app = make_app(source)
        async with app.run_test(size=(180, 40)):
            await until(lambda: any(bundles.glob("*.tar.gz")), timeout=30)
            await until(lambda: any("auto-collect" in str(n.title) for n in app._notifications))
    finally:
        sim.stop()
