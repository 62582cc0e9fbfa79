"""Pieces the interruption tests share: shipped runbooks with shorter timeouts, node access
through the sandboxes, a client that dies like a SIGKILLed process right after a chosen
request, and readers of the cluster's and the audit's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mignurse.cluster.client import DEPLOYMENTS, NAMESPACES, ClusterClient
from mignurse.runner.audit import read_audit
from mignurse.runner.engine import Runner
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.schema import Runbook, default_folder, load_runbook
from mignurse.runner.wiring import node_shells
from mignurse.sim.nodes import sandbox_shells

from .enginehelpers import Cluster

DEPLOY = "nvidia.com/gpu.deploy."
MIG_LABELS = ("nvidia.com/mig.config", "nvidia.com/mig.config.state")


def book(name: str, tmp_path: Path, **timeouts: str) -> Runbook:
    """A shipped runbook; `timeouts` rewrites `timeout: OLD` lines (e.g. {"600": "20"})."""
    text = (default_folder() / f"{name}.yaml").read_text()
    for old, new in timeouts.items():
        text = text.replace(f"timeout: {old}", f"timeout: {new}")
    path = tmp_path / "books" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return load_runbook(path)


def shells(c: Cluster, sandboxes: Path) -> Callable[[str], Any]:
    return node_shells(c.client, sandbox_shells(c.client, sandboxes))


def resumed(run_id: str, c: Cluster, books: list[Runbook], sandboxes: Path, **kw: Any) -> Runner:
    """The run again, from its state, as `mignurse run --resume/--undo ID --yes` builds it."""
    return Runner.from_state(
        run_id,
        client=c.client,
        books={b.name: b for b in books},
        shell_for=shells(c, sandboxes),
        yes=True,
        **kw,
    )


class Killed(BaseException):
    """The process died (SIGKILL): nothing after this point runs, no handler sees it."""


class DyingClient:
    """A ClusterClient that sends the request `kills(method, args)` chooses, then dies like a
    SIGKILLed process: that call and every later one raise Killed (a `finally` that would
    release the lock reaches nothing)."""

    def __init__(self, real: ClusterClient, kills: Callable[[str, tuple[Any, ...]], bool]):
        self._real = real
        self._kills = kills
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if not callable(target) or name.startswith("_"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise Killed(name)
            result = target(*args, **kwargs)
            if self._kills(name, args):
                self.dead = True
                raise Killed(name)
            return result

        return call


def is_lock_patch(args: tuple[Any, ...]) -> bool:
    body = args[2] if len(args) > 2 else None
    annotations = (
        (body or {}).get("metadata", {}).get("annotations", {}) if isinstance(body, dict) else {}
    )
    return LOCK_ANNOTATION in annotations


def node_view(c: Cluster, node: str) -> dict[str, Any]:
    """What the runbooks change on a node: cordon, its annotation, GPU operator labels."""
    raw = c.node(node)
    labels = raw["metadata"].get("labels") or {}
    annotations = dict(raw["metadata"].get("annotations") or {})
    annotations.pop(LOCK_ANNOTATION, None)
    return {
        "unschedulable": bool(raw["spec"].get("unschedulable")),
        "annotations": annotations,
        "labels": {k: v for k, v in labels.items() if k.startswith(DEPLOY) or k in MIG_LABELS},
    }


def karpenter_view(c: Cluster) -> dict[str, Any]:
    deploy = c.client.get(DEPLOYMENTS, "karpenter", "kube-system")
    (ctr,) = [
        x for x in deploy["spec"]["template"]["spec"]["containers"] if x["name"] == "controller"
    ]
    return {
        "env": [e for e in ctr.get("env") or [] if e["name"] == "FEATURE_GATES"],
        "args": list(ctr.get("args") or []),
        "annotations": {
            k: v
            for k, v in (deploy["metadata"].get("annotations") or {}).items()
            if k != "deployment.kubernetes.io/revision"  # the Deployment controller's counter
        },
    }


def lock_on(c: Cluster, node: str | None) -> dict[str, Any] | None:
    """The lock annotation of a node, or of the kube-system Namespace (node None)."""
    raw = c.node(node) if node else c.client.get(NAMESPACES, "kube-system")
    value = (raw["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
    return json.loads(value) if value else None


def audit_of(run_id: str) -> list[dict[str, Any]]:
    return [e for e in read_audit() if e.get("run") == run_id]


def mig_state(sandboxes: Path, node: str) -> dict[str, Any]:
    """The node's GPUs as its sandbox keeps them (modes and instances)."""
    state: dict[str, Any] = json.loads((sandboxes / node / "state" / "mig.json").read_text())
    return state


def node_calls(sandboxes: Path) -> list[str]:
    """Every command the nodes' sandboxes ran, as their stubs logged it."""
    return [
        line
        for log in sorted(sandboxes.glob("*/calls.log"))
        for line in log.read_text().splitlines()
    ]


def mig_parted_runs(sandboxes: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for log in sorted(sandboxes.glob("*/state/mig-parted.jsonl"))
        for line in log.read_text().splitlines()
        if line.strip()
    ]


def writes_to(c: Cluster, path_part: str, since: int = 0) -> list[dict[str, Any]]:
    return [
        r
        for r in c.sim.requests[since:]
        if r["method"] in ("PATCH", "POST", "DELETE", "PUT") and path_part in r["path"]
    ]


def dead_pid() -> int:
    """The pid of a process that has ended (a run killed on this host leaves one)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(done.stdout)
    assert pid != os.getpid()
    return pid
