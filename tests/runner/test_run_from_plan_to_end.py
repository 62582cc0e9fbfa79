"""A run from its plan to its end, each way it can go (mignurse/runner/engine.py,
mignurse/runner/core.py): a dry run, a read-only runbook, a declined or unconfirmed one, a
plan blocked or refused, a lock held by another run, a step retried after a blip, read again
after a 409, skipped when there is nothing to do, failed and undone or left, interrupted; a
resume that only has its end to record or a lock to release; and what `--resume` and
`--undo` would do now. In process against the simulator on a manual clock, one small run a
test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, NODES, ClusterClient
from mignurse.runner import core as core_module
from mignurse.runner import lock as lock_module
from mignurse.runner import state as st
from mignurse.runner.audit import Audit, local_holder
from mignurse.runner.engine import Runner, possible_followups
from mignurse.runner.lock import LOCK_ANNOTATION, TargetLock
from mignurse.runner.outcome import RunError, RunEvent
from mignurse.runner.schema import Runbook, default_folder, load_runbook
from mignurse.runner.step import Harm
from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED

from .enginehelpers import Cluster
from .interrupthelpers import audit_of, lock_on
from .test_engine import Answer, drain_book, unschedulable
from .test_run_records_each_step import CORDON_AND_LOOK as CORDON_AND_LOOK_TEXT
from .test_run_records_each_step import cordon_and_look
from .test_undo_records_as_it_goes import interrupted_pause
from .test_undo_walks_back import cordon_as, runbook, step, stopped_run

Make = Callable[..., Cluster]

LOOK = """\
name: look
title: Report the node
target: node
params:
  node: {type: node, required: true}
steps:
  - id: report
    action: report-node
"""


class Refuse:
    """A Confirmer for a run that must not ask: it fails the test when asked."""

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        raise AssertionError(f"asked for {expected_word!r} at {level.name}")


class Watch:
    """A listener that keeps the events and what the run's flags said at each."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self.runner: Runner | None = None
        self.flags: list[tuple[str, str, bool, bool]] = []

    def __call__(self, event: RunEvent) -> None:
        self.events.append(event)
        if self.runner is not None:
            self.flags.append(
                (event.kind, event.step, self.runner.prompting, self.runner.finishing)
            )

    def kinds(self, *wanted: str) -> list[tuple[str, str, str]]:
        return [(e.kind, e.step, e.message) for e in self.events if e.kind in wanted]


def run_of(book: Runbook, c: Cluster, node: str, **kw: Any) -> tuple[Runner, Watch]:
    watch = Watch()
    runner = Runner(book, {"node": node}, client=c.client, listener=watch, **kw)
    watch.runner = runner
    return runner, watch


def has_state(run_id: str) -> bool:
    try:
        st.RunState.load(run_id)
    except FileNotFoundError:
        return False
    return True


# -- before anything changes --------------------------------------------------------------


def test_a_dry_run_shows_the_plan_and_leaves_no_state_and_no_lock(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, confirmer=Refuse())

    result = runner.run(dry_run=True)

    assert (result.status, result.exit_code) == ("dry-run", 0)
    assert watch.kinds("plan") == [("plan", "", result.plan.text())]  # type: ignore[union-attr]
    assert not has_state(runner.run_id) and lock_on(c, node) is None
    assert not unschedulable(c, node)
    (dry,) = audit_of(runner.run_id)
    assert (dry["event"], dry["target"], dry["who"]["local"]) == ("dry-run", node, local_holder())
    assert [s["id"] for s in dry["plan"]["steps"]] == ["cordon", "report"]


