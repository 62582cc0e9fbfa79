"""wait-replacement read by read (mignurse/runner/steps/instance.py WaitReplacement.apply):
the pool is read every window/12 of cluster time, as the API server answers each read; the
answers here are scripted, one per read, so each test is the story an on-call engineer
would watch: when the wait says no node is needed, when it keeps waiting, what it shows
while it waits, and what it says when it gives up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.client import ApiError, ClusterError, Forbidden
from mignurse.runner.step import Cancelled, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.instance import WaitReplacement

T0 = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
POOL = "gpu-infer"
WINDOW = 60.0  # read every 5 s of cluster time


@dataclass
class Read:
    """What one read of the pool finds: its nodes (name: problem, None when serving), its
    NodeClaims (name: node name, "" while launching), the pending pods, or an error."""

    nodes: dict[str, str | None] = field(default_factory=dict)
    gpus: str = "4"  # what each node advertises in allocatable
    claims: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    error: ClusterError | None = None
    pending_error: ClusterError | None = None


def node(name: str, problem: str | None, gpus: str = "4") -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True"}
    if problem:
        ready = {"type": "Ready", "status": "False", "reason": problem}
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": POOL}},
        "spec": {"providerID": f"aws:///us-west-2a/i-{name}"},
        "status": {
            "conditions": [ready],
            "allocatable": {"nvidia.com/gpu": gpus},
            "capacity": {"nvidia.com/gpu": "4"},
        },
    }


def pending_pod(name: str) -> dict[str, Any]:
    ctr = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    return {
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [
            {"kind": "ReplicaSet", "name": "web", "controller": True}]},
        "spec": {"containers": [ctr]},
        "status": {"phase": "Pending"},
    }  # fmt: skip


class Scripted:
    """The API server, answering the wait's reads from a script: the read at cluster time t
    is script(t) (the clock moves only when the wait sleeps)."""

    def __init__(self, script: Callable[[float], Read]) -> None:
        self.script = script
        self.clock = 0.0
        self.reads: list[float] = []  # cluster seconds of each read of the pool's nodes

    def server_now(self) -> datetime:
        return T0 + timedelta(seconds=self.clock)

    def list_pages(self, resource: Any, **kw: Any) -> Iterator[tuple[list[Any], str]]:
        read = self.script(self.clock)
        if resource.plural == "nodes":
            self.reads.append(self.clock)
            assert kw["label_selector"] == f"karpenter.sh/nodepool={POOL}"
            if read.error is not None:
                raise read.error
            yield [node(n, p, read.gpus) for n, p in read.nodes.items()], "1"
        elif resource.plural == "nodeclaims":
            yield [{"metadata": {"name": c}, "status": {"nodeName": n}}
                   for c, n in read.claims.items()], "1"  # fmt: skip
        else:
            assert kw["field_selector"] == "spec.nodeName="
            if read.pending_error is not None:
                raise read.pending_error
            yield [pending_pod(p) for p in read.pending], "1"


@dataclass
class ClusterClock(StepContext):
    """A step context whose time is the scripted server's: sleeping moves its clock."""

    server: Scripted | None = None

    def time_left(self) -> float:
        assert self.server is not None
        return self.timeout - self.server.clock

    def sleep(self, seconds: float) -> None:
        self.check_cancel()
        assert self.server is not None
        self.server.clock += max(0.0, seconds)

    def sleep_cluster(self, seconds: float, longest: float) -> None:
        # as StepContext does: never past the step's deadline, at least 0.1 s
        self.sleep(min(seconds, longest, max(0.1, self.time_left())))


OLD = "ip-10-0-1-1"
BEFORE = {OLD: None, "ip-10-0-1-2": None}
CLAIMS_BEFORE = {"gpu-infer-old": OLD, "gpu-infer-two": "ip-10-0-1-2"}


