"""The audit log after a crash and between concurrent runs (mignurse/runner/audit.py): a torn
last line is skipped, not fatal; two runs writing at once never interleave within a line;
`mignurse runs` tells each run's outcome from the log, a refused resume apart."""

from __future__ import annotations

import getpass
import http.server
import json
import os
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mignurse.runner.audit import (
    Audit,
    AwsIdentity,
    aws_configured,
    local_holder,
    read_audit,
    runs_from_audit,
)
from mignurse.runner.state import RunState, StepState


def test_a_line_torn_by_a_kill_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = Audit(log)
    audit.write("started", "r1", runbook="cordon")
    with log.open("ab") as handle:
        handle.write(b'["not", "an", "event"]\n{"no": "event key"}\n')
    audit.write("finished", "r1", outcome="succeeded")
    with log.open("ab") as handle:
        handle.write(b'{"ts":"2026-11-20T12:00:00Z","event":"step-star')  # SIGKILL here

    events = read_audit(log)

    assert [(e["event"], e["run"]) for e in events] == [("started", "r1"), ("finished", "r1")]
    assert events[0]["runbook"] == "cordon" and events[1]["outcome"] == "succeeded"


def test_no_log_yet_is_no_event(tmp_path: Path) -> None:
    assert read_audit(tmp_path / "audit.jsonl") == []


