"""The two terminal sizes the app's screens are driven at: 80x24, the smallest a terminal
opens at and where a layout breaks first, in `make test`; 120x40 in the deep tier
(`make deep`) as well."""

from __future__ import annotations

import pytest

SIZES = [
    pytest.param((80, 24), id="80x24"),
    pytest.param((120, 40), id="120x40", marks=pytest.mark.deep),
]
sizes = pytest.mark.parametrize("size", SIZES)
