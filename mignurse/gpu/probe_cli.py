"""Print the NVML MIG probe as JSON or a short table; the exit code says how it went.

`python -m mignurse.gpu.probe_cli -o json|table` on a GPU node; read-only (see nvml.py).
"""

from __future__ import annotations

import argparse
import json
import sys

from mignurse.gpu.nvml import probe
from mignurse.model import (
    MIG_NOT_SUPPORTED,
    PROBE_DRIVER_NOT_LOADED,
    PROBE_ERROR,
    PROBE_LIBRARY_NOT_FOUND,
    PROBE_NO_GPUS,
    PROBE_OK,
    MigState,
)

EXIT_OK = 0
EXIT_NOTHING = 1  # no GPUs, or none of them can do MIG
EXIT_FAILED = 2  # library missing, driver not loaded, or an NVML error
OUTPUTS = ("json", "table")

_REASONS = {
    PROBE_LIBRARY_NOT_FOUND: "NVML library not found (no NVIDIA driver installed here?)",
    PROBE_DRIVER_NOT_LOADED: "NVIDIA driver not loaded",
    PROBE_ERROR: "NVML error",
    PROBE_NO_GPUS: "no GPUs",
}


def exit_code(state: MigState) -> int:
    if state.status == PROBE_OK:
        if state.gpus and all(g.mig_current == MIG_NOT_SUPPORTED for g in state.gpus):
            return EXIT_NOTHING
        return EXIT_OK
    return EXIT_NOTHING if state.status == PROBE_NO_GPUS else EXIT_FAILED


def reason(state: MigState) -> str:
    """One line for stderr saying why the exit code is not 0."""
    if state.status == PROBE_OK:
        return "no GPU here supports MIG"
    said = _REASONS.get(state.status, state.status)
    return f"{said}: {state.detail}" if state.detail else said


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n}×{p}" for p, n in sorted(counts.items())) or "-"


def table(state: MigState) -> str:
    """GPU index, name, MIG current/pending, MIG device count and profile counts."""
    rows = [("GPU", "NAME", "MIG CURRENT/PENDING", "DEVICES", "PROFILES")]
    for gpu in state.gpus:
        mode = f"{gpu.mig_current}/{gpu.mig_pending}"
        if gpu.mode_change_pending:
            mode += " (change pending)"
        counts = _counts(gpu.profile_counts())
        rows.append((str(gpu.index), gpu.name, mode, str(len(gpu.devices)), counts))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]
    head = f"NVML probe: {state.status}, driver {state.driver_version or 'unknown'}"
    return "\n".join([head, *lines]) if state.gpus else head


def run(output: str) -> int:
    """Probe, print in `output` form ("json" or "table"), and return the exit code."""
    if output not in OUTPUTS:
        print(f"unknown output {output!r}: use one of {', '.join(OUTPUTS)}", file=sys.stderr)
        return EXIT_FAILED
    state = probe()
    if output == "json":
        print(json.dumps(state.to_json(), indent=2))
    else:
        print(table(state))
    code = exit_code(state)
    if code != EXIT_OK:
        print(f"mignurse probe: {reason(state)}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mignurse.gpu.probe_cli",
        description="Read every GPU's MIG mode and MIG devices through NVML (read-only).",
    )
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    args = parser.parse_args(argv)
    return run(args.output)


if __name__ == "__main__":
    sys.exit(main())
