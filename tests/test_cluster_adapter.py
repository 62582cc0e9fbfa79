"""The cluster adapter through the real kubernetes client against the simulated API server."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from mignurse.cluster.client import (
    NODES,
    ClusterClient,
    Expired,
    Forbidden,
    KubeconfigError,
    Unauthorized,
    Unreachable,
)
from mignurse.cluster.load import load_snapshot
from mignurse.cluster.snapshot import ClusterState
from mignurse.cluster.watcher import ClusterWatcher
from mignurse.model import Node
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario import scenario_path


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_lists_every_node_in_pages(healthy: tuple[SimCluster, Path]) -> None:
    sim, kubeconfig = healthy
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    listing = client.list(NODES, Node.from_api, limit=3)
    assert sorted(n.name for n in listing.items) == sorted(
        o["metadata"]["name"] for o in sim.objects("nodes")
    )
    node_lists = [r for r in sim.requests if r["path"] == "/api/v1/nodes"]
    assert any("continue" in r["query"] for r in node_lists), "paging never used continue"
    assert all(r["query"].get("limit") == "3" for r in node_lists[-2:])
    assert listing.resource_version


def test_kubeconfig_env_and_context_are_honoured(
    healthy: tuple[SimCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, kubeconfig = healthy
    monkeypatch.setenv("KUBECONFIG", f"/nonexistent/config:{kubeconfig}")
    client = ClusterClient.connect()
    assert client.info.context == sim.scenario.context_name
    assert client.info.server == sim.url


def test_a_wrong_context_names_the_ones_that_exist(healthy: tuple[SimCluster, Path]) -> None:
    sim, kubeconfig = healthy
    with pytest.raises(KubeconfigError) as err:
        ClusterClient.connect(kubeconfig=str(kubeconfig), context="prod-does-not-exist")
    message = str(err.value)
    assert "'prod-does-not-exist' not found" in message
    assert sim.scenario.context_name in message
    assert "\n" not in message


def test_a_missing_kubeconfig_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="does not exist"):
        ClusterClient.connect(kubeconfig=str(tmp_path / "nope"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_one_line(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _sim, kubeconfig = healthy
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{_closed_port()}"
    dead = tmp_path / "dead"
    dead.write_text(yaml.safe_dump(config))
    client = ClusterClient.connect(kubeconfig=str(dead))
    started = time.monotonic()
    with pytest.raises(Unreachable) as err:
        client.list(NODES, Node.from_api)
    assert time.monotonic() - started < 60  # given up on, not retried for minutes
    assert "connection refused" in str(err.value)
    assert "\n" not in str(err.value)


def test_refused_credentials_say_refresh(healthy: tuple[SimCluster, Path], tmp_path: Path) -> None:
    _sim, kubeconfig = healthy
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "expired-token"}
    bad = tmp_path / "bad"
    bad.write_text(yaml.safe_dump(config))
    client = ClusterClient.connect(kubeconfig=str(bad))
    with pytest.raises(Unauthorized, match="401"):
        client.list(NODES, Node.from_api)


def test_clock_follows_the_server_date_header(healthy: tuple[SimCluster, Path]) -> None:
    sim, kubeconfig = healthy
    sim.advance(600)  # the cluster's clock ten minutes ahead of this machine's
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    began = time.monotonic()
    client.list(NODES, Node.from_api)
    # The sim's clock is manual, so the client's (the Date header plus the real time since)
    # runs ahead of it by the real time that passed (the header is whole seconds). A client
    # on this machine's clock would be ten minutes behind.
    gap = (client.server_now() - sim.now()).total_seconds()
    assert -1 <= gap <= time.monotonic() - began + 1


def scenario_file(tmp_path: Path, base: str, **changes: object) -> Path:
    """A shipped scenario with top-level keys changed, written to a file."""
    data = yaml.safe_load(scenario_path(base).read_text())
    data.update(changes)
    path = tmp_path / f"{base}-variant.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_rbac_refusal_names_verb_and_resource(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path, "healthy", rbac={"deny": [{"verb": "list", "resource": "nodes"}]}
    )
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        client = ClusterClient.connect(kubeconfig=str(kubeconfig))
        with pytest.raises(Forbidden) as err:
            load_snapshot(client)
    assert (err.value.verb, err.value.resource) == ("list", "nodes")
    assert "RBAC refused: cannot list nodes" in str(err.value)


def test_refused_nodeclaims_degrade_to_a_notice(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path, "healthy", rbac={"deny": [{"verb": "list", "resource": "nodeclaims"}]}
    )
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        loaded = load_snapshot(client)
    assert loaded.snapshot.nodes
    assert any("cannot list nodeclaims.karpenter.sh" in n for n in loaded.notices)


def test_without_karpenter_crds_features_turn_off_with_one_notice(tmp_path: Path) -> None:
    data = yaml.safe_load(scenario_path("healthy").read_text())
    data["nodeGroups"] += data.pop("nodePools")  # the same nodes, without Karpenter
    data["karpenter"] = None
    path = tmp_path / "no-karpenter.yaml"
    path.write_text(yaml.safe_dump(data))
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        loaded = load_snapshot(client)
    assert not loaded.snapshot.karpenter
    assert len(loaded.notices) == 1
    assert "Karpenter CRDs" in loaded.notices[0]
    assert loaded.snapshot.gpu_nodes()  # GPU nodes are still found without NodeClaims


def test_karpenter_s_lists_are_asked_for_beside_the_nodes_without_a_discovery_first(
    healthy: tuple[SimCluster, Path],
) -> None:
    sim, kubeconfig = healthy
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    already = len(sim.requests)
    loaded = load_snapshot(client)
    paths = [r["path"] for r in sim.requests[already:]]
    assert loaded.snapshot.karpenter and loaded.snapshot.nodeclaims and loaded.notices == []
    assert "/apis/karpenter.sh/v1/nodeclaims" in paths
    assert "/apis/karpenter.sh/v1" not in paths  # only where a list fails is the group asked


@pytest.mark.parametrize("karpenter", [True, False])
def test_a_refused_nodeclaim_list_is_told_from_a_cluster_without_karpenter(
    tmp_path: Path, karpenter: bool
) -> None:
    """RBAC refuses a list before the API server looks for its resource: a refusal on a
    cluster without Karpenter still reads as no Karpenter, one on a cluster with it as a
    refusal."""
    data = yaml.safe_load(scenario_path("healthy").read_text())
    if not karpenter:
        data["nodeGroups"] += data.pop("nodePools")
        data["karpenter"] = None
    data["rbac"] = {"deny": [{"verb": "list", "resource": "nodeclaims"}]}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        loaded = load_snapshot(client)
    assert loaded.snapshot.karpenter is karpenter
    assert len(loaded.notices) == 1
    said = "cannot list nodeclaims.karpenter.sh" if karpenter else "Karpenter CRDs"
    assert said in loaded.notices[0]


def test_watch_from_a_compacted_version_raises_expired(healthy: tuple[SimCluster, Path]) -> None:
    sim, kubeconfig = healthy
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    listing = client.list(NODES, Node.from_api)
    cordoned = client.patch(NODES, listing.items[0].name, {"spec": {"unschedulable": True}})
    assert cordoned["spec"]["unschedulable"] is True
    sim.compact()
    with pytest.raises(Expired):
        for _event in client.watch(NODES, listing.resource_version, timeout_seconds=2):
            pass


def test_watcher_follows_a_repair_and_relists_after_410(tmp_path: Path) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        state = ClusterState()
        watcher = ClusterWatcher(client, state, karpenter=True, watch_timeout=1)
        watcher.start()
        try:
            assert watcher.wait_synced(15)
            assert state.counts()["nodes"] == len(sim.objects("nodes"))
            lists_before = _node_lists(sim)
            # An API server outage: watches drop, time passes, history is compacted.
            with sim.outage():
                sim.advance(20 * 60)  # a repair and a replacement happen meanwhile
                sim.compact()
            wanted = {o["metadata"]["name"] for o in sim.objects("nodes")}
            wait_for(lambda: set(state.snapshot().nodes) == wanted, timeout=30)
            assert _node_lists(sim) > lists_before, "the watcher never listed again after 410"
        finally:
            watcher.stop()


def _node_lists(sim: SimCluster) -> int:
    return sum(
        1
        for r in sim.requests
        if r["path"] == "/api/v1/nodes" and r["query"].get("watch") not in ("true", "1")
    )


def test_node_pods_uses_a_field_selector_and_puts_gpu_users_first(
    healthy: tuple[SimCluster, Path],
) -> None:
    from mignurse.cluster.load import node_pods

    sim, kubeconfig = healthy
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    node = next(
        o["metadata"]["name"]
        for o in sim.objects("nodes")
        if o["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )
    pods = node_pods(client, node)
    expected = {
        p["metadata"]["name"] for p in sim.objects("pods") if p["spec"].get("nodeName") == node
    }
    assert {p.name for p in pods} == expected
    assert pods[0].uses_gpu and pods[0].gpu_requests == {"nvidia.com/gpu": 8}
    assert not pods[-1].uses_gpu  # DaemonSet pods after the workload
    assert any(r["query"].get("fieldSelector") == f"spec.nodeName={node}" for r in sim.requests)


def test_events_past_the_list_cap_are_cut_with_a_notice_and_the_rest_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        nodes, events = len(sim.objects("nodes")), len(sim.objects("events"))
        assert nodes < 40 < events  # the cap below falls between them
        monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "40")
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        loaded = load_snapshot(client, with_events=True)
    finally:
        sim.stop()
    assert len(loaded.snapshot.nodes) == nodes
    assert len(loaded.snapshot.events) == 40
    assert any(
        n.startswith("only the first 40 events of a list were read (MIGNURSE_MAX_LIST_ITEMS raises")
        for n in loaded.notices
    ), loaded.notices


def test_events_about_one_object_follow_a_relist_and_each_watch_change() -> None:
    """A node with one event and a node with several, through LIST, ADDED, MODIFIED and
    DELETED: the per-object index keeps what the node's detail shows right."""
    from mignurse.model import Event

    def raw(name: str, node: str, second: int, message: str = "XID 79") -> dict[str, object]:
        return {
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": node},
            "reason": "AcceleratedHardwareReady",
            "message": message,
            "lastTimestamp": f"2026-11-29T02:00:{second:02d}Z",
        }

    state = ClusterState()
    state.replace("events", [Event.from_api(raw("a.1", "a", 1))])
    state.apply("events", "ADDED", raw("b.1", "b", 2))
    assert [e.name for e in state.node_events("a")] == ["a.1"]
    state.apply("events", "ADDED", raw("a.2", "a", 3))
    state.apply("events", "ADDED", raw("a.3", "a", 4))
    state.apply("events", "MODIFIED", raw("a.1", "a", 5, "XID 79 again"))
    assert [e.name for e in state.node_events("a")] == ["a.2", "a.3", "a.1"]
    assert state.node_events("a")[-1].message == "XID 79 again"
    state.apply("events", "DELETED", raw("a.2", "a", 3))
    state.apply("events", "DELETED", raw("b.1", "b", 2))
    state.apply("events", "MODIFIED", raw("b.2", "b", 6))
    assert [e.name for e in state.node_events("a")] == ["a.3", "a.1"]
    assert [e.name for e in state.node_events("b")] == ["b.2"]
    state.apply("events", "DELETED", raw("b.2", "b", 6))
    assert state.node_events("b") == [] and state.node_events("nowhere") == []
    assert len(state.snapshot().events) == 2


