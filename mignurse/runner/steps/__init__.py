"""The actions runbooks name, one module (or subpackage) per area (kube, collect, mig,
repair, instance).

`load_actions()` imports every module here, subpackages' modules included, so each
`@action` registers itself; the schema and the engine call it, so a new step module needs no
registry edit.
"""

from __future__ import annotations

import importlib
import pkgutil

from mignurse.runner.step import ACTIONS, Action


def load_actions() -> dict[str, type[Action]]:
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        if not module.name.rpartition(".")[2].startswith("_"):
            importlib.import_module(module.name)
    return ACTIONS
