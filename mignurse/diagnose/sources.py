"""Where a diagnosis input comes from: a snapshot directory or bundle, or the live cluster.

One layout for both (README, `mignurse collect`): `cluster/nodes.json` and friends are plain
`kubectl get … -o json` documents, `nodes/<node>/` holds the node's own files. A directory
of bare kubectl dumps (`nodes.json`, `events.json`, … at the top) works too, and so does a
`.tar.gz` bundle, read in place without extracting anything to disk.
"""

from __future__ import annotations

import json
import os
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TypeVar

from mignurse.cluster.client import DEPLOYMENTS, ClusterClient, ClusterError, Forbidden, NotFound
from mignurse.cluster.dra import plugin_nodes_of
from mignurse.cluster.history import HistoryError, HistoryStore
from mignurse.cluster.load import load_snapshot
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.foreign_bundles import (
    LAYOUT_MIGNURSE,
    BundleReader,
    Layout,
    detect_layout,
    foreign_file_is_read,
    read_node_bundle,
)
from mignurse.diagnose.inputs import (
    DiagnosisInput,
    History,
    KarpenterSettings,
    NodeEvidence,
    controller_container_index,
)
from mignurse.diagnose.mng import NodeGroupRepair, parse_nodegroups
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
from mignurse.model import (
    Event,
    MigState,
    Node,
    NodeClaim,
    NodePool,
    Pod,
    ResourceClaim,
    ResourceSlice,
    format_time,
    parse_time,
    with_gpu_claims,
)
from mignurse.untrusted import (
    BUNDLE_BYTES,
    BUNDLE_FILES,
    FILE_BYTES,
    LimitError,
    human_bytes,
    read_regular_file,
)

T = TypeVar("T")

HISTORY_WINDOW = timedelta(hours=6)
# The kubectl dumps that make a cluster view; nodes first, the others can stand alone.
CLUSTER_VIEWS = ("nodes", "nodeclaims", "events")
JOURNALS = {
    "kubelet": "kubelet.log",
    "containerd": "containerd.log",
    "nodeadm": "nodeadm.log",
    "kernel": "kernel.log",
    "kernel-previous-boot": "kernel-previous-boot.log",
}
KARPENTER_LOCATIONS = (("kube-system", "karpenter"), ("karpenter", "karpenter"))


class SourceError(Exception):
    """The snapshot cannot be read; str() is the one line to show."""

    exit_code = 2


@dataclass
class Gathered:
    """A diagnosis input without its `now`, and what is known about when it was taken."""

    snapshot: Snapshot
    history: History = field(default_factory=History)
    node_evidence: dict[str, NodeEvidence] = field(default_factory=dict)
    karpenter: KarpenterSettings | None = None
    cluster_policy: dict[str, Any] | None = None
    collected_at: datetime | None = None
    context: str = ""
    notices: list[str] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)  # cluster/pods.json: the chosen nodes' pods
    layout: str = LAYOUT_MIGNURSE  # or the foreign node bundle it was read from
    nodegroups: dict[str, NodeGroupRepair] = field(default_factory=dict)  # nodegroups.json

    def newest_time(self) -> datetime | None:
        """The newest timestamp the snapshot holds: `now` for a bundle without a manifest."""
        times: list[datetime | None] = []
        for event in self.snapshot.events:
            if event.last_seen:
                times.append(event.last_seen)
        for node in self.snapshot.nodes.values():
            times.extend(c.last_heartbeat or c.last_transition for c in node.conditions if c)
            if node.created:
                times.append(node.created)
        for claim in self.snapshot.nodeclaims.values():
            times.extend(t for t in (claim.created, claim.deleting) if t)
        for evidence in self.node_evidence.values():
            for journal in evidence.journals.values():
                if journal.entries:
                    times.append(journal.entries[-1].time)
        present = [t for t in times if t is not None]
        return max(present) if present else None

    def judge_time(self) -> datetime | None:
        """The moment to judge an offline snapshot at: when it was collected, unless its
        newest evidence is later. Events and conditions carry the API server's and the
        controllers' clocks; a collector whose clock was behind them must not make that
        evidence "future" (a deadline would look further away than it is)."""
        newest = self.newest_time()
        base = self.collected_at or newest
        if base is None or newest is None or newest <= base:
            return base
        self.notices.append(
            f"the newest evidence ({format_time(newest)}) is {_span(newest - base)} after "
            f"collected_at ({format_time(base)}): the collecting clock was behind the "
            f"cluster's; judging at {format_time(newest)}"
        )
        return newest

    def to_input(self, now: datetime) -> DiagnosisInput:
        return DiagnosisInput(
            snapshot=self.snapshot,
            now=now,
            history=self.history,
            node_evidence=self.node_evidence,
            karpenter=self.karpenter,
            cluster_policy=self.cluster_policy,
            nodegroups=self.nodegroups,
        )


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"


