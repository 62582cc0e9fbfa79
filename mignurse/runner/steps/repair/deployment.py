"""The karpenter controller Deployment as the pause changes it: finding it, its pause record
(annotation `mignurse.io/node-repair-paused`: the prior gate strings, who, when, which run),
who else manages it (Helm, Argo CD, Flux), the JSON patch whose `test` operations pin the
exact old values (paused and recorded, or untouched), and the rollout that makes a change
real: the gates are read once at controller start, so it holds only when every running
controller pod carries the new value."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mignurse.cluster.client import DEPLOYMENTS, PODS, ClusterClient, ClusterError, Conflict
from mignurse.runner.step import StepContext, StepFailed, transient
from mignurse.runner.steps.repair.backend import cluster_failed, wait_until
from mignurse.runner.steps.repair.gates import deploy_ref, namespace_of, pod_repair_enabled
from mignurse.untrusted import json_value

# The diagnosis reads the same record (diagnose/inputs.py REPAIR_PAUSED_ANNOTATION, a test holds
# them equal); named here so that listing the repair runbooks loads no diagnosis.
ANNOTATION_PAUSED = "mignurse.io/node-repair-paused"
HELM_SETTING = "settings.featureGates.nodeRepair"


def management_notes(deployment: Mapping[str, Any], node_repair: bool) -> list[str]:
    """Warnings when Helm or GitOps owns the Deployment: their next render puts the chart's
    value back, so the setting to change there is printed, with the value the run leaves
    (`node_repair`: false for a pause, the restored value for a resume)."""
    value = "true" if node_repair else "false"
    meta = deployment.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    ref = deploy_ref(deployment)
    notes: list[str] = []
    release = annotations.get("meta.helm.sh/release-name")
    if labels.get("app.kubernetes.io/managed-by") == "Helm" or release:
        ns = annotations.get("meta.helm.sh/release-namespace") or namespace_of(deployment)
        name = release or "karpenter"
        notes.append(
            f"{ref} is managed by Helm (release {name} in {ns}): the next `helm upgrade` "
            f"re-renders FEATURE_GATES; set {HELM_SETTING}={value} in the release values "
            f"(helm upgrade {name} <chart> -n {ns} --reuse-values --set {HELM_SETTING}={value})"
        )
    argo = sorted(k for k in {**labels, **annotations} if k.startswith("argocd.argoproj.io/"))
    if argo:
        app = labels.get("argocd.argoproj.io/instance") or annotations.get(
            "argocd.argoproj.io/tracking-id", ""
        )
        notes.append(
            f"{ref} is managed by Argo CD ({app or argo[0]}): a sync (or self-heal) reverts "
            f"this change; set {HELM_SETTING}={value} in the Application's Helm values"
        )
    flux = sorted(
        k
        for k in {**labels, **annotations}
        if k.startswith(("kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/"))
    )
    if flux:
        owner = "/".join(
            v
            for v in (
                labels.get("kustomize.toolkit.fluxcd.io/namespace")
                or labels.get("helm.toolkit.fluxcd.io/namespace"),
                labels.get("kustomize.toolkit.fluxcd.io/name")
                or labels.get("helm.toolkit.fluxcd.io/name"),
            )
            if v
        )
        notes.append(
            f"{ref} is managed by Flux ({owner or flux[0]}): its next reconcile reverts this "
            f"change; set {HELM_SETTING}={value} in the HelmRelease values"
        )
    return notes


def rollout_pending(deployment: Mapping[str, Any], generation: int) -> str | None:
    """None when the rollout of `generation` is complete, else what it still waits for."""
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    want = int(spec.get("replicas", 1))
    observed = int(status.get("observedGeneration", 0))
    if observed < generation:
        return f"the controller has not seen generation {generation} yet (at {observed})"
    updated = int(status.get("updatedReplicas", 0))
    available = int(status.get("availableReplicas", 0))
    total = int(status.get("replicas", 0))
    if updated < want:
        return f"{updated} of {want} replicas updated"
    if total > updated:
        return f"{total - updated} old replicas still running"
    if available < want:
        return f"{available} of {want} replicas available"
    return None


def pods_pending(pods: list[dict[str, Any]], want_repair: bool, replicas: int) -> str | None:
    """None when exactly the wanted pods run, all started with NodeRepair = `want_repair`."""
    running = [
        p
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") == "Running"
    ]
    wrong = [p["metadata"]["name"] for p in running if pod_repair_enabled(p) != want_repair]
    if wrong:
        word = "on" if not want_repair else "off"
        return f"pod(s) {', '.join(sorted(wrong))} still run with NodeRepair {word}"
    if len(running) < replicas:
        return f"{len(running)} of {replicas} controller pods running"
    return None


def _pointer_key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _annotation_path() -> str:
    return f"/metadata/annotations/{_pointer_key(ANNOTATION_PAUSED)}"


def pause_record(deployment: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parsed `mignurse.io/node-repair-paused` record, or None (absent or unreadable)."""
    raw = ((deployment.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PAUSED)
    if not raw:
        return None
    try:
        record = json_value(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("settings"), list) else None


def karpenter_pause_record(client: ClusterClient) -> dict[str, Any] | None:
    """The pause record on the Karpenter Deployment, read now; None when there is none, or no
    Deployment, or it cannot be read."""
    from mignurse.diagnose.sources import find_karpenter_deployment

    try:
        deploy = find_karpenter_deployment(client)
    except ClusterError:
        return None
    return pause_record(deploy) if deploy is not None else None


def describe_record(record: Mapping[str, Any]) -> str:
    """ "paused by alice@laptop since 2026-11-20T03:02:00Z (run 3f2a)"."""
    run = f" (run {record['run']})" if record.get("run") else ""
    return f"paused by {record.get('by') or '?'} since {record.get('at') or '?'}{run}"


def find_karpenter(client: ClusterClient, namespace: str = "") -> dict[str, Any] | None:
    """The karpenter controller Deployment (the diagnosis finds it the same way)."""
    from mignurse.diagnose.sources import find_karpenter_deployment

    try:
        return find_karpenter_deployment(client, namespace)
    except ClusterError as exc:
        raise cluster_failed("cannot find the Karpenter Deployment", exc) from None


def _controller_pods(client: ClusterClient, deploy: Mapping[str, Any]) -> list[dict[str, Any]]:
    selector = ((deploy.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    pods: list[dict[str, Any]] = []
    for items, _rv in client.list_pages(PODS, namespace=namespace_of(deploy), label_selector=text):
        pods.extend(items)
    return pods


def verify_rollout(
    ctx: StepContext, namespace: str, name: str, generation: int, want_repair: bool
) -> str | None:
    state: dict[str, Any] = {}

    def rolled_out() -> str | None:
        try:
            state["deploy"] = ctx.client.get(DEPLOYMENTS, name, namespace)
        except ClusterError as exc:
            return _blip(f"cannot read deployment/{namespace}/{name}", exc)
        return rollout_pending(state["deploy"], generation)

    failed = wait_until(ctx, rolled_out, f"the rollout of deployment/{namespace}/{name}")
    if failed:
        return failed + " (until it finishes the old leader can still repair)"
    replicas = int(state["deploy"]["spec"].get("replicas", 1))

    def pods_ready() -> str | None:
        try:
            pods = _controller_pods(ctx.client, state["deploy"])
        except ClusterError as exc:
            return _blip("cannot list the controller pods", exc)
        return pods_pending(pods, want_repair, replicas)

    return wait_until(ctx, pods_ready, "the controller pods' restart")


def _blip(what: str, exc: ClusterError) -> str:
    """A wait's reason for an API failure that may pass; one that will not fails the step."""
    if not transient(exc):
        raise StepFailed(f"{what}: {exc}")
    return f"{what}: {exc}"


def gate_patch(
    deploy: Mapping[str, Any], changes: list[tuple[str, str, str]], annotation: str | None
) -> list[dict[str, Any]]:
    """JSON patch: test each (path, old, new) string, replace it, then set or drop the record."""
    ops: list[dict[str, Any]] = []
    for path, old, new in changes:
        ops.append({"op": "test", "path": path, "value": old})
        ops.append({"op": "replace", "path": path, "value": new})
    annotations = (deploy.get("metadata") or {}).get("annotations")
    if annotation is not None:
        if annotations is None:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        ops.append({"op": "add", "path": _annotation_path(), "value": annotation})
    elif annotations and ANNOTATION_PAUSED in annotations:
        ops.append({"op": "remove", "path": _annotation_path()})
    return ops


_MISSING = object()


def _at_pointer(doc: Any, path: str) -> Any:
    """The value at RFC 6901 JSON pointer `path` in `doc`, or `_MISSING`."""
    for raw in path.split("/")[1:] if path else ():
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict) and key in doc:
            doc = doc[key]
        elif isinstance(doc, list) and key.isdigit() and int(key) < len(doc):
            doc = doc[int(key)]
        else:
            return _MISSING
    return doc


def _a_test_fails(ops: list[dict[str, Any]], doc: Mapping[str, Any]) -> bool:
    """Whether one of the patch's `test` ops would fail on `doc` (RFC 6902 section 4.6)."""
    return any(
        op.get("op") == "test" and _at_pointer(doc, op.get("path", "")) != op.get("value")
        for op in ops
    )


def patch_deployment(
    ctx: StepContext,
    namespace: str,
    name: str,
    build: Callable[[dict[str, Any]], list[dict[str, Any]] | None],
    landed: Callable[[dict[str, Any]], bool],
    change: str,
    prior: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read, build the patch from what is there, announce it (`change`, `prior`: what undo
    needs), send it; a lost answer is settled by reading back whether it `landed`. Returns
    the Deployment after the change."""
    try:
        current = ctx.client.get(DEPLOYMENTS, name, namespace)
    except ClusterError as exc:
        raise cluster_failed(f"cannot read deployment/{namespace}/{name}", exc) from None
    if landed(current):
        return current
    ops = build(current)
    if ops is None:
        return current
    ctx.intend(change, prior)
    try:
        return ctx.client.patch(DEPLOYMENTS, name, ops, namespace=namespace, patch_type="json")
    except Conflict as exc:
        raise StepFailed(
            f"deployment/{namespace}/{name} changed since the plan: {exc}", conflict=True
        ) from None
    except ClusterError as exc:
        failure = exc
    # The request may have landed with its answer lost: the object says which.
    try:
        after = ctx.client.get(DEPLOYMENTS, name, namespace)
    except ClusterError:
        raise cluster_failed(
            f"patch of deployment/{namespace}/{name} failed and it cannot be read back "
            "(the change may or may not be there; run again to settle it)",
            failure,
        ) from None
    if landed(after):
        ctx.log(f"the patch's answer was lost ({failure}); read back: it is in place")
        return after
    # A JSON patch's `test` op refused: the real API server says only "the server rejected
    # our request due to an error in our request" (422, no details: kubernetes v1.34.4
    # staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go, NewGenericServerResponse),
    # so the read-back decides: a value the patch tested is no longer what it tested.
    if _a_test_fails(ops, after) or ("test" in str(failure) and "failed" in str(failure)):
        raise StepFailed(
            f"deployment/{namespace}/{name} changed since the plan (its feature gates "
            "are not what the plan showed); nothing was changed: plan again"
        )
    raise cluster_failed(
        f"patch of deployment/{namespace}/{name} failed; nothing was changed", failure
    )
