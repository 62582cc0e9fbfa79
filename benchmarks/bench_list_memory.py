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
  nodes      the kind that weighs most per object: a million GPU nodes, each a copy of the
             simulator's p5.48xlarge (70 labels, 9 conditions) under its own name, served
             by a plain local server (the simulator cannot build a quarter million nodes),
             listed with the cap at its default: the cap comes first, at 250,000 nodes

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

NODE_SERVER = textwrap.dedent(
    """
    import http.server, json, sys, threading, yaml
    from urllib.parse import parse_qs, urlsplit
    from mignurse.sim import SimCluster, load_scenario
    total, page = int(sys.argv[2]), int(sys.argv[3])
    nodes = SimCluster(load_scenario("healthy"), speed=0).objects("nodes")
    node = next(n for n in nodes if "nvidia.com/gpu.present" in n["metadata"]["labels"])
    text = json.dumps(node, separators=(",", ":"))
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]
    instance = node["spec"]["providerID"].rsplit("/", 1)[-1]

    def item(i):
        return (text.replace(name, f"ip-10-{i >> 16 & 255}-{i >> 8 & 255}-{i & 255}-{i >> 24}")
                .replace(uid, f"{i:08x}-0000-4000-a000-000000000000")
                .replace(instance, f"i-{i:017x}"))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            start = int(query.get("continue") or 0)
            end = min(total, start + page)
            meta = {"resourceVersion": "1"}
            if end < total:
                meta["continue"] = str(end)
            items = ",".join(item(i) for i in range(start, end))
            data = ('{"kind":"NodeList","apiVersion":"v1","metadata":%s,"items":[%s]}'
                    % (json.dumps(meta), items)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    with open(sys.argv[1], "w") as out:
        yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "bench",
                        "clusters": [{"name": "c", "cluster": {"server": url}}],
                        "users": [{"name": "u", "user": {"token": "bench"}}],
                        "contexts": [{"name": "bench", "context": {"cluster": "c", "user": "u"}}]},
                       out)
    print("ready", total, flush=True)
    sys.stdin.read()
    """
)

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    mode, kubeconfig, page = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from mignurse.cluster.client import ClusterClient, EVENTS, NODES
    from mignurse.model import Event, Node
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
        if mode == "nodes":
            listing = api.list(NODES, Node.from_api, cut=True, limit=page)
        else:
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
    parser.add_argument("--nodes", type=int, default=1_000_000, help="GPU nodes served")
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
        print(f"serving {args.nodes:,} GPU nodes…", file=sys.stderr, flush=True)
        node_kubeconfig = Path(tmp) / "kubeconfig-nodes"
        server = subprocess.Popen(
            [sys.executable, "-c", NODE_SERVER, str(node_kubeconfig), str(args.nodes), str(PAGE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            if server.stdout.readline().split()[:1] != ["ready"]:
                print("the node server did not start", file=sys.stderr)
                return 1
            print("nodes…", file=sys.stderr, flush=True)
            results["nodes"] = run_child("nodes", node_kubeconfig, base_env)
        finally:
            if server.stdin:
                server.stdin.close()
            server.wait(timeout=60)
    return report(results, served)


def report(results: dict[str, dict[str, object]], served: int) -> int:
    def value(mode: str, key: str) -> float:
        return float(results[mode][key])  # type: ignore[arg-type]

    print(f"\nlist {served:,} events from the simulator, and GPU nodes, pages of {PAGE}\n")
    print(
        f"{'way':<10} {'objects':>10} {'pages':>6} {'wall s':>8} {'CPU s':>7} {'peak RSS MB':>12}"
    )
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
    nodes_peak = value("nodes", "peak_rss_mb")
    print(
        f"{'PASS' if nodes_peak < TARGET_MB else 'FAIL'}  "
        f"GPU nodes to the cap under {TARGET_MB:.0f} MB"
    )
    figure(
        f"{int(value('nodes', 'count')):,} GPU nodes listed to the default cap, peak RSS",
        nodes_peak,
        "MB",
        target=TARGET_MB,
    )
    return 0 if peak < TARGET_MB and complete and nodes_peak < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
