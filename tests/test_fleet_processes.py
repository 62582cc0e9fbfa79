"""Several clusters read by worker processes (`cluster.fleet.start_fleet`), in a fresh
interpreter as the command line runs them, against simulated clusters served here, one of
them failing in each way: each cluster's status, message, login hint and error are the same
as when one process reads them all; a worker the OOM killer ends is one failed cluster; a
Ctrl-C ends the workers with the command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mignurse.sim.fleet import SimFleet

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux")

ROOT = Path(__file__).resolve().parents[1]
WORKING = "sim-*,prod-eu,prod-us,staging"

# A fresh interpreter (no thread of its own yet, as the command line's) reads the clusters
# with start_fleet and prints what each ended as; `read` lists the nodes (RBAC refuses it on
# one context) and says which process read them.
READER = """
import json, os, sys
from mignurse.cluster.client import NODES
from mignurse.cluster.contexts import select_contexts
from mignurse.cluster.fleet import FleetRequest, start_fleet
from mignurse.model import Node

def read(client):
    return {"pid": os.getpid(), "nodes": len(client.list(NODES, Node.from_api).items)}

contexts = select_contexts(sys.argv[1], sys.argv[2])
request = FleetRequest(sys.argv[1], tuple(contexts), read, seconds=20, processes=True)
said = []
clusters = start_fleet(request, lambda cluster: said.append(cluster.context))()
print(json.dumps({
    "pid": os.getpid(),
    "said": sorted(said),
    "clusters": [{
        "context": c.context, "status": c.status, "message": c.message, "login": c.login,
        "version": c.version, "skew": type(c.clock_skew).__name__, "result": c.result,
        "error": type(c.error).__name__ if c.error else None,
        "attributes": {k: v for k, v in vars(c.error).items()} if c.error else None,
    } for c in clusters],
}))
"""


@pytest.fixture(scope="module")
def fleet(failing_fleet: tuple[SimFleet, Path]) -> tuple[SimFleet, Path]:
    return failing_fleet


def _env(processes: int, **more: str) -> dict[str, str]:
    return {**os.environ, "MIGNURSE_FLEET_PROCESSES": str(processes), **more}


def _read(kubeconfig: Path, processes: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(kubeconfig), WORKING],
        env=_env(processes),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_workers_answer_each_cluster_as_one_process_does(fleet: tuple[SimFleet, Path]) -> None:
    _served, kubeconfig = fleet
    alone = _read(kubeconfig, 1)
    shared = _read(kubeconfig, 3)
    contexts = ["sim-healthy", "sim-dcgm-repair-loop", "prod-eu", "prod-us", "staging"]
    for found in (alone, shared):
        assert [c["context"] for c in found["clusters"]] == contexts
        assert found["said"] == sorted(contexts)  # each told to the caller as it ended
    # one process: every connected cluster read here; three: the second by a worker
    assert {c["result"]["pid"] for c in alone["clusters"][:2]} == {alone["pid"]}
    pids = [c["result"]["pid"] for c in shared["clusters"][:2]]
    assert pids[0] == shared["pid"] and pids[1] != shared["pid"]

    def without_pid(found: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {**c, "result": c["result"] and {**c["result"], "pid": None}} for c in found["clusters"]
        ]

    assert without_pid(shared) == without_pid(alone)
    by_context = {c["context"]: c for c in shared["clusters"]}
    assert by_context["staging"]["status"] == "rbac-denied"
    assert by_context["staging"]["error"] == "Forbidden"
    assert by_context["staging"]["attributes"] == {"verb": "list", "resource": "nodes"}
    assert by_context["prod-us"]["error"] == "CredentialsFailed"
    assert by_context["prod-us"]["attributes"]["login"] == "aws sso login --profile prod-us"
    assert by_context["prod-eu"]["status"] == "unreachable"
    assert by_context["sim-dcgm-repair-loop"]["version"].startswith("v1.")
    assert by_context["sim-dcgm-repair-loop"]["skew"] == "float"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pids: list[int], within: float) -> bool:
    ends = time.monotonic() + within
    while time.monotonic() < ends:
        alive = [p for p in pids if Path(f"/proc/{p}").exists()]
        states = [Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
                  for p in alive if Path(f"/proc/{p}/stat").exists()]  # fmt: skip
        if all(state == "Z" for state in states):
            return True
        time.sleep(0.1)
    return False


def _command(kubeconfig: Path, *args: str, processes: int = 2) -> subprocess.Popen[str]:
    """`mignurse --context sim-healthy,prod-ap nodes`: the worker reads the hung cluster."""
    return subprocess.Popen(
        [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), *args],
        env=_env(processes, MIGNURSE_COMMAND_TIMEOUT="60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _worker_of(command: subprocess.Popen[str]) -> int:
    ends = time.monotonic() + 30
    while time.monotonic() < ends:
        workers = _children(command.pid)
        if workers:
            return workers[0]
        assert command.poll() is None, command.communicate()
        time.sleep(0.05)
    raise AssertionError("no worker process was started")


def test_a_worker_killed_is_one_failed_cluster(fleet: tuple[SimFleet, Path]) -> None:
    _served, kubeconfig = fleet
    command = _command(kubeconfig, "--context", "sim-healthy,prod-ap", "nodes", "-o", "json")
    worker = _worker_of(command)
    time.sleep(1.0)  # the hung cluster's request is in flight
    os.kill(worker, signal.SIGKILL)
    out, err = command.communicate(timeout=60)
    assert command.returncode == 2, err
    assert (
        "mignurse: error: context 'prod-ap': failed: the process reading it ended (signal 9) "
        "before it answered"
    ) in err
    assert "Traceback" not in err
    document = json.loads(out)
    statuses = {r["context"]: r["status"] for r in document["clusters"]}
    assert statuses == {"sim-healthy": "connected", "prod-ap": "error"}
    assert {n["context"] for n in document["nodes"]} == {"sim-healthy"}


def test_ctrl_c_ends_the_workers_with_the_command(fleet: tuple[SimFleet, Path]) -> None:
    _served, kubeconfig = fleet
    command = _command(kubeconfig, "--context", "sim-healthy,prod-ap", "nodes")
    worker = _worker_of(command)
    time.sleep(1.0)
    command.send_signal(signal.SIGINT)  # to the command alone, not its process group
    command.wait(timeout=30)  # the command itself (its pipes stay open while a worker lives)
    # The worker's own read would end at the TLS handshake's timeout (5 s, and a retry):
    # until then it would hold the command's stdout, and a `| jq` would wait on it.
    gone = _gone([worker], within=2)
    _out, err = command.communicate(timeout=30)
    assert command.returncode == 130, err
    assert "Traceback" not in err
    assert gone, f"worker {worker} outlived the command"


@pytest.mark.parametrize("contexts", ["sim-*", "sim-*,prod-ap"], ids=["answered", "given-up"])
def test_no_file_of_a_kubeconfigs_data_outlives_the_workers(
    fleet: tuple[SimFleet, Path], tmp_path: Path, contexts: str
) -> None:
    """Each cluster's certificate data is written to private temporary files for the TLS
    library, by whichever process reads it. A worker ends without the interpreter's exit
    functions, and one reading a cluster given up on (`prod-ap` never answers) is killed:
    what it wrote is removed all the same."""
    _served, kubeconfig = fleet
    assert "certificate-authority-data" in kubeconfig.read_text()  # so files are written
    folder = tmp_path / "tmp"
    folder.mkdir()
    argv = ["--kubeconfig", str(kubeconfig), "--context", contexts, "nodes"]
    done = subprocess.run(
        [sys.executable, "-m", "mignurse", *argv],
        env=_env(
            3,
            TMPDIR=str(folder),
            MIGNURSE_COMMAND_TIMEOUT="2",  # prod-ap's deadline: 2 + 1 + the grace, 5 s
            MIGNURSE_CREDENTIAL_PLUGIN_SECONDS="1",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode in (0, 2), done.stderr  # 2: prod-ap did not answer
    assert done.stdout.count("sim-") >= 2  # both clusters read, one of them by a worker
    assert list(folder.iterdir()) == []
