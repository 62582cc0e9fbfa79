"""Where a diagnosis input comes from: a snapshot directory or bundle, or the live cluster.

One layout for both (design.md): `cluster/nodes.json` and friends are plain
`kubectl get … -o json` documents, `nodes/<node>/` holds the node's own files. A directory
of bare kubectl dumps (`nodes.json`, `events.json`, … at the top) works too, and so does a
`.tar.gz` bundle, read in place without extracting anything to disk.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from mignurse.cluster.client import DEPLOYMENTS, ClusterClient, ClusterError, Forbidden, NotFound
from mignurse.cluster.history import HistoryError, HistoryStore
from mignurse.cluster.load import load_snapshot
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.inputs import (
    DiagnosisInput,
    History,
    KarpenterSettings,
    NodeEvidence,
    controller_container_index,
)
from mignurse.evidence import (
    merge_smi,
    parse_cgroup_fs,
    parse_cloud_init_status,
    parse_journal,
    parse_mig_lgi,
    parse_nvml_json,
    parse_os_release,
    parse_smi_list,
    parse_smi_xml,
)
from mignurse.model import Event, MigState, Node, NodeClaim, NodePool, Pod, parse_time

HISTORY_WINDOW = timedelta(hours=6)
MAX_MEMBER_BYTES = 512 * 2**20  # a single file larger than this in a bundle is refused
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

    def to_input(self, now: datetime) -> DiagnosisInput:
        return DiagnosisInput(
            snapshot=self.snapshot,
            now=now,
            history=self.history,
            node_evidence=self.node_evidence,
            karpenter=self.karpenter,
            cluster_policy=self.cluster_policy,
        )


# -- reading files from a directory or a tarball ------------------------------------------


class _Files:
    """Relative POSIX path → bytes, for a directory or a .tar.gz, whatever its top folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._read: Callable[[str], bytes | None]
        self.names: list[str]
        if path.is_dir():
            root = path
            self.names = sorted(
                p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
            )
            self._read = lambda name: (root / name).read_bytes()
            self._tar: tarfile.TarFile | None = None
        elif path.is_file() and tarfile.is_tarfile(path):
            try:
                self._tar = tarfile.open(path, "r:*")  # noqa: SIM115 - closed by close()
                members = {m.name: m for m in self._tar.getmembers() if m.isfile()}
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise SourceError(f"{path} is a damaged bundle: {exc}") from None
            prefix = _common_prefix(list(members))
            self.names = sorted(name[len(prefix) :] for name in members)
            tar = self._tar

            def read(name: str) -> bytes | None:
                member = members[prefix + name]
                if member.size > MAX_MEMBER_BYTES:
                    raise SourceError(f"{path}: {name} is {member.size} bytes, over the limit")
                handle = tar.extractfile(member)
                return handle.read() if handle else None

            self._read = read
        elif path.exists():
            raise SourceError(f"{path} is neither a snapshot directory nor a .tar.gz bundle")
        else:
            raise SourceError(f"{path} does not exist")
        self._present = set(self.names)

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()

    def text(self, name: str) -> str | None:
        if name not in self._present:
            return None
        data = self._read(name)
        return None if data is None else data.decode("utf-8", "replace")

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


def load_offline(path: Path) -> Gathered:
    files = _Files(path)
    try:
        return _load(files)
    finally:
        files.close()


def _load(files: _Files) -> Gathered:
    def doc(name: str) -> Any:
        return files.json(f"cluster/{name}.json", f"{name}.json")

    nodes_doc = doc("nodes")
    if nodes_doc is None:
        raise SourceError(
            f"{files.path} has no cluster/nodes.json (or nodes.json): a snapshot needs at "
            "least `kubectl get nodes -o json`"
        )
    nodes = [Node.from_api(o) for o in _items(nodes_doc, "nodes.json")]
    claims = [NodeClaim.from_api(o) for o in _items(doc("nodeclaims"), "nodeclaims.json")]
    pools = [NodePool.from_api(o) for o in _items(doc("nodepools"), "nodepools.json")]
    events = [Event.from_api(o) for o in _items(doc("events"), "events.json")]
    pods = [Pod.from_api(o) for o in _items(doc("pods"), "pods.json")]
    manifest = files.json("manifest.json") or {}
    karpenter_doc = doc("karpenter")
    karpenter = None
    if karpenter_doc:
        deployments = _items(karpenter_doc, "karpenter.json")
        karpenter = KarpenterSettings.from_deployment(deployments[0]) if deployments else None
    policy_items = _items(doc("clusterpolicy"), "clusterpolicy.json")
    snapshot = Snapshot(
        nodes={n.name: n for n in nodes},
        nodeclaims={c.name: c for c in claims},
        nodepools={p.name: p for p in pools},
        events=tuple(events),
        karpenter=bool(claims or pools or karpenter_doc),
        taken_at=parse_time(manifest.get("collected_at") if isinstance(manifest, dict) else None),
    )
    gathered = Gathered(
        snapshot=snapshot,
        karpenter=karpenter,
        cluster_policy=policy_items[0] if policy_items else None,
        collected_at=snapshot.taken_at,
        context=str(manifest.get("context") or "") if isinstance(manifest, dict) else "",
        pods=pods,
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
    cloud_init = files.text(base + "cloud-init-status.json")
    cgroup = files.text(base + "cgroup-fs.txt")
    os_release = files.text(base + "os-release")
    errors = files.text(base + "errors.txt") or ""
    return NodeEvidence(
        node=node,
        journals=journals,
        cloud_init=parse_cloud_init_status(cloud_init) if cloud_init is not None else None,
        cgroup=parse_cgroup_fs(cgroup) if cgroup is not None else None,
        os_release=parse_os_release(os_release) if os_release is not None else None,
        mig=_mig_state(files, base),
        problems=tuple(line.strip() for line in errors.splitlines() if line.strip()),
    )


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


def load_live(client: ClusterClient, *, history_path: Path | None) -> Gathered:
    """Nodes, NodeClaims, NodePools, events, the Karpenter Deployment, and the local
    history when there is one (read-only: a running `mignurse watch` keeps writing)."""
    loaded = load_snapshot(client, with_events=True)
    gathered = Gathered(
        snapshot=loaded.snapshot,
        collected_at=loaded.snapshot.taken_at,
        context=client.info.context,
        notices=list(loaded.notices),
    )
    if loaded.snapshot.karpenter:
        gathered.karpenter = karpenter_settings(client, gathered.notices)
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


def iter_sources(gathered: Gathered) -> Iterator[str]:
    """One line per input that was present, for `diagnose` to say what it looked at."""
    snap = gathered.snapshot
    yield f"{len(snap.nodes)} nodes, {len(snap.nodeclaims)} NodeClaims, {len(snap.events)} events"
    if gathered.history.lifecycles:
        yield f"history: {len(gathered.history.lifecycles)} lifecycles"
    if gathered.node_evidence:
        yield f"node evidence for {len(gathered.node_evidence)} node(s)"
