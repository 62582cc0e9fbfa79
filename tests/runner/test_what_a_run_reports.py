"""What a run says to the operator when it ends and before it starts
(mignurse/runner/outcome.py, mignurse/runner/plan.py): the exit code a script reads, one
report line a step (where the node stands, not what the step meant), and the plan as the
confirmation prompt shows it: steps already done on a resume, read-only steps, a blocked step,
another run's leftovers or the refusal that stops the whole run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.runner import state as st
from mignurse.runner.outcome import RunResult
from mignurse.runner.plan import Plan, PlannedStep
from mignurse.runner.schema import Runbook, default_folder, load_runbook
from mignurse.runner.step import Change, Harm, NodeCommand, StepPlan

from .enginehelpers import Cluster

NODE = "ip-10-0-1-2.ec2.internal"


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("dry-run", 0),
        ("succeeded", 0),
        ("declined", 1),
        ("blocked", 1),
        ("failed", 1),
        ("undone", 1),
        ("interrupted", 130),
    ],
)
def test_a_script_reads_how_the_run_ended_from_its_exit_code(status: str, code: int) -> None:
    assert RunResult("5a7e0001", status, None).exit_code == code


def test_a_resume_of_a_run_that_never_was_is_a_usage_error_in_one_line(
    cluster_for: Callable[..., Cluster], state_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = cluster_for()

    code = main(["--kubeconfig", str(c.kubeconfig), "run", "--resume", "5a7e0099", "--yes"])

    assert code == 2  # a usage error: apart from a run refused or failed (1) or stopped (130)
    assert code not in {RunResult("5a7e0099", s, None).exit_code for s in ("blocked", "failed")}
    assert capsys.readouterr().err == (
        "mignurse: error: no run '5a7e0099': `mignurse runs` lists them\n"
    )


def step(sid: str, status: str, **fields: Any) -> st.StepState:
    return st.StepState(sid, sid, status=status, **fields)


def test_the_report_says_where_each_step_left_the_node_and_no_more() -> None:
    steps = [
        step("cordon", st.VERIFIED, applied={"wasUnschedulable": False}),
        step("collect", st.VERIFIED, applied={"bundle": "/tmp/mignurse-node.tar.gz"}),
        step("report", st.SKIPPED, applied={"summary": f"{NODE}: cordoned, Ready=True"}),
        # a failed step's summary is what it meant to do, not what holds: never shown
        step("label", st.FAILED, applied={"summary": "labels set"}, error="verify: not set"),
        # Ctrl-C mid-apply: the step's error is its status, said once
        step("drain", st.STOPPED, error="interrupted"),
        step("evict", st.UNDONE, applied={"summary": "evicted 3 pods"}, undo="undone"),
        step("replace", st.PENDING),
    ]

    lines = RunResult("5a7e0001", st.RUN_FAILED, None, steps).report_lines()

    assert lines == [
        "cordon: verified",
        "collect: verified: /tmp/mignurse-node.tar.gz",
        f"report: skipped: {NODE}: cordoned, Ready=True",
        "label: failed: verify: not set",
        "drain: interrupted",
        "evict: undone (undone)",
        "replace: pending",
    ]


def shipped(name: str) -> Runbook:
    return load_runbook(default_folder() / f"{name}.yaml")


def planned(book: Runbook, **per_step: dict[str, Any]) -> list[PlannedStep]:
    return [PlannedStep(spec, spec.make(), **per_step.get(spec.id, {})) for spec in book.steps]


CORDON = StepPlan(
    changes=[Change(f"node/{NODE}", "spec.unschedulable", None, True)],
    notes=["pods already running stay"],
)
COLLECT = StepPlan(commands=[NodeCommand(NODE, ("journalctl", "-u", "kubelet"), "the journal")])


def test_a_resumed_plan_shows_the_done_steps_as_done_and_plans_only_the_rest() -> None:
    book = shipped("cordon-and-collect")
    steps = planned(
        book,
        cordon={"status": st.VERIFIED, "plan": CORDON},
        collect={"plan": COLLECT},
        report={"plan": StepPlan(nothing_to_do=True)},
    )

    text = Plan(book, NODE, steps, Harm.NONE).text()

    assert text.splitlines() == [
        f"cordon-and-collect on {NODE}: {book.title}",
        "1. cordon (Cordon the node): already verified",
        "2. collect (Collect the node's support bundle) [read-only]",
        f"   run on {NODE}: journalctl -u kubelet  (the journal)",
        "3. report (Report the node's state) [read-only]",
        "   nothing to do",
    ]


def test_a_fresh_plan_shows_each_change_and_each_note_before_the_prompt() -> None:
    book = shipped("cordon-and-collect")
    steps = planned(book, cordon={"plan": CORDON}, collect={"plan": COLLECT})

    text = Plan(book, NODE, steps, Harm.LOW).text()

    assert text.splitlines()[1:5] == [
        "1. cordon (Cordon the node)",
        f"   change node/{NODE}: spec.unschedulable (absent) → True",
        "   note: pods already running stay",
        "2. collect (Collect the node's support bundle) [read-only]",
    ]


def test_a_blocked_step_says_why_and_the_run_names_it() -> None:
    book = shipped("cordon-and-collect")
    steps = planned(book, cordon={"plan": CORDON}, collect={"blocked": "no node access"})
    plan = Plan(book, NODE, steps, Harm.LOW)

    assert plan.blocked_line() == "step collect cannot run: no node access"
    lines = plan.text().splitlines()
    assert lines[-3:] == [
        "2. collect (Collect the node's support bundle) [read-only]",
        "   BLOCKED: no node access",
        "3. report (Report the node's state) [read-only]",
    ]


def test_another_runs_leftovers_are_shown_and_a_refusal_stops_the_whole_run(
    tmp_path: Path,
) -> None:
    book = shipped("cordon-and-collect")
    left = "run 5a7e0002 (cordon) interrupted: node cordoned by it"
    shown = Plan(book, NODE, planned(book), Harm.LOW, leftovers=[left])
    refused = Plan(book, NODE, planned(book), Harm.LOW, refusal="another run holds the node")

    assert shown.blocked_line() == ""
    assert shown.text().splitlines()[1] == f"left by another run: {left}"
    assert refused.blocked_line() == "another run holds the node"
    assert refused.text().splitlines()[1] == "BLOCKED: another run holds the node"


def test_the_plans_json_names_each_steps_harm_and_the_runs() -> None:
    book = shipped("replace-instance")
    steps = planned(book, cordon={"plan": CORDON}, collect={"plan": COLLECT})

    shown = Plan(book, NODE, steps, Harm.HIGH).to_json()

    assert shown["harm"] == "high"
    assert [(s["id"], s["harm"], s["mutates"]) for s in shown["steps"]][:3] == [
        ("collect", "none", False),
        ("cordon", "low", True),
        ("drain", "high", True),
    ]
    assert shown["steps"][1]["plan"]["changes"][0]["field"] == "spec.unschedulable"
