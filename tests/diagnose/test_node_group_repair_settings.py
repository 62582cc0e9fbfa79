"""A managed node group's repair settings as `aws eks describe-nodegroup` returns them, and
what they make of a node's failing condition: the default action and wait per condition and
reason, the overrides that replace them, the thresholds above which repair stops, and the
`cluster/nodegroups.json` shapes the collector writes (or an engineer hands over).

Sources: EKS API reference API_NodeRepairConfig, API_NodeRepairConfigOverrides
(docs.aws.amazon.com/eks/latest/APIReference/); EKS user guide "Automatically repair nodes in
EKS clusters" (docs.aws.amazon.com/eks/latest/userguide/node-repair.html): Ready and the node
monitoring agent's conditions are replaced after 30 min, AcceleratedHardwareReady after 10 min;
pressure conditions are not repaired; "Detect node health issues with the EKS node monitoring
agent" (docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html): NvidiaDoubleBitError
and NvidiaNVLinkError are replaced.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from mignurse.diagnose.mng import NodeGroupRepair, parse_nodegroups
from mignurse.diagnose.outlook import RepairOutlook, repair_outlook
from mignurse.model import Condition, Node

from .test_rule_boundaries import AHR, GROUP, _ago, cluster, gpu_node, group_not_ready, held

# The waits the user guide's table gives, written out so a wait that moves in the code fails.
READY_WAIT = timedelta(minutes=30)
AGENT_CONDITION_WAIT = timedelta(minutes=30)
ACCELERATED_WAIT = timedelta(minutes=10)
NAME = "ip-10-3-52-14.us-west-2.compute.internal"
NO_GROUPS = 'nodegroups.json holds no node groups ({"nodegroups": [...]})'


def group_node(*conditions: Condition) -> Node:
    return replace(
        gpu_node(NAME, *conditions),
        pool=GROUP,
        pool_kind="nodegroup",
        labels={"eks.amazonaws.com/nodegroup": GROUP, "nvidia.com/gpu.present": "true"},
    )


def outlook_for(failing: Condition, **config: Any) -> RepairOutlook:
    """The repair outlook of a node of gpu-l40s whose `failing` condition changed 6 min ago,
    the group's repair enabled with `config` (describe-nodegroup's nodeRepairConfig)."""
    ready = Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", _ago(600))
    conditions = (failing,) if failing.type == "Ready" else (ready, failing)
    node = group_node(*conditions)
    described = {
        "nodegroup": {
            "nodegroupName": GROUP,
            "clusterName": "ml-prod",
            "nodeRepairConfig": {"enabled": True, **config},
        }
    }
    inp = replace(cluster([node], []), nodegroups={GROUP: NodeGroupRepair.from_describe(described)})
    return repair_outlook(inp, node, failing.type)


def override(condition: str, reason: str, action: str, wait: int) -> dict[str, Any]:
    return {
        "nodeMonitoringCondition": condition,
        "nodeUnhealthyReason": reason,
        "minRepairWaitTimeMins": wait,
        "repairAction": action,
    }


# -- the defaults per condition -------------------------------------------------------------


@pytest.mark.parametrize(
    "condition", ["KernelReady", "StorageReady", "NetworkingReady", "ContainerRuntimeReady"]
)
def test_a_failed_agent_condition_is_replaced_after_thirty_minutes(condition: str) -> None:
    outlook = outlook_for(Condition(condition, "False", "KernelBug", "kernel BUG at", _ago(6)))
    assert outlook.action == "Replace"
    assert outlook.deadline == _ago(6) + AGENT_CONDITION_WAIT
    assert f"managed node group {GROUP} repair (the default)" in outlook.who


@pytest.mark.parametrize("reason", ["NvidiaDoubleBitError", "NvidiaNVLinkError"])
def test_a_gpu_memory_or_nvlink_failure_is_replaced_by_default(reason: str) -> None:
    outlook = outlook_for(Condition(AHR, "False", reason, "GPU 0 reported the error", _ago(6)))
    assert (outlook.action, outlook.deadline) == ("Replace", _ago(6) + ACCELERATED_WAIT)


@pytest.mark.parametrize(
    ("type_", "status", "reason"),
    [
        ("Ready", "True", "KubeletReady"),
        (AHR, "True", "NvidiaGPUIsReady"),
        (AHR, "True", "NeuronAcceleratedHardwareIsReady"),
        ("KernelReady", "True", "KernelIsReady"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
    ],
    ids=["ready", "gpu-healthy", "neuron-healthy", "kernel-healthy", "no-memory-pressure"],
)
def test_a_healthy_condition_has_no_repair_deadline(type_: str, status: str, reason: str) -> None:
    # The agent's healthy reasons (aws/eks-node-monitoring-agent cmd/eks-node-monitoring-agent/
    # main.go); Neuron's would read as a "Neuron" failure to replace if the status were ignored.
    outlook = outlook_for(Condition(type_, status, reason, "", _ago(6)))
    assert (outlook.deadline, outlook.action) == (None, "NoAction")
    assert outlook.who == (
        f"managed node group {GROUP} does not repair it: the default does not repair "
        f"{type_}={status}"
    )


# -- overrides: one (condition, reason) pair each -------------------------------------------


def test_an_override_for_another_xid_leaves_the_default_replace_in_place() -> None:
    xid79 = Condition(AHR, "False", "NvidiaXID79Error", "GPU has fallen off the bus", _ago(6))
    outlook = outlook_for(
        xid79, nodeRepairConfigOverrides=[override(AHR, "NvidiaXID31Error", "NoAction", 5)]
    )
    assert (outlook.action, outlook.deadline) == ("Replace", _ago(6) + ACCELERATED_WAIT)
    assert "(the default)" in outlook.who


def test_an_override_written_for_another_condition_does_not_touch_this_one() -> None:
    # The same reason under KernelReady: the override's condition must match too.
    dcgm = Condition(AHR, "False", "DCGMError", "DCGM health check failed", _ago(6))
    outlook = outlook_for(
        dcgm, nodeRepairConfigOverrides=[override("KernelReady", "DCGMError", "Replace", 5)]
    )
    assert (outlook.action, outlook.deadline) == ("NoAction", None)
    assert "the default takes no action for DCGM reasons" in outlook.who


# -- thresholds ("above which node auto repair actions will stop": API_NodeRepairConfig) ------


def test_an_unhealthy_node_count_above_the_default_fifth_still_repairs_within_the_count() -> None:
    # 4 of 10 is over the default 20 %, within the group's own count of 4.
    assert group_not_ready(10, 4, maxUnhealthyNodeThresholdCount=4).deadline == _ago(5) + READY_WAIT
    assert held(group_not_ready(10, 5, maxUnhealthyNodeThresholdCount=4))


def test_a_small_group_over_its_unhealthy_node_count_stops_repairing() -> None:
    # The default always repairs a group of five or fewer; a count of 1 stops it at 2.
    assert held(group_not_ready(3, 2, maxUnhealthyNodeThresholdCount=1))


def test_an_unhealthy_percentage_is_the_groups_own_bound_either_way() -> None:
    assert group_not_ready(10, 5, maxUnhealthyNodeThresholdPercentage=50).deadline is not None
    assert held(group_not_ready(10, 6, maxUnhealthyNodeThresholdPercentage=50))
    assert held(group_not_ready(4, 1, maxUnhealthyNodeThresholdPercentage=10))


def test_a_threshold_that_is_not_a_number_leaves_the_default_in_place() -> None:
    # A hand-edited nodegroups.json: `true` is no count of 1.
    assert group_not_ready(10, 2, maxUnhealthyNodeThresholdCount=True).deadline is not None


# -- nodegroups.json ------------------------------------------------------------------------


def described(name: str, **config: Any) -> dict[str, Any]:
    return {"nodegroupName": name, "clusterName": "ml-prod", "nodeRepairConfig": config}


@pytest.mark.parametrize(
    "document",
    [
        {"nodegroups": [described("gpu-l40s", enabled=True), described("gpu-h100")]},
        [described("gpu-l40s", enabled=True), described("gpu-h100")],
    ],
    ids=["collected", "a-list"],
)
def test_node_groups_are_read_from_the_collected_file_or_a_list(document: Any) -> None:
    groups, problems = parse_nodegroups(document)
    assert sorted(groups) == ["gpu-h100", "gpu-l40s"] and problems == []
    assert groups["gpu-l40s"].enabled and not groups["gpu-h100"].enabled


def test_one_describe_nodegroup_answer_is_read_as_its_group() -> None:
    groups, problems = parse_nodegroups({"nodegroup": described("gpu-l40s", enabled=True)})
    assert list(groups) == ["gpu-l40s"] and problems == []
    assert groups["gpu-l40s"].cluster == "ml-prod"


@pytest.mark.parametrize(
    "document",
    [{"cluster": {"name": "ml-prod"}}, {"nodegroups": "gpu-l40s"}, "gpu-l40s", 42, None],
    ids=["a-describe-cluster-answer", "names-not-groups", "a-string", "a-number", "null"],
)
def test_a_file_without_node_groups_says_so_in_one_line(document: Any) -> None:
    assert parse_nodegroups(document) == ({}, [NO_GROUPS])


def test_unreadable_entries_are_named_and_the_rest_still_read() -> None:
    groups, problems = parse_nodegroups(
        {
            "nodegroups": [
                "gpu-l40s",
                {"clusterName": "ml-prod", "nodeRepairConfig": {"enabled": True}},
                described(
                    "gpu-h100",
                    enabled=True,
                    nodeRepairConfigOverrides=[
                        "AcceleratedHardwareReady/DCGMError=NoAction",
                        override(AHR, "DCGMError", "NoAction", 10),
                    ],
                ),
            ]
        }
    )
    assert list(groups) == ["gpu-h100"]
    assert [(o.condition, o.reason, o.action) for o in groups["gpu-h100"].overrides] == [
        (AHR, "DCGMError", "NoAction")
    ]
    assert problems == [
        "nodegroups.json: 'gpu-l40s' is not a node group",
        "nodegroups.json: a node group without nodegroupName",
        "node group gpu-h100: override 'AcceleratedHardwareReady/DCGMError=NoAction' is not "
        "an object",
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        override(AHR, "DCGMError", "NoAction", 10),
        "AcceleratedHardwareReady/DCGMError=NoAction",
        5,
        True,
    ],
    ids=["one-override-not-in-a-list", "a-string", "a-number", "a-boolean"],
)
def test_overrides_that_are_not_a_list_are_named_in_one_line(overrides: Any) -> None:
    # A hand-edited nodegroups.json; describe-nodegroup returns a list (API_NodeRepairConfig).
    groups, problems = parse_nodegroups(
        {"nodegroups": [described(GROUP, enabled=True, nodeRepairConfigOverrides=overrides)]}
    )
    assert groups[GROUP].enabled and groups[GROUP].overrides == ()
    assert problems == [
        f"node group {GROUP}: nodeRepairConfigOverrides {str(overrides)[:60]!r} is not a list"
    ]


def test_a_megabyte_override_is_quoted_short() -> None:
    _, problems = parse_nodegroups(
        {"nodegroups": [described(GROUP, nodeRepairConfigOverrides=["x" * 1_000_000])]}
    )
    assert problems == [f"node group {GROUP}: override {'x' * 60!r} is not an object"]


@pytest.mark.parametrize(
    "wait",
    [None, "15", True, -5, float("nan"), float("inf"), 1e30, 10**8 + 1],
    ids=["missing", "a-string", "a-boolean", "negative", "nan", "infinite", "1e30", "too-long"],
)
def test_an_override_wait_that_is_no_number_of_minutes_is_named_and_read_as_none(
    wait: Any,
) -> None:
    # describe-nodegroup gives an integer of at least 1 (API_NodeRepairConfigOverrides); a
    # hand-edited file may hold anything, and a deadline must still be a date.
    entry = override(AHR, "DCGMError", "Replace", 10)
    if wait is None:
        del entry["minRepairWaitTimeMins"]
    else:
        entry["minRepairWaitTimeMins"] = wait
    outlook = outlook_for(
        Condition(AHR, "False", "DCGMError", "DCGM health check failed", _ago(6)),
        nodeRepairConfigOverrides=[entry],
    )
    assert (outlook.action, outlook.deadline) == ("Replace", _ago(6))
    _, problems = parse_nodegroups(
        {"nodegroups": [described(GROUP, nodeRepairConfigOverrides=[entry])]}
    )
    assert problems == [
        f"node group {GROUP}: override {AHR}/DCGMError: minRepairWaitTimeMins "
        f"{str(wait)[:30]!r} is no number of minutes (read as 0)"
    ]


@pytest.mark.parametrize("minutes", [0, 10**8])
def test_an_override_wait_from_none_to_the_longest_is_read_as_given(minutes: int) -> None:
    groups, problems = parse_nodegroups(
        {
            "nodegroups": [
                described(
                    GROUP,
                    nodeRepairConfigOverrides=[override(AHR, "DCGMError", "Replace", minutes)],
                )
            ]
        }
    )
    assert problems == [] and groups[GROUP].overrides[0].wait == timedelta(minutes=minutes)