def test_a_read_only_runbook_asks_nothing_and_takes_no_lock(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    seen: dict[str, Any] = {}
    runner, watch = run_of(runbook(tmp_path, LOOK), c, node, confirmer=Refuse())

    def during(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-started":
            seen["lock"] = lock_on(c, node)

    runner.listener = during
    result = runner.run()

    assert result.status == "succeeded", result.error
    assert seen == {"lock": None}
    assert audit_of(runner.run_id)[0]["confirmed"] == "not needed (no change)"
    assert result.steps[0].applied["summary"] == f"{node}: schedulable, Ready=True"  # type: ignore[index]


def test_a_change_without_a_confirmer_or_yes_is_refused_before_anything(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, _watch = run_of(cordon_and_look(tmp_path), c, node)

    with pytest.raises(
        RunError, match="this runbook changes the cluster: confirm it, or pass --yes"
    ):
        runner.run()

    assert not unschedulable(c, node) and not has_state(runner.run_id)


def test_a_drain_asks_for_the_cluster_and_node_name_and_any_other_answer_declines(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    answer = Answer("y")
    runner, _watch = run_of(drain_book(tmp_path), c, node, confirmer=answer)

    result = runner.run()

    word = f"{c.client.info.name}/{node}"
    assert answer.asked == [(Harm.HIGH, word)]
    assert (result.status, result.exit_code, result.error) == ("declined", 1, "")
    assert not unschedulable(c, node) and not has_state(runner.run_id)
    assert [e["event"] for e in audit_of(runner.run_id)] == ["declined"]

    typed, watch = run_of(drain_book(tmp_path), c, node, confirmer=Answer(word))
    on_step(typed, watch, "cordon", typed.cancel)  # stopped at once: only its start matters
    assert typed.run().status == "interrupted"
    assert audit_of(typed.run_id)[0]["confirmed"] == f"typed {word}"


def test_an_undo_answered_yes_after_ctrl_c_at_its_prompt_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    done_cordon = step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False})
    run_id = stopped_run(book, c, node, [done_cordon, step("report", "report-node")])
    cordon_as(c, node, run_id)
    undo: Runner

    class YesButCtrlC:
        def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
            undo.cancel()  # Ctrl-C while the prompt was open, then "y"
            return True

    undo = Runner.from_state(run_id, client=c.client, books={book.name: book})
    undo.confirmer = YesButCtrlC()
    result = undo.undo()

    assert result.status == "declined"
    assert result.error == "interrupted before the first change: nothing changed"
    assert unschedulable(c, node) and lock_on(c, node) is None


def test_a_read_rides_out_a_short_outage_of_the_api_server(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def outage_for_most_of_a_second() -> None:
        c.sim.fail("GET", cordon_write(node), code=500, times=None)
        threading.Timer(0.8, c.sim.clear_faults).start()

    on_step(runner, watch, "cordon", outage_for_most_of_a_second)
    result = runner.run()

    assert result.status == "succeeded", result.error
    retried = [m for _k, s, m in watch.kinds("output") if m.startswith("retrying after")]
    assert 1 <= len(retried) <= 4  # read again 0.5 s, 1 s, 2 s… apart, until it answers


def test_a_read_gives_up_once_its_retry_budget_is_spent(
    cluster_for: Make, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core_module, "READ_RETRY_SECONDS", 1.8)  # 30 s on a real run
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def outage_during_the_cordon(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-started" and event.step == "cordon":
            c.sim.fail("GET", cordon_write(node), code=503, times=None)
        if event.kind == "step-finished" and event.step == "cordon":
            c.sim.clear_faults()

    runner.listener = outage_during_the_cordon
    result = runner.run()

    assert result.error.startswith("step cordon failed: the API server answered 503")
    retried = [m for _k, s, m in watch.kinds("output") if m.startswith("retrying after")]
    # each read waits twice as long as the last: 0.5 s, 1 s, then 2 s: 3.5 s, past the budget
    assert len(retried) == 3


def test_the_confirmation_is_the_only_time_ctrl_c_answers_at_once(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node)
    prompting: list[bool] = []

    class Yes:
        def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
            prompting.append(runner.prompting)
            return True

    runner.confirmer = Yes()
    result = runner.run()

    assert result.status == "succeeded", result.error
    assert prompting == [True]
    # planning and every step: Ctrl-C stops the run; only recording its end lets it finish
    assert [f for f in watch.flags if f[0] != "output"] == [
        ("plan", "", False, False),
        ("step-started", "cordon", False, False),
        ("step-finished", "cordon", False, False),
        ("step-started", "report", False, False),
        ("step-finished", "report", False, False),
        ("finished", "", False, True),
    ]
    started = audit_of(runner.run_id)[0]
    assert (started["confirmed"], started["who"]["local"]) == ("answered y", local_holder())
    assert st.RunState.load(runner.run_id).holder == local_holder()


def test_ctrl_c_while_planning_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def ctrl_c_at_the_plan(event: RunEvent) -> None:
        watch(event)
        if event.kind == "plan":
            runner.cancel()

    runner.listener = ctrl_c_at_the_plan
    result = runner.run()

    assert (result.status, result.error) == (
        "declined",
        "interrupted before the first change: nothing changed",
    )
    assert not unschedulable(c, node) and not has_state(runner.run_id)
    dry, _watch = run_of(cordon_and_look(tmp_path), c, node)
    dry.listener = lambda event: dry.cancel() if event.kind == "plan" else None
    assert dry.run(dry_run=True).status == "declined"  # not shown as a finished dry run


def test_a_run_with_an_audit_log_that_is_not_a_file_is_refused_in_one_line_even_a_dry_run(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    """Every run is recorded, a dry run and a read-only one too: none of them may end in an
    internal error on a log it cannot write."""
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    log = state_home / "mignurse" / "audit.jsonl"
    log.mkdir(parents=True)
    said = f"the audit log {log} is a folder, not a regular file: move it away"

    for book, dry_run in (
        (cordon_and_look(tmp_path), False),
        (cordon_and_look(tmp_path), True),
        (runbook(tmp_path, LOOK), False),
    ):
        with pytest.raises(RunError, match=f"^{said}"):
            Runner(book, {"node": node}, client=c.client, yes=True).run(dry_run=dry_run)

    assert not unschedulable(c, node) and lock_on(c, node) is None


def test_a_node_that_is_gone_blocks_the_run_at_its_plan(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = "ip-10-9-9-9.ec2.internal"
    runner, _watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    result = runner.run()

    why = f"step cordon cannot run: node {node} does not exist (any more)"
    assert (result.status, result.error) == ("blocked", why)
    assert [s.blocked for s in result.plan.steps] == [  # type: ignore[union-attr]
        f"node {node} does not exist (any more)",
        f"node {node} does not exist (any more)",
    ]
    assert [s.plan for s in result.plan.steps] == [None, None]  # type: ignore[union-attr]
    assert not has_state(runner.run_id)
    (refused,) = audit_of(runner.run_id)
    assert (refused["event"], refused["reason"], refused["resume"]) == ("refused", why, False)


# -- the lock ---------------------------------------------------------------------------


def take_lock(c: Cluster, node: str, run_id: str = "b0b", **kw: Any) -> TargetLock:
    lock = TargetLock(
        c.client, target="node", name=node, holder="bob@box", run_id=run_id, runbook="x", **kw
    )
    lock.acquire()
    return lock


def test_a_lock_taken_between_the_plan_and_the_start_refuses_a_new_run_and_leaves_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def bob_is_faster(event: RunEvent) -> None:
        watch(event)
        if event.kind == "plan":
            take_lock(c, node)

    runner.listener = bob_is_faster
    result = runner.run()

    assert result.status == "blocked"
    assert result.error.startswith(f"node {node} is locked by bob@box (run b0b, x;")
    assert not has_state(runner.run_id)  # a new run that never started leaves nothing to resume
    assert not unschedulable(c, node)
    assert [(e["event"], e["resume"]) for e in audit_of(runner.run_id)] == [("refused", False)]


def test_a_lock_taken_before_a_resume_starts_keeps_the_run_as_it_was(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    run_id = stopped_run(book, c, node, [step("cordon", "cordon"), step("report", "report-node")])
    saved = st.RunState.load(run_id)
    saved.steps[0].intents = 1  # killed right after announcing its cordon
    saved.save()
    resume = Runner.from_state(run_id, client=c.client, books={book.name: book}, yes=True)

    def bob_is_faster(event: RunEvent) -> None:
        if event.kind == "plan":
            take_lock(c, node)

    resume.listener = bob_is_faster
    result = resume.run()

    assert result.status == "blocked"
    assert st.RunState.load(run_id).status == st.INTERRUPTED  # still there to resume or undo
    assert [(e["event"], e["resume"]) for e in audit_of(run_id)] == [("refused", True)]


def test_an_expired_lock_taken_over_is_said_as_the_run_starts(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    take_lock(c, node, "dead", ttl=1)
    c.sim.advance(60)
    runner, watch = run_of(runbook(tmp_path, LOOK.replace("report-node", "cordon")), c, node)
    runner.yes = True

    result = runner.run()

    assert result.status == "succeeded", result.error
    took = f"took over the expired lock of bob@box on node {node} (run dead, x, expired"
    assert result.notices[0].startswith(took)
    assert next(m for _k, _s, m in watch.kinds("notice")).startswith(took)
    started = audit_of(runner.run_id)[0]
    assert (started["event"], started["confirmed"]) == ("started", "--yes")
    assert started["notices"][0].startswith(took)


# -- who ran it ---------------------------------------------------------------------------

ARN = "arn:aws:sts::123456789012:assumed-role/oncall/alice"


class Sts:
    """The caller identity as STS answers it, once `answer` is set, `late` seconds after."""

    def __init__(self, late: float = 0.0) -> None:
        self.answer = threading.Event()
        self.late = late

    def get_caller_identity(self) -> dict[str, str]:
        self.answer.wait(30)
        time.sleep(self.late)
        return {"Arn": ARN}


@pytest.fixture
def aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEONCALL")  # AWS set up: it is looked up


@pytest.mark.usefixtures("aws_keys")
def test_an_aws_identity_known_at_the_start_is_said_once_with_the_start(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    sts = Sts()
    sts.answer.set()
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True, aws=lambda _s: sts)

    def known_before_the_start(event: RunEvent) -> None:
        watch(event)
        if event.kind == "plan":
            assert runner._identity is not None and runner._identity.done.wait(30)

    runner.listener = known_before_the_start
    runner.run()

    events = audit_of(runner.run_id)
    assert events[0]["who"]["aws"] == ARN
    assert [e for e in events if e["event"] == "identity"] == []


@pytest.mark.usefixtures("aws_keys")
def test_an_aws_identity_slower_than_the_run_is_recorded_before_its_end(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    sts = Sts(late=0.3)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True, aws=lambda _s: sts)

    def answers_at_the_last_step(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-finished" and event.step == "report":
            sts.answer.set()

    runner.listener = answers_at_the_last_step
    runner.run()

    events = [(e["event"], e.get("aws")) for e in audit_of(runner.run_id)]
    assert audit_of(runner.run_id)[0]["who"]["aws"] is None
    assert events[-2:] == [("identity", ARN), ("finished", None)]
    assert [e for e in events if e[0] == "identity"] == [("identity", ARN)]


@pytest.mark.usefixtures("aws_keys")
def test_an_aws_identity_never_holds_the_run_up_and_is_recorded_once_when_it_comes(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    sts = Sts(late=0.5)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True, aws=lambda _s: sts)
    lookup: list[bool] = []

    def answers_half_a_second_after_the_plan(event: RunEvent) -> None:
        watch(event)
        if event.kind == "plan":
            sts.answer.set()
        if event.kind == "step-started" and event.step == "report":
            assert runner._identity is not None
            lookup.append(runner._identity.done.wait(30))

    runner.listener = answers_half_a_second_after_the_plan
    runner.run()

    events = [(e["event"], e.get("aws")) for e in audit_of(runner.run_id)]
    assert lookup == [True]
    assert events[0] == ("started", None)  # not held up for the lookup
    assert [e for e in events if e[0] == "identity"] == [("identity", ARN)]


# -- the steps, one by one --------------------------------------------------------------


@pytest.fixture
def other(cluster_for: Make) -> Iterator[Callable[[Cluster], ClusterClient]]:
    """Another operator's client on the same cluster (a kubectl beside the run)."""
    made: list[ClusterClient] = []

    def connect(c: Cluster) -> ClusterClient:
        made.append(ClusterClient.connect(str(c.kubeconfig)))
        return made[-1]

    yield connect
    for client in made:
        client.close()


def cordon_write(node: str) -> str:
    return f"/nodes/{node}$"


def others_write_first(
    c: Cluster,
    theirs: ClusterClient,
    node: str,
    times: int,
    look: Callable[[], object] = lambda: None,
) -> None:
    """Another operator labels the node just before each of the run's next `times` writes to
    it: each of them meets a changed object (409). `look` runs first, as each write arrives."""
    left = [times]

    def label(_sim: object) -> None:
        look()
        theirs.patch(NODES, node, {"metadata": {"labels": {"team": f"other-{left[0]}"}}})
        left[0] -= 1
        if left[0]:
            c.sim.race("PATCH", cordon_write(node), label)

    c.sim.race("PATCH", cordon_write(node), label)


def on_step(runner: Runner, watch: Watch, step_id: str, do: Callable[[], object]) -> None:
    """Do `do` as `step_id` starts (after the lock is taken: its patch is not the step's)."""

    def listener(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-started" and event.step == step_id:
            do()

    runner.listener = listener


def test_a_cordon_that_meets_another_writer_is_read_again_and_applied(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    theirs = other(c)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    on_disk: list[tuple[int, dict[str, Any]]] = []

    def as_the_write_arrives() -> None:
        cordon = st.RunState.load(runner.run_id).step("cordon")
        on_disk.append((cordon.intents, cordon.prior))

    on_step(
        runner,
        watch,
        "cordon",
        lambda: others_write_first(c, theirs, node, 1, as_the_write_arrives),
    )

    result = runner.run()

    assert result.status == "succeeded", result.error
    # the change and the prior value undo needs were on disk before the cordon was sent
    assert on_disk == [(1, {"wasUnschedulable": False})]
    intents = [e for e in audit_of(runner.run_id) if e["event"] == "intent"]
    assert [(e["step"], e["change"]) for e in intents] == [("cordon", f"cordon node {node}")] * 2
    assert next(m for _k, s, m in watch.kinds("output") if s == "cordon").startswith(
        "read again after: "
    )
    cordon = st.RunState.load(runner.run_id).step("cordon")
    assert (cordon.status, cordon.attempts, cordon.intents) == ("verified", 2, 2)
    assert cordon.prior == {"wasUnschedulable": False}
    assert unschedulable(c, node)


def test_a_cordon_made_by_hand_as_the_runs_cordon_is_sent_stays_theirs_through_undo(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    # `kubectl cordon` by another operator between the step's record and its patch: the patch
    # meets a changed node (409), the step reads it again and finds it cordoned, by no run.
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    theirs = other(c)
    book = cordon_and_look(tmp_path)
    runner, watch = run_of(book, c, node, yes=True)

    def listener(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-started" and event.step == "cordon":
            c.sim.race(
                "PATCH",
                cordon_write(node),
                lambda _s: theirs.patch(NODES, node, {"spec": {"unschedulable": True}}),
            )
        if event.kind == "step-started" and event.step == "report":
            runner.cancel()  # Ctrl-C: the run stops, to be undone

    runner.listener = listener

    result = runner.run()

    assert result.status == "interrupted", result.error
    cordon = st.RunState.load(runner.run_id).step("cordon")
    assert cordon.applied == {"wasUnschedulable": True}  # theirs, not this run's
    undo = Runner.from_state(runner.run_id, client=c.client, books={book.name: book}, yes=True)
    assert undo.undo().status == "undone"
    assert unschedulable(c, node)  # their cordon is still in place
    assert not (c.client.get(NODES, node)["metadata"].get("annotations") or {}).get(
        "mignurse.io/cordoned-by"
    )


def test_a_cordon_that_keeps_meeting_other_writers_fails_after_three_reads_and_is_undone(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    theirs = other(c)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    on_step(runner, watch, "cordon", lambda: others_write_first(c, theirs, node, 4))

    result = runner.run()

    assert result.status == "undone"  # undo: on-failure, and nothing was left to put back
    assert result.error.startswith("step cordon failed: cannot patch node")
    cordon = st.RunState.load(runner.run_id).step("cordon")
    assert (cordon.status, cordon.attempts) == ("undone", 4)
    assert len([s for _k, s, _m in watch.kinds("output") if s == "cordon"]) == 3
    assert not unschedulable(c, node)
    assert audit_of(runner.run_id)[-1]["outcome"] == "undone"


def test_a_node_deleted_under_the_cordon_fails_it_at_its_precondition(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    c = cluster_for()
    node = c.nodes("ng-gpu-l4")[0]  # a managed node group's: a deleted Node goes at once
    theirs = other(c)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    on_step(
        runner,
        watch,
        "cordon",
        lambda: c.sim.race("PATCH", cordon_write(node), lambda _s: theirs.delete(NODES, node)),
    )

    result = runner.run()

    assert result.status == "failed"
    assert result.error.startswith(
        f"step cordon failed: precondition: node {node} does not exist (any more)"
    )


def test_a_node_already_cordoned_by_hand_is_left_as_it_is(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    result = runner.run()

    assert result.status == "succeeded", result.error
    assert watch.kinds("step-finished")[0] == ("step-finished", "cordon", "nothing to do")
    cordon = st.RunState.load(runner.run_id).step("cordon")
    assert (cordon.status, cordon.applied, cordon.attempts) == (
        "skipped",
        {"wasUnschedulable": True},
        0,
    )
    assert result.report_lines()[0] == "cordon: skipped"
    assert result.notices == [f"now: node {node} is Ready, cordoned"]  # by hand: no run named


def test_ctrl_c_while_the_cordon_is_sent_stops_the_run_and_says_it_may_have_landed(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    on_step(
        runner,
        watch,
        "cordon",
        lambda: c.sim.race("PATCH", cordon_write(node), lambda _s: runner.cancel()),
    )

    result = runner.run()

    assert (result.status, result.exit_code) == ("interrupted", 130)
    assert result.error == "interrupted during step cordon"
    assert result.notices[:2] == [
        "step cordon stopped after announcing a change, which may have been made: resume and "
        "undo both read the cluster to settle it",
        "nothing was undone",
    ]
    assert watch.kinds("step-finished") == [("step-finished", "cordon", "interrupted")]
    assert [f for f in watch.flags if f[0] == "finished"] == [("finished", "", False, True)]
    saved = st.RunState.load(runner.run_id)
    assert (saved.status, saved.error) == ("interrupted", "interrupted during step cordon")
    assert [s.status for s in saved.steps] == ["interrupted", "pending"]
    finished = audit_of(runner.run_id)[-1]
    assert (finished["event"], finished["outcome"], finished["step"]) == (
        "finished",
        "interrupted",
        "cordon",
    )
    assert lock_on(c, node) is None


def test_a_lock_taken_over_in_the_middle_of_a_run_stops_it_before_its_next_change(
    cluster_for: Make, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "CONFIRM_CACHE_SECONDS", 0.0)  # read back at every change
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    bob = json.dumps(
        {"holder": "bob@box", "run": "b0b", "runbook": "x", "expires": "2099-01-01T00:00:00Z"}
    )
    on_step(
        runner,
        watch,
        "cordon",
        lambda: c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: bob}}}),
    )

    result = runner.run()

    lost = f"lock lost: node {node} is now locked by bob@box (run b0b, x)"
    assert result.status == "failed"
    assert result.error == f"step cordon stopped: {lost}; nothing more was changed"
    assert result.notices[0] == (
        "nothing was undone: another run holds the target now; once it has finished, "
        f"`mignurse run --undo {runner.run_id}` or `mignurse run --resume {runner.run_id}`"
    )
    assert watch.kinds("step-finished") == [("step-finished", "cordon", lost)]
    assert [f for f in watch.flags if f[0] == "finished"] == [("finished", "", False, True)]
    saved = st.RunState.load(runner.run_id)
    assert (saved.status, saved.step("cordon").error) == ("failed", lost)
    assert not unschedulable(c, node)
    assert lock_on(c, node)["run"] == "b0b"  # type: ignore[index]
    assert result.notices[-1] == f"now: node {node} is Ready, schedulable, locked by another run"


def test_ctrl_c_between_two_steps_stops_before_the_next_one(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def ctrl_c_after_the_cordon(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-finished" and event.step == "cordon":
            runner.cancel()

    runner.listener = ctrl_c_after_the_cordon
    result = runner.run()

    assert (result.status, result.error) == ("interrupted", "interrupted during step report")
    assert result.notices == [
        "nothing was undone",
        f"now: node {node} is Ready, cordoned by this run",
    ]
    assert [s.status for s in result.steps] == ["verified", "pending"]
    assert unschedulable(c, node)


def test_a_read_back_refused_by_rbac_fails_the_step_at_once(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)

    def refuse_the_next_read(_sim: object) -> None:
        c.sim.fail("GET", cordon_write(node), code=403, times=1)

    on_step(
        runner,
        watch,
        "cordon",
        lambda: c.sim.race("PATCH", cordon_write(node), refuse_the_next_read, conflict=False),
    )
    result = runner.run()

    assert result.status == "undone"  # a 403 answers the same next time: not read again
    assert result.error.startswith("step cordon failed: RBAC refused: cannot get nodes")
    assert [m for _k, _s, m in watch.kinds("output") if m.startswith("retrying")] == []
    assert not unschedulable(c, node)


def test_a_step_out_of_time_stops_reading_through_an_outage(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    text = CORDON_AND_LOOK_TEXT.replace("action: cordon\n", "action: cordon\n    timeout: 1\n")
    runner, watch = run_of(runbook(tmp_path, text), c, node, yes=True)

    def outage_during_the_cordon(event: RunEvent) -> None:
        watch(event)
        if event.kind == "step-started" and event.step == "cordon":
            c.sim.fail("GET", cordon_write(node), code=500, times=None)
        if event.kind == "step-finished" and event.step == "cordon":
            c.sim.clear_faults()

    runner.listener = outage_during_the_cordon
    result = runner.run()

    assert result.status == "undone"
    assert result.error.startswith("step cordon failed: the API server answered 500")
    retries = [m for _k, _s, m in watch.kinds("output") if m.startswith("retrying after")]
    assert 1 <= len(retries) <= 2  # a one-second step rides out no more than its second


def test_the_run_keeps_the_runbooks_defaults_beside_the_params_given(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    runner, _watch = run_of(drain_book(tmp_path, timeout="90s"), c, node)
    assert runner.params == {"node": node, "drain_timeout": "90s"}
    assert runner.state.params == runner.params


# -- over another run's leftovers, and resumed --------------------------------------------------


def test_a_new_run_over_another_runs_unfinished_cordon_of_the_same_runbook_is_refused(
    cluster_for: Make, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    monkeypatch.setenv("MIGNURSE_RUNBOOKS", str(Path(book.path).parent))  # where it is kept
    earlier = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("report", "report-node"),
        ],
    )
    cordon_as(c, node, earlier)
    runner, _watch = run_of(book, c, node, confirmer=Refuse())

    result = runner.run()

    assert result.status == "blocked"
    assert result.error == (
        f"run {earlier} (cordon-and-look, interrupted before step report) left: node {node} "
        f"cordoned by it (mignurse.io/cordoned-by); `mignurse run --resume {earlier}` continues "
        f"from step report (1 of 2 steps left); `mignurse run --undo {earlier}` undoes cordon "
        "(newest first); then run this again"
    )
    left = result.error.removesuffix("; then run this again")
    assert result.plan.leftovers == [left]  # type: ignore[union-attr]


def test_a_read_only_look_and_a_resume_run_beside_what_other_runs_left(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    done_cordon = step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False})
    earlier = stopped_run(book, c, node, [done_cordon, step("report", "report-node")])
    cordon_as(c, node, earlier)
    later = st.RunState.load(earlier)
    later.run_id = "5a7e0004"  # a second run, killed after the same cordon
    later.save()
    alive = st.RunState.load(earlier)
    alive.status, alive.host = st.RUNNING, "bobs-laptop"  # the first one still runs, elsewhere
    alive.save()
    take_lock(c, node)  # and another run holds the node now, for a while

    looked = Runner(runbook(tmp_path, LOOK), {"node": node}, client=c.client).run()
    assert looked.status == "succeeded", looked.error  # a look takes no lock, changes nothing

    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: None}}})
    resumed = Runner.from_state(
        later.run_id, client=c.client, books={book.name: book}, confirmer=Refuse()
    ).run()
    # only its report is left: a read-only step asks nothing, and what the other run left is
    # no reason to refuse finishing this one
    assert resumed.status == "succeeded", resumed.error
    assert [s.status for s in resumed.steps] == ["verified", "verified"]


def test_a_resume_with_only_a_report_left_reports_the_bundle_an_earlier_step_took(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    text = (tmp_path / "x").as_posix()
    book = runbook(
        tmp_path,
        CORDON_AND_LOOK_TEXT.replace("name: cordon-and-look", "name: cordon-collect-look").replace(
            "  - id: report\n", "  - id: collect\n    action: collect-bundle\n  - id: report\n"
        ),
    )
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("collect", "collect-bundle", st.VERIFIED, {"bundle": f"{text}.tar.gz"}),
            step("report", "report-node"),
        ],
    )
    cordon_as(c, node, run_id)
    books = {book.name: book}
    saved = st.RunState.load(run_id)
    saved.host = "alices-laptop"  # stopped there; its state shared with this machine
    saved.save()

    (resume, undo) = possible_followups(run_id, client=c.client, books=books).values()
    result = Runner.from_state(run_id, client=c.client, books=books, confirmer=Refuse()).run()

    assert resume == (True, "continues from step report (1 of 3 steps left)")
    assert undo == (True, "undoes cordon (newest first)")
    assert result.status == "succeeded", result.error
    assert result.steps[2].applied["summary"].endswith(f"; bundle {text}.tar.gz")  # type: ignore[index]
    assert audit_of(run_id)[0]["event"] == "resumed"


# -- what can follow a stopped run ------------------------------------------------------------


def followups_of(c: Cluster, book: Runbook, run_id: str) -> tuple[tuple[bool, str], ...]:
    found = possible_followups(run_id, client=c.client, books={book.name: book})
    return (
        (found["resume"].possible, found["resume"].why),
        (found["undo"].possible, found["undo"].why),
    )


def test_a_run_that_never_changed_anything_has_nothing_to_follow(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    declined = Runner(book, {"node": node}, client=c.client, confirmer=Answer("n")).run()
    never = f"run {declined.run_id} never changed anything (declined, refused or a dry run)"
    unknown = "no run '5a7e0099': `mignurse runs` lists them"

    assert followups_of(c, book, declined.run_id) == ((False, never), (False, never))
    assert followups_of(c, book, "5a7e0099") == ((False, unknown), (False, unknown))

    moved = stopped_run(book, c, node, [step("cordon", "cordon"), step("report", "report-node")])
    saved = st.RunState.load(moved)
    saved.context = "prod-eu"
    saved.save()
    Audit().write("started", moved, runbook=book.name, target=node)  # it ran, elsewhere
    elsewhere = followups_of(c, book, moved)
    assert elsewhere[0] == (
        False,
        f"run {moved} ran against context 'prod-eu', not {c.client.info.context!r}: pass "
        "--context prod-eu",
    )


def test_a_finished_run_whose_process_left_its_lock_is_resumed_to_release_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"x": 1}),
            step("report", "report-node", st.VERIFIED, {}),
        ],
    )
    saved = st.RunState.load(run_id)
    saved.status = st.SUCCEEDED
    saved.save()
    take_lock(c, node, run_id)

    resume, undo = followups_of(c, book, run_id)
    result = Runner.from_state(run_id, client=c.client, books={book.name: book}).run()

    assert resume == (
        True,
        f"releases the lock its process left on node {node} (the run itself succeeded)",
    )
    assert undo[0] is False and "succeeded; undo is for failed or interrupted runs" in undo[1]
    assert (result.status, result.notices) == (
        "succeeded",
        [f"released the lock its process left on node {node}"],
    )
    assert lock_on(c, node) is None
    assert [e["event"] for e in audit_of(run_id)] == ["lock-released"]
    assert followups_of(c, book, run_id)[0] == (
        False,
        f"run {run_id} already succeeded: nothing to resume",
    )


@pytest.mark.parametrize(
    ("status", "resume"),
    [
        (st.RUNNING, (True, "records the end of the run: every step is done")),
        (st.INTERRUPTED, (False, "run 5a7e0002 has no step left to run")),
    ],
)
def test_a_run_with_every_step_done_has_only_its_end_to_record(
    cluster_for: Make, state_home: Path, tmp_path: Path, status: str, resume: tuple[bool, str]
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"x": 1}),
            step("report", "report-node", st.VERIFIED, {}),
        ],
    )
    cordon_as(c, node, run_id)
    saved = st.RunState.load(run_id)
    saved.status = status  # a `running` one whose process is gone: killed at its very end
    saved.save()

    assert followups_of(c, book, run_id)[0] == resume


def test_a_stopped_run_on_a_node_that_is_gone_can_neither_resume_nor_undo(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("ng-gpu-l4")[0]  # a managed node group's: a deleted Node goes at once
    book = cordon_and_look(tmp_path)
    run_id = stopped_run(
        book, c, node, [step("cordon", "cordon", st.STOPPED), step("report", "report-node")]
    )
    c.client.delete(NODES, node)

    assert followups_of(c, book, run_id) == (
        (False, f"step cordon cannot run: node {node} does not exist (any more)"),
        (False, f"node {node} no longer exists: there is nothing on it to put back"),
    )


def test_a_stopped_run_on_a_node_another_run_holds_waits_for_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    book = cordon_and_look(tmp_path)
    run_id = stopped_run(
        book,
        c,
        node,
        [
            step("cordon", "cordon", st.VERIFIED, {"wasUnschedulable": False}),
            step("report", "report-node"),
        ],
    )
    cordon_as(c, node, run_id)
    take_lock(c, node)

    resume, undo = followups_of(c, book, run_id)

    held = f"node {node} is locked by bob@box (run b0b, x;"
    assert resume[0] is False and resume[1].startswith(held)
    assert undo[0] is False and undo[1].startswith(held)
    assert undo[1] == resume[1]


def test_a_drain_out_of_time_has_recorded_its_eviction_and_the_cordon_is_undone(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]  # its trainer pod takes longer than a second to go
    runner, _watch = run_of(drain_book(tmp_path, timeout="1s"), c, node, yes=True)

    result = runner.run()

    assert result.status == "undone"
    assert result.error.startswith(f"step drain failed: drain of {node} timed out after 1 s")
    events = audit_of(runner.run_id)
    (evicted,) = [e for e in events if e["event"] == "evicted"]
    assert (evicted["step"], evicted["pod"].split("/")[0]) == ("drain", "training")
    assert [(e["event"], e.get("step")) for e in events if "intent" in e["event"]] == [
        ("intent", "cordon"),
        ("intent", "drain"),
        ("undo-intent", "cordon"),
    ]
    assert not unschedulable(c, node)


def test_a_paused_repair_can_be_undone_its_target_being_the_cluster_not_a_node(
    cluster_for: Make, state_home: Path
) -> None:
    c = cluster_for()
    book, _cluster, state = interrupted_pause(c)

    undo = followups_of(c, book, state.run_id)[1]

    assert undo == (True, "undoes pause (newest first)")  # a cluster is no node to look for


def test_a_node_deleted_during_the_run_is_reported_as_being_deleted(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]  # Karpenter's: its finalizer keeps a deleted Node a while
    theirs = other(c)
    runner, watch = run_of(cordon_and_look(tmp_path), c, node, yes=True)
    on_step(runner, watch, "report", lambda: theirs.delete(NODES, node))

    result = runner.run()

    assert result.status == "succeeded", result.error
    assert result.notices == [
        f"now: node {node} is Ready, being deleted since 12:00:00Z, cordoned by this run"
    ]


MIG_MANAGER_OFF = """\
name: mig-manager-off
title: Turn mig-manager off
target: node
params:
  node: {type: node, required: true}
steps:
  - id: mig-manager-off
    action: mig-manager-off
    timeout: 5
"""


def test_a_label_another_operator_set_first_is_not_set_again(
    cluster_for: Make, state_home: Path, tmp_path: Path, other: Callable[[Cluster], ClusterClient]
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]  # no mig-manager pod on it: nothing to wait for
    theirs = other(c)
    off = {"metadata": {"labels": {"nvidia.com/gpu.deploy.mig-manager": "false"}}}
    runner, watch = run_of(runbook(tmp_path, MIG_MANAGER_OFF), c, node, yes=True)
    on_step(
        runner,
        watch,
        "mig-manager-off",
        lambda: c.sim.race("PATCH", cordon_write(node), lambda _s: theirs.patch(NODES, node, off)),
    )

    result = runner.run()

    assert result.status == "succeeded", result.error
    assert next(m for _k, _s, m in watch.kinds("output")).startswith("read again after: ")
    saved = st.RunState.load(runner.run_id).step("mig-manager-off")
    # read again, the step found its change made: it was not applied a second time
    assert (saved.attempts, saved.applied) == (
        1,
        {"set": {"nvidia.com/gpu.deploy.mig-manager": "false"}},
    )


@pytest.mark.parametrize(("by", "said"), [("5a7e0003", "this run"), ("b0b", "run b0b")])
def test_a_cluster_runs_last_words_say_who_paused_node_repair_and_since_when(
    cluster_for: Make, state_home: Path, by: str, said: str
) -> None:
    c = cluster_for()
    book = load_runbook(default_folder() / "pause-node-repair.yaml")
    record = {"run": by, "by": "alice@laptop", "at": "2026-11-20T11:58:00Z", "settings": []}
    c.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"metadata": {"annotations": {ANNOTATION_PAUSED: json.dumps(record)}}},
        namespace="kube-system",
    )
    runner = Runner(book, {"mode": "off"}, client=c.client)
    runner.state.run_id = "5a7e0003"

    assert runner.standing() == f"now: node repair is paused by {said} since 2026-11-20T11:58:00Z"
