"""What making text inert costs a 5,000-node table and a 5,000-node JSON document.

.venv/bin/python benchmarks/bench_inert.py [--nodes N] [--rounds R]

Every cell the node table shows goes through `inert`, and everything a command prints through
the inert stdout (cli/__init__.py): this measures both against the same work without them.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable

from figures import figure

from mignurse.cli import _QuietPipe
from mignurse.inert import inert
from mignurse.render import plain_table

HEADER = ("NAME", "POOL", "TYPE", "STATUS", "AGE", "GPU", "CAPACITY", "AHR", "MIG", "ZONE")


def rows(nodes: int, planted: str = "") -> list[tuple[str, ...]]:
    return [
        (
            f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal{planted}",
            f"gpu-pool-{i % 20}",
            "p5.48xlarge",
            "Ready" if i % 30 else "NotReady",
            "3d4h",
            "8/8",
            "spot",
            "AcceleratedHardwareReady" + planted,
            "1g.10gb:7",
            "us-west-2a",
        )
        for i in range(nodes)
    ]


def document(nodes: int) -> dict[str, object]:
    return {
        "items": [
            {
                "name": f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal",
                "labels": {f"example.com/label-{j}": f"value-{j}" for j in range(20)},
                "conditions": [{"type": "Ready", "status": "True", "message": "kubelet ready"}] * 5,
            }
            for i in range(nodes)
        ]
    }


def median_ms(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clean, hostile = rows(args.nodes), rows(args.nodes, "\x1b]0;t\x07\u202e")
    cells = [cell for row in clean for cell in row]
    bad = [cell for row in hostile for cell in row]
    doc = document(args.nodes)
    figures = {
        f"inert over {len(cells):,} table cells": median_ms(
            lambda: [inert(c) for c in cells], args.rounds
        ),
        f"inert over {len(bad):,} cells, each with escapes": median_ms(
            lambda: [inert(c) for c in bad], args.rounds
        ),
        f"plain table of {args.nodes:,} rows": median_ms(
            lambda: plain_table(HEADER, clean, io.StringIO()), args.rounds
        ),
        f"json.dump of {args.nodes:,} nodes, stdout as before": median_ms(
            lambda: json.dump(doc, _QuietPipe(io.StringIO(), made_inert=False), indent=2),
            args.rounds,
        ),
        f"json.dump of {args.nodes:,} nodes, through the inert stdout": median_ms(
            lambda: json.dump(doc, _QuietPipe(io.StringIO()), indent=2), args.rounds
        ),
        f"one write of {args.nodes:,} nodes' JSON (nodes, diagnose), stdout as before": median_ms(
            lambda: _QuietPipe(io.StringIO(), made_inert=False).write(json.dumps(doc, indent=2)),
            args.rounds,
        ),
        f"one write of {args.nodes:,} nodes' JSON, through the inert stdout": median_ms(
            lambda: _QuietPipe(io.StringIO()).write(json.dumps(doc, indent=2)), args.rounds
        ),
    }
    for what, ms in figures.items():
        print(f"{what}: {ms:.0f} ms (median of {args.rounds})")
    names = list(figures)
    figure(names[0], figures[names[0]], "ms")
    figure(names[1], figures[names[1]], "ms")
    # The net in front of stdout, against the same write without it.
    figure(names[6], figures[names[6]], "ms", peer="without the net", peer_value=figures[names[5]])


if __name__ == "__main__":
    main()
