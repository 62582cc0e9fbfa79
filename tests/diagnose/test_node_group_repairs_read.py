"""Nodes a managed node group replaced, read back from the events they left: which failing
condition the cordon answered, which group they were in, which gone nodes were not the
group's doing, and the window the repairs count in.

The event shapes: the kubelet's NodeNotSchedulable on its Node when cordoned
(kubernetes/kubernetes v1.33 pkg/kubelet/kubelet_node_status.go), the node controller's
RegisteredNode, NodeNotReady and RemovingNode (pkg/controller/util/node/controller_utils.go),
Karpenter's condition transitions on Nodes (awslabs/operatorpkg status/controller.go) and its
termination events (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/node/termination:
"Finalized karpenter.sh/termination"; pkg/controllers/disruption/events/events.go
DisruptionTerminating). MNG cordons about a minute after the failing check and replaces an
AcceleratedHardwareReady failure after 10 min by default (docs.aws.amazon.com/eks/latest/
userguide/node-repair.html).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from mignurse.cluster.history import Lifecycle
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput, History
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.model import Condition, Event, Node

from .test_rule_boundaries import (
    AHR,
    GROUP,
    NOW,
    SECOND,
    _ago,
    cluster,
    event,
    gpu_node,
    repair_loops,
    transition_event,
)

OTHER_GROUP = "gpu-h100"
# The limits as the rule's docstrings state them, written out here so a limit that moves in
# the code fails its test.
CORDON_AFTER_CHECK = timedelta(minutes=5)  # the failing check this long before the cordon
CORDON_SLACK = timedelta(seconds=10)  # and a check stamped this much after it
REPLACEMENT_WINDOW = timedelta(hours=6)  # repairs older than this no longer count
DCGM = (AHR, "False", "DCGMError")
LIVE = "ip-10-3-40-17.us-west-2.compute.internal"


def group_node(
    name: str, *conditions: Condition, group: str = GROUP, cordoned: bool = False
) -> Node:
    return replace(
        gpu_node(name, *conditions),
        pool=group,
        pool_kind="nodegroup",
        labels={"eks.amazonaws.com/nodegroup": group, "nvidia.com/gpu.present": "true"},
        unschedulable=cordoned,
    )


def failing(reason: str = "DCGMError", since: datetime | None = None) -> Condition:
    return Condition(AHR, "False", reason, "GPU health check failed", since or _ago(6))


def gone(
    name: str,
    cordoned: datetime,
    *,
    failed_before: timedelta | None = timedelta(minutes=1),
    condition: tuple[str, str, str] = DCGM,
    down_after: timedelta | None = timedelta(minutes=10),
) -> list[Event]:
    """The events a node replaced by its group leaves: registered, its condition's transition
    `failed_before` the cordon (none when None), the cordon, NotReady `down_after` it and the
    Node's removal 30 s later (neither when None)."""
    type_, status, reason = condition
    said = f"Node {name} status is now: "
    events = [
        event(
            "Node",
            name,
            "RegisteredNode",
            f"Node {name} event: Registered Node {name} in Controller",
            cordoned - timedelta(minutes=40),
            source="node-controller",
        ),
        event(
            "Node",
            name,
            "NodeNotSchedulable",
            said + "NodeNotSchedulable",
            cordoned,
            source="kubelet",
        ),
    ]
    if failed_before is not None:
        events.append(
            transition_event("Node", name, type_, "True", status, reason, cordoned - failed_before)
        )
    if down_after is not None:
        events += [
            event(
                "Node",
                name,
                "NodeNotReady",
                said + "NodeNotReady",
                cordoned + down_after,
                source="node-controller",
            ),
            event(
                "Node",
                name,
                "RemovingNode",
                f"Node {name} event: Removing Node {name} from Controller",
                cordoned + down_after + timedelta(seconds=30),
                source="node-controller",
            ),
        ]
    return events


