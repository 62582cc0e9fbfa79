"""A local stand-in for AWS Systems Manager Run Command that really runs the script.

moto's SSM runs nothing (Success at once, empty output) and lacks DescribeInstanceInformation,
so the SSM transport cannot be tested against it. This server speaks the SSM JSON protocol
(`X-Amz-Target: AmazonSSM.<Operation>`) on 127.0.0.1 to a real boto3 client for the few
operations mignurse uses, and runs `AWS-RunShellScript` for real: the joined `commands` go to
`_script.sh`, which `sh` runs in a thread with the instance's environment (a NodeSandbox's
`env` and `path_prefix`), killed at `executionTimeout`. A script can therefore upload its
output itself (curl to a presigned S3 URL on moto's server), as a real node would.

Faithful to the real service where it matters to a client (botocore
data/ssm/2014-11-06/service-2.json; aws/amazon-ssm-agent iohandler.go for the output caps): the
`InvocationDoesNotExist` window right after SendCommand, Pending → InProgress → terminal,
output fields empty until finished, stdout capped at 24,000 chars and stderr at 8,000 with
`--output truncated--`, ResponseCode -1 for a command that never started, ≤ 50 InstanceIds,
`InvalidInstanceId` for an unmanaged instance, DeliveryTimedOut for an agent that is offline,
and SendCommand's rate control: at most `MaxConcurrency` invocations of a command run at once
(the rest wait Pending), and once more than `MaxErrors` have ended Failed or ExecutionTimedOut
(DeliveryTimedOut does not count), the ones not started yet end Cancelled without running
(the status of those is an inference; AWS documents only that SSM "stops sending").
Signatures are not checked.

S3 output: when SendCommand names `OutputS3BucketName`, each invocation that ran its script
(whatever its final status) has its FULL stdout and stderr (not capped) uploaded with boto3,
before the final status shows, to the agent's layout
`<OutputS3KeyPrefix>/<CommandId>/<InstanceId>/awsrunShellScript/0.awsrunShellScript/{stdout,
stderr}` (an empty stream makes no object), and GetCommandInvocation returns
`StandardOutputUrl`/`StandardErrorUrl` (path-style; "" without an output bucket). The S3
endpoint is `s3_endpoint_url`, else `AWS_ENDPOINT_URL_S3`; with neither, the output is recorded,
not written, and real AWS is never contacted. An upload that fails (no such bucket: as when a
real instance role lacks s3:PutObject) leaves the invocation's end as it was and the object
absent; `upload_errors` lists (key, why).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mignurse.nodeaccess.ssmwrapper import agent_output_key

STDOUT_MAX = 24_000
STDERR_MAX = 8_000
TRUNCATED = "--output truncated--"
MAX_INSTANCE_IDS = 50
PLUGIN = "aws:runShellScript"
TIMED_OUT_RC = 137  # what a killed script reports; the agent's own figure is unverified
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL at executionTimeout
LOST_AFTER_SECONDS = 1.5  # how long a lost invocation shows InProgress before it vanishes

TERMINAL = {"Success", "Failed", "TimedOut", "Cancelled"}


@dataclass
class InstanceSpec:
    """One instance as SSM sees it.

    online=False: the agent is ConnectionLost; commands stay Pending until TimeoutSeconds, then
    end TimedOut/DeliveryTimedOut. slow: seconds between delivery and InProgress.
    managed=False: not registered with SSM (absent from DescribeInstanceInformation).
    lose_when=TEXT: a command whose lines contain TEXT shows InProgress for a moment, then SSM
    loses it (it vanishes from ListCommandInvocations and GetCommandInvocation), as when the
    instance is terminated mid-run; its script never runs. Other commands run normally.
    """

    env: dict[str, str] = field(default_factory=dict)
    path_prefix: list[str] = field(default_factory=list)
    online: bool = True
    slow: float = 0.0
    managed: bool = True
    platform_name: str = "Amazon Linux"
    platform_version: str = "2023"
    lose_when: str | None = None  # a command whose text holds this gets lost (see above)


class SsmError(Exception):
    """An SSM error response: `code` becomes `__type`, which botocore reads as the error code."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass
