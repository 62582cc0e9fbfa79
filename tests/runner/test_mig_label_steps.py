"""The MIG steps that work through node labels, one by one on the simulator's manual clock
(mignurse/runner/steps/mig/labels.py, resume.py): what each writes, what it remembers of the
labels before the run first changed them (a retry or a resume must not take `paused` for the
prior value), what it waits for, and what undo puts back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from drashapes import resource_slice

from mignurse.cluster.client import NODES, PODS, ApiError, ClusterError, Forbidden, NotFound
from mignurse.cluster.dra import node_dra
from mignurse.gpu.models import by_instance_type
from mignurse.gpu.profiles import expected_layout
from mignurse.model import (
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    Node,
    NodeDevices,
    ResourceSlice,
    dra_devices_by_node,
)
from mignurse.runner.engine import Runner
from mignurse.runner.schema import load_runbook
from mignurse.runner.state import INTERRUPTED, RunState
from mignurse.runner.step import StepContext, StepFailed, StepPlan
from mignurse.runner.steps.mig.labels import (
    MigManagerOff,
    PauseGpuOperands,
    pods_of,
    set_labels,
    wait_pods_gone,
)
from mignurse.runner.steps.mig.resume import (
    ResumeGpuOperands,
    allocatable_problem,
    published_problem,
)
from mignurse.runner.steps.mig.target import MigTarget, resolve_target

from .enginehelpers import Cluster
from .mighelpers import set_not_ready
from .repairhelpers import SimContext

Make = Callable[..., Cluster]
DEPLOY = "nvidia.com/gpu.deploy."
MANAGER = DEPLOY + "mig-manager"
PAUSED = "paused-for-mig-change"
OPERAND_PODS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery",
                "nvidia-dcgm-exporter", "nvidia-dcgm")  # fmt: skip


class Failing:
    """A client whose chosen call fails `times` times before it reaches the API server."""

    def __init__(self, real: Any, name: str, error: ClusterError, times: int = 1) -> None:
        self._real, self._name, self._error, self.left = real, name, error, times

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != self._name:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.left:
                self.left -= 1
                raise self._error
            return target(*args, **kwargs)

        return call


class Steps:
    """One node of mig-hook-notready whose layout is `success`, its operands running."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.node = next(
            n["metadata"]["name"]
            for n in c.sim.objects("nodes")
            if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "success"
        )
        self.outputs: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.journal: list[tuple[str, dict[str, Any]]] = []

    def ctx(self, client: Any = None, timeout: float = 300, **kw: Any) -> SimContext:
        return SimContext(
            client=client or self.c.client, params=kw.pop("params", {"node": self.node}),
            run_id="r1", holder="t@x", sim=self.c.sim, outputs=self.outputs, timeout=timeout,
            log=self.log.append, journal=lambda e, f: self.journal.append((e, dict(f))), **kw,
        )  # fmt: skip

    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.c.node(self.node)["metadata"]["labels"]
        return labels

    def label(self, **labels: str | None) -> None:
        self.c.client.patch(NODES, self.node, {"metadata": {"labels": labels}})

    def apps(self) -> set[str]:
        return {
            str(p["metadata"].get("labels", {}).get("app"))
            for p in self.c.pods_on(self.node)
            if not p["metadata"].get("deletionTimestamp")
        }

    def patches(self, since: int) -> list[dict[str, Any]]:
        return [
            r for r in self.c.sim.requests[since:]
            if r["method"] == "PATCH" and f"/nodes/{self.node}" in r["path"]
        ]  # fmt: skip


@pytest.fixture
def steps(cluster_for: Make) -> Steps:
    return Steps(cluster_for("mig-hook-notready"))


def plan_of(step: Any, ctx: StepContext) -> StepPlan:
    return StepPlan.from_json(step.plan(ctx).to_json())


# -- mig-manager-off --------------------------------------------------------------------------


def test_mig_manager_off_waits_for_its_pod_and_undo_turns_it_back_on(steps: Steps) -> None:
    off = MigManagerOff()
    plan = plan_of(off, steps.ctx())
    assert [(c.field, c.old, c.new) for c in plan.changes] == [
        (f"label {MANAGER}", "true", "false")
    ]
    assert not plan.nothing_to_do
    assert plan.notes[-1].startswith("mig-manager stays off after the run")
    assert "nvidia-mig-manager" in steps.apps()

    applied = off.apply(steps.ctx(), plan)

    assert applied["labels"] == {MANAGER: "true"} and applied["set"] == {MANAGER: "false"}
    assert "nvidia-mig-manager" not in steps.apps()
    assert steps.labels()[MANAGER] == "false"
    assert off.verify(steps.ctx(), plan, applied) is None
    intents = [f for e, f in steps.journal if e == "intent"]
    assert intents[0]["change"] == f"label node {steps.node}: {MANAGER}=false"
    assert intents[0]["prior"]["labels"] == {MANAGER: "true"}

    off.undo(steps.ctx(), plan, applied)
    assert steps.labels()[MANAGER] == "true"
    assert off.undone(steps.ctx(), plan, applied) is None


