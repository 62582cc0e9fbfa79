"""`mignurse run --undo RUN_ID` walks a stopped run back newest first (mignurse/runner/undo.py):
only the steps that changed something are undone, a step undone by an earlier undo is not
undone again, a step that cannot be undone is kept and said so, undo stops at a step whose
change cannot be taken back and names the steps that stay, and every refusal, step and end
is in the audit log. In process against the simulator on a manual clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.audit import Audit
from mignurse.runner.engine import Runner
from mignurse.runner.lock import LOCK_ANNOTATION, TargetLock
from mignurse.runner.outcome import RunError, RunEvent
from mignurse.runner.schema import Runbook, load_runbook
from mignurse.runner.steps.kube import CORDONED_BY

from .enginehelpers import Cluster
from .interrupthelpers import audit_of, lock_on
from .test_interruptions import When, on

Make = Callable[..., Cluster]

# A look at a node with no new pods landing meanwhile, then its pods moved away: the cordon
# and the uncordon can be undone, the report changes nothing, the drain cannot be undone.
LOOK_THEN_DRAIN = """\
name: look-then-drain
title: Cordon, look, uncordon, drain
target: node
params:
  node: {type: node, required: true}
steps:
  - id: cordon
    action: cordon
  - id: report
    action: report-node
  - id: uncordon
    action: uncordon
  - id: drain
    action: drain
"""

# Replace a node's instance, then hand the node back: the NodeClaim delete cannot be undone.
REPLACE_AND_RETURN = """\
name: replace-and-return
title: Cordon, report, drain, delete the NodeClaim, uncordon
target: node
params:
  node: {type: node, required: true}
steps:
  - id: cordon
    action: cordon
  - id: report
    action: report-node
  - id: drain
    action: drain
  - id: delete-nodeclaim
    action: delete-nodeclaim
  - id: uncordon
    action: uncordon
"""


def runbook(tmp_path: Path, text: str) -> Runbook:
    name = text.split("\n", 1)[0].removeprefix("name: ")
    path = tmp_path / "books" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return load_runbook(path)


def undoer(c: Cluster, book: Runbook, run_id: str, **kw: Any) -> Runner:
    """The run again from its state, as `mignurse run --undo RUN_ID` builds it."""
    return Runner.from_state(run_id, client=c.client, books={book.name: book}, **kw)


def marker(run_id: str) -> str:
    return json.dumps({"holder": "alice@laptop", "run": run_id}, separators=(",", ":"))


def cordon_as(c: Cluster, node: str, run_id: str) -> None:
    """The node as a run's cordon leaves it: unschedulable, annotated with the run."""
    c.client.patch(
        NODES,
        node,
        {
            "metadata": {"annotations": {CORDONED_BY: marker(run_id)}},
            "spec": {"unschedulable": True},
        },
    )


def stopped_run(book: Runbook, c: Cluster, node: str, steps: list[st.StepState]) -> str:
    """The state a run of `book` on `node` left when it stopped (its process is gone)."""
    state = st.RunState(
        run_id="5a7e0002",
        runbook=book.name,
        params={"node": node},
        context=c.client.info.context,
        cluster=c.client.info.cluster,
        target=node,
        holder="alice@laptop",
        status=st.INTERRUPTED,
        steps=steps,
    )
    state.save()
    return state.run_id


def stopped_after_its_cordon(book: Runbook, c: Cluster, node: str) -> str:
    """A look-then-drain run killed after its cordon: the node is cordoned by it."""
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            *(step(i, a) for i, a in (("report", "report-node"), ("uncordon", "uncordon"))),
            step("drain", "drain"),
        ],
    )
    cordon_as(c, node, run_id)
    return run_id


def step(
    step_id: str, action: str, status: str = st.PENDING, applied: dict[str, Any] | None = None
) -> st.StepState:
    changed = status in (st.APPLIED, st.VERIFIED, st.FAILED, st.STOPPED)
    return st.StepState(step_id, action, status=status, applied=applied, intents=int(changed))


def events_of(run_id: str, *kinds: str) -> list[tuple[Any, ...]]:
    return [
        (e["event"], e.get("step"), e.get("result") or e.get("outcome"))
        for e in audit_of(run_id)
        if e["event"] in kinds
    ]


def cordoned_by(c: Cluster, node: str) -> str | None:
    raw = c.node(node)
    if not raw["spec"].get("unschedulable"):
        return None
    return str((raw["metadata"].get("annotations") or {}).get(CORDONED_BY))


