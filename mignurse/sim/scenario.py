"""Scenario files: find, load and parse them into a typed, immutable `Scenario`.

A scenario is data only (YAML). This module reads the top level (cluster, Karpenter, RBAC,
generator) and the shipped scenarios; pools are read in `scenario_pools.py`, lifecycle steps
and the timeline in `scenario_steps.py`, into the spec of `scenario_spec.py`. Every
validation error names the file and line, in one line, so a user editing a scenario sees
exactly what to fix. See docs/scenarios.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from mignurse.sim import resourceapi
from mignurse.sim.karpenter_versions import chart_feature_gates, parse_version
from mignurse.sim.operator_config import MigFiles
from mignurse.sim.scenario_fields import (
    DNS_1123_NAME,
    DNS_1123_SUBDOMAIN,
    ParseContext,
    ScenarioError,
    empty_mapping,
)
from mignurse.sim.scenario_pools import parse_pool
from mignurse.sim.scenario_spec import KarpenterSpec, PoolSpec, RbacDeny, Scenario, gate_value
from mignurse.sim.scenario_steps import parse_timeline
from mignurse.yamlfile import LDict, load_lined

SCENARIO_DIR = Path(__file__).parent / "scenarios"

_TOP = {
    "name",
    "description",
    "cluster",
    "seed",
    "warmup",
    "eventTTL",
    "eventDedupe",
    "karpenter",
    "rbac",
    "nodePools",
    "nodeGroups",
    "timeline",
    "generate",
    "daemonSets",
    "configMaps",
    "clusterPolicies",
}


def parse_scenario(text: str, source: str) -> Scenario:
    ctx = ParseContext(source)
    d = ctx.mapping(_load_yaml(ctx, text), "the scenario", 1, _TOP)
    name = ctx.string(d, "name", "the scenario")
    if not DNS_1123_NAME.match(name):
        raise ctx.fail(ctx.line_of(d, "name"), f"name {name!r} is not a DNS-1123 name")
    cluster = ctx.mapping(
        d.get("cluster") or empty_mapping(ctx.line_of(d, "cluster")),
        "cluster",
        ctx.line_of(d, "cluster"),
        {"name", "region", "kubernetesVersion", "resourceApiVersions"},
    )
    kubernetes_version = ctx.string(cluster, "kubernetesVersion", "cluster", "1.32")
    if not re.match(r"^1\.\d+$", kubernetes_version):
        raise ctx.fail(
            ctx.line_of(cluster, "kubernetesVersion"),
            f'cluster.kubernetesVersion {kubernetes_version!r} is not a release like "1.34"',
        )
    resource_versions = _parse_resource_api_versions(ctx, cluster, kubernetes_version)
    region = ctx.string(cluster, "region", "cluster", "us-west-2")
    warmup = ctx.duration(d, "warmup", "the scenario", 0.0)
    karpenter = None if d.get("karpenter") is None else _parse_karpenter(ctx, d)
    rbac = ctx.mapping(
        d.get("rbac") or empty_mapping(ctx.line_of(d, "rbac")),
        "rbac",
        ctx.line_of(d, "rbac"),
        {"user", "deny"},
    )
    deny = _parse_rbac_deny(ctx, rbac)
    configmaps = _parse_configmaps(ctx, d)
    cluster_policies = _parse_cluster_policies(ctx, d)
    mig_files = MigFiles(cluster_policies, configmaps)
    pools = _parse_pools(ctx, d, karpenter, resource_versions, kubernetes_version, mig_files)
    generate = _parse_generate(ctx, d)
    return Scenario(
        name=name,
        description=ctx.string(d, "description", "the scenario", ""),
        cluster_name=ctx.string(cluster, "name", "cluster", name),
        region=region,
        kubernetes_version=kubernetes_version,
        seed=ctx.integer(d, "seed", "the scenario", 1),
        warmup=warmup,
        event_ttl=ctx.duration(d, "eventTTL", "the scenario", 3600.0),
        event_dedupe=ctx.duration(d, "eventDedupe", "the scenario", 3600.0),
        karpenter=karpenter,
        rbac_user=ctx.string(rbac, "user", "rbac", "sim:oncall"),
        rbac_deny=deny,
        pools=pools,
        timeline=parse_timeline(
            ctx, d.get("timeline"), ctx.line_of(d, "timeline"), {p.name for p in pools}
        ),
        source=source,
        generate=generate,
        resource_api_versions=resource_versions,
        daemonsets=_parse_daemonsets(ctx, d),
        configmaps=configmaps,
        cluster_policies=cluster_policies,
    )


def _parse_daemonsets(ctx: ParseContext, d: LDict) -> tuple[dict[str, Any], ...]:
    """`daemonSets`: DaemonSet manifests served as written (apps/v1), each with a name and a
    namespace; one of the same namespace and name as a derived DaemonSet replaces it."""
    line = ctx.line_of(d, "daemonSets")
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(ctx.seq(d.get("daemonSets"), "daemonSets", line)):
        where = f"daemonSets[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            raise ctx.fail(getattr(item, "line", line), f"{where} needs metadata.name")
        meta = item["metadata"]
        at = getattr(meta, "line", line)
        name, namespace = meta.get("name"), meta.get("namespace")
        if not isinstance(name, str) or not DNS_1123_NAME.match(name):
            raise ctx.fail(at, f"{where}.metadata.name must be a DNS-1123 name")
        if not isinstance(namespace, str) or not DNS_1123_NAME.match(namespace):
            raise ctx.fail(at, f"{where}.metadata.namespace must be a DNS-1123 name")
        if item.get("kind", "DaemonSet") != "DaemonSet":
            raise ctx.fail(at, f"{where}.kind must be DaemonSet")
        if (namespace, name) in seen:
            raise ctx.fail(at, f"{where}: DaemonSet {namespace}/{name} given twice")
        seen.add((namespace, name))
        out.append(json.loads(json.dumps(item)))  # plain dicts, as the store keeps objects
    return tuple(out)


def _manifest(
    ctx: ParseContext, item: Any, where: str, line: int, kind: str, api_version: str
) -> tuple[dict[str, Any], int]:
    """(metadata, its line) of one manifest of `kind`, whose name is a DNS-1123 subdomain."""
    if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
        raise ctx.fail(getattr(item, "line", line), f"{where} needs metadata.name")
    meta = item["metadata"]
    at = getattr(meta, "line", line)
    name = meta.get("name")
    if not isinstance(name, str) or len(name) > 253 or not DNS_1123_SUBDOMAIN.match(name):
        raise ctx.fail(at, f"{where}.metadata.name must be a DNS-1123 subdomain")
    if item.get("kind", kind) != kind:
        raise ctx.fail(ctx.line_of(item, "kind"), f"{where}.kind must be {kind}")
    if item.get("apiVersion", api_version) != api_version:
        raise ctx.fail(ctx.line_of(item, "apiVersion"), f"{where}.apiVersion must be {api_version}")
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if values is not None and (
            not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values())
        ):
            raise ctx.fail(
                ctx.line_of(meta, key), f"{where}.metadata.{key} must map names to strings"
            )
    return meta, at


def _parse_configmaps(ctx: ParseContext, d: LDict) -> tuple[dict[str, Any], ...]:
    """`configMaps`: v1 ConfigMap manifests served as written (read only), each with a name
    and a namespace, and string `data` (and `binaryData`) values."""
    line = ctx.line_of(d, "configMaps")
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(ctx.seq(d.get("configMaps"), "configMaps", line)):
        where = f"configMaps[{i}]"
        meta, at = _manifest(ctx, item, where, line, "ConfigMap", "v1")
        name, namespace = meta["name"], meta.get("namespace")
        if not isinstance(namespace, str) or not DNS_1123_NAME.match(namespace):
            raise ctx.fail(at, f"{where}.metadata.namespace must be a DNS-1123 name")
        for key in ("data", "binaryData"):
            values = item.get(key)
            if values is None:
                continue
            if not isinstance(values, dict):
                raise ctx.fail(ctx.line_of(item, key), f"{where}.{key} must be a mapping")
            for k, v in values.items():
                if not isinstance(v, str):
                    raise ctx.fail(ctx.line_of(values, k), f"{where}.{key}.{k} must be a string")
        if (namespace, name) in seen:
            raise ctx.fail(at, f"{where}: ConfigMap {namespace}/{name} given twice")
        seen.add((namespace, name))
        out.append(json.loads(json.dumps(item)))  # plain dicts, as the store keeps objects
    return tuple(out)


def _parse_cluster_policies(ctx: ParseContext, d: LDict) -> tuple[dict[str, Any], ...]:
    """`clusterPolicies`: the GPU operator's nvidia.com/v1 ClusterPolicy manifests served as
    written (read only; cluster-scoped, so without a namespace). With one, the ClusterPolicy
    type is served and the first one says which mig-parted file the nodes' layouts follow."""
    line = ctx.line_of(d, "clusterPolicies")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(ctx.seq(d.get("clusterPolicies"), "clusterPolicies", line)):
        where = f"clusterPolicies[{i}]"
        meta, at = _manifest(ctx, item, where, line, "ClusterPolicy", "nvidia.com/v1")
        if meta.get("namespace") is not None:
            raise ctx.fail(
                ctx.line_of(meta, "namespace"),
                f"{where}.metadata.namespace: a ClusterPolicy is cluster-scoped",
            )
        for key in ("spec", "status"):
            if item.get(key) is not None and not isinstance(item[key], dict):
                raise ctx.fail(ctx.line_of(item, key), f"{where}.{key} must be a mapping")
        if meta["name"] in seen:
            raise ctx.fail(at, f"{where}: ClusterPolicy {meta['name']} given twice")
        seen.add(meta["name"])
        out.append(json.loads(json.dumps(item)))
    return tuple(out)


