"""The UI thread's turn first: background work steps aside while the app places and draws a
refresh.

CPython runs one thread's Python at a time. A thread that wants to run waits the switch
interval (5 ms) and then takes turns with the one running, so a worker busy for a second
(the rules over 5,000 nodes, a full garbage collection after them) takes half the UI
thread's time while it places a refresh: 90 ms of the UI thread's work kept its event loop
away for up to 220 ms (benchmarks/bench_app.py names the threads that ran in each stall).
The app says when it starts placing a refresh and when the frame after it is drawn
(`ui_working`, `ui_done`); the diagnosis worker calls `after_ui` between its units of work
(each rule, the fleet rows, the radar, a collection) and waits there while the UI thread
works, at most `MAX_WAIT_SECONDS` each time, so a UI that stays busy slows the diagnosis
but never stops it. Without an app nothing is ever marked working: `after_ui` returns at
once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

MAX_WAIT_SECONDS = 0.15  # a unit of background work waits at most this for the UI thread

_idle = threading.Event()
_idle.set()


def ui_working() -> None:
    """The UI thread has begun placing a refresh."""
    _idle.clear()


def ui_done() -> None:
    """The UI thread has drawn what it placed (or the app ended)."""
    _idle.set()


def after_ui() -> None:
    """Wait, off the UI thread, while the UI thread works (at most MAX_WAIT_SECONDS)."""
    if not _idle.is_set() and threading.current_thread() is not threading.main_thread():
        _idle.wait(MAX_WAIT_SECONDS)


@contextlib.contextmanager
def working_as(name: str) -> Iterator[None]:
    """The current thread (a pool's, reused for other work) named after the work it runs,
    while it runs it: what a thread dump and benchmarks/bench_app.py's stall lines show."""
    thread = threading.current_thread()
    before, thread.name = thread.name, name
    try:
        yield
    finally:
        thread.name = before
