"""The simulated cluster answers an operator's commands the way EKS with Karpenter does.

Every test acts through the kubernetes client, as kubectl or mignurse would, on a manual
clock. Expected behaviour is read from kubernetes/kubernetes (kube-apiserver's pod registry
and eviction, kube-controller-manager's node lifecycle, taint eviction, pod GC, ReplicaSet
and Deployment controllers, the kubelet's node lease; CHANGELOG-1.32.md for the 50 s
node-monitor-grace-period) and kubernetes-sigs/karpenter v1.4.0 (provisioning, disruption).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from eventlog import condition, events, find
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from simhelpers import Http, kube

from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario import parse_scenario

SMALL = """
name: small
seed: 11
cluster: {{kubernetesVersion: "{k8s}"}}
karpenter: {{version: 1.4.0, nodeRepair: false}}
nodePools:
  - name: gpu
    instanceType: g6e.12xlarge
    nodes: 3
    existing:
      - {{count: 3, age: 3d, names: [{names}]}}
    consolidation: {{after: 2m}}
    {extra}
    workload:
      name: infer
      namespace: inference
      podsPerNode: {per_node}
      perPod: {per_pod}
      pdb: {{minAvailable: 2}}
nodeGroups:
  - name: system
    instanceType: m7i.2xlarge
    zones: [us-west-2a, us-west-2b]
    nodes: 2
    existing: [{{count: 2, age: 30d}}]
