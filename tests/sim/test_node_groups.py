"""Managed node groups repair like EKS managed node groups.

Expected behaviour: EKS user guide node-repair.adoc, node-health.adoc, node-health-nma.adoc
(awsdocs/amazon-eks-user-guide latest/ug/nodes/); shapes: EKS API API_NodeRepairConfig,
API_NodeRepairConfigOverrides and the Nodegroup shape (botocore data/eks/2017-11-01);
events: kubernetes pkg/kubelet/kubelet_node_status.go (NodeNotSchedulable),
pkg/kubelet/nodestatus/setters.go (Rebooted), pkg/controller/nodelifecycle (RemovingNode,
NodeNotReady), staging/src/k8s.io/cloud-provider/controllers/nodelifecycle (DeletingNode).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventlog import condition, events, find
from simhelpers import Http

from mignurse.sim import ScenarioError, SimCluster, load_scenario
from mignurse.sim.scenario import parse_scenario, scenario_path

GROUP = "ng-gpu-inference"


def group_nodes(sim: SimCluster, group: str = GROUP) -> list[dict[str, Any]]:
    return [
        n
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("eks.amazonaws.com/nodegroup") == group
    ]


def failing_dcgm(sim: SimCluster) -> dict[str, Any]:
    """The group's node whose DCGMError is newest."""
    broken = [
        n
        for n in group_nodes(sim)
        if (condition(n, "AcceleratedHardwareReady") or {}).get("reason") == "DCGMError"
    ]
    return max(broken, key=lambda n: condition(n, "AcceleratedHardwareReady")["lastTransitionTime"])  # type: ignore[index]


def test_the_dcgm_loop_cordons_then_replaces_through_the_auto_scaling_group(
    make_sim: Callable[..., SimCluster], http_for: Callable[[SimCluster], Http]
) -> None:
    sim = make_sim("mng-dcgm-repair-loop")
    victim = failing_dcgm(sim)
    name = victim["metadata"]["name"]
    names_before = {n["metadata"]["name"] for n in group_nodes(sim)}
    sim.advance(11 * 60)  # the 10-minute override, the termination, the cloud controller
    assert find(sim, "nodes", name) is None
    seen = [
        (e["reason"], e["source"].get("component"))
        for e in events(sim, kind="Node", name=name)
        if e["reason"] in ("NodeNotSchedulable", "NodeNotReady", "DeletingNode", "RemovingNode")
    ]
    assert seen == [
        ("NodeNotSchedulable", "kubelet"),
        ("NodeNotReady", "node-controller"),
        ("DeletingNode", "cloud-node-lifecycle-controller"),
        ("RemovingNode", "node-controller"),
    ]
    cordoned = events(sim, reason="NodeNotSchedulable", name=name)[0]
    assert cordoned["message"] == f"Node {name} status is now: NodeNotSchedulable"
    assert cordoned["source"]["host"] == name
    assert cordoned["involvedObject"]["uid"] == name  # kubelet's nodeRef
    # The replacement registers under a new name; the group keeps its size.
    after = {n["metadata"]["name"] for n in group_nodes(sim)}
    assert len(after) == 3 and after - names_before
    # No Karpenter in this cluster: no NodeClaims API, no karpenter events.
    assert http_for(sim).get("/apis/karpenter.sh/v1/nodeclaims")[0] == 404
    assert not events(sim, component="karpenter")


def test_dcgm_errors_take_no_action_by_default(
    make_sim: Callable[..., SimCluster], tmp_path: Path
) -> None:
    text = scenario_path("mng-dcgm-repair-loop").read_text()
    start = text.index("      nodeRepairConfigOverrides:")
    end = text.index("          repairAction: Replace\n") + len("          repairAction: Replace\n")
    path = tmp_path / "default.yaml"
    path.write_text(text[:start] + text[end:])
    sim = make_sim(load_scenario(str(path)))
    before = {n["metadata"]["name"] for n in group_nodes(sim)}
    sim.advance(25 * 60)
    assert {n["metadata"]["name"] for n in group_nodes(sim)} == before
    assert not [n for n in group_nodes(sim) if n["spec"].get("unschedulable")]
    assert not events(sim, reason="DeletingNode")


REBOOT = """
name: reboot
seed: 5
nodeGroups:
  - name: ng-gpu
    instanceType: g6.xlarge
    nodes: {nodes}
    nodeRepairConfig: {config}
    existing:
      - count: {nodes}
        age: 3d
        names: [{names}]
timeline:
{timeline}
"""


