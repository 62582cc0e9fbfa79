"""The reads a settle window is judged on (mignurse/runner/steps/settle.py), as the API server
answers them: its Date header has one-second resolution, so two reads may carry the same time;
a g6.xlarge has a single GPU; a device plugin that lost its devices reports 0, not nothing."""

from __future__ import annotations

from typing import Any

from mignurse.model import Node
from mignurse.runner.steps.settle import Settle, gpus_advertised, serving_problem

from .test_settle_window import at, node


def test_two_reads_in_the_same_second_do_not_restart_the_window() -> None:
    settle = Settle(window=60)
    settle.observe(at(0), None)
    settle.observe(at(30), None)
    settle.observe(at(30), None)  # a second read inside the same Date-header second
    assert settle.observe(at(60), None) is True
    assert settle.story() == "serving 13:20:05Z–13:21:05Z"


def test_a_node_not_read_yet_has_served_for_nothing() -> None:
    settle = Settle(window=60)
    assert settle.serving_since is None
    assert settle.settled is False
    assert settle.served_for() == ""


def test_a_story_of_four_episodes_is_told_whole_and_a_longer_one_from_its_last_four() -> None:
    def flapping(episodes: int) -> Settle:
        settle = Settle(window=60)
        for i in range(episodes):
            settle.observe(at(10 * i), None if i % 2 == 0 else "NotReady (KubeletNotReady)")
        return settle

    four = flapping(4).story()
    assert not four.startswith("…"), four
    assert four.count(", then ") == 3
    six = flapping(6).story()
    assert six == (
        "…, then serving at 13:20:25Z, then NotReady (KubeletNotReady) at 13:20:35Z, "
        "then serving at 13:20:45Z, then NotReady (KubeletNotReady) at 13:20:55Z"
    )


def gpus(capacity: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return node(capacity=capacity, allocatable=allocatable)


def test_a_single_gpu_node_serves_once_its_one_gpu_is_allocatable() -> None:
    one = gpus({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})
    assert serving_problem(one, gpus_advertised) is None
    assert gpus_advertised(Node.from_api(one)) is None


def test_a_single_gpu_in_capacity_without_allocatable_is_a_plugin_not_serving() -> None:
    held = gpus({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "0"})
    assert serving_problem(held, gpus_advertised) == (
        "GPUs in capacity but none allocatable (device plugin not serving)"
    )


def test_zero_gpus_in_capacity_is_none_advertised_yet() -> None:
    empty = gpus({"nvidia.com/gpu": "0"}, {"nvidia.com/gpu": "0"})
    assert serving_problem(empty, gpus_advertised) == "no GPUs advertised yet"
