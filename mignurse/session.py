"""A session's data: a live cluster (watches, history recorder, auto-collect, diagnosis),
an opened bundle, or a simulated cluster still being built (the demo). The app is its face,
and `mignurse watch` shares its recording (`Recording`); nothing here imports a terminal
library.

All offer the same few things to the app (`Source`): a `ClusterState`, a clock, `assess()` (the
diagnosis and the fleet view's rows, called off the UI thread), `diagnosis_input()` (what a
diagnosis judges now, and what it still lacks while the cluster is listed: the app judges
the first page of nodes and the history before the rest arrive), the node's pods and
collected evidence, and collection. A bundle is read-only: `read_only_reason` says so and
the app hides every key that would change something.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from mignurse.cluster.client import DEPLOYMENTS, NODES, ClusterClient, ClusterError
from mignurse.cluster.dra import load_dra, load_gpu_plugin_pods
from mignurse.cluster.history import HistoryError, HistoryRecorder, HistoryStore, run_recorder
from mignurse.cluster.load import KARPENTER_ABSENT_NOTICE, karpenter_available, node_pods
from mignurse.cluster.snapshot import ClusterState, Snapshot
from mignurse.cluster.watcher import ClusterWatcher, ResourceStatus
from mignurse.collect.access import Access, ShellFor
from mignurse.collect.auto import AutoCollector
from mignurse.collect.events import CollectEvent
from mignurse.collect.request import CollectRequest, run_collect
from mignurse.collect.transports import shell_factory
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.engine import Diagnosis, diagnose
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings, NodeEvidence
from mignurse.diagnose.sources import (
    Gathered,
    find_karpenter_deployment,
    karpenter_settings,
    load_offline,
    read_daemonsets,
    read_history,
    read_operator,
)
from mignurse.fleetview import PoolRow, fleet_rows
from mignurse.model import GpuPluginPod, Node, Pod

FIRST_PAGE = 500  # nodes shown (counted "so far") while the whole list is still coming
FIRST_PAGE_LEAST = 50  # across clusters the first pages share FIRST_PAGE, this many each at least
# How much of the cluster a diagnosis would judge now (`judge_stage`): a higher stage is a
# fuller input, judged again at once.
NOTHING_YET, FIRST_PAGE_LISTED, NODES_LISTED, ALL_LISTED = range(4)


class Source(Protocol):
    """What the app reads: `LiveSource` (a cluster), `BundleSource` (a bundle) or
    `BuildingSource` (the demo's cluster, still being built)."""

    state: ClusterState
    simulated: str | None
    karpenter: bool
    collect_reports: list[str]
    last_history: History
    read_only_reason: str
    bundle_dir: Path  # where `c` writes bundles

    @property
    def context(self) -> str: ...
    @property
    def cluster(self) -> str: ...
    def now(self) -> Any: ...
    def start(self, on_status: Callable[[ResourceStatus], None]) -> None: ...
    def synced(self) -> bool: ...
    def listed(self) -> bool: ...
    def early_snapshot(self) -> Snapshot | None: ...
    def judge_stage(self) -> int: ...
    def diagnosis_input(self) -> tuple[DiagnosisInput, str]: ...
    def assess(self) -> tuple[Diagnosis, list[PoolRow]]: ...
    def evidence(self, name: str) -> NodeEvidence | None: ...
    def evidence_only(self) -> list[NodeEvidence]: ...
    def pods(self, name: str) -> list[Pod]: ...
    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]: ...
    def auto_tick(self) -> None: ...
    def stop(self) -> None: ...


