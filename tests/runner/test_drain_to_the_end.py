"""A drain (mignurse/runner/steps/kube.py) from its plan to its last pod: what the plan
counts and which budgets it names, a node deleted under it, a deadline reached with pods
still there, a lock lost or a Ctrl-C before an eviction, what verify lists, and an API
server that does not answer a read of the node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES, PDBS
from mignurse.runner.engine import Runner
from mignurse.runner.schema import Runbook, load_runbook, reversal_words
from mignurse.runner.state import RunState
from mignurse.runner.step import ACTIONS, Cancelled, LockLost, StepFailed, StepPlan
from mignurse.sim import SimCluster

from .enginehelpers import Cluster
from .repairhelpers import SimContext, sim_ctx

Make = Callable[..., Cluster]


def put_pod(
    sim: SimCluster,
    node: str,
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
) -> str:
    """A pod bound to `node` (the simulator serves no pod create: it goes in its store)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": phase},
    }
    with sim.store.lock:
        sim.store.create("pods", body)
    return f"{namespace}/{name}"


def namespace(c: Cluster, name: str) -> None:
    with c.sim.store.lock:  # the simulator serves no namespace create
        c.sim.store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )


def budget(c: Cluster, namespace: str, name: str, selector: dict[str, Any], most: int) -> None:
    """A PodDisruptionBudget; the simulator's disruption controller fills in its status."""
    c.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector, "maxUnavailable": most},
        },
        namespace=namespace,
    )


def trainer_of(c: Cluster, node: str) -> str:
    (key,) = [
        f"training/{p['metadata']['name']}"
        for p in c.pods_on(node)
        if p["metadata"]["namespace"] == "training"
    ]
    return key


def cordoned_train_node(c: Cluster) -> str:
    node = c.nodes("gpu-train")[0]
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    return node


def evictions(c: Cluster) -> list[str]:
    return [r["path"] for r in c.sim.requests if r["path"].endswith("/eviction")]


# -- the plan ---------------------------------------------------------------------------------


