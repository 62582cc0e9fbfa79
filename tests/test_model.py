"""Parsing real-shaped API JSON into the model, including the odd shapes clusters produce."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mignurse.cluster.snapshot import Snapshot
from mignurse.model import (
    Condition,
    Event,
    Node,
    NodeClaim,
    NodePool,
    Pod,
    instance_id_from_provider_id,
    parse_count,
    parse_time,
)

FIXTURES = Path(__file__).parent / "fixtures"


def p5_node() -> dict[str, Any]:
    return json.loads((FIXTURES / "node-p5-mig.json").read_text())


def test_eks_node_parses_every_field_the_table_needs() -> None:
    node = Node.from_api(p5_node())
    assert node.name == "ip-10-0-37-142.us-west-2.compute.internal"
    assert (node.pool, node.pool_kind) == ("gpu-mig", "nodepool")
    assert node.instance_type == "p5.48xlarge"
    assert node.capacity_type == "on-demand"
    assert node.zone == "us-west-2b"
    assert node.instance_id == "i-0a1b2c3d4e5f60718"
    assert node.os_image == "Amazon Linux 2023.6.20250218"
    assert node.kernel.startswith("6.1.119")
    assert node.container_runtime == "containerd://1.7.27"
    assert node.architecture == "amd64"
    assert node.created == datetime(2026, 11, 29, 1, 12, 40, tzinfo=UTC)
    assert node.ready_status == "Ready"
    assert node.gpu_capacity == {"nvidia.com/mig-1g.10gb": 56}
    assert node.mig_resources == {"1g.10gb": 56}
    assert node.mig_config == "all-1g.10gb"
    assert node.mig_config_state == "success"
    assert node.gpu_product == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert node.gpu_deploy["mig-manager"] == "false"
    assert [str(t) for t in node.taints] == ["nvidia.com/gpu=true:NoSchedule"]
    ahr = node.condition("AcceleratedHardwareReady")
    assert ahr is not None
    assert (ahr.status, ahr.reason) == ("False", "DCGMError")
    assert ahr.message == "failed to initialize DCGM: libdcgm.so not Found"


def test_unknown_condition_types_and_bad_times_are_kept_not_fatal() -> None:
    node = Node.from_api(p5_node())
    odd = node.condition("SomethingNew")
    assert odd is not None
    assert odd.status == "True"
    assert odd.last_transition is None


def test_a_node_with_almost_nothing_still_parses() -> None:
    node = Node.from_api({"metadata": {"name": "bare"}})
    assert node.name == "bare"
    assert node.ready_status == "Unknown"
    assert node.pool == ""
    assert node.gpu_capacity == {}
    assert not node.has_gpu_hint


def test_null_and_wrongly_typed_fields_do_not_crash() -> None:
    raw = {
        "metadata": {"name": "n", "labels": None, "creationTimestamp": None},
        "spec": {"taints": None, "providerID": None},
        "status": {"conditions": None, "capacity": None, "nodeInfo": None},
    }
    node = Node.from_api(raw)
    assert node.labels == {}
    assert node.conditions == ()
    assert node.taints == ()


def test_huge_label_sets_are_parsed_whole() -> None:
    raw = p5_node()
    raw["metadata"]["labels"].update({f"example.com/label-{i}": str(i) for i in range(2000)})
    node = Node.from_api(raw)
    assert len(node.labels) > 2000
    assert node.pool == "gpu-mig"


def test_managed_node_group_and_auto_mode_pools() -> None:
    mng = Node.from_api(
        {
            "metadata": {
                "name": "ip-10-0-1-1.ec2.internal",
                "labels": {
                    "eks.amazonaws.com/nodegroup": "ng-gpu-l4",
                    "eks.amazonaws.com/capacityType": "ON_DEMAND",
                    "node.kubernetes.io/instance-type": "g6.xlarge",
                },
            }
        }
    )
    assert (mng.pool, mng.pool_kind, mng.capacity_type) == ("ng-gpu-l4", "nodegroup", "on_demand")
    assert mng.has_gpu_hint  # g6 is an NVIDIA family even without GPU resources
    auto = Node.from_api(
        {
            "metadata": {
                "name": "i-0abc",
                "labels": {
                    "karpenter.sh/nodepool": "gpu",
                    "eks.amazonaws.com/compute-type": "auto",
                },
            }
        }
    )
    assert auto.pool_kind == "auto"


def test_gpu_detection_covers_a_node_that_lost_its_gpu_resources() -> None:
    raw = p5_node()
    raw["status"]["capacity"] = {"cpu": "192"}
    raw["status"]["allocatable"] = {"cpu": "192"}
    for key in list(raw["metadata"]["labels"]):
        if "nvidia" in key or "gpu" in key or "pci-10de" in key:
            del raw["metadata"]["labels"][key]
    raw["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "m7i.2xlarge"
    node = Node.from_api(raw)
    assert not node.has_gpu_hint
    claim = NodeClaim.from_api(
        {
            "metadata": {"name": "gpu-mig-x7k2p", "labels": {"karpenter.sh/nodepool": "gpu-mig"}},
            "spec": {"resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "1"}}},
            "status": {"nodeName": node.name, "providerID": node.provider_id},
        }
    )
    snap = Snapshot(nodes={node.name: node}, nodeclaims={claim.name: claim})
    assert [n.name for n in snap.gpu_nodes()] == [node.name]


def test_amd_and_neuron_families_are_not_gpu_nodes() -> None:
    for instance_type in ("g4ad.xlarge", "inf2.xlarge", "trn1.32xlarge", "m7i.large"):
        node = Node.from_api(
            {
                "metadata": {
                    "name": "x",
                    "labels": {"node.kubernetes.io/instance-type": instance_type},
                }
            }
        )
        assert not node.has_gpu_hint, instance_type


def test_event_from_core_v1_and_events_k8s_io_shapes() -> None:
    legacy = Event.from_api(
        {
            "metadata": {"name": "n.1", "namespace": "default", "uid": "u"},
            "involvedObject": {"kind": "Node", "name": "n", "uid": "nu"},
            "reason": "NodeRepairBlocked",
            "message": "more than 20% nodes are unhealthy in the nodepool",
            "source": {"component": "karpenter"},
            "firstTimestamp": "2026-11-29T02:00:00Z",
            "lastTimestamp": "2026-11-29T02:40:00Z",
            "count": 9,
            "type": "Warning",
        }
    )
    assert (legacy.source, legacy.count, legacy.type) == ("karpenter", 9, "Warning")
    assert legacy.last_seen == datetime(2026, 11, 29, 2, 40, tzinfo=UTC)
    modern = Event.from_api(
        {
            "metadata": {"name": "n.2", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "n"},
            "reason": "Starting",
            "note": "Starting kubelet.",
            "reportingController": "kubelet",
            "eventTime": "2026-11-29T02:00:00.123456Z",
            "series": {"count": 3, "lastObservedTime": "2026-11-29T02:05:00.000001Z"},
        }
    )
    assert modern.message == "Starting kubelet."
    assert modern.source == "kubelet"
    assert modern.count == 3
    assert modern.last_seen is not None and modern.last_seen.minute == 5


def test_nodeclaim_repair_fingerprint_fields() -> None:
    claim = NodeClaim.from_api(
        {
            "metadata": {
                "name": "gpu-inference-abcde",
                "labels": {
                    "karpenter.sh/nodepool": "gpu-inference",
                    "node.kubernetes.io/instance-type": "g6e.xlarge",
                },
                "annotations": {
                    "karpenter.sh/nodeclaim-termination-timestamp": "2026-11-29T02:30:00Z"
                },
                "deletionTimestamp": "2026-11-29T02:30:00Z",
                "creationTimestamp": "2026-11-29T02:18:00Z",
            },
            "status": {
                "providerID": "aws:///us-west-2a/i-0123456789abcdef0",
                "imageID": "ami-0abc",
                "conditions": [{"type": "Launched", "status": "True"}],
            },
        }
    )
    assert claim.termination_timestamp == claim.deleting
    assert claim.instance_id == "i-0123456789abcdef0"
    assert claim.condition("DisruptionReason") is None
    assert not claim.launching  # deleting, not launching


def test_nodepool_recognises_gpu_requirements() -> None:
    pool = NodePool.from_api(
        {
            "metadata": {"name": "gpu-a"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"name": "gpu"},
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-family",
                                "operator": "In",
                                "values": ["p5"],
                            }
                        ],
                        "expireAfter": "720h",
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmpty", "budgets": [{"nodes": "10%"}]},
            },
            "status": {"resources": {"nodes": "3"}},
        }
    )
    assert pool.requests_gpu
    assert (pool.node_class, pool.expire_after, pool.node_count) == ("gpu", "720h", 3)


def test_provider_ids_and_quantities() -> None:
    assert instance_id_from_provider_id("aws:///us-west-2a/i-0abc") == "i-0abc"
    assert instance_id_from_provider_id("kind://docker/kind/kind-worker") == ""
    assert parse_count("56") == 56
    assert parse_count("2k") == 2000
    assert parse_count("1Ki") == 1024
    assert parse_count("lots") == 0
    assert parse_time("2026-11-29T03:00:00Z") == datetime(2026, 11, 29, 3, tzinfo=UTC)
    assert parse_time("garbage") is None


@given(
    st.dictionaries(
        st.sampled_from(["type", "status", "reason", "message", "lastTransitionTime"]),
        st.one_of(st.none(), st.text(max_size=20), st.integers()),
    )
)
def test_condition_parsing_never_raises(raw: dict[str, Any]) -> None:
    cond = Condition.from_api(raw)
    assert isinstance(cond.status, str)


@given(
    st.recursive(
        st.one_of(st.none(), st.text(max_size=5), st.integers()),
        lambda inner: st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
)
def test_node_parsing_survives_arbitrary_status_shapes(status: Any) -> None:
    raw = copy.deepcopy(p5_node())
    raw["status"] = status if isinstance(status, dict) else {"conditions": status}
    Node.from_api(raw)


def test_pod_sums_gpu_requests_and_names_its_controller() -> None:
    pod = Pod.from_api(
        {
            "metadata": {
                "name": "trainer-0",
                "namespace": "training",
                "ownerReferences": [
                    {"kind": "Workflow", "name": "w"},
                    {"kind": "StatefulSet", "name": "trainer", "controller": True},
                ],
            },
            "spec": {
                "nodeName": "n1",
                "containers": [
                    {"name": "a", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "2"}}},
                    {"name": "b", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}},
                    {"name": "c"},
                ],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"restartCount": 3}, {"restartCount": 1}],
            },
        }
    )
    assert pod.gpu_requests == {"nvidia.com/mig-1g.10gb": 3}
    assert pod.uses_gpu and pod.ready
    assert (pod.owner_kind, pod.restarts) == ("StatefulSet", 4)
    assert not Pod.from_api({"metadata": {"name": "bare"}}).uses_gpu


def test_a_pod_whose_restart_counts_are_garbled_reads_as_no_restarts_not_a_crash() -> None:
    # restartCount is an int32 in core/v1 ContainerStatus; a proxy or a hand-made bundle can
    # hand over anything, and one bad pod must not stop the plugin-pod and listing readers.
    statuses = [{"restartCount": "many"}, {"restartCount": -3}, {"restartCount": None}, {}]
    pod = Pod.from_api({"metadata": {"name": "p"}, "status": {"containerStatuses": statuses}})
    assert pod.restarts == 0
    statuses.append({"restartCount": 2})
    assert Pod.from_api({"status": {"containerStatuses": statuses}}).restarts == 2


def test_nodes_of_one_pool_keep_one_copy_of_the_labels_conditions_and_times_they_repeat() -> None:
    """A quarter of a million nodes fit in memory because what they repeat is kept once:
    each node decoded from its own JSON, as pages are, shares it with the others."""
    text = json.dumps(p5_node())
    first, second = (json.loads(text) for _ in range(2))
    second["metadata"]["name"] = "ip-10-0-37-143.us-west-2.compute.internal"
    a, b = Node.from_api(first), Node.from_api(second)
    assert a.labels == p5_node()["metadata"]["labels"]
    assert a.name != b.name
    for key in a.labels:
        assert a.labels[key] is b.labels[key], key
    assert a.instance_type is b.instance_type and a.os_image is b.os_image
    assert a.kernel is b.kernel and a.kubelet_version is b.kubelet_version
    for mine, theirs in zip(a.conditions, b.conditions, strict=True):
        assert (mine.type, mine.reason, mine.message) == (
            theirs.type,
            theirs.reason,
            theirs.message,
        )
        assert mine.reason is theirs.reason and mine.message is theirs.message
        assert mine.last_transition is theirs.last_transition
    assert a.created is not None and a.created is b.created


def test_events_about_one_pod_keep_one_copy_of_its_name_uid_and_the_wording() -> None:
    def backoff(name: str, at: str) -> dict[str, Any]:
        return json.loads(
            json.dumps(
                {
                    "metadata": {"name": name, "namespace": "team-llm", "uid": name},
                    "involvedObject": {"kind": "Pod", "name": "trainer-0", "uid": "a1b2"},
                    "reason": "BackOff",
                    "message": "Back-off restarting failed container server in pod trainer-0",
                    "source": {"component": "kubelet", "host": "ip-10-0-7-21"},
                    "firstTimestamp": at,
                    "lastTimestamp": at,
                    "type": "Warning",
                }
            )
        )

    a = Event.from_api(backoff("trainer-0.1", "2026-11-29T02:00:00Z"))
    b = Event.from_api(backoff("trainer-0.2", "2026-11-29T02:00:00Z"))
    assert (a.name, b.name) == ("trainer-0.1", "trainer-0.2")
    assert a.involved_name == "trainer-0" and a.message.startswith("Back-off restarting")
    for field_name in ("namespace", "involved_name", "involved_uid", "reason", "message", "host"):
        assert getattr(a, field_name) is getattr(b, field_name), field_name
    assert a.first_seen == datetime(2026, 11, 29, 2, tzinfo=UTC)
    assert a.first_seen is b.first_seen is b.last_seen


def test_labels_that_are_not_text_and_times_that_are_not_times_stay_as_before() -> None:
    node = Node.from_api({"metadata": {"name": "n", "labels": {"team": 7, "zone": None}}})
    assert node.labels == {"team": 7, "zone": None}
    for _ in range(2):  # the second read comes from the cache of parsed times
        assert parse_time("2026-13-45T99:00:00Z") is None
        assert parse_time("2026-11-29T02:00:00") == datetime(2026, 11, 29, 2, tzinfo=UTC)


def test_a_long_run_of_distinct_times_and_messages_keeps_the_caches_bounded() -> None:
    from mignurse.model import fields

    for micro in range(3 * fields._TIMES_KEPT):
        parse_time(f"2026-11-29T02:00:00.{micro:06d}Z")
    for index in range(3 * fields._NEARBY_KEPT):
        fields.shared_nearby(f"Back-off restarting failed container in pod job-{index}")
    assert 0 < len(fields._times) <= fields._TIMES_KEPT
    assert 0 < len(fields._nearby) <= fields._NEARBY_KEPT
    # A hostile server's megabyte-long "timestamp" or message is never kept past its object.
    huge = "2026-11-29T02:00:00Z" + "9" * 2**20
    assert parse_time(huge) is None and huge not in fields._times
    message = "x" * 2**20
    assert fields.shared_nearby(message) == message and message not in fields._nearby


def test_format_time_is_the_apis_form_of_the_moment_whatever_its_zone_and_kept_once() -> None:
    from datetime import timedelta, timezone

    from mignurse.model.fields import format_time

    utc = datetime(2026, 1, 1, 12, 0, 5, 999_999, tzinfo=UTC)
    east = datetime(2026, 1, 1, 14, 0, 5, 999_999, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(utc) == format_time(east) == "2026-01-01T12:00:05Z"
    assert format_time(utc) is format_time(utc)  # formatted once, then looked up
    assert format_time(utc + timedelta(seconds=1)) == "2026-01-01T12:00:06Z"
    assert format_time(None) is None
