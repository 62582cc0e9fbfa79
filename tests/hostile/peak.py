"""A command's peak memory, measured in a process of its own.

`wait4`'s rusage of a child started straight from a test worker counts the worker's own pages
at the moment it forked (ru_maxrss is the child's high-water mark, fork included), so a worker
that had just read a 64 MiB file made every later measurement look 64 MiB bigger. A small
fresh interpreter starts the command instead and reports `RUSAGE_CHILDREN` for its one child:
getrusage(2) on Linux, ru_maxrss in KiB."""

from __future__ import annotations

import subprocess
import sys

_MEASURE = (
    "import resource, subprocess, sys\n"
    "timeout = float(sys.argv[1])\n"
    "try:\n"
    "    done = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL, capture_output=True,\n"
    "                          timeout=timeout)\n"
    "    out, err, code = done.stdout, done.stderr, done.returncode\n"
    "except subprocess.TimeoutExpired as exc:\n"
    "    out, err, code = exc.stdout or b'', (exc.stderr or b'') + b'\\n(killed at timeout)', 124\n"
    "sys.stdout.buffer.write(out); sys.stderr.buffer.write(err)\n"
    "sys.stderr.write('\\0peak %d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def peak_run(
    argv: list[str], *, env: dict[str, str], timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`argv` run to its end (killed past `timeout`, exit 124), and its peak RSS in bytes."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(timeout), *argv],
        capture_output=True,
        env=env,
        timeout=timeout + 60,
        check=False,
    )
    err = done.stderr.decode("utf-8", "replace")
    said, _, peak = err.rpartition("\0peak ")
    result = subprocess.CompletedProcess(
        argv, done.returncode, done.stdout.decode("utf-8", "replace"), said
    )
    return result, int(peak) * 1024


def mignurse_peak(
    *args: str, env: dict[str, str], timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`python -m mignurse ARGS` and its peak RSS in bytes."""
    return peak_run([sys.executable, "-m", "mignurse", *args], env=env, timeout=timeout)