# -- reading files from a directory or a tarball ------------------------------------------

# What a bundle is read for: everything else in it is named (layouts are told by their
# names) but never held in memory.
CLUSTER_DOCUMENTS = (
    "nodes",
    "events",
    "nodeclaims",
    "nodepools",
    "pods",
    "karpenter",
    "clusterpolicy",
    "nodegroups",
    "resourceslices",
    "resourceclaims",
)
NODE_FILES = frozenset(
    {
        *JOURNALS.values(),
        "nma.log",
        "cgroup-fs.txt",
        "os-release",
        "errors.txt",
        "nvml.json",
        "nvidia-smi.xml",
        "nvidia-smi-L.txt",
        "nvidia-smi-q.txt",
        "mig-lgi.txt",
        "nvidia-bug-report.log",
        "cloud-init-status.json",
        "cloud-init-status.txt",
        "cloud-init-run-status.json",
        "cloud-init-run-result.json",
    }
)
_TOP_FILES = frozenset(
    {"manifest.json"}
    | {f"{name}.json" for name in CLUSTER_DOCUMENTS}
    | {f"cluster/{name}.json" for name in CLUSTER_DOCUMENTS}
)
# Tar entry types whose data tarfile reads into memory as a header (pax, GNU long names).
_HEADER_TYPES = frozenset(
    {tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}
    | {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK}
)
MAX_HEADER_BYTES = 64 * 2**10  # a real pax header holds a path, times and a few xattrs
_LATEST_MTIME = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
# gzip, bzip2, xz: a file that starts so and does not open is a damaged bundle.
_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ")


def is_read(name: str) -> bool:
    """Whether a bundle file of this name (under at most one top folder) is one mignurse reads."""
    parts = name.split("/")
    for rest in (parts, parts[1:]):
        if "/".join(rest) in _TOP_FILES:
            return True
        if len(rest) == 3 and rest[0] == "nodes" and rest[2] in NODE_FILES:
            return True
    return foreign_file_is_read(name)


class _Refused(Exception):
    """Raised from inside tarfile's header parsing: the archive is refused."""


class _BoundedTarInfo(tarfile.TarInfo):
    """A member whose extended header (pax, GNU long name) tarfile reads whole into memory
    is refused first when it is larger than any real one; the rest count to the total."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES:
            if self.size > MAX_HEADER_BYTES:
                raise _Refused(f"an extended tar header of {self.size} bytes")
            if isinstance(archive, _Archive):
                archive.header_bytes += max(self.size, 0)
        return super()._proc_member(archive)  # type: ignore[misc]


class _Archive(tarfile.TarFile):
    tarinfo = _BoundedTarInfo
    header_bytes = 0  # extended headers read so far: unpacked bytes no member accounts for


def _mtime(member: tarfile.TarInfo) -> float:
    """A member's mtime as a time this program can hold (a pax header can say anything)."""
    mtime = member.mtime
    if not isinstance(mtime, int | float) or not 0 < mtime < _LATEST_MTIME:
        return 0
    return float(mtime)


def _open_archive(path: Path) -> BinaryIO:
    return path.open("rb")


def _member_name(name: str) -> str | None:
    """A member's path with `./` dropped; "" for the archive's own `.`; None when it names
    a place outside the archive (absolute, or through `..`)."""
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


