"""The SSM transport against the SSM stand-in (which really runs scripts) and moto's S3 server."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import shlex
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st
from moto.server import ThreadedMotoServer
from ssmstandin import STDERR_MAX, STDOUT_MAX, TRUNCATED, InstanceSpec, SsmStandIn

from mignurse.nodeaccess.base import CommandResult
from mignurse.nodeaccess.script import collector_script
from mignurse.nodeaccess.ssm import SSMFleet, SSMShell, batches
from mignurse.nodeaccess.ssmwrapper import (
    Base64Stream,
    WrapperOutput,
    agent_output_key,
    key_from_output_url,
)
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import NodeSandbox, story_for

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
def standin(s3_endpoint: str) -> Iterator[SsmStandIn]:
    """The SSM stand-in; an output bucket named in SendCommand is written on moto's S3."""
    with SsmStandIn({}, s3_endpoint_url=s3_endpoint) as server:
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
        "echo hi", timeout=120, stdout=io.BytesIO()
    )
    # far below the 120 s a send-and-wait would take, with room for two busy cores
    assert time.monotonic() - started < 40
    assert result.rc is None and not result.ok
    assert result.error.startswith("i-0nossm is not managed by SSM")
    assert result.error.endswith("use SSH") and "\n" not in result.error
    assert standin.calls.count("SendCommand") == before


def test_connection_lost_agent_is_one_line_error_fast(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0lost"] = InstanceSpec(online=False)
    started = time.monotonic()
    result = _shell(standin, s3_endpoint, "i-0lost").run(
        "echo hi", timeout=120, stdout=io.BytesIO()
    )
    assert time.monotonic() - started < 40  # far below the 120 s a send-and-wait would take
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
        "sleep 120", timeout=1, stdout=io.BytesIO()
    )
    assert time.monotonic() - started < 60  # killed at the 5 s floor, not after the 120 s sleep
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
    results: dict[str, CommandResult] = {}
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
        results: list[CommandResult] = []
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
        "echo lost", timeout=120, stdout=io.BytesIO()
    )
    # told as soon as it vanished from the listing, not after the 120 s + delivery deadline
    assert time.monotonic() - started < 40
    assert result.rc is None and not result.ok and "\n" not in result.error
    assert result.error.startswith("SSM lost the command on i-0vanish: it was InProgress")


# -- the command's S3 output bucket (--ssm-upload output-bucket) ------------------------------


def _wait_for_end(ssm: Any, command_id: str, instance_id: str) -> dict[str, Any]:
    invocation: dict[str, Any] = {}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            invocation = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "InvocationDoesNotExist"
            continue
        if invocation["Status"] not in ("Pending", "InProgress", "Delayed"):
            break
    return invocation


def _sends_since(standin: SsmStandIn, before: int) -> list[dict[str, Any]]:
    return [p for op, p in standin.requests[before:] if op == "SendCommand"]


