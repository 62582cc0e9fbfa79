"""Karpenter's provisioner and the consolidation half of its disruption controller.

Provisioning (KC pkg/controllers/provisioning): pods the kube-scheduler marked Unschedulable,
and the reschedulable pods of nodes being deleted, are batched (BATCH_IDLE_DURATION 1 s, at
most BATCH_MAX_DURATION 10 s), packed onto NodeClaims still launching, then onto new
NodeClaims of the first compatible NodePool (weight, then name) whose `spec.limits` leave room
for one more instance. Consolidation (KC pkg/controllers/disruption): every 10 s, nodes whose
NodeClaim is `Consolidatable` (consolidateAfter since the last pod event) are removed when
empty, or under `WhenEmptyOrUnderutilized` when every pod fits on the other nodes, within the
NodePool's budgets (ceil(nodes × percent) minus nodes NotReady or deleting); a command is
validated 15 s later before it runs.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mignurse.model import scheduling
from mignurse.model.scheduling import Resources
from mignurse.sim import hardware, node_objects, objects
from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import PoolSpec, parse_duration
from mignurse.sim.workloads import DAEMON_REQUESTS, PodRecord

if TYPE_CHECKING:
    from mignurse.sim.controllers import ControlLoops, Machine

BATCH_IDLE = 1.0  # chart env BATCH_IDLE_DURATION
BATCH_MAX = 10.0  # chart env BATCH_MAX_DURATION
NOMINATION_WINDOW = 2 * BATCH_MAX  # KC state/statenode.go nominationWindow
DISRUPTION_POLL = 10.0  # KC disruption/controller.go pollingPeriod
CONSOLIDATION_TTL = 15.0  # KC disruption consolidationTTL: wait, then validate the command
FAILED_SCHEDULING_DEDUPE = 300.0  # KC scheduling/events.go PodFailedToScheduleEvent
# KC v1.7.0+ pkg/controllers/provisioning/scheduling/scheduler.go add()
DRA_UNSUPPORTED = (
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
)
NODE_POOL_KEY = "karpenter.sh/nodepool"


@dataclass(eq=False)
class PlannedClaim:
    pool: PoolSpec
    allocatable: Resources
    used: Resources
    pods: list[PodRecord] = field(default_factory=list)


DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # on a Node: no voluntary disruption


class Provisioner:
    """Karpenter's provisioning and consolidation in the control loops."""

    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops
        self._batch_start: float | None = None
        self._batch_token = 0
        self._polling = False
        self._commands: set[Machine] = set()  # candidates of commands waiting to validate
        self._instances: dict[str, tuple[Resources, Resources]] = {}
        self._overheads: dict[str, Resources] = {}
        # _fits_elsewhere's answers, kept while everything it reads is the same objects; inside
        # one disruption pass nothing changes, so the inputs are compared once per pass
        self._fit_inputs_seen: list[object] = []
        self._fit_answers: dict[Machine, bool] = {}
        self._in_pass = False  # inside _disruption_pass
        self._in_pass_checked = False  # ... and the inputs were compared in it

    # ------------------------------------------------------------------ provisioning

    def trigger(self) -> None:
        """A pod event: open a batch or extend it (idle 1 s, at most 10 s)."""
        if self.loops.scenario.karpenter is None:
            return
        now = self.loops.t
        if self._batch_start is None:
            self._batch_start = now
        due = min(self._batch_start + BATCH_MAX, now + BATCH_IDLE)
        self._batch_token += 1
        self.loops.schedule(due, self._batch_ends, self._batch_token)

    def _batch_ends(self, token: int) -> None:
        if token != self._batch_token:
            return
        self._batch_start = None
        self.provision()

    def _karpenter_machines(self) -> list[Machine]:
        return [
            machine
            for pool in self.loops.scenario.pools
            if pool.kind == "nodepool"
            for machine in self.loops.pool_machines[pool.name]
        ]

    def _queue(self) -> list[PodRecord]:
        """The pods to place: those kube-scheduler marked Unschedulable, and the reschedulable
        pods of Karpenter's nodes being deleted, largest first."""
        pods = [p for p in self.loops.workloads.pending() if p.unschedulable and not p.deleting]
        deleting = [
            p
            for machine in self._karpenter_machines()
            if machine.deleting and not machine.removed
            for p in machine.pods
            if p.reschedulable and p.owner is not None
        ]
        queue = pods + deleting
        # KC sorts by CPU then memory, largest first (scheduling/queue.go byCPUAndMemoryDescending).
        queue.sort(key=lambda p: (-p.requests.get("cpu", 0.0), -p.requests.get("memory", 0.0)))
        return queue

    def _inflight(self) -> tuple[list[Machine], dict[Machine, Resources]]:
        """Karpenter's nodes that can take pods, and what each has committed already."""
        # The scheduler simulates every node it knows, in flight or initialized (KC
        # pkg/controllers/provisioning/scheduling ExistingNode): a pod whose node became
        # Ready since kube-scheduler's last try goes there, not to a new NodeClaim.
        inflight = [
            machine
            for machine in self._karpenter_machines()
            if not machine.deleting
            and not machine.removed
            and (not machine.initialized or self._open(machine))
        ]
        waiting: dict[Machine, list[PodRecord]] = {}
        for pod in self.loops.workloads.pending():
            if pod.nominated is not None:
                waiting.setdefault(pod.nominated, []).append(pod)
        used = {machine: self._committed(machine, waiting.get(machine, [])) for machine in inflight}
        return inflight, used

    def provision(self) -> None:
        queue = self._queue()
        if not queue:
            return
        inflight, used = self._inflight()
        planned: list[PlannedClaim] = []
        remaining = {pool.name: self._remaining(pool) for pool in self._pools()}
        nominations: list[tuple[PodRecord, Machine]] = []
        errors: dict[PodRecord, str] = {}
        ignores_dra = self._ignores_dra()
        for pod in queue:
            if ignores_dra and pod.devices is not None:
                errors[pod] = DRA_UNSUPPORTED
                continue
            if pod.nominated is not None and pod.nominated in used:
                nominations.append((pod, pod.nominated))  # counted already; nominated again
                continue
            target = self._fit_inflight(pod, inflight, used)
            if target is not None:
                scheduling.add(used[target], pod.requests)
                nominations.append((pod, target))
                continue
            claim = next(
                (
                    c
                    for c in sorted(planned, key=lambda c: len(c.pods))
                    if self._fits_planned(pod, c)
                ),
                None,
            )
            if claim is not None:
                claim.pods.append(pod)
                scheduling.add(claim.used, pod.requests)
                continue
            claim, error = self._new_claim(pod, remaining)
            if claim is None:
                errors[pod] = error
                continue
            planned.append(claim)
        self._carry_out(nominations, planned, errors)

    def _carry_out(
        self,
        nominations: list[tuple[PodRecord, Machine]],
        planned: list[PlannedClaim],
        errors: dict[PodRecord, str],
    ) -> None:
        """Nominate pods to nodes in flight, launch the planned NodeClaims, and tell the pods
        that fit nowhere why."""
        for pod, machine in nominations:
            self._nominate(pod, machine)
        for claim in planned:
            machine = self.loops.instances.launch(claim.pool, self.loops.t)
            for pod in claim.pods:
                pod.nominated = machine
            machine.nominated_until = self.loops.t + NOMINATION_WINDOW
        for pod, error in errors.items():
            obj = self.loops.tx.get("pods", pod.namespace, pod.name)
            if obj is None:
                continue
            self.loops.publish(
                _pod_ref(obj),
                "FailedScheduling",
                f"Failed to schedule pod, {error}",
                "Warning",
                dedupe=(pod.uid,),
                timeout=FAILED_SCHEDULING_DEDUPE,
            )

    def _ignores_dra(self) -> bool:
        return self.loops.traits is not None and self.loops.traits.ignores_dra_requests

    def pending_pods(self) -> bool:
        return any(p.unschedulable for p in self.loops.workloads.pending())

    def _nominate(self, pod: PodRecord, machine: Machine) -> None:
        pod.nominated = machine
        machine.nominated_until = self.loops.t + NOMINATION_WINDOW
        obj = self.loops.tx.get("pods", pod.namespace, pod.name)
        if obj is None:
            return
        where = [f"nodeclaim/{machine.nodeclaim}"] + (
            [f"node/{machine.node}"] if machine.registered else []
        )
        self.loops.publish(
            _pod_ref(obj),
            "Nominated",
            f"Pod should schedule on: {', '.join(where)}",
            dedupe=(pod.uid,),
        )

    def _pools(self) -> list[PoolSpec]:
        """NodePools in the order Karpenter tries them: weight (none here), then name."""
        return sorted(
            (p for p in self.loops.scenario.pools if p.kind == "nodepool"), key=lambda p: p.name
        )

    def instance_resources(self, pool: PoolSpec) -> tuple[Resources, Resources]:
        """(capacity, allocatable) of one instance of the pool's type, as it registers."""
        if pool.name not in self._instances:
            self._instances[pool.name] = self._instance_resources(pool)
        return self._instances[pool.name]

    def _instance_resources(self, pool: PoolSpec) -> tuple[Resources, Resources]:
        it = hardware.instance_type(pool.instance_type)
        probe = node_objects.NodeSpecInput(
            name="probe",
            uid="",
            created=0.0,
            region=self.loops.scenario.region,
            zone=pool.zones[0],
            zone_id="",
            instance=it,
            instance_id="",
            private_ip="10.0.0.1",
            capacity_type=pool.capacity_type,
            os=hardware.os_image(pool.os),
            image_id=pool.image,
            nodepool=pool.name,
            nodegroup=None,
            nodeclass=pool.nodeclass,
            cluster_name=self.loops.scenario.cluster_name,
            extra_labels={},
            mig_config=pool.mig_config,
            mig_strategy=pool.mig_strategy,
            mig_layouts=self.loops.mig_files.layouts(it.gpu),
            taints=(),
            gpu_resources=True,
            dra=pool.dra,
        )
        capacity, allocatable = node_objects.node_resources(probe)
        return scheduling.resources(capacity), scheduling.resources(allocatable)

    def daemon_overhead(self, pool: PoolSpec) -> Resources:
        if pool.name not in self._overheads:
            total: Resources = {}
            if pool.daemonsets:
                for _ in self.loops.pods.daemonsets_for(pool):
                    scheduling.add(total, DAEMON_REQUESTS)
            self._overheads[pool.name] = total
        return dict(self._overheads[pool.name])

    def _open(self, machine: Machine) -> bool:
        """An initialized node that takes new pods: not cordoned, no taint beyond its pool's."""
        view = self.loops.workloads.view(machine)
        if view is None or view.unschedulable:
            return False
        own = {t.key for t in machine.pool.taints}
        return all(t.get("key") in own for t in view.taints)

    def _committed(self, machine: Machine, nominated: list[PodRecord]) -> Resources:
        """What is already promised on an in-flight NodeClaim: its pods and nominations."""
        total = self.daemon_overhead(machine.pool) if not machine.registered else {}
        for pod in [*machine.pods, *nominated]:
            scheduling.add(total, pod.requests)
        return total

    def _fit_inflight(
        self, pod: PodRecord, inflight: list[Machine], used: dict[Machine, Resources]
    ) -> Machine | None:
        for machine in inflight:
            if self._pool_error(pod, machine.pool) is not None:
                continue
            view = self.loops.workloads.view(machine)
            allocatable = (
                view.allocatable if view is not None else self.instance_resources(machine.pool)[1]
            )
            if scheduling.fits(pod.requests, allocatable, used[machine]):
                return machine
        return None

    def _fits_planned(self, pod: PodRecord, claim: PlannedClaim) -> bool:
        return self._pool_error(pod, claim.pool) is None and scheduling.fits(
            pod.requests, claim.allocatable, claim.used
        )

    def _remaining(self, pool: PoolSpec) -> Resources | None:
        """spec.limits minus what the pool's nodes (not marked for deletion) hold (KC
        state/cluster.go nodePoolResources), or None without limits."""
        nodepool = self.loops.tx.get("nodepools", "", pool.name)
        limits = scheduling.resources(((nodepool or {}).get("spec") or {}).get("limits"))
        if not limits:
            return None
        capacity, _ = self.instance_resources(pool)
        count = sum(
            1
            for machine in self.loops.pool_machines[pool.name]
            if machine.launched and not (machine.deleting or machine.removed)
        )
        held = {**capacity, "nodes": 1.0}
        return {name: limit - held.get(name, 0.0) * count for name, limit in limits.items()}

    def _new_claim(
        self, pod: PodRecord, remaining: dict[str, Resources | None]
    ) -> tuple[PlannedClaim | None, str]:
        errors: list[str] = []
        for pool in self._pools():
            capacity, allocatable = self.instance_resources(pool)
            left = remaining[pool.name]
            whole = {**capacity, "nodes": 1.0}
            if left is not None and any(whole.get(r, 0.0) > v + 1e-9 for r, v in left.items()):
                errors.append(
                    f'all available instance types exceed limits for nodepool "{pool.name}"'
                )
                continue
            error = self._pool_error(pod, pool)
            overhead = self.daemon_overhead(pool)
            if error is None and not scheduling.fits(pod.requests, allocatable, overhead):
                error = "no instance type has enough resources"
            if error is not None:
                errors.append(
                    f'incompatible with nodepool "{pool.name}", daemonset overhead='
                    f"{scheduling.concise(overhead)}, {error}"
                )
                continue
            if left is not None:
                for name in left:
                    left[name] -= whole.get(name, 0.0)
            claim = PlannedClaim(pool, allocatable, dict(overhead))
            claim.pods.append(pod)
            scheduling.add(claim.used, pod.requests)
            return claim, ""
        return None, "; ".join(errors)

    def pool_labels(self, pool: PoolSpec) -> dict[str, str]:
        it = hardware.instance_type(pool.instance_type)
        labels = {
            NODE_POOL_KEY: pool.name,
            "node.kubernetes.io/instance-type": it.name,
            "kubernetes.io/arch": it.arch,
            "kubernetes.io/os": "linux",
            "karpenter.sh/capacity-type": pool.capacity_type,
            "karpenter.k8s.aws/ec2nodeclass": pool.nodeclass,
        }
        labels.update(dict(pool.labels))
        if pool.mig_config:
            labels["nvidia.com/mig.config"] = pool.mig_config
        return labels

    def _pool_error(self, pod: PodRecord, pool: PoolSpec) -> str | None:
        """Why a NodeClaim of this pool cannot take the pod (KC scheduling/nodeclaim.go Add:
        taints first, then requirements)."""
        spec = pod.owner.template["spec"] if pod.owner else {}
        tolerations = list(spec.get("tolerations") or []) + list(objects.DEFAULT_TOLERATIONS)
        bad = scheduling.untolerated(tolerations, [t.to_api() for t in pool.taints])
        if bad:
            return "; ".join(f"did not tolerate {scheduling.pretty_taint(t)}" for t in bad)
        labels = self.pool_labels(pool)
        for key, value in sorted((spec.get("nodeSelector") or {}).items()):
            if key == "topology.kubernetes.io/zone":
                if value not in pool.zones:
                    return _key_error(key, f"In [{value}]", f"In [{' '.join(sorted(pool.zones))}]")
                continue
            if key not in labels:
                return f'incompatible requirements, label "{key}" does not have known values'
            if labels[key] != value:
                return _key_error(key, f"In [{value}]", f"In [{labels[key]}]")
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        for term in required.get("nodeSelectorTerms") or []:
            for expr in term.get("matchExpressions") or []:
                key = expr.get("key", "")
                if expr.get("operator") == "DoesNotExist" and key in labels:
                    return _key_error(key, "DoesNotExist", f"In [{labels[key]}]")
        return None

    # ------------------------------------------------------------------ consolidation

    def start_polling(self) -> None:
        if self._polling or not any(self._consolidating(p) for p in self.loops.scenario.pools):
            return
        self._polling = True
        self.loops.schedule(self.loops.next_tick(DISRUPTION_POLL), self._disruption_pass)

    @staticmethod
    def _consolidating(pool: PoolSpec) -> bool:
        return pool.kind == "nodepool" and pool.consolidate_after != "Never"

    def consolidate_after(self, pool: PoolSpec) -> float | None:
        if not self._consolidating(pool):
            return None
        return parse_duration(pool.consolidate_after)

    def _disruption_pass(self) -> None:
        # One command at a time: the controller waits out a command's validation before it
        # looks for the next (KC disruption/emptiness.go, consolidation.go: clock.After).
        if not self._commands:
            self._in_pass = True
            try:
                for pool in self.loops.scenario.pools:
                    if self._consolidating(pool) and not self._commands:
                        self._consolidate_pool(pool)
            finally:
                self._in_pass = self._in_pass_checked = False
        self.loops.schedule(self.loops.t + DISRUPTION_POLL, self._disruption_pass)

    def _allowed(self, pool: PoolSpec, reason: str) -> int:
        """BuildDisruptionBudgetMapping: each matching budget's ceil(nodes × %) (or count),
        the smallest, minus the pool's nodes that are NotReady or deleting."""
        counted = [
            machine
            for machine in self.loops.pool_machines[pool.name]
            if machine.initialized
            and machine.registered
            and not machine.removed
            and machine.instance_state == "running"
        ]
        disrupting = sum(
            1
            for machine in counted
            if machine.deleting or self.loops.ready_status(machine) != "True"
        )
        allowed = math.inf
        for budget in pool.budgets:
            fields = dict(budget)
            reasons = fields.get("reasons")
            if reasons and reason not in reasons:
                continue
            nodes = str(fields.get("nodes", "10%"))
            if nodes.endswith("%"):
                value = math.ceil(float(nodes[:-1]) / 100.0 * len(counted))
            else:
                value = int(nodes)
            allowed = min(allowed, value)
        if allowed == math.inf:
            return len(counted)
        return max(0, int(allowed) - disrupting)

    def candidate(self, machine: Machine) -> bool:
        """NewCandidate and the consolidation filter: initialized, not deleting, not
        nominated, not already in a command, NodeClaim Consolidatable, and no
        `karpenter.sh/do-not-disrupt: "true"` on the Node (KC v1.14.1
        pkg/controllers/state/statenode.go ValidateNodeDisruptable; a cordon is no part of
        it)."""
        return (
            machine.registered
            and machine.initialized
            and machine.alive
            and machine.nodeclaim is not None
            and machine.consolidatable
            and machine.nominated_until <= self.loops.t
            and machine not in self._commands
            and not self._held(machine)
            and self.loops.workloads.blocking_pdbs_on(machine) is None
        )

    def _held(self, machine: Machine) -> bool:
        node = self.loops.node(machine)
        annotations = (node or {}).get("metadata", {}).get("annotations") or {}
        return annotations.get(DO_NOT_DISRUPT) == "true"

    def _consolidate_pool(self, pool: PoolSpec) -> None:
        machines = sorted(
            self.loops.pool_machines[pool.name],
            key=lambda machine: (machine.launched_at, machine.node),
        )
        candidates = [machine for machine in machines if self.candidate(machine)]
        empty = [
            machine for machine in candidates if not any(p.reschedulable for p in machine.pods)
        ]
        if empty:
            allowed = self._allowed(pool, "Empty")
            chosen = empty[:allowed]
            if chosen:
                self._command(chosen, "Empty")
            return
        if pool.consolidation_policy != "WhenEmptyOrUnderutilized":
            return
        allowed = self._allowed(pool, "Underutilized")
        if allowed <= 0:
            return
        busy = sorted(
            candidates,
            key=lambda machine: (
                sum(1 for p in machine.pods if p.reschedulable),
                machine.launched_at,
                machine.node,
            ),
        )
        for machine in busy:
            if self._fits_elsewhere(machine):
                self._command([machine], "Underutilized")
                return

    def _fit_inputs(self) -> list[object]:
        """Everything `_fits_elsewhere` reads, flattened: every machine with its flags, its Node
        as the scheduler sees it (a view is replaced when the Node is written), and its pods
        with whether each could move. The list keeps these objects alive, so comparing two
        such lists item by item with `is` cannot be fooled by a reused id."""
        workloads = self.loops.workloads
        inputs: list[object] = [self._ignores_dra()]
        for machine in self.loops.machines.values():
            inputs += (
                machine,
                machine.alive,
                machine.registered,
                machine.initialized,
                machine.ready,
                workloads.view(machine),
            )
            for pod in machine.pods:
                inputs += (pod, pod.reschedulable)
            inputs.append(_END_OF_MACHINE)
        return inputs

    def _fits_elsewhere(self, candidate: Machine) -> bool:
        """`_fits_now`, answered again only when something it reads changed: on a calm
        cluster the disruption pass asks the same question every 10 s of simulated time, and
        the scheduler filters behind each answer were most of a build."""
        if not self._in_pass_checked:
            inputs = self._fit_inputs()
            seen = self._fit_inputs_seen
            if len(inputs) != len(seen) or not all(map(operator.is_, inputs, seen)):
                self._fit_inputs_seen = inputs
                self._fit_answers = {}
            self._in_pass_checked = self._in_pass
        answer = self._fit_answers.get(candidate)
        if answer is None:
            answer = self._fit_answers[candidate] = self._fits_now(candidate)
        return answer

    def _fits_now(self, candidate: Machine) -> bool:
        """Single-node consolidation, delete only: every reschedulable pod of the candidate
        fits on another initialized, Ready node (no replacement is launched)."""
        pods = [p for p in candidate.pods if p.reschedulable]
        if not pods:
            return False
        ignores_dra = self._ignores_dra()
        if ignores_dra and any(p.devices is not None for p in pods):
            return False  # its simulation fails those pods as it does for provisioning
        workloads = self.loops.workloads
        others = [
            machine
            for machine in self.loops.machines.values()
            if machine is not candidate
            and machine.alive
            and machine.registered
            and machine.initialized
            and machine.ready
        ]
        extra: dict[Machine, Resources] = {machine: {} for machine in others}
        for pod in pods:
            placed = False
            for machine in others:
                view = workloads.view(machine)
                if view is None or workloads.filter(pod, machine, view, claims=False) is not None:
                    continue
                allocatable = view.allocatable
                used = workloads.used(machine)
                scheduling.add(used, extra[machine])
                if scheduling.fits(pod.requests, allocatable, used):
                    scheduling.add(extra[machine], pod.requests)
                    placed = True
                    break
            if not placed:
                return False
        return True

    def _command(self, machines: list[Machine], reason: str) -> None:
        self._commands.update(machines)
        self.loops.schedule(self.loops.t + CONSOLIDATION_TTL, self._validate, machines, reason)

    def _validate(self, machines: list[Machine], reason: str) -> None:
        """Validation after consolidationTTL: still candidates, still empty (or still fitting
        elsewhere); otherwise the command is abandoned for this pass."""
        for machine in machines:
            self._commands.discard(machine)
        for machine in machines:
            if not self.candidate(machine):
                continue
            if reason == "Empty" and any(p.reschedulable for p in machine.pods):
                continue
            if reason == "Underutilized" and not self._fits_elsewhere(machine):
                continue
            self.loops.karpenter.consolidate(machine, reason)


_END_OF_MACHINE = object()  # closes one machine's run in Provisioner._fit_inputs


def _key_error(key: str, incoming: str, existing: str) -> str:
    """KC scheduling/requirements.go badKeyError, with Requirement.String()."""
    return f"incompatible requirements, key {key}, {key} {incoming} not in {key} {existing}"


def _pod_ref(pod: JsonDict) -> JsonDict:
    meta = pod["metadata"]
    return {
        "kind": "Pod",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": "v1",
    }