def group_scenario(
    make_sim: Callable[..., SimCluster],
    *,
    nodes: int,
    reasons: list[str],
    config: str = "{enabled: true}",
) -> tuple[SimCluster, list[str]]:
    names = [f"ip-10-0-1-{i}.us-west-2.compute.internal" for i in range(1, nodes + 1)]
    timeline = "\n".join(
        f"  - {{at: 30s, node: {names[i]}, condition: "
        f'{{type: AcceleratedHardwareReady, status: "False", reason: {reason}}}}}'
        for i, reason in enumerate(reasons)
    )
    text = REBOOT.format(nodes=nodes, config=config, names=", ".join(names), timeline=timeline)
    return make_sim(parse_scenario(text, "group.yaml")), names


def test_a_well_known_xid_reboots_the_node_in_place(make_sim: Callable[..., SimCluster]) -> None:
    # node-health-nma.adoc: XID 13 defaults to Reboot after 10 minutes.
    sim, names = group_scenario(make_sim, nodes=2, reasons=["NvidiaXID13Error"])
    boot_before = find(sim, "nodes", names[0])["status"]["nodeInfo"]["bootID"]  # type: ignore[index]
    sim.advance(14 * 60)
    node = find(sim, "nodes", names[0])
    assert node is not None  # same instance, same name
    boot_id = node["status"]["nodeInfo"]["bootID"]
    assert boot_id != boot_before
    rebooted = events(sim, reason="Rebooted", name=names[0])
    assert [(e["type"], e["message"]) for e in rebooted] == [
        ("Warning", f"Node {names[0]} has been rebooted, boot id: {boot_id}")
    ]
    starting = events(sim, reason="Starting", name=names[0])  # the first boot's are past TTL
    assert [e["firstTimestamp"] for e in starting] == [rebooted[0]["firstTimestamp"]]
    ahr = condition(node, "AcceleratedHardwareReady")
    assert ahr is not None and ahr["status"] == "True"  # the agent started with True
    assert not node["spec"].get("unschedulable")
    assert not events(sim, reason="DeletingNode")


def test_repairs_stop_above_the_default_threshold(make_sim: Callable[..., SimCluster]) -> None:
    # node-health.adoc: more than five nodes and more than 20% unhealthy halts repairs.
    sim, names = group_scenario(make_sim, nodes=6, reasons=["NvidiaXID79Error"] * 2)
    sim.advance(15 * 60)
    assert {n["metadata"]["name"] for n in group_nodes(sim, "ng-gpu")} == set(names)
    assert all(find(sim, "nodes", n)["spec"].get("unschedulable") for n in names[:2])  # type: ignore[index]


def test_a_count_threshold_lets_repairs_run(make_sim: Callable[..., SimCluster]) -> None:
    sim, names = group_scenario(
        make_sim,
        nodes=6,
        reasons=["NvidiaXID79Error"] * 2,
        config="{enabled: true, maxUnhealthyNodeThresholdCount: 2}",
    )
    sim.advance(12 * 60)
    left = {n["metadata"]["name"] for n in group_nodes(sim, "ng-gpu")}
    assert not left & set(names[:2])  # XID 79: Replace


