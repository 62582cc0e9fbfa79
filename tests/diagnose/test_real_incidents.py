"""`mignurse diagnose --from` on real-shaped snapshots (tests/corpus/incidents): Karpenter's and
EKS's own event sequences, the interruption queue's echoes, evidence partly gone, clocks
apart. Each snapshot says in its SOURCE file where its shape comes from.

The rule under test is always what an on-call engineer must read first: which loop, in which
pool, when the next repair fires, and what to do (pause repair, never replace for DCGM).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mignurse.cli import main

CORPUS = Path(__file__).parent.parent / "corpus" / "incidents"
DCGM = CORPUS / "karpenter-dcgm-repair-loop"
MNG = CORPUS / "mng-dcgm-repair-loop"

# The current node of the Bottlerocket loop failed DCGM at 03:04:36; its repair is due 10 min on.
DCGM_NEXT_REPAIR = "2026-11-30T03:14:36Z"


def diagnose(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, dict]:
    code = main(["diagnose", "--from", str(path), "-o", "json", *args])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    document["_stderr"] = captured.err
    return code, document


def only(findings: list[dict[str, Any]], finding_id: str) -> dict[str, Any]:
    found = [f for f in findings if f["id"] == finding_id]
    assert len(found) == 1, [(f["id"], f["summary"]) for f in findings]
    return found[0]


def ids(document: dict[str, Any]) -> set[str]:
    return {f["id"] for f in document["findings"]}


def evidence_text(finding: dict[str, Any]) -> str:
    return "\n".join(e["text"] for e in finding["evidence"])


# -- the DCGM repair loop, with the interruption queue's echoes -------------------------------


def test_repair_loop_with_interruption_echoes_is_a_repair_loop_not_spot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = diagnose(capsys, DCGM / "full")
    assert code == 2
    loop = only(document["findings"], "node-repair-loop")
    assert loop["severity"] == "critical"
    assert loop["nodepool"] == "gpu-arm64"
    assert loop["deadline"] == DCGM_NEXT_REPAIR
    assert loop["runbooks"][0] == "pause-node-repair"
    assert "replace-instance" not in loop["runbooks"]
    assert "DCGMError" in loop["summary"]
    # The echoes are explained, and nothing calls these replacements spot interruptions.
    assert "echo" in evidence_text(loop)
    assert "replacement-churn" not in ids(document)
    assert "spot interruption" not in json.dumps(document["findings"]).lower()


@pytest.mark.parametrize(
    "variant",
    [
        "events-and-nodes",
        "events-k8s-io-v1",
        "clock-behind",
        "deadline-passed",
        "nodeclaims-only",
        "nodeclaims-without-nodes",
    ],
)
def test_repair_loop_is_named_from_partial_or_odd_evidence(
    capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    code, document = diagnose(capsys, DCGM / variant)
    assert code == 2, document["findings"]
    loop = only(document["findings"], "node-repair-loop")
    assert loop["severity"] == "critical"
    assert loop["nodepool"] == "gpu-arm64"
    assert "pause-node-repair" in loop["runbooks"]
    assert "replacement-churn" not in ids(document)


def test_events_of_the_events_k8s_io_api_read_like_core_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, legacy = diagnose(capsys, DCGM / "full")
    _, v1 = diagnose(capsys, DCGM / "events-k8s-io-v1")
    assert [(f["id"], f["summary"], f["deadline"]) for f in v1["findings"]] == [
        (f["id"], f["summary"], f["deadline"]) for f in legacy["findings"]
    ]


def test_a_collector_clock_behind_the_cluster_moves_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, full = diagnose(capsys, DCGM / "full")
    _, behind = diagnose(capsys, DCGM / "clock-behind")
    loop = only(behind["findings"], "node-repair-loop")
    assert loop["deadline"] == DCGM_NEXT_REPAIR
    # Judged at the newest evidence, not 4 minutes earlier: the countdown is not longer.
    assert behind["now"] >= full["now"][:16]
    assert "collected_at" in behind["_stderr"]
    assert {f["id"] for f in behind["findings"]} == {f["id"] for f in full["findings"]}


def test_a_young_repair_and_its_identical_replacement_are_a_loop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, document = diagnose(capsys, DCGM / "nodeclaims-only")
    loop = only(document["findings"], "node-repair-loop")
    assert "gpu-arm64-z5tmn" in loop["summary"]  # the replacement launched 8 s after the repair
    assert "12m after launch" in loop["summary"]


def test_a_node_already_being_replaced_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    _, document = diagnose(capsys, DCGM / "deadline-passed")
    loop = only(document["findings"], "node-repair-loop")
    assert "being replaced now" in loop["summary"]


# -- look-alikes that are not repair loops ----------------------------------------------------


def test_spot_interruptions_stay_spot(capsys: pytest.CaptureFixture[str]) -> None:
    _, document = diagnose(capsys, CORPUS / "karpenter-spot-interruptions")
    assert "node-repair-loop" not in ids(document)
    churn = only(document["findings"], "replacement-churn")
    assert "3 EC2/spot interruption" in churn["summary"]


def test_a_drift_rollout_is_drift_not_spot(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = diagnose(capsys, CORPUS / "karpenter-drift-rollout")
    churn = only(document["findings"], "replacement-churn")
    assert "4 drift" in churn["summary"]
    assert "interruption" not in churn["summary"]
    assert churn["severity"] == "info"
    assert "node-repair-loop" not in ids(document)
    assert code in (0, 1)


def test_a_node_group_rolling_update_is_not_a_repair_loop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, document = diagnose(capsys, CORPUS / "mng-rolling-update")
    assert "node-repair-loop" not in ids(document)


# -- managed node groups ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["with-repair-config", "events-only", "karpenter-in-cluster"])
def test_managed_node_group_repair_loop_is_named_and_paused_on_the_group(
    capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    code, document = diagnose(capsys, MNG / variant)
    assert code == 2
    loop = only(document["findings"], "node-repair-loop")
    assert loop["severity"] == "critical"
    assert loop["nodepool"] == "gpu-l40s"
    assert loop["runbooks"][0] == "pause-node-repair"
    assert "replace-instance" not in loop["runbooks"]
    assert "managed node group" in loop["summary"]
    assert "NoAction" in loop["summary"]  # how to pause it on the group, not the instance
    assert loop["deadline"] == "2026-11-30T21:22:36Z"  # DCGMError at 21:12:36 + 10 min


def test_managed_node_group_loop_quotes_the_override_when_it_is_known(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, known = diagnose(capsys, MNG / "with-repair-config")
    _, inferred = diagnose(capsys, MNG / "events-only")
    assert (
        "override AcceleratedHardwareReady/DCGMError → Replace"
        in only(known["findings"], "node-repair-loop")["summary"]
    )
    assert "must carry an override" in only(inferred["findings"], "node-repair-loop")["summary"]


# -- a long-lived node that goes NotReady -----------------------------------------------------


def test_a_long_lived_node_gone_unknown_is_reported_with_its_repair_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = diagnose(capsys, CORPUS / "node-notready-long-lived")
    assert code == 1
    finding = only(document["findings"], "node-not-ready")
    assert finding["severity"] == "warning"
    assert finding["nodes"] == ["ip-10-4-45-157.eu-west-1.compute.internal"]
    assert finding["deadline"] == "2026-12-01T03:28:20Z"  # Unknown since 02:58:20 + 30 min
    assert "Ready=Unknown for 14m" in finding["summary"]
    assert "cordon-and-collect" in finding["runbooks"]
    assert ids(document) == {"node-not-ready"}
    (line,) = [e["text"] for e in finding["evidence"] if e["source"] == "condition"]
    assert line.endswith("; Karpenter repair (30m toleration) replaces it at 2026-12-01T03:28:20Z")


def test_not_ready_repair_follows_the_karpenter_version(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Karpenter v1.1 repaired Ready=False only (aws/karpenter-provider-aws v1.1.0
    # RepairPolicies): the same node then has no repair deadline.
    snapshot = tmp_path / "v1.1"
    source = CORPUS / "node-notready-long-lived"
    for path in source.rglob("*"):
        if path.is_file():
            target = snapshot / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    karpenter = snapshot / "cluster" / "karpenter.json"
    karpenter.write_text(karpenter.read_text().replace("1.7.2", "1.1.4"))
    _, document = diagnose(capsys, snapshot)
    finding = only(document["findings"], "node-not-ready")
    assert finding["deadline"] is None
    assert "does not repair Ready=Unknown" in evidence_text(finding)


def test_repair_blocked_on_karpenter_1_4_names_only_the_unhealthy_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Through v1.5 every reconciled node of the pool gets NodeRepairBlocked, healthy ones too.
    _, document = diagnose(capsys, CORPUS / "karpenter-repair-blocked-v1.4")
    blocked = only(document["findings"], "repair-blocked")
    assert sorted(blocked["nodes"]) == [
        "ip-10-5-24-49.us-east-2.compute.internal",
        "ip-10-5-50-248.us-east-2.compute.internal",
    ]
    assert "checks the pool before the node" in evidence_text(blocked)


@pytest.mark.parametrize("variant", ["events-and-nodes", "nodeclaims-and-nodes"])
def test_mig_manager_kubelet_stop_is_named_from_the_cluster_alone(
    capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    code, document = diagnose(capsys, CORPUS / "mig-manager-kubelet-stop" / variant)
    assert code == 2
    loop = only(document["findings"], "notready-loop")
    assert loop["nodes"] == ["ip-10-6-10-94.ec2.internal"]
    assert "suspect MIG reconfiguration" in loop["summary"]
    assert "mignurse collect" in loop["summary"]  # the node's journals prove it
    assert loop["deadline"] == "2026-12-01T02:42:04Z"  # Ready=False since 02:12:04 + 30 min
    # The same node is not reported twice.
    assert "node-not-ready" not in ids(document)
