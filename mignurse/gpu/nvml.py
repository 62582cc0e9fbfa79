"""The node's MIG state read from the driver through NVML (pynvml), as a `MigState`.

Read-only by construction: only Get/Is calls, never a Set/Create/Destroy/Reset. Every
failure ends as a `MigState` status with the NVML text in `detail`, never an exception
(NVIDIA nvml-api group__nvmlMultiInstanceGPU; docs/mig.md "Reading MIG state").
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from dataclasses import dataclass
from typing import Any

import pynvml

from mignurse.gpu.models import GpuModel, by_device_id, by_product_name, parse_device_id
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
ENV_LIBRARY = "MIGNURSE_NVML_LIBRARY"  # absolute path of a libnvidia-ml.so to use instead

# GPU instance profile enums (nvidia-ml-py pynvml.py NVML_GPU_INSTANCE_PROFILE_*) and the name
# suffix each implies when the driver gives no names (v1 profile info); None = a variant we cannot
# name from the enum alone.
_PROFILE_ENUMS: tuple[tuple[int, str | None], ...] = (
    (0x0, ""), (0x1, ""), (0x2, ""), (0x3, ""), (0x4, ""), (0x5, ""), (0x6, ""),
    (0x7, "+me"), (0x8, None), (0x9, ""), (0xA, None), (0xB, None), (0xC, None),
    (0xD, None), (0xE, None), (0xF, None), (0x10, None), (0x11, None),
)  # fmt: skip
_SLOT_EMPTY = (pynvml.NVMLError_NotFound, pynvml.NVMLError_InvalidArgument)
_GB = re.compile(r"^(\d+)g\.(\d+)gb$")
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class _Profile:
    """One GPU instance profile of a GPU, as nvmlDeviceGetGpuInstanceProfileInfo gave it."""

    id: int
    slices: int
    memory_mb: int
    media: tuple[int, int, int, int]  # decoders, encoders, JPEG, OFA: tell "+me" apart
    name: str  # "1g.10gb"; "" when neither the driver nor the family table names it


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def _pci_device_id(pci: Any) -> str:
    """nvmlPciInfo_t.pciDeviceId (0x233010DE: device id high, vendor low) as text."""
    value = getattr(pci, "pciDeviceId", None) if pci is not None else None
    return f"0x{int(value):08X}" if isinstance(value, int) and value > 0 else ""


def _mode(value: int) -> str:
    return MIG_ENABLED if value == pynvml.NVML_DEVICE_MIG_ENABLE else MIG_DISABLED


def _use_library(path: str) -> None:
    # pynvml's _LoadNvmlLibrary only dlopens "libnvidia-ml.so.1" while pynvml.nvmlLib is None,
    # under libLoadLock: presetting nvmlLib under that lock makes nvmlInit use this library.
    with pynvml.libLoadLock:
        if pynvml.nvmlLib is None:
            pynvml.nvmlLib = ctypes.CDLL(path)


def _profile_info_v2(handle: Any, enum: int) -> Any:
    # pynvml's wrapper leaves info.version 0, which the driver answers with
    # ARGUMENT_VERSION_MISMATCH; make the same call through pynvml with the version set.
    info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
    info.version = pynvml.nvmlGpuInstanceProfileInfo_v2
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetGpuInstanceProfileInfoV")
    pynvml._nvmlCheckReturn(fn(handle, ctypes.c_uint(enum), ctypes.byref(info)))
    return info


def _family_name(family: GpuModel | None, slices: int, memory_mb: int, suffix: str) -> str:
    """A v1 profile's name from the model's table: the `<slices>g.<N>gb` closest in memory."""
    if family is None or not memory_mb:
        return ""
    best = ""
    best_gap = float("inf")
    for name in family.profiles:
        match = _GB.match(name)
        if match and int(match.group(1)) == slices:
            gap = abs(int(match.group(2)) - memory_mb / 1024)
            if gap < best_gap:
                best, best_gap = name, gap
    if not best:
        return ""
    return best + suffix if best + suffix in family.profiles else ""


def _profile_info(handle: Any, enum: int, named: bool) -> Any:
    if named:
        return _profile_info_v2(handle, enum)
    return pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum, 1)


def _profiles(handle: Any, gpu_name: str, device_id: str) -> list[_Profile]:
    """Every GPU instance profile this GPU supports; unsupported enums are skipped."""
    number = parse_device_id(device_id) if device_id else None
    family = by_device_id(number) if number is not None else by_product_name(gpu_name)
    found: list[_Profile] = []
    named = True  # version 2 carries names; drivers without it fall back to version 1
    for enum, suffix in _PROFILE_ENUMS:
        try:
            try:
                info = _profile_info(handle, enum, named)
            except pynvml.NVMLError_FunctionNotFound:
                if not named:
                    return found
                named = False
                info = _profile_info(handle, enum, named)
        except pynvml.NVMLError:
            continue  # NotSupported / InvalidArgument: not a profile of this GPU
        slices, memory = int(info.sliceCount), int(info.memorySizeMB)
        if named:
            name = _text(info.name).removeprefix("MIG ").strip()
        else:
            name = "" if suffix is None else _family_name(family, slices, memory, suffix)
        media = (int(info.decoderCount), int(info.encoderCount), int(info.jpegCount),
                 int(info.ofaCount))  # fmt: skip
        found.append(_Profile(int(info.id), slices, memory, media, name))
    return found


def _only_name(candidates: list[_Profile]) -> str:
    names = {p.name for p in candidates}
    return names.pop() if len(names) == 1 else ""


def _profile_name(
    parent: Any, mig: Any, gi: int | None, memory_mib: int | None, table: list[_Profile]
) -> str:
    """The device's profile: by its GI's profile id, else by slices and memory; "" if unsure."""
    if not table:
        return ""
    if gi is not None:
        try:
            instance = pynvml.nvmlDeviceGetGpuInstanceById(parent, gi)
            profile_id = int(pynvml.nvmlGpuInstanceGetInfo(instance).profileId)
        except pynvml.NVMLError:
            pass  # needs root on most drivers: fall through to the device's attributes
        else:
            return _only_name([p for p in table if p.id == profile_id])
    try:
        attrs = pynvml.nvmlDeviceGetAttributes(mig)
    except pynvml.NVMLError:
        attrs = None
    if attrs is not None:
        candidates = [
            p
            for p in table
            if p.slices == int(attrs.gpuInstanceSliceCount)
            and p.memory_mb == int(attrs.memorySizeMB)
        ]
        media = (int(attrs.sharedDecoderCount), int(attrs.sharedEncoderCount),
                 int(attrs.sharedJpegCount), int(attrs.sharedOfaCount))  # fmt: skip
        exact = [p for p in candidates if p.media == media]
        return _only_name(exact or candidates)
    if memory_mib is None:
        return ""
    # Memory alone: only a profile whose size no other profile shares can be told.
    nearest = min(abs(p.memory_mb - memory_mib) for p in table)
    if nearest > 0.05 * memory_mib:
        return ""
    return _only_name([p for p in table if abs(p.memory_mb - memory_mib) == nearest])


class _Walk:
    """One pass over the GPUs; failures are collected in `problems`, not raised."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def get(self, where: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError as err:
            self.problems.append(f"{where}: {err}")
            return None

    def devices(self, index: int, handle: Any, name: str, device_id: str) -> tuple[MigDevice, ...]:
        count = self.get(f"GPU {index} max MIG devices", pynvml.nvmlDeviceGetMaxMigDeviceCount,
                         handle)  # fmt: skip
        if not count:
            return ()
        table = _profiles(handle, name, device_id)
        devices: list[MigDevice] = []
        for slot in range(int(count)):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except _SLOT_EMPTY:
                continue  # an empty slot, as go-nvlib's VisitMigDevices skips it
            except pynvml.NVMLError as err:
                self.problems.append(f"GPU {index} MIG slot {slot}: {err}")
                continue
            where = f"GPU {index} MIG slot {slot}"
            gi = self.get(f"{where} GPU instance id", pynvml.nvmlDeviceGetGpuInstanceId, mig)
            ci = self.get(f"{where} compute instance id", pynvml.nvmlDeviceGetComputeInstanceId,
                          mig)  # fmt: skip
            uuid = self.get(f"{where} UUID", pynvml.nvmlDeviceGetUUID, mig)
            memory = self.get(f"{where} memory", pynvml.nvmlDeviceGetMemoryInfo, mig)
            memory_mib = int(memory.total) // _MIB if memory is not None else None
            gi_id = int(gi) if gi is not None else None
            devices.append(
                MigDevice(
                    uuid=_text(uuid),
                    gpu_instance_id=gi_id,
                    compute_instance_id=int(ci) if ci is not None else None,
                    profile=_profile_name(handle, mig, gi_id, memory_mib, table),
                    memory_mib=memory_mib,
                    index=slot,
                )
            )
        return tuple(devices)

    def gpu(self, index: int) -> GpuMigState | None:
        handle = self.get(f"GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            return None  # left out, and said so in problems
        name = _text(self.get(f"GPU {index} name", pynvml.nvmlDeviceGetName, handle))
        uuid = _text(self.get(f"GPU {index} UUID", pynvml.nvmlDeviceGetUUID, handle))
        pci = self.get(f"GPU {index} PCI info", pynvml.nvmlDeviceGetPciInfo, handle)
        bus_id = _text(pci.busId) if pci is not None else ""
        device_id = _pci_device_id(pci)
        try:
            current, pending = pynvml.nvmlDeviceGetMigMode(handle)
        except pynvml.NVMLError_NotSupported:
            return GpuMigState(index, name, uuid, bus_id, MIG_NOT_SUPPORTED, MIG_NOT_SUPPORTED,
                               pci_device_id=device_id)  # fmt: skip
        except pynvml.NVMLError as err:
            self.problems.append(f"GPU {index} MIG mode: {err}")
            return GpuMigState(index, name, uuid, bus_id, MIG_UNKNOWN, MIG_UNKNOWN,
                               pci_device_id=device_id)  # fmt: skip
        mig_current, mig_pending = _mode(current), _mode(pending)
        devices = self.devices(index, handle, name, device_id) if mig_current == MIG_ENABLED else ()
        return GpuMigState(index, name, uuid, bus_id, mig_current, mig_pending, devices,
                           pci_device_id=device_id)  # fmt: skip


def _read() -> MigState:
    walk = _Walk()
    driver = _text(walk.get("driver version", pynvml.nvmlSystemGetDriverVersion))
    count = walk.get("GPU count", pynvml.nvmlDeviceGetCount)
    if count is None:
        return MigState(SOURCE, PROBE_ERROR, "; ".join(walk.problems), driver)
    if count == 0:
        return MigState(SOURCE, PROBE_NO_GPUS, "NVML lists no GPUs", driver)
    gpus = tuple(g for g in (walk.gpu(i) for i in range(int(count))) if g is not None)
    status = PROBE_ERROR if walk.problems else PROBE_OK
    return MigState(SOURCE, status, "; ".join(walk.problems), driver, gpus)


def probe() -> MigState:
    """Every GPU's MIG mode and MIG devices, read once through NVML."""
    library = os.environ.get(ENV_LIBRARY, "")
    try:
        if library:
            if not os.path.isabs(library):
                return MigState(SOURCE, PROBE_LIBRARY_NOT_FOUND,
                                f"{ENV_LIBRARY}={library!r} is not an absolute path")  # fmt: skip
            _use_library(library)
        pynvml.nvmlInit()
    except OSError as err:
        return MigState(SOURCE, PROBE_LIBRARY_NOT_FOUND, f"{ENV_LIBRARY}: {err}")
    except pynvml.NVMLError_LibraryNotFound as err:
        return MigState(SOURCE, PROBE_LIBRARY_NOT_FOUND, f"libnvidia-ml.so.1: {err}")
    except pynvml.NVMLError_DriverNotLoaded as err:
        return MigState(SOURCE, PROBE_DRIVER_NOT_LOADED, f"nvmlInit: {err}")
    except pynvml.NVMLError as err:
        return MigState(SOURCE, PROBE_ERROR, f"nvmlInit: {err}")
    try:
        return _read()
    finally:
        # What was read stands; a failed shutdown changes nothing about it.
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
