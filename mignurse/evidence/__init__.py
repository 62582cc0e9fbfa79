"""Parsers for the node files of a support bundle (`nodes/<node>/…`).

Text in, data out: no parser reads files or raises on garbled, truncated or empty input.
Each result carries what could be read plus problems saying what could not, for rules to
turn into evidence.

Each name loads its module on first use (PEP 562 `__getattr__`), so a live diagnosis, which
reads journals and GPU health, loads none of the nvidia-smi, cloud-init or container-log
parsers (nor the XML library).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.lazynames import name_loader

if TYPE_CHECKING:
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

_HOMES = {
    "AgentCondition": "gpu_health",
    "CgroupInfo": "system",
    "CloudInitStatus": "cloudinit",
    "ComputeInstanceRow": "nvsmi",
    "GpuHealth": "gpu_health",
    "GpuHealthReport": "gpu_health",
    "GpuInstanceRow": "nvsmi",
    "JournalEntry": "journal",
    "JournalParse": "journal",
    "MigTable": "nvsmi",
    "OsRelease": "system",
    "SmiGpu": "nvsmi",
    "SmiList": "nvsmi",
    "SmiMigDevice": "nvsmi",
    "UnitAction": "journal",
    "XidError": "journal",
    "agent_conditions": "gpu_health",
    "classify_unit_message": "journal",
    "merge_smi": "nvsmi",
    "parse_bug_report_gpu_health": "gpu_health",
    "parse_cgroup_fs": "system",
    "parse_cloud_init_files": "cloudinit",
    "parse_cloud_init_status": "cloudinit",
    "parse_container_log": "containerlog",
    "parse_gpu_health_text": "gpu_health",
    "parse_gpu_health_xml": "gpu_health",
    "parse_journal": "journal",
    "parse_mig_lci": "nvsmi",
    "parse_mig_lgi": "nvsmi",
    "parse_nvml_json": "nvml_json",
    "parse_os_release": "system",
    "parse_smi_list": "nvsmi",
    "parse_smi_xml": "nvsmi",
    "systemd_unit_actions": "journal",
    "xid_errors": "journal",
}

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


__getattr__ = name_loader(__name__, _HOMES, globals())
