"""Which mig-parted config file the GPU operator's mig-manager reads for a node, found in the
cluster, and NVIDIA's default file where no operator runs.

Where mig-manager's file comes from (NVIDIA/gpu-operator controllers/object_controls.go and
NVIDIA/mig-parted cmd/nvidia-mig-manager/main.go, at the tags named):
- `spec.migManager.config.name` of the ClusterPolicy names a ConfigMap in the operator's
  namespace (the ClusterPolicy's `status.namespace`); mig-manager reads its `config.yaml`. So
  in every release.
- Without a name, through operator v25.10 (mig-manager up to v0.13): the operator's own
  `default-mig-parted-config` ConfigMap (gpu-operator v25.3.4, v25.10.0).
- Without a name, from operator v26.3 (mig-manager v0.14, gpu-operator v26.3.0 `hasCustomConfig`):
  mig-manager builds the file from the GPUs it finds (mig-parted v0.15.0 `setupMigConfig`,
  `builder.GenerateConfigYAML`) and publishes it as the ConfigMap `<node>-mig-config`, key
  `config.yaml`, in its namespace; where it finds no profiles it falls back to
  `default-mig-parted-config`. Publishing is best effort, so an absent `<node>-mig-config`
  leaves that default as the nearest reading, said in the note.
- No ClusterPolicy: no operator, so no mig-manager from it; the host's mig-parted (the EKS
  AL2023 NVIDIA AMI's) or mignurse's own runbook applies a config by name, and NVIDIA's
  default file (`mignurse.gpu.catalogue`) is what those names mean.

A ConfigMap's text comes from the cluster: it is read by the same checks as the shipped file
(`catalogue.parse_upstream`), bounded in size, and a file that fails them is an error, never
a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mignurse.gpu.catalogue import CatalogueError, Configs, catalogue, configs_of, parse_upstream
from mignurse.inert import inert_name
from mignurse.model.fields import parse_version

DEFAULT_CONFIGMAP = "default-mig-parted-config"
CONFIG_KEY = "config.yaml"
GENERATED_SUFFIX = "-mig-config"
# the labels mig-manager puts on the ConfigMap it publishes (mig-parted v0.15.0
# cmd/nvidia-mig-manager/main.go createNodeConfigMap)
GENERATED_SELECTOR = "app.kubernetes.io/component=nvidia-mig-manager"
GENERATING_MIG_MANAGER = (0, 14, 0)  # the first mig-manager that builds its own file
MAX_CONFIG_BYTES = 1 << 20  # the API server's limit on a ConfigMap's data
# a ConfigMap's name and a namespace as the API server allows them (k8s.io/apimachinery
# pkg/util/validation IsDNS1123Subdomain, IsDNS1123Label); anything else from a ClusterPolicy
# is refused before it reaches a request path or a message
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
BUILT_IN = "NVIDIA's default mig-parted file"

# a ConfigMap read: the object, None when there is none; raises ConfigUnreadable otherwise
Reader = Callable[[str, str], "Mapping[str, Any] | None"]


class ConfigUnreadable(Exception):
    """The cluster's mig-parted config for a node cannot be read or is not a valid file; str()
    is one line naming the ConfigMap and why."""


@dataclass(frozen=True)
class MigConfigs:
    """The configs a node's layouts come from, where they were read, and what is uncertain."""

    configs: Configs
    source: str
    note: str = ""


def built_in(note: str = "") -> MigConfigs:
    shipped = catalogue()
    return MigConfigs(shipped.configs, f"{BUILT_IN} (mig-parted {shipped.source.tag})", note)


