"""Run the benchmarks one after another and print one table of their figures.

    make bench                      (every benchmark)
    .venv/bin/python benchmarks/run_all.py [--only bench_app,bench_cli] [--markdown FILE]
        [--busy N]

Each benchmark runs in its own interpreter, in turn (never two at once: they share the
machine's cores), and prints its own report as it goes; every figure it holds to a target is
also printed as one `FIGURE` line (benchmarks/figures.py), which this file gathers into the
table: the figure, its target, the peer or floor measured in the same run (kubectl, bare
json.loads, one node alone) and the ratio to it. A benchmark that fails is one row saying so.

`--busy N` keeps N other processes spinning on the CPU for the whole run (one per core is
"both cores busy"), to show which ratios hold when the machine is not quiet.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from figures import PREFIX

HERE = Path(__file__).resolve().parent

# In the order they run; the arguments are what the README's figures were taken with.
BENCHMARKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bench_cli", ()),
    ("bench_list", ("--rounds", "3")),
    ("bench_list_memory", ()),
    ("bench_diagnose", ()),
    ("bench_fleet", ()),
    ("bench_app", ()),
    ("bench_redaction", ()),
    ("bench_collect", ("--replay",)),
    ("bench_redaction_recall", ()),
    ("bench_journal", ()),
    ("bench_history", ()),
    ("bench_inert", ()),
    ("bench_responses", ()),
    ("bench_sim_requests", ()),
)


@dataclass(frozen=True, slots=True)
class Row:
    bench: str
    name: str
    value: float | None
    unit: str
    target: float | None
    higher_is_better: bool
    peer: str | None
    peer_value: float | None
    ratio_target: float | None

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.peer_value:
            return None
        return self.value / self.peer_value

    @property
    def met(self) -> bool | None:
        verdicts: list[bool] = []
        if self.target is not None and self.value is not None:
            verdicts.append(
                self.value >= self.target if self.higher_is_better else self.value <= self.target
            )
        if self.ratio_target is not None and self.ratio is not None:
            verdicts.append(self.ratio <= self.ratio_target)
        return all(verdicts) if verdicts else None


def run(bench: str, args: tuple[str, ...]) -> tuple[list[Row], str | None]:
    """Run one benchmark, echoing its output; its figures, and a line if it failed."""
    script = HERE / f"{bench}.py"
    if not script.is_file():
        return [], "not found"
    print(f"\n=== {bench} {' '.join(args)}".rstrip(), flush=True)
    started = time.monotonic()
    rows: list[Row] = []
    with subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(PREFIX):
                record = json.loads(line[len(PREFIX) :])
                rows.append(Row(**{**record, "bench": bench}))
            else:
                sys.stdout.write(line)
        rc = proc.wait()
    print(f"=== {bench}: {time.monotonic() - started:.0f} s", flush=True)
    # A benchmark that printed its figures and exits 1 for a target it missed has said so in
    # its rows; only one that printed none (it crashed, or its set-up failed) gets a row here.
    return rows, (f"exit status {rc}" if rc and not rows else None)


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """N processes that keep a core each busy until the block ends."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def table(rows: list[Row], failures: dict[str, str]) -> list[str]:
    lines = [
        "| benchmark | figure | value | target | peer (same run) | ratio | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        target = []
        if row.target is not None:
            target.append(("≥ " if row.higher_is_better else "≤ ") + _number(row.target, row.unit))
        if row.ratio_target is not None:
            target.append(f"≤ {row.ratio_target:g}x peer")
        peer = f"{row.peer} {_number(row.peer_value, row.unit)}" if row.peer else "—"
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "—"
        met = {True: "yes", False: "**no**", None: "—"}[row.met]
        lines.append(
            f"| {row.bench} | {row.name} | {_number(row.value, row.unit)} | "
            f"{', '.join(target) or '—'} | {peer} | {ratio} | {met} |"
        )
    for bench, why in failures.items():
        lines.append(f"| {bench} | (did not finish: {why}) | — | — | — | — | **no** |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (bench_app,...)")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--busy", type=int, default=0, metavar="N", help="keep N other processes spinning"
    )
    options = parser.parse_args()
    chosen = BENCHMARKS
    if options.only:
        wanted = {name.strip() for name in options.only.split(",") if name.strip()}
        unknown = wanted - {name for name, _ in BENCHMARKS}
        if unknown:
            print(f"unknown benchmark: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        chosen = tuple(b for b in BENCHMARKS if b[0] in wanted)
    rows: list[Row] = []
    failures: dict[str, str] = {}
    with busy(options.busy):
        for bench, args in chosen:
            found, failed = run(bench, args)
            rows.extend(found)
            if failed:
                failures[bench] = failed
    lines = table(rows, failures)
    if options.busy:
        lines.insert(0, f"(with {options.busy} other processes spinning on the CPU)\n")
    print("\n" + "\n".join(lines))
    if options.markdown:
        options.markdown.parent.mkdir(parents=True, exist_ok=True)
        options.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if failures or any(row.met is False for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
