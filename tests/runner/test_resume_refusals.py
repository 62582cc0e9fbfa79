"""`mignurse run --resume ID` and `--undo ID` refused in one line when the saved run cannot
be followed up (mignurse/runner/core.py, engine.py): a run that does not exist, whose state
is unreadable, whose runbook is gone or changed, that ran against another context, that is
still running, or that already ended; an undo on a node that is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mignurse.cluster.client import NODES
from mignurse.paths import runs_dir
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunError
from mignurse.runner.schema import Runbook

from .enginehelpers import Cluster
from .test_engine import Answer, drain_book

Make = Callable[..., Cluster]


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def saved_run(
    c: Cluster, book: Runbook, node: str, status: str, *, context: str | None = None, pid: int = 0
) -> str:
    """The run state a stopped run of `book` on `node` left, its cordon done."""
    state = st.RunState(
        run_id="5a7e0001",
        runbook=book.name,
        params={"node": node, "drain_timeout": "60s"},
        context=context if context is not None else c.client.info.context,
        cluster=c.client.info.cluster,
        target=node,
        holder="alice@laptop",
        status=status,
        steps=[
            st.StepState(
                "cordon",
                "cordon",
                status=st.VERIFIED,
                applied={"wasUnschedulable": False},
                intents=1,
            ),
            st.StepState("drain", "drain"),
        ],
        pid=pid or os.getpid() + 10**6,
    )
    state.save()
    return state.run_id


def followup(c: Cluster, book: Runbook, run_id: str) -> Runner:
    return Runner.from_state(run_id, client=c.client, books={book.name: book}, yes=True)


def test_a_run_that_does_not_exist_is_named(cluster_for: Make, state_home: Path) -> None:
    c = cluster_for()
    with pytest.raises(RunError, match=r"^no run 'beef0000': `mignurse runs` lists them$"):
        Runner.from_state("beef0000", client=c.client, books={})


def test_an_unreadable_run_state_is_said_so(cluster_for: Make, state_home: Path) -> None:
    c = cluster_for()
    runs = runs_dir()
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "beef0001.json").write_text('{"run_id": "beef0001"')
    with pytest.raises(RunError, match=r"^the state of run beef0001 is unreadable: "):
        Runner.from_state("beef0001", client=c.client, books={})


def test_a_run_whose_runbook_is_gone_or_changed_is_refused(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, node, st.INTERRUPTED)

    with pytest.raises(
        RunError, match=f"^run {run_id} used runbook 'cordon-and-drain', which is gone$"
    ):
        Runner.from_state(run_id, client=c.client, books={})
    shorter = Runbook(**{**book.__dict__, "steps": book.steps[:1]})
    with pytest.raises(
        RunError, match=f"^runbook cordon-and-drain changed since run {run_id}: its steps differ$"
    ):
        Runner.from_state(run_id, client=c.client, books={book.name: shorter})


def test_a_run_against_another_context_names_the_one_to_pass(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, c.nodes("gpu-infer")[0], st.INTERRUPTED, context="prod-eu")
    with pytest.raises(RunError) as refused:
        followup(c, book, run_id)
    assert str(refused.value) == (
        f"run {run_id} ran against context 'prod-eu', not {c.client.info.context!r}: "
        "pass --context prod-eu"
    )


def test_a_run_still_running_is_neither_resumed_nor_undone(
    cluster_for: Make, state_home: Path, tmp_path: Path, live_pid: int
) -> None:
    c = cluster_for()
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, c.nodes("gpu-infer")[0], st.RUNNING, pid=live_pid)
    said = f"run {run_id} is still running (pid {live_pid} on {st.this_host()})"

    with pytest.raises(RunError) as refused:
        followup(c, book, run_id).run()
    assert str(refused.value) == said
    assert followup(c, book, run_id).followups()["undo"] == (False, said)
    assert followup(c, book, run_id).followups()["resume"] == (False, said)


@pytest.mark.parametrize(
    ("status", "resume", "undo"),
    [
        (
            st.SUCCEEDED,
            "run 5a7e0001 already succeeded: nothing to resume",
            "run 5a7e0001 succeeded; undo is for failed or interrupted runs (run the opposite "
            "runbook instead)",
        ),
        (
            st.RUN_UNDONE,
            "run 5a7e0001 was undone: start a new run instead",
            "run 5a7e0001 is already undone",
        ),
    ],
)
def test_a_run_that_already_ended_says_what_to_do_instead(
    cluster_for: Make, state_home: Path, tmp_path: Path, status: str, resume: str, undo: str
) -> None:
    c = cluster_for()
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, c.nodes("gpu-infer")[0], status)

    with pytest.raises(RunError) as refused:
        followup(c, book, run_id).run()
    assert str(refused.value) == resume
    with pytest.raises(RunError) as refused:
        followup(c, book, run_id).undo()
    assert str(refused.value) == undo


def test_a_killed_run_can_be_resumed_and_undone(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, node, st.RUNNING)  # its pid is gone: killed

    follow = followup(c, book, run_id).followups()
    assert follow["resume"] == (True, "continues from step drain (1 of 2 steps left)")
    assert follow["undo"] == (True, "undoes cordon (newest first)")


def test_an_undo_on_a_node_that_is_gone_has_nothing_to_put_back(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = drain_book(tmp_path)
    run_id = saved_run(c, book, node, st.INTERRUPTED)
    c.client.delete(NODES, node)
    c.sim.advance(600)

    said = f"node {node} no longer exists: there is nothing on it to put back"
    assert followup(c, book, run_id).followups()["undo"] == (False, said)
    result = followup(c, book, run_id).undo()
    assert (result.status, result.error) == ("blocked", said)


def test_ctrl_c_at_the_confirmation_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]

    class CtrlC(Answer):
        def confirm(self, level: object, plan_text: str, expected_word: str) -> bool:
            raise KeyboardInterrupt

    result = Runner(
        drain_book(tmp_path), {"node": node}, client=c.client, confirmer=CtrlC("")
    ).run()

    assert result.status == "declined"
    assert not c.node(node)["spec"].get("unschedulable")


def test_a_confirmation_answered_after_ctrl_c_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner: Runner

    class YesButCtrlC(Answer):
        def confirm(self, level: object, plan_text: str, expected_word: str) -> bool:
            runner.cancel()  # Ctrl-C while the prompt was open
            return True

    runner = Runner(
        drain_book(tmp_path), {"node": node}, client=c.client, confirmer=YesButCtrlC("")
    )
    result = runner.run()

    assert (result.status, result.error) == (
        "declined",
        "interrupted before the first change: nothing changed",
    )
    assert not c.node(node)["spec"].get("unschedulable")
