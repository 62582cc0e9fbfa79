"""The NVML probe against the fake libnvidia-ml.so.1 (fake_nvml.c), one scenario each.

Every probe runs in a fresh interpreter: pynvml keeps the first library it loaded for the
life of the process, so scenarios and the real-library check cannot share one.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mignurse.evidence import parse_nvml_json
from mignurse.gpu.probe_cli import run
from mignurse.model import (
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    PROBE_DRIVER_NOT_LOADED,
    PROBE_ERROR,
    PROBE_LIBRARY_NOT_FOUND,
    PROBE_NO_GPUS,
    PROBE_OK,
    MigState,
)

from .conftest import ENV_LIBRARY, FakeNvml, real_nvml_installed

ROOT = Path(__file__).resolve().parents[2]
PROBE_SCRIPT = """
import json
from mignurse.evidence import parse_nvml_json
from mignurse.gpu.nvml import probe
state = probe()
doc = state.to_json()
print(json.dumps({"state": doc, "roundtrip": parse_nvml_json(json.dumps(doc)) == state}))
"""
READ_CALL = re.compile(
    r"^nvml(InitWithFlags|Init_v2|Init|Shutdown|ErrorString|SystemGet\w+|DeviceGet\w+"
    r"|DeviceIsMigDeviceHandle|GpuInstanceGetInfo)$"
)
MUTATING = re.compile(r"(Set|Create|Destroy|Reset|Clear|Register|Enable|Disable)")
H100 = "NVIDIA H100 80GB HBM3"


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def probe_in_subprocess() -> tuple[MigState, dict[str, Any]]:
    """The probe's MigState (via its JSON) and the JSON itself, from a fresh interpreter."""
    done = _python("-c", PROBE_SCRIPT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["roundtrip"] is True, "parse_nvml_json(to_json()) differs from the probe's state"
    return parse_nvml_json(json.dumps(result["state"])), result["state"]


def _assert_read_only(calls: list[str]) -> None:
    assert calls, "the fake recorded no calls"
    strays = [c for c in calls if not READ_CALL.match(c) or MUTATING.search(c)]
    assert strays == []


def test_h100_all_1g_10gb(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("h100-mig")
    state, doc = probe_in_subprocess()
    assert (state.source, state.status, state.detail) == ("nvml", PROBE_OK, "")
    assert state.driver_version == "570.133.20"
    assert [g.index for g in state.gpus] == list(range(8))
    assert len({g.pci_bus_id for g in state.gpus}) == 8
    assert state.gpus[0].pci_bus_id == "00000000:53:00.0"
    for gpu in state.gpus:
        assert gpu.name == H100
        assert gpu.pci_device_id == "0x233010DE"  # nvmlPciInfo_t.pciDeviceId
        assert gpu.uuid.startswith("GPU-")
        assert (gpu.mig_current, gpu.mig_pending) == (MIG_ENABLED, MIG_ENABLED)
        assert not gpu.mode_change_pending
        assert gpu.profile_counts() == {"1g.10gb": 7}
        assert [d.gpu_instance_id for d in gpu.devices] == list(range(7, 14))
        assert {d.compute_instance_id for d in gpu.devices} == {0}
        assert {d.memory_mib for d in gpu.devices} == {9984}
        assert [d.index for d in gpu.devices] == list(range(7))
        assert all(d.uuid.startswith("MIG-") for d in gpu.devices)
        assert len({d.uuid for d in gpu.devices}) == 7
    assert doc["gpus"][0]["profileCounts"] == {"1g.10gb": 7}
    assert doc["gpus"][0]["pciDeviceId"] == "0x233010DE"
    assert doc["gpus"][0]["devices"][0]["profile"] == "1g.10gb"
    calls = fake_nvml.calls()
    _assert_read_only(calls)
    assert calls.count("nvmlInitWithFlags") == 1
    assert calls.count("nvmlShutdown") == 1
    # Profile names came from version-2 profile info matched by the GI's profile id.
    assert "nvmlDeviceGetGpuInstanceProfileInfoV" in calls
    assert "nvmlGpuInstanceGetInfo" in calls


def test_l40s_has_no_mig(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("l40s")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_OK
    [gpu] = state.gpus
    assert gpu.name == "NVIDIA L40S"
    assert gpu.pci_device_id == "0x26B910DE"
    assert (gpu.mig_current, gpu.mig_pending) == (MIG_NOT_SUPPORTED, MIG_NOT_SUPPORTED)
    assert gpu.devices == ()
    assert "nvmlDeviceGetMaxMigDeviceCount" not in fake_nvml.calls()


def test_mixed_node_balanced_pending_and_non_mig(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("mixed")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_OK
    balanced, pending, l40s = state.gpus
    # The GI lookup is denied (non-root): profiles come from the device attributes.
    assert balanced.profile_counts() == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert [(d.gpu_instance_id, d.profile, d.memory_mib) for d in balanced.devices] == [
        (2, "3g.40gb", 40448),
        (3, "2g.20gb", 19968),
        (9, "1g.10gb", 9984),
        (10, "1g.10gb", 9984),
    ]
    assert (pending.mig_current, pending.mig_pending) == (MIG_DISABLED, MIG_ENABLED)
    assert pending.mode_change_pending
    assert pending.devices == ()
    assert l40s.mig_current == MIG_NOT_SUPPORTED
    calls = fake_nvml.calls()
    _assert_read_only(calls)
    assert "nvmlDeviceGetAttributes_v2" in calls


def test_empty_slots_are_skipped(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("empty-slots")
    state, _ = probe_in_subprocess()
    assert (state.status, state.detail) == (PROBE_OK, "")
    [gpu] = state.gpus
    assert [(d.index, d.gpu_instance_id, d.profile) for d in gpu.devices] == [
        (0, 7, "1g.10gb"),
        (3, 10, "1g.10gb"),
        (6, 13, "1g.10gb"),
    ]
    assert fake_nvml.calls().count("nvmlDeviceGetMigDeviceHandleByIndex") == 7


def test_driver_without_named_profiles_uses_family_table(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("old-driver")
    state, _ = probe_in_subprocess()
    assert state.driver_version == "470.57.02"
    [gpu] = state.gpus
    assert [d.profile for d in gpu.devices] == ["1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb"]
    assert "nvmlDeviceGetGpuInstanceProfileInfo" in fake_nvml.calls()


def test_memory_alone_names_only_unambiguous_profiles(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("restricted")
    state, doc = probe_in_subprocess()
    assert state.status == PROBE_OK
    whole, halves = state.gpus
    assert [d.profile for d in whole.devices] == ["7g.80gb"]
    # 3g.40gb and 4g.40gb have the same memory: left blank rather than guessed.
    assert [d.profile for d in halves.devices] == ["", ""]
    assert [d.memory_mib for d in halves.devices] == [40448, 40448]
    assert halves.profile_counts() == {"unknown": 2}
    assert doc["gpus"][1]["devices"][0]["profile"] is None


def test_lost_gpu_is_reported_and_the_rest_kept(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("gpu-lost")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_ERROR
    assert state.detail == "GPU 1: GPU is lost"
    assert [g.index for g in state.gpus] == [0]
    assert state.gpus[0].mig_current == MIG_DISABLED
    assert fake_nvml.calls().count("nvmlShutdown") == 1


def test_driver_not_loaded(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("driver-not-loaded")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_DRIVER_NOT_LOADED
    assert "Driver Not Loaded" in state.detail
    assert state.gpus == ()
    assert fake_nvml.calls() == ["nvmlInitWithFlags"]


def test_no_gpus(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("no-gpus")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_NO_GPUS
    assert state.gpus == ()
    assert state.driver_version == "570.133.20"


def test_unexpected_init_error_is_a_state(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("no-such-scenario")  # the fake's nvmlInit answers NVML_ERROR_UNKNOWN
    state, _ = probe_in_subprocess()
    assert (state.status, state.detail) == (PROBE_ERROR, "nvmlInit: Unknown Error")


def test_library_override_must_exist(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.monkeypatch.setenv(ENV_LIBRARY, str(tmp_path / "missing" / "libnvidia-ml.so.1"))
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_LIBRARY_NOT_FOUND
    assert ENV_LIBRARY in state.detail
    fake_nvml.monkeypatch.setenv(ENV_LIBRARY, "libnvidia-ml.so.1")
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_LIBRARY_NOT_FOUND
    assert "absolute" in state.detail


@pytest.mark.skipif(real_nvml_installed(), reason="a real NVIDIA driver is installed here")
def test_real_library_missing_is_a_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_LIBRARY, raising=False)
    state, _ = probe_in_subprocess()
    assert state.status == PROBE_LIBRARY_NOT_FOUND
    assert state.gpus == ()


# -- read-only ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario", ["h100-mig", "l40s", "mixed", "empty-slots", "old-driver", "restricted"]
)
def test_probe_makes_only_read_calls(fake_nvml: FakeNvml, scenario: str) -> None:
    fake_nvml.use(scenario)
    probe_in_subprocess()
    calls = fake_nvml.calls()
    _assert_read_only(calls)
    assert calls[0] == "nvmlInitWithFlags"
    assert calls[-1] == "nvmlShutdown"


def test_fake_exports_no_mutating_function(fake_nvml: FakeNvml) -> None:
    lib = ctypes.CDLL(str(fake_nvml.library))
    for name in (
        "nvmlDeviceSetMigMode",
        "nvmlDeviceCreateGpuInstance",
        "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlGpuInstanceCreateComputeInstance",
        "nvmlGpuInstanceDestroy",
        "nvmlComputeInstanceDestroy",
        "nvmlDeviceResetGpuLockedClocks",
        "nvmlDeviceSetPersistenceMode",
    ):
        assert not hasattr(lib, name), name


def test_a_mutating_call_against_the_fake_fails_loudly(fake_nvml: FakeNvml) -> None:
    script = """
import pynvml
from mignurse.gpu.nvml import _use_library
import os
_use_library(os.environ["MIGNURSE_NVML_LIBRARY"])
pynvml.nvmlInit()
try:
    pynvml.nvmlDeviceSetMigMode(pynvml.nvmlDeviceGetHandleByIndex(0), 0)
except pynvml.NVMLError_FunctionNotFound:
    print("refused")
finally:
    pynvml.nvmlShutdown()
"""
    done = _python("-c", script)
    assert done.stdout.strip() == "refused", done.stderr


def test_probe_source_names_no_mutating_nvml_function() -> None:
    source = (ROOT / "mignurse" / "gpu" / "nvml.py").read_text()
    names = set(re.findall(r"\bnvml[A-Z]\w*", source))
    assert names, "no NVML names found: the check reads the wrong file"
    assert {n for n in names if MUTATING.search(n)} == set()


# -- probe_cli ---------------------------------------------------------------------------


def _cli(output: str) -> subprocess.CompletedProcess[str]:
    return _python("-m", "mignurse.gpu.probe_cli", "-o", output)


def test_cli_json_ok(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("h100-mig")
    done = _cli("json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    state = parse_nvml_json(done.stdout)
    assert state.status == PROBE_OK
    assert sum(len(g.devices) for g in state.gpus) == 56


def test_cli_run_function_json(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("mixed")
    done = _python("-c", "from mignurse.gpu.probe_cli import run; raise SystemExit(run('json'))")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gpus"][1]["migMode"] == {
        "current": MIG_DISABLED,
        "pending": MIG_ENABLED,
    }


def test_cli_table(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("mixed")
    done = _cli("table")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "NVML probe: ok, driver 570.133.20"
    assert lines[1].split() == ["GPU", "NAME", "MIG", "CURRENT/PENDING", "DEVICES", "PROFILES"]
    assert lines[2].split()[0] == "0"
    assert "Enabled/Enabled" in lines[2]
    assert lines[2].endswith("2×1g.10gb, 1×2g.20gb, 1×3g.40gb")
    assert "Disabled/Enabled (change pending)" in lines[3]
    assert "NVIDIA L40S" in lines[4] and "NotSupported/NotSupported" in lines[4]


@pytest.mark.parametrize(
    ("scenario", "code", "reason"),
    [
        ("l40s", 1, "no GPU here supports MIG"),
        ("no-gpus", 1, "no GPUs"),
        ("driver-not-loaded", 2, "NVIDIA driver not loaded"),
        ("gpu-lost", 2, "NVML error: GPU 1: GPU is lost"),
    ],
)
def test_cli_exit_codes(fake_nvml: FakeNvml, scenario: str, code: int, reason: str) -> None:
    fake_nvml.use(scenario)
    done = _cli("table")
    assert done.returncode == code
    [line] = done.stderr.splitlines()
    assert reason in line
    assert done.stdout.startswith("NVML probe: ")


def test_cli_library_missing(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.monkeypatch.setenv(ENV_LIBRARY, str(tmp_path / "libnvidia-ml.so.1"))
    done = _cli("json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["status"] == PROBE_LIBRARY_NOT_FOUND
    [line] = done.stderr.splitlines()
    assert "NVML library not found" in line


def test_cli_rejects_unknown_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("xml") == 2
    assert "unknown output 'xml'" in capsys.readouterr().err


def test_mignurse_probe_command_as_a_user_runs_it(fake_nvml: FakeNvml) -> None:
    """`mignurse probe` through the real entry point, against the fake driver."""
    fake_nvml.use("h100-mig")
    done = _python("-m", "mignurse", "probe", "-o", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert len(document["gpus"]) == 8
    assert document["gpus"][0]["profileCounts"] == {"1g.10gb": 7}
    fake_nvml.use("driver-not-loaded")
    done = _python("-m", "mignurse", "probe")
    assert done.returncode == 2
    assert done.stderr.startswith("mignurse probe:") and done.stderr.count("\n") == 1
    _assert_read_only(fake_nvml.calls())
