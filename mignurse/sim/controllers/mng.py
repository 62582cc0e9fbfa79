"""EKS managed node groups' node auto repair: cordon, replace or reboot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.sim import nodegroups, objects
from mignurse.sim.controllers.base import (
    KUBELET_STATUS_SYNC,
    MNG_CORDON_DELAY,
    MNG_REBOOT_DOWNTIME,
    MNG_RETRY,
    Machine,
)
from mignurse.sim.objects import JsonDict

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class ManagedNodeGroups:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    # ------------------------------------------------------------------ managed node group repair

    def observe(self, machine: Machine, node: JsonDict) -> None:
        """EKS node auto repair for a node group: a failed check cordons the node, then after
        the wait its action runs (node-repair.adoc, node-health.adoc)."""
        config = machine.pool.node_repair
        if config is None or not config.enabled or not machine.alive or machine.mng_repairing:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        key = None if check is None else (check.condition, check.reason, check.since)
        if key == machine.mng_check:
            return
        machine.mng_check = key
        machine.mng_token += 1
        if check is None:
            return
        # Only a check with an action cordons; NoAction leaves the node alone (inference).
        self.loops.schedule(
            max(self.loops.t, check.since + MNG_CORDON_DELAY),
            self.cordon,
            machine,
            machine.mng_token,
        )
        self.loops.schedule(max(self.loops.t, check.due), self.repair, machine, machine.mng_token)

    def cordon(self, machine: Machine, token: int) -> None:
        if token != machine.mng_token or not machine.alive:
            return
        machine.mng_cordoned = True
        self.loops.kubelet.cordon(machine, True)

    def unhealthy(self, machine: Machine) -> bool:
        node = self.loops.node(machine)
        return node is not None and any(
            nodegroups.failing(c["type"], c["status"]) for c in node["status"].get("conditions", [])
        )

    def repair(self, machine: Machine, token: int) -> None:
        if token != machine.mng_token or not machine.alive:
            return
        config = machine.pool.node_repair
        node = self.loops.node(machine)
        if config is None or node is None:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        if check is None or check.due > self.loops.t:
            return
        group = [
            x for x in self.loops.pool_machines[machine.pool.name] if x.registered and not x.removed
        ]
        unhealthy = sum(1 for x in group if self.unhealthy(x))
        limit = nodegroups.parallel_limit(config, unhealthy)
        running = sum(1 for x in group if x.mng_repairing)
        if nodegroups.halted(config, len(group), unhealthy) or (
            limit is not None and running >= limit
        ):
            self.loops.schedule(self.loops.t + MNG_RETRY, self.repair, machine, token)
            return
        machine.mng_repairing = check.action
        if check.action == nodegroups.REPLACE:
            self.loops.termination.terminate(
                machine, cause="repair"
            )  # the Auto Scaling group launches a new instance
        else:
            self._reboot(machine)

    def _reboot(self, machine: Machine) -> None:
        """RebootInstances: kubelet and the agent go away until the instance is back."""
        self.loops.kubelet.stop(machine)
        machine.nma_running = False
        machine.nma_token += 1
        self.loops.schedule(self.loops.t + MNG_REBOOT_DOWNTIME, self._boot, machine)

    def _boot(self, machine: Machine) -> None:
        node = self.loops.node(machine)
        if node is None:
            return
        machine.boot += 1
        # A reboot clears a one-off fault; what the image causes comes back (inference).
        machine.nma_faults = {
            k: v for k, v in machine.nma_faults.items() if k in machine.image_faults
        }
        boot_id = objects.stable_uuid("boot", machine.instance_id, machine.boot)
        node["status"]["nodeInfo"]["bootID"] = boot_id
        self.loops.tx.put("nodes", node)
        machine.kubelet_sees_unschedulable = False
        if machine.pool.dra:
            self.loops.dra.rebooted(machine)
        self.loops.kubelet.start(machine)
        self.loops.kubelet.startup_events(machine)
        self.loops.kubelet_event(
            machine,
            "Rebooted",
            f"Node {machine.node} has been rebooted, boot id: {boot_id}",
            "Warning",
        )
        self.loops.schedule(
            self.loops.t + KUBELET_STATUS_SYNC, self.loops.kubelet.kubelet_sees_cordon, machine
        )
        self.loops.schedule(self.loops.t + KUBELET_STATUS_SYNC, self._rebooted_ready, machine)

    def _rebooted_ready(self, machine: Machine) -> None:
        if machine.removed:
            return
        self.loops.kubelet.become_ready(machine)
        if machine.pool.node_monitoring_agent:
            self.loops.nma.start(machine)
        if machine.mng_cordoned:
            # Repair hands a rebooted node back once it is Ready again (inference).
            machine.mng_cordoned = False
            self.loops.kubelet.cordon(machine, False)
        machine.mng_repairing = None
        machine.mng_check = None
        node = self.loops.node(machine)
        if node is not None:
            self.observe(machine, node)
