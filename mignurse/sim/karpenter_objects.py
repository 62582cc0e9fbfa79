"""Builders of Karpenter's objects: NodeClaims and NodePools as Karpenter v1 writes them.

A NodeClaim as the provisioner creates it (labels, requirements, resources, the conditions
awaiting reconciliation), a NodePool with its template, disruption settings and limits, and
the condition shape both share. The annotation and finalizer names the controllers set are
here too. See docs/repair.md for the Karpenter sources.
"""

from __future__ import annotations

from mignurse.sim.hardware import InstanceType
from mignurse.sim.objects import JsonDict, stable_hex, ts

KARPENTER_API = "karpenter.sh/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
TERMINATION_FINALIZER = "karpenter.sh/termination"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"


# --------------------------------------------------------------------------- Karpenter objects


def nodeclaim_condition(
    ctype: str, status: str, reason: str, message: str, now: float, generation: int = 1
) -> JsonDict:
    return {
        "type": ctype,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": ts(now),
        "reason": reason,
        "message": message,
    }


def build_nodeclaim(
    *,
    name: str,
    uid: str,
    created: float,
    nodepool: str,
    nodepool_uid: str,
    nodeclass: str,
    instance: InstanceType,
    zone: str,
    capacity_type: str,
    taints: list[JsonDict],
    expire_after: str,
    termination_grace_period: str | None,
    nodepool_hash: str,
    requests: dict[str, str],
) -> JsonDict:
    it = instance
    labels = _nodeclaim_labels(it, nodepool, capacity_type, nodeclass, zone)
    requirements: list[JsonDict] = [
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it.name]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": [it.arch]},
        {"key": "karpenter.k8s.aws/ec2nodeclass", "operator": "In", "values": [nodeclass]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
    ]
    spec: JsonDict = {
        "expireAfter": expire_after,
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": nodeclass},
        "requirements": requirements,
        "resources": {"requests": dict(sorted(requests.items()))},
    }
    if taints:
        spec["taints"] = taints
    if termination_grace_period:
        spec["terminationGracePeriod"] = termination_grace_period
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": dict(sorted(labels.items())),
            "annotations": {
                "compatibility.karpenter.k8s.aws/cluster-name-tagged": "true",
                "karpenter.k8s.aws/ec2nodeclass-hash": stable_hex("nc", nodeclass, length=19),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.k8s.aws/tagged": "true",
                "karpenter.sh/nodepool-hash": nodepool_hash,
                "karpenter.sh/nodepool-hash-version": "v3",
            },
            "finalizers": [TERMINATION_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": KARPENTER_API,
                    "kind": "NodePool",
                    "name": nodepool,
                    "uid": nodepool_uid,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {"conditions": _awaiting_conditions(created)},
    }


def _nodeclaim_labels(
    it: InstanceType, nodepool: str, capacity_type: str, nodeclass: str, zone: str
) -> dict[str, str]:
    """The labels the provisioner writes on a NodeClaim: its NodePool's, the offering's and
    the instance type's well-known ones."""
    labels = {
        "karpenter.sh/nodepool": nodepool,
        "karpenter.sh/capacity-type": capacity_type,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "node.kubernetes.io/instance-type": it.name,
        "topology.kubernetes.io/zone": zone,
        "kubernetes.io/arch": it.arch,
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-category": it.category,
        "karpenter.k8s.aws/instance-family": it.family,
        "karpenter.k8s.aws/instance-generation": it.generation,
        "karpenter.k8s.aws/instance-size": it.size,
        "karpenter.k8s.aws/instance-cpu": str(it.cpu),
        "karpenter.k8s.aws/instance-memory": str(it.memory_mib),
    }
    if it.gpu is not None:
        labels.update(
            {
                "karpenter.k8s.aws/instance-gpu-count": str(it.gpu_count),
                "karpenter.k8s.aws/instance-gpu-name": it.gpu.karpenter_name,
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                "karpenter.k8s.aws/instance-gpu-memory": str(it.gpu.ec2_memory_mib),
            }
        )
    return labels


def _awaiting_conditions(created: float) -> list[JsonDict]:
    """A new NodeClaim's conditions: nothing launched, registered or initialized yet."""
    awaiting = ("Unknown", "AwaitingReconciliation", "object is awaiting reconciliation")
    conditions = [
        nodeclaim_condition(t, *awaiting, now=created)
        for t in ("Launched", "Registered", "Initialized")
    ]
    conditions.append(
        nodeclaim_condition(
            "Ready",
            "Unknown",
            "UnhealthyDependents",
            "Launched=Unknown, Registered=Unknown, Initialized=Unknown",
            now=created,
        )
    )
    return conditions


def build_nodepool(
    *,
    name: str,
    uid: str,
    created: float,
    nodeclass: str,
    labels: dict[str, str],
    requirements: list[JsonDict],
    taints: list[JsonDict],
    expire_after: str,
    termination_grace_period: str | None,
    consolidation_policy: str,
    consolidate_after: str,
    budgets: list[JsonDict],
    limits: dict[str, str] | None,
    weight: int | None,
) -> JsonDict:
    template_spec: JsonDict = {
        "expireAfter": expire_after,
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": nodeclass},
        "requirements": requirements,
    }
    if taints:
        template_spec["taints"] = taints
    if termination_grace_period:
        template_spec["terminationGracePeriod"] = termination_grace_period
    spec: JsonDict = {
        "disruption": {
            "budgets": budgets,
            "consolidateAfter": consolidate_after,
            "consolidationPolicy": consolidation_policy,
        },
        "template": {"metadata": {"labels": labels}, "spec": template_spec},
    }
    if limits:
        spec["limits"] = limits
    if weight is not None:
        spec["weight"] = weight
    ready_conditions = [
        ("NodeClassReady", "NodeClassReady", ""),
        ("ValidationSucceeded", "ValidationSucceeded", ""),
        ("NodeRegistrationHealthy", "NodeRegistrationHealthy", ""),
        ("Ready", "Ready", ""),
    ]
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "annotations": {
                "karpenter.sh/nodepool-hash": stable_hex("np", name),
                "karpenter.sh/nodepool-hash-version": "v3",
            },
        },
        "spec": spec,
        "status": {
            "conditions": [
                nodeclaim_condition(t, "True", r, m, now=created) for t, r, m in ready_conditions
            ],
            "resources": {"cpu": "0", "memory": "0", "nodes": "0", "pods": "0"},
        },
    }
