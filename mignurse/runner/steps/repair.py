"""Pausing and resuming node auto-repair: `pause-node-repair`, `resume-node-repair`.

Facts in docs/repair.md; the decisions they led to:

- **Who repairs** is read from the node (`detect_backend`): Auto Mode (label
  `eks.amazonaws.com/compute-type=auto`) has no pause at all, so check() refuses and names the
  stopgaps (docs/repair.md "Stopgaps that are not a pause"); a `karpenter.sh/nodepool` node is
  repaired by the karpenter controller; an `eks.amazonaws.com/nodegroup` node by its managed node
  group.
- **Karpenter**: only the `NodeRepair` token of the controller's feature gates changes,
  wherever it is set (env `FEATURE_GATES`, a `--feature-gates` argument, or both), and
  every other token stays byte-identical: rewriting the whole string can flip other gates
  (on v1.1.0 every omitted gate becomes false). The change and the record of the prior
  strings (annotation `mignurse.io/node-repair-paused` on the Deployment, so resume works
  from another laptop and the app can say who paused and when) go in ONE JSON patch whose
  `test` operations pin the exact old values: the Deployment is either paused and
  recorded, or untouched; a concurrent edit fails the patch instead of being overwritten.
  A lost response is resolved by reading the Deployment back (the record names the run).
- The gates are read once at controller start, so the pause is real only when the
  rollout has finished and every running controller pod carries the new value: verify()
  waits for both. Until then the old leader can still repair.
- **Managed node group**: the prior `nodeRepairConfig` is recorded as tags on the EKS
  cluster, one set per node group (tag values hold 256 characters, so the JSON is split
  over numbered tags; the cluster rather than the node group, because moto tags only
  clusters and the record must be testable),
  then `update_nodegroup_config` turns repair off or adds a `NoAction` override for the
  condition and reason at hand. The update id is tracked with `describe_update`; where the
  endpoint lacks it (moto), verify reads `describe_nodegroup` and says so.
- **Resume** restores exactly the recorded prior value and removes the record. Its plan
  first lists the nodes Karpenter would replace at once (their matching condition is
  older than its toleration: the resume hazard) and what the 20% guard does
  to that, so the typed acknowledgement covers it.
- Every write is announced first (`ctx.intend`) with what undo needs (the Deployment, the
  edits and the record; the node group and its prior config), so a run killed just after
  its patch is undone or resumed from the run state. A resumed run whose own patch landed
  before the stop (its record on the Deployment, or the record gone by its own resume)
  goes on to wait for the rollout instead of refusing or planning nothing.
- A wait gives up at once on an answer that will not change (401, 403): only blips are
  waited out.
"""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from mignurse.cluster.client import (
    DEPLOYMENTS,
    NODES,
    PODS,
    ClusterClient,
    ClusterError,
    Conflict,
    NotFound,
)
from mignurse.diagnose.facts import repair_allowance, repair_clock, unhealthy_for_repair
from mignurse.diagnose.inputs import (
    REPAIR_PAUSED_ANNOTATION,
    controller_container_index,
    gate_setting,
)
from mignurse.diagnose.sources import find_karpenter_deployment
from mignurse.model import (
    LABEL_COMPUTE_TYPE,
    LABEL_NODEGROUP,
    LABEL_NODEPOOL,
    Node,
    format_time,
)
from mignurse.runner.step import (
    Action,
    Change,
    Harm,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
)

ANNOTATION_PAUSED = REPAIR_PAUSED_ANNOTATION
TAG_PAUSED = "mignurse.io/node-repair-paused"  # + "/<nodegroup>.0", ".1", … on the cluster
NODE_REPAIR = "NodeRepair"
HELM_SETTING = "settings.featureGates.nodeRepair"
CONTROLLER_CONTAINER = "controller"  # the chart's controller.containerName
KARPENTER_NAMESPACES = ("kube-system", "karpenter")
TAG_VALUE_MAX = 256
POLL_SECONDS = 2.0

# Conditions EKS node monitoring reports and managed node groups act on (EKS API
# NodeRepairConfigOverrides).
MNG_CONDITIONS = (
    "AcceleratedHardwareReady",
    "KernelReady",
    "StorageReady",
    "NetworkingReady",
    "ContainerRuntimeReady",
)

AUTO_MODE_STOPGAPS = (
    "stopgap: cordon the node so nothing new lands on it (runbook cordon-and-collect)",
    "stopgap: collect the node's evidence now, before it is replaced (mignurse collect)",
    "stopgap: fix the condition's cause (e.g. an image whose DCGM works); deleting the "
    "node monitoring agent pod only restarts the clock until the fault returns, and "
    "patching the condition True is undone at the agent's 5-minute heartbeat",
)


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class Backend:
    """Who replaces unhealthy nodes: "karpenter", "nodegroup", "auto" or "unknown"."""

    kind: str
    pool: str  # NodePool or node group name; "" when not known
    why: str  # one line: the evidence


def detect_backend(
    node_labels: Mapping[str, str] | None,
    *,
    karpenter_deployment: bool,
    nodegroup: str = "",
) -> Backend:
    """The repair backend of a node (its labels), or of the cluster when no node is given.

    Auto Mode wins over a nodepool label: Auto Mode nodes carry both (docs/repair.md)."""
    labels = node_labels or {}
    if labels.get(LABEL_COMPUTE_TYPE) == "auto":
        return Backend(
            "auto",
            labels.get(LABEL_NODEPOOL, ""),
            f"the node is labelled {LABEL_COMPUTE_TYPE}=auto (EKS Auto Mode)",
        )
    if pool := labels.get(LABEL_NODEPOOL):
        return Backend("karpenter", pool, f"the node is labelled {LABEL_NODEPOOL}={pool}")
    if group := labels.get(LABEL_NODEGROUP):
        return Backend("nodegroup", group, f"the node is labelled {LABEL_NODEGROUP}={group}")
    if node_labels is not None and not nodegroup:
        return Backend("unknown", "", "the node has no Karpenter, Auto Mode or node group label")
    if nodegroup:
        return Backend("nodegroup", nodegroup, f"node group {nodegroup} was named")
    if karpenter_deployment:
        return Backend("karpenter", "", "a karpenter controller Deployment runs in the cluster")
    return Backend("unknown", "", "no karpenter Deployment and no node group was named")


# --------------------------------------------------------------------------- feature gates


def _gate_name(token: str) -> str:
    return token.partition("=")[0].strip()


