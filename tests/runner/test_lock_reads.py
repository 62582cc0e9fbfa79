"""How often a run reads its lock back (mignurse/runner/lock.py TargetLock.confirm): before
every change, but not again within CONFIRM_CACHE_SECONDS of the last read that found it
ours. A drain confirms the lock before each eviction: without the cache, a node of 100 pods
costs 100 reads of the Node in a few seconds."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from mignurse.runner import lock as locking

from .enginehelpers import Cluster
from .test_lock_takeover import lock_for

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
