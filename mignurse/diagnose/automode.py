"""Which nodes EKS Auto Mode repairs, and what can be done there instead of a pause.

A node is Auto Mode's when any one sign says so, so a missing label or a NodeClaim gone from
the snapshot does not hide it: the node's label `eks.amazonaws.com/compute-type=auto`, its
NodeClaim's `nodeClassRef` of group `eks.amazonaws.com` (kind NodeClass), or its NodePool's
(EKS user guide associate-workload.html and create-node-pool.html). Auto Mode repair is always
on and cannot be configured or paused (node-repair.html "Configure automatic node repair").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.model import LABEL_COMPUTE_TYPE, Node, NodeClaim
from mignurse.model.fields import (
    AUTO_MODE_NODECLASS_GROUP,
    AUTO_MODE_NODECLASS_KIND,
    COMPUTE_TYPE_AUTO,
)

AUTO = "auto"

# What an engineer can do where repair cannot be paused (EKS user guide node-repair.html,
# auto-get-logs.html, associate-workload.html).
AUTO_MODE_INSTEAD = (
    "Auto Mode repair cannot be paused or configured: cordon the node, capture its logs "
    f"with a NodeDiagnostic ({AUTO_MODE_NODECLASS_GROUP}/v1alpha1: `mignurse collect NODE "
    "--transport nodediagnostic`) before it is replaced, fix "
    "the cause, or keep the GPU workload off Auto Mode nodes (node affinity "
    f"{LABEL_COMPUTE_TYPE} NotIn {COMPUTE_TYPE_AUTO}) on a NodePool or node group whose repair "
    "can be paused"
)


def auto_mode_nodes(inp: DiagnosisInput) -> Mapping[str, str]:
    """Node name → why it is an Auto Mode node, for every Auto Mode node in the snapshot."""
    return inp.memo("auto_mode_nodes", lambda: _auto_mode_nodes(inp))


def _auto_mode_nodes(inp: DiagnosisInput) -> dict[str, str]:
    claims = inp.claims_by_node
    # A NodePool has one nodeClassRef: any of its NodeClaims speaks for all its nodes.
    pool_claims = {
        c.pool: c.name
        for c in inp.snapshot.nodeclaims.values()
        if c.pool and c.node_class_group == AUTO_MODE_NODECLASS_GROUP
    }
    found: dict[str, str] = {}
    for node in inp.snapshot.nodes.values():
        why = _why(inp, node, claims)
        if not why and node.pool in pool_claims:
            why = f"NodeClaim {pool_claims[node.pool]} of its NodePool refers to {_NODECLASS}"
        if why:
            found[node.name] = why
    return found


def _why(inp: DiagnosisInput, node: Node, claims: Mapping[str, NodeClaim]) -> str:
    if node.labels.get(LABEL_COMPUTE_TYPE) == COMPUTE_TYPE_AUTO:
        return f"labelled {LABEL_COMPUTE_TYPE}={COMPUTE_TYPE_AUTO}"
    claim = claims.get(node.name) or (claims.get(node.provider_id) if node.provider_id else None)
    if claim is not None and claim.node_class_group == AUTO_MODE_NODECLASS_GROUP:
        return f"NodeClaim {claim.name} refers to {_NODECLASS}"
    pool = inp.snapshot.nodepools.get(node.pool) if node.pool else None
    if pool is not None and pool.node_class_group == AUTO_MODE_NODECLASS_GROUP:
        return f"NodePool {pool.name} refers to {_NODECLASS}"
    return ""


_NODECLASS = f"an {AUTO_MODE_NODECLASS_GROUP} {AUTO_MODE_NODECLASS_KIND}"


def is_auto_mode(inp: DiagnosisInput, node: Node) -> bool:
    return node.name in auto_mode_nodes(inp)


def repair_kind(inp: DiagnosisInput, node: Node) -> str:
    """Who repairs the node: "auto", "nodepool", "nodegroup" or "" (nobody). Auto Mode wins
    over every other label: its nodes carry the nodepool label too."""
    return AUTO if is_auto_mode(inp, node) else node.pool_kind


def any_auto_mode(inp: DiagnosisInput, nodes: Iterable[Node]) -> bool:
    return any(is_auto_mode(inp, node) for node in nodes)


def auto_mode_pool(inp: DiagnosisInput, pool: str) -> bool:
    """A NodePool that launches Auto Mode nodes: its NodeClass, one of its NodeClaims' or one
    of its nodes says so."""
    return bool(pool) and pool in inp.memo("auto_mode_pools", lambda: _auto_mode_pools(inp))


def _auto_mode_pools(inp: DiagnosisInput) -> frozenset[str]:
    pools = {
        name
        for name, nodepool in inp.snapshot.nodepools.items()
        if nodepool.node_class_group == AUTO_MODE_NODECLASS_GROUP
    }
    pools.update(
        c.pool
        for c in inp.snapshot.nodeclaims.values()
        if c.node_class_group == AUTO_MODE_NODECLASS_GROUP
    )
    nodes = inp.snapshot.nodes
    pools.update(nodes[name].pool for name in auto_mode_nodes(inp) if name in nodes)
    pools.discard("")
    return frozenset(pools)