def plan(forecast: str = "expected: Karpenter launches a node", **data: Any) -> StepPlan:
    """The plan kept from when the run was confirmed, as WaitReplacement.plan makes it."""
    return StepPlan(
        data={
            "selector": f"karpenter.sh/nodepool={POOL}",
            "pool": f"NodePool {POOL}",
            "karpenter": True,
            "before": sorted(BEFORE),
            "claimsBefore": sorted(CLAIMS_BEFORE),
            "replaced": OLD,
            "shape": {
                "labels": {"karpenter.sh/nodepool": POOL},
                "taints": [],
                "allocatable": {
                    "cpu": "48",
                    "memory": "384Gi",
                    "pods": "110",
                    "nvidia.com/gpu": "4",
                },
            },
            "forecast": {"comes": True, "why": forecast, "needing": []},
            "recurs": [],
            "settle": WINDOW,
            "expects": "",
            **data,
        }
    )


def wait(
    script: Callable[[float], Read], timeout: float = 120.0, **data: Any
) -> tuple[dict[str, Any] | StepFailed, Scripted, list[str]]:
    server = Scripted(script)
    logs: list[str] = []
    ctx = ClusterClock(
        client=server,  # type: ignore[arg-type]
        params={"node": OLD},
        log=logs.append,
        timeout=timeout,
        server=server,
    )
    try:
        return WaitReplacement().apply(ctx, plan(**data)), server, logs
    except StepFailed as failed:
        return failed, server, logs


def at(*steps: tuple[float, Read]) -> Callable[[float], Read]:
    """The read at cluster time t: the last step whose time has come."""

    def script(t: float) -> Read:
        return [read for since, read in steps if since <= t][-1]

    return script


def old_pool(**more: Any) -> Read:
    """The pool with the old nodes, the old one's claim deleted and gone."""
    nodes = {"ip-10-0-1-2": None, **more.pop("nodes", {})}
    claims = {"gpu-infer-two": "ip-10-0-1-2", **more.pop("claims", {})}
    return Read(nodes=nodes, claims=claims, **more)


# -- when nothing is coming -----------------------------------------------------------------------


def test_none_needed_is_said_after_two_reads_in_a_row_that_find_nothing_coming() -> None:
    # read 1 quiet; read 2 a pod pending (Karpenter has not launched yet); reads 3 and 4 quiet
    script = at((0, old_pool()), (5, old_pool(pending=["web-1"])), (10, old_pool()))
    done, server, _logs = wait(script)

    assert isinstance(done, dict) and done["replacement"] is None
    assert done["summary"] == (
        "none needed any more: no new node, no NodeClaim launching and no pending pod for "
        "NodePool gpu-infer (the evicted pods were scheduled elsewhere)"
    )
    assert server.reads == [0, 5, 10, 15]


def test_a_forecast_of_none_is_what_the_wait_ends_with() -> None:
    said = "none expected: no pod on ip-10-0-1-1 needs a new node (10 DaemonSet pod)"
    done, server, _logs = wait(at((0, old_pool())), forecast=said)
    assert isinstance(done, dict) and done["summary"] == said
    assert server.reads == [0, 5]


def test_a_pending_pod_that_cannot_be_listed_keeps_the_wait_going() -> None:
    unreadable = ApiError("the API server answered 503 to list pods: too busy")
    script = at((0, old_pool(pending_error=unreadable)), (20, old_pool()))
    done, server, _logs = wait(script)
    assert isinstance(done, dict) and done["replacement"] is None
    assert server.reads == [0, 5, 10, 15, 20, 25]


def test_pending_pods_that_cannot_be_listed_for_good_fail_the_wait() -> None:
    refused = Forbidden("pods is forbidden: User cannot list resource pods", "list", "pods")
    done, _server, _logs = wait(at((0, old_pool(pending_error=refused))))
    assert isinstance(done, StepFailed)
    assert str(done) == f"cannot list pending pods: {refused}"


def test_a_nodeclaim_launching_with_no_pod_pending_is_still_waited_for() -> None:
    # Karpenter launched a node; its pods were placed elsewhere meanwhile, but a node may
    # still join: the wait does not call it "none needed" while a NodeClaim is launching.
    script = at((0, old_pool(claims={"gpu-infer-new": ""})))
    done, server, logs = wait(script, timeout=30)
    assert isinstance(done, StepFailed)
    assert str(done) == (
        "NodeClaim(s) gpu-infer-new launched but no node joined in NodePool gpu-infer within "
        "30 s; the old node ip-10-0-1-1 was already replaced or terminated"
    )
    assert server.reads == [0, 5, 10, 15, 20, 25, 30]  # the last one at the deadline
    assert logs[0] == "waiting for a replacement in NodePool gpu-infer: launching: gpu-infer-new"


