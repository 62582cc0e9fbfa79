"""The app on scale-5000 (5,000 GPU nodes in 20 NodePools, 100,000 events), headless.

    .venv/bin/python benchmarks/bench_app.py

Measures:
- first paint: from start until the fleet view shows pools (from the first page of nodes,
  before all 5,000 are listed; target < 2 s), and until it shows all 20;
- the first finding on screen (target < 2 s), the first critical one (target < 2 s), and
  the first whole diagnosis: the findings panel streams each rule's findings, critical
  rules first, from the first page of nodes on;
- UI-thread time per refresh: the UI thread's own CPU time from a refresh's result
  arriving to its last row placed (its apply, each chunk of new rows, the table's idle
  pass), while a minute of simulated churn arrives every two seconds,
  on the fleet view, on one pool's nodes (250) and on every pool's nodes (5,000); the
  worst refresh, and the worst single frame (a chunk of the first fill of a view
  included), are held to the target (< 100 ms);
- the longest the UI thread's event loop went without running (a stall, GIL waits included;
  target < 150 ms during refreshes), and the longest garbage collection on the UI thread
  (target < 50 ms during refreshes), from the start too;
- peak RSS (target < 500 MB);
- what the UI thread was running during the longest stalls: another thread samples its
  stack while the event loop is late;
- with `--minutes N`, the last phase's churn goes on for N minutes and the app's RSS and
  the collector's frozen objects are printed each half minute: whether memory grows.
The simulator runs in its own process (this file with `--serve`, advanced through its
stdin), so the RSS is the app's own; both share the machine's CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections as counting
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from figures import figure
from textual.widgets import DataTable

from mignurse.cluster.client import ClusterClient
from mignurse.collect.access import Access
from mignurse.diagnose.findings import CRITICAL
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.appstate import FLEET
from mignurse.tui.refreshloop import ADD_CHUNK
from mignurse.tui.table import BatchTable

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes


@dataclass
class Placed:
    """One refresh as the UI thread placed it."""

    cpu: float = 0.0  # the UI thread's CPU from the result's arrival to its last row placed
    frame: float = 0.0  # the longest single call: one frame's work
    fill: bool = False  # it filled an empty table a chunk per frame (a view's first rows)
    calls: int = 0  # UI-thread calls that placed it (frames, idle passes)
    rows: str = ""  # rows it added, changed and removed


placed: dict[str, list[Placed]] = {}  # per phase
stalls: dict[str, float] = {}  # per phase: the longest event-loop stall
phase = "start"
_current = Placed()
_depth = 0


def _timed(method: Callable[..., Any], *, handler: bool = False) -> Callable[..., Any]:
    """Count the UI thread's CPU time in `method` toward the refresh being placed (the
    outermost call only: the handler calls the first chunk itself)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        global _depth
        if handler:
            changes = args[1]
            _current.fill = len(changes.added) > ADD_CHUNK
            _current.rows = f"+{len(changes.added)} ~{len(changes.changed)} -{len(changes.removed)}"
        _depth += 1
        started = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            _depth -= 1
            if _depth == 0:
                spent = time.thread_time() - started
                _current.cpu += spent
                _current.frame = max(_current.frame, spent)
                _current.calls += 1

    return timed


def _ended(method: Callable[..., Any]) -> Callable[..., Any]:
    def ended(*args: Any, **kwargs: Any) -> Any:
        global _current
        placed.setdefault(phase, []).append(_current)
        _current = Placed()
        return method(*args, **kwargs)

    return ended


gc_pauses: dict[str, float] = {}  # per phase: the longest collection on the UI thread (CPU)
collections: list[tuple[float, str, str, int]] = []  # ms, phase, thread, generation
_gc_started = 0.0


def _gc_timer(stage: str, info: dict[str, int]) -> None:
    global _gc_started
    if stage == "start":
        _gc_started = time.thread_time()
        return
    spent = time.thread_time() - _gc_started
    thread = threading.current_thread()
    collections.append((spent * 1000, phase, thread.name, info["generation"]))
    if thread is threading.main_thread():
        gc_pauses[phase] = max(gc_pauses.get(phase, 0.0), spent)


def instrument() -> None:
    gc.callbacks.append(_gc_timer)
    # `_apply`, not the `Refreshed` handler: Textual dispatches to the function @on saw
    MigNurseApp._apply = _timed(MigNurseApp._apply, handler=True)  # type: ignore[method-assign]
    MigNurseApp._drain = _timed(MigNurseApp._drain)  # type: ignore[method-assign]
    MigNurseApp._refresh_ended = _ended(MigNurseApp._refresh_ended)  # type: ignore[method-assign]
    BatchTable._on_idle = _timed(BatchTable._on_idle)  # type: ignore[method-assign]


