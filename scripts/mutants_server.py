"""The test runner of scripts/mutants.py: one per copy of the checkout, started in it.

It imports pytest, its plugins and mignurse once, then reads one request a line on stdin
(JSON: the mutated file, the function holding the mutation, the tests, a time limit) and
forks a child per mutant. The child puts the mutated function's code in place of the
original's (in the live function objects, so every reference already taken sees it; the
file in the copy is mutated too, for the processes the tests start), runs pytest on the
tests with `-x`, and exits with pytest's status. The answer is one JSON line on stdout:
{"rc": N} or {"rc": null, "timeout": true}. A mutant that cannot be put in place this way
answers {"rc": 99} and is run by a fresh interpreter instead.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pathlib
import signal
import sys
import time
import types

CANNOT_PATCH = 99


def _preload() -> None:
    import pytest  # noqa: F401

    import mignurse.cli
    import mignurse.sim  # noqa: F401
    from mignurse.runner.steps import load_actions

    load_actions()
    # every module of the package under test ($MUTANTS_PACKAGE, mignurse/runner unless
    # told): a function is put in place only in a module already imported
    package = os.environ.get("MUTANTS_PACKAGE", "mignurse/runner")
    modules = [
        ".".join(path.with_suffix("").parts).removesuffix(".__init__")
        for path in sorted(pathlib.Path(package).rglob("*.py"))
    ]
    for name in (
        *modules,
        "mignurse.runner.engine",
        "mignurse.sim.simcluster",
        "mignurse.sim.nodes",
        "moto.server",
        "boto3",
        "hypothesis",
        "xdist",
        "pytest_timeout",
        "pytest_asyncio",
        "textual",
    ):
        with contextlib.suppress(ImportError):
            __import__(name)


def _codes(code: types.CodeType):  # type: ignore[no-untyped-def]
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _patch(path: str, outer: str, outer_line: int) -> bool:
    """Put the mutated `outer` in place of the live one; False when it cannot be."""
    with open(path) as handle:
        source = handle.read()
    mutated = compile(source, path, "exec")
    new = next(
        (c for c in _codes(mutated) if c.co_qualname == outer and c.co_firstlineno == outer_line),
        None,
    )
    if new is None:
        return False
    live = [
        f
        for f in gc.get_objects()
        if isinstance(f, types.FunctionType)
        and f.__code__.co_filename == path
        and f.__code__.co_qualname == outer
        and f.__code__.co_firstlineno == outer_line
    ]
    if not live:
        return False
    for function in live:
        if function.__code__.co_freevars != new.co_freevars:
            return False
        function.__code__ = new
    return True


def _child(request: dict[str, object], log: str) -> None:
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdin.close()
    path = str(request["path"])
    if request["outer"] and not _patch(path, str(request["outer"]), int(request["outer_line"])):  # type: ignore[call-overload]
        os._exit(CANNOT_PATCH)
    import pytest

    try:
        rc = int(pytest.main([str(a) for a in request["args"]]))  # type: ignore[union-attr]
    except BaseException:  # noqa: BLE001 (the child's status is all that matters)
        rc = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def main() -> None:
    # Started under nohup (or from a shell that ignores them), the stop signals would be
    # ignored in every test too, and a mutant in a signal path would look like a survivor.
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    _preload()
    log = os.path.join(os.getcwd(), ".mutant.log")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, log)
        deadline = time.monotonic() + float(request["timeout"])
        answer: dict[str, object] = {"rc": None, "timeout": True}
        parent = os.getppid()
        while time.monotonic() < deadline and os.getppid() == parent:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                answer = {"rc": os.waitstatus_to_exitcode(status)}
                break
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # the child if it ran over, what it left behind
        if "timeout" in answer:
            os.waitpid(pid, 0)
        if os.getppid() != parent:
            return  # scripts/mutants.py was stopped: so is the mutant's run
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C reaches the whole group: scripts/mutants.py reports it
        sys.exit(130)
