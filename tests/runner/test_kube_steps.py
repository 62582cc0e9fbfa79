"""cordon, uncordon and drain against the simulator, phase by phase as the engine calls them."""

from __future__ import annotations

import re
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.model import Node
from mignurse.runner.step import ACTIONS, Action, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.kube import CORDONED_BY
from mignurse.sim.nodes import sandbox_shells

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


def run_step(name: str, ctx: StepContext) -> tuple[Action, StepPlan, dict[str, Any]]:
    step = ACTIONS[name]()
    assert step.check(ctx) is None
    plan = step.plan(ctx)
    applied = {} if plan.nothing_to_do else step.apply(ctx, plan)
    if not plan.nothing_to_do:
        assert step.verify(ctx, plan, applied) is None
    return step, plan, applied


def test_cordon_plans_applies_verifies_and_undoes(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = c.ctx(node, with_args={"reason": "testing"})
    step, plan, applied = run_step("cordon", ctx)
    assert (plan.changes[0].field, plan.changes[0].old, plan.changes[0].new) == (
        "spec.unschedulable",
        False,
        True,
    )
    after = c.node(node)
    assert after["spec"]["unschedulable"] is True
    assert '"holder":"tester@box"' in after["metadata"]["annotations"][CORDONED_BY]
    step.undo(ctx, plan, applied)
    step.undo(ctx, plan, applied)  # safe twice
    restored = c.node(node)
    assert not restored["spec"].get("unschedulable")
    assert CORDONED_BY not in (restored["metadata"].get("annotations") or {})


def test_cordon_of_a_cordoned_node_plans_nothing_and_its_undo_keeps_it_cordoned(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    c.client.patch(
        NODES,
        node,
        {"spec": {"unschedulable": True}},
    )
    ctx = c.ctx(node)
    step = ACTIONS["cordon"]()
    plan = step.plan(ctx)
    assert plan.nothing_to_do and "already cordoned" in plan.notes[0]
    step.undo(ctx, plan, {"wasUnschedulable": True})
    assert c.node(node)["spec"]["unschedulable"] is True


def test_uncordon_and_its_undo(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    run_step("cordon", c.ctx(node))
    ctx = c.ctx(node)
    step, plan, applied = run_step("uncordon", ctx)
    assert applied["wasUnschedulable"] is True
    assert not c.node(node)["spec"].get("unschedulable")
    step.undo(ctx, plan, applied)
    assert c.node(node)["spec"]["unschedulable"] is True


def test_drain_evicts_through_the_eviction_api_and_leaves_daemonset_pods(
    cluster_for: Make,
) -> None:
    c = cluster_for(speed=30)  # the drain waits for the kubelet to confirm the pod is gone
    node = c.nodes("gpu-train")[0]
    before = c.pods_on(node)
    workload = [p["metadata"]["name"] for p in before if p["metadata"]["namespace"] == "training"]
    daemons = sorted(
        p["metadata"]["name"] for p in before if p["metadata"]["namespace"] != "training"
    )
    assert workload and daemons
    run_step("cordon", c.ctx(node))
    ctx = c.ctx(node)
    _step, plan, applied = run_step("drain", ctx)
    assert [ch.target for ch in plan.changes] == [f"pod/training/{workload[0]}"]
    assert any("DaemonSet pod" in note for note in plan.notes)
    assert applied["evicted"] == [f"training/{workload[0]}"]
    left = sorted(p["metadata"]["name"] for p in c.pods_on(node))
    assert left == daemons
    posts = [r for r in c.sim.requests if r["method"] == "POST"]
    assert [r["path"] for r in posts] == [
        f"/api/v1/namespaces/training/pods/{workload[0]}/eviction"
    ]
    assert not [r for r in c.sim.requests if r["method"] == "DELETE"]


def test_drain_gpu_only_leaves_pods_without_gpu_requests(cluster_for: Make) -> None:
    c = cluster_for()
    node = next(
        n
        for n in c.nodes("general")
        if any("karpenter" in p["metadata"]["name"] for p in c.pods_on(n))
    )
    run_step("cordon", c.ctx(node))
    step = ACTIONS["drain"]()
    plan = step.plan(c.ctx(node, with_args={"gpu_only": True}))
    assert plan.changes == []
    assert "no GPU request" in " ".join(plan.notes)
    plan_all = step.plan(c.ctx(node))
    assert [ch.target.split("/")[1] for ch in plan_all.changes] == ["kube-system"]


def test_drain_refuses_a_schedulable_node(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    step = ACTIONS["drain"]()
    ctx = c.ctx(node)
    with pytest.raises(StepFailed, match="schedulable: cordon it first"):
        step.apply(ctx, step.plan(ctx))
    assert len(c.pods_on(node)) == 10


def test_drain_blocked_by_a_pdb_names_the_pod_and_its_budget(cluster_for: Make) -> None:
    c = cluster_for(speed=60)  # the evicted pod terminates; its replacement's node is minutes off
    node = c.nodes("gpu-infer")[0]
    run_step("cordon", c.ctx(node))
    ctx = c.ctx(node, timeout=0.5)
    step = ACTIONS["drain"]()
    plan = step.plan(ctx)
    assert len(plan.changes) == 2
    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)
    message = str(failed.value)
    # 1 left; 2 where the evicted pod was still terminating at the deadline (a busy machine)
    assert re.match(
        rf"drain of {re.escape(node)} timed out after 0 s: [12] pod\(s\) left: inference/", message
    )
    assert "PDB inference/llm-inference (allows 0 disruption(s) now)" in message
    assert "\n" not in message
    assert step.verify(ctx, plan, {}) is not None
    # the first pod goes (the budget allowed one), the second stays: nothing evicts it now
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and inference_pods(c, node) != 1:
        time.sleep(0.1)
    assert inference_pods(c, node) == 1


def inference_pods(c: Cluster, node: str) -> int:
    return sum(p["metadata"]["namespace"] == "inference" for p in c.pods_on(node))


def test_collect_bundle_writes_the_nodes_bundle_over_the_sandbox(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    shells = sandbox_shells(c.client, tmp_path / "sandboxes")
    out = tmp_path / "bundle.tar.gz"
    ctx = c.ctx(
        node,
        params={"out": str(out), "since": "2h"},
        shell_for=lambda name: shells(Node.from_api(c.node(name))),
    )
    step, plan, applied = run_step("collect-bundle", ctx)
    assert not step.mutates and plan.commands[0].node == node
    assert applied == {"bundle": str(out), "ok": True, "files": applied["files"]}
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any(f"/nodes/{node}/" in name for name in names)
    assert any(n.endswith("cluster/nodes.json") for n in names)
