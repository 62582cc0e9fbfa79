"""One line per measured figure, so `make bench` can put every benchmark in one table.

A benchmark prints its own report as it likes and, for each figure held to a target, calls
`figure(...)`, which prints one machine-readable line:

    FIGURE {"bench": "bench_app", "name": "first finding on screen", "value": 1.7, ...}

`benchmarks/run_all.py` runs the benchmarks, reads these lines and prints the table: the
figure, its target, the peer or floor measured in the same run, and the ratio to it.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

PREFIX = "FIGURE "


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    target: float | None = None,
    higher_is_better: bool = False,
    peer: str | None = None,
    peer_value: float | None = None,
    ratio_target: float | None = None,
) -> None:
    """Print one figure. `target` bounds `value` itself (at most, or at least where
    `higher_is_better`); `peer`/`peer_value` is what the same run measured for the thing
    beside it (kubectl, bare json.loads, one node alone), and `ratio_target` bounds
    value / peer_value."""
    bench = Path(sys.argv[0]).stem
    record = {
        "bench": bench,
        "name": name,
        "value": _finite(value),
        "unit": unit,
        "target": _finite(target),
        "higher_is_better": higher_is_better,
        "peer": peer,
        "peer_value": _finite(peer_value),
        "ratio_target": _finite(ratio_target),
    }
    print(PREFIX + json.dumps(record), flush=True)


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), 6)
