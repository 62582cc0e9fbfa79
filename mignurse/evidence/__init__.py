"""Parsers for the node files of a support bundle (`nodes/<node>/…`).

Text in, data out: no parser reads files or raises on garbled, truncated or empty input.
Each result carries what could be read plus problems saying what could not, for rules to
turn into evidence.
"""

from mignurse.evidence.cloudinit import (
    CloudInitStatus,
    parse_cloud_init_files,
    parse_cloud_init_status,
)
from mignurse.evidence.containerlog import parse_container_log
from mignurse.evidence.gpu_health import (
    AgentCondition,
    GpuHealth,
    GpuHealthReport,
    agent_conditions,
    parse_bug_report_gpu_health,
    parse_gpu_health_text,
    parse_gpu_health_xml,
)
from mignurse.evidence.journal import (
    JournalEntry,
    JournalParse,
    UnitAction,
    XidError,
    classify_unit_message,
    parse_journal,
    systemd_unit_actions,
    xid_errors,
)
from mignurse.evidence.nvml_json import parse_nvml_json
from mignurse.evidence.nvsmi import (
    ComputeInstanceRow,
    GpuInstanceRow,
    MigTable,
    SmiGpu,
    SmiList,
    SmiMigDevice,
    merge_smi,
    parse_mig_lci,
    parse_mig_lgi,
    parse_smi_list,
    parse_smi_xml,
)
from mignurse.evidence.system import CgroupInfo, OsRelease, parse_cgroup_fs, parse_os_release

__all__ = [
    "AgentCondition",
    "CgroupInfo",
    "CloudInitStatus",
    "ComputeInstanceRow",
    "GpuHealth",
    "GpuHealthReport",
    "GpuInstanceRow",
    "JournalEntry",
    "JournalParse",
    "MigTable",
    "OsRelease",
    "SmiGpu",
    "SmiList",
    "SmiMigDevice",
    "UnitAction",
    "XidError",
    "agent_conditions",
    "classify_unit_message",
    "merge_smi",
    "parse_bug_report_gpu_health",
    "parse_cgroup_fs",
    "parse_cloud_init_files",
    "parse_cloud_init_status",
    "parse_container_log",
    "parse_gpu_health_text",
    "parse_gpu_health_xml",
    "parse_journal",
    "parse_mig_lci",
    "parse_mig_lgi",
    "parse_nvml_json",
    "parse_os_release",
    "parse_smi_list",
    "parse_smi_xml",
    "systemd_unit_actions",
    "xid_errors",
]