timeline: {timeline}
"""
NODES = [f"ip-10-0-1-{i}.us-west-2.compute.internal" for i in (1, 2, 3)]


def small(
    make_sim: Callable[..., SimCluster],
    *,
    k8s: str = "1.32",
    extra: str = "",
    per_node: int = 1,
    per_pod: int = 4,
    timeline: str = "[]",
) -> SimCluster:
    text = SMALL.format(
        k8s=k8s,
        names=", ".join(NODES),
        extra=extra,
        per_node=per_node,
        per_pod=per_pod,
        timeline=timeline,
    )
    return make_sim(parse_scenario(text, "small.yaml"))


def workload_pods(sim: SimCluster) -> list[dict[str, Any]]:
    return sorted(
        (p for p in sim.objects("pods") if p["metadata"]["namespace"] == "inference"),
        key=lambda p: p["metadata"]["name"],
    )


def pod_on(sim: SimCluster, node: str) -> dict[str, Any]:
    return next(p for p in workload_pods(sim) if p["spec"].get("nodeName") == node)


def evict(v1: client.CoreV1Api, name: str) -> None:
    v1.create_namespaced_pod_eviction(
        name, "inference", client.V1Eviction(metadata=client.V1ObjectMeta(name=name))
    )


def cordon(v1: client.CoreV1Api, node: str, on: bool = True) -> None:
    v1.patch_node(node, {"spec": {"unschedulable": True if on else None}})


def ready(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return pod["status"].get("phase") == "Running" and cond is not None and cond["status"] == "True"


def parse(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------------- pods terminate


def test_a_deleted_pod_terminates_for_its_grace_period(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    name = pod_on(sim, NODES[0])["metadata"]["name"]
    deleted = v1.delete_namespaced_pod(name, "inference")
    # kube-apiserver BeforeDelete: deletionTimestamp = now + the pod's grace (30 s)
    assert deleted.metadata.deletion_grace_period_seconds == 30
    assert deleted.metadata.deletion_timestamp.timestamp() == sim.now().timestamp() + 30
    listed = {p.metadata.name: p for p in v1.list_namespaced_pod("inference").items}
    assert listed[name].metadata.deletion_timestamp is not None  # kubectl shows Terminating
    assert len(listed) == 4  # the ReplicaSet already made its replacement
    sim.advance(5)
    assert find(sim, "pods", name) is not None
    sim.advance(10)  # the kubelet stopped the containers and confirmed
    assert find(sim, "pods", name) is None
    created = events(sim, reason="SuccessfulCreate", kind="ReplicaSet")
    assert created[-1]["source"] == {"component": "replicaset-controller"}


def test_a_force_delete_removes_the_pod_at_once(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    name = pod_on(sim, NODES[0])["metadata"]["name"]
    v1.delete_namespaced_pod(name, "inference", grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod(name, "inference")
    assert err.value.status == 404


STOP_AT_10S = "[{at: 10s, node: ip-10-0-1-1.us-west-2.compute.internal, kubelet: stop}]"


def test_a_pod_on_a_node_whose_kubelet_is_gone_stays_terminating(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim, timeline=STOP_AT_10S)
    v1 = client.CoreV1Api(kube(sim))
    sim.advance(120)
    name = pod_on(sim, NODES[0])["metadata"]["name"]
    v1.delete_namespaced_pod(name, "inference")
    sim.advance(240)  # long past its grace period: nobody confirms the deletion
    stuck = v1.read_namespaced_pod(name, "inference")
    assert stuck.metadata.deletion_timestamp is not None
    v1.delete_namespaced_pod(name, "inference", grace_period_seconds=0)  # --force
    assert find(sim, "pods", name) is None


# --------------------------------------------------------------------------- evictions and PDBs


def test_evictions_respect_the_pdb_until_the_replacement_runs(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    policy = client.PolicyV1Api(kube(sim))
    first, second = (pod_on(sim, n)["metadata"]["name"] for n in NODES[:2])
    cordon(v1, NODES[0])
    cordon(v1, NODES[1])
    evict(v1, first)
    evicted = v1.read_namespaced_pod(first, "inference")
    target = next(c for c in evicted.status.conditions if c.type == "DisruptionTarget")
    assert (target.reason, target.message) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    pdb = policy.read_namespaced_pod_disruption_budget("infer", "inference")
    assert pdb.status.disruptions_allowed == 0 and first in pdb.status.disrupted_pods
    with pytest.raises(ApiException) as err:
        evict(v1, second)
    body = json.loads(err.value.body)
    assert err.value.status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget infer needs 2 healthy pods and has 2 currently",
        }
    ]
    # The replacement needs a node: Karpenter launches one, the pod runs, the budget allows.
    for _ in range(40):
        sim.advance(5)
        if policy.read_namespaced_pod_disruption_budget(
            "infer", "inference"
        ).status.disruptions_allowed:
            break
    replacement = [p for p in workload_pods(sim) if p["spec"].get("nodeName") not in NODES]
    assert len(replacement) == 1 and ready(replacement[0])
    evict(v1, second)


# --------------------------------------------------------------------------- Karpenter provisions


def test_karpenter_launches_a_node_for_pods_a_drain_left_pending(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    claims = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    cordon(v1, NODES[0])
    sim.advance(1)
    evict(v1, pod_on(sim, NODES[0])["metadata"]["name"])
    pending = next(p for p in workload_pods(sim) if not p["spec"].get("nodeName"))
    name = pending["metadata"]["name"]
    sim.advance(2)
    scheduler = events(sim, reason="FailedScheduling", name=name, component="default-scheduler")
    assert scheduler and scheduler[0]["message"].startswith("0/5 nodes are available: ")
    assert "1 node(s) were unschedulable" in scheduler[0]["message"]
    new = [c for c in sim.objects("nodeclaims") if c["metadata"]["name"] not in claims]
    assert len(new) == 1 and new[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
    sim.advance(20)  # the next batch sees the in-flight NodeClaim and nominates it
    nominated = events(sim, reason="Nominated", name=name)
    assert nominated and nominated[0]["message"] == (
        f"Pod should schedule on: nodeclaim/{new[0]['metadata']['name']}"
    )
    sim.advance(90)  # launched, registered, Ready 50 s after launch, containers started
    running = find(sim, "pods", name)
    assert running is not None and ready(running)
    assert (
        running["spec"]["nodeName"]
        == find(sim, "nodeclaims", new[0]["metadata"]["name"])["status"]["nodeName"]
    )


def test_nodepool_limits_keep_pods_pending(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim, extra='limits: {nvidia.com/gpu: "12"}')
    v1 = client.CoreV1Api(kube(sim))
    claims = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    cordon(v1, NODES[0])
    sim.advance(1)
    evict(v1, pod_on(sim, NODES[0])["metadata"]["name"])
    sim.advance(100)  # (2 minutes later the emptied node is consolidated, freeing the room)
    assert {c["metadata"]["name"] for c in sim.objects("nodeclaims")} == claims
    pending = [p for p in workload_pods(sim) if not p["spec"].get("nodeName")]
    assert len(pending) == 1
    karpenter = events(
        sim, reason="FailedScheduling", name=pending[0]["metadata"]["name"], component="karpenter"
    )
    assert karpenter[0]["message"] == (
        'Failed to schedule pod, all available instance types exceed limits for nodepool "gpu"'
    )


JUST_NODES = """
name: just-nodes
seed: 5
karpenter: {{version: 1.4.0, nodeRepair: false}}
nodePools:
  - name: gpu
    instanceType: g6.xlarge
    nodes: {nodes}
    existing: [{{count: {nodes}, age: 2d}}]
    consolidation: {consolidation}
    budgets: {budgets}
