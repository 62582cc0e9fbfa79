"""Small faults stay small: a 409 from a concurrent writer is read again and applied again, an
audit log that is not a regular file stops the run before its lock is taken, and a run killed
after its last step leaves nothing that `--resume` cannot finish."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import NODES, ClusterClient, Conflict
from mignurse.runner import state as st
from mignurse.runner.engine import Runner, possible_followups
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.outcome import RunError, RunResult
from mignurse.runner.schema import Runbook

from .enginehelpers import Cluster
from .interrupthelpers import DEPLOY, book, dead_pid, lock_on, node_view, resumed, shells
from .test_interruptions import healthy_g7e

Make = Callable[..., Cluster]


class ConcurrentWriter:
    """A client whose first write matching `when` meets another writer: that writer's change
    lands first (`other`), and the API server answers this one 409."""

    def __init__(
        self,
        real: ClusterClient,
        when: Callable[[str, tuple[Any, ...]], bool],
        other: Callable[[], None] = lambda: None,
    ) -> None:
        self._real, self._when, self._other = real, when, other
        self.conflicts = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != "patch":
            return target

        def patch(*args: Any, **kwargs: Any) -> Any:
            if not self.conflicts and self._when(name, args):
                self.conflicts += 1
                self._other()
                raise Conflict("Operation cannot be fulfilled: the object has been modified")
            return target(*args, **kwargs)

        return patch


def _labels_patch(_name: str, args: tuple[Any, ...]) -> bool:
    body = args[2] if len(args) > 2 else {}
    return isinstance(body, dict) and bool((body.get("metadata") or {}).get("labels"))


def test_a_409_on_a_label_patch_is_read_again_and_the_reapply_succeeds(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=20)
    node = healthy_g7e(c)
    said: list[str] = []
    writer = ConcurrentWriter(c.client, _labels_patch)
    runner = Runner(
        book("reapply-mig-no-hooks", tmp_path), {"node": node, "settle": "30s"},
        client=writer, shell_for=shells(c, tmp_path / "sb"), yes=True,  # type: ignore[arg-type]
        listener=lambda e: said.append(f"{e.step}: {e.message}"),
    )  # fmt: skip

    result = runner.run()

    assert result.status == "succeeded", (result.error, result.report_lines())
    assert writer.conflicts == 1
    assert any(
        line.startswith("mig-manager-off: read again after: cannot label node ") for line in said
    ), said
    labels = node_view(c, node)["labels"]
    assert labels[DEPLOY + "mig-manager"] == "false" and labels[DEPLOY + "device-plugin"] == "true"


def test_a_409_whose_fresh_read_finds_the_change_made_skips_the_write(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]

    def cordon_by_someone_else() -> None:
        c.client.patch(NODES, node, {"spec": {"unschedulable": True}})

    writer = ConcurrentWriter(
        c.client,
        lambda _n, args: "unschedulable" in str(args[2] if len(args) > 2 else ""),
        cordon_by_someone_else,
    )
    result = Runner(book("cordon", tmp_path), {"node": node}, client=writer,  # type: ignore[arg-type]
                    yes=True).run()  # fmt: skip

    assert result.status == "succeeded", (result.error, result.report_lines())
    assert writer.conflicts == 1 and node_view(c, node)["unschedulable"]


def test_an_audit_log_that_is_a_fifo_is_refused_before_the_lock_is_taken(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    audit = state_home / "mignurse" / "audit.jsonl"
    audit.parent.mkdir(parents=True)
    os.mkfifo(audit)

    with pytest.raises(RunError) as refused:
        Runner(book("cordon", tmp_path), {"node": node}, client=c.client, yes=True).run()

    assert str(refused.value) == (
        f"the audit log {audit} is a FIFO, not a regular file: move it away (every run is "
        "recorded there before it changes anything)"
    )
    assert lock_on(c, node) is None and not node_view(c, node)["unschedulable"]


def _put_lock(c: Cluster, node: str, run_id: str, pid: int) -> None:
    """The lock as a process killed before releasing it leaves it (this host, its pid)."""
    value = json.dumps(
        {"holder": "x@y", "run": run_id, "runbook": "cordon", "expires": "2099-01-01T00:00:00Z",
         "host": socket.gethostname(), "pid": pid, "renewed": "2026-11-20T12:00:00Z"},
        separators=(",", ":"),
    )  # fmt: skip
    c.client.patch(NODES, node, {"metadata": {"annotations": {LOCK_ANNOTATION: value}}})


def _cordoned(cluster_for: Make, tmp_path: Path) -> tuple[Cluster, str, Runbook, RunResult]:
    """A gpu-train node cordoned by a run of the cordon runbook that succeeded."""
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    cordon = book("cordon", tmp_path)
    done = Runner(cordon, {"node": node}, client=c.client, yes=True).run()
    assert done.status == "succeeded", (done.error, done.report_lines())
    return c, node, cordon, done


def test_a_run_killed_after_its_last_step_is_finished_by_its_resume(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c, node, cordon, done = _cordoned(cluster_for, tmp_path)
    # Killed between its last step's verify and recording the end: every step is verified, the
    # run still says running, its process is gone, its lock is left.
    saved = st.RunState.load(done.run_id)
    saved.status, saved.pid = st.RUNNING, dead_pid()
    saved.save()
    _put_lock(c, node, done.run_id, saved.pid)

    follow = possible_followups(done.run_id, client=c.client)

    assert follow["resume"] == (True, "records the end of the run: every step is done")
    finished = resumed(done.run_id, c, [cordon], tmp_path).run()
    assert finished.status == "succeeded", (finished.error, finished.report_lines())
    assert lock_on(c, node) is None and node_view(c, node)["unschedulable"]


def test_resume_of_a_finished_run_whose_lock_was_left_releases_it_and_says_so(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c, node, cordon, done = _cordoned(cluster_for, tmp_path)
    # As a process killed between recording its end and releasing its lock leaves it.
    _put_lock(c, node, done.run_id, dead_pid())
    follow = possible_followups(done.run_id, client=c.client)
    assert follow["resume"] == (
        True, f"releases the lock its process left on node {node} (the run itself succeeded)"
    )  # fmt: skip
    assert not follow["undo"].possible

    again = resumed(done.run_id, c, [cordon], tmp_path).run()

    assert again.status == "succeeded" and again.exit_code == 0
    assert again.notices == [f"released the lock its process left on node {node}"]
    assert lock_on(c, node) is None
