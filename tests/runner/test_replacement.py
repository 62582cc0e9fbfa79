"""A replacement is a state that held: replace-instance's forecast of whether a new node comes,
its wait that counts a node only after it stayed serving for the settle window of cluster time,
and the pool as the run that caused the replacement found it, kept across a kill and a resume."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODECLAIMS, NODES
from mignurse.runner import state as st
from mignurse.runner.engine import Runner
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.forecast import moving_pods, pending_for
from mignurse.runner.steps.instance import DeleteNodeClaim, WaitReplacement
from mignurse.runner.steps.kube import Cordon, Drain
from mignurse.runner.steps.settle import Settle, serving_problem

from .enginehelpers import Cluster, never_consolidated
from .interrupthelpers import book, resumed
from .repairhelpers import sim_ctx
from .test_interruptions import When, on

Make = Callable[..., Cluster]
T0 = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)


# -- the settle window ----------------------------------------------------------------------------


def test_a_node_counts_only_after_serving_for_the_whole_window() -> None:
    held = Settle(120)
    for second in range(0, 120, 10):
        assert not held.observe(T0 + timedelta(seconds=second), None)
    assert held.observe(T0 + timedelta(seconds=120), None)  # the window's last read


def test_one_bad_read_inside_the_window_starts_it_again() -> None:
    held = Settle(120)
    held.observe(T0, None)
    held.observe(T0 + timedelta(seconds=110), "NotReady (KubeletNotReady: runtime is down)")
    assert not held.observe(T0 + timedelta(seconds=130), None)
    assert not held.observe(T0 + timedelta(seconds=249), None)  # 119 s since it came back
    assert held.observe(T0 + timedelta(seconds=250), None)
    assert held.story() == (
        "serving at 12:00:00Z, then NotReady (KubeletNotReady: runtime is down) at 12:01:50Z, "
        "then serving 12:02:10Z–12:04:10Z"
    )


def test_a_node_ready_for_20_seconds_then_notready_is_told_as_it_happened() -> None:
    held = Settle(120)
    for second in (0, 10, 20):
        held.observe(T0 + timedelta(seconds=second), None)
    for second in (30, 40, 300):
        held.observe(T0 + timedelta(seconds=second), "NotReady (KubeletNotReady)")
    assert not held.settled and held.ever_served
    assert held.story() == "serving 12:00:00Z–12:00:20Z, then NotReady (KubeletNotReady) " + (
        "12:00:30Z–12:05:00Z"
    )


def _node(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {}},
        "spec": {},
        "status": {
            "conditions": status.pop("conditions", [{"type": "Ready", "status": "True"}]),
            **status,
        },
    }


def test_serving_means_ready_no_failed_accelerated_hardware_and_gpus_when_expected() -> None:
    gpus = {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}
    assert serving_problem(_node(**gpus)) is None
    assert serving_problem(None) == "gone"
    down = _node(conditions=[{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}])
    assert serving_problem(down) == "NotReady (KubeletNotReady)"
    ahr = _node(
        conditions=[
            {"type": "Ready", "status": "True"},
            {"type": "AcceleratedHardwareReady", "status": "False", "reason": "DCGMError"},
        ]
    )
    assert serving_problem(ahr) == "AcceleratedHardwareReady=False (DCGMError)"
    from mignurse.runner.steps.settle import gpus_advertised

    dark = _node(capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "0"})
    assert serving_problem(dark, gpus_advertised) == (
        "GPUs in capacity but none allocatable (device plugin not serving)"
    )
    assert serving_problem(_node(), gpus_advertised) == "no GPUs advertised yet"


# -- what the forecast counts ----------------------------------------------------------------------


def _pod(name: str, owner: str = "ReplicaSet", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    meta.update(extra.pop("metadata", {}))
    return {"metadata": meta, "spec": extra.pop("spec", {}), "status": extra.pop("status", {})}


def test_only_pods_a_controller_recreates_can_need_a_new_node() -> None:
    moving, others = moving_pods(
        [
            _pod("web"),
            _pod("db", "StatefulSet"),
            _pod("agent", "DaemonSet"),
            _pod("static", "Node"),
            _pod("mirror", metadata={"annotations": {"kubernetes.io/config.mirror": "x"}}),
            _pod("done", status={"phase": "Succeeded"}),
            _pod("bare", owner=""),
        ]
    )
    assert [p["metadata"]["name"] for p in moving] == ["web", "db"]
    assert others == {
        "DaemonSet pod": 1,
        "mirror pod": 2,
        "finished pod": 1,
        "bare pod (evicted, not recreated)": 1,
    }


def test_a_pending_pod_counts_only_when_a_node_like_the_old_one_could_take_it() -> None:
    shape = {
        "labels": {"karpenter.sh/nodepool": "gpu-infer"},
        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        "allocatable": {"cpu": "48", "memory": "384Gi", "pods": "110", "nvidia.com/gpu": "4"},
    }
    gpu = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}

    def wants(gpus: str, **spec: Any) -> dict[str, Any]:
        ctr = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}
        return {"containers": [ctr], **gpu, **spec}

    pending = {"phase": "Pending"}
    pods = [
        _pod("fits", spec=wants("2"), status=pending),
        _pod("too-big", spec=wants("8"), status=pending),
        _pod("no-toleration", spec={"containers": []}, status=pending),
        _pod(
            "other-pool",
            spec=wants("1", nodeSelector={"karpenter.sh/nodepool": "x"}),
            status=pending,
        ),
        _pod("bound", spec={**wants("1"), "nodeName": "elsewhere"}, status=pending),
        _pod("daemon", "DaemonSet", spec=wants("1"), status=pending),
    ]
    assert pending_for(pods, shape) == ["ns/fits"]


# -- the steps against the simulator -------------------------------------------------------------


def _karpenter_node_steps(c: Cluster, node: str, logs: list[str], wait: float) -> Any:
    """Plan cordon → drain → delete-nodeclaim → wait-replacement up front (as the engine does),
    then run them, the wait last; returns the wait's outcome (or raises its StepFailed)."""

    def ctx(timeout: float = 30) -> Any:
        return sim_ctx(c.sim, c.client, node, log=logs.append, timeout=timeout)

    steps = [Cordon(), Drain(), DeleteNodeClaim(), WaitReplacement()]
    plans = [StepPlan.from_json(s.plan(ctx()).to_json()) for s in steps]
    for step, plan in zip(steps[:-1], plans[:-1], strict=True):
        step.apply(ctx(), plan)
    return plans[-1], lambda: steps[-1].apply(ctx(timeout=wait), plans[-1])


