"""Every window, threshold and pairing of the rules, pinned at its edge: the case just
inside, the case just outside, and the benign neighbour that must stay quiet.

The inputs are what the API server shows (a Node, its NodeClaim, the events Karpenter and the
kubelet publish); each runs through the diagnosis engine with the rule under test. The event
shapes are Karpenter's (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/disruption/events/
events.go: DisruptionTerminating "Disrupting NodeClaim: <reason>"; pkg/controllers/node/health/
controller.go: repair sets karpenter.sh/nodeclaim-termination-timestamp to the moment it
deletes) and the kubelet's (kubernetes/kubernetes v1.33 pkg/kubelet/nodestatus/setters.go:
NodeReady / NodeNotReady; pkg/kubelet/kubelet.go: "Starting kubelet.").
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.history import Lifecycle, Transition
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import (
    CRITICAL,
    INFO,
    NODE_NOT_READY,
    NODE_REPAIR_LOOP,
    NOTREADY_LOOP,
    REPAIR_BLOCKED,
    REPAIR_RISK,
    REPLACEMENT_CHURN,
    WARNING,
    Finding,
    Rule,
)
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings, NodeEvidence
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.diagnose.outlook import RepairOutlook, repair_outlook
from mignurse.diagnose.rules import (
    churn,
    not_ready,
    notready_loop,
    repair_blocked,
    repair_loop,
    repair_risk,
)
from mignurse.diagnose.timeline import node_timeline
from mignurse.evidence import JournalParse, parse_journal
from mignurse.model import Condition, Event, Node, NodeClaim, NodePool

from .test_node_rules import (
    about,
    bundle,
    incident_node,
    relabel,
    run,
    sibling_node,
    sim_input,
    with_node,
)

NOW = datetime(2026, 12, 4, 9, 30, tzinfo=UTC)
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
POOL = "gpu-inference"
SHAPE = "g6e.12xlarge"
AMI = "ami-0a7f3c9e2d41b8f56"
AHR = "AcceleratedHardwareReady"

# The limits as the README's finding table and docs/repair.md state them: written out here, not
# read from the rules, so a limit that moves in the code fails its test.
TWIN_LAUNCH = timedelta(minutes=5)  # a repaired node's replacement is launched within this
YOUNG_REPAIR = timedelta(minutes=30)  # one repair this young beside its twin is a loop
FLAP_HOUR = timedelta(hours=1)  # NotReady episodes and kubelet starts count within this
STUCK = timedelta(minutes=5)  # NotReady longer than this is stuck, not a restart
BOOT = timedelta(minutes=15)  # NotReady this soon after creation failed in bootstrap
SOON_AFTER_READY = timedelta(minutes=10)  # NotReady this soon after the first Ready too
MIG_SUSPECT = timedelta(minutes=2)  # Ready this briefly on a MIG node: the MIG restart
SETTLE = timedelta(minutes=2)  # node-not-ready waits this long before it reports
JOINING = timedelta(minutes=10)  # a never-Ready node this young is still joining
URGENT = timedelta(minutes=10)  # a repair this close makes node-not-ready critical
REPLACEMENT_WINDOW = timedelta(hours=6)  # replacements older than this no longer count


def _ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def findings(inp: DiagnosisInput, name: str, rule: Rule) -> list[Finding]:
    result = diagnose(inp, rules=[(name, rule)])
    assert result.rule_errors == []
    return result.findings


def event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    when: datetime,
    *,
    source: str = "karpenter",
    type_: str = "Normal",
    count: int = 1,
    last: datetime | None = None,
) -> Event:
    return Event(
        namespace="default",
        name=f"{name}.{int(when.timestamp() * 1000):x}{reason[:4].lower()}",
        uid=f"uid-{name}-{reason}-{when.timestamp()}",
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


def gpu_node(
    name: str, *conditions: Condition, created: datetime | None = None, **labels: str
) -> Node:
    return Node(
        name=name,
        uid=f"uid-{name}",
        created=created or NOW - timedelta(days=3),
        pool=POOL,
        pool_kind="nodepool",
        instance_type=SHAPE,
        labels={
            "karpenter.sh/nodepool": POOL,
            "node.kubernetes.io/instance-type": SHAPE,
            "nvidia.com/gpu.present": "true",
            **labels,
        },
        conditions=conditions or (Condition("Ready", "True", "KubeletReady", "", _ago(3 * 1440)),),
        gpu_capacity={"nvidia.com/gpu": 4},
        gpu_allocatable={"nvidia.com/gpu": 4},
    )


def claim(
    name: str,
    node: str,
    created: datetime,
    *,
    deleting: datetime | None = None,
    terminated: datetime | None = None,
    shape: str = SHAPE,
    image: str = AMI,
    pool: str = POOL,
    conditions: tuple[Condition, ...] = (),
) -> NodeClaim:
    return NodeClaim(
        name=name,
        uid=f"uid-{name}",
        pool=pool,
        node_name=node,
        provider_id=f"aws:///us-west-2b/i-0{sum(map(ord, name)) * 7919:016x}",
        image_id=image,
        instance_type=shape,
        created=created,
        deleting=deleting,
        termination_timestamp=terminated,
        conditions=conditions,
    )


def cluster(
    nodes: list[Node],
    claims: list[NodeClaim],
    events: tuple[Event, ...] | list[Event] = (),
) -> DiagnosisInput:
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in nodes},
            nodeclaims={c.name: c for c in claims},
            events=tuple(events),
            karpenter=True,
            taken_at=NOW,
        ),
        now=NOW,
    )


# -- node-repair-loop: one young repair and the NodeClaim that replaces it -------------------

DCGM_ERROR = Condition(
    AHR, "False", "DCGMError", "failed to initialize DCGM: libdcgm.so not Found", _ago(13)
)
REPAIRED_AT = _ago(3)  # Karpenter repaired the node 10 min after DCGMError


def young_repair(
    *,
    lived: timedelta = timedelta(minutes=12),
    replacement_created: datetime | None = REPAIRED_AT + timedelta(seconds=8),
    **replacement: Any,
) -> DiagnosisInput:
    """gpu-inference-7xk2p failed DCGM in its youth and Karpenter repaired it at REPAIRED_AT;
    gpu-inference-q9zfw is the NodeClaim launched for its pods."""
    repaired = claim(
        "gpu-inference-7xk2p",
        "ip-10-0-41-17.us-west-2.compute.internal",
        REPAIRED_AT - lived,
        deleting=REPAIRED_AT,
        terminated=REPAIRED_AT,
    )
    node = replace(
        gpu_node(
            repaired.node_name,
            Condition("Ready", "True", "KubeletReady", "", REPAIRED_AT - lived),
            DCGM_ERROR,
            created=REPAIRED_AT - lived,
        ),
        deleting=REPAIRED_AT + timedelta(seconds=2),  # the claim's finalizer deletes its Node
    )
    claims = [repaired]
    if replacement_created is not None:
        claims.append(claim("gpu-inference-q9zfw", "", replacement_created, **replacement))
    return cluster([node], claims)


def repair_loops(inp: DiagnosisInput) -> list[Finding]:
    return [f for f in findings(inp, "repair_loop", repair_loop.rule) if f.id == NODE_REPAIR_LOOP]


def test_a_young_repair_and_its_replacement_launched_seconds_later_are_a_loop() -> None:
    (loop,) = repair_loops(young_repair())
    assert loop.severity == CRITICAL
    assert loop.runbooks[0] == "pause-node-repair"
    assert "gpu-inference-q9zfw, built the same way, replaces it" in loop.summary
    assert "12m after launch" in loop.summary
    assert "a node is being replaced now" in loop.summary
    # The repaired node's condition is quoted once, with its fate.
    quoted = [e.text for e in loop.evidence if "AcceleratedHardwareReady=False DCGMError" in e.text]
    assert len(quoted) == 1
    assert quoted[0].endswith("; being replaced now (NodeClaim deleting)")


@pytest.mark.parametrize("offset", [-TWIN_LAUNCH, TWIN_LAUNCH], ids=["5m-before", "5m-after"])
def test_a_replacement_launched_at_the_edge_of_the_launch_window_is_the_twin(
    offset: timedelta,
) -> None:
    (loop,) = repair_loops(young_repair(replacement_created=REPAIRED_AT + offset))
    assert "gpu-inference-q9zfw" in loop.summary


@pytest.mark.parametrize(
    "offset",
    [-TWIN_LAUNCH - SECOND, TWIN_LAUNCH + SECOND, -timedelta(hours=2)],
    ids=["older-claim", "launched-later", "long-lived-neighbour"],
)
def test_one_young_repair_beside_a_claim_launched_outside_the_window_is_no_loop(
    offset: timedelta,
) -> None:
    # A same-shape claim created long before (or well after) the repair was not launched for
    # its pods: one repair alone is not a loop.
    assert repair_loops(young_repair(replacement_created=REPAIRED_AT + offset)) == []


def test_a_repair_at_exactly_thirty_minutes_of_life_is_still_young() -> None:
    (loop,) = repair_loops(young_repair(lived=YOUNG_REPAIR))
    assert "30m after launch" in loop.summary


def test_a_repair_of_a_node_that_lived_past_thirty_minutes_is_not_a_loop_alone() -> None:
    assert repair_loops(young_repair(lived=YOUNG_REPAIR + SECOND)) == []


@pytest.mark.parametrize(
    "replacement",
    [
        {"shape": "p5.48xlarge"},
        {"image": "ami-0e1d2c3b4a5f60718"},
        {"pool": "gpu-training"},
        {"deleting": NOW},
    ],
    ids=["other-shape", "other-image", "other-pool", "itself-deleting"],
)
def test_a_replacement_built_another_way_is_not_the_twin(replacement: dict[str, Any]) -> None:
    assert repair_loops(young_repair(**replacement)) == []


def test_a_replacement_not_yet_launched_is_the_twin_whatever_its_image() -> None:
    (loop,) = repair_loops(young_repair(image="", shape=""))
    assert "gpu-inference-q9zfw" in loop.summary
    assert "image not yet launched" in "\n".join(e.text for e in loop.evidence)


def test_a_young_repair_without_any_replacement_is_no_loop() -> None:
    assert repair_loops(young_repair(replacement_created=None)) == []


def gone_claim(
    name: str,
    lived: timedelta,
    ended: datetime,
    unhealthy: tuple[str, str, str] | None = (AHR, "False", "DCGMError"),
    *,
    repaired: bool = True,
    pool: str = POOL,
    image: str = AMI,
    manual: bool = False,
) -> Lifecycle:
    """A NodeClaim the watcher saw end (history), repaired (annotation at the deletion) or
    consolidated (DisruptionReason Underutilized)."""
    node = f"ip-10-0-{sum(map(ord, name)) % 200}-9.us-west-2.compute.internal"
    return Lifecycle(
        context="arn:aws:eks:us-west-2:111122223333:cluster/ml-prod",
        kind="NodeClaim",
        name=name,
        uid=f"uid-{name}",
        pool=pool,
        instance_type=SHAPE,
        instance_id="i-0f3a9c2e7b1d45a60",
        image_id=image,
        node_name=node,
        nodeclaim="",
        created=ended - lived,
        first_seen=ended - lived,
        first_ready=ended - lived + timedelta(minutes=3),
        last_seen=ended,
        deleting_since=ended,
        termination_timestamp=ended if repaired and not manual else None,
        disruption_reason=None if repaired or manual else "Underutilized",
        drifted=False,
        deleted_at=ended + timedelta(seconds=40),
        deleted_seen="watch",
        last_unhealthy=unhealthy,
    )


def history_of(*claims: Lifecycle, live: list[NodeClaim] | None = None) -> DiagnosisInput:
    return DiagnosisInput(
        snapshot=cluster(
            [gpu_node("ip-10-0-33-4.us-west-2.compute.internal")], live or []
        ).snapshot,
        now=NOW,
        history=History(lifecycles=claims),
    )


def test_two_repairs_for_the_same_condition_in_a_pool_are_a_loop_however_old_the_nodes() -> None:
    (loop,) = repair_loops(
        history_of(
            gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
            gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
        )
    )
    assert loop.severity == CRITICAL
    assert "2 nodes" in loop.summary and "DCGMError" in loop.summary
    assert f"every repaired NodeClaim ran image {AMI}" in "\n".join(e.text for e in loop.evidence)
    assert "monitoring plumbing, not the GPU" in loop.summary


@pytest.mark.parametrize(
    "second",
    [
        gone_claim(
            "gpu-inference-b2", timedelta(hours=4), _ago(30), ("Ready", "False", "KubeletNotReady")
        ),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30), pool="gpu-training"),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30), repaired=False),
        gone_claim("gpu-inference-b2", timedelta(hours=4), NOW - REPLACEMENT_WINDOW - SECOND),
    ],
    ids=["other-condition", "other-pool", "consolidated", "older-than-six-hours"],
)
def test_one_repair_and_a_different_end_are_no_loop(second: Lifecycle) -> None:
    first = gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120))
    assert repair_loops(history_of(first, second)) == []


def test_two_repairs_on_different_images_name_no_common_image() -> None:
    (loop,) = repair_loops(
        history_of(
            gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
            gone_claim(
                "gpu-inference-b2", timedelta(hours=4), _ago(30), image="ami-0e1d2c3b4a5f60718"
            ),
        )
    )
    assert "every repaired NodeClaim ran image" not in "\n".join(e.text for e in loop.evidence)


def test_a_loop_on_a_hardware_reason_is_not_called_monitoring_plumbing() -> None:
    xid = (AHR, "False", "NvidiaXID79Error")
    (loop,) = repair_loops(
        history_of(
            gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120), xid),
            gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30), xid),
        )
    )
    assert "monitoring plumbing" not in loop.summary


def test_a_young_repair_known_only_to_the_history_still_finds_its_twin() -> None:
    # The repaired NodeClaim is gone from the API: its shape comes from nobody, the twin's
    # from its labels.
    repaired = gone_claim("gpu-inference-7xk2p", timedelta(minutes=12), REPAIRED_AT)
    twin = claim("gpu-inference-q9zfw", "", REPAIRED_AT + timedelta(seconds=8))
    (loop,) = repair_loops(history_of(repaired, live=[twin]))
    assert "gpu-inference-q9zfw, built the same way" in loop.summary


def test_a_repaired_claim_without_an_image_still_pairs_with_its_twin() -> None:
    repaired = gone_claim("gpu-inference-7xk2p", timedelta(minutes=12), REPAIRED_AT, image="")
    twin = claim("gpu-inference-q9zfw", "", REPAIRED_AT + timedelta(seconds=8))
    (loop,) = repair_loops(history_of(repaired, live=[twin]))
    assert "gpu-inference-q9zfw" in loop.summary


def test_claims_without_a_creation_time_are_judged_without_error() -> None:
    inp = young_repair()
    stripped = {name: replace(c, created=None) for name, c in inp.snapshot.nodeclaims.items()}
    assert repair_loops(cluster(list(inp.snapshot.nodes.values()), list(stripped.values()))) == []
    twin_only = young_repair(replacement_created=None)
    pending = replace(claim("gpu-inference-q9zfw", "", NOW), created=None)
    claims = [*twin_only.snapshot.nodeclaims.values(), pending]
    assert repair_loops(cluster(list(twin_only.snapshot.nodes.values()), claims)) == []


def test_a_loop_after_repair_was_switched_off_is_a_warning_that_it_stopped() -> None:
    inp = history_of(
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    )
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")
    (loop,) = repair_loops(replace(inp, karpenter=off))
    assert loop.severity == WARNING
    assert "NodeRepair is off now, so the loop has stopped" in loop.summary


def test_repairs_whose_condition_was_not_recorded_are_still_a_loop() -> None:
    # Two repaired NodeClaims still finalizing; their Nodes, deleting, no longer show the
    # condition that failed.
    claims, nodes = [], []
    for i, ended in enumerate((_ago(50), _ago(4))):
        name, node = f"gpu-inference-u{i}", f"ip-10-0-10{i}-6.us-west-2.compute.internal"
        claims.append(
            claim(name, node, ended - timedelta(hours=2), deleting=ended, terminated=ended)
        )
        nodes.append(replace(gpu_node(node), deleting=ended + SECOND))
    # a healthy bystander, being consolidated
    nodes.append(replace(gpu_node("ip-10-0-109-6.us-west-2.compute.internal"), deleting=_ago(2)))
    (loop,) = repair_loops(cluster(nodes, claims))
    assert loop.nodes == (
        "ip-10-0-100-6.us-west-2.compute.internal",
        "ip-10-0-101-6.us-west-2.compute.internal",
    )
    assert "an unrecorded condition" in loop.summary
    assert "a node is being replaced now" in loop.summary


def test_a_loop_known_from_the_history_alone_says_the_nodes_are_not_in_the_snapshot() -> None:
    inp = history_of(
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    )
    (loop,) = repair_loops(replace(inp, snapshot=replace(inp.snapshot, nodes={})))
    assert "the nodes' conditions are not in this snapshot" in loop.summary
    (calm,) = repair_loops(inp)
    assert "no node is unhealthy right now" in calm.summary


def test_the_loops_next_victim_leads_and_a_node_already_going_follows() -> None:
    failing = Condition(AHR, "False", "DCGMError", "DCGM failed", _ago(4))
    going = replace(gpu_node("ip-10-0-1-1.us-west-2.compute.internal", failing), deleting=_ago(1))
    next_up = gpu_node("ip-10-0-9-9.us-west-2.compute.internal", failing)
    inp = history_of(
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    )
    healthy = [gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(8)]
    pool = cluster([going, next_up, *healthy], [])
    (loop,) = repair_loops(replace(inp, snapshot=pool.snapshot))
    assert loop.nodes[:2] == (next_up.name, going.name)
    assert loop.deadline == _ago(4) + timedelta(minutes=10)


def test_the_reason_seen_most_names_the_loop() -> None:
    # Three repairs for DCGMError outweigh two nodes failing with Xid 79 now.
    xid = Condition(AHR, "False", "NvidiaXID79Error", "GPU has fallen off the bus", _ago(4))
    now_failing = [gpu_node(f"ip-10-0-5{i}-1.us-west-2.compute.internal", xid) for i in range(2)]
    inp = history_of(
        *(
            gone_claim(f"gpu-inference-a{i}", timedelta(hours=3), _ago(200 - 50 * i))
            for i in range(3)
        )
    )
    (loop,) = repair_loops(replace(inp, snapshot=cluster(now_failing, []).snapshot))
    assert "AcceleratedHardwareReady=False (DCGMError)" in loop.summary


# -- notready-loop: flapping within the hour, and a node that fails while it boots -------------

NODE = "ip-10-0-77-203.us-west-2.compute.internal"


def ready_event(status: str, when: datetime) -> Event:
    reason = "NodeReady" if status == "True" else "NodeNotReady"
    return event(
        "Node", NODE, reason, f"Node {NODE} status is now: {reason}", when, source="kubelet"
    )


def kubelet_starts(first: datetime, count: int, last: datetime) -> Event:
    # The API server aggregates the repeats into one event: count, first and last time.
    return event(
        "Node",
        NODE,
        "Starting",
        "Starting kubelet.",
        first,
        source="kubelet",
        count=count,
        last=last,
    )


def notready_loops(inp: DiagnosisInput) -> list[Finding]:
    return [f for f in findings(inp, "notready_loop", notready_loop.rule) if f.id == NOTREADY_LOOP]


def flapping(first_down: datetime) -> DiagnosisInput:
    """Ready for days, then NotReady twice (two minutes each); Ready again now."""
    second_down = _ago(20)
    back = second_down + timedelta(minutes=2)
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", back))
    events = [
        ready_event("True", first_down - timedelta(minutes=10)),
        ready_event("False", first_down),
        ready_event("True", first_down + timedelta(minutes=2)),
        ready_event("False", second_down),
    ]
    return cluster([node], [], events)


def test_two_notready_episodes_within_the_hour_are_a_flap() -> None:
    (flap,) = notready_loops(flapping(NOW - FLAP_HOUR))
    assert flap.severity == WARNING
    assert "flaps: 2 NotReady episodes" in flap.summary
    assert "Ready now" in flap.summary


def test_an_episode_just_over_an_hour_old_does_not_count_toward_a_flap() -> None:
    assert notready_loops(flapping(NOW - FLAP_HOUR - SECOND)) == []


def test_one_episode_in_the_hour_is_no_flap() -> None:
    assert notready_loops(flapping(_ago(6 * 60))) == []


def restarting(first_start: datetime, count: int = 3) -> DiagnosisInput:
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(3 * 1440)))
    return cluster([node], [], [kubelet_starts(first_start, count, _ago(4))])


def test_three_kubelet_starts_within_the_hour_are_a_flap() -> None:
    (flap,) = notready_loops(restarting(NOW - FLAP_HOUR))
    assert "0 NotReady episodes and 3 kubelet starts" in flap.summary
    assert "Starting kubelet. (x3" in "\n".join(e.text for e in flap.evidence)


@pytest.mark.parametrize(
    ("first", "count"),
    [(NOW - FLAP_HOUR - SECOND, 3), (_ago(50), 2)],
    ids=["first-start-older-than-the-hour", "two-starts"],
)
def test_kubelet_restarts_below_the_flap_threshold_are_quiet(first: datetime, count: int) -> None:
    assert notready_loops(restarting(first, count)) == []


def booting(created_minutes_ago: float, down_since: datetime) -> DiagnosisInput:
    """A GPU node that has never been Ready: the kubelet registered it NotReady."""
    node = gpu_node(
        NODE,
        Condition(
            "Ready", "False", "KubeletNotReady", "container runtime network not ready", down_since
        ),
        created=_ago(created_minutes_ago),
    )
    return cluster([node], [])


def test_a_never_ready_node_down_over_five_minutes_since_it_joined_is_a_loop() -> None:
    down_since = NOW - STUCK - SECOND
    (loop,) = notready_loops(booting(8, down_since))
    assert loop.severity == CRITICAL
    assert "went NotReady within minutes of joining" in loop.summary


def test_a_never_ready_node_down_five_minutes_is_still_booting() -> None:
    # Every new GPU node spends its first minutes NotReady: that alone is no alarm.
    assert notready_loops(booting(8, NOW - STUCK)) == []
    assert notready_loops(booting(3, _ago(2))) == []


def test_a_never_ready_node_down_from_fifteen_minutes_after_creation_is_judged() -> None:
    created = 40.0
    at_edge = _ago(created) + BOOT
    assert len(notready_loops(booting(created, at_edge))) == 1
    assert notready_loops(booting(created, at_edge + SECOND)) == []


def failed_after_ready(ready_for: timedelta, down_for: timedelta, **labels: str) -> DiagnosisInput:
    """Joined, Ready for `ready_for`, then NotReady for `down_for` until now."""
    down_since = NOW - down_for
    first_ready = down_since - ready_for
    node = gpu_node(
        NODE,
        Condition("Ready", "False", "KubeletNotReady", "PLEG is not healthy", down_since),
        created=first_ready - timedelta(minutes=2),
        **labels,
    )
    return cluster([node], [], [ready_event("True", first_ready)])


def test_notready_ten_minutes_after_the_first_ready_is_an_early_failure() -> None:
    (loop,) = notready_loops(failed_after_ready(SOON_AFTER_READY, timedelta(minutes=20)))
    assert loop.severity == CRITICAL
    assert "went NotReady 10 min after its first Ready" in loop.summary


def test_notready_later_than_ten_minutes_after_the_first_ready_is_wear_not_bootstrap() -> None:
    late = SOON_AFTER_READY + SECOND
    assert notready_loops(failed_after_ready(late, timedelta(minutes=20))) == []


def test_an_early_failure_is_critical_only_once_down_over_five_minutes() -> None:
    (fresh,) = notready_loops(failed_after_ready(timedelta(minutes=4), STUCK))
    assert fresh.severity == WARNING
    (stuck,) = notready_loops(failed_after_ready(timedelta(minutes=4), STUCK + SECOND))
    assert stuck.severity == CRITICAL


MIG = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"}


def test_a_mig_node_ready_two_minutes_is_suspected_of_the_mig_restart() -> None:
    (loop,) = notready_loops(failed_after_ready(MIG_SUSPECT, timedelta(minutes=20), **MIG))
    assert "suspect MIG reconfiguration" in loop.summary
    assert "Ready for 2 min," in loop.summary
    shown = "\n".join(e.text for e in loop.evidence)
    assert "nvidia.com/mig.config=all-1g.10gb" in shown
    assert "nvidia.com/mig.config.state=success" in shown
    assert f"Node {NODE} created" in shown


def test_a_mig_node_ready_longer_than_two_minutes_is_not_suspected() -> None:
    ready_for = MIG_SUSPECT + SECOND
    (loop,) = notready_loops(failed_after_ready(ready_for, timedelta(minutes=20), **MIG))
    assert "suspect MIG" not in loop.summary
    assert "went NotReady 2 min after its first Ready" in loop.summary


def test_a_mig_node_with_its_reconfigure_in_flight_is_suspected_whenever_it_failed() -> None:
    labels = {**MIG, "nvidia.com/mig.config.state": "pending"}
    (loop,) = notready_loops(
        failed_after_ready(timedelta(minutes=8), timedelta(minutes=20), **labels)
    )
    assert "suspect MIG reconfiguration" in loop.summary


def test_a_flapping_mig_node_reads_as_a_flap_not_as_the_mig_restart() -> None:
    inp = flapping(NOW - timedelta(minutes=50))
    node = inp.snapshot.nodes[NODE]
    mig = replace(node, labels={**node.labels, **MIG, "nvidia.com/mig.config.state": "pending"})
    (flap,) = notready_loops(cluster([mig], [], list(inp.snapshot.events)))
    assert "flaps: 2 NotReady episodes" in flap.summary


def test_a_node_that_failed_a_minute_after_ready_without_mig_is_not_a_mig_suspect() -> None:
    (loop,) = notready_loops(failed_after_ready(timedelta(minutes=1), timedelta(minutes=20)))
    assert "suspect MIG" not in loop.summary
    assert "went NotReady 60 s after its first Ready" in loop.summary


def test_a_mig_node_never_ready_is_judged_without_a_ready_time() -> None:
    node = gpu_node(
        NODE,
        Condition("Ready", "False", "KubeletNotReady", "PLEG is not healthy", _ago(9)),
        created=_ago(12),
        **MIG,
    )
    (loop,) = notready_loops(cluster([node], []))
    assert "went NotReady within minutes of joining" in loop.summary


def test_kube_proxy_starts_are_not_kubelet_restarts() -> None:
    # kube-proxy announces itself on the Node with reason Starting and no message
    # (kubernetes/kubernetes v1.33 cmd/kube-proxy/app/server.go StartKubeProxy).
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(3 * 1440)))
    proxy = [
        event("Node", NODE, "Starting", "", _ago(40 - 10 * i), source="kube-proxy")
        for i in range(3)
    ]
    assert notready_loops(cluster([node], [], proxy)) == []


def test_two_single_kubelet_start_events_are_two_starts() -> None:
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(3 * 1440)))
    starts = [kubelet_starts(_ago(40), 1, _ago(40)), kubelet_starts(_ago(20), 1, _ago(20))]
    assert notready_loops(cluster([node], [], starts)) == []
    starts.append(kubelet_starts(_ago(10), 1, _ago(10)))
    (flap,) = notready_loops(cluster([node], [], starts))
    assert "3 kubelet starts" in flap.summary


def test_kubelet_restarting_for_hours_counts_its_latest_restarts() -> None:
    # One aggregated event: the first start hours ago, the last three within the hour.
    (flap,) = notready_loops(restarting(_ago(180), count=4))
    assert "3 kubelet starts" in flap.summary


def test_a_flap_told_by_aggregated_kubelet_events_counts_each_episode() -> None:
    # The API server folds repeats into one event with a count: the first and the last
    # occurrence are all that remain of two NotReady and two Ready.
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(18)))
    events = [
        ready_event("True", _ago(50)),
        replace(ready_event("False", _ago(40)), count=2, last_seen=_ago(20)),
        replace(ready_event("True", _ago(38)), count=2, last_seen=_ago(18)),
    ]
    (flap,) = notready_loops(cluster([node], [], events))
    assert "flaps: 2 NotReady episodes" in flap.summary
    assert "Normal NodeNotReady from kubelet" in "\n".join(e.text for e in flap.evidence)


def test_a_node_down_again_now_without_an_event_counts_its_condition() -> None:
    # The second NodeNotReady event is missing: the Ready condition itself tells it.
    node = gpu_node(NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(10)))
    events = [
        ready_event("True", _ago(50)),
        ready_event("False", _ago(40)),
        ready_event("True", _ago(38)),
    ]
    (flap,) = notready_loops(cluster([node], [], events))
    assert "flaps: 2 NotReady episodes" in flap.summary
    assert "NotReady now for 10 min" in flap.summary


def test_other_node_events_are_no_readiness_changes() -> None:
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(45)))
    events = [
        ready_event("True", _ago(58)),
        ready_event("False", _ago(50)),
        event(
            "Node",
            NODE,
            "RegisteredNode",
            f"Node {NODE} event: Registered Node {NODE} in Controller",
            _ago(30),
            source="node-controller",
        ),
        event(
            "Node",
            NODE,
            "NodeHasSufficientMemory",
            f"Node {NODE} status is now: NodeHasSufficientMemory",
            _ago(25),
            source="kubelet",
        ),
    ]
    assert notready_loops(cluster([node], [], events)) == []


def transition(status: str, when: datetime, uid: str = f"uid-{NODE}") -> Transition:
    return Transition(
        context="arn:aws:eks:us-west-2:111122223333:cluster/ml-prod",
        kind="Node",
        name=NODE,
        uid=uid,
        time=when,
        observed_at=when,
        condition="Ready",
        status=status,
        reason="KubeletReady" if status == "True" else "KubeletNotReady",
        message="",
    )


def with_history(inp: DiagnosisInput, *transitions: Transition) -> DiagnosisInput:
    return DiagnosisInput(snapshot=inp.snapshot, now=NOW, history=History(transitions=transitions))


def test_recorded_ready_transitions_tell_a_flap_the_events_no_longer_show() -> None:
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(18)))
    recorded = [
        transition("True", _ago(55)),
        transition("False", _ago(40)),
        transition("True", _ago(38)),
        transition("False", _ago(20)),
        transition("True", _ago(18)),
    ]
    (flap,) = notready_loops(with_history(cluster([node], []), *recorded))
    assert "flaps: 2 NotReady episodes" in flap.summary
    assert "Ready → False (KubeletNotReady)" in "\n".join(e.text for e in flap.evidence)


def test_recorded_transitions_of_an_earlier_node_of_the_same_name_do_not_count() -> None:
    # Names are reused: a Node of the same name, another uid, flapped before this one.
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(18)))
    earlier = [
        transition("True", _ago(55), "uid-gone"),
        transition("False", _ago(40), "uid-gone"),
        transition("True", _ago(38), "uid-gone"),
        transition("False", _ago(20), "uid-gone"),
    ]
    assert notready_loops(with_history(cluster([node], []), *earlier)) == []


def test_recorded_transitions_win_over_the_kubelet_events() -> None:
    node = gpu_node(NODE, Condition("Ready", "True", "KubeletReady", "", _ago(55)))
    recorded = transition("True", _ago(55))
    stale = [ready_event("False", _ago(40)), ready_event("True", _ago(38))]
    inp = with_history(cluster([node], [], [*stale, ready_event("False", _ago(20))]), recorded)
    assert notready_loops(inp) == []


def test_a_node_being_deleted_or_not_yet_reporting_is_left_alone() -> None:
    gone = replace(
        gpu_node(
            NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(9)), created=_ago(12)
        ),
        deleting=_ago(1),
    )
    assert notready_loops(cluster([gone], [])) == []
    silent = replace(gone, deleting=None, conditions=())
    assert notready_loops(cluster([silent], [])) == []


def test_a_ready_condition_or_an_event_without_a_time_is_judged_without_error() -> None:
    node = gpu_node(
        NODE, Condition("Ready", "False", "KubeletNotReady", "", None), created=_ago(12)
    )
    assert notready_loops(cluster([node], [], [ready_event("True", _ago(11))])) == []
    timeless = replace(ready_event("False", _ago(9)), count=2, last_seen=None)
    assert notready_loops(cluster([node], [], [ready_event("True", _ago(11)), timeless])) == []


def node_lifecycle(uid: str, created: datetime, first_ready: datetime) -> Lifecycle:
    return Lifecycle(
        context="arn:aws:eks:us-west-2:111122223333:cluster/ml-prod",
        kind="Node",
        name=NODE,
        uid=uid,
        pool=POOL,
        instance_type=SHAPE,
        instance_id="i-0c1d2e3f4a5b6c7d8",
        image_id="",
        node_name="",
        nodeclaim="gpu-inference-k4x9z",
        created=created,
        first_seen=created,
        first_ready=first_ready,
        last_seen=NOW,
        deleting_since=None,
        termination_timestamp=None,
        disruption_reason=None,
        drifted=False,
        deleted_at=None,
        deleted_seen=None,
        last_unhealthy=None,
    )


def test_the_watchers_first_ready_tells_how_long_the_node_was_ready() -> None:
    # The NodeReady event has expired; the history saw the node turn Ready.
    node = gpu_node(
        NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(20)), created=_ago(27)
    )
    inp = DiagnosisInput(
        snapshot=cluster([node], []).snapshot,
        now=NOW,
        history=History(lifecycles=(node_lifecycle(f"uid-{NODE}", _ago(27), _ago(25)),)),
    )
    (loop,) = notready_loops(inp)
    assert "went NotReady 5 min after its first Ready" in loop.summary


def test_the_first_ready_of_an_earlier_node_of_the_same_name_is_not_this_nodes() -> None:
    node = gpu_node(
        NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(20)), created=_ago(27)
    )
    earlier = node_lifecycle("uid-gone", _ago(600), _ago(598))
    unknown = replace(node_lifecycle(f"uid-{NODE}", _ago(27), _ago(25)), first_ready=None)
    inp = DiagnosisInput(
        snapshot=cluster([node], []).snapshot,
        now=NOW,
        history=History(lifecycles=(earlier, unknown)),
    )
    (loop,) = notready_loops(inp)
    assert "went NotReady within minutes of joining" in loop.summary


def test_notready_in_the_same_second_as_the_first_ready_is_an_early_failure() -> None:
    (loop,) = notready_loops(failed_after_ready(timedelta(0), timedelta(minutes=20)))
    assert "went NotReady 0 s after its first Ready" in loop.summary


def test_a_ready_event_stamped_after_the_notready_transition_is_no_early_failure() -> None:
    # A kubelet clock ahead of the control plane's: NodeReady reads later than the
    # NotReady transition the API server stamped.
    node = gpu_node(
        NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(20)), created=_ago(25)
    )
    assert notready_loops(cluster([node], [], [ready_event("True", _ago(10))])) == []


def test_a_never_ready_node_without_a_creation_time_is_judged_without_error() -> None:
    node = replace(
        gpu_node(NODE, Condition("Ready", "False", "KubeletNotReady", "", _ago(9))), created=None
    )
    assert notready_loops(cluster([node], [])) == []


def test_a_mig_node_paused_mid_reconfigure_shows_its_paused_operands() -> None:
    labels = {
        **MIG,
        "nvidia.com/mig.config.state": "pending",
        "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
    }
    (loop,) = notready_loops(
        failed_after_ready(timedelta(minutes=8), timedelta(minutes=20), **labels)
    )
    shown = "\n".join(e.text for e in loop.evidence)
    assert "nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change" in shown


def test_a_bundle_without_a_kubelet_journal_is_said_to_have_none() -> None:
    # The node was collected, but its kubelet journal could not be read: the suspicion
    # stands, and the finding says why the journal did not settle it.
    inp = failed_after_ready(MIG_SUSPECT, timedelta(minutes=20), **MIG)
    collected = DiagnosisInput(
        snapshot=inp.snapshot,
        now=NOW,
        node_evidence={NODE: NodeEvidence(node=NODE, problems=("journal kubelet: timed out",))},
    )
    (loop,) = notready_loops(collected)
    assert "its bundle has no readable kubelet journal" in loop.summary
    shown = "\n".join(e.text for e in loop.evidence)
    assert "no readable kubelet journal" in shown
    assert "journal kubelet: timed out" in shown
    (uncollected,) = notready_loops(inp)
    assert "no readable kubelet journal" not in "\n".join(e.text for e in uncollected.evidence)


# -- replacement-churn: why a NodeClaim ended, and which ends still count ----------------------

UNDERUTILIZED = Condition("DisruptionReason", "True", "Underutilized", "", None)


def churns(inp: DiagnosisInput) -> list[Finding]:
    return [f for f in findings(inp, "churn", churn.rule) if f.id == REPLACEMENT_CHURN]


def ended_claims(
    ends: list[datetime],
    *,
    terminated_after: timedelta | None = None,
    conditions: tuple[Condition, ...] = (),
    disruption_event: bool = False,
) -> DiagnosisInput:
    """NodeClaims of gpu-inference still finalizing, each deleted at one of `ends`, with the
    repair annotation `terminated_after` the deletion, a DisruptionReason condition, and
    Karpenter's DisruptionTerminating event as told."""
    claims, events = [], []
    for i, ended in enumerate(ends):
        name = f"gpu-inference-c{i}x7m"
        node = f"ip-10-0-5{i}-14.us-west-2.compute.internal"
        claims.append(
            claim(
                name,
                node,
                ended - timedelta(hours=5),
                deleting=ended,
                terminated=ended + terminated_after if terminated_after is not None else None,
                conditions=conditions,
            )
        )
        if disruption_event:
            events.append(
                event(
                    "NodeClaim",
                    name,
                    "DisruptionTerminating",
                    "Disrupting NodeClaim: Underutilized",
                    ended - SECOND,
                )
            )
    return cluster([], claims, events)


