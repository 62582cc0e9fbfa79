"""The steps of `reapply-mig-no-hooks`: re-partition a node's GPUs with nothing but
`nvidia-mig-parted`, never through a hook, and never restarting kubelet or containerd
(docs/mig.md, "Reapplying a layout without hooks").

The sequence, step by step: `mig-preflight` (config name valid for the node's GPU, host
`nvidia-mig-manager.service` not active), `mig-manager-off` (the operator's mig-manager leaves
the node: `nvidia.com/gpu.deploy.mig-manager=false`), `pause-gpu-operands` (deploy labels
`paused-for-mig-change`, state `pending`, wait for those pods to go), `confirm-no-gpu-processes`,
`apply-mig-layout` (assert → apply --mode-only → assert --mode-only → apply → assert, then
`nvidia-smi -L`), `verify-mig-layout` (per-GPU profile counts from the node's NVML probe, else
nvidia-smi), `resume-gpu-operands` (labels back, state `success`, wait for allocatable).

Decisions:
- mignurse writes its own mig-parted config holding only the chosen layout, built from the profile
  tables in `gpu/profiles.py`, to /var/lib/mignurse/mig/config.yaml, and an empty hooks file beside
  it. Every mig-parted call runs as `env -u MIG_PARTED_HOOKS_FILE` (the packages' profile.d exports
  it: docs/mig.md "The profile.d trap"); `apply` also gets `-k` to the empty hooks file (`assert`
  has no such flag). Either alone means no hooks; both guard against a wrapper that sets one of
  them.
- The host `nvidia-mig-manager.service` is only asked about (`systemctl is-active`,
  `is-enabled`): active refuses the run with the command to disable it, since it re-applies its
  own selection; mignurse never starts, stops, enables or disables a unit, never runs
  `daemon-reload`, and never restarts kubelet or containerd.
- The operator's mig-manager stays off after a successful run (mignurse stays the only writer;
  turning it back on makes it reconcile the node again, possibly stopping kubelet: docs/mig.md).
  Undo turns it back on as it was.
- Pausing mirrors mig-manager (its reconfigure step 4, docs/mig.md): only operand labels that are
  `true` become `paused-for-mig-change`; `false` stays `false`. Resuming puts back what pause found,
  except that a label already `paused-for-mig-change` before the run (a stuck mig-manager left it,
  NVIDIA/gpu-operator#2833) becomes `true`, as mig-manager itself does on success (step 8); undo
  puts back exactly what each step found.
- An Ampere GPU whose mode change stays pending after `apply --mode-only` (the reset refused,
  as in a VM) stops the run with that reason: a reboot applies it (Ampere keeps the mode across
  reboots: docs/mig.md "Persistence across reboots"), then the runbook is run again.
- GPU processes are waited for (pods just evicted take a moment to exit) until the step's
  timeout; then the step fails naming them. It is a failing step, not a precondition: before
  the drain there are GPU processes by design.
- Node paths are prefixed with `${MIGNURSE_ROOT:-}` in the scripts (as the collector's are), so
  the simulator's node sandboxes hold the files; plans show the real paths.
- Every label write records the labels' prior values before it is sent (`ctx.intend`), once:
  a retry after a 503, or a resume, finds them paused already and must not take `paused` for
  the prior value. Undo puts back exactly those values and reads them back.
- Before its first mig-parted write, apply-mig-layout records each GPU's MIG mode and profile
  counts. Undo compares the GPUs with that record: if they changed (a mode set, instances
  destroyed), the steps before it are not undone. The node stays cordoned, its operands
  paused and mig.config.state pending, rather than marked `success` and uncordoned over GPUs
  that match no layout; `--resume` finishes the layout.
- The allocatable wait trusts only what a device plugin started after the labels were restored
  reported, held steady for ALLOCATABLE_STEADY_SECONDS of the API server's clock: the Node keeps
  the old layout until kubelet's next status update, and a stopped plugin's resources then go to
  0 allocatable until the new one registers (kubernetes/kubernetes
  pkg/kubelet/cm/devicemanager: GetCapacity, endpointStopGracePeriod).
- Each node command's exit status and output tail go to the audit log.
- A Bottlerocket node (its osImage, else the update operator's label) is refused before anything
  runs on it: Bottlerocket makes its MIG layout itself at boot, from its own settings, with its
  own nvidia-migmanager (no mig-parted, no host shell); the refusal names those settings and the
  `apiclient set` that writes them (`mignurse.gpu.bottlerocket`).
"""

from __future__ import annotations

