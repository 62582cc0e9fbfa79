"""nvml.json: the `MigState.to_json()` document mignurse's NVML probe wrote on the node."""

from __future__ import annotations

import json
from typing import Any

from mignurse.evidence._common import ProblemLog, clip
from mignurse.model import (
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    MIG_UNKNOWN,
    PROBE_DRIVER_NOT_LOADED,
    PROBE_ERROR,
    PROBE_LIBRARY_NOT_FOUND,
    PROBE_NO_GPUS,
    PROBE_OK,
    GpuMigState,
    MigDevice,
    MigState,
)

SOURCE = "nvml"
_STATUSES = frozenset(
    {PROBE_OK, PROBE_LIBRARY_NOT_FOUND, PROBE_DRIVER_NOT_LOADED, PROBE_NO_GPUS, PROBE_ERROR}
)
_MODES = frozenset({MIG_ENABLED, MIG_DISABLED, MIG_NOT_SUPPORTED, MIG_UNKNOWN})


def _error(detail: str, source: str = SOURCE) -> MigState:
    return MigState(source=source, status=PROBE_ERROR, detail=detail)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any, where: str, problems: ProblemLog) -> int | None:
    if value is None:
        return None
    # bool is an int subclass; true/false in an id field is corruption, not 1/0.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    problems.add(f"{where}: expected an integer, got {clip(json.dumps(value), 40)}")
    return None


def _mode(value: Any, where: str, problems: ProblemLog) -> str:
    if value is None:
        return MIG_UNKNOWN
    if isinstance(value, str) and value in _MODES:
        return value
    problems.add(f"{where}: unknown MIG mode {clip(str(value), 40)!r}")
    return MIG_UNKNOWN


def _device(raw: Any, where: str, problems: ProblemLog) -> MigDevice | None:
    if not isinstance(raw, dict):
        problems.add(f"{where}: not an object")
        return None
    return MigDevice(
        uuid=_str(raw.get("uuid")),
        gpu_instance_id=_int(raw.get("gpuInstanceId"), f"{where}.gpuInstanceId", problems),
        compute_instance_id=_int(
            raw.get("computeInstanceId"), f"{where}.computeInstanceId", problems
        ),
        profile=_str(raw.get("profile")),
        memory_mib=_int(raw.get("memoryMiB"), f"{where}.memoryMiB", problems),
        index=_int(raw.get("index"), f"{where}.index", problems),
    )


def _gpu(raw: Any, position: int, problems: ProblemLog) -> GpuMigState | None:
    where = f"gpus[{position}]"
    if not isinstance(raw, dict):
        problems.add(f"{where}: not an object")
        return None
    index = _int(raw.get("index"), f"{where}.index", problems)
    mode = raw.get("migMode")
    if not isinstance(mode, dict):
        if mode is not None:
            problems.add(f"{where}.migMode: not an object")
        mode = {}
    raw_devices = raw.get("devices")
    if raw_devices is None:
        raw_devices = []
    elif not isinstance(raw_devices, list):
        problems.add(f"{where}.devices: not a list")
        raw_devices = []
    devices = (_device(d, f"{where}.devices[{i}]", problems) for i, d in enumerate(raw_devices))
    return GpuMigState(
        index=index if index is not None else position,
        name=_str(raw.get("name")),
        uuid=_str(raw.get("uuid")),
        pci_bus_id=_str(raw.get("pciBusId")),
        mig_current=_mode(mode.get("current"), f"{where}.migMode.current", problems),
        mig_pending=_mode(mode.get("pending"), f"{where}.migMode.pending", problems),
        devices=tuple(d for d in devices if d is not None),
        pci_device_id=_str(raw.get("pciDeviceId")),
    )


def parse_nvml_json(text: str) -> MigState:
    """The MigState back from its JSON; anything unreadable makes it an error state, saying why."""
    if not text.strip():
        return _error("empty nvml.json")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return _error(f"nvml.json is not JSON: {clip(str(exc))}")
    if not isinstance(doc, dict):
        return _error("nvml.json is not a JSON object")
    problems = ProblemLog()
    source = _str(doc.get("source")) or SOURCE
    status = doc.get("status")
    if not isinstance(status, str) or status not in _STATUSES:
        problems.add(f"unknown status {clip(json.dumps(status), 40)}")
    raw_gpus = doc.get("gpus")
    if raw_gpus is None:
        raw_gpus = []
    elif not isinstance(raw_gpus, list):
        problems.add("gpus: not a list")
        raw_gpus = []
    parsed = (_gpu(raw, i, problems) for i, raw in enumerate(raw_gpus))
    gpus = tuple(g for g in parsed if g is not None)
    detail = _str(doc.get("detail"))
    driver = _str(doc.get("driverVersion"))
    if problems:
        # A document that does not read cleanly must not claim an ok probe.
        said = f"recorded status {clip(str(status), 40)!r}" + (f" ({detail})" if detail else "")
        reasons = "; ".join(problems.result())
        return MigState(
            source, PROBE_ERROR, f"malformed nvml.json: {reasons}; {said}", driver, gpus
        )
    return MigState(source, str(status), detail, driver, gpus)
