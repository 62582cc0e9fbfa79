"""The real-control-plane tier: etcd, kube-apiserver and kube-controller-manager as
`make upstream` built them (docs/upstream.md), beside the simulator.

Not part of `make test`: the folder is collected only when it is named on the command line
(`make upstream-test`), and every test in it is skipped, with one reason, when the binaries are
not built.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, find_binaries
from differ import Client
from karpenter import KarpenterCluster, find_karpenter_binaries

from mignurse.sim import SimCluster, load_scenario

HERE = Path(__file__).resolve().parent


def _named(config: pytest.Config) -> bool:
    """Whether the command line names this folder or a file in it."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path != HERE / "conftest.py" and not _named(config):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in Path(str(item.path)).parents]
    if not mine:
        return
    bins, why = find_binaries()
    if bins is None:
        skip = pytest.mark.skip(reason=why)
        for item in mine:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    bins, why = find_binaries()
    if bins is None:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("controlplane")
    control = ControlPlane(work, bins)
    try:
        control.start()
        yield control
    finally:
        control.stop()
    shutil.rmtree(work / "etcd", ignore_errors=True)


@pytest.fixture(scope="session")
def karpenter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KarpenterCluster]:
    """A control plane of its own with kube-scheduler, kwok and Karpenter (karpenter.py)."""
    bins, why = find_binaries()
    if bins is None:
        pytest.skip(why)
    extra, why = find_karpenter_binaries()
    if extra is None:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("karpenter")
    cluster = KarpenterCluster(work, bins, extra)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    shutil.rmtree(work / "etcd", ignore_errors=True)


@pytest.fixture(scope="session")
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster(load_scenario("healthy"), speed=0).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def real(plane: ControlPlane) -> Client:
    return Client(plane.url, plane.ssl_context())


@pytest.fixture(scope="session")
def simulated(sim: SimCluster) -> Client:
    return Client(sim.url, sim.ssl_context(), token=sim.token)