@pytest.mark.parametrize(
    ("config", "line", "fragment"),
    [
        (
            "{enabled: true, maxUnhealthyNodeThresholdCount: 2, "
            "maxUnhealthyNodeThresholdPercentage: 20}",
            8,
            "not both",
        ),
        ("{enabled: true, maxParallelNodesRepairedPercentage: 120}", 8, "1 to 100"),
        (
            "{enabled: true, nodeRepairConfigOverrides: [{nodeMonitoringCondition: "
            "AcceleratedHardwareReady, nodeUnhealthyReason: DCGMError, repairAction: Replace}]}",
            8,
            "needs 'minRepairWaitTimeMins'",
        ),
        (
            "{enabled: true, nodeRepairConfigOverrides: [{nodeMonitoringCondition: "
            "AcceleratedHardwareReady, nodeUnhealthyReason: DCGMError, minRepairWaitTimeMins: 5, "
            "repairAction: Restart}]}",
            8,
            "Replace, Reboot, NoAction",
        ),
        ("{enabled: true, maxUnhealthyNodes: 2}", 8, "unknown field 'maxUnhealthyNodes'"),
    ],
)
def test_node_repair_config_is_checked_like_the_eks_api(
    tmp_path: Path, config: str, line: int, fragment: str
) -> None:
    text = REBOOT.format(nodes=1, config=config, names="ip-10-0-1-1.x", timeline="  []").replace(
        "timeline:\n  []", "timeline: []"
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    assert str(err.value).startswith(f"{path}:{line}: ") and fragment in str(err.value), err.value


def test_node_repair_config_belongs_to_node_groups(tmp_path: Path) -> None:
    path = tmp_path / "np.yaml"
    path.write_text(
        "name: np\nkarpenter: {version: 1.4.0}\nnodePools:\n  - name: gpu\n"
        "    instanceType: g6.xlarge\n    nodeRepairConfig: {enabled: true}\n"
    )
    with pytest.raises(
        ScenarioError, match=r"np.yaml:6: .*nodeRepairConfig is for nodeGroups only"
    ):
        load_scenario(str(path))


# --------------------------------------------------------------------------- describe-nodegroup


def test_describe_nodegroup_documents_have_the_eks_shape(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mng-dcgm-repair-loop")
    docs = {
        d["nodegroup"]["nodegroupName"]: d["nodegroup"] for d in sim.loops.nodegroup_documents()
    }
    assert set(docs) == {"ng-gpu-inference", "ng-system"}
    gpu = docs["ng-gpu-inference"]
    assert gpu["nodeRepairConfig"] == {
        "enabled": True,
        "nodeRepairConfigOverrides": [
            {
                "nodeMonitoringCondition": "AcceleratedHardwareReady",
                "nodeUnhealthyReason": "DCGMError",
                "minRepairWaitTimeMins": 10,
                "repairAction": "Replace",
            }
        ],
    }
    assert gpu["clusterName"] == "ml-prod-use1" and gpu["status"] == "ACTIVE"
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA" and gpu["releaseVersion"] == "1.32.3-20250610"
    assert gpu["scalingConfig"]["desiredSize"] == 3
    assert gpu["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert gpu["nodegroupArn"].startswith("arn:aws:eks:us-east-1:")
    assert gpu["resources"]["autoScalingGroups"][0]["name"].startswith("eks-ng-gpu-inference-")
    assert "nodeRepairConfig" not in docs["ng-system"]
    json.dumps(docs)  # plain JSON, as `aws eks describe-nodegroup` prints it


@pytest.fixture
def moto_eks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """boto3's EKS client against moto's server on 127.0.0.1."""
    import boto3
    from botocore.config import Config
    from moto.server import ThreadedMotoServer

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield boto3.client(
            "eks",
            region_name="us-east-1",
            endpoint_url=f"http://{host}:{port}",
            config=Config(retries={"max_attempts": 1}),
        )
    finally:
        server.stop()


def test_the_documents_seed_moto(make_sim: Callable[..., SimCluster], moto_eks: Any) -> None:
    sim = make_sim("mng-dcgm-repair-loop")
    doc = next(
        d["nodegroup"]
        for d in sim.loops.nodegroup_documents()
        if d["nodegroup"]["nodegroupName"] == GROUP
    )
    moto_eks.create_cluster(
        name=doc["clusterName"],
        roleArn=doc["nodeRole"],
        resourcesVpcConfig={"subnetIds": doc["subnets"]},
    )
    moto_eks.create_nodegroup(
        clusterName=doc["clusterName"],
        nodegroupName=doc["nodegroupName"],
        nodeRole=doc["nodeRole"],
        subnets=doc["subnets"],
        scalingConfig=doc["scalingConfig"],
        instanceTypes=doc["instanceTypes"],
        amiType=doc["amiType"],
        labels=doc["labels"],
        taints=doc["taints"],
    )
    # moto keeps nodeRepairConfig only through update_nodegroup_config (moto/eks/models.py)
    moto_eks.update_nodegroup_config(
        clusterName=doc["clusterName"],
        nodegroupName=doc["nodegroupName"],
        nodeRepairConfig=doc["nodeRepairConfig"],
    )
    seeded = moto_eks.describe_nodegroup(
        clusterName=doc["clusterName"], nodegroupName=doc["nodegroupName"]
    )["nodegroup"]
    assert seeded["nodeRepairConfig"] == doc["nodeRepairConfig"]
    assert seeded["amiType"] == doc["amiType"]
