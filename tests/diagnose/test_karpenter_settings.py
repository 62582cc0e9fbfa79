"""What the Karpenter controller Deployment says about repair, read as the chart writes it and as
people change it: the NodeRepair gate as env or flag, the interruption queue, the release from
the image tag or, for a digest-pinned or mirrored image, from the chart's label, and the
pause-node-repair record. Then the order findings are shown in, and the events each Node has.

The Deployment is tests/corpus/incidents/karpenter-spot-interruptions/cluster/karpenter.json,
in the shape of aws/karpenter-provider-aws v1.6.3 charts/karpenter/templates/deployment.yaml
(container `controller`, env FEATURE_GATES and INTERRUPTION_QUEUE); the flags are
kubernetes-sigs/karpenter v1.14.1 pkg/operator/options/options.go (--feature-gates,
--interruption-queue are read after the environment)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    INFO,
    KNOWN_BAD_COMBINATION,
    NODE_REPAIR_LOOP,
    REPLACEMENT_CHURN,
    WARNING,
    Evidence,
    Finding,
    sort_findings,
)
from mignurse.diagnose.inputs import (
    REPAIR_PAUSED_ANNOTATION,
    DiagnosisInput,
    History,
    KarpenterSettings,
    controller_container_index,
)
from mignurse.model import Event

from .test_rule_boundaries import event

CORPUS = Path(__file__).parents[1] / "corpus" / "incidents"
DEPLOYMENT = json.loads(
    (CORPUS / "karpenter-spot-interruptions" / "cluster" / "karpenter.json").read_text()
)["items"][0]
NOW = datetime(2026, 11, 29, 3, 10, tzinfo=UTC)


def deployment(
    *,
    env: dict[str, str] | None = None,
    args: list[Any] | None = None,
    image: str | None = None,
    version_label: str | None = "1.6.3",
    annotations: dict[str, str] | None = None,
    name: str = "controller",
    sidecar: dict[str, Any] | None = None,
) -> dict[str, Any]:
    raw = copy.deepcopy(DEPLOYMENT)
    controller = raw["spec"]["template"]["spec"]["containers"][0]
    controller["name"] = name
    kept = [
        e for e in controller["env"] if e["name"] not in ("FEATURE_GATES", "INTERRUPTION_QUEUE")
    ]
    controller["env"] = [*kept, *({"name": k, "value": v} for k, v in (env or {}).items())]
    if args is not None:
        controller["args"] = args
    if image is not None:
        controller["image"] = image
    labels = raw["metadata"]["labels"]
    if version_label is None:
        labels.pop("app.kubernetes.io/version", None)
    else:
        labels["app.kubernetes.io/version"] = version_label
    raw["metadata"]["annotations"].update(annotations or {})
    if sidecar is not None:
        raw["spec"]["template"]["spec"]["containers"].insert(0, sidecar)
    return raw


GATES = "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,NodeOverlay=false"
IMAGE = "public.ecr.aws/karpenter/controller:1.6.3@sha256:" + "4f" * 32
QUEUE = "karpenter-prod-gpu"


def test_the_charts_deployment_reads_as_repair_on_with_its_queue_and_release() -> None:
    settings = KarpenterSettings.from_deployment(
        deployment(env={"FEATURE_GATES": GATES, "INTERRUPTION_QUEUE": QUEUE}, image=IMAGE)
    )
    assert (settings.node_repair, settings.feature_gates) == (True, GATES)
    assert (settings.interruption_queue, settings.version) == (QUEUE, "1.6.3")
    assert settings.version_tuple == (1, 6, 3)
    assert (settings.paused_by, settings.paused_at, settings.paused_run) == ("", "", "")


def test_flags_after_the_environment_win_as_the_controller_reads_them() -> None:
    settings = KarpenterSettings.from_deployment(
        deployment(
            env={"FEATURE_GATES": "NodeRepair=false", "INTERRUPTION_QUEUE": "old-queue"},
            args=[
                "--interruption-queue=" + QUEUE,
                "--feature-gates=NodeRepair=true",
                {"not": "a string"},
                "--log-level=debug",
            ],
            image=IMAGE,
        )
    )
    assert (settings.node_repair, settings.feature_gates) == (True, "NodeRepair=true")
    assert settings.interruption_queue == QUEUE


def test_no_gate_no_queue_means_no_repair_and_no_echoes() -> None:
    settings = KarpenterSettings.from_deployment(deployment(image=IMAGE))
    assert (settings.node_repair, settings.feature_gates, settings.interruption_queue) == (
        False,
        "",
        "",
    )


def test_an_env_entry_that_is_not_an_object_is_passed_over() -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image=IMAGE)
    raw["spec"]["template"]["spec"]["containers"][0]["env"].insert(0, "FEATURE_GATES")
    assert KarpenterSettings.from_deployment(raw).node_repair is True


@pytest.mark.parametrize(
    ("image", "label", "version"),
    [
        (IMAGE, "1.6.3", "1.6.3"),
        ("public.ecr.aws/karpenter/controller:1.14.1", None, "1.14.1"),
        # A digest alone: the chart's label still says the release.
        ("public.ecr.aws/karpenter/controller@sha256:" + "4f" * 32, "1.6.3", "1.6.3"),
        # A mirror with a port and no tag: the port is no release.
        ("registry.internal:5000/karpenter/controller", "1.5.0", "1.5.0"),
        ("registry.internal:5000/karpenter/controller", None, ""),
        # A tag that is not a release, and no label: nothing better to say than the tag.
        ("registry.internal/karpenter/controller:prod", None, "prod"),
        ("controller:1.2.0", None, "1.2.0"),
    ],
    ids=["tag-and-digest", "tag", "digest-only", "mirror-port", "mirror-port-no-label",
         "named-tag", "short-name"],
)  # fmt: skip
def test_the_release_comes_from_the_tag_else_the_charts_label(
    image: str, label: str | None, version: str
) -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image=image, version_label=label)
    assert KarpenterSettings.from_deployment(raw).version == version


def test_the_pause_record_names_who_when_and_the_run() -> None:
    record = {"by": "oncall@example.com", "at": "2026-11-29T02:58:11Z", "run": "r-20261129-0258"}
    raw = deployment(annotations={REPAIR_PAUSED_ANNOTATION: json.dumps(record)}, image=IMAGE)
    settings = KarpenterSettings.from_deployment(raw)
    assert (settings.paused_by, settings.paused_at, settings.paused_run) == (
        "oncall@example.com",
        "2026-11-29T02:58:11Z",
        "r-20261129-0258",
    )
    anonymous = deployment(annotations={REPAIR_PAUSED_ANNOTATION: "{}"}, image=IMAGE)
    assert KarpenterSettings.from_deployment(anonymous).paused_by == "?"
    for broken in ("{not json", "[1, 2]", '"paused"'):
        raw = deployment(annotations={REPAIR_PAUSED_ANNOTATION: broken}, image=IMAGE)
        assert KarpenterSettings.from_deployment(raw).paused_by == ""


SIDECAR = {
    "name": "aws-otel",
    "image": "public.ecr.aws/aws-observability/aws-otel-collector:v0.40.0",
}


def test_the_controller_is_the_container_named_so_wherever_it_sits() -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image=IMAGE, sidecar=SIDECAR)
    assert KarpenterSettings.from_deployment(raw).node_repair is True
    containers = raw["spec"]["template"]["spec"]["containers"]
    assert controller_container_index(containers) == 1


def test_a_renamed_controller_is_found_by_its_karpenter_image() -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image=IMAGE, name="main", sidecar=SIDECAR)
    assert KarpenterSettings.from_deployment(raw).node_repair is True
    assert controller_container_index(raw["spec"]["template"]["spec"]["containers"]) == 1
    assert controller_container_index(["controller", SIDECAR]) is None
    assert controller_container_index([]) is None


def test_a_deployment_without_a_controller_reads_as_repair_off() -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image=SIDECAR["image"], name="main")
    settings = KarpenterSettings.from_deployment(raw)
    assert (settings.node_repair, settings.feature_gates) == (False, "")


# -- the order findings are shown in ---------------------------------------------------------


def _f(id_: str, severity: str, pool: str = "gpu-training") -> Finding:
    return Finding(id_, severity, pool, ("ip-10-0-91-23.us-west-2.compute.internal",), id_)


def test_the_worst_comes_first_and_a_cause_before_its_consequence() -> None:
    shown = sort_findings(
        [
            _f(KNOWN_BAD_COMBINATION, INFO),
            _f(ACCELERATED_HARDWARE_NOT_READY, CRITICAL),
            _f(REPLACEMENT_CHURN, WARNING),
            _f(NODE_REPAIR_LOOP, CRITICAL),
            _f("a-rule-from-elsewhere", WARNING),
            _f(NODE_REPAIR_LOOP, "urgent"),  # a severity we do not know: last
            _f(NODE_REPAIR_LOOP, CRITICAL, "gpu-batch"),
        ]
    )
    assert [(f.severity, f.id, f.nodepool) for f in shown] == [
        (CRITICAL, NODE_REPAIR_LOOP, "gpu-batch"),
        (CRITICAL, NODE_REPAIR_LOOP, "gpu-training"),
        (CRITICAL, ACCELERATED_HARDWARE_NOT_READY, "gpu-training"),
        (WARNING, REPLACEMENT_CHURN, "gpu-training"),
        (WARNING, "a-rule-from-elsewhere", "gpu-training"),
        (INFO, KNOWN_BAD_COMBINATION, "gpu-training"),
        ("urgent", NODE_REPAIR_LOOP, "gpu-training"),
    ]


def test_a_critical_finding_of_a_later_rule_still_comes_before_a_warning() -> None:
    shown = sort_findings([_f(NODE_REPAIR_LOOP, WARNING), _f(KNOWN_BAD_COMBINATION, CRITICAL)])
    assert [f.severity for f in shown] == [CRITICAL, WARNING]
    shown = sort_findings([_f(NODE_REPAIR_LOOP, INFO), _f(KNOWN_BAD_COMBINATION, WARNING)])
    assert [f.severity for f in shown] == [WARNING, INFO]


def test_evidence_in_json_is_settings_first_then_oldest_to_newest() -> None:
    label = Evidence(None, "label", "nvidia.com/mig.config=all-1g.10gb")
    old = Evidence(NOW - timedelta(minutes=40), "event", "NodeRepairBlocked")
    new = Evidence(NOW - timedelta(minutes=2), "condition", "AcceleratedHardwareReady=False")
    finding = Finding("x", WARNING, "p", (), "s", evidence=(new, label, old))
    assert [e["source"] for e in finding.to_json()["evidence"]] == ["label", "event", "condition"]
    # Evidence is a value: rules fold repeats with dict.fromkeys.
    assert list(dict.fromkeys([old, Evidence(old.time, old.source, old.text), new])) == [old, new]


# -- the events each Node has ------------------------------------------------------------------


def _event(node: str, reason: str, minutes: int, kind: str = "Node") -> Event:
    return event(kind, node, reason, reason, NOW - timedelta(minutes=minutes))


def test_a_nodes_events_from_the_server_and_the_history_are_each_counted_once_oldest_first() -> (
    None
):
    ready = _event("n1", "NodeReady", 50)
    not_ready = _event("n1", "NodeNotReady", 10)
    repair = _event("n1", "DisruptionTerminating", 5)
    claim = _event("c1", "Launched", 60, kind="NodeClaim")
    other = _event("n2", "NodeReady", 30)
    inp = DiagnosisInput(
        snapshot=Snapshot(nodes={}, events=(not_ready, claim, repair)),
        now=NOW,
        history=History(events=(ready, not_ready, other)),
    )
    by_node = inp.events_by_node
    assert [e.reason for e in by_node["n1"]] == [
        "NodeReady",
        "NodeNotReady",
        "DisruptionTerminating",
    ]
    assert [e.reason for e in by_node["n2"]] == ["NodeReady"]
    assert "c1" not in by_node


def test_a_controller_mirrored_under_another_image_name_is_still_the_controller() -> None:
    mirror = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/controller:1.6.3"
    raw = deployment(env={"FEATURE_GATES": GATES}, image=mirror)
    assert controller_container_index(raw["spec"]["template"]["spec"]["containers"]) == 0
    settings = KarpenterSettings.from_deployment(raw)
    assert (settings.node_repair, settings.version) == (True, "1.6.3")


def test_an_image_without_a_tag_or_label_names_no_release() -> None:
    raw = deployment(env={"FEATURE_GATES": GATES}, image="karpenter", version_label=None)
    assert KarpenterSettings.from_deployment(raw).version == ""
