"""The simulated control loops: Karpenter, kubelet, node lifecycle, NMA, scheduler, rollouts.

Event-driven: every future change is an action in one priority queue keyed by sim time,
so `run_until()` is deterministic for a given scenario and seed. All methods run under the
store lock; each action runs in a `Txn` so several edits to one object make one write.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mignurse.sim import dra, nodegroups, objects
from mignurse.sim.karpenter_versions import KarpenterTraits
from mignurse.sim.objects import JsonDict, micro_ts, ts
from mignurse.sim.provisioning import Provisioner
from mignurse.sim.scenario import (
    NMA_CONDITIONS,
    ConditionSpec,
    Lifecycle,
    NodeRef,
    PoolSpec,
    Scenario,
    Step,
    TimelineItem,
    format_duration,
    gate_value,
)
from mignurse.sim.store import Store
from mignurse.sim.workloads import POD_TERMINATION_GRACE, PodRecord, Workload, Workloads

NODE_MONITOR_PERIOD = 5.0  # --node-monitor-period: node-controller and cloud-node-lifecycle passes
KUBELET_STATUS_SYNC = 10.0  # kubelet nodeStatusUpdateFrequency: when it notices a cordon
KUBELET_STATUS_REPORT = 300.0  # kubelet nodeStatusReportFrequency: a Node write at least this often
LEASE_RENEW = 10.0  # kubelet renews its node Lease every 0.25 × nodeLeaseDurationSeconds (40 s)
NMA_HEARTBEAT = 300.0
DCGM_GRACE = 60.0
# Karpenter's event recorder skips a repeat of (reason, dedupe values) for 2 minutes unless the
# event sets its own timeout (KC pkg/events/recorder.go defaultDedupeTimeout).
KARPENTER_DEDUPE = 120.0
REPAIR_BLOCKED_DEDUPE = 900.0  # KC pkg/controllers/node/health/events.go DedupeTimeout
TERMINATION_POLL = 5.0  # node.termination requeues every 5 s until the instance is gone (KC)
STUCK_TERMINATING = 60.0  # a pod terminating 1 min past its deletion time no longer blocks (KC)
POD_EVENT_DEDUPE = 10.0  # KC nodeclaim/podevents dedupeTimeout
EVICTION_RETRY = 10.0  # the eviction queue retries a PDB-refused pod (inference: backoff cap)
INSTANCE_SHUTDOWN = 32.0  # EC2 shutting-down → terminated (inference)
SQS_LAG = 2.0  # EventBridge → SQS → Karpenter's long poll (inference)
SPOT_NOTICE = 120.0  # EC2 interrupts a spot instance two minutes after the warning
DISRUPTION_PASS = 5.0  # the disruption controller's next candidate pass (inference: < 10 s)
MNG_CORDON_DELAY = 60.0  # a failed check cordons the node about a minute later (inference)
MNG_RETRY = 60.0  # a repair held by the threshold or parallelism is tried again (inference)
MNG_REBOOT_DOWNTIME = 120.0  # RebootInstances until kubelet runs again (inference)
KUBELET_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
NODE_LIFECYCLE_LAG = 0.1  # the node lifecycle controller reacts to a Node update (informer)
# GPU operator: nvidia.com/gpu.deploy.<key> is the nodeSelector (`=true`) of each operand
# DaemonSet (NVIDIA/gpu-operator controllers/state_manager.go); the sim's DaemonSet controller
# follows label changes made through the API, and the device plugin advertises what the MIG
# labels say once it runs.
LABEL_GPU_DEPLOY = "nvidia.com/gpu.deploy."
OPERAND_DAEMONSETS = {
    "device-plugin": "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "dcgm-exporter": "nvidia-dcgm-exporter",
    "container-toolkit": "nvidia-container-toolkit-daemonset",
    "operator-validator": "nvidia-operator-validator",
    "mig-manager": "nvidia-mig-manager",
}
OPERAND_DELAY = 2.0  # the DaemonSet controller removes or starts the pod
ADVERTISE_DELAY = 5.0  # the device plugin registers with kubelet, which updates the Node
MIG_LABELS = ("nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/mig.strategy")
ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery utilrand: what generateName uses
ZONE_SUBNETS = {"a": 0, "b": 32, "c": 64, "d": 96}
ZONE_IDS = {"us-west-2": "usw2", "us-east-1": "use1", "us-east-2": "use2", "eu-west-1": "euw1"}


@dataclass(eq=False)
class Machine:
    """One instance: its NodeClaim (Karpenter pools), its Node, and what runs on it."""

    pool: PoolSpec
    nodeclaim: str | None
    node: str
    claim_uid: str
    node_uid: str
    instance_id: str
    ip: str
    zone: str
    image: str
    os_name: str
    launched_at: float
    lifecycle: Lifecycle
    extra_labels: dict[str, str]
    registered: bool = False
    ready: bool = False
    initialized: bool = False
    deleting: bool = False
    removed: bool = False
    kubelet_posting: bool = True
    nma_running: bool = False
    nma_memory: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    nma_faults: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    image_faults: set[str] = field(default_factory=set)  # faults its lifecycle (image) causes
    api_touched: bool = False
    nma_token: int = 0
    unhealthy_since: dict[str, float] = field(default_factory=dict)  # type → transition time
    repair_token: int = 0
    kubelet_token: int = 0
    pods: list[PodRecord] = field(default_factory=list)  # bound to the node, terminating included
    daemon_pods: list[tuple[str, str]] = field(default_factory=list)
    # EC2: running → shutting-down → terminated
    instance_state: str = "running"
    launched: bool = False  # NodeClaim Launched: its capacity counts against the pool's limits
    claim_gone: bool = False
    ready_at: float | None = None  # first Ready
    lease: JsonDict | None = None  # its kubelet's Lease, rewritten at each renewal
    lease_bucket: int = -1  # the second of every 10 s its kubelet renews at (-1: not renewing)
    nominated_until: float = 0.0  # Karpenter nominated it for pending pods: not disrupted
    last_pod_event: float | None = None  # NodeClaim status.lastPodEventTime
    consolidatable: bool = False
    consolidatable_token: int = 0
    drain_token: int = 0
    drained: bool = False  # node.termination got past the drain
    kubelet_sees_unschedulable: bool = False
    report_token: int = 0
    repair_due: float | None = None
    counted_unhealthy: bool = False
    mng_check: tuple[str, str, float] | None = None
    mng_token: int = 0
    mng_cordoned: bool = False
    mng_repairing: str | None = None  # Replace | Reboot while in progress
    boot: int = 0

    @property
    def alive(self) -> bool:
        return not self.deleting and not self.removed


class Txn:
    """Read-through cache of store objects; `flush()` writes each dirty object once."""

    def __init__(self, store: Store, written: Callable[[str, str], None] | None = None) -> None:
        self.store = store
        self.work: dict[tuple[str, str, str], JsonDict | None] = {}
        self.dirty: dict[tuple[str, str, str], None] = {}
        self.written = written  # told (plural, name) of every write, to drop cached views

    def get(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        key = (plural, namespace, name)
        if key not in self.work:
            self.work[key] = self.store.get(plural, namespace, name)
        return self.work[key]

    def put(self, plural: str, obj: JsonDict) -> None:
        key = (plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        self.work[key] = obj
        self.dirty[key] = None
        if self.written is not None:
            self.written(plural, key[2])

    def delete(self, plural: str, namespace: str, name: str) -> None:
        key = (plural, namespace, name)
        self.work[key] = None
        self.dirty[key] = None
        if self.written is not None:
            self.written(plural, name)

    def flush(self) -> None:
        for key in self.dirty:
            plural, namespace, name = key
            obj = self.work[key]
            if obj is None:
                self.store.delete(plural, namespace, name)
            else:
                self.store.put(plural, obj)
        self.dirty.clear()
        self.work.clear()


class World:
    """The controllers of one simulated cluster."""

    def __init__(self, scenario: Scenario, store: Store, start: float) -> None:
        self.scenario = scenario
        self.store = store
        self.start = start
        self.begin = start - scenario.warmup
        self.now = self.begin
        self.t = self.begin  # the time of the action being run (past launches set it back)
        self.rng = random.Random(scenario.seed)
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._tx: Txn | None = None
        self.machines: dict[str, Machine] = {}  # by node name
        self.claims: dict[str, Machine] = {}  # by NodeClaim name
        self.pool_machines: dict[str, list[Machine]] = {p.name: [] for p in scenario.pools}
        self.pool_target: dict[str, int] = {p.name: p.nodes for p in scenario.pools}
        self.pool_uid: dict[str, str] = {}
        self._reconcile_pending: set[str] = set()
        self._used_ips: set[str] = set()
        self._event_index: dict[tuple[str, ...], tuple[str, str]] = {}
        self._event_last: dict[tuple[str, str], float] = {}
        self._event_nanos = 0
        k = scenario.karpenter
        self.traits = KarpenterTraits.of(k.version) if k else None
        self.repair_enabled = bool(k and k.node_repair)
        self._karpenter_seen: dict[str, float] = {}  # Karpenter recorder dedupe: key → until
        self.pool_nodes: dict[str, int] = {p.name: 0 for p in scenario.pools}
        self.pool_unhealthy: dict[str, int] = {p.name: 0 for p in scenario.pools}
        self.workloads = Workloads(self)
        self._lease_members: dict[int, dict[Machine, None]] = {}
        self._lease_ticking: set[int] = set()
        self.provisioner = Provisioner(self)
        self.dra = dra.DraDriver(self)
        self.karpenter_workload: Workload | None = None
        minor = _minor(scenario.kubernetes_version)
        # kube-controller-manager --node-monitor-grace-period: 40 s, 50 s from Kubernetes 1.32
        # (kubernetes/kubernetes CHANGELOG-1.32.md, #126287).
        self.node_monitor_grace = 50.0 if minor >= 32 else 40.0
        # ScalingReplicaSet says "from A to B" from 1.32 (CHANGELOG-1.32.md, #125118).
        self.scaling_message_has_from = minor >= 32

    # ------------------------------------------------------------------ machinery

    @property
    def tx(self) -> Txn:
        assert self._tx is not None, "controller code must run inside World.txn()"
        return self._tx

    @contextmanager
    def txn(self) -> Iterator[Txn]:
        with self.store.lock:
            if self._tx is not None:
                yield self._tx
                return
            self._tx = Txn(self.store, self._written)
            try:
                yield self._tx
            finally:
                tx, self._tx = self._tx, None
                tx.flush()

    @contextmanager
    def api_txn(self) -> Iterator[Txn]:
        """A transaction for an API request: controllers react at the current sim time."""
        with self.store.lock:
            self.t = self.now
            with self.txn() as tx:
                yield tx

    def _written(self, plural: str, name: str) -> None:
        if plural == "nodes":
            self.workloads.forget(name)

    def schedule(self, at: float, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), fn, args))

    def run_until(self, until: float) -> None:
        with self.store.lock:
            while self._queue and self._queue[0][0] <= until:
                at, _, fn, args = heapq.heappop(self._queue)
                self.now = max(self.now, at)
                self.t = at  # actions queued for the past (backdated launches) keep their time
                with self.txn():
                    fn(*args)
            self.now = max(self.now, until)
            self.t = self.now

    def _uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def _next_tick(self, period: float) -> float:
        """The next run of a periodic loop; a backdated loop skips the ticks already past."""
        due = self.t + period
        if due <= self.now:
            due += math.ceil((self.now - due) / period + 1e-9) * period
        return due

    def _suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(ALNUM) for _ in range(n))

    # ------------------------------------------------------------------ events

    def emit(
        self,
        involved: JsonDict,
        reason: str,
        message: str,
        *,
        event_type: str = "Normal",
        component: str,
        host: str | None = None,
        recorder: str = "",
    ) -> None:
        """Record a core/v1 Event the way client-go's recorder does, with count aggregation."""
        at = self.t
        if at + self.scenario.event_ttl <= self.now:
            return  # already past its TTL: a backdated launch leaves no visible trace
        namespace = involved.get("namespace") or "default"
        dedupe = (
            involved.get("uid", ""),
            involved["kind"],
            reason,
            message,
            component,
            host or "",
            recorder,
        )
        existing = self._event_index.get(dedupe)
        if existing is not None:
            last = self._event_last.get(existing)
            obj = self.tx.get("events", *existing) if last is not None else None
            if obj is not None and last is not None and at - last <= self.scenario.event_dedupe:
                obj["count"] = int(obj.get("count", 1)) + 1
                obj["lastTimestamp"] = ts(at)
                self.tx.put("events", obj)
                self._event_last[existing] = at
                return
        self._event_nanos += 1
        name = f"{involved['name']}.{int(at * 1e9) + self._event_nanos:x}"
        obj = objects.build_event(
            name=name,
            namespace=namespace,
            uid=self._uid(),
            involved=involved,
            reason=reason,
            message=message,
            event_type=event_type,
            component=component,
            host=host,
            first=at,
            last=at,
        )
        self.tx.put("events", obj)
        key = (namespace, name)
        self._event_index[dedupe] = key
        self._event_last[key] = at
        self.schedule(at + self.scenario.event_ttl, self._expire_event, key)

    def _expire_event(self, key: tuple[str, str]) -> None:
        last = self._event_last.get(key)
        if last is None:
            return
        due = last + self.scenario.event_ttl
        if due > self.t + 1e-6:
            self.schedule(due, self._expire_event, key)
            return
        del self._event_last[key]
        self.tx.delete("events", *key)

    def _node_ref(self, m: Machine) -> JsonDict:
        return {"kind": "Node", "name": m.node, "uid": m.node_uid, "apiVersion": "v1"}

    def _kubelet_ref(self, m: Machine) -> JsonDict:
        # kubelet's nodeRef uses the node name as UID and carries no apiVersion.
        return {"kind": "Node", "name": m.node, "uid": m.node}

    def _claim_ref(self, m: Machine) -> JsonDict:
        assert m.nodeclaim is not None
        return {
            "kind": "NodeClaim",
            "name": m.nodeclaim,
            "uid": m.claim_uid,
            "apiVersion": objects.KARPENTER_API,
        }

    def _kubelet_event(self, m: Machine, reason: str, message: str, etype: str = "Normal") -> None:
        # A restarted kubelet has a fresh recorder: its events are new objects, not count+1.
        self.emit(
            self._kubelet_ref(m),
            reason,
            message,
            event_type=etype,
            component="kubelet",
            host=m.node,
            recorder=f"kubelet-{m.kubelet_token}",
        )

    def _karpenter_event(
        self, ref: JsonDict, reason: str, message: str, etype: str = "Normal"
    ) -> None:
        self.emit(ref, reason, message, event_type=etype, component="karpenter")

    def _publish(
        self,
        ref: JsonDict,
        reason: str,
        message: str,
        etype: str = "Normal",
        *,
        dedupe: tuple[str, ...],
        timeout: float = KARPENTER_DEDUPE,
    ) -> None:
        """Karpenter's events.Recorder: drop a repeat of (reason, dedupe values) until its
        timeout has passed since the first one (KC pkg/events/recorder.go)."""
        key = f"{reason.lower()}-{'-'.join(dedupe)}"
        if self._karpenter_seen.get(key, -math.inf) > self.t:
            return
        self._karpenter_seen[key] = self.t + timeout
        self._karpenter_event(ref, reason, message, etype)

    @staticmethod
    def _transition_message(ctype: str, old: str, new: str, reason: str, message: str) -> str:
        text = (
            f"Status condition transitioned, Type: {ctype}, Status: {old} -> {new}, "
            f"Reason: {reason}"
        )
        return text + (f", Message: {message}" if message else "")

    # ------------------------------------------------------------------ bootstrap

    def bootstrap(self) -> None:
        """Create the static objects and the pools' nodes, then queue the scenario."""
        self.t = self.begin
        with self.txn():
            namespaces = {"default", "kube-system", "kube-node-lease", "kube-public"}
            if any(objects.instance_type(p.instance_type).gpu for p in self.scenario.pools):
                namespaces.add("gpu-operator")
            if self.dra.enabled():
                namespaces.add(dra.NAMESPACE)
            for p in self.scenario.pools:
                if p.workload:
                    namespaces.add(p.workload.namespace)
            for ns in sorted(namespaces):
                self.tx.put(
                    "namespaces", objects.build_namespace(ns, self._uid(), self.begin - 86400 * 90)
                )
            for pool in self.scenario.pools:
                if pool.kind == "nodepool":
                    self._create_nodepool(pool)
                if pool.workload:
                    self._create_workload(pool)
            if self.scenario.karpenter:
                self._create_karpenter()
            if self.dra.enabled():
                self.dra.bootstrap()
        for pool in self.scenario.pools:
            # One transaction per pool keeps the peak memory of a large build bounded.
            with self.txn():
                for ex in pool.existing:
                    for i in range(ex.count):
                        launched = self.start - ex.age
                        image = ex.image or pool.image
                        lc = pool.lifecycle_for(image)
                        if ex.steps is not None:
                            lc = Lifecycle(image, ex.steps, lc.gpu_resources)
                        self.launch(
                            pool,
                            launched,
                            image=image,
                            os_name=ex.os or pool.os,
                            lifecycle=lc,
                            labels=dict(ex.labels),
                            node_name=ex.names[i] if ex.names else None,
                        )
        with self.txn():
            self.workloads.bootstrap()
            for pool in self.scenario.pools:
                self._reconcile_pool(pool.name)  # the size each pool starts the warmup with
            self.provisioner.start_polling()
            for item in self.scenario.timeline:
                self.schedule(max(self.begin, self.start + item.at), self._timeline, item)

    def _create_nodepool(self, pool: PoolSpec) -> None:
        it = objects.instance_type(pool.instance_type)
        uid = self._uid()
        self.pool_uid[pool.name] = uid
        requirements = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it.name]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [pool.capacity_type]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": [it.arch]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(pool.zones)},
        ]
        labels = dict(pool.labels)
        if pool.mig_config:
            labels["nvidia.com/mig.config"] = pool.mig_config
        obj = objects.build_nodepool(
            name=pool.name,
            uid=uid,
            created=self.begin - 86400 * 60,
            nodeclass=pool.nodeclass,
            labels=labels,
            requirements=requirements,
            taints=[t.to_api() for t in pool.taints],
            expire_after=pool.expire_after,
            termination_grace_period=format_duration(pool.termination_grace_period)
            if pool.termination_grace_period
            else None,
            consolidation_policy=pool.consolidation_policy,
            consolidate_after=pool.consolidate_after,
            budgets=[dict(b) for b in pool.budgets],
            limits=dict(pool.limits)
            if pool.limits is not None
            else {"nvidia.com/gpu": str(max(8, pool.nodes * it.gpu_count * 2))}
            if it.gpu
            else {"cpu": "1000"},
            weight=None,
        )
        self.tx.put("nodepools", obj)

    def _update_nodepool_status(self, pool: PoolSpec) -> None:
        if pool.kind != "nodepool":
            return
        obj = self.tx.get("nodepools", "", pool.name)
        if obj is None:
            return
        it = objects.instance_type(pool.instance_type)
        count = self.pool_nodes[pool.name]
        resources = {
            "cpu": str(it.cpu * count),
            "memory": f"{it.memory_mib * 1024 * count}Ki",
            "nodes": str(count),
            "pods": str(it.max_pods * count),
            "ephemeral-storage": f"{104845292 * count}Ki",
        }
        if it.gpu is not None and not pool.dra:
            for res, per_node in objects.mig_resources(
                it, pool.mig_config, pool.mig_strategy
            ).items():
                resources[res] = str(per_node * count)
        if obj["status"].get("resources") != resources:
            obj["status"]["resources"] = resources
            self.tx.put("nodepools", obj)

    # ------------------------------------------------------------------ launch

    def _allocate_ip(self, zone: str) -> str:
        base = ZONE_SUBNETS.get(zone[-1], 0)
        while True:
            ip = f"10.0.{base + self.rng.randrange(32)}.{self.rng.randrange(4, 255)}"
            if ip not in self._used_ips:
                self._used_ips.add(ip)
                return ip

    def launch(
        self,
        pool: PoolSpec,
        at: float,
        *,
        image: str | None = None,
        os_name: str | None = None,
        lifecycle: Lifecycle | None = None,
        labels: dict[str, str] | None = None,
        node_name: str | None = None,
    ) -> Machine:
        """Start an instance launched at `at`; phases already in the past run right away."""
        image = image or pool.image
        zone = pool.zones[len(self.pool_machines[pool.name]) % len(pool.zones)]
        ip = self._allocate_ip(zone)
        name = node_name or objects.node_name_for_ip(ip, self.scenario.region)
        claim = f"{pool.name}-{self._suffix()}" if pool.kind == "nodepool" else None
        m = Machine(
            pool=pool,
            nodeclaim=claim,
            node=name,
            claim_uid=self._uid(),
            node_uid=self._uid(),
            instance_id=f"i-0{self.rng.getrandbits(64):016x}",
            ip=ip,
            zone=zone,
            image=image,
            os_name=os_name or pool.os,
            launched_at=at,
            lifecycle=lifecycle or pool.lifecycle_for(image),
            extra_labels=labels or {},
        )
        self.machines[name] = m
        if claim:
            self.claims[claim] = m
        self.pool_machines[pool.name].append(m)
        phases: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []
        if claim:
            phases.append((at, self._create_claim, (m,)))
            phases.append((at + pool.launch_after, self._claim_launched, (m,)))
        phases.append((at + pool.register_after, self._register, (m,)))
        for step in m.lifecycle.steps:
            phases.append((at + step.after, self._lifecycle_step, (m, step)))
        saved = self.t
        for when, fn, args in phases:
            if when <= self.now:
                self.t = when
                fn(*args)
            else:
                self.schedule(when, fn, *args)
        self.t = saved
        backdated = at + pool.register_after < self.now
        if backdated and m.registered and not m.removed and m.kubelet_posting:
            self._heartbeat_catch_up(m)
        return m

    def _heartbeat_catch_up(self, m: Machine) -> None:
        """A node launched before now has kept reporting: its conditions carry the heartbeat
        of its last status report."""
        registered = m.launched_at + m.pool.register_after
        last = registered + math.floor((self.now - registered) / KUBELET_STATUS_REPORT + 1e-9) * (
            KUBELET_STATUS_REPORT
        )
        node = self._node(m)
        if node is None:
            return
        beat = ts(last)
        changed = False
        for cond in node["status"].get("conditions", []):
            if (
                cond["type"] in KUBELET_CONDITIONS
                and cond["status"] != "Unknown"
                and cond["lastHeartbeatTime"] < beat
            ):
                cond["lastHeartbeatTime"] = beat
                changed = True
        if changed:
            self.tx.put("nodes", node)

    def _create_claim(self, m: Machine) -> None:
        pool = m.pool
        it = objects.instance_type(pool.instance_type)
        requests = {"cpu": "2150m", "memory": "2130Mi", "pods": "8"}
        if not pool.dra:  # a DRA pool's pods claim devices, they request no nvidia.com/*
            gpu_res = objects.mig_resources(it, pool.mig_config, pool.mig_strategy)
            requests.update({k: str(v) for k, v in gpu_res.items() if v})
        assert m.nodeclaim is not None
        obj = objects.build_nodeclaim(
            name=m.nodeclaim,
            uid=m.claim_uid,
            created=self.t,
            nodepool=pool.name,
            nodepool_uid=self.pool_uid.get(pool.name, ""),
            nodeclass=pool.nodeclass,
            instance=it,
            zone=m.zone,
            capacity_type=pool.capacity_type,
            taints=[t.to_api() for t in pool.taints],
            expire_after=pool.expire_after,
            termination_grace_period=format_duration(pool.termination_grace_period)
            if pool.termination_grace_period
            else None,
            nodepool_hash=objects.stable_hex("np", pool.name),
            requests=requests,
        )
        self.tx.put("nodeclaims", obj)

    def _claim(self, m: Machine) -> JsonDict | None:
        return self.tx.get("nodeclaims", "", m.nodeclaim) if m.nodeclaim else None

    def _set_claim_condition(
        self, m: Machine, ctype: str, status: str, reason: str, message: str = ""
    ) -> None:
        obj = self._claim(m)
        if obj is None:
            return
        conds: list[JsonDict] = obj["status"].setdefault("conditions", [])
        current = next((c for c in conds if c["type"] == ctype), None)
        old_status = current["status"] if current else "Unknown"
        if current and (current["status"], current["reason"], current["message"]) == (
            status,
            reason,
            message,
        ):
            return
        new = objects.nodeclaim_condition(ctype, status, reason, message, now=self.t)
        if current is not None and current["status"] == status:
            new["lastTransitionTime"] = current["lastTransitionTime"]
        if current is None:
            conds.append(new)
        else:
            conds[conds.index(current)] = new
        conds.sort(key=lambda c: c["type"])
        self.tx.put("nodeclaims", obj)
        # operatorpkg status controller: an event only for a condition it saw before whose
        # status changed (awslabs/operatorpkg status/controller.go, as pinned by KC's go.mod).
        if current is not None and old_status != status:
            self._karpenter_event(
                self._claim_ref(m),
                ctype,
                self._transition_message(ctype, old_status, status, reason, message),
            )

    def _claim_launched(self, m: Machine) -> None:
        if m.deleting:
            return
        obj = self._claim(m)
        if obj is None:
            return
        it = objects.instance_type(m.pool.instance_type)
        spec_in = self._node_input(m)
        capacity, allocatable = objects.node_resources(spec_in)
        obj["status"].update(
            {
                "providerID": f"aws:///{m.zone}/{m.instance_id}",
                "imageID": m.image,
                "capacity": capacity,
                "allocatable": allocatable,
            }
        )
        obj["metadata"]["labels"]["karpenter.k8s.aws/instance-hypervisor"] = "nitro"
        obj["metadata"]["labels"]["karpenter.k8s.aws/instance-network-bandwidth"] = str(
            it.network_bandwidth
        )
        self.tx.put("nodeclaims", obj)
        m.launched = True
        self._set_claim_condition(m, "Launched", "True", "Launched")
        if self.provisioner.pending_pods():
            self.provisioner.trigger()  # a NodeClaim event: the provisioner looks again

    def _node_input(self, m: Machine) -> objects.NodeSpecInput:
        pool = m.pool
        it = objects.instance_type(pool.instance_type)
        region = self.scenario.region
        region_id = ZONE_IDS.get(region, region.replace("-", "")[:4])
        zone_id = f"{region_id}-az{ord(m.zone[-1]) - ord('a') + 1}"
        labels = dict(pool.labels)
        labels.update(m.extra_labels)
        return objects.NodeSpecInput(
            name=m.node,
            uid=m.node_uid,
            created=m.launched_at + pool.register_after,
            region=region,
            zone=m.zone,
            zone_id=zone_id,
            instance=it,
            instance_id=m.instance_id,
            private_ip=m.ip,
            capacity_type=pool.capacity_type,
            os=objects.os_image(m.os_name),
            image_id=m.image,
            nodepool=pool.name if pool.kind == "nodepool" else None,
            nodegroup=pool.name if pool.kind == "nodegroup" else None,
            nodeclass=pool.nodeclass,
            cluster_name=self.scenario.cluster_name,
            extra_labels=labels,
            mig_config=pool.mig_config,
            mig_strategy=pool.mig_strategy,
            taints=tuple(t.to_api() for t in pool.taints),
            gpu_resources=m.lifecycle.gpu_resources,
            nodepool_hash=objects.stable_hex("np", pool.name),
            driver_version=objects.os_image(m.os_name).nvidia_driver
            or objects.DEFAULT_NVIDIA_DRIVER,
            dra=pool.dra,
        )

    def _register(self, m: Machine) -> None:
        if m.deleting:
            return
        node = objects.build_node(self._node_input(m), ready=False)
        if m.pool.kind == "nodepool":
            node["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": objects.KARPENTER_API,
                    "kind": "NodeClaim",
                    "name": m.nodeclaim,
                    "uid": m.claim_uid,
                    "blockOwnerDeletion": True,
                }
            ]
        self.tx.put("nodes", node)
        m.registered = True
        if m.pool.dra:
            self.dra.registered(m, node["metadata"]["labels"])
        self._kubelet_startup_events(m)
        self.emit(
            self._node_ref(m),
            "RegisteredNode",
            f"Node {m.node} event: Registered Node {m.node} in Controller",
            component="node-controller",
        )
        claim = self._claim(m)
        if claim is not None:
            claim["status"]["nodeName"] = m.node
            self.tx.put("nodeclaims", claim)
            self._set_claim_condition(m, "Registered", "True", "Registered")
        if m.pool.daemonsets:
            self._create_daemon_pods(m)
        self.pool_nodes[m.pool.name] += 1
        self._update_nodepool_status(m.pool)
        self._start_lease(m)
        self._schedule_status_report(m)
        if self.workloads.pending():
            # A new Node: the scheduler retries its unschedulable pods, Karpenter looks again.
            self.workloads.schedule_soon()
            self.provisioner.trigger()
        if m.pool.kind == "nodepool":
            self._refresh_health(m, node)  # a new Node is NotReady: it counts for the guard
            self._health_reconcile(m)  # the Node's create event

    def _kubelet_startup_events(self, m: Machine) -> None:
        self._kubelet_event(m, "Starting", "Starting kubelet.")
        self._kubelet_event(
            m, "InvalidDiskCapacity", "invalid capacity 0 on image filesystem", "Warning"
        )
        for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
            self._kubelet_event(m, reason, f"Node {m.node} status is now: {reason}")
        self._kubelet_event(
            m, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods"
        )

    # ------------------------------------------------------------------ node state

    def _node(self, m: Machine) -> JsonDict | None:
        if not m.registered or m.removed:
            return None
        return self.tx.get("nodes", "", m.node)

    def _set_node_condition(
        self, m: Machine, ctype: str, status: str, reason: str, message: str
    ) -> bool:
        node = self._node(m)
        if node is None:
            return False
        conds: list[JsonDict] = node["status"].setdefault("conditions", [])
        current = next((c for c in conds if c["type"] == ctype), None)
        old_status = current["status"] if current else "Unknown"
        heartbeat = ts(self.t)
        if current is not None and status == "Unknown" and ctype in KUBELET_CONDITIONS:
            heartbeat = current["lastHeartbeatTime"]  # the controller keeps the last heartbeat
        new = objects.kubelet_condition(ctype, status, reason, message, now=self.t, since=self.t)
        new["lastHeartbeatTime"] = heartbeat
        if current is not None and current["status"] == status:
            new["lastTransitionTime"] = current["lastTransitionTime"]
        if current is not None and all(
            current.get(k) == new[k] for k in ("status", "reason", "message")
        ):
            return False
        if current is None:
            conds.append(new)
        else:
            conds[conds.index(current)] = new
        self.tx.put("nodes", node)
        # Karpenter's status controller watches every Node (KC controllers.go registers
        # status.NewGenericObjectController[*corev1.Node] without a filter).
        if self.scenario.karpenter and current is not None and old_status != status:
            self._karpenter_event(
                self._node_ref(m),
                ctype,
                self._transition_message(ctype, old_status, status, reason, message),
            )
        transitioned = current is None or current["status"] != status
        self._conditions_changed(m, node, transitioned)
        return True

    def _set_taint(self, m: Machine, key: str, effect: str, value: str | None = None) -> None:
        node = self._node(m)
        if node is None:
            return
        taints: list[JsonDict] = node["spec"].setdefault("taints", [])
        if any(t["key"] == key and t["effect"] == effect for t in taints):
            return
        taint: JsonDict = {"key": key, "effect": effect}
        if value is not None:
            taint["value"] = value
        if effect == "NoExecute":
            taint["timeAdded"] = ts(self.t)
        taints.append(taint)
        self.tx.put("nodes", node)
        self._node_written(m)
        if effect == "NoExecute":
            self.workloads.noexecute_tainted(m, key)

    def _remove_taint(self, m: Machine, key: str) -> None:
        node = self._node(m)
        if node is None or not node["spec"].get("taints"):
            return
        kept = [t for t in node["spec"]["taints"] if t["key"] != key]
        if len(kept) != len(node["spec"]["taints"]):
            if kept:
                node["spec"]["taints"] = kept
            else:
                del node["spec"]["taints"]
            self.tx.put("nodes", node)
            self._node_written(m)

    def _set_labels(self, m: Machine, labels: dict[str, str | None]) -> None:
        node = self._node(m)
        if node is None:
            return
        current = node["metadata"].setdefault("labels", {})
        for key, value in labels.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        node["metadata"]["labels"] = dict(sorted(current.items()))
        self.tx.put("nodes", node)
        self._node_written(m)
        if m.pool.dra:
            self.dra.labels_changed(m, current)

    def _set_allocatable(self, m: Machine, resources: dict[str, str | None]) -> None:
        node = self._node(m)
        if node is None:
            return
        for section in ("capacity", "allocatable"):
            res = node["status"].setdefault(section, {})
            for key, value in resources.items():
                if value is None:
                    res.pop(key, None)
                else:
                    res[key] = value
            node["status"][section] = dict(sorted(res.items()))
        self.tx.put("nodes", node)
        self._node_written(m)

    # ------------------------------------------------------------------ kubelet, NMA

    def _lifecycle_step(self, m: Machine, step: Step) -> None:
        if m.removed or not m.registered or m.instance_state != "running":
            return
        self.apply_step(m, step, from_image=True)

    def apply_step(self, m: Machine, step: Step, *, from_image: bool = False) -> None:
        if step.kubelet == "restart":
            self._kubelet_restart(m)
        elif step.kubelet == "stop":
            self._kubelet_stop(m)
        elif step.kubelet == "start":
            self._kubelet_start(m)
        if step.ready is True:
            self._become_ready(m)
        elif step.ready is False:
            self._become_not_ready(
                m, step.reason or "KubeletNotReady", step.message or "container runtime is down"
            )
        for cond in step.conditions:
            self._apply_condition(m, cond, from_image)
        if step.labels:
            self._set_labels(m, dict(step.labels))
        for taint in step.taints:
            self._set_taint(m, taint.key, taint.effect, taint.value)
        for key in step.remove_taints:
            self._remove_taint(m, key)
        if step.allocatable:
            self._set_allocatable(m, dict(step.allocatable))
        if step.nma_restart:
            self._nma_start(m)
        for ev in step.events:
            ref = self._kubelet_ref(m) if ev.source == "kubelet" else self._node_ref(m)
            host = m.node if ev.source in ("kubelet", "eks-node-monitoring-agent") else None
            self.emit(
                ref, ev.reason, ev.message, event_type=ev.type, component=ev.source, host=host
            )

    def _apply_condition(self, m: Machine, cond: ConditionSpec, from_image: bool = False) -> None:
        if cond.type == "Ready":
            if cond.status == "True":
                self._become_ready(m)
            elif cond.status == "False":
                self._become_not_ready(m, cond.reason or "KubeletNotReady", cond.message)
            else:
                self._set_node_condition(
                    m,
                    "Ready",
                    "Unknown",
                    cond.reason or "NodeStatusUnknown",
                    cond.message or "Kubelet stopped posting node status.",
                )
            return
        if cond.type in NMA_CONDITIONS:
            value = (cond.status, cond.reason, cond.message)
            m.nma_memory[cond.type] = value
            if cond.status == "False":
                m.nma_faults[cond.type] = value
                if from_image:
                    m.image_faults.add(cond.type)
            else:
                m.nma_faults.pop(cond.type, None)
                m.image_faults.discard(cond.type)
        self._set_node_condition(m, cond.type, cond.status, cond.reason, cond.message)

    def _become_ready(self, m: Machine) -> None:
        first = not m.initialized
        m.ready = True
        if m.ready_at is None:
            m.ready_at = self.t
        if self._set_node_condition(m, "Ready", "True", *objects.READY_TRUE[1:]):
            self._kubelet_event(m, "NodeReady", f"Node {m.node} status is now: NodeReady")
        self._remove_taint(m, "node.kubernetes.io/not-ready")
        self._remove_taint(m, "node.kubernetes.io/unreachable")
        if m.pool.dra:
            self.dra.node_ready(m)
        if first:
            m.initialized = True
            if m.pool.kind == "nodepool":
                self._set_labels(m, {"karpenter.sh/initialized": "true"})
                self._set_claim_condition(m, "Initialized", "True", "Initialized")
                self._set_claim_condition(m, "Ready", "True", "Ready")
            if m.pool.node_monitoring_agent:
                self._nma_start(m)
            self._consolidatable_check(m)
        self.workloads.node_ready(m)
        if self.scenario.karpenter is not None and m.nodeclaim is not None:
            self.provisioner.trigger()

    def _become_not_ready(self, m: Machine, reason: str, message: str) -> None:
        m.ready = False
        if self._set_node_condition(m, "Ready", "False", reason, message):
            self._kubelet_event(m, "NodeNotReady", f"Node {m.node} status is now: NodeNotReady")
        self._set_taint(m, "node.kubernetes.io/not-ready", "NoSchedule")
        self._set_taint(m, "node.kubernetes.io/not-ready", "NoExecute")

    def _kubelet_restart(self, m: Machine) -> None:
        m.kubelet_posting = True
        m.kubelet_token += 1
        self._renew_lease_now(m)
        self._kubelet_startup_events(m)
        if m.pool.dra:
            self.dra.kubelet_started(m)
        if m.ready:
            self._become_not_ready(
                m, "KubeletNotReady", "container runtime status check may not have completed yet"
            )

    def _kubelet_stop(self, m: Machine) -> None:
        m.kubelet_posting = False
        m.kubelet_token += 1
        m.report_token += 1
        if m.registered and not m.removed:
            # The Lease keeps the renewal before the stop; the node lifecycle controller goes
            # by it (or the Node's heartbeat) and marks the node after the grace period.
            last = self._last_renewal(m.lease_bucket, self.t) if m.lease_bucket >= 0 else self.t
            m.lease_bucket = -1
            self._write_lease(m, last)
            due = last + self.node_monitor_grace
            self.schedule(max(self.t, due), self._node_monitor_grace, m, m.kubelet_token)
        for pod in m.pods:
            if pod.deleting:
                pod.gone_at = None  # nobody left to confirm the deletion

    def _node_monitor_grace(self, m: Machine, token: int) -> None:
        if m.kubelet_posting or token != m.kubelet_token or m.removed:
            return
        changed = False
        for ctype in KUBELET_CONDITIONS:
            changed |= self._set_node_condition(
                m, ctype, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            )
        m.ready = False
        self._set_taint(m, "node.kubernetes.io/unreachable", "NoSchedule")
        self._set_taint(m, "node.kubernetes.io/unreachable", "NoExecute")
        if changed:
            self.emit(
                self._node_ref(m),
                "NodeNotReady",
                f"Node {m.node} status is now: NodeNotReady",
                component="node-controller",
            )
            self.workloads.node_unknown(m)

    def _kubelet_start(self, m: Machine) -> None:
        m.kubelet_posting = True
        m.kubelet_token += 1
        self._renew_lease_now(m)
        if m.pool.dra:
            self.dra.kubelet_started(m)
        self._schedule_status_report(m)
        for ctype, values in objects.KUBELET_HEALTHY.items():
            self._set_node_condition(m, ctype, *values)
        self._remove_taint(m, "node.kubernetes.io/unreachable")
        self._become_not_ready(
            m, "KubeletNotReady", "PLEG is not healthy: pleg has yet to be successful"
        )

    # ------------------------------------------------------------------ kubelet heartbeats

    def _start_lease(self, m: Machine) -> None:
        """The kubelet's node Lease in kube-node-lease, renewed every 10 s while it runs."""
        registered = m.launched_at + m.pool.register_after
        m.lease = objects.build_lease(
            node=m.node,
            node_uid=m.node_uid,
            uid=objects.stable_uuid("lease", m.node_uid),
            created=registered,
            renewed=registered,
        )
        bucket = int(registered % LEASE_RENEW)
        self._join_lease_bucket(m, bucket)
        self._write_lease(m, min(self.now, self._last_renewal(bucket, self.now)))

    def _last_renewal(self, bucket: int, at: float) -> float:
        """The last renewal at or before `at` of a kubelet renewing at second `bucket` of
        every 10 s."""
        return math.floor((at - bucket) / LEASE_RENEW) * LEASE_RENEW + bucket

    def _write_lease(self, m: Machine, renewed: float) -> None:
        if m.lease is None:
            return
        m.lease["spec"]["renewTime"] = micro_ts(max(renewed, m.launched_at + m.pool.register_after))
        self.tx.put("leases", m.lease)

    def _renew_lease_now(self, m: Machine) -> None:
        """A kubelet that (re)starts renews at once, then every 10 s from then on."""
        if m.lease is None or m.removed:
            return
        self._write_lease(m, self.t)
        self._join_lease_bucket(m, int(self.t % LEASE_RENEW))

    def _join_lease_bucket(self, m: Machine, bucket: int) -> None:
        # Renewals of all kubelets due in the same second run as one action (cheap at scale).
        m.lease_bucket = bucket
        self._lease_members.setdefault(bucket, {})[m] = None
        if bucket not in self._lease_ticking:
            self._lease_ticking.add(bucket)
            due = self._last_renewal(bucket, max(self.t, self.now)) + LEASE_RENEW
            self.schedule(due, self._lease_tick, bucket)

    def _lease_tick(self, bucket: int) -> None:
        members = self._lease_members.get(bucket, {})
        live = {
            m: None
            for m in members
            if m.lease_bucket == bucket and not m.removed and m.kubelet_posting
        }
        self._lease_members[bucket] = live
        if not live:
            self._lease_ticking.discard(bucket)
            return
        renewed = micro_ts(self.t)
        for m in live:
            assert m.lease is not None
            m.lease["spec"]["renewTime"] = renewed
            self.tx.put("leases", m.lease)
        self.schedule(self.t + LEASE_RENEW, self._lease_tick, bucket)

    def _schedule_status_report(self, m: Machine) -> None:
        """nodeStatusReportFrequency: the kubelet writes its Node at least every 5 minutes
        even when nothing changed (lastHeartbeatTime moves)."""
        registered = m.launched_at + m.pool.register_after
        # The next report after now (a backdated node skips the ones already past).
        periods = math.floor((max(self.t, self.now) - registered) / KUBELET_STATUS_REPORT + 1e-9)
        m.report_token += 1
        self.schedule(
            registered + (periods + 1) * KUBELET_STATUS_REPORT,
            self._status_report,
            m,
            m.report_token,
        )

    def _status_report(self, m: Machine, token: int) -> None:
        if token != m.report_token or m.removed or not m.kubelet_posting:
            return
        node = self._node(m)
        if node is not None:
            beat = ts(self.t)
            for cond in node["status"].get("conditions", []):
                if cond["type"] in KUBELET_CONDITIONS and cond["status"] != "Unknown":
                    cond["lastHeartbeatTime"] = beat
            self.tx.put("nodes", node)
            self._node_written(m)
        self._schedule_status_report(m)

    def _nma_types(self, m: Machine) -> list[str]:
        it = objects.instance_type(m.pool.instance_type)
        types = ["KernelReady", "NetworkingReady", "StorageReady", "ContainerRuntimeReady"]
        if it.gpu is not None:
            types.insert(0, "AcceleratedHardwareReady")
        return types

    def _nma_start(self, m: Machine) -> None:
        """Agent start: every managed condition True with a fresh transition (NMA#266)."""
        if not m.registered or m.removed:
            return
        restarted = m.nma_running
        m.nma_running = True
        for ctype in self._nma_types(m):
            reason, message = objects.NMA_HEALTHY[ctype]
            m.nma_memory[ctype] = ("True", reason, message)
            node = self._node(m)
            if node is not None and restarted:
                # A restart re-posts True even when it already was, with a new transition time.
                for c in node["status"].get("conditions", []):
                    if c["type"] == ctype and c["status"] == "True":
                        c["lastTransitionTime"] = ts(self.t)
                self.tx.put("nodes", node)
            self._set_node_condition(m, ctype, "True", reason, message)
        for ctype, fault in m.nma_faults.items():
            # A persistent fault is found again once the agent's DCGM grace period is over.
            self.schedule(self.t + DCGM_GRACE, self._nma_refault, m, ctype, fault)
        m.nma_token += 1
        self.schedule(self._next_tick(NMA_HEARTBEAT), self._nma_heartbeat, m, m.nma_token)

    def _nma_refault(self, m: Machine, ctype: str, fault: tuple[str, str, str]) -> None:
        if m.removed or not m.nma_running or m.nma_faults.get(ctype) != fault:
            return
        m.nma_memory[ctype] = fault
        self._set_node_condition(m, ctype, *fault)

    def _nma_heartbeat(self, m: Machine, token: int) -> None:
        if m.removed or token != m.nma_token:
            return
        if m.api_touched:
            m.api_touched = False
            for ctype, value in m.nma_memory.items():
                self._set_node_condition(m, ctype, *value)
        self.schedule(self._next_tick(NMA_HEARTBEAT), self._nma_heartbeat, m, token)

    # ------------------------------------------------------------------ Karpenter node repair

    def _conditions_changed(self, m: Machine, node: JsonDict, transitioned: bool) -> None:
        if m.pool.kind == "nodepool":
            self._refresh_health(m, node)
            tr = self.traits
            # From KC v1.7.0 node.health only wakes for a condition status/transition change.
            if transitioned or (tr is not None and tr.reconciles_on_every_node_update):
                self._health_reconcile(m)
        else:
            self._mng_observe(m, node)

    def _node_written(self, m: Machine) -> None:
        """Any other Node write: before KC v1.7.0 it reconciles node.health too."""
        tr = self.traits
        if m.pool.kind == "nodepool" and tr is not None and tr.reconciles_on_every_node_update:
            self._health_reconcile(m)

    def _refresh_health(self, m: Machine, node: JsonDict) -> None:
        """Which repair policies the node matches now (type + status), with their deadlines."""
        policies = self.traits.repair_policies if self.traits else {}
        unhealthy: dict[str, float] = {}
        for c in node["status"].get("conditions", []):
            toleration = policies.get((c["type"], c["status"]))
            if toleration is not None:
                unhealthy[c["type"]] = _parse_ts(c["lastTransitionTime"]) + toleration
        m.unhealthy_since = unhealthy
        self._count_health(m)

    def _count_health(self, m: Machine) -> None:
        counted = bool(m.unhealthy_since) and m.registered and not m.removed
        if counted != m.counted_unhealthy:
            m.counted_unhealthy = counted
            self.pool_unhealthy[m.pool.name] += 1 if counted else -1

    def _pool_over_guard(self, pool: str) -> bool:
        """More unhealthy Nodes than ceil(20% of the NodePool's Nodes) (KC health/controller.go
        allowedUnhealthyPercent, rounded up)."""
        return self.pool_unhealthy[pool] > math.ceil(0.2 * self.pool_nodes[pool])

    def _health_reconcile(self, m: Machine) -> None:
        """One reconcile of Karpenter's node.health controller for this Node, at the modelled
        version (KC pkg/controllers/node/health/controller.go)."""
        tr = self.traits
        if (
            tr is None
            or not self.repair_enabled
            or m.nodeclaim is None
            or not m.registered
            or m.removed
            or m.claim_gone
        ):
            return
        over = self._pool_over_guard(m.pool.name)
        if tr.guard_before_toleration and over:
            self._publish_repair_blocked(m)  # no requeue before v1.7.0
            return
        if not m.unhealthy_since:
            return
        deadline = min(m.unhealthy_since.values())
        if deadline > self.t:
            self._requeue_health(m, deadline)
            return
        if over:
            self._publish_repair_blocked(m)
            if tr.blocked_requeue is not None:
                self._requeue_health(m, self.t + tr.blocked_requeue)
            return
        self._annotate_termination_time(m)
        if not m.deleting:  # deleteNodeClaim returns early for a NodeClaim already deleting
            self.terminate(m, cause="repair")

    def _requeue_health(self, m: Machine, at: float) -> None:
        if m.repair_due is not None and self.t < m.repair_due <= at:
            return  # an earlier requeue of the same key is already pending
        m.repair_due = at
        m.repair_token += 1
        self.schedule(at, self._health_requeued, m, m.repair_token)

    def _health_requeued(self, m: Machine, token: int) -> None:
        if token != m.repair_token:
            return
        m.repair_due = None
        self._health_reconcile(m)

    def _annotate_termination_time(self, m: Machine) -> None:
        claim = self._claim(m)
        if claim is None:
            return
        annotations = claim["metadata"].setdefault("annotations", {})
        current = annotations.get(objects.TERMINATION_TIMESTAMP)
        if current is not None and _parse_ts(current) < self.t:
            return  # an earlier termination time is kept
        annotations[objects.TERMINATION_TIMESTAMP] = ts(self.t)
        self.tx.put("nodeclaims", claim)

    def _publish_repair_blocked(self, m: Machine) -> None:
        """Three copies, all on the Node, deduplicated 15 min on the Node's, NodeClaim's and
        NodePool's UID (KC health/events.go NodeRepairBlocked)."""
        assert self.traits is not None
        ref = self._node_ref(m)
        message = self.traits.nodepool_blocked_message
        for uid in (m.node_uid, m.claim_uid, self.pool_uid.get(m.pool.name, "")):
            self._publish(
                ref,
                "NodeRepairBlocked",
                message,
                "Warning",
                dedupe=(uid,),
                timeout=REPAIR_BLOCKED_DEDUPE,
            )

    def set_repair_enabled(self, enabled: bool) -> None:
        if enabled == self.repair_enabled:
            return
        self.repair_enabled = enabled
        if enabled:
            # A new controller lists every Node once: nodes already past their toleration are
            # due at once (the resume hazard), bounded only by the guard.
            for m in list(self.machines.values()):
                if m.pool.kind == "nodepool":
                    self._health_reconcile(m)

    # ------------------------------------------------------------------ termination

    def terminate(self, m: Machine, *, cause: str) -> None:
        """Karpenter: the NodeClaim is deleted and its finalizers run (KC nodeclaim/lifecycle,
        node/termination). Node groups: the Auto Scaling group terminates the instance."""
        if m.deleting or m.removed:
            return
        m.deleting = True
        m.repair_token += 1
        pool = m.pool
        if m.nodeclaim is None:
            self._queue_reconcile(pool.name, self.t + pool.replacement_delay)
            self._terminate_instance(m)
            return
        # The provisioner counts a deleting node's pods as pending (KC provisioner.go
        # deletingNodePods): their replacement capacity launches before the drain.
        if any(p.reschedulable for p in m.pods):
            self.provisioner.trigger()
        tr = self.traits
        assert tr is not None
        claim = self._claim(m)
        if claim is not None:
            claim["metadata"]["deletionTimestamp"] = ts(self.t)
            claim["metadata"]["deletionGracePeriodSeconds"] = 0
            annotations = claim["metadata"].setdefault("annotations", {})
            self.tx.put("nodeclaims", claim)
            if pool.termination_grace_period and objects.TERMINATION_TIMESTAMP not in annotations:
                expires = ts(self.t + pool.termination_grace_period)
                annotations[objects.TERMINATION_TIMESTAMP] = expires
                self._publish(
                    self._claim_ref(m),
                    "TerminationGracePeriodExpiring",
                    f"All pods will be deleted by {expires}",
                    "Warning",
                    dedupe=(m.nodeclaim,),
                )
        node = self._node(m)
        if node is None:
            self.schedule(self.t + 1, self._claim_finalize, m)
            return
        node["metadata"]["deletionTimestamp"] = ts(self.t)
        node["metadata"]["deletionGracePeriodSeconds"] = 0
        self.tx.put("nodes", node)
        if m.initialized and tr.disruption_blocked_on_deleting:
            self.schedule(self.t + DISRUPTION_PASS, self._disruption_blocked_deleting, m)
        # The lifecycle finalizer deletes the Node and node.termination picks it up at once.
        self._queue_node_termination(m, self.t)

    def _disruption_blocked_deleting(self, m: Machine) -> None:
        """The disruption controller's candidate pass skips a deleting node with an event on
        Node and NodeClaim (KC disruption/types.go NewCandidate, events.go Blocked)."""
        if m.removed or m.claim_gone:
            return
        message = "Node is deleting or marked for deletion"
        self._publish(self._node_ref(m), "DisruptionBlocked", message, dedupe=(m.node_uid,))
        self._publish(self._claim_ref(m), "DisruptionBlocked", message, dedupe=(m.claim_uid,))

    def _queue_node_termination(self, m: Machine, at: float) -> None:
        m.drain_token += 1
        self.schedule(at, self._node_termination, m, m.drain_token)

    def _node_termination(self, m: Machine, token: int) -> None:
        """One pass of the node.termination finalizer (KC node/termination/controller.go)."""
        if token != m.drain_token or m.removed:
            return
        tr = self.traits
        assert tr is not None
        instance_gone = self._ready_status(m) != "True" and m.instance_state == "terminated"
        if tr.drain_conditions and instance_gone:
            self._finalize_node(m)  # from v1.6.0 this check comes before the drain
            return
        claim = self._claim(m)
        annotation = (
            (claim["metadata"].get("annotations") or {}).get(objects.TERMINATION_TIMESTAMP)
            if claim is not None
            else None
        )
        ref = self._node_ref(m)
        if annotation is not None:
            self._publish(
                ref,
                "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {annotation}",
                "Warning",
                dedupe=(m.node,),
            )
        self._set_taint(m, "karpenter.sh/disrupted", "NoSchedule")
        self._set_labels(
            m, {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}
        )
        waiting = self._drain(m, annotation)
        if waiting:
            self._publish(
                ref,
                "FailedDraining",
                f"Failed to drain node, {waiting} pods are waiting to be evicted",
                "Warning",
                dedupe=(m.node,),
            )
            if tr.drain_conditions:
                self._set_claim_condition(m, "Drained", "Unknown", "Draining", "Draining")
            elif instance_gone:
                self._finalize_node(m)  # through v1.5.x: checked after a failed drain
                return
            self._queue_node_termination(m, self._next_drain_check(m))
            return
        m.drain_token += 1
        m.drained = True
        if tr.drain_conditions:
            self._set_claim_condition(m, "Drained", "True", "Drained")
            # No VolumeAttachments in the simulator: nothing to wait for.
            self._set_claim_condition(m, "VolumesDetached", "True", "VolumesDetached")
        self._await_instance(m)

    def _drain(self, m: Machine, annotation: str | None) -> int:
        """Delete pods past the termination time, evict the others; returns the pods still
        waiting (KC terminator.go Drain: DaemonSet pods tolerate the disrupted taint)."""
        waiting = sum(
            1
            for p in m.pods
            if p.daemonset is None and (not p.deleting or self.t - p.deadline <= STUCK_TERMINATING)
        )
        deadline = None if annotation is None else _parse_ts(annotation)
        for pod in [p for p in m.pods if p.reschedulable]:
            obj = self.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            if deadline is not None and self.t >= deadline - POD_TERMINATION_GRACE:
                # time.Until(terminationTime).Seconds(), truncated to an int64
                grace = int(deadline - self.t)
                self._publish(
                    self._pod_ref(obj),
                    "Disrupted",
                    self._disrupted_message(obj, deadline, grace),
                    dedupe=(pod.name,),
                )
                self.workloads.start_deletion(pod, grace)
                continue
            pdb = self.workloads.blocking_pdb(pod)
            if pdb is not None:
                # The eviction queue reports a PDB refusal on a Node named after the pod.
                self._publish(
                    {
                        "kind": "Node",
                        "namespace": pod.namespace,
                        "name": pod.name,
                        "apiVersion": "v1",
                    },
                    "FailedDraining",
                    f"Failed to drain node, evicting pod {pod.namespace}/{pod.name} violates a PDB",
                    "Warning",
                    dedupe=(pod.name,),
                )
                continue
            self._publish(
                {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "apiVersion": "v1"},
                "Evicted",
                self._evicted_message(m),
                dedupe=(pod.name,),
            )
            self.workloads.evict(pod.namespace, pod.name, None)
        return waiting

    def _disrupted_message(self, pod: JsonDict, deadline: float, grace: int) -> str:
        tr = self.traits
        assert tr is not None
        # Go's %v of a time.Time in UTC; through v1.4.x %v of the *int64 prints an address,
        # whose value is arbitrary (inference: a heap address shape).
        when = datetime.fromtimestamp(deadline, tz=UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
        tgps = (
            "0xc000" + objects.stable_hex("tgps", pod["metadata"]["uid"], length=6)
            if tr.disrupted_prints_pointer
            else str(pod["spec"].get("terminationGracePeriodSeconds", POD_TERMINATION_GRACE))
        )
        return (
            f"Deleting the pod to accommodate the terminationTime {when} of the node. "
            f"The pod was granted {grace} seconds of grace-period of its {tgps} "
            "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
            "do-not-disrupt annotation."
        )

    def _evicted_message(self, m: Machine) -> str:
        tr = self.traits
        assert tr is not None
        if not tr.evicted_names_reason:
            return "Evicted pod"
        claim = self._claim(m)
        cond = (
            next(
                (
                    c
                    for c in claim["status"].get("conditions", [])
                    if c["type"] == "DisruptionReason"
                ),
                None,
            )
            if claim is not None
            else None
        )
        if cond is not None and cond["status"] == "True":
            reason = cond["message"] if tr.disruption_reason_in_message else cond["reason"]
        else:
            reason = "Forceful Termination"
        return f"Evicted pod: {reason}"

    def _pod_ref(self, pod: JsonDict) -> JsonDict:
        meta = pod["metadata"]
        return {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "apiVersion": "v1",
        }

    def _next_drain_check(self, m: Machine) -> float:
        """node.termination requeues 1 s after a failed drain (KC termination/controller.go);
        simulated as its next pass that can see a change: a pod gone, one stuck too long,
        or the eviction queue's retry."""
        if not any(p.daemonset is None for p in m.pods):
            return self.t + 1  # the pods it waited for are gone already
        times = [self.t + EVICTION_RETRY]
        for pod in m.pods:
            if not pod.deleting:
                continue
            if pod.gone_at is not None:
                times.append(pod.gone_at)
            elif self.t - pod.deadline <= STUCK_TERMINATING:
                times.append(pod.deadline + STUCK_TERMINATING + 1)
        return max(self.t + 1, min(times))

    def pod_gone(self, pod: PodRecord, m: Machine | None) -> None:
        """A pod left the API: a drain waiting on it looks again; its DaemonSet makes a new
        one if the node still wants it."""
        if m is None:
            return
        if pod.daemonset == dra.DAEMONSET:
            self.dra.plugin_pod_gone(m)
        if (
            pod.daemonset is not None
            and not m.removed
            and (pod.namespace, pod.name) in m.daemon_pods
        ):
            m.daemon_pods.remove((pod.namespace, pod.name))
            self.schedule(self.t + 2, self._recreate_daemon_pod, m, pod.daemonset)
        if m.deleting and not m.removed and not m.drained and m.nodeclaim is not None:
            self._queue_node_termination(m, self.t)

    def pod_event_on(self, m: Machine) -> None:
        """KC nodeclaim/podevents: a pod bound to or leaving a Karpenter node stamps
        status.lastPodEventTime (at most every 10 s), which restarts consolidateAfter."""
        if m.nodeclaim is None or m.claim_gone:
            return
        if m.last_pod_event is not None and self.t - m.last_pod_event < POD_EVENT_DEDUPE:
            return
        m.last_pod_event = self.t
        claim = self._claim(m)
        if claim is not None:
            claim["status"]["lastPodEventTime"] = ts(self.t)
            self.tx.put("nodeclaims", claim)
        self._consolidatable_check(m)

    def _consolidatable_check(self, m: Machine) -> None:
        """KC nodeclaim/disruption consolidation.go: Consolidatable once consolidateAfter has
        passed since the last pod event (or initialization), cleared before that."""
        after = self.provisioner.consolidate_after(m.pool)
        if after is None or not m.initialized or m.claim_gone:
            return
        since = m.last_pod_event if m.last_pod_event is not None else m.ready_at or self.t
        due = since + after
        m.consolidatable_token += 1
        if self.t < due:
            if m.consolidatable:
                m.consolidatable = False
                self._clear_claim_condition(m, "Consolidatable")
            self.schedule(due, self._consolidatable_due, m, m.consolidatable_token)
            return
        if not m.consolidatable:
            m.consolidatable = True
            self._set_claim_condition(m, "Consolidatable", "True", "Consolidatable")

    def _consolidatable_due(self, m: Machine, token: int) -> None:
        if token == m.consolidatable_token:
            self._consolidatable_check(m)

    def _clear_claim_condition(self, m: Machine, ctype: str) -> None:
        claim = self._claim(m)
        if claim is None:
            return
        conds = claim["status"].get("conditions", [])
        kept = [c for c in conds if c["type"] != ctype]
        if len(kept) != len(conds):
            claim["status"]["conditions"] = kept
            self.tx.put("nodeclaims", claim)

    def _await_instance(self, m: Machine) -> None:
        """EnsureTerminated: TerminateInstances, InstanceTerminating, then poll every 5 s
        until the instance is gone; then the Node's finalizer goes."""
        if m.removed:
            return
        self._terminate_instance(m)
        self._set_claim_condition(m, "InstanceTerminating", "True", "InstanceTerminating")
        if m.instance_state != "terminated":
            self.schedule(self.t + TERMINATION_POLL, self._await_instance, m)
            return
        self._finalize_node(m)

    def _finalize_node(self, m: Machine) -> None:
        self._remove_node(m)
        if m.nodeclaim is not None:
            self.schedule(self.t + 1, self._claim_finalize, m)

    def _claim_finalize(self, m: Machine) -> None:
        """The NodeClaim's finalizer once its Node is gone: EnsureTerminated, then removal
        (KC nodeclaim/lifecycle/controller.go finalize)."""
        if m.claim_gone:
            return
        if m.instance_state == "running" and self._claim(m) is not None:
            launched = bool(self._claim(m)["status"].get("providerID"))  # type: ignore[index]
            if not launched:
                m.instance_state = "terminated"  # nothing was launched
        if m.instance_state != "terminated":
            self._terminate_instance(m)
            self._set_claim_condition(m, "InstanceTerminating", "True", "InstanceTerminating")
            self.schedule(self.t + TERMINATION_POLL, self._claim_finalize, m)
            return
        self._remove_claim(m)

    def _remove_node(self, m: Machine) -> None:
        if m.removed:
            return
        m.removed = True
        if m.registered:
            self.tx.delete("nodes", "", m.node)
            # The garbage collector follows the Lease's owner reference to the Node.
            self.tx.delete("leases", "kube-node-lease", m.node)
            m.lease_bucket = -1
            m.report_token += 1
            self.pool_nodes[m.pool.name] -= 1
            self._count_health(m)
            self.schedule(self.t + NODE_MONITOR_PERIOD, self._removing_node_event, m)
            self.workloads.node_removed(m)
            if m.pool.dra:
                self.dra.node_removed(m)  # the garbage collector follows the slice's owner
        self.machines.pop(m.node, None)
        if m.nodeclaim is None and m in self.pool_machines[m.pool.name]:
            self.pool_machines[m.pool.name].remove(m)
        self._update_nodepool_status(m.pool)

    def _removing_node_event(self, m: Machine) -> None:
        """The node lifecycle controller notices the deletion on its next pass
        (K8S pkg/controller/nodelifecycle RecordNodeEvent "RemovingNode")."""
        self.emit(
            self._node_ref(m),
            "RemovingNode",
            f"Node {m.node} event: Removing Node {m.node} from Controller",
            component="node-controller",
        )

    def _remove_claim(self, m: Machine) -> None:
        if m.nodeclaim is not None and not m.claim_gone:
            self.tx.delete("nodeclaims", "", m.nodeclaim)
            self.claims.pop(m.nodeclaim, None)
        m.claim_gone = True
        if m in self.pool_machines[m.pool.name]:
            self.pool_machines[m.pool.name].remove(m)
        if not m.removed:
            self._remove_node(m)

    def _ready_status(self, m: Machine) -> str:
        node = self._node(m)
        if node is None:
            return "Unknown"
        cond = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)
        return str(cond["status"]) if cond else "Unknown"

    # ------------------------------------------------------------------ EC2 and interruption

    def _terminate_instance(self, m: Machine) -> None:
        """TerminateInstances (or EC2's own interruption): shutting-down, then terminated.
        The OS stops kubelet and the agent as it shuts down (inference)."""
        if m.instance_state != "running":
            return
        m.instance_state = "shutting-down"
        if m.kubelet_posting and m.registered:
            self._kubelet_stop(m)
        m.nma_running = False
        m.nma_token += 1
        self._state_change(m, "shutting-down")
        self.schedule(self.t + INSTANCE_SHUTDOWN, self._instance_terminated, m)

    def _instance_terminated(self, m: Machine) -> None:
        m.instance_state = "terminated"
        self._state_change(m, "terminated")
        if m.registered and not m.removed:
            self.schedule(self.t + NODE_MONITOR_PERIOD, self._cloud_node_lifecycle, m)

    def _cloud_node_lifecycle(self, m: Machine) -> None:
        """The cloud node lifecycle controller deletes a NotReady Node whose instance is gone
        (k8s.io/cloud-provider controllers/nodelifecycle, every --node-monitor-period)."""
        if m.removed:
            return
        if self._ready_status(m) == "True":
            self.schedule(self.t + NODE_MONITOR_PERIOD, self._cloud_node_lifecycle, m)
            return
        self.emit(
            {"kind": "Node", "name": m.node, "uid": m.node_uid},
            "DeletingNode",
            f"Deleting node {m.node} because it does not exist in the cloud provider",
            component="cloud-node-lifecycle-controller",
        )
        if m.nodeclaim is None:
            self._remove_node(m)
        elif not m.deleting:
            self.terminate(m, cause="instance-gone")  # the Node's finalizer is Karpenter's
        elif not m.drained:
            self._queue_node_termination(m, self.t + 1)

    def _state_change(self, m: Machine, state: str) -> None:
        """EventBridge forwards every EC2 state change to the interruption queue (KA
        getting-started cloudformation.yaml InstanceStateChangeRule)."""
        k = self.scenario.karpenter
        if k is None or not k.interruption_queue or m.nodeclaim is None:
            return
        self.schedule(self.t + SQS_LAG, self._interruption_message, m, state)

    def _interruption_message(self, m: Machine, kind: str) -> None:
        """Karpenter's interruption controller handles one message for this instance (KA
        pkg/controllers/interruption controller.go at v1.4.0, utils.go at v1.14.1): events
        for the message, then delete the NodeClaim unless it is already deleting."""
        if m.claim_gone:
            return  # no NodeClaim carries this instance ID any more
        if kind == "spot":
            reason, message = "SpotInterrupted", "Spot interruption warning was triggered"
        elif kind in ("stopping", "stopped"):
            reason, message = "InstanceStopping", "Instance is stopping"
        else:  # shutting-down, terminated
            reason, message = "InstanceTerminating", "Instance is terminating"
        node = self._node(m)
        self._publish(self._claim_ref(m), reason, message, "Warning", dedupe=(m.claim_uid,))
        if node is not None:
            self._publish(self._node_ref(m), reason, message, "Warning", dedupe=(m.node_uid,))
        if m.deleting:
            return  # deleteNodeClaim returns early: no TerminatingOnInterruption
        self.terminate(m, cause="interruption")
        self._publish(
            self._claim_ref(m),
            "TerminatingOnInterruption",
            "Interruption triggered termination for the NodeClaim",
            "Warning",
            dedupe=(m.claim_uid,),
        )
        if node is not None:
            self._publish(
                self._node_ref(m),
                "TerminatingOnInterruption",
                "Interruption triggered termination for the Node",
                "Warning",
                dedupe=(m.node_uid,),
            )

    def consolidate(self, m: Machine, reason: str) -> None:
        if not m.alive or m.nodeclaim is None:
            return
        tr = self.traits
        assert tr is not None
        if tr.disruption_reason:
            self._set_claim_condition(
                m,
                "DisruptionReason",
                "True",
                "DisruptionReason" if tr.disruption_reason_in_message else reason,
                reason,
            )
        self._publish(
            self._node_ref(m),
            "DisruptionTerminating",
            f"Disrupting Node: {reason}",
            dedupe=(m.node_uid, reason),
        )
        self._publish(
            self._claim_ref(m),
            "DisruptionTerminating",
            f"Disrupting NodeClaim: {reason}",
            dedupe=(m.claim_uid, reason),
        )
        self.terminate(m, cause="consolidation")

    def spot_interrupt(self, m: Machine) -> None:
        """EC2's two-minute warning; the instance is interrupted when it runs out."""
        if not m.alive:
            return
        k = self.scenario.karpenter
        if k is not None and k.interruption_queue and m.nodeclaim is not None:
            self.schedule(self.t + SQS_LAG, self._interruption_message, m, "spot")
        self.schedule(self.t + SPOT_NOTICE, self._terminate_instance, m)

    # ------------------------------------------------------------------ cordon

    def _cordon(self, m: Machine, unschedulable: bool) -> None:
        node = self._node(m)
        if node is None or bool(node["spec"].get("unschedulable")) == unschedulable:
            return
        if unschedulable:
            node["spec"]["unschedulable"] = True
        else:
            node["spec"].pop("unschedulable", None)
        self.tx.put("nodes", node)
        self._unschedulable_changed(m)

    def _unschedulable_changed(self, m: Machine) -> None:
        """A cordon or uncordon: the node lifecycle controller's TaintNodesByCondition follows
        spec.unschedulable with the node.kubernetes.io/unschedulable:NoSchedule taint
        (pkg/controller/nodelifecycle doNoScheduleTaintingPass); the kubelet reports
        NodeNotSchedulable / NodeSchedulable at its next status sync."""
        self.schedule(self.t + NODE_LIFECYCLE_LAG, self._unschedulable_taint, m)
        self.schedule(self.t + KUBELET_STATUS_SYNC, self._kubelet_sees_cordon, m)

    def _unschedulable_taint(self, m: Machine) -> None:
        node = self._node(m)
        if node is None:
            return
        if node["spec"].get("unschedulable"):
            self._set_taint(m, "node.kubernetes.io/unschedulable", "NoSchedule")
        else:
            self._remove_taint(m, "node.kubernetes.io/unschedulable")
            self.workloads.schedule_soon()

    def _kubelet_sees_cordon(self, m: Machine) -> None:
        """kubelet records NodeNotSchedulable / NodeSchedulable when spec.unschedulable
        differs from what it last saw (K8S pkg/kubelet/kubelet_node_status.go)."""
        node = self._node(m)
        if node is None or not m.kubelet_posting:
            return
        unschedulable = bool(node["spec"].get("unschedulable"))
        if unschedulable == m.kubelet_sees_unschedulable:
            return
        m.kubelet_sees_unschedulable = unschedulable
        reason = "NodeNotSchedulable" if unschedulable else "NodeSchedulable"
        self._kubelet_event(m, reason, f"Node {m.node} status is now: {reason}")

    # ------------------------------------------------------------------ managed node group repair

    def _mng_observe(self, m: Machine, node: JsonDict) -> None:
        """EKS node auto repair for a node group: a failed check cordons the node, then after
        the wait its action runs (node-repair.adoc, node-health.adoc)."""
        config = m.pool.node_repair
        if config is None or not config.enabled or not m.alive or m.mng_repairing:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        key = None if check is None else (check.condition, check.reason, check.since)
        if key == m.mng_check:
            return
        m.mng_check = key
        m.mng_token += 1
        if check is None:
            return
        # Only a check with an action cordons; NoAction leaves the node alone (inference).
        self.schedule(max(self.t, check.since + MNG_CORDON_DELAY), self._mng_cordon, m, m.mng_token)
        self.schedule(max(self.t, check.due), self._mng_repair, m, m.mng_token)

    def _mng_cordon(self, m: Machine, token: int) -> None:
        if token != m.mng_token or not m.alive:
            return
        m.mng_cordoned = True
        self._cordon(m, True)

    def _mng_unhealthy(self, m: Machine) -> bool:
        node = self._node(m)
        return node is not None and any(
            nodegroups.failing(c["type"], c["status"]) for c in node["status"].get("conditions", [])
        )

    def _mng_repair(self, m: Machine, token: int) -> None:
        if token != m.mng_token or not m.alive:
            return
        config = m.pool.node_repair
        node = self._node(m)
        if config is None or node is None:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        if check is None or check.due > self.t:
            return
        group = [x for x in self.pool_machines[m.pool.name] if x.registered and not x.removed]
        unhealthy = sum(1 for x in group if self._mng_unhealthy(x))
        limit = nodegroups.parallel_limit(config, unhealthy)
        running = sum(1 for x in group if x.mng_repairing)
        if nodegroups.halted(config, len(group), unhealthy) or (
            limit is not None and running >= limit
        ):
            self.schedule(self.t + MNG_RETRY, self._mng_repair, m, token)
            return
        m.mng_repairing = check.action
        if check.action == nodegroups.REPLACE:
            self.terminate(m, cause="repair")  # the Auto Scaling group launches a new instance
        else:
            self._reboot(m)

    def _reboot(self, m: Machine) -> None:
        """RebootInstances: kubelet and the agent go away until the instance is back."""
        self._kubelet_stop(m)
        m.nma_running = False
        m.nma_token += 1
        self.schedule(self.t + MNG_REBOOT_DOWNTIME, self._boot, m)

    def _boot(self, m: Machine) -> None:
        node = self._node(m)
        if node is None:
            return
        m.boot += 1
        # A reboot clears a one-off fault; what the image causes comes back (inference).
        m.nma_faults = {k: v for k, v in m.nma_faults.items() if k in m.image_faults}
        boot_id = objects.stable_uuid("boot", m.instance_id, m.boot)
        node["status"]["nodeInfo"]["bootID"] = boot_id
        self.tx.put("nodes", node)
        m.kubelet_sees_unschedulable = False
        if m.pool.dra:
            self.dra.rebooted(m)
        self._kubelet_start(m)
        self._kubelet_startup_events(m)
        self._kubelet_event(
            m, "Rebooted", f"Node {m.node} has been rebooted, boot id: {boot_id}", "Warning"
        )
        self.schedule(self.t + KUBELET_STATUS_SYNC, self._kubelet_sees_cordon, m)
        self.schedule(self.t + KUBELET_STATUS_SYNC, self._rebooted_ready, m)

    def _rebooted_ready(self, m: Machine) -> None:
        if m.removed:
            return
        self._become_ready(m)
        if m.pool.node_monitoring_agent:
            self._nma_start(m)
        if m.mng_cordoned:
            # Repair hands a rebooted node back once it is Ready again (inference).
            m.mng_cordoned = False
            self._cordon(m, False)
        m.mng_repairing = None
        m.mng_check = None
        node = self._node(m)
        if node is not None:
            self._mng_observe(m, node)

    # ------------------------------------------------------------------ pools

    def _queue_reconcile(self, pool: str, at: float) -> None:
        if pool in self._reconcile_pending:
            return
        self._reconcile_pending.add(pool)
        self.schedule(at, self._reconcile_pool, pool)

    def _reconcile_pool(self, name: str) -> None:
        """A node group's Auto Scaling group keeps its desired size; Karpenter pools get their
        starting size here and follow their pods afterwards."""
        self._reconcile_pending.discard(name)
        pool = self.scenario.pool(name)
        active = [m for m in self.pool_machines[name] if not m.deleting]
        for _ in range(self.pool_target[name] - len(active)):
            self.launch(pool, self.t)

    def scale(self, pool: str, nodes: int) -> None:
        spec = self.scenario.pool(pool)
        wl = self.workloads.workloads.get(
            (spec.workload.namespace, spec.workload.name) if spec.workload else ("", "")
        )
        if spec.kind == "nodepool" and wl is not None and spec.workload is not None:
            # Karpenter follows the pods: scale the pool's Deployment, as an operator would.
            self.workloads.scale_deployment(wl, nodes * spec.workload.pods_per_node)
            return
        if wl is not None and spec.workload is not None:
            self.workloads.scale_deployment(wl, nodes * spec.workload.pods_per_node)
        self.pool_target[pool] = nodes
        active = [m for m in self.pool_machines[pool] if not m.deleting]
        surplus = sorted(active, key=lambda x: x.launched_at, reverse=True)[
            : max(0, len(active) - nodes)
        ]
        for m in surplus:
            if m.nodeclaim:
                self.consolidate(m, "Empty")
            else:
                self.terminate(m, cause="scale-down")
        self._reconcile_pool(pool)

    # ------------------------------------------------------------------ timeline

    def resolve(self, ref: NodeRef) -> Machine | None:
        if ref.name is not None:
            return self.machines.get(ref.name)
        pool = ref.newest or ref.oldest
        assert pool is not None
        candidates = [m for m in self.pool_machines.get(pool, []) if m.alive and m.registered]
        if not candidates:
            return None
        pick = max if ref.newest else min
        return pick(candidates, key=lambda m: m.launched_at)

    def _timeline(self, item: TimelineItem) -> None:
        if item.action == "scale":
            assert item.argument is not None and item.nodes is not None
            self.scale(item.argument, item.nodes)
            return
        assert item.node is not None
        m = self.resolve(item.node)
        if m is None:
            return
        if item.step is not None:
            self.apply_step(m, item.step)
        elif item.action == "deleteNodeClaim":
            self.terminate(m, cause="manual")
        elif item.action == "spotInterrupt":
            self.spot_interrupt(m)
        elif item.action == "consolidate":
            self.consolidate(m, item.argument or "Underutilized")
        elif item.action == "cordon":
            self._cordon(m, True)

    # ------------------------------------------------------------------ pods

    def daemonsets_for(
        self, pool: PoolSpec
    ) -> list[tuple[str, str, str, dict[str, str], str, bool]]:
        """(namespace, daemonset, container image, labels, priority class, hostNetwork) of
        the DaemonSets that run on the pool's nodes."""
        ecr = objects.ECR.format(region=self.scenario.region)
        it = objects.instance_type(pool.instance_type)
        sets = [
            (
                "kube-system",
                "aws-node",
                f"{ecr}/amazon-k8s-cni:v1.19.2-eksbuild.1",
                {"k8s-app": "aws-node"},
                True,
            ),
            (
                "kube-system",
                "kube-proxy",
                f"{ecr}/eks/kube-proxy:v1.32.0-minimal-eksbuild.2",
                {"k8s-app": "kube-proxy"},
                True,
            ),
            (
                "kube-system",
                "ebs-csi-node",
                f"{ecr}/eks/aws-ebs-csi-driver:v1.40.0",
                {"app": "ebs-csi-node", "app.kubernetes.io/name": "aws-ebs-csi-driver"},
                False,
            ),
        ]
        if pool.node_monitoring_agent:
            sets.append(
                (
                    "kube-system",
                    "eks-node-monitoring-agent",
                    f"{ecr}/eks/eks-node-monitoring-agent:v1.2.0-eksbuild.1",
                    {
                        "app.kubernetes.io/name": "eks-node-monitoring-agent",
                        "app.kubernetes.io/instance": "eks-node-monitoring-agent",
                    },
                    True,
                )
            )
        if it.gpu is not None:
            if pool.dra:
                # the operator with devicePlugin.enabled=false; the DRA driver's chart instead
                sets.append((dra.NAMESPACE, dra.DAEMONSET, dra.IMAGE, dict(dra.POD_LABELS), False))
            else:
                sets.append(
                    (
                        "gpu-operator",
                        "nvidia-device-plugin-daemonset",
                        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                        {"app": "nvidia-device-plugin-daemonset"},
                        False,
                    )
                )
            sets += [
                (
                    "gpu-operator",
                    "gpu-feature-discovery",
                    "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                    {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"},
                    False,
                ),
                (
                    "gpu-operator",
                    "nvidia-dcgm-exporter",
                    "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
                    {"app": "nvidia-dcgm-exporter"},
                    False,
                ),
                (
                    "gpu-operator",
                    "nvidia-container-toolkit-daemonset",
                    "nvcr.io/nvidia/k8s/container-toolkit:v1.17.4-ubuntu20.04",
                    {"app": "nvidia-container-toolkit-daemonset"},
                    False,
                ),
                (
                    "gpu-operator",
                    "nvidia-operator-validator",
                    "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.2",
                    {"app": "nvidia-operator-validator"},
                    False,
                ),
            ]
            if it.gpu.mig_capable and pool.mig_config and pool.mig_applied_by == "mig-manager":
                sets.append(
                    (
                        "gpu-operator",
                        "nvidia-mig-manager",
                        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.10.0-ubuntu20.04",
                        {"app": "nvidia-mig-manager"},
                        True,
                    )
                )
        out = []
        for ns, ds, image, labels, host_net in sets:
            prio = "system-node-critical"
            out.append((ns, ds, image, labels, prio, host_net))
        return out

    def _create_daemon_pods(self, m: Machine, only: str | None = None) -> None:
        for ns, ds, image, labels, prio, host_net in self.daemonsets_for(m.pool):
            if only is not None and ds != only:
                continue
            self._create_daemon_pod(m, ns, ds, image, labels, prio, host_net)

    def _create_daemon_pod(
        self,
        m: Machine,
        ns: str,
        ds: str,
        image: str,
        labels: dict[str, str],
        prio: str,
        host_net: bool,
    ) -> None:
        name = f"{ds}-{self._suffix()}"
        pod_labels = {
            **labels,
            "controller-revision-hash": objects.stable_hex("rev", ds, length=10),
            "pod-template-generation": "1",
        }
        obj = objects.build_pod(
            name=name,
            namespace=ns,
            uid=self._uid(),
            created=self.t,
            node_name=m.node,
            labels=pod_labels,
            owner={
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": ds,
                "uid": objects.stable_uuid("ds", ns, ds),
                "controller": True,
                "blockOwnerDeletion": True,
            },
            containers=[
                objects.container(
                    ds.removesuffix("-daemonset"), image, {"cpu": "25m", "memory": "64Mi"}
                )
            ],
            tolerations=[{"operator": "Exists"}],
            priority_class=prio,
            host_ip=m.ip,
            pod_ip=m.ip if host_net else self._pod_ip(m),
            running_since=self.t + 2,
            host_network=host_net,
        )
        self.tx.put("pods", obj)
        m.daemon_pods.append((ns, name))
        self.workloads.register_daemon_pod(m, ns, name, ds)
        if ds == dra.DAEMONSET:
            self.dra.plugin_pod_running(m)

    def _pod_ip(self, m: Machine) -> str:
        a, b, c, _ = m.ip.split(".")
        return f"{a}.{b}.{c}.{self.rng.randrange(4, 255)}"

    def _create_workload(self, pool: PoolSpec) -> None:
        w = pool.workload
        assert w is not None
        template = self._workload_template(pool)
        replicas = w.replicas if w.replicas is not None else pool.nodes * w.pods_per_node
        deploy = objects.build_deployment(
            name=w.name,
            namespace=w.namespace,
            uid=self._uid(),
            created=self.begin - 86400 * 14,
            replicas=replicas,
            labels={"app": w.name, "app.kubernetes.io/name": w.name},
            annotations={},
            selector={"app": w.name},
            template=template,
        )
        request = dra.request_for(pool)
        if request is not None:
            self.tx.put(
                "resourceclaimtemplates",
                dra.claim_template(
                    dra.template_name(pool),
                    w.namespace,
                    self._uid(),
                    self.begin - 86400 * 14,
                    request,
                ),
            )
        has_pdb = w.pdb_min_available is not None or w.pdb_max_unavailable is not None
        self.workloads.create(deploy, pool, pdb=has_pdb)
        if has_pdb:
            pdb = objects.build_pdb(
                name=w.name,
                namespace=w.namespace,
                uid=self._uid(),
                created=self.begin - 86400 * 14,
                selector={"app": w.name},
                min_available=w.pdb_min_available,
                max_unavailable=w.pdb_max_unavailable,
            )
            self.tx.put("poddisruptionbudgets", pdb)

    def _workload_template(self, pool: PoolSpec) -> JsonDict:
        w = pool.workload
        assert w is not None
        request = dra.request_for(pool)
        limits = {w.resource: str(w.per_pod)} if w.resource and request is None else None
        # 4 CPUs and 16 GiB each, less on a type where podsPerNode of those would not fit:
        # at most three quarters of the CPUs and 70 % of the memory, shared by the pods.
        it = objects.instance_type(pool.instance_type)
        cpu_m = max(100, min(4000, int(it.cpu * 750 / w.pods_per_node) // 100 * 100))
        memory_gi = max(1, min(16, int(it.memory_mib / 1024 * 0.7 / w.pods_per_node)))
        cpu = f"{cpu_m // 1000}" if cpu_m % 1000 == 0 else f"{cpu_m}m"
        requests = {"cpu": cpu, "memory": f"{memory_gi}Gi", **(limits or {})}
        tolerations = [
            {"key": t.key, "operator": "Exists", "effect": t.effect} for t in pool.taints
        ]
        ctr = objects.container(w.name, w.image, requests, limits)
        spec: JsonDict = {
            "containers": [ctr],
            "nodeSelector": {
                "karpenter.sh/nodepool"
                if pool.kind == "nodepool"
                else "eks.amazonaws.com/nodegroup": pool.name
            },
            "tolerations": tolerations,
        }
        if request is not None:
            # kubernetes v1.34 core/v1 PodResourceClaim and ResourceClaim (container)
            ctr["resources"]["claims"] = [{"name": dra.POD_CLAIM}]
            spec["resourceClaims"] = [
                {"name": dra.POD_CLAIM, "resourceClaimTemplateName": dra.template_name(pool)}
            ]
        return {
            "metadata": {"labels": {"app": w.name, "app.kubernetes.io/name": w.name}},
            "spec": spec,
        }

    # ------------------------------------------------------------------ Karpenter Deployment

    def _karpenter_template(self, gates: str) -> JsonDict:
        k = self.scenario.karpenter
        assert k is not None
        endpoint_id = objects.stable_hex("ep", self.scenario.cluster_name, length=32).upper()
        image = f"public.ecr.aws/karpenter/controller:{k.version}@sha256:" + objects.stable_hex(
            "karpenter", k.version, length=64
        )
        env = [
            {"name": "KUBERNETES_MIN_VERSION", "value": "1.19.0-0"},
            {"name": "KARPENTER_SERVICE", "value": "karpenter"},
            {"name": "WEBHOOK_PORT", "value": "8443"},
            {"name": "WEBHOOK_METRICS_PORT", "value": "8001"},
            {"name": "DISABLE_WEBHOOK", "value": "true"},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "METRICS_PORT", "value": "8080"},
            {"name": "HEALTH_PROBE_PORT", "value": "8081"},
            {
                "name": "SYSTEM_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "MEMORY_LIMIT",
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": "controller",
                        "divisor": "0",
                        "resource": "limits.memory",
                    }
                },
            },
            {"name": "FEATURE_GATES", "value": gates},
            {"name": "BATCH_MAX_DURATION", "value": "10s"},
            {"name": "BATCH_IDLE_DURATION", "value": "1s"},
            {"name": "CLUSTER_NAME", "value": self.scenario.cluster_name},
            {
                "name": "CLUSTER_ENDPOINT",
                "value": f"https://{endpoint_id}.gr7.{self.scenario.region}.eks.amazonaws.com",
            },
            {"name": "VM_MEMORY_OVERHEAD_PERCENT", "value": "0.075"},
            {"name": "RESERVED_ENIS", "value": "0"},
        ]
        if k.interruption_queue:
            # KA getting-started: settings.interruptionQueue=${CLUSTER_NAME}
            env.insert(-1, {"name": "INTERRUPTION_QUEUE", "value": self.scenario.cluster_name})
        ctr = objects.container(
            "controller", image, {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}
        )
        ctr["env"] = env
        labels = {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
        # The chart's scheduling values (KA charts/karpenter/values.yaml at v1.4.0): never on
        # a node Karpenter manages, one replica per host, spread over zones.
        return {
            "metadata": {"labels": labels, "annotations": {}},
            "spec": {
                "containers": [ctr],
                "serviceAccountName": "karpenter",
                "priorityClassName": "system-cluster-critical",
                "dnsPolicy": "ClusterFirst",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}
                                    ]
                                }
                            ]
                        }
                    },
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": dict(labels)},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    },
                },
                "topologySpreadConstraints": [
                    {
                        "labelSelector": {"matchLabels": dict(labels)},
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                    }
                ],
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            },
        }

    def _create_karpenter(self) -> None:
        k = self.scenario.karpenter
        assert k is not None
        template = self._karpenter_template(k.feature_gates)
        chart = f"karpenter-{k.version}"
        deploy = objects.build_deployment(
            name="karpenter",
            namespace=k.namespace,
            uid=self._uid(),
            created=self.begin - 86400 * 30,
            replicas=2,
            labels={
                "app.kubernetes.io/instance": "karpenter",
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/name": "karpenter",
                "app.kubernetes.io/version": k.version,
                "helm.sh/chart": chart,
            },
            annotations={
                "meta.helm.sh/release-name": "karpenter",
                "meta.helm.sh/release-namespace": k.namespace,
            },
            selector={
                "app.kubernetes.io/name": "karpenter",
                "app.kubernetes.io/instance": "karpenter",
            },
            template=template,
            max_unavailable=1,
        )
        self.karpenter_workload = self.workloads.create(deploy, None)

    def deployment_patched(
        self, namespace: str, name: str, before: JsonDict, after: JsonDict
    ) -> None:
        """Called by the API server after a Deployment patch was stored."""
        self.workloads.deployment_patched(namespace, name, before, after)

    def rollout_done(self, wl: Workload) -> None:
        """A Deployment finished rolling out: Karpenter's new pods read their settings."""
        if wl is not self.karpenter_workload:
            return
        self._karpenter_seen.clear()  # new pods: an empty recorder dedupe cache
        self.set_repair_enabled(gate_value(_feature_gates(wl.current.template), "NodeRepair"))

    def pods_unschedulable(self, pods: list[PodRecord]) -> None:
        """The kube-scheduler gave up on these pods for now: Karpenter's batcher hears it."""
        if self.scenario.karpenter is not None:
            self.provisioner.trigger()

    def nodegroup_documents(self) -> list[JsonDict]:
        """`aws eks describe-nodegroup` output for each managed node group, to seed an EKS
        stand-in (moto) or a snapshot's cluster/nodegroups.json."""
        return nodegroups.describe_nodegroups(self.scenario, self.begin - 86400 * 60)

    # ------------------------------------------------------------------ API hooks

    def node_changed(self, name: str) -> None:
        m = self.machines.get(name)
        if m is None or m.removed:
            return
        m.api_touched = True
        node = self.tx.get("nodes", "", name)
        if node is not None:
            # The store still holds the Node as it was: this API write is not flushed yet.
            before = self.store.get("nodes", "", name)
            self._conditions_changed(m, node, _conditions_moved(before, node))
            if before is not None:
                self._gpu_operator_react(m, before, node)
                if bool(before["spec"].get("unschedulable")) != bool(
                    node["spec"].get("unschedulable")
                ):
                    self._unschedulable_changed(m)
            if m.pool.dra:
                self.dra.labels_changed(m, node["metadata"].get("labels") or {})

    # ------------------------------------------------------------------ GPU operator

    def _gpu_operator_react(self, m: Machine, before: JsonDict, after: JsonDict) -> None:
        old = before["metadata"].get("labels") or {}
        new = after["metadata"].get("labels") or {}
        # Like the DaemonSet controller, converge on the labels as they are now (a scenario
        # may have paused a label and left its pod), for the operands whose label is set.
        for key, ds in OPERAND_DAEMONSETS.items():
            label = LABEL_GPU_DEPLOY + key
            if label not in new:
                continue
            running = bool(self._operand_pods(m, ds))
            if new[label] == "true" and not running:
                self.schedule(self.t + OPERAND_DELAY, self._operand_start, m, ds, label)
            elif new[label] != "true" and running:
                self.schedule(self.t + OPERAND_DELAY, self._operand_stop, m, ds, label)
        watched = (LABEL_GPU_DEPLOY + "device-plugin", *MIG_LABELS)
        if any(old.get(key) != new.get(key) for key in watched):
            self.schedule(self.t + ADVERTISE_DELAY, self._advertise_gpus, m)

    def _label(self, m: Machine, key: str) -> str | None:
        node = self._node(m)
        value = (node["metadata"].get("labels") or {}).get(key) if node is not None else None
        return None if value is None else str(value)

    def _operand_pods(self, m: Machine, ds: str) -> list[tuple[str, str]]:
        return [entry for entry in m.daemon_pods if entry[1].rsplit("-", 1)[0] == ds]

    def _operand_stop(self, m: Machine, ds: str, label: str) -> None:
        if m.removed or self._label(m, label) == "true":
            return
        for entry in self._operand_pods(m, ds):
            m.daemon_pods.remove(entry)
            self.tx.delete("pods", *entry)

    def _operand_start(self, m: Machine, ds: str, label: str) -> None:
        if m.removed or self._label(m, label) != "true" or self._operand_pods(m, ds):
            return
        self._create_daemon_pods(m, only=ds)

    def _advertise_gpus(self, m: Machine) -> None:
        """What the device plugin makes kubelet report: nothing allocatable while it is
        paused; the layout of `nvidia.com/mig.config` once its state is `success`."""
        node = self._node(m)
        it = objects.instance_type(m.pool.instance_type)
        if node is None or it.gpu is None or m.pool.dra:
            return  # on a DRA node the driver publishes slices; nothing is advertised
        labels = node["metadata"].get("labels") or {}
        advertised = [
            r for r in node["status"].get("allocatable", {}) if r.startswith("nvidia.com/")
        ]
        running = bool(self._operand_pods(m, OPERAND_DAEMONSETS["device-plugin"]))
        if labels.get(LABEL_GPU_DEPLOY + "device-plugin") != "true" or not running:
            allocatable = node["status"].setdefault("allocatable", {})
            for resource in advertised:
                allocatable[resource] = "0"
            self.tx.put("nodes", node)
            return
        if labels.get("nvidia.com/mig.config.state") != "success":
            return
        strategy = labels.get("nvidia.com/mig.strategy") or m.pool.mig_strategy
        try:
            resources = objects.mig_resources(it, labels.get("nvidia.com/mig.config"), strategy)
        except ValueError:
            return  # a config the GPU has no layout for: the plugin keeps what it had
        update: dict[str, str | None] = dict.fromkeys(advertised)
        update.update({r: str(n) for r, n in resources.items()})
        self._set_allocatable(m, update)
        counts: dict[str, str | None] = {
            k: None for k in labels if k.startswith("nvidia.com/mig-") and k.endswith(".count")
        }
        counts.update(
            {f"{r}.count": str(n) for r, n in resources.items() if r.startswith("nvidia.com/mig-")}
        )
        self._set_labels(m, counts)

    def node_deleted(self, name: str) -> bool:
        """True when the Node stays (finalizer) while Karpenter terminates it."""
        m = self.machines.get(name)
        if m is None:
            return False
        if m.nodeclaim is not None:
            self.terminate(m, cause="manual")
            return True
        m.deleting = True
        self._remove_node(m)  # its pods stay bound to the gone Node until pod GC
        self._queue_reconcile(m.pool.name, self.t + m.pool.replacement_delay)
        return False

    def nodeclaim_deleted(self, name: str) -> None:
        m = self.claims.get(name)
        if m is not None:
            self.terminate(m, cause="manual")

    def delete_pod(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """DELETE of a pod: the pod as the API returns it (deletionTimestamp set), or None
        when there is no such pod."""
        return self.workloads.delete(namespace, name, grace)

    def evict_pod(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """POST pods/eviction: the PodDisruptionBudget that refuses it, or None."""
        return self.workloads.evict(namespace, name, grace)

    def _recreate_daemon_pod(self, m: Machine, ds: str) -> None:
        if m.removed:
            return
        key = next((k for k, name in OPERAND_DAEMONSETS.items() if name == ds), None)
        if key is not None and self._label(m, LABEL_GPU_DEPLOY + key) not in (None, "true"):
            return  # the operand's nodeSelector no longer matches this node
        self._create_daemon_pods(m, only=ds)
        if ds == "eks-node-monitoring-agent" and m.nma_running:
            self._nma_start(m)


def _feature_gates(template: JsonDict) -> str:
    for ctr in template.get("spec", {}).get("containers", []):
        if ctr.get("name") == "controller":
            # A --feature-gates flag replaces the env, which is only the flag's default.
            argv = [str(a) for a in (ctr.get("command") or []) + (ctr.get("args") or [])]
            for i in range(len(argv) - 1, -1, -1):
                flag, eq, value = argv[i].partition("=")
                if flag in ("--feature-gates", "-feature-gates"):
                    if eq:
                        return value
                    if i + 1 < len(argv):
                        return argv[i + 1]
            for env in ctr.get("env", []):
                if env.get("name") == "FEATURE_GATES":
                    return str(env.get("value", ""))
    return ""


def _conditions_moved(before: JsonDict | None, after: JsonDict) -> bool:
    """KC v1.7.0+ node.health predicate: a condition added, removed, or with a new status or
    lastTransitionTime."""
    if before is None:
        return True
    old = {
        c["type"]: (c["status"], c.get("lastTransitionTime"))
        for c in before["status"].get("conditions", [])
    }
    new = {
        c["type"]: (c["status"], c.get("lastTransitionTime"))
        for c in after["status"].get("conditions", [])
    }
    return old != new


def _minor(version: str) -> int:
    """`1.32` → 32 (the minor of the scenario's Kubernetes version; 0 when unreadable)."""
    parts = version.lstrip("v").split(".")
    try:
        return int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0


def _parse_ts(value: str) -> float:
    """`2026-11-20T12:00:00Z` → epoch seconds (sliced: strptime dominates large builds)."""
    return datetime(
        int(value[0:4]),
        int(value[5:7]),
        int(value[8:10]),
        int(value[11:13]),
        int(value[14:16]),
        int(value[17:19]),
        tzinfo=UTC,
    ).timestamp()
