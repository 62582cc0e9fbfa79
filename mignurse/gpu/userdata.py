"""User data that applies a MIG layout before kubelet starts: on AL2023 a shell script with
no hooks (below), on Bottlerocket its own settings (`build_bottlerocket`, facts in
`mignurse.gpu.bottlerocket`).

The answer to mig-manager restarting kubelet mid-bootstrap on cgroup v2 (it stops kubelet
when a host-driver node's MIG mode must change: NVIDIA/mig-parted@v0.15.0
pkg/mig/reconfigure/reconfigure.go): partition the GPUs on the host before kubelet exists, so
that nothing ever has to stop it. Pure functions: `build()` returns the texts, the CLI prints.

Decisions:
- **Where it runs.** A `text/x-shellscript` part of a MIME multi-part document, as
  Karpenter's EC2NodeClass `spec.userData` and launch templates take it for AL2023
  (Karpenter merges its own NodeConfig part into the document). cloud-init runs it in
  cloud-final (`scripts-user`); the AMI's `nodeadm-run.service`, which writes the kubelet
  config and starts kubelet, is ordered `After=nodeadm-config.service cloud-final.service`
  (EKSAMI templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service), so the
  layout is applied before kubelet starts. `After=` is ordering only: a script that fails
  still lets the node join, without the layout; the console says why.
- **Waiting for the driver, bounded.** Recent AL2023 NVIDIA AMIs load the kernel modules
  in parallel with cloud-init (`nvidia-kmod-load.service` After=network-online.target, or
  `nvidia-setup.service`), so the script polls `nvidia-smi -L` until it lists a GPU.
  Assumption (not verified per release): some older AMI releases ordered
  `nvidia-kmod-load.service` After=nodeadm-run.service; there the driver only appears
  after user data ends, the wait runs out, and the script says so and exits 3.
- **No hooks, two ways.** Every `nvidia-mig-parted` call runs under
  `env -u MIG_PARTED_HOOKS_FILE` (the packages' profile.d exports it:
  NVIDIA/mig-parted@v0.15.0 deployments/systemd/nvidia-mig-parted.sh) and `apply` also gets
  `-k` to a hooks file holding `hooks: {}`: nothing stops kubelet, kills containers or runs
  `systemctl daemon-reload`. The script itself never calls `systemctl`.
- **Where nvidia-mig-parted comes from**, in this order, the console saying which: the one on
  PATH (baked into the AMI); else the package named by `--mig-parted-package` (the
  `nvidia-mig-manager` RPM of NVIDIA/mig-parted's releases, a path or an http(s) URL, as the
  reported workaround installed 0.14.0), installed with `rpm -i --noscripts` because its
  %posttrans runs `systemctl daemon-reload` and `systemctl enable nvidia-mig-manager.service`
  (NVIDIA/mig-parted@v0.15.0 deployments/systemd/packages/rpm/SPECS/nvidia-mig-manager.spec;
  rpm(8): --noscripts includes --noposttrans); else the binary at `--mig-parted-url`, fetched
  with curl into /opt/mignurse/bin and checked against `--mig-parted-sha256` when given. Each
  must answer `--version` (urfave/cli's flag: cmd/nvidia-mig-parted/main.go sets c.Version).
  None usable: one console line naming what was tried, exit 4.
- **Sequence** (mig-manager's, reconfigure.go above, minus what a boot without GPU clients
  does not need): `assert` (0 → already applied, done) → `-d apply` → `assert` (must pass) →
  `nvidia-smi -L` (creates the MIG capability device nodes, MIG user guide "Device Nodes and
  Capabilities", and counts the GPUs) → `nvidia-smi mig -lgi` must list the layout's instances
  on every GPU: a mig-parted too old for the GPU has been seen to report success and create
  nothing (Project-HAMi/HAMi pull request 2135: v0.12.2 on RTX PRO 6000).
  Each mig-parted call is bounded by `timeout` (480 s, the host unit's TimeoutStartSec).
- **Config files** go to /etc/mignurse/mig-parted/, never over the files of a host
  `nvidia-mig-manager` package (/etc/nvidia-mig-manager/).
- **Names** are every config of NVIDIA's default mig-parted file (the catalogue in
  `mignurse.gpu.catalogue`, NVIDIA/mig-parted@v0.15.0), checked against the GPU's profile
  table (`mignurse.gpu.models`). Without a GPU product a name must mean the same layout on
  every GPU it is valid for (`all-1g.24gb` is 4×1g.24gb on H100 NVL, the 96 GB H100s and
  RTX PRO 6000); one that differs (`all-balanced`, `all-1g.10gb`) needs `--gpu-product`.
  The config has no `device-filter`: on the wrong GPU `apply` fails loudly instead of
  skipping every GPU and asserting an empty success.
- **Logging**: every step goes to stdout (cloud-init-output.log), `/dev/console` (the
  serial console that `aws ec2 get-console-output` shows; AL2023 boots with
  console=ttyS0, an assumption for custom AMIs) and the journal (`logger -t
  mignurse-userdata`, else `systemd-cat -t mignurse-userdata`). MIGNURSE_ROOT (a prefix for
  the files written) and MIGNURSE_CONSOLE exist for the tests' sandbox; cloud-init sets
  neither.
- **First boot only.** cloud-init runs user data once per instance, and Hopper/Blackwell
  lose MIG mode on reboot (MIG user guide, getting-started-with-mig): a rebooted node comes
  back with MIG off. Replace such a node rather than reboot it.

Exit codes of the script: 0 applied (or already applied), 1 apply or the final assert
failed, 3 no driver within the bound, 4 no usable `nvidia-mig-parted`, 5 `nvidia-smi mig -lgi`
does not show the layout.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import yaml

from mignurse.gpu.bottlerocket import (
    BottlerocketError,
    BottlerocketMig,
    settings_for,
    settings_toml,
)
from mignurse.gpu.catalogue import catalogue
from mignurse.gpu.clusterconfig import MigConfigs
from mignurse.gpu.models import MODELS, GpuModel, resolve_gpu
from mignurse.gpu.profiles import Layout, config_names, expected_layout
from mignurse.inert import inert_name

# A config name is the value of the node label nvidia.com/mig.config, and goes into the
# script's comments and the MIME part's file name (Kubernetes label values: RFC 1123 chars).
_LABEL_VALUE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
# GPUs a config can be checked for: those with MIG and a profile table.
MIG_MODELS: tuple[GpuModel, ...] = tuple(m for m in MODELS if m.mig_capable and m.profiles)
DEFAULT_DRIVER_WAIT_S = 300
MAX_DRIVER_WAIT_S = 600  # driver wait + a 480 s apply stay inside Karpenter's 15 min to register
DRIVER_POLL_S = 5
PROGRESS_EVERY_S = 30
MIG_PARTED_TIMEOUT_S = 480
CONFIG_DIR = "/etc/mignurse/mig-parted"
CONFIG_FILE = f"{CONFIG_DIR}/config.yaml"
HOOKS_FILE = f"{CONFIG_DIR}/hooks.yaml"
BIN_DIR = "/opt/mignurse/bin"  # a fetched nvidia-mig-parted: off PATH, used by full path
FETCH_TIMEOUT_S = 300
EMPTY_HOOKS = "version: v1\nhooks: {}\n"
CLUSTER_PLACEHOLDER = "CLUSTER-NAME"
BOUNDARY = "MIGNURSE-USERDATA-BOUNDARY"
LOG_TAG = "mignurse-userdata"
EXIT_APPLY_FAILED = 1
EXIT_NO_DRIVER = 3
EXIT_NO_MIG_PARTED = 4
EXIT_NOT_VERIFIED = 5
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_EKS_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")  # EKSAPI CreateCluster


class UserDataError(ValueError):
    """A config name or product the tables do not know; str() is the one line to show."""


@dataclass(frozen=True)
class MigPartedSource:
    """Where the node gets nvidia-mig-parted when the AMI has none: an RPM and a binary URL."""

    package: str = ""  # nvidia-mig-manager RPM: an absolute path or an http(s) URL
    url: str = ""  # the nvidia-mig-parted binary, http(s)
    sha256: str = ""  # of the binary at `url`; "" = not checked

    def check(self) -> None:
        """UserDataError naming the first value the node could not use."""
        for flag, value in (("--mig-parted-package", self.package), ("--mig-parted-url", self.url)):
            if value and (not value.isascii() or any(c.isspace() or ord(c) < 32 for c in value)):
                raise UserDataError(f"{flag} {value!r} must be ASCII without blanks")
        if self.package and not (self.package.startswith("/") or _is_http(self.package)):
            raise UserDataError(
                f"--mig-parted-package {self.package!r} is neither an absolute path on the node "
                "nor an http(s) URL"
            )
        if self.url and not _is_http(self.url):
            raise UserDataError(f"--mig-parted-url {self.url!r} is not an http(s) URL")
        if self.sha256 and not self.url:
            raise UserDataError("--mig-parted-sha256 goes with --mig-parted-url")
        if self.sha256 and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise UserDataError(f"--mig-parted-sha256 {self.sha256!r} is not 64 lowercase hex")


def _is_http(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


@dataclass(frozen=True)
class MigLayout:
    """The layout one config name gives every GPU, and the GPUs it was checked for."""

    config: str
    mig_enabled: bool
    devices: Mapping[str, int]
    checked_for: tuple[str, ...]  # GPU model names


@dataclass(frozen=True)
class UserData:
    layout: MigLayout
    mig_parted_config: str
    script: str
    mime: str


def _known_layout(config: str, model: GpuModel, configs: MigConfigs | None) -> Layout | None:
    layout = expected_layout(config, model, configs.configs if configs else None)
    if layout is None or layout.devices is None or layout.mig_enabled is None:
        return None
    return layout


def product_names() -> str:
    return ", ".join(model.name for model in MIG_MODELS)


def resolve_product(product: str) -> GpuModel:
    """The GPU model `--gpu-product` names whole: a model name (H100-80GB), an instance type
    (g7e.4xlarge), a PCI device id (0x233010DE), a product name (NVIDIA-H100-80GB-HBM3) or a
    Karpenter GPU name (h100); UserDataError otherwise, or for a GPU without MIG layouts."""
    model = resolve_gpu(product)
    if model is None:
        hint = (
            " (a100 is two GPUs: say A100-40GB or A100-80GB)" if product.strip() == "a100" else ""
        )
        raise UserDataError(
            f"--gpu-product {product!r} names no GPU mignurse knows{hint}: give one of "
            f"{product_names()}, a GPU name such as NVIDIA-H100-80GB-HBM3, a PCI device id "
            "such as 0x233010DE, or an instance type such as p5.48xlarge"
        )
    if model not in MIG_MODELS:
        why = "has no MIG" if not model.mig_capable else "has no layout in NVIDIA's MIG configs"
        raise UserDataError(f"--gpu-product {product!r} is {model.name}, which {why}")
    return model


def resolve_layout(
    config: str, model: GpuModel | None = None, configs: MigConfigs | None = None
) -> MigLayout:
    """The layout `config` means, on `model` or on every GPU it is valid for, in `configs`
    (a mig-parted file given with --mig-parted-file; NVIDIA's default file when None)."""
    if not _LABEL_VALUE.fullmatch(config):
        raise UserDataError(
            f"MIG config name {inert_name(config)} cannot be a nvidia.com/mig.config label "
            "value: 1 to 63 letters, digits, '.', '_' or '-', starting and ending with a letter "
            "or digit"
        )
    models = (model,) if model is not None else MIG_MODELS
    table = configs.configs if configs else None
    found: dict[str, Layout] = {}
    for candidate in models:
        if (layout := _known_layout(config, candidate, configs)) is not None:
            found[candidate.name] = layout
    in_file = f" in {configs.source}" if configs else ""
    if not found:
        if model is not None and config in (table if table is not None else catalogue().configs):
            note = expected_layout(config, model, table)
            why = note.note if note is not None else ""
            raise UserDataError(
                f"MIG config {config!r}{in_file} is not valid for {model.name}: {why}"
            )
        valid = sorted({name for m in models for name in config_names(m, table)})
        where = f" for {model.name}" if model is not None else ""
        names = f"valid names are {', '.join(valid)}" if valid else "it has no valid name"
        hint = (
            "; a config of your cluster's own file: give it with --mig-parted-file"
            if configs is None
            else ""
        )
        raise UserDataError(f"unknown MIG config {config!r}{where}{in_file}: {names}{hint}")
    distinct = {
        (layout.mig_enabled, tuple(sorted((layout.devices or {}).items())))
        for layout in found.values()
    }
    if len(distinct) > 1:
        raise UserDataError(
            f"MIG config {config!r} means a different layout on each GPU it is valid for: "
            f"pass --gpu-product, one of {', '.join(found)}"
        )
    first = next(iter(found.values()))
    return MigLayout(config, bool(first.mig_enabled), dict(first.devices or {}), tuple(found))


def mig_parted_config(layout: MigLayout) -> str:
    """The nvidia-mig-parted v1 config holding just this layout (api/spec/v1/spec.go)."""
    item: dict[str, object] = {"devices": "all", "mig-enabled": layout.mig_enabled}
    if layout.mig_enabled:
        item["mig-devices"] = dict(layout.devices)
    document = {"version": "v1", "mig-configs": {layout.config: [item]}}
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def _layout_words(layout: MigLayout) -> str:
    if not layout.mig_enabled:
        return "MIG off"
    if not layout.devices:
        return "MIG on, no instances"
    return " + ".join(f"{n}x{p}" for p, n in layout.devices.items()) + " per GPU"


_SCRIPT = """\
#!/bin/sh
# mignurse userdata: apply MIG config @CONFIG@ (@LAYOUT@) before kubelet starts.
# Checked for: @CHECKED@. Generated by: mignurse userdata --config @CONFIG@
# Runs in cloud-final; nodeadm-run.service (which starts kubelet) is ordered after it.
# Steps: wait for the driver -> nvidia-mig-parted (on PATH, else the package, else the URL)
# -> config and an empty hooks file -> assert/apply/assert -> verify with nvidia-smi mig -lgi.
# Never stops or restarts kubelet or containerd and never reloads systemd: no hooks run
# (MIG_PARTED_HOOKS_FILE unset, and -k to a file with "hooks: {}"), and a package is
# installed with rpm --noscripts, so none of its scriptlets runs either.
# Exit: 0 applied, 1 apply/assert failed, 3 no NVIDIA driver in @WAIT@ s, 4 no nvidia-mig-parted,
# 5 nvidia-smi mig -lgi does not show the layout.
set -u
ROOT="${MIGNURSE_ROOT:-}"
CONSOLE="${MIGNURSE_CONSOLE:-/dev/console}"
CONFIG_NAME=@CONFIG_Q@
CONFIG_FILE="$ROOT"@CONFIG_FILE_Q@
HOOKS_FILE="$ROOT"@HOOKS_FILE_Q@
BIN_DIR="$ROOT"@BIN_DIR_Q@
MIG_PARTED_PACKAGE=@PACKAGE_Q@
MIG_PARTED_URL=@URL_Q@
MIG_PARTED_SHA256=@SHA256_Q@
DRIVER_WAIT=@WAIT@
DRIVER_POLL=@POLL@
PROGRESS_EVERY=@PROGRESS@
MIG_PARTED_TIMEOUT=@MP_TIMEOUT@
FETCH_TIMEOUT=@FETCH_TIMEOUT@
PATH="${PATH:+$PATH:}/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin"
export PATH
unset MIG_PARTED_HOOKS_FILE

log() {
  line="@TAG@: $(date -u +%Y-%m-%dT%H:%M:%SZ) $*"
  echo "$line"
  { echo "$line" >>"$CONSOLE"; } 2>/dev/null || true
  logger -t @TAG@ -- "$*" 2>/dev/null || { echo "$*" | systemd-cat -t @TAG@; } 2>/dev/null \\
    || true
}

OUT=$(mktemp 2>/dev/null || echo "/tmp/@TAG@.$$")
trap 'rm -f "$OUT"' EXIT

# run CMD...: log the command, each line of its output and its exit code; return that code.
run() {
  log "run: $*"
  "$@" >"$OUT" 2>&1
  rc=$?
  while IFS= read -r out_line || [ -n "$out_line" ]; do log "  $out_line"; done <"$OUT"
  log "exit $rc"
  return $rc
}

not_applied() {
  log "MIG config $CONFIG_NAME NOT applied; kubelet will start without it"
  exit "$1"
}

log "start: MIG config $CONFIG_NAME (@LAYOUT@), no hooks, before kubelet"

# 1. The NVIDIA driver: nvidia-smi -L lists a GPU once the kernel modules are loaded.
started=$(date +%s)
last_progress=$started
probes=0
while :; do
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$OUT" 2>&1 \\
      && grep -q '^GPU ' "$OUT"; then
    break
  fi
  probes=$((probes + 1))
  last_error=$(tail -n 1 "$OUT" 2>/dev/null)
  [ "$probes" -eq 1 ] && log "waiting up to ${DRIVER_WAIT}s for the NVIDIA driver: $last_error"
  now=$(date +%s)
  waited=$((now - started))
  if [ "$waited" -ge "$DRIVER_WAIT" ]; then
    log "gave up: no NVIDIA driver after ${waited}s (bound ${DRIVER_WAIT}s): $last_error"
    not_applied @EXIT_NO_DRIVER@
  fi
  if [ $((now - last_progress)) -ge "$PROGRESS_EVERY" ]; then
    log "still waiting for the NVIDIA driver: ${waited}s of ${DRIVER_WAIT}s"
    last_progress=$now
  fi
  sleep "$DRIVER_POLL"
done
log "driver ready after $(( $(date +%s) - started ))s: $(grep -c '^GPU ' "$OUT") GPU(s)"
while IFS= read -r out_line; do log "  $out_line"; done <"$OUT"

# 2. nvidia-mig-parted: the one on PATH, else the package, else the URL; each must run.
usable() { "$1" --version >"$OUT" 2>&1; }
said() { head -n 1 "$OUT" 2>/dev/null; }
MIG_PARTED=
tried="none on PATH"
found=$(command -v nvidia-mig-parted 2>/dev/null)
if [ -n "$found" ]; then
  if usable "$found"; then
    MIG_PARTED=$found
    log "nvidia-mig-parted: preinstalled at $found ($(said))"
  else
    tried="$found does not run: $(said)"
  fi
fi
if [ -z "$MIG_PARTED" ] && [ -n "$MIG_PARTED_PACKAGE" ]; then
  log "nvidia-mig-parted: installing the package $MIG_PARTED_PACKAGE with rpm --noscripts"
  if run timeout "$FETCH_TIMEOUT" rpm -i --noscripts --nodeps --replacepkgs \\
      "$MIG_PARTED_PACKAGE"; then
    found=$(command -v nvidia-mig-parted 2>/dev/null)
    if [ -n "$found" ] && usable "$found"; then
      MIG_PARTED=$found
      log "nvidia-mig-parted: installed from the package $MIG_PARTED_PACKAGE at $found ($(said))"
    else
      tried="$tried; package $MIG_PARTED_PACKAGE: no runnable nvidia-mig-parted in it"
    fi
  else
    tried="$tried; package $MIG_PARTED_PACKAGE: $(tail -n 1 "$OUT" 2>/dev/null)"
  fi
fi
if [ -z "$MIG_PARTED" ] && [ -n "$MIG_PARTED_URL" ]; then
  part="$BIN_DIR/nvidia-mig-parted.part"
  log "nvidia-mig-parted: downloading $MIG_PARTED_URL"
  if mkdir -p "$BIN_DIR" && run timeout "$FETCH_TIMEOUT" curl -fsSL --retry 3 -o "$part" \\
      "$MIG_PARTED_URL"; then
    sum=$(sha256sum "$part" 2>/dev/null | cut -d ' ' -f 1)
    if [ -n "$MIG_PARTED_SHA256" ] && [ "$sum" != "$MIG_PARTED_SHA256" ]; then
      tried="$tried; URL $MIG_PARTED_URL: sha256 $sum, want $MIG_PARTED_SHA256"
      rm -f "$part"
    elif chmod 0755 "$part" && mv -f "$part" "$BIN_DIR/nvidia-mig-parted" \\
        && usable "$BIN_DIR/nvidia-mig-parted"; then
      MIG_PARTED="$BIN_DIR/nvidia-mig-parted"
      log "nvidia-mig-parted: downloaded from $MIG_PARTED_URL to $MIG_PARTED (sha256 $sum; $(said))"
    else
      tried="$tried; URL $MIG_PARTED_URL: the file does not run: $(said)"
    fi
  else
    tried="$tried; URL $MIG_PARTED_URL: $(tail -n 1 "$OUT" 2>/dev/null)"
    rm -f "$part"
  fi
fi
if [ -z "$MIG_PARTED" ]; then
  log "gave up: no usable nvidia-mig-parted (${tried}); bake it into the AMI or pass @HINT@"
  not_applied @EXIT_NO_MIG_PARTED@
fi

mig_parted() {
  run timeout "$MIG_PARTED_TIMEOUT" env -u MIG_PARTED_HOOKS_FILE "$MIG_PARTED" "$@"
}

# 3. The config and an empty hooks file.
mkdir -p "$(dirname "$CONFIG_FILE")"
cat >"$CONFIG_FILE" <<'MIGNURSE_CONFIG_EOF'
@CONFIG_YAML@MIGNURSE_CONFIG_EOF
cat >"$HOOKS_FILE" <<'MIGNURSE_HOOKS_EOF'
@HOOKS_YAML@MIGNURSE_HOOKS_EOF
log "wrote $CONFIG_FILE and $HOOKS_FILE (hooks: {})"

# 4. assert -> apply -> assert, with no hooks.
if mig_parted assert -f "$CONFIG_FILE" -c "$CONFIG_NAME"; then
  log "MIG config $CONFIG_NAME already applied"
else
  if ! mig_parted -d apply -f "$CONFIG_FILE" -c "$CONFIG_NAME" -k "$HOOKS_FILE"; then
    log "FAILED: nvidia-mig-parted apply (A100/A30 in a VM: the mode change may need a reboot)"
    not_applied @EXIT_APPLY_FAILED@
  fi
  if ! mig_parted assert -f "$CONFIG_FILE" -c "$CONFIG_NAME"; then
    log "FAILED: MIG config $CONFIG_NAME is not in place after apply"
    exit @EXIT_APPLY_FAILED@
  fi
fi

# 5. Verify with the driver: nvidia-smi -L creates the MIG capability device nodes and counts
# the GPUs; nvidia-smi mig -lgi must list the layout's instances on every GPU.
run nvidia-smi -L || true
gpus=$(grep -c '^GPU ' "$OUT")
bad=0
[ "$gpus" -gt 0 ] || { log "FAILED: nvidia-smi -L lists no GPU after apply"; bad=1; }
@VERIFY@
if [ "$bad" -ne 0 ]; then
  log "FAILED: MIG config $CONFIG_NAME asserted but the driver does not show it"
  exit @EXIT_NOT_VERIFIED@
fi
log "done: MIG config $CONFIG_NAME applied and verified; kubelet starts after cloud-final"
exit 0
"""

# `mig -lgi` rows: "|   0  MIG 1g.24gb   14   3   0:1   |" (GPU, Name, Profile ID, ...).
_VERIFY_DEVICES = """\
# "No GPU instances found" exits non-zero on some drivers: the count below is what counts.
run nvidia-smi mig -lgi || true
count() {
  awk -v p="$1" '$1 == "|" && $3 == "MIG" && (p == "" || $4 == p) { n++ } END { print n + 0 }' \\
    "$OUT"
}
expect() {  # expect PROFILE PER_GPU ("" = every instance)
  want=$(( $2 * gpus ))
  got=$(count "$1")
  what=${1:-instances}
  if [ "$got" -eq "$want" ]; then
    log "verified: nvidia-smi mig -lgi lists $got x $what ($2 per GPU on $gpus GPU(s))"
  else
    log "FAILED: nvidia-smi mig -lgi lists $got x $what, want $want ($2 per GPU)"
    bad=1
  fi
}
"""

_VERIFY_MIG_OFF = """\
run nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader || true
if grep -q 'Enabled' "$OUT"; then
  log "FAILED: a GPU still has MIG mode Enabled"
  bad=1
else
  log "verified: MIG mode is off on $gpus GPU(s)"
fi
"""


def _verify_block(layout: MigLayout) -> str:
    if not layout.mig_enabled:
        return _VERIFY_MIG_OFF.rstrip("\n")
    lines = [_VERIFY_DEVICES.rstrip("\n")]
    lines += [f"expect {shlex.quote(p)} {n}" for p, n in layout.devices.items()]
    lines.append(f"expect '' {sum(layout.devices.values())}")
    return "\n".join(lines)


def _hint(source: MigPartedSource) -> str:
    if source.package or source.url:
        return "another --mig-parted-package or --mig-parted-url"
    return "--mig-parted-package or --mig-parted-url to mignurse userdata"


def shell_script(
    layout: MigLayout,
    *,
    source: MigPartedSource = MigPartedSource(),
    driver_wait_s: int = DEFAULT_DRIVER_WAIT_S,
    driver_poll_s: int = DRIVER_POLL_S,
    progress_every_s: int = PROGRESS_EVERY_S,
) -> str:
    """The POSIX sh script (ASCII, as the MIME part declares)."""
    words = {
        "@CONFIG_Q@": shlex.quote(layout.config),
        "@CONFIG_FILE_Q@": shlex.quote(CONFIG_FILE),
        "@HOOKS_FILE_Q@": shlex.quote(HOOKS_FILE),
        "@BIN_DIR_Q@": shlex.quote(BIN_DIR),
        "@PACKAGE_Q@": shlex.quote(source.package),
        "@URL_Q@": shlex.quote(source.url),
        "@SHA256_Q@": shlex.quote(source.sha256),
        "@CONFIG_YAML@": mig_parted_config(layout),
        "@HOOKS_YAML@": EMPTY_HOOKS,
        "@VERIFY@": _verify_block(layout),
        "@HINT@": _hint(source),
        "@CONFIG@": layout.config,
        "@LAYOUT@": _layout_words(layout),
        "@CHECKED@": ", ".join(layout.checked_for),
        "@WAIT@": str(driver_wait_s),
        "@POLL@": str(driver_poll_s),
        "@PROGRESS@": str(progress_every_s),
        "@MP_TIMEOUT@": str(MIG_PARTED_TIMEOUT_S),
        "@FETCH_TIMEOUT@": str(FETCH_TIMEOUT_S),
        "@TAG@": LOG_TAG,
        "@EXIT_NO_DRIVER@": str(EXIT_NO_DRIVER),
        "@EXIT_NO_MIG_PARTED@": str(EXIT_NO_MIG_PARTED),
        "@EXIT_APPLY_FAILED@": str(EXIT_APPLY_FAILED),
        "@EXIT_NOT_VERIFIED@": str(EXIT_NOT_VERIFIED),
    }
    script = _SCRIPT
    for word, value in words.items():
        script = script.replace(word, value)
    return script


def mime_document(script: str, *, filename: str) -> str:
    """A one-part MIME multi-part document, the shape Karpenter requires for AL2023."""
    if BOUNDARY in script or not script.isascii():
        raise ValueError("the script must be ASCII and must not hold the MIME boundary")
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
        "\n"
        f"--{BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "Content-Transfer-Encoding: 7bit\n"
        f'Content-Disposition: attachment; filename="{filename}"\n'
        "\n"
        # The line break before a boundary belongs to it: the extra one keeps the script's.
        f"{script.rstrip(chr(10))}\n\n"
        f"--{BOUNDARY}--\n"
    )


