"""NodeClaims the API server no longer lists, read back from the events they left: when each
began terminating, which gone Node was it, and why it ended (docs/repair.md, "Telling
replacement causes apart").

The event shapes are Karpenter's: "Status condition transitioned, Type: …" for every condition
change (kubernetes-sigs/karpenter v1.6.0 pkg/controllers/controllers.go, awslabs/operatorpkg
status/controller.go), Drained and VolumesDetached on a terminating NodeClaim (kubernetes-sigs/
karpenter v1.6.0 pkg/controllers/node/termination/controller.go), TerminationGracePeriodExpiring
"All pods will be deleted by <time>" (pkg/controllers/node/termination/terminator/events/
events.go), DisruptionTerminating (pkg/controllers/disruption/events/events.go), NodeRepairBlocked
(pkg/controllers/node/health/events.go); the interruption controller's (aws/karpenter-provider-aws
v1.6.0 pkg/controllers/interruption/events/events.go); the node lifecycle controller's
RegisteredNode "Registered Node <name> in Controller" (kubernetes/kubernetes v1.33
pkg/controller/nodelifecycle/node_lifecycle_controller.go).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mignurse.cluster.history import Lifecycle
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.replacements import Replacement, replacements
from mignurse.model import Event, NodeClaim, NodePool, format_time

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
POOL = "gpu-training"
CLAIM = "gpu-training-x7k2p"
NODE = "ip-10-0-12-34.us-west-2.compute.internal"
OTHER_NODE = "ip-10-0-40-7.us-west-2.compute.internal"
AHR = "AcceleratedHardwareReady"
AHR_TOLERATION = timedelta(minutes=10)  # docs/repair.md: AcceleratedHardwareReady=False, 10 min
SLACK = timedelta(minutes=2)  # a repair deadline and the claim's first termination sign
SECOND = timedelta(seconds=1)
BLOCKED = "more than 20% nodes are unhealthy in the nodepool"


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    when: datetime | None,
    *,
    last: datetime | None = None,
    count: int = 1,
    type_: str = "Normal",
    source: str = "karpenter",
    uid: str = "",
) -> Event:
    stamp = f"{when.timestamp():.0f}" if when else "none"
    return Event(
        namespace="default",
        name=f"{name}.{reason.lower()}.{stamp}",
        uid=uid or f"uid-{name}-{reason}-{stamp}-{len(message)}",
        involved_kind=kind,
        involved_name=name,
        involved_uid=f"uid-{name}",
        reason=reason,
        message=message,
        type=type_,
        source=source,
        host="",
        first_seen=when,
        last_seen=last or when,
        count=count,
    )


def transition(
    kind: str, name: str, type_: str, old: str, new: str, reason: str, when: datetime | None
) -> Event:
    """Karpenter's echo of a condition change; its reason is the condition type."""
    return event(
        kind,
        name,
        type_,
        f"Status condition transitioned, Type: {type_}, Status: {old} -> {new}, Reason: {reason}",
        when,
    )


def launched_and_registered(claim: str, node: str, when: datetime) -> list[Event]:
    """A NodeClaim's launch and registration, and its Node's, a few seconds apart."""
    return [
        transition("NodeClaim", claim, "Launched", "Unknown", "True", "Launched", when),
        transition(
            "NodeClaim", claim, "Registered", "Unknown", "True", "Registered", when + 40 * SECOND
        ),
        event(
            "Node",
            node,
            "RegisteredNode",
            f"Registered Node {node} in Controller",
            when + 45 * SECOND,
            source="node-controller",
        ),
    ]


def dcgm_error(node: str, when: datetime | None) -> Event:
    return transition("Node", node, AHR, "True", "False", "DCGMError", when)


def drained(claim: str, when: datetime) -> Event:
    return transition("NodeClaim", claim, "Drained", "Unknown", "True", "Drained", when)


def cluster(
    events: list[Event],
    *,
    listed: tuple[NodeClaim, ...] = (),
    pools: tuple[NodePool, ...] = (NodePool(name=POOL, expire_after="720h"),),
    karpenter: str = "",
    history: History | None = None,
) -> DiagnosisInput:
    """What the API server shows: the events, and the NodeClaim list (`listed`)."""
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={},
            nodeclaims={c.name: c for c in listed},
            nodepools={p.name: p for p in pools},
            events=tuple(events),
            karpenter=True,
            taken_at=NOW,
        ),
        now=NOW,
        history=history or History(),
        karpenter=KarpenterSettings(
            node_repair=True, feature_gates="NodeRepair=true", version=karpenter
        )
        if karpenter
        else None,
    )


