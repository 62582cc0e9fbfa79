"""The kube-scheduler: its queue and backoff, the default profile's filters and a score that
spreads a ReplicaSet's pods, FailedScheduling messages as the real scheduler words them,
binding, and the pods already running when a scenario starts (`bootstrap`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from mignurse.model import scheduling
from mignurse.model.scheduling import Resources
from mignurse.sim import dra, objects
from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import PoolSpec
from mignurse.sim.workloads.base import WorkloadsBase
from mignurse.sim.workloads.records import NodeView, PodRecord, ReplicaSetState, pod_ref

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine

POD_STARTUP = 5.0  # from binding until the containers run and are ready (inference)
MAX_BACKOFF = 10.0  # kube-scheduler podMaxBackoffSeconds (initial 1 s)
UNSCHEDULABLE_RETRY = 300.0  # kube-scheduler podMaxInUnschedulablePodsDuration
NO_NODES = "no nodes available to schedule pods"


class KubeScheduler(WorkloadsBase):
    def schedule_soon(self) -> None:
        if not self._scheduling_queued:
            self._scheduling_queued = True
            self.loops.schedule(self.loops.t, self._scheduler_pass)

    def pending(self) -> list[PodRecord]:
        """Unbound, not deleting ReplicaSet pods, in the scheduling queue's order (priority,
        then creation)."""
        found = [p for p in self._pending if p.created <= self.loops.t]
        return sorted(found, key=lambda p: (-self._priority(p), p.created, p.name))

    @staticmethod
    def _priority(pod: PodRecord) -> int:
        spec = pod.owner.template["spec"] if pod.owner else {}
        return objects.PRIORITY_CLASSES.get(spec.get("priorityClassName") or "", 0)

    def _scheduler_pass(self) -> None:
        self._scheduling_queued = False
        later = [p.created for p in self._pending if p.created > self.loops.t]
        if later:
            # A pass queued by a backdated event: pods created since need one of their own.
            self._scheduling_queued = True
            self.loops.schedule(min(later), self._scheduler_pass)
        unschedulable: list[PodRecord] = []
        backing_off: list[float] = []
        for pod in self.pending():
            if pod.machine is not None or pod.deleting:
                continue
            if pod.retry_at > self.loops.t:
                backing_off.append(pod.retry_at)
                continue
            verdict = self._find_node(pod)
            if isinstance(verdict, str):
                # kube-scheduler's per-pod backoff: 1 s doubling to 10 s; left alone, an
                # unschedulable pod is tried again after 5 minutes.
                pod.attempts += 1
                pod.retry_at = self.loops.t + min(MAX_BACKOFF, 2.0 ** (pod.attempts - 1))
                self._mark_unschedulable(pod, verdict)
                unschedulable.append(pod)
                self.loops.schedule(self.loops.t + UNSCHEDULABLE_RETRY, self.schedule_soon)
            else:
                self.bind(pod, verdict, self.loops.t)
        if backing_off and min(backing_off) < self._retry_pass:
            self._retry_pass = min(backing_off)
            self.loops.schedule(self._retry_pass, self._retry)
        if unschedulable:
            self.loops.pods_unschedulable(unschedulable)

    def _retry(self) -> None:
        if self._retry_pass <= self.loops.t:
            self._retry_pass = math.inf
        self.schedule_soon()

    def _candidates(self, pod: PodRecord) -> list[Machine]:
        """Registered nodes the pod could land on by what never changes on a node: its pool's
        labels and taints (the full filters run on the Node itself)."""
        if pod.owner is None:
            return []
        return self._candidates_for(pod.owner)

    def view(self, machine: Machine) -> NodeView | None:
        """The Node as the schedulers see it now (a write in this transaction included)."""
        if not machine.registered or machine.removed:
            return None
        cached = self._views.get(machine.node)
        if cached is not None:
            return cached
        tx = self.loops.tx
        key = ("nodes", "", machine.node)
        if key in tx.dirty:
            obj = tx.work[key]  # written in this transaction: read as it is now, not cached
            return None if obj is None else NodeView.of(obj)
        node = self.loops.store.peek("nodes", "", machine.node)
        if node is None:
            return None
        view = NodeView.of(node)
        self._views[machine.node] = view
        return view

    def forget(self, name: str) -> None:
        """A Node was written: its view is read again when needed."""
        self._views.pop(name, None)

    def _find_node(self, pod: PodRecord) -> Machine | str:
        """The node the scheduler binds the pod to, or its FailedScheduling message."""
        best: tuple[tuple[Any, ...], Machine] | None = None
        for machine in self._candidates(pod):
            view = self.view(machine)
            if view is None or self.filter(pod, machine, view) is not None:
                continue
            score = self._score(pod, machine, view)
            if best is None or score < best[0]:
                best = (score, machine)
        if best is not None:
            return best[1]
        cached = self._messages.get(id(pod.owner))
        if cached is not None and self.loops.t - cached[0] < MAX_BACKOFF:
            # Pods of one ReplicaSet fail alike: the reasons are counted again at most once
            # per backoff period (a count up to 10 s old, a cost that stays flat at scale).
            return cached[1]
        reasons: dict[str, int] = {}
        unresolvable = nodes = 0
        candidates = set(self._candidates(pod))
        by_shape: dict[tuple[Any, ...], tuple[list[str], bool]] = {}
        for machine in list(self.loops.machines.values()):
            view = self.view(machine)
            if view is None:
                continue
            nodes += 1
            if machine in candidates:
                fail = self.filter(pod, machine, view) or ([], False)
            else:
                # A node of another pool fails on what it shares with its kind: once per shape.
                fail = by_shape.get(view.shape) or by_shape.setdefault(
                    view.shape, self.filter(pod, machine, view) or ([], False)
                )
            for reason in fail[0]:
                reasons[reason] = reasons.get(reason, 0) + 1
            unresolvable += 1 if fail[1] else 0
        message = NO_NODES if nodes == 0 else _fit_error(nodes, reasons, unresolvable)
        self._messages[id(pod.owner)] = (self.loops.t, message)
        return message

    def filter(
        self, pod: PodRecord, machine: Machine, view: NodeView, *, claims: bool = True
    ) -> tuple[list[str], bool] | None:
        """The default profile's filters in order (NodeUnschedulable, TaintToleration,
        NodeAffinity, NodeResourcesFit, InterPodAffinity, DynamicResources): None when the pod
        fits, else the reasons and whether preemption could not help
        (UnschedulableAndUnresolvable). `claims=False` leaves DRA out, as a Karpenter that
        knows nothing of it simulates."""
        spec = pod.owner.template["spec"] if pod.owner else {}
        tolerations = list(spec.get("tolerations") or []) + list(objects.DEFAULT_TOLERATIONS)
        if view.unschedulable and scheduling.untolerated(
            tolerations,
            [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        ):
            return (["node(s) were unschedulable"], True)
        bad = scheduling.untolerated(tolerations, view.taints)
        if bad:
            taint = bad[0]
            return (
                [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"],
                True,
            )
        labels = view.labels
        if not scheduling.selector_matches(
            spec.get("nodeSelector"), labels
        ) or not scheduling.node_affinity_matches(spec.get("affinity"), labels):
            return (["node(s) didn't match Pod's node affinity/selector"], True)
        short = scheduling.insufficient(pod.requests, view.allocatable, self.used(machine))
        if short:
            return (
                [("Too many pods" if r == "pods" else f"Insufficient {r}") for r in short],
                False,
            )
        if self._anti_affinity_conflict(pod, machine):
            return (["node(s) didn't match pod anti-affinity rules"], False)
        if claims and pod.devices is not None and not self._claim_fits(pod, machine):
            return ([dra.CANNOT_ALLOCATE], True)
        return None

    def _claim_fits(self, pod: PodRecord, machine: Machine) -> bool:
        """DynamicResources Filter: a claim allocated already fits only its node; one not yet
        allocated needs that many free matching devices in the node's ResourceSlice."""
        assert pod.devices is not None
        if pod.machine is not None:
            return pod.machine is machine
        return self.loops.dra.room(machine, pod.devices) >= 1

    def _anti_affinity_conflict(self, pod: PodRecord, machine: Machine) -> bool:
        spec = pod.owner.template["spec"] if pod.owner else {}
        terms = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        if not terms or pod.owner is None:
            return False
        selector = pod.owner.workload.selector
        return any(
            other.owner is not None
            and other is not pod
            and all(
                other.owner.template["metadata"]["labels"].get(k) == v for k, v in selector.items()
            )
            for other in machine.pods
        )

    def used(self, machine: Machine) -> Resources:
        """What the pods bound to the node request (terminating ones included, as the
        scheduler's cache keeps them until they are gone)."""
        total: Resources = {}
        for pod in machine.pods:
            scheduling.add(total, pod.requests)
        return total

    def _score(self, pod: PodRecord, machine: Machine, view: NodeView) -> tuple[Any, ...]:
        """Lower is better: spread the owner's pods over nodes, then least allocated."""
        same = sum(1 for p in machine.pods if p.owner is not None and p.owner is pod.owner)
        allocatable = view.allocatable
        used = self.used(machine)
        fractions = [
            used.get(r, 0.0) / allocatable[r] for r in ("cpu", "memory") if allocatable.get(r)
        ]
        return (same, round(sum(fractions), 6), machine.node)

    def _mark_unschedulable(self, pod: PodRecord, message: str) -> None:
        obj = self.loops.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        if objects.pod_unschedulable(obj, message, self.loops.t):
            self.loops.tx.put("pods", obj)
        pod.unschedulable = message
        self.loops.emit(
            pod_ref(obj),
            "FailedScheduling",
            message,
            event_type="Warning",
            component="default-scheduler",
        )

    def bind(self, pod: PodRecord, machine: Machine, at: float) -> None:
        """Bind the pod; its containers run POD_STARTUP later (a pod placed before the
        scenario starts has been running since `at`)."""
        pod.machine = machine
        pod.nominated = None
        pod.unschedulable = None
        self._pending.pop(pod, None)
        machine.pods.append(pod)
        if pod.devices is not None:
            self.loops.dra.allocate(pod, machine, pod.devices)
        started = at < self.loops.t
        pod.ready = started and machine.ready and machine.kubelet_posting
        obj = self._pod_object(pod, machine, at if started else None)
        self.loops.tx.put("pods", obj)
        saved, self.loops.t = self.loops.t, at
        self.loops.emit(
            pod_ref(obj),
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {machine.node}",
            component="default-scheduler",
        )
        self.loops.termination.pod_event_on(machine)
        self.loops.t = saved
        if not started:
            self.loops.schedule(self.loops.t + POD_STARTUP, self._containers_started, pod)
        if pod.owner is not None and not self._bootstrapping:
            self.write_status(pod.owner.workload)

    def _containers_started(self, pod: PodRecord) -> None:
        machine = pod.machine
        if machine is None or pod.deleting or self.pods.get(pod.key) is not pod:
            return
        if not self.kubelet_alive(machine):
            return  # the kubelet starts it when it is back (kubelet_back)
        self.loops.tx.put("pods", self._pod_object(pod, machine, self.loops.t))
        pod.ready = True
        if pod.owner is not None:
            self.write_status(pod.owner.workload)

    def bootstrap(self) -> None:
        """Pods that ran before the scenario starts, bound on their nodes since each node
        became Ready (spread one per node per round, as far as each node has room); the rest
        are created now and wait for the scheduler."""
        self._bootstrapping = True
        for wl in self.workloads.values():
            rs = wl.current
            probe = PodRecord(
                wl.namespace,
                "",
                "",
                0.0,
                scheduling.pod_requests(rs.template),
                owner=rs,
                devices=dra.request_for(wl.pool),
            )
            anti = bool(
                ((rs.template["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
                    "requiredDuringSchedulingIgnoredDuringExecution"
                )
            )
            slots: list[list[Any]] = []
            candidates = sorted(
                (
                    machine
                    for machine in self._candidates_for(rs)
                    if machine.ready and machine.ready_at is not None
                ),
                key=lambda machine: (machine.ready_at or 0.0, machine.node),
            )
            for machine in candidates:
                view = self.view(machine)
                if view is None or self.filter(probe, machine, view) is not None:
                    continue
                room = _room(probe.requests, view.allocatable, self.used(machine))
                if probe.devices is not None:
                    room = min(room, self.loops.dra.room(machine, probe.devices))
                if room:
                    slots.append([machine, 1 if anti else room])
            while len(rs.pods) < rs.replicas and slots:
                for slot in list(slots):
                    if len(rs.pods) >= rs.replicas:
                        break
                    machine = slot[0]
                    since = max(machine.ready_at or self.loops.t, rs.created)
                    self.bind(self._create_pod(rs, at=since), machine, since)
                    slot[1] -= 1
                    if not slot[1]:
                        slots.remove(slot)
            self.reconcile(rs)
        self._bootstrapping = False
        for wl in self.workloads.values():
            self.write_status(wl)

    def _candidates_for(self, rs: ReplicaSetState) -> list[Machine]:
        pool = rs.workload.pool
        selector = rs.template["spec"].get("nodeSelector") or {}
        named = selector.get("karpenter.sh/nodepool") or selector.get("eks.amazonaws.com/nodegroup")
        if pool is not None and named in (None, pool.name):
            machines = list(self.loops.pool_machines.get(pool.name, []))
        else:
            spec = rs.template["spec"]
            tolerations = list(spec.get("tolerations") or [])
            pools = [p for p in self.loops.scenario.pools if _pool_admits(p, spec, tolerations)]
            machines = [
                machine for p in pools for machine in self.loops.pool_machines.get(p.name, [])
            ]
        return [machine for machine in machines if machine.registered and not machine.removed]


def _room(request: Resources, allocatable: Resources, used: Resources) -> int:
    """How many more pods with this request fit."""
    counts = [
        int((allocatable.get(name, 0.0) - used.get(name, 0.0) + 1e-9) // value)
        for name, value in request.items()
        if value > 0
    ]
    return max(0, min(counts)) if counts else 0


def _pool_admits(pool: PoolSpec, spec: JsonDict, tolerations: list[JsonDict]) -> bool:
    """Whether a pool's nodes can take the pod going by their fixed labels and taints."""
    pool_key = "karpenter.sh/nodepool" if pool.kind == "nodepool" else "eks.amazonaws.com/nodegroup"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if key in ("karpenter.sh/nodepool", "eks.amazonaws.com/nodegroup") and (
            key != pool_key or value != pool.name
        ):
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        fixed = {pool_key: pool.name}
        terms = [
            [e for e in term.get("matchExpressions") or [] if e.get("key") == pool_key]
            for term in required.get("nodeSelectorTerms") or []
        ]
        if not any(all(scheduling.expression_matches(e, fixed) for e in t) for t in terms):
            return False
    return not scheduling.untolerated(tolerations, [t.to_api() for t in pool.taints])


def _fit_error(nodes: int, reasons: dict[str, int], unresolvable: int) -> str:
    """kube-scheduler FitError.Error() with the default preemption PostFilter message
    (pkg/scheduler/framework/types.go, plugins/defaultpreemption): reasons as a sorted
    "<count> <reason>" histogram."""
    filtered = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
    post = []
    if nodes - unresolvable:
        post.append(f"{nodes - unresolvable} No preemption victims found for incoming pod")
    if unresolvable:
        post.append(f"{unresolvable} Preemption is not helpful for scheduling")
    return (
        f"0/{nodes} nodes are available: {filtered}. "
        f"preemption: 0/{nodes} nodes are available: {', '.join(sorted(post))}."
    )
