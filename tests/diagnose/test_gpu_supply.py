"""What a node under `nvidia.com/mig.config=all-disabled` whose mig-manager failed still offers
pods: whole GPUs published by the NVIDIA DRA driver, or allocatable `nvidia.com/gpu` from the
device plugin. A node that offers none is critical and says so; one that still offers GPUs is
a warning, and the evidence names where the GPUs come from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from drashapes import dra_node, plugin_pod, resource_slice

from mignurse.cluster.dra import plugin_nodes_of
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import Node, Pod, ResourceSlice

NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
NODE = "ip-10-0-8-10.us-west-2.compute.internal"


def failed_all_disabled(allocatable_gpus: str | None = None) -> dict[str, Any]:
    node = dra_node(NODE, config="all-disabled", state="failed")
    if allocatable_gpus is not None:
        node["status"]["allocatable"]["nvidia.com/gpu"] = allocatable_gpus
    return node


def mig_config_failed(
    node: dict[str, Any],
    slices: Sequence[dict[str, Any]] = (),
    plugin: bool = False,
) -> Finding:
    snapshot = Snapshot(
        nodes={NODE: Node.from_api(node)},
        taken_at=NOW,
        resource_slices=tuple(ResourceSlice.from_api(s) for s in slices),
        dra_plugin_nodes=plugin_nodes_of([Pod.from_api(plugin_pod(NODE))] if plugin else []),
    )
    result = diagnose(DiagnosisInput(snapshot=snapshot, now=NOW))
    assert result.rule_errors == []
    (found,) = [f for f in result.findings if f.id == "mig-config-failed"]
    return found


def evidence_text(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


def test_a_dra_node_whose_plugin_runs_but_publishes_no_slice_has_no_gpu_for_pods() -> None:
    found = mig_config_failed(failed_all_disabled(), plugin=True)
    assert found.severity == "critical"
    assert "(no GPU resources)" in found.summary
    assert (
        "no gpu.nvidia.com ResourceSlice for the node (its kubelet plugin runs on the node)"
        in evidence_text(found)
    )


def test_a_dra_node_still_publishing_its_whole_gpu_is_a_warning_and_says_slices_are_missing() -> (
    None
):
    slices = [resource_slice(NODE, [{}], slice_count=2)]
    found = mig_config_failed(failed_all_disabled(), slices)
    assert found.severity == "warning"
    assert "no GPU resources" not in found.summary
    text = evidence_text(found)
    assert "1 GPU(s)" in text
    assert "(1 of 2 slices published so far)" in text


def test_a_complete_dra_pool_is_not_called_partial() -> None:
    found = mig_config_failed(failed_all_disabled(), [resource_slice(NODE, [{}])])
    assert found.severity == "warning"
    assert "slices published so far" not in evidence_text(found)


def test_a_device_plugin_node_without_allocatable_gpus_has_no_gpu_for_pods() -> None:
    found = mig_config_failed(failed_all_disabled())
    assert found.severity == "critical"
    assert "(no GPU resources)" in found.summary
    assert "nvidia.com/gpu 0" in evidence_text(found)


def test_a_device_plugin_node_still_advertising_a_gpu_is_a_warning() -> None:
    found = mig_config_failed(failed_all_disabled(allocatable_gpus="1"))
    assert found.severity == "warning"
    assert "no GPU resources" not in found.summary
    assert "nvidia.com/gpu 1" in evidence_text(found)