import io
import re
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mignurse.cluster.client import NODES, PODS, ClusterError, Forbidden, NotFound
from mignurse.cluster.dra import NodeDra, node_dra
from mignurse.evidence.nvml_json import parse_nvml_json
from mignurse.evidence.nvsmi import merge_smi, parse_mig_lgi, parse_smi_list, parse_smi_xml
from mignurse.gpu.bottlerocket import (
    BottlerocketError,
    apiclient_command,
    bottlerocket_os,
    os_version,
    settings_for,
    version_tuple,
)
from mignurse.gpu.models import GpuModel
from mignurse.gpu.profiles import (
    Layout,
    describe_counts,
    expected_layout,
    identify_gpus,
    mig_slices,
    standard_layouts,
    strategy,
)
from mignurse.model import (
    DRA_GPU_DRIVER,
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    PROBE_OK,
    RESOURCE_GPU,
    RESOURCE_MIG_PREFIX,
    MigState,
    Node,
    NodeDevices,
)
from mignurse.runner.step import (
    Action,
    Change,
    Harm,
    NodeCommand,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
)
from mignurse.runner.steps.kube import get_node, not_ready, replace_hint

MIG_DIR = "/var/lib/mignurse/mig"
CONFIG_FILE = f"{MIG_DIR}/config.yaml"
HOOKS_FILE = f"{MIG_DIR}/hooks.yaml"
EMPTY_HOOKS = "version: v1\nhooks: {}\n"
HOST_SERVICE = "nvidia-mig-manager.service"
LABEL_MIG_MANAGER = LABEL_GPU_DEPLOY_PREFIX + "mig-manager"
PAUSED = "paused-for-mig-change"
# Operand deploy labels mig-manager pauses, and the pods it waits for (NVIDIA/mig-parted
# v0.15.0 pkg/mig/reconfigure/reconfigure.go).
OPERAND_KEYS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm")
OPERAND_APPS = (
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-dcgm",
)
MIG_MANAGER_APP = "nvidia-mig-manager"
POLL_SECONDS = 2.0
_FATAL = re.compile(r'level=fatal msg="((?:[^"\\]|\\.)*)"')
_ROOTED = (MIG_DIR, "/dev/")
_SHELL_PREAMBLE = 'R="${MIGNURSE_ROOT:-}"\n'
MIG_PARTED = ("env", "-u", "MIG_PARTED_HOOKS_FILE", "nvidia-mig-parted")
DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
ALLOCATABLE_STEADY_SECONDS = 10.0  # kubelet's node status update period
# The DRA driver (k8s-dra-driver-gpu@v25.8.0) enumerates MIG devices only when its kubelet plugin
# starts (cmd/gpu-kubelet-plugin/device_state.go NewDeviceState): given this long to show the
# new devices by itself, it is restarted.
DRA_REPUBLISH_GRACE_SECONDS = 30.0
AUDIT_OUTPUT_CHARS = 2000


# -- what the run is about -----------------------------------------------------------------


@dataclass(frozen=True)
class MigTarget:
    node: Node
    raw: dict[str, Any]
    config: str
    family: GpuModel
    gpus: int | None
    layout: Layout
    strategy: str

    @property
    def per_gpu(self) -> dict[str, int]:
        return dict(self.layout.devices or {})

    def expected_resources(self, gpus: int | None = None) -> dict[str, int]:
        """What the device plugin should advertise for the layout (docs/mig.md)."""
        count = gpus if gpus is not None else (self.gpus or 0)
        if not self.layout.mig_enabled or self.strategy == "none":
            return {RESOURCE_GPU: count}
        if self.strategy == "single":
            return {RESOURCE_GPU: sum(self.per_gpu.values()) * count}
        return {f"{RESOURCE_MIG_PREFIX}{p}": n * count for p, n in self.per_gpu.items()}


def valid_configs(family: GpuModel) -> list[str]:
    """The config names mignurse can write for a GPU family."""
    names = ["all-disabled", "all-enabled", *standard_layouts(family)]
    return list(dict.fromkeys(names))


def bottlerocket_refusal(node: Node, config: str) -> str | None:
    """One line refusing a Bottlerocket node, naming the Bottlerocket way; None elsewhere."""
    seen = bottlerocket_os(node)
    if seen is None:
        return None
    head = (
        f"node {node.name} runs {seen}: Bottlerocket makes its MIG layout itself at boot, from "
        "settings.kubelet-device-plugins.nvidia (device-partitioning-strategy, mig.profile) "
        "through its nvidia-migmanager, not nvidia-mig-parted, so this runbook leaves it alone"
    )
    model = identify_gpus(node).model
    if not config or model is None:
        return f"{head}; set those settings in the node's user data and replace it"
    try:
        mig = settings_for(config, model)
    except BottlerocketError as exc:
        return f"{head}; {exc}"
    version = os_version(node)
    too_old = (
        f" (this node's {version} is older than {mig.since}: replace it)"
        if version is not None and version_tuple(version) < version_tuple(mig.since)
        else ""
    )
    return (
        f"{head}; new nodes: `mignurse userdata --os bottlerocket --gpu-product {model.name} "
        f"--config {config}` in the EC2NodeClass; this one: `{apiclient_command(mig)}` from its "
        f"admin container, then reboot it{too_old}"
    )


