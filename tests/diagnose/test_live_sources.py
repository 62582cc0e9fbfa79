"""`mignurse diagnose` on a live cluster, through the real kubernetes client against the
simulator: the managed node groups whose repair settings are asked of the EKS API, the local
history a running `mignurse watch` writes (read without its writer lock, only the last six
hours), and how the Karpenter Deployment is found under any release name."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mignurse.cluster.client import DEPLOYMENTS, ClusterClient, NotFound, Resource
from mignurse.cluster.history import HistoryStore
from mignurse.diagnose.sources import find_karpenter_deployment, load_live
from mignurse.diagnose.sources.live import karpenter_settings, read_history
from mignurse.model import Event, NodeClaim
from mignurse.sim import SimCluster, load_scenario

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def mng(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, ClusterClient]]:
    with SimCluster(load_scenario("mng-dcgm-repair-loop"), speed=0, start=START) as sim:
        config = sim.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        client = ClusterClient.connect(kubeconfig=str(config))
        try:
            yield sim, client
        finally:
            client.close()


class EksApi:
    """What the EKS API answers for DescribeNodegroup, and the groups it was asked about."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, groups: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        self.asked.append(list(groups))
        documents: list[dict[str, Any]] = [
            {"nodegroupName": g, "nodeRepairConfig": {"enabled": True}} for g in groups
        ]
        documents.append({"status": "ACTIVE"})  # an answer without its name
        return documents, ["ng-gpu-training: AccessDeniedException (eks:DescribeNodegroup)"]


def test_only_the_gpu_managed_node_groups_are_asked_for_their_repair_settings(
    mng: tuple[SimCluster, ClusterClient],
) -> None:
    _sim, client = mng
    eks = EksApi()
    gathered = load_live(client, history_path=None, nodegroups=eks)
    assert eks.asked == [["ng-gpu-inference"]]
    assert gathered.nodegroups["ng-gpu-inference"].enabled is True
    assert "ng-gpu-training: AccessDeniedException (eks:DescribeNodegroup)" in gathered.notices
    assert "nodegroups.json: a node group without nodegroupName" in gathered.notices


def test_a_karpenter_cluster_asks_the_eks_api_nothing(tmp_path: Path) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0, start=START) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        try:
            eks = EksApi()
            gathered = load_live(client, history_path=None, nodegroups=eks)
        finally:
            client.close()
    assert eks.asked == []
    assert gathered.nodegroups == {}
    assert gathered.karpenter is not None and gathered.karpenter.node_repair is True


def test_what_the_api_server_refuses_is_named_and_the_rest_is_still_judged(
    tmp_path: Path,
) -> None:
    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0, start=START) as sim:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "c")))
        try:
            sim.fail("GET", r"/apis/apps/v1/(namespaces/[^/]+/)?deployments", times=None)
            sim.fail("GET", r"/apis/apps/v1/daemonsets", times=None)
            sim.fail("GET", r"/api/v1/pods", times=None)
            gathered = load_live(client, history_path=None)
        finally:
            client.close()
    refused = "the API server answered 500 to list"
    assert gathered.notices == [
        f"cannot read the Karpenter Deployment: {refused} deployments.apps: Internal error "
        "occurred: injected fault",
        f"cannot list DaemonSets ({refused} daemonsets.apps: Internal error occurred: injected "
        "fault): the node monitoring agent, mig-manager and DRA driver combinations are not "
        "checked",
        f"cannot list the GPU plugin pods: {refused} pods: Internal error occurred: injected "
        "fault; gpu-stack-down is off",
    ]
    assert gathered.snapshot.karpenter and gathered.karpenter is None
    assert gathered.daemonsets is None
    assert gathered.snapshot.nodeclaims


def claim(name: str, created: datetime) -> NodeClaim:
    return NodeClaim.from_api(
        {
            "metadata": {
                "name": name,
                "creationTimestamp": created.isoformat(),
                "labels": {"karpenter.sh/nodepool": "gpu"},
            },
            "status": {"nodeName": f"ip-10-0-1-{len(name)}.ec2.internal"},
        }
    )


