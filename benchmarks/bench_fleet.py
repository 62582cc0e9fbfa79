"""The command line across 10 simulated clusters of 500 GPU nodes each: wall time of the
cross-cluster node table and diagnosis, and peak RSS, against kubectl reading the same
contexts one after another.

    .venv/bin/python benchmarks/bench_fleet.py [--clusters 10] [--nodes 500] [--rounds 3]

The clusters are the `scale-5000` scenario's generator at 500 GPU nodes in 4 NodePools,
30 CPU nodes and 10,000 events each, a few percent unhealthy, each with its own seed, all
served by one `mignurse sim serve` process (one interpreter: its clusters answer one at a
time, so the figures include the simulator waiting on itself; real API servers answer side
by side). Measured: `mignurse --all-contexts nodes -o json` (what a first screen of every
cluster needs), `mignurse --all-contexts diagnose -o json` (the first cross-cluster
diagnosis), the largest RSS of those processes, and `kubectl get nodes -o json` run once
per context as the peer.

Then the app on every context (`mignurse --all-contexts`), headless in this process
(`--no-app` skips it): the first screen (the fleet view with pools; then with every
cluster's pools), the first cross-cluster diagnosis on screen, the UI thread's CPU per
refresh (`bench_app.py`'s instruments: from a refresh's result arriving to its last row
placed) on the fleet view and on every cluster's nodes, and the app's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figure

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

SCENARIO = """name: fleet-{i:02d}
description: cluster {i} of the fleet benchmark (scale generator, {nodes} GPU nodes)
cluster:
  name: ml-fleet-{i:02d}
  region: us-west-2
  kubernetesVersion: "1.32"
seed: {seed}
karpenter:
  version: 1.4.0
  nodeRepair: true
generate:
  kind: scale
  gpuNodes: {nodes}
  nodePools: 4
  cpuNodes: 30
  events: {events}
  unhealthyPercent: 3
