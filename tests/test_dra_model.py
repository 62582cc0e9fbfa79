"""ResourceSlices and ResourceClaims of the NVIDIA DRA driver, read from real-shaped dumps
(tests/corpus/dra/) of each resource.k8s.io version, and what a node's pool holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from drashapes import resource_slice

from mignurse.cluster.dra import pick_version, plugin_nodes_of
from mignurse.model import (
    Pod,
    ResourceClaim,
    ResourceSlice,
    dra_devices_by_node,
    pod_claim_names,
    with_gpu_claims,
)

CORPUS = Path(__file__).parent / "corpus" / "dra"
G7E = "ip-10-0-31-7.us-west-2.compute.internal"


def items(name: str) -> list[dict[str, Any]]:
    document = json.loads((CORPUS / name).read_text())
    found: list[dict[str, Any]] = document["items"]
    return found


def slices(name: str) -> list[ResourceSlice]:
    return [ResourceSlice.from_api(i) for i in items(name)]


def test_v1_slice_of_the_reported_g7e_node_holds_one_gpu_and_four_1g24gb() -> None:
    (piece,) = slices("resourceslices-v1-g7e-4xlarge-all-1g.24gb.json")
    assert piece.driver == "gpu.nvidia.com" and piece.pool == G7E and piece.node_name == G7E
    devices = dra_devices_by_node([piece])[G7E]
    assert [d.name for d in devices.gpus] == ["gpu-0"]
    assert devices.gpus[0].product == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert devices.mig_counts() == {"1g.24gb": 4}
    assert list(devices.per_gpu().values()) == [{"1g.24gb": 4}]
    assert all(d.parent_uuid == devices.gpus[0].uuid for d in devices.migs)
    assert devices.complete and not devices.dynamic
    assert [d.gpu_minor for d in devices.migs] == [0, 0, 0, 0]


def test_v1beta1_devices_wrapped_in_basic_read_the_same() -> None:
    (piece,) = slices("resourceslices-v1beta1-g7e-12xlarge-all-2g.48gb.json")
    devices = dra_devices_by_node([piece])[piece.node_name]
    assert len(devices.gpus) == 2
    assert list(devices.per_gpu().values()) == [{"2g.48gb": 2}, {"2g.48gb": 2}]


def test_dynamic_mig_placements_are_not_a_layout() -> None:
    (piece,) = slices("resourceslices-v1-dynamic-mig-g7e.json")
    devices = dra_devices_by_node([piece])[G7E]
    assert devices.dynamic
    # v25.12.0 names: gpu-0-mig-1g24gb-0-0 still tells the GPU it is on
    assert {d.gpu_minor for d in devices.migs} == {0}
    assert devices.mig_counts() == {"1g.24gb": 4, "2g.48gb": 2}


def test_only_the_newest_generation_of_a_pool_counts_and_a_partial_one_says_so() -> None:
    node = "ip-10-0-1-1.us-west-2.compute.internal"
    old = resource_slice(node, [{"1g.5gb": 7}], generation=3, suffix="old")
    new_a = resource_slice(node, [{"3g.20gb": 2}], generation=4, slice_count=2, suffix="a")
    devices = dra_devices_by_node([ResourceSlice.from_api(x) for x in (old, new_a)])[node]
    assert devices.generation == 4 and devices.mig_counts() == {"3g.20gb": 2}
    assert not devices.complete and (devices.slices, devices.slices_expected) == (1, 2)


def test_other_drivers_and_pools_of_several_nodes_are_no_nodes_gpus() -> None:
    node = "ip-10-0-1-1.us-west-2.compute.internal"
    other = resource_slice(node, [{"1g.5gb": 7}], driver="dra.example.com")
    shared = resource_slice(node, [{}], suffix="s")
    shared["spec"].pop("nodeName")
    shared["spec"]["allNodes"] = True
    assert dra_devices_by_node([ResourceSlice.from_api(x) for x in (other, shared)]) == {}


def test_garbage_slices_and_claims_parse_to_empty_values() -> None:
    for raw in ({}, {"spec": []}, {"spec": {"pool": "x", "devices": [1, "a", {"basic": 3}]}}):
        piece = ResourceSlice.from_api(raw)
        assert piece.pool == "" and all(d.type == "" for d in piece.devices)
    claim = ResourceClaim.from_api(
        {"status": {"allocation": {"devices": "x", "nodeSelector": {"nodeSelectorTerms": 3}}}}
    )
    assert claim.devices == () and claim.node_name == ""


def test_claims_hold_devices_and_make_their_pods_gpu_users() -> None:
    allocated, pending = (
        ResourceClaim.from_api(i) for i in items("resourceclaims-v1-one-allocated-one-pending.json")
    )
    assert allocated.node_name == G7E
    assert [(d.pool, d.device) for d in allocated.devices_of()] == [(G7E, "gpu-0-mig-14-1-1")]
    assert allocated.reserved_for == ("trainer-0",)
    assert pending.devices == ()
    trainer = {
        "metadata": {"name": "trainer-0", "namespace": "ml"},
        "spec": {"nodeName": G7E, "resourceClaims": [{"name": "mig"}]},
        "status": {"resourceClaimStatuses": [{"name": "mig", "resourceClaimName": allocated.name}]},
    }
    idle = {"metadata": {"name": "web", "namespace": "ml"}, "spec": {"nodeName": G7E}}
    assert pod_claim_names(trainer) == (allocated.name,)
    pods = with_gpu_claims([Pod.from_api(trainer), Pod.from_api(idle)], [allocated, pending])
    assert [p.uses_gpu for p in pods] == [True, False]
    assert pods[0].gpu_claims == (f"{allocated.name}: gpu-0-mig-14-1-1",)


def test_the_served_resource_k8s_io_version_is_picked_preferred_first() -> None:
    def group(*versions: str, preferred: str = "") -> dict[str, Any]:
        return {
            "versions": [{"version": v} for v in versions],
            "preferredVersion": {"version": preferred or versions[0]},
        }

    assert pick_version(group("v1", "v1beta2", "v1beta1")) == "v1"  # EKS 1.34
    assert pick_version(group("v1beta2", "v1beta1", "v1alpha3")) == "v1beta2"  # 1.33
    assert pick_version(group("v1beta1", "v1alpha3", preferred="v1alpha3")) == "v1beta1"
    assert pick_version(group("v1alpha3")) == ""  # 1.31: nothing mignurse reads
    assert pick_version(None) == ""


def test_plugin_nodes_are_those_running_the_drivers_kubelet_plugin() -> None:
    def pod(node: str, phase: str, component: str) -> Pod:
        return Pod.from_api(
            {
                "metadata": {"labels": {"nvidia-dra-driver-gpu-component": component}},
                "spec": {"nodeName": node},
                "status": {"phase": phase},
            }
        )

    pods = [pod("a", "Running", "kubelet-plugin"), pod("b", "Pending", "kubelet-plugin")]
    pods.append(pod("c", "Running", "controller"))
    assert plugin_nodes_of(pods) == {"a"}
