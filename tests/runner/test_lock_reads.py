"""How often a run reads its lock back (mignurse/runner/lock.py TargetLock.confirm): before
every change, but not again within CONFIRM_CACHE_SECONDS of the last read that found it
ours. A drain confirms the lock before each eviction: without the cache, a node of 100 pods
costs 100 reads of the Node in a few seconds."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from mignurse.runner import lock as locking
from mignurse.runner.lock import TargetLock

from .enginehelpers import Cluster
from .test_lock_takeover import lock_for, on_node

Make = Callable[..., Cluster]


def node_reads(c: Cluster, node: str, since: int) -> int:
    return len(
        [r for r in c.sim.requests[since:] if r["method"] == "GET" and r["path"].endswith(node)]
    )


@pytest.mark.parametrize(("cache", "reads"), [(3600.0, 0), (0.0, 3)])
def test_changes_in_quick_succession_read_the_lock_once(
    cache: float, reads: int, cluster_for: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cache stretched to an hour: no read is needed right after taking the lock, however
    # busy the machine; and shrunk to nothing: every change reads the lock again.
    monkeypatch.setattr(locking, "CONFIRM_CACHE_SECONDS", cache)
    c = cluster_for("healthy")
    node = c.nodes("gpu-infer")[0]
    held = lock_for(c.client, node, "r-alice")
    held.acquire()
    before = len(c.sim.requests)

    for _change in range(3):
        held.confirm()

    assert node_reads(c, node, before) == reads


def test_a_process_that_dies_holding_its_lock_does_not_live_on_to_renew_it() -> None:
    # An uncaught error ends the run without its `finally` releasing anything: the renewal
    # thread must not keep the process alive (and the lock renewed) after the main thread
    # is gone. The lock then expires, and `mignurse unlock` or a takeover clears it.
    code = (
        "from mignurse.runner.lock import TargetLock\n"
        "held = TargetLock(None, target='node', name='n1', holder='alice@laptop',\n"
        "                  run_id='r-alice', runbook='cordon', ttl=900)\n"
        "held.held = True\n"
        "held.start_renewing()\n"
        "raise SystemExit(7)\n"
    )
    ended = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    assert ended.returncode == 7, ended.stderr
    # in this process too: the renewal thread is one the interpreter does not wait for
    held = TargetLock(None, target="node", name="n1", holder="alice@laptop",  # type: ignore[arg-type]
                      run_id="r-alice", runbook="cordon", ttl=900)  # fmt: skip
    held.held = True
    held.start_renewing()
    try:
        assert held._renewer is not None and held._renewer.daemon
    finally:
        held.stop_renewing()


class GatedGuard:
    """The lock's guard, holding the renewal thread at its door until `go` is set: a renewal
    that woke just as the run released its lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = threading.Event()
        self.go = threading.Event()

    def __enter__(self) -> None:
        if threading.current_thread().name == "lock-renew":
            self.waiting.set()
            self.go.wait(30)
        self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()


def test_a_renewal_under_way_as_the_run_releases_its_lock_is_waited_for(
    cluster_for: Make,
) -> None:
    # The renewal thread woke and is about to renew as the run ends: release waits for it,
    # so it neither renews a lock already removed nor reports the lock lost after a clean end.
    c = cluster_for("healthy")
    node = c.nodes("gpu-infer")[0]
    held = lock_for(c.client, node, "r-alice", ttl=3)  # renewed every second
    held.acquire()
    gate = GatedGuard()
    held._guard = gate  # type: ignore[assignment]
    lost: list[bool] = []
    held.start_renewing(on_lost=lambda: lost.append(True))
    renewer = held._renewer
    assert renewer is not None and gate.waiting.wait(30)

    threading.Timer(0.3, gate.go.set).start()
    assert held.release() is None

    renewer.join(30)  # whatever it did, it is done
    assert not lost
    assert on_node(c, node) is None
