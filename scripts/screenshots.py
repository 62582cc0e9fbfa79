"""Render the app on the demo scenarios, headless, into screenshots/ (SVG and PNG).

    make screenshots                 # or: .venv/bin/python scripts/screenshots.py [--svg-only]

Every shot is deterministic, so re-running changes no byte: the simulator runs at speed 0
from a fixed start (its clock never moves), each shot waits until the app has settled (a
refresh after the first diagnosis) and is driven with the keys an engineer would press,
and a collected bundle is written under a fixed relative name. (The one exception: the
several-clusters shot names its unreachable cluster's port, which the kernel picks.)

PNGs are Textual's SVG drawn by `rsvg-convert` (Debian: librsvg2-bin) in DejaVu Sans Mono
(fonts-dejavu-core): a real monospace font, not whatever a browser would fetch for the
SVG's "Fira Code".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.picker import RunbookPicker
from mignurse.tui.screens.plan import PlanScreen
from mignurse.tui.screens.radar import RadarScreen

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SCENARIO = "dcgm-repair-loop"
START = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)  # a fixed sim start: ages and clocks never move
WIDE, SMALL, TALL = (120, 36), (80, 24), (120, 48)
INSTALL = (
    "PNG screenshots need rsvg-convert and the DejaVu Sans Mono font: "
    "sudo apt-get install librsvg2-bin fonts-dejavu-core "
    "(macOS: brew install librsvg font-dejavu), or run with --svg-only"
)
FONT = "DejaVu Sans Mono"
# Textual lays cells 0.61 em apart; DejaVu Sans Mono advances 1233/2048 em, and librsvg
# ignores textLength, so the font is scaled until one glyph fills one cell exactly.
FONT_SIZE_PX = 20 * 0.61 / (1233 / 2048)

Step = Callable[[MigNurseApp, Pilot[None]], Awaitable[None]]


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the screen never showed {what}")
        await asyncio.sleep(0.05)


async def settle(app: MigNurseApp) -> None:
    """Wait for a refresh applied after the first diagnosis (the findings and fleet rows)."""
    await until(lambda: app.diagnosis is not None, "a diagnosis")
    seen = app.refreshes
    await until(lambda: app.refreshes > seen, "a refresh after the diagnosis")


async def fleet(app: MigNurseApp, pilot: Pilot[None]) -> None:
    await settle(app)  # the app lands on the worst pool: no key needed
    await pilot.pause()


async def help_screen(app: MigNurseApp, pilot: Pilot[None]) -> None:
    await fleet(app, pilot)
    await pilot.press("question_mark")
    await pilot.pause()


async def open_worst_pool(app: MigNurseApp, pilot: Pilot[None]) -> DataTable[object]:
    await fleet(app, pilot)
    await pilot.press("enter")
    table: DataTable[object] = app.query_one("#nodes", DataTable)
    await until(lambda: table.row_count > 0, "the pool's nodes")
    await settle(app)
    return table


async def highlight_broken_node(app: MigNurseApp, pilot: Pilot[None]) -> str:
    """The looping pool's node with AcceleratedHardwareReady=False, highlighted with the
    keys; returns its name once its detail (pods included) is shown."""
    table = await open_worst_pool(app, pilot)
    keys = [row.key for row in table.ordered_rows]  # display order (sorted)
    ahr = [str(c.value) for c in table.columns].index("AHR")  # 80 columns show fewer
    broken = next(
        i for i, key in enumerate(keys) if str(table.get_row(key)[ahr]).startswith("False")
    )
    # a highlight event on the row, even when it is already the first (sorted: CRIT first)
    await pilot.press(*(["down"] * broken if broken else ["down", "up"]))
    name = str(keys[broken].value)
    await until(lambda: app.pods_of(name) is not None, "the node's pods")
    await pilot.pause()
    return name


async def node_timeline(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """The broken node's detail, scrolled to the newest entries of its timeline."""
    await highlight_broken_node(app, pilot)
    pane = app.query_one("#detail-pane")
    detail = app.query_one("#detail", Static)
    texts = [strip.text for strip in detail.render_lines(detail.content_region.reset_offset)]
    heading = next(i for i, text in enumerate(texts) if text.startswith("Timeline"))
    end = next(i for i, text in enumerate(texts) if i > heading and not text.strip())
    pane.scroll_to(y=max(heading, end - pane.scrollable_content_region.height), animate=False)
    await pilot.pause()


