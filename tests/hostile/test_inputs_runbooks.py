"""A runbook folder ($MIGNURSE_RUNBOOKS) is untrusted input: an alias bomb, a recursive
alias, a binary file or a huge one is one line naming that file, and the other runbooks
still load; a folder that is not there is said, not listed as empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mignurse.runner.schema import RunbookError, load_runbooks

from .inputs import MiB, billion_laughs, mignurse, one_line_error

CORDON = (Path(__file__).parent.parent.parent / "runbooks" / "cordon.yaml").read_text()
BROKEN = {
    "laughs": billion_laughs(),
    "itself": "name: itself\ntitle: x\ntarget: cluster\nsteps: &s [*s]\n",
    "nested": "name: nested\nsteps: " + "[" * 5000 + "]" * 5000 + "\n",
    "deep-block": "name: deep-block\n" + "".join("  " * i + f"k{i}:\n" for i in range(200)),
}


def folder_of_runbooks(root: Path) -> Path:
    folder = root / "runbooks"
    folder.mkdir()
    (folder / "cordon.yaml").write_text(CORDON)
    for name, text in BROKEN.items():
        (folder / f"{name}.yaml").write_text(text)
    (folder / "binary.yaml").write_bytes(bytes(range(256)) * 64)
    (folder / "huge.yaml").write_text("# " + "x" * (2 * MiB) + "\n" + CORDON)
    os.mkfifo(folder / "fifo.yaml")  # opened without a writer, it would wait forever
    return folder


def env_for(tmp_path: Path, runbooks: Path) -> dict[str, str]:
    return {"MIGNURSE_RUNBOOKS": str(runbooks), "XDG_STATE_HOME": str(tmp_path / "state")}


def test_each_broken_runbook_is_one_line_and_the_others_are_listed(tmp_path: Path) -> None:
    folder = folder_of_runbooks(tmp_path)
    result = mignurse("runbooks", env=env_for(tmp_path, folder), timeout=60)
    assert result.returncode == 1, result.stderr
    assert "cordon" in result.stdout
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    skipped = {"binary", "fifo", "huge", "itself", "laughs", "nested", "deep-block"}
    assert len(lines) == len(skipped), lines
    for name in skipped:
        assert sum(f"{name}.yaml" in line for line in lines) == 1, (name, lines)
    said = "\n".join(lines)
    assert "aliases expand to more than" in said and "refers to the node that holds it" in said
    assert "not UTF-8" in said and "not a regular file" in said
    assert "MIGNURSE_MAX_RUNBOOK_BYTES=" in said and "nested deeper than" in said


def test_running_a_broken_runbook_is_its_one_line(tmp_path: Path) -> None:
    folder = folder_of_runbooks(tmp_path)
    for name, why in (("laughs", "aliases expand"), ("itself", "refers to"), ("binary", "UTF-8")):
        result = mignurse("run", name, "--dry-run", env=env_for(tmp_path, folder), timeout=60)
        err = result.stderr.splitlines()
        assert result.returncode == 2, result.stderr
        assert err[-1].startswith("mignurse: error: ") and f"{name}.yaml" in err[-1], err
        assert why in err[-1] and not any(f"{name}.yaml" in line for line in err[:-1])


def test_a_runbook_folder_that_is_not_there_is_said(tmp_path: Path) -> None:
    err = one_line_error(mignurse("runbooks", env=env_for(tmp_path, tmp_path / "nope")))
    assert f"MIGNURSE_RUNBOOKS={tmp_path / 'nope'}: no such folder" in err


def test_load_runbooks_keeps_the_good_ones_when_asked_for_problems(tmp_path: Path) -> None:
    folder = folder_of_runbooks(tmp_path)
    problems: dict[str, str] = {}
    assert set(load_runbooks(folder, problems)) == {"cordon"}
    assert set(problems) == {"binary", "fifo", "huge", "itself", "laughs", "nested", "deep-block"}
    with pytest.raises(RunbookError):
        load_runbooks(folder)  # without a place for problems, the first one is raised
