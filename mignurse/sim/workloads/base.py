"""What the pod controllers share: the state of one `ControlLoops`'s pods and Deployments, and
the calls each controller makes on another (they run as one object, `Workloads`, inside the
loops's transactions and clock, as kube-controller-manager's loops share one informer cache).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mignurse.sim.objects import JsonDict
from mignurse.sim.workloads.records import NodeView, PodRecord, ReplicaSetState, Workload

if TYPE_CHECKING:
    from mignurse.sim.controllers import ControlLoops, Machine


class WorkloadsBase:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.workloads: dict[tuple[str, str], Workload] = {}
        self._scheduling_queued = False
        self._pdb_namespaces: set[str] = set()
        self._disrupted: dict[tuple[str, str], float] = {}  # evicted pod → eviction time
        self._bootstrapping = False
        self._views: dict[str, NodeView] = {}
        self._messages: dict[int, tuple[float, str]] = {}  # ReplicaSet → (pass time, message)
        self._retry_pass = math.inf  # when a pass for pods backing off is queued
        self._pending: dict[PodRecord, None] = {}  # unbound, not deleting, in creation order

    if TYPE_CHECKING:
        # Each controller's module defines these; the others call them.

        def reconcile(self, rs: ReplicaSetState) -> None: ...

        def write_status(self, wl: Workload) -> None: ...

        def _create_pod(self, rs: ReplicaSetState, *, at: float | None = None) -> PodRecord: ...

        def _pod_object(
            self, pod: PodRecord, machine: Machine | None, running_since: float | None
        ) -> JsonDict: ...

        def schedule_soon(self) -> None: ...

        def _containers_started(self, pod: PodRecord) -> None: ...

        def grace_of(self, pod: PodRecord) -> int: ...

        def start_deletion(
            self, pod: PodRecord, grace: int, *, condition: tuple[str, str] | None = None
        ) -> None: ...

        def kubelet_alive(self, machine: Machine) -> bool: ...

        def update_pdbs(self, namespace: str) -> None: ...
