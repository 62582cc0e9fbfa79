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
    from mignurse.sim.controllers.world import World


class Termination:
    def __init__(self, world: World) -> None:
        self.w = world

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
            self.w.instances.queue_reconcile(pool.name, self.w.t + pool.replacement_delay)
            self.w.instances.terminate_instance(m)
            return
        # The provisioner counts a deleting node's pods as pending (KC provisioner.go
        # deletingNodePods): their replacement capacity launches before the drain.
        if any(p.reschedulable for p in m.pods):
            self.w.provisioner.trigger()
        tr = self.w.traits
        assert tr is not None
        claim = self.w.karpenter.claim(m)
        if claim is not None:
            claim["metadata"]["deletionTimestamp"] = ts(self.w.t)
            claim["metadata"]["deletionGracePeriodSeconds"] = 0
            annotations = claim["metadata"].setdefault("annotations", {})
            self.w.tx.put("nodeclaims", claim)
            if (
                pool.termination_grace_period
                and karpenter_objects.TERMINATION_TIMESTAMP not in annotations
            ):
                expires = ts(self.w.t + pool.termination_grace_period)
                annotations[karpenter_objects.TERMINATION_TIMESTAMP] = expires
                self.w.publish(
                    self.w.claim_ref(m),
                    "TerminationGracePeriodExpiring",
                    f"All pods will be deleted by {expires}",
                    "Warning",
                    dedupe=(m.nodeclaim,),
                )
        node = self.w.node(m)
        if node is None:
            self.w.schedule(self.w.t + 1, self._claim_finalize, m)
            return
        node["metadata"]["deletionTimestamp"] = ts(self.w.t)
        node["metadata"]["deletionGracePeriodSeconds"] = 0
        self.w.tx.put("nodes", node)
        if m.initialized and tr.disruption_blocked_on_deleting:
            self.w.schedule(self.w.t + DISRUPTION_PASS, self._disruption_blocked_deleting, m)
        # The lifecycle finalizer deletes the Node and node.termination picks it up at once.
        self.queue_node_termination(m, self.w.t)

    def _disruption_blocked_deleting(self, m: Machine) -> None:
        """The disruption controller's candidate pass skips a deleting node with an event on
        Node and NodeClaim (KC disruption/types.go NewCandidate, events.go Blocked)."""
        if m.removed or m.claim_gone:
            return
        message = "Node is deleting or marked for deletion"
        self.w.publish(self.w.node_ref(m), "DisruptionBlocked", message, dedupe=(m.node_uid,))
        self.w.publish(self.w.claim_ref(m), "DisruptionBlocked", message, dedupe=(m.claim_uid,))

    def queue_node_termination(self, m: Machine, at: float) -> None:
        m.drain_token += 1
        self.w.schedule(at, self._node_termination, m, m.drain_token)

    def _node_termination(self, m: Machine, token: int) -> None:
        """One pass of the node.termination finalizer (KC node/termination/controller.go)."""
        if token != m.drain_token or m.removed:
            return
        tr = self.w.traits
        assert tr is not None
        instance_gone = self.w.ready_status(m) != "True" and m.instance_state == "terminated"
        if tr.drain_conditions and instance_gone:
            self._finalize_node(m)  # from v1.6.0 this check comes before the drain
            return
        claim = self.w.karpenter.claim(m)
        annotation = (
            (claim["metadata"].get("annotations") or {}).get(
                karpenter_objects.TERMINATION_TIMESTAMP
            )
            if claim is not None
            else None
        )
        ref = self.w.node_ref(m)
        if annotation is not None:
            self.w.publish(
                ref,
                "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {annotation}",
                "Warning",
                dedupe=(m.node,),
            )
        self.w.set_taint(m, "karpenter.sh/disrupted", "NoSchedule")
        self.w.set_labels(
            m, {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}
        )
        waiting = self._drain(m, annotation)
        if waiting:
            self.w.publish(
                ref,
                "FailedDraining",
                f"Failed to drain node, {waiting} pods are waiting to be evicted",
                "Warning",
                dedupe=(m.node,),
            )
            if tr.drain_conditions:
                self.w.karpenter.set_claim_condition(
                    m, "Drained", "Unknown", "Draining", "Draining"
                )
            elif instance_gone:
                self._finalize_node(m)  # through v1.5.x: checked after a failed drain
                return
            self.queue_node_termination(m, self._next_drain_check(m))
            return
        m.drain_token += 1
        m.drained = True
        if tr.drain_conditions:
            self.w.karpenter.set_claim_condition(m, "Drained", "True", "Drained")
            # No VolumeAttachments in the simulator: nothing to wait for.
            self.w.karpenter.set_claim_condition(m, "VolumesDetached", "True", "VolumesDetached")
        self._await_instance(m)

    def _drain(self, m: Machine, annotation: str | None) -> int:
        """Delete pods past the termination time, evict the others; returns the pods still
        waiting (KC terminator.go Drain: DaemonSet pods tolerate the disrupted taint)."""
        waiting = sum(
            1
            for p in m.pods
            if p.daemonset is None
            and (not p.deleting or self.w.t - p.deadline <= STUCK_TERMINATING)
        )
        deadline = None if annotation is None else parse_ts(annotation)
        for pod in [p for p in m.pods if p.reschedulable]:
            obj = self.w.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            if deadline is not None and self.w.t >= deadline - POD_TERMINATION_GRACE:
                # time.Until(terminationTime).Seconds(), truncated to an int64
                grace = int(deadline - self.w.t)
                self.w.publish(
                    self._pod_ref(obj),
                    "Disrupted",
                    self._disrupted_message(obj, deadline, grace),
                    dedupe=(pod.name,),
                )
                self.w.workloads.start_deletion(pod, grace)
                continue
            pdb = self.w.workloads.blocking_pdb(pod)
            if pdb is not None:
                # The eviction queue reports a PDB refusal on a Node named after the pod.
                self.w.publish(
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
            self.w.publish(
                {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "apiVersion": "v1"},
                "Evicted",
                self._evicted_message(m),
                dedupe=(pod.name,),
            )
            self.w.workloads.evict(pod.namespace, pod.name, None)
        return waiting

    def _disrupted_message(self, pod: JsonDict, deadline: float, grace: int) -> str:
        tr = self.w.traits
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
        tr = self.w.traits
        assert tr is not None
        if not tr.evicted_names_reason:
            return "Evicted pod"
        claim = self.w.karpenter.claim(m)
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
            return self.w.t + 1  # the pods it waited for are gone already
        times = [self.w.t + EVICTION_RETRY]
        for pod in m.pods:
            if not pod.deleting:
                continue
            if pod.gone_at is not None:
                times.append(pod.gone_at)
            elif self.w.t - pod.deadline <= STUCK_TERMINATING:
                times.append(pod.deadline + STUCK_TERMINATING + 1)
        return max(self.w.t + 1, min(times))

    def pod_gone(self, pod: PodRecord, m: Machine | None) -> None:
        """A pod left the API: a drain waiting on it looks again; its DaemonSet makes a new
        one if the node still wants it."""
        if m is None:
            return
        if pod.daemonset == dra.DAEMONSET:
            self.w.dra.plugin_pod_gone(m)
        if (
            pod.daemonset is not None
            and not m.removed
            and (pod.namespace, pod.name) in m.daemon_pods
        ):
            m.daemon_pods.remove((pod.namespace, pod.name))
            self.w.schedule(self.w.t + 2, self.w.pods.recreate_daemon_pod, m, pod.daemonset)
        if m.deleting and not m.removed and not m.drained and m.nodeclaim is not None:
            self.queue_node_termination(m, self.w.t)

    def pod_event_on(self, m: Machine) -> None:
        """KC nodeclaim/podevents: a pod bound to or leaving a Karpenter node stamps
        status.lastPodEventTime (at most every 10 s), which restarts consolidateAfter."""
        if m.nodeclaim is None or m.claim_gone:
            return
        if m.last_pod_event is not None and self.w.t - m.last_pod_event < POD_EVENT_DEDUPE:
            return
        m.last_pod_event = self.w.t
        claim = self.w.karpenter.claim(m)
        if claim is not None:
            claim["status"]["lastPodEventTime"] = ts(self.w.t)
            self.w.tx.put("nodeclaims", claim)
        self.w.karpenter.consolidatable_check(m)

    def _await_instance(self, m: Machine) -> None:
        """EnsureTerminated: TerminateInstances, InstanceTerminating, then poll every 5 s
        until the instance is gone; then the Node's finalizer goes."""
        if m.removed:
            return
        self.w.instances.terminate_instance(m)
        self.w.karpenter.set_claim_condition(
            m, "InstanceTerminating", "True", "InstanceTerminating"
        )
        if m.instance_state != "terminated":
            self.w.schedule(self.w.t + TERMINATION_POLL, self._await_instance, m)
            return
        self._finalize_node(m)

    def _finalize_node(self, m: Machine) -> None:
        self.remove_node(m)
        if m.nodeclaim is not None:
            self.w.schedule(self.w.t + 1, self._claim_finalize, m)

    def _claim_finalize(self, m: Machine) -> None:
        """The NodeClaim's finalizer once its Node is gone: EnsureTerminated, then removal
        (KC nodeclaim/lifecycle/controller.go finalize)."""
        if m.claim_gone:
            return
        if m.instance_state == "running" and self.w.karpenter.claim(m) is not None:
            launched = bool(self.w.karpenter.claim(m)["status"].get("providerID"))  # type: ignore[index]
            if not launched:
                m.instance_state = "terminated"  # nothing was launched
        if m.instance_state != "terminated":
            self.w.instances.terminate_instance(m)
            self.w.karpenter.set_claim_condition(
                m, "InstanceTerminating", "True", "InstanceTerminating"
            )
            self.w.schedule(self.w.t + TERMINATION_POLL, self._claim_finalize, m)
            return
        self._remove_claim(m)

    def remove_node(self, m: Machine) -> None:
        if m.removed:
            return
        m.removed = True
        if m.registered:
            self.w.tx.delete("nodes", "", m.node)
            # The garbage collector follows the Lease's owner reference to the Node.
            self.w.tx.delete("leases", "kube-node-lease", m.node)
            m.lease_bucket = -1
            m.report_token += 1
            self.w.pool_nodes[m.pool.name] -= 1
            self.w.repair.count_health(m)
            self.w.schedule(self.w.t + NODE_MONITOR_PERIOD, self._removing_node_event, m)
            self.w.workloads.node_removed(m)
            if m.pool.dra:
                self.w.dra.node_removed(m)  # the garbage collector follows the slice's owner
        self.w.machines.pop(m.node, None)
        if m.nodeclaim is None and m in self.w.pool_machines[m.pool.name]:
            self.w.pool_machines[m.pool.name].remove(m)
        self.w.karpenter.update_nodepool_status(m.pool)

    def _removing_node_event(self, m: Machine) -> None:
        """The node lifecycle controller notices the deletion on its next pass
        (K8S pkg/controller/nodelifecycle RecordNodeEvent "RemovingNode")."""
        self.w.emit(
            self.w.node_ref(m),
            "RemovingNode",
            f"Node {m.node} event: Removing Node {m.node} from Controller",
            component="node-controller",
        )

    def _remove_claim(self, m: Machine) -> None:
        if m.nodeclaim is not None and not m.claim_gone:
            self.w.tx.delete("nodeclaims", "", m.nodeclaim)
            self.w.claims.pop(m.nodeclaim, None)
        m.claim_gone = True
        if m in self.w.pool_machines[m.pool.name]:
            self.w.pool_machines[m.pool.name].remove(m)
        if not m.removed:
            self.remove_node(m)
