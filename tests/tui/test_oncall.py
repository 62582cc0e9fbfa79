"""The app as an on-call engineer drives it, through Textual's Pilot against the simulator:
the detail pane never shows another node than the highlighted one, tables laid out by
content and fitting 80 columns, filters per view and live, j/k/g/G, a palette of GPU pools
and nodes only, a bundle opened and left with esc, journals and every finding in pagers,
a refresh that fails and refreshing that goes on, and the demo's cluster built in view."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Group
from rich.text import Text
from textual.widgets import DataTable, Static

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import BuildingSource, LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui import refresh as refresh_module
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.appstate import FLEET, NODES
from mignurse.tui.screens.pager import PagerScreen

from .sizes import sizes
from .test_fleet_app import fleet_rows
from .test_node_screen import static_text, table_rows, until

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes


def live_app(sim: SimCluster, tmp_path: Path, name: str) -> MigNurseApp:
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated=f"{name} ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    return make_app(source)


@pytest.fixture
def mig_hook(tmp_path: Path, state_home: Path) -> Iterator[tuple[SimCluster, MigNurseApp]]:
    sim = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    yield sim, live_app(sim, tmp_path, "mig-hook-notready")
    sim.stop()


@pytest.fixture(scope="module")
def mig_bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A bundle of mig-hook-notready's unhealthy node, collected as `mignurse collect` does."""
    from mignurse.cli import main

    folder = tmp_path_factory.mktemp("bundle")
    sim = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    try:
        kubeconfig = sim.write_kubeconfig(folder / "config")
        bundle = folder / "mig-hook.tar.gz"
        code = main(["--kubeconfig", str(kubeconfig), "collect", "--unhealthy", "-o", str(bundle)])
        assert code == 0 and bundle.exists()
        yield bundle
    finally:
        sim.stop()


def pane_subject(app: MigNurseApp) -> str:
    """The first word of the detail pane: a node's full name, or a placeholder's word."""
    content: Any = app.query_one("#detail", Static).content
    if isinstance(content, Group):
        content = content.renderables[0]
    text = content.plain if isinstance(content, Text) else str(content)
    return text.split(maxsplit=1)[0] if text.strip() else ""


def on_every_frame(app: MigNurseApp, check: Callable[[], None]) -> None:
    """Run `check` each time the screen is painted (the state it shows is the state now)."""
    display = app._display

    def painted(screen: Any, renderable: Any) -> None:
        if renderable is not None and app.is_running:
            check()
        display(screen, renderable)

    app._display = painted  # type: ignore[method-assign]


async def settled(app: MigNurseApp) -> None:
    await until(lambda: app.diagnosis is not None and bool(fleet_rows(app)), timeout=30)
    seen = app.refreshes
    await until(lambda: app.refreshes > seen)


# -- 1: the pane shows the highlighted node, or says it is loading ---------------------------


@sizes
async def test_the_detail_pane_never_shows_another_nodes_data(
    repair_loop: tuple[SimCluster, MigNurseApp], size: tuple[int, int]
) -> None:
    _sim, app = repair_loop
    frames: list[str] = []
    wrong: list[str] = []

    def check() -> None:
        if app.view != NODES:
            return
        shown, highlighted = pane_subject(app), app.highlighted_node()
        frames.append(shown)
        if shown.startswith("ip-") and shown != highlighted:
            wrong.append(f"pane {shown} while {highlighted} is highlighted")

    async with app.run_test(size=size) as pilot:
        await settled(app)
        on_every_frame(app, check)
        await pilot.press("enter")  # the looping pool, worst first
        await until(lambda: app.highlighted_node() is not None)
        await pilot.press("j", "j", "k", "G", "g", "j")  # as fast as keys come
        await pilot.press("escape", "j", "enter", "j", "k")  # another pool
        await pilot.press("escape", "g", "enter", "p", "p", "a", "G")
        await until(lambda: pane_subject(app) == app.highlighted_node())
        await pilot.pause(0.6)  # a refresh re-sorts the rows under the cursor
    assert not wrong, wrong[:5]
    assert sum(1 for f in frames if f.startswith("ip-")) > 5  # the check saw nodes shown


