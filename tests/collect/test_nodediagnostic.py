"""`collect --transport nodediagnostic`: the EKS node monitoring agent captures the node's logs,
mignurse fetches them through the real kubernetes client (node proxy) or from S3 (moto's
server on 127.0.0.1), files them under nodes/<node>/ and `diagnose --from` reads them.

The agent's side is the simulator's (mignurse/sim/nodediag.py), after
aws/eks-node-monitoring-agent v1.7.0 pkg/controllers/nodediagnostic.go: status
`captureStatuses[{type: Log, state: {running | completed{reason, message}}}]`, destination
`node` (/var/log/support/<node>-logs.tar.gz behind kubelet's /logs/) or a presigned PUT URL;
the archive's layout is pkg/util/file/archive.go TarGzipDir over pkg/log_collector/collect.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fromashell import mignurse_command

from mignurse.cli import main
from mignurse.cluster import SIM_EXTENSION
from mignurse.cluster.client import ClusterClient
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher
from mignurse.collect.access import Access, AccessError
from mignurse.collect.auto import AutoCollector
from mignurse.collect.nodediagnostic import (
    NODEDIAGNOSTICS,
    NodeDiagnosticShell,
    log_capture_state,
)
from mignurse.collect.transports import shell_factory
from mignurse.diagnose.sources import load_offline
from mignurse.nodeaccess.base import CANCELLED
from mignurse.nodeaccess.script import collector_script
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells, story_for
from mignurse.sim.scenario_spec import RbacDeny, Scenario

SCENARIO = "mig-hook-notready"  # one NotReady MIG node whose kubelet mig-manager restarted


def broken_node(sim: SimCluster) -> str:
    return next(n["metadata"]["name"] for n in sim.objects("nodes") if story_for(n) == "mig-hook")


def collect(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str, Path]:
    kubeconfig = sim.write_kubeconfig(tmp_path / "config")
    bundle = tmp_path / "bundle.tar.gz"
    args = ["--kubeconfig", str(kubeconfig), "collect", broken_node(sim), "-o", str(bundle)]
    code = main([*args, "--transport", "nodediagnostic", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err, bundle


def bundle_files(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {
            m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def agent_archive(files: dict[str, bytes]) -> bytes:
    """A gzip'd tar of relative paths, files only, as the agent's TarGzipDir writes it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def with_pool_changes(scenario: Scenario, **changes: Any) -> Scenario:
    pools = tuple(dataclasses.replace(p, **changes) for p in scenario.pools)
    return dataclasses.replace(scenario, pools=pools)


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(load_scenario(SCENARIO), speed=0) as cluster:
        yield cluster


def test_the_agents_capture_is_filed_as_the_nodes_evidence_and_diagnosed(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = broken_node(sim)
    code, out, err, bundle = collect(sim, tmp_path, capsys)
    assert code == 0, err + out
    # progress: each step of the capture is a line of its own
    assert f"{node}: collecting over nodediagnostic: NodeDiagnostic created" in err
    assert "capture Success (successfully saved logs to /var/log/support/" in err
    assert f"[1/1] {node}: ok" in err
    assert sim.objects("nodediagnostics") == []  # deleted after
    files = bundle_files(bundle)
    manifest = json.loads(files["manifest.json"])
    assert manifest["nodes"][node]["transport"] == "nodediagnostic"
    assert manifest["nodes"][node]["ok"]
    base = f"nodes/{node}/"
    for name in ("kubelet.log", "containerd.log", "nodeadm.log", "kernel.log", "cgroup-fs.txt"):
        assert base + name in files, name
    assert b"Stopped kubelet.service" in files[base + "kubelet.log"]
    assert files[base + "cgroup-fs.txt"] == b"cgroup2fs\n"
    assert base + "nodediagnostic-logs.tar.gz" in files  # the agent's whole archive, masked
    capture = json.loads(files[base + "nodediagnostic.json"])
    assert capture["nodeDiagnostic"] == node and capture["destination"] == "node"
    assert capture["reason"] == "Success" and capture["problems"] == []
    assert base + "errors.txt" not in files  # nothing went wrong: no problem to show
    main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    restart = [f for f in document["findings"] if f["id"] == "mig-hook-kubelet-restart"]
    assert restart and restart[0]["nodes"] == [node]


def test_with_a_bucket_the_agent_uploads_and_the_object_is_read_back_and_removed(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], bucket: str
) -> None:
    import boto3

    code, out, err, bundle = collect(sim, tmp_path, capsys, "--bucket", bucket)
    assert code == 0, err + out
    assert "successfully uploaded logs with no errors" in err
    node = broken_node(sim)
    capture = json.loads(bundle_files(bundle)[f"nodes/{node}/nodediagnostic.json"])
    assert capture["destination"].startswith(f"s3://{bucket}/mignurse/nodediagnostic/{node}-")
    assert boto3.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert sim.objects("nodediagnostics") == []
    main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    assert any(f["id"] == "mig-hook-kubelet-restart" for f in document["findings"])