def set_gate(gates: str, name: str, value: bool) -> str:
    """`gates` with every `name=` token set to `value` and every other byte unchanged;
    an absent gate is appended as `name=value`."""
    word = "true" if value else "false"
    tokens = gates.split(",")
    found = False
    for i, token in enumerate(tokens):
        if _gate_name(token) != name:
            continue
        found = True
        head, sep, tail = token.partition("=")
        if not sep:  # a bare name: give it a value, keep its spacing
            tokens[i] = f"{token.rstrip()}={word}{token[len(token.rstrip()) :]}"
            continue
        lead = tail[: len(tail) - len(tail.lstrip())]
        trail = tail[len(tail.rstrip()) :]
        tokens[i] = f"{head}={lead}{word}{trail}"
    if found:
        return ",".join(tokens)
    if not gates.strip():
        return f"{name}={word}"
    return f"{gates},{name}={word}"


_FLAG = re.compile(r"^--?feature-gates(=(?P<value>.*))?$", re.DOTALL)


@dataclass(frozen=True)
class GateSetting:
    """One place a controller container sets its feature gates."""

    where: str  # "env FEATURE_GATES" | "arg --feature-gates"
    container: int
    container_name: str
    path: str  # JSON pointer to the string that holds the gates
    prefix: str  # what precedes the gates in that string ("--feature-gates=" or "")
    gates: str

    def render(self, gates: str) -> str:
        return self.prefix + gates

    def describe(self) -> str:
        return f"{self.where} of container {self.container_name}"


def gate_settings(deployment: Mapping[str, Any]) -> list[GateSetting]:
    """Where the controller container sets feature gates: env, args, command.

    Raises StepFailed when the env comes from a ConfigMap or Secret (not ours to edit)."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    index = controller_container_index(containers)
    if index is None:
        raise StepFailed(f"{_deploy_ref(deployment)} has no container {CONTROLLER_CONTAINER!r}")
    ctr = containers[index]
    name = str(ctr.get("name") or index)
    base = f"/spec/template/spec/containers/{index}"
    found: list[GateSetting] = []
    for i, env in enumerate(ctr.get("env") or []):
        if not isinstance(env, dict) or env.get("name") != "FEATURE_GATES":
            continue
        if "value" not in env and env.get("valueFrom"):
            raise StepFailed(
                f"FEATURE_GATES of {_deploy_ref(deployment)} comes from valueFrom; "
                "change NodeRepair where that ConfigMap or Secret is managed"
            )
        found.append(
            GateSetting(
                "env FEATURE_GATES", index, name, f"{base}/env/{i}/value", "", env.get("value", "")
            )
        )
    for field_name in ("command", "args"):
        argv = ctr.get(field_name) or []
        for i, arg in enumerate(argv):
            match = _FLAG.match(str(arg))
            if match is None:
                continue
            if match.group("value") is not None:
                prefix = str(arg)[: len(str(arg)) - len(match.group("value"))]
                path, gates = f"{base}/{field_name}/{i}", match.group("value")
            elif i + 1 < len(argv):
                prefix, path, gates = "", f"{base}/{field_name}/{i + 1}", str(argv[i + 1])
            else:
                continue
            found.append(GateSetting("arg --feature-gates", index, name, path, prefix, gates))
    return found


def effective_repair(settings: list[GateSetting]) -> bool:
    """Whether the controller runs node repair: a flag replaces the env (the env is only
    the flag's default); an absent gate is false in every version (kubernetes-sigs/karpenter
    pkg/operator/options/options.go, v1.1.0 and v1.14.1)."""
    flags = [s for s in settings if s.where.startswith("arg")]
    chosen = flags[-1:] or [s for s in settings if s.where.startswith("env")][-1:]
    if not chosen:
        return False
    return bool(gate_setting(chosen[0].gates))


def pod_repair_enabled(pod: Mapping[str, Any]) -> bool:
    """The NodeRepair value a running controller pod started with."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return effective_repair(
        gate_settings({"spec": {"template": {"spec": {"containers": containers}}}})
    )


# --------------------------------------------------------------------------- management


def management_notes(deployment: Mapping[str, Any], node_repair: bool) -> list[str]:
    """Warnings when Helm or GitOps owns the Deployment: their next render puts the chart's
    value back, so the setting to change there is printed, with the value the run leaves
    (`node_repair`: false for a pause, the restored value for a resume)."""
    value = "true" if node_repair else "false"
    meta = deployment.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    ref = _deploy_ref(deployment)
    notes: list[str] = []
    release = annotations.get("meta.helm.sh/release-name")
    if labels.get("app.kubernetes.io/managed-by") == "Helm" or release:
        ns = annotations.get("meta.helm.sh/release-namespace") or _namespace(deployment)
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


def _restored_repair(settings: list[GateSetting], edits: list[dict[str, Any]]) -> bool:
    """Whether node repair runs once the recorded prior gate strings are back."""
    prior = {(e.get("where"), e.get("container")): e.get("prior") for e in edits}
    restored = [
        replace(s, gates=str(prior[(s.where, s.container_name)] or ""))
        if prior.get((s.where, s.container_name)) is not None
        else s
        for s in settings
    ]
    return effective_repair(restored)


# --------------------------------------------------------------------------- rollout


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


# --------------------------------------------------------------------------- resume hazard


@dataclass(frozen=True)
class PoolRisk:
    pool: str  # "" for nodes outside any NodePool (the cluster-wide guard)
    nodes: int
    unhealthy: list[str]  # matching a repair policy now (what the guard counts)
    due: list[tuple[str, str]]  # (node, "Type=Status since T") past their toleration
    allowance: int

    @property
    def blocked(self) -> bool:
        return len(self.unhealthy) > self.allowance

    def describe(self) -> str:
        where = f"NodePool {self.pool}" if self.pool else "nodes outside any NodePool"
        names = ", ".join(f"{n} ({why})" for n, why in self.due)
        if self.blocked:
            return (
                f"{where}: {len(self.due)} node(s) past their toleration ({names}), but "
                f"{len(self.unhealthy)} of {self.nodes} are unhealthy, more than the 20% "
                f"guard's {self.allowance}: repairs stay blocked (NodeRepairBlocked) until "
                "fewer are unhealthy"
            )
        return (
            f"{where}: {len(self.due)} node(s) replaced at once: {names} "
            f"({len(self.unhealthy)} unhealthy of {self.nodes}, the 20% guard allows "
            f"{self.allowance})"
        )


