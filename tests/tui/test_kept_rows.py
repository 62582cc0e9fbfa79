"""The refresh's node rows: made again only for the nodes that changed (a new Node, NodeClaim or
DRA devices), every one of them on a full refresh (ages move), and always what
`nodeview.node_rows` makes of the same snapshot without them at the moment they were made."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from mignurse.cluster.snapshot import Snapshot
from mignurse.model import Node, NodeClaim
from mignurse.nodeview import node_rows

from .test_refresh_clusters import NOW, node, not_ready_node


def snapshot_of(*nodes: Node, claims: dict[str, NodeClaim] | None = None) -> Snapshot:
    return Snapshot(
        nodes={n.name: n for n in nodes},
        nodeclaims=claims or {},
        karpenter=True,
        taken_at=NOW,
    )


def test_rows_are_node_rows_and_only_changed_nodes_rows_are_made_again() -> None:
    a, b, c = node("gpu-a"), not_ready_node("gpu-b"), node("gpu-c")
    kept: dict[str, tuple[object, ...]] = {}
    first = node_rows(snapshot_of(a, b, c), NOW, kept=kept, fresh=True)
    assert first == node_rows(snapshot_of(a, b, c), NOW)

    later = NOW + timedelta(minutes=7)
    b2 = replace(b, conditions=node("x").conditions)  # gpu-b became Ready
    claim = replace(NodeClaim(name="gpu-pool-x1", pool="gpu-training"), node_name="gpu-c")
    second = node_rows(
        snapshot_of(a, b2, c, claims={claim.name: claim}), later, kept=kept, fresh=False
    )
    by_name = {r.name: r for r in second}
    assert by_name["gpu-a"] is first[0]  # unchanged: its row as made then (its age then)
    assert by_name["gpu-b"] == node_rows(snapshot_of(b2), later)[0]  # the node changed
    assert by_name["gpu-c"] is not first[2]  # its NodeClaim appeared
    assert [r.name for r in second] == [r.name for r in first]

    third = node_rows(
        snapshot_of(a, b2, c, claims={claim.name: claim}), later, kept=kept, fresh=True
    )
    assert third == node_rows(snapshot_of(a, b2, c, claims={claim.name: claim}), later)


def test_a_node_gone_is_gone_from_the_rows_and_from_what_is_kept() -> None:
    a, b = node("gpu-a"), node("gpu-b")
    kept: dict[str, tuple[object, ...]] = {}
    node_rows(snapshot_of(a, b), NOW, kept=kept, fresh=True)
    rows = node_rows(snapshot_of(a), NOW, kept=kept, fresh=False)
    assert [r.name for r in rows] == ["gpu-a"] and set(kept) == {"gpu-a"}
