"""Changing and reading the GPUs' MIG layout: `apply-mig-layout` (mignurse's own config and
an empty hooks file written, then assert → apply --mode-only → assert --mode-only → apply →
assert with nvidia-mig-parted, never through a hook, then `nvidia-smi -L` and, where CDI is
on, the management CDI spec made again: `cdi.py`), the record of each
GPU's mode and profile counts taken before the first write (what undo compares), the node's
MIG state read through its NVML probe or nvidia-smi, and `verify-mig-layout`.
"""

from __future__ import annotations

import shlex
from typing import Any

from mignurse.gpu.profiles import (
    describe_counts,
)
from mignurse.model import (
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    PROBE_OK,
    MigState,
)
from mignurse.runner.step import (
    Action,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
)
from mignurse.runner.steps.mig import cdi
from mignurse.runner.steps.mig.nodecmd import (
    CONFIG_FILE,
    EMPTY_HOOKS,
    HOOKS_FILE,
    MIG_DIR,
    node_command,
    run_argv,
    run_script,
)
from mignurse.runner.steps.mig.target import MigTarget, migparted_config, resolve_target

MIG_PARTED = ("env", "-u", "MIG_PARTED_HOOKS_FILE", "nvidia-mig-parted")


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
            node_command(
                ctx, ("sh", "-c", f"mkdir -p {MIG_DIR} && cat > {CONFIG_FILE}"), "the config"
            ),
            node_command(
                ctx, ("sh", "-c", f"cat > {HOOKS_FILE}"), "an empty hooks file: hooks: {}"
            ),
        ]
        commands += [node_command(ctx, argv, why) for _name, argv, why in _sequence(target.config)]
        commands.append(
            node_command(ctx, ("nvidia-smi", "-L"), "creates the new MIG capability nodes")
        )
        commands += cdi.plan_commands(ctx)
        return StepPlan(
            commands=commands,
            notes=[
                f"every GPU instance on {ctx.node} is destroyed and recreated as "
                + (describe_counts(target.per_gpu) if target.layout.mig_enabled else "MIG off")
                + " per GPU",
                "MIG_PARTED_HOOKS_FILE is unset and apply gets an empty hooks file: no hook "
                "runs, so nothing restarts kubelet or containerd or runs daemon-reload",
                f"where the node has {cdi.MANAGEMENT_SPEC} (CDI on), it is made again after "
                "the apply, as mig-manager does, so DCGM and the operands see the new MIG devices",
                f"{CONFIG_FILE}:\n{config_yaml.rstrip()}",
            ],
            data={"config": target.config, "configYaml": config_yaml},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        config = str(plan.data["config"])
        spec = cdi.read_spec(ctx)  # (a spec that cannot be made again stops the run here)
        ctx.intend(f"write {CONFIG_FILE} and an empty {HOOKS_FILE} on {ctx.node}")
        run_script(ctx, _write_files_script(str(plan.data["configYaml"])), "writing the config")
        steps = {name: argv for name, argv, _why in _sequence(config)}
        if run_argv(ctx, steps["assert"]).rc == 0:
            ctx.log(f"{config} is already applied on {ctx.node}")
            run_argv(ctx, ("nvidia-smi", "-L"), timeout=60)
            if spec is not None:  # (a resumed run may find the layout in place, the spec not)
                cdi.regenerate(ctx, spec)
            return {"config": config, "alreadyApplied": True, "cdiSpec": _cdi_words(spec)}
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
        if spec is not None:
            cdi.regenerate(ctx, spec)
        return {"config": config, "alreadyApplied": False, "cdiSpec": _cdi_words(spec)}

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


def _cdi_words(spec: cdi.CdiSpec | None) -> str:
    return "absent" if spec is None else "regenerated"


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
    # The evidence parsers load when a node is read, not when a runbook is listed.
    from mignurse.evidence.nvml_json import parse_nvml_json
    from mignurse.evidence.nvsmi import merge_smi, parse_mig_lgi, parse_smi_list, parse_smi_xml

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
                node_command(
                    ctx, ("mignurse", "probe", "-o", "json"), "NVML, where mignurse is installed"
                ),
                node_command(ctx, ("nvidia-smi", "-q", "-x"), "otherwise"),
                node_command(ctx, ("nvidia-smi", "-L"), "otherwise"),
                node_command(ctx, ("nvidia-smi", "mig", "-lgi"), "otherwise"),
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
