"""Node rules: notready-loop, mig-hook-kubelet-restart, mig-config-failed, mig-layout-mismatch,
over the simulator's scenarios plus node evidence built from realistic bundle files."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mignurse.cluster.history import Transition
from mignurse.diagnose import engine
from mignurse.diagnose.findings import Finding
from mignurse.diagnose.inputs import DiagnosisInput, History, KarpenterSettings, NodeEvidence
from mignurse.diagnose.rules import mig_config, mig_hook, mig_layout, notready_loop
from mignurse.evidence import (
    parse_cgroup_fs,
    parse_journal,
    parse_nvml_json,
    parse_os_release,
    parse_smi_xml,
)
from mignurse.model import Node
from mignurse.sim import SimCluster
from mignurse.sim.scenario import load_scenario

from .simdiag import input_of

sys.path.insert(0, str(Path(__file__).parent.parent / "evidence"))
from smi_samples import h100_xml

FIXTURES = Path(__file__).parent.parent / "evidence" / "fixtures"
OUR_IDS = {"notready-loop", "mig-hook-kubelet-restart", "mig-config-failed", "mig-layout-mismatch"}
RULES = [
    ("notready-loop", notready_loop.rule),
    ("mig-hook-kubelet-restart", mig_hook.rule),
    ("mig-config-failed", mig_config.rule),
    ("mig-layout-mismatch", mig_layout.rule),
]
FIXTURE_KUBELET_START = datetime(2026, 11, 29, 3, 1, 1, 998312, tzinfo=UTC)
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)\+0000", re.MULTILINE)


# -- building inputs -------------------------------------------------------------------------


def sim_input(scenario: str) -> DiagnosisInput:
    return input_of(SimCluster(load_scenario(scenario), speed=0))


def run(inp: DiagnosisInput) -> list[Finding]:
    diagnosis = engine.diagnose(inp, rules=RULES)
    assert diagnosis.rule_errors == []
    return diagnosis.findings


def about(findings: list[Finding], node: str) -> dict[str, Finding]:
    found = {f.id: f for f in findings if node in f.nodes}
    assert len(found) == len([f for f in findings if node in f.nodes]), "one finding per id"
    return found


def incident_node(inp: DiagnosisInput) -> Node:
    return next(n for n in inp.snapshot.gpu_nodes() if n.mig_config_state == "failed")


def sibling_node(inp: DiagnosisInput) -> Node:
    return next(n for n in inp.snapshot.gpu_nodes() if n.mig_config_state == "success")


def with_node(inp: DiagnosisInput, node: Node) -> DiagnosisInput:
    nodes = {**inp.snapshot.nodes, node.name: node}
    return replace(inp, snapshot=replace(inp.snapshot, nodes=nodes))


def relabel(node: Node, **labels: str) -> Node:
    return replace(node, labels={**node.labels, **labels})


def shifted(text: str, start: datetime) -> str:
    """The fixture journal moved so kubelet's first start falls at `start`."""
    delta = start - FIXTURE_KUBELET_START

    def move(m: re.Match[str]) -> str:
        when = datetime.fromisoformat(m.group(1) + "+00:00") + delta
        return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+0000"

    return _STAMP.sub(move, text)


def bundle(node: Node, *, cgroup: str = "cgroup2fs\n") -> NodeEvidence:
    """The node's support bundle: the incident's kubelet/containerd journals (kubelet
    started at node creation, stopped 40 s later, restarted, then cgroup failures)."""
    assert node.created is not None
    start = node.created

    def journal(unit: str) -> str:
        return shifted((FIXTURES / f"{unit}.log").read_text(), start)

    return NodeEvidence(
        node=node.name,
        journals={
            "kubelet": parse_journal(journal("kubelet"), "journal:kubelet"),
            "containerd": parse_journal(journal("containerd"), "journal:containerd"),
        },
        cgroup=parse_cgroup_fs(cgroup),
        os_release=parse_os_release((FIXTURES / "os-release-al2023").read_text()),
    )


def texts(finding: Finding) -> str:
    return "\n".join(f"{e.source} {e.text}" for e in finding.evidence)


# -- the mig-hook incident --------------------------------------------------------------------


def test_mig_hook_incident_with_node_evidence() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, node_evidence={node.name: bundle(node)})

    found = about(run(inp), node.name)

    hook = found["mig-hook-kubelet-restart"]
    assert hook.severity == "critical"
    assert hook.nodepool == "gpu-mig"
    assert hook.runbooks == ("replace-instance",)
    assert "40 s after its first start" in hook.summary
    assert "nvidia-mig-parted apply" in hook.summary and "empty hooks file" in hook.summary
    evidence = texts(hook)
    assert "node:cgroup-fs /sys/fs/cgroup is cgroup2fs (cgroup v2)" in evidence
    assert "journal:kubelet line 10: systemd[1]: Stopping kubelet.service" in evidence
    assert "journal:containerd" in evidence and "unable to apply cgroup configuration" in evidence
    assert "nvidia-mig-manager" in evidence  # the early-boot sandbox that did it
    assert "label nvidia.com/mig.config=all-1g.10gb" in evidence
    stop = next(e for e in hook.evidence if "Stopping kubelet" in e.text)
    assert stop.time == node.created + timedelta(seconds=40.347589)  # type: ignore[operator]
    # One explanation per node: the generic NotReady finding stays quiet.
    assert "notready-loop" not in found
    assert mig_hook.mig_hook_holds(inp, node.name)


