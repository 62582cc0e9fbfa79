"""pause-node-repair and resume-node-repair against the simulator (Karpenter) and moto's
server (EKS managed node groups), phase by phase as the engine runs them."""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mignurse.cluster.client import DEPLOYMENTS, NODEPOOLS, NODES
from mignurse.diagnose.inputs import gate_setting
from mignurse.model import Condition, Node
from mignurse.runner.step import StepFailed, StepPlan
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.backend import detect_backend
from mignurse.runner.steps.repair.deployment import (
    ANNOTATION_PAUSED,
    HELM_SETTING,
    management_notes,
)
from mignurse.runner.steps.repair.gates import NODE_REPAIR, set_gate
from mignurse.runner.steps.repair.hazard import resume_risk
from mignurse.runner.steps.repair.nodegroup import joined_tag, split_tag
from mignurse.sim import load_scenario
from mignurse.sim.scenario import parse_scenario

from .enginehelpers import Cluster
from .repairhelpers import (
    LosingClient,
    aws,
    eks_node_group,
    moto_endpoint,
    run_phases,
    sim_ctx,
)

__all__ = ["aws", "moto_endpoint"]  # fixtures used by name below

AHR = "AcceleratedHardwareReady"


# --------------------------------------------------------------------------- pure parts

_names = st.sampled_from(
    ["ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity",
     "CapacityBuffer", "NodeRepairX", "XNodeRepair", "nodeRepair", "Foo"]
)  # fmt: skip
_space = st.sampled_from(["", " ", "  "])
_token = st.builds(
    lambda lead, name, mid, value, trail: f"{lead}{name}{mid}={mid}{value}{trail}",
    _space,
    _names,
    _space,
    st.sampled_from(["true", "false", "True", "FALSE"]),
    _space,
)
_repair_token = st.builds(
    lambda lead, value, trail: f"{lead}{NODE_REPAIR}={value}{trail}",
    _space,
    st.sampled_from(["true", "false", "True"]),
    _space,
)


@given(
    others=st.lists(_token, max_size=7),
    repair=st.lists(st.tuples(st.integers(0, 7), _repair_token), max_size=2),
)
def test_only_the_node_repair_token_changes(
    others: list[str], repair: list[tuple[int, str]]
) -> None:
    tokens = list(others)
    for at, token in repair:
        tokens.insert(min(at, len(tokens)), token)
    gates = ",".join(tokens)
    paused = set_gate(gates, NODE_REPAIR, False)
    assert gate_setting(paused) is False
    if repair:
        after = paused.split(",")
        assert len(after) == len(tokens)
        for before_token, after_token in zip(tokens, after, strict=True):
            if before_token.partition("=")[0].strip() == NODE_REPAIR:
                assert after_token.strip().endswith("=false")
                assert after_token.startswith(before_token.partition("=")[0])
            else:
                assert after_token == before_token  # byte-identical
    else:
        assert paused == (f"{gates},NodeRepair=false" if gates.strip() else "NodeRepair=false")


def test_absent_gate_is_added_and_the_last_token_wins() -> None:
    assert set_gate("", NODE_REPAIR, False) == "NodeRepair=false"
    assert set_gate("A=true", NODE_REPAIR, False) == "A=true,NodeRepair=false"
    assert gate_setting("NodeRepair=true,NodeRepair=false") is False
    assert gate_setting("NodeRepairX=true") is None
    assert set_gate("NodeRepair", NODE_REPAIR, False) == "NodeRepair=false"


@pytest.mark.parametrize(
    ("labels", "deploy", "nodegroup", "kind"),
    [
        ({"karpenter.sh/nodepool": "gpu", "eks.amazonaws.com/compute-type": "auto"}, False, "",
         "auto"),
        ({"karpenter.sh/nodepool": "gpu"}, True, "", "karpenter"),
        ({"eks.amazonaws.com/nodegroup": "ng-1"}, True, "", "nodegroup"),
        ({}, True, "", "unknown"),
        (None, True, "", "karpenter"),
        (None, False, "ng-2", "nodegroup"),
        (None, False, "", "unknown"),
    ],
)  # fmt: skip
def test_backend_detection(
    labels: dict[str, str] | None, deploy: bool, nodegroup: str, kind: str
) -> None:
    backend = detect_backend(labels, karpenter_deployment=deploy, nodegroup=nodegroup)
    assert backend.kind == kind
    assert backend.why


