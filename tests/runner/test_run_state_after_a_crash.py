"""What `--resume`, `--undo` and `mignurse runs` find after a crash (mignurse/runner/state.py):
a state file that is either the old one or the new one, never half of each; a run whose
process is gone on this host is "killed", one on another host cannot be judged from here;
a step is looked at by undo when it may have changed something."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.paths import runs_dir
from mignurse.runner.state import (
    APPLIED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    UNDO_FAILED,
    VERIFIED,
    RunState,
    StepState,
    list_runs,
    process_alive,
)


def a_run(run_id: str = "3f2a0001", **kw: object) -> RunState:
    state = RunState(
        run_id=run_id,
        runbook="cordon",
        params={"node": "ip-10-0-1-2.ec2.internal"},
        context="prod",
        cluster="ml-prod",
        target="ip-10-0-1-2.ec2.internal",
        holder="alice@laptop",
        steps=[StepState(id="cordon", action="cordon")],
    )
    for name, value in kw.items():
        setattr(state, name, value)
    return state


@pytest.fixture
def ended_pid() -> int:
    """The pid of a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def zombie_pid() -> Iterator[int]:
    """A process that exited and was not reaped yet: a zombie (`ps` state Z)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 30
    while stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.02)
    yield proc.pid
    proc.wait()


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_saved_state_loads_back_as_it_was(state_home: Path) -> None:
    state = a_run()
    state.steps[0].prior = {"wasUnschedulable": False}
    state.save()

    back = RunState.load("3f2a0001")

    assert back == state
    assert back.updated  # stamped at each save
    assert [p.name for p in runs_dir().iterdir()] == ["3f2a0001.json"]  # no temp file left


def test_a_save_that_dies_midway_leaves_the_previous_state_whole(
    state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = a_run()
    state.save()
    before = state.path.read_bytes()
    state.status = SUCCEEDED

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        state.save()

    assert state.path.read_bytes() == before
    assert [p.name for p in runs_dir().iterdir()] == ["3f2a0001.json"]


@pytest.mark.parametrize("run_id", ["", "../passwd", "old/../../passwd", ".3f2a0001"])
def test_a_run_id_that_is_not_a_plain_name_is_never_read(state_home: Path, run_id: str) -> None:
    a_run().save()
    (runs_dir() / "old").mkdir()
    (runs_dir().parent / "passwd.json").write_text("{}")  # beside the runs folder
    a_run(".3f2a0001").save()  # a temporary file's name: never a run of its own
    a_run("").save()  # `.json`, hidden: `--resume ""` must not find it
    with pytest.raises(FileNotFoundError):
        RunState.load(run_id)


def test_runs_lists_every_readable_state_oldest_first_and_skips_a_broken_one(
    state_home: Path,
) -> None:
    newer = a_run("bbbb0002", created="2026-11-20T12:05:00.000000Z")
    older = a_run("cccc0003", created="2026-11-20T12:00:00.000000Z")
    newer.save()
    older.save()
    (runs_dir() / "dddd0004.json").write_text('{"run_id": "dddd0004", "runb')  # torn by hand
    (runs_dir() / "eeee0005.json").write_text('{"unexpected": 1}')

    assert [r.run_id for r in list_runs()] == ["cccc0003", "bbbb0002"]


# -- a live run or a killed one -------------------------------------------------------------


def test_a_running_state_whose_process_is_gone_is_shown_killed(
    state_home: Path, ended_pid: int
) -> None:
    state = a_run(pid=ended_pid)
    assert not state.alive()
    assert state.shown_status() == "killed"


def test_a_running_state_whose_process_is_a_zombie_is_shown_killed(zombie_pid: int) -> None:
    assert os.kill(zombie_pid, 0) is None  # the pid still answers signals
    assert process_alive(zombie_pid) is False
    assert a_run(pid=zombie_pid).shown_status() == "killed"


def test_a_running_state_whose_process_lives_is_running(live_pid: int) -> None:
    state = a_run(pid=live_pid)
    assert state.alive()
    assert state.shown_status() == RUNNING


def test_a_run_on_another_machine_cannot_be_judged_from_here(ended_pid: int) -> None:
    state = a_run(pid=ended_pid, host="bobs-laptop")
    assert state.alive()
    assert state.shown_status() == "running on bobs-laptop"


def test_this_process_is_not_another_live_run() -> None:
    state = a_run(pid=os.getpid(), host=socket.gethostname())
    assert not state.alive()  # the resume running now is not a run that holds the node
    assert state.shown_status() == RUNNING


def test_a_finished_run_shows_its_status_whatever_its_process(ended_pid: int) -> None:
    assert a_run(pid=ended_pid, status=SUCCEEDED).shown_status() == SUCCEEDED
    assert a_run(pid=ended_pid, status=SUCCEEDED, host="bobs-laptop").shown_status() == SUCCEEDED


@pytest.mark.parametrize("pid", [0, -1])
def test_no_pid_is_no_process(pid: int) -> None:
    assert process_alive(pid) is False


# -- which steps undo looks at -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "applied", "intents", "touched"),
    [
        (PENDING, None, 0, False),
        (PENDING, None, 1, True),  # killed right after announcing a change: it may be there
        (STOPPED, None, 2, True),
        (APPLIED, {"wasUnschedulable": False}, 0, True),
        (VERIFIED, {"wasUnschedulable": False}, 0, True),
        (FAILED, {"x": 1}, 0, True),
        (UNDO_FAILED, {"x": 1}, 0, True),
        (SKIPPED, {"x": 1}, 0, False),
        (VERIFIED, None, 0, False),
    ],
)
def test_undo_looks_at_a_step_that_may_have_changed_something(
    status: str, applied: dict[str, int] | None, intents: int, touched: bool
) -> None:
    step = StepState(id="s", action="cordon", status=status, applied=applied, intents=intents)
    assert step.touched is touched


def test_a_fresh_step_has_changed_nothing() -> None:
    step = StepState(id="cordon", action="cordon")
    assert (step.status, step.attempts, step.intents, step.touched) == (PENDING, 0, 0, False)


def test_a_state_without_a_host_is_judged_on_this_machine(ended_pid: int) -> None:
    """A state written before runs recorded their host."""
    state = a_run(pid=ended_pid, host="")
    assert not state.alive()
    assert state.shown_status() == "killed"


def test_init_is_a_live_process() -> None:
    assert process_alive(1) is True


def test_another_users_run_is_alive_though_it_cannot_be_signalled(
    live_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user who is not root meets a run started by a colleague on a shared box: the
    kernel refuses the signal (EPERM) because the process is there."""

    def not_yours(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    with monkeypatch.context() as patched:
        patched.setattr(os, "kill", not_yours)
        assert process_alive(live_pid) is True
        assert a_run(pid=live_pid).shown_status() == RUNNING


def test_a_live_run_is_alive_where_proc_cannot_be_read(
    live_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a readable /proc (macOS, a hardened container) the signal alone decides."""
    read_text = Path.read_text

    def no_proc(path: Path, *args: object, **kwargs: object) -> str:
        if str(path).startswith("/proc/"):
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(Path, "read_text", no_proc)
        assert process_alive(live_pid) is True


def test_the_runs_folder_is_made_private_when_a_state_is_saved(state_home: Path) -> None:
    runs = runs_dir()
    runs.mkdir(parents=True)
    runs.chmod(0o755)
    state = a_run()
    state.save()
    assert runs.stat().st_mode & 0o777 == 0o700
    assert state.path.stat().st_mode & 0o777 == 0o600


def test_a_deleted_state_is_gone_and_deleting_it_again_is_fine(state_home: Path) -> None:
    state = a_run()
    state.save()
    state.delete()
    assert not state.path.exists()
    state.delete()
    with pytest.raises(FileNotFoundError):
        RunState.load(state.run_id)


def test_looking_whether_a_run_is_alive_sends_it_nothing() -> None:
    # SIGHUP as by default (a shell started under nohup would pass it on ignored)
    wait = (
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
        "print('ready', flush=True); time.sleep(60)"
    )
    run = subprocess.Popen([sys.executable, "-c", wait], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None and run.stdout.readline() == "ready\n"
        assert process_alive(run.pid) is True
        with pytest.raises(subprocess.TimeoutExpired):
            run.wait(timeout=0.5)  # still running: no SIGHUP or other signal reached it
    finally:
        run.kill()
        run.wait()
