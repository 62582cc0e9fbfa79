"""A node's timeline: events, conditions, its NodeClaim and journal lines, in time order."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.diagnose.sources import load_offline
from mignurse.diagnose.timeline import node_timeline
from mignurse.evidence import parse_journal

INCIDENTS = Path(__file__).parent.parent / "fixtures" / "incidents"
KUBELET_LOG = Path(__file__).parent.parent / "evidence" / "fixtures" / "kubelet.log"
NODE = "ip-10-0-0-114.us-west-2.compute.internal"


def incident_input() -> DiagnosisInput:
    gathered = load_offline(INCIDENTS / "mig-hook-notready")
    now = gathered.newest_time()
    assert now is not None
    return gathered.to_input(now)


def test_the_mig_incident_reads_in_order() -> None:
    inp = incident_input()
    timeline = node_timeline(inp, NODE)
    texts = [e.text for e in timeline]
    assert [e.time for e in timeline] == sorted(e.time for e in timeline)
    starts = [i for i, t in enumerate(texts) if "Starting kubelet." in t]
    ready = next(i for i, t in enumerate(texts) if "NodeReady" in t)
    broken = next(i for i, t in enumerate(texts) if t.startswith("Ready=False KubeletNotReady"))
    assert len(starts) == 2 and starts[0] < ready < starts[1] <= broken
    assert any(t == "NodeClaim gpu-mig-7hq2c created" for t in texts)
    assert {e.source for e in timeline} >= {"event", "condition", "nodeclaim", "node"}
    # The healthy sibling's story is not mixed in.
    assert not any("ip-10-0-26-127" in t for t in texts)


def test_journal_lines_from_a_bundle_join_the_timeline() -> None:
    journal = parse_journal(KUBELET_LOG.read_text(), "journal:kubelet")
    inp = dataclasses.replace(
        incident_input(),
        node_evidence={NODE: NodeEvidence(node=NODE, journals={"kubelet": journal})},
    )
    timeline = node_timeline(inp, NODE)
    journal_lines = [e for e in timeline if e.source == "journal:kubelet"]
    assert any("Stopping kubelet.service" in e.text for e in journal_lines)
    assert [e.time for e in timeline] == sorted(e.time for e in timeline)


def test_diagnose_node_prints_its_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["diagnose", "--from", str(INCIDENTS / "mig-hook-notready")]
    args += ["--now", "2026-11-29T03:10:00Z", "--node", NODE]
    main([*args, "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    assert document["timeline"][0]["source"] == "nodeclaim"
    assert all(NODE in f["nodes"] for f in document["findings"])
    main(args)
    assert f"Timeline of {NODE}" in capsys.readouterr().out
    assert main([*args[:-1], "ip-10-9-9-9.typo"]) == 2
    assert "no node 'ip-10-9-9-9.typo'" in capsys.readouterr().err


def test_karpenter_transition_echoes_are_one_short_line() -> None:
    gathered = load_offline(INCIDENTS / "dcgm-repair-loop")
    now = gathered.newest_time()
    assert now is not None
    texts = [
        e.text
        for e in node_timeline(gathered.to_input(now), "ip-10-0-12-201.us-west-2.compute.internal")
    ]
    echoes = [t for t in texts if "AcceleratedHardwareReady True → False (DCGMError)" in t]
    assert echoes and all("[karpenter]" in t and len(t) < 120 for t in echoes)
    assert not [t for t in texts if "Status condition transitioned" in t]
