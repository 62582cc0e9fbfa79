"""The background writer that feeds a `HistoryStore` from `ClusterState` changes, and the
headless recorder behind `mignurse watch`."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mignurse import joins
from mignurse.cluster.client import ClusterClient
from mignurse.cluster.history.lifecycle import PLURAL_KIND
from mignurse.cluster.history.store import HistoryReadOnly, HistoryStore
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher, ResourceStatus

log = logging.getLogger(__package__)

# Above this the writer drops the oldest queued change: losing history beats stalling
# the watch threads that keep the live view current.
DEFAULT_MAX_QUEUE = 10_000
_BATCH_ITEMS = 256
_MAX_ERRORS = 100

# -- the recorder ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Change:
    plural: str
    change: str
    models: list[Any]
    observed_at: datetime


class HistoryRecorder:
    """Feeds a HistoryStore from ClusterState notifications on one writer thread.

    `listener` runs on the watch threads: it only stamps the change and queues it. The
    queue is bounded; when full the oldest change is dropped and counted (`dropped`),
    because a stalled watch thread would freeze the live view, which matters more.
    On a read-only store (another process is the writer) the recorder does nothing.
    """

    def __init__(
        self,
        store: HistoryStore,
        context: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self.store = store
        self.context = context
        self.clock = clock
        self.max_queue = max_queue
        self.written = 0  # model objects committed
        self.dropped = 0  # changes lost to a full queue
        self.errors: list[str] = []  # the last write failures, newest last
        self._queue: deque[_Change] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # queued or being written
        self._stopping = False
        self._prune_requested = False
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return not self.store.readonly

    @property
    def queued(self) -> int:
        return len(self._queue)

    def listener(self, plural: str, change: str, models: list[Any]) -> None:
        """ClusterState listener: returns at once, whatever the writer is doing."""
        if self.store.readonly or (plural != "events" and plural not in PLURAL_KIND):
            return  # ResourceSlices and other views are not history
        item = _Change(plural, change, list(models), self.clock())
        with self._cond:
            if len(self._queue) >= self.max_queue:
                self._queue.popleft()
                self._pending -= 1
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning(
                        "history writer is behind: dropped %d change(s) so far", self.dropped
                    )
            self._queue.append(item)
            self._pending += 1
            self._cond.notify()

    def request_prune(self) -> None:
        """Ask the writer thread to prune between batches (the one writer does all writes)."""
        with self._cond:
            self._prune_requested = True
            self._cond.notify()

    def start(self) -> HistoryRecorder:
        if self._thread is not None or self.store.readonly:
            return self
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._thread.start()
        return self

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued so far is committed; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending <= 0, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (within `timeout`), then end the writer thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            joins.join(self._thread, timeout)
            self._thread = None

    def _note_error(self, message: str) -> None:
        log.warning("history: %s", message)
        self.errors.append(message)
        del self.errors[:-_MAX_ERRORS]

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._stopping or self._prune_requested)
                prune, self._prune_requested = self._prune_requested, False
                batch = [self._queue.popleft() for _ in range(min(_BATCH_ITEMS, len(self._queue)))]
                if not batch and not prune and self._stopping:
                    return
            if prune:
                try:
                    self.store.prune(self.clock())
                except Exception as exc:  # noqa: BLE001 - the writer must outlive a failure
                    self._note_error(f"prune failed: {exc}")
            if not batch:
                continue
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[_Change]) -> None:
        items = [(c.plural, c.change, c.models, c.observed_at) for c in batch]
        try:
            self.store.record_batch(self.context, items)
        except Exception as exc:  # noqa: BLE001 - one bad change must not lose the batch
            if len(batch) == 1:
                c = batch[0]
                self._note_error(f"could not record {c.change} {c.plural}: {exc}")
                return
            for one in batch:
                self._write([one])
            return
        self.written += sum(len(c.models) for c in batch)


# -- the headless recorder behind `mignurse watch` ----------------------------------------------

PRUNE_EVERY_SECONDS = 3600.0


def run_recorder(
    client: ClusterClient,
    store: HistoryStore,
    *,
    context: str,
    karpenter: bool,
    stop: threading.Event,
    on_progress: Callable[[str], None],
    progress_every: float = 60.0,
    prune_every: float = PRUNE_EVERY_SECONDS,
    on_tick: Callable[[ClusterState], None] | None = None,
) -> None:
    """List and watch the cluster and record it until `stop` is set. `on_tick` sees the
    live state about once a second, once everything is listed (e.g. auto-collect).

    `on_progress` is called from this thread only: a line when everything is listed,
    one every `progress_every` seconds, one per watch failure, and one at the end."""
    if store.readonly:
        raise HistoryReadOnly(
            f"cannot record to {store.path}: {store.readonly_reason or 'opened read-only'}"
        )
    state = ClusterState()
    state.karpenter = karpenter
    # The cluster's clock, not this machine's: rules compare recorded times with the
    # API server's own timestamps (deletionTimestamp, lastTransitionTime).
    recorder = HistoryRecorder(store, context, clock=client.server_now)
    state.subscribe(recorder.listener)
    reports: deque[ResourceStatus] = deque(maxlen=100)
    watcher = ClusterWatcher(client, state, karpenter=karpenter, on_status=reports.append)
    recorder.start()
    recorder.request_prune()  # a recorder restarted after days starts within bounds
    watcher.start()
    started = time.monotonic()
    next_progress = started + progress_every
    next_prune = started + prune_every
    listed = False
    errors_seen = 0
    try:
        while not stop.wait(min(1.0, progress_every)):
            if on_tick is not None and watcher.synced():
                on_tick(state)
            while reports:
                status = reports.popleft()
                if status.error:
                    on_progress(f"{status.plural}: {status.error} (retrying)")
            if not listed and all(s.synced for s in watcher.status.values()):
                listed = True
                counts = state.counts()
                on_progress(
                    "listed "
                    + ", ".join(f"{n:,} {plural}" for plural, n in counts.items())
                    + f"; recording to {store.path}"
                )
            now = time.monotonic()
            if now >= next_prune:
                recorder.request_prune()
                next_prune = now + prune_every
            if len(recorder.errors) != errors_seen:
                errors_seen = len(recorder.errors)
                on_progress(f"history write failed: {recorder.errors[-1]}")
            if now >= next_progress:
                next_progress = now + progress_every
                on_progress(_progress_line(store, recorder))
    finally:
        watcher.stop()
        recorder.stop()
        on_progress("stopped; " + _progress_line(store, recorder))


def _progress_line(store: HistoryStore, recorder: HistoryRecorder) -> str:
    stats = store.stats()
    line = (
        f"recorded {recorder.written:,} objects; history holds {stats['alive']:,} live and "
        f"{stats['lifecycles'] - stats['alive']:,} ended objects, "
        f"{stats['transitions']:,} transitions, {stats['events']:,} events "
        f"({stats['file_bytes'] / 2**20:.1f} MiB)"
    )
    if recorder.queued:
        line += f"; {recorder.queued:,} queued"
    if recorder.dropped:
        line += f"; {recorder.dropped:,} changes dropped (writer too slow)"
    return line
