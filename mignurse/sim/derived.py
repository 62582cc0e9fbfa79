"""DaemonSets as views of their pods, computed at read time.

kubectl needs them to exist: `drain` GETs each daemon pod's DaemonSet and aborts on an
orphan unless forced (kubectl pkg/drain filters.go daemonSetFilter). Their status counts
follow kube-controller-manager's daemonset controller: desired and current are the nodes
running one of its pods, ready and available those whose pod is Ready.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from mignurse.sim.objects import stable_uuid, ts
from mignurse.sim.printers import parse_time
from mignurse.sim.store import Store

JsonDict = dict[str, Any]
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


def daemonsets(
    store: Store, declared: tuple[JsonDict, ...] = (), created: float = 0.0
) -> list[JsonDict]:
    """The DaemonSets derived from their pods, and the scenario's `daemonSets` as written
    (one of the same namespace and name replaces the derived one)."""
    written = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): _as_served(d, created)
        for d in declared
    }
    derived = [
        d
        for d in _derived_daemonsets_of(store)
        if (d["metadata"]["namespace"], d["metadata"]["name"]) not in written
    ]
    return sorted(
        [*derived, *written.values()],
        key=lambda d: (d["metadata"]["namespace"], d["metadata"]["name"]),
    )


def _as_served(manifest: JsonDict, created: float) -> JsonDict:
    obj = json.loads(json.dumps(manifest))
    meta = obj.setdefault("metadata", {})
    ns, name = meta["namespace"], meta["name"]
    obj["apiVersion"], obj["kind"] = "apps/v1", "DaemonSet"
    meta.setdefault("uid", stable_uuid("ds", ns, name))
    meta.setdefault("resourceVersion", "1")
    meta.setdefault("generation", 1)
    meta.setdefault("creationTimestamp", ts(created))
    obj.setdefault(
        "status",
        {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
            "observedGeneration": 1,
        },
    )
    return obj


# Each store's derived DaemonSets as JSON, by the version of its pods they were made from:
# made again only when a pod changed (each is every pod decoded, under the store's lock).
_made: weakref.WeakKeyDictionary[Store, tuple[int, bytes]] = weakref.WeakKeyDictionary()


def _derived_daemonsets_of(store: Store) -> list[JsonDict]:
    """`_derived_daemonsets(store)`, a copy of the last one made while no pod changed."""
    with store.lock:
        version = store.written_at["pods"]
        made = _made.get(store)
        if made is None or made[0] != version:
            made = (version, json.dumps(_derived_daemonsets(store)).encode())
            _made[store] = made
    found: list[JsonDict] = json.loads(made[1])
    return found


def _derived_daemonsets(store: Store) -> list[JsonDict]:
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
