"""Acting on a stop signal without taking a lock in its handler.

Python runs a signal handler in the main thread between any two of its bytecodes, also while
that thread holds a lock: inside `threading.Event.wait`, or inside the `Event.set` a first
Ctrl-C began. A handler that sets the same event then waits on its own thread for ever (a
second Ctrl-C hung `mignurse run` that way). So the handler only writes a byte to a pipe, which
takes no lock, and a thread of its own does what the signal asks.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from mignurse import joins


class SignalWake:
    """`poke()` from a signal handler; `action()` runs on the wake thread, once per poke."""

    def __init__(self, action: Callable[[], None], name: str = "signal-wake") -> None:
        self._read, self._write = os.pipe()
        self._action = action
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read, 1):
                self._action()

    def poke(self) -> None:
        with contextlib.suppress(OSError):  # closed: the work it would wake is over
            os.write(self._write, b"w")

    def close(self) -> None:
        """The thread reads the end of the pipe and returns; pokes before it are acted on."""
        with contextlib.suppress(OSError):
            os.close(self._write)
        joins.join(self._thread, timeout=5)
        with contextlib.suppress(OSError):
            os.close(self._read)
