"""terminate-asg-instance once the instance is on its way out (mignurse/runner/steps/
instance.py; EC2 and Auto Scaling through moto's server on 127.0.0.1): a desired capacity
lowered behind the run means no replacement comes, a terminated instance stops undo there,
an instance already terminating is not terminated twice, and a node without an instance id
is refused in one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.instance import TerminateAsgInstance

from .enginehelpers import Cluster
from .repairhelpers import aws, moto_endpoint, run_phases, sim_ctx, unique

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

Make = Callable[..., Cluster]


def group_of(aws: Callable[[str], Any], desired: int) -> tuple[str, str]:
    """An Auto Scaling group of `desired` instances and the first of them."""
    name = unique("eks-ng-gpu-l4")
    template = aws("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g6.xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    autoscaling = aws("autoscaling")
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=desired + 1,
        DesiredCapacity=desired,
        AvailabilityZones=["us-west-2a"],
    )
    found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return name, sorted(i["InstanceId"] for i in found["AutoScalingGroups"][0]["Instances"])[0]


def node_on(c: Cluster, instance: str) -> str:
    node = next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get("eks.amazonaws.com/nodegroup") == "ng-gpu-l4"
    )
    c.client.patch(NODES, node, {"spec": {"providerID": f"aws:///us-west-2a/{instance}"}})
    return node


def test_a_desired_capacity_lowered_behind_the_run_means_no_replacement(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    group, victim = group_of(aws, desired=2)
    node = node_on(c, victim)
    step = TerminateAsgInstance()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30)
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    applied = step.apply(ctx, plan)
    assert step.verify(ctx, plan, applied) is None
    aws("autoscaling").set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=1)

    assert step.verify(ctx, plan, applied) == (
        f"Auto Scaling group {group} desired capacity fell from 2 to 1: no replacement comes"
    )


def test_once_the_instance_is_terminating_undo_stops_there(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    _group, victim = group_of(aws, desired=1)
    node = node_on(c, victim)
    step = TerminateAsgInstance()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30)
    planned = {"instance": victim}
    assert step.undo_barrier(ctx, StepPlan(), planned) is None  # the terminate never landed

    run_phases(step, ctx)

    said = step.undo_barrier(ctx, StepPlan(), planned) or ""
    assert said in (f"instance {victim} is shutting-down", f"instance {victim} is terminated")
    assert step.undo_barrier(ctx, StepPlan(), {}) is None


def test_an_instance_already_terminating_is_not_terminated_again(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    (instance,) = aws("ec2").run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)[
        "Instances"
    ]
    iid = instance["InstanceId"]
    node = node_on(c, iid)
    step = TerminateAsgInstance()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params={"force": True}, timeout=30)
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    aws("ec2").terminate_instances(InstanceIds=[iid])  # someone else got there first

    applied = step.apply(ctx, plan)

    assert applied == {"instance": iid, "group": None, "activity": ""}
    assert not ctx.prior  # nothing announced: nothing was sent
    assert step.verify(ctx, plan, applied) is None


def test_a_node_without_an_instance_id_is_refused_in_one_line(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    node = node_on(c, "i-0123456789abcdef0")
    c.client.patch(NODES, node, {"spec": {"providerID": "kind://docker/kind/kind-worker"}})

    assert TerminateAsgInstance().check(sim_ctx(c.sim, c.client, node, aws=aws)) == (
        f"node {node} has no EC2 instance id in its providerID ('kind://docker/kind/kind-worker')"
    )


def test_a_resumed_terminate_after_its_node_is_gone_goes_on(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    _group, victim = group_of(aws, desired=1)
    node = node_on(c, victim)
    step = TerminateAsgInstance()
    first = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30)
    run_phases(step, first)
    c.client.delete(NODES, node)  # the cloud controller removed the terminated node

    resumed = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30, prior=dict(first.prior))
    assert step.check(resumed) is None
    plan = step.plan(resumed)
    assert plan.notes == [f"node {node} is gone: its instance was terminated by this run"]
    assert plan.data["instance"] == victim
    fresh = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30)
    assert step.check(fresh) == f"node {node} does not exist (any more)"


def test_an_instance_still_running_is_not_verified_as_terminating(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    _group, victim = group_of(aws, desired=1)
    node = node_on(c, victim)
    step = TerminateAsgInstance()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30)
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    assert step.verify(ctx, plan, {"instance": victim, "group": plan.data["group"]}) == (
        f"instance {victim} is running, not terminating"
    )


def test_a_node_group_node_without_aws_access_is_not_planned(cluster_for: Make) -> None:
    c = cluster_for("healthy")
    node = node_on(c, "i-0123456789abcdef0")
    with pytest.raises(StepFailed) as refused:
        TerminateAsgInstance().plan(sim_ctx(c.sim, c.client, node))
    assert str(refused.value) == (
        f"no AWS access configured: {node} is replaced through EC2 Auto Scaling "
        "(set AWS_PROFILE or credentials)"
    )
