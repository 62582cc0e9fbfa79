"""The actions runbooks name, one module (or subpackage) per area (kube, collect, mig,
repair, instance).

`MODULES` says which module registers each action (`@action`), so a runbook's steps import
only their own modules: listing the runbooks or checking one loads no collector, diagnosis or
AWS SDK it does not run. `load_actions()` imports every module here, subpackages' modules
included; a test holds `MODULES` to what that registers, so the table cannot drift.

`EFFECTS` says what each action's class declares of itself (`harm`, `mutates`), for what needs
only that: a runbook's harm, the runbook list's HARM column and its JSON. A test holds it to
the registered classes, as `MODULES` is held to the registrations.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import NamedTuple

from mignurse.runner.step import ACTIONS, Action, Harm

MODULES: dict[str, str] = {
    "cordon": f"{__name__}.kube",
    "uncordon": f"{__name__}.kube",
    "drain": f"{__name__}.kube",
    "report-node": f"{__name__}.kube",
    "hold-disruption": f"{__name__}.disruption",
    "release-disruption": f"{__name__}.disruption",
    "collect-bundle": f"{__name__}.collect",
    "delete-nodeclaim": f"{__name__}.instance",
    "terminate-asg-instance": f"{__name__}.instance",
    "wait-replacement": f"{__name__}.instance",
    "pause-node-repair": f"{__name__}.repair",
    "resume-node-repair": f"{__name__}.repair",
    "apply-mig-layout": f"{__name__}.mig.layout",
    "verify-mig-layout": f"{__name__}.mig.layout",
    "mig-preflight": f"{__name__}.mig.preflight",
    "confirm-no-gpu-processes": f"{__name__}.mig.preflight",
    "resume-gpu-operands": f"{__name__}.mig.resume",
    "mig-manager-off": f"{__name__}.mig.labels",
    "pause-gpu-operands": f"{__name__}.mig.labels",
}


class Effect(NamedTuple):
    """An action's `harm` and `mutates`, as its class declares them."""

    harm: Harm
    mutates: bool


EFFECTS: dict[str, Effect] = {
    "cordon": Effect(Harm.LOW, mutates=True),
    "uncordon": Effect(Harm.LOW, mutates=True),
    "drain": Effect(Harm.HIGH, mutates=True),
    "report-node": Effect(Harm.NONE, mutates=False),
    "hold-disruption": Effect(Harm.LOW, mutates=True),
    "release-disruption": Effect(Harm.LOW, mutates=True),
    "collect-bundle": Effect(Harm.NONE, mutates=False),
    "delete-nodeclaim": Effect(Harm.HIGH, mutates=True),
    "terminate-asg-instance": Effect(Harm.HIGH, mutates=True),
    "wait-replacement": Effect(Harm.NONE, mutates=False),
    "pause-node-repair": Effect(Harm.HIGH, mutates=True),
    "resume-node-repair": Effect(Harm.HIGH, mutates=True),
    "apply-mig-layout": Effect(Harm.HIGH, mutates=True),
    "verify-mig-layout": Effect(Harm.NONE, mutates=False),
    "mig-preflight": Effect(Harm.NONE, mutates=False),
    "confirm-no-gpu-processes": Effect(Harm.NONE, mutates=False),
    "resume-gpu-operands": Effect(Harm.LOW, mutates=True),
    "mig-manager-off": Effect(Harm.LOW, mutates=True),
    "pause-gpu-operands": Effect(Harm.LOW, mutates=True),
}


def effect(name: str) -> Effect:
    """The action's harm and whether it changes anything, without importing its module; an
    action missing from the table (registered by a test, say) is asked itself."""
    found = EFFECTS.get(name)
    if found is None:
        cls = load_action(name)
        return Effect(cls.harm, cls.mutates)
    return found


def action_names() -> list[str]:
    """Every action a runbook may name, without importing a step module."""
    return sorted(MODULES)


def load_action(name: str) -> type[Action]:
    """The action registered as `name`, importing its module (and only it) on first use."""
    found = ACTIONS.get(name)
    if found is None:
        importlib.import_module(MODULES[name])
        found = ACTIONS[name]
    return found


def load_actions() -> dict[str, type[Action]]:
    """Every action, each module here imported (the table's test, the schema's reference)."""
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        if not module.name.rpartition(".")[2].startswith("_"):
            importlib.import_module(module.name)
    return ACTIONS
