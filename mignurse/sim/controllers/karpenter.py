"""Karpenter's NodePools and NodeClaims, consolidation and interruption, and its Deployment."""

from __future__ import annotations

from typing import TYPE_CHECKING

import yaml

from mignurse.sim import hardware, karpenter_objects, node_objects, objects
from mignurse.sim.controllers.base import (
    SPOT_NOTICE,
    SQS_LAG,
    Machine,
)
from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import PoolSpec, format_duration

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class Karpenter:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    def create_nodepool(self, pool: PoolSpec) -> None:
        it = hardware.instance_type(pool.instance_type)
        uid = self.loops.uid()
        self.loops.pool_uid[pool.name] = uid
        requirements = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it.name]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [pool.capacity_type]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": [it.arch]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(pool.zones)},
        ]
        labels = dict(pool.labels)
        if pool.mig_config:
            labels["nvidia.com/mig.config"] = pool.mig_config
        obj = karpenter_objects.build_nodepool(
            name=pool.name,
            uid=uid,
            created=self.loops.begin - 86400 * 60,
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
        self.loops.tx.put("nodepools", obj)

    def adopt_nodepool(self, name: str) -> None:
        """A NodePool a client created, as Karpenter's nodepool controllers take it up (KC
        v1.4.0 pkg/controllers/nodepool): `hash` sets karpenter.sh/nodepool-hash and its
        version, `validation` ValidationSucceeded, `readiness` NodeClassReady (False
        `NodeClassNotFound` "NodeClass not found on cluster" without its EC2NodeClass),
        `registrationhealth` NodeRegistrationHealthy Unknown until a node registers, and Ready
        is both of the first two (pkg/apis/v1/nodepool_status.go StatusConditions). The
        provisioner launches for it when its requirements pin an instance type the simulator
        models (`node.kubernetes.io/instance-type In [...]`, the first one): the simulator's
        pools have one instance type each."""
        obj = self.loops.tx.get("nodepools", "", name)
        if obj is None or name in self.loops.pool_uid:
            return
        meta = obj["metadata"]
        annotations = meta.setdefault("annotations", {})
        annotations.setdefault("karpenter.sh/nodepool-hash", objects.stable_hex("np", name))
        annotations.setdefault("karpenter.sh/nodepool-hash-version", "v3")
        template = (obj.get("spec") or {}).get("template") or {}
        nodeclass = str(((template.get("spec") or {}).get("nodeClassRef") or {}).get("name", ""))
        class_found = self.loops.tx.peek("ec2nodeclasses", "", nodeclass) is not None
        now, generation = self.loops.t, int(meta.get("generation") or 1)

        def condition(ctype: str, status: str, reason: str, message: str) -> JsonDict:
            return karpenter_objects.nodeclaim_condition(
                ctype, status, reason, message, now, generation
            )

        obj["status"] = {
            "conditions": [
                condition("ValidationSucceeded", "True", "ValidationSucceeded", ""),
                condition("NodeClassReady", "True", "NodeClassReady", "")
                if class_found
                else condition(
                    "NodeClassReady", "False", "NodeClassNotFound", "NodeClass not found on cluster"
                ),
                condition(
                    "NodeRegistrationHealthy",
                    "Unknown",
                    "AwaitingReconciliation",
                    "object is awaiting reconciliation",
                ),
                condition("Ready", "True", "Ready", "")
                if class_found
                else condition("Ready", "False", "NodeClassNotReady", "NodeClassReady=False"),
            ],
            "resources": {"cpu": "0", "memory": "0", "nodes": "0", "pods": "0"},
        }
        self.loops.tx.put("nodepools", obj)
        pool = pool_from_nodepool(obj, self.loops.scenario.region)
        if pool is not None and class_found:
            self.loops.add_pool(pool, str(meta.get("uid", "")))

    def update_nodepool_status(self, pool: PoolSpec) -> None:
        if pool.kind != "nodepool":
            return
        obj = self.loops.tx.get("nodepools", "", pool.name)
        if obj is None:
            return
        it = hardware.instance_type(pool.instance_type)
        count = self.loops.pool_nodes[pool.name]
        resources = {
            "cpu": str(it.cpu * count),
            "memory": f"{it.memory_mib * 1024 * count}Ki",
            "nodes": str(count),
            "pods": str(it.max_pods * count),
            "ephemeral-storage": f"{104845292 * count}Ki",
        }
        if it.gpu is not None and not pool.dra:
            for res, per_node in hardware.mig_resources(
                it, pool.mig_config, pool.mig_strategy, self.loops.mig_files.layouts(it.gpu)
            ).items():
                resources[res] = str(per_node * count)
        if obj["status"].get("resources") != resources:
            obj["status"]["resources"] = resources
            self.loops.tx.put("nodepools", obj)

    def create_claim(self, machine: Machine) -> None:
        pool = machine.pool
        it = hardware.instance_type(pool.instance_type)
        requests = {"cpu": "2150m", "memory": "2130Mi", "pods": "8"}
        if not pool.dra:  # a DRA pool's pods claim devices, they request no nvidia.com/*
            layouts = self.loops.mig_files.layouts(it.gpu, machine.node, pool.mig_config)
            gpu_res = hardware.mig_resources(it, pool.mig_config, pool.mig_strategy, layouts)
            requests.update({k: str(v) for k, v in gpu_res.items() if v})
        assert machine.nodeclaim is not None
        obj = karpenter_objects.build_nodeclaim(
            name=machine.nodeclaim,
            uid=machine.claim_uid,
            created=self.loops.t,
            nodepool=pool.name,
            nodepool_uid=self.loops.pool_uid.get(pool.name, ""),
            nodeclass=pool.nodeclass,
            instance=it,
            zone=machine.zone,
            capacity_type=pool.capacity_type,
            taints=[t.to_api() for t in pool.taints],
            expire_after=pool.expire_after,
            termination_grace_period=format_duration(pool.termination_grace_period)
            if pool.termination_grace_period
            else None,
            nodepool_hash=objects.stable_hex("np", pool.name),
            requests=requests,
        )
        self.loops.tx.put("nodeclaims", obj)

    def claim(self, machine: Machine) -> JsonDict | None:
        return self.loops.tx.get("nodeclaims", "", machine.nodeclaim) if machine.nodeclaim else None

    def set_claim_condition(
        self, machine: Machine, ctype: str, status: str, reason: str, message: str = ""
    ) -> None:
        obj = self.claim(machine)
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
        new = karpenter_objects.nodeclaim_condition(
            ctype, status, reason, message, now=self.loops.t
        )
        if current is not None and current["status"] == status:
            new["lastTransitionTime"] = current["lastTransitionTime"]
        if current is None:
            conds.append(new)
        else:
            conds[conds.index(current)] = new
        conds.sort(key=lambda c: c["type"])
        self.loops.tx.put("nodeclaims", obj)
        # operatorpkg status controller: an event only for a condition it saw before whose
        # status changed (awslabs/operatorpkg status/controller.go, as pinned by KC's go.mod).
        if current is not None and old_status != status:
            self.loops.karpenter_event(
                self.loops.claim_ref(machine),
                ctype,
                self.loops.transition_message(ctype, old_status, status, reason, message),
            )

    def claim_launched(self, machine: Machine) -> None:
        if machine.deleting:
            return
        obj = self.claim(machine)
        if obj is None:
            return
        it = hardware.instance_type(machine.pool.instance_type)
        spec_in = self.loops.kubelet.node_input(machine)
        capacity, allocatable = node_objects.node_resources(spec_in)
        obj["status"].update(
            {
                "providerID": f"aws:///{machine.zone}/{machine.instance_id}",
                "imageID": machine.image,
                "capacity": capacity,
                "allocatable": allocatable,
            }
        )
        obj["metadata"]["labels"]["karpenter.k8s.aws/instance-hypervisor"] = "nitro"
        obj["metadata"]["labels"]["karpenter.k8s.aws/instance-network-bandwidth"] = str(
            it.network_bandwidth
        )
        self.loops.tx.put("nodeclaims", obj)
        machine.launched = True
        self.set_claim_condition(machine, "Launched", "True", "Launched")
        if self.loops.provisioner.pending_pods():
            self.loops.provisioner.trigger()  # a NodeClaim event: the provisioner looks again

    def consolidatable_check(self, machine: Machine) -> None:
        """KC nodeclaim/disruption consolidation.go: Consolidatable once consolidateAfter has
        passed since the last pod event (or initialization), cleared before that."""
        after = self.loops.provisioner.consolidate_after(machine.pool)
        if after is None or not machine.initialized or machine.claim_gone:
            return
        since = (
            machine.last_pod_event
            if machine.last_pod_event is not None
            else machine.ready_at or self.loops.t
        )
        due = since + after
        machine.consolidatable_token += 1
        if self.loops.t < due:
            if machine.consolidatable:
                machine.consolidatable = False
                self._clear_claim_condition(machine, "Consolidatable")
            self.loops.schedule(
                due, self._consolidatable_due, machine, machine.consolidatable_token
            )
            return
        if not machine.consolidatable:
            machine.consolidatable = True
            self.set_claim_condition(machine, "Consolidatable", "True", "Consolidatable")

    def _consolidatable_due(self, machine: Machine, token: int) -> None:
        if token == machine.consolidatable_token:
            self.consolidatable_check(machine)

    def _clear_claim_condition(self, machine: Machine, ctype: str) -> None:
        claim = self.claim(machine)
        if claim is None:
            return
        conds = claim["status"].get("conditions", [])
        kept = [c for c in conds if c["type"] != ctype]
        if len(kept) != len(conds):
            claim["status"]["conditions"] = kept
            self.loops.tx.put("nodeclaims", claim)

    def interruption_message(self, machine: Machine, kind: str) -> None:
        """Karpenter's interruption controller handles one message for this instance (KA
        pkg/controllers/interruption controller.go at v1.4.0, utils.go at v1.14.1): events
        for the message, then delete the NodeClaim unless it is already deleting."""
        if machine.claim_gone:
            return  # no NodeClaim carries this instance ID any more
        if kind == "spot":
            reason, message = "SpotInterrupted", "Spot interruption warning was triggered"
        elif kind in ("stopping", "stopped"):
            reason, message = "InstanceStopping", "Instance is stopping"
        else:  # shutting-down, terminated
            reason, message = "InstanceTerminating", "Instance is terminating"
        node = self.loops.node(machine)
        self.loops.publish(
            self.loops.claim_ref(machine), reason, message, "Warning", dedupe=(machine.claim_uid,)
        )
        if node is not None:
            self.loops.publish(
                self.loops.node_ref(machine), reason, message, "Warning", dedupe=(machine.node_uid,)
            )
        if machine.deleting:
            return  # deleteNodeClaim returns early: no TerminatingOnInterruption
        self.loops.termination.terminate(machine, cause="interruption")
        self.loops.publish(
            self.loops.claim_ref(machine),
            "TerminatingOnInterruption",
            "Interruption triggered termination for the NodeClaim",
            "Warning",
            dedupe=(machine.claim_uid,),
        )
        if node is not None:
            self.loops.publish(
                self.loops.node_ref(machine),
                "TerminatingOnInterruption",
                "Interruption triggered termination for the Node",
                "Warning",
                dedupe=(machine.node_uid,),
            )

    def consolidate(self, machine: Machine, reason: str) -> None:
        if not machine.alive or machine.nodeclaim is None:
            return
        tr = self.loops.traits
        assert tr is not None
        if tr.disruption_reason:
            self.set_claim_condition(
                machine,
                "DisruptionReason",
                "True",
                "DisruptionReason" if tr.disruption_reason_in_message else reason,
                reason,
            )
        self.loops.publish(
            self.loops.node_ref(machine),
            "DisruptionTerminating",
            f"Disrupting Node: {reason}",
            dedupe=(machine.node_uid, reason),
        )
        self.loops.publish(
            self.loops.claim_ref(machine),
            "DisruptionTerminating",
            f"Disrupting NodeClaim: {reason}",
            dedupe=(machine.claim_uid, reason),
        )
        self.loops.termination.terminate(machine, cause="consolidation")

    def spot_interrupt(self, machine: Machine) -> None:
        """EC2's two-minute warning; the instance is interrupted when it runs out."""
        if not machine.alive:
            return
        k = self.loops.scenario.karpenter
        if k is not None and k.interruption_queue and machine.nodeclaim is not None:
            self.loops.schedule(self.loops.t + SQS_LAG, self.interruption_message, machine, "spot")
        self.loops.schedule(
            self.loops.t + SPOT_NOTICE, self.loops.instances.terminate_instance, machine
        )

    # ------------------------------------------------------------------ Karpenter Deployment

    def _karpenter_template(self, gates: str) -> JsonDict:
        k = self.loops.scenario.karpenter
        assert k is not None
        image = f"public.ecr.aws/karpenter/controller:{k.version}@sha256:" + objects.stable_hex(
            "karpenter", k.version, length=64
        )
        env = self._karpenter_env(gates)
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

    def _karpenter_env(self, gates: str) -> list[JsonDict]:
        """The controller container's environment: its ports, feature gates, cluster and
        interruption queue."""
        k = self.loops.scenario.karpenter
        assert k is not None
        endpoint_id = objects.stable_hex("ep", self.loops.scenario.cluster_name, length=32).upper()
        env: list[JsonDict] = [
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
            {"name": "CLUSTER_NAME", "value": self.loops.scenario.cluster_name},
            {
                "name": "CLUSTER_ENDPOINT",
                "value": f"https://{endpoint_id}.gr7.{self.loops.scenario.region}.eks.amazonaws.com",
            },
            {"name": "VM_MEMORY_OVERHEAD_PERCENT", "value": "0.075"},
            {"name": "RESERVED_ENIS", "value": "0"},
        ]
        if k.interruption_queue:
            # KA getting-started: settings.interruptionQueue=${CLUSTER_NAME}
            env.insert(
                -1, {"name": "INTERRUPTION_QUEUE", "value": self.loops.scenario.cluster_name}
            )
        return env

    def create_karpenter(self) -> None:
        k = self.loops.scenario.karpenter
        assert k is not None
        template = self._karpenter_template(k.feature_gates)
        chart = f"karpenter-{k.version}"
        deploy = objects.build_deployment(
            name="karpenter",
            namespace=k.namespace,
            uid=self.loops.uid(),
            created=self.loops.begin - 86400 * 30,
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
        self.loops.karpenter_workload = self.loops.workloads.create(deploy, None)


def pool_from_nodepool(obj: JsonDict, region: str) -> PoolSpec | None:
    """The pool a created NodePool describes, read as a scenario pool would be, or None when
    its requirements name no instance type the simulator models."""
    from mignurse.sim.scenario_fields import ParseContext, ScenarioError
    from mignurse.sim.scenario_pools import parse_pool
    from mignurse.yamlfile import load_lined

    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    wanted: dict[str, list[str]] = {}
    for req in tspec.get("requirements") or []:
        if req.get("operator") == "In" and req.get("values"):
            wanted[str(req.get("key"))] = [str(v) for v in req["values"]]
    known = hardware.INSTANCE_TYPES
    types = [t for t in wanted.get("node.kubernetes.io/instance-type", []) if t in known]
    if not types:
        return None
    disruption = spec.get("disruption") or {}
    pool: JsonDict = {
        "name": obj["metadata"]["name"],
        "instanceType": types[0],
        "capacityType": (wanted.get("karpenter.sh/capacity-type") or ["on-demand"])[0],
        "zones": wanted.get("topology.kubernetes.io/zone") or [f"{region}a"],
        "nodes": 0,
        "taints": [
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in tspec.get("taints") or []
        ],
        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
        "nodeClass": str((tspec.get("nodeClassRef") or {}).get("name") or "default"),
        "expireAfter": str(tspec.get("expireAfter") or "720h"),
        "consolidation": {
            "policy": disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized",
            "after": str(disruption.get("consolidateAfter") or "0s"),
        },
        "budgets": [
            {k: v for k, v in b.items() if k in ("nodes", "reasons", "schedule", "duration")}
            for b in disruption.get("budgets") or [{"nodes": "10%"}]
        ],
    }
    if spec.get("limits"):
        pool["limits"] = {str(k): str(v) for k, v in spec["limits"].items()}
    text = yaml.safe_dump(pool)
    try:
        return parse_pool(
            ParseContext(f"nodepool/{pool['name']}"), load_lined(text), "nodePools", 1, "nodepool"
        )
    except ScenarioError:
        return None
