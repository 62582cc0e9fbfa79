"""Auto-collect: a node under a repair clock is collected once, before its deadline."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher
from mignurse.collect.auto import AutoCollector
from mignurse.diagnose.sources import load_offline
from mignurse.model import Node
from mignurse.nodeaccess.base import CommandResult, NodeShell
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells

WAIT = 60.0  # seconds a test waits for another thread before it fails (never a speed)


@contextlib.contextmanager
def _watched(tmp_path: Path) -> Iterator[tuple[SimCluster, ClusterClient, ClusterState]]:
    """The dcgm-repair-loop cluster served, listed and watched, and `sb/` for the nodes'
    sandboxes."""
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "k")))
        state = ClusterState()
        watcher = ClusterWatcher(client, state, karpenter=True).start()
        try:
            assert watcher.wait_synced(15)
            (tmp_path / "sb").mkdir()
            yield sim, client, state
        finally:
            watcher.stop()


def _closing(collector: AutoCollector, lines: list[str]) -> threading.Thread:
    """`collector.close()` begun on a thread, once it has said its stopping line."""
    closing = threading.Thread(target=collector.close)
    closing.start()
    deadline = time.monotonic() + WAIT
    while not any(line.startswith("stopping:") for line in lines):
        assert time.monotonic() < deadline, lines
        time.sleep(0.05)
    return closing


def test_the_dcgm_node_is_collected_once_before_its_repair(tmp_path: Path) -> None:
    with _watched(tmp_path) as (sim, client, state):
        lines: list[str] = []
        collector = AutoCollector(
            client,
            out_dir=tmp_path,
            shell_for=sandbox_shells(client, tmp_path / "sb"),
            clock=sim.now,
            report=lines.append,
        )
        started = collector.check(state)
        assert collector.check(state) == []  # the same condition is not collected twice
        collector.close()
        unhealthy = [
            n["metadata"]["name"]
            for n in sim.objects("nodes")
            if any(
                c["type"] == "AcceleratedHardwareReady" and c["status"] == "False"
                for c in n["status"]["conditions"]
            )
        ]
    assert started == unhealthy
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    assert set(load_offline(bundle).node_evidence) == set(unhealthy)
    assert any("repair due" in line for line in lines)
    assert any(line.endswith("(ok)") for line in lines)


def test_watch_auto_collect_as_a_user_runs_it(tmp_path: Path) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        out = tmp_path / "bundles"
        out.mkdir()
        command = [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), "watch"]
        command += ["--state-dir", str(tmp_path / "state"), "--auto-collect", str(out)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        watcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list(out.glob("*.tar.gz")):
                time.sleep(0.2)
            time.sleep(1)  # let the bundle be closed
        finally:
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=60) == 0
            stderr = watcher.stderr.read() if watcher.stderr else ""
    bundles = list(out.glob("*.tar.gz"))
    assert bundles, stderr
    assert "auto-collect on" in stderr and "repair due" in stderr
    assert load_offline(bundles[0]).node_evidence


def test_stopping_names_the_collections_that_finish_their_bundles_first(tmp_path: Path) -> None:
    """Ctrl-C on `watch --auto-collect` waits for the collections running: it says so first,
    naming their nodes, and each bundle is still written whole."""
    gate = threading.Event()
    with _watched(tmp_path) as (sim, client, state):
        shells = sandbox_shells(client, tmp_path / "sb")

        def held(node: Node) -> NodeShell:
            shell = shells(node)
            run = shell.run

            def run_when_let(*args: Any, **kwargs: Any) -> Any:
                gate.wait(WAIT)  # still running when the stop comes
                return run(*args, **kwargs)

            shell.run = run_when_let  # type: ignore[method-assign]
            return shell

        try:
            lines: list[str] = []
            collector = AutoCollector(
                client, out_dir=tmp_path, shell_for=held, clock=sim.now, report=lines.append
            )
            started = collector.check(state)
            assert started
            closing = _closing(collector, lines)
            assert closing.is_alive()  # it waits for the bundle
            gate.set()
            closing.join(WAIT)
            assert not closing.is_alive()
        finally:
            gate.set()
    [stopping] = [line for line in lines if line.startswith("stopping:")]
    assert stopping == (
        f"stopping: {len(started)} collection(s) still running finish their bundles first "
        f"({', '.join(sorted(started))})"
    )
    assert lines.index(stopping) < max(i for i, line in enumerate(lines) if line.endswith("(ok)"))
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    assert set(load_offline(bundle).node_evidence) == set(started)


def test_stop_now_ends_the_running_collections_with_partial_bundles_marked_interrupted(
    tmp_path: Path,
) -> None:
    """A second Ctrl-C on `watch --auto-collect` (its `stop_now`): the collections still
    running end at once, as Ctrl-C ends a `collect`, each bundle closed with what it has and
    its manifest saying it was interrupted; nothing new starts after."""
    stop_now, running = threading.Event(), threading.Event()
    with _watched(tmp_path) as (sim, client, state):
        shells = sandbox_shells(client, tmp_path / "sb")

        def never_ends(node: Node) -> NodeShell:
            shell = shells(node)

            def run_until_cancelled(script: str, **kwargs: Any) -> Any:
                running.set()
                assert kwargs["cancel"].wait(WAIT)  # the node's run is stopped, not waited for
                return CommandResult(node.name, "local", None, 0.1, error="stopped")

            shell.run = run_until_cancelled  # type: ignore[method-assign]
            return shell

        try:
            lines: list[str] = []
            collector = AutoCollector(
                client,
                out_dir=tmp_path,
                shell_for=never_ends,
                clock=sim.now,
                report=lines.append,
                stop_now=stop_now,
                stop_now_words="Ctrl-C again",
            )
            started = collector.check(state)
            assert started and running.wait(WAIT)
            closing = _closing(collector, lines)
            closing.join(1.0)
            assert closing.is_alive()  # it waits for the collection, which would not end
            stop_now.set()
            closing.join(WAIT)
            assert not closing.is_alive()
            assert collector.check(state) == []  # stopping now: nothing new starts
        finally:
            stop_now.set()
    [stopping] = [line for line in lines if line.startswith("stopping:")]
    assert stopping.endswith("; Ctrl-C again to stop them now")
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    ended = [line for line in lines if line.endswith("(interrupted: stopped before it ended)")]
    assert ended == [f"{started[0]}: bundle {bundle} (interrupted: stopped before it ended)"]
    with tarfile.open(bundle, "r:gz") as tar:  # a valid archive, its manifest last
        (name,) = [n for n in tar.getnames() if n.count("/") == 1 and n.endswith("/manifest.json")]
        manifest = json.load(tar.extractfile(name))  # type: ignore[arg-type]
    assert manifest["interrupted"] is True
    assert manifest["nodes"][started[0]]["ok"] is False


@pytest.mark.parametrize("auto_collect", [True, False])
def test_a_second_ctrl_c_on_watch_stops_the_collections_now_and_says_so(
    auto_collect: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from mignurse.cli import watch

    stop, stop_now = threading.Event(), threading.Event()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        watch._stop_on_signals(stop, stop_now if auto_collect else None)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(WAIT)
        assert not stop_now.is_set()  # the first stops the watch, collections finish
        os.kill(os.getpid(), signal.SIGINT)
        if auto_collect:
            assert stop_now.wait(WAIT)
        else:
            time.sleep(0.5)  # (nothing to wait for: the second is a stop again)
            assert not stop_now.is_set()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    said = capsys.readouterr().err
    assert ("stopping now: collections still running end with what they have" in said) is (
        auto_collect
    )