def test_a_consolidation_told_only_by_its_event_is_consolidation() -> None:
    # The DisruptionReason condition is gone once the claim finalizes; the event remains.
    (found,) = churns(ended_claims([_ago(50), _ago(20)], disruption_event=True))
    assert "2 consolidation" in found.summary
    assert "manual" not in found.summary and "unknown" not in found.summary


def test_a_consolidation_told_only_by_its_condition_is_consolidation() -> None:
    (found,) = churns(ended_claims([_ago(50), _ago(20)], conditions=(UNDERUTILIZED,)))
    assert "2 consolidation" in found.summary


def test_claims_deleted_without_any_disruption_mark_are_manual_deletions() -> None:
    (found,) = churns(ended_claims([_ago(50), _ago(20)]))
    assert "2 manual deletion" in found.summary


@pytest.mark.parametrize("apart", [timedelta(seconds=5), -timedelta(seconds=5)])
def test_a_termination_annotation_within_five_seconds_of_the_deletion_is_a_repair(
    apart: timedelta,
) -> None:
    # Repair annotates "now" and deletes at once; churn leaves repairs to node-repair-loop.
    assert churns(ended_claims([_ago(50), _ago(20)], terminated_after=apart)) == []


def test_a_termination_annotation_six_seconds_after_the_deletion_is_not_a_repair() -> None:
    found = churns(ended_claims([_ago(50), _ago(20)], terminated_after=timedelta(seconds=6)))
    assert "2 manual deletion" in found[0].summary


