"""reapply-mig-no-hooks, step by step, against the simulator and a MIG-stateful node sandbox.

The steps run as the engine runs them (check, plan, apply, verify; undo newest first), each
with a fresh StepContext; the node's sandbox is rebuilt for every command, as the transports
build it, so MIG state that survives is state the sandbox really keeps. The sandbox's call log
and mig-parted's own run log prove what ran on the node.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunEvent
from mignurse.runner.step import ACTIONS, Action, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.mig.nodecmd import HOOKS_FILE
from mignurse.sim.nodes import NodeSandbox, SandboxShell, story_for

from .enginehelpers import Cluster
from .interrupthelpers import book, resumed, shells, writes_to
from .mighelpers import (
    incident_node,
    no_hooks_sequence,
    ready_mig_node,
    set_not_ready,
    stuck_mig_node,
)

# Anything that would restart kubelet/containerd, reload systemd or change a unit.
FORBIDDEN = re.compile(
    r"systemctl'?\s+'?(restart|stop|start|reload|daemon-reload|enable|disable|kill|mask)\b"
    r"|kubelet'?\s+'?restart|containerd'?\s+'?restart"
)
DEPLOY = "nvidia.com/gpu.deploy."
REAPPLY = [
    ("preflight", "mig-preflight", {}),
    ("mig-manager-off", "mig-manager-off", {}),
    ("cordon", "cordon", {"reason": "mignurse reapply-mig-no-hooks"}),
    ("pause-operands", "pause-gpu-operands", {}),
    ("drain-gpu-pods", "drain", {"gpu_only": True}),
    ("no-gpu-processes", "confirm-no-gpu-processes", {}),
    ("apply-layout", "apply-mig-layout", {}),
    ("verify-layout", "verify-mig-layout", {}),
    ("resume-operands", "resume-gpu-operands", {}),
    ("uncordon", "uncordon", {}),
]


class Run:
    """The engine's order of calls, with undo of completed mutating steps on failure."""

    def __init__(self, cluster: Cluster, node: str, sandboxes: Path, **params: Any) -> None:
        self.cluster = cluster
        self.node = node
        self.sandboxes = sandboxes
        self.params = params
        self.outputs: dict[str, dict[str, Any]] = {}
        self.done: list[tuple[Action, StepContext, StepPlan, dict[str, Any]]] = []
        self.plans: dict[str, StepPlan] = {}
        self.log: list[str] = []

    def sandbox(self) -> NodeSandbox:
        raw = self.cluster.node(self.node)
        return NodeSandbox.for_node(self.sandboxes / self.node, raw, story=story_for(raw))

    def shell_for(self, name: str) -> SandboxShell:
        assert name == self.node
        return SandboxShell(self.sandbox())  # rebuilt per command, as the transports do

    def ctx(self, with_args: dict[str, Any], timeout: float = 60.0) -> StepContext:
        return self.cluster.ctx(
            self.node,
            params=dict(self.params),
            with_args=with_args,
            shell_for=self.shell_for,
            outputs=self.outputs,
            log=self.log.append,
            timeout=timeout,
        )

    def step(self, step_id: str, name: str, with_args: dict[str, Any], timeout: float = 60) -> None:
        action = ACTIONS[name]()
        ctx = self.ctx(with_args, timeout)
        reason = action.check(ctx)
        if reason:
            raise StepFailed(f"precondition: {reason}")
        plan = action.plan(ctx)
        self.plans[step_id] = plan
        if plan.nothing_to_do:
            self.outputs[step_id] = dict(plan.data)
            return
        applied = action.apply(ctx, plan)
        self.outputs[step_id] = applied
        if action.mutates:
            self.done.append((action, ctx, plan, applied))
        problem = action.verify(self.ctx(with_args, timeout), plan, applied)
        if problem:
            raise StepFailed(f"verify: {problem}")

    def all(self, steps: list[tuple[str, str, dict[str, Any]]], timeout: float = 60) -> None:
        for step_id, name, with_args in steps:
            self.step(step_id, name, with_args, timeout)

    def undo(self) -> None:
        for action, _ctx, plan, applied in reversed(self.done):
            if action.can_undo:
                action.undo(self.ctx({}), plan, applied)


