"""A bundle is judged at the moment it was collected: its repair deadlines read as moments
then ("repair would have fired at …"), never as a countdown that looks live, in `mignurse
open` (the BUNDLE badge and its "as of" stay on the status line at 80 columns) and in
`mignurse diagnose --from`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from mignurse.cli import build_parser, main
from mignurse.cli.app import bundle_app
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui.app import MigNurseApp
from mignurse.tui.screens.pager import PagerScreen

from .sizes import sizes
from .test_node_screen import static_text, until


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The repair loop's node under the repair clock, collected 7 minutes into its 10."""
    folder = tmp_path_factory.mktemp("bundle")
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(folder / "kc"))
        out = folder / "incident.tar.gz"
        assert main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", str(out)]) == 0
    yield out


@sizes
async def test_mignurse_open_reads_a_deadline_as_of_the_collection_with_the_badge_shown(
    bundle: Path, size: tuple[int, int]
) -> None:
    app = bundle_app(build_parser().parse_args(["open", str(bundle)]))
    assert isinstance(app, MigNurseApp)
    async with app.run_test(size=size) as pilot:
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        status = " ".join(static_text(app.query_one("#status", Static)).split())
        collected = app.source.now()
        assert f"BUNDLE as of {collected:%Y-%m-%d %H:%M}Z" in status, status
        panel = static_text(app.query_one("#findings", Static))
        assert "deadline in" not in panel and "repair would have fired at" in panel, panel
        await pilot.press("f")
        await until(lambda: isinstance(app.screen, PagerScreen))
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        assert f"as of {collected:%Y-%m-%d %H:%M:%S}Z (bundle, when collected)" in pager.page.title
        text = "\n".join(line.plain for line in pager.page.lines)
        assert "deadline in" not in text
        assert app.diagnosis is not None
        deadline = min(f.deadline for f in app.diagnosis.findings if f.deadline)
        assert f"repair would have fired at {deadline:%H:%M:%S}Z" in text


def test_diagnose_from_a_bundle_says_as_of_and_never_counts_down(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", "--from", str(bundle)]) == 2
    out = capsys.readouterr().out
    first, second = out.splitlines()[:2]
    assert first.startswith("as of ") and first.endswith("(bundle incident.tar.gz, when collected)")
    assert "repair would have fired at " in second and "after collection" in second
    assert "deadline in" not in out


async def test_the_radar_of_a_bundle_reads_repairs_as_moments_and_offers_no_action(
    bundle: Path,
) -> None:
    """`D` on a bundle: the node under the repair clock when it was collected, its repair a
    moment then (never a countdown), and enter refused: a bundle is read-only."""
    from mignurse.tui.screens.radar import RadarScreen

    app = bundle_app(build_parser().parse_args(["open", str(bundle)]))
    assert isinstance(app, MigNurseApp)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: app.diagnosis is not None and app.refreshes > 1)
        await pilot.press("D")
        await until(lambda: isinstance(app.screen, RadarScreen) and app.screen.is_mounted)
        radar = app.screen
        assert isinstance(radar, RadarScreen)
        rows = radar.rows()
        assert rows and rows[0][0].startswith("repair would have fired at "), rows
        assert "in " not in rows[0][0].split("fired at")[0]  # no countdown
        title = static_text(radar.query_one("#radar-title", Static))
        assert "times are moments then, not countdowns" in title
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen is radar  # refused with a notice: nothing to act on in a bundle
        assert any("bundle" in str(n.message).lower() for n in app._notifications)
