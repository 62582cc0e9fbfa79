"""What the simulated API server serves, and its discovery documents.

Both forms kubectl 1.32 reads: the aggregated discovery of `/api` and `/apis`
(`apidiscovery.k8s.io/v2` APIGroupDiscoveryList, asked for first) and the legacy
APIVersions / APIGroupList / APIResourceList per group version. Subresources that answer in
another group say so (`pods/eviction` is `policy/v1` Eviction): kubectl drain looks for it
and falls back to DELETE, ignoring PodDisruptionBudgets, when it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mignurse.sim.crds import CrdSet
from mignurse.sim.store import RESOURCES, ResourceType

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
    "poddisruptionbudgets": ("get", "list", "watch"),
    "replicasets": ("get", "list", "watch"),
    "leases": ("get", "list", "watch"),
    "nodeclaims": ("delete", "get", "list", "patch", "update", "watch"),
    "nodepools": ("get", "list", "patch", "update", "watch"),
    "ec2nodeclasses": ("get", "list", "patch", "update", "watch"),
    "customresourcedefinitions": ("get", "list", "watch"),
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


def catalogue(karpenter: CrdSet | None) -> dict[tuple[str, str], Served]:
    """(group, plural) → what is served for a cluster with or without Karpenter."""
    out: dict[tuple[str, str], Served] = {}
    for plural, rtype in RESOURCES.items():
        if plural in KARPENTER_PLURALS or plural == "customresourcedefinitions":
            continue
        verbs = _VERBS.get(plural, tuple(v for v in rtype.verbs if v != "create"))
        subs = []
        if "eviction" in rtype.subresources:
            subs.append(Sub("eviction", "Eviction", "policy", "v1", ("create",)))
        if "status" in rtype.subresources:
            subs.append(Sub("status", rtype.kind, rtype.group, rtype.version, _STATUS))
        out[(rtype.group, plural)] = Served(
            rtype, verbs, "store", _CATEGORIES.get(plural, ()), tuple(subs)
        )
    for plural, rtype in _EXTRA.items():
        if plural not in RESOURCES:
            out[(rtype.group, plural)] = Served(
                rtype, ("get", "list"), "derived", _CATEGORIES.get(plural, ())
            )
    for rtype in REVIEWS.values():
        out[(rtype.group, rtype.plural)] = Served(rtype, ("create",), "review")
    crd_type = RESOURCES["customresourcedefinitions"]
    out[(crd_type.group, crd_type.plural)] = Served(
        crd_type,
        _VERBS["customresourcedefinitions"],
        "store",
        (),
        (Sub("status", crd_type.kind, crd_type.group, crd_type.version, ("get",)),),
    )
    if karpenter is not None:
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
            out[(rtype.group, plural)] = Served(
                rtype, _VERBS[plural], "store", tuple(names.get("categories") or ()), tuple(subs)
            )
    return out


def group_versions(served: dict[tuple[str, str], Served]) -> list[tuple[str, str]]:
    """Groups in the order kube-apiserver lists them (core first, then by priority)."""
    order = [
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "policy",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "karpenter.k8s.aws",
        "karpenter.sh",
    ]
    groups = {s.group: s.rtype.version for s in served.values() if s.group}
    return [(g, groups[g]) for g in order if g in groups]


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


def resource_list(served: dict[tuple[str, str], Served], group: str, version: str) -> JsonDict:
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


def api_group(group: str, version: str) -> JsonDict:
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [gv],
        "preferredVersion": gv,
    }


def api_group_list(served: dict[tuple[str, str], Served]) -> JsonDict:
    groups = []
    for group, version in group_versions(served):
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


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


def aggregated(served: dict[tuple[str, str], Served], core: bool, api_version: str) -> JsonDict:
    """The APIGroupDiscoveryList of /api (core) or /apis (every named group)."""
    items = []
    pairs = [("", "v1")] if core else group_versions(served)
    for group, version in pairs:
        resources = [
            _aggregated_resource(s)
            for s in served.values()
            if s.group == group and s.rtype.version == version
        ]
        meta: JsonDict = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append(
            {
                "metadata": meta,
                "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": items,
    }