def test_a_node_group_waits_for_its_instance_without_asking_about_pods() -> None:
    # An Auto Scaling group launches whatever runs on the node: no "none needed" there.
    done, server, _logs = wait(at((0, old_pool())), timeout=20.5, karpenter=False)
    assert isinstance(done, StepFailed)
    assert str(done).startswith("no new node joined in NodePool gpu-infer within 20 s")
    assert server.reads == [0, 5, 10, 15, 20, 20.5]  # its last half second is read too


# -- what it shows while it waits, and when it gives up -------------------------------------------


def test_each_new_node_is_shown_as_it_stands_while_the_wait_goes_on() -> None:
    script = at(
        (0, old_pool(claims={"gpu-infer-new": ""})),
        (10, old_pool(nodes={"ip-10-0-9-9": "KubeletNotReady"},
                      claims={"gpu-infer-new": "ip-10-0-9-9"})),
        (20, old_pool(nodes={"ip-10-0-9-9": None}, claims={"gpu-infer-new": "ip-10-0-9-9"})),
    )  # fmt: skip
    done, _server, logs = wait(script)

    assert isinstance(done, dict) and done["replacement"] == "ip-10-0-9-9"
    prefix = "waiting for a replacement in NodePool gpu-infer: "
    assert logs[0] == prefix + "launching: gpu-infer-new"
    assert logs[2] == prefix + "ip-10-0-9-9 NotReady (KubeletNotReady)"
    assert logs[5] == prefix + "ip-10-0-9-9 serving for 5 of 60 s"
    assert logs[-1] == (
        "replacement ip-10-0-9-9 stayed Ready: served for 60 s of cluster time "
        "(12:00:20Z–12:01:20Z, 15 reads)"
    )


def test_a_node_of_a_nodeclaim_the_pool_had_before_is_not_the_replacement() -> None:
    # gpu-infer-two was launching when the run was confirmed: the node it brings was not
    # launched for the evicted pods, and is not this run's replacement.
    launching_before = {"gpu-infer-old": OLD, "gpu-infer-two": ""}
    claims = {"gpu-infer-two": "ip-10-0-1-3", "gpu-infer-new": ""}
    script = at((0, old_pool(nodes={"ip-10-0-1-3": None}, claims=claims)))
    done, _server, _logs = wait(script, timeout=30, claimsBefore=sorted(launching_before))
    assert isinstance(done, StepFailed)
    assert str(done).startswith("NodeClaim(s) gpu-infer-new launched but no node joined")


def test_a_wait_that_gave_up_tells_the_two_newest_nodes_stories_and_counts_the_rest() -> None:
    joined = {"ip-10-0-9-1": 0, "ip-10-0-9-2": 10, "ip-10-0-9-3": 20}

    def script(t: float) -> Read:
        came = {n: "KubeletNotReady" for n, since in joined.items() if since <= t}
        return old_pool(nodes=came)

    done, _server, _logs = wait(script, timeout=30)

    assert isinstance(done, StepFailed)
    assert str(done) == (
        "no replacement stayed serving for 60 s: ip-10-0-9-3: NotReady (KubeletNotReady) "
        "12:00:20Z–12:00:30Z; ip-10-0-9-2: NotReady (KubeletNotReady) 12:00:10Z–12:00:30Z; "
        "and 1 more new node(s) in NodePool gpu-infer within 30 s; the old node ip-10-0-1-1 "
        "was already replaced or terminated"
    )