class _Files:
    """Relative POSIX path → bytes, for a directory or a .tar.gz, whatever its top folder.

    A tarball is read once, front to back (a compressed stream cannot seek), keeping only
    the files mignurse reads; a folder is read file by file. Both are capped (total size,
    file count, size of one file: `mignurse.untrusted`). A file that cannot be read reads as
    absent and is listed in `problems`; an archive that ends early keeps what came before the
    cut. A folder's links that lead outside it are not followed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: list[str] = []
        self.top = ""  # the single top folder a tarball's members sit under
        self.newest_mtime: datetime | None = None  # a tarball's newest member: when it was made
        self.problems: list[str] = []
        self._extra: dict[str, bytes] = {}
        self._held: dict[str, bytes] = {}  # a tarball's files that mignurse reads
        self._folder: Path | None = None
        self._links: dict[str, Path] = {}  # a folder's links that stay inside it
        self._read_bytes = 0
        try:
            if path.is_dir():
                self._list_folder(path)
            elif path.is_file():
                self._read_tarball(path)
            elif path.exists():
                raise SourceError(f"{path} is neither a snapshot directory nor a .tar.gz bundle")
            else:
                raise SourceError(f"{path} does not exist")
        except LimitError as exc:
            raise SourceError(str(exc)) from None
        self._present = set(self.names)

    def _list_folder(self, root: Path) -> None:
        self._folder = root
        inside = root.resolve()
        cap = BUNDLE_FILES.value()
        names: list[str] = []
        folders = 0
        for dirpath, dirs, filenames in os.walk(root):  # links to folders are not entered
            folders += len(dirs)
            if folders > cap:
                raise BUNDLE_FILES.refusal(f"{root} holds {folders:,} folders or more")
            for filename in filenames:
                full = Path(dirpath) / filename
                name = full.relative_to(root).as_posix()
                if len(names) >= cap:
                    raise BUNDLE_FILES.refusal(f"{root} holds {cap + 1:,} files or more")
                if full.is_symlink():
                    target = full.resolve()
                    if not target.is_relative_to(inside):
                        if is_read(name):
                            self.problems.append(
                                f"{name} links outside {root} (to {target}): not read"
                            )
                        continue
                    if target.is_file():
                        self._links[name] = target
                        names.append(name)
                elif full.is_file():
                    names.append(name)
        self.names = sorted(names)

    def _read_tarball(self, path: Path) -> None:
        total_cap, count_cap, file_cap = (
            BUNDLE_BYTES.value(),
            BUNDLE_FILES.value(),
            FILE_BYTES.value(),
        )
        entries = 0
        members_size = 0
        newest = 0.0
        names: list[str] = []
        with _open_archive(path) as raw:
            try:
                # "r|*": one pass as a stream; random access would decompress the archive
                # from its start again for every member.
                tar = _Archive.open(fileobj=raw, mode="r|*")
            except _Refused as exc:
                raise SourceError(f"{path} is refused: {exc}") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raw.seek(0)
                if raw.read(6).startswith(_COMPRESSED):
                    raise SourceError(f"{path} is a damaged bundle: {exc}") from None
                raise SourceError(
                    f"{path} is neither a snapshot directory nor a .tar.gz bundle"
                ) from None
            try:
                for member in tar:  # header by header: a cut keeps what came before it
                    entries += 1
                    if entries > count_cap:
                        raise BUNDLE_FILES.refusal(f"{path} holds {entries:,} entries or more")
                    name = _member_name(member.name)
                    if name is None:
                        raise SourceError(
                            f"{path} is refused: its member {member.name!r} points outside the "
                            "archive (an absolute path or ..), which no bundle does"
                        )
                    if member.size < 0:
                        raise SourceError(f"{path} is a damaged bundle: {name} has a negative size")
                    members_size += member.size
                    unpacked = members_size + tar.header_bytes
                    if unpacked > total_cap:
                        raise BUNDLE_BYTES.refusal(
                            f"{path} unpacks to {human_bytes(unpacked)} or more (at {name})"
                        )
                    if not member.isfile() or not name:
                        continue
                    newest = max(newest, _mtime(member))
                    if is_read(name):
                        if member.size > file_cap:
                            raise FILE_BYTES.refusal(
                                f"{path}: {name} is {human_bytes(member.size)}"
                            )
                        handle = tar.extractfile(member)
                        if handle is None:
                            continue
                        self._held[name] = handle.read()  # a cut here leaves the name out
                    names.append(name)
            except _Refused as exc:
                raise SourceError(f"{path} is refused: {exc}") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                if not names:
                    raise SourceError(f"{path} is a damaged bundle: {exc}") from None
                self.problems.append(
                    f"{path.name} ends early ({exc}): read the {len(names)} files before the cut"
                )
        if newest > 0:
            self.newest_mtime = datetime.fromtimestamp(newest, UTC)
        prefix = self.top = _common_prefix(names)
        self.names = sorted(name[len(prefix) :] for name in names)
        self._held = {name[len(prefix) :]: data for name, data in self._held.items()}

    def close(self) -> None:
        self._held.clear()

    def data(self, name: str) -> bytes | None:
        if name in self._extra:
            return self._extra[name]
        if name not in self._present:
            return None
        if self._folder is None:
            return self._held.get(name)
        try:
            data = read_regular_file(
                self._links.get(name) or self._folder / name, FILE_BYTES, f"{self._folder}: {name}"
            )
        except OSError as exc:
            self.problems.append(f"{name} could not be read: {exc.strerror or exc}")
            return None
        except LimitError as exc:
            raise SourceError(str(exc)) from None
        self._read_bytes += len(data)
        if self._read_bytes > BUNDLE_BYTES.value():
            raise SourceError(
                str(
                    BUNDLE_BYTES.refusal(
                        f"{self._folder}: the files mignurse reads add up to "
                        f"{human_bytes(self._read_bytes)} or more"
                    )
                )
            )
        return data

    def text(self, name: str) -> str | None:
        data = self.data(name)
        return None if data is None else data.decode("utf-8", "replace")

    def add_node_file(self, node: str, filename: str, data: bytes) -> None:
        """A foreign bundle's file under the name a mignurse bundle gives it."""
        self._extra[f"nodes/{node}/{filename}"] = data

    def json(self, *names: str) -> Any:
        """The first of `names` present, parsed; None if none is there."""
        for name in names:
            text = self.text(name)
            if text is None:
                continue
            try:
                return json.loads(text)
            except ValueError as exc:
                raise SourceError(f"{self.path}: {name} is not JSON ({exc})") from None
            except RecursionError:
                raise SourceError(
                    f"{self.path}: {name} nests too deeply to be JSON kubectl wrote"
                ) from None
        return None

    def node_dirs(self) -> list[str]:
        return sorted(
            {
                PurePosixPath(n).parts[1]
                for n in self.names
                if n.startswith("nodes/") and n.count("/") >= 2
            }
        )