def build(
    config: str,
    *,
    gpu_product: str | None = None,
    source: MigPartedSource = MigPartedSource(),
    driver_wait_s: int = DEFAULT_DRIVER_WAIT_S,
    driver_poll_s: int = DRIVER_POLL_S,
    progress_every_s: int = PROGRESS_EVERY_S,
    configs: MigConfigs | None = None,
) -> UserData:
    """User data for `config` (of `configs`, else of NVIDIA's default file); UserDataError for
    a name or product the tables do not know."""
    if not 1 <= driver_wait_s <= MAX_DRIVER_WAIT_S:
        raise UserDataError(
            f"--driver-wait {driver_wait_s} is out of range: 1 to {MAX_DRIVER_WAIT_S} seconds"
        )
    source.check()
    model = resolve_product(gpu_product) if gpu_product is not None else None
    layout = resolve_layout(config, model, configs)
    script = shell_script(
        layout,
        source=source,
        driver_wait_s=driver_wait_s,
        driver_poll_s=driver_poll_s,
        progress_every_s=progress_every_s,
    )
    mime = mime_document(script, filename=f"mignurse-mig-{config}.sh")
    return UserData(layout, mig_parted_config(layout), script, mime)


@dataclass(frozen=True)
class BottlerocketUserData:
    mig: BottlerocketMig
    toml: str


