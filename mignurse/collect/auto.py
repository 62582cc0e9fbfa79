"""Collect a node when its repair clock starts, before Karpenter deletes it and the evidence.

Each (node, unhealthy condition, its transition time) is collected once, in the background,
a few at a time: a loop that replaces a node every ten minutes yields one bundle per
victim, not one per check.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from mignurse import joins
from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import ClusterState
from mignurse.collect.events import STARTED, CollectEvent
from mignurse.collect.request import CollectRequest, run_collect
from mignurse.collect.run import Stopped, journal_since_words
from mignurse.diagnose.facts import repair_clock
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell

MAX_PARALLEL = 2  # collection competes with the recorder and the app for two cores
CHECK_SECONDS = 10.0  # repair tolerations are 10 or 30 minutes: this is early enough


class AutoCollector:
    def __init__(
        self,
        client: ClusterClient,
        *,
        out_dir: Path,
        shell_for: Callable[[Node], NodeShell],
        clock: Callable[[], datetime],
        since: str = "6h",
        report: Callable[[str], None] = lambda line: None,
        stop_now: threading.Event | None = None,
        stop_now_words: str = "",
    ) -> None:
        """`stop_now`, set by the face (from any thread), ends the running collections at
        once, as Ctrl-C ends a `collect`: each bundle closed with what it has, marked
        interrupted, and nothing new started. `stop_now_words`: how the face sets it
        ("Ctrl-C again"), said when stopping waits for collections."""
        self.client = client
        self.out_dir = out_dir
        self.shell_for = shell_for
        self.clock = clock
        journal_since_words(since)  # ValueError now, not in each collection
        self.since = since
        self.report = report
        self.stop_now_words = stop_now_words
        self._done: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(MAX_PARALLEL, "auto-collect")
        # each collection started, by the node it collects
        self.futures: dict[concurrent.futures.Future[Path], str] = {}
        self._next_check = 0.0
        self._stop = stop_now or threading.Event()

    def tick(self, state: ClusterState) -> None:
        """For a loop that calls often: check at most every CHECK_SECONDS."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + CHECK_SECONDS
            self.check(state)

    def check(self, state: ClusterState) -> list[str]:
        """Start collecting every node whose repair deadline lies ahead and that has not
        been collected for this condition yet; returns the nodes started."""
        if self._stop.is_set():
            return []  # stopping now: nothing new starts
        now = self.clock()
        snapshot = state.snapshot(taken_at=now)
        started: list[str] = []
        for node in snapshot.gpu_nodes():
            clock = repair_clock(node)
            if clock is None or clock.deadline <= now or node.deleting is not None:
                continue
            key = (node.name, clock.condition.type, str(clock.condition.last_transition))
            with self._lock:
                if key in self._done:
                    continue
                self._done.add(key)
            self.report(
                f"{node.name}: {clock.condition.type}={clock.condition.status} "
                f"({clock.condition.reason}); repair due {clock.deadline:%H:%M:%SZ}: collecting"
            )
            self.futures[self._pool.submit(self._collect, node, snapshot)] = node.name
            started.append(node.name)
        return started

    def _collect(self, node: Node, snapshot: Any) -> Path:
        named: list[Path] = []  # the bundle's path, once the collection has named it

        def started(event: CollectEvent) -> None:
            if event.kind == STARTED and event.out is not None:
                named.append(event.out)

        request = CollectRequest(
            self.client,
            out=self.out_dir,
            nodes=[node],
            snapshot=snapshot,
            shell_for=self.shell_for,
            since=self.since,
            label=node.name.split(".", 1)[0],
            collected_at=self.clock(),  # the moment in the file's name
            stop=self._stop,
        )
        try:
            collected = run_collect(request, started)
        except Stopped:  # raised once the bundle was named (`STARTED`): it holds what came
            self.report(f"{node.name}: bundle {named[0]} (interrupted: stopped before it ended)")
            return named[0]
        out, manifest = collected.out, collected.manifest
        assert out is not None and manifest is not None  # the node was given
        outcome = manifest["nodes"].get(node.name, {})
        state = "ok" if outcome.get("ok") else (outcome.get("error") or "incomplete")
        self.report(f"{node.name}: bundle {out} ({state})")
        return out

    def close(self) -> None:
        """Wait for the collections still running: each finishes its bundle (a node under a
        repair clock may be gone in minutes, and its evidence with it), and says so first;
        `stop_now` cuts the wait short."""
        running = sorted(name for future, name in self.futures.items() if not future.done())
        if running:
            then = f"; {self.stop_now_words} to stop them now" if self.stop_now_words else ""
            self.report(
                f"stopping: {len(running)} collection(s) still running finish their bundles "
                f"first ({', '.join(running)}){then}"
            )
        with joins.ctrl_c_kept():
            self._pool.shutdown(wait=True)