def replaced(i: int) -> str:
    return f"ip-10-3-12{i}-9.us-west-2.compute.internal"


def two_replaced(**how: object) -> list[Event]:
    """Two nodes of the group replaced 2 h and 3 h ago, each told as `gone` with `how`."""
    return [
        *gone(replaced(0), _ago(180), **how),  # type: ignore[arg-type]
        *gone(replaced(1), _ago(120), **how),  # type: ignore[arg-type]
    ]


def with_groups(inp: DiagnosisInput, **config: object) -> DiagnosisInput:
    described = {"nodegroup": {"nodegroupName": GROUP, "nodeRepairConfig": config}}
    return replace(inp, nodegroups={GROUP: NodeGroupRepair.from_describe(described)})


def group_loops(inp: DiagnosisInput) -> list[Finding]:
    return [f for f in repair_loops(inp) if "managed node group" in f.summary]


# -- which failing condition the cordon answered ------------------------------------------------


@pytest.mark.parametrize(
    "before",
    [CORDON_AFTER_CHECK, timedelta(minutes=1), -CORDON_SLACK],
    ids=["five-minutes-before", "a-minute-before", "stamped-ten-seconds-after"],
)
def test_a_failure_up_to_five_minutes_before_the_cordon_is_what_the_group_repaired(
    before: timedelta,
) -> None:
    inp = cluster([group_node(LIVE, failing())], [], two_replaced(failed_before=before))
    (loop,) = group_loops(inp)
    assert loop.summary.startswith(
        "A managed node group: 2 nodes replaced by EKS managed node group auto repair for "
        "AcceleratedHardwareReady=False (DCGMError)"
    )
    assert "inferred" not in "\n".join(e.text for e in loop.evidence)


@pytest.mark.parametrize(
    "before",
    [CORDON_AFTER_CHECK + SECOND, -CORDON_SLACK - SECOND, timedelta(hours=2)],
    ids=["just-over-five-minutes-before", "eleven-seconds-after", "hours-before"],
)
def test_a_failure_outside_the_cordons_reach_tells_nothing(before: timedelta) -> None:
    # Without a cordoned failing node to infer from, nothing says the group did it.
    inp = cluster([group_node(LIVE, failing())], [], two_replaced(failed_before=before))
    assert group_loops(inp) == []


def test_the_latest_failure_before_the_cordon_is_the_one_it_answered() -> None:
    events = []
    for i, cordoned in enumerate((_ago(180), _ago(120))):
        events += gone(replaced(i), cordoned, condition=("Ready", "False", "KubeletNotReady"))
        events.append(
            transition_event(
                "Node", replaced(i), AHR, "True", "False", "DCGMError", cordoned - 4 * 60 * SECOND
            )
        )
    (loop,) = group_loops(cluster([group_node(LIVE, failing())], [], events))
    assert "for Ready=False (KubeletNotReady)" in loop.summary


def test_a_replaced_nodes_evidence_leads_with_its_story_then_the_events() -> None:
    events = two_replaced()
    (loop,) = group_loops(cluster([group_node(LIVE, failing())], [], events))
    first = [e.text for e in loop.evidence[:5]]
    assert first[0].startswith(f"Node {replaced(0)} is gone: registered ")
    assert first[0].endswith(
        "(lived about 50m) → managed node group repair of AcceleratedHardwareReady=False "
        "(DCGMError)"
    )
    reasons = [
        "Type: AcceleratedHardwareReady",
        "NodeNotSchedulable",
        "NodeNotReady",
        "RemovingNode",
    ]
    assert [r in text for r, text in zip(reasons, first[1:], strict=True)] == [True] * 4
    assert not any("RegisteredNode" in text for text in first)


