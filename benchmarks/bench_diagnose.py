"""Diagnosis at scale-5000: the rules over an already-loaded snapshot with history, and
`mignurse diagnose --from` the same snapshot end to end against bare json.loads.

    .venv/bin/python benchmarks/bench_diagnose.py
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mignurse.cluster.history import HistoryStore
from mignurse.diagnose.engine import all_rules, diagnose
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings
from mignurse.diagnose.sources import read_history
from mignurse.model import Event, Node, NodeClaim
from mignurse.sim import SimCluster, load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from diagnose.simdiag import snapshot_of
from diagnose.test_sources import write_dumps

ROUNDS = 3


def main() -> None:
    print("building scale-5000…", flush=True)
    sim = SimCluster(load_scenario("scale-5000"), speed=0)
    context = sim.scenario.context_name
    with tempfile.TemporaryDirectory() as tmp:
        store = HistoryStore(Path(tmp) / "history.sqlite3")
        # History as a recorder would hold it: the cluster seen over the last 10 minutes
        # (not longer: events expire after an hour and the snapshot should keep its 100,000).
        store.record(
            context, "events", "LIST", [Event.from_api(o) for o in sim.objects("events")], sim.now()
        )
        for _step in range(5):
            now = sim.now()
            nodes = [Node.from_api(o) for o in sim.objects("nodes")]
            claims = [NodeClaim.from_api(o) for o in sim.objects("nodeclaims")]
            store.record(context, "nodes", "LIST", nodes, now)
            store.record(context, "nodeclaims", "LIST", claims, now)
            sim.advance(120)
        history = read_history(store, context, sim.now())
        store.close()
        deployments = [
            d for d in sim.objects("deployments") if d["metadata"]["name"] == "karpenter"
        ]
        inp = DiagnosisInput(
            snapshot=snapshot_of(sim),
            now=sim.now(),
            history=history,
            karpenter=KarpenterSettings.from_deployment(deployments[0]) if deployments else None,
        )
        print(
            f"{len(inp.snapshot.nodes)} nodes, {len(inp.snapshot.events)} events, "
            f"{len(history.lifecycles)} lifecycles, {len(history.transitions)} transitions\n"
        )
        fresh = dataclasses.replace(inp)  # shared indexes are built inside the first rule's time
        for name, rule in all_rules():
            started = time.perf_counter()
            found = rule(fresh)
            print(f"  {name:<32} {time.perf_counter() - started:6.3f} s  {len(found)} findings")
        runs = []
        for _ in range(ROUNDS):
            cold = dataclasses.replace(inp)  # no index or shared view carried over
            started = time.perf_counter()
            result = diagnose(cold)
            runs.append(time.perf_counter() - started)
        print(
            f"\nall rules: {statistics.median(runs):.2f} s (median of {ROUNDS}), "
            f"{len(result.findings)} findings, {len(result.rule_errors)} rule errors"
        )

        folder = write_dumps(sim, Path(tmp) / "snapshot")
        files = sorted(folder.rglob("*.json"))
        loads = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for path in files:
                json.loads(path.read_bytes())
            loads.append(time.perf_counter() - started)
        ends = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "mignurse", "diagnose", "--from", str(folder), "-o", "json"],
                capture_output=True,
                check=False,
            )
            ends.append(time.perf_counter() - started)
        floor = statistics.median(loads)
        end = statistics.median(ends)
        size = sum(p.stat().st_size for p in files) / 2**20
        print(f"json.loads of the snapshot's {size:.0f} MiB: {floor:.2f} s")
        print(f"mignurse diagnose --from it, whole process: {end:.2f} s ({end / floor:.2f}x)")


if __name__ == "__main__":
    main()
