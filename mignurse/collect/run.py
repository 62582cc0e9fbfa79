"""`mignurse collect`: the cluster's view plus every selected node's own files, one bundle.

The nodes are started first (they take longest, and may be gone in minutes) and collected
concurrently (bounded), each through its own transport, while the cluster part is read; each
node's result, good or bad, is recorded in the manifest: one unreachable node never stops
the rest. Ctrl-C closes a valid partial bundle.
"""

from __future__ import annotations

import concurrent.futures
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mignurse import __version__, joins
from mignurse.cluster.client import (
    CLUSTER_POLICIES,
    CONFIGMAPS,
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    ClusterClient,
    ClusterError,
    NotFound,
    Resource,
)
from mignurse.cluster.dra import dra_version, raw_gpu_plugin_pods, resource_claims, resource_slices
from mignurse.cluster.snapshot import Snapshot
from mignurse.collect.bundle import BundleWriteError, BundleWriter, StoppedBeforeWriting
from mignurse.collect.events import NODE_DONE, NODE_STEP, CollectEvent, Progress
from mignurse.collect.nodediagnostic import TRANSPORT, wire_reports
from mignurse.collect.redact import Redactor
from mignurse.diagnose.facts import unhealthy_for_repair
from mignurse.diagnose.sources import DAEMONSETS, find_karpenter_deployment, read_mig_configmaps
from mignurse.model import Node, format_time
from mignurse.nodeaccess.base import CommandResult, NodeShell
from mignurse.nodeaccess.fallback import FallbackShell
from mignurse.nodeaccess.script import collector_script
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell
from mignurse.nodeview import resolve_node_name

DEFAULT_CONCURRENCY = 10
POD_READERS = 4  # per-node pod lists read at once
DEFAULT_SINCE = "6h"
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def journal_since_words(window: str) -> str:
    """90m → "90 minutes ago", the form journalctl takes; ValueError for anything else."""
    number, unit = window[:-1], window[-1:]
    if not number.isdigit() or unit not in _UNITS or int(number) <= 0:
        raise ValueError(f"{window!r} is not a window like 90m, 6h or 2d")
    return f"{int(number)} {_UNITS[unit]} ago"


NODE_TIMEOUT_SECONDS = 600.0
CANCEL_GRACE_SECONDS = 5.0


STOP_POLL_SECONDS = 0.25  # how soon a collection sees that it was told to stop


class CollectError(Exception):
    """What to collect cannot be worked out; str() is the one line to show."""

    exit_code = 2


class Stopped(KeyboardInterrupt):
    """The collection was told to stop (its `stop` event, from another thread): it ends as a
    Ctrl-C ends it, its partial bundle closed and marked interrupted."""


@dataclass
class NodeOutcome:
    node: str
    result: CommandResult | None = None
    files: int = 0
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        result = self.result
        return {
            "transport": result.transport if result else None,
            "ok": bool(result and result.ok and not self.problems),
            "rc": result.rc if result else None,
            "timedOut": result.timed_out if result else False,
            "seconds": round(result.seconds, 2) if result else None,
            "bytes": result.bytes_out if result else 0,
            "files": self.files,
            "error": (result.error if result else "not collected") or None,
            "stderrTail": (result.stderr_tail[-2000:] if result else "") or None,
            "problems": self.problems,
        }


def select_nodes(
    snapshot: Snapshot,
    *,
    names: list[str],
    nodepool: str | None,
    unhealthy: bool,
) -> list[Node]:
    """The nodes to collect: by name (full or without its domain), a pool, or the unhealthy
    GPU nodes (NotReady, or matching a repair policy now)."""
    chosen: dict[str, Node] = {}
    for name in names:
        full = resolve_node_name(name, snapshot.nodes)
        match = snapshot.nodes.get(full) if full else None
        if match is None:
            raise CollectError(f"no node {name!r} in this cluster: `mignurse nodes` lists them")
        chosen[match.name] = match
    if nodepool:
        pool = [n for n in snapshot.nodes.values() if n.pool == nodepool]
        if not pool:
            raise CollectError(f"no nodes in NodePool or node group {nodepool!r}")
        chosen.update((n.name, n) for n in pool)
    if unhealthy:
        chosen.update(
            (n.name, n)
            for n in snapshot.gpu_nodes()
            if n.ready_status != "Ready" or unhealthy_for_repair(n)
        )
    return sorted(chosen.values(), key=lambda n: n.name)


