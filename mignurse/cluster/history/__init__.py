"""mignurse's own memory of the cluster: node and NodeClaim lifecycles, condition flips, events.

Kubernetes forgets fast: events expire about an hour after their last occurrence, and a repaired
Node or NodeClaim vanishes as soon as its finalizers clear (docs/repair.md "How long the evidence
lives"). A Karpenter repair loop therefore outlives its own evidence. This module keeps a SQLite
history, fed by `ClusterState` change notifications through `HistoryRecorder`, that the diagnosis
rules read later: replacements per NodePool, node lifetimes, how each node ended
(repair fingerprint vs consolidation vs spot), and per-node condition flips.

Design points:

- **One writer.** A single process writes, from a single thread, through a bounded queue
  that never blocks the watch threads. Other processes (the app while `mignurse watch`
  runs) see the `<db>.lock` flock held and open the store read-only.
- **Crash safety.** WAL journal, `synchronous=NORMAL`, one transaction per batch: a
  process killed mid-write leaves the last committed batch intact.
- **Bounded.** `prune` drops what is older than `max_age`, then the oldest events and
  transitions until the file fits `max_bytes`, and returns the pages to the filesystem
  (`auto_vacuum=INCREMENTAL`).

Times are stored as epoch seconds (REAL, UTC) and always returned as tz-aware UTC datetimes.
"""

# lifecycle.py: what the rules read and the reducer; store.py: the file; recorder.py: the
# background writer; schema.py: the SQL. Each name loads its module on first use (PEP 562
# `__getattr__`), so a diagnosis that reads lifecycles loads neither the SQLite file's store nor
# the recorder's watcher and client.
from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.lazynames import name_loader
from mignurse.paths import HISTORY_FILENAME

if TYPE_CHECKING:
    from mignurse.cluster.history.lifecycle import (
        CHANGES,
        LAST_SEEN_STEP,
        NODE_CONDITIONS,
        PLURAL_KIND,
        Lifecycle,
        Transition,
    )
    from mignurse.cluster.history.recorder import (
        DEFAULT_MAX_QUEUE,
        PRUNE_EVERY_SECONDS,
        HistoryRecorder,
        run_recorder,
    )
    from mignurse.cluster.history.schema import SCHEMA_VERSION
    from mignurse.cluster.history.store import (
        DEFAULT_MAX_AGE,
        DEFAULT_MAX_BYTES,
        HistoryError,
        HistoryReadOnly,
        HistorySchemaError,
        HistoryStore,
        WriterBusy,
        default_state_dir,
    )

_HOMES = {
    "CHANGES": "lifecycle",
    "LAST_SEEN_STEP": "lifecycle",
    "NODE_CONDITIONS": "lifecycle",
    "PLURAL_KIND": "lifecycle",
    "Lifecycle": "lifecycle",
    "Transition": "lifecycle",
    "DEFAULT_MAX_QUEUE": "recorder",
    "PRUNE_EVERY_SECONDS": "recorder",
    "HistoryRecorder": "recorder",
    "run_recorder": "recorder",
    "SCHEMA_VERSION": "schema",
    "DEFAULT_MAX_AGE": "store",
    "DEFAULT_MAX_BYTES": "store",
    "HistoryError": "store",
    "HistoryReadOnly": "store",
    "HistorySchemaError": "store",
    "HistoryStore": "store",
    "WriterBusy": "store",
    "default_state_dir": "store",
}

__all__ = [
    "CHANGES",
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_QUEUE",
    "HISTORY_FILENAME",
    "LAST_SEEN_STEP",
    "NODE_CONDITIONS",
    "PLURAL_KIND",
    "PRUNE_EVERY_SECONDS",
    "SCHEMA_VERSION",
    "HistoryError",
    "HistoryReadOnly",
    "HistoryRecorder",
    "HistorySchemaError",
    "HistoryStore",
    "Lifecycle",
    "Transition",
    "WriterBusy",
    "default_state_dir",
    "run_recorder",
]


__getattr__ = name_loader(__name__, _HOMES, globals())
