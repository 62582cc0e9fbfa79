"""Run state: one JSON file per run in `$XDG_STATE_HOME/mignurse/runs/<run-id>.json`.

Decisions:
- Written after every phase (planned, each step applied/verified/failed, each undo) by
  writing a temporary file beside it and renaming it over the old one: a crash or
  SIGKILL leaves either the previous state or the new one, never half a file.
- It holds what `--resume` and `--undo` need and nothing they could not trust later: the
  runbook name, resolved params, context, each step's plan and the dict its apply
  returned (the prior values undo puts back).
- `pid` tells a live run from a dead one: a state still `running` whose pid is gone was
  killed and may be resumed or undone.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Step statuses. Done: verified, skipped (nothing to do). Undoable: applied, verified.
PENDING = "pending"
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


def state_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "mignurse"


def runs_dir() -> Path:
    return state_home() / "runs"


def new_run_id() -> str:
    return secrets.token_hex(4)


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
    error: str = ""

    @property
    def path(self) -> Path:
        return runs_dir() / f"{self.run_id}.json"

    def step(self, step_id: str) -> StepState:
        return next(s for s in self.steps if s.id == step_id)

    def save(self) -> None:
        self.updated = now_text()
        folder = runs_dir()
        folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps(asdict(self), indent=2, sort_keys=False, default=str).encode()
        fd, tmp = tempfile.mkstemp(prefix=f".{self.run_id}.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, run_id: str) -> RunState:
        """The saved state of one run; FileNotFoundError when there is none."""
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise FileNotFoundError(run_id)
        raw = json.loads((runs_dir() / f"{run_id}.json").read_text())
        steps = [StepState(**s) for s in raw.pop("steps", [])]
        return cls(**raw, steps=steps)

    def alive(self) -> bool:
        """Whether the process that wrote this state (not this one) still runs."""
        if self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _not_zombie(self.pid)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def list_runs() -> list[RunState]:
    found = []
    for path in sorted(runs_dir().glob("*.json")):
        try:
            found.append(RunState.load(path.stem))
        except (OSError, ValueError, TypeError):
            continue
    found.sort(key=lambda r: r.created)
    return found
