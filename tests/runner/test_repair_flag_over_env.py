"""The karpenter controller sets NodeRepair in two places that can disagree: the
`FEATURE_GATES` env var the chart renders, and a `--feature-gates` flag added by hand or by a
kustomize patch. Karpenter reads the flag, and the env only as the flag's default
(kubernetes-sigs/karpenter v1.6.0 and v1.8.0, pkg/operator/options/options.go:
`fs.StringVar(&o.FeatureGates.inputStr, "feature-gates", env.WithDefaultString("FEATURE_GATES",
…))`, then `ParseFeatureGates`, whose absent gate is `DefaultFeatureGates()`'s NodeRepair=false);
the aws/karpenter-provider-aws chart (v1.6.0 and v1.8.0, charts/karpenter/templates/
deployment.yaml) renders only the env. A pause that judged by the env would plan "already
off" while the flag keeps repair running. The simulator's Karpenter resolves the two the
same way, so its `repair_enabled` is the witness."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS
from mignurse.runner.step import StepFailed
from mignurse.runner.steps.repair import PauseNodeRepair, ResumeNodeRepair
from mignurse.runner.steps.repair.gates import (
    effective_repair,
    gate_settings,
    pod_repair_enabled,
    restored_repair,
    set_gate,
)
from mignurse.sim.scenario import parse_scenario, scenario_path

from .enginehelpers import Cluster
from .repairhelpers import run_phases, sim_ctx

CHART_ON = "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true"
CHART_OFF = "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false"


def controller(
    env: str | None = None, args: list[str] | None = None, command: list[str] | None = None
) -> dict[str, Any]:
    ctr: dict[str, Any] = {"name": "controller", "image": "public.ecr.aws/karpenter/controller"}
    if env is not None:
        ctr["env"] = [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "FEATURE_GATES", "value": env},
        ]
    if args is not None:
        ctr["args"] = args
    if command is not None:
        ctr["command"] = command
    return ctr


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "karpenter", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": list(containers)}}},
    }


def repair_runs(**ctr: Any) -> bool:
    return effective_repair(gate_settings(deployment(controller(**ctr))))


# -- which one Karpenter reads ----------------------------------------------------------------


def test_a_flag_that_turns_repair_off_wins_over_the_charts_env_that_says_on() -> None:
    assert repair_runs(env=CHART_ON, args=["--feature-gates=NodeRepair=false"]) is False


def test_a_flag_that_turns_repair_on_wins_over_the_charts_env_that_says_off() -> None:
    assert repair_runs(env=CHART_OFF, args=["--feature-gates=NodeRepair=true"]) is True


def test_a_flag_without_node_repair_leaves_it_off_whatever_the_env_says() -> None:
    """The flag replaces the env string whole: a gate it omits takes Karpenter's default."""
    assert repair_runs(env=CHART_ON, args=["--feature-gates=SpotToSpotConsolidation=true"]) is False


def test_without_a_flag_the_env_decides_and_without_either_repair_is_off() -> None:
    assert repair_runs(env=CHART_ON) is True
    assert repair_runs(env=CHART_OFF) is False
    assert repair_runs() is False
    assert repair_runs(env="ReservedCapacity=true") is False


@pytest.mark.parametrize(
    ("value", "runs"),
    [
        ("1", True),
        ("t", True),
        ("T", True),
        ("TRUE", True),
        ("True", True),
        ("true", True),
        ("0", False),
        ("f", False),
        ("FALSE", False),
        ("tRuE", False),
    ],
)
def test_node_repair_is_on_for_every_spelling_go_parses_as_true(value: str, runs: bool) -> None:
    # Karpenter parses each gate with strconv.ParseBool (cliflag.MapStringBool.Set,
    # k8s.io/component-base cli/flag/map_string_bool.go): NodeRepair=1 repairs. A spelling it
    # cannot parse ("tRuE") stops Karpenter at start, and nothing repairs.
    assert repair_runs(env=f"ReservedCapacity=true,NodeRepair={value}") is runs


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["--feature-gates", "NodeRepair=true"], True),  # the value as the next argument
        (["-feature-gates=NodeRepair=true"], True),  # Go's flag package takes one dash too
        (["--feature-gates=NodeRepair=false", "--feature-gates=NodeRepair=true"], True),
        (["--feature-gates=NodeRepair=true", "--feature-gates=NodeRepair=false"], False),
        (["--feature-gates"], True),  # no value follows: the flag is not set, the env decides
        (["--feature-gates-extra=NodeRepair=false"], True),  # another flag
    ],
)
def test_the_last_feature_gates_flag_is_the_one_karpenter_reads(
    argv: list[str], runs: bool
) -> None:
    assert repair_runs(env=CHART_ON, args=argv) is runs


