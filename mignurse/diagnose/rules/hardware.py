"""`accelerated-hardware-not-ready`: the accelerated hardware is not ready.

Where the Node carries AcceleratedHardwareReady=False (set only by the EKS node monitoring
agent) the condition is told apart as monitoring plumbing (DCGM: the GPU may be fine, a new
node fails the same way), the application's fault (Xid 13, 31: replacing the node will not
help) or the GPU itself (XID, ECC: replace it), with when repair fires (Karpenter:
kubernetes-sigs/karpenter pkg/controllers/node/health/controller.go and
aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go `RepairPolicies`; Auto Mode and
managed node groups: docs.aws.amazon.com/eks/latest/userguide/node-repair.html). Where no
condition says so (no agent on the node, or a node bundle read without the
cluster) the node's own files do: Xid lines in its kernel log, nvidia-smi's row remapper,
page retirement and ECC state, and the agent's own log. No automatic repair acts on those;
a node with a condition gets them as more evidence on its finding, not as a second one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from mignurse.diagnose.agent_reasons import (
    GPU,
    HELPS,
    PLUMBING,
    SERVICE,
    AgentReason,
    agent_reason,
    agent_release,
    unknown_reason_text,
)
from mignurse.diagnose.automode import AUTO, AUTO_MODE_INSTEAD, auto_mode_nodes, repair_kind
from mignurse.diagnose.facts import (
    AHR,
    NMA_CONDITION_XIDS,
    NMA_CONDITION_XIDS_BEFORE_1_6_4,
    REPAIR_TOLERATIONS,
    XID_CLASS_APPLICATION,
    XID_CLASS_REPLACE,
    XID_CLASS_RESET,
    classify_ahr_reason,
    classify_xid,
    xid_of,
)
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    RUNBOOK_REPLACE,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.diagnose.outlook import RepairOutlook, repair_outlook
from mignurse.diagnose.wording import condition_text, short_time, some_of
from mignurse.evidence._common import clip
from mignurse.model import Node, format_time

if TYPE_CHECKING:
    # A live read has no journal nor nvidia-smi report: their parsers load where one is read.
    from mignurse.evidence import AgentCondition, GpuHealthReport

# A repair this close (or already due) leaves just enough time to collect evidence first.
URGENT = timedelta(minutes=10)
AHR_TOLERATION = REPAIR_TOLERATIONS[(AHR, "False")]
# MNG replaces on these without an XID (EKS user guide node-health-nma.html).
_MNG_REPLACE_REASONS = ("NvidiaDoubleBitError", "NvidiaNVLinkError")

# What the node's own files say, strongest first: the GPU must go, a reset or reboot clears
# it, the agent's reason is not one we know, the agent's monitoring plumbing, the application.
REPLACE = XID_CLASS_REPLACE
RESET = XID_CLASS_RESET
UNKNOWN = "unknown"
SERVICE_FAULT = "service"
MONITORING = "monitoring"
APPLICATION = XID_CLASS_APPLICATION
_RANK = {REPLACE: 0, RESET: 1, SERVICE_FAULT: 2, UNKNOWN: 3, MONITORING: 4, APPLICATION: 5}
_SEVERITY = {
    REPLACE: CRITICAL,
    RESET: WARNING,
    SERVICE_FAULT: WARNING,
    UNKNOWN: WARNING,
    MONITORING: WARNING,
}
_WHAT = {
    REPLACE: "a GPU hardware fault: replace the instance",
    RESET: (
        "a GPU fault a GPU reset clears: drain the node and reboot it (or reset the GPU with "
        "nvidia-smi -r), replace it if the fault comes back"
    ),
    SERVICE_FAULT: (
        "a service the GPUs need is down, not the GPU: restart it or fix the image; a new "
        "node from the same image may fail the same way"
    ),
    UNKNOWN: "an unrecognised reason: check the message",
    MONITORING: "GPU monitoring plumbing (DCGM), not the GPU: replacing the node will not help",
    APPLICATION: "usually the application's own fault, not the GPU's: check the workload",
}
# The agent's reasons that need a new instance whatever the Xid tables say (reasons.yaml:
# a missing GPU; NvidiaFabricError "persists across reboots and requires instance
# replacement"; Neuron uncorrectable errors, which MNG replaces).
_AGENT_REPLACE_REASONS = frozenset(
    {
        "NvidiaDeviceCountMismatch",
        "NvidiaFabricError",
        "NeuronDMAError",
        "NeuronHBMUncorrectableError",
        "NeuronNCUncorrectableError",
        "NeuronSRAMUncorrectableError",
    }
)
# The agent logs its release when it starts (cmd/eks-node-monitoring-agent/main.go).
_AGENT_VERSION = re.compile(r'"version"\s*:\s*"([^"\\]{1,64})"')
_AGENT_START = "starting eks-node-monitoring-agent"  # cmd/eks-node-monitoring-agent/main.go
_FATAL = "Fatal"
# Xid 154's text: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)".
_RECOVERY_ACTION = re.compile(r"to 0x[0-9A-Fa-f]+ \(([^)]*)\)")


def rule(inp: DiagnosisInput) -> list[Finding]:
    signs = {name: _node_signs(name, evidence) for name, evidence in inp.node_evidence.items()}
    groups: dict[tuple[str, str, str], list[Node]] = {}
    for node in inp.snapshot.nodes.values():
        cond = node.condition(AHR)
        if cond is None or cond.status != "False":
            continue
        kind = _condition_kind(cond.reason)
        groups.setdefault((node.pool, repair_kind(inp, node), kind), []).append(node)
    findings = [
        _finding(inp, pool, pool_kind, kind, sorted(nodes, key=lambda n: n.name), signs)
        for (pool, pool_kind, kind), nodes in sorted(groups.items())
    ]
    findings.extend(_evidence_findings(inp, signs))
    return findings


def _condition_kind(reason: str) -> str:
    """monitoring | application | hardware | service | unknown, for a condition's reason."""
    xid = xid_of(reason) if reason.startswith("NvidiaXID") else None
    meaning = classify_xid(xid) if xid is not None else None
    if meaning is not None and meaning.kind == XID_CLASS_APPLICATION:
        return APPLICATION
    return classify_ahr_reason(reason)


