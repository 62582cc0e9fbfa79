"""An overall deadline for one HTTP request, however slowly the server drips its answer.

urllib3's read timeout bounds each socket read, so a server that sends one byte a second
(headers or body) never trips it. A `Deadline` is armed around a request: the connections
the request uses while it is armed are noted (their `connect` and `request` run on the
requesting thread), and when the deadline passes, or the client is closed, their sockets
are shut down, which ends whatever read is waiting on them. `guard_pools` puts the noting
connection classes into a kubernetes ApiClient's urllib3 pool manager.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

_armed = threading.local()  # the Deadline of the request this thread is making, if any


class DeadlinePassed(Exception):
    """Raised in place of a new connection or request once the deadline has passed."""


class Deadline:
    """One request's deadline; `why` says which (this request's, or the command's)."""

    def __init__(self, seconds: float, why: str) -> None:
        self.why = why
        self.passed = False  # the deadline (not the server) ended the request
        self.closed = False  # the client was closed under it
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        _armed.deadline = self
        return self

    def __exit__(self, *_exc: object) -> None:
        if getattr(_armed, "deadline", None) is self:
            _armed.deadline = None

    def done(self) -> None:
        """The request and its body are finished with: the timer goes."""
        self._timer.cancel()
        with self._lock:
            self._connections.clear()

    def note(self, connection: Any) -> None:
        with self._lock:
            if self.passed or self.closed:
                raise DeadlinePassed(self.why)
            if connection not in self._connections:
                self._connections.append(connection)

    def abort(self) -> None:
        """The client is closing: end the request now."""
        self._shut(closing=True)

    def _expire(self) -> None:
        self._shut(closing=False)

    def _shut(self, *, closing: bool) -> None:
        with self._lock:
            if closing:
                self.closed = True
            else:
                self.passed = True
            connections = list(self._connections)
        for connection in connections:
            sock = getattr(connection, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _note_on_this_thread(connection: Any) -> None:
    deadline = getattr(_armed, "deadline", None)
    if deadline is not None:
        deadline.note(connection)


class _Noted:
    """Mixed into a urllib3 connection class: each connect and request is noted."""

    def connect(self) -> None:
        _note_on_this_thread(self)
        super().connect()  # type: ignore[misc]

    def request(self, *args: Any, **kwargs: Any) -> None:
        _note_on_this_thread(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


def guard_pools(pool_manager: Any) -> None:
    """Make `pool_manager` (a PoolManager, ProxyManager or SOCKSProxyManager) build its
    connection pools with connections a `Deadline` can end."""
    guarded = {}
    for scheme, pool_class in pool_manager.pool_classes_by_scheme.items():
        connection_class = type(
            f"Noted{pool_class.ConnectionCls.__name__}", (_Noted, pool_class.ConnectionCls), {}
        )
        guarded[scheme] = type(
            f"Noted{pool_class.__name__}", (pool_class,), {"ConnectionCls": connection_class}
        )
    pool_manager.pool_classes_by_scheme = guarded
    pool_manager.clear()  # pools made before this (none, normally) go