"""


def just_nodes(
    make_sim: Callable[..., SimCluster],
    nodes: int,
    consolidation: str = "{after: 1m}",
    budgets: str = "[]",
) -> SimCluster:
    text = JUST_NODES.format(nodes=nodes, consolidation=consolidation, budgets=budgets)
    return make_sim(parse_scenario(text, "just-nodes.yaml"))


def test_a_nodeclaim_with_only_daemonset_pods_is_not_replaced(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = just_nodes(make_sim, 2, consolidation="{after: Never}")
    co = client.CustomObjectsApi(kube(sim))
    claims = sorted(c["metadata"]["name"] for c in sim.objects("nodeclaims"))
    co.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claims[0])
    sim.advance(600)
    assert sorted(c["metadata"]["name"] for c in sim.objects("nodeclaims")) == claims[1:]


def test_a_nodeclaim_with_a_workload_pod_is_replaced(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    co = client.CustomObjectsApi(kube(sim))
    claims = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    claim = sorted(claims)[0]
    co.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim)
    sim.advance(600)
    after = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    assert claim not in after and len(after - claims) == 1
    assert all(ready(p) for p in workload_pods(sim))


# --------------------------------------------------------------------------- consolidation


@pytest.mark.parametrize(("budgets", "at_once"), [("[]", 1), ('[{nodes: "30%"}]', 3)])
def test_empty_nodes_are_consolidated_within_the_budget(
    make_sim: Callable[..., SimCluster], budgets: str, at_once: int
) -> None:
    # KC disruption/helpers.go BuildDisruptionBudgetMapping: ceil(10 nodes × 10 %) = 1 (the
    # default budget) or ceil(10 × 30 %) = 3 per command, less the nodes already disrupting.
    sim = just_nodes(make_sim, 10, budgets=budgets)
    sim.advance(300)
    terminating = events(sim, reason="DisruptionTerminating", kind="NodeClaim")
    assert terminating and {e["message"] for e in terminating} == {"Disrupting NodeClaim: Empty"}
    per_command = Counter(e["firstTimestamp"] for e in terminating)
    assert max(per_command.values()) == at_once
    assert len(sim.objects("nodeclaims")) < 10
    claim = find(sim, "nodeclaims", terminating[-1]["involvedObject"]["name"])
    if claim is not None:  # still finalizing
        assert condition(claim, "DisruptionReason")["reason"] == "Empty"  # type: ignore[index]


def test_a_zero_budget_or_never_keeps_empty_nodes(make_sim: Callable[..., SimCluster]) -> None:
    for sim in (
        just_nodes(make_sim, 3, budgets='[{nodes: "0"}]'),
        just_nodes(make_sim, 3, consolidation="{after: Never}"),
    ):
        sim.advance(600)
        assert len(sim.objects("nodeclaims")) == 3
        assert not events(sim, reason="DisruptionTerminating")


def test_consolidatable_follows_consolidate_after(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)  # consolidateAfter 2m; every node runs a pod it cannot shed
    sim.advance(1)
    claim = sim.objects("nodeclaims")[0]
    assert (condition(claim, "Consolidatable") or {}).get("status") == "True"
    assert claim["status"]["lastPodEventTime"]
    sim.advance(600)
    assert len(sim.objects("nodeclaims")) == 3  # full nodes are not consolidated


def test_an_underutilized_node_is_consolidated_when_its_pods_fit_elsewhere(
    make_sim: Callable[..., SimCluster],
) -> None:
    # 3 nodes × 4 GPUs, 6 pods of 1 GPU: two nodes hold them all
    sim = small(make_sim, per_node=2, per_pod=1)
    sim.advance(900)
    assert len(sim.objects("nodeclaims")) == 2
    terminating = events(sim, reason="DisruptionTerminating", kind="NodeClaim")
    assert [e["message"] for e in terminating] == ["Disrupting NodeClaim: Underutilized"]
    pods = workload_pods(sim)
    assert len(pods) == 6 and all(ready(p) for p in pods)


# --------------------------------------------------------------------------- kubelet heartbeats


def test_kubelets_renew_their_leases_and_report_status(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    coord = client.CoordinationV1Api(kube(sim))
    v1 = client.CoreV1Api(kube(sim))
    leases = {
        lease.metadata.name: lease for lease in coord.list_namespaced_lease("kube-node-lease").items
    }
    nodes = {n.metadata.name: n for n in v1.list_node().items}
    assert set(leases) == set(nodes)
    lease = leases[NODES[0]]
    assert lease.spec.holder_identity == NODES[0] and lease.spec.lease_duration_seconds == 40
    owner = lease.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid) == ("Node", NODES[0], nodes[NODES[0]].metadata.uid)
    renewed = lease.spec.renew_time
    # Simulated time only (make_sim's manual clock moves on sim.advance, never by itself), so
    # the figures are exact: its last 10 s renewal fell 5 s before now, well inside 40 s.
    assert (sim.now() - renewed).total_seconds() == 5
    sim.advance(10)
    again = coord.read_namespaced_lease(NODES[0], "kube-node-lease").spec.renew_time
    assert (again - renewed).total_seconds() == 10
    beat = {c.type: c.last_heartbeat_time for c in nodes[NODES[0]].status.conditions}["Ready"]
    # nodeStatusReportFrequency: a Node write at least every 5 minutes (simulated time)
    sim.advance(300)
    later = {c.type: c.last_heartbeat_time for c in v1.read_node(NODES[0]).status.conditions}
    assert (later["Ready"] - beat).total_seconds() == 300


@pytest.mark.parametrize(("k8s", "grace"), [("1.31", 40), ("1.32", 50)])
def test_a_node_goes_unknown_a_grace_period_after_its_last_renewal(
    make_sim: Callable[..., SimCluster], k8s: str, grace: int
) -> None:
    # kube-controller-manager --node-monitor-grace-period: 40 s, 50 s from 1.32 (#126287)
    sim = small(make_sim, k8s=k8s, timeline=STOP_AT_10S)
    coord = client.CoordinationV1Api(kube(sim))
    sim.advance(11)
    last = coord.read_namespaced_lease(NODES[0], "kube-node-lease").spec.renew_time
    sim.advance(60)
    assert coord.read_namespaced_lease(NODES[0], "kube-node-lease").spec.renew_time == last
    node = find(sim, "nodes", NODES[0])
    assert node is not None
    ready_cond = condition(node, "Ready")
    assert ready_cond is not None and ready_cond["status"] == "Unknown"
    assert parse(ready_cond["lastTransitionTime"]) == pytest.approx(last.timestamp() + grace, abs=1)
    taints = {(t["key"], t["effect"]) for t in node["spec"]["taints"]}
    assert {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    } <= taints
    not_ready = events(sim, reason="NodeNotReady", name=NODES[0], component="node-controller")
    assert not_ready and not_ready[0]["message"] == f"Node {NODES[0]} status is now: NodeNotReady"
    pod = pod_on(sim, NODES[0])
    assert condition(pod, "Ready")["status"] == "False"  # type: ignore[index]
    warned = events(sim, reason="NodeNotReady", kind="Pod", name=pod["metadata"]["name"])
    assert warned and (warned[0]["type"], warned[0]["message"]) == ("Warning", "Node is not ready")


def test_pods_of_an_unreachable_node_are_evicted_after_300s(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim, timeline=STOP_AT_10S)
    sim.advance(100)
    name = pod_on(sim, NODES[0])["metadata"]["name"]
    unknown = parse(condition(find(sim, "nodes", NODES[0]), "Ready")["lastTransitionTime"])  # type: ignore[arg-type,index]
    sim.advance(unknown + 290 - sim.now().timestamp())
    assert not find(sim, "pods", name)["metadata"].get("deletionTimestamp")  # type: ignore[index]
    sim.advance(20)  # DefaultTolerationSeconds: 300 s on node.kubernetes.io/unreachable
    pod = find(sim, "pods", name)
    assert pod is not None and pod["metadata"]["deletionTimestamp"]  # Terminating for good
    marked = events(sim, reason="TaintManagerEviction", name=name)
    assert marked[0]["message"] == f"Marking for deletion Pod inference/{name}"
    assert marked[0]["source"] == {"component": "taint-eviction-controller"}
    assert condition(pod, "DisruptionTarget")["reason"] == "DeletionByTaintManager"  # type: ignore[index]


def test_node_watches_outlive_the_lease_traffic(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    sim.store.max_history = 200  # a small watch cache, as on a busy control plane
    http = Http(sim)
    rv = http.get("/api/v1/nodes")[1]["metadata"]["resourceVersion"]
    sim.advance(600)  # 5 kubelets × 60 renewals: more Lease writes than the cache holds
    frames = http.watch(f"/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert frames and all(f["type"] != "ERROR" for f in frames)
    assert {f["object"]["kind"] for f in frames} == {"Node"}


# --------------------------------------------------------------------------- cordon


def test_cordon_taints_the_node_and_the_kubelet_reports_it(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    cordon(v1, NODES[1])
    sim.advance(1)  # the node lifecycle controller's TaintNodesByCondition
    taints = v1.read_node(NODES[1]).spec.taints
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in {(t.key, t.effect) for t in taints}
    sim.advance(10)  # the kubelet's next status sync
    assert [
        e["message"] for e in events(sim, reason="NodeNotSchedulable", component="kubelet")
    ] == [f"Node {NODES[1]} status is now: NodeNotSchedulable"]
    cordon(v1, NODES[1], on=False)
    sim.advance(11)
    assert "node.kubernetes.io/unschedulable" not in {
        t.key for t in v1.read_node(NODES[1]).spec.taints or []
    }
    assert events(sim, reason="NodeSchedulable", component="kubelet")


# --------------------------------------------------------------------------- Karpenter's own pods


def test_karpenter_is_rescheduled_off_a_deleted_node(make_sim: Callable[..., SimCluster]) -> None:
    sim = small(make_sim)
    v1 = client.CoreV1Api(kube(sim))
    karpenter = sorted(
        (
            p
            for p in v1.list_namespaced_pod("kube-system").items
            if p.metadata.name.startswith("karpenter-")
        ),
        key=lambda p: p.metadata.name,
    )
    assert len(karpenter) == 2 and len({p.spec.node_name for p in karpenter}) == 2
    gone = karpenter[0]
    v1.delete_node(gone.spec.node_name)
    sim.advance(30)
    assert find(sim, "pods", gone.metadata.name) is not None  # pod GC waits 40 s
    sim.advance(15)
    assert find(sim, "pods", gone.metadata.name) is None
    sim.advance(120)  # the node group's replacement instance registers and is Ready
    now = [p for p in sim.objects("pods") if p["metadata"]["name"].startswith("karpenter-")]
    assert len(now) == 2 and all(ready(p) for p in now)
    assert gone.spec.node_name not in {p["spec"]["nodeName"] for p in now}
    assert len({p["spec"]["nodeName"] for p in now}) == 2  # podAntiAffinity on hostname


def test_rolling_out_karpenter_leaves_a_revision_history(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = small(make_sim)
    apps = client.AppsV1Api(kube(sim))
    deploy = apps.read_namespaced_deployment("karpenter", "kube-system")
    env = deploy.spec.template.spec.containers[0].env
    gates = next(e.value for e in env if e.name == "FEATURE_GATES")
    # KA v1.4.0 chart: ReservedCapacity, SpotToSpotConsolidation, NodeRepair, all false here
    assert gates == "ReservedCapacity=false,SpotToSpotConsolidation=false,NodeRepair=false"
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
                                    "value": gates.replace("NodeRepair=false", "NodeRepair=true"),
                                }
                            ],
                        }
                    ]
                }
            }
        }
    }
    apps.patch_namespaced_deployment("karpenter", "kube-system", patch)
    sim.advance(60)
    sets = apps.list_namespaced_replica_set("kube-system").items
    karpenter = sorted(
        (rs for rs in sets if rs.metadata.name.startswith("karpenter-")),
        key=lambda rs: int(rs.metadata.annotations["deployment.kubernetes.io/revision"]),
    )
    assert [rs.metadata.annotations["deployment.kubernetes.io/revision"] for rs in karpenter] == [
        "1",
        "2",
    ]
    assert [rs.spec.replicas for rs in karpenter] == [0, 2]
    assert all(rs.metadata.owner_references[0].name == "karpenter" for rs in karpenter)
    scaled = [e["message"] for e in events(sim, reason="ScalingReplicaSet")]
    assert f"Scaled up replica set {karpenter[1].metadata.name} from 0 to 1" in scaled
    assert f"Scaled down replica set {karpenter[0].metadata.name} from 2 to 1" in scaled
    assert sim.loops.repair_enabled


# --------------------------------------------------------------------------- node lifecycle events


def test_node_lifecycle_events_come_for_managed_node_group_nodes_too(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim(load_scenario("mng-dcgm-repair-loop"))
    sim.advance(20 * 60)  # a replacement's whole story
    mng_nodes = {
        e["involvedObject"]["name"]
        for e in events(sim, reason="RegisteredNode", component="node-controller")
    }
    assert mng_nodes
    removed = {e["involvedObject"]["name"] for e in events(sim, reason="RemovingNode")}
    unknown = {
        e["involvedObject"]["name"]
        for e in events(sim, reason="NodeNotReady", component="node-controller")
    }
    assert removed and removed <= unknown
    for name in removed:
        assert events(sim, reason="RemovingNode", name=name)[0]["message"] == (
            f"Node {name} event: Removing Node {name} from Controller"
        )
