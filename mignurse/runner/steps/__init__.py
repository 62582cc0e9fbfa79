"""The actions runbooks name, one module per area (kube, collect, mig, repair, instance).

`load_actions()` imports every module here so each `@action` registers itself; the schema
and the engine call it, so a new step module needs no registry edit.
"""

from __future__ import annotations

import importlib
import pkgutil

from mignurse.runner.step import ACTIONS, Action


def load_actions() -> dict[str, type[Action]]:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return ACTIONS