@dataclass
class _PoolNodes:
    """What a pool's nodes with AcceleratedHardwareReady=False show: each condition with the
    node's fate and its own files' signs, the repair deadlines, the condition reasons, the
    repair outlooks."""

    evidence: list[Evidence] = field(default_factory=list)
    deadlines: list[datetime] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    fates: list[RepairOutlook] = field(default_factory=list)
    own: list[_Sign] = field(default_factory=list)  # the signs in the nodes' own files
    agent_versions: list[str] = field(default_factory=list)  # the agent releases they run


def _finding(
    inp: DiagnosisInput,
    pool: str,
    pool_kind: str,
    kind: str,
    nodes: list[Node],
    signs: dict[str, _NodeSigns],
) -> Finding:
    seen = _pool_nodes(inp, nodes, signs)
    reason_list = some_of(sorted(set(r for r in seen.reasons if r))) or "no reason given"
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    where = _where(pool, pool_kind)
    deadline = min(seen.deadlines) if seen.deadlines else None
    plumbing = kind in ("monitoring", APPLICATION)  # repair replaces a GPU that may be fine
    what = _what_it_is(kind, seen.reasons, seen.agent_versions)
    summary = f"{where}: {count} AcceleratedHardwareReady=False ({reason_list}), {what}"
    if deadline is not None:
        summary += f"; repair fires {short_time(deadline)}"  # faces count down to `deadline`
        if plumbing and pool_kind != AUTO:
            summary += "; pause repair"
    elif seen.fates:
        summary += f"; {seen.fates[0].who}"
    if pool_kind == AUTO:
        summary += f"; {AUTO_MODE_INSTEAD}"
    broken = _labels(s for s in seen.own if s.kind == REPLACE)
    if broken and kind != "hardware":
        summary += f"; the node's own files show a GPU hardware fault too: {broken}"
        if kind == "monitoring":
            summary += " (replace it once the agent's DCGM works: a new node fails the same way)"

    if plumbing:
        runbooks: tuple[str, ...] = (
            (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT)
            if deadline is not None and pool_kind in ("nodepool", "nodegroup")
            else (RUNBOOK_CORDON_AND_COLLECT,)
        )
    elif kind == "hardware":
        runbooks = (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)
    else:
        runbooks = (RUNBOOK_CORDON_AND_COLLECT,)
    # DCGMError: the monitoring is broken and a new node fails the same way, whatever else
    # the node's files show.
    if broken and RUNBOOK_REPLACE not in runbooks and kind != "monitoring":
        runbooks = (RUNBOOK_REPLACE, *runbooks)
    urgent = deadline is not None and deadline - inp.now <= URGENT
    evidence = [*seen.evidence, *_reason_evidence(seen.reasons)]
    return Finding(
        id=ACCELERATED_HARDWARE_NOT_READY,
        severity=CRITICAL if urgent else WARNING,
        nodepool=pool,
        nodes=tuple(n.name for n in nodes),
        summary=summary,
        evidence=tuple(evidence),
        runbooks=runbooks,
        deadline=deadline,
    )


