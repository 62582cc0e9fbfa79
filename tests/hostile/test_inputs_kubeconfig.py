"""A kubeconfig is untrusted input: whatever it is (a list, a scalar, /dev/zero, an alias
bomb, 5 MiB of clusters, binary) `mignurse` says so in one line (exit 2) before the
kubernetes client spends minutes and gigabytes on it; a failing credential plugin too."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import yaml

from .inputs import MiB, billion_laughs, mignurse, one_line_error


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(server: str, user: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "prod",
        "clusters": [{"name": "prod", "cluster": {"server": server}}],
        "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "prod"}}],
        "users": [{"name": "prod", "user": user}],
    }


def many_clusters(size: int) -> str:
    entry = (
        "- name: arn:aws:eks:us-west-2:111122223333:cluster/c{i}\n"
        "  cluster:\n    server: https://{i:032X}.gr7.us-west-2.eks.amazonaws.com\n"
        "    certificate-authority-data: " + "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpK" * 40 + "\n"
    )
    body, i = [], 0
    while sum(map(len, body)) < size:
        body.append(entry.format(i=i))
        i += 1
    return "apiVersion: v1\ncurrent-context: c0\ncontexts: []\nusers: []\nclusters:\n" + "".join(
        body
    )


CASES = {
    "a list": ("- clusters: []\n- users: []\n", "YAML list"),
    "a scalar": ("just words\n", "YAML single value"),
    "empty": ("", "is empty"),
    "clusters of numbers": ("clusters: [1, 2]\ncontexts: []\nusers: []\n", "clusters must be"),
    "an alias bomb": (billion_laughs("clusters"), "aliases expand"),
    "a recursive alias": ("clusters: &c [*c]\n", "refers to the node"),
    "binary": (None, "not UTF-8"),
    "5 MiB of clusters": (many_clusters(5 * MiB), "MIGNURSE_MAX_KUBECONFIG_BYTES="),
    "200k-deep": ("clusters: " + "[" * 200_000 + "]" * 200_000 + "\n", "not valid YAML"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_is_no_kubeconfig_is_one_line(tmp_path: Path, case: str) -> None:
    text, said = CASES[case]
    path = tmp_path / "config"
    if text is None:
        path.write_bytes(bytes(range(256)) * 16)
    else:
        path.write_text(text)
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert str(path) in err and said in err


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_kubeconfig_is_refused_unread(device: str) -> None:
    for how in (("--kubeconfig", device, "nodes"), ("nodes",)):
        env = {} if how[0] == "--kubeconfig" else {"KUBECONFIG": device}
        err = one_line_error(mignurse(*how, env=env, timeout=60))
        assert f"kubeconfig {device} is not a regular file" in err


def test_a_failing_credential_plugin_is_one_line_without_log_noise(tmp_path: Path) -> None:
    plugin = [
        "-c",
        "import sys; sys.stderr.write('ExpiredToken: the SSO session has expired\\n'); "
        "sys.exit(255)",
    ]
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": plugin,
            "interactiveMode": "Never",
        }
    }
    path = tmp_path / "config"
    server = f"https://127.0.0.1:{closed_port()}"
    path.write_text(yaml.safe_dump(kubeconfig(server, exec_user)))
    result = mignurse("--kubeconfig", str(path), "nodes", timeout=60)
    err = one_line_error(result)
    assert "ERROR:root" not in result.stderr and "Retrying" not in result.stderr
    assert "context 'prod': credential plugin `python" in err
    assert "failed (exit 255): ExpiredToken: the SSO session has expired" in err


def test_a_good_kubeconfig_still_reaches_its_server(tmp_path: Path) -> None:
    path = tmp_path / "config"
    port = closed_port()
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}", {"token": "t"})))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}" in err
