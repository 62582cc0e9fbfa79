"""Shared pieces of the runner tests: a simulator, a client on it, and step contexts."""

from __future__ import annotations

import dataclasses
import os
import pty
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES, ClusterClient
from mignurse.runner.step import StepContext
from mignurse.runner.steps import load_actions
from mignurse.sim import Scenario, SimCluster, load_scenario

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)

load_actions()


class Cluster:
    """A started simulator, its kubeconfig and a mignurse client connected to it."""

    def __init__(self, sim: SimCluster, kubeconfig: Path) -> None:
        self.sim = sim
        self.kubeconfig = kubeconfig
        self.client = ClusterClient.connect(str(kubeconfig))

    def nodes(self, pool: str | None = None) -> list[str]:
        return sorted(
            n["metadata"]["name"]
            for n in self.sim.objects("nodes")
            if pool is None
            or pool
            in (
                n["metadata"].get("labels", {}).get("karpenter.sh/nodepool"),
                n["metadata"].get("labels", {}).get("eks.amazonaws.com/nodegroup"),
            )
        )

    def node(self, name: str) -> dict[str, Any]:
        return self.client.get(NODES, name)

    def pods_on(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.sim.objects("pods") if p["spec"].get("nodeName") == name]

    def ctx(self, node: str, **kw: Any) -> StepContext:
        params = {"node": node, **kw.pop("params", {})}
        return StepContext(
            client=self.client, params=params, run_id="t1", holder="tester@box", **kw
        )


def never_consolidated(name: str, pool: str) -> Scenario:
    """A shipped scenario whose pool Karpenter never consolidates (consolidateAfter: Never):
    a drained node then goes only when the run deletes its NodeClaim, not by Karpenter's own
    consolidation on a busy machine."""
    scenario = load_scenario(name)
    pools = tuple(
        dataclasses.replace(p, consolidate_after="Never") if p.name == pool else p
        for p in scenario.pools
    )
    return dataclasses.replace(scenario, pools=pools)


@pytest.fixture
def cluster_for(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Start a scenario (by name, or one a test changed) on a manual clock (speed 0) at START;
    stopped after the test."""
    made: list[Cluster] = []

    def factory(scenario: str | Scenario = "healthy", **kwargs: Any) -> Cluster:
        kwargs.setdefault("speed", 0)
        kwargs.setdefault("start", START)
        spec = load_scenario(scenario) if isinstance(scenario, str) else scenario
        sim = SimCluster(spec, **kwargs).start()
        kubeconfig = sim.write_kubeconfig(tmp_path / f"kubeconfig-{len(made)}")
        made.append(Cluster(sim, kubeconfig))
        return made[-1]

    yield factory
    for cluster in made:
        cluster.client.close()
        cluster.sim.stop()


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$XDG_STATE_HOME in the test's folder: runs, audit and locks' holders live there."""
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


def answered_no(
    kubeconfig: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """`mignurse run ARGS` on a terminal, its prompt answered with a wrong name: declined,
    nothing changes."""
    main_fd, terminal = pty.openpty()
    try:
        os.write(main_fd, b"no\n")
        return subprocess.run(
            [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=terminal,
        )
    finally:
        os.close(main_fd)
        os.close(terminal)
