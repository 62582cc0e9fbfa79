"""Facts of the field the rules share, each from domain.md (section in the comment).

Pure functions over models: no I/O, no clock (`now` is always passed in).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from mignurse.cluster.history import Lifecycle
from mignurse.model import Condition, Event, Node, NodeClaim

AHR = "AcceleratedHardwareReady"
NMA_CONDITIONS = ("KernelReady", "StorageReady", "NetworkingReady", "ContainerRuntimeReady")

# Karpenter repair policies (§1.2): condition type + status → toleration. v1.2.0 and later.
REPAIR_TOLERATIONS: dict[tuple[str, str], timedelta] = {
    ("Ready", "False"): timedelta(minutes=30),
    ("Ready", "Unknown"): timedelta(minutes=30),
    (AHR, "False"): timedelta(minutes=10),
    **{(c, "False"): timedelta(minutes=30) for c in NMA_CONDITIONS},
}
REPAIR_GUARD_FRACTION = 0.2  # §1.5

# AcceleratedHardwareReady reasons (§1.3): monitoring plumbing versus the GPU itself.
MONITORING_REASONS = ("DCGMError", "DCGMDiagnosticFailure", "DCGMHealthCode", "DCGMFieldError")
HARDWARE_REASONS = (
    "NvidiaDoubleBitError",
    "NvidiaNVLinkError",
    "NvidiaDeviceCountMismatch",
    "NvidiaPCIeError",
    "NvidiaPageRetirement",
    "NvidiaPowerError",
    "NvidiaThermalError",
)
XID_REPLACE = frozenset({74, 79, 119, 120, 121, 140})  # MNG default action Replace (§1.3)
XID_REBOOT = frozenset({13, 31, 48, 63, 64, 94, 95})  # MNG default action Reboot (§1.3)

# Karpenter event reasons that fingerprint a replacement's cause (§1.7).
CONSOLIDATION_EVENTS = ("DisruptionTerminating",)
INTERRUPTION_EVENTS = (
    "SpotInterrupted",
    "CapacityReservationInstanceInterrupted",
    "InstanceStopping",
    "InstanceTerminating",
    "InstanceUnhealthy",
    "TerminatingOnInterruption",
)
REGISTRATION_EVENTS = ("InsufficientCapacityError", "NodeClassNotReady", "UnregisteredTaintMissing")
REPAIR_BLOCKED_EVENT = "NodeRepairBlocked"
TRANSITION_PREFIX = "Status condition transitioned"  # Karpenter's per-transition events
REGISTRATION_TIMEOUT = timedelta(minutes=15)  # §1.6


def classify_ahr_reason(reason: str) -> str:
    """ "monitoring" (replacing the node will not help), "hardware" (replace it), or
    "unknown"."""
    if reason.startswith(MONITORING_REASONS):
        return "monitoring"
    if reason.startswith(HARDWARE_REASONS) or reason.startswith("Neuron"):
        return "hardware"
    if reason.startswith("NvidiaXID"):
        return "hardware"
    return "unknown"


def xid_of(reason: str) -> int | None:
    """NvidiaXID79Error → 79."""
    digits = reason.removeprefix("NvidiaXID").removesuffix("Error").removesuffix("Warning")
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True, slots=True)
class RepairClock:
    condition: Condition
    toleration: timedelta
    deadline: datetime


def repair_clock(node: Node) -> RepairClock | None:
    """The earliest Karpenter repair deadline among the node's matching conditions
    (§1.4: type + status only, clock = lastTransitionTime + toleration)."""
    best: RepairClock | None = None
    for cond in node.conditions:
        toleration = REPAIR_TOLERATIONS.get((cond.type, cond.status))
        if toleration is None or cond.last_transition is None:
            continue
        clock = RepairClock(cond, toleration, cond.last_transition + toleration)
        if best is None or clock.deadline < best.deadline:
            best = clock
    return best


def unhealthy_for_repair(node: Node) -> bool:
    """Matches a repair policy now (the 20% guard counts these without waiting, §1.5)."""
    return any((c.type, c.status) in REPAIR_TOLERATIONS for c in node.conditions)


def repair_allowance(pool_nodes: int) -> int:
    """How many unhealthy nodes Karpenter may repair in a pool of this size (§1.5)."""
    return math.ceil(REPAIR_GUARD_FRACTION * pool_nodes)


def claim_cause(
    claim: NodeClaim | Lifecycle, events: list[Event], expire_after: timedelta | None = None
) -> str:
    """Why a NodeClaim ended (§1.7, §1.9): repair, consolidation, drift, interruption,
    registration, expiration, manual or unknown. `events` are those about it or its Node."""
    # Karpenter's transition echoes carry the condition type as reason: "InstanceTerminating"
    # there is a NodeClaim every termination reaches, not an EC2 interruption (§1.2, §1.7).
    reasons = {e.reason for e in events if not e.message.startswith(TRANSITION_PREFIX)}
    if reasons & set(INTERRUPTION_EVENTS):
        return "interruption"
    disruption = (
        claim.disruption_reason
        if isinstance(claim, Lifecycle)
        else _condition_reason(claim, "DisruptionReason")
    )
    drifted = (
        claim.drifted
        if isinstance(claim, Lifecycle)
        else bool((c := claim.condition("Drifted")) and c.status == "True")
    )
    if disruption or reasons & set(CONSOLIDATION_EVENTS):
        return "drift" if drifted or (disruption and "Drift" in disruption) else "consolidation"
    deleting = claim.deleting_since if isinstance(claim, Lifecycle) else claim.deleting
    terminated = claim.termination_timestamp
    registered = (
        claim.node_name
        if isinstance(claim, Lifecycle)
        else claim.node_name or _condition_reason(claim, "Registered")
    )
    if not registered and (reasons & set(REGISTRATION_EVENTS) or deleting is not None):
        return "registration"
    # Repair writes the annotation as "now" and deletes at once (§1.4); a TGP deletion
    # writes deletion + TGP, minutes or hours later.
    if (
        deleting is not None
        and terminated is not None
        and abs((terminated - deleting).total_seconds()) <= 5
    ):
        return "repair"
    created = claim.created
    if expire_after and created and deleting and deleting - created >= expire_after:
        return "expiration"
    if deleting is not None:
        return "manual" if terminated is None or terminated > deleting else "unknown"
    return "unknown"


def _condition_reason(claim: NodeClaim, type_: str) -> str:
    """The reason of a True condition (or "True" when it gives none); "" otherwise."""
    cond = claim.condition(type_)
    if cond is None or cond.status != "True":
        return ""
    return cond.reason or cond.message or "True"


def parse_go_duration(value: str) -> timedelta | None:
    """ "720h", "10m30s", "Never" → timedelta or None (Never / unparsable)."""
    if not value or value == "Never":
        return None
    total = 0.0
    number = ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    for ch in value:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            return None
    return timedelta(seconds=total) if not number else None