def resolve_target(ctx: StepContext) -> MigTarget:
    """The node, the config to apply and its per-GPU layout; StepFailed (one line) if unusable."""
    raw = get_node(ctx)
    node = Node.from_api(raw)
    config = str(ctx.param("config") or "") or node.labels.get(LABEL_MIG_CONFIG, "")
    if not config:
        raise StepFailed(
            f"node {node.name} has no {LABEL_MIG_CONFIG} label: pass --param config=NAME"
        )
    identity = identify_gpus(node)
    if identity.model is None:
        raise StepFailed(
            f"cannot tell which GPU node {node.name} has ({identity.model_from}): "
            "MIG layouts are per GPU model"
        )
    family = identity.model
    valid = valid_configs(family)
    if config not in valid:
        raise StepFailed(
            f"unknown MIG config {config!r} for {family.name}: use one of {', '.join(valid)}"
        )
    layout = expected_layout(config, family)
    if layout is None or layout.devices is None or layout.mig_enabled is None:
        note = layout.note if layout is not None else "not a standard layout"
        raise StepFailed(f"cannot build MIG config {config!r} for {family.name}: {note}")
    mode = strategy(node) or "mixed"
    if mode == "single" and layout.mig_enabled and len(layout.devices) != 1:
        raise StepFailed(
            f"{config} mixes profiles ({describe_counts(layout.devices)}) but node {node.name} "
            "uses the single MIG strategy: the device plugin would advertise it as INVALID; "
            "choose an all-<profile> config"
        )
    return MigTarget(node, raw, config, family, identity.count, layout, mode)


def migparted_config(config: str, layout: Layout) -> str:
    """A mig-parted v1 config file holding one config (NVIDIA/mig-parted v0.15.0 api/spec/v1)."""
    lines = ["version: v1", "mig-configs:", f"  {config}:", "  - devices: all"]
    if not layout.mig_enabled:
        lines.append("    mig-enabled: false")
    else:
        lines.append("    mig-enabled: true")
        devices = layout.devices or {}
        if not devices:
            lines.append("    mig-devices: {}")
        else:
            lines.append("    mig-devices:")
            lines += [f'      "{profile}": {count}' for profile, count in devices.items()]
    return "\n".join(lines) + "\n"


# -- running commands on the node -------------------------------------------------------------


@dataclass(frozen=True)
class NodeOutput:
    rc: int
    stdout: str
    stderr: str

    def reason(self) -> str:
        """mig-parted's fatal message, else the last line it printed."""
        found = _FATAL.findall(self.stderr)
        if found:
            return str(found[-1]).replace('\\"', '"')
        lines = [line.strip() for line in (self.stderr + "\n" + self.stdout).splitlines()]
        lines = [line for line in lines if line]
        return lines[-1] if lines else f"exit status {self.rc}"


def _render(argv: tuple[str, ...]) -> str:
    words = []
    for arg in argv:
        if arg.startswith(_ROOTED):
            words.append('"$R"' + shlex.quote(arg))
        else:
            words.append(shlex.quote(arg))
    return " ".join(words)


def run_script(
    ctx: StepContext, script: str, what: str, timeout: float | None = None
) -> NodeOutput:
    """Run a sh script on the step's node; StepFailed when it could not run to an exit."""
    if ctx.shell_for is None:
        raise StepFailed("no way into the node is configured (SSM, SSH or the simulator)")
    ctx.check_cancel()
    shell = ctx.shell_for(ctx.node)
    budget = max(5.0, ctx.time_left()) if timeout is None else timeout
    sink = io.BytesIO()
    result = shell.run(_SHELL_PREAMBLE + script, timeout=budget, stdout=sink)
    stdout = sink.getvalue().decode("utf-8", "replace")
    ctx.record(
        "node-command",
        node=ctx.node,
        what=what,
        rc=result.rc,
        error=result.error or None,
        stdout=stdout[-AUDIT_OUTPUT_CHARS:],
        stderr=(result.stderr_tail or "")[-AUDIT_OUTPUT_CHARS:],
    )
    if result.rc is None:
        raise StepFailed(f"{what} on {ctx.node}: {result.error or 'no exit status'}")
    return NodeOutput(result.rc, stdout, result.stderr_tail)


def run_argv(ctx: StepContext, argv: tuple[str, ...], timeout: float | None = None) -> NodeOutput:
    ctx.log("$ " + " ".join(argv))
    out = run_script(ctx, _render(argv) + "\n", " ".join(argv[:6]), timeout)
    for line in (out.stdout.strip().splitlines() or [])[-3:]:
        ctx.log("  " + line)
    if out.rc != 0:
        ctx.log(f"  exit {out.rc}: {out.reason()}")
    return out


