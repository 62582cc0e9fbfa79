"""The simulated control loops: Karpenter, kubelet, node lifecycle, NMA, scheduler, rollouts.

Event-driven: every future change is an action in one priority queue keyed by sim time,
so `run_until()` is deterministic for a given scenario and seed. All methods run under the
store lock; each action runs in a `Txn` so several edits to one object make one write.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mignurse.sim import dra, hardware, karpenter_objects, node_objects, nodegroups, objects
from mignurse.sim.controllers.base import (
    ALNUM,
    KARPENTER_DEDUPE,
    KUBELET_CONDITIONS,
    Machine,
    Txn,
)
from mignurse.sim.controllers.gpu_operator import GpuOperator
from mignurse.sim.controllers.instances import Instances
from mignurse.sim.controllers.karpenter import Karpenter
from mignurse.sim.controllers.kubelet import Kubelet
from mignurse.sim.controllers.mng import ManagedNodeGroups
from mignurse.sim.controllers.nma import NodeMonitoringAgent
from mignurse.sim.controllers.node_repair import NodeRepair
from mignurse.sim.controllers.pods import Pods
from mignurse.sim.controllers.termination import Termination
from mignurse.sim.karpenter_versions import KarpenterTraits
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.operator_config import MigFiles
from mignurse.sim.provisioning import Provisioner
from mignurse.sim.scenario_spec import (
    LifecycleScript,
    NodeRef,
    PoolSpec,
    Scenario,
    TimelineItem,
    gate_value,
)
from mignurse.sim.store import Store
from mignurse.sim.workloads import PodRecord, Workload, Workloads


class ControlLoops:
    """The controllers of one simulated cluster, and the clock, queue, transaction and event
    recorder they share."""

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
        self.pool_uid: dict[str, str] = {}
        self._event_index: dict[tuple[str, ...], tuple[str, str]] = {}
        self._event_last: dict[tuple[str, str], float] = {}
        self._event_nanos = 0
        k = scenario.karpenter
        self.traits = KarpenterTraits.of(k.version) if k else None
        self.repair_enabled = bool(k and k.node_repair)
        self._karpenter_seen: dict[str, float] = {}  # Karpenter recorder dedupe: key → until
        self.pool_nodes: dict[str, int] = {p.name: 0 for p in scenario.pools}
        # the mig-parted file each node's mig-manager reads: its MIG layouts follow it
        self.mig_files = MigFiles(scenario.cluster_policies, scenario.configmaps)
        self.workloads = Workloads(self)
        self.provisioner = Provisioner(self)
        self.dra = dra.DraDriver(self)
        self.karpenter_workload: Workload | None = None
        minor = _minor(scenario.kubernetes_version)
        # kube-controller-manager --node-monitor-grace-period: 40 s, 50 s from Kubernetes 1.32
        # (kubernetes/kubernetes CHANGELOG-1.32.md, #126287).
        self.node_monitor_grace = 50.0 if minor >= 32 else 40.0
        # ScalingReplicaSet says "from A to B" from 1.32 (CHANGELOG-1.32.md, #125118).
        self.scaling_message_has_from = minor >= 32
        self.instances = Instances(self)
        self.karpenter = Karpenter(self)
        self.repair = NodeRepair(self)
        self.kubelet = Kubelet(self)
        self.nma = NodeMonitoringAgent(self)
        self.termination = Termination(self)
        self.mng = ManagedNodeGroups(self)
        self.pods = Pods(self)
        self.gpu_operator = GpuOperator(self)

    # ------------------------------------------------------------------ machinery

    @property
    def tx(self) -> Txn:
        assert self._tx is not None, "controller code must run inside ControlLoops.txn()"
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

    def uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def next_tick(self, period: float) -> float:
        """The next run of a periodic loop; a backdated loop skips the ticks already past."""
        due = self.t + period
        if due <= self.now:
            due += math.ceil((self.now - due) / period + 1e-9) * period
        return due

    def suffix(self, n: int = 5) -> str:
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
            uid=self.uid(),
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

    def node_ref(self, machine: Machine) -> JsonDict:
        return {"kind": "Node", "name": machine.node, "uid": machine.node_uid, "apiVersion": "v1"}

    def kubelet_ref(self, machine: Machine) -> JsonDict:
        # kubelet's nodeRef uses the node name as UID and carries no apiVersion.
        return {"kind": "Node", "name": machine.node, "uid": machine.node}

    def claim_ref(self, machine: Machine) -> JsonDict:
        assert machine.nodeclaim is not None
        return {
            "kind": "NodeClaim",
            "name": machine.nodeclaim,
            "uid": machine.claim_uid,
            "apiVersion": karpenter_objects.KARPENTER_API,
        }

    def kubelet_event(
        self, machine: Machine, reason: str, message: str, etype: str = "Normal"
    ) -> None:
        # A restarted kubelet has a fresh recorder: its events are new objects, not count+1.
        self.emit(
            self.kubelet_ref(machine),
            reason,
            message,
            event_type=etype,
            component="kubelet",
            host=machine.node,
            recorder=f"kubelet-{machine.kubelet_token}",
        )

    def karpenter_event(
        self, ref: JsonDict, reason: str, message: str, etype: str = "Normal"
    ) -> None:
        self.emit(ref, reason, message, event_type=etype, component="karpenter")

    def publish(
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
        self.karpenter_event(ref, reason, message, etype)

    @staticmethod
    def transition_message(ctype: str, old: str, new: str, reason: str, message: str) -> str:
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
            if any(hardware.instance_type(p.instance_type).gpu for p in self.scenario.pools):
                namespaces.add("gpu-operator")
            if self.dra.enabled():
                namespaces.add(dra.NAMESPACE)
            for p in self.scenario.pools:
                if p.workload:
                    namespaces.add(p.workload.namespace)
            for ns in sorted(namespaces):
                self.tx.put(
                    "namespaces", objects.build_namespace(ns, self.uid(), self.begin - 86400 * 90)
                )
            for pool in self.scenario.pools:
                if pool.kind == "nodepool":
                    self.karpenter.create_nodepool(pool)
                if pool.workload:
                    self.pods.create_workload(pool)
            if self.scenario.karpenter:
                self.karpenter.create_karpenter()
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
                            lc = LifecycleScript(image, ex.steps, lc.gpu_resources)
                        self.instances.launch(
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
                self.instances.reconcile_pool(
                    pool.name
                )  # the size each pool starts the warmup with
            self.provisioner.start_polling()
            for item in self.scenario.timeline:
                self.schedule(max(self.begin, self.start + item.at), self._timeline, item)

    # ------------------------------------------------------------------ node state

    def node(self, machine: Machine) -> JsonDict | None:
        if not machine.registered or machine.removed:
            return None
        return self.tx.get("nodes", "", machine.node)

    def set_node_condition(
        self, machine: Machine, ctype: str, status: str, reason: str, message: str
    ) -> bool:
        node = self.node(machine)
        if node is None:
            return False
        conds: list[JsonDict] = node["status"].setdefault("conditions", [])
        current = next((c for c in conds if c["type"] == ctype), None)
        old_status = current["status"] if current else "Unknown"
        heartbeat = ts(self.t)
        if current is not None and status == "Unknown" and ctype in KUBELET_CONDITIONS:
            heartbeat = current["lastHeartbeatTime"]  # the controller keeps the last heartbeat
        new = node_objects.kubelet_condition(
            ctype, status, reason, message, now=self.t, since=self.t
        )
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
            self.karpenter_event(
                self.node_ref(machine),
                ctype,
                self.transition_message(ctype, old_status, status, reason, message),
            )
        transitioned = current is None or current["status"] != status
        self.repair.conditions_changed(machine, node, transitioned)
        return True

    def set_taint(
        self,
        machine: Machine,
        key: str,
        effect: str,
        value: str | None = None,
        *,
        stamped: bool = False,
    ) -> None:
        """Add a taint; `stamped`: with its timeAdded, as the node lifecycle controller adds
        every taint (kubernetes v1.34 pkg/controller/util/node/controller_utils.go
        SwapNodeControllerTaint), and every NoExecute one has."""
        node = self.node(machine)
        if node is None:
            return
        taints: list[JsonDict] = node["spec"].setdefault("taints", [])
        if any(t["key"] == key and t["effect"] == effect for t in taints):
            return
        taint: JsonDict = {"key": key, "effect": effect}
        if value is not None:
            taint["value"] = value
        if effect == "NoExecute" or stamped:
            taint["timeAdded"] = ts(self.t)
        taints.append(taint)
        self.tx.put("nodes", node)
        self.repair.node_written(machine)
        if effect == "NoExecute":
            self.workloads.noexecute_tainted(machine, key)

    def remove_taint(self, machine: Machine, key: str) -> None:
        node = self.node(machine)
        if node is None or not node["spec"].get("taints"):
            return
        kept = [t for t in node["spec"]["taints"] if t["key"] != key]
        if len(kept) != len(node["spec"]["taints"]):
            if kept:
                node["spec"]["taints"] = kept
            else:
                del node["spec"]["taints"]
            self.tx.put("nodes", node)
            self.repair.node_written(machine)

    def set_labels(self, machine: Machine, labels: dict[str, str | None]) -> None:
        node = self.node(machine)
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
        self.repair.node_written(machine)
        if machine.pool.dra:
            self.dra.labels_changed(machine, current)

    def set_allocatable(self, machine: Machine, resources: dict[str, str | None]) -> None:
        node = self.node(machine)
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
        self.repair.node_written(machine)

    def ready_status(self, machine: Machine) -> str:
        if not machine.registered or machine.removed:
            return "Unknown"
        node = self.tx.peek("nodes", "", machine.node)
        if node is None:
            return "Unknown"
        cond = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)
        return str(cond["status"]) if cond else "Unknown"

    # ------------------------------------------------------------------ timeline

    def resolve(self, ref: NodeRef) -> Machine | None:
        if ref.name is not None:
            return self.machines.get(ref.name)
        pool = ref.newest or ref.oldest
        assert pool is not None
        candidates = [
            machine
            for machine in self.pool_machines.get(pool, [])
            if machine.alive and machine.registered
        ]
        if not candidates:
            return None
        pick = max if ref.newest else min
        return pick(candidates, key=lambda machine: machine.launched_at)

    def _timeline(self, item: TimelineItem) -> None:
        if item.action == "scale":
            assert item.argument is not None and item.nodes is not None
            self.instances.scale(item.argument, item.nodes)
            return
        assert item.node is not None
        machine = self.resolve(item.node)
        if machine is None:
            return
        if item.step is not None:
            self.kubelet.apply_step(machine, item.step)
        elif item.action == "deleteNodeClaim":
            self.termination.terminate(machine, cause="manual")
        elif item.action == "spotInterrupt":
            self.karpenter.spot_interrupt(machine)
        elif item.action == "consolidate":
            self.karpenter.consolidate(machine, item.argument or "Underutilized")
        elif item.action == "cordon":
            self.kubelet.cordon(machine, True)

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
        self.repair.set_repair_enabled(
            gate_value(_feature_gates(wl.current.template), "NodeRepair")
        )

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
        machine = self.machines.get(name)
        if machine is None or machine.removed:
            return
        machine.api_touched = True
        node = self.tx.get("nodes", "", name)
        if node is not None:
            # The store still holds the Node as it was: this API write is not flushed yet.
            before = self.store.get("nodes", "", name)
            self.repair.conditions_changed(machine, node, _conditions_moved(before, node))
            if before is not None:
                self.gpu_operator.react(machine, before, node)
                if bool(before["spec"].get("unschedulable")) != bool(
                    node["spec"].get("unschedulable")
                ):
                    self.kubelet.unschedulable_changed(machine)
            if machine.pool.dra:
                self.dra.labels_changed(machine, node["metadata"].get("labels") or {})

    def node_deleted(self, name: str) -> bool:
        """True when the Node stays (finalizer) while Karpenter terminates it."""
        machine = self.machines.get(name)
        if machine is None:
            return False
        if machine.nodeclaim is not None:
            self.termination.terminate(machine, cause="manual")
            return True
        machine.deleting = True
        self.termination.remove_node(machine)  # its pods stay bound to the gone Node until pod GC
        self.instances.queue_reconcile(machine.pool.name, self.t + machine.pool.replacement_delay)
        return False

    def nodeclaim_deleted(self, name: str) -> None:
        machine = self.claims.get(name)
        if machine is not None:
            self.termination.terminate(machine, cause="manual")

    def delete_pod(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """DELETE of a pod: the pod as the API returns it (deletionTimestamp set), or None
        when there is no such pod."""
        return self.workloads.delete(namespace, name, grace)

    def evict_pod(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """POST pods/eviction: the PodDisruptionBudget that refuses it, or None."""
        return self.workloads.evict(namespace, name, grace)

    def created(self, plural: str, namespace: str, name: str) -> None:
        """An object a client created: its controller takes it up on its next pass (the
        disruption controller a PodDisruptionBudget, Karpenter a NodePool)."""
        if plural == "poddisruptionbudgets":
            self.pdbs_changed(namespace)
        elif plural == "nodepools":
            self.schedule(self.now, self.karpenter.adopt_nodepool, name)

    def add_pool(self, pool: PoolSpec, uid: str) -> None:
        """A pool that joins while the cluster runs (a NodePool a client created): every
        controller that keeps per-pool counts learns it, and the provisioner may launch for it."""
        if any(p.name == pool.name for p in self.scenario.pools):
            return
        self.scenario = dataclasses.replace(self.scenario, pools=(*self.scenario.pools, pool))
        self.pool_machines[pool.name] = []
        self.pool_nodes[pool.name] = 0
        self.pool_uid[pool.name] = uid
        self.instances.pool_target[pool.name] = pool.nodes
        self.repair.pool_unhealthy[pool.name] = 0
        self.provisioner.start_polling()
        self.provisioner.trigger()  # pods pending for want of such a pool may fit it now

    def pdbs_changed(self, namespace: str) -> None:
        """A PodDisruptionBudget was created, changed or deleted: the disruption controller
        computes the namespace's budgets again on its next pass."""
        self.schedule(self.now, self.workloads.update_pdbs, namespace)


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
