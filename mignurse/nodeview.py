"""The GPU node table, as data: what `mignurse nodes` prints and the app shows.

Faces decide how to draw a row; this module decides what is in it, so the command line,
the JSON for scripts and the terminal app can never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mignurse.cluster.snapshot import GPU_SOURCE_DEVICE_PLUGIN, GPU_SOURCE_DRA, Snapshot
from mignurse.model import (
    RESOURCE_GPU,
    Condition,
    Node,
    NodeClaim,
    NodeDevices,
    format_time,
)

AHR = "AcceleratedHardwareReady"

# Taints that say something about the node's state (the GPU taint is routine).
NOTABLE_TAINTS = {
    "karpenter.sh/disrupted": "disrupting",
    "node.kubernetes.io/unreachable": "unreachable",
    "node.kubernetes.io/not-ready": "not-ready",
    "node.kubernetes.io/unschedulable": "",  # shown as "cordoned" already
    "karpenter.sh/unregistered": "unregistered",
    "node.cloudprovider.kubernetes.io/shutdown": "shutdown",
}

COLUMNS = ("NAME", "POOL", "TYPE", "STATUS", "AGE", "GPU", "MIG", "AHR", "CORDONED/TAINTS")
# Under 100 columns a terminal table leaves these out; -o wide and piped output keep them.
NARROW_DROPS = ("TYPE", "AGE")
WIDE_COLUMNS = (*COLUMNS, "CAPACITY", "ZONE", "INSTANCE", "NODECLAIM", "OS-IMAGE", "RUNTIME")


def format_age(seconds: float | None) -> str:
    """kubectl's compact age: 45s, 12m, 3h, 3h20m under 10 h, 5d, 5d4h under a week."""
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 10:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 7:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    return f"{days}d"


def _since(moment: datetime | None, now: datetime) -> float | None:
    return (now - moment).total_seconds() if moment else None


def _counts_cell(mig: dict[str, int], detailed: bool) -> str:
    """One MIG profile reads "56×1g.10gb"; a mixed layout reads "32 MIG" unless `detailed`."""
    if len(mig) == 1 or detailed:
        return " ".join(f"{count}×{profile}" for profile, count in sorted(mig.items()))
    return f"{sum(mig.values())} MIG"


def gpu_cell(
    node: Node, *, detailed: bool = False, dra: NodeDevices | None = None, source: str = ""
) -> str:
    """Allocatable/capacity of whole GPUs, or the MIG slices on offer; on a DRA node
    (`source` dra) the GPUs its ResourceSlices publish ("dra 1 GPU", "dra none")."""
    if source == GPU_SOURCE_DRA and not node.gpu_capacity and not node.gpu_allocatable:
        if dra is None or not dra.gpus:
            return "dra none"  # the DRA driver runs there and publishes nothing: worth seeing
        return f"dra {len(dra.gpus)} GPU" + ("s" if len(dra.gpus) > 1 else "")
    mig = node.mig_resources
    if mig:
        return _counts_cell(mig, detailed)
    capacity = node.gpu_capacity.get(RESOURCE_GPU)
    allocatable = node.gpu_allocatable.get(RESOURCE_GPU)
    if capacity is None and allocatable is None:
        return "none"  # a GPU node that lost its GPU resources: worth seeing
    return f"{allocatable or 0}/{capacity or 0}"


def mig_cell(node: Node, dra: NodeDevices | None = None, *, detailed: bool = False) -> str:
    """The MIG config asked for and mig-manager's state; on a DRA node, then the MIG devices
    its ResourceSlices publish ("all-1g.24gb success · 4×1g.24gb")."""
    config, state = node.mig_config, node.mig_config_state
    asked = (f"{config or '?'} {state}" if state else config) if config or state else ""
    if dra is None:
        return asked or "-"
    if dra.dynamic:
        published = "dynamic"
    else:
        migs = dra.mig_counts()
        published = _counts_cell(migs, detailed) if migs else "no MIG"
    return f"{asked} · {published}" if asked else published


def ahr_cell(cond: Condition | None) -> str:
    if cond is None:
        return "-"
    if cond.status == "True":
        return "ok"
    if cond.status == "False":
        return f"False {cond.reason}" if cond.reason else "False"
    return "Unknown"


def taints_cell(node: Node) -> str:
    words: list[str] = []
    if node.unschedulable:
        words.append("cordoned")
    for taint in node.taints:
        word = NOTABLE_TAINTS.get(taint.key)
        if word and word not in words:
            words.append(word)
    if node.deleting:
        words.append("deleting")
    return ",".join(words) or "-"


def short_name(name: str) -> str:
    """ip-10-0-37-142.us-west-2.compute.internal → ip-10-0-37-142 (narrow terminals)."""
    return _EC2_DOMAIN.sub("", name)


