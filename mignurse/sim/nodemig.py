"""The MIG state of a sandbox node, and the `nvidia-smi`, `nvidia-mig-parted`, `mignurse probe`,
`lsof` and `nvidia-ctk` stubs that read and change it (docs/mig.md).

The sandbox's sh stubs log their argv and then run this module's `main`; it keeps the GPUs'
MIG modes and instances in `<sandbox>/state/mig.json` and the test knobs in
`<sandbox>/state/knobs.json`, so `nvidia-mig-parted apply` really changes what `assert`,
`export`, `nvidia-smi -q -x/-L/mig -lgi/-lci` and the probe see next, and a rebuilt sandbox
(`NodeSandbox.for_node` again on the same folder) keeps it.

Decisions:
- mig-parted follows its v0.15 code paths: apply = apply-start hook, assert mode, (pre-apply-mode
  hook, set mode, `nvidia-smi -r` when a change is pending), then unless `--mode-only` assert
  config, (pre-apply-config hook, destroy all, create), apply-exit hook; errors end as one logrus
  `level=fatal` line on stderr and exit 1. `-k` or `MIG_PARTED_HOOKS_FILE` name the hooks file
  (urfave flag env), and the hooks really run, so a call that forgot `env -u` shows up in the
  call log as `systemctl stop kubelet.service`.
- Ampere changes MIG mode through a GPU reset; knob `modeChangeNeedsReboot` makes that reset
  fail (a VM with passthrough refuses it), leaving the change pending. Hopper applies it at once.
- Placement is first fit, biggest profile first, on the 8-slice grid (4 on A30/RTX PRO 6000),
  moving earlier instances when a later one finds no room.
- Every run appends what it saw to `state/mig-parted.jsonl` (argv, the hooks env, hooks run).

Why one module of this size: every stub call starts Python on this module, and it imports
nothing else of `mignurse.sim` (the scenarios, API server and controllers would be most of
its start-up), so the device model and the tools that read and change it stay in
this one file rather than in sibling modules of the package.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid as uuidlib
from datetime import UTC, datetime
from pathlib import Path

# Every stub call starts Python on this module: `typing` and the GPU model table (dataclasses)
# would be half its start-up, and only placing new instances needs the table.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from mignurse.gpu.models import GpuModel

if __name__ == "__main__":  # run as a script by the stubs: make `mignurse` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DRIVER = "570.172.08"
BUS_IDS = ("53", "64", "75", "86", "97", "A8", "B9", "CA")  # p5.48xlarge, nvidia-smi order
_PROFILE = re.compile(r"^(?:\d+c\.)?(\d+)g\.(\d+)gb(.*)$")

KNOB_DEFAULTS: dict[str, Any] = {
    "modeChangeNeedsReboot": False,  # Ampere: the GPU reset is refused, a reboot is needed
    "applyFails": "",  # "" | "mode" | "config": that apply phase exits 1
    "gpuProcesses": [],  # [{"pid": 4242, "name": "python", "gpu": 0, "usedMiB": 1024}]
    "hostMigManager": "absent",  # absent | inactive | active (systemctl is-active/is-enabled)
    "probe": False,  # whether `mignurse` (the probe) is installed on the node
    "cdiSpec": False,  # whether the GPU operator's toolkit wrote a management CDI spec (CDI on)
}


def gpu_uuid(index: int, node: str = "") -> str:
    """A GPU's UUID; per node when the node is named, so two nodes' GPUs never share one."""
    if not node:
        return f"GPU-5f1c2c6e-0c1d-4b1e-9f7a-1e2d3c4b5a{index:02d}"
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{node}/gpu/{index}"))


def mig_uuid(parent_uuid: str, gi: int) -> str:
    """The UUID of the MIG device of GPU instance `gi` (one compute instance each)."""
    return "MIG-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"{parent_uuid}/{gi}"))


def architecture(name: str) -> str:
    text = name.upper()
    if "A100" in text or "A30" in text or "A800" in text:
        return "Ampere"
    if "B200" in text or "RTX PRO" in text.replace("-", " "):
        return "Blackwell"
    return "Hopper"


def initial_state(
    gpus: int,
    name: str,
    mig_mode: str,
    *,
    node: str = "",
    layout: dict[str, int] | None = None,
    driver: str = DRIVER,
) -> dict[str, Any]:
    """The GPUs of a node at boot; with `layout` (profile → count per GPU) and MIG on, the
    instances a finished mig-parted apply left."""
    state: dict[str, Any] = {
        "driver": driver,
        "gpus": [
            {
                "index": i,
                "name": name,
                "uuid": gpu_uuid(i, node),
                "busId": bus_id(i),
                "arch": architecture(name),
                "current": mig_mode,
                "pending": mig_mode,
                "instances": [],
            }
            for i in range(gpus)
        ],
    }
    if layout and mig_mode == "Enabled":
        for gpu in state["gpus"]:
            made = _place(gpu, layout)
            gpu["instances"] = made if isinstance(made, list) else []
    return state


def bus_id(index: int) -> str:
    """NVML's PCI bus id of GPU `index` (nvidia-smi -q `<pci_bus_id>`)."""
    return f"00000000:{BUS_IDS[index % len(BUS_IDS)]}:00.0"


