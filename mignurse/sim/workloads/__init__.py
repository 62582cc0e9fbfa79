"""Pods and what owns them: Deployments and their ReplicaSets (`deployments`), the
kube-scheduler (`scheduler`), graceful deletion that the kubelet confirms, pod GC, and what
the node lifecycle controller does to the pods of a node that stops reporting (`deletion`),
and the Eviction API with PodDisruptionBudgets (`disruption`), over the records they share
(`records`, `base`).

The `Workloads` object belongs to one `ControlLoops` and runs inside its transactions and clock.
"""

from mignurse.sim.workloads.deletion import PodDeletion
from mignurse.sim.workloads.deployments import DeploymentControllers
from mignurse.sim.workloads.disruption import DisruptionBudgets
from mignurse.sim.workloads.records import (
    DAEMON_REQUESTS,
    POD_TERMINATION_GRACE,
    PodRecord,
    Workload,
)
from mignurse.sim.workloads.scheduler import KubeScheduler

__all__ = ["DAEMON_REQUESTS", "POD_TERMINATION_GRACE", "PodRecord", "Workload", "Workloads"]


class Workloads(DeploymentControllers, KubeScheduler, PodDeletion, DisruptionBudgets):
    """The controllers that own pods in one simulated cluster."""
