"""A simulated GPU node carries GPU feature discovery's version labels as the device plugin
image the simulator runs (v0.17.0) writes them: the deprecated `cuda.driver.*` and
`cuda.runtime.*` beside their `cuda.driver-version.*` and `cuda.runtime-version.*` successors,
agreeing (NVIDIA/k8s-device-plugin v0.17.0 internal/lm/nvml.go newVersionLabeler)."""

from __future__ import annotations

import pytest

from mignurse.sim import SimCluster, load_scenario


@pytest.mark.parametrize("scenario", ["healthy", "mig-dra-healthy"])
def test_every_gpu_node_has_the_driver_and_runtime_labels_of_both_generations(
    scenario: str,
) -> None:
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        gpu_nodes = [
            n["metadata"]["labels"]
            for n in sim.objects("nodes")
            if n["metadata"]["labels"].get("nvidia.com/gpu.present") == "true"
        ]
    assert gpu_nodes
    for labels in gpu_nodes:
        major, minor, rev = (
            labels[f"nvidia.com/cuda.driver.{p}"] for p in ("major", "minor", "rev")
        )
        assert labels["nvidia.com/cuda.driver-version.full"] == f"{major}.{minor}.{rev}"
        assert labels["nvidia.com/cuda.driver-version.major"] == major
        assert labels["nvidia.com/cuda.driver-version.minor"] == minor
        assert labels["nvidia.com/cuda.driver-version.revision"] == rev
        runtime = (labels["nvidia.com/cuda.runtime.major"], labels["nvidia.com/cuda.runtime.minor"])
        assert (
            labels["nvidia.com/cuda.runtime-version.major"],
            labels["nvidia.com/cuda.runtime-version.minor"],
        ) == runtime
        assert labels["nvidia.com/cuda.runtime-version.full"] == ".".join(runtime)
