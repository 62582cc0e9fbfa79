"""An ended NodeClaim read from each source that still remembers it (docs/repair.md, "How long
the evidence lives"): the watcher's history, the snapshot's deleting NodeClaim and its Node, and
the events both keep; and one node's timeline built from them.

Shapes: a repaired NodeClaim carries karpenter.sh/nodeclaim-termination-timestamp equal to its
deletionTimestamp (kubernetes-sigs/karpenter v1.6.0 pkg/controllers/node/health/controller.go);
a consolidated one a DisruptionReason condition (pkg/controllers/disruption/queue.go); the
interruption queue's InstanceTerminating echo of an instance Karpenter terminated itself
(aws/karpenter-provider-aws v1.6.0 pkg/controllers/interruption/controller.go); an EKS Auto Mode
NodeClaim's nodeClassRef group eks.amazonaws.com (Amazon EKS User Guide, create-node-pool).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from mignurse.cluster.history import Lifecycle
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.events import all_events
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.replacements import Replacement, replacements
from mignurse.diagnose.timeline import node_timeline
from mignurse.model import Condition, Event, Node, NodeClaim, NodePool, format_time

from .test_gone_nodeclaims import event

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
POOL = "gpu-training"
CLAIM = "gpu-training-x7k2p"
NODE = "ip-10-0-12-34.us-west-2.compute.internal"
AHR = "AcceleratedHardwareReady"
SECOND = timedelta(seconds=1)
REGISTERED = (
    "Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered"
)
DRAINED = "Status condition transitioned, Type: Drained, Status: Unknown -> True, Reason: Drained"


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def dcgm_error(when: datetime) -> Event:
    return event(
        "Node",
        NODE,
        AHR,
        f"Status condition transitioned, Type: {AHR}, Status: True -> False, Reason: DCGMError",
        when,
    )


def gpu_node(*conditions: Condition) -> Node:
    return Node(
        name=NODE,
        uid=f"uid-{NODE}",
        created=ago(600),
        pool=POOL,
        pool_kind="nodepool",
        instance_type="p5.48xlarge",
        labels={"karpenter.sh/nodepool": POOL, "nvidia.com/gpu.present": "true"},
        conditions=conditions or (Condition("Ready", "True", "KubeletReady", "", ago(598)),),
        gpu_capacity={"nvidia.com/gpu": 8},
        gpu_allocatable={"nvidia.com/gpu": 8},
    )


def deleting_claim(deleting: datetime, **fields: object) -> NodeClaim:
    """A NodeClaim Karpenter repaired (termination-timestamp = deletion), still terminating."""
    claim = NodeClaim(
        name=CLAIM,
        uid=f"uid-{CLAIM}",
        pool=POOL,
        node_name=NODE,
        provider_id="aws:///us-west-2b/i-0a1b2c3d4e5f60718",
        image_id="ami-0c2d1a7f6e5b4a391",
        instance_type="p5.48xlarge",
        created=ago(600),
        deleting=deleting,
        termination_timestamp=deleting,
        conditions=(Condition("Registered", "True", "Registered", "", ago(599)),),
    )
    return replace(claim, **fields)  # type: ignore[arg-type]


def recorded_claim(**fields: object) -> Lifecycle:
    """The watcher's record of the NodeClaim."""
    lc = Lifecycle(
        context="ml-prod",
        kind="NodeClaim",
        name=CLAIM,
        uid=f"uid-{CLAIM}",
        pool=POOL,
        instance_type="p5.48xlarge",
        instance_id="i-0a1b2c3d4e5f60718",
        image_id="ami-0c2d1a7f6e5b4a391",
        node_name=NODE,
        nodeclaim="",
        created=ago(600),
        first_seen=ago(600),
        first_ready=None,
        last_seen=ago(12),
        deleting_since=ago(12),
        termination_timestamp=ago(12),
        disruption_reason=None,
        drifted=False,
        deleted_at=ago(11),
        deleted_seen="watch",
        last_unhealthy=None,
    )
    return replace(lc, **fields)  # type: ignore[arg-type]


def cluster(
    *,
    nodes: tuple[Node, ...] = (),
    claims: tuple[NodeClaim, ...] = (),
    events: tuple[Event, ...] = (),
    history: History | None = None,
) -> DiagnosisInput:
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in nodes},
            nodeclaims={c.name: c for c in claims},
            nodepools={POOL: NodePool(name=POOL, expire_after="720h")},
            events=events,
            karpenter=True,
            taken_at=NOW,
        ),
        now=NOW,
        history=history or History(),
    )


def the_one(inp: DiagnosisInput) -> Replacement:
    found = replacements(inp)
    assert [r.claim for r in found] == [CLAIM]
    return found[0]


