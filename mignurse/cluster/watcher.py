"""Keep a `ClusterState` current: list, then watch, per resource, in background threads.

Like a client-go informer: a 410 (resource version too old) means list again; a dropped
stream means watch again from the last version seen; any other failure backs off and
retries, while the state keeps its last good data and says since when it is stale.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mignurse import joins
from mignurse.cluster.client import (
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    BadAnswer,
    ClusterClient,
    ClusterError,
    Expired,
    Forbidden,
    Resource,
)
from mignurse.cluster.dra import resource_slices
from mignurse.cluster.snapshot import PARSERS, ClusterState
from mignurse.gcpause import freeze_survivors

WATCH_TIMEOUT_SECONDS = 300
MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    plural: str
    synced: bool
    error: str = ""
    stale_since: datetime | None = None


EVENTS_WAIT_FOR_NODES_SECONDS = 10.0
# Watched changes between two freezes of what they built (see mignurse/gcpause.py): a minute
# of scale-5000's heartbeats replaces every Node object.
FREEZE_EVERY_CHANGES = 2000


# Every resource a ClusterWatcher may list and watch whole (a recording's own reads)
WATCHED_PLURALS = frozenset(
    (NODES.plural, EVENTS.plural, NODECLAIMS.plural, NODEPOOLS.plural, "resourceslices")
)


class ClusterWatcher:
    def __init__(
        self,
        client: ClusterClient,
        state: ClusterState,
        *,
        karpenter: bool,
        on_status: Callable[[ResourceStatus], None] | None = None,
        watch_timeout: int = WATCH_TIMEOUT_SECONDS,
        dra_version: str = "",
    ) -> None:
        self.client = client
        self.watch_timeout = watch_timeout
        self.state = state
        self.resources: list[Resource] = [NODES, EVENTS]
        if karpenter:
            self.resources += [NODECLAIMS, NODEPOOLS]
        if dra_version:  # the resource.k8s.io version the server offers (cluster.dra)
            self.resources.append(resource_slices(dra_version))
        self._on_status = on_status
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: dict[str, Any] = {}
        self._open_lock = threading.Lock()
        self._synced = {r.plural: threading.Event() for r in self.resources}
        self._changes = 0  # applied since the last freeze, every resource together
        self.status: dict[str, ResourceStatus] = {
            r.plural: ResourceStatus(r.plural, synced=False) for r in self.resources
        }

    def start(self) -> ClusterWatcher:
        for resource in self.resources:
            thread = threading.Thread(
                target=self._run, args=(resource,), name=f"watch-{resource.plural}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._open_lock:
            streams = list(self._open.values())
        for stream in streams:
            # Best effort on a socket we are abandoning anyway.
            with contextlib.suppress(Exception):
                stream.shutdown()
        for thread in self._threads:
            joins.join(thread, timeout=2)

    def synced(self) -> bool:
        """Every resource has been listed at least once (or refused for good)."""
        return all(event.is_set() for event in self._synced.values())

    def wait_synced(self, timeout: float) -> bool:
        """Block until every resource has been listed once (or the timeout passes)."""
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            for event in self._synced.values():
                while not event.is_set():
                    if deadline.is_set() or self._stop.is_set():
                        return False
                    event.wait(0.05)
            return True
        finally:
            timer.cancel()

    # -- one resource -----------------------------------------------------------------

    def _report(self, status: ResourceStatus) -> None:
        self.status[status.plural] = status
        if self._on_status is not None:
            self._on_status(status)

    def _opened(self, plural: str, stream: Any) -> None:
        with self._open_lock:
            self._open[plural] = stream
        if self.status[plural].error:
            self._report(ResourceStatus(plural, synced=True))  # recovered: no longer stale

    def _apply(self, resource: Resource, change: str, raw: dict[str, Any]) -> None:
        """One watched change into the state; an object the model cannot read is the
        server's fault, reported like any failed watch (the thread goes on)."""
        try:
            self.state.apply(resource.plural, change, raw)
            self._changes += 1  # a lost increment between threads only delays a freeze
            if self._changes >= FREEZE_EVERY_CHANGES:
                self._changes = 0
                freeze_survivors()
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            raise BadAnswer(
                f"the API server's watch of {resource.qualified} sent an object mignurse "
                f"cannot read ({type(exc).__name__})"
            ) from None

    def _run(self, resource: Resource) -> None:
        parse = PARSERS[resource.plural]
        if resource is EVENTS:
            # The first screen needs nodes; 100,000 events parsed at the same time would
            # hold it back (benchmarks/bench_app.py). Events wait for the node list, briefly.
            self._synced[NODES.plural].wait(EVENTS_WAIT_FOR_NODES_SECONDS)
        backoff = 1.0
        stale_since: datetime | None = None
        version: str | None = None  # None: (re-)list first
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = self.client.list(resource, parse)
                    self.state.replace(resource.plural, listing.items)
                    version = listing.resource_version
                    del listing
                    freeze_survivors()  # the listed state, out of every later collection
                    self._synced[resource.plural].set()
                    self._report(ResourceStatus(resource.plural, synced=True))
                for event in self.client.watch(
                    resource,
                    version,
                    timeout_seconds=self.watch_timeout,
                    on_open=functools.partial(self._opened, resource.plural),
                ):
                    if event.resource_version:
                        version = event.resource_version
                    if event.type != "BOOKMARK":
                        self._apply(resource, event.type, event.object)
                    if self._stop.is_set():
                        return
                stale_since = None
                backoff = 1.0
                # The server ended the watch (its timeout): watch again from `version`.
            except Expired:
                version = None  # too old: list again at once, as client-go does
            except ClusterError as exc:
                if self._stop.is_set():
                    return
                stale_since = stale_since or datetime.now(UTC)
                self._report(
                    ResourceStatus(
                        resource.plural, synced=False, error=str(exc), stale_since=stale_since
                    )
                )
                if isinstance(exc, Forbidden):
                    self._synced[resource.plural].set()  # nothing will come: do not wait on it
                # RBAC will not change in seconds: retry slowly rather than hammer.
                delay = MAX_BACKOFF_SECONDS if isinstance(exc, Forbidden) else backoff
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                if self._stop.wait(delay):
                    return