def test_events_that_carry_only_their_last_time_still_tell_the_repair() -> None:
    # Events as some API servers return them: firstTimestamp null, lastTimestamp set.
    events = [replace(e, first_seen=None) for e in two_replaced()]
    (loop,) = group_loops(cluster([group_node(LIVE, failing())], [], events))
    assert "2 nodes replaced" in loop.summary
    assert f"cordoned {_ago(120).strftime('%Y-%m-%dT%H:%M:%SZ')}" in "\n".join(
        e.text for e in loop.evidence
    )


def test_a_node_down_in_the_same_second_as_its_cordon_ended_then() -> None:
    (loop,) = group_loops(
        cluster([group_node(LIVE, failing())], [], two_replaced(down_after=timedelta(0)))
    )
    stamp = _ago(120).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"NotReady/deleted from {stamp}" in "\n".join(e.text for e in loop.evidence)


def test_a_gone_node_whose_end_left_no_event_is_not_counted() -> None:
    inp = cluster([group_node(LIVE, failing())], [], two_replaced(down_after=None))
    assert group_loops(inp) == []


# -- which group -------------------------------------------------------------------------------


def test_a_repair_is_the_groups_whose_cordoned_nodes_fail_the_same_way() -> None:
    live = [
        group_node(LIVE, failing(), cordoned=True),
        group_node(
            "ip-10-3-77-1.us-west-2.compute.internal",
            failing("NvidiaXID79Error"),
            group=OTHER_GROUP,
            cordoned=True,
        ),
    ]
    (loop,) = group_loops(cluster(live, [], two_replaced()))
    assert loop.summary.startswith(f"Node group {GROUP}: 2 nodes replaced")


def test_a_cordoned_karpenter_node_failing_alike_does_not_blur_the_group() -> None:
    karpenter_node = replace(
        gpu_node("ip-10-0-70-1.us-west-2.compute.internal", failing()), unschedulable=True
    )
    live = [group_node(LIVE, failing(), cordoned=True), karpenter_node]
    (loop,) = group_loops(cluster(live, [], two_replaced()))
    assert loop.summary.startswith(f"Node group {GROUP}: 2 nodes replaced")
    assert "ip-10-0-70-1.us-west-2.compute.internal" not in loop.nodes


def node_seen(name: str, pool: str) -> Lifecycle:
    """A Node the local history saw in `pool` before it was deleted."""
    return Lifecycle(
        context="arn:aws:eks:us-west-2:111122223333:cluster/ml-prod",
        kind="Node",
        name=name,
        uid=f"uid-{name}",
        pool=pool,
        instance_type="g6e.12xlarge",
        instance_id="i-0c1d2e3f4a5b6c7d8",
        image_id="",
        node_name="",
        nodeclaim="",
        created=_ago(230),
        first_seen=_ago(230),
        first_ready=_ago(228),
        last_seen=_ago(100),
        deleting_since=None,
        termination_timestamp=None,
        disruption_reason=None,
        drifted=False,
        deleted_at=_ago(100),
        deleted_seen="watch",
        last_unhealthy=DCGM,
    )


def test_the_history_names_the_group_the_events_cannot() -> None:
    inp = cluster([group_node(LIVE, failing())], [], two_replaced())
    inp = replace(
        inp,
        history=History(lifecycles=(node_seen(replaced(0), GROUP), node_seen(replaced(1), GROUP))),
    )
    (loop,) = group_loops(inp)
    assert loop.summary.startswith(f"Node group {GROUP}: 2 nodes replaced")


# -- inferred from the repair wait when no transition is left ----------------------------------


def inferred(*live: Node) -> DiagnosisInput:
    """Two nodes cordoned and NotReady 10 min later, no transition left; `live` now."""
    return cluster(list(live), [], two_replaced(failed_before=None))


def test_the_earliest_failing_condition_of_a_cordoned_node_is_its_groups_repair() -> None:
    later = Condition("NetworkingReady", "False", "InterfaceNotUp", "eth1 is down", _ago(1))
    timeless = Condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting", None)
    for conditions in [(later, failing()), (timeless, failing())]:
        (loop,) = group_loops(inferred(group_node(LIVE, *conditions, cordoned=True)))
        assert (
            "2 nodes replaced" in loop.summary and "AcceleratedHardwareReady=False" in loop.summary
        )


