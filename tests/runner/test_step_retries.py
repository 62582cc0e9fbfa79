"""How often the engine runs a step's apply again after a failure that may pass on its own
(mignurse/runner/engine.py: `Action.retries`, only where the step is safe to run twice): a
cordon three times, a pause of Karpenter's repair twice, a NodeClaim delete twice, and a
failure that will not pass (403) once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mignurse.runner.engine import Runner
from mignurse.runner.outcome import RunEvent
from mignurse.runner.schema import load_runbook
from mignurse.runner.state import RunState

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


def book(tmp_path: Path, name: str, target: str, action: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    params = "params:\n  node: {type: node, required: true}\n" if target == "node" else ""
    path.write_text(
        f"name: {name}\ntitle: {name}\ntarget: {target}\nundo: never\n{params}"
        f"steps:\n  - id: {action}\n    action: {action}\n"
    )
    return path


def sent(c: Cluster, method: str, path: str) -> int:
    return sum(1 for r in c.sim.requests if r["method"] == method and r["path"].endswith(path))


@pytest.mark.parametrize(
    ("code", "said", "tries"), [(503, "answered 503", 3), (403, "RBAC refused", 1)]
)
def test_a_cordon_the_api_server_keeps_refusing_is_tried_as_often_as_it_allows(
    cluster_for: Make, state_home: Path, tmp_path: Path, code: int, said: str, tries: int
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    runbook = load_runbook(book(tmp_path, "just-cordon", "node", "cordon"))

    def refuse_cordons(event: RunEvent) -> None:
        if event.kind == "step-started":
            c.sim.fail("PATCH", f"/nodes/{node}$", code=code, times=None)
        elif event.kind == "step-finished":
            c.sim.clear_faults()  # the lock's release goes through

    result = Runner(
        runbook, {"node": node}, client=c.client, yes=True, listener=refuse_cordons
    ).run()

    assert result.status == "failed"
    assert said in result.error
    assert RunState.load(result.run_id).step("cordon").attempts == tries
    assert not c.node(node)["spec"].get("unschedulable")


def test_a_pause_of_karpenter_repair_is_tried_twice_on_a_5xx(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")
    runbook = load_runbook(book(tmp_path, "just-pause", "cluster", "pause-node-repair"))
    c.sim.fail("PATCH", r"/deployments/karpenter$", code=500, times=None)

    result = Runner(runbook, {}, client=c.client, yes=True).run()

    assert result.status == "failed"
    assert sent(c, "PATCH", "/deployments/karpenter") == 2
    assert RunState.load(result.run_id).step("pause-node-repair").attempts == 2
    assert c.sim.loops.repair_enabled is True


def test_a_resume_whose_rollout_cannot_be_verified_is_undone_to_paused(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    """resume-node-repair is undoable: a failed resume pauses repair again with its record."""
    c = cluster_for("dcgm-repair-loop", speed=5)  # the rollouts need the cluster's clock
    pause = load_runbook(book(tmp_path, "just-pause", "cluster", "pause-node-repair"))
    assert Runner(pause, {}, client=c.client, yes=True).run().status == "succeeded"
    path = book(tmp_path, "just-resume", "cluster", "resume-node-repair")
    path.write_text(path.read_text().replace("undo: never", "undo: on-failure"))
    resume = load_runbook(path)

    def pods_unreadable(event: RunEvent) -> None:
        if event.kind == "output" and "feature gates restored, rolling out" in event.message:
            c.sim.fail("GET", r"/namespaces/kube-system/pods$", code=403, times=None)
        elif event.kind == "undo-started":
            c.sim.clear_faults()

    result = Runner(resume, {}, client=c.client, yes=True, listener=pods_unreadable).run()

    assert result.status == "undone", result.error
    assert [s.status for s in result.steps] == ["undone"]
    c.sim.advance(120)
    assert c.sim.loops.repair_enabled is False
