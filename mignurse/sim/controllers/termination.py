"""Node termination: Karpenter's finalizers, the drain, and the Node and NodeClaim removal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from mignurse.sim import dra, karpenter_objects, objects
from mignurse.sim.controllers.base import (
    DISRUPTION_PASS,
    EVICTION_RETRY,
    NODE_MONITOR_PERIOD,
    POD_EVENT_DEDUPE,
    STUCK_TERMINATING,
    TERMINATION_POLL,
    Machine,
    parse_ts,
)
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.workloads import POD_TERMINATION_GRACE, PodRecord

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class Termination:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    # ------------------------------------------------------------------ termination

    def terminate(self, machine: Machine, *, cause: str) -> None:
        """Karpenter: the NodeClaim is deleted and its finalizers run (KC nodeclaim/lifecycle,
        node/termination). Node groups: the Auto Scaling group terminates the instance."""
        if machine.deleting or machine.removed:
            return
        machine.deleting = True
        machine.repair_token += 1
        pool = machine.pool
        if machine.nodeclaim is None:
            self.loops.instances.queue_reconcile(pool.name, self.loops.t + pool.replacement_delay)
            self.loops.instances.terminate_instance(machine)
            return
        # The provisioner counts a deleting node's pods as pending (KC provisioner.go
        # deletingNodePods): their replacement capacity launches before the drain.
        if any(p.reschedulable for p in machine.pods):
            self.loops.provisioner.trigger()
        tr = self.loops.traits
        assert tr is not None
        claim = self.loops.karpenter.claim(machine)
        if claim is not None:
            claim["metadata"]["deletionTimestamp"] = ts(self.loops.t)
            claim["metadata"]["deletionGracePeriodSeconds"] = 0
            annotations = claim["metadata"].setdefault("annotations", {})
            self.loops.tx.put("nodeclaims", claim)
            if (
                pool.termination_grace_period
                and karpenter_objects.TERMINATION_TIMESTAMP not in annotations
            ):
                expires = ts(self.loops.t + pool.termination_grace_period)
                annotations[karpenter_objects.TERMINATION_TIMESTAMP] = expires
                self.loops.publish(
                    self.loops.claim_ref(machine),
                    "TerminationGracePeriodExpiring",
                    f"All pods will be deleted by {expires}",
                    "Warning",
                    dedupe=(machine.nodeclaim,),
                )
        node = self.loops.node(machine)
        if node is None:
            self.loops.schedule(self.loops.t + 1, self._claim_finalize, machine)
            return
        node["metadata"]["deletionTimestamp"] = ts(self.loops.t)
        node["metadata"]["deletionGracePeriodSeconds"] = 0
        self.loops.tx.put("nodes", node)
        if machine.initialized and tr.disruption_blocked_on_deleting:
            self.loops.schedule(
                self.loops.t + DISRUPTION_PASS, self._disruption_blocked_deleting, machine
            )
        # The lifecycle finalizer deletes the Node and node.termination picks it up at once.
        self.queue_node_termination(machine, self.loops.t)

    def _disruption_blocked_deleting(self, machine: Machine) -> None:
        """The disruption controller's candidate pass skips a deleting node with an event on
        Node and NodeClaim (KC disruption/types.go NewCandidate, events.go Blocked)."""
        if machine.removed or machine.claim_gone:
            return
        message = "Node is deleting or marked for deletion"
        self.loops.publish(
            self.loops.node_ref(machine), "DisruptionBlocked", message, dedupe=(machine.node_uid,)
        )
        self.loops.publish(
            self.loops.claim_ref(machine), "DisruptionBlocked", message, dedupe=(machine.claim_uid,)
        )

    def queue_node_termination(self, machine: Machine, at: float) -> None:
        machine.drain_token += 1
        self.loops.schedule(at, self._node_termination, machine, machine.drain_token)

    def _node_termination(self, machine: Machine, token: int) -> None:
        """One pass of the node.termination finalizer (KC node/termination/controller.go)."""
        if token != machine.drain_token or machine.removed:
            return
        tr = self.loops.traits
        assert tr is not None
        instance_gone = (
            self.loops.ready_status(machine) != "True" and machine.instance_state == "terminated"
        )
        if tr.drain_conditions and instance_gone:
            self._finalize_node(machine)  # from v1.6.0 this check comes before the drain
            return
        claim = self.loops.karpenter.claim(machine)
        annotation = (
            (claim["metadata"].get("annotations") or {}).get(
                karpenter_objects.TERMINATION_TIMESTAMP
            )
            if claim is not None
            else None
        )
        ref = self.loops.node_ref(machine)
        if annotation is not None:
            self.loops.publish(
                ref,
                "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {annotation}",
                "Warning",
                dedupe=(machine.node,),
            )
        self.loops.set_taint(machine, "karpenter.sh/disrupted", "NoSchedule")
        self.loops.set_labels(
            machine, {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}
        )
        waiting = self._drain(machine, annotation)
        if waiting:
            self.loops.publish(
                ref,
                "FailedDraining",
                f"Failed to drain node, {waiting} pods are waiting to be evicted",
                "Warning",
                dedupe=(machine.node,),
            )
            if tr.drain_conditions:
                self.loops.karpenter.set_claim_condition(
                    machine, "Drained", "Unknown", "Draining", "Draining"
                )
            elif instance_gone:
                self._finalize_node(machine)  # through v1.5.x: checked after a failed drain
                return
            self.queue_node_termination(machine, self._next_drain_check(machine))
            return
        machine.drain_token += 1
        machine.drained = True
        if tr.drain_conditions:
            self.loops.karpenter.set_claim_condition(machine, "Drained", "True", "Drained")
            # No VolumeAttachments in the simulator: nothing to wait for.
            self.loops.karpenter.set_claim_condition(
                machine, "VolumesDetached", "True", "VolumesDetached"
            )
        self._await_instance(machine)

    def _drain(self, machine: Machine, annotation: str | None) -> int:
        """Delete pods past the termination time, evict the others; returns the pods still
        waiting (KC terminator.go Drain: DaemonSet pods tolerate the disrupted taint)."""
        waiting = sum(
            1
            for p in machine.pods
            if p.daemonset is None
            and (not p.deleting or self.loops.t - p.deadline <= STUCK_TERMINATING)
        )
        deadline = None if annotation is None else parse_ts(annotation)
        for pod in [p for p in machine.pods if p.reschedulable]:
            obj = self.loops.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            if deadline is not None and self.loops.t >= deadline - POD_TERMINATION_GRACE:
                # time.Until(terminationTime).Seconds(), truncated to an int64
                grace = int(deadline - self.loops.t)
                self.loops.publish(
                    self._pod_ref(obj),
                    "Disrupted",
                    self._disrupted_message(obj, deadline, grace),
                    dedupe=(pod.name,),
                )
                self.loops.workloads.start_deletion(pod, grace)
                continue
            pdb = self.loops.workloads.blocking_pdb(pod)
            if pdb is not None:
                # The eviction queue reports a PDB refusal on a Node named after the pod.
                self.loops.publish(
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
            self.loops.publish(
                {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "apiVersion": "v1"},
                "Evicted",
                self._evicted_message(machine),
                dedupe=(pod.name,),
            )
            self.loops.workloads.evict(pod.namespace, pod.name, None)
        return waiting

    def _disrupted_message(self, pod: JsonDict, deadline: float, grace: int) -> str:
        tr = self.loops.traits
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

    def _evicted_message(self, machine: Machine) -> str:
        tr = self.loops.traits
        assert tr is not None
        if not tr.evicted_names_reason:
            return "Evicted pod"
        claim = self.loops.karpenter.claim(machine)
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

    def _next_drain_check(self, machine: Machine) -> float:
        """node.termination requeues 1 s after a failed drain (KC termination/controller.go);
        simulated as its next pass that can see a change: a pod gone, one stuck too long,
        or the eviction queue's retry."""
        if not any(p.daemonset is None for p in machine.pods):
            return self.loops.t + 1  # the pods it waited for are gone already
        times = [self.loops.t + EVICTION_RETRY]
        for pod in machine.pods:
            if not pod.deleting:
                continue
            if pod.gone_at is not None:
                times.append(pod.gone_at)
            elif self.loops.t - pod.deadline <= STUCK_TERMINATING:
                times.append(pod.deadline + STUCK_TERMINATING + 1)
        return max(self.loops.t + 1, min(times))

    def pod_gone(self, pod: PodRecord, machine: Machine | None) -> None:
        """A pod left the API: a drain waiting on it looks again; its DaemonSet makes a new
        one if the node still wants it."""
        if machine is None:
            return
        if pod.daemonset == dra.DAEMONSET:
            self.loops.dra.plugin_pod_gone(machine)
        if (
            pod.daemonset is not None
            and not machine.removed
            and (pod.namespace, pod.name) in machine.daemon_pods
        ):
            machine.daemon_pods.remove((pod.namespace, pod.name))
            self.loops.schedule(
                self.loops.t + 2, self.loops.pods.recreate_daemon_pod, machine, pod.daemonset
            )
        if (
            machine.deleting
            and not machine.removed
            and not machine.drained
            and machine.nodeclaim is not None
        ):
            self.queue_node_termination(machine, self.loops.t)

    def pod_event_on(self, machine: Machine) -> None:
        """KC nodeclaim/podevents: a pod bound to or leaving a Karpenter node stamps
        status.lastPodEventTime (at most every 10 s), which restarts consolidateAfter."""
        if machine.nodeclaim is None or machine.claim_gone:
            return
        if (
            machine.last_pod_event is not None
            and self.loops.t - machine.last_pod_event < POD_EVENT_DEDUPE
        ):
            return
        machine.last_pod_event = self.loops.t
        claim = self.loops.karpenter.claim(machine)
        if claim is not None:
            claim["status"]["lastPodEventTime"] = ts(self.loops.t)
            self.loops.tx.put("nodeclaims", claim)
        self.loops.karpenter.consolidatable_check(machine)

    def _await_instance(self, machine: Machine) -> None:
        """EnsureTerminated: TerminateInstances, InstanceTerminating, then poll every 5 s
        until the instance is gone; then the Node's finalizer goes."""
        if machine.removed:
            return
        self.loops.instances.terminate_instance(machine)
        self.loops.karpenter.set_claim_condition(
            machine, "InstanceTerminating", "True", "InstanceTerminating"
        )
        if machine.instance_state != "terminated":
            self.loops.schedule(self.loops.t + TERMINATION_POLL, self._await_instance, machine)
            return
        self._finalize_node(machine)

    def _finalize_node(self, machine: Machine) -> None:
        self.remove_node(machine)
        if machine.nodeclaim is not None:
            self.loops.schedule(self.loops.t + 1, self._claim_finalize, machine)

    def _claim_finalize(self, machine: Machine) -> None:
        """The NodeClaim's finalizer once its Node is gone: EnsureTerminated, then removal
        (KC nodeclaim/lifecycle/controller.go finalize)."""
        if machine.claim_gone:
            return
        if machine.instance_state == "running" and self.loops.karpenter.claim(machine) is not None:
            launched = bool(self.loops.karpenter.claim(machine)["status"].get("providerID"))  # type: ignore[index]
            if not launched:
                machine.instance_state = "terminated"  # nothing was launched
        if machine.instance_state != "terminated":
            self.loops.instances.terminate_instance(machine)
            self.loops.karpenter.set_claim_condition(
                machine, "InstanceTerminating", "True", "InstanceTerminating"
            )
            self.loops.schedule(self.loops.t + TERMINATION_POLL, self._claim_finalize, machine)
            return
        self._remove_claim(machine)

    def remove_node(self, machine: Machine) -> None:
        if machine.removed:
            return
        machine.removed = True
        if machine.registered:
            self.loops.tx.delete("nodes", "", machine.node)
            # The garbage collector follows the Lease's owner reference to the Node.
            self.loops.tx.delete("leases", "kube-node-lease", machine.node)
            machine.lease_bucket = -1
            machine.report_token += 1
            self.loops.pool_nodes[machine.pool.name] -= 1
            self.loops.repair.count_health(machine)
            self.loops.schedule(
                self.loops.t + NODE_MONITOR_PERIOD, self._removing_node_event, machine
            )
            self.loops.workloads.node_removed(machine)
            if machine.pool.dra:
                self.loops.dra.node_removed(
                    machine
                )  # the garbage collector follows the slice's owner
        self.loops.machines.pop(machine.node, None)
        if machine.nodeclaim is None and machine in self.loops.pool_machines[machine.pool.name]:
            self.loops.pool_machines[machine.pool.name].remove(machine)
        self.loops.karpenter.update_nodepool_status(machine.pool)

    def _removing_node_event(self, machine: Machine) -> None:
        """The node lifecycle controller notices the deletion on its next pass
        (K8S pkg/controller/nodelifecycle RecordNodeEvent "RemovingNode")."""
        self.loops.emit(
            self.loops.node_ref(machine),
            "RemovingNode",
            f"Node {machine.node} event: Removing Node {machine.node} from Controller",
            component="node-controller",
        )

    def _remove_claim(self, machine: Machine) -> None:
        if machine.nodeclaim is not None and not machine.claim_gone:
            self.loops.tx.delete("nodeclaims", "", machine.nodeclaim)
            self.loops.claims.pop(machine.nodeclaim, None)
        machine.claim_gone = True
        if machine in self.loops.pool_machines[machine.pool.name]:
            self.loops.pool_machines[machine.pool.name].remove(machine)
        if not machine.removed:
            self.remove_node(machine)
