"""The GPU operator's management CDI spec, regenerated after the GPUs' MIG layout changes, as
mig-manager does after a reconfigure with CDI on (docs/mig.md, "The management CDI spec").

With CDI on (the ClusterPolicy's `cdi.enabled`, on by default from gpu-operator v25.10.0:
api/nvidia/v1/clusterpolicy_types.go `CDIConfigSpec.IsEnabled`), the operator's toolkit writes
/var/run/cdi/management.nvidia.com-gpu.yaml, and the operands (DCGM, dcgm-exporter, the
validator) get their devices from it. The spec lists the `/dev/nvidia-caps/nvidia-cap*` nodes
that existed when it was made (NVIDIA/nvidia-container-toolkit@v1.20.0 pkg/nvcdi/management.go),
so a new layout's MIG instances are missing from it until it is made again. mig-manager makes
it again after every apply (NVIDIA/mig-parted@v0.15.0 pkg/mig/reconfigure/reconfigure.go
`handleCDI`, `createCDISpec`): `nvidia-ctk system create-device-nodes --control-devices`,
then `nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com --class=gpu`.
This module runs the same two commands on the host.

Decisions:
- The spec's presence on the node is the test, not the ClusterPolicy: a node without it has
  nothing to keep current (CDI off, or an operator before v25.10 with the field unset), and
  one with it is read by the operands whatever the operator's version says.
- The host paths come from the node itself: the driver and device roots from the file the
  operator's validator writes, /run/nvidia/validations/driver-ready (`NVIDIA_DRIVER_ROOT=`,
  `NVIDIA_DEV_ROOT=`: NVIDIA/gpu-operator@v26.7.0 cmd/nvidia-validator/main.go
  `createStatusFile`), and the hook's path from the spec in place (the toolkit's install
  folder, which also holds `nvidia-ctk`: nvidia-container-toolkit@v1.20.0
  cmd/nvidia-ctk-installer/toolkit/installer/executables.go). mig-manager generates with its
  container's paths and rewrites them to the host's (`nvidia-ctk cdi transform root`); run on
  the host, the host's paths are given at once.
- A node whose spec cannot be regenerated (no driver root recorded, a path that is not a plain
  absolute path) is refused before anything changes: a layout applied beside a spec left stale
  would be reported as serving while DCGM cannot see it.
- It is regenerated after every apply, including one that found the layout in place: a run
  resumed after an interruption between the apply and the regeneration finds the layout in
  place and the spec still stale (mig-manager regenerates only after an apply that changed
  something).
- Nothing here restarts a service: `nvidia-ctk` writes the spec and device nodes only.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from mignurse.runner.step import NodeCommand, StepContext, StepFailed
from mignurse.runner.steps.mig.nodecmd import node_command, run_argv, run_script

MANAGEMENT_SPEC = "/var/run/cdi/management.nvidia.com-gpu.yaml"
DRIVER_READY = "/run/nvidia/validations/driver-ready"
_HOOKS = ("nvidia-cdi-hook", "nvidia-ctk")  # the hook binary: toolkit v1.16 on, and before
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+/-]{0,255}")

# Read-only: whether the spec is there, the roots the validator recorded, and the spec's hook
# path (each line bounded; the spec is the toolkit's, a few hundred lines).
_READ = (
    f'spec="$R"{MANAGEMENT_SPEC}\n'
    'if [ ! -f "$spec" ]; then echo spec=absent; exit 0; fi\n'
    "echo spec=present\n"
    f"sed -n -E 's/^(NVIDIA_DRIVER_ROOT|NVIDIA_DEV_ROOT)=/\\1=/p' \"$R\"{DRIVER_READY} "
    "2>/dev/null | head -c 2048\n"
    'sed -n -E \'s#^[[:space:]]*path:[[:space:]]*"?(/[^[:space:]"]*/nvidia-(cdi-hook|ctk))"?'
    '[[:space:]]*$#hook=\\1#p\' "$spec" | head -n 1 | head -c 1024\n'
)


@dataclass(frozen=True)
class CdiSpec:
    """What regenerating a node's management CDI spec takes: the host's driver and device
    roots and the hook the spec calls (its folder holds the `nvidia-ctk` to run)."""

    driver_root: str
    dev_root: str | None
    hook: str

    @property
    def ctk(self) -> str:
        return posixpath.join(posixpath.dirname(self.hook), "nvidia-ctk")

    def argvs(self) -> list[tuple[tuple[str, ...], str]]:
        """(argv, why) of the two commands, mig-manager's, with the host's paths."""
        dev = (f"--dev-root={self.dev_root}",) if self.dev_root else ()
        # toolkit v1.16 renamed --nvidia-ctk-path to --nvidia-cdi-hook-path and kept the old
        # name as an alias (cmd/nvidia-ctk/cdi/generate/generate.go): a v1.15 nvidia-ctk
        # knows only the old one, and its hook is nvidia-ctk itself
        hook_flag = (
            "--nvidia-ctk-path" if self.hook.endswith("/nvidia-ctk") else ("--nvidia-cdi-hook-path")
        )
        return [
            (
                (self.ctk, "system", "create-device-nodes", "--control-devices", *dev),
                "the control device nodes, as mig-manager makes them",
            ),
            (
                (
                    self.ctk,
                    "cdi",
                    "generate",
                    "--mode=management",
                    f"--driver-root={self.driver_root}",
                    *dev,
                    "--vendor=management.nvidia.com",
                    "--class=gpu",
                    f"{hook_flag}={self.hook}",
                    f"--output={MANAGEMENT_SPEC}",
                ),
                "the management CDI spec again, listing the new MIG devices",
            ),
        ]


def plan_commands(ctx: StepContext) -> list[NodeCommand]:
    """What the plan shows: the read, and the two commands where the spec is found."""
    ctk = "<toolkit>/nvidia-ctk"
    return [
        node_command(
            ctx,
            ("test", "-f", MANAGEMENT_SPEC),
            f"the operator's management CDI spec; where it is, {DRIVER_READY} gives the roots",
        ),
        node_command(
            ctx,
            (ctk, "system", "create-device-nodes", "--control-devices"),
            "where the spec is: as mig-manager does after a reconfigure",
        ),
        node_command(
            ctx,
            (ctk, "cdi", "generate", "--mode=management", f"--output={MANAGEMENT_SPEC}"),
            "where the spec is: made again, listing the new MIG devices",
        ),
    ]


def read_spec(ctx: StepContext) -> CdiSpec | None:
    """What regenerating the node's management CDI spec takes; None where the node has none.
    StepFailed, in one line, where it has one that cannot be regenerated."""
    out = run_script(ctx, _READ, "management CDI spec", timeout=30)
    fields: dict[str, str] = {}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in fields:
            fields[key] = value.strip()
    if out.rc != 0 or fields.get("spec") not in ("absent", "present"):
        raise StepFailed(f"cannot tell whether {ctx.node} has {MANAGEMENT_SPEC}: {out.reason()}")
    if fields["spec"] == "absent":
        return None
    why = (
        f"{ctx.node} has the GPU operator's management CDI spec ({MANAGEMENT_SPEC}), which must "
        "be made again after its MIG layout changes, as mig-manager does"
    )
    driver_root = fields.get("NVIDIA_DRIVER_ROOT", "")
    if not _plain(driver_root):
        raise StepFailed(
            f"{why}, but {DRIVER_READY} gives no usable driver root "
            f"({_shown(driver_root)}): check the operator's validator pod on the node "
            "(nvidia-operator-validator), then run again"
        )
    dev_root = fields.get("NVIDIA_DEV_ROOT") or None
    if dev_root is not None and not _plain(dev_root):
        raise StepFailed(f"{why}, but {DRIVER_READY} gives NVIDIA_DEV_ROOT={_shown(dev_root)}")
    hook = fields.get("hook", "")
    if not _plain(hook) or posixpath.basename(hook) not in _HOOKS:
        raise StepFailed(
            f"{why}, but the spec names no nvidia-cdi-hook or nvidia-ctk by a plain path "
            f"({_shown(hook)}): regenerate it with the toolkit, then run again"
        )
    return CdiSpec(driver_root, dev_root, hook)


def regenerate(ctx: StepContext, spec: CdiSpec) -> None:
    """Run the two commands on the node; StepFailed with nvidia-ctk's reason."""
    ctx.intend(f"regenerate {MANAGEMENT_SPEC} on {ctx.node}")
    for argv, _why in spec.argvs():
        out = run_argv(ctx, argv, timeout=120, rooted=True)
        if out.rc != 0:
            raise StepFailed(
                f"{' '.join(argv[1:3])} failed on {ctx.node}: {out.reason()}; the GPUs hold the "
                f"new layout, {MANAGEMENT_SPEC} still the old one"
            )


def _plain(path: str) -> bool:
    """An absolute path of plain characters, without `..` (what the node wrote is untrusted)."""
    return bool(_PLAIN_PATH.fullmatch(path)) and ".." not in path.split("/")


def _shown(value: str) -> str:
    return repr(value[:80]) if value else "none"
