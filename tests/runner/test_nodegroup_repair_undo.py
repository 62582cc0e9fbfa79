"""Undoing a pause or a resume of a managed node group's repair through the EKS API (moto's
server on 127.0.0.1; mignurse/runner/steps/repair/nodegroup.py): the undo of a resume
pauses the node group again with the same record, the undo of a pause puts back the prior
nodeRepairConfig, and each undo reads back what it left."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.nodegroup import joined_tag

from .enginehelpers import Cluster
from .repairhelpers import aws, moto_endpoint, run_phases, sim_ctx, unique

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

Make = Callable[..., Cluster]
PRIOR = {"enabled": True, "maxUnhealthyNodeThresholdCount": 2}


def node_group(aws: Callable[[str], Any]) -> str:
    eks = aws("eks")
    cluster = unique("ml-prod")
    eks.create_cluster(
        name=cluster,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
    )
    eks.create_nodegroup(
        clusterName=cluster,
        nodegroupName="ng-gpu-l4",
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
    )
    eks.update_nodegroup_config(
        clusterName=cluster, nodegroupName="ng-gpu-l4", nodeRepairConfig=PRIOR
    )
    return cluster


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
