"""One shell per node, over the transport the user's `collect.access.Access` resolves to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mignurse.cluster.client import ClusterClient, ClusterError
from mignurse.collect.access import Access, AccessError, ShellFor, aws_client
from mignurse.collect.nodediagnostic import (
    NODEDIAGNOSTICS,
    BucketUpload,
    NodeDiagnosticShell,
    WhenUnreachable,
)
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.nodeaccess.fallback import FallbackShell


def shell_factory(
    client: ClusterClient,
    access: Access,
    *,
    sandboxes: Path,
    simulated: bool = False,
    collecting: bool = False,
) -> ShellFor:
    """One shell per node, over the transport `access` resolves to: `sim`, the injected
    sandboxes (built under `sandboxes`); `ssm`, SSM through `access.bucket`, falling back to
    SSH where SSM does not manage the instance; `ssh`, SSH to the node's name
    (`~/.ssh/config` may map it, e.g. a ProxyCommand over SSM); `nodediagnostic`, the EKS node
    monitoring agent's capture (archive through the node proxy, or S3 with `access.bucket`).
    `collecting` (the collector's script, nothing else, will run): with `auto`, a node the
    chosen way cannot reach is captured by the agent where the cluster serves its
    NodeDiagnostic API; the agent runs no other command, so a runbook never gets it."""
    transport = access.resolve(simulated=simulated)
    if transport == "nodediagnostic":
        if not collecting:
            raise AccessError(
                "--transport nodediagnostic only captures a node's logs: it cannot run "
                "commands on the node (use ssm or ssh)"
            )
        return _node_diagnostics(client, access)
    shells = _shells(client, access, transport, sandboxes)
    if not (collecting and access.transport == "auto" and _serves_node_diagnostics(client)):
        return shells
    agent = _node_diagnostics(client, access)

    def with_agent(node: Node) -> NodeShell:
        shell = shells(node)
        diagnostic = agent(node)
        if isinstance(shell, FallbackShell):  # SSM then SSH, then the agent
            return FallbackShell(
                shell.primary, WhenUnreachable(shell.fallback, diagnostic), when=shell.when
            )
        return WhenUnreachable(shell, diagnostic)

    return with_agent


def _serves_node_diagnostics(client: ClusterClient) -> bool:
    try:
        return client.api_group_available(NODEDIAGNOSTICS.group, NODEDIAGNOSTICS.version)
    except ClusterError:
        return False


def _node_diagnostics(
    client: ClusterClient, access: Access
) -> Callable[[Node], NodeDiagnosticShell]:
    bucket = BucketUpload(aws_client(access, "s3"), access.bucket) if access.bucket else None

    def shell_for(node: Node) -> NodeDiagnosticShell:
        return NodeDiagnosticShell(client, node.name, bucket=bucket)

    return shell_for


def _shells(client: ClusterClient, access: Access, transport: str, sandboxes: Path) -> ShellFor:
    if transport == "sim":
        if access.sandbox_shells is None:
            raise AccessError("--transport sim works only against mignurse's simulator")
        return access.sandbox_shells(client, sandboxes)
    # Loaded only for real nodes: paramiko and botocore are a third of a second of start-up
    # that a run against the simulator's sandboxes never uses.
    from mignurse.nodeaccess.ssh import SSHShell
    from mignurse.nodeaccess.ssm import SSMFleet, SSMShell

    fleet = None
    if transport == "ssm":
        if not access.bucket:
            raise AccessError("--transport ssm needs --bucket BUCKET for the nodes' archives")
        # one fleet for every node: `collect` sends one command per 50 of them
        fleet = SSMFleet(
            ssm_client=aws_client(access, "ssm"),
            s3_client=aws_client(access, "s3"),
            bucket=access.bucket,
            upload=access.ssm_upload,
        )

    def shell_for(node: Node) -> NodeShell:
        ssh = SSHShell(node.name, node.name, accept_new_host_keys=access.accept_new_host_keys)
        if fleet is not None and node.instance_id:
            ssm = SSMShell(node.name, node.instance_id, fleet=fleet)
            return FallbackShell(ssm, ssh, when="is not managed by SSM")
        return ssh

    return shell_for
