"""The resources the simulated API server serves: each one's kind, group, version, scope,
verbs, short names, selectable fields and subresources (`ResourceType`), in one table
(`RESOURCES`) that the store, discovery and the HTTP front all read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()  # selectable fields beyond metadata.name / metadata.namespace
    subresources: tuple[str, ...] = ()
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How RBAC messages name it: `nodes`, `nodeclaims.karpenter.sh`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def field_names(self) -> tuple[str, ...]:
        return ("metadata.name", "metadata.namespace", *self.fields)

    def kind_header(self) -> bytes:
        return f'"kind":"{self.kind}","apiVersion":"{self.api_version}",'.encode()


_READ = ("get", "list", "watch")
_RW = ("delete", "get", "list", "patch", "update", "watch")

RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in (
        ResourceType(
            "nodes",
            "Node",
            "",
            "v1",
            False,
            _RW,
            ("no",),
            ("spec.unschedulable",),
            ("status",),
            "node",
        ),
        ResourceType(
            "pods",
            "Pod",
            "",
            "v1",
            True,
            ("create", *_RW),
            ("po",),
            (
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ),
            ("eviction", "status"),
            "pod",
        ),
        ResourceType(
            "events",
            "Event",
            "",
            "v1",
            True,
            ("create", *_RW),
            ("ev",),
            (
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ),
            (),
            "event",
        ),
        ResourceType(
            "namespaces",
            "Namespace",
            "",
            "v1",
            False,
            (*_READ, "patch"),  # patch: runbook locks of `target: cluster` live on kube-system
            ("ns",),
            ("status.phase",),
            (),
            "namespace",
        ),
        # served as the scenario writes them (`configMaps`), read only
        ResourceType(
            "configmaps",
            "ConfigMap",
            "",
            "v1",
            True,
            _READ,
            ("cm",),
            (),
            (),
            "configmap",
        ),
        ResourceType(
            "deployments",
            "Deployment",
            "apps",
            "v1",
            True,
            _RW,
            ("deploy",),
            (),
            ("status", "scale"),
            "deployment",
        ),
        ResourceType(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            "policy",
            "v1",
            True,
            ("create", *_RW),
            ("pdb",),
            (),
            ("status",),
            "poddisruptionbudget",
        ),
        ResourceType(
            "replicasets",
            "ReplicaSet",
            "apps",
            "v1",
            True,
            _READ,
            ("rs",),
            (),
            ("status", "scale"),
            "replicaset",
        ),
        ResourceType(
            "leases",
            "Lease",
            "coordination.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            (),
            "lease",
        ),
        ResourceType(
            "nodeclaims",
            "NodeClaim",
            "karpenter.sh",
            "v1",
            False,
            _RW,
            (),
            (),
            ("status",),
            "nodeclaim",
        ),
        ResourceType(
            "nodepools",
            "NodePool",
            "karpenter.sh",
            "v1",
            False,
            _RW,
            (),
            (),
            ("status",),
            "nodepool",
        ),
        ResourceType(
            "ec2nodeclasses",
            "EC2NodeClass",
            "karpenter.k8s.aws",
            "v1",
            False,
            ("get", "list", "patch", "update", "watch"),
            ("ec2nc", "ec2ncs"),
            (),
            ("status",),
            "ec2nodeclass",
        ),
        # resource.k8s.io, kept as v1 (the storage version from Kubernetes 1.34); other
        # versions are served converted (mignurse.sim.resourceapi).
        ResourceType(
            "resourceslices",
            "ResourceSlice",
            "resource.k8s.io",
            "v1",
            False,
            _READ,
            (),
            # kubernetes v1.34 pkg/registry/resource/resourceslice/strategy.go toSelectableFields
            ("spec.nodeName", "spec.driver"),
            (),
            "resourceslice",
        ),
        ResourceType(
            "resourceclaims",
            "ResourceClaim",
            "resource.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            ("status",),
            "resourceclaim",
        ),
        ResourceType(
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            "resource.k8s.io",
            "v1",
            True,
            _READ,
            (),
            (),
            (),
            "resourceclaimtemplate",
        ),
        ResourceType(
            "deviceclasses",
            "DeviceClass",
            "resource.k8s.io",
            "v1",
            False,
            _READ,
            (),
            (),
            (),
            "deviceclass",
        ),
        # the EKS node monitoring agent's (aws/eks-node-monitoring-agent v1.7.0
        # api/v1alpha1/nodediagnostic.go): served only where the agent's CRD is installed
        ResourceType(
            "nodediagnostics",
            "NodeDiagnostic",
            "eks.amazonaws.com",
            "v1alpha1",
            False,
            ("create", *_RW),
            (),
            (),
            ("status",),
            "nodediagnostic",
        ),
        # the NVIDIA GPU operator's (NVIDIA/gpu-operator v26.7.0 api/nvidia/v1
        # clusterpolicy_types.go): served, read only, only where the scenario gives a
        # ClusterPolicy (`clusterPolicies`; mignurse.sim.operator_config)
        ResourceType(
            "clusterpolicies",
            "ClusterPolicy",
            "nvidia.com",
            "v1",
            False,
            _READ,
            (),
            (),
            ("status",),
            "clusterpolicy",
        ),
        ResourceType(
            "customresourcedefinitions",
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            "v1",
            False,
            _READ,
            ("crd", "crds"),
            (),
            ("status",),
            "customresourcedefinition",
        ),
    )
}
