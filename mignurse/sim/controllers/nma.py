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
    from mignurse.sim.controllers.loops import ControlLoops


class NodeMonitoringAgent:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    def condition_types(self, machine: Machine) -> list[str]:
        it = hardware.instance_type(machine.pool.instance_type)
        types = ["KernelReady", "NetworkingReady", "StorageReady", "ContainerRuntimeReady"]
        if it.gpu is not None:
            types.insert(0, "AcceleratedHardwareReady")
        return types

    def start(self, machine: Machine) -> None:
        """Agent start: every managed condition True with a fresh transition (NMA#266)."""
        if not machine.registered or machine.removed:
            return
        restarted = machine.nma_running
        machine.nma_running = True
        for ctype in self.condition_types(machine):
            reason, message = node_objects.NMA_HEALTHY[ctype]
            machine.nma_memory[ctype] = ("True", reason, message)
            node = self.loops.node(machine)
            if node is not None and restarted:
                # A restart re-posts True even when it already was, with a new transition time.
                for c in node["status"].get("conditions", []):
                    if c["type"] == ctype and c["status"] == "True":
                        c["lastTransitionTime"] = ts(self.loops.t)
                self.loops.tx.put("nodes", node)
            self.loops.set_node_condition(machine, ctype, "True", reason, message)
        for ctype, fault in machine.nma_faults.items():
            # A persistent fault is found again once the agent's DCGM grace period is over.
            self.loops.schedule(self.loops.t + DCGM_GRACE, self.refault, machine, ctype, fault)
        machine.nma_token += 1
        self.loops.schedule(
            self.loops.next_tick(NMA_HEARTBEAT), self.heartbeat, machine, machine.nma_token
        )

    def refault(self, machine: Machine, ctype: str, fault: tuple[str, str, str]) -> None:
        if machine.removed or not machine.nma_running or machine.nma_faults.get(ctype) != fault:
            return
        machine.nma_memory[ctype] = fault
        self.loops.set_node_condition(machine, ctype, *fault)

    def heartbeat(self, machine: Machine, token: int) -> None:
        if machine.removed or token != machine.nma_token:
            return
        if machine.api_touched:
            machine.api_touched = False
            for ctype, value in machine.nma_memory.items():
                self.loops.set_node_condition(machine, ctype, *value)
        self.loops.schedule(self.loops.next_tick(NMA_HEARTBEAT), self.heartbeat, machine, token)
