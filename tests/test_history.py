"""The history store: what it keeps after the cluster forgets, and how it survives abuse."""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mignurse.cluster.client import ContextInfo
from mignurse.cluster.history import (
    HistoryReadOnly,
    HistoryRecorder,
    HistorySchemaError,
    HistoryStore,
    WriterBusy,
    default_state_dir,
)
from mignurse.model import Event, Node, NodeClaim, NodePool
from mignurse.paths import history_file

T0 = datetime(2026, 11, 29, 3, 0, 0, tzinfo=UTC)
CTX = "ml-prod-usw2"
PROVIDER = "aws:///us-west-2a/i-0abc1234def567890"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(
    type_: str, status: str, reason: str, since: datetime, message: str = ""
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": iso(since),
        "lastHeartbeatTime": iso(since),
    }


def node(
    name: str = "ip-10-0-57-99.us-west-2.compute.internal",
    *,
    uid: str = "node-uid-1",
    pool: str = "gpu-inference",
    provider: str = PROVIDER,
    created: datetime = T0,
    conditions: list[dict[str, Any]] | None = None,
    deleting: datetime | None = None,
    rv: str = "1",
) -> Node:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "resourceVersion": rv,
        "creationTimestamp": iso(created),
        "labels": {
            "karpenter.sh/nodepool": pool,
            "node.kubernetes.io/instance-type": "g6e.12xlarge",
            "topology.kubernetes.io/zone": "us-west-2a",
        },
    }
    if deleting:
        meta["deletionTimestamp"] = iso(deleting)
    return Node.from_api(
        {
            "metadata": meta,
            "spec": {"providerID": provider},
            "status": {"conditions": conditions or []},
        }
    )


