"""`mignurse demo --clusters N`: the demo's clusters served in-process on one clock and
opened as one view, one of them unreachable; its kubeconfig and state in the demo's own
folder, gone with it; out-of-range or conflicting flags are one line."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from mignurse import paths
from mignurse.cli import build_parser, main
from mignurse.cli.app import DEMO_MAX_CLUSTERS, demo_fleet_session
from mignurse.session import FleetSource, split_key
from mignurse.sim.fleet import DEMO_CLUSTERS
from mignurse.sim.fleet import DEMO_MAX_CLUSTERS as SERVED_MAX
from mignurse.tui.app import MigNurseApp

from .test_node_screen import static_text, until


def test_the_help_names_as_many_clusters_as_the_simulator_serves() -> None:
    assert DEMO_MAX_CLUSTERS == SERVED_MAX == len(DEMO_CLUSTERS)


async def test_four_clusters_one_looping_one_mig_hook_one_calm_one_unreachable() -> None:
    real = paths.state_home()
    args = build_parser().parse_args(["demo", "--clusters", "4", "--speed", "1"])
    with demo_fleet_session(args) as app:
        assert isinstance(app, MigNurseApp) and isinstance(app.source, FleetSource)
        kept = paths.state_home()
        assert kept != real and not kept.is_relative_to(real)
        async with app.run_test(size=(160, 50)):
            box = app.query_one("#clusters", Static)
            await until(lambda: "connecting" not in static_text(box))
            lines = [" ".join(line.split()) for line in static_text(box).splitlines()]
            lines = [line for line in lines if line]
            by_context = {line.split()[0]: line for line in lines}
            assert list(by_context) == [
                "sim-dcgm-repair-loop",
                "sim-mig-hook-notready",
                "sim-healthy",
                "sim-eu-central-1",
            ], lines
            for context in list(by_context)[:3]:
                assert by_context[context].startswith(f"{context} connected"), lines
            assert "unreachable" in by_context["sim-eu-central-1"], lines

            # the troubled clusters' pools come first, the calm one's after them, once each
            # cluster is judged (a busy machine judges the second troubled one later)
            def order() -> list[str]:
                return [split_key(r.pool)[0] for r in app._fleet]

            await until(lambda: len(set(order())) == 3 and order()[-1] == "sim-healthy")
            assert order()[0] in ("sim-dcgm-repair-loop", "sim-mig-hook-notready"), order()
    assert paths.state_home() == real
    assert not kept.exists()  # the kubeconfig and the state, gone with the demo


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--clusters", "9"], "--clusters 9 is out of range: give 2 to 8"),
        (["--clusters", "0"], "--clusters 0 is out of range"),
        (["--clusters", "3", "--scenario", "healthy"], "leave out --scenario"),
        (["--clusters", "3", "--speed", "0"], "--speed 0 is out of range"),
    ],
)
def test_a_demo_flag_out_of_range_is_one_line(
    flags: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
