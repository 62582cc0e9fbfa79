"""NodeSandbox: a fake GPU node's files and commands, for the collector's tests and the demo.

`root/fs/` holds the node's files (read by the collector through MIGNURSE_ROOT); `root/bin/`
holds stub `journalctl`, `nvidia-smi`, `nvidia-mig-parted`, `systemctl`, `cloud-init`,
`crictl` and a `stat` shim that serve `root/data/`; every stub appends its argv to
`root/calls.log`, so a test can prove that collection never restarted or changed anything.

Stories: `mig-hook` (AL2023, cgroup v2, kubelet stopped ~40 s after its first start and
restarted, containerd loses its cgroups, 8 H100 with MIG on and no MIG devices: the incident of
NVIDIA/mig-parted#368), `dcgm-loop` and `healthy` (quiet journals, nvidia-smi fine).

MIG is state, not fixture text: `root/state/mig.json` holds every GPU's MIG mode and instances,
and `nvidia-smi`, `nvidia-mig-parted`, `lsof` and (when installed) `mignurse probe` are served
by `mignurse/sim/nodemig.py` from it, so an `apply` changes what the next `assert` or
`nvidia-smi -L` sees. The state and the knobs (`root/state/knobs.json`: Ampere reset refused,
apply exits 1, GPU processes left, host nvidia-mig-manager.service, probe installed) are written
only when missing or when a fact names them: `for_node` on the same folder keeps both. Like the
packages' profile.d file (docs/mig.md), the node's environment sets `MIG_PARTED_HOOKS_FILE`
to shipped hooks that daemon-reload and stop kubelet, so a call that forgets `env -u` shows in
the call log.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mignurse.gpu import clusterconfig
from mignurse.gpu.models import by_product_name
from mignurse.gpu.profiles import standard_layouts
from mignurse.model import LABEL_COMPUTE_TYPE, Node
from mignurse.model.fields import COMPUTE_TYPE_AUTO
from mignurse.nodeaccess.base import CommandResult, NodeShell
from mignurse.nodeaccess.local import LocalShell
from mignurse.sim import hardware, nodemig

STORIES = ("mig-hook", "dcgm-loop", "healthy")
H100 = "NVIDIA H100 80GB HBM3"
# scenario fact → nodemig knob (see nodemig.KNOB_DEFAULTS)
MIG_KNOB_FACTS = {
    "mig_reboot_required": "modeChangeNeedsReboot",
    "mig_apply_fails": "applyFails",
    "gpu_processes": "gpuProcesses",
    "host_mig_manager": "hostMigManager",
    "mignurse_probe": "probe",
    "cdi_spec": "cdiSpec",
}
BUS_IDS = ("53", "64", "75", "86", "97", "A8", "B9", "CA")  # p5.48xlarge, nvidia-smi order

OS_RELEASE_AL2023 = """\
NAME="Amazon Linux"
VERSION="2023"
ID="amzn"
ID_LIKE="fedora"
VERSION_ID="2023"
PLATFORM_ID="platform:al2023"
PRETTY_NAME="Amazon Linux 2023.9.20251117"
ANSI_COLOR="0;33"
CPE_NAME="cpe:2.3:o:amazon:amazon_linux:2023"
HOME_URL="https://aws.amazon.com/linux/amazon-linux-2023/"
SUPPORT_END="2029-06-30"
"""


@dataclass(frozen=True)
class StubCall:
    command: str
    args: tuple[str, ...]


class NodeSandbox:
    """A node's files under `root/fs` and stub commands under `root/bin`.

    scenario_facts: `story` (one of STORIES), `created` (datetime or RFC 3339 string: when the
    Node registered), `gpus` (int), `gpu_name`, `cgroup` ("cgroup2fs" | "tmpfs"); MIG:
    `mig_mode` ("Enabled" | "Disabled": the start state, by default Enabled for the mig-hook
    story) and the knobs of `set_mig_knobs` by their fact names (MIG_KNOB_FACTS).
    """

    def __init__(self, root: Path, *, node: str, scenario_facts: dict[str, Any]) -> None:
        self.root = Path(root)
        self.node = node
        self.story = str(scenario_facts.get("story", "healthy"))
        if self.story not in STORIES:
            raise ValueError(f"unknown story {self.story!r}: one of {', '.join(STORIES)}")
        created = scenario_facts.get("created") or datetime.now(UTC)
        if isinstance(created, str):
            created = datetime.fromisoformat(created.replace("Z", "+00:00"))
        self.created: datetime = created.astimezone(UTC)
        self.gpus = int(scenario_facts.get("gpus", 8))
        self.gpu_name = str(scenario_facts.get("gpu_name", H100))
        self.cgroup = str(scenario_facts.get("cgroup", "cgroup2fs"))
        self.fs = self.root / "fs"
        self.bin = self.root / "bin"
        self.data = self.root / "data"
        self.calls_log = self.root / "calls.log"
        self.state_dir = self.root / "state"
        self._mig_mode = scenario_facts.get("mig_mode")
        self._mig_layout: dict[str, int] | None = scenario_facts.get("mig_layout")
        self._uuid_seed = str(scenario_facts.get("gpu_uuid_seed", ""))
        self._driver = str(scenario_facts.get("driver") or nodemig.DRIVER)
        self._knob_facts = {
            knob: scenario_facts[fact]
            for fact, knob in MIG_KNOB_FACTS.items()
            if fact in scenario_facts
        }
        self._build()

    @classmethod
    def for_node(
        cls,
        root: Path,
        node_json: dict[str, Any],
        *,
        story: str,
        mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
        cdi: bool = False,
    ) -> NodeSandbox:
        """A sandbox for a simulator Node object: its name, creation time, GPUs (capacity, or
        GFD's `nvidia.com/gpu.count` where the DRA driver publishes them), their NVML name,
        the driver its labels name, and on a calm node whose GPUs the DRA driver publishes the
        MIG layout its labels say was applied (`mig.config.state=success`, or user data with
        mig-manager off). The GPU UUIDs are the node's own, as its ResourceSlice shows them.

        `mig_layouts`: config → MIG devices per GPU of the mig-parted file the cluster's GPU
        operator has mig-manager read for this node (`OperatorFiles`); given, a calm node holds
        the layout its labels say was applied in that file, whatever advertises its GPUs.
        `cdi`: the cluster's GPU operator runs with CDI on (`OperatorFiles.cdi`): the node
        holds its toolkit's management CDI spec."""
        meta = node_json.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = str(meta.get("name", "node"))
        capacity = (node_json.get("status") or {}).get("capacity", {}).get("nvidia.com/gpu")
        # a DRA node advertises no nvidia.com/gpu: GFD's count says how many there are
        gpu_count = str(capacity or "") or str(labels.get("nvidia.com/gpu.count") or "")
        product = labels.get("nvidia.com/gpu.product", "")
        model = by_product_name(product) if product else None
        gpu_name = (
            model.product_names[0]
            if model is not None and model.product_names
            else product.replace("-", " ")
        )
        facts: dict[str, Any] = {
            "story": story,
            "created": meta.get("creationTimestamp"),
            "gpus": int(gpu_count) if gpu_count.isdigit() else 8,
            "gpu_name": gpu_name if gpu_name.startswith("NVIDIA") else H100,
            "gpu_uuid_seed": name,
        }
        driver = labels.get("nvidia.com/cuda.driver-version.full")
        if driver:
            facts["driver"] = driver
        if cdi:
            facts["cdi_spec"] = True
        status = node_json.get("status") or {}
        # GPUs the DRA driver publishes (GFD saw them, kubelet advertises none): their sandbox
        # holds the layout the slices show
        published_by_dra = labels.get("nvidia.com/gpu.present") == "true" and not [
            r for r in status.get("capacity") or {} if str(r).startswith("nvidia.com/")
        ]
        if mig_layouts is not None:
            layout = _applied_layout(labels, mig_layouts)
        else:
            layout = _applied_layout(labels) if published_by_dra else None
        if story == "healthy" and layout:
            facts["mig_mode"] = "Enabled"
            facts["mig_layout"] = layout
        return cls(root, node=name, scenario_facts=facts)

    # -- what a test uses ---------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        shipped = self.fs / "etc/nvidia-mig-manager"
        return {
            "MIGNURSE_ROOT": str(self.fs),
            # /etc/profile.d/nvidia-mig-parted.sh of the mig-parted packages
            "MIG_PARTED_CONFIG_FILE": str(shipped / "config.yaml"),
            "MIG_PARTED_HOOKS_FILE": str(shipped / "hooks.yaml"),
        }

    # -- MIG state and knobs ----------------------------------------------------------------

    def mig_state(self) -> dict[str, Any]:
        """The GPUs as nodemig keeps them: index, name, current/pending mode, instances."""
        state: dict[str, Any] = json.loads((self.state_dir / "mig.json").read_text())
        return state

    def mig_knobs(self) -> dict[str, Any]:
        raw = json.loads((self.state_dir / "knobs.json").read_text())
        return {**nodemig.KNOB_DEFAULTS, **raw}

    def set_mig_knobs(self, **facts: Any) -> None:
        """Change knobs by fact name: mig_reboot_required (bool), mig_apply_fails ("" | "mode"
        | "config"), gpu_processes (list of {pid, name, gpu, usedMiB}), host_mig_manager
        ("absent" | "inactive" | "active"), mignurse_probe (bool), cdi_spec (bool: the
        operator's toolkit, its management CDI spec and the validator's driver-ready file)."""
        unknown = set(facts) - set(MIG_KNOB_FACTS)
        if unknown:
            known = ", ".join(MIG_KNOB_FACTS)
            raise ValueError(f"unknown MIG knob {sorted(unknown)[0]!r}: one of {known}")
        knobs = self.mig_knobs()
        knobs.update({MIG_KNOB_FACTS[k]: v for k, v in facts.items()})
        (self.state_dir / "knobs.json").write_text(json.dumps(knobs, indent=1))
        self._probe_stub(bool(knobs.get("probe")))
        self._cdi_build(bool(knobs.get("cdiSpec")))

    def mig_parted_runs(self) -> list[dict[str, Any]]:
        """Every nvidia-mig-parted run: argv, MIG_PARTED_HOOKS_FILE as it saw it, hooks run, rc."""
        log = self.state_dir / "mig-parted.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    @property
    def path_prefix(self) -> list[str]:
        return [str(self.bin)]

    def calls(self) -> list[StubCall]:
        if not self.calls_log.exists():
            return []
        found = []
        for line in self.calls_log.read_text().splitlines():
            words = shlex.split(line)
            if words:
                found.append(StubCall(words[0], tuple(words[1:])))
        return found

    def stub(self, name: str, body: str, folder: Path | None = None) -> Path:
        """Replace (or add) a stub command (in `bin/`, else in `folder`); `body` is sh run
        after the call is logged."""
        path = (folder or self.bin) / name
        log = shlex.quote(str(self.calls_log))
        path.write_text(
            "#!/bin/sh\n"
            "# sandbox stub: log argv (shell-quoted), then serve data\n"
            f'{{ printf %s {shlex.quote(name)}; for a in "$@"; do printf " \'%s\'" "$a"; done; '
            f"echo; }} >>{log}\n"
            f"D={shlex.quote(str(self.data))}\n" + body
        )
        path.chmod(0o755)
        return path

    # -- building ------------------------------------------------------------------------------

    def _t(self, seconds: float) -> str:
        when = self.created + timedelta(seconds=seconds)
        return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+0000"

    def _line(self, seconds: float, ident: str, message: str) -> str:
        return f"{self._t(seconds)} {self.node} {ident}: {message}"

    def _build(self) -> None:
        for folder in (self.fs / "etc", self.fs / "var/log", self.fs / "sys/fs/cgroup"):
            folder.mkdir(parents=True, exist_ok=True)
        for folder in (self.bin, self.data, self.fs / "dev/nvidia-caps"):
            folder.mkdir(parents=True, exist_ok=True)
        (self.fs / "etc/os-release").write_text(OS_RELEASE_AL2023)
        for name in [f"nvidia{i}" for i in range(self.gpus)] + ["nvidiactl", "nvidia-uvm"]:
            (self.fs / "dev" / name).write_text("")
        (self.fs / "var/log/cloud-init.log").write_text(self._cloud_init_log())
        (self.fs / "var/log/cloud-init-output.log").write_text(
            "Cloud-init v. 22.2.2 running 'modules:final'\n"
            f"Cloud-init v. 22.2.2 finished at {self.created:%a, %d %b %Y %H:%M:%S} +0000. "
            "Up 28.41 seconds\n"
        )
        data = {
            "kubelet.log": self._kubelet(),
            "containerd.log": self._containerd(),
            "nodeadm.log": self._nodeadm(),
            "kernel.log": self._kernel(),
            "cloud-init-status.txt": self._cloud_init_status(),
            "crictl-ps.txt": "CONTAINER  IMAGE  CREATED  STATE  NAME  ATTEMPT  POD ID  POD\n",
        }
        for name, text in data.items():
            (self.data / name).write_text(text)
        self._cloud_init_files()
        self._mig_build()
        self._stubs()

    def _stubs(self) -> None:
        self.stub(
            "journalctl",
            "unit=; kern=; boot=\n"
            'while [ $# -gt 0 ]; do case $1 in -u) unit="$unit $2"; shift ;; -k) kern=1 ;;\n'
            "  -b) boot=$2; shift ;; esac; shift; done\n"
            'case "$kern:$boot:$unit" in\n'
            "  1:-1:*) echo 'Data from the specified boot (-1) is not available: "
            "No such boot ID in journal' >&2; exit 1 ;;\n"
            '  1:*) exec cat "$D/kernel.log" ;;\n'
            '  *kubelet*) exec cat "$D/kubelet.log" ;;\n'
            '  *containerd*) exec cat "$D/containerd.log" ;;\n'
            '  *nodeadm*) exec cat "$D/nodeadm.log" ;;\n'
            "esac\necho '-- No entries --'\n",
        )
        for tool in ("nvidia-smi", "nvidia-mig-parted", "lsof"):
            self.stub(tool, self._nodemig(tool))
        self._probe_stub(bool(self.mig_knobs().get("probe")))
        self._cdi_build(bool(self.mig_knobs().get("cdiSpec")))
        knobs = shlex.quote(str(self.state_dir / "knobs.json"))
        self.stub(
            "systemctl",
            'case "$*" in *--failed*) echo "  UNIT LOAD ACTIVE SUB DESCRIPTION"; '
            'echo "0 loaded units listed."; exit 0 ;; esac\n'
            # the host nvidia-mig-manager.service, read-only questions only (knob hostMigManager)
            f'host=$(sed -n \'s/.*"hostMigManager": *"\\([a-z]*\\)".*/\\1/p\' {knobs})\n'
            'case "$1:$2:${host:-absent}" in\n'
            "  is-active:nvidia-mig-manager*:active) echo active; exit 0 ;;\n"
            "  is-active:*) echo inactive; exit 3 ;;\n"
            "  is-enabled:nvidia-mig-manager*:active) echo enabled; exit 0 ;;\n"
            "  is-enabled:nvidia-mig-manager*:inactive) echo disabled; exit 1 ;;\n"
            '  is-enabled:*) echo "Failed to get unit file state for $2: No such file or '
            'directory" >&2; exit 1 ;;\n'
            "esac\n"
            "echo 'sandbox systemctl: refused' >&2; exit 1\n",
        )
        self.stub("cloud-init", _CLOUD_INIT_STUB)
        self.stub(
            "crictl",
            '[ "$1" = ps ] && exec cat "$D/crictl-ps.txt"\nexit 1\n',
        )
        cgroup = shlex.quote(self.cgroup)
        self.stub(
            "stat",
            'case "$*" in "-fc %T "*/sys/fs/cgroup*) echo ' + cgroup + "; exit 0 ;; esac\n"
            'for s in /usr/bin/stat /bin/stat; do [ -x "$s" ] && exec "$s" "$@"; done\nexit 127\n',
        )

    # -- journals ---------------------------------------------------------------------------

    def _kubelet(self) -> str:
        node = self.node
        lines = [
            self._line(-3.0, "systemd[1]", "Starting kubelet.service - Kubernetes Kubelet..."),
            self._line(-2.99, "systemd[1]", "Started kubelet.service - Kubernetes Kubelet."),
            self._line(
                -2.7,
                "kubelet[2345]",
                f'I{self.created:%m%d %H:%M:%S}.000000    2345 server.go:1234] "Started kubelet"',
            ),
            self._line(
                -0.3,
                "kubelet[2345]",
                f"I{self.created:%m%d %H:%M:%S}.000000    2345 kubelet_node_status.go:75] "
                f'"Attempting to register node" node="{node}"',
            ),
            self._line(
                0.0,
                "kubelet[2345]",
                f"I{self.created:%m%d %H:%M:%S}.000000    2345 kubelet_node_status.go:78] "
                f'"Successfully registered node" node="{node}"',
            ),
            self._line(
                10.4,
                "kubelet[2345]",
                f"I{self.created:%m%d %H:%M:%S}.000000    2345 kubelet_node_status.go:501] "
                '"Fast updating node status as it just became ready"',
            ),
        ]
        if self.story != "mig-hook":
            return "\n".join(lines) + "\n"
        restart = self.created + timedelta(seconds=68)
        lines += [
            self._line(37.0, "systemd[1]", "Stopping kubelet.service - Kubernetes Kubelet..."),
            self._line(37.04, "systemd[1]", "kubelet.service: Deactivated successfully."),
            self._line(37.05, "systemd[1]", "Stopped kubelet.service - Kubernetes Kubelet."),
            self._line(67.0, "systemd[1]", "Starting kubelet.service - Kubernetes Kubelet..."),
            self._line(67.01, "systemd[1]", "Started kubelet.service - Kubernetes Kubelet."),
            self._line(
                68.0,
                "kubelet[4021]",
                f'I{restart:%m%d %H:%M:%S}.000000    4021 server.go:1234] "Started kubelet"',
            ),
            self._line(
                71.0,
                "kubelet[4021]",
                f"E{restart:%m%d %H:%M:%S}.000000    4021 pod_workers.go:1301] "
                '"Error syncing pod, skipping" err="failed to \\"CreatePodSandbox\\" for '
                '\\"nvidia-device-plugin-daemonset-x7k2p_gpu-operator\\" with '
                "CreatePodSandboxError: unable to apply cgroup configuration: mkdir "
                "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice: no such file or "
                'directory" pod="gpu-operator/nvidia-device-plugin-daemonset-x7k2p"',
            ),
            self._line(
                74.0,
                "kubelet[4021]",
                f"I{restart:%m%d %H:%M:%S}.000000    4021 setters.go:602] "
                f'"Node became not ready" node="{node}" condition={{"type":"Ready",'
                '"status":"False","reason":"KubeletNotReady","message":"container runtime is '
                'down"}',
            ),
        ]
        return "\n".join(lines) + "\n"

    def _containerd(self) -> str:
        def logrus(seconds: float, level: str, msg: str) -> str:
            stamp = (self.created + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            return self._line(seconds, "containerd[1234]", f'time="{stamp}" level={level} {msg}')

        lines = [
            self._line(
                -7.0, "systemd[1]", "Starting containerd.service - containerd container runtime..."
            ),
            logrus(-6.9, "info", 'msg="starting containerd" version=1.7.27'),
            logrus(-6.8, "info", 'msg="serving..." address=/run/containerd/containerd.sock'),
            self._line(
                -6.79, "systemd[1]", "Started containerd.service - containerd container runtime."
            ),
        ]
        if self.story == "mig-hook":
            lines += [
                logrus(
                    15.0,
                    "info",
                    'msg="RunPodSandbox for &PodSandboxMetadata{Name:nvidia-mig-manager-4kq9d,'
                    'Uid:7b0c1f2e-5d3a-4e8b-9c1a-0f2e3d4c5b6a,Namespace:gpu-operator,Attempt:0,}"',
                ),
                logrus(
                    70.9,
                    "error",
                    'msg="RunPodSandbox for &PodSandboxMetadata{Name:nvidia-device-plugin-'
                    "daemonset-x7k2p,Uid:3c1d0e55,Namespace:gpu-operator,Attempt:0,} failed, "
                    'error" error="failed to create containerd task: failed to create shim task: '
                    "OCI runtime create failed: runc create failed: unable to start container "
                    "process: unable to apply cgroup configuration: mkdir /sys/fs/cgroup/"
                    'kubepods.slice/kubepods-besteffort.slice: no such file or directory: unknown"',
                ),
                logrus(
                    72.1,
                    "error",
                    'msg="failed to load cgroup for task" error="cgroups: cgroup deleted" '
                    "id=5a4b3c2d1e0f",
                ),
            ]
        return "\n".join(lines) + "\n"

    def _nodeadm(self) -> str:
        config, run = "nodeadm-config.service", "nodeadm-run.service"
        lines = [
            self._line(-40.0, "systemd[1]", f"Starting {config} - EKS Nodeadm Config..."),
            self._line(-38.5, "nodeadm[1802]", '{"level":"info","msg":"Loading configuration"}'),
            self._line(-37.9, "systemd[1]", f"Finished {config} - EKS Nodeadm Config."),
            self._line(-9.0, "systemd[1]", f"Starting {run} - EKS Nodeadm Run..."),
            self._line(-3.1, "systemd[1]", f"Finished {run} - EKS Nodeadm Run."),
        ]
        return "\n".join(lines) + "\n"

    def _kernel(self) -> str:
        lines = [
            self._line(-60.0, "kernel", "Linux version 6.1.155-176.282.amzn2023.x86_64"),
            self._line(-31.2, "kernel", "nvidia: loading out-of-tree module taints kernel."),
            self._line(
                -30.9,
                "kernel",
                "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.172.08",
            ),
        ]
        return "\n".join(lines) + "\n"

    def _cloud_init_log(self) -> str:
        stamp = (self.created - timedelta(seconds=45)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        return (
            f"{stamp} - util.py[DEBUG]: Cloud-init v. 22.2.2 running 'init' at "
            f"{self.created:%a, %d %b %Y} . Up 6.12 seconds.\n"
            f"{stamp} - handlers.py[DEBUG]: finish: modules-final: SUCCESS: running modules "
            "for final\n"
        )

    def _cloud_init_status(self) -> str:
        # `cloud-init status --long` of 22.2.2, AL2023's release (cloudinit/cmd/status.py).
        finished = (self.created - timedelta(seconds=9)).strftime("%a, %d %b %Y %H:%M:%S +0000")
        return f"status: done\ntime: {finished}\ndetail:\nDataSourceEc2Local\n"

    def _cloud_init_files(self) -> None:
        """status.json and result.json as cloud-init 22.2.2 writes them (cmd/main.py
        status_wrapper): under /var/lib/cloud/data, linked from /run/cloud-init."""
        booted = self.created.timestamp() - 60
        stages = {
            "init-local": (3.9, 4.6), "init": (5.8, 7.3), "modules-init": (None, None),
            "modules-config": (7.6, 8.2), "modules-final": (8.4, 51.0),
        }  # fmt: skip
        v1: dict[str, Any] = {"datasource": "DataSourceEc2Local", "stage": None}
        for stage, (start, finished) in stages.items():
            v1[stage] = {
                "errors": [],
                "start": round(booted + start, 6) if start is not None else None,
                "finished": round(booted + finished, 6) if finished is not None else None,
            }
        data_dir, run_dir = self.fs / "var/lib/cloud/data", self.fs / "run/cloud-init"
        for folder in (data_dir, run_dir):
            folder.mkdir(parents=True, exist_ok=True)
        documents = {
            "status.json": {"v1": v1},
            "result.json": {"v1": {"datasource": "DataSourceEc2Local", "errors": []}},
        }
        for name, doc in documents.items():
            (data_dir / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            link = run_dir / name
            if not link.is_symlink():
                link.symlink_to(f"../../var/lib/cloud/data/{name}")

    # -- MIG ---------------------------------------------------------------------------------

    def _mig_build(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state = self.state_dir / "mig.json"
        fresh = not state.exists()
        if fresh or (self._mig_mode is not None and self._mig_layout is None):
            mode = self._mig_mode or ("Enabled" if self.story == "mig-hook" else "Disabled")
            initial = nodemig.initial_state(
                self.gpus,
                self.gpu_name,
                str(mode),
                node=self._uuid_seed,
                layout=self._mig_layout,
                driver=self._driver,
            )
            state.write_text(json.dumps(initial, indent=1))
        knobs_file = self.state_dir / "knobs.json"
        if not knobs_file.exists():
            defaults = dict(nodemig.KNOB_DEFAULTS)
            # A100s passed through to an EC2 VM refuse the reset (NVIDIA/gpu-operator#1606).
            defaults["modeChangeNeedsReboot"] = nodemig.architecture(self.gpu_name) == "Ampere"
            knobs_file.write_text(json.dumps(defaults, indent=1))
        if self._knob_facts:
            knobs = {**json.loads(knobs_file.read_text()), **self._knob_facts}
            knobs_file.write_text(json.dumps(knobs, indent=1))
        shipped = self.fs / "etc/nvidia-mig-manager"
        shipped.mkdir(parents=True, exist_ok=True)
        # The shipped hooks-default.yaml, cut to what matters here: apply-start daemon-reloads,
        # pre-apply-mode stops kubelet, apply-exit starts it again.
        (shipped / "hooks.yaml").write_text(
            "version: v1\nhooks:\n"
            "  apply-start:\n  - command: systemctl\n    args: [daemon-reload]\n"
            "  pre-apply-mode:\n  - command: systemctl\n    args: [stop, kubelet.service]\n"
            "  pre-apply-config:\n  - command: systemctl\n    args: [stop, kubelet.service]\n"
            "  apply-exit:\n  - command: systemctl\n"
            "    args: [start, --no-block, kubelet.service]\n"
        )
        (shipped / "config.yaml").write_text(
            "version: v1\nmig-configs:\n"
            "  all-disabled:\n  - devices: all\n    mig-enabled: false\n"
            "  all-enabled:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n"
        )

    def _nodemig(self, tool: str) -> str:
        """A stub body that hands the call to nodemig with this sandbox's state. It imports the
        module rather than running the file, so the call reads its cached bytecode instead of
        compiling 900 lines again (the fleet tests make hundreds of these calls)."""
        package_root = str(Path(nodemig.__file__).resolve().parents[2])
        code = (
            f"import sys; sys.path.insert(0, {package_root!r}); "
            "from mignurse.sim.nodemig import main; sys.exit(main(sys.argv[1:]))"
        )
        return (
            f"MIGSIM_ROOT={shlex.quote(str(self.root))} exec {shlex.quote(sys.executable)} -I "
            f'-c {shlex.quote(code)} {tool} "$@"\n'
        )

    def _probe_stub(self, installed: bool) -> None:
        if installed:
            self.stub("mignurse", self._nodemig("mignurse"))

    def _cdi_build(self, on: bool) -> None:
        """With CDI on: the toolkit's nvidia-ctk and nvidia-cdi-hook where the operator installs
        them, the validator's driver-ready (a host driver: roots `/`), and the management spec
        as the toolkit wrote it at its start, for the MIG devices of then (kept if there)."""
        if not on:
            return
        toolkit = self.fs / nodemig.TOOLKIT_DIR.lstrip("/")
        toolkit.mkdir(parents=True, exist_ok=True)
        self.stub("nvidia-ctk", self._nodemig("nvidia-ctk"), toolkit)
        self.stub("nvidia-cdi-hook", "exit 0\n", toolkit)
        ready = self.fs / nodemig.DRIVER_READY.lstrip("/")
        if not ready.exists():
            ready.parent.mkdir(parents=True, exist_ok=True)
            # (gpu-operator@v26.7.0 cmd/nvidia-validator/main.go createStatusFile, host driver)
            ready.write_text(
                "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\n"
                "NVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n"
            )
        spec = self.management_spec_file
        if not spec.exists():
            state = nodemig.GpuNodeState(self.root)
            nodemig.create_caps(state)
            spec.parent.mkdir(parents=True, exist_ok=True)
            spec.write_text(
                nodemig.management_spec(self.fs, "/", f"{nodemig.TOOLKIT_DIR}/nvidia-cdi-hook")
            )

    @property
    def management_spec_file(self) -> Path:
        return self.fs / nodemig.MANAGEMENT_SPEC.lstrip("/")


# cloud-init as the node really has it: 22.2.2 on AL2023, whose `status` knows no --format
# (argparse usage error, exit 2: canonical/cloud-init@22.2.2 cloudinit/cmd/main.py), and
# none at all on Bottlerocket (early-boot-config reads its user data).
_CLOUD_INIT_STUB = r"""os=$(sed -n 's/^ID=//p' "${MIGNURSE_ROOT:-}/etc/os-release" 2>/dev/null)
os=$(echo "$os" | tr -d '"')
if [ "$os" = bottlerocket ]; then
  echo "sh: cloud-init: command not found" >&2
  exit 127
fi
[ "$1" = status ] || { echo "sandbox cloud-init: refused" >&2; exit 1; }
shift
long= bad=
for a in "$@"; do
  case $a in
    -l|--long) long=1 ;;
    -w|--wait) ;;
    *) bad="$bad${bad:+ }$a" ;;
  esac
done
if [ -n "$bad" ]; then
  subs={init,modules,single,query,dhclient-hook,features,analyze,devel,collect-logs,clean,status,schema}
  echo "usage: /usr/bin/cloud-init [-h] [--version] [--file FILES] [--debug] [--force]" >&2
  echo "                           $subs ..." >&2
  echo "/usr/bin/cloud-init: error: unrecognized arguments: $bad" >&2
  exit 2
fi
if [ -n "$long" ]; then exec cat "$D/cloud-init-status.txt"; fi
head -n 1 "$D/cloud-init-status.txt"
"""


def _applied_layout(
    labels: dict[str, Any], layouts: Mapping[str, Mapping[str, int]] | None = None
) -> dict[str, int] | None:
    """The per-GPU MIG devices a node's labels say its GPUs hold: its `nvidia.com/mig.config`
    once mig-manager wrote `success`, or with mig-manager off (user data applies it), in
    `layouts` (None: NVIDIA's built-in file, for the node's instance type)."""
    config = str(labels.get("nvidia.com/mig.config") or "")
    applied = labels.get("nvidia.com/mig.config.state") == "success" or (
        labels.get("nvidia.com/gpu.deploy.mig-manager") == "false"
        and "nvidia.com/mig.config.state" not in labels
    )
    if not config or not applied:
        return None
    if layouts is None:
        itype = str(labels.get("node.kubernetes.io/instance-type") or "")
        gpu = hardware.INSTANCE_TYPES[itype].gpu if itype in hardware.INSTANCE_TYPES else None
        layouts = gpu.mig_layouts if gpu is not None else None
    return dict(layouts.get(config) or {}) or None if layouts is not None else None


class OperatorFiles:
    """The mig-parted file the cluster's GPU operator has mig-manager read for each node
    (`mignurse.gpu.clusterconfig`), read through the product's client once per transport:
    its ClusterPolicy (none where the type is not served, as without the operator) and the
    ConfigMaps that names. Asked only for a calm node with a MIG config, so a cluster without
    the operator costs the ClusterPolicy list once; the simulator's nodes follow the same file
    (mignurse.sim.operator_config)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._policy: dict[str, Any] | None = None
        self._policy_read = False
        self._configmaps: dict[tuple[str, str], dict[str, Any] | None] = {}

    def _cluster_policy(self) -> dict[str, Any] | None:
        from mignurse.cluster.client import CLUSTER_POLICIES, ClusterError

        if not self._policy_read:
            try:
                items = self.client.list(CLUSTER_POLICIES, dict).items
            except ClusterError:  # NotFound: no GPU operator
                items = []
            self._policy = dict(items[0]) if items else None
            self._policy_read = True
        return self._policy

    def cdi(self) -> bool:
        """Whether the cluster's GPU operator runs with CDI on: its ClusterPolicy's
        `cdi.enabled`, true where unset (the default from gpu-operator v25.10.0,
        api/nvidia/v1/clusterpolicy_types.go `CDIConfigSpec.IsEnabled`); no operator, no CDI."""
        policy = self._cluster_policy()
        if policy is None:
            return False
        cdi = (policy.get("spec") or {}).get("cdi")
        enabled = cdi.get("enabled") if isinstance(cdi, dict) else None
        return enabled is not False

    def _read(self, namespace: str, name: str) -> dict[str, Any] | None:
        from mignurse.cluster.client import CONFIGMAPS, ClusterError, NotFound

        key = (namespace, name)
        if key not in self._configmaps:
            try:
                self._configmaps[key] = dict(self.client.get(CONFIGMAPS, name, namespace))
            except NotFound:
                self._configmaps[key] = None
            except ClusterError as exc:
                raise clusterconfig.ConfigUnreadable(f"{namespace}/{name}: {exc}") from None
        return self._configmaps[key]

    def layouts(self, node_json: dict[str, Any]) -> dict[str, dict[str, int]] | None:
        """config → MIG devices per GPU in this node's file; None where no ClusterPolicy is
        found or the node's GPU model is not known. A file that cannot be read gives NVIDIA's
        built-in one, as in the simulator."""
        meta = node_json.get("metadata") or {}
        labels = meta.get("labels") or {}
        product = str(labels.get("nvidia.com/gpu.product") or "")
        model = by_product_name(product) if product else None
        if model is None or not labels.get("nvidia.com/mig.config"):
            return None
        policy = self._cluster_policy()
        if policy is None:
            return None
        try:
            configs = clusterconfig.for_node(policy, str(meta.get("name", "")), self._read).configs
        except clusterconfig.ConfigUnreadable:
            configs = None
        return standard_layouts(model, configs=configs)


def story_for(node_json: dict[str, Any]) -> str:
    """Which node story fits a simulated Node: the MIG incident for a NotReady node with a
    MIG config label, the DCGM loop for AcceleratedHardwareReady=False, else calm."""
    labels = (node_json.get("metadata") or {}).get("labels") or {}
    conditions = {
        c.get("type"): c.get("status")
        for c in (node_json.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    }
    if conditions.get("Ready") != "True" and labels.get("nvidia.com/mig.config"):
        return "mig-hook"
    if conditions.get("AcceleratedHardwareReady") == "False":
        return "dcgm-loop"
    return "healthy"


class SandboxShell(LocalShell):
    """A simulated node reached through its sandbox (the demo's and the tests' transport)."""

    transport = "sim"

    def __init__(self, sandbox: NodeSandbox) -> None:
        super().__init__(sandbox.node, env=sandbox.env, path_prefix=sandbox.path_prefix)
        self.sandbox = sandbox


def sandbox_shells(client: Any, sandboxes: Path) -> Callable[[Node], NodeShell]:
    """The simulator's transport for `collect.transports.Access.sandbox_shells`: each node's
    sandbox built under `sandboxes` from its Node object as the API server has it now."""
    from mignurse.cluster.client import NODES

    operator = OperatorFiles(client)

    def shell_for(node: Node) -> NodeShell:
        raw = client.get(NODES, node.name)
        labels = (raw.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_COMPUTE_TYPE) == COMPUTE_TYPE_AUTO:
            return NoWayIn(node.name)
        story = story_for(raw)
        layouts = operator.layouts(raw) if story == "healthy" else None
        sandbox = NodeSandbox.for_node(
            sandboxes / node.name, raw, story=story, mig_layouts=layouts, cdi=operator.cdi()
        )
        return SandboxShell(sandbox)

    return shell_for


class NoWayIn:
    """A simulated node that neither SSM nor SSH reaches: every run is refused before it
    starts, as a real transport refuses an unreachable node. An EKS Auto Mode node (labelled
    eks.amazonaws.com/compute-type=auto) is one: "EKS Auto Mode uses EC2 managed instances.
    You cannot directly access EC2 managed instances, including by SSH"; its logs come
    through a NodeDiagnostic (docs.aws.amazon.com/eks/latest/userguide/auto-troubleshoot.html)."""

    transport = "sim"

    def __init__(self, node: str) -> None:
        self.node = node

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: Any,
        cancel: Any = None,
    ) -> CommandResult:
        del script, timeout, stdout, cancel
        return CommandResult(
            self.node,
            self.transport,
            None,
            0.0,
            error="an EKS Auto Mode node (EC2 managed instance): no SSH or SSM way in",
        )
