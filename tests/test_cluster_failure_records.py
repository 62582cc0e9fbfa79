"""What a cluster that failed says, read across several contexts as a user reads them:
its record names the kubeconfig's cluster entry and server whatever failed (the credential
plugin, the kubeconfig entry, the connection, RBAC, a server that never answers); a server
that accepts the connection and then gives no answer is `timed-out`, one that cannot be
connected to is `unreachable`; and `aws eks get-token` failing is an expired login (with
`aws sso login`) only when the aws CLI says the SSO login has to be renewed."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cliserver
import pytest
import yaml
from test_cli_contexts import errors

from mignurse.sim.fleet import SimFleet

WORKING = "sim-*,prod-eu,prod-us,staging"  # every context but the hung one


@pytest.fixture(scope="module")
def fleet(failing_fleet: tuple[SimFleet, Path]) -> tuple[SimFleet, Path]:
    return failing_fleet


def mignurse(
    kubeconfig: Path, *args: str, deadline: str = "30"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MIGNURSE_COMMAND_TIMEOUT": deadline, "COLUMNS": "200"}
    argv = ["--kubeconfig", str(kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=120)


def records(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {r["context"]: r for r in json.loads(done.stdout)["clusters"]}


def named(kubeconfig: Path, context: str) -> tuple[str, str]:
    """The cluster entry the kubeconfig gives `context`, and that entry's server."""
    config = yaml.safe_load(kubeconfig.read_text())
    entry = next(c["context"] for c in config["contexts"] if c["name"] == context)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == entry["cluster"])
    return entry["cluster"], cluster["server"]


def with_contexts(
    kubeconfig: Path, into: Path, clusters: dict[str, dict[str, Any]], users: dict[str, Any]
) -> Path:
    """The fleet's kubeconfig with a context per `clusters` entry (named as it is, its
    cluster entry `NAME-cluster`, its user `users[NAME]` or the healthy cluster's token)."""
    config = yaml.safe_load(kubeconfig.read_text())
    token = next(u["user"] for u in config["users"] if u["name"] == "sim-oncall")
    for name, cluster in clusters.items():
        config["clusters"].append({"name": f"{name}-cluster", "cluster": cluster})
        config["users"].append({"name": f"{name}-user", "user": users.get(name, token)})
        config["contexts"].append(
            {"name": name, "context": {"cluster": f"{name}-cluster", "user": f"{name}-user"}}
        )
    into.write_text(yaml.safe_dump(config))
    return into


# -- every failed record names its cluster entry and server -------------------------------------


def test_each_failed_cluster_record_names_the_kubeconfig_cluster_and_server(
    fleet: tuple[SimFleet, Path],
) -> None:
    """The expired login fails before any connection is made; its record still names the
    cluster entry and server its context names, as the unreachable and refused ones do."""
    _served, kubeconfig = fleet
    for command in ("nodes", "diagnose"):
        done = mignurse(kubeconfig, "--context", WORKING, command, "-o", "json")
        assert done.returncode == 2, done.stderr
        found = records(done)
        assert found["prod-us"]["status"] == "credentials-expired"
        for context in ("prod-eu", "prod-us", "staging"):
            cluster, server = named(kubeconfig, context)
            assert (found[context]["cluster"], found[context]["server"]) == (cluster, server)
        assert found["prod-us"]["cluster"] == "ml-prod-usw2-prod-us"  # as docs/commands.md shows