def _load_yaml(ctx: ParseContext, text: str) -> Any:
    try:
        return load_lined(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise ctx.fail(line, f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ctx.fail(0, f"invalid YAML: {exc}") from None


def _parse_resource_api_versions(
    ctx: ParseContext, cluster: LDict, kubernetes_version: str
) -> tuple[str, ...]:
    """The resource.k8s.io versions served, preferred first: as written, or EKS's for the
    Kubernetes release."""
    if "resourceApiVersions" not in cluster:
        return resourceapi.default_versions(kubernetes_version)
    wanted = ctx.seq(
        cluster["resourceApiVersions"],
        "cluster.resourceApiVersions",
        ctx.line_of(cluster, "resourceApiVersions"),
    )
    unknown = [str(v) for v in wanted if str(v) not in resourceapi.PRIORITY]
    if unknown:
        raise ctx.fail(
            ctx.line_of(cluster, "resourceApiVersions"),
            f"cluster.resourceApiVersions: {unknown[0]!r} is not one of "
            f"{', '.join(resourceapi.PRIORITY)}",
        )
    return resourceapi.ordered([str(v) for v in wanted])


def _parse_karpenter(ctx: ParseContext, d: LDict) -> KarpenterSpec:
    k = ctx.mapping(
        d["karpenter"],
        "karpenter",
        ctx.line_of(d, "karpenter"),
        {"version", "nodeRepair", "featureGates", "namespace", "interruptionQueue"},
    )
    version = ctx.string(k, "version", "karpenter", "1.4.0")
    try:
        parsed_version = parse_version(version)
    except ValueError as exc:
        raise ctx.fail(ctx.line_of(k, "version"), str(exc)) from None
    repair = ctx.boolean(k, "nodeRepair", "karpenter", False)
    gates = ctx.string(k, "featureGates", "karpenter", chart_feature_gates(parsed_version, repair))
    if "featureGates" in k and "nodeRepair" in k and gate_value(gates, "NodeRepair") != repair:
        raise ctx.fail(
            ctx.line_of(k, "featureGates"),
            "karpenter.featureGates disagrees with karpenter.nodeRepair",
        )
    return KarpenterSpec(
        version=version,
        node_repair=gate_value(gates, "NodeRepair"),
        feature_gates=gates,
        namespace=ctx.string(k, "namespace", "karpenter", "kube-system"),
        interruption_queue=ctx.boolean(k, "interruptionQueue", "karpenter", True),
    )


def _parse_rbac_deny(ctx: ParseContext, rbac: LDict) -> tuple[RbacDeny, ...]:
    """What the on-call user may not do: a verb on a resource the simulator serves."""
    from mignurse.sim.resources import RESOURCES

    deny = []
    deny_seq = ctx.seq(rbac.get("deny"), "rbac.deny", ctx.line_of(rbac, "deny"))
    for i, rule_raw in enumerate(deny_seq):
        rule = ctx.mapping(
            rule_raw, f"rbac.deny[{i}]", deny_seq.item_lines[i], {"verb", "resource", "namespace"}
        )
        verb = ctx.string(rule, "verb", f"rbac.deny[{i}]")
        resource = ctx.string(rule, "resource", f"rbac.deny[{i}]")
        if verb not in ("get", "list", "watch", "patch", "update", "delete", "create", "*"):
            raise ctx.fail(
                ctx.line_of(rule, "verb"), f"rbac.deny[{i}].verb {verb!r} is not a Kubernetes verb"
            )
        if resource.split("/")[0] not in RESOURCES and resource != "*":
            raise ctx.fail(
                ctx.line_of(rule, "resource"),
                f"rbac.deny[{i}].resource {resource!r} is not served by the simulator; "
                f"known: {', '.join(RESOURCES)}",
            )
        deny.append(
            RbacDeny(
                verb, resource, None if rule.get("namespace") is None else str(rule["namespace"])
            )
        )
    return tuple(deny)


def _parse_pools(
    ctx: ParseContext,
    d: LDict,
    karpenter: KarpenterSpec | None,
    resource_versions: tuple[str, ...],
    kubernetes_version: str,
    mig_files: MigFiles,
) -> tuple[PoolSpec, ...]:
    """`nodePools` then `nodeGroups`, checked against each other and the cluster (a pool's
    MIG config against the mig-parted file the cluster's ClusterPolicy names)."""
    pools: list[PoolSpec] = []
    for key, kind in (("nodePools", "nodepool"), ("nodeGroups", "nodegroup")):
        seq = ctx.seq(d.get(key), key, ctx.line_of(d, key))
        for i, p in enumerate(seq):
            pools.append(
                parse_pool(ctx, p, f"{key}[{i}]", seq.item_lines[i], kind, mig_files=mig_files)
            )
    names = [p.name for p in pools]
    for p in pools:
        if p.dra and not resource_versions:
            raise ctx.fail(
                p.line,
                f"pool {p.name!r}: gpuScheduling dra needs resource.k8s.io, which EKS serves "
                f"from Kubernetes 1.33 (cluster.kubernetesVersion is {kubernetes_version})",
            )
        if names.count(p.name) > 1:
            raise ctx.fail(p.line, f"pool name {p.name!r} is used twice")
        if p.kind == "nodepool" and karpenter is None:
            raise ctx.fail(
                p.line,
                f"nodePools need `karpenter:`; use nodeGroups for {p.name!r} without Karpenter",
            )
    return tuple(pools)


def _parse_generate(ctx: ParseContext, d: LDict) -> tuple[tuple[str, Any], ...] | None:
    """`generate`: a generator's name, or a mapping of its settings."""
    generate = d.get("generate")
    if generate is not None and not isinstance(generate, (str, dict)):
        raise ctx.fail(ctx.line_of(d, "generate"), "generate must be a generator name or mapping")
    if isinstance(generate, str):
        return (("kind", generate),)
    if isinstance(generate, dict):
        return tuple(sorted(generate.items()))
    return None


def _shipped() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}


def scenario_path(name: str) -> Path:
    """The YAML file of a shipped scenario (to copy and edit, or to vary in tests)."""
    shipped = _shipped()
    if name not in shipped:
        raise ScenarioError(
            f"{name}:0: no shipped scenario of that name (known: {', '.join(shipped)})"
        )
    return shipped[name]


def list_scenarios() -> list[tuple[str, str]]:
    """(name, one-line description) of every shipped scenario."""
    out = []
    for name, path in _shipped().items():
        try:
            raw = yaml.safe_load(path.read_text())
            desc = str(raw.get("description", "")).strip().splitlines()[0] if raw else ""
        except (yaml.YAMLError, IndexError, AttributeError):
            desc = ""
        out.append((name, desc))
    return out


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name, or a YAML file by path."""
    text_name = str(name_or_path)
    shipped = _shipped()
    if text_name in shipped:
        path = shipped[text_name]
    else:
        path = Path(text_name).expanduser()
        if not path.is_file():
            known = ", ".join(shipped)
            raise ScenarioError(
                f"{text_name}:0: no such scenario file or shipped scenario (known: {known})"
            )
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}:0: cannot read: {exc.strerror}") from None
    scenario = parse_scenario(text, str(path))
    if scenario.generate is not None:
        from mignurse.sim import generate

        scenario = generate.expand(scenario)
    return scenario
