"""Across several bundles (or clusters), each finding's deadline is read at its own source's
moment: a bundle collected later does not make another's repair read as overdue."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from mignurse.session import FleetSource, Member, finding_now

EARLY = datetime(2026, 12, 6, 23, 3, tzinfo=UTC)
LATE = datetime(2026, 12, 6, 23, 6, tzinfo=UTC)


class _Bundle:
    def __init__(self, now: datetime) -> None:
        self._now = now
        self.notices: list[str] = []
        self.collect_reports: list[str] = []

    def now(self) -> datetime:
        return self._now


def _finding(nodepool: str, nodes: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(nodepool=nodepool, nodes=nodes)


def test_each_finding_is_judged_at_its_own_bundle_s_moment() -> None:
    late = Member(SimpleNamespace(context="mig-hook"), _Bundle(LATE))  # given first
    early = Member(SimpleNamespace(context="dcgm"), _Bundle(EARLY))
    source = FleetSource([late, early])
    assert source.now() == LATE  # the view's own clock: the first part's
    assert finding_now(source, _finding("dcgm/gpu-inference")) == EARLY
    assert finding_now(source, _finding("", ("dcgm/ip-10-0-41-207",))) == EARLY
    assert finding_now(source, _finding("mig-hook/gpu-mig")) == LATE
    # a finding of no known cluster is read by the view's clock
    assert finding_now(source, _finding("")) == LATE
    assert finding_now(source, _finding("gone/pool")) == LATE


def test_one_source_is_its_own_moment() -> None:
    bundle = _Bundle(EARLY)
    assert finding_now(bundle, _finding("gpu-inference")) == EARLY
