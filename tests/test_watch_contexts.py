"""`mignurse watch` across several kube contexts, run as a user runs it, against several
simulated clusters served in one process with one kubeconfig (`sim serve`'s `SimFleet`),
one of them refusing connections: each cluster is recorded into its own history by its
own writer, the failing one is one line and never stops the others, SIGTERM stops all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.history import HistoryStore
from mignurse.paths import history_file
from mignurse.sim import load_scenario
from mignurse.sim.fleet import SimFleet, serve_fleet

SCENARIOS = ("healthy", "dcgm-repair-loop")
RECORDED = ("sim-healthy", "sim-dcgm-repair-loop")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimFleet, Path]]:
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    scenarios = [load_scenario(name) for name in SCENARIOS]
    served = serve_fleet(kubeconfig, scenarios, [("unreachable", "prod-eu")], speed=0)
    yield served, kubeconfig
    served.stop()


def _node_names(served: SimFleet, context: str) -> set[str]:
    sim = next(s for s in served.sims if s.scenario.context_name == context)
    return {o["metadata"]["name"] for o in sim.objects("nodes")}


def _watch(kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), "watch", *args]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)


def _lines_until(watch: subprocess.Popen[str], done: object, seconds: float = 90) -> list[str]:
    """stderr's lines until `done(lines)` holds (or the watch ends, or time is up)."""
    assert watch.stderr is not None and callable(done)
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    for line in watch.stderr:
        lines.append(line)
        if done(lines) or time.monotonic() > deadline:
            break
    return lines


def test_every_cluster_is_recorded_into_its_own_history_and_a_failing_one_is_one_line(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    served, kubeconfig = fleet
    state, bundles = tmp_path / "state", tmp_path / "bundles"
    bundles.mkdir()
    (state / "history.sqlite3").parent.mkdir()
    (state / "history.sqlite3").write_bytes(b"")  # an earlier version's single history

    def listed_both(lines: list[str]) -> bool:
        return all(any(f" {c}: listed " in line for line in lines) for c in RECORDED)

    watch = _watch(
        kubeconfig, "--context", "sim-*,prod-eu", "--state-dir", str(state),
        "--progress-every", "1", "--auto-collect", str(bundles),
    )  # fmt: skip
    try:
        lines = _lines_until(watch, listed_both)
        deadline = time.monotonic() + 60  # the repair loop's node is collected meanwhile
        while time.monotonic() < deadline and not list(bundles.glob("*.tar.gz")):
            time.sleep(0.2)
    finally:
        watch.send_signal(signal.SIGTERM)
        code = watch.wait(timeout=90)
        rest = watch.stderr.read() if watch.stderr else ""
    stderr = "".join(lines) + rest
    assert listed_both(lines), stderr
    assert code == 2, stderr  # the worst: prod-eu never connected
    failed = [line for line in stderr.splitlines() if line.startswith("mignurse: error:")]
    assert len(failed) == 1, stderr  # said once, however often it is retried
    assert "context 'prod-eu': unreachable:" in failed[0]
    assert "retried in the background" in failed[0]
    assert stderr.count("history.sqlite3 is the single history of earlier versions") == 1
    for context in RECORDED:
        assert f" {context}: recording context {context!r} into " in stderr
        assert f" {context}: stopped; recorded " in stderr  # each stopped cleanly
    # each cluster's own file, written by its own writer, holding its own nodes only
    files = sorted((state / "history").glob("*.sqlite3"))
    assert len(files) == 2, files
    for context in RECORDED:
        client = ClusterClient.connect(kubeconfig=str(kubeconfig), context=context)
        client.close()
        path = history_file(client.info, state)
        store = HistoryStore(path, readonly=True)
        try:
            recorded = {lc.name for lc in store.lifecycles(context, kind="Node")}
            others = {c for c in RECORDED if c != context}
            assert not any(store.lifecycles(other, kind="Node") for other in others)
        finally:
            store.close()
        assert recorded >= _node_names(served, context), context
    # auto-collect: each bundle's name carries the cluster it came from
    collected = [p.name for p in bundles.glob("*.tar.gz")]
    assert collected, stderr
    assert all(name.startswith("mignurse-bundle-sim-dcgm-repair-loop-") for name in collected)


def test_a_glob_that_selects_one_context_records_it_as_one(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    watch = _watch(kubeconfig, "--context", "sim-heal*", "--state-dir", str(tmp_path))
    try:
        lines = _lines_until(watch, lambda lines: " listed " in lines[-1])
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == 0
    assert "recording context 'sim-healthy' into " in lines[0]
    assert "Ctrl-C to stop" in lines[0]  # the one-context lines, without a prefix


def test_only_failing_clusters_exit_with_their_error_when_stopped(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    watch = _watch(kubeconfig, "--context", "prod-eu,sim-healthy", "--state-dir", str(tmp_path))
    try:
        lines = _lines_until(watch, lambda lines: "mignurse: error:" in lines[-1])
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == 2
    assert any("context 'prod-eu': unreachable" in line for line in lines)
