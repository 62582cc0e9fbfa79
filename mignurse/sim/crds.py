"""Karpenter's published CRDs at the release a scenario names, as the simulator serves them.

The documents are aws/karpenter-provider-aws `pkg/apis/crds/*.yaml` (what the
`karpenter-crd` chart installs) at every release tag from v1.1.0, packed by
`scripts/sync-karpenter-crds.py` into karpenter-crds.json.xz with each tag's commit.
A scenario's `karpenter.version` picks its tag, or the newest older one when the simulator
was packed before that release.
"""

from __future__ import annotations

import copy
import json
import lzma
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from mignurse.sim.objects import stable_uuid

JsonDict = dict[str, Any]
PLURALS = ("nodepools", "nodeclaims", "ec2nodeclasses")


@dataclass(frozen=True)
class CrdSet:
    tag: str
    commit: str
    repo: str
    documents: dict[str, JsonDict]  # plural → the CRD as published

    def version(self, plural: str, name: str = "v1") -> JsonDict:
        for v in self.documents[plural]["spec"]["versions"]:
            if v.get("name") == name:
                return dict(v)
        raise KeyError(f"{plural} has no version {name}")

    def schema(self, plural: str) -> JsonDict:
        return dict(self.version(plural)["schema"]["openAPIV3Schema"])

    def printer_columns(self, plural: str) -> list[JsonDict]:
        return list(self.version(plural).get("additionalPrinterColumns") or [])

    def served_object(self, plural: str, created: str, resource_version: str) -> JsonDict:
        """The CRD as `kubectl get crd NAME -o yaml` shows it on a cluster."""
        doc = copy.deepcopy(self.documents[plural])
        doc.pop("apiVersion", None)
        doc.pop("kind", None)
        name = doc["metadata"]["name"]
        spec = doc["spec"]
        meta = {
            **doc["metadata"],
            "uid": stable_uuid("crd", name),
            "resourceVersion": resource_version,
            "generation": 1,
            "creationTimestamp": created,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
        }
        meta["annotations"] = {
            **(doc["metadata"].get("annotations") or {}),
            "meta.helm.sh/release-name": "karpenter-crd",
            "meta.helm.sh/release-namespace": "kube-system",
        }
        spec.setdefault("conversion", {"strategy": "None"})
        return {
            "metadata": meta,
            "spec": spec,
            "status": {
                "acceptedNames": {
                    k: v
                    for k, v in spec["names"].items()
                    if k in ("kind", "listKind", "plural", "singular", "shortNames", "categories")
                },
                "conditions": established(created),
                "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
            },
        }


@cache
def established(created: str) -> list[JsonDict]:
    """The conditions the apiextensions API server sets on a CRD it serves: its names
    accepted, then established (k8s.io/apiextensions-apiserver pkg/controller/establish and
    status)."""
    return [
        {
            "type": "NamesAccepted",
            "status": "True",
            "lastTransitionTime": created,
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": created,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]


def _packed() -> JsonDict:
    data = resources.files("mignurse.sim").joinpath("karpenter-crds.json.xz").read_bytes()
    packed: JsonDict = json.loads(lzma.decompress(data))
    return packed


def _key(tag: str) -> tuple[int, ...]:
    return tuple(int(x) for x in tag.lstrip("v").split("."))


@cache
def for_version(version: str) -> CrdSet:
    """The CRDs of the Karpenter release `version` (e.g. "1.4.0")."""
    packed = _packed()
    tags = sorted(packed["tags"], key=_key)
    want = _key(version)
    chosen = tags[0]
    for tag in tags:
        if _key(tag) <= want:
            chosen = tag
    entry = packed["tags"][chosen]
    docs = {plural: packed["documents"][key] for plural, key in entry["crds"].items()}
    return CrdSet(chosen, entry["commit"], packed["repo"], docs)


_ALIASES = {"al2023": "al2023", "al2": "al2", "bottlerocket": "bottlerocket"}


def ec2nodeclass(scenario: Any, name: str, created: str) -> JsonDict:
    """An EC2NodeClass as `karpenter.k8s.aws/v1` serves it for a NodePool's nodeClassRef."""
    cluster = scenario.cluster_name
    oses = sorted(
        {p.os for p in scenario.pools if p.kind == "nodepool" and p.nodeclass == name} or {"al2023"}
    )
    family = next((_ALIASES[o] for o in oses if o in _ALIASES), "al2023")
    discovery_tag = {"karpenter.sh/discovery": cluster}
    return {
        "metadata": {
            "name": name,
            "uid": stable_uuid("ec2nodeclass", cluster, name),
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": created,
            "finalizers": ["karpenter.k8s.aws/termination"],
            "annotations": {
                "karpenter.k8s.aws/ec2nodeclass-hash": stable_uuid("nc", name)[:18].replace(
                    "-", ""
                ),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
            },
        },
        "spec": {
            "amiSelectorTerms": [{"alias": f"{family}@latest"}],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "role": f"KarpenterNodeRole-{cluster}",
            "securityGroupSelectorTerms": [{"tags": discovery_tag}],
            "subnetSelectorTerms": [{"tags": discovery_tag}],
            "tags": {"karpenter.sh/discovery": cluster},
        },
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "reason": t,
                    "message": "",
                    "lastTransitionTime": created,
                    "observedGeneration": 1,
                }
                for t in (
                    "AMIsReady",
                    "SubnetsReady",
                    "SecurityGroupsReady",
                    "InstanceProfileReady",
                    "ValidationSucceeded",
                    "Ready",
                )
            ],
            "instanceProfile": cluster + "_" + stable_uuid("profile", cluster, name)[:18],
        },
    }
