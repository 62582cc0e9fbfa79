"""GPU memory health as nvidia-smi reports it, and the node monitoring agent's own verdicts.

nvidia-smi: `-q -x` (`<remapped_rows>`, `<retired_pages>`, `<ecc_errors>`), the `-q` text
("Remapped Rows", "Retired Pages", "ECC Errors") and the `nvidia-smi --query` section that
`nvidia-bug-report.sh` copies into its log. Drivers and GPUs without a feature print `N/A` or
leave the section out: every such field is None ("unknown"), never healthy or failed.

The agent: eks-node-monitoring-agent logs every condition it sends as one zap JSON line,
`"msg":"sending condition to exporter"` with `"condition":{"Reason","Message","Severity"}`
and `"conditionType"` (aws/eks-node-monitoring-agent@v1.7.0 pkg/manager/manager.go).

Text in, data out: nothing here raises on garbled, truncated or empty input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mignurse.evidence._common import ProblemLog, clip, split_lines
from mignurse.evidence.journal import JournalEntry
from mignurse.untrusted import json_value

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

SOURCE_XML = "nvidia-smi -q -x"
SOURCE_TEXT = "nvidia-smi -q"
SOURCE_BUG_REPORT = "nvidia-bug-report"


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """One GPU's memory-error state; None wherever nvidia-smi printed N/A or nothing."""

    index: int  # position in the output: nvidia-smi lists GPUs in index order
    pci_bus_id: str = ""  # "00000000:53:00.0"
    name: str = ""
    uuid: str = ""
    remap_failure: bool | None = None  # Remapping Failure Occurred / <remapped_row_failure>
    remap_pending: bool | None = None  # applied at the next GPU reset
    remapped_uncorrectable: int | None = None  # rows remapped for uncorrectable errors
    retirement_pending: bool | None = None  # Pending Page Blacklist / <pending_retirement>
    retired_double_bit: int | None = None  # pages retired for double-bit errors
    volatile_uncorrectable: int | None = None  # uncorrectable ECC errors since driver load
    sram_threshold_exceeded: bool | None = None  # R550+: SRAM uncorrectable errors over limit

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.pci_bus_id})" if self.pci_bus_id else f"GPU {self.index}"


@dataclass(frozen=True, slots=True)
class GpuHealthReport:
    source: str  # SOURCE_XML | SOURCE_TEXT | SOURCE_BUG_REPORT
    gpus: tuple[GpuHealth, ...] = ()
    driver: str = ""
    problems: tuple[str, ...] = ()


def _yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    return True if lowered == "yes" else False if lowered == "no" else None


_COUNT = re.compile(r"\s*([0-9]{1,18})\s*")


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    m = _COUNT.fullmatch(value)
    return int(m.group(1)) if m else None


def _sum(values: Iterable[int | None]) -> int | None:
    """The sum of the readable counts; None when none could be read (all N/A)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# -- nvidia-smi -q -x ---------------------------------------------------------------------------

# Volatile uncorrectable counters: R470+ DRAM/SRAM names (R550+ splits SRAM), then R4xx's.
_XML_UNCORRECTABLE = (
    "dram_uncorrectable",
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
)


def _text(element: ET.Element | None, path: str) -> str | None:
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _xml_gpu(position: int, gpu: ET.Element) -> GpuHealth:
    volatile = gpu.find("ecc_errors/volatile")
    uncorrectable = _sum(_count(_text(volatile, name)) for name in _XML_UNCORRECTABLE)
    if uncorrectable is None:
        uncorrectable = _count(_text(volatile, "double_bit/total"))
    pending = _text(gpu, "retired_pages/pending_retirement")
    if _yes_no(pending) is None:
        pending = _text(gpu, "retired_pages/pending_blacklist")
    return GpuHealth(
        index=position,
        pci_bus_id=(gpu.get("id") or _text(gpu, "pci/pci_bus_id") or "").strip(),
        name=_text(gpu, "product_name") or "",
        uuid=_text(gpu, "uuid") or "",
        remap_failure=_yes_no(_text(gpu, "remapped_rows/remapped_row_failure")),
        remap_pending=_yes_no(_text(gpu, "remapped_rows/remapped_row_pending")),
        remapped_uncorrectable=_count(_text(gpu, "remapped_rows/remapped_row_unc")),
        retirement_pending=_yes_no(pending),
        retired_double_bit=_count(_text(gpu, "retired_pages/double_bit_retirement/retired_count")),
        volatile_uncorrectable=uncorrectable,
        sram_threshold_exceeded=_yes_no(_text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")),
    )


def parse_gpu_health_xml(text: str) -> GpuHealthReport:
    """`nvidia-smi -q -x`: each complete `<gpu>`'s memory-error state."""
    from mignurse.evidence.nvsmi import read_smi_tree  # the XML reader, only for XML

    problems = ProblemLog()
    text = text.replace("\x00", "")
    if "<nvidia_smi_log" not in text:
        what = clip(text) if text.strip() else "empty output"
        return GpuHealthReport(SOURCE_XML, problems=(f"not nvidia-smi XML: {what!r}",))
    tree = read_smi_tree(text)
    if tree.refused:
        return GpuHealthReport(SOURCE_XML, problems=(f"refused: {tree.refused}",))
    root = tree.root
    gpus = [_xml_gpu(position, gpu) for position, gpu in enumerate(tree.gpus)]
    if tree.error is not None:
        problems.add(f"{'truncated' if tree.truncated else 'malformed'} XML: {tree.error}")
    attached = _count(_text(root, "attached_gpus"))
    if attached is not None and attached != len(gpus):
        problems.add(f"attached_gpus is {attached} but {len(gpus)} complete <gpu> read")
    return GpuHealthReport(
        SOURCE_XML, tuple(gpus), _text(root, "driver_version") or "", problems.result()
    )