class Recording:
    """What a live session keeps as it watches a cluster: the history of its lifecycles,
    condition flips and events, and auto-collect (each node collected as its repair clock
    starts, before Karpenter deletes it).

    `mignurse watch` runs it in its own thread until told to stop (`run`); the app records
    in the background what its own watches see (`record`) for as long as it lives. `close`
    ends what was opened: running collections finish their bundles, the recorder writes
    what it holds, the history file closes.
    """

    def __init__(self, client: ClusterClient, *, clock: Callable[[], datetime]) -> None:
        self.client = client
        self.clock = clock  # the cluster's (or the demo's): recorded times meet the API's own
        self.history: HistoryStore | None = None
        self._recorder: HistoryRecorder | None = None
        self._collector: AutoCollector | None = None
        self._sandboxes: tempfile.TemporaryDirectory[str] | None = None

    def open_history(self, path: Path, *, shared: bool = False) -> HistoryStore:
        """The history file, as its one writer. `shared`: read-only while another process
        (a running `mignurse watch`) writes it; else that is WriterBusy, naming the other."""
        self.history = HistoryStore.open_writer(path) if shared else HistoryStore(path)
        return self.history

    def collect_into(
        self,
        folder: Path,
        *,
        access: Access,
        simulated: bool,
        report: Callable[[str], None],
        stop_now: threading.Event | None = None,
        stop_now_words: str = "",
    ) -> None:
        """Auto-collect each node under a repair clock into `folder`: over the simulator's
        sandboxes, SSM with a bucket, else SSH. `report` gets its lines; `stop_now` and its
        words: how the face ends running collections at once (`AutoCollector`)."""
        self._sandboxes = tempfile.TemporaryDirectory(
            prefix="mignurse-sandboxes-", ignore_cleanup_errors=True
        )
        self._collector = AutoCollector(
            self.client,
            out_dir=folder,
            shell_for=shell_factory(
                self.client,
                access,
                sandboxes=Path(self._sandboxes.name),
                simulated=simulated,
                collecting=True,
            ),
            clock=self.clock,
            report=report,
            stop_now=stop_now,
            stop_now_words=stop_now_words,
        )

    def record(self, state: ClusterState) -> None:
        """Record, on a writer thread, what `state` sees (watches kept elsewhere fill it);
        nothing when the history is read-only (another process records it)."""
        if self.history is None or self.history.readonly:
            return
        self._recorder = HistoryRecorder(self.history, self.client.info.context, clock=self.clock)
        state.subscribe(self._recorder.listener)
        self._recorder.start()

    def tick(self, state: ClusterState) -> None:
        """Auto-collect looks at the listed state: nodes whose repair clock started."""
        if self._collector is not None:
            self._collector.tick(state)

    def run(
        self,
        *,
        karpenter: bool,
        stop: threading.Event,
        on_progress: Callable[[str], None],
        progress_every: float,
    ) -> None:
        """List, watch and record the cluster in this thread until `stop` is set, with
        auto-collect when it is on (the history must be open: `open_history`)."""
        assert self.history is not None
        run_recorder(
            self.client,
            self.history,
            context=self.client.info.context,
            karpenter=karpenter,
            stop=stop,
            on_progress=on_progress,
            progress_every=progress_every,
            on_tick=self.tick if self._collector is not None else None,
        )

    def close(self) -> None:
        if self._collector is not None:
            self._collector.close()  # running collections finish their bundles
        if self._sandboxes is not None:
            self._sandboxes.cleanup()
        if self._recorder is not None:
            self._recorder.stop()
        if self.history is not None:
            self.history.close()


RETRY_FIRST_SECONDS = 5.0  # a cluster that failed is tried again after this, then twice as long
RETRY_MOST_SECONDS = 300.0  # … up to this: a cluster down for hours is not hammered


class RecordingLoop:
    """One cluster of a `mignurse watch` that records several, on its own thread (`run`):
    connect, open its history (`start`: the face opens it and turns auto-collect on), record
    until `stop` is set. A cluster that cannot be connected, or whose recording ends in an
    error, is reported (`on_failure`, the face says it once per reason) and tried again,
    later each time, until stopped: it never stops the others. Watches that break while
    recording are retried inside the recorder, as for one context.

    `failure`: what the cluster's last attempt ended in, None while it records (the face's
    exit code is the worst of these when it stops)."""

    def __init__(
        self,
        context: str,
        *,
        connect: Callable[[str], ClusterClient],
        start: Callable[[Recording], None],
        stop: threading.Event,
        on_progress: Callable[[str], None],
        on_failure: Callable[[BaseException, float], None],
        progress_every: float,
    ) -> None:
        self.context = context
        self.connect = connect
        self.start = start
        self.stop = stop
        self.on_progress = on_progress
        self.on_failure = on_failure
        self.progress_every = progress_every
        self.failure: BaseException | None = None

    def run(self) -> None:
        delay = RETRY_FIRST_SECONDS
        while not self.stop.is_set():
            if self._attempt():
                delay = RETRY_FIRST_SECONDS  # it recorded: a later failure starts over
            if self.stop.is_set():
                return
            assert self.failure is not None
            self.on_failure(self.failure, delay)
            self.stop.wait(delay)
            delay = min(delay * 2, RETRY_MOST_SECONDS)

    def _attempt(self) -> bool:
        """Connect and record until stopped (True once it recorded) or until it fails
        (`failure` says why)."""
        recorded = False
        try:
            client = self.connect(self.context)
        except Exception as exc:  # noqa: BLE001 - reported and retried; the others go on
            self.failure = exc
            return recorded
        recording = Recording(client, clock=client.server_now)
        try:
            karpenter = karpenter_available(client)
            self.start(recording)
            self.failure, recorded = None, True
            if not karpenter:
                self.on_progress(f"note: {KARPENTER_ABSENT_NOTICE}")
            recording.run(
                karpenter=karpenter,
                stop=self.stop,
                on_progress=self.on_progress,
                progress_every=self.progress_every,
            )
        except Exception as exc:  # noqa: BLE001 - reported and retried; the others go on
            self.failure = exc
        finally:
            recording.close()  # running collections finish their bundles first
            client.close()
        return recorded


