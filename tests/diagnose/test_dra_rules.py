"""Nodes whose GPUs reach pods through the NVIDIA DRA driver: no nvidia.com/* in allocatable,
the MIG layout published as ResourceSlices. A correct layout raises nothing, a differing
one raises mig-layout-mismatch, a slice gone while the driver runs is a node that lost its
GPUs, and a cluster without resource.k8s.io is judged as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from drashapes import dra_node, kubectl_list, plugin_pod, resource_slice

from mignurse.cli import main
from mignurse.cluster.dra import plugin_nodes_of
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import Node, Pod, ResourceClaim, ResourceSlice
from mignurse.nodeview import node_rows, nodes_document

NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
A100 = [{"1g.5gb": 7}] * 8  # all-1g.5gb on a p4d.24xlarge (8 × A100-SXM4-40GB)
CORPUS = Path(__file__).parent.parent / "corpus" / "dra"
G7E = "ip-10-0-31-7.us-west-2.compute.internal"


def g7e_node() -> dict[str, Any]:
    """The reported node: g7e.4xlarge, one RTX PRO 6000, all-1g.24gb (Karpenter's labels as in
    tests/corpus/gpu-identity/g7e-karpenter-labels)."""
    return dra_node(
        G7E,
        config="all-1g.24gb",
        instance_type="g7e.4xlarge",
        gpu_name="rtx-pro-server-6000",
        gpu_memory="98304",
        gpu_count="1",
    )


def name(i: int) -> str:
    return f"ip-10-0-8-{10 + i}.us-west-2.compute.internal"


def snapshot(
    nodes: list[dict[str, Any]],
    slices: list[dict[str, Any]] = (),  # type: ignore[assignment]
    plugin_on: list[str] = (),  # type: ignore[assignment]
    claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> Snapshot:
    return Snapshot(
        nodes={n.name: n for n in (Node.from_api(x) for x in nodes)},
        taken_at=NOW,
        resource_slices=tuple(ResourceSlice.from_api(s) for s in slices),
        resource_claims=tuple(ResourceClaim.from_api(c) for c in claims),
        dra_plugin_nodes=plugin_nodes_of(Pod.from_api(plugin_pod(n)) for n in plugin_on),
    )


def findings(snap: Snapshot) -> list[Finding]:
    result = diagnose(DiagnosisInput(snapshot=snap, now=NOW))
    assert result.rule_errors == []
    return result.findings


def loud(found: list[Finding]) -> list[Finding]:
    return [f for f in found if f.severity in ("warning", "critical")]


def fleet(count: int = 4) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    names = [name(i) for i in range(count)]
    return [dra_node(n) for n in names], [resource_slice(n, A100) for n in names], names


def test_a_healthy_dra_fleet_of_four_a100_mig_nodes_raises_nothing() -> None:
    nodes, slices, names = fleet()

    assert loud(findings(snapshot(nodes, slices, names))) == []


def test_the_same_fleet_read_without_its_slices_is_what_used_to_page() -> None:
    """Without resource.k8s.io (an older cluster, or RBAC) it is judged as before."""
    nodes, _slices, _names = fleet()

    mismatches = [f for f in findings(snapshot(nodes)) if f.id == "mig-layout-mismatch"]

    assert len(mismatches) == 4 and {f.severity for f in mismatches} == {"critical"}
    assert all("advertises no MIG resources" in f.summary for f in mismatches)


def test_a_dra_node_whose_slices_differ_from_its_mig_config_is_a_mismatch() -> None:
    nodes, slices, names = fleet()
    wrong = [*A100[:3], {"1g.10gb": 4}, *A100[4:]]
    slices[1] = resource_slice(names[1], wrong)

    found = loud(findings(snapshot(nodes, slices, names)))

    (mismatch,) = found
    assert mismatch.id == "mig-layout-mismatch" and mismatch.nodes == (names[1],)
    assert mismatch.severity == "warning"
    assert "GPU 3: publishes MIG devices 4×1g.10gb, all-1g.5gb asks 7×1g.5gb" in mismatch.summary
    assert "reapply-mig-no-hooks" in mismatch.runbooks
    sources = {e.source for e in mismatch.evidence}
    assert "resourceslice" in sources
    assert any("generation 1: 8 GPU(s), MIG devices 4×1g.10gb + 49×1g.5gb" in e.text
               for e in mismatch.evidence)  # fmt: skip


def test_a_dra_node_publishing_too_few_gpus_or_no_mig_devices() -> None:
    nodes, slices, names = fleet(2)
    slices[0] = resource_slice(names[0], A100[:6])  # two GPUs fell off the bus
    slices[1] = resource_slice(names[1], [{}] * 8)  # MIG devices gone

    found = {f.nodes[0]: f for f in loud(findings(snapshot(nodes, slices, names)))}

    assert "publishes 6 GPUs of 8" in found[names[0]].summary
    assert found[names[0]].severity == "warning"
    assert "publishes no MIG devices although all-1g.5gb asks" in found[names[1]].summary
    assert found[names[1]].severity == "critical"


def test_a_slice_gone_while_the_dra_plugin_runs_is_a_node_that_lost_its_gpus() -> None:
    nodes, slices, names = fleet()
    del slices[2]

    found = loud(findings(snapshot(nodes, slices, names)))

    (lost,) = found
    assert lost.nodes == (names[2],) and lost.severity == "critical"
    assert "publishes no gpu.nvidia.com ResourceSlice" in lost.summary
    assert "kubelet plugin runs there" in lost.summary


def test_dynamic_mig_placements_and_a_pool_mid_update_are_not_judged() -> None:
    document = json.loads((CORPUS / "resourceslices-v1-dynamic-mig-g7e.json").read_text())
    node = g7e_node()
    other = name(0)
    partial = resource_slice(other, A100[:4], slice_count=2)

    found = loud(findings(snapshot([node, dra_node(other)], [*document["items"], partial])))

    assert found == []


def test_the_reported_g7e_node_from_its_corpus_slice_is_calm() -> None:
    document = json.loads((CORPUS / "resourceslices-v1-g7e-4xlarge-all-1g.24gb.json").read_text())
    node = g7e_node()

    snap = snapshot([node], document["items"], [G7E])

    assert loud(findings(snap)) == []
    (row,) = node_rows(snap, NOW)
    assert row.gpu == "dra 1 GPU" and row.mig == "all-1g.24gb success · 4×1g.24gb"
    entry = nodes_document(snap, NOW, context="ctx")["nodes"][0]
    assert entry["gpu"]["source"] == "dra"
    assert entry["mig"]["slices"] == {"1g.24gb": 4}
    assert [d["name"] for d in entry["gpu"]["dra"]["migDevices"]] == [
        "gpu-0-mig-14-0-1", "gpu-0-mig-14-1-1", "gpu-0-mig-14-2-1", "gpu-0-mig-14-3-1"
    ]  # fmt: skip


def test_mig_config_failed_on_a_dra_node_counts_its_published_devices() -> None:
    nodes, slices, names = fleet(2)
    nodes[0]["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    nodes[1]["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    del slices[1]

    found = {f.nodes[0]: f for f in findings(snapshot(nodes, slices, names))
             if f.id == "mig-config-failed"}  # fmt: skip

    assert found[names[0]].severity == "warning"  # its MIG devices are still on offer
    assert found[names[1]].severity == "critical" and "no GPU resources" in found[names[1]].summary


def test_diagnose_from_a_bundle_reads_the_slices_claims_and_plugin_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, slices, names = fleet()
    (tmp_path / "cluster").mkdir()
    for doc, items in (
        ("nodes", nodes),
        ("resourceslices", slices[:3]),
        ("pods", [plugin_pod(n) for n in names]),
        ("resourceclaims", []),
    ):
        (tmp_path / "cluster" / f"{doc}.json").write_text(json.dumps(kubectl_list(items)))

    code = main(
        ["diagnose", "--from", str(tmp_path), "--now", "2026-11-29T04:00:00Z", "-o", "json"]
    )
    document = json.loads(capsys.readouterr().out)

    assert code == 2
    (lost,) = document["findings"]
    assert lost["id"] == "mig-layout-mismatch" and lost["nodes"] == [names[3]]
    assert "DRA driver's kubelet plugin runs there" in lost["summary"]
