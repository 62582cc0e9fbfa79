"""`mignurse diagnose --from` on hand-written kubectl dumps of both incidents, and on calm
clusters: the incident is named with the runbook that fits; calm raises nothing critical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.sim import SimCluster, load_scenario

from .test_sources import write_dumps

INCIDENTS = Path(__file__).parent.parent / "fixtures" / "incidents"


def diagnose_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["diagnose", *args, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_dcgm_repair_loop_is_named_with_pause_and_a_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = diagnose_json(
        capsys, "--from", str(INCIDENTS / "dcgm-repair-loop"), "--now", "2026-11-29T02:55:00Z"
    )
    assert code == 2
    loops = [f for f in document["findings"] if f["id"] == "node-repair-loop"]
    assert len(loops) == 1, document["findings"]
    loop = loops[0]
    assert loop["severity"] == "critical"
    assert loop["nodepool"] == "gpu-inference"
    assert "pause-node-repair" in loop["runbooks"]
    assert loop["deadline"] == "2026-11-29T02:58:10Z"  # AHR False at 02:48:10 + 10 min
    assert loop["evidence"], "a claim without evidence"
    assert "ip-10-0-57-99.us-west-2.compute.internal" in loop["nodes"]
    # The two calm nodes on the old image are not accused of anything.
    accused = {n for f in document["findings"] if f["severity"] == "critical" for n in f["nodes"]}
    assert "ip-10-0-26-103.us-west-2.compute.internal" not in accused


def test_the_mig_kubelet_restart_incident_asks_for_replacement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = diagnose_json(
        capsys, "--from", str(INCIDENTS / "mig-hook-notready"), "--now", "2026-11-29T03:10:00Z"
    )
    assert code == 2
    node = "ip-10-0-0-114.us-west-2.compute.internal"
    named = [
        f
        for f in document["findings"]
        if f["id"] in ("notready-loop", "mig-hook-kubelet-restart") and node in f["nodes"]
    ]
    assert named, document["findings"]
    assert "replace-instance" in named[0]["runbooks"]
    healthy_sibling = "ip-10-0-26-127.us-west-2.compute.internal"
    assert not any(healthy_sibling in f["nodes"] for f in document["findings"])


def test_a_healthy_cluster_raises_nothing_critical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = SimCluster(load_scenario("healthy"), speed=0)
    write_dumps(sim, tmp_path)
    code, document = diagnose_json(capsys, "--from", str(tmp_path))
    assert code in (0, 1)
    assert not [f for f in document["findings"] if f["severity"] == "critical"]


def test_the_table_shows_the_deadline_as_of_now_and_runbooks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "diagnose",
            "--from",
            str(INCIDENTS / "dcgm-repair-loop"),
            "--now",
            "2026-11-29T02:55:00Z",
        ]
    )
    out = capsys.readouterr().out
    assert code == 2
    assert "CRITICAL  node-repair-loop  gpu-inference" in out
    # judged at --now, not the present: a moment, not a countdown that reads as live
    assert out.startswith("as of 2026-11-29 02:55:00Z (--now)\n")
    assert "repair would have fired at 02:58:10Z, 3m10s after --now" in out
    assert "deadline in" not in out
    assert "runbooks: " in out and "pause-node-repair" in out


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--from", str(tmp_path)]) == 2
    assert "has no cluster/nodes.json" in capsys.readouterr().err
    assert main(["diagnose", "--from", str(INCIDENTS / "dcgm-repair-loop"), "--now", "soon"]) == 2
    err = capsys.readouterr().err
    assert "--now 'soon' is not an RFC 3339 time" in err and err.count("\n") == 1


def test_live_diagnosis_of_the_simulated_repair_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the real client: objects, events and the Karpenter Deployment's gates."""
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        code, document = diagnose_json(
            capsys, "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path / "state")
        )
        current = [
            n
            for n in sim.objects("nodes")
            if any(
                c["type"] == "AcceleratedHardwareReady" and c["status"] == "False"
                for c in n["status"]["conditions"]
            )
        ]
    assert code == 2
    assert document["context"] == "sim-dcgm-repair-loop"
    loop = next(f for f in document["findings"] if f["id"] == "node-repair-loop")
    assert loop["nodepool"] == "gpu-inference"
    # NodeRepair is on in the Deployment, so the hardware finding carries the same deadline.
    hardware = next(f for f in document["findings"] if f["id"] == "accelerated-hardware-not-ready")
    assert hardware["deadline"] == loop["deadline"] is not None
    assert {n["metadata"]["name"] for n in current} <= set(hardware["nodes"])


