"""Which way into each node: one choice for the command line and the app alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mignurse.cluster.client import NODES, ClusterClient
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.nodeaccess.fallback import FallbackShell
from mignurse.nodeaccess.ssh import SSHShell
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell


def shell_factory(
    client: ClusterClient,
    *,
    transport: str,
    sandboxes: Path,
    ssm_clients: tuple[Any, Any] | None = None,
    bucket: str | None = None,
    ssm_upload: str = "presigned",
    accept_new_host_keys: bool = False,
) -> Callable[[Node], NodeShell]:
    """`sim`: the simulator's sandboxes (built under `sandboxes` from each Node object);
    `ssm`: SSM, falling back to SSH where SSM does not manage the instance; `ssh`: SSH to
    the node's name (`~/.ssh/config` may map it, e.g. a ProxyCommand over SSM).
    `ssm_upload`: how SSM output reaches `bucket` ("presigned" or "output-bucket", see
    `SSMFleet`)."""

    fleet = None
    if transport == "ssm" and ssm_clients is not None and bucket:
        # one fleet for every node: `collect` sends one command per 50 of them
        fleet = SSMFleet(
            ssm_client=ssm_clients[0], s3_client=ssm_clients[1], bucket=bucket, upload=ssm_upload
        )

    def shell_for(node: Node) -> NodeShell:
        if transport == "sim":
            from mignurse.sim.nodes import NodeSandbox, SandboxShell, story_for

            raw = client.get(NODES, node.name)
            sandbox = NodeSandbox.for_node(sandboxes / node.name, raw, story=story_for(raw))
            return SandboxShell(sandbox)
        ssh = SSHShell(node.name, node.name, accept_new_host_keys=accept_new_host_keys)
        if fleet is not None and node.instance_id:
            ssm = SSMShell(node.name, node.instance_id, fleet=fleet)
            return FallbackShell(ssm, ssh, when="is not managed by SSM")
        return ssh

    return shell_for
