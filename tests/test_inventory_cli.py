"""`mignurse inventory` as an on-call engineer runs it: live against a simulated cluster, and
`--from` bundles collected from two of them, where it says which fields differ and which
cluster runs the combination that broke the other."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cliserver
import pytest
import test_cli_startup as startup

from mignurse.sim import SimCluster, load_scenario

pytestmark = pytest.mark.xdist_group("inventory-cli")


def mignurse(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
        and k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")
    }
    env["XDG_STATE_HOME"] = str(state)
    return cliserver.run(list(args), env=env, cwd=os.getcwd(), timeout=120)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two simulated clusters (a repair loop on a new AMI, a calm one on it too) and a bundle
    collected from each."""
    root = tmp_path_factory.mktemp("inventory")
    sims = {
        name: SimCluster(load_scenario(name), speed=0).start()
        for name in ("dcgm-repair-loop", "healthy")
    }
    try:
        found: dict[str, Any] = {"state": root / "state"}
        for name, sim in sims.items():
            kubeconfig = sim.write_kubeconfig(root / f"{name}.config")
            bundle = root / f"{name}.tar.gz"
            node = sim.objects("nodes")[0]["metadata"]["name"]
            done = mignurse(
                "--kubeconfig", str(kubeconfig), "collect", node, "-o", str(bundle),
                state=found["state"],
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            found[name] = {"kubeconfig": kubeconfig, "bundle": bundle}
        yield found
    finally:
        for sim in sims.values():
            sim.stop()


def rows(text: str) -> list[list[str]]:
    """A plain table's rows, cells split on the runs of spaces between columns."""
    return [[c.strip() for c in line.split("   ") if c.strip()] for line in text.splitlines()]


def test_the_live_inventory_shows_the_rolling_pool_with_both_releases(
    clusters: dict[str, Any],
) -> None:
    loop = clusters["dcgm-repair-loop"]
    done = mignurse("--kubeconfig", str(loop["kubeconfig"]), "inventory", state=clusters["state"])
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert ["gpu-inference", "OS image", "2", "Amazon Linux 2023.6.20241212"] in table
    assert ["gpu-inference", "OS image", "1", "Amazon Linux 2023.6.20250218"] in table
    assert ["gpu-inference", "NVIDIA driver", "3", "570.124.06"] in table
    assert [
        "gpu-operator",
        "v24.9.2",
        "DaemonSet gpu-operator/nvidia-operator-validator image",
    ] in table
    # the broken pool's combination, and the healthy pools that run it too
    assert "Pool gpu-inference: node-repair-loop" in done.stdout
    assert "    pool gpu-batch (2 nodes)" in done.stdout


def test_the_live_json_holds_every_pool_field_and_the_cluster_stack(
    clusters: dict[str, Any],
) -> None:
    healthy = clusters["healthy"]
    done = mignurse(
        "--kubeconfig", str(healthy["kubeconfig"]), "inventory", "-o", "json",
        state=clusters["state"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["kind"] == "Inventory"
    (cluster,) = document["clusters"]
    assert cluster["context"] == load_scenario("healthy").context_name
    pools = {p["pool"]: p for p in cluster["pools"]}
    assert set(pools) == {"gpu-train", "gpu-infer", "gpu-mig", "ng-gpu-l4"}
    assert pools["ng-gpu-l4"]["kind"] == "nodegroup"
    assert pools["ng-gpu-l4"]["fields"]["nodeRepair"] == [{"value": "not read", "nodes": 3}]
    assert "repair settings are not read: a simulated cluster has no EKS API" in done.stderr
    assert pools["gpu-mig"]["fields"]["migManager"] == [
        {"value": "v0.10.0-ubuntu20.04", "nodes": 2}
    ]
    assert cluster["stack"]["karpenter"] == [{"value": "1.4.0", "source": "controller Deployment"}]
    assert cluster["criticalFindings"] == []
    assert document["sharedCombinations"] == []


def test_two_bundles_show_where_they_differ_and_who_runs_the_broken_combination(
    clusters: dict[str, Any],
) -> None:
    bundles = [str(clusters[name]["bundle"]) for name in ("healthy", "dcgm-repair-loop")]
    done = mignurse(
        "inventory", "--from", bundles[0], "--from", bundles[1], state=clusters["state"]
    )
    assert done.returncode == 0, done.stderr
    healthy, loop = "sim-healthy", "sim-dcgm-repair-loop"
    assert done.stdout.startswith(f"Where {healthy}, {loop} differ:")
    table = rows(done.stdout)
    assert ["OS image", "Amazon Linux 2023.6.20241212", loop, "gpu-inference (2)"] in table
    assert ["mig-manager", "v0.10.0-ubuntu20.04", healthy, "gpu-mig (2), gpu-train (4)"] in table
    assert "The same everywhere: gpu-operator v24.9.2; Karpenter 1.4.0;" in done.stdout
    assert f"{loop} pool gpu-inference: node-repair-loop" in done.stdout
    assert f"    {healthy} pool gpu-infer (6 nodes)" in done.stdout

    as_json = mignurse(
        "inventory", "--from", bundles[0], "--from", bundles[1], "-o", "json",
        state=clusters["state"],
    )  # fmt: skip
    document = json.loads(as_json.stdout)
    assert [c["context"] for c in document["clusters"]] == [healthy, loop]
    differing = {d["field"]: d for d in document["differences"]}
    assert "driver" not in differing and "osImage" in differing
    assert differing["migManager"]["betweenClusters"] is True
    (shared,) = document["sharedCombinations"]
    assert shared["context"] == loop and shared["pool"] == "gpu-inference"
    assert {"context": healthy, "cluster": None, "pool": "gpu-infer", "nodes": 6} in shared[
        "alsoRunningIn"
    ]


def test_a_bundle_that_cannot_be_read_is_one_line_and_the_others_still_show(
    clusters: dict[str, Any], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-bundle.tar.gz"
    good = str(clusters["healthy"]["bundle"])
    done = mignurse("inventory", "--from", good, "--from", str(missing), state=clusters["state"])
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("mignurse:")]
    assert len(errors) == 1 and "no-such-bundle.tar.gz" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith("Cluster sim-healthy")  # the one that could be read
    as_json = mignurse(
        "inventory", "--from", good, "--from", str(missing), "-o", "json", state=clusters["state"]
    )
    failed = json.loads(as_json.stdout)["clusters"][1]
    assert failed["context"] == "no-such-bundle.tar.gz" and failed["error"]


def test_two_bundles_of_one_context_are_told_apart_by_their_file(
    clusters: dict[str, Any], tmp_path: Path
) -> None:
    again = tmp_path / "later.tar.gz"
    again.write_bytes(clusters["healthy"]["bundle"].read_bytes())
    done = mignurse(
        "inventory", "--from", str(clusters["healthy"]["bundle"]), "--from", str(again),
        state=clusters["state"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "No field differs between sim-healthy (healthy.tar.gz), sim-healthy (later.tar.gz).\n"
    )
    # what differs is between the pools of each: which of them mig-manager runs on
    assert "Where pools, or the nodes of a pool, differ within a cluster:" in done.stdout
    bundle = str(clusters["healthy"]["bundle"])
    twice = mignurse("inventory", "--from", bundle, "--from", bundle, state=clusters["state"])
    assert twice.stdout.startswith(
        "No field differs between sim-healthy (healthy.tar.gz) #1, sim-healthy (healthy.tar.gz) #2."
    )


def loaded_by(tmp_path: Path, *argv: str) -> set[str]:
    """What the inventory needs and the read commands must not pay for (findings exit 1 or 2)."""
    modules, done = startup.loaded_by(tmp_path, *argv, ok=(0, 1, 2))
    assert "error" not in done.stderr, done.stderr
    return modules


def test_the_inventory_is_not_loaded_by_nodes_or_diagnose_and_loads_no_app_or_aws(
    clusters: dict[str, Any], tmp_path: Path
) -> None:
    bundle = str(clusters["dcgm-repair-loop"]["bundle"])
    for argv in (("nodes",), ("diagnose", "--from", bundle)):
        kubeconfig = ("--kubeconfig", str(clusters["healthy"]["kubeconfig"]))
        modules = loaded_by(tmp_path, *kubeconfig, *argv)
        assert {"mignurse.cli.inventory", "mignurse.diagnose.inventory"}.isdisjoint(modules)
    modules = loaded_by(tmp_path, "inventory", "--from", bundle)
    heavy = ("textual", "boto3", "kubernetes", "mignurse.tui", "mignurse.runner", "mignurse.sim")
    assert sorted(m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)) == []


def test_the_documented_json_has_the_keys_inventory_prints(clusters: dict[str, Any]) -> None:
    text = (Path(__file__).parent.parent / "docs" / "commands.md").read_text()
    section = text[text.index("## `mignurse inventory`") :]
    start = section.index("```json") + len("```json")
    documented = json.loads(section[start : section.index("```", start)].replace("…", ""))
    bundle = str(clusters["dcgm-repair-loop"]["bundle"])
    done = mignurse(
        "inventory", "--from", bundle, "--from", "old-bundle.tar.gz", "-o", "json",
        state=clusters["state"],
    )  # fmt: skip
    printed = json.loads(done.stdout)
    assert set(documented) == set(printed)
    for shown, real in zip(documented["clusters"], printed["clusters"], strict=True):
        assert set(shown) == set(real)
    cluster, real_cluster = documented["clusters"][0], printed["clusters"][0]
    assert set(cluster["stack"]) == set(real_cluster["stack"])
    assert set(cluster["pools"][0]) == set(real_cluster["pools"][0])
    assert list(cluster["pools"][0]["fields"]) == list(real_cluster["pools"][0]["fields"])
    assert set(cluster["criticalFindings"][0]) == set(real_cluster["criticalFindings"][0])
    assert set(documented["differences"][0]) == set(printed["differences"][0])
    (shared,) = printed["sharedCombinations"]
    assert set(documented["sharedCombinations"][0]) == set(shared)
    assert set(documented["sharedCombinations"][0]["combination"]) == set(shared["combination"])


def test_a_folder_of_node_dumps_says_what_it_could_not_read(
    clusters: dict[str, Any], tmp_path: Path
) -> None:
    """`kubectl get nodes -o json` alone: what is on the nodes is shown, the rest is
    `not read` with a note naming the file that would have told it."""
    labels = {
        "eks.amazonaws.com/nodegroup": "ng-gpu",
        "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "54",
        "nvidia.com/cuda.driver.rev": "15",
    }
    info = {
        "osImage": "Bottlerocket OS 1.34.0 (aws-k8s-1.31-nvidia)",
        "kernelVersion": "6.1.119",
        "kubeletVersion": "v1.31.4-eks-0f56d01",
        "containerRuntimeVersion": "containerd://1.7.24+bottlerocket",
    }
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ip-10-0-1-1.us-west-2.compute.internal", "labels": labels},
        "status": {"nodeInfo": info, "conditions": [ready]},
    }
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": [node]}))
    done = mignurse("inventory", "--from", str(tmp_path), state=clusters["state"])
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert ["ng-gpu", "NVIDIA driver", "1", "550.54.15"] in table
    assert ["ng-gpu", "AMI", "1", "ami-0123456789abcdef0"] in table
    assert ["ng-gpu", "mig-manager", "1", "not read"] in table
    assert ["ng-gpu", "node repair", "1", "not read"] in table
    assert ["Karpenter", "none seen"] in table
    assert "no daemonsets.json: mig-manager" in done.stderr
    assert "no repair settings for node group(s) ng-gpu (nodegroups.json)" in done.stderr