def test_a_bundle_with_node_journals_names_the_kubelet_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same incident with the node's own files: the cause, not just the suspicion."""
    evidence = Path(__file__).parent.parent / "evidence" / "fixtures"
    node = "ip-10-0-0-114.us-west-2.compute.internal"
    for name in ("nodes", "nodeclaims", "events"):
        text = (INCIDENTS / "mig-hook-notready" / f"{name}.json").read_text()
        (tmp_path / "cluster").mkdir(exist_ok=True)
        (tmp_path / "cluster" / f"{name}.json").write_text(text)
    node_dir = tmp_path / "nodes" / node
    node_dir.mkdir(parents=True)
    for name in ("kubelet.log", "containerd.log"):
        (node_dir / name).write_text((evidence / name).read_text())
    (node_dir / "cgroup-fs.txt").write_text("cgroup2fs\n")
    code, document = diagnose_json(capsys, "--from", str(tmp_path), "--now", "2026-11-29T03:10:00Z")
    assert code == 2
    ids = {f["id"] for f in document["findings"] if node in f["nodes"]}
    assert "mig-hook-kubelet-restart" in ids
    assert "notready-loop" not in ids  # the cause replaces the suspicion
    restart = next(f for f in document["findings"] if f["id"] == "mig-hook-kubelet-restart")
    assert restart["runbooks"] == ["replace-instance"]
    assert any(e["source"].startswith("journal:") for e in restart["evidence"])


def test_node_takes_the_short_name_that_nodes_prints(capsys: pytest.CaptureFixture[str]) -> None:
    incident = ["--from", str(INCIDENTS / "dcgm-repair-loop"), "--now", "2026-11-29T02:55:00Z"]
    full = "ip-10-0-57-99.us-west-2.compute.internal"

    by_full = diagnose_json(capsys, *incident, "--node", full)
    by_short = diagnose_json(capsys, *incident, "--node", "ip-10-0-57-99")

    assert by_short == by_full
    code, document = by_short
    assert code == 2 and document["findings"] and document["timeline"]
    assert all(full in f["nodes"] for f in document["findings"])
    assert main(["diagnose", *incident, "--node", "ip-10-9-9-9"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "mignurse: error: no node 'ip-10-9-9-9' in dcgm-repair-loop: check the name "
        "(mignurse nodes)\n"
    )


def test_an_unknown_pool_is_refused_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As `nodes` refuses it: "No findings" for a typo would read as an all-clear."""
    incident = ["--from", str(INCIDENTS / "dcgm-repair-loop"), "--now", "2026-11-29T02:55:00Z"]

    code = main(["diagnose", *incident, "--nodepool", "nope"])

    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith(
        "mignurse: error: no NodePool or node group named 'nope' in 'dcgm-repair-loop': known "
        "GPU pools are "
    )
    assert "gpu-inference" in captured.err and captured.err.count("\n") == 1
    assert diagnose_json(capsys, *incident, "--nodepool", "gpu-inference")[0] == 2


def test_a_managed_node_group_is_a_known_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = SimCluster(load_scenario("healthy"), speed=0)
    write_dumps(sim, tmp_path)

    code, document = diagnose_json(capsys, "--from", str(tmp_path), "--nodepool", "ng-gpu-l4")

    assert code in (0, 1) and document["kind"] == "Diagnosis"
    assert main(["diagnose", "--from", str(tmp_path), "--nodepool", "ng-gpu-l5"]) == 2
    assert "known GPU pools are" in capsys.readouterr().err
