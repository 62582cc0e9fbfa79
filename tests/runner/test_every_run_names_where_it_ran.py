"""Every run's record names the runbook, the context, the cluster and the target, however
it ended: declined at the prompt, refused, a dry run or run to the end; `mignurse runs`
and `mignurse runs RUN_ID` show them, for a run that never started too."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cliserver
import pytest

from mignurse.runner.audit import read_audit
from mignurse.runner.engine import Runner
from mignurse.runner.lock import TargetLock
from mignurse.runner.outcome import RunError
from mignurse.runner.schema import load_runbooks
from mignurse.runner.step import Harm

from .enginehelpers import Cluster, answered_no

Make = Callable[..., Cluster]
NAMES = ("runbook", "context", "cluster", "target")


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env["XDG_STATE_HOME"] = str(state)
    env["HOME"] = str(state)  # no ~/.aws: no identity lookup
    return env


def _cli(c: Cluster, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["--kubeconfig", str(c.kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=60)


def test_a_declined_run_keeps_its_context_in_the_log_and_in_runs(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for("dcgm-repair-loop")
    env = _env(tmp_path / "state")
    info = c.client.info

    declined = answered_no(c.kubeconfig, env, "run", "pause-node-repair")
    assert declined.returncode == 1, declined.stdout + declined.stderr
    assert "declined" in declined.stdout, declined.stdout

    events = [
        json.loads(line)
        for line in (tmp_path / "state" / "mignurse" / "audit.jsonl").read_text().splitlines()
    ]
    (line,) = [e for e in events if e["event"] == "declined"]
    assert {k: line.get(k) for k in NAMES} == {
        "runbook": "pause-node-repair",
        "context": info.context,
        "cluster": info.cluster,
        "target": "ml-prod-usw2",
    }
    run_id = line["run"]

    listed = _cli(c, env, "runs", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert summary["context"] == info.context and summary["cluster"] == info.cluster
    assert summary["outcome"] == "declined"
    table = _cli(c, env, "runs")
    (row,) = [r for r in table.stdout.splitlines() if run_id in r]
    assert f" {info.context} " in row, table.stdout

    shown = _cli(c, env, "runs", run_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith(
        f"run {run_id}: pause-node-repair on ml-prod-usw2 "
        f"(context {info.context}, cluster {info.cluster}) by "
    ), shown.stdout
    assert shown.stdout.splitlines()[0].endswith(": declined"), shown.stdout


class _No:
    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        return False


def _names_of(run_id: str) -> list[dict[str, Any]]:
    """The names on each line that opens or closes a run's record."""
    kinds = ("started", "declined", "refused", "dry-run", "undo-started")
    return [
        {k: e.get(k) for k in NAMES}
        for e in read_audit()
        if e["run"] == run_id and e["event"] in kinds
    ]


def test_declined_refused_dry_and_done_runs_each_name_where_they_ran(
    cluster_for: Make, state_home: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    book = load_runbooks()["cordon"]
    where = {
        "runbook": "cordon",
        "context": c.client.info.context,
        "cluster": c.client.info.cluster,
        "target": node,
    }

    declined = Runner(book, {"node": node}, client=c.client, confirmer=_No()).run()
    dry = Runner(book, {"node": node}, client=c.client).run(dry_run=True)
    other = TargetLock(
        c.client, target="node", name=node, holder="alice@laptop", run_id="3f2a", runbook="cordon"
    )
    assert other.acquire() is None
    refused = Runner(book, {"node": node}, client=c.client, yes=True).run()
    other.release()
    done = Runner(book, {"node": node}, client=c.client, yes=True).run()

    assert [r.status for r in (declined, dry, refused, done)] == [
        "declined",
        "dry-run",
        "blocked",
        "succeeded",
    ]
    for result in (declined, dry, refused, done):
        assert _names_of(result.run_id) == [where], result.status

    # a refused resume of a run that already succeeded names them too
    again = Runner.from_state(done.run_id, client=c.client, yes=True)
    with pytest.raises(RunError, match="already succeeded"):
        again.run()
    refusals = [e for e in read_audit() if e["run"] == done.run_id and e["event"] == "refused"]
    assert refusals and all({k: e.get(k) for k in NAMES} == where for e in refusals)