def test_a_replacement_exactly_six_hours_ago_still_counts() -> None:
    window = NOW - REPLACEMENT_WINDOW
    (found,) = churns(ended_claims([window, _ago(20)], conditions=(UNDERUTILIZED,)))
    assert "2 nodes replaced" in found.summary


def test_a_replacement_just_over_six_hours_ago_has_left_the_window() -> None:
    window = NOW - REPLACEMENT_WINDOW
    assert churns(ended_claims([window - SECOND, _ago(20)], conditions=(UNDERUTILIZED,))) == []


def failed_launches(count: int) -> DiagnosisInput:
    """NodeClaims gone from the API that only Karpenter's launch failure still tells of
    (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/nodeclaim/lifecycle/events.go
    InsufficientCapacityErrorEvent): nothing says when each ended."""
    events = [
        event(
            "NodeClaim",
            f"gpu-inference-f{i}q2d",
            "InsufficientCapacityError",
            f"NodeClaim gpu-inference-f{i}q2d event: Failed to launch node claim, all requested "
            "instance types were unavailable during launch",
            _ago(40 - 15 * i),
            type_="Warning",
        )
        for i in range(count)
    ]
    return cluster([], [], events)


def test_claims_that_failed_to_launch_count_though_their_end_is_unknown() -> None:
    (found,) = churns(failed_launches(2))
    assert "2 registration failures" in found.summary
    assert found.severity == WARNING
    gone = [e.text for e in found.evidence if "is gone" in e.text]
    assert len(gone) == 2
    assert all("no sign of when it ended" in line and "None" not in line for line in gone)


