"""Answers over 128 KiB come gzipped when asked, as kube-apiserver sends them; mignurse asks
for gzip from an API server on another machine and reads the same objects either way, and
asks nothing of one on this machine (where compressing only spends CPU on both ends)."""

from __future__ import annotations

import gzip
import http.client
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster import client as client_module
from mignurse.cluster.client import NODES, PODS, ClusterClient, on_this_machine
from mignurse.model import Node, Pod
from mignurse.sim import SimCluster, load_scenario


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    cluster = SimCluster(
        load_scenario("dcgm-repair-loop"), speed=0, start=datetime(2026, 11, 20, tzinfo=UTC)
    ).start()
    try:
        yield cluster, cluster.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    finally:
        cluster.stop()


def _get(cluster: SimCluster, path: str, encoding: str | None) -> http.client.HTTPResponse:
    context = ssl.create_default_context(cadata=cluster.tls.ca_pem.decode())
    host, port = cluster.url.removeprefix("https://").rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    headers = {"Authorization": f"Bearer {cluster.token}", "Accept": "application/json"}
    if encoding is not None:
        headers["Accept-Encoding"] = encoding
    connection.request("GET", path, headers=headers)
    return connection.getresponse()


def test_the_simulator_gzips_a_large_answer_only_when_asked(
    sim: tuple[SimCluster, Path],
) -> None:
    cluster, _ = sim
    plain = _get(cluster, "/api/v1/pods", None)
    body = plain.read()
    assert plain.getheader("Content-Encoding") is None
    assert len(body) > 128 * 1024
    for asked in ("gzip", "deflate, gzip", "br,gzip;q=1"):
        zipped = _get(cluster, "/api/v1/pods", asked)
        data = zipped.read()
        if asked.endswith(";q=1"):  # not the bare token apiserver looks for: not compressed
            assert zipped.getheader("Content-Encoding") is None
            continue
        assert zipped.getheader("Content-Encoding") == "gzip"
        assert zipped.getheader("Vary") == "Accept-Encoding"
        assert len(data) < len(body) / 4
        assert gzip.decompress(data) == body
    small = _get(cluster, "/api/v1/namespaces", "gzip")
    assert small.getheader("Content-Encoding") is None
    assert len(small.read()) <= 128 * 1024


def test_a_remote_server_is_asked_for_gzip_and_read_the_same(
    sim: tuple[SimCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _cluster, kubeconfig = sim
    plain = ClusterClient.connect(kubeconfig=str(kubeconfig))
    assert "Accept-Encoding" not in plain._headers  # the simulator is on 127.0.0.1
    monkeypatch.setattr(client_module, "on_this_machine", lambda server: False)
    zipped = ClusterClient.connect(kubeconfig=str(kubeconfig))
    assert zipped._headers["Accept-Encoding"] == "gzip"
    encodings: list[str] = []
    inflater = client_module._Inflater

    def spied(raw: Any, what: str) -> Any:
        encodings.append(str(raw.headers.get("Content-Encoding")))
        return inflater(raw, what)

    try:
        nodes = plain.list(NODES, Node.from_api).items
        pods = plain.list(PODS, Pod.from_api).items
        monkeypatch.setattr(client_module, "_Inflater", spied)
        assert zipped.list(NODES, Node.from_api).items == nodes
        assert zipped.list(PODS, Pod.from_api).items == pods
        assert encodings.count("gzip") == 2  # both over 128 KiB, both read from gzip
    finally:
        plain.close()
        zipped.close()


@pytest.mark.parametrize(
    ("server", "here"),
    [
        ("https://127.0.0.1:6443", True),
        ("https://127.4.5.6", True),
        ("https://[::1]:443", True),
        ("https://localhost:8443", True),
        ("https://api.localhost", True),
        ("https://0A1B2C.gr7.us-west-2.eks.amazonaws.com", False),
        ("https://10.0.12.7", False),
        ("https://[fd00::1]:443", False),
        ("https://bad host", False),
    ],
)
def test_which_servers_are_on_this_machine(server: str, here: bool) -> None:
    assert on_this_machine(server) is here
