"""Shipped scenarios load, serve, and broken ones fail with file and line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client
from simhelpers import kube

from mignurse.sim import ScenarioError, SimCluster, list_scenarios, load_scenario

SMALL = [name for name, _ in list_scenarios() if name != "scale-5000"]


def test_shipped_scenarios_are_listed_with_descriptions() -> None:
    names = dict(list_scenarios())
    assert {"dcgm-repair-loop", "mig-hook-notready", "healthy", "scale-5000"} <= set(names)
    assert all(desc and "\n" not in desc for desc in names.values())


@pytest.mark.parametrize("name", SMALL)
def test_every_shipped_scenario_loads_and_serves(
    name: str, make_sim: Callable[..., SimCluster]
) -> None:
    sim = make_sim(name)
    v1 = client.CoreV1Api(kube(sim))
    nodes = v1.list_node().items
    assert nodes
    assert sim.kubeconfig()["current-context"] == f"sim-{name}"
    assert v1.list_pod_for_all_namespaces(limit=5).items
    sim.advance(120)
    assert v1.list_node().items


def test_healthy_has_a_managed_node_group_and_calm_nodes(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("healthy")
    nodes = sim.objects("nodes")
    mng = [n for n in nodes if "eks.amazonaws.com/nodegroup" in n["metadata"]["labels"]]
    groups = Counter(n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] for n in mng)
    assert groups == {"ng-gpu-l4": 3, "general": 3}
    assert all("karpenter.sh/nodepool" not in n["metadata"]["labels"] for n in mng)
    assert len(sim.objects("nodeclaims")) == len(nodes) - len(mng)
    # Karpenter's chart keeps its controller off the nodes it manages.
    karpenter = [p for p in sim.objects("pods") if p["metadata"]["name"].startswith("karpenter-")]
    general = {n["metadata"]["name"] for n in mng if "general" in str(n["metadata"]["labels"])}
    assert len(karpenter) == 2 and {p["spec"]["nodeName"] for p in karpenter} <= general
    for n in nodes:
        conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
        assert conds["Ready"] == "True"
        assert conds.get("AcceleratedHardwareReady", "True") == "True"


BROKEN = """name: broken
karpenter: {version: 1.4.0}
nodePools:
  - name: gpu
    instanceType: p5.48xlarge
    nodes: 1
    lifecycle:
      - after: 90s
        condition: {type: AcceleratedHardwareReady, status: Maybe}
"""


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (BROKEN, 9, "status must be True, False or Unknown"),
        (
            BROKEN.replace("instanceType: p5.48xlarge", "instanceType: p9.huge"),
            5,
            "unknown instanceType 'p9.huge'",
        ),
        (
            BROKEN.replace("    nodes: 1\n", "    nodes: 1\n    replicaz: 3\n"),
            7,
            "unknown field 'replicaz'",
        ),
        (BROKEN.replace("after: 90s", "after: soon"), 8, "not a duration"),
        (BROKEN.replace("nodes: 1", "nodes: [1"), 7, "invalid YAML"),
        (
            BROKEN.replace(
                "    instanceType: p5.48xlarge\n",
                "    instanceType: p5.48xlarge\n    mig: {config: all-1g.5gb}\n",
            ),
            6,
            "not valid for NVIDIA-H100-80GB-HBM3",
        ),
    ],
)
def test_broken_scenario_names_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message
    assert "\n" not in message


def test_unknown_scenario_name() -> None:
    with pytest.raises(ScenarioError, match="no such scenario"):
        load_scenario("does-not-exist")


@pytest.mark.deep
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("scale-5000")
def test_scale_5000_has_the_promised_counts(scale_5000: SimCluster) -> None:
    sim = scale_5000
    nodes = sim.store.count("nodes")
    gpu = sum(
        1
        for n in sim.objects("nodeclaims")
        if "karpenter.k8s.aws/instance-gpu-count" in n["metadata"]["labels"]
    )
    # Karpenter has started replacing the pods of nodes whose kubelet died (a few dozen)
    assert 5000 <= gpu <= 5100 and 5300 <= nodes <= 5400
    pods = sim.store.count("pods")
    assert pods >= 5000  # one per GPU node, plus Karpenter's two
    assert (
        len({c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in sim.objects("nodeclaims")})
        == 21  # 20 GPU NodePools and cpu-batch; cpu-general is the node group Karpenter runs on
    )
    assert sim.store.count("events") >= 95000
    node = sim.objects("nodes")[0]
    assert 30 <= len(node["status"]["images"]) <= 50
    unhealthy = sum(
        1
        for n in sim.objects("nodes")
        if any(
            c["type"] in ("Ready", "AcceleratedHardwareReady") and c["status"] != "True"
            for c in n["status"]["conditions"]
        )
    )
    assert 50 <= unhealthy <= 400