def _common_prefix(names: list[str]) -> str:
    """A bundle's single top folder ("mignurse-bundle-…/"), or ""."""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    if len(tops) == 1 and all("/" in n for n in names):
        return tops.pop() + "/"
    return ""


def _items(document: Any, name: str) -> list[dict[str, Any]]:
    """The objects of a `kubectl get -o json` document (a List, or one object)."""
    if document is None:
        return []
    if isinstance(document, dict) and isinstance(document.get("items"), list):
        return [i for i in document["items"] if isinstance(i, dict)]
    if isinstance(document, dict) and document.get("metadata"):
        return [document]
    raise SourceError(f"{name} is not a kubectl list (no items)")


def _objects(
    document: Any, name: str, parse: Callable[[dict[str, Any]], T], unread: list[str]
) -> list[T]:
    """The items of a kubectl document parsed; those of the wrong shape (a hand-edited or
    damaged file) are left out and counted in `unread`."""
    parsed: list[T] = []
    skipped: list[str] = []
    for index, item in enumerate(_items(document, name)):
        try:
            parsed.append(parse(item))
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as exc:
            skipped.append(f"items[{index}] ({type(exc).__name__}: {exc})")
    if skipped:
        unread.append(
            f"{name}: {len(skipped)} item(s) are not shaped as kubectl writes them and were "
            f"left out; the first: {skipped[0]}"
        )
    return parsed


def load_offline(path: Path) -> Gathered:
    """A mignurse bundle, a folder of kubectl dumps, or another tool's node bundle
    (mignurse.diagnose.foreign_bundles), as a folder or a tarball."""
    files = _Files(path)
    try:
        snapshot = any(
            f"{folder}{kind}.json" in files.names
            for folder in ("cluster/", "")
            for kind in CLUSTER_VIEWS
        ) or any(name.startswith("nodes/") for name in files.names)
        layout = None if snapshot else detect_layout(files.names)
        if layout is not None:
            gathered = _load_node_bundle(files, layout)
        elif snapshot or not files.names:
            gathered = _load(files)
        else:
            archives = [n for n in files.names if n.endswith((".tar.gz", ".tgz"))]
            hint = f" (pass the archive itself: {files.path / archives[0]})" if archives else ""
            raise SourceError(
                f"{files.path} has no cluster/nodes.json (or nodes.json) and is no node "
                "bundle mignurse knows (eks-log-collector, AWSSupport-CollectEKSInstanceLogs, "
                "Bottlerocket logdog): a snapshot needs at least `kubectl get nodes -o json`" + hint
            )
        gathered.notices.extend(files.problems)
        return gathered
    finally:
        files.close()


