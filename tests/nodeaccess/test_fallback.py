"""SSM first, SSH (here: local) when SSM does not manage the instance; never run twice."""

from __future__ import annotations

import io
import threading

from mignurse.nodeaccess.base import CommandResult
from mignurse.nodeaccess.fallback import FallbackShell
from mignurse.nodeaccess.local import LocalShell


class Refusing:
    transport = "ssm"
    node = "n1"

    def __init__(self, error: str, rc: int | None = None) -> None:
        self.error, self.rc, self.calls = error, rc, 0

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: io.BytesIO,  # type: ignore[override]
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        self.calls += 1
        return CommandResult("n1", "ssm", self.rc, 0.1, error=self.error)


def test_not_managed_falls_back() -> None:
    sink = io.BytesIO()
    shell = FallbackShell(
        Refusing("i-0 is not managed by SSM (no agent)"),
        LocalShell("n1"),
        when="is not managed by SSM",
    )
    result = shell.run("echo hello", timeout=10, stdout=sink)
    assert result.ok and result.transport == "local"
    assert sink.getvalue() == b"hello\n"


def test_no_fallback_after_ctrl_c() -> None:
    cancel = threading.Event()
    cancel.set()
    fallback = Refusing("never asked")
    result = FallbackShell(
        Refusing("i-0 is not managed by SSM"), fallback, when="is not managed by SSM"
    ).run("echo hello", timeout=10, stdout=io.BytesIO(), cancel=cancel)
    assert fallback.calls == 0 and "not managed" in result.error


def test_a_script_that_ran_is_never_run_again() -> None:
    primary = Refusing("script failed", rc=3)
    fallback = LocalShell("n1")
    result = FallbackShell(primary, fallback, when="is not managed by SSM").run(
        "echo twice", timeout=10, stdout=io.BytesIO()
    )
    assert result.rc == 3 and result.transport == "ssm"


def test_both_failing_says_both() -> None:
    shell = FallbackShell(
        Refusing("i-0 is not managed by SSM"), LocalShell("n1"), when="is not managed by SSM"
    )
    result = shell.run("exit 4", timeout=10, stdout=io.BytesIO())
    assert not result.ok
    assert result.error.startswith("i-0 is not managed by SSM; then over local: exit 4")
