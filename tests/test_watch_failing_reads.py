"""`mignurse watch` on clusters that connect and then cannot be read: RBAC refusing the
nodes, RBAC refusing one watched resource, an API server that goes away mid-way. Each
counts as failing, as an unreachable cluster does: one `mignurse: error: context …` line,
the others recorded meanwhile, and exit 2 when the watch is stopped while it still fails.
Run as a user runs it, against simulated clusters served in this process."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from mignurse.sim import load_scenario
from mignurse.sim.fleet import SimFleet, serve_fleet
from mignurse.sim.scenario_spec import RbacDeny


def _watch(kubeconfig: Path, state: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), "watch"]
    command += ["--state-dir", str(state), *args]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)


def _until(watch: subprocess.Popen[str], done: Callable[[str], bool], seconds: float = 90) -> str:
    """stderr until `done(all of it so far)` holds, or the watch ends, or time is up."""
    assert watch.stderr is not None
    seen = ""
    deadline = time.monotonic() + seconds
    for line in watch.stderr:
        seen += line
        if done(seen) or time.monotonic() > deadline:
            break
    return seen


def _stopped(watch: subprocess.Popen[str], seen: str) -> tuple[int, str]:
    """SIGTERM, then the exit code and the whole of stderr."""
    watch.send_signal(signal.SIGTERM)
    code = watch.wait(timeout=90)
    return code, seen + (watch.stderr.read() if watch.stderr else "")


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("mignurse: ")]


def test_a_cluster_whose_nodes_rbac_refuses_fails_like_an_unreachable_one(
    failing_fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = failing_fleet
    watch = _watch(kubeconfig, tmp_path, "--context", "staging,sim-healthy")
    try:
        seen = _until(watch, lambda s: " sim-healthy: listed " in s and "mignurse: error:" in s)
    finally:
        code, stderr = _stopped(watch, "")
    stderr = seen + stderr
    assert code == 2, stderr  # staging was still refused when stopped
    (error,) = _errors(stderr)
    assert error.startswith("mignurse: error: context 'staging': RBAC denied: "), error
    assert "cannot list nodes" in error and "retried in the background, first in 5 s" in error
    # refused before anything is recorded: no history, no watch retried line by line
    assert " staging: " not in stderr, stderr
    assert " sim-healthy: stopped; recorded " in stderr  # the other went on


def test_one_context_whose_nodes_rbac_refuses_is_one_line_and_exit_2(
    failing_fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = failing_fleet
    watch = _watch(kubeconfig, tmp_path, "--context", "staging")
    try:
        code = watch.wait(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
    stderr = watch.stderr.read() if watch.stderr else ""
    assert code == 2, stderr
    assert stderr.startswith("mignurse: error: RBAC refused: cannot list nodes as user "), stderr
    assert "recording" not in stderr


@pytest.fixture
def events_refused(tmp_path: Path) -> Iterator[tuple[SimFleet, Path]]:
    """`sim-healthy`, and `sim-no-events`: the healthy cluster whose RBAC lets nodes be
    listed and refuses events (its nodes, NodeClaims and NodePools can be recorded)."""
    healthy = load_scenario("healthy")
    no_events = dataclasses.replace(
        healthy, name="no-events", rbac_deny=(*healthy.rbac_deny, RbacDeny("list", "events"))
    )
    served = serve_fleet(tmp_path / "config", [healthy, no_events], speed=0)
    yield served, tmp_path / "config"
    served.stop()


def test_a_watched_resource_rbac_refuses_after_connecting_counts_as_failing(
    events_refused: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = events_refused
    watch = _watch(kubeconfig, tmp_path / "state", "--context", "sim-*")
    try:
        seen = _until(
            watch,
            lambda s: (
                " sim-healthy: listed " in s
                and "mignurse: error:" in s
                and " sim-no-events: events: " in s
            ),
        )
    finally:
        code, stderr = _stopped(watch, "")
    stderr = seen + stderr
    assert " sim-no-events: recording context 'sim-no-events' into " in stderr, stderr
    assert code == 2, stderr
    (error,) = _errors(stderr)  # said when refused, not again when stopped
    assert error.startswith("mignurse: error: context 'sim-no-events': RBAC denied: "), error
    assert "cannot list events" in error and "(retried in the background, first in 30 s)" in error
    assert " sim-no-events: stopped; recorded " in stderr  # what RBAC allows was recorded


@pytest.fixture
def two_clusters(tmp_path: Path) -> Iterator[tuple[SimFleet, Path]]:
    scenarios = [load_scenario(name) for name in ("healthy", "dcgm-repair-loop")]
    served = serve_fleet(tmp_path / "config", scenarios, speed=0)
    yield served, tmp_path / "config"
    served.stop()


def test_clusters_recording_when_stopped_exit_0(
    two_clusters: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    """Stopping cuts every watch off: that is no failure of a cluster."""
    _served, kubeconfig = two_clusters
    watch = _watch(kubeconfig, tmp_path / "state", "--context", "sim-*")
    try:
        seen = _until(
            watch, lambda s: " sim-healthy: listed " in s and " sim-dcgm-repair-loop: listed " in s
        )
    finally:
        code, stderr = _stopped(watch, "")
    assert code == 0, seen + stderr
    assert _errors(seen + stderr) == []


class _Cable:
    """A TCP forwarder on 127.0.0.1 in front of an API server, that can be cut: every open
    connection dropped and new ones refused, as when a cluster's endpoint goes away."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.is_cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return  # cut
            far = socket.create_connection(self.upstream)
            with self.lock:
                if self.is_cut:  # accepted as the cable was cut: dropped with the others
                    for sock in (near, far):
                        _drop(sock)
                    return
                self.open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            self.is_cut = True
            # a listener closed while a thread waits in accept() would go on accepting on
            # Linux: shut down, the waiting accept() returns an error at once
            _drop(self.listener)
            for sock in self.open:
                _drop(sock)


def _drop(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def test_a_cluster_that_goes_away_mid_way_and_stays_away_exits_2_with_its_line(
    two_clusters: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = two_clusters
    config = yaml.safe_load(kubeconfig.read_text())
    (entry,) = [c for c in config["clusters"] if c["name"].endswith("-sim-dcgm-repair-loop")]
    url = urllib.parse.urlsplit(entry["cluster"]["server"])
    assert url.hostname and url.port
    cable = _Cable((url.hostname, url.port))
    entry["cluster"]["server"] = f"https://127.0.0.1:{cable.port}"
    kubeconfig.write_text(yaml.safe_dump(config))

    # each watch breaks on a read of its own: the events watch's line may come last
    broken = " sim-dcgm-repair-loop: events: cannot reach the Kubernetes API "
    watch = _watch(kubeconfig, tmp_path / "state", "--context", "sim-*")
    try:
        seen = _until(
            watch, lambda s: " sim-healthy: listed " in s and " sim-dcgm-repair-loop: listed " in s
        )
        cable.cut()
        seen += _until(watch, lambda s: broken in s)
    finally:
        code, stderr = _stopped(watch, "")
        cable.cut()
    stderr = seen + stderr
    # its watches broke and are retried, a progress line each
    assert broken in stderr, stderr
    assert code == 2, stderr
    (error,) = _errors(stderr)
    assert error.startswith("mignurse: error: context 'sim-dcgm-repair-loop': unreachable: "), error
    assert error.endswith("(still failing when stopped)"), error
    assert " sim-healthy: stopped; recorded " in stderr
