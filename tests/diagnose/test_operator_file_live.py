"""mig-layout-mismatch judged by the GPU operator's own mig-parted file, end to end through the
real kubernetes client against the simulator's `mig-custom-config`: its ClusterPolicy names a
ConfigMap whose `all-balanced` (3×1g.10gb + 2×2g.20gb) is not NVIDIA's default one, and whose
`inference-mixed` NVIDIA's file does not have. Live and from a bundle, the nodes that hold
exactly those layouts raise nothing."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main
from mignurse.cluster.client import ClusterClient
from mignurse.diagnose.sources import read_operator
from mignurse.sim import SimCluster, load_scenario


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def layout_findings(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in document["findings"] if f["id"] == "mig-layout-mismatch"]


def test_the_custom_layouts_are_what_the_nodes_are_judged_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    with SimCluster(load_scenario("mig-custom-config"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        client = ClusterClient.connect(kubeconfig)
        notices: list[str] = []
        policy, configmaps = read_operator(client, notices)
        client.close()
        balanced = next(
            n["metadata"]["name"]
            for n in sim.objects("nodes")
            if n["metadata"]["labels"].get("nvidia.com/mig.config") == "all-balanced"
        )
        _code, live = run_json(capsys, "--kubeconfig", kubeconfig, "diagnose")
        code = main(["--kubeconfig", kubeconfig, "collect", "--node", balanced, "-o", str(bundle)])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()

    assert notices == [] and policy is not None
    assert [m["metadata"]["name"] for m in configmaps or ()] == ["custom-mig-config"]
    assert layout_findings(live) == []  # NVIDIA's all-balanced would be a mismatch here

    with tarfile.open(bundle) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        raw = tar.extractfile(f"{top}/cluster/migconfigmaps.json")  # type: ignore[union-attr]
        listed = json.loads(raw.read())  # type: ignore[union-attr]
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("ConfigMap", "custom-mig-config")
    ]
    _code, offline = run_json(capsys, "diagnose", "--from", str(bundle))
    assert layout_findings(offline) == [], layout_findings(offline)[0]["summary"]