@pytest.fixture
def mig_cluster(cluster_for: Callable[..., Cluster]) -> Cluster:
    # A running clock: operand pods go and come back, the device plugin advertises.
    return cluster_for("mig-hook-notready", speed=40)


def _failed_mig_node(cluster: Cluster) -> str:
    return incident_node(cluster)


def _labels(cluster: Cluster, node: str) -> dict[str, str]:
    labels: dict[str, str] = cluster.node(node)["metadata"]["labels"]
    return labels


def _app_pods(cluster: Cluster, node: str, *apps: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in cluster.pods_on(node)
        if p["metadata"].get("labels", {}).get("app") in apps
    ]


def _forbidden_calls(sandbox: NodeSandbox) -> list[str]:
    return [line for line in sandbox.calls_log.read_text().splitlines() if FORBIDDEN.search(line)]


def test_reapply_applies_the_layout_with_no_hook_and_no_restart(
    mig_cluster: Cluster, tmp_path: Path
) -> None:
    """A Ready p5 node (8 H100, MIG off) whose mig-manager failed: state `failed`, operands
    left paused. The runbook's steps bring it to 8 × 7 × 1g.10gb, advertised."""
    node = stuck_mig_node(mig_cluster)
    run = Run(mig_cluster, node, tmp_path / "nodes")
    run.sandbox().set_mig_knobs(mignurse_probe=True)
    assert _app_pods(mig_cluster, node, "nvidia-mig-manager")

    run.all(REAPPLY)

    sandbox = run.sandbox()
    state = sandbox.mig_state()
    assert [len(g["instances"]) for g in state["gpus"]] == [7] * 8
    assert {i["profile"] for g in state["gpus"] for i in g["instances"]} == {"1g.10gb"}
    # The exact mig-parted sequence (docs/mig.md), then verify's assert; never a hooks file.
    root = str(sandbox.fs)
    runs = sandbox.mig_parted_runs()
    assert [r["argv"] for r in runs] == no_hooks_sequence(root, "all-1g.10gb")
    assert [r["rc"] for r in runs] == [1, 0, 0, 0, 0, 0]
    assert all(r["hooksFileEnv"] is None and not r["hooksRun"] for r in runs)
    assert (sandbox.fs / HOOKS_FILE.lstrip("/")).read_text() == "version: v1\nhooks: {}\n"
    # Every command on the node: no restart, no daemon-reload, no unit change.
    calls = sandbox.calls()
    assert calls and not _forbidden_calls(sandbox)
    assert {c.command for c in calls} <= {"systemctl", "nvidia-mig-parted", "nvidia-smi",
                                          "lsof", "mignurse"}  # fmt: skip
    assert [c.args[0] for c in calls if c.command == "systemctl"] == ["is-active", "is-enabled"] * 2
    assert ("-L",) in [c.args for c in calls]  # the capability device nodes
    assert (sandbox.fs / "dev/nvidia-caps/nvidia-cap1").exists()
    # Every mig-parted call that ran is in the apply step's plan.
    planned = [c.argv for c in run.plans["apply-layout"].commands]
    assert all(p[:4] == ("env", "-u", "MIG_PARTED_HOOKS_FILE", "nvidia-mig-parted")
               for p in planned if "nvidia-mig-parted" in p)  # fmt: skip
    shown = [[a.replace(root, "") for a in r["argv"]] for r in runs[:5]]
    assert shown == [list(p[4:]) for p in planned if "nvidia-mig-parted" in p]
    # The cluster side: mignurse is the only writer, operands back, layout advertised.
    labels = _labels(mig_cluster, node)
    assert labels[DEPLOY + "mig-manager"] == "false"
    assert not _app_pods(mig_cluster, node, "nvidia-mig-manager")
    assert labels[LABEL_MIG_CONFIG_STATE] == "success"
    for key in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm"):
        assert labels[DEPLOY + key] == "true"  # were paused-for-mig-change by the stuck run
    assert _app_pods(mig_cluster, node, "nvidia-device-plugin-daemonset")
    raw = mig_cluster.node(node)
    assert raw["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    assert not raw["spec"].get("unschedulable")
    assert run.outputs["verify-layout"]["source"] == "nvml"


def test_mig_parted_failing_mid_way_fails_the_step_and_undo_restores_the_labels(
    mig_cluster: Cluster, tmp_path: Path
) -> None:
    node = next(n for n in mig_cluster.nodes("gpu-mig") if n != _failed_mig_node(mig_cluster))
    before = _labels(mig_cluster, node)
    run = Run(mig_cluster, node, tmp_path / "nodes", config="all-balanced")
    run.sandbox().set_mig_knobs(mig_apply_fails="config")

    with pytest.raises(StepFailed) as failed:
        run.all(REAPPLY)
    assert "nvidia-mig-parted apply failed" in str(failed.value)
    assert "all orderings failed" in str(failed.value) and "\n" not in str(failed.value)
    assert [r["rc"] for r in run.sandbox().mig_parted_runs()] == [1, 0, 0, 1]
    paused = _labels(mig_cluster, node)
    assert paused[DEPLOY + "device-plugin"] == "paused-for-mig-change"
    assert paused[LABEL_MIG_CONFIG_STATE] == "pending"

    run.undo()

    after = _labels(mig_cluster, node)
    keys = [k for k in {*before, *after} if k.startswith((DEPLOY, "nvidia.com/mig.config"))]
    assert {k: after.get(k) for k in keys} == {k: before.get(k) for k in keys}
    assert not mig_cluster.node(node)["spec"].get("unschedulable")
    assert not _forbidden_calls(run.sandbox())


def test_ampere_mode_change_that_needs_a_reboot_stops_with_that_reason(
    cluster_for: Callable[..., Cluster], tmp_path: Path
) -> None:
    """p4d (A100 passed through to the VM): enabling MIG leaves the change pending."""
    cluster = cluster_for("healthy")
    node = cluster.nodes("gpu-mig")[0]
    run = Run(cluster, node, tmp_path / "nodes")
    assert run.sandbox().mig_state()["gpus"][0]["current"] == "Disabled"

    run.step("preflight", "mig-preflight", {})
    with pytest.raises(StepFailed) as failed:
        run.step("apply-layout", "apply-mig-layout", {})

    message = str(failed.value)
    assert "GPU 0 (Disabled → Enabled)" in message and "reboot the node" in message
    runs = run.sandbox().mig_parted_runs()
    assert [(r["argv"][:3], r["rc"]) for r in runs] == [
        (["assert", "-f", runs[0]["argv"][2]], 1),
        (["-d", "apply", "--mode-only"], 1),
        (["-d", "assert", "--mode-only"], 1),
    ]
    assert ("-r",) in [c.args for c in run.sandbox().calls() if c.command == "nvidia-smi"]
    assert not _forbidden_calls(run.sandbox())


def test_gpu_processes_left_on_the_node_refuse_the_apply(
    mig_cluster: Cluster, tmp_path: Path
) -> None:
    node = _failed_mig_node(mig_cluster)
    run = Run(mig_cluster, node, tmp_path / "nodes")
    run.sandbox().set_mig_knobs(gpu_processes=[{"pid": 4242, "name": "python3", "gpu": 3}])

    with pytest.raises(StepFailed) as failed:
        run.step("no-gpu-processes", "confirm-no-gpu-processes", {}, timeout=3)

    assert "pid 4242 (python3)" in str(failed.value)
    assert not run.sandbox().mig_parted_runs()


def test_an_unknown_config_is_refused_in_one_line_naming_the_valid_ones(
    mig_cluster: Cluster, tmp_path: Path
) -> None:
    node = _failed_mig_node(mig_cluster)
    run = Run(mig_cluster, node, tmp_path / "nodes", config="all-1g.24gb")

    reason = ACTIONS["mig-preflight"]().check(run.ctx({}))

    assert reason is not None and "\n" not in reason
    assert reason.startswith("unknown MIG config 'all-1g.24gb' for H100-80GB")
    assert "all-1g.10gb" in reason and "all-balanced" in reason and "all-disabled" in reason


def test_an_active_host_mig_manager_service_refuses_with_the_command_to_disable_it(
    mig_cluster: Cluster, tmp_path: Path
) -> None:
    node = ready_mig_node(mig_cluster)
    run = Run(mig_cluster, node, tmp_path / "nodes")
    run.sandbox().set_mig_knobs(host_mig_manager="active")

    reason = ACTIONS["mig-preflight"]().check(run.ctx({}))

    assert reason is not None
    assert "sudo systemctl disable --now nvidia-mig-manager.service" in reason
    assert [c.args[0] for c in run.sandbox().calls()] == ["is-active", "is-enabled"]


def test_a_forgotten_env_u_shows_in_the_call_log(tmp_path: Path) -> None:
    """The guard can fail: a bare apply in the node's (profile.d) environment runs the
    shipped hooks, and the call log records their systemctl daemon-reload."""
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "mig-hook"})
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: false\n")
    SandboxShell(sandbox).run(
        f"nvidia-mig-parted apply -f {cfg}\n", timeout=20, stdout=io.BytesIO()
    )

    assert any("daemon-reload" in line for line in _forbidden_calls(sandbox))
    assert sandbox.mig_parted_runs()[0]["hooksRun"] == ["apply-start"]


