"""Which pods a drain evicts and which it leaves alone (mignurse/runner/steps/kube.py), as
`kubectl drain --ignore-daemonsets` does: mirror (static) pods and DaemonSet pods stay,
finished pods are not evicted, a GPU-only drain leaves pods that use no GPU (neither a
`nvidia.com/*` request nor a DRA claim on the node's GPUs); and what report-node says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODES
from mignurse.runner.step import ACTIONS
from mignurse.runner.steps.kube import _bad, _skip_reason, gpu_resources

from .enginehelpers import Cluster
from .mighelpers import set_not_ready

Make = Callable[..., Cluster]


def pod(
    name: str = "p",
    *,
    annotations: dict[str, str] | None = None,
    owner: str | None = None,
    phase: str = "Running",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    init: dict[str, str] | None = None,
    claims: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "resources": {"requests": requests or {}, "limits": limits or {}}}
        ]
    }
    if init:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": init}}]
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("the_pod", "why"),
    [
        (pod(annotations={"kubernetes.io/config.mirror": "abc"}), "mirror pod"),
        (pod(owner="DaemonSet"), "DaemonSet pod"),
        (pod(phase="Succeeded"), "finished"),
        (pod(phase="Failed"), "finished"),
        (pod(owner="ReplicaSet"), None),
        (pod(phase="Pending"), None),
    ],
)
def test_a_drain_leaves_mirror_daemonset_and_finished_pods(
    the_pod: dict[str, Any], why: str | None
) -> None:
    assert _skip_reason(the_pod, gpu_only=False) == why


@pytest.mark.parametrize(
    ("the_pod", "dra_users", "why"),
    [
        (pod(requests={"nvidia.com/gpu": "1"}), frozenset(), None),
        (pod(limits={"nvidia.com/mig-1g.10gb": "2"}), frozenset(), None),
        (pod(init={"nvidia.com/gpu": "1"}), frozenset(), None),  # an init container's GPU
        (pod(requests={"nvidia.com/gpu": "0"}), frozenset(), "no GPU request"),
        (pod(requests={"cpu": "4"}), frozenset(), "no GPU request"),
        (pod("trainer", claims=["gpu-claim"]), frozenset({"ml/trainer"}), None),
        (pod("trainer", claims=["nic-claim"]), frozenset(), "no GPU request"),
        (pod("trainer", claims=["any-claim"]), None, None),  # claims unreadable: count it
        (pod("web"), None, "no GPU request"),
    ],
)
def test_a_gpu_only_drain_evicts_what_uses_the_nodes_gpus(
    the_pod: dict[str, Any], dra_users: frozenset[str] | None, why: str | None
) -> None:
    assert _skip_reason(the_pod, gpu_only=True, dra_users=dra_users) == why


def test_the_gpu_resources_of_a_pod_are_every_nvidia_request_and_limit() -> None:
    the_pod = pod(
        requests={"nvidia.com/gpu": "1", "cpu": "2"},
        limits={"nvidia.com/gpu": "1", "nvidia.com/mig-3g.40gb": "0"},
        init={"nvidia.com/mig-1g.10gb": "1"},
    )
    assert gpu_resources(the_pod) == {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"}


@pytest.mark.parametrize(
    ("kind", "status", "bad"),
    [
        ("MemoryPressure", "True", True),
        ("MemoryPressure", "False", False),
        ("NetworkUnavailable", "True", True),
        ("Ready", "False", True),
        ("Ready", "Unknown", True),
        ("AcceleratedHardwareReady", "False", True),
        ("Ready", "True", False),
        ("SomethingElse", "False", False),
    ],
)
def test_report_node_names_the_conditions_that_are_not_ok(
    kind: str, status: str, bad: bool
) -> None:
    assert _bad(kind, status) is bad


def test_report_node_says_cordoned_ready_and_what_is_wrong(cluster_for: Make) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    step = ACTIONS["report-node"]()
    ctx = c.ctx(node, outputs={"collect": {"bundle": "/tmp/a.tar.gz"}, "other": {}})
    applied = step.apply(ctx, step.plan(ctx))
    assert applied["summary"] == f"{node}: schedulable, Ready=True; bundle /tmp/a.tar.gz"
    assert applied["unschedulable"] is False and applied["bundle"] == "/tmp/a.tar.gz"

    set_not_ready(c, node)
    c.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    applied = step.apply(c.ctx(node), step.plan(c.ctx(node)))
    assert applied["summary"] == f"{node}: cordoned, Ready=False, not ok: Ready"
    assert applied["bundle"] is None
