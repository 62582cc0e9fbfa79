"""The UI thread's turn first (`mignurse.turns`): the diagnosis worker waits between its
rules while the app places a refresh, never longer than its bound, and never on the UI
thread; the app marks its refreshes and leaves nothing marked when it exits."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mignurse import turns
from mignurse.diagnose.engine import all_rules
from mignurse.sim import SimCluster
from mignurse.tui import refresh, refreshloop
from mignurse.tui.app import MigNurseApp

from .test_node_screen import until


@pytest.fixture(autouse=True)
def _idle_after() -> Iterator[None]:
    yield
    turns.ui_done()


def _after_ui_in_a_worker() -> tuple[threading.Thread, threading.Event]:
    returned = threading.Event()

    def work() -> None:
        turns.after_ui()
        returned.set()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    return worker, returned


def test_a_worker_waits_while_the_ui_thread_works_and_goes_on_when_it_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "MAX_WAIT_SECONDS", 60.0)
    turns.ui_working()
    worker, returned = _after_ui_in_a_worker()
    assert not returned.wait(0.3), "the worker went on while the UI thread worked"
    turns.ui_done()
    assert returned.wait(30), "the worker still waited once the UI thread was done"
    worker.join(30)


def test_a_ui_thread_that_stays_busy_holds_a_worker_no_longer_than_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "MAX_WAIT_SECONDS", 0.2)
    turns.ui_working()  # and never done
    worker, returned = _after_ui_in_a_worker()
    assert returned.wait(30), "a busy UI thread held the worker for good"
    worker.join(30)


def test_the_ui_thread_itself_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "MAX_WAIT_SECONDS", 60.0)
    turns.ui_working()
    waited = threading.Event()
    monkeypatch.setattr(turns._idle, "wait", lambda *_: waited.set())
    turns.after_ui()  # (pytest runs the test on the main thread, as the app's UI runs)
    assert not waited.is_set()


async def test_the_app_marks_each_refresh_and_its_diagnosis_steps_aside_between_rules(
    repair_loop: tuple[SimCluster, MigNurseApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, app = repair_loop
    marks: list[str] = []

    def working() -> None:
        marks.append("working")
        turns.ui_working()

    monkeypatch.setattr(refreshloop, "ui_working", working)
    asked: list[str] = []
    monkeypatch.setattr(refresh, "after_ui", lambda: asked.append(threading.current_thread().name))
    app_any: Any = app
    async with app.run_test(size=(120, 40)):
        await until(lambda: app_any.diagnosis is not None and app_any.refreshes >= 2)
        assert "working" in marks
        # every rule of a whole diagnosis, then its fleet rows and its radar
        await until(lambda: len(asked) >= len(all_rules()) + 2)
        assert threading.main_thread().name not in asked
        turns.ui_working()  # a refresh the exit cuts short: it never ends
    assert turns._idle.is_set(), "the app ended with a refresh still marked"


def test_a_diagnosis_asks_for_its_turn_before_its_input_and_before_every_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[str] = []

    class _Source:
        def judge_stage(self) -> int:
            return 1

        def diagnosis_input(self) -> tuple[object, str]:
            steps.append("input")
            return object(), ""

    def stream(_inp: object, *, rules: Any) -> Iterator[Any]:
        for name, _rule in rules:
            steps.append("rule")
            yield refresh.RuleResult(name, [])

    monkeypatch.setattr(refresh, "after_ui", lambda: steps.append("turn"))
    monkeypatch.setattr(refresh, "diagnose_stream", stream)
    monkeypatch.setattr(refresh, "parts", lambda source: [("", source)])
    monkeypatch.setattr(refresh, "fleet_rows", lambda inp, diagnosis: [])
    monkeypatch.setattr(refresh, "radar", lambda inp, findings, horizon: [])
    monkeypatch.setattr(refresh, "freeze_survivors", lambda: None)
    refresh.Refresher(_Source()).diagnose(lambda update: None)
    rules = steps.count("rule")
    assert rules == len(all_rules())
    assert steps[:2] == ["turn", "input"]
    # the frame a refresh ends with is drawn before the first rule, as before every other
    assert all(steps[i - 1] == "turn" for i, step in enumerate(steps) if step == "rule")


def test_a_pool_thread_is_named_after_its_work_only_while_it_runs_it() -> None:
    names: list[str] = []

    def work() -> None:
        before = threading.current_thread().name
        with turns.working_as("diagnosis"):
            names.append(threading.current_thread().name)
        names.append(threading.current_thread().name)
        with contextlib.suppress(RuntimeError), turns.working_as("refresh"):
            raise RuntimeError("the work failed")
        names.append(threading.current_thread().name)
        assert names[1:] == [before, before]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(work).result()
    assert names[0] == "diagnosis"
