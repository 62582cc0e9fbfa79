"""Findings: what a rule concludes, with the evidence it rests on.

The JSON form is an interface users script against (`mignurse diagnose -o json`):
finding ids and field names are never renamed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from mignurse.model import format_time

if TYPE_CHECKING:
    from mignurse.diagnose.inputs import DiagnosisInput

CRITICAL = "critical"
WARNING = "warning"
INFO = "info"
SEVERITY_ORDER = {CRITICAL: 0, WARNING: 1, INFO: 2}

# The finding ids docs/commands.md's `mignurse diagnose` table promises; rules may add more, never
# rename these.
NODE_REPAIR_LOOP = "node-repair-loop"
NODE_NOT_READY = "node-not-ready"
REPLACEMENT_CHURN = "replacement-churn"
NOTREADY_LOOP = "notready-loop"
MIG_HOOK_KUBELET_RESTART = "mig-hook-kubelet-restart"
ACCELERATED_HARDWARE_NOT_READY = "accelerated-hardware-not-ready"
REPAIR_BLOCKED = "repair-blocked"
MIG_CONFIG_FAILED = "mig-config-failed"
MIG_LAYOUT_MISMATCH = "mig-layout-mismatch"
REPAIR_RISK = "repair-risk"
KNOWN_BAD_COMBINATION = "known-bad-combination"
GPU_STACK_DOWN = "gpu-stack-down"

# Runbook names (docs/commands.md, Runbooks): what a finding may point the engineer at.
RUNBOOK_CORDON_AND_COLLECT = "cordon-and-collect"
RUNBOOK_REAPPLY_MIG = "reapply-mig-no-hooks"
RUNBOOK_PAUSE_REPAIR = "pause-node-repair"
RUNBOOK_REPLACE = "replace-instance"


@dataclass(frozen=True, slots=True)
class Evidence:
    time: datetime | None
    source: str  # event | condition | nodeclaim | history | journal:kubelet | nvml | label | …
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"time": format_time(self.time), "source": self.source, "text": self.text}


@dataclass(frozen=True, slots=True)
class Finding:
    id: str
    severity: str
    nodepool: str
    nodes: tuple[str, ...]
    summary: str
    evidence: tuple[Evidence, ...] = ()
    runbooks: tuple[str, ...] = ()
    deadline: datetime | None = None  # e.g. when Karpenter's repair fires

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "nodepool": self.nodepool,
            "nodes": list(self.nodes),
            "summary": self.summary,
            "evidence": [e.to_json() for e in sorted(self.evidence, key=_evidence_order)],
            "runbooks": list(self.runbooks),
            "deadline": format_time(self.deadline),
        }


def _evidence_order(evidence: Evidence) -> tuple[int, str]:
    # Timeless evidence (labels, settings) first, then oldest to newest.
    return (1, format_time(evidence.time) or "") if evidence.time else (0, "")


# Within a severity, causes before their consequences: the repair loop
# before the hardware condition that feeds it, the kubelet restart before the failed state.
ID_ORDER = {
    finding_id: rank
    for rank, finding_id in enumerate(
        (
            NODE_REPAIR_LOOP,
            MIG_HOOK_KUBELET_RESTART,
            NOTREADY_LOOP,
            NODE_NOT_READY,
            REPLACEMENT_CHURN,
            ACCELERATED_HARDWARE_NOT_READY,
            REPAIR_BLOCKED,
            MIG_CONFIG_FAILED,
            MIG_LAYOUT_MISMATCH,
            GPU_STACK_DOWN,
            REPAIR_RISK,
            KNOWN_BAD_COMBINATION,
        )
    )
}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(
        findings,
        key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), ID_ORDER.get(f.id, 99), f.id, f.nodepool),
    )


# A rule reads only its input (time is `inp.now`) and returns what it found.
Rule: TypeAlias = "Callable[[DiagnosisInput], list[Finding]]"
