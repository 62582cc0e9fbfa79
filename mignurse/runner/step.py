"""The contract between the runbook engine and the steps it runs (docs/commands.md, "Runbooks").

A runbook (YAML in `runbooks/`) is a list of steps; each names an action registered here
with `@action("name")`. An action is a class with five phases, always called in this order
by the engine, never by a step itself:

1. `check(ctx)`: the precondition, read-only. `None` when the step may run, else one line
   saying why not (the run stops before anything changes; on resume it is asked again).
2. `plan(ctx)`: read-only; the exact changes it would make, as `Change`s (object, field,
   old value, new value) and node commands (`NodeCommand`, the argv it would run). The
   whole runbook's plan is shown before the first mutation; `--dry-run` stops there.
   A plan may say `nothing_to_do` (the node is already cordoned): apply is then skipped.
3. `apply(ctx, plan)`: does it. Returns what undo and later steps need (JSON-able dict,
   stored in the run state so `--resume` and undo survive a crash), e.g. the prior value.
   Raise `StepFailed("one line")` on failure; the engine records it and, when the runbook
   declares `undo: on-failure`, undoes the completed steps newest first.
4. `verify(ctx, plan, applied)`: read-only; `None` when the change is really there (the
   node is unschedulable, the Deployment rolled out), else one line. A failed verify is a
   failed step.
5. `undo(ctx, plan, applied)`: optional (`can_undo`); puts back what apply changed, from
   `applied` merged with what `ctx.intend` recorded (the recorded prior values win). It runs
   for a step interrupted mid-apply too, so it reconciles with the cluster: it changes only
   what is not already back, and is safe to run twice. `undone(...)` then says, read-only,
   what is still not as it was (the undo's report names it).

Every mutation, in apply and in undo, is preceded by `ctx.intend(change, prior)`: it stops for
Ctrl-C or a lost lock (nothing new is applied after either), and records durably, before the
change, what is about to change and the prior values undo needs. The first value recorded for
a key wins, so a retry or a resume that finds the change already made never records the
changed value as the prior one.

A step that cannot be undone may say, through `undo_barrier(...)`, that the steps before it
must not be undone either (the instance is being replaced; the GPUs are half repartitioned):
undo then stops there and says why, leaving the node in the safe state those steps made.

`harm` scales the confirmation: NONE (no prompt: read-only or collection), LOW (y/N:
cordon, labels), HIGH (typed acknowledgement of the node or cluster name: replace the
instance, pause or resume repair, evict pods). The engine asks once per runbook at the
highest harm among its mutating steps, after showing the plan, unless `--yes`.

`retries` is how many times the engine may re-run apply after a `StepFailed(retryable=True)`
(only for idempotent steps); `timeout` is the step's budget in seconds, enforced by the
step itself through `ctx.deadline()` / `ctx.sleep()` (which also honour Ctrl-C).

Nothing here may restart kubelet or containerd or run `systemctl daemon-reload` on a node.
"""

from __future__ import annotations

import enum
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from mignurse.cluster.client import ClusterClient
    from mignurse.nodeaccess.base import NodeShell


class Harm(enum.IntEnum):
    NONE = 0  # read-only or collection: no confirmation
    LOW = 1  # reversible, one node: y/N
    HIGH = 2  # destructive or fleet-wide: type the node or cluster name


