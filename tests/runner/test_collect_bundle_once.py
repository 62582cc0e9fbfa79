"""collect-bundle as the engine runs it (mignurse/runner/steps/collect.py): a read-only step
the plan shows as such, and a collection that failed is reported, not started over (it may
have taken the step's whole 15 minutes already)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ApiError, ClusterClient
from mignurse.runner.engine import Runner

from .enginehelpers import Cluster
from .test_collect_bundle_step import Answering
from .test_replace_instance_cases import one_step

Make = Callable[..., Cluster]


class DiscoveryDown:
    """The cluster's client, with API discovery answering 503 (an aggregated API down)."""

    def __init__(self, real: ClusterClient) -> None:
        self._real = real
        self.asked = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def api_group_available(self, group: str, version: str) -> bool:
        self.asked += 1
        raise ApiError(f"the API server answered 503 to GET /apis/{group}/{version}")


def test_collect_is_planned_as_a_read_only_step_with_nothing_to_undo(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("gpu-train")[0]
    runner = Runner(one_step(tmp_path, "collect-bundle"), {"node": node}, client=c.client,
                    shell_for=lambda name: Answering(name, 0), yes=True)  # fmt: skip
    plan = runner.plan()
    (step,) = plan.to_json()["steps"]
    assert (step["mutates"], step["canUndo"], step["harm"]) == (False, False, "none")
    assert "1. collect-bundle (Collect the node's support bundle) [read-only]" in plan.text()


def test_a_collection_that_failed_is_not_started_over(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("gpu-train")[0]
    client = DiscoveryDown(c.client)
    out = tmp_path / "bundle.tar.gz"
    runner = Runner(one_step(tmp_path, "collect-bundle"), {"node": node, "out": str(out)},
                    client=client, shell_for=lambda name: Answering(name, 0), yes=True)  # type: ignore[arg-type]  # fmt: skip

    result = runner.run()

    assert result.status == "failed", result.report_lines()
    assert result.error == (
        "step collect-bundle failed: the API server answered 503 to GET /apis/karpenter.sh/v1"
    )
    assert result.steps[0].attempts == 1 and client.asked == 1
