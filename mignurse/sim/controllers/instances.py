"""EC2 instances and the pools' sizes: launch, shut down, scale."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mignurse.sim import node_objects
from mignurse.sim.controllers.base import (
    INSTANCE_SHUTDOWN,
    NODE_MONITOR_PERIOD,
    SQS_LAG,
    ZONE_SUBNETS,
    Machine,
)
from mignurse.sim.scenario_spec import LifecycleScript, PoolSpec

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class Instances:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self.pool_target: dict[str, int] = {p.name: p.nodes for p in loops.scenario.pools}
        self._reconcile_pending: set[str] = set()
        self._used_ips: set[str] = set()

    # ------------------------------------------------------------------ launch

    def _allocate_ip(self, zone: str) -> str:
        base = ZONE_SUBNETS.get(zone[-1], 0)
        while True:
            ip = f"10.0.{base + self.loops.rng.randrange(32)}.{self.loops.rng.randrange(4, 255)}"
            if ip not in self._used_ips:
                self._used_ips.add(ip)
                return ip

    def launch(
        self,
        pool: PoolSpec,
        at: float,
        *,
        image: str | None = None,
        os_name: str | None = None,
        lifecycle: LifecycleScript | None = None,
        labels: dict[str, str] | None = None,
        node_name: str | None = None,
    ) -> Machine:
        """Start an instance launched at `at`; phases already in the past run right away."""
        image = image or pool.image
        zone = pool.zones[len(self.loops.pool_machines[pool.name]) % len(pool.zones)]
        ip = self._allocate_ip(zone)
        name = node_name or node_objects.node_name_for_ip(ip, self.loops.scenario.region)
        claim = f"{pool.name}-{self.loops.suffix()}" if pool.kind == "nodepool" else None
        machine = Machine(
            pool=pool,
            nodeclaim=claim,
            node=name,
            claim_uid=self.loops.uid(),
            node_uid=self.loops.uid(),
            instance_id=f"i-0{self.loops.rng.getrandbits(64):016x}",
            ip=ip,
            zone=zone,
            image=image,
            os_name=os_name or pool.os,
            launched_at=at,
            lifecycle=lifecycle or pool.lifecycle_for(image),
            extra_labels=labels or {},
        )
        self.loops.machines[name] = machine
        if claim:
            self.loops.claims[claim] = machine
        self.loops.pool_machines[pool.name].append(machine)
        phases: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []
        if claim:
            phases.append((at, self.loops.karpenter.create_claim, (machine,)))
            phases.append((at + pool.launch_after, self.loops.karpenter.claim_launched, (machine,)))
        phases.append((at + pool.register_after, self.loops.kubelet.register, (machine,)))
        for step in machine.lifecycle.steps:
            phases.append((at + step.after, self.loops.kubelet.lifecycle_step, (machine, step)))
        saved = self.loops.t
        for when, fn, args in phases:
            if when <= self.loops.now:
                self.loops.t = when
                fn(*args)
            else:
                self.loops.schedule(when, fn, *args)
        self.loops.t = saved
        backdated = at + pool.register_after < self.loops.now
        if backdated and machine.registered and not machine.removed and machine.kubelet_posting:
            self.loops.kubelet.heartbeat_catch_up(machine)
        return machine

    # ------------------------------------------------------------------ EC2 and interruption

    def terminate_instance(self, machine: Machine) -> None:
        """TerminateInstances (or EC2's own interruption): shutting-down, then terminated.
        The OS stops kubelet and the agent as it shuts down (inference)."""
        if machine.instance_state != "running":
            return
        machine.instance_state = "shutting-down"
        if machine.kubelet_posting and machine.registered:
            self.loops.kubelet.stop(machine)
        machine.nma_running = False
        machine.nma_token += 1
        self._state_change(machine, "shutting-down")
        self.loops.schedule(self.loops.t + INSTANCE_SHUTDOWN, self._instance_terminated, machine)

    def _instance_terminated(self, machine: Machine) -> None:
        machine.instance_state = "terminated"
        self._state_change(machine, "terminated")
        if machine.registered and not machine.removed:
            self.loops.schedule(
                self.loops.t + NODE_MONITOR_PERIOD, self.loops.kubelet.cloud_node_lifecycle, machine
            )

    def _state_change(self, machine: Machine, state: str) -> None:
        """EventBridge forwards every EC2 state change to the interruption queue (KA
        getting-started cloudformation.yaml InstanceStateChangeRule)."""
        k = self.loops.scenario.karpenter
        if k is None or not k.interruption_queue or machine.nodeclaim is None:
            return
        self.loops.schedule(
            self.loops.t + SQS_LAG, self.loops.karpenter.interruption_message, machine, state
        )

    # ------------------------------------------------------------------ pools

    def queue_reconcile(self, pool: str, at: float) -> None:
        if pool in self._reconcile_pending:
            return
        self._reconcile_pending.add(pool)
        self.loops.schedule(at, self.reconcile_pool, pool)

    def reconcile_pool(self, name: str) -> None:
        """A node group's Auto Scaling group keeps its desired size; Karpenter pools get their
        starting size here and follow their pods afterwards."""
        self._reconcile_pending.discard(name)
        pool = self.loops.scenario.pool(name)
        active = [machine for machine in self.loops.pool_machines[name] if not machine.deleting]
        for _ in range(self.pool_target[name] - len(active)):
            self.launch(pool, self.loops.t)

    def scale(self, pool: str, nodes: int) -> None:
        spec = self.loops.scenario.pool(pool)
        wl = self.loops.workloads.workloads.get(
            (spec.workload.namespace, spec.workload.name) if spec.workload else ("", "")
        )
        if spec.kind == "nodepool" and wl is not None and spec.workload is not None:
            # Karpenter follows the pods: scale the pool's Deployment, as an operator would.
            self.loops.workloads.scale_deployment(wl, nodes * spec.workload.pods_per_node)
            return
        if wl is not None and spec.workload is not None:
            self.loops.workloads.scale_deployment(wl, nodes * spec.workload.pods_per_node)
        self.pool_target[pool] = nodes
        active = [machine for machine in self.loops.pool_machines[pool] if not machine.deleting]
        surplus = sorted(active, key=lambda x: x.launched_at, reverse=True)[
            : max(0, len(active) - nodes)
        ]
        for machine in surplus:
            if machine.nodeclaim:
                self.loops.karpenter.consolidate(machine, "Empty")
            else:
                self.loops.termination.terminate(machine, cause="scale-down")
        self.reconcile_pool(pool)
