"""What the simulated API server serves, and its discovery documents.

Both forms kubectl 1.32 reads: the aggregated discovery of `/api` and `/apis`
(`apidiscovery.k8s.io/v2` APIGroupDiscoveryList, asked for first) and the legacy
APIVersions / APIGroupList / APIResourceList per group version. Subresources that answer in
another group say so (`pods/eviction` is `policy/v1` Eviction): kubectl drain looks for it
and falls back to DELETE, ignoring PodDisruptionBudgets, when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mignurse.sim import resourceapi
from mignurse.sim.crds import CrdSet
from mignurse.sim.resources import RESOURCES, ResourceType

JsonDict = dict[str, Any]
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


@dataclass(frozen=True)
class Sub:
    name: str
    kind: str
    group: str
    version: str
    verbs: tuple[str, ...]


@dataclass(frozen=True)
class Served:
    rtype: ResourceType
    verbs: tuple[str, ...]
    source: str  # "store" | "derived" | "review"
    categories: tuple[str, ...] = ()
    subresources: tuple[Sub, ...] = field(default=())
    # stored bytes → this version's bytes, for a version other than the stored one
    convert: Callable[[bytes], bytes] | None = field(default=None, compare=False)

    @property
    def plural(self) -> str:
        return self.rtype.plural

    @property
    def group(self) -> str:
        return self.rtype.group


_STATUS = ("get", "patch", "update")
# What the simulator answers, verb by verb (a verb it does not serve is not advertised).
_VERBS: dict[str, tuple[str, ...]] = {
    "nodes": ("delete", "get", "list", "patch", "update", "watch"),
    "pods": ("delete", "get", "list", "patch", "update", "watch"),
    "events": ("get", "list", "patch", "update", "watch"),
    "namespaces": ("get", "list", "patch", "update", "watch"),
    "deployments": ("get", "list", "patch", "update", "watch"),
    "poddisruptionbudgets": ("create", "delete", "get", "list", "patch", "update", "watch"),
    "replicasets": ("get", "list", "watch"),
    "leases": ("get", "list", "watch"),
    "nodeclaims": ("delete", "get", "list", "patch", "update", "watch"),
    "nodepools": ("create", "get", "list", "patch", "update", "watch"),
    "ec2nodeclasses": ("get", "list", "patch", "update", "watch"),
    "customresourcedefinitions": ("get", "list", "watch"),
    "configmaps": ("get", "list", "watch"),
    "clusterpolicies": ("get", "list", "watch"),
    "nodediagnostics": ("create", "delete", "get", "list", "patch", "update", "watch"),
}
_CATEGORIES = {
    "pods": ("all",),
    "deployments": ("all",),
    "replicasets": ("all",),
    "daemonsets": ("all",),
}
# served as views of their pods while the store does not keep them
_EXTRA = {
    "daemonsets": ResourceType(
        "daemonsets",
        "DaemonSet",
        "apps",
        "v1",
        True,
        ("get", "list"),
        ("ds",),
        (),
        ("status",),
        "daemonset",
    ),
}
REVIEWS = {
    "selfsubjectaccessreviews": ResourceType(
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        "authorization.k8s.io",
        "v1",
        False,
        ("create",),
        singular="selfsubjectaccessreview",
    ),
    "selfsubjectreviews": ResourceType(
        "selfsubjectreviews",
        "SelfSubjectReview",
        "authentication.k8s.io",
        "v1",
        False,
        ("create",),
        singular="selfsubjectreview",
    ),
}
KARPENTER_PLURALS = ("nodeclaims", "nodepools", "ec2nodeclasses")


Catalogue = dict[tuple[str, str, str], Served]  # (group, version, plural) → what is served


def _add_stored(out: Catalogue, plural: str, status_verbs: tuple[str, ...]) -> None:
    """A resource the store keeps, with its status subresource and that subresource's verbs."""
    rtype = RESOURCES[plural]
    out[(rtype.group, rtype.version, rtype.plural)] = Served(
        rtype,
        _VERBS[plural],
        "store",
        (),
        (Sub("status", rtype.kind, rtype.group, rtype.version, status_verbs),),
    )


