"""Server-side printing: the `meta.k8s.io/v1` Table form kubectl asks for.

Built-in kinds print as kube-apiserver prints them (kubernetes v1.32
pkg/printers/internalversion/printers.go: the column lists of AddHandlers here, the print*
functions in `printers.py`); custom resources print their CRD's `additionalPrinterColumns`
(apiextensions-apiserver v0.32 pkg/registry/customresource/tableconvertor). The server
computes every age itself, so ages follow the simulated clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from mignurse.sim.printers import (
    human_duration,
    meta_of,
    parse_time,
    print_configmap,
    print_crd,
    print_daemonset,
    print_deployment,
    print_event,
    print_lease,
    print_name_age,
    print_namespace,
    print_node,
    print_pdb,
    print_pod,
    print_replicaset,
    print_resourceclaim,
    print_resourceslice,
)

JsonDict = dict[str, Any]
Column = dict[str, Any]
Printer = Callable[[JsonDict, float], list[Any]]

NAME_DESC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DESC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def col(
    name: str, type_: str = "string", priority: int = 0, desc: str = "", fmt: str = ""
) -> Column:
    return {"name": name, "type": type_, "format": fmt, "description": desc, "priority": priority}


NAME = col("Name", fmt="name", desc=NAME_DESC)
AGE = col("Age", desc=AGE_DESC)


# kubernetes v1.34 staging/src/k8s.io/api/resource/v1/types.go (the SwaggerDoc of the fields
# the columns show)
_SLICE_NODE_DESC = (
    "NodeName identifies the node which provides the resources in this pool. A field selector "
    "can be used to list only ResourceSlice objects belonging to a certain node.\n\nThis field "
    "can be used to limit access from nodes to ResourceSlices with the same node name. It also "
    "indicates to autoscalers that adding new nodes of the same type as some old node might "
    "also make new resources available.\n\nExactly one of NodeName, NodeSelector, AllNodes, "
    "and PerDeviceNodeSelection must be set. This field is immutable."
)
_SLICE_DRIVER_DESC = (
    "Driver identifies the DRA driver providing the capacity information. A field selector "
    "can be used to list only ResourceSlice objects with a certain driver name.\n\nMust be a "
    "DNS subdomain and should end with a DNS domain owned by the vendor of the driver. It "
    "should use only lower case characters. This field is immutable."
)
_POOL_NAME_DESC = (
    "Name is used to identify the pool. For node-local devices, this is often the node name, "
    "but this is not required. A field selector can be used to list only ResourceSlice "
    "objects belonging to a certain pool.\n\nIt must not be longer than 253 characters and "
    "must consist of one or more DNS sub-domains separated by slashes. This field is "
    "immutable."
)
# kubernetes v1.34 staging/src/k8s.io/api/core/v1/types.go, NodeStatus.Addresses (the
# Internal-IP and External-IP columns of pkg/printers/internalversion/printers.go)
_NODE_ADDRESSES = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More "
    "info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is "
    "declared as mergeable, but the merge key is not sufficiently unique, which can cause data "
    "corruption when it is merged. Callers should instead use a full-replacement patch. See "
    "https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change "
    "during the lifetime of a Node. However, there are some exceptions where this may not be "
    "possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP)."
)

# kubernetes v1.34 staging/src/k8s.io/api/core/v1/types.go, ConfigMap.Data
_CONFIGMAP_DATA_DESC = (
    "Data contains the configuration data. Each key must consist of alphanumeric characters, "
    "'-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The "
    "keys stored in Data must not overlap with the keys in the BinaryData field, this is "
    "enforced during validation process."
)

BUILTIN: dict[str, tuple[list[Column], Printer]] = {
    # kubernetes v1.34 pkg/printers/internalversion/printers.go AddHandlers
    "resourceslices": (
        [
            NAME,
            col("Node", desc=_SLICE_NODE_DESC),
            col("Driver", desc=_SLICE_DRIVER_DESC),
            col("Pool", desc=_POOL_NAME_DESC),
            AGE,
        ],
        print_resourceslice,
    ),
    "resourceclaims": (
        [
            NAME,
            col(
                "State",
                desc="A summary of the current state (allocated, pending, reserved, etc.).",
            ),
            AGE,
        ],
        print_resourceclaim,
    ),
    "resourceclaimtemplates": ([NAME, AGE], print_name_age),
    "configmaps": (
        [NAME, col("Data", desc=_CONFIGMAP_DATA_DESC), AGE],
        print_configmap,
    ),
    "deviceclasses": ([NAME, AGE], print_name_age),
    "nodes": (
        [
            NAME,
            col("Status", desc="The status of the node"),
            col("Roles", desc="The roles of the node"),
            AGE,
            col("Version", desc="Kubelet Version reported by the node."),
            col("Internal-IP", priority=1, desc=_NODE_ADDRESSES),
            col("External-IP", priority=1, desc=_NODE_ADDRESSES),
            col(
                "OS-Image",
                priority=1,
                desc="OS Image reported by the node from /etc/os-release (e.g. Debian "
                "GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                priority=1,
                desc="Kernel Version reported by the node from 'uname -r' (e.g. "
                "3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                priority=1,
                desc="ContainerRuntime Version reported by the node through runtime remote API "
                "(e.g. containerd://1.4.2).",
            ),
        ],
        print_node,
    ),
    "pods": (
        [
            NAME,
            col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."),
            col("Status", desc="The aggregate status of the containers in this pod."),
            col(
                "Restarts",
                desc="The number of times the containers in this pod have been restarted and "
                "when the last container in this pod has restarted.",
            ),
            AGE,
            col("IP", priority=1, desc="podIP address allocated to the pod."),
            col("Node", priority=1, desc="NodeName indicates in which node this pod is scheduled."),
            col("Nominated Node", priority=1, desc="nominatedNodeName of the pod."),
            col("Readiness Gates", priority=1, desc="Readiness gates of the pod."),
        ],
        print_pod,
    ),
    "events": (
        [
            col(
                "Last Seen",
                desc="The time at which the most recent occurrence of this event was recorded.",
            ),
            col("Type", desc="Type of this event (Normal, Warning)."),
            col("Reason", desc="The reason for the transition into the object's current status."),
            col("Object", desc="The object that this event is about."),
            col("Subobject", priority=1, desc="The field of the object the event is about."),
            col("Source", priority=1, desc="The component reporting this event."),
            col("Message", desc="A human-readable description of the status of this operation."),
            col("First Seen", priority=1, desc="The time at which the event was first recorded."),
            col("Count", priority=1, desc="The number of times this event has occurred."),
            col("Name", priority=1, fmt="name", desc=NAME_DESC),
        ],
        print_event,
    ),
    "namespaces": (
        [NAME, col("Status", desc="The status of the namespace"), AGE],
        print_namespace,
    ),
    "deployments": (
        [
            NAME,
            col("Ready", desc="Number of the pod with ready state"),
            col(
                "Up-to-date",
                desc=(
                    "Total number of non-terminated pods targeted by this deployment that "
                    "have the desired template spec."
                ),
            ),
            col(
                "Available",
                desc=(
                    "Total number of available pods (ready for at least minReadySeconds) "
                    "targeted by this deployment."
                ),
            ),
            AGE,
            col("Containers", priority=1, desc="Names of each container in the template."),
            col("Images", priority=1, desc="Images referenced by each container in the template."),
            col("Selector", priority=1, desc="Label selector for pods."),
        ],
        print_deployment,
    ),
    "replicasets": (
        [
            NAME,
            col("Desired", "integer", desc="Replicas is the number of desired replicas."),
            col(
                "Current",
                "integer",
                desc="Replicas is the most recently observed number of replicas.",
            ),
            col("Ready", "integer", desc="The number of ready replicas for this replica set."),
            AGE,
            col("Containers", priority=1, desc="Names of each container in the template."),
            col("Images", priority=1, desc="Images referenced by each container in the template."),
            col(
                "Selector",
                priority=1,
                desc="Selector is a label query over pods that should match the replica count.",
            ),
        ],
        print_replicaset,
    ),
    "daemonsets": (
        [
            NAME,
            col(
                "Desired",
                "integer",
                desc="The total number of nodes that should be running the daemon pod.",
            ),
            col(
                "Current",
                "integer",
                desc=(
                    "The number of nodes that are running at least 1 daemon pod and are "
                    "supposed to run the daemon pod."
                ),
            ),
            col(
                "Ready",
                "integer",
                desc=(
                    "The number of nodes that should be running the daemon pod and have one "
                    "or more of the daemon pod running and ready."
                ),
            ),
            col(
                "Up-to-date",
                "integer",
                desc="The total number of nodes that are running updated daemon pod",
            ),
            col(
                "Available",
                "integer",
                desc=(
                    "The number of nodes that should be running the daemon pod and have one "
                    "or more of the daemon pod running and available."
                ),
            ),
            col(
                "Node Selector",
                desc="NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
            col("Containers", priority=1, desc="Names of each container in the template."),
            col("Images", priority=1, desc="Images referenced by each container in the template."),
            col(
                "Selector",
                priority=1,
                desc="A label query over pods that are managed by the daemon set.",
            ),
        ],
        print_daemonset,
    ),
    "poddisruptionbudgets": (
        [
            NAME,
            col("Min Available", desc="The minimum number of pods that must be available."),
            col("Max Unavailable", desc="The maximum number of pods that may be unavailable."),
            col(
                "Allowed Disruptions",
                "integer",
                desc="Calculated number of pods that may be disrupted at this time.",
            ),
            AGE,
        ],
        print_pdb,
    ),
    "leases": (
        [
            NAME,
            col(
                "Holder",
                desc="holderIdentity contains the identity of the holder of a current lease.",
            ),
            AGE,
        ],
        print_lease,
    ),
    "customresourcedefinitions": (
        [NAME, col("Created At", fmt="date", desc=AGE_DESC)],
        print_crd,
    ),
}


# --------------------------------------------------------------------------- CRD columns

_FILTER = re.compile(
    r"""^\[\?\(@\.(?P<field>[A-Za-z0-9_.\\/-]+)\s*==\s*(?P<q>["'])(?P<value>.*?)(?P=q)\)\]"""
)
_INDEX = re.compile(r"^\[(?P<index>-?\d+|\*)\]")


class JsonPathError(ValueError):
    pass


def _split_fields(text: str) -> list[str]:
    """`.metadata.labels.karpenter\\.sh/nodepool` → metadata, labels, karpenter.sh/nodepool."""
    parts: list[str] = []
    cur = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur += text[i + 1]
            i += 2
            continue
        if ch == ".":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur)
    return [p for p in parts if p]


def compile_jsonpath(path: str) -> list[tuple[str, Any]]:
    """The simple JSONPath of printer columns: fields, `[n]`, `[*]`, `[?(@.a=="v")]`."""
    steps: list[tuple[str, Any]] = []
    rest = path.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    while rest:
        if rest.startswith("["):
            m = _FILTER.match(rest)
            if m:
                steps.append(("filter", (_split_fields(m["field"]), m["value"])))
                rest = rest[m.end() :]
                continue
            m = _INDEX.match(rest)
            if m:
                steps.append(("index", m["index"]))
                rest = rest[m.end() :]
                continue
            raise JsonPathError(f"unsupported JSONPath segment {rest!r}")
        if not rest.startswith("."):
            raise JsonPathError(f"JSONPath {path!r} must start with '.'")
        end = 1
        while end < len(rest) and rest[end] != "[":
            end += 2 if rest[end] == "\\" else 1
        steps.extend(("field", name) for name in _split_fields(rest[:end]))
        rest = rest[end:]
    return steps


def eval_jsonpath(steps: list[tuple[str, Any]], obj: Any) -> list[Any]:
    current = [obj]
    for kind, arg in steps:
        nxt: list[Any] = []
        for value in current:
            if kind == "field":
                if isinstance(value, dict) and arg in value:
                    nxt.append(value[arg])
            elif kind == "index":
                if isinstance(value, list):
                    if arg == "*":
                        nxt.extend(value)
                    elif -len(value) <= int(arg) < len(value):
                        nxt.append(value[int(arg)])
            else:
                fields, want = arg
                for item in value if isinstance(value, list) else []:
                    found: Any = item
                    for f in fields:
                        found = found.get(f) if isinstance(found, dict) else None
                    if found is not None and _text(found) == want:
                        nxt.append(item)
        current = nxt
    return current


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _cell(column_type: str, value: Any, now: float) -> Any:
    """apiextensions tableconvertor cellForJSONValue (strings print as JSONPath text)."""
    if value is None:
        return None
    if column_type == "string":
        return _text(value)
    if column_type == "integer":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        return None
    if column_type == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    if column_type == "date":
        if isinstance(value, str):
            at = parse_time(value)
            return "<invalid>" if at is None else human_duration(now - at)
        return None
    return None


def crd_columns(printer_columns: Iterable[JsonDict]) -> tuple[list[Column], list[Any]]:
    """Column definitions and compiled paths; a CRD without columns prints its age."""
    cols = list(printer_columns) or [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": AGE_DESC,
        }
    ]
    defs = [NAME]
    paths: list[Any] = []
    for c in cols:
        defs.append(
            col(
                str(c.get("name", "")),
                str(c.get("type", "string")),
                int(c.get("priority", 0) or 0),
                str(c.get("description", "")),
                str(c.get("format", "")),
            )
        )
        try:
            paths.append(compile_jsonpath(str(c.get("jsonPath", ""))))
        except JsonPathError:
            paths.append(None)
    return defs, paths


def crd_row(defs: list[Column], paths: list[Any], obj: JsonDict, now: float) -> list[Any]:
    cells: list[Any] = [meta_of(obj).get("name", "")]
    for definition, steps in zip(defs[1:], paths, strict=True):
        found = eval_jsonpath(steps, obj) if steps is not None else []
        cells.append(_cell(definition["type"], found[0], now) if found else None)
    return cells


# --------------------------------------------------------------------------- the Table


def partial_metadata(obj: JsonDict) -> JsonDict:
    meta = dict(meta_of(obj))
    meta.pop("managedFields", None)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}


def table(
    columns: list[Column] | None,
    rows: list[tuple[list[Any], JsonDict]],
    list_meta: JsonDict,
    include_object: str,
    full_object: Callable[[JsonDict], JsonDict],
) -> JsonDict:
    """A meta.k8s.io/v1 Table; `columns` None omits the definitions (later watch events)."""
    out_rows = []
    for cells, obj in rows:
        row: JsonDict = {"cells": cells}
        if include_object == "Object":
            row["object"] = full_object(obj)
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        out_rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": out_rows,
    }
