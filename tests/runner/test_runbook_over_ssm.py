"""reapply-mig-no-hooks with its node reached over SSM (the SSM stand-in running the commands
in the node's sandbox, moto's S3 for the uploads): the whole runbook succeeds over that
transport, and when SSM loses the `apply --mode-only` invocation mid-run, the step fails in
one line, undo restores the labels and the cordon, and the node ends where it started."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer
from ssmstandin import InstanceSpec, SsmStandIn

from mignurse.cluster.client import NODES
from mignurse.model import LABEL_MIG_CONFIG_STATE, Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell
from mignurse.runner.engine import Runner
from mignurse.runner.schema import default_folder, load_runbook
from mignurse.sim.nodes import NodeSandbox, story_for

from .enginehelpers import Cluster
from .mighelpers import stuck_mig_node

Make = Callable[..., Cluster]

REGION = "us-west-2"
BUCKET = f"mignurse-runbook-ssm-{uuid.uuid4().hex[:8]}"  # moto keeps buckets per process


@pytest.fixture
def aws(fake_aws: None) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = _s3(endpoint)
    if BUCKET not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    yield endpoint
    server.stop()


def _s3(endpoint: str) -> Any:
    config = Config(s3={"addressing_style": "path"}, signature_version="s3v4")
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, config=config)


def _stuck_node(c: Cluster) -> dict[str, Any]:
    """A Ready MIG node whose mig-manager failed (reapply refuses a NotReady one)."""
    return c.node(stuck_mig_node(c))


def _run(c: Cluster, raw: dict[str, Any], tmp: Path, s3: str, lose_when: str | None) -> Any:
    node = Node.from_api(raw)
    assert node.instance_id
    sandbox = NodeSandbox.for_node(tmp / "sandbox", raw, story=story_for(raw))
    spec = InstanceSpec(env=sandbox.env, path_prefix=sandbox.path_prefix, lose_when=lose_when)
    with SsmStandIn({node.instance_id: spec}, race=0.2) as ssm:
        fleet = SSMFleet(
            ssm_client=boto3.client("ssm", endpoint_url=ssm.endpoint_url, region_name=REGION),
            s3_client=_s3(s3),
            bucket=BUCKET,
            poll=(0.1, 0.5),
        )
        shell: NodeShell = SSMShell(node.name, node.instance_id, fleet=fleet)
        book = load_runbook(default_folder() / "reapply-mig-no-hooks.yaml")
        runner = Runner(
            book,
            {"node": node.name, "config": "all-1g.24gb"},
            client=c.client,
            shell_for=lambda name: shell,
            yes=True,
        )
        result = runner.run()
        sent = sum(1 for op, _ in ssm.requests if op == "SendCommand")
    return result, sent, sandbox


def test_reapply_over_ssm_succeeds(
    cluster_for: Make, tmp_path: Path, aws: str, state_home: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=40)
    raw = _stuck_node(c)
    result, sent, _sandbox = _run(c, raw, tmp_path, aws, lose_when=None)
    assert result.status == "succeeded", (result.error, result.report_lines())
    assert sent > 5  # every node command went through SSM
    after = c.client.get(NODES, raw["metadata"]["name"])
    assert not after["spec"].get("unschedulable")
    assert after["metadata"]["labels"][LABEL_MIG_CONFIG_STATE] == "success"


def test_a_lost_ssm_invocation_mid_apply_fails_in_one_line_and_undo_restores(
    cluster_for: Make, tmp_path: Path, aws: str, state_home: Path
) -> None:
    c = cluster_for("mig-1g24gb", speed=40)
    raw = _stuck_node(c)
    name = raw["metadata"]["name"]
    before_labels = dict(raw["metadata"]["labels"])
    result, _sent, sandbox = _run(c, raw, tmp_path, aws, lose_when="--mode-only")
    assert result.status == "undone", (result.status, result.report_lines())
    assert "SSM lost the command" in result.error and "\n" not in result.error
    after = c.client.get(NODES, name)
    assert not after["spec"].get("unschedulable")  # the cordon was undone
    labels = after["metadata"]["labels"]
    for key, value in before_labels.items():
        if key.startswith("nvidia.com/gpu.deploy.") or key == LABEL_MIG_CONFIG_STATE:
            assert labels.get(key) == value, key  # each operand label exactly as it was
    # the lost apply never ran on the node: its layout is untouched
    calls = sandbox.calls_log.read_text() if sandbox.calls_log.exists() else ""
    assert "'apply'" not in calls
