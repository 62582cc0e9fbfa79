"""What every parsed object shares: the labels, annotations and resource names mignurse reads,
how the API's field values (times, quantities, provider ids, label maps) are parsed, and the
Condition and Taint that Nodes, NodeClaims and NodePools all carry. Parsing is defensive:
an odd value becomes an empty one, never an exception.
"""

from __future__ import annotations

import re
import sys
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
EMPTY_COUNTS: Mapping[str, int] = {}  # shared, like EMPTY: models are never mutated

# A list of a million events or a quarter million nodes repeats the same few strings (the
# namespace, the reason, the reporting component, every label key and most label values,
# the condition wording) and the same few thousand timestamps: each kept once, the
# objects are half the size. Interned strings are freed with the last object that holds
# them; the timestamp cache is bounded and dropped whole when full.
_TIMES_KEPT = 16_384
_times: dict[str, datetime | None] = {}
# Strings that repeat nearby but are mostly unique over a whole list (an event's object,
# listed beside that object's other events; its wording): a bounded cache, as interning
# each would cost an entry in the interpreter's table for every one.
_NEARBY_KEPT = 4_096
_NEARBY_LONGEST = 1_024
_nearby: dict[str, str] = {}
_TIME_LONGEST = 64  # RFC 3339 with nanoseconds and an offset is 35 characters


_intern = sys.intern


def shared(value: Any) -> str:
    """`value` as text, one copy per distinct string (for the strings many objects repeat)."""
    return _intern(value) if type(value) is str else _intern(str(value))


def shared_texts(*values: Any) -> tuple[str, ...]:
    """Each value as text ("" when empty or null), one copy per distinct string: one call
    for all of an object's repeated fields, at the speed of `map`."""
    try:
        return tuple(map(_intern, values))
    except TypeError:  # one that is not text (or is null): each one alone
        return tuple(
            _intern(value if type(value) is str else str(value)) if value else ""
            for value in values
        )


def shared_nearby(value: Any) -> str:
    """A field's text ("" when it is absent, empty or null), one copy among the strings
    seen lately: for values that repeat in runs but are mostly unique."""
    if not value:
        return ""
    text = value if type(value) is str else str(value)
    if len(text) > _NEARBY_LONGEST:  # kept past the list, a cache of long ones would weigh
        return text
    found = _nearby.get(text)
    if found is not None:
        return found
    if len(_nearby) >= _NEARBY_KEPT:
        _nearby.clear()
    _nearby[text] = text
    return text


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
        return _times[value]
    except KeyError:
        pass
    try:
        parsed: datetime | None = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if len(value) <= _TIME_LONGEST:
        if len(_times) >= _TIMES_KEPT:
            _times.clear()
        _times[value] = parsed
    return parsed


def format_time(value: datetime | None) -> str | None:
    """The API's own form: second precision, UTC, trailing Z. Kept for each moment, as
    `parse_time` keeps each string's: a node's conditions and events share few moments,
    and formatting one is 50 times a lookup (`nodes -o json` formats every condition's)."""
    if value is None:
        return None
    try:
        return _formatted[value]
    except KeyError:
        pass
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if len(_formatted) >= _TIMES_KEPT:
        _formatted.clear()
    _formatted[value] = text
    return text


_formatted: dict[datetime, str] = {}


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
    """A label or annotation map, its values kept once each (keys are shared already: the
    JSON parser keeps one copy of each short key). Not a dict: the empty map."""
    if not isinstance(value, dict):
        return EMPTY
    if not value:
        return EMPTY
    try:
        return dict(zip(value, map(_intern, value.values()), strict=True))
    except TypeError:  # a value that is not a string: kept as the server sent it
        return value


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
        type_, status, reason, message = shared_texts(
            raw.get("type") or "",
            raw.get("status") or "Unknown",
            raw.get("reason") or "",
            raw.get("message") or "",
        )
        return cls(
            type=type_,
            status=status,
            reason=reason,
            message=message,
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
        key, value, effect = shared_texts(
            raw.get("key") or "", raw.get("value") or "", raw.get("effect") or ""
        )
        return cls(key, value, effect)

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


def parse_version(text: str) -> tuple[int, ...] | None:
    """ "1.4.0", "v1.14.1", "1.4.0-rc.1" → (1, 4, 0); None when it is not a version."""
    core = text.strip().removeprefix("v").split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)
