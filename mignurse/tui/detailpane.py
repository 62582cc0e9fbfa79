"""The detail pane beside the node table: it always shows the highlighted node.

`DetailPane` follows the node table's cursor in the same frame, says what is there while no
node is highlighted (loading, nothing matches the filter, no GPU node), and builds the
node's detail (conditions, timeline, pods, findings, collected evidence; a NodeClaim that
has not registered yet; a node known only from a bundle's files). The node's pods are
fetched in a worker and kept for a while (`PODS_MAX_AGE_SECONDS`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.css.query import NoMatches
from textual.message import Message

from mignurse.cluster.client import ClusterError
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.timeline import node_timeline
from mignurse.model import Pod, format_time
from mignurse.session import part_of, split_key
from mignurse.tui.appstate import NODES, AppState
from mignurse.tui.detail import evidence_detail, node_detail
from mignurse.tui.shown import DataTable

PODS_MAX_AGE_SECONDS = 15.0  # the highlighted node's pods are fetched again after this


class PodsFetched(Message):
    def __init__(self, node: str, pods: list[Pod] | str) -> None:
        super().__init__()
        self.node = node
        self.pods = pods  # or why they could not be read


class DetailPane(AppState):
    """The pane that shows the highlighted node, and the node's pods it fetches."""

    def _cursor_moved(self) -> None:
        """The node table's cursor moved: the pane follows in the same frame."""
        if self.view == NODES:
            self._sync_detail(set())

    @on(DataTable.RowHighlighted, "#nodes")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The event's row may have moved since it was sent (a sort): follow the cursor. One
        # that lands while the app closes finds no table: nothing to show then.
        try:
            name = self._highlighted_name()
        except NoMatches:
            return
        if name is not None and name != self._detail_for:
            self._show_detail(name)

    def _sync_detail(self, changed: set[str]) -> None:
        """The pane always shows the highlighted node: after a sort, a removal or a change."""
        if self.view != NODES:
            return
        name = self._highlighted_name()
        if name is None:
            self._detail_for = None
            if not self._filled:
                words = f"loading {self.pool_filter or 'every pool'}'s nodes…"
            elif self.filters[NODES] is not None:
                words = "No node matches the filter."
            else:
                words = "No GPU node here."
            if words != self._placeholder:
                self._placeholder = words
                with contextlib.suppress(NoMatches):  # the app may be closing
                    self._detail().update(Text(words, style="dim"))
            return
        if name != self._detail_for or name in changed:
            self._show_detail(name)

    def _show_detail(self, name: str) -> None:
        try:
            detail = self._detail()
        except NoMatches:
            return  # a highlight that arrives while the app closes: its widgets are gone
        self._detail_for = name
        self._placeholder = ""
        node = self.source.state.node(name)
        if node is not None:
            pods = self._pods.get(name)
            if pods is None or time.monotonic() - pods[0] > PODS_MAX_AGE_SECONDS:
                self._fetch_pods(name)
        detail.update(self._detail_renderable(name))

    def _detail_renderable(self, key: str, *, full: bool = False) -> Any:
        findings = self._findings_about(key)
        source, name = part_of(self.source, key)  # its own cluster, read by its own clock
        if source is None:
            return Text(f"{key}: its cluster is not connected.")
        state = source.state
        node = state.node(name)
        evidence = source.evidence(name)
        now = source.now()
        if node is None and evidence is not None:
            alone = DiagnosisInput(
                snapshot=state.node_view(name, taken_at=now),
                now=now,
                node_evidence={name: evidence},
            )
            return evidence_detail(
                evidence, node_timeline(alone, name), now, findings=findings, full=full
            )
        if node is None:
            claim = state.nodeclaim(name)
            if claim is not None:
                return (
                    f"[b]{claim.name}[/b]  NodeClaim in pool {claim.pool}\n"
                    f"Launching since {format_time(claim.created)}; no Node has registered yet.\n"
                    f"instance {claim.instance_id or 'not yet known'} · {claim.instance_type}"
                )
            if not self._listed:
                return Text(f"loading {name}…", style="dim")
            return Text(f"{name} is gone.")
        pods = self._pods.get(name)
        snapshot = state.node_view(name, taken_at=now)
        view = DiagnosisInput(
            snapshot=snapshot,
            now=now,
            history=source.last_history.of_node(name, snapshot.nodeclaims),
        )
        runbooks = list(dict.fromkeys(r for f in findings for r in f.runbooks))
        detail = node_detail(
            node,
            node_timeline(view, name),
            now,
            pods[1] if pods else None,
            findings=findings,
            evidence=evidence,
            runbooks=[] if self.read_only else runbooks,
            full=full,
        )
        context = split_key(key)[0]
        if not context:
            return detail
        # across clusters: whose node this is, as its own API server answers for it
        where = Text.assemble(("cluster ", "dim"), (context, "bold"), f" · {source.cluster}")
        return Group(where, detail)

    def pods_of(self, name: str) -> list[Pod] | str | None:
        """The node's pods as last fetched (a string: why they could not be read)."""
        held = self._pods.get(name)
        return held[1] if held else None

    @work(thread=True, exclusive=True, group="pods", exit_on_error=False)
    def _fetch_pods(self, name: str) -> None:
        """The highlighted node's pods, off the UI thread; errors are shown, not raised."""
        result: list[Pod] | str
        try:
            result = self.source.pods(name)
        except ClusterError as exc:
            result = str(exc)
        self.post_message(PodsFetched(name, result))

    @on(PodsFetched)
    def _pods_arrived(self, message: PodsFetched) -> None:
        self._pods[message.node] = (time.monotonic(), message.pods)
        if self._highlighted_name() == message.node:
            self._show_detail(message.node)
