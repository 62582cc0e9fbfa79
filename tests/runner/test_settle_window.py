"""A node counts as serving only after every read for the settle window found it so
(mignurse/runner/steps/settle.py): a replacement that goes NotReady a minute after its first
Ready (MIG reconfiguration stopping kubelet mid-bootstrap, DCGM failing under the node
monitoring agent: docs/repair.md) is not called a success on one good read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.model import Node
from mignurse.runner.step import StepContext
from mignurse.runner.steps.settle import (
    DEFAULT_SETTLE_SECONDS,
    Settle,
    gpus_advertised,
    serving_problem,
    settle_seconds,
)

T0 = datetime(2026, 11, 20, 13, 20, 5, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(
    ready: str = "True",
    *,
    reason: str = "",
    message: str = "",
    ahr: str | None = None,
    deleting: str | None = None,
    allocatable: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready, "reason": reason, "message": message}]
    if ahr is not None:
        conditions.append(
            {"type": "AcceleratedHardwareReady", "status": ahr, "reason": "DCGMError"}
        )
    meta: dict[str, Any] = {"name": "n1", "labels": {}}
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {
        "metadata": meta,
        "spec": {},
        "status": {
            "conditions": conditions,
            "allocatable": allocatable or {},
            "capacity": capacity or {},
        },
    }


def test_one_good_read_is_a_sample_not_a_settled_node() -> None:
    settle = Settle(window=60)
    assert settle.observe(at(0), None) is False
    assert settle.observe(at(59), None) is False
    assert settle.observe(at(60), None) is True
    assert settle.served_for() == "served for 60 s of cluster time (13:20:05Z–13:21:05Z, 3 reads)"


def test_a_node_that_turns_bad_inside_the_window_starts_again_from_zero() -> None:
    settle = Settle(window=60)
    settle.observe(at(0), None)
    settle.observe(at(20), None)
    assert settle.observe(at(40), "NotReady (KubeletNotReady: container runtime is down)") is False
    assert settle.serving_since is None and settle.served_for() == ""
    assert settle.observe(at(50), None) is False
    assert settle.observe(at(109), None) is False
    assert settle.observe(at(110), None) is True
    assert settle.ever_served
    assert settle.story() == (
        "serving 13:20:05Z–13:20:25Z, then NotReady (KubeletNotReady: container runtime is "
        "down) at 13:20:45Z, then serving 13:20:55Z–13:21:55Z"
    )


def test_a_node_never_serving_has_a_story_and_no_service() -> None:
    settle = Settle(window=60)
    assert settle.story() == "never read"
    for i in range(6):
        settle.observe(at(10 * i), "gone" if i % 2 else "NotReady")
    assert not settle.ever_served and not settle.settled
    assert settle.story(limit=2).startswith("…, then ")
    assert settle.reads == 6


def test_a_read_out_of_order_opens_a_new_episode() -> None:
    settle = Settle(window=10)
    settle.observe(at(30), None)
    settle.observe(at(10), None)  # an older answer arriving late is not a longer service
    assert not settle.settled
    assert len(settle.episodes) == 2


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, "gone"),
        (node(deleting="2026-11-20T13:20:05Z"), "being deleted since 13:20:05Z"),
        (node("False", reason="KubeletNotReady", message="PLEG is  not healthy"),
         "NotReady (KubeletNotReady: PLEG is not healthy)"),
        (node("Unknown"), "Unknown"),
        (node(ahr="False"), "AcceleratedHardwareReady=False (DCGMError)"),
        (node(ahr="True"), None),
        (node(), None),
    ],
)  # fmt: skip
def test_serving_means_ready_not_deleting_and_its_gpus_healthy(
    raw: dict[str, Any] | None, problem: str | None
) -> None:
    assert serving_problem(raw) == problem


def test_a_node_without_its_gpus_advertised_is_not_serving_yet() -> None:
    ready = node()
    assert serving_problem(ready, gpus_advertised) == "no GPUs advertised yet"
    held = node(capacity={"nvidia.com/gpu": "8"}, allocatable={"nvidia.com/gpu": "0"})
    assert serving_problem(held, gpus_advertised) == (
        "GPUs in capacity but none allocatable (device plugin not serving)"
    )
    serving = node(capacity={"nvidia.com/gpu": "8"}, allocatable={"nvidia.com/gpu": "8"})
    assert serving_problem(serving, gpus_advertised) is None
    assert gpus_advertised(Node.from_api(serving)) is None


def test_the_settle_window_is_the_runbooks_param_or_two_minutes() -> None:
    def ctx(**params: Any) -> StepContext:
        return StepContext(client=None, params=params)  # type: ignore[arg-type]

    assert settle_seconds(ctx()) == DEFAULT_SETTLE_SECONDS == 120.0
    assert settle_seconds(ctx(settle="5m")) == 300.0
    assert settle_seconds(ctx(settle=45)) == 45.0
