"""The diagnosis across clusters (`Refresher` over a `FleetSource`): each cluster is judged
when it is due (listed more since, or judged `DIAGNOSE_SECONDS` ago) and only then; every
cluster's latest judgement is merged and sent as each one ends; a cluster whose input is slow
or cannot be read never holds back the others' findings, ranks and radar."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.model import Condition, Node
from mignurse.session import ALL_LISTED, FIRST_PAGE_LISTED, FleetSource, Member, qualified
from mignurse.tui import refresh
from mignurse.tui.refresh import DiagnosisUpdate, Refresher

WAIT = 60.0  # seconds a test waits for another thread before it fails (never a speed)
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
POOL = "gpu-training"


def node(name: str, *conditions: Condition) -> Node:
    return Node(
        name=name,
        uid=f"uid-{name}",
        created=NOW - timedelta(days=3),
        pool=POOL,
        pool_kind="nodepool",
        instance_type="p5.48xlarge",
        labels={"karpenter.sh/nodepool": POOL, "nvidia.com/gpu.present": "true"},
        conditions=conditions
        or (Condition("Ready", "True", "KubeletReady", "", NOW - timedelta(days=2)),),
        gpu_capacity={"nvidia.com/gpu": 8},
        gpu_allocatable={"nvidia.com/gpu": 8},
    )


def not_ready_node(name: str) -> Node:
    since = NOW - timedelta(minutes=40)
    return node(name, Condition("Ready", "False", "KubeletNotReady", "PLEG", since))


def cluster(nodes: list[Node]) -> DiagnosisInput:
    return DiagnosisInput(
        snapshot=Snapshot(nodes={n.name: n for n in nodes}, karpenter=True, taken_at=NOW),
        now=NOW,
        history=History(),
        karpenter=KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true"),
    )


class Part:
    """One cluster as the refresher reads it: its stage, its clock and its input."""

    read_only_reason = ""

    def __init__(self, inp: DiagnosisInput, *, stage: int = ALL_LISTED, lacks: str = "") -> None:
        self.inp, self.stage, self.lacks = inp, stage, lacks
        self.reads = 0
        self.gate: threading.Event | None = None  # set: the read waits for it
        self.reading = threading.Event()
        self.fails: Exception | None = None
        self.notices: list[str] = []

    def judge_stage(self) -> int:
        return self.stage

    def now(self) -> Any:
        return NOW

    def diagnosis_input(self) -> tuple[DiagnosisInput, str]:
        self.reads += 1
        self.reading.set()
        if self.gate is not None:
            assert self.gate.wait(WAIT), "the test never let this read end"
        if self.fails is not None:
            raise self.fails
        return self.inp, self.lacks


def fleet_of(**parts: Part) -> FleetSource:
    return FleetSource([Member(SimpleNamespace(context=c), source=p) for c, p in parts.items()])


def judged_nodes(update: DiagnosisUpdate) -> set[str]:
    return {n for f in update.diagnosis.findings for n in f.nodes}


@pytest.fixture
def two() -> tuple[Part, Part]:
    east = Part(cluster([not_ready_node("gpu-a"), node("gpu-b")]))
    west = Part(cluster([node("gpu-c"), not_ready_node("gpu-d")]))
    return east, west


def test_every_clusters_findings_and_pools_are_merged_under_their_contexts(
    two: tuple[Part, Part],
) -> None:
    east, west = two
    refresher = Refresher(fleet_of(east=east, west=west))
    sent: list[DiagnosisUpdate] = []
    assert refresher.diagnosis_due()
    refresher.diagnose(sent.append)
    assert [u.rules_done < u.rules for u in sent] == [True, False]  # one cluster, then both
    assert sent[-1].whole
    nodes = judged_nodes(sent[-1])
    assert {qualified("east", "gpu-a"), qualified("west", "gpu-d")} <= nodes
    assert not {"gpu-a", "gpu-d"} & nodes  # never a bare name across clusters
    assert {r.pool.split("/")[0] for r in refresher.fleet_base} == {"east", "west"}
    assert refresher.whole is sent[-1].diagnosis


@pytest.mark.parametrize("uptime", [2.0, 86400.0], ids=["booted-seconds-ago", "up-a-day"])
def test_a_cluster_is_judged_again_only_when_it_listed_more_or_its_time_came(
    two: tuple[Part, Part], monkeypatch: pytest.MonkeyPatch, uptime: float
) -> None:
    # the monotonic clock counts from the machine's boot: a fresh CI machine's is small
    real, started = time.monotonic, time.monotonic()
    monkeypatch.setattr(refresh.time, "monotonic", lambda: uptime + real() - started)
    east, west = two
    east.stage = FIRST_PAGE_LISTED
    refresher = Refresher(fleet_of(east=east, west=west))
    sent: list[DiagnosisUpdate] = []
    refresher.diagnose(sent.append)
    assert (east.reads, west.reads) == (1, 1)
    assert not refresher.diagnosis_due()  # nothing grew, and it was judged just now
    east.stage = ALL_LISTED
    assert refresher.diagnosis_due()
    refresher.diagnose(sent.append)
    assert (east.reads, west.reads) == (2, 1)  # only the cluster that listed more
    # west's findings are still in what was sent: its last judgement, kept
    assert qualified("west", "gpu-d") in judged_nodes(sent[-1])
    monkeypatch.setattr(refresh, "DIAGNOSE_SECONDS", 0.0)  # every cluster's time has come
    refresher.diagnose(sent.append)
    assert (east.reads, west.reads) == (3, 2)
    refresher.diagnose_soon()  # (the app asks after an action)
    monkeypatch.setattr(refresh, "DIAGNOSE_SECONDS", 3600.0)
    assert refresher.diagnosis_due()


def test_a_cluster_whose_input_is_slow_never_holds_the_others_findings_back(
    two: tuple[Part, Part],
) -> None:
    east, west = two
    east.gate = threading.Event()
    refresher = Refresher(fleet_of(east=east, west=west))
    sent: list[DiagnosisUpdate] = []
    arrived = threading.Event()

    def send(update: DiagnosisUpdate) -> None:
        sent.append(update)
        arrived.set()

    worker = threading.Thread(target=refresher.diagnose, args=(send,), daemon=True)
    worker.start()
    try:
        assert arrived.wait(WAIT), "west's findings waited for east's input"
        assert east.reading.is_set() and not east.gate.is_set()
        first = sent[0]
        assert qualified("west", "gpu-d") in judged_nodes(first)
        assert not first.whole and "east: being judged" in first.lacks
        assert {r.pool.split("/")[0] for r in refresher.fleet_base} == {"west"}
        # not what the app takes as every cluster's diagnosis while east is still judged
        assert refresher.whole is None
    finally:
        east.gate.set()
        worker.join(WAIT)
    assert not worker.is_alive()
    assert sent[-1].whole and qualified("east", "gpu-a") in judged_nodes(sent[-1])
    assert refresher.whole is sent[-1].diagnosis


def test_a_cluster_whose_input_cannot_be_read_keeps_its_last_judgement_and_is_named(
    two: tuple[Part, Part], monkeypatch: pytest.MonkeyPatch
) -> None:
    east, west = two
    refresher = Refresher(fleet_of(east=east, west=west))
    sent: list[DiagnosisUpdate] = []
    refresher.diagnose(sent.append)
    east.fails = ConnectionError("the API server went away")
    monkeypatch.setattr(refresh, "DIAGNOSE_SECONDS", 0.0)
    refresher.diagnose(sent.append)
    last = sent[-1]
    assert not last.whole
    assert "east: not judged: ConnectionError: the API server went away" in last.lacks
    assert {qualified("east", "gpu-a"), qualified("west", "gpu-d")} <= judged_nodes(last)
    assert refresher.whole is last.diagnosis  # a failed input holds the others back no more
    east.fails = None
    refresher.diagnose(sent.append)
    assert sent[-1].whole


def test_more_clusters_than_readers_are_all_judged_and_none_waits_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refresh, "INPUT_READERS", 2)
    many = {f"c{i}": Part(cluster([not_ready_node(f"gpu-{i}")])) for i in range(7)}
    refresher = Refresher(fleet_of(**many))
    sent: list[DiagnosisUpdate] = []
    refresher.diagnose(sent.append)
    assert len(sent) == 7 and sent[-1].whole
    assert judged_nodes(sent[-1]) >= {qualified(f"c{i}", f"gpu-{i}") for i in range(7)}


def test_a_judging_that_raises_leaves_no_reader_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refresh, "INPUT_READERS", 1)
    many = {f"c{i}": Part(cluster([node(f"gpu-{i}")])) for i in range(4)}
    refresher = Refresher(fleet_of(**many))

    def broken(update: DiagnosisUpdate) -> None:
        raise RuntimeError("the app went away")

    def judging() -> None:
        with pytest.raises(RuntimeError):
            refresher.diagnose(broken)

    worker = threading.Thread(target=judging)
    worker.start()
    worker.join(WAIT)
    assert not worker.is_alive(), "a reader was left waiting for a judging that ended"
    assert sum(p.reads for p in many.values()) < 4  # the readers waiting read nothing
