"""`mignurse demo` keeps a kubeconfig and a history in a temp folder: a closed terminal
(SIGHUP) or a `kill` (SIGTERM) must not leave it behind, and a folder a killed demo left is
removed at the next start, while a running demo's is not."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mignurse.demo_folder import LOCK_NAME, PREFIX, sweep_abandoned


def demo_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(PREFIX + "*"))


def wait_until(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    ("signum", "hang_up"), [(signal.SIGHUP, True), (signal.SIGTERM, False)], ids=["hup", "term"]
)
def test_a_killed_terminal_leaves_no_demo_folder(
    tmp_path: Path, signum: int, hang_up: bool
) -> None:
    crashed = tmp_path / f"{PREFIX}left-by-a-sigkill"  # its lock is free: swept at start
    crashed.mkdir()
    (crashed / LOCK_NAME).write_text("")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MIGNURSE_"))}
    env.update(TMPDIR=str(tmp_path), TERM="xterm-256color", HOME=str(tmp_path))
    demo = subprocess.Popen(
        [sys.executable, "-m", "mignurse", "demo", "--speed", "1"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()

    def drain() -> None:  # a terminal nobody reads would block the app's writes
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:

        def started() -> list[Path]:
            return [f for f in demo_folders(tmp_path) if (f / "kubeconfig").exists()]

        assert wait_until(lambda: started() and len(screen) > 2000, 60), screen[-500:]
        assert (started()[0] / LOCK_NAME).exists() and not crashed.exists()
        if hang_up:
            os.close(master)  # the window closes; the kernel hangs the terminal up
        os.kill(demo.pid, signum)
        demo.wait(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        if not hang_up:
            os.close(master)
    assert demo_folders(tmp_path) == [], os.listdir(tmp_path)


def test_a_folder_left_by_a_killed_demo_is_swept_and_a_live_one_kept(tmp_path: Path) -> None:
    abandoned = tmp_path / f"{PREFIX}dead"
    running = tmp_path / f"{PREFIX}alive"
    foreign = tmp_path / f"{PREFIX}unknown"  # no lock file: nobody can tell: kept
    for folder in (abandoned, running, foreign):
        folder.mkdir()
        (folder / "kubeconfig").write_text("apiVersion: v1\n")
    (abandoned / LOCK_NAME).write_text("")
    (running / LOCK_NAME).write_text("")
    # The lock a running demo holds, taken here by another process.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(running / LOCK_NAME)!r}, os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert sweep_abandoned(tmp_path) == [abandoned]
    finally:
        holder.kill()
        holder.wait()
    assert not abandoned.exists() and running.exists() and foreign.exists()
    assert sweep_abandoned(tmp_path) == [running]  # its holder is gone now
