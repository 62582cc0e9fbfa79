"""Kubeconfigs with the mistakes people make by hand: a server that is no URL or has no
scheme, an empty file in $KUBECONFIG, a folder for the file, a context naming a user no file
defines, certificates and keys that are not PEM. Each is read as kubectl reads it, or
refused in one line naming the entry and the file (exit 2), never an internal error."""

from __future__ import annotations

import base64
import copy
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.tls import make_serving_cert

from .inputs import mignurse, one_line_error


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "prod",
        "clusters": [{"name": "prod", "cluster": cluster}],
        "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "prod"}}],
        "users": [{"name": "prod", "user": user}],
    }


def written(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def healthy() -> Iterator[SimCluster]:
    sim = SimCluster(load_scenario("healthy"), speed=0).start()
    yield sim
    sim.stop()


def nodes_listed(sim: SimCluster, stdout: str) -> bool:
    return any(node["metadata"]["name"] in stdout for node in sim.objects("nodes"))


# -- the server ------------------------------------------------------------------------------

NO_URLS = {
    "an unclosed IPv6 bracket": "https://[::1",
    "a lone closing bracket": "https://a]b:1",
    "an OSC escape": "https://x\x1b]0;x\x07:1",
    "a port that is no number": "https://127.0.0.1:https",
    "a host:port with a path": "127.0.0.1:1/api",
}


@pytest.mark.parametrize("case", sorted(NO_URLS))
def test_a_server_that_is_no_url_is_refused_naming_cluster_and_file(
    tmp_path: Path, case: str
) -> None:
    server = NO_URLS[case]
    path = written(tmp_path / "config", kubeconfig({"server": server}, {"token": "t0ken"}))
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    shown = server.replace("\x1b", "\\x1b").replace("\x07", "\\x07")  # made inert
    assert f"cluster 'prod' in {path}: server '{shown}' is not a URL: fix it in the kubeconfig" in (
        err
    )


def test_a_server_that_is_no_url_fails_only_its_own_context(
    tmp_path: Path, healthy: SimCluster
) -> None:
    config = healthy.kubeconfig()
    good = config["contexts"][0]["name"]
    config["clusters"].append({"name": "bad", "cluster": {"server": "https://[::1"}})
    user = config["contexts"][0]["context"]["user"]
    config["contexts"].append({"name": "broken", "context": {"cluster": "bad", "user": user}})
    path = written(tmp_path / "config", config)
    result = mignurse("--kubeconfig", str(path), "--all-contexts", "nodes", timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "internal error" not in result.stderr, result.stderr[-2000:]
    assert f"context 'broken': failed: cluster 'bad' in {path}: server 'https://[::1'" in (
        result.stderr
    )
    assert good in result.stdout and nodes_listed(healthy, result.stdout)


def test_a_server_without_a_scheme_gets_one_as_kubectl_gives_it(
    tmp_path: Path, healthy: SimCluster
) -> None:
    """A host:port is https:// where the cluster has a CA (as client-go's rest
    `DefaultServerURL` puts it), and no urllib3 warning is printed."""
    config = healthy.kubeconfig()
    cluster = config["clusters"][0]["cluster"]
    cluster["server"] = cluster["server"].removeprefix("https://")
    path = written(tmp_path / "config", config)
    result = mignurse("--kubeconfig", str(path), "nodes", "-o", "json", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""
    assert nodes_listed(healthy, result.stdout)


def test_a_server_without_a_scheme_or_tls_is_plain_http(tmp_path: Path) -> None:
    port = closed_port()
    config = kubeconfig({"server": f"127.0.0.1:{port}"}, {"token": "t0ken"})
    path = written(tmp_path / "config", config)
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert f"cannot reach the Kubernetes API at http://127.0.0.1:{port} " in err


# -- the files -------------------------------------------------------------------------------


def test_an_empty_file_in_the_kubeconfig_list_is_an_empty_config(
    tmp_path: Path, healthy: SimCluster
) -> None:
    """As kubectl reads it (client-go tools/clientcmd/loader.go `Load`): merged like any."""
    empty = tmp_path / "empty"
    empty.write_text("")
    comments = tmp_path / "comments"
    comments.write_text("# written by a script that failed\n\n")
    real = written(tmp_path / "config", healthy.kubeconfig())
    listing = os.pathsep.join(map(str, (empty, comments, real)))
    result = mignurse("nodes", env={"KUBECONFIG": listing}, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert nodes_listed(healthy, result.stdout)
    # Nothing but empty files: no context to use, said in one line.
    only_empty = os.pathsep.join(map(str, (empty, comments)))
    err = one_line_error(mignurse("nodes", env={"KUBECONFIG": only_empty}, timeout=60))
    assert f"kubeconfig {only_empty} is empty: run `aws eks update-kubeconfig" in err


def test_a_folder_given_as_kubeconfig_says_what_to_give(tmp_path: Path) -> None:
    err = one_line_error(mignurse("--kubeconfig", str(tmp_path), "nodes", timeout=60))
    assert err.endswith(
        f"kubeconfig {tmp_path} is a folder: give the kubeconfig file, not its folder"
    )


# -- the user --------------------------------------------------------------------------------


def test_a_user_no_file_defines_is_a_note_and_kubectl_goes_on(
    tmp_path: Path, healthy: SimCluster
) -> None:
    """client-go takes a missing user for an empty one (tools/clientcmd/client_config.go
    `getAuthInfo`): the request goes without credentials, and the API server answers."""
    config = healthy.kubeconfig()
    config["contexts"][0]["context"]["user"] = "ghost"
    context = config["contexts"][0]["name"]
    path = written(tmp_path / "config", config)
    result = mignurse("--kubeconfig", str(path), "nodes", timeout=60)
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"note: context '{context}' in {path} names user 'ghost', which no file of it "
        "defines: connecting without credentials, as kubectl does"
    ), result.stderr[-2000:]
    assert result.returncode == 2 and len(lines) == 2
    assert lines[1].startswith("mignurse: error: ") and "401 Unauthorized" in lines[1]


# -- certificates and keys -------------------------------------------------------------------

SERVING = make_serving_cert("prod")
OTHER = make_serving_cert("other")
JUNK = base64.b64encode(b"this is not PEM").decode()


def b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def tls_kubeconfig(port: int) -> dict[str, Any]:
    cluster = {
        "server": f"https://127.0.0.1:{port}",
        "certificate-authority-data": b64(SERVING.ca_pem),
    }
    user = {
        "client-certificate-data": b64(SERVING.cert_pem),
        "client-key-data": b64(SERVING.key_pem),
    }
    return kubeconfig(cluster, user)


NOT_PEM = {
    "certificate-authority-data": (
        ("clusters", "cluster", "certificate-authority-data", JUNK),
        "cluster 'prod' in {path}: certificate-authority-data is not a PEM certificate: fix it "
        "in the kubeconfig",
    ),
    "client-certificate-data": (
        ("users", "user", "client-certificate-data", JUNK),
        "user 'prod' in {path}: client-certificate-data is not a PEM certificate: fix it in "
        "the kubeconfig",
    ),
    "client-key-data": (
        ("users", "user", "client-key-data", JUNK),
        "user 'prod' in {path}: client-key-data is not a PEM private key: fix it in the kubeconfig",
    ),
    "another certificate's client-key-data": (
        ("users", "user", "client-key-data", b64(OTHER.key_pem)),
        "user 'prod' in {path}: client-key-data is not the key of its client certificate: fix "
        "it in the kubeconfig",
    ),
    "a certificate-authority file": (
        ("clusters", "cluster", "certificate-authority", "ca.crt"),
        "cluster 'prod' in {path}: certificate-authority {folder}/ca.crt is not a PEM "
        "certificate: fix the file",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_PEM))
def test_a_certificate_or_key_that_is_not_pem_names_the_kubeconfig_field(
    tmp_path: Path, case: str
) -> None:
    (entries, kind, key, value), said = NOT_PEM[case]
    config = copy.deepcopy(tls_kubeconfig(closed_port()))
    body = config[entries][0][kind]
    if key == "certificate-authority":
        del body["certificate-authority-data"]
        (tmp_path / "ca.crt").write_text("not PEM either\n")
    body[key] = value
    path = written(tmp_path / "config", config)
    err = one_line_error(mignurse("--kubeconfig", str(path), "nodes", timeout=60))
    assert said.format(path=path, folder=tmp_path) in err
    assert "cannot reach" not in err and "PEM lib" not in err
