"""What the runbooks promise, as a user meets it: the real CLI in a subprocess against the
simulator, nodes reached through their sandboxes, whose call log proves what ran.

1. `mignurse run reapply-mig-no-hooks --node N --param config=all-1g.24gb --yes` on the
   `mig-1g24gb` scenario (g7e.48xlarge, 8 × RTX PRO 6000 Blackwell, the one GPU in the
   simulator where `all-1g.24gb` is a valid layout) leaves a Ready node whose mig-manager
   failed uncordoned with the layout verified, and no kubelet/containerd restart and no
   daemon-reload ran on it. On the incident node, NotReady since mig-manager restarted
   kubelet, it is refused before anything changes, naming replace-instance.
2. `--dry-run` of every runbook in runbooks/ prints a complete plan (every step id) and
   changes nothing: no write request reached the simulator, no mutating command ran on a node.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cliserver
import pytest
import yaml

from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner.schema import default_folder
from mignurse.sim.nodes import NodeSandbox

from .enginehelpers import Cluster
from .mighelpers import incident_node, ready_mig_node, stuck_mig_node

Make = Callable[..., Cluster]

RUNBOOKS = default_folder()
# A node command that restarts or stops kubelet or containerd, or reloads systemd.
RESTART_OR_RELOAD = re.compile(
    r"daemon-reload"
    r"|systemctl'?\s+(?:'[^']*'\s+)*'?(?:restart|stop|kill|try-restart|reload-or-restart)\b"
    r"[^\n]*(?:kubelet|containerd)"
    r"|(?:kubelet|containerd)'?\s+'?(?:restart|stop)\b"
)
# Anything that changes a node: units, MIG state, GPU resets, reboots, signals.
MUTATING = re.compile(
    r"systemctl'?\s+(?:'-[^']*'\s+)*'?"
    r"(?:restart|stop|start|reload|daemon-reload|enable|disable|kill|mask)\b"
    r"|nvidia-mig-parted'?\s+(?:'-d'\s+)?'?(?:apply|restore)\b"
    r"|nvidia-smi'?\s+(?:'[^']*'\s+)*'?(?:-r|--gpu-reset|-mig|--multi-instance-gpu)'?(?:\s|$)"
    r"|nvidia-smi'?\s+'?mig'?\s+'?-(?:cgi|dgi|cci|dci)\b"
    r"|^(?:reboot|shutdown|kill|pkill|ctr|crictl)\b"
)


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env["XDG_STATE_HOME"] = str(state)
    env["HOME"] = str(state)  # no ~/.aws: no identity lookup
    env.pop("MIGNURSE_RUNBOOKS", None)  # the shipped runbooks
    return env


def _mignurse(
    c: Cluster, state: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    argv = ["--kubeconfig", str(c.kubeconfig), *args]
    return cliserver.run(argv, env=_env(state), cwd=os.getcwd(), timeout=timeout)


def _calls(sandboxes: Path) -> list[str]:
    """Every command any node sandbox ran, as its stubs logged it."""
    return [
        line
        for log in sorted(sandboxes.glob("*/calls.log"))
        for line in log.read_text().splitlines()
    ]


# -- 1. reapply-mig-no-hooks with all-1g.24gb on a GPU that really has it -------------------


def test_reapply_on_the_notready_incident_node_is_refused_naming_replace_instance(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb")
    node = incident_node(c)
    seen = len(c.sim.requests)

    refused = _mignurse(
        c, tmp_path / "state", "run", "reapply-mig-no-hooks", "--node", node,
        "--param", "config=all-1g.24gb", "--yes", "--sandboxes", str(tmp_path / "sandboxes"),
    )  # fmt: skip

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        refused.stdout.startswith("run ")
        and ": blocked: step preflight cannot run" in refused.stdout
    )
    assert f"BLOCKED: node {node} is NotReady since" in refused.stderr
    assert f"mignurse run replace-instance --node {node}" in refused.stdout
    assert not [r for r in c.sim.requests[seen:] if r["method"] != "GET"]
    assert not c.node(node)["spec"].get("unschedulable")


def test_reapply_all_1g_24gb_on_g7e_leaves_the_node_uncordoned_and_verified(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=40)  # a running clock: operands go and come back
    node = stuck_mig_node(c)
    before = c.node(node)
    labels = before["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "g7e.48xlarge"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
    assert labels["nvidia.com/mig.config"] == "all-1g.24gb"
    assert labels[LABEL_MIG_CONFIG_STATE] == "failed"
    gpus = int(labels["nvidia.com/gpu.count"])
    sandboxes = tmp_path / "sandboxes"

    done = _mignurse(
        c,
        tmp_path / "state",
        "run",
        "reapply-mig-no-hooks",
        "--node",
        node,
        "--param",
        "config=all-1g.24gb",
        "--yes",
        "--sandboxes",
        str(sandboxes),
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].endswith(": succeeded")
    assert "  verify-layout: verified" in done.stdout.splitlines()
    assert f"8 GPUs on {node} show 4×1g.24gb each" in done.stderr
    after = c.node(node)
    assert not after["spec"].get("unschedulable")
    assert after["metadata"]["labels"][LABEL_MIG_CONFIG_STATE] == "success"
    assert after["status"]["allocatable"]["nvidia.com/mig-1g.24gb"] == str(4 * gpus) == "32"
    # The node's own state: every GPU MIG-enabled with 4 × 1g.24gb (GI profile 14) and no
    # mode change pending: Blackwell needs no reset.
    sandbox = NodeSandbox.for_node(sandboxes / node, after, story="mig-hook")
    state = sandbox.mig_state()
    assert len(state["gpus"]) == gpus
    for gpu in state["gpus"]:
        assert (gpu["arch"], gpu["current"], gpu["pending"]) == ("Blackwell", "Enabled", "Enabled")
        assert [(i["profile"], i["profileId"]) for i in gpu["instances"]] == [("1g.24gb", 14)] * 4
    runs = sandbox.mig_parted_runs()
    assert runs and all(r["hooksFileEnv"] is None and not r["hooksRun"] for r in runs)
    # The sandbox log: what ran, and nothing that restarts kubelet/containerd or reloads systemd.
    calls = _calls(sandboxes)
    assert any(line.startswith("nvidia-mig-parted '-d' 'apply'") for line in calls)
    assert not [line for line in calls if RESTART_OR_RELOAD.search(line)]
    assert not [line for line in calls if "nvidia-smi '-r'" in line]


def test_the_forbidden_call_pattern_catches_what_it_must() -> None:
    """The pattern the test above relies on, on the stubs' quoting (`cmd 'arg' 'arg'`)."""
    caught = [
        "systemctl 'restart' 'kubelet.service'",
        "systemctl 'stop' 'kubelet'",
        "systemctl 'restart' 'containerd'",
        "systemctl '--no-block' 'stop' 'kubelet.service'",
        "systemctl 'daemon-reload'",
    ]
    passed = [
        "systemctl 'is-active' 'nvidia-mig-manager.service'",
        "systemctl 'is-active' 'kubelet'",
        "journalctl '-u' 'containerd' '--no-pager'",
    ]
    assert all(RESTART_OR_RELOAD.search(line) for line in caught)
    assert not [line for line in passed if RESTART_OR_RELOAD.search(line)]
    assert all(MUTATING.search(line) for line in caught)
    assert MUTATING.search("nvidia-mig-parted '-d' 'apply' '--mode-only' '-f' 'x'")
    assert MUTATING.search("nvidia-smi '-r'")
    assert not MUTATING.search("nvidia-mig-parted 'assert' '-f' 'x'")
    assert not MUTATING.search("nvidia-smi '-q' '-x'")


