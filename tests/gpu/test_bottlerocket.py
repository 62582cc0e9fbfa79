"""Bottlerocket's own MIG settings: the TOML `mignurse userdata --os bottlerocket` prints, the
table it is built from (nvidia-migmanager's GPU keys and profiles), and telling a node's OS."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
import yaml

from mignurse.cli import main
from mignurse.gpu.bottlerocket import (
    GPUS,
    LABEL_UPDATER,
    BottlerocketError,
    apiclient_command,
    bottlerocket_os,
    os_version,
    settings_for,
    version_tuple,
)
from mignurse.gpu.models import model_named
from mignurse.gpu.profiles import expected_layout
from mignurse.gpu.userdata import build_bottlerocket
from mignurse.model import Node

# bottlerocket-settings-sdk modeled-types/src/kubernetes.rs `MigProfile`
SETTINGS_PROFILE = re.compile(r"^[0-9]g\.\d+gb$")


def nvidia(document: dict[str, object]) -> object:
    return document["settings"]["kubelet-device-plugins"]["nvidia"]  # type: ignore[index]


def test_g7e_all_1g_24gb_is_the_rtx_pro_6000_key_with_its_minimum_release() -> None:
    settings = build_bottlerocket("all-1g.24gb", gpu_product="g7e.4xlarge")
    assert nvidia(tomllib.loads(settings.toml)) == {
        "device-partitioning-strategy": "mig",
        "mig": {"profile": {"rtxpro6000.96gb": "1g.24gb"}},
    }
    assert "# Needs Bottlerocket 1.51.0 or later" in settings.toml
    assert settings.toml.isascii()
    assert settings.mig.per_gpu == 4 and settings.mig.words() == "4 x 1g.24gb per GPU"


@pytest.mark.parametrize(
    ("model", "profile"), [(m, p) for m, gpu in GPUS.items() for p in gpu.profiles]
)
def test_every_bottlerocket_profile_is_the_same_layout_as_its_mig_parted_config(
    model: str, profile: str
) -> None:
    gpu_model = model_named(model)
    count, since = GPUS[model].profiles[profile]
    layout = expected_layout(f"all-{profile}", gpu_model)
    assert layout is not None
    if layout.devices is None:  # all-1g.35gb's device filters leave the H200 NVL out
        with pytest.raises(BottlerocketError, match="no entry for"):
            settings_for(f"all-{profile}", gpu_model)
        return
    assert layout.devices == {profile: count}
    assert SETTINGS_PROFILE.match(profile)
    mig = settings_for(f"all-{profile}", gpu_model)
    assert (mig.key, mig.profile, mig.per_gpu) == (GPUS[model].key, profile, count)
    assert mig.since == since
    assert version_tuple(since) >= version_tuple("1.34.0")


def test_mig_off_is_strategy_none_with_no_profile() -> None:
    settings = build_bottlerocket("all-disabled", gpu_product="p5.48xlarge")
    assert nvidia(tomllib.loads(settings.toml)) == {"device-partitioning-strategy": "none"}
    assert "Bottlerocket 1.34.0 or later" in settings.toml


@pytest.mark.parametrize(
    ("config", "product", "says"),
    [
        ("all-1g.24gb.gfx", "g7e.4xlarge", "use all-disabled or all-1g.24gb, all-2g.48gb"),
        ("all-1g.24gb-me", "g7e.4xlarge", "not one of them on RTX-PRO-6000-Server"),
        ("all-balanced", "g7e.48xlarge", "one profile per GPU"),
        ("all-enabled", "g7e.4xlarge", "one profile per GPU"),
        ("all-4g.40gb", "p5.48xlarge", "not one of them on H100-80GB"),
        ("all-1g.24gb", "NVIDIA H100 NVL", "has no profiles for H100-NVL"),
        ("all-1g.23gb", "p6e-gb200.36xlarge", "has no profiles for GB200"),
    ],
)
def test_what_bottlerocket_cannot_make_is_refused(config: str, product: str, says: str) -> None:
    from mignurse.gpu.userdata import UserDataError

    with pytest.raises(UserDataError, match=re.escape(says)):
        build_bottlerocket(config, gpu_product=product)


def test_a_value_bottlerocket_does_not_know_is_never_written() -> None:
    # nvidia-migmanager turns an unknown value into the whole-GPU profile (serde `other`).
    with pytest.raises(BottlerocketError):
        settings_for("all-1g.24gb+me", model_named("RTX-PRO-6000-Server"))


def test_the_apiclient_command_sets_the_same_settings() -> None:
    mig = build_bottlerocket("all-2g.48gb", gpu_product="rtx-pro-server-6000").mig
    command = apiclient_command(mig)
    prefix = "apiclient set --json '"
    assert command.startswith(prefix) and command.endswith("'")
    assert nvidia(json.loads(command[len(prefix) : -1])) == {
        "device-partitioning-strategy": "mig",
        "mig": {"profile": {"rtxpro6000.96gb": "2g.48gb"}},
    }


def _node(os_image: str, labels: dict[str, str] | None = None) -> Node:
    return Node.from_api(
        {
            "metadata": {"name": "n1", "labels": labels or {}},
            "status": {"nodeInfo": {"osImage": os_image}},
        }
    )


def test_a_bottlerocket_node_is_told_by_its_os_image_then_by_the_updater_label() -> None:
    node = _node("Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)")
    assert bottlerocket_os(node) == "Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)"
    assert os_version(node) == "1.51.0"
    labelled = _node("", {LABEL_UPDATER: "2.0.0"})
    assert bottlerocket_os(labelled) == f"Bottlerocket (label {LABEL_UPDATER})"
    assert os_version(labelled) is None
    assert bottlerocket_os(_node("Amazon Linux 2023.6.20250218")) is None


# -- the command ----------------------------------------------------------------------------


def test_cli_prints_the_toml(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["userdata", "--os", "bottlerocket", "--gpu-product", "g7e.4xlarge"]
    assert main([*argv, "--config", "all-1g.24gb"]) == 0
    out = capsys.readouterr().out
    assert out == build_bottlerocket("all-1g.24gb", gpu_product="g7e.4xlarge").toml


def test_cli_prints_a_bottlerocket_ec2nodeclass(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["userdata", "--os", "bottlerocket", "--gpu-product", "g7e.48xlarge"]
    assert main([*argv, "--config", "all-4g.96gb", "--ec2nodeclass", "--cluster", "prod"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["kind"] == "EC2NodeClass"
    assert document["spec"]["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert nvidia(tomllib.loads(document["spec"]["userData"])) == {
        "device-partitioning-strategy": "mig",
        "mig": {"profile": {"rtxpro6000.96gb": "4g.96gb"}},
    }


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--config", "all-1g.24gb"], "--os bottlerocket needs --gpu-product"),
        (["--config", "all-bogus", "--gpu-product", "g7e.4xlarge"], "unknown MIG config"),
        (["--config", "all-1g.24gb.gfx", "--gpu-product", "g7e.4xlarge"], "one profile per GPU"),
        (
            ["--config", "all-1g.24gb", "--gpu-product", "g7e.4xlarge", "--mig-parted-url", "x"],
            "--mig-parted-url: AL2023 only",
        ),
        (
            ["--config", "all-1g.24gb", "--gpu-product", "g7e.4xlarge", "--driver-wait", "60"],
            "--driver-wait: AL2023 only",
        ),
    ],
)
def test_cli_bottlerocket_bad_input_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["userdata", "--os", "bottlerocket", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and says in lines[0], captured.err
