"""Facts of the field the rules share, each with its source (docs/repair.md has them in full).

Pure functions over models: no I/O, no clock (`now` is always passed in).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from mignurse.cluster.history import Lifecycle
from mignurse.diagnose.agent_reasons import APPLICATION, GPU, PLUMBING, SERVICE, agent_reason
from mignurse.model import Condition, Event, Node, NodeClaim

AHR = "AcceleratedHardwareReady"
NMA_CONDITIONS = ("KernelReady", "StorageReady", "NetworkingReady", "ContainerRuntimeReady")

# Karpenter repair policies: condition type + status → toleration, per release of the AWS
# provider (aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go `RepairPolicies`):
# v1.1.x repairs Ready=False only; v1.2.0 added Ready=Unknown and the node monitoring agent's
# conditions. Node repair itself arrived in v1.1.0 (kubernetes-sigs/karpenter
# pkg/controllers/controllers.go registers `node.health` only with the NodeRepair gate).
REPAIR_TOLERATIONS: dict[tuple[str, str], timedelta] = {
    ("Ready", "False"): timedelta(minutes=30),
    ("Ready", "Unknown"): timedelta(minutes=30),
    (AHR, "False"): timedelta(minutes=10),
    **{(c, "False"): timedelta(minutes=30) for c in NMA_CONDITIONS},
}
REPAIR_TOLERATIONS_V1_1: dict[tuple[str, str], timedelta] = {
    ("Ready", "False"): timedelta(minutes=30),
}


def repair_tolerations(version: tuple[int, ...] | None) -> Mapping[tuple[str, str], timedelta]:
    """The repair policies of a Karpenter release; the newest when the release is unknown
    (a digest-only image, a fork), which is also what v1.2 and later ship."""
    if version is None or version >= (1, 2):
        return REPAIR_TOLERATIONS
    if version >= (1, 1):
        return REPAIR_TOLERATIONS_V1_1
    return {}


REPAIR_GUARD_FRACTION = 0.2  # kubernetes-sigs/karpenter node/health allowedUnhealthyPercent

XID_REPLACE = frozenset({74, 79, 119, 120, 121, 140})  # MNG default Replace (EKS node-health)
XID_REBOOT = frozenset({13, 31, 48, 63, 64, 94, 95})  # MNG default Reboot (EKS node-health)

# What an Xid says about the GPU, from NVIDIA's Xid catalog ("Resolution Bucket (Immediate
# Action)", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and the row
# remapper's RMA policy (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): its class (what a
# tenant of an EC2 instance can do), what it means, and NVIDIA's immediate action.
XID_CLASS_REPLACE = "replace"  # the instance cannot recover it: replace the instance
XID_CLASS_RESET = "reset"  # a GPU reset (on EKS: a reboot) clears it; replace if it recurs
XID_CLASS_APPLICATION = "application"  # usually the application's own fault


@dataclass(frozen=True, slots=True)
class XidMeaning:
    kind: str  # XID_CLASS_*
    what: str
    nvidia: str  # the catalog's immediate action, in short


XID_MEANINGS: dict[int, XidMeaning] = {
    13: XidMeaning(XID_CLASS_APPLICATION, "graphics engine exception", "RESTART_APP"),
    31: XidMeaning(XID_CLASS_APPLICATION, "GPU memory page fault", "RESTART_APP"),
    43: XidMeaning(XID_CLASS_APPLICATION, "application fault, GPU healthy", "IGNORE"),
    45: XidMeaning(XID_CLASS_APPLICATION, "preemptive cleanup", "follow the other Xid"),
    46: XidMeaning(XID_CLASS_RESET, "GPU stopped processing", "RESET_GPU"),
    48: XidMeaning(XID_CLASS_RESET, "double-bit ECC error", "reset; RMA past the SRAM threshold"),
    54: XidMeaning(XID_CLASS_REPLACE, "auxiliary power not connected", "CHECK_MECHANICALS"),
    62: XidMeaning(XID_CLASS_RESET, "internal micro-controller halt", "RESET_GPU"),
    63: XidMeaning(XID_CLASS_RESET, "row remapping recorded", "applied at the next GPU reset"),
    64: XidMeaning(XID_CLASS_REPLACE, "memory remapping or retirement failure", "RMA criterion"),
    74: XidMeaning(XID_CLASS_RESET, "NVLink error", "reset or reboot; hardware if it recurs"),
    79: XidMeaning(XID_CLASS_REPLACE, "GPU has fallen off the bus", "RESTART_BM: power cycle"),
    92: XidMeaning(XID_CLASS_RESET, "high single-bit ECC error rate", "CONTACT_SUPPORT"),
    94: XidMeaning(XID_CLASS_RESET, "contained memory error", "restart the app, reset soon"),
    95: XidMeaning(XID_CLASS_RESET, "uncontained memory error", "RESET_GPU"),
    109: XidMeaning(XID_CLASS_RESET, "context switch timeout", "RESET_GPU"),
    110: XidMeaning(XID_CLASS_RESET, "security fault", "RESET_GPU, cold reset"),
    119: XidMeaning(XID_CLASS_RESET, "GSP RPC timeout", "RESET_GPU; power cycle if it persists"),
    120: XidMeaning(XID_CLASS_RESET, "GSP error", "RESET_GPU; power cycle if it persists"),
    121: XidMeaning(XID_CLASS_RESET, "corrected C2C link errors", "reset at a service window"),
    136: XidMeaning(XID_CLASS_RESET, "link training failed", "RESET_GPU"),
    140: XidMeaning(XID_CLASS_RESET, "unrecovered ECC error", "RESET_GPU"),
    142: XidMeaning(XID_CLASS_REPLACE, "NVENC3 error", "CONTACT_SUPPORT"),
    143: XidMeaning(XID_CLASS_RESET, "GPU initialization error", "RESET_GPU"),
    151: XidMeaning(XID_CLASS_RESET, "key rotation error", "RESTART_VM"),
    154: XidMeaning(XID_CLASS_RESET, "GPU recovery action changed", "the action it names"),
    155: XidMeaning(XID_CLASS_RESET, "NVLink SW defined error", "RESET_GPU"),
    156: XidMeaning(XID_CLASS_RESET, "resource retirement event", "RESET_GPU"),
    157: XidMeaning(XID_CLASS_REPLACE, "resource retirement failure", "no repair resources left"),
    158: XidMeaning(XID_CLASS_RESET, "GPU fatal timeout", "RESET_GPU"),
}
# The Xids the node monitoring agent turns into AcceleratedHardwareReady=False (Fatal);
# any other Xid is a Warning event (aws/eks-node-monitoring-agent monitors/nvidia/dcgm/
# dcgm_policies.go WellKnownXidCodes): v1.6.0-v1.6.3 still listed 13 and 31.
NMA_CONDITION_XIDS = frozenset(
    {46, 48, 54, 62, 63, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 142, 143, 151, 155, 156, 158}
)
NMA_CONDITION_XIDS_BEFORE_1_6_4 = frozenset(
    {13, 31, 48, 63, 64, 74, 79, 94, 95, 119, 120, 121, 140}
)


def classify_xid(xid: int) -> XidMeaning | None:
    """What the catalog says of an Xid this table tells apart; None for the others."""
    return XID_MEANINGS.get(xid)


# Karpenter event reasons that fingerprint a replacement's cause (docs/repair.md).
CONSOLIDATION_EVENTS = ("DisruptionTerminating",)
# aws/karpenter-provider-aws pkg/controllers/interruption (controller.go, events/events.go):
# EC2 notices that exist only when EC2 itself acts on the instance...
INTERRUPTION_WARNINGS = (
    "SpotInterrupted",
    "CapacityReservationInstanceInterrupted",
    "InstanceUnhealthy",
)
# ...EC2 state changes, published for every instance that stops or shuts down, including the
# ones Karpenter terminated itself (repair, consolidation, drift, expiry, manual delete)...
STATE_CHANGE_EVENTS = ("InstanceStopping", "InstanceTerminating")
# ...and the one event published only when the interruption controller deleted the NodeClaim
# itself: `deleteNodeClaim` returns early, without it, for a NodeClaim already deleting.
TERMINATING_ON_INTERRUPTION = "TerminatingOnInterruption"
INTERRUPTION_EVENTS = (*INTERRUPTION_WARNINGS, *STATE_CHANGE_EVENTS, TERMINATING_ON_INTERRUPTION)
# The interruption controller publishes its notice and deletes in one reconcile: an EC2
# notice that caused the deletion carries (nearly) the deletion's own timestamp.
SAME_RECONCILE = timedelta(seconds=5)
REGISTRATION_EVENTS = ("InsufficientCapacityError", "NodeClassNotReady", "UnregisteredTaintMissing")
# The cloud node lifecycle controller deletes a NotReady Node whose instance no longer exists,
# saying so on the Node (kubernetes/cloud-provider v0.32.13 controllers/nodelifecycle
# `MonitorNodes`: "Deleting node N because it does not exist in the cloud provider"), and
# Karpenter deletes the NodeClaim of a deleting Node in its next reconcile
# (kubernetes-sigs/karpenter v1.9.0 pkg/controllers/node/termination/controller.go `finalize`):
# the instance went first, outside Karpenter (a spot reclaim no interruption queue reported, a
# termination by hand or by a script). The same event also follows Karpenter's own terminations,
# a minute or more after the NodeClaim's deletion (the Node stays NotReady until the instance
# is gone): only one at most GONE_AFTER before the deletion, and not long before it (a Node name
# is its IP's, and comes back with another instance), names the cause.
INSTANCE_GONE_EVENT = "DeletingNode"
GONE_AFTER = timedelta(seconds=30)
GONE_BEFORE = timedelta(minutes=5)
REPAIR_BLOCKED_EVENT = "NodeRepairBlocked"
TRANSITION_PREFIX = "Status condition transitioned"  # Karpenter's per-transition events


def classify_ahr_reason(reason: str) -> str:
    """An AcceleratedHardwareReady reason as the agent defines it (mignurse.diagnose.
    agent_reasons): "monitoring" (DCGMError only: replacing the node will not help),
    "hardware" (the GPU or Neuron device), "service" (a service the GPUs need),
    "application", or "unknown" (not a reason the agent defines under that condition)."""
    entry = agent_reason(reason)
    if entry is None or entry.condition != AHR:
        return "unknown"
    return _AHR_CLASSES[entry.kind]


_AHR_CLASSES = {
    PLUMBING: "monitoring",
    GPU: "hardware",
    SERVICE: "service",
    APPLICATION: "application",
}
_XID_REASON = re.compile(r"NvidiaXID([0-9]{1,20})(?:Error|Warning)")


def xid_of(reason: str) -> int | None:
    """NvidiaXID79Error → 79; None for anything the agent would not have written."""
    match = _XID_REASON.fullmatch(reason)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class RepairClock:
    condition: Condition
    toleration: timedelta
    deadline: datetime


def repair_clock(
    node: Node, tolerations: Mapping[tuple[str, str], timedelta] = REPAIR_TOLERATIONS
) -> RepairClock | None:
    """The earliest Karpenter repair deadline among the node's matching conditions
    (type + status only, clock = lastTransitionTime + toleration: docs/repair.md)."""
    best: RepairClock | None = None
    for cond in node.conditions:
        toleration = tolerations.get((cond.type, cond.status))
        if toleration is None or cond.last_transition is None:
            continue
        clock = RepairClock(cond, toleration, cond.last_transition + toleration)
        if best is None or clock.deadline < best.deadline:
            best = clock
    return best


def unhealthy_for_repair(
    node: Node, tolerations: Mapping[tuple[str, str], timedelta] = REPAIR_TOLERATIONS
) -> bool:
    """Matches a repair policy now (the 20% guard counts these without waiting)."""
    return any((c.type, c.status) in tolerations for c in node.conditions)


def repair_allowance(pool_nodes: int) -> int:
    """How many unhealthy nodes Karpenter may repair in a pool of this size (docs/repair.md)."""
    return math.ceil(REPAIR_GUARD_FRACTION * pool_nodes)


def split_interruption_events(
    events: Iterable[Event], deletion: datetime | None
) -> tuple[list[Event], list[Event]]:
    """The interruption-controller events about one NodeClaim (or its Node), as (causes,
    echoes). `TerminatingOnInterruption` is always a cause; an EC2 notice or state change is
    one only when it came no later than the deletion (same reconcile); after it, it is the
    interruption queue's echo of a termination something else started (aws/karpenter-provider-aws
    pkg/controllers/interruption/controller.go). With the
    deletion time unknown, only the EC2-only notices count as causes."""
    causes: list[Event] = []
    echoes: list[Event] = []
    for event in events:
        if event.reason not in INTERRUPTION_EVENTS or event.message.startswith(TRANSITION_PREFIX):
            continue
        seen = event.first_seen or event.last_seen
        if event.reason == TERMINATING_ON_INTERRUPTION:
            causes.append(event)
        elif deletion is not None and seen is not None:
            (causes if seen <= deletion + SAME_RECONCILE else echoes).append(event)
        elif event.reason in INTERRUPTION_WARNINGS:
            causes.append(event)
        else:
            echoes.append(event)
    return causes, echoes


def claim_cause(
    claim: NodeClaim | Lifecycle, events: list[Event], expire_after: timedelta | None = None
) -> str:
    """Why a NodeClaim ended (docs/repair.md): repair, consolidation, drift, interruption,
    registration, instance-gone, expiration, manual or unknown. `events` are those about it or
    its Node.

    The cause is what came first: the interruption queue echoes `InstanceTerminating` for
    every instance that shuts down, Karpenter's own terminations included, so such events
    after the deletion never name the cause."""
    deleting = claim.deleting_since if isinstance(claim, Lifecycle) else claim.deleting
    events = [e for e in events if not e.message.startswith(TRANSITION_PREFIX)]
    reasons = {e.reason for e in events}
    interrupted, _echoes = split_interruption_events(events, deleting)
    if any(e.reason == TERMINATING_ON_INTERRUPTION for e in interrupted):
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
    terminated = claim.termination_timestamp
    registered = (
        claim.node_name
        if isinstance(claim, Lifecycle)
        else claim.node_name or _condition_reason(claim, "Registered")
    )
    if not registered and (reasons & set(REGISTRATION_EVENTS) or deleting is not None):
        return "registration"
    # Repair writes the annotation as "now" and deletes at once (docs/repair.md); a TGP deletion
    # writes deletion + TGP, minutes or hours later.
    if (
        deleting is not None
        and terminated is not None
        and abs((terminated - deleting).total_seconds()) <= 5
    ):
        return "repair"
    if interrupted:
        return "interruption"  # an EC2 notice at the deletion, its TerminatingOnInterruption lost
    # (a record that saw it gone, not deleting, has only when it was seen gone)
    gone_by = deleting or (claim.ended if isinstance(claim, Lifecycle) else None)
    if instance_gone_before(events, gone_by):
        return "instance-gone"
    created = claim.created
    if expire_after and created and deleting and deleting - created >= expire_after:
        return "expiration"
    if deleting is not None:
        return "manual" if terminated is None or terminated > deleting else "unknown"
    return "unknown"


def instance_gone_before(events: Iterable[Event], deletion: datetime | None) -> bool:
    """Whether the cloud node lifecycle controller found the instance gone just before
    `deletion` (INSTANCE_GONE_EVENT)."""
    if deletion is None:
        return False
    for event in events:
        seen = event.first_seen or event.last_seen
        if (
            event.reason == INSTANCE_GONE_EVENT
            and seen is not None
            and deletion - GONE_BEFORE <= seen <= deletion + GONE_AFTER
        ):
            return True
    return False


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
