"""The GPU stack inventory of one cluster and where several differ, on nodes, NodeClaims,
DaemonSets and node groups in the shapes the API server and EKS return them."""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from mignurse.cluster.snapshot import Snapshot
from mignurse.diagnose.daemonsets import DaemonSetInfo
from mignurse.diagnose.findings import CRITICAL, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput, KarpenterSettings
from mignurse.diagnose.inventory import (
    NO_LABEL,
    NONE,
    NONE_SEEN,
    NOT_READ,
    NOT_REPORTED,
    POOL_FIELDS,
    differences,
    inventory,
    shared_combinations,
)
from mignurse.diagnose.mng import parse_nodegroups
from mignurse.model import Node, NodeClaim, NodePool

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
OLD_AL2023 = "Amazon Linux 2023.6.20241212"
LABEL_FULL = "nvidia.com/cuda.driver-version.full"
NEW_AL2023 = "Amazon Linux 2023.6.20250218"
KARPENTER = KarpenterSettings(node_repair=True, feature_gates="NodeRepair=true", version="1.4.0")


def gfd(driver: str) -> dict[str, str]:
    """GPU feature discovery's driver labels (NVIDIA/k8s-device-plugin v0.17.0
    internal/lm/nvml.go newVersionLabeler)."""
    major, minor, rev = driver.split(".")
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.driver-version.full": driver,
    }


def node(
    name: str,
    *,
    pool: str = "gpu-inference",
    group: str = "",
    os_image: str = NEW_AL2023,
    labels: dict[str, str] | None = None,
    info: dict[str, str] | None = None,
) -> Node:
    all_labels = {
        "node.kubernetes.io/instance-type": "g6e.12xlarge",
        "kubernetes.io/arch": "amd64",
        **({"eks.amazonaws.com/nodegroup": group} if group else {"karpenter.sh/nodepool": pool}),
        **(labels if labels is not None else gfd("570.124.06")),
    }
    node_info = (
        info
        if info is not None
        else {
            "osImage": os_image,
            "kernelVersion": "6.1.128-136.201.amzn2023.x86_64",
            "kubeletVersion": "v1.32.1-eks-5d632ec",
            "containerRuntimeVersion": "containerd://1.7.27",
        }
    )
    return Node.from_api(
        {
            "metadata": {"name": name, "labels": all_labels},
            "spec": {"providerID": f"aws:///us-west-2a/i-0{zlib.crc32(name.encode()):016x}"},
            "status": {"nodeInfo": node_info, "capacity": {"nvidia.com/gpu": "4"}},
        }
    )


def claim(of: Node, image: str) -> NodeClaim:
    return NodeClaim.from_api(
        {
            "metadata": {"name": f"{of.pool}-{of.name[-5:]}", "labels": dict(of.labels)},
            "status": {"nodeName": of.name, "providerID": of.provider_id, "imageID": image},
        }
    )


def daemonset(
    name: str,
    image: str,
    *,
    namespace: str = "gpu-operator",
    selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> DaemonSetInfo:
    return DaemonSetInfo.from_api(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "template": {
                    "metadata": {"labels": labels or {"app": name}},
                    "spec": {
                        "nodeSelector": selector or {},
                        "containers": [{"name": name, "image": image}],
                    },
                }
            },
        }
    )


AGENT = daemonset(
    "eks-node-monitoring-agent",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/eks-node-monitoring-agent:v1.2.0-eksbuild.1",
    namespace="kube-system",
    labels={"app.kubernetes.io/name": "eks-node-monitoring-agent"},
)
VALIDATOR = daemonset(
    "nvidia-operator-validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.2"
)


