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
per context as the peer. The app takes one context at a time, so its first screen and
refresh are not measured here.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=500, help="GPU nodes per cluster")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
