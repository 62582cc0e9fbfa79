"""Running commands on the node for the MIG steps: where mignurse's own files live there
(MIG_DIR, its config and empty hooks file), a script or argv run through the run's shell
into the node with its exit status and output tail recorded in the audit log, node paths
prefixed with `${MIGNURSE_ROOT:-}` (as the collector's are) so the simulator's node sandboxes
hold the files while plans show the real paths, and mig-parted's fatal line as the reason.
"""

from __future__ import annotations

import io
import re
import shlex
from dataclasses import dataclass

from mignurse.runner.step import (
    NodeCommand,
    StepContext,
    StepFailed,
)

MIG_DIR = "/var/lib/mignurse/mig"
CONFIG_FILE = f"{MIG_DIR}/config.yaml"
HOOKS_FILE = f"{MIG_DIR}/hooks.yaml"
EMPTY_HOOKS = "version: v1\nhooks: {}\n"
POLL_SECONDS = 2.0  # how often a step waiting on the node or the API reads again
_FATAL = re.compile(r'level=fatal msg="((?:[^"\\]|\\.)*)"')
_ROOTED = (MIG_DIR, "/dev/")
_SHELL_PREAMBLE = 'R="${MIGNURSE_ROOT:-}"\n'
AUDIT_OUTPUT_CHARS = 2000


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


def shell_words(argv: tuple[str, ...]) -> str:
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


def run_argv(
    ctx: StepContext, argv: tuple[str, ...], timeout: float | None = None, *, rooted: bool = False
) -> NodeOutput:
    """Run `argv` on the step's node, logged; `rooted`: its program is a path under the node's
    root (an operator-installed binary, not one on PATH)."""
    ctx.log("$ " + " ".join(argv))
    words = shell_words(argv)
    if rooted:
        words = '"$R"' + shlex.quote(argv[0]) + " " + shell_words(argv[1:])
    out = run_script(ctx, words + "\n", " ".join(argv[:6]), timeout)
    for line in (out.stdout.strip().splitlines() or [])[-3:]:
        ctx.log("  " + line)
    if out.rc != 0:
        ctx.log(f"  exit {out.rc}: {out.reason()}")
    return out


def node_command(ctx: StepContext, argv: tuple[str, ...], why: str) -> NodeCommand:
    return NodeCommand(ctx.node, argv, why)


# -- labels and pods ---------------------------------------------------------------------------