def test_gitops_and_helm_ownership_name_the_setting() -> None:
    argo = {
        "metadata": {
            "namespace": "karpenter",
            "name": "karpenter",
            "labels": {"argocd.argoproj.io/instance": "karpenter-prod"},
        }
    }
    flux = {
        "metadata": {
            "namespace": "karpenter",
            "name": "karpenter",
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "infra",
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
            },
        }
    }
    plain = {"metadata": {"namespace": "karpenter", "name": "karpenter"}}  # fmt: skip
    (argo_note,) = management_notes(argo, node_repair=False)
    assert "Argo CD (karpenter-prod)" in argo_note and f"{HELM_SETTING}=false" in argo_note
    (flux_note,) = management_notes(flux, node_repair=True)
    assert "Flux (flux-system/infra)" in flux_note and f"{HELM_SETTING}=true" in flux_note
    assert management_notes(plain, node_repair=False) == []


def test_resume_risk_applies_the_20_percent_guard() -> None:
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)

    def node(name: str, pool: str, failing_for: timedelta | None) -> Node:
        conds: tuple[Condition, ...] = ()
        if failing_for is not None:
            conds = (Condition(AHR, "False", "DCGMError", "", now - failing_for),)
        return Node(name, labels={"karpenter.sh/nodepool": pool}, pool=pool,
                    pool_kind="nodepool", conditions=conds)  # fmt: skip

    small = [node("a1", "a", timedelta(minutes=11))] + [node(f"a{i}", "a", None) for i in (2, 3)]
    # 6 nodes → 2 allowed; 3 unhealthy (one still inside its 10 minutes) → all blocked.
    big = [node(f"b{i}", "b", timedelta(minutes=20)) for i in range(2)]
    big += [node("b2", "b", timedelta(minutes=5))] + [node(f"b{i}", "b", None) for i in (3, 4, 5)]
    risks = {r.pool: r for r in resume_risk(small + big, now)}
    assert [n for n, _ in risks["a"].due] == ["a1"] and not risks["a"].blocked
    assert "replaced at once: a1" in risks["a"].describe()
    assert [n for n, _ in risks["b"].due] == ["b0", "b1"] and risks["b"].blocked
    assert "NodeRepairBlocked" in risks["b"].describe()


