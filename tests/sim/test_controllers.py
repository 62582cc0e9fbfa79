"""Simulated Karpenter, kubelet and NMA behaviour, on a manual clock (speed=0)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from simhelpers import Http, kube

from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.karpenter_objects import TERMINATION_TIMESTAMP
from mignurse.sim.scenario import parse_scenario


def _pool_claims(sim: SimCluster, pool: str) -> list[dict[str, Any]]:
    return [
        c
        for c in sim.objects("nodeclaims")
        if c["metadata"]["labels"]["karpenter.sh/nodepool"] == pool
    ]


def _condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), None)


def test_dcgm_loop_is_in_progress_after_warmup(dcgm: SimCluster) -> None:
    claims = _pool_claims(dcgm, "gpu-inference")
    cycling = [c for c in claims if c["status"].get("imageID") == "ami-0c2d1a7f6e5b4a391"]
    assert len(claims) == 3 and len(cycling) == 1
    node = next(
        n
        for n in dcgm.objects("nodes")
        if n["metadata"]["name"] == cycling[0]["status"]["nodeName"]
    )
    ahr = _condition(node, "AcceleratedHardwareReady")
    assert ahr is not None and (ahr["status"], ahr["reason"]) == ("False", "DCGMError")
    assert ahr["message"] == "failed to initialize DCGM: libdcgm.so not Found"
    events = dcgm.objects("events")
    # Earlier cycles left Karpenter transition events on NodeClaims that no longer exist.
    live = {c["metadata"]["name"] for c in dcgm.objects("nodeclaims")}
    gone = {
        e["involvedObject"]["name"] for e in events if e["involvedObject"]["kind"] == "NodeClaim"
    } - live
    assert len(gone) >= 2
    node_flip = [
        e
        for e in events
        if e["reason"] == "AcceleratedHardwareReady"
        and e["involvedObject"]["kind"] == "Node"
        and "True -> False" in e["message"]
    ]
    assert node_flip and node_flip[0]["source"] == {"component": "karpenter"}
    assert (
        "Reason: DCGMError, Message: failed to initialize DCGM: libdcgm.so not Found"
        in node_flip[-1]["message"]
    )
    assert not [e for e in events if e["reason"] == "DisruptionTerminating"]


def test_repair_deletes_the_nodeclaim_like_karpenter_and_replaces_it(dcgm: SimCluster) -> None:
    before = {c["metadata"]["name"] for c in _pool_claims(dcgm, "gpu-inference")}
    cycling = next(
        c
        for c in _pool_claims(dcgm, "gpu-inference")
        if c["status"].get("imageID") == "ami-0c2d1a7f6e5b4a391"
    )
    name = cycling["metadata"]["name"]
    deleting = None
    for _ in range(60):  # step 10 s at a time until the repair fires
        dcgm.advance(10)
        current = {c["metadata"]["name"]: c for c in _pool_claims(dcgm, "gpu-inference")}
        if name in current and current[name]["metadata"].get("deletionTimestamp"):
            deleting = current[name]
            break
    assert deleting is not None, "repair did not fire within 10 minutes"
    meta = deleting["metadata"]
    assert meta["annotations"][TERMINATION_TIMESTAMP] == meta["deletionTimestamp"]
    assert "karpenter.sh/termination" in meta["finalizers"]
    assert _condition(deleting, "DisruptionReason") is None
    node = next(
        n for n in dcgm.objects("nodes") if n["metadata"]["name"] == deleting["status"]["nodeName"]
    )
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"].get("deletionTimestamp")
    disrupted = [e for e in dcgm.objects("events") if e["reason"] == "Disrupted"]
    assert disrupted and disrupted[0]["involvedObject"]["kind"] == "Pod"
    dcgm.advance(90)
    after = {c["metadata"]["name"] for c in _pool_claims(dcgm, "gpu-inference")}
    assert name not in after
    assert len(after - before) == 1  # the replacement
    assert not [e for e in dcgm.objects("events") if e["reason"] == "DisruptionTerminating"]


def test_a_speed_zero_run_is_deterministic() -> None:
    from datetime import UTC, datetime

    start = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    runs = []
    for _ in range(2):
        sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0, start=start)
        sim.advance(1500)
        runs.append(
            (
                sorted(c["metadata"]["name"] for c in sim.objects("nodeclaims")),
                len(sim.objects("events")),
            )
        )
    assert runs[0] == runs[1]


GUARD = """
name: guard
seed: 3
karpenter: {version: 1.4.0, nodeRepair: true}
nodePools:
  - name: gpu-small
    instanceType: g6.xlarge
    nodes: 2
    existing:
      - count: 2
        age: 5d
        names: [ip-10-0-1-1.us-west-2.compute.internal, ip-10-0-1-2.us-west-2.compute.internal]
    workload: {name: infer, namespace: inference, podsPerNode: 1}
