"""mig-config-failed: mig-manager's `nvidia.com/mig.config.state` is `failed`, or stuck in
`pending`/`rebooting` far longer than a reconfigure takes (docs/mig.md).

Label changes leave no event or history transition, so with a snapshot alone "too long" is
measured from the node's creation: a reconfigure runs as soon as mig-manager starts there.
"""

from __future__ import annotations

from datetime import timedelta

from mignurse.diagnose.findings import (
    CRITICAL,
    MIG_CONFIG_FAILED,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_REAPPLY_MIG,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules.mig_hook import (
    MIG_MANAGER_WITHOUT_484,
    condition_evidence,
    evidence_problems,
    human,
    label_evidence,
    mig_hook_holds,
    mig_manager_version,
    node_evidence_of,
    paused_evidence,
    paused_operands,
    shown,
)
from mignurse.diagnose.supply import supply_of
from mignurse.gpu.profiles import describe_counts
from mignurse.model import (
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    MIG_NOT_SUPPORTED,
    PROBE_OK,
    MigState,
    Node,
)

# Each operand wait is ≤5 min (NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure) and the mode phase
# sleeps 30 s, so a healthy reconfigure on a new node is done well inside this.
STUCK_AFTER = timedelta(minutes=15)
STUCK_STATES = ("pending", "rebooting")


def _mig_summary(mig: MigState) -> Evidence:
    """One line on what the GPUs themselves say, next to the label."""
    gpus = [g for g in mig.gpus if g.mig_current != MIG_NOT_SUPPORTED]
    modes = sorted({f"{g.mig_current}/{g.mig_pending}" for g in gpus})
    counts: dict[str, int] = {}
    for gpu in gpus:
        for profile, n in gpu.profile_counts().items():
            counts[profile] = counts.get(profile, 0) + n
    text = (
        f"{len(gpus)} MIG-capable GPUs, mode current/pending {', '.join(modes) or 'n/a'}, "
        f"MIG devices {describe_counts(counts)}"
    )
    return Evidence(None, mig.source or "nvml", text)


def _explain(
    node: Node, paused: list[str], after_hook: bool, manager: tuple[int, ...] | None
) -> str:
    state = node.mig_config_state
    fixed = manager is not None and manager > MIG_MANAGER_WITHOUT_484
    if after_hook:
        return (
            "after MIG reconfiguration restarted kubelet mid-bootstrap "
            "(see mig-hook-kubelet-restart)"
        )
    if state == "failed" and paused:
        return (
            "operands still paused-for-mig-change, so the reconfigure died before restoring "
            "them; mig-manager does not retry a failed state (e.g. ERROR_LIBRARY_NOT_FOUND "
            "after a driver reload): read its pod log, deleting the pod retries"
        )
    if state == "failed":
        causes = "invalid config, a mode change that needs a reboot"
        if manager is None or fixed:
            # mig-parted#484: clients that do not stop within 5 min end here, labels restored
            causes += ", GPU clients that did not stop within 5 min"
        version = f"mig-manager {shown(manager)} " if manager is not None else "mig-manager "
        return (
            f"{version}gave up and restored the operand labels; it does not retry a failed "
            f"state ({causes}, or ERROR_LIBRARY_NOT_FOUND after a driver reload): read its "
            "pod log, deleting the pod retries"
        )
    if state == "pending" and paused and fixed:
        assert manager is not None
        return (
            f"pending with operands paused-for-mig-change, but mig-manager {shown(manager)} "
            "ends a client-shutdown timeout as failed with the labels restored "
            "(NVIDIA/mig-parted#484): mig-manager is not running on the node or died "
            "mid-reconfigure; check its pod"
        )
    if state == "pending" and paused:
        version = (
            f"mig-manager {shown(manager)}, without NVIDIA/mig-parted#484"
            if manager is not None
            else f"a mig-manager up to {shown(MIG_MANAGER_WITHOUT_484)}"
        )
        return (
            "pending with operands paused-for-mig-change: mig-manager gave up on GPU clients "
            f"that never stopped (client-shutdown timeout) and never restores the labels "
            f"({version}; "
            "NVIDIA/gpu-operator#2833); releases after it end this as failed with the labels "
            "restored (NVIDIA/mig-parted#484). Reapply the layout, or make it in user data "
            "before kubelet starts (`mignurse userdata`)"
        )
    if state == "rebooting":
        return "the reboot for a MIG mode change never completed the reconfigure"
    return "the reconfigure never finished"


def _node_finding(inp: DiagnosisInput, node: Node) -> Finding | None:
    state = node.mig_config_state
    age = inp.now - node.created if node.created is not None else None
    if state == "failed":
        pass
    elif state in STUCK_STATES:
        if age is None or age <= STUCK_AFTER:
            return None  # a reconfigure may still be running
    else:
        return None
    paused = paused_operands(node)
    not_ready = node.ready_status != "Ready"
    supply = supply_of(inp.snapshot, node)
    unusable = supply.unusable(node)
    severity = CRITICAL if not_ready or unusable else WARNING
    after_hook = mig_hook_holds(inp, node.name)
    manager = mig_manager_version(inp)

    consequences = [w for w, on in (("NotReady", not_ready), ("no GPU resources", unusable)) if on]
    also = f" ({', '.join(consequences)})" if consequences else ""
    how_long = f" on a node {human(age)} old" if age is not None and state != "failed" else ""
    summary = (
        f"{node.name}: {LABEL_MIG_CONFIG_STATE}={state} for {LABEL_MIG_CONFIG}="
        f"{node.mig_config or '(unset)'}{how_long}{also}: "
        f"{_explain(node, paused, after_hook, manager)}"
    )
    found: list[Evidence] = [
        label_evidence(node, LABEL_MIG_CONFIG),
        label_evidence(node, LABEL_MIG_CONFIG_STATE),
        *paused_evidence(node),
    ]
    found.append(supply.evidence(node))
    if node.ready is not None:
        found.append(condition_evidence(node.ready))
    if node.created is not None:
        found.append(Evidence(node.created, "node", f"Node {node.name} created"))
    evidence = node_evidence_of(inp, node.name)
    if evidence is not None:
        if evidence.mig is not None and evidence.mig.status == PROBE_OK:
            found.append(_mig_summary(evidence.mig))
        found.extend(evidence_problems(evidence))
    return Finding(
        id=MIG_CONFIG_FAILED,
        severity=severity,
        nodepool=node.pool,
        nodes=(node.name,),
        summary=summary,
        evidence=tuple(found),
        runbooks=(RUNBOOK_REAPPLY_MIG, RUNBOOK_CORDON_AND_COLLECT),
    )


def rule(inp: DiagnosisInput) -> list[Finding]:
    findings: list[Finding] = []
    for node in inp.gpu_nodes:
        if node.deleting is not None:
            continue
        finding = _node_finding(inp, node)
        if finding is not None:
            findings.append(finding)
    return findings
