"""The node collector end to end: the real script, LocalShell, and a NodeSandbox per story."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.diagnose.engine import diagnose
from mignurse.diagnose.sources import load_offline
from mignurse.model import MIG_ENABLED, parse_time
from mignurse.nodeaccess.base import CANCELLED, CommandResult
from mignurse.nodeaccess.local import LocalShell
from mignurse.nodeaccess.script import collector_script
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import NodeSandbox

FORBIDDEN = re.compile(
    r"systemctl\s+(restart|stop|start|daemon-reload)|nvidia-mig-parted\s+'?apply|nvidia-smi\s+'?-r\b"
)


@pytest.fixture(scope="module")
def sim_nodes() -> list[dict[str, Any]]:
    return SimCluster(load_scenario("mig-hook-notready"), speed=0).objects("nodes")


def _failed_gpu_node(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        n for n in nodes if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    )


def _collect(
    sandbox: NodeSandbox, script: str | None = None, timeout: float = 20, shell: str = "sh"
) -> tuple[CommandResult, bytes]:
    runner = LocalShell(sandbox.node, env=sandbox.env, path_prefix=sandbox.path_prefix, shell=shell)
    sink = io.BytesIO()
    result = runner.run(script or collector_script(), timeout=timeout, stdout=sink)
    return result, sink.getvalue()


def _untar(data: bytes, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "node"


def _bundle(tmp_path: Path, nodes: list[dict[str, Any]], node: str, data: bytes) -> Path:
    bundle = tmp_path / "bundle"
    (bundle / "cluster").mkdir(parents=True)
    (bundle / "cluster/nodes.json").write_text(json.dumps({"kind": "NodeList", "items": nodes}))
    staged = _untar(data, tmp_path / "staged")
    (bundle / "nodes").mkdir()
    shutil.move(staged, bundle / "nodes" / node)
    return bundle


def _manifest(node_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((node_dir / "manifest.json").read_text())
    return doc


@pytest.mark.parametrize("story", ["mig-hook", "dcgm-loop", "healthy"])
def test_collects_each_story_into_a_loadable_bundle(
    tmp_path: Path, sim_nodes: list[dict[str, Any]], story: str
) -> None:
    node_json = _failed_gpu_node(sim_nodes)
    sandbox = NodeSandbox.for_node(tmp_path / "sbx", node_json, story=story)
    result, data = _collect(sandbox)
    assert result.ok, result
    assert result.transport == "local" and result.bytes_out == len(data) > 0

    bundle = _bundle(tmp_path, sim_nodes, sandbox.node, data)
    node_dir = bundle / "nodes" / sandbox.node
    manifest = _manifest(node_dir)
    by_file = {s["file"]: s for s in manifest["sources"]}
    assert by_file["kubelet.log"]["rc"] == 0 and by_file["kubelet.log"]["bytes"] > 0
    assert all("seconds" in s and "sha256" in s for s in manifest["sources"] if "rc" in s)
    assert by_file["kernel-previous-boot.log"]["rc"] == 1  # first boot: journalctl says so
    assert "kernel-previous-boot.log" in (node_dir / "errors.txt").read_text()

    gathered = load_offline(bundle)
    evidence = gathered.node_evidence[sandbox.node]
    assert evidence.journals["kubelet"].entries and evidence.journals["containerd"].entries
    assert evidence.cgroup is not None and evidence.cgroup.version == 2
    assert evidence.os_release is not None and evidence.os_release.is_al2023
    assert evidence.mig is not None and len(evidence.mig.gpus) == 8
    mig_on = all(g.mig_current == MIG_ENABLED for g in evidence.mig.gpus)
    assert mig_on == (story == "mig-hook")
    assert all(not g.devices for g in evidence.mig.gpus)

    now = node_json_time(node_json) + timedelta(minutes=20)
    ids = {(f.id, n) for f in diagnose(gathered.to_input(now)).findings for n in f.nodes}
    assert (("mig-hook-kubelet-restart", sandbox.node) in ids) == (story == "mig-hook")
    assert not [c for c in sandbox.calls_log.read_text().splitlines() if FORBIDDEN.search(c)]


def node_json_time(node_json: dict[str, Any]) -> datetime:
    created = parse_time(node_json["metadata"]["creationTimestamp"])
    assert created is not None
    return created


def test_a_failing_source_is_listed_and_the_rest_still_run(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "healthy"})
    sandbox.stub("nvidia-mig-parted", "echo 'mig-parted: cannot open NVML' >&2\nexit 1\n")
    result, data = _collect(sandbox)
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    errors = (node_dir / "errors.txt").read_text()
    assert (
        "mig-parted-export.yaml: nvidia-mig-parted exited 1: mig-parted: cannot open NVML" in errors
    )
    by_file = {s["file"]: s for s in _manifest(node_dir)["sources"]}
    assert by_file["mig-parted-export.yaml"]["rc"] == 1
    assert not (node_dir / "mig-parted-export.yaml").exists()  # nothing came out of it
    assert by_file["systemctl-failed.txt"]["rc"] == 0  # later sources still ran
    assert (node_dir / "systemctl-failed.txt").read_text()


def test_a_source_over_the_cap_is_truncated_and_marked(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "mig-hook"})
    result, data = _collect(sandbox, collector_script(max_bytes_per_source=1000))
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    by_file = {s["file"]: s for s in _manifest(node_dir)["sources"]}
    kubelet = by_file["kubelet.log"]
    assert kubelet["truncated"] is True and kubelet["bytes"] == 1000
    assert (node_dir / "kubelet.log").stat().st_size == 1000
    assert by_file["cgroup-fs.txt"]["truncated"] is False


def test_a_slow_source_times_out_alone(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "healthy"})
    finished = tmp_path / "crictl-finished"
    sandbox.stub("crictl", f"sleep 30\ntouch {finished}\n")
    result, data = _collect(sandbox, collector_script(source_timeout=1))
    assert result.ok
    assert not finished.exists()  # killed at its timeout, not waited out
    node_dir = _untar(data, tmp_path / "out")
    crictl = {s["file"]: s for s in _manifest(node_dir)["sources"]}["crictl-ps.txt"]
    assert crictl["timed_out"] is True and crictl["rc"] == 124
    assert "crictl-ps.txt: crictl timed out after 1s" in (node_dir / "errors.txt").read_text()


def test_too_little_free_space_refuses_with_a_manifest(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "healthy"})
    result, data = _collect(sandbox, collector_script(min_free_mb=10**9))
    assert result.rc == 3
    node_dir = _untar(data, tmp_path / "out")
    manifest = _manifest(node_dir)
    assert manifest["refused"].startswith("refused: only") and manifest["sources"] == []
    assert "refused: only" in (node_dir / "errors.txt").read_text()
    assert not sandbox.calls_log.exists()  # nothing was run


def test_the_script_never_changes_the_node_or_reads_user_data() -> None:
    script = collector_script(until="2026-11-30 01:00:00")
    assert not FORBIDDEN.search(script)
    assert "user-data" not in script and "set -e" not in script
    assert "--until '2026-11-30 01:00:00'" not in script  # values are variables, quoted
    with pytest.raises(ValueError):
        collector_script(since="1 hour ago\nreboot")


def test_runs_under_dash(tmp_path: Path) -> None:
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash is not installed")
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "mig-hook"})
    result, data = _collect(sandbox, shell=dash)
    assert result.ok, result.stderr_tail
    node_dir = _untar(data, tmp_path / "out")
    assert (node_dir / "cgroup-fs.txt").read_text().strip() == "cgroup2fs"
    json.loads((node_dir / "manifest.json").read_text())


def test_a_script_past_its_deadline_is_killed(tmp_path: Path) -> None:
    runner = LocalShell("n1")
    sink = io.BytesIO()
    # 3 s: the shell must start and print under a busy machine; the sleep is ten times that
    result = runner.run("echo started\nsleep 30\necho never\n", timeout=3, stdout=sink)
    assert result.timed_out and result.rc is None and not result.ok
    assert sink.getvalue() == b"started\n"  # killed in its sleep: "never" was never printed


def test_ctrl_c_stops_a_running_script_at_once(tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    sink = io.BytesIO()
    script = f"echo started\nsleep 30\ntouch {marker}\n"
    result = LocalShell("n1").run(script, timeout=60, stdout=sink, cancel=cancel)
    assert result.error == CANCELLED and result.rc is None and not result.timed_out
    assert sink.getvalue() == b"started\n"
    time.sleep(0.2)
    assert not marker.exists()  # the script was killed, not left to finish its sleep


def test_large_output_streams_without_deadlock() -> None:
    sink = io.BytesIO()
    script = "head -c 5000000 /dev/zero\nhead -c 200000 /dev/zero >&2\n"
    result = LocalShell("n1").run(script, timeout=20, stdout=sink)
    assert result.ok and result.bytes_out == 5_000_000 == len(sink.getvalue())
    assert len(result.stderr_tail) == 8 * 1024


def test_nvml_json_comes_from_mignurse_probe_when_installed_on_the_node(tmp_path: Path) -> None:
    """Where mignurse is on the node, its NVML probe is the MIG state diagnosis reads first."""
    from mignurse.diagnose.sources import load_offline
    from mignurse.model import MigState

    state = MigState(source="nvml", status="no-gpus", detail="probe ran on the node")
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    sandbox.stub("mignurse", f"cat <<'JSON'\n{json.dumps(state.to_json())}\nJSON\nexit 1\n")
    result, data = _collect(sandbox)
    assert result.ok
    nodes = [{"metadata": {"name": "n1"}}]
    gathered = load_offline(_bundle(tmp_path, nodes, "n1", data))
    mig = gathered.node_evidence["n1"].mig
    assert mig is not None and (mig.source, mig.status) == ("nvml", "no-gpus")
    assert any(
        "mignurse 'probe' '-o' 'json'" in c for c in sandbox.calls_log.read_text().splitlines()
    )


def test_without_mignurse_on_the_node_nvml_json_is_skipped_with_a_reason(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "healthy"})
    # The system PATH only: a developer's activated venv would put a real mignurse on it.
    env = {**sandbox.env, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    runner = LocalShell("n1", env=env, path_prefix=sandbox.path_prefix)
    sink = io.BytesIO()
    assert runner.run(collector_script(), timeout=20, stdout=sink).ok
    node_dir = _untar(sink.getvalue(), tmp_path / "out")
    entry = next(s for s in _manifest(node_dir)["sources"] if s["file"] == "nvml.json")
    assert "mignurse not installed" in entry["skipped"]


def test_al2023_cloud_init_without_format_json_falls_back_to_text_and_status_files(
    tmp_path: Path,
) -> None:
    # AL2023's cloud-init 22.2.2 answers `status --format json` with a usage error (exit 2).
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    result, data = _collect(sandbox)
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    by_file = {s["file"]: s for s in _manifest(node_dir)["sources"]}
    assert (
        by_file["cloud-init-status.json"]["rc"],
        by_file["cloud-init-status.json"]["bytes"],
    ) == (
        2,
        0,
    )
    assert not (node_dir / "cloud-init-status.json").exists()
    assert (node_dir / "cloud-init-status.txt").read_text().startswith("status: done\n")
    for name in ("cloud-init-run-status.json", "cloud-init-run-result.json"):
        assert json.loads((node_dir / name).read_text())["v1"]["datasource"] == "DataSourceEc2Local"
    nodes = [{"metadata": {"name": "n1"}}]
    cloud_init = load_offline(_bundle(tmp_path, nodes, "n1", data)).node_evidence["n1"].cloud_init
    assert cloud_init is not None and cloud_init.problems == ()
    assert (cloud_init.status, cloud_init.form, cloud_init.datasource) == (
        "done",
        "status-text",
        "ec2local",
    )


def test_cloud_init_status_files_are_read_when_the_text_is_not(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    sandbox.stub("cloud-init", "echo 'Segmentation fault' >&2; exit 139\n")
    result, data = _collect(sandbox)
    assert result.ok
    nodes = [{"metadata": {"name": "n1"}}]
    cloud_init = load_offline(_bundle(tmp_path, nodes, "n1", data)).node_evidence["n1"].cloud_init
    assert cloud_init is not None
    assert (cloud_init.status, cloud_init.form, cloud_init.last_update != "") == (
        "done",
        "status-files",
        True,
    )


def test_newer_cloud_init_json_is_kept_without_a_fallback(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    answer = '{\n  "status": "done",\n  "extended_status": "degraded done",\n  "errors": []\n}'
    sandbox.stub("cloud-init", f"cat <<'JSON'\n{answer}\nJSON\nexit 2\n")
    result, data = _collect(sandbox)
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    assert json.loads((node_dir / "cloud-init-status.json").read_text())["status"] == "done"
    assert not (node_dir / "cloud-init-status.txt").exists()
    assert not (node_dir / "cloud-init-run-status.json").exists()


def test_node_monitoring_agent_log_is_collected_newest_file_last_bytes(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "dcgm-loop"})
    pod = sandbox.fs / (
        "var/log/pods/kube-system_eks-node-monitoring-agent-q8w2m_5e0d1c2b/"
        "eks-node-monitoring-agent"
    )
    pod.mkdir(parents=True)
    corpus = Path(__file__).parents[1] / "corpus" / "journal" / "nma-cri.log"
    lines = corpus.read_text().splitlines()[1:]  # the file itself, without the header
    old = pod / "0.log"
    old.write_text("2026-11-29T02:01:00Z stderr F an older run\n")
    newest = pod / "1.log"
    newest.write_text(
        "2026-11-29T03:00:00Z stderr F " + "x" * 3000 + "\n" + "\n".join(lines) + "\n"
    )
    os.utime(old, (1, 1))
    result, data = _collect(sandbox, collector_script(max_bytes_per_source=4096))
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    nma = (node_dir / "nma.log").read_text()
    assert nma.startswith("==> ") and nma.splitlines()[0].endswith(
        "/eks-node-monitoring-agent/1.log <=="
    )
    assert "an older run" not in nma and "xxxx" not in nma  # the cut first line is dropped
    gathered = load_offline(_bundle(tmp_path, [{"metadata": {"name": "n1"}}], "n1", data))
    journal = gathered.node_evidence["n1"].journals["nma"]
    assert journal.problems == ()
    assert {e.ident for e in journal.entries} == {"eks-node-monitoring-agent"}
    assert any(
        "failed to initialize DCGM: libdcgm.so not Found" in e.message for e in journal.entries
    )


def test_without_the_agent_nma_log_is_skipped(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path, node="n1", scenario_facts={"story": "healthy"})
    result, data = _collect(sandbox)
    assert result.ok
    node_dir = _untar(data, tmp_path / "out")
    entry = next(s for s in _manifest(node_dir)["sources"] if s["file"] == "nma.log")
    assert entry["skipped"] == "no eks-node-monitoring-agent pod log"
