"""Objects the simulator serves as views of the state it keeps: DaemonSets, ReplicaSets and
node Leases, computed from the pods, Deployments and Nodes at read time.

kubectl needs them to exist: `drain` GETs each daemon pod's DaemonSet (an orphan aborts the
drain), `rollout history` and `describe deployment` list ReplicaSets, `describe node` GETs
the node's Lease in kube-node-lease. Their fields follow the controllers that write them on
a real cluster (kube-controller-manager's daemonset and replicaset controllers, the kubelet's
node lease: 40 s duration, renewed every 10 s while the kubelet runs).
"""

from __future__ import annotations

import json
from typing import Any

from mignurse.sim.objects import micro_ts, stable_uuid, ts
from mignurse.sim.store import Store
from mignurse.sim.tables import parse_time

JsonDict = dict[str, Any]
LEASE_DURATION = 40
LEASE_RENEW = 10.0
# The GPU operator's operand DaemonSets select nodes by nvidia.com/gpu.deploy.<operand>=true
# (NVIDIA/gpu-operator controllers/state_manager.go).
OPERAND_SELECTORS = {
    "nvidia-device-plugin-daemonset": "device-plugin",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-container-toolkit-daemonset": "container-toolkit",
    "nvidia-operator-validator": "operator-validator",
    "nvidia-mig-manager": "mig-manager",
}


def _pod_ready(pod: JsonDict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _owner(pod: JsonDict) -> JsonDict | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def _max_rv(objs: list[JsonDict]) -> str:
    rvs = [int((o.get("metadata") or {}).get("resourceVersion") or 0) for o in objs]
    return str(max(rvs, default=1))


def _template(pod: JsonDict, drop: tuple[str, ...]) -> JsonDict:
    labels = {
        k: v for k, v in ((pod.get("metadata") or {}).get("labels") or {}).items() if k not in drop
    }
    spec = pod.get("spec") or {}
    keep = ("containers", "tolerations", "priorityClassName", "hostNetwork", "nodeSelector")
    return {
        "metadata": {"labels": labels},
        "spec": {k: spec[k] for k in keep if k in spec}
        | {"restartPolicy": "Always", "terminationGracePeriodSeconds": 30},
    }


def daemonsets(store: Store) -> list[JsonDict]:
    groups: dict[tuple[str, str], tuple[JsonDict, list[JsonDict]]] = {}
    for pod in store.all("pods"):
        ref = _owner(pod)
        if ref is None or ref.get("kind") != "DaemonSet":
            continue
        key = (pod["metadata"]["namespace"], str(ref.get("name")))
        groups.setdefault(key, (ref, []))[1].append(pod)
    out = []
    for (ns, name), (ref, pods) in sorted(groups.items()):
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in live if _pod_ready(p))
        sample = pods[0]
        template = _template(sample, ("controller-revision-hash", "pod-template-generation"))
        selector_labels = {
            k: v
            for k, v in template["metadata"]["labels"].items()
            if k in ("app", "app.kubernetes.io/name", "k8s-app", "name")
        } or dict(template["metadata"]["labels"])
        operand = OPERAND_SELECTORS.get(name)
        if operand:
            template["spec"]["nodeSelector"] = {f"nvidia.com/gpu.deploy.{operand}": "true"}
        created = min((parse_time(p["metadata"].get("creationTimestamp")) or 0.0) for p in pods)
        out.append(
            {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": str(ref.get("uid") or stable_uuid("ds", ns, name)),
                    "resourceVersion": _max_rv(pods),
                    "generation": 1,
                    "creationTimestamp": ts(created),
                    "labels": dict(selector_labels),
                    "annotations": {"deprecated.daemonset.template.generation": "1"},
                },
                "spec": {
                    "selector": {"matchLabels": selector_labels},
                    "template": template,
                    "updateStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
                    },
                    "revisionHistoryLimit": 10,
                },
                "status": {
                    "currentNumberScheduled": len(live),
                    "numberMisscheduled": 0,
                    "desiredNumberScheduled": len(live),
                    "numberReady": ready,
                    "observedGeneration": 1,
                    "updatedNumberScheduled": len(live),
                    "numberAvailable": ready,
                    **({"numberUnavailable": len(live) - ready} if len(live) > ready else {}),
                },
            }
        )
    return out