def test_mig_manager_already_off_with_no_pod_is_nothing_to_do(steps: Steps) -> None:
    steps.label(**{MANAGER: "false"})
    steps.c.sim.advance(30)
    assert "nvidia-mig-manager" not in steps.apps()
    assert plan_of(MigManagerOff(), steps.ctx()).nothing_to_do


def test_mig_manager_labelled_off_whose_pod_still_runs_is_waited_for(steps: Steps) -> None:
    steps.label(**{MANAGER: "false"})  # the pod has not gone yet: no time has passed
    assert "nvidia-mig-manager" in steps.apps()
    off = MigManagerOff()
    plan = plan_of(off, steps.ctx())
    assert not plan.nothing_to_do and not plan.changes
    seen = len(steps.c.sim.requests)
    applied = off.apply(steps.ctx(), plan)
    assert not steps.patches(seen)  # the label is as wanted: no write, no intent
    assert not [e for e, _f in steps.journal if e == "intent"]
    assert applied["labels"] == {MANAGER: "false"}
    assert "nvidia-mig-manager" not in steps.apps()


def test_a_mig_manager_pod_that_stays_fails_verify_naming_it(steps: Steps) -> None:
    off = MigManagerOff()
    plan = plan_of(off, steps.ctx())
    applied = {"labels": {MANAGER: "true"}, "set": {MANAGER: "false"}}
    said = off.verify(steps.ctx(), plan, applied)
    assert said is not None and said.startswith(
        f"mig-manager still runs on {steps.node}: gpu-operator/nvidia-mig-manager-"
    )


def test_verify_and_undone_name_each_label_that_is_not_as_written(steps: Steps) -> None:
    off = MigManagerOff()
    steps.label(**{MANAGER: "false"})
    steps.c.sim.advance(30)
    applied = {"labels": {MANAGER: "true", DEPLOY + "nvsm": None},
               "set": {MANAGER: "false", DEPLOY + "dcgm": "false"}}  # fmt: skip
    assert off.verify(steps.ctx(), StepPlan(), applied) == (
        f"label {DEPLOY}dcgm is 'true', not 'false'"
    )
    steps.label(**{DEPLOY + "nvsm": "true"})
    assert off.undone(steps.ctx(), StepPlan(), applied) == (
        f"label {MANAGER} is 'false', not 'true'; label {DEPLOY}nvsm is 'true', not (absent)"
    )


# -- pause-gpu-operands -----------------------------------------------------------------------


def test_pausing_leaves_false_operands_alone_and_remembers_every_one(steps: Steps) -> None:
    steps.label(**{DEPLOY + "dcgm": "false"})
    pause = PauseGpuOperands()
    plan = plan_of(pause, steps.ctx())
    wanted = {DEPLOY + k: PAUSED for k in ("device-plugin", "gpu-feature-discovery",
                                           "dcgm-exporter")}  # fmt: skip
    assert plan.data["set"] == {**wanted, LABEL_MIG_CONFIG_STATE: "pending"}
    assert plan.notes[-1].startswith("waits for the nvidia-device-plugin-daemonset, ")

    applied = pause.apply(steps.ctx(), plan)

    assert applied["operandLabels"] == {
        DEPLOY + "device-plugin": "true", DEPLOY + "gpu-feature-discovery": "true",
        DEPLOY + "dcgm-exporter": "true", DEPLOY + "dcgm": "false",
    }  # fmt: skip
    assert applied["labels"] == {**{k: "true" for k in wanted}, LABEL_MIG_CONFIG_STATE: "success"}
    assert not steps.apps() & set(OPERAND_PODS)
    labels = steps.labels()
    assert labels[DEPLOY + "dcgm"] == "false" and labels[DEPLOY + "device-plugin"] == PAUSED
    assert pause.verify(steps.ctx(), plan, applied) is None


def test_a_pause_already_in_place_is_still_waited_for(steps: Steps) -> None:
    """Run again after a kill mid-wait: the labels are paused, the pods may still run."""
    pause = PauseGpuOperands()
    plan = plan_of(pause, steps.ctx())
    steps.label(**plan.data["set"])
    assert not plan_of(pause, steps.ctx()).nothing_to_do