def test_a_launch_failure_is_quoted_once_and_a_repeated_one_with_its_count() -> None:
    inp = failed_launches(2)
    first, second = inp.snapshot.events
    retried = replace(second, count=2, last_seen=_ago(25) + timedelta(minutes=3))
    (found,) = churns(cluster([], [], [first, retried]))
    quoted = {
        e.text.split(" on NodeClaim ")[1].split(" ")[0]: e
        for e in found.evidence
        if e.text.startswith("Warning InsufficientCapacityError")
    }
    assert "(x" not in quoted["gpu-inference-f0q2d"].text
    assert "(x2 since 2026-12-04T09:05:00Z)" in quoted["gpu-inference-f1q2d"].text
    assert quoted["gpu-inference-f1q2d"].time == retried.last_seen


def test_a_garbled_condition_transition_event_is_read_as_no_transition() -> None:
    # An event message cut short (the API server keeps at most 1 KiB of it).
    garbled = event(
        "NodeClaim",
        "gpu-inference-g7",
        "Ready",
        "Status condition transitioned, Type: Rea",
        _ago(30),
    )
    (found,) = churns(cluster([], [], [*failed_launches(2).snapshot.events, garbled]))
    assert "2 registration failures" in found.summary


def test_a_launched_claim_that_never_registered_has_no_lifetime_yet() -> None:
    launched = transition_event(
        "NodeClaim", "gpu-inference-f0q2d", "Launched", "Unknown", "True", "Launched", _ago(41)
    )
    (found,) = churns(cluster([], [], [*failed_launches(2).snapshot.events, launched]))
    assert "2 registration failures" in found.summary
    assert "median lifetime" not in found.summary


def test_one_failed_launch_is_no_churn() -> None:
    assert churns(failed_launches(1)) == []


# -- node-not-ready: settle time, joining grace, the urgent repair, the 20% guard --------------

# Karpenter v1.6 with the NodeRepair gate on: Ready=False or Unknown for 30 min is repaired
# (aws/karpenter-provider-aws v1.6.3 pkg/cloudprovider/cloudprovider.go RepairPolicies).
REPAIR_ON = KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true", version="1.6.3")


# The Ready conditions a node that is not Ready shows (kubernetes v1.34.4: the node lifecycle
# controller's pkg/controller/nodelifecycle/node_lifecycle_controller.go, and the kubelet's
# pkg/kubelet/nodestatus/setters.go `ReadyCondition` while the CNI is not up yet).
SILENT = ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
NEVER_POSTED = ("Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status.")
NO_CNI_YET = (
    "False",
    "KubeletNotReady",
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized",
)


def not_ready_nodes(
    down_since: datetime,
    *,
    created: datetime | None = None,
    healthy: int = 4,
    unhealthy: int = 1,
    events: list[Event] | None = None,
    ready: tuple[str, str, str] = SILENT,
) -> list[Finding]:
    """`unhealthy` long-lived GPU nodes not Ready since `down_since` (their kubelet gone
    silent unless `ready` says otherwise), among `healthy`."""
    nodes = [
        gpu_node(
            f"ip-10-0-9{i}-8.us-west-2.compute.internal",
            Condition("Ready", *ready, down_since),
            created=created,
        )
        for i in range(unhealthy)
    ] + [gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(healthy)]
    inp = cluster(nodes, [], events or [])
    inp = DiagnosisInput(snapshot=inp.snapshot, now=NOW, karpenter=REPAIR_ON)
    return [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]


def test_a_node_unknown_for_two_minutes_is_reported() -> None:
    (found,) = not_ready_nodes(NOW - SETTLE)
    assert "Ready=Unknown for 2m" in found.summary
    assert "kubelet stopped posting status" in found.summary


def test_a_node_unknown_for_under_two_minutes_is_a_blip_not_yet_reported() -> None:
    assert not_ready_nodes(NOW - SETTLE + SECOND) == []


@pytest.mark.parametrize("ready", [NEVER_POSTED, NO_CNI_YET], ids=["never-posted", "no-cni"])
def test_a_young_node_never_ready_is_left_to_join_for_ten_minutes(
    ready: tuple[str, str, str],
) -> None:
    down = _ago(3)
    assert not_ready_nodes(down, created=NOW - JOINING + SECOND, ready=ready) == []
    (found,) = not_ready_nodes(down, created=NOW - JOINING, ready=ready)
    assert "10m old" in found.summary


def test_a_young_node_whose_kubelet_went_silent_is_reported_without_its_events() -> None:
    """`Kubelet stopped posting node status.`: it posted, so it joined; its NodeReady event
    may be gone (events expire) or never sent (a kwok node has no kubelet to send it)."""
    (found,) = not_ready_nodes(_ago(3), created=NOW - JOINING + SECOND)
    assert "Ready=Unknown for 3m" in found.summary
    assert "kubelet stopped posting status" in found.summary


def test_a_young_node_that_failed_after_its_first_ready_is_named_once_by_notready_loop() -> None:
    name = "ip-10-0-90-8.us-west-2.compute.internal"
    was_ready = event(
        "Node",
        name,
        "NodeReady",
        f"Node {name} status is now: NodeReady",
        _ago(5),
        source="kubelet",
    )
    node = gpu_node(
        name,
        Condition(
            "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(3)
        ),
        created=_ago(6),
    )
    inp = DiagnosisInput(snapshot=cluster([node], [], [was_ready]).snapshot, now=NOW)
    both = diagnose(
        inp, rules=[("notready_loop", notready_loop.rule), ("not_ready", not_ready.rule)]
    )
    assert [f.id for f in both.findings] == [NOTREADY_LOOP]


def test_a_repair_ten_minutes_away_is_critical_and_further_is_a_warning() -> None:
    # Repair replaces it 30 min after the transition: 10 min left leaves just time to collect.
    (urgent,) = not_ready_nodes(NOW - timedelta(minutes=30) + URGENT)
    assert urgent.severity == CRITICAL
    assert urgent.deadline == NOW + URGENT
    assert "collect its evidence first" in urgent.summary
    (later,) = not_ready_nodes(NOW - timedelta(minutes=30) + URGENT + SECOND)
    assert later.severity == WARNING


def test_karpenter_repairs_up_to_twenty_percent_of_a_pool_and_holds_beyond() -> None:
    # ceil(20% of 10 nodes) = 2 may be repaired (kubernetes-sigs/karpenter v1.6.3
    # pkg/controllers/node/health/controller.go).
    (repaired,) = not_ready_nodes(_ago(5), healthy=8, unhealthy=2)
    assert repaired.deadline == _ago(5) + timedelta(minutes=30)
    (held,) = not_ready_nodes(_ago(5), healthy=7, unhealthy=3)
    assert held.deadline is None
    assert "held by the 20% guard (3 of 10 nodes unhealthy, 2 allowed)" in "\n".join(
        e.text for e in held.evidence
    )


def churn_of(*claims: Lifecycle, events: list[Event] | None = None) -> list[Finding]:
    inp = history_of(*claims)
    inp = DiagnosisInput(
        snapshot=replace(inp.snapshot, events=tuple(events or ())),
        now=NOW,
        history=inp.history,
    )
    return churns(inp)


def consolidated(i: int, lived: timedelta, ended: datetime) -> Lifecycle:
    return gone_claim(f"gpu-inference-m{i}", lived, ended, None, repaired=False)


def manually_deleted(i: int, lived: timedelta, ended: datetime) -> Lifecycle:
    return gone_claim(f"gpu-inference-d{i}", lived, ended, None, manual=True)


def test_nodes_that_lived_under_thirty_minutes_make_churn_a_warning() -> None:
    short = timedelta(minutes=30) - SECOND
    (found,) = churn_of(consolidated(1, short, _ago(90)), consolidated(2, short, _ago(40)))
    assert found.severity == WARNING
    assert "median node lifetime 29m" in found.summary


def test_nodes_that_lived_thirty_minutes_are_benign_consolidation() -> None:
    lived = timedelta(minutes=30)
    (found,) = churn_of(consolidated(1, lived, _ago(90)), consolidated(2, lived, _ago(40)))
    assert found.severity == INFO
    assert "2 nodes replaced in the last 1h 30m" in found.summary
    assert "median lifetime 30m" in found.summary


def test_one_replacement_is_ordinary_life() -> None:
    assert churn_of(consolidated(1, timedelta(minutes=5), _ago(40))) == []


def test_four_manual_deletions_in_an_hour_are_a_warning_and_three_are_not() -> None:
    lived = timedelta(hours=5)
    four = [manually_deleted(i, lived, _ago(50 - 10 * i)) for i in range(4)]
    (found,) = churn_of(*four)
    assert found.severity == WARNING
    assert "4.0 non-consolidation replacements/h" in found.summary
    (calmer,) = churn_of(*four[:3])
    assert calmer.severity == INFO
    assert "3 nodes replaced in the last 1h 0m (3.0/h)" in calmer.summary


def test_the_rate_is_taken_over_the_span_since_the_first_replacement() -> None:
    # Eight manual deletions over two hours: 4.0/h, a warning; over two hours and a second,
    # under it.
    lived = timedelta(hours=5)
    first = _ago(120)
    rest = [manually_deleted(i, lived, _ago(100 - 12 * i)) for i in range(1, 8)]
    (found,) = churn_of(manually_deleted(0, lived, first), *rest)
    assert "8 nodes replaced in the last 2h 0m (4.0/h)" in found.summary
    assert found.severity == WARNING
    (slower,) = churn_of(manually_deleted(0, lived, first - SECOND), *rest)
    assert slower.severity == INFO


def interrupted(i: int, ended: datetime) -> tuple[Lifecycle, Event]:
    name = f"gpu-inference-s{i}"
    notice = event(
        "NodeClaim",
        name,
        "TerminatingOnInterruption",
        f"Interruption triggered termination for the NodeClaim {name}",
        ended,
        type_="Warning",
    )
    return gone_claim(name, timedelta(hours=6), ended, None, manual=True), notice


def test_three_spot_interruptions_are_a_warning_and_two_are_not() -> None:
    three = [interrupted(i, _ago(170 - 50 * i)) for i in range(3)]
    (found,) = churn_of(*(c for c, _ in three), events=[e for _, e in three])
    assert "3 EC2/spot interruption" in found.summary
    assert "3 interruptions" in found.summary and found.severity == WARNING
    (two,) = churn_of(*(c for c, _ in three[:2]), events=[e for _, e in three[:2]])
    assert two.severity == INFO


# -- NodeClaims only their events remember, paired with their gone Nodes ----------------------


def disrupted_pair(i: int, when: datetime, node_after: timedelta) -> list[Event]:
    """Karpenter tells one consolidation on the NodeClaim and on its Node, worded alike
    (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/disruption/events/events.go)."""
    name, node = f"gpu-inference-e{i}", f"ip-10-0-7{i}-3.us-west-2.compute.internal"
    return [
        event(
            "NodeClaim", name, "DisruptionTerminating", "Disrupting NodeClaim: Underutilized", when
        ),
        event(
            "Node",
            node,
            "DisruptionTerminating",
            "Disrupting Node: Underutilized",
            when + node_after,
        ),
    ]


def test_a_gone_node_told_the_same_disruption_within_ten_seconds_was_that_claim() -> None:
    apart = timedelta(seconds=10)
    events = disrupted_pair(1, _ago(50), apart) + disrupted_pair(2, _ago(20), -apart)
    (found,) = churns(cluster([], [], events))
    assert "2 consolidation" in found.summary
    assert found.nodes == (
        "ip-10-0-71-3.us-west-2.compute.internal",
        "ip-10-0-72-3.us-west-2.compute.internal",
    )


def test_a_gone_node_told_a_disruption_eleven_seconds_apart_is_not_paired() -> None:
    apart = timedelta(seconds=11)
    events = disrupted_pair(1, _ago(50), apart) + disrupted_pair(2, _ago(20), -apart)
    (found,) = churns(cluster([], [], events))
    assert found.nodes == ()


REGISTERED = (
    "Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered"
)


def registered_pair(i: int, registered: datetime, node_after: timedelta) -> list[Event]:
    """A claim consolidated an hour after it registered; its Node, gone too, is known by
    the node controller's RegisteredNode event alone."""
    name, node = f"gpu-inference-r{i}", f"ip-10-0-8{i}-5.us-west-2.compute.internal"
    return [
        event("NodeClaim", name, "Registered", REGISTERED, registered),
        event(
            "Node",
            node,
            "RegisteredNode",
            f"Node {node} event: Registered Node {node} in Controller",
            registered + node_after,
            source="node-controller",
        ),
        event(
            "NodeClaim",
            name,
            "DisruptionTerminating",
            "Disrupting NodeClaim: Underutilized",
            registered + timedelta(hours=1),
        ),
    ]


