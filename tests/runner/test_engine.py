"""The engine against the simulator: plan first, confirmation, locks, audit, undo, Ctrl-C."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mignurse.cluster.client import NODES
from mignurse.runner import state as st
from mignurse.runner.audit import read_audit
from mignurse.runner.engine import Runner, possible_followups
from mignurse.runner.lock import LOCK_ANNOTATION, TargetLock
from mignurse.runner.outcome import RunEvent
from mignurse.runner.schema import Runbook, load_runbook, load_runbooks
from mignurse.runner.step import Harm
from mignurse.runner.wiring import node_shells
from mignurse.sim.nodes import sandbox_shells

from .enginehelpers import Cluster

Make = Callable[..., Cluster]

CORDON_AND_DRAIN = """\
name: cordon-and-drain
title: Cordon and drain
target: node
undo: {undo}
params:
  node: {{type: node, required: true}}
  drain_timeout: {{type: duration, default: {timeout}}}
steps:
  - id: cordon
    action: cordon
  - id: drain
    action: drain
    timeout: drain_timeout
"""


class Answer:
    """A Confirmer that records what it was asked and answers as told."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[tuple[Harm, str]] = []

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        self.asked.append((level, expected_word))
        return self.answer == expected_word


def drain_book(tmp_path: Path, *, undo: str = "on-failure", timeout: str = "60s") -> Runbook:
    path = tmp_path / "cordon-and-drain.yaml"
    path.write_text(CORDON_AND_DRAIN.format(undo=undo, timeout=timeout))
    return load_runbook(path)


def unschedulable(c: Cluster, node: str) -> bool:
    return bool(c.node(node)["spec"].get("unschedulable"))


