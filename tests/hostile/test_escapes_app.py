"""The app on a cluster (and a bundle) whose every free-text field carries terminal escapes:
every screen an on-call engineer opens (the fleet, the node table, the detail pane, the
journals pager, the findings, describe, the audit log, the palette, a toast) is scanned as
the terminal would receive it, and no planted control is in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable
from tui.test_node_screen import until

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import BundleSource, LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app

from .escapes import HOSTILE_NODE, PAYLOAD, plant, raw_escapes, write_audit, write_bundle


def frame(app: MigNurseApp) -> str:
    """The whole screen as the terminal receives it: what Textual's driver would write for a
    full redraw (textual/_compositor.py `render_full_update`, Textual 8.2)."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


async def scanned(app: MigNurseApp, pilot: Any, where: str, seen: dict[str, str]) -> None:
    await pilot.pause()
    await pilot.pause()
    shown = frame(app)
    seen[where] = shown
    assert raw_escapes(shown, terminal=True) == [], where
    assert "\x1b]" not in shown and "\u202e" not in shown, where


# One worker builds the hostile cluster once for the whole module (make test: loadgroup).
pytestmark = pytest.mark.xdist_group("escapes-app")


@pytest.fixture(scope="module")
def hostile_sim(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SimCluster, Path, str]]:
    root = tmp_path_factory.mktemp("hostile-app")
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        pod_node = plant(sim)
        write_bundle(sim, root / "bundle")
        write_audit(root / "state")
        yield sim, root, pod_node
    finally:
        sim.stop()


@pytest.mark.deep
@pytest.mark.parametrize("where", ["live", "bundle"])
async def test_no_planted_escape_reaches_the_terminal_from_any_screen(
    hostile_sim: tuple[SimCluster, Path, str], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, root, pod_node = hostile_sim
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))
    if where == "live":
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(root / "config")))
        access = Access(sandbox_shells=sandbox_shells)
        source: Any = LiveSource(client, simulated="hostile ×0", clock=sim.now, access=access)
        source.check()
    else:
        source = BundleSource(root / "bundle")
    app = make_app(source)
    seen: dict[str, str] = {}
    async with app.run_test(size=(220, 200)) as pilot:  # tall: the detail pane fits whole
        fleet = app.query_one("#fleet", DataTable)
        await until(lambda: fleet.row_count > 0 and app.diagnosis is not None)
        await scanned(app, pilot, "fleet", seen)

        app.open_pool(None)
        nodes = app.query_one("#nodes", DataTable)
        await until(lambda: HOSTILE_NODE in {str(k.value) for k in nodes.rows})
        nodes.move_cursor(row=nodes.get_row_index(HOSTILE_NODE))
        await until(lambda: app.highlighted_node() == HOSTILE_NODE)
        await scanned(app, pilot, "nodes and the hostile node's detail", seen)

        nodes.move_cursor(row=nodes.get_row_index(pod_node))
        await until(lambda: app.highlighted_node() == pod_node)
        # Its labels, taints, conditions and events; live, its pods too.
        await until(lambda: "example.com/taint\\x1b]52" in frame(app))
        if where == "live":
            await until(lambda: "pod\\x1b]52" in frame(app))
        await scanned(app, pilot, "a GPU node's detail", seen)

        for key, screen in (("d", "describe"), ("f", "findings")):
            await pilot.press(key)
            await scanned(app, pilot, screen, seen)
            await pilot.press("escape")

        nodes.move_cursor(row=nodes.get_row_index(HOSTILE_NODE))
        await until(lambda: app.highlighted_node() == HOSTILE_NODE)
        await pilot.press("l")
        if where == "bundle":
            await until(lambda: 'err="\\x1b]52' in frame(app))
        await scanned(app, pilot, "journals" if where == "bundle" else "no journals", seen)
        await pilot.press("escape")

        await pilot.press("A")
        await until(lambda: "who\\x1b]52" in frame(app))
        await scanned(app, pilot, "audit", seen)
        await pilot.press("escape")

        app.notify(PAYLOAD, title=PAYLOAD)
        await scanned(app, pilot, "a toast", seen)

        app.sub_title = PAYLOAD
        assert "\x1b" not in app.sub_title and "\\x1b]52" in app.sub_title
        await pilot.press("colon")
        await scanned(app, pilot, "palette", seen)
        await pilot.press("escape")

    everything = "".join(seen.values())
    assert "\\x1b]52;c;aG9zdGlsZQ==" in everything  # the payload was on screen, inert
    assert "<U+202E>evil" in everything
