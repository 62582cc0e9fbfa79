"""The NVML probe's JSON against nvidia-smi's own view of the same GPUs, check by check.

`python -m mignurse.gpu.check --probe-json F --smi-xml F --smi-list F [--smi-lgi F]
[--smi-lci F]`, run by scripts/gpu-probe-check.sh on a machine with a real GPU. It only reads
files: standard library and mignurse's stdlib-only parsers, no pynvml. Exit code: 0 every
check agrees, 3 some differ, 2 an input cannot be read or parsed (one line says which).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

from mignurse.evidence._common import clip
from mignurse.evidence.nvml_json import parse_nvml_json
from mignurse.evidence.nvsmi import (
    ComputeInstanceRow,
    MigTable,
    merge_smi,
    parse_mig_lci,
    parse_mig_lgi,
    parse_smi_list,
    parse_smi_xml,
)
from mignurse.model import (
    PROBE_NO_GPUS,
    PROBE_OK,
    GpuMigState,
    MigDevice,
    MigState,
)

EXIT_AGREE = 0
EXIT_UNREADABLE = 2
EXIT_DIFFER = 3

MISSING = "-"  # a value the source did not give
ABSENT = "absent"  # a GPU or MIG device the source does not list at all

# A compute instance smaller than its GPU instance is named "<C>c.<G>g.<M>gb" by -L and -lci
# (NVIDIA/mig-parted v0.15.0 pkg/types/mig_profile.go); the probe names the GPU instance's profile,
# so that prefix is dropped.
_CI_PREFIX = re.compile(r"^\d+c\.")

RowT = TypeVar("RowT")


class Unreadable(Exception):
    """An input that cannot be read or parsed; the message names it and says why."""


@dataclass(frozen=True, slots=True)
class Check:
    subject: str  # "GPU 0 mig mode current"
    probe: str
    smi: str

    @property
    def agrees(self) -> bool:
        return self.probe == self.smi

    def line(self) -> str:
        verdict = "agree" if self.agrees else "DIFFER"
        return f"{self.subject}: probe {self.probe}, nvidia-smi {self.smi} -> {verdict}"


def _text(value: str | None) -> str:
    return value if value else MISSING


def _number(value: int | None) -> str:
    return MISSING if value is None else str(value)


def _device_key(device: MigDevice) -> tuple[str, int | None, int | None]:
    if device.gpu_instance_id is None or device.compute_instance_id is None:
        return ("slot", device.index, None)  # no ids: only the position is left to match on
    return ("ids", device.gpu_instance_id, device.compute_instance_id)


def _device_order(key: tuple[str, int | None, int | None]) -> tuple[str, int, int]:
    kind, first, second = key
    return (kind, -1 if first is None else first, -1 if second is None else second)


def _device_name(key: tuple[str, int | None, int | None]) -> str:
    kind, first, second = key
    if kind == "slot":
        return f"MIG device #{_number(first)}"
    return f"MIG device GI {first} CI {second}"


def _compare_devices(where: str, probe: GpuMigState, smi: GpuMigState) -> list[Check]:
    checks = [Check(f"{where} MIG devices", str(len(probe.devices)), str(len(smi.devices)))]
    probe_devices = {_device_key(d): d for d in probe.devices}
    smi_devices = {_device_key(d): d for d in smi.devices}
    for key in sorted(probe_devices.keys() | smi_devices.keys(), key=_device_order):
        subject = f"{where} {_device_name(key)}"
        mine, theirs = probe_devices.get(key), smi_devices.get(key)
        if mine is None or theirs is None:
            checks.append(_one_side(subject, mine, theirs))
            continue
        # Exact memory: the probe floors nvmlDeviceGetMemoryInfo's total to MiB and nvidia-smi
        # prints that total in MiB; the fake driver, the real-shaped -q -x samples and
        # `mig -lgip` all give the same figure (9984 MiB for an H100 1g.10gb), so any
        # difference is reported until a real GPU shows one that is normal.
        checks += [
            Check(f"{subject} profile", _text(mine.profile), _text(theirs.profile)),
            Check(f"{subject} memory MiB", _number(mine.memory_mib), _number(theirs.memory_mib)),
            Check(f"{subject} uuid", _text(mine.uuid), _text(theirs.uuid)),
        ]
    return checks


class _HasUuid(Protocol):
    @property
    def uuid(self) -> str | None: ...


def _one_side(subject: str, mine: _HasUuid | None, theirs: _HasUuid | None) -> Check:
    """A GPU or MIG device only one side lists: its UUID there, "absent" on the other."""
    return Check(
        subject,
        _text(mine.uuid) if mine else ABSENT,
        _text(theirs.uuid) if theirs else ABSENT,
    )


def _pair(probe: MigState, smi: MigState) -> list[tuple[GpuMigState | None, GpuMigState | None]]:
    """Each probe GPU with nvidia-smi's by UUID, else by index; then nvidia-smi's leftovers."""
    left = list(smi.gpus)
    pairs: list[tuple[GpuMigState | None, GpuMigState | None]] = []
    for gpu in probe.gpus:
        match = next((s for s in left if gpu.uuid and s.uuid == gpu.uuid), None)
        match = match or next((s for s in left if s.index == gpu.index), None)
        if match is not None:
            left.remove(match)
        pairs.append((gpu, match))
    pairs += [(None, s) for s in left]
    return pairs


def compare(probe: MigState, smi: MigState) -> list[Check]:
    """GPU count, then per GPU: name, UUID, MIG mode, MIG devices and each device's details."""
    checks = [Check("GPU count", str(len(probe.gpus)), str(len(smi.gpus)))]
    for mine, theirs in _pair(probe, smi):
        index = mine.index if mine is not None else theirs.index if theirs is not None else 0
        where = f"GPU {index}"
        if mine is None or theirs is None:
            checks.append(_one_side(where, mine, theirs))
            continue
        checks += [
            Check(f"{where} name", _text(mine.name), _text(theirs.name)),
            Check(f"{where} uuid", _text(mine.uuid), _text(theirs.uuid)),
            Check(f"{where} mig mode current", mine.mig_current, theirs.mig_current),
            Check(f"{where} mig mode pending", mine.mig_pending, theirs.mig_pending),
        ]
        checks += _compare_devices(where, mine, theirs)
    return checks


