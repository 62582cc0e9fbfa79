"""What the simulated API server does the way kube-apiserver v1.34.4 does it, as the real
control plane tier (tests/upstream, docs/simulator-fidelity.md) found it."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable

from simhelpers import Http

from mignurse.sim import SimCluster
from mignurse.sim.scenario import parse_scenario

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_every_nodes_memory_is_the_canonical_quantity_the_api_server_stores(
    dcgm: SimCluster,
) -> None:
    # resource.Quantity's canonical form, as kube-apiserver stores and serves it: 67108864Ki
    # comes back as 64Gi, so a whole number of a larger binary unit never keeps a smaller one
    seen = set()
    for node in dcgm.objects("nodes"):
        for part in ("capacity", "allocatable"):
            value = node["status"][part]["memory"]
            number, suffix = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|Pi|Ei)", value).groups()  # type: ignore[union-attr]
            assert suffix == "Ei" or int(number) % 1024, f"{value} is not canonical"
            seen.add(value)
    assert seen  # the scenario has nodes


def test_the_node_table_describes_its_columns_as_the_api_server_does(dcgm: SimCluster) -> None:
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    request = urllib.request.Request(
        dcgm.url + f"/api/v1/nodes/{name}",
        headers={"Authorization": f"Bearer {dcgm.token}", "Accept": TABLE},
    )
    with urllib.request.urlopen(request, timeout=10, context=dcgm.ssl_context()) as answer:
        table = json.loads(answer.read())
    described = {c["name"]: c["description"] for c in table["columnDefinitions"]}
    assert described["OS-Image"] == (
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."
    )
    assert described["Internal-IP"].startswith(
        "List of addresses reachable to the node. Queried from cloud provider, if available."
    )
    assert described["Internal-IP"] == described["External-IP"]


def test_a_dry_run_delete_of_a_node_answers_terminating_and_deletes_nothing(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    node = next(n for n in dcgm.objects("nodes") if n["metadata"].get("finalizers"))
    name = node["metadata"]["name"]

    status, answer = http.request("DELETE", f"/api/v1/nodes/{name}?dryRun=All")

    assert status == 200
    assert answer["metadata"]["deletionTimestamp"]  # what the delete would do: its finalizer
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 0  # keeps it Terminating
    status, stored = http.get(f"/api/v1/nodes/{name}")
    assert status == 200
    assert "deletionTimestamp" not in stored["metadata"]
    dcgm.advance(120)
    assert name in {n["metadata"]["name"] for n in dcgm.objects("nodes")}
    assert not any(c["metadata"].get("deletionTimestamp") for c in dcgm.objects("nodeclaims"))


def test_a_node_leaving_a_watchs_selector_is_deleted_with_the_labels_it_matched(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    _, nodes = http.get("/api/v1/nodes?labelSelector=team%3Dblue")
    rv = nodes["metadata"]["resourceVersion"]
    merge = "application/merge-patch+json"
    http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"team": "blue"}}},
        content_type=merge,
    )
    _, left = http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"team": None}}},
        content_type=merge,
    )

    frames = http.watch(
        f"/api/v1/nodes?watch=true&labelSelector=team%3Dblue&resourceVersion={rv}&timeoutSeconds=1"
    )

    deleted = frames[-1]
    assert deleted["type"] == "DELETED"
    assert deleted["object"]["metadata"]["labels"]["team"] == "blue"
    assert deleted["object"]["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]


def test_a_patch_of_a_media_type_no_route_consumes_is_go_restfuls_415(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    name = dcgm.objects("nodes")[0]["metadata"]["name"]

    status, body = http.request("PATCH", f"/api/v1/nodes/{name}", {}, content_type="text/plain")

    assert status == 415
    assert (body["reason"], body["message"], body["details"]) == (
        "UnsupportedMediaType",
        "415: Unsupported Media Type",
        {},
    )


def test_a_cordon_is_followed_by_the_unschedulable_taint_stamped_with_its_time(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    merge = "application/merge-patch+json"
    http.request(
        "PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}}, content_type=merge
    )

    dcgm.advance(10)

    _, node = http.get(f"/api/v1/nodes/{name}")
    taint = next(
        t for t in node["spec"]["taints"] if t["key"] == "node.kubernetes.io/unschedulable"
    )
    assert taint["effect"] == "NoSchedule"
    assert taint["timeAdded"]  # the node lifecycle controller's SwapNodeControllerTaint sets it


def test_deleting_a_pod_disruption_budget_answers_a_success_status_naming_it(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "doomed"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "none"}}},
    }
    _, created = http.request("POST", path, budget)

    status, answer = http.request("DELETE", f"{path}/doomed")

    assert status == 200
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": "doomed",
            "group": "policy",
            "kind": "poddisruptionbudgets",
            "uid": created["metadata"]["uid"],
        },
    }
    assert http.get(f"{path}/doomed")[0] == 404


SILENT = """
name: silent
seed: 3
karpenter: {version: 1.9.0, nodeRepair: true}
nodePools:
  - name: gpu-train
    instanceType: p5.48xlarge
    nodes: 1
    existing:
      - count: 1
        age: 5d
        names: [ip-10-0-1-1.us-west-2.compute.internal]
    workload: {name: train, namespace: training, podsPerNode: 1}
timeline:
  - at: 30s
    node: ip-10-0-1-1.us-west-2.compute.internal
    kubelet: stop
"""


def test_a_silent_nodes_unreachable_taints_are_stamped_with_their_time(
    make_sim: Callable[..., SimCluster],
) -> None:
    # Kubernetes v1.34.4 with kwok (tests/upstream/test_karpenter_runbooks.py): once a node's
    # heartbeat stops for the grace period, the node lifecycle controller adds
    # node.kubernetes.io/unreachable NoSchedule and NoExecute, both with timeAdded
    # (pkg/controller/util/node/controller_utils.go SwapNodeControllerTaint stamps every taint
    # it adds); the simulator left the NoSchedule one unstamped.
    sim = make_sim(parse_scenario(SILENT, "silent.yaml"))
    sim.advance(5 * 60)

    node = sim.objects("nodes")[0]
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    unreachable = {
        t["effect"]: t
        for t in node["spec"]["taints"]
        if t["key"] == "node.kubernetes.io/unreachable"
    }
    assert set(unreachable) == {"NoSchedule", "NoExecute"}
    assert unreachable["NoSchedule"].get("timeAdded")
    assert unreachable["NoSchedule"]["timeAdded"] == unreachable["NoExecute"]["timeAdded"]
