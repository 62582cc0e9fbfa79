"""replace-instance's own steps as the engine runs them (mignurse/runner/steps/instance.py):
what its plan promises about undo, how often a failed delete or terminate is tried, and what
the wait for a replacement says while it waits and when it gives up."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from mignurse.cluster.client import NODECLAIMS, NODES
from mignurse.model import Node
from mignurse.runner.engine import Runner
from mignurse.runner.schema import Runbook, load_runbook
from mignurse.runner.step import Change, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.instance import (
    DeleteNodeClaim,
    TerminateAsgInstance,
    WaitReplacement,
    find_nodeclaim,
)

from .enginehelpers import Cluster
from .interrupthelpers import book
from .repairhelpers import aws, moto_endpoint, sim_ctx, unique
from .test_nodeclaim_recreated import _train_node_and_claim as train_node_and_claim

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

Make = Callable[..., Cluster]


def one_step(tmp_path: Path, action: str) -> Runbook:
    """A runbook of the one step `action` on a node (as a colleague's own runbook would)."""
    path = tmp_path / "books" / f"just-{action}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"name: just-{action}\ntitle: {action} alone\ntarget: node\n"
        "params:\n  node: {type: node, required: true}\n"
        f"  force: {{type: bool, default: false}}\n"
        f"steps:\n  - id: {action}\n    action: {action}\n"
    )
    return load_runbook(path)


def claim_of(c: Cluster, node: str) -> str:
    (claim,) = [
        x["metadata"]["name"]
        for x in c.sim.objects("nodeclaims")
        if x["status"].get("nodeName") == node
    ]
    return str(claim)


# -- what the plan promises ------------------------------------------------------------------------


