"""repair-risk's three traps, each at its edges: the small pool the 20% guard never holds,
the image another node already hit DCGMError on, and mig-manager able to stop kubelet on an
AL2023 node with a host driver (docs/repair.md, docs/mig.md).

The inputs are what the API server shows: GPU Nodes and their NodeClaims (a NodeClaim finds its
Node by status.nodeName or status.providerID, kubernetes-sigs/karpenter v1.6.3
pkg/apis/v1/nodeclaim_status.go), the node monitoring agent's AcceleratedHardwareReady
(aws/eks-node-monitoring-agent v1.7.0 pkg/reasons/reasons.yaml: DCGMError), the GPU
operator's ClusterPolicy and `nvidia.com/gpu.deploy.*` labels (NVIDIA/gpu-operator v26.7.0
api/nvidia/v1/clusterpolicy_types.go), and `stat -fc %T /sys/fs/cgroup` from a node bundle.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from mignurse.diagnose.findings import INFO, REPAIR_RISK, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings, NodeEvidence
from mignurse.diagnose.rules import repair_risk
from mignurse.evidence.system import parse_cgroup_fs
from mignurse.model import Condition, Node, NodeClaim

from .test_rule_boundaries import (
    AHR,
    AMI,
    NOW,
    POOL,
    REPAIR_ON,
    claim,
    cluster,
    findings,
    gone_claim,
    gpu_node,
)

DAYS_AGO = NOW - timedelta(days=3)
READY = Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", DAYS_AGO)
GPU_OK = Condition(
    AHR, "True", "NvidiaGPUIsReady", "Monitoring for the Nvidia system is active", DAYS_AGO
)
DCGM = Condition(
    AHR,
    "False",
    "DCGMError",
    "failed to initialize DCGM: libdcgm.so not Found",
    NOW - timedelta(minutes=4),
)
OTHER_AMI = "ami-05c1e9b7d3a2f4806"


def host(i: int) -> str:
    return f"ip-10-0-7{i}-3.us-west-2.compute.internal"


def node(i: int, *conditions: Condition, **labels: str) -> Node:
    base = gpu_node(host(i), READY, *(conditions or (GPU_OK,)))
    return replace(base, labels={**base.labels, **labels})


def risks(inp: DiagnosisInput, words: str) -> list[Finding]:
    """The rule's findings through the engine whose summary carries `words`: "20% guard"
    (small pool), "hit DCGMError" (image), "mig-manager" (cgroup v2)."""
    return [
        f
        for f in findings(inp, "repair_risk", repair_risk.rule)
        if f.id == REPAIR_RISK and words in f.summary
    ]


def evidence_text(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


def with_repair(nodes: list[Node], claims: list[NodeClaim], **more: Any) -> DiagnosisInput:
    return replace(cluster(nodes, claims), karpenter=REPAIR_ON, **more)


# -- a pool the 20% guard never holds -------------------------------------------------------


def test_a_small_healthy_pool_is_a_note_with_nothing_to_run() -> None:
    (risk,) = risks(with_repair([node(i) for i in range(3)], []), "20% guard")
    assert risk.severity == INFO and risk.nodepool == POOL
    assert risk.runbooks == ()  # nothing is failing: no pause to offer
    assert "Karpenter v1.6.3 feature gates: NodeRepair=true" in evidence_text(risk)


def test_a_node_down_in_a_small_pool_makes_it_a_warning_quoting_only_what_repair_matches() -> None:
    down = Condition(
        "Ready", "False", "KubeletNotReady", "PLEG is not healthy", NOW - timedelta(minutes=7)
    )
    nodes = [gpu_node(host(0), down, GPU_OK), node(1), node(2)]
    (risk,) = risks(with_repair(nodes, []), "20% guard")
    assert risk.severity == WARNING  # Ready=False is a repair policy though the GPUs are fine
    assert risk.runbooks == ("pause-node-repair",)
    assert "; 1 node(s) match a repair policy now" in risk.summary
    text = evidence_text(risk)
    assert f"Node {host(0)}: Ready=False KubeletNotReady since 2026-12-04T09:23:00Z" in text
    assert "AcceleratedHardwareReady=True" not in text  # no repair policy matches it


def test_a_node_being_deleted_no_longer_counts_toward_the_pool() -> None:
    leaving = replace(node(5), deleting=NOW - timedelta(minutes=1))
    (risk,) = risks(with_repair([*(node(i) for i in range(5)), leaving], []), "20% guard")
    assert "node repair on for 5 GPU node(s)" in risk.summary
    assert host(5) not in evidence_text(risk)


def test_a_small_managed_node_group_is_not_karpenters_to_repair() -> None:
    group = {"eks.amazonaws.com/nodegroup": "ng-gpu-l4"}
    nodes = [
        replace(gpu_node(host(i), READY, GPU_OK), pool="ng-gpu-l4", pool_kind="nodegroup",
                labels=group)
        for i in range(3)
    ]  # fmt: skip
    assert risks(with_repair(nodes, []), "20% guard") == []


def test_a_small_auto_mode_pool_is_at_risk_without_karpenters_settings_and_offers_no_pause() -> (
    None
):
    auto = {"eks.amazonaws.com/compute-type": "auto"}
    nodes = [
        replace(node(0, DCGM, **auto), pool_kind="auto"),
        *(replace(node(i, **auto), pool_kind="auto") for i in (1, 2)),
    ]
    (risk,) = risks(cluster(nodes, []), "20% guard")  # no Karpenter Deployment to read
    assert risk.severity == WARNING
    assert "EKS Auto Mode: node repair is built in and always on" in evidence_text(risk)
    assert risk.runbooks == ()  # Auto Mode repair cannot be paused


# -- an image on which another node already hit DCGMError -------------------------------------


def image_pool(
    *, failing: Node | None = None, image: str = AMI
) -> tuple[list[Node], list[NodeClaim]]:
    """A healthy node on `image` (ip-10-0-71-…), one on another image (ip-10-0-72-…), and
    `failing` on `image` when given (ip-10-0-70-…)."""
    nodes = [node(1), node(2)]
    claims = [
        claim("gpu-inference-b1", host(1), DAYS_AGO, image=image),
        claim("gpu-inference-b2", host(2), DAYS_AGO, image=OTHER_AMI),
    ]
    if failing is not None:
        nodes.append(failing)
        claims.append(claim("gpu-inference-b0", failing.name, DAYS_AGO, image=image))
    return nodes, claims


def test_a_claim_repaired_for_dcgm_error_puts_the_healthy_nodes_on_its_image_at_risk() -> None:
    repaired = gone_claim("gpu-inference-a9", timedelta(minutes=40), NOW - timedelta(minutes=30))
    nodes, claims = image_pool()
    inp = with_repair(nodes, claims, history=History(lifecycles=(repaired,)))
    (risk,) = risks(inp, "hit DCGMError")
    assert risk.nodes == (host(1),) and risk.severity == WARNING
    assert risk.runbooks == ("pause-node-repair", "cordon-and-collect")
    (proof,) = [e for e in risk.evidence if e.text.startswith("NodeClaim gpu-inference-a9")]
    assert proof.source == "history"
    assert "after AcceleratedHardwareReady=False DCGMError" in proof.text


XID79 = (AHR, "False", "NvidiaXID79Error")


@pytest.mark.parametrize("end", ["failing now", "repaired", "consolidated"])
def test_a_gpu_fault_or_a_consolidation_says_nothing_about_the_image(end: str) -> None:
    ended = NOW - timedelta(minutes=30)
    lifecycles: tuple[Any, ...] = ()
    if end == "failing now":
        fault = Condition(*XID79, "GPU has fallen off the bus", NOW - timedelta(minutes=4))
        nodes, claims = image_pool(failing=gpu_node(host(0), READY, fault))
    else:
        nodes, claims = image_pool()
        cause = XID79 if end == "repaired" else None
        lifecycles = (gone_claim("gpu-inference-a9", timedelta(hours=5), ended, cause,
                                 repaired=end == "repaired"),)  # fmt: skip
    inp = with_repair(nodes, claims, history=History(lifecycles=lifecycles))
    assert risks(inp, "hit DCGMError") == []


@pytest.mark.parametrize("proof", ["failing now", "repaired"])
def test_claims_without_a_recorded_image_are_never_a_common_image(proof: str) -> None:
    if proof == "failing now":
        nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM), image="")
        lifecycles: tuple[Any, ...] = ()
    else:
        nodes, claims = image_pool(image="")
        lifecycles = (
            gone_claim("gpu-inference-a9", timedelta(minutes=40), NOW - timedelta(minutes=30),
                       image=""),
        )  # fmt: skip
    inp = with_repair(nodes, claims, history=History(lifecycles=lifecycles))
    assert risks(inp, "hit DCGMError") == []


def by_provider_id(claims: list[NodeClaim]) -> list[NodeClaim]:
    """The NodeClaims before Karpenter wrote status.nodeName: only the provider id links them."""
    return [replace(c, node_name="") for c in claims]


def with_provider_ids(nodes: list[Node], claims: list[NodeClaim]) -> list[Node]:
    ids = {c.node_name: c.provider_id for c in claims}
    return [replace(n, provider_id=ids[n.name]) for n in nodes]


def test_nodes_known_to_their_claims_by_provider_id_alone_are_still_at_risk() -> None:
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    inp = with_repair(with_provider_ids(nodes, claims), by_provider_id(claims))
    (risk,) = risks(inp, "hit DCGMError")
    assert risk.nodes == (host(1),)
    assert f"Node {host(0)} (NodeClaim gpu-inference-b0, image {AMI})" in evidence_text(risk)


def test_healthy_nodes_known_by_provider_id_alone_outnumber_one_failure() -> None:
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    nodes.append(node(3))
    claims.append(claim("gpu-inference-b3", host(3), DAYS_AGO))
    inp = with_repair(with_provider_ids(nodes, claims), by_provider_id(claims))
    assert risks(inp, "hit DCGMError") == []  # one failure among two healthy: that node's own


def test_a_node_without_a_nodeclaim_beside_an_image_at_risk_is_left_out() -> None:
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    nodes.append(node(4))  # its NodeClaim already gone from the list
    (risk,) = risks(with_repair(nodes, claims), "hit DCGMError")
    assert risk.nodes == (host(1),)


def test_with_repair_off_an_image_that_hit_dcgm_error_puts_no_node_at_risk() -> None:
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    off = KarpenterSettings(node_repair=False, feature_gates="NodeRepair=false", version="1.6.3")
    assert risks(replace(cluster(nodes, claims), karpenter=off), "hit DCGMError") == []


def test_a_node_whose_agent_has_not_reported_yet_is_at_risk_and_not_counted_healthy() -> None:
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    nodes[0] = gpu_node(host(1), READY)  # no AcceleratedHardwareReady yet
    (risk,) = risks(with_repair(nodes, claims), "hit DCGMError")
    assert risk.nodes == (host(1),)
    assert f"image {AMI}: 1 DCGMError node(s) seen, 0 with {AHR}=True now" in evidence_text(risk)


def test_seven_dcgm_repairs_on_an_image_are_counted_and_five_quoted() -> None:
    repaired = tuple(
        gone_claim(f"gpu-inference-r{i}", timedelta(minutes=12), NOW - timedelta(minutes=40 * i))
        for i in range(1, 8)
    )
    nodes, claims = image_pool()
    (risk,) = risks(with_repair(nodes, claims, history=History(lifecycles=repaired)),
                    "hit DCGMError")  # fmt: skip
    assert f"image {AMI}: 7 DCGMError node(s) seen, 1 with {AHR}=True now" in evidence_text(risk)
    assert sum(e.text.startswith("NodeClaim gpu-inference-r") for e in risk.evidence) == 5


def test_a_dcgm_error_whose_status_is_unknown_is_no_failure_on_the_image() -> None:
    unknown = replace(DCGM, status="Unknown")
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, unknown))
    assert risks(with_repair(nodes, claims), "hit DCGMError") == []


# -- the repair policies of the Karpenter release that runs (docs/repair.md) -------------------

KARPENTER_1_1 = KarpenterSettings(
    node_repair=True, feature_gates="NodeRepair=true", version="1.1.4"
)


def test_under_karpenter_1_1_a_gpu_failure_matches_no_repair_policy_and_puts_no_image_at_risk() -> (
    None
):
    # v1.1 repaired Ready=False alone (aws/karpenter-provider-aws v1.1.0
    # pkg/cloudprovider/cloudprovider.go RepairPolicies): a DCGMError node stays, and so do
    # its image's other nodes.
    nodes, claims = image_pool(failing=gpu_node(host(0), READY, DCGM))
    inp = replace(cluster(nodes, claims), karpenter=KARPENTER_1_1)
    (risk,) = risks(inp, "20% guard")
    assert risk.severity == WARNING  # the pool's GPU health is failing all the same
    assert "match a repair policy now" not in risk.summary
    assert risk.runbooks == ()
    assert "AcceleratedHardwareReady=False" not in evidence_text(risk)
    assert risks(inp, "hit DCGMError") == []


def test_under_karpenter_1_1_a_node_not_ready_is_still_repaired() -> None:
    down = Condition("Ready", "False", "KubeletNotReady", "", NOW - timedelta(minutes=7))
    nodes = [gpu_node(host(0), down, DCGM), node(1), node(2)]
    (risk,) = risks(replace(cluster(nodes, []), karpenter=KARPENTER_1_1), "20% guard")
    assert "; 1 node(s) match a repair policy now" in risk.summary
    assert risk.runbooks == ("pause-node-repair",)
    text = evidence_text(risk)
    assert f"Node {host(0)}: Ready=False KubeletNotReady" in text
    assert "AcceleratedHardwareReady=False" not in text  # no v1.1 policy matches it


def test_an_auto_mode_pool_runs_the_newest_repair_policies_whatever_karpenter_runs_beside() -> None:
    auto = {"eks.amazonaws.com/compute-type": "auto"}
    nodes, claims = image_pool(failing=node(0, DCGM, **auto))
    nodes = [replace(n, pool_kind="auto", labels={**n.labels, **auto}) for n in nodes]
    inp = replace(cluster(nodes, claims), karpenter=KARPENTER_1_1)
    (risk,) = risks(inp, "20% guard")
    assert "; 1 node(s) match a repair policy now" in risk.summary
    (image,) = risks(inp, "hit DCGMError")
    assert image.nodes == (host(1),) and image.runbooks == ()


# -- mig-manager able to stop kubelet on AL2023 with a host driver ----------------------------

MIG = {"nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-1g.18gb"}
AL2023 = "Amazon Linux 2023.6.20250218"


def mig_node(os_image: str = AL2023, **labels: str) -> Node:
    return replace(node(8, **{**MIG, **labels}), os_image=os_image)


def without_layout(target: Node) -> Node:
    labels = {k: v for k, v in target.labels.items() if k != "nvidia.com/mig.config"}
    return replace(target, labels=labels)


def mig_risks(
    target: Node, policy: dict[str, Any] | None = None, cgroup: str | None = "cgroup2fs"
) -> list[Finding]:
    evidence = {}
    if cgroup is not None:
        evidence = {target.name: NodeEvidence(target.name, cgroup=parse_cgroup_fs(cgroup + "\n"))}
    inp = replace(cluster([target], []), cluster_policy=policy, node_evidence=evidence)
    return risks(inp, "mig-manager")


@pytest.mark.parametrize(
    ("policy", "labels", "why"),
    [
        (None, {},
         "host driver assumed (ClusterPolicy not read; the EKS AL2023 NVIDIA AMI ships one)"),
        ({"spec": {"driver": {"enabled": False}}}, {},
         "host driver (ClusterPolicy driver.enabled=false)"),
        ({"spec": {"driver": {"enabled": True}, "migManager": {"enabled": True}}},
         {"nvidia.com/gpu.deploy.driver": "pre-installed"},
         "host driver (nvidia.com/gpu.deploy.driver=pre-installed)"),
    ],
)  # fmt: skip
def test_mig_manager_on_al2023_with_a_host_driver_names_the_node_and_why(
    policy: dict[str, Any] | None, labels: dict[str, str], why: str
) -> None:
    target = mig_node(**labels)
    (risk,) = mig_risks(target, policy)
    assert risk.severity == WARNING and risk.nodepool == POOL
    assert evidence_text(risk) == (
        f"Node {target.name}: nvidia.com/gpu.deploy.mig-manager=true, "
        f"nvidia.com/mig.config=all-1g.18gb, state unset, {AL2023}, cgroup v2 (cgroup2fs); " + why
    )


@pytest.mark.parametrize(
    ("policy", "target"),
    [
        # The operator's driver container: mig-manager shuts no host GPU clients down.
        ({"spec": {"driver": {"enabled": True}}}, mig_node()),
        ({"spec": {"migManager": {"enabled": False}}}, mig_node()),
        # The advice already followed: mig-manager switched off on the node.
        (None, mig_node(**{"nvidia.com/gpu.deploy.mig-manager": "false"})),
        (None, mig_node(os_image="Bottlerocket OS 1.29.0 (aws-k8s-1.32-nvidia)")),
        # The operator labels every MIG-capable node for mig-manager; no layout asked, no change.
        (None, without_layout(mig_node())),
    ],
    ids=[
        "operator-driver",
        "mig-manager-disabled",
        "mig-manager-label-false",
        "bottlerocket",
        "no-mig-layout",
    ],
)
def test_mig_manager_that_cannot_stop_kubelet_is_no_risk(
    policy: dict[str, Any] | None, target: Node
) -> None:
    assert mig_risks(target, policy) == []


def test_an_unrecognised_cgroup_filesystem_is_not_taken_for_cgroup_v2() -> None:
    (risk,) = mig_risks(mig_node(), cgroup="overlay")
    assert risk.severity == INFO
    assert "cgroup version unknown" in risk.summary
    assert "cgroup v2" not in evidence_text(risk)


@pytest.mark.parametrize("spec", [["driver", "migManager"], "enabled", None])
def test_a_cluster_policy_whose_spec_is_not_an_object_is_read_as_not_said(spec: Any) -> None:
    # A bundle's ClusterPolicy file, hand-trimmed: the pool's other risks must still be told.
    target = mig_node()
    inp = replace(with_repair([target], []), cluster_policy={"spec": spec})
    (mig,) = risks(inp, "mig-manager")
    assert "host driver assumed (ClusterPolicy not read" in evidence_text(mig)
    assert len(risks(inp, "20% guard")) == 1
