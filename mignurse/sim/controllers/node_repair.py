"""Karpenter's node.health controller: node repair and its unhealthy-node guard."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mignurse.sim import karpenter_objects
from mignurse.sim.controllers.base import (
    REPAIR_BLOCKED_DEDUPE,
    Machine,
    parse_ts,
)
from mignurse.sim.objects import JsonDict, ts

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class NodeRepair:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self.pool_unhealthy: dict[str, int] = {p.name: 0 for p in loops.scenario.pools}

    # ------------------------------------------------------------------ Karpenter node repair

    def conditions_changed(self, machine: Machine, node: JsonDict, transitioned: bool) -> None:
        if machine.pool.kind == "nodepool":
            self.refresh_health(machine, node)
            tr = self.loops.traits
            # From KC v1.7.0 node.health only wakes for a condition status/transition change.
            if transitioned or (tr is not None and tr.reconciles_on_every_node_update):
                self.health_reconcile(machine)
        else:
            self.loops.mng.observe(machine, node)

    def node_written(self, machine: Machine) -> None:
        """Any other Node write: before KC v1.7.0 it reconciles node.health too."""
        tr = self.loops.traits
        if (
            machine.pool.kind == "nodepool"
            and tr is not None
            and tr.reconciles_on_every_node_update
        ):
            self.health_reconcile(machine)

    def refresh_health(self, machine: Machine, node: JsonDict) -> None:
        """Which repair policies the node matches now (type + status), with their deadlines."""
        policies = self.loops.traits.repair_policies if self.loops.traits else {}
        unhealthy: dict[str, float] = {}
        for c in node["status"].get("conditions", []):
            toleration = policies.get((c["type"], c["status"]))
            if toleration is not None:
                unhealthy[c["type"]] = parse_ts(c["lastTransitionTime"]) + toleration
        machine.unhealthy_since = unhealthy
        self.count_health(machine)

    def count_health(self, machine: Machine) -> None:
        counted = bool(machine.unhealthy_since) and machine.registered and not machine.removed
        if counted != machine.counted_unhealthy:
            machine.counted_unhealthy = counted
            self.pool_unhealthy[machine.pool.name] += 1 if counted else -1

    def _pool_over_guard(self, pool: str) -> bool:
        """More unhealthy Nodes than ceil(20% of the NodePool's Nodes) (KC health/controller.go
        allowedUnhealthyPercent, rounded up)."""
        return self.pool_unhealthy[pool] > math.ceil(0.2 * self.loops.pool_nodes[pool])

    def health_reconcile(self, machine: Machine) -> None:
        """One reconcile of Karpenter's node.health controller for this Node, at the modelled
        version (KC pkg/controllers/node/health/controller.go)."""
        tr = self.loops.traits
        if (
            tr is None
            or not self.loops.repair_enabled
            or machine.nodeclaim is None
            or not machine.registered
            or machine.removed
            or machine.claim_gone
        ):
            return
        over = self._pool_over_guard(machine.pool.name)
        if tr.guard_before_toleration and over:
            self._publish_repair_blocked(machine)  # no requeue before v1.7.0
            return
        if not machine.unhealthy_since:
            return
        deadline = min(machine.unhealthy_since.values())
        if deadline > self.loops.t:
            self._requeue_health(machine, deadline)
            return
        if over:
            self._publish_repair_blocked(machine)
            if tr.blocked_requeue is not None:
                self._requeue_health(machine, self.loops.t + tr.blocked_requeue)
            return
        self._annotate_termination_time(machine)
        if not machine.deleting:  # deleteNodeClaim returns early for a NodeClaim already deleting
            self.loops.termination.terminate(machine, cause="repair")

    def _requeue_health(self, machine: Machine, at: float) -> None:
        if machine.repair_due is not None and self.loops.t < machine.repair_due <= at:
            return  # an earlier requeue of the same key is already pending
        machine.repair_due = at
        machine.repair_token += 1
        self.loops.schedule(at, self._health_requeued, machine, machine.repair_token)

    def _health_requeued(self, machine: Machine, token: int) -> None:
        if token != machine.repair_token:
            return
        machine.repair_due = None
        self.health_reconcile(machine)

    def _annotate_termination_time(self, machine: Machine) -> None:
        claim = self.loops.karpenter.claim(machine)
        if claim is None:
            return
        annotations = claim["metadata"].setdefault("annotations", {})
        current = annotations.get(karpenter_objects.TERMINATION_TIMESTAMP)
        if current is not None and parse_ts(current) < self.loops.t:
            return  # an earlier termination time is kept
        annotations[karpenter_objects.TERMINATION_TIMESTAMP] = ts(self.loops.t)
        self.loops.tx.put("nodeclaims", claim)

    def _publish_repair_blocked(self, machine: Machine) -> None:
        """Three copies, all on the Node, deduplicated 15 min on the Node's, NodeClaim's and
        NodePool's UID (KC health/events.go NodeRepairBlocked)."""
        assert self.loops.traits is not None
        ref = self.loops.node_ref(machine)
        message = self.loops.traits.nodepool_blocked_message
        for uid in (
            machine.node_uid,
            machine.claim_uid,
            self.loops.pool_uid.get(machine.pool.name, ""),
        ):
            self.loops.publish(
                ref,
                "NodeRepairBlocked",
                message,
                "Warning",
                dedupe=(uid,),
                timeout=REPAIR_BLOCKED_DEDUPE,
            )

    def set_repair_enabled(self, enabled: bool) -> None:
        if enabled == self.loops.repair_enabled:
            return
        self.loops.repair_enabled = enabled
        if enabled:
            # A new controller lists every Node once: nodes already past their toleration are
            # due at once (the resume hazard), bounded only by the guard.
            for machine in list(self.loops.machines.values()):
                if machine.pool.kind == "nodepool":
                    self.health_reconcile(machine)