def test_long_records_split_over_tags_and_join_back() -> None:
    text = json.dumps({"prior": {"enabled": True, "x": "y" * 700}})
    tags = split_tag(text, "ng-1")
    assert len(tags) == -(-len(text) // 256) > 1 and all(len(v) <= 256 for v in tags.values())
    assert joined_tag({**tags, "team": "ml"}, "ng-1") == text


# --------------------------------------------------------------------------- Karpenter


def _deploy(cluster: Cluster) -> dict[str, Any]:
    return cluster.client.get(DEPLOYMENTS, "karpenter", "kube-system")


def _controller(deploy: dict[str, Any]) -> dict[str, Any]:
    (ctr,) = [
        c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "controller"
    ]
    return dict(ctr)


def _env_gates(deploy: dict[str, Any]) -> str:
    (value,) = [e["value"] for e in _controller(deploy)["env"] if e["name"] == "FEATURE_GATES"]
    return str(value)


def _failing(cluster: Cluster, pool: str) -> list[str]:
    """Nodes of the pool past their AcceleratedHardwareReady toleration and not deleting."""
    now = cluster.sim.now()
    out = []
    for raw in cluster.sim.objects("nodes"):
        node = Node.from_api(raw)
        cond = node.condition(AHR)
        if (
            node.pool == pool
            and node.deleting is None
            and cond is not None
            and cond.status == "False"
            and cond.last_transition is not None
            and now - cond.last_transition > timedelta(minutes=10)
        ):
            out.append(node.name)
    return out


def test_pause_stops_the_dcgm_loop_and_resume_restores_the_exact_string(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    sim = cluster.sim
    prior = _env_gates(_deploy(cluster))
    ctx = sim_ctx(sim, cluster.client, timeout=60)

    plan, _applied = run_phases(PauseNodeRepair(), ctx)
    gates_change = [c for c in plan.changes if "FEATURE_GATES" in c.field]
    assert [(c.old, c.new) for c in gates_change] == [
        (prior, prior.replace("NodeRepair=true", "NodeRepair=false"))
    ]
    assert any("managed by Helm" in n and f"{HELM_SETTING}=false" in n for n in plan.notes)
    assert sim.loops.repair_enabled is False
    record = json.loads(_deploy(cluster)["metadata"]["annotations"][ANNOTATION_PAUSED])
    assert record["by"] == "alice@laptop" and record["run"] == "run-1"
    assert record["settings"][0]["prior"] == prior
    pods = [p for p in sim.objects("pods") if p["metadata"]["name"].startswith("karpenter-")]
    assert len(pods) == 2 and all(
        "NodeRepair=false" in _env_gates({"spec": {"template": {"spec": p["spec"]}}}) for p in pods
    )

    claims_before = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
    sim.advance(30 * 60)
    stuck = _failing(cluster, "gpu-inference")
    assert stuck, "a DCGMError node past its 10-minute toleration should still be there"
    assert {c["metadata"]["name"] for c in sim.objects("nodeclaims")} == claims_before

    resume_ctx = sim_ctx(sim, cluster.client, run_id="run-2", timeout=60)
    plan, _ = run_phases(ResumeNodeRepair(), resume_ctx)
    assert any("paused by alice@laptop" in n for n in plan.notes)
    at_risk = {r["pool"]: r for r in plan.data["at_risk"]}
    assert at_risk["gpu-inference"]["due"] == stuck
    assert any(f"replaced at once: {stuck[0]}" in n for n in plan.notes)
    deploy = _deploy(cluster)
    assert _env_gates(deploy) == prior
    assert ANNOTATION_PAUSED not in deploy["metadata"].get("annotations", {})
    assert sim.loops.repair_enabled is True
    sim.advance(60)  # the new leader repairs what is past its toleration at once
    assert stuck[0] not in _failing(cluster, "gpu-inference")


def _scenario_file(tmp_path: Path, name: str, edit: Callable[[str], str]) -> str:
    from mignurse.sim.scenario import scenario_path

    text = edit(scenario_path(name).read_text())
    path = tmp_path / f"{name}-edited.yaml"
    path.write_text(text)
    parse_scenario(text, str(path))  # fails loudly if the edit broke it
    return str(path)


def test_flag_and_env_both_change_and_odd_spacing_survives(
    cluster_for: Callable[..., Cluster], tmp_path: Path
) -> None:
    odd = "SpotToSpotConsolidation=false, NodeRepair = true ,ReservedCapacity=true"
    path = _scenario_file(
        tmp_path,
        "healthy",
        lambda t: t.replace("  nodeRepair: true", f'  featureGates: "{odd}"'),
    )
    cluster = cluster_for(path)
    flag = "--feature-gates=NodeRepair=true,NodeOverlay=false"
    cluster.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"spec": {"template": {"spec": {"containers": [{"name": "controller", "args": [flag]}]}}}},
        namespace="kube-system",
        patch_type="strategic",
    )
    cluster.sim.advance(60)
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=60)
    plan, _ = run_phases(PauseNodeRepair(), ctx)
    edits = sorted(
        (c.field.split(" of ")[0], c.new) for c in plan.changes if "annotation" not in c.field
    )
    assert edits == [
        ("arg --feature-gates", "NodeRepair=false,NodeOverlay=false"),
        ("env FEATURE_GATES", odd.replace("NodeRepair = true", "NodeRepair = false")),
    ]
    ctr = _controller(_deploy(cluster))
    assert ctr["args"] == ["--feature-gates=NodeRepair=false,NodeOverlay=false"]
    assert cluster.sim.loops.repair_enabled is False

    run_phases(ResumeNodeRepair(), sim_ctx(cluster.sim, cluster.client, run_id="r2", timeout=60))
    deploy = _deploy(cluster)
    assert _controller(deploy)["args"] == [flag]
    assert _env_gates(deploy) == odd
    assert cluster.sim.loops.repair_enabled is True


