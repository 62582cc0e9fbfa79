"""The app on several kube contexts at once, built as `mignurse --context a,b` builds it,
against `sim serve`'s fleet (two scenarios, one unreachable context, one whose AWS SSO login
expired): one view across the clusters with a status line each, rows and findings worst
first with their cluster named, actions pinned to the highlighted node's own cluster, and
`mignurse open` of two bundles as one read-only view."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from mignurse.cli import build_parser, main
from mignurse.cli.app import bundle_app, live_app
from mignurse.session import BundleSource, FleetSource, LiveSource, split_key
from mignurse.sim.fleet import SimFleet
from mignurse.tui.app import MigNurseApp
from mignurse.tui.appstate import NODES
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.radar import RadarScreen

from .test_node_screen import static_text, until
from .test_runbook_screens import run_done

GOOD = ("sim-healthy", "sim-dcgm-repair-loop")
SELECTION = "sim-*,prod-eu,prod-us"


@pytest.fixture(scope="module")
def fleet(failing_fleet: tuple[SimFleet, Path]) -> tuple[SimFleet, Path]:
    return failing_fleet


def app_on(kubeconfig: Path, *flags: str) -> MigNurseApp:
    args = build_parser().parse_args(["--kubeconfig", str(kubeconfig), *flags])
    app = live_app(args)
    assert isinstance(app, MigNurseApp)
    return app


def lines_of(app: MigNurseApp) -> dict[str, str]:
    """Each cluster's status line, by context."""
    text = static_text(app.query_one("#clusters", Static))
    return {line.split()[0]: " ".join(line.split()) for line in text.splitlines() if line.strip()}


def sim_nodes(served: SimFleet, context: str) -> dict[str, dict[str, object]]:
    sim = next(s for s in served.sims if s.scenario.context_name == context)
    return {o["metadata"]["name"]: o for o in sim.objects("nodes")}


async def settled(app: MigNurseApp) -> None:
    """Every cluster's start has ended, and a diagnosis of the good ones is on screen."""
    await until(lambda: "connecting" not in static_text(app.query_one("#clusters", Static)))
    await until(lambda: app.diagnosis is not None and len(app._fleet) > 0 and app.refreshes > 1)
    source = app.source
    assert isinstance(source, FleetSource)
    await until(lambda: all(len(source.parts()) == 2 and p.synced() for _, p in source.parts()))
    await until(lambda: {split_key(r.pool)[0] for r in app._fleet} == set(GOOD))
    await judged_both(app)


async def judged_both(app: MigNurseApp) -> None:
    """A diagnosis of both good clusters on screen: each is judged as it joins, and the
    first diagnosis may be of the one that joined first (each has findings of its own)."""
    await until(
        lambda: (
            app.diagnosis is not None
            and {f.summary.split(":")[0] for f in app.diagnosis.findings} >= set(GOOD)
        )
    )


