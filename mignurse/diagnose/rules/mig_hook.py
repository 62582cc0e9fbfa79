"""mig-hook-kubelet-restart: MIG reconfiguration stopped and restarted kubelet while a
cgroup-v2 node was still bootstrapping, and containerd lost its cgroups (NVIDIA/mig-parted#368,
NVIDIA/gpu-operator#2415; docs/mig.md).

It rests on node evidence only (a support bundle): the control plane alone cannot tell a
kubelet restart from any other early NotReady; `notready_loop` names the suspicion then.
This module also holds the node-evidence helpers the other node rules share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from mignurse.cluster.history import Transition
from mignurse.diagnose.findings import (
    CRITICAL,
    MIG_HOOK_KUBELET_RESTART,
    RUNBOOK_REPLACE,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.diagnose.outlook import repair_outlook
from mignurse.model import (
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    PROBE_OK,
    Condition,
    Event,
    Node,
)
from mignurse.model.fields import parse_version

if TYPE_CHECKING:
    # A live read has no journal: the parser loads where a bundle's journal is read.
    from mignurse.evidence import JournalEntry, JournalParse
    from mignurse.evidence.journal import UnitAction

# mig-manager reconfigures as soon as its pod runs on a new node, so a stop this soon after
# kubelet's first start is the bootstrap-time restart (the report: under a minute).
RESTART_WINDOW = timedelta(minutes=10)
PAUSED = "paused-for-mig-change"  # deploy label value during a reconfigure (docs/mig.md)
MIG_STATES_IN_FLIGHT = ("pending", "rebooting", "failed")
MAX_LINES = 4  # journal lines of one kind quoted as evidence; the rest are counted

# mig-manager adds kubelet to the services it stops on a mode change only when its kubelet
# unit setting is not empty (NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go,
# cmd/nvidia-mig-manager/main.go `HOST_KUBELET_SYSTEMD_SERVICE`; v0.12.3
# deployments/container/reconfigure-mig.sh the same), and the operator passes
# spec.migManager.env to its container (gpu-operator v24.9.2 to v26.7.0 object_controls.go).
KUBELET_SETTING = "HOST_KUBELET_SYSTEMD_SERVICE"
FIX = (
    f'fix: set {KUBELET_SETTING} to "" in the ClusterPolicy\'s spec.migManager.env (mig-manager '
    "then stops the other host GPU clients, not kubelet); or set "
    "nvidia.com/gpu.deploy.mig-manager=false for these nodes and apply the layout in user data "
    "with `nvidia-mig-parted apply` and an empty hooks file before kubelet starts (`mignurse "
    "userdata` writes it)"
)

# The last gpu-operator release read: its mig-manager ConfigMap sets
# WITH_SHUTDOWN_HOST_GPU_CLIENTS from whether the driver is on the host, with no user setting
# (NVIDIA/gpu-operator@v26.7.0 assets/state-mig-manager/0420_configmap.yaml). The setting is
# NVIDIA/gpu-operator#2702 (commit 5aa78c1, "Decouple host drivers and shutdown"), which no tag
# up to v26.7.0 contains.
OPERATOR_CHECKED = (26, 7, 0)
SHUTDOWN_SETTING = "WITH_SHUTDOWN_HOST_GPU_CLIENTS"
# The last mig-manager release read without NVIDIA/mig-parted#484 ("Set failed state when
# pod-deletion wait or validator restart fails", merged after v0.15.0 and picked for
# release-0.15): up to it, GPU clients that do not stop within 5 min leave the operand
# labels paused-for-mig-change and the state pending for good; with it, the state becomes
# failed and the labels are restored.
MIG_MANAGER_WITHOUT_484 = (0, 15, 0)
MIG_MANAGER_IMAGE = "k8s-mig-manager"  # gpu-operator v26.7.0 values.yaml migManager.image


def mig_manager_version(inp: DiagnosisInput) -> tuple[int, ...] | None:
    """The mig-manager version the ClusterPolicy deploys (spec.migManager.version, as in
    gpu-operator v26.7.0 deployments/gpu-operator/values.yaml `v0.15.0`), else the tag of the
    `k8s-mig-manager` image its DaemonSet runs (the operator composes the image from that
    repository, image and version); None unknown, or when DaemonSets disagree."""
    spec = (inp.cluster_policy or {}).get("spec")
    manager = spec.get("migManager") if isinstance(spec, dict) else None
    version = manager.get("version") if isinstance(manager, dict) else None
    if isinstance(version, str) and (parsed := parse_version(version)) is not None:
        return parsed
    tags = {
        parse_version(container.tag)
        for daemonset in inp.daemonsets or ()
        for container in daemonset.containers
        if _image_name(container.image) == MIG_MANAGER_IMAGE
    }
    tags.discard(None)
    return tags.pop() if len(tags) == 1 else None


def _image_name(image: str) -> str:
    """`k8s-mig-manager` of `nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0@sha256:…`."""
    last = image.split("@", 1)[0].rpartition("/")[2]
    return last.partition(":")[0]


def operator_version(inp: DiagnosisInput) -> tuple[int, ...] | None:
    """The gpu-operator version from its ClusterPolicy's chart label
    `app.kubernetes.io/version` (deployments/gpu-operator/templates/_helpers.tpl
    "gpu-operator.labels" at v26.7.0); None unknown."""
    meta = (inp.cluster_policy or {}).get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    version = labels.get("app.kubernetes.io/version") if isinstance(labels, dict) else None
    return parse_version(version) if isinstance(version, str) else None


def shown(version: tuple[int, ...]) -> str:
    return "v" + ".".join(str(p) for p in version)


def shutdown_advice(inp: DiagnosisInput) -> str:
    """How to keep mig-manager from stopping kubelet, for the operator version running."""
    version = operator_version(inp)
    if version is not None and version > OPERATOR_CHECKED:
        return (
            f"gpu-operator {shown(version)} is newer than {shown(OPERATOR_CHECKED)}: if it "
            f"carries NVIDIA/gpu-operator#2702, setting {SHUTDOWN_SETTING}=false for mig-manager "
            "keeps kubelet running; otherwise " + FIX.removeprefix("fix: ")
        )
    return FIX


# containerd/runc lines that show lost cgroups or broken shims (fixtures from the incident).
_CONTAINERD_FAILURE = re.compile(
    r"cgroup|failed to create shim|OCI runtime create failed|failed to remove runc container",
    re.IGNORECASE,
)
_CONTAINERD_ERROR_LEVEL = re.compile(r"level=(error|fatal|warning)")
# klog error lines of kubelet ("E1129 03:02:15.300180 …") about the runtime or sandboxes.
_KUBELET_ERROR = re.compile(r"^E\d{4} ")
_KUBELET_FAILURE = re.compile(
    r"cgroup|CreatePodSandbox|shim|container runtime is down|PLEG is not healthy"
    r"|Container runtime network not ready",
    re.IGNORECASE,
)
_NOT_READY = re.compile(r"Node became not ready")
_SANDBOX_START = re.compile(r"RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),")


# -- helpers the node rules share --------------------------------------------------------------


def node_evidence_of(inp: DiagnosisInput, name: str) -> NodeEvidence | None:
    return inp.node_evidence.get(name)


def clip(text: str, limit: int = 300) -> str:
    """One line of node text, short enough for a table cell."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def human(delta: timedelta) -> str:
    """20 s, 4 min, 2 h 5 min, 3 d 4 h."""
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


