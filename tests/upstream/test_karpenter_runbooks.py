"""The runbooks run end to end through the real CLI (`python -m mignurse run … --yes`) against
real Karpenter v1.9.0 with its kwok provider (karpenter.py, docs/upstream.md), and every claim
the CLI prints is read back from the cluster here.

The tests run in file order on one cluster: the workload fixture makes Karpenter launch three
GPU nodes (`p5.48xlarge`, 8 GPUs each): `web`'s (a Deployment's pod, which needs a new node
when evicted), `seed`'s (a bare pod deleted later, leaving only a DaemonSet pod), and
`lonely`'s, whose kwok heartbeat is stopped at once so the node lifecycle controller marks it
`Ready=Unknown` and `diagnose` judges it, minutes later, on what the real controllers wrote.

A kwok node is a Node object with no machine behind it. The runbooks that run commands on
the node (`cordon-and-collect`, `reapply-mig-no-hooks`) reach it with `--transport ssh`, the
product's own SSH transport, through a real OpenSSH sshd on 127.0.0.1 whose login for that
node is a NodeSandbox built from the Node (nodeshells.py): the collector's and the MIG
runbook's real scripts run against the sandbox's journals and simulated GPU tools. The CLI's
`~/.ssh/config` maps each node's name to that sshd; the product is unchanged.

Karpenter's repair firing: the kwok provider's own policies are Ready False/Unknown for 10
minutes (kubernetes-sigs/karpenter v1.9.0 kwok/cloudprovider/cloudprovider.go RepairPolicies),
longer than the tier. The last test restarts Karpenter as its kwok main with the AWS provider's
policies (upstream/karpenter/awsrepair), AcceleratedHardwareReady's toleration shortened to
60 s and logged as such, and watches the real node health controller delete the node.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controlplane import free_port
from differ import Client
from karpenter import (
    DEPLOYMENT,
    FEATURE_GATES,
    INSTANCE_TYPE,
    KWOK_LABEL,
    NAMESPACE,
    KarpenterCluster,
    nodepool,
    wait_for,
)
from nodeaccess.sshd import running_sshd
from nodeshells import MigDevicePlugin, NodeShells
from runner.mighelpers import no_hooks_sequence

# The first test also starts the cluster and waits for Karpenter's three nodes; the last waits
# out node-not-ready's settle: more than the suite's 300 s hang guard on two busy cores.
pytestmark = pytest.mark.timeout(900)

# One GPU pod per node (hostname anti-affinity), each asking for one of the node's 8 GPUs.
APART = (
    "{podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: ["
    "{labelSelector: {matchLabels: {spread: one-per-node}}, topologyKey: kubernetes.io/hostname}]}}"
)
GPU_CONTAINERS = (
    "[{name: main, image: registry.k8s.io/pause:3.10, resources: {requests: "
    '{cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]'
)
POOL = "{karpenter.sh/nodepool: default}"
WORK = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: work}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: node-agent, namespace: work}}
spec:
  selector: {{matchLabels: {{app: node-agent}}}}
  template:
    metadata: {{labels: {{app: node-agent}}}}
    spec:
      nodeSelector: {POOL}
      tolerations: [{{operator: Exists}}]
      containers:
      - {{name: agent, image: registry.k8s.io/pause:3.10,
         resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: work}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web, spread: one-per-node}}}}
    spec: {{nodeSelector: {POOL}, affinity: {APART}, containers: {GPU_CONTAINERS}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: seed, namespace: work, labels: {{app: seed, spread: one-per-node}}}}
spec: {{nodeSelector: {POOL}, affinity: {APART}, containers: {GPU_CONTAINERS}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: lonely, namespace: work, labels: {{app: lonely, spread: one-per-node}}}}
spec: {{nodeSelector: {POOL}, affinity: {APART}, containers: {GPU_CONTAINERS}}}
"""


@dataclass
class Workload:
    web: str  # the node running web's pod
    seed: str  # the node running the bare pod `seed`
    lonely: str  # the node whose heartbeat is stopped