def _load_node_bundle(files: _Files, layout: Layout) -> Gathered:
    """Another tool's bundle of one node: its evidence, and no cluster view at all."""
    bundle = read_node_bundle(
        BundleReader(files.names, files.data),
        layout,
        archive_names=(files.path.name, files.top.rstrip("/")),
        archive_time=files.newest_mtime,
    )
    for filename, data in bundle.node_files.items():
        files.add_node_file(bundle.node, filename, data)
    read = _node_evidence(files, bundle.node)
    evidence = replace(
        read,
        journals={**read.journals, **bundle.journals},
        cgroup=read.cgroup or bundle.cgroup,
        layout=bundle.layout,
        instance_id=bundle.instance_id,
        problems=(*read.problems, *bundle.problems),
    )
    instance = f", instance {bundle.instance_id}" if bundle.instance_id else ""
    article = "an" if bundle.layout[:1] in "aeiou" else "a"
    return Gathered(
        snapshot=Snapshot(nodes={}, taken_at=bundle.collected_at),
        node_evidence={bundle.node: evidence},
        collected_at=bundle.collected_at,
        layout=bundle.layout,
        notices=[
            f"read {article} {bundle.layout} bundle: node {bundle.node}{instance}, no cluster view "
            "(rules that need Nodes, events or NodeClaims stay silent)",
            *bundle.notices,
        ],
    )


def _load(files: _Files) -> Gathered:
    def doc(name: str) -> Any:
        return files.json(f"cluster/{name}.json", f"{name}.json")

    nodes_doc = doc("nodes")
    unread: list[str] = []
    if nodes_doc is None:
        if not any(doc(kind) is not None for kind in CLUSTER_VIEWS):
            raise SourceError(
                f"{files.path} has no cluster/nodes.json (or nodes.json): a snapshot needs "
                "at least `kubectl get nodes -o json`"
            )
        # NodeClaims or events alone still tell a repair loop; say what is missing.
        unread.append(
            "no nodes.json: the nodes' conditions are unknown; judged from "
            + ", ".join(f"{kind}.json" for kind in CLUSTER_VIEWS[1:] if doc(kind) is not None)
        )
    nodes = _objects(nodes_doc, "nodes.json", Node.from_api, unread)
    claims = _objects(doc("nodeclaims"), "nodeclaims.json", NodeClaim.from_api, unread)
    pools = _objects(doc("nodepools"), "nodepools.json", NodePool.from_api, unread)
    events = _objects(doc("events"), "events.json", Event.from_api, unread)
    pods = _objects(doc("pods"), "pods.json", Pod.from_api, unread)
    slices = _objects(doc("resourceslices"), "resourceslices.json", ResourceSlice.from_api, unread)
    resource_claims = _objects(
        doc("resourceclaims"), "resourceclaims.json", ResourceClaim.from_api, unread
    )
    manifest = files.json("manifest.json") or {}
    karpenter_doc = doc("karpenter")
    karpenter = None
    if karpenter_doc:
        settings = _objects(
            karpenter_doc, "karpenter.json", KarpenterSettings.from_deployment, unread
        )
        karpenter = settings[0] if settings else None
    policy_items = _items(doc("clusterpolicy"), "clusterpolicy.json")
    nodegroups_doc = doc("nodegroups")
    nodegroups, nodegroup_problems = (
        parse_nodegroups(nodegroups_doc) if nodegroups_doc is not None else ({}, [])
    )
    snapshot = Snapshot(
        nodes={n.name: n for n in nodes},
        nodeclaims={c.name: c for c in claims},
        nodepools={p.name: p for p in pools},
        events=tuple(events),
        karpenter=bool(claims or pools or karpenter_doc),
        taken_at=parse_time(manifest.get("collected_at") if isinstance(manifest, dict) else None),
        resource_slices=tuple(slices),
        resource_claims=tuple(c for c in resource_claims if c.devices),
        dra_plugin_nodes=plugin_nodes_of(pods),
    )
    gathered = Gathered(
        snapshot=snapshot,
        karpenter=karpenter,
        cluster_policy=policy_items[0] if policy_items else None,
        collected_at=snapshot.taken_at,
        context=str(manifest.get("context") or "") if isinstance(manifest, dict) else "",
        pods=with_gpu_claims(pods, resource_claims),
        nodegroups=nodegroups,
        notices=[*unread, *nodegroup_problems],
    )
    for node_name in files.node_dirs():
        gathered.node_evidence[node_name] = _node_evidence(files, node_name)
    return gathered


