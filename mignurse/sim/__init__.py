"""A local Kubernetes API server that behaves like EKS with Karpenter, driven by scenarios.

Used by the tests, by `mignurse demo` (in-process) and by `mignurse sim serve`.
"""

from mignurse.sim.scenario import list_scenarios, load_scenario
from mignurse.sim.scenario_fields import ScenarioError
from mignurse.sim.scenario_spec import Scenario
from mignurse.sim.simcluster import SimCluster

__all__ = ["Scenario", "ScenarioError", "SimCluster", "list_scenarios", "load_scenario"]
