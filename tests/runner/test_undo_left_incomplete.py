"""An undo that cannot put everything back says so (mignurse/runner/undo.py): a step whose
read-back finds it not restored fails the undo and names what is left; Ctrl-C during an undo
stops it with the command that undoes the rest; an undo needs the confirmation its harm asks
for, and never runs while another run holds the node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.lock import TargetLock
from mignurse.runner.outcome import RunError, RunEvent
from mignurse.runner.steps.kube import CORDONED_BY

from .enginehelpers import Cluster
from .test_engine import Answer, drain_book, unschedulable

Make = Callable[..., Cluster]


def interrupted_drain(c: Cluster, node: str, tmp_path: Path) -> tuple[str, Runner]:
    """cordon-and-drain on a node whose PDB refuses the drain, stopped by Ctrl-C: the node is
    left cordoned for `--undo`."""
    book = drain_book(tmp_path, timeout="60s")
    runner: Runner

    def listener(event: RunEvent) -> None:
        if event.kind == "output" and "refused by their disruption budget" in event.message:
            runner.cancel()

    runner = Runner(book, {"node": node}, client=c.client, yes=True, listener=listener)
    result = runner.run()
    assert result.status == "interrupted"
    return result.run_id, runner


def test_an_undo_that_finds_a_step_not_restored_fails_and_names_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    run_id, first = interrupted_drain(c, node, tmp_path)
    theirs = json.dumps({"holder": "bob@box", "run": "b0b"})
    c.client.patch(NODES, node, {"metadata": {"annotations": {CORDONED_BY: theirs}}})

    result = Runner.from_state(
        run_id, client=c.client, books={first.book.name: first.book}, yes=True
    ).undo()

    assert result.status == "failed"
    assert result.error == f"undo incomplete: cordon: node {node} is still cordoned (by run b0b)"
    assert [s.status for s in result.steps] == ["undo-failed", "not-undoable"]
    assert st.RunState.load(run_id).status == "failed"
    assert unschedulable(c, node)


def test_ctrl_c_during_an_undo_stops_it_and_says_how_to_undo_the_rest(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    run_id, first = interrupted_drain(c, node, tmp_path)
    undo: Runner

    def listener(event: RunEvent) -> None:
        if event.kind == "undo-started":
            undo.cancel()

    undo = Runner.from_state(
        run_id, client=c.client, books={first.book.name: first.book}, yes=True, listener=listener
    )
    result = undo.undo()

    assert result.status == "interrupted"
    assert result.error == "undo stopped by Ctrl-C: nothing more was changed"
    assert f"`mignurse run --undo {run_id}` undoes the rest" in result.notices
    assert unschedulable(c, node)
    assert st.RunState.load(run_id).status == "interrupted"  # it can still be undone


def test_an_undo_needs_its_confirmation(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    run_id, first = interrupted_drain(c, node, tmp_path)
    books = {first.book.name: first.book}

    with pytest.raises(RunError, match="undo changes the cluster: confirm it, or pass --yes"):
        Runner.from_state(run_id, client=c.client, books=books).undo()
    no = Answer("n")
    declined = Runner.from_state(run_id, client=c.client, books=books, confirmer=no).undo()
    assert declined.status == "declined"
    assert [word for _level, word in no.asked] == ["y"]  # an uncordon is LOW harm: y/N
    assert unschedulable(c, node)

    yes = Answer("y")
    assert (
        Runner.from_state(run_id, client=c.client, books=books, confirmer=yes).undo().status
        == "undone"
    )
    assert not unschedulable(c, node)


def test_an_undo_never_runs_while_another_run_holds_the_node(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    run_id, first = interrupted_drain(c, node, tmp_path)
    bob = TargetLock(
        c.client, target="node", name=node, holder="bob@box", run_id="b0b", runbook="drain"
    )
    bob.acquire()

    result = Runner.from_state(
        run_id, client=c.client, books={first.book.name: first.book}, yes=True
    ).undo()

    assert result.status == "blocked"
    assert result.error.startswith(f"node {node} is locked by bob@box (run b0b, drain;")
    assert unschedulable(c, node)
    bob.release()