def test_a_gone_node_registered_within_a_minute_of_its_claim_was_that_claim() -> None:
    minute = timedelta(seconds=60)
    events = registered_pair(1, _ago(150), minute) + registered_pair(2, _ago(100), -minute)
    (found,) = churns(cluster([], [], events))
    assert found.nodes == (
        "ip-10-0-81-5.us-west-2.compute.internal",
        "ip-10-0-82-5.us-west-2.compute.internal",
    )
    assert "median lifetime 1h 0m" in found.summary


def test_a_gone_node_registered_over_a_minute_from_the_claim_is_not_paired() -> None:
    late = timedelta(seconds=61)
    events = registered_pair(1, _ago(150), late) + registered_pair(2, _ago(100), -late)
    (found,) = churns(cluster([], [], events))
    assert found.nodes == ()


def spot_noticed(after_deletion: timedelta) -> DiagnosisInput:
    """Two claims deleted with no mark of their own; EC2's spot notice reached Karpenter's
    interruption queue `after_deletion` (aws/karpenter-provider-aws v1.6.3
    pkg/controllers/interruption/events/events.go SpotInterrupted)."""
    ends = [_ago(50), _ago(20)]
    inp = ended_claims(ends)
    notices = [
        event(
            "NodeClaim",
            name,
            "SpotInterrupted",
            "Spot interruption warning was triggered",
            ended + after_deletion,
            type_="Warning",
        )
        for name, ended in zip(inp.snapshot.nodeclaims, ends, strict=True)
    ]
    return cluster([], list(inp.snapshot.nodeclaims.values()), notices)


def test_a_spot_notice_within_five_seconds_of_the_deletion_caused_it() -> None:
    (found,) = churns(spot_noticed(timedelta(seconds=5)))
    assert "2 EC2/spot interruption" in found.summary


def test_a_spot_notice_six_seconds_after_the_deletion_is_an_echo_not_the_cause() -> None:
    (found,) = churns(spot_noticed(timedelta(seconds=6)))
    assert "2 manual deletion" in found.summary


# -- managed node groups: a repair read from the events a replaced node left -------------------

GROUP = "gpu-l40s"


def mng_replaced(
    gap: timedelta, *, replaced: int = 1, cordoned_now: bool = True, reason: str = "DCGMError"
) -> DiagnosisInput:
    """Node group gpu-l40s: `replaced` nodes each cordoned, then NotReady `gap` later and
    deleted, with no transition event left to say why; a live node of the group fails
    AcceleratedHardwareReady with `reason` now (cordoned, as MNG repair does first, or not).
    The kubelet and node controllers' events (kubernetes/kubernetes v1.33
    pkg/kubelet/kubelet_node_status.go NodeNotSchedulable, pkg/controller/util/node/
    controller_utils.go NodeNotReady and RemovingNode); MNG repair replaces an
    AcceleratedHardwareReady failure after 10 min by default (docs.aws.amazon.com/eks/latest/
    userguide/node-repair.html)."""
    live = replace(
        gpu_node(
            "ip-10-3-40-17.us-west-2.compute.internal",
            Condition("Ready", "True", "KubeletReady", "", _ago(30)),
            Condition(AHR, "False", reason, "GPU health check failed", _ago(6)),
        ),
        pool=GROUP,
        pool_kind="nodegroup",
        labels={"eks.amazonaws.com/nodegroup": GROUP, "nvidia.com/gpu.present": "true"},
        unschedulable=cordoned_now,
    )
    events = []
    for i in range(replaced):
        gone = f"ip-10-3-10{i}-212.us-west-2.compute.internal"
        cordoned = _ago(180 + 40 * i)
        said = f"Node {gone} status is now: "
        events += [
            event(
                "Node",
                gone,
                "RegisteredNode",
                f"Node {gone} event: Registered Node {gone} in Controller",
                cordoned - timedelta(minutes=4),
                source="node-controller",
            ),
            event(
                "Node",
                gone,
                "NodeNotSchedulable",
                said + "NodeNotSchedulable",
                cordoned,
                source="kubelet",
            ),
            event(
                "Node",
                gone,
                "NodeNotReady",
                said + "NodeNotReady",
                cordoned + gap,
                source="node-controller",
            ),
            event(
                "Node",
                gone,
                "RemovingNode",
                f"Node {gone} event: Removing Node {gone} from Controller",
                cordoned + gap + timedelta(seconds=30),
                source="node-controller",
            ),
        ]
    return cluster([live], [], events)


def test_a_managed_node_group_repair_read_from_events_names_the_group_and_its_cause() -> None:
    (loop,) = repair_loops(mng_replaced(timedelta(minutes=10)))
    assert loop.summary.startswith(
        "Node group gpu-l40s: 1 node replaced by EKS managed node group auto repair for "
        "AcceleratedHardwareReady=False (DCGMError)"
    )
    assert "median lifetime 14m" in loop.summary
    assert "monitoring plumbing, not the GPU" in loop.summary
    shown = "\n".join(e.text for e in loop.evidence)
    assert "Node ip-10-3-100-212.us-west-2.compute.internal is gone" in shown
    assert "ip-10-3-40-17.us-west-2.compute.internal: AcceleratedHardwareReady=False" in shown
    assert loop.nodes == (
        "ip-10-3-40-17.us-west-2.compute.internal",
        "ip-10-3-100-212.us-west-2.compute.internal",
    )


def test_a_managed_node_group_loop_on_a_hardware_reason_says_find_the_cause() -> None:
    (loop,) = repair_loops(mng_replaced(timedelta(minutes=10), reason="NvidiaXID79Error"))
    assert "pause repair on the node group while you find the cause" in loop.summary
    assert "monitoring plumbing" not in loop.summary


def test_without_a_cordoned_failing_node_a_cordon_and_shutdown_tells_no_repair() -> None:
    # Nothing left says why the gone nodes were cordoned: a drain by hand looks the same.
    ten = timedelta(minutes=10)
    (loop,) = repair_loops(mng_replaced(ten, replaced=2))
    assert "2 nodes replaced" in loop.summary
    assert repair_loops(mng_replaced(ten, replaced=2, cordoned_now=False)) == []


@pytest.mark.parametrize(
    "gap",
    [timedelta(minutes=8), timedelta(minutes=16)],
    ids=["two-minutes-early", "six-minutes-late"],
)
def test_a_cordon_to_shutdown_gap_near_the_repair_wait_is_the_groups_repair(gap: timedelta) -> None:
    (loop,) = repair_loops(mng_replaced(gap))
    assert "managed node group" in loop.summary
    assert "(inferred: no transition event left)" in "\n".join(e.text for e in loop.evidence)


@pytest.mark.parametrize(
    "gap",
    [timedelta(minutes=8) - SECOND, timedelta(minutes=16) + SECOND, timedelta(hours=2)],
    ids=["too-early", "too-late", "a-drain-hours-later"],
)
def test_a_cordon_to_shutdown_gap_far_from_the_repair_wait_is_not_a_repair(gap: timedelta) -> None:
    assert repair_loops(mng_replaced(gap)) == []


def test_nodes_being_deleted_or_without_a_ready_condition_are_not_reported() -> None:
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(40)
    )
    going = replace(gpu_node("ip-10-0-90-8.us-west-2.compute.internal", down), deleting=_ago(1))
    fresh = replace(gpu_node("ip-10-0-91-8.us-west-2.compute.internal"), conditions=())
    inp = replace(cluster([going, fresh], []), karpenter=REPAIR_ON)
    assert [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY] == []


def test_a_not_ready_node_without_a_transition_time_is_reported_for_an_unknown_time() -> None:
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", None
    )
    inp = replace(
        cluster([gpu_node("ip-10-0-90-8.us-west-2.compute.internal", down)], []),
        karpenter=REPAIR_ON,
    )
    (found,) = [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]
    assert "Ready=Unknown for an unknown time" in found.summary


def not_ready_of(*nodes: Node, events: list[Event] | None = None) -> Finding:
    inp = replace(cluster(list(nodes), [], events or []), karpenter=REPAIR_ON)
    (found,) = [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]
    return found


def karpenter_ready_transition(node: str, old: str, new: str, when: datetime) -> Event:
    # Karpenter publishes the Node's condition changes too (the corpus's drift rollout,
    # kubernetes-sigs/karpenter v1.6.3 with awslabs/operatorpkg status/controller.go).
    reason = "KubeletReady" if new == "True" else "NodeStatusUnknown"
    return event(
        "Node",
        node,
        "Ready",
        f"Status condition transitioned, Type: Ready, Status: {old} -> {new}, Reason: {reason}",
        when,
    )


YOUNG = "ip-10-0-93-8.us-west-2.compute.internal"


def young_down(*events: Event, ready: tuple[str, str, str] = SILENT) -> list[Finding]:
    node = gpu_node(YOUNG, Condition("Ready", *ready, _ago(3)), created=_ago(6))
    inp = replace(cluster([node], [], list(events)), karpenter=REPAIR_ON)
    return [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]


def test_a_young_node_karpenter_saw_ready_is_reported_at_once() -> None:
    (found,) = young_down(karpenter_ready_transition(YOUNG, "False", "True", _ago(5)))
    assert found.nodes == (YOUNG,)


def test_a_young_node_never_seen_ready_is_still_joining() -> None:
    joining = karpenter_ready_transition(YOUNG, "Unknown", "False", _ago(3))
    assert young_down(joining, ready=NO_CNI_YET) == []
    assert young_down(ready=NEVER_POSTED) == []


def test_a_young_node_whose_kubelet_stopped_posting_is_past_joining() -> None:
    (found,) = young_down(karpenter_ready_transition(YOUNG, "True", "Unknown", _ago(3)))
    assert found.nodes == (YOUNG,)


def test_a_not_ready_node_without_a_creation_time_is_reported() -> None:
    down = Condition("Ready", "False", "KubeletNotReady", "PLEG is not healthy", _ago(20))
    found = not_ready_of(replace(gpu_node(YOUNG, down), created=None))
    assert "the container runtime stopped answering (PLEG)" in found.summary


def test_the_finding_quotes_the_condition_its_fate_and_the_cordon() -> None:
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(5)
    )
    found = not_ready_of(replace(gpu_node(YOUNG, down), unschedulable=True))
    shown = "\n".join(e.text for e in found.evidence)
    assert shown.count("replaces it at") == 1
    assert "; Karpenter repair (30m toleration) replaces it at 2026-12-04T09:55:00Z\n" in shown
    assert f"Node {YOUNG} is cordoned" in shown


def test_the_node_events_of_the_hour_before_it_went_down_are_quoted() -> None:
    since = _ago(30)
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", since
    )
    said = f"Node {YOUNG} status is now: "
    events = [
        event(
            "Node",
            YOUNG,
            "Starting",
            "Starting kubelet.",
            since - timedelta(minutes=61),
            source="kubelet",
        ),
        event(
            "Node",
            YOUNG,
            "Rebooted",
            f"Node {YOUNG} has been rebooted, boot id: 3f1c",
            since - timedelta(hours=1),
            source="kubelet",
            type_="Warning",
        ),
        event(
            "Node",
            YOUNG,
            "NodeReady",
            said + "NodeReady",
            since - timedelta(minutes=59),
            source="kubelet",
        ),
        event(
            "Node",
            YOUNG,
            "NodeHasSufficientMemory",
            said + "NodeHasSufficientMemory",
            since - timedelta(minutes=20),
            source="kubelet",
        ),
        event(
            "Node", YOUNG, "NodeNotReady", said + "NodeNotReady", since, source="node-controller"
        ),
    ]
    found = not_ready_of(gpu_node(YOUNG, down), events=events)
    quoted = [e.text.split(" on Node")[0] for e in found.evidence if e.source == "event"]
    assert quoted == ["Warning Rebooted", "Normal NodeReady", "Normal NodeNotReady"]


def test_the_last_four_node_events_are_quoted() -> None:
    since = _ago(30)
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", since
    )
    said = f"Node {YOUNG} status is now: "
    events = [
        event(
            "Node",
            YOUNG,
            reason,
            said + reason,
            since - timedelta(minutes=50 - 10 * i),
            source="kubelet",
        )
        for i, reason in enumerate(
            ("NodeNotSchedulable", "Rebooted", "NodeReady", "Rebooted", "NodeNotSchedulable")
        )
    ]
    found = not_ready_of(gpu_node(YOUNG, down), events=events)
    assert len([e for e in found.evidence if e.source == "event"]) == 4


def test_three_nodes_are_named_and_more_are_counted() -> None:
    down = Condition(
        "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(5)
    )
    nodes = [gpu_node(f"ip-10-0-9{i}-8.us-west-2.compute.internal", down) for i in range(4)]
    healthy = [gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(16)]
    assert "more" not in not_ready_of(*nodes[:3], *healthy).summary
    four = not_ready_of(*nodes, *healthy).summary
    assert "; 1 more" in four and nodes[3].name not in four
    assert not_ready_of(*nodes, *healthy).summary.startswith(
        "NodePool gpu-inference: 4 GPU nodes NotReady"
    )


def test_a_node_the_mig_hook_explains_is_not_reported_again_as_not_ready() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, node_evidence={node.name: bundle(node)})
    assert [f for f in findings(inp, "not_ready", not_ready.rule) if node.name in f.nodes] == []


# -- managed node group repair thresholds ("above which node auto repair actions will stop":
# docs.aws.amazon.com/eks/latest/APIReference/API_NodeRepairConfig.html) -----------------------