def cluster_input(
    nodes: list[Node],
    claims: list[NodeClaim] = (),  # type: ignore[assignment]
    *,
    daemonsets: tuple[DaemonSetInfo, ...] | None = (AGENT, VALIDATOR),
    karpenter: KarpenterSettings | None = KARPENTER,
    karpenter_seen: bool = True,
    nodegroups: dict[str, Any] | None = None,
    cluster_policy: dict[str, Any] | None = None,
) -> DiagnosisInput:
    groups, problems = parse_nodegroups(nodegroups) if nodegroups else ({}, [])
    assert not problems
    return DiagnosisInput(
        snapshot=Snapshot(
            nodes={n.name: n for n in nodes},
            nodeclaims={c.name: c for c in claims},
            karpenter=karpenter_seen,
            taken_at=NOW,
        ),
        now=NOW,
        karpenter=karpenter,
        daemonsets=daemonsets,
        nodegroups=groups,
        cluster_policy=cluster_policy,
    )


def rolling_pool() -> DiagnosisInput:
    """gpu-inference halfway through an AMI update: two nodes on the old release, one new."""
    old = [node(f"ip-10-0-1-{i}", os_image=OLD_AL2023) for i in (1, 2)]
    new = node("ip-10-0-1-3")
    claims = [claim(n, "ami-07e1b3c9d8f2a6e54") for n in old] + [
        claim(new, "ami-0c2d1a7f6e5b4a391")
    ]
    return cluster_input([*old, new], claims)


# ------------------------------------------------------------------ one cluster


def test_a_pool_mid_ami_roll_shows_both_releases_with_their_node_counts() -> None:
    pool = inventory(rolling_pool()).pools[0]
    assert pool.pool == "gpu-inference" and pool.nodes == 3
    assert pool.fields["osImage"] == ((OLD_AL2023, 2), (NEW_AL2023, 1))
    assert pool.fields["ami"] == (("ami-07e1b3c9d8f2a6e54", 2), ("ami-0c2d1a7f6e5b4a391", 1))
    assert pool.fields["amiRelease"] == (("not read (EC2NodeClass)", 3),)
    # what every node agrees on is one value for all of them
    assert pool.fields["kubelet"] == (("v1.32.1-eks-5d632ec", 3),)
    assert pool.fields["driver"] == (("570.124.06", 3),)
    assert pool.fields["nodeMonitoringAgent"] == (("v1.2.0-eksbuild.1", 3),)
    assert pool.fields["nodeRepair"] == (("Karpenter NodeRepair on", 3),)


def test_what_was_not_read_or_not_labelled_is_said_and_never_guessed() -> None:
    bare = node("ip-10-0-2-1", labels={"nvidia.com/gpu.present": "true"}, info={})
    grouped = node("ip-10-0-2-2", group="ng-gpu-l4", labels={"nvidia.com/gpu.present": "true"})
    inv = inventory(cluster_input([bare, grouped], daemonsets=None, karpenter=None))
    pools = {p.pool: p for p in inv.pools}
    karpenter_pool, group_pool = pools["gpu-inference"], pools["ng-gpu-l4"]
    assert karpenter_pool.fields["osImage"] == ((NOT_REPORTED, 1),)
    assert karpenter_pool.fields["containerd"] == ((NOT_REPORTED, 1),)
    assert karpenter_pool.fields["driver"] == ((NO_LABEL, 1),)
    assert karpenter_pool.fields["ami"] == (("no NodeClaim", 1),)
    assert group_pool.fields["ami"] == ((NO_LABEL, 1),)  # no eks.amazonaws.com/nodegroup-image
    for field in ("migManager", "draDriver", "nodeMonitoringAgent"):
        assert karpenter_pool.fields[field] == ((NOT_READ, 1),)  # DaemonSets not listed
    assert karpenter_pool.fields["nodeRepair"] == ((NOT_READ, 1),)  # the Deployment unread
    assert group_pool.fields["nodeRepair"] == ((NOT_READ, 1),)  # EKS not asked
    assert inv.stack["karpenter"][0].value == NOT_READ
    assert inv.stack["gpuOperator"][0].value == NOT_READ


