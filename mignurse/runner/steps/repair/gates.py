"""The karpenter controller's feature gates, as strings: where the controller container sets
them (env `FEATURE_GATES`, a `--feature-gates` argument, or both), whether they leave node
repair on, and how one gate is changed with every other byte kept (rewriting the whole
string can flip other gates: on v1.1.0 every omitted gate becomes false). Pure: the
Deployment and pods come in as JSON, nothing is read or written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mignurse.runner.step import StepFailed

NODE_REPAIR = "NodeRepair"
CONTROLLER_CONTAINER = "controller"  # the chart's controller.containerName


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
    from mignurse.diagnose.inputs import controller_container_index  # with the diagnosis'

    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    index = controller_container_index(containers)
    if index is None:
        raise StepFailed(f"{deploy_ref(deployment)} has no container {CONTROLLER_CONTAINER!r}")
    ctr = containers[index]
    name = str(ctr.get("name") or index)
    base = f"/spec/template/spec/containers/{index}"
    found: list[GateSetting] = []
    for i, env in enumerate(ctr.get("env") or []):
        if not isinstance(env, dict) or env.get("name") != "FEATURE_GATES":
            continue
        if "value" not in env and env.get("valueFrom"):
            raise StepFailed(
                f"FEATURE_GATES of {deploy_ref(deployment)} comes from valueFrom; "
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
    """Whether the controller runs node repair. The last `--feature-gates` flag replaces the
    env whole (the env is only the flag's default: `fs.StringVar(..., "feature-gates",
    env.WithDefaultString("FEATURE_GATES", ...))`), and a gate absent from the string that
    wins is false (`DefaultFeatureGates`): kubernetes-sigs/karpenter
    pkg/operator/options/options.go, v1.1.0, v1.6.0, v1.8.0 and v1.14.1. The chart
    (aws/karpenter-provider-aws charts/karpenter/templates/deployment.yaml) sets only the env."""
    from mignurse.diagnose.inputs import gate_setting  # the diagnosis reads the gates alike

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


def restored_repair(settings: list[GateSetting], edits: list[dict[str, Any]]) -> bool:
    """Whether node repair runs once the recorded prior gate strings are back."""
    prior = {(e.get("where"), e.get("container")): e.get("prior") for e in edits}
    restored = [
        replace(s, gates=str(prior[(s.where, s.container_name)] or ""))
        if prior.get((s.where, s.container_name)) is not None
        else s
        for s in settings
    ]
    return effective_repair(restored)


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def deploy_ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"deployment/{meta.get('namespace', '?')}/{meta.get('name', '?')}"