def _reason_evidence(reasons: list[str]) -> list[Evidence]:
    """One line per distinct reason the agent defines: its severity, since when, what it
    means and whether replacing helps."""
    lines = []
    for reason in sorted(set(reasons)):
        entry = agent_reason(reason)
        if entry is None:
            continue
        history = f" ({entry.history})" if entry.history else ""
        lines.append(
            Evidence(
                None,
                "agent",
                f"{reason}: the node monitoring agent's {entry.severity} reason under "
                f"{entry.condition}, defined since {entry.first_defined}{history}: "
                f"{entry.meaning}; {entry.replacing}",
            )
        )
    return lines


def _pool_nodes(inp: DiagnosisInput, nodes: list[Node], signs: dict[str, _NodeSigns]) -> _PoolNodes:
    seen = _PoolNodes()
    for node in nodes:
        cond = node.condition(AHR)
        if cond is None:
            continue
        seen.reasons.append(cond.reason)
        outlook = repair_outlook(inp, node, AHR)
        deadline = outlook.deadline
        if deadline is not None:
            seen.deadlines.append(deadline)
        # The time only: the faces count down to the finding's deadline, and in a bundle a
        # distance from the collection read later looks like a live countdown.
        fate = outlook.fate(inp.now)
        seen.fates.append(outlook)
        xid = xid_of(cond.reason) if cond.reason.startswith("NvidiaXID") else None
        xid_note = f" (XID {xid})" if xid is not None else ""
        seen.evidence.append(
            Evidence(
                cond.last_transition,
                "condition",
                condition_text(node.name, cond.type, cond.status, cond.reason, cond.message)
                + f"{xid_note} since {format_time(cond.last_transition)}; {fate}",
            )
        )
        node_signs = signs.get(node.name)
        if node_signs is not None:
            seen.own.extend(node_signs.signs)
            seen.evidence.extend(node_signs.all_evidence())
        version = node_signs.agent_version if node_signs is not None else ""
        version = version or _daemonset_agent_version(inp)
        if version:
            seen.agent_versions.append(version)
        auto_why = auto_mode_nodes(inp).get(node.name)
        if auto_why:
            seen.evidence.append(
                Evidence(None, "label", f"Node {node.name} is an EKS Auto Mode node: {auto_why}")
            )
    return seen


_AGENT_NAME = "eks-node-monitoring-agent"


def _daemonset_agent_version(inp: DiagnosisInput) -> str:
    """The agent's release from its DaemonSet's image tag, when the input carries the
    cluster's DaemonSets and they agree on one release ("" otherwise). The agent's chart
    names the DaemonSet after itself and the image eks-node-monitoring-agent:<tag>
    (charts/eks-node-monitoring-agent/templates/daemonset.yaml and values.yaml at v1.7.0);
    its `dcgm-server` DaemonSet runs the same image by default, so it is told apart by name."""
    tags: set[str] = set()
    for daemonset in getattr(inp, "daemonsets", None) or ():
        if _AGENT_NAME not in str(getattr(daemonset, "name", "")):
            continue
        for container in getattr(daemonset, "containers", ()):
            image = str(getattr(container, "image", ""))
            if _AGENT_NAME in image.rsplit("/", 1)[-1] and agent_release(image) is not None:
                tags.add(image.split("@", 1)[0].rsplit(":", 1)[-1])
    return tags.pop() if len(tags) == 1 else ""


