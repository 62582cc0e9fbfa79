"""The runbook engine wired to what the app shows: one `RunbookLauncher` per source (a
cluster), which builds a `Runner` for each `RunRequest`.

It loads the runbooks, builds `Runner`s on the source's client, and reaches nodes through
`LiveSource.shells`, the transport `c` and `mignurse run` take to the same cluster (the
simulator's sandboxes on a simulated cluster; they live as long as the launcher, so a node
keeps its state between runs). In the demo the audit log is stamped with the simulated
clock, the one the cluster's own records use.
"""

from __future__ import annotations

import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ClusterClient
from mignurse.runner.audit import Audit
from mignurse.runner.engine import Runner, possible_followups
from mignurse.runner.outcome import Followup, RunError
from mignurse.runner.schema import Runbook, load_runbooks
from mignurse.runner.wiring import node_shells


@dataclass(frozen=True)
class RunRequest:
    """One run to start: a runbook and its resolved params (node included)."""

    book: Runbook
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return str(self.params.get("node") or "") if self.book.target == "node" else "cluster"


class RunbookLauncher:
    """Starts runbook runs on one source's cluster: its runbooks, and the client, node shells,
    AWS clients and audit log every run it builds shares."""

    def __init__(self, source: Any) -> None:
        self.source = source  # a LiveSource or a BundleSource (which has no client)
        self._books: dict[str, Runbook] | None = None
        self._sandboxes: tempfile.TemporaryDirectory[str] | None = None

    @property
    def cluster(self) -> str:
        return str(self.source.cluster)

    def books(self) -> dict[str, Runbook]:
        """RunbookError (one line, file and line) when a runbook file is broken."""
        if self._books is None:
            self._books = load_runbooks()
        return self._books

    def client(self) -> ClusterClient:
        client = getattr(self.source, "client", None)
        if client is None:
            raise RunError("runbooks need a live cluster: a bundle is read-only")
        return client

    def _common(self) -> dict[str, Any]:
        from mignurse.collect.access import AccessError
        from mignurse.runner.wiring import aws_for

        client = self.client()
        if self._sandboxes is None:
            self._sandboxes = tempfile.TemporaryDirectory(
                prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
            )
        access = self.source.access  # the app's --profile and --region, as the CLI's
        try:
            factory = self.source.shells(Path(self._sandboxes.name))
        except AccessError as exc:
            raise RunError(str(exc)) from None
        return {
            "client": client,
            "shell_for": node_shells(client, factory),
            "aws": aws_for(access),
        }

    def _audit(self) -> Audit:
        demo = getattr(self.source, "simulated_clock", False)
        return Audit(clock=self.source.now) if demo else Audit()

    def runner(self, request: RunRequest) -> Runner:
        return Runner(request.book, dict(request.params), audit=self._audit(), **self._common())

    def from_state(self, run_id: str) -> Runner:
        return Runner.from_state(run_id, books=self.books(), audit=self._audit(), **self._common())

    def followups(self, run_id: str) -> dict[str, Followup]:
        """Whether resume and undo of a stopped run can run now (reads the cluster: call it
        off the UI thread)."""
        try:
            common = self._common()
        except RunError as exc:
            return {"resume": Followup(False, str(exc)), "undo": Followup(False, str(exc))}
        return possible_followups(run_id, books=self.books(), **common)


_LAUNCHERS: weakref.WeakKeyDictionary[Any, RunbookLauncher] = weakref.WeakKeyDictionary()


def launcher_for(source: Any) -> RunbookLauncher:
    launcher = _LAUNCHERS.get(source)
    if launcher is None:
        launcher = _LAUNCHERS[source] = RunbookLauncher(source)
    return launcher