def test_a_retried_pause_keeps_the_first_reading_of_the_labels(steps: Steps) -> None:
    """A 503 after the patch went through: the retry finds the labels paused, and must still
    hand resume and undo the values from before the run."""
    pause = PauseGpuOperands()
    plan = plan_of(pause, steps.ctx())
    first = steps.ctx()
    pause.apply(first, plan)
    again = steps.ctx(prior=dict(first.prior))
    applied = pause.apply(again, plan)
    assert applied["labels"][DEPLOY + "device-plugin"] == "true"
    assert applied["labels"][LABEL_MIG_CONFIG_STATE] == "success"
    assert applied["operandLabels"][DEPLOY + "device-plugin"] == "true"


def test_operand_pods_that_stay_fail_verify_naming_them(steps: Steps) -> None:
    said = PauseGpuOperands().verify(steps.ctx(), StepPlan(), {"set": {}})
    assert said is not None and said.startswith(
        f"GPU operand pods still run on {steps.node}: gpu-operator/"
    )


# -- labels and pods, faults --------------------------------------------------------------------


def test_a_label_write_on_a_node_that_went_away_says_so(steps: Steps) -> None:
    client = Failing(steps.c.client, "patch", NotFound("nodes not found"))
    with pytest.raises(StepFailed) as failed:
        set_labels(steps.ctx(client), {MANAGER: "false"})
    assert str(failed.value) == f"node {steps.node} does not exist (any more)"


def test_a_refused_label_write_fails_and_a_503_may_be_retried(steps: Steps) -> None:
    refused = Failing(
        steps.c.client, "patch", Forbidden("nodes is forbidden: cannot patch", "patch", "nodes")
    )
    with pytest.raises(StepFailed) as failed:
        set_labels(steps.ctx(refused), {MANAGER: "false"})
    assert str(failed.value) == (
        f"cannot label node {steps.node}: nodes is forbidden: cannot patch"
    )
    assert not failed.value.retryable
    busy = Failing(steps.c.client, "patch", ApiError("the API server answered 503"))
    with pytest.raises(StepFailed) as failed:
        set_labels(steps.ctx(busy), {MANAGER: "false"})
    assert failed.value.retryable
    assert steps.labels()[MANAGER] == "true"


def test_pods_of_lists_only_the_named_apps_on_the_node(steps: Steps) -> None:
    found = pods_of(steps.ctx(), ("nvidia-mig-manager", "nvidia-dcgm-exporter"))
    assert [p.split("/")[0] for p in found] == ["gpu-operator", "gpu-operator"]
    assert [p.split("/")[1].rsplit("-", 1)[0] for p in found] == [
        "nvidia-dcgm-exporter", "nvidia-mig-manager"
    ]  # fmt: skip


def test_a_blip_while_waiting_for_pods_is_waited_out_a_refusal_is_not(steps: Steps) -> None:
    steps.label(**{MANAGER: "false"})
    blip = Failing(steps.c.client, "list_pages", ApiError("the API server answered 503"), 2)
    wait_pods_gone(steps.ctx(blip), ("nvidia-mig-manager",), "the mig-manager pod is")
    assert blip.left == 0 and "nvidia-mig-manager" not in steps.apps()
    refused = Failing(steps.c.client, "list_pages", Forbidden("pods is forbidden", "list", "pods"))
    with pytest.raises(StepFailed) as failed:
        wait_pods_gone(steps.ctx(refused), ("nvidia-dcgm",), "GPU operand pods are")
    assert str(failed.value) == f"cannot list pods on {steps.node}: pods is forbidden"


def test_pods_that_never_go_fail_the_wait_at_its_timeout_naming_them(steps: Steps) -> None:
    ctx = steps.ctx(timeout=5)
    with pytest.raises(StepFailed) as failed:
        wait_pods_gone(ctx, ("nvidia-mig-manager",), "the mig-manager pod is")
    said = str(failed.value)
    assert said.startswith(
        f"the mig-manager pod is still running on {steps.node} after 5 s: gpu-operator/"
    )
    assert ctx.time_left() == 0  # waited until the timeout, not a poll past it


def test_an_api_server_back_in_the_last_second_of_the_wait_is_heard(steps: Steps) -> None:
    steps.label(**{MANAGER: "false"})
    late = Failing(steps.c.client, "list_pages", ApiError("the API server answered 503"), 3)
    ctx = steps.ctx(late, timeout=5)
    wait_pods_gone(ctx, ("nvidia-mig-manager",), "the mig-manager pod is")  # read at 0, 2, 4, 5 s
    assert late.left == 0 and ctx.time_left() == 0


