"""A 50-node collection through the SSM stand-in: real boto3, moto's S3 on 127.0.0.1.

40 healthy Online nodes, 3 whose agent is ConnectionLost, 3 slow to pick a command up, 3 not
managed by SSM (collected through the fallback), 1 whose journal hangs past the node timeout.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ssmstandin import InstanceSpec, SsmStandIn

from mignurse.cli import main
from mignurse.cluster.client import NODES, ClusterClient
from mignurse.cluster.load import load_snapshot
from mignurse.collect import bundle as bundle_module
from mignurse.collect.events import NODE_DONE, CollectEvent
from mignurse.collect.redact import Redactor
from mignurse.collect.run import collect, select_nodes
from mignurse.model import Node
from mignurse.nodeaccess.base import CANCELLED, NodeShell
from mignurse.nodeaccess.fallback import FallbackShell
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import NodeSandbox, SandboxShell

SCENARIO = """\
name: fleet
description: fifty calm GPU nodes for the fleet collection test
cluster: {name: fleet-test, region: us-west-2, kubernetesVersion: "1.32"}
seed: 7
warmup: 1m
karpenter: {version: 1.4.0, nodeRepair: true}
nodePools:
  - name: gpu-fleet
    instanceType: g6e.12xlarge
    zones: [us-west-2a, us-west-2b]
    nodes: 50
    consolidation: {after: Never}   # no pods: Karpenter would consolidate them
    existing:
      - {count: 50, age: 3d}