def _what_it_is(kind: str, reasons: list[str], agent_versions: list[str]) -> str:
    """The summary's verdict on the condition: monitoring, the application, the GPU, a
    service, or unknown, with what the agent means by each reason."""
    meanings = _meanings(reasons)
    if kind == "monitoring":  # what DCGMError means is the finding's "agent" evidence line
        return "GPU monitoring plumbing (DCGM), not the GPU: replacing the node will not help"
    if kind == APPLICATION:
        if any(r.startswith("NvidiaXID") for r in reasons):
            return (
                "usually the application's own fault, not the GPU (NVIDIA: restart the "
                "application): replacing the node will not help; node monitoring agent "
                f"{_agent_versions_for(reasons)}"
            )
        return f"the application's own fault, not the GPU ({meanings}): check the workload"
    if kind == "hardware":
        return f"a GPU hardware fault ({meanings}): replace the instance"
    if kind == "service":
        return (
            f"a service fault on the node, not the GPUs ({meanings}): restart the service or "
            "fix the image; replacing helps only if the service failed by chance on this node"
        )
    versions = sorted(set(agent_versions))
    unknown = sorted(set(reasons))
    said = "; ".join(
        _unknown_text(r, versions[0] if len(versions) == 1 else "") for r in unknown[:3]
    )
    if len(versions) > 1:
        said += f" (the nodes run agent releases {', '.join(versions)})"
    return f"an unrecognised reason: {said}; check the message"


def _unknown_text(reason: str, agent_version: str) -> str:
    entry = agent_reason(reason)
    if entry is not None:  # the agent's, under another condition type
        return (
            f"{reason} is the node monitoring agent's {entry.condition} reason, never an "
            f"{AHR} one: something other than the agent set this condition"
        )
    return unknown_reason_text(reason or "(no reason)", agent_version)


def _meanings(reasons: list[str], limit: int = 3) -> str:
    """ "NvidiaFabricError: <what the agent means>" for each distinct reason."""
    entries: dict[str, AgentReason] = {}
    for reason in reasons:
        entry = agent_reason(reason)
        if entry is not None:
            entries.setdefault(reason, entry)
    said = [f"{reason}: {entry.meaning}" for reason, entry in list(entries.items())[:limit]]
    more = f"; {len(entries) - limit} more" if len(entries) > limit else ""
    return "; ".join(said) + more


def _agent_versions_for(reasons: list[str]) -> str:
    xids = sorted({x for r in reasons if (x := xid_of(r)) is not None})
    listed = " and ".join(f"Xid {x}" for x in xids) or "this Xid"
    if all(x in NMA_CONDITION_XIDS_BEFORE_1_6_4 and x not in NMA_CONDITION_XIDS for x in xids):
        return f"v1.6.0-v1.6.3 make {listed} a condition, v1.6.4 and later only an event"
    return f"reported {listed} as a condition"


def _where(pool: str, pool_kind: str) -> str:
    if pool_kind == "nodegroup":
        return f"Node group {pool}"
    if pool_kind == AUTO:
        return f"NodePool {pool} (Auto Mode)" if pool else "Auto Mode nodes outside any NodePool"
    return f"NodePool {pool}" if pool else "Nodes outside any pool"


# -- what the node's own files say --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sign:
    kind: str  # REPLACE | RESET | UNKNOWN | MONITORING | APPLICATION
    label: str  # a few words for the summary: "Xid 79 (GPU has fallen off the bus)"
    evidence: Evidence


@dataclass
class _NodeSigns:
    signs: list[_Sign] = field(default_factory=list)
    agent: AgentCondition | None = None  # the agent's first Fatal AcceleratedHardwareReady
    agent_reasons: list[str] = field(default_factory=list)
    context: list[Evidence] = field(default_factory=list)  # shown only beside a sign
    agent_version: str = ""  # the release the agent logged when it last started

    @property
    def kind(self) -> str | None:
        if not self.signs:
            return None
        return min((s.kind for s in self.signs), key=_RANK.__getitem__)

    def all_evidence(self) -> list[Evidence]:
        return [s.evidence for s in self.signs] + (self.context if self.signs else [])