class StepFailed(Exception):
    """A step could not do its work; str() is the one line to show. `conflict`: the API server
    answered 409, the object changed under the step (the engine reads afresh and tries
    again)."""

    def __init__(self, message: str, *, retryable: bool = False, conflict: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.conflict = conflict


def write_failed(what: str, exc: BaseException) -> StepFailed:
    """The StepFailed for a write the API server refused: retryable when it may pass on its
    own, a conflict on a 409."""
    from mignurse.cluster.client import Conflict

    return StepFailed(
        f"{what}: {exc}", retryable=transient(exc), conflict=isinstance(exc, Conflict)
    )


class Cancelled(Exception):
    """Ctrl-C or the app's cancel button, noticed by ctx.sleep() or ctx.check_cancel()."""


class LockLost(Exception):
    """The run's lock on its target expired and another run holds it: nothing more may change;
    str() is the one line to show."""


_SERVER_ERROR = re.compile(r"answered 5\d\d\b")


def transient(exc: BaseException) -> bool:
    """Whether a failure may pass on its own, so trying again is right: the API server
    unreachable, a 5xx or a 429 answer, or a step's own `StepFailed(retryable=True)`. A 401
    (credentials), 403, 404 or 409 answers the same next time: it fails at once."""
    from mignurse.cluster.client import ApiError, TooManyRequests, Unreachable

    if isinstance(exc, StepFailed):
        return exc.retryable
    if isinstance(exc, Unreachable | TooManyRequests):
        return True
    return isinstance(exc, ApiError) and _SERVER_ERROR.search(str(exc)) is not None


def merge_first(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    """Add `more` to `into` where a key is new; nested mappings merge the same way (the first
    value recorded for a key wins)."""
    for key, value in more.items():
        if key not in into:
            into[key] = json.loads(json.dumps(value, default=str))
        elif isinstance(into[key], dict) and isinstance(value, Mapping):
            merge_first(into[key], value)


@dataclass(frozen=True)
class Change:
    """One field of one object that the step will set."""

    target: str  # "node/ip-10-0-1-2.ec2.internal", "deployment/kube-system/karpenter"
    field: str  # "spec.unschedulable", "env FEATURE_GATES token NodeRepair"
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "field": self.field, "old": self.old, "new": self.new}

    def describe(self) -> str:
        return f"{self.target}: {self.field} {_shown(self.old)} → {_shown(self.new)}"


@dataclass(frozen=True)
class NodeCommand:
    """A command the step will run on a node (over SSM, SSH or the simulator's sandbox)."""

    node: str
    argv: tuple[str, ...]
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "argv": list(self.argv), "why": self.why}

    def describe(self) -> str:
        return f"on {self.node}: {' '.join(self.argv)}" + (f"  ({self.why})" if self.why else "")


@dataclass
class StepPlan:
    changes: list[Change] = field(default_factory=list)
    commands: list[NodeCommand] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts the operator should read first
    nothing_to_do: bool = False  # already in the wanted state: apply is skipped
    data: dict[str, Any] = field(default_factory=dict)  # what apply needs, JSON-able

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [c.to_json() for c in self.changes],
            "commands": [c.to_json() for c in self.commands],
            "notes": list(self.notes),
            "nothingToDo": self.nothing_to_do,
            "data": self.data,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> StepPlan:
        return cls(
            changes=[Change(**c) for c in raw.get("changes", [])],
            commands=[
                NodeCommand(c["node"], tuple(c["argv"]), c.get("why", ""))
                for c in raw.get("commands", [])
            ],
            notes=list(raw.get("notes", [])),
            nothing_to_do=bool(raw.get("nothingToDo")),
            data=dict(raw.get("data", {})),
        )


@dataclass
class ClusterPace:
    """How fast the API server's clock runs against this machine's: 1 on a real cluster,
    faster on a simulated one. A wait measured in cluster time sleeps accordingly, so a node
    Ready for 20 s of cluster time does not fall between two reads."""

    first: tuple[float, datetime] | None = None
    rate: float = 1.0

    def note(self, at: datetime) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = (now, at)
            return
        real = now - self.first[0]
        if real >= 1.0:
            self.rate = max(1.0, (at - self.first[1]).total_seconds() / real)

    def real_seconds(self, cluster_seconds: float) -> float:
        return cluster_seconds / self.rate


