"""`mignurse probe`: this machine's MIG state through NVML (read-only)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    probe = sub.add_parser(
        "probe",
        help="the MIG state of this machine's GPUs, read through NVML (read-only)",
        description="Exit code: 0 read, 1 no GPUs or no MIG support, 2 NVML unusable "
        "(no driver, driver not loaded, error).",
    )
    probe.add_argument("-o", "--output", choices=("table", "json"), default="table")


def cmd_probe(args: argparse.Namespace) -> int:
    from mignurse.gpu.probe_cli import run as run_probe

    return run_probe(args.output)
