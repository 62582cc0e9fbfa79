"""Run state: one JSON file per run in `$XDG_STATE_HOME/mignurse/runs/<run-id>.json`.

Decisions:
- Written after every phase (planned, each step applied/verified/failed, each undo) by
  writing a temporary file beside it and renaming it over the old one: a crash or
  SIGKILL leaves either the previous state or the new one, never half a file.
- It holds what `--resume` and `--undo` need and nothing they could not trust later: the
  runbook name, resolved params, context, each step's plan as confirmed and as last
  planned, the prior values it recorded before its first change (`prior`, saved before the
  change is sent) and the dict its apply returned.
- The state is saved before the lock is taken, so a lock always names a run that has one.
- `pid` and `host` tell a live run from a dead one: a state still `running` whose pid is
  gone on this host was killed and may be resumed or undone.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mignurse.paths import (
    StateFileError,
    open_folder,
    open_private,
    private_dir,
    read_private,
    runs_dir,
    state_path_problem,
)

# Step statuses. Done: verified, skipped (nothing to do). Undoable: applied, verified, and
# interrupted (stopped mid-apply: its recorded prior values say what undo puts back).
PENDING = "pending"
STOPPED = "interrupted"
APPLIED = "applied"
VERIFIED = "verified"
SKIPPED = "skipped"
FAILED = "failed"
UNDONE = "undone"
UNDO_FAILED = "undo-failed"
NOT_UNDOABLE = "not-undoable"
DONE = (VERIFIED, SKIPPED)

# Run statuses.
RUNNING = "running"
SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
INTERRUPTED = "interrupted"
RUN_UNDONE = "undone"
ENDED = (SUCCEEDED, RUN_UNDONE)  # nothing is left to resume or undo
RUN_STATE_BYTES = 16 * 2**20  # a run's state is kilobytes; a larger file is not one


def new_run_id() -> str:
    return secrets.token_hex(4)


def this_host() -> str:
    return socket.gethostname()


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class StepState:
    id: str
    action: str
    status: str = PENDING
    plan: dict[str, Any] | None = None
    applied: dict[str, Any] | None = None
    error: str = ""
    undo: str = ""  # what undo did, one line
    attempts: int = 0
    started: str = ""
    finished: str = ""
    prior: dict[str, Any] = field(default_factory=dict)  # recorded before the first change
    intents: int = 0  # changes announced (each before it was sent)
    planned: dict[str, Any] | None = None  # the plan shown when the run was confirmed

    @property
    def touched(self) -> bool:
        """Whether this step may have changed something (undo must look at it)."""
        if self.intents:
            return True
        return self.applied is not None and self.status in (APPLIED, VERIFIED, FAILED, UNDO_FAILED)


@dataclass
class RunState:
    run_id: str
    runbook: str
    params: dict[str, Any]
    context: str
    cluster: str
    target: str  # the node, or the cluster for `target: cluster`
    holder: str
    status: str = RUNNING
    steps: list[StepState] = field(default_factory=list)
    created: str = field(default_factory=now_text)
    updated: str = ""
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=this_host)
    error: str = ""

    @property
    def path(self) -> Path:
        return runs_dir() / f"{self.run_id}.json"

    def step(self, step_id: str) -> StepState:
        return next(s for s in self.steps if s.id == step_id)

    def save(self) -> None:
        self.updated = now_text()
        folder = open_folder(private_dir(runs_dir(), tighten=True))  # never through a link
        data = json.dumps(asdict(self), indent=2, sort_keys=False, default=str).encode()
        tmp = f".{self.run_id}.{secrets.token_hex(4)}.tmp"
        try:
            fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, f"{self.run_id}.json", src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                raise
        finally:
            os.close(folder)

    @classmethod
    def load(cls, run_id: str) -> RunState:
        """The saved state of one run; FileNotFoundError when there is none, StateFileError
        when `runs/` or the run's file is a link, a FIFO or another thing than mignurse's."""
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise FileNotFoundError(run_id)
        folder = runs_dir()
        problem = state_path_problem(folder, "folder")
        if problem:
            raise StateFileError(problem)
        raw = json.loads(read_private(folder / f"{run_id}.json", RUN_STATE_BYTES))
        steps = [StepState(**s) for s in raw.pop("steps", [])]
        return cls(**raw, steps=steps)

    def delete(self) -> None:
        if state_path_problem(runs_dir(), "folder"):
            return  # a planted link: nothing of ours is there to delete
        self.path.unlink(missing_ok=True)

    def alive(self) -> bool:
        """Whether the process that wrote this state (not this one) still runs; a run on
        another host counts as alive (nobody here can tell)."""
        if self.host and self.host != socket.gethostname():
            return True
        if self.pid == os.getpid():
            return False
        return process_alive(self.pid)

    def shown_status(self) -> str:
        """The status as `runs` shows it: a `running` state whose process is gone is killed."""
        if self.status != RUNNING:
            return self.status
        if self.host and self.host != socket.gethostname():
            return f"running on {self.host}"
        if self.pid != os.getpid() and not process_alive(self.pid):
            return "killed"
        return RUNNING


def process_alive(pid: int) -> bool:
    """Whether process `pid` on this host runs (a zombie does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def list_runs() -> list[RunState]:
    """Every run's saved state, oldest first; StateFileError when `runs/` is a link (or not
    a folder), and a file there that is not a run state is passed over."""
    folder = runs_dir()
    problem = state_path_problem(folder, "folder")
    if problem:
        raise StateFileError(problem)
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            found.append(RunState.load(path.stem))
        except (OSError, ValueError, TypeError):
            continue
    found.sort(key=lambda r: r.created)
    return found