def _cmd(ctx: StepContext, argv: tuple[str, ...], why: str) -> NodeCommand:
    return NodeCommand(ctx.node, argv, why)


# -- labels and pods ---------------------------------------------------------------------------


def _labels(raw: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((raw.get("metadata") or {}).get("labels") or {}).items()}


def set_labels(
    ctx: StepContext, labels: dict[str, str | None], remember: dict[str, Any] | None = None
) -> dict[str, str | None]:
    """Merge-patch node labels (None removes one); returns their values before this run first
    changed them (recorded before the patch, with `remember`, by `ctx.intend`)."""
    before = _labels(get_node(ctx))
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
        raise StepFailed(f"cannot label node {ctx.node}: {exc}", retryable=transient(exc)) from None
    ctx.log(f"labelled {ctx.node}: {words}")
    return {k: recorded.get(k, prior[k]) for k in labels}


def pods_of(ctx: StepContext, apps: tuple[str, ...]) -> list[str]:
    """namespace/name of the node's pods whose `app` label is one of `apps`."""
    found: list[str] = []
    try:
        pages = ctx.client.list_pages(PODS, field_selector=f"spec.nodeName={ctx.node}")
        for page, _version in pages:
            for pod in page:
                meta = pod.get("metadata") or {}
                if (meta.get("labels") or {}).get("app") in apps:
                    found.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    except ClusterError as exc:
        raise StepFailed(
            f"cannot list pods on {ctx.node}: {exc}", retryable=transient(exc)
        ) from None
    return sorted(found)


def wait_pods_gone(ctx: StepContext, apps: tuple[str, ...], what: str) -> None:
    """Wait for the node's pods of `apps` to go; a blip of the API server is waited out."""
    while True:
        try:
            left = pods_of(ctx, apps)
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


def _find_output(ctx: StepContext, marker: str) -> dict[str, Any] | None:
    for output in ctx.outputs.values():
        if isinstance(output, dict) and marker in output:
            return output
    return None


# -- the actions ------------------------------------------------------------------------------


def _host_service(ctx: StepContext) -> tuple[str, str]:
    """(is-active, is-enabled) of the host nvidia-mig-manager.service, asked read-only."""
    out = run_script(
        ctx,
        f"systemctl is-active {HOST_SERVICE} 2>/dev/null; echo '|'; "
        f"systemctl is-enabled {HOST_SERVICE} 2>/dev/null; exit 0\n",
        "systemctl is-active",
        timeout=30,
    )
    active, _, enabled = out.stdout.partition("|")
    return active.strip() or "unknown", enabled.strip() or "not installed"


def _host_refusal(active: str) -> str | None:
    if active in ("active", "activating", "reloading"):
        return (
            f"the host {HOST_SERVICE} is {active}: it applies its own MIG selection (at every "
            "boot) and would undo this layout; disable it first with `sudo systemctl disable "
            f"--now {HOST_SERVICE}` (mignurse never changes systemd units)"
        )
    return None


