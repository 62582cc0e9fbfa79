"""repair-blocked at its edges: which pool a held repair belongs to, when each held node's repair
fell due, which nodes Karpenter's event names by release, and what is no held repair at all.

The inputs are what the API server shows: GPU Nodes with the conditions Karpenter's repair
policies match (aws/karpenter-provider-aws v1.6.3 pkg/cloudprovider/cloudprovider.go
RepairPolicies: AcceleratedHardwareReady=False tolerated 10 min), and the Warning
`NodeRepairBlocked` Karpenter publishes on the Node while the 20% guard holds
(kubernetes-sigs/karpenter v1.5.0 and v1.6.0 pkg/controllers/node/health/controller.go and
events.go).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from mignurse.diagnose.automode import AUTO_MODE_INSTEAD
from mignurse.diagnose.findings import REPAIR_BLOCKED, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.rules import repair_blocked
from mignurse.model import Condition, Event, Node

from .test_rule_boundaries import (
    AHR,
    NOW,
    POOL,
    REPAIR_ON,
    cluster,
    event,
    findings,
    gone_claim,
    gpu_node,
)

DAYS_AGO = NOW - timedelta(days=3)
READY = Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", DAYS_AGO)
GPU_OK = Condition(
    AHR, "True", "NvidiaGPUIsReady", "Monitoring for the Nvidia system is active", DAYS_AGO
)
HELD = "more than 20% nodes are unhealthy in the nodepool"


def host(i: int) -> str:
    return f"ip-10-0-8{i}-6.us-west-2.compute.internal"


def xid79(minutes_ago: float | None) -> Condition:
    since = None if minutes_ago is None else NOW - timedelta(minutes=minutes_ago)
    return Condition(AHR, "False", "NvidiaXID79Error", "GPU has fallen off the bus", since)


def pool(*failing: Condition, size: int = 5) -> list[Node]:
    """A pool of `size` GPU nodes, the first ones failing with `failing` (one each)."""
    return [
        gpu_node(host(i), READY, failing[i] if i < len(failing) else GPU_OK) for i in range(size)
    ]


def blocked_on(name: str, *, first: datetime | None = None, last: datetime | None = None) -> Event:
    first = first or NOW - timedelta(minutes=14)
    return event("Node", name, "NodeRepairBlocked", HELD, first, type_="Warning", count=3,
                 last=last or NOW - timedelta(minutes=2))  # fmt: skip


def held(inp: DiagnosisInput) -> list[Finding]:
    return [
        f for f in findings(inp, "repair_blocked", repair_blocked.rule) if f.id == REPAIR_BLOCKED
    ]


def evidence_text(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


# -- the arithmetic now, and when each repair fell due ----------------------------------------


def test_two_of_five_unhealthy_are_held_with_the_time_each_repair_fell_due() -> None:
    inp = replace(cluster(pool(xid79(15), xid79(14)), []), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert found.nodepool == POOL and found.severity == WARNING
    assert found.summary.startswith(
        f"NodePool {POOL}: Karpenter repair held by the 20% guard, 2 of 5 nodes unhealthy, "
        "at most 1 may be repaired; 2 past their repair deadline"
    )
    assert "Auto Mode" not in found.summary
    assert found.runbooks == ("cordon-and-collect", "replace-instance")
    text = evidence_text(found)
    assert (
        f"2 of 5 nodes in NodePool {POOL} match a repair policy now; the guard allows "
        "ceil(20% × 5) = 1"
    ) in text
    assert (
        "since 2026-12-04T09:15:00Z; repair due since 2026-12-04T09:25:00Z, held by the guard"
        in (text)
    )


@pytest.mark.parametrize(
    ("version", "when"),
    [
        # kubernetes-sigs/karpenter v1.7.0 pkg/controllers/node/health/controller.go: a held
        # repair is requeued every 5 minutes
        ("1.7.0", "when the count drops, they are replaced within 5 min"),
        # v1.6.0: an empty Result, nothing requeues it; only a change to its Node does
        ("1.6.2", "when the count drops, each is replaced the next time its Node changes"),
        (
            None,
            "when the count drops, they are replaced within 5 min (Karpenter v1.7.0 on; before "
            "it, when the Node changes)",
        ),
    ],
)
def test_when_a_held_node_goes_once_the_count_drops_depends_on_the_release(
    version: str | None, when: str
) -> None:
    karpenter = replace(REPAIR_ON, version=version or "")
    inp = replace(cluster(pool(xid79(15), xid79(14)), []), karpenter=karpenter)
    (found,) = held(inp)
    assert f"2 past their repair deadline: {when}" in found.summary


def test_a_repair_due_this_very_second_is_held_and_one_due_later_is_not_yet() -> None:
    inp = replace(cluster(pool(xid79(10), xid79(4)), []), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert "; 1 past their repair deadline" in found.summary
    due_now, due_later = (e.text for e in found.evidence if e.text.startswith("Node "))
    assert due_now.endswith("; repair due since 2026-12-04T09:30:00Z, held by the guard")
    assert due_later.endswith("; repair due 2026-12-04T09:36:00Z")


def test_a_held_node_whose_condition_has_no_transition_time_says_so() -> None:
    inp = replace(cluster(pool(xid79(None), xid79(None)), []), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert evidence_text(found).count("no transition time") == 2
    assert "past their repair deadline" not in found.summary


# -- which pool the event is about --------------------------------------------------------------


def test_an_event_about_a_node_gone_from_the_cluster_and_the_history_is_said_so() -> None:
    inp = replace(cluster([], [], [blocked_on(host(9))]), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert found.nodepool == ""
    assert found.summary.startswith(
        "a NodePool no longer visible: Karpenter repair held by the 20% guard; "
        "NodeRepairBlocked x3 09:16:00Z–09:28:00Z"
    )


def test_an_event_about_a_node_known_only_to_the_history_is_its_pools() -> None:
    gone = gone_claim("gpu-inference-k2", timedelta(hours=5), NOW - timedelta(minutes=20))
    gone_node = replace(gone, kind="Node", name=gone.node_name, uid="uid-node-k2")
    inp = replace(
        cluster([], [], [blocked_on(gone.node_name)]),
        karpenter=REPAIR_ON,
        history=History(lifecycles=(gone, gone_node)),
    )
    (found,) = held(inp)
    assert found.nodepool == POOL
    assert found.summary.startswith(f"NodePool {POOL}: Karpenter repair held by the 20% guard;")


def test_a_node_name_reused_outside_every_pool_leaves_the_blocked_repair_in_its_pool() -> None:
    # EC2 reuses private IPs: after the repaired node went, a node of no pool took its name
    # for a while. Karpenter blocks repairs of its own nodes only, so the event is the pool's.
    gone = gone_claim("gpu-inference-k2", timedelta(hours=5), NOW - timedelta(minutes=20))
    gone_node = replace(gone, kind="Node", name=gone.node_name, uid="uid-node-k2")
    reused = replace(
        gone_node, pool="", uid="uid-node-reused", instance_type="m7i.2xlarge",
        instance_id="i-07c2e4a91b3d5f608", image_id="", nodeclaim="",
        created=NOW - timedelta(minutes=15), first_seen=NOW - timedelta(minutes=15),
        first_ready=NOW - timedelta(minutes=14), last_seen=NOW - timedelta(minutes=6),
        deleting_since=NOW - timedelta(minutes=6), termination_timestamp=None,
        deleted_at=NOW - timedelta(minutes=5), last_unhealthy=None,
    )  # fmt: skip
    inp = replace(
        cluster([], [], [blocked_on(gone.node_name)]),
        karpenter=REPAIR_ON,
        history=History(lifecycles=(gone, gone_node, reused)),
    )
    (found,) = held(inp)
    assert found.nodepool == POOL


@pytest.mark.parametrize(
    ("first", "last"),
    [(NOW - timedelta(minutes=14), None), (None, NOW - timedelta(minutes=2))],
    ids=["first-time-only", "last-time-only"],
)
def test_an_event_that_kept_only_one_of_its_times_shows_no_half_range(
    first: datetime | None, last: datetime | None
) -> None:
    seen = replace(blocked_on(host(0)), first_seen=first, last_seen=last)
    inp = replace(cluster(pool(xid79(15), xid79(14)), [], [seen]), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert "NodeRepairBlocked x3;" in found.summary
    assert "?" not in found.summary


# -- which nodes the event names, by Karpenter release -----------------------------------------


def named_by_release(version: str, *, healthy_named: bool = True) -> Finding:
    """Two of five held; the guard's event on both, and on a healthy node when told."""
    events = [blocked_on(host(0)), blocked_on(host(1))]
    if healthy_named:
        events.append(blocked_on(host(4)))
    settings = replace(REPAIR_ON, version=version)
    (found,) = held(replace(cluster(pool(xid79(15), xid79(14)), [], events), karpenter=settings))
    return found


