"""`run_collect`: one request in, the whole collection done, each step told to the face."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cluster.client import ClusterClient, ContextInfo
from mignurse.collect.access import Access
from mignurse.collect.events import NODE_DONE, NODE_STEP, STARTED, CollectEvent
from mignurse.collect.request import CollectRequest, run_collect
from mignurse.collect.run import CollectError
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as cluster:
        yield cluster


def _client(sim: SimCluster, tmp_path: Path) -> ClusterClient:
    return ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))


def test_the_unhealthy_nodes_are_chosen_collected_and_each_step_told(
    sim: SimCluster, tmp_path: Path
) -> None:
    client = _client(sim, tmp_path)
    events: list[CollectEvent] = []
    try:
        collected = run_collect(
            CollectRequest(
                client,
                out=tmp_path,
                unhealthy=True,
                access=Access(sandbox_shells=sandbox_shells),
                simulated=True,
            ),
            events.append,
        )
    finally:
        client.close()
    assert collected.nodes and collected.manifest is not None and collected.out is not None
    names = {n.name for n in collected.nodes}
    (started,) = [e for e in events if e.kind == STARTED]
    assert events.index(started) < min(i for i, e in enumerate(events) if e.node)
    assert (started.nodes, started.out, started.transport) == (len(names), collected.out, "sim")
    assert started.text == "6 hours ago"
    assert collected.out.parent == tmp_path and collected.out.name.startswith(
        f"mignurse-bundle-{client.info.context}-"
    )
    assert {e.node for e in events if e.kind == NODE_STEP} == names
    done = {e.node: e for e in events if e.kind == NODE_DONE}
    assert set(done) == names
    for name, event in done.items():
        record = collected.manifest["nodes"][name]
        assert (event.ok, event.bytes, event.files) == (
            record["ok"],
            record["bytes"],
            record["files"],
        )
        assert event.ok and event.bytes > 0 and event.files > 0
    with tarfile.open(collected.out) as bundle:
        assert any(m.name.endswith("/manifest.json") for m in bundle.getmembers())


def test_an_unknown_pool_is_one_error_before_any_step(sim: SimCluster, tmp_path: Path) -> None:
    client = _client(sim, tmp_path)
    events: list[CollectEvent] = []
    try:
        collected = run_collect(
            CollectRequest(client, out=tmp_path, nodepool="no-such-pool"), events.append
        )
    except CollectError as exc:
        assert "no nodes in NodePool or node group 'no-such-pool'" in str(exc)
    else:
        pytest.fail(f"collected {collected}")
    finally:
        client.close()
    assert [e for e in events if e.kind != "notice"] == []
    assert list(tmp_path.glob("*.tar.gz")) == []


def test_an_eks_context_named_by_its_arn_gives_one_file_in_the_folder(tmp_path: Path) -> None:
    """`aws eks update-kubeconfig` names the context after the cluster's ARN, `…/NAME`."""
    from datetime import UTC, datetime

    from mignurse.collect.request import _bundle_name

    class Client:
        info = ContextInfo("arn:aws:eks:us-west-2:111122223333:cluster/prod", "", "https://x", "me")

    request = CollectRequest(Client(), label="ip-10-0-1-2")  # type: ignore[arg-type]
    name = _bundle_name(request, datetime(2026, 12, 6, 3, 0, tzinfo=UTC))
    assert "/" not in name
    assert name == (
        "mignurse-bundle-arn:aws:eks:us-west-2:111122223333:cluster_prod-ip-10-0-1-2-"
        "20261206T030000Z.tar.gz"
    )


def test_a_folder_that_does_not_exist_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    from mignurse.collect.request import bundle_path

    with pytest.raises(CollectError, match=r"cannot write .*/gone/b.tar.gz: folder .*/gone does"):
        bundle_path(tmp_path / "gone" / "b.tar.gz", "ignored")
    assert bundle_path(tmp_path, "b.tar.gz") == tmp_path / "b.tar.gz"