def test_every_connection_of_a_client_shares_one_tls_context(
    healthy: tuple[SimCluster, Path],
) -> None:
    """The CA is loaded into one context for the client, not into a new one per connection
    (urllib3's own way); a CA that cannot be loaded is left to urllib3, which says so."""
    from mignurse.cluster.transport import Configuration, RestClient

    _sim, kubeconfig = healthy
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    shared = client.api.rest_client.pool_manager.connection_pool_kw["ssl_context"]
    method, url, headers, _ = client.api.param_serialize(
        "GET", "/version", auth_settings=["BearerToken"]
    )
    held = [client.api.call_api(method, url, headers) for _ in range(2)]  # two connections
    try:
        assert all(answer.status == 200 for answer in held)
        sockets = [answer.response.connection.sock for answer in held]
        assert sockets[0] is not sockets[1]
        assert {id(sock.context) for sock in sockets} == {id(shared)}
    finally:
        for answer in held:
            answer.response.release_conn()

    broken = Configuration()
    broken.host = "https://127.0.0.1:1"
    broken.ca_cert_data = "not a certificate"
    kw = RestClient(broken).pool_manager.connection_pool_kw
    assert "ssl_context" not in kw and kw["ca_cert_data"] == "not a certificate"


def test_what_a_watcher_may_watch_is_all_a_recording_counts_as_its_own() -> None:
    """`mignurse watch` takes a failed list of these (and only these) for its recording's: an
    auto-collect's 404 listing the GPU operator's ClusterPolicy on a cluster without the
    operator is no failure of the recording (cli/watch.py `_connect_recording`)."""
    from mignurse.cluster.watcher import WATCHED_PLURALS

    for karpenter in (False, True):
        for dra in ("", "v1", "v1beta1"):
            watcher = ClusterWatcher(cast(Any, None), ClusterState(), karpenter=karpenter,
                                     dra_version=dra)  # fmt: skip
            assert {r.plural for r in watcher.resources} <= WATCHED_PLURALS
    assert "clusterpolicies" not in WATCHED_PLURALS and "pods" not in WATCHED_PLURALS
