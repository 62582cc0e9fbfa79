"""The status line of the app across several clusters before they are all listed: it says
it is connecting, then listing, then how many clusters are still to come, and never claims
"all ready" or "no Karpenter" of clusters it has not listed. The demo's simulated clusters
run on their scenarios' own clocks, so their lines show no clock skew; a real cluster's
line keeps its skew."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual.widgets import Static

from mignurse.cli import build_parser
from mignurse.cli.app import fleet_app
from mignurse.cluster.fleet import CONNECTED, UNREACHABLE, Cluster
from mignurse.session import FleetSource, Member
from mignurse.sim.fleet import serve_demo
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.refresh import fit_status, fleet_progress, status_parts

from .test_node_screen import static_text, until

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


class Part:
    """A connected cluster's source, as far as the status line asks of it."""

    def __init__(self, *, listed: bool, karpenter: bool = False) -> None:
        self._listed = listed
        self.karpenter = karpenter
        self.simulated: str | None = None
        self.read_only_reason = ""
        self.notices: list[str] = []
        self.collect_reports: list[str] = []

    def listed(self) -> bool:
        return self._listed


def member(context: str, part: Part | None = None, *, failed: bool = False) -> Member:
    cluster: Cluster[Any] = Cluster(context)
    if part is not None:
        cluster.status, cluster.result = CONNECTED, part
    elif failed:
        cluster.status, cluster.message = UNREACHABLE, "connection refused"
    return Member(cluster, part)


def line(fleet: FleetSource) -> str:
    progress = fleet_progress(fleet)
    assert progress is not None
    parts = status_parts([], fleet, {}, NOW, 0, listed=progress.whole, fleet=progress)
    return fit_status(parts, 400).plain


def test_before_any_cluster_connects_it_says_it_is_connecting() -> None:
    fleet = FleetSource([member(c) for c in ("a", "b", "c", "d")])
    shown = line(fleet)
    assert shown.startswith("connecting to 4 clusters…"), shown
    assert "all ready" not in shown and "no Karpenter" not in shown and "GPU nodes" not in shown


def test_connected_but_not_listed_says_it_is_listing() -> None:
    fleet = FleetSource([member("a", Part(listed=False)), member("b")])
    shown = line(fleet)
    assert shown.startswith("listing 1 cluster… no node yet"), shown
    assert "all ready" not in shown and "no Karpenter" not in shown


def test_one_listed_while_others_come_counts_without_claiming_all_ready() -> None:
    fleet = FleetSource(
        [member("a", Part(listed=True)), member("b", Part(listed=False)), member("c")]
    )
    shown = line(fleet)
    assert shown.startswith("2 of 3 clusters still loading…"), shown
    assert "all ready" not in shown and "no Karpenter" not in shown


def test_karpenter_seen_in_a_connected_cluster_is_said_at_once() -> None:
    fleet = FleetSource([member("a", Part(listed=False, karpenter=True)), member("b")])
    assert "Karpenter on" in line(fleet)


def test_once_every_reachable_cluster_is_listed_the_counts_are_whole() -> None:
    fleet = FleetSource(
        [member("a", Part(listed=True)), member("b", Part(listed=True)), member("c", failed=True)]
    )
    shown = line(fleet)
    assert "all ready" in shown and "no Karpenter" in shown and "loading" not in shown, shown


def test_every_cluster_failed_is_not_all_ready() -> None:
    fleet = FleetSource([member("a", failed=True), member("b", failed=True)])
    shown = line(fleet)
    assert shown.startswith("no cluster connected yet"), shown
    assert "all ready" not in shown and "no Karpenter" not in shown


async def test_the_apps_first_status_line_across_clusters_says_connecting() -> None:
    """The app on four clusters whose starts have not ended: its status line."""
    release = threading.Event()
    fleet: Any = FleetSource(  # as `fleet_app` hands it to the app
        [member(c) for c in ("a", "b", "c", "d")],
        connect=lambda arrived: release.wait(30),
    )
    app = make_app(fleet, read_only=True)
    assert isinstance(app, MigNurseApp)
    try:
        async with app.run_test(size=(160, 40)):
            status = app.query_one("#status", Static)
            await until(lambda: app.refreshes > 0)
            shown = static_text(status)
            assert "connecting to 4 clusters…" in shown, shown
            assert "all ready" not in shown and "no Karpenter" not in shown, shown
    finally:
        release.set()


async def test_the_demos_clusters_show_no_clock_skew_and_a_real_one_keeps_it(
    tmp_path: Path,
) -> None:
    """Two of the demo's clusters at its speed, whose clocks start behind this machine's:
    the one given its own clock (as the demo gives each) shows no skew; the one read as a
    real cluster (its API server's Date headers) keeps it."""
    served = serve_demo(tmp_path / "kubeconfig", 2, speed=10)  # as the demo serves them
    try:
        contexts: list[str | None] = [context for context, _what in served.described]
        own, real = contexts[0], contexts[1]
        assert own is not None and real is not None
        args = build_parser().parse_args(["--kubeconfig", str(served.kubeconfig), "--read-only"])
        clocks = {
            s.scenario.context_name: s.now for s in served.sims if s.scenario.context_name == own
        }
        app = fleet_app(args, contexts, clocks=clocks)
        assert isinstance(app, MigNurseApp)
        async with app.run_test(size=(160, 40)):
            box = app.query_one("#clusters", Static)
            await until(lambda: static_text(box).count("connected") == 2)
            lines = {ln.split()[0]: ln for ln in static_text(box).splitlines() if ln.strip()}
            assert "clock" not in lines[own], lines
            assert "behind" in lines[real] or "ahead" in lines[real], lines
    finally:
        served.stop()