def resume_risk(nodes: list[Node], now: datetime) -> list[PoolRisk]:
    """Per NodePool: which nodes Karpenter replaces as soon as repair runs again.

    Only pools with a node past its toleration are listed. Pure: `now` is passed in."""
    by_pool: dict[str, list[Node]] = {}
    for node in nodes:
        if node.pool_kind == "nodegroup" or node.deleting is not None:
            continue
        by_pool.setdefault(node.labels.get(LABEL_NODEPOOL, ""), []).append(node)
    risks: list[PoolRisk] = []
    for pool, members in sorted(by_pool.items()):
        due: list[tuple[str, str]] = []
        for node in members:
            clock = repair_clock(node)
            if clock is not None and clock.deadline <= now:
                cond = clock.condition
                since = format_time(cond.last_transition) or "?"
                due.append((node.name, f"{cond.type}={cond.status} since {since}"))
        if not due:
            continue
        risks.append(
            PoolRisk(
                pool=pool,
                nodes=len(members),
                unhealthy=sorted(n.name for n in members if unhealthy_for_repair(n)),
                due=sorted(due),
                allowance=repair_allowance(len(members)),
            )
        )
    return risks


# --------------------------------------------------------------------------- helpers


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _deploy_ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"deployment/{meta.get('namespace', '?')}/{meta.get('name', '?')}"


def _pointer_key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _annotation_path() -> str:
    return f"/metadata/annotations/{_pointer_key(ANNOTATION_PAUSED)}"


def _who(ctx: StepContext) -> str:
    if ctx.holder:
        return ctx.holder
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return "unknown"


def _cluster_failed(what: str, exc: ClusterError) -> StepFailed:
    return StepFailed(f"{what}: {exc}", retryable=transient(exc))