def build_bottlerocket(config: str, *, gpu_product: str | None) -> BottlerocketUserData:
    """Bottlerocket's settings TOML for `config` on the GPU `gpu_product` names; UserDataError
    (one line) for a GPU or config Bottlerocket's MIG manager cannot make."""
    if gpu_product is None:
        raise UserDataError(
            "--os bottlerocket needs --gpu-product: Bottlerocket keys its MIG profile by GPU"
        )
    model = resolve_product(gpu_product)
    if config not in catalogue().configs:
        valid = ", ".join(config_names(model))
        raise UserDataError(
            f"unknown MIG config {config!r} for {model.name}: valid names are {valid}"
        )
    try:
        mig = settings_for(config, model)
    except BottlerocketError as exc:
        raise UserDataError(str(exc)) from None
    product = shlex.quote(gpu_product)
    command = f"mignurse userdata --os bottlerocket --gpu-product {product} --config {config}"
    return BottlerocketUserData(mig, settings_toml(mig, generated_by=command))


def default_nodeclass_name(config: str) -> str:
    return f"mig-{config}".lower()


def ec2nodeclass_yaml(user_data: UserData, *, name: str, cluster: str | None = None) -> str:
    """A karpenter.k8s.aws/v1 EC2NodeClass carrying the user data. Without `cluster` the
    role and discovery tags hold CLUSTER_PLACEHOLDER to edit: not `${CLUSTER_NAME}` as in
    Karpenter's getting-started manifests, since a bare `envsubst` would also empty the
    script's own `$VARIABLES`."""
    layout = user_data.layout
    header = (
        f"# EC2NodeClass for MIG config {layout.config} ({_layout_words(layout)}), "
        "generated by mignurse userdata.\n"
        "# {first_step} a NodePool at it. Keep the GPU operator's mig-manager off its\n"
        '# nodes (NodePool label nvidia.com/gpu.deploy.mig-manager: "false"), or label\n'
        f"# them nvidia.com/mig.config: {layout.config} so it finds the layout applied.\n"
    )
    return _nodeclass(header, "al2023@latest", user_data.mime, name=name, cluster=cluster)