def mark(marks: dict[str, float], what: str, seconds: float) -> None:
    marks[what] = seconds
    print(f"  {what}: {seconds:.2f} s", flush=True)


_last_tick = time.perf_counter()
_ticking = False  # the loop's ticks have begun: a gap before them is no stall
LATE_SECONDS = 0.08  # the loop this late: sample what the UI thread runs


@dataclass
class Stall:
    """A stall as the sampler saw it: its length, what the UI thread ran, and where the
    time went (the UI thread's own CPU, the process's other threads', or off the CPU)."""

    ms: float
    phase: str
    frames: list[str]
    ui_cpu_ms: float
    other_threads_ms: float
    busiest: list[tuple[str, float]]  # the other threads that ran most meanwhile, CPU ms


def _thread_clocks() -> dict[int, tuple[str, float]]:
    """Each live thread's name and CPU time so far, by its id (a thread that ends meanwhile
    is left out). By id, not name: the app names a pool thread after the work it runs (the
    refresh, the diagnosis) while it runs it."""
    clocks: dict[int, tuple[str, float]] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:
            continue
        clocks[thread.ident] = (thread.name, cpu)
    return clocks


stall_samples: list[Stall] = []


async def watch_stalls() -> None:
    """The event loop's longest gap between two 10 ms ticks, per phase."""
    global _last_tick, _ticking
    _last_tick = time.perf_counter()
    _ticking = True
    while True:
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        stalls[phase] = max(stalls.get(phase, 0.0), now - _last_tick - 0.01)
        _last_tick = now


