"""What must hold before any MIG write, and the guard that nothing restarts: `mig-preflight`
(the config is valid for the node's GPU, the node is not Bottlerocket and is Ready, since this
runbook never restarts kubelet or containerd to bring it back, its NVIDIA DRA driver does not
run DynamicMIG, the host
`nvidia-mig-manager.service`, only asked about, is not active, and a management CDI spec on the
node can be made again: `cdi.py`) and
`confirm-no-gpu-processes` (no process holds the GPUs, waited for until the step's timeout).
"""

from __future__ import annotations

from typing import Any

from mignurse.cluster.client import ClusterError
from mignurse.cluster.dra import DYNAMIC_MIG_GATE, node_dra
from mignurse.gpu.profiles import (
    describe_counts,
)
from mignurse.model import (
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    Node,
)
from mignurse.runner.step import (
    Action,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
)
from mignurse.runner.steps.kube import get_node, not_ready, replace_hint
from mignurse.runner.steps.mig import cdi
from mignurse.runner.steps.mig.labels import LABEL_MIG_MANAGER
from mignurse.runner.steps.mig.nodecmd import POLL_SECONDS, node_command, run_script, shell_words
from mignurse.runner.steps.mig.target import (
    PINNED,
    bottlerocket_refusal,
    pinned_record,
    resolve_target,
)

HOST_SERVICE = "nvidia-mig-manager.service"


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


