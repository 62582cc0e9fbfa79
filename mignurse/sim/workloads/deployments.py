"""The deployment and ReplicaSet controllers: a Deployment's ReplicaSets and status, its
rollouts (RollingUpdate, one pod at a time), scaling, the pods a ReplicaSet creates and
deletes, and the pod objects of each (k8s pkg/controller/deployment, pkg/controller/replicaset).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mignurse.model import scheduling
from mignurse.sim import dra, objects
from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import PoolSpec
from mignurse.sim.workloads.base import WorkloadsBase
from mignurse.sim.workloads.records import (
    DAEMON_REQUESTS,
    PodRecord,
    ReplicaSetState,
    Workload,
    object_ref,
    scaled,
)

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine

ROLLOUT_CHECK = 1.0  # the deployment controller's next look at a rollout (inference)


class DeploymentControllers(WorkloadsBase):
    def create(
        self,
        deploy: JsonDict,
        pool: PoolSpec | None,
        *,
        pdb: bool = False,
    ) -> Workload:
        """Register a Deployment the loops built and give it its first ReplicaSet."""
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
        self.loops.tx.put("deployments", deploy)
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
        return self.loops.tx.get("deployments", wl.namespace, wl.name)

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
        current = self.loops.tx.get("replicasets", rs.workload.namespace, rs.name)
        if current is not None:
            obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if current == obj:
                return
        self.loops.tx.put("replicasets", obj)

    def scale_deployment(self, wl: Workload, replicas: int) -> None:
        """`kubectl scale`: the Deployment's replicas, then its current ReplicaSet's."""
        deploy = self._deployment(wl)
        if deploy is None:
            return
        before = json.loads(json.dumps(deploy))
        deploy["spec"]["replicas"] = replicas
        deploy["metadata"]["generation"] = int(deploy["metadata"].get("generation", 1)) + 1
        self.loops.tx.put("deployments", deploy)
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
        since = _parse(progressing["lastTransitionTime"]) if progressing else self.loops.begin
        new = objects.deployment_status(
            generation=int(deploy["metadata"].get("generation", 1)),
            replicas=replicas,
            updated=updated,
            ready=ready,
            available=ready,
            rs_name=current.name,
            progressing_since=since,
            available_since=self.loops.t,
            now=self.loops.t,
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
            self.loops.tx.put("deployments", deploy)
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
        rs = self._new_replicaset(wl, after, revision=revision, created=self.loops.t)
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
            self.loops.rollout_done(wl)
            return
        self.loops.schedule(self.loops.t + ROLLOUT_CHECK, self._rollout_step, wl, generation, old)

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
            if self.loops.scaling_message_has_from:
                message = f"Scaled {verb} replica set {rs.name} from {before} to {replicas}"
            else:
                message = f"Scaled {verb} replica set {rs.name} to {replicas}"
            self.loops.emit(
                object_ref(deploy, "Deployment", "apps/v1"),
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
        self.loops.emit(ref, reason, message, component="replicaset-controller")

    def _create_pod(self, rs: ReplicaSetState, *, at: float | None = None) -> PodRecord:
        created = self.loops.t if at is None else at
        wl = rs.workload
        name = f"{rs.name}-{self.loops.suffix()}"
        pod = PodRecord(
            namespace=wl.namespace,
            name=name,
            uid=self.loops.uid(),
            created=created,
            requests=scheduling.pod_requests(rs.template),
            owner=rs,
            devices=dra.request_for(wl.pool),
        )
        self.pods[pod.key] = pod
        rs.pods.append(pod)
        self._pending[pod] = None
        if pod.devices is not None:
            pod.claim = self.loops.dra.create_claim(pod, pod.devices)
        self.loops.tx.put("pods", self._pod_object(pod, None, None))
        if at is None:
            self._rs_event(rs, "SuccessfulCreate", f"Created pod: {name}")
            self.schedule_soon()
        return pod

    def _pod_object(
        self, pod: PodRecord, machine: Machine | None, running_since: float | None
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
            node_name=machine.node if machine else None,
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
            host_ip=machine.ip if machine else None,
            pod_ip=self.loops.pods.pod_ip(machine) if machine else None,
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

    def register_daemon_pod(
        self, machine: Machine, namespace: str, name: str, ds: str
    ) -> PodRecord:
        pod = PodRecord(
            namespace=namespace,
            name=name,
            uid="",
            created=self.loops.t,
            requests=dict(DAEMON_REQUESTS),
            daemonset=ds,
            machine=machine,
            ready=True,
        )
        self.pods[pod.key] = pod
        machine.pods.append(pod)
        return pod


def _surge(deploy: JsonDict, replicas: int) -> int:
    strategy = (deploy["spec"].get("strategy") or {}).get("rollingUpdate") or {}
    return scaled(strategy.get("maxSurge", "25%"), replicas)


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


def _parse(value: str) -> float:
    from mignurse.sim.controllers.base import parse_ts

    return parse_ts(value)