def catalogue(
    karpenter: CrdSet | None,
    resource_versions: tuple[str, ...] = (),
    *,
    node_diagnostics: bool = False,
    cluster_policies: bool = False,
) -> Catalogue:
    """What is served for a cluster with or without Karpenter, with the `resource.k8s.io`
    versions its control plane turns on, with or without the node monitoring agent's
    NodeDiagnostic CRD, and with or without the GPU operator's ClusterPolicy CRD."""
    out: Catalogue = {}
    _add_built_in(out)
    _add_resource_api(out, resource_versions)
    _add_stored(out, "customresourcedefinitions", ("get",))
    if karpenter is not None:
        _add_karpenter(out, karpenter)
    if node_diagnostics:
        _add_stored(out, "nodediagnostics", _STATUS)
    if cluster_policies:
        _add_stored(out, "clusterpolicies", ("get",))
    return out


def _add_built_in(out: Catalogue) -> None:
    """The built-in kinds the store serves, those derived on read, and the reviews."""
    for plural, rtype in RESOURCES.items():
        if (
            plural in KARPENTER_PLURALS
            or plural in ("customresourcedefinitions", "nodediagnostics", "clusterpolicies")
            or rtype.group == resourceapi.GROUP
        ):
            continue
        verbs = _VERBS.get(plural, tuple(v for v in rtype.verbs if v != "create"))
        subs = []
        if "eviction" in rtype.subresources:
            subs.append(Sub("eviction", "Eviction", "policy", "v1", ("create",)))
        if "status" in rtype.subresources:
            subs.append(Sub("status", rtype.kind, rtype.group, rtype.version, _STATUS))
        out[(rtype.group, rtype.version, plural)] = Served(
            rtype, verbs, "store", _CATEGORIES.get(plural, ()), tuple(subs)
        )
    for plural, rtype in _EXTRA.items():
        if plural not in RESOURCES:
            out[(rtype.group, rtype.version, plural)] = Served(
                rtype, ("get", "list"), "derived", _CATEGORIES.get(plural, ())
            )
    for rtype in REVIEWS.values():
        out[(rtype.group, rtype.version, rtype.plural)] = Served(rtype, ("create",), "review")


def _add_resource_api(out: Catalogue, resource_versions: tuple[str, ...]) -> None:
    """`resource.k8s.io` at each version turned on, every one converted from the stored form."""
    for resource_version in resourceapi.ordered(resource_versions):
        for plural in resourceapi.PLURALS:
            stored = RESOURCES[plural]
            rtype = ResourceType(
                stored.plural,
                stored.kind,
                stored.group,
                resource_version,
                stored.namespaced,
                stored.verbs,
                stored.short_names,
                stored.fields,
                stored.subresources,
                stored.singular,
            )
            status_subs = tuple(
                Sub(name, rtype.kind, rtype.group, resource_version, ("get",))
                for name in rtype.subresources
            )
            out[(rtype.group, resource_version, plural)] = Served(
                rtype,
                ("get", "list", "watch"),
                "store",
                subresources=status_subs,
                convert=resourceapi.converter(plural, resource_version),
            )


def _add_karpenter(out: Catalogue, karpenter: CrdSet) -> None:
    """Karpenter's kinds with the short names, categories and subresources its CRDs give."""
    for plural in KARPENTER_PLURALS:
        rtype = RESOURCES[plural]
        names = karpenter.documents[plural]["spec"]["names"]
        version = karpenter.version(plural)
        rtype = ResourceType(
            rtype.plural,
            rtype.kind,
            rtype.group,
            rtype.version,
            rtype.namespaced,
            rtype.verbs,
            tuple(names.get("shortNames") or ()),
            rtype.fields,
            rtype.subresources,
            rtype.singular,
        )
        subs = [
            Sub(
                name,
                rtype.kind if name == "status" else "Scale",
                rtype.group if name == "status" else "autoscaling",
                "v1",
                _STATUS,
            )
            for name in (version.get("subresources") or {})
        ]
        out[(rtype.group, rtype.version, plural)] = Served(
            rtype, _VERBS[plural], "store", tuple(names.get("categories") or ()), tuple(subs)
        )


