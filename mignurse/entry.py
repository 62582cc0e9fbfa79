"""The `mignurse` command's entry point (the `mignurse` script and `python -m mignurse`).

Each command handles Ctrl-C as it goes (`cli._main`, the runner, the collector), but only
once it runs: a Ctrl-C while the program still loads its modules or parses its arguments
(a tenth of a second, longer on a busy machine) raised KeyboardInterrupt through the import
machinery and printed its traceback. Here it ends as an interrupted command ends: exit code
130 and no traceback. The imports are made inside the guard for that reason.
"""

from __future__ import annotations

import sys

# cli.common's EXIT_INTERRUPTED, written out: the interrupt may come while cli.common loads
EXIT_INTERRUPTED = 130


def run() -> None:
    try:
        from mignurse.cli import main

        code = main()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    _final_after_ctrl_c(code)
    sys.exit(code)


def _final_after_ctrl_c(code: int) -> None:
    """The command has answered: a Ctrl-C from now on (a second one pressed as it stops, or
    one while the interpreter waits for a thread at exit) ends the process at once with the
    code it already has, where Python would raise KeyboardInterrupt inside its exit work, or
    be killed by the signal and report that instead."""
    import contextlib
    import os
    import signal

    def now(_signum: int, _frame: object) -> None:
        # the exit functions are skipped, but a kubeconfig's key is never left on disk
        kubeconfig = sys.modules.get("mignurse.cluster.kubeconfig")
        if kubeconfig is not None:
            kubeconfig.remove_data_files()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
                stream.flush()
        os._exit(code)

    with contextlib.suppress(ValueError):  # not the main thread (another program's thread)
        signal.signal(signal.SIGINT, now)
