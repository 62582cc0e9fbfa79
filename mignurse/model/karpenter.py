"""Karpenter's objects (karpenter.sh/v1): NodeClaim, the capacity Karpenter launched or is
launching for a node, and NodePool, the template and disruption settings it launches from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mignurse.model.fields import (
    ANNOTATION_TERMINATION_TIMESTAMP,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    NVIDIA_INSTANCE_FAMILIES,
    RESOURCE_GPU,
    Condition,
    Taint,
    find_condition,
    gpu_resources,
    instance_family,
    instance_id_from_provider_id,
    node_class_group,
    parse_conditions,
    parse_count,
    parse_time,
    str_map,
)


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
class NodeClaim:
    name: str
    uid: str = ""
    resource_version: str = ""
    pool: str = ""
    node_name: str = ""
    provider_id: str = ""
    instance_id: str = ""
    image_id: str = ""
    instance_type: str = ""
    capacity_type: str = ""
    zone: str = ""
    created: datetime | None = None
    deleting: datetime | None = None
    termination_timestamp: datetime | None = None
    conditions: tuple[Condition, ...] = ()
    requested_gpus: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_class_group: str = ""  # spec.nodeClassRef.group: eks.amazonaws.com on Auto Mode

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeClaim:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        labels = str_map(meta.get("labels"))
        annotations = str_map(meta.get("annotations"))
        provider_id = str(status.get("providerID") or "")
        requests = (spec.get("resources") or {}).get("requests")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            pool=labels.get(LABEL_NODEPOOL, ""),
            node_name=str(status.get("nodeName") or ""),
            provider_id=provider_id,
            instance_id=instance_id_from_provider_id(provider_id),
            image_id=str(status.get("imageID") or ""),
            instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            zone=labels.get(LABEL_ZONE, ""),
            created=parse_time(meta.get("creationTimestamp")),
            deleting=parse_time(meta.get("deletionTimestamp")),
            termination_timestamp=parse_time(annotations.get(ANNOTATION_TERMINATION_TIMESTAMP)),
            conditions=parse_conditions(status.get("conditions")),
            requested_gpus=gpu_resources(requests),
            labels=labels,
            node_class_group=node_class_group(spec),
        )

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    @property
    def launching(self) -> bool:
        """Capacity still on its way: no Node has registered for it yet."""
        return not self.node_name and self.deleting is None

    @property
    def requests_gpu(self) -> bool:
        return any(count > 0 for count in self.requested_gpus.values())


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    uid: str = ""
    created: datetime | None = None
    node_class: str = ""
    node_class_group: str = ""  # eks.amazonaws.com on Auto Mode
    taints: tuple[Taint, ...] = ()
    requirements: tuple[Mapping[str, Any], ...] = ()
    expire_after: str = ""
    termination_grace_period: str = ""
    consolidation_policy: str = ""
    consolidate_after: str = ""
    budgets: tuple[Mapping[str, Any], ...] = ()
    node_count: int = 0
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodePool:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        disruption = spec.get("disruption") or {}
        status = raw.get("status") or {}
        resources = status.get("resources") or {}
        taints = template_spec.get("taints")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            node_class=str((template_spec.get("nodeClassRef") or {}).get("name") or ""),
            node_class_group=node_class_group(template_spec),
            taints=tuple(Taint.from_api(t) for t in taints if isinstance(t, dict))
            if isinstance(taints, list)
            else (),
            requirements=tuple(
                r for r in template_spec.get("requirements") or () if isinstance(r, dict)
            ),
            expire_after=str(template_spec.get("expireAfter") or ""),
            termination_grace_period=str(template_spec.get("terminationGracePeriod") or ""),
            consolidation_policy=str(disruption.get("consolidationPolicy") or ""),
            consolidate_after=str(disruption.get("consolidateAfter") or ""),
            budgets=tuple(b for b in disruption.get("budgets") or () if isinstance(b, dict)),
            node_count=parse_count(resources.get("nodes")),
            conditions=parse_conditions(status.get("conditions")),
        )

    @property
    def requests_gpu(self) -> bool:
        """Whether the pool's requirements or taints point at NVIDIA GPU capacity."""
        for req in self.requirements:
            key = str(req.get("key") or "")
            values = [str(v) for v in req.get("values") or ()]
            if key == "karpenter.k8s.aws/instance-gpu-manufacturer" and "nvidia" in values:
                return True
            if key == "karpenter.k8s.aws/instance-family" and any(
                v in NVIDIA_INSTANCE_FAMILIES for v in values
            ):
                return True
            if key == LABEL_INSTANCE_TYPE and any(
                instance_family(v) in NVIDIA_INSTANCE_FAMILIES for v in values
            ):
                return True
            if key == "karpenter.k8s.aws/instance-gpu-count" and req.get("operator") == "Gt":
                return True
        return any(t.key == RESOURCE_GPU for t in self.taints)