def test_the_plan_counts_what_it_leaves_and_names_only_the_budgets_that_stop_an_eviction(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    trainer = trainer_of(c, node)
    put_pod(c.sim, node, "kube-apiserver-x", "kube-system",
            annotations={"kubernetes.io/config.mirror": "abc"})  # fmt: skip
    put_pod(c.sim, node, "job-done", "training", phase="Succeeded")
    namespace(c, "zoo")
    web = put_pod(c.sim, node, "web-0", "zoo", labels={"app": "web"})
    budget(c, "training", "trainer", {"matchLabels": {"app": "trainer"}}, most=1)  # allows 1
    budget(c, "zoo", "web", {"matchLabels": {"app": "web"}}, most=0)  # allows 0
    # a budget of another namespace whose labels match the trainer does not guard it
    budget(c, "zoo", "zz-lookalike", {"matchLabels": {"app": "trainer"}}, most=0)
    budget(c, "zoo", "zz-by-expression",
           {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, most=0)  # fmt: skip
    c.sim.advance(1)  # the disruption controller counts the healthy pods

    plan = ACTIONS["drain"]().plan(c.ctx(node))

    assert [ch.target for ch in plan.changes] == [f"pod/{trainer}", f"pod/{web}"]
    assert plan.notes == [
        f"2 pods to evict from {node} within 300 s",
        "left alone: 9 DaemonSet pod, 1 finished, 1 mirror pod",
        f"{web} is guarded by PDB zoo/web (allows 0 disruption(s) now): its eviction will wait",
        "the pods are listed again when the step runs (earlier steps may move them)",
    ]


def test_a_gpu_only_drain_evicts_the_pods_holding_the_nodes_gpus_through_dra_claims(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-dra-healthy")
    claimed = sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in c.sim.objects("pods")
        if p["spec"].get("resourceClaims")
    )
    pod = next(p for p in c.sim.objects("pods") if p["spec"].get("resourceClaims"))
    node = pod["spec"]["nodeName"]
    on_node = sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in c.pods_on(node)
        if p["spec"].get("resourceClaims")
    )
    assert on_node and set(on_node) <= set(claimed)

    plan = ACTIONS["drain"]().plan(c.ctx(node, with_args={"gpu_only": True}))

    assert sorted(ch.target.removeprefix("pod/") for ch in plan.changes) == on_node
    assert plan.notes[0] == f"{len(on_node)} GPU pods to evict from {node} within 300 s"
    # a node whose pods use no claim is planned without reading the claims (a blip there
    # is no reason to refuse its drain)
    plain = next(
        n for n in c.nodes() if not any(p["spec"].get("resourceClaims") for p in c.pods_on(n))
    )
    c.sim.fail("GET", "/resourceclaims", code=500, times=None)
    sent = len(c.sim.requests)
    quiet = ACTIONS["drain"]().plan(c.ctx(plain, with_args={"gpu_only": True}))
    assert not [r for r in c.sim.requests[sent:] if "/resourceclaims" in r["path"]]
    assert quiet.notes[0].endswith(f"GPU pods to evict from {plain} within 300 s")


# -- apply and verify -------------------------------------------------------------------------


def test_a_node_deleted_between_plan_and_apply_has_nothing_left_to_evict(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    step = ACTIONS["drain"]()
    ctx = c.ctx(node)
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    with c.sim.store.lock:  # Karpenter took it; its pods are collected later
        c.sim.store.delete("nodes", "", node)

    applied = step.apply(ctx, plan)

    said = f"node {node} is gone (deleted outside this run): its pods went with it"
    assert applied == {"evicted": [], "gone": True, "summary": said}
    assert c.pods_on(node)  # still listed until the pod garbage collector runs
    assert step.verify(ctx, plan, applied) is None
    assert evictions(c) == []


def test_a_drain_past_its_deadline_names_each_pod_it_still_waits_for(cluster_for: Make) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    trainer = trainer_of(c, node)
    web = put_pod(c.sim, node, "web-0", "zoo", labels={"app": "web"})
    c.sim.fail("GET", "/poddisruptionbudgets", code=403, times=None)  # RBAC: budgets unread
    c.sim.fail("POST", "/pods/web-0/eviction$", code=429, times=None)
    journal: list[tuple[str, dict[str, Any]]] = []
    ctx = sim_ctx(c.sim, c.client, node, timeout=5.0,
                  journal=lambda event, fields: journal.append((event, fields)))  # fmt: skip
    step = ACTIONS["drain"]()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)

    message = str(failed.value)
    assert message.startswith(
        f"drain of {node} timed out after 5 s: 2 pod(s) left: {trainer} (still terminating), "
        f"{web} (the API server answered 429"
    )
    assert "\n" not in message
    assert ("evicted", {"pod": trainer}) in journal  # the audit names each eviction
    assert [e for e, _ in journal if e == "evicted"] == ["evicted"]


def test_a_drain_waits_on_the_clusters_clock_until_the_evicted_pod_is_gone(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    trainer = trainer_of(c, node)
    ctx = sim_ctx(c.sim, c.client, node, timeout=120.0)
    step = ACTIONS["drain"]()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    applied = step.apply(ctx, plan)

    assert applied == {"evicted": [trainer]}
    assert step.verify(ctx, plan, applied) is None
    assert len(evictions(c)) == 1


@dataclass
class FinishedInTheLastWait(SimContext):
    """The evicted pod's kubelet finishes with it during the drain's wait, just before the
    deadline."""

    pod: str = ""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        assert self.sim is not None
        namespace, name = self.pod.split("/")
        with self.sim.store.lock:
            self.sim.store.delete("pods", namespace, name)


def test_a_pod_gone_in_the_last_second_before_the_deadline_ends_the_drain_in_time(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    trainer = trainer_of(c, node)
    ctx = FinishedInTheLastWait(client=c.client, params={"node": node}, run_id="run-1",
                                timeout=1.0, sim=c.sim, pod=trainer)  # fmt: skip
    step = ACTIONS["drain"]()
    plan = StepPlan.from_json(step.plan(ctx).to_json())

    assert step.apply(ctx, plan) == {"evicted": [trainer]}


def test_verify_names_the_first_five_pods_still_there(cluster_for: Make) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    keys = [put_pod(c.sim, node, f"web-{i}", "zoo") for i in range(6)]
    step = ACTIONS["drain"]()
    ctx = c.ctx(node)
    plan = step.plan(ctx)

    said = step.verify(ctx, plan, {"evicted": []})

    assert said is not None
    head, named = said.split(": ", 1)
    assert head == f"7 evictable pod(s) still on {node}"
    assert len(named.split(", ")) == 5
    assert set(named.split(", ")) < {trainer_of(c, node), *keys}


def test_a_drain_whose_lock_is_lost_evicts_nothing(cluster_for: Make) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)

    def lost() -> None:
        raise LockLost("lock lost: node is now locked by bob@box (run b0b, x)")

    step = ACTIONS["drain"]()
    ctx = c.ctx(node, guard=lost)
    with pytest.raises(LockLost):
        step.apply(ctx, step.plan(ctx))
    assert evictions(c) == []


def test_a_ctrl_c_before_the_first_pass_stops_a_drain_with_nothing_to_evict(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("general")[0]  # no GPU pod: a GPU-only drain finds nothing to evict
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    step = ACTIONS["drain"]()
    ctx = c.ctx(node, with_args={"gpu_only": True})
    plan = step.plan(ctx)
    assert plan.changes == []
    ctx.cancel.set()

    with pytest.raises(Cancelled):
        step.apply(ctx, plan)


def test_a_blip_reading_the_node_is_raised_for_the_engine_to_read_again(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    for name in ("cordon", "drain"):
        c.sim.fail("GET", f"/nodes/{node}$", code=503)
        with pytest.raises(StepFailed) as failed:
            ACTIONS[name]().check(c.ctx(node))
        assert failed.value.retryable, name


# -- what the confirmation says about undo ------------------------------------------------------


def runbook(tmp_path: Path, *actions: str) -> Runbook:
    path = tmp_path / "try.yaml"
    steps = "".join(f"  - id: {a}\n    action: {a}\n" for a in actions)
    path.write_text(
        "name: try\ntitle: try\ntarget: node\nundo: never\n"
        f"params:\n  node: {{type: node, required: true}}\nsteps:\n{steps}"
    )
    return load_runbook(path)


def test_the_plan_says_which_node_steps_undo_puts_back(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    book = runbook(tmp_path, "cordon", "drain", "report-node", "uncordon")

    plan = Runner(book, {"node": node}, client=c.client, yes=True).plan()

    shown = [step.to_json() for step in plan.steps]
    assert [(s["id"], s["mutates"], s["canUndo"]) for s in shown] == [
        ("cordon", True, True),
        ("drain", True, False),  # evicted pods reschedule on their own
        ("report-node", False, False),  # read-only
        ("uncordon", True, True),
    ]
    assert reversal_words(book) == "cannot be undone"
    assert reversal_words(runbook(tmp_path, "cordon", "report-node", "uncordon")) == (
        "reversible: undo (u) puts back what it changed"
    )


def test_a_drain_whose_evictions_keep_failing_is_tried_twice(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = cordoned_train_node(c)
    path = tmp_path / "just-drain.yaml"
    path.write_text(
        "name: just-drain\ntitle: just-drain\ntarget: node\nundo: never\n"
        "params:\n  node: {type: node, required: true}\n"
        "steps:\n  - id: drain\n    action: drain\n"
    )
    c.sim.fail("POST", "/eviction$", code=503, times=None)

    result = Runner(load_runbook(path), {"node": node}, client=c.client, yes=True).run()

    assert result.status == "failed"
    assert "answered 503" in result.error
    assert RunState.load(result.run_id).step("drain").attempts == 2
    assert len(evictions(c)) == 2
