"""The SSM transport against the SSM stand-in (which really runs scripts) and moto's S3 server."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from mignurse.nodeaccess.base import RunResult
from mignurse.nodeaccess.script import collector_script
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell, batches
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import NodeSandbox
from mignurse.sim.ssm import STDERR_MAX, STDOUT_MAX, TRUNCATED, InstanceSpec, SsmStandIn

REGION = "us-west-2"
BUCKET = "mignurse-collect"
FAST_POLL = (0.1, 0.5)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    yield endpoint
    server.stop()


@pytest.fixture(scope="module")
def standin() -> Iterator[SsmStandIn]:
    with SsmStandIn({}) as server:
        yield server


@pytest.fixture(autouse=True)
def _credentials(fake_aws: None) -> None:
    """Every test here talks to the stand-ins with test credentials."""


def _ssm(standin: SsmStandIn, retries: dict[str, Any] | None = None) -> Any:
    config = Config(retries=retries or {"max_attempts": 1})
    return boto3.client("ssm", endpoint_url=standin.endpoint_url, region_name=REGION, config=config)


def _s3(endpoint: str) -> Any:
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, config=config)


def _fleet(standin: SsmStandIn, s3_endpoint: str, **kw: Any) -> SSMFleet:
    return SSMFleet(
        ssm_client=kw.pop("ssm_client", None) or _ssm(standin),
        s3_client=_s3(s3_endpoint),
        bucket=BUCKET,
        poll=FAST_POLL,
        **kw,
    )


def _shell(standin: SsmStandIn, s3_endpoint: str, iid: str, **kw: Any) -> SSMShell:
    return SSMShell(f"node-{iid}", iid, fleet=_fleet(standin, s3_endpoint, **kw))


def _objects(s3_endpoint: str) -> list[str]:
    listed = _s3(s3_endpoint).list_objects_v2(Bucket=BUCKET)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_collector_runs_through_ssm_and_the_node_uploads_the_tar(
    tmp_path: Path, standin: SsmStandIn, s3_endpoint: str
) -> None:
    nodes = SimCluster(load_scenario("mig-hook-notready"), speed=0).objects("nodes")
    node_json = next(
        n for n in nodes if n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "failed"
    )
    sandbox = NodeSandbox.for_node(tmp_path / "sbx", node_json, story="mig-hook")
    standin.instances["i-0collector"] = InstanceSpec(
        env=sandbox.env, path_prefix=sandbox.path_prefix
    )
    sink = io.BytesIO()
    result = _shell(standin, s3_endpoint, "i-0collector").run(
        collector_script(), timeout=60, stdout=sink
    )
    assert result.ok, result
    assert result.transport == "ssm" and result.bytes_out == len(sink.getvalue()) > 0
    with tarfile.open(fileobj=io.BytesIO(sink.getvalue())) as tar:
        names = tar.getnames()
        member = tar.extractfile("node/kubelet.log")
        assert member is not None and member.read()
    assert "node/manifest.json" in names
    assert not [k for k in _objects(s3_endpoint) if k.startswith("mignurse/")]  # deleted after


def test_large_output_arrives_whole_not_cut_at_24000(standin: SsmStandIn, s3_endpoint: str) -> None:
    standin.instances["i-0large"] = InstanceSpec()
    sink = io.BytesIO()
    script = "yes 0123456789abcdefghi | head -c 102400\necho done >&2\nexit 3\n"
    result = _shell(standin, s3_endpoint, "i-0large").run(script, timeout=20, stdout=sink)
    assert result.rc == 3 and not result.error and not result.timed_out, result
    assert sink.getvalue() == (b"0123456789abcdefghi\n" * 6000)[:102400]
    assert result.bytes_out == 102400
    assert result.stderr_tail.strip() == "done"


def test_the_invocation_does_not_exist_race_is_tolerated(s3_endpoint: str) -> None:
    with SsmStandIn({"i-0race": InstanceSpec(slow=0.3)}, race=1.0) as server:
        sink = io.BytesIO()
        result = _shell(server, s3_endpoint, "i-0race").run("echo hi", timeout=10, stdout=sink)
        assert result.ok, result
        assert sink.getvalue() == b"hi\n"
        assert server.empty_lists >= 1  # polled through the window where SSM lists nothing
        sends = [p for op, p in server.requests if op == "SendCommand"]
        assert sends and sends[0]["Parameters"]["executionTimeout"] == ["10"]


def test_not_managed_instance_is_one_line_error_fast(standin: SsmStandIn, s3_endpoint: str) -> None:
    standin.instances["i-0nossm"] = InstanceSpec(managed=False)
    before = standin.calls.count("SendCommand")
    started = time.monotonic()
    result = _shell(standin, s3_endpoint, "i-0nossm").run(
        "echo hi", timeout=10, stdout=io.BytesIO()
    )
    assert time.monotonic() - started < 3
    assert result.rc is None and not result.ok
    assert result.error.startswith("i-0nossm is not managed by SSM")
    assert result.error.endswith("use SSH") and "\n" not in result.error
    assert standin.calls.count("SendCommand") == before


def test_connection_lost_agent_is_one_line_error_fast(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0lost"] = InstanceSpec(online=False)
    started = time.monotonic()
    result = _shell(standin, s3_endpoint, "i-0lost").run("echo hi", timeout=10, stdout=io.BytesIO())
    assert time.monotonic() - started < 3
    assert result.error.startswith("SSM agent on i-0lost is ConnectionLost since 20")
    assert "\n" not in result.error


def test_unknown_instance_is_refused_by_send_command(standin: SsmStandIn) -> None:
    with pytest.raises(ClientError) as caught:
        _ssm(standin).send_command(
            InstanceIds=["i-0nobody"],
            DocumentName="AWS-RunShellScript",
            Parameters={"commands": ["true"]},
        )
    assert caught.value.response["Error"]["Code"] == "InvalidInstanceId"


def test_execution_timeout_kills_the_script(standin: SsmStandIn, s3_endpoint: str) -> None:
    standin.instances["i-0slowpoke"] = InstanceSpec()
    started = time.monotonic()
    # executionTimeout 1 → the agent's floor of 5 s
    result = _shell(standin, s3_endpoint, "i-0slowpoke").run(
        "sleep 60", timeout=1, stdout=io.BytesIO()
    )
    assert time.monotonic() - started < 15
    assert result.timed_out and result.rc is None, result
    assert "executionTimeout" in result.error


def test_more_than_50_ids_are_refused_and_batches_fit(standin: SsmStandIn) -> None:
    ids = [f"i-{n:017x}" for n in range(120)]
    with pytest.raises(ClientError) as caught:
        _ssm(standin).send_command(
            InstanceIds=ids[:51],
            DocumentName="AWS-RunShellScript",
            Parameters={"commands": ["true"]},
        )
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert [len(b) for b in batches(ids)] == [50, 50, 20]


def test_throttling_is_retried_by_adaptive_botocore(s3_endpoint: str) -> None:
    with SsmStandIn({"i-0busy": InstanceSpec()}, race=0.2, throttle=1) as server:
        ssm = _ssm(server, {"mode": "adaptive", "max_attempts": 5})
        sink = io.BytesIO()
        result = _shell(server, s3_endpoint, "i-0busy", ssm_client=ssm).run(
            "echo ok", timeout=10, stdout=sink
        )
        assert result.ok and sink.getvalue() == b"ok\n", result
        assert server.calls[:2] == ["DescribeInstanceInformation"] * 2
        assert server.errors[0] == ("DescribeInstanceInformation", "ThrottlingException")


def test_standin_caps_output_fields_like_ssm(standin: SsmStandIn) -> None:
    standin.instances["i-0chatty"] = InstanceSpec()
    ssm = _ssm(standin)
    sent = ssm.send_command(
        InstanceIds=["i-0chatty"],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["yes x | head -c 30000", "yes e | head -c 9000 >&2"]},
    )
    command_id = sent["Command"]["CommandId"]
    invocation: dict[str, Any] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            invocation = ssm.get_command_invocation(CommandId=command_id, InstanceId="i-0chatty")
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "InvocationDoesNotExist"
            continue
        if invocation["Status"] not in ("Pending", "InProgress", "Delayed"):
            break
    assert invocation["Status"] == "Success" and invocation["ResponseCode"] == 0
    out = invocation["StandardOutputContent"]
    assert len(out) == STDOUT_MAX + len(TRUNCATED) and out.endswith(TRUNCATED)
    assert out[:STDOUT_MAX] == ("x\n" * 15000)[:STDOUT_MAX]
    err = invocation["StandardErrorContent"]
    assert len(err) == STDERR_MAX + len(TRUNCATED) and err.endswith(TRUNCATED)


def test_a_fleet_is_one_command_with_ssms_own_concurrency_bound(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    ids = {f"i-0fleet{n}": InstanceSpec() for n in range(4)}
    ids["i-0fleetnossm"] = InstanceSpec(managed=False)
    ids["i-0fleetlost"] = InstanceSpec(online=False)
    standin.instances.update(ids)
    sinks = {f"node-{iid}": io.BytesIO() for iid in ids}
    results: dict[str, RunResult] = {}
    sends_before = standin.calls.count("SendCommand")
    _fleet(standin, s3_endpoint, max_concurrency=2).run(
        [(f"node-{iid}", iid) for iid in ids],
        "sleep 0.3; echo from $SSM_COMMAND_ID",
        timeout=20,
        sink_for=sinks.__getitem__,
        done=lambda r: results.__setitem__(r.node, r),
    )
    assert set(results) == set(sinks)
    sends = [p for op, p in standin.requests if op == "SendCommand"][sends_before:]
    assert len(sends) == 1, "one SendCommand for the whole batch, not one per node"
    assert sorted(sends[0]["InstanceIds"]) == [f"i-0fleet{n}" for n in range(4)]
    assert sends[0]["MaxConcurrency"] == "2" and sends[0]["MaxErrors"] == "100%"
    assert standin.peak_in_progress <= 2
    for n in range(4):
        result = results[f"node-i-0fleet{n}"]
        assert result.ok, result
        assert sinks[result.node].getvalue().startswith(b"from ")
    assert "is not managed by SSM" in results["node-i-0fleetnossm"].error
    assert "ConnectionLost" in results["node-i-0fleetlost"].error
    assert not [k for k in _objects(s3_endpoint) if k.startswith("mignurse/")]


def test_more_than_50_nodes_go_out_in_batches_of_50(s3_endpoint: str) -> None:
    ids = [f"i-{n:017x}" for n in range(55)]
    with SsmStandIn({iid: InstanceSpec() for iid in ids}, race=0.2) as server:
        results: list[RunResult] = []
        sinks = {iid: io.BytesIO() for iid in ids}
        _fleet(server, s3_endpoint, max_concurrency=25).run(
            [(iid, iid) for iid in ids],
            "echo ok",
            timeout=30,
            sink_for=sinks.__getitem__,
            done=results.append,
        )
        sends = [p for op, p in server.requests if op == "SendCommand"]
        assert [len(p["InstanceIds"]) for p in sends] == [50, 5]
        assert len(results) == 55 and all(r.ok for r in results), [r for r in results if not r.ok]
        assert all(sink.getvalue() == b"ok\n" for sink in sinks.values())
        describes = [p for op, p in server.requests if op == "DescribeInstanceInformation"]
        assert [len(p["Filters"][0]["Values"]) for p in describes] == [50, 5]


def test_standin_stops_sending_once_max_errors_is_passed(standin: SsmStandIn) -> None:
    for n in range(3):
        standin.instances[f"i-0fail{n}"] = InstanceSpec()
    ssm = _ssm(standin)
    sent = ssm.send_command(
        InstanceIds=[f"i-0fail{n}" for n in range(3)],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["exit 7"]},
        MaxConcurrency="1",
        MaxErrors="0",
    )
    command_id = sent["Command"]["CommandId"]
    deadline = time.monotonic() + 10
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        time.sleep(0.2)
        rows = ssm.list_command_invocations(CommandId=command_id)["CommandInvocations"]
        if len(rows) == 3 and all(r["Status"] not in ("Pending", "InProgress") for r in rows):
            break
    statuses = sorted(r["Status"] for r in rows)
    assert statuses == ["Cancelled", "Cancelled", "Failed"], rows


def test_an_invocation_ssm_loses_mid_run_is_one_line_at_once(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0vanish"] = InstanceSpec(lose_when="echo lost")
    started = time.monotonic()
    result = _shell(standin, s3_endpoint, "i-0vanish").run(
        "echo lost", timeout=60, stdout=io.BytesIO()
    )
    # told as soon as it vanished from the listing, not after the 60 s + delivery deadline
    assert time.monotonic() - started < 10
    assert result.rc is None and not result.ok and "\n" not in result.error
    assert result.error.startswith("SSM lost the command on i-0vanish: it was InProgress")
