"""Managed node groups' repair settings through the EKS API (`describe-nodegroup`).

Read-only, best effort: a cluster without AWS credentials at hand still gets a diagnosis and a
bundle; what could not be read is one line saying why. The documents are kept as the API
returns them (`.nodegroup`), so `cluster/nodegroups.json` reads like the aws CLI's output.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

# EKS ARNs: arn:aws:eks:<region>:<account>:cluster/<name> (the context's cluster for
# `aws eks update-kubeconfig`).
_ARN_PARTS = 6


def cluster_from_context(cluster: str) -> tuple[str, str]:
    """(cluster name, region) from a kubeconfig cluster entry; region "" when not an ARN."""
    if cluster.startswith("arn:") and "cluster/" in cluster:
        parts = cluster.split(":", _ARN_PARTS - 1)
        region = parts[3] if len(parts) >= _ARN_PARTS else ""
        return cluster.rsplit("cluster/", 1)[1], region
    return cluster, ""


def eks_client(profile: str | None, region: str | None) -> tuple[Any | None, str]:
    """An EKS client as the aws CLI would build it, or None and why not."""
    import boto3
    import botocore.exceptions
    from botocore.config import Config

    try:
        session = boto3.Session(profile_name=profile, region_name=region or None)
    except botocore.exceptions.ProfileNotFound as exc:
        return None, f"{exc}"
    if session.region_name is None:
        return None, "no AWS region (--region, AWS_REGION, or an EKS ARN context)"
    if session.get_credentials() is None:
        return None, "no AWS credentials (--profile, AWS_PROFILE or the environment)"
    config = Config(
        retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=10
    )
    return session.client("eks", config=config), ""


def describe_nodegroups(
    eks: Any, cluster: str, groups: Iterable[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """`describe-nodegroup` of each group: the `.nodegroup` documents, and one line per group
    that could not be read."""
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    for group in sorted(set(groups)):
        try:
            answer = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)
        except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
            problems.append(f"node group {group} of cluster {cluster}: {_aws_error(exc)}")
            continue
        found.append(_jsonable(answer.get("nodegroup") or {}))
    return found, problems


def _aws_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping) and isinstance(response.get("Error"), Mapping):
        error = response["Error"]
        return f"{error.get('Code') or 'error'}: {error.get('Message') or ''}".rstrip(": ")
    return " ".join(str(exc).split()) or type(exc).__name__


def _jsonable(value: Any) -> Any:
    """boto3 answers carry datetimes; the aws CLI prints them as ISO 8601."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value