class _Invocation:
    command_id: str
    instance_id: str
    commands: list[str]
    execution_timeout: float
    delivery_timeout: float
    requested: float  # wall-clock epoch seconds
    visible_at: float  # monotonic: before this, GetCommandInvocation says it does not exist
    status: str = "Pending"
    details: str = "Pending"
    response_code: int = -1
    started: float | None = None
    ended: float | None = None
    stdout: str = ""
    stderr: str = ""
    proc: subprocess.Popen[bytes] | None = None
    cancelled: bool = False
    output_bucket: str = ""  # SendCommand's OutputS3BucketName
    output_prefix: str = ""  # and OutputS3KeyPrefix


@dataclass
class _Control:
    """One command's MaxConcurrency slots and its error count against MaxErrors."""

    slots: threading.Semaphore
    max_errors: int
    errors: int = 0


def _limit(value: Any, targets: int, *, default: str, floor: int) -> int:
    """`10` or `10%` of the targets, as SSM reads MaxConcurrency and MaxErrors."""
    text = str(value or default).strip()
    try:
        if text.endswith("%"):
            share = int(text[:-1]) * targets / 100
            return max(floor, math.ceil(share) if floor else math.floor(share))
        return max(floor, int(text))
    except ValueError:
        raise SsmError("ValidationException", f"{text!r} is not a number or a percentage") from None


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def _iso(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class SsmStandIn:
    """`SsmStandIn({"i-0abc": InstanceSpec(...)}).start()`; point boto3 at `.endpoint_url`.

    `calls` lists operation names in arrival order; `requests` pairs them with their bodies;
    `errors` lists (operation, code) for every error answered. `instances` may grow after start.
    `race` is the InvocationDoesNotExist window after SendCommand (seconds).
    `throttle` makes the next N requests fail with ThrottlingException (to exercise retries).
    `in_progress` is how many invocations are InProgress now; `peak_in_progress` the most at
    once since start (what a test of a caller's concurrency bound reads).
    `s3_endpoint_url` is where output-bucket uploads go (else `AWS_ENDPOINT_URL_S3`, else none).
    """

    def __init__(
        self,
        instances: dict[str, InstanceSpec],
        *,
        race: float = 0.7,
        throttle: int = 0,
        s3_endpoint_url: str | None = None,
    ) -> None:
        self.instances = dict(instances)
        self.s3_endpoint_url = s3_endpoint_url
        self.upload_errors: list[tuple[str, str]] = []  # (key, why) per failed output upload
        self.race = race
        self.throttle = throttle
        self.calls: list[str] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.errors: list[tuple[str, str]] = []  # (operation, error code) for each error sent
        self.in_progress = 0
        self.peak_in_progress = 0
        self.empty_lists = 0  # ListCommandInvocations answered empty for a known command
        self._controls: dict[str, _Control] = {}
        self._invocations: dict[tuple[str, str], _Invocation] = {}
        self._commands: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="mignurse-ssm-"))

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the SSM stand-in is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> SsmStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as AWS's endpoints answer: no 40 ms delayed-ACK wait

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                target = self.headers.get("X-Amz-Target", "")
                status, body = standin._dispatch(target, raw)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep test output quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            procs = [i.proc for i in self._invocations.values() if i.proc is not None]
            for inv in self._invocations.values():
                inv.cancelled = True
                if inv.proc is None and inv.status not in TERMINAL:
                    # never left as Pending/InProgress: a client still polling over a kept-alive
                    # connection sees the end at once instead of waiting out its own deadline
                    inv.status, inv.details = "Cancelled", "Cancelled"
        for proc in procs:
            _killpg(proc, signal.SIGKILL)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> SsmStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- protocol ----------------------------------------------------------------------------

    def _dispatch(self, target: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        operation = target.rpartition(".")[2]
        try:
            params = json.loads(raw or b"{}")
        except ValueError:
            params = {}
        with self._lock:
            self.calls.append(operation)
            self.requests.append((operation, params))
            throttled = self.throttle > 0
            if throttled:
                self.throttle -= 1
        handlers = {
            "DescribeInstanceInformation": self._describe_instance_information,
            "SendCommand": self._send_command,
            "GetCommandInvocation": self._get_command_invocation,
            "ListCommandInvocations": self._list_command_invocations,
            "CancelCommand": self._cancel_command,
        }
        try:
            if throttled:
                raise SsmError("ThrottlingException", "Rate exceeded")
            handler = handlers.get(operation)
            if handler is None:
                raise SsmError("UnknownOperationException", f"{operation} is not served here")
            return 200, handler(params)
        except SsmError as exc:
            with self._lock:
                self.errors.append((operation, exc.code))
            return exc.status, {"__type": exc.code, "message": exc.message}

    def _describe_instance_information(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted: set[str] | None = None
        for flt in params.get("Filters") or params.get("InstanceInformationFilterList") or []:
            key = flt.get("Key") or flt.get("key")
            if key in ("InstanceIds", "instanceids"):
                wanted = set(flt.get("Values") or flt.get("valueSet") or [])
        now = time.time()
        found = []
        for iid, spec in self.instances.items():
            if not spec.managed or (wanted is not None and iid not in wanted):
                continue
            found.append(
                {
                    "InstanceId": iid,
                    "PingStatus": "Online" if spec.online else "ConnectionLost",
                    # a lost agent last pinged a while ago; an online one just now
                    "LastPingDateTime": now if spec.online else now - 1800,
                    "AgentVersion": "3.3.1611.0",
                    "IsLatestVersion": False,
                    "PlatformType": "Linux",
                    "PlatformName": spec.platform_name,
                    "PlatformVersion": spec.platform_version,
                    "ResourceType": "EC2Instance",
                }
            )
        return {"InstanceInformationList": found}

    def _send_command(self, params: dict[str, Any]) -> dict[str, Any]:
        document = params.get("DocumentName", "")
        if document != "AWS-RunShellScript":
            raise SsmError("InvalidDocument", f"document {document!r} is not served here")
        ids = list(params.get("InstanceIds") or [])
        if not ids:
            raise SsmError("ValidationException", "InstanceIds or Targets must be given")
        if len(ids) > MAX_INSTANCE_IDS:
            raise SsmError(
                "ValidationException",
                "1 validation error detected: Value at 'instanceIds' failed to satisfy "
                f"constraint: Member must have length less than or equal to {MAX_INSTANCE_IDS}",
            )
        if len(set(ids)) != len(ids):
            raise SsmError("DuplicateInstanceId", "an instance id appears twice")
        for iid in ids:
            spec = self.instances.get(iid)
            if spec is None or not spec.managed:
                raise SsmError("InvalidInstanceId", "Instances not in a valid state for account")
        parameters = params.get("Parameters") or {}
        commands = [str(c) for c in parameters.get("commands") or []]
        if not commands:
            raise SsmError("InvalidParameters", "commands must have at least one line")
        execution_timeout = _execution_timeout(parameters.get("executionTimeout"))
        output_bucket = str(params.get("OutputS3BucketName") or "")
        output_prefix = str(params.get("OutputS3KeyPrefix") or "")
        if output_bucket and not 3 <= len(output_bucket) <= 63:
            raise SsmError("ValidationException", "OutputS3BucketName must be 3 to 63 characters")
        if len(output_prefix) > 500:
            raise SsmError(
                "ValidationException", "OutputS3KeyPrefix must be at most 500 characters"
            )
        delivery_timeout = int(params.get("TimeoutSeconds") or 3600)
        if not 30 <= delivery_timeout <= 2_592_000:
            raise SsmError("ValidationException", "TimeoutSeconds must be within 30..2592000")
        command_id = str(uuid.uuid4())
        now = time.time()
        concurrency = _limit(params.get("MaxConcurrency"), len(ids), default="50", floor=1)
        max_errors = _limit(params.get("MaxErrors"), len(ids), default="0", floor=0)
        with self._lock:
            self._commands[command_id] = ids
            self._controls[command_id] = _Control(threading.Semaphore(concurrency), max_errors)
            for iid in ids:
                inv = _Invocation(
                    command_id=command_id,
                    instance_id=iid,
                    commands=commands,
                    execution_timeout=execution_timeout,
                    delivery_timeout=delivery_timeout,
                    requested=now,
                    visible_at=time.monotonic() + self.race,
                    output_bucket=output_bucket,
                    output_prefix=output_prefix,
                )
                self._invocations[(command_id, iid)] = inv
                threading.Thread(
                    target=self._deliver, args=(inv, self.instances[iid]), daemon=True
                ).start()
        return {
            "Command": {
                "CommandId": command_id,
                "DocumentName": document,
                "Comment": params.get("Comment", ""),
                "Parameters": parameters,
                "InstanceIds": ids,
                "RequestedDateTime": now,
                "ExpiresAfter": now + delivery_timeout,
                "Status": "Pending",
                "StatusDetails": "Pending",
                "TimeoutSeconds": delivery_timeout,
                "OutputS3BucketName": params.get("OutputS3BucketName", ""),
                "OutputS3KeyPrefix": params.get("OutputS3KeyPrefix", ""),
                "MaxConcurrency": str(params.get("MaxConcurrency") or "50"),
                "MaxErrors": str(params.get("MaxErrors") or "0"),
                "TargetCount": len(ids),
                "CompletedCount": 0,
                "ErrorCount": 0,
            }
        }

    def _invocation(self, params: dict[str, Any]) -> _Invocation:
        command_id = str(params.get("CommandId", ""))
        instance_id = str(params.get("InstanceId", ""))
        with self._lock:
            if command_id not in self._commands:
                raise SsmError("InvalidCommandId", f"command {command_id} not found")
            inv = self._invocations.get((command_id, instance_id))
        if inv is None or time.monotonic() < inv.visible_at:
            raise SsmError("InvocationDoesNotExist", "")
        plugin = params.get("PluginName")
        if plugin and plugin != PLUGIN:
            raise SsmError("InvocationDoesNotExist", "")
        return inv

    def _get_command_invocation(self, params: dict[str, Any]) -> dict[str, Any]:
        inv = self._invocation(params)
        with self._lock:
            done = inv.status in TERMINAL
            elapsed = ""
            if inv.started is not None:
                seconds = (inv.ended or time.time()) - inv.started
                elapsed = time.strftime("PT%H:%M:%S", time.gmtime(seconds))
            return {
                "CommandId": inv.command_id,
                "InstanceId": inv.instance_id,
                "Comment": "",
                "DocumentName": "AWS-RunShellScript",
                "DocumentVersion": "$DEFAULT",
                "PluginName": PLUGIN,
                "ResponseCode": inv.response_code,
                "ExecutionStartDateTime": _iso(inv.started),
                "ExecutionElapsedTime": elapsed,
                "ExecutionEndDateTime": _iso(inv.ended),
                "Status": inv.status,
                "StatusDetails": inv.details,
                # empty until finished, as the real service returns them
                "StandardOutputContent": _cap(inv.stdout, STDOUT_MAX) if done else "",
                "StandardOutputUrl": self._output_url(inv, "stdout"),
                "StandardErrorContent": _cap(inv.stderr, STDERR_MAX) if done else "",
                "StandardErrorUrl": self._output_url(inv, "stderr"),
                "CloudWatchOutputConfig": {
                    "CloudWatchLogGroupName": "",
                    "CloudWatchOutputEnabled": False,
                },
            }

    def _list_command_invocations(self, params: dict[str, Any]) -> dict[str, Any]:
        command_id = params.get("CommandId")
        instance_id = params.get("InstanceId")
        details = bool(params.get("Details"))
        now = time.monotonic()
        rows = []
        with self._lock:
            for inv in self._invocations.values():
                if command_id and inv.command_id != command_id:
                    continue
                if instance_id and inv.instance_id != instance_id:
                    continue
                if now < inv.visible_at:
                    continue  # the same race: empty lists right after send
                row: dict[str, Any] = {
                    "CommandId": inv.command_id,
                    "InstanceId": inv.instance_id,
                    "DocumentName": "AWS-RunShellScript",
                    "RequestedDateTime": inv.requested,
                    "Status": inv.status,
                    "StatusDetails": inv.details,
                }
                if details:
                    output = inv.stdout + inv.stderr if inv.status in TERMINAL else ""
                    if len(output) > 2500:
                        output = output[:2500] + "\n---Output truncated---"
                    row["CommandPlugins"] = [
                        {
                            "Name": PLUGIN,
                            "Status": inv.status,
                            "StatusDetails": inv.details,
                            "ResponseCode": inv.response_code,
                            "Output": output,
                        }
                    ]
                rows.append(row)
            if command_id in self._commands and not rows:
                self.empty_lists += 1
        return {"CommandInvocations": rows}

    def _cancel_command(self, params: dict[str, Any]) -> dict[str, Any]:
        command_id = str(params.get("CommandId", ""))
        with self._lock:
            if command_id not in self._commands:
                raise SsmError("InvalidCommandId", f"command {command_id} not found")
            targets = [
                inv
                for inv in self._invocations.values()
                if inv.command_id == command_id and inv.status not in TERMINAL
            ]
            for inv in targets:
                inv.cancelled = True
                if inv.proc is None:
                    inv.status, inv.details = "Cancelled", "Cancelled"
        for inv in targets:
            if inv.proc is not None:
                _killpg(inv.proc, signal.SIGKILL)
        return {}

    # -- the "agent" -------------------------------------------------------------------------

    def _deliver(self, inv: _Invocation, spec: InstanceSpec) -> None:
        if not spec.online:
            # the agent never picks it up: Pending until the delivery timeout, then gone
            deadline = time.monotonic() + inv.delivery_timeout
            while time.monotonic() < deadline and not inv.cancelled:
                time.sleep(0.1)
            with self._lock:
                if not inv.cancelled:
                    inv.status, inv.details = "TimedOut", "DeliveryTimedOut"
            return
        control = self._controls[inv.command_id]
        control.slots.acquire()  # MaxConcurrency: wait Pending for a free slot
        try:
            if spec.slow > 0:
                time.sleep(spec.slow)
            with self._lock:
                if inv.cancelled:
                    return
                if control.errors > control.max_errors:
                    # MaxErrors passed: SSM stops sending the command to more targets
                    inv.status, inv.details = "Cancelled", "Cancelled"
                    return
                inv.status, inv.details = "InProgress", "InProgress"
                inv.started = time.time()
                self.in_progress += 1
                self.peak_in_progress = max(self.peak_in_progress, self.in_progress)
            self._execute(inv, spec)
            with self._lock:
                if inv.status == "Failed" or inv.details == "ExecutionTimedOut":
                    control.errors += 1
        finally:
            control.slots.release()

    def _execute(self, inv: _Invocation, spec: InstanceSpec) -> None:
        if spec.lose_when is not None and any(spec.lose_when in line for line in inv.commands):
            time.sleep(LOST_AFTER_SECONDS)  # visible InProgress first, as a real one would be
            with self._lock:
                self._invocations.pop((inv.command_id, inv.instance_id), None)
                self.in_progress -= 1
            return
        workdir = self._workdir / inv.command_id / inv.instance_id
        workdir.mkdir(parents=True, exist_ok=True)
        script = workdir / "_script.sh"
        script.write_text("\n".join(inv.commands) + "\n")
        env = dict(os.environ)
        env.update(spec.env)
        env["SSM_COMMAND_ID"] = inv.command_id
        if spec.path_prefix:
            env["PATH"] = os.pathsep.join([*spec.path_prefix, env.get("PATH") or os.defpath])
        out_path, err_path = workdir / "stdout", workdir / "stderr"
        timed_out = False
        rc: int | None = None
        with out_path.open("wb") as out, err_path.open("wb") as err:
            try:
                proc = subprocess.Popen(
                    ["sh", str(script)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,  # files, not pipes: no reader thread, no full-pipe deadlock
                    stderr=err,
                    cwd=workdir,
                    env=env,
                    start_new_session=True,  # its own process group, so a timeout kills it all
                )
            except OSError as exc:
                err.write(str(exc).encode())
                proc = None
            if proc is not None:
                with self._lock:
                    inv.proc = proc
                    if inv.cancelled:  # cancelled or stopped while it was starting
                        _killpg(proc, signal.SIGKILL)
                try:
                    rc = proc.wait(timeout=inv.execution_timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _killpg(proc, signal.SIGTERM)
                    try:
                        proc.wait(timeout=KILL_GRACE)
                    except subprocess.TimeoutExpired:
                        _killpg(proc, signal.SIGKILL)
                        proc.wait()
        if inv.output_bucket:
            # uploaded before the end shows, so a client that sees the end finds the objects
            self._upload_output(inv, {"stdout": out_path, "stderr": err_path})
        stdout, stderr = _read_text(out_path), _read_text(err_path)  # gone if stop() ran
        with self._lock:
            self.in_progress -= 1
            inv.proc = None
            inv.ended = time.time()
            inv.stdout, inv.stderr = stdout, stderr
            if inv.cancelled:
                inv.status, inv.details, inv.response_code = "Cancelled", "Cancelled", -1
            elif timed_out:
                inv.status, inv.details = "TimedOut", "ExecutionTimedOut"
                inv.response_code = TIMED_OUT_RC
            elif rc == 0:
                inv.status, inv.details, inv.response_code = "Success", "Success", 0
            else:
                inv.status, inv.details = "Failed", "Failed"
                inv.response_code = 1 if rc is None else rc

    # -- S3 output -----------------------------------------------------------------------------

    def _s3_endpoint(self) -> str | None:
        return self.s3_endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or None

    def _output_url(self, inv: _Invocation, stream: str) -> str:
        if not inv.output_bucket:
            return ""
        region = os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        base = self._s3_endpoint() or f"https://s3.{region}.amazonaws.com"
        key = agent_output_key(inv.output_prefix, inv.command_id, inv.instance_id, stream)
        return f"{base.rstrip('/')}/{inv.output_bucket}/{urllib.parse.quote(key)}"

    def _upload_output(self, inv: _Invocation, streams: dict[str, Path]) -> None:
        """What the agent does with the instance role: each non-empty stream, whole, to the
        command's bucket. A failure leaves the object absent and the invocation as it is."""
        endpoint = self._s3_endpoint()
        if endpoint is None:
            return  # recorded, not written: never real AWS
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError

        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            aws_access_key_id="testing",  # the "instance role"; a local S3 does not check it
            aws_secret_access_key="testing",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        for stream, path in streams.items():
            key = agent_output_key(inv.output_prefix, inv.command_id, inv.instance_id, stream)
            try:
                if path.stat().st_size == 0:
                    continue  # an empty stream makes no object
                with path.open("rb") as body:
                    s3.put_object(Bucket=inv.output_bucket, Key=key, Body=body)
            except (BotoCoreError, ClientError, OSError) as exc:
                with self._lock:
                    self.upload_errors.append((key, " ".join(str(exc).split())))


def _execution_timeout(values: Any) -> float:
    """The agent clamps executionTimeout to [5, 172800] and uses 3600 when it is unreadable."""
    raw = values[0] if isinstance(values, list) and values else values
    try:
        seconds = int(str(raw))
    except ValueError:
        return 3600.0
    return float(min(max(seconds, 5), 172_800))


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _killpg(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