def group_not_ready(nodes: int, unhealthy: int, **config: int) -> Finding:
    """`unhealthy` of the group's `nodes` went Ready=Unknown 5 min ago; repair is enabled with
    `config`'s thresholds (describe-nodegroup's nodeRepairConfig)."""
    members = []
    for i in range(nodes):
        down = Condition(
            "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", _ago(5)
        )
        conditions = (down,) if i < unhealthy else ()
        members.append(
            replace(
                gpu_node(f"ip-10-3-2{i:02d}-7.us-west-2.compute.internal", *conditions),
                pool=GROUP,
                pool_kind="nodegroup",
                labels={"eks.amazonaws.com/nodegroup": GROUP, "nvidia.com/gpu.present": "true"},
            )
        )
    described = {
        "nodegroup": {
            "nodegroupName": GROUP,
            "clusterName": "ml-prod",
            "nodeRepairConfig": {"enabled": True, **config},
        }
    }
    inp = replace(
        cluster(members, []), nodegroups={GROUP: NodeGroupRepair.from_describe(described)}
    )
    (found,) = [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]
    return found


def held(found: Finding) -> bool:
    return found.deadline is None and "repair held" in "\n".join(e.text for e in found.evidence)


def test_a_group_repairs_up_to_its_unhealthy_node_count_and_stops_beyond() -> None:
    assert group_not_ready(10, 2, maxUnhealthyNodeThresholdCount=2).deadline == _ago(5) + timedelta(
        minutes=30
    )
    assert held(group_not_ready(10, 3, maxUnhealthyNodeThresholdCount=2))
    assert group_not_ready(10, 3).summary.startswith("Node group gpu-l40s: 3 GPU nodes NotReady")


def test_a_group_repairs_up_to_its_unhealthy_percentage_and_stops_beyond() -> None:
    assert group_not_ready(10, 2, maxUnhealthyNodeThresholdPercentage=20).deadline is not None
    assert held(group_not_ready(10, 3, maxUnhealthyNodeThresholdPercentage=20))


def test_without_thresholds_a_small_group_always_repairs_a_larger_one_up_to_a_fifth() -> None:
    # The user guide: repair stops when more than five nodes and more than 20% are unhealthy.
    assert group_not_ready(5, 5).deadline is not None
    assert held(group_not_ready(6, 2))
    assert group_not_ready(10, 2).deadline is not None
    assert held(group_not_ready(10, 3))


# -- who repairs a NotReady node, and when ----------------------------------------------------


def outlook_of(node: Node, karpenter: KarpenterSettings | None, *history: Lifecycle) -> Finding:
    inp = DiagnosisInput(
        snapshot=cluster(
            [node, *(gpu_node(f"ip-10-0-6{i}-2.us-west-2.compute.internal") for i in range(4))], []
        ).snapshot,
        now=NOW,
        history=History(lifecycles=history),
        karpenter=karpenter,
    )
    (found,) = [f for f in findings(inp, "not_ready", not_ready.rule) if f.id == NODE_NOT_READY]
    return found


UNKNOWN_SINCE = _ago(5)
DOWN = gpu_node(
    "ip-10-0-90-8.us-west-2.compute.internal",
    Condition(
        "Ready",
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
        UNKNOWN_SINCE,
    ),
)


def test_with_the_karpenter_deployment_unread_the_repair_is_conditional() -> None:
    found = outlook_of(DOWN, None)
    assert found.deadline is None
    assert "NodeRepair gate unknown" in found.summary
    assert "if it is on, repair acts at 2026-12-04T09:55:00Z" in "\n".join(
        e.text for e in found.evidence
    )


def test_repairs_seen_in_the_pool_prove_the_gate_is_on() -> None:
    found = outlook_of(DOWN, None, gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)))
    assert found.deadline == UNKNOWN_SINCE + timedelta(minutes=30)
    assert "NodeRepair evidently on" in "\n".join(e.text for e in found.evidence)


def test_karpenter_with_node_repair_off_replaces_nothing() -> None:
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")
    found = outlook_of(DOWN, off)
    assert found.deadline is None
    assert "Karpenter with NodeRepair=false: no automatic repair" in found.summary


def test_auto_mode_repairs_whatever_the_gate_says() -> None:
    auto = replace(DOWN, pool_kind="auto")
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")
    found = outlook_of(auto, off)
    assert found.deadline == UNKNOWN_SINCE + timedelta(minutes=30)
    assert "EKS Auto Mode repair (always on)" in "\n".join(e.text for e in found.evidence)


def test_a_node_outside_any_pool_has_no_automatic_repair() -> None:
    found = outlook_of(replace(DOWN, pool="", pool_kind=""), REPAIR_ON)
    assert found.deadline is None
    assert "no Karpenter NodePool or node group: no automatic repair" in found.summary


def expired(lived: timedelta) -> list[Finding]:
    """Two claims of a NodePool with expireAfter 24h, deleted `lived` after creation with no
    other mark (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/nodeclaim/expiration)."""
    ends = [_ago(50), _ago(20)]
    inp = ended_claims(ends)
    claims = [
        replace(c, created=ended - lived)
        for c, ended in zip(inp.snapshot.nodeclaims.values(), ends, strict=True)
    ]
    pool = NodePool(name=POOL, expire_after="24h")
    snapshot = replace(cluster([], claims).snapshot, nodepools={POOL: pool})
    return churns(DiagnosisInput(snapshot=snapshot, now=NOW))


def test_a_claim_deleted_at_its_expire_after_expired() -> None:
    (found,) = expired(timedelta(hours=24))
    assert "2 expiration (expireAfter)" in found.summary


def test_a_claim_deleted_a_second_before_its_expire_after_did_not_expire() -> None:
    (found,) = expired(timedelta(hours=24) - SECOND)
    assert "2 manual deletion" in found.summary


# -- one node's timeline ----------------------------------------------------------------------

STORY = "ip-10-0-44-21.us-west-2.compute.internal"
PROVIDER = "aws:///us-west-2b/i-0a1b2c3d4e5f60718"


def story() -> DiagnosisInput:
    """A node repaired for DCGMError, everything the cluster and the history say about it,
    beside a neighbour whose own story must not leak in."""
    node = replace(
        gpu_node(
            STORY,
            Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", _ago(58)),
            Condition(AHR, "False", "DCGMError", "libdcgm.so not Found", _ago(13)),
            Condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "", None),
            created=_ago(60),
        ),
        instance_id="i-0a1b2c3d4e5f60718",
        provider_id=PROVIDER,
        deleting=_ago(3),
    )
    neighbour = gpu_node("ip-10-0-45-22.us-west-2.compute.internal")
    mine = claim(
        "gpu-inference-t1",
        STORY,
        _ago(61),
        deleting=_ago(3),
        terminated=_ago(3),
        conditions=(
            Condition("Launched", "True", "Launched", "", _ago(60.5)),
            Condition("Drifted", "False", "NotDrifted", "", _ago(60.5)),
            Condition("Initialized", "True", "Initialized", "", None),
        ),
    )
    by_provider = replace(claim("gpu-inference-t2", "", _ago(61.5)), provider_id=PROVIDER)
    theirs = claim("gpu-inference-n1", neighbour.name, _ago(200))
    gone = replace(gone_claim("gpu-inference-t0", timedelta(hours=2), _ago(90)), node_name=STORY)
    theirs_gone = replace(
        gone_claim("gpu-inference-n0", timedelta(hours=2), _ago(80)), node_name=neighbour.name
    )
    said = f"Node {STORY} status is now: "
    events = [
        event("Node", STORY, "NodeReady", said + "NodeReady", _ago(58), source="kubelet"),
        replace(
            event("Node", STORY, "Starting", "Starting kubelet.", _ago(59), source="kubelet"),
            count=2,
            last_seen=_ago(50),
        ),
        event("Node", neighbour.name, "NodeReady", "neighbour", _ago(57), source="kubelet"),
        event(
            "NodeClaim",
            "gpu-inference-t1",
            "DisruptionBlocked",
            "Node is deleting or marked for deletion",
            _ago(2),
        ),
        event(
            "NodeClaim",
            "gpu-inference-t0",
            "Finalized",
            "Finalized karpenter.sh/termination",
            _ago(89),
        ),
        event("NodeClaim", "gpu-inference-n1", "Launched", "neighbour's claim", _ago(199)),
        event("Pod", STORY, "Scheduled", "a pod of the same name", _ago(40)),
        replace(
            event("Node", STORY, "Rebooted", "no time", _ago(1)), first_seen=None, last_seen=None
        ),
    ]
    history = History(
        transitions=(replace(transition("True", _ago(58)), name=STORY),),
        lifecycles=(
            replace(
                node_lifecycle(f"uid-{STORY}", _ago(60), _ago(58)), name=STORY, deleted_at=_ago(1)
            ),
            gone,
            theirs_gone,
        ),
    )
    return DiagnosisInput(
        snapshot=cluster([node, neighbour], [mine, by_provider, theirs], events).snapshot,
        now=NOW,
        history=history,
    )


def test_a_nodes_timeline_tells_its_whole_story_in_order_and_nothing_else() -> None:
    lines = [(e.time, e.source, e.text) for e in node_timeline(story(), STORY)]
    ready = f"Node {STORY} status is now: NodeReady"
    assert lines == [
        (_ago(90) + timedelta(seconds=40), "history", "NodeClaim gpu-inference-t0 gone"),
        (
            _ago(89),
            "event",
            "NodeClaim gpu-inference-t0: Normal Finalized [karpenter]: Finalized "
            "karpenter.sh/termination",
        ),
        (_ago(61.5), "nodeclaim", "NodeClaim gpu-inference-t2 created"),
        (_ago(61), "nodeclaim", "NodeClaim gpu-inference-t1 created"),
        (_ago(60.5), "nodeclaim", "NodeClaim gpu-inference-t1 Launched"),
        (_ago(60), "node", "Node created in gpu-inference (g6e.12xlarge, i-0a1b2c3d4e5f60718)"),
        (
            _ago(59),
            "event",
            "Normal Starting [kubelet]: Starting kubelet. (x2, last 2026-12-04T08:40:00Z)",
        ),
        (_ago(58), "condition", "Ready=True KubeletReady: kubelet is posting ready status (still)"),
        (_ago(58), "event", f"Normal NodeReady [kubelet]: {ready}"),
        (_ago(58), "history", "Ready became True (KubeletReady)"),
        (_ago(58), "history", "first Ready"),
        (
            _ago(13),
            "condition",
            "AcceleratedHardwareReady=False DCGMError: libdcgm.so not Found (still)",
        ),
        (_ago(3), "node", "Node deletion requested"),
        (
            _ago(3),
            "nodeclaim",
            "NodeClaim gpu-inference-t1 deletion requested; termination-timestamp "
            "2026-12-04T09:27:00Z",
        ),
        (
            _ago(2),
            "event",
            "NodeClaim gpu-inference-t1: Normal DisruptionBlocked [karpenter]: Node is deleting "
            "or marked for deletion",
        ),
        (_ago(1), "history", "Node gone"),
    ]


def kubelet_journal(lines: int) -> JournalParse:
    start = _ago(60)
    text = "".join(
        f"{(start + timedelta(seconds=i)).strftime('%Y-%m-%dT%H:%M:%S.%f')}+0000 {STORY} "
        f"kubelet[2345]: E1204 failed to sync pod {i}\n"
        for i in range(lines)
    )
    return parse_journal(text, "journal:kubelet")


def test_a_timeline_keeps_the_latest_three_hundred_journal_lines() -> None:
    inp = replace(
        story(),
        node_evidence={STORY: NodeEvidence(node=STORY, journals={"kubelet": kubelet_journal(301)})},
    )
    journal = [e for e in node_timeline(inp, STORY) if e.source == "journal:kubelet"]
    assert len(journal) == 300
    assert journal[0].text == "kubelet: E1204 failed to sync pod 1"
    assert (
        len(
            [e for e in node_timeline(inp, STORY, journal_lines=2) if e.source == "journal:kubelet"]
        )
        == 2
    )


def test_a_consolidation_in_the_pool_proves_nothing_about_the_repair_gate() -> None:
    found = outlook_of(
        DOWN,
        None,
        gone_claim("gpu-inference-m1", timedelta(hours=3), _ago(120), None, repaired=False),
    )
    assert found.deadline is None
    assert "NodeRepair gate unknown" in found.summary


def mng_outlook(condition: str, **settings: Any) -> RepairOutlook:
    """repair_outlook for the live node of mng_replaced's group (AcceleratedHardwareReady
    DCGMError for 6 min, Ready for 30), its group settings as describe-nodegroup gives them."""
    inp = mng_replaced(timedelta(minutes=10), replaced=0)
    if settings:
        described = {"nodegroup": {"nodegroupName": GROUP, "nodeRepairConfig": settings}}
        inp = replace(inp, nodegroups={GROUP: NodeGroupRepair.from_describe(described)})
    node = next(iter(inp.snapshot.nodes.values()))
    return repair_outlook(inp, node, condition)


def test_a_group_without_its_settings_repairs_ready_by_the_default_if_enabled() -> None:
    down = replace(
        gpu_node(
            "ip-10-3-41-9.us-west-2.compute.internal",
            Condition("Ready", "Unknown", "NodeStatusUnknown", "", _ago(5)),
        ),
        pool=GROUP,
        pool_kind="nodegroup",
    )
    outlook = repair_outlook(cluster([down], []), down, "Ready")
    assert outlook.deadline is None
    assert outlook.would_be == _ago(5) + timedelta(minutes=30)
    assert outlook.action == "Replace"
    assert "Replace after 30m if its node repair is enabled" in outlook.who
    timeless = replace(
        down, conditions=(Condition("Ready", "Unknown", "NodeStatusUnknown", "", None),)
    )
    assert repair_outlook(cluster([timeless], []), timeless, "Ready").would_be is None