def test_an_api_server_down_to_the_end_of_the_wait_fails_it(steps: Steps) -> None:
    down = Failing(steps.c.client, "list_pages", ApiError("the API server answered 503"), 99)
    with pytest.raises(StepFailed) as failed:
        wait_pods_gone(steps.ctx(down, timeout=5), ("nvidia-dcgm",), "GPU operand pods are")
    assert str(failed.value) == (f"cannot list pods on {steps.node}: the API server answered 503")


# -- resume-gpu-operands: what it puts back ----------------------------------------------------


def test_resume_puts_back_what_the_pause_found_and_marks_the_config_applied(
    steps: Steps,
) -> None:
    # the steps before it returned theirs first: resume reads the pause step's own output
    steps.outputs["preflight"] = {"config": "all-1g.10gb", "perGpu": {"1g.10gb": 7}}
    steps.outputs["mig-manager-off"] = {"labels": {MANAGER: "true"}, "set": {MANAGER: "false"}}
    steps.outputs["pause-operands"] = {"operandLabels": {
        DEPLOY + "device-plugin": "true", DEPLOY + "dcgm": PAUSED, DEPLOY + "nvsm": "false",
    }}  # fmt: skip
    wanted = ResumeGpuOperands().wanted(steps.ctx(), steps.labels())
    assert wanted == {
        DEPLOY + "device-plugin": "true", DEPLOY + "dcgm": "true", DEPLOY + "nvsm": "false",
        LABEL_MIG_CONFIG: "all-1g.10gb", LABEL_MIG_CONFIG_STATE: "success",
    }  # fmt: skip


def test_resume_planned_before_the_pause_ran_restores_what_it_will_pause(steps: Steps) -> None:
    steps.label(**{DEPLOY + "dcgm": "false", DEPLOY + "dcgm-exporter": PAUSED})
    wanted = ResumeGpuOperands().wanted(steps.ctx(), steps.labels())
    assert wanted == {
        DEPLOY + "device-plugin": "true", DEPLOY + "gpu-feature-discovery": "true",
        DEPLOY + "dcgm-exporter": "true",
        LABEL_MIG_CONFIG: "all-1g.10gb", LABEL_MIG_CONFIG_STATE: "success",
    }  # fmt: skip


def test_the_resume_plan_says_what_it_waits_for(steps: Steps) -> None:
    plan = plan_of(ResumeGpuOperands(), steps.ctx())
    assert not plan.nothing_to_do  # even with the labels as wanted: it waits for allocatable
    assert plan.notes[0].startswith("operand labels go back to what the pause step found")
    assert plan.notes[-1] == "then waits until allocatable shows nvidia.com/mig-1g.10gb=56"


