"""`resume-gpu-operands`: the operand labels back to what the pause found, the config marked
applied, then the wait until the node serves the new layout: allocatable held steady from a
device plugin started after the labels were restored, or, on a DRA node, ResourceSlices that
publish the layout on every GPU from a kubelet plugin started after the reconfigure
(restarted once if it keeps the old devices).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from mignurse.cluster.client import PODS, ClusterError, Forbidden, NotFound
from mignurse.cluster.dra import NodeDra, node_dra
from mignurse.gpu.profiles import (
    describe_counts,
    mig_slices,
)
from mignurse.model import (
    DRA_GPU_DRIVER,
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    Node,
    NodeDevices,
)
from mignurse.runner.step import (
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
)
from mignurse.runner.steps.kube import get_node, not_ready, replace_hint
from mignurse.runner.steps.mig.labels import (
    OPERAND_KEYS,
    PAUSED,
    LabelStep,
    earlier_output,
    node_labels,
    parse_server_time,
)
from mignurse.runner.steps.mig.nodecmd import POLL_SECONDS
from mignurse.runner.steps.mig.target import MigTarget, resolve_target
from mignurse.runner.steps.settle import (
    READS_PER_WINDOW,
    Settle,
    serving_problem,
    settle_seconds,
)

DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
# The DRA driver (k8s-dra-driver-gpu@v25.8.0) enumerates MIG devices only when its kubelet plugin
# starts (cmd/gpu-kubelet-plugin/device_state.go NewDeviceState): given this long to show the
# new devices by itself, it is restarted.
DRA_REPUBLISH_GRACE_SECONDS = 30.0


def allocatable_problem(raw: dict[str, Any], expected: dict[str, int]) -> str | None:
    """Why the node's allocatable is not the expected GPU resources, or None."""
    node = Node.from_api(raw)
    allocatable = {
        str(k): str(v)
        for k, v in ((raw.get("status") or {}).get("allocatable") or {}).items()
        if str(k).startswith("nvidia.com/")
    }
    wrong = [f"{r}={allocatable.get(r, '(none)')}" for r, n in expected.items()
             if allocatable.get(r) != str(n)]  # fmt: skip
    extra = [f"{r}={v}" for r, v in allocatable.items() if r not in expected and v not in ("0", "")]
    if not wrong and not extra:
        return None
    seen = describe_counts(mig_slices(node)) if node.mig_resources else ", ".join(wrong + extra)
    want = ", ".join(f"{r}={n}" for r, n in expected.items())
    return f"allocatable shows {seen or 'nothing'}; expected {want}"


def published_problem(
    devices: NodeDevices | None, target: MigTarget, gpus: int | None
) -> str | None:
    """Why the node's gpu.nvidia.com ResourceSlices do not publish the target layout on
    every GPU, or None."""
    if devices is None:
        return f"no {DRA_GPU_DRIVER} ResourceSlice published for the node"
    if not devices.complete:
        return (
            f"{devices.slices} of {devices.slices_expected} ResourceSlices of pool "
            f"{devices.pool} generation {devices.generation} published"
        )
    if devices.dynamic:
        return None  # DynamicMIG offers placements and makes MIG devices on allocation
    want = target.per_gpu if target.layout.mig_enabled else {}
    per_gpu = devices.per_gpu()
    problems = []
    if gpus is not None and len(per_gpu) != gpus:
        problems.append(f"{len(per_gpu)} GPUs published, {gpus} expected")
    minors = {d.gpu_key: d.gpu_minor for d in (*devices.gpus, *devices.migs)}
    for key, counts in per_gpu.items():
        if counts != want:
            minor = minors.get(key)
            problems.append(f"GPU {minor if minor is not None else key}: {describe_counts(counts)}")
    if not problems:
        return None
    return (
        "ResourceSlices publish " + "; ".join(problems) + f"; expected {describe_counts(want)}"
        " per GPU"
    )


