"""The state folder is mignurse's own, but anyone who can write in it may plant a link, a FIFO
or a folder where a file belongs. A run then refuses in one line naming the path, before it
locks anything or changes a node; nothing is written through a link (its target keeps its
bytes and mode, a dangling one's target is never created) and nothing blocks on a FIFO."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from runner.enginehelpers import Cluster, cluster_for
from runner.test_run_cli import drain_runbooks, env_for, mignurse, start, wait_for

from mignurse.cluster.client import NODES
from mignurse.cluster.history import HistoryError, HistoryStore
from mignurse.paths import StateFileError, open_private, private_dir
from mignurse.runner.audit import Audit, read_audit
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.state import RunState, list_runs

__all__ = ["cluster_for"]  # the simulator fixture these tests run the CLI against

Make = Callable[..., Cluster]
BAIT = b"someone else's file\n"


def _bait(tmp_path: Path) -> Path:
    """A file outside the state folder that a planted link points at: 0644, known bytes."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    target = outside / "precious.txt"
    target.write_bytes(BAIT)
    target.chmod(0o644)
    return target


def _untouched(target: Path) -> None:
    assert target.read_bytes() == BAIT
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def _refused_in_one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    err = result.stderr
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("mignurse: error:")]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _lock_on(c: Cluster, node: str) -> str | None:
    annotations = c.node(node)["metadata"].get("annotations") or {}
    return annotations.get(LOCK_ANNOTATION)


def _cordon(c: Cluster, state: Path) -> tuple[str, subprocess.CompletedProcess[str]]:
    node = c.nodes("gpu-train")[0]
    return node, mignurse(c, env_for(state), "run", "cordon", "--node", node, "--yes")


# -- a run against a planted state folder: the real CLI -----------------------------------------