def test_an_agent_that_never_answers_times_out_and_its_object_is_deleted(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.silent.add(broken_node(sim))
    code, out, err, _ = collect(sim, tmp_path, capsys, "--timeout", "2")
    assert code == 1
    assert "waiting for the agent on the node" in err
    assert "capture running" not in err
    assert "no capture within 2 s: the agent never took it up" in out
    assert "--timeout allows more" in out
    assert sim.objects("nodediagnostics") == []


def test_a_failed_capture_says_the_agents_message_and_cleans_up(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.failing[broken_node(sim)] = "failed to create accessor: no space left"
    code, out, _, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert (
        "the agent's capture ended Failure: fatal error during log collection processfailed "
        "to create accessor: no space left" in out
    )
    assert sim.objects("nodediagnostics") == []


def test_a_cluster_without_the_agents_crd_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimCluster(load_scenario(SCENARIO), speed=0, node_diagnostics=False) as sim:
        code, out, _, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert "the NodeDiagnostic API (nodediagnostics.eks.amazonaws.com) is not served" in out
    assert "eks-node-monitoring-agent add-on" in out


@pytest.mark.parametrize(
    ("denied", "said"),
    [
        (RbacDeny("create", "nodediagnostics"), "RBAC refused: cannot create nodediagnostics"),
        (RbacDeny("get", "nodes/proxy"), "RBAC refused: cannot get nodes/proxy"),
    ],
)
def test_rbac_refusals_name_the_verb_and_resource(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], denied: RbacDeny, said: str
) -> None:
    scenario = dataclasses.replace(load_scenario(SCENARIO), rbac_deny=(denied,))
    with SimCluster(scenario, speed=0) as sim:
        code, out, _, _ = collect(sim, tmp_path, capsys)
        assert sim.objects("nodediagnostics") == []
    assert code == 1
    assert said in out


def test_an_object_that_cannot_be_deleted_is_named_with_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = dataclasses.replace(
        load_scenario(SCENARIO), rbac_deny=(RbacDeny("delete", "nodediagnostics"),)
    )
    with SimCluster(scenario, speed=0) as sim:
        node = broken_node(sim)
        code, out, err, bundle = collect(sim, tmp_path, capsys)
        assert [o["metadata"]["name"] for o in sim.objects("nodediagnostics")] == [node]
    assert code == 0, err + out  # the evidence is in; what stayed is said with it
    errors = bundle_files(bundle)[f"nodes/{node}/errors.txt"].decode()
    assert f"was left behind: kubectl delete nodediagnostic {node}" in errors


def test_an_existing_object_of_the_nodes_name_is_not_touched(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Someone else's capture of the node: the agent acts once per object, so mignurse
    neither reuses nor deletes it."""
    node = broken_node(sim)
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "other")))
    try:
        body = {"metadata": {"name": node}, "spec": {"logCapture": {"destination": "node"}}}
        client.create(NODEDIAGNOSTICS, body)
    finally:
        client.close()
    code, out, _, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert f"a NodeDiagnostic named {node!r} already exists (not mignurse's" in out
    assert [o["metadata"]["name"] for o in sim.objects("nodediagnostics")] == [node]


def test_a_finished_leftover_of_an_earlier_run_is_replaced_a_running_one_is_not(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed before its clean-up leaves its labelled object: once its capture is over
    it is deleted and the node captured again; while another run's capture runs it is not."""
    node = broken_node(sim)
    assert sim.node_diagnostics is not None
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "other")))
    try:
        body = {
            "metadata": {"name": node, "labels": {"app.kubernetes.io/managed-by": "mignurse"}},
            "spec": {"logCapture": {"destination": "node"}},
        }
        sim.node_diagnostics.silent.add(node)  # the other run's capture never finishes
        client.create(NODEDIAGNOSTICS, body)
        code, out, _, _ = collect(sim, tmp_path, capsys, "--timeout", "5")
        assert code == 1
        assert "already exists (another mignurse run's, still capturing)" in out
        client.delete(NODEDIAGNOSTICS, node)
        sim.node_diagnostics.silent.clear()
        client.create(NODEDIAGNOSTICS, body)
        for _ in range(100):  # the agent finishes the leftover's capture
            if log_capture_state(client.get(NODEDIAGNOSTICS, node)).get("completed"):
                break
            time.sleep(0.05)
    finally:
        client.close()
    code, out, err, _ = collect(sim, tmp_path, capsys)
    assert code == 0, err + out
    assert "an earlier mignurse run's finished NodeDiagnostic was still there: deleted" in err
    assert sim.objects("nodediagnostics") == []


