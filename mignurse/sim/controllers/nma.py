"""The EKS node monitoring agent: the health conditions it posts and re-posts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.sim import hardware, node_objects
from mignurse.sim.controllers.base import (
    DCGM_GRACE,
    NMA_HEARTBEAT,
    Machine,
)
from mignurse.sim.objects import ts

if TYPE_CHECKING:
    from mignurse.sim.controllers.world import World


class NodeMonitoringAgent:
    def __init__(self, world: World) -> None:
        self.w = world

    def condition_types(self, m: Machine) -> list[str]:
        it = hardware.instance_type(m.pool.instance_type)
        types = ["KernelReady", "NetworkingReady", "StorageReady", "ContainerRuntimeReady"]
        if it.gpu is not None:
            types.insert(0, "AcceleratedHardwareReady")
        return types

    def start(self, m: Machine) -> None:
        """Agent start: every managed condition True with a fresh transition (NMA#266)."""
        if not m.registered or m.removed:
            return
        restarted = m.nma_running
        m.nma_running = True
        for ctype in self.condition_types(m):
            reason, message = node_objects.NMA_HEALTHY[ctype]
            m.nma_memory[ctype] = ("True", reason, message)
            node = self.w.node(m)
            if node is not None and restarted:
                # A restart re-posts True even when it already was, with a new transition time.
                for c in node["status"].get("conditions", []):
                    if c["type"] == ctype and c["status"] == "True":
                        c["lastTransitionTime"] = ts(self.w.t)
                self.w.tx.put("nodes", node)
            self.w.set_node_condition(m, ctype, "True", reason, message)
        for ctype, fault in m.nma_faults.items():
            # A persistent fault is found again once the agent's DCGM grace period is over.
            self.w.schedule(self.w.t + DCGM_GRACE, self.refault, m, ctype, fault)
        m.nma_token += 1
        self.w.schedule(self.w.next_tick(NMA_HEARTBEAT), self.heartbeat, m, m.nma_token)

    def refault(self, m: Machine, ctype: str, fault: tuple[str, str, str]) -> None:
        if m.removed or not m.nma_running or m.nma_faults.get(ctype) != fault:
            return
        m.nma_memory[ctype] = fault
        self.w.set_node_condition(m, ctype, *fault)

    def heartbeat(self, m: Machine, token: int) -> None:
        if m.removed or token != m.nma_token:
            return
        if m.api_touched:
            m.api_touched = False
            for ctype, value in m.nma_memory.items():
                self.w.set_node_condition(m, ctype, *value)
        self.w.schedule(self.w.next_tick(NMA_HEARTBEAT), self.heartbeat, m, token)
