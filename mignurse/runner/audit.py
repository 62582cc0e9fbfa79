"""The audit log: append-only JSONL in `$XDG_STATE_HOME/mignurse/audit.jsonl`.

Decisions:
- One line per event (run started, each step's plan and result, each undo, the outcome),
  written with O_APPEND in one write, flushed and fsynced: lines of two concurrent runs
  never interleave within a line, and a crash loses at most the line being written.
- Readers skip a torn (unparseable) line instead of failing: the log of a killed run is
  still readable.
- Who: the local user@host, the kube user of the context, and the AWS caller identity
  when AWS is configured. The AWS lookup is best effort with a 3 s budget in a thread
  started with the run; it never delays a step, and arrives as its own `identity` event
  when it is slower than the run's first event.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mignurse.paths import (
    audit_log,
    open_private,
    private_dir,
    runs_dir,
    state_path_problem,
)
from mignurse.runner.state import now_text
from mignurse.untrusted import json_value

if TYPE_CHECKING:
    from mignurse.runner.state import RunState

AWS_LOOKUP_SECONDS = 3.0
AUDIT_READ_BYTES = 64 * 2**20  # years of runs; of a larger log, the newest part is read


def audit_path() -> Path:
    return audit_log()


def local_holder() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname().split('.')[0]}"


def aws_configured() -> bool:
    """Credentials or a profile the user set up: without them the lookup would only probe the
    instance metadata endpoint, so it is not made."""
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE"):
        return True
    home = Path(os.path.expanduser("~/.aws"))
    files = [
        Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials"),
        Path(os.environ.get("AWS_CONFIG_FILE") or home / "config"),
    ]
    return any(f.exists() for f in files)


class AwsIdentity:
    """The caller identity (sts), looked up once in the background; `arn` is "" until known.
    `aws` makes clients from the run's own session (its --profile and --region), so the log
    names who the run's AWS calls act as, not whoever the default credentials are."""

    def __init__(self, aws: Callable[[str], Any] | None = None) -> None:
        self.arn = ""
        self.done = threading.Event()
        self._aws = aws
        if not aws_configured():
            self.done.set()
            return
        threading.Thread(target=self._lookup, name="aws-identity", daemon=True).start()

    def _lookup(self) -> None:
        try:
            if self._aws is not None:
                sts = self._aws("sts")
            else:
                import boto3
                from botocore.config import Config

                sts = boto3.client(
                    "sts",
                    config=Config(
                        connect_timeout=AWS_LOOKUP_SECONDS,
                        read_timeout=AWS_LOOKUP_SECONDS,
                        retries={"max_attempts": 1},
                    ),
                )
            self.arn = str(sts.get_caller_identity().get("Arn") or "")
        except Exception:  # noqa: BLE001 - best effort: no identity is a fine answer
            self.arn = ""
        finally:
            self.done.set()


class Audit:
    """Appends events to the audit log; every line says its time and run."""

    def __init__(
        self, path: Path | None = None, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.path = path or audit_path()
        self.clock = clock  # the demo's simulated clock, so the log agrees with its cluster

    def problem(self) -> str:
        """Why a run cannot be recorded (one line), or "": the state folder, `runs/` or the
        log exist as anything but a folder, a folder and a regular file (a FIFO would block
        the run, a link would write elsewhere). Asked before any lock is taken."""
        for path, want in ((self.path.parent, "folder"), (runs_dir(), "folder")):
            problem = state_path_problem(path, want)
            if problem:
                return f"{problem} (runs and the audit log are kept there)"
        problem = state_path_problem(self.path, "file")
        if problem:
            return (
                f"the audit log {problem} (every run is recorded there before it changes anything)"
            )
        return ""

    def write(self, event: str, run_id: str, **fields: Any) -> None:
        ts = (
            self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # as now_text()
            if self.clock
            else now_text()
        )
        record = {"ts": ts, "event": event, "run": run_id, **fields}
        line = json.dumps(record, separators=(",", ":"), default=str).encode() + b"\n"
        private_dir(self.path.parent, tighten=True)
        # Never through a planted link, never blocked on a FIFO: StateFileError instead.
        fd = open_private(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def read_audit(path: Path | None = None) -> list[dict[str, Any]]:
    """Every readable event, oldest first; a torn or foreign line is skipped."""
    path = path or audit_path()
    try:
        fd = open_private(path, os.O_RDONLY)  # never a link, never a FIFO's wait
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > AUDIT_READ_BYTES:  # the newest runs, from the first whole line on
            handle.seek(size - AUDIT_READ_BYTES - 1)
            if handle.read(1) != b"\n":
                handle.readline()
        data = handle.read(AUDIT_READ_BYTES)
    events = []
    for line in data.splitlines():
        try:
            record = json_value(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events


def runs_from_audit(
    events: list[dict[str, Any]], states: Mapping[str, RunState] | None = None
) -> list[dict[str, Any]]:
    """One summary a run, newest last: when, run, runbook, context, cluster, target, who,
    outcome.

    A run's outcome is what its last `finished` said; a refusal or a declined prompt counts
    only for a run that never started (a refused `--resume` leaves the outcome as it was,
    noted apart). A run still `running` in the log is checked against its run state: a dead
    process shows as `killed`."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["event"] in ("unlock", "unlock-declined"):
            continue  # about a lock, not a run of its own
        run = runs.setdefault(
            str(event.get("run")),
            {"run": event.get("run"), "started": event.get("ts"), "outcome": "running"},
        )
        for key in ("runbook", "target", "context", "cluster"):
            if event.get(key) and not run.get(key):
                run[key] = event[key]
        who = event.get("who")
        if isinstance(who, dict) and who.get("local"):
            run["who"] = who["local"]
        kind = event["event"]
        if kind in ("started", "resumed", "undo-started"):
            run["began"] = True
        if kind in ("finished", "dry-run") or (
            kind in ("declined", "refused") and not run.get("began")
        ):
            run["outcome"] = event.get("outcome") or kind
        elif kind in ("declined", "refused"):
            run["last"] = f"{kind} {'undo' if event.get('undo') else 'resume'}"
        run["updated"] = event.get("ts")
    for run in runs.values():
        run.pop("began", None)
        state = (states or {}).get(str(run["run"]))
        if run["outcome"] == "running" and state is not None:
            run["outcome"] = state.shown_status()
    return list(runs.values())
