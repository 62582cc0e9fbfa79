"""When a pause or resume of Karpenter's node repair is real (runner/steps/repair/
deployment.py): the controller reads its gates once at start, so the change holds only when
the rollout is complete and every running controller pod started with the new value, as
many as the Deployment wants. A rollout "verified" with one of two pods still missing, or an
old pod still running, leaves a leader that can repair."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, ApiError
from mignurse.runner.step import StepFailed
from mignurse.runner.steps.repair.deployment import (
    gate_patch,
    management_notes,
    pause_record,
    pods_pending,
    rollout_pending,
    verify_rollout,
)

from .enginehelpers import Cluster
from .repairhelpers import sim_ctx

OFF = "ReservedCapacity=true,NodeRepair=false"
ON = "ReservedCapacity=true,NodeRepair=true"


def pod(name: str, gates: str, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-20T12:00:00Z"
    return {
        "metadata": meta,
        "spec": {
            "containers": [
                {"name": "controller", "env": [{"name": "FEATURE_GATES", "value": gates}]}
            ]
        },
        "status": {"phase": phase},
    }


# -- the controller pods ------------------------------------------------------------------------


def test_one_of_two_controller_pods_running_is_not_a_finished_pause() -> None:
    assert pods_pending([pod("karpenter-a", OFF)], want_repair=False, replicas=2) == (
        "1 of 2 controller pods running"
    )


def test_every_wanted_pod_running_with_the_new_value_is_a_finished_pause() -> None:
    pods = [pod("karpenter-a", OFF), pod("karpenter-b", OFF)]
    assert pods_pending(pods, want_repair=False, replicas=2) is None


def test_a_pod_still_running_with_repair_on_is_named() -> None:
    pods = [pod("karpenter-b", ON), pod("karpenter-a", OFF), pod("karpenter-c", ON)]
    assert pods_pending(pods, want_repair=False, replicas=2) == (
        "pod(s) karpenter-b, karpenter-c still run with NodeRepair on"
    )
    assert pods_pending([pod("karpenter-a", OFF)], want_repair=True, replicas=1) == (
        "pod(s) karpenter-a still run with NodeRepair off"
    )


def test_terminating_and_pending_pods_do_not_count_as_running() -> None:
    pods = [
        pod("karpenter-a", OFF),
        pod("karpenter-b", OFF, deleting=True),
        pod("karpenter-c", OFF, phase="Pending"),
        pod("karpenter-old", ON, deleting=True),  # on its way out: not a leader any more
    ]
    assert pods_pending(pods, want_repair=False, replicas=2) == "1 of 2 controller pods running"


# -- the Deployment's rollout -------------------------------------------------------------------


def deploy(wanted: int | None, status: dict[str, int] | None = None) -> dict[str, Any]:
    spec = {} if wanted is None else {"replicas": wanted}
    return {"spec": spec, "status": status or {}}


@pytest.mark.parametrize(
    ("status", "pending"),
    [
        (
            {"observedGeneration": 6, "updatedReplicas": 2, "replicas": 2, "availableReplicas": 2},
            "the controller has not seen generation 7 yet (at 6)",
        ),
        (
            {"observedGeneration": 7, "updatedReplicas": 1, "replicas": 2, "availableReplicas": 2},
            "1 of 2 replicas updated",
        ),
        (
            {"observedGeneration": 7, "updatedReplicas": 2, "replicas": 3, "availableReplicas": 2},
            "1 old replicas still running",
        ),
        (
            {"observedGeneration": 7, "updatedReplicas": 2, "replicas": 2, "availableReplicas": 1},
            "1 of 2 replicas available",
        ),
        (
            {"observedGeneration": 7, "updatedReplicas": 2, "replicas": 2, "availableReplicas": 2},
            None,
        ),
        (
            {"observedGeneration": 8, "updatedReplicas": 2, "replicas": 2, "availableReplicas": 2},
            None,
        ),
    ],
)
def test_a_rollout_is_complete_only_when_every_replica_is_new_and_available(
    status: dict[str, int], pending: str | None
) -> None:
    assert rollout_pending(deploy(2, status), generation=7) == pending


@pytest.mark.parametrize(
    ("status", "pending"),
    [
        (
            {"observedGeneration": 7, "replicas": 2, "availableReplicas": 2},
            "0 of 2 replicas updated",
        ),
        (
            {"observedGeneration": 7, "replicas": 2, "updatedReplicas": 2},
            "0 of 2 replicas available",
        ),
        ({"observedGeneration": 7, "updatedReplicas": 2, "availableReplicas": 2}, None),
    ],
)
def test_a_count_the_api_server_left_out_is_zero(
    status: dict[str, int], pending: str | None
) -> None:
    """Deployment status counts are `omitempty`: a zero is absent, never "all done"."""
    assert rollout_pending(deploy(2, status), generation=7) == pending


def test_a_controller_scaled_to_zero_has_nothing_left_to_roll_out() -> None:
    assert rollout_pending(deploy(0, {"observedGeneration": 7}), generation=7) is None


def test_a_deployment_without_replicas_wants_one_and_an_empty_status_is_not_done() -> None:
    assert rollout_pending(deploy(None), generation=1) == (
        "the controller has not seen generation 1 yet (at 0)"
    )
    done = {"observedGeneration": 1, "updatedReplicas": 1, "replicas": 1, "availableReplicas": 1}
    assert rollout_pending(deploy(None, done), generation=1) is None


# -- on the simulator ---------------------------------------------------------------------------


def test_the_pause_is_verified_only_once_both_controller_pods_restarted_with_repair_off(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    current = cluster.client.get(DEPLOYMENTS, "karpenter", "kube-system")
    ctr = current["spec"]["template"]["spec"]["containers"]
    (index,) = [i for i, c in enumerate(ctr) if c["name"] == "controller"]
    (env_index,) = [i for i, e in enumerate(ctr[index]["env"]) if e["name"] == "FEATURE_GATES"]
    path = f"/spec/template/spec/containers/{index}/env/{env_index}/value"
    old = ctr[index]["env"][env_index]["value"]
    ops = gate_patch(
        current, [(path, old, old.replace("NodeRepair=true", "NodeRepair=false"))], None
    )
    after = cluster.client.patch(
        DEPLOYMENTS, "karpenter", ops, namespace="kube-system", patch_type="json"
    )
    generation = int(after["metadata"]["generation"])
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=120)

    assert verify_rollout(ctx, "kube-system", "karpenter", generation, want_repair=False) is None
    impatient = sim_ctx(cluster.sim, cluster.client, timeout=2)
    assert "still run with NodeRepair off" in (
        verify_rollout(impatient, "kube-system", "karpenter", generation, want_repair=True) or ""
    )


def test_a_rollout_that_never_finishes_says_the_old_leader_can_still_repair(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    seen = int(
        cluster.client.get(DEPLOYMENTS, "karpenter", "kube-system")["metadata"]["generation"]
    )
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=1)

    said = verify_rollout(ctx, "kube-system", "karpenter", seen + 5, want_repair=False)

    assert said == (
        "the rollout of deployment/kube-system/karpenter not done after 1 s: the controller "
        f"has not seen generation {seen + 5} yet (at {seen}) (until it finishes the old leader "
        "can still repair)"
    )


def test_a_forbidden_read_of_the_deployment_fails_the_verify_at_once(
    cluster_for: Callable[..., Cluster],
) -> None:
    cluster = cluster_for("dcgm-repair-loop")
    cluster.sim.fail("GET", r"/deployments/karpenter$", code=403, times=None)
    ctx = sim_ctx(cluster.sim, cluster.client, timeout=120)

    with pytest.raises(StepFailed, match="cannot read deployment/kube-system/karpenter: "):
        verify_rollout(ctx, "kube-system", "karpenter", 1, want_repair=False)


# -- who else owns the Deployment -------------------------------------------------------------


def owned(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    meta = {"name": "karpenter", "namespace": "karpenter", "labels": labels}
    return {"metadata": {**meta, "annotations": annotations}}


def test_a_helm_label_alone_names_the_default_release_in_the_deployments_namespace() -> None:
    (note,) = management_notes(owned({"app.kubernetes.io/managed-by": "Helm"}, {}), False)
    assert note == (
        "deployment/karpenter/karpenter is managed by Helm (release karpenter in karpenter): "
        "the next `helm upgrade` re-renders FEATURE_GATES; set "
        "settings.featureGates.nodeRepair=false in the release values (helm upgrade karpenter "
        "<chart> -n karpenter --reuse-values --set settings.featureGates.nodeRepair=false)"
    )


def test_a_helm_release_annotation_alone_names_its_release_and_namespace() -> None:
    annotations = {
        "meta.helm.sh/release-name": "karpenter-prod",
        "meta.helm.sh/release-namespace": "kube-system",
    }
    (note,) = management_notes(owned({}, annotations), True)
    assert "managed by Helm (release karpenter-prod in kube-system)" in note
    assert note.endswith(
        "(helm upgrade karpenter-prod <chart> -n kube-system --reuse-values --set "
        "settings.featureGates.nodeRepair=true)"
    )


def test_an_unmanaged_deployment_has_no_warning() -> None:
    assert management_notes(owned({"app.kubernetes.io/managed-by": "kustomize"}, {}), False) == []


def test_argo_cd_and_flux_are_named_with_the_value_to_set() -> None:
    argo = management_notes(owned({"argocd.argoproj.io/instance": "karpenter-app"}, {}), False)
    assert argo == [
        "deployment/karpenter/karpenter is managed by Argo CD (karpenter-app): a sync (or "
        "self-heal) reverts this change; set settings.featureGates.nodeRepair=false in the "
        "Application's Helm values"
    ]
    tracked = management_notes(owned({}, {"argocd.argoproj.io/tracking-id": "app:apps/x"}), True)
    assert tracked[0].startswith(
        "deployment/karpenter/karpenter is managed by Argo CD (app:apps/x)"
    )
    flux = management_notes(
        owned(
            {
                "helm.toolkit.fluxcd.io/namespace": "flux-system",
                "helm.toolkit.fluxcd.io/name": "karpenter",
            },
            {},
        ),
        False,
    )
    assert flux == [
        "deployment/karpenter/karpenter is managed by Flux (flux-system/karpenter): its next "
        "reconcile reverts this change; set settings.featureGates.nodeRepair=false in the "
        "HelmRelease values"
    ]
    bare = management_notes(owned({}, {"kustomize.toolkit.fluxcd.io/checksum": "abc"}), False)
    assert bare[0].startswith(
        "deployment/karpenter/karpenter is managed by Flux (kustomize.toolkit.fluxcd.io/checksum)"
    )


# -- the JSON patch and the record --------------------------------------------------------------


def test_the_patch_tests_each_old_string_before_replacing_it_and_adds_the_record() -> None:
    bare = {"metadata": {"name": "karpenter"}}
    ops = gate_patch(bare, [("/p/0", "A", "B"), ("/p/1", "C", "D")], '{"settings":[]}')
    assert ops == [
        {"op": "test", "path": "/p/0", "value": "A"},
        {"op": "replace", "path": "/p/0", "value": "B"},
        {"op": "test", "path": "/p/1", "value": "C"},
        {"op": "replace", "path": "/p/1", "value": "D"},
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {
            "op": "add",
            "path": "/metadata/annotations/mignurse.io~1node-repair-paused",
            "value": '{"settings":[]}',
        },
    ]


def test_a_resume_patch_drops_the_record_only_where_there_is_one() -> None:
    recorded = {"metadata": {"annotations": {"mignurse.io/node-repair-paused": "{}", "a": "b"}}}
    assert gate_patch(recorded, [], None) == [
        {"op": "remove", "path": "/metadata/annotations/mignurse.io~1node-repair-paused"}
    ]
    assert gate_patch({"metadata": {"annotations": {"a": "b"}}}, [], None) == []
    assert gate_patch({"metadata": {}}, [], None) == []
    with_annotations = {"metadata": {"annotations": {"a": "b"}}}
    assert gate_patch(with_annotations, [], "{}")[0]["path"] != "/metadata/annotations"


@pytest.mark.parametrize(
    ("raw", "record"),
    [
        ('{"settings": [], "by": "alice"}', {"settings": [], "by": "alice"}),
        ('{"by": "alice"}', None),  # no settings: nothing to restore from
        ('{"settings": "x"}', None),
        ("[1]", None),
        ("not json", None),
        ("", None),
    ],
)
def test_only_a_pause_record_with_its_settings_is_believed(
    raw: str, record: dict[str, Any] | None
) -> None:
    deployment = {"metadata": {"annotations": {"mignurse.io/node-repair-paused": raw}}}
    assert pause_record(deployment) == record


def test_a_lost_answer_is_an_api_error_the_verify_rides_out() -> None:
    """A 5xx while waiting is a reason to wait, not a failure (deployment._blip)."""
    from mignurse.runner.steps.repair.deployment import _blip

    assert _blip("cannot list", ApiError("the API server answered 503 to list")) == (
        "cannot list: the API server answered 503 to list"
    )
    with pytest.raises(StepFailed):
        _blip("cannot list", ApiError("the API server answered 403 to list"))
