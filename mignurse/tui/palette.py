"""`:` the command palette: jump to a pool or GPU node, switch context, open a bundle and
go back from it, run a runbook.

Textual's palette does the fuzzy matching and the screen; this provider only lists what can
be done now: pools with GPU nodes, GPU nodes, the runbooks that can apply to the selection.
Free-form arguments ride in the query: `open ./incident.tar.gz` offers to open that file
once it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from mignurse.inert import inert, inert_markup

if TYPE_CHECKING:
    from mignurse.tui.app import MigNurseApp

NODE_QUERY_MIN = 3  # listing 5,000 nodes for a one-letter query helps nobody


class MigNurseCommands(Provider):
    def _app(self) -> MigNurseApp:
        from mignurse.tui.app import MigNurseApp

        assert isinstance(self.app, MigNurseApp)
        return self.app

    def _commands(self, query: str) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self._app()
        yield "Fleet view", app.show_fleet, "every NodePool and node group, worst first"
        yield "Audit log", app.action_audit, "past runbook runs"
        back = app.back_context()
        if back is not None:
            yield f"Back to {back}", app.go_back, "leave the bundle for the cluster"
        if app.diagnosis is not None:
            yield "Findings", app.action_findings, "every finding with all its evidence"
        for pool in app.pool_names():
            yield f"Pool {pool}", partial(app.open_pool, pool), "show the pool's nodes"
        if len(query) >= NODE_QUERY_MIN:
            for name in app.node_names():
                yield f"Node {name}", partial(app.jump_to_node, name), "highlight the GPU node"
        for context in app.context_names():
            yield (
                f"Context {context}",
                partial(app.switch_context, context),
                "connect to another cluster in the kubeconfig",
            )
        if not app.read_only:
            for runbook in app.runbook_names():
                yield (
                    f"Run {runbook}",
                    partial(app.start_runbook, runbook),
                    "can apply to the marked or highlighted node (plan first, then confirm)",
                )
        word, _, rest = query.partition(" ")
        if word.lower() == "open" and rest.strip():
            path = Path(rest.strip()).expanduser()
            if path.exists():
                yield f"Open {path}", partial(app.open_bundle, path), "read-only"

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands(""):
            yield DiscoveryHit(inert_markup(text), callback, help=inert_markup(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands(query):
            score = matcher.match(text)
            if score > 0:
                shown = matcher.highlight(inert(text))
                yield Hit(score, shown, callback, help=inert_markup(help_text))
