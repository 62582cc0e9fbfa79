"""JSON nested past the interpreter's recursion limit, where mignurse reads JSON out of text
someone else wrote: a cluster's annotations (the lock, the cordon marker, the repair pause
record), an EKS cluster's tags, the node monitoring agent's log line, a manifest's
last-applied-configuration, and the audit log's lines. `json.loads` raises RecursionError for
these, not ValueError: each reader takes them as the unreadable text they are."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mignurse.untrusted import json_value

# `[[[…]]]` a few thousand deep: under a Node annotation's 256 KiB, and past what json.loads
# reads (its C scanner recurses once per level, to sys.getrecursionlimit())
DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000


@pytest.mark.parametrize(
    "text", [DEEP, DEEP_OBJECT, DEEP.encode()], ids=["array", "object", "bytes"]
)
def test_json_value_refuses_deep_nesting_as_not_json(text: str | bytes) -> None:
    with pytest.raises(RecursionError):
        import json

        json.loads(text)  # the reason for json_value
    with pytest.raises(ValueError, match="nested deeper than the interpreter can read"):
        json_value(text)
    assert json_value('{"a": [1]}') == {"a": [1]}


def node(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n", "annotations": annotations, "resourceVersion": "7"}}


def test_a_lock_annotation_nested_too_deep_is_a_lock_held_by_that_text() -> None:
    from mignurse.runner.lock import LOCK_ANNOTATION, read_lock

    class Client:
        def get(self, _resource: Any, _name: str) -> dict[str, Any]:
            return node({LOCK_ANNOTATION: DEEP})

    current, version = read_lock(Client(), Any, "n")  # type: ignore[arg-type]
    assert current == {"holder": DEEP} and version == "7"


def test_a_cordon_marker_nested_too_deep_is_not_mignurse_s() -> None:
    from mignurse.runner.steps.kube import CORDONED_BY, cordon_run

    assert cordon_run(node({CORDONED_BY: DEEP})) == ""


def test_a_repair_pause_record_nested_too_deep_is_no_record() -> None:
    from mignurse.diagnose.inputs import KarpenterSettings
    from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED, pause_record

    deployment = {
        "metadata": {"name": "karpenter", "annotations": {ANNOTATION_PAUSED: DEEP}},
        "spec": {"template": {"spec": {"containers": [{"name": "controller", "env": []}]}}},
    }
    assert pause_record(deployment) is None
    settings = KarpenterSettings.from_deployment(deployment)
    assert (settings.paused_by, settings.paused_run) == ("", "")


def test_a_node_group_pause_record_nested_too_deep_is_no_record() -> None:
    from mignurse.runner.steps.repair.nodegroup import TAG_PAUSED, nodegroup_record

    class Eks:
        def describe_cluster(self, name: str) -> dict[str, Any]:
            return {"cluster": {"arn": "arn:x", "tags": {f"{TAG_PAUSED}/ng.0": DEEP}}}

    assert nodegroup_record(Eks(), "c", "ng") is None


def test_an_agent_log_line_nested_too_deep_is_read_by_its_fields() -> None:
    from mignurse.evidence.gpu_health import agent_conditions
    from mignurse.evidence.journal import JournalEntry

    message = "sending condition to exporter " + DEEP_OBJECT
    entry = JournalEntry(datetime(2026, 12, 7, tzinfo=UTC), "h", "agent", 1, message, 0, 1, "j")
    assert agent_conditions([entry]) == []


def test_a_last_applied_configuration_nested_too_deep_is_left_as_it_is() -> None:
    from mignurse.collect.structured import mask_document

    document = {"metadata": {"annotations": {"last-applied": DEEP}}, "password": "hunter2"}
    masked, counts, _ = mask_document(document)
    assert masked["metadata"]["annotations"]["last-applied"] == DEEP
    assert masked["password"] != "hunter2" and counts


def test_an_audit_line_nested_too_deep_is_skipped(tmp_path: Path) -> None:
    from mignurse.runner.audit import read_audit

    log = tmp_path / "audit.jsonl"
    log.write_text(DEEP + "\n" + '{"event": "run-start", "run": "r1"}\n')
    assert [e["run"] for e in read_audit(log)] == ["r1"]
