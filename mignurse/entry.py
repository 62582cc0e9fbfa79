"""The `mignurse` command's entry point (the `mignurse` script and `python -m mignurse`).

Each command handles Ctrl-C as it goes (`cli._main`, the runner, the collector), but only
once it runs: a Ctrl-C while the program still loads its modules or parses its arguments
(a tenth of a second, longer on a busy machine) raised KeyboardInterrupt through the import
machinery and printed its traceback. Here it ends as an interrupted command ends: exit code
130 and no traceback. The imports are made inside the guard for that reason.

SIGTERM and SIGHUP (`kill`, a closed terminal, a wrapper's timeout) end a command as Ctrl-C
does, with 128 + the signal's number, where Python's default ended the process on the spot:
a collection then closes its partial bundle and deletes the NodeDiagnostic it made, and the
files a kubeconfig's certificate and key data were written to are removed. A command that
handles them itself (`watch`, `run`, the app, `sim serve`) sets its own handlers over these.
A SIGHUP ignored where the command started (`nohup`) stays ignored.
"""

from __future__ import annotations

import signal
import sys

# cli.common's EXIT_INTERRUPTED, written out: the interrupt may come while cli.common loads
EXIT_INTERRUPTED = 130
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_received: list[int] = []  # SIGTERM and SIGHUP, as they came


def run() -> None:
    _end_as_ctrl_c()
    try:
        from mignurse.cli import main

        code = main()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    try:
        end(code)
    except KeyboardInterrupt:  # a signal that came before `end` had its handlers in place
        end(code)


def exit_code(code: int) -> int:
    """The process's exit code for a command that returned `code`: an interrupt that came as
    SIGTERM or SIGHUP is 128 + its number, as a shell reports a command it ended."""
    return 128 + _received[0] if code == EXIT_INTERRUPTED and _received else code


def _end_as_ctrl_c() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does."""

    def interrupt(signum: int, _frame: object) -> None:
        _received.append(signum)
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, interrupt)


def end(code: int) -> None:
    """End the process, the command done, with `exit_code(code)`: as the interpreter ends
    one, its threads joined and its exit functions run (one removes the files of a
    kubeconfig's certificate and key data), but not its teardown, where every module's
    objects are freed one by one. Nothing of mignurse's waits for that (each file and bundle
    is closed where it is written), and it took the signal handlers away first: a Ctrl-C
    there (a second one pressed as a collection ends) killed the process, which then
    reported death by SIGINT instead of the code it had. From here on a signal ends the
    process at once with that code (`_final_after_signals`)."""
    import atexit
    import threading

    code = exit_code(code)
    _final_after_signals(code)
    # what the interpreter's exit runs, in its order (both private, stable through 3.x):
    # the worker pools' exit hooks, then a join of every thread that is not a daemon
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    _exit(code)


def _final_after_signals(code: int) -> None:
    """The command has answered: a Ctrl-C (or SIGTERM, SIGHUP) from now on (a second one
    pressed as it stops, or one while the interpreter waits for a thread at exit) ends the
    process at once with the code it already has, where Python would raise KeyboardInterrupt
    inside its exit work, or be killed by the signal and report that instead."""

    def now(_signum: int, _frame: object) -> None:
        # the exit functions are skipped, but a kubeconfig's key is never left on disk
        kubeconfig = sys.modules.get("mignurse.cluster.kubeconfig")
        if kubeconfig is not None:
            kubeconfig.remove_data_files()
        _exit(code)

    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, now)


def _exit(code: int) -> None:
    """What is written flushed (a reader gone: nothing to keep), then the process ended."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