def test_api_500_changes_nothing_and_a_retry_succeeds(cluster_for: Callable[..., Cluster]) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    prior = _env_gates(_deploy(cluster))
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    fault = cluster.sim.fail("PATCH", r"/deployments/karpenter$", code=500, times=None)
    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, plan)
    assert failed.value.retryable and "nothing was changed" in str(failed.value)
    assert fault.hits == 1
    deploy = _deploy(cluster)
    assert _env_gates(deploy) == prior
    assert ANNOTATION_PAUSED not in deploy["metadata"].get("annotations", {})
    cluster.sim.clear_faults()
    applied = step.apply(ctx, plan)  # the engine's retry
    assert step.verify(ctx, plan, applied) is None
    assert cluster.sim.loops.repair_enabled is False


def test_lost_answer_is_settled_by_reading_back_and_undo_restores(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    prior = _env_gates(_deploy(cluster))
    losing = LosingClient(cluster.client, {"patch"})
    ctx = sim_ctx(cluster.sim, losing, timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    applied = step.apply(ctx, plan)
    assert losing.lost == 1  # the patch landed and its answer was lost
    assert step.verify(ctx, plan, applied) is None
    assert "NodeRepair=false" in _env_gates(_deploy(cluster))

    # A later step failed: the engine undoes this one, twice even (a crash mid-undo).
    step.undo(ctx, plan, applied)
    step.undo(ctx, plan, applied)
    deploy = _deploy(cluster)
    assert _env_gates(deploy) == prior
    assert ANNOTATION_PAUSED not in deploy["metadata"].get("annotations", {})
    cluster.sim.advance(60)
    assert cluster.sim.loops.repair_enabled is True


def test_an_edit_between_plan_and_apply_is_not_overwritten(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=60)
    step = PauseNodeRepair()
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    theirs = "NodeRepair=true,ReservedCapacity=false"
    cluster.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"spec": {"template": {"spec": {"containers": [
            {"name": "controller", "env": [{"name": "FEATURE_GATES", "value": theirs}]}]}}}},
        namespace="kube-system",
        patch_type="strategic",
    )  # fmt: skip
    with pytest.raises(StepFailed, match="changed since the plan"):
        step.apply(ctx, plan)
    assert _env_gates(_deploy(cluster)) == theirs


def test_pause_twice_is_nothing_to_do_and_says_who(cluster_for: Callable[..., Cluster]) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    run_phases(PauseNodeRepair(), sim_ctx(cluster.sim, cluster.client, timeout=60))
    again = PauseNodeRepair().plan(sim_ctx(cluster.sim, cluster.client, run_id="other"))
    assert again.nothing_to_do
    assert any("paused by alice@laptop since" in n for n in again.notes)


def test_resume_without_a_record_refuses(cluster_for: Callable[..., Cluster]) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    refused = ResumeNodeRepair().check(sim_ctx(cluster.sim, cluster.client))
    assert refused and "was not paused by mignurse" in refused


def test_auto_mode_is_refused_with_the_stopgaps(
    cluster_for: Callable[..., Cluster], tmp_path: Path
) -> None:
    path = _scenario_file(
        tmp_path,
        "healthy",
        lambda t: t.replace(
            "  - name: gpu-train\n",
            "  - name: gpu-train\n    labels: {eks.amazonaws.com/compute-type: auto}\n",
        ),
    )
    cluster = cluster_for(path)
    node = next(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )
    refused = PauseNodeRepair().check(sim_ctx(cluster.sim, cluster.client, node))
    assert refused is not None
    assert "Auto Mode" in refused and "cannot be configured or paused" in refused
    assert "stopgap: cordon the node" in refused and "heartbeat" in refused
    assert "\n" not in refused


