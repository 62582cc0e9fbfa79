"""What the controllers share: their timing constants, the `Machine` each one acts on, and
the `Txn` every action runs in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mignurse.sim.objects import JsonDict
from mignurse.sim.scenario_spec import LifecycleScript, PoolSpec
from mignurse.sim.store import Store
from mignurse.sim.workloads import PodRecord

NODE_MONITOR_PERIOD = 5.0  # --node-monitor-period: node-controller and cloud-node-lifecycle passes
KUBELET_STATUS_SYNC = 10.0  # kubelet nodeStatusUpdateFrequency: when it notices a cordon
KUBELET_STATUS_REPORT = 300.0  # kubelet nodeStatusReportFrequency: a Node write at least this often
LEASE_RENEW = 10.0  # kubelet renews its node Lease every 0.25 × nodeLeaseDurationSeconds (40 s)
NMA_HEARTBEAT = 300.0
DCGM_GRACE = 60.0
# Karpenter's event recorder skips a repeat of (reason, dedupe values) for 2 minutes unless the
# event sets its own timeout (KC pkg/events/recorder.go defaultDedupeTimeout).
KARPENTER_DEDUPE = 120.0
REPAIR_BLOCKED_DEDUPE = 900.0  # KC pkg/controllers/node/health/events.go DedupeTimeout
TERMINATION_POLL = 5.0  # node.termination requeues every 5 s until the instance is gone (KC)
STUCK_TERMINATING = 60.0  # a pod terminating 1 min past its deletion time no longer blocks (KC)
POD_EVENT_DEDUPE = 10.0  # KC nodeclaim/podevents dedupeTimeout
EVICTION_RETRY = 10.0  # the eviction queue retries a PDB-refused pod (inference: backoff cap)
INSTANCE_SHUTDOWN = 32.0  # EC2 shutting-down → terminated (inference)
SQS_LAG = 2.0  # EventBridge → SQS → Karpenter's long poll (inference)
SPOT_NOTICE = 120.0  # EC2 interrupts a spot instance two minutes after the warning
DISRUPTION_PASS = 5.0  # the disruption controller's next candidate pass (inference: < 10 s)
MNG_CORDON_DELAY = 60.0  # a failed check cordons the node about a minute later (inference)
MNG_RETRY = 60.0  # a repair held by the threshold or parallelism is tried again (inference)
MNG_REBOOT_DOWNTIME = 120.0  # RebootInstances until kubelet runs again (inference)
KUBELET_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
NODE_LIFECYCLE_LAG = 0.1  # the node lifecycle controller reacts to a Node update (informer)
# GPU operator: nvidia.com/gpu.deploy.<key> is the nodeSelector (`=true`) of each operand
# DaemonSet (NVIDIA/gpu-operator controllers/state_manager.go); the sim's DaemonSet controller
# follows label changes made through the API, and the device plugin advertises what the MIG
# labels say once it runs.
LABEL_GPU_DEPLOY = "nvidia.com/gpu.deploy."
OPERAND_DAEMONSETS = {
    "device-plugin": "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "dcgm-exporter": "nvidia-dcgm-exporter",
    "container-toolkit": "nvidia-container-toolkit-daemonset",
    "operator-validator": "nvidia-operator-validator",
    "mig-manager": "nvidia-mig-manager",
}
OPERAND_DELAY = 2.0  # the DaemonSet controller removes or starts the pod
ADVERTISE_DELAY = 5.0  # the device plugin registers with kubelet, which updates the Node
MIG_LABELS = ("nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/mig.strategy")
ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery utilrand: what generateName uses
ZONE_SUBNETS = {"a": 0, "b": 32, "c": 64, "d": 96}
ZONE_IDS = {"us-west-2": "usw2", "us-east-1": "use1", "us-east-2": "use2", "eu-west-1": "euw1"}


@dataclass(eq=False)
class Machine:
    """One instance: its NodeClaim (Karpenter pools), its Node, and what runs on it."""

    pool: PoolSpec
    nodeclaim: str | None
    node: str
    claim_uid: str
    node_uid: str
    instance_id: str
    ip: str
    zone: str
    image: str
    os_name: str
    launched_at: float
    lifecycle: LifecycleScript
    extra_labels: dict[str, str]
    registered: bool = False
    ready: bool = False
    initialized: bool = False
    deleting: bool = False
    removed: bool = False
    kubelet_posting: bool = True
    nma_running: bool = False
    gpu_plugin_crashed: bool = False  # its device plugin or DRA kubelet plugin crash-loops
    nma_memory: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    nma_faults: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    image_faults: set[str] = field(default_factory=set)  # faults its lifecycle (image) causes
    api_touched: bool = False
    nma_token: int = 0
    unhealthy_since: dict[str, float] = field(default_factory=dict)  # type → transition time
    repair_token: int = 0
    kubelet_token: int = 0
    pods: list[PodRecord] = field(default_factory=list)  # bound to the node, terminating included
    daemon_pods: list[tuple[str, str]] = field(default_factory=list)
    # EC2: running → shutting-down → terminated
    instance_state: str = "running"
    launched: bool = False  # NodeClaim Launched: its capacity counts against the pool's limits
    claim_gone: bool = False
    ready_at: float | None = None  # first Ready
    lease: JsonDict | None = None  # its kubelet's Lease, rewritten at each renewal
    lease_bucket: int = -1  # the second of every 10 s its kubelet renews at (-1: not renewing)
    nominated_until: float = 0.0  # Karpenter nominated it for pending pods: not disrupted
    last_pod_event: float | None = None  # NodeClaim status.lastPodEventTime
    consolidatable: bool = False
    consolidatable_token: int = 0
    drain_token: int = 0
    drained: bool = False  # node.termination got past the drain
    kubelet_sees_unschedulable: bool = False
    report_token: int = 0
    repair_due: float | None = None
    counted_unhealthy: bool = False
    mng_check: tuple[str, str, float] | None = None
    mng_token: int = 0
    mng_cordoned: bool = False
    mng_repairing: str | None = None  # Replace | Reboot while in progress
    boot: int = 0

    @property
    def alive(self) -> bool:
        return not self.deleting and not self.removed


class Txn:
    """Read-through cache of store objects; `flush()` writes each dirty object once."""

    def __init__(self, store: Store, written: Callable[[str, str], None] | None = None) -> None:
        self.store = store
        self.work: dict[tuple[str, str, str], JsonDict | None] = {}
        self.dirty: dict[tuple[str, str, str], None] = {}
        self.written = written  # told (plural, name) of every write, to drop cached views

    def get(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        key = (plural, namespace, name)
        if key not in self.work:
            self.work[key] = self.store.get(plural, namespace, name)
        return self.work[key]

    def peek(self, plural: str, namespace: str, name: str) -> JsonDict | None:
        """`get` for a caller that only reads: this transaction's copy if it has one, else the
        store's shared decoded copy (never to be changed)."""
        key = (plural, namespace, name)
        if key in self.work:
            return self.work[key]
        return self.store.peek(plural, namespace, name)

    def put(self, plural: str, obj: JsonDict) -> None:
        key = (plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        self.work[key] = obj
        self.dirty[key] = None
        if self.written is not None:
            self.written(plural, key[2])

    def delete(self, plural: str, namespace: str, name: str) -> None:
        key = (plural, namespace, name)
        self.work[key] = None
        self.dirty[key] = None
        if self.written is not None:
            self.written(plural, name)

    def flush(self) -> None:
        for key in self.dirty:
            plural, namespace, name = key
            obj = self.work[key]
            if obj is None:
                self.store.delete(plural, namespace, name)
            else:
                self.store.put(plural, obj)
        self.dirty.clear()
        self.work.clear()


def parse_ts(value: str) -> float:
    """`2026-11-20T12:00:00Z` → epoch seconds (sliced: strptime dominates large builds)."""
    return datetime(
        int(value[0:4]),
        int(value[5:7]),
        int(value[8:10]),
        int(value[11:13]),
        int(value[14:16]),
        int(value[17:19]),
        tzinfo=UTC,
    ).timestamp()
