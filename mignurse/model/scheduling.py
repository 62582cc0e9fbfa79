"""What a scheduler decides with: quantities, taints, selectors, resource fit.

Pure functions over API-shaped dicts, shared by the simulator's kube-scheduler stand-in
(placing pods on nodes) and Karpenter provisioner (placing pods on NodeClaims it may launch),
and by the runbooks' forecast of whether evicted pods need a new node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

Resources = dict[str, float]  # cpu in cores, memory in bytes, everything else a count

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity (`2150m`, `16Gi`, `4`) as a float; 0 when it cannot be read."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match[2] not in _SUFFIX:
        return 0.0
    return float(match[1]) * _SUFFIX[match[2]]


def resources(raw: Mapping[str, Any] | None) -> Resources:
    return {name: parse_quantity(value) for name, value in (raw or {}).items()}


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """Sum of the containers' requests (limits stand in for missing requests, as the API
    server defaults them), plus one `pods` slot."""
    total: Resources = {"pods": 1.0}
    for ctr in (pod.get("spec") or {}).get("containers") or []:
        res = ctr.get("resources") or {}
        requests = dict(res.get("limits") or {})
        requests.update(res.get("requests") or {})
        for name, value in requests.items():
            total[name] = total.get(name, 0.0) + parse_quantity(value)
    return total


def add(total: Resources, more: Mapping[str, float], sign: float = 1.0) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + sign * value


def fits(request: Mapping[str, float], allocatable: Mapping[str, float], used: Resources) -> bool:
    """NodeResourcesFit: every requested resource fits in what is left (1e-9 slack for floats)."""
    for name, value in request.items():
        if value <= 0:
            continue
        if used.get(name, 0.0) + value > allocatable.get(name, 0.0) + 1e-9:
            return False
    return True


def insufficient(
    request: Mapping[str, float], allocatable: Mapping[str, float], used: Resources
) -> list[str]:
    """The resource names that do not fit, in the scheduler's order."""
    return [
        name
        for name, value in sorted(request.items())
        if value > 0 and used.get(name, 0.0) + value > allocatable.get(name, 0.0) + 1e-9
    ]


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """k8s.io/api core/v1 Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return bool(
        operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")
    )


def untolerated(
    tolerations: Iterable[Mapping[str, Any]],
    taints: Iterable[Mapping[str, Any]],
    effects: tuple[str, ...] = ("NoSchedule", "NoExecute"),
) -> list[Mapping[str, Any]]:
    """The taints with one of `effects` that no toleration matches."""
    tols = list(tolerations)
    return [
        t for t in taints if t.get("effect") in effects and not any(_tolerates(x, t) for x in tols)
    ]


def toleration_seconds(
    tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]
) -> float | None:
    """How long a pod may stay on a node with this NoExecute taint: None = forever, 0 = not
    at all (the shortest matching tolerationSeconds wins, pkg/controller/tainteviction)."""
    matching = [t for t in tolerations if _tolerates(t, taint)]
    if not matching:
        return 0.0
    limits = [float(t["tolerationSeconds"]) for t in matching if "tolerationSeconds" in t]
    if len(limits) < len(matching) and not limits:
        return None
    return max(0.0, min(limits)) if limits else None


def selector_matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def node_affinity_matches(affinity: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution node affinity: any term matches, a term
    when all its expressions do (k8s.io/component-helpers scheduling/corev1/nodeaffinity,
    kubernetes v1.34.0)."""
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    for term in required.get("nodeSelectorTerms") or []:
        if all(expression_matches(e, labels) for e in term.get("matchExpressions") or []):
            return True
    return False


def expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def pretty_taint(taint: Mapping[str, Any]) -> str:
    """KC pkg/utils/pretty Taint: `key=value:Effect`, or `key:Effect` without a value."""
    value = taint.get("value") or ""
    key = taint.get("key", "")
    return (
        f"{key}={value}:{taint.get('effect', '')}" if value else f"{key}:{taint.get('effect', '')}"
    )


def format_quantity(name: str, value: float) -> str:
    """A quantity the way apimachinery prints a canonical value (`210m`, `1280Mi`, `5`)."""
    if name == "cpu":
        millis = round(value * 1000)
        return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"
    if name in ("memory", "ephemeral-storage"):
        for suffix, size in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
            if value >= size and value % size == 0:
                return f"{int(value // size)}{suffix}"
        return str(int(value))
    return str(round(value))


def concise(res: Mapping[str, float]) -> str:
    """KC pkg/utils/resources String: `{}` or the ResourceList as compact JSON, keys sorted
    (Go's encoding/json orders map keys)."""
    if not res:
        return "{}"
    return json.dumps(
        {name: format_quantity(name, res[name]) for name in sorted(res)}, separators=(",", ":")
    )
