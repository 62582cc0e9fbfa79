"""`History.of_node`: what the history holds about one Node, through an index built once, gives
that node's timeline exactly as the whole history does (the app's detail pane reads it for
each node the cursor reaches, on the UI thread)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.cluster.history import Lifecycle, Transition
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.inputs import DiagnosisInput, History
from mignurse.diagnose.timeline import node_timeline
from mignurse.model import Event, NodeClaim

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
NODES = [f"ip-10-0-0-{i}.ec2.internal" for i in range(4)]
CLAIMS = [f"gpu-{i}" for i in range(6)]


def _event(rng: random.Random, n: int) -> Event:
    kind = rng.choice(["Node", "NodeClaim", "Pod", "NodePool"])
    name = rng.choice(NODES if kind == "Node" else CLAIMS if kind == "NodeClaim" else ["x"])
    when = NOW - timedelta(minutes=rng.randrange(600))
    uid = f"uid-{rng.randrange(n // 2 + 1)}"  # some recorded twice: the newest copy wins
    return Event(
        namespace="default",
        name=f"{name}.{n}",
        uid=uid,
        involved_kind=kind,
        involved_name=name,
        involved_uid=f"uid-{name}",
        reason=rng.choice(["Unhealthy", "NodeNotReady", "Launched", "RegisteredNode"]),
        message=f"event {n}",
        type="Normal",
        source="karpenter",
        host="",
        first_seen=when,
        last_seen=when + timedelta(minutes=rng.randrange(3)),
        count=1 + rng.randrange(3),
    )


def _lifecycle(rng: random.Random, kind: str, name: str) -> Lifecycle:
    seen = NOW - timedelta(minutes=rng.randrange(900))
    return Lifecycle(
        context="ml-prod",
        kind=kind,
        name=name,
        uid=f"uid-{name}-{rng.randrange(3)}",
        pool="gpu",
        instance_type="p5.48xlarge",
        instance_id="",
        image_id="",
        node_name=rng.choice([*NODES, ""]) if kind == "NodeClaim" else "",
        nodeclaim="",
        created=seen,
        first_seen=seen,
        first_ready=seen + timedelta(minutes=2) if rng.random() < 0.7 else None,
        last_seen=NOW,
        deleting_since=None,
        termination_timestamp=None,
        disruption_reason=None,
        drifted=False,
        deleted_at=seen + timedelta(minutes=30) if rng.random() < 0.5 else None,
        deleted_seen=None,
        last_unhealthy=None,
    )


def _transition(rng: random.Random, n: int) -> Transition:
    when = NOW - timedelta(minutes=rng.randrange(600))
    kind = rng.choice(["Node", "NodeClaim"])
    return Transition(
        context="ml-prod",
        kind=kind,
        name=rng.choice(NODES if kind == "Node" else CLAIMS),
        uid="u",
        time=when,
        observed_at=when,
        condition="Ready",
        status=rng.choice(["True", "False", "Unknown"]),
        reason=f"r{n}",
        message="",
    )


def _history(seed: int) -> History:
    rng = random.Random(seed)
    return History(
        lifecycles=tuple(
            _lifecycle(rng, kind, name)
            for kind, names in (("Node", NODES), ("NodeClaim", CLAIMS))
            for name in names
            for _ in range(rng.randrange(3))
        ),
        transitions=tuple(_transition(rng, n) for n in range(rng.randrange(40))),
        events=tuple(_event(rng, n) for n in range(rng.randrange(120))),
    )


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(NODES), st.sets(st.sampled_from(CLAIMS)))
def test_a_nodes_timeline_from_its_part_of_the_history_is_the_whole_historys(
    seed: int, node: str, claims_now: set[str]
) -> None:
    history = _history(seed)
    snapshot = Snapshot(
        nodes={},
        nodeclaims={c: replace(NodeClaim(name=c, pool="gpu"), node_name=node) for c in claims_now},
        taken_at=NOW,
    )
    whole = DiagnosisInput(snapshot=snapshot, now=NOW, history=history)
    part = DiagnosisInput(
        snapshot=snapshot, now=NOW, history=history.indexed().of_node(node, claims_now)
    )
    assert node_timeline(part, node) == node_timeline(whole, node)


def test_the_part_holds_only_what_is_about_the_node_and_its_claims() -> None:
    history = _history(7)
    node = NODES[0]
    part = history.of_node(node, ["gpu-0"])
    became = {
        lc.name for lc in history.lifecycles if lc.kind == "NodeClaim" and lc.node_name == node
    }
    assert all(
        (e.involved_kind, e.involved_name) == ("Node", node)
        or (e.involved_kind == "NodeClaim" and e.involved_name in became | {"gpu-0"})
        for e in part.events
    )
    assert all(t.kind == "Node" and t.name == node for t in part.transitions)
    assert len(part.events) < len(history.events)