# Another NodeClaim of the pool, alive: the list was read, and CLAIM is not in it.
LIVE = NodeClaim(name="gpu-training-q4m8z", pool=POOL, node_name=OTHER_NODE, created=ago(600))


def gone(inp: DiagnosisInput, claim: str = CLAIM) -> Replacement | None:
    found = [r for r in replacements(inp) if r.claim == claim]
    assert len(found) <= 1
    return found[0] if found else None


def texts(rep: Replacement) -> str:
    return "\n".join(e.text for e in rep.evidence)


# -- which gone Node was it ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "paired"),
    [
        (-SLACK, True),
        (timedelta(0), True),
        (SLACK, True),
        (-SLACK - SECOND, False),
        (SLACK + SECOND, False),
    ],
)
def test_a_gone_claim_pairs_with_the_node_unhealthy_for_exactly_its_repair_toleration(
    offset: timedelta, paired: bool
) -> None:
    # Nothing but the timing ties them: the claim's launch events expired, the node was
    # AcceleratedHardwareReady=False 10 min before the claim drained.
    since = ago(40)
    inp = cluster([dcgm_error(NODE, since), drained(CLAIM, since + AHR_TOLERATION + offset)])
    rep = gone(inp)
    assert rep is not None
    assert rep.ended == since + AHR_TOLERATION + offset
    if paired:
        assert (rep.node, rep.cause) == (NODE, "repair")
        assert rep.unhealthy == (AHR, "False", "DCGMError") and rep.unhealthy_since == since
    else:
        assert (rep.node, rep.cause) == ("", "unknown")


def test_karpenter_1_1_does_not_pair_a_gone_claim_by_a_hardware_condition_it_never_repairs() -> (
    None
):
    # v1.1 repaired only Ready=False (docs/repair.md): an AcceleratedHardwareReady=False node
    # 10 min before the claim drained is a coincidence there, not its repair.
    since = ago(40)
    inp = cluster(
        [dcgm_error(NODE, since), drained(CLAIM, since + AHR_TOLERATION)], karpenter="1.1.0"
    )
    rep = gone(inp)
    assert rep is not None
    assert (rep.node, rep.cause) == ("", "unknown")


def test_two_gone_claims_registered_together_never_share_one_gone_node() -> None:
    first, second = "gpu-training-a1b2c", "gpu-training-z9y8x"
    events = [
        *launched_and_registered(first, NODE, ago(120)),
        transition(
            "NodeClaim",
            second,
            "Registered",
            "Unknown",
            "True",
            "Registered",
            ago(120) + 70 * SECOND,
        ),
        drained(first, ago(20)),
        drained(second, ago(19)),
    ]
    by_claim = {r.claim: r for r in replacements(cluster(events))}
    assert by_claim[first].node == NODE
    assert by_claim[second].node == ""


