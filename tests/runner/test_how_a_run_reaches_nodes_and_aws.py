"""How a run reaches nodes and AWS (mignurse/runner/wiring.py): one shell a node for the
whole run, a node that cannot be read fails the step in one line, one AWS client a service,
and a step that needs AWS without credentials fails in one line before any call is made.
No AWS endpoint is reached: making a boto3 client sends nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mignurse.collect.access import Access
from mignurse.model import Node
from mignurse.runner.step import StepFailed
from mignurse.runner.wiring import aws_for, node_shells

from .enginehelpers import Cluster


def test_each_node_gets_one_shell_for_the_whole_run_and_a_missing_node_one_line(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for()
    first, second = c.nodes("gpu-infer")[:2]
    opened: list[str] = []

    def factory(node: Node) -> object:
        opened.append(node.name)
        return object()

    shell_for = node_shells(c.client, factory)  # type: ignore[arg-type]

    assert shell_for(first) is shell_for(first)
    assert shell_for(second) is not shell_for(first)
    assert opened == [first, second]
    with pytest.raises(StepFailed, match=r"^cannot reach node ip-10-9-9-9\.ec2\.internal: "):
        shell_for("ip-10-9-9-9.ec2.internal")


@pytest.fixture
def aws_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An AWS set-up with nothing in it (the region comes from --region): no keys, no
    profile, no metadata endpoint (its lookup is turned off: nothing leaves 127.0.0.1)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "aws-config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


@pytest.mark.usefixtures("aws_home")
def test_a_step_that_needs_aws_without_credentials_fails_in_one_line() -> None:
    aws = aws_for(Access(region="us-west-2"))

    with pytest.raises(StepFailed, match=r"^no AWS credentials: configure a profile"):
        aws("ec2")


@pytest.mark.usefixtures("aws_home")
def test_each_aws_service_gets_one_client_for_the_whole_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEONCALL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    aws = aws_for(Access(region="us-west-2"))

    ec2 = aws("ec2")

    assert aws("ec2") is ec2
    assert aws("autoscaling") is not ec2
    assert ec2.meta.region_name == "us-west-2"