# -- nvidia-smi -q (text) -----------------------------------------------------------------------

_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
# "        Pending                           : No"; a key never holds a colon, a value may.
_KEY_VALUE = re.compile(r"([^:]*[^\s:])\s*:(?:\s(.*)|)")
_BANNER = re.compile(r"=+\s*NVSMI LOG\s*=+")

# Paths below a GPU header, lowercased, as the R450–R580 text prints them.
_REMAP = "remapped rows"
_RETIRED = "retired pages"
_TEXT_UNCORRECTABLE = (
    ("ecc errors", "volatile", "dram uncorrectable"),
    ("ecc errors", "volatile", "sram uncorrectable"),
    ("ecc errors", "volatile", "sram uncorrectable parity"),
    ("ecc errors", "volatile", "sram uncorrectable sec-ded"),
)
# Before R470 the counters were "Single Bit"/"Double Bit" blocks with a "Total".
_TEXT_OLD_DOUBLE_BIT = ("ecc errors", "volatile", "double bit", "total")
_TEXT_PENDING_RETIREMENT = (
    (_RETIRED, "pending page blacklist"),
    (_RETIRED, "pending page retirement"),
    (_RETIRED, "pending"),
)


def _text_gpu(position: int, bus_id: str, fields: Mapping[tuple[str, ...], str]) -> GpuHealth:
    uncorrectable = _sum(_count(fields.get(path)) for path in _TEXT_UNCORRECTABLE)
    if uncorrectable is None:
        uncorrectable = _count(fields.get(_TEXT_OLD_DOUBLE_BIT))
    pending: bool | None = None
    for path in _TEXT_PENDING_RETIREMENT:
        pending = _yes_no(fields.get(path))
        if pending is not None:
            break
    return GpuHealth(
        index=position,
        pci_bus_id=bus_id,
        name=fields.get(("product name",), ""),
        uuid=fields.get(("gpu uuid",), ""),
        remap_failure=_yes_no(fields.get((_REMAP, "remapping failure occurred"))),
        remap_pending=_yes_no(fields.get((_REMAP, "pending"))),
        remapped_uncorrectable=_count(fields.get((_REMAP, "uncorrectable error"))),
        retirement_pending=pending,
        retired_double_bit=_count(fields.get((_RETIRED, "double bit ecc"))),
        volatile_uncorrectable=uncorrectable,
        sram_threshold_exceeded=_yes_no(
            fields.get(("ecc errors", "aggregate", "sram threshold exceeded"))
        ),
    )


def _parse_text(lines: list[str], source: str) -> GpuHealthReport:
    problems = ProblemLog()
    gpus: list[GpuHealth] = []
    top: dict[str, str] = {}
    fields: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []  # (indent, section name) below the current GPU
    bus_id: str | None = None
    saw_banner = False

    def flush() -> None:
        if bus_id is not None:
            gpus.append(_text_gpu(len(gpus), bus_id, fields))

    for line in lines:
        line = line.replace("\x00", "").rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if _BANNER.fullmatch(stripped):
            saw_banner = True
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        header = _GPU_HEADER.fullmatch(stripped)
        if header is not None and indent == 0:
            flush()
            bus_id, fields, stack = header.group(1), {}, []
            continue
        kv = _KEY_VALUE.fullmatch(stripped)
        if bus_id is None:
            if kv is not None:
                top[kv.group(1).lower()] = (kv.group(2) or "").strip()
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if kv is not None:
            path = (*(name for _, name in stack), kv.group(1).lower())
            fields[path] = (kv.group(2) or "").strip()
        else:
            stack.append((indent, stripped.lower()))
    flush()
    if not gpus:
        first = next((ln.strip() for ln in lines if ln.strip()), "")
        problems.add(
            f"no GPU in the nvidia-smi -q output: {clip(first)!r}"
            if first and not saw_banner
            else "no GPU in the nvidia-smi -q output"
        )
    attached = _count(top.get("attached gpus"))
    if attached is not None and attached != len(gpus):
        problems.add(f"Attached GPUs is {attached} but {len(gpus)} listed")
    return GpuHealthReport(source, tuple(gpus), top.get("driver version", ""), problems.result())