def test_a_cluster_without_karpenter_or_gpu_operator_says_none_was_seen() -> None:
    inp = cluster_input(
        [node("ip-10-0-3-1", group="ng-gpu")],
        daemonsets=(AGENT,),
        karpenter=None,
        karpenter_seen=False,
    )
    inv = inventory(inp)
    assert inv.stack["karpenter"][0].value == NONE_SEEN
    assert inv.stack["karpenterFeatureGates"][0].value == NONE_SEEN
    assert inv.stack["gpuOperator"][0].value == NONE_SEEN
    assert inv.pools[0].fields["migManager"] == ((NONE, 1),)  # DaemonSets read: none runs


def test_an_empty_gpu_nodepool_is_listed_with_no_values_claimed() -> None:
    inp = cluster_input([node("ip-10-0-3-9")])
    empty = NodePool.from_api(
        {
            "metadata": {"name": "gpu-spare"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-gpu-manufacturer",
                                "operator": "In",
                                "values": ["nvidia"],
                            }
                        ]
                    }
                }
            },
        }
    )
    assert empty.requests_gpu
    snapshot = Snapshot(nodes=inp.snapshot.nodes, nodepools={"gpu-spare": empty}, karpenter=True)
    pools = {p.pool: p for p in inventory(replace(inp, snapshot=snapshot)).pools}
    assert pools["gpu-spare"].nodes == 0 and pools["gpu-spare"].kind == "nodepool"
    assert all(spread == () for spread in pools["gpu-spare"].fields.values())
    assert pools["gpu-inference"].nodes == 1


def test_the_driver_comes_from_the_full_label_else_the_deprecated_three() -> None:
    full = node("ip-10-0-4-1", labels={"nvidia.com/cuda.driver-version.full": "580.126.09"})
    parts = node(
        "ip-10-0-4-2",
        labels={
            "nvidia.com/cuda.driver.major": "535",
            "nvidia.com/cuda.driver.minor": "230",
            "nvidia.com/cuda.driver.rev": "02",
        },
    )
    two_part = node(  # a driver numbered X.Y: GFD leaves rev empty
        "ip-10-0-4-3",
        labels={
            "nvidia.com/cuda.driver.major": "550",
            "nvidia.com/cuda.driver.minor": "54",
            "nvidia.com/cuda.driver.rev": "",
        },
    )
    spread = inventory(cluster_input([full, parts, two_part])).pools[0].fields["driver"]
    assert dict(spread) == {"580.126.09": 1, "535.230.02": 1, "550.54": 1}


def test_gpu_operator_is_the_cluster_policy_label_else_the_validator_image() -> None:
    policy = {
        "metadata": {"name": "cluster-policy", "labels": {"app.kubernetes.io/version": "v25.3.0"}}
    }
    with_policy = inventory(cluster_input([node("ip-10-0-5-1")], cluster_policy=policy))
    assert [(v.value, v.source) for v in with_policy.stack["gpuOperator"]] == [
        ("v25.3.0", "ClusterPolicy label app.kubernetes.io/version")
    ]
    without = inventory(cluster_input([node("ip-10-0-5-1")]))
    assert [v.value for v in without.stack["gpuOperator"]] == ["v24.9.2"]
    assert "nvidia-operator-validator" in without.stack["gpuOperator"][0].source