def test_a_node_running_only_daemonset_pods_expects_no_replacement_and_waits_for_none(
    cluster_for: Make,
) -> None:
    c = cluster_for("mig-1g24gb")
    node = "ip-10-0-30-151.us-east-2.compute.internal"  # no workload of its own
    pool = c.nodes("gpu-mig-g7e")
    logs: list[str] = []
    plan, wait = _karpenter_node_steps(c, node, logs, wait=900)

    assert plan.notes[0] == (
        f"none expected: no pod on {node} needs a new node (10 DaemonSet pod); Karpenter "
        "launches nodes only for pods that cannot be scheduled"
    )
    done = wait()

    assert done["replacement"] is None and done["summary"] == plan.notes[0]
    assert set(c.nodes("gpu-mig-g7e")) <= set(pool)  # and indeed none came
    assert WaitReplacement().verify(sim_ctx(c.sim, c.client, node), plan, done) is None


def test_gpu_pods_that_fit_on_no_other_node_expect_a_replacement(cluster_for: Make) -> None:
    c = cluster_for("healthy")
    node = c.nodes("gpu-infer")[0]
    plan = WaitReplacement().plan(sim_ctx(c.sim, c.client, node))
    first = plan.notes[0]
    assert first.startswith(
        "expected: Karpenter launches a node in NodePool gpu-infer for pods that need one (2 "
        "evicted pod(s) fit on no other node: inference/llm-inference-"
    )
    assert first.count("(nvidia.com/gpu: 2)") == 2
    assert plan.data["expects"] == "allocatable"


