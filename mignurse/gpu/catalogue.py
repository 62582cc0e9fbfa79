"""NVIDIA's published MIG configs (mig-parted's `config-default.yaml`) as data: config name →
the items mig-parted applies, each with its device filter.

The shipped `mig-catalogue.json` is written by `scripts/sync-mig-catalogue.py` from the
upstream file and records where it came from (repo, path, tag, commit, git blob sha). The
gpu-operator ships the same configs as its `default-mig-parted-config` ConfigMap
(NVIDIA/gpu-operator@v26.7.0 assets/state-mig-manager/0400_configmap.yaml; its `all-balanced`
lists the same device-filter entries in another order).

Reading a config the way mig-parted does (NVIDIA/mig-parted@v0.15.0 api/spec/v1/spec.go,
helpers.go): only `version: v1` and `mig-configs`; every item needs `devices` (`all` or GPU
indices) and `mig-enabled`; `mig-devices` is required when enabled and must be empty when
not; `device-filter` is one `0xDDDDVVVV` id or a list, optionally `:0xSSSSssss` (subsystem).
A GPU whose id no filter names is left as it is by that item.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

CATALOGUE_FILE = "mig-catalogue.json"
_ITEM_KEYS = frozenset({"devices", "mig-enabled", "mig-devices", "device-filter"})


class CatalogueError(ValueError):
    """An upstream file that is not a mig-parted v1 config; str() says where and why."""


@dataclass(frozen=True)
class CatalogueSource:
    repo: str
    path: str
    tag: str
    commit: str
    blob: str  # git blob sha1 of the file: `git rev-parse <tag>:<path>`


@dataclass(frozen=True)
class ConfigItem:
    device_filter: tuple[str, ...]  # "0x233010DE" (device id in the high half); () = any GPU
    devices: str | tuple[int, ...]  # "all" or GPU indices
    mig_enabled: bool
    mig_devices: Mapping[str, int]  # profile → instances per GPU

    def covers(self, device_ids: tuple[str, ...]) -> bool:
        """Whether this item applies to a GPU with one of these ids (no filter: any GPU)."""
        if not self.device_filter:
            return True
        wanted = {_device_part(f) for f in self.device_filter}
        return any(_device_part(d) in wanted for d in device_ids)


Configs = Mapping[str, tuple[ConfigItem, ...]]  # a mig-parted file's configs by name


@dataclass(frozen=True)
class MigCatalogue:
    source: CatalogueSource
    configs: Configs


def _device_part(device_filter: str) -> str:
    """ "0x233010de:0x16C010DE" → "0x233010DE": the subsystem part never narrows our match."""
    head = device_filter.split(":", 1)[0].strip()
    return "0x" + head[2:].upper() if head.lower().startswith("0x") else head.upper()


def git_blob_sha(data: bytes) -> str:
    """The id git gives this content as a blob (what `git rev-parse TAG:PATH` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _filters(raw: Any, where: str) -> list[str]:
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values:
        raise CatalogueError(f"{where}: device-filter must be an id or a non-empty list of ids")
    out = []
    for value in values:
        if not isinstance(value, str) or not value.strip().lower().startswith("0x"):
            raise CatalogueError(f"{where}: device-filter {value!r} is not a 0xDDDDVVVV id")
        parts = value.strip().split(":")
        if len(parts) > 2 or any(len(p) != 10 for p in parts):
            raise CatalogueError(f"{where}: device-filter {value!r} is not a 0xDDDDVVVV id")
        try:
            for part in parts:
                int(part, 16)
        except ValueError:
            raise CatalogueError(f"{where}: device-filter {value!r} is not hexadecimal") from None
        out.append(":".join("0x" + p[2:].upper() for p in parts))
    return out


def _item(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: not a mapping")
    unknown = sorted(set(raw) - _ITEM_KEYS)
    if unknown:
        raise CatalogueError(f"{where}: unexpected field {unknown[0]!r}")
    devices = raw.get("devices")
    if devices != "all" and not (
        isinstance(devices, list)
        and devices
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)
    ):
        raise CatalogueError(f"{where}: devices must be 'all' or a list of GPU indices")
    enabled = raw.get("mig-enabled")
    if not isinstance(enabled, bool):
        raise CatalogueError(f"{where}: mig-enabled must be true or false")
    mig_devices = raw.get("mig-devices", {} if not enabled else None)
    if not isinstance(mig_devices, dict):
        raise CatalogueError(f"{where}: mig-devices is required when mig-enabled is true")
    if not enabled and mig_devices:
        raise CatalogueError(f"{where}: mig-devices must be empty when mig-enabled is false")
    for profile, count in mig_devices.items():
        if not isinstance(profile, str) or not isinstance(count, int) or isinstance(count, bool):
            raise CatalogueError(f"{where}: mig-devices {profile!r}: {count!r} is not a count")
        if count < 0:
            raise CatalogueError(f"{where}: mig-devices {profile!r}: negative count")
    item: dict[str, Any] = {}
    if "device-filter" in raw:
        item["device-filter"] = _filters(raw["device-filter"], where)
    item["devices"] = devices
    item["mig-enabled"] = enabled
    if enabled:
        item["mig-devices"] = dict(mig_devices)
    return item


def parse_upstream(text: str) -> dict[str, list[dict[str, Any]]]:
    """The `mig-configs` of a mig-parted v1 file, checked and normalised (device filters as
    lists of upper-case ids); CatalogueError names the first thing mig-parted would refuse."""
    from mignurse.untrusted import LimitError, compose_yaml

    try:
        compose_yaml(text)  # a cluster's file: its depth and aliases bounded before it is loaded
        document = yaml.safe_load(text)
    except LimitError as exc:
        raise CatalogueError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise CatalogueError(f"not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict):
        raise CatalogueError("not a mapping")
    unknown = sorted(set(document) - {"version", "mig-configs"})
    if unknown:
        raise CatalogueError(f"unexpected field {unknown[0]!r}")
    if document.get("version") != "v1":
        raise CatalogueError(f"unknown version {document.get('version')!r}")
    configs = document.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise CatalogueError("mig-configs must be a non-empty mapping")
    out: dict[str, list[dict[str, Any]]] = {}
    for name, items in configs.items():
        if not isinstance(items, list) or not items:
            raise CatalogueError(f"mig-configs.{name}: must be a non-empty list")
        out[str(name)] = [_item(raw, f"mig-configs.{name}[{i}]") for i, raw in enumerate(items)]
    return out


def build_document(data: bytes, *, repo: str, path: str, tag: str, commit: str) -> dict[str, Any]:
    """The catalogue document for an upstream file's bytes and where they came from."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogueError(f"not UTF-8: {exc}") from None
    source = {"repo": repo, "path": path, "tag": tag, "commit": commit,
              "blob": git_blob_sha(data)}  # fmt: skip
    return {"source": source, "configs": parse_upstream(text)}


def render(document: Mapping[str, Any]) -> str:
    """The shipped file's text: one config per line block, stable for review diffs."""
    return json.dumps(document, indent=1) + "\n"


def from_document(document: Mapping[str, Any]) -> MigCatalogue:
    src = document["source"]
    source = CatalogueSource(src["repo"], src["path"], src["tag"], src["commit"], src["blob"])
    return MigCatalogue(source, configs_of(document["configs"]))


def configs_of(parsed: Mapping[str, Any]) -> dict[str, tuple[ConfigItem, ...]]:
    """Config name → items, from `parse_upstream`'s checked, normalised mapping."""
    configs: dict[str, tuple[ConfigItem, ...]] = {}
    for name, items in parsed.items():
        configs[name] = tuple(
            ConfigItem(
                device_filter=tuple(item.get("device-filter", ())),
                devices=item["devices"] if item["devices"] == "all" else tuple(item["devices"]),
                mig_enabled=item["mig-enabled"],
                mig_devices=dict(item.get("mig-devices", {})),
            )
            for item in items
        )
    return configs


@functools.cache
def catalogue() -> MigCatalogue:
    """The shipped catalogue (read once)."""
    text = resources.files("mignurse.gpu").joinpath(CATALOGUE_FILE).read_text("utf-8")
    return from_document(json.loads(text))
