"""The per-target lock: annotation `mignurse.io/lock` on the Node (or, for `target:
cluster` runbooks, on the `kube-system` Namespace).

Decisions:
- The value is JSON {holder, run, runbook, expires}; it is taken and released with a merge
  patch that carries `metadata.resourceVersion`, so two operators racing for one node
  cannot both win: the loser gets 409, reads again, and finds the winner's lock.
- A live lock of another run is a refusal naming its holder; an expired one may be taken
  over (and the run says so). The same run (a resume) takes its own lock back.
- Expiry is on the API server's clock (Date headers), not the laptop's. Long runs renew
  it from a background thread; a lock released or taken over by someone else is never
  overwritten by a renewal.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from mignurse.cluster.client import (
    NAMESPACES,
    NODES,
    ClusterClient,
    ClusterError,
    Conflict,
    Resource,
)

LOCK_ANNOTATION = "mignurse.io/lock"
DEFAULT_TTL = 900.0  # seconds; renewed every TTL/3 while the run lives
CLUSTER_LOCK_NAMESPACE = "kube-system"
_TRIES = 5


class LockError(Exception):
    """The lock could not be taken; str() is the one line to show."""

    exit_code = 3


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


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
        self.resource: Resource = NODES if target == "node" else NAMESPACES
        self.name = name if target == "node" else CLUSTER_LOCK_NAMESPACE
        self.what = f"node {name}" if target == "node" else f"cluster {name}"
        self.holder = holder
        self.run_id = run_id
        self.runbook = runbook
        self.ttl = ttl
        self.held = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._guard = threading.Lock()

    # -- reading ----------------------------------------------------------------------

    def _read(self) -> tuple[dict[str, Any] | None, str]:
        obj = self.client.get(self.resource, self.name)
        meta = obj.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(LOCK_ANNOTATION)
        current: dict[str, Any] | None = None
        if raw:
            try:
                parsed = json.loads(raw)
                current = parsed if isinstance(parsed, dict) else {"holder": str(raw)}
            except ValueError:
                current = {"holder": str(raw)}
        return current, str(meta.get("resourceVersion") or "")

    def _value(self) -> str:
        expires = self.client.server_now() + timedelta(seconds=self.ttl)
        return json.dumps(
            {
                "holder": self.holder,
                "run": self.run_id,
                "runbook": self.runbook,
                "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
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
        for _ in range(_TRIES):
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
                continue
            except ClusterError as exc:
                raise LockError(f"cannot lock {self.what}: {exc}") from None
            self.held = True
            return notice
        raise LockError(f"cannot lock {self.what}: it keeps changing under us; try again")

    def held_by(self, current: dict[str, Any]) -> str:
        return (
            f"{self.what} is locked by {current.get('holder', '?')} (run "
            f"{current.get('run', '?')}, {current.get('runbook', '?')}) until {_short(current)}"
        )

    def renew(self) -> bool:
        """Push the expiry forward; False when the lock is no longer ours."""
        with self._guard:
            if not self.held:
                return False
            for _ in range(_TRIES):
                try:
                    current, version = self._read()
                    if not current or current.get("run") != self.run_id:
                        self.held = False
                        return False
                    self._patch(version, self._value())
                    return True
                except Conflict:
                    continue
                except ClusterError:
                    return True  # a blip: the lock is still ours until it expires
            return True

    def release(self) -> None:
        """Remove the lock if it is still ours (also after a failure); never raises."""
        self.stop_renewing()
        with self._guard:
            if not self.held:
                return
            for _ in range(_TRIES):
                try:
                    current, version = self._read()
                    if current and current.get("run") == self.run_id:
                        self._patch(version, None)
                    break
                except Conflict:
                    continue
                except ClusterError:
                    break  # it expires on its own
            self.held = False

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
            self._renewer.join(timeout=5)
        self._renewer = None


def _short(current: dict[str, Any]) -> str:
    """ "2026-11-20T03:14:00Z" → "03:14Z" (the date is implied: locks last minutes)."""
    when = _parse_time(str(current.get("expires") or ""))
    return f"{when:%H:%MZ}" if when else "?"