class _Listing:
    """Just enough of a ClusterClient for the forecast: nodes and pods to list, no NodePool."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.items = {"nodes": nodes, "pods": pods}

    def list_pages(self, resource: Any, field_selector: str = "", **_kw: Any) -> Any:
        items = self.items[resource.plural]
        if field_selector.startswith("spec.nodeName="):  # what the API server filters
            bound = field_selector.split("=", 1)[1]
            items = [i for i in items if (i.get("spec") or {}).get("nodeName", "") == bound]
        yield list(items), "1"

    def get(self, resource: Any, name: str, *_a: Any) -> Any:
        from mignurse.cluster.client import NotFound

        raise NotFound(f"{resource.plural} {name} not found")


def _gpu_node(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    labels = {"karpenter.sh/nodepool": "gpu", "node.kubernetes.io/instance-type": "g6e.12xlarge"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {
                "cpu": "48",
                "memory": "384Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
        },
    }


def _gpu_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    ctr = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"}}}
    return _pod(name, spec={"nodeName": node, "containers": [ctr]}, status={"phase": "Running"})


@pytest.mark.parametrize("reads", [100, 0])  # the candidates' pods read node by node, or all
@pytest.mark.parametrize(
    ("free", "comes"),
    [(2, False), (1, True)],  # room for the evicted pod exactly, and one GPU short
)
def test_an_evicted_pod_needs_a_new_node_only_when_no_other_node_has_room(
    free: int, comes: bool, reads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner.steps import forecast as forecasting
    from mignurse.runner.steps.forecast import forecast_karpenter

    monkeypatch.setattr(forecasting, "CANDIDATE_READS", reads)
    nodes = [_gpu_node("old", 4), _gpu_node("other", 4)]
    pods = [_gpu_pod("moving", "old", 2), _gpu_pod("staying", "other", 4 - free)]
    forecast = forecast_karpenter(_Listing(nodes, pods), nodes[0], "gpu")  # type: ignore[arg-type]
    assert forecast.comes is comes, forecast.why
    if comes:
        assert forecast.needing == ("ns/moving",)
        assert "1 evicted pod(s) fit on no other node: ns/moving (nvidia.com/gpu: 2)" in (
            forecast.why
        )
    else:
        assert forecast.why.startswith("none expected: the 1 pod(s) its controllers recreate "
                                       "fit on other nodes (ns/moving)")  # fmt: skip


@pytest.mark.parametrize(
    "other",
    [
        _gpu_node("cordoned", 4, unschedulable=True),
        _gpu_node("tainted", 4, taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        {
            **_gpu_node("notready", 4),
            "status": {
                **_gpu_node("x", 4)["status"],
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        },
        _gpu_node("untolerated", 4, taints=[{"key": "dedicated", "effect": "NoSchedule"}]),
    ],
    ids=lambda n: n["metadata"]["name"],
)
def test_a_node_that_takes_no_new_pods_is_no_room_for_them(other: dict[str, Any]) -> None:
    from mignurse.runner.steps.forecast import forecast_karpenter

    nodes = [_gpu_node("old", 4), other]
    forecast = forecast_karpenter(
        _Listing(nodes, [_gpu_pod("moving", "old", 2)]),  # type: ignore[arg-type]
        nodes[0],
        "gpu",
    )
    assert forecast.comes, forecast.why


def test_a_replacement_ready_for_20_seconds_then_notready_is_never_a_success(
    cluster_for: Make,
) -> None:
    # mig-hook-notready: every new gpu-mig node is Ready for 20 s, then mig-manager's restart of
    # kubelet leaves it NotReady for good.
    c = cluster_for("mig-hook-notready")
    node = "ip-10-0-15-222.us-west-2.compute.internal"  # Ready, runs the MIG trainer
    logs: list[str] = []
    plan, wait = _karpenter_node_steps(c, node, logs, wait=600)

    assert plan.notes[0].startswith("expected: Karpenter launches a node in NodePool gpu-mig")
    assert any(n.startswith("the replacement may fail as other nodes of gpu-mig did: "
                            "notready-loop: ") for n in plan.notes)  # fmt: skip
    with pytest.raises(StepFailed) as failed:
        wait()

    said = str(failed.value)
    assert said.startswith("no replacement stayed serving for 2m00s: ip-"), said
    # Ready without its GPUs, then NotReady for good: never counted, and told as it happened.
    assert ", then no GPUs advertised yet 12:" in said, said
    assert ", then NotReady (KubeletNotReady: container runtime is down) 12:" in said, said
    assert said.endswith(
        "; as the plan said, the replacement may fail as other nodes of gpu-mig did (notready-loop)"
    ), said
    assert not any("stayed Ready" in line for line in logs)


def test_a_replacement_that_launched_during_the_drain_is_found_by_the_resumed_run(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    # Karpenter launches the node for the evicted pods while the drain runs: by the time the
    # NodeClaim is deleted, the replacement may be Ready already. A run stopped then, and its
    # resume, must still know it is new: the pool is the one this run found before its drain.
    c = cluster_for(never_consolidated("healthy", "gpu-infer"), speed=30)
    node = c.nodes("gpu-infer")[0]
    before = set(c.nodes("gpu-infer"))
    replace = book("replace-instance", tmp_path)
    params = {"node": node, "collect": False, "wait": "5m", "drain_timeout": "2m",
              "settle": "60s"}  # fmt: skip
    runner: Runner
    stop = When(on("step-started", "delete-nodeclaim"), lambda: runner.cancel())
    runner = Runner(replace, params, client=c.client, yes=True, listener=stop)
    first = runner.run()
    assert first.status == "interrupted", (first.error, first.report_lines())

    again = Runner(replace, params, client=c.client, yes=True).run()

    assert again.status == "blocked" and again.exit_code == 1
    assert again.error.startswith(
        f"run {first.run_id} (replace-instance, interrupted before step delete-nodeclaim) "
        f"left: node {node} cordoned by it (mignurse.io/cordoned-by); "
        f"`mignurse run --resume {first.run_id}` continues from step delete-nodeclaim"
    ), again.error
    assert not _saved(again.run_id)  # refused before it began: nothing to resume or undo

    done = resumed(first.run_id, c, [replace], tmp_path).run()

    assert done.status == "succeeded", (done.error, done.report_lines())
    replacement = done.steps[-1].applied["replacement"]  # type: ignore[index]
    assert replacement not in before
    raw = c.client.get(NODES, replacement)
    assert serving_problem(raw) is None


def _saved(run_id: str) -> bool:
    try:
        st.RunState.load(run_id)
    except FileNotFoundError:
        return False
    return True


def test_a_node_deleted_by_karpenter_mid_drain_is_one_consistent_account(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    # Karpenter's own repair deletes the NodeClaim while the drain waits on a PDB: the run
    # neither fails on a node that is gone nor claims it deleted the NodeClaim; it waits for
    # the replacement and ends saying where the node stands.
    c = cluster_for("healthy", speed=30)
    node = c.nodes("gpu-infer")[0]
    (claim,) = [
        x["metadata"]["name"]
        for x in c.sim.objects("nodeclaims")
        if x["status"].get("nodeName") == node
    ]
    replace = book("replace-instance", tmp_path)
    params = {"node": node, "collect": False, "wait": "5m", "settle": "60s"}

    def repair() -> None:
        c.client.delete(NODECLAIMS, claim)

    events = When(on("output", "drain", "refused by their disruption budget"), repair)
    result = Runner(replace, params, client=c.client, yes=True, listener=events).run()

    assert events.fired
    assert result.status == "succeeded", (result.error, result.report_lines())
    steps = {s.id: s for s in result.steps}
    assert steps["delete-nodeclaim"].status == "skipped"
    assert (
        steps["delete-nodeclaim"]
        .applied["summary"]
        .startswith(  # type: ignore[index]
            f"node {node} was deleted outside this run"
        )
    )
    assert not [r for r in c.sim.requests if r["method"] == "DELETE" and claim in r["path"]][1:]
    assert steps["wait-replacement"].status == "verified"
    standing = result.notices[-1]  # read back as the run ended: gone, or on its way
    assert standing == f"now: node {node} no longer exists" or (
        standing.startswith(f"now: node {node} is ") and ", being deleted since " in standing
    ), result.notices


def test_a_pool_whose_image_lacks_dcgm_is_told_its_replacement_fails_the_same_way(
    cluster_for: Make,
) -> None:
    # dcgm-repair-loop: the image has no libdcgm, so the agent sets AcceleratedHardwareReady
    # False (DCGMError) on every node of gpu-inference and Karpenter repairs them in a loop.
    c = cluster_for("dcgm-repair-loop", speed=0)
    c.sim.advance(15 * 60)  # the loop under way: nodes flagged, some already replaced
    node = c.nodes("gpu-inference")[0]

    plan = WaitReplacement().plan(sim_ctx(c.sim, c.client, node))

    fates = [n for n in plan.notes if n.startswith("the replacement will fail ")]
    assert any(": accelerated-hardware-not-ready: the new node runs the same image and "
               "monitoring, so its AcceleratedHardwareReady goes False the same way (" in n
               for n in fates), plan.notes  # fmt: skip