def test_a_flag_in_args_comes_after_one_in_command() -> None:
    """The container's argv is command then args: the one in args is parsed last."""
    assert (
        repair_runs(
            env=CHART_ON,
            command=["/ko-app/controller", "--feature-gates=NodeRepair=false"],
            args=["--feature-gates=NodeRepair=true"],
        )
        is True
    )
    assert (
        repair_runs(
            env=CHART_OFF,
            command=["/ko-app/controller", "--feature-gates=NodeRepair=true"],
            args=["--log-level=debug"],
        )
        is True
    )


def test_a_running_pod_is_judged_by_its_own_flag() -> None:
    pod = {
        "spec": {
            "containers": [controller(env=CHART_ON, args=["--feature-gates=NodeRepair=false"])]
        }
    }
    assert pod_repair_enabled(pod) is False
    pod = {
        "spec": {
            "containers": [controller(env=CHART_OFF, args=["--feature-gates=NodeRepair=true"])]
        }
    }
    assert pod_repair_enabled(pod) is True


def test_resume_judges_the_restored_strings_by_the_flag_too() -> None:
    settings = gate_settings(
        deployment(controller(env=CHART_OFF, args=["--feature-gates=NodeRepair=false"]))
    )
    flag_back = [
        {"where": "arg --feature-gates", "container": "controller", "prior": "NodeRepair=true"}
    ]
    env_back = [{"where": "env FEATURE_GATES", "container": "controller", "prior": CHART_ON}]
    assert restored_repair(settings, flag_back) is True
    assert restored_repair(settings, env_back) is False  # the flag still says false
    assert restored_repair(settings, []) is False


# -- where the gates live -----------------------------------------------------------------------


def test_the_gates_are_read_from_the_controller_container_only() -> None:
    sidecar = {"name": "proxy", "env": [{"name": "FEATURE_GATES", "value": CHART_ON}]}
    found = gate_settings(deployment(sidecar, controller(env=CHART_OFF, args=["--v=2"])))
    assert [(s.where, s.container, s.path, s.gates) for s in found] == [
        ("env FEATURE_GATES", 1, "/spec/template/spec/containers/1/env/1/value", CHART_OFF)
    ]


def test_each_place_is_named_by_the_json_pointer_that_a_patch_tests() -> None:
    found = gate_settings(
        deployment(
            controller(
                env=CHART_ON,
                command=["/ko-app/controller", "--feature-gates", "NodeRepair=true"],
                args=["--feature-gates=NodeRepair=true,NodeOverlay=false"],
            )
        )
    )
    assert [(s.where, s.path, s.prefix, s.gates) for s in found] == [
        ("env FEATURE_GATES", "/spec/template/spec/containers/0/env/1/value", "", CHART_ON),
        (
            "arg --feature-gates",
            "/spec/template/spec/containers/0/command/2",
            "",
            "NodeRepair=true",
        ),
        (
            "arg --feature-gates",
            "/spec/template/spec/containers/0/args/0",
            "--feature-gates=",
            "NodeRepair=true,NodeOverlay=false",
        ),
    ]
    assert found[2].render("NodeRepair=false") == "--feature-gates=NodeRepair=false"


def test_gates_from_a_configmap_are_refused_not_guessed() -> None:
    ctr = controller()
    ctr["env"] = [{"name": "FEATURE_GATES", "valueFrom": {"configMapKeyRef": {"name": "k"}}}]
    with pytest.raises(
        StepFailed, match="FEATURE_GATES of deployment/kube-system/karpenter comes from valueFrom"
    ):
        gate_settings(deployment(ctr))


def test_a_deployment_without_a_controller_container_is_refused() -> None:
    with pytest.raises(StepFailed, match="has no container 'controller'"):
        gate_settings(deployment({"name": "proxy", "image": "envoy"}))