def test_a_symlinked_audit_log_refuses_the_run_and_its_target_is_untouched(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    target = _bait(tmp_path)
    folder = tmp_path / "state" / "mignurse"
    folder.mkdir(parents=True)
    (folder / "audit.jsonl").symlink_to(target)

    node, result = _cordon(c, tmp_path / "state")

    _refused_in_one_line(result, str(folder / "audit.jsonl"), "symlink", "remove it")
    _untouched(target)
    assert _lock_on(c, node) is None and not c.node(node)["spec"].get("unschedulable")


def test_a_dangling_audit_log_link_never_creates_its_target(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    nowhere = tmp_path / "outside" / "created-by-mignurse.jsonl"
    nowhere.parent.mkdir()
    folder = tmp_path / "state" / "mignurse"
    folder.mkdir(parents=True)
    (folder / "audit.jsonl").symlink_to(nowhere)

    node, result = _cordon(c, tmp_path / "state")

    _refused_in_one_line(result, "audit.jsonl is a symlink")
    assert not nowhere.exists() and list(nowhere.parent.iterdir()) == []
    assert _lock_on(c, node) is None


def test_a_symlinked_runs_folder_receives_no_run_state(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    elsewhere = tmp_path / "outside-runs"
    elsewhere.mkdir()
    folder = tmp_path / "state" / "mignurse"
    folder.mkdir(parents=True)
    (folder / "runs").symlink_to(elsewhere)

    node, result = _cordon(c, tmp_path / "state")

    _refused_in_one_line(result, str(folder / "runs"), "symlink")
    assert list(elsewhere.iterdir()) == []
    assert _lock_on(c, node) is None and not c.node(node)["spec"].get("unschedulable")
    listed = mignurse(c, env_for(tmp_path / "state"), "runs")
    _refused_in_one_line(listed, "runs is a symlink")


def test_a_folder_where_the_audit_log_belongs_is_named_in_one_line(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    folder = tmp_path / "state" / "mignurse"
    (folder / "audit.jsonl").mkdir(parents=True)

    node, result = _cordon(c, tmp_path / "state")

    _refused_in_one_line(result, "audit.jsonl is a folder, not a regular file", "move it away")
    assert _lock_on(c, node) is None


def test_a_fifo_audit_log_is_refused_before_any_lock_and_never_waited_on(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    folder = tmp_path / "state" / "mignurse"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "audit.jsonl")

    node, result = _cordon(c, tmp_path / "state")  # a blocked open would time this out

    _refused_in_one_line(result, "audit.jsonl is a FIFO")
    assert _lock_on(c, node) is None and not c.node(node)["spec"].get("unschedulable")
    listed = mignurse(c, env_for(tmp_path / "state"), "runs")
    _refused_in_one_line(listed, "audit.jsonl is a FIFO")


def test_sigterm_ends_a_run_whose_audit_log_became_a_fifo_and_leaves_no_lock(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    state = tmp_path / "state"
    proc = start(c, env_for(state, drain_runbooks(tmp_path)), "run", "cordon-and-drain",
                 "--node", node, "--yes")  # fmt: skip
    try:
        # the drain waits on a PodDisruptionBudget (429s): the run holds the node's lock
        wait_for(
            lambda: any(
                r["path"].endswith("/eviction") and r["status"] == 429 for r in c.sim.requests
            )
        )
        assert _lock_on(c, node) is not None
        log = state / "mignurse" / "audit.jsonl"
        log.rename(log.with_name("audit.moved"))
        os.mkfifo(log)  # no reader: a blocking open for writing would wait forever
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    assert "audit.jsonl is a FIFO" in out, out
    assert _lock_on(c, node) is None


# -- the files themselves -------------------------------------------------------------------------


def test_a_history_lock_link_is_refused_and_its_target_keeps_its_bytes(tmp_path: Path) -> None:
    target = _bait(tmp_path)
    folder = tmp_path / "hist"
    folder.mkdir()
    (folder / "history.sqlite3.lock").symlink_to(target)

    with pytest.raises(HistoryError) as refused:
        HistoryStore(folder / "history.sqlite3")

    assert str(refused.value) == (
        f"{folder / 'history.sqlite3.lock'} is a symlink; mignurse never follows links in its "
        "state folder: remove it"
    )
    _untouched(target)
    assert not (folder / "history.sqlite3").exists()


@pytest.mark.parametrize("planted", ["history.sqlite3", "history.sqlite3-wal"])
def test_a_history_database_link_is_refused_before_sqlite_opens_it(
    tmp_path: Path, planted: str
) -> None:
    target = _bait(tmp_path)
    folder = tmp_path / "hist"
    folder.mkdir()
    (folder / planted).symlink_to(target)

    with pytest.raises(HistoryError, match=f"{planted} is a symlink"):
        HistoryStore(folder / "history.sqlite3")

    _untouched(target)


def test_the_audit_line_and_run_state_never_go_through_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    target = _bait(tmp_path)
    home = private_dir(tmp_path / "state" / "mignurse")
    (home / "audit.jsonl").symlink_to(target)
    runs = private_dir(home / "runs")
    (runs / "0a1b2c3d.json").symlink_to(target)

    with pytest.raises(StateFileError, match=r"audit\.jsonl is a symlink"):
        Audit().write("started", "0a1b2c3d")
    RunState("0a1b2c3d", "cordon", {}, "ctx", "cluster", "node-1", "me@here").save()

    _untouched(target)  # the run state replaced the link, never wrote through it
    assert not (runs / "0a1b2c3d.json").is_symlink()
    assert [r.run_id for r in list_runs()] == ["0a1b2c3d"]
    with pytest.raises(StateFileError, match=r"audit\.jsonl is a symlink"):
        read_audit()


def test_a_state_folder_that_is_a_link_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "mignurse").symlink_to(elsewhere)

    with pytest.raises(StateFileError, match="mignurse is a symlink; mignurse never follows"):
        RunState("0a1b2c3d", "cordon", {}, "ctx", "cluster", "node-1", "me@here").save()

    assert list(elsewhere.iterdir()) == []
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755  # never chmod'ed through the link


def test_a_dangling_link_where_a_state_file_belongs_is_not_created(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere.json"
    (tmp_path / "state.json").symlink_to(nowhere)
    with pytest.raises(StateFileError, match=r"state\.json is a symlink"):
        open_private(tmp_path / "state.json")
    assert not nowhere.exists()


def test_the_log_read_back_is_the_newest_part_of_a_huge_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.runner import audit

    log = tmp_path / "audit.jsonl"
    with log.open("wb") as handle:
        handle.truncate(8 * 2**30)  # sparse: a planted 8 GiB log costs no disk
        handle.seek(0, os.SEEK_END)
        handle.write(b'\n{"event":"started","run":"older"}\n')
    Audit(log).write("started", "newest")
    monkeypatch.setattr(audit, "AUDIT_READ_BYTES", 2**20)
    assert [e["run"] for e in read_audit(log)] == ["older", "newest"]


def test_unlock_with_a_fifo_audit_log_is_refused_and_the_lock_stays(
    cluster_for: Make, tmp_path: Path
) -> None:
    import json

    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    stale = json.dumps({"holder": "alice@laptop", "run": "dead0001", "runbook": "cordon",
                        "expires": "2099-01-01T00:00:00Z"})  # fmt: skip
    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: stale}}})
    folder = tmp_path / "state" / "mignurse"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "audit.jsonl")

    result = mignurse(c, env_for(tmp_path / "state"), "unlock", node, "--yes", "--force")

    _refused_in_one_line(result, "audit.jsonl is a FIFO", "nothing was unlocked")
    assert _lock_on(c, node) == stale  # an unlock nobody could audit is not done