def _gi_profiles(smi: MigState, lci: MigTable[ComputeInstanceRow] | None) -> MigState:
    """Every nvidia-smi MIG device named by its GPU instance's profile, as the probe names it:
    merge_smi's name (-L, else -lgi), else -lci's, less any compute-instance prefix."""
    by_ci: dict[tuple[int, int | None, int | None], str] = {}
    for row in lci.rows if lci else ():
        by_ci[row.gpu, row.gpu_instance_id, row.instance_id] = row.profile
    gpus = []
    for gpu in smi.gpus:
        devices = []
        for d in gpu.devices:
            ids = (gpu.index, d.gpu_instance_id, d.compute_instance_id)
            name = d.profile or by_ci.get(ids, "")
            devices.append(replace(d, profile=_CI_PREFIX.sub("", name)))
        gpus.append(replace(gpu, devices=tuple(devices)))
    return replace(smi, gpus=tuple(gpus))


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise Unreadable(f"{what} {path}: cannot read: {exc.strerror or exc}") from exc


def _usable(state: MigState, what: str, path: Path) -> None:
    """Refuse a state that read nothing comparable; "no GPUs" is an answer to compare."""
    if state.status == PROBE_NO_GPUS or state.gpus:
        return
    said = f"{state.status}: {state.detail}" if state.detail else state.status
    raise Unreadable(f"{what} {path}: nothing to compare ({clip(said, 300)})")


def _table(
    path: Path | None, what: str, parse: Callable[[str], MigTable[RowT]], notes: list[str]
) -> MigTable[RowT] | None:
    if path is None:
        return None
    table = parse(_read(path, what))
    if table.problems and not table.rows:
        # Optional, and an error text when MIG is off or nvidia-smi is not root: a note only.
        notes.append(f"{what} {path} ignored: {clip('; '.join(table.problems), 200)}")
        return None
    return table


def load(
    probe_json: Path,
    smi_xml: Path,
    smi_list: Path,
    smi_lgi: Path | None = None,
    smi_lci: Path | None = None,
) -> tuple[MigState, MigState, list[str]]:
    """Both sides as MigStates, plus notes on what was read with problems; raises Unreadable."""
    notes: list[str] = []
    probe = parse_nvml_json(_read(probe_json, "probe JSON"))
    _usable(probe, "probe JSON", probe_json)
    xml_state = parse_smi_xml(_read(smi_xml, "nvidia-smi -q -x"))
    _usable(xml_state, "nvidia-smi -q -x", smi_xml)
    listing = parse_smi_list(_read(smi_list, "nvidia-smi -L"))
    if xml_state.gpus and not listing.gpus:
        raise Unreadable(f"nvidia-smi -L {smi_list}: {clip('; '.join(listing.problems), 300)}")
    if listing.problems:
        notes.append(f"nvidia-smi -L {smi_list}: {clip('; '.join(listing.problems), 200)}")
    lgi = _table(smi_lgi, "nvidia-smi mig -lgi", parse_mig_lgi, notes)
    lci = _table(smi_lci, "nvidia-smi mig -lci", parse_mig_lci, notes)
    smi = _gi_profiles(merge_smi(xml_state, listing, lgi), lci)
    for state, what in ((probe, "probe"), (smi, "nvidia-smi")):
        # What was read is compared; a partial read (a GPU NVML could not open) is said first.
        if state.status != PROBE_OK:
            notes.append(f"{what} status {state.status}: {clip(state.detail, 200)}")
        elif state.detail:
            notes.append(f"{what}: {clip(state.detail, 200)}")
    return probe, smi, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mignurse.gpu.check",
        description="Compare the NVML probe's JSON with nvidia-smi's output (files only).",
    )
    parser.add_argument("--probe-json", type=Path, required=True, help="probe_cli -o json")
    parser.add_argument("--smi-xml", type=Path, required=True, help="nvidia-smi -q -x")
    parser.add_argument("--smi-list", type=Path, required=True, help="nvidia-smi -L")
    parser.add_argument("--smi-lgi", type=Path, help="nvidia-smi mig -lgi")
    parser.add_argument("--smi-lci", type=Path, help="nvidia-smi mig -lci")
    args = parser.parse_args(argv)
    try:
        probe, smi, notes = load(
            args.probe_json, args.smi_xml, args.smi_list, args.smi_lgi, args.smi_lci
        )
    except Unreadable as exc:
        print(f"cannot compare: {exc}")
        return EXIT_UNREADABLE
    for note in notes:
        print(f"note: {note}")
    checks = compare(probe, smi)
    for check in checks:
        print(check.line())
    differ = sum(1 for c in checks if not c.agrees)
    print(f"SUMMARY: {len(checks)} checks, {differ} differ")
    return EXIT_DIFFER if differ else EXIT_AGREE


if __name__ == "__main__":
    sys.exit(main())
