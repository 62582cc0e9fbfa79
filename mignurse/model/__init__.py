"""The objects mignurse reasons about, parsed once from raw Kubernetes API JSON.

Every `from_api` takes the plain dict the API server returned (a list item or a watch
object) and keeps only what the rules, tables and bundles need. Parsing is defensive:
real clusters carry missing fields, unknown condition types and odd values, and none of
that may crash a listing of 5,000 nodes. The package re-exports every public name, so
callers write `from mignurse.model import Node`: `fields` (labels, value parsing, Condition,
Taint), `core` (Node, Event, Pod), `karpenter` (NodeClaim, NodePool), `mig` (MIG state read
from the GPU) and `dra` (ResourceSlices and ResourceClaims of the NVIDIA DRA driver).
"""

from typing import TYPE_CHECKING

from mignurse.lazynames import name_loader

# HOT_PATH_NOTE: Node, NodeClaim, Event, Condition, Taint and Pod are built by the hundred
# thousand on every list of a large cluster. A frozen dataclass's __init__ sets each field
# through object.__setattr__ and costs six times a plain one (0.31 s against 0.05 s for
# 100,000 events), so these are plain slotted dataclasses that no code ever mutates.
from mignurse.model.core import (
    Event,
    Node,
    Pod,
    pod_claim_names,
)
from mignurse.model.dra import (
    DRA_GPU_DRIVER,
    DRA_TYPE_GPU,
    DRA_TYPE_MIG,
    PLUGIN_DEVICE,
    PLUGIN_DRA,
    AllocatedDevice,
    ContainerTrouble,
    DraDevice,
    GpuPluginPod,
    NodeDevices,
    ResourceClaim,
    ResourceSlice,
    dra_devices_by_node,
    with_gpu_claims,
)
from mignurse.model.fields import (
    ANNOTATION_TERMINATION_TIMESTAMP,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_COMPUTE_TYPE,
    LABEL_GPU_COUNT_HINT,
    LABEL_GPU_DEPLOY_PREFIX,
    LABEL_GPU_MANUFACTURER,
    LABEL_GPU_PRESENT,
    LABEL_GPU_PRODUCT,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_BETA,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    LABEL_MIG_STRATEGY,
    LABEL_MNG_CAPACITY_TYPE,
    LABEL_NODEGROUP,
    LABEL_NODEPOOL,
    LABEL_PCI_NVIDIA,
    LABEL_ZONE,
    NVIDIA_INSTANCE_FAMILIES,
    RESOURCE_GPU,
    RESOURCE_MIG_PREFIX,
    Condition,
    Taint,
    find_condition,
    format_time,
    instance_family,
    instance_id_from_provider_id,
    parse_count,
    parse_time,
)
from mignurse.model.karpenter import (
    NodeClaim,
    NodePool,
)

if TYPE_CHECKING:
    from mignurse.model.mig import (
        MIG_DISABLED,
        MIG_ENABLED,
        MIG_NOT_SUPPORTED,
        MIG_UNKNOWN,
        PROBE_DRIVER_NOT_LOADED,
        PROBE_ERROR,
        PROBE_LIBRARY_NOT_FOUND,
        PROBE_NO_GPUS,
        PROBE_OK,
        GpuMigState,
        MigDevice,
        MigState,
    )

# The MIG state read on a node (`mignurse.gpu`, a bundle's probe) loads on first use: the
# node table and the other reads of the API never build one.
_HOMES = {
    name: "mig"
    for name in (
        "MIG_DISABLED",
        "MIG_ENABLED",
        "MIG_NOT_SUPPORTED",
        "MIG_UNKNOWN",
        "PROBE_DRIVER_NOT_LOADED",
        "PROBE_ERROR",
        "PROBE_LIBRARY_NOT_FOUND",
        "PROBE_NO_GPUS",
        "PROBE_OK",
        "GpuMigState",
        "MigDevice",
        "MigState",
    )
}

__all__ = [
    "ANNOTATION_TERMINATION_TIMESTAMP",
    "DRA_GPU_DRIVER",
    "DRA_TYPE_GPU",
    "DRA_TYPE_MIG",
    "LABEL_ARCH",
    "LABEL_CAPACITY_TYPE",
    "LABEL_COMPUTE_TYPE",
    "LABEL_GPU_COUNT_HINT",
    "LABEL_GPU_DEPLOY_PREFIX",
    "LABEL_GPU_MANUFACTURER",
    "LABEL_GPU_PRESENT",
    "LABEL_GPU_PRODUCT",
    "LABEL_INSTANCE_TYPE",
    "LABEL_INSTANCE_TYPE_BETA",
    "LABEL_MIG_CONFIG",
    "LABEL_MIG_CONFIG_STATE",
    "LABEL_MIG_STRATEGY",
    "LABEL_MNG_CAPACITY_TYPE",
    "LABEL_NODEGROUP",
    "LABEL_NODEPOOL",
    "LABEL_PCI_NVIDIA",
    "LABEL_ZONE",
    "MIG_DISABLED",
    "MIG_ENABLED",
    "MIG_NOT_SUPPORTED",
    "MIG_UNKNOWN",
    "NVIDIA_INSTANCE_FAMILIES",
    "PLUGIN_DEVICE",
    "PLUGIN_DRA",
    "PROBE_DRIVER_NOT_LOADED",
    "PROBE_ERROR",
    "PROBE_LIBRARY_NOT_FOUND",
    "PROBE_NO_GPUS",
    "PROBE_OK",
    "RESOURCE_GPU",
    "RESOURCE_MIG_PREFIX",
    "AllocatedDevice",
    "Condition",
    "ContainerTrouble",
    "DraDevice",
    "Event",
    "GpuMigState",
    "GpuPluginPod",
    "MigDevice",
    "MigState",
    "Node",
    "NodeClaim",
    "NodeDevices",
    "NodePool",
    "Pod",
    "ResourceClaim",
    "ResourceSlice",
    "Taint",
    "dra_devices_by_node",
    "find_condition",
    "format_time",
    "instance_family",
    "instance_id_from_provider_id",
    "parse_count",
    "parse_time",
    "pod_claim_names",
    "with_gpu_claims",
]

__getattr__ = name_loader(__name__, _HOMES, globals())
