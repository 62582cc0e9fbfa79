"""known-bad-combination beside its neighbours: what the finding leads with and names, and the
DaemonSets that look like the ones it judges but are not (another vendor's DRA plugin, the
GPU operator's NVIDIADriver-managed driver, a second mig-manager for other nodes, an agent
chart that lets itself onto Auto Mode nodes).

The DaemonSets are the charts' renderings in tests/corpus/daemonsets/ (each with its source),
edited where a test says so; the others are written as their projects ship them:
intel/intel-resource-drivers-for-kubernetes@075b22d deployments/gpu/base/resource-driver.yaml
(DaemonSet intel-gpu-resource-driver-kubelet-plugin) and NVIDIA/gpu-operator v26.7.0
internal/state/testdata/golden/driver-minimal.yaml (an NVIDIADriver's DaemonSet is named
nvidia-gpu-driver-<os><version>-<hash>).
"""

from __future__ import annotations

from typing import Any

from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.findings import INFO
from mignurse.diagnose.inputs import KarpenterSettings

from .test_preflight_rules import BOTTLEROCKET, MIG_LABELS, daemonsets, judge, node, text

AGENT_TAG = "v1.6.1-eksbuild.1"


def test_a_certain_repair_loop_leads_with_the_repair_setting_and_names_the_agent_release() -> None:
    nodes = [node("ip-10-0-1-1", "g7e.48xlarge"), node("ip-10-0-1-2", "g7e.48xlarge")]
    (loop,) = judge(nodes, daemonsets("nma-v1.6.1.json"))
    assert loop.evidence[0].source == "settings"
    assert loop.evidence[0].text == (
        "Karpenter v1.14.1 feature gates NodeRepair=true: AcceleratedHardwareReady=False 10m"
    )
    assert f"the node monitoring agent ({AGENT_TAG}) runs on 2 GPU node(s)" in loop.summary


def test_under_karpenter_1_1_an_unreachable_dcgm_server_is_no_loop() -> None:
    # v1.1 repaired Ready=False alone (aws/karpenter-provider-aws v1.1.0
    # pkg/cloudprovider/cloudprovider.go RepairPolicies): DCGMError replaces nothing.
    release_1_1 = KarpenterSettings(
        node_repair=True, feature_gates="NodeRepair=true", version="1.1.4"
    )
    nodes = [node("ip-10-0-1-1", "g7e.48xlarge")]
    (finding,) = judge(nodes, daemonsets("nma-v1.6.1.json"), karpenter=release_1_1)
    assert finding.severity == INFO and "repair loop" not in finding.summary
    assert "no repair that mignurse can read acts on it" in finding.summary
    assert finding.runbooks == ()


def test_arm64_gpu_nodes_the_agent_does_not_monitor_are_named() -> None:
    nodes = [node("ip-10-0-2-1", "g5g.2xlarge", arch="arm64", taints=[])]
    (finding,) = judge(nodes, daemonsets("nma-v1.7.0.json"))
    assert finding.severity == INFO
    assert finding.nodes == ("ip-10-0-2-1",)
    assert "cannot run on 1 GPU node(s)" in finding.summary


def test_an_agent_chart_that_lets_itself_onto_auto_mode_nodes_still_leaves_them_alone() -> None:
    def onto_auto_mode(raw: dict[str, Any]) -> None:
        affinity = raw["spec"]["template"]["spec"].get("affinity") or {}
        terms = affinity.get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}
        )
        for term in terms.get("nodeSelectorTerms", []):
            term["matchExpressions"] = [
                e
                for e in term.get("matchExpressions", [])
                if e["key"] != "eks.amazonaws.com/compute-type"
            ]

    auto = node(
        "i-0abc", "g7e.48xlarge", labels={"eks.amazonaws.com/compute-type": "auto"}, taints=[]
    )
    sets = daemonsets("nma-v1.6.1.json", edit=onto_auto_mode)
    agent = next(d for d in sets if d.name == "eks-node-monitoring-agent")
    assert agent.runs_on(auto)  # the edited chart schedules there
    assert judge([auto], sets) == []  # Auto Mode runs its own agent and DCGM


# -- mig-manager at boot: the driver and the managers that run elsewhere -----------------------

MIG_MANAGER = "mig-manager-gpu-operator-v26.7.0.json"


def nvidia_driver_daemonset(name: str, image: str) -> DaemonSetInfo:
    return DaemonSetInfo.from_api(
        {
            "metadata": {"name": name, "namespace": "gpu-operator"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/component": "nvidia-driver"}},
                    "spec": {
                        "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                        "containers": [{"name": "nvidia-driver-ctr", "image": image}],
                    },
                }
            },
        }
    )


def test_a_driver_the_nvidiadriver_resource_deploys_is_the_operators_not_the_hosts() -> None:
    labels = {**MIG_LABELS, "nvidia.com/gpu.deploy.driver": "true"}
    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image="Amazon Linux 2", labels=labels)]
    driver = nvidia_driver_daemonset(
        "nvidia-gpu-driver-amzn2-7c6d7bd86b", "nvcr.io/nvidia/driver:580.95.05-amzn2"
    )
    assert judge(nodes, (*daemonsets(MIG_MANAGER), driver)) == []


def test_a_mig_manager_for_other_nodes_is_not_quoted_as_running_here() -> None:
    def for_a100s(raw: dict[str, Any]) -> None:
        raw["metadata"]["name"] = "nvidia-mig-manager-a100"
        raw["spec"]["template"]["spec"]["nodeSelector"] = {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"
        }

    nodes = [node("ip-10-0-4-1", "p5.48xlarge", os_image=BOTTLEROCKET, labels=MIG_LABELS)]
    (finding,) = judge(nodes, (*daemonsets(MIG_MANAGER), *daemonsets(MIG_MANAGER, edit=for_a100s)))
    assert "DaemonSet gpu-operator/nvidia-mig-manager " in text(finding)
    assert "nvidia-mig-manager-a100" not in text(finding)


# -- the DRA driver: another vendor's plugin, and a large pool --------------------------------


def test_intels_gpu_dra_kubelet_plugin_is_not_taken_for_nvidias() -> None:
    intel = DaemonSetInfo.from_api(
        {
            "metadata": {
                "name": "intel-gpu-resource-driver-kubelet-plugin",
                "namespace": "intel-gpu-resource-driver",
            },
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "intel-gpu-resource-driver-kubelet-plugin"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "kubelet-plugin",
                                "image": "ghcr.io/intel/intel-gpu-resource-driver:latest",
                            }
                        ],
                    },
                }
            },
        }
    )
    nodes = [node("ip-10-0-5-1", "g7e.4xlarge", taints=[], allocatable={})]
    assert judge(nodes, (intel,)) == []


def test_dynamic_mig_on_a_large_pool_names_every_node_and_quotes_ten() -> None:
    labels = {"nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-1g.24gb"}
    nodes = [
        node(f"ip-10-0-5-{i}", "g7e.4xlarge", labels=labels, allocatable={}) for i in range(12)
    ]
    sets = daemonsets("dra-driver-v0.4.1-dynamic-mig.json", MIG_MANAGER)
    (finding,) = [f for f in judge(nodes, sets) if "DynamicMIG" in f.summary]
    assert len(finding.nodes) == 12 and "on 12 node(s)" in finding.summary
    assert sum(1 for e in finding.evidence if e.source == "daemonset") == 10