def plan_instances(
    name: str, parent_uuid: str, devices: dict[str, int]
) -> list[dict[str, Any]] | str:
    """The GPU instances mig-parted makes for profile → count on one GPU of this product
    (gi, profile, profileId, placement start and size, MIG UUID), or why it cannot."""
    return _place({"name": name, "uuid": parent_uuid}, devices)


# -- profiles and placement -------------------------------------------------------------------


# RTX PRO 6000 Blackwell, `nvidia-smi mig -lgip` on R580 (bottlerocket-kernel-kit#300,
# GoogleCloudPlatform/container-engine-accelerators#564): 23.62 GiB and 46 SMs per slice (GI
# profile ids and placements: `GpuModel.gi_profiles`).
RTX_PRO_6000_SLICE_MIB = 24186
RTX_PRO_6000_SLICE_SMS = 46


def _is_rtx_pro_6000(name: str) -> bool:
    return "RTX PRO 6000" in name.upper().replace("-", " ")


def _family(gpu: dict[str, Any]) -> GpuModel | None:
    from mignurse.gpu.models import by_product_name

    model = by_product_name(str(gpu["name"]))
    return model if model is not None and model.profiles else None


def _grid(family: GpuModel | None) -> int:
    return 8 if family is None or max(family.profiles.values()) >= 7 else 4


def _shape(profile: str, family: GpuModel | None) -> tuple[int, int, tuple[int, ...]] | None:
    """(GI profile id, placement size, allowed starts) of a profile on this family."""
    m = _PROFILE.match(profile)
    if m is None or (family is not None and profile not in family.profiles):
        return None
    known = family.gi_profiles.get(profile) if family is not None else None
    if known is not None:
        return known.profile_id, known.size, known.starts
    slices, memory, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    grid = _grid(family)
    smallest_1g = min(
        (int(n.group(2)) for p in (family.profiles if family else {}) if (n := _PROFILE.match(p))),
        default=memory,
    )
    if grid == 4:
        size = {1: 1, 2: 2, 4: 4}.get(slices, 0)
        ids = {1: 14, 2: 5, 4: 0}
        return (ids.get(slices, 0), size, tuple(range(0, 4, size))) if size else None
    if slices == 1 and memory > smallest_1g:  # the double-memory 1g (1g.20gb on H100)
        return 15, 2, (0, 2, 4, 6)
    if slices == 1:
        return (20 if suffix else 19), 1, tuple(range(7))
    table = {2: (14, 2, (0, 2, 4)), 3: (9, 4, (0, 4)), 4: (5, 4, (0,)), 7: (0, 8, (0,))}
    return table.get(slices)


def _place(gpu: dict[str, Any], devices: dict[str, int]) -> list[dict[str, Any]] | str:
    """The GPU instances for a profile→count map, or why they cannot be made."""
    family = _family(gpu)
    wanted: list[tuple[int, str, tuple[int, int, tuple[int, ...]]]] = []
    for profile, count in devices.items():
        shape = _shape(profile, family)
        if shape is None:
            return f"unsupported MIG profile {profile!r} on {gpu['name']}"
        if family is not None and count > family.profiles[profile]:
            return f"too many {profile} instances requested: {count}"
        wanted += [(shape[1], profile, shape)] * int(count)
    wanted.sort(key=lambda item: -item[0])
    used = [False] * _grid(family)
    chosen: list[int] = []

    def fit(index: int) -> bool:
        # first fit, and when a later instance finds no room the earlier ones move on
        # (mig-parted retries other creation orders before it gives up)
        if index == len(wanted):
            return True
        size, _profile, (_id, _, starts) = wanted[index]
        for start in starts:
            if any(used[start : start + size]):
                continue
            used[start : start + size] = [True] * size
            chosen.append(start)
            if fit(index + 1):
                return True
            chosen.pop()
            used[start : start + size] = [False] * size
        return False

    if not fit(0):
        return "error attempting multiple config orderings: all orderings failed"
    made: list[dict[str, Any]] = []
    for gi, ((size, profile, (profile_id, _, _starts)), start) in enumerate(
        zip(wanted, chosen, strict=True), start=1
    ):
        made.append(
            {
                "gi": gi,
                "ci": 0,
                "profile": profile,
                "profileId": profile_id,
                "start": start,
                "size": size,
                "uuid": mig_uuid(str(gpu["uuid"]), gi),
            }
        )
    return made


