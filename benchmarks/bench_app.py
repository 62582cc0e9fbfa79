"""The app on scale-5000 (5,000 GPU nodes in 20 NodePools, 100,000 events), headless.

    .venv/bin/python benchmarks/bench_app.py

Measures, against its targets:
- first paint: from start until the fleet view shows every pool (target < 2 s);
- UI-thread time per applied refresh (`_apply_changes`, where the tables are updated)
  while a minute of simulated churn arrives every two seconds, on the fleet view, on one
  pool's nodes (250) and on every pool's nodes (5,000) (target < 100 ms);
- peak RSS (target < 600 MB).
The simulator runs in its own process (this file with `--serve`, advanced through its
stdin), so the RSS is the app's own; both share the machine's CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from mignurse.cluster.client import ClusterClient
from mignurse.sim import SimCluster, load_scenario
from mignurse.tui import app as app_module
from mignurse.tui.app import FLEET, LiveSource, MigNurseApp, RowChanges, make_app

applies: dict[str, list[float]] = {}
cpu: dict[str, list[float]] = {}  # the UI thread's own CPU time per apply (no GIL waits)
sizes: dict[str, list[tuple[int, int, int]]] = {}  # per apply: rows added, changed, removed
phase = "start"
_original = MigNurseApp._apply_changes


def _timed_apply(self: MigNurseApp, changes: RowChanges) -> None:
    started, started_cpu = time.perf_counter(), time.thread_time()
    _original(self, changes)
    applies.setdefault(phase, []).append(time.perf_counter() - started)
    cpu.setdefault(phase, []).append(time.thread_time() - started_cpu)
    sizes.setdefault(phase, []).append(
        (len(changes.added), len(changes.changed), len(changes.removed))
    )


class RemoteSim:
    """The simulator in a child process: `advance` is a line on its stdin."""

    def __init__(self, kubeconfig: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(kubeconfig)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "READY":
            raise SystemExit("the simulator did not start")

    def advance(self, seconds: float) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{seconds}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()  # "ok" once it has advanced

    def now(self) -> Any:
        raise NotImplementedError  # the app uses the API server's clock (Date header)

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def serve(kubeconfig: str) -> None:
    sim = SimCluster(load_scenario("scale-5000"), speed=0).start()
    sim.write_kubeconfig(Path(kubeconfig))
    print("READY", flush=True)
    for line in sys.stdin:
        sim.advance(float(line))
        print("ok", flush=True)
    sim.stop()


async def churn(sim: RemoteSim, seconds: int = 12) -> None:
    for _ in range(seconds // 2):  # a minute of simulated churn every two seconds
        await asyncio.to_thread(sim.advance, 60)
        await asyncio.sleep(2)


async def run(sim: RemoteSim, kubeconfig: Path) -> dict[str, float]:
    global phase
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    source = LiveSource(client, simulated="scale-5000")
    source.check()
    app: Any = make_app(source)
    marks: dict[str, float] = {}
    started = time.perf_counter()
    async with app.run_test(size=(160, 48)):
        fleet = app.query_one(f"#{FLEET}", DataTable)
        while source.watcher is None or not source.watcher._synced["nodes"].is_set():
            await asyncio.sleep(0.01)
        marks["5,000 nodes listed"] = time.perf_counter() - started
        while fleet.row_count < 20:
            await asyncio.sleep(0.01)
        marks["first paint (fleet view, 20 pools)"] = time.perf_counter() - started
        while app.diagnosis is None:
            await asyncio.sleep(0.05)
        marks["first diagnosis on screen"] = time.perf_counter() - started
        phase = "fleet view"
        await churn(sim)
        phase = "one pool's nodes (250)"
        opened = time.perf_counter()
        app.open_pool(app.pool_names()[0])
        table = app.query_one("#nodes", DataTable)
        while table.row_count < 200:
            await asyncio.sleep(0.02)
        marks["enter → a pool's 250 nodes shown"] = time.perf_counter() - opened
        await churn(sim)
        phase = "all pools' nodes (5,000)"
        opened = time.perf_counter()
        app.open_pool(None)
        while table.row_count < 5000:
            await asyncio.sleep(0.05)
        marks["all 5,000 nodes shown"] = time.perf_counter() - opened
        await churn(sim)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    app_module.MigNurseApp._apply_changes = _timed_apply  # type: ignore[method-assign]
    print("building scale-5000 in its own process…", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim = RemoteSim(kubeconfig)
        try:
            marks = asyncio.run(run(sim, kubeconfig))
        finally:
            sim.stop()
    for what, seconds in marks.items():
        print(f"{what}: {seconds:.2f} s")
    worst = 0.0
    for name, times in applies.items():
        if name == "start" or len(times) < 2:
            continue
        steady = times[1:]  # the first apply of a view fills the table once
        worst = max(worst, statistics.median(steady))
        slowest = max(range(1, len(times)), key=times.__getitem__)
        added, changed, removed = sizes[name][slowest]
        own = cpu[name][1:]
        print(
            f"UI thread per refresh, {name}: first {times[0] * 1000:.0f} ms, then median "
            f"{statistics.median(steady) * 1000:.0f} ms, max {max(steady) * 1000:.0f} ms "
            f"(+{added} ~{changed} -{removed} rows) over {len(steady)} refreshes; its own CPU "
            f"median {statistics.median(own) * 1000:.0f} ms, max {max(own) * 1000:.0f} ms "
            "(the rest is waiting for the GIL held by the refresh worker)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = marks["first paint (fleet view, 20 pools)"]
    print(f"peak RSS of the app's process: {peak:.0f} MB")
    print(
        f"targets: first paint {first:.2f} s < 2 s {'PASS' if first < 2 else 'FAIL'}; "
        f"median UI time per refresh {worst * 1000:.0f} ms < 100 ms "
        f"{'PASS' if worst < 0.1 else 'FAIL'}; RSS {peak:.0f} MB < 600 MB "
        f"{'PASS' if peak < 600 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
