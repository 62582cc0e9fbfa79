"""Render the app on the demo scenarios, headless, into screenshots/ (SVG).

make screenshots
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from textual.widgets import DataTable

from mignurse.cluster.client import ClusterClient
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui.app import TABLE_COLUMNS, LiveSource, make_app

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SHOTS = (
    # (scenario, file): the first row in trouble is highlighted, as an engineer would
    ("dcgm-repair-loop", "nodes-dcgm-repair-loop.svg"),
    ("mig-hook-notready", "nodes-mig-hook-notready.svg"),
)


async def shoot(scenario: str, filename: str, tmp: Path) -> Path:
    sim = SimCluster(load_scenario(scenario), speed=0).start()
    try:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp / scenario)))
        source = LiveSource(client, simulated=scenario, clock=sim.now)
        source.check()
        app = make_app(source)
        async with app.run_test(size=(140, 40)) as pilot:
            table = app.query_one("#nodes", DataTable)
            for _ in range(400):  # the table filled and the rules run once
                if app.refreshes and table.row_count and app._diagnosis is not None:
                    break
                await asyncio.sleep(0.05)
            for index, key in enumerate(table.rows):
                cells = [str(c) for c in table.get_row(key)]
                status, ahr = (
                    cells[TABLE_COLUMNS.index("STATUS")],
                    cells[TABLE_COLUMNS.index("AHR")],
                )
                if not status.startswith("Ready ") or ahr.startswith("False"):
                    table.move_cursor(row=index)
                    break
            await pilot.pause(0.5)
            return Path(app.save_screenshot(filename=filename, path=str(OUT)))
    finally:
        sim.stop()


def main() -> int:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for scenario, filename in SHOTS:
            path = asyncio.run(shoot(scenario, filename, Path(tmp)))
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
