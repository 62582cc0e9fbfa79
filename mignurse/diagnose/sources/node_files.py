"""A node's own files in a bundle (`nodes/<node>/…`) read into its `NodeEvidence`.

Journals, cgroup and OS release, cloud-init status, MIG state and GPU memory-error health:
each read from the best file present, through the parsers of `mignurse.evidence`.
"""

from __future__ import annotations

from mignurse.diagnose.inputs import NodeEvidence
from mignurse.diagnose.sources.files import JOURNALS, BundleFiles
from mignurse.evidence import (
    CloudInitStatus,
    GpuHealthReport,
    merge_smi,
    parse_bug_report_gpu_health,
    parse_cgroup_fs,
    parse_cloud_init_files,
    parse_cloud_init_status,
    parse_container_log,
    parse_gpu_health_text,
    parse_gpu_health_xml,
    parse_journal,
    parse_mig_lgi,
    parse_nvml_json,
    parse_os_release,
    parse_smi_list,
    parse_smi_xml,
)
from mignurse.model import MigState


def node_evidence(files: BundleFiles, node: str) -> NodeEvidence:
    base = f"nodes/{node}/"
    journals = {}
    for unit, filename in JOURNALS.items():
        text = files.text(base + filename)
        if text is not None:
            journals[unit] = parse_journal(text, f"journal:{unit}")
    nma = files.text(base + "nma.log")
    if nma is not None:
        journals["nma"] = parse_container_log(nma, "journal:nma", "eks-node-monitoring-agent")
    cgroup = files.text(base + "cgroup-fs.txt")
    os_release = files.text(base + "os-release")
    errors = files.text(base + "errors.txt") or ""
    return NodeEvidence(
        node=node,
        journals=journals,
        cloud_init=_cloud_init(files, base),
        cgroup=parse_cgroup_fs(cgroup) if cgroup is not None else None,
        os_release=parse_os_release(os_release) if os_release is not None else None,
        mig=_mig_state(files, base),
        gpu_health=_gpu_health(files, base),
        problems=(
            *(line.strip() for line in errors.splitlines() if line.strip()),
            *files.cut_notes(base),
        ),
    )


# nvidia-smi's memory-error state, best source first: our `-q -x`, a `-q` text (sos), the
# `nvidia-smi --query` section of a decompressed nvidia-bug-report.log (eks-log-collector).
_GPU_HEALTH_SOURCES = (
    ("nvidia-smi.xml", parse_gpu_health_xml),
    ("nvidia-smi-q.txt", parse_gpu_health_text),
    ("nvidia-bug-report.log", parse_bug_report_gpu_health),
)


def _gpu_health(files: BundleFiles, base: str) -> GpuHealthReport | None:
    """The first source that lists a GPU; else the first present, for its problems."""
    unread: list[GpuHealthReport] = []
    for filename, parse in _GPU_HEALTH_SOURCES:
        text = files.text(base + filename)
        if text is None:
            continue
        report = parse(text)
        if report.gpus:
            return report
        unread.append(report)
    return unread[0] if unread else None


def _cloud_init(files: BundleFiles, base: str) -> CloudInitStatus | None:
    """`status --format json`; else (cloud-init before 22.4) the `status --long` text, and
    cloud-init's own status.json / result.json where the text does not read."""
    as_json = files.text(base + "cloud-init-status.json")
    if as_json is not None and as_json.strip():
        return parse_cloud_init_status(as_json)
    text = files.text(base + "cloud-init-status.txt")
    run_status = files.text(base + "cloud-init-run-status.json")
    run_result = files.text(base + "cloud-init-run-result.json")
    from_text = parse_cloud_init_status(text) if text is not None else None
    if from_text is not None and from_text.readable:
        return from_text
    if run_status is not None or run_result is not None:
        return parse_cloud_init_files(run_status, run_result)
    if from_text is not None:
        return from_text
    return parse_cloud_init_status(as_json) if as_json is not None else None


def _mig_state(files: BundleFiles, base: str) -> MigState | None:
    """NVML's own reading first; else nvidia-smi's XML with profile names from -L / -lgi."""
    nvml = files.text(base + "nvml.json")
    if nvml is not None:
        return parse_nvml_json(nvml)
    xml = files.text(base + "nvidia-smi.xml")
    if xml is None:
        return None
    listing = files.text(base + "nvidia-smi-L.txt")
    lgi = files.text(base + "mig-lgi.txt")
    return merge_smi(
        parse_smi_xml(xml),
        parse_smi_list(listing) if listing is not None else None,
        parse_mig_lgi(lgi) if lgi is not None else None,
    )
