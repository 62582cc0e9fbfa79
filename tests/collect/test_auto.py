"""Auto-collect: a node under a repair clock is collected once, before its deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher
from mignurse.collect.auto import AutoCollector
from mignurse.diagnose.sources import load_offline
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells

WAIT = 60.0  # seconds a test waits for another thread before it fails (never a speed)


def test_the_dcgm_node_is_collected_once_before_its_repair(tmp_path: Path) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "k")))
        state = ClusterState()
        watcher = ClusterWatcher(client, state, karpenter=True).start()
        try:
            assert watcher.wait_synced(15)
            (tmp_path / "sb").mkdir()
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
        finally:
            watcher.stop()
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
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "k")))
        state = ClusterState()
        watcher = ClusterWatcher(client, state, karpenter=True).start()
        gate = threading.Event()
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
            assert watcher.wait_synced(15)
            (tmp_path / "sb").mkdir()
            lines: list[str] = []
            collector = AutoCollector(
                client, out_dir=tmp_path, shell_for=held, clock=sim.now, report=lines.append
            )
            started = collector.check(state)
            assert started
            closing = threading.Thread(target=collector.close)
            closing.start()
            deadline = time.monotonic() + WAIT
            while not any(line.startswith("stopping:") for line in lines):
                assert time.monotonic() < deadline, lines
                time.sleep(0.05)
            assert closing.is_alive()  # it waits for the bundle
            gate.set()
            closing.join(WAIT)
            assert not closing.is_alive()
        finally:
            gate.set()
            watcher.stop()
    [stopping] = [line for line in lines if line.startswith("stopping:")]
    assert stopping == (
        f"stopping: {len(started)} collection(s) still running finish their bundles first "
        f"({', '.join(sorted(started))})"
    )
    assert lines.index(stopping) < max(i for i, line in enumerate(lines) if line.endswith("(ok)"))
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    assert set(load_offline(bundle).node_evidence) == set(started)
