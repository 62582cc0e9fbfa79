"""What can follow a run that stopped short: `possible_followups` (the app's resume and undo
keys), `mignurse runs RUN_ID`, and `--undo` itself agree on it, and every refusal is in the
audit log. In process against the simulator, except where the CLI is the point."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.audit import read_audit, runs_from_audit
from mignurse.runner.engine import Runner, possible_followups
from mignurse.runner.outcome import RunError

from .interrupthelpers import audit_of, book, resumed, writes_to
from .test_interruptions import Make, When, _run_cli, ctrl_c_in_drain, drain_book, on


def test_an_interrupted_step_is_reported_finished_not_left_running(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    result, stop = ctrl_c_in_drain(c, drain_book(tmp_path))

    assert result.status == "interrupted"
    ended = [e for e in stop.events if e.kind == "step-finished" and e.step == "drain"]
    assert [(e.data["status"], e.message) for e in ended] == [("interrupted", "interrupted")]


def test_a_drain_stopped_by_ctrl_c_offers_both_and_says_what_each_does(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    drain = drain_book(tmp_path)
    result, _ = ctrl_c_in_drain(c, drain)
    seen = len(c.sim.requests)

    followups = possible_followups(result.run_id, client=c.client, books={drain.name: drain})

    assert followups == {
        "resume": (True, "continues from step drain (1 of 2 steps left)"),
        "undo": (True, "undoes cordon (newest first)"),
    }
    assert not writes_to(c, "/", seen)  # asking changes nothing
    assert not [e for e in audit_of(result.run_id) if e["event"] == "refused"]


def test_nothing_to_undo_is_not_offered(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    runner: Runner
    stop = When(on("step-started", "cordon"), lambda: runner.cancel())
    runner = Runner(cordon, {"node": node}, client=c.client, yes=True, listener=stop)
    result = runner.run()
    assert result.status == "interrupted"

    followups = possible_followups(result.run_id, client=c.client, books={"cordon": cordon})

    assert followups["undo"] == (
        False,
        "nothing to undo: no step changed what undo can put back",
    )
    assert followups["resume"].possible


def test_undo_on_a_node_that_is_gone_is_not_offered_and_refused_up_front_and_audited(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    """An interrupted replacement whose node Karpenter then removed: undo cannot lock or
    uncordon a node that is not there. It is not offered, `--undo` refuses before any write,
    and the refusal is in the audit log and in `mignurse runs`."""
    c = cluster_for("healthy", speed=30)
    node = c.nodes("gpu-train")[0]
    replace = book("replace-instance", tmp_path)
    runner: Runner
    stop = When(on("step-started", "drain"), lambda: runner.cancel())
    runner = Runner(replace, {"node": node, "collect": False, "drain_timeout": "2m"},
                    client=c.client, yes=True, listener=stop)  # fmt: skip
    result = runner.run()
    assert result.status == "interrupted", (result.error, result.report_lines())
    c.client.delete(NODES, node)  # Karpenter's repair, or someone else, took it
    deadline = time.monotonic() + 30
    while node in c.nodes():
        assert time.monotonic() < deadline, "the node was never deleted"
        time.sleep(0.1)
    seen = len(c.sim.requests)

    followups = possible_followups(result.run_id, client=c.client, books={replace.name: replace})
    refused = resumed(result.run_id, c, [replace], tmp_path).undo()

    assert followups["undo"] == (
        False,
        f"node {node} no longer exists: there is nothing on it to put back",
    )
    assert refused.status == "blocked" and refused.error == followups["undo"].why
    assert not writes_to(c, "/", seen)
    last = audit_of(result.run_id)[-1]
    assert (last["event"], last["undo"], last["reason"]) == ("refused", True, refused.error)
    (shown,) = [r for r in runs_from_audit(read_audit()) if r["run"] == result.run_id]
    assert (shown["outcome"], shown["last"]) == ("interrupted", "refused undo")


def test_past_the_nodeclaim_delete_resume_is_offered_and_undo_says_why_not(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy", speed=30)
    node = c.nodes("gpu-train")[0]
    replace = book("replace-instance", tmp_path)
    runner: Runner
    stop = When(on("step-started", "wait-replacement"), lambda: runner.cancel())
    runner = Runner(replace, {"node": node, "collect": False, "wait": "5m", "drain_timeout": "2m"},
                    client=c.client, yes=True, listener=stop)  # fmt: skip
    result = runner.run()
    assert result.status == "interrupted", (result.error, result.report_lines())

    followups = possible_followups(result.run_id, client=c.client, books={replace.name: replace})

    assert followups["resume"] == (True, "continues from step wait-replacement (1 of 6 steps left)")
    assert not followups["undo"].possible
    assert followups["undo"].why.startswith("cannot be undone past step delete-nodeclaim: ")


def test_a_refused_undo_of_an_undone_run_is_audited_and_neither_is_offered(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    drain = drain_book(tmp_path)
    result, _ = ctrl_c_in_drain(c, drain)
    assert resumed(result.run_id, c, [drain], tmp_path).undo().status == "undone"

    with pytest.raises(RunError, match="is already undone"):
        resumed(result.run_id, c, [drain], tmp_path).undo()
    followups = possible_followups(result.run_id, client=c.client, books={drain.name: drain})

    last = audit_of(result.run_id)[-1]
    assert (last["event"], last["undo"]) == ("refused", True)
    assert last["reason"] == f"run {result.run_id} is already undone"
    assert followups == {
        "resume": (False, f"run {result.run_id} was undone: start a new run instead"),
        "undo": (False, f"run {result.run_id} is already undone"),
    }
    assert possible_followups("nope0000", client=c.client)["undo"] == (
        False,
        "no run 'nope0000': `mignurse runs` lists them",
    )


def test_runs_run_id_prints_what_can_follow(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    runner: Runner
    stop = When(on("step-started", "cordon"), lambda: runner.cancel())
    runner = Runner(cordon, {"node": node}, client=c.client, yes=True, listener=stop)
    run_id = runner.run().run_id

    shown = _run_cli(c, state_home, "runs", run_id)
    doc = json.loads(_run_cli(c, state_home, "runs", run_id, "-o", "json").stdout)

    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert (
        f"next: `mignurse run --resume {run_id}` continues from step cordon (1 of 1 steps left)"
        in lines
    )
    assert "undo is not offered: nothing to undo: no step changed what undo can put back" in lines
    assert doc["followups"]["resume"]["possible"] is True
    assert doc["followups"]["undo"] == {
        "possible": False,
        "why": "nothing to undo: no step changed what undo can put back",
    }
    assert st.RunState.load(run_id).status == "interrupted"  # asking changed nothing