def test_a_refused_kubeconfig_entry_names_what_it_can_and_masks_the_server_s_password(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    _cluster, server = named(kubeconfig, "sim-healthy")
    port = server.rsplit(":", 1)[1]
    broken = with_contexts(
        kubeconfig,
        tmp_path / "config",
        {
            "bad-ca": {"server": server, "certificate-authority-data": "%%% not base64"},
            "secret-url": {
                "server": f"https://oncall:hunter2-pass@127.0.0.1:{port}/?token=t0ps3cret",
                "certificate-authority-data": "%%% not base64",
            },
            "no-server": {"insecure-skip-tls-verify": True},
        },
        {},
    )
    done = mignurse(broken, "--context", "sim-healthy,bad-ca,secret-url,no-server", "nodes",
                    "-o", "json")  # fmt: skip
    assert done.returncode == 2, done.stderr
    found = records(done)
    assert found["sim-healthy"]["status"] == "connected"
    assert {c: found[c]["status"] for c in ("bad-ca", "secret-url", "no-server")} == {
        "bad-ca": "error",
        "secret-url": "error",
        "no-server": "error",
    }
    assert (found["bad-ca"]["cluster"], found["bad-ca"]["server"]) == ("bad-ca-cluster", server)
    assert found["secret-url"]["cluster"] == "secret-url-cluster"
    assert found["secret-url"]["server"] == f"https://***@127.0.0.1:{port}/?token=***"
    assert "hunter2" not in done.stdout + done.stderr and "t0ps3cret" not in done.stdout
    assert found["no-server"]["cluster"] == "no-server-cluster"
    assert "server" not in found["no-server"]  # the kubeconfig names none
    assert "has no server" in found["no-server"]["message"]


# -- a server that never answers, and one that cannot be connected to ---------------------------


def test_a_server_that_accepts_and_never_answers_is_timed_out_not_unreachable(
    fleet: tuple[SimFleet, Path],
) -> None:
    """With a deadline far off, the hung server's TLS handshake times out first: a
    connection was made, so the server is not answering, and says so."""
    _served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", "sim-healthy,prod-ap", "nodes", "-o", "json",
                    deadline="90")  # fmt: skip
    assert done.returncode == 2, done.stderr
    line = errors(done)["prod-ap"]
    assert line.startswith("mignurse: error: context 'prod-ap': timed out: "), line
    assert "accepted the connection but gave no answer to the TLS handshake within 5 s" in line
    assert "unreachable" not in line and "cannot reach" not in line
    record = records(done)["prod-ap"]
    assert record["status"] == "timed-out"
    assert (record["cluster"], record["server"]) == named(kubeconfig, "prod-ap")
    assert records(done)["sim-healthy"]["status"] == "connected"


def _read_version(client: Any) -> Any:
    return client.get_json("/version")


def _one_cluster(kubeconfig: Path, context: str) -> Any:
    from mignurse.cluster.fleet import FleetRequest, run_fleet

    request = FleetRequest(str(kubeconfig), (context,), _read_version, seconds=60, versions=False)
    (cluster,) = run_fleet(request)
    return cluster


def _kubeconfig_for(server: str, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "edge", "cluster": {"server": server}}],
        "users": [{"name": "oncall", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "oncall"}}],
        "current-context": "edge",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A plain HTTP port that accepts each connection, reads the request and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _address = listener.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in held:
        connection.close()