@pytest.mark.parametrize("version", ["1.5.9", "v1.5"])
def test_through_karpenter_1_5_a_healthy_node_the_event_names_is_not_held(version: str) -> None:
    found = named_by_release(version)
    assert found.nodes == (host(0), host(1))
    assert f"NodeRepairBlocked also names 1 healthy node(s) ({host(4)})" in evidence_text(found)


@pytest.mark.parametrize("version", ["1.6.0", "v1.6"])
def test_from_karpenter_1_6_every_node_the_event_names_is_held(version: str) -> None:
    found = named_by_release(version)
    assert found.nodes == (host(0), host(1), host(4))
    assert "also names" not in evidence_text(found)


def test_an_event_naming_only_the_held_nodes_has_nothing_to_explain() -> None:
    found = named_by_release("1.5.9", healthy_named=False)
    assert found.nodes == (host(0), host(1))
    assert "also names" not in evidence_text(found)


def test_an_event_naming_a_node_whose_gpu_health_is_unknown_still_offers_a_replacement() -> None:
    unknown = Condition(AHR, "Unknown", "DCGMError", "", NOW - timedelta(minutes=6))
    nodes = pool(xid79(15), xid79(14))
    nodes[4] = gpu_node(host(4), READY, unknown)
    inp = replace(cluster(nodes, [], [blocked_on(host(4))]), karpenter=REPAIR_ON)
    (found,) = held(inp)
    assert found.runbooks == ("cordon-and-collect", "replace-instance")
    assert "DCGMError" not in found.summary