def test_a_hostile_archive_is_read_within_limits_and_its_secrets_masked(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = broken_node(sim)
    key = "AKIAIOSFODNN7EXAMPLE"
    kubelet = (
        "2026-12-05T22:23:05.000000+0000 node kubelet[1]: Started kubelet\n"
        f"2026-12-05T22:23:06.000000+0000 node kubelet[1]: aws_access_key_id={key}\n"
    ).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in (
            ("../../etc/cron.d/evil", b"* * * * * root sh\n"),  # outside the archive
            ("kubelet/kubelet.log", kubelet),
            ("containerd/containerd-log.txt", b"x" * 10),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("var_log/cloud-init.log")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/shadow"
        tar.addfile(link)
        bomb = tarfile.TarInfo("gpu/nvidia-bug-report.log.gz")
        bomb_data = b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate at all"
        bomb.size = len(bomb_data)
        tar.addfile(bomb, io.BytesIO(bomb_data))
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.archive_for = lambda _node: buffer.getvalue()
    code, out, err, bundle = collect(sim, tmp_path, capsys)
    assert code == 0, err + out
    files = bundle_files(bundle)
    base = f"nodes/{node}/"
    assert not any("cron.d" in name or "evil" in name for name in files)
    with tarfile.open(fileobj=io.BytesIO(files[base + "nodediagnostic-logs.tar.gz"])) as inner:
        assert not any(".." in m.name.split("/") for m in inner.getmembers())
    assert base + "cloud-init.log" not in files  # a symlink is never followed
    assert key.encode() not in files[base + "kubelet.log"]
    assert b"Started kubelet" in files[base + "kubelet.log"]
    with tarfile.open(fileobj=io.BytesIO(files[base + "nodediagnostic-logs.tar.gz"])) as inner:
        kept = inner.extractfile("kubelet/kubelet.log").read()  # type: ignore[union-attr]
    assert key.encode() not in kept  # the agent's archive kept beside them is masked too
    errors = files[base + "errors.txt"].decode()
    assert "'var_log/cloud-init.log' (a symlink to '/etc/shadow') not read" in errors
    assert "gpu/nvidia-bug-report.log.gz: unreadable" in errors


def test_a_partial_capture_is_kept_and_the_agents_errors_are_the_nodes_problems(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SuccessWithErrors: the agent wrote log-capture-errors.log (pkg/controllers/
    nodediagnostic.go collectLogs: one `--- Errors in collector "X" ---` section each)."""
    node = broken_node(sim)
    archive = agent_archive(
        {
            "kubelet/kubelet.log": b"2026-12-05T22:23:05.000000+0000 node kubelet[1]: Started\n",
            "log-capture-errors.log": b'--- Errors in collector "Nvidia" ---\n'
            b'exec: "nvidia-bug-report.sh": executable file not found in $PATH\n',
        }
    )
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.archive_for = lambda _node: archive
    code, out, err, bundle = collect(sim, tmp_path, capsys)
    assert code == 0, err + out
    assert "capture SuccessWithErrors (successfully saved logs to" in err
    files = bundle_files(bundle)
    capture = json.loads(files[f"nodes/{node}/nodediagnostic.json"])
    assert capture["reason"] == "SuccessWithErrors"
    errors = files[f"nodes/{node}/errors.txt"].decode()
    assert 'agent log-capture-errors.log: exec: "nvidia-bug-report.sh"' in errors
    assert "Errors in collector" not in errors  # the section headers are not problems


def test_an_answer_that_is_not_an_archive_fails_the_node_with_a_line(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A proxy's error page where the archive should be: the node is not collected."""
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.archive_for = lambda _node: b"<html>proxy error</html>"
    code, out, _, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert "starting b'<html>pr') is not the agent's gzip'd tar: nothing to read" in out
    assert sim.objects("nodediagnostics") == []


def test_ctrl_c_while_the_agent_works_deletes_the_object(sim: SimCluster, tmp_path: Path) -> None:
    node = broken_node(sim)
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.silent.add(node)
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    cancel = threading.Event()
    shell = NodeDiagnosticShell(client, node, poll_seconds=0.05)
    seen: list[str] = []

    def report(state: str) -> None:
        seen.append(state)
        cancel.set()  # Ctrl-C as soon as the object is there

    shell.report = report
    try:
        result = shell.run(collector_script(), timeout=60, stdout=io.BytesIO(), cancel=cancel)
    finally:
        client.close()
    assert result.error == CANCELLED and not result.ok
    assert seen == ["NodeDiagnostic created, waiting for the agent on the node"]
    assert sim.objects("nodediagnostics") == []


def test_auto_reaches_an_auto_mode_node_through_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """EKS Auto Mode nodes take no SSH or SSM (docs.aws.amazon.com/eks/latest/userguide/
    auto-troubleshoot.html): `auto` captures them with a NodeDiagnostic."""
    scenario = load_scenario(SCENARIO)
    auto_mode = with_pool_changes(scenario, labels=(("eks.amazonaws.com/compute-type", "auto"),))
    with SimCluster(auto_mode, speed=0) as sim:
        node = broken_node(sim)
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        bundle = tmp_path / "auto.tar.gz"
        code = main(["--kubeconfig", str(kubeconfig), "collect", node, "-o", str(bundle)])
        out = capsys.readouterr()
        assert code == 0, out.err + out.out
        assert "sim cannot reach it (an EKS Auto Mode node" in out.err
        assert sim.objects("nodediagnostics") == []
    files = bundle_files(bundle)
    manifest = json.loads(files["manifest.json"])
    assert manifest["nodes"][node]["transport"] == "nodediagnostic"
    # why the usual way failed stays with the evidence
    errors = files[f"nodes/{node}/errors.txt"].decode()
    assert "reached through the agent because sim could not: an EKS Auto Mode node" in errors


def test_auto_without_the_agent_says_why_the_node_was_not_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = with_pool_changes(
        load_scenario(SCENARIO),
        labels=(("eks.amazonaws.com/compute-type", "auto"),),
        node_monitoring_agent=False,
    )
    with SimCluster(scenario, speed=0) as sim:
        node = broken_node(sim)
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        code = main(["--kubeconfig", str(kubeconfig), "collect", node, "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"not collected: {node}: an EKS Auto Mode node" in out


def test_a_node_whose_agent_is_absent_times_out_rather_than_hangs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's DaemonSet is not on every pool: nothing ever writes a status there."""
    scenario = load_scenario(SCENARIO)
    pools = tuple(
        dataclasses.replace(p, node_monitoring_agent=p.mig_config is None) for p in scenario.pools
    )
    with SimCluster(dataclasses.replace(scenario, pools=pools), speed=0) as sim:
        assert sim.node_diagnostics is not None  # some pool runs it: the CRD is there
        code, out, _, _ = collect(sim, tmp_path, capsys, "--timeout", "2")
        assert sim.objects("nodediagnostics") == []
    assert code == 1
    assert "is eks-node-monitoring-agent running on the node?" in out


def test_a_runbooks_command_is_never_sent_as_a_capture(sim: SimCluster, tmp_path: Path) -> None:
    """The agent runs no command: a runbook step over this transport is refused before any
    object is made, and a runbook's shells never fall back to it."""

    node = broken_node(sim)
    client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
    try:
        shell = NodeDiagnosticShell(client, node)
        result = shell.run("nvidia-smi -mig 0", timeout=30, stdout=io.BytesIO())
        assert result.rc is None and "cannot run this command" in result.error
        assert sim.objects("nodediagnostics") == []
        with pytest.raises(AccessError, match="only captures a node's logs"):
            shell_factory(client, Access(transport="nodediagnostic"), sandboxes=tmp_path)
    finally:
        client.close()


def test_auto_collect_captures_an_auto_mode_node_through_the_agent(tmp_path: Path) -> None:
    """`watch --auto-collect` before a repair: the only way into an Auto Mode node is the
    agent, and the bundle holds the node's journals."""

    auto_mode = with_pool_changes(
        load_scenario("dcgm-repair-loop"), labels=(("eks.amazonaws.com/compute-type", "auto"),)
    )
    with SimCluster(auto_mode, speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "k")))
        state = ClusterState()
        watcher = ClusterWatcher(client, state, karpenter=True).start()
        try:
            assert watcher.wait_synced(15)
            (tmp_path / "sb").mkdir()
            access = Access(sandbox_shells=sandbox_shells)
            shells = shell_factory(
                client, access, sandboxes=tmp_path / "sb", simulated=True, collecting=True
            )
            lines: list[str] = []
            collector = AutoCollector(
                client, out_dir=tmp_path, shell_for=shells, clock=sim.now, report=lines.append
            )
            started = collector.check(state)
            collector.close()
        finally:
            watcher.stop()
            client.close()
        assert started
        assert sim.objects("nodediagnostics") == []
    (bundle,) = tmp_path.glob("mignurse-bundle-*.tar.gz")
    evidence = load_offline(bundle).node_evidence
    assert set(evidence) == set(started)
    assert all(e.journals.get("kubelet") for e in evidence.values())
    manifest = json.loads(bundle_files(bundle)["manifest.json"])
    assert {n["transport"] for n in manifest["nodes"].values()} == {"nodediagnostic"}


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_ctrl_c_on_the_command_line_leaves_no_node_diagnostic(
    tmp_path: Path, signum: int, code: int
) -> None:
    """SIGINT to `mignurse collect` while the agent works (or SIGTERM, SIGHUP: `kill`, a
    closed terminal): a valid partial bundle, exit 128 + the signal, and the object gone
    from the cluster."""
    with SimCluster(load_scenario(SCENARIO), speed=0) as sim:
        node = broken_node(sim)
        assert sim.node_diagnostics is not None
        sim.node_diagnostics.silent.add(node)
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        bundle = tmp_path / "partial.tar.gz"
        command = mignurse_command("--kubeconfig", str(kubeconfig), "collect", node)
        command += ["--transport", "nodediagnostic", "-o", str(bundle)]
        # faulthandler: a run that does not end is made to print every thread's stack
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
        run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not sim.objects("nodediagnostics"):
                time.sleep(0.1)
            assert sim.objects("nodediagnostics")
        finally:
            run.send_signal(signum)
            # a deadline with a wide margin: on two cores shared with the whole suite, the
            # interrupted run's packing workers may still be starting when it closes the bundle
            try:
                ended = run.wait(timeout=180)
            except subprocess.TimeoutExpired:
                run.send_signal(signal.SIGABRT)  # the stacks of where it hangs, on stderr
                ended = run.wait(timeout=30)
            stderr = run.stderr.read() if run.stderr else ""
        assert ended == code, stderr
        assert sim.objects("nodediagnostics") == []
    assert f"interrupted: {bundle} is a valid partial bundle" in stderr


def test_auto_on_a_real_looking_cluster_falls_back_from_ssh_to_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster without the simulator's mark: `auto` is SSH, which the node refuses
    (~/.ssh/config sends it to a port of 127.0.0.1 nothing listens on), then the agent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(f"Host *\n  HostName 127.0.0.1\n  Port {port}\n")
    monkeypatch.setenv("HOME", str(home))
    with SimCluster(load_scenario(SCENARIO), speed=0) as sim:
        node = broken_node(sim)
        config = yaml.safe_load(sim.write_kubeconfig(tmp_path / "config").read_text())
        for entry in config["clusters"]:
            entry["cluster"]["extensions"] = [
                e for e in entry["cluster"].get("extensions") or [] if e["name"] != SIM_EXTENSION
            ]
        kubeconfig = tmp_path / "real-looking"
        kubeconfig.write_text(yaml.safe_dump(config))
        bundle = tmp_path / "ssh-then-agent.tar.gz"
        code = main(["--kubeconfig", str(kubeconfig), "collect", node, "-o", str(bundle)])
        out = capsys.readouterr()
        assert code == 0, out.err + out.out
        assert "collecting 1 node(s) over ssh" in out.err
        assert "ssh cannot reach it (connection refused by" in out.err
        assert sim.objects("nodediagnostics") == []
    files = bundle_files(bundle)
    assert json.loads(files["manifest.json"])["nodes"][node]["transport"] == "nodediagnostic"
    assert "because ssh could not: connection refused" in files[f"nodes/{node}/errors.txt"].decode()


def test_a_dead_kubelet_closes_the_node_proxy_and_the_bucket_still_brings_the_logs(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], bucket: str
) -> None:
    """The agent is a pod of its own: it captures while kubelet is stopped, but the node proxy
    goes through kubelet (kube-apiserver answers 503 "error trying to reach service")."""
    node = broken_node(sim)
    machine = sim.loops.machines[node]
    with sim.loops.txn():
        sim.loops.kubelet.stop(machine)
    code, out, _, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert "error trying to reach service" in out
    assert "--bucket BUCKET has the agent upload it to S3" in out
    assert sim.objects("nodediagnostics") == []
    code, out, err, bundle = collect(sim, tmp_path, capsys, "--bucket", bucket)
    assert code == 0, err + out
    assert f"nodes/{node}/kubelet.log" in bundle_files(bundle)


def test_an_agents_message_cannot_drive_the_terminal(
    sim: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The status message is the node's text: an OSC 52 clipboard write in it is shown, not
    obeyed."""
    assert sim.node_diagnostics is not None
    sim.node_diagnostics.failing[broken_node(sim)] = "\x1b]52;c;ZWNobyBwd25lZA==\x07\u202e"
    code, out, err, _ = collect(sim, tmp_path, capsys)
    assert code == 1
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07<U+202E>" in out


@pytest.mark.parametrize(
    ("obj", "state"),
    [
        ({}, {}),  # just created: no status yet
        ({"status": None}, {}),
        ({"status": {"captureStatuses": "Log"}}, {}),
        ({"status": {"captureStatuses": [None, 7, {"type": "Packet", "state": {"x": 1}}]}}, {}),
        ({"status": {"captureStatuses": [{"type": "Log", "state": None}]}}, {}),
        # as the agent writes it (nodediagnostic_status.go: no omitempty on the pointers)
        (
            {
                "status": {
                    "captureStatuses": [
                        {
                            "type": "Log",
                            "state": {"running": None, "completed": {"reason": "Failure"}},
                        }
                    ]
                }
            },
            {"running": None, "completed": {"reason": "Failure"}},
        ),
    ],
)
def test_the_log_captures_state_is_read_from_any_status_shape(obj: Any, state: Any) -> None:
    assert log_capture_state(obj) == state
