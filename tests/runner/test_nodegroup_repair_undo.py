"""Undoing a pause or a resume of a managed node group's repair through the EKS API (moto's
server on 127.0.0.1; mignurse/runner/steps/repair/nodegroup.py): the undo of a resume
pauses the node group again with the same record, the undo of a pause puts back the prior
nodeRepairConfig, and each undo reads back what it left."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, NODES
from mignurse.runner.step import LockLost, StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.nodegroup import joined_tag

from .enginehelpers import Cluster
from .repairhelpers import aws, eks_node_group, moto_endpoint, run_phases, sim_ctx

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

Make = Callable[..., Cluster]
PRIOR = {"enabled": True, "maxUnhealthyNodeThresholdCount": 2}


def node_group(aws: Callable[[str], Any]) -> str:
    return eks_node_group(aws, PRIOR)


def repair_config(aws: Callable[[str], Any], cluster: str) -> dict[str, Any]:
    group = aws("eks").describe_nodegroup(clusterName=cluster, nodegroupName="ng-gpu-l4")
    return dict(group["nodegroup"].get("nodeRepairConfig") or {})


def record(aws: Callable[[str], Any], cluster: str) -> dict[str, Any] | None:
    tags = aws("eks").describe_cluster(name=cluster)["cluster"].get("tags") or {}
    text = joined_tag(tags, "ng-gpu-l4")
    return json.loads(text) if text else None


def l4_node(c: Cluster) -> str:
    return next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get("eks.amazonaws.com/nodegroup") == "ng-gpu-l4"
    )


def test_undoing_a_node_group_resume_pauses_it_again_with_the_same_record(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    params = {"cluster": eks_cluster}
    run_phases(
        PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)
    )
    paused_record = record(aws, eks_cluster)
    assert paused_record is not None and paused_record["prior"] == PRIOR

    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, run_id="r2", params=params, timeout=30)
    plan, applied = run_phases(resume, ctx)
    assert repair_config(aws, eks_cluster) == PRIOR
    assert applied["backend"] == "nodegroup"
    assert resume.undone(ctx, plan, applied) is not None  # not paused now

    resume.undo(ctx, plan, applied)

    assert repair_config(aws, eks_cluster)["enabled"] is False
    assert record(aws, eks_cluster) == paused_record
    assert resume.undone(ctx, plan, applied) is None


def test_undoing_a_node_group_pause_puts_back_the_prior_config(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    pause = PauseNodeRepair()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params={"cluster": eks_cluster}, timeout=30)
    plan, applied = run_phases(pause, ctx)
    assert pause.undone(ctx, plan, applied) is not None

    pause.undo(ctx, plan, applied)

    assert repair_config(aws, eks_cluster) == PRIOR
    assert record(aws, eks_cluster) is None
    assert pause.undone(ctx, plan, applied) is None


# -- a pause that already happened, or cannot -------------------------------------------------


def test_a_mode_that_is_neither_off_nor_override_is_refused(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws,
                  params={"cluster": eks_cluster, "mode": "disable"})  # fmt: skip
    with pytest.raises(StepFailed, match=r"^mode 'disable' is not off or override$"):
        PauseNodeRepair().plan(ctx)


def test_a_node_group_whose_repair_is_off_has_nothing_to_pause(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    aws("eks").update_nodegroup_config(
        clusterName=eks_cluster, nodegroupName="ng-gpu-l4", nodeRepairConfig={"enabled": False}
    )
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster})

    plan = PauseNodeRepair().plan(ctx)

    assert plan.nothing_to_do
    assert plan.notes[0].startswith("nothing to pause: ")
    assert plan.notes[0].endswith(" for node group ng-gpu-l4")


def test_a_pause_resumed_after_its_update_landed_goes_on_from_its_record(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    params = {"cluster": eks_cluster}
    first = sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(first).to_json())
    pause.apply(first, plan)  # then killed before verify
    assert first.prior["prior"] == PRIOR and first.prior["backend"] == "nodegroup"

    resumed = sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30,
                      prior=dict(first.prior))  # fmt: skip
    again = pause.plan(resumed)

    assert not again.nothing_to_do
    assert again.notes[0] == "node group ng-gpu-l4 was paused by this run before it stopped"
    assert again.data["prior"] == PRIOR  # from the record, not the disabled config now
    applied = pause.apply(resumed, StepPlan.from_json(again.to_json()))
    assert pause.verify(resumed, again, applied) is None
    other = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="run-9")
    assert pause.plan(other).nothing_to_do  # another run: already off, not its pause


def test_a_config_changed_since_the_plan_is_not_overwritten(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster})
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    theirs = {"enabled": True, "maxUnhealthyNodeThresholdCount": 5}
    aws("eks").update_nodegroup_config(
        clusterName=eks_cluster, nodegroupName="ng-gpu-l4", nodeRepairConfig=theirs
    )

    with pytest.raises(StepFailed) as failed:
        pause.apply(ctx, plan)

    assert str(failed.value).startswith(
        "node group ng-gpu-l4's nodeRepairConfig changed since the plan ("
    )
    assert str(failed.value).endswith("); nothing was changed: plan again")
    assert repair_config(aws, eks_cluster) == theirs and record(aws, eks_cluster) is None


def test_the_pause_plan_names_the_change_and_how_node_groups_repair(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    plan = PauseNodeRepair().plan(
        sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster})
    )
    first = plan.changes[0]
    assert (first.target, first.old, first.new) == (
        f"nodegroup/{eks_cluster}/ng-gpu-l4",
        True,
        False,
    )
    assert (
        "managed node groups repair by reason and stop above their unhealthy thresholds on "
        "their own (docs/repair.md)"
    ) in plan.notes


def test_a_resume_resumed_after_its_restore_landed_goes_on_from_what_it_recorded(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    params = {"cluster": eks_cluster}
    run_phases(
        PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)
    )
    resume = ResumeNodeRepair()
    first = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", timeout=30)
    plan = StepPlan.from_json(resume.plan(first).to_json())
    resume.apply(first, plan)  # then killed before verify
    assert record(aws, eks_cluster) is None

    resumed = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", timeout=30,
                      prior=dict(first.prior))  # fmt: skip
    assert resume.check(resumed) is None
    again = resume.plan(resumed)

    assert again.notes == ["node group ng-gpu-l4 was restored by this run before it stopped"]
    assert "labels" not in again.data and again.data["backend"] == "nodegroup"
    applied = resume.apply(resumed, StepPlan.from_json(again.to_json()))
    assert resume.verify(resumed, again, applied) is None
    assert repair_config(aws, eks_cluster) == PRIOR
    fresh = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r3")
    with pytest.raises(StepFailed, match="repair was not paused by mignurse"):
        resume.plan(fresh)


# -- override mode, and what a resume puts at risk ----------------------------------------------


def set_condition(c: Cluster, node: str, kind: str, status: str, reason: str) -> None:
    raw = c.node(node)
    conditions = [x for x in raw["status"].get("conditions") or () if x.get("type") != kind]
    conditions.append({"type": kind, "status": status, "reason": reason, "message": "",
                       "lastTransitionTime": "2026-11-20T11:00:00Z"})  # fmt: skip
    c.client.patch(NODES, node, {"status": {"conditions": conditions}}, subresource="status")


def test_override_mode_adds_no_action_for_the_condition_the_node_shows(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    set_condition(c, node, "AcceleratedHardwareReady", "False", "DCGMError")
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, timeout=30,
                  params={"cluster": eks_cluster, "mode": "override"})  # fmt: skip

    plan, _applied = run_phases(PauseNodeRepair(), ctx)

    assert plan.changes[0].field == "nodeRepairConfig override AcceleratedHardwareReady/DCGMError"
    config = repair_config(aws, eks_cluster)
    assert config["enabled"] is True  # repair stays on for every other reason
    assert config["nodeRepairConfigOverrides"] == [
        {
            "nodeMonitoringCondition": "AcceleratedHardwareReady",
            "nodeUnhealthyReason": "DCGMError",
            "minRepairWaitTimeMins": 10,
            "repairAction": "NoAction",
        }
    ]


def test_override_mode_without_a_condition_at_hand_asks_for_one(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    for params in ({}, {"condition": "KernelReady"}, {"reason": "DCGMError"}):
        ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws,
                      params={"cluster": eks_cluster, "mode": "override", **params})  # fmt: skip
        with pytest.raises(StepFailed) as refused:
            PauseNodeRepair().plan(ctx)
        assert str(refused.value) == (
            "mode=override needs the condition and reason at hand: pass --param "
            "condition=AcceleratedHardwareReady --param reason=DCGMError"
        )


def test_a_named_condition_and_reason_win_over_what_the_node_shows(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    set_condition(c, node, "AcceleratedHardwareReady", "False", "DCGMError")
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params={
        "cluster": eks_cluster, "mode": "override", "condition": "KernelReady",
        "reason": "KernelBug"})  # fmt: skip
    plan = PauseNodeRepair().plan(ctx)
    assert plan.changes[0].field == "nodeRepairConfig override KernelReady/KernelBug"


def test_the_resume_plan_names_the_nodes_the_group_may_repair_once_on(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    node = l4_node(c)
    params = {"cluster": eks_cluster}
    run_phases(
        PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)
    )
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2")
    quiet = ResumeNodeRepair().plan(ctx)
    assert "nodes the node group may repair once it is on (by its own reason rules): none" in (
        quiet.notes
    )
    set_condition(c, node, "AcceleratedHardwareReady", "False", "DCGMError")
    set_condition(c, node, "KernelReady", "True", "KernelIsReady")

    plan = ResumeNodeRepair().plan(ctx)

    assert (
        "nodes the node group may repair once it is on (by its own reason rules): "
        f"{node} (AcceleratedHardwareReady=DCGMError)"
    ) in plan.notes


def test_without_aws_access_a_node_group_is_not_paused(cluster_for: Make) -> None:
    c = cluster_for("healthy")
    with pytest.raises(StepFailed) as refused:
        PauseNodeRepair().plan(sim_ctx(c.sim, c.client, l4_node(c)))
    assert str(refused.value) == (
        "no AWS access configured: managed node groups are paused through the EKS API "
        "(set AWS_PROFILE or credentials)"
    )


def test_an_undone_pause_that_left_its_record_says_so(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster},
                  timeout=30)  # fmt: skip
    pause = PauseNodeRepair()
    plan, applied = run_phases(pause, ctx)
    aws("eks").update_nodegroup_config(
        clusterName=eks_cluster, nodegroupName="ng-gpu-l4", nodeRepairConfig=PRIOR
    )  # the config is back, but not by the undo: the record stays

    assert pause.undone(ctx, plan, applied) == (
        "node group ng-gpu-l4: the pause record of this run is still there"
    )
    other = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster},
                    run_id="run-9")  # fmt: skip
    assert pause.undone(other, plan, applied) is None  # another run's record is not this one's


# -- every write announced first: a lost lock stops the next one --------------------------------


class LoseLockAt:
    """The run's lock is found taken over at the n-th change this step announces."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise LockLost("lock lost: cluster prod is now locked by bob@box (run b0b, x)")