def test_a_request_the_server_never_answers_is_timed_out(
    silent_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.cluster import client

    monkeypatch.setattr(client, "READ_TIMEOUT", 1.0)  # an answer's first byte, not 60 s
    kubeconfig = _kubeconfig_for(f"http://127.0.0.1:{silent_server}", tmp_path / "config")
    cluster = _one_cluster(kubeconfig, "edge")
    assert cluster.status == "timed-out", cluster.message
    assert "accepted the connection but gave no answer to the request within 1 s" in (
        cluster.message
    )
    assert isinstance(cluster.error, client.Unreachable)  # retried as an unreachable one is
    assert (cluster.cluster, cluster.server) == ("edge", f"http://127.0.0.1:{silent_server}")


@pytest.fixture
def full_server() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops each new SYN, so a connection is
    never made and its attempt times out (as to an address whose packets are dropped)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    for _ in range(8):
        queued.append(socket.socket())
        queued[-1].setblocking(False)
        with contextlib.suppress(BlockingIOError):  # completed by the kernel, or queued
            queued[-1].connect(("127.0.0.1", port))
    probe = socket.socket()
    probe.settimeout(0.5)
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        pass
    else:
        pytest.skip("this kernel completes connections past a full accept queue")
    finally:
        probe.close()
    yield port
    listener.close()
    for connection in queued:
        connection.close()


def test_a_connection_that_cannot_be_made_in_time_stays_unreachable(
    full_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.cluster import client

    monkeypatch.setattr(client, "CONNECT_TIMEOUT", 0.5)
    kubeconfig = _kubeconfig_for(f"https://127.0.0.1:{full_server}", tmp_path / "config")
    cluster = _one_cluster(kubeconfig, "edge")
    assert cluster.status == "unreachable", cluster.message
    assert cluster.message.startswith(
        f"cannot reach the Kubernetes API at https://127.0.0.1:{full_server} (context 'edge'): "
        "timed out"
    )


# -- `aws eks get-token` failing: an expired login only when the aws CLI says so -----------------

# What the aws CLI writes on stderr (botocore's messages, aws/aws-cli v2: see
# mignurse/cluster/credentials.py), each as the CLI prints an error: a blank line, then the
# message, before v2.34 bare, from then on after `aws: [ERROR]: ` (awscli/errorformat.py).
AWS_SAYS = {
    "no-profile": (255, "aws: [ERROR]: The config profile (myprof) could not be found"),
    "no-sso-token": (255, "Error loading SSO Token: Token for my-sso does not exist"),
    "refresh-failed": (
        255,
        "aws: [ERROR]: Error when retrieving token from sso: Token has expired and refresh failed",
    ),
    "sso-expired": (
        255,
        "aws: [ERROR]: The SSO session associated with this profile has expired or is "
        "otherwise invalid. To refresh this SSO session run aws sso login with the "
        "corresponding profile.",
    ),
    "assume-role-denied": (
        254,
        "Warning: the urllib3 on this system is old\n\naws: [ERROR]: An error occurred "
        "(AccessDenied) when calling the AssumeRole operation: User: arn:aws:sts::1:x is not "
        "authorized to perform: sts:AssumeRole\n\nAdditional error details:\nReason: denied",
    ),
}


def _aws(folder: Path, said: str, code: int) -> str:
    """An `aws` that writes `said` on stderr as the aws CLI writes an error, and exits `code`."""
    folder.mkdir(parents=True)
    (folder / "said").write_text(f"\n{said}\n")
    script = folder / "aws"
    script.write_text(f"#!/bin/sh\ncat '{folder / 'said'}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


def _get_token(command: str, profile: str = "myprof") -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": ["--region", "us-west-2", "eks", "get-token", "--cluster-name", "prod"],
            "env": [{"name": "AWS_PROFILE", "value": profile}],
            "interactiveMode": "Never",
        }
    }


@pytest.fixture(scope="module")
def logins(fleet: tuple[SimFleet, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet's kubeconfig with a context per way `aws eks get-token` fails (AWS_SAYS),
    one whose `aws` is not there, and one whose plugin is no aws CLI and exits 1."""
    _served, kubeconfig = fleet
    folder = tmp_path_factory.mktemp("logins")
    _cluster, server = named(kubeconfig, "sim-healthy")
    users = {
        name: _get_token(_aws(folder / name, said, code)) for name, (code, said) in AWS_SAYS.items()
    }
    users["no-aws"] = _get_token(str(folder / "nowhere" / "aws"))
    other = folder / "other" / "kubelogin"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'error: get-token: refresh token is expired' >&2\nexit 1\n")
    other.chmod(0o755)
    users["other-plugin"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                 "command": str(other), "args": ["get-token", "--oidc-issuer-url", "x"]}
    }  # fmt: skip
    clusters = {name: {"server": server, "insecure-skip-tls-verify": True} for name in users}
    return with_contexts(kubeconfig, folder / "config", clusters, users)


def test_only_an_sso_login_to_renew_is_expired_credentials_with_aws_sso_login(
    logins: Path,
) -> None:
    selection = ",".join([*AWS_SAYS, "no-aws", "other-plugin"])
    done = mignurse(logins, "--context", selection, "nodes", "-o", "json")
    assert done.returncode == 2, done.stderr  # a user's problem, as every failed cluster's
    found, lines = records(done), errors(done)
    for name in ("no-sso-token", "refresh-failed", "sso-expired"):
        assert found[name]["status"] == "credentials-expired", found[name]
        assert found[name]["login"] == "aws sso login --profile myprof"
        assert lines[name].startswith(
            f"mignurse: error: context '{name}': credentials expired: run `aws sso login "
            "--profile myprof`: credential plugin `aws eks get-token` failed (exit 255): "
        )
    assert AWS_SAYS["sso-expired"][1] in lines["sso-expired"]
    for name in ("no-profile", "assume-role-denied", "no-aws"):
        assert found[name]["status"] == "error", found[name]
        assert "login" not in found[name]
        assert "aws sso login" not in lines[name] and "expired" not in lines[name]
    assert lines["no-profile"] == (
        "mignurse: error: context 'no-profile': failed: credential plugin `aws eks get-token` "
        "failed (exit 255): aws: [ERROR]: The config profile (myprof) could not be found"
    )
    # the CLI's own error line, not the warning before it or the details after it
    assert lines["assume-role-denied"].endswith(
        "failed (exit 254): aws: [ERROR]: An error occurred (AccessDenied) when calling the "
        "AssumeRole operation: User: arn:aws:sts::1:x is not authorized to perform: "
        "sts:AssumeRole"
    )
    assert "credential plugin `aws eks get-token` was not found" in lines["no-aws"]
    # a plugin whose words mignurse does not know: renewed by running it, as documented
    assert found["other-plugin"]["status"] == "credentials-expired"
    assert found["other-plugin"]["login"].endswith("kubelogin get-token --oidc-issuer-url x")
    for name in [*AWS_SAYS, "no-aws", "other-plugin"]:
        assert found[name]["cluster"] == f"{name}-cluster"
        assert found[name]["server"] == named(logins, name)[1]


def test_one_context_whose_aws_profile_is_missing_is_its_one_line(logins: Path) -> None:
    done = mignurse(logins, "--context", "no-profile", "nodes")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "mignurse: error: context 'no-profile': credential plugin `aws eks get-token` failed "
        "(exit 255): aws: [ERROR]: The config profile (myprof) could not be found\n"
    )