def test_mig_manager_and_the_dra_driver_are_where_their_daemonsets_run() -> None:
    mig = node("ip-10-0-6-1", pool="gpu-mig", labels={**gfd("570.124.06"), "mig": "yes"})
    plain = node("ip-10-0-6-2", pool="gpu-train")
    manager = daemonset(
        "nvidia-mig-manager",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0@sha256:" + "a" * 64,
        selector={"mig": "yes"},
    )
    dra = daemonset(  # the chart's selector label; its image is found by it
        "dra-kubelet",
        "registry.example/mirror/k8s-dra-driver-gpu:v25.8.0",
        namespace="nvidia-dra-driver-gpu",
        labels={"nvidia-dra-driver-gpu-component": "kubelet-plugin"},
        selector={"mig": "yes"},
    )
    pools = {
        p.pool: p
        for p in inventory(cluster_input([mig, plain], daemonsets=(manager, dra, AGENT))).pools
    }
    assert pools["gpu-mig"].fields["migManager"] == (("v0.15.0", 1),)
    assert pools["gpu-mig"].fields["draDriver"] == (("v25.8.0", 1),)
    assert pools["gpu-train"].fields["migManager"] == ((NONE, 1),)
    assert pools["gpu-train"].fields["draDriver"] == ((NONE, 1),)


def test_a_node_groups_ami_release_and_repair_config_come_from_its_eks_settings() -> None:
    documents = {
        "nodegroups": [
            {
                "nodegroupName": "ng-gpu",
                "releaseVersion": "1.32.3-20250610",
                "amiType": "AL2023_x86_64_NVIDIA",
                "nodeRepairConfig": {
                    "enabled": True,
                    "maxUnhealthyNodeThresholdPercentage": 20,
                    "nodeRepairConfigOverrides": [
                        {
                            "nodeMonitoringCondition": "AcceleratedHardwareReady",
                            "nodeUnhealthyReason": "DCGMError",
                            "minRepairWaitTimeMins": 10,
                            "repairAction": "Replace",
                        }
                    ],
                },
            },
            {
                "nodegroupName": "ng-off",
                "amiType": "CUSTOM",  # a launch template's own AMI: EKS names no release
                "nodeRepairConfig": {"enabled": False},
            },
        ]
    }
    inp = cluster_input(
        [node("ip-10-0-7-1", group="ng-gpu"), node("ip-10-0-7-2", group="ng-off")],
        nodegroups=documents,
    )
    pools = {p.pool: p for p in inventory(inp).pools}
    words = pools["ng-gpu"].fields["nodeRepair"][0][0]
    assert words.startswith("node group auto repair on")
    assert "AcceleratedHardwareReady/DCGMError Replace after 10m" in words
    assert "stops above 20% unhealthy" in words
    assert pools["ng-off"].fields["nodeRepair"] == (("node group auto repair off", 1),)
    assert pools["ng-gpu"].fields["amiRelease"] == (("1.32.3-20250610 (AL2023_x86_64_NVIDIA)", 1),)
    assert pools["ng-off"].fields["amiRelease"] == (("none (custom AMI)", 1),)


def test_the_json_names_every_field_of_every_pool_and_the_cluster_stack() -> None:
    document = inventory(rolling_pool()).to_json()
    assert set(document) == {"stack", "pools", "criticalFindings"}
    assert set(document["stack"]) == {"gpuOperator", "karpenter", "karpenterFeatureGates"}
    pool = document["pools"][0]
    assert set(pool) == {"pool", "kind", "nodes", "fields"}
    assert list(pool["fields"]) == [key for key, _title in POOL_FIELDS]
    assert pool["fields"]["osImage"] == [
        {"value": OLD_AL2023, "nodes": 2},
        {"value": NEW_AL2023, "nodes": 1},
    ]


def test_hostile_label_values_are_kept_exact_in_the_inventory() -> None:
    payload = "535\x1b]52;c;cm0gLXJmIH4=\x07\u202e.1"
    hostile = node(
        "ip-10-0-8-1",
        labels={"nvidia.com/cuda.driver-version.full": payload},
        info={"osImage": "Amazon Linux\x1b[2J 2023", "kernelVersion": "6.1\u200b"},
    )
    pool = inventory(cluster_input([hostile])).pools[0]
    # the core keeps what the cluster said; the faces make it inert (tests/test_inventory_cli.py)
    assert pool.fields["driver"] == ((payload, 1),)
    assert pool.fields["osImage"] == (("Amazon Linux\x1b[2J 2023", 1),)


