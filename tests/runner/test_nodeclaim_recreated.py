"""delete-nodeclaim against a NodeClaim recreated under the same name between the plan and the
delete (mignurse/runner/steps/instance.py): the plan confirmed was for one instance, the
object now named so is another one, and deleting it would terminate a machine nobody agreed
to lose. The step compares the UID it planned with the UID it finds."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import NODECLAIMS, NODES
from mignurse.model import Node
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.instance import DeleteNodeClaim, find_nodeclaim

from .enginehelpers import Cluster
from .repairhelpers import sim_ctx


def _train_node_and_claim(cluster: Cluster) -> tuple[str, dict[str, Any]]:
    node = sorted(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )[0]
    (claim,) = [c for c in cluster.sim.objects("nodeclaims") if c["status"].get("nodeName") == node]
    return node, claim


def _recreate(cluster: Cluster, claim: dict[str, Any]) -> dict[str, Any]:
    """The NodeClaim is deleted and gone, and a new one is created under its name (a
    colleague's manifest applied again, a GitOps sync)."""
    name = claim["metadata"]["name"]
    cluster.client.delete(NODECLAIMS, name)
    cluster.sim.advance(300)  # Karpenter's finalizer goes once the instance is terminated
    assert name not in {c["metadata"]["name"] for c in cluster.sim.objects("nodeclaims")}
    body = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "labels": copy.deepcopy(claim["metadata"].get("labels") or {}),
        },
        "spec": copy.deepcopy(claim["spec"]),
    }
    # the simulator serves NodeClaims read/patch/delete only: the newcomer goes in its store
    with cluster.sim.store.lock:
        created = cluster.sim.store.create("nodeclaims", body)
    return created


def test_a_nodeclaim_recreated_under_the_planned_name_is_not_deleted(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    ctx = sim_ctx(cluster.sim, cluster.client, node)
    plan = StepPlan.from_json(step.plan(ctx).to_json())  # kept in the run state
    assert plan.data["uid"] == claim["metadata"]["uid"]

    newcomer = _recreate(cluster, claim)
    before = len(cluster.sim.requests)

    with pytest.raises(StepFailed, match=r"was replaced by another object since the plan") as e:
        step.apply(ctx, plan)

    assert str(e.value) == (
        f"nodeclaim/{claim['metadata']['name']} was replaced by another object since the plan"
    )
    now = cluster.client.get(NODECLAIMS, claim["metadata"]["name"])
    assert now["metadata"]["uid"] == newcomer["metadata"]["uid"]
    assert not now["metadata"].get("deletionTimestamp")
    assert not [r for r in cluster.sim.requests[before:] if r["method"] == "DELETE"]
    assert not ctx.prior  # nothing was announced (ctx.intend) either


def test_after_its_nodeclaim_was_replaced_undo_stops_at_the_delete(
    cluster_for: Callable[..., Cluster],
) -> None:
    """A resumed undo finds a NodeClaim of the same name: not the one this run deleted,
    whose instance is gone, so the steps before it stay as they are."""
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    ctx = sim_ctx(cluster.sim, cluster.client, node)
    applied = {"nodeclaim": claim["metadata"]["name"], "uid": claim["metadata"]["uid"]}

    _recreate(cluster, claim)

    assert step.undo_barrier(ctx, StepPlan(), applied) == (
        f"nodeclaim/{claim['metadata']['name']} was replaced (its instance was terminated)"
    )


def test_a_delete_that_never_landed_is_no_barrier_to_undo(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    applied = {"nodeclaim": claim["metadata"]["name"], "uid": claim["metadata"]["uid"]}
    ctx = sim_ctx(cluster.sim, cluster.client, node)

    assert DeleteNodeClaim().undo_barrier(ctx, StepPlan(), applied) is None
    cluster.client.delete(NODECLAIMS, claim["metadata"]["name"])
    assert DeleteNodeClaim().undo_barrier(ctx, StepPlan(), applied) == (
        f"nodeclaim/{claim['metadata']['name']} is deleting (Karpenter is terminating its instance)"
    )


# -- the node went before the step ran ------------------------------------------------------------


def test_a_node_gone_before_the_step_whose_nodeclaim_was_recreated_is_left_alone(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(cluster.sim, cluster.client, node)).to_json())
    newcomer = _recreate(cluster, claim)  # Karpenter deleted the node with the old claim
    name = claim["metadata"]["name"]
    assert node not in {n["metadata"]["name"] for n in cluster.sim.objects("nodes")}
    ctx = sim_ctx(cluster.sim, cluster.client, node, saved_plan=saved)

    assert step.check(ctx) is None
    plan = step.plan(ctx)

    assert plan.nothing_to_do
    assert plan.notes == [
        f"node {node} was deleted outside this run and nodeclaim/{name} was replaced by another "
        "object: its instance was terminated without this step"
    ]
    kept = cluster.client.get(NODECLAIMS, name)
    assert kept["metadata"]["uid"] == newcomer["metadata"]["uid"]
    assert not kept["metadata"].get("deletionTimestamp")


def test_a_node_gone_before_the_step_with_its_nodeclaim_gone_too_is_said_so(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(cluster.sim, cluster.client, node)).to_json())
    name = claim["metadata"]["name"]
    cluster.client.delete(NODECLAIMS, name)
    cluster.sim.advance(300)  # Karpenter terminates the instance, and the node goes with it
    assert node not in {n["metadata"]["name"] for n in cluster.sim.objects("nodes")}

    plan = step.plan(sim_ctx(cluster.sim, cluster.client, node, saved_plan=saved))

    assert plan.nothing_to_do
    assert plan.notes == [
        f"node {node} was deleted outside this run and nodeclaim/{name} is gone: its instance "
        "was terminated without this step"
    ]