def test_a_group_without_its_settings_takes_no_action_on_dcgm_by_default() -> None:
    outlook = mng_outlook(AHR)
    assert (outlook.deadline, outlook.would_be) == (None, None)
    assert "the default takes no action for DCGM reasons" in outlook.who


def test_a_group_seen_replacing_nodes_for_the_condition_is_evidently_on() -> None:
    inp = mng_replaced(timedelta(minutes=10))
    node = next(n for n in inp.snapshot.nodes.values() if n.unschedulable)
    outlook = repair_outlook(inp, node, AHR)
    assert outlook.deadline == _ago(6) + timedelta(minutes=10)
    assert "evidently on" in outlook.who


def test_a_group_override_replaces_after_its_wait_and_a_disabled_group_never() -> None:
    override = {
        "nodeMonitoringCondition": AHR,
        "nodeUnhealthyReason": "DCGMError",
        "minRepairWaitTimeMins": 15,
        "repairAction": "Replace",
    }
    on = mng_outlook(AHR, enabled=True, nodeRepairConfigOverrides=[override])
    assert on.deadline == _ago(6) + timedelta(minutes=15)
    assert on.fate(NOW) == (
        "managed node group gpu-l40s repair (override AcceleratedHardwareReady/DCGMError → "
        "Replace after 15m) replaces it at 2026-12-04T09:39:00Z"
    )
    off = mng_outlook(AHR, enabled=False, nodeRepairConfigOverrides=[override])
    assert off.deadline is None and off.action == "NoAction"
    assert "its nodeRepairConfig is not enabled" in off.who


def test_a_node_without_the_condition_has_no_repair_for_it() -> None:
    outlook = mng_outlook("StorageReady")
    assert outlook.who == "no StorageReady condition" and outlook.deadline is None


def test_an_enabled_group_without_an_override_takes_no_action_on_dcgm() -> None:
    outlook = mng_outlook(AHR, enabled=True)
    assert (outlook.deadline, outlook.action) == (None, "NoAction")
    assert "does not repair it: the default takes no action for DCGM reasons" in outlook.who


def test_a_group_repair_without_a_transition_time_has_no_deadline() -> None:
    inp = mng_replaced(timedelta(minutes=10))
    node = next(n for n in inp.snapshot.nodes.values() if n.unschedulable)
    timeless = replace(
        node, conditions=tuple(replace(c, last_transition=None) for c in node.conditions)
    )
    seen = repair_outlook(inp, timeless, AHR)
    assert seen.deadline is None and "evidently on" in seen.who
    override = {
        "nodeMonitoringCondition": AHR,
        "nodeUnhealthyReason": "DCGMError",
        "minRepairWaitTimeMins": 15,
        "repairAction": "Replace",
    }
    config = {"enabled": True, "nodeRepairConfigOverrides": [override]}
    described = {"nodegroup": {"nodegroupName": GROUP, "nodeRepairConfig": config}}
    configured = replace(inp, nodegroups={GROUP: NodeGroupRepair.from_describe(described)})
    assert repair_outlook(configured, timeless, AHR).deadline is None


def test_a_group_override_to_take_no_action_sets_no_deadline() -> None:
    override = {
        "nodeMonitoringCondition": AHR,
        "nodeUnhealthyReason": "DCGMError",
        "minRepairWaitTimeMins": 10,
        "repairAction": "NoAction",
    }
    outlook = mng_outlook(AHR, enabled=True, nodeRepairConfigOverrides=[override])
    assert (outlook.deadline, outlook.action) == (None, "NoAction")
    assert (
        "does not repair it: override AcceleratedHardwareReady/DCGMError → NoAction" in outlook.who
    )


def test_repairs_seen_in_another_group_prove_nothing_for_this_one() -> None:
    inp = mng_replaced(timedelta(minutes=10))
    node = next(n for n in inp.snapshot.nodes.values() if n.unschedulable)
    elsewhere = replace(
        node, name="ip-10-3-77-1.us-west-2.compute.internal", pool="gpu-h100", unschedulable=False
    )
    outlook = repair_outlook(
        replace(
            inp,
            snapshot=replace(inp.snapshot, nodes={**inp.snapshot.nodes, elsewhere.name: elsewhere}),
        ),
        elsewhere,
        AHR,
    )
    assert "evidently on" not in outlook.who
    assert "the default takes no action for DCGM reasons" in outlook.who


def transition_event(
    kind: str, name: str, type_: str, old: str, new: str, reason: str, when: datetime
) -> Event:
    """Karpenter's event for a condition change, on its NodeClaims and on Nodes alike (the
    corpus's drift rollout; awslabs/operatorpkg status/controller.go)."""
    message = (
        f"Status condition transitioned, Type: {type_}, Status: {old} -> {new}, Reason: {reason}"
    )
    return event(kind, name, type_, message, when)


def drained_after_dcgm(i: int, failed: datetime, drained_after: timedelta) -> list[Event]:
    """A NodeClaim and its Node, both gone: registered together, the Node's DCGMError, then
    the claim drained `drained_after` the failure; no event names the cause."""
    name, node = f"gpu-inference-h{i}", f"ip-10-0-12{i}-4.us-west-2.compute.internal"
    registered = failed - timedelta(minutes=20)
    return [
        transition_event(
            "NodeClaim", name, "Registered", "Unknown", "True", "Registered", registered
        ),
        event(
            "Node",
            node,
            "RegisteredNode",
            f"Node {node} event: Registered Node {node} in Controller",
            registered + timedelta(seconds=5),
            source="node-controller",
        ),
        transition_event("Node", node, AHR, "True", "False", "DCGMError", failed),
        transition_event(
            "NodeClaim", name, "Drained", "Unknown", "True", "Drained", failed + drained_after
        ),
    ]


def test_a_claim_drained_from_two_minutes_before_the_repair_deadline_was_repaired() -> None:
    # AcceleratedHardwareReady=False is repaired after 10 min; the drain may show 2 min early.
    early = timedelta(minutes=8)
    events = drained_after_dcgm(1, _ago(100), early) + drained_after_dcgm(2, _ago(50), early)
    assert churns(cluster([], [], events)) == []
    (loop,) = repair_loops(cluster([], [], events))
    assert (
        "2 nodes replaced by Karpenter repair for AcceleratedHardwareReady=False (DCGMError)"
        in loop.summary
    )


def test_a_claim_drained_earlier_than_that_was_not_repaired() -> None:
    early = timedelta(minutes=8) - SECOND
    events = drained_after_dcgm(1, _ago(100), early) + drained_after_dcgm(2, _ago(50), early)
    (found,) = churns(cluster([], [], events))
    assert "2 unknown cause" in found.summary


# -- mig-config-failed: a reconfigure still running, or stuck ---------------------------------


def test_a_pending_mig_reconfigure_is_stuck_only_after_fifteen_minutes() -> None:
    # mig-manager's reconfigure takes minutes; the node's age is the only clock a snapshot has.
    inp = sim_input("mig-hook-notready")
    pending = relabel(sibling_node(inp), **{"nvidia.com/mig.config.state": "pending"})
    at_edge = replace(pending, created=inp.now - timedelta(minutes=15))
    assert "mig-config-failed" not in about(run(with_node(inp, at_edge)), at_edge.name)
    past = replace(pending, created=inp.now - timedelta(minutes=15) - SECOND)
    stuck = about(run(with_node(inp, past)), past.name)["mig-config-failed"]
    assert "nvidia.com/mig.config.state=pending" in stuck.summary
    assert "the reconfigure never finished" in stuck.summary


# -- mig-layout-mismatch: the device plugin's first minutes -----------------------------------


def test_a_mig_node_is_given_five_minutes_to_advertise_its_slices() -> None:
    inp = sim_input("mig-hook-notready")
    empty = replace(sibling_node(inp), gpu_allocatable={}, gpu_capacity={})
    joining = replace(empty, created=inp.now - timedelta(minutes=5) + SECOND)
    assert "mig-layout-mismatch" not in about(run(with_node(inp, joining)), joining.name)
    late = replace(empty, created=inp.now - timedelta(minutes=5))
    layout = about(run(with_node(inp, late)), late.name)["mig-layout-mismatch"]
    assert "advertises no MIG resources" in layout.summary


def test_a_gone_node_the_history_saw_end_still_pairs_with_its_claim() -> None:
    apart = timedelta(seconds=5)
    events = disrupted_pair(1, _ago(50), apart) + disrupted_pair(2, _ago(20), apart)
    ended_node = replace(
        node_lifecycle("uid-ip-10-0-71-3", _ago(300), _ago(298)),
        name="ip-10-0-71-3.us-west-2.compute.internal",
        deleted_at=_ago(49),
    )
    inp = replace(cluster([], [], events), history=History(lifecycles=(ended_node,)))
    (found,) = churns(inp)
    assert found.nodes == (
        "ip-10-0-71-3.us-west-2.compute.internal",
        "ip-10-0-72-3.us-west-2.compute.internal",
    )


def test_replacements_are_told_in_the_order_they_ended() -> None:
    (found,) = churns(ended_claims([_ago(20), _ago(50)], conditions=(UNDERUTILIZED,)))
    assert found.nodes == (
        "ip-10-0-51-14.us-west-2.compute.internal",
        "ip-10-0-50-14.us-west-2.compute.internal",
    )


def test_a_recorded_repair_quotes_the_transition_of_its_own_condition() -> None:
    # The history recorded the DCGMError the claim was repaired for; the Node's events also
    # show its Ready going False later, during the drain.
    claims = [
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    ]
    events = []
    for c in claims:
        assert c.deleting_since is not None
        failed = c.deleting_since - timedelta(minutes=10)
        events += [
            transition_event(
                "Node", c.node_name, AHR, "True", "False", "DCGMDiagnosticFailure", failed - HOUR
            ),
            transition_event(
                "Node", c.node_name, AHR, "False", "True", "NvidiaGPUIsReady", failed - HOUR / 2
            ),
            transition_event("Node", c.node_name, AHR, "True", "False", "DCGMError", failed),
            transition_event(
                "Node",
                c.node_name,
                "Ready",
                "True",
                "False",
                "KubeletNotReady",
                c.deleting_since + SECOND,
            ),
        ]
    inp = replace(cluster([], [], events), history=History(lifecycles=tuple(claims)))
    (loop,) = repair_loops(inp)
    shown = "\n".join(e.text for e in loop.evidence)
    assert "Type: AcceleratedHardwareReady, Status: True -> False, Reason: DCGMError" in shown
    assert "Type: Ready, Status: True -> False" not in shown
    # The last time it failed, not an earlier failure it recovered from.
    assert "DCGMDiagnosticFailure" not in shown


# -- repair-risk: a pool small enough that the 20% guard never holds a repair ------------------


def pool_risk(size: int, *, failing: int = 0) -> list[Finding]:
    dcgm = Condition(AHR, "False", "DCGMError", "libdcgm.so not Found", _ago(4))
    nodes = [
        gpu_node(f"ip-10-0-3{i}-5.us-west-2.compute.internal", *((dcgm,) if i < failing else ()))
        for i in range(size)
    ]
    inp = replace(cluster(nodes, []), karpenter=REPAIR_ON)
    return [
        f
        for f in findings(inp, "repair_risk", repair_risk.rule)
        if f.id == REPAIR_RISK and "20% guard" in f.summary
    ]


def test_a_pool_of_five_gpu_nodes_with_repair_on_is_at_risk_and_six_is_not() -> None:
    # ceil(20% × 5) = 1: one unhealthy node at a time is always repaired.
    (risk,) = pool_risk(5)
    assert risk.severity == INFO
    assert "allowance 1" in risk.summary
    assert pool_risk(6) == []


def test_a_small_pool_with_a_node_failing_now_is_a_warning() -> None:
    (risk,) = pool_risk(3, failing=1)
    assert risk.severity == WARNING
    assert "; 1 node(s) match a repair policy now" in risk.summary


# -- repair-blocked: the guard's event of the last hour ---------------------------------------


def blocked_seen(last: datetime) -> list[Finding]:
    """Karpenter's NodeRepairBlocked on a Node of gpu-inference, last refreshed at `last`
    (the pool is healthy now; kubernetes-sigs/karpenter v1.6.3 pkg/controllers/node/health/
    events.go)."""
    node = gpu_node("ip-10-0-30-5.us-west-2.compute.internal")
    blocked = event(
        "Node",
        node.name,
        "NodeRepairBlocked",
        "more than 20% nodes are unhealthy in the nodepool",
        last - timedelta(minutes=15),
        type_="Warning",
        count=4,
        last=last,
    )
    inp = replace(cluster([node], [], [blocked]), karpenter=REPAIR_ON)
    return [
        f for f in findings(inp, "repair_blocked", repair_blocked.rule) if f.id == REPAIR_BLOCKED
    ]


def test_a_repair_blocked_event_refreshed_an_hour_ago_still_counts() -> None:
    (found,) = blocked_seen(NOW - timedelta(hours=1))
    assert found.nodepool == POOL


def test_a_repair_blocked_event_older_than_an_hour_is_history() -> None:
    assert blocked_seen(NOW - timedelta(hours=1) - SECOND) == []


# -- NodeClaims gone from the list: when they ended, and why -----------------------------------


def drained_unexplained(i: int, launched: datetime, lived: timedelta) -> list[Event]:
    name = f"gpu-inference-x{i}"
    registered = launched + timedelta(minutes=1)
    return [
        transition_event("NodeClaim", name, "Launched", "Unknown", "True", "Launched", launched),
        transition_event(
            "NodeClaim", name, "Registered", "Unknown", "True", "Registered", registered
        ),
        transition_event(
            "NodeClaim", name, "Drained", "Unknown", "True", "Drained", launched + lived
        ),
    ]


