"""`session.RecordingLoop`, one cluster of a `mignurse watch` over several contexts: a
cluster that fails is reported and tried again, later each time, and recorded once it
answers; stopping it ends the recording cleanly."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mignurse import session
from mignurse.cluster.client import ClusterClient, Unreachable
from mignurse.cluster.history import HistoryStore
from mignurse.session import Recording, RecordingLoop
from mignurse.sim import SimCluster, load_scenario


def test_a_cluster_that_fails_is_tried_again_and_recorded_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "RETRY_FIRST_SECONDS", 0.05)
    history = tmp_path / "history.sqlite3"
    attempts: list[str] = []
    failures: list[tuple[str, float]] = []
    lines: list[str] = []
    stop = threading.Event()
    with SimCluster(load_scenario("healthy"), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")

        def connect(context: str) -> ClusterClient:
            attempts.append(context)
            if len(attempts) <= 2:
                raise Unreachable(f"cannot reach the Kubernetes API (context {context!r})")
            return ClusterClient.connect(kubeconfig=str(kubeconfig))

        def start(recording: Recording) -> None:
            recording.open_history(history)

        loop = RecordingLoop(
            sim.scenario.context_name,
            connect=connect,
            start=start,
            stop=stop,
            on_progress=lines.append,
            on_failure=lambda exc, delay: failures.append((str(exc), delay)),
            progress_every=0.5,
        )
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(line.startswith("listed ") for line in lines):
            time.sleep(0.05)
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert any(line.startswith("listed ") for line in lines), (failures, lines)
    assert [delay for _, delay in failures] == [0.05, 0.1]  # later each time
    assert all("cannot reach the Kubernetes API" in why for why, _ in failures)
    assert len(attempts) == 3
    assert loop.failure is None  # recording when stopped: nothing to exit with
    assert lines[-1].startswith("stopped; recorded ")
    store = HistoryStore(history, readonly=True)
    try:
        recorded = {lc.name for lc in store.lifecycles(sim.scenario.context_name, kind="Node")}
    finally:
        store.close()
    assert recorded >= {o["metadata"]["name"] for o in sim.objects("nodes")}


def test_a_cluster_still_failing_when_stopped_keeps_its_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "RETRY_FIRST_SECONDS", 0.05)
    stop = threading.Event()
    failures: list[float] = []

    def connect(context: str) -> ClusterClient:
        if len(failures) >= 3:
            stop.set()
        raise Unreachable("connection refused")

    loop = RecordingLoop(
        "prod-eu",
        connect=connect,
        start=lambda recording: None,
        stop=stop,
        on_progress=lambda line: None,
        on_failure=lambda exc, delay: failures.append(delay),
        progress_every=1.0,
    )
    loop.run()  # returns once stopped
    assert isinstance(loop.failure, Unreachable)
    assert failures == [0.05, 0.1, 0.2]