def test_a_second_undo_after_ctrl_c_undoes_only_what_the_first_left(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    first: Runner
    stop = When(on("step-started", "drain"), lambda: first.cancel())
    first = Runner(book, {"node": node}, client=c.client, yes=True, listener=stop)
    assert first.run().status == "interrupted"
    run_id = first.run_id

    halted: Runner
    undo_stop = When(on("undo-finished", "uncordon"), lambda: halted.cancel())
    halted = undoer(c, book, run_id, yes=True, listener=undo_stop)
    stopped = halted.undo()

    assert stopped.status == "interrupted"
    assert stopped.error == "undo stopped by Ctrl-C: nothing more was changed"
    assert [s.status for s in stopped.steps] == ["verified", "verified", "undone", "pending"]
    assert cordoned_by(c, node) is not None  # the uncordon's undo cordoned it again
    assert lock_on(c, node) is None
    saved = st.RunState.load(run_id)
    assert saved.status == "interrupted"
    assert [s.status for s in saved.steps] == ["verified", "verified", "undone", "pending"]
    assert events_of(run_id, "undo", "finished")[-2:] == [
        ("undo", "uncordon", "undone"),
        ("finished", None, "undo-interrupted"),
    ]

    said: list[RunEvent] = []
    second = undoer(c, book, run_id, yes=True, listener=said.append)
    result = second.undo()

    assert result.status == "undone", result.error
    (notice,) = [e.message for e in said if e.kind == "notice"]
    assert notice == (
        f"undo run {run_id} (look-then-drain on {node}), newest first:\n  undo cordon the node"
    )
    assert [(e.kind, e.step) for e in said if e.kind.startswith("undo-")] == [
        ("undo-started", "cordon"),
        ("undo-finished", "cordon"),
    ]
    assert [s.status for s in result.steps] == ["undone", "verified", "undone", "pending"]
    assert cordoned_by(c, node) is None
    assert lock_on(c, node) is None
    assert result.notices == [f"now: node {node} is Ready, schedulable"]
    assert events_of(run_id, "undo-started", "undo", "finished")[-3:] == [
        ("undo-started", None, None),
        ("undo", "cordon", "undone"),
        ("finished", None, "undone"),
    ]


def test_an_undo_of_a_run_that_changed_nothing_it_can_put_back_asks_nothing_and_keeps_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.SKIPPED, {"wasUnschedulable": True}),
            step("report", "report-node", st.VERIFIED, {"summary": "Ready"}),
            step("uncordon", "uncordon", st.SKIPPED, {"wasUnschedulable": True}),
            step("drain", "drain", st.STOPPED, {"evicted": []}),
        ],
    )
    said: list[RunEvent] = []

    result = undoer(c, book, run_id, listener=said.append).undo()  # no --yes, no prompt

    assert result.status == "undone", result.error
    assert [s.status for s in result.steps] == ["skipped", "verified", "skipped", "not-undoable"]
    assert [s.undo for s in result.steps] == ["", "", "", "cannot be undone"]
    assert [(e.kind, e.step, e.message) for e in said if e.kind.startswith("undo-")] == [
        ("undo-started", "drain", "undo evict the node's pods (eviction api, pdbs respected)"),
        ("undo-finished", "drain", "cannot be undone"),
    ]
    saved = st.RunState.load(run_id).step("drain")
    assert (saved.status, saved.undo) == ("not-undoable", "cannot be undone")
    assert events_of(run_id, "undo") == [("undo", "drain", "cannot be undone")]


def test_an_undo_stops_at_a_replaced_instance_and_names_the_steps_that_stay(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, REPLACE_AND_RETURN)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("report", "report-node", st.VERIFIED, {"summary": "Ready"}),
            step("drain", "drain", st.SKIPPED, {"evicted": []}),
            step("delete-nodeclaim", "delete-nodeclaim", st.APPLIED, {"nodeclaim": "gone-1"}),
            step(
                "uncordon",
                "uncordon",
                st.VERIFIED,
                {"wasUnschedulable": True, "cordonedBy": marker("5a7e0002")},
            ),
        ],
    )
    said: list[RunEvent] = []

    result = undoer(c, book, run_id, yes=True, listener=said.append).undo()

    barrier = "delete-nodeclaim: nodeclaim/gone-1 is gone (its instance was terminated)"
    (notice,) = [e.message for e in said if e.kind == "notice"]
    assert notice.splitlines() == [
        f"undo run {run_id} (replace-and-return on {node}), newest first:",
        "  undo uncordon the node",
        f"  stop at {barrier}: the steps before it stay as they are",
    ]
    assert result.status == "failed"
    assert result.error == (
        "undo incomplete: cannot be undone past step delete-nodeclaim: nodeclaim/gone-1 is gone "
        "(its instance was terminated); the steps before it (cordon, delete-nodeclaim) stay as "
        "they are, the safe state"
    )
    assert [s.status for s in result.steps] == [
        "verified",
        "verified",
        "skipped",
        "applied",
        "undone",
    ]
    assert cordoned_by(c, node) == marker(run_id)  # cordoned again, as the run found it
    assert result.notices == [f"now: node {node} is Ready, cordoned by this run"]
    assert st.RunState.load(run_id).error == result.error
    assert events_of(run_id, "undo", "finished")[-2:] == [
        ("undo", "uncordon", "undone"),
        ("finished", None, "failed"),
    ]


