"""A managed node group's repair pause and resume (mignurse/runner/steps/repair/nodegroup.py,
moto's server on 127.0.0.1) when an answer is lost, an update is refused, the config changed
under the step, a run stopped half-way, EKS reports its update's status, or the pause record
on the cluster's tags is unreadable: what is left on the node group, and what the step says."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from mignurse.runner.step import LockLost, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.deployment import describe_record
from mignurse.runner.steps.repair.nodegroup import TAG_PAUSED, _eks_cluster, joined_tag

from .enginehelpers import Cluster
from .repairhelpers import aws, eks_node_group, moto_endpoint, run_phases, sim_ctx, unique

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

Make = Callable[..., Cluster]
Aws = Callable[[str], Any]
PRIOR = {"enabled": True, "maxUnhealthyNodeThresholdCount": 2}
GROUP = "ng-gpu-l4"


def repair_config(aws: Aws, cluster: str) -> dict[str, Any]:
    group = aws("eks").describe_nodegroup(clusterName=cluster, nodegroupName=GROUP)
    return dict(group["nodegroup"].get("nodeRepairConfig") or {})


def set_config(aws: Aws, cluster: str, config: dict[str, Any]) -> None:
    aws("eks").update_nodegroup_config(
        clusterName=cluster, nodegroupName=GROUP, nodeRepairConfig=config
    )


def record(aws: Aws, cluster: str) -> dict[str, Any] | None:
    tags = aws("eks").describe_cluster(name=cluster)["cluster"].get("tags") or {}
    text = joined_tag(tags, GROUP)
    return json.loads(text) if text else None


def l4_node(c: Cluster) -> str:
    return c.nodes(GROUP)[0]


class Eks:
    """moto's EKS client, with update_nodegroup_config answering as `update` says, and
    describe_update answering `statuses` in turn (moto has no DescribeUpdate)."""

    def __init__(self, real: Any, update: str = "", statuses: list[str] | None = None) -> None:
        self._real = real
        self._update = update  # "refused": nothing changes; "lost": it lands, answer lost
        self._statuses = list(statuses or [])
        self.described = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def update_nodegroup_config(self, **kw: Any) -> dict[str, Any]:
        if self._update == "refused":
            raise RuntimeError("An error occurred (InvalidParameterException): nope")
        answer: dict[str, Any] = self._real.update_nodegroup_config(**kw)
        if self._update == "lost":
            raise RuntimeError("Connection was closed before we received a valid response")
        if self._statuses:
            return {"update": {"id": "u-1", "status": "InProgress"}}
        return answer

    def describe_update(self, **kw: Any) -> dict[str, Any]:
        self.described += 1
        status = self._statuses.pop(0) if len(self._statuses) > 1 else self._statuses[0]
        return {"update": {"id": kw["updateId"], "status": status}}


def with_eks(aws: Aws, eks: Eks) -> Aws:
    return lambda service: eks if service == "eks" else aws(service)


# -- a pause whose update is refused or whose answer is lost --------------------------------------


def test_a_refused_update_leaves_no_pause_record_behind(cluster_for: Make, aws: Aws) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    refusing = with_eks(aws, Eks(aws("eks"), update="refused"))
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=refusing, params={"cluster": cluster})
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())

    with pytest.raises(StepFailed) as failed:
        pause.apply(ctx, plan)

    assert str(failed.value).startswith(f"EKS refused update_nodegroup_config for {GROUP}")
    assert repair_config(aws, cluster) == PRIOR
    assert record(aws, cluster) is None  # no record claims a pause that did not happen


def test_a_lost_answer_is_settled_by_reading_the_node_group_back(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    logs: list[str] = []
    losing = with_eks(aws, Eks(aws("eks"), update="lost"))
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=losing, params={"cluster": cluster},
                  log=logs.append, timeout=30)  # fmt: skip

    _plan, applied = run_phases(PauseNodeRepair(), ctx)

    assert applied["update"] == ""
    assert repair_config(aws, cluster)["enabled"] is False
    assert record(aws, cluster) is not None
    assert any(line.startswith("update_nodegroup_config's answer was lost (") for line in logs)
    assert any(line.endswith("); read back: in place") for line in logs)


def test_the_pause_record_names_who_paused(cluster_for: Make, aws: Aws) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster}, timeout=30)
    run_phases(PauseNodeRepair(), ctx)
    found = record(aws, cluster)
    assert found is not None
    assert (found["by"], found["run"], found["mode"]) == ("alice@laptop", "run-1", "off")


# -- the config changed under a pause -------------------------------------------------------------


def test_a_node_group_paused_the_same_way_by_someone_else_is_not_claimed(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster})
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    set_config(aws, cluster, {**PRIOR, "enabled": False})  # what the plan wanted, not by us

    with pytest.raises(StepFailed, match="changed since the plan"):
        pause.apply(ctx, plan)
    assert record(aws, cluster) is None


def test_a_config_changed_after_this_runs_record_was_written_is_not_overwritten(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster},
                  guard=LoseAt(2))  # fmt: skip
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    with pytest.raises(LockLost):
        pause.apply(ctx, plan)  # the record is written, the update never sent
    theirs = {"enabled": True, "maxUnhealthyNodeThresholdCount": 7}
    set_config(aws, cluster, theirs)
    resumed = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster},
                      prior=dict(ctx.prior))  # fmt: skip

    with pytest.raises(StepFailed, match="changed since the plan"):
        pause.apply(resumed, plan)
    assert repair_config(aws, cluster) == theirs


class LoseAt:
    """The run's lock is found taken over at the n-th change the step announces."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise LockLost("lock lost: cluster prod is now locked by bob@box (run b0b, x)")