def test_a_lock_lost_after_the_record_is_written_leaves_the_config_alone(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    guard = LoseLockAt(2)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": eks_cluster},
                  guard=guard)  # fmt: skip
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())

    with pytest.raises(LockLost):
        pause.apply(ctx, plan)

    assert guard.calls == 2
    assert repair_config(aws, eks_cluster) == PRIOR  # the update was never sent


@pytest.mark.parametrize("lost_at", [1, 2])
def test_undoing_a_pause_announces_each_write_before_it(
    cluster_for: Make, aws: Callable[[str], Any], lost_at: int
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    params = {"cluster": eks_cluster}
    pause = PauseNodeRepair()
    plan, applied = run_phases(pause, sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params=params,
                                              timeout=30))  # fmt: skip
    guard = LoseLockAt(lost_at)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params=params, guard=guard)

    with pytest.raises(LockLost):
        pause.undo(ctx, plan, applied)

    assert record(aws, eks_cluster) is not None  # the record goes last, after both checks
    if lost_at == 1:
        assert repair_config(aws, eks_cluster)["enabled"] is False


@pytest.mark.parametrize("lost_at", [1, 2])
def test_undoing_a_resume_announces_each_write_before_it(
    cluster_for: Make, aws: Callable[[str], Any], lost_at: int
) -> None:
    c = cluster_for("healthy")
    eks_cluster = node_group(aws)
    params = {"cluster": eks_cluster}
    node = l4_node(c)
    run_phases(
        PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)
    )
    resume = ResumeNodeRepair()
    plan, applied = run_phases(resume, sim_ctx(c.sim, c.client, node, aws=aws, params=params,
                                               run_id="r2", timeout=30))  # fmt: skip
    guard = LoseLockAt(lost_at)
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", guard=guard)

    with pytest.raises(LockLost):
        resume.undo(ctx, plan, applied)

    assert repair_config(aws, eks_cluster) == PRIOR  # not paused again under the other run
    assert (record(aws, eks_cluster) is None) is (lost_at == 1)