class LiveSource:
    """A cluster reached through the real client, kept current by watches."""

    read_only_reason = ""

    def __init__(
        self,
        client: ClusterClient,
        *,
        simulated: str | None = None,
        clock: Callable[[], datetime] | None = None,
        history_path: Path | None = None,
        bundle_dir: Path | None = None,
        auto_collect: Path | None = None,
        access: Access | None = None,
    ) -> None:
        self.client = client
        self.state = ClusterState()
        # A simulated cluster (the demo's, or one `mignurse sim serve` serves): its nodes are
        # reached through the simulator's sandboxes, as the command line reaches them.
        self.simulated = simulated
        self.simulated_clock = clock is not None  # the demo's: its run records use it too
        if clock is not None:
            client.use_clock(clock)  # one clock: bundles, runbook records and the screen agree
        self._clock = clock or client.server_now
        self._early: Snapshot | None = None  # the first page of nodes, until all are listed
        self._evidence: dict[str, NodeEvidence] = {}  # from bundles collected in this session
        self._plugin_pods: tuple[GpuPluginPod, ...] = ()  # read again with each assessment
        self._daemonsets: tuple[DaemonSetInfo, ...] | None = None  # likewise; None: not read
        # likewise (the GPU operator's settings, and the ConfigMaps its mig-manager reads)
        self._cluster_policy: dict[str, Any] | None = None
        self._mig_configmaps: tuple[dict[str, Any], ...] | None = ()
        self.karpenter = False
        self.karpenter_settings: KarpenterSettings | None = None
        self._karpenter_ref: tuple[str, str] | None = None  # (namespace, name) once found
        self.karpenter_read_at = 0.0  # monotonic: when the settings held were asked for
        self.dra_version = ""  # the resource.k8s.io version watched; "" none
        self.notices: list[str] = []
        self.watcher: ClusterWatcher | None = None
        self._stopping = threading.Lock()
        self._stopped = False
        self.history_path = history_path
        self.bundle_dir = bundle_dir or Path.cwd()
        self.access = access or Access()  # how `c`, auto-collect and runbooks reach nodes and AWS
        self.auto_collect = auto_collect  # a folder: collect nodes as their repair clock starts
        self.recording = Recording(client, clock=self.now)  # the history, auto-collect
        self.collect_reports: list[str] = []  # the app shows and clears these
        self.last_history = History()
        self._checked = False

    @property
    def context(self) -> str:
        return self.client.info.context

    @property
    def cluster(self) -> str:
        return self.client.info.cluster

    def now(self) -> datetime:
        return self._clock()

    def check(self) -> None:
        """One small request, so a dead endpoint or an RBAC refusal fails before any screen."""
        next(self.client.list_pages(NODES, limit=1))
        self._checked = True
        self.karpenter = karpenter_available(self.client)
        self.state.karpenter = self.karpenter
        if not self.karpenter:
            self.notices.append(KARPENTER_ABSENT_NOTICE)
        else:
            self.karpenter_read_at = time.monotonic()
            self.karpenter_settings = karpenter_settings(self.client, self.notices)
        self._read_dra(first=True)

    def _read_dra(self, *, first: bool = False) -> None:
        """ResourceClaims and the DRA driver's nodes, read again with each assessment (the
        ResourceSlices are watched); the first read says in one notice what RBAC refuses."""
        if first:
            dra = load_dra(self.client)
            self.dra_version = dra.version if dra.slices_read else ""
            if dra.notice:
                self.notices.append(dra.notice)
        elif self.dra_version:
            try:
                dra = load_dra(self.client)
            except ClusterError:
                return  # the last good reading stays
        else:
            return
        self.state.set_dra_usage(dra.claims, dra.plugin_nodes)

    def start(
        self,
        on_status: Callable[[ResourceStatus], None],
        *,
        watch_after_first_page: bool = False,
        first_page: int | None = None,
    ) -> None:
        """The watches begun, and the first page of nodes (`first_page` of them, else
        FIRST_PAGE) asked for before anything else: it is what the first screen shows.
        `watch_after_first_page`: the watches only once that page is in (or failed), on its
        thread: where several clusters start at once, each one's first page then never waits
        behind the others' whole lists."""
        if not self._checked:
            self.check()

        def watch() -> None:
            with self._stopping:
                if self._stopped:
                    return
                self.watcher = ClusterWatcher(
                    self.client,
                    self.state,
                    karpenter=self.karpenter,
                    on_status=on_status,
                    dra_version=self.dra_version,
                ).start()

        def first_page_then_watch() -> None:
            self._first_page(FIRST_PAGE if first_page is None else first_page)
            if watch_after_first_page:
                watch()

        threading.Thread(target=first_page_then_watch, name="first-page", daemon=True).start()
        if self.history_path is not None:
            self._open_history(self.history_path)
        if self.auto_collect is not None:
            self.recording.collect_into(
                self.auto_collect,
                access=self.access,
                simulated=bool(self.simulated),
                report=self.collect_reports.append,
            )
        if not watch_after_first_page:
            watch()

    def _first_page(self, limit: int) -> None:
        """The first page of nodes, so the pools show while thousands more are listed."""
        with contextlib.suppress(ClusterError, StopIteration):
            items, _version = next(self.client.list_pages(NODES, limit=limit))
            nodes = [Node.from_api(raw) for raw in items]
            if not self.listed():
                self._early = Snapshot(nodes={n.name: n for n in nodes}, karpenter=self.karpenter)

    def _open_history(self, path: Path) -> None:
        """Record what the app sees, unless `mignurse watch` already does (then only read)."""
        try:
            self.recording.open_history(path, shared=True)
        except HistoryError as exc:
            self.notices.append(f"history not used: {exc}")
            return
        self.recording.record(self.state)

    def synced(self) -> bool:
        """Whether every watch has listed once (judging a half-listed cluster would
        report "no findings" that are not true)."""
        return self.watcher is not None and self.watcher.synced()

    def listed(self) -> bool:
        """Whether the nodes have been listed in full (the counts are true)."""
        watcher = self.watcher
        return watcher is not None and watcher.status["nodes"].synced

    def early_snapshot(self) -> Snapshot | None:
        """The first page of nodes while the full list is still coming, else None."""
        return None if self.listed() else self._early

    def judge_stage(self) -> int:
        """How much a diagnosis would judge now: nothing yet, the first page of nodes,
        every node (other watches still listing), or everything listed."""
        if self.synced():
            return ALL_LISTED
        if self.listed():
            return NODES_LISTED
        return FIRST_PAGE_LISTED if self._early is not None else NOTHING_YET

    def diagnosis_input(self) -> tuple[DiagnosisInput, str]:
        """What a diagnosis judges now, and what that input lacks ("" when it is whole:
        every watch has listed once). Before then it is the nodes listed so far (the first
        page while the rest come), the history recorded before this start, and the
        settings read at `check`; the API is asked again only for a whole input."""
        now = self.now()
        history = History()
        if self.recording.history is not None:
            history = read_history(self.recording.history, self.context, now)
            # the detail pane's timeline reads it too, one node at a time (its index built
            # here, off the UI thread)
            self.last_history = history.indexed()
        stage = self.judge_stage()
        if stage == ALL_LISTED:
            self._reread()
            snapshot = self.state.snapshot(taken_at=now)
            lacks = ""
        elif stage == NODES_LISTED:
            snapshot = self.state.snapshot(taken_at=now)
            lacks = f"every node; {self._still_listing()} still listing"
        else:
            early = self._early
            snapshot = early if early is not None else Snapshot(nodes={}, karpenter=self.karpenter)
            listing = self._still_listing()
            lacks = f"the first {len(snapshot.nodes):,} nodes; {listing} still listing"
        inp = DiagnosisInput(
            snapshot=snapshot,
            now=now,
            history=history,
            node_evidence=dict(self._evidence),  # what `c` collected in this session
            karpenter=self.karpenter_settings,
            daemonsets=self._daemonsets,
            gpu_plugin_pods=self._plugin_pods,
            cluster_policy=self._cluster_policy,
            mig_configmaps=self._mig_configmaps,
        )
        return inp, lacks

    def _still_listing(self) -> str:
        """The watched resources not listed yet, in words ("the other nodes, events")."""
        watcher = self.watcher
        if watcher is None:
            return "every resource"
        waiting = [
            "the other nodes" if plural == NODES.plural else plural
            for plural, status in watcher.status.items()
            if not status.synced
        ]
        return ", ".join(waiting) or "nothing"

    def _reread(self) -> None:
        """What the rules read besides the watched state, asked again for each whole
        diagnosis. The Karpenter Deployment is read again: a pause shows up within seconds."""
        if self.karpenter:
            asked = time.monotonic()
            settings = self._reread_karpenter()
            if settings is not None:
                self.karpenter_settings, self.karpenter_read_at = settings, asked
        self._read_dra()
        with contextlib.suppress(ClusterError):  # the last good reading stays
            self._plugin_pods = load_gpu_plugin_pods(self.client)
        daemonsets = read_daemonsets(self.client, [])  # a refusal keeps the last good reading
        if daemonsets is not None:
            self._daemonsets = daemonsets
        refused: list[str] = []
        policy, configmaps = read_operator(self.client, refused)
        if not refused:  # read, or no GPU operator: a refusal keeps the last good reading
            self._cluster_policy, self._mig_configmaps = policy, configmaps

    def assess(self) -> tuple[Diagnosis, list[PoolRow]]:
        """Every rule, and the fleet view's rows, over what the app holds now (off the UI
        thread)."""
        inp, _lacks = self.diagnosis_input()
        diagnosis = diagnose(inp)
        return diagnosis, fleet_rows(inp, diagnosis)

    def _reread_karpenter(self) -> KarpenterSettings | None:
        """The Deployment found once (a label search), then one GET of it per diagnosis."""
        try:
            if self._karpenter_ref is None:
                raw = find_karpenter_deployment(self.client)
            else:
                raw = self.client.get(DEPLOYMENTS, self._karpenter_ref[1], self._karpenter_ref[0])
        except ClusterError:
            self._karpenter_ref = None  # gone or moved: search again next time
            return None
        if raw is None:
            return None
        meta = raw.get("metadata") or {}
        self._karpenter_ref = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        return KarpenterSettings.from_deployment(raw)

    def evidence(self, name: str) -> NodeEvidence | None:
        """Files collected on the node by `c` in this session (None before)."""
        return self._evidence.get(name)

    def evidence_only(self) -> list[NodeEvidence]:
        return []

    def pods(self, name: str) -> list[Pod]:
        return node_pods(self.client, name)

    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]:
        """The nodes' bundle into `bundle_dir`, over the simulator's sandboxes in the demo,
        else SSH (as `mignurse collect --transport ssh`). Runs off the UI thread."""
        nodes = [n for n in (self.state.node(name) for name in names) if n is not None]
        if not nodes:
            raise ValueError(f"{', '.join(names)}: gone from the cluster")
        now = self.now()

        def told(event: CollectEvent) -> None:
            if event.node:
                progress(event.node, event.text)

        collected = run_collect(
            CollectRequest(
                self.client,
                out=self.bundle_dir,
                nodes=nodes,
                snapshot=self.state.snapshot(taken_at=now),
                access=self.access,
                simulated=bool(self.simulated),
                label=nodes[0].name.split(".", 1)[0] if len(nodes) == 1 else f"{len(nodes)}-nodes",
                collected_at=now,  # the moment in the file's name, on the cluster's clock
            ),
            told,
        )
        out, manifest = collected.out, collected.manifest
        assert out is not None and manifest is not None  # the nodes were given
        with contextlib.suppress(Exception):  # the bundle is written; reading it back is a bonus
            self._evidence.update(load_offline(out).node_evidence)
        return out, manifest

    def shells(self, sandboxes: Path, *, collecting: bool = False) -> ShellFor:
        """One shell per node, over the transport `mignurse collect` would take to this
        cluster (`--transport auto`: the simulator's sandboxes, built under `sandboxes`, on a
        simulated cluster): `c`, `l` and every runbook step that runs on a node use it;
        `collecting` (`c`): a node none of them reaches is captured by the node monitoring
        agent's NodeDiagnostic, as `mignurse collect` does.
        AccessError: the nodes cannot be reached as asked."""
        return shell_factory(
            self.client,
            self.access,
            sandboxes=sandboxes,
            simulated=bool(self.simulated),
            collecting=collecting,
        )

    def auto_tick(self) -> None:
        """Called from the refresh worker once the state is listed."""
        self.recording.tick(self.state)

    def stop(self) -> None:
        with self._stopping:  # a watch begun after its first page begins no more
            self._stopped = True
        if self.watcher is not None:
            self.watcher.stop()
        self.recording.close()
        self.client.close()


