"""How several clusters start in one app: each connected cluster starts on a thread of its
own (one slow start never holds back those that connected after it), the first screen's one
page of nodes is shared among them, and each cluster's watches begin only once its first
page is in, so no cluster's first page waits behind the others' whole lists."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse import session
from mignurse.cluster.client import ClusterClient
from mignurse.cluster.fleet import CONNECTED, Cluster
from mignurse.session import FIRST_PAGE, FIRST_PAGE_LEAST, FleetSource, LiveSource, Member
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.apiserver.reads import ReadHandler

from .conftest import SIM_ACCESS

WAIT = 60.0  # seconds a test waits for another thread before it fails (never a speed)


class Started:
    """A connected cluster's source as the fleet starts it; `gate`: its start waits."""

    def __init__(self) -> None:
        self.gate: threading.Event | None = None
        self.began = threading.Event()
        self.asked: dict[str, Any] = {}
        self.notices: list[str] = []
        self.stopped = False

    def start(self, on_status: Any, **asked: Any) -> None:
        self.asked = asked
        self.began.set()
        if self.gate is not None:
            assert self.gate.wait(WAIT), "the test never let this start end"

    def stop(self) -> None:
        self.stopped = True


def connected(context: str, source: Started) -> Cluster[Any]:
    cluster: Cluster[Any] = Cluster(context)
    cluster.status, cluster.result = CONNECTED, source
    return cluster


def fleet_of(sources: dict[str, Started]) -> FleetSource:
    def connect(arrived: Any) -> None:
        for context, source in sources.items():
            arrived(connected(context, source))

    return FleetSource([Member(Cluster(c)) for c in sources], connect=connect)


def until(check: Any) -> None:
    done = threading.Event()
    for _ in range(int(WAIT * 20)):
        if check():
            return
        done.wait(0.05)
    raise AssertionError("never happened")


def test_a_slow_start_never_holds_back_the_clusters_that_connected_after_it() -> None:
    slow, quick = Started(), Started()
    slow.gate = threading.Event()
    fleet = fleet_of({"slow": slow, "quick": quick})
    fleet.start(on_status=lambda status: None)
    try:
        until(lambda: fleet.member("quick").source is quick)  # type: ignore[union-attr]
        assert slow.began.is_set() and fleet.member("slow").source is None  # type: ignore[union-attr]
    finally:
        slow.gate.set()
    until(lambda: fleet.member("slow").source is slow)  # type: ignore[union-attr]
    fleet.stop()
    assert slow.stopped and quick.stopped


def test_a_start_that_ends_after_the_fleet_stopped_is_stopped_too() -> None:
    late = Started()
    late.gate = threading.Event()
    fleet = fleet_of({"late": late})
    fleet.start(on_status=lambda status: None)
    assert late.began.wait(WAIT)
    fleet.stop()
    late.gate.set()
    until(lambda: late.stopped)
    assert fleet.member("late").source is None  # type: ignore[union-attr]


@pytest.mark.parametrize("clusters", [2, 10, 40])
def test_the_first_screens_page_is_shared_and_each_cluster_watches_after_its_own(
    clusters: int,
) -> None:
    sources = {f"c{i}": Started() for i in range(clusters)}
    fleet = fleet_of(sources)
    fleet.start(on_status=lambda status: None)
    until(lambda: all(s.asked for s in sources.values()))
    share = max(FIRST_PAGE_LEAST, FIRST_PAGE // clusters)
    assert {s.asked["first_page"] for s in sources.values()} == {share}
    assert all(s.asked["watch_after_first_page"] for s in sources.values())
    fleet.stop()


@pytest.fixture
def held_first_page(
    tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LiveSource, threading.Event, list[str]]]:
    """A cluster whose API server holds back the first page of nodes (a list of 7) until
    the test lets it go, and notes every list it is asked for."""
    release = threading.Event()
    asked: list[str] = []
    answer = ReadHandler._list

    def holding(self: ReadHandler, rtype: Any, sel: Any) -> None:
        asked.append(f"{rtype.plural}?limit={self._query.get('limit')}")
        if rtype.plural == "nodes" and self._query.get("limit") == "7":
            release.wait(WAIT)
        answer(self, rtype, sel)

    monkeypatch.setattr(ReadHandler, "_list", holding)
    sim = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated="mig-hook-notready ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    asked.clear()  # (what the check read)
    yield source, release, asked
    release.set()
    source.stop()
    sim.stop()


def started_as_in_a_fleet(
    held: tuple[LiveSource, threading.Event, list[str]],
) -> tuple[LiveSource, threading.Event, list[str]]:
    """The held cluster started as a fleet starts one, its first page asked for."""
    source, _release, asked = held
    source.start(on_status=lambda status: None, watch_after_first_page=True, first_page=7)
    until(lambda: "nodes?limit=7" in asked)
    return held


def test_a_clusters_watches_begin_once_its_first_page_is_in(
    held_first_page: tuple[LiveSource, threading.Event, list[str]],
) -> None:
    source, release, asked = started_as_in_a_fleet(held_first_page)
    assert source.watcher is None and not source.listed()
    assert asked == ["nodes?limit=7"]  # nothing else asked for while the first page is out
    release.set()
    until(lambda: source.synced())
    assert source.early_snapshot() is None  # listed whole: the first page is no longer shown


def test_a_cluster_stopped_before_its_first_page_came_begins_no_watch(
    held_first_page: tuple[LiveSource, threading.Event, list[str]],
) -> None:
    source, release, asked = started_as_in_a_fleet(held_first_page)
    source.stop()
    release.set()
    threading.Event().wait(1.0)  # time for a watch to have begun, were it going to
    assert source.watcher is None
    assert asked == ["nodes?limit=7"]


def test_the_first_page_is_the_sessions_own_where_no_share_is_given(
    held_first_page: tuple[LiveSource, threading.Event, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, release, asked = held_first_page
    monkeypatch.setattr(session, "FIRST_PAGE", 7)  # read when the start asks, not before
    release.set()
    source.start(on_status=lambda status: None)
    until(lambda: "nodes?limit=7" in asked and source.synced())