def test_an_empty_feature_gates_env_is_read_as_empty_not_refused() -> None:
    """The API server leaves out an empty `value`: `{"name": "FEATURE_GATES"}` is "", not a
    reference to a ConfigMap."""
    ctr = controller()
    ctr["env"] = [{"name": "FEATURE_GATES"}]
    (found,) = gate_settings(deployment(ctr))
    assert (found.where, found.gates) == ("env FEATURE_GATES", "")
    assert effective_repair([found]) is False


def test_with_feature_gates_set_twice_in_the_env_the_last_one_is_in_force() -> None:
    """kubelet sets a container's env in order, a later entry replacing an earlier one of the
    same name (kubernetes/kubernetes pkg/kubelet/kubelet_pods.go, makeEnvironmentVariables)."""
    ctr = controller()
    ctr["env"] = [
        {"name": "FEATURE_GATES", "value": CHART_OFF},
        {"name": "FEATURE_GATES", "value": CHART_ON},
    ]
    assert effective_repair(gate_settings(deployment(ctr))) is True
    ctr["env"].reverse()
    assert effective_repair(gate_settings(deployment(ctr))) is False


def test_a_bare_gate_name_gets_a_value_and_keeps_its_spacing() -> None:
    assert (
        set_gate("A=true, NodeRepair ,B=false", "NodeRepair", False)
        == "A=true, NodeRepair=false ,B=false"
    )
    assert set_gate(" ", "NodeRepair", True) == "NodeRepair=true"


# -- the pause and resume steps, on the simulator ------------------------------------------------


def _cluster_with(
    cluster_for: Callable[..., Cluster], tmp_path: Path, chart_repair: bool, flag: str
) -> Cluster:
    text = scenario_path("healthy").read_text()
    text = text.replace("  nodeRepair: true", f"  nodeRepair: {str(chart_repair).lower()}")
    path = tmp_path / "healthy-flag.yaml"
    path.write_text(text)
    parse_scenario(text, str(path))
    cluster = cluster_for(str(path))
    cluster.client.patch(
        DEPLOYMENTS,
        "karpenter",
        {"spec": {"template": {"spec": {"containers": [{"name": "controller", "args": [flag]}]}}}},
        namespace="kube-system",
        patch_type="strategic",
    )
    cluster.sim.advance(60)  # the controller pods restart with the flag
    return cluster


def _controller_of(cluster: Cluster) -> dict[str, Any]:
    deploy = cluster.client.get(DEPLOYMENTS, "karpenter", "kube-system")
    (ctr,) = [
        c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "controller"
    ]
    return dict(ctr)


def test_pause_turns_off_the_flag_that_keeps_repair_on_over_an_env_that_says_off(
    cluster_for: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = _cluster_with(
        cluster_for, tmp_path, chart_repair=False, flag="--feature-gates=NodeRepair=true"
    )
    assert cluster.sim.loops.repair_enabled is True  # Karpenter repairs: the flag wins
    env_before = _controller_of(cluster)["env"]

    plan, _applied = run_phases(PauseNodeRepair(), sim_ctx(cluster.sim, cluster.client, timeout=60))

    gate_changes = [(c.field, c.old, c.new) for c in plan.changes if "annotation" not in c.field]
    assert gate_changes == [
        (
            "arg --feature-gates of container controller token NodeRepair",
            "NodeRepair=true",
            "NodeRepair=false",
        )
    ]
    assert _controller_of(cluster)["args"] == ["--feature-gates=NodeRepair=false"]
    assert _controller_of(cluster)["env"] == env_before
    assert cluster.sim.loops.repair_enabled is False

    run_phases(ResumeNodeRepair(), sim_ctx(cluster.sim, cluster.client, run_id="run-2", timeout=60))
    assert _controller_of(cluster)["args"] == ["--feature-gates=NodeRepair=true"]
    assert cluster.sim.loops.repair_enabled is True


def test_pause_says_already_off_when_the_flag_turns_off_what_the_env_turns_on(
    cluster_for: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = _cluster_with(
        cluster_for, tmp_path, chart_repair=True, flag="--feature-gates=NodeRepair=false"
    )
    assert cluster.sim.loops.repair_enabled is False

    step = PauseNodeRepair()
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=60)
    assert step.check(ctx) is None
    plan = step.plan(ctx)

    assert plan.nothing_to_do
    assert plan.notes[0] == (
        "nothing to pause: node repair is off by configuration, not paused by mignurse in "
        "deployment/kube-system/karpenter (NodeRepair is not true)"
    )
    assert not plan.changes