def test_a_node_whose_nodepool_uses_an_auto_mode_nodeclass_is_refused_without_the_label(
    cluster_for: Callable[..., Cluster],
) -> None:
    # Auto Mode NodePools point at NodeClass of group eks.amazonaws.com (EKS user guide
    # create-node-pool.html); a node missing the compute-type label is still Auto Mode's.
    cluster = cluster_for("healthy")
    node = next(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )
    assert PauseNodeRepair().check(sim_ctx(cluster.sim, cluster.client, node)) is None
    pool = copy.deepcopy(cluster.client.get(NODEPOOLS, "gpu-train"))
    pool["metadata"] = {"name": "gpu-auto"}  # nodeClassRef.group is immutable: a new pool
    pool.pop("status", None)
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"
    }  # fmt: skip
    cluster.client.create(NODEPOOLS, pool)
    cluster.client.patch(
        NODES, node, {"metadata": {"labels": {"karpenter.sh/nodepool": "gpu-auto"}}}
    )
    refused = PauseNodeRepair().check(sim_ctx(cluster.sim, cluster.client, node))
    assert refused is not None and "cannot be configured or paused" in refused
    assert "NodePool gpu-auto uses a eks.amazonaws.com NodeClass" in refused


def test_scenario_edit_helper_keeps_known_scenarios_valid() -> None:
    assert load_scenario("healthy").karpenter is not None


# --------------------------------------------------------------------------- node groups


def _nodegroup(aws: Callable[[str], Any], repair: dict[str, Any]) -> tuple[str, str]:
    return eks_node_group(aws, repair), "ng-gpu-l4"


def _l4_node(cluster: Cluster) -> str:
    return next(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("eks.amazonaws.com/nodegroup") == "ng-gpu-l4"
    )


def _repair_config(aws: Callable[[str], Any], eks_cluster: str) -> dict[str, Any]:
    group = aws("eks").describe_nodegroup(clusterName=eks_cluster, nodegroupName="ng-gpu-l4")
    return dict(group["nodegroup"].get("nodeRepairConfig") or {})


def test_node_group_pause_and_resume_through_the_eks_api(
    cluster_for: Callable[..., Cluster], aws: Callable[[str], Any]
) -> None:
    cluster = cluster_for("healthy")
    prior = {"enabled": True, "maxUnhealthyNodeThresholdCount": 2}
    eks_cluster, group = _nodegroup(aws, prior)
    node = _l4_node(cluster)
    logs: list[str] = []
    ctx = sim_ctx(cluster.sim, cluster.client, node, aws=aws, params={"cluster": eks_cluster},
                  log=logs.append, timeout=30)  # fmt: skip
    plan, applied = run_phases(PauseNodeRepair(), ctx)
    assert plan.data["backend"] == "nodegroup" and plan.data["prior"] == prior
    assert _repair_config(aws, eks_cluster)["enabled"] is False
    assert applied["update"]  # the update id, tracked
    assert any("describe_update is not available" in line for line in logs)
    tags = aws("eks").describe_cluster(name=eks_cluster)["cluster"]["tags"]
    assert json.loads(joined_tag(tags, group))["prior"] == prior

    resume_ctx = sim_ctx(cluster.sim, cluster.client, node, aws=aws, run_id="r2",
                         params={"cluster": eks_cluster}, timeout=30)  # fmt: skip
    plan, _ = run_phases(ResumeNodeRepair(), resume_ctx)
    assert any("paused by alice@laptop" in n for n in plan.notes)
    assert _repair_config(aws, eks_cluster) == prior
    tags = aws("eks").describe_cluster(name=eks_cluster)["cluster"].get("tags") or {}
    assert joined_tag(tags, group) == ""


