"""The MIG steps that work through node labels: `mig-manager-off` and `pause-gpu-operands`,
their shared base `LabelStep` (set labels, remember each label's value before the run first
changed it, wait for what the labels make happen, undo to exactly those values), and the
node's pods of a given app, waited out as the labels make them go. Pausing is narrower than
mig-manager's: only operand labels that are `true` become `paused-for-mig-change`, where
mig-manager pauses every one that is not `false`, absent ones too, and sets them `true` after
(mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go): a label the node never had stays
absent, and no operand is started that was not running.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mignurse.cluster.client import NODES, PODS, ClusterError, NotFound
from mignurse.model import (
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_MIG_CONFIG_STATE,
)
from mignurse.runner.step import (
    Action,
    Change,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
    write_failed,
)
from mignurse.runner.steps.kube import get_node
from mignurse.runner.steps.mig.nodecmd import POLL_SECONDS

LABEL_MIG_MANAGER = LABEL_GPU_DEPLOY_PREFIX + "mig-manager"
PAUSED = "paused-for-mig-change"
# Operand deploy labels mig-manager pauses, and the pods it waits for (NVIDIA/mig-parted
# v0.15.0 pkg/mig/reconfigure/reconfigure.go shutdownKubernetesGPUClients,
# waitForPodsToBeDeleted). `client` is the label third-party GPU clients' DaemonSets select
# on (gpuClientDeployLabel): paused only when the node carries it, and its pods are the node's
# DaemonSet pods whose nodeSelector names it (waitForPodsWithNodeSelector).
OPERAND_KEYS = (
    "device-plugin",
    "gpu-feature-discovery",
    "dcgm-exporter",
    "dcgm",
    "nvsm",
    "client",
)
OPERAND_APPS = (
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-dcgm",
)
LABEL_GPU_CLIENT = LABEL_GPU_DEPLOY_PREFIX + "client"
OPERAND_SELECTOR_KEYS = (LABEL_GPU_CLIENT,)
MIG_MANAGER_APP = "nvidia-mig-manager"


def node_labels(raw: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((raw.get("metadata") or {}).get("labels") or {}).items()}


def set_labels(
    ctx: StepContext, labels: dict[str, str | None], remember: dict[str, Any] | None = None
) -> dict[str, str | None]:
    """Merge-patch node labels (None removes one); returns their values before this run first
    changed them (recorded before the patch, with `remember`, by `ctx.intend`)."""
    before = node_labels(get_node(ctx))
    prior = {key: before.get(key) for key in labels}
    recorded = dict(ctx.prior.get("labels") or {})
    if all(prior[k] == v for k, v in labels.items()):
        return {k: recorded.get(k, prior[k]) for k in labels}
    words = ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in labels.items())
    noted = ctx.intend(f"label node {ctx.node}: {words}", {"labels": prior, **(remember or {})})
    recorded = dict(noted.get("labels") or {})
    try:
        ctx.client.patch(NODES, ctx.node, {"metadata": {"labels": labels}})
    except NotFound:
        raise StepFailed(f"node {ctx.node} does not exist (any more)") from None
    except ClusterError as exc:
        raise write_failed(f"cannot label node {ctx.node}", exc) from None
    ctx.log(f"labelled {ctx.node}: {words}")
    return {k: recorded.get(k, prior[k]) for k in labels}


def pods_of(
    ctx: StepContext, apps: tuple[str, ...], selector_keys: tuple[str, ...] = ()
) -> list[str]:
    """namespace/name of the node's pods whose `app` label is one of `apps`, and of its
    DaemonSet pods whose nodeSelector names one of `selector_keys`."""
    found: list[str] = []
    try:
        pages = ctx.client.list_pages(PODS, field_selector=f"spec.nodeName={ctx.node}")
        for page, _version in pages:
            for pod in page:
                meta = pod.get("metadata") or {}
                if (meta.get("labels") or {}).get("app") in apps or _selects_on(pod, selector_keys):
                    found.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    except ClusterError as exc:
        raise StepFailed(
            f"cannot list pods on {ctx.node}: {exc}", retryable=transient(exc)
        ) from None
    return sorted(found)


def _selects_on(pod: dict[str, Any], keys: tuple[str, ...]) -> bool:
    """A DaemonSet's pod whose nodeSelector holds one of `keys`, whatever the value."""
    if not keys:
        return False
    owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
    daemon = any(
        isinstance(o, dict) and o.get("controller") and o.get("kind") == "DaemonSet" for o in owners
    )
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return daemon and isinstance(selector, dict) and any(k in selector for k in keys)


def wait_pods_gone(
    ctx: StepContext, apps: tuple[str, ...], what: str, selector_keys: tuple[str, ...] = ()
) -> None:
    """Wait for the node's pods of `apps` (and DaemonSet pods selecting on `selector_keys`) to
    go; a blip of the API server is waited out."""
    while True:
        try:
            left = pods_of(ctx, apps, selector_keys)
        except StepFailed as exc:
            if not exc.retryable or ctx.time_left() <= 0:
                raise
            left = [f"(unknown: {exc})"]
        if not left:
            return
        if ctx.time_left() <= 0:
            raise StepFailed(
                f"{what} still running on {ctx.node} after {ctx.timeout:g} s: {', '.join(left)}"
            )
        ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))


def _label_changes(
    ctx: StepContext, current: dict[str, str], wanted: dict[str, str | None]
) -> list[Change]:
    return [
        Change(f"node/{ctx.node}", f"label {key}", current.get(key), value)
        for key, value in wanted.items()
        if current.get(key) != value
    ]