# ------------------------------------------------------------------ several clusters


def critical(pool: str, *nodes: str) -> Finding:
    return Finding(
        id="node-repair-loop", severity=CRITICAL, nodepool=pool, nodes=nodes, summary="loop"
    )


def test_differences_say_which_cluster_runs_which_value() -> None:
    prod = inventory(cluster_input([node("ip-10-0-9-1"), node("ip-10-0-9-2")]))
    staging_nodes = [node("ip-10-1-9-1", labels=gfd("580.126.09"))]
    staging = inventory(
        cluster_input(staging_nodes, karpenter=KarpenterSettings(True, "", "1.8.1"))
    )
    found = {d.field: d for d in differences([("prod", prod), ("staging", staging)])}
    assert "kubelet" not in found and "osImage" not in found  # the same everywhere
    driver = found["driver"]
    assert driver.between_clusters
    assert [
        (value, [(h.cluster, h.pool, h.nodes) for h in holders]) for value, holders in driver.values
    ] == [
        ("570.124.06", [("prod", "gpu-inference", 2)]),
        ("580.126.09", [("staging", "gpu-inference", 1)]),
    ]
    assert [(v, [h.cluster for h in hs]) for v, hs in found["karpenter"].values] == [
        ("1.4.0", ["prod"]),
        ("1.8.1", ["staging"]),
    ]


def test_a_rolling_pool_in_one_cluster_is_a_difference_within_it() -> None:
    found = {d.field: d for d in differences([("prod", inventory(rolling_pool()))])}
    assert set(found) == {"osImage", "ami"}
    assert not found["osImage"].between_clusters
    assert [v for v, _h in found["osImage"].values] == [OLD_AL2023, NEW_AL2023]


def test_the_combination_that_broke_one_cluster_is_found_running_in_another() -> None:
    broken_inp = rolling_pool()
    broken = inventory(broken_inp, [critical("gpu-inference", "ip-10-0-1-3")])
    same = inventory(cluster_input([node("ip-10-2-0-1", pool="gpu-batch")]))  # new AMI too
    older = inventory(cluster_input([node("ip-10-3-0-1", os_image=OLD_AL2023)]))
    other_driver = inventory(cluster_input([node("ip-10-4-0-1", labels=gfd("580.126.09"))]))
    shared = shared_combinations(
        [("prod", broken), ("eu", same), ("staging", older), ("dev", other_driver)]
    )
    assert len(shared) == 1
    item = shared[0]
    assert (item.cluster, item.pool, item.findings, item.nodes) == (
        "prod",
        "gpu-inference",
        ("node-repair-loop",),
        1,
    )
    assert item.combination.values() == ("570.124.06", NONE, NEW_AL2023, "1.4.0")
    assert [(h.cluster, h.pool, h.nodes) for h in item.elsewhere] == [("eu", "gpu-batch", 1)]
    assert item.to_json()["alsoRunningIn"] == [
        {"context": "eu", "cluster": None, "pool": "gpu-batch", "nodes": 1}
    ]


def test_warnings_do_not_count_as_a_breakage() -> None:
    warned = Finding("repair-risk", WARNING, "gpu-inference", ("ip-10-0-1-3",), "risk")
    broken = inventory(rolling_pool(), [warned])
    assert broken.critical == ()
    assert shared_combinations([("prod", broken)]) == []


def test_a_part_of_the_broken_combination_that_is_not_known_is_named_not_compared() -> None:
    unlabelled = node("ip-10-0-1-9", labels={"nvidia.com/gpu.present": "true"})
    broken = inventory(cluster_input([unlabelled]), [critical("gpu-inference")])
    elsewhere = inventory(cluster_input([node("ip-10-5-0-1", labels=gfd("580.126.09"))]))
    (item,) = shared_combinations([("prod", broken), ("eu", elsewhere)])
    assert item.unknown == ("driver",)
    assert [(h.cluster, h.pool) for h in item.elsewhere] == [("eu", "gpu-inference")]


