"""The node detail pane: conditions, the labels that matter, the timeline, MIG state and
collected evidence (from a bundle), the node's pods, and the runbooks that fit it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import NodeEvidence
from mignurse.diagnose.timeline import TimelineEntry
from mignurse.model import Node, Pod
from mignurse.nodeview import AHR, format_age
from mignurse.render import SEVERITY_STYLE

DETAIL_EVENTS = 15
INTERESTING_LABELS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/capacity-type",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/mig.strategy",
    "nvidia.com/gpu.deploy.mig-manager",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
)


def node_detail(
    node: Node,
    timeline: list[TimelineEntry],
    now: datetime,
    pods: list[Pod] | str | None = None,
    *,
    findings: Sequence[Finding] = (),
    evidence: NodeEvidence | None = None,
    runbooks: Sequence[str] = (),
) -> Group:
    """The detail pane: findings, conditions, labels, timeline, evidence, pods, runbooks."""
    title = Text.assemble(
        (node.name, "bold"),
        f"  {node.pool or 'no pool'} ({node.pool_kind or 'unmanaged'}) · {node.instance_type}"
        f" · {node.instance_id or 'no instance id'}",
    )
    conditions = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("CONDITION", "STATUS", "FOR", "REASON", "MESSAGE"):
        conditions.add_column(column, overflow="fold")
    for cond in node.conditions:
        bad = (cond.type in ("Ready", AHR) and cond.status != "True") or (
            cond.type.endswith("Pressure") and cond.status == "True"
        )
        since = (
            format_age((now - cond.last_transition).total_seconds())
            if cond.last_transition
            else "?"
        )
        conditions.add_row(
            cond.type,
            Text(cond.status, style="bold red" if bad else ""),
            since,
            cond.reason,
            cond.message,
        )
    labels = Table(box=None, padding=(0, 1), show_header=False)
    labels.add_column(style="dim")
    labels.add_column()
    for key in INTERESTING_LABELS:
        if key in node.labels:
            labels.add_row(key, node.labels[key])
    if node.unschedulable:
        labels.add_row("spec.unschedulable", Text("true (cordoned)", style="yellow"))
    for taint in node.taints:
        labels.add_row("taint", str(taint))
    parts: list[Any] = [title, *_findings_part(findings)]
    if runbooks:
        parts.append(Text(f"Runbooks that fit (R): {', '.join(runbooks)}", style="cyan"))
    parts += [Text(""), Text("Conditions", style="bold underline"), conditions]
    parts += [Text(""), Text("Labels that matter", style="bold underline"), labels]
    parts += [
        Text(""),
        Text(
            f"Timeline (last {min(len(timeline), DETAIL_EVENTS)} of {len(timeline)})",
            style="bold underline",
        ),
    ]
    parts.append(
        _timeline_table(timeline, now)
        if timeline
        else Text("nothing kept by the API server (events expire after ~1 h)", style="dim")
    )
    if evidence is not None:
        parts += [Text(""), *_evidence_part(evidence)]
    parts += [Text(""), _pods_part(pods, now)]
    return Group(*parts)


def evidence_detail(
    evidence: NodeEvidence,
    timeline: list[TimelineEntry],
    now: datetime,
    *,
    findings: Sequence[Finding] = (),
) -> Group:
    """A node known only from another tool's bundle: its findings, journal timeline and files."""
    title = Text.assemble(
        (evidence.node, "bold"),
        f"  {evidence.layout} bundle · {evidence.instance_id or 'no instance id'}"
        " · no Node object: conditions, labels and events unknown",
    )
    parts: list[Any] = [title, *_findings_part(findings), Text("")]
    parts.append(
        Text(
            f"Timeline (last {min(len(timeline), DETAIL_EVENTS)} of {len(timeline)})",
            style="bold underline",
        )
    )
    parts.append(
        _timeline_table(timeline, now) if timeline else Text("no journal lines", style="dim")
    )
    parts += [Text(""), *_evidence_part(evidence)]
    return Group(*parts)


def _findings_part(findings: Sequence[Finding]) -> list[Text]:
    return [
        Text.assemble(
            (f"{finding.severity.upper()} ", SEVERITY_STYLE.get(finding.severity, "")),
            (finding.id, "bold"),
            f" {finding.summary}",
        )
        for finding in findings
    ]


def _timeline_table(timeline: list[TimelineEntry], now: datetime) -> Table:
    recent = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("AGO", "SOURCE", "WHAT"):
        recent.add_column(column, overflow="fold")
    for entry in timeline[-DETAIL_EVENTS:]:
        warning = "Warning" in entry.text[:20] or entry.text.startswith(
            ("Ready=False", "Ready=Unknown")
        )
        recent.add_row(
            format_age((now - entry.time).total_seconds()),
            entry.source,
            Text(entry.text, style="yellow" if warning else ""),
        )
    return recent


def _evidence_part(evidence: NodeEvidence) -> list[Any]:
    """What the bundle collected on the node itself: MIG state, journals, cloud-init."""
    parts: list[Any] = [Text("Collected on the node", style="bold underline")]
    mig = evidence.mig
    if mig is None:
        parts.append(Text("MIG state: not collected", style="dim"))
    elif mig.status != "ok":
        parts.append(Text(f"MIG state ({mig.source}): {mig.status} {mig.detail}", style="yellow"))
    else:
        table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
        for column in ("GPU", "NAME", "MIG", "PENDING", "DEVICES"):
            table.add_column(column, overflow="fold")
        for gpu in mig.gpus:
            profiles: dict[str, int] = {}
            for device in gpu.devices:
                profiles[device.profile or "?"] = profiles.get(device.profile or "?", 0) + 1
            table.add_row(
                str(gpu.index),
                gpu.name,
                gpu.mig_current,
                Text(gpu.mig_pending, style="bold yellow" if gpu.mode_change_pending else ""),
                " ".join(f"{n}×{p}" for p, n in sorted(profiles.items())) or "-",
            )
        parts += [Text(f"MIG state ({mig.source}, driver {mig.driver_version or '?'})"), table]
    for source, journal in sorted(evidence.journals.items()):
        problems = f", {len(journal.problems)} problems" if journal.problems else ""
        parts.append(Text(f"journal {source}: {journal.lines} lines{problems}"))
    if evidence.cloud_init is not None:
        parts.append(Text(f"cloud-init: {evidence.cloud_init.status}"))
    for problem in evidence.problems[:5]:
        parts.append(Text(f"collector: {problem}", style="yellow"))
    return parts


def _pods_part(pods: list[Pod] | str | None, now: datetime) -> Any:
    if pods is None:
        return Text("Pods: loading…", style="dim")
    if isinstance(pods, str):
        return Text(f"Pods: {pods}", style="yellow")
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    for column in ("NAMESPACE", "POD", "PHASE", "READY", "GPU", "OWNER", "AGE"):
        table.add_column(column, overflow="fold")
    for pod in pods:
        gpu = " ".join(f"{n.removeprefix('nvidia.com/')}:{c}" for n, c in pod.gpu_requests.items())
        table.add_row(
            pod.namespace,
            pod.name,
            Text(pod.phase, style="" if pod.phase in ("Running", "Succeeded") else "yellow"),
            "yes" if pod.ready else Text("no", style="yellow"),
            gpu or "-",
            pod.owner_kind or "-",
            format_age((now - pod.created).total_seconds()) if pod.created else "?",
        )
    gpu_users = sum(1 for p in pods if p.uses_gpu)
    title = Text(f"Pods ({len(pods)}, {gpu_users} using GPUs)", style="bold underline")
    return Group(title, table) if pods else Group(title, Text("none", style="dim"))