def dynamic_mig_refusal(ctx: StepContext) -> str | None:
    """One line refusing a node whose NVIDIA DRA driver runs DynamicMIG; None elsewhere
    (the GPUCluster's gates: NVIDIA/gpu-operator@v26.7.0 api/nvidia/v1alpha1/
    gpucluster_types.go `draDriver.featureGates`).
    Such a plugin creates MIG devices per claim and, at its start, destroys every MIG device
    its checkpoint does not name (kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1
    cmd/gpu-kubelet-plugin/driver.go NewDriver: DestroyUnknownMIGDevices): a layout applied
    beside it is destroyed, and its own devices would be destroyed under running claims."""
    try:
        dra = node_dra(ctx.client, ctx.node)
    except ClusterError as exc:
        return (
            f"cannot tell whether the NVIDIA DRA driver runs {DYNAMIC_MIG_GATE} on {ctx.node} "
            f"({exc}): a {DYNAMIC_MIG_GATE} plugin destroys MIG devices it did not create, so "
            "this runbook does not run blind"
        )
    if not dra.dynamic_mig:
        return None
    how = (
        f"its kubelet plugin runs with {DYNAMIC_MIG_GATE}=true"
        if dra.dynamic_gate
        else "its ResourceSlices publish partitionable MIG devices"
    )
    return (
        f"node {ctx.node} gets its MIG devices from the NVIDIA DRA driver's {DYNAMIC_MIG_GATE} "
        f"({how}): the plugin creates MIG devices per claim and destroys, at every start, those "
        "it did not create, so a layout applied here would be destroyed; leave MIG to the "
        f"driver, or turn {DYNAMIC_MIG_GATE} off (`featureGates` in the driver's Helm values, or "
        "the GPUCluster's `spec.draDriver.featureGates`) before partitioning the node yourself"
    )


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
            dynamic = dynamic_mig_refusal(ctx)
            if dynamic:
                return dynamic
            down = not_ready(target.raw)
            if down:
                return (
                    f"node {ctx.node} is {down}: this runbook never restarts kubelet or "
                    "containerd, so it cannot bring the node back; collect it "
                    f"(cordon-and-collect), then {replace_hint(ctx.node)}"
                )
            refusal = _host_refusal(_host_service(ctx)[0])
            if refusal:
                return refusal
            cdi.read_spec(ctx)
            return None
        except StepFailed as exc:
            return str(exc)

    def plan(self, ctx: StepContext) -> StepPlan:
        target = resolve_target(ctx)
        labels = target.node.labels
        gpus = f"{target.gpus} × " if target.gpus else ""
        notes = [
            f"config {target.config} on {gpus}{target.family.name}: per GPU "
            + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "MIG off")
            + f" (from {target.configs.source})",
            *([f"note: {target.configs.note}"] if target.configs.note else []),
            f"MIG strategy {target.strategy}: expect allocatable "
            + ", ".join(f"{r}={n}" for r, n in target.expected_resources().items()),
            f"now: {LABEL_MIG_CONFIG}={labels.get(LABEL_MIG_CONFIG, '(none)')}, "
            f"{LABEL_MIG_CONFIG_STATE}={labels.get(LABEL_MIG_CONFIG_STATE, '(none)')}, "
            f"{LABEL_MIG_MANAGER}={labels.get(LABEL_MIG_MANAGER, '(none)')}",
        ]
        return StepPlan(
            commands=[
                node_command(ctx, ("systemctl", "is-active", HOST_SERVICE), "read-only"),
                node_command(ctx, ("systemctl", "is-enabled", HOST_SERVICE), "read-only"),
                cdi.plan_commands(ctx)[0],
            ],
            notes=notes,
            data={"config": target.config},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        target = resolve_target(ctx)
        refusal = bottlerocket_refusal(target.node, target.config)
        if refusal:
            raise StepFailed(refusal)
        refusal = dynamic_mig_refusal(ctx)
        if refusal:
            raise StepFailed(refusal)
        active, enabled = _host_service(ctx)
        refusal = _host_refusal(active)
        if refusal:
            raise StepFailed(refusal)
        ctx.log(f"host {HOST_SERVICE}: {active}, {enabled}")
        spec = cdi.read_spec(ctx)
        if spec is not None:
            ctx.log(f"{cdi.MANAGEMENT_SPEC} is there: it is made again after the apply")
        if enabled == "enabled":
            ctx.log(
                f"note: {HOST_SERVICE} is enabled: at the next boot it applies its own selection"
            )
        return {
            "config": target.config,
            "family": target.family.name,
            "gpus": target.gpus,
            "perGpu": target.per_gpu,
            PINNED: pinned_record(target),
            "hostService": {"active": active, "enabled": enabled},
            "cdiSpec": "absent" if spec is None else "present",
        }


_PROCESS_QUERY = (
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,used_memory",
    "--format=csv,noheader",
)


# `lsof -F pc`: a `p<pid>` line, then `c<command>`, for each process (and an `f<fd>` line for
# each of its files); the command is the process's comm, 15 characters at most with `+c 15`
# (lsof(8) OUTPUT FOR OTHER PROGRAMS, proc(5) comm).
_LSOF = ("lsof", "-w", "+c", "15", "-F", "pc")
# Daemons that keep the GPUs' device files open by design and beside which mig-manager applies
# MIG: its host unit starts After= them and its hooks stop neither (NVIDIA/mig-parted v0.15.0
# deployments/systemd/nvidia-mig-manager.service, hooks.sh). The EKS AL2023 NVIDIA AMI enables
# both (awslabs/amazon-eks-ami templates/al2023/provisioners/install-nvidia-driver.sh).
BESIDE_MIG = ("nvidia-persistenced", "nv-fabricmanager")


def _beside_mig(command: str) -> bool:
    return len(command) >= 9 and any(daemon[:15].startswith(command) for daemon in BESIDE_MIG)


def gpu_processes(ctx: StepContext) -> list[str]:
    """Processes holding the GPUs: nvidia-smi's compute apps, then `lsof` on the devices
    (nvidia-persistenced and nv-fabricmanager, which hold them beside every MIG change, left
    out)."""
    found: list[str] = []
    out = run_script(ctx, shell_words(_PROCESS_QUERY) + "\n", "nvidia-smi --query-compute-apps", 60)
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
        f'command -v lsof >/dev/null 2>&1 || exit 0\n{shell_words(_LSOF)} "$R"/dev/nvidia[0-9]* '
        "|| true\n",
        "lsof",
        60,
    )
    commands: dict[str, str] = {}  # pid → command, in lsof's order
    pid = ""
    for line in held.stdout.splitlines():
        if line.startswith("p") and line[1:].isdigit():
            pid = line[1:]
            commands.setdefault(pid, "")
        elif line.startswith("c") and pid:
            commands[pid] = line[1:]
    for pid, command in commands.items():
        if pid not in seen and not _beside_mig(command):
            found.append(f"pid {pid} ({command or '?'}, holds a /dev/nvidia device)")
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
                node_command(ctx, _PROCESS_QUERY, "read-only"),
                node_command(ctx, (*_LSOF, "/dev/nvidia[0-9]*"), "read-only, if installed"),
            ],
            notes=[
                "a GPU client makes destroying instances or changing the mode fail",
                "nvidia-persistenced and nv-fabricmanager hold the devices beside every MIG "
                "change: not counted",
            ],
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
