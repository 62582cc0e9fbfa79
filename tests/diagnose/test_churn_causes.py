"""Benign and failing replacements told apart by cause, with every rule running.

Two hand-built incidents in kubectl's JSON shape (docs/repair.md): a drift rollout
after an EC2NodeClass AMI change, and a GPU NodePool whose instances launch but never
register. Each runs through the API-server-only view and with a watcher's history, and
must be named by its cause without any repair, hardware or NotReady alarm.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mignurse.cluster.history import Lifecycle
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    NODE_REPAIR_LOOP,
    NOTREADY_LOOP,
    REPAIR_BLOCKED,
    REPLACEMENT_CHURN,
    WARNING,
    Finding,
)
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings
from mignurse.model import Event, Node, NodeClaim, NodePool, format_time

NOW = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)
CONTEXT = "arn:aws:eks:us-west-2:111122223333:cluster/ml-prod"
TRANSITION = "Status condition transitioned, Type: {}, Status: {} -> {}, Reason: {}"


def _t(minutes: float) -> datetime:
    """`minutes` before NOW."""
    return NOW - timedelta(minutes=minutes)


def _ts(when: datetime | None) -> str | None:
    return format_time(when)


def _cond(type_: str, status: str, reason: str, since: datetime, message: str = "") -> dict:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _ts(since),
    }


def _karpenter_deployment() -> dict[str, Any]:
    """The controller Deployment, as `kubectl get deploy -n kube-system karpenter -o json`."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "karpenter",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "image": "public.ecr.aws/karpenter/controller:1.4.0",
                            "env": [
                                {"name": "FEATURE_GATES", "value": "NodeRepair=true"},
                            ],
                        }
                    ]
                }
            }
        },
    }


def _nodepool(
    name: str,
    node_class: str,
    family: str,
    *,
    nodes: int,
    registration_healthy: dict | None = None,
    termination_grace: str | None = None,
) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        "expireAfter": "720h",
    }
    if termination_grace:
        template_spec["terminationGracePeriod"] = termination_grace
    conditions = [_cond("Ready", "True", "Ready", _t(60 * 24 * 30))]
    if registration_healthy is not None:
        conditions.append(registration_healthy)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": name,
            "uid": f"uid-np-{name}",
            "creationTimestamp": _ts(_t(60 * 24 * 30)),
        },
        "spec": {
            "template": {"metadata": {"labels": {"workload": name}}, "spec": template_spec},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "1h",
                "budgets": [{"nodes": "10%"}],
            },
        },
        "status": {"resources": {"nodes": str(nodes)}, "conditions": conditions},
    }


