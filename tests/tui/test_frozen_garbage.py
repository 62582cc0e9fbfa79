"""What the app keeps out of the cyclic collector's walks (so its passes do not stall the
screen) must not keep garbage alive for good: a cycle dropped before a refresh is freed by
it, and cycles that die after being frozen are reclaimed once the frozen set has grown."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from mignurse import gcpause


class Linked:
    """An object in a reference cycle, as a widget and its parent are."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process's collector as it was: nothing left frozen by the test."""
    yield
    gc.unfreeze()
    gc.collect()


@pytest.mark.usefixtures("unfrozen")
def test_a_cycle_dropped_before_a_freeze_is_freed_not_frozen() -> None:
    dropped = Linked()
    assert dropped.me is dropped  # a cycle: reference counting alone never frees it
    gone = weakref.ref(dropped)
    gc.collect()  # it lived long enough to reach the oldest generation, as rows do
    del dropped
    gcpause.freeze_survivors()
    assert gone() is None, "cyclic garbage was frozen instead of collected"


@pytest.mark.usefixtures("unfrozen")
def test_cycles_that_die_frozen_are_reclaimed_once_the_frozen_set_grows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gcpause, "RECLAIM_EVERY_SECONDS", 3600.0)
    monkeypatch.setattr(gcpause, "_last_reclaim", float("-inf"))
    monkeypatch.setattr(gcpause, "_frozen_after_reclaim", 0)
    gcpause.freeze_survivors()  # a reclaim, then the baseline: what is alive now
    frozen_then = gc.get_freeze_count()
    alive = [Linked() for _ in range(10)]
    gone = weakref.ref(alive[0])
    gcpause.freeze_survivors()
    del alive  # the cycles die frozen: no ordinary collection can see them
    gc.collect()
    assert gone() is not None
    monkeypatch.setattr(gcpause, "_last_reclaim", float("-inf"))  # the interval has passed
    grown = [Linked() for _ in range(frozen_then // 3 + 1)]  # more than a quarter more
    gcpause.freeze_survivors()
    assert gone() is None, "frozen garbage outlived a reclaim that was due"
    assert gc.get_freeze_count() >= len(grown), "the live objects went back to the walks"


@pytest.mark.usefixtures("unfrozen")
def test_no_reclaim_before_its_interval_however_much_is_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gcpause, "_last_reclaim", float("-inf"))
    monkeypatch.setattr(gcpause, "_frozen_after_reclaim", 0)
    gcpause.freeze_survivors()
    alive = [Linked() for _ in range(10)]
    gone = weakref.ref(alive[0])
    gcpause.freeze_survivors()
    del alive
    grown = [Linked() for _ in range(gc.get_freeze_count())]  # doubled
    gcpause.freeze_survivors()  # the full pass just ran: the next waits its interval
    assert gone() is not None
    assert grown