async def test_each_cluster_has_its_status_line_and_the_good_ones_rows_worst_first(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", SELECTION)
    async with app.run_test(size=(160, 50)) as pilot:
        await settled(app)
        lines = lines_of(app)
        assert list(lines) == [*GOOD, "prod-eu", "prod-us"]  # kubeconfig order
        for context in GOOD:
            assert lines[context].startswith(f"{context} connected v1."), lines[context]
        assert "unreachable (retrying)" in lines["prod-eu"] and "127.0.0.1:" in lines["prod-eu"]
        assert "credentials expired (retrying)" in lines["prod-us"]
        assert "aws sso login --profile prod-us" in lines["prod-us"]

        # the fleet: a CLUSTER column, the repair loop's pool first across both clusters
        table = app.query_one("#fleet", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[:2] == ["CLUSTER", "POOL"], labels
        first = [str(cell) for cell in table.get_row_at(0)]
        assert first[:2] == ["sim-dcgm-repair-loop", "gpu-inference"], first
        ranks = [r.rank for r in app._fleet]
        assert ranks == sorted(ranks)

        # the findings: worst first across clusters, each naming its cluster
        findings = app.diagnosis.findings if app.diagnosis else []
        assert findings and findings[0].severity == "critical"
        assert all(f.summary.split(":")[0] in GOOD for f in findings)
        assert any(f.summary.startswith("sim-healthy: ") for f in findings)

        # the radar: every cluster's repairs about to happen, each node named with its cluster
        await pilot.press("D")
        await until(lambda: isinstance(app.screen, RadarScreen) and bool(app.screen.rows()))
        assert isinstance(app.screen, RadarScreen)
        nodes_due = [row[1] for row in app.screen.rows()]
        assert nodes_due and all(n.split("/")[0] in GOOD for n in nodes_due), nodes_due
        assert any(n.startswith("sim-dcgm-repair-loop/") for n in nodes_due)
        await pilot.press("escape")

        # every good cluster's GPU nodes, as their servers have them, under CLUSTER
        app.open_pool(None)  # every pool's nodes
        await until(lambda: app.view == NODES and not app._pending)
        for context in GOOD:
            want = {
                n
                for n, o in sim_nodes(served, context).items()
                if any(k.startswith("nvidia.com/") for k in o["status"]["capacity"])  # type: ignore[index]
            }

            def shown(context: str = context) -> set[str]:
                return {split_key(k)[1] for k in app._rows if split_key(k)[0] == context}

            await until(lambda want=want, shown=shown: shown() == want)  # type: ignore[misc]
        nodes = app.query_one("#nodes", DataTable)
        assert [str(c.label) for c in nodes.columns.values()][2] == "CLUSTER"
        rows = [[str(cell) for cell in nodes.get_row_at(i)] for i in range(nodes.row_count)]
        critical = [row[2] for row in rows if row[1] == "CRIT"]
        assert critical and set(critical) == {"sim-dcgm-repair-loop"}, rows
        # grouped by cluster, then pool, as one cluster's table is by pool
        clusters = [row[2] for row in rows]
        assert clusters == sorted(clusters, key=clusters.index) and len(set(clusters)) == 2


async def test_rbac_denied_and_timed_out_clusters_say_so_and_never_hold_the_others(
    fleet: tuple[SimFleet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_COMMAND_TIMEOUT", "3")  # each cluster's start deadline
    _served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", "sim-healthy,staging,prod-ap")
    async with app.run_test(size=(160, 50)):
        # the good cluster's pools are up while the hung one still has not answered
        await until(lambda: bool(app._fleet))
        await until(lambda: "timed out (retrying)" in lines_of(app)["prod-ap"], timeout=60)
        lines = lines_of(app)
        assert lines["sim-healthy"].startswith("sim-healthy connected"), lines
        assert "RBAC denied (retrying): " in lines["staging"], lines
        assert lines["staging"].count("cannot list nodes") == 1, lines
        assert {split_key(r.pool)[0] for r in app._fleet} == {"sim-healthy"}


async def test_an_action_goes_to_the_highlighted_nodes_own_cluster_only(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", ",".join(GOOD))
    before = {c: sim_nodes(served, c) for c in GOOD}
    async with app.run_test(size=(160, 50)) as pilot:
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        source = app.source
        assert isinstance(source, FleetSource)
        await until(lambda: len(source.parts()) == 2)
        await until(lambda: any(k.startswith("sim-healthy/") for k in app.node_names()))
        key = next(k for k in app.node_names() if k.startswith("sim-healthy/"))
        _context, name = split_key(key)
        app.jump_to_node(key)
        await until(lambda: app.view == NODES and app.highlighted_node() == key)
        detail = app.query_one("#detail", Static)
        await until(lambda: "cluster sim-healthy" in static_text(detail))
        assert name in static_text(detail)
        pinned = app.pinned()
        assert pinned is not None
        part, names = pinned
        assert isinstance(part, LiveSource) and names == [name]
        assert part.client.info.context == "sim-healthy"

        app.query_one("#nodes", DataTable).focus()
        await pilot.press("x")
        await until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "sim-healthy" in app.screen.plan_text
        assert "sim-dcgm-repair-loop" not in app.screen.plan_text
        await pilot.press("y")
        screen = await run_done(app)
        assert screen.results[0].status == "succeeded", screen.report
        await pilot.press("escape")

    after = {c: sim_nodes(served, c) for c in GOOD}
    assert after["sim-healthy"][name]["spec"].get("unschedulable") is True  # type: ignore[attr-defined]
    # the other cluster's server saw no write: every node as it was
    other = "sim-dcgm-repair-loop"
    assert {n: o["metadata"]["resourceVersion"] for n, o in after[other].items()} == {  # type: ignore[index]
        n: o["metadata"]["resourceVersion"]
        for n, o in before[other].items()  # type: ignore[index]
    }


async def test_marked_nodes_of_two_clusters_are_refused_in_one_line(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", ",".join(GOOD))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        await until(lambda: {split_key(k)[0] for k in app.node_names()} == set(GOOD))
        one = next(k for k in app.node_names() if k.startswith("sim-healthy/"))
        two = next(k for k in app.node_names() if k.startswith("sim-dcgm-repair-loop/"))
        app.jump_to_node(one)
        await until(lambda: app.view == NODES)
        app.marks = frozenset({one, two})
        app.query_one("#nodes", DataTable).focus()
        await pilot.press("x")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
        said = [str(n.message) for n in app._notifications]
        assert any("in 2 clusters: act on one cluster's nodes at a time" in m for m in said)


async def test_read_only_holds_for_every_cluster(fleet: tuple[SimFleet, Path]) -> None:
    _served, kubeconfig = fleet
    app = app_on(kubeconfig, "--read-only", "--context", ",".join(GOOD))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(lambda: {split_key(k)[0] for k in app.node_names()} == set(GOOD))
        for context in GOOD:
            key = next(k for k in app.node_names() if k.startswith(f"{context}/"))
            app.jump_to_node(key)
            await until(lambda key=key: app.highlighted_node() == key)  # type: ignore[misc]
            assert app.selection().read_only_reason == "--read-only"
            assert app.check_action("cordon", ()) is False
            assert app.check_action("runbooks", ()) is False
            app.query_one("#nodes", DataTable).focus()
            await pilot.press("x")
            await pilot.pause(0.2)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("escape")


@pytest.fixture(scope="module")
def bundles(fleet: tuple[SimFleet, Path], tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Each good cluster collected as `mignurse collect` writes it from `sim serve`."""
    _served, kubeconfig = fleet
    folder = tmp_path_factory.mktemp("bundles")
    out = []
    which = {"sim-healthy": ["--nodepool", "gpu-infer"], "sim-dcgm-repair-loop": ["--unhealthy"]}
    for context in GOOD:
        path = folder / f"{context}.tar.gz"
        argv = ["--kubeconfig", str(kubeconfig), "--context", context, "collect", *which[context]]
        assert main([*argv, "-o", str(path)]) == 0
        out.append(path)
    return out


async def test_open_two_bundles_is_one_read_only_view_named_by_their_contexts(
    bundles: list[Path],
) -> None:
    app = bundle_app(build_parser().parse_args(["open", *map(str, bundles)]))
    assert isinstance(app, MigNurseApp)
    async with app.run_test(size=(160, 50)):
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        await until(lambda: {split_key(r.pool)[0] for r in app._fleet} == set(GOOD))
        await judged_both(app)
        lines = lines_of(app)
        assert list(lines) == list(GOOD)
        assert all("opened" in line and "bundle as of" in line for line in lines.values())
        assert app.read_only and app.check_action("cordon", ()) is False
        assert app.check_action("collect", ()) is False
        assert "READ-ONLY (bundles are read-only)" in app.sub_title
        findings = app.diagnosis.findings if app.diagnosis else []
        assert findings[0].summary.startswith("sim-dcgm-repair-loop: ")
        # each bundle's deadlines are the moments it alone gives (judged at its own time)
        alone, _rows = BundleSource(bundles[1]).assess()
        wanted = {(f.id, f.deadline) for f in alone.findings}
        got = {
            (f.id, f.deadline) for f in findings if f.summary.startswith("sim-dcgm-repair-loop: ")
        }
        assert got == wanted and any(deadline for _, deadline in got)


def test_open_one_bundle_is_the_bundle_source_as_ever(bundles: list[Path]) -> None:
    app = bundle_app(build_parser().parse_args(["open", str(bundles[0])]))
    assert isinstance(app, MigNurseApp) and isinstance(app.source, BundleSource)


async def test_a_cluster_that_failed_is_tried_again_and_joins_the_view(
    fleet: tuple[SimFleet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster whose start failed is retried in the background; once it connects its
    status line says so and its pools join the others'."""
    from mignurse.cluster.fleet import UNREACHABLE, Cluster, FleetRequest, run_fleet
    from mignurse.session import Member
    from mignurse.tui.app import make_app

    monkeypatch.setattr("mignurse.session.RETRY_SECONDS", 0.5)
    _served, kubeconfig = fleet
    tries: list[str] = []

    def started(client: object) -> LiveSource:
        source = LiveSource(client)  # type: ignore[arg-type]
        source.check()
        return source

    def retry(context: str) -> Cluster[LiveSource]:
        tries.append(context)
        if len(tries) == 1:  # still down at the first try
            down: Cluster[LiveSource] = Cluster(context)
            down.status, down.message = UNREACHABLE, "cannot reach it (still)"
            return down
        request = FleetRequest(str(kubeconfig), (context,), started, keep=True)
        return run_fleet(request)[0]

    first = Cluster("sim-healthy")
    first.status, first.message = UNREACHABLE, "cannot reach it"
    (other,) = run_fleet(
        FleetRequest(str(kubeconfig), ("sim-dcgm-repair-loop",), started, keep=True)
    )
    source = FleetSource([Member(first), Member(other, other.result)], retry=retry)
    app = make_app(source)
    async with app.run_test(size=(160, 50)):
        await until(
            lambda: "unreachable (retrying): cannot reach it" in lines_of(app)["sim-healthy"]
        )
        await until(lambda: {split_key(r.pool)[0] for r in app._fleet} == set(GOOD), timeout=90)
        assert lines_of(app)["sim-healthy"].startswith("sim-healthy connected")
        assert tries[:2] == ["sim-healthy", "sim-healthy"]


async def test_a_cluster_whose_watch_broke_says_stale_since_until_it_recovers(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", ",".join(GOOD))
    healthy = next(s for s in served.sims if s.scenario.context_name == "sim-healthy")
    async with app.run_test(size=(160, 50)):
        await until(lambda: {split_key(r.pool)[0] for r in app._fleet} == set(GOOD))
        with healthy.outage():
            await until(lambda: "stale since" in lines_of(app)["sim-healthy"], timeout=30)
            line = lines_of(app)["sim-dcgm-repair-loop"]
            assert line.startswith("sim-dcgm-repair-loop connected"), line
            assert any(split_key(r.pool)[0] == "sim-healthy" for r in app._fleet)  # kept
        await until(
            lambda: lines_of(app)["sim-healthy"].startswith("sim-healthy connected"), timeout=30
        )


def test_a_glob_that_selects_one_context_is_the_one_cluster_app(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    app = app_on(kubeconfig, "--context", "sim-heal*")
    try:
        assert isinstance(app.source, LiveSource) and app.source.context == "sim-healthy"
    finally:
        app.source.stop()