def test_mig_hook_incident_without_node_evidence_is_a_suspicion() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)

    found = about(run(inp), node.name)

    loop = found["notready-loop"]
    assert loop.severity == "critical"
    assert "Ready for 20 s" in loop.summary
    assert "suspect MIG reconfiguration" in loop.summary
    assert f"mignurse collect {node.name}" in loop.summary
    assert loop.runbooks == ("cordon-and-collect", "replace-instance")
    assert loop.deadline is None  # the scenario runs with node repair off
    evidence = texts(loop)
    assert "event Normal NodeNotReady from kubelet" in evidence
    assert "condition Ready=False, reason KubeletNotReady" in evidence
    assert "mig-hook-kubelet-restart" not in found


def test_repair_deadline_when_karpenter_repairs() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, karpenter=KarpenterSettings(node_repair=True))

    loop = about(run(inp), node.name)["notready-loop"]

    assert node.ready is not None and node.ready.last_transition is not None
    assert loop.deadline == node.ready.last_transition + timedelta(minutes=30)


def test_cgroup_v1_node_is_not_the_mig_hook() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    inp = replace(inp, node_evidence={node.name: bundle(node, cgroup="tmpfs\n")})

    found = about(run(inp), node.name)

    assert "mig-hook-kubelet-restart" not in found
    loop = found["notready-loop"]
    # The logs are in hand: no request to collect, no MIG guess.
    assert "collect" not in loop.summary and "suspect" not in loop.summary
    assert "went NotReady 20 s after its first Ready" in loop.summary


def test_healthy_sibling_mig_node_raises_nothing() -> None:
    inp = sim_input("mig-hook-notready")
    sibling = sibling_node(inp)
    healthy = NodeEvidence(
        node=sibling.name,
        cgroup=parse_cgroup_fs("cgroup2fs\n"),
        mig=parse_smi_xml(h100_xml(gpus=8, devices_per_gpu=7)),
    )
    inp = replace(inp, node_evidence={sibling.name: healthy})

    assert about(run(inp), sibling.name) == {}


def test_garbled_node_evidence_is_reported_not_raised() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)
    garbled = NodeEvidence(
        node=node.name,
        journals={
            "kubelet": parse_journal("\x00\x01 binary junk\n-- cut --\n", "journal:kubelet"),
            "containerd": parse_journal("", "journal:containerd"),
        },
        cgroup=parse_cgroup_fs("stat: cannot read file system information for '/sys/fs/cgroup'"),
        os_release=parse_os_release("\x00"),
        mig=parse_nvml_json("Traceback (most recent call last):"),
        problems=("kubelet.log: journalctl timed out after 60 s",),
    )
    inp = replace(inp, node_evidence={node.name: garbled})

    found = about(run(inp), node.name)

    assert "mig-hook-kubelet-restart" not in found
    loop = found["notready-loop"]
    assert "no readable kubelet journal" in loop.summary
    evidence = texts(loop)
    assert "node:manifest could not read all of it: kubelet.log: journalctl timed out" in evidence
    assert "journal:kubelet could not read all of it" in evidence
    assert "journal:containerd could not read all of it: empty journal output" in evidence
    assert "node:cgroup-fs could not read all of it" in evidence
    assert "nvml MIG probe error: nvml.json is not JSON" in evidence
    config = found["mig-config-failed"]
    assert "MIG probe error" in texts(config)


# -- mig-config-failed -------------------------------------------------------------------------


def test_failed_state_with_paused_operands() -> None:
    inp = sim_input("mig-hook-notready")
    node = incident_node(inp)

    config = about(run(inp), node.name)["mig-config-failed"]

    assert config.severity == "critical"  # NotReady and no MIG slices
    assert "nvidia.com/mig.config.state=failed" in config.summary
    assert "paused-for-mig-change" in config.summary
    assert config.runbooks == ("reapply-mig-no-hooks", "cordon-and-collect")
    evidence = texts(config)
    assert "label nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change" in evidence
    assert "allocatable MIG slices none" in evidence


