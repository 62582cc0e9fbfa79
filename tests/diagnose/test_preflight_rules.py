"""Pre-flight findings: combinations upstream sources show fail, found before they fail.

The DaemonSets are the charts' own renderings (tests/corpus/daemonsets/, each with its source:
the node monitoring agent at v1.6.1 and v1.7.0, the DRA driver at v0.4.1, mig-manager as
gpu-operator v26.7.0 deploys it); the nodes carry the labels and nodeInfo EKS, Karpenter and
GPU feature discovery give them.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import INFO, KNOWN_BAD_COMBINATION, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings, NodeEvidence
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.diagnose.rules import preflight
from mignurse.evidence.system import CgroupInfo
from mignurse.model import Node

CORPUS = Path(__file__).parent.parent / "corpus" / "daemonsets"
NOW = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
REPAIR_ON = KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true", version="1.14.1")
REPAIR_OFF = KarpenterSettings(
    node_repair=False, feature_gates="NodeRepair=false", version="1.14.1"
)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def corpus(name: str) -> list[dict[str, Any]]:
    document = json.loads((CORPUS / name).read_text())
    items = document.get("items", [document])
    return [copy.deepcopy(i) for i in items]


def daemonsets(*names: str, edit: Any = None) -> tuple[DaemonSetInfo, ...]:
    raws = [raw for name in names for raw in corpus(name)]
    if edit is not None:
        for raw in raws:
            edit(raw)
    return tuple(DaemonSetInfo.from_api(raw) for raw in raws)


def node(
    name: str,
    instance_type: str,
    *,
    pool: str = "gpu",
    arch: str = "amd64",
    os_image: str = "Amazon Linux 2023.9.20251208",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    nodegroup: bool = False,
    allocatable: dict[str, str] | None = None,
) -> Node:
    pool_label = (
        {"eks.amazonaws.com/nodegroup": pool} if nodegroup else {"karpenter.sh/nodepool": pool}
    )
    gpu = {"nvidia.com/gpu": "8"} if allocatable is None else allocatable
    return Node.from_api(
        {
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "creationTimestamp": "2026-12-05T21:40:00Z",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch,
                    "node.kubernetes.io/instance-type": instance_type,
                    "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                    "feature.node.kubernetes.io/pci-10de.present": "true",
                    **pool_label,
                    **(labels or {}),
                },
            },
            "spec": {"taints": taints if taints is not None else [GPU_TAINT]},
            "status": {
                "capacity": gpu,
                "allocatable": gpu,
                "nodeInfo": {"architecture": arch, "osImage": os_image},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "lastTransitionTime": "2026-12-05T21:41:00Z",
                    }
                ],
            },
        }
    )


def judge(
    nodes: list[Node],
    sets: tuple[DaemonSetInfo, ...] | None,
    *,
    karpenter: KarpenterSettings | None = REPAIR_ON,
    nodegroups: dict[str, NodeGroupRepair] | None = None,
    evidence: dict[str, NodeEvidence] | None = None,
    policy: dict[str, Any] | None = None,
) -> list[Finding]:
    inp = DiagnosisInput(
        snapshot=Snapshot(nodes={n.name: n for n in nodes}, karpenter=True, taken_at=NOW),
        now=NOW,
        karpenter=karpenter,
        daemonsets=sets,
        nodegroups=nodegroups or {},
        node_evidence=evidence or {},
        cluster_policy=policy,
    )
    result = diagnose(inp, rules=[(KNOWN_BAD_COMBINATION, preflight.rule)])
    assert result.rule_errors == []
    return result.findings


def text(finding: Finding) -> str:
    return finding.summary + "\n" + "\n".join(e.text for e in finding.evidence)


# ------------------------------------------------------------------ DCGM server


def test_g7e_under_the_v1_6_1_agent_with_repair_on_is_a_certain_repair_loop() -> None:
    # The v1.6.1 chart's dcgm-server lists no g7e type: the agent polls DCGM there anyway.
    nodes = [node("ip-10-0-1-1", "g7e.48xlarge"), node("ip-10-0-1-2", "g7e.48xlarge")]
    findings = judge(nodes, daemonsets("nma-v1.6.1.json"))
    assert len(findings) == 1
    loop = findings[0]
    assert loop.severity == WARNING and loop.nodepool == "gpu"
    assert loop.nodes == ("ip-10-0-1-1", "ip-10-0-1-2")
    assert "repair loop is certain" in loop.summary
    assert "node.kubernetes.io/instance-type In" in text(loop)
    assert "g7e.48xlarge" in text(loop) and "v1.6.1-eksbuild.1" in text(loop)
    assert "eks-node-monitoring-agent v1.7.0" in text(loop)  # the source is named
    assert loop.runbooks == ("pause-node-repair",)


def test_the_same_nodes_under_the_v1_7_0_agent_are_silent_once_dcgm_server_lists_them() -> None:
    # v1.7.0 lists g7e, but dcgm-server tolerates nothing: an untainted node runs it.
    nodes = [node("ip-10-0-1-1", "g7e.48xlarge", taints=[])]
    assert judge(nodes, daemonsets("nma-v1.7.0.json")) == []


def test_a_gpu_taint_dcgm_server_does_not_tolerate_keeps_it_off_the_node() -> None:
    nodes = [node("ip-10-0-1-1", "p5.48xlarge")]  # nvidia.com/gpu=true:NoSchedule
    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json"))
    assert finding.severity == WARNING
    assert "taint nvidia.com/gpu=true:NoSchedule not tolerated" in text(finding)


def test_a_toleration_added_to_dcgm_server_lets_it_run_and_the_finding_goes() -> None:
    def tolerate(raw: dict[str, Any]) -> None:
        if raw["metadata"]["name"] == "dcgm-server":
            raw["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]

    nodes = [node("ip-10-0-1-1", "p5.48xlarge")]
    assert judge(nodes, daemonsets("nma-v1.7.0.json", edit=tolerate)) == []


def test_arm64_gpu_nodes_under_the_v1_7_0_agent_are_unmonitored_not_looping() -> None:
    # monitors/nvidia/monitor.go@v1.7.0 skips DCGM on arm64 outside Auto Mode.
    nodes = [node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])]
    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json"))
    assert finding.severity == INFO
    assert "kubernetes.io/arch In [amd64] (node: arm64)" in text(finding)
    assert "stays True whatever the GPUs do" in finding.summary
    assert finding.runbooks == ()


def test_arm64_gpu_nodes_under_an_agent_older_than_its_arm64_skip_loop() -> None:
    def older(raw: dict[str, Any]) -> None:
        for ctr in raw["spec"]["template"]["spec"]["containers"]:
            ctr["image"] = ctr["image"].replace("v1.7.0-eksbuild.1", "v1.2.0-eksbuild.1")

    nodes = [node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])]
    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json", edit=older))
    assert finding.severity == WARNING and "repair loop is certain" in finding.summary


def test_repair_off_leaves_the_unreachable_dcgm_server_as_information() -> None:
    nodes = [node("ip-10-0-1-1", "g7e.48xlarge")]
    (finding,) = judge(nodes, daemonsets("nma-v1.6.1.json"), karpenter=REPAIR_OFF)
    assert finding.severity == INFO and "nothing loops" in finding.summary


def test_a_node_group_repairs_dcgm_only_through_an_override() -> None:
    nodes = [node("ip-10-0-3-1", "g7e.48xlarge", pool="ng-gpu", nodegroup=True)]
    sets = daemonsets("nma-v1.6.1.json")
    default = NodeGroupRepair.from_describe(
        {"nodegroupName": "ng-gpu", "nodeRepairConfig": {"enabled": True}}
    )
    (quiet,) = judge(nodes, sets, karpenter=None, nodegroups={"ng-gpu": default})
    assert quiet.severity == INFO  # the default takes no action for DCGM reasons
    override = NodeGroupRepair.from_describe(
        {
            "nodegroupName": "ng-gpu",
            "nodeRepairConfig": {
                "enabled": True,
                "nodeRepairConfigOverrides": [
                    {
                        "nodeMonitoringCondition": "AcceleratedHardwareReady",
                        "nodeUnhealthyReason": "DCGMError",
                        "minRepairWaitTimeMins": 10,
                        "repairAction": "Replace",
                    }
                ],
            },
        }
    )
    (loop,) = judge(nodes, sets, karpenter=None, nodegroups={"ng-gpu": override})
    assert loop.severity == WARNING and "node group ng-gpu repair: Replace" in text(loop)
    assert loop.runbooks == ()  # pause-node-repair is Karpenter's


def test_without_a_dcgm_server_daemonset_dcgm_may_be_on_the_host_and_nothing_is_said() -> None:
    def agent_only(raw: dict[str, Any]) -> None:
        raw["metadata"]["name"] = raw["metadata"]["name"].replace("dcgm-server", "other")
        raw["spec"]["template"]["metadata"]["labels"] = {"k8s-app": "other"}

    nodes = [node("ip-10-0-1-1", "g7e.48xlarge")]
    assert judge(nodes, daemonsets("nma-v1.6.1.json", edit=agent_only)) == []
    assert judge(nodes, None) == []  # DaemonSets not read


def test_auto_mode_nodes_are_not_judged_by_the_add_on_daemonsets() -> None:
    auto = node(
        "i-0abc", "g7e.48xlarge", labels={"eks.amazonaws.com/compute-type": "auto"}, taints=[]
    )
    assert judge([auto], daemonsets("nma-v1.6.1.json")) == []


# ------------------------------------------------------------------ mig-manager at boot

MIG_LABELS = {
    "nvidia.com/mig.config": "all-1g.10gb",
    "nvidia.com/gpu.deploy.mig-manager": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
}
BOTTLEROCKET = "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)"


def test_mig_manager_on_a_bottlerocket_h100_stops_kubelet_at_every_boot() -> None:
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)]
    (finding,) = judge(nodes, daemonsets("mig-manager-gpu-operator-v26.7.0.json"))
    assert finding.severity == WARNING and finding.nodes == ("ip-10-0-4-1",)
    assert "stops kubelet during bootstrap" in finding.summary
    assert "H100" in text(finding) and "Bottlerocket ships it" in text(finding)
    assert "mig-parted v0.15.0" in text(finding)
    assert "k8s-mig-manager:v0.15.0" in text(finding)


def test_a_shutdown_setting_in_mig_managers_env_changes_nothing_up_to_v26_7_0() -> None:
    def set_false(raw: dict[str, Any]) -> None:
        env = raw["spec"]["template"]["spec"]["containers"][0]["env"]
        env.append({"name": "WITH_SHUTDOWN_HOST_GPU_CLIENTS", "value": "false"})

    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)]
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json", edit=set_false)
    (finding,) = judge(nodes, sets)
    assert "WITH_SHUTDOWN_HOST_GPU_CLIENTS=false is overwritten" in text(finding)


def test_an_a100_keeps_mig_mode_across_reboots_and_is_not_flagged() -> None:
    labels = {**MIG_LABELS, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    nodes = [node("ip-10-0-4-2", "p4d.24xlarge", os_image=BOTTLEROCKET, labels=labels)]
    assert judge(nodes, daemonsets("mig-manager-gpu-operator-v26.7.0.json")) == []


def test_the_operators_driver_container_means_no_kubelet_stop() -> None:
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image="Ubuntu 22.04.5 LTS", labels=MIG_LABELS)]
    policy = {"spec": {"driver": {"enabled": True}}}
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    assert judge(nodes, sets, policy=policy) == []
    preinstalled = {**MIG_LABELS, "nvidia.com/gpu.deploy.driver": "pre-installed"}
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image="Ubuntu 22.04.5 LTS", labels=preinstalled)]
    (finding,) = judge(nodes, sets)
    assert "pre-installed" in text(finding)


def test_al2023_with_cgroup_v2_is_left_to_repair_risk_and_cgroup_v1_is_ours() -> None:
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", labels=MIG_LABELS)]
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    assert judge(nodes, sets) == []  # AL2023: repair-risk's mig-manager finding says it
    v1 = {"ip-10-0-4-1": NodeEvidence("ip-10-0-4-1", cgroup=CgroupInfo(1, "tmpfs"))}
    (finding,) = judge(nodes, sets, evidence=v1)
    assert finding.severity == WARNING


def test_mig_manager_label_false_or_an_all_disabled_layout_is_not_flagged() -> None:
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    off = {**MIG_LABELS, "nvidia.com/gpu.deploy.mig-manager": "false"}
    assert judge([node("a", "p5.48xlarge", os_image=BOTTLEROCKET, labels=off)], sets) == []
    disabled = {**MIG_LABELS, "nvidia.com/mig.config": "all-disabled"}
    assert judge([node("b", "p5.48xlarge", os_image=BOTTLEROCKET, labels=disabled)], sets) == []


# ------------------------------------------------------------------ DRA driver


def test_dynamic_mig_beside_mig_manager_is_flagged_per_pool() -> None:
    labels = {
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/mig.config": "all-1g.24gb",
        "nvidia.com/gpu.product": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        "nvidia.com/gpu.deploy.driver": "pre-installed",
    }
    nodes = [
        node("ip-10-0-5-1", "g7e.4xlarge", pool="gpu-dra", labels=labels, allocatable={}),
        node("ip-10-0-6-1", "g7e.4xlarge", pool="gpu-plain", allocatable={}),
    ]
    sets = daemonsets("dra-driver-v0.4.1-dynamic-mig.json", "mig-manager-gpu-operator-v26.7.0.json")
    found = [f for f in judge(nodes, sets) if "DynamicMIG" in f.summary]
    assert len(found) == 1
    (finding,) = found
    assert finding.nodepool == "gpu-dra" and finding.nodes == ("ip-10-0-5-1",)
    assert 'DynamicMIG on ("DynamicMIG=true,")' in text(finding)
    assert "DaemonSet gpu-operator/nvidia-mig-manager runs here" in text(finding)


def test_dynamic_mig_set_false_or_absent_is_not_flagged() -> None:
    labels = {"nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-1g.24gb"}
    nodes = [node("ip-10-0-5-1", "g7e.4xlarge", labels=labels, allocatable={})]

    def gate_off(raw: dict[str, Any]) -> None:
        for ctr in raw["spec"]["template"]["spec"]["containers"]:
            for env in ctr.get("env", []):
                if env["name"] == "FEATURE_GATES":
                    env["value"] = "DynamicMIG=true,DynamicMIG=false,"  # the last one wins

    sets = daemonsets("dra-driver-v0.4.1-dynamic-mig.json", edit=gate_off)
    assert [f for f in judge(nodes, sets) if "DynamicMIG" in f.summary] == []


def test_a_renamed_dra_chart_hides_its_plugin_from_every_selector() -> None:
    nodes = [node("ip-10-0-5-1", "g7e.4xlarge", pool="gpu-dra", allocatable={})]
    (finding,) = judge(nodes, daemonsets("dra-driver-v0.4.1-name-override.json"))
    assert finding.severity == WARNING and finding.nodes == ("ip-10-0-5-1",)
    assert "DaemonSet dra-driver-nvidia-gpu/gpu-dra-kubelet-plugin" in finding.summary
    assert "gpu-dra-component=kubelet-plugin" in text(finding)
    assert "dra-driver-nvidia-gpu-component=kubelet-plugin" in text(finding)


def test_each_of_the_three_plugin_labels_is_found() -> None:
    nodes = [node("ip-10-0-5-1", "g7e.4xlarge", allocatable={})]
    for label in preflight.DRA_PLUGIN_SELECTORS:
        key, _, value = label.partition("=")

        def relabel(raw: dict[str, Any], key: str = key, value: str = value) -> None:
            raw["spec"]["template"]["metadata"]["labels"] = {key: value}

        assert judge(nodes, daemonsets("dra-driver-v0.4.1-name-override.json", edit=relabel)) == []


# ------------------------------------------------------------------ Bottlerocket MIG


def test_bottlerocket_older_than_its_mig_support_cannot_partition_an_h100() -> None:
    old = "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.10gb"}
    nodes = [node("ip-10-0-7-1", "p5.48xlarge", os_image=old, labels=labels)]
    (finding,) = judge(nodes, ())
    assert finding.severity == WARNING
    assert "Bottlerocket 1.32.0 predates MIG support (1.34.0)" in text(finding)
    assert "bottlerocket-os/bottlerocket#4418" in text(finding)


def test_bottlerocket_1_34_0_carries_the_h100_profiles() -> None:
    new = "Bottlerocket OS 1.34.0 (aws-k8s-1.32-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.10gb"}
    assert judge([node("ip-10-0-7-1", "p5.48xlarge", os_image=new, labels=labels)], ()) == []
    older = "Bottlerocket OS 1.33.9 (aws-k8s-1.32-nvidia)"
    (finding,) = judge([node("ip-10-0-7-2", "p5.48xlarge", os_image=older, labels=labels)], ())
    assert finding.severity == WARNING


def test_bottlerocket_gpus_added_later_or_never_are_told_apart() -> None:
    br = "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.24gb"}
    (later,) = judge([node("g", "g7e.48xlarge", os_image=br, labels=labels)], ())
    assert later.severity == INFO and "bottlerocket-kernel-kit#300" in text(later)
    (never,) = judge([node("b", "p6-b300.48xlarge", os_image=br, labels=labels)], ())
    assert never.severity == WARNING and "no profile for B300" in text(never)


def test_bottlerocket_nodes_already_serving_mig_devices_are_not_flagged() -> None:
    old = "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.10gb"}
    serving = node(
        "ip-10-0-7-1",
        "p5.48xlarge",
        os_image=old,
        labels=labels,
        allocatable={"nvidia.com/mig-1g.10gb": "56"},
    )
    assert judge([serving], ()) == []


def test_a_mig_strategy_label_alone_is_no_request_for_mig() -> None:
    # GPU feature discovery labels every GPU node with the device plugin's strategy.
    old = "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"
    labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.deploy.mig-manager": "true"}
    assert judge([node("ip-10-0-7-1", "p5.48xlarge", os_image=old, labels=labels)], ()) == []


def test_the_mig_manager_label_without_its_daemonset_stops_nothing() -> None:
    # gpu-operator labels every MIG-capable node; with no mig-manager DaemonSet read, no
    # mig-manager runs there. Without the DaemonSets at all, the label is all there is.
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)]
    assert judge(nodes, ()) == []
    (unread,) = [f for f in judge(nodes, None) if "kubelet" in f.summary]
    assert unread.severity == WARNING


def test_the_agents_arm64_skip_starts_exactly_at_v1_6_0() -> None:
    nodes = [node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])]

    def at(version: str) -> list[Finding]:
        def pin(raw: dict[str, Any]) -> None:
            for ctr in raw["spec"]["template"]["spec"]["containers"]:
                ctr["image"] = ctr["image"].replace("v1.7.0-eksbuild.1", version)

        return judge(nodes, daemonsets("nma-v1.7.0.json", edit=pin))

    assert [f.severity for f in at("v1.6.0-eksbuild.1")] == [INFO]
    assert [f.severity for f in at("v1.5.9-eksbuild.1")] == [WARNING]
    assert [f.severity for f in at("latest")] == [WARNING]  # unknown: assume it polls


# ------------------------------------------------------------------ where a DaemonSet runs


def placed(spec: dict[str, Any], n: Node, host_network: bool = False) -> str:
    raw = {
        "metadata": {"name": "probe", "namespace": "kube-system"},
        "spec": {"template": {"spec": {**spec, "hostNetwork": host_network}}},
    }
    return DaemonSetInfo.from_api(raw).refusal(n)


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    }


def test_node_affinity_operators_decide_as_the_scheduler_does() -> None:
    n = node("ip-10-0-9-9", "p5.48xlarge", taints=[], labels={"gpus": "8"})
    assert placed(affinity([{"key": "gpus", "operator": "Gt", "values": ["7"]}]), n) == ""
    assert "Gt" in placed(affinity([{"key": "gpus", "operator": "Gt", "values": ["8"]}]), n)
    assert placed(affinity([{"key": "gpus", "operator": "Lt", "values": ["9"]}]), n) == ""
    assert "Lt" in placed(affinity([{"key": "gpus", "operator": "Lt", "values": ["8"]}]), n)
    assert placed(affinity([{"key": "gpus", "operator": "Exists"}]), n) == ""
    assert "DoesNotExist" in placed(affinity([{"key": "gpus", "operator": "DoesNotExist"}]), n)
    assert placed(affinity([{"key": "absent", "operator": "NotIn", "values": ["x"]}]), n) == ""
    # terms are ORed: the second one lets it run
    either = affinity(
        [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}],
        [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
    )
    assert placed(either, n) == ""
    fields = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["other"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert "metadata.name In [other] (node: ip-10-0-9-9)" in placed(fields, n)
    own = fields["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    own["nodeSelectorTerms"][0]["matchFields"][0]["values"] = ["ip-10-0-9-9"]
    assert placed(fields, n) == ""
    empty: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
            }
        }
    }
    assert placed(empty, n) != ""  # an empty term selects nothing


def test_taints_against_tolerations_and_the_ones_every_daemon_pod_gets() -> None:
    def on(taint: dict[str, str]) -> Node:
        return node("ip-10-0-9-9", "p5.48xlarge", taints=[taint])

    gpu = on(GPU_TAINT)
    assert placed({}, gpu) != ""
    exact = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert placed({"tolerations": [exact]}, gpu) == ""
    assert placed({"tolerations": [{**exact, "value": "false"}]}, gpu) != ""
    assert placed({"tolerations": [{**exact, "effect": "NoExecute"}]}, gpu) != ""
    assert placed({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, gpu) == ""
    soft = on({"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"})
    assert placed({}, soft) == ""  # a preference never keeps a daemon pod off
    cordoned = on({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    assert placed({}, cordoned) == ""  # the DaemonSet controller tolerates it for every pod
    for passing in ("karpenter.sh/unregistered", "karpenter.sh/disrupted"):
        # a node registering or being disrupted: judged as it settles
        assert placed({}, on({"key": passing, "effect": "NoExecute"})) == ""
    no_network = on({"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"})
    assert placed({}, no_network) != ""
    assert placed({}, no_network, host_network=True) == ""


def test_daemonsets_of_any_shape_are_read_without_a_traceback() -> None:
    odd: list[Any] = [
        {},
        {"metadata": "x", "spec": []},
        {"metadata": {"name": 7, "namespace": None}, "spec": {"template": {"spec": None}}},
        {
            "metadata": {"name": "dcgm-server", "namespace": "kube-system"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"k8s-app": None}},
                    "spec": {
                        "nodeSelector": ["kubernetes.io/os"],
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        None,
                                        {"matchExpressions": [{"key": "a", "operator": "Gt"}]},
                                        {"matchExpressions": "arch"},
                                    ]
                                }
                            }
                        },
                        "tolerations": [None, {"operator": "Exists", "effect": 3}],
                        "containers": [
                            None,
                            {"image": 5, "env": [{"name": "FEATURE_GATES", "value": None}]},
                            {"args": [None, {"a": 1}], "env": "x"},
                            {"env": [None, "FEATURE_GATES=x", {"name": None, "value": "y"}]},
                        ],
                    },
                }
            },
            "status": {"desiredNumberScheduled": True, "numberReady": "3"},
        },
    ]
    sets = tuple(DaemonSetInfo.from_api(raw) for raw in odd)
    nodes = [
        node("ip-10-0-1-1", "g7e.48xlarge", labels={"nvidia.com/mig.config": "all-1g.24gb"}),
        node("ip-10-0-1-2", "g5g.2xlarge", arch="arm64"),
    ]
    judge(nodes, sets)  # judge asserts no rule error
    assert sets[3].desired == 0 and sets[3].ready == 0  # a bool, a string: no count
    assert sets[3].env("FEATURE_GATES") == ""


def test_who_repairs_a_dcgm_error_decides_the_loop() -> None:
    sets = daemonsets("nma-v1.6.1.json")
    karpenter_pool = [node("ip-10-0-1-1", "g7e.48xlarge")]
    # Karpenter's Deployment not found: nothing known to repair, information only
    (unknown,) = judge(karpenter_pool, sets, karpenter=None)
    assert unknown.severity == INFO and "nothing loops" in unknown.summary
    # a node of no pool is not Karpenter's to repair, whatever its gates say
    pooled = node("ip-10-0-1-9", "g7e.48xlarge")
    loose = Node.from_api(
        {
            "metadata": {
                "name": pooled.name,
                "labels": {k: v for k, v in pooled.labels.items() if k != "karpenter.sh/nodepool"},
            },
            "spec": {"taints": [GPU_TAINT]},
            "status": {"nodeInfo": {"architecture": "amd64"}},
        }
    )
    (outside,) = judge([loose], sets)
    assert outside.severity == INFO and outside.nodepool == ""
    # a managed node group whose repair settings were not read (no EKS API at hand)
    group = [node("ip-10-0-3-1", "g7e.48xlarge", pool="ng-gpu", nodegroup=True)]
    (unread,) = judge(group, sets, karpenter=REPAIR_ON, nodegroups={})
    assert unread.severity == INFO


def test_the_gpu_is_known_by_its_gfd_product_and_the_arch_by_node_info() -> None:
    br = "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.23gb", "nvidia.com/gpu.product": "NVIDIA-B300"}
    (b300,) = judge([node("b", "custom.metal", os_image=br, labels=labels)], ())
    assert "no profile for B300" in text(b300)
    arm = node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])
    no_label = Node.from_api(
        {
            "metadata": {
                "name": arm.name,
                "labels": {k: v for k, v in arm.labels.items() if k != "kubernetes.io/arch"},
            },
            "status": {"nodeInfo": {"architecture": "arm64"}},
        }
    )

    def agent_anywhere(raw: dict[str, Any]) -> None:
        if raw["metadata"]["name"] == "eks-node-monitoring-agent":
            del raw["spec"]["template"]["spec"]["affinity"]

    (finding,) = judge([no_label], daemonsets("nma-v1.7.0.json", edit=agent_anywhere))
    assert finding.severity == INFO  # arm64 from nodeInfo: the agent skips DCGM there


def test_the_driver_on_the_host_is_read_from_the_cluster_policy_and_the_driver_daemonset() -> None:
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    ubuntu = [node("u", "p5.48xlarge", os_image="Ubuntu 22.04.5 LTS", labels=MIG_LABELS)]
    assert judge(ubuntu, sets) == []  # nothing says where the driver is
    (off,) = judge(ubuntu, sets, policy={"spec": {"driver": {"enabled": False}}})
    assert "ClusterPolicy driver.enabled=false" in text(off)
    al2 = {**MIG_LABELS, "nvidia.com/gpu.deploy.driver": "true"}
    amazon = [node("a", "p5.48xlarge", os_image="Amazon Linux 2", labels=al2)]
    (host,) = judge(amazon, sets)
    assert "no operator driver DaemonSet" in text(host)
    driver = {
        "metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "nvidia-driver-daemonset"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [
                        {"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:580.95.05"}
                    ],
                },
            }
        },
    }
    assert judge(amazon, (*sets, DaemonSetInfo.from_api(driver))) == []
    assert judge(amazon, sets, policy={"spec": {"driver": {"enabled": True}}}) == []


def test_an_unseen_dra_plugin_on_no_gpu_node_yet_is_still_named_once() -> None:
    cpu_only: list[Node] = []
    (finding,) = judge(cpu_only, daemonsets("dra-driver-v0.4.1-name-override.json"))
    assert finding.nodes == () and "the GPU nodes it comes to run on" in finding.summary


def test_gpu_names_are_read_by_whole_words() -> None:
    br = "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)"
    mig = {"nvidia.com/mig.config": "all-1g.12gb"}

    def judged(labels: dict[str, str], itype: str = "custom.metal") -> list[Finding]:
        return judge([node("n", itype, os_image=br, labels={**mig, **labels})], ())

    # GH200 is no H200: Bottlerocket's MIG manager knows the H200, not the GH200
    (gh200,) = judged({"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"})
    assert "no profile for GH200" in text(gh200)
    assert judged({"nvidia.com/gpu.product": "NVIDIA-H200"}) == []
    # Karpenter's GPU name when GPU feature discovery has not labelled the node yet
    (rtx,) = judged({"karpenter.k8s.aws/instance-gpu-name": "rtx-pro-server-6000"})
    assert "RTX PRO 6000 profiles came later" in text(rtx)
    # the EC2 family as the last resort
    (b200,) = judged({}, "p6-b200.48xlarge")
    assert "B200 profiles came later" in text(b200)


def test_odd_affinity_expressions_select_nothing_rather_than_fail() -> None:
    n = node("ip-10-0-9-9", "p5.48xlarge", taints=[], labels={"gpus": "8"})
    assert placed(affinity([{"key": "absent", "operator": "DoesNotExist"}]), n) == ""
    assert placed(affinity([{"key": "absent", "operator": "Gt", "values": ["1"]}]), n) != ""
    assert placed(affinity([{"key": "gpus", "operator": "Gt"}]), n) != ""  # no value
    assert placed(affinity([{"key": "gpus", "operator": "Gt", "values": ["x"]}]), n) != ""
    assert placed(affinity([{"key": "gpus", "operator": "Equals", "values": ["9"]}]), n) != ""


def test_a_toleration_tolerates_only_its_own_key() -> None:
    n = node("ip-10-0-9-9", "p5.48xlarge", taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    other = {"key": "nvidia.com/gpu", "operator": "Exists"}
    assert placed({"tolerations": [other]}, n) != ""
    assert placed({"tolerations": [{"operator": "Exists"}]}, n) == ""  # an empty key: every taint
    assert placed({"tolerations": [{"operator": "Equal"}]}, n) != ""  # Equal needs a key
    assert placed({"tolerations": [{"key": "dedicated", "operator": "Equal"}]}, n) == ""


def test_notin_and_empty_affinities_as_the_api_defines_them() -> None:
    n = node("ip-10-0-9-9", "p5.48xlarge", taints=[], labels={"gpus": "8"})
    assert placed(affinity([{"key": "gpus", "operator": "NotIn", "values": ["4"]}]), n) == ""
    assert placed(affinity([{"key": "gpus", "operator": "NotIn", "values": ["8"]}]), n) != ""
    no_terms: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
            }
        }
    }
    assert placed(no_terms, n) == "required node affinity has no terms"


def test_an_agent_image_without_a_tag_is_of_unknown_version() -> None:
    def untagged(raw: dict[str, Any]) -> None:
        for ctr in raw["spec"]["template"]["spec"]["containers"]:
            ctr["image"] = (
                "602401143452.dkr.ecr.us-west-2.amazonaws.com:443/eks/eks-node-monitoring-agent"
            )

    nodes = [node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])]
    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json", edit=untagged))
    assert finding.severity == WARNING  # an unknown agent may poll DCGM on arm64
    assert "(version unknown)" in text(finding)

    def bare(raw: dict[str, Any]) -> None:
        for ctr in raw["spec"]["template"]["spec"]["containers"]:
            ctr["image"] = "eks-node-monitoring-agent"  # a local mirror's name, no tag

    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json", edit=bare))
    assert "(version unknown)" in text(finding)


def test_a_renamed_agent_release_is_found_by_its_labels() -> None:
    def rename(raw: dict[str, Any]) -> None:
        raw["metadata"]["name"] = "nma-" + raw["metadata"]["name"]

    nodes = [node("ip-10-0-1-1", "g7e.48xlarge")]
    (finding,) = judge(nodes, daemonsets("nma-v1.6.1.json", edit=rename))
    assert "DaemonSet kube-system/nma-dcgm-server" in text(finding)


def test_nodes_the_agent_itself_skips_are_not_judged() -> None:
    hyperpod = node(
        "ip-10-0-1-1", "g7e.48xlarge", labels={"sagemaker.amazonaws.com/compute-type": "hyperpod"}
    )
    assert judge([hyperpod], daemonsets("nma-v1.6.1.json")) == []


def test_mig_manager_switched_off_in_the_cluster_policy_stops_nothing() -> None:
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)]
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    assert judge(nodes, sets, policy={"spec": {"migManager": {"enabled": False}}}) == []


def test_al2023_with_known_cgroup_v2_stays_repair_risks() -> None:
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", labels=MIG_LABELS)]
    sets = daemonsets("mig-manager-gpu-operator-v26.7.0.json")
    v2 = {"ip-10-0-4-1": NodeEvidence("ip-10-0-4-1", cgroup=CgroupInfo(2, "cgroup2fs"))}
    assert judge(nodes, sets, evidence=v2) == []


def test_dynamic_mig_from_the_feature_gates_flag_and_only_where_the_plugin_runs() -> None:
    def flag(raw: dict[str, Any]) -> None:
        for ctr in raw["spec"]["template"]["spec"]["containers"]:
            ctr["env"] = [e for e in ctr.get("env", []) if e["name"] != "FEATURE_GATES"]
            ctr["args"] = ["--feature-gates=DynamicMIG=true"]

    labels = {"nvidia.com/mig.config": "all-1g.24gb"}
    on = node("ip-10-0-5-1", "g7e.4xlarge", labels=labels, allocatable={})
    # no NFD label: the plugin's affinity keeps it off this node
    off = Node.from_api(
        {
            "metadata": {
                "name": "ip-10-0-5-2",
                "labels": {
                    k: v
                    for k, v in on.labels.items()
                    if k != "feature.node.kubernetes.io/pci-10de.present"
                },
            },
            "spec": {"taints": [GPU_TAINT]},
        }
    )
    sets = daemonsets("dra-driver-v0.4.1-dynamic-mig.json", edit=flag)
    (finding,) = [f for f in judge([on, off], sets) if "DynamicMIG" in f.summary]
    assert finding.nodes == ("ip-10-0-5-1",)
    assert '("DynamicMIG=true")' in text(finding)


# ------------------------------------------------------------------ a large pool


def test_a_large_pool_names_every_node_but_quotes_ten_of_them() -> None:
    """Evidence is a sample: a 40-node pool names all its nodes in the finding and quotes ten
    node lines, plus the source (and the repair setting for the loop)."""

    def evidence_lines(finding: Finding, source: str) -> int:
        return sum(1 for e in finding.evidence if e.source == source)

    g7e = [node(f"ip-10-0-1-{i}", "g7e.48xlarge") for i in range(40)]
    (loop,) = judge(g7e, daemonsets("nma-v1.6.1.json"))
    assert len(loop.nodes) == 40
    assert evidence_lines(loop, "daemonset") == 10 and evidence_lines(loop, "source") == 1

    h100 = [
        node(f"ip-10-0-4-{i}", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)
        for i in range(40)
    ]
    (boot,) = judge(h100, daemonsets("mig-manager-gpu-operator-v26.7.0.json"))
    assert len(boot.nodes) == 40 and evidence_lines(boot, "label") == 10

    old = "Bottlerocket OS 1.32.0 (aws-k8s-1.29-nvidia)"
    labels = {"nvidia.com/mig.config": "all-1g.10gb"}
    br = [node(f"ip-10-0-7-{i}", "p5.48xlarge", os_image=old, labels=labels) for i in range(40)]
    (early,) = judge(br, ())
    assert len(early.nodes) == 40 and evidence_lines(early, "label") == 10