def _field(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def operator_namespace(policy: Mapping[str, Any]) -> str:
    namespace = _field(policy, "status", "namespace")
    return namespace if isinstance(namespace, str) else ""


def custom_name(policy: Mapping[str, Any]) -> str:
    name = _field(policy, "spec", "migManager", "config", "name")
    return name if isinstance(name, str) else ""


def _may_generate(policy: Mapping[str, Any] | None) -> bool:
    """Whether the ClusterPolicy's mig-manager (spec.migManager.version) may build its own
    file: v0.14 on, or a version it does not say."""
    version = _field(policy, "spec", "migManager", "version")
    parsed = parse_version(version) if isinstance(version, str) else None
    return parsed is None or parsed >= GENERATING_MIG_MANAGER


def wanted(policy: Mapping[str, Any] | None, node: str) -> tuple[str, tuple[str, ...]] | None:
    """(namespace, ConfigMap names in the order mig-manager would use them) for a node; None
    where no ClusterPolicy runs. ConfigUnreadable when the ClusterPolicy does not say the
    namespace, or names something that is no ConfigMap name (it would go into a request path)."""
    if policy is None:
        return None
    namespace = operator_namespace(policy)
    if not namespace:
        raise ConfigUnreadable(
            "the ClusterPolicy has no status.namespace: the GPU operator's namespace, where its "
            "mig-parted ConfigMap is, is unknown"
        )
    if not _LABEL.fullmatch(namespace):
        raise ConfigUnreadable(
            f"the ClusterPolicy's status.namespace {inert_name(namespace)} is not a namespace"
        )
    name = custom_name(policy)
    if name and not _SUBDOMAIN.fullmatch(name):
        raise ConfigUnreadable(
            f"the ClusterPolicy's spec.migManager.config.name {inert_name(name)} is not a "
            "ConfigMap name"
        )
    if name:
        return namespace, (name,)
    return namespace, (node + GENERATED_SUFFIX, DEFAULT_CONFIGMAP)


def from_file(path: Path) -> MigConfigs:
    """The configs of a local mig-parted file, or of the ConfigMap holding one as `kubectl get
    configmap NAME -o yaml` prints it; ConfigUnreadable (one line naming the file) when it is
    not a regular file under 1 MiB, not UTF-8 YAML, or a file mig-parted would refuse."""
    from mignurse.untrusted import (
        MIG_PARTED_FILE_BYTES,
        LimitError,
        compose_yaml,
        read_regular_file,
    )

    where = inert_name(str(path))
    try:
        text = read_regular_file(path, MIG_PARTED_FILE_BYTES, where).decode("utf-8")
    except LimitError as exc:  # (its words name the file)
        raise ConfigUnreadable(str(exc)) from None
    except OSError as exc:
        raise ConfigUnreadable(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigUnreadable(f"{where}: not UTF-8 text") from None
    try:
        compose_yaml(text)  # (its depth and aliases bounded before it is loaded)
    except LimitError as exc:
        raise ConfigUnreadable(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "bad syntax"
        raise ConfigUnreadable(f"{where}: not YAML{at}: {problem}") from None
    document = yaml.safe_load(text)
    if isinstance(document, dict) and document.get("kind") == "ConfigMap":
        name = _field(document, "metadata", "name")
        name = name if isinstance(name, str) else "?"
        configs = from_configmap(document, f"{inert_name(name)} (in {where})")
        return MigConfigs(configs.configs, f"{where} (ConfigMap {inert_name(name)})")
    try:
        parsed = parse_upstream(text)
    except CatalogueError as exc:
        raise ConfigUnreadable(f"{where}: {exc}") from None
    return MigConfigs(configs_of(parsed), where)


def from_configmap(configmap: Mapping[str, Any], where: str) -> MigConfigs:
    """The configs of a ConfigMap's `config.yaml`; ConfigUnreadable when it has none or
    mig-parted would refuse it."""
    text = _field(configmap, "data", CONFIG_KEY)
    if not isinstance(text, str):
        raise ConfigUnreadable(f"ConfigMap {where} has no {CONFIG_KEY}")
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigUnreadable(f"ConfigMap {where}: {CONFIG_KEY} is over 1 MiB")
    try:
        parsed = parse_upstream(text)
    except CatalogueError as exc:
        raise ConfigUnreadable(f"ConfigMap {where}: {CONFIG_KEY} {exc}") from None
    return MigConfigs(configs_of(parsed), f"ConfigMap {where}")


def for_node(
    policy: Mapping[str, Any] | None,
    node: str,
    read: Reader,
    parsed: dict[tuple[str, str], MigConfigs | ConfigUnreadable] | None = None,
) -> MigConfigs:
    """The configs mig-manager reads for this node (the module's order); the built-in file
    where no operator runs. ConfigUnreadable when the operator's file is named but cannot be
    read: a layout from another file could differ from the one the operator applies.
    `parsed` keeps each ConfigMap's reading across calls (a fleet shares one or two files)."""
    found = wanted(policy, node)
    if found is None:
        return built_in()
    namespace, names = found
    for name in names:
        configmap = read(namespace, name)
        if configmap is None:
            continue
        key = (namespace, name)
        held = parsed.get(key) if parsed is not None else None
        if held is None:
            try:
                held = from_configmap(configmap, f"{namespace}/{name}")
            except ConfigUnreadable as exc:
                held = exc
            if parsed is not None:
                parsed[key] = held
        if isinstance(held, ConfigUnreadable):
            raise held
        if name == DEFAULT_CONFIGMAP and len(names) > 1 and _may_generate(policy):
            note = (
                f"no {namespace}/{node}{GENERATED_SUFFIX}: from operator v26.3 mig-manager "
                "builds its file from the GPUs and publishes it there; the operator's "
                "default file stands in"
            )
            return MigConfigs(held.configs, held.source, note)
        return held
    listed = " or ".join(f"{namespace}/{name}" for name in names)
    raise ConfigUnreadable(f"no ConfigMap {listed}: mig-manager's file is not in the cluster")
