"""Each combination known to fail, as a user meets it: `mignurse diagnose` through the real
kubernetes client against a scenario that shows it, and from the bundle `collect` writes.
The shipped scenarios built for other incidents raise no such finding."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.session import BundleSource
from mignurse.sim import SimCluster, load_scenario

from .simdiag import app_diagnosis

KNOWN_BAD = "known-bad-combination"


def diagnose_live(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str
) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        code = main(["--kubeconfig", kubeconfig, "diagnose", "-o", "json"])
        document = json.loads(capsys.readouterr().out)
        nodes = {
            n["metadata"]["name"]: n["metadata"]["labels"].get("karpenter.sh/nodepool", "")
            for n in sim.objects("nodes")
        }
    found = [f for f in document["findings"] if f["id"] == KNOWN_BAD]
    return code, found, nodes


def pool_nodes(nodes: dict[str, str], pool: str) -> list[str]:
    return sorted(name for name, of in nodes.items() if of == pool)


def test_g5g_nodes_whose_dcgm_server_runs_nowhere_are_a_certain_loop_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found, nodes = diagnose_live(tmp_path, capsys, "preflight-dcgm-g5g")
    (loop,) = found
    assert code == 1 and loop["severity"] == "warning" and loop["nodepool"] == "gpu-edge"
    assert sorted(loop["nodes"]) == pool_nodes(nodes, "gpu-edge")
    assert "a repair loop is certain" in loop["summary"]
    evidence = "\n".join(e["text"] for e in loop["evidence"])
    assert (
        "DaemonSet kube-system/dcgm-server: required node affinity kubernetes.io/arch" in evidence
    )
    assert "NodeRepair=true" in evidence
    assert loop["runbooks"] == ["pause-node-repair"]


def test_mig_manager_on_bottlerocket_h100_nodes_stops_kubelet_at_their_next_boot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, nodes = diagnose_live(tmp_path, capsys, "preflight-mig-bottlerocket-p5")
    (finding,) = found
    assert finding["nodepool"] == "gpu-mig-br" and finding["severity"] == "warning"
    assert sorted(finding["nodes"]) == pool_nodes(nodes, "gpu-mig-br")
    assert "stops kubelet during bootstrap" in finding["summary"]


def test_dynamic_mig_beside_mig_manager_names_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, nodes = diagnose_live(tmp_path, capsys, "preflight-dynamic-mig")
    (finding,) = found
    assert finding["nodepool"] == "gpu-a100-dra"
    assert sorted(finding["nodes"]) == pool_nodes(nodes, "gpu-a100-dra")
    evidence = "\n".join(e["text"] for e in finding["evidence"])
    assert 'DynamicMIG on ("DynamicMIG=true,")' in evidence
    assert "DaemonSet gpu-operator/nvidia-mig-manager runs here" in evidence


def test_mig_asked_of_bottlerocket_1_32_is_a_release_without_mig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, nodes = diagnose_live(tmp_path, capsys, "preflight-bottlerocket-old-mig")
    (finding,) = found  # no mig-manager DaemonSet: the operator's label alone stops nothing
    assert finding["nodepool"] == "gpu-br-mig"
    assert sorted(finding["nodes"]) == pool_nodes(nodes, "gpu-br-mig")
    evidence = "\n".join(e["text"] for e in finding["evidence"])
    assert "Bottlerocket 1.32.0 predates MIG support (1.34.0)" in evidence


def test_a_dra_plugin_with_overridden_selector_labels_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, nodes = diagnose_live(tmp_path, capsys, "preflight-dra-selector-override")
    (finding,) = found
    assert finding["nodepool"] == "gpu-mig-dra"
    assert sorted(finding["nodes"]) == pool_nodes(nodes, "gpu-mig-dra")
    assert "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin" in finding["summary"]
    evidence = "\n".join(e["text"] for e in finding["evidence"])
    assert "app.kubernetes.io/component=kubelet-plugin" in evidence


@pytest.mark.parametrize(
    "scenario",
    [
        "healthy",
        "dcgm-repair-loop",
        "mig-hook-notready",
        "mig-1g24gb",
        "mig-dra-healthy",
        "mig-dra-hook-notready",
        "mng-dcgm-repair-loop",
        "gpu-plugin-crashloop",
    ],
)
def test_the_other_shipped_scenarios_raise_no_known_bad_combination(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    _, found, _ = diagnose_live(tmp_path, capsys, scenario)
    assert found == []


def test_a_bundle_carries_the_daemonsets_and_diagnose_from_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    with SimCluster(load_scenario("preflight-dcgm-g5g"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        node = next(n["metadata"]["name"] for n in sim.objects("nodes"))
        code = main(["--kubeconfig", kubeconfig, "collect", node, "-o", str(bundle)])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
    with tarfile.open(bundle) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        raw = tar.extractfile(f"{top}/cluster/daemonsets.json").read()  # type: ignore[union-attr]
        manifest = tar.extractfile(f"{top}/manifest.json").read()  # type: ignore[union-attr]
        # no GPU operator here: its ClusterPolicy is not served, which is no problem to report
        assert f"{top}/cluster/clusterpolicy.json" not in tar.getnames()
    assert b"clusterpolicy" not in manifest.lower()
    names = {d["metadata"]["name"] for d in json.loads(raw)["items"]}
    assert {"dcgm-server", "eks-node-monitoring-agent"} <= names

    code = main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    (loop,) = [f for f in document["findings"] if f["id"] == KNOWN_BAD]
    assert loop["severity"] == "warning" and "a repair loop is certain" in loop["summary"]
    # the app on that bundle judges what `diagnose --from` judged
    source = BundleSource(bundle)
    app_findings = [f for f in source.assess()[0].findings if f.id == KNOWN_BAD]
    assert [f.summary for f in app_findings] == [loop["summary"]]


def test_the_app_warns_of_the_combination_from_its_live_session(tmp_path: Path) -> None:
    diagnosis = app_diagnosis("preflight-dcgm-g5g", tmp_path)
    (loop,) = [f for f in diagnosis.findings if f.id == KNOWN_BAD]
    assert loop.severity == "warning" and "a repair loop is certain" in loop.summary