def test_the_plan_says_the_deletes_cannot_be_undone_and_the_wait_changes_nothing(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("gpu-train")[0]
    replace = book("replace-instance", tmp_path)
    plan = Runner(replace, {"node": node, "collect": False}, client=c.client, yes=True).plan()

    shown = {s["id"]: (s["mutates"], s["canUndo"], s["harm"]) for s in plan.to_json()["steps"]}
    assert shown["collect"] == (False, False, "none")  # reads the node, writes a local file
    assert shown["delete-nodeclaim"] == (True, False, "high")
    assert shown["terminate"] == (True, False, "high")
    assert shown["wait-replacement"] == (False, False, "none")
    assert "6. wait-replacement (Wait for a replacement node that stays Ready in the same pool)" \
        " [read-only]" in plan.text()  # fmt: skip


# -- how often a failed write is tried -----------------------------------------------------------


def test_a_nodeclaim_delete_answered_500_twice_fails_after_one_retry(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("gpu-train")[0]
    claim = claim_of(c, node)
    c.sim.fail("DELETE", rf"/nodeclaims/{claim}$", code=500, times=2)

    result = Runner(one_step(tmp_path, "delete-nodeclaim"), {"node": node}, client=c.client,
                    yes=True).run()  # fmt: skip

    assert result.status == "failed", (result.error, result.report_lines())
    assert result.error.startswith(
        f"step delete-nodeclaim failed: delete of nodeclaim/{claim} failed: the API server "
        "answered 500"
    ), result.error
    deletes = [r for r in c.sim.requests if r["method"] == "DELETE" and claim in r["path"]]
    assert len(deletes) == 2
    assert result.steps[0].attempts == 2


class _Failing:
    """An AWS client whose `call` answers 500 (InternalFailure) the first `times` times."""

    def __init__(self, real: Any, call: str, times: int) -> None:
        self._real, self._call, self.left, self.tried = real, call, times, 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name != self._call:
            return target

        def call(**kwargs: Any) -> Any:
            self.tried += 1
            if self.left > 0:
                self.left -= 1
                raise ClientError(
                    {
                        "Error": {"Code": "InternalFailure", "Message": "try again"},
                        "ResponseMetadata": {"HTTPStatusCode": 500},
                    },
                    name,
                )
            return target(**kwargs)

        return call


def test_a_terminate_answered_500_twice_fails_after_one_retry(
    cluster_for: Make,
    state_home: Path,
    tmp_path: Path,
    aws: Callable[[str], Any],
) -> None:
    c = cluster_for("healthy")
    name = unique("eks-ng-gpu-l4")
    template = aws("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g6.xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    aws("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=2,
        DesiredCapacity=1,
        AvailabilityZones=["us-west-2a"],
    )
    found = aws("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    victim = found["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    node = c.nodes("ng-gpu-l4")[0]
    c.client.patch(NODES, node, {"spec": {"providerID": f"aws:///us-west-2a/{victim}"}})
    failing = _Failing(aws("autoscaling"), "terminate_instance_in_auto_scaling_group", 2)

    def factory(service: str) -> Any:
        return failing if service == "autoscaling" else aws(service)

    result = Runner(one_step(tmp_path, "terminate-asg-instance"), {"node": node},
                    client=c.client, aws=factory, yes=True).run()  # fmt: skip

    assert result.status == "failed", (result.error, result.report_lines())
    assert failing.tried == 2
    assert result.error.endswith(f"terminating {victim} failed: InternalFailure: try again"), (
        result.error
    )


# -- delete-nodeclaim, planned again while its node is still there -------------------------------


def test_a_run_resumed_after_its_delete_while_the_node_drains_has_nothing_left_to_do(
    cluster_for: Make,
) -> None:
    # Killed right after the delete was sent: Karpenter is still draining and terminating, so
    # the node is there. The resumed plan says the claim is deleting, not that the node went.
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    name = claim["metadata"]["name"]
    step = DeleteNodeClaim()
    first = sim_ctx(c.sim, c.client, node)
    saved = StepPlan.from_json(step.plan(first).to_json())
    step.apply(first, saved)  # then killed
    assert node in c.nodes()

    resumed = sim_ctx(c.sim, c.client, node, prior=dict(first.prior), saved_plan=saved)
    plan = step.plan(resumed)

    assert plan.nothing_to_do
    assert plan.notes[0].startswith(f"nodeclaim/{name} is already deleting since "), plan.notes


def test_the_delete_planned_again_when_the_step_runs_is_the_live_plan(cluster_for: Make) -> None:
    # The engine plans every step up front and again when it runs (the first plan kept as
    # saved_plan): with the node still there, the second plan is the same as the first.
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(c.sim, c.client, node)).to_json())

    again = step.plan(sim_ctx(c.sim, c.client, node, saved_plan=saved))

    assert again.notes == saved.notes
    assert again.notes[0].startswith(f"Karpenter drains what is left on {node} and terminates ")
    assert (
        again.data
        == saved.data
        == {
            "nodeclaim": claim["metadata"]["name"],
            "uid": claim["metadata"]["uid"],
            "pool": "gpu-train",
        }
    )


def test_a_node_group_node_gone_before_delete_nodeclaim_fails_its_precondition(
    cluster_for: Make,
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("ng-gpu-l4")[0]
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(c.sim, c.client, node)).to_json())
    assert saved.nothing_to_do and saved.notes == [
        f"node {node} is not a Karpenter node: terminate-asg-instance replaces it"
    ]
    c.client.delete(NODES, node)

    refused = step.check(sim_ctx(c.sim, c.client, node, saved_plan=saved))

    assert refused == f"node {node} does not exist (any more)"


def test_a_node_whose_provider_id_is_not_set_yet_is_found_by_the_claim_naming_it(
    cluster_for: Make,
) -> None:
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    c.client.patch(NODES, node, {"spec": {"providerID": None}})
    ctx = sim_ctx(c.sim, c.client, node)

    found = find_nodeclaim(ctx, Node.from_api(c.client.get(NODES, node)))

    assert found is not None and found["metadata"]["uid"] == claim["metadata"]["uid"]


