"""`collect` of 45 nodes with ~20 MB of journals each over the SSM stand-in: wall time and RSS.

.venv/bin/python benchmarks/bench_collect.py [--nodes 50] [--mb 20] [--concurrency 10] [--replay]

The simulated pool of `--nodes 50` lists 45 nodes when the collect starts: the 45-node fleet
the figures are for.
    [--ssm-upload presigned|output-bucket]

The stand-ins run in their own processes (this file with `--serve s3|ssm|sim`): moto's S3
server, the SSM stand-in (which runs each node's collector in its sandbox and lets it upload
to S3 through the presigned URL), and the SimCluster API server. This process is mignurse
only, so its peak RSS (`getrusage`) is mignurse's. One node is collected alone first: the
slowest single node. Targets: fleet wall time ≤ 1.5 × that + 2 s; peak RSS < 300 MB (both
printed as figures, benchmarks/figures.py).

On this benchmark's machine the 50 simulated nodes run their collector on the same CPUs as
mignurse (on EKS each node has its own), so their work is reported apart. `--replay` makes
every node answer with one real collector archive made beforehand (`cat` of it): SSM, S3,
the download, unpacking, redaction and packing are all still real, the nodes' own work is
gone, which isolates mignurse's side; it then packs the archive once more in this process
and prints that node's CPU split: masking, and the gunzip, untar, hashing and deflate around
it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from typing import Any

from figures import figure

HOST = "ip-10-0-37-142.us-west-2.compute.internal"
SHAPES = {
    "kubelet": (
        'kubelet[2345]: I1129 {clock}.{us:06d}    2345 kubelet.go:2468] "SyncLoop UPDATE" '
        'source="api" pods=["inference/llm-inference-7d9f8b6c5d-{n:05x}"]',
        "kubelet[2345]: E1129 {clock}.{us:06d}    2345 pod_workers.go:1301] "
        '"Error syncing pod, skipping" err="failed to \\"StartContainer\\"" podUID="{n:08x}"',
    ),
    "containerd": (
        'containerd[1234]: time="2026-11-29T{clock}.{us:06d}Z" level=info '
        'msg="ImageCreate event name:\\"sha256:{n:064x}\\""',
    ),
    "nodeadm": ('nodeadm[880]: {{"level":"info","ts":{n},"msg":"Configuring kubelet"}}',),
    "kernel": ("kernel: IPv6: ADDRCONF(NETDEV_CHANGE): eni{n:x}: link becomes ready",),
}
SHARE = {"kubelet": 0.45, "containerd": 0.3, "nodeadm": 0.05, "kernel": 0.2}
SCENARIO = """\
name: bench-collect
description: calm GPU nodes for the collect benchmark
cluster: {{name: bench, region: us-west-2, kubernetesVersion: "1.32"}}
seed: 11
warmup: 1m
karpenter: {{version: 1.4.0, nodeRepair: true}}
nodePools:
  - name: gpu-fleet
    instanceType: g6e.12xlarge
    zones: [us-west-2a]
    nodes: {nodes}
    existing:
      - {{count: {nodes}, age: 3d}}
"""


# -- the stand-ins' processes --------------------------------------------------------------


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def mignurse_children_cpu() -> float:
    """CPU seconds of mignurse's ended worker processes: children of this process (spawned
    workers) and of the forkserver they are forked from on Unix, whose own time and its
    reaped children's /proc/<pid>/stat holds (proc(5): utime, stime, cutime, cstime)."""
    total = cpu_seconds(resource.RUSAGE_CHILDREN)
    import multiprocessing.forkserver

    pid = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text() if pid else ""
    except OSError:
        stat = ""
    if stat:
        fields = stat.rsplit(")", 1)[1].split()  # from the state on: utime is the 12th
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def packing_split(archive: Path, rounds: int = 3) -> tuple[float, float]:
    """CPU seconds to pack one node's archive as a worker does, and those spent masking text
    in it (mask_secrets), each the mean of `rounds` after one to warm up."""
    from mignurse.collect import archives
    from mignurse.collect.bundle import keep_large_blocks, pack_node_archive

    keep_large_blocks()  # as each worker starts (after the RSS was read: it keeps blocks)
    data = archive.read_bytes()
    masking = [0.0]

    def timed(name: str, text: bytes) -> Any:
        started = time.process_time()
        try:
            return archives.mask_secrets(name, text)
        finally:
            masking[0] += time.process_time() - started

    def mask(name: str, text: bytes, budget: archives.Budget) -> Any:
        return archives.mask_file(name, text, budget, timed)

    pack_node_archive("node", data, "bundle", mask)
    masking[0] = 0.0
    started = time.process_time()
    for _ in range(rounds):
        pack_node_archive("node", data, "bundle", mask)
    return (time.process_time() - started) / rounds, masking[0] / rounds