def test_failed_state_on_a_serving_node_is_a_warning() -> None:
    inp = sim_input("mig-hook-notready")
    sibling = relabel(sibling_node(inp), **{"nvidia.com/mig.config.state": "failed"})

    found = about(run(with_node(inp, sibling)), sibling.name)

    assert found["mig-config-failed"].severity == "warning"
    assert "paused" not in found["mig-config-failed"].summary
    assert set(found) == {"mig-config-failed"}  # the layout rule leaves failed nodes to it


def test_pending_with_paused_operands_too_long() -> None:
    inp = sim_input("mig-hook-notready")
    paused = {
        f"nvidia.com/gpu.deploy.{op}": "paused-for-mig-change"
        for op in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")
    }
    old = relabel(sibling_node(inp), **{"nvidia.com/mig.config.state": "pending"}, **paused)

    config = about(run(with_node(inp, old)), old.name)["mig-config-failed"]

    assert "nvidia.com/mig.config.state=pending" in config.summary
    assert "client-shutdown timeout" in config.summary
    # The node's age is the only clock a snapshot has.
    assert re.search(r"on a node \d d( \d+ h)? old", config.summary)

    young = replace(old, created=inp.now - timedelta(minutes=3))
    assert "mig-config-failed" not in about(run(with_node(inp, young)), young.name)


# -- mig-layout-mismatch ------------------------------------------------------------------------


def test_advertised_slices_differ_from_the_label() -> None:
    inp = sim_input("mig-hook-notready")
    sibling = sibling_node(inp)
    short = replace(sibling, gpu_allocatable={"nvidia.com/mig-1g.10gb": 21})

    layout = about(run(with_node(inp, short)), short.name)["mig-layout-mismatch"]

    assert layout.severity == "warning"
    assert "all-1g.10gb (7×1g.10gb per GPU)" in layout.summary
    assert "advertises 21×1g.10gb" in layout.summary and "56×1g.10gb" in layout.summary
    assert "8 GPUs (nvidia.com/gpu.count=8), H100-80GB" in texts(layout)


def test_gpu_state_differs_from_the_label() -> None:
    inp = sim_input("mig-hook-notready")
    sibling = sibling_node(inp)
    three = NodeEvidence(node=sibling.name, mig=parse_smi_xml(h100_xml(8, devices_per_gpu=3)))

    layout = about(run(replace(inp, node_evidence={sibling.name: three})), sibling.name)[
        "mig-layout-mismatch"
    ]

    assert "GPUs 0-7: 3 MIG devices, all-1g.10gb asks 7 (7×1g.10gb)" in layout.summary
    assert "nvidia-smi GPUs 0-7: 3 MIG devices" in texts(layout)


def test_no_mig_resources_on_a_ready_node_is_critical() -> None:
    inp = sim_input("mig-hook-notready")
    empty = replace(sibling_node(inp), gpu_allocatable={}, gpu_capacity={})

    layout = about(run(with_node(inp, empty)), empty.name)["mig-layout-mismatch"]

    assert layout.severity == "critical"
    assert "advertises no MIG resources" in layout.summary


def test_unknown_config_compares_what_it_can() -> None:
    inp = sim_input("mig-hook-notready")
    custom = relabel(sibling_node(inp), **{"nvidia.com/mig.config": "team-a-custom"})
    pending = NodeEvidence(node=custom.name, mig=parse_smi_xml(h100_xml(8, 7)))
    mig = pending.mig
    assert mig is not None
    gpus = tuple(replace(g, mig_pending="Disabled") for g in mig.gpus)
    pending = replace(pending, mig=replace(mig, gpus=gpus))
    inp = replace(with_node(inp, custom), node_evidence={custom.name: pending})

    layout = about(run(inp), custom.name)["mig-layout-mismatch"]

    assert "expected layout unknown" in layout.summary
    assert "MIG mode change pending (current Enabled, pending Disabled)" in layout.summary

    calm = replace(inp, node_evidence={})
    assert "mig-layout-mismatch" not in about(run(calm), custom.name)


# -- flapping, and the calm cluster ----------------------------------------------------------


def test_flapping_node_that_recovered_is_a_warning() -> None:
    inp = sim_input("mig-hook-notready")
    sibling = sibling_node(inp)
    flips = [
        Transition("ctx", "Node", sibling.name, sibling.uid, inp.now - timedelta(minutes=m),
                   inp.now - timedelta(minutes=m), "Ready", status, "", "")
        for m, status in ((50, "False"), (45, "True"), (30, "False"), (25, "True"), (10, "False"),
                          (5, "True"))
    ]  # fmt: skip
    inp = replace(inp, history=History(transitions=tuple(flips)))

    loop = about(run(inp), sibling.name)["notready-loop"]

    assert loop.severity == "warning"
    assert "3 NotReady episodes" in loop.summary and "Ready now" in loop.summary
    assert loop.deadline is None
    assert "history Ready → False" in texts(loop)


def test_healthy_scenario_raises_none_of_ours() -> None:
    findings = run(sim_input("healthy"))
    assert {f.id for f in findings} & OUR_IDS == set()