def pause_record(deployment: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parsed `mignurse.io/node-repair-paused` record, or None (absent or unreadable)."""
    raw = ((deployment.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PAUSED)
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("settings"), list) else None


def describe_record(record: Mapping[str, Any]) -> str:
    """ "paused by alice@laptop since 2026-11-20T03:02:00Z (run 3f2a)"."""
    run = f" (run {record['run']})" if record.get("run") else ""
    return f"paused by {record.get('by') or '?'} since {record.get('at') or '?'}{run}"


def find_karpenter(client: ClusterClient, namespace: str = "") -> dict[str, Any] | None:
    """The karpenter controller Deployment (the diagnosis finds it the same way)."""
    try:
        return find_karpenter_deployment(client, namespace)
    except ClusterError as exc:
        raise _cluster_failed("cannot find the Karpenter Deployment", exc) from None


def _get_node(ctx: StepContext) -> dict[str, Any] | None:
    if not ctx.node:
        return None
    try:
        return ctx.client.get(NODES, ctx.node)
    except NotFound:
        raise StepFailed(f"node {ctx.node} does not exist") from None
    except ClusterError as exc:
        raise _cluster_failed(f"cannot read node {ctx.node}", exc) from None


def _backend(ctx: StepContext) -> tuple[Backend, dict[str, Any] | None, dict[str, Any] | None]:
    """(backend, node, karpenter Deployment) for this run's node or cluster."""
    node = _get_node(ctx)
    labels = (node or {}).get("metadata", {}).get("labels") if node else None
    deploy = find_karpenter(ctx.client, str(ctx.param("namespace") or ""))
    backend = detect_backend(
        labels,
        karpenter_deployment=deploy is not None,
        nodegroup=str(ctx.param("nodegroup") or ""),
    )
    return backend, node, deploy


def _wait(ctx: StepContext, probe: Callable[[], str | None], what: str) -> str | None:
    """Poll `probe` (None = done) until the step's deadline; the last reason if it never is."""
    while True:
        ctx.check_cancel()
        reason = probe()
        if reason is None:
            return None
        if ctx.time_left() <= 0:
            return f"{what} not done after {int(ctx.timeout)} s: {reason}"
        ctx.log(f"waiting: {reason}")
        ctx.sleep(min(POLL_SECONDS, max(0.1, ctx.time_left())))


def _controller_pods(client: ClusterClient, deploy: Mapping[str, Any]) -> list[dict[str, Any]]:
    selector = ((deploy.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    pods: list[dict[str, Any]] = []
    for items, _rv in client.list_pages(PODS, namespace=_namespace(deploy), label_selector=text):
        pods.extend(items)
    return pods


def _verify_rollout(
    ctx: StepContext, namespace: str, name: str, generation: int, want_repair: bool
) -> str | None:
    state: dict[str, Any] = {}

    def rolled_out() -> str | None:
        try:
            state["deploy"] = ctx.client.get(DEPLOYMENTS, name, namespace)
        except ClusterError as exc:
            return _blip(f"cannot read deployment/{namespace}/{name}", exc)
        return rollout_pending(state["deploy"], generation)

    failed = _wait(ctx, rolled_out, f"the rollout of deployment/{namespace}/{name}")
    if failed:
        return failed + " (until it finishes the old leader can still repair)"
    replicas = int(state["deploy"]["spec"].get("replicas", 1))

    def pods_ready() -> str | None:
        try:
            pods = _controller_pods(ctx.client, state["deploy"])
        except ClusterError as exc:
            return _blip("cannot list the controller pods", exc)
        return pods_pending(pods, want_repair, replicas)

    return _wait(ctx, pods_ready, "the controller pods' restart")


def _blip(what: str, exc: ClusterError) -> str:
    """A wait's reason for an API failure that may pass; one that will not fails the step."""
    if not transient(exc):
        raise StepFailed(f"{what}: {exc}")
    return f"{what}: {exc}"


def _gate_patch(
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


def _patch_deployment(
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
        raise _cluster_failed(f"cannot read deployment/{namespace}/{name}", exc) from None
    if landed(current):
        return current
    ops = build(current)
    if ops is None:
        return current
    ctx.intend(change, prior)
    try:
        return ctx.client.patch(DEPLOYMENTS, name, ops, namespace=namespace, patch_type="json")
    except Conflict as exc:
        raise StepFailed(f"deployment/{namespace}/{name} changed since the plan: {exc}") from None
    except ClusterError as exc:
        failure = exc
    # The request may have landed with its answer lost: the object says which.
    try:
        after = ctx.client.get(DEPLOYMENTS, name, namespace)
    except ClusterError:
        raise _cluster_failed(
            f"patch of deployment/{namespace}/{name} failed and it cannot be read back "
            "(the change may or may not be there; run again to settle it)",
            failure,
        ) from None
    if landed(after):
        ctx.log(f"the patch's answer was lost ({failure}); read back: it is in place")
        return after
    if "test" in str(failure) and "failed" in str(failure):
        raise StepFailed(
            f"deployment/{namespace}/{name} changed since the plan (its feature gates "
            "are not what the plan showed); nothing was changed: plan again"
        )
    raise _cluster_failed(
        f"patch of deployment/{namespace}/{name} failed; nothing was changed", failure
    )


# --------------------------------------------------------------------------- EKS helpers


def _eks(ctx: StepContext) -> Any:
    if ctx.aws is None:
        raise StepFailed(
            "no AWS access configured: managed node groups are paused through the EKS API "
            "(set AWS_PROFILE or credentials)"
        )
    return ctx.aws("eks")


def _eks_cluster(ctx: StepContext, deploy: Mapping[str, Any] | None) -> str:
    """The EKS cluster name: --param cluster, else the context's cluster (an EKS ARN ends
    in cluster/NAME), else Karpenter's CLUSTER_NAME."""
    if name := ctx.param("cluster"):
        return str(name)
    if deploy is not None:
        ctrs = deploy["spec"]["template"]["spec"].get("containers") or []
        for ctr in ctrs:
            for env in ctr.get("env") or []:
                if env.get("name") == "CLUSTER_NAME" and env.get("value"):
                    return str(env["value"])
    cluster = ctx.client.info.cluster
    return cluster.rsplit("cluster/", 1)[-1] if "cluster/" in cluster else cluster


def aws_step_failed(what: str, exc: Exception) -> StepFailed:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response["Error"]
        code = str(err.get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        return StepFailed(
            f"{what}: {code}: {err.get('Message') or ''}".rstrip(": "),
            retryable=status >= 500 or "Throttl" in code,
        )
    return StepFailed(f"{what}: {' '.join(str(exc).split())}", retryable=True)


def _describe_nodegroup(eks: Any, cluster: str, group: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)[
            "nodegroup"
        ]
    except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
        raise aws_step_failed(
            f"cannot describe node group {group} of cluster {cluster}", exc
        ) from None
    return result


def _repair_config(nodegroup: Mapping[str, Any]) -> dict[str, Any]:
    """The node group's nodeRepairConfig; repair is off (enabled false) when absent."""
    config = nodegroup.get("nodeRepairConfig")
    return dict(config) if isinstance(config, dict) else {"enabled": False}


def split_tag(value: str, group: str) -> dict[str, str]:
    """A long string as numbered tags `TAG_PAUSED/<group>.0`, `.1`, … of ≤256 characters."""
    return {
        f"{TAG_PAUSED}/{group}.{i}": value[at : at + TAG_VALUE_MAX]
        for i, at in enumerate(range(0, max(1, len(value)), TAG_VALUE_MAX))
    }


def _record_keys(tags: Mapping[str, str], group: str) -> list[str]:
    prefix = f"{TAG_PAUSED}/{group}."
    return [k for k in tags if k.startswith(prefix) and k[len(prefix) :].isdigit()]


def joined_tag(tags: Mapping[str, str], group: str) -> str:
    return "".join(
        tags[k] for k in sorted(_record_keys(tags, group), key=lambda k: int(k.rsplit(".", 1)[1]))
    )


def _cluster_tags(eks: Any, cluster: str) -> tuple[str, dict[str, str]]:
    """The EKS cluster's ARN and tags: where node group pause records live (one set of tags
    per node group; a cluster is always taggable, and its tags survive the node group's
    updates)."""
    try:
        found = eks.describe_cluster(name=cluster)["cluster"]
    except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
        raise aws_step_failed(f"cannot describe EKS cluster {cluster}", exc) from None
    return str(found.get("arn") or ""), dict(found.get("tags") or {})


def nodegroup_record(eks: Any, cluster: str, group: str) -> dict[str, Any] | None:
    _arn, tags = _cluster_tags(eks, cluster)
    raw = joined_tag(tags, group)
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "prior" in record else None


def _write_record(eks: Any, cluster: str, group: str, record: Mapping[str, Any]) -> None:
    arn, tags = _cluster_tags(eks, cluster)
    _drop_record(eks, cluster, group, (arn, tags))
    try:
        eks.tag_resource(
            resourceArn=arn, tags=split_tag(json.dumps(record, separators=(",", ":")), group)
        )
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(
            f"cannot record the prior config of node group {group} on cluster {cluster}", exc
        ) from None


def _drop_record(
    eks: Any, cluster: str, group: str, known: tuple[str, dict[str, str]] | None = None
) -> None:
    arn, tags = known or _cluster_tags(eks, cluster)
    keys = _record_keys(tags, group)
    if not keys:
        return
    try:
        eks.untag_resource(resourceArn=arn, tagKeys=keys)
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(
            f"cannot remove the pause record of node group {group} from cluster {cluster}", exc
        ) from None


def override_config(
    prior: Mapping[str, Any], condition: str, reason: str, wait_mins: int
) -> dict[str, Any]:
    """`prior` plus a NoAction override for (condition, reason), replacing one for the same
    pair; all four override fields are required by the API (EKS API NodeRepairConfigOverrides)."""
    config = json.loads(json.dumps(dict(prior)))
    overrides = [
        o
        for o in config.get("nodeRepairConfigOverrides") or []
        if (o.get("nodeMonitoringCondition"), o.get("nodeUnhealthyReason")) != (condition, reason)
    ]
    overrides.append(
        {
            "nodeMonitoringCondition": condition,
            "nodeUnhealthyReason": reason,
            "minRepairWaitTimeMins": max(1, wait_mins),
            "repairAction": "NoAction",
        }
    )
    config["nodeRepairConfigOverrides"] = overrides
    return config


def _condition_at_hand(ctx: StepContext, node: Mapping[str, Any] | None) -> tuple[str, str]:
    condition = str(ctx.param("condition") or "")
    reason = str(ctx.param("reason") or "")
    if condition and reason:
        return condition, reason
    for cond in ((node or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") in MNG_CONDITIONS and cond.get("status") == "False":
            return condition or str(cond["type"]), reason or str(cond.get("reason") or "")
    return condition, reason


def _update_config(
    ctx: StepContext, eks: Any, cluster: str, group: str, config: Mapping[str, Any]
) -> str:
    """update_nodegroup_config; returns the update id ("" when the answer was lost but the
    config is in place)."""
    try:
        response = eks.update_nodegroup_config(
            clusterName=cluster, nodegroupName=group, nodeRepairConfig=dict(config)
        )
    except Exception as exc:  # noqa: BLE001 - settled by reading the node group back
        now = _repair_config(_describe_nodegroup(eks, cluster, group))
        if _same_config(now, config):
            ctx.log(f"update_nodegroup_config's answer was lost ({exc}); read back: in place")
            return ""
        raise aws_step_failed(f"EKS refused update_nodegroup_config for {group}", exc) from None
    return str((response.get("update") or {}).get("id") or "")


def _same_config(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def norm(c: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in c.items() if v not in (None, [], {})}
        out["enabled"] = bool(c.get("enabled"))
        return out

    return norm(a) == norm(b)


def _verify_nodegroup(
    ctx: StepContext, cluster: str, group: str, update_id: str, want: Mapping[str, Any]
) -> str | None:
    eks = _eks(ctx)
    if update_id:
        try:
            update = eks.describe_update(name=cluster, nodegroupName=group, updateId=update_id)
        except Exception as exc:  # noqa: BLE001 - moto and old endpoints lack DescribeUpdate
            ctx.log(
                f"describe_update is not available here ({' '.join(str(exc).split())[:120]}); "
                "verifying through describe_nodegroup instead"
            )
        else:
            status = str((update.get("update") or {}).get("status") or "")

            def finished() -> str | None:
                nonlocal status
                if status in ("Successful",):
                    return None
                if status in ("Failed", "Cancelled"):
                    return f"update {update_id} ended {status}"
                status = str(
                    eks.describe_update(name=cluster, nodegroupName=group, updateId=update_id)[
                        "update"
                    ]["status"]
                )
                return f"update {update_id} is {status}" if status != "Successful" else None

            failed = _wait(ctx, finished, f"update {update_id} of node group {group}")
            if failed:
                return failed
    now = _repair_config(_describe_nodegroup(eks, cluster, group))
    if not _same_config(now, want):
        return (
            f"node group {group} reports nodeRepairConfig {json.dumps(now)}, "
            f"not {json.dumps(dict(want))}"
        )
    return None


# --------------------------------------------------------------------------- pause


@action("pause-node-repair")
class PauseNodeRepair(Action):
    """Stop the repair backend of the node (or cluster) from replacing unhealthy nodes."""

    title = "Pause node auto-repair"
    harm = Harm.HIGH
    can_undo = True
    retries = 1  # apply re-reads and settles a lost answer: safe to run again
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        backend, _node, deploy = _backend(ctx)
        if backend.kind == "auto":
            return (
                "EKS Auto Mode repairs its nodes itself: repair is built in, always on with "
                "Karpenter's defaults and cannot be configured or paused ("
                + backend.why
                + "); "
                + "; ".join(AUTO_MODE_STOPGAPS)
            )
        if backend.kind == "unknown":
            return (
                f"cannot tell who repairs nodes here: {backend.why}; "
                "pass --node or --param nodegroup=NAME"
            )
        if backend.kind == "karpenter" and deploy is None:
            return (
                f"{backend.why}, but no karpenter Deployment was found in "
                f"{' or '.join(KARPENTER_NAMESPACES)}: pass --param namespace=NS"
            )
        if backend.kind == "karpenter" and deploy is not None:
            settings = gate_settings(deploy)
            if len({s.where for s in settings}) < len(settings):
                return (
                    f"{_deploy_ref(deploy)} sets FEATURE_GATES twice in one place; fix it by hand"
                )
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        backend, node, deploy = _backend(ctx)
        if backend.kind == "karpenter" and deploy is not None:
            return self._plan_karpenter(ctx, deploy, backend)
        if backend.kind == "nodegroup":
            return self._plan_nodegroup(ctx, node, deploy, backend)
        return StepPlan(notes=[backend.why], nothing_to_do=True)

    # -- Karpenter

    def _plan_karpenter(
        self, ctx: StepContext, deploy: dict[str, Any], backend: Backend
    ) -> StepPlan:
        ref = _deploy_ref(deploy)
        settings = gate_settings(deploy)
        notes = [backend.why, *management_notes(deploy, node_repair=False)]
        record = pause_record(deploy)
        if (
            not effective_repair(settings)
            and record
            and ctx.run_id
            and record.get("run") == ctx.run_id
        ):
            notes.insert(0, f"paused by this run before it stopped ({describe_record(record)})")
            return StepPlan(
                notes=[*notes, "waits for the rollout to finish"],
                data={
                    "backend": "karpenter",
                    "namespace": _namespace(deploy),
                    "name": deploy["metadata"]["name"],
                    "edits": ctx.prior.get("edits") or record["settings"],
                },
            )
        if not effective_repair(settings):
            if record:
                notes.insert(0, f"repair is already off: {describe_record(record)}")
            else:
                notes.insert(0, f"repair is already off in {ref} (NodeRepair is not true)")
            return StepPlan(notes=notes, nothing_to_do=True, data={"backend": "karpenter"})
        if record:
            notes.append(
                f"{ref} carries an earlier pause record ({describe_record(record)}) though "
                "repair is on again (a helm upgrade or sync?); it is replaced"
            )
        changes = []
        edits = []
        for s in settings:
            paused = set_gate(s.gates, NODE_REPAIR, False)
            if paused == s.gates:
                continue
            changes.append(Change(ref, f"{s.describe()} token {NODE_REPAIR}", s.gates, paused))
            edits.append(
                {
                    "where": s.where,
                    "container": s.container_name,
                    "path": s.path,
                    "prior": s.gates,
                    "paused": paused,
                    "prefix": s.prefix,
                }
            )
        notes.append(
            "the controller reads its gates only at start: the pause holds once the rollout "
            "has replaced every controller pod; until then the old leader can still repair"
        )
        changes.append(
            Change(ref, f"annotation {ANNOTATION_PAUSED}", None, "(prior values, who, when)")
        )
        return StepPlan(
            changes=changes,
            notes=notes,
            data={
                "backend": "karpenter",
                "namespace": _namespace(deploy),
                "name": deploy["metadata"]["name"],
                "edits": edits,
            },
        )

    def _apply_karpenter(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        ns, name, edits = plan.data["namespace"], plan.data["name"], plan.data["edits"]
        for note in plan.notes:
            if "managed by" in note:
                ctx.log(f"warning: {note}")
        record = {
            "settings": [
                {k: e[k] for k in ("where", "container", "prior", "paused")} for e in edits
            ],
            "by": _who(ctx),
            "at": format_time(ctx.client.server_now()),
            "run": ctx.run_id,
        }
        text = json.dumps(record, separators=(",", ":"), sort_keys=True)

        def landed(deploy: dict[str, Any]) -> bool:
            found = pause_record(deploy)
            return bool(found and found.get("run") == ctx.run_id and ctx.run_id) and all(
                s.gates == e["paused"] for s, e in _match(gate_settings(deploy), edits)
            )

        def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
            pairs = _match(gate_settings(deploy), edits)
            for s, e in pairs:
                if s.gates != e["prior"]:
                    raise StepFailed(
                        f"{_deploy_ref(deploy)} {s.describe()} changed since the plan "
                        f"({e['prior']!r} → {s.gates!r}); nothing was changed: plan again"
                    )
            return _gate_patch(
                deploy, [(s.path, s.render(s.gates), s.render(e["paused"])) for s, e in pairs], text
            )

        undo_needs = {
            "backend": "karpenter",
            "namespace": ns,
            "name": name,
            "edits": edits,
            "record": record,
        }
        after = _patch_deployment(
            ctx, ns, name, build, landed, f"NodeRepair=false on deployment/{ns}/{name}", undo_needs
        )
        ctx.log(f"deployment/{ns}/{name}: NodeRepair=false, rolling out")
        return {
            "backend": "karpenter",
            "namespace": ns,
            "name": name,
            "generation": int(after["metadata"].get("generation", 1)),
            "edits": edits,
            "record": ctx.prior.get("record", record),
        }

    # -- managed node group

    def _plan_nodegroup(
        self,
        ctx: StepContext,
        node: dict[str, Any] | None,
        deploy: dict[str, Any] | None,
        backend: Backend,
    ) -> StepPlan:
        eks = _eks(ctx)
        cluster = _eks_cluster(ctx, deploy)
        group = backend.pool
        nodegroup = _describe_nodegroup(eks, cluster, group)
        prior = _repair_config(nodegroup)
        ref = f"nodegroup/{cluster}/{group}"
        mode = str(ctx.param("mode") or "off")
        notes = [backend.why]
        if mode not in ("off", "override"):
            raise StepFailed(f"mode {mode!r} is not off or override")
        ours = nodegroup_record(eks, cluster, group) if not prior.get("enabled") else None
        if ours and ctx.run_id and ours.get("run") == ctx.run_id:
            return StepPlan(
                notes=[f"node group {group} was paused by this run before it stopped", *notes],
                data={
                    "backend": "nodegroup",
                    "cluster": cluster,
                    "nodegroup": group,
                    "arn": nodegroup.get("nodegroupArn", ""),
                    "prior": ours["prior"],
                    "wanted": prior,
                    "mode": ours.get("mode", mode),
                },
            )
        if not prior.get("enabled"):
            return StepPlan(
                notes=[f"repair is already off for node group {group}", *notes],
                nothing_to_do=True,
                data={"backend": "nodegroup"},
            )
        if mode == "override":
            condition, reason = _condition_at_hand(ctx, node)
            if not (condition and reason):
                raise StepFailed(
                    "mode=override needs the condition and reason at hand: pass --param "
                    "condition=AcceleratedHardwareReady --param reason=DCGMError"
                )
            wanted = override_config(prior, condition, reason, int(ctx.param("wait_mins", 10)))
            field = f"nodeRepairConfig override {condition}/{reason}"
            notes.append(
                f"only {condition}={reason} is left alone (NoAction); other faults are still "
                "repaired"
            )
        else:
            wanted = {**prior, "enabled": False}
            field = "nodeRepairConfig.enabled"
        notes.append(
            "managed node groups repair by reason and stop above their unhealthy thresholds "
            "on their own (docs/repair.md)"
        )
        return StepPlan(
            changes=[
                Change(
                    ref,
                    field,
                    prior if mode == "override" else True,
                    wanted if mode == "override" else False,
                ),
                Change(
                    f"cluster/{cluster}",
                    f"tags {TAG_PAUSED}/{group}.*",
                    None,
                    "(prior nodeRepairConfig, who, when)",
                ),
            ],
            notes=notes,
            data={
                "backend": "nodegroup",
                "cluster": cluster,
                "nodegroup": group,
                "arn": nodegroup.get("nodegroupArn", ""),
                "prior": prior,
                "wanted": wanted,
                "mode": mode,
            },
        )

    def _apply_nodegroup(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        eks = _eks(ctx)
        data = plan.data
        cluster, group = data["cluster"], data["nodegroup"]
        current = _describe_nodegroup(eks, cluster, group)
        config_now = _repair_config(current)
        if not _same_config(config_now, data["prior"]):
            found = nodegroup_record(eks, cluster, group) or {}
            if _same_config(config_now, data["wanted"]) and found.get("run") == ctx.run_id:
                return self._nodegroup_applied(data, "", found)
            raise StepFailed(
                f"node group {group}'s nodeRepairConfig changed since the plan "
                f"({json.dumps(config_now)}); nothing was changed: plan again"
            )
        record = {
            "prior": data["prior"],
            "mode": data["mode"],
            "by": _who(ctx),
            "at": format_time(ctx.client.server_now()),
            "run": ctx.run_id,
        }
        undo_needs = {
            "backend": "nodegroup",
            "cluster": cluster,
            "nodegroup": group,
            "arn": data["arn"],
            "prior": data["prior"],
            "wanted": data["wanted"],
        }
        ctx.intend(f"tag cluster {cluster} with the pause record of node group {group}", undo_needs)
        _write_record(eks, cluster, group, record)
        try:
            ctx.intend(f"update_nodegroup_config of node group {group}: repair {data['mode']}")
            update_id = _update_config(ctx, eks, cluster, group, data["wanted"])
        except StepFailed:
            # Nothing changed: no record may claim a pause (best effort; resume checks it).
            try:
                _drop_record(eks, cluster, group)
            except StepFailed as drop:
                ctx.log(str(drop))
            raise
        ctx.log(
            f"node group {group}: nodeRepairConfig updated"
            + (f" (update {update_id})" if update_id else "")
        )
        return self._nodegroup_applied(data, update_id, record)

    @staticmethod
    def _nodegroup_applied(data: Mapping[str, Any], update_id: str, record: Any) -> dict[str, Any]:
        return {
            "backend": "nodegroup",
            "cluster": data["cluster"],
            "nodegroup": data["nodegroup"],
            "arn": data["arn"],
            "update": update_id,
            "prior": data["prior"],
            "wanted": data["wanted"],
            "record": record,
        }

    # -- phases

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        if plan.data.get("backend") == "karpenter":
            return self._apply_karpenter(ctx, plan)
        if plan.data.get("backend") == "nodegroup":
            return self._apply_nodegroup(ctx, plan)
        raise StepFailed("nothing to pause")

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("backend") == "karpenter":
            return _verify_rollout(
                ctx, applied["namespace"], applied["name"], applied["generation"], False
            )
        if applied.get("backend") == "nodegroup":
            return _verify_nodegroup(
                ctx, applied["cluster"], applied["nodegroup"], applied["update"], applied["wanted"]
            )
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        if applied.get("backend") == "karpenter":
            _restore_karpenter(ctx, applied["namespace"], applied["name"], applied["edits"])
        elif applied.get("backend") == "nodegroup":
            _restore_nodegroup(ctx, applied["cluster"], applied["nodegroup"], applied["prior"])

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("backend") == "karpenter":
            return _karpenter_left(ctx, applied, "prior", paused=False)
        if applied.get("backend") == "nodegroup":
            return _nodegroup_left(ctx, applied, applied["prior"], paused=False)
        return None


def _karpenter_left(
    ctx: StepContext, applied: Mapping[str, Any], which: str, *, paused: bool
) -> str | None:
    """What differs from the gates `which` ("prior" or "paused") and the record's presence."""
    ns, name = applied["namespace"], applied["name"]
    try:
        deploy = ctx.client.get(DEPLOYMENTS, name, ns)
    except ClusterError as exc:
        raise _cluster_failed(f"cannot read deployment/{ns}/{name}", exc) from None
    wrong = [
        f"{s.describe()} is {s.gates!r}, not {e[which]!r}"
        for s, e in _match(gate_settings(deploy), applied["edits"])
        if s.gates != e[which]
    ]
    record = pause_record(deploy)
    if paused and record is None:
        wrong.append(f"the {ANNOTATION_PAUSED} record is gone")
    if not paused and record is not None and record.get("run") == ctx.run_id:
        wrong.append(f"the {ANNOTATION_PAUSED} record of this run is still there")
    return f"deployment/{ns}/{name}: " + "; ".join(wrong) if wrong else None


def _nodegroup_left(
    ctx: StepContext, applied: Mapping[str, Any], want: Mapping[str, Any], *, paused: bool
) -> str | None:
    eks = _eks(ctx)
    cluster, group = applied["cluster"], applied["nodegroup"]
    now = _repair_config(_describe_nodegroup(eks, cluster, group))
    wrong = []
    if not _same_config(now, want):
        wrong.append(f"nodeRepairConfig is {json.dumps(now)}, not {json.dumps(dict(want))}")
    record = nodegroup_record(eks, cluster, group)
    if paused and record is None:
        wrong.append("its pause record is gone")
    if not paused and record is not None and record.get("run") == ctx.run_id:
        wrong.append("the pause record of this run is still there")
    return f"node group {group}: " + "; ".join(wrong) if wrong else None


def _match(
    settings: list[GateSetting], edits: list[dict[str, Any]]
) -> list[tuple[GateSetting, dict[str, Any]]]:
    """Pair each recorded edit with the setting now at the same place (where + container)."""
    pairs = []
    for edit in edits:
        same = [
            s for s in settings if (s.where, s.container_name) == (edit["where"], edit["container"])
        ]
        if len(same) != 1:
            raise StepFailed(
                f"{edit['where']} of container {edit['container']} is no longer set once "
                "in the Deployment; restore it by hand to "
                f"{edit.get('prior')!r}"
            )
        pairs.append((same[0], edit))
    return pairs


def _restore_karpenter(
    ctx: StepContext,
    namespace: str,
    name: str,
    edits: list[dict[str, Any]],
    prior: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Put every recorded prior string back and drop the record; safe to run twice."""

    def landed(deploy: dict[str, Any]) -> bool:
        return pause_record(deploy) is None and all(
            s.gates == e["prior"] for s, e in _match(gate_settings(deploy), edits)
        )

    def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
        pairs = _match(gate_settings(deploy), edits)
        return _gate_patch(
            deploy,
            [
                (s.path, s.render(s.gates), s.render(e["prior"]))
                for s, e in pairs
                if s.gates != e["prior"]
            ],
            None,
        )

    after = _patch_deployment(
        ctx,
        namespace,
        name,
        build,
        landed,
        f"restore the feature gates of deployment/{namespace}/{name}",
        prior,
    )
    ctx.log(f"deployment/{namespace}/{name}: feature gates restored, rolling out")
    return after


def _restore_nodegroup(
    ctx: StepContext,
    cluster: str,
    group: str,
    prior: Mapping[str, Any],
    undo_needs: Mapping[str, Any] | None = None,
) -> str:
    eks = _eks(ctx)
    current = _describe_nodegroup(eks, cluster, group)
    update_id = ""
    if not _same_config(_repair_config(current), prior):
        ctx.intend(f"restore nodeRepairConfig of node group {group}", undo_needs)
        update_id = _update_config(ctx, eks, cluster, group, prior)
    if nodegroup_record(eks, cluster, group) is not None:
        ctx.intend(f"remove the pause record of node group {group}", undo_needs)
    _drop_record(eks, cluster, group)
    ctx.log(f"node group {group}: nodeRepairConfig restored")
    return update_id


# --------------------------------------------------------------------------- resume


@action("resume-node-repair")
class ResumeNodeRepair(Action):
    """Put back exactly the repair setting a pause recorded, after showing who is at risk."""

    title = "Resume node auto-repair"
    harm = Harm.HIGH
    can_undo = True
    retries = 1
    timeout = 600.0

    def check(self, ctx: StepContext) -> str | None:
        backend, _node, deploy = _backend(ctx)
        if backend.kind == "auto":
            return "EKS Auto Mode repair cannot be paused, so there is nothing to resume"
        if backend.kind == "karpenter":
            if deploy is None:
                return "no karpenter Deployment was found: pass --param namespace=NS"
            if pause_record(deploy) is None and not ctx.prior.get("record"):
                return (
                    f"{_deploy_ref(deploy)} has no {ANNOTATION_PAUSED} record: repair was not "
                    "paused by mignurse, so there is no prior value to restore"
                )
        if backend.kind == "unknown":
            return f"cannot tell who repairs nodes here: {backend.why}"
        return None

    def plan(self, ctx: StepContext) -> StepPlan:
        backend, _node, deploy = _backend(ctx)
        if backend.kind == "nodegroup":
            return self._plan_nodegroup(ctx, deploy, backend)
        assert deploy is not None
        ref = _deploy_ref(deploy)
        record = pause_record(deploy)
        if record is None and ctx.prior.get("record"):
            return StepPlan(
                notes=[
                    "restored by this run before it stopped "
                    f"({describe_record(ctx.prior['record'])}); waits for the rollout"
                ],
                data={
                    k: ctx.prior[k]
                    for k in ("backend", "namespace", "name", "edits", "record")
                    if k in ctx.prior
                },
            )
        assert record is not None
        settings = gate_settings(deploy)
        edits = []
        changes = []
        drifted: list[str] = []
        for entry in record["settings"]:
            here = [
                s
                for s in settings
                if (s.where, s.container_name) == (entry.get("where"), entry.get("container"))
            ]
            current = here[0].gates if here else None
            if current is not None and current != entry.get("paused"):
                drifted.append(
                    f"{entry['where']} was changed after the pause ({entry.get('paused')!r} → "
                    f"{current!r}); it is restored to the recorded value anyway"
                )
            if current != entry["prior"]:
                changes.append(
                    Change(
                        ref,
                        f"{entry['where']} of container {entry['container']}",
                        current,
                        entry["prior"],
                    )
                )
            edits.append({k: entry.get(k) for k in ("where", "container", "prior", "paused")})
        changes.append(
            Change(ref, f"annotation {ANNOTATION_PAUSED}", describe_record(record), None)
        )
        notes = [describe_record(record), *drifted]
        risks = self._risks(ctx)
        notes += [r.describe() for r in risks] or [
            "no node is past its repair toleration: nothing is replaced at once"
        ]
        notes += management_notes(deploy, node_repair=_restored_repair(settings, edits))
        return StepPlan(
            changes=changes,
            notes=notes,
            data={
                "backend": "karpenter",
                "namespace": _namespace(deploy),
                "name": deploy["metadata"]["name"],
                "edits": edits,
                "record": record,
                "at_risk": [
                    {
                        "pool": r.pool,
                        "due": [n for n, _ in r.due],
                        "blocked": r.blocked,
                        "unhealthy": len(r.unhealthy),
                        "nodes": r.nodes,
                        "allowance": r.allowance,
                    }
                    for r in risks
                ],
            },
        )

    @staticmethod
    def _risks(ctx: StepContext) -> list[PoolRisk]:
        try:
            nodes = ctx.client.list(NODES, Node.from_api).items
        except ClusterError as exc:
            raise _cluster_failed(
                "cannot list nodes to show who repair would replace", exc
            ) from None
        return resume_risk(nodes, ctx.client.server_now())

    def _plan_nodegroup(
        self, ctx: StepContext, deploy: dict[str, Any] | None, backend: Backend
    ) -> StepPlan:
        eks = _eks(ctx)
        cluster = _eks_cluster(ctx, deploy)
        group = backend.pool
        nodegroup = _describe_nodegroup(eks, cluster, group)
        record = nodegroup_record(eks, cluster, group)
        if record is None and ctx.prior.get("record") and ctx.prior.get("backend") == "nodegroup":
            data = {k: v for k, v in ctx.prior.items() if k != "labels"}
            return StepPlan(
                notes=[f"node group {group} was restored by this run before it stopped"],
                data=data,
            )
        if record is None:
            raise StepFailed(
                f"node group {group} has no {TAG_PAUSED}/{group}.* tag record on cluster "
                f"{cluster}: repair was not paused by mignurse, so there is no prior value "
                "to restore"
            )
        current = _repair_config(nodegroup)
        ref = f"nodegroup/{cluster}/{group}"
        notes = [describe_record(record)]
        try:
            members = ctx.client.list(
                NODES, Node.from_api, label_selector=f"{LABEL_NODEGROUP}={group}"
            ).items
        except ClusterError as exc:
            raise _cluster_failed("cannot list the node group's nodes", exc) from None
        failing = [
            f"{n.name} ({c.type}={c.reason or c.status})"
            for n in members
            for c in n.conditions
            if c.type in (*MNG_CONDITIONS, "Ready") and c.status != "True"
        ]
        notes.append(
            "nodes the node group may repair once it is on (by its own reason rules): "
            + (", ".join(failing) if failing else "none")
        )
        return StepPlan(
            changes=[
                Change(ref, "nodeRepairConfig", current, record["prior"]),
                Change(
                    f"cluster/{cluster}",
                    f"tags {TAG_PAUSED}/{group}.*",
                    describe_record(record),
                    None,
                ),
            ],
            notes=notes,
            data={
                "backend": "nodegroup",
                "cluster": cluster,
                "nodegroup": group,
                "arn": nodegroup.get("nodegroupArn", ""),
                "prior": record["prior"],
                "current": current,
                "record": record,
            },
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        data = plan.data
        undo_needs = {k: v for k, v in data.items() if k != "at_risk"}
        if data.get("backend") == "nodegroup":
            update_id = _restore_nodegroup(
                ctx, data["cluster"], data["nodegroup"], data["prior"], undo_needs
            )
            return {**data, "update": update_id}
        after = _restore_karpenter(ctx, data["namespace"], data["name"], data["edits"], undo_needs)
        return {
            "backend": "karpenter",
            "namespace": data["namespace"],
            "name": data["name"],
            "generation": int(after["metadata"].get("generation", 1)),
            "edits": data["edits"],
            "record": data["record"],
        }

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("backend") == "nodegroup":
            return _verify_nodegroup(
                ctx, applied["cluster"], applied["nodegroup"], applied["update"], applied["prior"]
            )
        want = effective_repair(
            [
                GateSetting(e["where"], 0, e["container"], "", "", e["prior"])
                for e in applied["edits"]
            ]
        )
        return _verify_rollout(
            ctx, applied["namespace"], applied["name"], applied["generation"], want
        )

    def undone(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if applied.get("backend") == "nodegroup":
            return _nodegroup_left(ctx, applied, applied["current"], paused=True)
        if applied.get("backend") == "karpenter":
            return _karpenter_left(ctx, applied, "paused", paused=True)
        return None

    def undo(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> None:
        """Pause again with the same record (so a later resume still knows the prior)."""
        if applied.get("backend") == "nodegroup":
            eks = _eks(ctx)
            cluster, group = applied["cluster"], applied["nodegroup"]
            if nodegroup_record(eks, cluster, group) is None:
                ctx.intend(f"tag cluster {cluster} with the pause record of node group {group}")
                _write_record(eks, cluster, group, applied["record"])
            now = _repair_config(_describe_nodegroup(eks, cluster, group))
            if not _same_config(now, applied["current"]):
                ctx.intend(f"update_nodegroup_config of node group {group}: paused again")
                _update_config(ctx, eks, cluster, group, applied["current"])
            return
        ns, name, edits = applied["namespace"], applied["name"], applied["edits"]
        text = json.dumps(applied["record"], separators=(",", ":"), sort_keys=True)

        def landed(deploy: dict[str, Any]) -> bool:
            return pause_record(deploy) is not None and all(
                s.gates == e["paused"] for s, e in _match(gate_settings(deploy), edits)
            )

        def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
            pairs = _match(gate_settings(deploy), edits)
            return _gate_patch(
                deploy,
                [(s.path, s.render(s.gates), s.render(e["paused"])) for s, e in pairs],
                text,
            )

        _patch_deployment(ctx, ns, name, build, landed, f"pause deployment/{ns}/{name} again")