def test_nothing_to_pause_says_repair_is_off_by_configuration(cluster_for: Make, aws: Aws) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, {"enabled": False})
    plan = PauseNodeRepair().plan(
        sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster})
    )
    assert plan.nothing_to_do
    assert plan.notes[0] == (
        "nothing to pause: node repair is off by configuration, not paused by mignurse "
        f"for node group {GROUP}"
    )


def test_a_node_group_that_never_had_repair_configured_has_nothing_to_pause(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    eks = aws("eks")
    cluster = unique("ml-prod")
    eks.create_cluster(name=cluster, roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": ["subnet-1"]})  # fmt: skip
    eks.create_nodegroup(clusterName=cluster, nodegroupName=GROUP, subnets=["subnet-1"],
                         nodeRole="arn:aws:iam::123456789012:role/node")  # fmt: skip
    assert (
        "nodeRepairConfig"
        not in eks.describe_nodegroup(clusterName=cluster, nodegroupName=GROUP)["nodegroup"]
    )

    plan = PauseNodeRepair().plan(
        sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster})
    )

    assert plan.nothing_to_do
    assert plan.notes[0].startswith("nothing to pause: node repair is off by configuration")


# -- a resume stopped half-way, and what undo reads back ------------------------------------------


def test_a_resume_stopped_before_its_record_was_dropped_plans_from_the_record(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    node = l4_node(c)
    params = {"cluster": cluster}
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params,
                                          timeout=30))  # fmt: skip
    paused = record(aws, cluster)
    assert paused is not None
    resume = ResumeNodeRepair()
    first = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", guard=LoseAt(2))
    plan = StepPlan.from_json(resume.plan(first).to_json())
    with pytest.raises(LockLost):
        resume.apply(first, plan)  # the config is back, the record not yet removed
    assert repair_config(aws, cluster) == PRIOR

    again = resume.plan(
        sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", prior=dict(first.prior))
    )

    assert again.notes[0] == describe_record(paused)
    assert again.data["record"] == paused


def test_an_undone_resume_that_is_not_paused_says_what_differs(cluster_for: Make, aws: Aws) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    node = l4_node(c)
    params = {"cluster": cluster}
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params,
                                          timeout=30))  # fmt: skip
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params=params, run_id="r2", timeout=30)
    plan, applied = run_phases(resume, ctx)

    said = resume.undone(ctx, plan, applied)

    assert said == (
        f"node group {GROUP}: nodeRepairConfig is {json.dumps(PRIOR)}, not "
        f"{json.dumps({**PRIOR, 'enabled': False})}; its pause record is gone"
    )


