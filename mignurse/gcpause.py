"""Pause Python's cyclic garbage collector around bulk parsing.

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
