"""What every parsed object shares: the labels, annotations and resource names mignurse reads,
how the API's field values (times, quantities, provider ids, label maps) are parsed, and the
Condition and Taint that Nodes, NodeClaims and NodePools all carry. Parsing is defensive:
an odd value becomes an empty one, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Labels and annotations we read (docs/repair.md "Who repairs a node", docs/mig.md "Node labels").
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_NODEGROUP = "eks.amazonaws.com/nodegroup"
LABEL_MNG_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
LABEL_COMPUTE_TYPE = "eks.amazonaws.com/compute-type"
# EKS Auto Mode: its nodes carry eks.amazonaws.com/compute-type=auto (EKS user guide
# associate-workload.html, create-node-pool.html "EKS Auto Mode Supported Labels"), and its
# NodePools and NodeClaims refer to a NodeClass of group eks.amazonaws.com (create-node-pool.html;
# self-managed Karpenter's is karpenter.k8s.aws EC2NodeClass).
COMPUTE_TYPE_AUTO = "auto"
AUTO_MODE_NODECLASS_GROUP = "eks.amazonaws.com"
AUTO_MODE_NODECLASS_KIND = "NodeClass"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_GPU_COUNT_HINT = "karpenter.k8s.aws/instance-gpu-count"
LABEL_PCI_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_GPU_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
ANNOTATION_TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"

RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_MIG_PREFIX = "nvidia.com/mig-"

# NVIDIA EC2 instance families (g4ad is AMD, inf/trn are Neuron, so they are absent).
NVIDIA_INSTANCE_FAMILIES = frozenset(
    {
        "p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
        "p6e-gb200", "g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f",
        "g7e",
    }
)  # fmt: skip

EMPTY: Mapping[str, str] = {}


def node_class_group(template_spec: Any) -> str:
    """The API group of a NodePool template's or a NodeClaim's `nodeClassRef` ("" if none)."""
    ref = template_spec.get("nodeClassRef") if isinstance(template_spec, Mapping) else None
    group = ref.get("group") if isinstance(ref, Mapping) else None
    return group if isinstance(group, str) else ""


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 from the API ("2026-11-29T03:04:05Z", fractions allowed); None if absent or odd."""
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime | None) -> str | None:
    """The API's own form: second precision, UTC, trailing Z."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


def parse_count(value: Any) -> int:
    """An integer resource quantity ("8", "56"); 0 for anything that is not one."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return 0
    if value.isdigit():
        return int(value)
    match = _QUANTITY.match(value)
    if not match or match.group(2) not in _SUFFIX:
        return 0
    try:
        return int(float(match.group(1)) * _SUFFIX[match.group(2)])
    except ValueError:
        return 0


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0] if instance_type else ""


def instance_id_from_provider_id(provider_id: str) -> str:
    """aws:///us-west-2a/i-0abc… → i-0abc…; empty when it is not an EC2 provider id."""
    if not provider_id.startswith("aws://"):
        return ""
    last = provider_id.rsplit("/", 1)[-1]
    return last if last.startswith("i-") else ""


def gpu_resources(resources: Any) -> dict[str, int]:
    if not isinstance(resources, dict):
        return {}
    return {
        name: parse_count(value)
        for name, value in resources.items()
        if name == RESOURCE_GPU or name.startswith(RESOURCE_MIG_PREFIX)
    }


def str_map(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, dict) else EMPTY


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    last_transition: datetime | None = None
    last_heartbeat: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(raw.get("type") or ""),
            status=str(raw.get("status") or "Unknown"),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            last_transition=parse_time(raw.get("lastTransitionTime")),
            last_heartbeat=parse_time(raw.get("lastHeartbeatTime")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": format_time(self.last_transition),
        }


def find_condition(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of one type (the API keeps at most one of each)."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def parse_conditions(raw: Any) -> tuple[Condition, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(Condition.from_api(c) for c in raw if isinstance(c, dict))


@dataclass(slots=True)  # read-only by convention: see HOT_PATH_NOTE in model/__init__.py
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(
            str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or "")
        )

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"