class BundleSource:
    """A support bundle (or a folder of kubectl dumps) shown by the same app, read-only."""

    read_only_reason = "a bundle is read-only"
    client: ClusterClient | None = None
    watcher: ClusterWatcher | None = None
    simulated: str | None = None

    def __init__(self, path: Path) -> None:
        self.path = path
        self.gathered: Gathered = load_offline(path)  # SourceError: the caller says why
        snapshot = self.gathered.snapshot
        self._now = self.gathered.judge_time()
        if self._now is None:
            raise ValueError(f"{path}: no time in it to judge at (empty bundle?)")
        self.state = ClusterState()
        self.state.karpenter = snapshot.karpenter
        self.state.replace("nodes", list(snapshot.nodes.values()))
        self.state.replace("nodeclaims", list(snapshot.nodeclaims.values()))
        self.state.replace("nodepools", list(snapshot.nodepools.values()))
        self.state.replace("events", list(snapshot.events))
        self.state.replace("resourceslices", list(snapshot.resource_slices))
        self.state.set_dra_usage(snapshot.resource_claims, snapshot.dra_plugin_nodes)
        self.karpenter = snapshot.karpenter
        self.karpenter_settings = self.gathered.karpenter
        self.notices = list(self.gathered.notices)
        self.collect_reports: list[str] = []
        self.last_history = self.gathered.history
        self.bundle_dir = Path.cwd()

    @property
    def context(self) -> str:
        return self.gathered.context or self.path.name

    @property
    def cluster(self) -> str:
        return f"bundle {self.path.name}"

    def now(self) -> datetime:
        assert self._now is not None
        return self._now

    def listed(self) -> bool:
        return True

    def early_snapshot(self) -> Snapshot | None:
        return None

    def check(self) -> None:
        return None

    def start(self, on_status: Callable[[ResourceStatus], None]) -> None:
        return None

    def synced(self) -> bool:
        return True

    def judge_stage(self) -> int:
        return ALL_LISTED

    def diagnosis_input(self) -> tuple[DiagnosisInput, str]:
        return self.gathered.to_input(self.now()), ""  # what `diagnose --from` judges, all of it

    def assess(self) -> tuple[Diagnosis, list[PoolRow]]:
        inp, _lacks = self.diagnosis_input()
        diagnosis = diagnose(inp)
        return diagnosis, fleet_rows(inp, diagnosis)

    def evidence(self, name: str) -> NodeEvidence | None:
        return self.gathered.node_evidence.get(name)

    def evidence_only(self) -> list[NodeEvidence]:
        """Nodes the bundle has files of but no Node object for (another tool's node bundle)."""
        nodes = self.gathered.snapshot.nodes
        return [
            e
            for name, e in sorted(self.gathered.node_evidence.items())
            if name not in nodes and e.layout != "mignurse"
        ]

    def pods(self, name: str) -> list[Pod]:
        return [p for p in self.gathered.pods if p.node_name == name]

    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]:
        raise ValueError("this is a bundle: its nodes were collected already")

    def auto_tick(self) -> None:
        return None

    def stop(self) -> None:
        return None