def node_with(allocatable: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": {}}, "status": {"allocatable": allocatable}}


def test_allocatable_must_be_exactly_the_layout() -> None:
    want = {"nvidia.com/mig-1g.10gb": 56}
    assert allocatable_problem(node_with({"nvidia.com/mig-1g.10gb": "56", "cpu": "192"}),
                               want) is None  # fmt: skip
    assert allocatable_problem(node_with({"nvidia.com/mig-1g.10gb": "56",
                                          "nvidia.com/gpu": "0"}), want) is None  # fmt: skip
    assert allocatable_problem(node_with({}), want) == (
        "allocatable shows nvidia.com/mig-1g.10gb=(none); expected nvidia.com/mig-1g.10gb=56"
    )
    assert allocatable_problem(node_with({"nvidia.com/mig-1g.10gb": "56",
                                          "nvidia.com/gpu": "8"}), want) == (
        "allocatable shows 56×1g.10gb; expected nvidia.com/mig-1g.10gb=56"
    )  # fmt: skip
    assert allocatable_problem(node_with({"nvidia.com/gpu": "8"}), {"nvidia.com/gpu": 8}) is None
    assert allocatable_problem(node_with({"nvidia.com/gpu": "8"}), want) == (
        "allocatable shows nvidia.com/mig-1g.10gb=(none), nvidia.com/gpu=8; "
        "expected nvidia.com/mig-1g.10gb=56"
    )


# -- resume-gpu-operands: the wait for the new layout -------------------------------------------


def paused(steps: Steps, seconds: float) -> tuple[ResumeGpuOperands, StepPlan]:
    pause = PauseGpuOperands()
    steps.outputs["pause-operands"] = pause.apply(steps.ctx(), plan_of(pause, steps.ctx()))
    steps.c.sim.advance(seconds)
    resume = ResumeGpuOperands()
    return resume, plan_of(resume, steps.ctx())


@pytest.mark.parametrize(
    "paused_for",
    [1.5, 60],  # kubelet has not emptied allocatable yet / its restart dropped the resource
)
def test_resume_ends_once_a_new_device_plugin_advertises_the_layout(
    steps: Steps, paused_for: float
) -> None:
    resume, plan = paused(steps, paused_for)
    if paused_for > 10:  # a restarted kubelet lists an extended resource again once advertised
        status = {"allocatable": {"nvidia.com/mig-1g.10gb": None},
                  "capacity": {"nvidia.com/mig-1g.10gb": None}}  # fmt: skip
        steps.c.client.patch(NODES, steps.node, {"status": status}, subresource="status")
        assert "nvidia.com/mig-1g.10gb" not in steps.c.node(steps.node)["status"]["allocatable"]
    ctx = steps.ctx(params={"node": steps.node, "settle": "20s"})
    applied = resume.apply(ctx, plan)
    assert applied["expected"] == {"nvidia.com/mig-1g.10gb": 56}
    assert applied["summary"].startswith(
        f"{steps.node} stayed Ready and advertises nvidia.com/mig-1g.10gb=56: "
    )
    assert applied["summary"] in steps.log and "dra" not in applied
    labels = steps.labels()
    assert labels[LABEL_MIG_CONFIG_STATE] == "success" and labels[DEPLOY + "dcgm"] == "true"
    assert resume.verify(steps.ctx(), plan, applied) is None


class Pods:
    """A client whose pod listing is `pods` (one page), or fails with `error`."""

    def __init__(self, pods: list[dict[str, Any]], error: ClusterError | None = None) -> None:
        self.pods, self.error = pods, error

    def list_pages(self, resource: Any, **kw: Any) -> Any:
        if self.error is not None:
            raise self.error
        yield self.pods, "1"


def plugin_pod(created: str, phase: str = "Running", app: str = "nvidia-device-plugin-daemonset",
               deleting: str = "") -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": f"{app}-x", "namespace": "gpu-operator",
                            "labels": {"app": app}, "creationTimestamp": created}  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {"metadata": meta, "status": {"phase": phase}}


WRITTEN = datetime(2026, 11, 20, 12, 0, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("pods", "written", "trusted"),
    [
        ([plugin_pod("2026-11-20T12:00:09Z")], WRITTEN, True),  # Date headers: 1 s slack
        ([plugin_pod("2026-11-20T12:00:08Z")], WRITTEN, False),
        ([plugin_pod("2026-11-20T12:00:30Z", phase="Pending")], WRITTEN, False),
        ([plugin_pod("2026-11-20T12:00:30Z", deleting="2026-11-20T12:00:40Z")], WRITTEN, False),
        ([plugin_pod("2026-11-20T12:00:30Z", app="nvidia-dcgm")], WRITTEN, False),
        ([plugin_pod("")], WRITTEN, False),
        ([plugin_pod("2026-11-14T12:00:00Z")], None, True),  # not written by this run
        ([plugin_pod("2026-11-20T12:00:30Z", app="gpu-feature-discovery"),
          plugin_pod("2026-11-20T12:00:31Z")], WRITTEN, True),
    ],
)  # fmt: skip
def test_only_a_device_plugin_started_after_the_labels_were_restored_is_trusted(
    pods: list[dict[str, Any]], written: datetime | None, trusted: bool
) -> None:
    ctx = StepContext(client=cast(Any, Pods(pods)), params={"node": "n1"})
    said = ResumeGpuOperands._plugin_problem(ctx, written)
    assert said == (None if trusted else "no device plugin started on n1 since the labels were "
                    "restored")  # fmt: skip


def test_a_pod_listing_that_fails_is_waited_out_or_fails_the_step() -> None:
    blip = StepContext(client=cast(Any, Pods([], ApiError("the API server answered 503"))),
                       params={"node": "n1"})  # fmt: skip
    said = ResumeGpuOperands._plugin_problem(blip, WRITTEN)
    assert said == "cannot list pods on n1: the API server answered 503"
    refused = Forbidden("pods is forbidden", "list", "pods")
    ctx = StepContext(client=cast(Any, Pods([], refused)), params={"node": "n1"})
    with pytest.raises(StepFailed, match=r"^cannot list pods on n1: pods is forbidden$"):
        ResumeGpuOperands._plugin_problem(ctx, WRITTEN)


