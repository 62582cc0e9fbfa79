"""scripts/gpu-probe-check.sh end to end: the real script, a fake `nvidia-smi` on PATH and the
fake libnvidia-ml.so.1 (fake_nvml.c) loaded by real pynvml through LD_LIBRARY_PATH; plus the
comparer (mignurse/gpu/check.py) on its own.

The nvidia-smi fixtures below describe the fake's scenarios (its GPUs, UUIDs, MIG devices and
memory, as fake_nvml.c builds them) in the shapes of tests/evidence/smi_samples.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from mignurse.gpu.check import compare, load
from mignurse.model import MIG_ENABLED, GpuMigState, MigDevice, MigState

from .conftest import FakeNvml, real_nvml_installed

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-probe-check.sh"
DRIVER = "570.133.20"  # the fake's driver version
BUSES = ("53", "64", "75", "86", "97", "A8", "B9", "CA")  # fake_nvml.c BUSES, p5.48xlarge
H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"
READ_ONLY_SMI = {"-L", "-q -x", "mig -lgi", "mig -lci"}
MUTATING_NVML = re.compile(r"Set|Create|Destroy|Reset")
READ_NVML = re.compile(
    r"^nvml(InitWithFlags|Init_v2|Init|Shutdown|ErrorString|SystemGet\w+|DeviceGet\w+"
    r"|DeviceIsMigDeviceHandle|GpuInstanceGetInfo)$"
)  # as test_nvml_probe.py: the fake exports no mutating symbol, so reads are all it can log
PYTHON_RUNS = {
    """"$python" -c 'import pynvml' || { echo "$python cannot import pynvml" >&2; exit 2; }""",
    '"$python" -m mignurse.gpu.probe_cli -o table',
    '"$python" -m mignurse.gpu.probe_cli -o json >"$out/probe.json"',
    '"$python" -m mignurse.gpu.check --probe-json "$out/probe.json" --smi-xml "$out/smi-q.xml" \\',
}
COMPARE_HEADER = "== probe against nvidia-smi"


@dataclass(frozen=True)
class Profile:
    """An H100 GPU instance profile as fake_nvml.c's H100_PROFILES has it."""

    id: int
    slices: int
    memory_mib: int
    sms: int
    ce: int
    dec: int
    jpg: int


PROFILES = {
    "1g.10gb": Profile(19, 1, 9984, 16, 1, 1, 1),
    "2g.20gb": Profile(14, 2, 19968, 32, 2, 2, 2),
    "3g.40gb": Profile(9, 3, 40448, 60, 3, 3, 3),
}


@dataclass(frozen=True)
class Mig:
    slot: int
    profile: str
    gi: int
    ci: int = 0
    smi_memory_mib: int | None = None  # what -q -x says, when it should differ from NVML's


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int
    current: str  # as -q -x writes it: Enabled | Disabled | N/A
    pending: str
    migs: tuple[Mig, ...] = ()


def gpu_uuid(gpu: int) -> str:
    return f"GPU-{0xC0FFEE00 + gpu:08x}-1111-4222-8333-{gpu:012x}"  # nvmlDeviceGetUUID


def mig_uuid(gpu: int, mig: Mig) -> str:
    return f"MIG-{0xA0000000 + gpu:08x}-0000-5000-8000-{mig.gi * 16 + mig.ci:012x}"


ALL_1G = tuple(Mig(slot, "1g.10gb", 7 + slot) for slot in range(7))
SCENARIOS: dict[str, tuple[Gpu, ...]] = {
    "h100-mig": tuple(Gpu(H100, 81559, "Enabled", "Enabled", ALL_1G) for _ in range(8)),
    "mixed": (
        Gpu(
            H100,
            81559,
            "Enabled",
            "Enabled",
            (
                Mig(0, "3g.40gb", 2),
                Mig(1, "2g.20gb", 3),
                Mig(2, "1g.10gb", 9),
                Mig(3, "1g.10gb", 10),
            ),
        ),
        Gpu(H100, 81559, "Disabled", "Enabled"),
        Gpu(L40S, 46068, "N/A", "N/A"),
    ),
    "l40s": (Gpu(L40S, 46068, "N/A", "N/A"),),
}


# -- nvidia-smi output for a scenario ---------------------------------------------------------

