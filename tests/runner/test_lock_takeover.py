"""Two runs meet on one node: the per-target lock (mignurse/runner/lock.py) on the simulator's
API server. Each test is one decision of lock.py's docstring, broken the way a run in the
field would break it: a run stopped past its expiry, an operator racing for the node, an API
server blip, a node replaced mid-run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.client import NAMESPACES, NODES, ClusterClient
from mignurse.runner.lock import (
    CONFIRM_CACHE_SECONDS,
    LOCK_ANNOTATION,
    LockError,
    TargetLock,
    holder_alive,
    liveness,
    read_lock,
)
from mignurse.runner.step import LockLost, StepFailed

from .enginehelpers import START, Cluster
from .repairhelpers import LosingClient

Make = Callable[..., Cluster]


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def lock_for(
    client: Any, node: str, run: str, holder: str = "alice@laptop", ttl: float = 900.0
) -> TargetLock:
    return TargetLock(
        client, target="node", name=node, holder=holder, run_id=run, runbook="cordon", ttl=ttl
    )


def on_node(c: Cluster, node: str) -> dict[str, Any] | None:
    raw = (c.node(node)["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
    return json.loads(raw) if raw else None


def write_lock(c: Cluster, node: str, lock: dict[str, Any]) -> None:
    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: json.dumps(lock)}}})


@pytest.fixture
def cluster(cluster_for: Make) -> Cluster:
    """The healthy cluster on a frozen clock: the API server's now is START, whatever the
    laptop's clock says."""
    c = cluster_for("healthy")
    c.client.use_clock(c.sim.now)
    return c


def past_the_confirm_cache() -> None:
    time.sleep(CONFIRM_CACHE_SECONDS + 0.1)


# -- a run stopped past its expiry while another run took the node over -------------------------


def test_a_run_whose_lock_was_taken_over_leaves_the_new_holders_lock_when_it_releases(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=60)
    assert alice.acquire() is None
    cluster.sim.advance(120)  # alice's laptop slept through her lock's expiry
    bob = lock_for(cluster.client, node, "r-bob", holder="bob@box")
    notice = bob.acquire()
    assert notice is not None and notice.startswith(
        f"took over the expired lock of alice@laptop on node {node} (run r-alice, cordon"
    )

    assert alice.held  # alice's run has not looked at the node since
    assert alice.release() is None

    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_renewal_after_a_takeover_never_overwrites_the_new_holder(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=60)
    alice.acquire()
    cluster.sim.advance(120)
    lock_for(cluster.client, node, "r-bob", holder="bob@box").acquire()

    assert alice.renew() is False
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"
    assert not alice.held
    assert alice.lost == f"lock lost: node {node} is now locked by bob@box (run r-bob, cordon)"
    with pytest.raises(LockLost) as lost:
        alice.confirm()  # the next change stops, naming who holds the node now
    assert str(lost.value) == alice.lost
    assert alice.renew() is False  # and later renewals do not look again


def test_before_its_next_change_a_run_whose_lock_was_taken_over_stops_naming_the_new_holder(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=60)
    alice.acquire()
    cluster.sim.advance(120)
    lock_for(cluster.client, node, "r-bob", holder="bob@box").acquire()
    past_the_confirm_cache()

    with pytest.raises(LockLost, match=r"now locked by bob@box \(run r-bob, cordon\)"):
        alice.confirm()
    with pytest.raises(LockLost, match="now locked by bob@box"):
        alice.confirm()  # and it stays lost: nothing more is changed by this run
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_lock_whose_annotation_was_removed_is_lost_not_retaken(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    # `mignurse unlock` run by a colleague who thought the run dead
    cluster.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: None}}})
    past_the_confirm_cache()

    with pytest.raises(LockLost, match=f"node {node} is no longer locked by run r-alice"):
        alice.confirm()
    assert on_node(cluster, node) is None


def test_an_expired_lock_that_nobody_took_is_renewed_before_the_next_change(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=60)
    alice.acquire()
    cluster.sim.advance(120)
    past_the_confirm_cache()

    alice.confirm()

    held = on_node(cluster, node) or {}
    assert held.get("run") == "r-alice"
    assert held["expires"] == stamp(cluster.sim.now() + timedelta(seconds=60))