@pytest.mark.parametrize("claim_state", ["deleting", "gone"])
def test_a_node_deleted_outside_the_run_is_recorded_as_gone_before_the_step(
    claim_state: str, cluster_for: Make
) -> None:
    # What the step records (the run state, `--json`) tells a later reader that this run did
    # not delete the claim: someone else did, before the step ran.
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    step = DeleteNodeClaim()
    saved = StepPlan.from_json(step.plan(sim_ctx(c.sim, c.client, node)).to_json())
    c.client.delete(NODECLAIMS, name)  # Karpenter's own repair
    if claim_state == "gone":
        c.sim.advance(300)  # the instance terminated, the claim's finalizer cleared
    with c.sim.store.lock:
        if node in c.nodes():
            c.sim.store.delete("nodes", "", node)  # the Node object goes first

    plan = step.plan(sim_ctx(c.sim, c.client, node, saved_plan=saved))

    assert plan.nothing_to_do
    assert plan.data == {
        "nodeclaim": name,
        "uid": uid,
        "goneBefore": True,
        "summary": plan.notes[0],
    }
    assert plan.notes[0].startswith(f"node {node} was deleted outside this run")


def test_a_cluster_without_karpenter_has_no_nodeclaim_to_delete(cluster_for: Make) -> None:
    # mng-dcgm-repair-loop: managed node groups only, no karpenter.sh API to list
    c = cluster_for("mng-dcgm-repair-loop")
    node = c.nodes("ng-gpu-inference")[0]
    before = len(c.sim.requests)

    plan = DeleteNodeClaim().plan(sim_ctx(c.sim, c.client, node))

    assert plan.nothing_to_do
    assert plan.notes == [
        f"node {node} is not a Karpenter node: terminate-asg-instance replaces it"
    ]
    assert not [r for r in c.sim.requests[before:] if "nodeclaims" in r["path"]]


def set_gpus(c: Cluster, node: str, count: str) -> None:
    """The node's nvidia.com/gpu in capacity and allocatable, as kubelet reports them."""
    with c.sim.store.lock:
        raw = copy.deepcopy(
            next(n for n in c.sim.objects("nodes") if n["metadata"]["name"] == node)
        )
        for part in ("capacity", "allocatable"):
            raw["status"][part]["nvidia.com/gpu"] = count
        c.sim.store.put("nodes", raw)


# -- which GPUs the replacement must show ---------------------------------------------------------


@pytest.mark.parametrize("pool", ["gpu-infer", "ng-gpu-l4"])  # 4 GPUs a node, and 1
def test_a_node_whose_device_plugin_died_is_replaced_by_one_that_must_advertise_gpus(
    pool: str, cluster_for: Make
) -> None:
    # kubelet keeps the resource at 0 once the plugin is gone: the node shows no GPUs, its
    # Ready neighbours show theirs, and the replacement must show its own.
    c = cluster_for("healthy")
    node = c.nodes(pool)[0]
    set_gpus(c, node, "0")

    plan = WaitReplacement().plan(sim_ctx(c.sim, c.client, node))

    assert plan.data["expects"] == "allocatable"
    assert " counts once it has stayed Ready with its GPUs advertised for " in plan.notes[-1]


# -- a pool whose GPUs are published through DRA -------------------------------------------------


