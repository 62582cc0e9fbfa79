"""What a repair backend is: who repairs a node (`detect_backend`: Karpenter, a managed node
group, Auto Mode or unknown), the interface a backend that can be paused implements
(`RepairBackend`: plan, apply and verify a pause or a resume, and undo either), and the
pieces both backends use (who paused, waiting for a change to take hold, a cluster read's
failure as a step's)."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from mignurse.cluster.client import ClusterError
from mignurse.model import LABEL_COMPUTE_TYPE, LABEL_NODEGROUP, LABEL_NODEPOOL
from mignurse.model.fields import AUTO_MODE_NODECLASS_GROUP
from mignurse.runner.step import StepContext, StepFailed, StepPlan, transient

POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Backend:
    """Who replaces unhealthy nodes: "karpenter", "nodegroup", "auto" or "unknown"."""

    kind: str
    pool: str  # NodePool or node group name; "" when not known
    why: str  # one line: the evidence


def detect_backend(
    node_labels: Mapping[str, str] | None,
    *,
    karpenter_deployment: bool,
    nodegroup: str = "",
    node_class_group: str = "",
) -> Backend:
    """The repair backend of a node (its labels, and the API group of its NodePool's
    `nodeClassRef`), or of the cluster when no node is given.

    Auto Mode wins over a nodepool label: Auto Mode nodes carry both, and a NodePool whose
    NodeClass is `eks.amazonaws.com`'s is Auto Mode's even when the node's label is missing
    (EKS user guide create-node-pool.html; docs/repair.md)."""
    labels = node_labels or {}
    if labels.get(LABEL_COMPUTE_TYPE) == "auto":
        return Backend(
            "auto",
            labels.get(LABEL_NODEPOOL, ""),
            f"the node is labelled {LABEL_COMPUTE_TYPE}=auto (EKS Auto Mode)",
        )
    if (pool := labels.get(LABEL_NODEPOOL)) and node_class_group == AUTO_MODE_NODECLASS_GROUP:
        return Backend(
            "auto",
            pool,
            f"its NodePool {pool} uses a {AUTO_MODE_NODECLASS_GROUP} NodeClass (EKS Auto Mode)",
        )
    if pool:
        return Backend("karpenter", pool, f"the node is labelled {LABEL_NODEPOOL}={pool}")
    if group := labels.get(LABEL_NODEGROUP):
        return Backend("nodegroup", group, f"the node is labelled {LABEL_NODEGROUP}={group}")
    if node_labels is not None and not nodegroup:
        return Backend("unknown", "", "the node has no Karpenter, Auto Mode or node group label")
    if nodegroup:
        return Backend("nodegroup", nodegroup, f"node group {nodegroup} was named")
    if karpenter_deployment:
        return Backend("karpenter", "", "a karpenter controller Deployment runs in the cluster")
    return Backend("unknown", "", "no karpenter Deployment and no node group was named")


class Found(NamedTuple):
    """What a repair step reads first: who repairs, the node (None for the cluster), and
    the karpenter controller Deployment (None when there is none)."""

    backend: Backend
    node: dict[str, Any] | None
    deploy: dict[str, Any] | None


class RepairBackend(Protocol):
    """Pausing and resuming one kind of repair. Every plan and applied record a backend
    makes carries `"backend": kind`, so the later phases, an undo and a resumed run find it
    again; each write is announced with `ctx.intend` and what its undo needs."""

    kind: str

    def pause_refusal(self, found: Found) -> str | None:
        """Why repair cannot be paused here, once the backend is known; None when it can."""
        ...

    def plan_pause(self, ctx: StepContext, found: Found) -> StepPlan:
        """The current repair setting and what the pause changes (nothing when it is off)."""
        ...

    def apply_pause(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        """Record the prior setting and turn repair off, as one change where the API allows."""
        ...

    def verify_pause(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        """None once repair is really off (rolled out, update finished), else why not."""
        ...

    def restore(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        """Undo a pause: put the recorded prior setting back and drop the record."""
        ...

    def resume_refusal(self, ctx: StepContext, found: Found) -> str | None:
        """Why there is nothing to resume here; None when there is."""
        ...

    def plan_resume(self, ctx: StepContext, found: Found) -> StepPlan:
        """The recorded prior setting, what it changes back, and who it puts at risk."""
        ...

    def apply_resume(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        """Restore the recorded prior setting and drop the record."""
        ...

    def verify_resume(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        """None once the prior setting is in force, else why not."""
        ...

    def pause_again(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        """Undo a resume: pause again with the same record, so a later resume still knows
        the prior setting."""
        ...

    def not_back(self, ctx: StepContext, applied: Mapping[str, Any], *, paused: bool) -> str | None:
        """What still differs from the state an undo puts back: the paused one (`paused`)
        or the prior one; None when it is all there."""
        ...


def paused_by(ctx: StepContext) -> str:
    if ctx.holder:
        return ctx.holder
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return "unknown"


def cluster_failed(what: str, exc: ClusterError) -> StepFailed:
    return StepFailed(f"{what}: {exc}", retryable=transient(exc))


def wait_until(ctx: StepContext, probe: Callable[[], str | None], what: str) -> str | None:
    """Poll `probe` (None = done) until the step's deadline; the last reason if it never is."""
    while True:
        ctx.check_cancel()
        reason = probe()
        if reason is None:
            return None
        if ctx.time_left() <= 0:
            return f"{what} not done after {int(ctx.timeout)} s: {reason}"
        ctx.log(f"waiting: {reason}")
        ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))