def resolve_node_name(name: str, names: Iterable[str]) -> str | None:
    """A node named in full or without its domain (ip-10-0-37-142), as users type it: the
    full name, or None when there is no such node or the short name fits more than one."""
    matches = []
    for full in names:
        if full == name:
            return full
        if full.split(".", 1)[0] == name:
            matches.append(full)
    return matches[0] if len(matches) == 1 else None


_EC2_DOMAIN = re.compile(r"\.(?:[a-z]{2}-[a-z]+-\d\.compute|ec2)\.internal$")


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One GPU node, ready to draw; `status_word` lets faces colour by meaning."""

    name: str
    pool: str
    pool_kind: str
    instance_type: str
    status_word: str  # Ready | NotReady | Unknown | Launching
    status: str  # "NotReady 12m"
    age: str
    gpu: str
    gpu_detail: str  # every MIG profile spelled out, for wide output
    mig: str
    ahr: str
    ahr_ok: bool | None
    taints: str
    capacity_type: str
    zone: str
    instance_id: str
    nodeclaim: str
    os_image: str
    runtime: str
    badge: str = ""  # the worst finding's severity about this node, set by the app

    def cells(self, *, wide: bool = False, shorten: bool = False) -> tuple[str, ...]:
        base = (
            short_name(self.name) if shorten else self.name,
            self.pool or "-",
            self.instance_type or "-",
            self.status,
            self.age,
            self.gpu_detail if wide else self.gpu,
            self.mig,
            self.ahr,
            self.taints,
        )
        if not wide:
            return base
        return (
            *base,
            self.capacity_type or "-",
            self.zone or "-",
            self.instance_id or "-",
            self.nodeclaim or "-",
            self.os_image or "-",
            self.runtime or "-",
        )


def node_row(
    node: Node,
    claim: NodeClaim | None,
    now: datetime,
    *,
    dra: NodeDevices | None = None,
    source: str = GPU_SOURCE_DEVICE_PLUGIN,
) -> NodeRow:
    """One node's row; `dra` and `source` from the snapshot (Snapshot.dra_devices,
    Snapshot.gpu_source)."""
    ready = node.ready
    ahr = node.condition(AHR)
    word = node.ready_status
    since = (
        format_age(_since(ready.last_transition, now)) if ready and ready.last_transition else ""
    )
    return NodeRow(
        name=node.name,
        pool=node.pool,
        pool_kind=node.pool_kind,
        instance_type=node.instance_type,
        status_word=word,
        status=f"{word} {since}".strip(),
        age=format_age(_since(node.created, now)),
        gpu=gpu_cell(node, dra=dra, source=source),
        gpu_detail=gpu_cell(node, detailed=True, dra=dra, source=source),
        mig=mig_cell(node, dra),
        ahr=ahr_cell(ahr),
        ahr_ok=None if ahr is None or ahr.status == "Unknown" else ahr.status == "True",
        taints=taints_cell(node),
        capacity_type=node.capacity_type,
        zone=node.zone,
        instance_id=node.instance_id,
        nodeclaim=claim.name if claim else "",
        os_image=node.os_image,
        runtime=node.container_runtime,
    )


def launching_row(claim: NodeClaim, now: datetime) -> NodeRow:
    """A NodeClaim whose Node has not registered yet: capacity on its way."""
    return NodeRow(
        name=claim.name,
        pool=claim.pool,
        pool_kind="nodepool",
        instance_type=claim.instance_type,
        status_word="Launching",
        status=f"Launching {format_age(_since(claim.created, now))}",
        age=format_age(_since(claim.created, now)),
        gpu="-",
        gpu_detail="-",
        mig="-",
        ahr="-",
        ahr_ok=None,
        taints="-",
        capacity_type=claim.capacity_type,
        zone=claim.zone,
        instance_id=claim.instance_id,
        nodeclaim=claim.name,
        os_image="-",
        runtime="-",
    )


def bundle_row(name: str, *, layout: str, instance_id: str = "") -> NodeRow:
    """A node known only from another tool's node bundle (no Node object: state unknown)."""
    return NodeRow(
        name=name,
        pool="",
        pool_kind="",
        instance_type="-",
        status_word="Unknown",
        status=f"{layout} bundle",
        age="-",
        gpu="-",
        gpu_detail="-",
        mig="-",
        ahr="-",
        ahr_ok=None,
        taints="-",
        capacity_type="",
        zone="",
        instance_id=instance_id,
        nodeclaim="",
        os_image="-",
        runtime="-",
    )