class BuildingSource:
    """A cluster still being built (the demo's simulator takes seconds at scale): the app
    shows for how long, then swaps in the source that `build` returns (in a thread)."""

    read_only_reason = ""
    karpenter = False
    client: ClusterClient | None = None

    def __init__(self, build: Callable[[], Any], *, what: str, simulated: str) -> None:
        self.build = build
        self.what = what  # "simulated cluster scale-5000 (5,000 GPU nodes, …)"
        self.simulated: str | None = simulated
        self.state = ClusterState()
        self.collect_reports: list[str] = []
        self.last_history = History()
        self.bundle_dir = Path.cwd()
        self.failed = ""  # why the build failed, once it has
        self._started = time.monotonic()

    @property
    def waiting(self) -> str:
        """What the status line says while the cluster is built (or why it never will be)."""
        if self.failed:
            return f"the {self.what} could not start: {self.failed}"
        return f"building the {self.what}: {time.monotonic() - self._started:.0f} s…"

    @property
    def context(self) -> str:
        return "starting"

    @property
    def cluster(self) -> str:
        return self.what

    def now(self) -> datetime:
        return datetime.now(UTC)

    def start(self, on_status: Callable[[ResourceStatus], None]) -> None:
        return None

    def synced(self) -> bool:
        return False

    def listed(self) -> bool:
        return False

    def early_snapshot(self) -> Snapshot | None:
        return None

    def judge_stage(self) -> int:
        return NOTHING_YET

    def diagnosis_input(self) -> tuple[DiagnosisInput, str]:
        raise ValueError("the cluster is still being built")

    def assess(self) -> tuple[Diagnosis, list[PoolRow]]:
        raise ValueError("the cluster is still being built")

    def evidence(self, name: str) -> NodeEvidence | None:
        return None

    def evidence_only(self) -> list[NodeEvidence]:
        return []

    def pods(self, name: str) -> list[Pod]:
        return []

    def collect_nodes(
        self, names: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]:
        raise ValueError("the cluster is still being built")

    def auto_tick(self) -> None:
        return None

    def stop(self) -> None:
        return None