@action("mig-preflight")
class MigPreflight(Action):
    title = "Check the MIG config and that nothing else writes MIG on the node"
    mutates = False
    harm = Harm.NONE
    timeout = 60.0

    def check(self, ctx: StepContext) -> str | None:
        try:
            node = Node.from_api(get_node(ctx))
            config = str(ctx.param("config") or "") or node.labels.get(LABEL_MIG_CONFIG, "")
            refusal = bottlerocket_refusal(node, config)
            if refusal:
                return refusal
            target = resolve_target(ctx)
            down = not_ready(target.raw)
            if down:
                return (
                    f"node {ctx.node} is {down}: this runbook never restarts kubelet or "
                    "containerd, so it cannot bring the node back; collect it "
                    f"(cordon-and-collect), then {replace_hint(ctx.node)}"
                )
            return _host_refusal(_host_service(ctx)[0])
        except StepFailed as exc:
            return str(exc)

    def plan(self, ctx: StepContext) -> StepPlan:
        target = resolve_target(ctx)
        labels = target.node.labels
        gpus = f"{target.gpus} × " if target.gpus else ""
        notes = [
            f"config {target.config} on {gpus}{target.family.name}: per GPU "
            + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "MIG off"),
            f"MIG strategy {target.strategy}: expect allocatable "
            + ", ".join(f"{r}={n}" for r, n in target.expected_resources().items()),
            f"now: {LABEL_MIG_CONFIG}={labels.get(LABEL_MIG_CONFIG, '(none)')}, "
            f"{LABEL_MIG_CONFIG_STATE}={labels.get(LABEL_MIG_CONFIG_STATE, '(none)')}, "
            f"{LABEL_MIG_MANAGER}={labels.get(LABEL_MIG_MANAGER, '(none)')}",
        ]
        return StepPlan(
            commands=[
                _cmd(ctx, ("systemctl", "is-active", HOST_SERVICE), "read-only"),
                _cmd(ctx, ("systemctl", "is-enabled", HOST_SERVICE), "read-only"),
            ],
            notes=notes,
            data={"config": target.config},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        target = resolve_target(ctx)
        refusal = bottlerocket_refusal(target.node, target.config)
        if refusal:
            raise StepFailed(refusal)
        active, enabled = _host_service(ctx)
        refusal = _host_refusal(active)
        if refusal:
            raise StepFailed(refusal)
        ctx.log(f"host {HOST_SERVICE}: {active}, {enabled}")
        if enabled == "enabled":
            ctx.log(
                f"note: {HOST_SERVICE} is enabled: at the next boot it applies its own selection"
            )
        return {
            "config": target.config,
            "family": target.family.name,
            "gpus": target.gpus,
            "perGpu": target.per_gpu,
            "hostService": {"active": active, "enabled": enabled},
        }


class _LabelStep(Action):
    """Shared apply/verify/undo for steps that set node labels and remember what was there."""

    harm = Harm.LOW
    can_undo = True
    retries = 2

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        raise NotImplementedError

    def plan(self, ctx: StepContext) -> StepPlan:
        labels = _labels(get_node(ctx))
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
        written = _parse_server_time(str(ctx.prior.get("labelledAt") or ""))
        return {"labels": prior, "set": wanted, **self.settle(ctx, written)}

    def settle(self, ctx: StepContext, written: datetime | None) -> dict[str, Any]:
        """Wait for what the labels make happen (`written`: when this run first wrote them,
        on the API server's clock); returns more to keep in `applied`."""
        return {}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        labels = _labels(get_node(ctx))
        for key, value in (applied.get("set") or {}).items():
            if labels.get(key) != value:
                return f"label {key} is {labels.get(key)!r}, not {value!r}"
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        prior: dict[str, str | None] = dict(applied.get("labels") or {})
        if prior:
            set_labels(ctx, prior)

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        labels = _labels(get_node(ctx))
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


def _parse_server_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@action("mig-manager-off")
class MigManagerOff(_LabelStep):
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
class PauseGpuOperands(_LabelStep):
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
            f"waits for the {', '.join(OPERAND_APPS)} pods on the node to go; "
            "labels already false stay false"
        )
        plan.nothing_to_do = False
        return plan

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        found = _labels(get_node(ctx))
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
        wait_pods_gone(ctx, OPERAND_APPS, "GPU operand pods are")
        return {}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        left = pods_of(ctx, OPERAND_APPS)
        if left:
            return f"GPU operand pods still run on {ctx.node}: {', '.join(left)}"
        return super().verify(ctx, plan, applied)


_PROCESS_QUERY = (
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,used_memory",
    "--format=csv,noheader",
)


def gpu_processes(ctx: StepContext) -> list[str]:
    """Processes holding the GPUs: nvidia-smi's compute apps, then `lsof` on the devices."""
    found: list[str] = []
    out = run_script(ctx, _render(_PROCESS_QUERY) + "\n", "nvidia-smi --query-compute-apps", 60)
    if out.rc != 0:
        raise StepFailed(f"cannot list GPU processes on {ctx.node}: {out.reason()}")
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if parts and parts[0].isdigit():
            name = parts[1] if len(parts) > 1 else "?"
            found.append(f"pid {parts[0]} ({name})")
    seen = {item.split()[1] for item in found}
    held = run_script(
        ctx,
        'command -v lsof >/dev/null 2>&1 || exit 0\nlsof -t -w "$R"/dev/nvidia[0-9]* || true\n',
        "lsof",
        60,
    )
    for pid in held.stdout.split():
        if pid.isdigit() and pid not in seen:
            found.append(f"pid {pid} (holds a /dev/nvidia device)")
            seen.add(pid)
    return found