def _node_signs(name: str, evidence: NodeEvidence) -> _NodeSigns:
    found = _NodeSigns()
    _kernel_signs(name, evidence, found)
    if evidence.gpu_health is not None:
        _smi_signs(name, evidence.gpu_health, found)
    _agent_signs(name, evidence, found)
    return found


def _kernel_signs(name: str, evidence: NodeEvidence, found: _NodeSigns) -> None:
    """Xid lines from every kernel-side journal the bundle holds (kernel.log, the previous
    boot's, syslog or dmesg copies), the same line read twice counted once."""
    from mignurse.evidence import xid_errors

    seen: set[tuple[str, int, int, str]] = set()
    groups: dict[tuple[int, str, bool], list[tuple[datetime, str]]] = {}
    for unit, journal in evidence.journals.items():
        if unit == "nma":
            continue
        candidates = [e for e in journal.entries if "Xid" in e.message]
        last_boot = max((e.boot for e in journal.entries), default=0)
        for entry in candidates:
            for xid in xid_errors((entry,)):
                key = (xid.pci, xid.xid, int(xid.time.timestamp()), xid.text)
                if key in seen:
                    continue
                seen.add(key)
                earlier = unit == "kernel-previous-boot" or entry.boot < last_boot
                groups.setdefault((xid.xid, xid.pci, earlier), []).append((xid.time, xid.text))
    for (code, pci, earlier), lines in sorted(groups.items()):
        meaning = classify_xid(code)
        if meaning is None:
            continue
        kind, what = meaning.kind, meaning.what
        first_time, first_text = min(lines)
        if code == 154:
            action = _RECOVERY_ACTION.search(first_text)
            if action is None or action.group(1) == "None":
                continue
            what = f"GPU recovery action now {action.group(1)}"
        if earlier and kind == REPLACE:
            kind = RESET  # the node rebooted since: a fault that comes back is for replacing
        times = f" ×{len(lines)} until {format_time(max(lines)[0])}" if len(lines) > 1 else ""
        boot = " (previous boot)" if earlier else ""
        under_agent = (
            "a condition under the node monitoring agent"
            if code in NMA_CONDITION_XIDS
            else "only an event under the node monitoring agent"
        )
        text = (
            f"{name}: Xid {code} on {pci}{boot}{times}: {what} (NVIDIA: {meaning.nvidia}; "
            f"{under_agent}): {clip(first_text, 240)}"
        )
        found.signs.append(
            _Sign(kind, f"Xid {code} ({what})", Evidence(first_time, "journal:kernel", text))
        )


def _smi_signs(name: str, report: GpuHealthReport, found: _NodeSigns) -> None:
    """Row remapper, page retirement and ECC state; unknown (N/A, absent) says nothing."""
    where = f"{name} ({report.source})"
    for gpu in report.gpus:
        rows = gpu.remapped_uncorrectable
        rows_note = f", {rows} rows remapped for uncorrectable errors" if rows else ""
        if gpu.remap_failure:
            found.signs.append(
                _smi_sign(
                    REPLACE,
                    f"row remapping failure on GPU {gpu.index}",
                    f"{where}: {gpu.label}: Remapping Failure Occurred: Yes{rows_note}: "
                    "a row could not be remapped, NVIDIA's RMA criterion",
                )
            )
        if gpu.sram_threshold_exceeded:
            found.signs.append(
                _smi_sign(
                    REPLACE,
                    f"SRAM error threshold exceeded on GPU {gpu.index}",
                    f"{where}: {gpu.label}: SRAM Threshold Exceeded: Yes: NVIDIA's RMA flow "
                    "for double-bit errors in SRAM",
                )
            )
        if gpu.remap_pending:
            found.signs.append(
                _smi_sign(
                    RESET,
                    f"row remapping pending on GPU {gpu.index}",
                    f"{where}: {gpu.label}: row remapping Pending: Yes{rows_note}: applied "
                    "at the next GPU reset",
                )
            )
        dbe_pages = gpu.retired_double_bit
        retired = f", {dbe_pages} pages retired for double-bit errors" if dbe_pages else ""
        if gpu.retirement_pending:
            found.signs.append(
                _smi_sign(
                    RESET,
                    f"page retirement pending on GPU {gpu.index}",
                    f"{where}: {gpu.label}: page retirement pending{retired}: applied when "
                    "the driver reloads (a reboot)",
                )
            )
        if gpu.volatile_uncorrectable:
            count = gpu.volatile_uncorrectable
            found.signs.append(
                _smi_sign(
                    RESET,
                    f"{count} uncorrectable ECC errors on GPU {gpu.index}",
                    f"{where}: {gpu.label}: {count} uncorrectable ECC errors since the driver "
                    "loaded",
                )
            )
    for problem in report.problems:
        found.context.append(Evidence(None, "nvidia-smi", f"{where}: {problem}"))