def expiring_pool(lived: timedelta) -> list[Finding]:
    """Two claims known only by their events, launched and drained `lived` apart, in a
    NodePool with expireAfter 24h."""
    events = drained_unexplained(1, _ago(60 * 29), lived) + drained_unexplained(
        2, _ago(60 * 26), lived
    )
    inp = cluster([], [], events)
    pool = NodePool(name=POOL, expire_after="24h")
    return churns(replace(inp, snapshot=replace(inp.snapshot, nodepools={POOL: pool})))


def test_a_gone_claim_drained_at_its_expire_after_expired() -> None:
    (found,) = expiring_pool(timedelta(hours=24))
    assert "2 expiration (expireAfter)" in found.summary


def test_a_gone_claim_drained_a_second_before_its_expire_after_has_no_known_cause() -> None:
    (found,) = expiring_pool(timedelta(hours=24) - SECOND)
    assert "2 unknown cause" in found.summary


def test_a_repair_the_history_saw_takes_what_it_missed_from_the_live_claim() -> None:
    # The watcher saw both claims deleted but not their nodes' condition nor their image;
    # the claims, still finalizing, and their nodes show both.
    dcgm = Condition(AHR, "False", "DCGMError", "libdcgm.so not Found", _ago(40))
    claims, nodes, seen = [], [], []
    for i, ended in enumerate((_ago(30), _ago(4))):
        name, node = f"gpu-inference-w{i}", f"ip-10-0-15{i}-4.us-west-2.compute.internal"
        claims.append(
            claim(name, node, ended - timedelta(hours=2), deleting=ended, terminated=ended)
        )
        nodes.append(replace(gpu_node(node, dcgm), deleting=ended + SECOND))
        seen.append(
            replace(
                gone_claim(name, timedelta(hours=2), ended, None, image=""),
                node_name=node,
                deleted_at=None,
            )
        )
    inp = replace(cluster(nodes, claims), history=History(lifecycles=tuple(seen)))
    (loop,) = repair_loops(inp)
    assert "AcceleratedHardwareReady=False (DCGMError)" in loop.summary
    assert f"every repaired NodeClaim ran image {AMI}" in "\n".join(e.text for e in loop.evidence)


def test_a_repaired_node_failing_two_ways_is_named_by_the_repair_due_first() -> None:
    # Ready=False for 25 min is repaired at 30; DCGMError for 12 min at 10: DCGM came due first.
    both = (
        Condition("Ready", "False", "KubeletNotReady", "", _ago(25)),
        Condition(AHR, "False", "DCGMError", "libdcgm.so not Found", _ago(12)),
        Condition("StorageReady", "False", "IOError", "", None),
    )
    claims, nodes = [], []
    for i, ended in enumerate((_ago(2), _ago(1))):
        name, node = f"gpu-inference-v{i}", f"ip-10-0-16{i}-4.us-west-2.compute.internal"
        claims.append(
            claim(name, node, ended - timedelta(hours=2), deleting=ended, terminated=ended)
        )
        nodes.append(replace(gpu_node(node, *both), deleting=ended + SECOND))
    (loop,) = repair_loops(cluster(nodes, claims))
    assert "AcceleratedHardwareReady=False (DCGMError)" in loop.summary


def recorded_node_transitions(claims: list[Lifecycle], condition: str, status: str) -> History:
    """The watcher's history: the claims, and each node's `condition` turning `status` ten
    minutes before its claim ended."""
    recorded = []
    for c in claims:
        assert c.ended is not None
        recorded.append(
            replace(
                transition(status, c.ended - timedelta(minutes=10)),
                name=c.node_name,
                condition=condition,
            )
        )
    return History(lifecycles=tuple(claims), transitions=tuple(recorded))


def test_recorded_node_transitions_beside_consolidated_claims_are_read_without_error() -> None:
    claims = [
        gone_claim("gpu-inference-m1", timedelta(hours=3), _ago(120), None, repaired=False),
        gone_claim("gpu-inference-m2", timedelta(hours=3), _ago(60), None, repaired=False),
    ]
    inp = replace(cluster([], []), history=recorded_node_transitions(claims, "Ready", "True"))
    (found,) = churns(inp)
    assert "2 consolidation" in found.summary


def test_recorded_node_transitions_beside_repaired_claims_are_read_without_error() -> None:
    claims = [
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    ]
    inp = replace(cluster([], []), history=recorded_node_transitions(claims, AHR, "False"))
    (loop,) = repair_loops(inp)
    assert "2 nodes replaced by Karpenter repair" in loop.summary


def test_a_recorded_repair_is_quoted_with_its_whole_life() -> None:
    # The watcher first saw gpu-inference-a1 an hour after it was created.
    first = gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120))
    late_watch = replace(first, first_seen=first.first_seen + HOUR)
    inp = history_of(late_watch, gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)))
    (loop,) = repair_loops(inp)
    assert "median lifetime 3h 30m" in loop.summary
    assert (
        f"NodeClaim gpu-inference-a1 (node {first.node_name}, image {AMI}) deletion requested "
        "2026-12-04T07:30:00Z, gone 2026-12-04T07:30:40Z; karpenter.sh/nodeclaim-termination-"
        "timestamp=2026-12-04T07:30:00Z; DisruptionReason none; lived 3h 0m; last unhealthy "
        "AcceleratedHardwareReady=False DCGMError → Karpenter repair"
    ) in [e.text for e in loop.evidence]


def test_a_recorded_repair_explains_the_interruption_queues_echo() -> None:
    claims = [
        gone_claim("gpu-inference-a1", timedelta(hours=3), _ago(120)),
        gone_claim("gpu-inference-b2", timedelta(hours=4), _ago(30)),
    ]
    echo = event(
        "NodeClaim",
        "gpu-inference-b2",
        "InstanceTerminating",
        "Instance is terminating",
        _ago(30) + timedelta(seconds=20),
        type_="Warning",
    )
    inp = replace(cluster([], [], [echo]), history=History(lifecycles=tuple(claims)))
    (loop,) = repair_loops(inp)
    shown = "\n".join(e.text for e in loop.evidence)
    assert "came after the deletion: the interruption queue's echo" in shown


def test_a_claim_that_only_launched_is_not_counted_as_ended() -> None:
    # Its events show it launching, nothing of an end nor of a failure to register.
    launching = transition_event(
        "NodeClaim", "gpu-inference-l9", "Launched", "Unknown", "True", "Launched", _ago(3)
    )
    assert churns(cluster([], [], [*failed_launches(1).snapshot.events, launching])) == []


def mng_triggered(replaced: int) -> DiagnosisInput:
    """Nodes of an unnamed managed node group replaced after Karpenter's Node condition
    event told their DCGMError a minute before the cordon; a live group node fails the same
    way, not cordoned yet, beside a Karpenter node failing alike."""
    events = []
    for i in range(replaced):
        gone = f"ip-10-3-11{i}-212.us-west-2.compute.internal"
        cordoned = _ago(120 + 40 * i)
        said = f"Node {gone} status is now: "
        events += [
            transition_event(
                "Node", gone, AHR, "True", "False", "DCGMError", cordoned - timedelta(minutes=1)
            ),
            event(
                "Node",
                gone,
                "NodeNotSchedulable",
                said + "NodeNotSchedulable",
                cordoned,
                source="kubelet",
            ),
            event(
                "Node",
                gone,
                "NodeNotReady",
                said + "NodeNotReady",
                cordoned + timedelta(minutes=9),
                source="node-controller",
            ),
        ]
    dcgm = Condition(AHR, "False", "DCGMError", "DCGM health check failed", _ago(3))
    live = replace(
        gpu_node("ip-10-3-40-17.us-west-2.compute.internal", dcgm),
        pool=GROUP,
        pool_kind="nodegroup",
        labels={"eks.amazonaws.com/nodegroup": GROUP},
    )
    karpenter_node = gpu_node("ip-10-0-70-1.us-west-2.compute.internal", dcgm)
    return cluster([live, karpenter_node], [], events)


def test_two_group_repairs_told_by_their_trigger_are_a_loop_and_one_is_not() -> None:
    (loop,) = repair_loops(mng_triggered(2))
    assert loop.summary.startswith("A managed node group: 2 nodes replaced")
    assert loop.nodes[0] == "ip-10-3-40-17.us-west-2.compute.internal"
    assert "ip-10-0-70-1.us-west-2.compute.internal" not in loop.nodes
    assert [f for f in repair_loops(mng_triggered(1)) if f.nodepool == ""] == []


def test_a_group_loop_quotes_the_groups_repair_config() -> None:
    override = {
        "nodeMonitoringCondition": AHR,
        "nodeUnhealthyReason": "DCGMError",
        "minRepairWaitTimeMins": 10,
        "repairAction": "Replace",
    }
    config = {"enabled": True, "nodeRepairConfigOverrides": [override]}
    described = {"nodegroup": {"nodegroupName": GROUP, "nodeRepairConfig": config}}
    inp = replace(
        mng_replaced(timedelta(minutes=10)),
        nodegroups={GROUP: NodeGroupRepair.from_describe(described)},
    )
    (loop,) = repair_loops(inp)
    quoted = [e.text for e in loop.evidence if e.source == "nodegroup"]
    assert quoted == [
        'node group gpu-l40s nodeRepairConfig {"enabled": true, "nodeRepairConfigOverrides": '
        '[{"minRepairWaitTimeMins": 10, "nodeMonitoringCondition": "AcceleratedHardwareReady", '
        '"nodeUnhealthyReason": "DCGMError", "repairAction": "Replace"}]}'
    ]


def grace_expiring(i: int, seen: datetime, marked_after: timedelta) -> list[Event]:
    """A gone NodeClaim whose termination event quotes its termination-timestamp
    annotation (kubernetes-sigs/karpenter v1.6.3 pkg/controllers/node/termination/terminator/
    events/events.go TerminationGracePeriodExpiring: "All pods will be deleted by <ts>")."""
    name = f"gpu-inference-q{i}"
    marked = seen + marked_after
    return [
        transition_event(
            "NodeClaim", name, "Registered", "Unknown", "True", "Registered", seen - HOUR
        ),
        event(
            "NodeClaim",
            name,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {marked.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            seen,
            type_="Warning",
        ),
    ]


def test_a_termination_timestamp_within_ten_seconds_of_its_event_is_repairs_mark() -> None:
    # Repair writes the annotation as "now" and deletes at once; the event follows.
    apart = timedelta(seconds=10)
    events = grace_expiring(1, _ago(90), apart) + grace_expiring(2, _ago(30), -apart)
    assert churns(cluster([], [], events)) == []
    (loop,) = repair_loops(cluster([], [], events))
    assert "2 nodes replaced by Karpenter repair for an unrecorded condition" in loop.summary


def test_a_termination_timestamp_later_than_that_is_a_grace_period_not_a_repair() -> None:
    events = grace_expiring(1, _ago(90), timedelta(seconds=11)) + grace_expiring(
        2, _ago(30), timedelta(hours=2)
    )
    (found,) = churns(cluster([], [], events))
    assert "2 unknown cause" in found.summary


def test_a_timeline_takes_the_latest_journal_lines_across_units_with_their_xids() -> None:
    start = _ago(30)
    stamp = "%Y-%m-%dT%H:%M:%S.%f"
    kernel = parse_journal(
        f"{start.strftime(stamp)}+0000 {STORY} kernel: NVRM: Xid (PCI:0000:53:00): 79, pid=0, "
        "GPU has fallen off the bus.\n",
        "journal:kernel",
    )
    kubelet = kubelet_journal(2)  # an hour ago: older than the kernel's line
    evidence = NodeEvidence(node=STORY, journals={"kernel": kernel, "kubelet": kubelet})
    inp = replace(story(), node_evidence={STORY: evidence})
    journal = [
        e for e in node_timeline(inp, STORY, journal_lines=2) if e.source.startswith("journal:")
    ]
    assert [(e.source, e.text) for e in journal] == [
        (
            "journal:kernel",
            "kernel: NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus.",
        ),
        ("journal:kernel", "Xid 79 on 0000:53:00"),
    ]


def only_told_by(reason: str, message: str) -> list[Finding]:
    """Two NodeClaims gone from the API whose end only one event of `reason` tells."""
    events = []
    for i, when in enumerate((_ago(80), _ago(20))):
        name = f"gpu-inference-k{i}"
        events += [
            transition_event(
                "NodeClaim", name, "Registered", "Unknown", "True", "Registered", when - HOUR
            ),
            event("NodeClaim", name, reason, message, when),
        ]
    return churns(cluster([], [], events))


@pytest.mark.parametrize(
    "note",
    [
        # kubernetes-sigs/karpenter v1.2.0 pkg/controllers/state/statenode.go
        "Node is deleting or marked for deletion",
        # v1.0.0 and v1.1.0 pkg/controllers/disruption/events/events.go `Blocked`, of the
        # state node's error
        "Cannot disrupt NodeClaim: state node is marked for deletion",
    ],
)
def test_karpenters_note_on_a_deleting_claim_marks_its_end(note: str) -> None:
    (found,) = only_told_by("DisruptionBlocked", note)
    assert "2 nodes replaced" in found.summary
    assert only_told_by("DisruptionBlocked", "Pod default/trainer-0 has do-not-disrupt") == []


def test_a_finalized_claim_ended_no_later_than_its_finalizer_went() -> None:
    (found,) = only_told_by("Finalized", "Finalized karpenter.sh/termination")
    assert "2 nodes replaced" in found.summary