def test_a_node_gone_before_the_step_with_its_nodeclaim_still_there_deletes_it_as_planned(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(cluster.sim, cluster.client, node)).to_json())
    name = claim["metadata"]["name"]
    with cluster.sim.store.lock:
        cluster.sim.store.delete("nodes", "", node)  # the Node object only

    ctx = sim_ctx(cluster.sim, cluster.client, node, saved_plan=saved)
    plan = step.plan(ctx)

    assert not plan.nothing_to_do
    assert plan.notes == [
        f"node {node} is gone but nodeclaim/{name} is not: deleting it as planned"
    ]
    assert plan.data["uid"] == claim["metadata"]["uid"]
    step.apply(ctx, plan)
    assert cluster.client.get(NODECLAIMS, name)["metadata"].get("deletionTimestamp")
    # recorded before the delete was sent: a resume after a kill knows which claim it was
    assert ctx.prior == {"nodeclaim": name, "uid": claim["metadata"]["uid"]}


# -- which NodeClaim is the node's ---------------------------------------------------------------


def _claim_status(cluster: Cluster, claim: dict[str, Any], **status: Any) -> None:
    changed = copy.deepcopy(claim)
    changed["status"].update(status)
    with cluster.sim.store.lock:
        cluster.sim.store.put("nodeclaims", changed)


def test_a_nodeclaim_not_yet_naming_its_node_is_found_by_its_instance(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    _claim_status(cluster, claim, nodeName="")
    ctx = sim_ctx(cluster.sim, cluster.client, node)

    found = find_nodeclaim(ctx, Node.from_api(cluster.client.get(NODES, node)))

    assert found is not None and found["metadata"]["uid"] == claim["metadata"]["uid"]


def test_a_node_without_an_instance_id_is_not_matched_to_a_launching_nodeclaim(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    _claim_status(cluster, claim, nodeName="", providerID="")
    cluster.client.patch(NODES, node, {"spec": {"providerID": None}})
    ctx = sim_ctx(cluster.sim, cluster.client, node)

    assert find_nodeclaim(ctx, Node.from_api(cluster.client.get(NODES, node))) is None


# -- a delete already under way, or already done ---------------------------------------------------


def test_a_resumed_delete_after_its_node_went_names_its_own_delete(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    step = DeleteNodeClaim()
    first = sim_ctx(cluster.sim, cluster.client, node)
    step.apply(first, StepPlan.from_json(step.plan(first).to_json()))  # then killed
    cluster.sim.advance(300)
    assert node not in {n["metadata"]["name"] for n in cluster.sim.objects("nodes")}

    resumed = sim_ctx(cluster.sim, cluster.client, node, prior=dict(first.prior))
    assert step.check(resumed) is None
    plan = step.plan(resumed)
    name = claim["metadata"]["name"]
    assert plan.notes == [f"node {node} is gone: nodeclaim/{name} was deleted by this run"]
    assert step.apply(resumed, plan)["gone"] is True  # nothing left to delete
    fresh = sim_ctx(cluster.sim, cluster.client, node)
    with pytest.raises(StepFailed, match=r"does not exist \(any more\)$"):
        step.plan(fresh)


def test_a_nodeclaim_already_deleting_is_not_deleted_again(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, claim = _train_node_and_claim(cluster)
    name = claim["metadata"]["name"]
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(cluster.sim, cluster.client, node)).to_json())
    cluster.client.delete(NODECLAIMS, name)  # Karpenter's own repair got there first

    plan = step.plan(sim_ctx(cluster.sim, cluster.client, node))
    assert plan.nothing_to_do
    assert plan.notes[0].startswith(f"nodeclaim/{name} is already deleting since ")
    with cluster.sim.store.lock:
        cluster.sim.store.delete("nodes", "", node)  # the Node object goes first
    gone = step.plan(sim_ctx(cluster.sim, cluster.client, node, saved_plan=saved))
    assert gone.nothing_to_do
    assert gone.notes[0].startswith(
        f"node {node} was deleted outside this run; nodeclaim/{name} is deleting since "
    )


def test_an_undo_barrier_without_a_recorded_delete_is_none(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("healthy")
    node, _claim = _train_node_and_claim(cluster)
    ctx = sim_ctx(cluster.sim, cluster.client, node)
    assert DeleteNodeClaim().undo_barrier(ctx, StepPlan(), {}) is None
