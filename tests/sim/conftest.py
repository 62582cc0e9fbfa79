"""Fixtures that start simulated clusters on 127.0.0.1 for the sim tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from simhelpers import Http

from mignurse.sim import SimCluster, load_scenario


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than ~10 s (the scale-5000 build)")


START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def make_sim() -> Iterator[Callable[..., SimCluster]]:
    """Start a sim on a manual clock (speed=0) at a fixed START; stopped after the test."""
    started: list[SimCluster] = []

    def factory(scenario: Any = "dcgm-repair-loop", **kwargs: Any) -> SimCluster:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        kwargs.setdefault("speed", 0)
        kwargs.setdefault("start", START)
        sim = SimCluster(scenario, **kwargs).start()
        started.append(sim)
        return sim

    yield factory
    for sim in started:
        sim.stop()


@pytest.fixture(scope="session")
def scale_5000() -> Iterator[SimCluster]:
    """The scale-5000 cluster, built once per test process (the suite's most expensive build)
    and only ever read; its clock starts at the wall clock's now, so kubectl's AGE is sane.
    Tests that use it carry `xdist_group("scale-5000")` so one worker builds it."""
    sim = SimCluster(load_scenario("scale-5000"), speed=0, start=datetime.now(UTC)).start()
    yield sim
    sim.stop()


@pytest.fixture
def dcgm(make_sim: Callable[..., SimCluster]) -> SimCluster:
    return make_sim("dcgm-repair-loop")


@pytest.fixture
def http_for() -> Callable[[SimCluster], Http]:
    return Http
