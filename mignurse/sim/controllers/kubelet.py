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
    from mignurse.sim.controllers.loops import ControlLoops


class Kubelet:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self._lease_members: dict[int, dict[Machine, None]] = {}
        self._lease_ticking: set[int] = set()

    def heartbeat_catch_up(self, machine: Machine) -> None:
        """A node launched before now has kept reporting: its conditions carry the heartbeat
        of its last status report."""
        registered = machine.launched_at + machine.pool.register_after
        last = registered + math.floor(
            (self.loops.now - registered) / KUBELET_STATUS_REPORT + 1e-9
        ) * (KUBELET_STATUS_REPORT)
        node = self.loops.node(machine)
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
            self.loops.tx.put("nodes", node)

    def node_input(self, machine: Machine) -> node_objects.NodeSpecInput:
        pool = machine.pool
        it = hardware.instance_type(pool.instance_type)
        region = self.loops.scenario.region
        region_id = ZONE_IDS.get(region, region.replace("-", "")[:4])
        zone_id = f"{region_id}-az{ord(machine.zone[-1]) - ord('a') + 1}"
        labels = dict(pool.labels)
        labels.update(machine.extra_labels)
        return node_objects.NodeSpecInput(
            name=machine.node,
            uid=machine.node_uid,
            created=machine.launched_at + pool.register_after,
            region=region,
            zone=machine.zone,
            zone_id=zone_id,
            instance=it,
            instance_id=machine.instance_id,
            private_ip=machine.ip,
            capacity_type=pool.capacity_type,
            os=hardware.os_image(machine.os_name),
            image_id=machine.image,
            nodepool=pool.name if pool.kind == "nodepool" else None,
            nodegroup=pool.name if pool.kind == "nodegroup" else None,
            nodeclass=pool.nodeclass,
            cluster_name=self.loops.scenario.cluster_name,
            extra_labels=labels,
            mig_config=pool.mig_config,
            mig_strategy=pool.mig_strategy,
            mig_layouts=self.loops.mig_files.layouts(it.gpu, machine.node, pool.mig_config),
            taints=tuple(t.to_api() for t in pool.taints),
            gpu_resources=machine.lifecycle.gpu_resources,
            nodepool_hash=objects.stable_hex("np", pool.name),
            driver_version=hardware.os_image(machine.os_name).nvidia_driver
            or hardware.DEFAULT_NVIDIA_DRIVER,
            dra=pool.dra,
        )

    def register(self, machine: Machine) -> None:
        if machine.deleting:
            return
        node = node_objects.build_node(self.node_input(machine), ready=False)
        if machine.pool.kind == "nodepool":
            node["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": karpenter_objects.KARPENTER_API,
                    "kind": "NodeClaim",
                    "name": machine.nodeclaim,
                    "uid": machine.claim_uid,
                    "blockOwnerDeletion": True,
                }
            ]
        self.loops.tx.put("nodes", node)
        machine.registered = True
        if machine.pool.dra:
            self.loops.dra.registered(machine, node["metadata"]["labels"])
        self.startup_events(machine)
        self.loops.emit(
            self.loops.node_ref(machine),
            "RegisteredNode",
            f"Node {machine.node} event: Registered Node {machine.node} in Controller",
            component="node-controller",
        )
        claim = self.loops.karpenter.claim(machine)
        if claim is not None:
            claim["status"]["nodeName"] = machine.node
            self.loops.tx.put("nodeclaims", claim)
            self.loops.karpenter.set_claim_condition(machine, "Registered", "True", "Registered")
        if machine.pool.daemonsets:
            self.loops.pods.create_daemon_pods(machine)
        self.loops.pool_nodes[machine.pool.name] += 1
        self.loops.karpenter.update_nodepool_status(machine.pool)
        self._start_lease(machine)
        self._schedule_status_report(machine)
        if self.loops.workloads.pending():
            # A new Node: the scheduler retries its unschedulable pods, Karpenter looks again.
            self.loops.workloads.schedule_soon()
            self.loops.provisioner.trigger()
        if machine.pool.kind == "nodepool":
            self.loops.repair.refresh_health(
                machine, node
            )  # a new Node is NotReady: it counts for the guard
            self.loops.repair.health_reconcile(machine)  # the Node's create event

    def startup_events(self, machine: Machine) -> None:
        self.loops.kubelet_event(machine, "Starting", "Starting kubelet.")
        self.loops.kubelet_event(
            machine, "InvalidDiskCapacity", "invalid capacity 0 on image filesystem", "Warning"
        )
        for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
            self.loops.kubelet_event(
                machine, reason, f"Node {machine.node} status is now: {reason}"
            )
        self.loops.kubelet_event(
            machine, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods"
        )

    # ------------------------------------------------------------------ kubelet, NMA

    def lifecycle_step(self, machine: Machine, step: Step) -> None:
        if machine.removed or not machine.registered or machine.instance_state != "running":
            return
        self.apply_step(machine, step, from_image=True)

    def apply_step(self, machine: Machine, step: Step, *, from_image: bool = False) -> None:
        if step.kubelet == "restart":
            self.restart(machine)
        elif step.kubelet == "stop":
            self.stop(machine)
        elif step.kubelet == "start":
            self.start(machine)
        if step.ready is True:
            self.become_ready(machine)
        elif step.ready is False:
            self._become_not_ready(
                machine,
                step.reason or "KubeletNotReady",
                step.message or "container runtime is down",
            )
        for cond in step.conditions:
            self._apply_condition(machine, cond, from_image)
        if step.labels:
            self.loops.set_labels(machine, dict(step.labels))
        for taint in step.taints:
            self.loops.set_taint(machine, taint.key, taint.effect, taint.value)
        for key in step.remove_taints:
            self.loops.remove_taint(machine, key)
        if step.allocatable:
            self.loops.set_allocatable(machine, dict(step.allocatable))
        if step.nma_restart:
            self.loops.nma.start(machine)
        if step.plugin_crash is not None:
            self.loops.pods.crash_gpu_plugin(machine, step.plugin_crash)
        for ev in step.events:
            ref = (
                self.loops.kubelet_ref(machine)
                if ev.source == "kubelet"
                else self.loops.node_ref(machine)
            )
            host = machine.node if ev.source in ("kubelet", "eks-node-monitoring-agent") else None
            self.loops.emit(
                ref, ev.reason, ev.message, event_type=ev.type, component=ev.source, host=host
            )

    def _apply_condition(
        self, machine: Machine, cond: ConditionSpec, from_image: bool = False
    ) -> None:
        if cond.type == "Ready":
            if cond.status == "True":
                self.become_ready(machine)
            elif cond.status == "False":
                self._become_not_ready(machine, cond.reason or "KubeletNotReady", cond.message)
            else:
                self.loops.set_node_condition(
                    machine,
                    "Ready",
                    "Unknown",
                    cond.reason or "NodeStatusUnknown",
                    cond.message or "Kubelet stopped posting node status.",
                )
            return
        if cond.type in NMA_CONDITIONS:
            value = (cond.status, cond.reason, cond.message)
            machine.nma_memory[cond.type] = value
            if cond.status == "False":
                machine.nma_faults[cond.type] = value
                if from_image:
                    machine.image_faults.add(cond.type)
            else:
                machine.nma_faults.pop(cond.type, None)
                machine.image_faults.discard(cond.type)
        self.loops.set_node_condition(machine, cond.type, cond.status, cond.reason, cond.message)

    def become_ready(self, machine: Machine) -> None:
        first = not machine.initialized
        machine.ready = True
        if machine.ready_at is None:
            machine.ready_at = self.loops.t
        if self.loops.set_node_condition(machine, "Ready", "True", *node_objects.READY_TRUE[1:]):
            self.loops.kubelet_event(
                machine, "NodeReady", f"Node {machine.node} status is now: NodeReady"
            )
        self.loops.remove_taint(machine, "node.kubernetes.io/not-ready")
        self.loops.remove_taint(machine, "node.kubernetes.io/unreachable")
        if machine.pool.dra:
            self.loops.dra.node_ready(machine)
        if first:
            machine.initialized = True
            if machine.pool.kind == "nodepool":
                self.loops.set_labels(machine, {"karpenter.sh/initialized": "true"})
                self.loops.karpenter.set_claim_condition(
                    machine, "Initialized", "True", "Initialized"
                )
                self.loops.karpenter.set_claim_condition(machine, "Ready", "True", "Ready")
            if machine.pool.node_monitoring_agent:
                self.loops.nma.start(machine)
            self.loops.karpenter.consolidatable_check(machine)
        self.loops.workloads.node_ready(machine)
        if self.loops.scenario.karpenter is not None and machine.nodeclaim is not None:
            self.loops.provisioner.trigger()

    def _become_not_ready(self, machine: Machine, reason: str, message: str) -> None:
        machine.ready = False
        if self.loops.set_node_condition(machine, "Ready", "False", reason, message):
            self.loops.kubelet_event(
                machine, "NodeNotReady", f"Node {machine.node} status is now: NodeNotReady"
            )
        # The node lifecycle controller stamps every taint it adds (SwapNodeControllerTaint).
        self.loops.set_taint(machine, "node.kubernetes.io/not-ready", "NoSchedule", stamped=True)
        self.loops.set_taint(machine, "node.kubernetes.io/not-ready", "NoExecute")

    def restart(self, machine: Machine) -> None:
        machine.kubelet_posting = True
        machine.kubelet_token += 1
        self._renew_lease_now(machine)
        self.startup_events(machine)
        if machine.pool.dra:
            self.loops.dra.kubelet_started(machine)
        if machine.ready:
            self._become_not_ready(
                machine,
                "KubeletNotReady",
                "container runtime status check may not have completed yet",
            )

    def stop(self, machine: Machine) -> None:
        machine.kubelet_posting = False
        machine.kubelet_token += 1
        machine.report_token += 1
        if machine.registered and not machine.removed:
            # The Lease keeps the renewal before the stop; the node lifecycle controller goes
            # by it (or the Node's heartbeat) and marks the node after the grace period.
            last = (
                self._last_renewal(machine.lease_bucket, self.loops.t)
                if machine.lease_bucket >= 0
                else self.loops.t
            )
            machine.lease_bucket = -1
            self._write_lease(machine, last)
            due = last + self.loops.node_monitor_grace
            self.loops.schedule(
                max(self.loops.t, due), self._node_monitor_grace, machine, machine.kubelet_token
            )
        for pod in machine.pods:
            if pod.deleting:
                pod.gone_at = None  # nobody left to confirm the deletion

    def _node_monitor_grace(self, machine: Machine, token: int) -> None:
        if machine.kubelet_posting or token != machine.kubelet_token or machine.removed:
            return
        changed = False
        for ctype in KUBELET_CONDITIONS:
            changed |= self.loops.set_node_condition(
                machine,
                ctype,
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
            )
        machine.ready = False
        self.loops.set_taint(machine, "node.kubernetes.io/unreachable", "NoSchedule", stamped=True)
        self.loops.set_taint(machine, "node.kubernetes.io/unreachable", "NoExecute")
        if changed:
            self.loops.emit(
                self.loops.node_ref(machine),
                "NodeNotReady",
                f"Node {machine.node} status is now: NodeNotReady",
                component="node-controller",
            )
            self.loops.workloads.node_unknown(machine)

    def start(self, machine: Machine) -> None:
        machine.kubelet_posting = True
        machine.kubelet_token += 1
        self._renew_lease_now(machine)
        if machine.pool.dra:
            self.loops.dra.kubelet_started(machine)
        self._schedule_status_report(machine)
        for ctype, values in node_objects.KUBELET_HEALTHY.items():
            self.loops.set_node_condition(machine, ctype, *values)
        self.loops.remove_taint(machine, "node.kubernetes.io/unreachable")
        self._become_not_ready(
            machine, "KubeletNotReady", "PLEG is not healthy: pleg has yet to be successful"
        )

    # ------------------------------------------------------------------ kubelet heartbeats

    def _start_lease(self, machine: Machine) -> None:
        """The kubelet's node Lease in kube-node-lease, renewed every 10 s while it runs."""
        registered = machine.launched_at + machine.pool.register_after
        machine.lease = objects.build_lease(
            node=machine.node,
            node_uid=machine.node_uid,
            uid=objects.stable_uuid("lease", machine.node_uid),
            created=registered,
            renewed=registered,
        )
        bucket = int(registered % LEASE_RENEW)
        self._join_lease_bucket(machine, bucket)
        self._write_lease(machine, min(self.loops.now, self._last_renewal(bucket, self.loops.now)))

    def _last_renewal(self, bucket: int, at: float) -> float:
        """The last renewal at or before `at` of a kubelet renewing at second `bucket` of
        every 10 s."""
        return math.floor((at - bucket) / LEASE_RENEW) * LEASE_RENEW + bucket

    def _write_lease(self, machine: Machine, renewed: float) -> None:
        if machine.lease is None:
            return
        machine.lease["spec"]["renewTime"] = micro_ts(
            max(renewed, machine.launched_at + machine.pool.register_after)
        )
        self.loops.tx.put("leases", machine.lease)

    def _renew_lease_now(self, machine: Machine) -> None:
        """A kubelet that (re)starts renews at once, then every 10 s from then on."""
        if machine.lease is None or machine.removed:
            return
        self._write_lease(machine, self.loops.t)
        self._join_lease_bucket(machine, int(self.loops.t % LEASE_RENEW))

    def _join_lease_bucket(self, machine: Machine, bucket: int) -> None:
        # Renewals of all kubelets due in the same second run as one action (cheap at scale).
        machine.lease_bucket = bucket
        self._lease_members.setdefault(bucket, {})[machine] = None
        if bucket not in self._lease_ticking:
            self._lease_ticking.add(bucket)
            due = self._last_renewal(bucket, max(self.loops.t, self.loops.now)) + LEASE_RENEW
            self.loops.schedule(due, self._lease_tick, bucket)

    def _lease_tick(self, bucket: int) -> None:
        members = self._lease_members.get(bucket, {})
        live = {
            machine: None
            for machine in members
            if machine.lease_bucket == bucket and not machine.removed and machine.kubelet_posting
        }
        self._lease_members[bucket] = live
        if not live:
            self._lease_ticking.discard(bucket)
            return
        renewed = micro_ts(self.loops.t)
        for machine in live:
            assert machine.lease is not None
            machine.lease["spec"]["renewTime"] = renewed
            self.loops.tx.put("leases", machine.lease)
        self.loops.schedule(self.loops.t + LEASE_RENEW, self._lease_tick, bucket)

    def _schedule_status_report(self, machine: Machine) -> None:
        """nodeStatusReportFrequency: the kubelet writes its Node at least every 5 minutes
        even when nothing changed (lastHeartbeatTime moves)."""
        registered = machine.launched_at + machine.pool.register_after
        # The next report after now (a backdated node skips the ones already past).
        periods = math.floor(
            (max(self.loops.t, self.loops.now) - registered) / KUBELET_STATUS_REPORT + 1e-9
        )
        machine.report_token += 1
        self.loops.schedule(
            registered + (periods + 1) * KUBELET_STATUS_REPORT,
            self._status_report,
            machine,
            machine.report_token,
        )

    def _status_report(self, machine: Machine, token: int) -> None:
        if token != machine.report_token or machine.removed or not machine.kubelet_posting:
            return
        node = self.loops.node(machine)
        if node is not None:
            beat = ts(self.loops.t)
            for cond in node["status"].get("conditions", []):
                if cond["type"] in KUBELET_CONDITIONS and cond["status"] != "Unknown":
                    cond["lastHeartbeatTime"] = beat
            self.loops.tx.put("nodes", node)
            self.loops.repair.node_written(machine)
        self._schedule_status_report(machine)

    def cloud_node_lifecycle(self, machine: Machine) -> None:
        """The cloud node lifecycle controller deletes a NotReady Node whose instance is gone
        (k8s.io/cloud-provider controllers/nodelifecycle, every --node-monitor-period)."""
        if machine.removed:
            return
        if self.loops.ready_status(machine) == "True":
            self.loops.schedule(
                self.loops.t + NODE_MONITOR_PERIOD, self.cloud_node_lifecycle, machine
            )
            return
        self.loops.emit(
            {"kind": "Node", "name": machine.node, "uid": machine.node_uid},
            "DeletingNode",
            f"Deleting node {machine.node} because it does not exist in the cloud provider",
            component="cloud-node-lifecycle-controller",
        )
        if machine.nodeclaim is None:
            self.loops.termination.remove_node(machine)
        elif not machine.deleting:
            self.loops.termination.terminate(
                machine, cause="instance-gone"
            )  # the Node's finalizer is Karpenter's
        elif not machine.drained:
            self.loops.termination.queue_node_termination(machine, self.loops.t + 1)

    # ------------------------------------------------------------------ cordon

    def cordon(self, machine: Machine, unschedulable: bool) -> None:
        node = self.loops.node(machine)
        if node is None or bool(node["spec"].get("unschedulable")) == unschedulable:
            return
        if unschedulable:
            node["spec"]["unschedulable"] = True
        else:
            node["spec"].pop("unschedulable", None)
        self.loops.tx.put("nodes", node)
        self.unschedulable_changed(machine)

    def unschedulable_changed(self, machine: Machine) -> None:
        """A cordon or uncordon: the node lifecycle controller's TaintNodesByCondition follows
        spec.unschedulable with the node.kubernetes.io/unschedulable:NoSchedule taint
        (pkg/controller/nodelifecycle doNoScheduleTaintingPass); the kubelet reports
        NodeNotSchedulable / NodeSchedulable at its next status sync."""
        self.loops.schedule(self.loops.t + NODE_LIFECYCLE_LAG, self._unschedulable_taint, machine)
        self.loops.schedule(self.loops.t + KUBELET_STATUS_SYNC, self.kubelet_sees_cordon, machine)

    def _unschedulable_taint(self, machine: Machine) -> None:
        node = self.loops.node(machine)
        if node is None:
            return
        if node["spec"].get("unschedulable"):
            self.loops.set_taint(
                machine, "node.kubernetes.io/unschedulable", "NoSchedule", stamped=True
            )
        else:
            self.loops.remove_taint(machine, "node.kubernetes.io/unschedulable")
            self.loops.workloads.schedule_soon()

    def kubelet_sees_cordon(self, machine: Machine) -> None:
        """kubelet records NodeNotSchedulable / NodeSchedulable when spec.unschedulable
        differs from what it last saw (K8S pkg/kubelet/kubelet_node_status.go)."""
        node = self.loops.node(machine)
        if node is None or not machine.kubelet_posting:
            return
        unschedulable = bool(node["spec"].get("unschedulable"))
        if unschedulable == machine.kubelet_sees_unschedulable:
            return
        machine.kubelet_sees_unschedulable = unschedulable
        reason = "NodeNotSchedulable" if unschedulable else "NodeSchedulable"
        self.loops.kubelet_event(machine, reason, f"Node {machine.node} status is now: {reason}")