def test_a_disruption_note_every_node_gets_at_once_does_not_pair_a_claim_with_the_wrong_node() -> (
    None
):
    # Karpenter's disruption pass tells every candidate the same DisruptionBlocked note in the
    # same second; only the registration time says which gone Node was this claim.
    note = "Node is nominated for a pending pod"
    registered = ago(300)
    events = [
        *launched_and_registered(CLAIM, OTHER_NODE, registered),
        event("Node", NODE, "RegisteredNode", f"Registered Node {NODE} in Controller", ago(900)),
        event("NodeClaim", CLAIM, "DisruptionBlocked", note, ago(30)),
        event("Node", NODE, "DisruptionBlocked", note, ago(30)),
        event("Node", OTHER_NODE, "DisruptionBlocked", note, ago(30)),
        drained(CLAIM, ago(10)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.node == OTHER_NODE


def test_the_same_repair_block_told_to_a_claim_and_its_node_pairs_them() -> None:
    # Karpenter tells the Node and its NodeClaim NodeRepairBlocked together; its own launch
    # events expired long ago.
    events = [
        event("Node", OTHER_NODE, "RegisteredNode", f"Registered Node {OTHER_NODE}", ago(50)),
        event("NodeClaim", CLAIM, "NodeRepairBlocked", BLOCKED, ago(25), type_="Warning"),
        event("Node", NODE, "NodeRepairBlocked", BLOCKED, ago(25) + 3 * SECOND, type_="Warning"),
        dcgm_error(NODE, ago(40)),
        drained(CLAIM, ago(5)),
    ]
    rep = gone(cluster(events))
    assert rep is not None
    assert (rep.node, rep.cause) == (NODE, "repair")


def test_the_same_unhealthy_flip_told_to_a_claim_and_its_node_at_once_pairs_them() -> None:
    # Both flipped AcceleratedHardwareReady at the same moment; nothing else ties them (the
    # drain came long after the repair deadline, the launch events expired).
    flipped = ago(60)
    events = [
        transition("NodeClaim", CLAIM, AHR, "True", "False", "DCGMError", flipped),
        dcgm_error(NODE, flipped + 3 * SECOND),
        event("Node", OTHER_NODE, "RegisteredNode", f"Registered Node {OTHER_NODE}", ago(50)),
        drained(CLAIM, ago(5)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.node == NODE


def test_a_gone_claim_pairs_with_a_node_notready_its_whole_toleration_less_the_slack() -> None:
    # Ready=False waits 30 min, the longest toleration: the drain 1 min short of 31 min after
    # the flip is within the slack of the repair deadline.
    flipped = ago(40)
    events = [
        transition("Node", NODE, "Ready", "True", "False", "KubeletNotReady", flipped),
        drained(CLAIM, flipped + timedelta(minutes=31)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and (rep.node, rep.cause) == (NODE, "repair")


def test_a_gone_claim_pairs_with_the_gone_node_registered_nearest_among_many() -> None:
    registered = ago(300)
    others = [f"ip-10-0-9-{k}.us-west-2.compute.internal" for k in range(8)]
    events = [
        *launched_and_registered(CLAIM, NODE, registered),
        *(
            event("Node", name, "RegisteredNode", f"Registered Node {name}", ago(400 - 11 * k))
            for k, name in enumerate(others)
        ),
        *(
            event("Node", name, "RegisteredNode", f"Registered Node {name}", ago(290 - 3 * k))
            for k, name in enumerate(others[:4])
        ),
        drained(CLAIM, ago(5)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.node == NODE


def test_a_node_the_history_still_watches_alive_is_no_gone_claims_node() -> None:
    alive = Lifecycle(
        context="ml-prod",
        kind="Node",
        name=NODE,
        uid=f"uid-{NODE}",
        pool=POOL,
        instance_type="p5.48xlarge",
        instance_id="i-0a1b2c3d4e5f60718",
        image_id="",
        node_name="",
        nodeclaim="gpu-training-q4m8z",
        created=ago(300),
        first_seen=ago(300),
        first_ready=ago(298),
        last_seen=NOW,
        deleting_since=None,
        termination_timestamp=None,
        disruption_reason=None,
        drifted=False,
        deleted_at=None,
        deleted_seen=None,
        last_unhealthy=None,
    )
    events = [*launched_and_registered(CLAIM, NODE, ago(300)), drained(CLAIM, ago(10))]
    rep = gone(cluster(events, history=History(lifecycles=(alive,))))
    assert rep is not None and rep.node == ""


# -- when it began terminating --------------------------------------------------------------


def test_a_claim_absent_from_the_list_after_its_repair_deadline_ended_at_the_deadline() -> None:
    # The claim's Launched and Registered events remain; its termination left none.
    since = ago(15)
    events = [*launched_and_registered(CLAIM, NODE, ago(300)), dcgm_error(NODE, since)]
    rep = gone(cluster(events, listed=(LIVE,)))
    assert rep is not None
    assert (rep.node, rep.cause, rep.ended) == (NODE, "repair", since + AHR_TOLERATION)
    assert (
        f"NodeClaim {CLAIM} is absent from the NodeClaim list; its repair deadline passed at "
        f"{format_time(since + AHR_TOLERATION)}"
    ) in texts(rep)


def test_a_claim_whose_repair_deadline_is_exactly_now_ended_now() -> None:
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        dcgm_error(NODE, NOW - AHR_TOLERATION),
    ]
    rep = gone(cluster(events, listed=(LIVE,)))
    assert rep is not None and rep.ended == NOW and rep.cause == "repair"


def test_a_claim_absent_before_its_repair_deadline_is_not_called_repaired() -> None:
    events = [*launched_and_registered(CLAIM, NODE, ago(300)), dcgm_error(NODE, ago(5))]
    assert gone(cluster(events, listed=(LIVE,))) is None


def test_without_a_nodeclaim_list_a_claim_missing_from_it_proves_nothing() -> None:
    # A snapshot that holds no NodeClaims (the list was not read) cannot show one is gone.
    events = [*launched_and_registered(CLAIM, NODE, ago(300)), dcgm_error(NODE, ago(15))]
    assert gone(cluster(events)) is None


def test_on_karpenter_1_1_a_hardware_condition_sets_no_repair_deadline() -> None:
    events = [*launched_and_registered(CLAIM, NODE, ago(300)), dcgm_error(NODE, ago(15))]
    assert gone(cluster(events, listed=(LIVE,), karpenter="1.1.0")) is None


def test_a_claim_that_drained_names_when_it_drained_not_a_repair_deadline() -> None:
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        dcgm_error(NODE, ago(40)),
        drained(CLAIM, ago(30)),
    ]
    rep = gone(cluster(events, listed=(LIVE,)))
    assert rep is not None and rep.ended == ago(30) and rep.cause == "repair"
    assert "repair deadline" not in texts(rep)


def test_a_claim_that_never_registered_is_not_given_a_repair_deadline() -> None:
    events = [
        transition("NodeClaim", CLAIM, "Launched", "Unknown", "True", "Launched", ago(40)),
        event(
            "NodeClaim",
            CLAIM,
            "UnregisteredTaintMissing",
            "Missing karpenter.sh/unregistered taint which prevents registration related race "
            "conditions on Karpenter-managed nodes",
            ago(35),
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events, listed=(LIVE,)))
    assert rep is not None and rep.cause == "registration" and rep.ended is None
    assert "repair deadline" not in texts(rep)


def test_a_repeated_disruption_event_dates_the_termination_from_its_first_sighting() -> None:
    message = "Disrupting NodeClaim: Underutilized/Delete"
    events = [
        event("NodeClaim", CLAIM, "DisruptionTerminating", message, ago(20), last=ago(4), count=3),
    ]
    rep = gone(cluster(events))
    assert rep is not None
    assert (rep.cause, rep.ended) == ("consolidation", ago(20))


def test_a_repair_annotation_earlier_than_its_drain_warning_dates_the_termination() -> None:
    # Repair writes the termination-timestamp as the moment it deletes; the warning that quotes
    # it comes with the drain, seconds later.
    deleted = ago(12)
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {format_time(deleted)}",
            deleted + 40 * SECOND,
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events))
    assert rep is not None
    assert (rep.cause, rep.ended) == ("repair", deleted)


def test_an_ec2_state_change_alone_dates_a_gone_claims_end() -> None:
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "InstanceTerminating",
            "Instance is terminating",
            ago(8),
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.ended == ago(8)


# -- why it ended -------------------------------------------------------------------------


def test_a_spot_interruption_of_a_node_close_to_its_repair_deadline_stays_an_interruption() -> None:
    since = ago(19)  # AcceleratedHardwareReady=False 9 min before the interruption
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        dcgm_error(NODE, since),
        event(
            "NodeClaim",
            CLAIM,
            "TerminatingOnInterruption",
            "Interruption triggered termination for the NodeClaim",
            ago(10),
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.node == NODE
    assert rep.cause == "interruption"


def test_a_spot_notice_before_the_drain_names_an_interruption_whose_own_event_is_lost() -> None:
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "SpotInterrupted",
            "Spot interruption warning was triggered",
            ago(10),
            type_="Warning",
        ),
        drained(CLAIM, ago(10) + SECOND),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.cause == "interruption"


def test_a_repair_whose_launch_events_expired_is_not_a_registration_failure() -> None:
    deleted = ago(12)
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {format_time(deleted)}",
            deleted + 5 * SECOND,
            type_="Warning",
        ),
        drained(CLAIM, deleted + 30 * SECOND),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.cause == "repair"


def test_a_grace_period_deadline_quoted_by_a_repeating_warning_is_not_a_repair() -> None:
    # A deletion with terminationGracePeriod 30m writes deletion + 30m; the warning repeats
    # until the drain ends, so its last sighting passes the quoted time.
    deleted = ago(50)
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {format_time(deleted + timedelta(minutes=30))}",
            deleted + 2 * SECOND,
            last=deleted + timedelta(minutes=31),
            count=7,
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.ended == deleted + 2 * SECOND
    assert rep.cause != "repair"


def test_a_claim_that_failed_to_register_says_so_even_after_a_registered_false() -> None:
    # Registration sets Registered=False (UnregisteredTaintNotFound) before liveness deletes it.
    events = [
        transition("NodeClaim", CLAIM, "Launched", "Unknown", "True", "Launched", ago(40)),
        transition(
            "NodeClaim",
            CLAIM,
            "Registered",
            "Unknown",
            "False",
            "UnregisteredTaintNotFound",
            ago(39),
        ),
        event(
            "NodeClaim",
            CLAIM,
            "UnregisteredTaintMissing",
            "Missing karpenter.sh/unregistered taint",
            ago(39),
            type_="Warning",
        ),
        drained(CLAIM, ago(25)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.cause == "registration"


def test_an_old_claim_consolidated_away_is_consolidation_not_expiration() -> None:
    events = [
        *launched_and_registered(CLAIM, NODE, ago(200)),
        event(
            "NodeClaim",
            CLAIM,
            "DisruptionTerminating",
            "Disrupting NodeClaim: Underutilized/Delete",
            ago(10),
        ),
    ]
    pools = (NodePool(name=POOL, expire_after="2h"),)
    rep = gone(cluster(events, pools=pools))
    assert rep is not None and rep.cause == "consolidation"


def test_a_claim_older_than_expire_after_with_no_other_cause_expired() -> None:
    events = [*launched_and_registered(CLAIM, NODE, ago(200)), drained(CLAIM, ago(10))]
    pools = (NodePool(name=POOL, expire_after="2h"),)
    rep = gone(cluster(events, pools=pools))
    assert rep is not None and rep.cause == "expiration"


def test_a_gone_claim_with_no_launch_events_left_keeps_an_unknown_cause() -> None:
    pools = (NodePool(name=POOL, expire_after="2h"),)
    rep = gone(cluster([drained(CLAIM, ago(10))], pools=pools))
    assert rep is not None and (rep.created, rep.cause) == (None, "unknown")


def test_a_claim_that_registered_after_capacity_errors_and_vanished_without_a_trace() -> None:
    # An InsufficientCapacityError on the first offering, then it registered; nothing dates
    # its end (no NodeClaim list, no termination events).
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "InsufficientCapacityError",
            "NodeClaim gpu-training-x7k2p event: creating instance, insufficient capacity",
            ago(300),
            type_="Warning",
        ),
        *launched_and_registered(CLAIM, NODE, ago(299)),
        dcgm_error(NODE, ago(30)),
    ]
    pools = (NodePool(name=POOL, expire_after="1h"),)
    rep = gone(cluster(events, pools=pools))
    assert rep is not None
    assert (rep.ended, rep.cause, rep.node) == (None, "unknown", NODE)


def test_a_hand_named_claim_belongs_to_the_longest_known_nodepool_it_starts_with() -> None:
    name = "gpu-training-manual-1"
    events = [drained(name, ago(10))]
    pools = (NodePool(name=POOL), NodePool(name="gpu"))
    rep = gone(cluster(events, pools=pools), name)
    assert rep is not None and rep.pool == POOL


# -- what the engineer reads --------------------------------------------------------------


def test_a_gone_claims_evidence_quotes_three_termination_events_and_no_boot_noise() -> None:
    events = [
        event("Node", NODE, "Starting", "Starting kubelet.", ago(300), source="kubelet"),
        drained(CLAIM, ago(20)),
        transition(
            "NodeClaim", CLAIM, "VolumesDetached", "Unknown", "True", "VolumesDetached", ago(19)
        ),
        transition("NodeClaim", CLAIM, "Launched", "Unknown", "True", "Launched", ago(300)),
        event("Node", NODE, "FailedDraining", "Failed to drain node, 2 pods are waiting", ago(18)),
        event(
            "Node",
            NODE,
            "AwaitingVolumeDetachment",
            "Awaiting deletion of 1 VolumeAttachment",
            ago(17),
        ),
        event("Node", NODE, "RegisteredNode", f"Registered Node {NODE} in Controller", ago(299)),
    ]
    # Paired by the drain: the claim's Registered transition is absent, the node unhealthy
    # for its toleration before the drain.
    events.append(dcgm_error(NODE, ago(30)))
    rep = gone(cluster(events))
    assert rep is not None and rep.node == NODE
    text = texts(rep)
    assert "Type: Drained" in text and "Type: VolumesDetached" in text
    assert "FailedDraining" in text
    assert "AwaitingVolumeDetachment" not in text  # three are enough
    assert "Type: Launched" not in text
    assert "Starting kubelet" not in text


def test_an_ec2_echo_is_dated_by_its_first_sighting() -> None:
    events = [
        event(
            "NodeClaim",
            CLAIM,
            "DisruptionTerminating",
            "Disrupting NodeClaim: Drifted/Replace",
            ago(20),
        ),
        event(
            "NodeClaim",
            CLAIM,
            "InstanceTerminating",
            "Instance is terminating",
            ago(15),
            last=ago(11),
            count=2,
            type_="Warning",
        ),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.cause == "drift"
    echo = [e for e in rep.evidence if "came after the deletion" in e.text]
    assert [e.time for e in echo] == [ago(15)]
    assert "(drift)" in echo[0].text


def test_of_echoes_on_a_gone_claim_and_its_node_the_first_sighted_is_quoted() -> None:
    # The interruption queue echoes the termination on both objects; the Node's came first.
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        event(
            "NodeClaim", CLAIM, "DisruptionTerminating", "Disrupting NodeClaim: Drifted", ago(20)
        ),
        event("NodeClaim", CLAIM, "InstanceTerminating", "Instance is terminating", ago(12)),
        event("Node", NODE, "InstanceTerminating", "Instance is terminating", ago(14)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and (rep.node, rep.cause) == (NODE, "drift")
    [echo] = [e for e in rep.evidence if "came after the deletion" in e.text]
    assert echo.time == ago(14)
    assert f"InstanceTerminating on Node {NODE}" in echo.text


def test_events_without_any_time_are_read_without_an_error() -> None:
    # A hand-written or foreign events list may carry no timestamps at all.
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        dcgm_error(NODE, None),
        event("Node", NODE, "FailedDraining", "Failed to drain node", None),
        event("NodeClaim", CLAIM, "NodeRepairBlocked", BLOCKED, None, type_="Warning"),
        event("Node", OTHER_NODE, "NodeRepairBlocked", BLOCKED, ago(30), type_="Warning"),
        event(
            "NodeClaim",
            CLAIM,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {format_time(ago(9))}",
            None,
        ),
        drained(CLAIM, ago(8)),
    ]
    rep = gone(cluster(events, listed=(LIVE,)))
    assert rep is not None and rep.ended == ago(8)


def test_an_unhealthy_transition_without_a_time_sets_no_repair_deadline() -> None:
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        event("Node", NODE, "Starting", "Starting kubelet.", None, source="kubelet"),
        dcgm_error(NODE, None),
    ]
    assert gone(cluster(events, listed=(LIVE,))) is None


def test_an_unhealthy_transition_without_a_time_pairs_no_gone_claim() -> None:
    rep = gone(cluster([dcgm_error(NODE, None), drained(CLAIM, ago(8))]))
    assert rep is not None and (rep.node, rep.cause) == ("", "unknown")


def test_a_node_condition_named_like_a_claims_drain_does_not_date_the_claims_end() -> None:
    # Karpenter echoes every Node condition change too; a maintenance tool's own "Drained"
    # condition on the Node is not the NodeClaim's termination.
    events = [
        *launched_and_registered(CLAIM, NODE, ago(300)),
        transition("Node", NODE, "Drained", "False", "True", "MaintenanceWindow", ago(60)),
        drained(CLAIM, ago(10)),
    ]
    rep = gone(cluster(events))
    assert rep is not None and rep.node == NODE and rep.ended == ago(10)