def test_a_dra_pools_replacement_counts_once_its_gpus_are_published(cluster_for: Make) -> None:
    # mig-dra-healthy: the DRA driver publishes each g7e node's MIG devices in ResourceSlices;
    # no device plugin advertises them in allocatable.
    c = cluster_for("mig-dra-healthy")
    node, neighbour = c.nodes("gpu-mig-dra")[:2]
    bare = next(n for n in c.nodes() if n not in c.nodes("gpu-mig-dra") + c.nodes("gpu-a100-dra"))
    # the device plugin it ran before the DRA driver left its resource behind, at 0
    set_gpus(c, node, "0")
    step = WaitReplacement()
    ctx = sim_ctx(c.sim, c.client, node)

    plan = step.plan(ctx)

    assert plan.data["expects"] == "dra"
    assert plan.notes[-1].startswith(
        "a new node in NodePool gpu-mig-dra counts once it has stayed Ready with its GPUs "
        "published for 2m00s of cluster time"
    ), plan.notes
    assert step.verify(ctx, plan, {"replacement": neighbour}) is None
    assert step.verify(ctx, plan, {"replacement": bare}) == (
        f"replacement {bare} is no GPUs published in ResourceSlices yet"
    )
    # a node joined by hand, in no NodePool or node group: nothing brings another
    c.client.patch(NODES, bare, {"metadata": {"labels": {"eks.amazonaws.com/nodegroup": None}}})
    alone = step.plan(sim_ctx(c.sim, c.client, bare))
    assert alone.nothing_to_do
    assert alone.notes == [f"node {bare} belongs to no NodePool or node group: no replacement"]


@pytest.mark.parametrize("down", [None, 1])
def test_a_pool_publishing_no_gpus_is_probed_on_three_nodes_at_most(
    down: int | None, cluster_for: Make
) -> None:
    # Whether a pool's nodes publish their GPUs through DRA is read node by node: on a pool
    # that publishes none, three nodes' reads settle it (the node and two Ready neighbours,
    # each once); a NotReady neighbour is no one to judge by.
    c = cluster_for("mig-dra-healthy")
    pool = c.nodes("gpu-a100-dra")
    with c.sim.store.lock:
        for found in c.sim.objects("resourceslices"):
            if found["spec"].get("nodeName") in pool:
                c.sim.store.delete("resourceslices", "", found["metadata"]["name"])
        if down is not None:
            (raw,) = [copy.deepcopy(n) for n in c.sim.objects("nodes")
                      if n["metadata"]["name"] == pool[down]]  # fmt: skip
            for cond in raw["status"]["conditions"]:
                if cond["type"] == "Ready":
                    cond.update(status="False", reason="KubeletNotReady")
            c.sim.store.put("nodes", raw)
    before = len(c.sim.requests)

    plan = WaitReplacement().plan(sim_ctx(c.sim, c.client, pool[0]))

    assert plan.data["expects"] == ""
    assert plan.notes[-1].startswith(
        "a new node in NodePool gpu-a100-dra counts once it has stayed Ready for 2m00s"
    ), plan.notes
    probed = [
        r["query"]["fieldSelector"].removeprefix("spec.nodeName=")
        for r in c.sim.requests[before:]
        if "resourceslices" in r["path"] and "fieldSelector" in r["query"]
    ]
    assert probed == [name for i, name in enumerate(pool) if i != down][:3]


# -- terminate-asg-instance after a Karpenter node went -------------------------------------------


def test_terminate_has_nothing_to_do_for_a_karpenter_node_gone_through_its_nodeclaim(
    cluster_for: Make,
) -> None:
    # delete-nodeclaim ran first: by the time the terminate step runs, Karpenter may have
    # removed the node. The step planned "nothing to do" up front and keeps that.
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    step = TerminateAsgInstance()
    live = sim_ctx(c.sim, c.client, node)  # no AWS access: none is needed for this node
    assert step.check(live) is None
    saved = StepPlan.from_json(step.plan(live).to_json())
    assert saved.nothing_to_do
    c.client.delete(NODECLAIMS, claim["metadata"]["name"])
    c.sim.advance(300)
    assert node not in c.nodes()
    ctx = sim_ctx(c.sim, c.client, node, saved_plan=saved)

    assert step.check(ctx) is None
    plan = step.plan(ctx)

    assert plan.nothing_to_do
    assert plan.notes == [f"node {node} is a Karpenter node: delete-nodeclaim replaces it"]


