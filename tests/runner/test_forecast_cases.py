"""replace-instance's forecast of whether Karpenter launches a node once the old one's pods are
evicted (mignurse/runner/steps/forecast.py, after kubernetes-sigs/karpenter v1.14.1
pkg/controllers/provisioning/provisioner.go): which pods move, where they fit, which pending
pods a new node takes, and what the plan tells the on-call engineer about each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mignurse.cluster.client import ContextInfo, NotFound
from mignurse.diagnose.findings import Finding
from mignurse.runner.steps.forecast import (
    Forecast,
    forecast_group,
    forecast_karpenter,
    moving_pods,
    pending_for,
    recurring_causes,
    shape_of,
)

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists"}


class Listing:
    """What the forecast reads of a cluster: nodes, pods (the API server filters on
    spec.nodeName), NodePools by name; and which pod lists it asked for."""

    def __init__(
        self,
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        nodepools: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.items = {"nodes": nodes, "pods": pods}
        self.nodepools = nodepools or {}
        self.pod_reads: list[str] = []

    def list_pages(self, resource: Any, field_selector: str = "", **_kw: Any) -> Iterator[Any]:
        items = self.items[resource.plural]
        if resource.plural == "pods":
            self.pod_reads.append(field_selector)
        if field_selector.startswith("spec.nodeName="):
            bound = field_selector.split("=", 1)[1]
            items = [i for i in items if (i.get("spec") or {}).get("nodeName", "") == bound]
        yield list(items), "1"

    def get(self, resource: Any, name: str, *_a: Any) -> dict[str, Any]:
        if resource.plural == "nodepools" and name in self.nodepools:
            return self.nodepools[name]
        raise NotFound(f"{resource.plural} {name} not found")


def gpu_node(name: str, gpus: int = 4, cpu: str = "48", **spec: Any) -> dict[str, Any]:
    labels = {"karpenter.sh/nodepool": "gpu", "kubernetes.io/hostname": name}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    meta.update(spec.pop("metadata", {}))
    allocatable = {"cpu": cpu, "memory": "384Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": meta,
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": allocatable,
            "capacity": dict(allocatable),
        },
    }


def pod(
    name: str,
    node: str = "",
    owner: str = "ReplicaSet",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    phase: str = "Running",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    meta.update(spec.pop("metadata", {}))
    if owner and "ownerReferences" not in meta:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    resources: dict[str, Any] = {"requests": requests or {}}
    if limits:
        resources["limits"] = limits
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}], **spec}
    if node:
        body["nodeName"] = node
    return {"metadata": meta, "spec": body, "status": {"phase": phase}}


def gpus(count: int) -> dict[str, str]:
    return {"nvidia.com/gpu": str(count), "cpu": "1"}


def forecast(listing: Listing, old: str = "old") -> Forecast:
    (raw,) = [n for n in listing.items["nodes"] if n["metadata"]["name"] == old]
    return forecast_karpenter(listing, raw, "gpu")  # type: ignore[arg-type]


# -- where the evicted pods go --------------------------------------------------------------------


def test_two_evicted_pods_that_each_fit_the_free_room_but_not_together_need_a_new_node() -> None:
    nodes = [gpu_node("old"), gpu_node("other")]
    pods = [
        pod("a", "old", requests=gpus(2)),
        pod("b", "old", requests=gpus(2)),
        pod("busy", "other", requests=gpus(2)),  # 2 of its 4 GPUs free: room for one of them
    ]
    said = forecast(Listing(nodes, pods))
    assert said.comes, said.why
    assert said.needing == ("ml/b",)
    assert "1 evicted pod(s) fit on no other node: ml/b (nvidia.com/gpu: 2)" in said.why


@pytest.mark.parametrize(
    "other",
    [
        gpu_node("deleting", metadata={"deletionTimestamp": "2026-11-20T11:59:00Z"}),
        # a pod that tolerates every taint would land there, but Karpenter is taking it away
        gpu_node("disrupted", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
    ],
    ids=lambda n: n["metadata"]["name"],
)
def test_a_node_on_its_way_out_is_no_room_for_the_evicted_pods(other: dict[str, Any]) -> None:
    nodes = [gpu_node("old"), other]
    anything = [{"operator": "Exists"}]
    said = forecast(Listing(nodes, [pod("web", "old", requests=gpus(2), tolerations=anything)]))
    assert said.comes and said.needing == ("ml/web",), said.why


@pytest.mark.parametrize("reads", [100, 0])  # the candidates' pods read node by node, or all
def test_a_finished_pod_on_another_node_leaves_its_room_free(
    reads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner.steps import forecast as forecasting

    monkeypatch.setattr(forecasting, "CANDIDATE_READS", reads)
    nodes = [gpu_node("old"), gpu_node("other")]
    pods = [
        pod("web", "old", requests=gpus(4)),
        pod("job-done", "other", owner="Job", requests=gpus(4), phase="Succeeded"),
    ]
    said = forecast(Listing(nodes, pods))
    assert not said.comes, said.why
    assert said.why == (
        "none expected: the 1 pod(s) its controllers recreate fit on other nodes (ml/web); "
        "Karpenter launches nodes only for pods that cannot be scheduled"
    )


def test_a_node_whose_pods_all_stay_or_go_with_it_expects_no_new_node() -> None:
    nodes = [gpu_node("old"), gpu_node("other")]
    pods = [
        pod("dcgm", "old", owner="DaemonSet", requests={"cpu": "1"}),
        pod("job-done", "old", owner="Job", requests=gpus(4), phase="Succeeded"),
    ]
    said = forecast(Listing(nodes, pods))
    assert not said.comes and said.needing == ()
    assert said.why == (
        "none expected: no pod on old needs a new node (1 DaemonSet pod, 1 finished pod); "
        "Karpenter launches nodes only for pods that cannot be scheduled"
    )


def test_only_the_nodes_that_could_take_an_evicted_pod_have_their_pods_read() -> None:
    # A CPU node takes no 4-GPU pod: on a big cluster, reading the pods of every such node
    # one by one is thousands of requests for nothing.
    nodes = [gpu_node("old"), gpu_node("other"), gpu_node("cpu-only", gpus=0)]
    listing = Listing(nodes, [pod("web", "old", requests=gpus(4))])
    forecast(listing)
    assert "spec.nodeName=other" in listing.pod_reads
    assert "spec.nodeName=cpu-only" not in listing.pod_reads
    assert "" not in listing.pod_reads  # no list of every pod either


# -- which pods move ------------------------------------------------------------------------------


def test_a_daemonset_pod_that_names_another_owner_first_is_still_a_daemonset_pod() -> None:
    # A garbage-collection owner listed before the controller (kubectl, Helm hooks, operators)
    owners = [
        {"kind": "ConfigMap", "name": "cfg"},
        {"kind": "DaemonSet", "name": "dcgm-exporter", "controller": True},
    ]
    moving, others = moving_pods([pod("dcgm", "old", metadata={"ownerReferences": owners})])
    assert moving == [] and others == {"DaemonSet pod": 1}


def test_a_pod_whose_only_owner_is_not_marked_controller_moves_with_that_owner() -> None:
    owners = [{"kind": "ReplicaSet", "name": "web-7d9"}]  # no `controller: true`
    moving, others = moving_pods([pod("web", "old", metadata={"ownerReferences": owners})])
    assert [p["metadata"]["name"] for p in moving] == ["web"] and others == {}


# -- pending pods a new node takes ----------------------------------------------------------------


def test_pending_pods_that_go_nowhere_are_not_counted() -> None:
    shape = shape_of(gpu_node("old"))
    pods = [
        pod("waits", requests=gpus(1), phase="Pending"),
        pod("terminating", requests=gpus(1), phase="Pending",
            metadata={"deletionTimestamp": "2026-11-20T12:00:00Z"}),
        # a Job pod past its activeDeadlineSeconds while still unscheduled: Failed, unbound
        pod("deadline", owner="Job", requests=gpus(1), phase="Failed"),
    ]  # fmt: skip
    assert pending_for(pods, shape) == ["ml/waits"]


def test_a_pending_pod_counts_for_a_node_karpenter_already_marked_disrupted() -> None:
    # The old node carries karpenter.sh/disrupted; the node launched in its place does not.
    old = gpu_node("old", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    assert shape_of(old)["taints"] == []
    assert pending_for([pod("waits", requests=gpus(1), phase="Pending")], shape_of(old)) == [
        "ml/waits"
    ]


def test_a_pending_pod_is_judged_beside_the_daemonset_pods_a_new_node_runs() -> None:
    # The DaemonSet pods on the old node (2 CPUs) run on the new one too: a pending pod that
    # asks for 47 of its 48 CPUs does not fit it; one asking for 46 does. The old node's
    # other pods go elsewhere: they take nothing on a new node.
    nodes = [gpu_node("old"), gpu_node("other")]
    pods = [
        pod("web", "old", requests={"cpu": "4"}),
        pod("dcgm", "old", owner="DaemonSet", requests={"cpu": "2"}),
        pod("old-agent", "old", owner="DaemonSet", requests={"cpu": "8"}, phase="Failed"),
        pod("big", requests={"cpu": "47"}, phase="Pending"),
        pod("fits", requests={"cpu": "46"}, phase="Pending"),
    ]
    said = forecast(Listing(nodes, pods))
    assert said.comes
    assert said.needing == ("ml/fits",), said.why


def test_pending_pods_alone_bring_a_new_node_and_are_named() -> None:
    nodes = [gpu_node("old"), gpu_node("other")]
    pods = [
        pod("web", "old", requests=gpus(1)),  # fits on `other`
        pod("waits", requests=gpus(2), phase="Pending", tolerations=[GPU_TOLERATION]),
    ]
    said = forecast(Listing(nodes, pods))
    assert said.comes and said.needing == ("ml/waits",)
    assert said.why == (
        "expected: Karpenter launches a node in NodePool gpu for pods that need one (1 pending "
        "pod(s) would fit it: ml/waits)"
    )


# -- what the plan says ---------------------------------------------------------------------------


def test_the_pods_needing_a_node_are_named_with_what_they_ask_for() -> None:
    nodes = [gpu_node("old", gpus=8), gpu_node("other", gpus=0)]
    pods = [
        pod("one-gpu", "old", requests=gpus(1), nodeSelector={"kubernetes.io/hostname": "old"}),
        # a chart's CPU variant that zeroes what it does not use
        pod("cpu", "old", requests={"cpu": "500m", "memory": "0"},
            limits={"nvidia.com/gpu": "0", "memory": "1Gi"},
            nodeSelector={"kubernetes.io/hostname": "old"}),
        pod("pinned", "old", nodeSelector={"kubernetes.io/hostname": "old"}),  # asks nothing
    ]  # fmt: skip
    said = forecast(Listing(nodes, pods))
    assert said.why == (
        "expected: Karpenter launches a node in NodePool gpu for pods that need one (3 evicted "
        "pod(s) fit on no other node: ml/one-gpu (nvidia.com/gpu: 1), ml/cpu (cpu: 500m), "
        "ml/pinned)"
    )


@pytest.mark.parametrize(
    ("count", "tail"),
    [(4, "ml/p3 (nvidia.com/gpu: 1))"), (5, "ml/p3 (nvidia.com/gpu: 1) and 1 more)")],
)
def test_a_long_list_of_pods_is_cut_after_four(count: int, tail: str) -> None:
    nodes = [gpu_node("old", gpus=8)]
    pods = [pod(f"p{i}", "old", requests={"nvidia.com/gpu": "1"}) for i in range(count)]
    said = forecast(Listing(nodes, pods))
    assert said.why.endswith(f"ml/p2 (nvidia.com/gpu: 1), {tail}"), said.why
    assert len(said.needing) == count


def test_pods_whose_placement_the_forecast_does_not_judge_are_named() -> None:
    nodes = [gpu_node("old"), gpu_node("other")]
    anti: dict[str, Any] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}
    }
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname"}]
    pods = [
        pod("anti", "old", requests=gpus(1), affinity=anti),
        pod("spread", "old", requests=gpus(1), topologySpreadConstraints=spread),
        pod("plain", "old", requests=gpus(1)),
    ]
    said = forecast(Listing(nodes, pods))
    assert not said.comes
    assert said.notes == (
        "pod affinity, anti-affinity and topology spread are not judged by the forecast "
        "(ml/anti, ml/spread): they may need a new node where it says none",
    )


def _pool(limits: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "gpu"}, "spec": {"limits": limits}, "status": {"resources": used}}


@pytest.mark.parametrize(
    ("used", "full"),
    [
        ({"cpu": "96"}, True),  # this node's 48 CPUs and another 48: no room for a third
        ({"cpu": "48"}, False),  # this node's 48: exactly room for one more like it
    ],
)
def test_a_nodepool_at_its_limits_is_said_to_wait_for_the_old_node(
    used: dict[str, str], full: bool
) -> None:
    nodes = [gpu_node("old")]
    listing = Listing(nodes, [], nodepools={"gpu": _pool({"cpu": "96"}, used)})
    said = forecast(listing)
    at_limit = (
        f"NodePool gpu is at its limits (cpu {used['cpu']} of 96 in use): the new node launches "
        "only once this one's capacity is released"
    )
    assert said.notes == ((at_limit,) if full else ())


def test_a_node_group_keeps_its_capacity_so_a_replacement_comes() -> None:
    said = forecast_group("ng-gpu-l4")
    assert said.comes and said.to_json()["comes"] is True
    assert said.why.startswith("expected: node group ng-gpu-l4's Auto Scaling group")


# -- whether the new node fails the same way ------------------------------------------------------


class _Clock:
    """What recurring_causes asks of a client besides the live read: its clock, and who it
    is (the history file is the cluster's own)."""

    info = ContextInfo(context="prod", cluster="prod", server="https://127.0.0.1:6443", user="u")

    def server_now(self) -> Any:
        from datetime import UTC, datetime

        return datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def finding(fid: str, pool: str, nodes: tuple[str, ...], runbooks: tuple[str, ...] = ()) -> Finding:
    return Finding(fid, "warning", pool, nodes, f"{fid} on {', '.join(nodes)}", runbooks=runbooks)


def causes(
    monkeypatch: pytest.MonkeyPatch, found: list[Finding], node: str, pool: str
) -> list[str]:
    """recurring_causes with the live diagnosis answering `found` (the rules' own work is
    theirs to test: here, which findings the plan passes on)."""
    from mignurse.diagnose import engine
    from mignurse.diagnose.sources import live

    class Gathered:
        def to_input(self, _now: Any) -> None:
            return None

    seen_rules: list[str] = []

    def diagnose(_inp: Any, *, rules: Any) -> Any:
        seen_rules.extend(name for name, _rule in rules)

        class Diagnosis:
            findings = found

        return Diagnosis()

    monkeypatch.setattr(live, "load_live", lambda *_a, **_k: Gathered())
    monkeypatch.setattr(engine, "diagnose", diagnose)
    lines = recurring_causes(_Clock(), node, pool)  # type: ignore[arg-type]
    assert sorted(seen_rules) == [
        "accelerated-hardware-not-ready",
        "mig-hook-kubelet-restart",
        "node-repair-loop",
        "notready-loop",
    ]
    return lines


def test_findings_of_other_pools_and_nodes_are_not_the_replacements_fate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = [
        finding("node-repair-loop", "cpu-general", ("cpu-1", "cpu-2")),
        # this node's own, though the diagnosis placed it in no pool
        finding("mig-hook-kubelet-restart", "", ("old",)),
        finding("notready-loop", "gpu", ("gpu-2",)),
    ]
    assert causes(monkeypatch, found, "old", "ng-gpu-l4") == [
        "the replacement will fail the same way: mig-hook-kubelet-restart: the new node boots "
        "with the same MIG settings and mig-manager, which stop kubelet during its bootstrap "
        "the same way (mig-hook-kubelet-restart on old)"
    ]


def test_a_broken_gpu_is_cured_by_a_new_instance_not_inherited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = [
        finding("accelerated-hardware-not-ready", "gpu", ("old",), ("replace-instance",)),
        finding("accelerated-hardware-not-ready", "gpu", ("gpu-2",), ("cordon-and-collect",)),
        finding("notready-loop", "gpu", ("gpu-3",), ("cordon-and-collect", "replace-instance")),
    ]
    lines = causes(monkeypatch, found, "old", "gpu")
    assert [line.split(": ")[1] for line in lines] == [
        "accelerated-hardware-not-ready",
        "notready-loop",
    ]
    assert lines[0].startswith("the replacement will fail as other nodes of gpu did: ")
    assert lines[1].startswith("the replacement may fail as other nodes of gpu did: ")
