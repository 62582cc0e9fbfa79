"""The fault trials' table: cleared when a session that runs them with -m slow starts, and
printed (written with the failing trials' logs to build/fault-trials.md) when it ends; on
the controller only, the workers write the records (tests/hostile/faulttable.py)."""

from __future__ import annotations

import shutil

import pytest

from .faulttable import RESULTS, TABLE, read_records, report

__all__ = ["pytest_sessionstart", "pytest_terminal_summary"]  # hooks pytest calls by name


def _controller_of_a_slow_run(config: pytest.Config) -> bool:
    slow = "slow" in str(config.getoption("markexpr") or "")
    return slow and not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller_of_a_slow_run(session.config):
        shutil.rmtree(RESULTS, ignore_errors=True)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if not _controller_of_a_slow_run(config):
        return
    records = read_records()
    if not records:
        return
    TABLE.write_text(report(records, logs=True))
    terminalreporter.write_line("")
    for line in report(records, logs=False).splitlines():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"(with the failing trials' logs: {TABLE})")
