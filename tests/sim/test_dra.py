"""The simulator speaks resource.k8s.io as EKS 1.34 with the NVIDIA DRA driver does: discovery
per Kubernetes release, ResourceSlices with the driver's device names and attributes, claims
the scheduler allocates, and the slice a node publishes as its plugin and kubelet come and go.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client
from simhelpers import Http, kube

from mignurse.sim import ScenarioError, SimCluster
from mignurse.sim.nodes import NodeSandbox
from mignurse.sim.scenario import parse_scenario, scenario_path

GROUP = "/apis/resource.k8s.io"
DRA_NS = "nvidia-dra-driver-gpu"
# deviceinfo.go GetDevice (NVIDIA/k8s-dra-driver-gpu@v25.8.0), by device type
GPU_ATTRIBUTES = {
    "architecture", "brand", "cudaComputeCapability", "cudaDriverVersion", "driverVersion",
    "pcieBusID", "productName", "type", "uuid",
}  # fmt: skip
MIG_ATTRIBUTES = GPU_ATTRIBUTES | {"parentUUID", "profile"}
MIG_CAPACITY = {
    "memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines",
    "ofaEngines",
}  # fmt: skip
MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(\d+)-(\d+)-(\d+)$")

# One g7e.4xlarge whose mig-manager writes success two minutes after launch.
ONE_NODE = """
name: dra-one
cluster: {{kubernetesVersion: "{k8s}", region: us-east-2{extra_cluster}}}
karpenter: {{version: 1.8.1}}
nodePools:
  - name: g
    instanceType: g7e.4xlarge
    zones: [us-east-2a]
    os: al2023-v20260409
    gpuScheduling: dra
    mig: {{config: all-1g.24gb{applied}}}
    nodes: 1
    consolidation: {{after: Never}}
    lifecycle:
      - {{after: 50s, ready: true}}
      - after: 120s
        labels: {{nvidia.com/mig.config.state: success}}
"""


def one_node(
    make_sim: Callable[..., SimCluster], k8s: str = "1.34", extra_cluster: str = "",
    applied: str = "",
) -> SimCluster:  # fmt: skip
    text = ONE_NODE.format(k8s=k8s, extra_cluster=extra_cluster, applied=applied)
    return make_sim(parse_scenario(text, "dra-one.yaml"))


def slices(sim: SimCluster) -> list[dict[str, Any]]:
    return sim.objects("resourceslices")


def devices(slice_: dict[str, Any]) -> list[str]:
    return [d["name"] for d in slice_["spec"]["devices"]]


def node_ready(node: dict[str, Any]) -> str:
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def at(sim: SimCluster, seconds: float) -> None:
    """Move the clock to `seconds` after the scenario's start."""
    sim.advance(max(0.0, sim.loops.start + seconds - sim.loops.now))


# --------------------------------------------------------------------------- discovery