def test_resume_verify_wants_the_labels_a_ready_node_and_the_layout_advertised(
    steps: Steps,
) -> None:
    resume = ResumeGpuOperands()
    ok = {"set": {LABEL_MIG_CONFIG_STATE: "success"}, "expected": {"nvidia.com/mig-1g.10gb": 56}}
    assert resume.verify(steps.ctx(), StepPlan(), ok) is None
    seven = {**ok, "expected": {"nvidia.com/mig-1g.10gb": 7}}
    assert resume.verify(steps.ctx(), StepPlan(), seven) == (
        "allocatable shows 56×1g.10gb; expected nvidia.com/mig-1g.10gb=7"
    )
    assert resume.verify(steps.ctx(), StepPlan(), {**seven, "expected": {}}) is None
    pending = {**ok, "set": {LABEL_MIG_CONFIG_STATE: "pending"}}
    assert resume.verify(steps.ctx(), StepPlan(), pending) == (
        f"label {LABEL_MIG_CONFIG_STATE} is 'success', not 'pending'"
    )
    set_not_ready(steps.c, steps.node)
    said = resume.verify(steps.ctx(), StepPlan(), ok)
    assert said is not None and said.startswith(f"node {steps.node} is NotReady since ")
    assert said.endswith(
        f"; it stays cordoned: replace it: mignurse run replace-instance --node {steps.node}"
    )


def test_resume_on_a_node_that_does_not_say_its_gpu_count_expects_the_gpus_verify_read(
    steps: Steps,
) -> None:
    """No count label, no instance type: the layout's resources are per GPU, and only
    verify-mig-layout read how many GPUs there are (preflight could not tell)."""
    unknown: dict[str, str | None] = {
        "nvidia.com/gpu.count": None, "karpenter.k8s.aws/instance-gpu-count": None,
        "node.kubernetes.io/instance-type": None, "beta.kubernetes.io/instance-type": None,
    }  # fmt: skip
    steps.label(**unknown)
    steps.outputs["preflight"] = {"config": "all-1g.10gb", "family": "H100-80GB", "gpus": None,
                                  "perGpu": {"1g.10gb": 7}}  # fmt: skip
    steps.outputs["verify-layout"] = {"source": "nvml", "gpus": 8, "perGpu": {"1g.10gb": 7},
                                      "migUuids": []}  # fmt: skip
    resume = ResumeGpuOperands()
    ctx = steps.ctx(timeout=60, params={"node": steps.node, "settle": "12s"})
    applied = resume.apply(ctx, plan_of(resume, steps.ctx()))
    assert applied["expected"] == {"nvidia.com/mig-1g.10gb": 56}


# -- resume-gpu-operands on a DRA node: what the ResourceSlices must publish --------------------


def a100s(config: str = "all-1g.5gb") -> MigTarget:
    model, count = by_instance_type("p4d.24xlarge")  # type: ignore[misc]
    layout = expected_layout(config, model)
    assert layout is not None
    return MigTarget(Node(name="n"), {}, config, model, count, layout, "mixed")


def published_as(per_gpu: list[dict[str, int]]) -> NodeDevices:
    piece = ResourceSlice.from_api(resource_slice("n", per_gpu))
    return dra_devices_by_node([piece])["n"]


def test_slices_of_an_unknown_gpu_count_are_judged_by_their_layout_alone() -> None:
    assert published_problem(published_as([{"1g.5gb": 7}] * 3), a100s(), None) is None
    said = published_problem(published_as([{"1g.5gb": 7}, {"2g.10gb": 3}]), a100s(), None)
    assert said == "ResourceSlices publish GPU 1: 3×2g.10gb; expected 7×1g.5gb per GPU"


def test_dynamic_mig_slices_offer_placements_and_need_no_layout() -> None:
    offered = replace(published_as([{"2g.10gb": 3}] * 8), dynamic=True)
    assert published_problem(offered, a100s(), 8) is None