def bottlerocket_ec2nodeclass_yaml(
    mig: BottlerocketMig, toml: str, *, name: str, cluster: str | None = None
) -> str:
    """The EC2NodeClass for Bottlerocket: its `userData` is the settings TOML, which Karpenter
    merges with its own (aws/karpenter-provider-aws website concepts/nodeclasses.md)."""
    header = (
        f"# EC2NodeClass for MIG config {mig.config} ({mig.words()}), generated by mignurse\n"
        f"# userdata, for Bottlerocket {mig.since} or later.\n"
        "# {first_step} a NodePool of NVIDIA instances at it (Karpenter picks\n"
        "# the -nvidia variant). No GPU operator mig-manager: Bottlerocket makes the layout.\n"
    )
    return _nodeclass(header, "bottlerocket@latest", toml, name=name, cluster=cluster)


def _nodeclass(header: str, alias: str, user_data: str, *, name: str, cluster: str | None) -> str:
    if not _K8S_NAME.match(name):
        raise UserDataError(
            f"--name {name!r} is not a valid Kubernetes name (lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit)"
        )
    if cluster is not None and not _EKS_CLUSTER_NAME.match(cluster):
        raise UserDataError(f"--cluster {cluster!r} is not a valid EKS cluster name")
    cluster_name = cluster or CLUSTER_PLACEHOLDER
    body = "".join(f"    {line}\n" if line else "\n" for line in user_data.splitlines())
    first_step = (
        f"Replace {CLUSTER_PLACEHOLDER} (or pass --cluster), then point"
        if cluster is None
        else "Point"
    )
    return (
        header.replace("{first_step}", first_step) + "apiVersion: karpenter.k8s.aws/v1\n"
        "kind: EC2NodeClass\n"
        "metadata:\n"
        f"  name: {name}\n"
        "spec:\n"
        "  amiSelectorTerms:\n"
        f"    - alias: {alias}\n"
        f'  role: "KarpenterNodeRole-{cluster_name}"\n'
        "  subnetSelectorTerms:\n"
        "    - tags:\n"
        f'        karpenter.sh/discovery: "{cluster_name}"\n'
        "  securityGroupSelectorTerms:\n"
        "    - tags:\n"
        f'        karpenter.sh/discovery: "{cluster_name}"\n'
        "  userData: |\n"
        f"{body}"
    )
