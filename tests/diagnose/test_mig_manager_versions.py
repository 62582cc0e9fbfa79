"""mig-manager as it is now, read by version. The ClusterPolicy shapes are the gpu-operator
chart's (NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/templates/clusterpolicy.yaml:
`app.kubernetes.io/version` from "gpu-operator.labels", spec.migManager.version from
values.yaml `v0.15.0`).

- GPU clients that do not stop within 5 min: up to mig-parted v0.15.0 the operand labels stay
  paused-for-mig-change and the state pending for good (NVIDIA/gpu-operator#2833); after
  NVIDIA/mig-parted#484, merged after v0.15.0, the state ends failed with the labels restored.
- WITH_SHUTDOWN_HOST_GPU_CLIENTS as a user setting (NVIDIA/gpu-operator#2702, commit 5aa78c1)
  is in no tag up to v26.7.0, whose mig-manager ConfigMap sets it from IS_HOST_DRIVER
  (assets/state-mig-manager/0420_configmap.yaml): the advice names the user-data workaround.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.inputs import DiagnosisInput

from .test_node_rules import about, bundle, incident_node, relabel, run, sibling_node, sim_input
from .test_node_rules import with_node as with_node_of

PAUSED = {
    f"nvidia.com/gpu.deploy.{op}": "paused-for-mig-change"
    for op in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")
}


def policy(operator: str | None = "v26.7.0", mig_manager: str | None = "v0.15.0") -> Any:
    labels = {
        "app.kubernetes.io/name": "gpu-operator",
        "app.kubernetes.io/component": "gpu-operator",
    }
    if operator is not None:
        labels["app.kubernetes.io/version"] = operator
    manager = {
        "enabled": True,
        "repository": "nvcr.io/nvidia/cloud-native",
        "image": "k8s-mig-manager",
    }
    spec: dict[str, Any] = {"migManager": manager}
    if mig_manager is not None:
        spec["migManager"]["version"] = mig_manager
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy", "labels": labels}, "spec": spec}  # fmt: skip


def stuck_pending(inp: DiagnosisInput, manager: str | None) -> tuple[DiagnosisInput, str]:
    old = relabel(sibling_node(inp), **{"nvidia.com/mig.config.state": "pending"}, **PAUSED)
    inp = replace(with_node_of(inp, old), cluster_policy=policy(mig_manager=manager))
    return inp, old.name


@pytest.mark.parametrize("manager", ["v0.15.0", "v0.14.5-ubuntu20.04", None])
def test_pending_with_paused_operands_is_the_wedge_up_to_v0_15_0(manager: str | None) -> None:
    inp, node = stuck_pending(sim_input("mig-hook-notready"), manager)

    summary = about(run(inp), node)["mig-config-failed"].summary

    assert "never restores the labels" in summary
    assert "NVIDIA/gpu-operator#2833" in summary and "NVIDIA/mig-parted#484" in summary
    assert "`mignurse userdata`" in summary
    if manager is None:
        assert "a mig-manager up to v0.15.0" in summary
    else:
        assert f"mig-manager {manager.split('-')[0]}, without NVIDIA/mig-parted#484" in summary


@pytest.mark.parametrize("manager", ["v0.15.1", "v0.16.0"])
def test_pending_with_paused_operands_after_the_fix_means_mig_manager_is_not_there(
    manager: str,
) -> None:
    inp, node = stuck_pending(sim_input("mig-hook-notready"), manager)

    summary = about(run(inp), node)["mig-config-failed"].summary

    assert f"mig-manager {manager} ends a client-shutdown timeout as failed" in summary
    assert "is not running on the node or died mid-reconfigure" in summary
    assert "never restores" not in summary


@pytest.mark.parametrize(
    ("manager", "clients"), [("v0.16.0", True), (None, True), ("v0.15.0", False)]
)
def test_failed_with_the_labels_restored_names_the_client_timeout_only_where_it_ends_so(
    manager: str | None, clients: bool
) -> None:
    inp = sim_input("mig-hook-notready")
    failed = relabel(sibling_node(inp), **{"nvidia.com/mig.config.state": "failed"})
    inp = replace(with_node_of(inp, failed), cluster_policy=policy(mig_manager=manager))

    summary = about(run(inp), failed.name)["mig-config-failed"].summary

    assert "gave up and restored the operand labels" in summary
    assert ("GPU clients that did not stop within 5 min" in summary) is clients


@pytest.mark.parametrize("operator", ["v26.7.0", "v25.10.1", None])
def test_the_kubelet_restart_advice_is_the_kubelet_setting_or_user_data_up_to_v26_7_0(
    operator: str | None,
) -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, node_evidence={node.name: bundle(node)}, cluster_policy=policy(operator))

    summary = about(run(inp), node.name)["mig-hook-kubelet-restart"].summary

    # mig-parted v0.15.0 reconfigure.go stops kubelet only where this setting is not empty
    assert 'set HOST_KUBELET_SYSTEMD_SERVICE to "" in the ClusterPolicy\'s spec.migManager.env' in (
        summary
    )
    assert "`mignurse userdata` writes it" in summary
    assert "WITH_SHUTDOWN_HOST_GPU_CLIENTS" not in summary


def test_an_operator_newer_than_v26_7_0_is_told_of_the_setting_and_the_workaround() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, node_evidence={node.name: bundle(node)}, cluster_policy=policy("v26.10.0"))

    summary = about(run(inp), node.name)["mig-hook-kubelet-restart"].summary

    assert "gpu-operator v26.10.0 is newer than v26.7.0" in summary
    assert "WITH_SHUTDOWN_HOST_GPU_CLIENTS=false" in summary
    assert "`mignurse userdata` writes it" in summary


def mig_manager_daemonset(image: str) -> DaemonSetInfo:
    # gpu-operator v26.7.0 assets/state-mig-manager/0600_daemonset.yaml: the operator sets the
    # container image to <repository>/<image>:<version> from the ClusterPolicy's migManager.
    return DaemonSetInfo.from_api({
        "metadata": {"namespace": "gpu-operator", "name": "nvidia-mig-manager"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "nvidia-mig-manager", "image": image}]}}},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("image", "read"),
    [
        ("nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.16.0", "v0.16.0"),
        ("nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.14.5-ubuntu20.04@sha256:" + "a" * 64,
         "v0.14.5"),
        ("registry.local:5000/mirror/k8s-mig-manager:v0.16.0", "v0.16.0"),
        ("nvcr.io/nvidia/cloud-native/k8s-mig-manager:latest", None),
        ("nvcr.io/nvidia/cloud-native/k8s-mig-manager-extra:v0.16.0", None),
    ],
)  # fmt: skip
def test_without_a_cluster_policy_the_mig_manager_image_tag_tells_the_version(
    image: str, read: str | None
) -> None:
    inp, node = stuck_pending(sim_input("mig-hook-notready"), None)
    inp = replace(inp, cluster_policy=None, daemonsets=(mig_manager_daemonset(image),))

    summary = about(run(inp), node)["mig-config-failed"].summary

    if read is None:
        assert "a mig-manager up to v0.15.0" in summary
    elif read == "v0.16.0":
        assert "mig-manager v0.16.0 ends a client-shutdown timeout as failed" in summary
    else:
        assert f"mig-manager {read}, without NVIDIA/mig-parted#484" in summary


def test_mig_manager_daemonsets_that_disagree_leave_the_version_unknown() -> None:
    inp, node = stuck_pending(sim_input("mig-hook-notready"), None)
    two = tuple(
        mig_manager_daemonset(f"nvcr.io/nvidia/cloud-native/k8s-mig-manager:{tag}")
        for tag in ("v0.16.0", "v0.15.0")
    )
    summary = about(run(replace(inp, cluster_policy=None, daemonsets=two)), node)[
        "mig-config-failed"
    ].summary
    assert "a mig-manager up to v0.15.0" in summary
