"""What the simulated Karpenter does differently at each release it can model.

Each trait is read from the tagged sources of aws/karpenter-provider-aws (KA) and the
kubernetes-sigs/karpenter (KC) release it pins; the tag where a behaviour changes is named
beside it. docs/scenarios.md has the same table for scenario authors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int, int]

OLDEST: Version = (1, 1, 0)  # NodeRepair first exists (KA v1.1.0 charts/karpenter/values.yaml)
NEWEST_MINOR = 14  # the newest tag read: KA v1.14.1

# (condition type, status) → toleration in seconds (KA pkg/cloudprovider/cloudprovider.go
# RepairPolicies): v1.1.x has Ready=False only, v1.2.0 adds Ready=Unknown and the NMA types.
REPAIR_POLICIES_V1_1: dict[tuple[str, str], float] = {("Ready", "False"): 1800.0}
REPAIR_POLICIES_V1_2: dict[tuple[str, str], float] = {
    ("Ready", "False"): 1800.0,
    ("Ready", "Unknown"): 1800.0,
    ("AcceleratedHardwareReady", "False"): 600.0,
    ("StorageReady", "False"): 1800.0,
    ("NetworkingReady", "False"): 1800.0,
    ("KernelReady", "False"): 1800.0,
    ("ContainerRuntimeReady", "False"): 1800.0,
}

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def parse_version(text: str) -> Version:
    """`1.4.0` or `v1.4.0` → (1, 4, 0); ValueError for anything the simulator cannot model."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"karpenter.version {text!r} is not a release like 1.4.0")
    version = (int(match[1]), int(match[2]), int(match[3]))
    if version < OLDEST or version[0] != 1 or version[1] > NEWEST_MINOR:
        raise ValueError(
            f"karpenter.version {text!r} is outside the releases read for the simulator "
            f"(1.1.0 to 1.{NEWEST_MINOR}.x)"
        )
    if version == (1, 8, 0):
        # KA v1.8.0 values.yaml spells the key `StaticCapacity` while deployment.yaml reads
        # `staticCapacity`, so the chart renders `StaticCapacity=`, which the gate parser rejects.
        raise ValueError(
            "karpenter.version 1.8.0: its chart renders FEATURE_GATES with an empty "
            "StaticCapacity= value that the controller cannot parse; model 1.8.1 instead"
        )
    return version


def chart_feature_gates(version: Version, node_repair: bool) -> str:
    """FEATURE_GATES as the chart of that release renders it with default values plus
    `settings.featureGates.nodeRepair` (KA charts/karpenter/templates/deployment.yaml and
    values.yaml at each tag)."""
    repair = "true" if node_repair else "false"
    if version < (1, 3, 0):
        return f"SpotToSpotConsolidation=false,NodeRepair={repair}"
    reserved = "true" if version >= (1, 6, 0) else "false"  # values.yaml default flips in v1.6.0
    gates = f"ReservedCapacity={reserved},SpotToSpotConsolidation=false,NodeRepair={repair}"
    if version >= (1, 7, 0):
        gates += ",NodeOverlay=false"
    if version >= (1, 8, 1):
        gates += ",StaticCapacity=false"
    if version >= (1, 14, 0):
        gates += ",CapacityBuffer=false"
    return gates


@dataclass(frozen=True)
class KarpenterTraits:
    """The version-dependent behaviour of one Karpenter release."""

    version: Version

    @classmethod
    def of(cls, text: str) -> KarpenterTraits:
        return cls(parse_version(text))

    @property
    def label(self) -> str:
        return "v{}.{}.{}".format(*self.version)

    @property
    def repair_policies(self) -> dict[tuple[str, str], float]:
        return REPAIR_POLICIES_V1_2 if self.version >= (1, 2, 0) else REPAIR_POLICIES_V1_1

    @property
    def guard_before_toleration(self) -> bool:
        """KC pkg/controllers/node/health/controller.go: through v1.5.x the NodePool health
        check runs first, so any reconcile of a Node in a pool over the guard publishes
        NodeRepairBlocked; from v1.6.0 only nodes past their toleration get that far."""
        return self.version < (1, 6, 0)

    @property
    def blocked_requeue(self) -> float | None:
        """From KC v1.7.0 a blocked repair requeues after 5 minutes; before, never."""
        return 300.0 if self.version >= (1, 7, 0) else None

    @property
    def reconciles_on_every_node_update(self) -> bool:
        """Before KC v1.7.0 node.health had no update predicate: any Node write reconciles it;
        from v1.7.0 only a change of a condition's status or lastTransitionTime does."""
        return self.version < (1, 7, 0)

    @property
    def nodepool_blocked_message(self) -> str:
        word = "then" if self.version < (1, 3, 0) else "than"  # typo fixed in KC v1.3.0
        return f"more {word} 20% nodes are unhealthy in the nodepool"

    @property
    def drain_conditions(self) -> bool:
        """NodeClaim Drained and VolumesDetached exist from KC v1.6.0 (nodeclaim_status.go)."""
        return self.version >= (1, 6, 0)

    @property
    def disruption_reason(self) -> bool:
        """NodeClaim DisruptionReason exists from KC v1.2.0 (nodeclaim_status.go)."""
        return self.version >= (1, 2, 0)

    @property
    def disruption_reason_in_message(self) -> bool:
        """KC v1.2.0-v1.3.0 set DisruptionReason with reason "DisruptionReason" and the
        disruption reason as its message; v1.3.1 puts the reason in both (controller.go)."""
        return (1, 2, 0) <= self.version < (1, 3, 1)

    @property
    def evicted_names_reason(self) -> bool:
        """Pod `Evicted` says "Evicted pod" in KC v1.1.x, "Evicted pod: <reason>" from v1.2.0
        (node/termination/terminator/events/events.go)."""
        return self.version >= (1, 2, 0)

    @property
    def disrupted_prints_pointer(self) -> bool:
        """Through KC v1.4.x `Disrupted` formats the pod's terminationGracePeriodSeconds
        pointer with %v (an address); v1.5.0 prints the value (lo.FromPtr)."""
        return self.version < (1, 5, 0)

    @property
    def ignores_dra_requests(self) -> bool:
        """From KC v1.7.0 `IGNORE_DRA_REQUESTS` (default true) makes a pod with ResourceClaims
        unschedulable for Karpenter ("pod has Dynamic Resource Allocation requirements that
        are not yet supported by Karpenter", pkg/operator/options/options.go,
        provisioning/scheduling/scheduler.go); before, claims are not looked at at all."""
        return self.version >= (1, 7, 0)

    @property
    def disruption_blocked_on_deleting(self) -> bool:
        """ "Node is deleting or marked for deletion" exists from KC v1.2.0 (state/statenode.go)."""
        return self.version >= (1, 2, 0)
