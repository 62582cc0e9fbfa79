"""Build diagnosis inputs from the simulator, the way the live path would see the cluster."""

from __future__ import annotations

import time
from pathlib import Path

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.history import HistoryStore
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import Diagnosis
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.diagnose.sources import read_history
from mignurse.model import Event, Node, NodeClaim, NodePool
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario


def snapshot_of(sim: SimCluster) -> Snapshot:
    nodes = [Node.from_api(o) for o in sim.objects("nodes")]
    claims = [NodeClaim.from_api(o) for o in sim.objects("nodeclaims")]
    pools = [NodePool.from_api(o) for o in sim.objects("nodepools")]
    return Snapshot(
        nodes={n.name: n for n in nodes},
        nodeclaims={c.name: c for c in claims},
        nodepools={p.name: p for p in pools},
        events=tuple(Event.from_api(o) for o in sim.objects("events")),
        karpenter=sim.scenario.karpenter is not None,
        taken_at=sim.now(),
    )


def karpenter_of(sim: SimCluster) -> KarpenterSettings | None:
    for deployment in sim.objects("deployments"):
        if deployment["metadata"]["name"] == "karpenter":
            return KarpenterSettings.from_deployment(deployment)
    return None


def record_history(
    sim: SimCluster, store: HistoryStore, *, minutes: float, step: float = 1.0
) -> None:
    """Advance the sim `minutes`, recording a LIST of everything every `step` minutes, as
    `mignurse watch` would have (deletions are seen by the next list)."""
    context = sim.scenario.context_name
    elapsed = 0.0
    while True:
        now = sim.now()
        store.record(
            context, "nodes", "LIST", [Node.from_api(o) for o in sim.objects("nodes")], now
        )
        store.record(
            context,
            "nodeclaims",
            "LIST",
            [NodeClaim.from_api(o) for o in sim.objects("nodeclaims")],
            now,
        )
        store.record(
            context, "events", "LIST", [Event.from_api(o) for o in sim.objects("events")], now
        )
        if elapsed >= minutes:
            return
        sim.advance(step * 60)
        elapsed += step


def history_of(sim: SimCluster, store: HistoryStore) -> History:
    return read_history(store, sim.scenario.context_name, sim.now())


def input_of(
    sim: SimCluster, *, history_dir: Path | None = None, record_minutes: float = 0
) -> DiagnosisInput:
    """The sim as the live path sees it; with `history_dir`, first run the sim
    `record_minutes` with a recorder attached, so history holds the ended nodes."""
    history = History()
    if history_dir is not None:
        store = HistoryStore(history_dir / "history.sqlite3")
        try:
            # Every 15 s: a watcher sees a repaired NodeClaim's half-minute of deletion.
            record_history(sim, store, minutes=record_minutes, step=0.25)
            history = history_of(sim, store)
        finally:
            store.close()
    return DiagnosisInput(
        snapshot=snapshot_of(sim),
        now=sim.now(),
        history=history,
        karpenter=karpenter_of(sim),
    )


def app_diagnosis(scenario: str, tmp_path: Path) -> Diagnosis:
    """What the terminal app judges on a scenario: its live session through the real client,
    synced, then one assessment (the findings panel's)."""
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        source = LiveSource(client, simulated=f"{scenario} ×0", clock=sim.now, bundle_dir=tmp_path)
        try:
            source.check()
            source.start(lambda status: None)
            deadline = time.monotonic() + 30
            while not source.synced():
                assert time.monotonic() < deadline, "never synced"
                time.sleep(0.05)
            return source.assess()[0]
        finally:
            source.stop()
            client.close()
