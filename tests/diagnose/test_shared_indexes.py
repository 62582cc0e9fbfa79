"""What the rules read once per diagnosis and share: each Node's events and the merged events
(one pass over both sources), the event index (by object, by reason, the names each kind's
events are about, Nodes' transitions), the GPU nodes, a pool's health as a repair guard counts
it, a node's notready-loop verdict and a MIG config's layout per GPU model. At 5,000 nodes and
200,000 events a rule that scans everything for each node takes seconds
(benchmarks/bench_diagnose.py); these tests hold the shapes that keep the work linear and the
answers the rules had before they were shared.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose import outlook
from mignurse.diagnose import replacements as replacements_module
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.events import all_events, event_index
from mignurse.diagnose.facts import REPAIR_TOLERATIONS, TRANSITION_PREFIX, repair_tolerations
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.outlook import pool_health
from mignurse.diagnose.rules import mig_layout, not_ready, notready_loop
from mignurse.gpu.models import by_instance_type
from mignurse.gpu.profiles import expected_layout
from mignurse.model import Condition, Event, Node

from . import test_gone_nodeclaims as gone_claims

NOW, POOL, ago = gone_claims.NOW, gone_claims.POOL, gone_claims.ago


def event(
    kind: str,
    name: str,
    reason: str,
    when: datetime,
    *,
    message: str = "",
    uid: str = "",
    count: int = 1,
    last: datetime | None = None,
) -> Event:
    return Event(
        namespace="default",
        name=f"{name}.{reason.lower()}.{when.timestamp():.0f}",
        uid=uid or f"uid-{kind}-{name}-{reason}-{when.timestamp():.0f}",
        involved_kind=kind,
        involved_name=name,
        involved_uid=f"uid-{name}",
        reason=reason,
        message=message or f"{reason} on {name}",
        type="Normal",
        source="kubelet",
        host="",
        first_seen=when,
        last_seen=last or when,
        count=count,
    )


def node(name: str, *conditions: Condition, pool: str = POOL, **labels: str) -> Node:
    return Node(
        name=name,
        uid=f"uid-{name}",
        created=ago(3 * 1440),
        pool=pool,
        pool_kind="nodepool",
        instance_type="p5.48xlarge",
        labels={"karpenter.sh/nodepool": pool, "nvidia.com/gpu.present": "true", **labels},
        conditions=conditions or (Condition("Ready", "True", "KubeletReady", "", ago(4000)),),
        gpu_capacity={"nvidia.com/gpu": 8},
        gpu_allocatable={"nvidia.com/gpu": 8},
    )


def not_ready_node(name: str, pool: str = POOL) -> Node:
    return node(name, Condition("Ready", "False", "KubeletNotReady", "PLEG", ago(40)), pool=pool)


def cluster(
    nodes: list[Node] | None = None,
    events: tuple[Event, ...] = (),
    history: History | None = None,
) -> DiagnosisInput:
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in nodes or ()}, events=events, karpenter=True, taken_at=NOW
        ),
        now=NOW,
        history=history or History(),
        karpenter=KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true"),
    )


# -- each Node's events and the merged events, from one pass -------------------------------------


def test_a_nodes_events_keep_the_api_servers_copy_while_the_merge_keeps_the_newest() -> None:
    live = event("Node", "n1", "NodeNotReady", ago(50), uid="u1", count=3, last=ago(30))
    kept = replace(live, count=9, last_seen=ago(5))  # the history's copy, seen later
    only_kept = event("Node", "n1", "NodeReady", ago(45))
    inp = cluster(events=(live,), history=History(events=(kept, only_kept)))
    assert [(e.reason, e.count) for e in inp.events_by_node["n1"]] == [
        ("NodeNotReady", 3),
        ("NodeReady", 1),
    ]
    assert [(e.reason, e.count) for e in all_events(inp)] == [
        ("NodeReady", 1),
        ("NodeNotReady", 9),
    ]


def test_a_nodes_events_at_one_moment_list_the_api_servers_first_then_the_historys() -> None:
    # Same time, same reason: the sort keeps the order they were read in, the API server first.
    live = event("Node", "n1", "Starting", ago(10), uid="live")
    kept = event("Node", "n1", "Starting", ago(10), uid="kept")
    twice = replace(live, count=4)  # the same event twice in one list: the first copy stays
    inp = cluster(events=(live, twice), history=History(events=(kept, replace(live, count=7))))
    assert [(e.uid, e.count) for e in inp.events_by_node["n1"]] == [("live", 1), ("kept", 1)]


def test_events_about_other_kinds_are_no_nodes_events_even_under_a_nodes_name() -> None:
    claim_event = event("NodeClaim", "n1", "Launched", ago(20))
    pool_event = event("NodePool", "n1", "NodeRepairBlocked", ago(18))
    pod_event = event("Pod", "n1", "Scheduled", ago(15))
    own = event("Node", "n1", "NodeReady", ago(10))
    inp = cluster(events=(claim_event, pool_event, pod_event), history=History(events=(own,)))
    assert [e.reason for e in inp.events_by_node["n1"]] == ["NodeReady"]
    # No rule judges a Pod: its events are left out of the merge, whatever name they carry.
    assert [e.reason for e in all_events(inp)] == ["Launched", "NodeRepairBlocked", "NodeReady"]


def test_a_pods_events_from_either_source_are_filed_under_no_claim_of_the_same_name() -> None:
    live_pod = event("Pod", "c1", "Scheduled", ago(30))
    kept_pod = event("Pod", "c1", "Started", ago(25))
    launched = event("NodeClaim", "c1", "Launched", ago(20))
    index = event_index(
        cluster(events=(live_pod, launched), history=History(events=(kept_pod, launched)))
    )
    assert [e.reason for e in index.by_object["c1"]] == ["Launched"]
    assert list(index.claim_names) == ["c1"]
    assert "Scheduled" not in index.by_reason and "Started" not in index.by_reason


def test_the_event_index_files_each_event_by_object_reason_and_kind() -> None:
    flip = f"{TRANSITION_PREFIX}, Type: Ready, Status: True -> False, Reason: KubeletNotReady"
    garbled = f"{TRANSITION_PREFIX} but not in Karpenter's words"
    events = (
        event("NodeClaim", "c1", "Launched", ago(30)),
        event("Node", "n1", "Ready", ago(25), message=flip),
        event("Node", "n1", "Ready", ago(24), message=garbled),
        event("NodeClaim", "c1", "Ready", ago(23), message=flip),
        event("Node", "n2", "NodeRepairBlocked", ago(20)),
        event("NodePool", POOL, "NodeRepairBlocked", ago(19)),
        event("Pod", "p1", "Scheduled", ago(18)),
    )
    index = event_index(cluster(events=events))
    assert [e.reason for e in index.by_object["n1"]] == ["Ready", "Ready"]
    assert [e.reason for e in index.by_object["c1"]] == ["Launched", "Ready"]
    assert [e.involved_name for e in index.by_reason["NodeRepairBlocked"]] == ["n2", POOL]
    assert list(index.node_names) == ["n1", "n2"]
    assert list(index.claim_names) == ["c1"]
    # Only Nodes' transitions, and only those in Karpenter's words.
    assert list(index.node_transitions) == ["n1"]
    [transition] = index.node_transitions["n1"]
    assert (transition.type, transition.old, transition.new) == ("Ready", "True", "False")


# -- shared once: the GPU nodes, a pool's health, a node's verdict, a layout -------------------


def test_every_rule_reads_the_gpu_nodes_chosen_once(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = Snapshot.gpu_nodes
    calls: list[Snapshot] = []

    def counted(snapshot: Snapshot) -> list[Node]:
        calls.append(snapshot)
        return chosen(snapshot)

    monkeypatch.setattr(Snapshot, "gpu_nodes", counted)
    result = diagnose(cluster([not_ready_node("n1"), node("n2")]))
    assert result.rule_errors == []
    assert len(calls) == 1


def test_a_pools_health_is_counted_under_each_set_of_repair_policies() -> None:
    # Karpenter v1.1 repaired only Ready=False (docs/repair.md); Auto Mode runs the newest.
    hardware = Condition("AcceleratedHardwareReady", "False", "DCGMError", "", ago(30))
    inp = cluster(
        [
            not_ready_node("n1"),
            node("n2", hardware),
            node("n3"),
            not_ready_node("m1", pool="other"),
        ]
    )
    v1_1 = repair_tolerations((1, 1, 0))
    assert pool_health(inp, POOL, REPAIR_TOLERATIONS) == (2, 3)
    assert pool_health(inp, POOL, v1_1) == (1, 3)
    assert pool_health(inp, POOL, REPAIR_TOLERATIONS) == (2, 3)
    assert pool_health(inp, "other", REPAIR_TOLERATIONS) == (1, 1)
    assert pool_health(inp, "gone", REPAIR_TOLERATIONS) == (0, 0)


def test_the_repair_guard_counts_a_pools_nodes_once_however_many_of_them_are_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judged: list[str] = []
    counts = outlook.unhealthy_for_repair

    def counted(node: Node, tolerations: object = REPAIR_TOLERATIONS) -> bool:
        judged.append(node.name)
        return counts(node, tolerations)  # type: ignore[arg-type]

    monkeypatch.setattr(outlook, "unhealthy_for_repair", counted)
    nodes = [not_ready_node(f"n{i}") for i in range(30)] + [node(f"h{i}") for i in range(30)]
    inp = cluster(nodes)
    result = diagnose(inp, rules=[("node-not-ready", not_ready.rule)])
    assert result.rule_errors == []
    [finding] = result.findings
    assert "30 GPU nodes NotReady" in finding.summary
    # The 20% guard holds 30 of 60 back: each node counted once, not once per NotReady node.
    assert "repair held by the 20% guard (30 of 60 nodes unhealthy, 12 allowed)" in str(
        finding.evidence
    )
    assert sorted(judged) == sorted(n.name for n in nodes)


def test_a_node_both_notready_rules_ask_about_has_its_ready_history_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[str] = []
    reads = notready_loop._ready_history

    def counted(inp: DiagnosisInput, node: Node) -> notready_loop.ReadyHistory:
        read.append(node.name)
        return reads(inp, node)

    monkeypatch.setattr(notready_loop, "_ready_history", counted)
    inp = cluster([not_ready_node("n1"), not_ready_node("n2"), node("n3")])
    result = diagnose(inp)
    assert result.rule_errors == []
    assert sorted(read) == ["n1", "n2", "n3"]


def test_two_nodes_of_one_name_are_each_judged_on_their_own() -> None:
    # A node replaced under the same name (a reused private DNS name): the verdict on one
    # object is never handed to the other.
    early = replace(
        not_ready_node("n1"),
        created=ago(45),
        conditions=(Condition("Ready", "False", "KubeletNotReady", "", ago(40)),),
    )
    healthy = node("n1")
    inp = cluster([early])
    first = notready_loop.node_finding(inp, early)
    assert first is not None and first.nodes == ("n1",)
    assert notready_loop.node_finding(inp, healthy) is None
    assert notready_loop.node_finding(inp, early) is first


def test_a_mig_configs_layout_is_worked_out_once_per_gpu_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h100 = by_instance_type("p5.48xlarge")
    a100 = by_instance_type("p4d.24xlarge")
    assert h100 is not None and a100 is not None
    worked: list[tuple[str, str]] = []

    def counted(config: str, model: object, configs: object) -> object:
        worked.append((config, getattr(model, "name", "?")))
        return expected_layout(config, model, configs)  # type: ignore[arg-type]

    monkeypatch.setattr(mig_layout, "expected_layout", counted)
    inp = cluster()
    asked = [
        ("all-balanced", h100[0]),
        ("all-balanced", a100[0]),
        ("all-balanced", h100[0]),
        ("all-1g.10gb", h100[0]),
        ("all-balanced", None),
        ("all-balanced", a100[0]),
        ("all-balanced", None),
    ]
    configs = mig_layout.node_configs(inp, "any")  # no ClusterPolicy: NVIDIA's default file
    layouts = [mig_layout._expected_layout(inp, config, model, configs) for config, model in asked]
    assert layouts == [expected_layout(config, model) for config, model in asked]
    assert layouts[0] != layouts[1]  # the same config means another layout on another GPU
    assert worked == [
        ("all-balanced", h100[0].name),
        ("all-balanced", a100[0].name),
        ("all-1g.10gb", h100[0].name),
        ("all-balanced", "?"),
    ]


# -- pairing gone NodeClaims with gone Nodes -------------------------------------------------


def test_pairing_many_gone_claims_by_repair_timing_looks_only_at_the_nodes_that_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 40 NodeClaims repaired an hour apart, known only from their events, and 40 gone Nodes
    # each AcceleratedHardwareReady=False 10 min before its claim drained: each claim pairs
    # with its own Node, judging that one, not every gone Node (40 x 40).
    judged: list[str] = []
    last_unhealthy = replacements_module._last_unhealthy

    def counted(trs: Any, before: datetime | None, type_: str | None = None) -> Any:
        judged.append(type_ or "")
        return last_unhealthy(trs, before, type_)

    monkeypatch.setattr(replacements_module, "_last_unhealthy", counted)
    events: list[Event] = []
    for k in range(40):
        failed = NOW - timedelta(hours=k, minutes=20)
        events += [
            gone_claims.dcgm_error(f"ip-10-0-{k}-9.ec2.internal", failed),
            gone_claims.drained(f"{POOL}-c{k:03d}", failed + gone_claims.AHR_TOLERATION),
        ]
    found = replacements_module.replacements(gone_claims.cluster(events), timedelta(days=2))
    assert sorted((r.claim, r.node, r.cause) for r in found) == [
        (f"{POOL}-c{k:03d}", f"ip-10-0-{k}-9.ec2.internal", "repair") for k in range(40)
    ]
    # Pairing judges one Node per claim; the claim's own evidence reads its Node once more.
    assert len(judged) == 2 * 40