def group_versions(served: Catalogue) -> list[tuple[str, str]]:
    """(group, version) in the order kube-apiserver lists them: groups by priority, each
    group's versions most preferred first."""
    order = [
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "policy",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        resourceapi.GROUP,
        "eks.amazonaws.com",  # custom resources' groups follow, by name
        "karpenter.k8s.aws",
        "karpenter.sh",
        "nvidia.com",
    ]
    versions: dict[str, set[str]] = {}
    for s in served.values():
        if s.group:
            versions.setdefault(s.group, set()).add(s.rtype.version)
    pairs = []
    for group in order:
        found = versions.get(group, set())
        ranked = [v for v in resourceapi.PRIORITY if v in found] + sorted(
            found - set(resourceapi.PRIORITY)
        )
        pairs += [(group, v) for v in ranked]
    return pairs


def versions_of(served: Catalogue, group: str) -> list[str]:
    return [v for g, v in group_versions(served) if g == group]


def _legacy_resource(s: Served) -> list[JsonDict]:
    r = s.rtype
    entry: JsonDict = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(s.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if s.categories:
        entry["categories"] = list(s.categories)
    out = [entry]
    for sub in s.subresources:
        item: JsonDict = {
            "name": f"{r.plural}/{sub.name}",
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": sub.kind,
            "verbs": list(sub.verbs),
        }
        if (sub.group, sub.version) != (r.group, r.version):
            item["group"] = sub.group
            item["version"] = sub.version
        out.append(item)
    return out


def resource_list(served: Catalogue, group: str, version: str) -> JsonDict:
    resources: list[JsonDict] = []
    for s in served.values():
        if s.group == group and s.rtype.version == version:
            resources += _legacy_resource(s)
    doc: JsonDict = {
        "kind": "APIResourceList",
        "groupVersion": f"{group}/{version}" if group else version,
    }
    if group:
        doc["apiVersion"] = "v1"
    doc["resources"] = resources
    return doc


def _group_entry(group: str, versions: list[str]) -> JsonDict:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group(group: str, versions: list[str]) -> JsonDict:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def api_group_list(served: Catalogue) -> JsonDict:
    groups: dict[str, list[str]] = {}
    for group, version in group_versions(served):
        groups.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(g, vs) for g, vs in groups.items()],
    }


def _aggregated_resource(s: Served) -> JsonDict:
    r = s.rtype
    entry: JsonDict = {
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": "Namespaced" if r.namespaced else "Cluster",
        "singularResource": r.singular,
        "verbs": list(s.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if s.categories:
        entry["categories"] = list(s.categories)
    if s.subresources:
        entry["subresources"] = [
            {
                "subresource": sub.name,
                "responseKind": {"group": sub.group, "version": sub.version, "kind": sub.kind},
                "verbs": list(sub.verbs),
            }
            for sub in s.subresources
        ]
    return entry


def aggregated(served: Catalogue, core: bool, api_version: str) -> JsonDict:
    """The APIGroupDiscoveryList of /api (core) or /apis (every named group, each with its
    versions most preferred first)."""
    groups: dict[str, list[str]] = {}
    for group, version in [("", "v1")] if core else group_versions(served):
        groups.setdefault(group, []).append(version)
    items = []
    for group, versions in groups.items():
        entries = []
        for version in versions:
            resources = [
                _aggregated_resource(s)
                for s in served.values()
                if s.group == group and s.rtype.version == version
            ]
            entries.append({"version": version, "resources": resources, "freshness": "Current"})
        meta: JsonDict = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": items,
    }
