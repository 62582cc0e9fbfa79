"""Who repairs this node, and what pause-node-repair / resume-node-repair do when that is
unclear (mignurse/runner/steps/repair/__init__.py, backend.py): a node no backend claims is
refused with what to pass, Auto Mode has nothing to resume, an undone resume pauses again
with the same record, and a wait gives up at its deadline naming what it waited for."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, NODES
from mignurse.runner.step import Cancelled, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.backend import detect_backend, wait_until
from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED

from .enginehelpers import Cluster
from .repairhelpers import run_phases, sim_ctx

Make = Callable[..., Cluster]


def unlabelled_node(c: Cluster) -> str:
    """A node stripped of every label that tells who repairs it (a self-managed node)."""
    node = c.nodes("gpu-train")[0]
    labels = {"karpenter.sh/nodepool": None, "eks.amazonaws.com/nodegroup": None}
    c.client.patch(NODES, node, {"metadata": {"labels": labels}})
    return node


def karpenter_deployment(c: Cluster) -> dict[str, Any]:
    return c.client.get(DEPLOYMENTS, "karpenter", "kube-system")


@pytest.mark.parametrize(
    ("labels", "deploy", "nodegroup", "kind", "pool"),
    [
        ({}, False, "ng-3", "nodegroup", "ng-3"),  # a self-managed node, its group named
        ({"karpenter.sh/nodepool": "gpu"}, False, "ng-3", "karpenter", "gpu"),
        ({"eks.amazonaws.com/nodegroup": "ng-1"}, True, "ng-3", "nodegroup", "ng-1"),
        (None, True, "ng-3", "nodegroup", "ng-3"),
        ({"eks.amazonaws.com/compute-type": "auto", "karpenter.sh/nodepool": "p"}, True, "",
         "auto", "p"),
    ],
)  # fmt: skip
def test_a_named_node_group_counts_only_where_the_node_does_not_say(
    labels: dict[str, str] | None, deploy: bool, nodegroup: str, kind: str, pool: str
) -> None:
    found = detect_backend(labels, karpenter_deployment=deploy, nodegroup=nodegroup)
    assert (found.kind, found.pool) == (kind, pool)


def test_a_node_no_backend_claims_is_refused_with_what_to_pass(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    node = unlabelled_node(c)
    ctx = sim_ctx(c.sim, c.client, node)

    assert PauseNodeRepair().check(ctx) == (
        "cannot tell who repairs nodes here: the node has no Karpenter, Auto Mode or node "
        "group label; pass --node or --param nodegroup=NAME"
    )
    assert ResumeNodeRepair().check(ctx) == (
        "cannot tell who repairs nodes here: the node has no Karpenter, Auto Mode or node "
        "group label"
    )
    plan = PauseNodeRepair().plan(ctx)
    assert plan.nothing_to_do
    assert plan.notes == ["the node has no Karpenter, Auto Mode or node group label"]
    with pytest.raises(StepFailed, match=r"^nothing to pause$"):
        PauseNodeRepair().apply(ctx, plan)
    assert PauseNodeRepair().verify(ctx, plan, {}) is None
    assert PauseNodeRepair().undone(ctx, plan, {}) is None
    assert ResumeNodeRepair().undone(ctx, plan, {}) is None


def test_a_node_that_is_gone_is_said_so(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    with pytest.raises(StepFailed, match=r"^node ip-10-9-9-9\.ec2\.internal does not exist$"):
        PauseNodeRepair().check(sim_ctx(c.sim, c.client, "ip-10-9-9-9.ec2.internal"))


def test_auto_mode_has_nothing_to_resume(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    node = c.nodes()[0]
    c.client.patch(
        NODES, node, {"metadata": {"labels": {"eks.amazonaws.com/compute-type": "auto"}}}
    )
    assert ResumeNodeRepair().check(sim_ctx(c.sim, c.client, node)) == (
        "EKS Auto Mode repair cannot be paused, so there is nothing to resume"
    )


def test_undoing_a_resume_pauses_again_with_the_same_record(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    record = karpenter_deployment(c)["metadata"]["annotations"][ANNOTATION_PAUSED]
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, applied = run_phases(resume, ctx)
    assert c.sim.loops.repair_enabled is True
    said = resume.undone(ctx, plan, applied) or ""
    assert "NodeRepair=true" in said and f"the {ANNOTATION_PAUSED} record is gone" in said

    resume.undo(ctx, plan, applied)

    after = karpenter_deployment(c)
    assert json.loads(after["metadata"]["annotations"][ANNOTATION_PAUSED]) == json.loads(record)
    assert resume.undone(ctx, plan, applied) is None
    c.sim.advance(120)
    assert c.sim.loops.repair_enabled is False


def test_undoing_a_pause_puts_repair_back_and_says_so(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    pause = PauseNodeRepair()
    ctx = sim_ctx(c.sim, c.client, timeout=60)
    plan, applied = run_phases(pause, ctx)
    said = pause.undone(ctx, plan, applied) or ""
    assert "NodeRepair=false" in said and f"the {ANNOTATION_PAUSED} record of this run" in said

    pause.undo(ctx, plan, applied)

    assert pause.undone(ctx, plan, applied) is None
    assert ANNOTATION_PAUSED not in (karpenter_deployment(c)["metadata"].get("annotations") or {})


def test_a_pause_applied_again_after_its_patch_landed_sends_nothing(cluster_for: Make) -> None:
    """apply runs again (a retry after a lost answer, a resume): the Deployment already
    carries this run's record and paused gates, so nothing is patched twice."""
    c = cluster_for("dcgm-repair-loop")
    pause = PauseNodeRepair()
    ctx = sim_ctx(c.sim, c.client, timeout=60)
    plan, applied = run_phases(pause, ctx)
    before = len(c.sim.requests)

    again = pause.apply(ctx, plan)

    assert again["edits"] == applied["edits"] and again["record"] == applied["record"]
    assert not [r for r in c.sim.requests[before:] if r["method"] == "PATCH"]