# containerd repeats the journal's own timestamp inside its message: drop it, keep the error.
_LOGRUS_TIME = re.compile(r'^time="[^"]*" ')


def journal_evidence(entry: JournalEntry) -> Evidence:
    pid = f"[{entry.pid}]" if entry.pid is not None else ""
    message = _LOGRUS_TIME.sub("", entry.message)
    text = f"line {entry.line}: {entry.ident}{pid}: {clip(message, 480)}"
    return Evidence(entry.time, entry.source or "journal", text)


def label_evidence(node: Node, key: str) -> Evidence:
    value = node.labels.get(key)
    text = f"{key}={value}" if value is not None else f"{key} not set"
    return Evidence(None, "label", text)


def condition_evidence(cond: Condition) -> Evidence:
    parts = [f"{cond.type}={cond.status}"]
    if cond.reason:
        parts.append(f"reason {cond.reason}")
    if cond.message:
        parts.append(f"message {clip(cond.message, 200)!r}")
    return Evidence(cond.last_transition, "condition", ", ".join(parts))


def event_evidence(event: Event) -> Evidence:
    last = event.last_seen
    count = f" (x{event.count}, last {last:%H:%M:%SZ})" if event.count > 1 and last else ""
    if event.count > 1 and last is None:
        count = f" (x{event.count})"
    source = f" from {event.source}" if event.source else ""
    text = f"{event.type} {event.reason}{source}: {clip(event.message, 200)}{count}"
    return Evidence(event.first_seen or event.last_seen, "event", text)


