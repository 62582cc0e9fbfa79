"""The audit's AWS caller identity (through moto's STS on 127.0.0.1), and the cluster-wide
lock that pause/resume-node-repair take on the kube-system Namespace."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from mignurse.cluster.client import NAMESPACES
from mignurse.runner.audit import read_audit
from mignurse.runner.engine import Runner
from mignurse.runner.lock import LOCK_ANNOTATION
from mignurse.runner.schema import default_folder, load_runbook

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


@pytest.fixture
def sts(monkeypatch: pytest.MonkeyPatch, fake_aws: None) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", endpoint)
    yield endpoint
    server.stop()


def test_the_audit_names_the_aws_caller_when_aws_is_configured(
    cluster_for: Make, state_home: Path, sts: str
) -> None:
    c = cluster_for("healthy")
    node = c.nodes()[0]
    book = load_runbook(default_folder() / "cordon.yaml")
    result = Runner(book, {"node": node}, client=c.client, yes=True).run()
    assert result.status == "succeeded", result.error
    events = read_audit()
    arns = {e.get("aws") for e in events if e["run"] == result.run_id and e.get("aws")}
    whos = [e["who"] for e in events if e["run"] == result.run_id and "who" in e]
    arns |= {w.get("aws") for w in whos if w.get("aws")}
    assert any(str(a).startswith("arn:aws:") for a in arns), events
    assert all(w["local"] and w["kube"] for w in whos)


def test_a_cluster_runbook_holds_the_kube_system_lock_while_it_runs(
    cluster_for: Make, state_home: Path
) -> None:
    c = cluster_for("dcgm-repair-loop", speed=5)
    book = load_runbook(default_folder() / "pause-node-repair.yaml")
    seen: list[object] = []

    def watch(event: object) -> None:
        namespace = c.client.get(NAMESPACES, "kube-system")
        held = (namespace["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
        if held:
            seen.append(json.loads(held))

    first = Runner(book, {}, client=c.client, yes=True, listener=watch, holder="alice@laptop")
    result = first.run()
    assert result.status == "succeeded", result.error
    assert seen and all(lock["holder"] == "alice@laptop" for lock in seen)  # type: ignore[index]
    namespace = c.client.get(NAMESPACES, "kube-system")
    assert LOCK_ANNOTATION not in (namespace["metadata"].get("annotations") or {})  # released


def test_a_long_run_renews_its_lock_and_release_removes_it(
    cluster_for: Make, state_home: Path
) -> None:
    from mignurse.cluster.client import NODES
    from mignurse.runner.lock import TargetLock

    c = cluster_for("healthy", speed=1)  # the API server's clock moves: expiries can grow
    node = c.nodes()[0]

    def held() -> dict[str, object] | None:
        raw = (c.client.get(NODES, node)["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
        return json.loads(raw) if raw else None

    lock = TargetLock(
        c.client, target="node", name=node, holder="bob@box", run_id="r1", runbook="t", ttl=3
    )
    assert lock.acquire() is None
    first = held()
    assert first is not None and first["holder"] == "bob@box"
    lost: list[bool] = []
    lock.start_renewing(on_lost=lambda: lost.append(True))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = held()
        if now is not None and now["expires"] != first["expires"]:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the lock was never renewed")
    assert not lost
    lock.release()
    assert held() is None


def test_the_audit_names_the_caller_of_the_runs_own_profile(
    cluster_for: Make,
    state_home: Path,
    sts: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`mignurse run --profile oncall`: the identity logged is the profile's, the one the
    run's AWS calls act as, not the default credentials' (moto's STS answers per key)."""
    import boto3

    from mignurse.collect.access import Access
    from mignurse.runner.wiring import aws_for

    iam = boto3.client("iam", endpoint_url=sts, region_name="us-east-1")
    iam.create_user(UserName="oncall-engineer")
    key = iam.create_access_key(UserName="oncall-engineer")["AccessKey"]
    config = tmp_path / "aws-config"
    config.write_text(
        f"[profile oncall]\nregion = us-west-2\naws_access_key_id = {key['AccessKeyId']}\n"
        f"aws_secret_access_key = {key['SecretAccessKey']}\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)  # as the CLI: a profile over the environment
    c = cluster_for("healthy")
    book = load_runbook(default_folder() / "cordon.yaml")
    runner = Runner(
        book,
        {"node": c.nodes()[0]},
        client=c.client,
        yes=True,
        aws=aws_for(Access(profile="oncall")),
    )
    result = runner.run()
    assert result.status == "succeeded", result.error
    events = [e for e in read_audit() if e["run"] == result.run_id]
    arns = {e.get("aws") for e in events} | {e["who"].get("aws") for e in events if "who" in e}
    assert arns - {None} == {"arn:aws:iam::123456789012:user/oncall-engineer"}, events