def test_a_pause_and_resume_in_one_run_are_undone_to_paused_with_its_record(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    node = l4_node(c)
    params = {"cluster": cluster}
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, node, aws=aws, params=params,
                                          timeout=30))  # fmt: skip
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, node, aws=aws, params=params, timeout=30)  # the same run
    plan, applied = run_phases(resume, ctx)

    resume.undo(ctx, plan, applied)

    assert resume.undone(ctx, plan, applied) is None
    assert repair_config(aws, cluster)["enabled"] is False


# -- EKS's update status --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "said"),
    [
        (["InProgress", "InProgress", "Successful"], None),
        (["InProgress", "Failed"], "update u-1 ended Failed"),
        (["Cancelled"], "update u-1 ended Cancelled"),
    ],
)
def test_verify_follows_the_update_until_eks_says_how_it_ended(
    cluster_for: Make, aws: Aws, statuses: list[str], said: str | None
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    eks = Eks(aws("eks"), statuses=statuses)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=with_eks(aws, eks), params={"cluster": cluster},
                  timeout=30)  # fmt: skip
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    applied = pause.apply(ctx, plan)
    assert applied["update"] == "u-1"

    assert pause.verify(ctx, plan, applied) == said
    assert eks.described == min(len(statuses), 3)


def test_an_update_that_never_finishes_fails_verify_at_the_deadline(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    eks = Eks(aws("eks"), statuses=["InProgress"])
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=with_eks(aws, eks), params={"cluster": cluster},
                  timeout=10)  # fmt: skip
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    applied = pause.apply(ctx, plan)

    said = pause.verify(ctx, plan, applied)

    assert said == f"update u-1 of node group {GROUP} not done after 10 s: update u-1 is InProgress"


def test_a_pause_undone_by_someone_before_verify_fails_verify_naming_both_configs(
    cluster_for: Make, aws: Aws
) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, PRIOR)
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster}, timeout=30)
    pause = PauseNodeRepair()
    plan = StepPlan.from_json(pause.plan(ctx).to_json())
    applied = pause.apply(ctx, plan)
    set_config(aws, cluster, PRIOR)  # turned back on by someone else

    assert pause.verify(ctx, plan, applied) == (
        f"node group {GROUP} reports nodeRepairConfig {json.dumps(PRIOR)}, "
        f"not {json.dumps({**PRIOR, 'enabled': False})}"
    )


# -- where the record and the cluster's name come from --------------------------------------------


def test_an_unreadable_pause_record_is_no_record(cluster_for: Make, aws: Aws) -> None:
    c = cluster_for()
    cluster = eks_node_group(aws, {"enabled": False})
    arn = aws("eks").describe_cluster(name=cluster)["cluster"]["arn"]
    aws("eks").tag_resource(resourceArn=arn, tags={f"{TAG_PAUSED}/{GROUP}.0": "{not json"})
    ctx = sim_ctx(c.sim, c.client, l4_node(c), aws=aws, params={"cluster": cluster})

    with pytest.raises(StepFailed, match="repair was not paused by mignurse"):
        ResumeNodeRepair().plan(ctx)


@pytest.mark.parametrize(
    ("env", "context_cluster", "named"),
    [
        (None, "arn:aws:eks:us-west-2:123456789012:cluster/ml-prod", "ml-prod"),
        (None, "kind-ml-dev", "kind-ml-dev"),
        (
            [{"name": "CLUSTER_NAME", "value": "ml-prod"}],
            "arn:aws:eks:x:1:cluster/other",
            "ml-prod",
        ),
        (
            [{"name": "CLUSTER_NAME", "valueFrom": {"configMapKeyRef": {"name": "k", "key": "c"}}}],
            "arn:aws:eks:us-west-2:123456789012:cluster/ml-prod",
            "ml-prod",
        ),
    ],
)
def test_the_eks_cluster_is_karpenters_cluster_name_else_the_contexts(
    env: list[dict[str, Any]] | None, context_cluster: str, named: str
) -> None:
    deploy = (
        None
        if env is None
        else {"spec": {"template": {"spec": {"containers": [{"name": "controller", "env": env}]}}}}
    )
    client = SimpleNamespace(info=SimpleNamespace(cluster=context_cluster))
    ctx = StepContext(client=client, params={})  # type: ignore[arg-type]
    assert _eks_cluster(ctx, deploy) == named
