"""A live cluster read into a `Gathered`: the snapshot, the Karpenter Deployment's settings,
the managed node groups' repair settings, NVIDIA's ClusterPolicy, and the local history of
lifecycles and condition flips (read-only: a running `mignurse watch` keeps writing it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.cluster.client import (
    CLUSTER_POLICIES,
    CONFIGMAPS,
    DEPLOYMENTS,
    ClusterClient,
    ClusterError,
    Forbidden,
    NotFound,
    Resource,
)
from mignurse.cluster.dra import load_gpu_plugin_pods
from mignurse.cluster.load import begun, load_snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.inputs import (
    UNJUDGED_KIND,
    History,
    KarpenterSettings,
    controller_container_index,
)
from mignurse.diagnose.mng import parse_nodegroups
from mignurse.diagnose.sources.gathered import Gathered
from mignurse.gpu import clusterconfig

if TYPE_CHECKING:
    from mignurse.cluster.history import HistoryStore

HISTORY_WINDOW = timedelta(hours=6)
KARPENTER_LOCATIONS = (("kube-system", "karpenter"), ("karpenter", "karpenter"))
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)


def load_live(
    client: ClusterClient,
    *,
    history_path: Path | None,
    nodegroups: Callable[[list[str]], tuple[list[dict[str, Any]], list[str]]] | None = None,
    event_kinds: tuple[str, ...] = (),
) -> Gathered:
    """Nodes, NodeClaims, NodePools, events, the Karpenter Deployment, the repair settings
    of GPU managed node groups (through `nodegroups`, the EKS API, when given), and the
    local history when there is one (read-only: a running `mignurse watch` keeps writing).
    `event_kinds` limits the events to those about objects of these kinds; without it, the
    events about Pods are left on the server (no rule reads them, and they are two thirds of
    a cluster's events: `inputs.UNJUDGED_KIND`)."""
    # The DaemonSets and the GPU plugin pods wait on the API server beside the snapshot's own
    # reads, the Karpenter Deployment beside the node groups' (once the snapshot says Karpenter
    # is there); notices keep the order the reads had one after another.
    daemonset_notices: list[str] = []
    daemonsets_read = begun(lambda: read_daemonsets(client, daemonset_notices))
    policy_notices: list[str] = []
    policy_read = begun(lambda: read_operator(client, policy_notices))
    plugin_pods_read = begun(lambda: load_gpu_plugin_pods(client))
    loaded = load_snapshot(
        client, with_events=True, event_kinds=event_kinds, events_not_about=UNJUDGED_KIND
    )
    gathered = Gathered(
        snapshot=loaded.snapshot,
        collected_at=loaded.snapshot.taken_at,
        context=client.info.context,
        notices=list(loaded.notices),
    )
    karpenter_notices: list[str] = []
    settings_read = (
        begun(lambda: karpenter_settings(client, karpenter_notices))
        if loaded.snapshot.karpenter
        else None
    )
    groups = sorted(
        {n.pool for n in loaded.snapshot.gpu_nodes() if n.pool_kind == "nodegroup" and n.pool}
    )
    nodegroup_notices: list[str] = []
    if groups and nodegroups is not None:
        documents, unread = nodegroups(groups)
        gathered.nodegroups, problems = parse_nodegroups({"nodegroups": documents})
        nodegroup_notices = unread + problems
    if settings_read is not None:
        gathered.karpenter = settings_read()
        gathered.notices.extend(karpenter_notices)
    gathered.daemonsets = daemonsets_read()
    gathered.notices.extend(daemonset_notices)
    gathered.cluster_policy, gathered.mig_configmaps = policy_read()
    gathered.notices.extend(policy_notices)
    try:
        gathered.gpu_plugin_pods = plugin_pods_read()
    except ClusterError as exc:
        gathered.notices.append(f"cannot list the GPU plugin pods: {exc}; gpu-stack-down is off")
    gathered.notices.extend(nodegroup_notices)
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


def read_daemonsets(client: ClusterClient, notices: list[str]) -> tuple[DaemonSetInfo, ...] | None:
    """Every DaemonSet in the cluster (the pre-flight findings read the GPU ones); None, with
    one notice, when they cannot be listed."""
    try:
        return tuple(client.list(DAEMONSETS, DaemonSetInfo.from_api).items)
    except ClusterError as exc:
        notices.append(
            f"cannot list DaemonSets ({exc}): the node monitoring agent, mig-manager and DRA "
            "driver combinations are not checked"
        )
        return None


def read_cluster_policy(client: ClusterClient, notices: list[str]) -> dict[str, Any] | None:
    """The GPU operator's ClusterPolicy (how its driver, mig-manager and validator are
    deployed, and the chart's version label); None where the CRD is not served (no GPU
    operator: the common EKS case, said nowhere) or the list is refused (said in one notice).
    The operator reconciles one ClusterPolicy per cluster; the first is taken."""
    try:
        items = client.list(CLUSTER_POLICIES, dict).items
    except NotFound:
        return None
    except ClusterError as exc:
        notices.append(
            f"cannot list ClusterPolicies ({exc}): the GPU operator's settings are not read, "
            "a host driver is assumed and its version is read from the validator's image"
        )
        return None
    return dict(items[0]) if items else None


def read_operator(
    client: ClusterClient, notices: list[str]
) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], ...] | None]:
    """The ClusterPolicy and the ConfigMaps its mig-manager may read (`read_mig_configmaps`)."""
    policy = read_cluster_policy(client, notices)
    return policy, read_mig_configmaps(client, policy, notices)


def read_mig_configmaps(
    client: ClusterClient, policy: dict[str, Any] | None, notices: list[str]
) -> tuple[dict[str, Any], ...] | None:
    """The ConfigMaps mig-manager may read its mig-parted file from (`gpu.clusterconfig`):
    the one the ClusterPolicy names, else the operator's default and those mig-manager
    publishes per node (found by their labels). () where no operator runs or the ClusterPolicy
    names no readable place (each node's finding says why); None, with one notice, where
    they cannot be read."""
    try:
        where = clusterconfig.wanted(policy, "")
    except clusterconfig.ConfigUnreadable:
        return ()
    if where is None:
        return ()
    namespace, names = where
    found: list[dict[str, Any]] = []
    try:
        if len(names) > 1:  # no name: the per-node files, then the default
            found += client.list(
                CONFIGMAPS,
                dict,
                namespace=namespace,
                label_selector=clusterconfig.GENERATED_SELECTOR,
            ).items
        with contextlib.suppress(NotFound):  # the named one, or the default
            found.append(client.get(CONFIGMAPS, names[-1], namespace))
    except ClusterError as exc:
        notices.append(
            f"cannot read the GPU operator's mig-parted ConfigMaps in {namespace} ({exc}): "
            "mig-layout-mismatch does not judge layouts where it cannot tell what they mean"
        )
        return None
    return tuple(found)


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
    # The SQLite store loads here, where a history file exists: most reads have none.
    from mignurse.cluster.history import HistoryError, HistoryStore

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
    """The last HISTORY_WINDOW of one context: what the rules compare against. Events
    about Pods stay on disk: no rule reads them, and they are most of what is recorded."""
    since = now - HISTORY_WINDOW
    return History(
        lifecycles=tuple(
            store.lifecycles(context, kind="NodeClaim", since=since)
            + store.lifecycles(context, kind="Node", since=since)
        ),
        transitions=tuple(store.transitions(context, kind="Node", since=since)),
        events=tuple(
            e for e in store.events(context, since=since) if e.involved_kind != UNJUDGED_KIND
        ),
    )
