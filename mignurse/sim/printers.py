"""The rows kube-apiserver prints for built-in kinds, and the time and label formats they use.

One `print_<kind>(obj, now)` per kind, each a translation of the kind's print function in
kubernetes v1.32 pkg/printers/internalversion/printers.go (`printPod`'s init-container,
sidecar and restart rules included), with apimachinery's `HumanDuration` for ages and
`FormatLabels`/`FormatLabelSelector` for selectors. `tables.py` pairs each printer with its
column definitions and builds the Table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

JsonDict = dict[str, Any]

# --------------------------------------------------------------------------- time


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds_float: float) -> str:
    """apimachinery v0.32 pkg/util/duration HumanDuration."""
    seconds = int(seconds_float)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def since(text: Any, now: float) -> str:
    """translateTimestampSince: `<unknown>` for a missing time."""
    at = parse_time(text)
    return "<unknown>" if at is None else human_duration(now - at)


# --------------------------------------------------------------------------- helpers


def meta_of(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _dict(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def format_labels(labels: Any) -> str:
    """labels.FormatLabels: sorted k=v pairs, `<none>` when empty."""
    pairs = sorted(f"{k}={v}" for k, v in _dict(labels).items())
    return ",".join(pairs) if pairs else "<none>"


def format_label_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector."""
    sel = _dict(selector)
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted(_dict(sel.get("matchLabels")).items())]
    for expr in _list(sel.get("matchExpressions")):
        e = _dict(expr)
        op = str(e.get("operator", ""))
        key = str(e.get("key", ""))
        values = ",".join(sorted(str(v) for v in _list(e.get("values"))))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text if text else "<none>"


def _containers(template: Any) -> tuple[str, str]:
    containers = _list(_dict(_dict(template).get("spec")).get("containers"))
    names = ",".join(str(_dict(c).get("name", "")) for c in containers)
    images = ",".join(str(_dict(c).get("image", "")) for c in containers)
    return names, images


def _int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)


# --------------------------------------------------------------------------- built-in printers


