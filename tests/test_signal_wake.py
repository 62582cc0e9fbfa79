"""A stop signal's handler never takes a lock: it pokes a pipe and a thread acts. Before, a
second Ctrl-C that landed while the first one's handler was inside `Event.set` (or a first that
landed inside `Event.wait`) left `mignurse run` waiting on its own lock for ever."""

from __future__ import annotations

import os
import signal
import threading

from mignurse.cli.signalwake import SignalWake


def test_a_poke_while_the_main_thread_holds_the_events_lock_returns_and_the_event_is_set() -> None:
    stop = threading.Event()
    wake = SignalWake(stop.set)
    try:
        # Where Event.set and Event.wait hold it when a signal lands: a handler that called
        # stop.set() here would wait on its own thread.
        with stop._cond:  # type: ignore[attr-defined]
            wake.poke()
            assert not stop.is_set()
        assert stop.wait(timeout=30)
    finally:
        wake.close()


def test_a_real_signal_reaches_the_action_from_its_handler() -> None:
    done = threading.Event()
    wake = SignalWake(done.set)
    previous = signal.signal(signal.SIGUSR1, lambda _s, _f: wake.poke())
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert done.wait(timeout=30)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        wake.close()


def test_each_poke_reaches_the_action_once() -> None:
    calls: list[int] = []
    wake = SignalWake(lambda: calls.append(1))
    wake.poke()
    wake.poke()
    wake.close()  # acts on every poke that came before it
    assert calls == [1, 1]


def test_a_poke_after_close_is_ignored() -> None:
    calls: list[int] = []
    wake = SignalWake(lambda: calls.append(1))
    wake.poke()
    wake.close()  # acts on what came before it
    wake.poke()
    assert calls == [1]
