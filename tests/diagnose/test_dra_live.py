"""The reported DRA environment end to end, through the real kubernetes client against the
simulator: EKS 1.34, g7e.4xlarge with all-1g.24gb, the NVIDIA DRA driver publishing the MIG
devices as ResourceSlices. The healthy twin is calm; the mig-manager incident is named live
(and, once the node's files are collected, as the kubelet restart it is), from a bundle, and
from the node's own files."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.cluster.client import NODES, ClusterClient
from mignurse.collect.access import Access
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.sources import load_offline
from mignurse.nodeaccess.local import LocalShell
from mignurse.nodeaccess.script import collector_script
from mignurse.nodeview import node_rows
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import NodeSandbox, sandbox_shells, story_for

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

LOUD = ("warning", "critical")


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def failed_node(sim: SimCluster) -> dict[str, Any]:
    return next(
        n
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    )


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)


def test_the_healthy_twin_is_calm_and_every_gpu_node_is_reported_as_dra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimCluster(load_scenario("mig-dra-healthy"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        code, listed = run_json(capsys, "--kubeconfig", kubeconfig, "nodes")
        assert code == 0
        diagnosed, document = run_json(capsys, "--kubeconfig", kubeconfig, "diagnose")

    gpu_nodes = [n for n in listed["nodes"] if n["instanceType"] != "m7i.2xlarge"]
    assert len(gpu_nodes) == 7  # three g7e.4xlarge, four p4d.24xlarge
    for node in gpu_nodes:
        assert node["gpu"]["source"] == "dra" and node["gpu"]["allocatable"] == {}
        assert node["gpu"]["dra"]["complete"] is True
    slices = {n["instanceType"]: n["mig"]["slices"] for n in gpu_nodes}
    assert slices == {"g7e.4xlarge": {"1g.24gb": 4}, "p4d.24xlarge": {"1g.5gb": 56}}
    # The fleet that paged four times CRITICAL before DRA was read raises nothing now.
    assert diagnosed == 0
    assert [f for f in document["findings"] if f["severity"] in LOUD] == []


def test_a_dra_node_asked_for_another_layout_than_it_publishes_is_a_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimCluster(load_scenario("mig-dra-healthy"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        node = next(
            n["metadata"]["name"]
            for n in sim.objects("nodes")
            if n["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "g7e.4xlarge"
        )
        client = ClusterClient.connect(kubeconfig=kubeconfig)
        label = {"nvidia.com/mig.config": "all-2g.48gb"}
        client.patch(NODES, node, {"metadata": {"labels": label}})
        client.close()
        code, document = run_json(capsys, "--kubeconfig", kubeconfig, "diagnose")

    assert code == 1
    (mismatch,) = [f for f in document["findings"] if f["severity"] in LOUD]
    assert mismatch["id"] == "mig-layout-mismatch" and mismatch["nodes"] == [node]
    assert (
        "GPU 0: publishes MIG devices 4×1g.24gb, all-2g.48gb asks 2×2g.48gb"
        in (mismatch["summary"])
    )
    assert document["gpuSources"] == {node: "dra"}


def test_the_dra_incident_live_is_named_and_collected_in_the_app_it_is_the_kubelet_restart(
    tmp_path: Path,
) -> None:
    with SimCluster(load_scenario("mig-dra-hook-notready"), speed=0) as sim:
        node = failed_node(sim)["metadata"]["name"]
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        source = LiveSource(
            client,
            simulated="mig-dra-hook-notready ×0",
            clock=sim.now,
            bundle_dir=tmp_path,
            access=SIM_ACCESS,
        )
        try:
            source.check()
            source.start(lambda status: None)
            wait_for(source.synced)
            wait_for(lambda: bool(source.state.snapshot().dra_devices))

            live, _pools = source.assess()
            named = {f.id: f for f in live.findings if node in f.nodes}
            assert "suspect MIG reconfiguration" in named["notready-loop"].summary
            assert named["mig-config-failed"].severity == "critical"
            rows = {r.name: r for r in node_rows(source.state.snapshot(), sim.now())}
            assert rows[node].gpu == "dra 1 GPU"
            assert rows[node].mig == "all-1g.24gb failed · no MIG"
            siblings = [r for name, r in rows.items() if name != node and r.pool == rows[node].pool]
            assert {r.mig for r in siblings} == {"all-1g.24gb success · 4×1g.24gb"}

            source.collect_nodes([node], lambda name, word: None)
            collected, _pools = source.assess()
        finally:
            source.stop()

    ids = {f.id for f in collected.findings if node in f.nodes}
    assert "mig-hook-kubelet-restart" in ids and "notready-loop" not in ids


def test_the_dra_incident_bundle_names_the_kubelet_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    with SimCluster(load_scenario("mig-dra-hook-notready"), speed=0) as sim:
        node = failed_node(sim)["metadata"]["name"]
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        code = main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", str(bundle)])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()

    with tarfile.open(bundle) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        top = tar.getnames()[0].split("/", 1)[0]
        raw = tar.extractfile(f"{top}/cluster/resourceslices.json").read()  # type: ignore[union-attr]
    assert {"cluster/resourceslices.json", "cluster/resourceclaims.json"} <= names
    slices = json.loads(raw)
    assert {i["apiVersion"] for i in slices["items"]} == {"resource.k8s.io/v1"}

    code, document = run_json(capsys, "diagnose", "--from", str(bundle))
    assert code == 2
    restart = [f for f in document["findings"] if f["id"] == "mig-hook-kubelet-restart"]
    assert restart and restart[0]["nodes"] == [node]
    assert document["gpuSources"][node] == "dra"
    # The healthy siblings publish their layout: nothing about them.
    assert {n for f in document["findings"] if f["severity"] in LOUD for n in f["nodes"]} == {node}


def test_the_dra_incident_from_the_nodes_own_files(tmp_path: Path) -> None:
    """The collector run on the node itself (its sandbox), its files beside the Node."""
    sim = SimCluster(load_scenario("mig-dra-hook-notready"), speed=0)
    nodes = sim.objects("nodes")
    node_json = failed_node(sim)
    sandbox = NodeSandbox.for_node(tmp_path / "sbx", node_json, story=story_for(node_json))
    runner = LocalShell(sandbox.node, env=sandbox.env, path_prefix=sandbox.path_prefix)
    sink = io.BytesIO()
    assert runner.run(collector_script(), timeout=30, stdout=sink).ok

    folder = tmp_path / "bundle"
    (folder / "cluster").mkdir(parents=True)
    (folder / "cluster/nodes.json").write_text(json.dumps({"kind": "List", "items": nodes}))
    with tarfile.open(fileobj=io.BytesIO(sink.getvalue())) as tar:
        tar.extractall(tmp_path / "staged", filter="data")
    (folder / "nodes").mkdir()
    shutil.move(tmp_path / "staged" / "node", folder / "nodes" / sandbox.node)

    gathered = load_offline(folder)
    evidence = gathered.node_evidence[sandbox.node]
    assert evidence.cgroup is not None and evidence.cgroup.version == 2
    created = gathered.snapshot.nodes[sandbox.node].created
    assert created is not None
    found = diagnose(gathered.to_input(created + timedelta(minutes=20))).findings
    assert any(f.id == "mig-hook-kubelet-restart" and f.nodes == (sandbox.node,) for f in found), [
        f.id for f in found
    ]
