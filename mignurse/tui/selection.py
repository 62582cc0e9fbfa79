"""What a key acts on, as one value: the app builds a `Selection` when the key is pressed,
and the runbook screens read it, never the app's own fields.

It also answers which runbooks can apply to it (an uncordon needs a cordoned node, a
resume needs repair paused by mignurse, not merely off), so a picker never offers a runbook
that has nothing to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mignurse.diagnose.findings import Finding
from mignurse.fleetview import OFF, ON, PAUSED, RepairState
from mignurse.model import Node
from mignurse.nodeview import resolve_node_name

MIG_CONFIG_LABEL = "nvidia.com/mig.config"


@dataclass(frozen=True)
class Selection:
    """The marked nodes (else the highlighted one) and what the app knew about them."""

    nodes: tuple[str, ...] = ()  # full names, still in the cluster
    cluster: str = ""
    read_only_reason: str = ""  # "" when runbooks may change the cluster
    findings: tuple[Finding, ...] = ()  # the latest diagnosis, worst first
    node_objects: Mapping[str, Node] = field(default_factory=dict)  # the selected nodes
    repair: RepairState | None = None  # Karpenter's repair for these nodes; None: unknown
    gpu_nodes: tuple[str, ...] = ()  # every GPU node: short names are resolved against them

    @property
    def where(self) -> str:
        from mignurse.nodeview import short_name

        if not self.nodes:
            return "the cluster"
        return short_name(self.nodes[0]) if len(self.nodes) == 1 else f"{len(self.nodes)} nodes"

    def suggested_runbooks(self) -> list[str]:
        """Runbooks named by the selected nodes' findings, worst finding first."""
        wanted = set(self.nodes)
        return list(
            dict.fromkeys(r for f in self.findings if wanted & set(f.nodes) for r in f.runbooks)
        )

    def node_name(self, typed: str) -> str | None:
        """A node as typed (full, or its short name where only one node has it)."""
        return resolve_node_name(typed.strip(), self.gpu_nodes)

    def why_not(self, runbook: str) -> str:
        """Why `runbook` has nothing to do on this selection ("" when it may apply)."""
        nodes = [self.node_objects[n] for n in self.nodes if n in self.node_objects]
        if runbook == "cordon" and nodes and all(n.unschedulable for n in nodes):
            return "already cordoned"
        if runbook == "uncordon" and nodes and not any(n.unschedulable for n in nodes):
            return "not cordoned"
        repair = self.repair
        if runbook == "resume-node-repair" and repair is not None and repair.state in (ON, OFF):
            return f"{repair.sentence()}: no pause of mignurse's to resume"
        if runbook == "pause-node-repair" and repair is not None and repair.state in (OFF, PAUSED):
            return f"nothing to pause: {repair.sentence()}"
        if (
            runbook == "reapply-mig-no-hooks"
            and nodes
            and not any(MIG_CONFIG_LABEL in n.labels for n in nodes)
        ):
            return f"no {MIG_CONFIG_LABEL} label: no MIG layout to apply"
        return ""