def serve(kind: str, arg: str) -> None:
    """Start one stand-in, print `READY <endpoint or kubeconfig>`, serve until stdin ends,
    then print `CPU <own seconds> <children's seconds>` (the simulated nodes' share)."""
    try:
        _serve(kind, arg)
    finally:
        own = cpu_seconds(resource.RUSAGE_SELF)
        print(f"CPU {own:.2f} {cpu_seconds(resource.RUSAGE_CHILDREN):.2f}", flush=True)


def _serve(kind: str, arg: str) -> None:
    if kind == "s3":
        from moto.server import ThreadedMotoServer

        s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        s3.start()
        host, port = s3.get_host_and_port()
        print(f"READY http://{host}:{port}", flush=True)
        sys.stdin.read()
        s3.stop()
    elif kind == "ssm":
        # The local SSM endpoint is test support code, beside the tests that use it.
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from ssmstandin import InstanceSpec, SsmStandIn

        specs = {
            iid: InstanceSpec(**spec) for iid, spec in json.loads(Path(arg).read_text()).items()
        }
        with SsmStandIn(specs) as ssm:
            print(f"READY {ssm.endpoint_url}", flush=True)
            sys.stdin.read()
    else:
        from mignurse.sim import SimCluster, load_scenario

        with SimCluster(load_scenario(arg), speed=0) as sim:
            print(f"READY {sim.write_kubeconfig(Path(arg).with_suffix('.kubeconfig'))}", flush=True)
            sys.stdin.read()


def spawn(kind: str, arg: str = "") -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, arg],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if kind == "s3" else None,  # moto logs every request
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # moto prints its own banner first
        if line.startswith("READY "):
            return proc, line.split(" ", 1)[1].strip()
    raise SystemExit(f"the {kind} stand-in did not start")


# -- the benchmark -------------------------------------------------------------------------


def write_journals(folder: Path, megabytes: float) -> None:
    """One set of large journals, shared by every node's `journalctl` stub."""
    folder.mkdir(parents=True, exist_ok=True)
    for unit, share in SHARE.items():
        target = int(megabytes * share * 2**20)
        shapes = SHAPES[unit]
        lines, size, n = [], 0, 0
        while size < target:
            s = n // 50
            clock = f"{3 + s // 3600 % 20:02d}:{(s // 60) % 60:02d}:{s % 60:02d}"
            body = shapes[n % len(shapes)].format(clock=clock, us=n % 1_000_000, n=n)
            line = f"2026-11-29T{clock}.{n % 1_000_000:06d}+0000 {HOST} {body}\n"
            lines.append(line)
            size += len(line)
            n += 1
        (folder / f"{unit}.log").write_text("".join(lines))