@dataclass
class Ran:
    code: int
    out: str  # stdout and stderr, as an engineer's terminal shows them
    stdout: str

    @property
    def run_id(self) -> str:
        found = re.search(r"^run ([0-9a-f]{8}): ", self.out, re.M)
        assert found, self.out
        return found.group(1)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, karpenter: KarpenterCluster) -> Path:
    """HOME of the CLI: its audit log and run state, and an SSH config that sends every node
    to a closed port of 127.0.0.1 (a kwok node has no machine to reach) until `shells` gives
    it a way in."""
    home = tmp_path_factory.mktemp("home")
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    # A port nothing listens on: bound, then closed.
    (ssh / "config").write_text(f"Host *\n  HostName 127.0.0.1\n  Port {free_port()}\n")
    return home


@pytest.fixture(scope="module")
def shells(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[NodeShells]:
    """The sshd on 127.0.0.1 that logs each added node into its NodeSandbox (nodeshells.py)."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield NodeShells(server, home, tmp_path_factory.mktemp("nodes"))


def mignurse(karpenter: KarpenterCluster, home: Path, *args: str) -> Ran:
    env = {
        **{k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"},  # keys: ~/.ssh/config
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "KUBECONFIG": str(karpenter.kubeconfig),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        ["nice", "-n", "19", sys.executable, "-m", "mignurse", *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Ran(done.returncode, done.stdout + done.stderr, done.stdout)


def node_of(karpenter: KarpenterCluster, pod: str) -> str:
    def bound() -> str:
        found = karpenter.get("pod", pod, "-n", "work")
        if not found or (found.get("status") or {}).get("phase") != "Running":
            return ""
        return str(found["spec"].get("nodeName") or "")

    return str(wait_for(f"pod work/{pod} running on a node", bound, 180))


def ready(node: dict[str, Any]) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return str(condition["status"])
    return ""


def claim_of(karpenter: KarpenterCluster, node: str) -> dict[str, Any] | None:
    for claim in karpenter.items("nodeclaims"):
        if (claim.get("status") or {}).get("nodeName") == node:
            return claim
    return None


@pytest.fixture(scope="module")
def workload(karpenter: KarpenterCluster) -> Workload:
    karpenter.kubectl("apply", "-f", "-", stdin=WORK)
    web_pod = wait_for(
        "web's pod",
        lambda: [
            p["metadata"]["name"] for p in karpenter.items("pods", "-n", "work", "-l", "app=web")
        ],
    )[0]
    found = Workload(
        node_of(karpenter, web_pod), node_of(karpenter, "seed"), node_of(karpenter, "lonely")
    )
    # Stop kwok's heartbeat for `lonely`'s node: kwok manages only the nodes its label
    # selector matches, and its Lease stops being renewed.
    karpenter.kubectl("label", "node", found.lonely, f"{KWOK_LABEL}-")
    return found


# -- cordon, uncordon ---------------------------------------------------------------------


def test_cordon_then_uncordon_a_karpenter_node(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    node = workload.seed
    ran = mignurse(karpenter, home, "run", "cordon", "--node", node, "--yes")
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert f"now: node {node} is Ready, cordoned by this run" in ran.out
    seen = karpenter.get("node", node)
    assert seen["spec"].get("unschedulable") is True
    holder = json.loads(seen["metadata"]["annotations"]["mignurse.io/cordoned-by"])
    assert holder["run"] == ran.run_id
    assert ready(seen) == "True"
    # The node lifecycle controller taints a cordoned node, as on EKS.
    wait_for(
        "the node.kubernetes.io/unschedulable taint",
        lambda: any(
            t["key"] == "node.kubernetes.io/unschedulable"
            for t in karpenter.get("node", node)["spec"].get("taints") or []
        ),
        60,
    )

    ran = mignurse(karpenter, home, "run", "uncordon", "--node", node, "--yes")
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert f"now: node {node} is Ready, schedulable" in ran.out
    seen = karpenter.get("node", node)
    assert not seen["spec"].get("unschedulable")
    assert "mignurse.io/cordoned-by" not in (seen["metadata"].get("annotations") or {})
    wait_for(
        "the unschedulable taint lifted",
        lambda: (
            not any(
                t["key"] == "node.kubernetes.io/unschedulable"
                for t in karpenter.get("node", node)["spec"].get("taints") or []
            )
        ),
        60,
    )


def test_cordon_and_collect_over_ssh_cordons_and_writes_a_bundle_diagnose_reads(
    karpenter: KarpenterCluster, workload: Workload, home: Path, shells: NodeShells
) -> None:
    node = workload.seed
    sandbox = shells.add(karpenter.get("node", node))
    bundle = home / "seed.tar.gz"
    ran = mignurse(
        karpenter, home, "run", "cordon-and-collect", "--node", node, "--yes",
        "--transport", "ssh", "--param", f"out={bundle}", "--param", "since=2h",
    )  # fmt: skip
    assert ran.code == 0, ran.out
    run_id = ran.run_id
    assert f"run {run_id}: succeeded" in ran.out
    assert f"  collect: verified: {bundle}" in ran.out
    assert f"  report: verified: {node}: cordoned, Ready=True; bundle {bundle}" in ran.out
    assert f"now: node {node} is Ready, cordoned by this run" in ran.out
    assert "Traceback" not in ran.out

    # Cordoned, as the runbook leaves it on success (its undo is for a failure only).
    seen = karpenter.get("node", node)
    assert seen["spec"].get("unschedulable") is True
    assert json.loads(seen["metadata"]["annotations"]["mignurse.io/cordoned-by"])["run"] == run_id
    assert ready(seen) == "True"
    assert "mignurse.io/lock" not in (seen["metadata"].get("annotations") or {})

    # The collector's script ran in the node's sandbox, over SSH, and changed nothing there.
    calls = [" ".join((c.command, *c.args)) for c in sandbox.calls()]
    assert any(c.startswith("journalctl") and "kubelet" in c for c in calls), calls
    assert any(c.startswith("nvidia-smi") for c in calls), calls
    assert not [c for c in calls if re.search(r"restart|daemon-reload|\bstop\b|\bstart\b", c)]

    # The bundle holds the node's journals as the sandbox served them, and reads back in
    # diagnose: the node's timeline has its kubelet and containerd journals.
    with tarfile.open(bundle) as archive:
        names = archive.getnames()
        member = next(n for n in names if n.endswith(f"nodes/{node}/kubelet.log"))
        journal = archive.extractfile(member)
        assert journal is not None
        text = journal.read().decode()
    assert f'"Successfully registered node" node="{node}"' in text
    assert any(n.endswith("cluster/nodes.json") for n in names), names
    opened = mignurse(karpenter, home, "diagnose", "--from", str(bundle), "--node", node,
                      "-o", "json")  # fmt: skip
    assert opened.code in (0, 1), opened.out
    report = json.loads(opened.stdout)
    assert report["layout"] == "mignurse"
    assert report["ruleErrors"] == []
    timeline = report["timeline"]
    kubelet = [e["text"] for e in timeline if e["source"] == "journal:kubelet"]
    assert any("Started kubelet.service" in t for t in kubelet), timeline
    assert any(e["source"] == "journal:containerd" for e in timeline), timeline
    assert any(e["source"] == "node" and "p5.48xlarge" in e["text"] for e in timeline), timeline

    # The engineer hands the node back: uncordon lifts this run's cordon.
    ran = mignurse(karpenter, home, "run", "uncordon", "--node", node, "--yes")
    assert ran.code == 0, ran.out
    assert f"now: node {node} is Ready, schedulable" in ran.out
    seen = karpenter.get("node", node)
    assert not seen["spec"].get("unschedulable")
    assert "mignurse.io/cordoned-by" not in (seen["metadata"].get("annotations") or {})


# -- pause and resume of node repair ------------------------------------------------------


def rolled_out(karpenter: KarpenterCluster) -> dict[str, Any]:
    deploy = karpenter.get("deployment", DEPLOYMENT, "-n", NAMESPACE)
    status = deploy.get("status") or {}
    assert status.get("observedGeneration") == deploy["metadata"]["generation"]
    assert status.get("updatedReplicas") == status.get("replicas") == 1
    assert status.get("availableReplicas") == 1
    return deploy


def running_controller_gates(karpenter: KarpenterCluster) -> list[str]:
    pods = karpenter.items("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=karpenter")
    gates = []
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
            continue
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
        gates.append(str(env.get("FEATURE_GATES")))
    return gates


def health_controller_running(karpenter: KarpenterCluster) -> tuple[bool, bool]:
    """Whether the Karpenter process now running started its `node.health` controller, by
    its own log and by its metrics (controller-runtime's per-controller series)."""
    wait_for(
        "the restarted Karpenter started its controllers",
        lambda: '"controller":"nodeclaim.lifecycle"' in karpenter.karpenter_log(),
        120,
    )
    log = karpenter.karpenter_log()
    in_log = '"message":"Starting Controller","controller":"node.health"' in log
    metrics = karpenter.karpenter_metrics()
    in_metrics = 'controller_runtime_reconcile_total{controller="node.health"' in metrics
    return in_log, in_metrics


def test_pause_node_repair_restarts_karpenter_without_its_health_controller(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    assert health_controller_running(karpenter) == (True, True)

    ran = mignurse(karpenter, home, "run", "pause-node-repair", "--yes")
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert "pause: verified" in ran.out
    assert re.search(r"now: node repair is paused by this run since \S+Z", ran.out), ran.out

    paused = FEATURE_GATES.replace("NodeRepair=true", "NodeRepair=false")
    assert karpenter.deployment_env()["FEATURE_GATES"] == paused
    deploy = rolled_out(karpenter)
    record = json.loads(deploy["metadata"]["annotations"]["mignurse.io/node-repair-paused"])
    assert record["run"] == ran.run_id
    assert record["settings"][0]["prior"] == FEATURE_GATES
    assert running_controller_gates(karpenter) == [paused]

    # No kubelet runs the real controller: restart it with the Deployment's settings.
    karpenter.restart_karpenter()
    assert health_controller_running(karpenter) == (False, False)


def test_resume_node_repair_restarts_karpenter_with_its_health_controller(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    ran = mignurse(karpenter, home, "run", "resume-node-repair", "--yes")
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert "resume: verified" in ran.out

    assert karpenter.deployment_env()["FEATURE_GATES"] == FEATURE_GATES
    deploy = rolled_out(karpenter)
    assert "mignurse.io/node-repair-paused" not in (deploy["metadata"].get("annotations") or {})
    assert running_controller_gates(karpenter) == [FEATURE_GATES]

    karpenter.restart_karpenter()
    assert health_controller_running(karpenter) == (True, True)


# -- replace-instance ---------------------------------------------------------------------


def test_replace_instance_held_by_a_pdb_then_resumed_replaces_the_node(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    node = workload.web
    old_claim = claim_of(karpenter, node)
    assert old_claim is not None
    karpenter.kubectl(
        "create", "pdb", "web", "-n", "work", "--selector=app=web", "--min-available=1"
    )
    wait_for(
        "the disruption controller's status of PDB work/web",
        lambda: (karpenter.get("pdb", "web", "-n", "work").get("status") or {}).get(
            "observedGeneration"
        ),
        60,
    )
    args = ("--param", "collect=false", "--param", "settle=10s", "--param", "wait=5m")
    ran = mignurse(
        karpenter, home, "run", "replace-instance", "--node", node, "--yes",
        "--param", "drain_timeout=15s", *args,
    )  # fmt: skip
    assert ran.code != 0, ran.out
    run_id = ran.run_id
    assert "drain: 1 pod(s) refused by their disruption budget" in ran.out
    assert re.search(
        rf"run {run_id}: failed: step drain failed: drain of {node} timed out after 15 s: "
        r"1 pod\(s\) left: work/web-\S+ \(PDB work/web \(allows 0 disruption\(s\) now\)\)",
        ran.out,
    ), ran.out
    assert f"now: node {node} is Ready, cordoned by this run" in ran.out

    # The real server's answer to that eviction: 429, the PDB named.
    pod = karpenter.items("pods", "-n", "work", "-l", "app=web")[0]["metadata"]["name"]
    client = Client(karpenter.plane.url, karpenter.plane.ssl_context())
    refused = client.request(
        "POST",
        f"/api/v1/namespaces/work/pods/{pod}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}},
    )
    assert refused.status == 429
    assert refused.body["reason"] == "TooManyRequests"
    assert refused.body["message"] == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    causes = refused.body["details"]["causes"]
    assert causes[0]["reason"] == "DisruptionBudget"
    assert causes[0]["message"].startswith("The disruption budget web needs 1 healthy pods")

    seen = karpenter.get("node", node)
    assert seen["spec"].get("unschedulable") is True
    assert json.loads(seen["metadata"]["annotations"]["mignurse.io/cordoned-by"])["run"] == run_id
    claim = karpenter.get("nodeclaim", old_claim["metadata"]["name"])
    assert claim is not None and not claim["metadata"].get("deletionTimestamp")
    assert karpenter.get("pod", pod, "-n", "work")["spec"]["nodeName"] == node

    # The engineer relaxes the budget and resumes the run.
    karpenter.kubectl("delete", "pdb", "web", "-n", "work")
    ran = mignurse(karpenter, home, "run", "--resume", run_id, "--yes")
    assert ran.code == 0, ran.out
    assert f"run {run_id}: succeeded" in ran.out
    assert f"drain: evicted work/{pod}" in ran.out
    assert f"now: node {node} no longer exists" in ran.out
    found = re.search(
        r"wait-replacement: verified: replacement (\S+) stayed Ready with its GPUs advertised: "
        r"served for \d+ s of cluster time",
        ran.out,
    )
    assert found, ran.out
    new = found.group(1)

    assert karpenter.get("node", node) is None
    assert karpenter.get("nodeclaim", old_claim["metadata"]["name"]) is None
    replacement = karpenter.get("node", new)
    assert ready(replacement) == "True"
    assert replacement["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert replacement["metadata"]["labels"]["node.kubernetes.io/instance-type"] == INSTANCE_TYPE
    assert replacement["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    new_claim = claim_of(karpenter, new)
    assert new_claim is not None
    conditions = {c["type"]: c["status"] for c in new_claim["status"]["conditions"]}
    assert conditions["Initialized"] == "True"
    assert (
        node_of(
            karpenter, karpenter.items("pods", "-n", "work", "-l", "app=web")[0]["metadata"]["name"]
        )
        == new
    )
    workload.web = new


def test_replace_instance_of_a_node_with_only_a_daemonset_pod_expects_no_replacement(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    node = workload.seed
    karpenter.kubectl("delete", "pod", "seed", "-n", "work", "--wait=true")
    claim = claim_of(karpenter, node)
    assert claim is not None
    before = {c["metadata"]["name"] for c in karpenter.items("nodeclaims")}

    ran = mignurse(
        karpenter, home, "run", "replace-instance", "--node", node, "--yes",
        "--param", "collect=false", "--param", "settle=10s", "--param", "wait=3m",
    )  # fmt: skip
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert (
        f"wait-replacement: verified: none expected: no pod on {node} needs a new node "
        "(1 DaemonSet pod)"
    ) in ran.out
    assert f"now: node {node} no longer exists" in ran.out
    assert karpenter.get("node", node) is None
    assert karpenter.get("nodeclaim", claim["metadata"]["name"]) is None

    # Karpenter batches pending pods for up to 10 s (BATCH_MAX_DURATION); none needs a node.
    time.sleep(15)
    after = {c["metadata"]["name"] for c in karpenter.items("nodeclaims")}
    assert after <= before - {claim["metadata"]["name"]}

    # Real Karpenter's "Finalized" event for a claim that is already gone names no object:
    # awslabs/operatorpkg status/controller.go records it on the empty object it failed to
    # get (the version Karpenter v1.9.0's go.mod pins), so no diagnosis can tie it to a claim.
    finalized = [
        e
        for e in karpenter.items("events", "-n", "default", "--field-selector=reason=Finalized")
        if e["involvedObject"].get("kind") == "NodeClaim"
    ]
    assert finalized, "no Finalized event for a NodeClaim"
    assert {e["message"] for e in finalized} == {"Finalized karpenter.sh/termination"}
    assert not any(e["involvedObject"].get("name") for e in finalized)


# -- diagnose on what real Karpenter and the controllers wrote ----------------------------


def test_reapply_mig_without_hooks_partitions_a_kwok_gpu_node_over_ssh(
    karpenter: KarpenterCluster, workload: Workload, home: Path, shells: NodeShells
) -> None:
    """reapply-mig-no-hooks on web's node: mig-parted and nvidia-smi run in the node's
    sandbox over SSH, the labels go through the real API server, web's pod is evicted (its
    Deployment's new pod makes Karpenter launch another node), and the device plugin's part
    (MigDevicePlugin) advertises what the sandbox's GPUs then hold."""
    node = workload.web
    sandbox = shells.add(karpenter.get("node", node))
    pod = karpenter.items("pods", "-n", "work", "-l", "app=web")[0]["metadata"]["name"]
    plugin = MigDevicePlugin(
        node,
        sandbox,
        get=lambda: karpenter.get("node", node),
        patch_status=lambda body: karpenter.kubectl(
            "patch", "node", node, "--subresource=status", "--type=merge", "-p", body
        ),
    )
    with plugin:
        ran = mignurse(
            karpenter, home, "run", "reapply-mig-no-hooks", "--node", node, "--yes",
            "--transport", "ssh", "--param", "config=all-1g.10gb", "--param", "settle=10s",
            "--param", "drain_timeout=2m", "--param", "allocatable_timeout=3m",
        )  # fmt: skip
    assert ran.code == 0, ran.out
    assert f"run {ran.run_id}: succeeded" in ran.out
    assert "Traceback" not in ran.out
    assert f"drain-gpu-pods: evicted work/{pod}" in ran.out
    assert f"now: node {node} is Ready, schedulable" in ran.out

    # The sandbox's GPUs: MIG on, 7×1g.10gb on each of the 8 H100s.
    gpus = sandbox.mig_state()["gpus"]
    assert len(gpus) == 8
    for gpu in gpus:
        assert gpu["current"] == gpu["pending"] == "Enabled"
        assert [i["profile"] for i in gpu["instances"]] == ["1g.10gb"] * 7
    assert plugin.restarted
    assert plugin.advertised == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}

    # Read back from the cluster: labels, allocatable, no cordon, no lock, Ready.
    seen = karpenter.get("node", node)
    labels = seen["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert labels["nvidia.com/mig.config.state"] == "success"
    assert labels["nvidia.com/gpu.deploy.mig-manager"] == "false"  # mignurse the only writer
    assert seen["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    assert seen["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert not seen["spec"].get("unschedulable")
    annotations = seen["metadata"].get("annotations") or {}
    assert "mignurse.io/cordoned-by" not in annotations
    assert "mignurse.io/lock" not in annotations
    assert "karpenter.sh/do-not-disrupt" not in annotations  # held for the run, then lifted
    assert "hold-disruption: verified" in ran.out and "release-disruption: verified" in ran.out
    assert ready(seen) == "True"
    assert karpenter.get("pod", pod, "-n", "work") is None

    # No hook ran, and nothing restarted kubelet or containerd or reloaded systemd: the
    # sandbox's systemctl records every call, and only read-only questions were asked.
    systemctl = [c.args for c in sandbox.calls() if c.command == "systemctl"]
    assert systemctl, "the preflight asks systemctl about a host nvidia-mig-manager.service"
    assert {args[0] for args in systemctl} <= {"is-active", "is-enabled"}, systemctl
    # mig-parted's sequence (docs/mig.md), with no hooks file in its environment and an
    # empty one named: the node's profile.d MIG_PARTED_HOOKS_FILE was unset.
    root = str(sandbox.fs)
    runs = sandbox.mig_parted_runs()
    assert [r["argv"] for r in runs] == no_hooks_sequence(root, "all-1g.10gb"), runs
    assert [r["rc"] for r in runs] == [1, 0, 0, 0, 0, 0]
    assert all(r["hooksFileEnv"] is None and not r["hooksRun"] for r in runs), runs
    workload.web = node_of(
        karpenter, karpenter.items("pods", "-n", "work", "-l", "app=web")[0]["metadata"]["name"]
    )
    assert workload.web != node


def test_diagnose_reads_the_node_lifecycle_controller_and_karpenter_on_a_silent_node(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    node = workload.lonely

    def unknown_since() -> datetime | None:
        for condition in karpenter.get("node", node)["status"]["conditions"]:
            if condition["type"] == "Ready" and condition["status"] == "Unknown":
                return datetime.fromisoformat(condition["lastTransitionTime"])
        return None

    since = wait_for(f"{node} Ready=Unknown once kwok stopped its heartbeat", unknown_since, 180)
    # node-not-ready waits out 2 minutes of NotReady (a blip) before it speaks.
    settle = since + timedelta(minutes=2, seconds=5) - datetime.now(UTC)
    time.sleep(max(0.0, settle.total_seconds()))

    ran = mignurse(karpenter, home, "diagnose", "-o", "json")
    assert ran.code in (0, 1), ran.out
    report = json.loads(ran.stdout)
    assert report["ruleErrors"] == []
    by_id = {f["id"]: f for f in report["findings"]}
    # Nothing else: Karpenter's DisruptionBlocked and Unconsolidatable events and its condition
    # transitions are no finding of their own. The runbook's two replacements in this pool
    # are churn only where both gone NodeClaims are still told by their events when diagnose
    # runs (Karpenter's events on them come and go with its timing): then an INFO of manual
    # deletions, never more.
    churn = by_id.pop("replacement-churn", None)
    assert sorted(by_id) == ["node-not-ready", "repair-risk"], report["findings"]
    if churn is not None:
        assert churn["severity"] == "info", churn
        assert "2 nodes replaced" in churn["summary"], churn
        others = ("repair", "consolidation", "drift", "interruption", "registration", "expir",
                  "gone outside")  # fmt: skip
        assert not [w for w in others if w in churn["summary"]], churn

    silent = by_id["node-not-ready"]
    assert silent["nodepool"] == "default"
    assert silent["nodes"] == [node]
    assert f"{node} Ready=Unknown for " in silent["summary"]
    assert "the kubelet stopped posting status" in silent["summary"]
    texts = [e["text"] for e in silent["evidence"]]
    assert any(f"Node {node}: Ready=Unknown NodeStatusUnknown" in t for t in texts), texts
    # The node lifecycle controller's event, as kube-controller-manager v1.34.4 words it.
    assert any(f"Node {node} status is now: NodeNotReady" in t for t in texts), texts
    # mignurse reads the AWS provider's policy (Ready Unknown: 30 min); the kwok provider
    # repairs after 10 min (docs/simulator-fidelity.md).
    deadline = datetime.fromisoformat(silent["deadline"])
    assert deadline == since + timedelta(minutes=30)

    risk = by_id["repair-risk"]
    assert "1 node(s) match a repair policy now" in risk["summary"]
    assert any("NodeRepair=true" in e["text"] for e in risk["evidence"])


# -- Karpenter's node repair, with the AWS provider's policies ----------------------------

REPAIR_POOL = f"""{nodepool("repair")}
---
apiVersion: v1
kind: Pod
metadata: {{name: hw, namespace: work, labels: {{app: hw}}}}
spec: {{nodeSelector: {{karpenter.sh/nodepool: repair}}, containers: {GPU_CONTAINERS}}}
"""
# The AWS provider's toleration for AcceleratedHardwareReady=False, which mignurse predicts
# with (aws/karpenter-provider-aws v1.9.0 pkg/cloudprovider/cloudprovider.go RepairPolicies),
# and the one the tier's Karpenter runs with: REPAIR_TOLERATIONS shortens it, and says so in
# its log (upstream/karpenter/awsrepair/main.go).
AWS_TOLERATION = timedelta(minutes=10)
TIER_TOLERATION = timedelta(seconds=60)


def test_karpenter_repairs_a_node_whose_gpu_the_agent_reports_unhealthy(
    karpenter: KarpenterCluster, workload: Workload, home: Path
) -> None:
    """Real Karpenter's node health controller, with the AWS provider's repair policies,
    deletes a GPU node `AcceleratedHardwareReady=False` once the toleration has passed;
    `diagnose` and `radar` named the repair beforehand. Its own NodePool, so that the 20%
    guard (one unhealthy node of one) lets it through beside `lonely`'s NotReady node."""
    karpenter.program = karpenter.extra.awsrepair
    karpenter.program_env = {
        "REPAIR_TOLERATIONS": f"AcceleratedHardwareReady={TIER_TOLERATION.seconds}s"
    }
    karpenter.restart_karpenter()
    log = karpenter.karpenter_log()
    assert (
        '"condition":"AcceleratedHardwareReady","status":"False","toleration":"1m0s",'
        '"source":"REPAIR_TOLERATIONS, not the AWS provider\'s"'
    ) in log, log[-3000:]
    assert '"condition":"Ready","status":"Unknown","toleration":"30m0s"' in log

    karpenter.kubectl("apply", "-f", "-", stdin=REPAIR_POOL)
    node = node_of(karpenter, "hw")
    claim = claim_of(karpenter, node)
    assert claim is not None and claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "repair"

    # The node monitoring agent's verdict, written by the test in its place: the condition
    # type and a Fatal reason as the agent names them (docs/repair.md); the message is ours.
    since = datetime.now(UTC).replace(microsecond=0)
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "AcceleratedHardwareReady",
        "status": "False",
        "reason": "NvidiaXID79Error",
        "message": "written by the upstream tier in the node monitoring agent's place",
        "lastTransitionTime": stamp,
        "lastHeartbeatTime": stamp,
    }
    karpenter.kubectl(
        "patch", "node", node, "--subresource=status", "--type=strategic",
        "-p", json.dumps({"status": {"conditions": [condition]}}),
    )  # fmt: skip

    def unhealthy() -> bool:
        seen = karpenter.get("node", node) or {}
        return any(
            c["type"] == "AcceleratedHardwareReady" and c["status"] == "False"
            for c in (seen.get("status") or {}).get("conditions") or []
        )

    assert unhealthy()

    # mignurse predicts the repair with the AWS provider's toleration (10 minutes), as it
    # would on EKS; the tier's Karpenter was told to act after one.
    ran = mignurse(karpenter, home, "diagnose", "-o", "json")
    report = json.loads(ran.stdout)
    hardware = [
        f
        for f in report["findings"]
        if f["id"] == "accelerated-hardware-not-ready" and node in f["nodes"]
    ]
    assert hardware, report["findings"]
    assert datetime.fromisoformat(hardware[0]["deadline"]) == since + AWS_TOLERATION
    ran = mignurse(karpenter, home, "radar", "-o", "json")
    rows = [r for r in json.loads(ran.stdout)["nodes"] if r["node"] == node]
    assert len(rows) == 1, ran.out
    assert rows[0]["condition"] == "AcceleratedHardwareReady=False"
    assert rows[0]["state"] == "fires"
    assert datetime.fromisoformat(rows[0]["due"]) == since + AWS_TOLERATION

    # Real Karpenter deletes the NodeClaim once the toleration has passed, not before.
    name = claim["metadata"]["name"]

    def deleting() -> str:
        found = karpenter.get("nodeclaim", name)
        if found is None:
            return "gone"
        return str(found["metadata"].get("deletionTimestamp") or "")

    assert unhealthy()
    when = wait_for(f"Karpenter's repair of {node}", deleting, 240)
    if when != "gone":
        assert datetime.fromisoformat(when) >= since + TIER_TOLERATION
    assert '"message":"deleting unhealthy node"' in karpenter.karpenter_log()
    disrupted = [
        line
        for line in karpenter.karpenter_metrics().splitlines()
        if line.startswith("karpenter_nodeclaims_disrupted_total{")
        and 'reason="unhealthy"' in line
        and 'nodepool="repair"' in line
    ]
    assert [line.rsplit(" ", 1)[1] for line in disrupted] == ["1"], disrupted
    wait_for(f"{node} and its NodeClaim gone", lambda: karpenter.get("node", node) is None, 180)
    assert karpenter.get("nodeclaim", name) is None
