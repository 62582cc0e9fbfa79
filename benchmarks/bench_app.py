"""The app on scale-5000, headless: time to the first full table, UI-thread time spent
applying each refresh, and peak RSS. The simulator runs in this process too, so the
figures are pessimistic.

    .venv/bin/python benchmarks/bench_app.py
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from mignurse.cluster.client import ClusterClient
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui import app as app_module
from mignurse.tui.app import LiveSource, MigNurseApp, RowChanges, make_app

applies: list[tuple[float, int, int, int]] = []
_original = MigNurseApp._apply_changes


def _timed_apply(self: MigNurseApp, changes: RowChanges) -> None:
    started = time.perf_counter()
    _original(self, changes)
    if changes.added or changes.changed or changes.removed:
        elapsed = time.perf_counter() - started
        applies.append((elapsed, len(changes.added), len(changes.changed), len(changes.removed)))


async def run(sim: SimCluster, kubeconfig: Path) -> float:
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    source = LiveSource(client, simulated="scale-5000", clock=sim.now)
    source.check()
    app: Any = make_app(source)
    started = time.perf_counter()
    async with app.run_test(size=(160, 48)):
        table = app.query_one("#nodes", DataTable)
        while table.row_count < 5000:
            await asyncio.sleep(0.05)
        first_table = time.perf_counter() - started
        for _ in range(6):  # a minute of simulated churn every two seconds
            sim.advance(60)
            await asyncio.sleep(2)
    return first_table


def main() -> None:
    app_module.MigNurseApp._apply_changes = _timed_apply  # type: ignore[method-assign]
    print("building scale-5000…", flush=True)
    sim = SimCluster(load_scenario("scale-5000"), speed=0).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig")
            first_table = asyncio.run(run(sim, kubeconfig))
    finally:
        sim.stop()
    print(f"first full table of 5,000+ GPU nodes: {first_table:.2f} s after start")
    for elapsed, added, changed, removed in applies:
        print(f"  UI thread {elapsed * 1000:6.0f} ms: +{added} ~{changed} -{removed} rows")
    churn = [a[0] for a in applies[1:]]
    if churn:
        print(
            f"refreshes after the first: median {statistics.median(churn) * 1000:.0f} ms, "
            f"max {max(churn) * 1000:.0f} ms of UI-thread time"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS (app and simulator together): {peak:.0f} MB")


if __name__ == "__main__":
    main()
