"""pytest plugin of scripts/mutants.py: under coverage, each test's lines are recorded under
the test's node id (a coverage context, as pytest-cov's `--cov-context=test` does), and every
run writes each test's duration and the tests that failed to $MUTANTS_DURATIONS."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

__all__ = ["pytest_runtest_logreport", "pytest_runtest_setup", "pytest_sessionfinish"]  # hooks

_durations: dict[str, float] = {}
_failed: list[str] = []


def _switch(context: str) -> None:
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(context)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _switch(item.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)
    if report.when == "teardown":
        _switch("")


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("MUTANTS_DURATIONS")
    if out:
        Path(out).write_text(json.dumps({"durations": _durations, "failed": _failed}))