# -- the watcher's history ----------------------------------------------------------------


def test_a_recorded_repair_opens_its_evidence_with_the_history_line() -> None:
    inp = cluster(events=(dcgm_error(ago(22)),), history=History(lifecycles=(recorded_claim(),)))
    rep = the_one(inp)
    assert (rep.source, rep.cause, rep.node) == ("history", "repair", NODE)
    assert rep.evidence[0].source == "history" and "→ Karpenter repair" in rep.evidence[0].text
    assert any("Reason: DCGMError" in e.text for e in rep.evidence[1:])


def test_a_condition_that_flipped_in_the_second_of_the_deletion_is_the_one_before_it() -> None:
    inp = cluster(events=(dcgm_error(ago(12)),), history=History(lifecycles=(recorded_claim(),)))
    rep = the_one(inp)
    assert rep.unhealthy == (AHR, "False", "DCGMError") and rep.unhealthy_since == ago(12)


def test_a_claim_a_relist_missed_while_it_still_terminates_takes_the_snapshots_cause() -> None:
    # The history marked it gone (absent from one LIST); the API server still shows it
    # deleting, with the repair's termination-timestamp.
    missed = recorded_claim(
        deleting_since=None, termination_timestamp=None, deleted_at=ago(11), deleted_seen="relist"
    )
    inp = cluster(
        nodes=(gpu_node(),),
        claims=(deleting_claim(ago(11)),),
        history=History(lifecycles=(missed,)),
    )
    assert the_one(inp).cause == "repair"


# -- the snapshot's deleting NodeClaim ----------------------------------------------------


def test_a_deleting_claim_shows_its_nodes_unhealthy_condition_after_its_own_line() -> None:
    dcgm = Condition(AHR, "False", "DCGMError", "failed to initialize DCGM", ago(13))
    inp = cluster(nodes=(gpu_node(dcgm),), claims=(deleting_claim(ago(3)),))
    rep = the_one(inp)
    assert (rep.source, rep.cause) == ("nodeclaim", "repair")
    assert rep.unhealthy == (AHR, "False", "DCGMError") and rep.unhealthy_since == ago(13)
    assert rep.evidence[0].source == "nodeclaim"
    conditions = [e for e in rep.evidence if e.source == "condition"]
    assert len(conditions) == 1
    assert f"Node {NODE}: {AHR}=False DCGMError" in conditions[0].text
    assert conditions[0].time == ago(13)


def test_a_deleting_claim_whose_node_is_gone_quotes_the_nodes_last_transition() -> None:
    inp = cluster(claims=(deleting_claim(ago(3)),), events=(dcgm_error(ago(13)),))
    rep = the_one(inp)
    assert rep.unhealthy == (AHR, "False", "DCGMError")
    assert any(e.source == "event" and "Reason: DCGMError" in e.text for e in rep.evidence)


def test_a_deleting_claim_explains_the_ec2_echo_of_its_own_termination() -> None:
    echo = event(
        "NodeClaim",
        CLAIM,
        "InstanceTerminating",
        "Instance is terminating",
        ago(2),
        type_="Warning",
    )
    inp = cluster(nodes=(gpu_node(),), claims=(deleting_claim(ago(3)),), events=(echo,))
    rep = the_one(inp)
    assert rep.cause == "repair"
    assert any(
        "came after the deletion" in e.text and "(Karpenter repair)" in e.text for e in rep.evidence
    )


def test_an_auto_mode_consolidation_is_not_called_an_auto_mode_repair() -> None:
    auto = {"node_class_group": "eks.amazonaws.com"}
    consolidated = deleting_claim(
        ago(3),
        termination_timestamp=None,
        conditions=(Condition("DisruptionReason", "True", "Underutilized", "", ago(3)),),
        **auto,
    )
    rep = the_one(cluster(claims=(consolidated,)))
    assert rep.cause == "consolidation"
    assert rep.evidence[0].text.endswith("→ consolidation")
    repaired = the_one(cluster(claims=(deleting_claim(ago(3), **auto),)))
    assert repaired.evidence[0].text.endswith("→ EKS Auto Mode repair")


# -- the events both keep -----------------------------------------------------------------


@pytest.mark.parametrize("newest_in", ["snapshot", "history"])
def test_the_newest_copy_of_an_event_wins_whichever_source_holds_it(newest_in: str) -> None:
    # Usually the API server's copy is the newer; a bundle's snapshot read before the
    # watcher's last list holds the older one.
    older = event(
        "Node", NODE, "NodeNotReady", "Node is not ready", ago(50), last=ago(30), count=3, uid="u1"
    )
    newer = replace(older, last_seen=ago(5), count=9)
    live, kept = (newer, older) if newest_in == "snapshot" else (older, newer)
    merged = all_events(cluster(events=(live,), history=History(events=(kept,))))
    assert [(e.uid, e.count) for e in merged] == [("u1", 9)]


