"""Fixtures of the runner tests (kept in enginehelpers.py; other helpers may add theirs)."""

from __future__ import annotations

from .enginehelpers import cluster_for, state_home

__all__ = ["cluster_for", "state_home"]
