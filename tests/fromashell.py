"""`mignurse` started as from an interactive shell, whatever this test process inherited:
SIGHUP at its default action. A job run under `nohup` (as CI may run the suite) ignores
SIGHUP, and an ignored signal is inherited through fork and exec; mignurse, rightly, keeps
ignoring a SIGHUP it started with ignored, so a test of what a hangup does must start it as a
terminal's shell would."""

from __future__ import annotations

import sys

_DEFAULT_HANGUP = (
    "import runpy, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
    "sys.argv[0] = 'mignurse'; runpy.run_module('mignurse', run_name='__main__')"
)


def mignurse_command(*args: str) -> list[str]:
    """The argv of `mignurse ARGS` as a shell starts it (`python -m mignurse ARGS`)."""
    return [sys.executable, "-c", _DEFAULT_HANGUP, *args]
