"""What another run left on a node, judged from its saved state and read back from the cluster
(mignurse/runner/leftovers.py), one run state at a time: a run of this very process left
`running` is named killed, a run alive elsewhere is named before its first change, a node gone
is said, a node made after the run began is another node, and where a run stopped."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.leftovers import Leftover, find_leftovers
from mignurse.runner.lock import LOCK_ANNOTATION, lock_resource
from mignurse.runner.outcome import Followup
from mignurse.runner.steps.kube import CORDONED_BY

from .enginehelpers import Cluster
from .mighelpers import ready_mig_node

Make = Callable[..., Cluster]
FOLLOWUPS = {
    "resume": Followup(True, "continues from step pause-operands"),
    "undo": Followup(False, "the node is gone"),
}


def saved(c: Cluster, target: str, *steps: st.StepState, **kw: object) -> st.RunState:
    run = st.RunState(
        run_id=str(kw.pop("run_id", st.new_run_id())), runbook="reapply-mig-no-hooks",
        params={"node": target}, context=c.client.info.context, cluster="ml-train-usw2",
        target=target, holder="alice@laptop", steps=list(steps), **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    run.save()
    return run


def touched(step_id: str, status: str = st.FAILED, action: str = "") -> st.StepState:
    return st.StepState(step_id, action or step_id, status=status, intents=1)


def found(c: Cluster, target: str, exclude: str = "") -> list[Leftover]:
    return find_leftovers(
        c.client, node_target=True, target=target, exclude=exclude,
        followups=lambda run: dict(FOLLOWUPS),
    )  # fmt: skip


@pytest.fixture
def c(cluster_for: Make, state_home: Path) -> Cluster:
    return cluster_for("mig-hook-notready")


def test_a_run_of_this_process_left_running_is_named_killed(c: Cluster) -> None:
    """The app's own earlier run whose thread died: its state still says running."""
    node = ready_mig_node(c)
    run = saved(c, node, touched("pause-operands"), status=st.RUNNING)
    [left] = found(c, node)
    assert (left.run_id, left.status, left.alive) == (run.run_id, "killed", False)
    assert left.describe().startswith(
        f"run {run.run_id} (reapply-mig-no-hooks, killed at step pause-operands) left: "
    )


def test_a_run_alive_on_another_host_is_named_before_its_first_change(c: Cluster) -> None:
    node = ready_mig_node(c)
    run = saved(c, node, st.StepState("preflight", "mig-preflight"), status=st.RUNNING,
                host="bastion-2")  # fmt: skip
    [left] = found(c, node)
    assert left.alive and left.status == "running on bastion-2" and not left.followups
    assert left.describe() == (
        f"run {run.run_id} (reapply-mig-no-hooks, running on bastion-2 before step preflight) "
        "is still running: wait for it, or stop it where it runs"
    )
    assert found(c, node, exclude=run.run_id) == []


def test_a_node_gone_since_the_run_is_said(c: Cluster) -> None:
    gone = "ip-10-0-99-99.us-west-2.compute.internal"
    run = saved(c, gone, touched("cordon", st.VERIFIED), st.StepState("drain", "drain"),
                status=st.INTERRUPTED)  # fmt: skip
    [left] = found(c, gone)
    assert left.marks == [f"node {gone} is gone"]
    assert left.describe() == (
        f"run {run.run_id} (reapply-mig-no-hooks, interrupted before step drain) left: node "
        f"{gone} is gone; `mignurse run --resume {run.run_id}` continues from step "
        "pause-operands"
    )


def test_with_no_unfinished_run_the_cluster_is_not_read(c: Cluster) -> None:
    node = ready_mig_node(c)
    saved(c, node, touched("cordon", st.VERIFIED), status=st.SUCCEEDED)
    seen = len(c.sim.requests)
    assert found(c, node) == []
    assert c.sim.requests[seen:] == []


def test_where_a_run_stopped_is_its_first_step_not_done(c: Cluster) -> None:
    node = ready_mig_node(c)
    run = saved(c, node, touched("cordon", st.VERIFIED), st.StepState("drain", "drain"),
                st.StepState("uncordon", "uncordon"), status=st.RUN_FAILED)  # fmt: skip
    assert found(c, node)[0].where == "before step drain"
    run.steps[1].status = st.STOPPED
    run.save()
    assert found(c, node)[0].where == "at step drain"


