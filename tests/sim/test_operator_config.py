"""The GPU operator's configuration in the simulator: a scenario's `configMaps` and
`clusterPolicies` are served read only (the ClusterPolicy type only where the scenario gives
one), the real kubectl reads them, and the nodes' MIG layouts follow the mig-parted file the
ClusterPolicy names (mignurse.sim.operator_config)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubectlbin import require_kubectl
from simhelpers import Http

from mignurse.cluster.client import ClusterClient
from mignurse.model import Node
from mignurse.sim import ScenarioError, SimCluster, load_scenario
from mignurse.sim.nodes import SandboxShell, sandbox_shells
from mignurse.sim.scenario import parse_scenario

KUBECTL = require_kubectl()
SCENARIO = "mig-custom-config"
CUSTOM = Path(load_scenario(SCENARIO).source).read_text()
POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
CONFIGMAPS = "/api/v1/namespaces/gpu-operator/configmaps"


def _text(existing: list[dict[str, object]] | None = None, /, **top: object) -> str:
    """A small scenario of one p5.48xlarge NodePool (its nodes `existing`, one by default)
    with these top-level fields added."""
    success = {"nvidia.com/mig.config.state": "success"}
    existing = existing or [{"count": 1}]
    doc: dict[str, object] = {
        "name": "operator",
        "karpenter": {"version": "1.4.0"},
        "nodePools": [
            {
                "name": "gpu",
                "instanceType": "p5.48xlarge",
                "mig": {"config": "all-balanced", "strategy": "mixed"},
                "nodes": sum(int(str(e["count"])) for e in existing),
                "existing": [{**e, "age": "2d", "labels": success} for e in existing],
            }
        ],
        **top,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _configmap(name: str, namespace: str = "gpu-operator", **extra: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, **extra}


def _policy(name: str = "cluster-policy", **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name},
        "spec": {"migManager": {"version": "v0.15.0", **spec}},
        "status": {"namespace": "gpu-operator", "state": "ready"},
    }


def _mig_file(**configs: dict[str, int]) -> str:
    body = {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            **{
                name: [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]
                for name, devices in configs.items()
            },
        },
    }
    return yaml.safe_dump(body, sort_keys=False)


def _gpu_resources(node: dict) -> dict[str, str]:
    return {k: v for k, v in node["status"]["allocatable"].items() if k.startswith("nvidia.com/")}


def _gpu_nodes(sim: SimCluster) -> dict[str, dict]:
    return {
        n["metadata"]["name"]: n
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get("nvidia.com/gpu.present") == "true"
    }


# --------------------------------------------------------------------------- parsing


def test_the_scenario_parses_both_lists() -> None:
    scenario = load_scenario(SCENARIO)
    assert [p["metadata"]["name"] for p in scenario.cluster_policies] == ["cluster-policy"]
    assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in scenario.configmaps] == [
        ("gpu-operator", "custom-mig-config")
    ]
    # served as written: plain data, nothing the server adds
    assert "uid" not in scenario.configmaps[0]["metadata"]


@pytest.mark.parametrize(
    ("top", "fragment"),
    [
        ({"configMaps": [{"data": {}}]}, "configMaps[0] needs metadata.name"),
        ({"configMaps": [_configmap("Bad_Name")]}, "metadata.name must be a DNS-1123 subdomain"),
        (
            {"configMaps": [{"metadata": {"name": "x"}}]},
            "configMaps[0].metadata.namespace must be a DNS-1123 name",
        ),
        ({"configMaps": [{**_configmap("x"), "kind": "Secret"}]}, "kind must be ConfigMap"),
        ({"configMaps": [{**_configmap("x"), "apiVersion": "v2"}]}, "apiVersion must be v1"),
        (
            {"configMaps": [_configmap("x", data={"replicas": 3})]},
            "configMaps[0].data.replicas must be a string",
        ),
        ({"configMaps": [_configmap("x", data=["a"])]}, "configMaps[0].data must be a mapping"),
        (
            {"configMaps": [_configmap("x"), _configmap("x")]},
            "configMaps[1]: ConfigMap gpu-operator/x given twice",
        ),
        (
            {"configMaps": [{"metadata": {"name": "x", "namespace": "a", "labels": {"n": 1}}}]},
            "configMaps[0].metadata.labels must map names to strings",
        ),
        ({"configMaps": {"name": "x"}}, "configMaps must be a list"),
        ({"clusterPolicies": [{"spec": {}}]}, "clusterPolicies[0] needs metadata.name"),
        (
            {"clusterPolicies": [{**_policy(), "kind": "NVIDIADriver"}]},
            "clusterPolicies[0].kind must be ClusterPolicy",
        ),
        (
            {"clusterPolicies": [{**_policy(), "apiVersion": "nvidia.com/v1alpha1"}]},
            "apiVersion must be nvidia.com/v1",
        ),
        (
            {"clusterPolicies": [{"metadata": {"name": "p", "namespace": "gpu-operator"}}]},
            "a ClusterPolicy is cluster-scoped",
        ),
        (
            {"clusterPolicies": [{"metadata": {"name": "p"}, "spec": "mig"}]},
            "clusterPolicies[0].spec must be a mapping",
        ),
        ({"clusterPolicies": [_policy(), _policy()]}, "ClusterPolicy cluster-policy given twice"),
        ({"configMap": []}, "did you mean 'configMaps'?"),
    ],
)
def test_bad_entries_fail_with_file_and_line(top: dict[str, object], fragment: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_text(**top), "op.yaml")
    message = str(err.value)
    assert message.startswith("op.yaml:") and fragment in message
    line = int(message.split(":")[1])
    assert line > 0


def test_an_error_names_the_line_of_the_bad_entry() -> None:
    text = _text() + (
        "configMaps:\n"
        "  - metadata: {name: good, namespace: gpu-operator}\n"
        "  - metadata: {name: good, namespace: gpu-operator}\n"
    )
    with pytest.raises(ScenarioError, match=r"^op\.yaml:\d+: configMaps\[1\]") as err:
        parse_scenario(text, "op.yaml")
    lines = text.splitlines()
    line = int(str(err.value).split(":")[1])
    assert lines[line - 1].strip().startswith("- metadata: {name: good")
    assert line == len(lines)


def test_a_pool_config_is_checked_against_the_clusters_file() -> None:
    # inference-mixed is only in the ClusterPolicy's ConfigMap: without the ClusterPolicy the
    # pool names a config NVIDIA's default file does not have
    without = CUSTOM.replace("clusterPolicies:", "unusedPolicies:", 1).split("unusedPolicies:")
    head, rest = without
    text = head + rest[rest.index("configMaps:") :]
    with pytest.raises(ScenarioError, match="'inference-mixed' is not valid for"):
        parse_scenario(text, "custom.yaml")
    # and with it, a config of NVIDIA's file that the cluster's file lacks is refused
    text = CUSTOM.replace("config: all-balanced", "config: all-1g.10gb")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "custom.yaml")
    assert "'all-1g.10gb' is not valid" in str(err.value)
    assert "known: all-disabled, inference-mixed, all-balanced" in str(err.value)


# --------------------------------------------------------------------------- serving


def test_served_read_only_with_selectors(make_sim: Callable[..., SimCluster]) -> None:
    generated = {
        "app.kubernetes.io/component": "nvidia-mig-manager",
        "nvidia.com/node-name": "ip-10-0-1-1.us-west-2.compute.internal",
    }
    configmaps = [
        _configmap("custom-mig-config", data={"config.yaml": _mig_file(mine={"1g.10gb": 7})}),
        {
            "metadata": {
                "name": "ip-10-0-1-1.us-west-2.compute.internal-mig-config",
                "namespace": "gpu-operator",
                "labels": generated,
            },
            "data": {"config.yaml": _mig_file()},
        },
        _configmap("settings", namespace="team-a", data={"a": "1", "b": "2"}),
    ]
    sim = make_sim(parse_scenario(_text(configMaps=configmaps), "op.yaml"))
    http = Http(sim)
    status, listed = http.get("/api/v1/configmaps")
    assert status == 200 and listed["kind"] == "ConfigMapList"
    assert sorted(c["metadata"]["name"] for c in listed["items"]) == [
        "custom-mig-config",
        "ip-10-0-1-1.us-west-2.compute.internal-mig-config",
        "settings",
    ]
    selector = "app.kubernetes.io/component=nvidia-mig-manager"
    status, picked = http.get(f"{CONFIGMAPS}?labelSelector={selector}")
    assert status == 200
    assert [c["metadata"]["labels"] for c in picked["items"]] == [generated]
    status, named = http.get(f"{CONFIGMAPS}?fieldSelector=metadata.name%3Dcustom-mig-config")
    assert [c["metadata"]["name"] for c in named["items"]] == ["custom-mig-config"]
    status, one = http.get(f"{CONFIGMAPS}/custom-mig-config")
    assert status == 200 and one["kind"] == "ConfigMap" and one["apiVersion"] == "v1"
    assert "mine:" in one["data"]["config.yaml"] and one["metadata"]["uid"]
    status, other = http.get("/api/v1/namespaces/team-a/configmaps/settings")
    assert status == 200 and other["data"] == {"a": "1", "b": "2"}
    # the namespace a ConfigMap names exists
    assert http.get("/api/v1/namespaces/team-a")[0] == 200
    assert http.get(f"{CONFIGMAPS}/nothing")[0] == 404
    # read only
    status, _ = http.request("PATCH", f"{CONFIGMAPS}/settings", {"data": {}})
    assert status == 405
    assert http.request("DELETE", f"{CONFIGMAPS}/custom-mig-config")[0] == 405
    events = http.watch(f"{CONFIGMAPS}?watch=true&timeoutSeconds=1&labelSelector={selector}")
    assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "ConfigMap")]


def test_clusterpolicies_404_without_one_and_configmaps_empty(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim("healthy")
    http = Http(sim)
    assert http.get(POLICIES)[0] == 404
    assert http.get(f"{POLICIES}/cluster-policy")[0] == 404
    assert http.get("/apis/nvidia.com/v1")[0] == 404
    assert http.get("/apis/nvidia.com")[0] == 404
    status, groups = http.get("/apis")
    assert "nvidia.com" not in {g["name"] for g in groups["groups"]}
    status, listed = http.get("/api/v1/configmaps")
    assert status == 200 and listed["items"] == []
    assert not sim.loops.mig_files.operator


def test_clusterpolicies_served_where_the_scenario_gives_one(
    make_sim: Callable[..., SimCluster],
) -> None:
    sim = make_sim(SCENARIO)
    http = Http(sim)
    status, listed = http.get(POLICIES)
    assert status == 200 and listed["kind"] == "ClusterPolicyList"
    assert listed["apiVersion"] == "nvidia.com/v1"
    assert [p["metadata"]["name"] for p in listed["items"]] == ["cluster-policy"]
    status, policy = http.get(f"{POLICIES}/cluster-policy")
    assert status == 200
    assert policy["apiVersion"] == "nvidia.com/v1" and policy["kind"] == "ClusterPolicy"
    assert policy["metadata"]["generation"] == 1
    assert policy["spec"]["migManager"]["config"]["name"] == "custom-mig-config"
    assert policy["status"] == {"namespace": "gpu-operator", "state": "ready"}
    assert http.get(f"{POLICIES}/cluster-policy/status")[0] == 200
    assert http.get("/apis/nvidia.com/v1/namespaces/gpu-operator/clusterpolicies")[0] == 404
    assert http.request("PATCH", f"{POLICIES}/cluster-policy", {"spec": {}})[0] == 405
    status, resources = http.get("/apis/nvidia.com/v1")
    assert status == 200
    (entry,) = [r for r in resources["resources"] if r["name"] == "clusterpolicies"]
    assert entry["namespaced"] is False and entry["verbs"] == ["get", "list", "watch"]
    status, crd = http.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterpolicies.nvidia.com"
    )
    assert status == 200 and crd["spec"]["scope"] == "Cluster"
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == ["Status", "Age"]
    assert sim.loops.mig_files.operator


def test_rbac_deny_applies_to_both(make_sim: Callable[..., SimCluster]) -> None:
    text = CUSTOM + (
        "\nrbac:\n  deny:\n"
        "    - {verb: list, resource: configmaps, namespace: gpu-operator}\n"
        "    - {verb: get, resource: clusterpolicies}\n"
    )
    sim = make_sim(parse_scenario(text, "denied.yaml"))
    http = Http(sim)
    status, body = http.get(CONFIGMAPS)
    assert status == 403 and body["reason"] == "Forbidden"
    assert 'cannot list resource "configmaps" in API group ""' in body["message"]
    assert http.get("/api/v1/configmaps")[0] == 200  # the rule is for one namespace
    assert http.get(f"{CONFIGMAPS}/custom-mig-config")[0] == 200
    status, body = http.get(f"{POLICIES}/cluster-policy")
    assert status == 403
    assert 'clusterpolicies.nvidia.com "cluster-policy" is forbidden' in body["message"]
    assert http.get(POLICIES)[0] == 200


# --------------------------------------------------------------------------- kubectl


def _kubectl(sim: SimCluster, home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    kubeconfig = sim.write_kubeconfig(home / "kubeconfig")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, f"--cache-dir={home / 'cache'}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    return run


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_kubectl_reads_configmaps_and_clusterpolicies(tmp_path: Path) -> None:
    with SimCluster(load_scenario(SCENARIO), speed=0, start=datetime.now(UTC)) as sim:
        kubectl = _kubectl(sim, tmp_path)
        listed = kubectl("get", "configmaps", "-A")
        assert listed.returncode == 0, listed.stderr
        (head, row) = _rows(listed.stdout)
        assert head == ["NAMESPACE", "NAME", "DATA", "AGE"]
        assert row[:3] == ["gpu-operator", "custom-mig-config", "1"] and row[3] == "60d"
        got = kubectl("get", "cm", "-n", "gpu-operator", "custom-mig-config", "-o", "yaml")
        assert got.returncode == 0, got.stderr
        doc = yaml.safe_load(got.stdout)
        assert doc["kind"] == "ConfigMap" and doc["apiVersion"] == "v1"
        mig = yaml.safe_load(doc["data"]["config.yaml"])
        assert mig["mig-configs"]["inference-mixed"][0]["mig-devices"] == {
            "3g.40gb": 1,
            "2g.20gb": 1,
            "1g.10gb": 1,
        }
        labelled = kubectl("get", "cm", "-A", "-l", "app.kubernetes.io/component=x")
        assert labelled.returncode == 0 and "No resources found" in labelled.stderr
        policies = kubectl("get", "clusterpolicies")
        assert policies.returncode == 0, policies.stderr
        (head, row) = _rows(policies.stdout)
        # the CRD's printer columns: Age is a string column, so the timestamp as written
        assert head == ["NAME", "STATUS", "AGE"]
        assert row[:2] == ["cluster-policy", "ready"] and row[2].endswith("Z")
        one = kubectl(
            "get", "clusterpolicy", "cluster-policy", "-o", "jsonpath={.status.namespace}"
        )
        assert one.returncode == 0 and one.stdout == "gpu-operator"
        resources = kubectl("api-resources", "--api-group=nvidia.com", "--no-headers")
        assert _rows(resources.stdout) == [
            ["clusterpolicies", "nvidia.com/v1", "false", "ClusterPolicy"]
        ]
        short = kubectl("api-resources", "--no-headers")
        assert ["configmaps", "cm", "v1", "true", "ConfigMap"] in _rows(short.stdout)
        assert "clusterpolicies.nvidia.com" in kubectl("get", "crd").stdout


def test_kubectl_finds_no_clusterpolicies_without_the_operator(tmp_path: Path) -> None:
    with SimCluster(load_scenario("healthy"), speed=0, start=datetime.now(UTC)) as sim:
        kubectl = _kubectl(sim, tmp_path)
        missing = kubectl("get", "clusterpolicies")
        assert missing.returncode != 0
        assert 'the server doesn\'t have a resource type "clusterpolicies"' in missing.stderr
        empty = kubectl("get", "configmaps", "-A")
        assert empty.returncode == 0 and "No resources found" in empty.stderr


# --------------------------------------------------------------------------- MIG layouts


def test_nodes_follow_the_clusterpolicys_file(make_sim: Callable[..., SimCluster]) -> None:
    sim = make_sim(SCENARIO)
    by_config: dict[str, list[dict]] = {}
    for node in _gpu_nodes(sim).values():
        by_config.setdefault(node["metadata"]["labels"]["nvidia.com/mig.config"], []).append(node)
    assert sorted((k, len(v)) for k, v in by_config.items()) == [
        ("all-balanced", 1),
        ("inference-mixed", 2),
    ]
    # NVIDIA's file has no inference-mixed; its all-balanced on H100 is 2×1g + 2g + 3g
    for node in by_config["inference-mixed"]:
        assert _gpu_resources(node) == {
            "nvidia.com/mig-3g.40gb": "8",
            "nvidia.com/mig-2g.20gb": "8",
            "nvidia.com/mig-1g.10gb": "8",
        }
        assert node["metadata"]["labels"]["nvidia.com/mig-3g.40gb.count"] == "8"
    (balanced,) = by_config["all-balanced"]
    assert _gpu_resources(balanced) == {
        "nvidia.com/mig-1g.10gb": "24",
        "nvidia.com/mig-2g.20gb": "16",
    }
    labels = balanced["metadata"]["labels"]
    assert "nvidia.com/mig-3g.40gb.count" not in labels
    assert labels["nvidia.com/mig-1g.10gb.count"] == "24"
    pools = {p["metadata"]["name"]: p for p in sim.objects("nodepools")}
    assert pools["gpu-balanced"]["status"]["resources"]["nvidia.com/mig-2g.20gb"] == "16"
    assert "nvidia.com/mig-3g.40gb" not in pools["gpu-balanced"]["status"]["resources"]
    claims = [c for c in sim.objects("nodeclaims") if "gpu-infer" in c["metadata"]["name"]]
    assert claims and all(
        c["spec"]["resources"]["requests"].get("nvidia.com/mig-3g.40gb") == "8" for c in claims
    )
    # mig-manager applying the layout again (state pending → success) advertises the same
    sim.advance(60)
    assert _gpu_resources(sim.store.get("nodes", "", balanced["metadata"]["name"]) or {}) == (
        _gpu_resources(balanced)
    )
    pods = [p for p in sim.objects("pods") if p["metadata"]["namespace"] == "inference"]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)


@pytest.mark.parametrize(
    "policy",
    [
        _policy(config={"name": "missing"}),  # a ConfigMap the cluster lacks
        {**_policy(), "status": {"state": "notReady"}},  # no operator namespace said
    ],
)
def test_an_unreadable_file_leaves_nvidias(
    policy: dict[str, object], make_sim: Callable[..., SimCluster]
) -> None:
    # mig-manager's file is unknown: the simulator keeps NVIDIA's built-in file
    text = _text(
        clusterPolicies=[policy],
        configMaps=[
            _configmap(
                "default-mig-parted-config",
                data={"config.yaml": _mig_file(**{"all-balanced": {"1g.10gb": 7}})},
            )
        ],
    )
    sim = make_sim(parse_scenario(text, "op.yaml"))
    (node,) = _gpu_nodes(sim).values()
    assert _gpu_resources(node) == {
        "nvidia.com/mig-1g.10gb": "16",
        "nvidia.com/mig-2g.20gb": "8",
        "nvidia.com/mig-3g.40gb": "8",
    }


def test_a_generated_per_node_file_wins_over_the_default(
    make_sim: Callable[..., SimCluster],
) -> None:
    # no config name, mig-manager v0.15.0: each node reads `<node>-mig-config` where it has
    # one, else default-mig-parted-config
    named = "ip-10-0-9-9.us-west-2.compute.internal"
    text = _text(
        [{"count": 1, "names": [named]}, {"count": 1}],
        clusterPolicies=[_policy()],
        configMaps=[
            _configmap(
                "default-mig-parted-config",
                data={"config.yaml": _mig_file(**{"all-balanced": {"1g.10gb": 7}})},
            ),
            {
                "metadata": {
                    "name": f"{named}-mig-config",
                    "namespace": "gpu-operator",
                    "labels": {
                        "app.kubernetes.io/component": "nvidia-mig-manager",
                        "nvidia.com/node-name": named,
                    },
                },
                "data": {"config.yaml": _mig_file(**{"all-balanced": {"7g.80gb": 1}})},
            },
        ],
    )
    scenario = parse_scenario(text, "op.yaml")
    assert sum(e.count for e in scenario.pools[0].existing) == 2
    sim = make_sim(scenario)
    nodes = _gpu_nodes(sim)
    assert len(nodes) == 2
    assert _gpu_resources(nodes.pop(named)) == {"nvidia.com/mig-7g.80gb": "8"}
    (other,) = nodes.values()
    assert _gpu_resources(other) == {"nvidia.com/mig-1g.10gb": "56"}


def _sandbox_counts(scenario: str, config: str, tmp_path: Path) -> list[dict[str, int]]:
    """Per GPU, the MIG devices the sandbox of a calm node of `config` starts with, as the
    simulator's transport builds it (through the product's client)."""
    with SimCluster(load_scenario(scenario), speed=0, start=datetime.now(UTC)) as sim:
        client = ClusterClient.connect(str(sim.write_kubeconfig(tmp_path / "config")))
        try:
            node = next(
                n
                for n in sim.objects("nodes")
                if n["metadata"]["labels"].get("nvidia.com/mig.config") == config
            )
            shell = sandbox_shells(client, tmp_path / "sandboxes")(Node.from_api(node))
        finally:
            client.close()
    assert isinstance(shell, SandboxShell)
    counts = []
    for gpu in shell.sandbox.mig_state()["gpus"]:
        made: dict[str, int] = {}
        for instance in gpu["instances"]:
            made[instance["profile"]] = made.get(instance["profile"], 0) + 1
        counts.append(made)
    return counts


def test_a_calm_nodes_gpus_hold_its_files_layout(tmp_path: Path) -> None:
    counts = _sandbox_counts(SCENARIO, "all-balanced", tmp_path / "custom")
    assert counts == [{"1g.10gb": 3, "2g.20gb": 2}] * 8
    counts = _sandbox_counts(SCENARIO, "inference-mixed", tmp_path / "mixed")
    assert counts == [{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}] * 8
    # without the GPU operator's ClusterPolicy a device-plugin node's sandbox starts as before
    assert _sandbox_counts("healthy", "all-balanced", tmp_path / "healthy") == [{}] * 8