JOURNALCTL = """\
unit=; kern=; boot=
while [ $# -gt 0 ]; do case $1 in -u) unit="$unit $2"; shift ;; -k) kern=1 ;;
  -b) boot=$2; shift ;; esac; shift; done
case "$kern:$boot:$unit" in
  1:-1:*) echo 'Data from the specified boot (-1) is not available' >&2; exit 1 ;;
  1:*) exec cat {big}/kernel.log ;;
  *kubelet*) exec cat {big}/kubelet.log ;;
  *containerd*) exec cat {big}/containerd.log ;;
  *nodeadm*) exec cat {big}/nodeadm.log ;;
esac
echo '-- No entries --'
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "ARG"), help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=50, help="nodes in the scenario's pool")
    parser.add_argument("--mb", type=float, default=20.0, help="journal MB per node")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument(
        "--replay", action="store_true", help="nodes send a pre-made archive (see above)"
    )
    parser.add_argument(
        "--ssm-upload",
        choices=("presigned", "output-bucket"),
        default="presigned",
        help="how nodes hand their archive to S3 (see mignurse collect --ssm-upload)",
    )
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return

    import boto3
    from botocore.config import Config

    from mignurse.cluster.client import NODES, ClusterClient
    from mignurse.cluster.load import load_snapshot
    from mignurse.collect import run as collect_module
    from mignurse.collect.redact import Redactor
    from mignurse.collect.run import collect, select_nodes
    from mignurse.model import Node
    from mignurse.nodeaccess.base import NodeShell
    from mignurse.nodeaccess.local import LocalShell
    from mignurse.nodeaccess.script import collector_script
    from mignurse.nodeaccess.ssm import SSMFleet, SSMShell
    from mignurse.sim.nodes import NodeSandbox

    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-west-2"
    )
    os.environ.pop("AWS_PROFILE", None)
    servers: list[subprocess.Popen[str]] = []
    cpu: dict[str, tuple[float, ...]] = {}
    kinds: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="mignurse-bench-collect-") as tmp:
        root = Path(tmp)
        try:
            scenario = root / "bench.yaml"
            scenario.write_text(SCENARIO.format(nodes=args.nodes))
            sim, kubeconfig = spawn("sim", str(scenario))
            servers.append(sim)
            s3_proc, s3_url = spawn("s3")
            servers.append(s3_proc)
            kinds.update({sim.pid: "sim", s3_proc.pid: "s3"})
            os.environ["AWS_ENDPOINT_URL_S3"] = s3_url

            client = ClusterClient.connect(kubeconfig=kubeconfig)
            snapshot = load_snapshot(client).snapshot
            nodes = select_nodes(snapshot, names=[], nodepool="gpu-fleet", unhealthy=False)
            t0 = time.monotonic()
            write_journals(root / "big", args.mb)
            specs: dict[str, dict[str, Any]] = {}
            for node in nodes:
                raw = client.get(NODES, node.name)
                box = NodeSandbox.for_node(root / "nodes" / node.name, raw, story="healthy")
                box.stub("journalctl", JOURNALCTL.format(big=root / "big"))
                assert node.instance_id
                specs[node.instance_id] = {"env": box.env, "path_prefix": box.path_prefix}
            (root / "specs.json").write_text(json.dumps(specs))
            ssm_proc, ssm_url = spawn("ssm", str(root / "specs.json"))
            servers.append(ssm_proc)
            kinds[ssm_proc.pid] = "ssm"
            os.environ["AWS_ENDPOINT_URL_SSM"] = ssm_url
            print(
                f"{len(nodes)} nodes, {args.mb:g} MB of journals each "
                f"(set up in {time.monotonic() - t0:.1f} s), concurrency {args.concurrency}, "
                f"upload {args.ssm_upload}, "
                f"{os.cpu_count()} CPUs"
            )

            retries = Config(retries={"mode": "adaptive", "max_attempts": 5})
            ssm_client = boto3.client("ssm", config=retries)
            s3_client = boto3.client(
                "s3",
                config=retries.merge(
                    Config(s3={"addressing_style": "path"}, signature_version="s3v4")
                ),
            )
            bucket = f"bundles-{uuid.uuid4().hex[:8]}"
            s3_client.create_bucket(
                Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
            )

            ssm_fleet = SSMFleet(
                ssm_client=ssm_client, s3_client=s3_client, bucket=bucket, upload=args.ssm_upload
            )
            if args.replay:
                archive = root / "node-archive.tar.gz"
                box = NodeSandbox.for_node(
                    root / "replay-node", client.get(NODES, nodes[0].name), story="healthy"
                )
                box.stub("journalctl", JOURNALCTL.format(big=root / "big"))
                with archive.open("wb") as sink:
                    made = LocalShell(nodes[0].name, env=box.env, path_prefix=box.path_prefix).run(
                        collector_script(since="6 hours ago"), timeout=300, stdout=sink
                    )
                assert made.ok, made
                replay = f"cat {archive}\n"
                collect_module.collector_script = lambda **_: replay

            def shell_for(node: Node) -> NodeShell:
                assert node.instance_id
                return SSMShell(node.name, node.instance_id, fleet=ssm_fleet)

            def run(chosen: list[Node], out: Path, concurrency: int) -> dict[str, Any]:
                return collect(
                    client,
                    snapshot,
                    chosen,
                    shell_for=shell_for,
                    out=out,
                    since="6 hours ago",
                    redactor=Redactor(enabled=True),
                    concurrency=concurrency,
                    node_timeout=600,
                )

            started = time.monotonic()
            single = run(nodes[:1], root / "one.tar.gz", 1)
            single_wall = time.monotonic() - started
            single_node = single["nodes"][nodes[0].name]
            assert single_node["ok"], single_node
            started = time.monotonic()
            self_before = cpu_seconds(resource.RUSAGE_SELF)
            cpu_before = self_before + mignurse_children_cpu()
            fleet = run(nodes, root / "fleet.tar.gz", args.concurrency)
            wall = time.monotonic() - started
            # its redaction workers are reaped when the bundle closes: counted
            mignurse_cpu = (
                cpu_seconds(resource.RUSAGE_SELF) + mignurse_children_cpu()
            ) - cpu_before
            main_cpu = cpu_seconds(resource.RUSAGE_SELF) - self_before
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            split = packing_split(archive) if args.replay else None
            client.close()
        finally:
            for proc in servers:
                if proc.stdin:
                    proc.stdin.close()
            for proc in servers:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    continue
                for line in proc.stdout.read().splitlines() if proc.stdout else []:
                    if line.startswith("CPU "):
                        cpu[kinds[proc.pid]] = tuple(float(x) for x in line.split()[1:])

        outcomes = fleet["nodes"].values()
        ok = sum(1 for o in outcomes if o["ok"])
        node_secs = sorted(o["seconds"] or 0.0 for o in outcomes)
        size = (root / "fleet.tar.gz").stat().st_size / 2**20
        limit = 1.5 * single_wall + 2
        print(
            f"single node: {single_wall:.1f} s wall "
            f"(transport {single_node['seconds']:.1f} s, {single_node['bytes'] / 2**20:.1f} MiB)"
        )
        print(
            f"fleet: {ok}/{len(nodes)} ok, {wall:.1f} s wall, bundle {size:.1f} MiB; per node "
            f"median {node_secs[len(node_secs) // 2]:.1f} s, max {node_secs[-1]:.1f} s"
        )
        print(
            f"wall time {wall:.1f} s vs 1.5 x {single_wall:.1f} + 2 = {limit:.1f} s: "
            f"{'PASS' if wall <= limit else 'FAIL'}"
        )
        print(f"peak RSS {rss_mb:.0f} MB vs 300 MB: {'PASS' if rss_mb < 300 else 'FAIL'}")
        mode = "replayed archives" if args.replay else "collectors run"
        figure(
            f"collect of {len(nodes)} nodes ({mode}), wall",
            wall,
            "s",
            target=limit,
            peer="one node alone",
            peer_value=single_wall,
        )
        figure(f"collect of {len(nodes)} nodes, peak RSS", rss_mb, "MB", target=300)
        ssm_own, nodes_cpu = cpu.get("ssm", (0.0, 0.0))
        s3_cpu = cpu.get("s3", (0.0, 0.0))[0]
        print(
            f"CPU seconds (single node + fleet for the stand-ins): mignurse {mignurse_cpu:.1f} "
            f"(fleet only: {main_cpu:.1f} in its own process, the rest in its redaction "
            f"workers), simulated nodes {nodes_cpu:.1f}"
            f"{' (replaying)' if args.replay else ''}, SSM stand-in {ssm_own:.1f}, "
            f"moto S3 {s3_cpu:.1f}; {os.cpu_count()} CPUs"
        )
        if split is not None:
            print(
                f"one replayed node packed here: {split[0]:.3f} CPU-s, of which masking "
                f"{split[1]:.3f} and gunzip, untar, hashing and deflate {split[0] - split[1]:.3f}"
            )


if __name__ == "__main__":
    main()
