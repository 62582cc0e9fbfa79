"""The terminal app: the fleet view, each pool's GPU nodes, a node's detail, and the keys to act.

One factory, `make_app`, builds the app for the live cluster, the demo, an opened bundle and
the tests. It lands on the fleet view (one row per NodePool or node group, worst first,
with the highlighted pool's nodes below it); enter drills into a pool's nodes, esc backs
out, `/` filters as you type (each view its own filter), space marks, `:` opens the
command palette, `l` `d` `f` open the journals, a node's description and every finding in
a pager, and `?` lists every key (k9s's grammar).

The UI thread never talks to the cluster: watch threads fill a `ClusterState`, a worker
turns it into row changes (refresh.py) and posts them back as a message, and the UI thread
only places them (many new rows a chunk at a time, so a 5,000-row fill never freezes the
screen). One refresh is in flight at a time; the next is armed when the last has been
applied or has failed. Every other worker (pods, collection, context switch, the demo's
build) reports back as a message too.

`MigNurseApp` is made of parts, each a base class in a module of its own: appstate.py (the
state and the widgets), panels.py (status line, findings, bars, fleet table and preview),
detailpane.py (the highlighted node's detail), refreshloop.py (the UI thread's half of the
refresh), navigation.py (pools, nodes, cursors, filters) and switching.py (another
cluster, a bundle, the demo's build). This module joins them: the keys, the layout, the
palette's offers, the runbook keys, the pagers and collection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.events import Resize
from textual.widgets import ContentSwitcher, Footer, Header, Input

from mignurse.fleetview import RepairState
from mignurse.nodeview import short_name
from mignurse.render import as_of_words
from mignurse.session import BuildingSource, Source, finding_now, part_of, split_key
from mignurse.tui.appstate import FLEET, NODES, VIEW_IDS, Notice
from mignurse.tui.detail import sorted_findings
from mignurse.tui.navigation import Navigation
from mignurse.tui.pages import describe_page, findings_page, journal_pages
from mignurse.tui.palette import MigNurseCommands
from mignurse.tui.refresh import column_label, local_findings
from mignurse.tui.screens.help import HelpScreen
from mignurse.tui.screens.pager import PagerScreen
from mignurse.tui.selection import Selection
from mignurse.tui.shown import DataTable, Static
from mignurse.tui.switching import SourceSwitching
from mignurse.tui.table import BatchTable
from mignurse.turns import ui_done

__all__ = ["MigNurseApp", "make_app"]


class MigNurseApp(Navigation, SourceSwitching):
    """The app: its parts joined, with the keys, the layout and what the keys do on nodes.

    Its state is `AppState`'s (appstate.py); the panels, the detail pane, the refresh loop,
    navigation and source switching are the bases it is made of."""

    CSS_PATH = "mignurse.tcss"
    TITLE = "mignurse"
    COMMANDS = App.COMMANDS | {MigNurseCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("escape", "leave", "Back"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("colon", "command_palette", "Palette", key_display=":"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("space", "mark", "Mark"),
        Binding("c", "collect", "Collect"),
        Binding("R", "runbooks", "Runbooks", key_display="R"),
        Binding("x", "cordon", "Cordon"),
        Binding("l", "logs", "Logs"),
        Binding("d", "describe", "Describe"),
        Binding("f", "findings", "Findings"),
        # `?` lists these too: out of the footer, the others fit in 120 columns
        Binding("A", "audit", "Audit", key_display="A", show=False),
        Binding("D", "radar", "Deadlines", key_display="D", show=False),
        Binding("p", "next_pool", "Next pool", show=False),
        Binding("a", "all_pools", "All pools", show=False),
        Binding("r", "refresh_now", "Refresh", show=False),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        Binding("g", "cursor('top')", "Top", show=False),
        Binding("G", "cursor('bottom')", "Bottom", show=False, key_display="G"),
        Binding("ctrl+d", "pane(1)", "Detail down", show=False),
        Binding("ctrl+u", "pane(-1)", "Detail up", show=False),
    ]

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="status")
        yield Static(id="clusters")  # several clusters: a status line each
        yield Static("Diagnosing…", id="findings")
        with ContentSwitcher(initial=VIEW_IDS[FLEET], id="views"):
            with Vertical(id=VIEW_IDS[FLEET]):
                yield Static(id="fleet-bar", classes="bar")
                yield DataTable(id=FLEET, cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="fleet-preview-pane"):
                    yield Static(id="fleet-preview")
            with Vertical(id=NODES):
                yield Static(id="nodes-bar", classes="bar")
                yield BatchTable(id="nodes", cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="detail-pane"):
                    yield Static("Highlight a node to see its conditions and events.", id="detail")
        yield Input(id="filter", placeholder="regex · !regex · -l key=value,key!=value,!key")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._titles()
        fleet = self._fleet_table()
        self._show_fleet([], force=True)  # the columns
        self._columns = self._wanted_columns()
        table = self._node_table()
        table.on_cursor_moved = self._cursor_moved
        if not table.columns:  # a resize before the mount may have added them
            for name in self._columns:
                table.add_column(column_label(name, self.size.width), key=name)
        self.own_widget("#filter", Input).display = False
        self._show_status()
        self._show_bars()
        fleet.focus()
        if isinstance(self.source, BuildingSource):
            self._build(self.source)
        else:
            self.source.start(on_status=self._on_watch_status)
        self.request_refresh(force=True)

    def on_unmount(self) -> None:
        ui_done()  # a refresh cut short by the exit never ends
        self.source.stop()
        if self._previous is not None:
            self._previous.stop()

    def on_resize(self, event: Resize) -> None:
        if not self.is_running:
            return
        if self._wanted_columns() != self._columns:
            self._reset_table()
        elif self.view == NODES:
            self.request_refresh(force=True)  # the columns' widths follow the screen's
        self._show_status()
        self._show_fleet(self._fleet, force=True)

    # -- which keys show ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that do nothing here are hidden from the footer (False hides; None would
        only dim them), and so is every key that changes something when read-only."""
        node_keys = ("mark", "next_pool", "all_pools", "collect", "logs", "describe")
        if action in node_keys and self.view != NODES:
            return False
        if action == "collect" and self.source.read_only_reason:
            return False
        if action in ("runbooks", "cordon") and (self.read_only or self.view != NODES):
            return False
        if action == "findings":
            return self._diagnosis is not None
        if action == "leave":
            return self.view == NODES or self.row_filter is not None or self._previous is not None
        return True

    def action_leave(self) -> None:
        filter_input = self.own_widget("#filter", Input)
        if filter_input.display:
            filter_input.display = False  # the filter typed so far stays applied
            self._focus_table()
        elif self.row_filter is not None:
            self._set_filter(self.view, None)
        elif self.view == NODES:
            self.pool_filter = None
            self._switch(FLEET)
        elif self._previous is not None:
            self.go_back()
        self.refresh_bindings()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(read_only=self.read_only))

    # -- what the palette offers -------------------------------------------------------------

    def pool_names(self) -> list[str]:
        """Pools with GPU nodes (a pool of CPU nodes is never offered)."""
        return [r.pool for r in self._fleet] or list(self._pools)

    def node_names(self) -> list[str]:
        """GPU nodes only, as the tables show them."""
        return list(self._gpu_names)

    def context_names(self) -> list[str]:
        if self._connect is None:
            return []
        return [c for c in self._contexts() if c != self.source.context]

    def back_context(self) -> str | None:
        """The cluster a bundle was opened from, to go back to (esc or the palette)."""
        return self._previous.context if self._previous is not None else None

    def runbook_names(self) -> list[str]:
        from mignurse.tui import runbooks

        pinned = self.pinned()
        if pinned is None:
            return []
        return runbooks.runbook_names(pinned[0], self.selection())

    def targets(self) -> list[str]:
        """What `c`, `x` and `R` act on: the marked nodes the cluster still has, else the
        highlighted one (a mark of a node gone since is never all there is)."""
        state = self.source.state
        marked = [n for n in sorted(self.marks) if state.node(n) is not None]
        return marked or [n for n in [self.highlighted_node()] if n and state.node(n) is not None]

    def pinned(self, names: list[str] | None = None) -> tuple[Source, list[str]] | None:
        """The one cluster an action on these nodes (else the targets) goes to: its own
        source (client, shells, runbooks) and the nodes' names there. Across clusters, the
        highlighted node's cluster, or None when the marked nodes are in several (said to
        the operator): an action never spans clusters."""
        keys = self.targets() if names is None else names
        contexts = {split_key(k)[0] for k in keys}
        if len(contexts) > 1:
            self.notify(
                f"The marked nodes are in {len(contexts)} clusters: act on one cluster's "
                "nodes at a time.",
                severity="warning",
                timeout=6,
            )
            return None
        key = keys[0] if keys else (self.highlighted_node() or "")
        source, _ = part_of(self.source, key) if split_key(key)[0] else (self.source, key)
        if source is None:
            return None
        return source, [split_key(k)[1] for k in keys]

    def selection(self, names: list[str] | None = None) -> Selection:
        """The marked nodes, else the highlighted one (or the `names` given), with what the
        app knows about them: what the runbook screens read. Across clusters, as the one
        cluster they are in has them (`pinned`)."""
        keys = self.targets() if names is None else names
        prefix = split_key(keys[0])[0] if keys else ""
        source, _ = part_of(self.source, keys[0]) if prefix else (self.source, "")
        source = source or self.source
        state = source.state
        names = [n for k, n in map(split_key, keys) if k == prefix]
        objects = {n: node for n in names if (node := state.node(n)) is not None}
        findings = local_findings(prefix, self._diagnosis.findings if self._diagnosis else [])
        gpu = [n for k, n in map(split_key, self._gpu_names) if k == prefix]
        return Selection(
            nodes=tuple(n for n in names if n in objects),
            cluster=source.cluster,
            read_only_reason=source.read_only_reason
            or ("--read-only" if self.user_read_only else ""),
            findings=tuple(sorted_findings(findings)),
            node_objects=objects,
            repair=self._repair_state(source, list(objects.values())),
            gpu_nodes=tuple(gpu or state.node_names()),
        )

    def _repair_state(self, source: Source, nodes: list[Any]) -> RepairState | None:
        """Karpenter's node repair for these nodes, as the fleet's REPAIR column reads it
        (None: unknown, or not Karpenter's pool). Settings asked for before the last run
        finished are unknown: that run may have paused or resumed repair, and the runbook's
        own plan reads the gate live."""
        settings = getattr(source, "karpenter_settings", None)
        if not source.karpenter or settings is None or settings.node_repair is None:
            return None
        if getattr(source, "karpenter_read_at", float("inf")) < self._changed_at:
            return None
        if any(node.pool_kind != "nodepool" for node in nodes):
            return None  # a node group's or Auto Mode's repair is not Karpenter's gate
        return RepairState.of_pool("nodepool", settings)

    def start_runbook(self, name: str) -> None:
        from mignurse.tui import runbooks

        pinned = self.pinned()
        if pinned is not None:
            runbooks.start_runbook(self, pinned[0], self.selection(), name)

    def action_runbooks(self) -> None:
        from mignurse.tui import runbooks

        pinned = self.pinned()
        if pinned is not None:
            runbooks.open_picker(self, pinned[0], self.selection())

    def action_cordon(self) -> None:
        from mignurse.tui import runbooks

        pinned = self.pinned()
        if pinned is not None:
            runbooks.cordon_nodes(self, pinned[0], self.selection())

    def action_audit(self) -> None:
        from mignurse.tui.screens.audit import AuditScreen

        self.push_screen(AuditScreen())

    def action_radar(self) -> None:
        """The repair-deadline radar; enter on a row takes its action on that node."""
        from mignurse.tui import runbooks
        from mignurse.tui.screens.radar import RadarScreen

        cannot: dict[str, str] = {}
        if self.source.read_only_reason:
            cannot["collect"] = self.source.read_only_reason
        if self.read_only:
            why = self.source.read_only_reason or "--read-only"
            cannot.update({"pause": why, "cordon": why})

        def act(chosen: tuple[str, str] | None) -> None:
            if chosen is None:
                return
            node, action = chosen
            pinned = self.pinned([node])  # the node's own cluster
            if self.source.state.node(node) is None or pinned is None:
                self.notify(f"{short_name(node)} is gone from the cluster.", timeout=5)
            elif action == "collect":
                self.notify(f"Collecting {short_name(node)}…", timeout=4)
                self._collect_nodes(self.source, [node])
            elif action == "pause":
                runbooks.start_runbook(self, pinned[0], self.selection([node]), "pause-node-repair")
            else:
                runbooks.cordon_nodes(self, pinned[0], self.selection([node]))

        screen = RadarScreen(
            self._refresher.radar,
            self.source.now(),
            judged=self._diagnosis is not None,
            as_of=self.judged_at,
            cannot=cannot,
        )
        self.push_screen(screen, act)

    # -- pagers ----------------------------------------------------------------------------

    def action_findings(self) -> None:
        if self._diagnosis is None:
            return
        title = f"Every finding in {self.source.context}, worst first"
        now = self.source.now()
        if self.judged_at:
            title += f", {as_of_words(now, 'bundle, when collected')}"
        page = findings_page(
            self._diagnosis.findings,
            lambda finding: finding_now(self.source, finding),
            title=title,
            as_of=self.judged_at,
        )
        self.push_screen(PagerScreen([page]))

    def action_describe(self) -> None:
        name = self.highlighted_node()
        if name is None:
            self.notify("Highlight a node to describe it.", timeout=4)
            return
        renderable = self._detail_renderable(name, full=True)
        self.push_screen(PagerScreen([describe_page(name, renderable, self.size.width - 2)]))

    def action_logs(self) -> None:
        name = self.highlighted_node()
        if name is None:
            self.notify("Highlight a node to read its journals.", timeout=4)
            return
        evidence = self.source.evidence(name)
        if evidence is None or not evidence.journals:
            how = (
                "the bundle has none for it"
                if self.source.read_only_reason
                else "c collects them, then l shows them"
            )
            self.notify(f"No journals of {short_name(name)} yet: {how}.", timeout=6)
            return
        pages = journal_pages(evidence, self._findings_about(name))
        first = next((i for i, page in enumerate(pages) if page.marks), 0)
        self.push_screen(PagerScreen(pages, start=first, at_mark=True))

    # -- acting on nodes ------------------------------------------------------------------

    def cluster_changed(self) -> None:
        """A runbook changed the cluster: judge it again now, and hold what was read before
        as stale until then."""
        self._changed_at = time.monotonic()
        self.action_refresh_now()

    def action_refresh_now(self) -> None:
        self._refresher.diagnose_soon()
        self.request_refresh(force=True)

    def action_mark(self) -> None:
        name = self._highlighted_name()
        if not name or self.source.state.node(name) is None:
            return
        marked = name not in self.marks
        self.marks = self.marks | {name} if marked else self.marks - {name}
        table = self._node_table()
        table.update_cell(name, "M", "*" if marked else "")
        table.action_cursor_down()

    def action_collect(self) -> None:
        """Collect the marked nodes (else the highlighted one) into one bundle, now."""
        names = self.targets()
        if not names:
            self.notify("Highlight or mark (space) a node to collect it.", timeout=4)
            return
        if self.pinned(names) is None:
            return  # in several clusters: a bundle is one cluster's
        self.notify(f"Collecting {len(names)} node(s)…", timeout=4)
        self._collect_nodes(self.source, names)

    @work(thread=True, group="collect", exit_on_error=False)
    def _collect_nodes(self, source: Source, names: list[str]) -> None:
        done: list[str] = []

        def progress(node: str, state: str) -> None:
            if not state.startswith("collecting"):
                done.append(node)
                text = f"{len(done)}/{len(names)} {short_name(node)}: {state}"
                self.post_message(Notice(text, title="collect"))

        try:
            out, manifest = source.collect_nodes(names, progress)
        except Exception as exc:  # noqa: BLE001 - shown in the app, never a crash
            self.post_message(Notice(f"Collecting failed: {exc}", severity="error"))
            return
        failed = {n: o for n, o in manifest["nodes"].items() if not o.get("ok")}
        if not failed:
            message, severity = f"Bundle written: {out} (l shows its journals)", "information"
        else:
            why = "; ".join(
                f"{short_name(n)}: {o.get('error') or '; '.join(o.get('problems') or [])}"
                for n, o in failed.items()
            )
            message, severity = f"Bundle {out} lacks {len(failed)} node(s): {why}", "warning"
        self.post_message(Notice(message, severity=severity))


def make_app(
    source: Source,
    *,
    read_only: bool = False,
    connect: Callable[[str], Source] | None = None,
    contexts: Callable[[], list[str]] | None = None,
    light: bool = False,
) -> MigNurseApp:
    """The one way to build the app: the CLI, the demo and the tests all come through here."""
    return MigNurseApp(source, read_only=read_only, connect=connect, contexts=contexts, light=light)