@dataclass
class Machine:
    """One NodeClaim and, once it registered, its Node."""

    claim: str
    pool: str
    instance_type: str
    zone: str
    instance_id: str
    image: str
    gpus: int
    created: datetime
    node: str = ""  # empty: never registered
    registered: datetime | None = None
    deleting: datetime | None = None
    termination_timestamp: datetime | None = None
    drifted: datetime | None = None
    disruption_reason: datetime | None = None

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"

    def labels(self) -> dict[str, str]:
        labels = {
            "karpenter.sh/nodepool": self.pool,
            "karpenter.sh/capacity-type": "on-demand",
            "node.kubernetes.io/instance-type": self.instance_type,
            "topology.kubernetes.io/zone": self.zone,
            "workload": self.pool,
        }
        if self.gpus:
            labels["karpenter.k8s.aws/instance-gpu-manufacturer"] = "nvidia"
            labels["karpenter.k8s.aws/instance-gpu-count"] = str(self.gpus)
        return labels

    def resources(self) -> dict[str, str]:
        gpu = {"nvidia.com/gpu": str(self.gpus)} if self.gpus else {}
        return {"cpu": "48", "memory": "392Gi", **gpu}

    def nodeclaim_json(self) -> dict[str, Any]:
        launched = self.created + timedelta(seconds=30)
        conditions = [_cond("Launched", "True", "Launched", launched)]
        if self.registered is not None:
            ready = self.registered + timedelta(minutes=2)
            conditions += [
                _cond("Registered", "True", "Registered", self.registered),
                _cond("Initialized", "True", "Initialized", ready),
                _cond("Ready", "True", "Ready", ready),
            ]
        else:
            # Registered stays Unknown until a Node with the providerID appears.
            conditions += [
                _cond(
                    "Registered",
                    "Unknown",
                    "NodeNotFound",
                    self.created,
                    "Node not registered with cluster",
                ),
                _cond("Initialized", "Unknown", "AwaitingReconciliation", self.created),
                _cond("Ready", "Unknown", "AwaitingReconciliation", self.created),
            ]
        if self.drifted is not None:
            conditions.append(_cond("Drifted", "True", "AMIDrift", self.drifted))
        if self.disruption_reason is not None:
            conditions.append(_cond("DisruptionReason", "True", "Drifted", self.disruption_reason))
        annotations = {
            "karpenter.sh/nodepool-hash": "6821555240594823858",
            "karpenter.sh/nodepool-hash-version": "v3",
            "karpenter.k8s.aws/ec2nodeclass-hash": "15616957348189460630",
            "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
        }
        if self.termination_timestamp is not None:
            annotations["karpenter.sh/nodeclaim-termination-timestamp"] = str(
                _ts(self.termination_timestamp)
            )
        status: dict[str, Any] = {
            "providerID": self.provider_id,
            "imageID": self.image,
            "capacity": self.resources(),
            "conditions": conditions,
        }
        if self.node:
            status["nodeName"] = self.node
        meta: dict[str, Any] = {
            "name": self.claim,
            "uid": f"uid-{self.claim}",
            "creationTimestamp": _ts(self.created),
            "labels": self.labels(),
            "annotations": annotations,
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": self.pool,
                    "uid": f"uid-np-{self.pool}",
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if self.deleting is not None:
            meta["deletionTimestamp"] = _ts(self.deleting)
        return {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": meta,
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"},
                "resources": {"requests": {"nvidia.com/gpu": str(self.gpus)} if self.gpus else {}},
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}] if self.gpus else [],
                "expireAfter": "720h",
            },
            "status": status,
        }

    def node_json(self, os_image: str) -> dict[str, Any]:
        assert self.registered is not None
        ready = self.registered + timedelta(minutes=1)
        taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}] if self.gpus else []
        labels = {
            **self.labels(),
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": self.node,
        }
        if self.gpus:  # GPU feature discovery's labels
            labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-L40S"}
        meta: dict[str, Any] = {
            "name": self.node,
            "uid": f"uid-{self.node}",
            "creationTimestamp": _ts(self.registered),
            "labels": labels,
            "finalizers": ["karpenter.sh/termination"],
        }
        if self.deleting is not None:
            meta["deletionTimestamp"] = _ts(self.deleting)
            taints.append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
        gpu = self.resources()
        nma = "Monitoring for the {} system is active"  # NMA's start values (main.go)
        conditions = [
            _cond("Ready", "True", "KubeletReady", ready, "kubelet is posting ready status"),
            _cond("MemoryPressure", "False", "KubeletHasSufficientMemory", ready),
            _cond("DiskPressure", "False", "KubeletHasNoDiskPressure", ready),
            _cond("PIDPressure", "False", "KubeletHasSufficientPID", ready),
            _cond("KernelReady", "True", "KernelIsReady", ready, nma.format("Kernel")),
            _cond("NetworkingReady", "True", "NetworkingIsReady", ready, nma.format("Networking")),
        ]
        if self.gpus:  # NMA adds it only where it finds NVIDIA devices
            conditions.append(
                _cond(
                    "AcceleratedHardwareReady",
                    "True",
                    "NvidiaGPUIsReady",
                    ready,
                    nma.format("NVIDIA"),
                )
            )
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": meta,
            "spec": {"providerID": self.provider_id, "taints": taints},
            "status": {
                "capacity": gpu,
                "allocatable": gpu,
                "nodeInfo": {
                    "osImage": os_image,
                    "kernelVersion": "6.1.141-155.222.amzn2023.x86_64",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "kubeletVersion": "v1.32.3-eks-473151a",
                    "architecture": "amd64",
                },
                "conditions": conditions,
            },
        }


