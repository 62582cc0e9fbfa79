"""mig-layout-mismatch on real-shaped snapshots of GPUs whose names hold another GPU's name:
a GH200 (not an H200), a p6e-gb200 node (not a B200), a g7e node known only by Karpenter's
labels. Each snapshot is read as `mignurse diagnose --from DIR` reads it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules import mig_layout
from mignurse.diagnose.sources import load_offline
from mignurse.evidence import parse_smi_xml
from mignurse.gpu.profiles import MODEL_UNKNOWN, identify_gpus
from mignurse.model import Node

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "gpu-identity"
GH200_NODE = "hybrid-gh200-0142"


def snapshot(name: str, **labels: str) -> DiagnosisInput:
    gathered = load_offline(CORPUS / name)
    (node,) = gathered.snapshot.nodes.values()
    if labels:
        node = replace(node, labels={**node.labels, **labels})
        gathered.snapshot = replace(gathered.snapshot, nodes={node.name: node})
    assert node.created is not None
    return gathered.to_input(node.created + timedelta(hours=1))


def the_node(inp: DiagnosisInput) -> Node:
    (node,) = inp.snapshot.nodes.values()
    return node


def texts(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


def test_a_gh200_is_identified_by_its_pci_device_id_not_as_an_h200() -> None:
    xml = (CORPUS / "gh200-all-balanced" / "nodes" / GH200_NODE / "nvidia-smi.xml").read_text()
    state = parse_smi_xml(xml)
    assert state.gpus[0].pci_device_id == "0x234210DE"
    ident = identify_gpus(Node.from_api({"metadata": {"name": GH200_NODE}}), state)
    assert ident.model is not None and ident.model.name == "GH200-96GB"
    assert ident.model_from == "nvidia-smi PCI device id 0x234210DE"


def test_a_gh200_in_its_own_all_balanced_layout_is_no_mismatch() -> None:
    inp = snapshot("gh200-all-balanced")
    assert inp.node_evidence[GH200_NODE].mig is not None
    assert mig_layout.rule(inp) == []


def test_a_gh200_whose_device_id_and_label_disagree_is_model_unknown_not_a_mismatch() -> None:
    inp = snapshot("gh200-all-balanced", **{"nvidia.com/gpu.product": "NVIDIA-H200"})
    ident = identify_gpus(the_node(inp), inp.node_evidence[GH200_NODE].mig)
    assert ident.model is None and "sources disagree" in ident.model_from
    assert mig_layout.rule(inp) == []


def test_a_p6e_gb200_node_is_a_gb200_and_its_all_balanced_layout_matches() -> None:
    inp = snapshot("p6e-gb200-gfd-labels")
    ident = identify_gpus(the_node(inp))
    assert ident.model is not None and ident.model.name == "GB200"
    assert (ident.count, ident.count_from) == (4, "nvidia.com/gpu.count=4")
    assert mig_layout.rule(inp) == []


def test_a_p6e_gb200_node_short_of_slices_is_compared_with_the_gb200_layout() -> None:
    inp = snapshot("p6e-gb200-gfd-labels")
    node = the_node(inp)
    short = replace(node, gpu_allocatable={**node.gpu_allocatable, "nvidia.com/mig-3g.93gb": 3})
    inp = replace(inp, snapshot=replace(inp.snapshot, nodes={node.name: short}))
    (finding,) = mig_layout.rule(inp)
    assert "all-balanced (1×1g.23gb" not in finding.summary
    assert "all-balanced on 4 GPUs means 8×1g.23gb + 4×2g.47gb + 4×3g.93gb" in finding.summary
    assert "4 GPUs (nvidia.com/gpu.count=4), GB200 (nvidia.com/gpu.product=NVIDIA-GB200)" in texts(
        finding
    )
    assert finding.runbooks == ("reapply-mig-no-hooks", "cordon-and-collect")


def test_a_g7e_node_known_by_karpenter_labels_is_held_to_its_layout() -> None:
    inp = snapshot("g7e-karpenter-labels")
    (finding,) = mig_layout.rule(inp)
    assert "all-1g.24gb (4×1g.24gb per GPU)" in finding.summary
    assert "advertises 2×1g.24gb, all-1g.24gb on 1 GPUs means 4×1g.24gb" in finding.summary
    assert (
        "1 GPUs (karpenter.k8s.aws/instance-gpu-count=1), RTX-PRO-6000-Server "
        "(karpenter.k8s.aws/instance-gpu-name=rtx-pro-server-6000 (98304 MiB))"
    ) in texts(finding)


def test_a_gpu_nothing_identifies_is_said_to_be_unknown_and_only_certain_things_compared() -> None:
    unknown = {
        "karpenter.k8s.aws/instance-gpu-name": "rtx-pro-server-9000",
        "node.kubernetes.io/instance-type": "g9e.4xlarge",
    }
    inp = snapshot("g7e-karpenter-labels", **unknown)
    assert mig_layout.rule(inp) == []  # 2×1g.24gb may be right on a GPU we do not know
    node = the_node(inp)
    odd = replace(node, gpu_allocatable={**node.gpu_allocatable, "nvidia.com/mig-2g.48gb": 1})
    inp = replace(inp, snapshot=replace(inp.snapshot, nodes={node.name: odd}))
    (finding,) = mig_layout.rule(inp)
    assert f"all-1g.24gb (expected layout unknown: {MODEL_UNKNOWN})" in finding.summary
    assert "all-1g.24gb asks only 1g.24gb" in finding.summary
    assert f"{MODEL_UNKNOWN} (karpenter.k8s.aws/instance-gpu-name=rtx-pro-server-9000" in texts(
        finding
    )
    assert finding.runbooks == ("cordon-and-collect",)  # no reapply without a known layout


def test_the_corpus_nodes_are_kubectl_lists() -> None:
    for folder in CORPUS.iterdir():
        document = json.loads((folder / "cluster" / "nodes.json").read_text())
        assert document["kind"] == "List" and len(document["items"]) == 1
