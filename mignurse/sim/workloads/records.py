"""The records the pod controllers keep beside the API objects: a Deployment (`Workload`),
its ReplicaSets, each pod (`PodRecord`: where it is bound, whether it is ready or being
deleted, what the scheduler last said of it), the scheduler's parsed view of a Node, and
the small readers of API objects the controllers share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mignurse.model import scheduling
from mignurse.model.scheduling import Resources
from mignurse.sim import dra
from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import PoolSpec

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine

POD_TERMINATION_GRACE = 30  # pod spec terminationGracePeriodSeconds default
DAEMON_REQUESTS: Resources = {"cpu": 0.025, "memory": 64 * 1024.0**2, "pods": 1.0}


@dataclass(eq=False)
class Workload:
    """A Deployment: its replicas and ReplicaSets (oldest first, the last is current)."""

    namespace: str
    name: str
    uid: str
    pool: PoolSpec | None  # the pool its pods select; None for Karpenter's own controller
    replicas: int
    selector: dict[str, str]
    max_surge: int
    sets: list[ReplicaSetState] = field(default_factory=list)
    rolling: int = 0  # generation of the rollout in progress, 0 when none

    @property
    def current(self) -> ReplicaSetState:
        return self.sets[-1]


@dataclass(eq=False)
class ReplicaSetState:
    workload: Workload
    name: str
    uid: str
    pod_hash: str
    template: JsonDict
    revision: int
    replicas: int
    created: float
    pods: list[PodRecord] = field(default_factory=list)  # active: not deleting


@dataclass(eq=False)
class PodRecord:
    namespace: str
    name: str
    uid: str
    created: float
    requests: Resources
    owner: ReplicaSetState | None = None
    daemonset: str | None = None
    machine: Machine | None = None
    ready: bool = False
    deleting: bool = False
    deadline: float = 0.0  # metadata.deletionTimestamp
    grace: int = 0  # metadata.deletionGracePeriodSeconds
    gone_at: float | None = None  # when the kubelet removes it; None: not while it is down
    nominated: Machine | None = None  # Karpenter's in-flight capacity for it
    unschedulable: str | None = None  # the scheduler's last FailedScheduling message
    attempts: int = 0  # failed scheduling attempts (backoff)
    retry_at: float = 0.0
    devices: dra.DeviceRequest | None = None  # what its ResourceClaim asks the DRA driver for
    claim: str | None = None  # its ResourceClaim (made from the pod's template)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def reschedulable(self) -> bool:
        """KC pkg/utils/pod IsReschedulable: not a DaemonSet pod, not terminating."""
        return self.daemonset is None and not self.deleting


@dataclass(frozen=True)
class NodeView:
    """What the schedulers read of a Node, parsed once per version of it."""

    labels: dict[str, str]
    taints: list[JsonDict]
    unschedulable: bool
    allocatable: Resources
    shape: tuple[Any, ...]  # what filters other than resources look at, minus the node's name

    @classmethod
    def of(cls, node: JsonDict) -> NodeView:
        taints = list(node["spec"].get("taints") or [])
        unschedulable = bool(node["spec"].get("unschedulable"))
        labels = dict(node["metadata"].get("labels") or {})
        return cls(
            labels=labels,
            taints=taints,
            unschedulable=unschedulable,
            allocatable=scheduling.resources(node["status"].get("allocatable")),
            shape=(
                unschedulable,
                tuple((t.get("key"), t.get("value", ""), t.get("effect")) for t in taints),
                labels.get("karpenter.sh/nodepool"),
                labels.get("eks.amazonaws.com/nodegroup"),
                labels.get("kubernetes.io/os"),
            ),
        )


def scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(float(value[:-1]) / 100.0 * total)
    return int(value)


def object_ref(obj: JsonDict, kind: str, api_version: str) -> JsonDict:
    meta = obj["metadata"]
    return {
        "kind": kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": api_version,
    }


def pod_ref(pod: JsonDict) -> JsonDict:
    return object_ref(pod, "Pod", "v1")
