"""One module per finding id; each exposes `rule(inp) -> list[Finding]`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mignurse.diagnose.engine import Rule

RULES: list[tuple[str, Rule]] = []
