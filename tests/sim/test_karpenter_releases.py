"""The simulated Karpenter behaves like the release a scenario names.

Expected shapes are read from aws/karpenter-provider-aws (KA) and kubernetes-sigs/karpenter
(KC) at the tags named beside each test, and from awslabs/operatorpkg status/controller.go at
the commit KC v1.4.0's go.mod pins (b05af0f15c68).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from eventlog import condition, events, find, reasons
from kubernetes import client
from simhelpers import kube

from mignurse.sim import ScenarioError, SimCluster, load_scenario
from mignurse.sim.karpenter_objects import TERMINATION_TIMESTAMP
from mignurse.sim.karpenter_versions import chart_feature_gates, parse_version
from mignurse.sim.scenario import parse_scenario

ONE_NODE = """
name: one-node
seed: 7
karpenter: {{version: {version}, nodeRepair: true, interruptionQueue: {queue}}}
nodePools:
  - name: gpu
    instanceType: g6.xlarge
    capacityType: {capacity}
    nodes: 1
    existing:
      - {{count: 1, age: 2d, names: [ip-10-0-1-1.us-west-2.compute.internal]}}
    workload: {{name: infer, namespace: inference, podsPerNode: 1}}
timeline: {timeline}
"""
NODE = "ip-10-0-1-1.us-west-2.compute.internal"
DCGM_AT_30S = (
    "[{at: 30s, node: ip-10-0-1-1.us-west-2.compute.internal, condition: "
    '{type: AcceleratedHardwareReady, status: "False", reason: DCGMError, '
    'message: "failed to initialize DCGM: libdcgm.so not Found"}}]'
)


def one_node(
    make_sim: Callable[..., SimCluster],
    *,
    version: str = "1.4.0",
    queue: bool = True,
    capacity: str = "on-demand",
    timeline: str = DCGM_AT_30S,
) -> SimCluster:
    text = ONE_NODE.format(
        version=version, queue=str(queue).lower(), capacity=capacity, timeline=timeline
    )
    return make_sim(parse_scenario(text, "one-node.yaml"))


def claim_of(sim: SimCluster, node: str = NODE) -> str:
    return next(
        c["metadata"]["name"] for c in sim.objects("nodeclaims") if c["status"]["nodeName"] == node
    )


def repaired(sim: SimCluster) -> tuple[str, dict[str, object]]:
    """Run to the repair (10 min after the DCGMError at 30 s) and return the deleting claim."""
    claim = claim_of(sim)
    sim.advance(10 * 60 + 30)
    deleting = find(sim, "nodeclaims", claim)
    assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
    return claim, deleting


# --------------------------------------------------------------------------- the echo


def test_a_repair_is_echoed_as_instance_terminating_and_never_as_an_interruption(
    make_sim: Callable[..., SimCluster],
) -> None:
    # KA v1.4.0 pkg/controllers/interruption/controller.go: every state change publishes
    # InstanceTerminating; deleteNodeClaim returns early for a NodeClaim already deleting.
    sim = one_node(make_sim)
    claim, deleting = repaired(sim)
    deleted_at = deleting["metadata"]["deletionTimestamp"]
    sim.advance(120)
    assert find(sim, "nodeclaims", claim) is None and find(sim, "nodes", NODE) is None
    for kind, name in (("NodeClaim", claim), ("Node", NODE)):
        echo = events(sim, reason="InstanceTerminating", kind=kind, name=name)
        assert len(echo) == 1 and echo[0]["count"] == 1  # shutting-down and terminated, deduped
        assert (echo[0]["type"], echo[0]["message"]) == ("Warning", "Instance is terminating")
        assert echo[0]["source"] == {"component": "karpenter"}
        assert echo[0]["firstTimestamp"] > deleted_at  # after TerminateInstances, not before
    node_reasons = reasons(sim, kind="Node", name=NODE)
    assert node_reasons.index("FailedDraining") < node_reasons.index("InstanceTerminating")
    assert not events(sim, reason="TerminatingOnInterruption")
    assert not events(sim, reason="SpotInterrupted")


def test_without_an_interruption_queue_there_is_no_echo(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = one_node(make_sim, queue=False)
    repaired(sim)
    sim.advance(120)
    assert not events(sim, reason="InstanceTerminating")
    deploy = find(sim, "deployments", "karpenter")
    assert deploy is not None
    env = {e["name"] for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "INTERRUPTION_QUEUE" not in env


def test_the_queue_is_named_after_the_cluster(dcgm: SimCluster) -> None:
    # KA v1.4.0 getting-started step08: --set "settings.interruptionQueue=${CLUSTER_NAME}"
    deploy = find(dcgm, "deployments", "karpenter")
    assert deploy is not None
    env = {
        e["name"]: e.get("value")
        for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["INTERRUPTION_QUEUE"] == "ml-prod-usw2"


def test_a_spot_interruption_keeps_its_real_order(make_sim: Callable[..., SimCluster]) -> None:
    # KA v1.4.0 interruption controller.go handleNodeClaim: notify, then delete, then
    # TerminatingOnInterruption; the later state change is only an echo.
    timeline = "[{at: 30s, node: ip-10-0-1-1.us-west-2.compute.internal, spotInterrupt: true}]"
    sim = one_node(make_sim, capacity="spot", timeline=timeline)
    claim = claim_of(sim)
    sim.advance(180)
    order = [
        e["reason"]
        for e in events(sim, kind="NodeClaim", name=claim)
        if e["source"].get("component") == "karpenter" and e["type"] == "Warning"
    ]
    assert order == ["SpotInterrupted", "TerminatingOnInterruption", "InstanceTerminating"]
    evicted = events(sim, reason="Evicted")
    assert [e["message"] for e in evicted] == ["Evicted pod: Forceful Termination"]
    spot = events(sim, reason="SpotInterrupted", kind="Node")[0]
    echo = events(sim, reason="InstanceTerminating", kind="Node")[0]
    assert spot["firstTimestamp"] <= evicted[0]["firstTimestamp"] < echo["firstTimestamp"]
    terminating = events(sim, reason="TerminatingOnInterruption")
    assert {e["message"] for e in terminating} == {
        "Interruption triggered termination for the NodeClaim",
        "Interruption triggered termination for the Node",
    }


def test_without_a_queue_ec2_interrupts_and_the_cloud_controller_removes_the_node(
    make_sim: Callable[..., SimCluster],
) -> None:
    timeline = "[{at: 30s, node: ip-10-0-1-1.us-west-2.compute.internal, spotInterrupt: true}]"
    sim = one_node(make_sim, version="1.6.0", queue=False, capacity="spot", timeline=timeline)
    claim = claim_of(sim)
    sim.advance(300)
    assert not events(
        sim, component="karpenter", kind="NodeClaim", name=claim, reason="SpotInterrupted"
    )
    seen = [e["reason"] for e in events(sim, kind="Node", name=NODE)]
    tail = [r for r in seen if r in ("NodeNotReady", "DeletingNode", "RemovingNode")]
    assert tail == ["NodeNotReady", "DeletingNode", "RemovingNode"]
    deleting = events(sim, reason="DeletingNode")[0]
    assert deleting["source"] == {"component": "cloud-node-lifecycle-controller"}
    assert (
        deleting["message"]
        == f"Deleting node {NODE} because it does not exist in the cloud provider"
    )
    removing = events(sim, reason="RemovingNode")[0]
    assert removing["message"] == f"Node {NODE} event: Removing Node {NODE} from Controller"
    assert removing["source"] == {"component": "node-controller"}
    assert find(sim, "nodeclaims", claim) is None
    assert len(sim.objects("nodeclaims")) == 1  # the replacement


# --------------------------------------------------------------------------- termination events


def test_repair_writes_now_and_the_node_says_when_pods_go(
    make_sim: Callable[..., SimCluster],
) -> None:
    # KC v1.4.0 node/termination/controller.go nodeTerminationTime, terminator/events/events.go
    sim = one_node(make_sim)
    _, deleting = repaired(sim)
    when = deleting["metadata"]["annotations"][TERMINATION_TIMESTAMP]
    assert when == deleting["metadata"]["deletionTimestamp"]
    expiring = events(sim, reason="TerminationGracePeriodExpiring", kind="Node", name=NODE)
    assert [e["message"] for e in expiring] == [f"All pods will be deleted by {when}"]
    assert expiring[0]["type"] == "Warning"
    failed = events(sim, reason="FailedDraining", kind="Node", name=NODE)
    assert [e["message"] for e in failed] == [
        "Failed to drain node, 1 pods are waiting to be evicted"
    ]
    assert not events(sim, reason="TerminationGracePeriodExpiring", kind="NodeClaim")
    assert not events(sim, reason="DisruptionTerminating")


@pytest.mark.parametrize(
    ("version", "tgps"),
    [("1.4.0", r"0xc000[0-9a-f]{6}"), ("1.5.0", "30")],  # %v of a *int64 until KC v1.5.0
)
def test_disrupted_names_the_termination_time_like_go_prints_it(
    make_sim: Callable[..., SimCluster], version: str, tgps: str
) -> None:
    sim = one_node(make_sim, version=version)
    _, deleting = repaired(sim)
    when = deleting["metadata"]["annotations"][TERMINATION_TIMESTAMP]
    go_time = when.replace("T", " ").replace("Z", " +0000 UTC")
    disrupted = events(sim, reason="Disrupted")
    assert len(disrupted) == 1 and disrupted[0]["involvedObject"]["kind"] == "Pod"
    assert re.fullmatch(
        re.escape(f"Deleting the pod to accommodate the terminationTime {go_time} of the node. ")
        + re.escape("The pod was granted 0 seconds of grace-period of its ")
        + tgps
        + re.escape(
            " terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
            "do-not-disrupt annotation."
        ),
        disrupted[0]["message"],
    ), disrupted[0]["message"]


@pytest.mark.parametrize("version", ["1.5.0", "1.6.0"])
def test_drained_and_volumes_detached_exist_from_1_6(
    make_sim: Callable[..., SimCluster], version: str
) -> None:
    # KC pkg/apis/v1/nodeclaim_status.go: Drained and VolumesDetached appear in v1.6.0.
    sim = one_node(make_sim, version=version)
    claim, _ = repaired(sim)
    sim.advance(5)  # the pod is gone, the instance is shutting down
    obj = find(sim, "nodeclaims", claim)
    assert obj is not None
    assert condition(obj, "InstanceTerminating")["status"] == "True"  # type: ignore[index]
    drained = condition(obj, "Drained")
    transitions = [e["message"] for e in events(sim, kind="NodeClaim", name=claim)]
    if version == "1.5.0":
        assert drained is None and condition(obj, "VolumesDetached") is None
        assert not [m for m in transitions if "Type: Drained" in m]
    else:
        assert drained is not None and (drained["status"], drained["reason"]) == ("True", "Drained")
        assert condition(obj, "VolumesDetached")["status"] == "True"  # type: ignore[index]
        assert (
            "Status condition transitioned, Type: Drained, Status: Unknown -> True, Reason: Drained"
            in transitions
        )
    # operatorpkg: no event for a condition first seen already True
    assert not [
        m for m in transitions if "Type: InstanceTerminating" in m or "VolumesDetached" in m
    ]


@pytest.mark.parametrize(
    ("version", "reason", "message", "evicted"),
    [
        ("1.1.0", None, None, "Evicted pod"),
        ("1.2.0", "DisruptionReason", "Underutilized", "Evicted pod: Underutilized"),
        ("1.4.0", "Underutilized", "Underutilized", "Evicted pod: Underutilized"),
    ],
)
def test_consolidation_marks_the_nodeclaim_as_each_release_did(
    make_sim: Callable[..., SimCluster],
    version: str,
    reason: str | None,
    message: str | None,
    evicted: str,
) -> None:
    # KC controller.go SetTrueWithReason(DisruptionReason, …) at v1.2.0 and v1.3.1; the
    # condition type appears in v1.2.0; terminator/events/events.go EvictPod per tag.
    timeline = (
        "[{at: 30s, node: ip-10-0-1-1.us-west-2.compute.internal, consolidate: Underutilized}]"
    )
    sim = one_node(make_sim, version=version, timeline=timeline)
    claim = claim_of(sim)
    sim.advance(31)
    obj = find(sim, "nodeclaims", claim)
    assert obj is not None
    cond = condition(obj, "DisruptionReason")
    if reason is None:
        assert cond is None
    else:
        assert cond is not None and (cond["reason"], cond["message"]) == (reason, message)
    assert [e["message"] for e in events(sim, reason="Evicted")] == [evicted]
    assert [
        e["message"] for e in events(sim, reason="DisruptionTerminating", kind="NodeClaim")
    ] == ["Disrupting NodeClaim: Underutilized"]


def test_a_deleting_node_is_blocked_from_disruption(make_sim: Callable[..., SimCluster]) -> None:
    # KC v1.4.0 state/statenode.go ValidateNodeDisruptable, disruption/events/events.go Blocked
    sim = one_node(make_sim)
    claim, _ = repaired(sim)
    sim.advance(10)
    for kind, name in (("Node", NODE), ("NodeClaim", claim)):
        blocked = events(sim, reason="DisruptionBlocked", kind=kind, name=name)
        assert [e["message"] for e in blocked] == ["Node is deleting or marked for deletion"]
        assert blocked[0]["type"] == "Normal"


def test_status_transitions_are_reported_for_every_node_condition(dcgm: SimCluster) -> None:
    # KC v1.4.0 controllers.go: status.NewGenericObjectController[*corev1.Node]
    ready = events(dcgm, reason="Ready", kind="Node", component="karpenter")
    assert ready and all(
        e["message"] == "Status condition transitioned, Type: Ready, Status: False -> True, "
        "Reason: KubeletReady, Message: kubelet is posting ready status"
        for e in ready
    )


# --------------------------------------------------------------------------- repair by release


FIVE = """
name: five
seed: 3
karpenter: {{version: {version}, nodeRepair: true}}
nodePools:
  - name: gpu-small
    instanceType: g6.xlarge
    nodes: 5
    existing:
      - count: 5
        age: 5d
        names: [{names}]
    workload: {{name: infer, namespace: inference, podsPerNode: 1}}