class DraNode:
    """A g7e node of mig-dra-healthy: its slices publish 4 × 1g.24gb, its DRA kubelet plugin
    pod runs since 2026-11-18T12:00:45Z; the cluster's clock stands at 2026-11-20T12:00."""

    PLUGIN_STARTED = datetime(2026, 11, 18, 12, 0, 45, tzinfo=UTC)

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.node = sorted(
            n["metadata"]["name"]
            for n in c.sim.objects("nodes")
            if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-mig-dra"
        )[0]
        self.journal: list[tuple[str, dict[str, Any]]] = []
        devices = node_dra(c.client, self.node).devices
        assert devices is not None
        self.made = frozenset(d.uuid for d in devices.migs)

    def ctx(self, client: Any = None) -> SimContext:
        return SimContext(
            client=client or self.c.client, params={"node": self.node}, run_id="r1",
            holder="t@x", sim=self.c.sim, journal=lambda e, f: self.journal.append((e, f)),
        )  # fmt: skip

    def published(
        self, uuids: frozenset[str], written: datetime | None, restarted: bool = False,
        client: Any = None, config: str = "",
    ) -> tuple[str | None, bool]:  # fmt: skip
        ctx, read = self.ctx(client), self.ctx()  # the target read beside the reads judged
        if config:
            ctx.params["config"] = read.params["config"] = config
        target = resolve_target(read)
        return ResumeGpuOperands._published(ctx, target, 1, uuids, written, restarted)

    def plugins(self) -> list[str]:
        return [
            p["metadata"]["name"] for p in self.c.pods_on(self.node)
            if "kubelet-plugin" in p["metadata"]["name"]
            and not p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip

    def ago(self, seconds: float) -> datetime:
        return self.c.client.server_now() - timedelta(seconds=seconds)


@pytest.fixture
def dra(cluster_for: Make) -> DraNode:
    return DraNode(cluster_for("mig-dra-healthy"))


def test_slices_publishing_the_devices_verify_read_are_trusted(dra: DraNode) -> None:
    assert dra.published(dra.made, dra.ago(60)) == (None, False)
    assert dra.plugins()


def test_slices_of_devices_made_before_the_reconfigure_wait_for_the_grace(dra: DraNode) -> None:
    stale = (
        "ResourceSlices publish 4 MIG device(s) the GPUs no longer have (published before the "
        "reconfigure)"
    )
    assert dra.published(frozenset({"MIG-new-1"}), dra.ago(20)) == (stale, False)
    assert dra.plugins() and not [e for e, _f in dra.journal if e == "intent"]


def test_a_plugin_that_keeps_the_old_devices_past_the_grace_is_restarted_once(
    dra: DraNode,
) -> None:
    [plugin] = dra.plugins()
    problem, restarted = dra.published(frozenset({"MIG-new-1"}), dra.ago(31))
    assert problem is not None and restarted
    assert plugin not in dra.plugins()
    intents = [f["change"] for e, f in dra.journal if e == "intent"]
    assert intents == [
        f"delete pod nvidia-dra-driver-gpu/{plugin} (the DRA kubelet plugin) so it enumerates "
        "the MIG devices"
    ]
    assert ("restarted-dra-plugin", {"pod": f"nvidia-dra-driver-gpu/{plugin}"}) in dra.journal
    dra.c.sim.advance(5)  # its DaemonSet starts another; that one is not restarted again
    again = dra.published(frozenset({"MIG-new-1"}), dra.ago(60), restarted=True)
    assert again[1] and len([e for e, _f in dra.journal if e == "intent"]) == 1


def test_without_the_write_time_the_plugin_is_never_restarted(dra: DraNode) -> None:
    said = dra.published(frozenset({"MIG-new-1"}), None)
    assert said[0] is not None and not said[1] and dra.plugins()
    assert dra.published(frozenset(), None) == (None, False)


@pytest.mark.parametrize(("after", "fresh"), [(1.0, True), (1.5, False), (0.0, True), (2.0, False)])
def test_without_uuids_only_a_plugin_started_since_the_write_is_trusted(
    dra: DraNode, after: float, fresh: bool
) -> None:
    """Date headers have a resolution of a second: a plugin started up to a second before
    the write may have started after it."""
    written = DraNode.PLUGIN_STARTED + timedelta(seconds=after)
    problem, restarted = dra.published(frozenset(), written)
    late = f"no DRA kubelet plugin started on {dra.node} since the reconfigure"
    assert problem == (None if fresh else late)
    assert restarted is not fresh  # the write was two days ago: the grace is long over


def test_a_dra_read_that_fails_is_waited_out_or_fails_the_step(dra: DraNode) -> None:
    busy = Failing(dra.c.client, "list", ApiError("the API server answered 503"), 2)
    assert dra.published(dra.made, dra.ago(60), client=busy) == (
        f"cannot read the DRA devices of {dra.node}: the API server answered 503",
        False,
    )
    refused = Failing(dra.c.client, "list", Forbidden("forbidden", "list", "resourceslices"))
    with pytest.raises(StepFailed, match=f"^cannot read the DRA devices of {dra.node}: "):
        dra.published(dra.made, dra.ago(60), client=refused)


def test_a_plugin_already_restarted_or_started_since_the_write_is_not_restarted(
    dra: DraNode,
) -> None:
    stale = frozenset({"MIG-new-1"})
    problem, restarted = dra.published(stale, dra.ago(3600), restarted=True)
    assert problem is not None and restarted
    problem, restarted = dra.published(stale, DraNode.PLUGIN_STARTED)  # started at the write
    assert problem is not None and not restarted
    assert dra.plugins() and not [e for e, _f in dra.journal if e == "intent"]


def test_without_a_plugin_pod_to_see_the_slices_alone_are_judged(dra: DraNode) -> None:
    """The plugin pods are not visible (another namespace's RBAC, or between two pods): the
    slices that publish the layout are trusted, and there is no pod to restart."""
    [plugin] = dra.plugins()
    dra.c.client.delete(PODS, plugin, "nvidia-dra-driver-gpu")
    assert not dra.plugins()
    assert dra.published(frozenset(), dra.ago(3600)) == (None, False)
    problem, restarted = dra.published(frozenset({"MIG-new-1"}), dra.ago(3600))
    assert problem is not None and not restarted


def test_a_dra_plugin_that_keeps_publishing_gone_devices_is_restarted_once_then_fails(
    dra: DraNode,
) -> None:
    """verify-mig-layout read new MIG devices; the slices still list the old ones, and a
    restarted plugin brings back the same: the step fails naming them, the node not served."""
    outputs = {"verify-layout": {"source": "nvml", "gpus": 1, "perGpu": {"1g.24gb": 4},
                                 "migUuids": ["MIG-made-by-this-run"]}}  # fmt: skip
    ctx = SimContext(
        client=dra.c.client, params={"node": dra.node, "settle": "60s"}, run_id="r1",
        holder="t@x", sim=dra.c.sim, outputs=outputs, timeout=36,
        journal=lambda e, f: dra.journal.append((e, f)),
    )  # fmt: skip
    resume = ResumeGpuOperands()
    with pytest.raises(StepFailed) as failed:
        resume.apply(ctx, StepPlan.from_json(resume.plan(ctx).to_json()))
    assert str(failed.value).startswith(
        "after 36 s ResourceSlices publish 4 MIG device(s) the GPUs no longer have"
    )
    assert [e for e, _f in dra.journal].count("restarted-dra-plugin") == 1


def test_a_dra_node_that_is_not_ready_is_not_served_whatever_its_slices_say(
    dra: DraNode,
) -> None:
    set_not_ready(dra.c, dra.node)
    outputs = {"verify-layout": {"source": "nvml", "gpus": 1, "perGpu": {"1g.24gb": 4},
                                 "migUuids": sorted(dra.made)}}  # fmt: skip
    ctx = SimContext(
        client=dra.c.client, params={"node": dra.node, "settle": "12s"}, run_id="r1",
        holder="t@x", sim=dra.c.sim, outputs=outputs, timeout=8,
    )  # fmt: skip
    resume = ResumeGpuOperands()
    with pytest.raises(StepFailed) as failed:
        resume.apply(ctx, StepPlan.from_json(resume.plan(ctx).to_json()))
    assert str(failed.value).startswith(f"after 8 s node {dra.node} is NotReady since ")


def test_undo_of_a_run_that_turned_mig_manager_off_turns_it_back_on(
    steps: Steps, state_home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "manager-off.yaml"
    path.write_text(
        "name: manager-off\ntitle: mig-manager off\ntarget: node\nundo: never\n"
        "params:\n  node: {type: node, required: true}\n"
        "steps:\n  - id: manager\n    action: mig-manager-off\n    timeout: 60\n"
    )
    book = load_runbook(path)
    steps.label(**{MANAGER: "false"})  # its pod would take cluster time to go: gone already
    steps.c.sim.advance(30)
    steps.label(**{MANAGER: "true"})
    ran = Runner(book, {"node": steps.node}, client=steps.c.client, yes=True).run()
    assert ran.status == "succeeded", ran.error
    assert steps.labels()[MANAGER] == "false"
    stopped = RunState.load(ran.run_id)
    stopped.status = INTERRUPTED  # as if stopped right after it
    stopped.save()

    undone = Runner.from_state(ran.run_id, client=steps.c.client, books={book.name: book},
                               yes=True).undo()  # fmt: skip

    assert undone.status == "undone", (undone.error, undone.report_lines())
    assert steps.labels()[MANAGER] == "true"


@pytest.mark.parametrize("uuids", [frozenset({"MIG-new-1"}), frozenset()])
def test_slices_of_the_wrong_layout_are_told_as_such_before_their_age(
    dra: DraNode, uuids: frozenset[str]
) -> None:
    """The node was to get 2g.48gb; its slices publish 1g.24gb devices: that is what the
    operator needs to read, whether or not verify-mig-layout named the devices."""
    problem, _restarted = dra.published(uuids, dra.ago(10), config="all-2g.48gb")
    assert problem == "ResourceSlices publish GPU 0: 4×1g.24gb; expected 2×2g.48gb per GPU"