def test_an_instance_ec2_no_longer_lists_stops_undo_there() -> None:
    # EC2 forgets a terminated instance after a while: DescribeInstances finds no reservation
    class Ec2:
        def describe_instances(self, **_kwargs: Any) -> dict[str, Any]:
            return {"Reservations": []}

    ec2 = Ec2()
    ctx = StepContext(client=None, params={"node": "ip-10-0-7-21"}, aws=lambda _s: ec2)  # type: ignore[arg-type]
    barrier = TerminateAsgInstance().undo_barrier(ctx, StepPlan(), {"instance": "i-0b2c4d6e8f"})
    assert barrier == "instance i-0b2c4d6e8f is gone"


def test_a_node_read_that_may_pass_is_tried_again_not_shown_as_a_refusal(
    cluster_for: Make,
) -> None:
    c = cluster_for("healthy")
    node = c.nodes("ng-gpu-l4")[0]
    c.sim.fail("GET", rf"/api/v1/nodes/{node}$", code=503)

    with pytest.raises(StepFailed) as failed:
        TerminateAsgInstance().check(sim_ctx(c.sim, c.client, node))

    assert failed.value.retryable, str(failed.value)


def test_a_node_group_node_gone_before_its_terminate_fails_the_precondition(
    cluster_for: Make,
) -> None:
    # The group's own health check replaced the node during the drain: the terminate that
    # was confirmed is not sent to whatever now runs under that name.
    c = cluster_for("healthy")
    node = c.nodes("ng-gpu-l4")[0]
    saved = StepPlan(
        changes=[Change("instance/i-0b2c4d6e8f", "state", "running", "terminated")],
        data={"instance": "i-0b2c4d6e8f", "group": {"name": "eks-ng-gpu-l4", "desired": 3}},
    )
    c.client.delete(NODES, node)

    refused = TerminateAsgInstance().check(sim_ctx(c.sim, c.client, node, saved_plan=saved))

    assert refused == f"node {node} does not exist (any more)"


def test_a_nodeclaim_recreated_between_the_read_and_the_delete_is_refused_by_its_uid(
    cluster_for: Make,
) -> None:
    # The step read the claim it planned; a GitOps sync recreates it under the same name
    # before the DELETE arrives. The delete carries the planned UID as its precondition, so
    # the API server refuses it (409) instead of terminating the newcomer's instance.
    c = cluster_for("healthy")
    node, claim = train_node_and_claim(c)
    name = claim["metadata"]["name"]
    step = DeleteNodeClaim()
    ctx = sim_ctx(c.sim, c.client, node)
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    newcomer = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "uid": str(uuid.uuid4()),
                     "labels": copy.deepcopy(claim["metadata"].get("labels") or {})},
        "spec": copy.deepcopy(claim["spec"]),
    }  # fmt: skip

    def recreate(sim: Any) -> None:
        with sim.store.lock:
            sim.store.delete("nodeclaims", "", name)
            sim.store.create("nodeclaims", copy.deepcopy(newcomer))

    c.sim.race("DELETE", rf"/nodeclaims/{name}$", recreate, conflict=False)

    with pytest.raises(StepFailed) as refused:
        step.apply(ctx, plan)

    assert str(refused.value) == f"nodeclaim/{name} was replaced by another object since the plan"
    now = c.client.get(NODECLAIMS, name)
    assert now["metadata"]["uid"] == newcomer["metadata"]["uid"]
    assert not now["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize(
    "provider_id, words",
    [
        ("aws:///us-west-2a/i-0abc123def4567890", "instance i-0abc123def4567890"),
        ("kwok://p5-48xlarge-abcde", "its machine (kwok://p5-48xlarge-abcde)"),
        ("", "its machine (the Node names no providerID)"),
    ],
)
def test_the_plan_names_the_machine_karpenter_terminates_as_its_provider_id_does(
    provider_id: str, words: str
) -> None:
    from mignurse.model import instance_id_from_provider_id
    from mignurse.runner.steps.instance import _instance_words

    node = Node.from_api(
        {"metadata": {"name": "n1"}, "spec": {"providerID": provider_id} if provider_id else {}}
    )
    assert node.instance_id == instance_id_from_provider_id(provider_id)
    assert _instance_words(node) == words
