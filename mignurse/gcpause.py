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
from collections.abc import Iterator

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


def freeze_survivors() -> None:
    """Move every object alive now out of the collector's walks (gc.freeze): called once a
    big listing is held, after a burst of watched changes and after each whole diagnosis.
    A full collection over scale-5000's state takes a quarter of a second of CPU, holding
    the GIL, so it stalls the app's event loop whichever thread runs it
    (benchmarks/bench_app.py); frozen, those objects are never walked again. Reference
    counting still frees each one dropped later; only cyclic garbage among them would stay,
    so the young generations (cheap: a few thousand objects) are collected first and the
    models hold no cycles."""
    gc.collect(1)
    gc.freeze()