def earlier_output(ctx: StepContext, marker: str) -> dict[str, Any] | None:
    for output in ctx.outputs.values():
        if isinstance(output, dict) and marker in output:
            return output
    return None


# -- the actions ------------------------------------------------------------------------------


class LabelStep(Action):
    """Shared apply/verify/undo for steps that set node labels and remember what was there."""

    harm = Harm.LOW
    can_undo = True
    retries = 2

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        raise NotImplementedError

    def plan(self, ctx: StepContext) -> StepPlan:
        labels = node_labels(get_node(ctx))
        wanted = self.wanted(ctx, labels)
        changes = _label_changes(ctx, labels, wanted)
        return StepPlan(
            changes=changes, nothing_to_do=not changes and self.idle(ctx), data={"set": wanted}
        )

    def idle(self, ctx: StepContext) -> bool:
        """Whether an unchanged label set leaves nothing to wait for."""
        return True

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        wanted: dict[str, str | None] = dict(plan.data.get("set") or {})
        when = format_server_time(ctx.client.server_now())
        prior = set_labels(ctx, wanted, {"labelledAt": when})
        written = parse_server_time(str(ctx.prior.get("labelledAt") or ""))
        return {"labels": prior, "set": wanted, **self.settle(ctx, written)}

    def settle(self, ctx: StepContext, written: datetime | None) -> dict[str, Any]:
        """Wait for what the labels make happen (`written`: when this run first wrote them,
        on the API server's clock); returns more to keep in `applied`."""
        return {}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        labels = node_labels(get_node(ctx))
        for key, value in (applied.get("set") or {}).items():
            if labels.get(key) != value:
                return f"label {key} is {labels.get(key)!r}, not {value!r}"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        prior: dict[str, str | None] = dict(applied.get("labels") or {})
        if prior:
            set_labels(ctx, prior)

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        labels = node_labels(get_node(ctx))
        wrong = [
            f"label {key} is {_shown(labels.get(key))}, not {_shown(value)}"
            for key, value in (applied.get("labels") or {}).items()
            if labels.get(key) != value
        ]
        return "; ".join(wrong) or None


def _shown(value: str | None) -> str:
    return "(absent)" if value is None else repr(value)


def format_server_time(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_server_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@action("mig-manager-off")
class MigManagerOff(LabelStep):
    title = "Turn the GPU operator's mig-manager off for this node"
    timeout = 300.0

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        return {LABEL_MIG_MANAGER: "false"}

    def plan(self, ctx: StepContext) -> StepPlan:
        plan = super().plan(ctx)
        plan.notes.append(
            "mig-manager stays off after the run so mignurse remains the only MIG writer; "
            "undo turns it back on as it was"
        )
        return plan

    def idle(self, ctx: StepContext) -> bool:
        return not pods_of(ctx, (MIG_MANAGER_APP,))

    def settle(self, ctx: StepContext, written: datetime | None) -> dict[str, Any]:
        wait_pods_gone(ctx, (MIG_MANAGER_APP,), "the mig-manager pod is")
        return {}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        left = pods_of(ctx, (MIG_MANAGER_APP,))
        if left:
            return f"mig-manager still runs on {ctx.node}: {', '.join(left)}"
        return super().verify(ctx, plan, applied)


@action("pause-gpu-operands")
class PauseGpuOperands(LabelStep):
    title = "Pause the GPU operands on the node"
    timeout = 300.0

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        wanted: dict[str, str | None] = {
            LABEL_GPU_DEPLOY_PREFIX + key: PAUSED
            for key in OPERAND_KEYS
            if labels.get(LABEL_GPU_DEPLOY_PREFIX + key) == "true"
        }
        wanted[LABEL_MIG_CONFIG_STATE] = "pending"
        return wanted

    def plan(self, ctx: StepContext) -> StepPlan:
        plan = super().plan(ctx)
        plan.notes.append(
            f"waits for the {', '.join(OPERAND_APPS)} pods, and DaemonSet pods selecting on "
            f"{LABEL_GPU_CLIENT} (third-party GPU clients), on the node to go; labels already "
            "false, or absent, stay so"
        )
        plan.nothing_to_do = False
        return plan

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        found = node_labels(get_node(ctx))
        # Every operand label as found, paused here or not, for resume-gpu-operands; recorded
        # with the labels' prior values, so a retry or a resume keeps the first reading.
        operands = {
            LABEL_GPU_DEPLOY_PREFIX + key: found[LABEL_GPU_DEPLOY_PREFIX + key]
            for key in OPERAND_KEYS
            if LABEL_GPU_DEPLOY_PREFIX + key in found
        }
        wanted: dict[str, str | None] = dict(plan.data.get("set") or {})
        when = format_server_time(ctx.client.server_now())
        prior = set_labels(ctx, wanted, {"labelledAt": when, "operandLabels": operands})
        return {
            "labels": prior,
            "set": wanted,
            "operandLabels": dict(ctx.prior.get("operandLabels") or operands),
            **self.settle(ctx, None),
        }

    def settle(self, ctx: StepContext, written: datetime | None) -> dict[str, Any]:
        wait_pods_gone(ctx, OPERAND_APPS, "GPU operand pods are", OPERAND_SELECTOR_KEYS)
        return {}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        left = pods_of(ctx, OPERAND_APPS, OPERAND_SELECTOR_KEYS)
        if left:
            return f"GPU operand pods still run on {ctx.node}: {', '.join(left)}"
        return super().verify(ctx, plan, applied)
