"""The inventory of simulated clusters read as the live path reads them (the real client, the
DaemonSets, the Karpenter Deployment and, where a stand-in for EKS answers, the managed node
groups): each scenario's GPU operator, mig-manager, DRA driver, node monitoring agent,
Bottlerocket or AL2023 release and repair settings show where they run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import ClusterClient
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.inventory import NONE, ClusterInventory, inventory
from mignurse.diagnose.sources import load_live
from mignurse.sim import SimCluster, load_scenario


@pytest.fixture
def read(tmp_path: Path) -> Iterator[Any]:
    def read_scenario(name: str, *, eks: bool = False) -> ClusterInventory:
        with SimCluster(load_scenario(name), speed=0) as sim:
            client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / name)))
            try:
                # what `aws eks describe-nodegroup` answers for the scenario's node groups
                documents = sim.loops.nodegroup_documents()
                gathered = load_live(
                    client,
                    history_path=None,
                    nodegroups=(lambda _groups: (documents, [])) if eks else None,
                )
            finally:
                client.close()
            inp = gathered.to_input(sim.now())
            return inventory(inp, diagnose(inp).findings)

    yield read_scenario


def fields(inv: ClusterInventory, pool: str) -> dict[str, dict[str, int]]:
    found = next(p for p in inv.pools if p.pool == pool)
    return {key: dict(spread) for key, spread in found.fields.items()}


def test_the_dcgm_loop_pool_is_mid_roll_and_its_combination_runs_in_the_other_pools(
    read: Any,
) -> None:
    inv = read("dcgm-repair-loop")
    loop = fields(inv, "gpu-inference")
    assert loop["osImage"] == {
        "Amazon Linux 2023.6.20241212": 2,
        "Amazon Linux 2023.6.20250218": 1,
    }
    assert loop["ami"] == {"ami-07e1b3c9d8f2a6e54": 2, "ami-0c2d1a7f6e5b4a391": 1}
    assert loop["driver"] == {"570.124.06": 3}
    assert loop["nodeMonitoringAgent"] == {"v1.2.0-eksbuild.1": 3}
    assert [v.value for v in inv.stack["gpuOperator"]] == ["v24.9.2"]
    assert [v.value for v in inv.stack["karpenter"]] == ["1.4.0"]
    assert "NodeRepair=true" in inv.stack["karpenterFeatureGates"][0].value
    assert {f.id for f in inv.critical} >= {"node-repair-loop"}


def test_dra_and_mig_manager_show_on_the_pools_they_run_on(read: Any) -> None:
    inv = read("mig-dra-healthy")
    a100, g7e = fields(inv, "gpu-a100-dra"), fields(inv, "gpu-mig-dra")
    assert a100["draDriver"] == {"v25.8.0": 4} and g7e["draDriver"] == {"v25.8.0": 3}
    # mig-manager partitions the A100s; the g7e pool applies its layout in user data
    assert a100["migManager"] == {"v0.10.0-ubuntu20.04": 4}
    assert g7e["migManager"] == {NONE: 3}
    assert g7e["driver"] == {"580.126.09": 3}  # the v20260409 AMI's driver
    assert g7e["kubelet"] == {"v1.34.6-eks-2c8e91a": 3}
    assert g7e["containerd"] == {"containerd://2.2.1": 3}


def test_a_bottlerocket_pool_shows_its_release_and_repair_off(read: Any) -> None:
    pool = fields(read("preflight-mig-bottlerocket-p5"), "gpu-mig-br")
    assert pool["osImage"] == {"Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)": 2}
    assert pool["containerd"] == {"containerd://1.7.27+bottlerocket": 2}
    assert pool["migManager"] == {"v0.10.0-ubuntu20.04": 2}
    assert pool["nodeRepair"] == {"Karpenter NodeRepair off": 2}


def test_a_managed_node_group_shows_its_ami_label_and_its_repair_overrides(read: Any) -> None:
    unread = fields(read("mng-dcgm-repair-loop"), "ng-gpu-inference")
    assert unread["nodeRepair"] == {"not read": 3}  # no EKS to ask
    assert unread["amiRelease"] == {"not read": 3}
    inv = read("mng-dcgm-repair-loop", eks=True)
    assert inv.stack["karpenter"][0].value == "none seen"
    group = fields(inv, "ng-gpu-inference")
    (ami,) = group["ami"]
    assert ami.startswith("ami-")  # eks.amazonaws.com/nodegroup-image
    # the scenario's releaseVersion, as describe-nodegroup gives it
    assert group["amiRelease"] == {"1.32.3-20250610 (AL2023_x86_64_NVIDIA)": 3}
    (repair,) = group["nodeRepair"]
    assert repair.startswith("node group auto repair on")
    assert "AcceleratedHardwareReady/DCGMError Replace" in repair