def test_a_cordoned_healthy_node_of_a_rolling_update_is_no_sign_of_repair() -> None:
    update = group_node("ip-10-3-99-4.us-west-2.compute.internal", cordoned=True)
    (loop,) = group_loops(inferred(group_node(LIVE, failing(), cordoned=True), update))
    assert "2 nodes replaced" in loop.summary and update.name not in loop.nodes


def test_a_group_that_takes_no_action_for_the_failure_did_not_replace_the_nodes() -> None:
    noop = {
        "nodeMonitoringCondition": AHR,
        "nodeUnhealthyReason": "DCGMError",
        "minRepairWaitTimeMins": 10,
        "repairAction": "NoAction",
    }
    inp = with_groups(
        inferred(group_node(LIVE, failing(), cordoned=True)),
        enabled=True,
        nodeRepairConfigOverrides=[noop],
    )
    assert group_loops(inp) == []


# -- whose nodes, and when ------------------------------------------------------------------


def test_a_node_the_group_is_repairing_now_is_not_yet_a_replaced_node() -> None:
    # Still listed: cordoned and NotReady (a reboot, or the replace under way).
    live = group_node(LIVE, failing(since=_ago(12)), cordoned=True)
    events = gone(replaced(0), _ago(180)) + gone(LIVE, _ago(11), down_after=timedelta(minutes=10))
    (loop,) = group_loops(cluster([live], [], events))
    assert loop.summary.startswith(f"Node group {GROUP}: 1 node replaced")


@pytest.mark.parametrize(
    "karpenter",
    [
        ("DisruptionTerminating", "Disrupting Node: Unhealthy/Delete"),
        ("Finalized", "Finalized karpenter.sh/termination"),
    ],
    ids=["disruption", "termination-finalizer"],
)
def test_a_node_karpenter_terminated_is_not_a_group_repair(karpenter: tuple[str, str]) -> None:
    reason, message = karpenter
    terminated = "ip-10-0-61-3.us-west-2.compute.internal"
    events = [
        *gone(replaced(0), _ago(180)),
        *gone(terminated, _ago(120)),
        event("Node", terminated, reason, message, _ago(109)),
    ]
    assert group_loops(cluster([group_node(LIVE, failing())], [], events)) == []


def test_nodes_of_a_cluster_without_managed_node_groups_are_never_a_groups_repairs() -> None:
    self_managed = replace(gpu_node(LIVE, failing()), pool="", pool_kind="", labels={})
    assert group_loops(cluster([self_managed], [], two_replaced())) == []


def test_a_group_with_no_node_left_still_shows_its_repairs() -> None:
    inp = with_groups(cluster([], [], two_replaced()), enabled=True)
    (loop,) = group_loops(inp)
    assert "2 nodes replaced" in loop.summary


def test_repairs_count_back_to_the_edge_of_the_window_and_no_further() -> None:
    edge = NOW - REPLACEMENT_WINDOW
    down = timedelta(minutes=10)
    events = [
        *gone(replaced(0), edge - down - SECOND),
        *gone(replaced(1), edge - down),
        *gone(replaced(2), _ago(60)),
    ]
    (loop,) = group_loops(cluster([group_node(LIVE, failing())], [], events))
    assert "2 nodes replaced" in loop.summary
    assert replaced(0) not in loop.nodes


def test_the_replaced_nodes_are_listed_oldest_first() -> None:
    events = [*gone(replaced(1), _ago(180)), *gone(replaced(0), _ago(120))]
    (loop,) = group_loops(cluster([group_node(LIVE, failing())], [], events))
    assert loop.nodes == (LIVE, replaced(1), replaced(0))