def claim(
    name: str = "gpu-inference-gk9zr",
    *,
    uid: str = "claim-uid-1",
    pool: str = "gpu-inference",
    provider: str = PROVIDER,
    node_name: str = "",
    created: datetime = T0,
    conditions: list[dict[str, Any]] | None = None,
    deleting: datetime | None = None,
    termination: datetime | None = None,
) -> NodeClaim:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "creationTimestamp": iso(created),
        "labels": {
            "karpenter.sh/nodepool": pool,
            "node.kubernetes.io/instance-type": "g6e.12xlarge",
        },
        "annotations": {},
        "finalizers": ["karpenter.sh/termination"],
    }
    if deleting:
        meta["deletionTimestamp"] = iso(deleting)
    if termination:
        meta["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] = iso(termination)
    return NodeClaim.from_api(
        {
            "metadata": meta,
            "spec": {"resources": {"requests": {"nvidia.com/gpu": "4"}}},
            "status": {
                "providerID": provider,
                "nodeName": node_name,
                "imageID": "ami-0c2d1a7f6e5b4a391",
                "conditions": conditions or [],
            },
        }
    )


def event(
    uid: str,
    *,
    count: int = 1,
    last: datetime = T0,
    first: datetime = T0,
    involved: str = "ip-10-0-57-99.us-west-2.compute.internal",
    reason: str = "AcceleratedHardwareReady",
    message: str = "Status condition transitioned, Type: AcceleratedHardwareReady",
) -> Event:
    return Event.from_api(
        {
            "metadata": {"name": f"{involved}.{uid[:8]}", "namespace": "default", "uid": uid},
            "involvedObject": {"kind": "Node", "name": involved},
            "reason": reason,
            "message": message,
            "type": "Normal",
            "source": {"component": "karpenter"},
            "firstTimestamp": iso(first),
            "lastTimestamp": iso(last),
            "count": count,
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = HistoryStore(tmp_path / "state" / "history.sqlite3")
    yield s
    s.close()


READY = cond("Ready", "True", "KubeletReady", at(1))
GPU_OK = cond("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", at(1))
GPU_BAD = cond(
    "AcceleratedHardwareReady",
    "False",
    "DCGMError",
    at(2),
    "failed to initialize DCGM: libdcgm.so not Found",
)


def test_a_repaired_nodeclaim_keeps_its_fingerprint_after_it_vanishes(
    store: HistoryStore, tmp_path: Path
) -> None:
    launched = [cond("Launched", "True", "Launched", at(0.5))]
    store.record(CTX, "nodeclaims", "ADDED", [claim(conditions=launched)], at(0.5))
    store.record(CTX, "nodes", "ADDED", [node(conditions=[READY, GPU_OK])], at(1))
    store.record(CTX, "nodes", "MODIFIED", [node(conditions=[READY, GPU_BAD])], at(2))
    # Karpenter repair, 10 min later: annotation = now, then delete (docs/repair.md).
    repaired = claim(
        node_name="ip-10-0-57-99.us-west-2.compute.internal",
        conditions=launched,
        termination=at(12),
        deleting=at(12),
    )
    store.record(CTX, "nodeclaims", "MODIFIED", [repaired], at(12))
    # While it drains the kubelet goes away: Ready=Unknown must not bury the cause.
    gone = [cond("Ready", "Unknown", "NodeStatusUnknown", at(13)), GPU_BAD]
    store.record(CTX, "nodes", "MODIFIED", [node(conditions=gone, deleting=at(12))], at(13))
    store.record(CTX, "nodes", "DELETED", [node(conditions=gone, deleting=at(12))], at(14))
    store.record(CTX, "nodeclaims", "DELETED", [repaired], at(14.5))
    store.close()

    reopened = HistoryStore(tmp_path / "state" / "history.sqlite3", readonly=True)
    try:
        (lc,) = reopened.lifecycles(CTX, kind="NodeClaim")
        assert lc.termination_timestamp == at(12)
        assert lc.deleting_since == at(12)
        assert lc.deleted_at == at(14.5)
        assert lc.deleted_seen == "watch"
        assert lc.last_unhealthy == ("AcceleratedHardwareReady", "False", "DCGMError")
        assert lc.disruption_reason is None and not lc.drifted
        assert lc.node_name == "ip-10-0-57-99.us-west-2.compute.internal"
        assert lc.image_id == "ami-0c2d1a7f6e5b4a391"
        assert lc.instance_id == "i-0abc1234def567890"
        assert lc.lifetime == timedelta(minutes=12)
        (n,) = reopened.lifecycles(CTX, kind="Node", pool="gpu-inference")
        assert n.nodeclaim == "gpu-inference-gk9zr"
        assert n.first_ready == at(1)
        assert n.last_unhealthy == ("AcceleratedHardwareReady", "False", "DCGMError")
        assert n.deleted_at == at(14) and n.deleted_seen == "watch"
        assert n.created == T0 and n.created.tzinfo is not None
        assert reopened.lifecycles(CTX, kind="Node", pool="gpu-batch") == []
    finally:
        reopened.close()


def test_a_node_recorded_before_its_claim_is_still_linked(store: HistoryStore) -> None:
    store.record(CTX, "nodes", "ADDED", [node(conditions=[READY, GPU_BAD])], at(2))
    store.record(CTX, "nodeclaims", "ADDED", [claim()], at(3))
    (c,) = store.lifecycles(CTX, kind="NodeClaim")
    (n,) = store.lifecycles(CTX, kind="Node")
    assert n.nodeclaim == c.name
    assert c.node_name == n.name
    assert c.last_unhealthy == ("AcceleratedHardwareReady", "False", "DCGMError")


def test_consolidation_and_drift_are_told_apart_from_repair(store: HistoryStore) -> None:
    conditions = [
        cond("Drifted", "True", "NodePoolDrifted", at(5)),
        cond("DisruptionReason", "True", "Underutilized", at(6)),
    ]
    store.record(CTX, "nodeclaims", "LIST", [claim(conditions=conditions)], at(6))
    # Karpenter drops DisruptionReason as it deletes; what explained the end stays.
    store.record(CTX, "nodeclaims", "DELETED", [claim(deleting=at(7))], at(8))
    (c,) = store.lifecycles(CTX, kind="NodeClaim")
    assert c.disruption_reason == "Underutilized"
    assert c.drifted
    assert c.termination_timestamp is None


def test_first_ready_and_transitions_only_on_change(store: HistoryStore) -> None:
    not_ready = cond("Ready", "False", "KubeletNotReady", at(0.2), "container runtime is down")
    store.record(CTX, "nodes", "ADDED", [node(conditions=[not_ready])], at(0.2))
    assert store.lifecycles(CTX)[0].first_ready is None
    store.record(CTX, "nodes", "MODIFIED", [node(conditions=[READY, GPU_OK], rv="2")], at(1))
    assert store.lifecycles(CTX)[0].first_ready == at(1)

    assert store._write is not None
    before = store._write.total_changes
    heartbeat = dict(READY, lastHeartbeatTime=iso(at(2)))
    pressure = cond("MemoryPressure", "True", "KubeletHasInsufficientMemory", at(2))
    for i in range(5):  # heartbeats and an untracked condition flip: nothing to write
        conditions = [heartbeat, GPU_OK] + ([pressure] if i % 2 else [])
        store.record(CTX, "nodes", "MODIFIED", [node(conditions=conditions, rv=f"{3 + i}")], at(2))
    assert store._write.total_changes == before

    flapped = cond("Ready", "False", "KubeletNotReady", at(3), "PLEG is not healthy")
    store.record(CTX, "nodes", "MODIFIED", [node(conditions=[flapped, GPU_OK])], at(3))
    recovered = cond("Ready", "True", "KubeletReady", at(4))
    store.record(CTX, "nodes", "MODIFIED", [node(conditions=[recovered, GPU_OK])], at(4))
    flips = [(t.condition, t.status, t.reason) for t in store.transitions(CTX, kind="Node")]
    assert flips == [
        ("Ready", "False", "KubeletNotReady"),
        ("Ready", "True", "KubeletReady"),
        ("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"),
        ("Ready", "False", "KubeletNotReady"),
        ("Ready", "True", "KubeletReady"),
    ]
    last = store.transitions(CTX, kind="Node", name=node().name, since=at(3))
    # Times are the condition's own lastTransitionTime; observed_at says when we saw it.
    assert [(t.time, t.observed_at) for t in last] == [(at(3), at(3)), (at(4), at(4))]
    assert last[0].message == "PLEG is not healthy"
    assert store.lifecycles(CTX)[0].first_ready == at(1)  # set once, never moved


def test_every_nodeclaim_and_nodepool_condition_is_tracked(store: HistoryStore) -> None:
    conditions = [
        cond("Launched", "True", "Launched", at(0)),
        cond("Registered", "Unknown", "AwaitingReconciliation", at(0)),
        cond("ConsistentStateFound", "True", "ConsistentStateFound", at(0)),
    ]
    store.record(CTX, "nodeclaims", "ADDED", [claim(conditions=conditions)], at(0))
    assert len(store.transitions(CTX, kind="NodeClaim")) == 3
    pool = NodePool.from_api(
        {
            "metadata": {"name": "gpu-inference", "uid": "np-1"},
            "status": {
                "conditions": [cond("NodeRegistrationHealthy", "False", "Unhealthy", at(1))]
            },
        }
    )
    store.record(CTX, "nodepools", "LIST", [pool], at(1))
    (flip,) = store.transitions(CTX, kind="NodePool")
    assert (flip.condition, flip.status) == ("NodeRegistrationHealthy", "False")
    assert store.lifecycles(CTX, kind="NodePool")[0].pool == "gpu-inference"


@given(
    st.lists(
        st.tuples(st.sampled_from(["True", "False", "Unknown"]), st.sampled_from(["A", "B"])),
        min_size=1,
        max_size=12,
    )
)
def test_transitions_count_exactly_the_changes(states: list[tuple[str, str]]) -> None:
    with HistoryStore(Path(f"/tmp/mignurse-history-prop-{uuid.uuid4()}.sqlite3")) as s:
        try:
            for i, (status, reason) in enumerate(states):
                c = cond("AcceleratedHardwareReady", status, reason, at(i))
                s.record(CTX, "nodes", "MODIFIED", [node(conditions=[c])], at(i))
            expected = 1 + sum(1 for a, b in itertools.pairwise(states) if a != b)
            assert len(s.transitions(CTX, kind="Node")) == expected
        finally:
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(str(s.path) + suffix).unlink(missing_ok=True)


def test_a_relist_marks_missing_objects_deleted(store: HistoryStore) -> None:
    nodes = [node(f"n{i}", uid=f"u{i}", provider=f"aws:///us-west-2a/i-{i:017x}") for i in range(3)]
    store.record(CTX, "nodes", "LIST", nodes, at(0))
    store.record(CTX, "nodes", "LIST", [nodes[0], nodes[2]], at(30))
    by_name = {lc.name: lc for lc in store.lifecycles(CTX)}
    assert by_name["n1"].deleted_at == at(30)
    assert by_name["n1"].deleted_seen == "relist"
    assert by_name["n0"].deleted_at is None and by_name["n2"].deleted_at is None
    assert {lc.name for lc in store.lifecycles(CTX, since=at(31))} == {"n0", "n2"}
    assert {lc.name for lc in store.lifecycles(CTX, since=at(30))} == {"n0", "n1", "n2"}
    # Another context's relist touches nothing here.
    store.record("other", "nodes", "LIST", [], at(40))
    assert store.lifecycles(CTX, since=at(31)) != []


def test_events_are_deduplicated_by_uid_with_the_latest_count(store: HistoryStore) -> None:
    store.record(CTX, "events", "ADDED", [event("e-1", count=1, last=at(1))], at(1))
    store.record(CTX, "events", "MODIFIED", [event("e-1", count=5, last=at(9))], at(9))
    # A relist racing the watch brings an older copy: the newer one stays.
    store.record(CTX, "events", "LIST", [event("e-1", count=3, last=at(5))], at(10))
    store.record(CTX, "events", "ADDED", [event("e-2", last=at(11), involved="other-node")], at(11))
    # The API server expires them; the store does not forget.
    store.record(CTX, "events", "LIST", [], at(70))
    store.record(
        CTX, "events", "DELETED", [event("e-2", last=at(11), involved="other-node")], at(71)
    )

    (first, second) = store.events(CTX)
    assert (first.uid, first.count, first.last_seen, first.first_seen) == ("e-1", 5, at(9), T0)
    assert second.involved_name == "other-node"
    assert [e.uid for e in store.events(CTX, since=at(10))] == ["e-2"]
    assert [e.uid for e in store.events(CTX, involved_kind="Node", involved_name="other-node")] == [
        "e-2"
    ]
    assert store.events("another-context") == []
    assert store.stats()["events"] == 2


def test_retention_by_age(tmp_path: Path) -> None:
    with HistoryStore(tmp_path / "h.sqlite3", max_age=timedelta(days=1)) as s:
        old = node("old", uid="old", provider="aws:///a/i-1", conditions=[READY])
        s.record(CTX, "nodes", "ADDED", [old], at(0))
        s.record(CTX, "nodes", "DELETED", [old], at(10))
        alive = node("alive", uid="alive", provider="aws:///a/i-2", conditions=[READY])
        s.record(CTX, "nodes", "ADDED", [alive], at(0))
        s.record(
            CTX, "events", "LIST", [event("old", last=at(5)), event("new", last=at(3000))], at(3000)
        )
        removed = s.prune(at(60 * 24 + 30))  # a day and a half hour later
        # the deleted node, both Ready transitions (1 min after T0), the old event
        assert removed == 4
        assert [lc.name for lc in s.lifecycles(CTX)] == ["alive"]
        assert [e.uid for e in s.events(CTX)] == ["new"]
        assert s.transitions(CTX, kind="Node") == []
        assert s.prune(at(60 * 24 + 30)) == 0


def test_retention_by_size_drops_the_oldest_and_shrinks_the_file(tmp_path: Path) -> None:
    limit = 1 * 2**20
    with HistoryStore(tmp_path / "h.sqlite3", max_bytes=limit) as s:
        filler = "x" * 2000
        for batch in range(5):
            events = [
                event(f"e-{batch}-{i:04d}", last=at(batch * 1000 + i), message=filler)
                for i in range(600)
            ]
            s.record(CTX, "events", "LIST", events, at(batch * 1000 + 600))
        assert s.stats()["file_bytes"] > 4 * limit
        removed = s.prune(at(5000))
        stats = s.stats()
        assert removed > 0
        assert stats["file_bytes"] <= limit
        kept = s.events(CTX)
        assert kept and kept[-1].uid == "e-4-0599"  # the newest stay
        assert len(kept) + removed == 3000
        assert min(e.last_seen for e in kept if e.last_seen) > at(0)


def test_a_second_writer_falls_back_to_read_only(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    writer = HistoryStore(path)
    try:
        writer.record(CTX, "nodes", "ADDED", [node(conditions=[READY])], at(1))
        with pytest.raises(WriterBusy, match=f"process {os.getpid()}"):
            HistoryStore(path)
        second = HistoryStore.open_writer(path)
        try:
            assert second.readonly
            assert "already recording" in second.readonly_reason
            with pytest.raises(HistoryReadOnly):
                second.record(CTX, "nodes", "ADDED", [node("x", uid="x")], at(2))
            with pytest.raises(HistoryReadOnly):
                second.prune(at(2))
            recorder = HistoryRecorder(second, CTX).start()
            recorder.listener("nodes", "ADDED", [node("x", uid="x")])
            recorder.stop()
            assert recorder.written == 0 and not recorder.active
            # It still reads everything the writer commits, as it commits it.
            writer.record(
                CTX, "nodes", "ADDED", [node("y", uid="y", provider="aws:///a/i-9")], at(3)
            )
            assert [lc.name for lc in second.lifecycles(CTX)] == [node().name, "y"]
        finally:
            second.close()
    finally:
        writer.close()
    third = HistoryStore.open_writer(path)
    assert not third.readonly
    third.close()


def test_a_reader_may_start_before_the_first_writer(tmp_path: Path) -> None:
    path = tmp_path / "later" / "h.sqlite3"
    reader = HistoryStore(path, readonly=True)
    assert reader.lifecycles(CTX) == [] and reader.events(CTX) == []
    assert not path.parent.exists()  # reading creates nothing
    with HistoryStore(path) as writer:
        writer.record(CTX, "nodes", "ADDED", [node()], at(1))
        assert len(reader.lifecycles(CTX)) == 1
    reader.close()


def test_state_dir_follows_xdg_and_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "mignurse"
    assert not (tmp_path / "xdg").exists()
    monkeypatch.setenv("XDG_STATE_HOME", "relative/path")  # invalid per the spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local" / "state" / "mignurse"
    path = history_file(ContextInfo("ctx", "cluster", "https://127.0.0.1:6443", "me"))
    with HistoryStore(path):
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_newer_schema_or_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    HistoryStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(HistorySchemaError, match="newer than this mignurse"):
        HistoryStore(path)
    with pytest.raises(HistorySchemaError, match="newer"):
        HistoryStore(path, readonly=True)
    foreign = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(HistorySchemaError, match="not a mignurse history"):
        HistoryStore(foreign)


_CHILD = """
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from mignurse.cluster.history import HistoryStore
from mignurse.cluster.client import ContextInfo
from mignurse.model import Event

store = HistoryStore(Path(sys.argv[1]))
t0 = datetime(2026, 11, 29, tzinfo=UTC)
batch = 0
while True:
    events = [
        Event("default", f"e{batch}-{i}", f"uid-{batch}-{i}", "Node", f"n{i % 50}", "", "Reason",
              "x" * 200, "Normal", "karpenter", "", t0, t0 + timedelta(seconds=batch), 1)
        for i in range(2000)
    ]
    store.record("ctx", "events", "ADDED", events, t0 + timedelta(seconds=batch))
    print(batch, flush=True)
    batch += 1
"""


def test_kill_9_mid_write_leaves_a_usable_history(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert child.stdout is not None
        for _ in range(3):
            assert child.stdout.readline(), "the writer child died early"
        # The child is the writer: this process may only read.
        reader = HistoryStore.open_writer(path)
        assert reader.readonly and str(child.pid) in reader.readonly_reason
        reader.close()
        time.sleep(0.013)  # land somewhere inside a 2,000-row transaction
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with HistoryStore(path) as store:  # the lock died with the process
        assert store._write is not None
        assert store._write.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = store.stats()["events"]
        assert count >= 3 * 2000
        assert count % 2000 == 0  # whole batches or nothing
        store.record(CTX, "events", "ADDED", [event("after-crash")], at(1))
        assert store.events(CTX)[0].uid == "after-crash"


class StuckStore(HistoryStore):
    """A writer stuck on a dead disk until the test lets it go."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.stuck = threading.Event()  # set once the writer is inside a write
        self.release = threading.Event()

    def record_batch(self, context: str, items: Any) -> None:
        self.stuck.set()
        self.release.wait(60)
        super().record_batch(context, items)


def test_the_recorder_never_blocks_the_watch_threads(tmp_path: Path) -> None:
    store = StuckStore(tmp_path / "h.sqlite3")
    recorder = HistoryRecorder(store, CTX, clock=lambda: at(1), max_queue=100).start()
    try:
        recorder.listener("events", "ADDED", [event("e-first")])
        assert store.stuck.wait(30)
        # A watch thread hands over 1,000 changes while the writer cannot write at all: a
        # listener that waited on the writer would never finish before the release.
        watch = threading.Thread(
            target=lambda: [
                recorder.listener("events", "ADDED", [event(f"e-{i}")]) for i in range(1000)
            ]
        )
        watch.start()
        watch.join(60)
        assert not watch.is_alive()
        assert recorder.dropped >= 800  # drop-oldest kept the newest
        store.release.set()
        assert recorder.flush(timeout=10)
        kept = {e.uid for e in store.events(CTX)}
        assert "e-999" in kept and len(kept) <= 200
    finally:
        store.release.set()
        recorder.stop()
        store.close()


def test_the_recorder_writes_in_order_and_survives_a_bad_change(store: HistoryStore) -> None:
    times = iter([at(1), at(2), at(3), at(4)])
    recorder = HistoryRecorder(store, CTX, clock=lambda: next(times))
    state_listener = recorder.listener
    state_listener("nodes", "LIST", [node(conditions=[READY])])  # queued before start
    recorder.start()
    state_listener("nodes", "BOGUS", [node()])
    state_listener("nodes", "MODIFIED", [node(conditions=[READY, GPU_BAD])])
    state_listener("nodes", "DELETED", [node(conditions=[READY, GPU_BAD])])
    assert recorder.flush(timeout=10)
    recorder.stop()
    assert recorder.written == 3
    assert len(recorder.errors) == 1 and "BOGUS" in recorder.errors[0]
    (lc,) = store.lifecycles(CTX)
    assert lc.first_seen == at(1) and lc.deleted_at == at(4)
    assert lc.last_unhealthy == ("AcceleratedHardwareReady", "False", "DCGMError")


def test_a_large_cluster_is_recorded_whole(store: HistoryStore) -> None:
    # Speed is measured in benchmarks/bench_history.py, not here.
    nodes = [
        node(f"ip-10-0-{i // 250}-{i % 250}", uid=f"n-{i}", provider=f"aws:///a/i-{i:017x}",
             conditions=[READY, GPU_OK])
        for i in range(5000)
    ]  # fmt: skip
    events = [
        Event("default", f"e{i}", f"uid-{i}", "Node", nodes[i % 5000].name, "", "Reason",
              "Status condition transitioned", "Normal", "karpenter", "", at(i % 60),
              at(i % 60), 1)
        for i in range(100_000)
    ]  # fmt: skip
    store.record(CTX, "nodes", "LIST", nodes, at(60))
    store.record(CTX, "events", "LIST", events, at(60))
    assert len(store.lifecycles(CTX, since=at(-360))) == 5000
    assert len(store.events(CTX, involved_kind="Node", involved_name=nodes[7].name)) == 20


def test_run_recorder_against_the_simulator(tmp_path: Path) -> None:
    import mignurse.sim as sim_module
    from mignurse.cluster.client import ClusterClient
    from mignurse.cluster.history import run_recorder

    sim = sim_module.SimCluster(sim_module.load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kc")))
        store = HistoryStore(tmp_path / "h.sqlite3")
        stop = threading.Event()
        progress: list[str] = []
        thread = threading.Thread(
            target=run_recorder,
            args=(client, store),
            kwargs={
                "context": "sim",
                "karpenter": True,
                "stop": stop,
                "on_progress": progress.append,
                "progress_every": 0.2,
            },
        )
        thread.start()
        try:
            deadline = time.monotonic() + 15
            while not any(p.startswith("listed") for p in progress):
                assert time.monotonic() < deadline, progress
                time.sleep(0.05)
            for _ in range(20):  # 20 sim minutes: at least one repair cycle
                sim.advance(60)
                time.sleep(0.05)
            time.sleep(0.5)
        finally:
            stop.set()
            thread.join(timeout=15)
        assert not thread.is_alive()
        assert progress[-1].startswith("stopped; recorded")
        repaired = [
            lc
            for lc in store.lifecycles("sim", kind="NodeClaim", pool="gpu-inference")
            if lc.deleted_at is not None
        ]
        assert repaired, progress
        for lc in repaired:
            assert lc.termination_timestamp is not None
            assert lc.termination_timestamp == lc.deleting_since
            assert lc.last_unhealthy == ("AcceleratedHardwareReady", "False", "DCGMError")
            assert lc.disruption_reason is None
            assert lc.lifetime is not None and lc.lifetime < timedelta(minutes=20)
        assert store.events("sim", involved_kind="Node")
        store.close()
    finally:
        sim.stop()
