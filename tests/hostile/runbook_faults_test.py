"""Every shipped runbook interrupted at every step boundary by a real signal, in a real
`mignurse run` process against the simulator, then resumed or undone (runbook_faults.py says
what each trial must end in).

The default set (in the deep tier, `make deep`) interrupts every step of every shipped
runbook once, and gives each runbook both SIGINT and SIGKILL and both `--resume` and
`--undo`; SIGTERM, SIGHUP and a double Ctrl-C stand in for SIGINT at three steps. The
whole product (every step × SIGINT and SIGKILL × resume and undo) is marked `slow` and runs
only when asked for: `pytest -m slow tests/hostile/runbook_faults_test.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mignurse.runner.schema import default_folder

from .runbook_faults import CASES, run_trial, step_ids

DEFAULT = [
    ("cordon", "cordon", "SIGINT", "undo"),
    ("cordon", "cordon", "SIGKILL", "resume"),
    ("uncordon", "uncordon", "SIGKILL", "undo"),
    ("uncordon", "uncordon", "SIGTERM", "resume"),
    ("cordon-and-collect", "cordon", "SIGKILL", "undo"),
    ("cordon-and-collect", "collect", "SIGINT", "resume"),
    ("cordon-and-collect", "report", "SIGHUP", "undo"),
    ("pause-node-repair", "pause", "SIGINT", "undo"),
    ("pause-node-repair", "pause", "SIGKILL", "resume"),
    ("resume-node-repair", "resume", "SIGKILL", "resume"),
    ("resume-node-repair", "resume", "SIGINT", "undo"),
    ("reapply-mig-no-hooks", "preflight", "SIGINT", "resume"),
    ("reapply-mig-no-hooks", "mig-manager-off", "SIGKILL", "undo"),
    ("reapply-mig-no-hooks", "hold-disruption", "SIGKILL", "resume"),
    ("reapply-mig-no-hooks", "cordon", "SIGINT", "undo"),
    ("reapply-mig-no-hooks", "pause-operands", "SIGKILL", "resume"),
    ("reapply-mig-no-hooks", "drain-gpu-pods", "SIGINT×2", "undo"),
    ("reapply-mig-no-hooks", "no-gpu-processes", "SIGKILL", "undo"),
    ("reapply-mig-no-hooks", "apply-layout", "SIGKILL", "undo"),
    ("reapply-mig-no-hooks", "verify-layout", "SIGINT", "undo"),
    ("reapply-mig-no-hooks", "resume-operands", "SIGTERM", "resume"),
    ("reapply-mig-no-hooks", "uncordon", "SIGKILL", "resume"),
    ("reapply-mig-no-hooks", "release-disruption", "SIGINT", "undo"),
    ("replace-instance", "collect", "SIGKILL", "resume"),
    ("replace-instance", "cordon", "SIGINT", "undo"),
    ("replace-instance", "drain", "SIGKILL", "undo"),
    ("replace-instance", "delete-nodeclaim", "SIGINT", "undo"),
    ("replace-instance", "terminate", "SIGKILL", "undo"),
    ("replace-instance", "wait-replacement", "SIGKILL", "resume"),
]
EVERY = [
    (book, step, sig, then)
    for book in CASES
    for step in step_ids(book)
    for sig in ("SIGINT", "SIGKILL")
    for then in ("resume", "undo")
]


def _id(case: tuple[str, str, str, str]) -> str:
    return "-".join(case).replace("×", "x")


def test_every_shipped_runbook_has_a_case_and_every_step_is_interrupted() -> None:
    shipped = {p.stem for p in default_folder().glob("*.yaml")}
    assert shipped == set(CASES)
    for book in shipped:
        mine = [c for c in DEFAULT if c[0] == book]
        assert {c[1] for c in mine} == set(step_ids(book)), book
        sent = {c[2] for c in mine}
        assert "SIGKILL" in sent and sent & {"SIGINT", "SIGTERM", "SIGHUP", "SIGINT×2"}, book
        assert {c[3] for c in mine} == {"resume", "undo"}, book


@pytest.mark.deep
@pytest.mark.parametrize("case", DEFAULT, ids=_id)
def test_an_interrupted_run_ends_in_a_known_state(
    case: tuple[str, str, str, str], tmp_path: Path
) -> None:
    run_trial(*case, tmp=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in EVERY if c not in DEFAULT], ids=_id)
def test_every_step_every_signal_every_way_on(
    case: tuple[str, str, str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("the whole product: run with -m slow")
    run_trial(*case, tmp=tmp_path)