# -- 9 and 16: laid out by content --------------------------------------------------------------


async def test_tables_take_their_rows_and_the_pane_below_the_rest_at_120x40(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app)
        fleet = app.query_one(f"#{FLEET}", DataTable)
        preview = app.query_one("#fleet-preview-pane")
        assert fleet.size.height == fleet.row_count + 1  # the rows and the header, no more
        assert preview.size.height >= 40 // 2  # the lower half is the worst pool's
        shown = static_text(app.query_one("#fleet-preview", Static))
        assert "Nodes of gpu-inference (3), worst first" in shown
        assert "Worst node ip-" in shown and "node-repair-loop" in shown
        assert "Evidence of node-repair-loop, newest last" in shown  # what it rests on
        await pilot.press("enter")
        await until(lambda: len(table_rows(app)) == 3)
        table = app.query_one("#nodes", DataTable)
        pane = app.query_one("#detail-pane")
        await until(lambda: table.size.height == 4)
        assert pane.size.height >= 20


# -- 10: 80 columns show AHR and CORDONED/TAINTS ----------------------------------------------


async def test_the_node_table_fits_80_columns_with_ahr_and_taints_in_view(
    mig_hook: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = mig_hook
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(app)
        preview = static_text(app.query_one("#fleet-preview", Static))
        header = next(line for line in preview.splitlines() if "NAME" in line)
        assert "AHR" in header and "TAINTS" in header
        assert "…" not in header
        await pilot.press("enter")
        table = app.query_one("#nodes", DataTable)
        await until(lambda: table.row_count == 2 and bool(app._widths))
        await pilot.pause(0.2)
        assert table.virtual_size.width <= table.size.width  # no side scroll
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels[-2:] == ["AHR", "TAINTS"]
        rows = table_rows(app)
        broken = next(cells for name, cells in rows.items() if name.startswith("ip-10-0-0-114"))
        assert broken[-1] == "not-ready" and broken[-3].endswith("failed")


# -- 11 and 12: filters per view, live; j/k/g/G ------------------------------------------------


async def test_each_view_keeps_its_own_live_filter_and_jk_move(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app)
        pools = len(fleet_rows(app))
        await pilot.press("slash", *"infer")  # no enter: the rows follow the typing
        await until(lambda: [r[0] for r in fleet_rows(app)] == ["gpu-inference"])
        await pilot.press("enter", "enter")  # close the filter, then open the pool
        await until(lambda: app.view == NODES and len(table_rows(app)) == 3)
        bar = static_text(app.query_one("#nodes-bar", Static))
        assert "filter" not in bar  # the fleet's filter stays with the fleet
        table = app.query_one("#nodes", DataTable)
        order = [str(k.value) for k in (r.key for r in table.ordered_rows)]
        await pilot.press("j")
        assert app.highlighted_node() == order[1]
        await pilot.press("G")
        assert app.highlighted_node() == order[-1]
        await pilot.press("k")
        assert app.highlighted_node() == order[-2]
        await pilot.press("g")
        assert app.highlighted_node() == order[0]
        target = order[1].split(".", 1)[0]
        await pilot.press("slash", *target)
        # the rows narrow to one before the last keys land: wait for the whole filter
        await until(
            lambda: f"filter /{target} " in static_text(app.query_one("#nodes-bar", Static))
        )
        await until(lambda: set(table_rows(app)) == {order[1]})
        await pilot.press("escape", "escape")  # close the input, clear the node filter
        await until(lambda: len(table_rows(app)) == 3)
        await pilot.press("escape")  # back to the fleet: its own filter is still there
        await until(lambda: app.view == FLEET)
        assert "filter /infer" in static_text(app.query_one("#fleet-bar", Static))
        assert len(fleet_rows(app)) == 1
        await pilot.press("escape")
        await until(lambda: len(fleet_rows(app)) == pools)


# -- 13: the palette offers GPU pools and nodes; a bundle is left with esc ---------------------


async def test_the_palette_offers_only_gpu_pools_and_nodes(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(120, 40)):
        await settled(app)
        cpu = {
            n["metadata"]["name"]
            for n in sim.objects("nodes")
            if "nvidia.com/gpu" not in n["status"].get("capacity", {})
        }
        assert cpu, "the scenario has CPU nodes"
        assert not cpu & set(app.node_names())
        assert app.node_names()
        assert "general" not in app.pool_names()
        assert set(app.pool_names()) == {r[0] for r in fleet_rows(app)}


async def test_esc_from_a_bundle_goes_back_to_the_cluster_it_was_opened_from(
    repair_loop: tuple[SimCluster, MigNurseApp], mig_bundle: Path
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app)
        context = app.source.context
        app.open_bundle(mig_bundle)
        await until(lambda: app.read_only and any(r[0] == "gpu-mig" for r in fleet_rows(app)))
        assert f"esc: back to {context}" in app.sub_title
        await pilot.press("escape")
        await until(lambda: not app.read_only and app.source.context == context)
        await until(lambda: any(r[0] == "gpu-inference" for r in fleet_rows(app)))
        assert "esc: back" not in app.sub_title


# -- 6 and 7: journals and every finding, readable in the app ----------------------------------


async def test_l_opens_the_journal_at_the_cited_line_and_f_lists_every_finding(
    mig_bundle: Path,
) -> None:
    from mignurse.session import BundleSource

    app = make_app(BundleSource(mig_bundle))
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(app)
        assert app.diagnosis is not None
        await pilot.press("enter")
        await until(lambda: bool(table_rows(app)))
        notready = next(n for n, c in table_rows(app).items() if "NotReady" in " ".join(c))
        app.jump_to_node(notready)
        await until(lambda: app.detail_node() == notready)
        detail = static_text(app.query_one("#detail", Static))
        cited = [line.strip() for line in detail.splitlines() if line.strip().startswith("line ")]
        assert cited, detail  # the lines `diagnose` prints, in the pane
        await pilot.press("l")
        await until(lambda: isinstance(app.screen, PagerScreen))
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        await pilot.pause()
        number = cited[0].split(":", 1)[0].removeprefix("line ").strip()
        current = pager.view.current
        assert current is not None and current in pager.page.marks
        assert pager.view.lines[current].plain.split()[0] == number  # opened on that line
        assert "journal of" in pager.page.title
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, PagerScreen))
        await pilot.press("f")
        await until(lambda: isinstance(app.screen, PagerScreen))
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        every = "\n".join(line.plain for line in pager.page.lines)
        assert all(f.id in every for f in app.diagnosis.findings)
        assert len(pager.page.marks) == len(app.diagnosis.findings)
        await pilot.press("escape", "d")
        await until(lambda: isinstance(app.screen, PagerScreen))
        assert "Conditions" in "\n".join(line.plain for line in app.screen.page.lines)


