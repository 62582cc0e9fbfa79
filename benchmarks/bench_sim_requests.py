"""One request's round trip to the simulated API server through mignurse's client: a GET of
a node and a merge PATCH of its labels, each the median of many. The figure that shows
whether the stand-in answers as kube-apiserver does (at once) or waits on the TCP stack: with
Nagle's algorithm left on, an answer's body waited ~40 ms for the client's delayed ACK of its
headers (mignurse/sim/apiserver/base.py, disable_nagle_algorithm). `--nagle` measures it
with the algorithm back on, for the comparison.

.venv/bin/python benchmarks/bench_sim_requests.py [--nagle]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from figures import figure

from mignurse.cluster.client import NODES, ClusterClient
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.apiserver.base import HandlerBase

ROUNDS = 60


def median_ms(action: object) -> float:
    times = []
    for i in range(ROUNDS):
        started = time.perf_counter()
        action(i)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    if "--nagle" in sys.argv[1:]:
        HandlerBase.disable_nagle_algorithm = False
    sim = SimCluster(load_scenario("healthy"), speed=0).start()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim.write_kubeconfig(kubeconfig)
        client = ClusterClient.connect(str(kubeconfig))
        try:
            node = client.list(NODES, lambda raw: str(raw["metadata"]["name"])).items[0]
            get = median_ms(lambda _i: client.get(NODES, node))
            patch = median_ms(
                lambda i: client.patch(NODES, node, {"metadata": {"labels": {"bench": str(i)}}})
            )
        finally:
            client.close()
            sim.stop()
    nagle = "on" if not HandlerBase.disable_nagle_algorithm else "off"
    print(f"Nagle's algorithm {nagle}: median of {ROUNDS}")
    print(f"  GET node           {get:7.2f} ms")
    print(f"  PATCH node labels  {patch:7.2f} ms")
    figure(f"simulator GET of a node, Nagle {nagle}", get, "ms")
    figure(f"simulator label PATCH, Nagle {nagle}", patch, "ms")


if __name__ == "__main__":
    main()