@dataclass
class StepContext:
    """Everything a step may use. Built by the engine; steps never build clients themselves.

    `params` are the runbook's resolved params (e.g. node, config, timeout); `with_args` the
    step's own `with:` mapping from the YAML. `shell_for(node_name)` opens a NodeShell;
    `aws(service)` returns a boto3 client (adaptive retries) or raises StepFailed when no
    AWS access is configured. `outputs` holds what earlier steps returned from apply, by
    step id. `log(line)` streams progress to the terminal or the app. `prior` holds what
    `intend` recorded for this step so far, in this attempt or an earlier one of the same run
    (a resume); `saved_plan` the plan shown when the run was confirmed, when there was one."""

    client: ClusterClient
    params: dict[str, Any]
    with_args: dict[str, Any] = field(default_factory=dict)
    shell_for: Callable[[str], NodeShell] | None = None
    aws: Callable[[str], Any] | None = None
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: Callable[[str], None] = lambda line: None
    cancel: threading.Event = field(default_factory=threading.Event)
    timeout: float = 300.0
    started: float = field(default_factory=time.monotonic)
    run_id: str = ""
    holder: str = ""  # who runs this (user@host), for locks and annotations
    prior: dict[str, Any] = field(default_factory=dict)
    saved_plan: StepPlan | None = None
    guard: Callable[[], None] = lambda: None  # raises LockLost when the lock is gone
    journal: Callable[[str, dict[str, Any]], None] = lambda event, fields: None
    pace: ClusterPace = field(default_factory=ClusterPace)

    @property
    def node(self) -> str:
        return str(self.params.get("node", ""))

    def deadline(self) -> float:
        """Monotonic time by which this step must finish."""
        return self.started + self.timeout

    def time_left(self) -> float:
        return self.deadline() - time.monotonic()

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("cancelled")

    def sleep(self, seconds: float) -> None:
        """Sleep, waking at once for Ctrl-C/cancel; raises Cancelled."""
        if self.cancel.wait(max(0.0, seconds)):
            raise Cancelled("cancelled")

    def sleep_cluster(self, seconds: float, longest: float) -> None:
        """Sleep about `seconds` of the API server's clock, at most `longest` real seconds and
        never past the step's deadline; wakes at once for Ctrl-C (raises Cancelled)."""
        self.pace.note(self.client.server_now())
        real = min(longest, max(0.2, self.pace.real_seconds(seconds)))
        self.sleep(min(real, max(0.1, self.time_left())))

    def intend(self, change: str, prior: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call right before each change to the cluster or a node (one line: what changes).
        Raises Cancelled after Ctrl-C and LockLost when the run's lock is gone; otherwise
        records `change` and `prior` (merged into `self.prior`, first value wins) in the run
        state and the audit log before returning them all."""
        self.check_cancel()
        self.guard()
        merge_first(self.prior, prior or {})
        self.journal("intent", {"change": change, "prior": self.prior})
        self.check_cancel()
        return self.prior

    def record(self, event: str, **fields: Any) -> None:
        """One audit line about this step: a node command's exit status and output, an
        eviction that went through."""
        self.journal(event, fields)

    def param(self, name: str, default: Any = None) -> Any:
        """A step's `with:` value first, then the runbook param of that name."""
        if name in self.with_args:
            return self.with_args[name]
        return self.params.get(name, default)


class Action:
    """Base class of every step action; subclasses set the class attributes."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # short imperative, shown in plans: "Cordon the node"
    mutates: ClassVar[bool] = True
    harm: ClassVar[Harm] = Harm.LOW
    can_undo: ClassVar[bool] = False
    retries: ClassVar[int] = 0
    timeout: ClassVar[float] = 120.0

    def check(self, ctx: StepContext) -> str | None:
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan()

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        raise NotImplementedError

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        raise StepFailed(f"{self.name} cannot be undone")

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        """After undo, read-only: None when what this step changed is as it was before the
        run, else what is not (one line)."""
        return None

    def undo_barrier(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        """Read-only, for a step that cannot be undone but may have changed something: why the
        steps before it must stay as they are (one line), or None when they may be undone."""
        return None


def _shown(value: Any) -> str:
    """A plan value as an operator reads it: absent, not Python's None."""
    return "(absent)" if value is None else repr(value)


ACTIONS: dict[str, type[Action]] = {}


def action(name: str) -> Callable[[type[Action]], type[Action]]:
    """Register an Action subclass under the name runbooks use in `action:`."""

    def register(cls: type[Action]) -> type[Action]:
        if name in ACTIONS:
            raise ValueError(f"action {name!r} registered twice")
        cls.name = name
        ACTIONS[name] = cls
        return cls

    return register
