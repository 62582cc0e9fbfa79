"""List and parse 5,000 GPU nodes and 100,000 events from the simulator, three ways.

    make bench            (or: .venv/bin/python benchmarks/bench_list.py [--rounds N])

Each way runs in a fresh interpreter so wall time and peak RSS are its own; the simulated
API server runs in another process. The ways:

  mignurse     ClusterClient.list(): pages of 500 as raw JSON, parsed into the model
               (next page fetched while this one is parsed, garbage collector paused
               while parsing)
  floor        the same pages through the same client, one after another, json.loads
               only and nothing else (peak RSS here includes keeping the raw bytes for
               the offline re-decode, which is reported too)
  k8s-default  CoreV1Api.list_node / list_event_for_all_namespaces: the kubernetes
               client's own per-object model deserialization, same page size

Targets: mignurse at least 5x faster than k8s-default, within 1.5x of floor,
peak RSS under 500 MB.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from figures import figure

PAGE = 500

SERVER = textwrap.dedent(
    """
    import sys
    from mignurse.sim import SimCluster, load_scenario
    sim = SimCluster(load_scenario("scale-5000"), speed=0).start()
    sim.write_kubeconfig(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
    sim.stop()
    """
)

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    mode, kubeconfig, page = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from mignurse.cluster.client import ClusterClient, NODES, EVENTS
    from mignurse.model import Node, Event
    api = ClusterClient.connect(kubeconfig=kubeconfig)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counts = {}
    loads_seconds = 0.0
    started = time.perf_counter()
    if mode == "mignurse":
        counts["nodes"] = len(api.list(NODES, Node.from_api, limit=page).items)
        counts["events"] = len(api.list(EVENTS, Event.from_api, limit=page).items)
    elif mode == "floor":
        bodies = []
        for res in (NODES, EVENTS):
            n = 0
            query = {"limit": str(page)}
            while True:
                body = api._request("GET", res.path(), dict(query))
                bodies.append(body)
                t0 = time.perf_counter()
                doc = json.loads(body)
                loads_seconds += time.perf_counter() - t0
                n += len(doc["items"])
                token = doc["metadata"].get("continue")
                if not token:
                    break
                query["continue"] = token
            counts[res.plural] = n
        elapsed = time.perf_counter() - started
        # The same bytes again, no network, collector paused: the decoding floor alone.
        import gc
        gc.disable()
        t0 = time.perf_counter()
        for body in bodies:
            json.loads(body)
        paused_seconds = time.perf_counter() - t0
        gc.enable()
    else:
        # The kubernetes client itself, from the same kubeconfig (mignurse no longer uses it).
        from kubernetes import client as k8s, config as k8s_config
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
        for name, call in (("nodes", core.list_node),
                           ("events", core.list_event_for_all_namespaces)):
            n, token = 0, None
            while True:
                result = call(limit=page, _continue=token)
                n += len(result.items)
                token = result.metadata._continue
                if not token:
                    break
            counts[name] = n
    if mode != "floor":
        elapsed = time.perf_counter() - started
        paused_seconds = 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mode": mode, "seconds": elapsed, "peak_rss_mb": peak / 1024,
                      "import_rss_mb": base_rss / 1024, "counts": counts,
                      "loads_seconds": loads_seconds, "paused_seconds": paused_seconds}))
    """
)


def run_child(mode: str, kubeconfig: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(kubeconfig), str(PAGE)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per way (median is kept)")
    parser.add_argument(
        "--skip-default", action="store_true", help="leave out the slow k8s-default way"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        print("building scale-5000 in the simulator…", file=sys.stderr, flush=True)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(kubeconfig)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            if server.stdout.readline().strip() != "ready":
                print("the simulator did not start", file=sys.stderr)
                return 1
            modes = ["floor", "mignurse"] + ([] if args.skip_default else ["k8s-default"])
            results: dict[str, list[dict[str, object]]] = {m: [] for m in modes}
            for round_number in range(args.rounds):
                for mode in modes:
                    print(f"round {round_number + 1}: {mode}…", file=sys.stderr, flush=True)
                    results[mode].append(run_child(mode, kubeconfig))
        finally:
            if server.stdin:
                server.stdin.close()
            server.wait(timeout=30)
    return report(results)


def report(results: dict[str, list[dict[str, object]]]) -> int:
    def median(mode: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in results[mode])  # type: ignore[arg-type]

    counts = results["mignurse"][0]["counts"]
    print(f"\nlist + parse {counts} from the simulator, pages of {PAGE}, median of rounds\n")
    print(f"{'way':<12} {'wall s':>8} {'peak RSS MB':>12}  notes")
    floor = median("floor", "seconds")
    ours = median("mignurse", "seconds")
    for mode in results:
        seconds = median(mode, "seconds")
        rss = median(mode, "peak_rss_mb")
        note = ""
        if mode == "floor":
            note = (
                f"of which json.loads {median('floor', 'loads_seconds'):.2f} s "
                f"({median('floor', 'paused_seconds'):.2f} s with the collector paused)"
            )
        elif mode == "mignurse":
            note = f"{ours / floor:.2f}x floor"
        else:
            note = f"mignurse is {seconds / ours:.1f}x faster"
        print(f"{mode:<12} {seconds:>8.2f} {rss:>12.0f}  {note}")
    verdicts = [("within 1.5x of floor", ours <= 1.5 * floor)]
    verdicts.append(("peak RSS under 500 MB", median("mignurse", "peak_rss_mb") < 500))
    if "k8s-default" in results:
        verdicts.append(
            ("5x faster than k8s-default", median("k8s-default", "seconds") >= 5 * ours)
        )
    print()
    for name, ok in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    listed = ", ".join(f"{count:,} {plural}" for plural, count in counts.items())  # type: ignore[attr-defined]
    figure(
        f"list {listed}, wall",
        ours,
        "s",
        peer="json.loads floor",
        peer_value=floor,
        ratio_target=1.5,
    )
    figure(f"list {listed}, peak RSS", median("mignurse", "peak_rss_mb"), "MB", target=500)
    if "k8s-default" in results:  # at least 5x faster: at most 0.2 of its time
        figure(
            f"list {listed} beside the kubernetes client's own models, wall",
            ours,
            "s",
            peer="k8s-default",
            peer_value=median("k8s-default", "seconds"),
            ratio_target=0.2,
        )
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
