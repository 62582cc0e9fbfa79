"""Other tools' node bundles, read as one node's evidence for `diagnose --from` and `open`.

- eks-log-collector (awslabs/amazon-eks-ami@v20260724
  log-collector-script/linux/eks-log-collector.sh, v0.7.9; v0.7.6 at v20231230 has the same
  names without nodeadm/, gpu/ and the agent's pod logs): `tar --directory=... .` of
  kubelet/kubelet.log (`journalctl --unit=kubelet`, default `short` output: no year),
  containerd/containerd-log.txt, nodeadm/*.log, kernel/dmesg.*, var_log/ (messages, cloud-init,
  pod logs), system/instance-id.txt, storage/mounts.txt (`mount` then `df -h`) and
  gpu/nvidia-bug-report.log.gz, named `eks_<instance-id>_<YYYY-mm-dd_HHMM>-UTC_<version>.tar.gz`.
- AWSSupport-CollectEKSInstanceLogs runs that same collector and leaves its archive in
  /var/log, or uploads it to `LogDestination` as `eks_<instance-id>_<execution-id>.tar.gz`
  (docs.aws.amazon.com/systems-manager-automation-runbooks/latest/userguide/
  automation-awssupport-collecteksinstancelogs.html; the key as
  aws-samples/sample-eks-node-diagnostics-mcp@7b288d5 src/ssm-automation-gateway-construct-v2.ts
  reads it): the same layout under another name.
- Bottlerocket logdog (bottlerocket-os/bottlerocket-core-kit@v3.1.1
  packages/release/logdog.common.conf, sources/logdog/src): bottlerocket-logs/ holding the
  whole journal (`journalctl -o short-precise -a`, no year), os-release, proc-mounts, dmesg.

Detection is by the files inside, never by the archive's name. Such a bundle has no cluster
view: it yields one node's evidence, with `layout` and `instance_id` set, and notices saying
where the node's name and the bundle's time came from.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from mignurse.diagnose.sources.gathered import LAYOUT_MIGNURSE as LAYOUT_MIGNURSE
from mignurse.evidence import CgroupInfo, JournalEntry, JournalParse, parse_journal
from mignurse.evidence.system import parse_cgroup_mounts
from mignurse.model import format_time
from mignurse.untrusted import FILE_BYTES, human_bytes

LAYOUT_EKS_LOG_COLLECTOR = "eks-log-collector"
LAYOUT_LOGDOG = "logdog"

# Files only eks-log-collector writes, any one of which marks its layout (truncated archives
# hold any subset: tar walks the folder in directory order).
_COLLECTOR_FILES = (
    "system/script-params.txt",
    "kubelet/kubelet.log",
    "containerd/containerd-log.txt",
    "kernel/dmesg.human.current",
    "kernel/dmesg.current",
    "storage/mounts.txt",
    "system/instance-id.txt",
    "sysctls/sysctl_all.txt",
    "ipamd/metrics.json",
    "networking/iproute.txt",
)
_LOGDOG_FILES = ("journalctl.log", "logdog.errors", "journalctl-boots", "journalctl.errors")
_LOGDOG_FOLDER = "bottlerocket-logs"

# eks_<instance-id>_<YYYY-mm-dd_HHMM>-UTC_<version>: CURRENT_TIME is taken as the script starts.
_COLLECTOR_NAME = re.compile(
    r"eks_(?P<iid>i-[0-9a-f]{8,17})_(?:(?P<day>\d{4}-\d\d-\d\d)_(?P<hm>\d{4})-UTC"
    r"|(?P<execution>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}))"
)
_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")
# `journalctl --list-boots` rows end with the last entry, "Sun 2026-11-29 05:31:44 UTC".
_BOOT_RANGE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (\S+)\s*$", re.MULTILINE)
# The header journalctl printed before systemd 250: "-- Logs begin at <t>, end at <t>. --"
# (219) or "-- Journal begins at <t>, ends at <t>. --" (246-249); its end has a year.
_JOURNAL_RANGE = re.compile(
    r"^-- (?:Logs begin|Journal begins) at .*?, ends? at \w+ "
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (\S+?)\. --$",
    re.MULTILINE,
)
# kubelet's registration lines, structured (klog.InfoS) and the older printf form.
_REGISTERED = re.compile(
    r'"Successfully registered node" node="([^"]+)"|Successfully registered node (\S+)$'
)
_REGISTERING = re.compile(
    r'"Attempting to register node" node="([^"]+)"|Attempting to register node (\S+)$'
)
# The agent's pod log: /var/log/pods/<ns>_<pod>_<uid>/<container>/<restart>.log and the
# /var/log/containers/<pod>_<ns>_<container>-<id>.log copy eks-log-collector also takes.
_NMA_POD_LOG = re.compile(
    r"(?:^|/)kube-system_eks-node-monitoring-agent-[^/]+/eks-node-monitoring-agent/(\d+)\.log$"
)
_NMA_CONTAINER_LOG = re.compile(
    r"(?:^|/)eks-node-monitoring-agent-[^/_]+_kube-system_eks-node-monitoring-agent-[0-9a-f]+\.log$"
)
# systemd's own lines about a unit, in `name - description`, name-only or description-only form.
_UNIT_LINES = {
    "kubelet": re.compile(r"\bkubelet\.service\b|^\w+(?: to start)? (?:Kubernetes )?Kubelet\b"),
    "containerd": re.compile(
        r"\bcontainerd\.service\b|^\w+(?: to start)? containerd container runtime\b"
    ),
    "nodeadm": re.compile(r"\bnodeadm-[\w-]+\.service\b|^\w+(?: to start)? EKS Nodeadm\b"),
}
_IDENTS = {
    "kubelet": frozenset({"kubelet"}),
    "containerd": frozenset({"containerd"}),
    "nodeadm": frozenset({"nodeadm", "nodeadm-internal"}),
    "kernel": frozenset({"kernel"}),
}
_OS_RELEASE_SECTION = re.compile(
    r"^\*\*\* /etc/os-release\n(?:\*\*\* ls: [^\n]*\n)?(.*?)(?:^_{20,}$|\Z)",
    re.MULTILINE | re.DOTALL,
)
_EPOCH_FLOOR = datetime(2000, 1, 1, tzinfo=UTC)  # tar writers that zero mtimes say nothing
# The files read below, by their place in each layout: what a tarball's single pass keeps.
_READS = frozenset(
    {
        "kubelet/kubelet.log",
        "containerd/containerd-log.txt",
        "var_log/messages",
        "var_log/cloud-init.log",
        "var_log/cloud-init-output.log",
        "nodeadm/nodeadm-boot-hook.log",
        "nodeadm/nodeadm-config.log",
        "nodeadm/nodeadm-run.log",
        "kernel/dmesg.human.current",
        "kernel/dmesg.current",
        "storage/mounts.txt",
        "system/instance-id.txt",
        "gpu/nvidia-bug-report.log.gz",
        "gpu/nvidia-bug-report.log",
        # logdog
        "journalctl-boots",
        "journalctl.log",
        "proc-mounts",
        "os-release",
        "logdog.errors",
    }
)


def foreign_file_is_read(name: str) -> bool:
    """Whether the file of this archive path is one the readers below read (its layout under
    at most two folders: the archive's top one and the layout's own)."""
    if _NMA_POD_LOG.search(name) or _NMA_CONTAINER_LOG.search(name):
        return True
    parts = name.split("/")
    return any("/".join(parts[skip:]) in _READS for skip in range(min(3, len(parts))))


class BundleReader:
    """What this module needs from a bundle: its file names and their bytes."""

    def __init__(self, names: Sequence[str], data: Callable[[str], bytes | None]) -> None:
        self.names = list(names)
        self._data = data

    def data(self, name: str) -> bytes | None:
        return self._data(name)

    def text(self, name: str) -> str | None:
        raw = self.data(name)
        return None if raw is None else raw.decode("utf-8", "replace")


@dataclass(frozen=True)
class Layout:
    name: str  # LAYOUT_EKS_LOG_COLLECTOR | LAYOUT_LOGDOG
    prefix: str  # the one folder its files sit under ("bottlerocket-logs/"), or ""


@dataclass
class NodeBundle:
    """One node's files from another tool's bundle, parsed where mignurse parses them itself
    and otherwise handed over under the names mignurse's own bundles use (`node_files`)."""

    layout: str
    node: str
    instance_id: str = ""
    collected_at: datetime | None = None
    journals: dict[str, JournalParse] = field(default_factory=dict)
    cgroup: CgroupInfo | None = None
    node_files: dict[str, bytes] = field(default_factory=dict)  # "cloud-init.log" → bytes
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def detect_layout(names: Sequence[str]) -> Layout | None:
    """The foreign layout these file names show, at the top or under one folder; None when
    they show neither (a mignurse bundle, kubectl dumps, or something else)."""
    present = set(names)
    tops = sorted({n.split("/", 1)[0] + "/" for n in names if "/" in n})
    best: tuple[int, Layout] | None = None
    for prefix in ("", *tops):
        for layout, signature in (
            (LAYOUT_LOGDOG, _LOGDOG_FILES),
            (LAYOUT_EKS_LOG_COLLECTOR, _COLLECTOR_FILES),
        ):
            score = sum(1 for name in signature if prefix + name in present)
            if layout == LAYOUT_LOGDOG and prefix == _LOGDOG_FOLDER + "/":
                score += 1
            if score and (best is None or score > best[0]):
                best = (score, Layout(layout, prefix))
    return best[1] if best else None


