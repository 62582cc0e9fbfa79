"""Builders of raw Kubernetes API JSON shaped like what EKS really returns: the core objects.

Events, pods and their containers, Deployments, ReplicaSets, Leases, PodDisruptionBudgets and
namespaces, and what every builder shares: timestamps as the API server renders them and ids
derived from their parts. Nodes are built in `node_objects.py`, NodeClaims and NodePools in
`karpenter_objects.py`, from the hardware in `hardware.py`. Everything here is a pure function
of its arguments (no clock, no RNG): the controllers pass in names, ids and times, so a seeded
scenario always builds byte-identical objects.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime
from typing import Any

JsonDict = dict[str, Any]


def ts(epoch: float) -> str:
    """RFC 3339 with second precision, as the API server renders metav1.Time."""
    return _second(int(epoch))


@functools.lru_cache(maxsize=1 << 16)
def _second(epoch: int) -> str:
    # A 5,000-node build renders half a million times, most of them the same few seconds.
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(epoch: float) -> str:
    """metav1.MicroTime rendering (used by Leases and new-style events)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stable_hex(*parts: object, length: int = 16) -> str:
    """Deterministic hex derived from the parts (digests, hashes, boot ids)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return digest[:length]


def stable_uuid(*parts: object) -> str:
    h = stable_hex(*parts, length=32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


# --------------------------------------------------------------------------- core objects


def build_event(
    *,
    name: str,
    namespace: str,
    uid: str,
    involved: JsonDict,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    host: str | None,
    first: float,
    last: float,
    count: int = 1,
) -> JsonDict:
    source: JsonDict = {"component": component}
    if host:
        source["host"] = host
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(first),
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": ts(first),
        "lastTimestamp": ts(last),
        "count": count,
        "type": event_type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }


# The built-in PriorityClasses (k8s pkg/apis/scheduling SystemPriorityClasses).
PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# DefaultTolerationSeconds admission: what every pod without its own gets (300 s each).
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def pod_unschedulable(pod: JsonDict, message: str, at: float) -> bool:
    """The scheduler's PodScheduled=False Unschedulable condition; False when unchanged."""
    conds = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
    current = next(
        (c for c in pod["status"].get("conditions", []) if c.get("type") == "PodScheduled"), None
    )
    if current is not None and current.get("message") == message:
        return False
    conds.append(
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": current["lastTransitionTime"] if current else ts(at),
            "reason": "Unschedulable",
            "message": message,
        }
    )
    pod["status"]["conditions"] = conds
    return True


def build_pod(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    node_name: str | None,
    labels: dict[str, str],
    owner: JsonDict,
    containers: list[JsonDict],
    tolerations: list[JsonDict],
    priority_class: str | None,
    host_ip: str | None,
    pod_ip: str | None,
    running_since: float | None,
    host_network: bool = False,
    node_selector: dict[str, str] | None = None,
    affinity: JsonDict | None = None,
) -> JsonDict:
    spec: JsonDict = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": PRIORITY_CLASSES.get(priority_class or "", 0),
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": labels.get("app.kubernetes.io/name", "default"),
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations,
    }
    if host_network:
        spec["hostNetwork"] = True
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    status = _pod_status(uid, created, node_name, containers, host_ip, pod_ip, running_since)
    return {
        "metadata": {
            "name": name,
            "generateName": name[: name.rfind("-") + 1],
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": spec,
        "status": status,
    }


def _pod_status(
    uid: str,
    created: float,
    node_name: str | None,
    containers: list[JsonDict],
    host_ip: str | None,
    pod_ip: str | None,
    running_since: float | None,
) -> JsonDict:
    """Running with every container started, bound but not started yet, or not scheduled."""
    if running_since is not None and node_name:
        return _running_status(uid, containers, host_ip, pod_ip, running_since)
    if node_name:
        return {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(created),
                }
            ],
            "hostIP": host_ip,
            "startTime": ts(created),
            "qosClass": "Burstable",
        }
    # Not looked at by the scheduler yet: no conditions (see pod_unschedulable).
    return {"phase": "Pending", "qosClass": "Burstable"}


def _running_status(
    uid: str,
    containers: list[JsonDict],
    host_ip: str | None,
    pod_ip: str | None,
    running_since: float,
) -> JsonDict:
    return {
        "phase": "Running",
        "conditions": [
            {
                "type": t,
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(running_since),
            }
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": ts(running_since),
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": c["image"].split(":")[0]
                + "@sha256:"
                + stable_hex("digest", c["image"], length=64),
                "containerID": "containerd://" + stable_hex("ctr", uid, c["name"], length=64),
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": ts(running_since)}},
                "lastState": {},
            }
            for c in containers
        ],
    }


