"""`repair-risk`: traps that have not fired yet (docs/repair.md, docs/mig.md).

Three distinct risks, each its own finding:
- repair on for a GPU NodePool of five nodes or fewer: the 20% guard lets one unhealthy
  node at a time be replaced, so a fault that strikes nodes one by one is never held;
- repair on while healthy nodes run an image on which another node already hit DCGMError;
- the GPU operator's mig-manager able to stop kubelet on AL2023 (cgroup v2) with a host
  driver: the mig-hook incident waiting for its next MIG mode change.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from mignurse.diagnose.agent_reasons import plumbing
from mignurse.diagnose.automode import any_auto_mode
from mignurse.diagnose.facts import (
    AHR,
    REPAIR_TOLERATIONS,
    repair_allowance,
    unhealthy_for_repair,
)
from mignurse.diagnose.findings import (
    INFO,
    REPAIR_RISK,
    RUNBOOK_CORDON_AND_COLLECT,
    RUNBOOK_PAUSE_REPAIR,
    WARNING,
    Evidence,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.replacements import replacements
from mignurse.model import LABEL_GPU_DEPLOY_PREFIX, LABEL_MIG_CONFIG, Node, NodeClaim, format_time

SMALL_POOL = 5  # ceil(20% × n) == 1 up to here (docs/repair.md "The 20% guard")
MIG_MANAGER_LABEL = LABEL_GPU_DEPLOY_PREFIX + "mig-manager"


def rule(inp: DiagnosisInput) -> list[Finding]:
    return [*_small_pools(inp), *_dcgm_images(inp), *_mig_manager_cgroup2(inp)]


def _pools(inp: DiagnosisInput) -> dict[str, list[Node]]:
    """Live GPU nodes per Karpenter-managed pool (self-managed or Auto Mode)."""
    pools: dict[str, list[Node]] = {}
    for node in inp.gpu_nodes:
        if node.pool and node.pool_kind in ("nodepool", "auto") and node.deleting is None:
            pools.setdefault(node.pool, []).append(node)
    return pools


def _repair_on(inp: DiagnosisInput, nodes: list[Node]) -> tuple[bool, str]:
    if any_auto_mode(inp, nodes):
        return True, "EKS Auto Mode: node repair is built in and always on"
    if inp.karpenter is not None and inp.karpenter.node_repair:
        gates = inp.karpenter.feature_gates or "NodeRepair=true"
        version = f" v{inp.karpenter.version}" if inp.karpenter.version else ""
        return True, f"Karpenter{version} feature gates: {gates}"
    return False, ""


def _tolerations(inp: DiagnosisInput, nodes: list[Node]) -> Mapping[tuple[str, str], timedelta]:
    """The repair policies acting on the pool: its Karpenter release's (v1.1 repaired only
    Ready=False, docs/repair.md); Auto Mode runs the newest whatever a self-managed one runs."""
    return REPAIR_TOLERATIONS if any_auto_mode(inp, nodes) else inp.repair_tolerations


def _small_pools(inp: DiagnosisInput) -> list[Finding]:
    findings = []
    for pool, nodes in sorted(_pools(inp).items()):
        on, setting = _repair_on(inp, nodes)
        if not on or len(nodes) > SMALL_POOL:
            continue
        allowance = repair_allowance(len(nodes))
        tolerations = _tolerations(inp, nodes)
        unhealthy = [n for n in nodes if unhealthy_for_repair(n, tolerations)]
        ahr_false = [n for n in nodes if (c := n.condition(AHR)) and c.status == "False"]
        evidence = [
            Evidence(None, "settings", setting),
            Evidence(
                None,
                "label",
                f"NodePool {pool}: {len(nodes)} GPU node(s) "
                f"({', '.join(sorted(n.name for n in nodes))}); the guard allows "
                f"ceil(20% × {len(nodes)}) = {allowance} unhealthy node(s) to be repaired",
            ),
        ]
        for node in unhealthy:
            for cond in node.conditions:
                if (cond.type, cond.status) not in tolerations:
                    continue
                evidence.append(
                    Evidence(
                        cond.last_transition,
                        "condition",
                        f"Node {node.name}: {cond.type}={cond.status} {cond.reason} since "
                        f"{format_time(cond.last_transition)}",
                    )
                )
        # Bare pool size is a property, not a problem; it becomes one when GPU health
        # signals in the pool are already failing.
        severity = WARNING if ahr_false or unhealthy else INFO
        summary = (
            f"NodePool {pool}: node repair on for {len(nodes)} GPU node(s); the 20% guard "
            f"never holds a single unhealthy node (allowance {allowance}), so a fault that "
            "strikes nodes one at a time (bad image, DCGM plumbing) replaces every node in turn"
        )
        if unhealthy:
            summary += f"; {len(unhealthy)} node(s) match a repair policy now"
        findings.append(
            Finding(
                id=REPAIR_RISK,
                severity=severity,
                nodepool=pool,
                nodes=(),  # a property of the pool: its nodes are named in the evidence
                summary=summary,
                evidence=tuple(evidence),
                runbooks=(RUNBOOK_PAUSE_REPAIR,)
                if unhealthy and not any_auto_mode(inp, nodes)
                else (),
            )
        )
    return findings


def _dcgm_images(inp: DiagnosisInput) -> list[Finding]:
    """Images on which a node already hit DCGMError, and the healthy nodes still on them."""
    claims = inp.claims_by_node
    bad_images, failing_now = _dcgm_failures(inp, claims)
    # An image lacks DCGM when its nodes fail as a rule, not by exception: one bad node
    # among hundreds healthy on the same image is that node's problem.
    healthy_on: dict[str, int] = {}
    for node in inp.snapshot.nodes.values():
        claim = claims.get(node.name) or claims.get(node.provider_id)
        cond = node.condition(AHR)
        if claim is not None and cond is not None and cond.status == "True":
            healthy_on[claim.image_id] = healthy_on.get(claim.image_id, 0) + 1
    bad_images = {
        image: proof
        for image, proof in bad_images.items()
        if len(proof) >= healthy_on.get(image, 0)
    }
    if not bad_images:
        return []

    findings = []
    for pool, nodes in sorted(_pools(inp).items()):
        on, setting = _repair_on(inp, nodes)
        if not on or (AHR, "False") not in _tolerations(inp, nodes):
            continue  # nothing repairs a node for DCGMError here
        at_risk: dict[str, list[Node]] = {}
        for node in nodes:
            claim = claims.get(node.name) or claims.get(node.provider_id)
            if claim is None or claim.image_id not in bad_images or node.name in failing_now:
                continue
            at_risk.setdefault(claim.image_id, []).append(node)
        for image, risky in sorted(at_risk.items()):
            proof = bad_images[image]
            findings.append(
                _image_finding(
                    pool, image, risky, setting, proof, healthy_on.get(image, 0),
                    auto_mode=any_auto_mode(inp, risky),
                )
            )  # fmt: skip
    return findings


def _dcgm_failures(
    inp: DiagnosisInput, claims: Mapping[str, NodeClaim]
) -> tuple[dict[str, list[Evidence]], set[str]]:
    """Image → the DCGMError seen on it (nodes failing now, NodeClaims repaired for it), and
    the nodes failing now."""
    bad_images: dict[str, list[Evidence]] = {}
    failing_now: set[str] = set()
    for node in inp.snapshot.nodes.values():
        cond = node.condition(AHR)
        claim = claims.get(node.name) or claims.get(node.provider_id)
        if cond is None or claim is None or not claim.image_id:
            continue
        if cond.status == "False" and plumbing(cond.reason):
            failing_now.add(node.name)
            bad_images.setdefault(claim.image_id, []).append(
                Evidence(
                    cond.last_transition,
                    "condition",
                    f"Node {node.name} (NodeClaim {claim.name}, image {claim.image_id}): "
                    f'{AHR}=False {cond.reason} "{cond.message}" since '
                    f"{format_time(cond.last_transition)}",
                )
            )
    for rep in replacements(inp):
        if rep.image_id and rep.unhealthy and plumbing(rep.unhealthy[2]):
            bad_images.setdefault(rep.image_id, []).append(
                Evidence(
                    rep.ended,
                    "history" if rep.source == "history" else "nodeclaim",
                    f"NodeClaim {rep.claim} (node {rep.node or '?'}, image {rep.image_id}) "
                    f"ended {format_time(rep.ended)} after {rep.unhealthy[0]}="
                    f"{rep.unhealthy[1]} {rep.unhealthy[2]}",
                )
            )
    return bad_images, failing_now


def _image_finding(
    pool: str,
    image: str,
    risky: list[Node],
    setting: str,
    proof: list[Evidence],
    healthy: int,
    *,
    auto_mode: bool,
) -> Finding:
    names = sorted(n.name for n in risky)
    evidence = [
        Evidence(None, "settings", setting),
        Evidence(
            None,
            "nodeclaim",
            f"image {image}: {len(proof)} DCGMError node(s) seen, "
            f"{healthy} with AcceleratedHardwareReady=True now",
        ),
        *proof[:5],
    ]
    evidence += [Evidence(None, "nodeclaim", f"Node {name} runs image {image}") for name in names]
    return Finding(
        id=REPAIR_RISK,
        severity=WARNING,
        nodepool=pool,
        nodes=tuple(names),
        summary=(
            f"NodePool {pool}: {len(names)} node(s) run image {image}, on which "
            "another node already hit DCGMError; when their node monitoring agent "
            "reports the same, repair replaces them 10 min later"
        ),
        evidence=tuple(evidence),
        runbooks=() if auto_mode else (RUNBOOK_PAUSE_REPAIR, RUNBOOK_CORDON_AND_COLLECT),
    )


def _mig_manager_cgroup2(inp: DiagnosisInput) -> list[Finding]:
    """mig-manager stops kubelet when the driver is on the host and the MIG mode must
    change (docs/mig.md); on AL2023's cgroup v2 that left nodes NotReady for good."""
    # A bundle's clusterpolicy.json is read as it is: its spec may be anything, not an object.
    policy = inp.cluster_policy
    raw_spec = policy.get("spec") if isinstance(policy, Mapping) else None
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    if _enabled(spec, "migManager") is False:
        return []
    driver_enabled = _enabled(spec, "driver")
    groups: dict[str, list[tuple[Node, str]]] = {}  # pool → (node, what we know of it)
    for node in inp.gpu_nodes:
        if node.labels.get(MIG_MANAGER_LABEL) != "true" or not node.labels.get(LABEL_MIG_CONFIG):
            continue
        collected = inp.node_evidence.get(node.name)
        os_release = collected.os_release if collected else None
        al2023 = (
            os_release.is_al2023 if os_release is not None else "Amazon Linux 2023" in node.os_image
        )
        if not al2023:
            continue
        driver_note = _host_driver(node, driver_enabled)
        if driver_note is None:
            continue  # the operator's driver container: WITH_SHUTDOWN_HOST_GPU_CLIENTS=false
        cgroup = collected.cgroup if collected else None
        if cgroup is not None and cgroup.version == 1:
            continue
        cgroup_note = (
            f"cgroup v2 ({cgroup.fs_type or 'cgroup2fs'})"
            if cgroup is not None and cgroup.version == 2
            else "cgroup version unknown (AL2023 defaults to v2)"
        )
        groups.setdefault(node.pool, []).append((node, f"{cgroup_note}; {driver_note}"))

    findings = []
    for pool, members in sorted(groups.items()):
        evidence: list[Evidence] = []
        for node, notes in members:
            evidence.append(
                Evidence(
                    None,
                    "label",
                    f"Node {node.name}: {MIG_MANAGER_LABEL}=true, {LABEL_MIG_CONFIG}="
                    f"{node.mig_config}, state {node.mig_config_state or 'unset'}, "
                    f"{node.os_image or 'AL2023'}, {notes}",
                )
            )
        names = tuple(n.name for n, _ in members)
        known_v2 = all(note.startswith("cgroup v2") for _, note in members)
        findings.append(
            Finding(
                id=REPAIR_RISK,
                # The cgroup-v2 half of the trap is only proved by node evidence (a bundle).
                severity=WARNING if known_v2 else INFO,
                nodepool=pool,
                nodes=(),  # the pool's configuration is at risk, not these nodes' health
                summary=(
                    f"{'NodePool ' + pool if pool else 'Nodes outside any pool'}: mig-manager "
                    f"can stop kubelet on {len(names)} AL2023 node(s) "
                    f"({'cgroup v2' if known_v2 else 'cgroup version unknown'}, host driver) "
                    "at the next MIG mode change (every boot on Hopper and Blackwell, which lose "
                    "MIG mode on reboot); apply MIG in user "
                    "data with empty hooks (`mignurse userdata`) and set "
                    f"{MIG_MANAGER_LABEL}=false"
                ),
                evidence=tuple(evidence),
                runbooks=(),
            )
        )
    return findings


def _host_driver(node: Node, driver_enabled: bool | None) -> str | None:
    """Why we think the driver is on the host (mig-manager then stops kubelet), or None."""
    if node.gpu_deploy.get("driver") == "pre-installed":
        return "host driver (nvidia.com/gpu.deploy.driver=pre-installed)"
    if driver_enabled is False:
        return "host driver (ClusterPolicy driver.enabled=false)"
    if driver_enabled is True:
        return None
    return "host driver assumed (ClusterPolicy not read; the EKS AL2023 NVIDIA AMI ships one)"


def _enabled(spec: Mapping[str, Any], component: str) -> bool | None:
    """ClusterPolicy `spec.<component>.enabled`; None when not said."""
    section = spec.get(component)
    if not isinstance(section, Mapping):
        return None
    value = section.get("enabled")
    return value if isinstance(value, bool) else None