# -- 2. --dry-run of every runbook ---------------------------------------------------------


@dataclass(frozen=True)
class DryRun:
    scenario: str
    pool: str  # the node is the first of this pool (for mig-1g24gb: a Ready MIG node)
    params: dict[str, str] = field(default_factory=dict)
    first: str = ""  # a runbook run for real before, so this one has something to plan
    speed: float = 0  # a running clock where `first` waits on the cluster


DRY_RUNS: dict[str, DryRun] = {
    "cordon": DryRun("healthy", "gpu-train"),
    "uncordon": DryRun("healthy", "gpu-train", first="cordon"),
    "cordon-and-collect": DryRun("healthy", "gpu-train"),
    "reapply-mig-no-hooks": DryRun("mig-1g24gb", "gpu-mig-g7e", {"config": "all-1g.24gb"}),
    "pause-node-repair": DryRun("dcgm-repair-loop", "gpu-inference"),
    # resume needs the record a real pause leaves; the pause waits for Karpenter's rollout
    "resume-node-repair": DryRun(
        "dcgm-repair-loop", "gpu-inference", first="pause-node-repair", speed=5
    ),
    "replace-instance": DryRun("healthy", "gpu-train"),
}


def _step_ids(path: Path) -> tuple[str, list[str]]:
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    return str(raw["name"]), [str(s["id"]) for s in raw["steps"]]


def test_every_shipped_runbook_has_a_dry_run_case() -> None:
    names = {_step_ids(p)[0] for p in RUNBOOKS.glob("*.yaml")}
    assert names and names == set(DRY_RUNS)


@pytest.mark.parametrize("path", sorted(RUNBOOKS.glob("*.yaml")), ids=lambda p: p.stem)
def test_dry_run_prints_the_whole_plan_and_changes_nothing(
    path: Path, cluster_for: Make, tmp_path: Path
) -> None:
    name, step_ids = _step_ids(path)
    case = DRY_RUNS.get(name)
    assert case is not None, f"add a DRY_RUNS entry for runbook {name} ({path.name})"
    c = cluster_for(case.scenario, speed=case.speed)
    node = ready_mig_node(c) if case.scenario == "mig-1g24gb" else c.nodes(case.pool)[0]
    params = [a for k, v in case.params.items() for a in ("--param", f"{k}={v}")]
    if case.first:
        first = _mignurse(c, tmp_path / "first-state", "run", case.first, "--node", node, "--yes")
        assert first.returncode == 0, first.stdout + first.stderr
    seen = len(c.sim.requests)
    assert seen < 9000  # the log keeps 10,000: what follows is all there
    before = {kind: c.sim.objects(kind) for kind in ("nodes", "nodeclaims")}
    sandboxes = tmp_path / "sandboxes"

    dry = _mignurse(
        c,
        tmp_path / "state",
        "run",
        name,
        "--node",
        node,
        *params,
        "--dry-run",
        "--sandboxes",
        str(sandboxes),
        timeout=120,
    )

    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[0].endswith(": dry-run")
    plan = dry.stderr.splitlines()
    heads = [line for line in plan if re.match(r"^\d+\. ", line)]
    assert [h.split(" ")[1] for h in heads] == step_ids, dry.stderr
    assert not [line for line in plan if "BLOCKED" in line]
    # Nothing changed: no write request reached the simulator …
    writes = [r for r in c.sim.requests[seen:] if r["method"] != "GET"]
    assert not writes, writes
    if case.speed == 0:  # a stopped clock: the objects are exactly as they were
        assert {kind: c.sim.objects(kind) for kind in before} == before
    # … and nothing that changes a node ran on one.
    assert not [line for line in _calls(sandboxes) if MUTATING.search(line)]