def transition_evidence(transition: Transition) -> Evidence:
    reason = f" ({transition.reason})" if transition.reason else ""
    text = f"{transition.condition} → {transition.status}{reason}"
    return Evidence(transition.time, "history", text)


def node_events(inp: DiagnosisInput, node: Node | str) -> list[Event]:
    """Events about the Node, from the API server and the local history, oldest first."""
    name = node if isinstance(node, str) else node.name
    return list(inp.events_by_node.get(name, ()))


def paused_operands(node: Node) -> list[str]:
    """Operands whose deploy label says paused-for-mig-change (docs/mig.md)."""
    return sorted(k for k, v in node.gpu_deploy.items() if v == PAUSED)


def paused_evidence(node: Node) -> list[Evidence]:
    return [
        Evidence(None, "label", f"{LABEL_GPU_DEPLOY_PREFIX}{operand}={PAUSED}")
        for operand in paused_operands(node)
    ]


def ready_repair_deadline(inp: DiagnosisInput, node: Node) -> datetime | None:
    """When automatic repair replaces a node whose Ready is False/Unknown."""
    return repair_outlook(inp, node, "Ready").deadline


def evidence_problems(evidence: NodeEvidence) -> list[Evidence]:
    """What could not be read in a node's bundle, as evidence (never an exception)."""
    found: list[Evidence] = []

    def add(source: str, problems: Iterable[str]) -> None:
        problems = list(problems)
        if not problems:
            return
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        text = "; ".join(clip(p, 160) for p in problems[:3]) + more
        found.append(Evidence(None, source, f"could not read all of it: {text}"))

    add("node:manifest", evidence.problems)
    for unit in sorted(evidence.journals):
        journal = evidence.journals[unit]
        add(journal.source or f"journal:{unit}", journal.problems)
    if evidence.cgroup is not None:
        add("node:cgroup-fs", evidence.cgroup.problems)
    if evidence.os_release is not None:
        add("node:os-release", evidence.os_release.problems)
    if evidence.cloud_init is not None:
        add("node:cloud-init-status", evidence.cloud_init.problems)
    if evidence.mig is not None and evidence.mig.status != PROBE_OK:
        detail = f": {clip(evidence.mig.detail, 200)}" if evidence.mig.detail else ""
        found.append(
            Evidence(
                None, evidence.mig.source or "nvml", f"MIG probe {evidence.mig.status}{detail}"
            )
        )
    return found


def usable_journal(evidence: NodeEvidence | None, unit: str) -> JournalParse | None:
    """The unit's journal when it holds at least one readable entry."""
    if evidence is None:
        return None
    journal = evidence.journals.get(unit)
    return journal if journal is not None and journal.entries else None


