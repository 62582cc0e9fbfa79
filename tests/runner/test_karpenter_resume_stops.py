"""Karpenter's repair resume (mignurse/runner/steps/repair/karpenter.py) whose patch
failed, undone after someone paused by hand, and undone in the run that also paused; what
the read-back of an undo blames on this run; and what the confirmation of a runbook that
pauses repair says about undo."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS
from mignurse.runner.engine import Runner
from mignurse.runner.schema import load_runbook, reversal_words
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED, describe_record

from .enginehelpers import Cluster
from .repairhelpers import PatchRefused, run_phases, sim_ctx

Make = Callable[..., Cluster]


def deployment(c: Cluster) -> dict[str, Any]:
    return c.client.get(DEPLOYMENTS, "karpenter", "kube-system")


def record_of(c: Cluster) -> dict[str, Any] | None:
    raw = (deployment(c)["metadata"].get("annotations") or {}).get(ANNOTATION_PAUSED)
    return json.loads(raw) if raw else None


def gates_env(c: Cluster) -> str:
    (ctr,) = [
        x
        for x in deployment(c)["spec"]["template"]["spec"]["containers"]
        if x["name"] == "controller"
    ]
    return str(next(e["value"] for e in ctr["env"] if e["name"] == "FEATURE_GATES"))


def set_gates(c: Cluster, gates: str) -> None:
    env = [{"name": "FEATURE_GATES", "value": gates}]
    c.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"spec": {"template": {"spec": {"containers": [{"name": "controller", "env": env}]}}}},
        namespace="kube-system",
        patch_type="strategic",
    )


def test_a_resume_whose_patch_failed_plans_again_from_the_record(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    paused = record_of(c)
    assert paused is not None
    resume = ResumeNodeRepair()
    first = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan = StepPlan.from_json(resume.plan(first).to_json())
    c.sim.fail("PATCH", "/deployments/karpenter$", code=500)
    with pytest.raises(StepFailed):
        resume.apply(first, plan)  # announced, then the patch failed: nothing changed
    assert record_of(c) == paused and first.prior["record"] == paused

    again = resume.plan(sim_ctx(c.sim, c.client, run_id="run-2", prior=dict(first.prior)))

    assert again.notes[0] == describe_record(paused)  # the plan of a resume, not a leftover
    assert "at_risk" in again.data  # who resume puts at risk is shown again


def test_undoing_a_resume_after_someone_paused_by_hand_puts_the_record_back(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    paused_gates, paused = gates_env(c), record_of(c)
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, applied = run_phases(resume, ctx)
    set_gates(c, paused_gates)  # paused again by hand, without a record

    resume.undo(ctx, plan, applied)

    assert record_of(c) == paused  # a later resume still knows the prior value
    assert resume.undone(ctx, plan, applied) is None


def test_a_pause_and_resume_in_one_run_are_undone_to_paused_with_its_record(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, timeout=60)  # the run that paused
    plan, applied = run_phases(resume, ctx)

    resume.undo(ctx, plan, applied)

    assert resume.undone(ctx, plan, applied) is None
    assert "NodeRepair=false" in gates_env(c)


def test_an_undone_pause_blames_only_its_own_record_left_behind(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    prior = gates_env(c)
    pause = PauseNodeRepair()
    ctx = sim_ctx(c.sim, c.client, timeout=60)
    plan, applied = run_phases(pause, ctx)
    set_gates(c, prior)  # the gates are back, but not by the undo: the record stays

    assert pause.undone(ctx, plan, applied) == (
        f"deployment/kube-system/karpenter: the {ANNOTATION_PAUSED} record of this run is "
        "still there"
    )
    other = sim_ctx(c.sim, c.client, run_id="run-9")
    assert pause.undone(other, plan, applied) is None  # another run's record is not its own


def test_the_plan_of_a_runbook_that_pauses_repair_says_undo_puts_it_back(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")
    path = tmp_path / "quiet.yaml"
    path.write_text(
        "name: quiet\ntitle: quiet\ntarget: cluster\nundo: never\n"
        "steps:\n  - id: pause\n    action: pause-node-repair\n"
    )
    book = load_runbook(path)

    plan = Runner(book, {}, client=c.client, yes=True).plan()

    (step,) = plan.steps
    assert step.to_json()["canUndo"] is True and step.plan is not None
    assert reversal_words(book) == "reversible: undo (u) puts back what it changed"


# An admission policy denies every patch of the Deployment; its message happens to say "test",
# as the JSON patch's failed `test` operation does.
POLICY_DENIES = (
    "the API server answered 400 to patch deployments.apps: admission webhook "
    '"validation.gatekeeper.sh" denied the request: image tag "test" is not allowed'
)


def test_a_patch_a_policy_denies_is_named_not_taken_for_a_changed_deployment(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    ctx = sim_ctx(c.sim, PatchRefused(c.client, DEPLOYMENTS, POLICY_DENIES), timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)

    assert str(failed.value).startswith(
        "patch of deployment/kube-system/karpenter failed; nothing was changed: "
    )
    assert record_of(c) is None