def lock_of(c: Cluster, node: str) -> Any:
    raw = (c.node(node)["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
    return json.loads(raw) if raw else None


def writes(c: Cluster) -> list[dict[str, Any]]:
    return [r for r in c.sim.requests if r["method"] in ("PATCH", "POST", "DELETE", "PUT")]


def test_dry_run_plans_everything_and_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    events: list[RunEvent] = []
    runner = Runner(drain_book(tmp_path), {"node": node}, client=c.client, listener=events.append)
    result = runner.run(dry_run=True)
    assert result.status == "dry-run" and result.exit_code == 0
    text = events[0].message
    assert f"node/{node}: spec.unschedulable False → True" in text
    assert "pod/inference/llm-inference-" in text
    assert writes(c) == []
    assert not unschedulable(c, node)
    assert not (state_home / "mignurse" / "runs").exists()
    assert [e["event"] for e in read_audit()] == ["dry-run"]


def test_low_harm_asks_y_n_and_a_no_changes_nothing(cluster_for: Make, state_home: Path) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    book = load_runbooks()["cordon-and-collect"]
    no = Answer("n")
    shells = node_shells(c.client, sandbox_shells(c.client, state_home))
    result = Runner(book, {"node": node}, client=c.client, confirmer=no, shell_for=shells).run()
    assert result.status == "declined" and no.asked == [(Harm.LOW, "y")]
    assert writes(c) == [] and not unschedulable(c, node)


def test_high_harm_needs_the_cluster_and_node_name_typed(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for(speed=30)  # the drain waits for the kubelet to confirm the pod is gone
    node = c.nodes("gpu-train")[0]
    book = drain_book(tmp_path)
    word = f"{c.client.info.name}/{node}"
    for answer in ("y", node):  # the node alone does not say which cluster was meant
        wrong = Answer(answer)
        assert Runner(book, {"node": node}, client=c.client, confirmer=wrong).run().status == (
            "declined"
        )
        assert wrong.asked == [(Harm.HIGH, word)] and writes(c) == []
    typed = Answer(word)
    result = Runner(book, {"node": node}, client=c.client, confirmer=typed).run()
    assert result.status == "succeeded", result.error
    assert result.report_lines() == ["cordon: verified", "drain: verified"]
    assert unschedulable(c, node) and lock_of(c, node) is None  # released at the end
    events = read_audit()
    # Every change is announced before it is sent: the cordon, then each eviction.
    assert [e["event"] for e in events] == [
        "declined",
        "declined",
        "started",
        "intent",
        "step",
        "intent",
        "evicted",
        "step",
        "finished",
    ]
    assert events[3]["change"] == f"cordon node {node}"
    assert events[3]["prior"] == {"wasUnschedulable": False}
    assert events[5]["change"].startswith("evict pod training/trainer-")
    started = next(e for e in events if e["event"] == "started")
    assert started["who"]["kube"] == "sim-oncall" and "@" in started["who"]["local"]
    assert started["confirmed"] == f"typed {word}"
    assert events[0]["who"]["kube"] == "sim-oncall"  # a refusal says who too
    assert started["params"] == {"node": node, "drain_timeout": "60s"}
    assert started["context"] == c.client.info.context
    steps = [e for e in events if e["event"] == "step"]
    assert [(s["step"], s["status"]) for s in steps] == [
        ("cordon", "verified"),
        ("drain", "verified"),
    ]
    assert steps[0]["plan"]["changes"][0]["field"] == "spec.unschedulable"
    assert steps[0]["started"] <= steps[0]["finished"]
    assert events[-1]["event"] == "finished" and events[-1]["outcome"] == "succeeded"


def test_a_second_run_on_a_locked_node_is_refused_with_the_holder(
    cluster_for: Make, state_home: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    other = TargetLock(
        c.client,
        target="node",
        name=node,
        holder="alice@laptop",
        run_id="3f2a",
        runbook="replace-instance",
    )
    assert other.acquire() is None
    book = load_runbooks()["cordon-and-collect"]
    shells = node_shells(c.client, sandbox_shells(c.client, state_home))
    result = Runner(book, {"node": node}, client=c.client, yes=True, shell_for=shells).run()
    assert result.status == "blocked" and result.exit_code == 1
    assert result.error.startswith(
        f"node {node} is locked by alice@laptop (run 3f2a, replace-instance; pid {os.getpid()} "
        f"on {socket.gethostname()}: still running, last renewed "
    )
    assert result.error.endswith(f"; if that run is dead, `mignurse unlock {node}` clears it")
    assert not unschedulable(c, node)
    assert lock_of(c, node)["holder"] == "alice@laptop"
    other.release()
    assert lock_of(c, node) is None


def test_an_expired_lock_is_taken_over_and_said(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    stale = {"holder": "bob@old", "run": "dead", "runbook": "x", "expires": "2020-01-01T00:00:00Z"}
    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: json.dumps(stale)}}})
    book = load_runbooks()["cordon-and-collect"]
    shells = node_shells(c.client, sandbox_shells(c.client, state_home))
    result = Runner(
        book,
        {"node": node, "since": "1h", "out": str(tmp_path / "b.tar.gz")},
        client=c.client,
        shell_for=shells,
        yes=True,
    ).run()
    assert result.status == "succeeded", result.error
    assert result.notices[0].startswith(f"took over the expired lock of bob@old on node {node}")
    assert lock_of(c, node) is None


def test_an_api_500_in_the_middle_fails_the_step_and_undo_restores_the_node(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]

    def listener(event: RunEvent) -> None:
        if event.kind == "step-finished" and event.step == "cordon":
            c.sim.fail("POST", r"/eviction$", times=None)

    result = Runner(
        drain_book(tmp_path), {"node": node}, client=c.client, yes=True, listener=listener
    ).run()
    assert result.status == "undone"
    lines = result.report_lines()
    assert lines[0] == "cordon: undone (undone)"
    assert lines[1].startswith("drain: failed: eviction of training/trainer-")
    assert "answered 500" in lines[1]
    assert not unschedulable(c, node) and lock_of(c, node) is None
    saved = st.RunState.load(result.run_id)
    assert saved.status == "undone" and saved.step("drain").attempts == 2  # retried once


def test_a_pdb_blocked_drain_names_the_blockers_and_undo_follows_the_runbook(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    first, second = c.nodes("gpu-infer")[:2]
    undone = Runner(
        drain_book(tmp_path, timeout="1s"), {"node": first}, client=c.client, yes=True
    ).run()
    assert undone.status == "undone"
    assert "PDB inference/llm-inference (allows 0 disruption(s) now)" in undone.error
    assert not unschedulable(c, first)
    kept = Runner(
        drain_book(tmp_path / ".." / tmp_path.name, undo="never", timeout="1s"),
        {"node": second},
        client=c.client,
        yes=True,
    ).run()
    assert kept.status == "failed" and kept.report_lines()[0] == "cordon: verified"
    assert unschedulable(c, second)  # `undo: never`: left cordoned, and the report says so


def test_ctrl_c_stops_without_undo_and_undo_by_run_id_restores(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = drain_book(tmp_path, timeout="60s")
    runner: Runner

    def listener(event: RunEvent) -> None:
        if event.kind == "output" and "refused by their disruption budget" in event.message:
            runner.cancel()  # what the SIGINT handler does

    runner = Runner(book, {"node": node}, client=c.client, yes=True, listener=listener)
    result = runner.run()
    assert result.status == "interrupted" and result.exit_code == 130
    assert result.notices[-2:] == [
        "nothing was undone",
        f"now: node {node} is Ready, cordoned by this run",  # read back, not assumed
    ]
    followups = possible_followups(result.run_id, client=c.client, books={book.name: book})
    assert followups["resume"] == (True, "continues from step drain (1 of 2 steps left)")
    assert followups["undo"] == (True, "undoes cordon (newest first)")
    assert unschedulable(c, node)  # nothing undone on its own
    assert lock_of(c, node) is None
    assert st.RunState.load(result.run_id).status == "interrupted"

    undo = Runner.from_state(result.run_id, client=c.client, books={book.name: book}, yes=True)
    undone = undo.undo()
    assert undone.status == "undone"
    # The drain had tried its evictions: they cannot be undone, and the report says so.
    assert [s.status for s in undone.steps] == ["undone", "not-undoable"]
    assert not unschedulable(c, node)
    assert read_audit()[-1]["outcome"] == "undone"