# ------------------------------------------------------------------ the face's renderer


def test_the_table_lists_a_dozen_values_and_counts_the_rest() -> None:
    from mignurse.cli.inventory import show

    kernels = [
        node(f"ip-10-0-10-{i}", info={"osImage": NEW_AL2023, "kernelVersion": f"6.1.{i}"})
        for i in range(15)
    ]
    out = io.StringIO()
    assert show([("prod", inventory(cluster_input(kernels)), "")], output="table", out=out) == 0
    shown = [line.split() for line in out.getvalue().splitlines()]
    assert sum(1 for line in shown if line[1:2] == ["kernel"]) == 13
    assert shown[next(i for i, line in enumerate(shown) if "more" in line)][:7] == [
        "gpu-inference",
        "kernel",
        "3",
        "…",
        "3",
        "more",
        "values",
    ]


def test_the_renderer_takes_several_clusters_and_one_that_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mignurse.cli.inventory import show

    prod = inventory(rolling_pool(), [critical("gpu-inference", "ip-10-0-1-3")])
    eu = inventory(cluster_input([node("ip-10-2-0-1", pool="gpu-batch")]))
    entries = [
        ("prod", prod, ""),
        ("eu", eu, ""),
        ("staging", None, "credentials expired: run `aws sso login --profile staging`"),
    ]
    out = io.StringIO()
    assert show(entries, output="table", out=out) == 2
    text = out.getvalue()
    assert text.startswith("Where prod, eu differ:")
    assert "prod pool gpu-inference: node-repair-loop (critical) on 1 node" in text
    assert "    eu pool gpu-batch (1 node)" in text
    assert capsys.readouterr().err == (
        "mignurse: staging: credentials expired: run `aws sso login --profile staging`\n"
    )
    as_json = io.StringIO()
    assert show(entries, output="json", out=as_json) == 2
    document = json.loads(as_json.getvalue())
    assert document["clusters"][2] == {
        "context": "staging",
        "cluster": None,
        "error": "credentials expired: run `aws sso login --profile staging`",
    }


def test_a_driver_the_cluster_wrote_as_n_a_is_shown_but_matches_nothing() -> None:
    not_known = node("ip-10-0-11-1", labels={"nvidia.com/cuda.driver-version.full": "N/A"})
    broken = inventory(cluster_input([not_known]), [critical("gpu-inference", "ip-10-0-11-1")])
    assert broken.pools[0].fields["driver"] == (("N/A", 1),)  # as the cluster said it
    also_na = inventory(cluster_input([node("ip-10-6-0-1", labels={LABEL_FULL: "N/A"})]))
    known = inventory(cluster_input([node("ip-10-7-0-1")]))
    (item,) = shared_combinations([("prod", broken), ("eu", also_na), ("us", known)])
    assert item.unknown == ("driver",)  # left out of the comparison, and said so
    # what runs elsewhere is compared on the rest; an N/A there never counts as the same
    assert [h.cluster for h in item.elsewhere] == ["eu", "us"]
    (reverse,) = shared_combinations(
        [
            ("us", inventory(cluster_input([node("ip-10-7-0-1")]), [critical("gpu-inference")])),
            ("eu", also_na),
        ]
    )
    assert reverse.unknown == () and reverse.elsewhere == ()


def test_a_broken_combination_of_which_nothing_is_known_matches_nothing() -> None:
    blank = node("ip-10-0-12-1", labels={"nvidia.com/gpu.present": "true"}, info={})
    broken = inventory(
        cluster_input([blank], daemonsets=None, karpenter=None), [critical("gpu-inference")]
    )
    (item,) = shared_combinations([("prod", broken), ("eu", inventory(rolling_pool()))])
    assert item.unknown == ("driver", "migManager", "osImage", "karpenter")
    assert item.elsewhere == ()
