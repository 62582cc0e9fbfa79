"""Diagnosis at scale-5000: every rule over an already-loaded snapshot with history (CPU time,
per rule and all together, and the same rules on half that snapshot: a rule whose work grows
linearly takes half the time on half the input), and `mignurse diagnose --from` the same
snapshot end to end against bare json.loads.

    .venv/bin/python benchmarks/bench_diagnose.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from figures import figure

from mignurse.cluster.history import HistoryStore
from mignurse.diagnose.engine import Diagnosis, all_rules, diagnose
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.sources import read_history
from mignurse.gcpause import paused_gc
from mignurse.model import Event, Node, NodeClaim
from mignurse.sim import SimCluster, load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from diagnose.simdiag import snapshot_of
from diagnose.test_sources import write_dumps

# All rules together on the scale-5000 snapshot with history, CPU seconds (README, Performance).
TARGET_ALL_RULES = 0.5
# Half the input, half the time: a rule that pairs every node with every event would take 4x.
LINEAR_RATIO_TARGET = 2.5
# Rules this cheap are all noise: their ratio is not printed.
RATIO_FLOOR_S = 0.005


@dataclasses.dataclass(frozen=True)
class RuleTimes:
    per_rule: dict[str, float]  # CPU seconds, median over rounds, in the engine's order
    total: float  # one diagnose() over a cold input, CPU seconds, median over rounds
    result: Diagnosis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    print("building scale-5000…", flush=True)
    sim = SimCluster(load_scenario("scale-5000"), speed=0)
    with tempfile.TemporaryDirectory() as tmp:
        inp = _input_with_history(sim, Path(tmp) / "history.sqlite3")
        half = half_of(inp)
        print(f"whole snapshot: {_sizes(inp)}\nhalf of it:     {_sizes(half)}\n")

        full_times = time_rules(inp, args.rounds)
        half_times = time_rules(half, args.rounds)
        print(f"CPU seconds, median of {args.rounds}, in the engine's order (the first rule")
        print("that needs a shared index pays for building it):\n")
        print(f"  {'rule':<32} {'whole':>7} {'half':>7} {'ratio':>6}")
        for name, seconds in full_times.per_rule.items():
            halved = half_times.per_rule[name]
            ratio = f"{seconds / halved:5.2f}x" if halved >= RATIO_FLOOR_S else "     -"
            print(f"  {name:<32} {seconds:6.3f}s {halved:6.3f}s {ratio}")
        slowest = max(full_times.per_rule, key=full_times.per_rule.__getitem__)
        total, half_total = full_times.total, half_times.total
        print(
            f"\nslowest rule: {slowest}, {full_times.per_rule[slowest]:.3f} s\n"
            f"all rules: {total:.3f} s on the whole snapshot "
            f"({len(full_times.result.findings)} findings, "
            f"{len(full_times.result.rule_errors)} rule errors), {half_total:.3f} s on half "
            f"of it: {total / half_total:.2f}x (linear work: about 2x)"
        )
        figure(
            "all rules, scale-5000 with history (CPU)",
            total,
            "s",
            target=TARGET_ALL_RULES,
            peer="the same rules on half the snapshot",
            peer_value=half_total,
            ratio_target=LINEAR_RATIO_TARGET,
        )
        figure(f"slowest rule: {slowest} (CPU)", full_times.per_rule[slowest], "s")

        end, floor = _end_to_end(sim, Path(tmp) / "snapshot", args.rounds)
        figure(
            "mignurse diagnose --from the snapshot, whole process",
            end,
            "s",
            peer="json.loads of its files, whole process",
            peer_value=floor,
        )


def _input_with_history(sim: SimCluster, history_file: Path) -> DiagnosisInput:
    """The snapshot and a history as a recorder would hold it: the cluster seen over the last
    10 minutes (not longer: events expire after an hour and the snapshot keeps its 90,000)."""
    context = sim.scenario.context_name
    store = HistoryStore(history_file)
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
    deployments = [d for d in sim.objects("deployments") if d["metadata"]["name"] == "karpenter"]
    return DiagnosisInput(
        snapshot=snapshot_of(sim),
        now=sim.now(),
        history=history,
        karpenter=KarpenterSettings.from_deployment(deployments[0]) if deployments else None,
    )


def half_of(inp: DiagnosisInput) -> DiagnosisInput:
    """About half of every list the rules read, chosen by a stable hash of the name so that a
    node keeps its NodeClaim, its events, its lifecycles and its transitions together."""
    snapshot = inp.snapshot
    nodes = {name: node for name, node in snapshot.nodes.items() if _kept(name)}
    claim_nodes = {name: claim.node_name for name, claim in snapshot.nodeclaims.items()}
    for lifecycle in inp.history.lifecycles:
        if lifecycle.kind == "NodeClaim" and lifecycle.node_name:
            claim_nodes.setdefault(lifecycle.name, lifecycle.node_name)

    def claim_kept(name: str) -> bool:
        return _kept(claim_nodes.get(name) or name)

    def event_kept(event: Event) -> bool:
        if event.involved_kind == "NodeClaim":
            return claim_kept(event.involved_name)
        return _kept(event.involved_name)

    def object_kept(kind: str, name: str) -> bool:
        return claim_kept(name) if kind == "NodeClaim" else _kept(name)

    history = History(
        lifecycles=tuple(lc for lc in inp.history.lifecycles if object_kept(lc.kind, lc.name)),
        transitions=tuple(t for t in inp.history.transitions if object_kept(t.kind, t.name)),
        events=tuple(e for e in inp.history.events if event_kept(e)),
    )
    return dataclasses.replace(
        inp,
        snapshot=dataclasses.replace(
            snapshot,
            nodes=nodes,
            nodeclaims={n: c for n, c in snapshot.nodeclaims.items() if claim_kept(n)},
            events=tuple(e for e in snapshot.events if event_kept(e)),
            resource_slices=tuple(s for s in snapshot.resource_slices if _kept(s.node_name)),
        ),
        history=history,
        node_evidence={n: e for n, e in inp.node_evidence.items() if _kept(n)},
    )


def _kept(name: str) -> bool:
    return zlib.crc32(name.encode()) % 2 == 0


def time_rules(inp: DiagnosisInput, rounds: int) -> RuleTimes:
    """CPU time of each rule and of all of them, each round on a copy of the input with no
    index or shared view carried over, the garbage collector paused as the engine does."""
    per_rule: dict[str, list[float]] = {}
    totals: list[float] = []
    result = Diagnosis([])
    for _ in range(rounds):
        cold = dataclasses.replace(inp)
        with paused_gc():
            for name, rule in all_rules():
                started = time.process_time()
                rule(cold)
                per_rule.setdefault(name, []).append(time.process_time() - started)
        cold = dataclasses.replace(inp)
        started = time.process_time()
        result = diagnose(cold)
        totals.append(time.process_time() - started)
    return RuleTimes(
        {name: statistics.median(times) for name, times in per_rule.items()},
        statistics.median(totals),
        result,
    )


def _sizes(inp: DiagnosisInput) -> str:
    return (
        f"{len(inp.snapshot.nodes)} nodes, {len(inp.snapshot.events)} events "
        f"(+{len(inp.history.events)} in the history, which leaves Pods' on disk), "
        f"{len(inp.history.lifecycles)} "
        f"lifecycles, {len(inp.history.transitions)} transitions"
    )


_LOAD_ALL = (
    "import json, pathlib, sys\n"
    "for path in sorted(pathlib.Path(sys.argv[1]).rglob('*.json')):\n"
    "    json.loads(path.read_bytes())\n"
)


def _end_to_end(sim: SimCluster, folder: Path, rounds: int) -> tuple[float, float]:
    """`mignurse diagnose --from` the snapshot's dumps, and bare json.loads of them, each a
    whole process of its own (wall): a fresh heap for both."""
    folder = write_dumps(sim, folder)
    files = sorted(folder.rglob("*.json"))
    loads = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _LOAD_ALL, str(folder)], check=True)
        loads.append(time.perf_counter() - started)
    ends = []
    for _ in range(rounds):
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
    print(f"\njson.loads of the snapshot's {size:.0f} MiB, whole process: {floor:.2f} s")
    print(f"mignurse diagnose --from it, whole process: {end:.2f} s ({end / floor:.2f}x)")
    return end, floor


if __name__ == "__main__":
    main()
