"""Reading snapshots: bundle layout, bare kubectl dumps, tarballs, and what goes wrong."""

from __future__ import annotations

import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mignurse.diagnose.sources import SourceError, load_offline
from mignurse.sim import SimCluster, load_scenario

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)

KINDS = {
    "nodes": ("v1", "Node"),
    "events": ("v1", "Event"),
    "nodeclaims": ("karpenter.sh/v1", "NodeClaim"),
    "nodepools": ("karpenter.sh/v1", "NodePool"),
}


def kubectl_list(sim: SimCluster, plural: str) -> dict[str, Any]:
    """What `kubectl get <plural> -A -o json` prints: a List whose items carry their kind."""
    api_version, kind = KINDS[plural]
    items = [{"apiVersion": api_version, "kind": kind, **o} for o in sim.objects(plural)]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


def write_dumps(sim: SimCluster, root: Path, *, flat: bool = False) -> Path:
    folder = root if flat else root / "cluster"
    folder.mkdir(parents=True, exist_ok=True)
    for plural in KINDS:
        (folder / f"{plural}.json").write_text(json.dumps(kubectl_list(sim, plural)))
    deployments = [d for d in sim.objects("deployments") if d["metadata"]["name"] == "karpenter"]
    (folder / "karpenter.json").write_text(json.dumps(deployments[0]))
    return root


@pytest.fixture(scope="module")
def repair_loop() -> SimCluster:
    # A fixed start on the manual clock: the timestamps it writes are whole seconds of it.
    return SimCluster(load_scenario("dcgm-repair-loop"), speed=0, start=START)


def test_bundle_layout_directory(repair_loop: SimCluster, tmp_path: Path) -> None:
    gathered = load_offline(write_dumps(repair_loop, tmp_path))
    assert len(gathered.snapshot.nodes) == len(repair_loop.objects("nodes"))
    assert gathered.snapshot.karpenter
    assert gathered.karpenter is not None and gathered.karpenter.node_repair is True
    # Without a manifest, "now" is the newest timestamp: at most a heartbeat period behind.
    newest = gathered.newest_time()
    assert newest is not None
    assert (
        repair_loop.now() - newest
    ).total_seconds() == 162  # within a heartbeat period; exact on the manual clock


def test_a_flat_directory_of_kubectl_dumps(repair_loop: SimCluster, tmp_path: Path) -> None:
    gathered = load_offline(write_dumps(repair_loop, tmp_path, flat=True))
    assert len(gathered.snapshot.nodeclaims) == len(repair_loop.objects("nodeclaims"))
    assert len(gathered.snapshot.events) == len(repair_loop.objects("events"))


def test_a_tarball_with_a_top_folder_and_node_files(
    repair_loop: SimCluster, tmp_path: Path
) -> None:
    root = write_dumps(repair_loop, tmp_path / "bundle-x")
    node = repair_loop.objects("nodes")[0]["metadata"]["name"]
    node_dir = root / "nodes" / node
    node_dir.mkdir(parents=True)
    (node_dir / "cgroup-fs.txt").write_text("cgroup2fs\n")
    (node_dir / "kubelet.log").write_text(
        f"2026-11-29T03:01:02.345678+0000 {node} systemd[1]: "
        "Stopping kubelet.service - Kubernetes Kubelet...\n"
    )
    (node_dir / "errors.txt").write_text("nvidia-smi.xml: nvidia-smi not found\n")
    (root / "manifest.json").write_text(
        json.dumps({"collected_at": "2026-11-29T03:05:00Z", "context": "prod"})
    )
    bundle = tmp_path / "bundle.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(root, arcname="bundle-x")
    gathered = load_offline(bundle)
    assert gathered.context == "prod"
    assert gathered.collected_at is not None and gathered.collected_at.hour == 3
    evidence = gathered.node_evidence[node]
    assert evidence.cgroup is not None and evidence.cgroup.version == 2
    assert evidence.journals["kubelet"].entries[0].ident == "systemd"
    assert evidence.problems == ("nvidia-smi.xml: nvidia-smi not found",)
    assert evidence.mig is None


def test_what_is_wrong_with_a_snapshot_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"has no cluster/nodes\.json"):
        load_offline(tmp_path)
    with pytest.raises(SourceError, match="does not exist"):
        load_offline(tmp_path / "nope")
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    with pytest.raises(SourceError, match="neither a snapshot directory nor"):
        load_offline(junk)
    (tmp_path / "nodes.json").write_text("{broken")
    with pytest.raises(SourceError, match=r"nodes\.json is not JSON"):
        load_offline(tmp_path)
    (tmp_path / "nodes.json").write_text('{"kind": "Status"}')
    with pytest.raises(SourceError, match="not a kubectl list"):
        load_offline(tmp_path)


def test_gate_setting_reads_the_last_token_like_cliflag() -> None:
    from mignurse.diagnose.inputs import gate_setting, gate_value

    assert gate_setting("NodeRepair=true,NodeRepair=false") is False
    assert gate_value("NodeRepair=false,NodeRepair=true", "NodeRepair") is True
    assert gate_setting("SpotToSpotConsolidation=true") is None
    assert gate_value("SpotToSpotConsolidation=true", "NodeRepair") is False
