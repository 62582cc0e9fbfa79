"""An undo records each step it walks back as it goes, and stops where the operator says
(mignurse/runner/undo.py): each step's result is on disk before the next step is undone,
Ctrl-C stops the undo before its next step even where that step would change nothing, a
refused undo is audited as an undo, and undoing a paused repair asks for the cluster's name
typed, as the pause did. In process against the simulator on a manual clock."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunError, RunEvent
from mignurse.runner.schema import Runbook, default_folder, load_runbook
from mignurse.runner.step import Harm

from .enginehelpers import Cluster
from .interrupthelpers import audit_of
from .test_engine import Answer, drain_book, unschedulable
from .test_undo_walks_back import cordon_as, step, stopped_run, undoer

Make = Callable[..., Cluster]


def drained_midway(c: Cluster, node: str, tmp_path: Path) -> tuple[Runner, str]:
    """A cordon-and-drain run stopped in its drain: the node is cordoned by the run."""
    book = drain_book(tmp_path)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("drain", "drain", st.STOPPED),
        ],
    )
    cordon_as(c, node, run_id)
    return Runner(book, {"node": node}, client=c.client), run_id


def test_each_step_an_undo_walks_back_is_on_disk_before_the_next(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    first, run_id = drained_midway(c, node, tmp_path)
    on_disk: list[tuple[str, str, str]] = []
    finishing: list[bool] = []
    undo: Runner

    def listener(event: RunEvent) -> None:
        if event.kind == "undo-finished":
            saved = st.RunState.load(run_id).step(event.step).status
            on_disk.append((event.step, event.data["status"], saved))
        if event.kind == "finished":
            finishing.append(undo.finishing)

    undo = undoer(c, first.book, run_id, yes=True, listener=listener)
    result = undo.undo()

    assert result.status == "undone", result.error
    assert on_disk == [
        ("drain", "not-undoable", "not-undoable"),  # kept: evicted pods come back on their own
        ("cordon", "undone", "undone"),
    ]
    assert finishing == [True]  # a second Ctrl-C now waits for the end to be recorded
    assert not unschedulable(c, node)
    # the uncordon is announced as undo's, and adds nothing to what the cordon recorded
    announced = [(e["event"], e["step"]) for e in audit_of(run_id) if "intent" in e["event"]]
    assert announced == [("undo-intent", "cordon")]
    saved = st.RunState.load(run_id).step("cordon")
    assert (saved.intents, saved.prior) == (1, {})


def test_ctrl_c_during_an_undo_stops_it_before_the_next_step_even_one_with_nothing_to_change(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    first, run_id = drained_midway(c, node, tmp_path)
    c.client.patch(NODES, node, {"spec": {"unschedulable": None}})  # `kubectl uncordon` by hand
    finishing: list[bool] = []
    undo: Runner

    def listener(event: RunEvent) -> None:
        if event.kind == "undo-started" and event.step == "drain":
            undo.cancel()
        if event.kind == "finished":
            finishing.append(undo.finishing)

    undo = undoer(c, first.book, run_id, yes=True, listener=listener)
    result = undo.undo()

    assert result.status == "interrupted"
    assert result.error == "undo stopped by Ctrl-C: nothing more was changed"
    assert f"`mignurse run --undo {run_id}` undoes the rest" in result.notices
    saved = st.RunState.load(run_id)
    assert (saved.status, [s.status for s in saved.steps]) == (
        "interrupted",
        ["verified", "not-undoable"],  # the cordon was not reached: the next undo looks again
    )
    assert finishing == [True]
    assert audit_of(run_id)[-1]["outcome"] == "undo-interrupted"


@pytest.mark.parametrize(
    ("status", "undo_says", "resume_says"),
    [
        (
            st.SUCCEEDED,
            "succeeded; undo is for failed or interrupted runs",
            "already succeeded: nothing to resume",
        ),
        (st.RUN_UNDONE, "is already undone", "was undone: start a new run instead"),
    ],
)
def test_a_refused_undo_or_resume_is_audited_as_what_was_asked(
    cluster_for: Make,
    state_home: Path,
    tmp_path: Path,
    status: str,
    undo_says: str,
    resume_says: str,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    first, run_id = drained_midway(c, node, tmp_path)
    saved = st.RunState.load(run_id)
    saved.status = status
    saved.save()

    with pytest.raises(RunError, match=undo_says):
        undoer(c, first.book, run_id, yes=True).undo()
    with pytest.raises(RunError, match=resume_says):
        undoer(c, first.book, run_id, yes=True).run()

    refusals = [e for e in audit_of(run_id) if e["event"] == "refused"]
    assert [(e.get("undo"), e.get("resume")) for e in refusals] == [(True, None), (None, True)]
    assert undo_says in refusals[0]["reason"] and resume_says in refusals[1]["reason"]


def interrupted_pause(c: Cluster) -> tuple[Runbook, str, st.RunState]:
    """A pause-node-repair run on the cluster stopped in its pause step, saved: its runbook,
    the cluster's name (its target) and its state."""
    book = load_runbook(default_folder() / "pause-node-repair.yaml")
    cluster = c.client.info.cluster or c.client.info.context
    state = st.RunState(
        run_id="5a7e0003",
        runbook=book.name,
        params={"mode": "off"},
        context=c.client.info.context,
        cluster=c.client.info.cluster,
        target=cluster,
        holder="alice@laptop",
        status=st.INTERRUPTED,
        steps=[step("pause", "pause-node-repair", st.STOPPED)],
    )
    state.save()
    return book, cluster, state


def test_undoing_a_paused_repair_asks_for_the_clusters_name_typed(
    cluster_for: Make, state_home: Path
) -> None:
    c = cluster_for()
    book, cluster, state = interrupted_pause(c)
    answer = Answer("y")

    result = undoer(c, book, state.run_id, confirmer=answer).undo()

    assert answer.asked == [(Harm.HIGH, cluster)]
    assert result.status == "declined"  # "y" is not the name: nothing changes
    assert st.RunState.load(state.run_id).status == st.INTERRUPTED


def test_a_second_ctrl_c_while_an_undo_saves_a_step_still_leaves_the_step_saved(
    cluster_for: Make, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    first, run_id = drained_midway(c, node, tmp_path)
    undo = undoer(c, first.book, run_id, yes=True)
    fsync = os.fsync
    stops: list[str] = []

    def second_ctrl_c(fd: int) -> None:
        if not stops and undo.state.step("cordon").status == st.UNDONE:
            stops.append("while the cordon's undo is saved")
            raise KeyboardInterrupt
        fsync(fd)

    monkeypatch.setattr(os, "fsync", second_ctrl_c)
    result = undo.undo()

    assert stops and result.status == "interrupted"
    assert not unschedulable(c, node)
    # what the cluster shows is what the state says: the next undo does not walk it back again
    assert [s.status for s in st.RunState.load(run_id).steps] == ["undone", "not-undoable"]
