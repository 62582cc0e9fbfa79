"""Pieces the repair and instance step tests share: a step context whose waits move the
simulator's clock, the engine's phase order, a client that loses answers, moto's server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mignurse.cluster.client import ApiError, ClusterClient
from mignurse.runner.step import Action, StepContext, StepPlan
from mignurse.sim import SimCluster


@dataclass
class SimContext(StepContext):
    """ctx.sleep() runs the simulator's controllers forward instead of waiting: a rollout
    or a replacement that takes minutes of cluster time takes milliseconds of test time."""

    sim: SimCluster | None = None

    def __post_init__(self) -> None:
        assert self.sim is not None
        self._sim_started = self.sim.now()

    def time_left(self) -> float:
        """The step's budget on the simulator's clock, which its waits move."""
        assert self.sim is not None
        return self.timeout - (self.sim.now() - self._sim_started).total_seconds()

    def sleep(self, seconds: float) -> None:
        self.check_cancel()
        assert self.sim is not None
        self.sim.advance(max(0.0, seconds))
        super().sleep(0.002)

    def sleep_cluster(self, seconds: float, longest: float) -> None:
        self.sleep(min(seconds, longest))  # the simulator's clock is the only one here


def sim_ctx(sim: SimCluster, client: Any, node: str = "", **kw: Any) -> SimContext:
    params = {"node": node, **kw.pop("params", {})} if node else dict(kw.pop("params", {}))
    return SimContext(
        client=client, params=params, run_id=kw.pop("run_id", "run-1"), holder="alice@laptop",
        sim=sim, **kw,
    )  # fmt: skip


def run_phases(step: Action, ctx: StepContext) -> tuple[StepPlan, dict[str, Any]]:
    """check → plan → apply → verify, as the engine calls them; the plan goes through JSON
    (the run state) between plan and apply, as it does for --resume."""
    refused = step.check(ctx)
    assert refused is None, refused
    plan = step.plan(ctx)
    stored = StepPlan.from_json(plan.to_json())
    assert not stored.nothing_to_do, stored.notes
    applied = step.apply(ctx, stored)
    failed = step.verify(ctx, stored, applied)
    assert failed is None, failed
    return stored, applied


class LosingClient:
    """A ClusterClient whose chosen calls reach the server and then lose their answer (a
    dropped connection after the request was sent), the hardest failure to settle."""

    def __init__(self, real: ClusterClient, lose: set[str], times: int = 1) -> None:
        self._real = real
        self._lose = lose
        self.lost = 0
        self._times = times

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name not in self._lose:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            result = target(*args, **kwargs)
            if self.lost < self._times:
                self.lost += 1
                raise ApiError(
                    f"the API server answered 500 to {name}: connection reset after the request"
                )
            return result

        return call


class PatchRefused:
    """A ClusterClient whose patches of one resource the API server refuses with `message`
    (an admission webhook that cannot be called, a policy that denies); all else goes
    through."""

    def __init__(self, real: ClusterClient, resource: Any, message: str) -> None:
        self._real = real
        self._resource = resource
        self._message = message

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != "patch":
            return target

        def patch(resource: Any, obj: str, body: Any, **kwargs: Any) -> Any:
            if resource is self._resource:
                raise ApiError(self._message)
            return target(resource, obj, body, **kwargs)

        return patch


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's server on 127.0.0.1 for EKS, EC2 and Auto Scaling (one per test module)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws(moto_endpoint: str, fake_aws: None) -> Callable[[str], Any]:
    """ctx.aws for the steps: real boto3 clients against moto's server."""
    import boto3
    from botocore.config import Config

    # One attempt: moto answers 500 for what it lacks (describe_update), and retries of
    # that only slow the test down.
    config = Config(retries={"max_attempts": 1, "mode": "standard"})
    clients: dict[str, Any] = {}

    def factory(service: str) -> Any:
        if service not in clients:
            clients[service] = boto3.client(
                service, region_name="us-west-2", endpoint_url=moto_endpoint, config=config
            )
        return clients[service]

    return factory


def unique(prefix: str) -> str:
    """moto's state outlives a test inside one server: fresh names keep tests apart."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eks_node_group(
    aws: Callable[[str], Any], repair: dict[str, Any], group: str = "ng-gpu-l4"
) -> str:
    """An EKS cluster (a unique name) in moto's server with one managed node group whose
    nodeRepairConfig is `repair`; returns the cluster's name."""
    eks = aws("eks")
    cluster = unique("ml-prod")
    eks.create_cluster(
        name=cluster,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
    )
    eks.create_nodegroup(
        clusterName=cluster,
        nodegroupName=group,
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
    )
    eks.update_nodegroup_config(clusterName=cluster, nodegroupName=group, nodeRepairConfig=repair)
    return cluster
