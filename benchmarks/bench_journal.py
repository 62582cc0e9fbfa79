"""Parse a 200,000-line short-iso-precise journal: the node evidence floor for diagnose.

.venv/bin/python benchmarks/bench_journal.py [--lines N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from figures import figure

from mignurse.evidence import parse_journal, systemd_unit_actions, xid_errors

HOST = "ip-10-0-37-142.us-west-2.compute.internal"
SHAPES = (
    'kubelet[2345]: I1129 03:01:02.345000    2345 kubelet.go:2468] "SyncLoop ADD" pods=["x"]',
    'containerd[1234]: time="2026-11-29T03:01:02Z" level=error msg="failed to load cgroup stats"',
    "kernel: NVRM: Xid (PCI:0000:53:00): 79, pid=0, name=python, GPU has fallen off the bus.",
    "systemd[1]: Stopping kubelet.service - Kubernetes Kubelet...",
)


def journal(lines: int) -> str:
    out = []
    for i in range(lines):
        s = i // 100
        clock = f"{3 + s // 3600:02d}:{(s // 60) % 60:02d}:{s % 60:02d}"
        stamp = f"2026-11-29T{clock}.{i % 1_000_000:06d}+0000"
        out.append(f"{stamp} {HOST} {SHAPES[i % len(SHAPES)]}")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = journal(args.lines)
    parse_times, helper_times = [], []
    for _ in range(args.rounds):
        started = time.perf_counter()
        parsed = parse_journal(text, "journal:kubelet")
        parse_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        systemd_unit_actions(parsed.entries)
        xid_errors(parsed.entries)
        helper_times.append(time.perf_counter() - started)
    figure(f"parse {args.lines:,} journal lines", statistics.median(parse_times), "s")
    figure("unit actions + Xid scan of them", statistics.median(helper_times), "s")
    print(
        f"{args.lines} journal lines: parse {statistics.median(parse_times):.2f} s, "
        f"unit actions + Xid scan {statistics.median(helper_times):.2f} s "
        f"(median of {args.rounds}; {len(parsed.entries)} entries, {len(parsed.problems)} problems)"
    )


if __name__ == "__main__":
    main()
