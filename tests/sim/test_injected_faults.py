"""The faults the simulator injects for the runbook trials answer as kube-apiserver answers
them: a 429 with Retry-After as API Priority and Fairness sends it, a concurrent writer whose
write lands between a client's read and its write (409), and an API server restart that drops
every connection, ends watches and comes back on the same address."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from simhelpers import Http

from mignurse.cluster.client import NODES, ClusterClient, Conflict, Unreachable
from mignurse.sim import SimCluster, load_scenario


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    started = SimCluster(
        load_scenario("healthy"), speed=0, start=datetime(2026, 11, 20, tzinfo=UTC)
    ).start()
    yield started
    started.stop()


def _node(sim: SimCluster) -> str:
    return sorted(n["metadata"]["name"] for n in sim.objects("nodes"))[0]


def test_a_throttled_request_says_when_to_come_back(sim: SimCluster) -> None:
    node = _node(sim)
    sim.fail("GET", f"/nodes/{node}$", code=429, times=1, retry_after=40)
    req = urllib.request.Request(
        f"{sim.url}/api/v1/nodes/{node}", headers={"Authorization": f"Bearer {sim.token}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=10, context=sim.ssl_context())

    assert refused.value.code == 429
    assert refused.value.headers["Retry-After"] == "40"
    body = refused.value.read()
    assert b'"reason":"TooManyRequests"' in body and b'"retryAfterSeconds":40' in body
    assert b"Too many requests, please try again later." in body
    assert Http(sim).get(f"/api/v1/nodes/{node}")[0] == 200  # once only


def test_a_concurrent_writer_lands_first_and_the_write_is_a_conflict(
    sim: SimCluster, tmp_path: Path
) -> None:
    node = _node(sim)
    client = ClusterClient.connect(str(sim.write_kubeconfig(tmp_path / "kubeconfig")))

    def other_client(s: SimCluster) -> None:
        client.patch(NODES, node, {"metadata": {"labels": {"team": "other"}}})

    race = sim.race("PATCH", f"/nodes/{node}$", other_client)
    with pytest.raises(Conflict) as refused:
        client.patch(NODES, node, {"spec": {"unschedulable": True}})

    assert "the object has been modified" in str(refused.value)
    assert race.hits == 1
    current = client.get(NODES, node)
    assert current["metadata"]["labels"]["team"] == "other"  # the other write landed
    assert not current["spec"].get("unschedulable")  # this one did not
    client.patch(NODES, node, {"spec": {"unschedulable": True}})  # a fresh try goes through
    client.close()


def test_a_restart_drops_connections_ends_watches_and_comes_back(
    sim: SimCluster, tmp_path: Path
) -> None:
    client = ClusterClient.connect(str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    port = int(sim.url.rsplit(":", 1)[1])
    ended = threading.Event()

    def watch() -> None:
        req = urllib.request.Request(
            f"{sim.url}/api/v1/nodes?watch=true&timeoutSeconds=60",
            headers={"Authorization": f"Bearer {sim.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60, context=sim.ssl_context()) as resp:
                resp.read()
        except (OSError, http.client.HTTPException):
            pass  # a drop between chunks is an OSError, one inside a chunk IncompleteRead
        finally:
            ended.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    time.sleep(0.3)
    down = threading.Thread(target=sim.restart, kwargs={"down": 1.5}, daemon=True)
    down.start()

    assert ended.wait(10), "the watch outlived the restart"
    time.sleep(0.3)
    with pytest.raises(Unreachable):
        client.get(NODES, _node(sim))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    down.join(10)
    assert sim.url.endswith(f":{port}") and sim.restarts == 1
    assert client.get(NODES, _node(sim))["metadata"]["name"] == _node(sim)
    client.close()
