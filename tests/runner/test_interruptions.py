"""Every interruption of a runbook ends in a known state: Ctrl-C before or inside a step, a
process killed right after an API write, a run that lost its lock, a lock left behind, API
blips and refusals, and what `--resume`, `--undo`, `mignurse runs` and the audit log make of
each. In process, against the simulator; "killed" is a client that dies right after the
request it was told to let through, as a SIGKILLed process does (tests/hostile has the same
with real signals and real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cliserver
import pytest

from mignurse.cli import run_runbook
from mignurse.cluster.client import NODECLAIMS, NODES
from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner import lock as lockmod
from mignurse.runner import state as st
from mignurse.runner.audit import Audit, read_audit, runs_from_audit
from mignurse.runner.engine import Runner
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.outcome import RunEvent, RunResult
from mignurse.runner.schema import load_runbook
from mignurse.runner.step import Harm, StepPlan
from mignurse.runner.steps.kube import CORDONED_BY
from mignurse.runner.steps.mig.labels import PauseGpuOperands
from mignurse.runner.steps.mig.resume import ResumeGpuOperands
from mignurse.sim.nodes import NodeSandbox, story_for

from .enginehelpers import Cluster, never_consolidated
from .interrupthelpers import (
    DEPLOY,
    DyingClient,
    Killed,
    audit_of,
    book,
    is_lock_patch,
    karpenter_view,
    lock_on,
    mig_parted_runs,
    mig_state,
    node_calls,
    node_view,
    resumed,
    shells,
    writes_to,
)
from .repairhelpers import SimContext
from .test_engine import CORDON_AND_DRAIN

Make = Callable[..., Cluster]
PAUSED = "paused-for-mig-change"


def drain_book(tmp_path: Path, timeout: str = "60s") -> Any:
    path = tmp_path / "cordon-and-drain.yaml"
    path.write_text(CORDON_AND_DRAIN.format(undo="on-failure", timeout=timeout))
    return load_runbook(path)


def healthy_g7e(c: Cluster) -> str:
    """A Ready g7e node of mig-1g24gb whose operands run and whose layout is `success`."""
    return sorted(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "success"
    )[0]


def on(kind: str, step: str = "", text: str = "") -> Callable[[RunEvent], bool]:
    def match(event: RunEvent) -> bool:
        return (
            event.kind == kind
            and (not step or event.step == step)
            and (not text or text in event.message)
        )

    return match


class When:
    """A listener that calls `then()` the first time an event matches."""

    def __init__(self, match: Callable[[RunEvent], bool], then: Callable[[], Any]) -> None:
        self.match, self.then, self.fired = match, then, False
        self.events: list[RunEvent] = []

    def __call__(self, event: RunEvent) -> None:
        self.events.append(event)
        if not self.fired and self.match(event):
            self.fired = True
            self.then()


def ctrl_c_in_drain(c: Cluster, drain: Any) -> tuple[RunResult, When]:
    """Run `drain` on the first gpu-infer node, Ctrl-C when a PDB refuses an eviction."""
    runner: Runner
    stop = When(
        on("output", "drain", "refused by their disruption budget"), lambda: runner.cancel()
    )
    runner = Runner(drain, {"node": c.nodes("gpu-infer")[0]}, client=c.client, yes=True,
                    listener=stop)  # fmt: skip
    return runner.run(), stop


# -- Ctrl-C inside a step, then undo ------------------------------------------------------------


def test_ctrl_c_while_the_operands_pause_then_undo_puts_every_label_back(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=2)  # the operand pods take a second to go
    node = healthy_g7e(c)
    before = node_view(c, node)
    assert before["labels"][DEPLOY + "device-plugin"] == "true"
    reapply = book("reapply-mig-no-hooks", tmp_path)
    sandboxes = tmp_path / "sandboxes"
    runner: Runner
    stop = When(on("output", "pause-operands", "labelled"), lambda: runner.cancel())
    runner = Runner(
        reapply, {"node": node}, client=c.client, shell_for=shells(c, sandboxes), yes=True,
        listener=stop,
    )  # fmt: skip

    result = runner.run()

    assert result.status == "interrupted", (result.error, result.report_lines())
    assert node_view(c, node)["labels"][DEPLOY + "device-plugin"] == PAUSED
    [step] = [s for s in result.steps if s.id == "pause-operands"]
    assert step.status == "interrupted"
    assert step.prior["labels"][DEPLOY + "device-plugin"] == "true"  # on disk before the patch

    undone = resumed(result.run_id, c, [reapply], sandboxes).undo()

    assert undone.status == "undone", (undone.error, undone.report_lines())
    assert node_view(c, node) == before
    assert lock_on(c, node) is None


def test_a_503_in_the_operands_wait_never_makes_the_paused_labels_the_prior_ones(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=40)
    node = healthy_g7e(c)
    before = node_view(c, node)
    sandboxes = tmp_path / "sandboxes"
    raw = c.node(node)
    # A GPU process that never exits: no-gpu-processes fails, and the run undoes itself.
    NodeSandbox.for_node(sandboxes / node, raw, story=story_for(raw)).set_mig_knobs(
        gpu_processes=[{"pid": 4242, "name": "python3", "gpu": 0}]
    )
    blip = When(
        on("output", "pause-operands", "labelled"),
        lambda: c.sim.fail("GET", r"/api/v1/pods$", code=503, times=3),
    )
    runner = Runner(
        book("reapply-mig-no-hooks", tmp_path),
        {"node": node, "processes_timeout": "3s"},
        client=c.client, shell_for=shells(c, sandboxes), yes=True, listener=blip,
    )  # fmt: skip

    result = runner.run()

    assert blip.fired
    assert result.status == "undone", (result.error, result.report_lines())
    assert "pid 4242 (python3)" in result.error
    assert node_view(c, node) == before


def test_undo_says_exactly_what_it_could_not_put_back(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    drain = drain_book(tmp_path)
    result, _ = ctrl_c_in_drain(c, drain)
    assert result.status == "interrupted"
    # Someone else's run cordons the node meanwhile: its annotation now names that run.
    theirs = json.dumps({"holder": "bob@box", "run": "b0b0b0b0"})
    c.client.patch(NODES, node, {"metadata": {"annotations": {CORDONED_BY: theirs}}})

    undone = resumed(result.run_id, c, [drain], tmp_path).undo()

    assert undone.status == "failed" and undone.exit_code == 1
    assert (
        undone.error == f"undo incomplete: cordon: node {node} is still cordoned (by run b0b0b0b0)"
    )
    assert "cordon: undo-failed" in undone.report_lines()[0]
    assert node_view(c, node)["unschedulable"]  # left to the other run


# -- Ctrl-C before a step's change: nothing new is applied ---------------------------------------


def test_ctrl_c_as_the_cordon_starts_applies_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    runner: Runner
    stop = When(on("step-started", "cordon"), lambda: runner.cancel())
    runner = Runner(book("cordon", tmp_path), {"node": node}, client=c.client, yes=True,
                    listener=stop)  # fmt: skip

    result = runner.run()

    assert result.status == "interrupted" and result.exit_code == 130
    assert not node_view(c, node)["unschedulable"]
    assert len(writes_to(c, f"/nodes/{node}")) == 2  # the lock, taken and released
    assert [s.status for s in result.steps] == ["pending"]


def test_ctrl_c_as_the_pause_starts_leaves_karpenter_alone(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")
    before = karpenter_view(c)
    runner: Runner
    stop = When(on("step-started", "pause"), lambda: runner.cancel())
    runner = Runner(book("pause-node-repair", tmp_path), {}, client=c.client, yes=True,
                    listener=stop)  # fmt: skip

    result = runner.run()

    assert result.status == "interrupted"
    assert karpenter_view(c) == before
    assert not writes_to(c, "/deployments/")


def test_ctrl_c_as_the_nodeclaim_delete_starts_keeps_the_nodeclaim(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy", speed=30)
    node = c.nodes("gpu-train")[0]
    runner: Runner
    stop = When(on("step-started", "delete-nodeclaim"), lambda: runner.cancel())
    runner = Runner(
        book("replace-instance", tmp_path), {"node": node, "collect": False},
        client=c.client, yes=True, listener=stop,
    )  # fmt: skip

    result = runner.run()

    assert result.status == "interrupted", (result.error, result.report_lines())
    assert not writes_to(c, "/nodeclaims/")
    # The drained node is empty: on a slow machine the clock runs long enough for Karpenter
    # to consolidate it. That deletion is Karpenter's own (it says so), never the run's.
    deleting = {
        n["metadata"]["name"]
        for n in c.sim.objects("nodeclaims")
        if n.get("status", {}).get("nodeName") == node and n["metadata"].get("deletionTimestamp")
    }
    disrupted = {
        e["involvedObject"]["name"]
        for e in c.sim.objects("events")
        if e.get("reason") == "DisruptionTerminating"
    }
    assert deleting <= disrupted, (deleting, disrupted)


class Waiting:
    """A confirmer at a prompt: the signal arrives while it waits for the answer."""

    def __init__(self) -> None:
        self.answered = False

    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the operator never types; a signal must end the wait
        self.answered = True
        return True


def test_the_first_ctrl_c_at_the_typed_name_prompt_answers_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    prompt = Waiting()
    runner = Runner(book("replace-instance", tmp_path), {"node": node, "collect": False},
                    client=c.client, confirmer=prompt)  # fmt: skip

    with run_runbook._ctrl_c(runner):
        result = runner.run()

    assert not prompt.answered
    assert result.status == "declined" and "interrupted before the first change" in result.error
    assert not writes_to(c, "/")
    assert [e["event"] for e in read_audit()] == ["declined"]


# -- killed right after a write: the state and the audit knew first ------------------------------


def test_killed_right_after_the_cordon_patch_undo_still_uncordons(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "patch" and not is_lock_patch(args))
    runner = Runner(cordon, {"node": node}, client=dying, yes=True)  # type: ignore[arg-type]

    with pytest.raises(Killed):
        runner.run()

    assert node_view(c, node)["unschedulable"]
    assert lock_on(c, node)["run"] == runner.run_id  # type: ignore[index]
    saved = st.RunState.load(runner.run_id)
    assert saved.status == "running" and saved.steps[0].intents == 1
    intent = [e for e in audit_of(runner.run_id) if e["event"] == "intent"]
    assert [e["change"] for e in intent] == [f"cordon node {node}"]

    undone = resumed(runner.run_id, c, [cordon], tmp_path).undo()

    assert undone.status == "undone", (undone.error, undone.report_lines())
    view = node_view(c, node)
    assert not view["unschedulable"] and CORDONED_BY not in view["annotations"]
    assert lock_on(c, node) is None


def test_killed_right_after_the_karpenter_patch_undo_restores_the_gates(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")
    before = karpenter_view(c)
    pause = book("pause-node-repair", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "patch" and not is_lock_patch(args))
    runner = Runner(pause, {}, client=dying, yes=True)  # type: ignore[arg-type]

    with pytest.raises(Killed):
        runner.run()
    assert "NodeRepair=false" in karpenter_view(c)["env"][0]["value"]

    undone = resumed(runner.run_id, c, [pause], tmp_path).undo()

    assert undone.status == "undone", (undone.error, undone.report_lines())
    assert karpenter_view(c) == before
    assert lock_on(c, None) is None


# -- a run that lost its lock changes nothing more -----------------------------------------------


def test_a_run_whose_lock_was_taken_over_stops_before_its_next_change(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    theirs = {
        "holder": "bob@box",
        "run": "b0b0b0b0",
        "runbook": "cordon",
        "expires": "2099-01-01T00:00:00Z",
    }
    seen: dict[str, int] = {}

    def take_over() -> None:
        # What another run does once this one's lock expired (this one stopped, SIGSTOP).
        seen["requests"] = len(c.sim.requests)
        c.client.patch(
            NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: json.dumps(theirs)}}}
        )

    steal = When(on("output", "drain", "refused by their disruption budget"), take_over)
    result = Runner(drain_book(tmp_path, "20s"), {"node": node}, client=c.client, yes=True,
                    listener=steal).run()  # fmt: skip

    assert result.status == "failed"
    assert "lock lost" in result.error and "bob@box (run b0b0b0b0" in result.error
    assert not [r for r in c.sim.requests[seen["requests"] + 1 :] if r["method"] != "GET"]
    assert lock_on(c, node) == theirs  # not released by the run that lost it
    assert node_view(c, node)["unschedulable"]  # and nothing undone under the other run


# -- stale locks ----------------------------------------------------------------------------------


def test_killed_right_after_taking_the_lock_the_run_has_a_state_to_resume(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "patch" and is_lock_patch(args))
    runner = Runner(cordon, {"node": node}, client=dying, yes=True)  # type: ignore[arg-type]

    with pytest.raises(Killed):
        runner.run()
    assert lock_on(c, node)["run"] == runner.run_id  # type: ignore[index]

    done = resumed(runner.run_id, c, [cordon], tmp_path).run()

    assert done.status == "succeeded", done.error
    assert node_view(c, node)["unschedulable"] and lock_on(c, node) is None


def test_a_lock_that_cannot_be_released_is_reported_with_the_command_that_clears_it(
    cluster_for: Make, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lockmod, "BLIP_SECONDS", 1.0)
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    outage = When(on("finished"), lambda: c.sim.fail("*", f"/nodes/{node}$", code=503, times=None))
    result = Runner(book("cordon", tmp_path), {"node": node}, client=c.client, yes=True,
                    listener=outage).run()  # fmt: skip
    c.sim.clear_faults()

    assert result.status == "succeeded"
    left, standing = result.notices[-2:]
    assert left.startswith(f"the lock on node {node} could not be released (")
    assert left.endswith(f"`mignurse unlock {node}` clears it now")
    assert standing.startswith(  # the report says so rather than guess where the node stands
        f"now: node {node} cannot be read (the API server answered 503 to get nodes: "
    ), standing
    assert [e["event"] for e in audit_of(result.run_id)][-1] == "lock-left"
    assert lock_on(c, node)["run"] == result.run_id  # type: ignore[index]


def _run_cli(c: Cluster, state_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env["XDG_STATE_HOME"] = str(state_home)
    env["HOME"] = str(state_home)
    argv = ["--kubeconfig", str(c.kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=60)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_a_dead_runs_lock_is_refused_with_its_liveness_and_unlock_clears_it(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    pid = _dead_pid()
    stale = {
        "holder": "alice@laptop", "run": "dead0001", "runbook": "reapply-mig-no-hooks",
        "expires": "2099-01-01T00:00:00Z", "host": st.this_host(), "pid": pid,
        "renewed": "2026-11-20T11:50:00Z",
    }  # fmt: skip
    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: json.dumps(stale)}}})

    refused = Runner(book("cordon", tmp_path), {"node": node}, client=c.client, yes=True).run()

    assert refused.status == "blocked"
    assert f"pid {pid} on {st.this_host()}: gone, last renewed 10 min ago" in refused.error
    assert refused.error.endswith(f"if that run is dead, `mignurse unlock {node}` clears it")
    (event,) = [e for e in read_audit() if e["event"] == "refused"]
    assert event["who"]["kube"] == "sim-oncall" and "@" in event["who"]["local"]
    assert not list((state_home / "mignurse" / "runs").glob("*.json"))  # it never started

    no_tty = _run_cli(c, state_home, "unlock", node)
    assert no_tty.returncode == 2
    assert no_tty.stderr.endswith("pass --yes to unlock\n") and lock_on(c, node) == stale

    done = _run_cli(c, state_home, "unlock", node, "--yes")

    assert done.returncode == 0, done.stderr
    assert f"node {node} is locked by alice@laptop (run dead0001" in done.stderr
    assert done.stdout == f"node {node}: unlocked (the lock of run dead0001 is removed)\n"
    assert lock_on(c, node) is None
    unlock = read_audit()[-1]
    assert (unlock["event"], unlock["run"], unlock["target"]) == ("unlock", "dead0001", node)
    assert unlock["lock"] == stale and unlock["confirmed"] == "--yes" and unlock["who"]["local"]
    assert _run_cli(c, state_home, "unlock", node, "--yes").stdout == (
        f"node {node} holds no mignurse lock\n"
    )


def test_unlock_refuses_a_holder_that_still_runs_unless_forced(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    held = lockmod.TargetLock(c.client, target="node", name=node, holder="me@here",
                              run_id="live0001", runbook="cordon")  # fmt: skip
    held.acquire()  # this test's own process: alive

    refused = _run_cli(c, state_home, "unlock", node, "--yes")

    assert refused.returncode == 1
    assert "its run looks alive" in refused.stderr and "--force" in refused.stderr
    assert lock_on(c, node)["run"] == "live0001"  # type: ignore[index]
    forced = _run_cli(c, state_home, "unlock", node, "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert lock_on(c, node) is None
    assert read_audit()[-1]["forced"] is True


# -- --resume after the change landed -------------------------------------------------------------


def test_resume_node_repair_killed_after_its_patch_resumes_to_the_end(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop", speed=30)  # rollouts need the clock to run
    before = karpenter_view(c)
    paused = Runner(book("pause-node-repair", tmp_path), {}, client=c.client, yes=True).run()
    assert paused.status == "succeeded", paused.error
    resume = book("resume-node-repair", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "patch" and not is_lock_patch(args))
    runner = Runner(resume, {}, client=dying, yes=True)  # type: ignore[arg-type]
    with pytest.raises(Killed):
        runner.run()
    assert karpenter_view(c)["env"] == before["env"]  # the restore landed, the record is gone

    done = resumed(runner.run_id, c, [resume], tmp_path).run()

    assert done.status == "succeeded", (done.error, done.report_lines())
    assert karpenter_view(c) == before
    assert lock_on(c, None) is None


def test_replace_instance_past_the_nodeclaim_delete_is_not_undone_and_resumes_to_the_end(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    # The run must be what deletes the NodeClaim: with the pool's consolidateAfter (1m, two
    # seconds at speed 30) Karpenter may consolidate the drained node first on a busy machine,
    # and the undo then finds no node rather than the barrier (the fault trials cover that).
    c = cluster_for(never_consolidated("healthy", "gpu-train"), speed=30)
    node = c.nodes("gpu-train")[0]
    replace = book("replace-instance", tmp_path)
    runner: Runner
    stop = When(on("step-started", "wait-replacement"), lambda: runner.cancel())
    runner = Runner(
        replace, {"node": node, "collect": False, "wait": "5m", "drain_timeout": "2m"},
        client=c.client, yes=True, listener=stop,
    )  # fmt: skip
    result = runner.run()
    assert result.status == "interrupted", (result.error, result.report_lines())
    seen = len(c.sim.requests)

    refused = resumed(result.run_id, c, [replace], tmp_path).undo()

    assert refused.status == "blocked" and refused.exit_code == 1
    assert refused.error.startswith("cannot be undone past step delete-nodeclaim: nodeclaim/")
    assert "(cordon, drain, delete-nodeclaim) stay as they are, the safe state" in refused.error
    assert not writes_to(c, "/", seen)  # the terminating node stays cordoned
    assert st.RunState.load(result.run_id).status == "interrupted"
    # Karpenter finishes the old node; the run then resumes without it.
    deadline = time.monotonic() + 60
    while node in c.nodes():
        assert time.monotonic() < deadline, "the old node was never deleted"
        time.sleep(0.2)

    done = resumed(result.run_id, c, [replace], tmp_path).run()

    assert done.status == "succeeded", (done.error, done.report_lines())
    replacement = done.steps[-1].applied["replacement"]  # type: ignore[index]
    assert replacement != node and replacement in c.nodes("gpu-train")


# -- undo never returns half-repartitioned GPUs to service ----------------------------------------


def test_undo_after_an_interrupted_apply_keeps_the_node_cordoned_and_paused(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-hook-notready", speed=40)
    node = next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "success"
    )
    sandboxes = tmp_path / "sandboxes"
    reapply = book("reapply-mig-no-hooks", tmp_path)
    runner: Runner
    # Ctrl-C just after `apply --mode-only` enabled MIG: it stops before the next command.
    stop = When(on("output", "apply-layout", "assert --mode-only"), lambda: runner.cancel())
    runner = Runner(reapply, {"node": node}, client=c.client, shell_for=shells(c, sandboxes),
                    yes=True, listener=stop)  # fmt: skip
    result = runner.run()
    assert result.status == "interrupted", (result.error, result.report_lines())
    gpus = mig_state(sandboxes, node)["gpus"]
    assert {(g["current"], len(g["instances"])) for g in gpus} == {("Enabled", 0)}

    refused = resumed(result.run_id, c, [reapply], sandboxes).undo()

    assert refused.status == "blocked"
    assert "cannot be undone past step apply-layout: the GPUs of" in refused.error
    assert "GPU 0: MIG Enabled, no instances (was MIG Disabled)" in refused.error
    view = node_view(c, node)
    assert view["unschedulable"]
    assert view["labels"][LABEL_MIG_CONFIG_STATE] == "pending"
    assert view["labels"][DEPLOY + "device-plugin"] == PAUSED
    assert view["labels"][DEPLOY + "mig-manager"] == "false"  # never handed back mid-change
    runs = mig_parted_runs(sandboxes)
    assert runs and all(r["hooksFileEnv"] is None and not r["hooksRun"] for r in runs)
    assert not [x for x in node_calls(sandboxes) if "daemon-reload" in x or "restart" in x]


# -- API faults ----------------------------------------------------------------------------------


def test_allocatable_is_trusted_only_from_a_new_device_plugin_and_held_steady(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-hook-notready")  # a manual clock: the steps' waits move it
    node = next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "success"
    )
    outputs: dict[str, dict[str, Any]] = {}

    def ctx() -> SimContext:
        return SimContext(client=c.client, params={"node": node}, run_id="r1", holder="t@x",
                          sim=c.sim, outputs=outputs, timeout=300)  # fmt: skip

    pause = PauseGpuOperands()
    plan = StepPlan.from_json(pause.plan(ctx()).to_json())
    outputs["pause-operands"] = pause.apply(ctx(), plan)
    c.sim.advance(1.5)  # a few quick steps: kubelet has not emptied allocatable yet
    resume = ResumeGpuOperands()
    plan = StepPlan.from_json(resume.plan(ctx()).to_json())
    applied = resume.apply(ctx(), plan)
    assert resume.verify(ctx(), plan, applied) is None

    seen = []  # what the node advertises, second by second, after the step said it was done
    for _ in range(10):
        c.sim.advance(1)
        seen.append(c.node(node)["status"]["allocatable"].get("nvidia.com/mig-1g.10gb"))
    assert seen == ["56"] * 10


def test_a_four_second_outage_is_ridden_out_by_the_cordon(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]

    def outage() -> None:
        c.sim.unavailable = True
        threading.Timer(4.0, lambda: setattr(c.sim, "unavailable", False)).start()

    down = When(on("step-started", "cordon"), outage)
    result = Runner(book("cordon", tmp_path), {"node": node}, client=c.client, yes=True,
                    listener=down).run()  # fmt: skip

    assert down.fired
    assert result.status == "succeeded", result.error
    assert any("retrying after:" in e.message and "503" in e.message for e in down.events)
    assert node_view(c, node)["unschedulable"]


def test_a_401_after_the_token_changed_fails_the_wait_at_once(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")  # a stopped clock: the rollout waits
    rotate = When(on("output", "pause", "waiting:"), lambda: setattr(c.sim, "token", "rotated"))
    result = Runner(book("pause-node-repair", tmp_path, **{"600": "20"}), {}, client=c.client,
                    yes=True, listener=rotate).run()  # fmt: skip

    assert rotate.fired
    assert result.status == "failed"
    assert result.error.startswith(
        "step pause failed: cannot read deployment/kube-system/karpenter: the API server "
        "refused the credentials"
    )
    assert "(401 Unauthorized)" in result.error and "not done after" not in result.error


def test_reapply_leaves_a_node_that_was_cordoned_before_it_cordoned(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=40)
    node = healthy_g7e(c)
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})  # kubectl cordon

    result = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node}, client=c.client,
                    shell_for=shells(c, tmp_path / "sandboxes"), yes=True).run()  # fmt: skip

    assert result.status == "succeeded", (result.error, result.report_lines())
    assert result.report_lines()[-2:] == ["uncordon: skipped", "release-disruption: verified"]
    assert node_view(c, node)["unschedulable"]
    # every node command's exit status and output are in the audit
    commands_run = [e for e in audit_of(result.run_id) if e["event"] == "node-command"]
    applied = [e for e in commands_run if e["step"] == "apply-layout" and e["rc"] == 0]
    assert applied and all("stdout" in e and "stderr" in e for e in commands_run)


# -- the audit log and `mignurse runs` ------------------------------------------------------------


def test_the_evictions_of_an_interrupted_drain_are_in_the_audit(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    result, _ = ctrl_c_in_drain(c, drain_book(tmp_path))
    assert result.status == "interrupted"

    evicted = [e["pod"] for e in audit_of(result.run_id) if e["event"] == "evicted"]
    accepted = [r for r in c.sim.requests if r["path"].endswith("/eviction") and r["status"] == 201]
    assert evicted and len(evicted) == len(accepted)
    announced = [e["change"] for e in audit_of(result.run_id) if e["event"] == "intent"]
    assert all(f"evict pod {pod}" in announced for pod in evicted)


def test_runs_shows_a_killed_run_and_keeps_an_outcome_a_refused_resume_did_not_change(
    state_home: Path,
) -> None:
    audit = Audit()
    killed = st.RunState("k1ll3d00", "cordon", {}, "ctx", "c", "n1", "a@b", pid=_dead_pid())
    killed.save()
    audit.write("started", "k1ll3d00", runbook="cordon", target="n1", who={"local": "a@b"})
    audit.write("started", "1nt3rr0p", runbook="cordon", target="n2", who={"local": "a@b"})
    audit.write("finished", "1nt3rr0p", outcome="interrupted")
    audit.write("refused", "1nt3rr0p", reason="locked", resume=True, who={"local": "c@d"})

    runs = {r["run"]: r for r in runs_from_audit(read_audit(), {"k1ll3d00": killed})}

    assert runs["k1ll3d00"]["outcome"] == "killed"
    assert runs["1nt3rr0p"]["outcome"] == "interrupted"
    assert runs["1nt3rr0p"]["last"] == "refused resume"


def test_runs_pages_with_limit(cluster_for: Make, state_home: Path) -> None:
    c = cluster_for()
    audit = Audit()
    for i in range(35):
        audit.write("dry-run", f"run{i:04d}", runbook="cordon", target="n", who={"local": "a@b"})

    default = _run_cli(c, state_home, "runs")
    three = _run_cli(c, state_home, "runs", "--limit", "3", "-o", "json")
    every = _run_cli(c, state_home, "runs", "--limit", "0", "-o", "json")

    assert default.returncode == 0 and len(default.stdout.splitlines()) == 31  # header + 30
    assert "the last 30 of 35 runs: --limit N shows more, --limit 0 all" in default.stderr
    assert [r["run"] for r in json.loads(three.stdout)] == ["run0032", "run0033", "run0034"]
    assert len(json.loads(every.stdout)) == 35
    bad = _run_cli(c, state_home, "runs", "--limit", "-1")
    assert bad.returncode == 2 and "is negative" in bad.stderr


def test_the_run_state_of_a_nodeclaim_delete_records_it_before_it_is_sent(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy", speed=30)
    node = c.nodes("gpu-train")[0]
    replace = book("replace-instance", tmp_path)
    dying = DyingClient(c.client, lambda name, args: name == "delete")
    runner = Runner(replace, {"node": node, "collect": False, "drain_timeout": "2m"},
                    client=dying, yes=True)  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(Killed):
        runner.run()
    saved = st.RunState.load(runner.run_id).step("delete-nodeclaim")
    claim = saved.prior["nodeclaim"]
    assert c.client.get(NODECLAIMS, claim)["metadata"].get("deletionTimestamp")
    refused = resumed(runner.run_id, c, [replace], tmp_path).undo()
    assert refused.status == "blocked" and f"nodeclaim/{claim} is deleting" in refused.error
