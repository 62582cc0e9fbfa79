"""mig-config-failed by state: what `nvidia.com/mig.config.state` failed, pending or rebooting
means next to the operand labels and the mig-manager version, how bad it is, and the evidence
beside it. The states and labels are mig-manager's (NVIDIA/mig-parted@v0.15.0
pkg/mig/reconfigure/reconfigure.go: `pending`, `rebooting`, `success`, `failed` on
`nvidia.com/mig.config.state`, `paused-for-mig-change` on the operands' `nvidia.com/gpu.deploy.*`
labels while it reconfigures); docs/mig.md.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.evidence import parse_nvml_json, parse_smi_xml
from mignurse.model import Condition, Node

from .test_mig_hook_edges import node_bundle
from .test_mig_manager_versions import PAUSED, mig_manager_daemonset, policy
from .test_node_rules import (
    about,
    h100_xml,
    incident_node,
    relabel,
    run,
    sibling_node,
    sim_input,
    with_node,
)

CONFIG = "mig-config-failed"


@pytest.fixture(scope="module")
def cluster() -> DiagnosisInput:
    return sim_input("mig-hook-notready")


def in_state(node: Node, state: str, *, paused: bool = False) -> Node:
    labels = {"nvidia.com/mig.config.state": state, **(PAUSED if paused else {})}
    return relabel(node, **labels)


def config_of(inp: DiagnosisInput, node: Node, **changes: object) -> Finding | None:
    inp = replace(with_node(inp, node), **changes)  # type: ignore[arg-type]
    return about(run(inp), node.name).get(CONFIG)


def lines_of(finding: Finding) -> list[str]:
    return [f"{e.source} {e.text}" for e in finding.evidence]


# -- rebooting, pending, failed: what each means ---------------------------------------------


@pytest.mark.parametrize("manager", ["v0.16.0", "v0.15.0", None])
def test_a_node_stuck_rebooting_for_a_mode_change_is_told_so_even_with_operands_paused(
    cluster: DiagnosisInput, manager: str | None
) -> None:
    # mig-manager pauses the operands before it reboots for a MIG mode change.
    node = in_state(sibling_node(cluster), "rebooting", paused=True)

    config = config_of(cluster, node, cluster_policy=policy(mig_manager=manager))

    assert config is not None
    assert "nvidia.com/mig.config.state=rebooting" in config.summary
    assert "the reboot for a MIG mode change never completed the reconfigure" in config.summary
    assert "client-shutdown timeout" not in config.summary


def test_pending_without_paused_operands_after_the_fix_is_a_reconfigure_that_never_finished(
    cluster: DiagnosisInput,
) -> None:
    node = in_state(sibling_node(cluster), "pending")

    config = config_of(cluster, node, cluster_policy=policy(mig_manager="v0.16.0"))

    assert config is not None
    assert config.summary.endswith(": the reconfigure never finished")


def test_a_pending_node_with_no_creation_time_is_left_alone_without_an_error(
    cluster: DiagnosisInput,
) -> None:
    # A Node read back from a bundle without metadata.creationTimestamp: no clock to judge by.
    node = replace(in_state(sibling_node(cluster), "pending", paused=True), created=None)
    assert config_of(cluster, node) is None


def test_a_failed_state_does_not_claim_how_old_the_node_is(cluster: DiagnosisInput) -> None:
    # The failure may be hours after the node came up (a later relabel): age says nothing.
    node = in_state(sibling_node(cluster), "failed")
    config = config_of(cluster, node)
    assert config is not None
    assert " old" not in config.summary


@pytest.mark.parametrize(
    ("age", "said"),
    [
        (timedelta(minutes=119, seconds=59), "119 min"),
        (timedelta(minutes=120), "2 h"),
        (timedelta(hours=2, minutes=5), "2 h 5 min"),
        (timedelta(hours=47, minutes=59), "47 h 59 min"),
        (timedelta(hours=48), "2 d"),
        (timedelta(hours=49), "2 d 1 h"),
        (timedelta(days=3, hours=4, minutes=30), "3 d 4 h"),
    ],
)
def test_a_stuck_reconfigure_says_how_old_the_node_is_in_the_unit_that_reads_best(
    cluster: DiagnosisInput, age: timedelta, said: str
) -> None:
    node = replace(in_state(sibling_node(cluster), "pending"), created=cluster.now - age)
    config = config_of(cluster, node)
    assert config is not None
    assert f"on a node {said} old:" in config.summary


def test_failed_right_after_the_kubelet_restart_points_at_the_restart(
    cluster: DiagnosisInput,
) -> None:
    node = incident_node(cluster)
    config = config_of(cluster, node, node_evidence={node.name: node_bundle(node)})
    assert config is not None
    assert config.summary.endswith(
        ": after MIG reconfiguration restarted kubelet mid-bootstrap (see mig-hook-kubelet-restart)"
    )


# -- how bad, and the evidence ----------------------------------------------------------------


def test_a_failed_node_that_is_not_ready_is_critical_even_while_it_still_advertises_gpus(
    cluster: DiagnosisInput,
) -> None:
    sibling = sibling_node(cluster)
    assert sibling.gpu_allocatable  # its MIG slices are still there
    not_ready = Condition(
        "Ready",
        "False",
        "KubeletNotReady",
        "container runtime is down",
        cluster.now - timedelta(minutes=3),
    )
    node = replace(in_state(sibling, "failed"), conditions=(not_ready,))

    config = config_of(cluster, node)

    assert config is not None
    assert config.severity == "critical"
    assert "(NotReady)" in config.summary
    evidence = lines_of(config)
    assert (
        "condition Ready=False, reason KubeletNotReady, message 'container runtime is down'"
        in evidence
    )
    created = [e for e in config.evidence if e.source == "node"]
    assert [(e.time, e.text) for e in created if "created" in e.text] == [
        (node.created, f"Node {node.name} created")
    ]


def test_what_the_gpus_say_is_summed_beside_the_label_when_the_probe_read_fine(
    cluster: DiagnosisInput,
) -> None:
    node = in_state(sibling_node(cluster), "failed")
    probe = NodeEvidence(node=node.name, mig=parse_smi_xml(h100_xml(8, devices_per_gpu=7)))

    config = config_of(cluster, node, node_evidence={node.name: probe})

    assert config is not None
    # nvidia-smi's XML names no profile for a MIG device: 8 GPUs × 7 devices, counted.
    assert (
        "nvidia-smi 8 MIG-capable GPUs, mode current/pending Enabled/Enabled, "
        "MIG devices 56×unknown"
    ) in lines_of(config)


def test_a_probe_that_failed_is_reported_as_such_and_not_summed(cluster: DiagnosisInput) -> None:
    node = in_state(sibling_node(cluster), "failed")
    broken = NodeEvidence(node=node.name, mig=parse_nvml_json("Traceback (most recent call last):"))

    config = config_of(cluster, node, node_evidence={node.name: broken})

    assert config is not None
    evidence = "\n".join(lines_of(config))
    assert "MIG probe error" in evidence
    assert "MIG-capable GPUs" not in evidence


def test_a_node_being_deleted_is_not_reported(cluster: DiagnosisInput) -> None:
    node = in_state(sibling_node(cluster), "failed")
    going = replace(node, deleting=cluster.now - timedelta(seconds=30))
    assert config_of(cluster, going) is None
    assert config_of(cluster, node) is not None


def test_a_digest_pinned_mig_manager_beside_a_tagged_one_leaves_the_tagged_version(
    cluster: DiagnosisInput,
) -> None:
    # A second mig-manager DaemonSet pinned by digest has no tag to read: the other one tells.
    node = in_state(sibling_node(cluster), "pending", paused=True)
    daemonsets = (
        mig_manager_daemonset("nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.16.0"),
        mig_manager_daemonset("nvcr.io/nvidia/cloud-native/k8s-mig-manager@sha256:" + "b" * 64),
    )

    config = config_of(cluster, node, cluster_policy=None, daemonsets=daemonsets)

    assert config is not None
    assert "mig-manager v0.16.0 ends a client-shutdown timeout as failed" in config.summary