def test_a_new_node_that_came_and_went_is_told_so() -> None:
    script = at(
        (0, old_pool(nodes={"ip-10-0-9-1": None}, claims={"gpu-infer-new": "ip-10-0-9-1"})),
        (10, old_pool(nodes={"ip-10-0-9-2": None}, claims={"gpu-infer-nxt": "ip-10-0-9-2"})),
    )
    done, _server, _logs = wait(script, timeout=30)

    assert isinstance(done, StepFailed)
    assert str(done).startswith(
        "no replacement stayed serving for 60 s: ip-10-0-9-2: serving 12:00:10Z–12:00:30Z; "
        "ip-10-0-9-1: serving 12:00:00Z–12:00:05Z, then gone 12:00:10Z–12:00:30Z in "
    ), str(done)


def test_the_causes_the_plan_named_are_repeated_when_the_wait_gives_up() -> None:
    recurs = [
        "the replacement may fail as other nodes of gpu-infer did: notready-loop: the node "
        "was Ready briefly, then NotReady for good (2 nodes NotReady after 20 s Ready)",
        "the replacement will fail the same way: node-repair-loop: nodes of this pool are "
        "replaced again and again (3 repairs)",
    ]
    done, _server, _logs = wait(at((0, old_pool(claims={"gpu-infer-new": ""}))), timeout=10,
                                recurs=recurs)  # fmt: skip
    assert isinstance(done, StepFailed)
    assert str(done).endswith(
        "was already replaced or terminated; as the plan said, the replacement may fail as "
        "other nodes of gpu-infer did (notready-loop)"
    )


# -- when the pool cannot be read -----------------------------------------------------------------


def test_a_pool_listing_refused_for_good_fails_the_wait_at_once() -> None:
    refused = Forbidden("nodes is forbidden: User cannot list resource nodes", "list", "nodes")
    done, server, _logs = wait(at((0, old_pool(error=refused))))
    assert isinstance(done, StepFailed)
    assert str(done) == f"cannot list the nodes of NodePool gpu-infer: {refused}"
    assert server.reads == [0]


def test_an_api_server_busy_for_a_while_only_slows_the_wait() -> None:
    busy = ApiError("the API server answered 503 to list nodes: too busy")
    script = at(
        (0, old_pool(error=busy)),
        (10, old_pool(nodes={"ip-10-0-9-9": None}, claims={"gpu-infer-new": "ip-10-0-9-9"})),
    )
    done, server, logs = wait(script)
    assert isinstance(done, dict) and done["replacement"] == "ip-10-0-9-9"
    assert server.reads[:3] == [0, 5, 10]
    assert logs[0] == f"waiting for a replacement in NodePool gpu-infer: cannot list nodes: {busy}"


def test_an_api_server_busy_past_the_deadline_ends_the_wait_there() -> None:
    busy = ApiError("the API server answered 503 to list nodes: too busy")
    done, server, _logs = wait(at((0, old_pool(error=busy))), timeout=30.5)
    assert isinstance(done, StepFailed)
    assert str(done) == f"cannot list the nodes of NodePool gpu-infer: {busy}"
    assert server.reads[-2:] == [30, 30.5]  # half a second left is still read: once more


def test_a_replacement_counts_only_once_its_gpus_are_advertised_when_the_pool_shows_them() -> None:
    new = {"nodes": {"ip-10-0-9-9": None}, "claims": {"gpu-infer-new": "ip-10-0-9-9"}}
    script = at((0, old_pool(gpus="0", **new)), (30, old_pool(**new)))
    done, _server, logs = wait(script, expects="allocatable")

    assert isinstance(done, dict) and done["replacement"] == "ip-10-0-9-9"
    assert logs[0] == (
        "waiting for a replacement in NodePool gpu-infer: ip-10-0-9-9 GPUs in capacity but "
        "none allocatable (device plugin not serving)"
    )
    assert logs[-1].startswith(
        "replacement ip-10-0-9-9 stayed Ready with its GPUs advertised: served for 60 s of "
        "cluster time (12:00:30Z–12:01:30Z"
    ), logs[-1]


def test_a_wait_cancelled_before_it_began_reads_nothing() -> None:
    server = Scripted(at((0, old_pool())))
    ctx = ClusterClock(client=server, params={"node": OLD}, server=server)  # type: ignore[arg-type]
    ctx.cancel.set()  # Ctrl-C as the step started
    with pytest.raises(Cancelled):
        WaitReplacement().apply(ctx, plan())
    assert server.reads == []