_MIG_DEVICE = """\
\t\t\t<mig_device>
\t\t\t\t<index>{index}</index>
\t\t\t\t<gpu_instance_id>{gi}</gpu_instance_id>
\t\t\t\t<compute_instance_id>{ci}</compute_instance_id>
\t\t\t\t<device_attributes>
\t\t\t\t\t<shared>
\t\t\t\t\t\t<multiprocessor_count>{p.sms}</multiprocessor_count>
\t\t\t\t\t\t<copy_engine_count>{p.ce}</copy_engine_count>
\t\t\t\t\t\t<encoder_count>0</encoder_count>
\t\t\t\t\t\t<decoder_count>{p.dec}</decoder_count>
\t\t\t\t\t\t<ofa_count>0</ofa_count>
\t\t\t\t\t\t<jpg_count>{p.jpg}</jpg_count>
\t\t\t\t\t</shared>
\t\t\t\t</device_attributes>
\t\t\t\t<fb_memory_usage>
\t\t\t\t\t<total>{memory} MiB</total>
\t\t\t\t\t<reserved>0 MiB</reserved>
\t\t\t\t\t<used>13 MiB</used>
\t\t\t\t\t<free>{free} MiB</free>
\t\t\t\t</fb_memory_usage>
\t\t\t</mig_device>
"""

_GPU = """\
\t<gpu id="00000000:{bus}:00.0">
\t\t<product_name>{name}</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<mig_mode>
\t\t\t<current_mig>{current}</current_mig>
\t\t\t<pending_mig>{pending}</pending_mig>
\t\t</mig_mode>
\t\t<mig_devices>{devices}</mig_devices>
\t\t<uuid>{uuid}</uuid>
\t\t<minor_number>{index}</minor_number>
\t\t<pci>
\t\t\t<pci_bus>{bus}</pci_bus>
\t\t\t<pci_bus_id>00000000:{bus}:00.0</pci_bus_id>
\t\t</pci>
\t\t<fb_memory_usage>
\t\t\t<total>{memory} MiB</total>
\t\t\t<reserved>0 MiB</reserved>
\t\t\t<used>1 MiB</used>
\t\t\t<free>{free} MiB</free>
\t\t</fb_memory_usage>
\t</gpu>
"""

_LOG = """\
<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<driver_version>{driver}</driver_version>
\t<attached_gpus>{count}</attached_gpus>
{gpus}</nvidia_smi_log>
"""

_LGI_HEAD = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
"""
_LCI_HEAD = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
"""
CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}  # a compute instance spanning its whole GI
_LGI_RULE = "+" + "-" * 55 + "+\n"
_LCI_RULE = "+" + "-" * 68 + "+\n"
NO_MIG = "No MIG-enabled devices found.\n"


def smi_xml(gpus: tuple[Gpu, ...]) -> str:
    body = []
    for index, gpu in enumerate(gpus):
        devices = "".join(
            _MIG_DEVICE.format(
                index=n,
                gi=m.gi,
                ci=m.ci,
                p=PROFILES[m.profile],
                memory=m.smi_memory_mib or PROFILES[m.profile].memory_mib,
                free=(m.smi_memory_mib or PROFILES[m.profile].memory_mib) - 13,
            )
            for n, m in enumerate(gpu.migs)
        )
        body.append(
            _GPU.format(
                bus=BUSES[index],
                name=gpu.name,
                current=gpu.current,
                pending=gpu.pending,
                devices="\n" + devices + "\t\t" if devices else "None",
                uuid=gpu_uuid(index),
                index=index,
                memory=gpu.memory_mib,
                free=gpu.memory_mib - 1,
            )
        )
    return _LOG.format(driver=DRIVER, count=len(gpus), gpus="".join(body))


def smi_list(gpus: tuple[Gpu, ...]) -> str:
    lines = []
    for index, gpu in enumerate(gpus):
        lines.append(f"GPU {index}: {gpu.name} (UUID: {gpu_uuid(index)})")
        for n, mig in enumerate(gpu.migs):
            lines.append(f"  MIG {mig.profile:<12}Device {n:2d}: (UUID: {mig_uuid(index, mig)})")
    return "\n".join(lines) + "\n"


