"""Reading resource.k8s.io from a live API server (the simulator, through the real client):
the version the server offers, picked by discovery; a cluster that serves none, or whose
RBAC refuses it, behaves as it did before DRA was read, with at most one note."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.dra import load_dra, node_dra
from mignurse.cluster.load import load_snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario_spec import RbacDeny, Scenario


def healthy_twin(**changes: object) -> Scenario:
    return dataclasses.replace(load_scenario("mig-dra-healthy"), **changes)  # type: ignore[arg-type]


def connect(sim: SimCluster, tmp_path: Path) -> ClusterClient:
    return ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))


@pytest.mark.parametrize(
    ("release", "served", "read"),
    [
        ("1.34", ("v1",), "v1"),  # EKS 1.34: v1 only
        ("1.33", ("v1beta2", "v1beta1"), "v1beta2"),  # EKS 1.33: the beta API, v1beta2 preferred
        ("1.33", ("v1beta1",), "v1beta1"),  # devices under `basic`
    ],
)
def test_the_offered_version_is_read_and_its_devices_are_the_same(
    tmp_path: Path, release: str, served: tuple[str, ...], read: str
) -> None:
    scenario = healthy_twin(kubernetes_version=release, resource_api_versions=served)
    with SimCluster(scenario, speed=0) as sim:
        client = connect(sim, tmp_path)
        state = load_dra(client)
        node = next(iter(sorted(state.devices())))
        one = node_dra(client, node)
        client.close()

    assert state.version == read and state.notice == ""
    devices = state.devices()
    assert len(devices) == 7
    assert {tuple(sorted(d.mig_counts().items())) for d in devices.values()} == {
        (("1g.24gb", 4),),
        (("1g.5gb", 56),),
    }
    assert len(state.plugin_nodes) == 7
    assert state.claims and all(c.devices_of() for c in state.claims)
    assert one.on and one.devices == devices[node] and len(one.plugin_pods) == 1


def test_a_cluster_without_resource_k8s_io_reads_as_before(tmp_path: Path) -> None:
    with SimCluster(
        healthy_twin(kubernetes_version="1.32", resource_api_versions=()), speed=0
    ) as sim:
        client = connect(sim, tmp_path)
        loaded = load_snapshot(client)
        state = load_dra(client)
        client.close()

    assert state.version == "" and state.notice == ""
    assert not [n for n in loaded.notices if "resource.k8s.io" in n]
    snap = loaded.snapshot
    assert snap.resource_slices == () and snap.dra_plugin_nodes == frozenset()
    assert {snap.gpu_source(n) for n in snap.gpu_nodes()} == {"device-plugin"}


def test_rbac_that_refuses_dra_gives_one_note_and_the_judgement_of_before(
    tmp_path: Path,
) -> None:
    denied = (RbacDeny("list", "resourceslices"), RbacDeny("list", "resourceclaims"))
    with SimCluster(healthy_twin(rbac_deny=denied), speed=0) as sim:
        client = connect(sim, tmp_path)
        loaded = load_snapshot(client)
        client.close()
    with SimCluster(
        healthy_twin(kubernetes_version="1.32", resource_api_versions=()), speed=0
    ) as sim:
        client = connect(sim, tmp_path)
        before = load_snapshot(client)
        client.close()

    notes = [n for n in loaded.notices if "resource.k8s.io" in n]
    assert len(notes) == 1
    assert "resourceslices.resource.k8s.io (403 Forbidden)" in notes[0]
    assert "resourceclaims.resource.k8s.io (403 Forbidden)" in notes[0]

    def judged(snapshot: object) -> list[tuple[str, str, tuple[str, ...]]]:
        assert loaded.snapshot.taken_at is not None
        inp = DiagnosisInput(snapshot=snapshot, now=loaded.snapshot.taken_at)  # type: ignore[arg-type]
        return sorted((f.id, f.severity, f.nodes) for f in diagnose(inp).findings)

    assert loaded.snapshot.dra_plugin_nodes == frozenset()  # no slices: no DRA verdicts
    assert judged(loaded.snapshot) == judged(before.snapshot)
