"""The fleet view's rows, from the simulator's scenarios through the real diagnosis."""

from __future__ import annotations

import json
from datetime import timedelta

from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings
from mignurse.fleetview import fleet_document, fleet_rows, repair_state
from mignurse.sim import SimCluster, load_scenario

from .simdiag import karpenter_of, snapshot_of


def _rows(scenario: str, minutes: float) -> tuple[list, DiagnosisInput]:
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        sim.advance(minutes * 60)
        inp = DiagnosisInput(snapshot=snapshot_of(sim), now=sim.now(), karpenter=karpenter_of(sim))
    return fleet_rows(inp, diagnose(inp)), inp


def test_repair_loop_pool_is_first_with_its_replacements_and_finding() -> None:
    rows, inp = _rows("dcgm-repair-loop", 40)
    first = rows[0]
    assert first.worst is not None and first.worst.severity == "critical", rows
    assert first.kind == "nodepool" and first.repair == "on"
    assert first.replaced_6h >= 1 and first.median_lifetime is not None
    assert first.nodes == first.ready + first.not_ready > 0
    cells = first.cells()
    assert cells[0] == first.pool and cells[1].startswith("CRIT ")
    document = fleet_document(rows, context="sim", now=inp.now)
    assert json.loads(json.dumps(document))["pools"][0]["worstSeverity"] == "critical"


def test_healthy_fleet_has_no_worst_and_no_replacements() -> None:
    rows, _ = _rows("healthy", 5)
    assert rows and all(r.worst is None or r.worst.severity == "info" for r in rows)
    assert all(r.replaced_1h == 0 and r.not_ready == 0 for r in rows)


def test_repair_state_words() -> None:
    now = SimCluster(load_scenario("healthy"), speed=0).now()
    paused = KarpenterSettings(
        node_repair=False, paused_by="alice@laptop", paused_at=f"{now:%Y-%m-%d}T03:02:00Z"
    )
    assert repair_state("nodepool", paused, now) == "PAUSED by alice since 03:02Z"
    earlier = now - timedelta(days=2)
    old = KarpenterSettings(
        node_repair=False, paused_by="bob", paused_at=f"{earlier:%Y-%m-%d}T01:00:00Z"
    )
    assert repair_state("nodepool", old, now).endswith(f"{earlier:%Y-%m-%d}T01:00:00Z")
    assert repair_state("nodepool", KarpenterSettings(node_repair=True), now) == "on"
    assert repair_state("nodepool", None, now) == "unknown"
    assert repair_state("auto", None, now) == "always on (Auto Mode)"
    assert repair_state("nodegroup", None, now).startswith("node group")