timeline:
  - at: 30s
    node: ip-10-0-1-1.us-west-2.compute.internal
    condition: {type: AcceleratedHardwareReady, status: "False", reason: NvidiaXID79Error}
  - at: 30s
    node: ip-10-0-1-2.us-west-2.compute.internal
    condition:
      type: AcceleratedHardwareReady
      status: "False"
      reason: DCGMError
      message: "failed to initialize DCGM: libdcgm.so not Found"
"""


def test_twenty_percent_guard_blocks_repair(make_sim: Callable[..., SimCluster]) -> None:
    sim = make_sim(parse_scenario(GUARD, "guard.yaml"))
    sim.advance(11 * 60)
    blocked = [e for e in sim.objects("events") if e["reason"] == "NodeRepairBlocked"]
    assert blocked
    assert blocked[0]["type"] == "Warning" and blocked[0]["source"]["component"] == "karpenter"
    assert blocked[0]["message"] == "more than 20% nodes are unhealthy in the nodepool"
    assert blocked[0]["involvedObject"]["kind"] == "Node"
    assert not [c for c in sim.objects("nodeclaims") if c["metadata"].get("deletionTimestamp")]
    sim.advance(10 * 60)  # requeued every 5 min: same event, count goes up
    again = [e for e in sim.objects("events") if e["reason"] == "NodeRepairBlocked"]
    assert max(e["count"] for e in again) >= 2


def test_events_expire_after_the_ttl(
    make_sim: Callable[..., SimCluster], http_for: Callable[[SimCluster], Http]
) -> None:
    text = GUARD.replace("seed: 3", "seed: 3\neventTTL: 5m").replace(
        "nodeRepair: true", "nodeRepair: false"
    )
    sim = make_sim(parse_scenario(text, "ttl.yaml"))
    http = http_for(sim)
    sim.advance(60)
    flips = [e for e in sim.objects("events") if e["reason"] == "AcceleratedHardwareReady"]
    assert len(flips) == 2
    rv = http.get("/api/v1/events")[1]["metadata"]["resourceVersion"]
    sim.advance(5 * 60)
    assert not [e for e in sim.objects("events") if e["reason"] == "AcceleratedHardwareReady"]
    frames = http.watch(f"/api/v1/events?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert [f["object"]["reason"] for f in frames if f["type"] == "DELETED"].count(
        "AcceleratedHardwareReady"
    ) == 2


def test_pause_repair_by_rolling_out_the_feature_gate(dcgm: SimCluster) -> None:
    apps = client.AppsV1Api(kube(dcgm))
    deploy = apps.read_namespaced_deployment("karpenter", "kube-system")
    gates = next(
        e.value for e in deploy.spec.template.spec.containers[0].env if e.name == "FEATURE_GATES"
    )
    assert "NodeRepair=true" in gates
    assert deploy.metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "env": [
                                {
                                    "name": "FEATURE_GATES",
                                    "value": gates.replace("NodeRepair=true", "NodeRepair=false"),
                                }
                            ],
                        }
                    ]
                }
            }
        }
    }
    patched = apps.patch_namespaced_deployment("karpenter", "kube-system", patch)
    assert patched.metadata.generation == 2
    envs = {e.name for e in patched.spec.template.spec.containers[0].env}
    assert {"FEATURE_GATES", "CLUSTER_NAME"} <= envs  # env merged by name, not replaced
    dcgm.advance(1)
    mid = apps.read_namespaced_deployment("karpenter", "kube-system").status
    assert mid.observed_generation == 2 and mid.updated_replicas < 2
    dcgm.advance(15)
    done = apps.read_namespaced_deployment("karpenter", "kube-system").status
    assert (done.updated_replicas, done.ready_replicas, done.available_replicas) == (2, 2, 2)
    progressing = next(c for c in done.conditions if c.type == "Progressing")
    assert progressing.reason == "NewReplicaSetAvailable"
    dcgm.advance(20 * 60)  # well past the cycling node's deadline: nothing is repaired now
    assert not [c for c in dcgm.objects("nodeclaims") if c["metadata"].get("deletionTimestamp")]


def test_eviction_respects_the_pdb(dcgm: SimCluster) -> None:
    v1 = client.CoreV1Api(kube(dcgm))
    pods = [p for p in v1.list_namespaced_pod("inference").items if p.status.phase == "Running"]
    assert len(pods) == 3
    first, second = pods[0].metadata.name, pods[1].metadata.name
    v1.create_namespaced_pod_eviction(
        first, "inference", client.V1Eviction(metadata=client.V1ObjectMeta(name=first))
    )
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod_eviction(
            second, "inference", client.V1Eviction(metadata=client.V1ObjectMeta(name=second))
        )
    assert err.value.status == 429
    body = json.loads(err.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    pending = [p for p in v1.list_namespaced_pod("inference").items if p.status.phase == "Pending"]
    assert len(pending) == 1  # the ReplicaSet replaced the evicted pod


def test_deleting_a_nodeclaim_terminates_without_repair_annotation(dcgm: SimCluster) -> None:
    co = client.CustomObjectsApi(kube(dcgm))
    claim = _pool_claims(dcgm, "gpu-train")[0]["metadata"]["name"]
    deleted = co.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim)
    assert deleted["metadata"]["deletionTimestamp"]
    assert TERMINATION_TIMESTAMP not in deleted["metadata"].get("annotations", {})
    dcgm.advance(120)
    claims = {c["metadata"]["name"] for c in _pool_claims(dcgm, "gpu-train")}
    assert claim not in claims and len(claims) == 2


CHURN = """
name: churn
seed: 9
karpenter: {version: 1.4.0, nodeRepair: true}
nodePools:
  - name: gpu-spot
    instanceType: g6e.12xlarge
    capacityType: spot
    nodes: 3
    existing: [{count: 3, age: 2d}]
    workload: {name: infer, namespace: inference, podsPerNode: 1, perPod: 4}
