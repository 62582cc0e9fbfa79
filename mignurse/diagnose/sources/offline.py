"""An offline snapshot read into a `Gathered`: a mignurse bundle, a folder of kubectl dumps,
or another tool's bundle of one node, each as a folder or a tarball.

One layout for mignurse's bundles (docs/commands.md, `mignurse collect`): `cluster/nodes.json` and
friends are plain `kubectl get … -o json` documents, `nodes/<node>/` holds the node's own
files. A directory of bare kubectl dumps (`nodes.json`, `events.json`, … at the top) works
too; a `.tar.gz` is read in place without extracting anything to disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from mignurse.cluster.dra import gpu_plugin_pods, plugin_nodes_of
from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.foreign_bundles import BundleReader, Layout, detect_layout, read_node_bundle
from mignurse.diagnose.inputs import KarpenterSettings
from mignurse.diagnose.mng import parse_nodegroups
from mignurse.diagnose.sources.files import BundleFiles
from mignurse.diagnose.sources.gathered import Gathered, SourceError
from mignurse.diagnose.sources.node_files import node_evidence
from mignurse.model import (
    Event,
    GpuPluginPod,
    Node,
    NodeClaim,
    NodePool,
    Pod,
    ResourceClaim,
    ResourceSlice,
    parse_time,
    with_gpu_claims,
)

T = TypeVar("T")

# The kubectl dumps that make a cluster view; nodes first, the others can stand alone.
CLUSTER_VIEWS = ("nodes", "nodeclaims", "events")


def _items(document: Any, name: str) -> list[dict[str, Any]]:
    """The objects of a `kubectl get -o json` document (a List, or one object)."""
    if document is None:
        return []
    if isinstance(document, dict) and isinstance(document.get("items"), list):
        return [i for i in document["items"] if isinstance(i, dict)]
    if isinstance(document, dict) and document.get("metadata"):
        return [document]
    raise SourceError(f"{name} is not a kubectl list (no items)")


def _plugin_pods(document: Any) -> tuple[GpuPluginPod, ...]:
    """The GPU plugin pods of pods.json; a damaged file is already counted by _objects."""
    try:
        return gpu_plugin_pods(_items(document, "pods.json"))
    except SourceError:
        return ()


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
    files = BundleFiles(path)
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


def _load_node_bundle(files: BundleFiles, layout: Layout) -> Gathered:
    """Another tool's bundle of one node: its evidence, and no cluster view at all."""
    bundle = read_node_bundle(
        BundleReader(files.names, files.data),
        layout,
        archive_names=(files.path.name, files.top.rstrip("/")),
        archive_time=files.newest_mtime,
    )
    for filename, data in bundle.node_files.items():
        files.add_node_file(bundle.node, filename, data)
    read = node_evidence(files, bundle.node)
    evidence = replace(
        read,
        journals={**read.journals, **bundle.journals},
        cgroup=read.cgroup or bundle.cgroup,
        layout=bundle.layout,
        instance_id=bundle.instance_id,
        problems=(*read.problems, *bundle.problems, *files.cut_notes()),
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


def _load(files: BundleFiles) -> Gathered:
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
    daemonsets_doc = doc("daemonsets")
    daemonsets = (
        tuple(_objects(daemonsets_doc, "daemonsets.json", DaemonSetInfo.from_api, unread))
        if daemonsets_doc is not None
        else None
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
    configmaps_doc = doc("migconfigmaps")
    mig_configmaps: tuple[dict[str, Any], ...] | None = ()  # no operator: nothing to read
    if configmaps_doc is not None:
        mig_configmaps = tuple(_items(configmaps_doc, "migconfigmaps.json"))
    elif policy_items:
        mig_configmaps = None  # a bundle from before they were collected: not read
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
        mig_configmaps=mig_configmaps,
        collected_at=snapshot.taken_at,
        context=str(manifest.get("context") or "") if isinstance(manifest, dict) else "",
        pods=with_gpu_claims(pods, resource_claims),
        nodegroups=nodegroups,
        daemonsets=daemonsets,
        notices=[*unread, *nodegroup_problems],
        gpu_plugin_pods=_plugin_pods(doc("pods")),
    )
    for node_name in files.node_dirs():
        gathered.node_evidence[node_name] = node_evidence(files, node_name)
    return gathered
