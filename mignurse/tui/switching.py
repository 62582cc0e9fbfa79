"""Which source the app shows: the demo's cluster once built, another context of the
kubeconfig, an opened bundle, and back from it to the cluster it was opened from.

`SourceSwitching` connects and builds in threads (a connect in a worker, the demo's build
in a daemon thread), and swaps the source on the UI thread when it is ready
(`SourceReady`): the old one stops, or, under an opened bundle, keeps its watches so esc
goes back to a current view.
"""

from __future__ import annotations

import threading
from pathlib import Path

from textual import on, work
from textual.message import Message

from mignurse.session import BuildingSource, BundleSource, Source
from mignurse.tui.appstate import FLEET, NODES, Notice
from mignurse.tui.refreshloop import RefreshLoop


class SourceReady(Message):
    """Another cluster connected, or the demo's cluster built: show it."""

    def __init__(self, source: Source, *, note: str = "") -> None:
        super().__init__()
        self.source = source
        self.note = note


class SourceSwitching(RefreshLoop):
    """Building, connecting, opening a bundle, going back."""

    def _build(self, building: BuildingSource) -> None:
        """The demo's cluster in a thread of its own (a daemon: quitting never waits for
        a 5,000-node build)."""

        def build() -> None:
            try:
                source = building.build()
            except Exception as exc:  # noqa: BLE001 - one line in the app, not a traceback
                building.failed = str(exc) or type(exc).__name__
                self.post_message(Notice(f"the demo could not start: {exc}", severity="error"))
                return
            self.post_message(SourceReady(source))

        threading.Thread(target=build, name="demo-build", daemon=True).start()
        # the seconds spent building count up on the status line until the cluster is shown
        self._build_ticker = self.set_interval(1.0, self._show_status)

    def switch_context(self, context: str) -> None:
        if self._connect is None:
            return
        self.notify(f"Connecting to {context}…", timeout=3)
        self._connect_worker(context)

    @work(thread=True, exclusive=True, group="connect", exit_on_error=False)
    def _connect_worker(self, context: str) -> None:
        assert self._connect is not None
        try:
            source = self._connect(context)
        except Exception as exc:  # noqa: BLE001 - one line in the app, the old view stays
            self.post_message(Notice(f"{context}: {exc}", severity="error"))
            return
        self.post_message(SourceReady(source, note=f"Now showing {source.context}"))

    @on(SourceReady)
    def _source_ready(self, message: SourceReady) -> None:
        if self._build_ticker is not None:
            self._build_ticker.stop()
            self._build_ticker = None
        if self._previous is not None:
            self._previous.stop()
            self._previous = None
        self._swap_source(message.source)
        if message.note:
            self.notify(message.note, timeout=4)

    def open_bundle(self, path: Path) -> None:
        """A bundle in place of the cluster; esc (or the palette) goes back to it."""
        try:
            source = BundleSource(path)
        except Exception as exc:  # noqa: BLE001 - one line in the app, the old view stays
            self.notify(f"{path}: {exc}", severity="error", timeout=10)
            return
        if self.source.read_only_reason:
            self._swap_source(source)  # a bundle in place of a bundle: nothing to go back to
        else:
            if self._previous is not None:
                self._previous.stop()
            self._previous = self.source  # its watches keep it current meanwhile
            self._swap_source(source, stop_old=False)
        self.notify(f"Now showing {path.name} (esc goes back)", timeout=4)

    def go_back(self) -> None:
        """From an opened bundle back to the cluster it was opened from."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        self._swap_source(previous, start=False)
        self.notify(f"Back to {previous.context}", timeout=4)

    def _swap_source(self, source: Source, *, stop_old: bool = True, start: bool = True) -> None:
        """Show another cluster or a bundle in place of this one."""
        old = self.source
        self.source = source
        self.pool_filter = None
        self.filters = {FLEET: None, NODES: None}
        self.marks = frozenset()
        self._reset_state()
        self._pending.clear()
        self._node_table().clear()
        self._fleet_table().clear()
        self._detail().update("Highlight a node to see its details.")
        self._titles()
        if stop_old:
            old.stop()
        if start:
            source.start(on_status=self._on_watch_status)
        self._show_status()
        self._switch(FLEET)