@action("confirm-no-gpu-processes")
class ConfirmNoGpuProcesses(Action):
    title = "Confirm no process uses the GPUs"
    mutates = False
    harm = Harm.NONE
    timeout = 60.0

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(
            commands=[
                _cmd(ctx, _PROCESS_QUERY, "read-only"),
                _cmd(ctx, ("lsof", "-t", "-w", "/dev/nvidia[0-9]*"), "read-only, if installed"),
            ],
            notes=["a GPU client makes destroying instances or changing the mode fail"],
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        while True:
            found = gpu_processes(ctx)
            if not found:
                ctx.log(f"no process uses the GPUs of {ctx.node}")
                return {"processes": []}
            if ctx.time_left() <= POLL_SECONDS:
                raise StepFailed(
                    f"{len(found)} process(es) still use the GPUs of {ctx.node}: "
                    f"{', '.join(found)}; stop them (their pods, or the processes on the node) "
                    "and run again"
                )
            ctx.sleep(POLL_SECONDS)


def _migparted(*args: str) -> tuple[str, ...]:
    return (*MIG_PARTED, *args)


def _sequence(config: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(name, argv, why) of every mig-parted call, in order (docs/mig.md, "Reapplying")."""
    f, c, k = ("-f", CONFIG_FILE), ("-c", config), ("-k", HOOKS_FILE)
    return [
        ("assert", _migparted("assert", *f, *c), "exit 0: already applied, nothing to do"),
        ("apply-mode", _migparted("-d", "apply", "--mode-only", *f, *c, *k), "set the MIG mode"),
        ("assert-mode", _migparted("-d", "assert", "--mode-only", *f, *c), "exit 1: reboot"),
        ("apply", _migparted("-d", "apply", *f, *c, *k), "create the GPU/compute instances"),
        ("assert-final", _migparted("assert", *f, *c), "must exit 0"),
    ]


def _write_files_script(config_yaml: str) -> str:
    return (
        f'mkdir -p "$R"{shlex.quote(MIG_DIR)}\n'
        f"cat > \"$R\"{shlex.quote(CONFIG_FILE)} <<'MIGNURSE_EOF'\n{config_yaml}MIGNURSE_EOF\n"
        f"cat > \"$R\"{shlex.quote(HOOKS_FILE)} <<'MIGNURSE_EOF'\n{EMPTY_HOOKS}MIGNURSE_EOF\n"
    )


_MODE_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,mig.mode.current,mig.mode.pending",
    "--format=csv,noheader",
)


def _pending_modes(ctx: StepContext) -> list[str]:
    """GPUs whose MIG mode change waits for a reset: "GPU 0 (Disabled → Enabled)"."""
    out = run_argv(ctx, _MODE_QUERY, timeout=60)
    pending = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[1] != parts[2] and parts[2] in (MIG_ENABLED, MIG_DISABLED):
            pending.append(f"GPU {parts[0]} ({parts[1]} → {parts[2]})")
    return pending


@action("apply-mig-layout")
class ApplyMigLayout(Action):
    title = "Apply the MIG layout with nvidia-mig-parted, no hooks"
    harm = Harm.HIGH  # destroys and recreates every GPU instance on the node
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        try:
            resolve_target(ctx)
        except StepFailed as exc:
            return str(exc)
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        target = resolve_target(ctx)
        config_yaml = migparted_config(target.config, target.layout)
        commands = [
            _cmd(ctx, ("sh", "-c", f"mkdir -p {MIG_DIR} && cat > {CONFIG_FILE}"), "the config"),
            _cmd(ctx, ("sh", "-c", f"cat > {HOOKS_FILE}"), "an empty hooks file: hooks: {}"),
        ]
        commands += [_cmd(ctx, argv, why) for _name, argv, why in _sequence(target.config)]
        commands.append(_cmd(ctx, ("nvidia-smi", "-L"), "creates the new MIG capability nodes"))
        return StepPlan(
            commands=commands,
            notes=[
                f"every GPU instance on {ctx.node} is destroyed and recreated as "
                + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "MIG off")
                + " per GPU",
                "MIG_PARTED_HOOKS_FILE is unset and apply gets an empty hooks file: no hook "
                "runs, so nothing restarts kubelet or containerd or runs daemon-reload",
                f"{CONFIG_FILE}:\n{config_yaml.rstrip()}",
            ],
            data={"config": target.config, "configYaml": config_yaml},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        config = str(plan.data["config"])
        ctx.intend(f"write {CONFIG_FILE} and an empty {HOOKS_FILE} on {ctx.node}")
        run_script(ctx, _write_files_script(str(plan.data["configYaml"])), "writing the config")
        steps = {name: argv for name, argv, _why in _sequence(config)}
        if run_argv(ctx, steps["assert"]).rc == 0:
            ctx.log(f"{config} is already applied on {ctx.node}")
            run_argv(ctx, ("nvidia-smi", "-L"), timeout=60)
            return {"config": config, "alreadyApplied": True}
        gpus = ctx.prior.get("gpus") or gpu_record(read_mig_state(ctx))
        ctx.intend(f"nvidia-mig-parted apply --mode-only -c {config} on {ctx.node}", {"gpus": gpus})
        mode = run_argv(ctx, steps["apply-mode"])
        if run_argv(ctx, steps["assert-mode"]).rc != 0:
            pending = _pending_modes(ctx)
            if pending:
                raise StepFailed(
                    f"the MIG mode change of {', '.join(pending)} on {ctx.node} waits for a GPU "
                    "reset the host refused: reboot the node (Ampere keeps the new mode), then "
                    "run reapply-mig-no-hooks again"
                )
            raise StepFailed(f"nvidia-mig-parted apply --mode-only failed: {mode.reason()}")
        ctx.intend(f"nvidia-mig-parted apply -c {config} on {ctx.node}")
        applied = run_argv(ctx, steps["apply"])
        if applied.rc != 0:
            raise StepFailed(f"nvidia-mig-parted apply failed on {ctx.node}: {applied.reason()}")
        final = run_argv(ctx, steps["assert-final"])
        if final.rc != 0:
            raise StepFailed(f"{config} is not in place after apply: {final.reason()}")
        listed = run_argv(ctx, ("nvidia-smi", "-L"), timeout=60)
        if listed.rc != 0:
            raise StepFailed(f"nvidia-smi -L failed on {ctx.node}: {listed.reason()}")
        return {"config": config, "alreadyApplied": False}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        out = run_argv(ctx, _sequence(str(plan.data["config"]))[-1][1], timeout=60)
        return None if out.rc == 0 else f"nvidia-mig-parted assert: {out.reason()}"

    def undo_barrier(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        before = applied.get("gpus")
        if not before:
            return None  # no mig-parted write was attempted
        now = gpu_record(read_mig_state(ctx))
        changed = [
            f"GPU {index}: {_gpu_words(now.get(index))} (was {_gpu_words(was)})"
            for index, was in sorted(before.items(), key=lambda kv: int(kv[0]))
            if now.get(index) != was
        ]
        if not changed:
            return None
        return (
            f"the GPUs of {ctx.node} no longer match their layout before the run ("
            + "; ".join(changed[:4])
            + (f"; {len(changed) - 4} more" if len(changed) > 4 else "")
            + "): undoing the labels and the cordon would return them to service; the node "
            "stays cordoned with its GPU operands paused"
        )


def gpu_record(state: MigState) -> dict[str, dict[str, Any]]:
    """Each GPU's MIG mode and profile counts, by index (what undo compares)."""
    if state.status != PROBE_OK:
        raise StepFailed(
            f"cannot read the MIG state of the GPUs before changing them ({state.source}: "
            f"{state.status} {state.detail})".replace(" )", ")")
        )
    return {
        str(gpu.index): {
            "mode": gpu.mig_current,
            "counts": gpu.profile_counts() if gpu.mig_current == MIG_ENABLED else {},
        }
        for gpu in state.gpus
    }


def _gpu_words(gpu: dict[str, Any] | None) -> str:
    if gpu is None:
        return "not seen"
    counts = gpu.get("counts") or {}
    if gpu.get("mode") != MIG_ENABLED:
        return f"MIG {gpu.get('mode')}"
    return f"MIG Enabled, {describe_counts(counts) if counts else 'no instances'}"


def read_mig_state(ctx: StepContext) -> MigState:
    """The node's MIG state: `mignurse probe -o json` (NVML) where installed, else nvidia-smi."""
    probe = run_script(
        ctx,
        "command -v mignurse >/dev/null 2>&1 || exit 127\nmignurse probe -o json\n",
        "mignurse probe",
        60,
    )
    if probe.rc in (0, 1) and probe.stdout.strip():
        state = parse_nvml_json(probe.stdout)
        if state.status == PROBE_OK:
            return state
        ctx.log(f"NVML probe: {state.status} {state.detail}; reading nvidia-smi instead")
    marker = "=====MIGNURSE====="
    out = run_script(
        ctx,
        f"nvidia-smi -q -x; echo {marker}; nvidia-smi -L; echo {marker}; nvidia-smi mig -lgi\n",
        "nvidia-smi",
        60,
    )
    parts = out.stdout.split(marker + "\n")
    while len(parts) < 3:
        parts.append("")
    return merge_smi(parse_smi_xml(parts[0]), parse_smi_list(parts[1]), parse_mig_lgi(parts[2]))


def compare_layout(state: MigState, target: MigTarget) -> list[str]:
    """One line per GPU that is not in the target layout."""
    problems: list[str] = []
    if state.status != PROBE_OK:
        return [f"{state.source} reading: {state.status} {state.detail}".strip()]
    capable = [g for g in state.gpus if g.mig_current != MIG_NOT_SUPPORTED]
    if not capable:
        return ["no MIG-capable GPU found"]
    if target.gpus is not None and len(capable) != target.gpus:
        problems.append(f"{len(capable)} MIG-capable GPUs seen, {target.gpus} expected")
    want_mode = MIG_ENABLED if target.layout.mig_enabled else MIG_DISABLED
    for gpu in capable:
        counts = gpu.profile_counts() if gpu.mig_current == MIG_ENABLED else {}
        if gpu.mig_current != want_mode:
            problems.append(f"GPU {gpu.index}: MIG {gpu.mig_current}, expected {want_mode}")
        elif target.layout.mig_enabled and counts != target.per_gpu:
            problems.append(
                f"GPU {gpu.index}: {describe_counts(counts)}, "
                f"expected {describe_counts(target.per_gpu)}"
            )
    return problems


@action("verify-mig-layout")
class VerifyMigLayout(Action):
    title = "Verify each GPU's MIG profiles"
    mutates = False
    harm = Harm.NONE
    timeout = 120.0

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(
            commands=[
                _cmd(ctx, ("mignurse", "probe", "-o", "json"), "NVML, where mignurse is installed"),
                _cmd(ctx, ("nvidia-smi", "-q", "-x"), "otherwise"),
                _cmd(ctx, ("nvidia-smi", "-L"), "otherwise"),
                _cmd(ctx, ("nvidia-smi", "mig", "-lgi"), "otherwise"),
            ]
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        target = resolve_target(ctx)
        state = read_mig_state(ctx)
        problems = compare_layout(state, target)
        if problems:
            raise StepFailed(
                f"{target.config} is not what the GPUs of {ctx.node} show ({state.source}): "
                + "; ".join(problems)
            )
        capable = [g for g in state.gpus if g.mig_current != MIG_NOT_SUPPORTED]
        per_gpu = describe_counts(target.per_gpu) if target.layout.mig_enabled else "MIG off"
        ctx.log(f"{len(capable)} GPUs on {ctx.node} show {per_gpu} each ({state.source})")
        # the MIG devices as made now: DRA slices listing others were published before
        uuids = sorted(d.uuid for g in capable for d in g.devices if d.uuid)
        return {
            "source": state.source,
            "gpus": len(capable),
            "perGpu": target.per_gpu,
            "migUuids": uuids,
        }


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
class ResumeGpuOperands(_LabelStep):
    title = "Restore the GPU operands and mark the MIG config applied"
    timeout = 300.0

    def wanted(self, ctx: StepContext, labels: dict[str, str]) -> dict[str, str | None]:
        target = resolve_target(ctx)
        paused = _find_output(ctx, "operandLabels")
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
        verified = _find_output(ctx, "perGpu")
        gpus = target.gpus
        if gpus is None and verified is not None and isinstance(verified.get("gpus"), int):
            gpus = int(verified["gpus"])
        expected = target.expected_resources(gpus)
        first = get_node(ctx)
        dra = _dra_of(ctx).on
        # A DRA node's device plugin, if it runs beside the driver at all, shows in allocatable.
        advertised = not dra or bool(Node.from_api(first).gpu_allocatable)
        plugin = (
            advertised and _labels(first).get(LABEL_GPU_DEPLOY_PREFIX + "device-plugin") == "true"
        )
        restarted = False
        started = time.monotonic()
        steady_since: datetime | None = None
        while True:
            raw = get_node(ctx)
            problem = _not_serving(ctx, raw)
            if problem is None and advertised:
                problem = allocatable_problem(raw, expected)
            if problem is None and plugin:
                problem = self._plugin_problem(ctx, written)
            if problem is None and dra:
                made = (_find_output(ctx, "migUuids") or {}).get("migUuids")
                uuids = frozenset(made) if isinstance(made, list) else frozenset()
                problem, restarted = self._published(ctx, target, gpus, uuids, written, restarted)
            now = ctx.client.server_now()
            if problem is not None:
                steady_since = None
            elif steady_since is None:
                steady_since = now
            elif (now - steady_since).total_seconds() >= ALLOCATABLE_STEADY_SECONDS:
                offered = (
                    f"publishes {DRA_GPU_DRIVER} devices "
                    + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "no MIG")
                    + " per GPU"
                    if dra
                    else "advertises " + ", ".join(f"{r}={n}" for r, n in expected.items())
                )
                ctx.log(
                    f"{ctx.node} {offered} (steady since {time.monotonic() - started:.0f} s "
                    "into the wait)"
                )
                kept: dict[str, Any] = {"expected": expected if advertised else {}}
                if dra:
                    kept["dra"] = {"gpus": gpus, "restartedPlugin": restarted}
                return kept
            if ctx.time_left() <= 0:
                down = not_ready(raw)
                raise StepFailed(
                    f"after {ctx.timeout:g} s "
                    + (problem or "allocatable did not hold steady")
                    + (f"; it stays cordoned: {replace_hint(ctx.node)}" if down else "")
                )
            ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))

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
                created = _parse_server_time(str(meta.get("creationTimestamp") or ""))
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
    """Why the node cannot run pods on its new layout (not Ready), or None."""
    down = not_ready(raw)
    return f"node {ctx.node} is {down}" if down else None
