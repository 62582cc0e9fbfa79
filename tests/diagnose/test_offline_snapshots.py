"""A bundle or a folder of kubectl dumps as `mignurse diagnose --from` reads it: what it says
about files that are missing or damaged, which Karpenter objects make a Karpenter cluster,
and the moment the snapshot is judged at (when it was collected, unless the cluster's own
clocks wrote later timestamps into it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.diagnose.sources import SourceError, load_offline
from mignurse.model import parse_time

NODE = "ip-10-0-41-7.us-west-2.compute.internal"
CLAIM = "gpu-a100-x7k2p"


def node(created: str | None = "2026-11-29T03:00:00Z") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NODE, "labels": {"karpenter.sh/nodepool": "gpu-a100"}}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}, "status": {}}


def claim(created: str, deleting: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": CLAIM, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta}


def event(last: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{CLAIM}.187a", "namespace": "default"},
        "involvedObject": {"kind": "NodeClaim", "name": CLAIM},
        "reason": "Unhealthy",
        "type": "Warning",
        "firstTimestamp": "2026-11-29T03:00:30Z",
        "lastTimestamp": last,
    }


def listing(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": list(items)}


def bundle(root: Path, manifest: dict[str, Any] | None = None, **documents: Any) -> Path:
    """A mignurse bundle: `cluster/<name>.json` for each document, and the manifest."""
    (root / "cluster").mkdir(parents=True)
    for name, document in documents.items():
        (root / "cluster" / f"{name}.json").write_text(json.dumps(document))
    if manifest is not None:
        (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_a_nodes_json_saved_as_a_bare_array_is_refused_and_diagnosed_once_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle(tmp_path, {"collected_at": "2026-11-29T04:00:00Z"}, nodes=[node()])
    with pytest.raises(SourceError, match=r"nodes\.json is not a kubectl list"):
        load_offline(tmp_path)
    assert main(["diagnose", "--from", str(tmp_path)]) == 2  # bad input: the usage exit
    err = capsys.readouterr().err
    assert err.startswith("mignurse: error: ") and "nodes.json is not a kubectl list" in err
    assert len(err.strip().splitlines()) == 1
    # Saved again as `kubectl get nodes -o json` writes it, the same bundle is judged.
    (tmp_path / "cluster" / "nodes.json").write_text(json.dumps(listing(node())))
    assert main(["diagnose", "--from", str(tmp_path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_a_damaged_node_is_left_out_and_counted_the_rest_is_read(tmp_path: Path) -> None:
    damaged = {"metadata": "hand-edited"}
    gathered = load_offline(bundle(tmp_path, nodes=listing(node(), damaged)))
    assert list(gathered.snapshot.nodes) == [NODE]
    (notice,) = gathered.notices
    assert notice.startswith(
        "nodes.json: 1 item(s) are not shaped as kubectl writes them and were left out; "
        "the first: items[1] (AttributeError: "
    )


def test_an_empty_folder_asks_for_kubectl_get_nodes(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as raised:
        load_offline(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path} has no cluster/nodes.json (or nodes.json): a snapshot needs at least "
        "`kubectl get nodes -o json`"
    )


def test_nodeclaims_alone_are_a_karpenter_cluster_judged_without_node_conditions(
    tmp_path: Path,
) -> None:
    deleting = "2026-11-29T03:20:00Z"
    gathered = load_offline(
        bundle(tmp_path, nodeclaims=listing(claim("2026-11-29T03:00:00Z", deleting)))
    )
    assert gathered.notices == [
        "no nodes.json: the nodes' conditions are unknown; judged from nodeclaims.json"
    ]
    assert gathered.snapshot.karpenter
    assert gathered.newest_time() == parse_time(deleting)


def test_without_a_manifest_a_dump_of_events_is_judged_at_its_newest_event(
    tmp_path: Path,
) -> None:
    last = "2026-11-29T03:41:07Z"
    gathered = load_offline(bundle(tmp_path, events=listing(event(last))))
    assert gathered.notices == [
        "no nodes.json: the nodes' conditions are unknown; judged from events.json"
    ]
    assert gathered.judge_time() == parse_time(last)


def test_without_a_manifest_nodes_without_conditions_are_judged_at_their_creation(
    tmp_path: Path,
) -> None:
    gathered = load_offline(bundle(tmp_path, nodes=listing(node("2026-11-29T03:12:00Z"))))
    assert not gathered.snapshot.karpenter
    assert gathered.judge_time() == parse_time("2026-11-29T03:12:00Z")


def test_the_gpu_operators_cluster_policy_is_read(tmp_path: Path) -> None:
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"migManager": {"enabled": True}},
    }
    gathered = load_offline(bundle(tmp_path, nodes=listing(node()), clusterpolicy=policy))
    assert gathered.cluster_policy is not None
    assert gathered.cluster_policy["metadata"]["name"] == "cluster-policy"


def test_a_snapshot_with_no_timestamp_but_its_manifest_is_judged_when_collected(
    tmp_path: Path,
) -> None:
    gathered = load_offline(
        bundle(tmp_path, {"collected_at": "2026-11-29T04:00:00Z"}, nodes=listing(node(None)))
    )
    assert gathered.judge_time() == parse_time("2026-11-29T04:00:00Z")
    assert gathered.notices == []


def test_evidence_at_the_very_moment_of_collection_is_not_a_clock_skew(tmp_path: Path) -> None:
    at = "2026-11-29T03:41:07Z"
    gathered = load_offline(
        bundle(tmp_path, {"collected_at": at}, nodes=listing(node()), events=listing(event(at)))
    )
    assert gathered.judge_time() == parse_time(at)
    assert gathered.notices == []


@pytest.mark.parametrize(
    ("collected_at", "span"),
    [("2026-11-29T03:40:07Z", "1m 0s"), ("2026-11-29T03:40:08Z", "59s")],
)
def test_a_collector_clock_behind_the_cluster_is_named_and_the_newest_evidence_wins(
    tmp_path: Path, collected_at: str, span: str
) -> None:
    last = "2026-11-29T03:41:07Z"
    gathered = load_offline(
        bundle(
            tmp_path,
            {"collected_at": collected_at},
            nodes=listing(node()),
            events=listing(event(last)),
        )
    )
    assert gathered.judge_time() == parse_time(last)
    (notice,) = gathered.notices
    assert f"is {span} after collected_at" in notice
    assert "the collecting clock was behind the cluster's" in notice
