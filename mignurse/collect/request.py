"""One collection as one request: what every face that collects hands the core.

`mignurse collect` builds a `CollectRequest` from its flags, the app from the nodes marked
(`c`), auto-collect from the node whose repair clock started, the runbook step from its
node; `run_collect` does the rest in one place: reads the cluster when the nodes are still
to be chosen, chooses them, names the bundle, picks the transport, collects, and tells the
face each step through `progress` (`run.CollectEvent`). The face only prints.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import Snapshot
from mignurse.collect.access import Access
from mignurse.collect.events import NOTICE, STARTED, CollectEvent, Progress
from mignurse.collect.redact import Redactor
from mignurse.collect.run import (
    DEFAULT_CONCURRENCY,
    DEFAULT_SINCE,
    NODE_TIMEOUT_SECONDS,
    CollectError,
    NodeGroupReader,
    collect,
    journal_since_words,
    select_nodes,
)
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell


@dataclass
class CollectRequest:
    """What to collect, where to, and how.

    The nodes: `nodes` already chosen (with the `snapshot` they were chosen from), else
    chosen by `run_collect` from the cluster as read now: by name (`names`), a pool
    (`nodepool`), the unhealthy GPU nodes (`unhealthy`). No `client`: this machine only
    (`collect --local`), through `shell_for`.

    The bundle: `out` a file, or a folder for it (None: the current folder), named
    `file_name` there, else `mignurse-bundle-CONTEXT[-LABEL]-TIME.tar.gz` (`label`: what a
    face collected, e.g. the node's short name) at `collected_at` (else now, on the
    cluster's clock).

    The nodes are reached through `shell_for` when the face has its own (a runbook's node
    access, auto-collect's long-lived sandboxes), else over `access` as `mignurse collect`
    reaches them (`simulated`: the cluster is the simulator's). `nodegroups` describes
    managed node groups (their repair settings) when AWS is at hand. `stop`, set from another
    thread, ends the collection as Ctrl-C does (`run.Stopped` is raised, the partial bundle
    kept)."""

    client: ClusterClient | None
    out: Path | None = None
    names: list[str] = field(default_factory=list)
    nodepool: str | None = None
    unhealthy: bool = False
    nodes: list[Node] | None = None
    snapshot: Snapshot | None = None
    access: Access = field(default_factory=Access)
    simulated: bool = False
    shell_for: Callable[[Node], NodeShell] | None = None
    nodegroups: NodeGroupReader | None = None
    since: str = DEFAULT_SINCE
    concurrency: int = DEFAULT_CONCURRENCY
    node_timeout: float = NODE_TIMEOUT_SECONDS
    redact: bool = True
    obfuscate_network: bool = False
    label: str = ""
    file_name: str = ""
    collected_at: datetime | None = None
    stop: threading.Event | None = None


@dataclass
class CollectResult:
    """Where the bundle went and its manifest; no nodes (and no manifest) when none matched."""

    out: Path | None
    nodes: list[Node]
    manifest: dict[str, Any] | None


def run_collect(request: CollectRequest, progress: Progress = lambda event: None) -> CollectResult:
    """The whole collection `request` asks for: the cluster read and the nodes chosen when
    they are not given yet (a `NOTICE` for each note of that read), the bundle's path and
    the transport (`STARTED`), then every node (`NODE_STEP`, `NODE_DONE`). CollectError (and
    the client's and access's errors) for what cannot be collected at all; Ctrl-C
    (KeyboardInterrupt) leaves a valid partial bundle at the `out` that STARTED named."""
    try:
        since = journal_since_words(request.since)
    except ValueError as exc:
        raise CollectError(f"since {exc}") from None
    client = request.client
    snapshot, nodes = request.snapshot, request.nodes
    if nodes is None:
        if client is None:
            raise CollectError("name the nodes to collect")
        from mignurse.cluster.load import load_snapshot

        loaded = load_snapshot(client)
        for notice in loaded.notices:
            progress(CollectEvent(NOTICE, text=notice))
        snapshot = loaded.snapshot
        nodes = select_nodes(
            snapshot, names=request.names, nodepool=request.nodepool, unhealthy=request.unhealthy
        )
        if not nodes:
            return CollectResult(None, [], None)
    transport = ""
    if request.shell_for is None:
        transport = request.access.resolve(simulated=request.simulated)
    collected_at = request.collected_at
    if collected_at is None:
        collected_at = client.server_now() if client else datetime.now(UTC)
    out = bundle_path(request.out, request.file_name or _bundle_name(request, collected_at))
    # ignore_cleanup_errors: a sandbox killed at Ctrl-C may still be writing for a moment
    with tempfile.TemporaryDirectory(
        prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
    ) as sandboxes:
        shell_for = request.shell_for
        if shell_for is None:
            from mignurse.collect.transports import shell_factory

            assert client is not None  # this machine is collected through its own shell
            shell_for = shell_factory(
                client,
                request.access,
                sandboxes=Path(sandboxes),
                simulated=request.simulated,
                collecting=True,
            )
        started = CollectEvent(STARTED, text=since, nodes=len(nodes), out=out, transport=transport)
        progress(started)
        manifest = collect(
            client,
            snapshot or Snapshot(nodes={}),
            nodes,
            shell_for=shell_for,
            out=out,
            since=since,
            redactor=Redactor(enabled=request.redact, obfuscate_network=request.obfuscate_network),
            concurrency=request.concurrency,
            node_timeout=request.node_timeout,
            progress=progress,
            nodegroups=None if transport == "sim" else request.nodegroups,
            collected_at=collected_at,  # the moment in the bundle's name
            stop=request.stop,
        )
    return CollectResult(out, nodes, manifest)


def _bundle_name(request: CollectRequest, collected_at: datetime) -> str:
    """mignurse-bundle-CONTEXT[-LABEL]-TIME.tar.gz; a `/` of the context (an EKS context is
    the cluster's ARN, `…:cluster/NAME`) or the label is `_`, so the name stays one file."""
    context = request.client.info.context if request.client else "local"
    label = f"-{request.label}" if request.label else ""
    name = f"mignurse-bundle-{context}{label}-{collected_at:%Y%m%dT%H%M%SZ}.tar.gz"
    return name.replace("/", "_")


def bundle_path(output: Path | None, name: str) -> Path:
    """`output` as a file, or `name` in the current folder, or in `output` when that is a
    folder; CollectError when the folder it goes into does not exist."""
    out = Path(output or name)
    if out.is_dir():
        out = out / name
    if not out.parent.is_dir():
        raise CollectError(f"cannot write {out}: folder {out.parent} does not exist")
    return out