timeline:
  - {at: 10s, node: {oldest: gpu-spot}, consolidate: Underutilized}
  - {at: 20s, node: {newest: gpu-spot}, spotInterrupt: true}
"""


def test_consolidation_and_spot_interruption_fingerprints(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim(parse_scenario(CHURN, "churn.yaml"))
    before = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    sim.advance(25)
    events = sim.objects("events")
    terminating = {
        e["involvedObject"]["kind"]: e["message"]
        for e in events
        if e["reason"] == "DisruptionTerminating"
    }
    assert terminating == {
        "Node": "Disrupting Node: Underutilized",
        "NodeClaim": "Disrupting NodeClaim: Underutilized",
    }
    spot = [e for e in events if e["reason"] == "SpotInterrupted"]
    assert {e["involvedObject"]["kind"] for e in spot} == {"Node", "NodeClaim"}
    assert all(e["type"] == "Warning" for e in spot)
    consolidated = [c for c in sim.objects("nodeclaims") if _condition(c, "DisruptionReason")]
    assert len(consolidated) == 1
    sim.advance(180)
    # Both nodes' pods needed a home: Karpenter launched a NodeClaim for each, and all three
    # pods run again.
    after = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    assert len(after) == 3 and len(after - before) == 2
    pods = [p for p in sim.objects("pods") if p["metadata"]["namespace"] == "inference"]
    assert sorted(p["status"]["phase"] for p in pods) == ["Running"] * 3


def test_mig_hook_node_never_recovers(make_sim: Callable[..., SimCluster]) -> None:
    sim = make_sim("mig-hook-notready")
    nodes = [
        n
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-mig"
    ]
    broken = next(
        n for n in nodes if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    )
    healthy = next(
        n for n in nodes if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "success"
    )
    assert _condition(broken, "Ready")["status"] == "False"  # type: ignore[index]
    assert _condition(broken, "Ready")["message"] == "container runtime is down"  # type: ignore[index]
    assert not [k for k in broken["status"]["allocatable"] if k.startswith("nvidia.com/mig-")]
    assert healthy["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    starts = [
        e
        for e in sim.objects("events")
        if e["reason"] == "Starting" and e["involvedObject"]["name"] == broken["metadata"]["name"]
    ]
    assert [e["message"] for e in starts] == ["Starting kubelet.", "Starting kubelet."]
    claims = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    assert len(claims) == 2
    sim.advance(3600)
    # Repair is off and the NotReady node uses up the pool's disruption budget: nothing is
    # replaced and nothing consolidated.
    assert {c["metadata"]["name"] for c in sim.objects("nodeclaims")} == claims


def test_kubelet_stop_goes_unknown_after_the_grace_period(
    make_sim: Callable[..., SimCluster],
) -> None:
    text = GUARD.replace(
        'condition: {type: AcceleratedHardwareReady, status: "False", reason: NvidiaXID79Error}',
        "kubelet: stop",
    )
    sim = make_sim(parse_scenario(text, "stop.yaml"))
    sim.advance(60)  # kubelet stopped at 30 s; Kubernetes 1.32 waits 50 s after its last renewal
    node = next(
        n
        for n in sim.objects("nodes")
        if n["metadata"]["name"] == "ip-10-0-1-1.us-west-2.compute.internal"
    )
    assert _condition(node, "Ready")["status"] == "True"  # type: ignore[index]
    sim.advance(21)
    node = next(
        n
        for n in sim.objects("nodes")
        if n["metadata"]["name"] == "ip-10-0-1-1.us-west-2.compute.internal"
    )
    ready = _condition(node, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == (
        "Unknown",
        "NodeStatusUnknown",
    )
    assert ready["message"] == "Kubelet stopped posting node status."
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"] if t.get("timeAdded")} >= {
        ("node.kubernetes.io/unreachable", "NoSchedule")
    }


def test_real_time_clock_moves(make_sim: Callable[..., SimCluster]) -> None:
    import time

    sim = make_sim("healthy", speed=10)
    start = time.monotonic()
    before = sim.now()
    time.sleep(0.5)
    after = sim.now()
    waited = time.monotonic() - start  # however long a busy machine made the sleep
    moved = (after - before).total_seconds()
    assert 10 * 0.5 - 0.5 <= moved <= 10 * waited + 0.5  # ten simulated seconds per real one
