"""How a run reaches nodes and AWS: `ctx.shell_for` from a transport's shell factory (one
shell per node for the whole run) and `ctx.aws` from the user's access (boto3 clients made
when a step first asks). The faces build both and hand them to the `Runner`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mignurse.cluster.client import NODES, ClusterClient, ClusterError
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.runner.step import StepFailed

if TYPE_CHECKING:  # paramiko and boto3 load only when a node or AWS is reached
    from mignurse.collect.access import Access


def node_shells(
    client: ClusterClient, factory: Callable[[Node], NodeShell]
) -> Callable[[str], NodeShell]:
    """`ctx.shell_for(name)` from a `collect.transports.shell_factory`: one shell per node
    for the whole run (a simulated node's sandbox keeps its state between steps)."""
    cache: dict[str, NodeShell] = {}
    guard = threading.Lock()

    def shell_for(name: str) -> NodeShell:
        with guard:
            if name not in cache:
                try:
                    raw = client.get(NODES, name)
                except ClusterError as exc:
                    raise StepFailed(f"cannot reach node {name}: {exc}") from None
                cache[name] = factory(Node.from_api(raw))
            return cache[name]

    return shell_for


def aws_for(access: Access) -> Callable[[str], Any]:
    """`ctx.aws(service)`: boto3 clients from the session `access` resolves to (the user's
    --profile and --region), made when a step first asks; a step fails in one line when
    AWS cannot be reached as asked."""
    clients: dict[str, Any] = {}

    def make(service: str) -> Any:
        from mignurse.collect.access import AccessError, aws_client

        if service not in clients:
            try:
                clients[service] = aws_client(access, service, need_credentials=True)
            except AccessError as exc:
                raise StepFailed(str(exc)) from None
        return clients[service]

    return make