def _smi_sign(kind: str, label: str, text: str) -> _Sign:
    return _Sign(kind, label, Evidence(None, "nvidia-smi", text))


def _agent_kind(reason: str) -> str:
    """The class of a reason the agent reported, on the Xid scale of the node's files."""
    xid = xid_of(reason)
    if xid is not None:
        meaning = classify_xid(xid)
        return meaning.kind if meaning is not None else RESET
    entry = agent_reason(reason)
    if entry is None:
        return UNKNOWN
    if entry.kind == PLUMBING:
        return MONITORING
    if entry.kind == SERVICE:
        return SERVICE_FAULT
    if entry.kind == GPU:
        return REPLACE if reason in _AGENT_REPLACE_REASONS and entry.replacing == HELPS else RESET
    return APPLICATION


def _is_ahr(condition: AgentCondition) -> bool:
    """An AcceleratedHardwareReady condition; a line cut before its conditionType counts
    when its reason is one of that condition's."""
    if condition.condition_type:
        return condition.condition_type == AHR
    return classify_ahr_reason(condition.reason) != "unknown"


def _agent_signs(name: str, evidence: NodeEvidence, found: _NodeSigns) -> None:
    """The Fatal AcceleratedHardwareReady conditions the agent's log says it sent since it
    last started: each one set the Node condition False, and it stays False until the agent
    restarts (pkg/manager/node_exporter.go sets conditions True only at start)."""
    journal = evidence.journals.get("nma")
    if journal is None:
        return
    from mignurse.evidence import agent_conditions

    entries = list(journal.entries)
    starts = [i for i, e in enumerate(entries) if _AGENT_START in e.message]
    if starts:
        version = _AGENT_VERSION.search(entries[starts[-1]].message)
        found.agent_version = version.group(1) if version else ""
    sent = [
        c
        for c in agent_conditions(entries[starts[-1] :] if starts else entries)
        if c.severity == _FATAL and _is_ahr(c)
    ]
    if not sent:
        return
    by_reason: dict[str, list[AgentCondition]] = {}
    for condition in sent:
        by_reason.setdefault(condition.reason, []).append(condition)
    found.agent = min(sent, key=lambda c: c.time)
    for reason, conditions in sorted(by_reason.items(), key=lambda item: item[1][0].time):
        first, last = conditions[0], conditions[-1]
        found.agent_reasons.append(reason)
        times = f" ×{len(conditions)} until {format_time(last.time)}" if len(conditions) > 1 else ""
        text = (
            f"{name}: the node monitoring agent sent AcceleratedHardwareReady=False {reason}"
            f"{times}: {clip(last.message, 240) or 'no message'}"
        )
        found.signs.append(
            _Sign(_agent_kind(reason), reason, Evidence(first.time, "journal:nma", text))
        )


def _labels(signs: Iterable[_Sign], limit: int = 3) -> str:
    labels = list(dict.fromkeys(s.label for s in signs))
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


# -- findings from the node's own files --------------------------------------------------------

_NO_CONDITION = "no AcceleratedHardwareReady condition (node monitoring agent not installed?)"


def _evidence_findings(inp: DiagnosisInput, signs: dict[str, _NodeSigns]) -> list[Finding]:
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for name in sorted(signs):
        node_signs = signs[name]
        kind = node_signs.kind
        if kind is None:
            continue
        node = inp.snapshot.nodes.get(name)
        cond = node.condition(AHR) if node is not None else None
        if cond is not None and cond.status == "False":
            continue  # its condition's finding carries this evidence
        if cond is not None:
            basis = "condition"
        elif node_signs.agent is not None:
            basis = "agent"
        else:
            basis = "none"
        pool, pool_kind = (node.pool, repair_kind(inp, node)) if node is not None else ("", "")
        groups.setdefault((pool, pool_kind, kind, basis), []).append(name)
    return [_evidence_finding(inp, key, names, signs) for key, names in sorted(groups.items())]


