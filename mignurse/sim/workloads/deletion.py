"""Graceful pod deletion as the kubelet confirms it (a kubelet that is down never does),
pod GC of a deleted Node's pods, and what the node lifecycle and taint eviction controllers
do to the pods of a node that stops reporting or is tainted NoExecute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.model import scheduling
from mignurse.sim import objects
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.workloads.base import WorkloadsBase
from mignurse.sim.workloads.records import POD_TERMINATION_GRACE, PodRecord, pod_ref

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine

POD_STOPPED = 10.0  # a workload exits on SIGTERM well within its grace period (inference)
POD_GC_QUARANTINE = 40.0  # pod GC deletes pods of a deleted Node after this (pkg/controller/podgc)


class PodDeletion(WorkloadsBase):
    def grace_of(self, pod: PodRecord) -> int:
        obj = self.loops.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return POD_TERMINATION_GRACE
        return int(obj["spec"].get("terminationGracePeriodSeconds", POD_TERMINATION_GRACE))

    def delete(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """DELETE of a pod through the API: the object as the server returns it, or None when
        there is no such pod. Grace defaults to the pod's terminationGracePeriodSeconds; 0,
        or a pod not bound to a node, removes it at once (k8s pkg/registry/core/pod
        strategy.go CheckGracefulDelete, registry/rest/delete.go BeforeDelete)."""
        pod = self.pods.get((namespace, name))
        obj = self.loops.tx.get("pods", namespace, name)
        if pod is None or obj is None:
            return None
        self.start_deletion(pod, self.grace_of(pod) if grace is None else grace)
        return self.loops.tx.get("pods", namespace, name) or _deleted_view(obj, self.loops.t)

    def start_deletion(
        self, pod: PodRecord, grace: int, *, condition: tuple[str, str] | None = None
    ) -> None:
        """Set deletionTimestamp (now + grace); a live kubelet removes the pod once its
        containers stop, a kubelet that is down never does (pod GC does, with the Node)."""
        if grace < 0:
            grace = 1  # a negative grace period is read as 1 s (registry/rest BeforeDelete)
        if pod.machine is None:
            grace = 0  # never scheduled: nothing to stop
        now = self.loops.t
        if pod.deleting and grace >= pod.grace:
            return  # only a shorter grace period is taken (registry/rest BeforeDelete)
        obj = self.loops.tx.get("pods", pod.namespace, pod.name)
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
            self.loops.tx.put("pods", obj)
            self._kubelet_stops(pod)
        if first and pod.owner is not None and pod in pod.owner.pods:
            pod.owner.pods.remove(pod)
            self.reconcile(pod.owner)
            self.write_status(pod.owner.workload)
        if first and pod.machine is not None:
            self.loops.termination.pod_event_on(pod.machine)
        if pod.namespace in self._pdb_namespaces:
            self.update_pdbs(pod.namespace)

    def kubelet_alive(self, machine: Machine) -> bool:
        return (
            machine.kubelet_posting
            and machine.instance_state == "running"
            and machine.ready
            and not machine.removed
        )

    def _kubelet_stops(self, pod: PodRecord) -> None:
        machine = pod.machine
        if machine is None or not self.kubelet_alive(machine):
            pod.gone_at = None
            return
        gone = min(pod.deadline, self.loops.t + POD_STOPPED)
        pod.gone_at = gone
        self.loops.schedule(gone, self._kubelet_removes, pod, gone)

    def _kubelet_removes(self, pod: PodRecord, at: float) -> None:
        if pod.gone_at != at or self.pods.get(pod.key) is not pod:
            return
        machine = pod.machine
        if machine is None or not self.kubelet_alive(machine):
            pod.gone_at = None
            return
        self._remove(pod)

    def kubelet_back(self, machine: Machine) -> None:
        """A kubelet that runs (and reports Ready) again finishes the deletions it missed."""
        for pod in list(machine.pods):
            if pod.deleting and pod.gone_at is None:
                self._kubelet_stops(pod)

    def _remove(self, pod: PodRecord) -> None:
        """The pod leaves the API (a DELETED watch event)."""
        if self.pods.get(pod.key) is not pod:
            return
        del self.pods[pod.key]
        self._pending.pop(pod, None)
        self.loops.tx.delete("pods", pod.namespace, pod.name)
        self.loops.dra.pod_gone(pod)
        pod.deleting = True
        machine = pod.machine
        if machine is not None and pod in machine.pods:
            machine.pods.remove(pod)
        if pod.owner is not None:
            if pod in pod.owner.pods:
                pod.owner.pods.remove(pod)
                self.reconcile(pod.owner)
            self.write_status(pod.owner.workload)
        self._disrupted.pop(pod.key, None)
        if pod.namespace in self._pdb_namespaces:
            self.update_pdbs(pod.namespace)
        self.loops.termination.pod_gone(pod, machine)
        self.schedule_soon()

    def node_removed(self, machine: Machine) -> None:
        """Pods bound to a deleted Node: pod GC force-deletes them after its quarantine."""
        if machine.pods:
            self.loops.schedule(self.loops.t + POD_GC_QUARANTINE, self._pod_gc, machine)

    def _pod_gc(self, machine: Machine) -> None:
        for pod in list(machine.pods):
            pod.gone_at = None
            self.start_deletion(pod, 0)

    # ------------------------------------------------------------------ node lifecycle

    def node_unknown(self, machine: Machine) -> None:
        """MarkPodsNotReady: Ready=False on the node's pods and a NodeNotReady Warning on each
        (k8s pkg/controller/util/node controller_utils.go)."""
        for pod in list(machine.pods):
            if not pod.ready:
                continue
            self.set_ready(pod, False)
            obj = self.loops.tx.get("pods", pod.namespace, pod.name)
            if obj is not None:
                self.loops.emit(
                    pod_ref(obj),
                    "NodeNotReady",
                    "Node is not ready",
                    event_type="Warning",
                    component="node-controller",
                )

    def set_ready(self, pod: PodRecord, ready: bool) -> None:
        if pod.ready == ready:
            return
        pod.ready = ready
        obj = self.loops.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        for cond in obj["status"].get("conditions", []):
            if cond["type"] in ("Ready", "ContainersReady") and cond["status"] != (
                "True" if ready else "False"
            ):
                cond["status"] = "True" if ready else "False"
                cond["lastTransitionTime"] = ts(self.loops.t)
        self.loops.tx.put("pods", obj)
        if pod.owner is not None:
            self.write_status(pod.owner.workload)

    def node_ready(self, machine: Machine) -> None:
        for pod in list(machine.pods):
            if pod.deleting or pod.daemonset is not None:
                continue
            obj = self.loops.tx.get("pods", pod.namespace, pod.name)
            if obj is not None and obj["status"].get("phase") == "Pending":
                self._containers_started(pod)
            else:
                self.set_ready(pod, True)
        self.kubelet_back(machine)
        self.schedule_soon()

    def noexecute_tainted(self, machine: Machine, key: str) -> None:
        """The taint eviction controller: pods that tolerate the taint for a while are deleted
        when that runs out (pkg/controller/tainteviction), Pod event TaintManagerEviction."""
        self.loops.schedule(self.loops.t, self._taint_eviction, machine, key, self.loops.t)

    def _taint_eviction(self, machine: Machine, key: str, since: float) -> None:
        node = self.loops.node(machine)
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
        for pod in list(machine.pods):
            if pod.deleting or pod.daemonset is not None or pod.owner is None:
                continue
            tolerations = list(pod.owner.template["spec"].get("tolerations") or []) + list(
                objects.DEFAULT_TOLERATIONS
            )
            seconds = scheduling.toleration_seconds(tolerations, taint)
            if seconds is None:
                continue
            due = since + seconds
            if due > self.loops.t + 1e-6:
                later.append(due)
                continue
            obj = self.loops.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            self.loops.emit(
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
            self.loops.schedule(min(later), self._taint_eviction, machine, key, since)


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