def test_the_eks_cluster_is_read_from_karpenters_cluster_name(
    cluster_for: Make, aws: Callable[[str], Any]
) -> None:
    c = cluster_for("healthy")
    deploy = c.client.get(DEPLOYMENTS, "karpenter", "kube-system")
    (ctr,) = [
        x for x in deploy["spec"]["template"]["spec"]["containers"] if x["name"] == "controller"
    ]
    named = next(e["value"] for e in ctr["env"] if e["name"] == "CLUSTER_NAME")
    eks = aws("eks")
    if named not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name=named, roleArn="arn:aws:iam::123456789012:role/eks",
                           resourcesVpcConfig={"subnetIds": ["subnet-1"]})  # fmt: skip
        eks.create_nodegroup(clusterName=named, nodegroupName="ng-gpu-l4",
                             nodeRole="arn:aws:iam::123456789012:role/node",
                             subnets=["subnet-1"])  # fmt: skip
    eks.update_nodegroup_config(
        clusterName=named, nodegroupName="ng-gpu-l4", nodeRepairConfig={"enabled": True}
    )
    plan = PauseNodeRepair().plan(sim_ctx(c.sim, c.client, l4_node(c), aws=aws))
    assert plan.data["cluster"] == named
    assert plan.changes[0].target == f"nodegroup/{named}/ng-gpu-l4"
