"""DaemonSets as the pre-flight findings read them: where each one schedules, what it runs.

The node monitoring agent, its DCGM server, mig-manager and the DRA kubelet plugin are all
DaemonSets; whether one runs on a node follows from its pod template (nodeSelector, the
required node affinity, tolerations against the node's taints), as the DaemonSet controller
decides it (kubernetes v1.32 pkg/controller/daemon/daemon_controller.go
`NodeShouldRunDaemonPod`, which checks the node affinity and `node.spec.taints` against the
pod's tolerations plus the ones `pkg/controller/daemon/util/daemonset_util.go`
`AddOrUpdateDaemonPodTolerations` adds to every daemon pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mignurse.model import Node

# The tolerations the DaemonSet controller gives every daemon pod (daemonset_util.go
# AddOrUpdateDaemonPodTolerations): (key, effect); network-unavailable only with hostNetwork.
DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", "NoSchedule")
# Taints a node carries only for a while (registration, disruption, cloud initialisation,
# scale-down): where a DaemonSet runs is judged as the node settles, without them
# (kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/taints.go UnregisteredNoExecuteTaint,
# DisruptedNoScheduleTaint; k8s.io/cloud-provider api/well_known_taints.go
# TaintExternalCloudProvider; kubernetes/autoscaler cluster-autoscaler/utils/taints).
TRANSIENT_TAINTS = frozenset(
    {
        "karpenter.sh/unregistered",
        "karpenter.sh/disrupted",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
    }
)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` (or `matchFields`) entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False  # matchFields: the key is `metadata.name`

    def text(self) -> str:
        values = f" [{', '.join(self.values)}]" if self.values else ""
        return f"{self.key} {self.operator}{values}"

    def matches(self, node: Node) -> bool:
        if self.field:
            value: str | None = node.name if self.key == "metadata.name" else None
        else:
            value = node.labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False  # an unknown operator selects nothing, as the API server rejects it


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """core/v1 Toleration.ToleratesTaint (k8s.io/api core/v1 toleration.go)."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.key != "" and self.value == value  # Equal with an empty key: invalid


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    env: Mapping[str, str] = field(default_factory=dict)  # plain values only
    args: tuple[str, ...] = ()

    @property
    def tag(self) -> str:
        """The image tag without a digest ("" when the image names none)."""
        image = self.image.split("@", 1)[0]
        name, _, tag = image.rpartition(":")
        return tag if name and "/" not in tag else ""