def test_a_confirm_that_cannot_read_the_lock_fails_the_step_retryably_on_a_blip(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    past_the_confirm_cache()
    cluster.sim.fail("GET", f"/nodes/{node}$", code=503)

    with pytest.raises(
        StepFailed, match=f"cannot read the lock on node {node} before a change"
    ) as e:
        alice.confirm()
    assert e.value.retryable


# -- taking the lock --------------------------------------------------------------------------


def test_another_runs_live_lock_is_refused_naming_its_holder_and_how_to_clear_it(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    bob = lock_for(cluster.client, node, "r-bob", holder="bob@box")
    bob.acquire()
    alice = lock_for(cluster.client, node, "r-alice")

    with pytest.raises(LockError) as refused:
        alice.acquire()

    said = str(refused.value)
    assert said.startswith(f"node {node} is locked by bob@box (run r-bob, cordon; pid ")
    assert f"pid {os.getpid()} on {socket.gethostname()}: still running" in said
    assert said.endswith(f"if that run is dead, `mignurse unlock {node}` clears it")
    assert alice.refusal() == said
    assert not alice.held
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_dead_holder_on_this_machine_is_named_gone(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead_pid = ended.pid
    write_lock(
        cluster,
        node,
        {
            "holder": "bob@box",
            "run": "r-bob",
            "runbook": "drain",
            "expires": stamp(START + timedelta(minutes=10)),
            "host": socket.gethostname(),
            "pid": dead_pid,
            "renewed": stamp(START - timedelta(minutes=5)),
        },
    )

    with pytest.raises(LockError, match=f"pid {dead_pid} on .*: gone, last renewed 5 min ago"):
        lock_for(cluster.client, node, "r-alice").acquire()


def test_a_holder_on_another_machine_is_said_to_be_unknowable(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    write_lock(
        cluster,
        node,
        {
            "holder": "bob@box",
            "run": "r-bob",
            "runbook": "drain",
            "expires": stamp(START + timedelta(minutes=10)),
            "host": "bobs-laptop",
            "pid": 4242,
            "renewed": stamp(START - timedelta(seconds=30)),
        },
    )

    with pytest.raises(LockError) as refused:
        lock_for(cluster.client, node, "r-alice").acquire()
    assert (
        "pid 4242 on bobs-laptop (another machine: cannot tell whether it runs), "
        "last renewed 30 s ago) until 12:10Z" in str(refused.value)
    )


def test_a_lock_live_on_the_api_servers_clock_is_refused_though_the_laptop_is_past_it(
    cluster: Cluster,
) -> None:
    """The simulated cluster's clock is weeks behind the laptop's: the server's wins."""
    node = cluster.nodes()[0]
    write_lock(
        cluster,
        node,
        {
            "holder": "bob@box",
            "run": "r-bob",
            "runbook": "x",
            "expires": stamp(START + timedelta(seconds=1)),
        },
    )
    with pytest.raises(LockError, match="locked by bob@box"):
        lock_for(cluster.client, node, "r-alice").acquire()


def test_a_lock_expiring_at_this_very_second_of_the_api_server_is_taken_over(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    write_lock(
        cluster,
        node,
        {"holder": "bob@box", "run": "r-bob", "runbook": "x", "expires": stamp(START)},
    )
    alice = lock_for(cluster.client, node, "r-alice")
    assert alice.refusal() == ""
    notice = alice.acquire()
    assert notice == (
        f"took over the expired lock of bob@box on node {node} (run r-bob, x, expired 12:00Z)"
    )
    assert (on_node(cluster, node) or {}).get("run") == "r-alice"


def test_a_resumed_run_takes_its_own_lock_back_without_a_notice(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-alice").acquire()  # the run that was killed

    resumed = lock_for(cluster.client, node, "r-alice")
    assert resumed.refusal() == ""
    assert resumed.acquire() is None
    assert resumed.held
    assert (on_node(cluster, node) or {}).get("run") == "r-alice"


class Racing:
    """Another operator's run writes its lock between this run's read and its patch."""

    def __init__(self, real: ClusterClient, their_lock: Callable[[], None]) -> None:
        self._real = real
        self._their_lock = their_lock
        self.raced = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != "patch":
            return target

        def patch(*args: Any, **kwargs: Any) -> Any:
            if not self.raced:
                self.raced = True
                self._their_lock()
            return target(*args, **kwargs)

        return patch


def test_two_operators_racing_for_one_node_cannot_both_win(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    bob = lock_for(cluster.client, node, "r-bob", holder="bob@box")
    racing = Racing(cluster.client, bob.acquire)
    alice = lock_for(racing, node, "r-alice")

    with pytest.raises(LockError, match=r"locked by bob@box \(run r-bob"):
        alice.acquire()
    assert racing.raced
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_blip_of_the_api_server_while_taking_the_lock_is_ridden_out(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=503, times=2)

    assert lock_for(cluster.client, node, "r-alice").acquire() is None
    assert (on_node(cluster, node) or {}).get("run") == "r-alice"


def test_a_forbidden_lock_write_is_refused_at_once_in_one_line(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=403, times=None)
    before = len(cluster.sim.requests)

    with pytest.raises(LockError, match=f"^cannot lock node {node}: ") as refused:
        lock_for(cluster.client, node, "r-alice").acquire()
    assert "\n" not in str(refused.value)
    patches = [r for r in cluster.sim.requests[before:] if r["method"] == "PATCH"]
    assert len(patches) == 1  # a 403 answers the same next time: not retried


def test_a_node_replaced_before_the_run_has_no_lock_to_take_or_lose(cluster: Cluster) -> None:
    alice = lock_for(cluster.client, "ip-10-9-9-9.ec2.internal", "r-alice")

    assert (
        alice.acquire()
        == "node ip-10-9-9-9.ec2.internal no longer exists: there is no lock to take"
    )
    assert alice.absent
    alice.confirm()  # nothing to lose
    assert alice.release() is None


def test_a_node_deleted_under_a_running_lock_is_lost(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    cluster.client.delete(NODES, node)
    past_the_confirm_cache()

    with pytest.raises(LockLost, match=f"lock lost: node {node} no longer exists"):
        alice.confirm()
    assert not alice.held


def test_a_lock_cleared_by_unlock_is_not_brought_back_by_a_renewal(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    cluster.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: None}}})

    assert alice.renew() is False
    assert on_node(cluster, node) is None
    assert alice.lost == f"lock lost: node {node} is no longer locked by run r-alice"


def test_a_renewal_during_an_api_blip_keeps_the_lock_until_it_expires(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    cluster.sim.fail("GET", f"/nodes/{node}$", code=503)

    assert alice.renew() is True
    assert alice.held


class Contended:
    """Another writer changes the node between every read and patch of this run: each patch
    meets a newer resourceVersion (409)."""

    def __init__(self, real: ClusterClient) -> None:
        self._real = real
        self.patches = 0
        self.churning = True

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != "patch":
            return target

        def patch(resource: Any, name: str, body: Any, **kwargs: Any) -> Any:
            if self.churning:
                self.patches += 1
                churn = {"metadata": {"labels": {"churn": str(self.patches)}}}
                self._real.patch(resource, name, churn)
            return target(resource, name, body, **kwargs)

        return patch


def test_a_node_that_keeps_changing_under_the_run_is_refused_after_five_tries(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    contended = Contended(cluster.client)

    with pytest.raises(LockError, match=f"^cannot lock node {node}: it keeps changing under us"):
        lock_for(contended, node, "r-alice").acquire()
    assert contended.patches == 5
    assert on_node(cluster, node) is None


def test_a_release_on_a_node_that_keeps_changing_says_how_to_clear_the_lock(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    contended = Contended(cluster.client)
    alice = lock_for(contended, node, "r-alice", ttl=300)
    contended.churning = False  # taking it went through
    alice.acquire()
    contended.churning = True

    said = alice.release()

    assert contended.patches == 5
    assert said == (
        f"the lock on node {node} could not be released (it kept changing): it expires by "
        f"12:05Z, or `mignurse unlock {node}` clears it now"
    )


def test_the_lock_gives_up_once_the_api_server_stays_down_past_the_blip_window(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner import lock

    monkeypatch.setattr(lock, "BLIP_SECONDS", 2.5)
    node = cluster.nodes()[0]
    before = len(cluster.sim.requests)
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=503, times=None)

    with pytest.raises(LockError, match=f"^cannot lock node {node}: .*503"):
        lock_for(cluster.client, node, "r-alice").acquire()
    patches = [r for r in cluster.sim.requests[before:] if r["method"] == "PATCH"]
    assert 2 <= len(patches) <= 4  # one a second for the window, not a tight loop


def test_a_released_lock_stops_its_renewals(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lost: list[bool] = []
    alice = lock_for(cluster.client, node, "r-alice", ttl=3)
    alice.acquire()
    alice.start_renewing(on_lost=lambda: lost.append(True))
    renewer = alice._renewer
    assert renewer is not None and renewer.is_alive()

    assert alice.release() is None

    assert not renewer.is_alive()
    assert not lost  # a renewal after the release would have found the lock gone
    assert alice.renew() is False
    assert on_node(cluster, node) is None


def test_a_renewing_run_hears_at_once_that_its_lock_was_taken(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lost = threading.Event()
    alice = lock_for(cluster.client, node, "r-alice", ttl=3)  # renewed every second
    alice.acquire()
    alice.start_renewing(on_lost=lost.set)
    write_lock(
        cluster,
        node,
        {"holder": "bob@box", "run": "r-bob", "runbook": "x", "expires": "2099-01-01T00:00:00Z"},
    )

    assert lost.wait(30), "the renewal never noticed"
    assert not alice.held
    renewer = alice._renewer
    assert renewer is not None
    renewer.join(5)
    assert not renewer.is_alive()  # it stops renewing a lock that is not its own
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_lock_lost_while_renewing_can_be_released_from_the_renewal_thread(
    cluster: Cluster,
) -> None:
    """The engine's on_lost cancels the run, whose release may run on the renewer."""
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=3)
    alice.acquire()
    released: list[str | None] = []
    done = threading.Event()

    def on_lost() -> None:
        released.append(alice.release())
        done.set()

    alice.start_renewing(on_lost=on_lost)
    cluster.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: None}}})

    assert done.wait(30)
    assert released == [None]


def test_a_lock_taken_again_after_its_release_is_renewed_again(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=3)
    alice.acquire()
    alice.start_renewing()
    alice.release()
    alice.acquire()  # the same run: an undo after the run, a resume
    first = (on_node(cluster, node) or {})["expires"]

    alice.start_renewing()
    cluster.sim.advance(5)  # the API server's clock moves: a renewal writes a later expiry
    deadline = time.monotonic() + 30
    while (on_node(cluster, node) or {}).get("expires") == first:
        assert time.monotonic() < deadline, "never renewed after it was taken again"
        time.sleep(0.1)
    alice.release()


def test_a_renewal_that_keeps_meeting_other_writes_keeps_the_lock(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    contended = Contended(cluster.client)
    contended.churning = False
    alice = lock_for(contended, node, "r-alice")
    alice.acquire()
    contended.churning = True

    assert alice.renew() is True  # still ours until it expires
    assert contended.patches == 5
    assert alice.held


def test_a_cluster_without_its_lock_namespace_is_refused(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner import lock

    monkeypatch.setattr(lock, "CLUSTER_LOCK_NAMESPACE", "karpenter-gone")
    with pytest.raises(LockError, match=r"^cannot lock cluster prod: it does not exist$"):
        TargetLock(
            cluster.client, target="cluster", name="prod", holder="a", run_id="r", runbook="x"
        ).acquire()


class DeletedAfterRefusal:
    """The node is deleted right after the API server refused the release's patch."""

    def __init__(self, real: ClusterClient, node: str) -> None:
        self._real = real
        self._node = node

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != "patch":
            return target

        def patch(*args: Any, **kwargs: Any) -> Any:
            try:
                return target(*args, **kwargs)
            except Exception:
                self._real.delete(NODES, self._node)
                raise

        return patch


def test_a_release_refused_for_a_node_deleted_since_is_not_reported(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(DeletedAfterRefusal(cluster.client, node), node, "r-alice")
    alice.acquire()
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=403, times=1)

    assert alice.release() is None  # the node and its lock are gone: nothing to clear


# -- a lock left behind by this run's killed process -------------------------------------------


def test_a_lock_left_by_this_runs_killed_process_is_seen_and_cleared(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-alice").acquire()  # then SIGKILL: never released
    resumed = lock_for(cluster.client, node, "r-alice")

    assert resumed.left_by_this_run()
    assert resumed.clear_left()
    assert on_node(cluster, node) is None
    assert not resumed.left_by_this_run()
    assert resumed.clear_left() is False  # nothing left to clear


def test_a_lock_this_run_holds_now_is_not_a_leftover(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    assert not alice.left_by_this_run()


def test_another_runs_lock_is_never_cleared_as_a_leftover(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-bob", holder="bob@box").acquire()
    alice = lock_for(cluster.client, node, "r-alice")

    assert not alice.left_by_this_run()
    assert alice.clear_left() is False
    assert (on_node(cluster, node) or {}).get("run") == "r-bob"


def test_a_leftover_on_a_node_that_is_gone_or_unreadable_is_none(cluster: Cluster) -> None:
    gone = lock_for(cluster.client, "ip-10-9-9-9.ec2.internal", "r-alice")
    assert not gone.left_by_this_run()
    assert gone.clear_left() is False
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-alice").acquire()
    cluster.sim.fail("GET", f"/nodes/{node}$", code=503)
    assert not lock_for(cluster.client, node, "r-alice").left_by_this_run()


def test_clearing_a_leftover_on_a_node_that_keeps_changing_gives_up_after_five_tries(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-alice").acquire()
    contended = Contended(cluster.client)

    assert lock_for(contended, node, "r-alice").clear_left() is False
    assert contended.patches == 5
    assert (on_node(cluster, node) or {}).get("run") == "r-alice"


def test_clearing_a_leftover_rides_out_one_concurrent_write(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    lock_for(cluster.client, node, "r-alice").acquire()
    racing = Racing(cluster.client, lambda: cluster.client.patch(
        NODES, node, {"metadata": {"labels": {"team": "ml"}}}
    ))  # fmt: skip

    assert lock_for(racing, node, "r-alice").clear_left() is True
    assert racing.raced and on_node(cluster, node) is None


# -- releasing it -------------------------------------------------------------------------------


def test_a_release_whose_answer_was_lost_is_settled_by_reading_the_node_back(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    losing = LosingClient(cluster.client, {"patch"})
    alice = lock_for(losing, node, "r-alice")
    losing.lost = 1  # the lock itself is taken cleanly
    alice.acquire()
    losing.lost = 0

    assert alice.release() is None
    assert on_node(cluster, node) is None


def test_a_blip_while_releasing_is_ridden_out(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=503, times=2)

    assert alice.release() is None
    assert on_node(cluster, node) is None


def test_a_release_during_a_long_outage_tries_once_a_second_then_says_how_to_clear_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner import lock

    monkeypatch.setattr(lock, "BLIP_SECONDS", 2.5)
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice")
    alice.acquire()
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=503, times=None)
    before = len(cluster.sim.requests)

    said = alice.release() or ""

    assert said.startswith(f"the lock on node {node} could not be released (the API server")
    patches = [r for r in cluster.sim.requests[before:] if r["method"] == "PATCH"]
    assert 2 <= len(patches) <= 4  # one a second for the window, not a tight loop


def test_a_forbidden_release_is_not_tried_again(cluster: Cluster) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=600)
    alice.acquire()
    cluster.sim.fail("PATCH", f"/nodes/{node}$", code=403, times=None)
    before = len(cluster.sim.requests)

    said = alice.release() or ""

    assert said.startswith(f"the lock on node {node} could not be released (RBAC refused")
    assert len([r for r in cluster.sim.requests[before:] if r["method"] == "PATCH"]) == 1


def test_a_lock_that_cannot_be_released_is_reported_with_its_expiry_and_the_unlock_command(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    alice = lock_for(cluster.client, node, "r-alice", ttl=600)
    alice.acquire()
    cluster.sim.fail("*", f"/nodes/{node}$", code=403, times=None)

    said = alice.release()

    assert said is not None and said.startswith(f"the lock on node {node} could not be released (")
    assert said.endswith("): it expires by 12:10Z, or `mignurse unlock " + node + "` clears it now")
    assert not alice.held
    cluster.sim.clear_faults()
    assert (on_node(cluster, node) or {}).get("run") == "r-alice"


def test_a_cluster_runbooks_lock_lives_on_kube_system_and_is_cleared_with_unlock_cluster(
    cluster: Cluster,
) -> None:
    def cluster_lock(run: str, holder: str) -> TargetLock:
        return TargetLock(
            cluster.client, target="cluster", name="prod", holder=holder, run_id=run,
            runbook="pause-node-repair",
        )  # fmt: skip

    cluster_lock("r-bob", "bob@box").acquire()
    held, _version = read_lock(cluster.client, NAMESPACES, "kube-system")
    assert held is not None and held["run"] == "r-bob"

    with pytest.raises(LockError) as refused:
        cluster_lock("r-alice", "alice@laptop").acquire()
    assert str(refused.value).startswith("cluster prod is locked by bob@box")
    assert str(refused.value).endswith("`mignurse unlock --cluster` clears it")


# -- what a lock says about its holder ---------------------------------------------------------


def test_a_lock_written_by_hand_without_an_expiry_is_taken_over_and_named(
    cluster: Cluster,
) -> None:
    node = cluster.nodes()[0]
    cluster.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: "carol"}}})

    held, version = read_lock(cluster.client, NODES, node)
    assert held == {"holder": "carol"}
    assert version
    notice = lock_for(cluster.client, node, "r-alice").acquire()
    assert notice == f"took over the expired lock of carol on node {node} (run ?, ?, expired ?)"


@pytest.mark.parametrize(
    ("silent_for", "alive"),
    [(0, True), (605, True), (606, False)],  # 2 renewal periods (2 x 900/3 s) + 5 s
)
def test_a_holder_elsewhere_is_dead_once_it_missed_two_renewals(
    silent_for: int, alive: bool
) -> None:
    renewed = stamp(START - timedelta(seconds=silent_for))
    lock = {"host": "bobs-laptop", "pid": 4242, "renewed": renewed}
    assert holder_alive(lock, START) is alive


def test_a_short_lived_lock_still_allows_a_second_of_renewal_slack() -> None:
    lock = {"host": "bobs-laptop", "pid": 1, "renewed": stamp(START - timedelta(seconds=7))}
    assert holder_alive(lock, START, ttl=1) is True  # 2 x max(1 s, ttl/3) + 5 s
    lock["renewed"] = stamp(START - timedelta(seconds=8))
    assert holder_alive(lock, START, ttl=1) is False


def test_a_holder_here_is_judged_by_its_process_and_an_old_lock_by_nothing() -> None:
    here = socket.gethostname()
    assert holder_alive({"host": here, "pid": os.getpid()}, START) is True
    assert holder_alive({"holder": "carol"}, START) is None
    assert liveness({"holder": "carol"}, START) == (
        "its process is unknown (an older mignurse), renewal time unknown"
    )


@pytest.mark.parametrize(
    "lock",
    [
        {"host": "bobs-laptop", "pid": "4242"},  # a pid that is not a number
        {"pid": 4242},  # no host
        {"host": "bobs-laptop"},  # no pid
    ],
)
def test_a_lock_without_a_usable_pid_and_host_has_an_unknown_process(lock: dict[str, Any]) -> None:
    renewed = {**lock, "renewed": stamp(START)}
    assert liveness(renewed, START) == (
        "its process is unknown (an older mignurse), last renewed 0 s ago"
    )


def test_a_pid_that_is_not_a_number_on_this_machine_is_judged_by_its_renewal() -> None:
    here = socket.gethostname()
    stale = {"host": here, "pid": "1", "renewed": stamp(START - timedelta(hours=1))}
    assert holder_alive(stale, START) is False


@pytest.mark.parametrize(
    ("ago", "said"),
    [(119, "119 s"), (120, "2 min"), (7199, "119 min"), (7200, "2 h")],
)
def test_a_lock_says_how_long_ago_its_holder_renewed_it(ago: int, said: str) -> None:
    lock = {"host": "bobs-laptop", "pid": 7, "renewed": stamp(START - timedelta(seconds=ago))}
    assert liveness(lock, START).endswith(f"last renewed {said} ago")
