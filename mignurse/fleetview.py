"""The fleet view: one row per NodePool or node group, the app's landing screen.

A row answers "which pool is on fire" at a glance: its GPU nodes, how many are Ready and
NotReady, how many NodeClaims ended in the last hour and six hours (replacements, from the
same merge of history, snapshot and events the churn rules use), the median lifetime of those
replaced nodes (a loop shows as minutes), whether repair is on, off by configuration or
paused by mignurse (and by whom and which run, from the pause-node-repair runbook's record:
`RepairState`, the one reading of it), and the worst finding about the pool.

Pure: built from a DiagnosisInput and its Diagnosis, off the UI thread; the app renders it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mignurse.diagnose.engine import Diagnosis
from mignurse.diagnose.findings import CRITICAL, INFO, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings
from mignurse.diagnose.replacements import replacements
from mignurse.model import format_time
from mignurse.nodeview import format_age

SEVERITY_RANK = {CRITICAL: 0, WARNING: 1, INFO: 2}
KIND_WORDS = {"nodepool": "NodePool", "nodegroup": "node group", "auto": "Auto Mode", "": "none"}
UNPOOLED = "(no pool)"


@dataclass(frozen=True)
class PoolRow:
    pool: str
    kind: str  # nodepool | nodegroup | auto | "" (GPU nodes that belong to no pool)
    nodes: int
    ready: int
    not_ready: int
    replaced_1h: int
    replaced_6h: int
    median_lifetime: timedelta | None  # of the nodes replaced in the last 6 h
    repair: str  # on | off (config) | PAUSED by … since … | unknown | always on (Auto Mode)
    worst: Finding | None
    repair_words: str = ""  # the repair state as a clause: RepairState.sentence()

    @property
    def rank(self) -> int:
        return SEVERITY_RANK.get(self.worst.severity, 3) if self.worst else 3

    def cells(self) -> tuple[str, ...]:
        """In COLUMNS order: what matters most first, so 80 columns show the worst finding,
        the NotReady count and the repair state before anything is cut."""
        worst = "-"
        if self.worst is not None:
            worst = (
                f"{SEVERITY_WORDS.get(self.worst.severity, self.worst.severity)} {self.worst.id}"
            )
        lifetime = "-"
        if self.median_lifetime is not None:
            lifetime = format_age(self.median_lifetime.total_seconds())
        return (
            self.pool,
            worst,
            str(self.not_ready),
            str(self.nodes),
            self.repair,
            str(self.replaced_1h),
            str(self.replaced_6h),
            lifetime,
            str(self.ready),
            KIND_WORDS.get(self.kind, self.kind),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "kind": self.kind,
            "nodes": self.nodes,
            "ready": self.ready,
            "notReady": self.not_ready,
            "replaced1h": self.replaced_1h,
            "replaced6h": self.replaced_6h,
            "medianLifetimeSeconds": (
                round(self.median_lifetime.total_seconds()) if self.median_lifetime else None
            ),
            "repair": self.repair,
            "worst": self.worst.id if self.worst else None,
            "worstSeverity": self.worst.severity if self.worst else None,
        }


COLUMNS = (
    "POOL",
    "WORST",
    "NOTREADY",
    "NODES",
    "REPAIR",
    "REPL 1H",
    "REPL 6H",
    "LIFETIME",
    "READY",
    "KIND",
)
# severity in words (colour is never the only carrier of meaning), short for 80 columns
SEVERITY_WORDS = {CRITICAL: "CRIT", WARNING: "WARN", INFO: "info"}


@dataclass(frozen=True)
class RepairState:
    """Whether node repair may replace a pool's nodes, and why, as one reading: the fleet's
    REPAIR column, the runbook picker and the pause and resume plans all word it from here,
    so "paused by mignurse" (a run recorded the prior setting: resume puts it back) is never
    confused with "off by configuration" (nothing to resume) (docs/repair.md)."""

    state: str  # ON | OFF | PAUSED | UNKNOWN | AUTO | NODEGROUP | NONE
    by: str = ""  # PAUSED: who ran the pause, when, and the run (its record)
    at: str = ""
    run: str = ""

    @classmethod
    def read(cls, enabled: bool | None, record: Mapping[str, Any] | None) -> RepairState:
        """From what the repairer's setting says (Karpenter's effective `NodeRepair` gate, a
        node group's nodeRepairConfig; None: unread) and the pause-node-repair runbook's
        record beside it, if any. A record beside repair that is on again (a helm upgrade
        undid the pause) is no pause."""
        if enabled is None:
            return cls(UNKNOWN)
        if enabled:
            return cls(ON)
        if record:
            return cls(
                PAUSED,
                by=str(record.get("by") or "?"),
                at=str(record.get("at") or ""),
                run=str(record.get("run") or ""),
            )
        return cls(OFF)

    @classmethod
    def of_pool(cls, kind: str, karpenter: KarpenterSettings | None) -> RepairState:
        """Who repairs a pool of this kind, and whether Karpenter's repair runs."""
        if kind == "auto":
            return cls(AUTO)
        if kind == "nodegroup":
            return cls(NODEGROUP)  # nodeRepairConfig lives in EKS, not in the cluster
        if kind != "nodepool":
            return cls(NONE)
        if karpenter is None:
            return cls(UNKNOWN)
        record = (
            {"by": karpenter.paused_by, "at": karpenter.paused_at, "run": karpenter.paused_run}
            if karpenter.paused_by
            else None
        )
        return cls.read(karpenter.node_repair, record)

    def cell(self, now: datetime) -> str:
        """The fleet's REPAIR column: a few words."""
        if self.state == PAUSED:
            since = self.at
            if since.startswith(f"{now:%Y-%m-%d}T"):
                since = since[11:16] + "Z"  # today: the time is enough
            return f"PAUSED by {self.by.split('@', 1)[0]} since {since or '?'}"
        return CELL_WORDS[self.state]

    def sentence(self) -> str:
        """One clause for the picker and the plans: "node repair is …"."""
        if self.state == PAUSED:
            run = f", run {self.run}" if self.run else ""
            return (
                f"node repair is paused by mignurse (paused by {self.by} since "
                f"{self.at or '?'}{run})"
            )
        return SENTENCES[self.state]


