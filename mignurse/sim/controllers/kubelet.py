"""The kubelet and the node lifecycle controllers: registration, readiness, leases, cordons."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mignurse.sim import hardware, karpenter_objects, node_objects, objects
from mignurse.sim.controllers.base import (
    KUBELET_CONDITIONS,
    KUBELET_STATUS_REPORT,
    KUBELET_STATUS_SYNC,
    LEASE_RENEW,
    NODE_LIFECYCLE_LAG,
    NODE_MONITOR_PERIOD,
    ZONE_IDS,
    Machine,
)
from mignurse.sim.objects import micro_ts, ts
from mignurse.sim.scenario_spec import NMA_CONDITIONS, ConditionSpec, Step

if TYPE_CHECKING:
    from mignurse.sim.controllers.world import World


class Kubelet:
    def __init__(self, world: World) -> None:
        self.w = world
        self._lease_members: dict[int, dict[Machine, None]] = {}
        self._lease_ticking: set[int] = set()

    def heartbeat_catch_up(self, m: Machine) -> None:
        """A node launched before now has kept reporting: its conditions carry the heartbeat
        of its last status report."""
        registered = m.launched_at + m.pool.register_after
        last = registered + math.floor((self.w.now - registered) / KUBELET_STATUS_REPORT + 1e-9) * (
            KUBELET_STATUS_REPORT
        )
        node = self.w.node(m)
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
            self.w.tx.put("nodes", node)

    def node_input(self, m: Machine) -> node_objects.NodeSpecInput:
        pool = m.pool
        it = hardware.instance_type(pool.instance_type)
        region = self.w.scenario.region
        region_id = ZONE_IDS.get(region, region.replace("-", "")[:4])
        zone_id = f"{region_id}-az{ord(m.zone[-1]) - ord('a') + 1}"
        labels = dict(pool.labels)
        labels.update(m.extra_labels)
        return node_objects.NodeSpecInput(
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
            os=hardware.os_image(m.os_name),
            image_id=m.image,
            nodepool=pool.name if pool.kind == "nodepool" else None,
            nodegroup=pool.name if pool.kind == "nodegroup" else None,
            nodeclass=pool.nodeclass,
            cluster_name=self.w.scenario.cluster_name,
            extra_labels=labels,
            mig_config=pool.mig_config,
            mig_strategy=pool.mig_strategy,
            taints=tuple(t.to_api() for t in pool.taints),
            gpu_resources=m.lifecycle.gpu_resources,
            nodepool_hash=objects.stable_hex("np", pool.name),
            driver_version=hardware.os_image(m.os_name).nvidia_driver
            or hardware.DEFAULT_NVIDIA_DRIVER,
            dra=pool.dra,
        )

    def register(self, m: Machine) -> None:
        if m.deleting:
            return
        node = node_objects.build_node(self.node_input(m), ready=False)
        if m.pool.kind == "nodepool":
            node["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": karpenter_objects.KARPENTER_API,
                    "kind": "NodeClaim",
                    "name": m.nodeclaim,
                    "uid": m.claim_uid,
                    "blockOwnerDeletion": True,
                }
            ]
        self.w.tx.put("nodes", node)
        m.registered = True
        if m.pool.dra:
            self.w.dra.registered(m, node["metadata"]["labels"])
        self.startup_events(m)
        self.w.emit(
            self.w.node_ref(m),
            "RegisteredNode",
            f"Node {m.node} event: Registered Node {m.node} in Controller",
            component="node-controller",
        )
        claim = self.w.karpenter.claim(m)
        if claim is not None:
            claim["status"]["nodeName"] = m.node
            self.w.tx.put("nodeclaims", claim)
            self.w.karpenter.set_claim_condition(m, "Registered", "True", "Registered")
        if m.pool.daemonsets:
            self.w.pods.create_daemon_pods(m)
        self.w.pool_nodes[m.pool.name] += 1
        self.w.karpenter.update_nodepool_status(m.pool)
        self._start_lease(m)
        self._schedule_status_report(m)
        if self.w.workloads.pending():
            # A new Node: the scheduler retries its unschedulable pods, Karpenter looks again.
            self.w.workloads.schedule_soon()
            self.w.provisioner.trigger()
        if m.pool.kind == "nodepool":
            self.w.repair.refresh_health(m, node)  # a new Node is NotReady: it counts for the guard
            self.w.repair.health_reconcile(m)  # the Node's create event

    def startup_events(self, m: Machine) -> None:
        self.w.kubelet_event(m, "Starting", "Starting kubelet.")
        self.w.kubelet_event(
            m, "InvalidDiskCapacity", "invalid capacity 0 on image filesystem", "Warning"
        )
        for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
            self.w.kubelet_event(m, reason, f"Node {m.node} status is now: {reason}")
        self.w.kubelet_event(
            m, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods"
        )

    # ------------------------------------------------------------------ kubelet, NMA

    def lifecycle_step(self, m: Machine, step: Step) -> None:
        if m.removed or not m.registered or m.instance_state != "running":
            return
        self.apply_step(m, step, from_image=True)

    def apply_step(self, m: Machine, step: Step, *, from_image: bool = False) -> None:
        if step.kubelet == "restart":
            self.restart(m)
        elif step.kubelet == "stop":
            self.stop(m)
        elif step.kubelet == "start":
            self.start(m)
        if step.ready is True:
            self.become_ready(m)
        elif step.ready is False:
            self._become_not_ready(
                m, step.reason or "KubeletNotReady", step.message or "container runtime is down"
            )
        for cond in step.conditions:
            self._apply_condition(m, cond, from_image)
        if step.labels:
            self.w.set_labels(m, dict(step.labels))
        for taint in step.taints:
            self.w.set_taint(m, taint.key, taint.effect, taint.value)
        for key in step.remove_taints:
            self.w.remove_taint(m, key)
        if step.allocatable:
            self.w.set_allocatable(m, dict(step.allocatable))
        if step.nma_restart:
            self.w.nma.start(m)
        for ev in step.events:
            ref = self.w.kubelet_ref(m) if ev.source == "kubelet" else self.w.node_ref(m)
            host = m.node if ev.source in ("kubelet", "eks-node-monitoring-agent") else None
            self.w.emit(
                ref, ev.reason, ev.message, event_type=ev.type, component=ev.source, host=host
            )

    def _apply_condition(self, m: Machine, cond: ConditionSpec, from_image: bool = False) -> None:
        if cond.type == "Ready":
            if cond.status == "True":
                self.become_ready(m)
            elif cond.status == "False":
                self._become_not_ready(m, cond.reason or "KubeletNotReady", cond.message)
            else:
                self.w.set_node_condition(
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
        self.w.set_node_condition(m, cond.type, cond.status, cond.reason, cond.message)

    def become_ready(self, m: Machine) -> None:
        first = not m.initialized
        m.ready = True
        if m.ready_at is None:
            m.ready_at = self.w.t
        if self.w.set_node_condition(m, "Ready", "True", *node_objects.READY_TRUE[1:]):
            self.w.kubelet_event(m, "NodeReady", f"Node {m.node} status is now: NodeReady")
        self.w.remove_taint(m, "node.kubernetes.io/not-ready")
        self.w.remove_taint(m, "node.kubernetes.io/unreachable")
        if m.pool.dra:
            self.w.dra.node_ready(m)
        if first:
            m.initialized = True
            if m.pool.kind == "nodepool":
                self.w.set_labels(m, {"karpenter.sh/initialized": "true"})
                self.w.karpenter.set_claim_condition(m, "Initialized", "True", "Initialized")
                self.w.karpenter.set_claim_condition(m, "Ready", "True", "Ready")
            if m.pool.node_monitoring_agent:
                self.w.nma.start(m)
            self.w.karpenter.consolidatable_check(m)
        self.w.workloads.node_ready(m)
        if self.w.scenario.karpenter is not None and m.nodeclaim is not None:
            self.w.provisioner.trigger()

    def _become_not_ready(self, m: Machine, reason: str, message: str) -> None:
        m.ready = False
        if self.w.set_node_condition(m, "Ready", "False", reason, message):
            self.w.kubelet_event(m, "NodeNotReady", f"Node {m.node} status is now: NodeNotReady")
        self.w.set_taint(m, "node.kubernetes.io/not-ready", "NoSchedule")
        self.w.set_taint(m, "node.kubernetes.io/not-ready", "NoExecute")

    def restart(self, m: Machine) -> None:
        m.kubelet_posting = True
        m.kubelet_token += 1
        self._renew_lease_now(m)
        self.startup_events(m)
        if m.pool.dra:
            self.w.dra.kubelet_started(m)
        if m.ready:
            self._become_not_ready(
                m, "KubeletNotReady", "container runtime status check may not have completed yet"
            )

    def stop(self, m: Machine) -> None:
        m.kubelet_posting = False
        m.kubelet_token += 1
        m.report_token += 1
        if m.registered and not m.removed:
            # The Lease keeps the renewal before the stop; the node lifecycle controller goes
            # by it (or the Node's heartbeat) and marks the node after the grace period.
            last = self._last_renewal(m.lease_bucket, self.w.t) if m.lease_bucket >= 0 else self.w.t
            m.lease_bucket = -1
            self._write_lease(m, last)
            due = last + self.w.node_monitor_grace
            self.w.schedule(max(self.w.t, due), self._node_monitor_grace, m, m.kubelet_token)
        for pod in m.pods:
            if pod.deleting:
                pod.gone_at = None  # nobody left to confirm the deletion

    def _node_monitor_grace(self, m: Machine, token: int) -> None:
        if m.kubelet_posting or token != m.kubelet_token or m.removed:
            return
        changed = False
        for ctype in KUBELET_CONDITIONS:
            changed |= self.w.set_node_condition(
                m, ctype, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            )
        m.ready = False
        self.w.set_taint(m, "node.kubernetes.io/unreachable", "NoSchedule")
        self.w.set_taint(m, "node.kubernetes.io/unreachable", "NoExecute")
        if changed:
            self.w.emit(
                self.w.node_ref(m),
                "NodeNotReady",
                f"Node {m.node} status is now: NodeNotReady",
                component="node-controller",
            )
            self.w.workloads.node_unknown(m)

    def start(self, m: Machine) -> None:
        m.kubelet_posting = True
        m.kubelet_token += 1
        self._renew_lease_now(m)
        if m.pool.dra:
            self.w.dra.kubelet_started(m)
        self._schedule_status_report(m)
        for ctype, values in node_objects.KUBELET_HEALTHY.items():
            self.w.set_node_condition(m, ctype, *values)
        self.w.remove_taint(m, "node.kubernetes.io/unreachable")
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
        self._write_lease(m, min(self.w.now, self._last_renewal(bucket, self.w.now)))

    def _last_renewal(self, bucket: int, at: float) -> float:
        """The last renewal at or before `at` of a kubelet renewing at second `bucket` of
        every 10 s."""
        return math.floor((at - bucket) / LEASE_RENEW) * LEASE_RENEW + bucket

    def _write_lease(self, m: Machine, renewed: float) -> None:
        if m.lease is None:
            return
        m.lease["spec"]["renewTime"] = micro_ts(max(renewed, m.launched_at + m.pool.register_after))
        self.w.tx.put("leases", m.lease)

    def _renew_lease_now(self, m: Machine) -> None:
        """A kubelet that (re)starts renews at once, then every 10 s from then on."""
        if m.lease is None or m.removed:
            return
        self._write_lease(m, self.w.t)
        self._join_lease_bucket(m, int(self.w.t % LEASE_RENEW))

    def _join_lease_bucket(self, m: Machine, bucket: int) -> None:
        # Renewals of all kubelets due in the same second run as one action (cheap at scale).
        m.lease_bucket = bucket
        self._lease_members.setdefault(bucket, {})[m] = None
        if bucket not in self._lease_ticking:
            self._lease_ticking.add(bucket)
            due = self._last_renewal(bucket, max(self.w.t, self.w.now)) + LEASE_RENEW
            self.w.schedule(due, self._lease_tick, bucket)

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
        renewed = micro_ts(self.w.t)
        for m in live:
            assert m.lease is not None
            m.lease["spec"]["renewTime"] = renewed
            self.w.tx.put("leases", m.lease)
        self.w.schedule(self.w.t + LEASE_RENEW, self._lease_tick, bucket)

    def _schedule_status_report(self, m: Machine) -> None:
        """nodeStatusReportFrequency: the kubelet writes its Node at least every 5 minutes
        even when nothing changed (lastHeartbeatTime moves)."""
        registered = m.launched_at + m.pool.register_after
        # The next report after now (a backdated node skips the ones already past).
        periods = math.floor(
            (max(self.w.t, self.w.now) - registered) / KUBELET_STATUS_REPORT + 1e-9
        )
        m.report_token += 1
        self.w.schedule(
            registered + (periods + 1) * KUBELET_STATUS_REPORT,
            self._status_report,
            m,
            m.report_token,
        )

    def _status_report(self, m: Machine, token: int) -> None:
        if token != m.report_token or m.removed or not m.kubelet_posting:
            return
        node = self.w.node(m)
        if node is not None:
            beat = ts(self.w.t)
            for cond in node["status"].get("conditions", []):
                if cond["type"] in KUBELET_CONDITIONS and cond["status"] != "Unknown":
                    cond["lastHeartbeatTime"] = beat
            self.w.tx.put("nodes", node)
            self.w.repair.node_written(m)
        self._schedule_status_report(m)

    def cloud_node_lifecycle(self, m: Machine) -> None:
        """The cloud node lifecycle controller deletes a NotReady Node whose instance is gone
        (k8s.io/cloud-provider controllers/nodelifecycle, every --node-monitor-period)."""
        if m.removed:
            return
        if self.w.ready_status(m) == "True":
            self.w.schedule(self.w.t + NODE_MONITOR_PERIOD, self.cloud_node_lifecycle, m)
            return
        self.w.emit(
            {"kind": "Node", "name": m.node, "uid": m.node_uid},
            "DeletingNode",
            f"Deleting node {m.node} because it does not exist in the cloud provider",
            component="cloud-node-lifecycle-controller",
        )
        if m.nodeclaim is None:
            self.w.termination.remove_node(m)
        elif not m.deleting:
            self.w.termination.terminate(
                m, cause="instance-gone"
            )  # the Node's finalizer is Karpenter's
        elif not m.drained:
            self.w.termination.queue_node_termination(m, self.w.t + 1)

    # ------------------------------------------------------------------ cordon

    def cordon(self, m: Machine, unschedulable: bool) -> None:
        node = self.w.node(m)
        if node is None or bool(node["spec"].get("unschedulable")) == unschedulable:
            return
        if unschedulable:
            node["spec"]["unschedulable"] = True
        else:
            node["spec"].pop("unschedulable", None)
        self.w.tx.put("nodes", node)
        self.unschedulable_changed(m)

    def unschedulable_changed(self, m: Machine) -> None:
        """A cordon or uncordon: the node lifecycle controller's TaintNodesByCondition follows
        spec.unschedulable with the node.kubernetes.io/unschedulable:NoSchedule taint
        (pkg/controller/nodelifecycle doNoScheduleTaintingPass); the kubelet reports
        NodeNotSchedulable / NodeSchedulable at its next status sync."""
        self.w.schedule(self.w.t + NODE_LIFECYCLE_LAG, self._unschedulable_taint, m)
        self.w.schedule(self.w.t + KUBELET_STATUS_SYNC, self.kubelet_sees_cordon, m)

    def _unschedulable_taint(self, m: Machine) -> None:
        node = self.w.node(m)
        if node is None:
            return
        if node["spec"].get("unschedulable"):
            self.w.set_taint(m, "node.kubernetes.io/unschedulable", "NoSchedule")
        else:
            self.w.remove_taint(m, "node.kubernetes.io/unschedulable")
            self.w.workloads.schedule_soon()

    def kubelet_sees_cordon(self, m: Machine) -> None:
        """kubelet records NodeNotSchedulable / NodeSchedulable when spec.unschedulable
        differs from what it last saw (K8S pkg/kubelet/kubelet_node_status.go)."""
        node = self.w.node(m)
        if node is None or not m.kubelet_posting:
            return
        unschedulable = bool(node["spec"].get("unschedulable"))
        if unschedulable == m.kubelet_sees_unschedulable:
            return
        m.kubelet_sees_unschedulable = unschedulable
        reason = "NodeNotSchedulable" if unschedulable else "NodeSchedulable"
        self.w.kubelet_event(m, reason, f"Node {m.node} status is now: {reason}")
