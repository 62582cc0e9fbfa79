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
    from mignurse.sim.controllers.world import World


class ManagedNodeGroups:
    def __init__(self, world: World) -> None:
        self.w = world

    # ------------------------------------------------------------------ managed node group repair

    def observe(self, m: Machine, node: JsonDict) -> None:
        """EKS node auto repair for a node group: a failed check cordons the node, then after
        the wait its action runs (node-repair.adoc, node-health.adoc)."""
        config = m.pool.node_repair
        if config is None or not config.enabled or not m.alive or m.mng_repairing:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        key = None if check is None else (check.condition, check.reason, check.since)
        if key == m.mng_check:
            return
        m.mng_check = key
        m.mng_token += 1
        if check is None:
            return
        # Only a check with an action cordons; NoAction leaves the node alone (inference).
        self.w.schedule(max(self.w.t, check.since + MNG_CORDON_DELAY), self.cordon, m, m.mng_token)
        self.w.schedule(max(self.w.t, check.due), self.repair, m, m.mng_token)

    def cordon(self, m: Machine, token: int) -> None:
        if token != m.mng_token or not m.alive:
            return
        m.mng_cordoned = True
        self.w.kubelet.cordon(m, True)

    def unhealthy(self, m: Machine) -> bool:
        node = self.w.node(m)
        return node is not None and any(
            nodegroups.failing(c["type"], c["status"]) for c in node["status"].get("conditions", [])
        )

    def repair(self, m: Machine, token: int) -> None:
        if token != m.mng_token or not m.alive:
            return
        config = m.pool.node_repair
        node = self.w.node(m)
        if config is None or node is None:
            return
        check = nodegroups.next_repair(config, node["status"].get("conditions", []))
        if check is None or check.due > self.w.t:
            return
        group = [x for x in self.w.pool_machines[m.pool.name] if x.registered and not x.removed]
        unhealthy = sum(1 for x in group if self.unhealthy(x))
        limit = nodegroups.parallel_limit(config, unhealthy)
        running = sum(1 for x in group if x.mng_repairing)
        if nodegroups.halted(config, len(group), unhealthy) or (
            limit is not None and running >= limit
        ):
            self.w.schedule(self.w.t + MNG_RETRY, self.repair, m, token)
            return
        m.mng_repairing = check.action
        if check.action == nodegroups.REPLACE:
            self.w.termination.terminate(
                m, cause="repair"
            )  # the Auto Scaling group launches a new instance
        else:
            self._reboot(m)

    def _reboot(self, m: Machine) -> None:
        """RebootInstances: kubelet and the agent go away until the instance is back."""
        self.w.kubelet.stop(m)
        m.nma_running = False
        m.nma_token += 1
        self.w.schedule(self.w.t + MNG_REBOOT_DOWNTIME, self._boot, m)

    def _boot(self, m: Machine) -> None:
        node = self.w.node(m)
        if node is None:
            return
        m.boot += 1
        # A reboot clears a one-off fault; what the image causes comes back (inference).
        m.nma_faults = {k: v for k, v in m.nma_faults.items() if k in m.image_faults}
        boot_id = objects.stable_uuid("boot", m.instance_id, m.boot)
        node["status"]["nodeInfo"]["bootID"] = boot_id
        self.w.tx.put("nodes", node)
        m.kubelet_sees_unschedulable = False
        if m.pool.dra:
            self.w.dra.rebooted(m)
        self.w.kubelet.start(m)
        self.w.kubelet.startup_events(m)
        self.w.kubelet_event(
            m, "Rebooted", f"Node {m.node} has been rebooted, boot id: {boot_id}", "Warning"
        )
        self.w.schedule(self.w.t + KUBELET_STATUS_SYNC, self.w.kubelet.kubelet_sees_cordon, m)
        self.w.schedule(self.w.t + KUBELET_STATUS_SYNC, self._rebooted_ready, m)

    def _rebooted_ready(self, m: Machine) -> None:
        if m.removed:
            return
        self.w.kubelet.become_ready(m)
        if m.pool.node_monitoring_agent:
            self.w.nma.start(m)
        if m.mng_cordoned:
            # Repair hands a rebooted node back once it is Ready again (inference).
            m.mng_cordoned = False
            self.w.kubelet.cordon(m, False)
        m.mng_repairing = None
        m.mng_check = None
        node = self.w.node(m)
        if node is not None:
            self.observe(m, node)
