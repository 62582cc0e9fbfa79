"""The per-target lock: annotation `mignurse.io/lock` on the Node (or, for `target:
cluster` runbooks, on the `kube-system` Namespace).

Decisions:
- The value is JSON {holder, run, runbook, expires, host, pid, renewed}; it is taken and
  released with a merge patch that carries `metadata.resourceVersion`, so two operators
  racing for one node cannot both win: the loser gets 409, reads again, and finds the
  winner's lock.
- A live lock of another run is a refusal naming its holder and whether the holder still
  lives: its process on this host (pid), or only its last renewal when it ran elsewhere, and
  `mignurse unlock` for a dead one. An expired lock may be taken over (and the run says so).
  The same run (a resume) takes its own lock back.
- Expiry is on the API server's clock (Date headers), not the laptop's. Long runs renew
  it from a background thread; a lock released or taken over by someone else is never
  overwritten by a renewal.
- Before every change a step makes, `confirm()` reads the lock back: a run that was stopped
  (SIGSTOP, a suspended laptop) past its expiry while another run took the node over stops
  with "lock lost" instead of changing the node under the other run.
- A blip of the API server (5xx, unreachable) is tried again for a few seconds when taking
  and releasing; a lock that still cannot be released is reported with its expiry and the
  `mignurse unlock` command, never silently left.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from mignurse import joins
from mignurse.cluster.client import (
    NAMESPACES,
    NODES,
    ClusterClient,
    ClusterError,
    Conflict,
    NotFound,
    Resource,
)
from mignurse.runner.state import process_alive
from mignurse.runner.step import LockLost, StepFailed, transient
from mignurse.untrusted import json_value

LOCK_ANNOTATION = "mignurse.io/lock"
DEFAULT_TTL = 900.0  # seconds; renewed every TTL/3 while the run lives
CLUSTER_LOCK_NAMESPACE = "kube-system"
_TRIES = 5
BLIP_SECONDS = 8.0  # how long taking or releasing the lock rides out API server errors
CONFIRM_CACHE_SECONDS = 0.5  # a lock read back this recently is not read again


class LockError(Exception):
    """The lock could not be taken; str() is the one line to show."""

    exit_code = 3


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def lock_resource(target: str, name: str) -> tuple[Resource, str, str]:
    """(resource, object name, words) holding the lock of a node or a cluster target."""
    if target == "node":
        return NODES, name, f"node {name}"
    return NAMESPACES, CLUSTER_LOCK_NAMESPACE, f"cluster {name}"


def read_lock(
    client: ClusterClient, resource: Resource, name: str
) -> tuple[dict[str, Any] | None, str]:
    """(the parsed lock or None, the object's resourceVersion)."""
    obj = client.get(resource, name)
    meta = obj.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(LOCK_ANNOTATION)
    current: dict[str, Any] | None = None
    if raw:
        try:
            parsed = json_value(raw)
            current = parsed if isinstance(parsed, dict) else {"holder": str(raw)}
        except ValueError:
            current = {"holder": str(raw)}
    return current, str(meta.get("resourceVersion") or "")


def liveness(current: dict[str, Any], now: datetime) -> str:
    """Whether the lock's holder still lives, as far as this machine can tell (one phrase)."""
    renewed = _parse_time(str(current.get("renewed") or ""))
    when = f"last renewed {_age(now - renewed)} ago" if renewed else "renewal time unknown"
    pid, host = current.get("pid"), str(current.get("host") or "")
    if not host or not isinstance(pid, int):
        return f"its process is unknown (an older mignurse), {when}"
    if host == socket.gethostname():
        state = "still running" if process_alive(pid) else "gone"
        return f"pid {pid} on {host}: {state}, {when}"
    return f"pid {pid} on {host} (another machine: cannot tell whether it runs), {when}"


def holder_alive(current: dict[str, Any], now: datetime, ttl: float = DEFAULT_TTL) -> bool | None:
    """True when the holder runs here, False when it is gone here or stopped renewing
    elsewhere, None when nothing tells (an older lock without pid and renewal)."""
    pid, host = current.get("pid"), str(current.get("host") or "")
    if host == socket.gethostname() and isinstance(pid, int):
        return process_alive(pid)
    renewed = _parse_time(str(current.get("renewed") or ""))
    if renewed is None:
        return None
    return (now - renewed).total_seconds() <= 2 * max(1.0, ttl / 3) + 5


def _age(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


class TargetLock:
    def __init__(
        self,
        client: ClusterClient,
        *,
        target: str,
        name: str,
        holder: str,
        run_id: str,
        runbook: str,
        ttl: float = DEFAULT_TTL,
    ) -> None:
        self.client = client
        self.resource, self.name, self.what = lock_resource(target, name)
        self.target_name = name
        self.target = target
        self.holder = holder
        self.run_id = run_id
        self.runbook = runbook
        self.ttl = ttl
        self.held = False
        self.absent = False  # the node is gone (replaced): there is nothing to lock
        self.lost = ""  # why the lock is no longer ours, once that is known
        self._confirmed = 0.0  # monotonic time of the last read that found it ours
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._guard = threading.Lock()

    # -- reading ----------------------------------------------------------------------

    def _read(self) -> tuple[dict[str, Any] | None, str]:
        return read_lock(self.client, self.resource, self.name)

    def _value(self) -> str:
        now = self.client.server_now()
        return json.dumps(
            {
                "holder": self.holder,
                "run": self.run_id,
                "runbook": self.runbook,
                "expires": _stamp(now + timedelta(seconds=self.ttl)),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "renewed": _stamp(now),
            },
            separators=(",", ":"),
        )

    def _expired(self, current: dict[str, Any]) -> bool:
        when = _parse_time(str(current.get("expires") or ""))
        return when is None or when <= self.client.server_now()

    def _patch(self, version: str, value: str | None) -> None:
        self.client.patch(
            self.resource,
            self.name,
            {"metadata": {"resourceVersion": version, "annotations": {LOCK_ANNOTATION: value}}},
        )

    # -- the lock ---------------------------------------------------------------------

    def acquire(self) -> str | None:
        """Take the lock; returns a notice when an expired lock was taken over.

        Raises LockError naming the holder when another run holds it."""
        notice = None
        deadline = time.monotonic() + BLIP_SECONDS
        conflicts = 0
        while True:
            try:
                current, version = self._read()
                if current and current.get("run") != self.run_id:
                    if not self._expired(current):
                        raise LockError(self.held_by(current))
                    notice = (
                        f"took over the expired lock of {current.get('holder', '?')} on "
                        f"{self.what} (run {current.get('run', '?')}, "
                        f"{current.get('runbook', '?')}, expired {_short(current)})"
                    )
                self._patch(version, self._value())
            except Conflict:
                conflicts += 1
                if conflicts >= _TRIES:
                    raise LockError(
                        f"cannot lock {self.what}: it keeps changing under us; try again"
                    ) from None
                continue
            except NotFound:
                if self.resource is not NODES:
                    raise LockError(f"cannot lock {self.what}: it does not exist") from None
                # A replaced node: no other run can act on it either.
                self.absent = True
                return f"{self.what} no longer exists: there is no lock to take"
            except ClusterError as exc:
                if transient(exc) and time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                raise LockError(f"cannot lock {self.what}: {exc}") from None
            self.held = True
            self.lost = ""
            self._confirmed = time.monotonic()
            return notice

    def refusal(self) -> str:
        """Read-only: why `acquire` would refuse now (another run's live lock), or "" when
        the target is free, ours, expired or gone. A failed read is said as such."""
        try:
            current, _version = self._read()
        except NotFound:
            return ""
        except ClusterError as exc:
            return f"cannot read the lock on {self.what}: {' '.join(str(exc).split())}"
        if not current or current.get("run") == self.run_id or self._expired(current):
            return ""
        return self.held_by(current)

    def left_by_this_run(self) -> bool:
        """Read-only: whether the target still carries this run's lock though the run holds
        nothing (its process ended before releasing it)."""
        try:
            current, _version = self._read()
        except ClusterError:
            return False
        return current is not None and current.get("run") == self.run_id and not self.held

    def clear_left(self) -> bool:
        """Remove this run's lock that its ended process left; False when there is none (or
        another run's is there now)."""
        for _ in range(_TRIES):
            try:
                current, version = self._read()
                if not current or current.get("run") != self.run_id:
                    return False
                self._patch(version, None)
                return True
            except Conflict:
                continue
            except NotFound:
                return False
        return False

    def held_by(self, current: dict[str, Any]) -> str:
        now = self.client.server_now()
        return (
            f"{self.what} is locked by {current.get('holder', '?')} (run "
            f"{current.get('run', '?')}, {current.get('runbook', '?')}; "
            f"{liveness(current, now)}) until {_short(current)}; if that run is dead, "
            f"`{unlock_command(self.target, self.target_name)}` clears it"
        )

    def confirm(self) -> None:
        """Before a change: raise LockLost unless the lock is still this run's on the API
        server. A lock whose time ran out while nobody took it is renewed on the spot."""
        with self._guard:
            if self.absent:
                return
            if not self.held:
                raise LockLost(
                    self.lost or f"lock lost: {self.what} is no longer locked by run {self.run_id}"
                )
            if time.monotonic() - self._confirmed < CONFIRM_CACHE_SECONDS:
                return
            for _ in range(_TRIES):
                try:
                    current, version = self._read()
                except NotFound:
                    self._lose(None)
                    raise LockLost(f"lock lost: {self.what} no longer exists") from None
                except ClusterError as exc:
                    raise StepFailed(
                        f"cannot read the lock on {self.what} before a change: {exc}",
                        retryable=transient(exc),
                    ) from None
                if not current or current.get("run") != self.run_id:
                    self._lose(current)
                    raise LockLost(self.lost)
                if self._expired(current):
                    try:
                        self._patch(version, self._value())
                    except Conflict:
                        continue
                    except ClusterError as exc:
                        raise StepFailed(
                            f"cannot renew the expired lock on {self.what}: {exc}",
                            retryable=transient(exc),
                        ) from None
                self._confirmed = time.monotonic()
                return
            raise LockLost(f"lock lost: {self.what} keeps changing under this run")

    def _lose(self, current: dict[str, Any] | None) -> None:
        self.held = False
        if current:
            self.lost = (
                f"lock lost: {self.what} is now locked by {current.get('holder', '?')} (run "
                f"{current.get('run', '?')}, {current.get('runbook', '?')})"
            )
        else:
            self.lost = f"lock lost: {self.what} is no longer locked by run {self.run_id}"

    def renew(self) -> bool:
        """Push the expiry forward; False when the lock is no longer ours."""
        with self._guard:
            if not self.held:
                return False
            for _ in range(_TRIES):
                try:
                    current, version = self._read()
                    if not current or current.get("run") != self.run_id:
                        self._lose(current)
                        return False
                    self._patch(version, self._value())
                    return True
                except Conflict:
                    continue
                except ClusterError:
                    return True  # a blip: the lock is still ours until it expires
            return True

    def release(self) -> str | None:
        """Remove the lock if it is still ours (also after a failure); never raises. Returns
        None, or one line saying the lock is left and how to clear it."""
        self.stop_renewing()
        with self._guard:
            if not self.held:
                return None
            deadline = time.monotonic() + BLIP_SECONDS
            problem = ""
            conflicts = 0
            while True:
                try:
                    current, version = self._read()
                    if current and current.get("run") == self.run_id:
                        self._patch(version, None)
                    break
                except Conflict:
                    conflicts += 1
                    if conflicts >= _TRIES:
                        problem = "it kept changing"
                        break
                except NotFound:
                    break  # the node is gone, and its lock with it
                except ClusterError as exc:
                    problem = " ".join(str(exc).split())
                    if not transient(exc) or time.monotonic() >= deadline:
                        break
                    time.sleep(1.0)
            self.held = False
            if not problem or self._released_anyway():
                return None
            expires = _stamp(self.client.server_now() + timedelta(seconds=self.ttl))
            return (
                f"the lock on {self.what} could not be released ({problem}): it expires by "
                f"{expires[11:16]}Z, or `{unlock_command(self.target, self.target_name)}` "
                "clears it now"
            )

    def _released_anyway(self) -> bool:
        """After errors: whether the lock is gone after all (the answer was lost)."""
        try:
            current, _version = self._read()
        except NotFound:
            return True
        except ClusterError:
            return False
        return not current or current.get("run") != self.run_id

    def start_renewing(self, on_lost: Callable[[], None] | None = None) -> None:
        def loop() -> None:
            while not self._stop.wait(max(1.0, self.ttl / 3)):
                if not self.renew():
                    if on_lost is not None:
                        on_lost()
                    return

        self._stop.clear()
        self._renewer = threading.Thread(target=loop, name="lock-renew", daemon=True)
        self._renewer.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            joins.join(self._renewer, timeout=5)
        self._renewer = None


def unlock_command(target: str, name: str) -> str:
    return f"mignurse unlock {name}" if target == "node" else "mignurse unlock --cluster"


def _short(current: dict[str, Any]) -> str:
    """ "2026-11-20T03:14:00Z" → "03:14Z" (the date is implied: locks last minutes)."""
    when = _parse_time(str(current.get("expires") or ""))
    return f"{when:%H:%MZ}" if when else "?"
