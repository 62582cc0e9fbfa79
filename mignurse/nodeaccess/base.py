"""The one interface every transport (SSM, SSH, local, the demo's simulated nodes) offers.

A transport runs a POSIX `sh` script on one node under a deadline, streams the script's
standard output into a sink (the collector writes a tar stream there), and reports how it
ended. A node that cannot be reached is a result with a reason, never an exception: one
dead node must not stop the collection of the other 49.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import BinaryIO, Protocol


@dataclass(frozen=True, slots=True)
class CommandResult:
    node: str
    transport: str  # "ssm" | "ssh" | "local" | "sim"
    rc: int | None  # the script's exit status; None when it never finished
    seconds: float
    bytes_out: int = 0  # bytes written to the sink
    timed_out: bool = False
    error: str = ""  # one line: why the node could not be reached or the run failed
    stderr_tail: str = ""  # the last few KiB of the script's standard error

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out and not self.error


class NodeShell(Protocol):
    """A way into one node."""

    transport: str
    node: str

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        """Run `script` with `sh` on the node; copy its stdout into `stdout` as it arrives;
        stop it (and report timed_out) after `timeout` seconds, or as soon as `cancel` is
        set (Ctrl-C: error CANCELLED)."""
        ...


CANCELLED = "cancelled before it finished"
