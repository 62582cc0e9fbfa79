"""Pause Python's cyclic garbage collector around bulk parsing, and keep what a listing
built out of its later walks.

Parsing a page of 500 nodes allocates hundreds of thousands of dicts, lists and strings,
none of which form reference cycles; the collector still walks every live object each
time its thresholds trip, which doubles the cost of listing a 5,000-node cluster
(benchmarks/bench_list.py). Reference counting still frees everything while paused.
The pause is process-wide, so it is counted: nested and concurrent users (watch threads
listing at once) leave the collector enabled only when the last one is done.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

from mignurse.turns import after_ui

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


# gc.freeze() keeps any cyclic garbage alive at that moment until the objects are
# unfrozen; a full pass over everything frozen reclaims it, at most this often and only
# once the frozen set has grown by a quarter since the last (CPython's own rule for its
# oldest generation: Modules/gcmodule.c, `long_lived_pending > long_lived_total / 4`).
RECLAIM_EVERY_SECONDS = 600.0
RECLAIM_GROWTH = 1.25

_freeze_lock = threading.Lock()
_last_reclaim = time.monotonic()
_frozen_after_reclaim = 0


def freeze_survivors() -> None:
    """Move every object alive now out of the collector's walks (gc.freeze): called once a
    big listing is held, after a burst of watched changes, after each whole diagnosis and
    after each refresh's rows are computed. A full collection over scale-5000's state takes
    a quarter of a second of CPU, holding the GIL, so it stalls the app's event loop
    whichever thread runs it (benchmarks/bench_app.py); frozen, those objects are never
    walked again. Reference counting still frees each one dropped later. Everything not yet
    frozen is collected first (only what was born since the last freeze: cheap when this
    runs every refresh), so no cyclic garbage is frozen; cycles that die after their
    objects were frozen are reclaimed by `_reclaim_if_due`."""
    after_ui()  # a collection holds the GIL throughout: not while the UI thread works
    with _freeze_lock:
        gc.collect()  # walks the unfrozen objects only
        gc.freeze()
        _reclaim_if_due()


def _reclaim_if_due() -> None:
    """Unfreeze and collect everything, rarely: bounds what frozen cycles can hold to a
    quarter of the live set or RECLAIM_EVERY_SECONDS of garbage, whichever is more."""
    global _last_reclaim, _frozen_after_reclaim
    now = time.monotonic()
    if now - _last_reclaim < RECLAIM_EVERY_SECONDS:
        return
    if gc.get_freeze_count() <= _frozen_after_reclaim * RECLAIM_GROWTH:
        return
    _last_reclaim = now
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _frozen_after_reclaim = gc.get_freeze_count()