def test_events_from_both_sources_come_oldest_first() -> None:
    kept = event("Node", NODE, "NodeNotReady", "Node is not ready", ago(90))
    live = event("Node", NODE, "NodeReady", "Node is ready", ago(120), last=ago(60))
    merged = all_events(cluster(events=(live,), history=History(events=(kept,))))
    assert [e.reason for e in merged] == ["NodeNotReady", "NodeReady"]


def test_on_karpenter_1_1_a_gone_claim_drained_after_its_nodes_hardware_fault_is_no_repair() -> (
    None
):
    # Karpenter v1.1 repaired only Ready=False (docs/repair.md): AcceleratedHardwareReady=False
    # for 10 min before the drain is a coincidence there.
    events = (
        event("NodeClaim", CLAIM, "Registered", REGISTERED, ago(300)),
        event("Node", NODE, "RegisteredNode", f"Registered Node {NODE} in Controller", ago(300)),
        dcgm_error(ago(40)),
        event("NodeClaim", CLAIM, "Drained", DRAINED, ago(30)),
    )
    inp = replace(
        cluster(events=events), karpenter=KarpenterSettings(node_repair=True, version="1.1.0")
    )
    rep = the_one(inp)
    assert (rep.node, rep.unhealthy, rep.cause) == (NODE, (AHR, "False", "DCGMError"), "unknown")


@pytest.mark.parametrize(("latest_flip", "ended"), [(12, 2), (8, None)])
def test_a_flapping_hardware_condition_starts_the_repair_clock_at_its_latest_flip(
    latest_flip: float, ended: float | None
) -> None:
    # The agent restarted once: AcceleratedHardwareReady went False twice, and the API server
    # folded the two identical transition events into one (count 2, lastTimestamp the latest).
    # Karpenter's clock restarts at every flip (docs/repair.md), so the claim missing from the
    # NodeClaim list was repaired 10 min after the latest one, not the first.
    flapping = replace(dcgm_error(ago(30)), last_seen=ago(latest_flip), count=2)
    events = (
        event("NodeClaim", CLAIM, "Registered", REGISTERED, ago(300)),
        event("Node", NODE, "RegisteredNode", f"Registered Node {NODE} in Controller", ago(300)),
        flapping,
    )
    live = replace(deleting_claim(ago(1)), name="gpu-training-q4m8z", deleting=None, node_name="")
    found = replacements(cluster(claims=(live,), events=events))
    if ended is None:
        assert found == []
    else:
        assert [(r.claim, r.cause, r.ended) for r in found] == [(CLAIM, "repair", ago(ended))]
        assert found[0].unhealthy_since == ago(latest_flip)


def test_a_repeated_repair_block_is_quoted_at_its_latest_sighting() -> None:
    # kubectl's LAST SEEN: the guard still held the repair 25 min ago, not only 40 min ago.
    blocked = event(
        "NodeClaim",
        CLAIM,
        "NodeRepairBlocked",
        "more than 20% nodes are unhealthy in the nodepool",
        ago(40),
        last=ago(25),
        count=3,
        type_="Warning",
    )
    events = (blocked, event("NodeClaim", CLAIM, "Drained", DRAINED, ago(20)))
    rep = the_one(cluster(events=events))
    quoted = [e for e in rep.evidence if "NodeRepairBlocked" in e.text]
    assert [e.time for e in quoted] == [ago(25)]
    assert f"(x3 since {format_time(ago(40))})" in quoted[0].text


# -- one node's timeline ------------------------------------------------------------------


def test_a_pod_that_shares_a_nodeclaims_name_stays_out_of_that_nodeclaims_timeline() -> None:
    # A Job's pods are named <job>-<5 characters>, as a NodePool's NodeClaims are.
    pod = event("Pod", CLAIM, "Scheduled", f"Successfully assigned default/{CLAIM}", ago(20))
    told = event("NodeClaim", CLAIM, "DisruptionBlocked", "Node is nominated", ago(10))
    inp = cluster(
        nodes=(gpu_node(),),
        claims=(replace(deleting_claim(ago(3)), deleting=None),),
        events=(pod, told),
    )
    lines = [e.text for e in node_timeline(inp, NODE)]
    assert any(line.startswith(f"NodeClaim {CLAIM}: Normal DisruptionBlocked") for line in lines)
    assert not any("Successfully assigned" in line for line in lines)
