"""A plan names the cluster it acts on, and a high-harm confirmation asks for that cluster's
name: with several kubeconfig contexts at hand, the answer must say which cluster was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from mignurse.cluster.client import ContextInfo
from mignurse.runner.plan import Plan, batch_word
from mignurse.runner.schema import load_runbook
from mignurse.runner.step import Harm

ROOT = Path(__file__).resolve().parents[2]
NODE = "ip-10-0-37-142.us-west-2.compute.internal"
# `aws eks update-kubeconfig` names the cluster entry and the context by the cluster's ARN
# (aws/aws-cli v2 awscli/customizations/eks/update_kubeconfig.py, `arn` of describe-cluster)
ARN = "arn:aws:eks:us-west-2:111122223333:cluster/ml-prod-usw2"


def plan_of(runbook: str, target: str, *, context: str, cluster: str) -> Plan:
    book = load_runbook(ROOT / "runbooks" / f"{runbook}.yaml")
    return Plan(book, target, [], Harm.HIGH, context=context, cluster=cluster)


@pytest.mark.parametrize(
    ("entry", "context", "name"),
    [
        (ARN, ARN, "ml-prod-usw2"),
        ("ml-prod-usw2.us-west-2.eksctl.io", "oncall@ml-prod", "ml-prod-usw2.us-west-2.eksctl.io"),
        ("", "kind-dev", "kind-dev"),  # no cluster entry read: the context
    ],
)
def test_the_clusters_name_is_the_one_its_operators_say(
    entry: str, context: str, name: str
) -> None:
    assert ContextInfo(context, entry, "https://127.0.0.1:6443", "oncall").name == name


def test_a_node_plan_names_node_cluster_and_context_and_asks_for_cluster_slash_node() -> None:
    plan = plan_of("replace-instance", NODE, context=ARN, cluster="ml-prod-usw2")

    assert plan.text().splitlines()[0] == (
        f"replace-instance on node {NODE} in cluster ml-prod-usw2 (context {ARN}): "
        "Replace the node's instance"
    )
    assert plan.typed_word() == f"ml-prod-usw2/{NODE}"
    assert plan.to_json()["cluster"] == "ml-prod-usw2" and plan.to_json()["context"] == ARN


def test_a_cluster_plan_asks_for_the_short_name_not_the_arn() -> None:
    plan = plan_of("pause-node-repair", ARN, context="prod", cluster="ml-prod-usw2")

    assert plan.text().startswith("pause-node-repair on cluster ml-prod-usw2 (context prod): ")
    assert plan.typed_word() == "ml-prod-usw2"


def test_a_context_named_as_its_cluster_is_said_once() -> None:
    plan = plan_of("cordon", NODE, context="ml-prod-usw2", cluster="ml-prod-usw2")

    assert plan.text().startswith(f"cordon on node {NODE} in cluster ml-prod-usw2: ")


@pytest.mark.parametrize(
    "hostile", ["prod\x1b]0;owned\x07", "prod west", "a/b", "-rf", "\u202eprod"]
)
def test_a_cluster_name_nobody_can_type_is_not_asked_for(hostile: str) -> None:
    """A kubeconfig is outside input: a name with controls, spaces or a slash cannot be typed
    back exactly (or would make `CLUSTER/NODE` ambiguous), so the node's name is asked."""
    node = plan_of("replace-instance", NODE, context="x", cluster=hostile)
    cluster = plan_of("pause-node-repair", "the-entry", context="x", cluster=hostile)

    assert node.typed_word() == NODE
    assert cluster.typed_word() == "the-entry"


def test_one_confirmation_of_several_nodes_names_their_cluster() -> None:
    same = [
        plan_of("cordon", f"ip-10-0-0-{i}.ec2.internal", context=ARN, cluster="ml-prod-usw2")
        for i in range(3)
    ]
    mixed = [*same[:1], plan_of("cordon", "n", context="other", cluster="ml-staging")]

    assert batch_word(same) == "ml-prod-usw2/3 nodes"
    assert batch_word(mixed) == "2 nodes"
