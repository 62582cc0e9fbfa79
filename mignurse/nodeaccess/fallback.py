"""Try one way into a node, and another when the first cannot even start."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import BinaryIO

from mignurse.nodeaccess.base import CommandResult, NodeShell


class FallbackShell:
    """SSM first, SSH when SSM does not manage the instance (docs/commands.md, "How nodes are
    reached"). Only a refusal before anything ran falls back: a script that ran and failed
    is reported as it is, never run twice."""

    def __init__(self, primary: NodeShell, fallback: NodeShell, *, when: str) -> None:
        self.primary = primary
        self.fallback = fallback
        self.when = when  # a phrase of the primary's error that means "cannot reach it this way"
        self.node = primary.node
        self.transport = primary.transport

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        first = self.primary.run(script, timeout=timeout, stdout=stdout, cancel=cancel)
        return self.then(first, script, timeout=timeout, stdout=stdout, cancel=cancel)

    def then(
        self,
        first: CommandResult,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        """What `run` returns once the primary answered `first` (a fleet run asks the
        primary for many nodes at once, then each node's fallback on its own)."""
        if first.rc is not None or first.bytes_out or self.when not in first.error:
            return first
        if cancel is not None and cancel.is_set():
            return first
        second = self.fallback.run(script, timeout=timeout, stdout=stdout, cancel=cancel)
        if second.ok:
            return second
        why = second.error or f"exit {second.rc}"
        return replace(second, error=f"{first.error}; then over {second.transport}: {why}")