# -- several clusters ---------------------------------------------------------------------

RETRY_SECONDS = 30.0  # a cluster that failed to start is tried again this often
SEP = "/"  # a key across clusters: "CONTEXT/NAME" (node and pool names never hold a "/")


def qualified(context: str, name: str) -> str:
    """A node's (or pool's) key in a view across clusters; "" is the one-cluster view's."""
    return f"{context}{SEP}{name}" if context else name


def split_key(key: str) -> tuple[str, str]:
    """(context, name) of a key; ("", key) for a one-cluster key."""
    context, sep, name = key.rpartition(SEP)
    return (context, name) if sep else ("", key)


def parts(source: Any) -> list[tuple[str, Any]]:
    """The per-cluster sources a face reads, each with the prefix of its keys: the connected
    members of a `FleetSource`, or the one source itself with no prefix (the one-element
    list: one cluster goes through the same loop, its keys unchanged)."""
    if isinstance(source, FleetSource):
        return source.parts()
    return [("", source)]


def finding_now(source: Any, finding: Any) -> datetime:
    """The moment `finding` is judged at: its own cluster's now (each bundle of several was
    collected at its own time, each cluster keeps its own clock), else the source's."""
    key = finding.nodepool or next(iter(finding.nodes), "")
    part = part_of(source, key)[0] if key else None
    return (part if part is not None else source).now()


def part_of(source: Any, key: str) -> tuple[Any, str]:
    """The per-cluster source that holds `key`, and the name there (a plain source: itself)."""
    if isinstance(source, FleetSource):
        return source.part_of(key)
    return source, key


class Member:
    """One cluster of a `FleetSource`: its `fleet.Cluster` record (status, the line that
    says why it is not connected, the login command, version and skew), its source once it
    started, and its watches' state ("stale since T" when one broke)."""

    def __init__(self, cluster: Any, source: Any | None = None) -> None:
        self.cluster = cluster
        self.source = source
        self.statuses: dict[str, ResourceStatus] = {}
        self.tried_at = time.monotonic()
        self.trying = False  # a try to start it is under way

    @property
    def context(self) -> str:
        return str(self.cluster.context)

    def on_status(self, status: ResourceStatus) -> None:
        self.statuses[status.plural] = status  # a dict write from a watch thread

    def stale(self) -> ResourceStatus | None:
        """A watch that broke and has not recovered, if any."""
        return next((s for s in list(self.statuses.values()) if s.error), None)