"""
CONCURRENCY = 6
NODE_TIMEOUT = 30.0  # the hung node's executionTimeout; a healthy node takes ~1 s, more when
# both cores are busy (its collector runs the stand-ins as Python processes)


def _kind(index: int) -> str:
    """Which trouble node `index` (in name order) has."""
    if index < 3:
        return "lost"
    if index < 6:
        return "slow"
    if index < 9:
        return "unmanaged"
    if index == 9:
        return "hang"
    return "healthy"


class Fleet:
    """The sim cluster, one sandbox and one SSM instance per node, and the shells."""

    def __init__(self, sim: SimCluster, root: Path, bucket: str, ssm_endpoint_setter: Any) -> None:
        self.bucket = bucket
        self.client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(root / "config")))
        self.snapshot = load_snapshot(self.client).snapshot
        self.nodes: list[Node] = select_nodes(
            self.snapshot, names=[], nodepool="gpu-fleet", unhealthy=False
        )
        assert len(self.nodes) == 50
        self.kind: dict[str, str] = {}
        self.sandboxes: dict[str, NodeSandbox] = {}
        specs: dict[str, InstanceSpec] = {}
        for index, node in enumerate(self.nodes):
            kind = _kind(index)
            raw = self.client.get(NODES, node.name)
            sandbox = NodeSandbox.for_node(root / "nodes" / node.name, raw, story="healthy")
            if kind == "hang":
                sandbox.stub("journalctl", "exec sleep 300\n")
            assert node.instance_id
            specs[node.instance_id] = InstanceSpec(
                env=sandbox.env,
                path_prefix=sandbox.path_prefix,
                online=kind != "lost",
                slow=2.0 if kind == "slow" else 0.0,
                managed=kind != "unmanaged",
            )
            self.kind[node.name] = kind
            self.sandboxes[node.name] = sandbox
        self.ssm = SsmStandIn(specs, race=0.3).start()
        ssm_endpoint_setter("AWS_ENDPOINT_URL_SSM", self.ssm.endpoint_url)
        import boto3
        from botocore.config import Config

        retries = Config(retries={"mode": "adaptive", "max_attempts": 5})
        self.ssm_client = boto3.client("ssm", config=retries)
        self.s3_client = boto3.client(
            "s3", config=retries.merge(Config(s3={"addressing_style": "path"}))
        )
        self.ssm_fleet = SSMFleet(
            ssm_client=self.ssm_client,
            s3_client=self.s3_client,
            bucket=self.bucket,
            poll=(0.2, 1.0),
            delivery_timeout=30,
        )

    def shell_for(self, node: Node) -> NodeShell:
        assert node.instance_id
        ssm = SSMShell(node.name, node.instance_id, fleet=self.ssm_fleet)
        # SSH's place in the CLI: here the node's sandbox, reached locally
        local = SandboxShell(self.sandboxes[node.name])
        return FallbackShell(ssm, local, when="is not managed by SSM")

    def close(self) -> None:
        self.ssm.stop()
        self.client.close()


@pytest.fixture
def fleet(tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(SCENARIO)
    with SimCluster(load_scenario(str(scenario)), speed=0) as sim:
        built = Fleet(sim, tmp_path, bucket, monkeypatch.setenv)
        try:
            yield built
        finally:
            built.close()


def _manifest(bundle: Path) -> tuple[dict[str, Any], list[str]]:
    assert tarfile.is_tarfile(bundle)
    with tarfile.open(bundle, "r:gz") as tar:
        names = tar.getnames()
        top = names[0].split("/", 1)[0]
        member = tar.extractfile(f"{top}/manifest.json")
        assert member is not None
        return json.load(member), names


@pytest.mark.deep
def test_fifty_nodes_over_ssm_each_with_its_own_outcome(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "fleet.tar.gz"
    manifest = collect(
        fleet.client,
        fleet.snapshot,
        fleet.nodes,
        shell_for=fleet.shell_for,
        out=bundle,
        since="6 hours ago",
        redactor=Redactor(enabled=True),
        concurrency=CONCURRENCY,
        node_timeout=NODE_TIMEOUT,
    )
    written, names = _manifest(bundle)
    assert written["nodes"] == manifest["nodes"] and written["interrupted"] is False
    outcomes: dict[str, dict[str, Any]] = manifest["nodes"]
    assert sorted(outcomes) == sorted(n.name for n in fleet.nodes)

    for name, outcome in outcomes.items():
        kind = fleet.kind[name]
        error = outcome["error"]
        assert error is None or "\n" not in error, (name, error)
        if kind in ("healthy", "slow"):
            assert outcome["ok"] and outcome["transport"] == "ssm", (name, outcome)
            assert outcome["files"] > 0 and not outcome["timedOut"]
        elif kind == "unmanaged":
            assert outcome["ok"] and outcome["transport"] == "sim", (name, outcome)
            assert outcome["files"] > 0
        elif kind == "lost":
            assert not outcome["ok"] and not outcome["timedOut"], (name, outcome)
            assert "ConnectionLost" in error
        else:  # hang
            assert not outcome["ok"] and outcome["timedOut"], (name, outcome)
            assert f"timed out after {NODE_TIMEOUT:g} s" in error
    slow = [o for n, o in outcomes.items() if fleet.kind[n] == "slow"]
    assert all(o["seconds"] >= 2.0 for o in slow)

    healthy = [n for n in outcomes if fleet.kind[n] in ("healthy", "slow", "unmanaged")]
    for name in healthy:
        for part in ("kubelet.log", "nvidia-smi.xml", "manifest.json"):
            assert any(n.endswith(f"/nodes/{name}/{part}") for n in names), (name, part)
    assert any(n.endswith("/cluster/nodes.json") for n in names)

    # one SendCommand for the fleet; SSM's MaxConcurrency, not ours, bounds what runs at once
    sends = [p for op, p in fleet.ssm.requests if op == "SendCommand"]
    assert len(sends) == 1 and sends[0]["MaxConcurrency"] == str(CONCURRENCY)
    assert 2 <= fleet.ssm.peak_in_progress <= CONCURRENCY
    assert fleet.ssm.in_progress == 0
    # the unmanaged and the lost were never sent a command
    sent = set(sends[0]["InstanceIds"])
    never = {n.instance_id for n in fleet.nodes if fleet.kind[n.name] in ("lost", "unmanaged")}
    assert len(sent) == 44 and not never & sent

    capsys.readouterr()
    code = main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    assert code in (0, 1), document
    assert not document["ruleErrors"]


@pytest.mark.parametrize("pooled", [False, True], ids=["packed-here", "packed-in-workers"])
def test_an_interrupted_fleet_collection_leaves_a_valid_partial_bundle(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    if pooled:  # the sandboxes' archives are small: ship every one to the workers
        monkeypatch.setattr(bundle_module, "POOL_MIN_BYTES", 0)
    bundle = tmp_path / "partial.tar.gz"
    finished: list[str] = []
    ok: set[str] = set()

    def progress(event: CollectEvent) -> None:
        if event.kind != NODE_DONE:
            return
        finished.append(event.node)
        ok.update([event.node] if event.ok else [])
        if len(finished) == 5:
            raise KeyboardInterrupt

    healthy = [n for n in fleet.nodes if fleet.kind[n.name] == "healthy"]
    with pytest.raises(KeyboardInterrupt):
        collect(
            fleet.client,
            fleet.snapshot,
            healthy,
            shell_for=fleet.shell_for,
            out=bundle,
            since="6 hours ago",
            redactor=Redactor(enabled=True),
            concurrency=2,
            node_timeout=NODE_TIMEOUT,
            progress=progress,
        )
    manifest, names = _manifest(bundle)
    assert manifest["interrupted"] is True
    assert len(manifest["nodes"]) == len(healthy)
    done = [n for n, o in manifest["nodes"].items() if o["ok"]]
    # nodes that ended while Ctrl-C was handled are kept too (their archives were here)
    assert set(finished[:5]) <= set(done) == ok
    assert len(done) <= 5 + 2 + 2 * bundle_module.MAX_WORKERS
    for node in done:
        assert any(n.endswith(f"/nodes/{node}/kubelet.log") for n in names), node
    # the queued nodes were never started: Ctrl-C does not wait for the whole fleet
    stopped = ("not collected", CANCELLED)  # CANCELLED: SSM's CancelCommand reached it
    untouched = [o for o in manifest["nodes"].values() if o["error"] in stopped]
    # (all but those done and the two in flight at concurrency 2; how many more ended while
    # Ctrl-C was handled depends on the machine's speed, and is bounded above)
    assert len(untouched) >= len(healthy) - len(done) - 2
    # one command for them all, cancelled at Ctrl-C so SSM starts no more of them
    assert sum(1 for op, _ in fleet.ssm.requests if op == "SendCommand") == 1
    assert "CancelCommand" in fleet.ssm.calls
    assert fleet.ssm.peak_in_progress <= 2