async def collect_progress(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """The broken node marked with space, then `c`: the progress toasts and the bundle's name.
    One node: several are collected in parallel, and their toasts would race."""
    await highlight_broken_node(app, pilot)
    await pilot.press("space", "c")
    await until(
        lambda: any("Bundle written" in str(n.message) for n in app._notifications),
        "the bundle written",
        timeout=60,
    )
    await pilot.pause(0.3)  # the toasts drawn


async def runbook_plan(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """`R` on the broken node, the first suggestion (pause-node-repair), its params as
    given, then the plan read from the cluster: nothing has changed yet."""
    await highlight_broken_node(app, pilot)
    await pilot.press("R")
    await until(lambda: isinstance(app.screen, RunbookPicker), "the runbook picker")
    await pilot.press("enter")
    await until(lambda: isinstance(app.screen, ParamsScreen | PlanScreen), "the params")
    if isinstance(app.screen, ParamsScreen):
        await pilot.press("enter")
    await until(lambda: isinstance(app.screen, PlanScreen) and app.screen.ready, "the plan")
    await pilot.pause()


async def high_harm_confirm(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """The plan's enter: the typed confirmation pause-node-repair asks for, its prompt pinned
    under the plan (in 80x24 too), with how the pause is reversed."""
    await runbook_plan(app, pilot)
    await pilot.press("enter")
    await until(
        lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted, "the prompt"
    )
    await pilot.pause(0.3)


async def repair_radar(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """`D` once the first diagnosis is in: the nodes whose repair comes soonest, each with
    its countdown, its worst finding and the action enter takes."""
    await until(lambda: app.diagnosis is not None, "the diagnosis")
    await pilot.press("D")
    await until(
        lambda: isinstance(app.screen, RadarScreen) and bool(app.screen.rows()), "the radar"
    )
    await pilot.pause(0.3)


async def pool_nodes(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """Enter on the looping pool: its nodes and the worst one's detail."""
    await highlight_broken_node(app, pilot)


async def several_clusters(app: MigNurseApp, pilot: Pilot[None]) -> None:
    """`mignurse demo --clusters 4`: every cluster's start ended, the three it reached each
    with its pools on screen, worst first across them."""
    from mignurse.session import split_key

    box = app.query_one("#clusters", Static)
    await until(lambda: "connecting" not in str(box.render()), "every cluster's status")
    await until(lambda: len({split_key(r.pool)[0] for r in app._fleet}) == 3, "3 clusters' pools")
    await settle(app)
    await pilot.pause()


@dataclass(frozen=True)
class Shot:
    name: str  # screenshots/NAME.svg and .png; the README says what each shows
    step: Step
    size: tuple[int, int] = WIDE
    light: bool = False
    clusters: int = 1  # several: the demo's clusters (`mignurse demo --clusters N`)


SHOTS = (
    Shot("fleet", fleet),  # the landing screen: the looping pool first, CRITICAL
    Shot("fleet-80x24", fleet, size=SMALL),
    Shot("fleet-light", fleet, light=True),
    Shot("node-timeline", node_timeline),
    Shot("collect", collect_progress),
    Shot("nodes-80x24", pool_nodes, size=SMALL),
    Shot("runbook-plan", runbook_plan),
    Shot("confirm-80x24", high_harm_confirm, size=SMALL),
    Shot("radar", repair_radar),
    Shot("help", help_screen, size=TALL),
    Shot("clusters", several_clusters, size=TALL, clusters=4),
)


@contextlib.contextmanager
def demo_app(tmp: Path, *, light: bool, clusters: int = 1) -> Iterator[MigNurseApp]:
    if clusters > 1:
        with fleet_app_on(tmp, light=light, clusters=clusters) as app:
            yield app
        return
    sim = SimCluster(load_scenario(SCENARIO), speed=0, start=START).start()
    try:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp / "kubeconfig")))
        source = LiveSource(
            client, simulated=SCENARIO, clock=sim.now, bundle_dir=Path("."), access=SIM_ACCESS
        )
        source.check()
        yield make_app(source, light=light)
    finally:
        sim.stop()


@contextlib.contextmanager
def fleet_app_on(tmp: Path, *, light: bool, clusters: int) -> Iterator[MigNurseApp]:
    """The demo's clusters on the fixed start, opened as `mignurse --all-contexts` opens
    them (each cluster's clock is its API server's)."""
    from mignurse.cli import build_parser
    from mignurse.cli.app import fleet_app
    from mignurse.sim.fleet import serve_demo

    served = serve_demo(tmp / "kubeconfig", clusters, speed=0, start=START)
    try:
        flags = ["--kubeconfig", str(served.kubeconfig), "--all-contexts"]
        args = build_parser().parse_args([*flags, *(["--light"] if light else [])])
        clocks = {sim.scenario.context_name: sim.now for sim in served.sims}
        app = fleet_app(args, [context for context, _what in served.described], clocks=clocks)
        assert isinstance(app, MigNurseApp)
        yield app
    finally:
        served.stop()


async def render(shot: Shot, tmp: Path) -> Path:
    with demo_app(tmp, light=shot.light, clusters=shot.clusters) as app:
        async with app.run_test(size=shot.size, notifications=True) as pilot:
            await shot.step(app, pilot)
            return Path(app.save_screenshot(filename=f"{shot.name}.svg", path=str(OUT)))


def png_tools_missing() -> bool:
    if shutil.which("rsvg-convert") is None:
        return True
    if shutil.which("fc-match") is None:
        return False  # no fontconfig to ask: rsvg-convert falls back as it can
    found = subprocess.run(
        ["fc-match", "-f", "%{family}", FONT], capture_output=True, text=True, check=False
    ).stdout
    return FONT not in found


def to_png(svg: Path) -> Path:
    """The SVG drawn in DejaVu Sans Mono, spaces kept and cells filled, as a PNG beside it."""
    text = svg.read_text(encoding="utf-8")
    text = text.replace(
        '<svg class="rich-terminal"', '<svg xml:space="preserve" class="rich-terminal"', 1
    )
    text, fonts = re.subn(
        r"font-family: Fira Code, monospace;\s*font-size: 20px;",
        f'font-family: "{FONT}", monospace; font-size: {FONT_SIZE_PX:.3f}px;',
        text,
    )
    if fonts != 1:
        raise SystemExit(f"{svg}: Textual's SVG no longer sets its font as expected (to_png)")
    text = text.replace("⭘", "○")  # the header's icon: DejaVu has no U+2B58
    png = svg.with_suffix(".png")
    subprocess.run(
        ["rsvg-convert", "--format", "png", "--output", str(png)],
        input=text.encode(),
        check=True,
    )
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg-only", action="store_true", help="skip the PNG conversion")
    parser.add_argument(
        "names", nargs="*", help=f"only these shots ({', '.join(s.name for s in SHOTS)})"
    )
    args = parser.parse_args(argv)
    unknown = set(args.names) - {s.name for s in SHOTS}
    if unknown:
        parser.error(f"no shot {', '.join(sorted(unknown))}")
    if not args.svg_only and png_tools_missing():
        print(INSTALL, file=sys.stderr)
        return 2
    shots = [s for s in SHOTS if not args.names or s.name in args.names]
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mignurse-shots-") as tmp:
        cwd = Path.cwd()
        os.chdir(tmp)  # bundles land here, and their path on screen is only their name
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # no runs in the user's audit
        try:
            for shot in shots:
                svg = asyncio.run(render(shot, Path(tmp)))
                png = None if args.svg_only else to_png(svg)
                print(f"{svg.relative_to(OUT.parent)}" + (f"  {png.name}" if png else ""))
        finally:
            os.chdir(cwd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
