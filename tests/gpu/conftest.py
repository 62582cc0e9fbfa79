"""The fake libnvidia-ml.so.1 (fake_nvml.c), built once per session, and the environment
that points the NVML probe at it."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("fake_nvml.c")
ENV_LIBRARY = "MIGNURSE_NVML_LIBRARY"
ENV_SCENARIO = "FAKE_NVML_SCENARIO"
ENV_CALL_LOG = "FAKE_NVML_CALL_LOG"


@pytest.fixture(scope="session")
def fake_nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the fake NVML library cannot be built")
    target = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(target), str(SOURCE)],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@dataclass
class FakeNvml:
    """Selects the fake's scenario for the subprocesses a test starts."""

    library: Path
    call_log: Path
    monkeypatch: pytest.MonkeyPatch

    def use(self, scenario: str) -> None:
        self.monkeypatch.setenv(ENV_SCENARIO, scenario)

    def calls(self) -> list[str]:
        return self.call_log.read_text().split() if self.call_log.exists() else []


@pytest.fixture
def fake_nvml(fake_nvml_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    log = tmp_path / "nvml-calls.log"
    monkeypatch.setenv(ENV_LIBRARY, str(fake_nvml_library))
    monkeypatch.setenv(ENV_CALL_LOG, str(log))
    monkeypatch.setenv(ENV_SCENARIO, "h100-mig")
    return FakeNvml(fake_nvml_library, log, monkeypatch)


def real_nvml_installed() -> bool:
    """Whether this machine has a real NVIDIA driver library (then "no library" cannot be shown)."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True
