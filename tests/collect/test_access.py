"""One resolver for how nodes and AWS are reached, for every face."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mignurse.collect.access import Access, AccessError, aws_client
from mignurse.collect.transports import shell_factory


def test_auto_is_the_sandboxes_when_simulated_then_ssm_with_a_bucket_then_ssh() -> None:
    assert Access().resolve(simulated=True) == "sim"
    assert Access(bucket="b").resolve(simulated=False) == "ssm"
    assert Access().resolve(simulated=False) == "ssh"
    assert Access(transport="ssh", bucket="b").resolve(simulated=True) == "ssh"


def test_flags_a_command_lacks_keep_their_defaults() -> None:
    access = Access.from_args(argparse.Namespace(profile="oncall", region=None))
    assert access == Access(profile="oncall")


def test_the_simulator_is_reached_only_through_what_a_face_injected(tmp_path: Path) -> None:
    made: list[Path] = []

    def sandboxes(_client: object, folder: Path) -> object:
        made.append(folder)
        return lambda node: node

    with pytest.raises(AccessError, match="only against mignurse's simulator"):
        shell_factory(None, Access(), sandboxes=tmp_path, simulated=True)  # type: ignore[arg-type]
    shell_factory(None, Access(sandbox_shells=sandboxes), sandboxes=tmp_path, simulated=True)  # type: ignore[arg-type]
    assert made == [tmp_path]


def test_ssm_needs_a_bucket_and_aws_a_region(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AccessError, match="needs --bucket"):
        shell_factory(None, Access(transport="ssm"), sandboxes=tmp_path)  # type: ignore[arg-type]
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(AccessError, match="no AWS region"):
        aws_client(Access(), "ec2")
    with pytest.raises(AccessError, match="check --profile"):
        aws_client(Access(profile="absent", region="us-west-2"), "ec2")
    assert aws_client(Access(region="eu-west-1"), "ec2").meta.region_name == "eu-west-1"


def test_the_simulator_mark_is_read_from_the_kubeconfig_and_a_fifo_or_dev_zero_is_skipped(
    tmp_path: Path,
) -> None:
    import os

    from mignurse.cluster import SIM_EXTENSION
    from mignurse.collect.access import simulated_scenario

    marked = tmp_path / "sim.yaml"
    marked.write_text(
        "clusters:\n- name: sim\n  cluster:\n    server: https://127.0.0.1:1\n"
        f"    extensions:\n    - name: {SIM_EXTENSION}\n      extension: {{scenario: spot-churn}}\n"
    )
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    # A FIFO or /dev/zero before the real file is passed over without blocking or filling memory.
    paths = os.pathsep.join([str(fifo), "/dev/zero", str(marked)])
    assert simulated_scenario(paths, "sim") == "spot-churn"
    assert simulated_scenario(paths, "prod") is None
