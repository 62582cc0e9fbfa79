"""Escapes planted in every field the inventory shows (the OS image, kernel and containerd a
node reports, GPU feature discovery's driver label, the pool's name, the NodeClaim's AMI, the
node monitoring agent's image tag, Karpenter's image and feature gates) reach no terminal
raw: `mignurse inventory` live and `--from` two bundles, piped and on a terminal, shows each
visibly; `-o json` keeps the exact values."""

from __future__ import annotations

import json
import os
import pty
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse.sim import SimCluster, load_scenario

from .escapes import PAYLOAD, plant, raw_escapes, write_bundle
from .test_escapes_faces import _drain, _strings, mignurse

pytestmark = pytest.mark.xdist_group("escapes-inventory")


def _plant_in_stack(sim: SimCluster) -> None:
    store = sim.store
    with store.lock:
        for node in store.all("nodes"):
            info = node["status"]["nodeInfo"]
            for key in ("osImage", "kernelVersion", "containerRuntimeVersion", "kubeletVersion"):
                info[key] = info[key] + PAYLOAD
            labels = node["metadata"]["labels"]
            if "nvidia.com/cuda.driver-version.full" in labels:
                labels["nvidia.com/cuda.driver-version.full"] = "570" + PAYLOAD
            store.put("nodes", node)
        for claim in store.all("nodeclaims"):
            claim.setdefault("status", {})["imageID"] = "ami-0" + PAYLOAD
            store.put("nodeclaims", claim)
        for pod in store.all("pods"):
            for container in pod["spec"]["containers"]:
                if "eks-node-monitoring-agent" in container["image"]:
                    container["image"] = container["image"] + PAYLOAD
            store.put("pods", pod)
        for deployment in store.all("deployments"):
            if deployment["metadata"]["name"] == "karpenter":
                for container in deployment["spec"]["template"]["spec"]["containers"]:
                    container["image"] = "public.ecr.aws/karpenter/controller:1.4.0" + PAYLOAD
                    for env in container.get("env", []):
                        if env.get("name") == "FEATURE_GATES":
                            env["value"] = "NodeRepair=true," + PAYLOAD
                store.put("deployments", deployment)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("hostile-inventory")
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        plant(sim)
        _plant_in_stack(sim)
        bundle = write_bundle(sim, root / "bundle")
        (bundle / "cluster" / "karpenter.json").write_text(
            json.dumps(
                next(d for d in sim.objects("deployments") if d["metadata"]["name"] == "karpenter")
            )
        )
        shutil.copytree(bundle, root / "again")
        yield {
            "kubeconfig": sim.write_kubeconfig(root / "config"),
            "bundle": bundle,
            "again": root / "again",
            "state": root / "state",
        }
    finally:
        sim.stop()


FACES = {
    "live": ["inventory"],
    "two-bundles": ["inventory", "--from", "{bundle}", "--from", "{again}"],
}


def _run(hostile: dict[str, Path], face: str, *extra: str, stdout: int | None = None) -> Any:
    args = [a.format(**{k: str(v) for k, v in hostile.items()}) for a in FACES[face]]
    env = {
        "KUBECONFIG": str(hostile["kubeconfig"]),
        "XDG_STATE_HOME": str(hostile["state"]),
        "TERM": "xterm-256color",
        "COLUMNS": "160",
    }
    return mignurse(*args, *extra, env=env, stdout=stdout)


@pytest.mark.parametrize("face", FACES)
def test_planted_escapes_in_the_stack_are_shown_not_obeyed_when_piped(
    hostile: dict[str, Path], face: str
) -> None:
    result = _run(hostile, face)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert raw_escapes(result.stdout) == [] and raw_escapes(result.stderr) == []
    assert "570\\x1b]52;c;" in result.stdout  # the driver label, visibly
    assert "NodeRepair=true,\\x1b]52;c;" in result.stdout  # Karpenter's gates


@pytest.mark.parametrize("face", FACES)
def test_planted_escapes_in_the_stack_are_shown_not_obeyed_on_a_terminal(
    hostile: dict[str, Path], face: str
) -> None:
    primary, secondary = pty.openpty()
    drained: list[str] = []
    # the inventory is longer than a pty's buffer: read it while the command writes
    reader = threading.Thread(target=lambda: drained.append(_drain(primary)), daemon=True)
    reader.start()
    try:
        result = _run(hostile, face, stdout=secondary)
        os.close(secondary)
        secondary = -1
        reader.join(timeout=60)
        shown = drained[0]
    finally:
        if secondary >= 0:
            os.close(secondary)
        reader.join(timeout=60)
        os.close(primary)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\x1b[" in shown, "rich drew no style: not a terminal?"
    assert raw_escapes(shown, terminal=True) == []
    assert "\x1b]" not in shown and "\u202e" not in shown
    assert "\\x1b" in shown


@pytest.mark.parametrize("face", FACES)
def test_the_json_keeps_the_exact_planted_values(hostile: dict[str, Path], face: str) -> None:
    result = _run(hostile, face, "-o", "json")
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads(result.stdout)
    strings = list(_strings(document))
    assert "570" + PAYLOAD in strings
    assert any(s.startswith("Amazon Linux") and s.endswith(PAYLOAD) for s in strings)
    assert "NodeRepair=true," + PAYLOAD in strings
