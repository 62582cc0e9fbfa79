"""Which contexts `--context` and `--all-contexts` name, and the command an expired
credential plugin's line tells the user to run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mignurse.cluster.client import KubeconfigError
from mignurse.cluster.contexts import select_contexts, several
from mignurse.cluster.credentials import Plugin, login_command

CONTEXTS = ["prod-eu", "staging", "prod-us", "dev,odd", "prod-ap"]


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    """Two files merged as kubectl merges them: the first file's contexts first."""
    first, second = tmp_path / "a", tmp_path / "b"
    for path, names in ((first, CONTEXTS[:3]), (second, [*CONTEXTS[3:], "staging"])):
        path.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [
                        {"name": n, "context": {"cluster": "c", "user": "u"}} for n in names
                    ],
                }
            )
        )
    return f"{first}:{second}"


def test_a_plain_name_or_none_is_one_context_left_for_connect_to_judge() -> None:
    assert select_contexts("/nonexistent", None) == [None]
    assert select_contexts("/nonexistent", "prod") == ["prod"]
    assert not several("prod", False) and several("prod-*", False) and several(None, True)


def test_globs_and_names_select_in_kubeconfig_order_each_once(kubeconfig: str) -> None:
    assert select_contexts(kubeconfig, "prod-*") == ["prod-eu", "prod-us", "prod-ap"]
    assert select_contexts(kubeconfig, "prod-ap, staging,prod-*") == [
        "prod-eu", "staging", "prod-us", "prod-ap",
    ]  # fmt: skip
    assert select_contexts(kubeconfig, "dev,odd") == ["dev,odd"]  # a name holding a comma
    assert select_contexts(kubeconfig, "prod-[eu]*") == ["prod-eu", "prod-us"]


def test_all_contexts_is_every_context_once_in_kubeconfig_order(kubeconfig: str) -> None:
    assert select_contexts(kubeconfig, None, all_contexts=True) == CONTEXTS
    with pytest.raises(KubeconfigError, match="not both"):
        select_contexts(kubeconfig, "prod-*", all_contexts=True)


@pytest.mark.parametrize("selection", ["nope-*", "prod-*,typo", ",", "staging,Prod-*"])
def test_what_matches_nothing_names_the_contexts_there_are(kubeconfig: str, selection: str) -> None:
    with pytest.raises(KubeconfigError) as raised:
        select_contexts(kubeconfig, selection)
    line = str(raised.value)
    assert "\n" not in line
    assert "prod-eu, staging, prod-us, dev,odd, prod-ap" in line or "names no context" in line


def test_a_long_list_of_contexts_is_cut_in_the_line(tmp_path: Path) -> None:
    path = tmp_path / "many"
    names = [f"ctx-{i:03d}" for i in range(500)]
    path.write_text(yaml.safe_dump({"contexts": [{"name": n, "context": {}} for n in names]}))
    with pytest.raises(KubeconfigError) as raised:
        select_contexts(str(path), "prod-*")
    assert "ctx-019 and 480 more" in str(raised.value)
    assert "ctx-020" not in str(raised.value)


def _plugin(command: str, *args: str, env: tuple[tuple[str, str], ...] = ()) -> Plugin:
    return Plugin(command, args, env, "client.authentication.k8s.io/v1beta1", None, "")


def test_an_expired_eks_login_names_aws_sso_login_with_its_profile() -> None:
    by_flag = _plugin("aws", "--region", "eu-west-1", "eks", "get-token", "--cluster-name",
                      "prod", "--profile", "oncall-prod")  # fmt: skip
    assert login_command(by_flag) == "aws sso login --profile oncall-prod"
    by_equals = _plugin("/usr/local/bin/aws", "eks", "get-token", "--profile=ops")
    assert login_command(by_equals) == "aws sso login --profile ops"
    by_env = _plugin("aws", "eks", "get-token", env=(("AWS_PROFILE", "team a"),))
    assert login_command(by_env) == "aws sso login --profile 'team a'"


def test_another_plugin_names_its_own_command_line() -> None:
    no_profile = _plugin("aws", "eks", "get-token", "--cluster-name", "prod")
    assert login_command(no_profile) == "aws eks get-token --cluster-name prod"
    kubelogin = _plugin("kubelogin", "get-token", "--server-id", "6dae42f8")
    assert login_command(kubelogin) == "kubelogin get-token --server-id 6dae42f8"
