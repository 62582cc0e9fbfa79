"""The documents the API server serves besides resources: `/version` (EKS's, for the
scenario's Kubernetes release), discovery in both forms (`/api`, `/apis`, their groups and
versions, and the aggregated `APIGroupDiscoveryList`) and OpenAPI v3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mignurse.sim import discovery, openapi
from mignurse.sim.apiserver.errors import NOT_FOUND, ApiError

if TYPE_CHECKING:
    from mignurse.sim.apiserver.server import SimServer

JSON = "application/json"
SERVER_VERSION = {
    "major": "1",
    "minor": "32+",
    "gitVersion": "v1.32.3-eks-4096722",
    "gitCommit": "4096722e4e3cbd8b9c1b4e3a2d9a4f6e7b0a5c3d",
    "gitTreeState": "clean",
    "buildDate": "2025-03-25T19:35:47Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
# /version of the other control planes a scenario may name (`cluster.kubernetesVersion`):
# EKS's `<release>-eks-<build>` form; the patch releases are EKS's of early 2026, the build
# suffixes and dates ours.
SERVER_VERSIONS = {
    "1.32": SERVER_VERSION,
    "1.33": {
        **SERVER_VERSION,
        "minor": "33+",
        "gitVersion": "v1.33.10-eks-b7a4c5e",
        "gitCommit": "b7a4c5e9d1f2a3b4c5d6e7f8091a2b3c4d5e6f70",
        "buildDate": "2026-03-20T18:02:11Z",
        "goVersion": "go1.24.13",
    },
    "1.34": {
        **SERVER_VERSION,
        "minor": "34+",
        "gitVersion": "v1.34.6-eks-2c8e91a",
        "gitCommit": "2c8e91a4b6d3f5e7a9c1b3d5f7e9a1c3b5d7f9e1",
        "buildDate": "2026-03-24T17:41:09Z",
        "goVersion": "go1.24.13",
    },
}


def server_version(kubernetes_version: str) -> dict[str, str]:
    return SERVER_VERSIONS.get(kubernetes_version.strip().lstrip("v"), SERVER_VERSION)


def document(server: SimServer, parts: list[str], aggregated: str | None) -> tuple[Any, str] | None:
    """The document at a GET path and its media type; None when the path is not one.

    `aggregated` is the aggregated discovery version the Accept header asks for, if any.
    """
    served = server.served
    if parts == ["version"]:
        return server.version, JSON
    if parts in (["api"], ["apis"]) and aggregated in ("v2", "v2beta1"):
        doc = discovery.aggregated(served, parts == ["api"], aggregated)
        media = discovery.AGGREGATED_V2 if aggregated == "v2" else discovery.AGGREGATED_V2BETA1
        return doc, media
    if parts == ["api"]:
        versions = {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443"}
            ],
        }
        return versions, JSON
    if parts == ["api", "v1"]:
        return discovery.resource_list(served, "", "v1"), JSON
    pairs = discovery.group_versions(served)
    if parts == ["apis"]:
        return discovery.api_group_list(served), JSON
    if len(parts) == 2 and parts[0] == "apis":
        versions_of = discovery.versions_of(served, parts[1])
        if versions_of:
            return discovery.api_group(parts[1], versions_of), JSON
        raise ApiError(404, "NotFound", NOT_FOUND)
    if len(parts) == 3 and parts[0] == "apis":
        if (parts[1], parts[2]) in pairs:
            return discovery.resource_list(served, parts[1], parts[2]), JSON
        raise ApiError(404, "NotFound", NOT_FOUND)
    if parts[:2] == ["openapi", "v3"]:
        return _openapi(server, parts[2:], pairs), JSON
    return None


def _openapi(server: SimServer, rest: list[str], pairs: list[tuple[str, str]]) -> Any:
    """`/openapi/v3` (the index) or one group version's document under it."""
    if not rest:
        return openapi.index(server.served, pairs)
    if rest[:1] == ["api"] and len(rest) == 2:
        group, version = "", rest[1]
    elif rest[:1] == ["apis"] and len(rest) == 3:
        group, version = rest[1], rest[2]
    else:
        raise ApiError(404, "NotFound", NOT_FOUND)
    if (group, version) != ("", "v1") and (group, version) not in pairs:
        raise ApiError(404, "NotFound", NOT_FOUND)
    return openapi.group_document(server.served, server.sim.crds, group, version)