def read_node_bundle(
    reader: BundleReader,
    layout: Layout,
    *,
    archive_names: Sequence[str],
    archive_time: datetime | None,
) -> NodeBundle:
    """The node's evidence from a detected foreign bundle; never raises on its contents.
    `archive_names`: the file or folder name, and a tarball's top folder, for the collector's
    time stamp and instance id; `archive_time`: a tarball's newest member."""
    names = [*archive_names, layout.prefix.rstrip("/")]
    if layout.name == LAYOUT_LOGDOG:
        return _read_logdog(reader, layout.prefix, names, archive_time)
    return _read_collector(reader, layout.prefix, names, archive_time)


# -- eks-log-collector ------------------------------------------------------------------------


def _read_collector(
    reader: BundleReader, prefix: str, names: Sequence[str], archive_time: datetime | None
) -> NodeBundle:
    def text(name: str) -> str | None:
        return reader.text(prefix + name)

    bundle = NodeBundle(LAYOUT_EKS_LOG_COLLECTOR, node="")
    named = next((m for n in names if (m := _COLLECTOR_NAME.search(n))), None)
    stamp = _name_stamp(named)
    # dmesg --ctime carries a year: the reference for year-less journal lines when the
    # archive says nothing about its own time.
    human_dmesg = text("kernel/dmesg.human.current")
    dmesg = parse_journal(human_dmesg, "journal:kernel") if human_dmesg is not None else None
    dmesg_time = dmesg.entries[-1].time if dmesg is not None and dmesg.entries else None
    header = _JOURNAL_RANGE.search((text("kubelet/kubelet.log") or "")[:4096])
    reference, time_source = _first(
        (archive_time, "the newest file in the archive"),
        (stamp, "the time in the bundle's name"),
        (dmesg_time, "the last kernel line of dmesg --ctime"),
        (_moment(*header.groups()) if header else None, "the range journalctl's header gives"),
    )

    _collector_journals(text, reference, dmesg, bundle)
    _add_agent_log(reader, bundle)
    _collector_files(reader, prefix, bundle)

    instance_file = (text("system/instance-id.txt") or "").strip()
    if _INSTANCE_ID.fullmatch(instance_file):
        bundle.instance_id = instance_file
    elif named is not None:
        bundle.instance_id = named.group("iid")
    if named is not None and named.group("execution"):
        bundle.notices.append(
            "named as AWSSupport-CollectEKSInstanceLogs uploads it (automation execution "
            f"{named.group('execution')}): the eks-log-collector layout"
        )
    _name_node(bundle, names)
    bundle.collected_at = _collected_at(bundle, archive_time, stamp, time_source)
    return bundle