def test_node_group_override_leaves_only_the_reason_at_hand(
    cluster_for: Callable[..., Cluster], aws: Callable[[str], Any]
) -> None:
    cluster = cluster_for("healthy")
    xid = {"nodeMonitoringCondition": AHR, "nodeUnhealthyReason": "NvidiaXID64Error",
           "minRepairWaitTimeMins": 5, "repairAction": "Replace"}  # fmt: skip
    eks_cluster, _group = _nodegroup(aws, {"enabled": True, "nodeRepairConfigOverrides": [xid]})
    params = {"cluster": eks_cluster, "mode": "override", "condition": AHR, "reason": "DCGMError"}
    ctx = sim_ctx(cluster.sim, cluster.client, _l4_node(cluster), aws=aws, params=params,
                  timeout=30)  # fmt: skip
    _plan, applied = run_phases(PauseNodeRepair(), ctx)
    config = _repair_config(aws, eks_cluster)
    assert config["enabled"] is True
    assert config["nodeRepairConfigOverrides"] == [
        xid,
        {"nodeMonitoringCondition": AHR, "nodeUnhealthyReason": "DCGMError",
         "minRepairWaitTimeMins": 10, "repairAction": "NoAction"},
    ]  # fmt: skip
    PauseNodeRepair().undo(ctx, _plan, applied)
    assert _repair_config(aws, eks_cluster) == {
        "enabled": True,
        "nodeRepairConfigOverrides": [xid],
    }


# --------------------------------------------------------------------------- the runbooks


