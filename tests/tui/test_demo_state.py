"""A runbook run from `mignurse demo` acts on a simulated cluster, on the simulator's clock,
under a production-like cluster name: it stays in the demo's own state (audit log, run state,
history), gone with the demo, and never shows in the user's `mignurse runs`. `mignurse runs`
names each run's context."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from mignurse import paths
from mignurse.cli import build_parser, main
from mignurse.cli.app import demo_session
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui.app import MigNurseApp
from mignurse.tui.appstate import NODES
from mignurse.tui.screens.audit import AuditScreen
from mignurse.tui.screens.confirm import ConfirmScreen

from .sizes import sizes
from .test_node_screen import static_text, until
from .test_runbook_screens import run_done


@sizes
async def test_a_run_from_the_demo_stays_in_the_demo_and_leaves_the_real_audit_log_alone(
    size: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    real = paths.state_home()
    args = build_parser().parse_args(["demo", "--scenario", "dcgm-repair-loop", "--speed", "1"])
    with demo_session(args) as app:
        assert isinstance(app, MigNurseApp)
        kept = paths.state_home()
        assert kept != real and not kept.is_relative_to(real)
        async with app.run_test(size=size) as pilot:
            await until(lambda: isinstance(app.source, LiveSource) and app.refreshes > 1)
            await until(lambda: bool(app.node_names()))
            node = app.node_names()[0]
            app.jump_to_node(node)
            await until(lambda: app.view == NODES and app.highlighted_node() == node)
            app.query_one("#nodes", DataTable).focus()
            await pilot.press("x")
            await until(lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            screen = await run_done(app)
            assert screen.results[0].status == "succeeded", screen.report
            run_id = screen.results[0].run_id
            await pilot.press("escape")
            await until(lambda: app.screen is app.screen_stack[0])

            assert run_id in paths.audit_log().read_text()
            assert (paths.runs_dir() / f"{run_id}.json").exists()
            await pilot.press("A")
            await until(lambda: isinstance(app.screen, AuditScreen))
            audit = app.screen
            assert isinstance(audit, AuditScreen)
            (row,) = audit.rows()
            assert row[5] == run_id and row[6] == "sim-dcgm-repair-loop"
            title = static_text(audit.query_one("#audit-title", Static))
            assert "the demo's own log, apart from yours" in title
    assert paths.state_home() == real
    assert not kept.exists()  # gone with the demo
    assert not paths.audit_log().exists() and not paths.runs_dir().exists()
    capsys.readouterr()
    assert main(["runs"]) == 0
    assert run_id not in capsys.readouterr().out


def test_mignurse_runs_names_the_context_each_run_ran_against(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "kc"))
        node = sorted(n["metadata"]["name"] for n in sim.objects("nodes"))[0]
        code = main(["--kubeconfig", kubeconfig, "run", "cordon", "--node", node, "--yes"])
        assert code == 0, capsys.readouterr()
    capsys.readouterr()
    assert main(["runs"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:4] == ["STARTED", "RUN", "RUNBOOK", "CONTEXT"]
    assert "cordon" in row.split() and "sim-dcgm-repair-loop" in row.split()
