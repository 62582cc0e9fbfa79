"""MIG nodes of the simulator's MIG scenarios, as reapply-mig-no-hooks meets them."""

from __future__ import annotations

from typing import Any

from mignurse.cluster.client import NODES
from mignurse.model import LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE
from mignurse.runner.steps.mig.nodecmd import CONFIG_FILE, HOOKS_FILE

from .enginehelpers import Cluster

DEPLOY = "nvidia.com/gpu.deploy."
OPERANDS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")


def _ready(raw: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (raw.get("status") or {}).get("conditions") or ()
    )


def incident_node(c: Cluster) -> str:
    """The incident node: mig-manager restarted kubelet mid-bootstrap, it stays NotReady with
    mig.config.state=failed."""
    return next(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "failed"
    )


def ready_mig_node(c: Cluster) -> str:
    """The first Ready node with a MIG config label."""
    return sorted(
        n["metadata"]["name"]
        for n in c.sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG) and _ready(n)
    )[0]


def stuck_mig_node(c: Cluster) -> str:
    """A Ready MIG node left as a mig-manager that failed without touching kubelet leaves it:
    mig.config.state=failed and its operands paused-for-mig-change (the node this runbook is
    for). Its GPUs have MIG off in the sandbox, so the layout is really applied."""
    node = ready_mig_node(c)
    labels: dict[str, str | None] = {DEPLOY + key: "paused-for-mig-change" for key in OPERANDS}
    labels[LABEL_MIG_CONFIG_STATE] = "failed"
    c.client.patch(NODES, node, {"metadata": {"labels": labels}})
    return node


def set_not_ready(c: Cluster, node: str, message: str = "container runtime is down") -> None:
    """Kubelet reports NotReady (its container runtime went down), as kubelet posts it."""
    raw = c.node(node)
    conditions = [
        {**cond, "status": "False", "reason": "KubeletNotReady", "message": message}
        if cond.get("type") == "Ready"
        else cond
        for cond in raw["status"].get("conditions") or ()
    ]
    c.client.patch(NODES, node, {"status": {"conditions": conditions}}, subresource="status")


def no_hooks_sequence(root: str, config: str) -> list[list[str]]:
    """mig-parted's exact runs for a layout applied with no hooks (docs/mig.md), then the
    verify's assert: the config file and the empty hooks file under the sandbox's `root`."""
    cfg = ["-f", root + CONFIG_FILE, "-c", config]
    hooks = ["-k", root + HOOKS_FILE]
    return [
        ["assert", *cfg],
        ["-d", "apply", "--mode-only", *cfg, *hooks],
        ["-d", "assert", "--mode-only", *cfg],
        ["-d", "apply", *cfg, *hooks],
        ["assert", *cfg],
        ["assert", *cfg],
    ]