def _counts(gpu: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for inst in gpu["instances"]:
        counts[inst["profile"]] = counts.get(inst["profile"], 0) + 1
    return counts


def _memory_mib(profile: str, gpu_name: str = "") -> int:
    m = _PROFILE.match(profile)
    if m and _is_rtx_pro_6000(gpu_name):
        return int(m.group(1)) * RTX_PRO_6000_SLICE_MIB
    return int(m.group(2)) * 1000 - 16 if m else 0


def _sm_count(inst: dict[str, Any], gpu_name: str) -> int:
    if _is_rtx_pro_6000(gpu_name):
        return RTX_PRO_6000_SLICE_SMS * int(inst["size"])
    return {1: 16, 2: 32, 3: 60, 4: 64, 7: 132}.get(inst["size"], 16 * inst["size"])


# -- the sandbox --------------------------------------------------------------------------------


class GpuNodeState:
    """One sandbox node's GPUs as the stubs see them: the MIG state in `state/mig.json` and
    the test knobs in `state/knobs.json`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_file = root / "state" / "mig.json"
        self.knobs_file = root / "state" / "knobs.json"
        self.state: dict[str, Any] = json.loads(self.state_file.read_text())
        raw = json.loads(self.knobs_file.read_text()) if self.knobs_file.exists() else {}
        self.knobs: dict[str, Any] = {**KNOB_DEFAULTS, **raw}

    @property
    def gpus(self) -> list[dict[str, Any]]:
        gpus: list[dict[str, Any]] = self.state["gpus"]
        return gpus

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.state_file)

    def processes(self) -> list[dict[str, Any]]:
        return [p for p in self.knobs.get("gpuProcesses") or [] if isinstance(p, dict)]


# -- nvidia-smi ---------------------------------------------------------------------------------


def _smi_xml(node: GpuNodeState) -> str:
    parts = []
    stamp = datetime.now(UTC).strftime("%a %b %d %H:%M:%S %Y")
    for gpu in node.gpus:
        devices = ""
        for index, inst in enumerate(gpu["instances"]):
            total = _memory_mib(inst["profile"], str(gpu["name"]))
            sms = _sm_count(inst, str(gpu["name"]))
            devices += (
                "\t\t\t<mig_device>\n"
                f"\t\t\t\t<index>{index}</index>\n"
                f"\t\t\t\t<gpu_instance_id>{inst['gi']}</gpu_instance_id>\n"
                f"\t\t\t\t<compute_instance_id>{inst['ci']}</compute_instance_id>\n"
                "\t\t\t\t<device_attributes>\n\t\t\t\t\t<shared>\n"
                f"\t\t\t\t\t\t<multiprocessor_count>{sms}</multiprocessor_count>\n"
                "\t\t\t\t\t\t<copy_engine_count>1</copy_engine_count>\n"
                "\t\t\t\t\t\t<encoder_count>0</encoder_count>\n"
                "\t\t\t\t\t\t<decoder_count>1</decoder_count>\n"
                "\t\t\t\t\t\t<ofa_count>0</ofa_count>\n"
                "\t\t\t\t\t\t<jpg_count>1</jpg_count>\n"
                "\t\t\t\t\t</shared>\n\t\t\t\t</device_attributes>\n"
                "\t\t\t\t<fb_memory_usage>\n"
                f"\t\t\t\t\t<total>{total} MiB</total>\n"
                "\t\t\t\t\t<reserved>0 MiB</reserved>\n"
                "\t\t\t\t\t<used>13 MiB</used>\n"
                f"\t\t\t\t\t<free>{total - 13} MiB</free>\n"
                "\t\t\t\t</fb_memory_usage>\n"
                "\t\t\t</mig_device>\n"
            )
        procs = "".join(
            "\t\t\t<process_info>\n"
            "\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>\n"
            "\t\t\t\t<compute_instance_id>N/A</compute_instance_id>\n"
            f"\t\t\t\t<pid>{p.get('pid')}</pid>\n\t\t\t\t<type>C</type>\n"
            f"\t\t\t\t<process_name>{p.get('name', 'python')}</process_name>\n"
            f"\t\t\t\t<used_memory>{p.get('usedMiB', 1024)} MiB</used_memory>\n"
            "\t\t\t</process_info>\n"
            for p in node.processes()
            if int(p.get("gpu", 0)) == gpu["index"]
        )
        parts.append(
            f'\t<gpu id="{gpu["busId"]}">\n'
            f"\t\t<product_name>{gpu['name']}</product_name>\n"
            f"\t\t<product_architecture>{gpu['arch']}</product_architecture>\n"
            "\t\t<persistence_mode>Enabled</persistence_mode>\n"
            f"\t\t<mig_mode>\n\t\t\t<current_mig>{gpu['current']}</current_mig>\n"
            f"\t\t\t<pending_mig>{gpu['pending']}</pending_mig>\n\t\t</mig_mode>\n"
            + (f"\t\t<mig_devices>\n{devices}\t\t</mig_devices>\n" if devices else "")
            + ("" if devices else "\t\t<mig_devices>None</mig_devices>\n")
            + f"\t\t<uuid>{gpu['uuid']}</uuid>\n\t\t<minor_number>{gpu['index']}</minor_number>\n"
            f"\t\t<pci>\n\t\t\t<pci_bus_id>{gpu['busId']}</pci_bus_id>\n\t\t</pci>\n"
            + (
                f"\t\t<processes>\n{procs}\t\t</processes>\n"
                if procs
                else "\t\t<processes>\n\t\t</processes>\n"
            )
            + "\t</gpu>\n"
        )
    return (
        '<?xml version="1.0" ?>\n'
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log>\n"
        f"\t<timestamp>{stamp}</timestamp>\n"
        f"\t<driver_version>{node.state.get('driver', DRIVER)}</driver_version>\n"
        "\t<cuda_version>12.8</cuda_version>\n"
        f"\t<attached_gpus>{len(node.gpus)}</attached_gpus>\n"
        + "".join(parts)
        + "</nvidia_smi_log>\n"
    )


def _smi_list(node: GpuNodeState) -> str:
    lines = []
    for gpu in node.gpus:
        lines.append(f"GPU {gpu['index']}: {gpu['name']} (UUID: {gpu['uuid']})")
        if gpu["current"] == "Enabled":
            for index, inst in enumerate(gpu["instances"]):
                lines.append(
                    f"  MIG {inst['profile']:<12} Device {index:2d}: (UUID: {inst['uuid']})"
                )
    return "\n".join(lines) + "\n"


def create_caps(node: GpuNodeState) -> None:
    """What nvidia-modeprobe does when nvidia-smi runs: a cap node per GI/CI (docs/mig.md)."""
    caps = node.root / "fs" / "dev" / "nvidia-caps"
    caps.mkdir(parents=True, exist_ok=True)
    minors = {1, 2}  # mig/config, mig/monitor
    for gpu in node.gpus:
        for inst in gpu["instances"]:
            base = 3 + gpu["index"] * 256 + inst["gi"] * 2  # an illustrative minor layout
            minors.update({base, base + 1})
    for minor in sorted(minors):
        (caps / f"nvidia-cap{minor}").touch()


def _mig_table(node: GpuNodeState, compute: bool) -> tuple[str, int]:
    enabled = [g for g in node.gpus if g["current"] == "Enabled"]
    if not enabled:
        return "No MIG-enabled devices found.\n", 6
    rows = [(g, inst) for g in enabled for inst in g["instances"]]
    if not rows:
        what = "compute" if compute else "GPU"
        return f"No {what} instances found: Not Found\n", 6
    if compute:
        rule = "+" + "-" * 68 + "+\n"
        head = (
            rule + "| Compute instances:" + " " * 49 + "|\n"
            "| GPU     GPU       Name             Profile   Instance   Placement  |\n"
            "|       Instance                       ID        ID       Start:Size |\n"
            "|         ID                                                         |\n"
            "|" + "=" * 68 + "|\n"
        )
        body = [
            f"|  {g['index']:2d}     {i['gi']:2d}       MIG {i['profile']:<12}"
            f"{ {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 4}.get(i['size'], 0):5d}"
            f"{i['ci']:10d}          0:{i['size']}     |\n"
            for g, i in rows
        ]
        return head + rule.join(body) + rule, 0
    rule = "+" + "-" * 55 + "+\n"
    head = (
        rule + "| GPU instances:" + " " * 40 + "|\n"
        "| GPU   Name             Profile  Instance   Placement  |\n"
        "|                          ID       ID       Start:Size |\n"
        "|" + "=" * 55 + "|\n"
    )
    body = [
        f"|  {g['index']:2d}  MIG {i['profile']:<12}{i['profileId']:7d}       {i['gi']:2d}"
        f"          {i['start']}:{i['size']}     |\n"
        for g, i in rows
    ]
    return head + rule.join(body) + rule, 0


_QUERY_FIELDS = {
    "index": lambda g: str(g["index"]),
    "name": lambda g: str(g["name"]),
    "uuid": lambda g: str(g["uuid"]),
    "pci.bus_id": lambda g: str(g["busId"]),
    "mig.mode.current": lambda g: str(g["current"]),
    "mig.mode.pending": lambda g: str(g["pending"]),
}


def _csv(rows: list[list[str]], header: list[str], fmt: str) -> str:
    out = [] if "noheader" in fmt else [", ".join(header)]
    out += [", ".join(r) for r in rows]
    return "\n".join(out) + ("\n" if out else "")


def nvidia_smi(node: GpuNodeState, args: list[str]) -> int:
    joined = " ".join(args)
    if joined == "-q -x":
        sys.stdout.write(_smi_xml(node))
        return 0
    if joined == "-L":
        create_caps(node)
        sys.stdout.write(_smi_list(node))
        return 0
    if joined in ("mig -lgi", "mig -lci"):
        text, rc = _mig_table(node, compute=joined.endswith("lci"))
        sys.stdout.write(text)
        return rc
    if args and args[0] == "-r":
        return _reset(node)
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "")
    query = next((a for a in args if a.startswith("--query-")), "")
    if query.startswith("--query-gpu="):
        fields = query.split("=", 1)[1].split(",")
        if any(f not in _QUERY_FIELDS for f in fields):
            print(f'Field "{fields[0]}" is not a valid field to query.', file=sys.stderr)
            return 2
        rows = [[_QUERY_FIELDS[f](g) for f in fields] for g in node.gpus]
        sys.stdout.write(_csv(rows, fields, fmt))
        return 0
    if query.startswith("--query-compute-apps="):
        fields = query.split("=", 1)[1].split(",")
        by_gpu = {g["index"]: g for g in node.gpus}
        values = {
            "pid": lambda p: str(p.get("pid")),
            "process_name": lambda p: str(p.get("name", "python")),
            "used_memory": lambda p: f"{p.get('usedMiB', 1024)} MiB",
            "gpu_bus_id": lambda p: str(by_gpu.get(int(p.get("gpu", 0)), {}).get("busId", "")),
            "gpu_uuid": lambda p: str(by_gpu.get(int(p.get("gpu", 0)), {}).get("uuid", "")),
        }
        if any(f not in values for f in fields):
            print(f'Field "{fields[0]}" is not a valid field to query.', file=sys.stderr)
            return 2
        rows = [[values[f](p) for f in fields] for p in node.processes()]
        sys.stdout.write(_csv(rows, fields, fmt))
        return 0
    print("sandbox nvidia-smi: unsupported arguments", file=sys.stderr)
    return 2


def _reset(node: GpuNodeState) -> int:
    """`nvidia-smi -r`: a pending mode change takes effect, unless the reset is refused."""
    if node.processes():
        pids = ", ".join(str(p.get("pid")) for p in node.processes())
        print(
            "Unable to reset this GPU because it's being used by some other process "
            f"(e.g. CUDA application, graphics application like X server, monitoring "
            f"application like other instance of nvidia-smi). Processes: {pids}",
            file=sys.stderr,
        )
        return 255
    pending = [g for g in node.gpus if g["pending"] != g["current"]]
    if pending and node.knobs.get("modeChangeNeedsReboot"):
        print("The following GPUs could not be reset:", file=sys.stdout)
        for gpu in pending:
            print(f"  GPU {gpu['busId']}: Not Supported", file=sys.stdout)
        print("\n1 device is currently being used by one or more other processes "
              "(e.g., Fabric Manager, CUDA application, graphics application such as an X "
              "server, or a monitoring application such as another instance of nvidia-smi). "
              "Please first kill all processes using this device and all compute applications "
              "running in the system.", file=sys.stdout)  # fmt: skip
        return 3
    for gpu in node.gpus:
        if gpu["pending"] != gpu["current"]:
            gpu["current"] = gpu["pending"]
            gpu["instances"] = []
        print(f"GPU {gpu['busId']} was successfully reset.")
    print("All done.")
    node.save()
    return 0


# -- nvidia-mig-parted --------------------------------------------------------------------------


class Fatal(Exception):
    """Ends the run as logrus's `log.Fatal`: one `level=fatal` line on stderr, exit 1."""


def _log(level: str, msg: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f'time="{stamp}" level={level} msg="{msg}"', file=sys.stderr)


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _parse_args(args: list[str]) -> tuple[bool, str, dict[str, Any]]:
    debug = False
    while args and args[0] in ("-d", "--debug"):
        debug = True
        args = args[1:]
    if not args:
        raise Fatal("no command given")
    command, rest = args[0], args[1:]
    flags: dict[str, Any] = {
        "file": os.environ.get("MIG_PARTED_CONFIG_FILE", ""),
        "config": os.environ.get("MIG_PARTED_SELECTED_CONFIG", ""),
        "hooks": os.environ.get("MIG_PARTED_HOOKS_FILE", "") if command == "apply" else "",
        "modeOnly": False,
        "validConfig": False,
        "skipReset": False,
        "output": "yaml",
    }
    takes_value = {
        "-f": "file", "--config-file": "file", "-c": "config", "--selected-config": "config",
        "-o": "output", "--output-format": "output",
    }  # fmt: skip
    if command == "apply":
        takes_value.update({"-k": "hooks", "--hooks-file": "hooks"})
    switches = {
        "-m": "modeOnly", "--mode-only": "modeOnly", "-s": "skipReset", "--skip-reset": "skipReset",
        "-a": "validConfig", "--valid-config": "validConfig",
    }  # fmt: skip
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, value = arg.partition("=")
        if name in takes_value:
            if not eq:
                i += 1
                if i >= len(rest):
                    raise Fatal(f"flag needs an argument: {name}")
                value = rest[i]
            flags[takes_value[name]] = value
        elif arg in switches and (command != "apply" or arg not in ("-a", "--valid-config")):
            flags[switches[arg]] = True
        else:
            raise Fatal(f"flag provided but not defined: {name}")
        i += 1
    return debug, command, flags


def _load_config(flags: dict[str, Any]) -> list[dict[str, Any]]:
    import yaml

    if not flags["file"]:
        raise Fatal("missing required flags 'config-file'")
    try:
        text = sys.stdin.read() if flags["file"] == "-" else Path(flags["file"]).read_text()
    except OSError as exc:
        raise Fatal(f"error parsing config file: read error: {exc}") from None
    try:
        spec = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise Fatal(f"error parsing config file: unmarshal error: {exc}") from None
    if not isinstance(spec, dict) or spec.get("version") != "v1":
        raise Fatal(
            "error parsing config file: unmarshal error: unknown version: "
            + str(spec.get("version") if isinstance(spec, dict) else spec)
        )
    extra = set(spec) - {"version", "mig-configs"}
    if extra:
        raise Fatal(
            f'error parsing config file: unmarshal error: unexpected field "{sorted(extra)[0]}"'
        )
    configs = spec.get("mig-configs") or {}
    selected = flags["config"]
    if len(configs) > 1 and not selected:
        raise Fatal("error selecting MIG config: missing required flag 'selected-config' "
                    "when more than one config available")  # fmt: skip
    if len(configs) == 1 and not selected:
        selected = next(iter(configs))
    if selected not in configs:
        raise Fatal(f"error selecting MIG config: selected mig-config not present: {selected}")
    items = configs[selected]
    if not isinstance(items, list) or not items:
        raise Fatal(
            "error parsing config file: unmarshal error: mig-config must be a non-empty list"
        )
    for item in items:
        if not isinstance(item, dict) or "devices" not in item or "mig-enabled" not in item:
            raise Fatal(
                "error parsing config file: unmarshal error: missing 'devices' or 'mig-enabled'"
            )
        devices = item.get("mig-devices")
        if item["mig-enabled"] and devices is None:
            raise Fatal("error parsing config file: unmarshal error: missing 'mig-devices'")
        if not item["mig-enabled"] and devices:
            raise Fatal(
                "error parsing config file: unmarshal error: MIG devices given with MIG disabled"
            )
    return items


def _selected(
    node: GpuNodeState, items: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(GPU, config item) for every GPU an item's `devices` names (device filters: all match)."""
    chosen = []
    for item in items:
        devices = item["devices"]
        for gpu in node.gpus:
            if devices == "all" or (isinstance(devices, list) and gpu["index"] in devices):
                chosen.append((gpu, item))
    return chosen


def _mode_ok(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> bool:
    want = {True: "Enabled", False: "Disabled"}
    return all(gpu["current"] == want[bool(item["mig-enabled"])] for gpu, item in pairs)


def _config_ok(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> bool:
    for gpu, item in pairs:
        wanted = {str(k): int(v) for k, v in (item.get("mig-devices") or {}).items() if int(v)}
        if item["mig-enabled"] and _counts(gpu) != wanted:
            return False
    return True


class Hooks:
    def __init__(self, path: str, debug: bool, env: dict[str, str], node: GpuNodeState) -> None:
        self.spec: dict[str, Any] = {}
        self.debug = debug
        self.env = env
        self.ran: list[str] = []
        if path:
            import yaml

            try:
                loaded = yaml.safe_load(Path(path).read_text()) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise Fatal(f"error parsing hooks file: read error: {exc}") from None
            self.spec = loaded.get("hooks") or {}

    def run(self, name: str) -> None:
        import shutil  # here: most stub calls never run a hook (each import is start-up)
        import subprocess

        for hook in self.spec.get(name) or []:
            self.ran.append(name)
            command = shutil.which(str(hook.get("command", ""))) or str(hook.get("command", ""))
            argv = [command, *[str(a) for a in hook.get("args") or []]]
            env = {**{str(k): str(v) for k, v in (hook.get("envs") or {}).items()}, **self.env}
            done = subprocess.run(argv, env=env, cwd=hook.get("workdir") or None,
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if self.debug:
                sys.stderr.write(done.stdout + done.stderr)
            if done.returncode != 0:
                raise Fatal(f"error running {name} hook: exit status {done.returncode}")


def _apply(node: GpuNodeState, flags: dict[str, Any], debug: bool) -> None:
    items = _load_config(flags)
    pairs = _selected(node, items)
    mig_env = {k: v for k, v in os.environ.items() if k.startswith("MIG_PARTED_")}
    hooks = Hooks(flags["hooks"], debug, mig_env, node)
    node.hooks_ran = hooks.ran  # type: ignore[attr-defined]
    hooks.run("apply-start")
    try:
        if not _mode_ok(pairs):
            hooks.run("pre-apply-mode")
            _apply_mode(node, pairs, flags, debug)
        if flags["modeOnly"]:
            return
        if not _config_ok(pairs):
            hooks.run("pre-apply-config")
            _apply_devices(node, pairs, debug)
    finally:
        hooks.run("apply-exit")


def _apply_mode(node: GpuNodeState, pairs: list[tuple[dict[str, Any], dict[str, Any]]],
                flags: dict[str, Any], debug: bool) -> None:  # fmt: skip
    if node.knobs.get("applyFails") == "mode":
        raise Fatal(
            "error applying MIG configuration with hooks: error setting MIG mode: Unknown Error"
        )
    if node.processes():
        raise Fatal("error applying MIG configuration with hooks: error setting MIG mode: "
                    "In use by another client")  # fmt: skip
    pending = False
    for gpu, item in pairs:
        desired = "Enabled" if item["mig-enabled"] else "Disabled"
        if debug:
            _log("debug", f"    Current MIG mode: {gpu['current']}")
            _log("debug", f"    Updating MIG mode: {desired}")
        if gpu["current"] != "Disabled":
            gpu["instances"] = []  # ClearMigConfig
        gpu["pending"] = desired
        if gpu["arch"] == "Ampere":
            pending = pending or gpu["pending"] != gpu["current"]
        else:
            gpu["current"] = desired  # Hopper and later: no reset needed
    node.save()
    if flags["skipReset"] or not pending:
        return
    if debug:
        _log("debug", "At least one mode change pending")
        _log("debug", "Resetting all GPUs...")
    import subprocess

    done = subprocess.run(["nvidia-smi", "-r"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        _log("error", "\n" + done.stdout + done.stderr)
        raise Fatal(f"error applying MIG configuration with hooks: error resetting all GPUs: "
                    f"exit status {done.returncode}")  # fmt: skip


def _apply_devices(node: GpuNodeState, pairs: list[tuple[dict[str, Any], dict[str, Any]]],
                   debug: bool) -> None:  # fmt: skip
    prefix = "error applying MIG configuration with hooks: "
    for gpu, item in pairs:
        enabled = bool(item["mig-enabled"])
        if enabled and gpu["current"] == "Disabled":
            raise Fatal(prefix + "unable to apply MIG config with MIG mode disabled")
        if not enabled and gpu["current"] == "Enabled":
            raise Fatal(prefix + "MIG mode is currently enabled, but the configuration "
                        "specifies it should be disabled")  # fmt: skip
        if not enabled:
            continue
        wanted = {str(k): int(v) for k, v in (item.get("mig-devices") or {}).items() if int(v)}
        if _counts(gpu) == wanted:
            continue
        if node.knobs.get("applyFails") == "config":
            raise Fatal(prefix + "error setting MIGConfig: error attempting multiple config "
                        "orderings: all orderings failed")  # fmt: skip
        if node.processes():
            raise Fatal(prefix + "error setting MIGConfig: error destroying Compute instance "
                        "for profile '(0, 0)': In use by another client")  # fmt: skip
        made = _place(gpu, wanted)
        if isinstance(made, str):
            raise Fatal(prefix + f"error setting MIGConfig: {made}")
        if debug:
            _log(
                "debug",
                "    Updating MIG config: map["
                + " ".join(f"{k}:{v}" for k, v in wanted.items())
                + "]",
            )
        gpu["instances"] = made
    node.save()


def _export(node: GpuNodeState, flags: dict[str, Any]) -> None:
    import yaml

    items: list[dict[str, Any]] = []
    for gpu in node.gpus:
        enabled = gpu["current"] == "Enabled"
        item: dict[str, Any] = {"devices": [gpu["index"]], "mig-enabled": enabled}
        if enabled:
            item["mig-devices"] = dict(sorted(_counts(gpu).items()))
        same = next((i for i in items if {k: v for k, v in i.items() if k != "devices"}
                     == {k: v for k, v in item.items() if k != "devices"}), None)  # fmt: skip
        if same is not None:
            same["devices"].append(gpu["index"])
        else:
            items.append(item)
    if len(items) == 1 and len(items[0]["devices"]) == len(node.gpus):
        items[0]["devices"] = "all"
    doc = {"version": "v1", "mig-configs": {"current": items}}
    if flags["output"] == "json":
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))


def mig_parted(node: GpuNodeState, args: list[str]) -> int:
    if args[:1] in (["--version"], ["-v"]):  # urfave/cli's flag: cmd/nvidia-mig-parted/main.go
        print("nvidia-mig-parted version v0.15.0")
        return 0
    record: dict[str, Any] = {
        "argv": args,
        "hooksFileEnv": os.environ.get("MIG_PARTED_HOOKS_FILE"),
        "rc": 0,
    }
    try:
        debug, command, flags = _parse_args(list(args))
        record["hooksFile"] = flags["hooks"] or None
        if command == "apply":
            _apply(node, flags, debug)
            print("MIG configuration applied successfully")
        elif command == "assert":
            items = _load_config(flags)
            if flags["validConfig"]:
                print("Selected MIG configuration is valid")
            else:
                pairs = _selected(node, items)
                if not _mode_ok(pairs) or (not flags["modeOnly"] and not _config_ok(pairs)):
                    raise Fatal("Assertion failure: selected configuration not currently applied")
                if flags["modeOnly"]:
                    print("Selected MIG mode settings from configuration currently applied")
                else:
                    print("Selected MIG configuration currently applied")
        elif command == "export":
            _export(node, flags)
        else:
            raise Fatal(f"sandbox nvidia-mig-parted: {command!r} is not served")
    except Fatal as exc:
        _log("fatal", _capitalize(str(exc)))
        record["rc"] = 1
    record["hooksRun"] = getattr(node, "hooks_ran", [])
    with (node.root / "state" / "mig-parted.jsonl").open("a") as log:
        log.write(json.dumps(record) + "\n")
    return int(record["rc"])


# -- mignurse probe, lsof -----------------------------------------------------------------------


def probe(node: GpuNodeState, args: list[str]) -> int:
    from mignurse.model import GpuMigState, MigDevice, MigState

    if args[:1] != ["probe"] or "json" not in args:
        print("sandbox mignurse: only `probe -o json` is served", file=sys.stderr)
        return 2
    gpus = tuple(
        GpuMigState(
            index=g["index"],
            name=g["name"],
            uuid=g["uuid"],
            pci_bus_id=g["busId"],
            mig_current=g["current"],
            mig_pending=g["pending"],
            devices=tuple(
                MigDevice(
                    i["uuid"],
                    i["gi"],
                    i["ci"],
                    i["profile"],
                    _memory_mib(i["profile"], g["name"]),
                    n,
                )
                for n, i in enumerate(g["instances"])
            )
            if g["current"] == "Enabled"
            else (),
        )
        for g in node.gpus
    )
    state = MigState("nvml", "ok", "", node.state.get("driver", DRIVER), gpus)
    print(json.dumps(state.to_json(), indent=2))
    return 0


# -- nvidia-ctk -----------------------------------------------------------------------------------

# Where the GPU operator's toolkit installs nvidia-ctk and nvidia-cdi-hook on the host
# (gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml toolkit.installDir, plus "toolkit":
# controllers/object_controls.go TransformMIGManager), and the validator's status file
# (cmd/nvidia-validator/main.go createStatusFile).
TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
MANAGEMENT_SPEC = "/var/run/cdi/management.nvidia.com-gpu.yaml"
DRIVER_READY = "/run/nvidia/validations/driver-ready"
_CONTROL_DEVICES = ("nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools")


def management_spec(root: Path, dev_root: str, hook: str) -> str:
    """The management CDI spec `nvidia-ctk cdi generate --mode=management` writes, cut to its
    device nodes and hook: every /dev/nvidia* and /dev/nvidia-caps/nvidia-cap* present now
    (NVIDIA/nvidia-container-toolkit@v1.20.0 pkg/nvcdi/management.go; the layout of the file:
    cncf-tags/container-device-interface SPEC.md, "CDI JSON Specification")."""
    dev = root / "dev"
    found = sorted(
        [p for p in dev.glob("nvidia*") if p.is_file()]
        + list((dev / "nvidia-caps").glob("nvidia-cap*")),
        key=lambda p: (len(p.parts), p.name),
    )
    lines = [
        "---",
        "cdiVersion: 0.5.0",
        "kind: management.nvidia.com/gpu",
        "devices:",
        "- name: all",
        "  containerEdits:",
        "    deviceNodes:",
    ]
    for path in found:
        inside = "/" + path.relative_to(root).as_posix()
        lines += [f"    - path: {inside}", f"      hostPath: {dev_root.rstrip('/')}{inside}"]
    lines += [
        "containerEdits:",
        "  hooks:",
        "  - hookName: createContainer",
        f"    path: {hook}",
        "    args:",
        f"    - {hook.rsplit('/', 1)[-1]}",
        "    - update-ldcache",
    ]
    return "\n".join(lines) + "\n"


def nvidia_ctk(node: GpuNodeState, args: list[str]) -> int:
    """`nvidia-ctk system create-device-nodes --control-devices [--dev-root=R]` (touches the
    control device nodes) and `nvidia-ctk cdi generate --mode=management … --output=F` (the
    spec of the device nodes there now); paths are the node's, read under the sandbox root.
    An unknown flag is refused as urfave/cli refuses it."""
    root = node.root / "fs"
    flags = dict(a[2:].partition("=")[::2] for a in args[2:] if a.startswith("--"))
    if args[:2] == ["system", "create-device-nodes"]:
        known = {"control-devices", "dev-root", "load-kernel-modules"}
        if set(flags) - known:
            return _ctk_usage(sorted(set(flags) - known)[0])
        if "control-devices" in flags:
            for name in _CONTROL_DEVICES:
                (root / "dev").mkdir(parents=True, exist_ok=True)
                (root / "dev" / name).touch()
        return 0
    if args[:2] == ["cdi", "generate"]:
        known = {"mode", "driver-root", "dev-root", "vendor", "class", "nvidia-cdi-hook-path",
                 "nvidia-ctk-path", "output"}  # fmt: skip
        if set(flags) - known:
            return _ctk_usage(sorted(set(flags) - known)[0])
        hook = flags.get("nvidia-cdi-hook-path") or flags.get("nvidia-ctk-path") or ""
        output = flags.get("output", "")
        if flags.get("mode") != "management" or not hook or not output.startswith("/"):
            print("sandbox nvidia-ctk: only --mode=management with a hook and --output",
                  file=sys.stderr)  # fmt: skip
            return 1
        dev_root = flags.get("dev-root") or flags.get("driver-root") or "/"
        target = root / output.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(management_spec(root, dev_root, hook))
        tmp.replace(target)
        _log("info", "Generated CDI spec with version 0.5.0")
        return 0
    print("sandbox nvidia-ctk: unsupported arguments", file=sys.stderr)
    return 1


def _ctk_usage(flag: str) -> int:
    print(f"Incorrect Usage: flag provided but not defined: -{flag}", file=sys.stderr)
    return 1


# nvidia-persistenced holds every /dev/nvidiaN of a node whose driver is on the host: the EKS
# AL2023 NVIDIA AMI enables it (awslabs/amazon-eks-ami
# templates/al2023/provisioners/install-nvidia-driver.sh); its comm is cut at 15 characters.
PERSISTENCED = {"pid": 1187, "name": "nvidia-persistenced"}


def lsof(node: GpuNodeState, args: list[str]) -> int:
    """`lsof -t FILES…` (pids) or `lsof -F pc FILES…` (a `p`, `c` and `f` line each) of the
    processes holding a GPU device named: nvidia-persistenced, then the knob's processes."""
    if not any("/dev/nvidia" in a for a in args):
        return 1
    holders = [PERSISTENCED, *node.processes()]
    if "-F" in args:
        for p in holders:
            print(f"p{p.get('pid')}\nc{str(p.get('name', 'python'))[:15]}\nf3")
    else:
        print("\n".join(str(p.get("pid")) for p in holders))
    return 0


def main(argv: list[str]) -> int:
    root = Path(os.environ["MIGSIM_ROOT"])
    tool, args = argv[0], argv[1:]
    node = GpuNodeState(root)
    handlers = {"nvidia-smi": nvidia_smi, "nvidia-mig-parted": mig_parted, "mignurse": probe,
                "lsof": lsof, "nvidia-ctk": nvidia_ctk}  # fmt: skip
    return handlers[tool](node, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
