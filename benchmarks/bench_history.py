"""Record the scale-5000 cluster into the history store and read it back; then how long a
watch thread's hand-off to the recorder takes while its writer is stuck (the figure
tests/test_history.py no longer asserts on: it proves the hand-off never waits).

.venv/bin/python benchmarks/bench_history.py
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path

from figures import figure

from mignurse.cluster.history import HistoryRecorder, HistoryStore
from mignurse.model import Event, Node, NodeClaim
from mignurse.sim import SimCluster, load_scenario

CONTEXT = "sim-scale-5000"


def timed(label: str, action: object) -> object:
    started = time.perf_counter()
    result = action() if callable(action) else None
    took = time.perf_counter() - started
    print(f"{label:<44} {took:6.2f} s")
    figure(label, took, "s")
    return result


def main() -> None:
    print("building scale-5000…", flush=True)
    sim = SimCluster(load_scenario("scale-5000"), speed=0)
    now = sim.now()
    nodes = [Node.from_api(o) for o in sim.objects("nodes")]
    claims = [NodeClaim.from_api(o) for o in sim.objects("nodeclaims")]
    events = [Event.from_api(o) for o in sim.objects("events")]
    print(f"{len(nodes)} nodes, {len(claims)} NodeClaims, {len(events)} events\n")
    with tempfile.TemporaryDirectory() as tmp:
        store = HistoryStore(Path(tmp) / "history.sqlite3")
        timed("record LIST of nodes", lambda: store.record(CONTEXT, "nodes", "LIST", nodes, now))
        timed(
            "record LIST of NodeClaims",
            lambda: store.record(CONTEXT, "nodeclaims", "LIST", claims, now),
        )
        timed("record LIST of events", lambda: store.record(CONTEXT, "events", "LIST", events, now))
        timed(
            "relist of unchanged nodes", lambda: store.record(CONTEXT, "nodes", "LIST", nodes, now)
        )
        since = now - timedelta(hours=6)
        timed("lifecycles since 6 h (first read)", lambda: store.lifecycles(CONTEXT, since=since))
        timed("lifecycles since 6 h (again)", lambda: store.lifecycles(CONTEXT, since=since))
        name = nodes[0].name
        timed(
            "events of one node",
            lambda: store.events(CONTEXT, involved_kind="Node", involved_name=name),
        )
        print(f"\nstore: {store.stats()}")
        store.close()
        handoff(Path(tmp) / "stuck.sqlite3", events[:1000], now)


class _StuckStore(HistoryStore):
    """A writer on a disk that takes 0.2 s per batch."""

    def record_batch(self, context: str, items: object) -> None:
        time.sleep(0.2)
        super().record_batch(context, items)  # type: ignore[arg-type]


def handoff(path: Path, events: list[Event], now: object) -> None:
    store = _StuckStore(path)
    recorder = HistoryRecorder(store, CONTEXT, clock=lambda: now, max_queue=100).start()
    took = []
    for event in events:
        started = time.perf_counter()
        recorder.listener("events", "ADDED", [event])
        took.append(time.perf_counter() - started)
    recorder.stop()
    store.close()
    took.sort()
    median_us, slowest_ms = took[len(took) // 2] * 1e6, took[-1] * 1e3
    # The watch threads must never wait on the writer: a hand-off is a queue append.
    figure("watch hand-off to a stuck writer, slowest of 1,000", slowest_ms, "ms", target=50)
    print(
        f"hand-off of {len(took)} changes, writer stuck: median {median_us:.0f} µs,"
        f" slowest {slowest_ms:.1f} ms, {recorder.dropped} dropped (oldest first)"
    )


if __name__ == "__main__":
    main()
