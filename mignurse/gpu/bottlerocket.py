"""Bottlerocket's own MIG settings: the TOML a Bottlerocket NVIDIA node takes as user data (a
Karpenter EC2NodeClass `userData`), the `apiclient` command that sets them on a running node,
and how to tell a Bottlerocket node. Pure data and functions: no I/O.

Bottlerocket partitions MIG itself: `nvidia-migmanager.service` reads the settings at boot and
runs `nvidia-smi mig -cgi <profile>,<profile>,... -C` with one profile filling every GPU
(bottlerocket-os/bottlerocket-kernel-kit sources/nvidia-migmanager/src/main.rs and
mig_profile.rs, read at the copy in qianxjcraig/bottlerocket-kernel-kit@41179ad). There is no
mig-parted and no host shell; a settings change takes effect at the next boot
(bottlerocket-os/bottlerocket-project-website data/settings/1.34.x/kubelet-device-plugins.toml,
"Lifecycle"), and the device plugin then advertises each MIG device as `nvidia.com/gpu`.

Sources for the keys and values:
- `settings.kubelet-device-plugins.nvidia.device-partitioning-strategy`: "none" (default) or
  "mig"; `settings.kubelet-device-plugins.nvidia.mig.profile`: GPU key → a profile name or a
  partition count (bottlerocket-os/bottlerocket-settings-sdk@25e4241
  bottlerocket-settings-models/modeled-types/src/kubernetes.rs `NvidiaMigSettings`,
  `MigProfile` `^[0-9]g\\.\\d+gb$` or 1/2/3/4/7; the website file above).
- The GPU keys and the profiles each accepts: mig_profile.rs above. A value the manager does
  not list for a known GPU falls back to the whole-GPU profile (serde `other`), so mignurse
  writes only the profiles of this table, by name.
- First releases: MIG settings in Bottlerocket 1.34.0 (bottlerocket-os/bottlerocket#4418,
  after bottlerocket-os/bottlerocket#4306 was reverted from 1.33.0 by
  bottlerocket-os/bottlerocket#4405; see bottlerocket-os/bottlerocket#4483). B200 and the
  A100s' 1g.10gb/1g.20gb came with kernel-kit 2.5.0 (bottlerocket-os/bottlerocket-kernel-kit#136),
  first in Bottlerocket 1.40.0; RTX PRO 6000 (`rtxpro6000.96gb`) with kernel-kit 4.5.0
  (bottlerocket-os/bottlerocket-kernel-kit#300; bottlerocket-os/bottlerocket-settings-sdk#105
  admits the key), first in 1.51.0; B300 at the latest with kernel-kit 4.6.0
  (bottlerocket-os/bottlerocket-kernel-kit#323), in 1.52.0. The kernel-kit of each
  release: bottlerocket-project-website content/en/os/<v>.x/version-information/packages/<v>/
  kernel-kit-packages.markdown.
- A Bottlerocket node: kubelet reports /etc/os-release PRETTY_NAME as `status.nodeInfo.osImage`,
  "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)"; the `bottlerocket.aws/updater-interface-version`
  label is there only where the Bottlerocket update operator is used (its README has users add
  it), so it is a second sign, not the first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from mignurse.gpu.models import GpuModel
from mignurse.gpu.profiles import describe_counts, expected_layout, profile_of_config
from mignurse.model import Node

SETTINGS = "settings.kubelet-device-plugins.nvidia"
STRATEGY_KEY = "device-partitioning-strategy"
MIG_SETTINGS_SINCE = "1.34.0"
OS_IMAGE_PREFIX = "Bottlerocket OS"
LABEL_UPDATER = "bottlerocket.aws/updater-interface-version"
_VERSION = re.compile(r"^Bottlerocket OS (\d+)\.(\d+)\.(\d+)\b", re.IGNORECASE)


class BottlerocketError(ValueError):
    """A GPU or config Bottlerocket's MIG manager cannot make; str() is the one line to show."""


@dataclass(frozen=True)
class BottlerocketGpu:
    key: str  # the `mig.profile` key
    profiles: Mapping[str, tuple[int, str]]  # profile → (instances per GPU, first release)


_V134, _V140, _V151, _V152 = "1.34.0", "1.40.0", "1.51.0", "1.52.0"
_A100_80 = {"1g.10gb": (7, _V134), "1g.20gb": (4, _V140), "2g.20gb": (3, _V134),
            "3g.40gb": (2, _V134), "7g.80gb": (1, _V134)}  # fmt: skip
_H200 = {"1g.18gb": (7, _V134), "1g.35gb": (4, _V134), "2g.35gb": (3, _V134),
         "3g.71gb": (2, _V134), "7g.141gb": (1, _V134)}  # fmt: skip

