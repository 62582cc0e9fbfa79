"""What the simulator shows for the combinations known to fail: DaemonSets served as a
scenario writes them, the DRA driver chart's `featureGates` and `selectorLabelsOverride`, and
scenario mistakes in them as one line naming the file and line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from simhelpers import kube

from mignurse.sim import ScenarioError, SimCluster, load_scenario


def test_a_declared_daemonset_is_served_beside_the_ones_its_pods_make(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("preflight-dcgm-g5g")
    apps = client.AppsV1Api(kube(sim))
    items: list[Any] = apps.list_daemon_set_for_all_namespaces().items
    listed = {(d.metadata.namespace, d.metadata.name): d for d in items}
    dcgm = listed[("kube-system", "dcgm-server")]
    assert dcgm.status.desired_number_scheduled == 0  # its affinity lets it run nowhere
    terms = dcgm.spec.template.spec.affinity.node_affinity
    required = terms.required_during_scheduling_ignored_during_execution.node_selector_terms
    arch = [e for e in required[0].match_expressions if e.key == "kubernetes.io/arch"]
    assert arch[0].values == ["amd64"]
    agent = listed[("kube-system", "eks-node-monitoring-agent")]
    assert agent.status.desired_number_scheduled == 4  # derived from its pods: every node
    got: Any = apps.read_namespaced_daemon_set("dcgm-server", "kube-system")
    assert got.metadata.uid == dcgm.metadata.uid


def test_the_dra_chart_values_reach_the_plugin_pods_and_their_daemonset(
    make_sim: Callable[..., SimCluster],
) -> None:
    gates = make_sim("preflight-dynamic-mig")
    pods = [
        p
        for p in gates.objects("pods")
        if p["metadata"]["name"].startswith("nvidia-dra-driver-gpu-kubelet-plugin-")
    ]
    assert pods
    for pod in pods:
        env = pod["spec"]["containers"][0]["env"]
        assert {"name": "FEATURE_GATES", "value": "DynamicMIG=true,"} in env
    ds: Any = client.AppsV1Api(kube(gates)).read_namespaced_daemon_set(
        "nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu"
    )
    assert ds.spec.template.spec.containers[0].env[0].value == "DynamicMIG=true,"

    override = make_sim("preflight-dra-selector-override")
    labels = [
        p["metadata"]["labels"]
        for p in override.objects("pods")
        if p["metadata"]["name"].startswith("nvidia-dra-driver-gpu-kubelet-plugin-")
    ]
    assert labels and all(
        "nvidia-dra-driver-gpu-component" not in lab
        and lab["app.kubernetes.io/component"] == "kubelet-plugin"
        for lab in labels
    )
    # The plugin still publishes the GPUs: only its labels changed.
    assert override.objects("resourceslices")


BASE = """\
name: broken
karpenter: {version: 1.4.0}
nodePools:
  - name: gpu
    instanceType: g7e.4xlarge
    nodes: 1
"""


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (BASE + "    draDriver: {featureGates: DynamicMIG=true}\n", 7, "needs gpuScheduling: dra"),
        (
            BASE + "    gpuScheduling: dra\n    draDriver: {featureGate: x}\n",
            8,
            "unknown field 'featureGate'",
        ),
        (BASE + "daemonSets:\n  - {spec: {}}\n", 8, "daemonSets[0] needs metadata.name"),
        (
            BASE + "daemonSets:\n  - metadata: {name: Bad_Name, namespace: kube-system}\n",
            8,
            "metadata.name must be a DNS-1123 name",
        ),
        (
            BASE
            + "daemonSets:\n  - metadata: {name: a, namespace: kube-system}\n"
            + "  - metadata: {name: a, namespace: kube-system}\n",
            9,
            "DaemonSet kube-system/a given twice",
        ),
        (
            BASE + "daemonSets:\n  - kind: Deployment\n    metadata: {name: a, namespace: x}\n",
            9,
            "kind must be DaemonSet",
        ),
    ],
)
def test_a_broken_daemonset_or_dra_driver_names_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message and "\n" not in message