def _collector_journals(
    text: Callable[[str], str | None],
    reference: datetime | None,
    dmesg: JournalParse | None,
    bundle: NodeBundle,
) -> None:
    """kubelet, containerd, nodeadm and kernel journals from the collector's files, with
    /var/log/messages standing in for a unit whose own file is missing or empty."""

    def journal(name: str, unit: str) -> JournalParse | None:
        raw = text(name)
        return parse_journal(raw, f"journal:{unit}", reference) if raw is not None else None

    kubelet = journal("kubelet/kubelet.log", "kubelet")
    containerd = journal("containerd/containerd-log.txt", "containerd")
    messages_text = text("var_log/messages")
    messages = (
        parse_journal(messages_text, "journal:messages", reference)
        if messages_text is not None
        else None
    )
    from_messages = _split_by_unit(messages) if messages is not None else {}
    for unit, parsed in (("kubelet", kubelet), ("containerd", containerd)):
        if parsed is not None and parsed.entries:
            bundle.journals[unit] = parsed
        elif unit in from_messages:
            bundle.journals[unit] = from_messages[unit]
            bundle.notices.append(f"{unit} lines taken from var_log/messages")
        elif parsed is not None:
            bundle.journals[unit] = parsed
    nodeadm = [
        parsed
        for name in ("nodeadm-boot-hook.log", "nodeadm-config.log", "nodeadm-run.log")
        if (parsed := journal(f"nodeadm/{name}", "nodeadm")) is not None
    ]
    if nodeadm:
        bundle.journals["nodeadm"] = _merge(nodeadm, "journal:nodeadm")
    # /var/log/messages spans boots with the real clock; dmesg is this boot only.
    kernel = from_messages.get("kernel")
    if kernel is None and dmesg is not None and dmesg.entries:
        kernel = dmesg
    if kernel is None and (raw := text("kernel/dmesg.current")) is not None:
        kernel = parse_journal(raw, "journal:kernel", reference)
    if kernel is not None:
        bundle.journals["kernel"] = kernel


