"""Which way into each node, and which AWS account: one choice for the command line and the
app alike.

`Access` is what the user asked for (`--transport`, `--bucket`, `--ssm-upload`, `--profile`,
`--region`, `--accept-new-host-keys`); `collect.transports.shell_factory` turns it into one
shell per node and `aws_session` into the boto3 session every AWS client is made from. The
simulator's sandboxes are not known here: the faces that run against a simulated cluster
inject them (`Access.sandbox_shells`), so the product's core never imports the simulator.
Whether a cluster is the simulator's is decided here too, once for every face
(`simulated_scenario`): the command line and the app ask the same question of the same
kubeconfig, so they reach the same nodes the same way.
Light to import: boto3 and paramiko load only when a node or AWS is reached.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mignurse.cluster.client import ClusterClient
    from mignurse.model import Node
    from mignurse.nodeaccess.base import NodeShell

ShellFor = Callable[["Node"], "NodeShell"]
# The simulator's node sandboxes: (client, folder for the sandboxes) → one shell per node.
SandboxShells = Callable[["ClusterClient", Path], ShellFor]


class AccessError(Exception):
    """The nodes or AWS cannot be reached as asked; one line for the user (exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Access:
    """How nodes and AWS are reached, as the user asked."""

    transport: str = "auto"
    bucket: str | None = None
    ssm_upload: str = "presigned"
    profile: str | None = None
    region: str | None = None
    accept_new_host_keys: bool = False
    sandbox_shells: SandboxShells | None = None  # the simulator's, injected by its faces

    @classmethod
    def from_args(cls, args: Any, *, sandbox_shells: SandboxShells | None = None) -> Access:
        """From any command's parsed flags; a flag the command lacks keeps its default."""
        return cls(
            transport=getattr(args, "transport", None) or "auto",
            bucket=getattr(args, "bucket", None) or None,
            ssm_upload=getattr(args, "ssm_upload", None) or "presigned",
            profile=getattr(args, "profile", None) or None,
            region=getattr(args, "region", None) or None,
            accept_new_host_keys=bool(getattr(args, "accept_new_host_keys", False)),
            sandbox_shells=sandbox_shells,
        )

    def resolve(self, *, simulated: bool) -> str:
        """`auto`: the sandboxes on a simulated cluster, SSM when a bucket is given, else SSH
        (and the agent's NodeDiagnostic for a node those cannot reach: `shell_factory`)."""
        if self.transport != "auto":
            return self.transport
        if simulated:
            return "sim"
        return "ssm" if self.bucket else "ssh"


def simulated_scenario(kubeconfig: str | None, cluster: str) -> str | None:
    """The scenario named by the simulator's mark on `cluster` in the kubeconfig (`--kubeconfig`,
    else $KUBECONFIG, else ~/.kube/config): `mignurse sim serve` and the demo write it as an
    extension of the cluster entry (`SIM_EXTENSION`). "" for a mark without a name; None for
    any other cluster, or a kubeconfig that cannot be read (then nothing is simulated)."""
    from mignurse.cluster.kubeconfig import KubeconfigProblem, config_paths, merge

    try:
        # The files as the connection merged them (the first file's entry wins); while a
        # command's connections share their merge, not read again.
        entry = merge(*config_paths(kubeconfig)).clusters.get(cluster)
    except KubeconfigProblem:
        return _scenario_in_readable_files(kubeconfig, cluster)
    return None if entry is None else _scenario_mark(entry.body)


def _scenario_in_readable_files(kubeconfig: str | None, cluster: str) -> str | None:
    """`simulated_scenario` where a file of the kubeconfig cannot be read: the others'."""
    from mignurse.cluster.kubeconfig import KubeconfigProblem, read_kubeconfig

    paths = (kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    for path in paths:
        expanded = Path(path).expanduser()
        try:
            # One bounded read: no alias bomb, no /dev/zero, nothing swapped in after a check.
            config = read_kubeconfig(str(expanded))
        except KubeconfigProblem:
            continue
        for entry in config.get("clusters") or ():
            if isinstance(entry, dict) and entry.get("name") == cluster:
                return _scenario_mark(entry.get("cluster") or {})
    return None


def _scenario_mark(body: Any) -> str | None:
    from mignurse.cluster import SIM_EXTENSION

    for extension in (body.get("extensions") if isinstance(body, dict) else None) or ():
        if isinstance(extension, dict) and extension.get("name") == SIM_EXTENSION:
            named = extension.get("extension")
            return str(named.get("scenario") or "") if isinstance(named, dict) else ""
    return None


def aws_session(access: Access) -> Any:
    """The boto3 session as the aws CLI would build it: `--profile`, `--region`, then the
    standard environment and ~/.aws files (AWS_ENDPOINT_URL_* included)."""
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=access.profile, region_name=access.region)
    except botocore.exceptions.ProfileNotFound as exc:
        raise AccessError(f"{exc}: check --profile or ~/.aws/config") from None
    if session.region_name is None:
        raise AccessError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION")
    return session


def aws_client(access: Access, service: str, *, need_credentials: bool = False) -> Any:
    """One client of `session`, with adaptive retries against throttling."""
    from botocore.config import Config

    session = aws_session(access)
    if need_credentials and session.get_credentials() is None:
        raise AccessError("no AWS credentials: configure a profile (aws sso login) or env")
    config = Config(retries={"mode": "adaptive", "max_attempts": 5})
    if service == "s3":
        # A local S3 stand-in (AWS_ENDPOINT_URL_S3) has no virtual-host DNS: path-style there.
        style = "path" if os.environ.get("AWS_ENDPOINT_URL_S3") else "auto"
        config = config.merge(Config(s3={"addressing_style": style}, signature_version="s3v4"))
    return session.client(service, config=config)
