"""Running a runbook again sees what an interrupted run left: the plan names the other run,
what of it the cluster still shows, and the exact `--resume`/`--undo` that settles it; a new
run of the same runbook never starts over it (it would take that run's changes for the state
it found), and a run of another runbook is told about it before and after."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.leftovers import unfinished_runs

from .enginehelpers import Cluster
from .interrupthelpers import (
    DEPLOY,
    DyingClient,
    Killed,
    book,
    dead_pid,
    is_lock_patch,
    node_view,
    resumed,
    shells,
)
from .test_interruptions import PAUSED, When, healthy_g7e, on

Make = Callable[..., Cluster]


def _interrupted_reapply(c: Cluster, tmp_path: Path) -> tuple[str, str, st.RunState]:
    """reapply-mig-no-hooks stopped by Ctrl-C as its operands pause: the node is cordoned by it
    and its operand labels are paused. (node, run id, its state)"""
    node = healthy_g7e(c)
    reapply = book("reapply-mig-no-hooks", tmp_path)
    runner: Runner
    stop = When(on("output", "pause-operands", "labelled"), lambda: runner.cancel())
    runner = Runner(
        reapply, {"node": node}, client=c.client, shell_for=shells(c, tmp_path / "sb"),
        yes=True, listener=stop,
    )  # fmt: skip
    result = runner.run()
    assert result.status == "interrupted", (result.error, result.report_lines())
    return node, result.run_id, st.RunState.load(result.run_id)


def test_running_reapply_again_after_an_interrupted_one_is_refused_with_what_it_left(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)
    node, first, _state = _interrupted_reapply(c, tmp_path)
    left = node_view(c, node)
    assert left["unschedulable"] and left["labels"][DEPLOY + "device-plugin"] == PAUSED
    reapply = book("reapply-mig-no-hooks", tmp_path)

    again = Runner(reapply, {"node": node}, client=c.client, shell_for=shells(c, tmp_path),
                   yes=True).run()  # fmt: skip

    assert again.status == "blocked" and again.exit_code == 1
    said = again.error
    assert said.startswith(
        f"run {first} (reapply-mig-no-hooks, interrupted at step pause-operands) left: "
        f"node {node} cordoned by it (mignurse.io/cordoned-by); GPU operands paused on {node} ("
    ), said
    assert (
        f"=paused-for-mig-change); node {node} held off Karpenter's consolidation by it "
        f"(karpenter.sh/do-not-disrupt); `mignurse run --resume {first}` continues from step "
    ) in said
    assert f"; `mignurse run --undo {first}` undoes " in said
    assert said.endswith("; then run this again")
    assert node_view(c, node) == left  # refused before anything changed
    assert again.plan is not None and again.plan.text().splitlines()[1] == f"BLOCKED: {said}"

    # The instruction works: the undo puts the node back, and then the runbook runs again.
    undone = resumed(first, c, [reapply], tmp_path / "sb").undo()
    assert undone.status == "undone", (undone.error, undone.report_lines())
    assert not unfinished_runs(c.client.info.context, node)
    plan = Runner(reapply, {"node": node}, client=c.client, shell_for=shells(c, tmp_path),
                  yes=True).plan()  # fmt: skip
    assert not plan.refusal and not plan.leftovers


def test_another_runbook_on_the_node_is_shown_the_leftovers_and_not_refused(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)
    node, first, _state = _interrupted_reapply(c, tmp_path)

    plan = Runner(book("cordon-and-collect", tmp_path), {"node": node}, client=c.client,
                  yes=True).plan()  # fmt: skip

    assert not plan.refusal
    (line,) = plan.leftovers
    assert line.startswith(f"run {first} (reapply-mig-no-hooks, interrupted at step ")
    assert f"left by another run: {line}" in plan.text()


def test_a_node_made_after_the_run_began_is_another_node_under_a_reused_name(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)
    node, first, state = _interrupted_reapply(c, tmp_path)
    created = c.node(node)["metadata"]["creationTimestamp"]  # 2026-11-…, by the sim's clock
    # The run's own clock put it a month before the node existed: that node was replaced since
    # and its name (the private IP) given to a new one; ten minutes of skew are forgiven.
    state.created = "2026-10-01T00:00:00.000000Z"
    state.save()
    assert created > state.created

    plan = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node}, client=c.client,
                  shell_for=shells(c, tmp_path), yes=True).plan()  # fmt: skip

    assert not plan.leftovers and not plan.refusal.startswith(f"run {first}")


def test_a_run_still_alive_on_the_node_refuses_a_new_one(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)
    node, first, state = _interrupted_reapply(c, tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state.status, state.pid = st.RUNNING, other.pid  # as if that run were still going
        state.save()

        plan = Runner(book("cordon", tmp_path), {"node": node}, client=c.client,
                      yes=True).plan()  # fmt: skip
    finally:
        other.kill()
        other.wait()

    assert plan.refusal == (
        f"run {first} (reapply-mig-no-hooks, running at step pause-operands) is still running: "
        "wait for it, or stop it where it runs"
    )


def test_a_run_interrupted_before_its_first_change_left_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    runner: Runner
    stop = When(on("step-started", "cordon"), lambda: runner.cancel())
    runner = Runner(cordon, {"node": node}, client=c.client, yes=True, listener=stop)
    assert runner.run().status == "interrupted"

    again = Runner(cordon, {"node": node}, client=c.client, yes=True).run()

    assert again.status == "succeeded", (again.error, again.report_lines())


def test_a_killed_pause_of_node_repair_is_named_by_the_next_pause(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop", speed=30)  # the resumed pause waits for its rollout
    pause = book("pause-node-repair", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "patch" and not is_lock_patch(args))
    killed = Runner(pause, {}, client=dying, yes=True)  # type: ignore[arg-type]
    with contextlib.suppress(Killed):
        killed.run()
    # That process is gone: its state still says running, with a pid that no longer runs.
    saved = st.RunState.load(killed.run_id)
    saved.pid = dead_pid()
    saved.save()

    again = Runner(pause, {}, client=c.client, yes=True).run()

    assert again.status == "blocked"
    assert again.error.startswith(
        f"run {killed.run_id} (pause-node-repair, killed at step pause) left: its lock "
        "(mignurse.io/lock) on cluster ml-prod-usw2; node repair paused by it since "
    ), again.error
    assert f"`mignurse run --resume {killed.run_id}` " in again.error
    assert f"`mignurse run --undo {killed.run_id}` undoes pause" in again.error

    done = resumed(killed.run_id, c, [pause], tmp_path).run()
    assert done.status == "succeeded", (done.error, done.report_lines())
    assert Runner(pause, {}, client=c.client, yes=True).plan().refusal == ""


def test_leftovers_are_settled_by_context_and_target_only(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)
    node, first, state = _interrupted_reapply(c, tmp_path)
    elsewhere = dataclasses.replace(state, run_id="0ther0ne", context="prod-us-east-2")
    elsewhere.save()

    found = unfinished_runs(c.client.info.context, node)

    assert [r.run_id for r in found] == [first]
    assert unfinished_runs(c.client.info.context, "ip-10-9-9-9.ec2.internal") == []
