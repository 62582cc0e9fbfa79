"""The contract between the engine and its steps (mignurse/runner/step.py), as a crash or a
retry meets it: the first prior value recorded wins, a change is announced before it is sent
and stops for Ctrl-C or a lost lock, only failures that may pass are tried again, and a plan
survives the trip through the run state unchanged."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.client import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    TooManyRequests,
    Unreachable,
)
from mignurse.runner.step import (
    ACTIONS,
    Action,
    Cancelled,
    Change,
    ClusterPace,
    Harm,
    LockLost,
    NodeCommand,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    merge_first,
    transient,
)


def ctx(**kw: Any) -> StepContext:
    return StepContext(client=None, params={"node": "n1"}, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("failure", "passes"),
    [
        (Unreachable("cannot reach the Kubernetes API at https://x: timed out"), True),
        (TooManyRequests("the API server answered 429"), True),
        (ApiError("the API server answered 503 to patch nodes"), True),
        (ApiError("the API server answered 500 to patch nodes"), True),
        (ApiError("the API server answered 5000 things"), False),
        (ApiError("the API server answered 422 to patch nodes"), False),
        (Forbidden("RBAC refused: cannot patch nodes", "patch", "nodes"), False),
        (NotFound("nodes n1 not found"), False),
        (Conflict("the object has been modified"), False),
        (StepFailed("cannot list", retryable=True), True),
        (StepFailed("cannot list"), False),
        (ValueError("answered 503"), False),
    ],
)
def test_only_a_failure_that_may_pass_on_its_own_is_tried_again(
    failure: BaseException, passes: bool
) -> None:
    assert transient(failure) is passes


def test_the_first_prior_value_recorded_wins_at_every_depth() -> None:
    prior: dict[str, Any] = {"labels": {"a": "true"}, "wasUnschedulable": False}
    merge_first(prior, {"labels": {"a": "paused", "b": "false"}, "wasUnschedulable": True, "x": 1})
    assert prior == {"labels": {"a": "true", "b": "false"}, "wasUnschedulable": False, "x": 1}
    merge_first(prior, {"labels": "flat now"})  # a value of another shape never replaces one
    assert prior["labels"] == {"a": "true", "b": "false"}


def test_a_recorded_prior_is_a_copy_the_caller_cannot_change_later() -> None:
    given = {"labels": {"a": "true"}}
    prior: dict[str, Any] = {}
    merge_first(prior, given)
    given["labels"]["a"] = "paused"
    assert prior == {"labels": {"a": "true"}}


def test_a_change_is_journalled_with_its_prior_before_it_is_sent() -> None:
    journal: list[tuple[str, dict[str, Any]]] = []
    step = ctx(journal=lambda event, fields: journal.append((event, fields)))

    assert step.intend("cordon node n1", {"wasUnschedulable": False}) == {"wasUnschedulable": False}
    step.intend("cordon node n1 again", {"wasUnschedulable": True})

    assert journal == [
        ("intent", {"change": "cordon node n1", "prior": {"wasUnschedulable": False}}),
        ("intent", {"change": "cordon node n1 again", "prior": {"wasUnschedulable": False}}),
    ]


def test_after_ctrl_c_no_change_is_announced() -> None:
    journal: list[str] = []
    step = ctx(journal=lambda event, fields: journal.append(event))
    step.cancel.set()
    with pytest.raises(Cancelled):
        step.intend("evict pod ml/trainer")
    assert journal == []


def test_after_the_lock_is_lost_no_change_is_announced() -> None:
    journal: list[str] = []

    def lost() -> None:
        raise LockLost("lock lost: node n1 is now locked by bob@box")

    step = ctx(journal=lambda event, fields: journal.append(event), guard=lost)
    with pytest.raises(LockLost):
        step.intend("evict pod ml/trainer", {"x": 1})
    assert journal == [] and step.prior == {}


def test_ctrl_c_while_the_change_is_being_recorded_stops_before_it_is_sent() -> None:
    step = ctx()
    step.journal = lambda event, fields: step.cancel.set()  # Ctrl-C during the write
    with pytest.raises(Cancelled):
        step.intend("terminate instance i-0abc")


def test_a_steps_sleep_wakes_for_ctrl_c_and_its_deadline_is_its_timeout() -> None:
    step = ctx(timeout=90)
    assert step.deadline() == step.started + 90
    assert 0 < step.time_left() <= 90
    threading.Timer(0.2, step.cancel.set).start()
    with pytest.raises(Cancelled):
        step.sleep(60)
    with pytest.raises(Cancelled):
        step.sleep(-1)  # no wait at all, and still it says Ctrl-C was pressed
    ctx().sleep(-1)  # a negative wait is no wait


def test_a_steps_with_value_comes_before_the_runbooks_param() -> None:
    step = StepContext(
        client=None,  # type: ignore[arg-type]
        params={"node": "n1", "timeout": "10m", "reason": "from the runbook"},
        with_args={"reason": "from the step"},
    )
    assert step.param("reason") == "from the step"
    assert step.param("timeout") == "10m"
    assert step.param("absent", "default") == "default"
    assert step.node == "n1"


def test_a_plan_goes_through_the_run_state_unchanged() -> None:
    plan = StepPlan(
        changes=[Change("node/n1", "spec.unschedulable", False, True)],
        commands=[NodeCommand("n1", ("nvidia-smi", "-L"), "list the GPUs")],
        notes=["a note"],
        nothing_to_do=True,
        data={"uid": "u-1"},
    )
    assert StepPlan.from_json(plan.to_json()) == plan
    assert StepPlan.from_json({}) == StepPlan()


def test_a_plan_is_worded_for_an_operator() -> None:
    assert Change("node/n1", "annotation x", None, "v").describe() == (
        "node/n1: annotation x (absent) → 'v'"
    )
    assert NodeCommand("n1", ("nvidia-smi", "-L")).describe() == "on n1: nvidia-smi -L"
    assert NodeCommand("n1", ("true",), "why").describe() == "on n1: true  (why)"


def test_a_step_without_an_undo_refuses_it_and_the_defaults_are_safe() -> None:
    class Plain(Action):
        pass

    plain = Plain()
    assert plain.mutates is True and plain.can_undo is False and plain.retries == 0
    assert plain.harm is Harm.LOW and plain.timeout == 120.0
    with pytest.raises(StepFailed, match="cannot be undone"):
        plain.undo(ctx(), StepPlan(), {})
    with pytest.raises(NotImplementedError):
        plain.apply(ctx(), StepPlan())
    assert plain.check(ctx()) is None and plain.plan(ctx()) == StepPlan()
    assert plain.verify(ctx(), StepPlan(), {}) is None
    assert plain.undone(ctx(), StepPlan(), {}) is None
    assert plain.undo_barrier(ctx(), StepPlan(), {}) is None


def test_harm_levels_are_ordered_for_the_confirmation() -> None:
    assert Harm.NONE < Harm.LOW < Harm.HIGH
    assert max(Harm.LOW, Harm.HIGH, Harm.NONE) is Harm.HIGH


def test_an_action_name_is_registered_once() -> None:
    assert ACTIONS["cordon"].name == "cordon"
    with pytest.raises(ValueError, match="action 'cordon' registered twice"):

        @action("cordon")
        class Again(Action):
            pass


def test_a_steps_failure_is_its_one_line_and_is_tried_again_only_when_it_says_so() -> None:
    plain = StepFailed("cannot patch node n1: the API server answered 422")
    assert str(plain) == "cannot patch node n1: the API server answered 422"
    assert (plain.retryable, plain.conflict, transient(plain)) == (False, False, False)
    blip = StepFailed("cannot list the pods of n1", retryable=True)
    assert (blip.retryable, blip.conflict, transient(blip)) == (True, False, True)


def test_a_prior_recorded_as_a_plain_value_stays_when_a_mapping_comes_later() -> None:
    prior: dict[str, Any] = {"labels": None}
    merge_first(prior, {"labels": {"a": "true"}})
    assert prior == {"labels": None}


class ServerClock:
    """The API server's clock as a simulator runs it: `rate` times this machine's."""

    def __init__(self, now: list[float], rate: float) -> None:
        self.now = now
        self.rate = rate

    def server_now(self) -> datetime:
        return datetime(2026, 11, 20, 12, tzinfo=UTC) + timedelta(seconds=self.now[0] * self.rate)


def test_a_wait_in_cluster_time_learns_how_fast_the_clusters_clock_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    pace = ClusterPace()
    clock = ServerClock(now, rate=10.0)

    pace.note(clock.server_now())
    now[0] += 2.0  # two seconds here, twenty on the simulated cluster
    pace.note(clock.server_now())

    assert pace.rate == 10.0
    assert pace.real_seconds(20.0) == 2.0


def test_a_wait_in_cluster_time_wakes_for_ctrl_c() -> None:
    step = StepContext(client=ServerClock([0.0], 1.0), params={})  # type: ignore[arg-type]
    step.cancel.set()
    with pytest.raises(Cancelled):
        step.sleep_cluster(20.0, longest=5.0)