@action("resume-gpu-operands")
class ResumeGpuOperands(LabelStep):
    title = "Restore the GPU operands and mark the MIG config applied"
    timeout = 300.0

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        target = resolve_target(ctx)
        paused = earlier_output(ctx, "operandLabels")
        wanted: dict[str, str | None] = {}
        if paused is not None:
            for key, prior in (paused.get("operandLabels") or {}).items():
                wanted[key] = "true" if prior in ("true", PAUSED) else prior
        else:  # planning before the pause step ran: what it will have paused
            for key in OPERAND_KEYS:
                value = labels.get(LABEL_GPU_DEPLOY_PREFIX + key)
                if value in ("true", PAUSED):
                    wanted[LABEL_GPU_DEPLOY_PREFIX + key] = "true"
        wanted[LABEL_MIG_CONFIG] = target.config
        wanted[LABEL_MIG_CONFIG_STATE] = "success"
        return wanted

    def plan(self, ctx: StepContext) -> StepPlan:
        plan = super().plan(ctx)
        target = resolve_target(ctx)
        expected = target.expected_resources()
        plan.notes.append(
            "operand labels go back to what the pause step found; one already "
            f"{PAUSED} before the run becomes true, as mig-manager does on success"
        )
        if _dra_of(ctx).on:
            per_gpu = describe_counts(target.per_gpu) if target.layout.mig_enabled else "no MIG"
            plan.notes += [
                f"then waits until the node's {DRA_GPU_DRIVER} ResourceSlices publish {per_gpu} "
                "on every GPU, from a DRA kubelet plugin started after the reconfigure",
                f"if after {DRA_REPUBLISH_GRACE_SECONDS:.0f} s they still show the old devices, "
                "the DRA kubelet plugin pod on the node is deleted: its DaemonSet starts a new "
                "one, and the driver enumerates MIG devices only when it starts",
            ]
        else:
            plan.notes.append(
                "then waits until allocatable shows "
                + ", ".join(f"{r}={n}" for r, n in expected.items())
            )
        plan.nothing_to_do = False
        return plan

    def settle(self, ctx: StepContext, written: datetime | None) -> dict[str, Any]:
        target = resolve_target(ctx)
        verified = earlier_output(ctx, "migUuids")  # verify-mig-layout's (preflight has perGpu too)
        gpus = target.gpus
        if gpus is None and verified is not None and isinstance(verified.get("gpus"), int):
            gpus = int(verified["gpus"])
        expected = target.expected_resources(gpus)
        first = get_node(ctx)
        dra = _dra_of(ctx).on
        # A DRA node's device plugin, if it runs beside the driver at all, shows in allocatable.
        advertised = not dra or bool(Node.from_api(first).gpu_allocatable)
        plugin = (
            advertised
            and node_labels(first).get(LABEL_GPU_DEPLOY_PREFIX + "device-plugin") == "true"
        )
        restarted = False
        window = settle_seconds(ctx)
        held = Settle(window)
        while True:
            raw = get_node(ctx)
            problem = _not_serving(ctx, raw)
            if problem is None and advertised:
                problem = allocatable_problem(raw, expected)
            if problem is None and plugin:
                problem = self._plugin_problem(ctx, written)
            if problem is None and dra:
                made = (earlier_output(ctx, "migUuids") or {}).get("migUuids")
                uuids = frozenset(made) if isinstance(made, list) else frozenset()
                problem, restarted = self._published(ctx, target, gpus, uuids, written, restarted)
            if held.observe(ctx.client.server_now(), problem):
                offered = (
                    f"publishes {DRA_GPU_DRIVER} devices "
                    + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "no MIG")
                    + " per GPU"
                    if dra
                    else "advertises " + ", ".join(f"{r}={n}" for r, n in expected.items())
                )
                summary = f"{ctx.node} stayed Ready and {offered}: {held.served_for()}"
                ctx.log(summary)
                kept: dict[str, Any] = {
                    "expected": expected if advertised else {},
                    "summary": summary,
                }
                if dra:
                    kept["dra"] = {"gpus": gpus, "restartedPlugin": restarted}
                return kept
            if ctx.time_left() <= 0:
                down = not_ready(raw)
                raise StepFailed(
                    f"after {ctx.timeout:g} s "
                    + (problem or f"the node did not serve for {window:g} s of cluster time")
                    + f" (seen: {held.story()})"
                    + (f"; it stays cordoned: {replace_hint(ctx.node)}" if down else "")
                )
            ctx.sleep_cluster(window / READS_PER_WINDOW, POLL_SECONDS)

    @staticmethod
    def _published(
        ctx: StepContext,
        target: MigTarget,
        gpus: int | None,
        uuids: frozenset[str],
        written: datetime | None,
        restarted: bool,
    ) -> tuple[str | None, bool]:
        """Why the DRA driver does not publish the layout yet (None: it does, and what it
        publishes was read after the reconfigure), and whether its plugin pod was restarted.
        After the reconfigure means: the MIG devices' UUIDs are those verify-mig-layout read
        (`uuids`), or where either side names none, a plugin pod started since. One that
        still shows the old devices once DRA_REPUBLISH_GRACE_SECONDS have passed is
        restarted, once."""
        try:
            dra = node_dra(ctx.client, ctx.node)
        except ClusterError as exc:
            if not transient(exc):
                raise StepFailed(f"cannot read the DRA devices of {ctx.node}: {exc}") from None
            return f"cannot read the DRA devices of {ctx.node}: {exc}", restarted
        since = written - timedelta(seconds=1) if written else None  # Date headers: 1 s
        fresh = [p for p in dra.plugin_pods if p.phase == "Running"]
        if since is not None:
            fresh = [p for p in fresh if p.created is not None and p.created >= since]
        problem = published_problem(dra.devices, target, gpus)
        published = {d.uuid for d in dra.devices.migs if d.uuid} if dra.devices else set()
        if problem is None and uuids and published:
            if published != uuids:
                problem = (
                    f"ResourceSlices publish {len(published - uuids)} MIG device(s) the GPUs no "
                    "longer have (published before the reconfigure)"
                )
        elif problem is None and dra.plugin_pods and not fresh:
            problem = f"no DRA kubelet plugin started on {ctx.node} since the reconfigure"
        if problem is None or restarted or since is None or not dra.plugin_pods:
            return problem, restarted
        waited = (ctx.client.server_now() - since).total_seconds()
        if fresh or waited < DRA_REPUBLISH_GRACE_SECONDS:
            return problem, restarted
        for pod in dra.plugin_pods:
            key = f"{pod.namespace}/{pod.name}"
            ctx.intend(
                f"delete pod {key} (the DRA kubelet plugin) so it enumerates the MIG devices"
            )
            try:
                ctx.client.delete(PODS, pod.name, pod.namespace)
            except NotFound:
                pass
            except ClusterError as exc:
                raise StepFailed(
                    f"cannot restart the DRA kubelet plugin {key}: {exc}", retryable=transient(exc)
                ) from None
            ctx.record("restarted-dra-plugin", pod=key)
            ctx.log(f"deleted {key}: the DRA driver publishes MIG devices only when it starts")
        return problem, True

    @staticmethod
    def _plugin_problem(ctx: StepContext, written: datetime | None) -> str | None:
        """None when a device plugin pod started after the labels were restored runs on the
        node (what kubelet reports before it registers is the old layout)."""
        try:
            pages = list(ctx.client.list_pages(PODS, field_selector=f"spec.nodeName={ctx.node}"))
        except ClusterError as exc:
            if not transient(exc):
                raise StepFailed(f"cannot list pods on {ctx.node}: {exc}") from None
            return f"cannot list pods on {ctx.node}: {exc}"
        since = written - timedelta(seconds=1) if written else None  # Date headers: 1 s
        for page, _version in pages:
            for pod in page:
                meta = pod.get("metadata") or {}
                if (meta.get("labels") or {}).get("app") != DEVICE_PLUGIN_APP:
                    continue
                if meta.get("deletionTimestamp"):
                    continue
                if (pod.get("status") or {}).get("phase") != "Running":
                    continue
                created = parse_server_time(str(meta.get("creationTimestamp") or ""))
                if since is None or (created is not None and created >= since):
                    return None
        return f"no device plugin started on {ctx.node} since the labels were restored"

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        problem = super().verify(ctx, plan, applied)
        if problem:
            return problem
        raw = get_node(ctx)
        down = _not_serving(ctx, raw)
        if down:
            return f"{down}; it stays cordoned: {replace_hint(ctx.node)}"
        expected = {str(k): int(v) for k, v in (applied.get("expected") or {}).items()}
        problem = allocatable_problem(raw, expected) if expected else None
        dra = applied.get("dra")
        if problem is None and isinstance(dra, dict):
            gpus = dra.get("gpus")
            target = resolve_target(ctx)
            problem = published_problem(
                node_dra(ctx.client, ctx.node).devices,
                target,
                gpus if isinstance(gpus, int) else None,
            )
        return problem


def _dra_of(ctx: StepContext) -> NodeDra:
    """The node's DRA side. RBAC that refuses it leaves the step as it was before DRA was
    read (judged by allocatable), with a note; other failures fail the step."""
    try:
        return node_dra(ctx.client, ctx.node)
    except Forbidden as exc:
        ctx.log(f"note: DRA devices not read ({exc}); judging by allocatable")
        return NodeDra()
    except ClusterError as exc:
        raise StepFailed(
            f"cannot read the DRA devices of {ctx.node}: {exc}", retryable=transient(exc)
        ) from None


def _not_serving(ctx: StepContext, raw: dict[str, Any]) -> str | None:
    """Why the node cannot run pods on its new layout (not Ready, its GPUs reported unhealthy),
    or None."""
    down = not_ready(raw)
    if down:
        return f"node {ctx.node} is {down}"
    problem = serving_problem(raw)
    return f"node {ctx.node}: {problem}" if problem else None