class FleetState:
    """What the app asks of `source.state` across clusters, each key routed to its cluster."""

    def __init__(self, fleet: FleetSource) -> None:
        self._fleet = fleet
        self.karpenter = False

    def _at(self, key: str) -> tuple[ClusterState | None, str]:
        part, name = self._fleet.part_of(key)
        return (part.state if part is not None else None), name

    def node(self, key: str) -> Node | None:
        state, name = self._at(key)
        return state.node(name) if state is not None else None

    def nodeclaim(self, key: str) -> Any:
        state, name = self._at(key)
        return state.nodeclaim(name) if state is not None else None

    def node_names(self) -> list[str]:
        return sorted(
            qualified(prefix, name)
            for prefix, part in self._fleet.parts()
            for name in part.state.node_names()
        )

    def take_changes(self) -> tuple[set[str], bool]:
        dirty: set[str] = set()
        other = False
        for prefix, part in self._fleet.parts():
            names, changed = part.state.take_changes()
            dirty |= {qualified(prefix, n) for n in names}
            other = other or changed
        return dirty, other


class FleetSource:
    """Several clusters (or bundles) in one view: a list of `Member`s, each with its own
    source (watches, history, diagnosis input, clock) once connected. Keys are
    "CONTEXT/NAME"; `part_of` finds a key's cluster, so an action goes to that cluster's
    own client only. A cluster that failed to start is tried again in the background every
    RETRY_SECONDS (`retry`), and its status line follows.

    A live fleet starts with every member pending: `connect` runs in the background
    (`cluster.fleet.run_fleet` with a progress callback), so the screen comes at once and
    each cluster joins as it ends, the slowest never holding the others."""

    client: ClusterClient | None = None
    watcher: ClusterWatcher | None = None
    karpenter_settings: KarpenterSettings | None = None

    def __init__(
        self,
        members: list[Member],
        *,
        connect: Callable[[Callable[[Any], None]], Any] | None = None,
        retry: Callable[[str], Any] | None = None,
        read_only_reason: str = "",
    ) -> None:
        self.members = members
        self._connect = connect  # runs every pending member's start, telling each as it ends
        self._retry = retry  # context → its `fleet.Cluster`, connected (a source) or not
        self.read_only_reason = read_only_reason
        self.state = FleetState(self)
        self.collect_reports: list[str] = []
        self.last_history = History()
        self.bundle_dir = Path.cwd()
        self.notices: list[str] = []
        self._on_status: Callable[[ResourceStatus], None] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        for member in members:
            self._adopt(member)

    def _adopt(self, member: Member) -> None:
        if member.source is not None:
            member.source.collect_reports = self.collect_reports  # shown as they come
            self.notices += [f"{member.context}: {n}" for n in member.source.notices]

    def _join(self, member: Member, cluster: Any) -> None:
        """A member connected since: its source started (its auto-collect reporting into
        the fleet's list), then shown."""
        source = cluster.result
        if self._stop.is_set():
            source.stop()
            return
        source.collect_reports = self.collect_reports
        # the first screen's one page shared: each cluster's first page a part of it
        share = max(FIRST_PAGE_LEAST, FIRST_PAGE // max(1, len(self.members)))
        source.start(on_status=member.on_status, watch_after_first_page=True, first_page=share)
        with self._lock:  # under the lock: `stop` sees this source, or this sees the stop
            stopped = self._stop.is_set()
            if not stopped:
                member.cluster, member.source = cluster, source
                self._adopt(member)
        if stopped:
            source.stop()

    @property
    def context(self) -> str:
        return ", ".join(m.context for m in self.members)

    @property
    def cluster(self) -> str:
        return f"{len(self.members)} clusters"

    @property
    def simulated(self) -> str | None:
        """The simulated clusters' words, joined (None: none is simulated)."""
        said = {part.simulated for _, part in self.parts() if part.simulated}
        return ", ".join(sorted(said)) or None

    @property
    def karpenter(self) -> bool:
        return any(part.karpenter for _, part in self.parts())

    def parts(self) -> list[tuple[str, Any]]:
        with self._lock:
            return [(m.context, m.source) for m in self.members if m.source is not None]

    def member(self, context: str) -> Member | None:
        return next((m for m in self.members if m.context == context), None)

    def part_of(self, key: str) -> tuple[Any, str]:
        context, name = split_key(key)
        member = self.member(context)
        return (member.source if member is not None else None), name

    def now(self) -> datetime:
        """The app's own clock: each cluster's times are judged by that cluster's (`parts`)."""
        for _, part in self.parts():
            return part.now()
        return datetime.now(UTC)

    def start(self, on_status: Callable[[ResourceStatus], None]) -> None:
        self._on_status = on_status
        for member in self.members:
            if member.source is not None:
                member.source.start(on_status=member.on_status)
        connect = self._connect
        if connect is not None:
            threading.Thread(
                target=connect, args=(self._arrived,), name="fleet-connect", daemon=True
            ).start()
        if self._retry is not None:
            threading.Thread(target=self._retrying, name="fleet-retry", daemon=True).start()

    def _arrived(self, cluster: Any) -> None:
        """A pending member's start ended (on the connecting thread): it joins the view, or
        its status line says why not and the retries take it from there."""
        member = next(
            (m for m in self.members if m.source is None and m.context == cluster.context), None
        )
        if member is None:
            return
        member.tried_at = time.monotonic()
        if not cluster.connected:
            member.cluster = cluster
        else:  # each start on a thread of its own: one cluster's start (its history opened,
            # its watches begun, while the others' lists take the interpreter) never holds
            # back the clusters that connected after it
            threading.Thread(
                target=self._join, args=(member, cluster), name="fleet-join", daemon=True
            ).start()

    def _retrying(self) -> None:
        """Each cluster that failed to start, tried again every RETRY_SECONDS (each try in
        a thread of its own: a hung one never holds the others)."""
        while not self._stop.wait(1.0):
            due = [
                m
                for m in self.members
                if m.source is None
                and m.cluster.status  # pending: its first start has not ended
                and not m.trying
                and time.monotonic() - m.tried_at >= RETRY_SECONDS
            ]
            for member in due:
                member.trying = True
                threading.Thread(
                    target=self._try, args=(member,), name="fleet-retry-one", daemon=True
                ).start()

    def _try(self, member: Member) -> None:
        """One try: `retry` answers a `fleet.Cluster` for the context, connected with its
        source as `result`, or how it failed (its status line then says so)."""
        assert self._retry is not None
        try:
            cluster = self._retry(member.context)
            if cluster.connected:  # (a fleet stopped since: `_join` stops it)
                self._join(member, cluster)
            else:
                member.cluster = cluster
        finally:
            member.tried_at = time.monotonic()
            member.trying = False

    def status_lines(self) -> list[tuple[str, str, str]]:
        """Each cluster's status line: (context, its state in words, the rest), the
        clusters in their order."""
        lines = []
        for member in self.members:
            cluster = member.cluster
            if member.source is None and not cluster.status:
                lines.append((member.context, "connecting…", ""))
                continue
            if member.source is None:
                rest = cluster.message
                if cluster.status == "rbac-denied":
                    verb = getattr(cluster.error, "verb", "")
                    resource = getattr(cluster.error, "resource", "")
                    refused = f"cannot {verb} {resource}"
                    if verb and resource and refused not in rest:  # the client's says it
                        rest = f"{refused}: {rest}"
                retry = " (retrying)" if self._retry is not None else ""
                lines.append((member.context, cluster.status_words + retry, rest))
                continue
            stale = member.stale()
            if stale is not None:
                since = stale.stale_since
                when = f"{since.astimezone(UTC):%H:%M:%SZ}" if since else "?"
                lines.append((member.context, f"stale since {when}", str(stale.error)))
                continue
            words = []
            if cluster.version:
                words.append(cluster.version)
            if cluster.clock_skew is not None and abs(cluster.clock_skew) >= 1:
                words.append(skew_words(cluster.clock_skew))
            if member.source.read_only_reason:
                words.append(f"bundle as of {member.source.now():%Y-%m-%d %H:%MZ}")
            elif not member.source.listed():
                words.append("listing…")
            state = "connected" if not member.source.read_only_reason else "opened"
            lines.append((member.context, state, " · ".join(words)))
        return lines

    def synced(self) -> bool:
        return all(part.synced() for _, part in self.parts())

    def listed(self) -> bool:
        return all(part.listed() for _, part in self.parts())

    def early_snapshot(self) -> Snapshot | None:
        return None

    def judge_stage(self) -> int:
        """The least a diagnosis would judge of the clusters that have listed something (one
        still listing, or joining late, never holds the others' diagnosis back)."""
        stages = [stage for _, part in self.parts() if (stage := part.judge_stage())]
        return min(stages, default=NOTHING_YET)

    def diagnosis_input(self) -> tuple[DiagnosisInput, str]:
        raise ValueError("several clusters: each is judged by its own clock (`parts`)")

    def assess(self) -> tuple[Diagnosis, list[PoolRow]]:
        raise ValueError("several clusters: each is judged by its own clock (`parts`)")

    def evidence(self, key: str) -> NodeEvidence | None:
        part, name = self.part_of(key)
        return part.evidence(name) if part is not None else None

    def evidence_only(self) -> list[NodeEvidence]:
        return []  # each part's, read through `parts`

    def pods(self, key: str) -> list[Pod]:
        part, name = self.part_of(key)
        return part.pods(name) if part is not None else []

    def collect_nodes(
        self, keys: list[str], progress: Callable[[str, str], None]
    ) -> tuple[Path, dict[str, Any]]:
        """The nodes' bundle from their one cluster (a bundle is one cluster's)."""
        where = {split_key(k)[0] for k in keys}
        if len(where) > 1:
            raise ValueError(f"the nodes are in {len(where)} clusters: collect one cluster's")
        part, _ = self.part_of(keys[0])
        if part is None:
            raise ValueError(f"{split_key(keys[0])[0]}: not connected")
        return part.collect_nodes([split_key(k)[1] for k in keys], progress)

    def auto_tick(self) -> None:
        return None  # each part's, from the refresh (`parts`)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            sources = [m.source for m in self.members if m.source is not None]
        for source in sources:
            source.stop()


def skew_words(seconds: float) -> str:
    """How far a cluster's clock is from this machine's, as kubectl words an age: "clock 3s
    ahead", "clock 4d behind" (its times are judged by its own clock all the same)."""
    from mignurse.nodeview import format_age

    return f"clock {format_age(abs(seconds))} {'ahead' if seconds > 0 else 'behind'}"
