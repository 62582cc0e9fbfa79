"""List a million events from the simulator through ClusterClient: peak RSS and wall time.

    make bench            (or: .venv/bin/python benchmarks/bench_list_memory.py [--events N])

Events are the list that grows past a million on a real cluster (every pod start, probe
failure and node agent warning is one) and the one `mignurse diagnose` reads whole. The
simulator, in a process of its own, builds a small GPU cluster and an event backlog of
`--events`; each way then lists them in a fresh interpreter, 500 a page:

  mignurse   ClusterClient.list(EVENTS, Event.from_api) with the list cap raised past the
             list (MIGNURSE_MAX_LIST_ITEMS), every event kept as the model
  capped     the same with the cap at its default: the list is cut there, and the report
             says after how many pages the cut arrived
  floor      the same pages through the same client, json.loads only, each page dropped
             at once: what fetching and decoding alone cost

Targets: mignurse's peak RSS under 1.5 GB, listed whole and cut at the cap; its wall time
within 1.5x of the floor's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from figures import figure

PAGE = 500
TARGET_MB = 1536.0

# generate.py's scale generator: a few pools, and the event backlog of the last hour (an
# event about the same object, reason and wording as an earlier one is merged into it, and
# one older than the events' time to live is left out, so a fifth more are asked for).
SCENARIO = textwrap.dedent(
    """
    name: events-{events}
    description: a small GPU cluster with {events} events
    cluster:
      name: events-bench
      region: us-west-2
      kubernetesVersion: "1.32"
    seed: 27
    karpenter:
      version: 1.4.0
      nodeRepair: true
    generate:
      kind: scale
      gpuNodes: 500
      nodePools: 4
      cpuNodes: 10
      events: {asked}
      unhealthyPercent: 3
    """
)

SERVER = textwrap.dedent(
    """
    import sys
    from mignurse.sim import SimCluster, load_scenario
    sim = SimCluster(load_scenario(sys.argv[1]), speed=0).start()
    sim.write_kubeconfig(sys.argv[2])
    print("ready", len(sim.store.keys("events")), flush=True)
    sys.stdin.read()
    sim.stop()
    """
)

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    mode, kubeconfig, page = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from mignurse.cluster.client import ClusterClient, EVENTS
    from mignurse.model import Event
    api = ClusterClient.connect(kubeconfig=kubeconfig)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pages = 0
    cut = False
    started, cpu = time.perf_counter(), time.process_time()
    if mode == "floor":
        count = 0
        query = {"limit": str(page)}
        while True:
            doc = json.loads(api._request("GET", EVENTS.path(), dict(query)))
            pages += 1
            count += len(doc["items"])
            token = doc["metadata"].get("continue")
            del doc
            if not token:
                break
            query["continue"] = token
    else:
        import mignurse.cluster.client as client_module
        real = client_module.ClusterClient._request
        def counted(self, *args, **kwargs):
            global pages
            pages += 1
            return real(self, *args, **kwargs)
        client_module.ClusterClient._request = counted
        listing = api.list(EVENTS, Event.from_api, cut=True, limit=page)
        count, cut = len(listing.items), listing.cut
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mode": mode, "seconds": elapsed, "cpu_seconds": cpu,
                      "peak_rss_mb": peak / 1024, "import_rss_mb": base_rss / 1024,
                      "count": count, "pages": pages, "cut": cut}))
    """
)


def run_child(mode: str, kubeconfig: Path, env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(kubeconfig), str(PAGE)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to list")
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("MIGNURSE_")}
    raised = dict(base_env, MIGNURSE_MAX_LIST_ITEMS=str(2 * args.events + PAGE))
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "events.yaml"
        asked = args.events + args.events // 5
        scenario.write_text(SCENARIO.format(events=args.events, asked=asked))
        kubeconfig = Path(tmp) / "kubeconfig"
        print(f"building {asked:,} events in the simulator…", file=sys.stderr, flush=True)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(scenario), str(kubeconfig)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            ready = server.stdout.readline().split()
            if not ready or ready[0] != "ready":
                print("the simulator did not start", file=sys.stderr)
                return 1
            served = int(ready[1])
            results: dict[str, dict[str, object]] = {}
            for mode, env in (("floor", base_env), ("mignurse", raised), ("capped", base_env)):
                print(f"{mode}…", file=sys.stderr, flush=True)
                results[mode] = run_child(mode, kubeconfig, env)
        finally:
            if server.stdin:
                server.stdin.close()
            server.wait(timeout=60)
    return report(results, served)


def report(results: dict[str, dict[str, object]], served: int) -> int:
    def value(mode: str, key: str) -> float:
        return float(results[mode][key])  # type: ignore[arg-type]

    print(f"\nlist {served:,} events from the simulator, pages of {PAGE}\n")
    print(f"{'way':<10} {'events':>10} {'pages':>6} {'wall s':>8} {'CPU s':>7} {'peak RSS MB':>12}")
    for mode, result in results.items():
        print(
            f"{mode:<10} {int(value(mode, 'count')):>10,} {int(value(mode, 'pages')):>6} "
            f"{value(mode, 'seconds'):>8.2f} {value(mode, 'cpu_seconds'):>7.2f} "
            f"{value(mode, 'peak_rss_mb'):>12.0f}" + ("  (cut at the cap)" if result["cut"] else "")
        )
    peak = value("mignurse", "peak_rss_mb")
    complete = int(value("mignurse", "count")) == served
    print()
    print(f"{'PASS' if peak < TARGET_MB else 'FAIL'}  peak RSS under {TARGET_MB:.0f} MB")
    print(f"{'PASS' if complete else 'FAIL'}  every event listed ({served:,})")
    figure(f"{served:,} events listed, peak RSS", peak, "MB", target=TARGET_MB)
    figure(
        f"{served:,} events listed, wall",
        value("mignurse", "seconds"),
        "s",
        peer="json.loads floor",
        peer_value=value("floor", "seconds"),
        ratio_target=1.5,
    )
    figure(
        "events listed to the default cap, peak RSS",
        value("capped", "peak_rss_mb"),
        "MB",
        target=TARGET_MB,
    )
    return 0 if peak < TARGET_MB and complete else 1


if __name__ == "__main__":
    sys.exit(main())
