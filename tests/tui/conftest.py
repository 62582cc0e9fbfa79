"""The app on the simulated repair loop, for every Pilot test here; runbook runs write their
audit and state into the test's own folder, never the user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


@pytest.fixture
def repair_loop(tmp_path: Path, state_home: Path) -> Iterator[tuple[SimCluster, MigNurseApp]]:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated="dcgm-repair-loop ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    yield sim, make_app(source)
    sim.stop()
