"""The core that reads several clusters (`cluster/fleet.py`): bounded, each cluster on its
own, the kubeconfig read once, and a cluster that never ends given up on past its budget
while the others are kept."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mignurse.cluster import fleet, kubeconfig
from mignurse.cluster.fleet import FleetRequest, run_fleet


class _Version(http.server.BaseHTTPRequestHandler):
    """An API server that answers only `/version` (the reads here are the test's own)."""

    def do_GET(self) -> None:
        body = b'{"gitVersion": "v1.32.3-eks-4096722"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Version)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{served.server_address[1]}"
    served.shutdown()
    served.server_close()


def write_kubeconfig(path: Path, count: int, server: str) -> list[str]:
    """`count` contexts, each its own cluster entry, all on `server`."""
    names = [f"region-{i:03d}" for i in range(count)]
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": n, "cluster": {"server": server}} for n in names],
                "users": [{"name": "oncall", "user": {"token": "t0ken"}}],
                "contexts": [
                    {"name": n, "context": {"cluster": n, "user": "oncall"}} for n in names
                ],
                "current-context": names[0],
            }
        )
    )
    return names


def test_forty_clusters_are_read_at_most_eight_at_once_each_into_its_own_cluster(
    tmp_path: Path, server: str
) -> None:
    names = write_kubeconfig(tmp_path / "config", 40, server)
    lock = threading.Lock()
    running = [0]
    most = [0]

    def read(client: Any) -> str:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return client.info.cluster

    clusters = run_fleet(FleetRequest(str(tmp_path / "config"), tuple(names), read))
    assert [c.context for c in clusters] == names
    assert all(c.connected for c in clusters), [c.message for c in clusters if not c.connected]
    assert [c.result for c in clusters] == names
    assert {c.version for c in clusters} == {"v1.32.3-eks-4096722"}
    assert 1 <= most[0] <= fleet.PARALLEL


def test_a_kubeconfig_of_many_contexts_is_parsed_once_for_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    names = write_kubeconfig(tmp_path / "config", 300, server)
    reads = []
    original = kubeconfig.read_kubeconfig

    def counted(path: str) -> dict[str, Any]:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(kubeconfig, "read_kubeconfig", counted)
    clusters = run_fleet(
        FleetRequest(str(tmp_path / "config"), tuple(names), lambda c: c.info.context)
    )
    assert [c.result for c in clusters] == names
    assert len(reads) == 1


def test_a_cluster_that_never_answers_is_given_up_and_the_others_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """A read that ignores every deadline (a stand-in for what the client could not bound)
    is left behind once its budget has passed; the others' results are whole."""
    names = write_kubeconfig(tmp_path / "config", 3, server)
    monkeypatch.setattr(fleet, "GRACE_SECONDS", 0.5)
    monkeypatch.setenv("MIGNURSE_CREDENTIAL_PLUGIN_SECONDS", "1")
    never = threading.Event()
    progress: list[str] = []

    def read(client: Any) -> str:
        if client.info.context == "region-001":
            never.wait()  # until the test ends
        return client.info.context

    try:
        clusters = run_fleet(
            FleetRequest(str(tmp_path / "config"), tuple(names), read, seconds=1),
            progress=lambda cluster: progress.append(cluster.context),
        )
    finally:
        never.set()
    assert [c.status for c in clusters] == ["connected", "timed-out", "connected"]
    assert [c.result for c in clusters] == ["region-000", None, "region-002"]
    assert "gave no answer within" in clusters[1].message
    assert sorted(progress) == names  # each told once, the given-up one too


def test_a_cluster_that_fails_to_connect_is_an_error_beside_the_connected(
    tmp_path: Path, server: str
) -> None:
    names = write_kubeconfig(tmp_path / "config", 2, server)
    clusters = run_fleet(
        FleetRequest(str(tmp_path / "config"), (*names, "gone"), lambda c: c.info.context)
    )
    assert [c.status for c in clusters] == ["connected", "connected", "error"]
    assert "context 'gone' not found" in clusters[2].message


@pytest.mark.parametrize(
    "seconds, words",
    [(7.4, "clock 7s ahead"), (-345585, "clock 3d23h behind"), (-90, "clock 90s behind")],
)
def test_a_clusters_clock_skew_is_worded_as_an_age_ahead_or_behind(
    seconds: float, words: str
) -> None:
    from mignurse.session import skew_words

    assert skew_words(seconds) == words