# -- what is no held repair -------------------------------------------------------------------


def test_with_repair_off_two_unhealthy_of_five_hold_nothing() -> None:
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")
    assert held(replace(cluster(pool(xid79(15), xid79(14)), []), karpenter=off)) == []


def test_the_guards_event_proves_repair_on_where_the_settings_could_not_be_read() -> None:
    unread = KarpenterSettings(node_repair=None)
    inp = replace(cluster(pool(xid79(15), xid79(14)), [], [blocked_on(host(0))]), karpenter=unread)
    (found,) = held(inp)
    assert "2 of 5 nodes unhealthy, at most 1 may be repaired" in found.summary


def test_a_managed_node_group_is_not_held_by_karpenters_guard() -> None:
    group = {"eks.amazonaws.com/nodegroup": "ng-gpu-l4"}
    nodes = [
        replace(n, pool="ng-gpu-l4", pool_kind="nodegroup", labels=group)
        for n in pool(xid79(15), xid79(14))
    ]
    assert held(replace(cluster(nodes, []), karpenter=REPAIR_ON)) == []


def test_an_auto_mode_pool_is_held_without_karpenters_settings_and_says_what_to_do() -> None:
    auto = {"eks.amazonaws.com/compute-type": "auto", "karpenter.sh/nodepool": POOL}
    nodes = [replace(n, pool_kind="auto", labels=auto) for n in pool(xid79(15), xid79(14))]
    (found,) = held(cluster(nodes, []))  # Auto Mode: no Karpenter Deployment to read
    assert "2 of 5 nodes unhealthy, at most 1 may be repaired" in found.summary
    assert found.summary.endswith(AUTO_MODE_INSTEAD)
