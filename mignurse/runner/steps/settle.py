"""Whether a node stayed serving for a settle window: the judge of "the replacement is Ready"
and "the reapplied node serves its layout".

Decisions:
- A single read is a sample, not a state. Known failure shapes turn a fresh node bad within
  minutes of its first Ready: MIG reconfiguration stopping kubelet during bootstrap leaves it
  NotReady under a minute after Ready; the EKS node monitoring agent sets
  AcceleratedHardwareReady=False about a minute after Ready when DCGM cannot start (docs/repair.md).
  So a node counts only after every read for `window` seconds found it serving.
- The window is measured on the API server's clock (`ClusterClient.server_now`, from its Date
  headers), not this machine's: the laptop may be minutes off, and a simulated cluster runs
  faster than real time.
- What was seen is kept as episodes ("Ready 13:20:05Z–13:20:25Z, then NotReady (KubeletNotReady:
  …) since 13:20:25Z"), so a report says what was observed, not only that it failed.
- Serving means: the node exists and is not being deleted, Ready is True, no
  AcceleratedHardwareReady=False, and, where GPUs are expected, the GPUs or MIG devices are
  advertised (a step passes its own check for what "advertised" means).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mignurse.model import Node
from mignurse.runner.schema import duration_seconds
from mignurse.runner.step import StepContext

DEFAULT_SETTLE_SECONDS = 120.0
READS_PER_WINDOW = 12  # a node that stops serving inside the window is read doing so
AHR = "AcceleratedHardwareReady"


def settle_seconds(ctx: StepContext) -> float:
    """The runbook's `settle` param (a duration), else DEFAULT_SETTLE_SECONDS."""
    value = ctx.param("settle", DEFAULT_SETTLE_SECONDS)
    return duration_seconds(value) if isinstance(value, str) else float(value)


def serving_problem(
    raw: dict[str, Any] | None, gpus: Callable[[Node], str | None] | None = None
) -> str | None:
    """Why the node does not serve now (one phrase), or None. `gpus` says why its GPUs are not
    advertised, or None."""
    if raw is None:
        return "gone"
    node = Node.from_api(raw)
    if node.deleting is not None:
        return f"being deleted since {node.deleting:%H:%M:%SZ}"
    if node.ready_status != "Ready":
        cond = node.ready
        why = ""
        if cond is not None:
            why = ": ".join(x for x in (cond.reason, " ".join(cond.message.split())) if x)
        return node.ready_status + (f" ({why})" if why else "")
    ahr = node.condition(AHR)
    if ahr is not None and ahr.status == "False":
        return f"{AHR}=False ({ahr.reason or 'no reason given'})"
    return gpus(node) if gpus is not None else None


def gpus_advertised(node: Node) -> str | None:
    """None when the node advertises some nvidia.com/* resource, else why not."""
    if any(count > 0 for count in node.gpu_allocatable.values()):
        return None
    if any(count > 0 for count in node.gpu_capacity.values()):
        return "GPUs in capacity but none allocatable (device plugin not serving)"
    return "no GPUs advertised yet"


@dataclass
class Episode:
    problem: str | None  # None: serving
    first: datetime
    last: datetime

    def describe(self) -> str:
        what = "serving" if self.problem is None else self.problem
        if self.first == self.last:
            return f"{what} at {self.first:%H:%M:%SZ}"
        return f"{what} {self.first:%H:%M:%SZ}–{self.last:%H:%M:%SZ}"


@dataclass
class Settle:
    """The reads of one node, and whether the last `window` seconds of them all found it
    serving."""

    window: float
    episodes: list[Episode] = field(default_factory=list)
    reads: int = 0

    def observe(self, at: datetime, problem: str | None) -> bool:
        """Record one read (cluster time); True once the node has served for the window."""
        self.reads += 1
        last = self.episodes[-1] if self.episodes else None
        if last is not None and last.problem == problem and at >= last.last:
            last.last = at
        else:
            self.episodes.append(Episode(problem, at, at))
        return self.settled

    @property
    def serving_since(self) -> datetime | None:
        last = self.episodes[-1] if self.episodes else None
        return last.first if last is not None and last.problem is None else None

    @property
    def settled(self) -> bool:
        since = self.serving_since
        if since is None:
            return False
        return (self.episodes[-1].last - since).total_seconds() >= self.window

    @property
    def ever_served(self) -> bool:
        return any(e.problem is None for e in self.episodes)

    def story(self, limit: int = 4) -> str:
        """What was seen, oldest first (the last `limit` episodes)."""
        shown = [e.describe() for e in self.episodes[-limit:]]
        if len(self.episodes) > limit:
            shown.insert(0, "…")
        return ", then ".join(shown) or "never read"

    def served_for(self) -> str:
        since = self.serving_since
        if since is None:
            return ""
        seconds = (self.episodes[-1].last - since).total_seconds()
        return (
            f"served for {seconds:.0f} s of cluster time ({since:%H:%M:%SZ}–"
            f"{self.episodes[-1].last:%H:%M:%SZ}, {self.reads} reads)"
        )
