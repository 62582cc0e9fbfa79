"""replace-instance's own steps: a Karpenter node through the simulator (NodeClaim), a
managed node group member and a bare instance through moto's server (real boto3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODECLAIMS, NODES
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.instance import (
    DeleteNodeClaim,
    TerminateAsgInstance,
    WaitReplacement,
)
from mignurse.runner.steps.kube import Cordon, Drain

from .enginehelpers import Cluster
from .repairhelpers import LosingClient, aws, moto_endpoint, run_phases, sim_ctx, unique

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below


def _pool_node(cluster: Cluster, pool: str, label: str = "karpenter.sh/nodepool") -> str:
    return sorted(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get(label) == pool
    )[0]


def _claim_of(cluster: Cluster, node: str) -> dict[str, Any]:
    (claim,) = [c for c in cluster.sim.objects("nodeclaims") if c["status"].get("nodeName") == node]
    return claim


def test_karpenter_node_is_replaced_through_its_nodeclaim(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "gpu-train")
    claim = _claim_of(cluster, node)["metadata"]["name"]
    logs: list[str] = []

    def ctx(timeout: float = 30) -> Any:
        return sim_ctx(cluster.sim, cluster.client, node, log=logs.append, timeout=timeout)

    # Planned up front, as the engine does, before anything changes.
    steps = [Cordon(), Drain(), DeleteNodeClaim(), TerminateAsgInstance(), WaitReplacement()]
    plans = [StepPlan.from_json(s.plan(ctx()).to_json()) for s in steps]
    assert plans[3].nothing_to_do and "delete-nodeclaim replaces it" in plans[3].notes[0]
    assert [(c.target, c.field) for c in plans[2].changes] == [
        (f"nodeclaim/{claim}", "metadata.deletionTimestamp")
    ]
    assert node in plans[4].data["before"]
    for step, plan in zip(steps, plans, strict=True):
        assert step.check(ctx()) is None
        if plan.nothing_to_do:
            continue
        step_ctx = ctx(timeout=600 if isinstance(step, WaitReplacement) else 30)
        applied = step.apply(step_ctx, plan)
        assert step.verify(step_ctx, plan, applied) is None
    replacement = applied["replacement"]
    assert replacement not in plans[4].data["before"]
    labels = cluster.client.get(NODES, replacement)["metadata"]["labels"]
    assert labels["karpenter.sh/nodepool"] == "gpu-train"
    said = [line for line in logs if line.startswith(f"replacement {replacement} stayed Ready")]
    assert said and "with its GPUs advertised: served for " in said[0], logs
    held = int(said[0].split("served for ", 1)[1].split(" s of cluster time", 1)[0])
    assert 120 <= held < 130, said  # the settle window, read every 5 s of cluster time
    cluster.sim.advance(120)  # Karpenter's finalizers clear once the instance is gone
    assert claim not in {c["metadata"]["name"] for c in cluster.sim.objects("nodeclaims")}
    assert node not in {n["metadata"]["name"] for n in cluster.sim.objects("nodes")}


def test_nodeclaim_delete_500_leaves_it_alone_and_a_lost_answer_is_settled(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "gpu-train")
    claim = _claim_of(cluster, node)["metadata"]["name"]
    step = DeleteNodeClaim()
    ctx = sim_ctx(cluster.sim, cluster.client, node)
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    cluster.sim.fail("DELETE", rf"/nodeclaims/{claim}$", code=500)
    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)
    assert failed.value.retryable and "answered 500" in str(failed.value)
    assert not cluster.client.get(NODECLAIMS, claim)["metadata"].get("deletionTimestamp")

    losing = LosingClient(cluster.client, {"delete"})
    lossy_ctx = sim_ctx(cluster.sim, losing, node)
    applied = step.apply(lossy_ctx, plan)
    assert losing.lost == 1
    assert step.verify(lossy_ctx, plan, applied) is None
    assert cluster.client.get(NODECLAIMS, claim)["metadata"].get("deletionTimestamp")


def test_no_replacement_in_time_is_one_clear_line(cluster_for: Callable[..., Cluster]) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "gpu-train")

    def ctx(timeout: float = 30) -> Any:
        return sim_ctx(cluster.sim, cluster.client, node, timeout=timeout)

    steps = [Cordon(), Drain(), DeleteNodeClaim(), WaitReplacement()]
    plans = [StepPlan.from_json(s.plan(ctx()).to_json()) for s in steps]
    for step, plan in zip(steps[:-1], plans[:-1], strict=True):
        step.apply(ctx(), plan)
    with pytest.raises(StepFailed) as failed:  # 10 s: the launched node has not joined yet
        steps[-1].apply(ctx(timeout=10), plans[-1])
    message = str(failed.value)
    assert message.startswith("NodeClaim(s) gpu-train-"), message
    assert message.endswith(
        f" launched but no node joined in NodePool gpu-train within 10 s; the old node {node} "
        "was already replaced or terminated"
    ), message
    assert "\n" not in message


# --------------------------------------------------------------------------- EC2 / ASG


def _instances(aws: Callable[[str], Any], group: str) -> dict[str, str]:
    found = aws("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return {
        i["InstanceId"]: i["LifecycleState"] for i in found["AutoScalingGroups"][0]["Instances"]
    }


def _asg(aws: Callable[[str], Any], desired: int) -> str:
    ec2 = aws("ec2")
    name = unique("eks-ng-gpu-l4")
    template = ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g6.xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    aws("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=desired,
        MaxSize=desired + 1,
        DesiredCapacity=desired,
        AvailabilityZones=["us-west-2a"],
    )
    return name


def _bind(cluster: Cluster, node: str, instance_id: str) -> None:
    """Point a simulated node at a moto instance, as EKS nodes carry their instance id."""
    cluster.client.patch(NODES, node, {"spec": {"providerID": f"aws:///us-west-2a/{instance_id}"}})


def test_node_group_instance_is_terminated_without_lowering_capacity(
    cluster_for: Callable[..., Cluster], aws: Callable[[str], Any]
) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "ng-gpu-l4", "eks.amazonaws.com/nodegroup")
    group = _asg(aws, desired=2)
    victim = sorted(_instances(aws, group))[0]
    _bind(cluster, node, victim)
    ctx = sim_ctx(cluster.sim, cluster.client, node, aws=aws, timeout=30)
    assert DeleteNodeClaim().plan(ctx).nothing_to_do
    waiter = WaitReplacement()
    wait_plan = StepPlan.from_json(waiter.plan(ctx).to_json())

    plan, _applied = run_phases(TerminateAsgInstance(), ctx)
    assert plan.data["group"]["name"] == group
    assert "ShouldDecrementDesiredCapacity=False" in plan.notes[0]
    state = aws("ec2").describe_instances(InstanceIds=[victim])["Reservations"][0]["Instances"][0]
    assert state["State"]["Name"] in ("shutting-down", "terminated")
    asg = aws("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    assert asg["AutoScalingGroups"][0]["DesiredCapacity"] == 2  # capacity not decremented
    members = _instances(aws, group)
    assert victim not in members and len(members) == 2  # the group launched a replacement

    # The cloud controller removes the Node of a terminated instance; the group's new
    # instance joins as a new node, which wait-replacement names.
    cluster.client.delete(NODES, node)
    wait_ctx = sim_ctx(cluster.sim, cluster.client, node, timeout=600)
    result = waiter.apply(wait_ctx, wait_plan)
    assert result["replacement"] not in wait_plan.data["before"]
    assert result["pool"] == "node group ng-gpu-l4"
    assert waiter.verify(wait_ctx, wait_plan, result) is None


def test_bare_instance_needs_force(
    cluster_for: Callable[..., Cluster], aws: Callable[[str], Any]
) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "ng-gpu-l4", "eks.amazonaws.com/nodegroup")
    (instance,) = aws("ec2").run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)[
        "Instances"
    ]
    _bind(cluster, node, instance["InstanceId"])
    step = TerminateAsgInstance()
    refused = step.check(sim_ctx(cluster.sim, cluster.client, node, aws=aws))
    assert refused and "in no Auto Scaling group" in refused and "force=true" in refused

    ctx = sim_ctx(cluster.sim, cluster.client, node, aws=aws, params={"force": True})
    plan, _applied = run_phases(step, ctx)
    assert plan.data["group"] is None and "nothing launches a replacement" in plan.notes[0]
    state = aws("ec2").describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]
    assert state["Instances"][0]["State"]["Name"] == "terminated"


def test_no_aws_access_is_refused_for_a_node_group_node(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node = _pool_node(cluster, "ng-gpu-l4", "eks.amazonaws.com/nodegroup")
    refused = TerminateAsgInstance().check(sim_ctx(cluster.sim, cluster.client, node))
    assert refused == f"node {node} is replaced through EC2: no AWS access configured"


def test_collect_false_skips_the_bundle(cluster_for: Callable[..., Cluster]) -> None:
    from mignurse.runner.steps.collect import CollectBundle

    cluster = cluster_for("healthy")
    ctx = sim_ctx(cluster.sim, cluster.client, _pool_node(cluster, "gpu-train"),
                  params={"collect": False})  # fmt: skip
    assert CollectBundle().check(ctx) is None  # no node access needed when skipped
    assert CollectBundle().plan(ctx).nothing_to_do
