"""`python -m mignurse` processes forked from an interpreter that has already imported the CLI.

A test that starts the CLI a hundred times pays its start-up (the kubernetes client, boto3's
exceptions, the runbooks' step modules: about a second of CPU each time) a hundred times. This
helper pays it once per test worker: a server process imports the CLI's modules, then forks
one child per command. Each child is a real process of its own (its pid takes signals, its
exit status is its own, its stdin/stdout/stderr are the pipes the test made) that gets the
command's argv, environment and working directory and runs `mignurse/__main__.py` through
`runpy` as `python -m mignurse` does, so an exception, a SystemExit or an unhandled Ctrl-C
ends it exactly as it ends the interpreter. Only the imports were done before it started.
The CLI's own start-up (a fresh interpreter) stays covered by the tests that run
`python -m mignurse` directly.

The server is single-threaded (it forks) and serves one socket: a request is one SEQPACKET
message (argv, env, cwd) carrying three file descriptors; the answers are `started` (the
pid) and, when a child ends, `exit` (its status as subprocess reports it: -N for signal N).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

_MAX_MESSAGE = 1 << 20


# -- the server (this file run as a script) -------------------------------------------------


def _serve(sock: socket.socket) -> None:
    while True:
        while True:  # report every child that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            sock.send(json.dumps({"exit": pid, "code": code}).encode())
        ready, _, _ = select.select([sock], [], [], 0.02)
        if not ready:
            continue
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 3)
        except ConnectionError:
            return  # the test process is gone
        if not message:
            return  # ... closed its end
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _become(sock, request, fds)
            import runpy

            # Whatever ends the command (SystemExit, KeyboardInterrupt, an exception) leaves
            # this process as it would leave `python -m mignurse`.
            runpy.run_module("mignurse", run_name="__main__", alter_sys=True)
            sys.exit(0)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"started": pid}).encode())


def _become(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the child: the command's stdio, working directory, environment and argv."""
    sock.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # what `python -m` puts first
    sys.argv = [sys.executable, *request["argv"]]


def _main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    # What a `mignurse run` imports before it reads its arguments and the cluster.
    import mignurse.cli
    import mignurse.cli.run_runbook
    import mignurse.cli.runview
    import mignurse.collect.transports
    import mignurse.runner.engine
    import mignurse.runner.steps
    import mignurse.runner.wiring

    mignurse.runner.steps.load_actions()  # imports the step modules; reads nothing
    del mignurse
    sock.send(b'{"ready": true}')
    _serve(sock)


# -- the client (imported by the tests) ------------------------------------------------------


class _Server:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.exits: dict[int, int] = {}
        self.started: list[int] = []
        self._read(lambda: False, timeout=120, ready=True)

    def _read(self, done: Any, *, timeout: float, ready: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the CLI server did not answer")
            readable, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if not readable:
                continue
            message = self.sock.recv(_MAX_MESSAGE)
            if not message:
                raise RuntimeError("the CLI server ended")
            answer = json.loads(message)
            if "ready" in answer and ready:
                return
            if "started" in answer:
                self.started.append(int(answer["started"]))
            elif "exit" in answer:
                self.exits[int(answer["exit"])] = int(answer["code"])

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> int:
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
        with self.lock:
            socket.send_fds(self.sock, [request], fds)
            self._read(lambda: bool(self.started), timeout=60)
            return self.started.pop(0)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit status, or None once `timeout` seconds passed (None: no limit).
        The lock is let go between short reads, so another thread can start a command."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if pid in self.exits:
                    return self.exits.pop(pid)
                with contextlib.suppress(TimeoutError):
                    self._read(lambda: pid in self.exits, timeout=0.2)
                if pid in self.exits:
                    return self.exits.pop(pid)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        self.sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


_server: _Server | None = None


def _the_server() -> _Server:
    global _server
    if _server is None:
        _server = _Server()
        atexit.register(_server.close)
    return _server


class Child:
    """A started command, as much of `subprocess.Popen` as the tests use."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: str, stdout: int | None = None
    ) -> None:
        """`argv` is what follows `python -m mignurse`. stdin is /dev/null; stdout and stderr
        are pipes, read as text from `stdout` and `stderr`, unless `stdout` gives the file
        descriptor the command writes to instead (then `stdout` reads as empty)."""
        out_r, out_w = (
            os.pipe() if stdout is None else (os.open(os.devnull, os.O_RDONLY), os.dup(stdout))
        )
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            self.pid = _the_server().spawn(argv, env, cwd, [null, out_w, err_w])
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        self.stdout = io.TextIOWrapper(_reader(out_r), encoding="utf-8")
        self.stderr = io.TextIOWrapper(_reader(err_r), encoding="utf-8")
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            code = _the_server().wait(self.pid, timeout)
            if code is None:
                raise subprocess.TimeoutExpired(["mignurse", str(self.pid)], timeout or 0.0)
            self.returncode = code
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _reader(fd: int) -> BinaryIO:
    return os.fdopen(fd, "rb")


def run(
    argv: list[str], *, env: dict[str, str], cwd: str, timeout: float, stdout: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, mignurse, *argv], capture_output=True, text=True,
    stdin=DEVNULL, timeout=...)` on a forked child; `stdout=fd` as subprocess's `stdout=fd`."""
    child = Child(argv, env=env, cwd=cwd, stdout=stdout)
    collected: dict[str, str] = {}

    def drain(name: str, stream: io.TextIOWrapper) -> None:
        collected[name] = stream.read()
        stream.close()

    readers = [
        threading.Thread(target=drain, args=("out", child.stdout), daemon=True),
        threading.Thread(target=drain, args=("err", child.stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        code = child.wait(timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(30)
        raise
    for reader in readers:
        reader.join(timeout=30)
    return subprocess.CompletedProcess(
        ["mignurse", *argv], code, collected.get("out", ""), collected.get("err", "")
    )


if __name__ == "__main__":
    _main()
