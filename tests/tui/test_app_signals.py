"""The app as a user runs it, in a terminal (a pseudo-terminal here), asked to quit by a
signal: SIGHUP (its terminal closed), SIGTERM, and SIGINT (the app reads Ctrl-C as a key, so
a SIGINT comes from outside: `kill -INT`, a wrapper's `timeout -s INT`). Each quits as from
the app's own key: the terminal's alternate screen is left and the process ends, with 130
after SIGINT as for any interrupted command."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

WAIT = 120.0  # seconds before a test gives up on the app (never a speed)
ALTERNATE_SCREEN_ON = b"\x1b[?1049h"
ALTERNATE_SCREEN_OFF = b"\x1b[?1049l"


class _Terminal:
    """`mignurse demo` on a pseudo-terminal of 40x120, everything it writes kept."""

    def __init__(self) -> None:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mignurse", "demo"],
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env=env,
            start_new_session=True,  # its own terminal, as a user's shell gives it
        )
        os.close(follower)
        self._leader = leader
        self.written = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._leader, 65536)
            except OSError:  # the follower closed: the process is gone
                return
            if not data:
                return
            self.written += data

    def wait_for(self, what: bytes) -> None:
        deadline = time.monotonic() + WAIT
        while what not in self.written:
            assert self.process.poll() is None, bytes(self.written[-2000:])
            assert time.monotonic() < deadline, bytes(self.written[-2000:])
            time.sleep(0.1)

    def all_written(self) -> bytes:
        """What it wrote, to the end (once it has ended)."""
        self._reader.join(WAIT)
        return bytes(self.written)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        os.close(self._leader)


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 0), (signal.SIGHUP, 0)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_a_signal_quits_the_app_as_its_own_key_does(signum: int, code: int) -> None:
    terminal = _Terminal()
    try:
        terminal.wait_for(ALTERNATE_SCREEN_ON)
        terminal.wait_for(b"NodePool")  # the fleet view drawn: the app is up
        terminal.process.send_signal(signum)
        assert terminal.process.wait(WAIT) == code
        written = terminal.all_written()
        # the user's screen given back: the alternate screen left after it was last entered
        assert written.rfind(ALTERNATE_SCREEN_OFF) > written.rfind(ALTERNATE_SCREEN_ON)
    finally:
        terminal.close()
