"""A Ctrl-C that lands in a thread's join as the thread ends is still a KeyboardInterrupt.

The race is made to happen, not waited for: a trace function holds the main thread at the
`lock.release()` of `Thread._wait_for_tstate_lock`'s except branch (CPython 3.11
Lib/threading.py) until the joined thread has ended, which is the order that turned a second
Ctrl-C into `RuntimeError: release unlocked lock`.
"""

from __future__ import annotations

import linecache
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from mignurse import joins

WAIT = getattr(threading.Thread, "_wait_for_tstate_lock", None)
pytestmark = pytest.mark.skipif(
    WAIT is None or sys.platform == "win32", reason="this Python's join has no such branch"
)


def _interrupt_as_the_thread_ends(wait: Callable[[threading.Thread], None]) -> BaseException:
    """What `wait(thread)` raises when a KeyboardInterrupt lands in its join and the thread
    ends between the join's `lock.locked()` and its `lock.release()`."""
    go = threading.Event()
    thread = threading.Thread(target=go.wait, name="ends-in-the-join", daemon=True)
    thread.start()
    tstate_lock = thread._tstate_lock  # type: ignore[attr-defined]
    interrupted = False

    def in_wait(frame: FrameType, event: str, _arg: Any) -> Any:
        nonlocal interrupted
        if event == "exception":
            interrupted = True
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        if event == "line" and interrupted and line == "lock.release()":
            go.set()
            deadline = time.monotonic() + 10
            while tstate_lock.locked() and time.monotonic() < deadline:
                time.sleep(0.001)
        return in_wait

    def tracer(frame: FrameType, event: str, _arg: Any) -> Any:
        if event == "call" and frame.f_code is WAIT.__code__:  # type: ignore[union-attr]
            return in_wait
        return None

    def raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old_handler = signal.signal(signal.SIGUSR1, raise_interrupt)
    main = threading.get_ident()
    poke = threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGUSR1))
    old_trace = sys.gettrace()
    poke.start()
    sys.settrace(tracer)
    try:
        wait(thread)
    except BaseException as exc:  # noqa: BLE001 - the test reads what the wait raised
        return exc
    finally:
        sys.settrace(old_trace)
        signal.signal(signal.SIGUSR1, old_handler)
        go.set()
        poke.cancel()
    raise AssertionError("the join returned although it was interrupted")


def test_the_race_is_real_in_this_python() -> None:
    # Without the guard the interrupt is lost: the join raises the lock's RuntimeError.
    raised = _interrupt_as_the_thread_ends(lambda thread: thread.join())
    assert isinstance(raised, RuntimeError), raised
    assert isinstance(raised.__context__, KeyboardInterrupt)


def test_join_raises_the_interrupt() -> None:
    raised = _interrupt_as_the_thread_ends(joins.join)
    assert isinstance(raised, KeyboardInterrupt), raised


def test_join_with_a_timeout_raises_the_interrupt() -> None:
    raised = _interrupt_as_the_thread_ends(lambda thread: joins.join(thread, timeout=30))
    assert isinstance(raised, KeyboardInterrupt), raised


def test_other_runtime_errors_pass_through() -> None:
    with pytest.raises(RuntimeError, match="cannot join thread before it is started"):
        joins.join(threading.Thread(target=lambda: None))
    no_interrupt_behind_it = pytest.raises(RuntimeError, match="release unlocked lock")
    with no_interrupt_behind_it, joins.ctrl_c_kept():
        threading.Lock().release()