def node_rows(
    snapshot: Snapshot,
    now: datetime,
    *,
    pool: str | None = None,
    launching: bool = True,
    kept: dict[str, tuple[Any, ...]] | None = None,
    fresh: bool = True,
) -> list[NodeRow]:
    """The GPU nodes' rows (and the launching NodeClaims', with `launching`), sorted by pool.

    `kept`: the rows made last time, by node name, with what each was made from, written
    anew here. A node's row is made again only where the node, its NodeClaim or its DRA
    devices changed since, or when `fresh` (ages and "for how long" move). The app's refresh
    keeps them: under churn a few nodes change between refreshes, and making all 5,000 rows
    twice a second took the interpreter from the UI thread (benchmarks/bench_app.py)."""
    claims = snapshot.claims_by_node()
    devices = snapshot.dra_devices
    rows: list[NodeRow] = []
    made: dict[str, tuple[Any, ...]] = {}
    for node in snapshot.gpu_nodes():
        if pool is not None and node.pool != pool:
            continue
        claim = claims.get(node.name) or claims.get(node.provider_id)
        dra = devices.get(node.name)
        source = snapshot.gpu_source(node)
        held = kept.get(node.name) if kept is not None and not fresh else None
        if (
            held is not None
            and held[0] is node
            and held[1] is claim
            and held[2] == dra
            and held[3] == source
        ):
            row = held[4]
        else:
            row = node_row(node, claim, now, dra=dra, source=source)
        made[node.name] = (node, claim, dra, source, row)
        rows.append(row)
    if kept is not None:
        kept.clear()
        kept.update(made)
    if launching:
        rows += [
            launching_row(claim, now)
            for claim in snapshot.launching_claims()
            if pool is None or claim.pool == pool
        ]
        rows.sort(key=lambda r: (r.pool, r.status_word == "Launching", r.name))
    return rows


def _condition_json(cond: Condition) -> dict[str, Any]:
    return cond.to_json()


def node_json(
    node: Node,
    claim: NodeClaim | None,
    now: datetime,
    *,
    dra: NodeDevices | None = None,
    source: str = GPU_SOURCE_DEVICE_PLUGIN,
) -> dict[str, Any]:
    """The stable per-node document of `mignurse nodes -o json` (documented in docs/commands.md)."""
    ready = node.ready
    ahr = node.condition(AHR)
    return {
        "name": node.name,
        "pool": node.pool,
        "poolKind": node.pool_kind,
        "instanceType": node.instance_type,
        "capacityType": node.capacity_type,
        "zone": node.zone,
        "instanceId": node.instance_id,
        "providerId": node.provider_id,
        "nodeClaim": claim.name if claim else None,
        "imageId": claim.image_id if claim else None,
        "created": format_time(node.created),
        "ageSeconds": int(_since(node.created, now) or 0),
        "deleting": format_time(node.deleting),
        "status": node.ready_status,
        "statusSince": format_time(ready.last_transition) if ready else None,
        "statusReason": ready.reason if ready else None,
        "statusMessage": ready.message if ready else None,
        "unschedulable": node.unschedulable,
        "taints": [str(t) for t in node.taints],
        "gpu": {
            "source": source,
            "product": node.gpu_product or None,
            "capacity": dict(node.gpu_capacity),
            "allocatable": dict(node.gpu_allocatable),
            "dra": dra.to_json() if dra is not None else None,
        },
        "mig": {
            "config": node.mig_config or None,
            "state": node.mig_config_state or None,
            "strategy": node.labels.get("nvidia.com/mig.strategy") or None,
            # the device plugin's MIG resources, or the MIG devices DRA publishes
            "slices": (dra.mig_counts() if dra is not None else {})
            if source == GPU_SOURCE_DRA
            else node.mig_resources,
        },
        "gpuDeploy": node.gpu_deploy,
        "acceleratedHardwareReady": _condition_json(ahr) if ahr else None,
        "conditions": [_condition_json(c) for c in node.conditions],
        "osImage": node.os_image,
        "kernel": node.kernel,
        "containerRuntime": node.container_runtime,
        "kubelet": node.kubelet_version,
        "architecture": node.architecture,
    }


def nodes_document(
    snapshot: Snapshot, now: datetime, *, context: str, pool: str | None = None
) -> dict[str, Any]:
    claims = snapshot.claims_by_node()
    nodes = [n for n in snapshot.gpu_nodes() if pool is None or n.pool == pool]
    return {
        "apiVersion": "mignurse/v1",
        "kind": "GPUNodeList",
        "context": context,
        "now": format_time(now),
        "karpenter": snapshot.karpenter,
        "nodes": [
            node_json(
                n,
                claims.get(n.name) or claims.get(n.provider_id),
                now,
                dra=snapshot.dra_devices.get(n.name),
                source=snapshot.gpu_source(n),
            )
            for n in nodes
        ],
        "launching": [
            launching_json(c) for c in snapshot.launching_claims() if pool is None or c.pool == pool
        ],
    }


def launching_json(claim: NodeClaim) -> dict[str, Any]:
    """A NodeClaim with no Node yet, as `mignurse nodes -o json` lists it in `launching`."""
    return {
        "nodeClaim": claim.name,
        "pool": claim.pool,
        "instanceType": claim.instance_type,
        "instanceId": claim.instance_id or None,
        "created": format_time(claim.created),
    }