def container(
    name: str, image: str, requests: dict[str, str], limits: dict[str, str] | None = None
) -> JsonDict:
    resources: JsonDict = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def build_deployment(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    replicas: int,
    labels: dict[str, str],
    annotations: dict[str, str],
    selector: dict[str, str],
    template: JsonDict,
    max_unavailable: int | str = "25%",
) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1", **annotations},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": template,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {},
    }


def deployment_status(
    *,
    generation: int,
    replicas: int,
    updated: int,
    ready: int,
    available: int,
    rs_name: str,
    progressing_since: float,
    available_since: float,
    now: float,
) -> JsonDict:
    complete = updated >= replicas and ready >= replicas
    progressing = (
        ("NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
        if complete
        else ("ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
    )
    avail_ok = available >= max(0, replicas - 1)
    status: JsonDict = {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": [
            {
                "type": "Available",
                "status": "True" if avail_ok else "False",
                "lastUpdateTime": ts(available_since),
                "lastTransitionTime": ts(available_since),
                "reason": "MinimumReplicasAvailable" if avail_ok else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if avail_ok
                else "Deployment does not have minimum availability.",
            },
            {
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": ts(now),
                "lastTransitionTime": ts(progressing_since),
                "reason": progressing[0],
                "message": progressing[1],
            },
        ],
    }
    if replicas - available > 0:
        status["unavailableReplicas"] = replicas - available
    return status


def build_replicaset(
    *,
    deployment: JsonDict,
    name: str,
    uid: str,
    created: float,
    pod_hash: str,
    template: JsonDict,
    revision: int,
    spec_replicas: int,
    replicas: int,
    ready: int,
    desired: int,
    max_surge: int,
) -> JsonDict:
    """A Deployment's ReplicaSet as the deployment controller writes it: the Deployment's
    annotations copied (bar its own revision bookkeeping), the revision, desired and max
    replicas (k8s pkg/controller/deployment/util deployment_util.go SetNewReplicaSetAnnotations)."""
    meta = deployment["metadata"]
    labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": pod_hash}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k
        not in (
            "deployment.kubernetes.io/revision",
            "deployment.kubernetes.io/revision-history",
            "kubectl.kubernetes.io/last-applied-configuration",
        )
    }
    annotations.update(
        {
            "deployment.kubernetes.io/desired-replicas": str(desired),
            "deployment.kubernetes.io/max-replicas": str(desired + max_surge),
            "deployment.kubernetes.io/revision": str(revision),
        }
    )
    pod_template = {
        "metadata": {**(template.get("metadata") or {}), "labels": labels},
        "spec": template.get("spec", {}),
    }
    selector = {**deployment["spec"]["selector"]["matchLabels"], "pod-template-hash": pod_hash}
    status: JsonDict = {"replicas": replicas, "observedGeneration": 1}
    if replicas:
        status.update(
            {"fullyLabeledReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready}
        )
    return {
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
            "labels": labels,
            "annotations": dict(sorted(annotations.items())),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": spec_replicas,
            "selector": {"matchLabels": selector},
            "template": pod_template,
        },
        "status": status,
    }


def build_lease(*, node: str, node_uid: str, uid: str, created: float, renewed: float) -> JsonDict:
    """A kubelet's node Lease in kube-node-lease (k8s.io/component-helpers apimachinery/lease
    controller.go newLease; the kubelet sets the Node as owner)."""
    return {
        "metadata": {
            "name": node,
            "namespace": "kube-node-lease",
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": NODE_LEASE_DURATION,
            "renewTime": micro_ts(renewed),
        },
    }


NODE_LEASE_DURATION = 40  # kubelet nodeLeaseDurationSeconds default


def build_pdb(
    *,
    name: str,
    namespace: str,
    uid: str,
    created: float,
    selector: dict[str, str],
    min_available: int | str | None,
    max_unavailable: int | str | None,
) -> JsonDict:
    spec: JsonDict = {"selector": {"matchLabels": selector}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": ts(created),
        },
        "spec": spec,
        "status": {},
    }


def build_namespace(name: str, uid: str, created: float) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def pod_template_hash(template: JsonDict) -> str:
    """A pod-template-hash-looking string (k8s encodes an FNV hash with SafeEncodeString)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    value = int(stable_hex("template", repr(sorted(_flatten(template))), length=15), 16)
    out = []
    for _ in range(10):
        value, rem = divmod(value, len(alphabet))
        out.append(alphabet[rem])
    return "".join(out)


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(obj, dict):
        return [kv for k, v in obj.items() for kv in _flatten(v, f"{prefix}.{k}")]
    if isinstance(obj, list):
        return [kv for i, v in enumerate(obj) for kv in _flatten(v, f"{prefix}[{i}]")]
    return [(prefix, repr(obj))]