# -- the refresh goes on after a failure ----------------------------------------------------------


async def test_a_refresh_that_raises_is_shown_and_refreshing_goes_on(
    repair_loop: tuple[SimCluster, MigNurseApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    _sim, app = repair_loop
    compute = refresh_module.Refresher.compute
    failures = {"left": 0}

    def flaky(self: refresh_module.Refresher, request: Any) -> Any:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise RuntimeError("the watch cache moved under the refresh")
        return compute(self, request)

    monkeypatch.setattr(refresh_module.Refresher, "compute", flaky)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app)
        failures["left"] = 2
        await until(lambda: "refresh failed" in static_text(app.query_one("#findings", Static)))
        assert "RuntimeError" in static_text(app.query_one("#findings", Static))
        seen = app.refreshes
        await until(lambda: failures["left"] == 0 and app.refreshes > seen + 1)
        await pilot.press("enter")  # the app still answers, with fresh rows
        await until(lambda: len(table_rows(app)) == 3)


# -- 21: the demo's cluster is built in view ------------------------------------------------------


def _building_seconds(status: str) -> int:
    found = re.search(r"building the simulated cluster slow: (\d+) s", status)
    return int(found.group(1)) if found else -1


async def test_the_demo_shows_progress_while_its_cluster_is_built_and_never_all_ready_early(
    tmp_path: Path, state_home: Path
) -> None:
    release = threading.Event()
    sims: list[SimCluster] = []

    def build() -> LiveSource:
        assert release.wait(60)
        sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
        sims.append(sim)
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        source = LiveSource(
            client, simulated="dcgm-repair-loop ×0", clock=sim.now, access=SIM_ACCESS
        )
        source.check()
        return source

    seen: list[str] = []
    app = make_app(BuildingSource(build, what="simulated cluster slow", simulated="slow ×0"))
    try:
        async with app.run_test(size=(120, 40)):
            status = app.query_one("#status", Static)
            findings = app.query_one("#findings", Static)

            def check() -> None:
                seen.append(static_text(status) + static_text(findings))

            on_every_frame(app, check)
            # The count rises while it builds; a busy machine may skip a second of it.
            await until(lambda: _building_seconds(static_text(status)) >= 2)
            assert "No findings" not in static_text(findings)
            assert "no pool" in static_text(app.query_one("#fleet-preview", Static)).lower()
            release.set()
            await until(lambda: "GPU nodes" in static_text(status) and bool(fleet_rows(app)))
            await until(lambda: app.diagnosis is not None)
            await asyncio.sleep(0.6)
        before_list = [s for s in seen if "GPU nodes ·" not in s and "building" in s]
        assert before_list, "no frame while building"
        assert not any("all ready" in s or "No findings" in s for s in before_list)
        assert any("all ready" in s for s in seen)  # once listed, the count is true
    finally:
        release.set()
        for sim in sims:
            sim.stop()


async def test_a_demo_that_cannot_build_says_why_on_the_status_line(state_home: Path) -> None:
    def build() -> LiveSource:
        raise OSError("cannot listen on 127.0.0.1:0: address in use")

    app = make_app(BuildingSource(build, what="simulated cluster broken", simulated="broken ×0"))
    async with app.run_test(size=(120, 40)):
        status = app.query_one("#status", Static)
        await until(lambda: "could not start" in static_text(status))
        assert "address in use" in static_text(status)


# -- 15: one clock: the bundle's name and its collected_at agree ---------------------------------


async def test_a_bundle_collected_while_the_clock_runs_is_named_for_its_collected_at(
    repair_loop: tuple[SimCluster, MigNurseApp], tmp_path: Path
) -> None:
    import json
    import tarfile

    sim, app = repair_loop
    app.source.bundle_dir = tmp_path
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app)
        await pilot.press("enter")
        await until(lambda: app.highlighted_node() is not None)

        async def clock() -> None:  # the demo's clock runs while the node is collected
            while True:
                sim.advance(7)
                await asyncio.sleep(0.02)

        ticking = asyncio.create_task(clock())
        try:
            await pilot.press("c")
            await until(lambda: any("Bundle written" in str(n.message) for n in app._notifications))
        finally:
            ticking.cancel()
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    with tarfile.open(bundle) as tar:
        member = next(
            m
            for m in tar.getmembers()
            if m.name.count("/") == 1 and m.name.endswith("/manifest.json")
        )
        handle = tar.extractfile(member)
        assert handle is not None
        manifest = json.load(handle)
    stamp = bundle.name.removesuffix(".tar.gz").rsplit("-", 1)[1]  # 20250602T090312Z
    collected = manifest["collected_at"]  # 2025-06-02T09:03:12Z
    assert stamp == collected.replace("-", "").replace(":", ""), (bundle.name, collected)
