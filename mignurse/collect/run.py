"""`mignurse collect`: the cluster's view plus every selected node's own files, one bundle.

The cluster part is read first (it is quick and the nodes may be gone in minutes); then
the nodes are collected concurrently (bounded), each through its own transport, and each
node's result, good or bad, is recorded in the manifest: one unreachable node never stops
the rest. Ctrl-C closes a valid partial bundle.
"""

from __future__ import annotations

import concurrent.futures
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mignurse import __version__
from mignurse.cluster.client import (
    DEPLOYMENTS,
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    ClusterClient,
    ClusterError,
    Resource,
)
from mignurse.cluster.snapshot import Snapshot
from mignurse.collect.bundle import BundleWriter
from mignurse.collect.redact import Redactor
from mignurse.diagnose.facts import unhealthy_for_repair
from mignurse.model import Node, format_time
from mignurse.nodeaccess.base import NodeShell, RunResult
from mignurse.nodeaccess.script import collector_script

DEFAULT_CONCURRENCY = 10
DEFAULT_SINCE = "6h"
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def journal_since_words(window: str) -> str:
    """90m → "90 minutes ago", the form journalctl takes; ValueError for anything else."""
    number, unit = window[:-1], window[-1:]
    if not number.isdigit() or unit not in _UNITS or int(number) <= 0:
        raise ValueError(f"{window!r} is not a window like 90m, 6h or 2d")
    return f"{int(number)} {_UNITS[unit]} ago"


NODE_TIMEOUT_SECONDS = 600.0


class CollectError(Exception):
    """What to collect cannot be worked out; str() is the one line to show."""

    exit_code = 2


@dataclass
class NodeOutcome:
    node: str
    result: RunResult | None = None
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
        match = snapshot.nodes.get(name) or next(
            (n for n in snapshot.nodes.values() if n.name.split(".", 1)[0] == name), None
        )
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


def write_cluster_part(
    bundle: BundleWriter, client: ClusterClient, nodes: list[Node], karpenter: bool
) -> list[str]:
    """cluster/*.json; optional parts that RBAC refuses become problems, not failures."""
    problems: list[str] = []
    parts: list[tuple[str, Resource, dict[str, Any]]] = [
        ("nodes", NODES, {}),
        ("events", EVENTS, {}),
    ]
    if karpenter:
        parts += [("nodeclaims", NODECLAIMS, {}), ("nodepools", NODEPOOLS, {})]
    for name, resource, selectors in parts:
        try:
            bundle.add_json(
                f"cluster/{name}.json", _kubectl_list(_raw(client, resource, **selectors), resource)
            )
        except ClusterError as exc:
            if name == "nodes":
                raise
            problems.append(f"cluster/{name}.json: {exc}")
    pods: list[dict[str, Any]] = []
    for node in nodes:
        try:
            pods += _raw(client, PODS, field_selector=f"spec.nodeName={node.name}")
        except ClusterError as exc:
            problems.append(f"cluster/pods.json ({node.name}): {exc}")
            break
    bundle.add_json("cluster/pods.json", _kubectl_list(pods, PODS))
    if karpenter:
        for namespace in ("kube-system", "karpenter"):
            try:
                deployment = client.get(DEPLOYMENTS, "karpenter", namespace)
            except ClusterError:
                continue
            bundle.add_json("cluster/karpenter.json", deployment)
            break
        else:
            problems.append("cluster/karpenter.json: no karpenter Deployment readable")
    return problems


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
    progress: Callable[[str, str], None] = lambda node, state: None,
) -> dict[str, Any]:
    """Write the bundle to `out`; returns its manifest. Without a client (`collect --local`
    on the node itself) the bundle holds the node's files only."""
    collected_at: datetime = client.server_now() if client else datetime.now(UTC)
    context = client.info.context if client else "local"
    top = f"mignurse-bundle-{context}-{collected_at:%Y%m%dT%H%M%SZ}".replace("/", "_")
    bundle = BundleWriter(out, top=top, redactor=redactor)
    outcomes = {node.name: NodeOutcome(node.name) for node in nodes}
    manifest: dict[str, Any] = {
        "tool": f"mignurse {__version__}",
        "context": context,
        "cluster": client.info.cluster if client else "",
        "collected_at": format_time(collected_at),
        "window": {"since": since},
        "interrupted": False,
        "problems": [],
    }
    started = time.monotonic()
    try:
        if client is not None:
            manifest["problems"] = write_cluster_part(bundle, client, nodes, snapshot.karpenter)
        script = collector_script(since=since)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency))
        try:
            futures = {
                pool.submit(_run_one, shell_for(node), script, node_timeout, progress): node
                for node in nodes
            }
            for future in concurrent.futures.as_completed(futures):
                node = futures[future]
                result, spool = future.result()
                outcome = outcomes[node.name]
                outcome.result = result
                with spool:
                    spool.seek(0)
                    if result.bytes_out:
                        outcome.files, outcome.problems = bundle.add_node_tar(node.name, spool)
                state = "ok" if result.ok and not outcome.problems else (result.error or "failed")
                progress(node.name, state)
        except BaseException:
            # Ctrl-C (or a bug): nodes not started yet never start, and the bundle closes now
            # instead of after every queued node has run (a `with` block would wait for them).
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    except KeyboardInterrupt:
        manifest["interrupted"] = True
        raise
    finally:
        manifest["seconds"] = round(time.monotonic() - started, 2)
        manifest["nodes"] = {name: outcome.to_json() for name, outcome in outcomes.items()}
        bundle.close(manifest)
    return manifest


def _run_one(
    shell: NodeShell, script: str, timeout: float, progress: Callable[[str, str], None]
) -> tuple[RunResult, Any]:
    progress(shell.node, f"collecting over {shell.transport}")
    # Spooled: small node archives stay in memory, large ones go to disk, never both whole.
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 2**20)  # noqa: SIM115 - caller closes
    result = shell.run(script, timeout=timeout, stdout=spool)  # type: ignore[arg-type]
    return result, spool
