"""Managed node groups' repair settings in a bundle: `collect` saves `describe-nodegroup`
(real boto3 against moto's EKS on 127.0.0.1) as cluster/nodegroups.json, and `diagnose --from`
reads it back."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.aws.eks import cluster_from_context, describe_nodegroups, eks_client
from mignurse.cluster.client import ClusterClient
from mignurse.cluster.load import load_snapshot
from mignurse.collect.redact import Redactor
from mignurse.collect.run import collect
from mignurse.diagnose.sources import load_offline
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells

REPAIR = {
    "enabled": True,
    "maxUnhealthyNodeThresholdCount": 2,
    "nodeRepairConfigOverrides": [
        {
            "nodeMonitoringCondition": "AcceleratedHardwareReady",
            "nodeUnhealthyReason": "DCGMError",
            "minRepairWaitTimeMins": 10,
            "repairAction": "Replace",
        }
    ],
}


@pytest.fixture
def eks(monkeypatch: pytest.MonkeyPatch, fake_aws: None) -> Iterator[tuple[object, str]]:
    """moto's EKS with a fresh cluster (moto's state outlives one server: a new name) and
    node group ng-gpu-l4, the healthy scenario's."""
    import uuid

    import boto3
    from moto.server import ThreadedMotoServer

    cluster = f"ml-prod-{uuid.uuid4().hex[:8]}"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL_EKS", f"http://{host}:{port}")
        client = boto3.client("eks")
        role = "arn:aws:iam::123456789012:role/eks"
        client.create_cluster(
            name=cluster,
            roleArn=role,
            resourcesVpcConfig={"subnetIds": ["subnet-0a1b2c3d"]},
        )
        client.create_nodegroup(
            clusterName=cluster,
            nodegroupName="ng-gpu-l4",
            subnets=["subnet-0a1b2c3d"],
            nodeRole=role,
            instanceTypes=["g6.xlarge"],
        )
        client.update_nodegroup_config(
            clusterName=cluster, nodegroupName="ng-gpu-l4", nodeRepairConfig=REPAIR
        )
        yield client, cluster
    finally:
        server.stop()


def test_collect_saves_the_node_groups_repair_settings_and_diagnose_reads_them(
    tmp_path: Path, eks: tuple[object, str]
) -> None:
    client_eks, cluster = eks
    with SimCluster(load_scenario("healthy"), speed=0) as sim:
        client = ClusterClient.connect(str(sim.write_kubeconfig(tmp_path / "config")))
        try:
            snapshot = load_snapshot(client).snapshot
            nodes = [n for n in snapshot.nodes.values() if n.pool == "ng-gpu-l4"][:1]
            bundle = tmp_path / "b.tar.gz"
            sandboxes = tmp_path / "sandboxes"
            sandboxes.mkdir()
            manifest = collect(
                client,
                snapshot,
                nodes,
                shell_for=sandbox_shells(client, sandboxes),
                out=bundle,
                since="1h",
                redactor=Redactor(enabled=True),
                nodegroups=lambda groups: describe_nodegroups(client_eks, cluster, groups),
            )
        finally:
            client.close()
    assert not [p for p in manifest["problems"] if "nodegroups" in p], manifest["problems"]
    with tarfile.open(bundle) as tar:
        name = next(n for n in tar.getnames() if n.endswith("cluster/nodegroups.json"))
        document = json.load(tar.extractfile(name))  # type: ignore[arg-type]
    (group,) = document["nodegroups"]
    assert group["nodegroupName"] == "ng-gpu-l4"
    assert group["nodeRepairConfig"]["nodeRepairConfigOverrides"][0]["repairAction"] == "Replace"
    gathered = load_offline(bundle)
    settings = gathered.nodegroups["ng-gpu-l4"]
    action = settings.action("AcceleratedHardwareReady", "False", "DCGMError")
    assert (action.action, action.wait.total_seconds() if action.wait else None) == (
        "Replace",
        600.0,
    )


def test_a_node_group_that_cannot_be_described_is_one_line(eks: tuple[object, str]) -> None:
    found, problems = describe_nodegroups(*eks, ["ng-gone"])
    assert found == []
    (line,) = problems
    assert "ng-gone" in line and "ResourceNotFoundException" in line


def test_no_credentials_is_a_reason_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client, why = eks_client(None, "us-west-2")
    assert client is None and "credentials" in why


def test_the_cluster_name_and_region_come_from_an_eks_context() -> None:
    assert cluster_from_context("arn:aws:eks:eu-west-1:210987654321:cluster/train") == (
        "train",
        "eu-west-1",
    )
    assert cluster_from_context("my-cluster") == ("my-cluster", "")
