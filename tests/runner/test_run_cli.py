"""`mignurse run`, `runbooks` and `runs` as a user meets them: real subprocesses against the
simulator, node access through the sandboxes, Ctrl-C and SIGKILL in the middle."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cliserver
import pytest

from mignurse.cluster.client import PODS
from mignurse.runner import state as st
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.sim.nodes import NodeSandbox

from .enginehelpers import Cluster, answered_no
from .test_engine import CORDON_AND_DRAIN

Make = Callable[..., Cluster]


def env_for(state: Path, runbooks: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env["XDG_STATE_HOME"] = str(state)
    env["HOME"] = str(state)  # no ~/.aws: no identity lookup
    if runbooks is not None:
        env["MIGNURSE_RUNBOOKS"] = str(runbooks)
    return env


def mignurse(c: Cluster, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mignurse --kubeconfig … ARGS`, forked with the CLI imported (cliserver)."""
    argv = ["--kubeconfig", str(c.kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=60)


def start(c: Cluster, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mignurse", "--kubeconfig", str(c.kubeconfig), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def wait_for(predicate: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def state_of(state: Path) -> dict[str, Any]:
    files = list((state / "mignurse" / "runs").glob("*.json"))
    assert len(files) == 1
    return dict(json.loads(files[0].read_text()))


def drain_runbooks(tmp_path: Path) -> Path:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "cordon-and-drain.yaml").write_text(
        CORDON_AND_DRAIN.format(undo="on-failure", timeout="60s")
    )
    return folder


def test_runbooks_lists_them_as_json(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    done = mignurse(c, env_for(tmp_path), "runbooks", "-o", "json")
    assert done.returncode == 0, done.stderr
    books = {b["name"]: b for b in json.loads(done.stdout)}
    assert books["cordon-and-collect"]["harm"] == "low"
    assert books["cordon-and-collect"]["params"][0] == {
        "name": "node",
        "type": "node",
        "required": True,
        "help": "the node to cordon and collect",
    }


def test_refusals_without_a_terminal_or_under_read_only(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    env = env_for(tmp_path)
    no_tty = mignurse(c, env, "run", "cordon-and-collect", "--node", node)
    assert no_tty.returncode == 2
    assert no_tty.stderr == (
        "mignurse: error: stdin is not a terminal, so nobody can confirm: pass --yes to run "
        "cordon-and-collect without a prompt\n"
    )
    read_only = mignurse(
        c, env, "--read-only", "run", "cordon-and-collect", "--node", node, "--yes"
    )
    assert read_only.returncode == 2 and "only --dry-run is allowed" in read_only.stderr
    dry = mignurse(
        c,
        env,
        "--read-only",
        "run",
        "cordon-and-collect",
        "--node",
        node.split(".")[0],
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    assert f"node/{node}: spec.unschedulable False → True" in dry.stderr
    assert dry.stdout.endswith(": dry-run\n")
    assert not [r for r in c.sim.requests if r["method"] != "GET"]
    unknown = mignurse(c, env, "run", "cordon-and-colect", "--node", node)
    assert unknown.returncode == 2 and "no runbook 'cordon-and-colect' (known: " in unknown.stderr


def test_a_run_that_names_two_nodes_or_two_clusters_is_refused_before_it_reads_one(
    cluster_for: Make, tmp_path: Path
) -> None:
    """argparse keeps an option's last value: `--node A --node B` planned and cordoned B and
    never named A, `--param node=` beside `--node` was dropped."""
    c = cluster_for()
    one, other = c.nodes("gpu-train")[:2]
    env = env_for(tmp_path)
    twice = mignurse(c, env, "run", "cordon", "--node", one, "--node", other, "--yes")
    assert twice.returncode == 2
    assert twice.stderr.splitlines()[-1] == (
        f"mignurse run: error: --node given twice ({one!r}, {other!r}): give it once"
    )
    both = mignurse(c, env, "run", "cordon", "--node", one, "--param", f"node={other}", "--yes")
    assert both.returncode == 2
    assert both.stderr == (
        f"mignurse: error: --node {one!r} and --param node={other!r} name different nodes: "
        "give the node once\n"
    )
    clusters = mignurse(c, env, "run", "cordon", "--context", "a", "--context", "b", "--yes")
    assert clusters.returncode == 2
    assert "--context given twice ('a', 'b')" in clusters.stderr
    # one on each side of the command's name: the command's copy would have won silently
    sides = mignurse(c, env, "--context", "a", "run", "cordon", "--node", one, "--context", "b")
    assert sides.returncode == 2
    assert sides.stderr.splitlines()[-1] == (
        "mignurse: error: --context given twice ('a', 'b'): give one, or several joined by "
        "commas ('prod-*,staging')"
    )
    assert not [r for r in c.sim.requests if r["method"] != "GET"]
    same = mignurse(c, env, "run", "cordon", "--node", one, "--param", f"node={one}", "--dry-run")
    assert same.returncode == 0, same.stderr


def test_cordon_and_collect_end_to_end_over_the_sandbox(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    env = env_for(tmp_path / "state")
    bundle = tmp_path / "node.tar.gz"
    done = mignurse(
        c,
        env,
        "run",
        "cordon-and-collect",
        "--node",
        node,
        "--yes",
        "--sandboxes",
        str(tmp_path / "sandboxes"),
        "--param",
        f"out={bundle}",
        "--param",
        "since=2h",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = done.stdout.split()[1].rstrip(":")
    assert done.stdout.splitlines()[1:] == [
        "  cordon: verified",
        f"  collect: verified: {bundle}",
        f"  report: verified: {node}: cordoned, Ready=True; bundle {bundle}",
        f"now: node {node} is Ready, cordoned by this run",  # read back after the run
    ]
    assert bundle.is_file()
    assert c.node(node)["spec"]["unschedulable"] is True
    assert LOCK_ANNOTATION not in c.node(node)["metadata"].get("annotations", {})
    sandbox = tmp_path / "sandboxes" / node
    calls = [" ".join((call.command, *call.args)) for call in NodeSandbox.calls(_log(sandbox))]
    assert any(call.startswith("journalctl") for call in calls)
    assert not [x for x in calls if "restart" in x or "daemon-reload" in x or "stop" in x]
    runs = mignurse(c, env, "runs", run_id)
    assert runs.returncode == 0
    assert f"run {run_id}: cordon-and-collect on {node}" in runs.stdout
    assert "  collect (collect-bundle): verified" in runs.stdout


def _no_way_in(cluster_for: Make, tmp_path: Path) -> tuple[Cluster, str, dict[str, str]]:
    """A cluster, one of its GPU nodes, and the environment of a user whose ~/.ssh/config
    sends every node to a port of 127.0.0.1 nothing listens on."""
    c = cluster_for()
    state = tmp_path / "state"
    env = env_for(state)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (state / ".ssh").mkdir(parents=True, mode=0o700)
    (state / ".ssh" / "config").write_text(f"Host *\n  HostName 127.0.0.1\n  Port {port}\n")
    return c, c.nodes("gpu-train")[0], env


def test_cordon_and_collect_with_no_way_into_the_node_fails_in_one_line_and_undoes(
    cluster_for: Make, tmp_path: Path
) -> None:
    c, node, env = _no_way_in(cluster_for, tmp_path)
    done = mignurse(
        c, env, "run", "cordon-and-collect", "--node", node, "--yes", "--transport", "ssh",
        "--param", f"out={tmp_path / 'node.tar.gz'}",
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    run_id = done.stdout.split()[1].rstrip(":")
    assert re.search(
        rf"^run {run_id}: undone: step collect failed: could not collect {node}: "
        r"connection refused by \S+@127\.0\.0\.1:\d+",
        out,
        re.M,
    ), out
    assert "Traceback" not in out
    assert f"now: node {node} is Ready, schedulable" in out
    seen = c.node(node)
    assert not seen["spec"].get("unschedulable")
    assert "mignurse.io/cordoned-by" not in (seen["metadata"].get("annotations") or {})


def test_the_mig_runbook_with_no_way_into_the_node_is_blocked_in_its_plan(
    cluster_for: Make, tmp_path: Path
) -> None:
    """Its plan already asks the node whether a host nvidia-mig-manager.service is active."""
    c, node, env = _no_way_in(cluster_for, tmp_path)
    before = c.node(node)
    done = mignurse(
        c, env, "run", "reapply-mig-no-hooks", "--node", node, "--dry-run",
        "--transport", "ssh", "--param", "config=all-1g.10gb",
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert re.search(
        r"^run [0-9a-f]{8}: blocked: step preflight cannot run: systemctl is-active on "
        rf"{node}: connection refused by \S+@127\.0\.0\.1:\d+$",
        out,
        re.M,
    ), out
    assert "Traceback" not in out
    assert c.node(node)["metadata"] == before["metadata"]
    assert not c.node(node)["spec"].get("unschedulable")


def _log(root: Path) -> Any:
    class Log:
        calls_log = root / "calls.log"

    return Log()


def test_resume_after_sigkill_continues_from_the_unfinished_step(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for(speed=5)  # deleted pods terminate; the emptied node outlives the test
    node = c.nodes("gpu-infer")[0]
    state = tmp_path / "state"
    env = env_for(state, drain_runbooks(tmp_path))
    proc = start(c, env, "run", "cordon-and-drain", "--node", node, "--yes")
    try:
        wait_for(
            lambda: (
                bool(list((state / "mignurse" / "runs").glob("*.json")))
                and state_of(state)["steps"][1]["attempts"] >= 1
            )
        )
        wait_for(
            lambda: any(
                r["path"].endswith("/eviction") and r["status"] == 429 for r in c.sim.requests
            )
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    saved = state_of(state)
    assert saved["status"] == "running" and saved["steps"][0]["status"] == "verified"
    lock = json.loads(c.node(node)["metadata"]["annotations"][LOCK_ANNOTATION])
    assert lock["run"] == saved["run_id"]
    # The operator clears the blocker by hand, then resumes.
    blocker = next(p for p in c.pods_on(node) if p["metadata"]["namespace"] == "inference")
    c.client.delete(PODS, blocker["metadata"]["name"], "inference")
    resumed = mignurse(c, env, "run", "--resume", saved["run_id"], "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1. cordon (Cordon the node): already verified" in resumed.stderr
    assert resumed.stdout.splitlines()[1:] == [
        "  cordon: verified",
        "  drain: verified",
        f"now: node {node} is Ready, cordoned by this run",
    ]
    assert LOCK_ANNOTATION not in c.node(node)["metadata"].get("annotations", {})
    records = [json.loads(x) for x in (state / "mignurse" / "audit.jsonl").read_text().splitlines()]
    events = [r["event"] for r in records if r["event"] not in ("intent", "evicted")]
    assert events == ["started", "step", "resumed", "step", "finished"]
    # each eviction attempt of the killed run was announced before it was sent
    killed = records[: [r["event"] for r in records].index("resumed")]
    assert any(r["event"] == "intent" and r["step"] == "drain" for r in killed)


def test_ctrl_c_interrupts_and_undo_by_run_id_restores(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    state = tmp_path / "state"
    env = env_for(state, drain_runbooks(tmp_path))
    proc = start(c, env, "run", "cordon-and-drain", "--node", node, "--yes")
    wait_for(
        lambda: any(r["path"].endswith("/eviction") and r["status"] == 429 for r in c.sim.requests)
    )
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130, out
    run_id = state_of(state)["run_id"]
    assert f"run {run_id}: interrupted: interrupted during step drain" in out
    assert f"`mignurse run --resume {run_id}`" in out and f"`mignurse run --undo {run_id}`" in out
    assert c.node(node)["spec"]["unschedulable"] is True
    undo = mignurse(c, env, "run", "--undo", run_id, "--yes")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert undo.stdout.startswith(f"run {run_id}: undone")
    assert not c.node(node)["spec"].get("unschedulable")


def test_resume_node_repair_tells_helm_users_to_set_node_repair_true(
    cluster_for: Make, tmp_path: Path
) -> None:
    """The Karpenter Deployment is a Helm release: the value to keep in its values is the one
    the run leaves, false after a pause and true after the resume (charts/karpenter
    values.yaml settings.featureGates.nodeRepair, karpenter-provider-aws v1.4.0)."""
    c = cluster_for("dcgm-repair-loop", speed=30)
    env = env_for(tmp_path / "state")
    node = c.nodes("gpu-inference")[0]
    setting = "settings.featureGates.nodeRepair"

    paused = mignurse(c, env, "run", "pause-node-repair", "--node", node, "--yes")
    resumed = mignurse(c, env, "run", "resume-node-repair", "--yes")

    assert paused.returncode == 0, paused.stdout + paused.stderr
    assert f"--set {setting}=false" in paused.stderr
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    said = resumed.stdout + resumed.stderr
    assert f"--set {setting}=true" in said and f"{setting}=false" not in said


def test_the_pause_prompt_says_resume_reverses_it_and_replace_that_nothing_does(
    cluster_for: Make, tmp_path: Path
) -> None:
    """At the typed confirmation on a terminal, the harm in words agrees with what follows
    the run ("to reverse it, run resume-node-repair"), never "hard to reverse"."""
    c = cluster_for("dcgm-repair-loop")
    env = env_for(tmp_path / "state")
    node = c.nodes("gpu-inference")[0]

    def prompt(*args: str) -> subprocess.CompletedProcess[str]:
        return answered_no(c.kubeconfig, env, *args)

    paused = prompt("run", "pause-node-repair", "--node", node)
    replaced = prompt("run", "replace-instance", "--node", node, "--param", "collect=false")

    assert (
        "HIGH HARM (reversible: resume-node-repair puts it back). Type ml-prod-usw2 to proceed: "
        in paused.stderr
    ), paused.stderr
    assert f"HIGH HARM (cannot be undone). Type ml-prod-usw2/{node} to proceed: " in (
        replaced.stderr
    ), replaced.stderr
    # the plan's first line names the cluster and the context that reaches it
    assert f"replace-instance on node {node} in cluster ml-prod-usw2 (context " in (
        replaced.stdout + replaced.stderr
    )
    assert "hard to reverse" not in paused.stderr + replaced.stderr
    assert "declined" in paused.stdout, paused.stdout
    assert not [r for r in c.sim.requests if r["method"] != "GET"]


@pytest.mark.parametrize("gap", [0.0, 0.05, 0.3])
def test_a_double_ctrl_c_still_prints_the_run_and_what_can_follow(
    cluster_for: Make, tmp_path: Path, gap: float
) -> None:
    # The second Ctrl-C lands while the run stops, while it records its end, or while its
    # report reads what can follow: whichever, the report names the run and the next command.
    c = cluster_for()
    node = c.nodes("gpu-infer")[0]
    state = tmp_path / "state"
    env = env_for(state, drain_runbooks(tmp_path))
    argv = ["--kubeconfig", str(c.kubeconfig), "run", "cordon-and-drain", "--node", node, "--yes"]
    proc = cliserver.Child(argv, env=env, cwd=str(tmp_path))
    wait_for(
        lambda: any(r["path"].endswith("/eviction") and r["status"] == 429 for r in c.sim.requests)
    )
    # each read of the node from now on takes a quarter second, as from a far API server:
    # the run's stop, its end and its report take long enough for the second Ctrl-C to land
    c.sim.race("GET", r"/nodes/", lambda _sim: time.sleep(0.25), times=None, conflict=False)
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(gap)
    os.kill(proc.pid, signal.SIGINT)  # still running: ProcessLookupError otherwise
    out = proc.stdout.read()
    proc.wait(timeout=30)

    assert proc.returncode == 130, out + proc.stderr.read()
    run_id = state_of(state)["run_id"]
    assert out.startswith(f"run {run_id}: interrupted"), out
    assert f"`mignurse run --resume {run_id}`" in out, out


def test_a_node_an_unfinished_run_replaced_is_named_with_the_run_that_finishes(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    state = tmp_path / "state"
    env = env_for(state)
    gone = "ip-10-0-99-9.us-west-2.compute.internal"
    os.environ["XDG_STATE_HOME"] = str(state)
    try:
        run = st.RunState(
            run_id="5eed5eed", runbook="replace-instance", params={"node": gone},
            context=c.client.info.context, cluster=c.client.info.cluster, target=gone,
            holder="alice@laptop", status=st.INTERRUPTED,
            steps=[st.StepState("cordon", "cordon", status="verified",
                                applied={"wasUnschedulable": False})],
        )  # fmt: skip
        run.save()
    finally:
        os.environ.pop("XDG_STATE_HOME")

    done = mignurse(c, env, "run", "replace-instance", "--node", gone, "--yes")

    assert done.returncode == 2
    assert done.stderr == (
        f"mignurse: error: node {gone} no longer exists; run 5eed5eed (replace-instance, "
        "interrupted) acted on it and did not finish: `mignurse run --resume 5eed5eed` "
        "continues it (`mignurse runs 5eed5eed` shows what it did)\n"
    )
