"""The NVIDIA GPU operator's configuration in a simulated cluster: its ClusterPolicy type,
served only where a scenario gives a ClusterPolicy (as on a cluster with the operator
installed; elsewhere a list of them is 404), and the mig-parted file mig-manager reads for
each node, which the simulated nodes' MIG layouts follow.

Shapes (NVIDIA/gpu-operator v26.7.0):
- deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml: the CRD (nvidia.com/v1
  ClusterPolicy, cluster-scoped, a status subresource, printer columns Status
  `.status.state` and Age `.metadata.creationTimestamp`, both of type string); its schema is
  cut here to the fields the product reads, the rest of `spec` kept open;
- api/nvidia/v1/clusterpolicy_types.go: `spec.migManager.config.name`, `status.namespace`,
  `status.state` (ignored | ready | notReady).

Which file a node's mig-manager reads is `mignurse.gpu.clusterconfig.for_node` over the
scenario's ConfigMaps, for the scenario's first ClusterPolicy; where that file cannot be read
(`ConfigUnreadable`), or the scenario has no ClusterPolicy, NVIDIA's built-in file, as
before. The objects are read only, so each node's file is resolved once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mignurse.gpu import clusterconfig
from mignurse.gpu.catalogue import Configs
from mignurse.gpu.models import model_named
from mignurse.gpu.profiles import standard_layouts
from mignurse.sim.crds import established
from mignurse.sim.objects import stable_uuid

if TYPE_CHECKING:
    from mignurse.sim.hardware import GpuModel

JsonDict = dict[str, Any]
Layouts = Mapping[str, dict[str, int]]  # config → MIG devices per GPU
PLURAL = "clusterpolicies"
GROUP = "nvidia.com"
VERSION = "v1"
KIND = "ClusterPolicy"
CRD_NAME = f"{PLURAL}.{GROUP}"
# the CRD's additionalPrinterColumns (clusterpolicy_types.go kubebuilder:printcolumn)
PRINTER_COLUMNS: tuple[JsonDict, ...] = (
    {"jsonPath": ".status.state", "name": "Status", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "string"},
)
_STATE_DESC = "State indicates status of ClusterPolicy"


def schema() -> JsonDict:
    """The v1 openAPIV3Schema, cut: `spec` open, `status` as the CRD has it."""
    return {
        "description": "ClusterPolicy is the Schema for the clusterpolicies API",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "description": "ClusterPolicySpec defines the desired state of ClusterPolicy",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "status": {
                "description": "ClusterPolicyStatus defines the observed state of ClusterPolicy",
                "type": "object",
                "properties": {
                    "conditions": {
                        "type": "array",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                    "namespace": {
                        "description": "Namespace indicates a namespace in which the operator "
                        "is installed",
                        "type": "string",
                    },
                    "state": {
                        "description": _STATE_DESC,
                        "enum": ["ignored", "ready", "notReady"],
                        "type": "string",
                    },
                },
                "required": ["state"],
            },
        },
    }


def served_crd(created: str, namespace: str) -> JsonDict:
    """The CRD as the operator's Helm chart installs it into `namespace`, as `kubectl get crd
    clusterpolicies.nvidia.com -o yaml` shows it."""
    names = {
        "kind": KIND,
        "listKind": f"{KIND}List",
        "plural": PLURAL,
        "singular": "clusterpolicy",
    }
    spec: JsonDict = {
        "group": GROUP,
        "names": names,
        "scope": "Cluster",
        "versions": [
            {
                "additionalPrinterColumns": [dict(c) for c in PRINTER_COLUMNS],
                "name": VERSION,
                "schema": {"openAPIV3Schema": schema()},
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
            }
        ],
        "conversion": {"strategy": "None"},
    }
    return {
        "metadata": {
            "name": CRD_NAME,
            "uid": stable_uuid("crd", CRD_NAME),
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": created,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "controller-gen.kubebuilder.io/version": "v0.21.0",
                "meta.helm.sh/release-name": "gpu-operator",
                "meta.helm.sh/release-namespace": namespace,
            },
        },
        "spec": spec,
        "status": {
            "acceptedNames": dict(names),
            "conditions": established(created),
            "storedVersions": [VERSION],
        },
    }


def as_stored(manifest: JsonDict, plural: str, created: str) -> JsonDict:
    """A scenario's manifest as the API server keeps it: what the server sets (uid,
    creationTimestamp, a custom resource's generation) added where the manifest lacks it."""
    obj = copy.deepcopy(manifest)
    obj.pop("apiVersion", None)
    obj.pop("kind", None)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("uid", stable_uuid(plural, meta.get("namespace", ""), meta["name"]))
    meta.setdefault("creationTimestamp", created)
    if plural == PLURAL:
        meta.setdefault("generation", 1)
    return obj


class MigFiles:
    """The mig-parted file each node's mig-manager reads, as layouts per GPU model.

    `layouts` is None (NVIDIA's built-in file: `GpuModel.mig_layouts`) for every node of a
    scenario without a ClusterPolicy, at the cost of one test; otherwise each node's file is
    resolved once and each file's layouts made once per GPU model."""

    def __init__(
        self, cluster_policies: tuple[JsonDict, ...], configmaps: tuple[JsonDict, ...]
    ) -> None:
        self._policy: JsonDict | None = cluster_policies[0] if cluster_policies else None
        self._configmaps = {
            (str(cm["metadata"]["namespace"]), str(cm["metadata"]["name"])): cm for cm in configmaps
        }
        self._files: dict[str | None, Configs | None] = {}  # by the ConfigMap read; None: built in
        self._layouts: dict[tuple[str | None, str], Layouts] = {}

    @property
    def operator(self) -> bool:
        """Whether the scenario runs the GPU operator's ClusterPolicy."""
        return self._policy is not None

    def _read(self, namespace: str, name: str) -> JsonDict | None:
        return self._configmaps.get((namespace, name))

    def _source(self, node: str) -> str | None:
        """The ConfigMap (namespace/name) for_node reads for this node first; None where it
        reads none (none there, or a ClusterPolicy that names none it could read)."""
        try:
            found = clusterconfig.wanted(self._policy, node)
        except clusterconfig.ConfigUnreadable:
            return None
        if found is None:
            return None
        namespace, names = found
        return next((f"{namespace}/{n}" for n in names if (namespace, n) in self._configmaps), None)

    def _configs(self, node: str) -> tuple[str | None, Configs | None]:
        source = self._source(node)
        if source not in self._files:
            try:
                configs = clusterconfig.for_node(self._policy, node, self._read).configs
            except clusterconfig.ConfigUnreadable:
                configs = None
            self._files[source] = configs
        return source, self._files[source]

    def layouts(
        self, gpu: GpuModel | None, node: str | None = None, config: str | None = None
    ) -> Layouts | None:
        """config → MIG devices per GPU for a node (None: a node of the pool with no file of
        its own, as a node template is) in the file its mig-manager reads; None for NVIDIA's
        built-in file. A node whose own file (`<node>-mig-config`) lacks `config` gets the
        pool's, which the scenario's pools were checked against."""
        if self._policy is None or gpu is None or not gpu.catalogue_model:
            return None
        pool = self._of(gpu, *self._configs(""))
        if node is None:
            return pool
        found = self._of(gpu, *self._configs(node))
        if config and config != "all-disabled" and found is not None and config not in found:
            return pool
        return found

    def _of(self, gpu: GpuModel, source: str | None, configs: Configs | None) -> Layouts | None:
        if configs is None:
            return None
        key = (source, gpu.catalogue_model)
        if key not in self._layouts:
            model = model_named(gpu.catalogue_model)
            self._layouts[key] = standard_layouts(model, configs=configs) if model else {}
        return self._layouts[key]
