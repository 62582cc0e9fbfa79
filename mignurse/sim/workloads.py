"""Pods and what owns them: Deployments and their ReplicaSets, the kube-scheduler, graceful
deletion that the kubelet confirms, the Eviction API with PodDisruptionBudgets, pod GC, and
what the node lifecycle controller does to the pods of a node that stops reporting.

The `Workloads` object belongs to one `World` and runs inside its transactions and clock.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mignurse.sim import dra, objects, scheduling
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.scenario_spec import PoolSpec
from mignurse.sim.scheduling import Resources

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine, World

POD_TERMINATION_GRACE = 30  # pod spec terminationGracePeriodSeconds default
POD_STOPPED = 10.0  # a workload exits on SIGTERM well within its grace period (inference)
POD_GC_QUARANTINE = 40.0  # pod GC deletes pods of a deleted Node after this (pkg/controller/podgc)
PDB_DELETION_TIMEOUT = 120.0  # disruption controller DeletionTimeout for status.disruptedPods
POD_STARTUP = 5.0  # from binding until the containers run and are ready (inference)
ROLLOUT_CHECK = 1.0  # the deployment controller's next look at a rollout (inference)
MAX_BACKOFF = 10.0  # kube-scheduler podMaxBackoffSeconds (initial 1 s)
UNSCHEDULABLE_RETRY = 300.0  # kube-scheduler podMaxInUnschedulablePodsDuration
DAEMON_REQUESTS: Resources = {"cpu": 0.025, "memory": 64 * 1024.0**2, "pods": 1.0}
NO_NODES = "no nodes available to schedule pods"


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


class Workloads:
    """The controllers that own pods in one simulated cluster."""

    def __init__(self, world: World) -> None:
        self.w = world
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

    # ------------------------------------------------------------------ Deployments

    def create(
        self,
        deploy: JsonDict,
        pool: PoolSpec | None,
        *,
        pdb: bool = False,
    ) -> Workload:
        """Register a Deployment the world built and give it its first ReplicaSet."""
        meta = deploy["metadata"]
        replicas = int(deploy["spec"]["replicas"])
        wl = Workload(
            namespace=meta["namespace"],
            name=meta["name"],
            uid=meta["uid"],
            pool=pool,
            replicas=replicas,
            selector=dict(deploy["spec"]["selector"]["matchLabels"]),
            max_surge=_surge(deploy, replicas),
        )
        self.workloads[(wl.namespace, wl.name)] = wl
        if pdb:
            self._pdb_namespaces.add(wl.namespace)
        self._new_replicaset(wl, deploy, revision=1, created=_parse(meta["creationTimestamp"]))
        wl.current.replicas = replicas
        self.w.tx.put("deployments", deploy)
        self._write_replicaset(wl.current)
        return wl

    def _new_replicaset(
        self, wl: Workload, deploy: JsonDict, *, revision: int, created: float
    ) -> ReplicaSetState:
        template = deploy["spec"]["template"]
        pod_hash = objects.pod_template_hash(template)
        rs = ReplicaSetState(
            workload=wl,
            name=f"{wl.name}-{pod_hash}",
            uid=objects.stable_uuid("rs", wl.namespace, wl.name, pod_hash),
            pod_hash=pod_hash,
            template=template,
            revision=revision,
            replicas=0,
            created=created,
        )
        wl.sets.append(rs)
        return rs

    def _deployment(self, wl: Workload) -> JsonDict | None:
        return self.w.tx.get("deployments", wl.namespace, wl.name)

    def _write_replicaset(self, rs: ReplicaSetState) -> None:
        deploy = self._deployment(rs.workload)
        if deploy is None:
            return
        obj = objects.build_replicaset(
            deployment=deploy,
            name=rs.name,
            uid=rs.uid,
            created=rs.created,
            pod_hash=rs.pod_hash,
            template=rs.template,
            revision=rs.revision,
            spec_replicas=rs.replicas,
            replicas=len(rs.pods),
            ready=sum(1 for p in rs.pods if p.ready),
            desired=rs.workload.replicas,
            max_surge=rs.workload.max_surge,
        )
        current = self.w.tx.get("replicasets", rs.workload.namespace, rs.name)
        if current is not None:
            obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if current == obj:
                return
        self.w.tx.put("replicasets", obj)

    def scale_deployment(self, wl: Workload, replicas: int) -> None:
        """`kubectl scale`: the Deployment's replicas, then its current ReplicaSet's."""
        deploy = self._deployment(wl)
        if deploy is None:
            return
        before = json.loads(json.dumps(deploy))
        deploy["spec"]["replicas"] = replicas
        deploy["metadata"]["generation"] = int(deploy["metadata"].get("generation", 1)) + 1
        self.w.tx.put("deployments", deploy)
        self.deployment_patched(wl.namespace, wl.name, before, deploy)

    def write_status(self, wl: Workload) -> None:
        """The Deployment's status from its ReplicaSets' pods (deployment controller sync)."""
        deploy = self._deployment(wl)
        if deploy is None:
            return
        current = wl.current
        replicas = sum(len(rs.pods) for rs in wl.sets)
        updated = len(current.pods)
        ready = sum(1 for rs in wl.sets for p in rs.pods if p.ready)
        status = deploy.get("status") or {}
        progressing = next(
            (c for c in status.get("conditions", []) if c["type"] == "Progressing"), None
        )
        since = _parse(progressing["lastTransitionTime"]) if progressing else self.w.begin
        new = objects.deployment_status(
            generation=int(deploy["metadata"].get("generation", 1)),
            replicas=replicas,
            updated=updated,
            ready=ready,
            available=ready,
            rs_name=current.name,
            progressing_since=since,
            available_since=self.w.t,
            now=self.w.t,
        )
        new["replicas"] = replicas
        new["unavailableReplicas"] = max(0, wl.replicas - ready)
        if not new["unavailableReplicas"]:
            del new["unavailableReplicas"]
        if _status_key(status) != _status_key(new):
            available = next(
                (c for c in status.get("conditions", []) if c["type"] == "Available"), None
            )
            new_available = new["conditions"][0]
            if available is not None and available["status"] == new_available["status"]:
                new_available["lastTransitionTime"] = available["lastTransitionTime"]
                new_available["lastUpdateTime"] = available["lastUpdateTime"]
            deploy["status"] = new
            self.w.tx.put("deployments", deploy)
        for rs in wl.sets:
            self._write_replicaset(rs)
        if wl.namespace in self._pdb_namespaces:
            self.update_pdbs(wl.namespace)

    def deployment_patched(
        self, namespace: str, name: str, before: JsonDict, after: JsonDict
    ) -> bool:
        """The deployment controller sees a patched Deployment; True when a rollout starts."""
        wl = self.workloads.get((namespace, name))
        if wl is None:
            return False
        wl.replicas = int(after["spec"].get("replicas", 1))
        wl.max_surge = _surge(after, wl.replicas)
        if before["spec"].get("template") == after["spec"].get("template"):
            if wl.rolling == 0:
                self._scale(wl.current, wl.replicas)
            self.write_status(wl)
            return False
        revision = int(
            (after["metadata"].get("annotations") or {}).get(
                "deployment.kubernetes.io/revision", wl.current.revision + 1
            )
        )
        old = wl.current
        rs = self._new_replicaset(wl, after, revision=revision, created=self.w.t)
        wl.rolling = int(after["metadata"].get("generation", 1))
        self._write_replicaset(rs)
        progress = after.setdefault("status", {})
        progress["observedGeneration"] = wl.rolling
        self._rollout_step(wl, wl.rolling, old)
        return True

    def _rollout_step(self, wl: Workload, generation: int, old: ReplicaSetState) -> None:
        """RollingUpdate with maxUnavailable 1 (k8s pkg/controller/deployment rolling.go,
        one pod at a time): scale the new ReplicaSet up and the old one down together, and
        go on once the new pods are ready."""
        if wl.rolling != generation:
            return
        new = wl.current
        ready_new = sum(1 for p in new.pods if p.ready)
        if ready_new >= new.replicas and new.replicas < wl.replicas:
            self._scale(new, new.replicas + 1)
            for rs in wl.sets[:-1]:
                if rs.replicas > 0:
                    self._scale(rs, rs.replicas - 1)
                    break
        old_left = sum(rs.replicas + len(rs.pods) for rs in wl.sets[:-1])
        self.write_status(wl)
        if new.replicas >= wl.replicas and ready_new >= wl.replicas and old_left == 0:
            wl.rolling = 0
            self.w.rollout_done(wl)
            return
        self.w.schedule(self.w.t + ROLLOUT_CHECK, self._rollout_step, wl, generation, old)

    def _scale(self, rs: ReplicaSetState, replicas: int) -> None:
        before = rs.replicas
        if before == replicas:
            self.reconcile(rs)
            return
        rs.replicas = replicas
        wl = rs.workload
        deploy = self._deployment(wl)
        if deploy is not None:
            verb = "up" if replicas > before else "down"
            if self.w.scaling_message_has_from:
                message = f"Scaled {verb} replica set {rs.name} from {before} to {replicas}"
            else:
                message = f"Scaled {verb} replica set {rs.name} to {replicas}"
            self.w.emit(
                _ref(deploy, "Deployment", "apps/v1"),
                "ScalingReplicaSet",
                message,
                component="deployment-controller",
            )
        self.reconcile(rs)

    # ------------------------------------------------------------------ ReplicaSets

    def reconcile(self, rs: ReplicaSetState) -> None:
        """The ReplicaSet controller: create or delete pods until the active ones match."""
        missing = rs.replicas - len(rs.pods)
        for _ in range(missing):
            self._create_pod(rs)
        if missing < 0:
            # Unscheduled pods go first, then not-ready ones, then the newest (ActivePods sort).
            victims = sorted(
                rs.pods,
                key=lambda p: (p.machine is not None, p.ready, -p.created, p.name),
            )[:-missing]
            for pod in victims:
                self._rs_event(rs, "SuccessfulDelete", f"Deleted pod: {pod.name}")
                self.start_deletion(pod, self.grace_of(pod))
        self._write_replicaset(rs)

    def _rs_event(self, rs: ReplicaSetState, reason: str, message: str) -> None:
        ref = {
            "kind": "ReplicaSet",
            "namespace": rs.workload.namespace,
            "name": rs.name,
            "uid": rs.uid,
            "apiVersion": "apps/v1",
        }
        self.w.emit(ref, reason, message, component="replicaset-controller")

    def _create_pod(self, rs: ReplicaSetState, *, at: float | None = None) -> PodRecord:
        created = self.w.t if at is None else at
        wl = rs.workload
        name = f"{rs.name}-{self.w.suffix()}"
        pod = PodRecord(
            namespace=wl.namespace,
            name=name,
            uid=self.w.uid(),
            created=created,
            requests=scheduling.pod_requests(rs.template),
            owner=rs,
            devices=dra.request_for(wl.pool),
        )
        self.pods[pod.key] = pod
        rs.pods.append(pod)
        self._pending[pod] = None
        if pod.devices is not None:
            pod.claim = self.w.dra.create_claim(pod, pod.devices)
        self.w.tx.put("pods", self._pod_object(pod, None, None))
        if at is None:
            self._rs_event(rs, "SuccessfulCreate", f"Created pod: {name}")
            self.schedule_soon()
        return pod

    def _pod_object(
        self, pod: PodRecord, m: Machine | None, running_since: float | None
    ) -> JsonDict:
        rs = pod.owner
        assert rs is not None
        spec = rs.template["spec"]
        tolerations = list(spec.get("tolerations") or [])
        for default in objects.DEFAULT_TOLERATIONS:
            if not any(t.get("key") == default["key"] for t in tolerations):
                tolerations.append(dict(default))
        obj = objects.build_pod(
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            created=pod.created,
            node_name=m.node if m else None,
            labels={**rs.template["metadata"]["labels"], "pod-template-hash": rs.pod_hash},
            owner={
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs.name,
                "uid": rs.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            },
            containers=spec["containers"],
            tolerations=tolerations,
            priority_class=spec.get("priorityClassName"),
            host_ip=m.ip if m else None,
            pod_ip=self.w.pods.pod_ip(m) if m else None,
            running_since=running_since,
            node_selector=spec.get("nodeSelector"),
            affinity=spec.get("affinity"),
        )
        if spec.get("serviceAccountName"):
            obj["spec"]["serviceAccountName"] = spec["serviceAccountName"]
        if spec.get("resourceClaims"):
            obj["spec"]["resourceClaims"] = [dict(c) for c in spec["resourceClaims"]]
        if pod.claim is not None:
            obj["status"]["resourceClaimStatuses"] = [
                {"name": dra.POD_CLAIM, "resourceClaimName": pod.claim}
            ]
        return obj

    def register_daemon_pod(self, m: Machine, namespace: str, name: str, ds: str) -> PodRecord:
        pod = PodRecord(
            namespace=namespace,
            name=name,
            uid="",
            created=self.w.t,
            requests=dict(DAEMON_REQUESTS),
            daemonset=ds,
            machine=m,
            ready=True,
        )
        self.pods[pod.key] = pod
        m.pods.append(pod)
        return pod

    # ------------------------------------------------------------------ kube-scheduler

    def schedule_soon(self) -> None:
        if not self._scheduling_queued:
            self._scheduling_queued = True
            self.w.schedule(self.w.t, self._scheduler_pass)

    def pending(self) -> list[PodRecord]:
        """Unbound, not deleting ReplicaSet pods, in the scheduling queue's order (priority,
        then creation)."""
        found = [p for p in self._pending if p.created <= self.w.t]
        return sorted(found, key=lambda p: (-self._priority(p), p.created, p.name))

    @staticmethod
    def _priority(pod: PodRecord) -> int:
        spec = pod.owner.template["spec"] if pod.owner else {}
        return objects.PRIORITY_CLASSES.get(spec.get("priorityClassName") or "", 0)

    def _scheduler_pass(self) -> None:
        self._scheduling_queued = False
        later = [p.created for p in self._pending if p.created > self.w.t]
        if later:
            # A pass queued by a backdated event: pods created since need one of their own.
            self._scheduling_queued = True
            self.w.schedule(min(later), self._scheduler_pass)
        unschedulable: list[PodRecord] = []
        backing_off: list[float] = []
        for pod in self.pending():
            if pod.machine is not None or pod.deleting:
                continue
            if pod.retry_at > self.w.t:
                backing_off.append(pod.retry_at)
                continue
            verdict = self._find_node(pod)
            if isinstance(verdict, str):
                # kube-scheduler's per-pod backoff: 1 s doubling to 10 s; left alone, an
                # unschedulable pod is tried again after 5 minutes.
                pod.attempts += 1
                pod.retry_at = self.w.t + min(MAX_BACKOFF, 2.0 ** (pod.attempts - 1))
                self._mark_unschedulable(pod, verdict)
                unschedulable.append(pod)
                self.w.schedule(self.w.t + UNSCHEDULABLE_RETRY, self.schedule_soon)
            else:
                self.bind(pod, verdict, self.w.t)
        if backing_off and min(backing_off) < self._retry_pass:
            self._retry_pass = min(backing_off)
            self.w.schedule(self._retry_pass, self._retry)
        if unschedulable:
            self.w.pods_unschedulable(unschedulable)

    def _retry(self) -> None:
        if self._retry_pass <= self.w.t:
            self._retry_pass = math.inf
        self.schedule_soon()

    def _candidates(self, pod: PodRecord) -> list[Machine]:
        """Registered nodes the pod could land on by what never changes on a node: its pool's
        labels and taints (the full filters run on the Node itself)."""
        if pod.owner is None:
            return []
        return self._candidates_for(pod.owner)

    def view(self, m: Machine) -> NodeView | None:
        """The Node as the schedulers see it now (a write in this transaction included)."""
        if not m.registered or m.removed:
            return None
        cached = self._views.get(m.node)
        if cached is not None:
            return cached
        tx = self.w.tx
        key = ("nodes", "", m.node)
        if key in tx.dirty:
            obj = tx.work[key]  # written in this transaction: read as it is now, not cached
            return None if obj is None else NodeView.of(obj)
        raw = self.w.store.get_raw("nodes", "", m.node)
        if raw is None:
            return None
        view = NodeView.of(json.loads(raw))
        self._views[m.node] = view
        return view

    def forget(self, name: str) -> None:
        """A Node was written: its view is read again when needed."""
        self._views.pop(name, None)

    def _find_node(self, pod: PodRecord) -> Machine | str:
        """The node the scheduler binds the pod to, or its FailedScheduling message."""
        best: tuple[tuple[Any, ...], Machine] | None = None
        for m in self._candidates(pod):
            view = self.view(m)
            if view is None or self.filter(pod, m, view) is not None:
                continue
            score = self._score(pod, m, view)
            if best is None or score < best[0]:
                best = (score, m)
        if best is not None:
            return best[1]
        cached = self._messages.get(id(pod.owner))
        if cached is not None and self.w.t - cached[0] < MAX_BACKOFF:
            # Pods of one ReplicaSet fail alike: the reasons are counted again at most once
            # per backoff period (a count up to 10 s old, a cost that stays flat at scale).
            return cached[1]
        reasons: dict[str, int] = {}
        unresolvable = nodes = 0
        candidates = set(self._candidates(pod))
        by_shape: dict[tuple[Any, ...], tuple[list[str], bool]] = {}
        for m in list(self.w.machines.values()):
            view = self.view(m)
            if view is None:
                continue
            nodes += 1
            if m in candidates:
                fail = self.filter(pod, m, view) or ([], False)
            else:
                # A node of another pool fails on what it shares with its kind: once per shape.
                fail = by_shape.get(view.shape) or by_shape.setdefault(
                    view.shape, self.filter(pod, m, view) or ([], False)
                )
            for reason in fail[0]:
                reasons[reason] = reasons.get(reason, 0) + 1
            unresolvable += 1 if fail[1] else 0
        message = NO_NODES if nodes == 0 else _fit_error(nodes, reasons, unresolvable)
        self._messages[id(pod.owner)] = (self.w.t, message)
        return message

    def filter(
        self, pod: PodRecord, m: Machine, view: NodeView, *, claims: bool = True
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
        if not scheduling.selector_matches(spec.get("nodeSelector"), labels) or not _affinity_ok(
            spec.get("affinity"), labels
        ):
            return (["node(s) didn't match Pod's node affinity/selector"], True)
        short = scheduling.insufficient(pod.requests, view.allocatable, self.used(m))
        if short:
            return (
                [("Too many pods" if r == "pods" else f"Insufficient {r}") for r in short],
                False,
            )
        if self._anti_affinity_conflict(pod, m):
            return (["node(s) didn't match pod anti-affinity rules"], False)
        if claims and pod.devices is not None and not self._claim_fits(pod, m):
            return ([dra.CANNOT_ALLOCATE], True)
        return None

    def _claim_fits(self, pod: PodRecord, m: Machine) -> bool:
        """DynamicResources Filter: a claim allocated already fits only its node; one not yet
        allocated needs that many free matching devices in the node's ResourceSlice."""
        assert pod.devices is not None
        if pod.machine is not None:
            return pod.machine is m
        return self.w.dra.room(m, pod.devices) >= 1

    def _anti_affinity_conflict(self, pod: PodRecord, m: Machine) -> bool:
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
            for other in m.pods
        )

    def used(self, m: Machine) -> Resources:
        """What the pods bound to the node request (terminating ones included, as the
        scheduler's cache keeps them until they are gone)."""
        total: Resources = {}
        for pod in m.pods:
            scheduling.add(total, pod.requests)
        return total

    def _score(self, pod: PodRecord, m: Machine, view: NodeView) -> tuple[Any, ...]:
        """Lower is better: spread the owner's pods over nodes, then least allocated."""
        same = sum(1 for p in m.pods if p.owner is not None and p.owner is pod.owner)
        allocatable = view.allocatable
        used = self.used(m)
        fractions = [
            used.get(r, 0.0) / allocatable[r] for r in ("cpu", "memory") if allocatable.get(r)
        ]
        return (same, round(sum(fractions), 6), m.node)

    def _mark_unschedulable(self, pod: PodRecord, message: str) -> None:
        obj = self.w.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        if objects.pod_unschedulable(obj, message, self.w.t):
            self.w.tx.put("pods", obj)
        pod.unschedulable = message
        self.w.emit(
            _pod_ref(obj),
            "FailedScheduling",
            message,
            event_type="Warning",
            component="default-scheduler",
        )

    def bind(self, pod: PodRecord, m: Machine, at: float) -> None:
        """Bind the pod; its containers run POD_STARTUP later (a pod placed before the
        scenario starts has been running since `at`)."""
        pod.machine = m
        pod.nominated = None
        pod.unschedulable = None
        self._pending.pop(pod, None)
        m.pods.append(pod)
        if pod.devices is not None:
            self.w.dra.allocate(pod, m, pod.devices)
        started = at < self.w.t
        pod.ready = started and m.ready and m.kubelet_posting
        obj = self._pod_object(pod, m, at if started else None)
        self.w.tx.put("pods", obj)
        saved, self.w.t = self.w.t, at
        self.w.emit(
            _pod_ref(obj),
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {m.node}",
            component="default-scheduler",
        )
        self.w.termination.pod_event_on(m)
        self.w.t = saved
        if not started:
            self.w.schedule(self.w.t + POD_STARTUP, self._containers_started, pod)
        if pod.owner is not None and not self._bootstrapping:
            self.write_status(pod.owner.workload)

    def _containers_started(self, pod: PodRecord) -> None:
        m = pod.machine
        if m is None or pod.deleting or self.pods.get(pod.key) is not pod:
            return
        if not self.kubelet_alive(m):
            return  # the kubelet starts it when it is back (kubelet_back)
        self.w.tx.put("pods", self._pod_object(pod, m, self.w.t))
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
                (m for m in self._candidates_for(rs) if m.ready and m.ready_at is not None),
                key=lambda m: (m.ready_at or 0.0, m.node),
            )
            for m in candidates:
                view = self.view(m)
                if view is None or self.filter(probe, m, view) is not None:
                    continue
                room = _room(probe.requests, view.allocatable, self.used(m))
                if probe.devices is not None:
                    room = min(room, self.w.dra.room(m, probe.devices))
                if room:
                    slots.append([m, 1 if anti else room])
            while len(rs.pods) < rs.replicas and slots:
                for slot in list(slots):
                    if len(rs.pods) >= rs.replicas:
                        break
                    m = slot[0]
                    since = max(m.ready_at or self.w.t, rs.created)
                    self.bind(self._create_pod(rs, at=since), m, since)
                    slot[1] -= 1
                    if not slot[1]:
                        slots.remove(slot)
            self.reconcile(rs)
        self._bootstrapping = False
        for wl in self.workloads.values():
            self.write_status(wl)

    def _candidates_for(self, rs: ReplicaSetState) -> list[Machine]:
        pool = rs.workload.pool
        if pool is not None:
            machines = list(self.w.pool_machines.get(pool.name, []))
        else:
            spec = rs.template["spec"]
            tolerations = list(spec.get("tolerations") or [])
            pools = [p for p in self.w.scenario.pools if _pool_admits(p, spec, tolerations)]
            machines = [m for p in pools for m in self.w.pool_machines.get(p.name, [])]
        return [m for m in machines if m.registered and not m.removed]

    # ------------------------------------------------------------------ deletion

    def grace_of(self, pod: PodRecord) -> int:
        obj = self.w.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return POD_TERMINATION_GRACE
        return int(obj["spec"].get("terminationGracePeriodSeconds", POD_TERMINATION_GRACE))

    def delete(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """DELETE of a pod through the API: the object as the server returns it, or None when
        there is no such pod. Grace defaults to the pod's terminationGracePeriodSeconds; 0,
        or a pod not bound to a node, removes it at once (k8s pkg/registry/core/pod
        strategy.go CheckGracefulDelete, registry/rest/delete.go BeforeDelete)."""
        pod = self.pods.get((namespace, name))
        obj = self.w.tx.get("pods", namespace, name)
        if pod is None or obj is None:
            return None
        self.start_deletion(pod, self.grace_of(pod) if grace is None else grace)
        return self.w.tx.get("pods", namespace, name) or _deleted_view(obj, self.w.t)

    def start_deletion(
        self, pod: PodRecord, grace: int, *, condition: tuple[str, str] | None = None
    ) -> None:
        """Set deletionTimestamp (now + grace); a live kubelet removes the pod once its
        containers stop, a kubelet that is down never does (pod GC does, with the Node)."""
        if grace < 0:
            grace = 1  # a negative grace period is read as 1 s (registry/rest BeforeDelete)
        if pod.machine is None:
            grace = 0  # never scheduled: nothing to stop
        now = self.w.t
        if pod.deleting and grace >= pod.grace:
            return  # only a shorter grace period is taken (registry/rest BeforeDelete)
        obj = self.w.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        first = not pod.deleting
        self._pending.pop(pod, None)
        # A shorter grace moves the deletion time back by the difference.
        pod.deadline = pod.deadline - pod.grace + grace if pod.deleting else now + grace
        pod.deleting = True
        pod.grace = grace
        if condition is not None:
            _disruption_target(obj, condition, now)
        if grace == 0:
            self._remove(pod)
        else:
            meta = obj["metadata"]
            meta["deletionTimestamp"] = ts(pod.deadline)
            meta["deletionGracePeriodSeconds"] = grace
            self.w.tx.put("pods", obj)
            self._kubelet_stops(pod)
        if first and pod.owner is not None and pod in pod.owner.pods:
            pod.owner.pods.remove(pod)
            self.reconcile(pod.owner)
            self.write_status(pod.owner.workload)
        if first and pod.machine is not None:
            self.w.termination.pod_event_on(pod.machine)
        if pod.namespace in self._pdb_namespaces:
            self.update_pdbs(pod.namespace)

    def kubelet_alive(self, m: Machine) -> bool:
        return m.kubelet_posting and m.instance_state == "running" and m.ready and not m.removed

    def _kubelet_stops(self, pod: PodRecord) -> None:
        m = pod.machine
        if m is None or not self.kubelet_alive(m):
            pod.gone_at = None
            return
        gone = min(pod.deadline, self.w.t + POD_STOPPED)
        pod.gone_at = gone
        self.w.schedule(gone, self._kubelet_removes, pod, gone)

    def _kubelet_removes(self, pod: PodRecord, at: float) -> None:
        if pod.gone_at != at or self.pods.get(pod.key) is not pod:
            return
        m = pod.machine
        if m is None or not self.kubelet_alive(m):
            pod.gone_at = None
            return
        self._remove(pod)

    def kubelet_back(self, m: Machine) -> None:
        """A kubelet that runs (and reports Ready) again finishes the deletions it missed."""
        for pod in list(m.pods):
            if pod.deleting and pod.gone_at is None:
                self._kubelet_stops(pod)

    def _remove(self, pod: PodRecord) -> None:
        """The pod leaves the API (a DELETED watch event)."""
        if self.pods.get(pod.key) is not pod:
            return
        del self.pods[pod.key]
        self._pending.pop(pod, None)
        self.w.tx.delete("pods", pod.namespace, pod.name)
        self.w.dra.pod_gone(pod)
        pod.deleting = True
        m = pod.machine
        if m is not None and pod in m.pods:
            m.pods.remove(pod)
        if pod.owner is not None:
            if pod in pod.owner.pods:
                pod.owner.pods.remove(pod)
                self.reconcile(pod.owner)
            self.write_status(pod.owner.workload)
        self._disrupted.pop(pod.key, None)
        if pod.namespace in self._pdb_namespaces:
            self.update_pdbs(pod.namespace)
        self.w.termination.pod_gone(pod, m)
        self.schedule_soon()

    def node_removed(self, m: Machine) -> None:
        """Pods bound to a deleted Node: pod GC force-deletes them after its quarantine."""
        if m.pods:
            self.w.schedule(self.w.t + POD_GC_QUARANTINE, self._pod_gc, m)

    def _pod_gc(self, m: Machine) -> None:
        for pod in list(m.pods):
            pod.gone_at = None
            self.start_deletion(pod, 0)

    # ------------------------------------------------------------------ node lifecycle

    def node_unknown(self, m: Machine) -> None:
        """MarkPodsNotReady: Ready=False on the node's pods and a NodeNotReady Warning on each
        (k8s pkg/controller/util/node controller_utils.go)."""
        for pod in list(m.pods):
            if not pod.ready:
                continue
            self.set_ready(pod, False)
            obj = self.w.tx.get("pods", pod.namespace, pod.name)
            if obj is not None:
                self.w.emit(
                    _pod_ref(obj),
                    "NodeNotReady",
                    "Node is not ready",
                    event_type="Warning",
                    component="node-controller",
                )

    def set_ready(self, pod: PodRecord, ready: bool) -> None:
        if pod.ready == ready:
            return
        pod.ready = ready
        obj = self.w.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        for cond in obj["status"].get("conditions", []):
            if cond["type"] in ("Ready", "ContainersReady") and cond["status"] != (
                "True" if ready else "False"
            ):
                cond["status"] = "True" if ready else "False"
                cond["lastTransitionTime"] = ts(self.w.t)
        self.w.tx.put("pods", obj)
        if pod.owner is not None:
            self.write_status(pod.owner.workload)

    def node_ready(self, m: Machine) -> None:
        for pod in list(m.pods):
            if pod.deleting or pod.daemonset is not None:
                continue
            obj = self.w.tx.get("pods", pod.namespace, pod.name)
            if obj is not None and obj["status"].get("phase") == "Pending":
                self._containers_started(pod)
            else:
                self.set_ready(pod, True)
        self.kubelet_back(m)
        self.schedule_soon()

    def noexecute_tainted(self, m: Machine, key: str) -> None:
        """The taint eviction controller: pods that tolerate the taint for a while are deleted
        when that runs out (pkg/controller/tainteviction), Pod event TaintManagerEviction."""
        self.w.schedule(self.w.t, self._taint_eviction, m, key, self.w.t)

    def _taint_eviction(self, m: Machine, key: str, since: float) -> None:
        node = self.w.node(m)
        if node is None:
            return
        taint = next(
            (
                t
                for t in node["spec"].get("taints") or []
                if t["key"] == key and t["effect"] == "NoExecute"
            ),
            None,
        )
        if taint is None:
            return
        later: list[float] = []
        for pod in list(m.pods):
            if pod.deleting or pod.daemonset is not None or pod.owner is None:
                continue
            tolerations = list(pod.owner.template["spec"].get("tolerations") or []) + list(
                objects.DEFAULT_TOLERATIONS
            )
            seconds = scheduling.toleration_seconds(tolerations, taint)
            if seconds is None:
                continue
            due = since + seconds
            if due > self.w.t + 1e-6:
                later.append(due)
                continue
            obj = self.w.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            self.w.emit(
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace},
                "TaintManagerEviction",
                f"Marking for deletion Pod {pod.namespace}/{pod.name}",
                component="taint-eviction-controller",
            )
            self.start_deletion(
                pod,
                self.grace_of(pod),
                condition=(
                    "DeletionByTaintManager",
                    "Taint manager: deleting due to NoExecute taint",
                ),
            )
        if later:
            self.w.schedule(min(later), self._taint_eviction, m, key, since)

    # ------------------------------------------------------------------ Eviction API, PDBs

    def evict(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """POST pods/eviction: the PDB that refuses it, or None when the pod is being deleted
        (k8s pkg/registry/core/pod/storage eviction.go: a pending or terminating pod ignores
        its PDB; otherwise disruptionsAllowed is decremented and the pod recorded in
        status.disruptedPods before the delete)."""
        pod = self.pods.get((namespace, name))
        obj = self.w.tx.get("pods", namespace, name)
        if pod is None or obj is None:
            return None
        ignores_pdb = pod.deleting or obj["status"].get("phase") in (
            "Pending",
            "Succeeded",
            "Failed",
        )
        if not ignores_pdb:
            pdb = self.pdb_for(obj)
            if pdb is not None:
                status = pdb.get("status") or {}
                if int(status.get("disruptionsAllowed", 0)) <= 0:
                    return pdb
                status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
                disrupted = dict(status.get("disruptedPods") or {})
                disrupted[name] = ts(self.w.t)
                status["disruptedPods"] = disrupted
                pdb["status"] = status
                self.w.tx.put("poddisruptionbudgets", pdb)
                self._disrupted[pod.key] = self.w.t
                self.w.schedule(self.w.t + PDB_DELETION_TIMEOUT, self._disruption_expired, pod.key)
        self.start_deletion(
            pod,
            self.grace_of(pod) if grace is None else grace,
            condition=("EvictionByEvictionAPI", "Eviction API: evicting"),
        )
        return None

    def _disruption_expired(self, key: tuple[str, str]) -> None:
        at = self._disrupted.get(key)
        if at is not None and self.w.t - at >= PDB_DELETION_TIMEOUT - 1e-6:
            del self._disrupted[key]
            self.update_pdbs(key[0])

    def pdb_for(self, pod: JsonDict) -> JsonDict | None:
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels", {})
        for key in self.w.store.keys("poddisruptionbudgets"):
            if key[0] != ns:
                continue
            pdb = self.w.tx.get("poddisruptionbudgets", *key)
            if pdb is None:
                continue
            selector = pdb["spec"]["selector"].get("matchLabels", {})
            if scheduling.selector_matches(selector, labels):
                return pdb
        return None

    def blocking_pdb(self, pod: PodRecord) -> JsonDict | None:
        """The PDB an eviction of this pod would hit now, if any."""
        obj = self.w.tx.get("pods", pod.namespace, pod.name)
        if obj is None or pod.deleting or obj["status"].get("phase") != "Running":
            return None
        pdb = self.pdb_for(obj)
        if pdb is None or int((pdb.get("status") or {}).get("disruptionsAllowed", 0)) > 0:
            return None
        return pdb

    def blocking_pdbs_on(self, m: Machine) -> JsonDict | None:
        """A PDB that allows no eviction of one of the node's pods (KC pdb.Limits
        CanEvictPods): such a node is no disruption candidate."""
        for pod in m.pods:
            if pod.reschedulable:
                pdb = self.blocking_pdb(pod)
                if pdb is not None:
                    return pdb
        return None

    def update_pdbs(self, namespace: str) -> None:
        """The disruption controller's status for each PDB of the namespace
        (k8s pkg/controller/disruption disruption.go getExpectedPodCount, countHealthyPods)."""
        for key in [k for k in self.w.store.keys("poddisruptionbudgets") if k[0] == namespace]:
            pdb = self.w.tx.get("poddisruptionbudgets", *key)
            if pdb is None:
                continue
            selector = pdb["spec"]["selector"]["matchLabels"]
            matched = [
                p
                for p in self.pods.values()
                if p.namespace == namespace
                and p.owner is not None
                and scheduling.selector_matches(selector, p.owner.template["metadata"]["labels"])
            ]
            spec = pdb["spec"]
            scale = sum(
                rs.replicas
                for wl in self.workloads.values()
                if wl.namespace == namespace
                and scheduling.selector_matches(selector, wl.current.template["metadata"]["labels"])
                for rs in wl.sets
            )
            if "maxUnavailable" in spec:
                expected = scale
                desired = expected - _scaled(spec["maxUnavailable"], expected)
            elif isinstance(spec.get("minAvailable"), int):
                expected = len(matched)
                desired = int(spec["minAvailable"])
            else:
                expected = scale
                desired = _scaled(spec.get("minAvailable", 0), expected)
            disrupted = {
                p.name: ts(self._disrupted[p.key]) for p in matched if p.key in self._disrupted
            }
            healthy = sum(
                1 for p in matched if p.ready and not p.deleting and p.key not in self._disrupted
            )
            allowed = max(0, healthy - desired)
            old = pdb.get("status") or {}
            old_cond = next(iter(old.get("conditions") or []), None)
            status = "True" if allowed else "False"
            since = (
                old_cond["lastTransitionTime"]
                if old_cond is not None and old_cond["status"] == status
                else ts(self.w.t)
            )
            new: JsonDict = {
                "observedGeneration": 1,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "disruptionsAllowed": allowed,
                "expectedPods": expected,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": status,
                        "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "message": "",
                        "observedGeneration": 1,
                        "lastTransitionTime": since,
                    }
                ],
            }
            if disrupted:
                new["disruptedPods"] = disrupted
            if new != old:
                pdb["status"] = new
                self.w.tx.put("poddisruptionbudgets", pdb)


