"""Waiting for a thread, with a Ctrl-C that lands in the wait still a KeyboardInterrupt.

CPython 3.11's `Thread.join` waits on the thread's own lock (Lib/threading.py,
`_wait_for_tstate_lock`). When an exception interrupts that wait (the KeyboardInterrupt a
second Ctrl-C raises wherever the main thread is) and the lock is still held, it releases the
lock itself before raising (the bpo-45274 branch). If the thread ends between that check and
the release, the release raises `RuntimeError: release unlocked lock`, and the
KeyboardInterrupt survives only as its `__context__`: a `run` stopped twice then ended in an
internal error instead of its interrupted report. An executor's `shutdown(wait=True)` joins its
threads the same way. Every wait for a thread on a path Ctrl-C can reach goes through here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_kept() -> Iterator[None]:
    """Inside, a join that Ctrl-C broke raises the KeyboardInterrupt, not the RuntimeError."""
    try:
        yield
    except RuntimeError as exc:
        interrupt = exc.__context__
        if isinstance(interrupt, KeyboardInterrupt) and str(exc) == "release unlocked lock":
            raise interrupt from None
        raise


def join(thread: threading.Thread, timeout: float | None = None) -> None:
    with ctrl_c_kept():
        thread.join(timeout)
