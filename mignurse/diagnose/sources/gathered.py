"""What a diagnosis source produces: a `Gathered` input without its `now`, and `SourceError`.

Every source (a live cluster, a bundle, a folder of kubectl dumps, another tool's node
bundle) fills one `Gathered`; it also knows when its snapshot was taken and picks the moment
an offline snapshot is judged at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings, NodeEvidence
from mignurse.diagnose.mng import NodeGroupRepair
from mignurse.model import GpuPluginPod, Pod, format_time

# What a mignurse bundle or a live read is; foreign_bundles.py names the other tools' layouts.
LAYOUT_MIGNURSE = "mignurse"


class SourceError(Exception):
    """The snapshot cannot be read; str() is the one line to show."""

    exit_code = 2


@dataclass
class Gathered:
    """A diagnosis input without its `now`, and what is known about when it was taken."""

    snapshot: Snapshot
    history: History = field(default_factory=History)
    node_evidence: dict[str, NodeEvidence] = field(default_factory=dict)
    karpenter: KarpenterSettings | None = None
    cluster_policy: dict[str, Any] | None = None
    mig_configmaps: tuple[dict[str, Any], ...] | None = ()  # None: not read
    collected_at: datetime | None = None
    context: str = ""
    notices: list[str] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)  # cluster/pods.json: the chosen nodes' pods
    layout: str = LAYOUT_MIGNURSE  # or the foreign node bundle it was read from
    nodegroups: dict[str, NodeGroupRepair] = field(default_factory=dict)  # nodegroups.json
    daemonsets: tuple[DaemonSetInfo, ...] | None = None  # None: not read (daemonsets.json)
    gpu_plugin_pods: tuple[GpuPluginPod, ...] = ()  # device plugin and DRA kubelet plugin

    def newest_time(self) -> datetime | None:
        """The newest timestamp the snapshot holds: `now` for a bundle without a manifest."""
        times: list[datetime | None] = []
        for event in self.snapshot.events:
            if event.last_seen:
                times.append(event.last_seen)
        for node in self.snapshot.nodes.values():
            times.extend(c.last_heartbeat or c.last_transition for c in node.conditions if c)
            if node.created:
                times.append(node.created)
        for claim in self.snapshot.nodeclaims.values():
            times.extend(t for t in (claim.created, claim.deleting) if t)
        for evidence in self.node_evidence.values():
            for journal in evidence.journals.values():
                if journal.entries:
                    times.append(journal.entries[-1].time)
        present = [t for t in times if t is not None]
        return max(present) if present else None

    def judge_time(self) -> datetime | None:
        """The moment to judge an offline snapshot at: when it was collected, unless its
        newest evidence is later. Events and conditions carry the API server's and the
        controllers' clocks; a collector whose clock was behind them must not make that
        evidence "future" (a deadline would look further away than it is)."""
        newest = self.newest_time()
        base = self.collected_at or newest
        if base is None or newest is None or newest <= base:
            return base
        self.notices.append(
            f"the newest evidence ({format_time(newest)}) is {_span(newest - base)} after "
            f"collected_at ({format_time(base)}): the collecting clock was behind the "
            f"cluster's; judging at {format_time(newest)}"
        )
        return newest

    def to_input(self, now: datetime) -> DiagnosisInput:
        return DiagnosisInput(
            snapshot=self.snapshot,
            now=now,
            history=self.history,
            node_evidence=self.node_evidence,
            karpenter=self.karpenter,
            cluster_policy=self.cluster_policy,
            mig_configmaps=self.mig_configmaps,
            nodegroups=self.nodegroups,
            daemonsets=self.daemonsets,
            gpu_plugin_pods=self.gpu_plugin_pods,
        )


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"
