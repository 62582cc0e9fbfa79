"""The pause record on the karpenter Deployment (mignurse/runner/steps/repair/karpenter.py):
a run resumed after its own patch landed goes on from the record, a record left over from an
earlier pause is replaced, a gate string changed after the pause is restored to the recorded
value and said, and a place the record names that is gone is restored by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, ApiError
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED

from .enginehelpers import Cluster
from .repairhelpers import PatchRefused, run_phases, sim_ctx

Make = Callable[..., Cluster]


def deployment(c: Cluster) -> dict[str, Any]:
    return c.client.get(DEPLOYMENTS, "karpenter", "kube-system")


def record_of(c: Cluster) -> dict[str, Any] | None:
    raw = (deployment(c)["metadata"].get("annotations") or {}).get(ANNOTATION_PAUSED)
    return json.loads(raw) if raw else None


def set_env(c: Cluster, env: list[dict[str, Any]]) -> None:
    c.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"spec": {"template": {"spec": {"containers": [{"name": "controller", "env": env}]}}}},
        namespace="kube-system",
        patch_type="strategic",
    )


def gates_env(c: Cluster) -> str:
    (ctr,) = [
        x
        for x in deployment(c)["spec"]["template"]["spec"]["containers"]
        if x["name"] == "controller"
    ]
    return str(next(e["value"] for e in ctr["env"] if e["name"] == "FEATURE_GATES"))


def test_a_pause_resumed_after_its_own_patch_landed_waits_for_the_rollout(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    first = sim_ctx(c.sim, c.client, timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(first).to_json())
    applied = step.apply(first, plan)  # then the process was killed before verify

    resumed = sim_ctx(c.sim, c.client, timeout=60, prior=dict(first.prior))
    again = step.plan(resumed)

    assert not again.nothing_to_do
    assert again.notes[0].startswith("paused by this run before it stopped (paused by alice@laptop")
    assert again.data["edits"] == applied["edits"]
    before = len(c.sim.requests)
    after = step.apply(resumed, StepPlan.from_json(again.to_json()))
    assert not [r for r in c.sim.requests[before:] if r["method"] == "PATCH"]
    assert step.verify(resumed, again, after) is None
    assert c.sim.loops.repair_enabled is False


def test_another_runs_pause_is_already_off_and_named(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))

    plan = PauseNodeRepair().plan(sim_ctx(c.sim, c.client, run_id="run-9"))

    assert plan.nothing_to_do
    assert plan.notes[0].startswith(
        "nothing to pause: node repair is paused by mignurse (paused by alice@laptop since "
    )
    assert plan.notes[0].endswith(", run run-1) in deployment/kube-system/karpenter")


def test_a_pause_record_left_from_an_earlier_pause_is_replaced(cluster_for: Make) -> None:
    """A helm upgrade put NodeRepair=true back but kept the annotation."""
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    set_env(
        c,
        [
            {
                "name": "FEATURE_GATES",
                "value": gates_env(c).replace("NodeRepair=false", "NodeRepair=true"),
            }
        ],
    )
    c.sim.advance(60)
    assert c.sim.loops.repair_enabled is True

    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, _applied = run_phases(PauseNodeRepair(), ctx)

    assert any(
        "carries an earlier pause record (paused by alice@laptop" in n
        and "though repair is on again (a helm upgrade or sync?); it is replaced" in n
        for n in plan.notes
    )
    assert (record_of(c) or {}).get("run") == "run-2"
    assert c.sim.loops.repair_enabled is False


def test_a_gate_string_changed_after_the_pause_is_restored_to_the_recorded_one(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    prior = gates_env(c)
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    paused = gates_env(c)
    meddled = paused + ",SpotToSpotConsolidation=true"
    set_env(c, [{"name": "FEATURE_GATES", "value": meddled}])

    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, _applied = run_phases(ResumeNodeRepair(), ctx)

    assert (
        f"env FEATURE_GATES was changed after the pause ({paused!r} → {meddled!r}); it is "
        "restored to the recorded value anyway"
    ) in plan.notes
    assert [(ch.old, ch.new) for ch in plan.changes if "FEATURE_GATES" in ch.field] == [
        (meddled, prior)
    ]
    assert gates_env(c) == prior
    assert record_of(c) is None


def test_a_resume_whose_gates_are_already_back_only_drops_the_record(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    prior = gates_env(c)
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    set_env(c, [{"name": "FEATURE_GATES", "value": prior}])  # put back by hand

    plan, _applied = run_phases(
        ResumeNodeRepair(), sim_ctx(c.sim, c.client, run_id="r2", timeout=60)
    )

    assert [ch.field for ch in plan.changes] == [f"annotation {ANNOTATION_PAUSED}"]
    assert record_of(c) is None and gates_env(c) == prior


def test_a_gate_setting_that_is_gone_since_the_pause_is_left_to_restore_by_hand(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    prior = gates_env(c)
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    current = deployment(c)
    (index,) = [
        i
        for i, x in enumerate(current["spec"]["template"]["spec"]["containers"])
        if x["name"] == "controller"
    ]
    ctr = current["spec"]["template"]["spec"]["containers"][index]
    (env_index,) = [i for i, e in enumerate(ctr["env"]) if e["name"] == "FEATURE_GATES"]
    c.client.patch(
        DEPLOYMENTS,
        "karpenter",
        [{"op": "remove", "path": f"/spec/template/spec/containers/{index}/env/{env_index}"}],
        namespace="kube-system",
        patch_type="json",
    )
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, run_id="r2", timeout=60)
    plan = StepPlan.from_json(resume.plan(ctx).to_json())
    assert not [n for n in plan.notes if "was changed after the pause" in n]  # gone, not changed

    with pytest.raises(StepFailed) as failed:
        resume.apply(ctx, plan)
    assert str(failed.value) == (
        "env FEATURE_GATES of container controller is no longer set once in the Deployment; "
        f"restore it by hand to {prior!r}"
    )


def test_two_feature_gates_envs_in_one_container_are_refused(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    current = deployment(c)
    (index,) = [
        i
        for i, x in enumerate(current["spec"]["template"]["spec"]["containers"])
        if x["name"] == "controller"
    ]
    c.client.patch(
        DEPLOYMENTS,
        "karpenter",
        [
            {
                "op": "add",
                "path": f"/spec/template/spec/containers/{index}/env/-",
                "value": {"name": "FEATURE_GATES", "value": "NodeRepair=false"},
            }
        ],
        namespace="kube-system",
        patch_type="json",
    )

    assert PauseNodeRepair().check(sim_ctx(c.sim, c.client)) == (
        "deployment/kube-system/karpenter sets FEATURE_GATES twice in one place; fix it by hand"
    )


# kube-apiserver v1.34.4 answers a failed JSON-patch `test` op with 422 and this generic
# message, no details, naming neither the op nor the path (seen against the real server in
# tests/upstream, test_a_failed_json_patch_test_op); the simulator names the op.
REAL_SERVERS_ANSWER = (
    "the API server answered 422 to patch deployments.apps: the server rejected our request "
    "due to an error in our request"
)


class EditsFirst:
    """A colleague's edit of the gates lands between the pause's read and its patch; with
    `as_the_real_server`, the refusal of the patch's test is worded as the real server words
    it."""

    def __init__(self, c: Cluster, theirs: str, as_the_real_server: bool = False) -> None:
        self._c = c
        self._theirs = theirs
        self._real = as_the_real_server
        self.raced = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._c.client, name)
        if name != "patch":
            return target

        def patch(resource: Any, obj: str, body: Any, **kwargs: Any) -> Any:
            if kwargs.get("patch_type") == "json" and not self.raced:
                self.raced = True
                set_env(self._c, [{"name": "FEATURE_GATES", "value": self._theirs}])
            try:
                return target(resource, obj, body, **kwargs)
            except ApiError as exc:
                if not self._real:
                    raise
                assert "testing value" in str(exc)
                raise ApiError(REAL_SERVERS_ANSWER) from None

        return patch


@pytest.mark.parametrize("as_the_real_server", [False, True])
def test_a_gate_edited_between_the_read_and_the_patch_fails_its_test_and_changes_nothing(
    cluster_for: Make, as_the_real_server: bool
) -> None:
    c = cluster_for("dcgm-repair-loop")
    theirs = "NodeRepair=true,ReservedCapacity=false"
    racing = EditsFirst(c, theirs, as_the_real_server)
    ctx = sim_ctx(c.sim, racing, timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)

    assert racing.raced
    assert str(failed.value) == (
        "deployment/kube-system/karpenter changed since the plan (its feature gates are not "
        "what the plan showed); nothing was changed: plan again"
    )
    assert not failed.value.retryable
    assert gates_env(c) == theirs and record_of(c) is None


# An admission webhook that cannot be called fails every patch of the Deployment.
WEBHOOK_DOWN = (
    "the API server answered 500 to patch deployments.apps: Internal error "
    'occurred: failed calling webhook "validate.kyverno.svc-fail": context '
    "deadline exceeded"
)


def test_a_webhook_that_fails_the_patch_is_named_not_taken_for_a_changed_deployment(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    ctx = sim_ctx(c.sim, PatchRefused(c.client, DEPLOYMENTS, WEBHOOK_DOWN), timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)

    assert str(failed.value) == (
        "patch of deployment/kube-system/karpenter failed; nothing was changed: the API server "
        "answered 500 to patch deployments.apps: Internal error occurred: failed calling "
        'webhook "validate.kyverno.svc-fail": context deadline exceeded'
    )
    assert failed.value.retryable
    assert record_of(c) is None


def test_a_pause_says_what_it_changes_and_warns_that_helm_puts_it_back(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    logs: list[str] = []
    ctx = sim_ctx(c.sim, c.client, timeout=60, log=logs.append)

    plan, _applied = run_phases(PauseNodeRepair(), ctx)

    assert [ch.field for ch in plan.changes] == [
        "env FEATURE_GATES of container controller token NodeRepair",
        f"annotation {ANNOTATION_PAUSED}",
    ]
    helm = [n for n in plan.notes if "is managed by Helm" in n]
    assert len(helm) == 1 and "--set settings.featureGates.nodeRepair=false)" in helm[0]
    assert (
        "the controller reads its gates only at start: the pause holds once the rollout has "
        "replaced every controller pod; until then the old leader can still repair"
    ) in plan.notes
    assert f"warning: {helm[0]}" in logs


def test_a_resumed_run_whose_pause_a_helm_upgrade_reverted_pauses_again(cluster_for: Make) -> None:
    """The run's own record is still there but the gates say true again: the record does
    not make it "already paused"."""
    c = cluster_for("dcgm-repair-loop")
    first = sim_ctx(c.sim, c.client, timeout=60)
    run_phases(PauseNodeRepair(), first)
    set_env(
        c,
        [
            {
                "name": "FEATURE_GATES",
                "value": gates_env(c).replace("NodeRepair=false", "NodeRepair=true"),
            }
        ],
    )
    c.sim.advance(60)
    assert c.sim.loops.repair_enabled is True

    resumed = sim_ctx(c.sim, c.client, timeout=60)  # the same run id: run-1
    plan, _applied = run_phases(PauseNodeRepair(), resumed)

    assert not any(n.startswith("paused by this run before it stopped") for n in plan.notes)
    assert "NodeRepair=false" in gates_env(c)
    assert c.sim.loops.repair_enabled is False


def test_without_a_karpenter_deployment_where_it_was_looked_for_pause_and_resume_say_where(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    node = next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool")
    )
    ctx = sim_ctx(c.sim, c.client, node, params={"namespace": "platform"})

    refused = PauseNodeRepair().check(ctx) or ""
    assert refused.startswith("the node is labelled karpenter.sh/nodepool=")
    assert refused.endswith(
        ", but no karpenter Deployment was found in kube-system or karpenter: pass --param "
        "namespace=NS"
    )
    plan = PauseNodeRepair().plan(ctx)
    assert plan.nothing_to_do and plan.notes[0].startswith("the node is labelled")
    assert ResumeNodeRepair().check(ctx) == (
        "no karpenter Deployment was found: pass --param namespace=NS"
    )


def test_a_resume_resumed_after_its_restore_landed_goes_on_from_what_it_recorded(
    cluster_for: Make,
) -> None:
    c = cluster_for("dcgm-repair-loop")
    prior = gates_env(c)
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    resume = ResumeNodeRepair()
    first = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan = StepPlan.from_json(resume.plan(first).to_json())
    resume.apply(first, plan)  # then killed before verify: the record is gone
    assert record_of(c) is None
    assert "at_risk" not in first.prior and first.prior["record"]["run"] == "run-1"

    resumed = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60, prior=dict(first.prior))
    assert resume.check(resumed) is None
    again = resume.plan(resumed)

    assert again.notes[0].startswith(
        "restored by this run before it stopped (paused by alice@laptop"
    )
    assert again.notes[0].endswith("; waits for the rollout")
    before = len(c.sim.requests)
    applied = resume.apply(resumed, StepPlan.from_json(again.to_json()))
    assert not [r for r in c.sim.requests[before:] if r["method"] == "PATCH"]
    assert resume.verify(resumed, again, applied) is None
    assert gates_env(c) == prior and c.sim.loops.repair_enabled is True
    fresh = sim_ctx(c.sim, c.client, run_id="run-3", timeout=60)
    assert "was not paused by mignurse" in (resume.check(fresh) or "")


def test_undoing_a_resume_twice_pauses_once(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    resume = ResumeNodeRepair()
    ctx = sim_ctx(c.sim, c.client, run_id="run-2", timeout=60)
    plan, applied = run_phases(resume, ctx)
    resume.undo(ctx, plan, applied)
    before = len(c.sim.requests)

    resume.undo(ctx, plan, applied)  # an undo run again after a crash

    assert not [r for r in c.sim.requests[before:] if r["method"] == "PATCH"]
    assert record_of(c) is not None and "NodeRepair=false" in gates_env(c)


def test_a_plain_resume_says_no_gate_changed_after_the_pause(cluster_for: Make) -> None:
    c = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(c.sim, c.client, timeout=60))
    plan = ResumeNodeRepair().plan(sim_ctx(c.sim, c.client, run_id="run-2", timeout=60))
    assert not [n for n in plan.notes if "was changed after the pause" in n]