def parse_gpu_health_text(text: str) -> GpuHealthReport:
    """`nvidia-smi -q`: each GPU's "Remapped Rows", "Retired Pages" and "ECC Errors"."""
    return _parse_text(split_lines(text), SOURCE_TEXT)


# nvidia-bug-report.sh echoes each command before its output ("/usr/bin/nvidia-smi --query"),
# and a line of underscores before each block.
_BUG_REPORT_QUERY = re.compile(r"^\S*nvidia-smi (?:--query|-q)[ \t\r]*$", re.MULTILINE)
_BUG_REPORT_NEXT = re.compile(r"_{20,}|\S*nvidia-smi .*|NVIDIA Kernel module instance .*")
# R4xx: "Skipping nvidia-smi, … due to --safe-mode argument."; R570+: "Skipping: nvidia-smi, …
# Commands" then "Skipping due to --safe-mode-argument".
_BUG_REPORT_SAFE_MODE = re.compile(r"Skipping:? nvidia-smi[^\n]*\n?[^\n]*safe-mode")


def parse_bug_report_gpu_health(text: str) -> GpuHealthReport:
    """The `nvidia-smi --query` section of an `nvidia-bug-report.log` (decompressed)."""
    found = _BUG_REPORT_QUERY.search(text)
    if found is None:
        reason = (
            "nvidia-bug-report ran with --safe-mode, which skips nvidia-smi"
            if _BUG_REPORT_SAFE_MODE.search(text)
            else "no nvidia-smi --query section in the bug report"
        )
        return GpuHealthReport(SOURCE_BUG_REPORT, problems=(reason,))
    # The section ends at the next block's underscores: split only that much of a large log.
    block_end = text.find("\n" + "_" * 20, found.end())
    section: list[str] = []
    for line in split_lines(text[found.end() : block_end if block_end >= 0 else len(text)]):
        if _BUG_REPORT_NEXT.fullmatch(line.strip()):
            break
        section.append(line)
    return _parse_text(section, SOURCE_BUG_REPORT)


# -- the node monitoring agent's log -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentCondition:
    """A condition eks-node-monitoring-agent sent: Fatal ones set the Node condition False,
    Warning and Info ones become Node events (pkg/manager/manager.go SendCondition)."""

    time: datetime
    condition_type: str  # "AcceleratedHardwareReady", "KernelReady", …
    reason: str  # "DCGMError", "NvidiaXID79Error", …
    message: str
    severity: str  # "Fatal" | "Warning" | "Info" | "" when the line does not say
    text: str  # the log line as read


_SENT = "sending condition to exporter"
# Fallbacks for lines cut short (container log lines split at 16 KiB, truncated files).
_FIELD = {
    name: re.compile(rf'"{name}"\s*:\s*"((?:[^"\\]|\\.)*)"')
    for name in ("Reason", "Message", "Severity", "conditionType")
}


def _unescape(value: str) -> str:
    try:
        decoded = json.loads(f'"{value}"')
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value


def _agent_fields(message: str) -> dict[str, str]:
    start = message.find("{")
    document: Any = None
    if start >= 0:
        try:
            document = json_value(message[start:])
        except ValueError:
            document = None
    if isinstance(document, dict) and isinstance(document.get("condition"), dict):
        condition = document["condition"]
        return {
            "Reason": str(condition.get("Reason") or ""),
            "Message": str(condition.get("Message") or ""),
            "Severity": str(condition.get("Severity") or ""),
            "conditionType": str(document.get("conditionType") or ""),
        }
    fields: dict[str, str] = {}
    for name, pattern in _FIELD.items():
        m = pattern.search(message)
        fields[name] = _unescape(m.group(1)) if m else ""
    return fields


def agent_conditions(entries: Iterable[JournalEntry]) -> list[AgentCondition]:
    """Every condition the agent's log says it sent, in file order."""
    found: list[AgentCondition] = []
    for entry in entries:
        if _SENT not in entry.message:
            continue
        fields = _agent_fields(entry.message)
        if not fields["Reason"]:
            continue
        found.append(
            AgentCondition(
                time=entry.time,
                condition_type=fields["conditionType"],
                reason=fields["Reason"],
                message=fields["Message"],
                severity=fields["Severity"],
                text=entry.message,
            )
        )
    return found
