"""The facts of the field every rule stands on, each checked against its upstream source rather
than against our own table: Karpenter's repair policies per release, its 20 % guard, NVIDIA's
Xid catalog, the Xids the node monitoring agent turns into a condition, managed node groups'
default repair actions, the interruption controller's events and how a NodeClaim's end is read.

Sources, read at the tags named:
- aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go `RepairPolicies` (v1.1.0:
  Ready=False only; v1.2.0 and later: Ready False/Unknown 30m, AcceleratedHardwareReady 10m,
  the agent's other conditions 30m); kubernetes-sigs/karpenter pkg/controllers/node/health
  (allowedUnhealthyPercent 20 %, rounded up).
- NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html.
- aws/eks-node-monitoring-agent monitors/nvidia/dcgm/dcgm_policies.go `WellKnownXidCodes`
  (v1.6.0-v1.6.3 and v1.6.4-v1.7.0).
- EKS user guide, node-health-nma.html and managed node group repair defaults.
Kernel lines are krcReportXid's (NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/
kernel_rc.c) as `journalctl -k -o short-iso-precise --utc` prints them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.history import Lifecycle
from mignurse.diagnose.facts import (
    XID_CLASS_APPLICATION,
    XID_CLASS_REPLACE,
    XID_CLASS_RESET,
    claim_cause,
    classify_ahr_reason,
    classify_xid,
    parse_go_duration,
    repair_allowance,
    repair_clock,
    repair_tolerations,
    split_interruption_events,
    unhealthy_for_repair,
    xid_of,
)
from mignurse.diagnose.mng import REBOOT, REPLACE, default_action
from mignurse.model import Condition, Event, Node, NodeClaim, format_time
from mignurse.model.fields import parse_version

from .test_hardware_advice import (
    files,
    findings,
    kernel,
    kernel_line,
    node_json,
)
from .test_rule_boundaries import event

NOW = datetime(2026, 11, 29, 3, 10, tzinfo=UTC)
AHR = "AcceleratedHardwareReady"
AGENT_CONDITIONS = ("KernelReady", "StorageReady", "NetworkingReady", "ContainerRuntimeReady")


# -- Karpenter's repair policies, per release of the AWS provider ------------------------------


@pytest.mark.parametrize(
    ("version", "policies"),
    [
        ((1, 0, 8), {}),
        ((1, 1), {("Ready", "False"): 30}),  # a tag of two parts: "v1.1"
        ((1, 1, 0), {("Ready", "False"): 30}),
        ((1, 1, 9), {("Ready", "False"): 30}),
        ((1, 2), "v1.2"),
        ((1, 2, 0), "v1.2"),
        ((1, 14, 1), "v1.2"),
        ((2, 0), "v1.2"),
        (None, "v1.2"),  # a digest-only image or a fork: the newest policies
    ],
    ids=["1.0.8", "1.1", "1.1.0", "1.1.9", "1.2", "1.2.0", "1.14.1", "2.0", "unknown"],
)
def test_each_karpenter_release_repairs_the_conditions_it_shipped_with(
    version: tuple[int, ...] | None, policies: dict[tuple[str, str], int] | str
) -> None:
    if policies == "v1.2":
        policies = {
            ("Ready", "False"): 30,
            ("Ready", "Unknown"): 30,
            (AHR, "False"): 10,
            **{(c, "False"): 30 for c in AGENT_CONDITIONS},
        }
    got = {k: v / timedelta(minutes=1) for k, v in repair_tolerations(version).items()}
    assert got == policies


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.4.0", (1, 4, 0)),
        ("v1.14.1", (1, 14, 1)),
        ("1.4.0-rc.1", (1, 4, 0)),
        ("1.2.3+eks.1", (1, 2, 3)),
        (" v1.6 ", (1, 6)),
        ("1", None),
        ("v1", None),
        ("1.x.0", None),
        ("latest", None),
        ("", None),
        ("sha256:4f6e", None),
    ],
)
def test_an_image_tag_reads_as_a_release_only_when_it_is_one(
    text: str, version: tuple[int, ...] | None
) -> None:
    assert parse_version(text) == version


def _node(*conditions: tuple[str, str, timedelta]) -> Node:
    return Node(
        name="ip-10-0-91-23.us-west-2.compute.internal",
        conditions=tuple(
            Condition(type_, status, "r", "", NOW - age) for type_, status, age in conditions
        ),
    )


def test_the_repair_clock_is_the_earliest_deadline_of_the_conditions_that_match() -> None:
    # NotReady for 25 minutes (5 left) and the GPU down for 2 (8 left): the GPU's clock wins.
    node = _node(("Ready", "False", timedelta(minutes=25)), (AHR, "False", timedelta(minutes=2)))
    clock = repair_clock(node)
    assert clock is not None
    assert (clock.condition.type, clock.deadline) == ("Ready", NOW + timedelta(minutes=5))
    node = _node(("Ready", "False", timedelta(minutes=15)), (AHR, "False", timedelta(minutes=2)))
    clock = repair_clock(node)
    assert clock is not None
    assert (clock.condition.type, clock.deadline) == (AHR, NOW + timedelta(minutes=8))


def test_a_condition_without_a_transition_time_or_a_policy_starts_no_clock() -> None:
    no_time = Node(name="n", conditions=(Condition(AHR, "False", "DCGMError", "", None),))
    assert repair_clock(no_time) is None
    assert unhealthy_for_repair(no_time)  # the 20 % guard counts it all the same
    healthy = _node(("Ready", "True", timedelta(hours=3)), (AHR, "True", timedelta(hours=3)))
    assert repair_clock(healthy) is None
    assert not unhealthy_for_repair(healthy)
    # Under v1.1 only Ready=False is repaired: a GPU down starts nothing.
    gpu_down = _node((AHR, "False", timedelta(minutes=2)))
    assert repair_clock(gpu_down, repair_tolerations((1, 1, 0))) is None
    assert not unhealthy_for_repair(gpu_down, repair_tolerations((1, 1, 0)))


@pytest.mark.parametrize(
    ("pool", "allowed"), [(1, 1), (4, 1), (5, 1), (6, 2), (10, 2), (11, 3), (100, 20)]
)
def test_the_guard_lets_karpenter_repair_a_fifth_of_a_pool_rounded_up(
    pool: int, allowed: int
) -> None:
    assert repair_allowance(pool) == allowed


# -- NVIDIA's Xid catalog ----------------------------------------------------------------------

# The catalog's resolution bucket, read as what the tenant of an EC2 instance can do.
CATALOG = {
    13: XID_CLASS_APPLICATION, 31: XID_CLASS_APPLICATION, 43: XID_CLASS_APPLICATION,
    45: XID_CLASS_APPLICATION,
    46: XID_CLASS_RESET, 48: XID_CLASS_RESET, 62: XID_CLASS_RESET, 63: XID_CLASS_RESET,
    74: XID_CLASS_RESET, 92: XID_CLASS_RESET, 94: XID_CLASS_RESET, 95: XID_CLASS_RESET,
    109: XID_CLASS_RESET, 110: XID_CLASS_RESET, 119: XID_CLASS_RESET, 120: XID_CLASS_RESET,
    121: XID_CLASS_RESET, 136: XID_CLASS_RESET, 140: XID_CLASS_RESET, 143: XID_CLASS_RESET,
    151: XID_CLASS_RESET, 154: XID_CLASS_RESET, 155: XID_CLASS_RESET, 156: XID_CLASS_RESET,
    158: XID_CLASS_RESET,
    54: XID_CLASS_REPLACE, 64: XID_CLASS_REPLACE, 79: XID_CLASS_REPLACE, 142: XID_CLASS_REPLACE,
    157: XID_CLASS_REPLACE,
}  # fmt: skip


@pytest.mark.parametrize(("xid", "kind"), sorted(CATALOG.items()))
def test_each_xid_the_catalog_tells_apart_is_read_as_what_an_instance_can_do(
    xid: int, kind: str
) -> None:
    meaning = classify_xid(xid)
    assert meaning is not None
    assert meaning.kind == kind


@pytest.mark.parametrize("xid", [0, 1, 12, 14, 32, 44, 47, 65, 69, 80, 93, 96, 122, 159, 999])
def test_an_xid_the_catalog_does_not_tell_apart_gets_no_verdict(xid: int) -> None:
    assert classify_xid(xid) is None


# The agent's condition Xids (Fatal) from v1.6.4 on; every other known Xid is only an event.
AGENT_CONDITION_XIDS = {46, 48, 54, 62, 63, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 142,
                        143, 151, 155, 156, 158}  # fmt: skip
# v1.6.0-v1.6.3 listed these instead.
AGENT_CONDITION_XIDS_BEFORE_1_6_4 = {13, 31, 48, 63, 64, 74, 79, 94, 95, 119, 120, 121, 140}


@pytest.mark.parametrize("xid", sorted(set(CATALOG) - {154}))
def test_a_kernel_xid_line_says_whether_the_agent_raises_a_condition_for_it(xid: int) -> None:
    # Xid 154 is left out: it is read from the action it names, not from its code alone.
    line = kernel_line(NOW - timedelta(minutes=3), "0000:10:1c", xid, "pid=4120, name=python3")
    (finding,) = findings(evidence=[files(kernel(line))])
    said = (
        "a condition under the node monitoring agent"
        if xid in AGENT_CONDITION_XIDS
        else "only an event under the node monitoring agent"
    )
    (text,) = [e.text for e in finding.evidence if e.source == "journal:kernel"]
    assert f"Xid {xid} on 0000:10:1c: " in text
    assert said in text


@pytest.mark.parametrize("xid", [13, 31, 43, 45])
def test_an_application_xid_as_a_condition_names_the_agent_releases_that_raise_it(
    xid: int,
) -> None:
    # Only an application's Xid as the condition is worth explaining: the agent dropped 13 and
    # 31 from its condition Xids in v1.6.4 and never listed 43 or 45.
    (finding,) = findings([node_json(ahr=f"NvidiaXID{xid}Error")])
    if xid in AGENT_CONDITION_XIDS_BEFORE_1_6_4 and xid not in AGENT_CONDITION_XIDS:
        said = f"v1.6.0-v1.6.3 make Xid {xid} a condition, v1.6.4 and later only an event"
    else:
        said = f"reported Xid {xid} as a condition"
    assert "usually the application's own fault" in finding.summary
    assert said in finding.summary


# -- managed node groups' default repair actions -------------------------------------------------

MNG_REPLACE_XIDS = {74, 79, 119, 120, 121, 140}
MNG_REBOOT_XIDS = {13, 31, 48, 63, 64, 94, 95}


@pytest.mark.parametrize("xid", sorted(MNG_REPLACE_XIDS | MNG_REBOOT_XIDS | {43, 46, 154}))
def test_a_node_group_replaces_or_reboots_on_the_xids_its_default_lists(xid: int) -> None:
    action = default_action(AHR, "False", f"NvidiaXID{xid}Error")
    if xid in MNG_REPLACE_XIDS:
        assert action.action == REPLACE
    elif xid in MNG_REBOOT_XIDS:
        assert action.action == REBOOT
    else:
        assert action.action not in (REPLACE, REBOOT)
        assert f"NvidiaXID{xid}Error" in action.source


# -- the agent's reasons -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "xid"),
    [
        ("NvidiaXID79Error", 79),
        ("NvidiaXID13Warning", 13),
        ("NvidiaXIDError", None),
        ("NvidiaXID79", None),
        ("XID79Error", None),
        ("NvidiaXID79Errors", None),
        ("NvidiaXID-1Error", None),
    ],
)
def test_an_xid_is_read_only_from_a_reason_the_agent_would_write(
    reason: str, xid: int | None
) -> None:
    assert xid_of(reason) == xid


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("DCGMError", "monitoring"),
        ("NvidiaXID79Error", "hardware"),
        ("DCGMHealthCode3", "hardware"),
        ("KernelBug", "unknown"),  # the agent's, but a KernelReady reason
        ("SomethingNew", "unknown"),
        ("", "unknown"),
    ],
)
def test_an_accelerated_hardware_reason_is_classed_as_the_agent_defines_it(
    reason: str, kind: str
) -> None:
    assert classify_ahr_reason(reason) == kind


# -- the interruption controller and how a NodeClaim ended -------------------------------------

DELETED = NOW - timedelta(minutes=20)


def _event(reason: str, at: datetime | None, message: str = "") -> Event:
    """An interruption-controller event about the NodeClaim (`at` None: no time kept)."""
    type_ = "Normal" if reason == "TerminatingOnInterruption" else "Warning"
    said = message or f"{reason} for the instance"
    found = event("NodeClaim", "gpu-training-x7k2p", reason, said, at or NOW, type_=type_)
    return found if at is not None else replace(found, first_seen=None, last_seen=None)


@pytest.mark.parametrize(
    ("reason", "after", "cause"),
    [
        ("InstanceTerminating", timedelta(seconds=5), True),  # same reconcile
        ("InstanceTerminating", timedelta(seconds=6), False),  # the queue's echo
        ("InstanceStopping", timedelta(seconds=-30), True),
        ("SpotInterrupted", timedelta(seconds=40), False),
        ("TerminatingOnInterruption", timedelta(minutes=3), True),  # always the cause
    ],
)
def test_an_ec2_notice_causes_a_deletion_only_when_it_came_with_it(
    reason: str, after: timedelta, cause: bool
) -> None:
    event = _event(reason, DELETED + after)
    causes, echoes = split_interruption_events([event], DELETED)
    assert (causes, echoes) == (([event], []) if cause else ([], [event]))


def test_with_the_deletion_unknown_only_notices_ec2_sends_alone_are_causes() -> None:
    spot = _event("SpotInterrupted", NOW)
    stopping = _event("InstanceStopping", NOW)
    transition = _event("InstanceTerminating", NOW, "Status condition transitioned, Type: X")
    other = _event("Unconsolidatable", NOW)
    assert split_interruption_events([spot, stopping, transition, other], None) == (
        [spot],
        [stopping],
    )
    # An event without a time cannot be placed against the deletion either.
    untimed = _event("InstanceTerminating", None)
    assert split_interruption_events([untimed], DELETED) == ([], [untimed])


def _claim(
    *,
    deleting: datetime | None = DELETED,
    terminated: datetime | None = None,
    node_name: str = "ip-10-0-91-23.us-west-2.compute.internal",
    created: datetime | None = NOW - timedelta(days=2),
    disruption: str = "",
    drifted: bool = False,
) -> Lifecycle:
    return Lifecycle(
        context="prod",
        kind="NodeClaim",
        name="gpu-training-x7k2p",
        uid="",
        pool="gpu-training",
        instance_type="p4d.24xlarge",
        instance_id="",
        image_id="",
        node_name=node_name,
        nodeclaim="",
        created=created,
        first_seen=NOW - timedelta(days=2),
        first_ready=None,
        last_seen=DELETED,
        deleting_since=deleting,
        termination_timestamp=terminated,
        disruption_reason=disruption or None,
        drifted=drifted,
        deleted_at=None,
        deleted_seen=None,
        last_unhealthy=None,
    )


@pytest.mark.parametrize(
    ("claim", "events", "cause"),
    [
        # Repair writes the termination time as "now" and deletes in the same call.
        (_claim(terminated=DELETED + timedelta(seconds=5)), [], "repair"),
        (_claim(terminated=DELETED - timedelta(seconds=5)), [], "repair"),
        # A grace period writes deletion + terminationGracePeriod.
        (_claim(terminated=DELETED + timedelta(seconds=6)), [], "manual"),
        (_claim(terminated=DELETED - timedelta(seconds=6)), [], "unknown"),
        (_claim(), [], "manual"),
        (_claim(deleting=None), [], "unknown"),
        (_claim(node_name=""), [], "registration"),
        (_claim(node_name="", deleting=None), [_event("InsufficientCapacityError", NOW)],
         "registration"),
        (_claim(node_name="", deleting=None), [], "unknown"),
        (_claim(disruption="Underutilized"), [], "consolidation"),
        (_claim(disruption="Drifted"), [], "drift"),
        (_claim(drifted=True), [_event("DisruptionTerminating", DELETED)], "drift"),
        (_claim(), [_event("DisruptionTerminating", DELETED)], "consolidation"),
        (_claim(), [_event("TerminatingOnInterruption", DELETED)], "interruption"),
        # An EC2 notice at the deletion, its TerminatingOnInterruption lost.
        (_claim(), [_event("SpotInterrupted", DELETED - timedelta(seconds=2))], "interruption"),
        # The queue's echo of Karpenter's own termination never names the cause.
        (_claim(terminated=DELETED),
         [_event("InstanceTerminating", DELETED + timedelta(minutes=1))], "repair"),
        # The cloud node lifecycle controller found no instance and deleted the Node, and
        # Karpenter deleted its NodeClaim: gone outside Karpenter, deleted by no one's hand...
        (_claim(), [_event("DeletingNode", DELETED - timedelta(seconds=3))], "instance-gone"),
        (_claim(), [_event("DeletingNode", DELETED + timedelta(seconds=20))], "instance-gone"),
        # ...but not its echo after Karpenter's own termination, nor an earlier instance's
        # Node of the same name
        (_claim(), [_event("DeletingNode", DELETED + timedelta(minutes=2))], "manual"),
        (_claim(), [_event("DeletingNode", DELETED - timedelta(minutes=20))], "manual"),
    ],
    ids=["repair-after", "repair-before", "grace-after", "ended-before", "manual",
         "not-deleting", "never-registered", "insufficient-capacity", "pending",
         "consolidation", "drift-reason", "drifted-condition", "consolidation-event",
         "interruption", "notice-without-its-event", "echo", "instance-gone",
         "instance-gone-just-after", "gone-echo", "gone-long-before"],
)  # fmt: skip
def test_a_nodeclaims_end_is_read_from_what_came_first(
    claim: Lifecycle, events: list[Event], cause: str
) -> None:
    assert claim_cause(claim, events) == cause


def test_a_nodeclaim_past_its_expire_after_ended_by_expiration() -> None:
    claim = _claim(created=DELETED - timedelta(hours=720))
    assert claim_cause(claim, [], timedelta(hours=720)) == "expiration"
    assert claim_cause(claim, [], timedelta(hours=721)) == "manual"
    assert claim_cause(_claim(created=None), [], timedelta(hours=1)) == "manual"


def test_a_live_nodeclaim_is_read_from_its_conditions() -> None:
    base: dict[str, object] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "gpu-training-x7k2p",
            "creationTimestamp": format_time(NOW - timedelta(days=2)),
            "deletionTimestamp": format_time(DELETED),
        },
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": "gpu"}},
    }  # fmt: skip

    def claim(*conditions: dict[str, Any]) -> NodeClaim:
        return NodeClaim.from_api({**base, "status": {"conditions": list(conditions)}})

    def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
        return {"type": type_, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": format_time(DELETED)}  # fmt: skip

    registered = cond("Registered", "True", "Registered")
    assert claim_cause(claim(registered), []) == "manual"
    assert claim_cause(claim(), []) == "registration"  # never registered
    assert claim_cause(claim(cond("Registered", "False", "NotRegistered")), []) == "registration"
    assert claim_cause(claim(registered, cond("DisruptionReason", "True", "Underutilized")),
                       []) == "consolidation"  # fmt: skip
    assert claim_cause(claim(registered, cond("DisruptionReason", "False", "Drifted")),
                       []) == "manual"  # fmt: skip
    assert claim_cause(claim(registered, cond("DisruptionReason", "True", "", "Drifted")),
                       []) == "drift"  # fmt: skip
    assert claim_cause(claim(registered, cond("DisruptionReason", "True"),
                             cond("Drifted", "True", "AMIDrift")), []) == "drift"  # fmt: skip
    not_drifted = cond("Drifted", "False", "AMIDrift")
    assert claim_cause(claim(registered, cond("DisruptionReason", "True"), not_drifted),
                       []) == "consolidation"  # fmt: skip


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("720h", 720 * 3600),
        ("10m30s", 630),
        ("1h0m0s", 3600),
        ("1.5h", 5400),
        ("90s", 90),
        ("Never", None),
        ("", None),
        ("10d", None),
        ("h", None),
        ("10", None),
        ("5m3", None),
    ],
)
def test_a_go_duration_from_a_nodepool_reads_as_go_would(text: str, seconds: int | None) -> None:
    got = parse_go_duration(text)
    assert (got.total_seconds() if got is not None else None) == seconds


def test_two_conditions_due_at_once_name_the_one_the_node_lists_first() -> None:
    node = _node(("Ready", "False", timedelta(minutes=12)), ("KernelReady", "False",
                                                             timedelta(minutes=12)))  # fmt: skip
    clock = repair_clock(node)
    assert clock is not None
    assert (clock.condition.type, clock.deadline) == ("Ready", NOW + timedelta(minutes=18))


def test_an_event_that_kept_only_its_last_time_is_placed_by_it() -> None:
    # events.k8s.io/v1 leaves deprecatedFirstTimestamp empty for a new event: only one time.
    at_deletion = replace(_event("InstanceTerminating", DELETED), first_seen=None)
    assert split_interruption_events([at_deletion], DELETED) == ([at_deletion], [])
    later = replace(_event("InstanceTerminating", DELETED + timedelta(minutes=2)), first_seen=None)
    assert split_interruption_events([later], DELETED) == ([], [later])


def test_a_spot_instance_taken_back_before_it_registered_was_interrupted_not_a_failed_launch() -> (
    None
):
    claim = _claim(node_name="")
    assert claim_cause(claim, [_event("TerminatingOnInterruption", DELETED)]) == "interruption"


def test_a_nodeclaim_whose_deletion_was_never_seen_has_no_known_cause() -> None:
    # The history kept the termination annotation but never saw the deletion timestamp.
    assert claim_cause(_claim(deleting=None, terminated=DELETED), []) == "unknown"
    assert claim_cause(_claim(deleting=None), [], timedelta(hours=1)) == "unknown"
