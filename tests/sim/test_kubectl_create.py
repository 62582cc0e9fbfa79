"""`kubectl create -f` of a PodDisruptionBudget and a Karpenter NodePool against the simulator,
as against EKS: the object is stored with the server's metadata, the controllers take it up
(the disruption controller computes the budget, Karpenter readies the NodePool and launches
for it), and what the real server refuses is refused in its words (kubernetes v1.32
pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec; the NodePool CRD's schema)."""

from __future__ import annotations

import json
from collections.abc import Callable

from test_kubectl import Kubectl, kubectl_for, rows

from mignurse.sim.resources import RESOURCES

__all__ = ["kubectl_for"]  # the fixture, used by name

BLOCKING_PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: trainer-hold
  namespace: training
spec:
  minAvailable: 100%
  selector:
    matchExpressions:
      - {key: app, operator: In, values: [trainer]}
"""

LIMITED_NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu-overflow
spec:
  limits: {nvidia.com/gpu: "8"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a]}
      taints:
        - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
"""


def _pod_of(k: Kubectl, namespace: str, app: str) -> str:
    pods = k.json("get", "pods", "-n", namespace, "-l", f"app={app}")["items"]
    return str(pods[0]["metadata"]["name"])


def test_a_created_budget_blocks_evictions_until_it_is_deleted(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    k = kubectl_for("healthy")

    created = k.run("create", "-f", "-", stdin=BLOCKING_PDB)

    assert created.stdout == "poddisruptionbudget.policy/trainer-hold created\n"
    stored = k.json("get", "pdb", "trainer-hold", "-n", "training", "--show-managed-fields")
    meta = stored["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert meta["managedFields"][0]["manager"] == "kubectl-create"
    assert stored["status"]["disruptionsAllowed"] == 0  # the controller has not run yet
    k.sim.advance(1)  # the disruption controller's pass
    status = k.json("get", "pdb", "trainer-hold", "-n", "training")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"]) == (4, 4)
    assert status["disruptionsAllowed"] == 0 and status["observedGeneration"] == 1
    table = rows(k.out("get", "pdb", "-n", "training"))
    assert table == [["trainer-hold", "100%", "N/A", "0", table[0][4]]]

    pod = _pod_of(k, "training", "trainer")
    evicted = k.run(
        "create",
        "--raw",
        f"/api/v1/namespaces/training/pods/{pod}/eviction",
        "-f",
        "-",
        stdin=json.dumps(
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
        ),
        check=False,
    )
    assert evicted.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget" in evicted.stderr

    deleted = k.run("delete", "pdb", "trainer-hold", "-n", "training")
    assert (
        deleted.stdout
        == 'poddisruptionbudget.policy "trainer-hold" deleted from training namespace\n'
    )
    evicted = k.run(
        "create",
        "--raw",
        f"/api/v1/namespaces/training/pods/{pod}/eviction",
        "-f",
        "-",
        stdin=json.dumps(
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
        ),
    )
    assert '"status":"Success"' in evicted.stdout


def test_a_budget_the_real_server_refuses_is_refused_in_its_words(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    k = kubectl_for("healthy")
    both = BLOCKING_PDB.replace("minAvailable: 100%", "minAvailable: 1\n  maxUnavailable: 1")

    refused = k.run("create", "-f", "-", stdin=both, check=False)

    assert refused.returncode == 1
    assert 'The PodDisruptionBudget "trainer-hold" is invalid: spec: Invalid value:' in (
        refused.stderr
    )
    assert "minAvailable and maxUnavailable cannot be both set" in refused.stderr
    over = k.run("create", "-f", "-", stdin=BLOCKING_PDB.replace("100%", "150%"), check=False)
    assert 'spec.minAvailable: Invalid value: "150%": must not be greater than 100%' in (
        over.stderr
    )
    unknown = k.run(
        "create", "-f", "-", stdin=BLOCKING_PDB.replace("spec:\n", "spec:\n  minReady: 3\n"),
        check=False,
    )  # fmt: skip
    assert unknown.returncode == 1
    assert 'strict decoding error: unknown field "spec.minReady"' in unknown.stderr
    elsewhere = k.run("create", "-f", "-", "-n", "nowhere", stdin=BLOCKING_PDB, check=False)
    assert elsewhere.returncode == 1
    assert "does not match the namespace" in elsewhere.stderr
    k.run("create", "-f", "-", stdin=BLOCKING_PDB)
    again = k.run("create", "-f", "-", stdin=BLOCKING_PDB, check=False)
    assert again.returncode == 1
    assert 'poddisruptionbudgets.policy "trainer-hold" already exists' in again.stderr
    assert "create" in RESOURCES["poddisruptionbudgets"].verbs


def test_a_created_nodepool_takes_the_pods_that_select_it_up_to_its_limits(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    k = kubectl_for("healthy")
    k.run(
        "create",
        "-f",
        "-",
        stdin=LIMITED_NODEPOOL.replace(
            "spec:\n  limits", "spec:\n  disruption: {consolidateAfter: 1m}\n  limits"
        ),
    )
    k.sim.advance(1)

    k.run(
        "patch", "deployment", "trainer", "-n", "training", "-p",
        '{"spec":{"template":{"spec":{"nodeSelector":{"karpenter.sh/nodepool":"gpu-overflow"}}}}}',
    )  # fmt: skip
    k.sim.advance(600)

    overflow = k.json("get", "nodes", "-l", "karpenter.sh/nodepool=gpu-overflow")["items"]
    assert len(overflow) == 1  # 8 GPUs of limit: one p5.48xlarge
    pods = k.json("get", "pods", "-n", "training")["items"]
    on_it = [p for p in pods if p["spec"].get("nodeName") == overflow[0]["metadata"]["name"]]
    assert len(on_it) == 1
    pending = [p for p in pods if p["status"].get("phase") == "Pending"]
    assert pending
    said = [e["message"] for e in k.sim.objects("events") if e.get("reason") == "FailedScheduling"]
    assert any('all available instance types exceed limits for nodepool "gpu-overflow"' in m
               for m in said)  # fmt: skip
    used = k.json("get", "nodepool", "gpu-overflow")["status"]["resources"]
    assert (used["nodes"], used["nvidia.com/gpu"]) == ("1", "8")


def test_a_created_nodepool_is_readied_and_joins_karpenters_pools(
    kubectl_for: Callable[..., Kubectl],
) -> None:
    k = kubectl_for("healthy")

    created = k.run("create", "-f", "-", stdin=LIMITED_NODEPOOL)

    assert created.stdout == "nodepool.karpenter.sh/gpu-overflow created\n"
    stored = k.json("get", "nodepool", "gpu-overflow")
    # the CRD's defaults, as the real server applies them from the schema
    assert stored["spec"]["disruption"]["consolidateAfter"] == "0s"
    assert stored["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert "status" not in stored or not stored["status"].get("conditions")
    k.sim.advance(1)  # Karpenter's nodepool controllers
    ready = k.json("get", "nodepool", "gpu-overflow")
    conditions = {c["type"]: c["status"] for c in ready["status"]["conditions"]}
    assert conditions["Ready"] == "True" and conditions["NodeClassReady"] == "True"
    assert conditions["NodeRegistrationHealthy"] == "Unknown"
    assert ready["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"] == "v3"
    (pool,) = [p for p in k.sim.loops.scenario.pools if p.name == "gpu-overflow"]
    assert (pool.instance_type, pool.zones, pool.limits) == (
        "p5.48xlarge",
        ("us-west-2a",),
        (("nvidia.com/gpu", "8"),),
    )
    missing = LIMITED_NODEPOOL.replace("name: gpu-overflow", "name: gpu-orphan").replace(
        "name: gpu}", "name: nowhere}"
    )
    k.run("create", "-f", "-", stdin=missing)
    k.sim.advance(1)
    orphan = k.json("get", "nodepool", "gpu-orphan")["status"]["conditions"]
    assert {c["type"]: (c["status"], c["reason"]) for c in orphan}["NodeClassReady"] == (
        "False",
        "NodeClassNotFound",
    )
    assert "gpu-orphan" not in {p.name for p in k.sim.loops.scenario.pools}
    bad = LIMITED_NODEPOOL.replace("name: gpu-overflow", "name: gpu-bad").replace(
        "operator: In, values: [p5.48xlarge]", "operator: Sideways, values: [p5.48xlarge]"
    )
    refused = k.run("create", "-f", "-", stdin=bad, check=False)
    assert refused.returncode == 1
    assert 'The NodePool "gpu-bad" is invalid' in refused.stderr
    assert "Unsupported value" in refused.stderr and "Sideways" in refused.stderr
