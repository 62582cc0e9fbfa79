"""Every shipped runbook, on each of its backends, under every fault of
tests/hostile/fault_trials.py (signals at every step and mid-step, API faults, controller
faults, lock faults), followed as an on-call engineer follows the report: each trial must end
known-good or instruction-works (tests/hostile/faultclass.py says what those are).

`make deep` runs DEFAULT, a trial of each family. The whole matrix runs only when asked
for: `pytest -m slow tests/hostile/fault_trials_test.py`, or `make faults`, which also prints
the table (runbook × fault → trials per class, and the failing trials) and writes it with
their logs to build/fault-trials.md (tests/hostile/faulttable.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mignurse.runner.schema import default_folder

from .fault_trials import Outcome, run_trial
from .faultcases import CASES, SIGNALS, THENS, Fault, TrialSpec, matrix, points
from .faulttable import PASSING, RESULTS

DEFAULT = [
    TrialSpec("cordon", Fault("signal", "SIGHUP", "cordon"), "resume"),
    TrialSpec("reapply-mig-no-hooks", Fault("signal", "SIGKILL", "mode-only"), "undo"),
    TrialSpec(
        "replace-instance/nodeclaim", Fault("signal", "SIGKILL", "replacement-wait"), "resume"
    ),
    TrialSpec("pause-node-repair/karpenter", Fault("api", "409-race", "pause"), "resume"),
    TrialSpec("reapply-mig-no-hooks", Fault("api", "restart", "drain-gpu-pods"), "resume"),
    TrialSpec(
        "replace-instance/nodeclaim", Fault("controller", "claim-deleted", "pdb-wait"), "undo"
    ),
    TrialSpec("cordon", Fault("lock", "stale-lock", ""), "again"),
]


def _slow(request: pytest.FixtureRequest) -> bool:
    return "slow" in str(request.config.getoption("markexpr") or "")


def _record(outcome: Outcome) -> None:
    """One line of the table's input (build/fault-trials/<pid>.jsonl)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{os.getpid()}.jsonl", "a") as out:
        out.write(json.dumps(outcome.record()) + "\n")


def test_the_matrix_runs_every_shipped_runbook_on_each_backend_under_every_fault() -> None:
    specs = matrix()
    assert len(specs) >= 250
    assert len({s.id for s in specs}) == len(specs)
    shipped = {p.stem for p in default_folder().glob("*.yaml")}
    assert {c.book for c in CASES.values()} == shipped
    backends = {key.split("/")[1] for key in CASES if "/" in key and not CASES[key].only}
    assert backends == {"karpenter", "nodegroup", "nodeclaim", "asg"}
    assert [key for key in CASES if CASES[key].only] == ["reapply-mig-no-hooks/cdi"]
    for case in CASES:
        for point in points(case):
            at_point = [s for s in specs if s.case == case and s.fault.at == point]
            assert {s.fault.name for s in at_point} >= set(SIGNALS), (case, point)
            assert {s.then for s in at_point} == set(THENS), (case, point)
    families = {s.fault.family: {x.fault.name for x in specs if x.fault.family == s.fault.family}
                for s in specs}  # fmt: skip
    assert families["api"] == {"409-race", "429-retry-after", "5xx", "outage", "restart"}
    assert families["lock"] == {"two-runs", "stale-lock", "sigstop"}
    assert {"claim-deleted", "pdb-timeout", "never-ready", "ready-then-notready"} <= (
        families["controller"]
    )
    assert set(DEFAULT) <= set(specs) and len(DEFAULT) <= 10


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec",
    [pytest.param(s, marks=[pytest.mark.deep] if s in DEFAULT else []) for s in matrix()],
    ids=lambda s: s.id,
)
def test_a_runbook_under_a_fault_ends_known_good_or_instruction_works(
    spec: TrialSpec, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """DEFAULT runs in `make deep`; the rest of the matrix only with -m slow."""
    slow = _slow(request)
    if spec not in DEFAULT and not slow:
        pytest.skip("the whole matrix: run with -m slow (make faults)")
    outcome = run_trial(spec, tmp_path)
    if slow:
        _record(outcome)
    assert outcome.verdict.cls in PASSING, str(outcome)
