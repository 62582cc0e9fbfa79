"""One module per finding id; each exposes `rule(inp) -> list[Finding]`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mignurse.diagnose.engine import Rule

# module → the finding id it raises (README's finding table)
MODULES = {
    "repair_loop": "node-repair-loop",
    "churn": "replacement-churn",
    "notready_loop": "notready-loop",
    "not_ready": "node-not-ready",
    "mig_hook": "mig-hook-kubelet-restart",
    "hardware": "accelerated-hardware-not-ready",
    "repair_blocked": "repair-blocked",
    "mig_config": "mig-config-failed",
    "mig_layout": "mig-layout-mismatch",
    "repair_risk": "repair-risk",
}


def _load() -> list[tuple[str, Rule]]:
    return [
        (finding_id, importlib.import_module(f"{__name__}.{module}").rule)
        for module, finding_id in MODULES.items()
    ]


RULES: list[tuple[str, Rule]] = _load()
