"""MIG state read from the GPU itself (the NVML probe, or nvidia-smi output): each GPU's MIG
mode, current and pending, and the MIG devices carved from it, with the states a probe can
end in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIG_ENABLED = "Enabled"
MIG_DISABLED = "Disabled"
MIG_NOT_SUPPORTED = "NotSupported"  # a GPU without MIG (NVMLError_NotSupported)
MIG_UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (a GPU instance + compute instance pair) as the driver reports it."""

    uuid: str
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str = ""  # "1g.10gb"; empty when the source cannot tell (nvidia-smi -q -x)
    memory_mib: int | None = None
    index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "index": self.index,
            "gpuInstanceId": self.gpu_instance_id,
            "computeInstanceId": self.compute_instance_id,
            "profile": self.profile or None,
            "memoryMiB": self.memory_mib,
        }


@dataclass(frozen=True, slots=True)
class GpuMigState:
    index: int
    name: str
    uuid: str
    pci_bus_id: str = ""
    mig_current: str = MIG_UNKNOWN  # Enabled | Disabled | NotSupported | Unknown
    mig_pending: str = MIG_UNKNOWN
    devices: tuple[MigDevice, ...] = ()
    pci_device_id: str = ""  # "0x233010DE" as NVML and nvidia-smi -q -x give it; "" unknown

    @property
    def mode_change_pending(self) -> bool:
        return self.mig_current in (MIG_ENABLED, MIG_DISABLED) and self.mig_pending not in (
            self.mig_current,
            MIG_UNKNOWN,
        )

    def profile_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for device in self.devices:
            key = device.profile or "unknown"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "pciBusId": self.pci_bus_id or None,
            "pciDeviceId": self.pci_device_id or None,
            "migMode": {"current": self.mig_current, "pending": self.mig_pending},
            "devices": [d.to_json() for d in self.devices],
            "profileCounts": self.profile_counts(),
        }


# MigState.status values: the states a probe can end in, none of them a crash.
PROBE_OK = "ok"
PROBE_LIBRARY_NOT_FOUND = "library-not-found"  # no libnvidia-ml.so: no driver installed here
PROBE_DRIVER_NOT_LOADED = "driver-not-loaded"
PROBE_NO_GPUS = "no-gpus"
PROBE_ERROR = "error"


@dataclass(frozen=True, slots=True)
class MigState:
    """The MIG picture of one node: every GPU with its mode and MIG devices."""

    source: str  # "nvml" | "nvidia-smi"
    status: str = PROBE_OK
    detail: str = ""  # why, when status is not ok
    driver_version: str = ""
    gpus: tuple[GpuMigState, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "detail": self.detail or None,
            "driverVersion": self.driver_version or None,
            "gpus": [g.to_json() for g in self.gpus],
        }
