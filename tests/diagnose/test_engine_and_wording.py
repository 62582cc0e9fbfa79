"""The engine every face runs the rules through, and the words every rule shares: a rule that
breaks on odd input never hides the others and says where it broke, `--nodepool` and `--node`
narrow what is shown, the exit code follows the worst finding, and a condition or a span of time
reads the same in every finding, however long the strings the cluster sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose import rules
from mignurse.diagnose.engine import all_rules, diagnose
from mignurse.diagnose.findings import CRITICAL, INFO, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules import MODULES
from mignurse.diagnose.wording import (
    condition_text,
    human_duration,
    short_time,
    some_of,
)

from .test_hardware_advice import findings as hardware_findings
from .test_hardware_advice import node_json

NOW = datetime(2026, 11, 29, 3, 10, tzinfo=UTC)
NODE = "ip-10-0-91-23.us-west-2.compute.internal"


def _input() -> DiagnosisInput:
    return DiagnosisInput(snapshot=Snapshot(nodes={}, karpenter=True), now=NOW)


def _finding(severity: str, pool: str, *nodes: str) -> Finding:
    return Finding("node-not-ready", severity, pool, nodes, f"{pool}: {len(nodes)} nodes")


def test_a_rule_that_breaks_is_named_with_where_and_the_others_still_report() -> None:
    def broken(inp: DiagnosisInput) -> list[Finding]:
        return [] if inp is None else {}["AcceleratedHardwareReady"]  # type: ignore[index]

    def fine(inp: DiagnosisInput) -> list[Finding]:
        return [_finding(WARNING, "gpu-training", NODE)]

    diagnosis = diagnose(_input(), rules=[("broken-rule", broken), ("fine-rule", fine)])
    assert [f.nodepool for f in diagnosis.findings] == ["gpu-training"]
    (error,) = diagnosis.rule_errors
    assert error.startswith("broken-rule: KeyError: 'AcceleratedHardwareReady' (")
    assert error.endswith(f"test_engine_and_wording.py:{broken.__code__.co_firstlineno + 1})")
    assert diagnosis.exit_code == 1


def test_every_shipped_rule_runs_clean_on_an_empty_cluster() -> None:
    assert len(all_rules()) >= 10
    assert diagnose(_input()).rule_errors == []


def _three(inp: DiagnosisInput) -> list[Finding]:
    return [
        _finding(WARNING, "gpu-training", NODE, "ip-10-0-91-24.us-west-2.compute.internal"),
        _finding(CRITICAL, "gpu-inference", "ip-10-0-12-7.us-west-2.compute.internal"),
        _finding(INFO, "gpu-training", "ip-10-0-91-25.us-west-2.compute.internal"),
    ]


@pytest.mark.parametrize(
    ("nodepool", "node", "pools"),
    [
        (None, None, ["gpu-inference", "gpu-training", "gpu-training"]),  # worst first
        ("gpu-training", None, ["gpu-training", "gpu-training"]),
        ("gpu-batch", None, []),
        (None, NODE, ["gpu-training"]),
        ("gpu-inference", NODE, []),
        (None, "ip-10-0-91-2", []),  # a name is matched whole, never as a prefix
    ],
)
def test_the_nodepool_and_node_options_keep_only_the_findings_about_them(
    nodepool: str | None, node: str | None, pools: list[str]
) -> None:
    diagnosis = diagnose(_input(), rules=[("three", _three)], nodepool=nodepool, node=node)
    assert [f.nodepool for f in diagnosis.findings] == pools


@pytest.mark.parametrize(
    ("severities", "code"),
    [((), 0), ((INFO,), 0), ((INFO, WARNING), 1), ((WARNING, CRITICAL, INFO), 2), ((CRITICAL,), 2)],
)
def test_the_exit_code_follows_the_worst_finding(severities: tuple[str, ...], code: int) -> None:
    found = [_finding(s, f"pool-{i}", NODE) for i, s in enumerate(severities)]
    assert diagnose(_input(), rules=[("r", lambda inp: found)]).exit_code == code


# -- a condition in words ------------------------------------------------------------------------


def test_a_failing_condition_says_what_the_agent_means_by_its_reason() -> None:
    # aws/eks-node-monitoring-agent v1.7.0 pkg/reasons/reasons.yaml, KernelReady's reasons.
    text = condition_text(NODE, "KernelReady", "False", "ClockUnsynchronized", "clock unsynced")
    assert text.startswith(f'Node {NODE}: KernelReady=False ClockUnsynchronized "clock unsynced"')
    assert "(the node monitoring agent: the kernel clock follows no time source" in text


@pytest.mark.parametrize(
    ("type_", "status", "reason"),
    [
        ("KernelReady", "True", "ClockUnsynchronized"),  # healthy again: nothing to explain
        ("StorageReady", "False", "ClockUnsynchronized"),  # not that condition's reason
        ("AcceleratedHardwareReady", "False", "DCGMError"),  # that finding words its own
        ("KernelReady", "False", "SomethingNew"),
    ],
)
def test_the_agents_words_come_only_for_its_own_reason_of_a_failing_condition(
    type_: str, status: str, reason: str
) -> None:
    assert condition_text(NODE, type_, status, reason, "") == (
        f"Node {NODE}: {type_}={status} {reason}"
    )


def test_a_condition_without_reason_or_message_is_its_type_and_status() -> None:
    assert condition_text(NODE, "Ready", "Unknown", "", "") == f"Node {NODE}: Ready=Unknown"


def test_a_cluster_that_sends_megabytes_in_a_condition_gets_a_line_it_can_read() -> None:
    text = condition_text(NODE, "R" * 5000, "F" * 5000, "Y" * 5000, "a\nb " * 50_000)
    assert len(text) < 700
    assert "\n" not in text
    assert "…" in text


def test_a_pools_reasons_are_named_five_at_most_and_counted() -> None:
    assert some_of(["NvidiaXID79Error"]) == "NvidiaXID79Error"
    five = [f"NvidiaXID{x}Error" for x in (46, 48, 62, 63, 79)]
    assert some_of(five) == ", ".join(five)
    assert some_of([*five, "DCGMError", "DCGMError"]) == ", ".join(five) + " and 1 more"
    assert some_of(["Z" * 5000]) == "Z" * 119 + "…"
    assert some_of([]) == ""


# -- time in words -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (61, "1m 1s"),
        (599, "9m 59s"),
        (600, "10m"),
        (605, "10m"),  # past ten minutes the seconds no longer matter
        (3599, "59m"),
        (3600, "1h 0m"),
        (86399, "23h 59m"),
        (86400, "1d 0h"),
        (90061, "1d 1h"),
        (-605, "10m"),  # a deadline already past reads as its distance
    ],
)
def test_a_span_of_time_reads_at_a_glance(seconds: int, said: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == said


def test_a_moment_is_its_time_of_day_in_utc_or_a_question_mark() -> None:
    assert short_time(NOW) == "03:10:00Z"
    assert short_time(None) == "?"


def test_a_pool_whose_nodes_send_forty_long_reasons_gets_a_summary_it_can_read() -> None:
    nodes = [
        node_json(f"ip-10-0-91-{i}.us-west-2.compute.internal", ahr=f"Reason{i}{'Y' * 5000}")
        for i in range(40)
    ]
    (finding,) = hardware_findings(nodes)
    assert len(finding.summary) < 2000
    assert " and 35 more" in finding.summary
    assert max(len(e.text) for e in finding.evidence) < 1000


def test_a_long_message_is_quoted_to_three_hundred_characters() -> None:
    text = condition_text(NODE, "Ready", "False", "KubeletNotReady", "x" * 400)
    quoted = text.split('"')[1]
    assert len(quoted) == 300
    assert quoted.endswith("x…")
    assert (
        len(condition_text(NODE, "Ready", "False", "KubeletNotReady", "x" * 300))
        == len(f'Node {NODE}: Ready=False KubeletNotReady ""') + 300
    )


def test_each_rule_module_raises_its_own_finding_id_and_the_engine_runs_them_all() -> None:
    # README's finding table is checked against MODULES (tests/test_readme_contract.py).
    shipped = {p.stem for p in Path(rules.__file__).parent.glob("*.py")} - {"__init__"}
    assert set(MODULES) == shipped
    assert MODULES["repair_loop"] == "node-repair-loop"
    assert MODULES["preflight"] == "known-bad-combination"
    assert len(set(MODULES.values())) == len(all_rules())