@dataclass(frozen=True)
class DaemonSetInfo:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # required node affinity: terms ORed, requirements within a term ANDed; None = none
    affinity: tuple[tuple[Requirement, ...], ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    host_network: bool = False
    containers: tuple[Container, ...] = ()
    desired: int = 0
    ready: int = 0

    @property
    def ref(self) -> str:
        return f"DaemonSet {self.namespace}/{self.name}"

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> DaemonSetInfo:
        meta = _map(raw.get("metadata"))
        spec = _map(raw.get("spec"))
        template = _map(spec.get("template"))
        pod = _map(template.get("spec"))
        status = _map(raw.get("status"))
        containers = tuple(
            _container(c)
            for c in (*_list(pod.get("initContainers")), *_list(pod.get("containers")))
            if isinstance(c, Mapping)
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels=_strings(meta.get("labels")),
            pod_labels=_strings(_map(template.get("metadata")).get("labels")),
            node_selector=_strings(pod.get("nodeSelector")),
            affinity=_required_affinity(pod.get("affinity")),
            tolerations=tuple(
                Toleration(
                    key=str(t.get("key") or ""),
                    operator=str(t.get("operator") or "Equal"),
                    value=str(t.get("value") or ""),
                    effect=str(t.get("effect") or ""),
                )
                for t in _list(pod.get("tolerations"))
                if isinstance(t, Mapping)
            ),
            host_network=pod.get("hostNetwork") is True,
            containers=containers,
            desired=_int(status.get("desiredNumberScheduled")),
            ready=_int(status.get("numberReady")),
        )

    def refusal(self, node: Node) -> str:
        """Why the DaemonSet controller would not run a pod on `node`; "" when it would."""
        for key, value in self.node_selector.items():
            if node.labels.get(key) != value:
                have = node.labels.get(key)
                return f"nodeSelector {key}={value} (node: {have if have is not None else 'unset'})"
        if self.affinity is not None:
            failed: list[Requirement] = []
            for term in self.affinity:
                misses = [r for r in term if not r.matches(node)]
                if not misses:
                    break
                failed.append(misses[0])
            else:
                first = failed[0] if failed else None
                if first is None:
                    return "required node affinity has no terms"
                have = node.name if first.field else node.labels.get(first.key)
                return (
                    f"required node affinity {first.text()} "
                    f"(node: {have if have is not None else 'unset'})"
                )
        extra = DAEMON_TOLERATIONS + ((HOST_NETWORK_TOLERATION,) if self.host_network else ())
        for taint in node.taints:
            if taint.effect not in ("NoSchedule", "NoExecute"):
                continue
            if (taint.key, taint.effect) in extra or taint.key in TRANSIENT_TAINTS:
                continue
            if any(t.tolerates(taint.key, taint.value, taint.effect) for t in self.tolerations):
                continue
            shown = f"{taint.key}={taint.value}" if taint.value else taint.key
            return f"taint {shown}:{taint.effect} not tolerated"
        return ""

    def runs_on(self, node: Node) -> bool:
        return not self.refusal(node)

    def env(self, name: str) -> str | None:
        """A plain env value of any container (the last one that sets it), else None."""
        found = None
        for container in self.containers:
            if name in container.env:
                found = container.env[name]
        return found

    def flag(self, name: str) -> str | None:
        """`--name=value` from any container's args, else None."""
        found = None
        for container in self.containers:
            for arg in container.args:
                if arg.startswith(f"--{name}="):
                    found = arg.split("=", 1)[1]
        return found

    def images(self) -> tuple[str, ...]:
        return tuple(c.image for c in self.containers)

    def selected_by(self, selector: str) -> bool:
        """Whether a `key=value` label selector picks this DaemonSet's pods."""
        key, _, value = selector.partition("=")
        return self.pod_labels.get(key) == value


def _container(raw: Mapping[str, Any]) -> Container:
    env = {
        str(e.get("name")): str(e.get("value") or "")
        for e in _list(raw.get("env"))
        if isinstance(e, Mapping) and e.get("name") and "valueFrom" not in e
    }
    args = tuple(
        str(a) for a in (*_list(raw.get("command")), *_list(raw.get("args"))) if a is not None
    )
    return Container(
        name=str(raw.get("name") or ""), image=str(raw.get("image") or ""), env=env, args=args
    )


def _required_affinity(raw: Any) -> tuple[tuple[Requirement, ...], ...] | None:
    node_affinity = _map(_map(raw).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return None
    terms: list[tuple[Requirement, ...]] = []
    for term in _list(required.get("nodeSelectorTerms")):
        if not isinstance(term, Mapping):
            continue
        requirements = [
            Requirement(
                key=str(e.get("key") or ""),
                operator=str(e.get("operator") or ""),
                values=tuple(str(v) for v in _list(e.get("values"))),
                field=is_field,
            )
            for is_field, name in ((False, "matchExpressions"), (True, "matchFields"))
            for e in _list(term.get(name))
            if isinstance(e, Mapping)
        ]
        # An empty term selects nothing (core/v1 NodeSelectorTerm: "null or empty ... matches
        # no objects"); kept as an impossible requirement so the reason says so.
        terms.append(tuple(requirements) or (Requirement("(empty term)", "selects-nothing"),))
    return tuple(terms)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items() if v is not None}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