# -- the rule --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigHookMatch:
    node: str
    first_start: datetime
    stopped: datetime
    restarted: datetime
    evidence: tuple[Evidence, ...] = field(default=())


def _boot_entries(journal: JournalParse) -> list[JournalEntry]:
    """Entries of the latest boot that logged a kubelet start (an earlier boot's kubelet
    is a different bootstrap)."""
    starts = [
        e.boot
        for e in journal.entries
        if e.ident == "systemd" and e.message.startswith(("Started kubelet", "Starting kubelet"))
    ]
    boot = max(starts) if starts else max((e.boot for e in journal.entries), default=0)
    return [e for e in journal.entries if e.boot == boot]


def _find(entries: Iterable[JournalEntry], when: datetime) -> JournalEntry | None:
    return next((e for e in entries if e.time == when and e.ident == "systemd"), None)


def mig_hook_match(inp: DiagnosisInput, name: str) -> MigHookMatch | None:
    """The incident's node-evidence conditions, all of them, or None: cgroup v2; kubelet
    stopped and restarted within RESTART_WINDOW of its first start; a MIG link (the node's
    mig.config label or mig-manager in the journals); containerd/kubelet failures after."""
    evidence = node_evidence_of(inp, name)
    kubelet = usable_journal(evidence, "kubelet")
    if evidence is None or kubelet is None:
        return None
    if evidence.cgroup is None or evidence.cgroup.version != 2:
        return None
    entries = _boot_entries(kubelet)
    restart = _early_restart(entries)
    if restart is None:
        return None
    first, stop, again = restart

    containerd = usable_journal(evidence, "containerd")
    containerd_entries = list(containerd.entries) if containerd is not None else []
    runtime_failures = [
        e
        for e in containerd_entries
        if e.time >= stop.time
        and _CONTAINERD_ERROR_LEVEL.search(e.message)
        and _CONTAINERD_FAILURE.search(e.message)
    ]
    kubelet_failures = [
        e
        for e in entries
        if e.time >= again.time
        and e.ident == "kubelet"
        and (
            (_KUBELET_ERROR.match(e.message) and _KUBELET_FAILURE.search(e.message))
            or _NOT_READY.search(e.message)
        )
    ]
    if not runtime_failures and not kubelet_failures:
        return None

    node = inp.snapshot.nodes.get(name)
    early_pods = [
        e
        for e in containerd_entries
        if first.time <= e.time <= stop.time and _SANDBOX_START.search(e.message)
    ]
    mig_manager_lines = [
        e for e in (*entries, *containerd_entries) if "nvidia-mig-manager" in e.message
    ]
    if not (node is not None and node.mig_config) and not mig_manager_lines:
        return None  # a kubelet restart with nothing tying it to MIG is someone else's

    found = _node_side(evidence.cgroup.fs_type, evidence, entries, restart)
    quoted = {id(e) for e in early_pods[:MAX_LINES]}
    found.extend(journal_evidence(e) for e in early_pods[:MAX_LINES])
    found.extend(journal_evidence(e) for e in mig_manager_lines[:1] if id(e) not in quoted)
    for kind, lines in (("containerd", runtime_failures), ("kubelet", kubelet_failures)):
        found.extend(journal_evidence(e) for e in lines[:MAX_LINES])
        if len(lines) > MAX_LINES:
            found.append(
                Evidence(
                    lines[-1].time,
                    lines[-1].source,
                    f"{len(lines) - MAX_LINES} more {kind} failure lines after the restart",
                )
            )
    if node is not None:
        found.extend(_cluster_evidence(inp, node))
    found.extend(evidence_problems(evidence))
    return MigHookMatch(name, first.time, stop.time, again.time, tuple(found))