# -- a node whose kubelet or container runtime is broken ------------------------------------------


def test_reapply_on_a_notready_node_is_refused_in_the_plan_naming_replace_instance(
    mig_cluster: Cluster, state_home: Path, tmp_path: Path
) -> None:
    """The mig-hook incident node: kubelet was restarted mid-bootstrap and containerd lost its
    cgroups. Re-partitioning restarts neither, so the run must not start, let alone report
    success and uncordon it."""
    node = incident_node(mig_cluster)
    seen = len(mig_cluster.sim.requests)
    reapply = book("reapply-mig-no-hooks", tmp_path)
    runner = Runner(reapply, {"node": node}, client=mig_cluster.client,
                    shell_for=shells(mig_cluster, tmp_path / "nodes"), yes=True)  # fmt: skip

    result = runner.run()

    assert result.status == "blocked" and result.exit_code == 1
    assert result.error.startswith(f"step preflight cannot run: node {node} is NotReady since ")
    assert "(KubeletNotReady: container runtime is down)" in result.error
    assert f"mignurse run replace-instance --node {node}" in result.error
    assert not writes_to(mig_cluster, "/", seen)
    assert not (tmp_path / "nodes" / node / "state" / "mig-parted.jsonl").exists()


def test_a_node_that_goes_notready_before_the_end_fails_the_run_and_stays_cordoned(
    mig_cluster: Cluster, state_home: Path, tmp_path: Path
) -> None:
    """Verification requires what the runbook promises: the node Ready, not only the labels."""
    node = stuck_mig_node(mig_cluster)
    reapply = book("reapply-mig-no-hooks", tmp_path)

    def listen(event: RunEvent) -> None:
        if event.kind == "step-started" and event.step == "resume-operands":
            set_not_ready(mig_cluster, node)

    runner = Runner(reapply, {"node": node, "allocatable_timeout": "6s"}, client=mig_cluster.client,
                    shell_for=shells(mig_cluster, tmp_path / "nodes"), yes=True,
                    listener=listen)  # fmt: skip

    result = runner.run()

    assert result.status == "failed", (result.error, result.report_lines())
    resumed_step = next(s for s in result.steps if s.id == "resume-operands")
    assert resumed_step.status != "verified"
    assert f"node {node} is NotReady since" in resumed_step.error
    assert f"it stays cordoned: replace it: mignurse run replace-instance --node {node}" in (
        resumed_step.error
    )
    assert next(s for s in result.steps if s.id == "uncordon").status == "pending"
    raw = mig_cluster.node(node)
    assert raw["spec"].get("unschedulable")  # the GPUs changed: undo stops before the cordon
    assert "cannot be undone past step apply-layout" in result.error


def test_undo_never_uncordons_a_node_that_is_not_ready(
    mig_cluster: Cluster, state_home: Path, tmp_path: Path
) -> None:
    node = ready_mig_node(mig_cluster)
    cordon = book("cordon", tmp_path)
    first = Runner(cordon, {"node": node}, client=mig_cluster.client, yes=True).run()
    assert first.status == "succeeded"
    saved = st.RunState.load(first.run_id)
    saved.status = st.INTERRUPTED  # as if stopped after its cordon
    saved.save()
    set_not_ready(mig_cluster, node)

    undone = resumed(first.run_id, mig_cluster, [cordon], tmp_path).undo()

    assert undone.status == "failed"
    assert mig_cluster.node(node)["spec"].get("unschedulable")
    assert f"cordon: node {node} is NotReady since" in undone.error
    assert "so it stays cordoned rather than get pods back" in undone.error
