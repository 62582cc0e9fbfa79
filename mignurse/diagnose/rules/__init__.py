"""One module per finding id; each exposes `rule(inp) -> list[Finding]`."""

from __future__ import annotations

from mignurse.diagnose.findings import Rule
from mignurse.diagnose.rules import (
    churn,
    gpu_stack,
    hardware,
    mig_config,
    mig_hook,
    mig_layout,
    not_ready,
    notready_loop,
    preflight,
    repair_blocked,
    repair_loop,
    repair_risk,
)

# finding id → its rule, in the order the engine runs them (docs/commands.md's finding table)
RULES: list[tuple[str, Rule]] = [
    ("node-repair-loop", repair_loop.rule),
    ("replacement-churn", churn.rule),
    ("notready-loop", notready_loop.rule),
    ("node-not-ready", not_ready.rule),
    ("mig-hook-kubelet-restart", mig_hook.rule),
    ("accelerated-hardware-not-ready", hardware.rule),
    ("repair-blocked", repair_blocked.rule),
    ("mig-config-failed", mig_config.rule),
    ("mig-layout-mismatch", mig_layout.rule),
    ("gpu-stack-down", gpu_stack.rule),
    ("repair-risk", repair_risk.rule),
    ("known-bad-combination", preflight.rule),
]

# module → the finding id it raises
MODULES = {rule.__module__.rsplit(".", 1)[1]: finding_id for finding_id, rule in RULES}