class Typed:
    """A Confirmer that types the word it is asked for, and keeps what it was shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []

    def confirm(self, level: Any, plan_text: str, expected_word: str) -> bool:
        self.shown.append((plan_text, expected_word))
        return True


def _book(name: str, tmp_path: Path, timeout: str | None = None) -> Any:
    from mignurse.runner.schema import load_runbook

    path = Path(__file__).resolve().parents[2] / "runbooks" / f"{name}.yaml"
    if timeout is None:
        return load_runbook(path)
    edited = tmp_path / f"{name}.yaml"
    edited.write_text(path.read_text().replace("timeout: 600", f"timeout: {timeout}"))
    return load_runbook(edited)


def test_runbooks_pause_stops_the_loop_and_resume_lists_the_nodes_at_risk(
    cluster_for: Callable[..., Cluster], state_home: Path, tmp_path: Path
) -> None:
    from mignurse.runner.engine import Runner

    cluster = cluster_for("dcgm-repair-loop", speed=30)  # rollouts need the clock to run
    prior = _env_gates(_deploy(cluster))
    typed = Typed()
    result = Runner(_book("pause-node-repair", tmp_path), {}, client=cluster.client,
                    confirmer=typed).run()  # fmt: skip
    assert result.status == "succeeded", result.error
    ((plan_text, word),) = typed.shown
    assert word == "ml-prod-usw2"  # the typed acknowledgement names the cluster
    assert f"{HELM_SETTING}=false" in plan_text
    assert cluster.sim.loops.repair_enabled is False

    claims = {c["metadata"]["name"] for c in cluster.sim.objects("nodeclaims")}
    cluster.sim.advance(30 * 60)
    stuck = _failing(cluster, "gpu-inference")
    assert stuck and {c["metadata"]["name"] for c in cluster.sim.objects("nodeclaims")} == claims

    typed = Typed()
    result = Runner(_book("resume-node-repair", tmp_path), {}, client=cluster.client,
                    confirmer=typed).run()  # fmt: skip
    assert result.status == "succeeded", result.error
    ((plan_text, _word),) = typed.shown
    assert f"replaced at once: {stuck[0]}" in plan_text
    deploy = _deploy(cluster)
    assert _env_gates(deploy) == prior
    assert ANNOTATION_PAUSED not in deploy["metadata"].get("annotations", {})


def test_runbook_undoes_the_pause_when_the_rollout_cannot_be_verified(
    cluster_for: Callable[..., Cluster], state_home: Path, tmp_path: Path
) -> None:
    from mignurse.runner.engine import Runner

    cluster = cluster_for("dcgm-repair-loop", speed=30)
    prior = _env_gates(_deploy(cluster))
    # Every read of the controller pods fails: the pause is applied, never verified.
    cluster.sim.fail("GET", r"/namespaces/kube-system/pods$", code=500, times=None)
    result = Runner(_book("pause-node-repair", tmp_path, timeout="3"), {},
                    client=cluster.client, yes=True).run()  # fmt: skip
    assert result.status == "undone", result.error
    assert "controller pods" in result.error and "answered 500" in result.error
    deploy = _deploy(cluster)
    assert _env_gates(deploy) == prior
    assert ANNOTATION_PAUSED not in deploy["metadata"].get("annotations", {})


def test_runbook_dry_runs_change_nothing(
    cluster_for: Callable[..., Cluster], state_home: Path, tmp_path: Path
) -> None:
    from mignurse.runner.engine import Runner

    cluster = cluster_for("dcgm-repair-loop")
    node = _failing_or_any(cluster)
    for name, params in (
        ("pause-node-repair", {}),
        ("resume-node-repair", {}),
        ("replace-instance", {"node": node}),
    ):
        before = len([r for r in cluster.sim.requests if r["method"] != "GET"])
        result = Runner(
            _book(name, tmp_path),
            params,
            client=cluster.client,
            shell_for=_shells(cluster, state_home),
        ).run(dry_run=True)
        after = [r for r in cluster.sim.requests if r["method"] != "GET"]
        assert len(after) == before, after[before:]
        if name == "resume-node-repair":
            assert result.status == "blocked" and "not paused by mignurse" in result.error
        else:
            assert result.status == "dry-run", result.error


def _failing_or_any(cluster: Cluster) -> str:
    return sorted(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-inference"
    )[0]


def _shells(cluster: Cluster, state_home: Path) -> Any:
    from mignurse.runner.wiring import node_shells
    from mignurse.sim.nodes import sandbox_shells

    factory = sandbox_shells(cluster.client, state_home / "sandboxes")
    return node_shells(cluster.client, factory)


def test_replace_instance_runbook_end_to_end_on_a_karpenter_node(
    cluster_for: Callable[..., Cluster], state_home: Path, tmp_path: Path
) -> None:
    from mignurse.runner.engine import Runner
    from mignurse.runner.outcome import RunEvent

    cluster = cluster_for("healthy", speed=30)
    node = sorted(
        n["metadata"]["name"]
        for n in cluster.sim.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )[0]
    events: list[RunEvent] = []
    typed = Typed()
    bundle = tmp_path / "evidence.tar.gz"
    result = Runner(
        _book("replace-instance", tmp_path),
        {"node": node, "out": str(bundle), "since": "1h", "wait": "5m", "drain_timeout": "2m"},
        client=cluster.client,
        shell_for=_shells(cluster, state_home),
        confirmer=typed,
        listener=events.append,
    ).run()
    assert result.status == "succeeded", result.error
    # HIGH: the cluster's and the node's names typed; the plan names both, and the context
    name = cluster.client.info.name
    assert [word for _text, word in typed.shown] == [f"{name}/{node}"]
    assert typed.shown[0][0].startswith(f"replace-instance on node {node} in cluster {name}")
    assert bundle.exists()  # collected before anything changed
    by_step = {s.id: s for s in result.steps}
    assert by_step["terminate"].status == "skipped"  # Karpenter's NodeClaim path instead
    replacement = by_step["wait-replacement"].applied["replacement"]
    assert replacement != node
    assert any(e.message.startswith(f"replacement {replacement} stayed Ready with its GPUs "
                                    "advertised: served for ") for e in events)  # fmt: skip
    log = state_home / "sandboxes" / node / "calls.log"
    calls = [shlex.split(line) for line in log.read_text().splitlines() if line.strip()]
    assert calls, "the collection ran on the node's sandbox"
    assert not [
        c for c in calls
        if c[0] == "systemctl" and {"restart", "stop", "daemon-reload"} & set(c[1:])
    ]  # fmt: skip