def _node_evidence(files: _Files, node: str) -> NodeEvidence:
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
        problems=tuple(line.strip() for line in errors.splitlines() if line.strip()),
    )


# nvidia-smi's memory-error state, best source first: our `-q -x`, a `-q` text (sos), the
# `nvidia-smi --query` section of a decompressed nvidia-bug-report.log (eks-log-collector).
_GPU_HEALTH_SOURCES = (
    ("nvidia-smi.xml", parse_gpu_health_xml),
    ("nvidia-smi-q.txt", parse_gpu_health_text),
    ("nvidia-bug-report.log", parse_bug_report_gpu_health),
)


def _gpu_health(files: _Files, base: str) -> GpuHealthReport | None:
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


def _cloud_init(files: _Files, base: str) -> CloudInitStatus | None:
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


def _mig_state(files: _Files, base: str) -> MigState | None:
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


# -- the live cluster -------------------------------------------------------------------------


def load_live(
    client: ClusterClient,
    *,
    history_path: Path | None,
    nodegroups: Callable[[list[str]], tuple[list[dict[str, Any]], list[str]]] | None = None,
) -> Gathered:
    """Nodes, NodeClaims, NodePools, events, the Karpenter Deployment, the repair settings
    of GPU managed node groups (through `nodegroups`, the EKS API, when given), and the
    local history when there is one (read-only: a running `mignurse watch` keeps writing)."""
    loaded = load_snapshot(client, with_events=True)
    gathered = Gathered(
        snapshot=loaded.snapshot,
        collected_at=loaded.snapshot.taken_at,
        context=client.info.context,
        notices=list(loaded.notices),
    )
    if loaded.snapshot.karpenter:
        gathered.karpenter = karpenter_settings(client, gathered.notices)
    groups = sorted(
        {n.pool for n in loaded.snapshot.gpu_nodes() if n.pool_kind == "nodegroup" and n.pool}
    )
    if groups and nodegroups is not None:
        documents, unread = nodegroups(groups)
        gathered.nodegroups, problems = parse_nodegroups({"nodegroups": documents})
        gathered.notices.extend(unread + problems)
    if history_path is not None and history_path.exists():
        gathered.history = _read_history_file(
            history_path, client.info.context, loaded.snapshot.taken_at, gathered.notices
        )
    return gathered


def find_karpenter_deployment(client: ClusterClient, namespace: str = "") -> dict[str, Any] | None:
    """The Karpenter controller Deployment: by the chart's name label (any release name, any
    namespace), else `karpenter` in kube-system or karpenter. RBAC that refuses the list
    falls back to the two reads; other failures raise ClusterError."""
    try:
        for items, _version in client.list_pages(
            DEPLOYMENTS,
            namespace=namespace or None,
            label_selector="app.kubernetes.io/name=karpenter",
        ):
            for item in items:
                pod = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
                if controller_container_index(pod.get("containers") or []) is not None:
                    return dict(item)
    except (NotFound, Forbidden):
        pass
    for ns, name in KARPENTER_LOCATIONS:
        if namespace and ns != namespace:
            continue
        try:
            return client.get(DEPLOYMENTS, name, ns)
        except NotFound:
            continue
    return None


def karpenter_settings(client: ClusterClient, notices: list[str]) -> KarpenterSettings | None:
    try:
        deployment = find_karpenter_deployment(client)
    except ClusterError as exc:
        notices.append(f"cannot read the Karpenter Deployment: {exc}")
        return None
    if deployment is None:
        notices.append("no Karpenter Deployment found: whether repair is on is unknown")
        return None
    return KarpenterSettings.from_deployment(deployment)


def _read_history_file(
    path: Path, context: str, now: datetime | None, notices: list[str]
) -> History:
    try:
        store = HistoryStore(path, readonly=True)
    except HistoryError as exc:
        notices.append(f"history not used: {exc}")
        return History()
    try:
        return read_history(store, context, now or datetime.now().astimezone())
    finally:
        store.close()


def read_history(store: HistoryStore, context: str, now: datetime) -> History:
    """The last HISTORY_WINDOW of one context: what the rules compare against."""
    since = now - HISTORY_WINDOW
    return History(
        lifecycles=tuple(
            store.lifecycles(context, kind="NodeClaim", since=since)
            + store.lifecycles(context, kind="Node", since=since)
        ),
        transitions=tuple(store.transitions(context, kind="Node", since=since)),
        events=tuple(store.events(context, since=since)),
    )