timeline:
  - at: 30s
    node: ip-10-0-1-1.us-west-2.compute.internal
    condition: {{type: AcceleratedHardwareReady, status: "False", reason: NvidiaXID79Error}}
  - at: 30s
    node: ip-10-0-1-2.us-west-2.compute.internal
    condition: {{type: {second}, status: "False", reason: {reason}}}
"""
NAMES = [f"ip-10-0-1-{i}.us-west-2.compute.internal" for i in range(1, 6)]


def five(
    make_sim: Callable[..., SimCluster],
    version: str,
    second: str = "AcceleratedHardwareReady",
    reason: str = "DCGMError",
) -> SimCluster:
    text = FIVE.format(version=version, names=", ".join(NAMES), second=second, reason=reason)
    return make_sim(parse_scenario(text, "five.yaml"))


def blocked_nodes(sim: SimCluster) -> set[str]:
    return {e["involvedObject"]["name"] for e in events(sim, reason="NodeRepairBlocked")}


def test_through_1_5_the_guard_runs_first_and_flags_healthy_nodes(
    make_sim: Callable[..., SimCluster],
) -> None:
    # KC v1.4.0 health/controller.go: isNodePoolHealthy before findUnhealthyConditions; any
    # Node update reconciles (no predicate), kubelet writes each Node every 5 minutes.
    sim = five(make_sim, "1.4.0")
    sim.advance(6 * 60)
    assert blocked_nodes(sim) == set(NAMES)
    first = events(sim, reason="NodeRepairBlocked", name=NAMES[0])[0]
    assert first["message"] == "more than 20% nodes are unhealthy in the nodepool"
    assert first["type"] == "Warning" and first["source"] == {"component": "karpenter"}
    assert first["involvedObject"]["kind"] == "Node"
    assert not events(sim, reason="NodeRepairBlocked", kind="NodeClaim")
    assert not events(sim, reason="NodeRepairBlocked", kind="NodePool")


def test_from_1_7_only_nodes_past_their_toleration_are_blocked_and_requeued(
    make_sim: Callable[..., SimCluster],
) -> None:
    # KC v1.7.0 health/controller.go: toleration first, RequeueAfter 5 minutes when blocked.
    sim = five(make_sim, "1.7.0")
    sim.advance(6 * 60)
    assert not blocked_nodes(sim)
    sim.advance(5 * 60)  # 11 min: both AHR deadlines (10 min) have passed
    assert blocked_nodes(sim) == set(NAMES[:2])
    counts = {
        e["involvedObject"]["name"]: e["count"] for e in events(sim, reason="NodeRepairBlocked")
    }
    sim.advance(16 * 60)  # past the 15-minute dedupe: the requeue publishes again
    again = {
        e["involvedObject"]["name"]: e["count"] for e in events(sim, reason="NodeRepairBlocked")
    }
    assert all(again[n] > counts[n] for n in counts)
    assert not [c for c in sim.objects("nodeclaims") if c["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize(
    ("version", "word"),
    [("1.2.5", "then"), ("1.3.0", "than")],  # typo fixed in KC v1.3.0
)
def test_the_blocked_message_follows_the_release(
    make_sim: Callable[..., SimCluster], version: str, word: str
) -> None:
    sim = five(make_sim, version)
    sim.advance(60)
    assert {e["message"] for e in events(sim, reason="NodeRepairBlocked")} == {
        f"more {word} 20% nodes are unhealthy in the nodepool"
    }


def test_1_1_repairs_ready_false_only(make_sim: Callable[..., SimCluster]) -> None:
    # KA v1.1.0 cloudprovider.go RepairPolicies: Ready=False 30m; v1.2.0 adds the NMA types.
    sim = five(make_sim, "1.1.0", second="Ready", reason="KubeletNotReady")
    sim.advance(11 * 60)
    assert not [c for c in sim.objects("nodeclaims") if c["metadata"].get("deletionTimestamp")]
    assert not events(sim, reason="NodeRepairBlocked")  # AHR False is no policy: one unhealthy
    sim.advance(21 * 60)  # 32 min: 30 min after Ready=False, plus the termination
    left = {n["metadata"]["name"] for n in sim.objects("nodes")}
    assert NAMES[1] not in left and NAMES[0] in left  # Ready=False repaired, AHR left alone


# --------------------------------------------------------------------------- chart and scenario


@pytest.mark.parametrize(
    ("version", "rendered"),
    [
        ("1.1.0", "SpotToSpotConsolidation=false,NodeRepair=true"),
        ("1.4.0", "ReservedCapacity=false,SpotToSpotConsolidation=false,NodeRepair=true"),
        ("1.6.0", "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true"),
        (
            "1.7.0",
            "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,NodeOverlay=false",
        ),
        (
            "1.14.1",
            "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,"
            "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
        ),
    ],
)
def test_feature_gates_as_each_chart_renders_them(version: str, rendered: str) -> None:
    # KA charts/karpenter/templates/deployment.yaml and values.yaml at each tag
    assert chart_feature_gates(parse_version(version), node_repair=True) == rendered


def test_the_deployment_carries_its_releases_gates(dcgm: SimCluster) -> None:
    apps = client.AppsV1Api(kube(dcgm))
    deploy = apps.read_namespaced_deployment("karpenter", "kube-system")
    env = {e.name: e.value for e in deploy.spec.template.spec.containers[0].env}
    assert (
        env["FEATURE_GATES"]
        == "ReservedCapacity=false,SpotToSpotConsolidation=false,NodeRepair=true"
    )
    assert deploy.metadata.labels["app.kubernetes.io/version"] == "1.4.0"


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        ("0.37.0", "outside the releases read"),
        ("1.15.0", "outside the releases read"),
        ("1.8.0", "model 1.8.1 instead"),
        ("latest", "not a release like 1.4.0"),
    ],
)
def test_a_release_the_simulator_cannot_model_is_refused_with_its_line(
    tmp_path: Path, version: str, fragment: str
) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(f"name: v\nkarpenter:\n  version: {version}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    assert str(err.value).startswith(f"{path}:3: ") and fragment in str(err.value)


def test_every_shipped_scenario_names_the_release_it_models() -> None:
    from mignurse.sim import list_scenarios

    for name, _ in list_scenarios():
        scenario = load_scenario(name)
        if any(p.kind == "nodepool" for p in scenario.pools):
            assert scenario.karpenter is not None
            parse_version(scenario.karpenter.version)


def test_events_list_like_kubectl_with_field_selectors(dcgm: SimCluster) -> None:
    dcgm.advance(6 * 60)  # the cycling node is repaired and terminated
    v1 = client.CoreV1Api(kube(dcgm))
    echo = v1.list_event_for_all_namespaces(
        field_selector="reason=InstanceTerminating,involvedObject.kind=Node"
    ).items
    assert echo and all(e.source.component == "karpenter" for e in echo)
    evicted_or_disrupted = v1.list_namespaced_event(
        "inference", field_selector="involvedObject.kind=Pod"
    ).items
    assert {e.reason for e in evicted_or_disrupted} >= {"Disrupted"}
    warnings = v1.list_event_for_all_namespaces(field_selector="type=Warning").items
    assert {"InstanceTerminating", "FailedDraining", "TerminationGracePeriodExpiring"} <= {
        e.reason for e in warnings
    }
