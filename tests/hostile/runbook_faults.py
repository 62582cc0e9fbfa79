"""Interrupting `mignurse run` for real: a process running a shipped runbook against an
in-process simulator, a signal sent the moment its progress shows a step starting, then
`--resume` or `--undo` in a new process, and the end state read from the cluster, the node
sandboxes, the run state and the audit log. The processes are forked from an interpreter that
has imported the CLI already (tests/cliserver.py): a hundred trials would otherwise spend
most of their CPU importing it again.

What every trial must end in (a known state), whatever the moment the signal landed:
- SIGINT, SIGTERM, SIGHUP (once or twice): exit 130 and `interrupted`, the lock released;
  only a run signalled in its last step may instead have finished it (exit 0).
- SIGKILL: the run state says `running` with a dead pid (`runs` shows `killed`), the lock
  still names the run.
- `--resume`: the run ends `succeeded` and the target is where a clean run leaves it.
- `--undo`: `undone` and the target exactly as before the run; or, past a step that cannot
  be undone (the NodeClaim deleted, the GPUs repartitioned), refused with that reason, the
  node cordoned, and `--resume` then finishes the run.
- Always: no lock left, and on the nodes nothing restarted or stopped kubelet or containerd,
  no `systemctl daemon-reload`, and mig-parted never ran with a hooks file (or its hooks).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cliserver

from mignurse.cluster.client import DEPLOYMENTS, NAMESPACES, NODES, ClusterClient
from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner.audit import read_audit
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.schema import default_folder, load_runbook
from mignurse.runner.state import RunState
from mignurse.runner.steps.kube import CORDONED_BY
from mignurse.runner.steps.mig.nodecmd import HOOKS_FILE
from mignurse.sim import SimCluster, load_scenario

from .faultcases import first_in, ready_mig

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
DEPLOY = "nvidia.com/gpu.deploy."
MIG_LABELS = ("nvidia.com/mig.config", LABEL_MIG_CONFIG_STATE)
# A node command that restarts or stops kubelet or containerd, or reloads systemd.
RESTART_OR_RELOAD = re.compile(
    r"daemon-reload"
    r"|systemctl'?\s+(?:'[^']*'\s+)*'?(?:restart|stop|kill|try-restart|reload-or-restart)\b"
    r"[^\n]*(?:kubelet|containerd)"
    r"|(?:kubelet|containerd)'?\s+'?(?:restart|stop)\b"
)
STOPS = {"SIGINT": 130, "SIGTERM": 130, "SIGHUP": 130, "SIGINT×2": 130}


# -- which runbook, on which node, how it ends well ------------------------------------------


@dataclass(frozen=True)
class Case:
    """How to run one shipped runbook in a trial."""

    scenario: str
    speed: float  # a running clock where steps wait on controllers
    node: Callable[[SimCluster], str]
    params: dict[str, str] = field(default_factory=dict)
    first: str = ""  # run to completion before (resume needs a pause to resume)
    cluster: bool = False  # the lock is on the kube-system Namespace
    barriers: tuple[str, ...] = ()  # steps past which undo may refuse (the node stays cordoned)


CASES: dict[str, Case] = {
    "cordon": Case("healthy", 0, first_in("gpu-train")),
    "uncordon": Case("healthy", 0, first_in("gpu-train"), first="cordon"),
    "cordon-and-collect": Case("healthy", 0, first_in("gpu-train"), {"since": "1h"}),
    "pause-node-repair": Case("dcgm-repair-loop", 30, first_in("gpu-inference"), cluster=True),
    "resume-node-repair": Case(
        "dcgm-repair-loop",
        30,
        first_in("gpu-inference"),
        first="pause-node-repair",
        cluster=True,
    ),
    "reapply-mig-no-hooks": Case(
        "mig-1g24gb", 40, ready_mig, {"config": "all-1g.24gb"}, barriers=("apply-layout",)
    ),
    "replace-instance": Case(
        "healthy",
        30,
        first_in("gpu-train"),
        {"wait": "5m", "drain_timeout": "2m"},
        barriers=("delete-nodeclaim", "terminate"),
    ),
}


def step_ids(book: str) -> list[str]:
    return [s.id for s in load_runbook(default_folder() / f"{book}.yaml").steps]


# -- one trial ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a trial saw, for the assertions and their messages."""

    book: str
    step: str
    signal: str
    then: str
    log: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.log.append(line)

    def __str__(self) -> str:
        return f"{self.book} at {self.step} ({self.signal}, then {self.then}):\n" + "\n".join(
            self.log[-60:]
        )