# mignurse model name → what nvidia-migmanager knows it as. Models it maps to a key whose table
# is another GPU's (H100 NVL to h100.80gb, GH200 144G to h200.141gb, GB200 to b200.180gb) are
# left out: the profiles it would ask for do not exist on them.
GPUS: dict[str, BottlerocketGpu] = {
    "A100-40GB": BottlerocketGpu("a100.40gb", {
        "1g.5gb": (7, _V134), "1g.10gb": (4, _V140), "2g.10gb": (3, _V134),
        "3g.20gb": (2, _V134), "7g.40gb": (1, _V134)}),
    "A100-80GB": BottlerocketGpu("a100.80gb", _A100_80),
    "H100-80GB": BottlerocketGpu("h100.80gb", {**_A100_80, "1g.20gb": (4, _V134)}),
    "H200-141GB": BottlerocketGpu("h200.141gb", _H200),
    "H200-NVL": BottlerocketGpu("h200.141gb", _H200),
    "B200": BottlerocketGpu("b200.180gb", {
        "1g.23gb": (7, _V140), "1g.45gb": (4, _V140), "2g.45gb": (3, _V140),
        "3g.90gb": (2, _V140), "7g.180gb": (1, _V140)}),
    "B300": BottlerocketGpu("b300.269gb", {
        "1g.34gb": (7, _V152), "1g.67gb": (4, _V152), "2g.67gb": (3, _V152),
        "3g.135gb": (2, _V152), "4g.135gb": (1, _V152), "7g.269gb": (1, _V152)}),
    "RTX-PRO-6000-Server": BottlerocketGpu("rtxpro6000.96gb", {
        "1g.24gb": (4, _V151), "2g.48gb": (2, _V151), "4g.96gb": (1, _V151)}),
}  # fmt: skip


@dataclass(frozen=True)
class BottlerocketMig:
    """The settings that make one mig-parted config's layout on a Bottlerocket node."""

    config: str
    model: str
    strategy: str  # "mig" | "none"
    key: str  # "" when MIG is off
    profile: str  # "" when MIG is off
    per_gpu: int
    since: str  # the first Bottlerocket release that makes it

    def words(self) -> str:
        if self.strategy == "none":
            return "MIG off"
        return f"{self.per_gpu} x {self.profile} per GPU"  # ASCII: user data


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def settings_for(config: str, model: GpuModel) -> BottlerocketMig:
    """The Bottlerocket settings for `config` on `model`; BottlerocketError (one line) when
    Bottlerocket's MIG manager cannot make that layout."""
    if config == "all-disabled":
        return BottlerocketMig(config, model.name, "none", "", "", 0, MIG_SETTINGS_SINCE)
    gpu = GPUS.get(model.name)
    if gpu is None:
        known = ", ".join(GPUS)
        raise BottlerocketError(
            f"Bottlerocket's MIG manager has no profiles for {model.name}: it partitions {known}"
        )
    names = ", ".join(f"all-{p}" for p in gpu.profiles)
    profile = profile_of_config(config) if config.startswith("all-") else ""
    known_layout = expected_layout(config, model)
    if known_layout is not None and known_layout.devices is None and known_layout.note:
        raise BottlerocketError(f"{config} means no layout on {model.name}: {known_layout.note}")
    if profile not in gpu.profiles or known_layout is None or not known_layout.devices:
        raise BottlerocketError(
            f"Bottlerocket makes one profile per GPU from its own table, and {config!r} is "
            f"not one of them on {model.name}: use all-disabled or {names}"
        )
    per_gpu, since = gpu.profiles[profile]
    if dict(known_layout.devices) != {profile: per_gpu}:
        raise BottlerocketError(
            f"{config} is {describe_counts(known_layout.devices)} per GPU but Bottlerocket "
            f"makes {per_gpu} x {profile} on {model.name}"
        )
    return BottlerocketMig(config, model.name, "mig", gpu.key, profile, per_gpu, since)


def settings_toml(mig: BottlerocketMig, *, generated_by: str) -> str:
    """The user-data TOML (Bottlerocket merges it with Karpenter's own settings)."""
    lines = [
        f"# Bottlerocket settings for MIG config {mig.config}: {mig.words()} on {mig.model},",
        "# made at boot by Bottlerocket's nvidia-migmanager (not nvidia-mig-parted: no hooks).",
        f"# Needs Bottlerocket {mig.since} or later"
        + (f" (the first whose MIG manager knows {mig.key} {mig.profile})." if mig.key else "."),
        "# The device plugin advertises each MIG device as nvidia.com/gpu.",
        f"# Generated by: {generated_by}",
        f"[{SETTINGS}]",
        f'{STRATEGY_KEY} = "{mig.strategy}"',
    ]
    if mig.key:
        lines += ["", f"[{SETTINGS}.mig.profile]", f'"{mig.key}" = "{mig.profile}"']
    return "\n".join(lines) + "\n"


def apiclient_command(mig: BottlerocketMig) -> str:
    """`apiclient set --json '…'` for the same settings (as the Bottlerocket docs' Shell tab)."""
    nvidia: dict[str, object] = {STRATEGY_KEY: mig.strategy}
    if mig.key:
        nvidia["mig"] = {"profile": {mig.key: mig.profile}}
    document = {"settings": {"kubelet-device-plugins": {"nvidia": nvidia}}}
    return "apiclient set --json '" + json.dumps(document, separators=(",", ":")) + "'"


def bottlerocket_os(node: Node) -> str | None:
    """What says the node runs Bottlerocket (its osImage, else the update operator's label);
    None for any other OS."""
    if node.os_image.strip().casefold().startswith(OS_IMAGE_PREFIX.casefold()):
        return node.os_image.strip()
    if LABEL_UPDATER in node.labels:
        return f"Bottlerocket (label {LABEL_UPDATER})"
    return None


def os_version(node: Node) -> str | None:
    """The Bottlerocket release in the node's osImage ("1.51.0"), if it names one."""
    found = _VERSION.match(node.os_image.strip())
    return ".".join(found.groups()) if found else None