# ---------------------------------------------------------------------- helpers


def _room(request: Resources, allocatable: Resources, used: Resources) -> int:
    """How many more pods with this request fit."""
    counts = [
        int((allocatable.get(name, 0.0) - used.get(name, 0.0) + 1e-9) // value)
        for name, value in request.items()
        if value > 0
    ]
    return max(0, min(counts)) if counts else 0


def _surge(deploy: JsonDict, replicas: int) -> int:
    strategy = (deploy["spec"].get("strategy") or {}).get("rollingUpdate") or {}
    return _scaled(strategy.get("maxSurge", "25%"), replicas)


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(float(value[:-1]) / 100.0 * total)
    return int(value)


def _status_key(status: JsonDict) -> tuple[Any, ...]:
    conds = tuple((c["type"], c["status"], c["reason"]) for c in status.get("conditions", []))
    return (
        status.get("observedGeneration"),
        status.get("replicas"),
        status.get("updatedReplicas"),
        status.get("readyReplicas"),
        status.get("availableReplicas"),
        status.get("unavailableReplicas"),
        conds,
    )


def _ref(obj: JsonDict, kind: str, api_version: str) -> JsonDict:
    meta = obj["metadata"]
    return {
        "kind": kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": api_version,
    }


def _pod_ref(pod: JsonDict) -> JsonDict:
    return _ref(pod, "Pod", "v1")


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
        if not any(all(_expression_ok(e, fixed) for e in term) for term in terms):
            return False
    return not scheduling.untolerated(tolerations, [t.to_api() for t in pool.taints])


def _affinity_ok(affinity: JsonDict | None, labels: dict[str, str]) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution node affinity: any term matches."""
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    for term in required.get("nodeSelectorTerms") or []:
        if all(_expression_ok(e, labels) for e in term.get("matchExpressions") or []):
            return True
    return False


def _expression_ok(expr: JsonDict, labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


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


def _disruption_target(pod: JsonDict, condition: tuple[str, str], at: float) -> None:
    reason, message = condition
    conds = [c for c in pod["status"].get("conditions", []) if c["type"] != "DisruptionTarget"]
    conds.append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": ts(at),
            "reason": reason,
            "message": message,
        }
    )
    pod["status"]["conditions"] = conds


def _deleted_view(pod: JsonDict, at: float) -> JsonDict:
    pod["metadata"]["deletionTimestamp"] = ts(at)
    pod["metadata"]["deletionGracePeriodSeconds"] = 0
    return pod


def _parse(value: str) -> float:
    from mignurse.sim.controllers.base import parse_ts

    return parse_ts(value)
