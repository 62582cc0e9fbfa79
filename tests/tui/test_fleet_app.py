"""The app's landing fleet view and its k9s-style navigation, through Textual's Pilot.

Fleet → enter → the pool's nodes → esc back; `/` filters (regex, `!`, `-l`); space marks
and `c` collects the marks into one bundle; `?` help; `:` palette; a bundle opened
read-only; the stale banner while the API server is down.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from textual.widgets import DataTable, Input, Static

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.fleetview import COLUMNS as FLEET_COLUMNS
from mignurse.session import BundleSource, LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.appstate import FLEET, NODES
from mignurse.tui.refresh import TABLE_COLUMNS
from mignurse.tui.screens.help import HelpScreen

from .test_node_screen import static_text, table_rows, until

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

POOL = TABLE_COLUMNS.index("POOL")
NAME = TABLE_COLUMNS.index("NAME")


def fleet_rows(app: MigNurseApp) -> list[tuple[str, ...]]:
    table = app.query_one(f"#{FLEET}", DataTable)
    return [tuple(str(c) for c in table.get_row(key)) for key in table.rows]


def footer_keys(app: MigNurseApp) -> set[str]:
    return {b.key for _, b, enabled, _ in app.screen.active_bindings.values() if b.show and enabled}


async def test_lands_on_the_fleet_with_the_looping_pool_first_and_drills_in(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: bool(fleet_rows(app)) and fleet_rows(app)[0][1].startswith("CRIT"))
        first = dict(zip(FLEET_COLUMNS, fleet_rows(app)[0], strict=True))
        assert first["POOL"] == "gpu-inference" and first["KIND"] == "NodePool"
        assert first["REPAIR"] == "on"
        assert app.view == FLEET
        assert "space" not in footer_keys(app) and "question_mark" in footer_keys(app)
        await pilot.press("enter")
        await until(lambda: bool(table_rows(app)))
        assert app.view == NODES
        assert {cells[POOL] for cells in table_rows(app).values()} == {"gpu-inference"}
        assert "space" in footer_keys(app)
        await pilot.press("escape")
        await until(lambda: app.view == FLEET)


async def test_filter_regex_invert_labels_and_a_bad_pattern(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 40)) as pilot:
        app.open_pool(None)
        await until(lambda: len(table_rows(app)) > 2)
        names = sorted(table_rows(app))
        target = names[0].split(".", 1)[0]
        await pilot.press("slash")
        await pilot.press(*target, "enter")
        await until(lambda: set(table_rows(app)) == {names[0]})
        assert f"filter /{target}" in static_text(app.query_one("#nodes-bar", Static))
        await pilot.press("slash", "ctrl+a", "ctrl+k")
        await pilot.press(*f"!{target}", "enter")
        await until(lambda: names[0] not in table_rows(app) and len(table_rows(app)) > 0)
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"-l karpenter.sh/nodepool=gpu-inference")
        await pilot.press("enter")
        await until(lambda: {c[POOL] for c in table_rows(app).values()} == {"gpu-inference"})
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"[oops", "enter")
        await until(lambda: any("regular expression" in str(n.message) for n in app._notifications))
        assert app.query_one("#filter", Input).display  # still open to fix it
        await pilot.press("escape", "escape")  # close the input, then clear the filter
        await until(lambda: app.row_filter is None and len(table_rows(app)) == len(names))


async def test_marks_then_collect_makes_one_bundle_of_the_marked_nodes(
    repair_loop: tuple[SimCluster, MigNurseApp], tmp_path: Path
) -> None:
    _sim, app = repair_loop
    app.source.bundle_dir = tmp_path
    async with app.run_test(size=(160, 40)) as pilot:
        app.open_pool("gpu-inference")
        await until(lambda: len(table_rows(app)) >= 2 and app.diagnosis is not None)
        await pilot.pause(0.6)  # a refresh after the diagnosis: rows sorted by their badges
        app.query_one("#nodes", DataTable).focus()
        await pilot.press("space", "space")  # marks and moves down: two nodes
        await until(lambda: len(app.marks) == 2)
        marked = {n for n, c in table_rows(app).items() if c[0] == "*"}
        assert marked == set(app.marks)
        await until(lambda: "2 marked" in static_text(app.query_one("#status", Static)))
        await pilot.press("c")
        await until(lambda: any(tmp_path.glob("*.tar.gz")), timeout=40)
        await until(lambda: any("Bundle written" in str(n.message) for n in app._notifications))
    (bundle,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(bundle) as tar:
        nodes = {m.name.split("/")[2] for m in tar.getmembers() if "/nodes/" in m.name}
    assert nodes == set(app.marks)


async def test_help_lists_the_keys_and_esc_closes_it(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("question_mark")
        await until(lambda: isinstance(app.screen, HelpScreen))
        text = "".join(static_text(w) for w in app.screen.query(Static))
        for key in ("space", "/", ":", "esc", "collect"):
            assert key in text
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, HelpScreen))


async def test_palette_jumps_to_a_node(repair_loop: tuple[SimCluster, MigNurseApp]) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: bool(fleet_rows(app)))
        name = app.node_names()[-1]
        await pilot.press("colon")
        await pilot.pause()
        await pilot.press(*f"Node {name}")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(lambda: app.view == NODES)
        await until(lambda: app.highlighted_node() == name)
        await until(lambda: name in static_text(app.query_one("#detail", Static)))


async def test_stale_banner_while_the_api_server_is_down(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(160, 40)):
        await until(lambda: bool(fleet_rows(app)))
        with sim.outage():
            await until(
                lambda: "STALE" in static_text(app.query_one("#status", Static)), timeout=30
            )
            assert fleet_rows(app)  # the last data stays on screen
        await until(
            lambda: "STALE" not in static_text(app.query_one("#status", Static)), timeout=30
        )


async def test_a_bundle_opens_read_only_with_node_evidence(tmp_path: Path) -> None:
    from mignurse.cli import main

    sim = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    try:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        bundle = tmp_path / "b.tar.gz"
        code = main(["--kubeconfig", str(kubeconfig), "collect", "--unhealthy", "-o", str(bundle)])
        assert code == 0
    finally:
        sim.stop()
    app = make_app(BundleSource(bundle))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: bool(fleet_rows(app)))
        assert app.read_only and "READ-ONLY" in app.sub_title
        assert "BUNDLE" in static_text(app.query_one("#status", Static))
        await pilot.press("enter")
        await until(lambda: bool(table_rows(app)))
        assert "c" not in footer_keys(app) and "R" not in footer_keys(app)
        notready = next(n for n, c in table_rows(app).items() if "NotReady" in c[5])
        app.jump_to_node(notready)
        await until(
            lambda: "Collected on the node" in static_text(app.query_one("#detail", Static))
        )
        assert "MIG state" in static_text(app.query_one("#detail", Static))


async def test_palette_switches_context_and_opens_a_bundle_in_place(
    repair_loop: tuple[SimCluster, MigNurseApp], tmp_path: Path
) -> None:
    from mignurse.cli import main

    _sim, app = repair_loop
    other = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    try:
        kubeconfig = other.write_kubeconfig(tmp_path / "other-config")
        bundle = tmp_path / "b.tar.gz"
        assert main(
            ["--kubeconfig", str(kubeconfig), "collect", "--unhealthy", "-o", str(bundle)]
        ) in (0, 1)

        def connect(context: str) -> LiveSource:
            source = LiveSource(
                ClusterClient.connect(kubeconfig=str(kubeconfig), context=context),
                simulated="mig-hook-notready ×0",
                clock=other.now,
                access=SIM_ACCESS,
            )
            source.check()
            return source

        contexts = [other.scenario.context_name]
        app._connect, app._contexts = connect, lambda: contexts
        async with app.run_test(size=(160, 40)):
            await until(lambda: bool(fleet_rows(app)) and fleet_rows(app)[0][0] == "gpu-inference")
            assert app.context_names() == contexts
            app.switch_context(contexts[0])
            await until(lambda: any(r[0] == "gpu-mig" for r in fleet_rows(app)), timeout=30)
            assert "gpu-inference" not in {r[0] for r in fleet_rows(app)}
            assert contexts[0] in app.sub_title and not app.read_only
            app.open_bundle(bundle)
            await until(lambda: app.read_only and "READ-ONLY" in app.sub_title)
            await until(lambda: any(r[0] == "gpu-mig" for r in fleet_rows(app)))
            app.open_bundle(tmp_path / "nope.tar.gz")
            await until(lambda: any("nope.tar.gz" in str(n.message) for n in app._notifications))
            assert app.read_only  # a bad path leaves the shown bundle as it was
    finally:
        other.stop()