def print_node(obj: JsonDict, now: float) -> list[Any]:
    status = _dict(obj.get("status"))
    ready = next(
        (_dict(c) for c in _list(status.get("conditions")) if _dict(c).get("type") == "Ready"),
        None,
    )
    words = []
    if ready is not None:
        words.append("Ready" if ready.get("status") == "True" else "NotReady")
    if not words:
        words.append("Unknown")
    if _dict(obj.get("spec")).get("unschedulable"):
        words.append("SchedulingDisabled")
    roles = set()
    for key, value in _dict(meta_of(obj).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = _dict(status.get("nodeInfo"))
    addresses = [_dict(a) for a in _list(status.get("addresses"))]
    internal = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)
    external = next((a.get("address") for a in addresses if a.get("type") == "ExternalIP"), None)
    return [
        meta_of(obj).get("name", ""),
        ",".join(words),
        ",".join(sorted(roles)) or "<none>",
        since(meta_of(obj).get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        internal or "<none>",
        external or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def print_pod(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    meta = meta_of(obj)
    init_specs = {str(_dict(c).get("name")): _dict(c) for c in _list(spec.get("initContainers"))}
    sidecars = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total = len(_list(spec.get("containers"))) + len(sidecars)
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in _list(status.get("conditions")):
        c = _dict(cond)
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    reason, initializing, ready_count, restarts, sidecar_restarts = _init_containers(
        status, len(init_specs), sidecars, reason
    )
    initialized = any(
        _dict(c).get("type") == "Initialized" and _dict(c).get("status") == "True"
        for c in _list(status.get("conditions"))
    )
    if not initializing or initialized:
        reason, ready_containers, restarts = _app_containers(status, reason, sidecar_restarts)
        ready_count += ready_containers
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_text = str(restarts.count)
    if restarts.count and restarts.last is not None:
        restarts_text = f"{restarts.count} ({human_duration(now - restarts.last)} ago)"
    pod_ips = _list(status.get("podIPs"))
    pod_ip = str(_dict(pod_ips[0]).get("ip") or "") if pod_ips else ""
    return [
        meta.get("name", ""),
        f"{ready_count}/{total}",
        reason,
        restarts_text,
        since(meta.get("creationTimestamp"), now),
        pod_ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(spec, status),
    ]


@dataclass
class _Restarts:
    """Restarts summed over container statuses, and when the last restarted one finished."""

    count: int = 0
    last: float | None = None

    def add(self, cs: JsonDict) -> None:
        self.count += _int(cs.get("restartCount"))
        finished = parse_time(_dict(_dict(cs.get("lastState")).get("terminated")).get("finishedAt"))
        if finished is not None and (self.last is None or finished > self.last):
            self.last = finished


def _init_containers(
    status: JsonDict, init_count: int, sidecars: set[str], reason: str
) -> tuple[str, bool, int, _Restarts, _Restarts]:
    """printPod's pass over init containers: the reason (`Init:…` while one has not finished),
    whether the pod is still initializing, the ready sidecars, and the restarts of all init
    containers and of the sidecars alone."""
    ready_count = 0
    restarts = _Restarts()
    sidecar_restarts = _Restarts()
    init_statuses = [_dict(c) for c in _list(status.get("initContainerStatuses"))]
    for i, cs in enumerate(init_statuses):
        restarts.add(cs)
        name = str(cs.get("name"))
        if name in sidecars:
            sidecar_restarts.add(cs)
        state = _dict(cs.get("state"))
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if name in sidecars and cs.get("started"):
            if cs.get("ready"):
                ready_count += 1
            continue
        if isinstance(terminated, dict):
            if terminated.get("reason"):
                reason = "Init:" + str(terminated["reason"])
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{_int(terminated.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif (
            isinstance(waiting, dict)
            and waiting.get("reason")
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{init_count}"
        return reason, True, ready_count, restarts, sidecar_restarts
    return reason, False, ready_count, restarts, sidecar_restarts


def _app_containers(
    status: JsonDict, reason: str, sidecar_restarts: _Restarts
) -> tuple[str, int, _Restarts]:
    """printPod's pass over the app containers, last first: the reason a waiting or
    terminated one gives, the ready running ones, and the restarts (the sidecars' included)."""
    restarts = _Restarts(sidecar_restarts.count, sidecar_restarts.last)
    ready_count = 0
    has_running = False
    for cs in reversed([_dict(c) for c in _list(status.get("containerStatuses"))]):
        restarts.add(cs)
        state = _dict(cs.get("state"))
        waiting = state.get("waiting")
        terminated = state.get("terminated")
        if isinstance(waiting, dict) and waiting.get("reason"):
            reason = str(waiting["reason"])
        elif isinstance(terminated, dict) and terminated.get("reason"):
            reason = str(terminated["reason"])
        elif isinstance(terminated, dict):
            if _int(terminated.get("signal")):
                reason = f"Signal:{_int(terminated.get('signal'))}"
            else:
                reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
        elif cs.get("ready") and isinstance(state.get("running"), dict):
            has_running = True
            ready_count += 1
    if reason == "Completed" and has_running:
        pod_ready = any(
            _dict(c).get("type") == "Ready" and _dict(c).get("status") == "True"
            for c in _list(status.get("conditions"))
        )
        reason = "Running" if pod_ready else "NotReady"
    return reason, ready_count, restarts


def _readiness_gates(spec: JsonDict, status: JsonDict) -> str:
    """`<true>/<gates>` of the pod's readiness gates, or `<none>`."""
    gates = _list(spec.get("readinessGates"))
    if not gates:
        return "<none>"
    conds = {_dict(c).get("type"): _dict(c).get("status") for c in _list(status.get("conditions"))}
    true = sum(1 for g in gates if conds.get(_dict(g).get("conditionType")) == "True")
    return f"{true}/{len(gates)}"


def _event_source(obj: JsonDict) -> str:
    source = _dict(obj.get("source"))
    component = source.get("component") or obj.get("reportingController") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else str(component)


def print_event(obj: JsonDict, now: float) -> list[Any]:
    first = since(obj.get("firstTimestamp"), now)
    if parse_time(obj.get("firstTimestamp")) is None:
        first = since(obj.get("eventTime"), now)
    last = since(obj.get("lastTimestamp"), now)
    if parse_time(obj.get("lastTimestamp")) is None:
        last = first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events of the new API carry no count
    involved = _dict(obj.get("involvedObject"))
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    return [
        last,
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        _event_source(obj),
        str(obj.get("message", "")).strip(),
        first,
        count,
        meta_of(obj).get("name", ""),
    ]


def print_namespace(obj: JsonDict, now: float) -> list[Any]:
    return [
        meta_of(obj).get("name", ""),
        _dict(obj.get("status")).get("phase", ""),
        since(meta_of(obj).get("creationTimestamp"), now),
    ]


def print_deployment(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    names, images = _containers(spec.get("template"))
    replicas = spec.get("replicas", 1)
    return [
        meta_of(obj).get("name", ""),
        f"{_int(status.get('readyReplicas'))}/{_int(replicas)}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        since(meta_of(obj).get("creationTimestamp"), now),
        names,
        images,
        format_label_selector(spec.get("selector")).replace("<none>", ""),
    ]


def print_replicaset(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    names, images = _containers(spec.get("template"))
    return [
        meta_of(obj).get("name", ""),
        _int(spec.get("replicas", 1)),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        since(meta_of(obj).get("creationTimestamp"), now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_daemonset(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    template = _dict(spec.get("template"))
    names, images = _containers(template)
    return [
        meta_of(obj).get("name", ""),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        format_labels(_dict(template.get("spec")).get("nodeSelector")),
        since(meta_of(obj).get("creationTimestamp"), now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_pdb(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    return [
        meta_of(obj).get("name", ""),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        _int(_dict(obj.get("status")).get("disruptionsAllowed")),
        since(meta_of(obj).get("creationTimestamp"), now),
    ]


def print_lease(obj: JsonDict, now: float) -> list[Any]:
    return [
        meta_of(obj).get("name", ""),
        _dict(obj.get("spec")).get("holderIdentity") or "",
        since(meta_of(obj).get("creationTimestamp"), now),
    ]


def print_crd(obj: JsonDict, now: float) -> list[Any]:
    # apiextensions registers no printer for CRDs: the default Name / Created At columns.
    return [meta_of(obj).get("name", ""), meta_of(obj).get("creationTimestamp")]


def print_resourceslice(obj: JsonDict, now: float) -> list[Any]:
    spec = _dict(obj.get("spec"))
    return [
        meta_of(obj).get("name", ""),
        str(spec.get("nodeName") or ""),
        str(spec.get("driver") or ""),
        str(_dict(spec.get("pool")).get("name") or ""),
        since(meta_of(obj).get("creationTimestamp"), now),
    ]


def resource_claim_state(obj: JsonDict) -> str:
    """printers.go resourceClaimState: deleted, pending | allocated, reserved."""
    states = []
    deleting = bool(meta_of(obj).get("deletionTimestamp"))
    if deleting:
        states.append("deleted")
    status = _dict(obj.get("status"))
    if not status.get("allocation"):
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if _list(status.get("reservedFor")):
            states.append("reserved")
    return ",".join(states)


def print_resourceclaim(obj: JsonDict, now: float) -> list[Any]:
    return [
        meta_of(obj).get("name", ""),
        resource_claim_state(obj),
        since(meta_of(obj).get("creationTimestamp"), now),
    ]


def print_configmap(obj: JsonDict, now: float) -> list[Any]:
    """printConfigMap: the number of keys in `data` and `binaryData`."""
    keys = len(_dict(obj.get("data"))) + len(_dict(obj.get("binaryData")))
    return [meta_of(obj).get("name", ""), keys, since(meta_of(obj).get("creationTimestamp"), now)]


def print_name_age(obj: JsonDict, now: float) -> list[Any]:
    return [meta_of(obj).get("name", ""), since(meta_of(obj).get("creationTimestamp"), now)]
