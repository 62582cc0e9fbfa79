"""What a MIG run is about: the node, the config it is to have (`--param config` or its
`nvidia.com/mig.config` label), that config's per-GPU layout for the node's GPU family
(`gpu/profiles.py`) and MIG strategy (`MigTarget`, `resolve_target`); the refusal of a
Bottlerocket node, which makes its layout itself; and the mig-parted config file holding
only the chosen layout.

The layout a name means is read from the file the GPU operator's mig-manager reads for the
node (`gpu/clusterconfig.py`: the ClusterPolicy's ConfigMap, the one mig-manager builds for
the node, or the operator's default), so that the GPUs end as mig-manager would leave them
when it is turned back on; NVIDIA's default file only where no ClusterPolicy is served. When
the operator's file cannot be read, the run stops: a layout from another file may differ.
The file is read once per run, by `mig-preflight`, which records the layout and where it came
from; every later step (and a resumed run) takes that record. The file may not stay: the
ConfigMap mig-manager publishes for a node belongs to its pod, which `mig-manager-off`
removes, and the layout must not change under a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mignurse.cluster.client import CLUSTER_POLICIES, CONFIGMAPS, ClusterError, NotFound
from mignurse.gpu.bottlerocket import (
    BottlerocketError,
    apiclient_command,
    bottlerocket_os,
    os_version,
    settings_for,
    version_tuple,
)
from mignurse.gpu.clusterconfig import ConfigUnreadable, MigConfigs, built_in, for_node
from mignurse.gpu.models import GpuModel
from mignurse.gpu.profiles import (
    Layout,
    config_names,
    describe_counts,
    expected_layout,
    identify_gpus,
    strategy,
)
from mignurse.model import (
    LABEL_MIG_CONFIG,
    RESOURCE_GPU,
    RESOURCE_MIG_PREFIX,
    Node,
)
from mignurse.runner.step import (
    StepContext,
    StepFailed,
    transient,
)
from mignurse.runner.steps.kube import get_node
from mignurse.runner.steps.mig.labels import earlier_output


@dataclass(frozen=True)
class MigTarget:
    node: Node
    raw: dict[str, Any]
    config: str
    family: GpuModel
    gpus: int | None
    layout: Layout
    strategy: str
    configs: MigConfigs = field(default_factory=built_in)  # the file `layout` is from

    @property
    def per_gpu(self) -> dict[str, int]:
        return dict(self.layout.devices or {})

    def expected_resources(self, gpus: int | None = None) -> dict[str, int]:
        """What the device plugin should advertise for the layout (docs/mig.md)."""
        count = gpus if gpus is not None else (self.gpus or 0)
        if not self.layout.mig_enabled or self.strategy == "none":
            return {RESOURCE_GPU: count}
        if self.strategy == "single":
            return {RESOURCE_GPU: sum(self.per_gpu.values()) * count}
        return {f"{RESOURCE_MIG_PREFIX}{p}": n * count for p, n in self.per_gpu.items()}


def valid_configs(family: GpuModel, configs: MigConfigs) -> list[str]:
    """The config names of a mig-parted file mignurse can write for a GPU family: MIG off and
    on where the file has them, and every layout it knows on that family."""
    names = [n for n in ("all-disabled", "all-enabled") if n in configs.configs]
    return list(dict.fromkeys(names + config_names(family, configs.configs)))


def cluster_configs(ctx: StepContext) -> MigConfigs:
    """The mig-parted file mig-manager reads for the step's node; StepFailed (one line) when
    the operator runs and its file cannot be read."""
    try:
        policies = ctx.client.list(CLUSTER_POLICIES, dict).items
    except NotFound:
        policies = []  # the CRD is not served: no GPU operator
    except ClusterError as exc:
        raise StepFailed(
            f"cannot read the GPU operator's ClusterPolicy ({exc}): the MIG layouts come from "
            "the file its mig-manager reads",
            retryable=transient(exc),
        ) from None

    def read(namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return ctx.client.get(CONFIGMAPS, name, namespace)
        except NotFound:
            return None
        except ClusterError as exc:
            if transient(exc):
                raise StepFailed(
                    f"cannot read ConfigMap {namespace}/{name}: {exc}", retryable=True
                ) from None
            raise ConfigUnreadable(f"cannot read ConfigMap {namespace}/{name} ({exc})") from None

    try:
        return for_node(dict(policies[0]) if policies else None, ctx.node, read)
    except ConfigUnreadable as exc:
        raise StepFailed(
            f"{exc}: the layout must be the one mig-manager would apply, so nothing is changed"
        ) from None


PINNED = "migFile"  # the key of mig-preflight's record of the file and the layout


def pinned_record(target: MigTarget) -> dict[str, Any]:
    """What mig-preflight records for the later steps: the layout and where it came from."""
    return {
        "source": target.configs.source,
        "note": target.configs.note,
        "migEnabled": target.layout.mig_enabled,
        "perGpu": target.per_gpu,
    }


def _pinned(ctx: StepContext, config: str) -> tuple[Layout, MigConfigs] | None:
    """The layout mig-preflight recorded for this run's config, and its file's words."""
    output = earlier_output(ctx, PINNED)
    if output is None or output.get("config") != config:
        return None
    record = output[PINNED]
    if not isinstance(record, dict) or not isinstance(record.get("perGpu"), dict):
        return None
    layout = Layout(bool(record.get("migEnabled")), dict(record["perGpu"]))
    words = MigConfigs({}, str(record.get("source") or ""), str(record.get("note") or ""))
    return layout, words


def bottlerocket_refusal(node: Node, config: str) -> str | None:
    """One line refusing a Bottlerocket node, naming the Bottlerocket way; None elsewhere."""
    seen = bottlerocket_os(node)
    if seen is None:
        return None
    head = (
        f"node {node.name} runs {seen}: Bottlerocket makes its MIG layout itself at boot, from "
        "settings.kubelet-device-plugins.nvidia (device-partitioning-strategy, mig.profile) "
        "through its nvidia-migmanager, not nvidia-mig-parted, so this runbook leaves it alone"
    )
    model = identify_gpus(node).model
    if not config or model is None:
        return f"{head}; set those settings in the node's user data and replace it"
    try:
        mig = settings_for(config, model)
    except BottlerocketError as exc:
        return f"{head}; {exc}"
    version = os_version(node)
    too_old = (
        f" (this node's {version} is older than {mig.since}: replace it)"
        if version is not None and version_tuple(version) < version_tuple(mig.since)
        else ""
    )
    return (
        f"{head}; new nodes: `mignurse userdata --os bottlerocket --gpu-product {model.name} "
        f"--config {config}` in the EC2NodeClass; this one: `{apiclient_command(mig)}` from its "
        f"admin container, then reboot it{too_old}"
    )


def resolve_target(ctx: StepContext) -> MigTarget:
    """The node, the config to apply and its per-GPU layout; StepFailed (one line) if unusable."""
    raw = get_node(ctx)
    node = Node.from_api(raw)
    config = str(ctx.param("config") or "") or node.labels.get(LABEL_MIG_CONFIG, "")
    if not config:
        raise StepFailed(
            f"node {node.name} has no {LABEL_MIG_CONFIG} label: pass --param config=NAME"
        )
    identity = identify_gpus(node)
    if identity.model is None:
        raise StepFailed(
            f"cannot tell which GPU node {node.name} has ({identity.model_from}): "
            "MIG layouts are per GPU model"
        )
    family = identity.model
    mode = strategy(node) or "mixed"
    pinned = _pinned(ctx, config)
    if pinned is not None:
        kept, recorded = pinned
        return MigTarget(node, raw, config, family, identity.count, kept, mode, recorded)
    configs = cluster_configs(ctx)
    valid = valid_configs(family, configs)
    if config not in valid:
        raise StepFailed(
            f"unknown MIG config {config!r} for {family.name} in {configs.source}: use one of "
            + ", ".join(valid)
        )
    layout = expected_layout(config, family, configs.configs)
    if layout is None or layout.devices is None or layout.mig_enabled is None:
        note = layout.note if layout is not None else "not a standard layout"
        raise StepFailed(f"cannot build MIG config {config!r} for {family.name}: {note}")
    if mode == "single" and layout.mig_enabled and len(layout.devices) != 1:
        raise StepFailed(
            f"{config} mixes profiles ({describe_counts(layout.devices)}) but node {node.name} "
            "uses the single MIG strategy: the device plugin would advertise it as INVALID; "
            "choose an all-<profile> config"
        )
    return MigTarget(node, raw, config, family, identity.count, layout, mode, configs)


def migparted_config(config: str, layout: Layout) -> str:
    """A mig-parted v1 config file holding one config (NVIDIA/mig-parted v0.15.0 api/spec/v1)."""
    lines = ["version: v1", "mig-configs:", f"  {config}:", "  - devices: all"]
    if not layout.mig_enabled:
        lines.append("    mig-enabled: false")
    else:
        lines.append("    mig-enabled: true")
        devices = layout.devices or {}
        if not devices:
            lines.append("    mig-devices: {}")
        else:
            lines.append("    mig-devices:")
            lines += [f'      "{profile}": {count}' for profile, count in devices.items()]
    return "\n".join(lines) + "\n"