def test_standin_writes_the_whole_output_where_the_agent_would(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0layout"] = InstanceSpec()
    ssm = _ssm(standin)
    sent = ssm.send_command(
        InstanceIds=["i-0layout"],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": ["yes x | head -c 30000", "echo oops >&2", "exit 4"]},
        OutputS3BucketName=BUCKET,
        OutputS3KeyPrefix="layout-test/",  # the agent's path.Join drops the trailing slash
    )
    command_id = sent["Command"]["CommandId"]
    invocation = _wait_for_end(ssm, command_id, "i-0layout")
    assert invocation["Status"] == "Failed" and invocation["ResponseCode"] == 4
    folder = f"layout-test/{command_id}/i-0layout/awsrunShellScript/0.awsrunShellScript"
    assert invocation["StandardOutputUrl"] == f"{s3_endpoint}/{BUCKET}/{folder}/stdout"
    assert invocation["StandardErrorUrl"] == f"{s3_endpoint}/{BUCKET}/{folder}/stderr"
    s3 = _s3(s3_endpoint)
    # the object holds all of it; only StandardOutputContent stops at 24,000
    assert s3.get_object(Bucket=BUCKET, Key=f"{folder}/stdout")["Body"].read() == b"x\n" * 15000
    assert s3.get_object(Bucket=BUCKET, Key=f"{folder}/stderr")["Body"].read() == b"oops\n"
    assert invocation["StandardOutputContent"].endswith(TRUNCATED)
    for stream in ("stdout", "stderr"):
        s3.delete_object(Bucket=BUCKET, Key=f"{folder}/{stream}")


def test_standin_without_an_s3_endpoint_records_the_bucket_and_writes_nothing(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with SsmStandIn({"i-0quiet": InstanceSpec()}, race=0.2) as server:
        ssm = _ssm(server)
        sent = ssm.send_command(
            InstanceIds=["i-0quiet"],
            DocumentName="AWS-RunShellScript",
            Parameters={"commands": ["echo hello"]},
            OutputS3BucketName=BUCKET,
            OutputS3KeyPrefix="quiet",
        )
        assert sent["Command"]["OutputS3BucketName"] == BUCKET
        invocation = _wait_for_end(ssm, sent["Command"]["CommandId"], "i-0quiet")
        assert invocation["Status"] == "Success"
        assert not server.upload_errors
    assert not [k for k in _objects(s3_endpoint) if k.startswith("quiet/")]


def test_output_bucket_brings_back_the_exact_bytes_far_past_24000(
    tmp_path: Path, standin: SsmStandIn, s3_endpoint: str
) -> None:
    # every byte value, newlines and NULs included; 300,001 bytes end in a padded group
    data = random.Random(4).randbytes(300_001)
    blob = tmp_path / "evidence.bin"
    blob.write_bytes(data)
    standin.instances["i-0outbucket"] = InstanceSpec()
    before = len(standin.requests)
    sink = io.BytesIO()
    result = _shell(standin, s3_endpoint, "i-0outbucket", upload="output-bucket").run(
        f"cat {shlex.quote(str(blob))}\necho noted >&2\n", timeout=30, stdout=sink
    )
    assert result.ok, result
    assert hashlib.sha256(sink.getvalue()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert result.bytes_out == len(data)
    assert result.stderr_tail.strip() == "noted"
    (send,) = _sends_since(standin, before)
    prefix = send["OutputS3KeyPrefix"]
    assert send["OutputS3BucketName"] == BUCKET
    assert prefix.startswith("mignurse/") and not prefix.endswith("/")
    wrapper = "\n".join(send["Parameters"]["commands"])
    assert "curl" not in wrapper and "base64" in wrapper
    # both objects the agent wrote (stdout, and stderr: "noted") are gone afterwards
    assert not [k for k in _objects(s3_endpoint) if k.startswith(prefix)]
    assert not [key for key, _ in standin.upload_errors if key.startswith(prefix)]


def test_output_bucket_passes_the_scripts_exit_status_through(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0outrc"] = InstanceSpec()
    sink = io.BytesIO()
    result = _shell(standin, s3_endpoint, "i-0outrc", upload="output-bucket").run(
        "printf 'half a tar'\nexit 3\n", timeout=20, stdout=sink
    )
    assert result.rc == 3 and not result.error and not result.timed_out, result
    assert sink.getvalue() == b"half a tar" and result.bytes_out == 10


def test_output_bucket_finds_the_object_by_the_agents_layout_when_ssm_gives_no_url(
    standin: SsmStandIn, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(standin, "_output_url", lambda inv, stream: "")
    standin.instances["i-0nourl"] = InstanceSpec()
    before = len(standin.requests)
    sink = io.BytesIO()
    result = _shell(standin, s3_endpoint, "i-0nourl", upload="output-bucket").run(
        "echo from the layout; echo err >&2", timeout=20, stdout=sink
    )
    assert result.ok and sink.getvalue() == b"from the layout\n", result
    (send,) = _sends_since(standin, before)
    assert not [k for k in _objects(s3_endpoint) if k.startswith(send["OutputS3KeyPrefix"])]


def test_output_bucket_that_does_not_exist_is_one_line_per_node(
    standin: SsmStandIn, s3_endpoint: str
) -> None:
    ids = ["i-0nobucket0", "i-0nobucket1"]
    for iid in ids:
        standin.instances[iid] = InstanceSpec()
    fleet = SSMFleet(
        ssm_client=_ssm(standin),
        s3_client=_s3(s3_endpoint),
        bucket="mignurse-no-such-bucket",
        poll=FAST_POLL,
        upload="output-bucket",
    )
    results: dict[str, CommandResult] = {}
    fleet.run(
        [(iid, iid) for iid in ids],
        "echo hi",
        timeout=20,
        sink_for=lambda node: io.BytesIO(),
        done=lambda r: results.__setitem__(r.node, r),
    )
    assert sorted(results) == ids
    for iid, result in results.items():
        assert not result.ok and "\n" not in result.error, result
        assert result.error.startswith(
            f"the SSM output of {iid} is not in s3://mignurse-no-such-bucket/"
        )
        assert "NoSuchBucket" in result.error and "s3:PutObject" in result.error
    # the agent's upload failed and the invocations still ended as they would have
    failed_uploads = [key for key, _ in standin.upload_errors]
    assert [iid for iid in ids if any(f"/{iid}/" in key for key in failed_uploads)] == ids


def _bare_path(folder: Path, *tools: str) -> str:
    """A PATH holding only `tools` (and what the wrapper needs): a node without the rest."""
    folder.mkdir()
    for tool in ("sh", "mktemp", "rm", "cat", *tools):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not on this machine")
        (folder / tool).symlink_to(found)
    return str(folder)


def test_output_bucket_on_a_node_without_base64_or_openssl_fails_before_running(
    tmp_path: Path, standin: SsmStandIn, s3_endpoint: str
) -> None:
    standin.instances["i-0nobase64"] = InstanceSpec(env={"PATH": _bare_path(tmp_path / "bin")})
    ran = tmp_path / "ran"
    result = _shell(standin, s3_endpoint, "i-0nobase64", upload="output-bucket").run(
        f"echo yes > {shlex.quote(str(ran))}", timeout=20, stdout=io.BytesIO()
    )
    assert result.rc is None and "\n" not in result.error, result
    assert result.error.startswith("i-0nobase64 could not upload its output: ")
    assert "neither base64 nor openssl" in result.error
    assert not ran.exists()  # found out before the collection, not after it


def test_output_bucket_on_a_node_with_only_openssl_encodes_with_it(
    tmp_path: Path, standin: SsmStandIn, s3_endpoint: str
) -> None:
    path = _bare_path(tmp_path / "bin", "openssl")
    standin.instances["i-0openssl"] = InstanceSpec(env={"PATH": path})
    data = random.Random(5).randbytes(5000)
    blob = tmp_path / "blob"
    blob.write_bytes(data)
    sink = io.BytesIO()
    result = _shell(standin, s3_endpoint, "i-0openssl", upload="output-bucket").run(
        f"cat {shlex.quote(str(blob))}", timeout=20, stdout=sink
    )
    assert result.ok, result
    assert sink.getvalue() == data  # openssl's 64-character lines decode the same


def test_a_three_node_fleet_collects_through_the_output_bucket(
    tmp_path: Path, standin: SsmStandIn, s3_endpoint: str
) -> None:
    nodes = SimCluster(load_scenario("mig-hook-notready"), speed=0).objects("nodes")[:3]
    targets: list[tuple[str, str]] = []
    for n, node_json in enumerate(nodes):
        name = node_json["metadata"]["name"]
        sandbox = NodeSandbox.for_node(tmp_path / name, node_json, story=story_for(node_json))
        iid = f"i-0outfleet{n}"
        standin.instances[iid] = InstanceSpec(env=sandbox.env, path_prefix=sandbox.path_prefix)
        targets.append((name, iid))
    sinks = {name: io.BytesIO() for name, _ in targets}
    results: dict[str, CommandResult] = {}
    before = len(standin.requests)
    _fleet(standin, s3_endpoint, upload="output-bucket", max_concurrency=3).run(
        targets,
        collector_script(),
        timeout=60,
        sink_for=sinks.__getitem__,
        done=lambda r: results.__setitem__(r.node, r),
    )
    (send,) = _sends_since(standin, before)
    assert sorted(send["InstanceIds"]) == sorted(iid for _, iid in targets)
    assert send["OutputS3BucketName"] == BUCKET
    for name, _ in targets:
        assert results[name].ok, results[name]
        assert results[name].bytes_out == len(sinks[name].getvalue()) > 0
        with tarfile.open(fileobj=io.BytesIO(sinks[name].getvalue())) as tar:
            assert "node/manifest.json" in tar.getnames()
            member = tar.extractfile("node/kubelet.log")
            assert member is not None and member.read()
    assert not [k for k in _objects(s3_endpoint) if k.startswith(send["OutputS3KeyPrefix"])]


# -- the pieces: the agent's layout, the URL SSM returns, the streaming decoder ----------------


def test_the_agents_layout_is_joined_like_go_path_join() -> None:
    tail = "cmd-1/i-0abc/awsrunShellScript/0.awsrunShellScript/stdout"
    assert agent_output_key("mignurse/0123", "cmd-1", "i-0abc", "stdout") == f"mignurse/0123/{tail}"
    assert agent_output_key("a//b/", "cmd-1", "i-0abc", "stdout") == f"a/b/{tail}"
    assert agent_output_key("", "cmd-1", "i-0abc", "stdout") == tail


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://s3.us-west-2.amazonaws.com/my-bucket/p/c/i/stdout", "p/c/i/stdout"),
        ("https://s3-us-west-2.amazonaws.com/my-bucket/p/c/i/stdout", "p/c/i/stdout"),
        ("https://my-bucket.s3.us-west-2.amazonaws.com/p/c/i/stdout", "p/c/i/stdout"),
        ("https://my-bucket.s3.amazonaws.com/my-bucket/stdout", "my-bucket/stdout"),
        ("http://127.0.0.1:5000/my-bucket/p%3Aq/stdout", "p:q/stdout"),
        ("https://s3.amazonaws.com/other-bucket/p/stdout", ""),
        ("", ""),
    ],
)
def test_the_output_url_gives_the_key_path_style_or_virtual_hosted(url: str, key: str) -> None:
    assert key_from_output_url(url, "my-bucket") == key


def _chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({cut % (len(stream) + 1) for cut in cuts})
    return [stream[a:b] for a, b in zip([0, *bounds], [*bounds, len(stream)], strict=True)]


@given(
    data=st.binary(max_size=3000),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=16),
    width=st.sampled_from([0, 1, 3, 64, 76]),  # 64: openssl's lines, 76: coreutils'
)
def test_the_decoder_gives_the_same_bytes_whatever_the_chunk_boundaries(
    data: bytes, cuts: list[int], width: int
) -> None:
    text = base64.b64encode(data)
    if width:
        text = b"\n".join(text[i : i + width] for i in range(0, len(text), width)) + b"\n"
    output = WrapperOutput()
    decoded = b"".join(output.feed(c) for c in _chunked(b"mignurse-rc=7\n" + text, cuts))
    output.close()
    assert decoded == data
    assert output.first_line == "mignurse-rc=7"


def test_the_decoder_takes_one_byte_at_a_time_and_every_split_of_a_group() -> None:
    data = bytes(range(256)) * 3 + b"\x00"
    text = base64.encodebytes(data)  # 76-character lines, a padded end
    one_at_a_time = Base64Stream()
    assert b"".join(one_at_a_time.feed(text[i : i + 1]) for i in range(len(text))) == data
    one_at_a_time.close()
    for cut in range(len(text) + 1):
        stream = Base64Stream()
        assert stream.feed(text[:cut]) + stream.feed(text[cut:]) == data, cut
        stream.close()


def test_the_decoder_refuses_what_is_not_whole_base64() -> None:
    cut_short = Base64Stream()
    assert cut_short.feed(b"aGVsbG8") == b"hel"  # "hello" with its last group cut off
    with pytest.raises(ValueError, match="mid-group"):
        cut_short.close()
    with pytest.raises(ValueError, match="not base64"):
        Base64Stream().feed(b"aGV*bG8=")
    never_a_line = WrapperOutput()
    never_a_line.feed(b"mignurse-rc=0")
    with pytest.raises(ValueError, match="first line"):
        never_a_line.close()