def _collector_files(reader: BundleReader, prefix: str, bundle: NodeBundle) -> None:
    """The node files read as a mignurse bundle's: the cgroup mounts, cloud-init's logs,
    the decompressed nvidia-bug-report.log and the OS release it quotes."""
    mounts = reader.text(prefix + "storage/mounts.txt")
    if mounts is not None:
        bundle.cgroup = parse_cgroup_mounts(mounts)
    for name in ("cloud-init.log", "cloud-init-output.log"):
        raw_bytes = reader.data(prefix + "var_log/" + name)
        if raw_bytes is not None:
            bundle.node_files[name] = raw_bytes
    report = _bug_report(reader, prefix, bundle.problems)
    # a cut is said whether or not a finding shows the node's problems
    bundle.notices.extend(p for p in bundle.problems if " was cut at " in p)
    if report is not None:
        bundle.node_files["nvidia-bug-report.log"] = report
        os_release = _os_release_from_report(report.decode("utf-8", "replace"))
        if os_release:
            bundle.node_files["os-release"] = os_release.encode()


def _name_stamp(named: re.Match[str] | None) -> datetime | None:
    if named is None or not named.group("day"):
        return None
    try:
        day = datetime.strptime(named.group("day") + named.group("hm"), "%Y-%m-%d%H%M")
    except ValueError:
        return None
    return day.replace(tzinfo=UTC)


def _bug_report(reader: BundleReader, prefix: str, problems: list[str]) -> bytes | None:
    """gpu/nvidia-bug-report.log.gz, decompressed member by member (the script appends one
    gzip stream per section, and the collector's `timeout 75` can cut the last one short)."""
    packed = reader.data(prefix + "gpu/nvidia-bug-report.log.gz")
    if packed is None:
        return reader.data(prefix + "gpu/nvidia-bug-report.log")  # hosts without gzip
    out = bytearray()
    rest = packed
    cap = FILE_BYTES.value()
    while rest:
        stream = zlib.decompressobj(wbits=31)
        try:
            out += stream.decompress(rest, cap + 1 - len(out))
        except zlib.error as exc:
            problems.append(
                f"gpu/nvidia-bug-report.log.gz: unreadable after {len(out)} bytes ({exc})"
            )
            break
        if len(out) > cap:  # a gzip bomb, or a report far past any real one
            problems.append(
                f"gpu/nvidia-bug-report.log.gz was cut at {human_bytes(cap)}: it unpacks past "
                f"that, and only its first {human_bytes(cap)} were read ({FILE_BYTES.env} "
                "raises the limit)"
            )
            del out[cap:]
            break
        if not stream.eof:
            problems.append(
                f"gpu/nvidia-bug-report.log.gz ends early (cut off after {len(out)} bytes)"
            )
            break
        rest = stream.unused_data
    return bytes(out)


