"""The sim's HTTP API behaves like kube-apiserver for the verbs mignurse uses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from simhelpers import Http, kube

from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario import parse_scenario

GPU_POOL = "karpenter.sh/nodepool=gpu-inference"


def test_list_nodes_with_label_and_field_selectors(dcgm: SimCluster) -> None:
    v1 = client.CoreV1Api(kube(dcgm))
    gpu = v1.list_node(label_selector=GPU_POOL)
    assert len(gpu.items) == 3
    assert all(n.metadata.labels["karpenter.sh/nodepool"] == "gpu-inference" for n in gpu.items)
    not_cpu = v1.list_node(
        label_selector="karpenter.sh/nodepool notin (general),nvidia.com/gpu.present"
    )
    assert {n.metadata.labels["karpenter.sh/nodepool"] for n in not_cpu.items} == {
        "gpu-inference",
        "gpu-batch",
        "gpu-train",
    }
    assert not v1.list_node(label_selector="!kubernetes.io/hostname").items
    one = gpu.items[0].metadata.name
    by_name = v1.list_node(field_selector=f"metadata.name={one}")
    assert [n.metadata.name for n in by_name.items] == [one]
    assert v1.list_node(field_selector="spec.unschedulable=false").items
    ready = v1.list_event_for_all_namespaces(field_selector="reason=NodeReady,source=kubelet").items
    fresh = ready[0].involved_object.name
    events = v1.list_event_for_all_namespaces(
        field_selector=f"involvedObject.name={fresh},type=Normal"
    )
    assert events.items and all(e.involved_object.name == fresh for e in events.items)
    assert v1.list_event_for_all_namespaces(field_selector="type!=Normal").items


def test_realistic_node_shape(dcgm: SimCluster) -> None:
    node = next(
        n
        for n in dcgm.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )
    labels = node["metadata"]["labels"]
    assert node["metadata"]["name"].endswith(".us-west-2.compute.internal")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["karpenter.k8s.aws/instance-gpu-count"] == "8"
    assert 30 <= len(node["status"]["images"]) <= 50
    assert len(labels) >= 40
    assert node["spec"]["providerID"].startswith("aws:///us-west-2a/i-0")
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.32")


def test_paging_with_limit_and_continue(dcgm: SimCluster) -> None:
    v1 = client.CoreV1Api(kube(dcgm))
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = v1.list_node(limit=4, _continue=token)
        pages += 1
        seen += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 10 - len(seen)
    assert pages == 3
    assert seen == sorted(seen) and len(set(seen)) == 10
    assert [r["query"].get("limit") for r in dcgm.requests if r["path"] == "/api/v1/nodes"] == [
        "4"
    ] * 3


def test_compacted_continue_token_is_410(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    status, page = http.get("/api/v1/nodes?limit=2")
    assert status == 200
    name = page["items"][0]["metadata"]["name"]
    http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    dcgm.compact()
    status, body = http.get(f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}")
    assert status == 410
    assert body["reason"] == "Expired" and body["code"] == 410
    assert body["message"].startswith("The provided continue parameter is too old")


def test_list_items_have_no_kind_but_watch_objects_do(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, nodes = http.get("/api/v1/nodes")
    assert nodes["kind"] == "NodeList" and nodes["apiVersion"] == "v1"
    assert "kind" not in nodes["items"][0]
    frames = http.watch("/api/v1/nodes?watch=true&timeoutSeconds=1")
    assert frames[0]["type"] == "ADDED" and frames[0]["object"]["kind"] == "Node"
    assert len(frames) == len(nodes["items"])


def test_watch_replays_from_resource_version_and_410_after_compaction(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, claims = http.get("/apis/karpenter.sh/v1/nodeclaims")
    rv = claims["metadata"]["resourceVersion"]
    dcgm.advance(900)  # the cycling node is repaired and replaced
    frames = http.watch(
        f"/apis/karpenter.sh/v1/nodeclaims?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    )
    types = {f["type"] for f in frames}
    assert {"ADDED", "MODIFIED", "DELETED"} <= types
    assert all(f["object"]["kind"] == "NodeClaim" for f in frames)
    dcgm.compact()
    frames = http.watch(
        f"/apis/karpenter.sh/v1/nodeclaims?watch=1&resourceVersion={rv}&timeoutSeconds=5"
    )
    assert len(frames) == 1 and frames[0]["type"] == "ERROR"
    status = frames[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {rv} (")


def test_watch_through_the_kubernetes_client_sees_cordon(dcgm: SimCluster) -> None:
    v1 = client.CoreV1Api(kube(dcgm))
    nodes = v1.list_node(label_selector=GPU_POOL)
    name = nodes.items[0].metadata.name
    v1.patch_node(name, {"spec": {"unschedulable": True}})
    w = watch.Watch()
    events = list(
        w.stream(v1.list_node, resource_version=nodes.metadata.resource_version, timeout_seconds=1)
    )
    assert any(e["type"] == "MODIFIED" and e["object"].spec.unschedulable for e in events)


def test_bookmarks_carry_only_the_resource_version(
    make_sim: Callable[..., SimCluster], http_for: Callable[[SimCluster], Http]
) -> None:
    sim = make_sim("healthy")
    sim.bookmark_interval = 0.2
    http = http_for(sim)
    _, nodes = http.get("/api/v1/nodes")
    rv = nodes["metadata"]["resourceVersion"]
    frames = http.watch(
        f"/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=3"
    )
    bookmarks = [f for f in frames if f["type"] == "BOOKMARK"]
    assert bookmarks
    assert bookmarks[0]["object"] == {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv},
    }


def test_watch_with_label_selector_turns_a_label_removal_into_deleted(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, nodes = http.get("/api/v1/nodes?labelSelector=team%3Dblue")
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    rv = nodes["metadata"]["resourceVersion"]
    http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"team": "blue"}}},
        content_type="application/merge-patch+json",
    )
    http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"team": None}}},
        content_type="application/merge-patch+json",
    )
    frames = http.watch(
        f"/api/v1/nodes?watch=true&labelSelector=team%3Dblue&resourceVersion={rv}&timeoutSeconds=1"
    )
    assert [f["type"] for f in frames] == ["ADDED", "DELETED"]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/merge-patch+json", {"metadata": {"labels": {"mignurse.io/lock": "alice"}}}),
        (
            "application/strategic-merge-patch+json",
            {"metadata": {"labels": {"mignurse.io/lock": "alice"}}},
        ),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/metadata/labels/mignurse.io~1lock", "value": "alice"}],
        ),
    ],
)
def test_patch_types_on_nodes(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http], content_type: str, body: object
) -> None:
    http = http_for(dcgm)
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    _, before = http.get(f"/api/v1/nodes/{name}")
    status, after = http.request("PATCH", f"/api/v1/nodes/{name}", body, content_type=content_type)
    assert status == 200, after
    assert after["metadata"]["labels"]["mignurse.io/lock"] == "alice"
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["kind"] == "Node"


def test_strategic_merge_uses_merge_keys_and_patch_delete(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    node = next(
        n
        for n in dcgm.objects("nodes")
        if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu-train"
    )
    name = node["metadata"]["name"]
    smp = "application/strategic-merge-patch+json"
    status, after = http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"spec": {"taints": [{"key": "mignurse.io/collecting", "effect": "NoSchedule"}]}},
        content_type=smp,
    )
    assert status == 200
    keys = [t["key"] for t in after["spec"]["taints"]]
    assert keys == ["nvidia.com/gpu", "mignurse.io/collecting"]
    status, after = http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"spec": {"taints": [{"key": "mignurse.io/collecting", "$patch": "delete"}]}},
        content_type=smp,
    )
    assert [t["key"] for t in after["spec"]["taints"]] == ["nvidia.com/gpu"]
    cond = {
        "type": "AcceleratedHardwareReady",
        "status": "False",
        "reason": "DCGMError",
        "message": "x",
    }
    status, after = http.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        {"status": {"conditions": [cond]}},
        content_type=smp,
    )
    assert status == 200
    types = [c["type"] for c in after["status"]["conditions"]]
    assert types.count("AcceleratedHardwareReady") == 1 and "Ready" in types
    # The main resource ignores status, as the real node strategy does.
    status, after = http.request(
        "PATCH", f"/api/v1/nodes/{name}", {"status": {"capacity": {"cpu": "1"}}}, content_type=smp
    )
    assert after["status"]["capacity"]["cpu"] == "192"


def test_stale_resource_version_is_409(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    _, node = http.get(f"/api/v1/nodes/{name}")
    rv = node["metadata"]["resourceVersion"]
    lock = {"metadata": {"resourceVersion": rv, "annotations": {"mignurse.io/lock": "a"}}}
    assert (
        http.request(
            "PATCH", f"/api/v1/nodes/{name}", lock, content_type="application/merge-patch+json"
        )[0]
        == 200
    )
    status, body = http.request(
        "PATCH", f"/api/v1/nodes/{name}", lock, content_type="application/merge-patch+json"
    )
    assert status == 409
    assert body["reason"] == "Conflict"
    assert (
        "the object has been modified; please apply your changes to the latest version "
        "and try again" in body["message"]
    )


def test_unsupported_patch_type_is_415(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    claim = dcgm.objects("nodeclaims")[0]["metadata"]["name"]
    status, body = http.request(
        "PATCH",
        f"/apis/karpenter.sh/v1/nodeclaims/{claim}",
        {"metadata": {}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    node = dcgm.objects("nodes")[0]["metadata"]["name"]
    assert http.request("PATCH", f"/api/v1/nodes/{node}", {}, content_type="text/plain")[0] == 415


def test_cordon_through_the_client_and_custom_objects_patch(dcgm: SimCluster) -> None:
    api = kube(dcgm)
    v1 = client.CoreV1Api(api)
    name = v1.list_node(label_selector=GPU_POOL).items[0].metadata.name
    assert v1.patch_node(name, {"spec": {"unschedulable": True}}).spec.unschedulable is True
    assert [
        n.metadata.name for n in v1.list_node(field_selector="spec.unschedulable=true").items
    ] == [name]
    co = client.CustomObjectsApi(api)
    claim = co.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"][0][
        "metadata"
    ]["name"]
    patched = co.patch_cluster_custom_object(
        "karpenter.sh", "v1", "nodeclaims", claim, {"metadata": {"annotations": {"x": "y"}}}
    )
    assert patched["metadata"]["annotations"]["x"] == "y"


def test_forbidden_by_a_declared_deny_rule(make_sim: Callable[..., SimCluster]) -> None:
    base = load_scenario("dcgm-repair-loop")
    text = (
        Path(base.source).read_text()
        + "\nrbac:\n  deny:\n"
        + "    - {verb: list, resource: nodeclaims}\n"
        + "    - {verb: patch, resource: nodes}\n"
        + "    - {verb: create, resource: pods/eviction, namespace: inference}\n"
    )
    sim = make_sim(parse_scenario(text, "denied.yaml"))
    api = kube(sim)
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api).list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")
    assert err.value.status == 403
    body = json.loads(err.value.body)
    assert body["reason"] == "Forbidden"
    assert (
        body["message"]
        == 'nodeclaims.karpenter.sh is forbidden: User "sim:oncall" cannot list resource '
        '"nodeclaims" in API group "karpenter.sh" at the cluster scope'
    )
    v1 = client.CoreV1Api(api)
    name = v1.list_node().items[0].metadata.name
    with pytest.raises(ApiException) as err:
        v1.patch_node(name, {"spec": {"unschedulable": True}})
    assert (
        json.loads(err.value.body)["message"]
        == f'nodes "{name}" is forbidden: User "sim:oncall" cannot patch resource "nodes" '
        'in API group "" at the cluster scope'
    )
    pod = v1.list_namespaced_pod("inference").items[0].metadata.name
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod_eviction(
            pod, "inference", client.V1Eviction(metadata=client.V1ObjectMeta(name=pod))
        )
    assert 'in the namespace "inference"' in json.loads(err.value.body)["message"]
    assert client.CustomObjectsApi(api).get_cluster_custom_object(
        "karpenter.sh", "v1", "nodepools", "gpu-inference"
    )


def test_unauthorized_without_token(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    status, body = http_for(dcgm).get("/api/v1/nodes", token=None)
    assert status == 401 and body["reason"] == "Unauthorized"
    assert http_for(dcgm).get("/api/v1/nodes", token="wrong")[0] == 401


def test_karpenter_group_absent_without_karpenter(
    make_sim: Callable[..., SimCluster], http_for: Callable[[SimCluster], Http]
) -> None:
    text = (
        "name: plain\nnodeGroups:\n"
        "  - {name: ng-gpu, instanceType: g6.xlarge, nodes: 1, existing: [{count: 1, age: 2d}]}\n"
    )
    sim = make_sim(parse_scenario(text, "plain.yaml"))
    http = http_for(sim)
    _, groups = http.get("/apis")
    assert "karpenter.sh" not in [g["name"] for g in groups["groups"]]
    assert http.get("/apis/karpenter.sh/v1")[0] == 404
    status, body = http.get("/apis/karpenter.sh/v1/nodeclaims")
    assert status == 404 and body["reason"] == "NotFound"
    node = http.get("/api/v1/nodes")[1]["items"][0]
    assert node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "ng-gpu"
    assert "karpenter.sh/nodepool" not in node["metadata"]["labels"]


def test_discovery_and_not_found(dcgm: SimCluster, http_for: Callable[[SimCluster], Http]) -> None:
    http = http_for(dcgm)
    _, resources = http.get("/apis/karpenter.sh/v1")
    assert {"nodeclaims", "nodepools"} <= {r["name"] for r in resources["resources"]}
    assert http.get("/version")[1]["gitVersion"].startswith("v1.32")
    status, body = http.get("/api/v1/nodes/nope")
    assert status == 404 and body["message"] == 'nodes "nope" not found'
    status, body = http.get("/api/v1/nodes?fieldSelector=spec.bogus%3D1")
    assert status == 400 and body["message"] == "field label not supported: spec.bogus"


def test_date_header_follows_the_sim_clock(dcgm: SimCluster) -> None:
    import urllib.request
    from email.utils import parsedate_to_datetime

    req = urllib.request.Request(
        dcgm.url + "/version", headers={"Authorization": f"Bearer {dcgm.token}"}
    )
    before = dcgm.now()
    with urllib.request.urlopen(req, context=dcgm.ssl_context()) as resp:
        served = parsedate_to_datetime(resp.headers["Date"])
    after = dcgm.now()
    # the header is whole seconds, taken between the two readings of the sim's clock
    assert before.replace(microsecond=0) <= served <= after


def test_kubeconfig_file_works(dcgm: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kubernetes import config as kconfig

    path = dcgm.write_kubeconfig(tmp_path / "kubeconfig")
    api = kconfig.new_client_from_config(str(path))
    assert client.CoreV1Api(api).list_namespace().items
    assert dcgm.kubeconfig()["current-context"] == "sim-dcgm-repair-loop"


# --------------------------------------------------------------------------- kubectl's API surface

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _get(sim: SimCluster, path: str, accept: str = "application/json") -> tuple[int, Any, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        sim.url + path, headers={"Authorization": f"Bearer {sim.token}", "Accept": accept}
    )
    try:
        with urllib.request.urlopen(req, timeout=30, context=sim.ssl_context()) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.headers, json.loads(err.read())


def test_a_not_ready_node_prints_as_kube_apiserver_prints_it(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-hook-notready")
    status, _, table = _get(sim, "/api/v1/nodes", TABLE)
    assert status == 200 and table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:5] == ["Name", "Status", "Roles", "Age", "Version"]
    assert [c["priority"] for c in table["columnDefinitions"]][5:] == [1] * 5
    cells = {row["cells"][0]: row["cells"] for row in table["rows"]}
    not_ready = [
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if any(c["type"] == "Ready" and c["status"] != "True" for c in n["status"]["conditions"])
    ]
    assert not_ready and all(cells[n][1].startswith("NotReady") for n in not_ready)
    row = table["rows"][0]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert "labels" in row["object"]["metadata"]
    _, _, claims = _get(sim, "/apis/karpenter.sh/v1/nodeclaims", TABLE)
    columns = [c["name"] for c in claims["columnDefinitions"]]
    assert columns[:7] == ["Name", "Type", "Capacity", "Zone", "Node", "Ready", "Age"]


def test_aggregated_discovery_names_eviction_in_policy_v1(dcgm: SimCluster) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, headers, core = _get(dcgm, "/api", accept)
    assert status == 200 and headers["Content-Type"] == accept
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    eviction = next(s for s in pods["subresources"] if s["subresource"] == "eviction")
    assert eviction["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    _, _, groups = _get(dcgm, "/apis", accept)
    served = {
        (g["metadata"]["name"], r["resource"])
        for g in groups["items"]
        for r in g["versions"][0]["resources"]
    }
    assert {
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("coordination.k8s.io", "leases"),
        ("karpenter.k8s.aws", "ec2nodeclasses"),
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    } <= served
    _, _, legacy = _get(dcgm, "/api/v1")
    entry = next(r for r in legacy["resources"] if r["name"] == "pods/eviction")
    assert (entry["group"], entry["version"], entry["kind"]) == ("policy", "v1", "Eviction")


def test_exact_list_at_an_old_version_and_410_once_compacted(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, before = http.get("/api/v1/nodes")
    rv = before["metadata"]["resourceVersion"]
    name = before["items"][0]["metadata"]["name"]
    http.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"metadata": {"labels": {"team": "red"}}},
        content_type="application/merge-patch+json",
    )
    status, at = http.get(f"/api/v1/nodes?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert status == 200 and at["metadata"]["resourceVersion"] == rv
    old = next(n for n in at["items"] if n["metadata"]["name"] == name)
    assert "team" not in old["metadata"]["labels"]
    _, latest = http.get(f"/api/v1/nodes?resourceVersion={rv}&resourceVersionMatch=NotOlderThan")
    assert (
        next(n for n in latest["items"] if n["metadata"]["name"] == name)["metadata"]["labels"][
            "team"
        ]
        == "red"
    )
    dcgm.compact()
    status, body = http.get(f"/api/v1/nodes?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"] == "The resourceVersion for the provided list is too old."


def test_a_version_from_the_future_times_out_as_too_large(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    future = dcgm.store.rv + 1000
    status, body = http.get(f"/api/v1/nodes?resourceVersion={future}")
    assert (status, body["reason"]) == (504, "Timeout")
    assert body["message"] == f"Too large resource version: {future}, current: {dcgm.store.rv}"
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_continue_pages_are_one_snapshot(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, page = http.get("/api/v1/nodes?limit=3")
    _, everything = http.get("/api/v1/nodes")
    later = everything["items"][-1]["metadata"]["name"]
    http.request(
        "PATCH",
        f"/api/v1/nodes/{later}",
        {"metadata": {"labels": {"team": "red"}}},
        content_type="application/merge-patch+json",
    )
    seen = list(page["items"])
    token = page["metadata"]["continue"]
    while token:
        _, page = http.get(f"/api/v1/nodes?limit=3&continue={token}")
        assert page["metadata"]["resourceVersion"] == everything["metadata"]["resourceVersion"]
        seen += page["items"]
        token = page["metadata"].get("continue")
    last = next(n for n in seen if n["metadata"]["name"] == later)
    assert "team" not in last["metadata"]["labels"]


def test_continue_pages_select_on_the_labels_of_their_version(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    """A paged, selected list goes on at its first page's version: a node relabelled between
    pages is judged by its labels then (apiserver's etcd3 store lists the later pages at that
    revision), and a list begun after the change is judged by the change."""
    http = http_for(dcgm)

    def label(name: str, team: str) -> None:
        http.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            {"metadata": {"labels": {"team": team}}},
            content_type="application/merge-patch+json",
        )

    def red(between: dict[str, str], delete: str = "") -> list[str]:
        """The red nodes, a page of one at a time; `between` relabelled after the first,
        and `delete` deleted."""
        _, page = http.get("/api/v1/nodes?limit=1&labelSelector=team%3Dred")
        version = page["metadata"]["resourceVersion"]
        seen = [n["metadata"]["name"] for n in page["items"]]
        for name, team in between.items():
            label(name, team)
        if delete:
            status, _ = http.request("DELETE", f"/api/v1/nodes/{delete}")
            assert status == 200
        token = page["metadata"].get("continue")
        while token:
            _, page = http.get(f"/api/v1/nodes?limit=1&labelSelector=team%3Dred&continue={token}")
            assert page["metadata"]["resourceVersion"] == version
            seen += [n["metadata"]["name"] for n in page["items"]]
            token = page["metadata"].get("continue")
        return seen

    names = sorted(n["metadata"]["name"] for n in dcgm.objects("nodes"))
    assert len(names) >= 5
    for i, name in enumerate(names):
        label(name, "red" if i % 2 == 0 else "none")
    evens = names[::2]
    assert red({names[1]: "red", names[2]: "blue"}) == evens
    # the first list's version is kept for its pages; this one is at a later version
    assert red({names[3]: "red"}) == [names[0], names[1], *names[4::2]]
    assert red({}, delete=names[4]) == [names[0], names[1], names[3], *names[4::2]]
    assert names[4] not in red({names[0]: "none"})


def test_a_busy_resource_forgets_old_versions_but_a_quiet_one_replays(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    _, claims = http.get("/apis/karpenter.sh/v1/nodeclaims")
    rv = claims["metadata"]["resourceVersion"]
    name = dcgm.objects("nodes")[0]["metadata"]["name"]
    for i in range(150):  # 150 node writes over 150 s: past the cache's 100 events and 75 s
        http.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            {"metadata": {"labels": {"step": str(i)}}},
            content_type="application/merge-patch+json",
        )
        dcgm.advance(1)
    frames = http.watch(f"/api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert [f["type"] for f in frames] == ["ERROR"]
    assert frames[0]["object"]["code"] == 410
    assert frames[0]["object"]["message"].startswith(f"too old resource version: {rv} (")
    frames = http.watch(
        f"/apis/karpenter.sh/v1/nodeclaims?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    )
    assert all(f["type"] != "ERROR" for f in frames)


def test_watch_tables_carry_column_definitions_once(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    import urllib.request

    req = urllib.request.Request(
        dcgm.url + "/api/v1/nodes?watch=1&timeoutSeconds=1",
        headers={"Authorization": f"Bearer {dcgm.token}", "Accept": TABLE},
    )
    with urllib.request.urlopen(req, timeout=30, context=dcgm.ssl_context()) as resp:
        frames = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert all(f["object"]["kind"] == "Table" for f in frames)
    assert frames[0]["object"]["columnDefinitions"]
    assert all(f["object"]["columnDefinitions"] is None for f in frames[1:])


def test_put_needs_the_current_version_and_a_valid_nodepool(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    path = "/apis/karpenter.sh/v1/nodepools/gpu-inference"
    _, pool = http.get(path)
    pool["spec"]["weight"] = 50
    status, after = http.request("PUT", path, pool)
    assert status == 200 and after["metadata"]["generation"] == pool["metadata"]["generation"] + 1
    status, body = http.request("PUT", path, pool)
    assert (status, body["reason"]) == (409, "Conflict")
    unconditional = json.loads(json.dumps(after))
    del unconditional["metadata"]["resourceVersion"]
    status, body = http.request("PUT", path, unconditional)
    assert status == 422 and "metadata.resourceVersion" in body["message"]
    bad = json.loads(json.dumps(after))
    bad["spec"]["template"]["spec"]["requirements"].append(
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}
    )
    status, body = http.request("PUT", path, bad)
    assert status == 422
    assert 'label "kubernetes.io/hostname" is restricted' in body["message"]
    assert body["details"]["causes"][0]["field"].startswith("spec.template.spec.requirements[")
    status, body = http.request(
        "PATCH",
        path + "?fieldValidation=Strict",
        {"spec": {"wieght": 5}},
        content_type="application/merge-patch+json",
    )
    assert status == 400 and 'strict decoding error: unknown field "spec.wieght"' in body["message"]
    status, body = http.request(
        "PATCH", path, {"spec": {"weight": 0}}, content_type="application/merge-patch+json"
    )
    assert status == 422
    assert body["message"] == (
        'NodePool.karpenter.sh "gpu-inference" is invalid: spec.weight: Invalid value: 0: '
        "spec.weight in body should be greater than or equal to 1"
    )


def test_server_side_apply_conflicts_name_the_owner(
    dcgm: SimCluster, http_for: Callable[[SimCluster], Http]
) -> None:
    http = http_for(dcgm)
    path = "/apis/karpenter.sh/v1/nodepools/gpu-batch"
    apply_type = "application/apply-patch+yaml"
    config = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu-batch"},
    }
    status, body = http.request(
        "PATCH", path, {**config, "spec": {"weight": 5}}, content_type=apply_type
    )
    assert status == 422 and "fieldManager: Required value" in body["message"]
    status, first = http.request(
        "PATCH",
        path + "?fieldManager=gitops",
        {**config, "spec": {"weight": 5}},
        content_type=apply_type,
    )
    assert status == 200 and first["spec"]["weight"] == 5
    owners = {m["manager"] for m in first["metadata"]["managedFields"]}
    assert owners == {"before-first-apply", "gitops"}
    status, body = http.request(
        "PATCH",
        path + "?fieldManager=oncall",
        {**config, "spec": {"weight": 9}},
        content_type=apply_type,
    )
    assert status == 409
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "gitops": .spec.weight'
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "gitops"',
            "field": ".spec.weight",
        }
    ]
    status, forced = http.request(
        "PATCH",
        path + "?fieldManager=oncall&force=true",
        {**config, "spec": {"weight": 9}},
        content_type=apply_type,
    )
    assert status == 200 and forced["spec"]["weight"] == 9


def test_can_i_in_protobuf_follows_the_scenarios_deny_rules(
    make_sim: Callable[..., SimCluster],
) -> None:
    import urllib.request

    base = load_scenario("dcgm-repair-loop")
    text = (
        Path(base.source).read_text()
        + "\nrbac:\n  deny:\n    - {verb: delete, resource: nodeclaims}\n"
    )
    sim = make_sim(parse_scenario(text, "denied.yaml"))

    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    def review(verb: str, resource: str) -> dict[str, Any]:
        attrs = field(2, verb.encode()) + field(3, b"karpenter.sh") + field(5, resource.encode())
        raw = field(2, field(1, attrs))
        type_meta = field(1, b"authorization.k8s.io/v1") + field(2, b"SelfSubjectAccessReview")
        body = b"k8s\x00" + field(1, type_meta) + field(2, raw)
        req = urllib.request.Request(
            sim.url + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {sim.token}",
                "Content-Type": "application/vnd.kubernetes.protobuf",
                "Accept": "application/vnd.kubernetes.protobuf,application/json",
            },
        )
        with urllib.request.urlopen(req, timeout=10, context=sim.ssl_context()) as resp:
            return json.loads(resp.read())

    assert review("delete", "nodeclaims")["status"]["allowed"] is False
    allowed = review("list", "nodeclaims")
    assert allowed["status"]["allowed"] is True
    assert allowed["spec"]["resourceAttributes"]["resource"] == "nodeclaims"


def test_crds_are_the_published_ones_of_the_scenarios_release(dcgm: SimCluster) -> None:
    status, _, crd = _get(
        dcgm, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh"
    )
    assert status == 200 and crd["kind"] == "CustomResourceDefinition"
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1"
    assert {c["name"] for c in version["additionalPrinterColumns"]} >= {
        "NodeClass",
        "Nodes",
        "Ready",
    }
    assert dcgm.crds is not None and dcgm.crds.tag == "v1.4.0"
    status, _, doc = _get(dcgm, "/openapi/v3/apis/karpenter.sh/v1")
    patch = doc["paths"]["/apis/karpenter.sh/v1/nodepools/{name}"]["patch"]
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def test_a_body_named_otherwise_than_its_url_is_400(dcgm: SimCluster) -> None:
    """kube-apiserver refuses a PUT or a server-side apply whose metadata.name is not the
    name on the URL (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go, v1.32)."""
    v1 = client.CoreV1Api(kube(dcgm))
    node = v1.list_node(label_selector=GPU_POOL).items[0]
    name = node.metadata.name
    node.metadata.name = "someone-else"
    with pytest.raises(ApiException) as err:
        v1.replace_node(name, node)
    assert err.value.status == 400
    assert "does not match the name on the URL" in json.loads(err.value.body)["message"]
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "someone-else"}}
    with pytest.raises(ApiException) as err:
        v1.patch_node(
            name, body, field_manager="test", _content_type="application/apply-patch+yaml"
        )
    assert err.value.status == 400
    assert "does not match the name on the URL" in json.loads(err.value.body)["message"]
    assert v1.read_node(name).metadata.name == name  # nothing written


def test_a_delete_whose_uid_precondition_fails_is_a_409_and_deletes_nothing(
    dcgm: SimCluster, tmp_path: Path
) -> None:
    # k8s.io/apiserver v0.34.0: Preconditions.Check, a Conflict from the generic store's Delete.
    from mignurse.cluster.client import NODECLAIMS, ClusterClient, Conflict

    claim = dcgm.objects("nodeclaims")[0]
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    mine = ClusterClient.connect(str(dcgm.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        with pytest.raises(Conflict) as refused:
            mine.delete(NODECLAIMS, name, uid="0b5e1e7e-0000-4000-8000-000000000000")
        assert str(refused.value) == (
            f'Operation cannot be fulfilled on nodeclaims.karpenter.sh "{name}": Precondition '
            "failed: UID in precondition: 0b5e1e7e-0000-4000-8000-000000000000, UID in object "
            f"meta: {uid}"
        )
        assert not mine.get(NODECLAIMS, name)["metadata"].get("deletionTimestamp")

        mine.delete(NODECLAIMS, name, uid=uid)  # the right one: deleted

        gone = [c for c in dcgm.objects("nodeclaims") if c["metadata"]["name"] == name]
        assert not gone or gone[0]["metadata"].get("deletionTimestamp")
    finally:
        mine.close()
