"""Generated scenarios: `scale-5000` builds a large cluster directly instead of replaying it.

The YAML file only names the generator and its parameters; `expand()` turns them into
pools whose nodes all exist before the sim starts, and `build()` creates that state in one
transaction with watch history off, then adds the event backlog.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from mignurse.sim import hardware, objects
from mignurse.sim.controllers import ControlLoops
from mignurse.sim.scenario_fields import ScenarioError
from mignurse.sim.scenario_spec import (
    ConditionSpec,
    ExistingNodes,
    LifecycleScript,
    PoolSpec,
    Scenario,
    Step,
    TaintSpec,
    WorkloadSpec,
)

GPU_TYPES = (
    ("p5.48xlarge", "all-1g.10gb"),
    ("p5e.48xlarge", None),
    ("p4d.24xlarge", "all-balanced"),
    ("g6e.12xlarge", None),
    ("g5.12xlarge", None),
    ("g6.xlarge", None),
    ("g5g.2xlarge", None),
)
TEAMS = ("search", "ads", "llm", "vision", "speech", "recs", "fraud", "maps", "risk", "ml-plat")
DEFAULTS: dict[str, Any] = {
    "kind": "scale",
    "gpuNodes": 5000,
    "nodePools": 20,
    "cpuNodes": 300,
    "events": 100000,
    "unhealthyPercent": 3.0,
}
READY = Step(after=50.0, ready=True)


def _params(scenario: Scenario) -> dict[str, Any]:
    params = dict(DEFAULTS)
    params.update(dict(scenario.generate or ()))
    if params["kind"] != "scale":
        raise ScenarioError(
            f"{scenario.source}:1: unknown generator {params['kind']!r} (known: scale)"
        )
    for key in ("gpuNodes", "nodePools", "cpuNodes", "events"):
        if not isinstance(params[key], int) or params[key] < 0:
            raise ScenarioError(f"{scenario.source}:1: generate.{key} must be an integer >= 0")
    if params["nodePools"] < 1:
        raise ScenarioError(f"{scenario.source}:1: generate.nodePools must be at least 1")
    return params


def _pool(
    name: str,
    itype: str,
    mig: str | None,
    nodes: int,
    existing: tuple[ExistingNodes, ...],
    gpu: bool,
    kind: str = "nodepool",
) -> PoolSpec:
    return PoolSpec(
        kind=kind,
        name=name,
        instance_type=itype,
        capacity_type="on-demand" if gpu else "spot",
        zones=("us-west-2a", "us-west-2b", "us-west-2c"),
        os="al2023",
        image="ami-0c2d1a7f6e5b4a391",
        nodes=nodes,
        node_monitoring_agent=True,
        mig_config=mig,
        mig_strategy="mixed",
        taints=(TaintSpec("nvidia.com/gpu", "NoSchedule", "true"),) if gpu else (),
        labels=(("team", name.split("-")[1]),) if gpu else (),
        launch_after=5.0,
        register_after=45.0,
        replacement_delay=5.0,
        termination_grace_period=None,
        expire_after="720h",
        consolidation_policy="WhenEmptyOrUnderutilized",
        # A fleet this size is kept still: consolidation off, as many GPU fleets run.
        consolidate_after="Never",
        budgets=((("nodes", "10%"),),),
        nodeclass="gpu" if gpu else "default",
        daemonsets=False,
        existing=existing,
        lifecycles=(LifecycleScript(None, (READY,)),),
        workload=_workload(name, itype, mig, nodes) if gpu else None,
    )


def _workload(pool: str, itype: str, mig: str | None, nodes: int) -> WorkloadSpec:
    """One pod per node taking all of its GPUs (or MIG slices of one profile): Karpenter
    replaces what repair or a dead kubelet takes away, as it would for a real job."""
    it = hardware.instance_type(itype)
    resources = hardware.mig_resources(it, mig, "mixed")
    resource = sorted(resources)[0]
    return WorkloadSpec(
        name=pool.removeprefix("gpu-"),
        namespace=f"team-{pool.split('-')[1]}",
        pods_per_node=1,
        image="nvcr.io/nvidia/tritonserver:25.01-py3",
        resource=resource,
        per_pod=resources[resource],
        replicas=nodes,
    )


def expand(scenario: Scenario) -> Scenario:
    """Pools and nodes for the generator parameters (no warmup: everything is prebuilt)."""
    params = _params(scenario)
    rng = random.Random(scenario.seed)
    pools: list[PoolSpec] = []
    n_pools = params["nodePools"]
    per_pool = [
        params["gpuNodes"] // n_pools + (1 if i < params["gpuNodes"] % n_pools else 0)
        for i in range(n_pools)
    ]
    unhealthy_share = float(params["unhealthyPercent"]) / 100.0
    for i, count in enumerate(per_pool):
        itype, mig = GPU_TYPES[i % len(GPU_TYPES)]
        name = f"gpu-{TEAMS[i % len(TEAMS)]}-{itype.split('.')[0]}-{i:02d}"
        bad = round(count * unhealthy_share)
        existing: list[ExistingNodes] = []
        healthy = count - bad
        # Ages spread over 1-40 days in a few cohorts, like repeated scale-ups.
        for cohort in range(4):
            n = healthy // 4 + (1 if cohort < healthy % 4 else 0)
            if n:
                existing.append(ExistingNodes(n, rng.uniform(1, 40) * 86400, None, None))
        for j in range(bad):
            age = rng.uniform(20, 50) * 60
            if j % 3 == 2:
                # kubelet died: Ready goes Unknown 40 s later, repair after 30 min.
                steps = (READY, Step(after=age - rng.uniform(120, 900), kubelet="stop"))
            else:
                steps = (
                    READY,
                    Step(
                        after=age - rng.uniform(60, 540),
                        conditions=(
                            ConditionSpec(
                                "AcceleratedHardwareReady",
                                "False",
                                "DCGMError",
                                "failed to initialize DCGM: libdcgm.so not Found",
                            ),
                        ),
                    ),
                )
            existing.append(ExistingNodes(1, age, None, None, steps=steps))
        pools.append(_pool(name, itype, mig, count, tuple(existing), gpu=True))
    cpu_pools = 2
    for i in range(cpu_pools):
        count = params["cpuNodes"] // cpu_pools + (1 if i < params["cpuNodes"] % cpu_pools else 0)
        if count:
            itype = "m7i.2xlarge" if i == 0 else "c7i.4xlarge"
            cpu_nodes = (ExistingNodes(count, rng.uniform(2, 20) * 86400, None, None),)
            name = f"cpu-{'general' if i == 0 else 'batch'}"
            # Karpenter's own pods need nodes it does not manage: the general pool is a
            # managed node group, as the Karpenter getting-started guide sets it up.
            kind = "nodegroup" if i == 0 else "nodepool"
            pools.append(_pool(name, itype, None, count, cpu_nodes, gpu=False, kind=kind))
    return dataclasses.replace(
        scenario, pools=tuple(pools), warmup=0.0, extras={"events": params["events"]}
    )


_POD_EVENTS = (
    ("Scheduled", "Normal", "default-scheduler", "Successfully assigned {ns}/{pod} to {node}"),
    ("Pulling", "Normal", "kubelet", 'Pulling image "nvcr.io/nvidia/tritonserver:25.01-py3"'),
    (
        "Pulled",
        "Normal",
        "kubelet",
        'Successfully pulled image "nvcr.io/nvidia/tritonserver:25.01-py3" in 1m{s}.2s '
        "({s}.1s including waiting). Image size: 16432110912 bytes.",
    ),
    ("Created", "Normal", "kubelet", "Created container: server"),
    ("Started", "Normal", "kubelet", "Started container server"),
    (
        "BackOff",
        "Warning",
        "kubelet",
        "Back-off restarting failed container server in pod {pod}_{ns}({uid})",
    ),
    ("Killing", "Normal", "kubelet", "Stopping container server"),
    (
        "FailedScheduling",
        "Warning",
        "default-scheduler",
        "0/{total} nodes are available: {s} Insufficient nvidia.com/gpu, {total} node(s) had "
        "untolerated taint {{nvidia.com/gpu: true}}. preemption: 0/{total} nodes are available: "
        "{s} No preemption victims found for incoming pod.",
    ),
    (
        "Unhealthy",
        "Warning",
        "kubelet",
        'Readiness probe failed: Get "http://{ip}:8000/v2/health/ready": '
        "dial tcp {ip}:8000: connect: connection refused",
    ),
)
_NODE_EVENTS = (
    (
        "AcceleratedHardwareReady",
        "Warning",
        "eks-node-monitoring-agent",
        "NvidiaPCIeError: PCIe replay count increased to {s} on GPU {g}",
    ),
    (
        "AcceleratedHardwareReady",
        "Warning",
        "eks-node-monitoring-agent",
        "NvidiaXID{x}Warning: XID {x} reported on GPU {g}",
    ),
    (
        "KernelReady",
        "Warning",
        "eks-node-monitoring-agent",
        "ConntrackExceededKernel: conntrack table usage at {s}%",
    ),
    ("Unconsolidatable", "Normal", "karpenter", "Can't replace with a cheaper node"),
    ("DisruptionBlocked", "Normal", "karpenter", "Node is nominated for a pending pod"),
)


def build(loops: ControlLoops) -> None:
    """Create the whole cluster at once; then the event backlog of the last hour."""
    store = loops.store
    store.recording = False
    loops.bootstrap()
    loops.run_until(loops.start)
    rng = random.Random(loops.scenario.seed + 1)
    total_events = int(loops.scenario.extras.get("events", DEFAULTS["events"]))
    machines = [m for m in loops.machines.values() if m.registered]
    total = len(machines)
    ttl = loops.scenario.event_ttl
    with loops.txn():
        for team in sorted({m.pool.name.split("-")[1] for m in machines}):
            if store.exists("namespaces", "", f"team-{team}"):
                continue  # made with the pool's workload
            namespace = objects.build_namespace(
                f"team-{team}", loops.uid(), loops.start - 86400 * 120
            )
            loops.tx.put("namespaces", namespace)
        for i in range(total_events):
            m = machines[rng.randrange(total)]
            loops.t = loops.start - rng.uniform(0, ttl * 0.95)
            s, g, x = rng.randrange(2, 99), rng.randrange(8), rng.choice((13, 31, 43, 45, 63))
            if i % 4 == 0:
                reason, etype, source, template = _NODE_EVENTS[i // 4 % len(_NODE_EVENTS)]
                message = template.format(s=s, g=g, x=x)
                ref = loops.node_ref(m)
                host = m.node if source != "karpenter" else None
            else:
                reason, etype, source, template = _POD_EVENTS[i % len(_POD_EVENTS)]
                ns = f"team-{m.pool.name.split('-')[1]}"
                pod = f"{m.pool.name}-{rng.randrange(16**6):06x}-{loops.suffix()}"
                uid = loops.uid()
                message = template.format(
                    ns=ns, pod=pod, node=m.node, s=s, total=total, uid=uid, ip=m.ip
                )
                ref = {"kind": "Pod", "namespace": ns, "name": pod, "uid": uid, "apiVersion": "v1"}
                host = m.node if source == "kubelet" else None
            loops.emit(ref, reason, message, event_type=etype, component=source, host=host)
            if i % 5000 == 4999:
                loops.tx.flush()  # bounded peak memory: write out what is built so far
        loops.t = loops.now
    store.recording = True
    store.compact()