def _early_restart(
    entries: list[JournalEntry],
) -> tuple[UnitAction, UnitAction, UnitAction] | None:
    """kubelet's first start, a stop within RESTART_WINDOW of it, and the start after that
    stop; None unless all three are in the journal."""
    from mignurse.evidence.journal import (
        UNIT_STARTED,
        UNIT_STARTING,
        UNIT_STOPPED,
        UNIT_STOPPING,
        systemd_unit_actions,
    )

    actions = systemd_unit_actions(entries, "kubelet.service")
    first = next((a for a in actions if a.action == UNIT_STARTED), None) or next(
        (a for a in actions if a.action == UNIT_STARTING), None
    )
    if first is None:
        return None
    stop = next(
        (
            a
            for a in actions
            if a.time > first.time
            and a.action in (UNIT_STOPPING, UNIT_STOPPED)
            and a.time - first.time <= RESTART_WINDOW
        ),
        None,
    )
    if stop is None:
        return None
    # `>=`: a journal in whole seconds (`journalctl -o short-iso`; the default format of
    # awslabs/amazon-eks-ami log-collector-script/linux/eks-log-collector.sh, `journalctl
    # --unit=kubelet`) can log the stop and the start after it in the same second.
    again = next(
        (a for a in actions if a.time >= stop.time and a.action in (UNIT_STARTING, UNIT_STARTED)),
        None,
    )
    if again is None:
        return None
    return first, stop, again


def _node_side(
    cgroup_fs: str,
    evidence: NodeEvidence,
    entries: list[JournalEntry],
    restart: tuple[UnitAction, UnitAction, UnitAction],
) -> list[Evidence]:
    """The cgroup v2 file system, the OS, and systemd's lines for the start, stop and
    restart of kubelet."""
    found = [Evidence(None, "node:cgroup-fs", f"/sys/fs/cgroup is {cgroup_fs} (cgroup v2)")]
    if evidence.os_release is not None and evidence.os_release.pretty_name:
        found.append(Evidence(None, "node:os-release", evidence.os_release.pretty_name))
    for action in restart:
        entry = _find(entries, action.time)
        if entry is not None:
            found.append(journal_evidence(entry))
    return found


def mig_hook_holds(inp: DiagnosisInput, name: str) -> bool:
    """Whether `mig-hook-kubelet-restart` explains this node (so `notready-loop` stays quiet)."""
    return mig_hook_match(inp, name) is not None


def _cluster_evidence(inp: DiagnosisInput, node: Node) -> list[Evidence]:
    found = [label_evidence(node, LABEL_MIG_CONFIG)]
    if node.mig_config_state:
        found.append(label_evidence(node, LABEL_MIG_CONFIG_STATE))
    found.extend(paused_evidence(node))
    if node.ready is not None:
        found.append(condition_evidence(node.ready))
    for event in node_events(inp, node):
        if event.reason in ("NodeReady", "NodeNotReady", "Starting"):
            found.append(event_evidence(event))
    return found


def rule(inp: DiagnosisInput) -> list[Finding]:
    findings: list[Finding] = []
    for name in sorted(inp.node_evidence):
        match = mig_hook_match(inp, name)
        if match is None:
            continue
        node = inp.snapshot.nodes.get(name)
        after = human(match.stopped - match.first_start)
        outcome = (
            "the node stays NotReady"
            if node is None or node.ready_status != "Ready"
            else "the node is Ready now but its containers may have lost GPU access"
        )
        summary = (
            f"MIG reconfiguration stopped kubelet on {name} {after} after its first start "
            f"(cgroup v2, still bootstrapping); containerd lost its cgroups and {outcome}: "
            f"replace it; {shutdown_advice(inp)}"
        )
        findings.append(
            Finding(
                id=MIG_HOOK_KUBELET_RESTART,
                severity=CRITICAL,
                nodepool=node.pool if node is not None else "",
                nodes=(name,),
                summary=summary,
                evidence=match.evidence,
                runbooks=(RUNBOOK_REPLACE,),
                deadline=ready_repair_deadline(inp, node) if node is not None else None,
            )
        )
    return findings