def test_a_resume_applied_again_after_its_patch_landed_sends_nothing(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, _applied = run_phases(resume, ctx)
    before = len(c.sim.requests)

    resume.apply(ctx, plan)

    assert not [r for r in c.sim.requests[before:] if r["method"] == "PATCH"]


# -- waiting -------------------------------------------------------------------------------------


def test_a_wait_gives_up_at_the_steps_deadline_naming_what_it_waited_for() -> None:
    ctx = StepContext(client=None, params={}, timeout=0.3)  # type: ignore[arg-type]
    polls: list[int] = []

    def probe() -> str | None:
        polls.append(1)
        return "1 of 2 replicas updated"

    assert wait_until(ctx, probe, "the rollout of deployment/kube-system/karpenter") == (
        "the rollout of deployment/kube-system/karpenter not done after 0 s: 1 of 2 replicas "
        "updated"
    )
    assert len(polls) >= 2  # it looked again before giving up


def test_a_wait_that_is_done_returns_at_once_and_ctrl_c_stops_it() -> None:
    ctx = StepContext(client=None, params={}, timeout=60)  # type: ignore[arg-type]
    assert wait_until(ctx, lambda: None, "x") is None
    ctx.cancel.set()
    probed: list[int] = []

    def probe() -> str:
        probed.append(1)
        return "not yet"

    with pytest.raises(Cancelled):
        wait_until(ctx, probe, "x")
    assert probed == []  # after Ctrl-C not even one more read of the cluster


def test_a_wait_past_its_deadline_still_looks_once() -> None:
    ctx = StepContext(client=None, params={}, timeout=0)  # type: ignore[arg-type]
    assert wait_until(ctx, lambda: None, "x") is None


def test_a_wait_is_woken_by_ctrl_c_while_it_sleeps() -> None:
    ctx = StepContext(client=None, params={}, timeout=60)  # type: ignore[arg-type]
    threading.Timer(0.3, ctx.cancel.set).start()
    with pytest.raises(Cancelled):
        wait_until(ctx, lambda: "not yet", "x")


def test_a_plan_naming_no_backend_is_resumed_as_karpenter(cluster_for: Make) -> None:
    """A run state written before plans named their backend resumes as Karpenter's."""
    c = cluster_for("dcgm-repair-loop")
    _plan, applied = run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan = ResumeNodeRepair().plan(ctx)
    legacy = StepPlan.from_json({**plan.to_json(), "data": {**plan.data, "backend": ""}})
    resumed = ResumeNodeRepair().apply(ctx, legacy)
    assert ResumeNodeRepair().verify(ctx, legacy, {**resumed, "backend": ""}) is None
    assert c.sim.loops.repair_enabled is True
    assert applied["backend"] == "karpenter"