def _os_release_from_report(report: str) -> str:
    """The /etc/os-release section nvidia-bug-report.sh copies into its log, or ""."""
    found = _OS_RELEASE_SECTION.search(report)
    return found.group(1).strip() + "\n" if found and found.group(1).strip() else ""


# -- logdog -------------------------------------------------------------------------------------


def _read_logdog(
    reader: BundleReader, prefix: str, names: Sequence[str], archive_time: datetime | None
) -> NodeBundle:
    def text(name: str) -> str | None:
        return reader.text(prefix + name)

    bundle = NodeBundle(LAYOUT_LOGDOG, node="")
    boots = text("journalctl-boots") or ""
    last_boot_entry = _last_boot_entry(boots)
    reference, time_source = _first(
        (archive_time, "the newest file in the archive"),
        (last_boot_entry, "the last journal entry `journalctl --list-boots` names"),
    )
    whole_text = text("journalctl.log")
    if whole_text is not None:
        whole = parse_journal(whole_text, "journal:journalctl.log", reference)
        bundle.problems.extend(f"journalctl.log: {p}" for p in whole.problems)
        bundle.journals.update(_split_by_unit(whole))
    else:
        bundle.problems.append("no journalctl.log in the logdog bundle")
    _add_agent_log(reader, bundle)
    mounts = text("proc-mounts")
    if mounts is not None:
        bundle.cgroup = parse_cgroup_mounts(mounts)
    os_release = reader.data(prefix + "os-release")
    if os_release is not None:
        bundle.node_files["os-release"] = os_release
    errors = text("logdog.errors") or ""
    bundle.problems.extend(
        f"logdog: {line.strip()}" for line in errors.splitlines() if line.strip()
    )
    _name_node(bundle, names)
    bundle.collected_at = _collected_at(bundle, archive_time, None, time_source)
    return bundle


def _last_boot_entry(boots: str) -> datetime | None:
    """The newest "LAST ENTRY" of `journalctl --list-boots`: the journal's end, with a year."""
    moments = [m for stamp, zone in _BOOT_RANGE.findall(boots) if (m := _moment(stamp, zone))]
    return max(moments, default=None)


def _moment(stamp: str, zone: str) -> datetime | None:
    """`2026-11-29 05:31:44` in journalctl's zone; a zone name other than UTC is read as UTC
    (these times only place year-less lines in their year)."""
    try:
        if re.fullmatch(r"[+-]\d{4}", zone):
            return datetime.strptime(f"{stamp} {zone}", "%Y-%m-%d %H:%M:%S %z").astimezone(UTC)
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


# -- shared --------------------------------------------------------------------------------------


def _split_by_unit(whole: JournalParse) -> dict[str, JournalParse]:
    """A whole journal (or a syslog file) cut into the unit journals mignurse collects, by
    syslog identifier, with systemd's own lines about each unit, as `journalctl -u` shows them."""
    picked: dict[str, list[JournalEntry]] = {unit: [] for unit in _IDENTS}
    for entry in whole.entries:
        for unit, idents in _IDENTS.items():
            if entry.ident in idents or (
                entry.ident == "systemd"
                and unit in _UNIT_LINES
                and _UNIT_LINES[unit].search(entry.message)
            ):
                picked[unit].append(entry)
                break
    return {
        unit: replace(
            whole,
            source=f"journal:{unit}",
            entries=tuple(replace(e, source=f"journal:{unit}") for e in entries),
            problems=(),
            lines=len(entries),
        )
        for unit, entries in picked.items()
        if entries
    }


def _merge(parts: Iterable[JournalParse], source: str) -> JournalParse:
    """Several unit journals as one, in time order (each keeps its own line numbers)."""
    parts = list(parts)
    entries = sorted(
        (replace(e, source=source) for part in parts for e in part.entries), key=lambda e: e.time
    )
    problems = tuple(p for part in parts for p in part.problems)
    return replace(
        parts[0],
        source=source,
        entries=tuple(entries),
        problems=problems,
        lines=sum(part.lines for part in parts),
        no_entries=all(part.no_entries for part in parts),
    )


