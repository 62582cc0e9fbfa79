"""The findings panel before the cluster is listed: the app judges the first page of nodes at
once and says the diagnosis is partial, what it was judged from, and that it may change;
the whole diagnosis replaces it once every watch has listed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse import session
from mignurse.cluster.client import DEFAULT_PAGE_SIZE, ClusterClient
from mignurse.diagnose.engine import CRITICAL_FIRST, all_rules, combine, diagnose, diagnose_stream
from mignurse.diagnose.findings import CRITICAL, NOTREADY_LOOP
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.apiserver.reads import ReadHandler
from mignurse.tui.app import make_app

from .conftest import SIM_ACCESS
from .test_node_screen import static_text, until

FIRST_PAGE = 2  # of mig-hook-notready's 4 nodes: one of them loops through NotReady


@pytest.fixture
def held_lists(
    tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LiveSource, threading.Event]]:
    """A cluster whose API server answers the first page of nodes, but holds back the
    watches' full lists of nodes and events until the test lets them go."""
    release = threading.Event()
    held = ReadHandler._list

    def holding(self: ReadHandler, rtype: Any, sel: Any) -> None:
        if rtype.plural in ("nodes", "events") and self._query.get("limit") == str(
            DEFAULT_PAGE_SIZE
        ):
            release.wait(60)
        held(self, rtype, sel)

    monkeypatch.setattr(ReadHandler, "_list", holding)
    monkeypatch.setattr(session, "FIRST_PAGE", FIRST_PAGE)
    sim = SimCluster(load_scenario("mig-hook-notready"), speed=0).start()
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    source = LiveSource(client, simulated="mig-hook-notready ×0", clock=sim.now, access=SIM_ACCESS)
    source.check()
    yield source, release
    release.set()
    sim.stop()


async def test_the_first_page_of_nodes_is_judged_while_the_rest_are_still_listing(
    held_lists: tuple[LiveSource, threading.Event],
) -> None:
    source, release = held_lists
    app: Any = make_app(source)
    async with app.run_test(size=(160, 48)):
        panel = app.query_one("#findings")
        await until(lambda: "diagnosis partial" in static_text(panel) and app.shown_findings())
        text = static_text(panel)
        assert not source.listed()  # the full list is still held back
        assert app.diagnosis is None  # nothing settled yet
        assert f"over the first {FIRST_PAGE} nodes" in text
        assert "still listing" in text and "findings may change" in text
        shown = app.shown_findings()
        assert shown[0].severity == CRITICAL and shown[0].id == NOTREADY_LOOP
        assert NOTREADY_LOOP in text

        release.set()
        await until(lambda: app.diagnosis is not None)
        await until(lambda: "diagnosis partial" not in static_text(panel))
        assert NOTREADY_LOOP in static_text(panel)
        assert {f.id for f in app.diagnosis.findings} >= {NOTREADY_LOOP}


def test_a_streamed_diagnosis_runs_the_critical_rules_first_and_adds_up_to_the_whole(
    held_lists: tuple[LiveSource, threading.Event],
) -> None:
    source, release = held_lists
    release.set()
    source.start(on_status=lambda _status: None)
    try:
        assert source.watcher is not None and source.watcher.wait_synced(30)
        inp, lacks = source.diagnosis_input()
    finally:
        source.stop()
    assert lacks == ""  # every watch has listed: the input is whole
    streamed = list(diagnose_stream(inp))
    assert [r.rule for r in streamed[: len(CRITICAL_FIRST)]] == list(CRITICAL_FIRST)
    assert {r.rule for r in streamed} == {name for name, _rule in all_rules()}
    assert combine(streamed) == diagnose(inp)