def _evidence_finding(
    inp: DiagnosisInput,
    key: tuple[str, str, str, str],
    names: list[str],
    signs: dict[str, _NodeSigns],
) -> Finding:
    pool, pool_kind, kind, basis = key
    evidence: list[Evidence] = []
    own: list[_Sign] = []
    first_agent: AgentCondition | None = None
    agent_reasons: list[str] = []
    for name in names:
        node_signs = signs[name]
        node = inp.snapshot.nodes.get(name)
        cond = node.condition(AHR) if node is not None else None
        if node is None:
            state = f"Node {name}: no Node object in the snapshot, read from its bundle"
        elif cond is None:
            state = f"Node {name}: {_NO_CONDITION}"
        else:
            state = condition_text(name, cond.type, cond.status, cond.reason, cond.message)
        evidence.append(Evidence(None, "condition", state))
        evidence.extend(node_signs.all_evidence())
        own.extend(node_signs.signs)
        agent = node_signs.agent
        if agent is not None and (first_agent is None or agent.time < first_agent.time):
            first_agent = agent
        agent_reasons.extend(r for r in node_signs.agent_reasons if r not in agent_reasons)

    count = f"{len(names)} node{'s' if len(names) != 1 else ''}"
    files = "the node's own files show" if len(names) == 1 else "the nodes' own files show"
    where = _where(pool, pool_kind)
    strongest = _labels(s for s in own if s.kind == kind)
    if basis == "agent" and first_agent is not None:
        reasons = some_of(agent_reasons)
        replaced_at = format_time(first_agent.time + AHR_TOLERATION)
        what = _WHAT[kind]
        if kind == UNKNOWN:
            versions = {signs[n].agent_version for n in names} - {""}
            version = versions.pop() if len(versions) == 1 else ""
            strange = [r for r in agent_reasons if _agent_kind(r) == UNKNOWN][:3]
            what = "; ".join(_unknown_text(r, version) for r in strange) or what
        shown = f"; {files} {strongest}" if strongest != reasons else ""
        repair = (
            "under Karpenter NodeRepair or EKS Auto Mode, repair replaces the node about "
            f"{_minutes(AHR_TOLERATION)} after the condition (reported "
            f"{format_time(first_agent.time)}: about {replaced_at})"
        )
        if kind == MONITORING:
            repair += " and its replacement fails the same way"
        summary = (
            f"{where}: {count} whose node monitoring agent log reports "
            f"AcceleratedHardwareReady=False ({reasons}){shown}: {what}; {repair}"
        )
    else:
        state = (
            _NO_CONDITION
            if basis == "none"
            else "AcceleratedHardwareReady not False (the node monitoring agent has not flagged it)"
        )
        summary = f"{where}: {count}, {state}; {files} {strongest}: {_WHAT[kind]}"
        if kind != APPLICATION:
            summary += "; no automatic repair acts without the condition"
    plumbing = [r for r in agent_reasons if _agent_kind(r) == MONITORING]
    if plumbing and kind != MONITORING:
        summary += (
            f"; the agent also reports {', '.join(plumbing)}: its GPU monitoring is broken, so "
            "a new node fails the same way until that is fixed"
        )
    if pool_kind == AUTO:
        summary += f"; {AUTO_MODE_INSTEAD}"
    if kind == REPLACE and not plumbing:
        runbooks: tuple[str, ...] = (RUNBOOK_REPLACE, RUNBOOK_CORDON_AND_COLLECT)
    elif kind == APPLICATION:
        runbooks = ()
    else:
        runbooks = (RUNBOOK_CORDON_AND_COLLECT,)
    return Finding(
        id=ACCELERATED_HARDWARE_NOT_READY,
        severity=_SEVERITY.get(kind, INFO),
        nodepool=pool,
        nodes=tuple(names),
        summary=summary,
        evidence=tuple(evidence),
        runbooks=runbooks,
        deadline=None,  # no automatic repair acts without a condition on the Node
    )


def _minutes(span: timedelta) -> str:
    return f"{int(span.total_seconds() // 60)} minutes"
