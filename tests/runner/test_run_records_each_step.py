"""A run records what it does as it goes (mignurse/runner/engine.py): the plan shown and kept
in the run state before the lock is taken, the start, each change before it is sent and each
step's end in the audit log, the lock held while the steps run and released after, and where
the node stands at the end, read back. A run killed between a step's change and its check is
finished on `--resume` by the check alone; a step whose precondition no longer holds at its
turn fails and is undone. In process against the simulator on a manual clock."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunEvent
from mignurse.runner.schema import Runbook, load_runbook
from mignurse.runner.step import Harm

from .enginehelpers import Cluster
from .interrupthelpers import DyingClient, Killed, audit_of, is_lock_patch, lock_on, writes_to
from .test_engine import Answer

Make = Callable[..., Cluster]

CORDON_AND_LOOK = """\
name: cordon-and-look
title: Cordon the node and report it
target: node
undo: on-failure
params:
  node: {type: node, required: true}
steps:
  - id: cordon
    action: cordon
  - id: report
    action: report-node
"""


def cordon_and_look(tmp_path: Path) -> Runbook:
    path = tmp_path / "books" / "cordon-and-look.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CORDON_AND_LOOK)
    return load_runbook(path)


def audit_trail(run_id: str) -> list[tuple[Any, ...]]:
    """Each audit event of the run: its kind, step and status or outcome."""
    return [
        (e["event"], e.get("step"), e.get("status") or e.get("outcome"))
        for e in audit_of(run_id)
        if e["event"] != "identity"
    ]


def test_a_confirmed_run_records_its_plan_each_change_each_step_and_its_end(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    answer = Answer("y")
    events: list[RunEvent] = []
    seen: dict[str, Any] = {}
    runner: Runner

    def listener(event: RunEvent) -> None:
        events.append(event)
        if event.kind == "step-started" and event.step == "report":
            seen["lock"] = lock_on(c, node)
            seen["state"] = st.RunState.load(runner.run_id)
        if event.kind == "finished":
            seen["finishing"] = runner.finishing

    runner = Runner(book, {"node": node}, client=c.client, confirmer=answer, listener=listener)
    result = runner.run()

    assert result.status == "succeeded", result.error
    assert answer.asked == [(Harm.LOW, "y")]
    plan_events = [e for e in events if e.kind == "plan"]
    assert [e.message for e in plan_events] == [result.plan.text()]  # type: ignore[union-attr]
    assert [(e.kind, e.step, e.message) for e in events if e.kind.startswith("step-")] == [
        ("step-started", "cordon", "Cordon the node"),
        ("step-finished", "cordon", "verified"),
        ("step-started", "report", "Report the node's state"),
        ("step-finished", "report", "verified"),
    ]
    assert events[-1].kind == "finished" and seen["finishing"]
    # while the steps run: the lock names the run, whose state keeps the plan it showed
    assert seen["lock"]["run"] == runner.run_id
    during = seen["state"]
    assert (during.status, during.pid) == ("running", os.getpid())
    planned = during.step("cordon").planned
    assert [c["field"] for c in planned["changes"]] == [
        "spec.unschedulable",
        "annotation mignurse.io/cordoned-by",
    ]
    assert during.step("report").planned["notes"] == [
        "reads the node and summarises the run's outputs"
    ]
    assert during.step("cordon").status == "verified"
    assert during.step("cordon").attempts == 1
    # after: the lock is gone, the state and the log say how it ended
    assert lock_on(c, node) is None
    assert st.RunState.load(runner.run_id).status == "succeeded"
    assert audit_trail(runner.run_id) == [
        ("started", None, None),
        ("intent", "cordon", None),
        ("step", "cordon", "verified"),
        ("step", "report", "verified"),
        ("finished", None, "succeeded"),
    ]
    started = audit_of(runner.run_id)[0]
    assert (started["runbook"], started["target"], started["confirmed"]) == (
        "cordon-and-look",
        node,
        "answered y",
    )
    assert started["context"] == c.client.info.context and started["params"] == {"node": node}
    finished = audit_of(runner.run_id)[-1]
    assert finished["report"] == [
        "cordon: verified",
        f"report: verified: {node}: cordoned, Ready=True",
    ]
    assert result.notices == [f"now: node {node} is Ready, cordoned by this run"]


def test_a_run_killed_between_its_change_and_its_check_is_finished_by_the_check_on_resume(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    patched: list[bool] = []

    def after_the_cordon(name: str, args: tuple[Any, ...]) -> bool:
        if name == "patch" and not is_lock_patch(args):
            patched.append(True)
            return False
        return bool(patched) and name == "get" and args[0] == NODES  # the cordon's verify

    dying = DyingClient(c.client, after_the_cordon)
    first = Runner(book, {"node": node}, client=dying, yes=True)  # type: ignore[arg-type]
    with pytest.raises(Killed):
        first.run()
    saved = st.RunState.load(first.run_id).step("cordon")
    assert (saved.status, saved.applied) == ("applied", {"wasUnschedulable": False})
    seen = len(c.sim.requests)
    events: list[RunEvent] = []

    result = Runner.from_state(
        first.run_id, client=c.client, books={book.name: book}, yes=True, listener=events.append
    ).run()

    assert result.status == "succeeded", result.error
    assert [(e.kind, e.step, e.message) for e in events if e.kind.startswith("step-")] == [
        ("step-finished", "cordon", "verified (applied before the stop)"),
        ("step-started", "report", "Report the node's state"),
        ("step-finished", "report", "verified"),
    ]
    node_writes = [w for w in writes_to(c, f"/nodes/{node}", seen) if "unschedulable" in str(w)]
    assert node_writes == []  # the cordon was not sent again
    cordon = st.RunState.load(first.run_id).step("cordon")
    assert (cordon.status, cordon.attempts) == ("verified", 1)
    assert audit_trail(first.run_id)[-3:] == [
        ("resumed", None, None),
        ("step", "report", "verified"),
        ("finished", None, "succeeded"),
    ]


def test_a_node_gone_between_the_plan_and_its_step_fails_the_step_at_its_precondition(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("ng-gpu-l4")[0]  # a managed node group's: a deleted Node goes at once
    book = cordon_and_look(tmp_path)

    def delete_after_cordon(event: RunEvent) -> None:
        if event.kind == "step-finished" and event.step == "cordon":
            c.client.delete(NODES, node)

    result = Runner(
        book, {"node": node}, client=c.client, yes=True, listener=delete_after_cordon
    ).run()

    gone = f"node {node} does not exist (any more)"
    assert result.status == "failed"
    assert result.error == (
        f"step report failed: precondition: {gone}; undo incomplete: cordon: {gone}"
    )
    assert [s.status for s in result.steps] == ["undo-failed", "failed"]
    assert result.notices == [f"now: node {node} no longer exists"]
    assert audit_trail(result.run_id)[-3:] == [
        ("step", "report", "failed"),
        ("undo", "cordon", "undo-failed"),
        ("finished", None, "failed"),
    ]
