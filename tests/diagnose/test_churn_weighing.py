"""replacement-churn's weighing of a pool's ends: the rate it shows is per hour of the span
since the first end, and a short median lifetime counts only over two known lifetimes.
Lifecycles as the watcher's history records them (mignurse/cluster/history.py)."""

from __future__ import annotations

from datetime import timedelta

from mignurse.diagnose.findings import INFO, WARNING

from .test_rule_boundaries import (
    NOW,
    SECOND,
    churn_of,
    consolidated,
    disrupted_pair,
    manually_deleted,
)


def test_the_rate_shown_is_per_hour_of_the_span_to_the_second() -> None:
    # Two manual deletions, the first 1 h 22 min 46 s ago: 7200 / 4966 = 1.4499/h.
    lived = timedelta(hours=5)
    first = NOW - timedelta(seconds=4966)
    (found,) = churn_of(manually_deleted(0, lived, first), manually_deleted(1, lived, NOW))
    assert "2 nodes replaced in the last 1h 22m (1.4/h)" in found.summary
    assert found.severity == INFO


def test_one_short_lived_node_among_unknown_lifetimes_is_no_short_lifetime_pattern() -> None:
    # The second consolidation is known by Karpenter's events alone, its creation unseen:
    # one 10-minute life is no median.
    short = consolidated(1, timedelta(minutes=10), NOW - timedelta(minutes=40))
    (found,) = churn_of(short, events=disrupted_pair(2, NOW - timedelta(minutes=20), SECOND))
    assert found.severity == INFO
    assert "median lifetime 10m" in found.summary
    assert "median node lifetime" not in found.summary

    (both,) = churn_of(short, consolidated(2, timedelta(minutes=10), NOW - timedelta(minutes=20)))
    assert both.severity == WARNING
    assert "median node lifetime 10m (< 30m)" in both.summary