def _kubectl_list(items: list[dict[str, Any]], resource: Resource) -> dict[str, Any]:
    """What `kubectl get -o json` prints: a List whose items carry kind and apiVersion."""
    api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": [{"apiVersion": api_version, "kind": resource.kind, **o} for o in items],
    }


def _raw(client: ClusterClient, resource: Resource, **selectors: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page, _version in client.list_pages(resource, **selectors):
        items.extend(page)
    return items


CLUSTERPOLICY_PART = "clusterpolicy"  # what `diagnose --from` reads (sources/files.py)
MIG_CONFIGMAPS_PART = "migconfigmaps"

NodeGroupReader = Callable[[list[str]], tuple[list[dict[str, Any]], list[str]]]


def write_cluster_part(
    bundle: BundleWriter,
    client: ClusterClient,
    nodes: list[Node],
    karpenter: bool,
    nodegroups: tuple[list[str], NodeGroupReader | None] = ([], None),
) -> list[str]:
    """cluster/*.json; optional parts that RBAC refuses become problems, not failures.
    `nodegroups`: the cluster's GPU managed node groups and how to describe them (their
    repair settings), when AWS is at hand."""
    problems: list[str] = []
    parts: list[tuple[str, Resource, dict[str, Any]]] = [
        ("nodes", NODES, {}),
        ("events", EVENTS, {}),
        ("daemonsets", DAEMONSETS, {}),  # what the known-bad-combination findings read
        (CLUSTERPOLICY_PART, CLUSTER_POLICIES, {}),  # the GPU operator's settings, where it runs
    ]
    if karpenter:
        parts += [("nodeclaims", NODECLAIMS, {}), ("nodepools", NODEPOOLS, {})]
    try:
        version = dra_version(client)  # "" on a cluster without resource.k8s.io
    except ClusterError as exc:
        problems.append(f"cluster/resourceslices.json: {exc}")
        version = ""
    if version:
        parts += [
            ("resourceslices", resource_slices(version), {}),
            ("resourceclaims", resource_claims(version), {}),
        ]
    policies: list[dict[str, Any]] = []
    for name, resource, selectors in parts:
        try:
            items = _raw(client, resource, **selectors)
            bundle.add_json(f"cluster/{name}.json", _kubectl_list(items, resource))
            if name == CLUSTERPOLICY_PART:
                policies = items
        except ClusterError as exc:
            if name == "nodes":
                raise
            if name == CLUSTERPOLICY_PART and isinstance(exc, NotFound):
                continue  # no GPU operator: its CRD is not served, and that is no problem
            problems.append(f"cluster/{name}.json: {exc}")
    if policies:  # the files its mig-manager reads, what the MIG layouts are judged by
        unread: list[str] = []
        configmaps = read_mig_configmaps(client, policies[0], unread)
        if configmaps is not None:
            bundle.add_json(
                f"cluster/{MIG_CONFIGMAPS_PART}.json", _kubectl_list(list(configmaps), CONFIGMAPS)
            )
        problems.extend(f"cluster/{MIG_CONFIGMAPS_PART}.json: {line}" for line in unread)
    pods = _pods_on(client, nodes, problems)
    try:
        pods += _not_yet_in(pods, raw_gpu_plugin_pods(client))
    except ClusterError as exc:
        problems.append(f"cluster/pods.json (GPU plugin pods): {exc}")
    bundle.add_json("cluster/pods.json", _kubectl_list(pods, PODS))
    if karpenter:
        try:
            deployment = find_karpenter_deployment(client)
        except ClusterError as exc:
            problems.append(f"cluster/karpenter.json: {exc}")
        else:
            if deployment is None:
                problems.append("cluster/karpenter.json: no Karpenter Deployment found")
            else:
                bundle.add_json("cluster/karpenter.json", deployment)
    groups, describe = nodegroups
    if groups and describe is not None:
        documents, unread = describe(groups)
        problems.extend(f"cluster/nodegroups.json: {line}" for line in unread)
        if documents:
            bundle.add_json("cluster/nodegroups.json", {"nodegroups": documents})
    return problems


def _not_yet_in(pods: list[Any], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of `more` that `pods` does not hold yet, by namespace and name."""

    def key(raw: Any) -> tuple[str, str]:
        meta = (raw.get("metadata") if isinstance(raw, dict) else None) or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    held = {key(pod) for pod in pods}
    return [pod for pod in more if key(pod) not in held]


def _pods_on(client: ClusterClient, nodes: list[Node], problems: list[str]) -> list[Any]:
    """The pods of each node (one field-selected list per node, a few at once: a cluster-wide
    list could be 100,000 pods). The first refusal is a problem and ends the reading."""
    failed = threading.Event()

    def on(node: Node) -> list[dict[str, Any]]:
        if failed.is_set():
            return []
        try:
            return _raw(client, PODS, field_selector=f"spec.nodeName={node.name}")
        except ClusterError as exc:
            if not failed.is_set():
                failed.set()
                problems.append(f"cluster/pods.json ({node.name}): {exc}")
            return []

    with joins.ctrl_c_kept(), concurrent.futures.ThreadPoolExecutor(POD_READERS) as readers:
        return [pod for pods in readers.map(on, nodes) for pod in pods]


def collect(
    client: ClusterClient | None,
    snapshot: Snapshot,
    nodes: list[Node],
    *,
    shell_for: Callable[[Node], NodeShell],
    out: Path,
    since: str,
    redactor: Redactor,
    concurrency: int = DEFAULT_CONCURRENCY,
    node_timeout: float = NODE_TIMEOUT_SECONDS,
    progress: Progress = lambda event: None,
    nodegroups: NodeGroupReader | None = None,
    collected_at: datetime | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Write the bundle to `out`; returns its manifest (faces call `run_collect`, which
    chooses the nodes, the path and the transport first). Without a client (`collect --local`
    on the node itself) the bundle holds the node's files only. `nodegroups` describes
    managed node groups (their repair settings) when AWS is at hand. `collected_at`: the
    moment the caller named the bundle after (else now, on the cluster's clock). `stop`, set
    from another thread, ends it as Ctrl-C does (`Stopped`)."""
    bundle, manifest = _open_bundle(client, out, redactor, since, collected_at)
    try:
        _collect_into(bundle, manifest, client, snapshot, nodes, shell_for, since, concurrency,
                      node_timeout, progress, nodegroups, stop)  # fmt: skip
    except BundleWriteError as exc:
        raise CollectError(str(exc)) from None
    return manifest


def _collect_into(
    bundle: BundleWriter,
    manifest: dict[str, Any],
    client: ClusterClient | None,
    snapshot: Snapshot,
    nodes: list[Node],
    shell_for: Callable[[Node], NodeShell],
    since: str,
    concurrency: int,
    node_timeout: float,
    progress: Progress,
    nodegroups: NodeGroupReader | None,
    stop: threading.Event | None,
) -> None:
    """The collection itself. Done or stopped by Ctrl-C (or `stop`), the bundle is closed (a
    partial one is valid and says it was interrupted); failed (a full disk, a bug), none is
    left."""
    outcomes = {node.name: NodeOutcome(node.name) for node in nodes}
    started = time.monotonic()
    ended = False  # the bundle may be closed: the collection finished or was interrupted
    try:
        script = collector_script(since=since)
        runner = _NodeRuns(script, node_timeout, concurrency, progress)

        def take(name: str, result: CommandResult) -> None:
            outcome = outcomes[name]
            outcome.result = result
            with runner.spools[name] as spool:
                if result.bytes_out:  # a failed run's partial tar is evidence too
                    bundle.add_node_tar(name, spool, _packed(outcome, progress))
                else:
                    _packed(outcome, progress)(0, [])

        try:
            # the nodes first: they take longest and may be gone in minutes; the cluster's
            # view is read meanwhile, and their results wait in a queue
            runner.start({node.name: shell_for(node) for node in nodes})
            if client is not None:
                groups = {n.pool for n in snapshot.gpu_nodes() if n.pool_kind == "nodegroup"}
                manifest["problems"] = write_cluster_part(
                    bundle, client, nodes, snapshot.karpenter, (sorted(groups), nodegroups)
                )
            for _ in nodes:
                take(*runner.next_result(stop))
        except KeyboardInterrupt:
            # nodes not started yet never start, and the bundle closes now instead of after
            # every queued node has run (a `with` block would wait for them)
            runner.stop()
            for name, result in runner.unread():  # ended meanwhile, or stopped mid-run
                take(name, result)
            raise
        except BaseException:
            runner.stop()  # a failure: no bundle is kept, nothing more is read
            raise
        runner.stop(wait=True)
        ended = True
    except KeyboardInterrupt:
        manifest["interrupted"] = True
        ended = True
        raise
    finally:
        if not ended:
            bundle.abort()
        else:
            try:
                bundle.drain()  # the nodes still being packed: their outcomes are final after
            except KeyboardInterrupt:
                manifest["interrupted"] = True
                raise
            finally:
                manifest["seconds"] = round(time.monotonic() - started, 2)
                manifest["nodes"] = {name: outcome.to_json() for name, outcome in outcomes.items()}
                bundle.close(manifest)


def _open_bundle(
    client: ClusterClient | None,
    out: Path,
    redactor: Redactor,
    since: str,
    collected_at: datetime | None,
) -> tuple[BundleWriter, dict[str, Any]]:
    """The bundle's writer, named after the cluster's context and the moment of collection,
    and the manifest's opening fields."""
    if collected_at is None:
        collected_at = client.server_now() if client else datetime.now(UTC)
    context = client.info.context if client else "local"
    top = f"mignurse-bundle-{context}-{collected_at:%Y%m%dT%H%M%SZ}".replace("/", "_")
    try:
        bundle = BundleWriter(out, top=top, redactor=redactor)
    except KeyboardInterrupt:  # (a FIFO waiting for its reader, mostly)
        raise StoppedBeforeWriting from None
    except BundleWriteError as exc:
        raise CollectError(str(exc)) from None
    except OSError as exc:
        raise CollectError(f"cannot write {out}: {exc.strerror or exc}") from None
    manifest: dict[str, Any] = {
        "tool": f"mignurse {__version__}",
        "context": context,
        "cluster": client.info.cluster if client else "",
        "collected_at": format_time(collected_at),
        "window": {"since": since},
        "interrupted": False,
        "problems": [],
    }
    return bundle, manifest


def _packed(outcome: NodeOutcome, progress: Progress) -> Callable[[int, list[str]], None]:
    """What to do once a node's files are in the bundle (or it brought none)."""

    def done(files: int, problems: list[str]) -> None:
        outcome.files, outcome.problems = files, problems
        result = outcome.result
        ok = result is not None and result.ok and not problems
        text = "ok" if ok else (result.error if result else "") or "failed"
        sent = result.bytes_out if result else 0
        progress(CollectEvent(NODE_DONE, outcome.node, text, ok=ok, bytes=sent, files=files))

    return done


class _NodeRuns:
    """Runs the collector on every node and hands back (node, result) as each ends; the
    node's output is in `spools[node]`.

    Nodes reached over SSM go to their fleet in one thread (one command per 50 nodes, SSM's
    MaxConcurrency as the bound); the rest, and SSM's fallbacks to SSH, run in a bounded
    thread pool. Each node's stdout lands in its own spool: small archives stay in memory,
    large ones go to disk, never both whole."""

    def __init__(
        self,
        script: str,
        timeout: float,
        concurrency: int,
        progress: Progress,
    ) -> None:
        self.script = script
        self.timeout = timeout
        self.concurrency = max(1, concurrency)
        self.progress = progress
        self.results: queue.Queue[tuple[str, CommandResult]] = queue.Queue()
        self.spools: dict[str, Any] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.concurrency)
        self.cancel = threading.Event()
        self.futures: list[concurrent.futures.Future[None]] = []
        self.threads: list[threading.Thread] = []

    def start(self, shells: dict[str, NodeShell]) -> None:
        fleets: dict[int, tuple[SSMFleet, list[tuple[str, str]]]] = {}
        fallbacks: dict[str, FallbackShell] = {}
        for name, shell in shells.items():
            self.spools[name] = tempfile.SpooledTemporaryFile(max_size=8 * 2**20)  # noqa: SIM115
            wire_reports(shell, self._reporter(name))
            ssm = shell.primary if isinstance(shell, FallbackShell) else shell
            if isinstance(ssm, SSMShell):
                fleets.setdefault(id(ssm.fleet), (ssm.fleet, []))[1].append((name, ssm.instance_id))
                if isinstance(shell, FallbackShell):
                    fallbacks[name] = shell
            else:
                self.futures.append(self.pool.submit(self._one, name, shell))
        for fleet, targets in fleets.values():
            thread = threading.Thread(
                target=self._fleet, args=(fleet, targets, fallbacks), daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def _reporter(self, name: str) -> Callable[[str], None]:
        def report(state: str) -> None:
            self.progress(CollectEvent(NODE_STEP, name, f"collecting over {TRANSPORT}: {state}"))

        return report

    def next_result(self, stop: threading.Event | None = None) -> tuple[str, CommandResult]:
        """The next node to end; `Stopped` once `stop` is set."""
        while True:
            if stop is not None and stop.is_set():
                raise Stopped
            try:
                return self.results.get(timeout=None if stop is None else STOP_POLL_SECONDS)
            except queue.Empty:
                pass

    def unread(self) -> list[tuple[str, CommandResult]]:
        """Results that arrived but were not taken (after `stop`)."""
        found = []
        while True:
            try:
                found.append(self.results.get_nowait())
            except queue.Empty:
                return found

    def stop(self, *, wait: bool = False) -> None:
        """Stop; on Ctrl-C (`wait=False`) nodes not started yet never start, running ones are
        stopped (local and SSH runs killed, SSM commands cancelled), and each gets a moment
        to end, so nothing keeps writing once we are gone."""
        self.cancel.set()
        with joins.ctrl_c_kept():
            self.pool.shutdown(wait=wait, cancel_futures=not wait)
        if not wait:
            concurrent.futures.wait(self.futures, timeout=CANCEL_GRACE_SECONDS)
        for thread in self.threads:
            joins.join(thread, None if wait else CANCEL_GRACE_SECONDS)

    def _one(self, name: str, shell: NodeShell) -> None:
        self.progress(CollectEvent(NODE_STEP, name, f"collecting over {shell.transport}"))
        try:
            result = shell.run(
                self.script, timeout=self.timeout, stdout=self.spools[name], cancel=self.cancel
            )
        except Exception as exc:  # noqa: BLE001 - the reader waits for every node
            result = CommandResult(name, shell.transport, None, 0.0, error=f"internal error: {exc}")
        self.results.put((name, result))

    def _fleet(
        self,
        fleet: SSMFleet,
        targets: list[tuple[str, str]],
        fallbacks: dict[str, FallbackShell],
    ) -> None:
        def done(result: CommandResult) -> None:
            shell = fallbacks.get(result.node)
            if shell is not None and result.rc is None and shell.when in result.error:
                self.futures.append(self.pool.submit(self._fallback, shell, result))
            else:
                self.results.put((result.node, result))

        for name, _ in targets:
            self.progress(CollectEvent(NODE_STEP, name, f"collecting over {fleet.transport}"))
        try:
            fleet.run(
                targets,
                self.script,
                timeout=self.timeout,
                sink_for=self.spools.__getitem__,
                done=done,
                cancel=self.cancel,
                max_concurrency=self.concurrency,
            )
        except Exception as exc:  # noqa: BLE001 - the reader waits for every node
            for name, _ in targets:
                self.results.put(
                    (
                        name,
                        CommandResult(name, fleet.transport, None, 0.0, error=f"internal: {exc}"),
                    )
                )

    def _fallback(self, shell: FallbackShell, first: CommandResult) -> None:
        step = f"collecting over {shell.fallback.transport}"
        self.progress(CollectEvent(NODE_STEP, shell.node, step))
        try:
            result = shell.then(
                first,
                self.script,
                timeout=self.timeout,
                stdout=self.spools[shell.node],
                cancel=self.cancel,
            )
        except Exception as exc:  # noqa: BLE001 - the reader waits for every node
            result = CommandResult(shell.node, shell.fallback.transport, None, 0.0, error=str(exc))
        self.results.put((shell.node, result))
