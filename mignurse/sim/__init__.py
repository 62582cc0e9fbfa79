"""A local Kubernetes API server that behaves like EKS with Karpenter, driven by scenarios.

Used by the tests, by `mignurse demo` (in-process) and by `mignurse sim serve`.

The names below load on first use: a command that only reaches simulated nodes through their
sandboxes (`mignurse.sim.nodes`) does not pay for the API server, the controllers and the
scenarios (over a second of start-up for every `mignurse run` against the simulator).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not `typing`'s: the GPU stand-ins import this package on every call
if TYPE_CHECKING:
    from typing import Any

    from mignurse.sim.scenario import list_scenarios, load_scenario
    from mignurse.sim.scenario_fields import ScenarioError
    from mignurse.sim.scenario_spec import Scenario
    from mignurse.sim.simcluster import SimCluster

_WHERE = {
    "Scenario": "mignurse.sim.scenario_spec",
    "ScenarioError": "mignurse.sim.scenario_fields",
    "SimCluster": "mignurse.sim.simcluster",
    "list_scenarios": "mignurse.sim.scenario",
    "load_scenario": "mignurse.sim.scenario",
}

__all__ = ["Scenario", "ScenarioError", "SimCluster", "list_scenarios", "load_scenario"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
