"""The app pointed at a kubeconfig from `mignurse sim serve`, built as `mignurse --kubeconfig
KC` builds it: it reaches the nodes the way `mignurse collect` and `mignurse run` do with the
same kubeconfig (the simulator's sandboxes), so `c`, `l` and a runbook's node steps work
there too instead of trying SSH to names that do not resolve."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from mignurse.cli import build_parser
from mignurse.cli.app import live_app
from mignurse.cli.common import access_for, is_simulated
from mignurse.cluster.client import ClusterClient
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui.app import MigNurseApp
from mignurse.tui.appstate import NODES
from mignurse.tui.screens.pager import PagerScreen
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.plan import PlanScreen

from .sizes import sizes
from .test_node_screen import until


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimCluster, Path]]:
    """mig-1g24gb as `sim serve` serves it, and its kubeconfig; bundles land in tmp_path."""
    monkeypatch.chdir(tmp_path)
    sim = SimCluster(load_scenario("mig-1g24gb"), speed=0).start()
    try:
        yield sim, sim.write_kubeconfig(tmp_path / "kc")
    finally:
        sim.stop()


def app_on(kubeconfig: Path) -> MigNurseApp:
    args = build_parser().parse_args(["--kubeconfig", str(kubeconfig)])
    app = live_app(args)
    assert isinstance(app, MigNurseApp)
    return app


def broken_node(sim: SimCluster) -> str:
    (name,) = [
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    ]
    return str(name)


def test_the_app_and_the_cli_decide_the_same_transport_for_one_kubeconfig(
    served: tuple[SimCluster, Path],
) -> None:
    _sim, kubeconfig = served
    args = build_parser().parse_args(["--kubeconfig", str(kubeconfig), "collect", "--unhealthy"])
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    cli = access_for(args).resolve(simulated=is_simulated(args.kubeconfig, client.info.cluster))
    app = app_on(kubeconfig)
    source = app.source
    assert isinstance(source, LiveSource)
    assert cli == "sim"
    assert source.simulated == "mig-1g24gb (sim serve)"
    assert source.access.resolve(simulated=bool(source.simulated)) == cli


@sizes
async def test_c_on_a_sim_serve_cluster_collects_the_node_and_l_reads_its_journals(
    served: tuple[SimCluster, Path], tmp_path: Path, size: tuple[int, int]
) -> None:
    sim, kubeconfig = served
    node = broken_node(sim)
    app = app_on(kubeconfig)
    async with app.run_test(size=size) as pilot:
        await until(lambda: app.refreshes > 0)
        app.jump_to_node(node)
        await until(lambda: app.view == NODES and app.highlighted_node() == node)
        app.query_one("#nodes", DataTable).focus()
        await pilot.press("c")
        await until(
            lambda: any(
                "Bundle written" in str(n.message) or "lacks" in str(n.message)
                for n in app._notifications
            )
        )
        said = [str(n.message) for n in app._notifications]
        assert not [m for m in said if "lacks" in m or "cannot resolve" in m], said
        await pilot.press("l")
        await until(lambda: isinstance(app.screen, PagerScreen))
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        assert "kubelet journal of ip-10-0-30-151" in pager.page.title or any(
            "kubelet" in p.title for p in pager.pages
        )
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert any(n.endswith(f"nodes/{node}/kubelet.log") for n in names), names


async def test_a_runbook_node_step_reaches_the_sim_serve_node_through_its_sandbox(
    served: tuple[SimCluster, Path],
) -> None:
    """reapply-mig-no-hooks' preflight asks the node (systemctl is-active, read-only) while
    it plans: on a healthy node of the served cluster the plan holds, nothing blocked."""
    sim, kubeconfig = served
    broken = broken_node(sim)
    healthy = sorted(
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if n["metadata"]["name"] != broken and "nvidia.com/mig.config" in n["metadata"]["labels"]
    )[0]
    app = app_on(kubeconfig)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: app.refreshes > 0)
        app.jump_to_node(healthy)
        await until(lambda: app.view == NODES and app.highlighted_node() == healthy)
        app.start_runbook("reapply-mig-no-hooks")
        await until(lambda: isinstance(app.screen, ParamsScreen) and app.screen.is_mounted)
        await pilot.press("enter")  # the defaults: the node's own config label
        await until(lambda: isinstance(app.screen, PlanScreen) and app.screen.ready)
        plan = app.screen
        assert isinstance(plan, PlanScreen)
        assert plan.error == ""
        assert not [s.blocked for p in plan.plans for s in p.blocked]
