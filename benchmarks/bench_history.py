"""Record the scale-5000 cluster into the history store and read it back.

.venv/bin/python benchmarks/bench_history.py
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path

from mignurse.cluster.history import HistoryStore
from mignurse.model import Event, Node, NodeClaim
from mignurse.sim import SimCluster, load_scenario

CONTEXT = "sim-scale-5000"


def timed(label: str, action: object) -> object:
    started = time.perf_counter()
    result = action() if callable(action) else None
    print(f"{label:<44} {time.perf_counter() - started:6.2f} s")
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


if __name__ == "__main__":
    main()