@dataclass
class Events:
    """Events as `kubectl get events -A -o json` lists them (core/v1)."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        kind: str,
        name: str,
        reason: str,
        message: str,
        at: datetime,
        *,
        type_: str = "Normal",
        source: str = "karpenter",
        count: int = 1,
        last: datetime | None = None,
    ) -> None:
        seq = len(self.items) + 1
        self.items.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{name}.{seq:016x}",
                    "namespace": "default",
                    "uid": f"ev-{seq}",
                    "creationTimestamp": _ts(at),
                },
                "involvedObject": {
                    "apiVersion": "v1" if kind == "Node" else "karpenter.sh/v1",
                    "kind": kind,
                    "name": name,
                    "uid": f"uid-{name}",
                },
                "reason": reason,
                "message": message,
                "source": {"component": source},
                "firstTimestamp": _ts(at),
                "lastTimestamp": _ts(last or at),
                "count": count,
                "type": type_,
                "reportingComponent": source,
                "reportingInstance": "",
            }
        )

    def transition(
        self, kind: str, name: str, type_: str, old: str, new: str, reason: str, at: datetime
    ) -> None:
        self.add(kind, name, type_, TRANSITION.format(type_, old, new, reason), at)

    def kubelet_boot(self, node: str, registered: datetime) -> None:
        self.add("Node", node, "Starting", "Starting kubelet.", registered, source="kubelet")
        self.add(
            "Node",
            node,
            "RegisteredNode",
            f"Node {node} event: Registered Node {node} in Controller",
            registered + timedelta(seconds=5),
            source="node-controller",
        )
        self.add(
            "Node",
            node,
            "NodeReady",
            f"Node {node} status is now: NodeReady",
            registered + timedelta(minutes=1),
            source="kubelet",
        )

    def parsed(self) -> tuple[Event, ...]:
        return tuple(Event.from_api(raw) for raw in self.items)


def _claim_lifecycle(m: Machine, gone: datetime | None, reason: str | None) -> Lifecycle:
    """What `mignurse watch` recorded for a NodeClaim."""
    return Lifecycle(
        context=CONTEXT,
        kind="NodeClaim",
        name=m.claim,
        uid=f"uid-{m.claim}",
        pool=m.pool,
        instance_type=m.instance_type,
        instance_id=m.instance_id,
        image_id=m.image,
        node_name=m.node if m.registered else "",
        nodeclaim="",
        created=m.created,
        first_seen=max(m.created, _t(6 * 60)),
        first_ready=m.registered + timedelta(minutes=2) if m.registered else None,
        last_seen=gone or NOW,
        deleting_since=m.deleting,
        termination_timestamp=m.termination_timestamp,
        disruption_reason=reason,
        drifted=m.drifted is not None,
        deleted_at=gone,
        deleted_seen="watch" if gone else None,
        last_unhealthy=None,
        provider_id=m.provider_id,
        capacity_type="on-demand",
        zone=m.zone,
    )


def _node_lifecycle(m: Machine, gone: datetime | None) -> Lifecycle:
    return Lifecycle(
        context=CONTEXT,
        kind="Node",
        name=m.node,
        uid=f"uid-{m.node}",
        pool=m.pool,
        instance_type=m.instance_type,
        instance_id=m.instance_id,
        image_id="",
        node_name="",
        nodeclaim=m.claim,
        created=m.registered,
        first_seen=max(m.registered or m.created, _t(6 * 60)),
        first_ready=m.registered + timedelta(minutes=1) if m.registered else None,
        last_seen=gone or NOW,
        deleting_since=m.deleting,
        termination_timestamp=None,
        disruption_reason=None,
        drifted=False,
        deleted_at=gone,
        deleted_seen="watch" if gone else None,
        last_unhealthy=None,
        provider_id=m.provider_id,
        capacity_type="on-demand",
        zone=m.zone,
    )


def _run(inp: DiagnosisInput) -> list[Finding]:
    """Every shipped rule, as `mignurse diagnose` runs them."""
    result = diagnose(inp)
    assert result.rule_errors == []
    return result.findings


def _ids(findings: list[Finding], pool: str) -> set[str]:
    return {f.id for f in findings if f.nodepool == pool}


def _text(finding: Finding) -> str:
    return "\n".join(e.text for e in finding.evidence)


# -- 1. a drift rollout ---------------------------------------------------------------------

OLD_AMI = "ami-0a1b2c3d4e5f60718"  # amazon-eks-node-al2023-x86_64-nvidia-1.32-v20251103
NEW_AMI = "ami-0f9e8d7c6b5a40312"  # amazon-eks-node-al2023-x86_64-nvidia-1.32-v20251120
DRIFT_POOL = "gpu-train"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
OLD_SUFFIXES = ("vq7lt", "hx2wd", "b9kfm", "r4pzc", "m2nsg", "t8jxe")
NEW_SUFFIXES = ("c6wqa", "j3rnk", "p8dzv", "f5tye", "w1gbh", "k7smu")


@dataclass
class Rollout:
    old: list[Machine]
    new: list[Machine]
    gone: dict[str, datetime]  # old claim → when its finalizer cleared
    events: Events


def _drift_rollout() -> Rollout:
    """The EC2NodeClass `gpu-al2023` moved its amiSelectorTerms to a newer AMI at T-48m.
    Karpenter marks all six NodeClaims Drifted, then with a 10% budget (roundup(0.6) = 1)
    replaces one at a time: launch the replacement, wait for it to be Ready, delete the
    old one with its terminationGracePeriod (1h). The last old node is still draining now."""
    events = Events()
    old: list[Machine] = []
    new: list[Machine] = []
    gone: dict[str, datetime] = {}
    born = NOW - timedelta(days=5, hours=3)
    suffixes = zip(OLD_SUFFIXES, NEW_SUFFIXES, strict=True)
    for k, (old_suffix, new_suffix) in enumerate(suffixes):
        zone = ZONES[k % 3]
        launch = _t(46 - 8 * k)
        terminate = launch + timedelta(minutes=5)
        o = Machine(
            claim=f"{DRIFT_POOL}-{old_suffix}",
            pool=DRIFT_POOL,
            instance_type="g6e.12xlarge",
            zone=zone,
            instance_id=f"i-0a7c41e9b2d3f50{k:02d}",
            image=OLD_AMI,
            gpus=4,
            created=born,
            node=f"ip-10-0-{20 + k}-{101 + k}.us-west-2.compute.internal",
            registered=born + timedelta(minutes=2),
            deleting=terminate,
            termination_timestamp=terminate + timedelta(hours=1),  # deletion + TGP
            drifted=_t(47),
            disruption_reason=launch,
        )
        n = Machine(
            claim=f"{DRIFT_POOL}-{new_suffix}",
            pool=DRIFT_POOL,
            instance_type="g6e.12xlarge",
            zone=zone,
            instance_id=f"i-0e51d8a3c7f9b62{k:02d}",
            image=NEW_AMI,
            gpus=4,
            created=launch,
            node=f"ip-10-0-{40 + k}-{17 + k}.us-west-2.compute.internal",
            registered=launch + timedelta(minutes=2),
        )
        old.append(o)
        new.append(n)
        events.transition("NodeClaim", o.claim, "Drifted", "Unknown", "True", "AMIDrift", _t(47))
        events.transition(
            "NodeClaim", o.claim, "DisruptionReason", "Unknown", "True", "Drifted", launch
        )
        events.add(
            "NodeClaim", n.claim, "DisruptionLaunching", "Launching NodeClaim: Drifted", launch
        )
        events.transition("NodeClaim", n.claim, "Launched", "Unknown", "True", "Launched", launch)
        events.add(
            "NodeClaim",
            n.claim,
            "DisruptionWaitingReadiness",
            "Waiting on readiness to continue disruption",
            launch + timedelta(seconds=10),
        )
        assert n.registered is not None
        events.transition(
            "NodeClaim", n.claim, "Registered", "Unknown", "True", "Registered", n.registered
        )
        events.kubelet_boot(n.node, n.registered)
        ready = n.registered + timedelta(minutes=2)
        events.transition(
            "NodeClaim", n.claim, "Initialized", "Unknown", "True", "Initialized", ready
        )
        events.transition("NodeClaim", n.claim, "Ready", "Unknown", "True", "Ready", ready)
        events.add("Node", o.node, "DisruptionTerminating", "Disrupting Node: Drifted", terminate)
        events.add(
            "NodeClaim",
            o.claim,
            "DisruptionTerminating",
            "Disrupting NodeClaim: Drifted",
            terminate,
        )
        if k == 5:
            continue  # still draining: its GPU jobs have up to an hour to finish
        drained = terminate + timedelta(minutes=2)
        events.transition("NodeClaim", o.claim, "Drained", "Unknown", "True", "Drained", drained)
        events.transition(
            "NodeClaim",
            o.claim,
            "VolumesDetached",
            "Unknown",
            "True",
            "VolumesDetached",
            drained + timedelta(seconds=20),
        )
        events.transition(
            "NodeClaim",
            o.claim,
            "InstanceTerminating",
            "Unknown",
            "True",
            "InstanceTerminating",
            drained + timedelta(seconds=30),
        )
        events.add(
            "Node",
            o.node,
            "RemovingNode",
            f"Node {o.node} event: Removing Node {o.node} from Controller",
            drained + timedelta(seconds=50),
            source="node-controller",
        )
        gone[o.claim] = drained + timedelta(seconds=50)
    return Rollout(old, new, gone, events)


def _drift_input(with_history: bool) -> tuple[DiagnosisInput, Rollout]:
    r = _drift_rollout()
    draining = r.old[-1]  # the only old machine the API server still has
    live = [*r.new, draining]
    pool = _nodepool(DRIFT_POOL, "gpu-al2023", "g6e", nodes=7, termination_grace="1h")
    snapshot = Snapshot(
        nodes={
            m.node: Node.from_api(
                m.node_json(
                    "Amazon Linux 2023.9.20251120"
                    if m.image == NEW_AMI
                    else "Amazon Linux 2023.9.20251103"
                )
            )
            for m in live
        },
        nodeclaims={m.claim: NodeClaim.from_api(m.nodeclaim_json()) for m in live},
        nodepools={DRIFT_POOL: NodePool.from_api(pool)},
        events=r.events.parsed(),
        karpenter=True,
        taken_at=NOW,
    )
    history = History()
    if with_history:
        lifecycles: list[Lifecycle] = []
        for m in r.old:
            gone = r.gone.get(m.claim)
            lifecycles.append(_claim_lifecycle(m, gone, "Drifted"))
            lifecycles.append(_node_lifecycle(m, gone))
        for m in r.new:
            lifecycles.append(_claim_lifecycle(m, None, None))
            lifecycles.append(_node_lifecycle(m, None))
        history = History(lifecycles=tuple(lifecycles))
    inp = DiagnosisInput(
        snapshot=snapshot,
        now=NOW,
        history=history,
        karpenter=KarpenterSettings.from_deployment(_karpenter_deployment()),
    )
    return inp, r


@pytest.mark.parametrize("with_history", [False, True], ids=["api-only", "with-history"])
def test_drift_rollout_is_benign_churn_named_drift(with_history: bool) -> None:
    inp, rollout = _drift_input(with_history)
    assert inp.karpenter is not None and inp.karpenter.node_repair is True
    findings = _run(inp)

    churned = [f for f in findings if f.id == REPLACEMENT_CHURN]
    assert [f.nodepool for f in churned] == [DRIFT_POOL]
    churn = churned[0]
    assert churn.severity in (INFO, WARNING)
    assert "6 nodes replaced" in churn.summary
    assert "mostly drift (6 drift)" in churn.summary
    # Old nodes lived five days: nothing about short lives or a failing rate.
    assert "median node lifetime" not in churn.summary
    assert "non-consolidation" not in churn.summary
    assert set(churn.nodes) == {m.node for m in rollout.old}
    text = _text(churn)
    # The API server still holds the disruption events; history records the condition.
    assert ("DisruptionReason Drifted" if with_history else "Disrupting NodeClaim: Drifted") in text
    assert text.count("→ drift") >= 6
    assert "→ Karpenter repair" not in text and "→ registration" not in text

    # Not a repair loop, not a hardware fault, not a node failing to come up.
    ids = _ids(findings, DRIFT_POOL)
    for forbidden in (NODE_REPAIR_LOOP, ACCELERATED_HARDWARE_NOT_READY, NOTREADY_LOOP):
        assert forbidden not in ids
    assert REPAIR_BLOCKED not in ids
    assert [f for f in findings if f.severity == CRITICAL] == []


# -- 2. registration failures ---------------------------------------------------------------

REG_POOL = "gpu-batch"
CUSTOM_AMI = "ami-06c9e2b7d1a4f8035"  # a team-built AL2023 GPU image (amiSelectorTerms id)


def _failed_machines() -> list[Machine]:
    """Three NodeClaims launched ~18 minutes apart: each instance runs, its kubelet never
    joins, and liveness deletes the claim 15 minutes after it was created. A fourth
    was created for the same pending pods ten minutes ago and is waiting now."""
    machines = []
    for k, (created, suffix) in enumerate(
        ((_t(58), "zr5kq"), (_t(42), "d4mhw"), (_t(26), "x9cbt"), (_t(10), "g2vlp"))
    ):
        failed = k < 3
        machines.append(
            Machine(
                claim=f"{REG_POOL}-{suffix}",
                pool=REG_POOL,
                instance_type="p5.48xlarge",
                zone="us-east-1d" if k % 2 else "us-east-1a",
                instance_id=f"i-0c3f7a91e4b2d68{k:02d}",
                image=CUSTOM_AMI,
                gpus=8,
                created=created,
                deleting=created + timedelta(minutes=15) if failed else None,
            )
        )
    return machines


def _system_machine() -> Machine:
    born = NOW - timedelta(days=12)
    return Machine(
        claim="system-k2fpx",
        pool="system",
        instance_type="m7i.2xlarge",
        zone="us-east-1a",
        instance_id="i-0b8d2e6f4a1c93705",
        image="ami-0d4c8a2e6b1f39570",
        gpus=0,
        created=born,
        node="ip-10-1-3-77.ec2.internal",
        registered=born + timedelta(minutes=1),
    )


def _registration_input(with_history: bool, warnings: bool) -> DiagnosisInput:
    machines = _failed_machines()
    failed, waiting = machines[:3], machines[3]
    system = _system_machine()
    events = Events()
    for m in machines:
        launched = m.created + timedelta(seconds=30)
        events.transition("NodeClaim", m.claim, "Launched", "Unknown", "True", "Launched", launched)
        if m.deleting is None:
            continue
        if warnings:
            # Karpenter retries registration and dedupes its Warning on the claim's UID.
            events.add(
                "NodeClaim",
                m.claim,
                "UnregisteredTaintMissing",
                "Missing karpenter.sh/unregistered taint which prevents registration related "
                "race conditions on Karpenter-managed nodes",
                m.created + timedelta(minutes=4),
                type_="Warning",
                count=9,
                last=m.deleting,
            )
        events.transition(
            "NodeClaim",
            m.claim,
            "InstanceTerminating",
            "Unknown",
            "True",
            "InstanceTerminating",
            m.deleting + timedelta(seconds=3),
        )
    # Karpenter echoes the NodePool's own condition change after the second failure.
    unhealthy_since = failed[1].deleting
    assert unhealthy_since is not None
    events.transition(
        "NodePool",
        REG_POOL,
        "NodeRegistrationHealthy",
        "Unknown",
        "False",
        "RegistrationFailed",
        unhealthy_since,
    )
    registration = _cond(
        "NodeRegistrationHealthy",
        "False",
        "RegistrationFailed",
        unhealthy_since,
        "Failed to register node",
    )
    pools = [
        _nodepool(REG_POOL, "gpu-custom", "p5", nodes=0, registration_healthy=registration),
        _nodepool("system", "default", "m7i", nodes=1),
    ]
    pools[1]["spec"]["template"]["spec"].pop("taints")
    snapshot = Snapshot(
        nodes={system.node: Node.from_api(system.node_json("Amazon Linux 2023.9.20251110"))},
        nodeclaims={m.claim: NodeClaim.from_api(m.nodeclaim_json()) for m in (waiting, system)},
        nodepools={p.name: p for p in map(NodePool.from_api, pools)},
        events=events.parsed(),
        karpenter=True,
        taken_at=NOW,
    )
    history = History()
    if with_history:
        gone = [
            _claim_lifecycle(m, m.deleting + timedelta(seconds=40), None)
            for m in failed
            if m.deleting is not None
        ]
        live = [_claim_lifecycle(waiting, None, None), _claim_lifecycle(system, None, None)]
        history = History(lifecycles=(*gone, *live, _node_lifecycle(system, None)))
    return DiagnosisInput(
        snapshot=snapshot,
        now=NOW,
        history=history,
        karpenter=KarpenterSettings.from_deployment(_karpenter_deployment()),
    )


def _variants() -> Iterator[Any]:
    for history in (False, True):
        for warnings in (True, False):
            name = f"{'with-history' if history else 'api-only'}-" + (
                "warning-events" if warnings else "no-warning-events"
            )
            yield pytest.param(history, warnings, id=name)


@pytest.mark.parametrize(("with_history", "warnings"), list(_variants()))
def test_registration_failures_are_churn_named_registration(
    with_history: bool, warnings: bool
) -> None:
    inp = _registration_input(with_history, warnings)
    assert inp.snapshot.launching_claims()  # the fourth attempt is still waiting
    findings = _run(inp)

    churned = [f for f in findings if f.id == REPLACEMENT_CHURN]
    assert [f.nodepool for f in churned] == [REG_POOL]
    churn = churned[0]
    assert churn.severity == WARNING
    assert "3 nodes replaced" in churn.summary
    assert "mostly registration failure (3 registration failure)" in churn.summary
    assert "3 registration failures" in churn.summary
    assert churn.nodes == ()  # no instance ever became a Node
    text = _text(churn)
    assert text.count("→ registration failure") >= 3
    if with_history:
        assert text.count("node never registered") >= 3
    elif warnings:
        assert "Warning UnregisteredTaintMissing on NodeClaim" in text
    else:  # only Karpenter's condition echoes remain: Launched, then InstanceTerminating
        assert text.count("its events show it launched") == 3

    ids = {f.id for f in findings}
    assert NODE_REPAIR_LOOP not in ids
    assert NOTREADY_LOOP not in ids  # there is no Node to be NotReady
    assert ACCELERATED_HARDWARE_NOT_READY not in ids
    assert [f for f in findings if f.severity == CRITICAL] == []
    assert _ids(findings, "system") == set()  # the healthy CPU pool stays quiet