def test_an_undo_with_only_a_replaced_instance_behind_it_is_refused_and_audited(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, REPLACE_AND_RETURN)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("report", "report-node", st.VERIFIED, {"summary": "Ready"}),
            step("drain", "drain", st.VERIFIED, {"evicted": []}),
            step("delete-nodeclaim", "delete-nodeclaim", st.FAILED, {"nodeclaim": "gone-2"}),
            step("uncordon", "uncordon"),
        ],
    )
    cordon_as(c, node, run_id)
    seen = len(c.sim.requests)

    result = undoer(c, book, run_id, yes=True).undo()

    assert result.status == "blocked"
    assert result.error == (
        "cannot be undone past step delete-nodeclaim: nodeclaim/gone-2 is gone (its instance "
        "was terminated); the steps before it (cordon, drain, delete-nodeclaim) stay as they "
        "are, the safe state"
    )
    assert not [r for r in c.sim.requests[seen:] if r["method"] != "GET"]
    last = audit_of(run_id)[-1]
    assert (last["event"], last["undo"], last["reason"]) == ("refused", True, result.error)
    assert cordoned_by(c, node) == marker(run_id)


def test_an_undo_on_a_node_being_deleted_is_refused_and_audited(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    run_id = stopped_after_its_cordon(book, c, node)
    c.client.delete(NODES, node)
    assert c.node(node)["metadata"].get("deletionTimestamp")

    result = undoer(c, book, run_id, yes=True).undo()

    why = f"node {node} is being deleted: there is nothing on it to put back"
    assert (result.status, result.error) == ("blocked", why)
    last = audit_of(run_id)[-1]
    assert (last["event"], last["undo"], last["reason"]) == ("refused", True, why)


def test_an_undo_refused_by_another_runs_lock_is_audited_and_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    run_id = stopped_after_its_cordon(book, c, node)
    bob = TargetLock(
        c.client, target="node", name=node, holder="bob@box", run_id="b0b", runbook="drain"
    )
    bob.acquire()

    result = undoer(c, book, run_id, yes=True).undo()

    assert result.status == "blocked"
    last = audit_of(run_id)[-1]
    assert (last["event"], last["undo"], last["reason"]) == ("refused", True, result.error)
    assert result.error.startswith(f"node {node} is locked by bob@box (run b0b, drain;")
    assert cordoned_by(c, node) == marker(run_id)
    bob.release()


def test_an_undo_whose_lock_cannot_be_released_says_how_to_clear_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    run_id = stopped_after_its_cordon(book, c, node)
    undo: Runner
    finishing: list[bool] = []

    def refuse_the_release(event: RunEvent) -> None:
        if event.kind == "finished":
            finishing.append(undo.finishing)
            c.sim.fail("PATCH", f"/nodes/{node}$", code=403)

    undo = undoer(c, book, run_id, yes=True, listener=refuse_the_release)
    result = undo.undo()

    assert result.status == "undone"
    assert finishing == [True]  # a second Ctrl-C now waits for the lock's release
    assert undo.finishing
    (left,) = [n for n in result.notices if "could not be released" in n]
    assert left.startswith(f"the lock on node {node} could not be released (")
    assert left.endswith(f"`mignurse unlock {node}` clears it now")
    assert lock_on(c, node) is not None
    lock_left = [e for e in audit_of(run_id) if e["event"] == "lock-left"]
    assert [e["detail"] for e in lock_left] == [left]


def test_an_undo_with_an_audit_log_that_is_not_a_file_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = runbook(tmp_path, LOOK_THEN_DRAIN)
    run_id = stopped_after_its_cordon(book, c, node)
    log = tmp_path / "audit-dir"
    log.mkdir()

    with pytest.raises(RunError, match=r"is a folder, not a regular file: move it away"):
        undoer(c, book, run_id, yes=True, audit=Audit(log)).undo()
    assert cordoned_by(c, node) == marker(run_id)
    assert lock_on(c, node) is None
    assert LOCK_ANNOTATION not in (c.node(node)["metadata"].get("annotations") or {})