def test_two_runs_writing_at_once_never_share_a_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"

    def run(run_id: str) -> None:
        audit = Audit(log)
        for i in range(100):
            audit.write("step-finished", run_id, step=f"s{i}", output="x" * 2000)

    threads = [threading.Thread(target=run, args=(f"r{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    lines = log.read_bytes().splitlines()
    assert len(lines) == 400
    events = read_audit(log)
    assert len(events) == 400
    for n in range(4):
        assert [e["step"] for e in events if e["run"] == f"r{n}"] == [f"s{i}" for i in range(100)]


def test_the_log_is_private_to_the_user(tmp_path: Path) -> None:
    log = tmp_path / "state" / "audit.jsonl"
    Audit(log).write("started", "r1")
    assert log.stat().st_mode & 0o777 == 0o600
    assert log.parent.stat().st_mode & 0o777 == 0o700


def test_the_demos_log_carries_its_simulated_time(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    sim_now = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC) + timedelta(microseconds=5)
    Audit(log, clock=lambda: sim_now).write("started", "r1")
    assert read_audit(log)[0]["ts"] == "2026-11-20T12:00:00.000005Z"


# -- `mignurse runs`: one line a run ------------------------------------------------------------


def ev(event: str, run: str, **fields: Any) -> dict[str, Any]:
    return {"ts": f"2026-11-20T12:00:0{len(fields)}Z", "event": event, "run": run, **fields}


def test_each_run_is_summed_up_by_its_last_finish() -> None:
    events = [
        ev(
            "started",
            "r1",
            runbook="cordon",
            target="n1",
            context="prod",
            who={"local": "alice@lap"},
        ),
        ev("step-finished", "r1", runbook="other", target="n2"),
        ev("finished", "r1", outcome="failed"),
        ev("undo-started", "r1"),
        ev("finished", "r1", outcome="undone"),
    ]
    (run,) = runs_from_audit(events)
    assert run["outcome"] == "undone"
    assert (run["runbook"], run["target"], run["context"], run["who"]) == (
        "cordon",
        "n1",
        "prod",
        "alice@lap",
    )
    assert run["started"] == events[0]["ts"] and run["updated"] == events[-1]["ts"]
    assert "began" not in run


def test_a_refused_resume_is_noted_apart_and_keeps_the_runs_outcome() -> None:
    events = [
        ev("started", "r1"),
        ev("finished", "r1", outcome="interrupted"),
        ev("refused", "r1"),
        ev("declined", "r1", undo=True),
    ]
    (run,) = runs_from_audit(events)
    assert run["outcome"] == "interrupted"
    assert run["last"] == "declined undo"
    (run,) = runs_from_audit(events[:3])
    assert run["last"] == "refused resume"


def test_a_run_refused_or_declined_before_it_began_ends_so() -> None:
    runs = runs_from_audit([ev("refused", "r1"), ev("declined", "r2"), ev("dry-run", "r3")])
    assert [(r["run"], r["outcome"]) for r in runs] == [
        ("r1", "refused"),
        ("r2", "declined"),
        ("r3", "dry-run"),
    ]


def test_unlock_events_are_not_runs() -> None:
    runs = runs_from_audit([ev("unlock", "r9"), ev("unlock-declined", "r9"), ev("started", "r1")])
    assert [r["run"] for r in runs] == ["r1"]


def test_a_run_still_running_in_the_log_is_judged_by_its_state(tmp_path: Path) -> None:
    def state(run_id: str, pid: int, host: str) -> RunState:
        return RunState(
            run_id=run_id, runbook="cordon", params={}, context="c", cluster="k", target="n",
            holder="h", steps=[StepState(id="s", action="cordon")], pid=pid, host=host,
        )  # fmt: skip

    gone = 2**22 + 12345  # above the kernel's default pid_max: no such process
    states = {"r1": state("r1", gone, socket.gethostname()), "r2": state("r2", 1, "bobs-laptop")}
    runs = runs_from_audit([ev("started", "r1"), ev("started", "r2"), ev("started", "r3")], states)
    assert [r["outcome"] for r in runs] == ["killed", "running on bobs-laptop", "running"]


# -- who ----------------------------------------------------------------------------------------


def test_the_local_holder_is_user_at_short_host() -> None:
    assert local_holder() == f"{getpass.getuser()}@{socket.gethostname().split('.')[0]}"


@pytest.mark.parametrize(
    ("env", "files", "configured"),
    [
        ({}, [], False),
        ({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}, [], True),
        ({"AWS_PROFILE": "oncall"}, [], True),
        ({}, [".aws/credentials"], True),
        ({}, [".aws/config"], True),
        ({"AWS_SHARED_CREDENTIALS_FILE": "elsewhere/creds"}, ["elsewhere/creds"], True),
        ({"AWS_CONFIG_FILE": "elsewhere/config"}, ["elsewhere/config"], True),
        ({"AWS_CONFIG_FILE": "elsewhere/config"}, [".aws/credentials"], True),
        ({"AWS_CONFIG_FILE": "elsewhere/config"}, [], False),
    ],
)
def test_the_aws_identity_is_looked_up_only_when_aws_is_set_up(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], files: list[str], configured: bool
) -> None:
    home = Path(os.environ["HOME"])
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(home / value) if "/" in value else value)
    for name in files:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("[default]\n")

    assert aws_configured() is configured
    identity = AwsIdentity(aws=_unreachable_sts)
    assert identity.done.wait(10)
    assert identity.arn == ""


def _unreachable_sts(service: str) -> Any:
    raise ConnectionError(f"{service}: connect timeout on endpoint URL")


def test_an_audit_line_is_one_json_object(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    Audit(log).write("step-finished", "r1", output="a\nb", when=datetime(2026, 1, 1, tzinfo=UTC))
    (line,) = log.read_bytes().splitlines()
    record = json.loads(line)
    assert record["output"] == "a\nb" and record["when"] == "2026-01-01 00:00:00+00:00"


class CountingSts:
    """The caller identity as STS answers it, counting the lookups."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, service: str) -> CountingSts:
        self.asked.append(service)
        return self

    def get_caller_identity(self) -> dict[str, str]:
        return {"Arn": "arn:aws:iam::123456789012:user/oncall-engineer"}


@pytest.mark.parametrize("configured", [True, False])
def test_the_aws_identity_is_asked_of_sts_only_when_aws_is_set_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, configured: bool
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    if configured:
        monkeypatch.setenv("AWS_PROFILE", "oncall")
    sts = CountingSts()

    identity = AwsIdentity(aws=sts)

    assert identity.done.wait(10)
    assert sts.asked == (["sts"] if configured else [])
    assert identity.arn == ("arn:aws:iam::123456789012:user/oncall-engineer" if configured else "")


def test_a_hung_identity_lookup_never_keeps_mignurse_from_exiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEONCALL")
    answer = threading.Event()

    def hung_sts(service: str) -> Any:
        answer.wait(30)
        raise ConnectionError(f"{service}: read timeout on endpoint URL")

    before = set(threading.enumerate())
    identity = AwsIdentity(aws=hung_sts)
    try:
        (lookup,) = [t for t in threading.enumerate() if t not in before]
        assert lookup.name == "aws-identity"
        assert lookup.daemon  # the interpreter exits without waiting for it
        assert not identity.done.is_set()
    finally:
        answer.set()
    assert identity.done.wait(10) and identity.arn == ""


class FailingSts(http.server.BaseHTTPRequestHandler):
    """A local STS endpoint that answers every call with a 500, counting them."""

    calls: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.calls.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_identity_lookup_gives_up_on_a_failing_sts_after_one_retry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FailingSts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FailingSts.calls = []
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEONCALL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    try:
        identity = AwsIdentity()
        assert identity.done.wait(30)
    finally:
        server.shutdown()
        server.server_close()

    assert identity.arn == ""
    # `max_attempts` counts the retries after the first call (botocore's Config reference:
    # https://botocore.amazonaws.com/v1/documentation/api/latest/reference/config.html)
    assert len(FailingSts.calls) == 2


# -- the log as a file --------------------------------------------------------------------


def test_an_existing_state_folder_is_made_private_by_the_first_line(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    Audit(folder / "audit.jsonl").write("started", "r1")
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_fifo_with_a_reader_planted_as_the_log_gets_no_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    os.mkfifo(log, 0o600)
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)  # someone listening on it
    try:
        with pytest.raises(OSError, match="is a FIFO, not a regular file"):
            Audit(log).write("started", "r1", runbook="cordon")
        assert os.read(reader, 4096) == b""  # nothing was written to it
    finally:
        os.close(reader)


def test_a_line_that_cannot_reach_the_disk_fails_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", disk_full)
        with pytest.raises(OSError, match="No space left"):
            Audit(tmp_path / "audit.jsonl").write("started", "r1")


def test_writing_the_log_leaves_no_file_open(tmp_path: Path) -> None:
    audit = Audit(tmp_path / "audit.jsonl")
    audit.write("started", "r1")
    before = len(os.listdir("/proc/self/fd"))
    for i in range(20):
        audit.write("step", "r1", step=f"s{i}")
    assert len(os.listdir("/proc/self/fd")) == before


# -- `mignurse runs`: what a line may lack ------------------------------------------------------


def test_a_line_without_a_local_user_keeps_the_runs_who() -> None:
    events = [
        ev("started", "r1", who={"local": "alice@lap"}),
        ev("finished", "r1", outcome="succeeded", who={"kube": "admin"}),
    ]
    (run,) = runs_from_audit(events)
    assert run["who"] == "alice@lap"


def test_an_identity_line_before_the_start_is_not_the_runs_outcome() -> None:
    events = [ev("identity", "r1", aws="arn:aws:iam::1:user/a"), ev("started", "r1")]
    (run,) = runs_from_audit(events)
    assert run["outcome"] == "running"


def test_an_undo_stopped_by_ctrl_c_is_shown_so_whatever_the_state_says(tmp_path: Path) -> None:
    state = RunState(
        run_id="r1", runbook="cordon", params={}, context="c", cluster="k", target="n",
        holder="h", steps=[StepState(id="s", action="cordon")], status="interrupted",
    )  # fmt: skip
    events = [
        ev("started", "r1"),
        ev("finished", "r1", outcome="interrupted"),
        ev("undo-started", "r1"),
        ev("finished", "r1", outcome="undo-interrupted"),
    ]
    (run,) = runs_from_audit(events, {"r1": state})
    assert run["outcome"] == "undo-interrupted"