@pytest.mark.parametrize(("minutes", "listed"), [(9, True), (10.5, False)])
def test_a_node_made_well_after_the_run_began_is_another_node(
    c: Cluster, minutes: float, listed: bool
) -> None:
    node = ready_mig_node(c)
    made = datetime.fromisoformat(c.node(node)["metadata"]["creationTimestamp"])
    began = (made - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    saved(c, node, touched("cordon", st.VERIFIED), status=st.INTERRUPTED, created=began)
    assert bool(found(c, node)) is listed


def test_a_leftover_neither_resume_nor_undo_can_settle_says_why_both() -> None:
    left = Leftover("3f2a", "reapply-mig-no-hooks", "failed", "at step apply-layout",
                    marks=["node n1 cordoned by it (mignurse.io/cordoned-by)"],
                    followups={"resume": Followup(False, "the lock is held by run 9c1d"),
                               "undo": Followup(False, "the GPUs changed")})  # fmt: skip
    assert left.describe() == (
        "run 3f2a (reapply-mig-no-hooks, failed at step apply-layout) left: node n1 cordoned "
        "by it (mignurse.io/cordoned-by); neither resume nor undo can run now (resume: the lock "
        "is held by run 9c1d; undo: the GPUs changed)"
    )
    assert not left.alive


def test_only_the_operands_left_paused_are_named(c: Cluster) -> None:
    node = ready_mig_node(c)
    paused = {f"nvidia.com/gpu.deploy.{k}": "paused-for-mig-change" for k in ("dcgm", "nvsm")}
    c.client.patch(NODES, node, {"metadata": {"labels": paused}})
    pause = touched("pause-operands", st.VERIFIED, "pause-gpu-operands")
    saved(c, node, pause, st.StepState("drain", "drain"), status=st.INTERRUPTED)
    [left] = found(c, node)
    assert left.marks == [f"GPU operands paused on {node} (dcgm, nvsm=paused-for-mig-change)"]


@pytest.mark.parametrize(
    ("unschedulable", "by", "marked"),
    [(True, "this", True), (True, "another", False), (False, "this", False)],
)
def test_a_cordon_is_named_only_while_the_run_holds_it(
    c: Cluster, unschedulable: bool, by: str, marked: bool
) -> None:
    node = ready_mig_node(c)
    run = saved(c, node, touched("cordon", st.VERIFIED), st.StepState("drain", "drain"),
                status=st.INTERRUPTED)  # fmt: skip
    holder = run.run_id if by == "this" else "9c1d0e2f"
    c.client.patch(NODES, node, {
        "metadata": {"annotations": {CORDONED_BY: json.dumps({"run": holder})}},
        "spec": {"unschedulable": unschedulable},
    })  # fmt: skip
    [left] = found(c, node)
    cordoned = f"node {node} cordoned by it (mignurse.io/cordoned-by)"
    assert left.marks == ([cordoned] if marked else [])


@pytest.mark.parametrize(("holder", "marked"), [("this", True), ("another", False), ("", False)])
def test_a_cluster_runs_lock_is_named_only_while_it_names_that_run(
    c: Cluster, holder: str, marked: bool
) -> None:
    cluster = "ml-train-usw2"
    run = saved(c, cluster, touched("pause-node-repair", st.VERIFIED), status=st.INTERRUPTED)
    resource, name, words = lock_resource("cluster", cluster)
    lock = {"run": run.run_id if holder == "this" else "9c1d0e2f", "holder": "alice@laptop"}
    value = json.dumps(lock) if holder else None
    c.client.patch(resource, name, {"metadata": {"annotations": {LOCK_ANNOTATION: value}}})
    [left] = find_leftovers(c.client, node_target=False, target=cluster, exclude="",
                            followups=lambda run: dict(FOLLOWUPS))  # fmt: skip
    assert left.marks == ([f"its lock ({LOCK_ANNOTATION}) on {words}"] if marked else [])