def _add_agent_log(reader: BundleReader, bundle: NodeBundle) -> None:
    """The eks-node-monitoring-agent pod's log, when the bundle holds one, as the `nma.log` a
    mignurse bundle has: the pod-log folder (every restart, oldest first), else the
    /var/log/containers copy; each file after a `==> path <==` line, as `tail` heads them."""
    pod_logs = sorted(
        (m.group(0).rsplit("/", 2)[0], int(m.group(1)), name)
        for name in reader.names
        if (m := _NMA_POD_LOG.search(name))
    )
    chosen = [name for _pod, _restart, name in pod_logs] or sorted(
        name for name in reader.names if _NMA_CONTAINER_LOG.search(name)
    )
    parts = []
    for name in chosen:
        raw = reader.data(name)
        if raw is not None:
            parts.append(
                f"==> {name} <==\n".encode() + raw + (b"" if raw.endswith(b"\n") else b"\n")
            )
    if parts:
        bundle.node_files["nma.log"] = b"".join(parts)


def _name_node(bundle: NodeBundle, names: Sequence[str]) -> None:
    """The node's name: kubelet's registration line, else the host name most journal lines
    carry, else the instance id, else the bundle's own name; the notice says which."""
    kubelet = bundle.journals.get("kubelet")
    kubelet_entries = kubelet.entries if kubelet is not None else ()
    for pattern, what in (
        (_REGISTERED, 'kubelet\'s "Successfully registered node" line'),
        (_REGISTERING, 'kubelet\'s "Attempting to register node" line'),
    ):
        for entry in reversed(kubelet_entries):
            found = pattern.search(entry.message)
            if found:
                bundle.node = found.group(1) or found.group(2)
                bundle.notices.append(f"node name {bundle.node} from {what}")
                return
    for entries, what in (
        (kubelet_entries, "the host name on kubelet's journal lines"),
        (
            tuple(e for j in bundle.journals.values() for e in j.entries),
            "the host name on journal lines",
        ),
    ):
        hosts = Counter(e.host for e in entries if e.host and e.host != "localhost")
        if hosts:
            bundle.node = hosts.most_common(1)[0][0]
            bundle.notices.append(f"node name {bundle.node} from {what}")
            return
    if bundle.instance_id:
        bundle.node = bundle.instance_id
        bundle.notices.append(f"node name {bundle.node}: the instance id (no kubelet or host name)")
        return
    bundle.node = next((n.split(".", 1)[0] for n in names if n.strip(".")), bundle.layout)
    bundle.notices.append(f"no node name in the bundle: calling it {bundle.node}")


def _first(*candidates: tuple[datetime | None, str]) -> tuple[datetime | None, str]:
    for moment, what in candidates:
        if moment is not None and moment >= _EPOCH_FLOOR:
            return moment, what
    return None, ""


def _collected_at(
    bundle: NodeBundle, archive_time: datetime | None, stamp: datetime | None, time_source: str
) -> datetime | None:
    """When the bundle was taken: the archive's own time (its newest file), else the time in
    its name (the collector's start, so never before its own newest line), else None (the
    newest evidence then stands in, as for any bundle without a manifest)."""
    if archive_time is not None and archive_time >= _EPOCH_FLOOR:
        bundle.notices.append(f"collected at {format_time(archive_time)} ({time_source})")
        return archive_time
    newest = max(
        (j.entries[-1].time for j in bundle.journals.values() if j.entries and not j.since_boot),
        default=None,
    )
    if stamp is not None:
        moment = max(stamp, newest) if newest is not None else stamp
        bundle.notices.append(
            f"collected at {format_time(moment)} (the bundle's name says the collector "
            f"started at {format_time(stamp)})"
        )
        return moment
    if time_source:
        bundle.notices.append(f"year-less journal times placed by {time_source}")
    else:
        bundle.notices.append(
            "the bundle says nothing of its own time: year-less journal times are placed "
            "within the year before now"
        )
    return None