def test_the_history_a_running_watch_writes_is_read_for_the_last_six_hours(
    mng: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    sim, client = mng
    context = client.info.context
    now = sim.now()
    path = tmp_path / "history.sqlite3"
    watch = HistoryStore(path)  # the writer `mignurse watch` holds while it runs
    try:
        old = claim("gpu-old-1", now - timedelta(hours=8))
        replaced = claim("gpu-replaced-1", now - timedelta(hours=3))
        recent = claim("gpu-recent-1", now - timedelta(hours=1))
        # gpu-old-1 was last listed 6.5 h ago: gone before the window; gpu-replaced-1 went half
        # an hour ago (the window is counted back from the snapshot, not this machine's clock).
        watch.record(context, "nodeclaims", "LIST", [old], now - timedelta(hours=6, minutes=30))
        watch.record(context, "nodeclaims", "LIST", [], now - timedelta(hours=6, minutes=29))
        watch.record(context, "nodeclaims", "LIST", [replaced], now - timedelta(hours=2))
        watch.record(context, "nodeclaims", "LIST", [recent], now - timedelta(minutes=30))
        gathered = load_live(client, history_path=path)
    finally:
        watch.close()
    assert not [n for n in gathered.notices if n.startswith("history not used")]
    assert [c.name for c in gathered.history.lifecycles] == ["gpu-replaced-1", "gpu-recent-1"]


def test_the_history_read_for_a_diagnosis_leaves_the_pods_events_on_disk(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite3")
    try:
        listed = [
            recorded_event(kind, name, reason, minutes)
            for kind, name, reason, minutes in (
                ("Pod", "trainer-0", "Scheduled", 40),
                ("Node", "ip-10-0-1-1", "NodeNotReady", 30),
                ("Pod", "trainer-0", "Pulled", 25),
                ("NodeClaim", "gpu-a-1", "Launched", 20),
                ("NodePool", "gpu-a", "NodeRepairBlocked", 10),
            )
        ]
        store.record("ctx", "events", "LIST", listed, START)
        history = read_history(store, "ctx", START)
    finally:
        store.close()
    assert [(e.involved_kind, e.reason) for e in history.events] == [
        ("Node", "NodeNotReady"),
        ("NodeClaim", "Launched"),
        ("NodePool", "NodeRepairBlocked"),
    ]


def recorded_event(kind: str, name: str, reason: str, minutes_ago: int) -> Event:
    when = START - timedelta(minutes=minutes_ago)
    return Event(
        namespace="default",
        name=f"{name}.{reason.lower()}",
        uid=f"uid-{name}-{reason}",
        involved_kind=kind,
        involved_name=name,
        involved_uid=f"uid-{name}",
        reason=reason,
        message=f"{reason} on {name}",
        type="Normal",
        source="kubelet",
        host="",
        first_seen=when,
        last_seen=when,
        count=1,
    )


def test_without_a_history_file_none_is_made_and_nothing_is_said(
    mng: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    _sim, client = mng
    path = tmp_path / "history.sqlite3"
    gathered = load_live(client, history_path=path)
    assert not path.exists()
    assert gathered.history.lifecycles == ()
    assert not [n for n in gathered.notices if "history" in n]


def test_a_history_file_that_is_not_a_database_is_named_and_left_out(
    mng: tuple[SimCluster, ClusterClient], tmp_path: Path
) -> None:
    _sim, client = mng
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"this is not an SQLite database, it is a hand-copied log file\n" * 20)
    gathered = load_live(client, history_path=path)
    (notice,) = [n for n in gathered.notices if n.startswith("history not used: ")]
    assert notice.startswith(f"history not used: {path} is not a usable history database")
    assert gathered.history.lifecycles == ()


def karpenter(namespace: str, name: str) -> dict[str, Any]:
    """A Karpenter controller Deployment as the chart renders it (charts/karpenter)."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "karpenter"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "image": "public.ecr.aws/karpenter/controller:1.8.1",
                            "env": [{"name": "FEATURE_GATES", "value": "NodeRepair=true"}],
                        }
                    ]
                }
            }
        },
    }


class Deployments:
    """The Deployments an API server holds, answering a LIST by label and a GET by name; a
    LIST that RBAC refuses raises as ClusterClient raises Forbidden."""

    def __init__(self, *held: dict[str, Any], list_refused: bool = False) -> None:
        self.held = held
        self.list_refused = list_refused
        self.got: list[tuple[str, str]] = []

    def list_pages(
        self, resource: Resource, *, namespace: str | None, label_selector: str
    ) -> Iterator[tuple[list[dict[str, Any]], str]]:
        from mignurse.cluster.client import Forbidden

        assert resource == DEPLOYMENTS and label_selector == "app.kubernetes.io/name=karpenter"
        if self.list_refused:
            raise Forbidden("deployments.apps is forbidden", "list", "deployments.apps")
        yield (
            [
                d
                for d in self.held
                if namespace in (None, d["metadata"]["namespace"])
                and d["metadata"]["labels"].get("app.kubernetes.io/name") == "karpenter"
            ],
            "1",
        )

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.got.append((str(namespace), name))
        for d in self.held:
            if (d["metadata"]["namespace"], d["metadata"]["name"]) == (namespace, name):
                return d
        raise NotFound(f'deployments.apps "{name}" not found')


def test_karpenter_under_another_release_name_and_namespace_is_found_by_its_label() -> None:
    api = Deployments(karpenter("karpenter-system", "karpenter-prod"))
    found = find_karpenter_deployment(api)  # type: ignore[arg-type]
    assert found is not None and found["metadata"]["name"] == "karpenter-prod"
    notices: list[str] = []
    settings = karpenter_settings(api, notices)  # type: ignore[arg-type]
    assert settings is not None and settings.node_repair is True and notices == []


def test_where_rbac_refuses_the_list_only_the_asked_namespace_is_read() -> None:
    api = Deployments(
        karpenter("kube-system", "karpenter"),
        karpenter("karpenter", "karpenter"),
        list_refused=True,
    )
    found = find_karpenter_deployment(api, "karpenter")  # type: ignore[arg-type]
    assert found is not None and found["metadata"]["namespace"] == "karpenter"
    assert api.got == [("karpenter", "karpenter")]


def test_where_rbac_refuses_the_list_both_usual_places_are_read() -> None:
    api = Deployments(karpenter("karpenter", "karpenter"), list_refused=True)
    found = find_karpenter_deployment(api)  # type: ignore[arg-type]
    assert found is not None and found["metadata"]["namespace"] == "karpenter"
    assert api.got == [("kube-system", "karpenter"), ("karpenter", "karpenter")]


def test_no_karpenter_deployment_anywhere_says_repair_is_unknown() -> None:
    notices: list[str] = []
    assert karpenter_settings(Deployments(list_refused=True), notices) is None  # type: ignore[arg-type]
    assert notices == ["no Karpenter Deployment found: whether repair is on is unknown"]


class Policies:
    """The GPU operator's ClusterPolicies as an API server answers a LIST of them: its CRD
    not served (404, no GPU operator), RBAC refusing the list, or the objects it holds."""

    def __init__(self, *held: dict[str, Any], answer: str = "held") -> None:
        self.held = held
        self.answer = answer

    def list(self, resource: Resource, parse: Any) -> Any:
        from types import SimpleNamespace

        from mignurse.cluster.client import Forbidden

        assert (resource.group, resource.version, resource.plural) == (
            "nvidia.com",
            "v1",
            "clusterpolicies",
        )
        if self.answer == "404":
            raise NotFound("the server could not find the requested resource")
        if self.answer == "403":
            raise Forbidden("clusterpolicies.nvidia.com is forbidden", "list", resource.plural)
        return SimpleNamespace(items=[parse(p) for p in self.held])


# The shape of the chart's ClusterPolicy (NVIDIA/gpu-operator v26.7.0
# deployments/gpu-operator/templates/clusterpolicy.yaml), trimmed to what the rules read.
OPERATOR_POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy", "labels": {"app.kubernetes.io/version": "v26.7.0"}},
    "spec": {"driver": {"enabled": True}, "migManager": {"enabled": True}},
}


def test_the_gpu_operators_cluster_policy_is_read_live() -> None:
    from mignurse.diagnose.sources import read_cluster_policy

    notices: list[str] = []
    policy = read_cluster_policy(Policies(OPERATOR_POLICY), notices)  # type: ignore[arg-type]
    assert policy == OPERATOR_POLICY and notices == []


def test_a_cluster_without_the_gpu_operator_reads_no_policy_and_says_nothing() -> None:
    from mignurse.diagnose.sources import read_cluster_policy

    notices: list[str] = []
    assert read_cluster_policy(Policies(answer="404"), notices) is None  # type: ignore[arg-type]
    assert read_cluster_policy(Policies(), notices) is None  # type: ignore[arg-type]
    assert notices == []


def test_a_refused_cluster_policy_list_is_one_notice_naming_what_is_assumed() -> None:
    from mignurse.diagnose.sources import read_cluster_policy

    notices: list[str] = []
    assert read_cluster_policy(Policies(answer="403"), notices) is None  # type: ignore[arg-type]
    assert len(notices) == 1 and notices[0].startswith("cannot list ClusterPolicies (")
    assert "a host driver is assumed" in notices[0]


def test_a_live_read_without_the_gpu_operator_has_no_policy_and_no_notice_of_it(
    mng: tuple[SimCluster, ClusterClient],
) -> None:
    _sim, client = mng
    gathered = load_live(client, history_path=None)
    assert gathered.cluster_policy is None
    assert not [n for n in gathered.notices if "ClusterPolicies" in n]
