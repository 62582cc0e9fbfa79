"""nvidia-smi output from a node (`-q -x`, `-L`, `mig -lgi`, `mig -lci`, `mig -lgip`) into the
model's MigState.

nvidia-smi's text is not a stable interface (the nvidia-smi(1) manual page), so every parser reads
what it recognises, reports the rest as problems, and never raises.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar
from xml.parsers.expat import errors as expat_errors

from mignurse.evidence._common import ProblemLog, clip, split_lines
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

SOURCE = "nvidia-smi"

# -- nvidia-smi -L ----------------------------------------------------------------------------

_L_GPU = re.compile(r"GPU (\d+): (.*?) \(UUID: ([^)\s]*)\)")
_L_MIG = re.compile(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)\s]*)\)")
# Drivers before R470 name MIG devices MIG-<GPU-UUID>/<gi>/<ci>.
_OLD_MIG_UUID = re.compile(r"MIG-GPU-[0-9A-Fa-f-]+/(\d+)/(\d+)")


@dataclass(frozen=True, slots=True)
class SmiMigDevice:
    index: int  # "Device N" under its GPU
    profile: str  # "1g.10gb"
    uuid: str
    gpu_instance_id: int | None = None  # only the old MIG-GPU-…/gi/ci form carries these
    compute_instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class SmiGpu:
    index: int
    name: str
    uuid: str
    mig_devices: tuple[SmiMigDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class SmiList:
    gpus: tuple[SmiGpu, ...] = ()
    problems: tuple[str, ...] = ()


def parse_smi_list(text: str) -> SmiList:
    """`nvidia-smi -L`: GPUs and the MIG devices listed under each."""
    problems = ProblemLog()
    gpus: list[SmiGpu] = []
    devices: list[SmiMigDevice] = []

    def flush() -> None:
        if gpus:
            gpus[-1] = replace(gpus[-1], mig_devices=tuple(devices))
        devices.clear()

    for number, line in enumerate(split_lines(text), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        gpu = _L_GPU.fullmatch(stripped)
        if gpu is not None:
            flush()
            gpus.append(SmiGpu(int(gpu.group(1)), gpu.group(2), gpu.group(3)))
            continue
        mig = _L_MIG.fullmatch(stripped)
        if mig is not None:
            if not gpus:
                problems.line(number, "MIG device listed before any GPU")
                continue
            uuid = mig.group(3)
            old = _OLD_MIG_UUID.fullmatch(uuid)
            devices.append(
                SmiMigDevice(
                    index=int(mig.group(2)),
                    profile=mig.group(1),
                    uuid=uuid,
                    gpu_instance_id=int(old.group(1)) if old else None,
                    compute_instance_id=int(old.group(2)) if old else None,
                )
            )
            continue
        problems.line(number, f"unrecognised: {clip(stripped)!r}")
    flush()
    if not text.strip():
        problems.add("empty nvidia-smi -L output")
    elif not gpus:
        problems.add("no GPUs listed")
    return SmiList(tuple(gpus), problems.result())


# -- nvidia-smi mig -lgi / -lci ---------------------------------------------------------------

RowT = TypeVar("RowT")


@dataclass(frozen=True, slots=True)
class GpuInstanceRow:
    gpu: int
    profile: str  # "1g.10gb" (the table's Name without "MIG ")
    profile_id: int
    instance_id: int  # the GPU instance id (GI)
    placement_start: int | None = None  # None where the table has no Placement column
    placement_size: int | None = None


@dataclass(frozen=True, slots=True)
class ComputeInstanceRow:
    gpu: int
    gpu_instance_id: int
    profile: str
    profile_id: int
    instance_id: int  # the compute instance id (CI)
    placement_start: int | None = None  # drivers before R470 print no Placement column
    placement_size: int | None = None


@dataclass(frozen=True, slots=True)
class MigTable(Generic[RowT]):
    rows: tuple[RowT, ...] = ()
    none_found: str = ""  # "No GPU instances found" and friends: a valid, empty answer
    problems: tuple[str, ...] = ()
    error: str = ""  # "Failed to display …: Insufficient Permissions": nvidia-smi refused


# Rows with or without the trailing "Placement Start:Size" column (the MIG user guide's
# R450-era -lci example has none); a "*" marks a default profile in some listings.
_PLACEMENT = r"(?:\s+(\d+):(\d+))?"
_LGI_ROW = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\*?\s+(\d+)" + _PLACEMENT + r"\s*\|")
_LCI_ROW = re.compile(
    r"\|\s*(\d+)\s+(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\*?\s+(\d+)" + _PLACEMENT + r"\s*\|"
)
_FAILED = re.compile(r"Failed to (?:display|get|list)\b.*", re.IGNORECASE)
_BORDER = re.compile(r"\+[-=+]*\+|\|=*\|")
_HEADER_WORDS = frozenset(
    {"GPU", "GPU instances:", "Compute instances:", "Name", "Profile", "Instance", "Placement",
     "ID", "Start:Size", "instances:", "Compute", "instance", "profiles:", "Instances",
     "Free/Total", "Memory", "GiB", "P2P", "SM", "DEC", "ENC", "CE", "JPEG", "OFA"}
)  # fmt: skip
_NONE_FOUND = re.compile(r"No\b.*\bfound\b.*", re.IGNORECASE)


def _table_lines(
    text: str, problems: ProblemLog, what: str
) -> tuple[list[tuple[int, str]], str, str]:
    """The candidate data rows (with line numbers), any "No … found" and any refusal."""
    rows: list[tuple[int, str]] = []
    none_found = ""
    error = ""
    for number, line in enumerate(split_lines(text), start=1):
        stripped = line.strip()
        if not stripped or _BORDER.fullmatch(stripped):
            continue
        if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1:
            words = set(stripped[1:-1].split())
            if not words or words <= _HEADER_WORDS:
                continue
            rows.append((number, stripped))
            continue
        if _NONE_FOUND.fullmatch(stripped):
            none_found = none_found or stripped
            continue
        if _FAILED.fullmatch(stripped):
            error = error or stripped
            problems.line(number, f"nvidia-smi refused: {clip(stripped)!r}")
            continue
        problems.line(number, f"unrecognised: {clip(stripped)!r}")
    if not text.strip():
        problems.add(f"empty nvidia-smi mig {what} output")
    return rows, none_found, error


def parse_mig_lgi(text: str) -> MigTable[GpuInstanceRow]:
    """`nvidia-smi mig -lgi`: one row per GPU instance."""
    problems = ProblemLog()
    lines, none_found, error = _table_lines(text, problems, "-lgi")
    rows: list[GpuInstanceRow] = []
    for number, line in lines:
        m = _LGI_ROW.fullmatch(line)
        if m is None:
            problems.line(number, f"unrecognised table row: {clip(line)!r}")
            continue
        gpu, profile, profile_id, gi, start, size = m.groups()
        rows.append(
            GpuInstanceRow(int(gpu), profile, int(profile_id), int(gi), _opt(start), _opt(size))
        )
    if text.strip() and not rows and not none_found:
        problems.add("no GPU instance table found")
    return MigTable(tuple(rows), none_found, problems.result(), error)


def parse_mig_lci(text: str) -> MigTable[ComputeInstanceRow]:
    """`nvidia-smi mig -lci`: one row per compute instance, with its GPU instance."""
    problems = ProblemLog()
    lines, none_found, error = _table_lines(text, problems, "-lci")
    rows: list[ComputeInstanceRow] = []
    for number, line in lines:
        m = _LCI_ROW.fullmatch(line)
        if m is None:
            problems.line(number, f"unrecognised table row: {clip(line)!r}")
            continue
        gpu, gi, profile, profile_id, ci, start, size = m.groups()
        rows.append(
            ComputeInstanceRow(
                int(gpu), int(gi), profile, int(profile_id), int(ci), _opt(start), _opt(size)
            )
        )
    if text.strip() and not rows and not none_found:
        problems.add("no compute instance table found")
    return MigTable(tuple(rows), none_found, problems.result(), error)


@dataclass(frozen=True, slots=True)
class GpuInstanceProfileRow:
    gpu: int
    profile: str  # "1g.24gb+me" (the table's Name without "MIG ")
    profile_id: int
    free: int
    total: int  # the most instances of this profile the GPU holds
    memory_gib: float | None = None


# `-lgip` prints two lines per profile: GPU, Name, ID, Free/Total, Memory, P2P, SM, DEC, ENC,
# then CE, JPEG, OFA under them (the second line is skipped, its numbers are engine counts).
_LGIP_ROW = re.compile(
    r"\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+(?:\.\d+)?|N/A)\s+\S+"
    r"(?:\s+\S+){3}\s*\|"
)
_LGIP_ENGINES = re.compile(r"\|\s*\d+\s+\d+\s+\d+\s*\|")


def parse_mig_lgip(text: str) -> MigTable[GpuInstanceProfileRow]:
    """`nvidia-smi mig -lgip`: the GPU instance profiles each GPU offers, with their ids."""
    problems = ProblemLog()
    lines, none_found, error = _table_lines(text, problems, "-lgip")
    rows: list[GpuInstanceProfileRow] = []
    for number, line in lines:
        if _LGIP_ENGINES.fullmatch(line):
            continue
        m = _LGIP_ROW.fullmatch(line)
        if m is None:
            problems.line(number, f"unrecognised table row: {clip(line)!r}")
            continue
        gpu, profile, profile_id, free, total, memory = m.groups()
        rows.append(
            GpuInstanceProfileRow(
                int(gpu), profile, int(profile_id), int(free), int(total),
                None if memory == "N/A" else float(memory),
            )
        )  # fmt: skip
    if text.strip() and not rows and not none_found:
        problems.add("no GPU instance profile table found")
    return MigTable(tuple(rows), none_found, problems.result(), error)


def _opt(digits: str | None) -> int | None:
    return int(digits) if digits is not None else None


# -- nvidia-smi -q -x -------------------------------------------------------------------------

# nvidia-smi writes `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`: a bare external
# reference, dropped unread. Anything else DTD-like (internal subset, entities) is refused.
_SIMPLE_DOCTYPE = re.compile(
    r"<!DOCTYPE\s+[\w.:-]+"
    r"(?:\s+(?:SYSTEM|PUBLIC)(?:\s+(?:\"[^\"<>\[\]]*\"|'[^'<>\[\]]*'))+)?\s*>"
)
_XML_DECL = re.compile(r"<\?xml[^>]*\?>")
_ROOT_CLOSE = "</nvidia_smi_log>"
_DTD_LEFT = re.compile(r"<!(?:DOCTYPE|ENTITY|ELEMENT|ATTLIST)", re.IGNORECASE)
# expat's "no element found", "unclosed token", "partial character": the text stops early.
_TRUNCATION_CODES = frozenset(
    expat_errors.codes[name]
    for name in (
        expat_errors.XML_ERROR_NO_ELEMENTS,
        expat_errors.XML_ERROR_UNCLOSED_TOKEN,
        expat_errors.XML_ERROR_PARTIAL_CHAR,
    )
)
_DIGITS = re.compile(r"[0-9]{1,18}")
_MIB = re.compile(r"\s*([0-9]{1,18})\s*MiB\s*")
_DEVICE_ID = re.compile(r"[0-9A-Fa-f]{8}")

# "[N/A]" and "[Not Supported]" are the bracketed forms some drivers print for the same.
_MODES = {
    "enabled": MIG_ENABLED,
    "disabled": MIG_DISABLED,
    "n/a": MIG_NOT_SUPPORTED,
    "not supported": MIG_NOT_SUPPORTED,
}

# What nvidia-smi prints instead of XML, mapped to the probe states NVML would report.
_NOT_XML = (
    ("couldn't find libnvidia-ml.so", PROBE_LIBRARY_NOT_FOUND),
    ("command not found", PROBE_LIBRARY_NOT_FOUND),
    ("executable file not found", PROBE_LIBRARY_NOT_FOUND),
    ("no such file or directory", PROBE_LIBRARY_NOT_FOUND),
    ("couldn't communicate with the nvidia driver", PROBE_DRIVER_NOT_LOADED),
    ("driver/library version mismatch", PROBE_DRIVER_NOT_LOADED),
    ("no devices were found", PROBE_NO_GPUS),
)


def _child_text(element: ET.Element | None, path: str) -> str:
    if element is None:
        return ""
    found = element.find(path)
    if found is None or found.text is None:
        return ""
    return found.text.strip()


def _int_or_none(value: str) -> int | None:
    """ASCII digits only ("N/A", "²" and other odd values → None)."""
    value = value.strip()
    return int(value) if _DIGITS.fullmatch(value) else None


def _mib(value: str) -> int | None:
    m = _MIB.fullmatch(value)
    return int(m.group(1)) if m else None


def _device_id(value: str) -> str:
    """`233010DE` (as -q -x writes it) or `0x233010DE` → "0x233010DE"; anything else → ""."""
    digits = value.strip().removeprefix("0x").removeprefix("0X")
    return f"0x{digits.upper()}" if _DEVICE_ID.fullmatch(digits) else ""


def _mode(value: str) -> str:
    if not value:
        return MIG_UNKNOWN
    # "Insufficient Permissions" (an unprivileged container) and anything else: unknown.
    return _MODES.get(value.strip().strip("[]").lower(), MIG_UNKNOWN)


def _mig_devices(gpu: ET.Element) -> tuple[MigDevice, ...]:
    holder = gpu.find("mig_devices")
    if holder is None:
        return ()
    devices: list[MigDevice] = []
    for item in holder.findall("mig_device"):
        devices.append(
            MigDevice(
                uuid=_child_text(item, "uuid"),
                gpu_instance_id=_int_or_none(_child_text(item, "gpu_instance_id")),
                compute_instance_id=_int_or_none(_child_text(item, "compute_instance_id")),
                memory_mib=_mib(_child_text(item, "fb_memory_usage/total")),
                index=_int_or_none(_child_text(item, "index")),
            )
        )
    return tuple(devices)


def _gpu(index: int, gpu: ET.Element) -> GpuMigState:
    mode = gpu.find("mig_mode")
    return GpuMigState(
        index=index,
        name=_child_text(gpu, "product_name"),
        uuid=_child_text(gpu, "uuid"),
        pci_bus_id=(gpu.get("id") or _child_text(gpu, "pci/pci_bus_id")).strip(),
        mig_current=_mode(_child_text(mode, "current_mig")) if mode is not None else MIG_UNKNOWN,
        mig_pending=_mode(_child_text(mode, "pending_mig")) if mode is not None else MIG_UNKNOWN,
        devices=_mig_devices(gpu),
        pci_device_id=_device_id(_child_text(gpu, "pci/pci_device_id")),
    )


def _not_xml(text: str) -> MigState:
    lowered = text.lower()
    for needle, status in _NOT_XML:
        if needle in lowered:
            return MigState(source=SOURCE, status=status, detail=clip(text, 300))
    return MigState(source=SOURCE, status=PROBE_ERROR, detail=f"not nvidia-smi XML: {clip(text)!r}")


def _split_noise(body: str) -> tuple[str, str]:
    """The XML document and any other text around it (stderr merged in, SSM markers)."""
    root_at = body.find("<nvidia_smi_log")
    before = _XML_DECL.sub("", body[:root_at]).strip()
    close_at = body.rfind(_ROOT_CLOSE)
    after = ""
    if close_at >= root_at:
        after = body[close_at + len(_ROOT_CLOSE) :].strip()
        body = body[: close_at + len(_ROOT_CLOSE)]
    # Blank lines stand in for what was cut, so parse errors keep the file's line numbers.
    document = "\n" * body.count("\n", 0, root_at) + body[root_at:]
    noise = " … ".join(clip(part, 80) for part in (before, after) if part)
    return document, noise


@dataclass(frozen=True)
class SmiTree:
    """`nvidia-smi -q -x` read as far as it goes: the root, the `<gpu>` elements that closed,
    how many opened, the parse error if any, and text found around the document."""

    root: ET.Element | None
    gpus: list[ET.Element]
    started: int
    error: ET.ParseError | None
    noise: str = ""
    refused: str = ""  # why the text was not parsed at all (a DTD subset, entities)

    @property
    def truncated(self) -> bool:
        return self.error is not None and self.error.code in _TRUNCATION_CODES


def read_smi_tree(text: str) -> SmiTree:
    """Parse `nvidia-smi -q -x` output that may be cut short or wrapped in other text; the
    bare external DOCTYPE is dropped unread, any other DTD construct refused."""
    body = _SIMPLE_DOCTYPE.sub(lambda m: "\n" * m.group(0).count("\n"), text, count=1)
    if _DTD_LEFT.search(body):
        return SmiTree(None, [], 0, None, refused="the XML declares a DTD subset or entities")
    document, noise = _split_noise(body)
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    error: ET.ParseError | None = None
    try:
        parser.feed(document)
        parser.close()
    except ET.ParseError as exc:
        error = exc
    root: ET.Element | None = None
    complete: list[ET.Element] = []
    started = 0
    depth = 0
    try:
        for item in parser.read_events():
            event, element = item[0], item[-1]
            if not isinstance(element, ET.Element):
                continue  # only start/end events were asked for: each carries an element
            if event == "start":
                depth += 1
                if root is None:
                    root = element
                elif depth == 2 and element.tag == "gpu":
                    started += 1
            else:
                if depth == 2 and element.tag == "gpu":
                    complete.append(element)
                depth -= 1
    except ET.ParseError as exc:
        error = error or exc
    return SmiTree(root, complete, started, error, noise)


def _indexes(complete: list[ET.Element], attached: int | None, queried: str | None) -> list[int]:
    """Each listed GPU's nvidia-smi index. -q -x prints none: with every attached GPU listed
    (in index order) it is the position; with `-i 0,3` the asked-for indexes, in order; else
    the device minor number, which follows the same PCI order on a node."""
    positions = list(range(len(complete)))
    if attached is None or attached <= len(complete):
        return positions
    asked = [part.strip() for part in (queried or "").split(",") if part.strip()]
    if asked and all(_DIGITS.fullmatch(part) for part in asked) and len(asked) == len(complete):
        return sorted(int(part) for part in asked)
    minors = [_int_or_none(_child_text(gpu, "minor_number")) for gpu in complete]
    if all(m is not None for m in minors) and len(set(minors)) == len(minors):
        return [m for m in minors if m is not None]
    return positions


def parse_smi_xml(text: str, *, queried: str | None = None) -> MigState:
    """`nvidia-smi -q -x` as a MigState (profiles empty: the XML has none; see merge_smi).

    `queried` is the `-i` value the XML was written for, when known (`nvidia-smi -q -x -i 3`):
    the attached GPUs it left out were not asked for, and that is not a fault.
    """
    if not text.strip():
        return MigState(source=SOURCE, status=PROBE_ERROR, detail="empty nvidia-smi -q -x output")
    if "<nvidia_smi_log" not in text:
        return _not_xml(text)
    tree = read_smi_tree(text)
    if tree.refused:
        return MigState(source=SOURCE, status=PROBE_ERROR, detail=f"refused: {tree.refused}")
    root, complete, started, error = tree.root, tree.gpus, tree.started, tree.error
    notes = [f"text outside the XML: {tree.noise!r}"] if tree.noise else []

    if root is None or root.tag != "nvidia_smi_log":
        return MigState(SOURCE, PROBE_ERROR, "; ".join([f"malformed XML: {error}", *notes]))
    attached = _int_or_none(_child_text(root, "attached_gpus"))
    indexes = _indexes(complete, attached if error is None else None, queried)
    gpus = tuple(_gpu(index, gpu) for index, gpu in zip(indexes, complete, strict=True))
    driver = _child_text(root, "driver_version")
    if error is not None:
        kind = "truncated XML" if tree.truncated else "malformed XML"
        dropped = started - len(complete)
        read = f"{len(complete)} complete <gpu> read"
        left_out = [f"{dropped} incomplete <gpu> left out"] if dropped else []
        detail = "; ".join([f"{kind}: {error}", read, *left_out, *notes])
        return MigState(SOURCE, PROBE_ERROR, detail, driver, gpus)
    if attached is not None and attached > len(gpus) and queried is not None:
        others = attached - len(gpus)
        said = f"nvidia-smi -i {queried}: {len(gpus)} of {attached} attached GPUs queried"
        detail = "; ".join([f"{said}, {others} not asked for", *notes])
        return MigState(SOURCE, PROBE_OK, detail, driver, gpus)
    if attached is not None and attached > len(gpus):
        # A `-i` query lists only the GPUs asked for; a GPU nvidia-smi cannot read (fallen off
        # the bus, Xid 79) is left out too. The XML does not say which: keep what is listed.
        others = attached - len(gpus)
        detail = "; ".join(
            [
                f"attached_gpus is {attached} but {len(gpus)} <gpu> listed: {others} not "
                "queried (nvidia-smi -i) or not readable",
                *notes,
            ]
        )
        return MigState(SOURCE, PROBE_ERROR, detail, driver, gpus)
    if attached is not None and attached < len(gpus):
        detail = "; ".join([f"attached_gpus is {attached} but {len(gpus)} <gpu> listed", *notes])
        return MigState(SOURCE, PROBE_ERROR, detail, driver, gpus)
    if not gpus:
        detail = "; ".join(["no <gpu> elements in nvidia-smi -q -x", *notes])
        return MigState(SOURCE, PROBE_NO_GPUS, detail, driver)
    # Stray text around an intact document (stderr merged in) is kept as a note only.
    return MigState(SOURCE, PROBE_OK, "; ".join(notes), driver, gpus)


# -- merging the three views ------------------------------------------------------------------


def _find_smi_gpu(gpu: GpuMigState, smi: SmiList) -> SmiGpu | None:
    if gpu.uuid:
        for candidate in smi.gpus:
            if candidate.uuid == gpu.uuid:
                return candidate
    for candidate in smi.gpus:
        if candidate.index == gpu.index:
            return candidate
    return None


def _merge_device(
    device: MigDevice, listed: SmiGpu | None, gi_profiles: dict[int, str]
) -> MigDevice:
    # Profile: -L by MIG UUID, else -lgi by (GPU, GI id), else -L by (GI, CI) or device index.
    by_uuid = by_ids = by_index = None
    for candidate in listed.mig_devices if listed is not None else ():
        if device.uuid and candidate.uuid == device.uuid:
            by_uuid = candidate
        if (
            candidate.gpu_instance_id is not None
            and candidate.gpu_instance_id == device.gpu_instance_id
            and candidate.compute_instance_id == device.compute_instance_id
        ):
            by_ids = candidate
        if device.index is not None and candidate.index == device.index:
            by_index = candidate
    matched = by_uuid or by_ids or by_index
    profile = device.profile
    if not profile:
        if by_uuid is not None:
            profile = by_uuid.profile
        elif device.gpu_instance_id in gi_profiles:
            profile = gi_profiles[device.gpu_instance_id]
        elif matched is not None:
            profile = matched.profile
    uuid = device.uuid or (matched.uuid if matched is not None else "")
    if profile == device.profile and uuid == device.uuid:
        return device
    return replace(device, profile=profile, uuid=uuid)


def _from_list(smi: SmiList, gi_profiles: dict[int, dict[int, str]]) -> tuple[GpuMigState, ...]:
    gpus: list[GpuMigState] = []
    for listed in smi.gpus:
        devices = tuple(
            MigDevice(
                uuid=d.uuid,
                gpu_instance_id=d.gpu_instance_id,
                compute_instance_id=d.compute_instance_id,
                profile=d.profile,
                index=d.index,
            )
            for d in listed.mig_devices
        )
        # -L shows MIG devices only when MIG is on; their absence proves nothing about the mode.
        current = MIG_ENABLED if devices or listed.index in gi_profiles else MIG_UNKNOWN
        gpus.append(
            GpuMigState(listed.index, listed.name, listed.uuid, "", current, MIG_UNKNOWN, devices)
        )
    return tuple(gpus)


def merge_smi(
    xml_state: MigState,
    smi_list: SmiList | None = None,
    lgi_rows: MigTable[GpuInstanceRow] | Sequence[GpuInstanceRow] | None = None,
) -> MigState:
    """The -q -x state with MIG profiles (and missing UUIDs) filled in from -L and mig -lgi."""
    rows = lgi_rows.rows if isinstance(lgi_rows, MigTable) else (lgi_rows or ())
    gi_profiles: dict[int, dict[int, str]] = {}
    for row in rows:
        gi_profiles.setdefault(row.gpu, {})[row.instance_id] = row.profile
    smi = smi_list or SmiList()

    if not xml_state.gpus:
        if not smi.gpus:
            return xml_state
        note = "GPUs read from nvidia-smi -L (no usable -q -x)"
        detail = f"{xml_state.detail}; {note}" if xml_state.detail else note
        return replace(xml_state, detail=detail, gpus=_from_list(smi, gi_profiles))

    merged: list[GpuMigState] = []
    for gpu in xml_state.gpus:
        listed = _find_smi_gpu(gpu, smi)
        profiles = gi_profiles.get(gpu.index, {})
        devices = tuple(_merge_device(d, listed, profiles) for d in gpu.devices)
        merged.append(
            replace(
                gpu,
                name=gpu.name or (listed.name if listed else ""),
                uuid=gpu.uuid or (listed.uuid if listed else ""),
                devices=devices,
            )
        )
    return replace(xml_state, gpus=tuple(merged))