"""


def _serve(folder: Path, clusters: int, nodes: int, env: dict[str, str]) -> subprocess.Popen[str]:
    files = []
    for i in range(clusters):
        path = folder / f"fleet-{i:02d}.yaml"
        path.write_text(SCENARIO.format(i=i, nodes=nodes, seed=7000 + i, events=nodes * 20))
        files += ["--scenario", str(path)]
    server = subprocess.Popen(
        [str(BIN / "mignurse"), "sim", "serve", *files, "--speed", "1",
         "--kubeconfig-out", str(folder / "kubeconfig")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    for line in server.stdout:
        if line.startswith("Ctrl-C"):
            return server
    server.wait()
    sys.exit(f"bench_fleet: `mignurse sim serve` ended ({server.returncode}) before serving")


def _run(command: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    if done.returncode not in ok:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(nothing)"]
        sys.exit(f"bench_fleet: `{' '.join(command[:6])} …` failed ({done.returncode}): {said[0]}")
    return wall


async def _app_run(clusters: int, nodes: int, settle: float) -> dict[str, float]:
    """The app on every context of $KUBECONFIG, as `mignurse --all-contexts` builds it."""
    import bench_app
    from textual.widgets import DataTable

    from mignurse.cli import build_parser
    from mignurse.cli.app import live_app
    from mignurse.session import split_key

    bench_app.instrument()
    marks: dict[str, float] = {}
    started = time.perf_counter()
    app: Any = live_app(build_parser().parse_args(["--all-contexts"]))
    async with app.run_test(size=(160, 48)):
        fleet = app.query_one("#fleet", DataTable)
        while fleet.row_count == 0:
            await asyncio.sleep(0.01)
        bench_app.mark(
            marks, "first screen (fleet view, pools shown)", time.perf_counter() - started
        )
        while len({split_key(r.pool)[0] for r in app._fleet}) < clusters:
            await asyncio.sleep(0.02)
        bench_app.mark(
            marks, f"every cluster's pools shown ({clusters})", time.perf_counter() - started
        )
        judged = app._refresher  # its pools from a diagnosis: every cluster judged
        while (
            app.diagnosis is None
            or len({split_key(r.pool)[0] for r in judged.fleet_base}) < clusters
        ):
            await asyncio.sleep(0.02)
        bench_app.mark(
            marks, "first cross-cluster diagnosis on screen", time.perf_counter() - started
        )
        source = app.source
        while not source.synced():
            await asyncio.sleep(0.05)
        bench_app.mark(marks, "every cluster listed", time.perf_counter() - started)
        bench_app.phase = "fleet view"
        await asyncio.sleep(settle)
        bench_app.phase = f"every cluster's nodes ({clusters * nodes})"
        opened = time.perf_counter()
        app.open_pool(None)
        table = app.query_one("#nodes", DataTable)
        while table.row_count < clusters * nodes:
            await asyncio.sleep(0.05)
        bench_app.mark(marks, f"all {clusters * nodes:,} nodes shown", time.perf_counter() - opened)
        await asyncio.sleep(settle)
    marks["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worst = 0.0
    for name, refreshes in bench_app.placed.items():
        steady = [p.cpu for p in refreshes if not p.fill]
        frames = [p.frame for p in refreshes]
        if name == "start" or not steady:
            continue
        worst = max(worst, max(steady), max(frames))
        print(f"UI-thread CPU per refresh, {name}: median {statistics.median(steady) * 1000:.0f} "
              f"ms, worst {max(steady) * 1000:.0f} ms over {len(steady)} refreshes; worst "
              f"frame {max(frames) * 1000:.0f} ms")  # fmt: skip
    marks["refresh"] = worst
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=500, help="GPU nodes per cluster")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-app", action="store_true", help="the command line's figures only")
    parser.add_argument(
        "--settle", type=float, default=15.0, help="seconds of refreshes timed per app view"
    )
    args = parser.parse_args()
    app: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        folder = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(XDG_STATE_HOME=str(folder / "state"), HOME=str(folder / "home"))
        (folder / "home").mkdir()
        built = time.perf_counter()
        server = _serve(folder, args.clusters, args.nodes, env)
        print(f"{args.clusters} clusters × {args.nodes} GPU nodes served in "
              f"{time.perf_counter() - built:.1f} s", flush=True)  # fmt: skip
        env["KUBECONFIG"] = str(folder / "kubeconfig")
        mignurse = [str(BIN / "mignurse"), "--all-contexts"]
        contexts = [f"sim-fleet-{i:02d}" for i in range(args.clusters)]
        kubectl = str(BIN / "kubectl")
        walls: dict[str, list[float]] = {"nodes": [], "diagnose": [], "kubectl": []}
        try:
            _run([*mignurse, "nodes", "-o", "json"], env)  # untimed: bytecode, caches
            for _ in range(args.rounds):
                walls["nodes"].append(_run([*mignurse, "nodes", "-o", "json"], env))
                # findings give 1 or 2, the scale clusters' unhealthy few
                walls["diagnose"].append(
                    _run([*mignurse, "diagnose", "-o", "json"], env, ok=(0, 1, 2))
                )
                started = time.perf_counter()
                for context in contexts:
                    _run([kubectl, "--context", context, "get", "nodes", "-o", "json"], env)
                walls["kubectl"].append(time.perf_counter() - started)
            # the largest RSS of the waited children: the mignurse and kubectl runs (the
            # server is not waited for yet)
            rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            if not args.no_app:
                os.environ.update(env)  # the app runs here: the same kubeconfig and state
                app = asyncio.run(_app_run(args.clusters, args.nodes, args.settle))
        finally:
            server.terminate()
            server.wait(timeout=60)
    median = {name: statistics.median(values) for name, values in walls.items()}
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.2f}")
    for name, value in median.items():
        print(f"{name:9s} median {value:.2f} s over {args.rounds} rounds")
    figure(
        f"nodes across {args.clusters} clusters × {args.nodes} GPU nodes (wall)",
        median["nodes"],
        "s",
        target=2.0,
        peer=f"kubectl get nodes, {args.clusters} contexts one after another",
        peer_value=median["kubectl"],
    )
    figure(
        f"first cross-cluster diagnosis, {args.clusters} × {args.nodes} (wall)",
        median["diagnose"],
        "s",
        target=4.0,
    )
    figure("peak RSS of a cross-cluster command", rss_mb, "MB", target=1024)
    if not app:
        return
    first = "first screen (fleet view, pools shown)"
    figure(f"app first screen, {args.clusters} × {args.nodes} (wall)", app[first], "s", target=2.0)
    figure(
        f"app first cross-cluster diagnosis, {args.clusters} × {args.nodes} (wall)",
        app["first cross-cluster diagnosis on screen"],
        "s",
        target=4.0,
    )
    figure("app worst UI-thread CPU per refresh or frame", app["refresh"] * 1000, "ms",
           target=100.0)  # fmt: skip
    figure("app peak RSS across clusters", app["rss"], "MB", target=1024)


if __name__ == "__main__":
    main()
