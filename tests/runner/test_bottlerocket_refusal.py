"""reapply-mig-no-hooks on a Bottlerocket node: refused before anything runs, in one line that
names Bottlerocket's own way (its settings, `apiclient set`), never touching mig-parted there.

The simulator's g7e.48xlarge node of `mig-1g24gb` is made a Bottlerocket node the way kubelet
shows it: `status.nodeInfo.osImage` is /etc/os-release's PRETTY_NAME."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from mignurse.cluster.client import NODES
from mignurse.runner.engine import Runner

from .enginehelpers import Cluster
from .interrupthelpers import book, shells, writes_to
from .mighelpers import ready_mig_node

Make = Callable[..., Cluster]
APICLIENT = (
    'apiclient set --json \'{"settings":{"kubelet-device-plugins":{"nvidia":{'
    '"device-partitioning-strategy":"mig","mig":{"profile":{"rtxpro6000.96gb":"1g.24gb"}}}}}}\''
)


def bottlerocket(c: Cluster, node: str, os_image: str) -> None:
    info = dict(c.node(node)["status"].get("nodeInfo") or {})
    info["osImage"] = os_image
    c.client.patch(NODES, node, {"status": {"nodeInfo": info}}, subresource="status")
    assert c.node(node)["status"]["nodeInfo"]["osImage"] == os_image


def test_reapply_on_a_bottlerocket_node_is_refused_with_the_bottlerocket_way(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb")
    node = ready_mig_node(c)
    bottlerocket(c, node, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)")
    seen = len(c.sim.requests)
    runner = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node, "config": "all-1g.24gb"},
                    client=c.client, shell_for=shells(c, tmp_path / "nodes"), yes=True)  # fmt: skip

    result = runner.run()

    assert result.status == "blocked" and result.exit_code == 1
    assert "\n" not in result.error
    assert result.error.startswith(
        f"step preflight cannot run: node {node} runs Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)"
        ": Bottlerocket makes its MIG layout itself at boot"
    )
    assert "not nvidia-mig-parted" in result.error
    assert (
        "mignurse userdata --os bottlerocket --gpu-product RTX-PRO-6000-Server "
        "--config all-1g.24gb" in result.error
    )
    assert f"`{APICLIENT}` from its admin container, then reboot it" in result.error
    assert not writes_to(c, "/", seen)
    assert not (tmp_path / "nodes" / node).exists()  # nothing ran on the node


def test_a_bottlerocket_too_old_for_the_gpu_is_told_to_be_replaced(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb")
    node = ready_mig_node(c)
    bottlerocket(c, node, "Bottlerocket OS 1.39.1 (aws-k8s-1.32-nvidia)")
    runner = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node, "config": "all-1g.24gb"},
                    client=c.client, shell_for=shells(c, tmp_path / "nodes"), yes=True)  # fmt: skip

    result = runner.run()

    assert result.status == "blocked"
    assert result.error.endswith("(this node's 1.39.1 is older than 1.51.0: replace it)")


def test_a_layout_bottlerocket_cannot_make_is_said_so(
    cluster_for: Make, state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb")
    node = ready_mig_node(c)
    bottlerocket(c, node, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)")
    params = {"node": node, "config": "all-balanced"}
    runner = Runner(book("reapply-mig-no-hooks", tmp_path), params,
                    client=c.client, shell_for=shells(c, tmp_path / "nodes"), yes=True)  # fmt: skip

    result = runner.run()

    assert result.status == "blocked"
    assert "Bottlerocket makes one profile per GPU from its own table" in result.error


def test_the_cli_plan_refuses_it_and_nothing_reaches_the_node(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for("mig-1g24gb")
    node = ready_mig_node(c)
    bottlerocket(c, node, "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)")
    seen = len(c.sim.requests)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path / "state"))
    env.pop("MIGNURSE_RUNBOOKS", None)

    done = subprocess.run(
        [sys.executable, "-m", "mignurse", "--kubeconfig", str(c.kubeconfig), "run",
         "reapply-mig-no-hooks", "--node", node, "--param", "config=all-1g.24gb", "--yes",
         "--sandboxes", str(tmp_path / "sandboxes")],
        env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    assert done.returncode == 1, done.stdout + done.stderr
    assert ": blocked: step preflight cannot run" in done.stdout
    assert f"BLOCKED: node {node} runs Bottlerocket OS 1.51.0" in done.stderr
    assert APICLIENT in done.stdout + done.stderr
    assert not [r for r in c.sim.requests[seen:] if r["method"] != "GET"]
    assert not list((tmp_path / "sandboxes").glob("*/calls.log"))