def test_eks_1_34_serves_resource_v1_only_and_prefers_it(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = one_node(make_sim)
    http = Http(sim)
    status, group = http.get(GROUP)
    assert status == 200
    assert [v["version"] for v in group["versions"]] == ["v1"]
    assert group["preferredVersion"] == {"groupVersion": "resource.k8s.io/v1", "version": "v1"}
    status, resources = http.get(f"{GROUP}/v1")
    names = {r["name"]: r for r in resources["resources"]}
    assert {"resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates"} <= set(
        names
    )
    assert names["resourceslices"]["namespaced"] is False
    assert names["resourceclaims"]["namespaced"] is True
    assert sorted(names["resourceslices"]["verbs"]) == ["get", "list", "watch"]
    assert http.get(f"{GROUP}/v1beta1")[0] == 404
    assert http.get(f"{GROUP}/v1beta1/resourceslices")[0] == 404
    assert http.get("/version")[1]["gitVersion"].startswith("v1.34.")


def test_eks_1_33_serves_the_beta_api_and_prefers_v1beta2(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = one_node(make_sim, k8s="1.33")
    http = Http(sim)
    group = http.get(GROUP)[1]
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    assert http.get(f"{GROUP}/v1")[0] == 404
    listed = [g for g in http.get("/apis")[1]["groups"] if g["name"] == "resource.k8s.io"]
    assert [v["version"] for v in listed[0]["versions"]] == ["v1beta2", "v1beta1"]


def test_aggregated_discovery_lists_every_served_version_preferred_first(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = one_node(make_sim, extra_cluster=", resourceApiVersions: [v1beta1, v1, v1beta2]")
    assert [v["version"] for v in Http(sim).get(GROUP)[1]["versions"]] == [
        "v1",
        "v1beta2",
        "v1beta1",
    ]
    request = urllib.request.Request(
        sim.url + "/apis",
        headers={
            "Authorization": f"Bearer {sim.token}",
            "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        },
    )
    with urllib.request.urlopen(request, context=sim.ssl_context(), timeout=10) as resp:
        doc = json.loads(resp.read())
    item = next(i for i in doc["items"] if i["metadata"].get("name") == "resource.k8s.io")
    assert [v["version"] for v in item["versions"]] == ["v1", "v1beta2", "v1beta1"]
    kinds = {r["resource"]: r["responseKind"] for r in item["versions"][2]["resources"]}
    assert kinds["resourceslices"] == {
        "group": "resource.k8s.io",
        "version": "v1beta1",
        "kind": "ResourceSlice",
    }


def test_eks_1_32_has_no_resource_api_and_refuses_a_dra_pool(
    make_sim: Callable[..., SimCluster],
) -> None:
    calm = make_sim("healthy")  # kubernetesVersion 1.32
    http = Http(calm)
    assert http.get(GROUP)[0] == 404
    assert "resource.k8s.io" not in {g["name"] for g in http.get("/apis")[1]["groups"]}
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(ONE_NODE.format(k8s="1.32", extra_cluster="", applied=""), "old.yaml")
    message = str(refused.value)
    assert message.startswith("old.yaml:6: ") and "from Kubernetes 1.33" in message
    assert "\n" not in message


# --------------------------------------------------------------------------- lists, watches


def test_field_selectors_on_spec_node_name_and_spec_driver(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-healthy")
    api = client.ResourceV1Api(kube(sim))
    every = api.list_resource_slice().items
    assert len(every) == 7  # 3 g7e.4xlarge + 4 p4d.24xlarge
    node = every[0].spec.node_name
    mine = api.list_resource_slice(field_selector=f"spec.nodeName={node}").items
    assert [s.spec.node_name for s in mine] == [node]
    assert len(api.list_resource_slice(field_selector="spec.driver=gpu.nvidia.com").items) == 7
    assert not api.list_resource_slice(field_selector="spec.driver=dra.example.com").items
    others = api.list_resource_slice(field_selector=f"spec.nodeName!={node}").items
    assert len(others) == 6
    status, body = Http(sim).get(f"{GROUP}/v1/resourceslices?fieldSelector=spec.pool.name%3D{node}")
    assert status == 400 and body["message"] == "field label not supported: spec.pool.name"


def test_watch_streams_slices_as_the_version_asked_for(make_sim: Callable[..., SimCluster]) -> None:
    sim = one_node(make_sim, extra_cluster=", resourceApiVersions: [v1, v1beta1]")
    http = Http(sim)
    rv = http.get(f"{GROUP}/v1/resourceslices")[1]["metadata"]["resourceVersion"]
    at(sim, 70)  # Ready at 50 s, the plugin publishes ten seconds later
    v1 = http.watch(f"{GROUP}/v1/resourceslices?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    beta = http.watch(
        f"{GROUP}/v1beta1/resourceslices?watch=true&resourceVersion={rv}&timeoutSeconds=1"
    )
    assert [f["type"] for f in v1] == ["ADDED"] == [f["type"] for f in beta]
    assert v1[0]["object"]["apiVersion"] == "resource.k8s.io/v1"
    assert v1[0]["object"]["spec"]["devices"][0]["attributes"]["type"] == {"string": "gpu"}
    assert beta[0]["object"]["apiVersion"] == "resource.k8s.io/v1beta1"
    assert beta[0]["object"]["spec"]["devices"][0]["basic"]["attributes"]["type"] == {
        "string": "gpu"
    }
    # the beta client reads the same slice, its devices wrapped in `basic`
    old = client.ResourceV1beta1Api(kube(sim)).list_resource_slice().items
    assert [d.basic.attributes["uuid"].string for d in old[0].spec.devices] == [
        d["attributes"]["uuid"]["string"] for d in slices(sim)[0]["spec"]["devices"]
    ]


def test_claims_in_v1beta1_carry_the_request_fields_themselves(
    make_sim: Callable[..., SimCluster],
) -> None:
    text = scenario_path("mig-dra-healthy").read_text()
    scenario = parse_scenario(
        text.replace(
            'kubernetesVersion: "1.34"',
            'kubernetesVersion: "1.34"\n  resourceApiVersions: [v1, v1beta2, v1beta1]',
        ),
        "variant.yaml",
    )
    sim = make_sim(scenario)
    http = Http(sim)
    v1 = http.get(f"{GROUP}/v1/namespaces/inference/resourceclaims")[1]["items"][0]
    beta1 = http.get(f"{GROUP}/v1beta1/namespaces/inference/resourceclaims")[1]["items"][0]
    beta2 = http.get(f"{GROUP}/v1beta2/namespaces/inference/resourceclaims")[1]["items"][0]
    assert v1["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert beta2["spec"] == v1["spec"]
    assert beta1["spec"]["devices"]["requests"][0]["deviceClassName"] == "mig.nvidia.com"
    assert "exactly" not in beta1["spec"]["devices"]["requests"][0]
    assert beta1["status"] == v1["status"]


# --------------------------------------------------------------------------- the driver's slices


def test_slice_carries_the_layout_with_the_drivers_names(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-healthy")
    nodes = {n["metadata"]["name"]: n for n in sim.objects("nodes")}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for s in slices(sim):
        node = nodes[s["spec"]["nodeName"]]
        by_type.setdefault(
            node["metadata"]["labels"]["node.kubernetes.io/instance-type"], []
        ).append(s)
        # one pool per node, named after it, in one slice the Node owns
        assert s["spec"]["driver"] == "gpu.nvidia.com"
        assert s["spec"]["pool"] == {
            "name": s["spec"]["nodeName"],
            "generation": 1,
            "resourceSliceCount": 1,
        }
        assert s["metadata"]["generateName"] == f"{s['spec']['nodeName']}-gpu.nvidia.com-"
        owner = s["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "Node",
            node["metadata"]["name"],
            node["metadata"]["uid"],
            True,
        )
        # DRA nodes advertise no extended GPU resources
        assert not [r for r in node["status"]["allocatable"] if r.startswith("nvidia.com/")]
    g7e = by_type["g7e.4xlarge"]
    assert len(g7e) == 3
    for s in g7e:
        assert devices(s) == [
            "gpu-0", "gpu-0-mig-14-0-1", "gpu-0-mig-14-1-1", "gpu-0-mig-14-2-1", "gpu-0-mig-14-3-1",
        ]  # fmt: skip
        gpu, *migs = s["spec"]["devices"]
        assert set(gpu["attributes"]) == GPU_ATTRIBUTES
        assert gpu["attributes"]["productName"] == {
            "string": "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        }
        assert gpu["attributes"]["driverVersion"] == {"version": "580.126.9"}  # 580.126.09
        assert gpu["attributes"]["cudaComputeCapability"] == {"version": "12.0.0"}
        assert gpu["attributes"]["pcieBusID"]["string"].startswith("0000:")
        assert gpu["capacity"] == {"memory": {"value": "97887Mi"}}
        for slot, mig in enumerate(migs):
            attrs = mig["attributes"]
            assert set(attrs) == MIG_ATTRIBUTES
            assert attrs["type"] == {"string": "mig"} and attrs["profile"] == {"string": "1g.24gb"}
            assert attrs["parentUUID"] == gpu["attributes"]["uuid"]
            assert attrs["uuid"]["string"].startswith("MIG-")
            assert set(mig["capacity"]) == MIG_CAPACITY | {f"memorySlice{slot}"}
            assert mig["capacity"]["memory"] == {"value": "24186Mi"}
            assert mig["capacity"]["multiprocessors"] == {"value": "46"}
    a100 = by_type["p4d.24xlarge"]
    assert len(a100) == 4
    for s in a100:
        names = devices(s)
        assert [n for n in names if not MIG_NAME.match(n)] == [f"gpu-{i}" for i in range(8)]
        migs = [MIG_NAME.match(n) for n in names if MIG_NAME.match(n)]
        assert len(migs) == 8 * 7
        assert {(m.group(2), m.group(4)) for m in migs if m} == {("19", "1")}  # 1g.5gb
        assert sorted(int(m.group(3)) for m in migs if m and m.group(1) == "0") == list(range(7))


def test_device_classes_of_the_drivers_chart(make_sim: Callable[..., SimCluster]) -> None:
    sim = make_sim("mig-dra-healthy")
    classes = {c["metadata"]["name"]: c for c in sim.objects("deviceclasses")}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com"}
    assert classes["mig.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"] == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    )
    plugins = [
        p
        for p in sim.objects("pods")
        if p["metadata"]["namespace"] == DRA_NS
        and p["metadata"]["name"].startswith("nvidia-dra-driver-gpu-kubelet-plugin-")
    ]
    assert len(plugins) == 7
    assert not [p for p in sim.objects("pods") if "nvidia-device-plugin" in p["metadata"]["name"]]
    # user data applied the layout: the operator's mig-manager does not run on those nodes
    migmgr = [
        p for p in sim.objects("pods") if p["metadata"]["name"].startswith("nvidia-mig-manager")
    ]
    assert len(migmgr) == 4  # the A100 nodes only


def test_the_slice_shows_mig_devices_only_once_the_plugin_starts_after_mig_is_applied(
    make_sim: Callable[..., SimCluster],
) -> None:
    """v25.8.0 enumerates when its plugin starts: a layout mig-manager applies later stays
    unseen until the plugin's pod is restarted; then the one slice is updated in place."""
    sim = one_node(make_sim)
    at(sim, 55)
    assert not slices(sim)  # Ready at 50 s; the plugin has not published yet
    at(sim, 65)
    (first,) = slices(sim)
    assert devices(first) == ["gpu-0"]  # MIG was not applied when it started
    at(sim, 130)
    node = sim.objects("nodes")[0]
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert devices(slices(sim)[0]) == ["gpu-0"]  # still what the plugin saw at start
    plugin = next(p for p in sim.objects("pods") if p["metadata"]["namespace"] == DRA_NS)
    v1 = client.CoreV1Api(kube(sim))
    v1.delete_namespaced_pod(plugin["metadata"]["name"], DRA_NS)
    sim.advance(40)  # the pod goes, the DaemonSet makes another, which enumerates again
    (after,) = slices(sim)
    assert devices(after)[1:] == [f"gpu-0-mig-14-{i}-1" for i in range(4)]
    # upstream's resourceslice controller updates a one-slice pool in place: same name and
    # pool generation, a new object generation
    assert after["metadata"]["name"] == first["metadata"]["name"]
    assert after["spec"]["pool"]["generation"] == 1
    assert after["metadata"]["generation"] == 2


def test_user_data_mig_is_published_with_the_first_slice(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = one_node(make_sim, applied=", appliedBy: userdata")
    at(sim, 65)
    (first,) = slices(sim)
    assert devices(first) == ["gpu-0"] + [f"gpu-0-mig-14-{i}-1" for i in range(4)]


def test_a_kubelet_restart_wipes_the_slice_and_the_running_plugin_publishes_again(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-hook-notready")
    nodes = sim.objects("nodes")
    hook = next(
        n for n in nodes if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    )
    name = hook["metadata"]["name"]
    assert node_ready(hook) == "False"
    ready = next(c for c in hook["status"]["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "container runtime is down"
    (mine,) = [s for s in slices(sim) if s["spec"]["nodeName"] == name]
    # published when the plugin started, before mig-manager turned MIG on: the GPU alone
    assert devices(mine) == ["gpu-0"]
    created = mine["metadata"]["creationTimestamp"]
    registered = hook["metadata"]["creationTimestamp"]
    # registered 45 s after launch, Ready at 50 s: the restart at 70 s wiped the first slice
    # (published at 60 s), the plugin published this one again
    assert stamp(created) - stamp(registered) == 70 - 45 + 1
    starts = [
        e
        for e in sim.objects("events")
        if e["involvedObject"]["name"] == name and e["reason"] == "Starting"
    ]
    assert len(starts) == 2  # kubelet started twice
    for n in nodes:
        assert not [r for r in n["status"]["allocatable"] if r.startswith("nvidia.com/")]
    healthy = [s for s in slices(sim) if s["spec"]["nodeName"] != name]
    assert len(healthy) == 2 and all(len(devices(s)) == 5 for s in healthy)


def test_a_removed_node_loses_its_slice(make_sim: Callable[..., SimCluster]) -> None:
    sim = make_sim("mig-dra-healthy")
    claim = next(
        c
        for c in sim.objects("nodeclaims")
        if c["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu-a100-dra"
    )
    node = claim["status"]["nodeName"]
    co = client.CustomObjectsApi(kube(sim))
    co.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])
    assert node in {s["spec"]["nodeName"] for s in slices(sim)}
    sim.advance(300)
    assert node not in {n["metadata"]["name"] for n in sim.objects("nodes")}
    assert node not in {s["spec"]["nodeName"] for s in slices(sim)}


# --------------------------------------------------------------------------- claims


def test_running_pods_hold_allocated_claims_on_published_devices(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-healthy")
    published = {(s["spec"]["pool"]["name"], d) for s in slices(sim) for d in devices(s)}
    pods = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p
        for p in sim.objects("pods")
        if p["metadata"]["namespace"] in ("inference", "research")
    }
    assert len(pods) == 10 + 24
    claims = sim.objects("resourceclaims")
    assert len(claims) == len(pods)
    held: list[tuple[str, str]] = []
    for claim in claims:
        meta, status = claim["metadata"], claim["status"]
        pod = pods[(meta["namespace"], meta["ownerReferences"][0]["name"])]
        assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
        assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["resourceClaimStatuses"] == [
            {"name": "gpu", "resourceClaimName": meta["name"]}
        ]
        assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].endswith("-gpu")
        assert status["reservedFor"] == [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ]
        node = pod["spec"]["nodeName"]
        term = status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
        assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [node]}]
        for result in status["allocation"]["devices"]["results"]:
            assert (result["request"], result["driver"], result["pool"]) == (
                "gpu",
                "gpu.nvidia.com",
                node,
            )
            assert (node, result["device"]) in published
            held.append((node, result["device"]))
        requests = claim["spec"]["devices"]["requests"]
        assert requests[0]["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert len(held) == len(set(held)) == 10 + 24 * 2  # no device is held twice
    # the pods ask no extended resource: they claim
    for pod in pods.values():
        requests = pod["spec"]["containers"][0]["resources"]
        assert not [r for r in requests.get("requests", {}) if r.startswith("nvidia.com/")]
        assert requests["claims"] == [{"name": "gpu"}]


def test_a_deleted_pods_claim_goes_with_it_and_its_replacement_gets_one(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-healthy")
    pod = next(p for p in sim.objects("pods") if p["metadata"]["namespace"] == "inference")
    name = pod["metadata"]["name"]
    claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    client.CoreV1Api(kube(sim)).delete_namespaced_pod(name, "inference")
    sim.advance(60)
    names = {c["metadata"]["name"] for c in sim.objects("resourceclaims")}
    assert claim not in names
    pods = [p for p in sim.objects("pods") if p["metadata"]["namespace"] == "inference"]
    assert len(pods) == 10 and all(p["status"]["phase"] == "Running" for p in pods)
    assert (
        len([c for c in sim.objects("resourceclaims") if c["metadata"]["namespace"] == "inference"])
        == 10
    )


def test_more_claims_than_devices_leave_pods_pending_with_the_schedulers_reason(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("mig-dra-healthy")
    apps = client.AppsV1Api(kube(sim))
    apps.patch_namespaced_deployment("inference", "inference", {"spec": {"replicas": 14}})
    sim.advance(30)
    pending = [
        p
        for p in sim.objects("pods")
        if p["metadata"]["namespace"] == "inference" and p["status"]["phase"] == "Pending"
    ]
    assert len(pending) == 2  # 3 nodes × 4 devices = 12
    events = [
        e
        for e in sim.objects("events")
        if e["involvedObject"]["name"] == pending[0]["metadata"]["name"]
    ]
    scheduler = next(e for e in events if e["source"]["component"] == "default-scheduler")
    assert scheduler["reason"] == "FailedScheduling"
    assert "3 cannot allocate all claims" in scheduler["message"]
    # Karpenter 1.8 leaves pods with claims to others (IGNORE_DRA_REQUESTS)
    karpenter = next(e for e in events if e["source"]["component"] == "karpenter")
    assert karpenter["message"] == (
        "Failed to schedule pod, pod has Dynamic Resource Allocation requirements that are "
        "not yet supported by Karpenter"
    )
    claims = {
        c["metadata"]["name"]: c
        for c in sim.objects("resourceclaims")
        if c["metadata"]["namespace"] == "inference"
    }
    mine = claims[pending[0]["status"]["resourceClaimStatuses"][0]["resourceClaimName"]]
    assert mine["status"] == {} and "finalizers" not in mine["metadata"]


# --------------------------------------------------------------------------- the node itself


def test_the_nodes_sandbox_shows_the_uuids_its_slice_publishes(
    make_sim: Callable[..., SimCluster], tmp_path: Any
) -> None:
    sim = make_sim("mig-dra-healthy")
    node = next(
        n
        for n in sim.objects("nodes")
        if n["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "g7e.4xlarge"
    )
    (mine,) = [s for s in slices(sim) if s["spec"]["nodeName"] == node["metadata"]["name"]]
    sandbox = NodeSandbox.for_node(tmp_path / "node", node, story="healthy")
    (gpu,) = sandbox.mig_state()["gpus"]
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert gpu["current"] == "Enabled"
    published = {d["attributes"]["uuid"]["string"] for d in mine["spec"]["devices"]}
    assert {gpu["uuid"]} | {i["uuid"] for i in gpu["instances"]} == published
    assert [(i["profileId"], i["start"], i["size"]) for i in gpu["instances"]] == [
        (14, s, 1) for s in range(4)
    ]


# --------------------------------------------------------------------------- scenario errors


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            ("nodes: 1\n", "nodes: 1\n    workload: {resource: nvidia.com/gpu}\n"),
            "is a DeviceClass: gpu.nvidia.com or mig.nvidia.com",
        ),
        (
            (
                "nodes: 1\n",
                "nodes: 1\n    workload: {resource: mig.nvidia.com, profile: 2g.20gb}\n",
            ),
            "profile '2g.20gb' is not in the pool's MIG layout (1g.24gb)",
        ),
        (("gpuScheduling: dra", "gpuScheduling: plugin"), "must be device-plugin or dra"),
        (("resourceApiVersions: [v1]", "resourceApiVersions: [v2]"), "'v2' is not one of"),
        (("config: all-1g.24gb", "appliedBy: userdata"), "appliedBy needs a config"),
    ],
)
def test_a_wrong_dra_pool_names_file_and_line(change: tuple[str, str], fragment: str) -> None:
    text = ONE_NODE.format(k8s="1.34", extra_cluster=", resourceApiVersions: [v1]", applied="")
    assert change[0] in text
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(text.replace(change[0], change[1], 1), "bad.yaml")
    message = str(refused.value)
    assert re.match(r"^bad\.yaml:\d+: ", message) and fragment in message, message
    assert "\n" not in message