def replicasets(store: Store) -> list[JsonDict]:
    out = []
    pods = store.all("pods")
    for deploy in store.all("deployments"):
        meta = deploy["metadata"]
        ns, name = meta["namespace"], meta["name"]
        owned = [
            p
            for p in pods
            if p["metadata"]["namespace"] == ns
            and (_owner(p) or {}).get("kind") == "ReplicaSet"
            and str((_owner(p) or {}).get("name", "")).startswith(name + "-")
        ]
        hashes = sorted(
            {p["metadata"]["labels"].get("pod-template-hash", "") for p in owned} - {""}
        )
        if not hashes:
            continue
        revision = (meta.get("annotations") or {}).get("deployment.kubernetes.io/revision", "1")
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))
        for n, rs_hash in enumerate(hashes):
            mine = [p for p in owned if p["metadata"]["labels"].get("pod-template-hash") == rs_hash]
            live = [p for p in mine if not p["metadata"].get("deletionTimestamp")]
            ready = sum(1 for p in live if _pod_ready(p))
            current = n == len(hashes) - 1
            template = _template(mine[0], ())
            selector = dict((deploy.get("spec") or {}).get("selector", {}).get("matchLabels") or {})
            rs_name = f"{name}-{rs_hash}"
            out.append(
                {
                    "metadata": {
                        "name": rs_name,
                        "namespace": ns,
                        "uid": stable_uuid("rs", ns, name, rs_hash),
                        "resourceVersion": _max_rv([deploy, *mine]),
                        "generation": 1,
                        "creationTimestamp": meta.get("creationTimestamp"),
                        "labels": {**template["metadata"]["labels"]},
                        "annotations": {
                            "deployment.kubernetes.io/desired-replicas": str(replicas),
                            "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                            "deployment.kubernetes.io/revision": revision
                            if current
                            else str(n + 1),
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "Deployment",
                                "name": name,
                                "uid": meta.get("uid", ""),
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": {
                        "replicas": replicas if current else 0,
                        "selector": {"matchLabels": {**selector, "pod-template-hash": rs_hash}},
                        "template": template,
                    },
                    "status": {
                        "replicas": len(live),
                        "fullyLabeledReplicas": len(live),
                        "readyReplicas": ready,
                        "availableReplicas": ready,
                        "observedGeneration": 1,
                    },
                }
            )
    return out


def _kubelet_running(node: JsonDict) -> tuple[bool, float | None]:
    """Whether the kubelet still renews its lease, and its last heartbeat."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            heartbeat = parse_time(cond.get("lastHeartbeatTime"))
            # Unknown: the node controller stopped hearing from the kubelet
            return cond.get("status") != "Unknown", heartbeat
    return False, None


def leases(store: Store, now: float) -> list[JsonDict]:
    out = []
    for node in store.all("nodes"):
        meta = node["metadata"]
        created = parse_time(meta.get("creationTimestamp")) or now
        running, heartbeat = _kubelet_running(node)
        renew = now - (now - created) % LEASE_RENEW if running else (heartbeat or created)
        out.append(
            {
                "metadata": {
                    "name": meta["name"],
                    "namespace": "kube-node-lease",
                    "uid": stable_uuid("lease", meta["name"]),
                    "resourceVersion": meta.get("resourceVersion", "1"),
                    "creationTimestamp": meta.get("creationTimestamp"),
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": meta["name"],
                            "uid": meta.get("uid", ""),
                        }
                    ],
                },
                "spec": {
                    "holderIdentity": meta["name"],
                    "leaseDurationSeconds": LEASE_DURATION,
                    "renewTime": micro_ts(max(created, renew)),
                },
            }
        )
    return out


def render(objs: list[JsonDict]) -> list[bytes]:
    return [json.dumps(o, separators=(",", ":")).encode() for o in objs]