ON, OFF, PAUSED, UNKNOWN = "on", "off", "paused", "unknown"
AUTO, NODEGROUP, NONE = "auto", "nodegroup", "none"
CELL_WORDS = {
    ON: "on",
    OFF: "off (config)",
    UNKNOWN: "unknown",
    AUTO: "always on (Auto Mode)",
    NODEGROUP: "node group (ask EKS)",
    NONE: "none",
}
SENTENCES = {
    ON: "node repair is on",
    OFF: "node repair is off by configuration, not paused by mignurse",
    UNKNOWN: "node repair's state is unknown (the Karpenter Deployment was not read)",
    AUTO: "EKS Auto Mode repairs its nodes itself: always on",
    NODEGROUP: "the managed node group's repair is set in EKS (nodeRepairConfig)",
    NONE: "no repairer is known for these nodes",
}


def repair_state(kind: str, karpenter: KarpenterSettings | None, now: datetime) -> str:
    """Who repairs this pool's nodes, in a few words (docs/repair.md)."""
    return RepairState.of_pool(kind, karpenter).cell(now)


def fleet_rows(inp: DiagnosisInput, diagnosis: Diagnosis) -> list[PoolRow]:
    """One row per pool with GPU nodes (or a replacement in the last 6 h), worst first."""
    snapshot = inp.snapshot
    counts: dict[str, list[int]] = {}  # pool → [nodes, ready, not ready]
    kinds: dict[str, str] = {}
    pool_of: dict[str, str] = {}
    for node in snapshot.gpu_nodes():
        pool = node.pool or UNPOOLED
        kinds.setdefault(pool, node.pool_kind)
        pool_of[node.name] = pool
        row = counts.setdefault(pool, [0, 0, 0])
        row[0] += 1
        if node.ready_status == "Ready":
            row[1] += 1
        else:
            row[2] += 1
    for name, evidence in inp.node_evidence.items():
        if name not in snapshot.nodes and evidence.layout != "mignurse":
            # another tool's node bundle: no Node object, its state is unknown
            pool_of[name] = UNPOOLED
            row = counts.setdefault(UNPOOLED, [0, 0, 0])
            row[0] += 1
            row[2] += 1
    for name, nodepool in snapshot.nodepools.items():
        if nodepool.requests_gpu:  # an empty GPU pool still belongs; a CPU pool does not
            counts.setdefault(name, [0, 0, 0])
            kinds.setdefault(name, "nodepool")

    hour_ago = inp.now - timedelta(hours=1)
    replaced: dict[str, list[int]] = {}
    lifetimes: dict[str, list[float]] = {}
    for rep in replacements(inp):
        pool = rep.pool or UNPOOLED
        if pool not in counts:
            continue  # a pool of CPU nodes
        seen = replaced.setdefault(pool, [0, 0])
        seen[1] += 1
        if rep.ended is None or rep.ended >= hour_ago:
            seen[0] += 1
        if rep.lifetime is not None:
            lifetimes.setdefault(pool, []).append(rep.lifetime.total_seconds())

    worst: dict[str, Finding] = {}
    for finding in diagnosis.findings:
        pools = {finding.nodepool} if finding.nodepool else set()
        pools |= {pool_of[n] for n in finding.nodes if n in pool_of}
        for pool in pools:
            held = worst.get(pool)
            if held is None or SEVERITY_RANK[finding.severity] < SEVERITY_RANK[held.severity]:
                worst[pool] = finding

    rows = []
    for pool, (nodes, ready, not_ready) in counts.items():
        kind = kinds.get(pool, "")
        repair = RepairState.of_pool(kind, inp.karpenter)
        lives = lifetimes.get(pool)
        rows.append(
            PoolRow(
                pool=pool,
                kind=kind,
                nodes=nodes,
                ready=ready,
                not_ready=not_ready,
                replaced_1h=replaced.get(pool, [0, 0])[0],
                replaced_6h=replaced.get(pool, [0, 0])[1],
                median_lifetime=timedelta(seconds=statistics.median(lives)) if lives else None,
                repair=repair.cell(inp.now),
                worst=worst.get(pool),
                repair_words=repair.sentence(),
            )
        )
    rows.sort(key=lambda r: (r.rank, -r.not_ready, -r.replaced_6h, r.pool))
    return rows


def fleet_document(rows: list[PoolRow], *, context: str, now: datetime) -> dict[str, Any]:
    return {"context": context, "now": format_time(now), "pools": [r.to_json() for r in rows]}