class Trial:
    def __init__(self, book: str, step: str, sig: str, then: str, tmp: Path) -> None:
        self.book, self.step, self.sig, self.then = book, step, sig, then
        self.case = CASES[book]
        self.tmp = tmp
        self.state = tmp / "state"
        self.sandboxes = tmp / "sandboxes"
        self.out = Outcome(book, step, sig, then)
        self.sim = SimCluster(
            load_scenario(self.case.scenario), speed=self.case.speed, start=START
        ).start()
        self.kubeconfig = self.sim.write_kubeconfig(tmp / "kubeconfig")
        self.client = ClusterClient.connect(str(self.kubeconfig))
        self.node = self.case.node(self.sim)

    def close(self) -> None:
        self.client.close()
        self.sim.stop()

    # -- processes

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
        }
        env["XDG_STATE_HOME"] = str(self.state)
        env["HOME"] = str(self.state)  # no ~/.aws: no identity lookup
        return env

    def argv(self, *args: str) -> list[str]:
        """What follows `python -m mignurse`."""
        return [
            "--kubeconfig", str(self.kubeconfig), "run",
            *args, "--yes", "--sandboxes", str(self.sandboxes),
        ]  # fmt: skip

    def mignurse(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = cliserver.run(self.argv(*args), env=self.env(), cwd=str(self.tmp), timeout=240)
        self.out.say(f"$ mignurse run {' '.join(args)} → {done.returncode}")
        self.out.log += (done.stdout + done.stderr).splitlines()
        return done

    def start_params(self) -> list[str]:
        params = dict(self.case.params)
        if self.book == "cordon-and-collect":
            params["out"] = str(self.tmp / "bundle.tar.gz")
        return [a for k, v in params.items() for a in ("--param", f"{k}={v}")]

    def interrupted_run(self) -> tuple[int, str]:
        """Run the runbook and send the signal as the step starts; (exit code, stdout)."""
        proc = cliserver.Child(
            self.argv(self.book, "--node", self.node, *self.start_params()),
            env=self.env(),
            cwd=str(self.tmp),  # a bundle without `out` lands here
        )
        fired = threading.Event()

        def watch() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.out.say(line.rstrip("\n"))
                if not fired.is_set() and line.startswith(f"> {self.step}: "):
                    fired.set()
                    self.send(proc.pid)

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.wait(timeout=240)
        reader.join(timeout=10)
        self.out.say(f"interrupted run → {proc.returncode}: {stdout.strip()}")
        assert fired.is_set(), f"step {self.step} never started\n{self.out}"
        return proc.returncode, stdout

    def send(self, pid: int) -> None:
        send_signal(pid, self.sig)

    # -- reading the target

    def lock(self) -> dict[str, Any] | None:
        if self.case.cluster:
            raw = self.client.get(NAMESPACES, "kube-system")
        else:
            try:
                raw = self.client.get(NODES, self.node)
            except Exception:  # noqa: BLE001 - a replaced node holds no lock
                return None
        value = (raw["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
        return json.loads(value) if value else None

    def view(self) -> dict[str, Any]:
        """What the runbooks change: the node's cordon, annotations and GPU operator labels,
        and Karpenter's feature gates and pause record."""
        found: dict[str, Any] = {}
        node = next(
            (n for n in self.sim.objects("nodes") if n["metadata"]["name"] == self.node), None
        )
        if node is not None:
            labels = node["metadata"].get("labels") or {}
            annotations = dict(node["metadata"].get("annotations") or {})
            annotations.pop(LOCK_ANNOTATION, None)
            found["node"] = {
                "unschedulable": bool(node["spec"].get("unschedulable")),
                "annotations": annotations,
                "labels": {
                    k: v for k, v in labels.items() if k.startswith(DEPLOY) or k in MIG_LABELS
                },
            }
        if self.case.cluster:
            deploy = self.client.get(DEPLOYMENTS, "karpenter", "kube-system")
            (ctr,) = [
                c
                for c in deploy["spec"]["template"]["spec"]["containers"]
                if c["name"] == "controller"
            ]
            found["karpenter"] = {
                "env": [e for e in ctr.get("env") or [] if e["name"] == "FEATURE_GATES"],
                "args": list(ctr.get("args") or []),
                "paused": (deploy["metadata"].get("annotations") or {}).get(
                    "mignurse.io/node-repair-paused"
                ),
            }
        return found

    def runs(self) -> set[str]:
        return {p.stem for p in (self.state / "mignurse" / "runs").glob("*.json")}

    def run_state(self, known: set[str]) -> RunState:
        """The state of the one run started since `known` were listed."""
        (run_id,) = self.runs() - known
        os.environ["XDG_STATE_HOME"] = str(self.state)
        try:
            return RunState.load(run_id)
        finally:
            os.environ.pop("XDG_STATE_HOME", None)

    def audit(self) -> list[dict[str, Any]]:
        return read_audit(self.state / "mignurse" / "audit.jsonl")

    def node_calls(self) -> list[str]:
        return [
            line
            for log in sorted(self.sandboxes.glob("*/calls.log"))
            for line in log.read_text().splitlines()
        ]

    def mig_parted_runs(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for log in sorted(self.sandboxes.glob("*/state/mig-parted.jsonl"))
            for line in log.read_text().splitlines()
            if line.strip()
        ]


def run_trial(book: str, step: str, sig: str, then: str, tmp: Path) -> Outcome:
    """Interrupt `book` at `step` with `sig`, then `--resume` or `--undo` it; every check of
    the module docstring is asserted here."""
    trial = Trial(book, step, sig, then, tmp)
    try:
        _trial(trial)
    finally:
        trial.close()
    return trial.out


def _trial(t: Trial) -> None:
    case, out = t.case, t.out
    origin = t.view()
    if case.first:
        first = t.mignurse(case.first, "--node", t.node)
        assert first.returncode == 0, out
    before = t.view()
    known = t.runs()
    rc, stdout = t.interrupted_run()
    saved = t.run_state(known)
    finished = rc == 0
    if rc < 0 and t.sig != "SIGKILL":
        assert t.sig == "SIGINT×2", out  # one signal is always handled
    if t.sig == "SIGKILL":
        assert rc == -signal.SIGKILL, out
        assert saved.status == "running" and saved.shown_status() == "killed", out
        assert t.lock() is None or t.lock()["run"] == saved.run_id, out  # type: ignore[index]
    else:
        # Only a run already in its last step may finish: the stop lands before the next one.
        # A second signal that comes after the run recorded its end may end the exiting
        # process instead (the shell shows 128+N, the same 130 for SIGINT).
        late = -getattr(signal, t.sig.rstrip("×2"))
        assert rc in (STOPS[t.sig], late) or (rc == 0 and t.step == step_ids(t.book)[-1]), out
        want = "succeeded" if finished else "interrupted"
        assert stdout.startswith(f"run {saved.run_id}: {want}"), out
        assert saved.status == want, out
        assert t.lock() is None, out
    if finished:  # the signal came after the last change: nothing to resume or undo
        again = t.mignurse(f"--{t.then}", saved.run_id)
        assert again.returncode == 2 and "succeeded" in again.stderr, out
    elif t.then == "resume":
        _resumed(t, saved.run_id, origin, before)
    else:
        _undone(t, saved.run_id, origin, before)
    assert t.lock() is None, out
    _no_restart_and_no_hooks(t)
    events = [e for e in t.audit() if e.get("run") == saved.run_id]
    assert events[-1]["event"] in ("finished", "refused"), out


def _resumed(t: Trial, run_id: str, origin: dict[str, Any], before: dict[str, Any]) -> None:
    done = t.mignurse("--resume", run_id)
    assert done.returncode == 0, t.out
    assert done.stdout.startswith(f"run {run_id}: succeeded"), t.out
    _done_well(t, origin, before, done.stdout)


def _undone(t: Trial, run_id: str, origin: dict[str, Any], before: dict[str, Any]) -> None:
    undo = t.mignurse("--undo", run_id)
    if undo.returncode == 1 and "cannot be undone past step" in undo.stdout:
        past = undo.stdout.split("cannot be undone past step ", 1)[1].split(":", 1)[0]
        assert past in t.case.barriers, t.out
        node = t.view().get("node")
        assert node is None or node["unschedulable"], t.out  # the safe state: cordoned
        _resumed(t, run_id, origin, before)  # and the way forward works
        return
    if undo.returncode == 1 and "nothing on it to put back" in undo.stdout:
        # The drained node went before the undo (Karpenter consolidates an empty node, or the
        # deletion landed as the signal came): nothing to restore, and the engine says so.
        assert t.book == "replace-instance", t.out
        node = next((n for n in t.sim.objects("nodes") if n["metadata"]["name"] == t.node), None)
        assert node is None or node["metadata"].get("deletionTimestamp"), t.out
        return
    assert undo.returncode == 0, t.out
    assert undo.stdout.startswith(f"run {run_id}: undone"), t.out
    assert t.view() == before, t.out


def _done_well(t: Trial, origin: dict[str, Any], before: dict[str, Any], report: str) -> None:
    """The target as a clean run of the runbook leaves it."""
    out, view = t.out, t.view()
    node = view.get("node")
    if t.book in ("cordon", "cordon-and-collect"):
        assert node and node["unschedulable"] and CORDONED_BY in node["annotations"], out
    if t.book == "cordon-and-collect":
        assert (t.tmp / "bundle.tar.gz").is_file(), out
    if t.book == "uncordon":
        assert node and not node["unschedulable"], out
        assert CORDONED_BY not in node["annotations"], out
    if t.book == "pause-node-repair":
        assert "NodeRepair=false" in view["karpenter"]["env"][0]["value"], out
        assert view["karpenter"]["paused"], out
    if t.book == "resume-node-repair":
        assert view["karpenter"] == origin["karpenter"], out
    if t.book == "reapply-mig-no-hooks":
        assert node, out
        labels = node["labels"]
        assert labels[LABEL_MIG_CONFIG_STATE] == "success", out
        assert labels[DEPLOY + "mig-manager"] == "false", out
        assert labels[DEPLOY + "device-plugin"] == "true", out
        assert node["unschedulable"] == before["node"]["unschedulable"], out
        gpus = json.loads((t.sandboxes / t.node / "state" / "mig.json").read_text())["gpus"]
        assert all(len(g["instances"]) == 4 for g in gpus), out
    if t.book == "replace-instance":
        assert "  wait-replacement: verified" in report, out
        gone = next((n for n in t.sim.objects("nodes") if n["metadata"]["name"] == t.node), None)
        assert gone is None or gone["metadata"].get("deletionTimestamp"), out


def _no_restart_and_no_hooks(t: Trial) -> None:
    calls = t.node_calls()
    assert not [line for line in calls if RESTART_OR_RELOAD.search(line)], t.out
    for run in t.mig_parted_runs():
        assert not run["hooksRun"], (run, str(t.out))
        if "apply" not in run["argv"]:
            continue  # the collector's read-only `export` runs in the node's login environment
        assert run["hooksFileEnv"] is None, (run, str(t.out))
        argv = run["argv"]
        if "-k" in argv:
            hooks = Path(argv[argv.index("-k") + 1])
            assert str(hooks).endswith(HOOKS_FILE), (run, str(t.out))
            assert hooks.read_text() == "version: v1\nhooks: {}\n", t.out


def send_signal(pid: int, name: str) -> None:
    """The signal (SIGINT×2: two SIGINTs 0.2 s apart); a process that ended meanwhile, after
    its last line, gets none."""
    try:
        if name == "SIGINT×2":
            os.kill(pid, signal.SIGINT)
            time.sleep(0.2)
            os.kill(pid, signal.SIGINT)
            return
        os.kill(pid, getattr(signal, name))
    except ProcessLookupError:
        pass