def _innermost(frame: Any) -> str:
    """The innermost frame, then the innermost of the app's own code, Textual's and rich's."""
    names: list[str] = []
    while frame is not None and len(names) < 4:
        path = frame.f_code.co_filename
        if not names or "mignurse" in path or "textual" in path or "rich" in path:
            where = Path(path).parent.name + "/" + Path(path).name
            names.append(f"{where}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(names)


def sample_stalls(stop: threading.Event) -> None:
    """Every 10 ms, while the loop is late, the UI thread's stack; each stall's samples
    are kept with its length once the loop ticks again, and with the CPU the UI thread
    and the whole process used meanwhile (a stall with neither was the machine's)."""
    main = threading.main_thread().ident or 0
    ui_clock = time.pthread_getcpuclockid(main)
    # when, UI CPU, process CPU, every thread's name and CPU
    recent: deque[tuple[float, float, float, dict[int, tuple[str, float]]]] = deque(maxlen=200)
    samples: list[str] = []
    began = 0.0
    while not stop.wait(0.01):
        recent.append(
            (
                time.perf_counter(),
                time.clock_gettime(ui_clock),
                time.process_time(),
                _thread_clocks(),
            )
        )
        late = time.perf_counter() - _last_tick
        if _ticking and late > LATE_SECONDS:
            if not samples:
                began = _last_tick
            frame = sys._current_frames().get(main)
            samples.append(_innermost(frame))
        elif samples:
            before = next((r for r in reversed(recent) if r[0] <= began), recent[0])
            _, ui_now, process_now, threads_now = recent[-1]
            ui_ms = (ui_now - before[1]) * 1000
            ran: dict[str, float] = {}
            for ident, (name, cpu) in threads_now.items():
                if ident not in (main, threading.get_ident()):
                    earlier = before[3].get(ident, (name, 0.0))[1]
                    ran[name] = ran.get(name, 0.0) + (cpu - earlier) * 1000
            busiest = sorted(ran.items(), key=lambda item: -item[1])[:3]
            stall_samples.append(
                Stall(
                    (_last_tick - began) * 1000,
                    phase,
                    samples,
                    ui_ms,
                    (process_now - before[2]) * 1000 - ui_ms,
                    busiest,
                )
            )
            samples = []


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class RemoteSim:
    """The simulator in a child process: `advance` is a line on its stdin."""

    def __init__(self, kubeconfig: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(kubeconfig)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "READY":
            raise SystemExit("the simulator did not start")

    def advance(self, seconds: float) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{seconds}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()  # "ok" once it has advanced

    def now(self) -> Any:
        raise NotImplementedError  # the app uses the API server's clock (Date header)

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def serve(kubeconfig: str) -> None:
    sim = SimCluster(load_scenario("scale-5000"), speed=0).start()
    sim.write_kubeconfig(Path(kubeconfig))
    print("READY", flush=True)
    for line in sys.stdin:
        sim.advance(float(line))
        print("ok", flush=True)
    sim.stop()


async def watch_findings(app: Any, marks: dict[str, float], started: float) -> None:
    """When the findings panel first lists a finding, and a critical one."""
    while "first critical finding on screen" not in marks:
        shown = app.shown_findings()
        if shown and "first finding on screen" not in marks:
            mark(marks, "first finding on screen", time.perf_counter() - started)
            partial = app._partial
            if app.diagnosis is None and partial is not None:
                print(
                    f"  (partial: {partial.rules_done} of {partial.rules} rules over "
                    f"{partial.lacks or 'everything'})"
                )
        if any(f.severity == CRITICAL for f in shown):
            mark(marks, "first critical finding on screen", time.perf_counter() - started)
        await asyncio.sleep(0.01)


memory: list[tuple[float, float, int]] = []  # minutes into the long churn, RSS MB, frozen


async def churn(sim: RemoteSim, seconds: float = 12, *, watch_memory: bool = False) -> None:
    """A minute of simulated churn every two seconds: `seconds // 2` times, or, watching
    memory, until `seconds` have passed, the RSS taken each half minute."""
    began = sampled = time.perf_counter()
    steps = 0
    while time.perf_counter() - began < seconds if watch_memory else steps < seconds // 2:
        await asyncio.to_thread(sim.advance, 60)
        await asyncio.sleep(2)
        steps += 1
        if watch_memory and time.perf_counter() - sampled >= 30:
            sampled = time.perf_counter()
            minutes = (sampled - began) / 60
            memory.append((minutes, rss_mb(), gc.get_freeze_count()))
            print(
                f"  {minutes:.1f} min of churn ({steps} simulated minutes): RSS "
                f"{rss_mb():.0f} MB, {gc.get_freeze_count()} objects frozen",
                flush=True,
            )


async def run(sim: RemoteSim, kubeconfig: Path, minutes: float) -> dict[str, float]:
    global phase
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    source = LiveSource(client, simulated="scale-5000", access=SIM_ACCESS)
    source.check()
    app: Any = make_app(source)
    marks: dict[str, float] = {}
    started = time.perf_counter()
    async with app.run_test(size=(160, 48)):
        stall_task = asyncio.create_task(watch_stalls())
        findings_task = asyncio.create_task(watch_findings(app, marks, started))
        fleet = app.query_one(f"#{FLEET}", DataTable)
        while fleet.row_count == 0:
            await asyncio.sleep(0.01)
        listed = source.listed()
        mark(marks, "first paint (fleet view, pools shown)", time.perf_counter() - started)
        print(f"first paint: {fleet.row_count} pools, all nodes listed by then: {listed}")
        while source.watcher is None or not source.watcher._synced["nodes"].is_set():
            await asyncio.sleep(0.01)
        mark(marks, "5,000 nodes listed", time.perf_counter() - started)
        while fleet.row_count < 20:
            await asyncio.sleep(0.01)
        mark(marks, "fleet view with all 20 pools", time.perf_counter() - started)
        while app.diagnosis is None:
            await asyncio.sleep(0.05)
        mark(marks, "first whole diagnosis on screen", time.perf_counter() - started)
        findings_task.cancel()
        phase = "fleet view"
        await churn(sim)
        phase = "one pool's nodes (250)"
        opened = time.perf_counter()
        app.open_pool(app.pool_names()[0])
        table = app.query_one("#nodes", DataTable)
        while table.row_count < 200:
            await asyncio.sleep(0.02)
        mark(marks, "enter → a pool's 250 nodes shown", time.perf_counter() - opened)
        await churn(sim)
        phase = "all pools' nodes (5,000)"
        opened = time.perf_counter()
        app.open_pool(None)
        while table.row_count < 5000:
            await asyncio.sleep(0.05)
        mark(marks, "all 5,000 nodes shown", time.perf_counter() - opened)
        await churn(sim, minutes * 60 if minutes else 12, watch_memory=bool(minutes))
        stall_task.cancel()
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument(
        "--minutes",
        type=float,
        default=0,
        help="churn the all-nodes view this long and print RSS each half minute",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    instrument()
    print("building scale-5000 in its own process…", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim = RemoteSim(kubeconfig)
        stop_sampling = threading.Event()
        sampler = threading.Thread(target=sample_stalls, args=(stop_sampling,), daemon=True)
        sampler.start()
        try:
            marks = asyncio.run(run(sim, kubeconfig, args.minutes))
        finally:
            stop_sampling.set()
            sampler.join()
            sim.stop()
    worst = worst_frame = 0.0
    for name, refreshes in placed.items():
        steady = [p.cpu for p in refreshes if not p.fill]
        slowest = max((p for p in refreshes if not p.fill), key=lambda p: p.cpu, default=None)
        fills = [p for p in refreshes if p.fill]
        if name == "start" or not steady:
            continue
        worst = max(worst, max(steady))
        worst_frame = max([worst_frame, *(p.frame for p in refreshes)])
        filled = (
            f"; the fill of its table: {fills[0].cpu * 1000:.0f} ms over its frames, the "
            f"longest frame {fills[0].frame * 1000:.0f} ms"
            if fills
            else ""
        )
        print(
            f"UI-thread CPU per refresh, {name}: median {statistics.median(steady) * 1000:.0f} "
            f"ms, max {max(steady) * 1000:.0f} ms ({slowest.rows if slowest else ''} rows in "
            f"{slowest.calls if slowest else 0} calls) over {len(steady)} refreshes{filled}; "
            f"longest event-loop stall {stalls.get(name, 0) * 1000:.0f} ms (GIL waits and "
            f"other processes included); longest garbage collection on the UI thread "
            f"{gc_pauses.get(name, 0) * 1000:.0f} ms of CPU"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = marks["first paint (fleet view, pools shown)"]
    refreshing = [name for name in placed if name != "start"]
    stall = max((stalls.get(name, 0.0) for name in refreshing), default=0.0)
    collection = max((gc_pauses.get(name, 0.0) for name in refreshing), default=0.0)
    print(
        f"from the start until the first refresh phase: longest event-loop stall "
        f"{stalls.get('start', 0) * 1000:.0f} ms, longest UI-thread garbage collection "
        f"{gc_pauses.get('start', 0) * 1000:.0f} ms of CPU"
    )
    print(f"peak RSS of the app's process: {peak:.0f} MB")
    longest = sorted(collections, reverse=True)[:5]
    print(
        "longest collections, any thread: "
        + "; ".join(
            f"{ms:.0f} ms generation {gen} on {thread} ({when})"
            for ms, when, thread, gen in longest
        )
    )
    for longest_stall in sorted(stall_samples, key=lambda s: -s.ms)[:6]:
        common = counting.Counter(longest_stall.frames).most_common(2)
        print(
            f"stall of {longest_stall.ms:.0f} ms ({longest_stall.phase}): the UI thread on the CPU "
            f"{longest_stall.ui_cpu_ms:.0f} ms, the process's other threads "
            f"{longest_stall.other_threads_ms:.0f} ms ("
            + ", ".join(f"{name} {ms:.0f}" for name, ms in longest_stall.busiest if ms >= 1)
            + "); the UI thread sampled in: "
            + "; ".join(f"{where} ({count}x)" for where, count in common)
        )
    if len(memory) >= 2:
        first_rss, last_rss = memory[0][1], memory[-1][1]
        print(
            f"RSS over {memory[-1][0]:.1f} min of churn: {first_rss:.0f} MB at "
            f"{memory[0][0]:.1f} min, {last_rss:.0f} MB at the end "
            f"({last_rss - first_rss:+.0f} MB); frozen objects {memory[0][2]} then "
            f"{memory[-1][2]}"
        )
    finding = marks.get("first finding on screen", float("inf"))
    critical = marks.get("first critical finding on screen", float("inf"))
    whole = marks["first whole diagnosis on screen"]
    print(
        f"targets: first paint {first:.2f} s < 2 s {'PASS' if first < 2 else 'FAIL'}; "
        f"first finding {finding:.2f} s < 2 s {'PASS' if finding < 2 else 'FAIL'}; "
        f"first critical finding {critical:.2f} s < 2 s {'PASS' if critical < 2 else 'FAIL'}; "
        f"worst UI-thread time per refresh {worst * 1000:.0f} ms and per frame "
        f"{worst_frame * 1000:.0f} ms < 100 ms "
        f"{'PASS' if max(worst, worst_frame) < 0.1 else 'FAIL'}; longest stall during "
        f"refreshes {stall * 1000:.0f} ms < 150 ms {'PASS' if stall < 0.15 else 'FAIL'}; "
        f"longest UI-thread collection {collection * 1000:.0f} ms < 50 ms "
        f"{'PASS' if collection < 0.05 else 'FAIL'}; RSS {peak:.0f} MB < 500 MB "
        f"{'PASS' if peak < 500 else 'FAIL'}"
    )
    figure("first paint (fleet view)", first, "s", target=2.0)
    figure("first finding on screen", finding, "s", target=2.0)
    figure("first critical finding on screen", critical, "s", target=2.0)
    figure(
        "first whole diagnosis on screen",
        whole,
        "s",
        peer="all 5,000 nodes listed",
        peer_value=marks["5,000 nodes listed"],
    )
    figure(
        "worst UI-thread CPU per refresh or frame",
        max(worst, worst_frame) * 1000,
        "ms",
        target=100.0,
    )
    figure("longest event-loop stall during refreshes", stall * 1000, "ms", target=150.0)
    figure(
        "longest UI-thread garbage collection during refreshes",
        collection * 1000,
        "ms",
        target=50.0,
    )
    figure("peak RSS, the app's process", peak, "MB", target=500.0)


if __name__ == "__main__":
    main()