def smi_lgi(gpus: tuple[Gpu, ...]) -> str:
    instances = {(index, m.gi): m for index, gpu in enumerate(gpus) for m in gpu.migs}
    rows = [
        f"|  {index:2d}  MIG {m.profile:<12}{PROFILES[m.profile].id:>6}   {m.gi:6d}"
        f"{m.slot:>12}:{PROFILES[m.profile].slices}     |\n"
        for (index, _), m in instances.items()
    ]
    return _LGI_HEAD + _LGI_RULE.join(rows) + _LGI_RULE if rows else NO_MIG


def smi_lci(gpus: tuple[Gpu, ...]) -> str:
    rows = [
        f"|  {index:2d}     {m.gi:2d}       MIG {m.profile:<12}"
        f"{CI_PROFILE_IDS[PROFILES[m.profile].slices]:>8}  {m.ci:9d}"
        f"{0:>11}:{PROFILES[m.profile].slices}     |\n"
        for index, gpu in enumerate(gpus)
        for m in gpu.migs
    ]
    return _LCI_HEAD + _LCI_RULE.join(rows) + _LCI_RULE if rows else NO_MIG


# A sh stand-in: logs its argv, answers the four read-only queries from files, refuses the rest.
FAKE_SMI = """\
#!/bin/sh
printf '%s\\n' "$*" >>"{log}"
case "$*" in
  "-L") name=L ;;
  "-q -x") name=q-x ;;
  "mig -lgi") name=lgi ;;
  "mig -lci") name=lci ;;
  *) echo "fake nvidia-smi: not a read-only query: $*" >&2; exit 2 ;;
esac
cat "{dir}/$name.out"
exit "$(cat "{dir}/$name.rc")"
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    smi_calls: list[str]
    nvml_calls: list[str]

    def section(self, header: str) -> list[str]:
        lines = self.stdout.splitlines()
        start = lines.index(header) + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("== ")), None)
        return lines[start:end]

    @property
    def compared(self) -> list[str]:
        return self.section(COMPARE_HEADER)


def fake_smi(tmp_path: Path, outputs: dict[str, tuple[str, int]]) -> tuple[Path, Path]:
    """A bin directory holding the fake nvidia-smi, and the file it logs its argv to."""
    bin_dir = tmp_path / "bin"
    data = tmp_path / "smi"
    bin_dir.mkdir()
    data.mkdir()
    log = tmp_path / "nvidia-smi-calls.log"
    for name, (text, rc) in outputs.items():
        (data / f"{name}.out").write_text(text)
        (data / f"{name}.rc").write_text(str(rc))
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(log=log, dir=data))
    smi.chmod(0o755)
    return bin_dir, log


def smi_outputs(gpus: tuple[Gpu, ...]) -> dict[str, tuple[str, int]]:
    # With no MIG device nvidia-smi's mig -lgi/-lci say so; assumed to exit non-zero, which
    # the script must take in its stride either way.
    lgi, lci = smi_lgi(gpus), smi_lci(gpus)
    return {
        "L": (smi_list(gpus), 0),
        "q-x": (smi_xml(gpus), 0),
        "lgi": (lgi, 6 if lgi == NO_MIG else 0),
        "lci": (lci, 6 if lci == NO_MIG else 0),
    }


def run_script(
    tmp_path: Path,
    outputs: dict[str, tuple[str, int]],
    fake_nvml: FakeNvml | None,
) -> Run:
    bin_dir, smi_log = fake_smi(tmp_path, outputs)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.update(
        PYTHON=sys.executable, PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", TMPDIR=str(scratch)
    )
    if fake_nvml is not None:
        # The script unsets MIGNURSE_NVML_LIBRARY: pynvml must find the fake by its soname.
        env["LD_LIBRARY_PATH"] = str(fake_nvml.library.parent)
    # stderr into stdout, in the order a person running the script sees them
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert list(scratch.iterdir()) == [], "the script left its temp dir behind"
    smi_calls = smi_log.read_text().splitlines() if smi_log.exists() else []
    nvml_calls = fake_nvml.calls() if fake_nvml is not None else []
    return Run(done.returncode, done.stdout, smi_calls, nvml_calls)


def assert_read_only(run: Run, nvml_expected: bool = True) -> None:
    assert set(run.smi_calls) == READ_ONLY_SMI, run.smi_calls
    assert len(run.smi_calls) == len(READ_ONLY_SMI)
    if nvml_expected:
        assert "nvmlInitWithFlags" in run.nvml_calls, "the probe did not load the fake library"
    assert [c for c in run.nvml_calls if MUTATING_NVML.search(c)] == []
    assert [c for c in run.nvml_calls if not READ_NVML.match(c)] == []


def summary(run: Run) -> str:
    return run.compared[-1]


# -- the script ------------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "checks"), [("h100-mig", 209), ("mixed", 28)])
def test_all_agree(fake_nvml: FakeNvml, tmp_path: Path, scenario: str, checks: int) -> None:
    fake_nvml.use(scenario)
    run = run_script(tmp_path, smi_outputs(SCENARIOS[scenario]), fake_nvml)
    assert run.returncode == 0, run.stdout
    assert summary(run) == f"SUMMARY: {checks} checks, 0 differ"
    assert len(run.compared) == checks + 1
    assert all(line.endswith("-> agree") for line in run.compared[:-1])
    assert "GPU 0 mig mode current: probe Enabled, nvidia-smi Enabled -> agree" in run.compared
    assert_read_only(run)


def test_mixed_compares_profiles_pending_mode_and_a_gpu_without_mig(
    fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    fake_nvml.use("mixed")
    run = run_script(tmp_path, smi_outputs(SCENARIOS["mixed"]), fake_nvml)
    for line in (
        "GPU count: probe 3, nvidia-smi 3 -> agree",
        "GPU 0 MIG devices: probe 4, nvidia-smi 4 -> agree",
        "GPU 0 MIG device GI 2 CI 0 profile: probe 3g.40gb, nvidia-smi 3g.40gb -> agree",
        "GPU 0 MIG device GI 3 CI 0 memory MiB: probe 19968, nvidia-smi 19968 -> agree",
        f"GPU 0 MIG device GI 9 CI 0 uuid: probe {mig_uuid(0, Mig(2, '1g.10gb', 9))}, "
        f"nvidia-smi {mig_uuid(0, Mig(2, '1g.10gb', 9))} -> agree",
        "GPU 1 mig mode pending: probe Enabled, nvidia-smi Enabled -> agree",
        "GPU 1 mig mode current: probe Disabled, nvidia-smi Disabled -> agree",
        "GPU 2 mig mode current: probe NotSupported, nvidia-smi NotSupported -> agree",
        f"GPU 2 name: probe {L40S}, nvidia-smi {L40S} -> agree",
    ):
        assert line in run.compared


def test_nvidia_smi_shows_one_mig_device_fewer(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use("h100-mig")
    gpus = list(SCENARIOS["h100-mig"])
    gpus[3] = replace(gpus[3], migs=gpus[3].migs[:-1])  # GPU 3 without GI 13
    run = run_script(tmp_path, smi_outputs(tuple(gpus)), fake_nvml)
    assert run.returncode == 3, run.stdout
    differ = [line for line in run.compared if line.endswith("-> DIFFER")]
    assert differ == [
        "GPU 3 MIG devices: probe 7, nvidia-smi 6 -> DIFFER",
        f"GPU 3 MIG device GI 13 CI 0: probe {mig_uuid(3, ALL_1G[6])}, nvidia-smi absent -> DIFFER",
    ]
    assert summary(run) == "SUMMARY: 207 checks, 2 differ"
    assert_read_only(run)


def test_nvidia_smi_shows_other_memory(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use("h100-mig")
    gpus = list(SCENARIOS["h100-mig"])
    migs = list(gpus[5].migs)
    migs[2] = replace(migs[2], smi_memory_mib=9728)  # GI 9
    gpus[5] = replace(gpus[5], migs=tuple(migs))
    run = run_script(tmp_path, smi_outputs(tuple(gpus)), fake_nvml)
    assert run.returncode == 3, run.stdout
    assert [line for line in run.compared if "DIFFER" in line] == [
        "GPU 5 MIG device GI 9 CI 0 memory MiB: probe 9984, nvidia-smi 9728 -> DIFFER"
    ]
    assert summary(run) == "SUMMARY: 209 checks, 1 differ"


def test_mig_off_on_both(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use("l40s")
    run = run_script(tmp_path, smi_outputs(SCENARIOS["l40s"]), fake_nvml)
    # probe_cli's exit_code: 1 when no GPU here supports MIG; the comparison still runs.
    assert run.returncode == 1, run.stdout
    assert "GPU 0 mig mode current: probe NotSupported, nvidia-smi NotSupported -> agree" in (
        run.compared
    )
    assert "GPU 0 mig mode pending: probe NotSupported, nvidia-smi NotSupported -> agree" in (
        run.compared
    )
    assert "GPU 0 MIG devices: probe 0, nvidia-smi 0 -> agree" in run.compared
    assert summary(run) == "SUMMARY: 6 checks, 0 differ"
    assert "(nvidia-smi mig -lgi exited 6)" in run.section("== nvidia-smi mig -lgi")
    assert_read_only(run)


@pytest.mark.skipif(real_nvml_installed(), reason="a real NVIDIA driver is installed here")
def test_no_nvml_library_at_all(tmp_path: Path) -> None:
    broken = (
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that"
        " the NVIDIA Display Driver is properly installed and present in your system.\n",
        12,
    )
    run = run_script(tmp_path, dict.fromkeys(("L", "q-x", "lgi", "lci"), broken), None)
    assert run.returncode == 2, run.stdout
    [line] = run.compared
    assert line.startswith("cannot compare: probe JSON "), line
    assert "library-not-found" in line
    assert_read_only(run, nvml_expected=False)


def test_script_names_no_mutating_command() -> None:
    """Every nvidia-smi the script runs is one of the four read-only queries."""
    text = SCRIPT.read_text()
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    queries = [line.split(" ", 2)[2] for line in code if line.startswith("query ")]
    assert [q.removeprefix("nvidia-smi ") for q in queries] == [
        "-L",
        "-q -x",
        "mig -lgi",
        "mig -lci",
    ]
    compare_call = " ".join(code[code.index('echo "== probe against nvidia-smi"') + 1 :])
    for flag in ("--probe-json", "--smi-xml", "--smi-list", "--smi-lgi", "--smi-lci"):
        assert flag in compare_call
    # Python runs only the probe, the comparer and the pynvml import check.
    assert {line.strip() for line in code if '"$python" -' in line} == PYTHON_RUNS
    runs = [line for line in code if not line.startswith("query ") and "echo " not in line]
    assert [line for line in runs if "nvidia-smi" in line] == []


# -- the comparer on its own -----------------------------------------------------------------


def _state(*gpus: GpuMigState) -> MigState:
    return MigState("nvml", gpus=gpus)


def _device(gi: int, profile: str = "3g.40gb", memory: int = 40448) -> MigDevice:
    return MigDevice(f"MIG-{gi}", gi, 0, profile, memory, gi)


def test_gpus_are_matched_by_uuid_before_index() -> None:
    a = GpuMigState(0, H100, "GPU-a", mig_current=MIG_ENABLED, mig_pending=MIG_ENABLED)
    b = GpuMigState(1, L40S, "GPU-b")
    checks = compare(_state(a, b), _state(replace(b, index=0), replace(a, index=1)))
    assert all(c.agrees for c in checks), [c.line() for c in checks if not c.agrees]


def test_a_gpu_only_nvidia_smi_lists_differs() -> None:
    a = GpuMigState(0, H100, "GPU-a")
    checks = compare(_state(a), _state(a, GpuMigState(1, H100, "GPU-b")))
    assert [c.line() for c in checks if not c.agrees] == [
        "GPU count: probe 1, nvidia-smi 2 -> DIFFER",
        "GPU 1: probe absent, nvidia-smi GPU-b -> DIFFER",
    ]


def test_profile_differs_and_names_the_device() -> None:
    probe = GpuMigState(0, H100, "GPU-a", devices=(_device(2), _device(3)))
    smi = replace(probe, devices=(_device(2), _device(3, "4g.40gb")))
    assert [c.line() for c in compare(_state(probe), _state(smi)) if not c.agrees] == [
        "GPU 0 MIG device GI 3 CI 0 profile: probe 3g.40gb, nvidia-smi 4g.40gb -> DIFFER"
    ]


PARTIAL_CI = (
    Gpu(H100, 81559, "Enabled", "Enabled", (Mig(0, "3g.40gb", 2, 0), Mig(0, "3g.40gb", 2, 1))),
)


@pytest.mark.parametrize("named_by", ["L", "lgi", "lci"])
def test_partial_compute_instances_are_named_by_their_gpu_instance(
    tmp_path: Path, named_by: str
) -> None:
    """Two 1-slice CIs of a 3g.40gb GI: -L and -lci call each `1c.3g.40gb`, -lgi names the GI
    `3g.40gb`, and so does the probe; whichever nvidia-smi output names them, they agree."""
    smi_names = {
        "L": smi_list(PARTIAL_CI).replace("MIG 3g.40gb ", "MIG 1c.3g.40gb"),
        "lgi": smi_lgi(PARTIAL_CI),
        "lci": smi_lci(PARTIAL_CI).replace("MIG 3g.40gb ", "MIG 1c.3g.40gb"),
    }[named_by]
    bare_list = f"GPU 0: {H100} (UUID: {gpu_uuid(0)})\n"  # GPUs only: no MIG names in -L
    probe = _state(
        GpuMigState(
            0,
            H100,
            gpu_uuid(0),
            mig_current=MIG_ENABLED,
            mig_pending=MIG_ENABLED,
            devices=tuple(
                MigDevice(mig_uuid(0, m), m.gi, m.ci, "3g.40gb", 40448, n)
                for n, m in enumerate(PARTIAL_CI[0].migs)
            ),
        )
    )
    files = {name: tmp_path / name for name in ("probe.json", "q.xml", "L", "lgi", "lci")}
    files["probe.json"].write_text(json.dumps(probe.to_json()))
    files["q.xml"].write_text(smi_xml(PARTIAL_CI))
    files["L"].write_text(smi_names if named_by == "L" else bare_list)
    files["lgi"].write_text(smi_names if named_by == "lgi" else NO_MIG)
    files["lci"].write_text(smi_names if named_by == "lci" else NO_MIG)
    _, smi, notes = load(*(files[name] for name in ("probe.json", "q.xml", "L", "lgi", "lci")))
    assert notes == []
    assert [d.profile for d in smi.gpus[0].devices] == ["3g.40gb", "3g.40gb"]
    differ = [c.subject for c in compare(probe, smi) if not c.agrees]
    # MIG UUIDs come from -L only (-q -x has none): a bare -L leaves them unknown.
    expected = [] if named_by == "L" else [f"GPU 0 MIG device GI 2 CI {ci} uuid" for ci in (0, 1)]
    assert differ == expected


def _check(tmp_path: Path, **texts: str) -> subprocess.CompletedProcess[str]:
    args = []
    for flag in ("probe-json", "smi-xml", "smi-list"):
        path = tmp_path / flag
        if flag.replace("-", "_") in texts:
            path.write_text(texts[flag.replace("-", "_")])
        args += [f"--{flag}", str(path)]
    return subprocess.run(
        [sys.executable, "-m", "mignurse.gpu.check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unreadable_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    gpus = SCENARIOS["l40s"]
    good = {"smi_xml": smi_xml(gpus), "smi_list": smi_list(gpus)}
    done = _check(tmp_path, **good)  # no probe JSON file at all
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    assert line.startswith("cannot compare: probe JSON ") and "cannot read" in line

    done = _check(tmp_path, probe_json="{not json", **good)
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    assert "probe JSON" in line and "not JSON" in line

    probe = '{"source": "nvml", "status": "ok", "gpus": [{"index": 0, "name": "NVIDIA L40S"}]}'
    done = _check(tmp_path, probe_json=probe, smi_xml="<nvidia_smi_log><gpu>", smi_list="")
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    assert line.startswith("cannot compare: nvidia-smi -q -x ") and "truncated" in line

    done = _check(tmp_path, probe_json=probe, smi_xml=good["smi_xml"], smi_list="garbage\n")
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    assert line.startswith("cannot compare: nvidia-smi -L ")


def test_comparer_imports_only_the_standard_library_and_mignurse() -> None:
    """On the GPU box only nvidia-ml-py is installed: the comparer must not even need that.
    -S leaves site-packages off the path, as on a box with only the repo on PYTHONPATH."""
    code = (
        "import sys, mignurse.gpu.check\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules}"
        " - set(sys.stdlib_module_names) - {'mignurse', '__main__'})))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
