"""LocalShell: run the collector on this machine (`mignurse collect --local`, the demo's nodes).

The script goes to `sh -s` on stdin; stdout is copied into the sink as it arrives and stderr
is read alongside (last 8 KiB kept) through one selector loop, so neither pipe can fill up and
deadlock. The deadline is enforced on the whole process group: SIGTERM first (the script's
trap removes its temp dir, and `timeout` passes it on to its child), SIGKILL after a grace.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO

from mignurse.nodeaccess.base import CANCELLED, CommandResult

CHUNK = 64 * 1024
STDERR_TAIL = 8 * 1024
KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL


class LocalShell:
    """A NodeShell for this machine; `env` is laid over the current environment and
    `path_prefix` goes in front of PATH (the sandbox's stub bin/)."""

    transport = "local"

    def __init__(
        self,
        node: str,
        *,
        env: dict[str, str] | None = None,
        path_prefix: list[str] | None = None,
        shell: str = "sh",
    ) -> None:
        self.node = node
        self.shell = shell
        self._env = dict(env or {})
        self._path_prefix = list(path_prefix or [])

    def environment(self) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update(self._env)
        if self._path_prefix:
            rest = merged.get("PATH") or os.defpath
            merged["PATH"] = os.pathsep.join([*self._path_prefix, rest])
        return merged

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [self.shell, "-s"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environment(),
                start_new_session=True,  # its own process group, so a timeout kills it all
            )
        except OSError as exc:
            return CommandResult(
                self.node, self.transport, None, time.monotonic() - started, error=str(exc)
            )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        writer = threading.Thread(target=_feed, args=(proc.stdin, script.encode()), daemon=True)
        writer.start()

        try:
            got = _pump(proc, stdout, started + timeout, cancel)
        finally:
            rc = _reap(proc)
            proc.stdout.close()
            proc.stderr.close()
            writer.join(timeout=1)
        with contextlib.suppress(OSError, ValueError):
            stdout.flush()
        seconds = time.monotonic() - started
        error = got.stop_error
        if got.timed_out and not error:
            error = f"timed out after {timeout:g} s"
        return CommandResult(
            node=self.node,
            transport=self.transport,
            rc=None if got.timed_out or got.stop_error else rc,
            seconds=seconds,
            bytes_out=got.bytes_out,
            timed_out=got.timed_out,
            error=error,
            stderr_tail=bytes(got.tail).decode("utf-8", "replace"),
        )


@dataclass
class _Pumped:
    """What the read loop saw of one process."""

    bytes_out: int = 0
    tail: bytearray = field(default_factory=bytearray)  # the last STDERR_TAIL bytes of stderr
    timed_out: bool = False
    stop_error: str = ""  # why we stopped it early: the sink failed, or Ctrl-C


def _pump(
    proc: subprocess.Popen[bytes],
    stdout: BinaryIO,
    deadline: float,
    cancel: threading.Event | None,
) -> _Pumped:
    """Copy the process's stdout into `stdout` and keep stderr's tail, through one selector
    loop, until both pipes close. Past `deadline`, on `cancel`, or when the sink fails, SIGTERM
    its process group, and SIGKILL it `KILL_GRACE` later."""
    assert proc.stdout is not None and proc.stderr is not None
    got = _Pumped()
    kill_at: float | None = None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "out")
    selector.register(proc.stderr, selectors.EVENT_READ, "err")
    try:
        while selector.get_map():
            now = time.monotonic()
            if not got.timed_out and now >= deadline:
                got.timed_out = True
                _signal(proc, signal.SIGTERM)
                kill_at = now + KILL_GRACE
            if kill_at is None and cancel is not None and cancel.is_set():
                got.stop_error = CANCELLED
                _signal(proc, signal.SIGTERM)
                kill_at = now + KILL_GRACE
            if kill_at is not None and now >= kill_at:
                _signal(proc, signal.SIGKILL)
                break  # a grandchild in another group may hold the pipes: stop reading
            wait = (kill_at if kill_at is not None else deadline) - now
            for key, _ in selector.select(timeout=max(min(wait, 0.2), 0.01)):
                data = os.read(key.fd, CHUNK)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                if key.data == "err":
                    got.tail.extend(data)
                    del got.tail[:-STDERR_TAIL]
                elif not got.stop_error:
                    try:
                        stdout.write(data)
                        got.bytes_out += len(data)
                    except OSError as exc:
                        # the sink failed (disk full): stop the script, keep the reason
                        got.stop_error = f"cannot write the output: {exc}"
                        _signal(proc, signal.SIGTERM)
                        kill_at = time.monotonic() + KILL_GRACE
    finally:
        selector.close()
    return got


def _feed(pipe: BinaryIO, data: bytes) -> None:
    """Write the script to `sh -s`; a shell that exits early closes the pipe, which is fine."""
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError, ValueError):
            pipe.close()


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _reap(proc: subprocess.Popen[bytes]) -> int | None:
    try:
        return proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        try:
            return proc.wait(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            return None
